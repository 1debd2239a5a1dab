/* SQL of evaluations, runs, jobs and completion events; see evals.h. */
#include "store/evals.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/trace.h"
#include "common/util.h"
#include "store/batches.h"
#include "store/db.h"

#define I64(buf, v) snprintf(buf, sizeof(buf), "%lld", (long long)(v))

void evd_store_eval_clear(struct evd_store_eval *e)
{
    json_decref(e->request);
    json_decref(e->report);
    free(e->error);
    memset(e, 0, sizeof(*e));
}

/* Compact text of a value for a jsonb parameter (NULL for NULL), in a buffer of exactly
 * its size: reports and plans are large, and every run writes six (common/json.h). */
static char *dump_or_null(const json_t *v)
{
    return evd_json_compact(v, NULL);
}

/* Appends o (stolen; NULL when it could not be made) to the array *a of a batch's
 * parameter; without memory the array is dropped (*a NULL), and so is what comes after. */
static void append(json_t **a, json_t *o)
{
    if (*a != NULL && (o == NULL || json_array_append_new(*a, o) != 0)) {
        json_decref(*a);
        *a = NULL;
    } else if (*a == NULL) {
        json_decref(o);
    }
}

/* The text of a batch's array parameter (malloc'd; NULL without memory); drops it. */
static char *array_text(json_t *a)
{
    char *text = a != NULL ? dump_or_null(a) : NULL;
    json_decref(a);
    return text;
}

void evd_store_job_clear(struct evd_store_job *job)
{
    if (job == NULL)
        return;
    free(job->request);
    job->request = NULL;
}

