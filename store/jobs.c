/* SQL of handing jobs back and deleting held jobs; see jobs.h. */
#include "store/jobs.h"

#include <stdio.h>

static const char SQL_HAND_BACK[] =
    "WITH j AS (SELECT id FROM jobs WHERE id = $4::bigint AND lease_owner = $5 FOR UPDATE),"
    " r AS (UPDATE runs SET status = 'pending', attempt = attempt - 1, started_at = 0"
    " WHERE evaluation_id = $1 AND position = $2::int AND status = 'running'"
    " AND attempt = $3::int AND EXISTS (SELECT 1 FROM j) RETURNING 1)"
    " UPDATE jobs SET lease_owner = NULL, lease_until = NULL, due_at = now()"
    " WHERE id = (SELECT id FROM j) AND EXISTS (SELECT 1 FROM r)";

enum evd_code evd_store_job_hand_back(PGconn *c, int64_t job_id, const char *owner,
                                      const char *evaluation_id, int position, int attempt,
                                      struct evd_err *err)
{
    char pos[16], att[16], id[32];
    snprintf(pos, sizeof(pos), "%d", position);
    snprintf(att, sizeof(att), "%d", attempt);
    snprintf(id, sizeof(id), "%lld", (long long)job_id);
    const char *p[] = {evaluation_id, pos, att, id, owner};
    return evd_db_exec(c, SQL_HAND_BACK, 5, p, err);
}

static const char SQL_DELETE_OWNED[] =
    "DELETE FROM jobs WHERE id = $1::bigint AND lease_owner = $2";

enum evd_code evd_store_job_delete_owned(PGconn *c, int64_t job_id, const char *owner,
                                         struct evd_err *err)
{
    char id[32];
    snprintf(id, sizeof(id), "%lld", (long long)job_id);
    const char *p[] = {id, owner};
    return evd_db_exec(c, SQL_DELETE_OWNED, 2, p, err);
}
