/*
 * Streaming answers (http_internal.h): event streams and exports, read on the handler
 * pool a piece at a time and sent by the HTTP threads.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "common/log.h"
#include "server/http_internal.h"

/*
 * Streams. A stream's function may read the database (an event stream's state, an
 * export's next records), so it runs on the handler pool, one read at a time, into the
 * live's piece; the HTTP thread only copies the piece out. While a read runs, or while the
 * stream has paused and no wake has come, the connection is suspended. Under streams_mu:
 *   reader (HTTP thread)  piece left: copy it; ended: end; paused and not woken, or a read
 *                         running: suspend; else: suspend and queue a read;
 *   read (pool)           stores what the stream gave; resumes the connection unless the
 *                         stream paused and no wake came meanwhile; frees an orphan;
 *   wake (any thread)     marks it woken; resumes it when suspended and no read runs;
 *   done (HTTP thread)    unlinks it; frees it, or leaves it to the running read.
 */
static void live_free(struct live *l)
{
    if (l->resp.stream_free)
        l->resp.stream_free(l->resp.stream_cls); /* no wake after this returns */
    free(l->piece);
    free(l);
}

/* The stream's wake function (evd_stream_wake_fn); any thread. */
static void stream_wake(void *token)
{
    struct live *l = token;
    bool resume = false;
    pthread_mutex_lock(&l->h->streams_mu);
    l->woken = true;
    if (l->suspended && l->state != PIECE_READING) {
        l->suspended = false;
        resume = true;
    }
    pthread_mutex_unlock(&l->h->streams_mu);
    /* Still suspended until this call, so MHD cannot have freed the connection. */
    if (resume)
        MHD_resume_connection(l->conn);
}

/* The pool's job: reads the stream's next piece. */
static void stream_read(struct evd_pool_job *job)
{
    struct live *l = (struct live *)job;
    struct evd_http *h = l->h;
    pthread_mutex_lock(&h->streams_mu);
    bool skip = l->closing || l->orphaned;
    pthread_mutex_unlock(&h->streams_mu);
    /* No reader touches the piece while a read runs. */
    if (!skip && l->piece == NULL && (l->piece = malloc(LIVE_PIECE)) == NULL)
        evd_log(EVD_LOG_WARN, "could not allocate a stream's buffer; the stream is cut", NULL);
    ssize_t n = skip              ? EVD_STREAM_END
                : l->piece == NULL ? EVD_STREAM_ABORT
                                   : l->resp.stream(l->resp.stream_cls, l->piece, LIVE_PIECE);
    if (n <= 0) {
        free(l->piece);
        l->piece = NULL;
    }
    bool resume = false;
    pthread_mutex_lock(&h->streams_mu);
    if (n > 0) {
        l->piece_len = (size_t)n;
        l->piece_off = 0;
        l->state = PIECE_NONE;
    } else {
        l->state = n == EVD_STREAM_PAUSE   ? PIECE_PAUSED
                   : n == EVD_STREAM_ABORT ? PIECE_FAILED
                                           : PIECE_END;
    }
    bool orphan = l->orphaned;
    if (!orphan && l->suspended && (l->state != PIECE_PAUSED || l->woken || l->closing)) {
        l->suspended = false;
        resume = true;
    }
    struct MHD_Connection *conn = l->conn;
    pthread_mutex_unlock(&h->streams_mu);
    if (orphan)
        live_free(l);
    else if (resume)
        MHD_resume_connection(conn);
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct live *l = cls;
    ssize_t ret = 0;
    pthread_mutex_lock(&l->h->streams_mu);
    if (l->piece_off < l->piece_len) {
        size_t n = l->piece_len - l->piece_off;
        if (n > max)
            n = max;
        memcpy(buf, l->piece + l->piece_off, n);
        l->piece_off += n;
        ret = (ssize_t)n;
    } else if (l->state == PIECE_FAILED) {
        ret = MHD_CONTENT_READER_END_WITH_ERROR; /* no last chunk: a truncated body */
    } else if (l->state == PIECE_END || l->closing) {
        ret = MHD_CONTENT_READER_END_OF_STREAM;
    } else if (l->state == PIECE_READING || (l->state == PIECE_PAUSED && !l->woken)) {
        l->suspended = true;
        MHD_suspend_connection(l->conn);
    } else {
        l->woken = false;
        l->state = PIECE_READING;
        l->suspended = true;
        MHD_suspend_connection(l->conn);
        evd_pool_submit(l->h->pool, &l->read, false);
    }
    pthread_mutex_unlock(&l->h->streams_mu);
    return ret; /* 0: nothing now; MHD reads again once resumed */
}

static void stream_done(void *cls)
{
    struct live *l = cls;
    struct evd_http *h = l->h;
    pthread_mutex_lock(&h->streams_mu);
    if (l->prev != NULL)
        l->prev->next = l->next;
    else
        h->streams = l->next;
    if (l->next != NULL)
        l->next->prev = l->prev;
    bool reading = l->state == PIECE_READING;
    l->orphaned = reading;
    pthread_mutex_unlock(&h->streams_mu);
    if (!reading)
        live_free(l);
}

struct MHD_Response *evd_http_stream_response(struct evd_http *h, struct MHD_Connection *c,
                                              struct evd_resp *r, struct evd_resp **headers)
{
    /* The streaming state outlives the exchange: hand a copy to MHD. */
    struct live *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    l->read.run = stream_read;
    l->resp = *r;
    l->h = h;
    l->conn = c;
    r->stream_free = NULL;
    r->stream = NULL;
    pthread_mutex_lock(&h->streams_mu);
    l->next = h->streams;
    if (h->streams != NULL)
        h->streams->prev = l;
    h->streams = l;
    pthread_mutex_unlock(&h->streams_mu);
    if (l->resp.stream_attach != NULL)
        l->resp.stream_attach(l->resp.stream_cls, stream_wake, l);
    struct MHD_Response *mr = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, l, stream_done);
    if (mr == NULL) {
        stream_done(l);
        return NULL;
    }
    *headers = &l->resp;
    return mr;
}

void evd_http_streams_close(struct evd_http *h)
{
    /* A resume is made outside the lock, as in stream_wake. */
    for (;;) {
        struct MHD_Connection *c = NULL;
        pthread_mutex_lock(&h->streams_mu);
        for (struct live *l = h->streams; l != NULL; l = l->next) {
            l->closing = true;
            if (c == NULL && l->suspended) {
                l->suspended = false;
                c = l->conn;
            }
        }
        pthread_mutex_unlock(&h->streams_mu);
        if (c == NULL)
            break;
        MHD_resume_connection(c);
    }
}
