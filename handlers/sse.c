/*
 * See sse.h. DESIGN: a stream's reader (a server thread) decides under the hub's mutex
 * what to do next: end, settle, emit, send a keep-alive, or park. It polls its
 * subscription in that same critical section, so a change cannot fall between the poll
 * and the parking: the hub thread reads the engine's generation before it scans the
 * parked streams, and any later publish moves that generation and makes it scan again.
 * A parked stream whose deadline is earlier than the hub's current wait nudges the
 * engine so that the hub recomputes it.
 */
#include "handlers/sse.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "engine/engine.h"

struct evd_sse_hub {
    struct evd_engine *engine; /* borrowed */
    pthread_mutex_t mu;        /* guards everything below and the hub fields of streams */
    pthread_cond_t cv;         /* the thread waits here once the engine is stopping */
    struct evd_sse *streams;   /* attached streams, parked or not */
    int64_t wait_until;        /* evd_mono_ms() the thread waits until (0 = not waiting) */
    bool stop;
    pthread_t thread;
};

enum step { STEP_END, STEP_SETTLE, STEP_EMIT, STEP_KEEPALIVE, STEP_PAUSE };

/* Is a parked stream due now? Under hub->mu. */
static bool due(const struct evd_sse *s, int64_t now)
{
    return (s->changed && now >= s->settle_at) || now >= s->keepalive_at;
}

static int64_t deadline_of(const struct evd_sse *s)
{
    return s->changed && s->settle_at < s->keepalive_at ? s->settle_at : s->keepalive_at;
}

/* What the reader does next; parks the stream when nothing is due. */
static enum step next_step(struct evd_sse *s)
{
    struct evd_sse_hub *h = s->hub;
    int64_t now = evd_mono_ms();
    enum step st = STEP_PAUSE;
    bool nudge = false;
    pthread_mutex_lock(&h->mu);
    int w = evd_engine_wait(s->engine, s->sub, 0);
    if (w > 0)
        s->changed = true;
    if (s->retry) {
        /* The last emit could not read the state: read it again soon, as after a change
         * that settles for EVD_SSE_RETRY_MS. */
        s->retry = false;
        s->changed = true;
        s->settle_at = now + EVD_SSE_RETRY_MS;
    }
    if (w < 0 || h->stop) {
        st = STEP_END;
    } else if (s->changed && s->settle_at == 0 && s->settle != NULL) {
        st = STEP_SETTLE;
    } else if (s->changed && now >= s->settle_at) {
        s->changed = false;
        s->settle_at = 0;
        s->keepalive_at = now + EVD_SSE_KEEPALIVE_MS;
        st = STEP_EMIT;
    } else if (now >= s->keepalive_at) {
        s->keepalive_at = now + EVD_SSE_KEEPALIVE_MS;
        st = STEP_KEEPALIVE;
    } else {
        s->parked = true;
        nudge = h->wait_until != 0 && deadline_of(s) < h->wait_until;
    }
    pthread_mutex_unlock(&h->mu);
    if (nudge)
        evd_engine_nudge(s->engine);
    return st;
}

/* FNV-1a of the queued bytes from `from` on. */
static uint64_t digest(const struct evd_buf *b, size_t from)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = from; i < b->len; i++)
        h = (h ^ (unsigned char)b->data[i]) * 1099511628211ULL;
    return h;
}

/* Where the last queued event begins (0 when none does). */
static size_t last_event(const struct evd_buf *b)
{
    for (size_t i = b->len; i-- > 0;)
        if ((i == 0 || b->data[i - 1] == '\n') && b->len - i >= 7 &&
            memcmp(b->data + i, "event: ", 7) == 0)
            return i;
    return 0;
}

/* An emit; remembers its last event (every emit ends with the whole state: the status or
 * progress event, or the session), which is all an emit queues when nothing changed. */
static void emit(struct evd_sse *s)
{
    s->emit(s);
    if (!s->retry)
        s->last_emitted = digest(&s->pending, last_event(&s->pending));
}

/*
 * At a keep-alive: the state read again, sent only when it is more than the last event
 * sent (an emit that finds nothing new queues just that), which means a change came
 * without its notification (or just before it); else a keep-alive comment. Changes are
 * announced by NOTIFY, which PostgreSQL does not keep for a listener that is
 * reconnecting: without this a stream could wait for ever for the last change of an
 * evaluation or experiment that had already happened.
 */
static void emit_again(struct evd_sse *s)
{
    s->emit(s);
    if (s->retry)
        return; /* its comment is the keep-alive; the read is tried again soon */
    if (digest(&s->pending, 0) == s->last_emitted && !s->done) {
        s->pending.len = 0;
        evd_buf_printf(&s->pending, ": keep-alive\n\n");
        return;
    }
    s->last_emitted = digest(&s->pending, last_event(&s->pending));
    if (!s->timed)
        evd_log(EVD_LOG_INFO, "an event stream found a change no notification announced",
                NULL);
}

