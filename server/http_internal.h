/*
 * What the files of the HTTP server share (http.h): the server, a connection's exchange,
 * deferred answers (http.c), the calls the handler pool runs (calls.c) and streams
 * (streams.c). Internal to server/. The locks: evd_http_deferred_mu is a leaf lock;
 * streams_mu is taken after a stream's own locks and never held while calling a stream.
 */
#ifndef EVD_SERVER_HTTP_INTERNAL_H
#define EVD_SERVER_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/util.h"
#include "handlers/api.h"
#include "server/http.h"
#include "server/pool.h"

struct evd_http {
    struct MHD_Daemon *daemon;
    struct evd_http_options opts;
    unsigned port;
    atomic_int exchanges; /* requests begun and not yet fully answered */
    atomic_bool closing;  /* after evd_http_quiesce: every new request is refused */
    /* Guards the flags and links of every struct live. Taken after a stream's own locks
     * (a wake comes from under the SSE hub's), never held while calling into a stream. */
    pthread_mutex_t streams_mu;
    struct live *streams;
    struct deferred *deferreds; /* under evd_http_deferred_mu */
    struct evd_pool *pool;      /* runs handlers, stream reads and upload ends */
    /* The header deadline: a leaf lock over every struct watch. */
    pthread_mutex_t watch_mu;
    pthread_cond_t watch_cv; /* the reaper sleeps here; signalled at stop */
    struct watch *watches;
    int64_t header_ms;
    bool reaper_stop;
    bool reaper_started;
    pthread_t reaper;
};

struct watch {
    MHD_socket fd;
    int64_t since_ms; /* evd_mono_ms() since the headers are awaited; 0 = not awaited */
    bool shut;
    struct watch *prev, *next;
};

/* What the last read of a stream on the handler pool found (struct live). */
enum piece { PIECE_NONE, PIECE_READING, PIECE_PAUSED, PIECE_END, PIECE_FAILED };

#define LIVE_PIECE (16 * 1024)

struct live {
    struct evd_pool_job read; /* first: the pool's job that reads the next piece */
    struct evd_resp resp;     /* the handler's, with its stream callbacks */
    struct evd_http *h;
    struct MHD_Connection *conn;
    /* Under streams_mu: */
    bool suspended; /* the connection is suspended: a read's end, or a wake, resumes it */
    bool woken;     /* a wake came since the last read began: read again, do not wait */
    bool closing;   /* the server is stopping: end the stream */
    bool orphaned;  /* libmicrohttpd is done with it while a read runs: the read frees it */
    enum piece state;
    /* The bytes the last read gave, sent from piece_off on: LIVE_PIECE bytes while the
     * stream gives data, none while it waits (an open event stream costs no buffer). */
    char *piece;
    size_t piece_len, piece_off;
    struct live *prev, *next;
};

struct deferred {
    struct evd_deferred base; /* first: what the handler holds */
    struct evd_http *h;       /* NULL once the server stopped and answered it */
    struct MHD_Connection *conn;
    struct evd_resp answer; /* moved in by the answer, out by on_request */
    bool answered;
    bool suspended; /* on_request suspended the connection; the answer resumes it */
    int refs;       /* the exchange's and the answerer's */
    struct deferred *prev, *next; /* the server's list, for its stop */
};

/* Guards every struct deferred and the servers' lists of them (a leaf lock; http.c). */
extern pthread_mutex_t evd_http_deferred_mu;

struct exchange {
    struct evd_buf body;
    int too_large;
    int64_t start_ms;
    char request_id[72];
    struct evd_resp resp;
    /* An upload route (EVD_ROUTE_UPLOAD): routed when the headers arrive. */
    const struct evd_route *upload_route;
    struct evd_req upload_req;
    size_t upload_bytes;
    bool upload_answered; /* resp holds the answer already; the rest of the body is dropped */
    /* An upload with an Idempotency-Key: the SHA-256 of its bytes as they come. */
    struct evd_sha256 upload_hash;
    bool upload_hashing;
    struct deferred *defer;    /* the handler deferred its answer */
    const char *route_name;    /* of a deferred request, for its log line */
};

/* ---- http.c ---- */

/* Releases what an answer that will not be sent holds: its body or its stream. */
void evd_http_resp_drop(struct evd_resp *r);
/* A deferral of the exchange's request (ex->defer is set), or NULL when out of memory or
 * when it has one already. */
struct evd_deferred *evd_http_defer(struct evd_http *h, struct exchange *ex,
                                    struct MHD_Connection *c);

/* ---- calls.c ---- */

/*
 * Hands a routed request to the handler pool: takes the exchange's deferral (the caller
 * then suspends the connection until the answer, deferred_ready) and queues the call,
 * which owns `body` (stolen) and the upload's state from then on. False when out of memory
 * (body and state are then still the caller's).
 */
bool evd_http_call_submit(struct evd_http *h, struct exchange *ex, struct MHD_Connection *c,
                          const struct evd_route *route, const struct evd_req *req,
                          json_t *body, const struct evd_upload_ops *upload,
                          void *upload_state);
/* False after answering 400 in *resp: the route honours Idempotency-Key and the request
 * has one that is not 1 to 255 visible ASCII characters. */
bool evd_http_idempotency_key_ok(const struct evd_route *route, struct MHD_Connection *c,
                                 struct evd_resp *resp);

/* ---- streams.c ---- */

/*
 * The response of a streaming answer r (its stream moves into the server's list; r keeps
 * the status and headers, which *headers points to afterwards), or NULL when out of
 * memory (the stream is then freed).
 */
struct MHD_Response *evd_http_stream_response(struct evd_http *h, struct MHD_Connection *c,
                                              struct evd_resp *r, struct evd_resp **headers);
/* At a stop: ends every stream, resuming those that wait (MHD must not stop with a
 * connection suspended). */
void evd_http_streams_close(struct evd_http *h);

#endif
