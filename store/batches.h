/*
 * What the batch functions of store/ share (store/batches.c): reading a claim's columns
 * and a batch's rows, and the claim parameters. Private to store/.
 */
#ifndef EVD_STORE_BATCHES_H
#define EVD_STORE_BATCHES_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "common/err.h"
#include "store/evals.h"

/* A claim's columns from `col` on (o_outcome, o_job_id, o_kind, o_evaluation_id,
 * o_run_position, o_job_attempts, o_ref, o_attempt, o_request, o_rescore:
 * evald_claim_next's, migrations/0019) of row `row`; out->request is malloc'd. */
enum evd_code evd_store_claim_row(PGresult *r, int row, int col, struct evd_store_job *out,
                                  enum evd_claim_outcome *outcome, int *attempt,
                                  struct evd_err *err);
/* The claim parameters of a batch function (how many, the lease, the attempts' bound;
 * none without claims), and no claim made yet. */
void evd_store_claims_params(struct evd_store_claims *claims, char want[16], char lease[32],
                             char max[16]);
/* The rows of a batch function: see store/batches.c. */
void evd_store_batch_rows(PGresult *r, int claim_col, size_t n, int *results, int64_t *job_left,
                          struct evd_store_claims *claims, int64_t sent);

#endif
