/* SQL of judge calls and pair reviews; see judgements.h and migrations/0025_judges.sql. */
#include "store/judgements.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/db.h"
#include "store/evals.h"
#include "store/page.h"

#define I64(buf, v) snprintf(buf, sizeof(buf), "%lld", (long long)(v))

enum evd_code evd_store_judgements_create(PGconn *c, const char *id, int orders,
                                          const char *repeats, const char *treatments,
                                          const char *order, struct evd_err *err)
{
    char o[8];
    snprintf(o, sizeof(o), "%d", orders);
    const char *p[] = {id, o, repeats, treatments, order};
    enum evd_code rc =
        evd_db_exec(c, "UPDATE experiments SET judge_orders = $2::smallint WHERE id = $1", 2, p,
                    err);
    if (rc != EVD_OK)
        return rc;
    const char *q[] = {id, repeats, treatments, order};
    return evd_db_exec(
        c,
        "INSERT INTO experiment_judgements (experiment_id, case_index, position, repeat,"
        " treatment, judge_order)"
        " SELECT $1, c.case_index, p.position, p.repeat, p.treatment, p.judge_order"
        " FROM experiment_cases c,"
        " unnest($2::int[], $3::int[], $4::int[]) WITH ORDINALITY"
        " AS p(repeat, treatment, judge_order, position)"
        " WHERE c.experiment_id = $1",
        4, q, err);
}

enum evd_code evd_store_judge_pair(PGconn *c, const char *id, int case_index, int repeat,
                                   int treatment, json_t **control, json_t **treatment_out,
                                   json_t **judged, struct evd_err *err)
{
    char ci[16], rep[16], t[16];
    snprintf(ci, sizeof(ci), "%d", case_index);
    snprintf(rep, sizeof(rep), "%d", repeat);
    snprintf(t, sizeof(t), "%d", treatment);
    const char *p[] = {id, ci, rep, t};
    *control = *treatment_out = *judged = NULL;
    PGresult *r = evd_db_query(
        c,
        "SELECT (SELECT coalesce(r.output, 'null')::text FROM experiment_runs r"
        "  WHERE r.experiment_id = $1 AND r.case_index = $2::int AND r.repeat = $3::int"
        "  AND r.arm = 0),"
        " (SELECT coalesce(r.output, 'null')::text FROM experiment_runs r"
        "  WHERE r.experiment_id = $1 AND r.case_index = $2::int AND r.repeat = $3::int"
        "  AND r.arm = $4::int),"
        " (SELECT coalesce(json_agg(json_build_object('repeat', g.repeat, 'treatment',"
        "  g.treatment, 'order', g.judge_order, 'winner_slot', g.winner_slot, 'len_control',"
        "  g.len_control, 'len_treatment', g.len_treatment, 'metrics', g.metrics)"
        "  ORDER BY g.position), '[]')"
        "  FROM experiment_judgements g WHERE g.experiment_id = $1 AND g.case_index = $2::int"
        "  AND g.status IN ('completed', 'failed'))::text",
        4, p, err);
    if (r == NULL)
        return evd_db_code(err);
    enum evd_code rc = EVD_OK;
    if (PQntuples(r) != 1 || PQgetisnull(r, 0, 0) || PQgetisnull(r, 0, 1)) {
        rc = evd_err_set(err, EVD_ENOTFOUND, "pair not found: case %d repeat %d treatment %d",
                         case_index, repeat, treatment);
    } else {
        *control = evd_db_col_json(r, 0, 0);
        *treatment_out = evd_db_col_json(r, 0, 1);
        *judged = evd_db_col_json(r, 0, 2);
        if (*control == NULL || *treatment_out == NULL || *judged == NULL) {
            json_decref(*control);
            json_decref(*treatment_out);
            json_decref(*judged);
            *control = *treatment_out = *judged = NULL;
            rc = evd_err_set(err, EVD_EINTERNAL, "stored pair cannot be decoded");
        }
    }
    PQclear(r);
    return rc;
}

