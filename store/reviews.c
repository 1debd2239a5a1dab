/* SQL of reviews and derived experiments; see reviews.h and migrations/0012_reviews.sql. */
#include "store/reviews.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/page.h"

/* A run has something to review, and to score again, when it reached its evaluator. */
#define REVIEWABLE(r)                                                                              \
    "(" r ".status IN ('completed', 'failed') AND " r ".output IS NOT NULL"                        \
    " AND jsonb_typeof(" r ".output) <> 'null')"

#define REVIEW_JSON                                                                                \
    "json_build_object('experiment_id', r.experiment_id, 'run_id', r.run_id, 'case_id',"           \
    " c.case_id, 'case_index', r.case_index, 'arm', r.arm, 'repeat', r.repeat, 'reviewer',"        \
    " v.reviewer, 'verdict', v.verdict, 'note', v.note, 'evaluator_passed', r.passed,"             \
    " 'created_at', v.created_at, 'updated_at', v.updated_at)::text"

static const char SQL_PUT[] =
    "WITH x AS (SELECT 1 FROM experiments WHERE id = $1),"
    " r AS (SELECT r.case_index, r.position, " REVIEWABLE(
        "r") " AS ok"
             " FROM experiment_runs r WHERE r.experiment_id = $1 AND r.run_id = $2),"
             " up AS (INSERT INTO experiment_reviews (experiment_id, case_index, position, "
             "reviewer,"
             " verdict, note, created_at, updated_at)"
             " SELECT $1, r.case_index, r.position, $3, $4, $5, $6::bigint, $6::bigint FROM r "
             "WHERE r.ok"
             " ON CONFLICT (experiment_id, case_index, position, reviewer) DO UPDATE SET"
             " verdict = EXCLUDED.verdict, note = EXCLUDED.note, updated_at = EXCLUDED.updated_at"
             " RETURNING id, (xmax = 0) AS inserted)"
             " SELECT (SELECT count(*) FROM x), (SELECT count(*) FROM r), (SELECT id FROM up),"
             " (SELECT inserted FROM up)";

static const char SQL_ONE[] = "SELECT " REVIEW_JSON " FROM experiment_reviews v"
                              " JOIN experiment_runs r ON r.experiment_id = v.experiment_id"
                              " AND r.case_index = v.case_index AND r.position = v.position"
                              " JOIN experiment_cases c ON c.experiment_id = v.experiment_id"
                              " AND c.case_index = v.case_index WHERE v.id = $1::bigint";

enum evd_code evd_store_review_put(PGconn *c, const struct evd_store_review *rv, json_t **review,
                                   bool *created, struct evd_err *err)
{
    char now[32];
    snprintf(now, sizeof(now), "%lld", (long long)rv->now);
    const char *p[] = {rv->experiment_id, rv->run_id, rv->reviewer, rv->verdict, rv->note, now};
    *review = NULL;
    PGresult *r = evd_db_query(c, SQL_PUT, 6, p, err);
    if (r == NULL)
        return evd_db_code(err);
    enum evd_code rc = EVD_OK;
    if (strcmp(PQgetvalue(r, 0, 0), "0") == 0)
        rc = evd_err_set(err, EVD_ENOTFOUND, "experiment not found: %s", rv->experiment_id);
    else if (strcmp(PQgetvalue(r, 0, 1), "0") == 0)
        rc = evd_err_set(err, EVD_ENOTFOUND, "run not found: %s", rv->run_id);
    else if (PQgetisnull(r, 0, 2))
        rc = evd_err_set(err, EVD_ECONFLICT,
                         "run %s has no output to review (it is not finished, or failed "
                         "before its output)",
                         rv->run_id);
    if (rc != EVD_OK) {
        PQclear(r);
        return rc;
    }
    *created = strcmp(PQgetvalue(r, 0, 3), "t") == 0;
    const char *q[] = {PQgetvalue(r, 0, 2)};
    PGresult *one = evd_db_query(c, SQL_ONE, 1, q, err);
    PQclear(r);
    if (one == NULL)
        return evd_db_code(err);
    if (PQntuples(one) != 1 || (*review = evd_db_col_json(one, 0, 0)) == NULL)
        rc = evd_err_set(err, EVD_EINTERNAL, "stored review cannot be read back");
    PQclear(one);
    return rc;
}

