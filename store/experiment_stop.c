/* SQL of an experiment's sequence, its stop and its pilot (experiments.h,
 * migrations/0024_sequential_experiments.sql). */
#include "store/experiments.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define I64(buf, v) snprintf(buf, sizeof(buf), "%lld", (long long)(v))

enum evd_code evd_store_experiment_pilot(PGconn *c, const char *id,
                                         struct evd_store_experiment_pilot *out,
                                         struct evd_err *err)
{
    /* The per-case s.d. of d for each treatment against the control (the largest of them),
     * and the mean output tokens a counted run. */
    static const char sql[] =
        "WITH d AS (SELECT a.arm, (t->>'passed')::float8 / nullif((t->>'evaluated')::float8, 0)"
        " - (e.cells->0->>'passed')::float8 / nullif((e.cells->0->>'evaluated')::float8, 0) AS d"
        " FROM experiment_cases e, jsonb_array_elements(e.cells) WITH ORDINALITY AS a(t, arm)"
        " WHERE e.experiment_id = $1 AND a.arm > 1)"
        " SELECT x.status = 'completed',"
        " (SELECT max(s) FROM (SELECT stddev_samp(d) AS s FROM d GROUP BY arm) q),"
        " (SELECT sum(output_tokens)::float8 / nullif(sum(runs), 0) FROM experiment_spend"
        " WHERE experiment_id = x.id)"
        " FROM experiments x WHERE x.id = $1";
    const char *p[] = {id};
    memset(out, 0, sizeof(*out));
    PGresult *r = evd_db_query(c, sql, 1, p, err);
    if (r == NULL)
        return evd_db_code(err);
    if (PQntuples(r) == 1) {
        out->finished = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
        if ((out->has_sd = !PQgetisnull(r, 0, 1)))
            out->sd = strtod(PQgetvalue(r, 0, 1), NULL);
        if ((out->has_output = !PQgetisnull(r, 0, 2)))
            out->output_per_run = strtod(PQgetvalue(r, 0, 2), NULL);
    }
    PQclear(r);
    return EVD_OK;
}

enum evd_code evd_store_experiment_stop_state(PGconn *c, const char *id,
                                              struct evd_store_experiment_stop *out,
                                              struct evd_err *err)
{
    const char *p[] = {id};
    memset(out, 0, sizeof(*out));
    PGresult *r = evd_db_query(c,
                               "SELECT status, stop_rule, stopped IS NOT NULL,"
                               " EXISTS (SELECT 1 FROM experiment_cases c"
                               " WHERE c.experiment_id = x.id AND NOT c.dispatched)"
                               " FROM experiments x WHERE x.id = $1 FOR UPDATE",
                               1, p, err);
    if (r == NULL)
        return evd_db_code(err);
    if (PQntuples(r) == 1) {
        out->found = true;
        snprintf(out->status, sizeof(out->status), "%s", PQgetvalue(r, 0, 0));
        out->anytime = strcmp(PQgetvalue(r, 0, 1), "anytime") == 0;
        out->stopped = strcmp(PQgetvalue(r, 0, 2), "t") == 0;
        out->undispatched = strcmp(PQgetvalue(r, 0, 3), "t") == 0;
    }
    PQclear(r);
    return EVD_OK;
}

json_t *evd_store_experiment_sequence(PGconn *c, const char *id, const char *complete,
                                      struct evd_err *err)
{
    /* The cases that completed and have no place yet enter after the last one, in
     * dispatch order; then the whole sequence. The caller holds the experiment's row. */
    const char *p[] = {id, complete};
    enum evd_code rc = evd_db_exec(
        c,
        "UPDATE experiment_cases e SET seq = b.base + t.rn"
        " FROM (SELECT case_index, row_number() OVER (ORDER BY dispatch_index) AS rn"
        " FROM experiment_cases WHERE experiment_id = $1 AND seq IS NULL AND NOT skipped"
        " AND case_index = ANY ($2::int[])) t,"
        " (SELECT coalesce(max(seq), 0) AS base FROM experiment_cases"
        " WHERE experiment_id = $1) b"
        " WHERE e.experiment_id = $1 AND e.case_index = t.case_index",
        2, p, err);
    if (rc != EVD_OK)
        return NULL;
    PGresult *r = evd_db_query(c,
                               "SELECT case_index FROM experiment_cases"
                               " WHERE experiment_id = $1 AND seq IS NOT NULL ORDER BY seq",
                               1, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = json_array();
    for (int i = 0; out != NULL && i < PQntuples(r); i++)
        if (json_array_append_new(out, json_integer(evd_db_col_i64(r, i, 0))) != 0) {
            json_decref(out);
            out = NULL;
        }
    PQclear(r);
    if (out == NULL)
        evd_err_set(err, EVD_ENOMEM, "out of memory");
    return out;
}

enum evd_code evd_store_experiment_stop(PGconn *c, const char *id, const char *reason,
                                        int64_t at_case, int64_t now, struct evd_err *err)
{
    char at[32], ts[32];
    I64(at, at_case);
    I64(ts, now);
    const char *p[] = {id, reason, at, ts};
    const char *ps[] = {id, ts};
    enum evd_code rc = evd_db_exec(c, "SELECT evald_experiment_skip($1, $2::bigint)", 2, ps, err);
    if (rc != EVD_OK)
        return rc;
    return evd_db_exec(c,
                       "UPDATE experiments SET stopped = jsonb_build_object('reason', $2::text,"
                       " 'at_case', $3::int, 'runs_saved', skipped_runs), updated_at = $4::bigint"
                       " WHERE id = $1 AND stopped IS NULL",
                       4, p, err);
}

bool evd_store_experiments_anytime_live(PGconn *c)
{
    struct evd_err err = {0};
    PGresult *r = evd_db_query(c,
                               "SELECT EXISTS (SELECT 1 FROM experiments"
                               " WHERE status IN ('queued', 'running') AND stop_rule = 'anytime')",
                               0, NULL, &err);
    bool live = r != NULL && PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    if (r != NULL)
        PQclear(r);
    return live;
}
