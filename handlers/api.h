/*
 * The contract between the HTTP server and the handlers: a decoded request, a
 * response under construction, and the single place where an evd_code becomes an
 * HTTP status and an RFC 9457 problem. Handlers never see libmicrohttpd.
 *
 * Lifetimes: everything in struct evd_req is borrowed for the duration of the
 * handler call. A handler fills *resp through the evd_resp_* helpers, which take
 * ownership of what they are given. Handlers run concurrently on the server's handler
 * pool (server/pool.h), or, for a route flagged EVD_ROUTE_INLINE, on an HTTP thread that
 * serves many connections (such a handler must not wait on the database or on a lock held
 * across a query): they must only touch thread-safe state (the engine's public functions,
 * immutable configuration) and never wait for events (a stream pauses instead).
 */
#ifndef EVD_HANDLERS_API_H
#define EVD_HANDLERS_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

struct evd_engine;
struct evd_webhooks;
struct evd_sse_hub;

/* What handlers may use; built once by main, immutable afterwards except through
 * the thread-safe objects it points to. */
struct evd_ctx {
    long max_runs;           /* EVALD_MAX_RUNS */
    const char *version;     /* evald version string */
    int64_t started_at_ms;   /* process start, for /healthz */
    struct evd_engine *engine; /* the evaluation engine (engine/engine.h) */
    struct evd_webhooks *webhooks; /* subscriptions and deliveries (webhooks/webhooks.h) */
    long max_dataset_cases;  /* EVALD_MAX_DATASET_CASES */
    long max_dataset_bytes;  /* EVALD_MAX_DATASET_BYTES: the body limit of upload routes */
    struct evd_sse_hub *sse; /* feeds paused event streams (handlers/sse.h) */
};

#define EVD_MAX_PARAMS 4

struct evd_req {
    struct evd_ctx *ctx;
    const char *method;
    const char *path;
    const char *route;       /* the matched route pattern, e.g. "/v1/evaluations/{id}" */
    char names[EVD_MAX_PARAMS][32];
    char values[EVD_MAX_PARAMS][256];
    size_t nparams;
    json_t *body;            /* parsed JSON body; NULL when the body was empty */
    const char *request_id;
    /* Query-string and header lookups through the server; values are borrowed. */
    const char *(*query_fn)(void *conn, const char *key);
    const char *(*header_fn)(void *conn, const char *name);
    void *conn;
    /* The server's deferral of the answer (evd_req_defer); NULL where it cannot wait. */
    struct evd_deferred *(*defer_fn)(void *defer_ctx);
    void *defer_ctx;
};

/* Value of path parameter `name`, or NULL. */
const char *evd_req_param(const struct evd_req *req, const char *name);
/* Query-string argument, or NULL. */
const char *evd_req_query(const struct evd_req *req, const char *key);
/* Request header (case-insensitive), or NULL. */
const char *evd_req_header(const struct evd_req *req, const char *name);

/*
 * Streaming body: called on the server's handler pool (one call at a time per stream; it
 * may read the database, but must not wait for events): it returns the bytes written into buf (> 0),
 * EVD_STREAM_END to end the stream, EVD_STREAM_ABORT to end it as failed (the status line
 * is gone by then: the connection is closed without the chunked body's last chunk, so that
 * a client sees a truncated transfer, not a short but whole body), or EVD_STREAM_PAUSE
 * when nothing is ready. After a pause the server reads the stream again only once the
 * stream calls the wake function it was given by stream_attach (from any thread, any
 * number of times, until stream_free; a wake that comes before the pause is not lost).
 */
#define EVD_STREAM_END ((ssize_t)-1)
#define EVD_STREAM_ABORT ((ssize_t)-2)
#define EVD_STREAM_PAUSE ((ssize_t)0)
typedef ssize_t (*evd_stream_fn)(void *cls, char *buf, size_t max);
typedef void (*evd_stream_wake_fn)(void *token);

/*
 * An upload route (EVD_ROUTE_UPLOAD) takes its body piece by piece as it arrives instead
 * of as one parsed JSON document, up to ctx->max_dataset_bytes (413 beyond). Its handler
 * runs as soon as the headers are in and the caller is authorized (req->body is NULL):
 * it either answers at once (a refusal in *resp) or sets resp->upload and
 * resp->upload_state. The server then calls, one call at a time on one of its threads:
 *   chunk  for each piece; 0 to go on, or -1 after filling *resp with a refusal (the rest
 *          of the body is discarded);
 *   end    when the body is complete and nothing was refused: fills *resp;
 *   free   always, last, with upload_state.
 */
