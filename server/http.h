/*
 * The HTTP server: libmicrohttpd with a pool of threads, each polling its share of the
 * connections with epoll (idle sockets cost no thread), a total and a per-address
 * connection limit, an idle timeout and a header deadline; streams that have nothing to send are
 * suspended until they wake themselves (handlers/api.h), so they hold no thread.
 *
 * No HTTP thread waits on the database: it parses, routes and answers the cheap routes
 * (EVD_ROUTE_INLINE) itself, and hands every other handler, every read of a stream's next
 * piece and every upload's end to the handler pool (server/pool.h), suspending the
 * connection until the answer comes. So /healthz, /metrics and the console answer while
 * the database is frozen and the handlers wait for it. Request bodies
 * bounded to 1 MiB (413), JSON decoding (415/400), bearer-token auth, a request id
 * on every response, one JSON log line and one metrics sample per request, and
 * graceful shutdown (refuse new requests, finish in-flight ones).
 * Thread-safety: start/quiesce/stop from the main thread only.
 */
#ifndef EVD_SERVER_HTTP_H
#define EVD_SERVER_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "server/router.h"

#define EVD_HTTP_BODY_LIMIT (1024 * 1024)

struct evd_http_options {
    const char *host; /* numeric address or name to bind */
    unsigned port;    /* 0 = pick a free port */
    const struct evd_route *routes;
    size_t nroutes;
    struct evd_ctx *ctx;             /* handed to every handler */
    const char *api_token;           /* NULL = no auth; borrowed for the server's lifetime */
    unsigned threads;                /* polling threads (0 = 1) */
    unsigned timeout_seconds;        /* idle timeout of a connection, and the time a request's
                                      * headers may take (0 = 10) */
    unsigned max_connections;        /* open connections at most (0 = 16000); lowered to fit
                                      * RLIMIT_NOFILE */
    unsigned max_connections_per_ip; /* from one client address (0 = no limit) */
    unsigned handler_threads;        /* the handler pool's threads (0 = 16) */
};

struct evd_http;

/* Raises the RLIMIT_NOFILE soft limit to the hard limit first (process-wide). */
struct evd_http *evd_http_start(const struct evd_http_options *opts, struct evd_err *err);
/* The bound port (useful with port 0). */
unsigned evd_http_port(const struct evd_http *h);
/* From now on every new request is answered 503 "the service is shutting down" with
 * Connection: close; in-flight requests continue. */
void evd_http_quiesce(struct evd_http *h);
/* Waits up to timeout_ms for every begun request to be fully answered (a stream
 * ends once its producer says so); true when none is left. */
bool evd_http_drain(struct evd_http *h, int timeout_ms);
/* Stops the daemon (closing idle keep-alive connections), then frees the server. */
void evd_http_stop(struct evd_http *h);

#endif
