/* SQL of the writer's batches and the claims they and the creation batches make; see
 * evals.h and batches.h. */
#include "store/batches.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "store/db.h"
#include "store/evals.h"

#define I64(buf, v) snprintf(buf, sizeof(buf), "%lld", (long long)(v))

/* A claim's columns from `col` on (o_outcome, o_job_id, o_kind, o_evaluation_id,
 * o_run_position, o_job_attempts, o_ref, o_attempt, o_request, o_rescore:
 * evald_claim_next's, migrations/0019) of row `row`; out->request is malloc'd. */
enum evd_code evd_store_claim_row(PGresult *r, int row, int col, struct evd_store_job *out,
                               enum evd_claim_outcome *outcome, int *attempt,
                               struct evd_err *err)
{
    static const struct {
        const char *name;
        enum evd_claim_outcome outcome;
    } outcomes[] = {{"none", EVD_CLAIM_NONE},         {"run", EVD_CLAIM_RUN},
                    {"obsolete", EVD_CLAIM_OBSOLETE}, {"claimed", EVD_CLAIM_CLAIMED}};
    out->request = NULL;
    const char *name = PQgetvalue(r, row, col);
    size_t k = 0, n = sizeof(outcomes) / sizeof(outcomes[0]);
    while (k < n && strcmp(name, outcomes[k].name) != 0)
        k++;
    if (k == n)
        return evd_err_set(err, EVD_EDB, "evald_claim answered outcome %s", name);
    *outcome = outcomes[k].outcome;
    *attempt = 0;
    if (*outcome != EVD_CLAIM_NONE) {
        out->id = evd_db_col_i64(r, row, col + 1);
        snprintf(out->kind, sizeof(out->kind), "%s", PQgetvalue(r, row, col + 2));
        snprintf(out->evaluation_id, sizeof(out->evaluation_id), "%s",
                 PQgetvalue(r, row, col + 3));
        out->run_position = (int)evd_db_col_i64(r, row, col + 4);
        out->attempts = (int)evd_db_col_i64(r, row, col + 5);
        snprintf(out->ref, sizeof(out->ref), "%s", PQgetvalue(r, row, col + 6));
        *attempt = (int)evd_db_col_i64(r, row, col + 7);
        if (!PQgetisnull(r, row, col + 8) &&
            (out->request = strdup(PQgetvalue(r, row, col + 8))) == NULL)
            return evd_err_set(err, EVD_ENOMEM, "out of memory");
        out->rescore = strcmp(PQgetvalue(r, row, col + 9), "t") == 0;
    }
    return EVD_OK;
}

/* The claim parameters of a batch function ($4-$6: how many, the lease, the attempts'
 * bound; none without claims), and no claim made yet. */
void evd_store_claims_params(struct evd_store_claims *claims, char want[16], char lease[32],
                          char max[16])
{
    snprintf(want, 16, "%d", claims != NULL ? claims->n : 0);
    snprintf(lease, 32, "%ld", claims != NULL ? claims->lease_ms : 0L);
    snprintf(max, 16, "%d", claims != NULL ? claims->max_attempts : 0);
    if (claims != NULL)
        claims->got = 0;
}

/*
 * The rows of a batch function (evald_finish_runs, evald_create_many): a row whose first
 * column is not NULL answers element o_index (1-based) of the batch, its o_result in
 * column 1 into results[] and, with job_left, its o_job_left in column 2; the others are
 * claims, their columns from claim_col on, into claims (when given), each with the lease
 * counted from `sent`. A claim was committed with the batch, so it is never an error of
 * the batch: one that cannot be read runs out its lease.
 */
