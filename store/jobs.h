/*
 * SQL of the job queue that the engine's runner and writer run beside the claim
 * (evd_store_job_claim_start and the other job calls in store/evals.h): handing a run
 * back and deleting a job this process still holds.
 */
#ifndef EVD_STORE_JOBS_H
#define EVD_STORE_JOBS_H

#include <stdint.h>

#include "common/err.h"
#include "store/db.h"

/*
 * Hands attempt `attempt` of run `position` of evaluation `evaluation_id` back: the run
 * pending again, the attempt not counted, job `job_id` free for anyone at once. Only
 * while `owner` still holds the job's lease and the run is still at this attempt and
 * running; otherwise changes nothing (and succeeds).
 */
enum evd_code evd_store_job_hand_back(PGconn *c, int64_t job_id, const char *owner,
                                      const char *evaluation_id, int position, int attempt,
                                      struct evd_err *err);
/* Deletes job `job_id` when `owner` holds its lease; otherwise changes nothing. */
enum evd_code evd_store_job_delete_owned(PGconn *c, int64_t job_id, const char *owner,
                                         struct evd_err *err);

#endif