struct evd_resp;
struct evd_upload_ops {
    int (*chunk)(void *state, const char *data, size_t len, struct evd_resp *resp);
    void (*end)(void *state, struct evd_req *req, struct evd_resp *resp);
    void (*free)(void *state);
    /* Optional: after the last chunk, before end, when the request has an
     * Idempotency-Key: the SHA-256 (hex) of the body as the route compares bodies (its
     * canonical JSON); false when it cannot tell (its bytes are compared then). Without
     * it, the bytes are. */
    bool (*fingerprint)(void *state, char out[65]);
};

#define EVD_RESP_MAX_HEADERS 6

struct evd_resp {
    int status;
    char *body;              /* owned; freed by the server */
    size_t len;
    const char *content_type;
    const char *code;        /* problem code for logs, NULL on success */
    enum evd_code error;     /* the problem's code (evd_resp_problem), EVD_OK on success */
    char header_names[EVD_RESP_MAX_HEADERS][64];
    char header_values[EVD_RESP_MAX_HEADERS][512];
    size_t nheaders;
    evd_stream_fn stream;    /* when set, body is ignored and the response streams */
    void *stream_cls;
    void (*stream_free)(void *cls);
    const struct evd_upload_ops *upload; /* an upload route's body goes here (above) */
    void *upload_state;
    /* Called once before the first read with the stream's wake function and token. */
    void (*stream_attach)(void *cls, evd_stream_wake_fn wake, void *token);
    bool deferred; /* the answer comes through a deferral (evd_req_defer) */
};

/*
 * An answer that comes later, from another thread: a handler whose work another thread
 * finishes (an evaluation start, which the engine writes in a batch with others) takes a
 * deferral with evd_req_defer and returns at once, leaving *resp unanswered; the server
 * holds the request, and none of its threads, until evd_deferred_answer hands it the
 * answer (exactly once, from any thread, moving the response's contents: `answer` is
 * left empty). evd_req_defer returns NULL where the server cannot wait (the handler then
 * answers in *resp as usual). If the server must stop first, it answers 503 itself, and
 * the late answer is dropped.
 */
struct evd_deferred {
    void (*answer)(struct evd_deferred *d, struct evd_resp *answer);
};
struct evd_deferred *evd_req_defer(struct evd_req *req, struct evd_resp *resp);
void evd_deferred_answer(struct evd_deferred *d, struct evd_resp *answer);

/* HTTP status for a code: the one map used everywhere. */
int evd_http_status(enum evd_code code);

/* Serializes `body` (steals the reference) as application/json with `status`.
 * A NULL body sends JSON null. */
void evd_resp_json(struct evd_resp *resp, int status, json_t *body);

/* RFC 9457 problem details for `code`, with `detail` as the message. */
void evd_resp_problem(struct evd_resp *resp, enum evd_code code, const char *detail);
/*
 * Called by the server on every answer before it goes out. A problem document gains
 * `request_id`; one of a server-side failure (a database error, an internal error) says
 * what failed in a client's terms, and the handler's detail, which may name database
 * internals, is returned (malloc'd) for the log alone. NULL when nothing was replaced.
 */
char *evd_resp_finish_problem(struct evd_resp *resp, const char *request_id);

/* Problem details from an error record. */
void evd_resp_error(struct evd_resp *resp, const struct evd_err *err);

/* The answer of an engine call: `out` (stolen) as JSON with `status` when rc is EVD_OK,
 * else the problem details of err (and out, if any, is dropped). */
void evd_resp_outcome(struct evd_resp *resp, int status, enum evd_code rc, json_t *out,
                      const struct evd_err *err);

/* A raw body; `data` is copied. */
void evd_resp_raw(struct evd_resp *resp, int status, const char *content_type, const void *data,
                  size_t len);

/* Adds a response header (silently ignored past EVD_RESP_MAX_HEADERS). */
void evd_resp_header(struct evd_resp *resp, const char *name, const char *value);

/* The request object of a list route: {"limit": n} from ?limit= when given, else {}.
 * New reference; NULL after answering 400 (limit is not an integer) or 500 in *resp. */
json_t *evd_req_list_request(const struct evd_req *req, struct evd_resp *resp);

/* ?limit= of a paged list route (datasets, experiments): 1..100, default 20. False after
 * answering 400 ("limit must be between 1 and 100") in *resp. */
#define EVD_PAGE_DEFAULT 20
#define EVD_PAGE_MAX 100
bool evd_req_page_limit(const struct evd_req *req, struct evd_resp *resp, unsigned *limit);

/* Serializes a JSON value for responses: compact, UTF-8, reals in shortest form.
 * Returns malloc'd text or NULL. */
char *evd_json_dump(const json_t *value, size_t *len);

#endif
