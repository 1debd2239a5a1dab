/*
 * Server-Sent Events fed by an engine change subscription: the read loop, keep-alives
 * and event framing shared by the evaluation and session streams. A stream embeds
 * struct evd_sse as its first member; it lives from the handler that starts it until the
 * server calls its free callback, and the server reads it from one connection thread at
 * a time.
 */
#ifndef EVD_HANDLERS_SSE_H
#define EVD_HANDLERS_SSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/util.h"
#include "handlers/api.h"

#define EVD_SSE_KEEPALIVE_MS 15000

struct evd_sse {
    struct evd_engine *engine;    /* borrowed */
    struct evd_subscription *sub; /* owned; evd_sse_release unsubscribes */
    struct evd_buf pending;       /* queued bytes not read yet */
    size_t off;
    bool started, done;
    /* Queues the events of the current state (started is false the first time); sets
     * done to end the stream after them. */
    void (*emit)(struct evd_sse *s);
    /* Optional: runs when a change is noticed, before emit; a negative result ends the
     * stream (used to let a burst of changes settle). */
    int (*settle)(struct evd_sse *s);
};

/* Queues `event: name` with `data` (borrowed) serialized as compact JSON. */
void evd_sse_event(struct evd_sse *s, const char *name, const json_t *data);

/* Makes *resp a 200 text/event-stream read from `s`; the server calls free_fn(s) once
 * the stream ends (s is the address of the embedding stream). */
void evd_sse_start(struct evd_resp *resp, struct evd_sse *s, void (*free_fn)(void *cls));

/* Unsubscribes and frees the pending bytes; not `s` itself (NULL-safe). */
void evd_sse_release(struct evd_sse *s);

#endif