enum evd_code evd_store_evals_create(PGconn *c, const struct evd_store_new_eval *items, size_t n,
                                     int64_t now, const char *owner, int *enqueued,
                                     struct evd_store_claims *claims, struct evd_err *err)
{
    for (size_t i = 0; enqueued != NULL && i < n; i++)
        enqueued[i] = 0;
    json_t *array = json_array();
    for (size_t i = 0; array != NULL && i < n; i++) {
        const struct evd_store_new_eval *it = &items[i];
        append(&array, json_pack("{s:s, s:O, s:i, s:s, s:O}", "id", it->id, "request",
                                 it->request, "concurrency", it->concurrency, "source",
                                 it->source_id ? it->source_id : "", "runs", it->runs));
    }
    char *text = array_text(array);
    if (text == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    char now_s[32], want[16], lease[32], max[16];
    I64(now_s, now);
    evd_store_claims_params(claims, want, lease, max);
    const char *p[] = {text, now_s, owner ? owner : "", want, lease, max};
    int64_t sent = evd_mono_ms();
    PGresult *r = evd_db_query(c,
                               "SELECT * FROM evald_create_many($1::jsonb, $2::bigint, $3,"
                               " $4::int, $5::bigint, $6::int)",
                               6, p, err);
    free(text);
    if (r == NULL)
        return evd_db_code(err);
    evd_store_batch_rows(r, 2, n, enqueued, NULL, claims, sent);
    PQclear(r);
    return EVD_OK;
}

enum evd_code evd_store_eval_insert(PGconn *c, const char *id, const json_t *request,
                                    int concurrency, const json_t *runs, const char *source_id,
                                    int64_t now, const char *owner, int *enqueued,
                                    struct evd_err *err)
{
    const struct evd_store_new_eval item = {id, request, concurrency, runs, source_id};
    int n = 0;
    enum evd_code rc = evd_store_evals_create(c, &item, 1, now, owner, &n, NULL, err);
    if (enqueued != NULL)
        *enqueued = n;
    return rc;
}

static const char SQL_EVAL_GET[] =
    "SELECT id, status, request, report, step, concurrency, total_runs, terminal_runs,"
    " passed_runs, failed_runs, eligible, error, coalesce(source_evaluation_id, ''),"
    " created_at, updated_at, completed_at, derivation IS NOT DISTINCT FROM 'rescore'"
    " FROM evaluations WHERE id = $1";

enum evd_code evd_store_eval_get(PGconn *c, const char *id, bool lock,
                                 struct evd_store_eval *out, struct evd_err *err)
{
    memset(out, 0, sizeof(*out));
    PGresult *r = evd_db_get_row(c, SQL_EVAL_GET, lock, id, "evaluation", err);
    if (r == NULL)
        return evd_db_code(err);
    snprintf(out->id, sizeof(out->id), "%s", PQgetvalue(r, 0, 0));
    snprintf(out->status, sizeof(out->status), "%s", PQgetvalue(r, 0, 1));
    out->request = evd_db_col_json(r, 0, 2);
    out->report = evd_db_col_json(r, 0, 3);
    out->step = evd_db_col_i64(r, 0, 4);
    out->concurrency = (int)evd_db_col_i64(r, 0, 5);
    out->total_runs = (int)evd_db_col_i64(r, 0, 6);
    out->terminal_runs = (int)evd_db_col_i64(r, 0, 7);
    out->passed_runs = (int)evd_db_col_i64(r, 0, 8);
    out->failed_runs = (int)evd_db_col_i64(r, 0, 9);
    out->eligible = PQgetisnull(r, 0, 10) ? -1 : PQgetvalue(r, 0, 10)[0] == 't';
    out->error = PQgetisnull(r, 0, 11) ? NULL : strdup(PQgetvalue(r, 0, 11));
    snprintf(out->source_id, sizeof(out->source_id), "%s", PQgetvalue(r, 0, 12));
    out->created_at = evd_db_col_i64(r, 0, 13);
    out->updated_at = evd_db_col_i64(r, 0, 14);
    out->completed_at = evd_db_col_i64(r, 0, 15);
    out->rescore = PQgetvalue(r, 0, 16)[0] == 't';
    PQclear(r);
    if (out->request == NULL) {
        evd_store_eval_clear(out);
        return evd_err_set(err, EVD_EINTERNAL, "stored request of %s cannot be decoded", id);
    }
    return EVD_OK;
}

enum evd_code evd_store_eval_state(PGconn *c, const char *id, bool lock,
                                   struct evd_store_eval_state *out, struct evd_err *err)
{
    const char *p[] = {id};
    PGresult *r = evd_db_query(c,
                               lock ? "SELECT status, concurrency FROM evaluations WHERE id = $1"
                                      " FOR UPDATE"
                                    : "SELECT status, concurrency FROM evaluations WHERE id = $1",
                               1, p, err);
    if (r == NULL)
        return evd_db_code(err);
    if (PQntuples(r) == 0) {
        PQclear(r);
        return evd_err_set(err, EVD_ENOTFOUND, "evaluation not found: %s", id);
    }
    snprintf(out->status, sizeof(out->status), "%s", PQgetvalue(r, 0, 0));
    out->concurrency = (int)evd_db_col_i64(r, 0, 1);
    PQclear(r);
    return EVD_OK;
}

static const char SQL_RUNS[] =
    "SELECT position, run_id, role, iteration, pair_position, session_id, status, attempt,"
    " passed, turn_id, output, evaluation, benchmark, metrics, failures, started_at,"
    " completed_at, CASE WHEN $2 THEN transcript END"
    " FROM runs WHERE evaluation_id = $1 ORDER BY position";

/* A run as the report and the API read it, from columns col.. of row i: SQL_RUNS's from
 * its first. New reference, or NULL without memory. */
static json_t *run_of_row(PGresult *r, int i, int col, bool extras)
{
    json_t *run = json_pack(
        "{s:s, s:s, s:I, s:s, s:I, s:I, s:s, s:I}", "run_id", PQgetvalue(r, i, col + 1), "role",
        PQgetvalue(r, i, col + 2), "iteration", (json_int_t)evd_db_col_i64(r, i, col + 3),
        "session_id", PQgetvalue(r, i, col + 5), "execution_position",
        (json_int_t)evd_db_col_i64(r, i, col + 0), "pair_position",
        (json_int_t)evd_db_col_i64(r, i, col + 4), "status", PQgetvalue(r, i, col + 6),
        "started_at", (json_int_t)evd_db_col_i64(r, i, col + 15));
    if (run == NULL)
        return NULL;
    if (!PQgetisnull(r, i, col + 8))
        json_object_set_new(run, "passed", json_boolean(PQgetvalue(r, i, col + 8)[0] == 't'));
    if (!PQgetisnull(r, i, col + 9))
        json_object_set_new(run, "turn_id", json_string(PQgetvalue(r, i, col + 9)));
    static const struct {
        int col;
        const char *key;
    } js[] = {{10, "output"}, {11, "evaluation"}, {12, "benchmark"}, {13, "metrics"}};
    for (size_t k = 0; k < sizeof(js) / sizeof(js[0]); k++) {
        json_t *v = evd_db_col_json(r, i, col + js[k].col);
        if (v != NULL)
            json_object_set_new(run, js[k].key, v);
    }
    json_t *failures = evd_db_col_json(r, i, col + 14);
    json_object_set_new(run, "failures", failures ? failures : json_array());
    if (!PQgetisnull(r, i, col + 16))
        json_object_set_new(run, "completed_at", json_integer(evd_db_col_i64(r, i, col + 16)));
    if (extras) {
        json_object_set_new(run, "attempt", json_integer(evd_db_col_i64(r, i, col + 7)));
        json_t *t = evd_db_col_json(r, i, col + 17);
        if (t != NULL) {
            json_t *g = json_object_get(t, "generations");
            json_t *f = json_object_get(t, "function_calls");
            if (g)
                json_object_set(run, "generations", g);
            if (f)
                json_object_set(run, "function_calls", f);
            json_decref(t);
        }
    }
    return run;
}

void evd_store_runs_trace_ids(json_t *runs, const char *owner_id)
{
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run)
    {
        json_int_t attempt = json_integer_value(json_object_get(run, "attempt"));
        const char *run_id = json_string_value(json_object_get(run, "run_id"));
        if (attempt > 0 && run_id != NULL) {
            char hex[33];
            evd_trace_id_for_run(owner_id, run_id, (int)attempt, hex);
            json_object_set_new(run, "trace_id", json_string(hex));
        } else {
            json_object_set_new(run, "trace_id", json_null());
        }
    }
}

