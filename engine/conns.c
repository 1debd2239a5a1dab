/*
 * The engine's database connections: a worker's (struct evd_wconn, taken from the
 * workers' pool only while it talks to the database) and the connections of its own that
 * LISTEN (the keeper's, the sweeper's, the analyst's). The bottom of the engine: it calls
 * nothing else of it.
 */
#include "common/log.h"
#include "engine/internal.h"
#include "store/db.h"
#include "store/listen.h"

/* ---- the workers' connections --------------------------------------------------- */

PGconn *evd_wconn_get(struct evd_wconn *w, struct evd_err *err)
{
    if (w->c == NULL)
        w->c = evd_db_acquire(w->e->wdb, err);
    return w->c;
}

void evd_wconn_put(struct evd_wconn *w)
{
    if (w->c != NULL)
        evd_db_release(w->e->wdb, w->c);
    w->c = NULL;
}

PGconn *evd_wconn_borrow(struct evd_wconn *w, bool *had, struct evd_err *err)
{
    *had = w->c != NULL;
    return evd_wconn_get(w, err);
}

void evd_wconn_return(struct evd_wconn *w, bool had)
{
    if (!had)
        evd_wconn_put(w);
}

/* ---- connections that LISTEN ------------------------------------------------------ */

/* A listener on the engine's channels (none: a worker's or the sweeper's connection). */
struct evd_listener *evd_engine_listener(struct evd_engine *e, const char *const *channels,
                                         evd_listen_fn on_notify)
{
    struct evd_listener_opts o = {.conninfo = e->opts.conninfo,
                                  .channels = channels,
                                  .wake_fd = e->wake_pipe[0],
                                  .stopping = &e->stopping,
                                  .what = "engine connection failed, retrying",
                                  .on_notify = on_notify,
                                  .arg = e};
    struct evd_listener *l = evd_listener_new(&o);
    if (l == NULL)
        evd_log(EVD_LOG_ERROR, "out of memory for an engine connection", NULL);
    return l;
}