enum evd_code evd_store_judge_hand_back(PGconn *c, int64_t job_id, const char *owner,
                                        const char *id, int case_index, int position,
                                        int attempt, struct evd_err *err)
{
    char job[32], ci[16], pos[16], att[16];
    I64(job, job_id);
    snprintf(ci, sizeof(ci), "%d", case_index);
    snprintf(pos, sizeof(pos), "%d", position);
    snprintf(att, sizeof(att), "%d", attempt);
    const char *p[] = {job, owner, id, ci, pos, att};
    return evd_db_exec(
        c,
        "WITH j AS (SELECT id FROM jobs WHERE id = $1::bigint AND lease_owner = $2 FOR UPDATE),"
        " g AS (UPDATE experiment_judgements SET status = 'pending', attempt = attempt - 1,"
        " started_at = 0 WHERE experiment_id = $3 AND case_index = $4::int"
        " AND position = $5::int AND status = 'running' AND attempt = $6::int"
        " AND EXISTS (SELECT 1 FROM j) RETURNING 1)"
        " UPDATE jobs SET lease_owner = NULL, lease_until = NULL, due_at = now()"
        " WHERE id = (SELECT id FROM j)",
        6, p, err);
}

enum evd_code evd_store_judgements_cancel(PGconn *c, const char *id, int64_t now,
                                          struct evd_err *err)
{
    char ts[32];
    I64(ts, now);
    const char *p[] = {id, ts};
    return evd_db_exec(c,
                       "UPDATE experiment_judgements SET status = 'cancelled',"
                       " completed_at = $2::bigint, error = 'experiment cancelled'"
                       " WHERE experiment_id = $1"
                       " AND status IN ('waiting', 'pending', 'running')",
                       2, p, err);
}

/* One judgement as the API shows it (g the judgement, c its case, o its pair's outcome). */
#define JUDGEMENT_JSON                                                                         \
    "json_build_object('case_id', c.case_id, 'case_index', g.case_index, 'repeat', g.repeat," \
    " 'treatment', g.treatment, 'order', g.judge_order, 'status', g.status, 'winner_slot',"   \
    " g.winner_slot, 'winner_arm', CASE evald_judge_named(g.judge_order, g.winner_slot)"      \
    " WHEN 'control' THEN 0 WHEN 'treatment' THEN g.treatment END, 'reason', g.reason,"       \
    " 'outcome', o.o_outcome, 'inconsistent', coalesce(o.o_inconsistent, false), 'metrics',"  \
    " g.metrics, 'error', g.error, 'attempt', g.attempt, 'started_at', g.started_at,"         \
    " 'completed_at', g.completed_at)"

/* Keyed by case_index · 10^6 + position (a case has at most 8 · repeats judgements). */
static const char SQL_PAGE[] =
    "SELECT NULL::text, -1::bigint AS k FROM experiments WHERE id = $1"
    " UNION ALL (SELECT " JUDGEMENT_JSON "::text,"
    " g.case_index::bigint * 1000000 + g.position FROM experiment_judgements g"
    " JOIN experiment_cases c ON c.experiment_id = g.experiment_id"
    " AND c.case_index = g.case_index,"
    " LATERAL evald_pair_outcome(g.experiment_id, g.case_index, g.repeat, g.treatment) o"
    " WHERE g.experiment_id = $1"
    " AND ($4::jsonb->>'case_id' IS NULL OR c.case_id = $4::jsonb->>'case_id')"
    " AND (($4::jsonb->>'treatment')::int = 0 OR g.treatment = ($4::jsonb->>'treatment')::int)"
    " AND ($3::bigint IS NULL OR (g.case_index, g.position) >"
    " (($3::bigint / 1000000)::int, ($3::bigint % 1000000)::int))"
    " ORDER BY g.case_index, g.position LIMIT $2::int + 1) ORDER BY 2";

json_t *evd_store_judgements_list(PGconn *c, const char *id, const char *case_id, int treatment,
                                  unsigned limit, const char *before, char **next_cursor,
                                  struct evd_err *err)
{
    json_t *f = json_pack("{s:s?, s:i}", "case_id", case_id, "treatment", treatment);
    char *extra = f ? json_dumps(f, JSON_COMPACT) : NULL;
    json_decref(f);
    if (extra == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        return NULL;
    }
    json_t *rows = evd_store_page_ascending(c, SQL_PAGE, "experiment", id, extra, limit, before,
                                            next_cursor, err);
    free(extra);
    return rows;
}

#define PAIR_REVIEW_JSON                                                                       \
    "json_build_object('experiment_id', v.experiment_id, 'case_id', c.case_id, 'case_index',"  \
    " v.case_index, 'repeat', v.repeat, 'treatment', v.treatment, 'reviewer', v.reviewer,"      \
    " 'winner', v.winner, 'note', v.note, 'judge_outcome', (SELECT o.o_outcome FROM"            \
    " evald_pair_outcome(v.experiment_id, v.case_index, v.repeat, v.treatment) o),"             \
    " 'created_at', v.created_at, 'updated_at', v.updated_at)"

