/*
 * One reconnecting listener: a dedicated PostgreSQL connection that LISTENs on a set of
 * channels (none: a plain worker connection that reconnects the same way), waits for
 * input or a wake fd with a timeout, hands each notification to a callback, and after a
 * failure connects again with a backoff (500 ms doubling to 8 s, back to 500 ms once a
 * connection is made). The engine's keeper, workers and sweeper, the webhook delivery
 * threads and the iii adapter's delivery thread all use it.
 *
 * Thread-safety: a listener belongs to one thread. The connection it hands out may run
 * statements between waits; a notification read along with a statement's answer stays
 * queued until the next evd_listener_wait or evd_listener_deliver.
 */
#ifndef EVD_STORE_LISTEN_H
#define EVD_STORE_LISTEN_H

#include <stdatomic.h>
#include <stdbool.h>

#include "store/db.h"

/* Called per notification; channel and payload are borrowed for the call. */
typedef void (*evd_listen_fn)(void *arg, const char *channel, const char *payload);

struct evd_listener_opts {
    const char *conninfo;        /* borrowed for the listener's life */
    const char *const *channels; /* NULL-terminated, borrowed; NULL: LISTEN on nothing */
    int wake_fd;                 /* readable: stop waiting (and pausing) now; -1: none */
    const atomic_bool *stopping; /* set: give up connecting */
    const char *what;            /* the warning logged when a connection attempt fails */
    evd_listen_fn on_notify;     /* NULL: notifications are discarded */
    void *arg;
};

struct evd_listener;

/* A listener with no connection yet; NULL when out of memory. opts is copied. */
struct evd_listener *evd_listener_new(const struct evd_listener_opts *opts);
/* Closes the connection and frees the listener (NULL-safe). */
void evd_listener_free(struct evd_listener *l);
/* The connection, connecting and LISTENing first when there is none (pausing between
 * failed attempts); NULL only when stopping. */
PGconn *evd_listener_conn(struct evd_listener *l);
/* Closes the connection (it failed); the next evd_listener_conn reconnects. */
void evd_listener_drop(struct evd_listener *l);
/* True when the connection is up; else drops it. */
bool evd_listener_alive(struct evd_listener *l);
/* evd_db_ensure on the connection; drops it when that fails. */
bool evd_listener_ensure(struct evd_listener *l);
/* The connection's socket, for a caller that polls it itself; -1 when there is none. */
int evd_listener_fd(const struct evd_listener *l);
/* Hands the notifications already read to the callback; returns how many. */
int evd_listener_deliver(struct evd_listener *l);
/* Reads what arrived on the socket and delivers its notifications; false (connection
 * dropped) when the connection broke. */
bool evd_listener_read(struct evd_listener *l);
/*
 * Waits up to ms for input on the connection or the wake fd, reads it and delivers the
 * notifications. *woken (may be NULL) when the wake fd is readable. False (connection
 * dropped) when the connection broke.
 */
bool evd_listener_wait(struct evd_listener *l, int ms, bool *woken);

#endif