json_t *evd_store_runs(PGconn *c, const char *id, bool extras, struct evd_err *err)
{
    const char *p[] = {id, extras ? "true" : "false"};
    PGresult *r = evd_db_query(c, SQL_RUNS, 2, p, err);
    if (r == NULL)
        return NULL;
    json_t *runs = json_array();
    for (int i = 0; runs != NULL && i < PQntuples(r); i++)
        json_array_append_new(runs, run_of_row(r, i, 0, extras));
    PQclear(r);
    if (runs == NULL)
        evd_err_set(err, EVD_ENOMEM, "out of memory");
    else if (extras)
        evd_store_runs_trace_ids(runs, id);
    return runs;
}

/* A PostgreSQL array literal of ids[0..n) (malloc'd), each element quoted. */
static char *text_array(const char *const *ids, size_t n)
{
    struct evd_buf b = {0};
    int rc = evd_buf_append(&b, "{", 1);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = (i > 0 ? evd_buf_append(&b, ",", 1) : 0) || evd_buf_append(&b, "\"", 1);
        for (const char *q = ids[i]; rc == 0 && *q; q++)
            rc = ((*q == '"' || *q == '\\') ? evd_buf_append(&b, "\\", 1) : 0) ||
                 evd_buf_append(&b, q, 1);
        if (rc == 0)
            rc = evd_buf_append(&b, "\"", 1);
    }
    if (rc == 0)
        rc = evd_buf_append(&b, "}", 1); /* evd_buf keeps it NUL-terminated */
    if (rc != 0) {
        evd_buf_free(&b);
        return NULL;
    }
    return b.data;
}