/* The pair: $1 experiment, $2 case_id, $3 repeat, $4 treatment. */
#define PAIR_FROM                                                                              \
    " FROM experiment_cases c WHERE c.experiment_id = $1 AND c.case_id = $2"                    \
    " AND $3::int BETWEEN 1 AND (SELECT repeats FROM experiments WHERE id = $1)"                \
    " AND $4::int BETWEEN 1 AND (SELECT arms - 1 FROM experiments WHERE id = $1)"

#define PAIR_RUN(arm)                                                                          \
    "(SELECT json_build_object('run_id', r.run_id, 'status', r.status, 'output', r.output)"    \
    " FROM experiment_runs r WHERE r.experiment_id = $1 AND r.case_index = c.case_index"        \
    " AND r.repeat = $3::int AND r.arm = " arm ")"

json_t *evd_store_pair(PGconn *c, const char *id, const char *case_id, int repeat,
                       int treatment, struct evd_err *err)
{
    char rep[16], t[16];
    snprintf(rep, sizeof(rep), "%d", repeat);
    snprintf(t, sizeof(t), "%d", treatment);
    const char *p[] = {id, case_id, rep, t};
    PGresult *r = evd_db_query(
        c,
        "SELECT (SELECT 1 FROM experiments WHERE id = $1),"
        " (SELECT json_build_object('case_id', c.case_id, 'case_index', c.case_index, 'repeat',"
        " $3::int, 'treatment', $4::int, 'body', c.body, 'control', " PAIR_RUN("0") ","
        " 'treatment_run', " PAIR_RUN("$4::int") ", 'judgements', (SELECT coalesce(json_agg("
        JUDGEMENT_JSON " ORDER BY g.position), '[]') FROM experiment_judgements g,"
        " LATERAL evald_pair_outcome(g.experiment_id, g.case_index, g.repeat, g.treatment) o"
        " WHERE g.experiment_id = $1 AND g.case_index = c.case_index AND g.repeat = $3::int"
        " AND g.treatment = $4::int), 'outcome', o.o_outcome, 'inconsistent',"
        " coalesce(o.o_inconsistent, false), 'human', (SELECT CASE WHEN h IS NULL THEN NULL ELSE"
        " json_build_object('winner', h) END FROM evald_pair_human($1, c.case_index, $3::int,"
        " $4::int) h), 'reviews', (SELECT coalesce(json_agg(" PAIR_REVIEW_JSON
        " ORDER BY v.seq), '[]') FROM experiment_pair_reviews v WHERE v.experiment_id = $1"
        " AND v.case_index = c.case_index AND v.repeat = $3::int AND v.treatment = $4::int))"
        "::text FROM experiment_cases c,"
        " LATERAL evald_pair_outcome($1, c.case_index, $3::int, $4::int) o"
        " WHERE c.experiment_id = $1 AND c.case_id = $2"
        " AND $3::int BETWEEN 1 AND (SELECT repeats FROM experiments WHERE id = $1)"
        " AND $4::int BETWEEN 1 AND (SELECT arms - 1 FROM experiments WHERE id = $1))",
        4, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = NULL;
    if (PQgetisnull(r, 0, 0))
        evd_err_set(err, EVD_ENOTFOUND, "experiment not found: %s", id);
    else if (PQgetisnull(r, 0, 1))
        evd_err_set(err, EVD_ENOTFOUND, "pair not found: case %s, repeat %d, treatment %d",
                    case_id, repeat, treatment);
    else if ((out = evd_db_col_json(r, 0, 1)) == NULL)
        evd_err_set(err, EVD_EINTERNAL, "stored pair cannot be decoded");
    PQclear(r);
    return out;
}

json_t *evd_store_pair_review_put(PGconn *c, const char *id, const char *case_id, int repeat,
                                  int treatment, const char *winner, const char *reviewer,
                                  const char *note, int64_t now, struct evd_err *err)
{
    char rep[16], t[16], ts[32];
    snprintf(rep, sizeof(rep), "%d", repeat);
    snprintf(t, sizeof(t), "%d", treatment);
    I64(ts, now);
    const char *p[] = {id, case_id, rep, t, reviewer, winner, note, ts};
    PGresult *r = evd_db_query(
        c,
        "WITH x AS (SELECT 1 FROM experiments WHERE id = $1),"
        " c AS (SELECT c.case_index" PAIR_FROM "),"
        " up AS (INSERT INTO experiment_pair_reviews (experiment_id, case_index, repeat,"
        " treatment, reviewer, winner, note, created_at, updated_at)"
        " SELECT $1, c.case_index, $3::int, $4::int, $5, $6, $7, $8::bigint, $8::bigint FROM c"
        " ON CONFLICT (experiment_id, case_index, repeat, treatment, reviewer) DO UPDATE SET"
        " winner = EXCLUDED.winner, note = EXCLUDED.note, updated_at = EXCLUDED.updated_at"
        " RETURNING case_index)"
        " SELECT (SELECT count(*) FROM x), (SELECT case_index FROM up)",
        8, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = NULL;
    if (strcmp(PQgetvalue(r, 0, 0), "0") == 0) {
        evd_err_set(err, EVD_ENOTFOUND, "experiment not found: %s", id);
    } else if (PQgetisnull(r, 0, 1)) {
        evd_err_set(err, EVD_ENOTFOUND, "pair not found: case %s, repeat %d, treatment %d",
                    case_id, repeat, treatment);
    } else {
        const char *q[] = {id, PQgetvalue(r, 0, 1), rep, t, reviewer};
        PGresult *one = evd_db_query(
            c,
            "SELECT " PAIR_REVIEW_JSON "::text FROM experiment_pair_reviews v"
            " JOIN experiment_cases c ON c.experiment_id = v.experiment_id"
            " AND c.case_index = v.case_index WHERE v.experiment_id = $1"
            " AND v.case_index = $2::int AND v.repeat = $3::int AND v.treatment = $4::int"
            " AND v.reviewer = $5",
            5, q, err);
        if (one != NULL) {
            if (PQntuples(one) != 1 || (out = evd_db_col_json(one, 0, 0)) == NULL)
                evd_err_set(err, EVD_EINTERNAL, "stored review cannot be read back");
            PQclear(one);
        }
    }
    PQclear(r);
    return out;
}

json_t *evd_store_pair_reviews(PGconn *c, const char *id, const char *reviewer, unsigned limit,
                               const char *before, char **next_cursor, struct evd_err *err)
{
    return evd_store_page_ascending(
        c,
        "SELECT NULL::text, -1::bigint AS k FROM experiments WHERE id = $1"
        " UNION ALL (SELECT " PAIR_REVIEW_JSON "::text, v.seq FROM experiment_pair_reviews v"
        " JOIN experiment_cases c ON c.experiment_id = v.experiment_id"
        " AND c.case_index = v.case_index"
        " WHERE v.experiment_id = $1 AND ($3::bigint IS NULL OR v.seq > $3::bigint)"
        " AND ($4::text IS NULL OR v.reviewer = $4) ORDER BY v.seq LIMIT $2::int + 1)"
        " ORDER BY 2",
        "experiment", id, reviewer, limit, before, next_cursor, err);
}

json_t *evd_store_pair_agreement(PGconn *c, const char *id, struct evd_err *err)
{
    const char *p[] = {id};
    PGresult *r = evd_db_query(
        c,
        "SELECT (SELECT 1 FROM experiments WHERE id = $1),"
        " (SELECT coalesce(json_agg(json_build_object('treatment', treatment, 'judge', judge,"
        " 'human', human, 'count', n)), '[]') FROM (SELECT q.treatment, q.judge, q.human,"
        " count(*) AS n FROM (SELECT DISTINCT ON (v.case_index, v.repeat, v.treatment)"
        " v.treatment, o.o_outcome AS judge,"
        " evald_pair_human(v.experiment_id, v.case_index, v.repeat, v.treatment) AS human"
        " FROM experiment_pair_reviews v,"
        " LATERAL evald_pair_outcome(v.experiment_id, v.case_index, v.repeat, v.treatment) o"
        " WHERE v.experiment_id = $1) q WHERE q.judge IS NOT NULL AND q.human IS NOT NULL"
        " GROUP BY 1, 2, 3) t)::text",
        1, p, err);
    if (r == NULL)
        return NULL;
    json_t *out = NULL;
    if (PQgetisnull(r, 0, 0))
        evd_err_set(err, EVD_ENOTFOUND, "experiment not found: %s", id);
    else if ((out = evd_db_col_json(r, 0, 1)) == NULL)
        evd_err_set(err, EVD_EINTERNAL, "stored agreement cannot be decoded");
    PQclear(r);
    return out;
}
