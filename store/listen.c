/* The reconnecting listener; see listen.h. */
#include "store/listen.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"

#define PAUSE_FIRST_MS 500
#define PAUSE_MAX_MS 8000

struct evd_listener {
    struct evd_listener_opts o;
    PGconn *c;
    int pause_ms; /* before the next attempt after a failed one */
};

struct evd_listener *evd_listener_new(const struct evd_listener_opts *opts)
{
    struct evd_listener *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    l->o = *opts;
    l->pause_ms = PAUSE_FIRST_MS;
    return l;
}

void evd_listener_free(struct evd_listener *l)
{
    if (l == NULL)
        return;
    evd_db_finish(l->c);
    free(l);
}

/* Sleeps up to ms, or until the wake fd is readable. */
static void pause_ms(const struct evd_listener *l, int ms)
{
    struct pollfd pfd = {.fd = l->o.wake_fd, .events = POLLIN};
    poll(&pfd, l->o.wake_fd >= 0 ? 1 : 0, ms);
}

PGconn *evd_listener_conn(struct evd_listener *l)
{
    while (l->c == NULL && !atomic_load(l->o.stopping)) {
        struct evd_err err = {0};
        PGconn *c = evd_db_connect(l->o.conninfo, &err);
        bool ok = c != NULL;
        for (size_t i = 0; ok && l->o.channels && l->o.channels[i]; i++) {
            char sql[80];
            snprintf(sql, sizeof(sql), "LISTEN %s", l->o.channels[i]);
            ok = evd_db_exec(c, sql, 0, NULL, &err) == EVD_OK;
        }
        if (ok) {
            l->c = c;
            l->pause_ms = PAUSE_FIRST_MS;
            break;
        }
        evd_db_finish(c);
        evd_log(EVD_LOG_WARN, l->o.what, "error", err.msg, NULL);
        pause_ms(l, l->pause_ms);
        l->pause_ms = l->pause_ms < PAUSE_MAX_MS / 2 ? l->pause_ms * 2 : PAUSE_MAX_MS;
    }
    return l->c;
}

void evd_listener_drop(struct evd_listener *l)
{
    evd_db_finish(l->c);
    l->c = NULL;
}

bool evd_listener_alive(struct evd_listener *l)
{
    if (l->c != NULL && PQstatus(l->c) == CONNECTION_OK)
        return true;
    evd_listener_drop(l);
    return false;
}

bool evd_listener_ensure(struct evd_listener *l)
{
    if (l->c != NULL && evd_db_ensure(l->c))
        return true;
    evd_listener_drop(l);
    return false;
}

int evd_listener_fd(const struct evd_listener *l)
{
    return l->c != NULL ? PQsocket(l->c) : -1;
}

int evd_listener_deliver(struct evd_listener *l)
{
    int n = 0;
    PGnotify *m;
    while (l->c != NULL && (m = PQnotifies(l->c)) != NULL) {
        if (l->o.on_notify != NULL)
            l->o.on_notify(l->o.arg, m->relname, m->extra);
        PQfreemem(m);
        n++;
    }
    return n;
}

bool evd_listener_read(struct evd_listener *l)
{
    if (l->c == NULL)
        return false;
    if (!PQconsumeInput(l->c)) {
        evd_listener_drop(l);
        return false;
    }
    evd_listener_deliver(l);
    return evd_listener_alive(l);
}

bool evd_listener_wait(struct evd_listener *l, int ms, bool *woken)
{
    if (woken != NULL)
        *woken = false;
    if (l->c == NULL)
        return false;
    struct pollfd pfd[2] = {{.fd = PQsocket(l->c), .events = POLLIN},
                            {.fd = l->o.wake_fd, .events = POLLIN}};
    if (poll(pfd, l->o.wake_fd >= 0 ? 2 : 1, ms) < 0 && errno != EINTR) {
        evd_listener_drop(l);
        return false;
    }
    if (woken != NULL && l->o.wake_fd >= 0 && pfd[1].revents)
        *woken = true;
    if (pfd[0].revents)
        return evd_listener_read(l);
    evd_listener_deliver(l);
    return evd_listener_alive(l);
}