static const char SQL_LIST[] =
    "SELECT NULL::text, -1::bigint AS k FROM experiments WHERE id = $1"
    " UNION ALL (SELECT " REVIEW_JSON ", v.id FROM experiment_reviews v"
    " JOIN experiment_runs r ON r.experiment_id = v.experiment_id"
    " AND r.case_index = v.case_index AND r.position = v.position"
    " JOIN experiment_cases c ON c.experiment_id = v.experiment_id"
    " AND c.case_index = v.case_index"
    " WHERE v.experiment_id = $1 AND ($3::bigint IS NULL OR v.id > $3::bigint)"
    " AND ($4::text IS NULL OR v.reviewer = $4) ORDER BY v.id LIMIT $2::int + 1) ORDER BY 2";

json_t *evd_store_reviews_list(PGconn *c, const char *id, const char *reviewer, unsigned limit,
                               const char *before, char **next_cursor, struct evd_err *err)
{
    return evd_store_page_ascending(c, SQL_LIST, "experiment", id, reviewer, limit, before,
                                    next_cursor, err);
}

/* Usefulness: a run of a flaky case 4, of a case where the arms disagree 2, a score near
 * the threshold 1; ties go to the score nearest the threshold, then dataset order. */
static const char SQL_QUEUE[] =
    "SELECT json_build_object('run_id', r.run_id, 'session_id', r.session_id, 'case_id',"
    " c.case_id, 'case_index', r.case_index, 'arm', r.arm, 'repeat', r.repeat, 'position',"
    " r.position, 'status', r.status, 'passed', r.passed, 'score', r.score, 'output',"
    " r.output, 'verdict', r.evaluation, 'vars', c.body->'vars', 'expected',"
    " c.body->'expected', 'usefulness', u.val, 'reasons', array_to_json(array_remove(ARRAY["
    " CASE WHEN c.flaky THEN 'flaky' END, CASE WHEN c.disagree THEN 'disagree' END,"
    " CASE WHEN n.near THEN 'near_threshold' END], NULL)))::text"
    " FROM experiment_runs r JOIN experiment_cases c ON c.experiment_id = r.experiment_id"
    " AND c.case_index = r.case_index,"
    " LATERAL (SELECT coalesce(abs(r.score - $3::float8) <= $4::float8, false) AS near) n,"
    " LATERAL (SELECT 4 * c.flaky::int + 2 * c.disagree::int + n.near::int AS val) u"
    " WHERE r.experiment_id = $1 AND " REVIEWABLE(
        "r") " AND NOT EXISTS (SELECT 1 FROM"
             " experiment_reviews v WHERE v.experiment_id = r.experiment_id"
             " AND v.case_index = r.case_index AND v.position = r.position"
             " AND ($2::text IS NULL OR v.reviewer = $2))"
             " ORDER BY u.val DESC, abs(r.score - $3::float8) NULLS LAST, r.case_index, r.position"
             " LIMIT $5::int OFFSET $6::int";

