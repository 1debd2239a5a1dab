/*
 * See sse.h. The read callback blocks on the subscription (bounded by the keep-alive
 * interval) instead of polling, and hands out queued bytes until none are left.
 */
#include "handlers/sse.h"

#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

void evd_sse_event(struct evd_sse *s, const char *name, const json_t *data)
{
    char *text = evd_json_dump(data, NULL);
    if (text != NULL)
        evd_buf_printf(&s->pending, "event: %s\ndata: %s\n\n", name, text);
    free(text);
}

static ssize_t sse_read(void *cls, char *buf, size_t max)
{
    struct evd_sse *s = cls;
    while (s->off >= s->pending.len) {
        s->pending.len = 0;
        s->off = 0;
        if (s->done)
            return -1;
        if (!s->started) {
            s->emit(s);
            s->started = true;
            continue;
        }
        int w = evd_engine_wait(s->engine, s->sub, EVD_SSE_KEEPALIVE_MS);
        if (w < 0)
            return -1;
        if (w == 0) {
            evd_buf_printf(&s->pending, ": keep-alive\n\n");
            continue;
        }
        if (s->settle != NULL && s->settle(s) < 0)
            return -1;
        s->emit(s);
    }
    size_t n = s->pending.len - s->off;
    if (n > max)
        n = max;
    memcpy(buf, s->pending.data + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

void evd_sse_start(struct evd_resp *resp, struct evd_sse *s, void (*free_fn)(void *cls))
{
    resp->status = 200;
    resp->content_type = "text/event-stream";
    resp->stream = sse_read;
    resp->stream_cls = s;
    resp->stream_free = free_fn;
    evd_resp_header(resp, "Cache-Control", "no-cache");
    evd_resp_header(resp, "X-Accel-Buffering", "no");
}

void evd_sse_release(struct evd_sse *s)
{
    if (s == NULL)
        return;
    evd_engine_unsubscribe(s->engine, s->sub);
    s->sub = NULL;
    evd_buf_free(&s->pending);
}
