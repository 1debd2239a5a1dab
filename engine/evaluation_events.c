/* The reads of an evaluation's event stream; see evaluation_events.h. */
#include "engine/evaluation_events.h"

#include "engine/internal.h"
#include "store/db.h"
#include "store/evals.h"

enum evd_code evd_eval_events_read(struct evd_engine *e, const char *evaluation_id, json_t **status,
                                   json_t **runs, struct evd_err *err)
{
    struct evd_err local = {0};
    *status = *runs = NULL;
    PGconn *c = evd_db_acquire(e->opts.db, &local);
    json_t *st = c ? evd_store_eval_status(c, evaluation_id, &local) : NULL;
    json_t *rs = st ? evd_store_runs(c, evaluation_id, false, &local) : NULL;
    evd_db_release(e->opts.db, c);
    if (st == NULL || rs == NULL) {
        json_decref(st);
        if (err)
            *err = local;
        return local.code != EVD_OK ? local.code : EVD_EDB;
    }
    *status = st;
    *runs = rs;
    return EVD_OK;
}