/* Every row's column 0 as JSON (new array), or NULL + err. */
static json_t *rows_json(PGresult *r, struct evd_err *err)
{
    json_t *out = json_array();
    for (int i = 0; out != NULL && i < PQntuples(r); i++) {
        json_t *v = evd_db_col_json(r, i, 0);
        if (v == NULL || json_array_append_new(out, v) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    if (out == NULL)
        evd_err_set(err, EVD_ENOMEM, "out of memory");
    return out;
}

json_t *evd_store_review_queue(PGconn *c, const char *id, const char *reviewer, double threshold,
                               double near, unsigned limit, unsigned offset, struct evd_err *err)
{
    char th[40], nr[40], lim[16], off[16];
    snprintf(th, sizeof(th), "%.17g", threshold);
    snprintf(nr, sizeof(nr), "%.17g", near);
    snprintf(lim, sizeof(lim), "%u", limit);
    snprintf(off, sizeof(off), "%u", offset);
    const char *p[] = {id, reviewer, th, nr, lim, off};
    PGresult *r = evd_db_query(c, SQL_QUEUE, 6, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = rows_json(r, err);
    PQclear(r);
    return out;
}

#define TABLE_COLUMNS(a, b)                                                                        \
    "count(*) FILTER (WHERE " a " AND " b "), count(*) FILTER (WHERE " a " AND NOT " b "),"        \
    " count(*) FILTER (WHERE NOT " a " AND " b "),"                                                \
    " count(*) FILTER (WHERE NOT " a " AND NOT " b ")"

static enum evd_code table(PGconn *c, const char *sql, int np, const char *const *p,
                           uint64_t counts[4], int64_t *extra, struct evd_err *err)
{
    PGresult *r = evd_db_query(c, sql, np, p, err);
    if (r == NULL)
        return evd_db_code(err);
    for (int i = 0; i < 4; i++)
        counts[i] = (uint64_t)evd_db_col_i64(r, 0, i);
    if (extra != NULL)
        *extra = evd_db_col_i64(r, 0, 4);
    PQclear(r);
    return EVD_OK;
}

enum evd_code evd_store_review_table(PGconn *c, const char *id, uint64_t counts[4],
                                     int64_t *reviews, struct evd_err *err)
{
    const char *p[] = {id};
    return table(
        c,
        "SELECT " TABLE_COLUMNS(
            "r.passed",
            "h.passed") ", (SELECT count(*) FROM experiment_reviews WHERE experiment_id = $1)"
                        " FROM evald_human_verdicts($1) h JOIN experiment_runs r"
                        " ON r.experiment_id = $1 AND r.case_index = h.case_index"
                        " AND r.position = h.position WHERE r.passed IS NOT NULL",
        1, p, counts, reviews, err);
}

enum evd_code evd_store_source_table(PGconn *c, const char *id, const char *source,
                                     uint64_t counts[4], struct evd_err *err)
{
    const char *p[] = {id, source};
    return table(
        c,
        "SELECT " TABLE_COLUMNS(
            "a.passed",
            "b.passed") " FROM experiment_runs a JOIN experiment_runs b ON b.experiment_id = $2"
                        " AND b.case_index = a.case_index AND b.position = a.position"
                        " WHERE a.experiment_id = $1 AND a.passed IS NOT NULL"
                        " AND b.passed IS NOT NULL",
        2, p, counts, NULL, err);
}

static const char SQL_VERDICT_ROWS[] =
    "WITH h AS (SELECT * FROM evald_human_verdicts($1))"
    " SELECT json_build_object('case_index', c.case_index, 'cluster', c.cluster, 'runs',"
    " coalesce((SELECT json_agg(json_build_object('position', r.position, 'arm', r.arm,"
    " 'repeat', r.repeat, 'status', r.status, 'passed', CASE $2 WHEN 'human' THEN h.passed"
    " WHEN 'human_first' THEN coalesce(h.passed, r.passed) ELSE r.passed END, 'benchmark',"
    " r.benchmark) ORDER BY r.position) FROM experiment_runs r LEFT JOIN h"
    " ON h.case_index = r.case_index AND h.position = r.position"
    " WHERE r.experiment_id = c.experiment_id AND r.case_index = c.case_index"
    " AND r.status IN ('completed', 'failed', 'cancelled')), '[]'))::text"
    " FROM experiment_cases c WHERE c.experiment_id = $1 ORDER BY c.case_index";

json_t *evd_store_verdict_rows(PGconn *c, const char *id, enum evd_store_verdicts source,
                               struct evd_err *err)
{
    const char *names[] = {"evaluator", "human", "human_first"};
    const char *p[] = {id, names[source]};
    PGresult *r = evd_db_query(c, SQL_VERDICT_ROWS, 2, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = rows_json(r, err);
    PQclear(r);
    return out;
}

json_t *evd_store_experiment_derived(PGconn *c, const char *id, struct evd_err *err)
{
    const char *p[] = {id};
    PGresult *r = evd_db_query(c,
                               "SELECT json_build_object('source_experiment_id',"
                               " source_experiment_id, 'derivation', derivation,"
                               " 'retried_runs', retried_runs)::text FROM experiments"
                               " WHERE id = $1",
                               1, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = NULL;
    if (PQntuples(r) == 0)
        evd_err_set(err, EVD_ENOTFOUND, "experiment not found: %s", id);
    else if ((out = evd_db_col_json(r, 0, 0)) == NULL)
        evd_err_set(err, EVD_ENOMEM, "out of memory");
    PQclear(r);
    return out;
}

enum evd_code evd_store_experiment_derive(PGconn *c, const char *source, const char *id,
                                          const char *kind, const char *request, int64_t now,
                                          const char *owner, int64_t *reruns, struct evd_err *err)
{
    char ts[32];
    snprintf(ts, sizeof(ts), "%lld", (long long)now);
    const char *p[] = {source, id, kind, request, ts, owner ? owner : ""};
    PGresult *r = evd_db_query(
        c, "SELECT evald_experiment_derive($1, $2, $3, $4::jsonb, $5::bigint, $6)", 6, p, err);
    if (r == NULL)
        return evd_db_code(err);
    *reruns = evd_db_col_i64(r, 0, 0);
    PQclear(r);
    if (*reruns == -1)
        return evd_err_set(err, EVD_ENOTFOUND, "experiment not found: %s", source);
    if (*reruns < 0)
        return evd_err_set(err, EVD_ECONFLICT,
                           "experiment %s has not finished; only a finished experiment can be "
                           "re-scored or retried",
                           source);
    /* The runs a stopped source skipped stay skipped (migrations/0024): the derivation
     * counts them and keeps the source's stop; it runs with the fixed rule, so that no
     * decision of its own cuts a re-score short. */
    const char *pd[] = {id, source, kind};
    enum evd_code rc = evd_db_exec(c,
                       "UPDATE experiments SET skipped_runs = (SELECT count(*) FROM"
                       " experiment_runs WHERE experiment_id = $1 AND status = 'skipped'),"
                       " stopped = (SELECT stopped FROM experiments WHERE id = $2),"
                       " judge_orders = (SELECT judge_orders FROM experiments WHERE id = $2)"
                       " WHERE id = $1",
                       2, pd, err);
    if (rc != EVD_OK)
        return rc;
    /* The judgements (migrations/0025): a re-score keeps them as they are (it calls no
     * model but the evaluator's); a retry keeps the answered ones and judges again those
     * whose pair now has, or will have, both outputs. */
    rc = evd_db_exec(
        c,
        "INSERT INTO experiment_judgements (experiment_id, case_index, position, repeat,"
        " treatment, judge_order, status, attempt, winner_slot, reason, len_control,"
        " len_treatment, metrics, error, started_at, completed_at)"
        " SELECT $1, g.case_index, g.position, g.repeat, g.treatment, g.judge_order, k.status,"
        " CASE WHEN k.status = g.status THEN g.attempt ELSE 0 END,"
        " CASE WHEN k.status = g.status THEN g.winner_slot END,"
        " CASE WHEN k.status = g.status THEN g.reason END,"
        " CASE WHEN k.status = g.status THEN g.len_control END,"
        " CASE WHEN k.status = g.status THEN g.len_treatment END,"
        " CASE WHEN k.status = g.status THEN g.metrics END,"
        " CASE WHEN k.status = g.status THEN g.error END,"
        " CASE WHEN k.status = g.status THEN g.started_at ELSE 0 END,"
        " CASE WHEN k.status = g.status THEN g.completed_at END"
        " FROM experiment_judgements g, LATERAL (SELECT CASE"
        "  WHEN $3 = 'rescore' OR g.status = 'completed' THEN g.status"
        "  WHEN EXISTS (SELECT 1 FROM experiment_runs r WHERE r.experiment_id = $1"
        "   AND r.case_index = g.case_index AND r.repeat = g.repeat"
        "   AND r.arm IN (0, g.treatment) AND r.status = 'pending') THEN 'waiting'"
        "  WHEN (SELECT count(*) FROM experiment_runs r WHERE r.experiment_id = $1"
        "   AND r.case_index = g.case_index AND r.repeat = g.repeat"
        "   AND r.arm IN (0, g.treatment) AND r.output IS NOT NULL"
        "   AND jsonb_typeof(r.output) <> 'null') = 2 THEN 'pending'"
        "  ELSE 'skipped' END AS status) k"
        " WHERE g.experiment_id = $2",
        3, pd, err);
    if (rc != EVD_OK)
        return rc;
    /* A case keeps its tallies when its judgements are as they were; one with a judgement
     * to run again has none until that judgement rebuilds them (so that it does not look
     * settled before it is). */
    rc = evd_db_exec(c,
                     "UPDATE experiment_cases n SET judged = s.judged FROM experiment_cases s"
                     " WHERE n.experiment_id = $1 AND s.experiment_id = $2"
                     " AND s.case_index = n.case_index AND s.judged IS NOT NULL"
                     " AND NOT EXISTS (SELECT 1 FROM experiment_judgements g"
                     " WHERE g.experiment_id = $1 AND g.case_index = n.case_index"
                     " AND g.status IN ('waiting', 'pending'))",
                     2, pd, err);
    if (rc != EVD_OK)
        return rc;
    return evd_db_exec(c,
                       "UPDATE experiment_cases n SET judge_unjudged = k.n FROM (SELECT"
                       " case_index, count(*) AS n FROM experiment_judgements"
                       " WHERE experiment_id = $1 AND status = 'skipped' GROUP BY case_index) k"
                       " WHERE n.experiment_id = $1 AND n.case_index = k.case_index",
                       1, pd, err);
}

json_t *evd_store_rescore_input(PGconn *c, const char *id, int case_index, int position,
                                struct evd_err *err)
{
    static const char *const cols[] = {"output", "metrics", "benchmark", "transcript"};
    char ci[16], pos[16];
    snprintf(ci, sizeof(ci), "%d", case_index);
    snprintf(pos, sizeof(pos), "%d", position);
    const char *p[] = {id, ci, pos};
    PGresult *r = evd_db_query(c,
                               "SELECT output::text, metrics::text, benchmark::text,"
                               " transcript::text FROM experiment_runs WHERE experiment_id = $1"
                               " AND case_index = $2::int AND position = $3::int",
                               3, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = NULL;
    if (PQntuples(r) != 1)
        evd_err_set(err, EVD_ENOTFOUND, "run %d/%d of %s not found", case_index, position, id);
    else
        out = evd_db_row_json_object(r, 0, cols, 4, err);
    PQclear(r);
    return out;
}

json_t *evd_store_experiment_bodies(PGconn *c, const char *id, struct evd_err *err)
{
    const char *p[] = {id};
    PGresult *r = evd_db_query(
        c, "SELECT body::text FROM experiment_cases WHERE experiment_id = $1 ORDER BY case_index",
        1, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = rows_json(r, err);
    PQclear(r);
    return out;
}
