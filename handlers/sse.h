/*
 * Server-Sent Events fed by engine change subscriptions: framing, keep-alives, the
 * settle hook, and the hub, one thread that watches every paused stream.
 *
 * No server thread ever waits for an event. A stream with nothing to send parks itself in
 * the hub and answers EVD_STREAM_PAUSE (the server suspends the connection); the hub's
 * thread wakes it when its subscription moves, its settle delay or keep-alive is due, or
 * the engine stops. So any number of open streams costs one thread and no pool thread.
 *
 * A stream embeds struct evd_sse as its first member; it lives from the handler that
 * starts it until the server calls its free callback. The server reads it from one thread
 * at a time. Lock order: the hub's mutex, then the server's (the hub calls the wake
 * function under its mutex; the server never calls a stream under its own).
 */
#ifndef EVD_HANDLERS_SSE_H
#define EVD_HANDLERS_SSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/util.h"
#include "handlers/api.h"

/* A stream silent this long gets a keep-alive, and reads its state again: a change whose
 * notification was lost (LISTEN does not queue notifications for a connection that is
 * reconnecting) reaches it then. */
#define EVD_SSE_KEEPALIVE_MS 15000
/* A stream whose state could not be read reads it again after this long. */
#define EVD_SSE_RETRY_MS 1000

struct evd_sse_hub;

struct evd_sse {
    struct evd_engine *engine;    /* borrowed */
    struct evd_sse_hub *hub;      /* borrowed (req->ctx->sse) */
    struct evd_subscription *sub; /* owned; evd_sse_release unsubscribes */
    struct evd_buf pending;       /* queued bytes not read yet */
    size_t off;
    bool started, done;
    /* Set by emit when it could not read the state (the database is away, the pool busy):
     * the stream reads it again after EVD_SSE_RETRY_MS, without waiting for another
     * change, which may never come (the last change of an evaluation or experiment). */
    bool retry;
    /* A digest of the last event the last emit queued: a keep-alive reads the state again
     * and sends it only when it is more than that (see sse.c). */
    uint64_t last_emitted;
    /* The state moves without announcing it (a running turn's elapsed time and progress):
     * a keep-alive's read differs while anything runs, and is sent as a refresh, not
     * logged as a missed change. */
    bool timed;
    /* Queues the events of the current state (started is false the first time); sets
     * done to end the stream after them. Runs on the server's handler pool: may read the
     * database, must not wait for changes. */
    void (*emit)(struct evd_sse *s);
    /* Optional: runs when a change is noticed, before emit. Returns 0 to emit now, a
     * delay in milliseconds to emit once it has passed (changes meanwhile join that one
     * emit: a burst settles), or a negative number to end the stream. */
    int (*settle)(struct evd_sse *s);

    /* The hub's; guarded by its mutex. */
    evd_stream_wake_fn wake;
    void *wake_token;
    bool registered, parked, changed;
    int64_t keepalive_at; /* evd_mono_ms() of the next keep-alive */
    int64_t settle_at;    /* with changed: emit not before this (0 = at once) */
    struct evd_sse *prev, *next;
};

/* Starts the hub's thread for `engine` (borrowed; the hub must stop before it). NULL on
 * failure with *err set. */
struct evd_sse_hub *evd_sse_hub_start(struct evd_engine *engine, struct evd_err *err);
/* Stops and frees the hub; every stream must be released first (stop the HTTP server
 * before). NULL-safe. */
void evd_sse_hub_stop(struct evd_sse_hub *hub);

/* Queues `event: name` with `data` (borrowed) serialized as compact JSON. */
void evd_sse_event(struct evd_sse *s, const char *name, const json_t *data);

/* Makes *resp a 200 text/event-stream read from `s` (s->engine, s->hub, s->sub and emit
 * set); the server calls free_fn(s) once the stream ends (s is the address of the
 * embedding stream). */
void evd_sse_start(struct evd_resp *resp, struct evd_sse *s, void (*free_fn)(void *cls));

/* Leaves the hub, unsubscribes and frees the pending bytes; not `s` itself (NULL-safe).
 * After it returns the hub no longer calls the stream's wake function. */
void evd_sse_release(struct evd_sse *s);

#endif
