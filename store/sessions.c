/* SQL of ad-hoc sessions, their turns, and the comparison read; see sessions.h. */
#include "store/sessions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "store/db.h"
#include "store/evals.h"
#include "store/page.h"

#define I64(buf, v) snprintf(buf, sizeof(buf), "%lld", (long long)(v))

static char *dump(const json_t *v)
{
    return v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17)) : NULL;
}

void evd_store_session_clear(struct evd_store_session *s)
{
    if (s == NULL)
        return;
    json_decref(s->config);
    json_decref(s->conversation);
    json_decref(s->metrics);
    free(s->title);
    memset(s, 0, sizeof(*s));
}

void evd_store_turn_clear(struct evd_store_turn *t)
{
    if (t == NULL)
        return;
    free(t->prompt);
    memset(t, 0, sizeof(*t));
}

enum evd_code evd_store_session_insert(PGconn *c, const char *id, const char *title,
                                       const json_t *config, int64_t now, struct evd_err *err)
{
    char *cfg = dump(config);
    char ts[32];
    I64(ts, now);
    if (cfg == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    const char *p[] = {id, title, cfg, ts};
    enum evd_code rc =
        evd_db_exec(c,
                    "INSERT INTO sessions (id, title, config, created_at, updated_at)"
                    " VALUES ($1, $2, $3::jsonb, $4::bigint, $4::bigint)",
                    4, p, err);
    free(cfg);
    return rc;
}

static const char SQL_SESSION_GET[] =
    "SELECT id, status, config, conversation, metrics, wall_time_ms, turn_count, message_count,"
    " created_at, updated_at, title FROM sessions WHERE id = $1";

enum evd_code evd_store_session_get(PGconn *c, const char *id, bool lock,
                                    struct evd_store_session *out, struct evd_err *err)
{
    memset(out, 0, sizeof(*out));
    PGresult *r = evd_db_get_row(c, SQL_SESSION_GET, lock, id, "session", err);
    if (r == NULL)
        return evd_db_code(err);
    snprintf(out->id, sizeof(out->id), "%s", PQgetvalue(r, 0, 0));
    snprintf(out->status, sizeof(out->status), "%s", PQgetvalue(r, 0, 1));
    out->config = evd_db_col_json(r, 0, 2);
    out->conversation = evd_db_col_json(r, 0, 3);
    out->metrics = evd_db_col_json(r, 0, 4);
    out->wall_time_ms = evd_db_col_i64(r, 0, 5);
    out->turn_count = (int)evd_db_col_i64(r, 0, 6);
    out->message_count = (int)evd_db_col_i64(r, 0, 7);
    out->created_at = evd_db_col_i64(r, 0, 8);
    out->updated_at = evd_db_col_i64(r, 0, 9);
    bool titled = !PQgetisnull(r, 0, 10);
    if (titled)
        out->title = strdup(PQgetvalue(r, 0, 10));
    PQclear(r);
    if (titled && out->title == NULL) {
        evd_store_session_clear(out);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    if (!json_is_object(out->config)) {
        evd_store_session_clear(out);
        return evd_err_set(err, EVD_EINTERNAL, "stored configuration of %s cannot be decoded", id);
    }
    return EVD_OK;
}

/* The SessionV1 projection of `s` with its last turn `t` (SessionTurnV1, or null). */
#define SQL_TURN_JSON                                                                              \
    "(jsonb_build_object('turn_id', t.turn_id, 'session_id', t.session_id, 'status', t.status,"    \
    " 'created_at', t.created_at, 'started_at', t.started_at, 'completed_at', t.completed_at,"     \
    " 'failures', t.failures) || CASE WHEN t.status = 'completed' AND t.output IS NOT NULL"        \
    " THEN jsonb_build_object('output', t.output) ELSE '{}'::jsonb END)"

#define SQL_SESSION_JSON                                                                           \
    "(jsonb_build_object('session_id', s.id, 'title', s.title, 'status', s.status, 'model',"       \
    " s.config->'model', 'system_prompt', s.config->'system_prompt', 'functions',"                 \
    " s.config->'functions', 'output', s.config->'output', 'limits', s.config->'limits',"          \
    " 'message_count', s.message_count, 'created_at', s.created_at, 'updated_at', s.updated_at,"   \
    " 'last_turn', CASE WHEN t.turn_id IS NULL THEN 'null'::jsonb ELSE " SQL_TURN_JSON " END)"     \
    " || CASE WHEN s.config ? 'metadata' THEN jsonb_build_object('metadata',"                      \
    " s.config->'metadata') ELSE '{}'::jsonb END)::text"

#define SQL_LAST_TURN                                                                              \
    " LEFT JOIN LATERAL (SELECT x.turn_id, x.session_id, x.status, x.created_at, x.started_at,"    \
    " x.completed_at, x.failures, x.output FROM session_turns x WHERE x.session_id = s.id"         \
    " ORDER BY x.seq DESC LIMIT 1) t ON true"

static const char SQL_VIEW[] =
    "SELECT " SQL_SESSION_JSON " FROM sessions s" SQL_LAST_TURN " WHERE s.id = $1";

static const char SQL_TURNS[] =
    "SELECT (jsonb_build_object('turn_id', turn_id, 'seq', seq, 'prompt', prompt, 'status',"
    " status, 'created_at', created_at, 'started_at', started_at, 'completed_at', completed_at,"
    " 'transcript', CASE WHEN $2 THEN transcript END, 'progress', progress))::text"
    " FROM session_turns WHERE session_id = $1 ORDER BY seq";

json_t *evd_store_session_view(PGconn *c, const char *id, json_t **turns, bool transcripts,
                               struct evd_err *err)
{
    const char *p[] = {id, transcripts ? "true" : "false"};
    if (turns != NULL)
        *turns = NULL;
    PGresult *r = evd_db_query(c, SQL_VIEW, 1, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = PQntuples(r) ? json_loads(PQgetvalue(r, 0, 0), 0, NULL) : NULL;
    if (PQntuples(r) == 0)
        evd_err_set(err, EVD_ENOTFOUND, "session not found: %s", id);
    else if (out == NULL)
        evd_err_set(err, EVD_EINTERNAL, "session %s cannot be decoded", id);
    PQclear(r);
    if (out == NULL || turns == NULL)
        return out;
    r = evd_db_query(c, SQL_TURNS, 2, p, err);
    if (r == NULL) {
        json_decref(out);
        return NULL;
    }
    *turns = json_array();
    for (int i = 0; i < PQntuples(r); i++)
        json_array_append_new(*turns, json_loads(PQgetvalue(r, i, 0), 0, NULL));
    PQclear(r);
    return out;
}

static const char SQL_LIST[] =
    "SELECT " SQL_SESSION_JSON ", s.created_at, s.id FROM sessions s" SQL_LAST_TURN
    " WHERE $2::bigint IS NULL OR (s.created_at, s.id) < ($2::bigint, $3)"
    " ORDER BY s.created_at DESC, s.id DESC LIMIT $1::int + 1";

json_t *evd_store_session_list(PGconn *c, unsigned limit, const char *before, char **next_cursor,
                               struct evd_err *err)
{
    return evd_store_page_list(c, SQL_LIST, limit, before, next_cursor, err);
}

enum evd_code evd_store_turn_add(PGconn *c, const char *session_id, int seq, const char *turn_id,
                                 const char *prompt, int64_t now, struct evd_err *err)
{
    char sq[16], ts[32];
    I64(sq, seq);
    I64(ts, now);
    const char *p[] = {session_id, sq, turn_id, prompt, ts};
    enum evd_code rc = evd_db_exec(
        c,
        "WITH t AS (INSERT INTO session_turns (session_id, seq, turn_id, prompt, created_at)"
        " VALUES ($1, $2::int, $3, $4, $5::bigint) RETURNING session_id),"
        " j AS (INSERT INTO jobs (kind, ref, run_position) SELECT 'session', t.session_id,"
        " $2::int FROM t RETURNING 1)"
        " UPDATE sessions SET status = 'working', turn_count = $2::int,"
        " message_count = message_count + 1, updated_at = $5::bigint"
        " WHERE id = $1 AND EXISTS (SELECT 1 FROM j)",
        5, p, err);
    return rc;
}

enum evd_code evd_store_turn_get(PGconn *c, const char *session_id, int seq,
                                 struct evd_store_turn *out, struct evd_err *err)
{
    memset(out, 0, sizeof(*out));
    char sq[16];
    I64(sq, seq);
    const char *p[] = {session_id, sq};
    PGresult *r = evd_db_query(c,
                               "SELECT turn_id, status, attempt, coalesce(started_at, 0), prompt"
                               " FROM session_turns WHERE session_id = $1 AND seq = $2::int",
                               2, p, err);
    if (r == NULL)
        return evd_db_code(err);
    if (PQntuples(r) == 0) {
        PQclear(r);
        return evd_err_set(err, EVD_ENOTFOUND, "turn %d of %s not found", seq, session_id);
    }
    snprintf(out->turn_id, sizeof(out->turn_id), "%s", PQgetvalue(r, 0, 0));
    snprintf(out->status, sizeof(out->status), "%s", PQgetvalue(r, 0, 1));
    out->attempt = (int)evd_db_col_i64(r, 0, 2);
    out->started_at = evd_db_col_i64(r, 0, 3);
    out->prompt = strdup(PQgetvalue(r, 0, 4));
    PQclear(r);
    if (out->prompt == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    return EVD_OK;
}

enum evd_code evd_store_turn_start(PGconn *c, const char *session_id, int seq, int attempt,
                                   int64_t now, struct evd_err *err)
{
    char sq[16], att[16], ts[32];
    I64(sq, seq);
    I64(att, attempt);
    I64(ts, now);
    const char *p[] = {session_id, sq, att, ts};
    return evd_db_exec(c,
                       "WITH t AS (UPDATE session_turns SET status = 'running', attempt = $3::int,"
                       " started_at = $4::bigint, completed_at = NULL, progress = NULL"
                       " WHERE session_id = $1 AND seq = $2::int RETURNING 1)"
                       " UPDATE sessions SET status = 'working', updated_at = $4::bigint"
                       " WHERE id = $1 AND EXISTS (SELECT 1 FROM t)",
                       4, p, err);
}

enum evd_code evd_store_turn_progress(PGconn *c, const char *session_id, int seq, int attempt,
                                      const json_t *metrics, struct evd_err *err)
{
    char sq[16], att[16];
    I64(sq, seq);
    I64(att, attempt);
    char *m = dump(metrics);
    if (m == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    const char *p[] = {session_id, sq, att, m, EVD_CHANNEL_EVENTS};
    enum evd_code rc =
        evd_db_exec(c,
                    "WITH u AS (UPDATE session_turns SET progress = $4::jsonb WHERE session_id = $1"
                    " AND seq = $2::int AND attempt = $3::int AND status = 'running' RETURNING 1)"
                    " SELECT pg_notify($5, $1) FROM u",
                    5, p, err);
    free(m);
    return rc;
}

enum evd_code evd_store_turn_finish(PGconn *c, const char *session_id, int seq, int attempt,
                                    const char *status, const json_t *output,
                                    const json_t *failures, const json_t *metrics,
                                    const json_t *transcript, int64_t now, bool *written,
                                    struct evd_err *err)
{
    *written = false;
    char sq[16], att[16], ts[32];
    I64(sq, seq);
    I64(att, attempt);
    I64(ts, now);
    char *o = dump(output), *f = dump(failures), *m = dump(metrics), *t = dump(transcript);
    const char *p[] = {session_id, sq, att, status, o, f ? f : "[]", m, t, ts};
    PGresult *r = evd_db_query(
        c,
        "UPDATE session_turns SET status = $4, output = $5::jsonb, failures = $6::jsonb,"
        " metrics = $7::jsonb, transcript = $8::jsonb, completed_at = $9::bigint, progress = NULL"
        " WHERE session_id = $1 AND seq = $2::int AND attempt = $3::int AND status = 'running'",
        9, p, err);
    free(o);
    free(f);
    free(m);
    free(t);
    if (r == NULL)
        return evd_db_code(err);
    *written = atoi(PQcmdTuples(r)) == 1;
    PQclear(r);
    return EVD_OK;
}

enum evd_code evd_store_turn_late_transcript(PGconn *c, const char *session_id, int seq,
                                             int attempt, const json_t *transcript, bool *written,
                                             struct evd_err *err)
{
    *written = false;
    char sq[16], att[16];
    I64(sq, seq);
    I64(att, attempt);
    char *t = dump(transcript);
    if (t == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    const char *p[] = {session_id, sq, att, t};
    PGresult *r =
        evd_db_query(c,
                     "UPDATE session_turns SET transcript = $4::jsonb WHERE session_id = $1"
                     " AND seq = $2::int AND attempt = $3::int AND status = 'cancelled'"
                     " AND transcript IS NULL",
                     4, p, err);
    free(t);
    if (r == NULL)
        return evd_db_code(err);
    *written = atoi(PQcmdTuples(r)) == 1;
    PQclear(r);
    return EVD_OK;
}

enum evd_code evd_store_turn_cancel(PGconn *c, const char *session_id, const json_t *failure,
                                    int64_t now, bool *found, json_t **progress,
                                    int64_t *started_at, struct evd_err *err)
{
    *found = false;
    *progress = NULL;
    *started_at = 0;
    char *f = dump(failure);
    char ts[32];
    I64(ts, now);
    if (f == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    const char *p[] = {session_id, f, ts};
    PGresult *r =
        evd_db_query(c,
                     "UPDATE session_turns SET status = 'cancelled', completed_at = $3::bigint,"
                     " failures = failures || jsonb_build_array($2::jsonb), metrics = progress"
                     " WHERE session_id = $1 AND status IN ('queued', 'running')"
                     " RETURNING progress::text, coalesce(started_at, 0)",
                     3, p, err);
    free(f);
    if (r == NULL)
        return evd_db_code(err);
    if (PQntuples(r) > 0) {
        *found = true;
        *progress = evd_db_col_json(r, 0, 0);
        *started_at = evd_db_col_i64(r, 0, 1);
    }
    PQclear(r);
    return EVD_OK;
}

enum evd_code evd_store_turn_hand_back(PGconn *c, const char *session_id, int seq, int attempt,
                                       int64_t job_id, const char *owner, struct evd_err *err)
{
    char sq[16], att[16], id[32];
    I64(sq, seq);
    I64(att, attempt);
    I64(id, job_id);
    const char *p[] = {session_id, sq, att, id, owner};
    return evd_db_exec(
        c,
        "WITH j AS (SELECT id FROM jobs WHERE id = $4::bigint AND lease_owner = $5 FOR UPDATE),"
        " t AS (UPDATE session_turns SET status = 'queued', attempt = attempt - 1,"
        " started_at = NULL, progress = NULL WHERE session_id = $1 AND seq = $2::int"
        " AND status = 'running' AND attempt = $3::int AND EXISTS (SELECT 1 FROM j)"
        " RETURNING 1)"
        " UPDATE jobs SET lease_owner = NULL, lease_until = NULL, due_at = now()"
        " WHERE id = (SELECT id FROM j) AND EXISTS (SELECT 1 FROM t)",
        5, p, err);
}

enum evd_code evd_store_session_after_turn(PGconn *c, const char *id, const char *status,
                                           const json_t *metrics, const json_t *conversation,
                                           int64_t wall_add, int messages_add, int64_t now,
                                           struct evd_err *err)
{
    char *m = dump(metrics), *conv = dump(conversation);
    char wall[32], msgs[16], ts[32];
    I64(wall, wall_add);
    I64(msgs, messages_add);
    I64(ts, now);
    const char *p[] = {id, status, m, conv, wall, msgs, ts};
    enum evd_code rc = evd_db_exec(
        c,
        "UPDATE sessions SET status = $2, metrics = coalesce($3::jsonb, metrics),"
        " conversation = coalesce($4::jsonb, conversation),"
        " wall_time_ms = wall_time_ms + $5::bigint, message_count = message_count + $6::int,"
        " updated_at = $7::bigint WHERE id = $1",
        7, p, err);
    free(m);
    free(conv);
    return rc;
}

enum evd_code evd_store_session_jobs_delete(PGconn *c, const char *id, struct evd_err *err)
{
    const char *p[] = {id};
    return evd_db_exec(c, "DELETE FROM jobs WHERE kind = 'session' AND ref = $1", 1, p, err);
}

enum evd_code evd_store_session_delete(PGconn *c, const char *id, bool *deleted,
                                       struct evd_err *err)
{
    const char *p[] = {id};
    PGresult *r = evd_db_query(c, "DELETE FROM sessions WHERE id = $1", 1, p, err);
    if (r == NULL)
        return evd_db_code(err);
    *deleted = atoi(PQcmdTuples(r)) == 1;
    PQclear(r);
    return evd_store_session_jobs_delete(c, id, err);
}

/* ---- comparison -------------------------------------------------------------------------- */

/* A PostgreSQL text[] literal of ids[0..n): {"a","b"} with " and \ escaped (malloc'd). */
static char *text_array(const char *const *ids, size_t n)
{
    struct evd_buf b = {0};
    int bad = evd_buf_append(&b, "{", 1);
    for (size_t i = 0; i < n; i++) {
        bad |= evd_buf_append(&b, i ? ",\"" : "\"", i ? 2 : 1);
        for (const char *s = ids[i]; *s; s++) {
            if (*s == '"' || *s == '\\')
                bad |= evd_buf_append(&b, "\\", 1);
            bad |= evd_buf_append(&b, s, 1);
        }
        bad |= evd_buf_append(&b, "\"", 1);
    }
    bad |= evd_buf_append(&b, "}", 1);
    if (bad) {
        evd_buf_free(&b);
        return NULL;
    }
    return b.data;
}

/*
 * Ad-hoc sessions and evaluation runs in one statement: the session row with its last
 * turn, or the run with its evaluation. Wall time counts a running turn or run up to now.
 */
static const char SQL_COMPARE[] =
    "WITH want AS (SELECT w.id, w.ord FROM unnest($1::text[]) WITH ORDINALITY AS w(id, ord))"
    " SELECT w.ord, w.id, 'session', s.title,"
    "  jsonb_build_object('status', s.status, 'model', s.config->'model', 'metadata',"
    "  s.config->'metadata', 'message_count', s.message_count, 'turn_count', s.turn_count,"
    "  'created_at', s.created_at, 'updated_at', s.updated_at)::text,"
    "  t.status, s.metrics::text, t.progress::text,"
    "  s.wall_time_ms + CASE WHEN t.status = 'running' AND t.started_at IS NOT NULL"
    "  THEN greatest($2::bigint - t.started_at, 0) ELSE 0 END"
    " FROM want w JOIN sessions s ON s.id = w.id"
    " LEFT JOIN LATERAL (SELECT x.status, x.progress, x.started_at FROM session_turns x"
    "  WHERE x.session_id = s.id ORDER BY x.seq DESC LIMIT 1) t ON true"
    " UNION ALL"
    " SELECT w.ord, w.id, 'evaluation_run',"
    "  coalesce(e.request->r.role->>'label', r.role) || ' · run ' || r.iteration,"
    "  jsonb_build_object('status', r.status, 'evaluation_id', r.evaluation_id,"
    "  'evaluation_status', e.status, 'run_id', r.run_id, 'role', r.role, 'iteration',"
    "  r.iteration, 'model', e.request->'model', 'metadata', e.request->'metadata',"
    "  'created_at', e.created_at, 'updated_at', e.updated_at)::text,"
    "  CASE r.status WHEN 'pending' THEN 'queued' ELSE r.status END, r.metrics::text,"
    "  r.progress::text,"
    "  CASE WHEN r.status IN ('completed', 'failed', 'cancelled') THEN"
    "  coalesce((r.benchmark->>'wall_time_ms')::bigint,"
    "  CASE WHEN r.started_at > 0 THEN r.completed_at - r.started_at END)"
    "  WHEN r.status = 'running' AND r.started_at > 0 THEN greatest($2::bigint - r.started_at, 0)"
    "  END"
    " FROM want w JOIN runs r ON r.session_id = w.id JOIN evaluations e ON e.id = r.evaluation_id"
    " UNION ALL"
    " SELECT w.ord, w.id, 'experiment_run',"
    "  coalesce(CASE WHEN r.arm = 0 THEN x.request->'control'->>'label'"
    "  ELSE x.request->'treatments'->(r.arm - 1)->>'label' END, 'arm ' || r.arm)"
    "  || ' · case ' || c.case_id || ' · run ' || r.repeat,"
    "  jsonb_build_object('status', r.status, 'experiment_id', r.experiment_id,"
    "  'experiment_status', x.status, 'run_id', r.run_id, 'case_id', c.case_id, 'arm', r.arm,"
    "  'repeat', r.repeat, 'model', x.request->'model', 'metadata', x.request->'metadata',"
    "  'created_at', x.created_at, 'updated_at', x.updated_at)::text,"
    "  CASE r.status WHEN 'pending' THEN 'queued' ELSE r.status END, r.metrics::text,"
    "  r.progress::text,"
    "  CASE WHEN r.status IN ('completed', 'failed', 'cancelled') THEN"
    "  coalesce((r.benchmark->>'wall_time_ms')::bigint,"
    "  CASE WHEN r.started_at > 0 THEN r.completed_at - r.started_at END)"
    "  WHEN r.status = 'running' AND r.started_at > 0 THEN greatest($2::bigint - r.started_at, 0)"
    "  END"
    " FROM want w JOIN experiment_runs r ON r.session_id = w.id"
    " JOIN experiments x ON x.id = r.experiment_id"
    " JOIN experiment_cases c ON c.experiment_id = r.experiment_id AND c.case_index = r.case_index"
    " ORDER BY 1";

json_t *evd_store_compare_read(PGconn *c, const char *const *ids, size_t n, int64_t now,
                               struct evd_err *err)
{
    char *arr = text_array(ids, n);
    char ts[32];
    I64(ts, now);
    if (arr == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        return NULL;
    }
    const char *p[] = {arr, ts};
    PGresult *r = evd_db_query(c, SQL_COMPARE, 2, p, err);
    free(arr);
    if (r == NULL)
        return NULL;
    json_t *out = json_array();
    for (int i = 0; out != NULL && i < PQntuples(r); i++) {
        json_t *row = json_pack("{s:I, s:s, s:s}", "ord", (json_int_t)evd_db_col_i64(r, i, 0),
                                "session_id", PQgetvalue(r, i, 1), "kind", PQgetvalue(r, i, 2));
        if (row == NULL)
            continue;
        if (!PQgetisnull(r, i, 3))
            json_object_set_new(row, "title", json_string(PQgetvalue(r, i, 3)));
        static const struct {
            int col;
            const char *key;
        } js[] = {{4, "session"}, {6, "metrics"}, {7, "progress"}};
        for (size_t k = 0; k < sizeof(js) / sizeof(js[0]); k++) {
            json_t *v = evd_db_col_json(r, i, js[k].col);
            if (v != NULL)
                json_object_set_new(row, js[k].key, v);
        }
        if (!PQgetisnull(r, i, 5))
            json_object_set_new(row, "turn_status", json_string(PQgetvalue(r, i, 5)));
        if (!PQgetisnull(r, i, 8))
            json_object_set_new(row, "wall_time_ms", json_integer(evd_db_col_i64(r, i, 8)));
        json_array_append_new(out, row);
    }
    PQclear(r);
    return out;
}

json_t *evd_store_compare_evaluations(PGconn *c, const char *const *ids, size_t n,
                                      struct evd_err *err)
{
    char *arr = text_array(ids, n);
    if (arr == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        return NULL;
    }
    const char *p[] = {arr};
    PGresult *r = evd_db_query(
        c,
        "SELECT DISTINCT evaluation_id FROM runs WHERE session_id = ANY($1::text[])"
        " UNION SELECT DISTINCT experiment_id FROM experiment_runs"
        " WHERE session_id = ANY($1::text[])",
        1, p, err);
    free(arr);
    if (r == NULL)
        return NULL;
    json_t *out = json_array();
    for (int i = 0; out != NULL && i < PQntuples(r); i++)
        json_array_append_new(out, json_string(PQgetvalue(r, i, 0)));
    PQclear(r);
    return out;
}