static ssize_t sse_read(void *cls, char *buf, size_t max)
{
    struct evd_sse *s = cls;
    while (s->off >= s->pending.len) {
        s->pending.len = 0;
        s->off = 0;
        if (s->done)
            return EVD_STREAM_END;
        if (!s->started) {
            emit(s);
            s->started = true;
            continue;
        }
        switch (next_step(s)) {
        case STEP_END:
            return EVD_STREAM_END;
        case STEP_PAUSE:
            return EVD_STREAM_PAUSE;
        case STEP_KEEPALIVE:
            emit_again(s);
            break;
        case STEP_EMIT:
            emit(s);
            break;
        case STEP_SETTLE: {
            int d = s->settle(s);
            if (d < 0)
                return EVD_STREAM_END;
            pthread_mutex_lock(&s->hub->mu);
            s->settle_at = d > 0 ? evd_mono_ms() + d : 1; /* 1: passed; 0 is "not settling" */
            pthread_mutex_unlock(&s->hub->mu);
            break;
        }
        }
    }
    size_t n = s->pending.len - s->off;
    if (n > max)
        n = max;
    memcpy(buf, s->pending.data + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

static void sse_attach(void *cls, evd_stream_wake_fn wake, void *token)
{
    struct evd_sse *s = cls;
    struct evd_sse_hub *h = s->hub;
    pthread_mutex_lock(&h->mu);
    s->wake = wake;
    s->wake_token = token;
    s->keepalive_at = evd_mono_ms() + EVD_SSE_KEEPALIVE_MS;
    s->next = h->streams;
    if (h->streams != NULL)
        h->streams->prev = s;
    h->streams = s;
    s->registered = true;
    pthread_mutex_unlock(&h->mu);
}

static void *hub_main(void *arg)
{
    struct evd_sse_hub *h = arg;
    uint64_t gen = 0;
    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        int64_t now = evd_mono_ms();
        int64_t until = now + EVD_SSE_KEEPALIVE_MS;
        for (struct evd_sse *s = h->streams; s != NULL; s = s->next) {
            if (!s->parked)
                continue;
            int w = evd_engine_wait(h->engine, s->sub, 0);
            if (w > 0)
                s->changed = true;
            if (w < 0 || due(s, now)) {
                s->parked = false;
                s->wake(s->wake_token);
            } else if (deadline_of(s) < until) {
                until = deadline_of(s);
            }
        }
        h->wait_until = until;
        pthread_mutex_unlock(&h->mu);
        int64_t ms = until - now;
        int rc = evd_engine_wait_any(h->engine, &gen, ms < 1 ? 1 : (int)ms);
        pthread_mutex_lock(&h->mu);
        h->wait_until = 0;
        if (rc < 0) {
            /* Stopping: wake every parked stream (each then sees the stop and ends), then
             * wait for evd_sse_hub_stop; readers no longer park. */
            for (struct evd_sse *s = h->streams; s != NULL; s = s->next)
                if (s->parked) {
                    s->parked = false;
                    s->wake(s->wake_token);
                }
            while (!h->stop)
                pthread_cond_wait(&h->cv, &h->mu);
        }
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

struct evd_sse_hub *evd_sse_hub_start(struct evd_engine *engine, struct evd_err *err)
{
    struct evd_sse_hub *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        return NULL;
    }
    h->engine = engine;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    if (pthread_create(&h->thread, NULL, hub_main, h) != 0) {
        pthread_mutex_destroy(&h->mu);
        pthread_cond_destroy(&h->cv);
        free(h);
        evd_err_set(err, EVD_EINTERNAL, "could not start the event stream thread");
        return NULL;
    }
    return h;
}

void evd_sse_hub_stop(struct evd_sse_hub *h)
{
    if (h == NULL)
        return;
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    evd_engine_nudge(h->engine);
    pthread_join(h->thread, NULL);
    assert(h->streams == NULL);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h);
}

void evd_sse_event(struct evd_sse *s, const char *name, const json_t *data)
{
    char *text = evd_json_dump(data, NULL);
    if (text != NULL)
        evd_buf_printf(&s->pending, "event: %s\ndata: %s\n\n", name, text);
    free(text);
}

void evd_sse_start(struct evd_resp *resp, struct evd_sse *s, void (*free_fn)(void *cls))
{
    assert(s->hub != NULL && s->engine != NULL && s->sub != NULL);
    resp->status = 200;
    resp->content_type = "text/event-stream";
    resp->stream = sse_read;
    resp->stream_cls = s;
    resp->stream_free = free_fn;
    resp->stream_attach = sse_attach;
    evd_resp_header(resp, "Cache-Control", "no-cache");
    evd_resp_header(resp, "X-Accel-Buffering", "no");
}

void evd_sse_release(struct evd_sse *s)
{
    if (s == NULL)
        return;
    if (s->registered) {
        struct evd_sse_hub *h = s->hub;
        pthread_mutex_lock(&h->mu);
        if (s->prev != NULL)
            s->prev->next = s->next;
        else
            h->streams = s->next;
        if (s->next != NULL)
            s->next->prev = s->prev;
        s->registered = false;
        s->parked = false;
        pthread_mutex_unlock(&h->mu);
    }
    evd_engine_unsubscribe(s->engine, s->sub);
    s->sub = NULL;
    evd_buf_free(&s->pending);
}
