/* SQL of experiments; see experiments.h and migrations/0010_experiments.sql. */
#include "store/experiments.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "store/evals.h"
#include "store/judgements.h"
#include "store/page.h"

#define I64(buf, v) snprintf(buf, sizeof(buf), "%lld", (long long)(v))

static char *dump(const json_t *v)
{
    return v != NULL ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

enum evd_code evd_store_dataset_lock_share(PGconn *c, const char *id, bool *found,
                                           struct evd_err *err)
{
    const char *p[] = {id};
    PGresult *r = evd_db_query(c, "SELECT 1 FROM datasets WHERE id = $1 FOR SHARE", 1, p, err);
    if (r == NULL)
        return evd_db_code(err);
    *found = PQntuples(r) == 1;
    PQclear(r);
    return EVD_OK;
}

json_t *evd_store_dataset_bodies(PGconn *c, const char *id, struct evd_err *err)
{
    const char *p[] = {id};
    PGresult *r = evd_db_query(
        c, "SELECT body::text FROM dataset_cases WHERE dataset_id = $1 ORDER BY position", 1, p,
        err);
    if (r == NULL)
        return NULL;
    json_t *out = json_array();
    for (int i = 0; out != NULL && i < PQntuples(r); i++) {
        json_t *v = evd_db_col_json(r, i, 0);
        if (v == NULL || json_array_append_new(out, v) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    PQclear(r);
    if (out == NULL)
        evd_err_set(err, EVD_ENOMEM, "out of memory");
    return out;
}

static const char SQL_CREATE[] =
    "INSERT INTO experiments (id, name, status, request, dataset_id, dataset_sha256, arms,"
    " repeats, concurrency, case_count, total_runs, analysis, created_at, updated_at,"
    " stop_rule, budget)"
    " VALUES ($1, $2, 'queued', $3::jsonb, $4, $5, $6::int, $7::int, $8::int, $9::int,"
    " $9::int * $6::int * $7::int, $10::jsonb, $11::bigint, $11::bigint, $12, $13::jsonb)";

static const char SQL_CREATE_CASES[] =
    "INSERT INTO experiment_cases (experiment_id, case_index, case_id, body, cluster,"
    " dispatch_index)"
    " SELECT $1, d.position, d.case_id, d.body, k.cluster, coalesce(o.di, d.position)"
    " FROM dataset_cases d"
    " LEFT JOIN unnest($3::text[]) WITH ORDINALITY AS k(cluster, ord) ON k.ord = d.position"
    " LEFT JOIN unnest($4::int[]) WITH ORDINALITY AS o(di, ord) ON o.ord = d.position"
    " WHERE d.dataset_id = $2";

static const char SQL_CREATE_RUNS[] =
    "INSERT INTO experiment_runs (experiment_id, case_index, position, arm, repeat, run_id,"
    " session_id)"
    " SELECT $1, c.case_index, p.position, p.arm, p.repeat,"
    " 'case' || c.case_index || '-arm' || p.arm || '-rep' || p.repeat,"
    " $1 || '_' || c.case_index || '_' || p.arm || '_' || p.repeat"
    " FROM experiment_cases c,"
    " unnest($2::int[], $3::int[]) WITH ORDINALITY AS p(arm, repeat, position)"
    " WHERE c.experiment_id = $1";

enum evd_code evd_store_experiment_create(PGconn *c, const struct evd_store_experiment_new *x,
                                          const char *owner, struct evd_err *err)
{
    char arms[16], reps[16], conc[16], cases[16], ts[32];
    snprintf(arms, sizeof(arms), "%d", x->arms);
    snprintf(reps, sizeof(reps), "%d", x->repeats);
    snprintf(conc, sizeof(conc), "%d", x->concurrency);
    snprintf(cases, sizeof(cases), "%d", x->case_count);
    I64(ts, x->now);
    const char *p[] = {x->id, x->name, x->request,  x->dataset_id, x->sha256,
                       arms,  reps,    conc,        cases,         x->analysis,
                       ts,    x->stop_rule ? x->stop_rule : "fixed", x->budget};
    enum evd_code rc = evd_db_exec(c, SQL_CREATE, 13, p, err);
    if (rc != EVD_OK)
        return rc;
    const char *pc[] = {x->id, x->dataset_id, x->clusters, x->dispatch};
    if ((rc = evd_db_exec(c, SQL_CREATE_CASES, 4, pc, err)) != EVD_OK)
        return rc;
    const char *pr[] = {x->id, x->plan_arms, x->plan_repeats};
    if ((rc = evd_db_exec(c, SQL_CREATE_RUNS, 3, pr, err)) != EVD_OK)
        return rc;
    if (x->judge_orders > 0 &&
        (rc = evd_store_judgements_create(c, x->id, x->judge_orders, x->judge_repeats,
                                          x->judge_treatments, x->judge_order, err)) != EVD_OK)
        return rc;
    int scheduled = 0;
    return evd_store_experiment_schedule(c, x->id, owner, &scheduled, err);
}

enum evd_code evd_store_experiment_schedule(PGconn *c, const char *id, const char *owner,
                                            int *result, struct evd_err *err)
{
    const char *p[] = {id, owner ? owner : ""};
    PGresult *r = evd_db_query(c, "SELECT evald_experiment_schedule($1, $2)", 2, p, err);
    if (r == NULL)
        return evd_db_code(err);
    *result = PQntuples(r) == 1 ? atoi(PQgetvalue(r, 0, 0)) : 0;
    PQclear(r);
    return EVD_OK;
}

/* progress.judgements: the judge calls planned, answered, failed and left unjudged (a
 * pair without both outputs, a skipped or cancelled case); null without a judge. */
#define JUDGEMENTS_JSON                                                                     \
    "CASE WHEN x.judge_orders > 0 THEN (SELECT json_build_object('planned', count(*),"     \
    " 'judged', count(*) FILTER (WHERE g.status = 'completed'), 'failed', count(*)"        \
    " FILTER (WHERE g.status = 'failed'), 'unjudged', count(*) FILTER (WHERE g.status IN"  \
    " ('skipped', 'cancelled'))) FROM experiment_judgements g"                             \
    " WHERE g.experiment_id = x.id) END"

#define PROGRESS_JSON                                                                       \
    "json_build_object('total_runs', x.total_runs, 'terminal_runs',"                        \
    " x.terminal_runs + x.skipped_runs, 'passed_runs', x.passed_runs, 'failed_runs',"       \
    " x.failed_runs, 'skipped_runs', x.skipped_runs, 'judgements', " JUDGEMENTS_JSON ")"

/* Spend over the shards (migrations/0024); cost null when a run could not be priced. */
#define SPEND_JSON                                                                          \
    "(SELECT json_build_object('calls', coalesce(sum(s.calls), 0), 'input_tokens',"         \
    " coalesce(sum(s.input_tokens), 0), 'output_tokens', coalesce(sum(s.output_tokens), 0),"\
    " 'cost_usd', CASE WHEN coalesce(sum(s.unpriced), 0) > 0 THEN NULL"                     \
    " ELSE coalesce(sum(s.cost_usd), 0) END, 'budget', x.budget - 'reserve')"               \
    " FROM experiment_spend s WHERE s.experiment_id = x.id)"

#define ROW_JSON                                                                            \
    "json_build_object('experiment_id', x.id, 'name', x.name, 'status', x.status,"         \
    " 'created_at', x.created_at, 'updated_at', x.updated_at, 'completed_at',"             \
    " x.completed_at, 'request', x.request, 'dataset', json_build_object('dataset_id',"    \
    " x.dataset_id, 'sha256', x.dataset_sha256, 'case_count', x.case_count), 'progress', " \
    PROGRESS_JSON ", 'analysis', x.analysis, 'source_experiment_id', x.source_experiment_id,"  \
    " 'stopped', x.stopped, 'spend', " SPEND_JSON ","                                        \
    " 'derivation', x.derivation, 'retried_runs', x.retried_runs)::text"

#define SUMMARY_JSON                                                                        \
    "json_build_object('experiment_id', x.id, 'name', x.name, 'status', x.status,"         \
    " 'created_at', x.created_at, 'updated_at', x.updated_at, 'completed_at',"             \
    " x.completed_at, 'dataset_id', x.dataset_id, 'arms', x.arms, 'repeats', x.repeats,"  \
    " 'progress', " PROGRESS_JSON ")::text"

static json_t *one_json(PGconn *c, const char *sql, const char *id, const char *what,
                        struct evd_err *err)
{
    const char *p[] = {id};
    PGresult *r = evd_db_query(c, sql, 1, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = NULL;
    if (PQntuples(r) == 0)
        evd_err_set(err, EVD_ENOTFOUND, "%s not found: %s", what, id);
    else if ((out = evd_db_col_json(r, 0, 0)) == NULL)
        evd_err_set(err, EVD_EINTERNAL, "stored %s cannot be decoded", what);
    PQclear(r);
    return out;
}

json_t *evd_store_experiment_get(PGconn *c, const char *id, struct evd_err *err)
{
    return one_json(c, "SELECT " ROW_JSON " FROM experiments x WHERE x.id = $1", id,
                    "experiment", err);
}

json_t *evd_store_experiment_progress(PGconn *c, const char *id, struct evd_err *err)
{
    return one_json(c,
                    "SELECT json_build_object('experiment_id', x.id, 'status', x.status,"
                    " 'updated_at', x.updated_at, 'progress', " PROGRESS_JSON
                    ", 'analysis', json_build_object('partial',"
                    " x.status IN ('queued', 'running')))::text"
                    " FROM experiments x WHERE x.id = $1",
                    id, "experiment", err);
}

static const char SQL_LIST[] =
    "SELECT " SUMMARY_JSON ", x.created_at, x.id FROM experiments x"
    " WHERE $2::bigint IS NULL OR (x.created_at, x.id) < ($2::bigint, $3)"
    " ORDER BY x.created_at DESC, x.id DESC LIMIT $1::int + 1";

json_t *evd_store_experiment_list(PGconn *c, unsigned limit, const char *before,
                                  char **next_cursor, struct evd_err *err)
{
    return evd_store_page_list(c, SQL_LIST, limit, before, next_cursor, err);
}

/* Ascending pages (store/page.h) keyed by case index, or for runs by
 * case_index * 100000 + position. */
static const char SQL_CASES_PAGE[] =
    "SELECT NULL::text, -1::bigint AS k FROM experiments WHERE id = $1"
    " UNION ALL (SELECT json_build_object('case_id', e.case_id, 'case_index', e.case_index,"
    " 'vars', e.body->'vars', 'expected', e.body->'expected', 'metadata', e.body->'metadata',"
    " 'messages', e.body->'messages', 'tool_results', e.body->'tool_results',"
    " 'cluster', e.cluster, 'cells', e.cells, 'flaky', e.flaky, 'disagree', e.disagree,"
    " 'dispatch_index', e.dispatch_index, 'seq', e.seq, 'skipped', e.skipped)::text,"
    " e.case_index::bigint FROM experiment_cases e"
    " WHERE e.experiment_id = $1 AND ($3::bigint IS NULL OR e.case_index > $3::bigint)"
    " AND ($4::text IS NULL OR ($4 = 'flaky' AND e.flaky) OR ($4 = 'disagree' AND e.disagree))"
    " ORDER BY e.case_index LIMIT $2::int + 1) ORDER BY 2";

json_t *evd_store_experiment_cases(PGconn *c, const char *id, const char *filter,
                                   unsigned limit, const char *before, char **next_cursor,
                                   struct evd_err *err)
{
    return evd_store_page_ascending(c, SQL_CASES_PAGE, "experiment", id, filter, limit, before,
                                    next_cursor, err);
}

#define RUN_JSON(transcript)                                                                \
    "json_build_object('run_id', r.run_id, 'session_id', r.session_id, 'case_id',"         \
    " c.case_id, 'case_index', r.case_index, 'arm', r.arm, 'repeat', r.repeat,"            \
    " 'position', r.position, 'status', r.status, 'attempt', r.attempt, 'passed',"         \
    " r.passed, 'score', r.score, 'output', r.output, 'verdict', r.evaluation,"            \
    " 'metrics', coalesce(r.metrics, r.progress), 'benchmark', r.benchmark, 'failures',"  \
    " r.failures, 'started_at', r.started_at, 'completed_at', r.completed_at,"             \
    " 'retried_from', r.retried_from" transcript                                           \
    ")::text"

/* Runs keyed by case_index · 100000 + position (positions are at most 5 · EVALD_MAX_RUNS);
 * the page condition compares (case_index, position) as a row, which the primary key
 * serves (a comparison of the computed key read every run before the page). */
#define RUN_KEY "(r.case_index::bigint * 100000 + r.position)"

static const char SQL_RUNS_PAGE[] =
    "SELECT NULL::text, -1::bigint AS k FROM experiments WHERE id = $1"
    " UNION ALL (SELECT " RUN_JSON(", 'conversation', r.transcript->'conversation'") ", " RUN_KEY
    " FROM experiment_runs r"
    " JOIN experiment_cases c ON c.experiment_id = r.experiment_id"
    " AND c.case_index = r.case_index"
    " WHERE r.experiment_id = $1 AND ($4::text IS NULL OR c.case_id = $4)"
    " AND ($3::bigint IS NULL OR (r.case_index, r.position) >"
    " (($3::bigint / 100000)::int, ($3::bigint % 100000)::int))"
    " ORDER BY r.case_index, r.position LIMIT $2::int + 1) ORDER BY 2";

static const char SQL_RUNS_PAGE_T[] =
    "SELECT NULL::text, -1::bigint AS k FROM experiments WHERE id = $1"
    " UNION ALL (SELECT " RUN_JSON(", 'transcript', r.transcript") ", " RUN_KEY
    " FROM experiment_runs r"
    " JOIN experiment_cases c ON c.experiment_id = r.experiment_id"
    " AND c.case_index = r.case_index"
    " WHERE r.experiment_id = $1 AND ($4::text IS NULL OR c.case_id = $4)"
    " AND ($3::bigint IS NULL OR (r.case_index, r.position) >"
    " (($3::bigint / 100000)::int, ($3::bigint % 100000)::int))"
    " ORDER BY r.case_index, r.position LIMIT $2::int + 1) ORDER BY 2";

json_t *evd_store_experiment_runs(PGconn *c, const char *id, const char *case_id,
                                  unsigned limit, const char *before, bool with_transcript,
                                  char **next_cursor, struct evd_err *err)
{
    json_t *runs = evd_store_page_ascending(c, with_transcript ? SQL_RUNS_PAGE_T : SQL_RUNS_PAGE,
                                            "experiment", id, case_id, limit, before,
                                            next_cursor, err);
    evd_store_runs_trace_ids(runs, id);
    return runs;
}

enum evd_code evd_store_experiment_shape(PGconn *c, const char *id,
                                         struct evd_store_experiment_shape *out,
                                         struct evd_err *err)
{
    memset(out, 0, sizeof(*out));
    const char *p[] = {id};
    PGresult *r = evd_db_query(
        c,
        "SELECT request::text, arms, repeats, case_count, status,"
        " derivation IS NOT DISTINCT FROM 'rescore' FROM experiments WHERE id = $1",
        1, p, err);
    if (r == NULL)
        return evd_db_code(err);
    enum evd_code rc = EVD_OK;
    if (PQntuples(r) == 0) {
        rc = evd_err_set(err, EVD_ENOTFOUND, "experiment not found: %s", id);
    } else if ((out->request = strdup(PQgetvalue(r, 0, 0))) == NULL) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
    } else {
        out->arms = atoi(PQgetvalue(r, 0, 1));
        out->repeats = atoi(PQgetvalue(r, 0, 2));
        out->case_count = atoi(PQgetvalue(r, 0, 3));
        snprintf(out->status, sizeof(out->status), "%s", PQgetvalue(r, 0, 4));
        out->rescore = strcmp(PQgetvalue(r, 0, 5), "t") == 0;
    }
    PQclear(r);
    return rc;
}

void evd_store_experiment_shape_clear(struct evd_store_experiment_shape *s)
{
    free(s->request);
    s->request = NULL;
}

enum evd_code evd_store_cell_case(PGconn *c, const char *id, int case_index, json_t **body,
                                  json_t **runs, struct evd_err *err)
{
    char ci[16];
    snprintf(ci, sizeof(ci), "%d", case_index);
    const char *p[] = {id, ci};
    *body = *runs = NULL;
    PGresult *r = evd_db_query(
        c,
        "SELECT c.body::text, (SELECT coalesce(json_agg(json_build_object('position',"
        " r.position, 'arm', r.arm, 'repeat', r.repeat, 'status', r.status, 'passed', r.passed,"
        " 'benchmark', r.benchmark) ORDER BY r.position), '[]') FROM experiment_runs r"
        " WHERE r.experiment_id = c.experiment_id AND r.case_index = c.case_index"
        " AND r.status IN ('completed', 'failed', 'cancelled'))::text"
        " FROM experiment_cases c WHERE c.experiment_id = $1 AND c.case_index = $2::int",
        2, p, err);
    if (r == NULL)
        return evd_db_code(err);
    enum evd_code rc = EVD_OK;
    if (PQntuples(r) == 0) {
        rc = evd_err_set(err, EVD_ENOTFOUND, "case %d of %s not found", case_index, id);
    } else {
        *body = evd_db_col_json(r, 0, 0);
        *runs = evd_db_col_json(r, 0, 1);
        if (*body == NULL || *runs == NULL) {
            json_decref(*body);
            json_decref(*runs);
            *body = *runs = NULL;
            rc = evd_err_set(err, EVD_EINTERNAL, "stored case %d of %s cannot be decoded",
                             case_index, id);
        }
    }
    PQclear(r);
    return rc;
}

/* The text parameters of a finished cell: $6.. of evald_cell_step. */
struct done_params {
    char ci[16], pos[16], att[16];
    char *run, *transcript, *cells;
};

static bool done_params(const struct evd_store_cell_done *d, struct done_params *p)
{
    memset(p, 0, sizeof(*p));
    if (d == NULL)
        return true;
    snprintf(p->ci, sizeof(p->ci), "%d", d->case_index);
    snprintf(p->pos, sizeof(p->pos), "%d", d->position);
    snprintf(p->att, sizeof(p->att), "%d", d->attempt);
    if (d->judgement != NULL) {
        p->run = dump(d->judgement);
        p->cells = dump(d->judged);
        return p->run != NULL && p->cells != NULL;
    }
    p->run = dump(d->run);
    p->transcript = d->transcript ? dump(d->transcript) : NULL;
    p->cells = dump(d->cells);
    return p->run != NULL && p->cells != NULL && (d->transcript == NULL || p->transcript);
}

static void done_params_free(struct done_params *p)
{
    free(p->run);
    free(p->transcript);
    free(p->cells);
}

/* What evald_cell_next answers (o_outcome, o_position, o_attempt, o_schedule,
 * o_lease_left_ms, o_case, o_body, o_done) from column `col` of row `row`. */
static enum evd_code next_row(PGresult *r, int row, int col, struct evd_store_cell_next *next,
                              struct evd_err *err)
{
    const char *o = PQgetvalue(r, row, col);
    next->outcome = strcmp(o, "started") == 0           ? EVD_CELL_STARTED
                    : strcmp(o, "exhausted") == 0       ? EVD_CELL_EXHAUSTED
                    : strcmp(o, "judge") == 0           ? EVD_CELL_JUDGE
                    : strcmp(o, "judge_exhausted") == 0 ? EVD_CELL_JUDGE_EXHAUSTED
                    : strcmp(o, "done") == 0            ? EVD_CELL_DONE
                    : strcmp(o, "gone") == 0            ? EVD_CELL_GONE
                                                        : EVD_CELL_LOST;
    next->position = atoi(PQgetvalue(r, row, col + 1));
    next->attempt = atoi(PQgetvalue(r, row, col + 2));
    next->schedule = PQgetisnull(r, row, col + 3) ? 0 : atoi(PQgetvalue(r, row, col + 3));
    next->lease_left_ms = PQgetisnull(r, row, col + 4) ? 0 : evd_db_col_i64(r, row, col + 4);
    next->case_index = PQgetisnull(r, row, col + 5) ? 0 : atoi(PQgetvalue(r, row, col + 5));
    if (PQgetisnull(r, row, col + 6))
        return EVD_OK;
    next->body = evd_db_col_json(r, row, col + 6);
    next->done = evd_db_col_json(r, row, col + 7);
    if (next->body != NULL && next->done != NULL)
        return EVD_OK;
    json_decref(next->body);
    json_decref(next->done);
    next->body = next->done = NULL;
    return evd_err_set(err, EVD_EINTERNAL, "stored case %d cannot be decoded", next->case_index);
}

enum evd_code evd_store_cell_step(PGconn *c, int64_t job_id, const char *owner, long lease_ms,
                                  int64_t now, int max_attempts,
                                  const struct evd_store_cell_done *done,
                                  struct evd_store_cell_next *next, struct evd_err *err)
{
    char job[32], lease[32], ts[32], max[16];
    I64(job, job_id);
    I64(lease, lease_ms);
    I64(ts, now);
    snprintf(max, sizeof(max), "%d", max_attempts);
    struct done_params d;
    memset(next, 0, sizeof(*next));
    next->outcome = EVD_CELL_LOST;
    if (!done_params(done, &d)) {
        done_params_free(&d);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    const char *p[] = {job,
                       owner,
                       lease,
                       ts,
                       max,
                       done ? done->experiment_id : NULL,
                       done ? d.ci : NULL,
                       done ? d.pos : NULL,
                       done ? d.att : NULL,
                       d.run,
                       d.transcript,
                       d.cells,
                       done ? (done->flaky ? "t" : "f") : NULL,
                       done ? (done->disagree ? "t" : "f") : NULL};
    PGresult *r;
    if (done != NULL && done->judgement != NULL) {
        const char *pj[] = {job, owner, lease, ts, max, done->experiment_id, d.ci, d.pos, d.att,
                            d.run, d.cells};
        r = evd_db_query(c,
                         "SELECT * FROM evald_judge_step($1::bigint, $2, $3::bigint,"
                         " $4::bigint, $5::int, $6, $7::int, $8::int, $9::int, $10::jsonb,"
                         " $11::jsonb)",
                         11, pj, err);
    } else {
        r = evd_db_query(c,
                         "SELECT * FROM evald_cell_step($1::bigint, $2, $3::bigint,"
                         " $4::bigint, $5::int, $6, $7::int, $8::int, $9::int,"
                         " $10::jsonb, $11::jsonb, $12::jsonb, $13::boolean,"
                         " $14::boolean)",
                         14, p, err);
    }
    done_params_free(&d);
    if (r == NULL)
        return evd_db_code(err);
    enum evd_code rc = PQntuples(r) == 1 ? next_row(r, 0, 0, next, err) : EVD_OK;
    PQclear(r);
    return rc;
}

enum evd_code evd_store_cell_steps(PGconn *c, const char *owner, long lease_ms, int64_t now,
                                   int max_attempts, struct evd_store_cell_step_item *items,
                                   size_t n, struct evd_err *err)
{
    char lease[32], ts[32], max[16];
    I64(lease, lease_ms);
    I64(ts, now);
    snprintf(max, sizeof(max), "%d", max_attempts);
    json_t *steps = json_array();
    bool bad = steps == NULL;
    for (size_t i = 0; i < n && !bad; i++) {
        const struct evd_store_cell_done *d = items[i].done;
        memset(&items[i].next, 0, sizeof(items[i].next));
        items[i].next.outcome = EVD_CELL_LOST;
        json_t *s = json_pack("{s:I}", "job", (json_int_t)items[i].job_id);
        if (s != NULL && d != NULL)
            bad |= json_object_set_new(s, "exp", json_string(d->experiment_id)) != 0 ||
                   json_object_set_new(s, "case", json_integer(d->case_index)) != 0 ||
                   json_object_set_new(s, "position", json_integer(d->position)) != 0 ||
                   json_object_set_new(s, "attempt", json_integer(d->attempt)) != 0 ||
                   json_object_set(s, "run", (json_t *)d->run) != 0 ||
                   (d->transcript != NULL &&
                    json_object_set(s, "transcript", (json_t *)d->transcript) != 0) ||
                   json_object_set(s, "cells", (json_t *)d->cells) != 0 ||
                   json_object_set_new(s, "flaky", json_boolean(d->flaky)) != 0 ||
                   json_object_set_new(s, "disagree", json_boolean(d->disagree)) != 0;
        bad |= s == NULL || json_array_append_new(steps, s) != 0;
    }
    char *text = bad ? NULL : dump(steps);
    json_decref(steps);
    if (text == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    const char *p[] = {owner, lease, ts, max, text};
    PGresult *r = evd_db_query(c,
                               "SELECT * FROM evald_cell_steps($1, $2::bigint, $3::bigint,"
                               " $4::int, $5::jsonb)",
                               5, p, err);
    free(text);
    if (r == NULL)
        return evd_db_code(err);
    enum evd_code rc = EVD_OK;
    for (int row = 0; row < PQntuples(r) && rc == EVD_OK; row++) {
        int64_t job = evd_db_col_i64(r, row, 0);
        size_t i = 0;
        while (i < n && items[i].job_id != job)
            i++;
        if (i == n)
            rc = evd_err_set(err, EVD_EDB,
                             "evald_cell_steps answered for job %lld, which the batch did not"
                             " hold", (long long)job);
        else
            rc = next_row(r, row, 1, &items[i].next, err);
    }
    PQclear(r);
    for (size_t i = 0; i < n && rc != EVD_OK; i++) {
        json_decref(items[i].next.body);
        json_decref(items[i].next.done);
        items[i].next.body = items[i].next.done = NULL;
    }
    return rc;
}

enum evd_code evd_store_cell_finish(PGconn *c, const struct evd_store_cell_done *done,
                                    int64_t now, bool *written, struct evd_err *err)
{
    char ts[32];
    I64(ts, now);
    struct done_params d;
    *written = false;
    enum evd_code rc = EVD_OK;
    if (!done_params(done, &d)) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    const char *p[] = {done->experiment_id, d.ci, d.pos, d.att, d.run, d.transcript, d.cells,
                       done->flaky ? "t" : "f", done->disagree ? "t" : "f", ts};
    const char *pj[] = {done->experiment_id, d.ci, d.pos, d.att, d.run, d.cells, ts};
    PGresult *r =
        done->judgement != NULL
            ? evd_db_query(c,
                           "SELECT evald_judge_finish($1, $2::int, $3::int, $4::int,"
                           " $5::jsonb, $6::jsonb, $7::bigint)",
                           7, pj, err)
            : evd_db_query(c,
                           "SELECT evald_cell_finish($1, $2::int, $3::int, $4::int,"
                           " $5::jsonb, $6::jsonb, $7::jsonb, $8::boolean, $9::boolean,"
                           " $10::bigint)",
                           10, p, err);
    if (r == NULL) {
        rc = evd_db_code(err);
        goto out;
    }
    *written = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
out:
    done_params_free(&d);
    return rc;
}

/* Sets `column` (a jsonb column of the statement `sql`, $5) of a run while it runs with
 * `attempt`: its progress snapshot or its checkpoint. */
static enum evd_code set_running(PGconn *c, const char *sql, const char *id, int case_index,
                                 int position, int attempt, const json_t *value,
                                 struct evd_err *err)
{
    char ci[16], pos[16], att[16];
    snprintf(ci, sizeof(ci), "%d", case_index);
    snprintf(pos, sizeof(pos), "%d", position);
    snprintf(att, sizeof(att), "%d", attempt);
    char *m = dump(value);
    if (m == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    const char *p[] = {id, ci, pos, att, m};
    enum evd_code rc = evd_db_exec(c, sql, 5, p, err);
    free(m);
    return rc;
}

#define SET_RUNNING(column)                                                                    \
    "UPDATE experiment_runs SET " column " = $5::jsonb WHERE experiment_id = $1"               \
    " AND case_index = $2::int AND position = $3::int AND attempt = $4::int"                   \
    " AND status = 'running'"

enum evd_code evd_store_cell_progress(PGconn *c, const char *id, int case_index, int position,
                                      int attempt, const json_t *metrics, struct evd_err *err)
{
    return set_running(c, SET_RUNNING("progress"), id, case_index, position, attempt, metrics,
                       err);
}

enum evd_code evd_store_cell_checkpoint(PGconn *c, const char *id, int case_index, int position,
                                        int attempt, const json_t *checkpoint,
                                        struct evd_err *err)
{
    return set_running(c, SET_RUNNING("checkpoint"), id, case_index, position, attempt,
                       checkpoint, err);
}

json_t *evd_store_cell_checkpoint_get(PGconn *c, const char *id, int case_index, int position,
                                      struct evd_err *err)
{
    char ci[16], pos[16];
    snprintf(ci, sizeof(ci), "%d", case_index);
    snprintf(pos, sizeof(pos), "%d", position);
    const char *p[] = {id, ci, pos};
    PGresult *res = evd_db_query(c,
                                 "SELECT checkpoint::text FROM experiment_runs"
                                 " WHERE experiment_id = $1 AND case_index = $2::int"
                                 " AND position = $3::int",
                                 3, p, err);
    if (res == NULL)
        return NULL;
    json_t *cp = json_null();
    if (PQntuples(res) == 1 && !PQgetisnull(res, 0, 0)) {
        json_decref(cp);
        cp = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
        if (cp == NULL)
            evd_err_set(err, EVD_EINTERNAL, "a run's checkpoint is not JSON");
    }
    PQclear(res);
    return cp;
}

static const char SQL_HAND_BACK[] =
    "WITH j AS (SELECT id FROM jobs WHERE id = $1::bigint AND lease_owner = $2 FOR UPDATE),"
    " r AS (UPDATE experiment_runs SET status = 'pending', attempt = attempt - 1, started_at = 0"
    " WHERE experiment_id = $3 AND case_index = $4::int AND position = $5::int"
    " AND status = 'running' AND attempt = $6::int AND EXISTS (SELECT 1 FROM j) RETURNING 1)"
    " UPDATE jobs SET lease_owner = NULL, lease_until = NULL, due_at = now()"
    " WHERE id = (SELECT id FROM j)";

enum evd_code evd_store_cell_hand_back(PGconn *c, int64_t job_id, const char *owner,
                                       const char *id, int case_index, int position, int attempt,
                                       struct evd_err *err)
{
    char job[32], ci[16], pos[16], att[16];
    I64(job, job_id);
    snprintf(ci, sizeof(ci), "%d", case_index);
    snprintf(pos, sizeof(pos), "%d", position);
    snprintf(att, sizeof(att), "%d", attempt);
    const char *p[] = {job, owner, id, ci, pos, att};
    return evd_db_exec(c, SQL_HAND_BACK, 6, p, err);
}

json_t *evd_store_experiment_cells(PGconn *c, const char *id, int64_t after_seq,
                                   int after_case, int limit, struct evd_err *err)
{
    char af[32], ac[16], lim[16];
    I64(af, after_seq);
    snprintf(ac, sizeof(ac), "%d", after_case);
    snprintf(lim, sizeof(lim), "%d", limit);
    const char *p[] = {id, af, ac, lim};
    PGresult *r = evd_db_query(c,
                               "SELECT coalesce(json_agg(json_build_object('case_index',"
                               " case_index, 'cluster', cluster, 'cells', cells, 'judged', judged,"
                               " 'judge_unjudged', judge_unjudged,"
                               " 'changed_seq', changed_seq) ORDER BY case_index), '[]')::text"
                               " FROM (SELECT * FROM experiment_cases WHERE experiment_id = $1"
                               " AND ($2::bigint < 0 OR changed_seq > $2::bigint)"
                               " AND case_index > $3::int ORDER BY case_index LIMIT $4::int) k",
                               4, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = PQntuples(r) == 1 ? evd_db_col_json(r, 0, 0) : NULL;
    PQclear(r);
    if (out == NULL)
        evd_err_set(err, EVD_EINTERNAL, "stored cases of %s cannot be decoded", id);
    return out;
}

json_t *evd_store_experiment_cluster_keys(PGconn *c, const char *id, struct evd_err *err)
{
    const char *p[] = {id};
    PGresult *r = evd_db_query(c,
                               "SELECT cluster FROM experiment_cases WHERE experiment_id = $1"
                               " AND cluster IS NOT NULL GROUP BY cluster"
                               " ORDER BY min(case_index)",
                               1, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = json_array();
    for (int i = 0; out != NULL && i < PQntuples(r); i++)
        json_array_append_new(out, json_string(PQgetvalue(r, i, 0)));
    PQclear(r);
    if (out == NULL)
        evd_err_set(err, EVD_ENOMEM, "out of memory");
    return out;
}

enum evd_code evd_store_experiment_take_dirty(PGconn *c, char *id, int64_t *seq, bool *found,
                                              struct evd_err *err)
{
    *found = false;
    PGresult *r = evd_db_query(
        c,
        "UPDATE experiments SET dirty = false, analysis_seq = nextval('experiment_analysis_seq')"
        " WHERE id = (SELECT id FROM experiments WHERE dirty ORDER BY id"
        " FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id, analysis_seq",
        0, NULL, err);
    if (r == NULL)
        return evd_db_code(err);
    if (PQntuples(r) == 1) {
        snprintf(id, 64, "%s", PQgetvalue(r, 0, 0));
        *seq = evd_db_col_i64(r, 0, 1);
        *found = true;
    }
    PQclear(r);
    return EVD_OK;
}

enum evd_code evd_store_experiment_set_analysis(PGconn *c, const char *id, int64_t seq,
                                                const json_t *analysis,
                                                const int64_t counts[3], int64_t now,
                                                struct evd_err *err)
{
    char sq[32], ts[32], t[32], pa[32], f[32];
    I64(sq, seq);
    I64(ts, now);
    I64(t, counts[0]);
    I64(pa, counts[1]);
    I64(f, counts[2]);
    char *a = dump(analysis);
    if (a == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    const char *p[] = {id, a, sq, ts, t, pa, f};
    enum evd_code rc = evd_db_exec(
        c,
        "UPDATE experiments SET analysis = $2::jsonb, updated_at = $4::bigint,"
        " terminal_runs = $5::int, passed_runs = $6::int, failed_runs = $7::int"
        " WHERE id = $1 AND analysis_seq = $3::bigint AND status IN ('queued', 'running')",
        7, p, err);
    free(a);
    if (rc == EVD_OK)
        rc = evd_store_notify(c, EVD_CHANNEL_EVENTS, id, err);
    return rc;
}

enum evd_code evd_store_experiment_lock(PGconn *c, const char *id, char status[16],
                                        struct evd_err *err)
{
    const char *p[] = {id};
    status[0] = '\0';
    PGresult *r =
        evd_db_query(c, "SELECT status FROM experiments WHERE id = $1 FOR UPDATE", 1, p, err);
    if (r == NULL)
        return evd_db_code(err);
    if (PQntuples(r) == 1)
        snprintf(status, 16, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return EVD_OK;
}

enum evd_code evd_store_experiment_outcomes(PGconn *c, const char *id, int64_t *completed,
                                            int64_t *total, struct evd_err *err)
{
    const char *p[] = {id};
    PGresult *r = evd_db_query(c,
                               "SELECT count(*) FILTER (WHERE status = 'completed'), count(*)"
                               " FROM experiment_runs WHERE experiment_id = $1",
                               1, p, err);
    if (r == NULL)
        return evd_db_code(err);
    *completed = evd_db_col_i64(r, 0, 0);
    *total = evd_db_col_i64(r, 0, 1);
    PQclear(r);
    return EVD_OK;
}

enum evd_code evd_store_experiment_finish(PGconn *c, const char *id, const char *status,
                                          const json_t *analysis, int64_t now, bool *done,
                                          struct evd_err *err)
{
    char ts[32];
    I64(ts, now);
    char *a = dump(analysis);
    *done = false;
    if (a == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    const char *p[] = {id, a, status, ts};
    PGresult *r = evd_db_query(
        c,
        "UPDATE experiments x SET status = $3, analysis = $2::jsonb, dirty = false,"
        " updated_at = $4::bigint, completed_at = $4::bigint,"
        " terminal_runs = s.terminal, passed_runs = s.passed, failed_runs = s.failed"
        " FROM (SELECT count(*) FILTER (WHERE status IN ('completed', 'failed', 'cancelled'))"
        " AS terminal, count(*) FILTER (WHERE passed) AS passed,"
        " count(*) FILTER (WHERE passed = false) AS failed FROM experiment_runs"
        " WHERE experiment_id = $1) s"
        " WHERE x.id = $1 AND x.status IN ('queued', 'running') RETURNING 1",
        4, p, err);
    free(a);
    if (r == NULL)
        return evd_db_code(err);
    *done = PQntuples(r) == 1;
    PQclear(r);
    if (*done) {
        const char *pd[] = {id};
        enum evd_code rc =
            evd_db_exec(c, "DELETE FROM jobs WHERE kind = 'cell' AND ref = $1", 1, pd, err);
        if (rc == EVD_OK)
            rc = evd_store_notify(c, EVD_CHANNEL_EVENTS, id, err);
        return rc;
    }
    return EVD_OK;
}

enum evd_code evd_store_experiment_cancel_runs(PGconn *c, const char *id, int64_t now,
                                               struct evd_err *err)
{
    char ts[32];
    I64(ts, now);
    const char *p[] = {id, ts};
    /* The jobs first, then the runs (the order of a case job's step; the caller locks the
     * experiment row after this): a step under way finishes before its job goes, and a
     * later one finds no job and writes nothing. */
    enum evd_code rc =
        evd_db_exec(c, "DELETE FROM jobs WHERE kind = 'cell' AND ref = $1", 1, p, err);
    if (rc == EVD_OK)
        rc = evd_db_exec(
            c,
            "UPDATE experiment_runs SET status = 'cancelled', passed = NULL, progress = NULL,"
            " completed_at = $2::bigint, failures = failures || '[{\"phase\": \"cancel\","
            " \"message\": \"experiment cancelled\"}]'::jsonb"
            " WHERE experiment_id = $1 AND status IN ('pending', 'running')",
            2, p, err);
    if (rc == EVD_OK)
        rc = evd_store_judgements_cancel(c, id, now, err);
    if (rc == EVD_OK)
        rc = evd_store_notify(c, EVD_CHANNEL_CANCEL, id, err);
    return rc;
}

enum evd_code evd_store_experiment_delete(PGconn *c, const char *id, struct evd_err *err)
{
    const char *p[] = {id};
    PGresult *r = evd_db_query(
        c,
        "WITH x AS (SELECT id, status FROM experiments WHERE id = $1),"
        " d AS (DELETE FROM experiments e USING x WHERE e.id = x.id"
        " AND x.status IN ('completed', 'failed', 'cancelled') RETURNING 1)"
        " SELECT (SELECT status FROM x), (SELECT count(*) FROM d)",
        1, p, err);
    if (r == NULL)
        return evd_db_code(err);
    enum evd_code rc = EVD_OK;
    if (PQgetisnull(r, 0, 0))
        rc = evd_err_set(err, EVD_ENOTFOUND, "experiment not found: %s", id);
    else if (evd_db_col_i64(r, 0, 1) != 1)
        rc = evd_err_set(err, EVD_ECONFLICT,
                         "experiment %s is %s; only a completed, failed or cancelled experiment "
                         "can be deleted (cancel it first)",
                         id, PQgetvalue(r, 0, 0));
    PQclear(r);
    if (rc == EVD_OK)
        rc = evd_db_exec(c, "DELETE FROM jobs WHERE kind = 'cell' AND ref = $1", 1, p, err);
    return rc;
}

json_t *evd_store_experiments_stalled(PGconn *c, struct evd_err *err)
{
    PGresult *r = evd_db_query(
        c,
        "SELECT x.id FROM experiments x WHERE x.status IN ('queued', 'running')"
        " AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.kind = 'cell' AND j.ref = x.id)"
        " ORDER BY x.id LIMIT 100",
        0, NULL, err);
    if (r == NULL)
        return NULL;
    json_t *out = json_array();
    for (int i = 0; out != NULL && i < PQntuples(r); i++)
        json_array_append_new(out, json_string(PQgetvalue(r, i, 0)));
    PQclear(r);
    if (out == NULL)
        evd_err_set(err, EVD_ENOMEM, "out of memory");
    return out;
}