void evd_store_batch_rows(PGresult *r, int claim_col, size_t n, int *results, int64_t *job_left,
                       struct evd_store_claims *claims, int64_t sent)
{
    for (int k = 0; k < PQntuples(r); k++) {
        if (PQgetisnull(r, k, 0)) {
            if (claims == NULL || claims->got >= (size_t)claims->n)
                continue;
            struct evd_store_claimed *cl = &claims->out[claims->got];
            struct evd_err cerr = {0};
            memset(cl, 0, sizeof(*cl));
            if (evd_store_claim_row(r, k, claim_col, &cl->job, &cl->outcome, &cl->attempt, &cerr) ==
                    EVD_OK &&
                cl->outcome != EVD_CLAIM_NONE && cl->outcome != EVD_CLAIM_OBSOLETE) {
                cl->job.claimed_mono = sent;
                claims->got++;
            } else {
                evd_store_job_clear(&cl->job);
            }
            continue;
        }
        long long i = evd_db_col_i64(r, k, 0) - 1;
        if (i >= 0 && (size_t)i < n) {
            if (results != NULL)
                results[i] = (int)evd_db_col_i64(r, k, 1);
            if (job_left != NULL)
                job_left[i] = evd_db_col_i64(r, k, 2);
        }
    }
}

/* The p_ahead parameter of evald_finish_runs_ahead (malloc'd text; NULL without memory). */
static char *ahead_param(const struct evd_store_ahead *ahead)
{
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < ahead->nitems; i++) {
        const struct evd_store_ahead_item *it = &ahead->items[i];
        json_t *o = it->evaluation_id != NULL
                        ? json_pack("{s:s, s:i, s:i, s:b}", "evaluation_id", it->evaluation_id,
                                    "after", it->after, "n", it->n, "need", it->need)
                        : json_pack("{s:b}", "need", it->need);
        if (o == NULL || json_array_append_new(a, o) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    char *text = a != NULL ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return text;
}

enum evd_code evd_store_runs_finish_ahead(PGconn *c, const char *array, int64_t now,
                                          const char *owner, size_t n, int *results,
                                          int64_t *job_left, struct evd_store_claims *claims,
                                          struct evd_store_ahead *ahead, struct evd_err *err)
{
    for (size_t i = 0; i < n; i++) {
        results[i] = EVD_RUN_NOT_WRITTEN;
        job_left[i] = 0;
    }
    ahead->got = 0;
    ahead->taken = 0;
    char now_s[32], want[16], lease[32], max[16];
    I64(now_s, now);
    evd_store_claims_params(claims, want, lease, max);
    char *items = ahead_param(ahead);
    if (items == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    const char *p[] = {array, now_s, owner ? owner : "", lease, max, items};
    ahead->sent = evd_mono_ms();
    PGresult *r = evd_db_query(c,
                               "SELECT * FROM evald_finish_runs_ahead($1::jsonb, $2::bigint, $3,"
                               " $4::bigint, $5::int, $6::jsonb)",
                               6, p, err);
    free(items);
    if (r == NULL)
        return evd_db_code(err);
    /* Columns: o_index, o_result, o_job_left, o_item, then a claim's (from 4). The runs
     * ahead and the count of jobs taken over are read here, the rest as a batch's rows. */
    for (int k = 0; k < PQntuples(r); k++) {
        if (!PQgetisnull(r, k, 0) || PQgetisnull(r, k, 4))
            continue;
        const char *what = PQgetvalue(r, k, 4);
        if (strcmp(what, "taken") == 0) {
            ahead->taken = (long)evd_db_col_i64(r, k, 8);
        } else if (strcmp(what, "ahead") == 0 && ahead->got < ahead->cap) {
            long long item = evd_db_col_i64(r, k, 3) - 1;
            if (item < 0 || (size_t)item >= ahead->nitems)
                continue;
            struct evd_store_ahead_run *run = &ahead->out[ahead->got++];
            run->item = (size_t)item;
            run->job_id = evd_db_col_i64(r, k, 5);
            run->position = (int)evd_db_col_i64(r, k, 8);
            run->job_attempts = (int)evd_db_col_i64(r, k, 9);
            run->attempt = (int)evd_db_col_i64(r, k, 11);
        }
    }
    evd_store_batch_rows(r, 4, n, results, job_left, claims, ahead->sent);
    PQclear(r);
    return EVD_OK;
}
