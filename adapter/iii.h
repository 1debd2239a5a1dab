/*
 * The iii engine adapter: evald as an iii worker. One connection thread speaks the
 * engine's WebSocket protocol (adapter/conn.c), a few handler threads answer the
 * engine's invocations of the eval functions through evd_function_call, and a
 * delivery thread fires eval::completed from the completion_events outbox to the
 * bindings the engine announced. Other threads (engine workers) call engine functions
 * through evd_iii_remote(), which plugs into the engine as `struct evd_engine_remote`.
 *
 * Lifetime: evd_iii_new (no thread) → evd_iii_start → evd_iii_signal_stop →
 * evd_iii_stop (joins; calls fail fast from then on) → evd_iii_free once nothing can
 * call evd_iii_remote() functions any more (after evd_engine_stop). Thread-safe.
 */
#ifndef EVD_ADAPTER_III_H
#define EVD_ADAPTER_III_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

struct evd_ctx;
struct evd_engine_remote;
struct evd_iii;

struct evd_iii_options {
    const char *url;      /* III_URL, ws://host:port[/path] */
    const char *conninfo; /* PostgreSQL, for the delivery thread's own connection */
    int handler_threads;  /* 0 = 4 */
    /* Timings; 0 = the default in brackets. */
    long ping_interval_ms;   /* WebSocket ping period [20000] */
    long idle_timeout_ms;    /* reconnect when nothing arrived this long [60000] */
    long backoff_initial_ms; /* first reconnect delay [1000], doubled up to max */
    long backoff_max_ms;     /* [30000] */
    long connect_timeout_ms; /* TCP connect + upgrade handshake [10000] */
    long retention_ms;       /* completion events older than this are not delivered
                                and delivery records are pruned [86400000] */
    long deliver_poll_ms;    /* outbox poll when no notification came [2000] */
};

/* Validates the options (the URL above all) and allocates the adapter; no thread yet.
 * NULL + err (EVD_EINVAL naming III_URL) on bad options. */
struct evd_iii *evd_iii_new(const struct evd_iii_options *opts, struct evd_err *err);

/* The engine-facing function table (borrowed; valid until evd_iii_free). */
const struct evd_engine_remote *evd_iii_remote(struct evd_iii *a);

/* Starts the threads; `ctx` (borrowed, must outlive evd_iii_stop) is what the
 * eval functions are called with. */
enum evd_code evd_iii_start(struct evd_iii *a, struct evd_ctx *ctx, struct evd_err *err);

/* Begins stopping: no new invocation is taken, waiting calls fail, the connection
 * thread sends a Close frame. NULL-safe, idempotent. */
void evd_iii_signal_stop(struct evd_iii *a);
/* Joins every thread (in-flight invocations finish first). NULL-safe. */
void evd_iii_stop(struct evd_iii *a);
/* Frees the adapter. NULL-safe. */
void evd_iii_free(struct evd_iii *a);

/* True while a WebSocket session with the engine is open. */
bool evd_iii_connected(struct evd_iii *a);

#endif