enum evd_code evd_store_finals_take(PGconn *c, const char *const *ids, size_t n,
                                    struct evd_store_eval *out, size_t *taken,
                                    struct evd_err *err)
{
    *taken = 0;
    char *array = text_array(ids, n);
    if (array == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    const char *p[] = {array};
    PGresult *r = evd_db_query(c, "SELECT * FROM evald_finalize_take($1::text[])", 1, p, err);
    free(array);
    if (r == NULL)
        return evd_db_code(err);
    enum evd_code rc = EVD_OK;
    for (int i = 0; i < PQntuples(r) && (size_t)i < n; i++) {
        struct evd_store_eval *ev = &out[*taken];
        memset(ev, 0, sizeof(*ev));
        snprintf(ev->id, sizeof(ev->id), "%s", PQgetvalue(r, i, 0));
        snprintf(ev->status, sizeof(ev->status), "running");
        ev->created_at = evd_db_col_i64(r, i, 1);
        ev->error = PQgetisnull(r, i, 2) ? NULL : strdup(PQgetvalue(r, i, 2));
        ev->request = evd_db_col_json(r, i, 3);
        ev->total_runs = (int)evd_db_col_i64(r, i, 4);
        if (ev->request == NULL) {
            evd_store_eval_clear(ev);
            rc = evd_err_set(err, EVD_EINTERNAL, "stored request of %s cannot be decoded",
                             PQgetvalue(r, i, 0));
            break;
        }
        (*taken)++;
    }
    PQclear(r);
    return rc;
}

static const char SQL_RUNS_MANY[] =
    "SELECT evaluation_id, position, run_id, role, iteration, pair_position, session_id,"
    " status, attempt, passed, turn_id, output, evaluation, benchmark, metrics, failures,"
    " started_at, completed_at FROM runs WHERE evaluation_id = ANY($1::text[])"
    " ORDER BY evaluation_id, position";

enum evd_code evd_store_runs_many(PGconn *c, const char *const *ids, size_t n, json_t **runs,
                                  struct evd_err *err)
{
    for (size_t i = 0; i < n; i++)
        runs[i] = NULL;
    char *array = text_array(ids, n);
    if (array == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    const char *p[] = {array};
    PGresult *r = evd_db_query(c, SQL_RUNS_MANY, 1, p, err);
    free(array);
    if (r == NULL)
        return evd_db_code(err);
    enum evd_code rc = EVD_OK;
    for (size_t i = 0; i < n && rc == EVD_OK; i++)
        if ((runs[i] = json_array()) == NULL)
            rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
    for (int k = 0; k < PQntuples(r) && rc == EVD_OK; k++) {
        const char *id = PQgetvalue(r, k, 0);
        for (size_t i = 0; i < n; i++)
            if (strcmp(ids[i], id) == 0) {
                json_t *run = run_of_row(r, k, 1, false);
                if (run == NULL || json_array_append_new(runs[i], run) != 0)
                    rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
                break;
            }
    }
    PQclear(r);
    if (rc != EVD_OK)
        for (size_t i = 0; i < n; i++) {
            json_decref(runs[i]);
            runs[i] = NULL;
        }
    return rc;
}

enum evd_code evd_store_run_state(PGconn *c, const char *id, int position,
                                  struct evd_store_run_state *out, struct evd_err *err)
{
    char pos[16];
    I64(pos, position);
    const char *p[] = {id, pos};
    PGresult *r = evd_db_query(
        c, "SELECT status, attempt, started_at FROM runs WHERE evaluation_id = $1 AND position = $2",
        2, p, err);
    if (r == NULL)
        return evd_db_code(err);
    if (PQntuples(r) == 0) {
        PQclear(r);
        return evd_err_set(err, EVD_ENOTFOUND, "run %d of %s not found", position, id);
    }
    snprintf(out->status, sizeof(out->status), "%s", PQgetvalue(r, 0, 0));
    out->attempt = (int)evd_db_col_i64(r, 0, 1);
    out->started_at = evd_db_col_i64(r, 0, 2);
    PQclear(r);
    return EVD_OK;
}

static const char SQL_RUN_START[] =
    "WITH r AS (UPDATE runs SET status = 'running', attempt = $3::int, started_at = $4::bigint,"
    "  completed_at = NULL, progress = NULL WHERE evaluation_id = $1 AND position = $2::int"
    "  RETURNING 1),"
    " e AS (UPDATE evaluations SET updated_at = $4::bigint,"
    "  status = CASE WHEN status = 'queued' THEN 'running' ELSE status END"
    "  WHERE id = $1 RETURNING 1)"
    " SELECT pg_notify('" EVD_CHANNEL_EVENTS "', $1)";

enum evd_code evd_store_run_start(PGconn *c, const char *id, int position, int attempt,
                                  int64_t now, struct evd_err *err)
{
    char pos[16], att[16], ts[32];
    I64(pos, position);
    I64(att, attempt);
    I64(ts, now);
    const char *p[] = {id, pos, att, ts};
    return evd_db_exec(c, SQL_RUN_START, 4, p, err);
}

enum evd_code evd_store_run_finish(PGconn *c, const char *id, int position, int attempt,
                                   const json_t *run, const json_t *transcript, int64_t now,
                                   int *result, int64_t *job_left, struct evd_err *err)
{
    *result = EVD_RUN_NOT_WRITTEN;
    *job_left = 0;
    char *record = evd_store_finish_record(id, position, attempt, run, transcript);
    if (record == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    char now_s[32];
    I64(now_s, now);
    const char *p[] = {record, now_s};
    /* A batch of one: the writer's statement (migrations/0019). */
    PGresult *r = evd_db_query(c,
                               "SELECT o_result, o_job_left FROM"
                               " evald_finish_runs(jsonb_build_array($1::jsonb), $2::bigint)",
                               2, p, err);
    free(record);
    if (r == NULL)
        return evd_db_code(err);
    if (PQntuples(r) == 1 && PQnfields(r) == 2) {
        *result = (int)evd_db_col_i64(r, 0, 0);
        *job_left = evd_db_col_i64(r, 0, 1);
    }
    PQclear(r);
    return EVD_OK;
}

char *evd_store_finish_record(const char *id, int position, int attempt, const json_t *run,
                              const json_t *transcript)
{
    static const char *const keys[] = {"status",    "passed",  "output",       "evaluation",
                                       "benchmark", "metrics", "failures",     "completed_at",
                                       "turn_id",   "started_at"};
    json_t *rec = json_pack("{s:s, s:i, s:i}", "evaluation_id", id, "position", position,
                            "attempt", attempt);
    if (rec == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        json_t *v = json_object_get(run, keys[i]);
        if (v != NULL && !(strcmp(keys[i], "passed") == 0 && !json_is_boolean(v)))
            json_object_set(rec, keys[i], v);
    }
    if (transcript != NULL)
        json_object_set(rec, "transcript", (json_t *)transcript);
    char *text = evd_json_compact(rec, NULL);
    json_decref(rec);
    return text;
}

enum evd_code evd_store_schedule(PGconn *c, const char *id, int concurrency, int *result,
                                 struct evd_err *err)
{
    char conc[16];
    I64(conc, concurrency);
    const char *p[] = {id, conc};
    PGresult *r = evd_db_query(c, "SELECT evald_schedule($1, $2::int)", 2, p, err);
    if (r == NULL)
        return evd_db_code(err);
    *result = PQntuples(r) == 1 ? (int)evd_db_col_i64(r, 0, 0) : 0;
    PQclear(r);
    return EVD_OK;
}

enum evd_code evd_store_run_progress(PGconn *c, const char *id, int position, int attempt,
                                     const json_t *metrics, struct evd_err *err)
{
    char pos[16], att[16];
    I64(pos, position);
    I64(att, attempt);
    char *m = dump_or_null(metrics);
    if (m == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    const char *p[] = {id, pos, att, m, EVD_CHANNEL_EVENTS};
    enum evd_code rc = evd_db_exec(
        c,
        "WITH u AS (UPDATE runs SET progress = $4::jsonb WHERE evaluation_id = $1"
        " AND position = $2::int AND attempt = $3::int AND status = 'running'"
        " RETURNING session_id)"
        " SELECT pg_notify($5, u.session_id) FROM u",
        5, p, err);
    free(m);
    return rc;
}

enum evd_code evd_store_runs_cancel_open(PGconn *c, const char *id, const json_t *failure,
                                         int64_t now, struct evd_err *err)
{
    char *f = json_dumps(failure, JSON_COMPACT);
    char ts[32];
    I64(ts, now);
    const char *p[] = {id, f, ts};
    enum evd_code rc = evd_db_exec(
        c,
        "UPDATE runs SET status = 'cancelled', passed = NULL, completed_at = $3::bigint,"
        " failures = failures || jsonb_build_array($2::jsonb)"
        " WHERE evaluation_id = $1 AND status IN ('pending', 'running')",
        3, p, err);
    free(f);
    return rc;
}

/* The run counters of evaluation $1, recounted. */
#define SQL_COUNTS                                                                                 \
    "SELECT count(*) FILTER (WHERE status IN ('completed', 'failed', 'cancelled')) AS terminal,"  \
    " count(*) FILTER (WHERE passed) AS passed,"                                                   \
    " count(*) FILTER (WHERE passed = false AND status IN ('completed', 'failed', 'cancelled'))"   \
    " AS failed FROM runs WHERE evaluation_id = $1"

enum evd_code evd_store_eval_touch(PGconn *c, const char *id, bool advance_step, int64_t now,
                                   struct evd_err *err)
{
    char ts[32];
    I64(ts, now);
    const char *p[] = {id, advance_step ? "1" : "0", ts};
    return evd_db_exec(c,
                       "UPDATE evaluations e SET step = step + $2::int, updated_at = $3::bigint,"
                       " terminal_runs = s.terminal, passed_runs = s.passed, failed_runs = s.failed"
                       " FROM (" SQL_COUNTS ") s WHERE e.id = $1",
                       3, p, err);
}

enum evd_code evd_store_evals_finish(PGconn *c, const struct evd_store_final *items, size_t n,
                                     int64_t now, struct evd_err *err)
{
    json_t *array = json_array();
    for (size_t i = 0; array != NULL && i < n; i++) {
        const struct evd_store_final *f = &items[i];
        json_t *payload = json_pack("{s:s, s:s, s:I}", "evaluation_id", f->id, "status",
                                    f->status, "timestamp", (json_int_t)now);
        if (payload != NULL && f->eligible_event >= 0)
            json_object_set_new(payload, "eligible", json_boolean(f->eligible_event));
        char event_id[48];
        evd_new_id("evt_", event_id, sizeof(event_id));
        append(&array, payload == NULL
                           ? NULL
                           : json_pack("{s:s, s:s, s:O, s:o, s:s, s:o}", "id", f->id, "status",
                                       f->status, "report", f->report, "eligible",
                                       f->eligible < 0 ? json_null() : json_boolean(f->eligible),
                                       "event_id", event_id, "payload", payload));
    }
    char *text = array_text(array);
    if (text == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    char ts[32];
    I64(ts, now);
    const char *p[] = {text, ts};
    enum evd_code rc =
        evd_db_exec(c, "SELECT evald_finish_evals($1::jsonb, $2::bigint)", 2, p, err);
    free(text);
    return rc;
}

enum evd_code evd_store_eval_delete(PGconn *c, const char *id, bool *deleted,
                                    struct evd_err *err)
{
    const char *p[] = {id};
    PGresult *r = evd_db_query(c, "DELETE FROM evaluations WHERE id = $1", 1, p, err);
    if (r == NULL)
        return evd_db_code(err);
    *deleted = atoi(PQcmdTuples(r)) == 1;
    PQclear(r);
    return evd_db_exec(c, "DELETE FROM jobs WHERE evaluation_id = $1", 1, p, err);
}

static const char SQL_STATUS[] =
    "SELECT jsonb_strip_nulls(jsonb_build_object("
    " 'evaluation_id', e.id, 'status', e.status, 'total_runs', e.total_runs,"
    " 'terminal_runs', e.terminal_runs, 'passed_runs', e.passed_runs,"
    " 'failed_runs', e.failed_runs, 'created_at', e.created_at, 'updated_at', e.updated_at,"
    " 'completed_at', e.completed_at, 'error', e.error, 'active',"
    " CASE WHEN a.run_id IS NOT NULL THEN jsonb_build_object('run_id', a.run_id, 'role', a.role,"
    "  'iteration', a.iteration, 'session_id', a.session_id, 'turn_id', a.turn_id,"
    "  'started_at', a.started_at) END))::text"
    " FROM evaluations e LEFT JOIN LATERAL (SELECT run_id, role, iteration, session_id, turn_id,"
    "  started_at FROM runs WHERE evaluation_id = e.id AND status = 'running'"
    "  ORDER BY position LIMIT 1) a ON true WHERE e.id = $1";

json_t *evd_store_eval_status(PGconn *c, const char *id, struct evd_err *err)
{
    const char *p[] = {id};
    PGresult *r = evd_db_query(c, SQL_STATUS, 1, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = PQntuples(r) ? json_loads(PQgetvalue(r, 0, 0), 0, NULL) : NULL;
    if (PQntuples(r) == 0)
        evd_err_set(err, EVD_ENOTFOUND, "evaluation not found: %s", id);
    PQclear(r);
    return out;
}

static const char SQL_LIST[] =
    "SELECT jsonb_strip_nulls(jsonb_build_object("
    " 'evaluation_id', id, 'status', status, 'dimension', request->>'dimension',"
    " 'model', request->'model'->>'model', 'provider', request->'model'->>'provider',"
    " 'control_label', request->'control'->>'label',"
    " 'treatment_label', request->'treatment'->>'label', 'total_runs', total_runs,"
    " 'terminal_runs', terminal_runs, 'passed_runs', passed_runs, 'failed_runs', failed_runs,"
    " 'eligible', eligible, 'created_at', created_at, 'updated_at', updated_at,"
    " 'completed_at', completed_at, 'error', error))::text, created_at, id"
    " FROM evaluations WHERE $2::bigint IS NULL OR (created_at, id) < ($2::bigint, $3)"
    " ORDER BY created_at DESC, id DESC LIMIT $1::int + 1";

json_t *evd_store_eval_list(PGconn *c, unsigned limit, const char *before, char **next_cursor,
                            struct evd_err *err)
{
    *next_cursor = NULL;
    char lim[16], ts[32] = "", bid[64] = "";
    I64(lim, limit);
    if (before != NULL) {
        const char *us = strchr(before, '_');
        if (us == NULL || us == before || (size_t)(us - before) >= sizeof(ts) ||
            strspn(before, "0123456789") != (size_t)(us - before)) {
            evd_err_set(err, EVD_EINVAL, "before must be a cursor returned as next_cursor");
            return NULL;
        }
        snprintf(ts, sizeof(ts), "%.*s", (int)(us - before), before);
        snprintf(bid, sizeof(bid), "%s", us + 1);
    }
    const char *p[] = {lim, before ? ts : NULL, before ? bid : NULL};
    PGresult *r = evd_db_query(c, SQL_LIST, 3, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = json_array();
    int n = PQntuples(r);
    for (int i = 0; i < n && (unsigned)i < limit; i++)
        json_array_append_new(out, json_loads(PQgetvalue(r, i, 0), 0, NULL));
    if ((unsigned)n > limit) {
        char cur[128];
        snprintf(cur, sizeof(cur), "%s_%s", PQgetvalue(r, (int)limit - 1, 1),
                 PQgetvalue(r, (int)limit - 1, 2));
        *next_cursor = strdup(cur);
    }
    PQclear(r);
    return out;
}

enum evd_code evd_store_job_claim_start(PGconn *c, const char *owner, long lease_ms,
                                        int64_t now, int max_attempts,
                                        struct evd_store_job *out,
                                        enum evd_claim_outcome *outcome, int *attempt,
                                        struct evd_err *err)
{
    *outcome = EVD_CLAIM_NONE;
    *attempt = 0;
    out->request = NULL;
    char lease[32], ts[32], max[16];
    I64(lease, lease_ms);
    I64(ts, now);
    I64(max, max_attempts);
    const char *p[] = {owner, lease, ts, max};
    out->claimed_mono = evd_mono_ms();
    PGresult *r =
        evd_db_query(c, "SELECT * FROM evald_claim($1, $2::bigint, $3::bigint, $4::int)", 4, p, err);
    if (r == NULL)
        return evd_db_code(err);
    if (PQntuples(r) != 1 || PQnfields(r) != 11) {
        evd_err_set(err, EVD_EDB, "evald_claim answered %d rows of %d columns, not 1 of 11",
                    PQntuples(r), PQnfields(r));
        PQclear(r);
        return EVD_EDB;
    }
    enum evd_code rc = evd_store_claim_row(r, 0, 0, out, outcome, attempt, err);
    if (rc == EVD_OK && *outcome != EVD_CLAIM_NONE)
        out->more = strcmp(PQgetvalue(r, 0, 10), "t") == 0;
    PQclear(r);
    return rc;
}

enum evd_code evd_store_job_delete(PGconn *c, int64_t job_id, struct evd_err *err)
{
    char id[32];
    I64(id, job_id);
    const char *p[] = {id};
    return evd_db_exec(c, "DELETE FROM jobs WHERE id = $1::bigint", 1, p, err);
}

enum evd_code evd_store_jobs_delete_eval(PGconn *c, const char *id, struct evd_err *err)
{
    const char *p[] = {id};
    return evd_db_exec(c, "DELETE FROM jobs WHERE evaluation_id = $1", 1, p, err);
}

enum evd_code evd_store_jobs_renew(PGconn *c, const char *owner, const int64_t *ids, size_t n,
                                   long lease_ms, enum evd_lease_state *state,
                                   struct evd_err *err)
{
    struct evd_buf arr = {0};
    evd_buf_append(&arr, "{", 1);
    for (size_t i = 0; i < n; i++)
        evd_buf_printf(&arr, "%s%lld", i ? "," : "", (long long)ids[i]);
    if (evd_buf_append(&arr, "}", 1) != 0) {
        evd_buf_free(&arr);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    char lease[32];
    I64(lease, lease_ms);
    const char *p[] = {owner, arr.data, lease};
    PGresult *r = evd_db_query(c, "SELECT o_id, o_renewed FROM evald_renew($1, $2::bigint[],"
                                  " $3::bigint)",
                               3, p, err);
    evd_buf_free(&arr);
    if (r == NULL)
        return evd_db_code(err);
    for (size_t i = 0; i < n; i++)
        state[i] = EVD_LEASE_GONE;
    for (int k = 0; k < PQntuples(r); k++) {
        int64_t id = evd_db_col_i64(r, k, 0);
        bool renewed = strcmp(PQgetvalue(r, k, 1), "t") == 0;
        for (size_t i = 0; i < n; i++)
            if (ids[i] == id)
                state[i] = renewed ? EVD_LEASE_RENEWED : EVD_LEASE_HELD;
    }
    PQclear(r);
    return EVD_OK;
}

json_t *evd_store_stalled_evals(PGconn *c, struct evd_err *err)
{
    PGresult *r = evd_db_query(c,
                               "SELECT e.id FROM evaluations e WHERE e.status IN ('queued',"
                               " 'running') AND NOT EXISTS (SELECT 1 FROM jobs j WHERE"
                               " j.evaluation_id = e.id) LIMIT 500",
                               0, NULL, err);
    if (r == NULL)
        return NULL;
    json_t *out = json_array();
    for (int i = 0; i < PQntuples(r); i++)
        json_array_append_new(out, json_string(PQgetvalue(r, i, 0)));
    PQclear(r);
    return out;
}

json_t *evd_store_timed_out_runs(PGconn *c, int64_t now, struct evd_err *err)
{
    char ts[32];
    I64(ts, now);
    const char *p[] = {ts};
    PGresult *r = evd_db_query(
        c,
        "SELECT r.evaluation_id, r.position, r.attempt,"
        " (e.request->'limits'->'execution'->>'scenario_timeout_seconds')::bigint"
        " FROM runs r JOIN evaluations e ON e.id = r.evaluation_id"
        " WHERE r.status = 'running' AND e.status IN ('queued', 'running') AND r.started_at > 0"
        " AND r.started_at + 1000 * (e.request->'limits'->'execution'->>"
        "'scenario_timeout_seconds')::bigint < $1::bigint LIMIT 500",
        1, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = json_array();
    for (int i = 0; i < PQntuples(r); i++)
        json_array_append_new(out, json_pack("{s:s, s:I, s:I, s:I}", "evaluation_id",
                                             PQgetvalue(r, i, 0), "position",
                                             (json_int_t)evd_db_col_i64(r, i, 1), "attempt",
                                             (json_int_t)evd_db_col_i64(r, i, 2), "timeout_s",
                                             (json_int_t)evd_db_col_i64(r, i, 3)));
    PQclear(r);
    return out;
}

enum evd_code evd_store_notify(PGconn *c, const char *channel, const char *payload,
                               struct evd_err *err)
{
    const char *p[] = {channel, payload};
    return evd_db_exec(c, "SELECT pg_notify($1, $2)", 2, p, err);
}

static const char SQL_RUN_EVAL_OF_SESSION[] =
    "SELECT evaluation_id FROM runs WHERE session_id = $1";

enum evd_code evd_store_run_eval_of_session(PGconn *c, const char *session_id, char *id,
                                            size_t n, struct evd_err *err)
{
    const char *p[] = {session_id};
    id[0] = '\0';
    PGresult *r = evd_db_query(c, SQL_RUN_EVAL_OF_SESSION, 1, p, err);
    if (r == NULL)
        return evd_db_code(err);
    if (PQntuples(r) == 1)
        snprintf(id, n, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return EVD_OK;
}

enum evd_code evd_store_eval_rescore(PGconn *c, const char *source, const char *id,
                                     const json_t *request, const json_t *runs, int64_t now,
                                     const char *owner, int *rescored, int *enqueued,
                                     struct evd_err *err)
{
    *rescored = *enqueued = 0;
    char *req = dump_or_null(request);
    char *rs = dump_or_null(runs);
    char ts[32];
    I64(ts, now);
    enum evd_code rc = EVD_OK;
    PGresult *r = NULL;
    if (req == NULL || rs == NULL) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    const char *p[] = {source, id, req, rs, ts, owner ? owner : ""};
    r = evd_db_query(c,
                     "SELECT * FROM evald_evaluation_rescore($1, $2, $3::jsonb, $4::jsonb,"
                     " $5::bigint, $6)",
                     6, p, err);
    if (r == NULL) {
        rc = evd_db_code(err);
        goto out;
    }
    if (PQntuples(r) != 1 || PQnfields(r) != 2) {
        rc = evd_err_set(err, EVD_EDB, "evald_evaluation_rescore answered %d rows", PQntuples(r));
        goto out;
    }
    *rescored = (int)evd_db_col_i64(r, 0, 0);
    *enqueued = (int)evd_db_col_i64(r, 0, 1);
    if (*rescored == -1)
        rc = evd_err_set(err, EVD_ENOTFOUND, "evaluation not found: %s", source);
    else if (*rescored < 0)
        rc = evd_err_set(err, EVD_ECONFLICT,
                         "evaluation %s has not finished; only a finished evaluation can be "
                         "re-scored",
                         source);
out:
    PQclear(r);
    free(req);
    free(rs);
    return rc;
}

json_t *evd_store_run_stored(PGconn *c, const char *id, int position, struct evd_err *err)
{
    static const char *const cols[] = {"output", "metrics", "benchmark", "transcript"};
    char pos[16];
    I64(pos, position);
    const char *p[] = {id, pos};
    PGresult *r = evd_db_query(c,
                               "SELECT output, metrics, benchmark, transcript FROM runs"
                               " WHERE evaluation_id = $1 AND position = $2::int",
                               2, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = NULL;
    if (PQntuples(r) != 1)
        evd_err_set(err, EVD_ENOTFOUND, "run %d of %s not found", position, id);
    else
        out = evd_db_row_json_object(r, 0, cols, 4, err);
    PQclear(r);
    return out;
}
