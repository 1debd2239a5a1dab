/*
 * libmicrohttpd glue; see http.h. Each connection has a `struct exchange` that
 * accumulates the body (bounded) and lives until MHD's completion callback.
 */
#include "server/http.h"

#include <arpa/inet.h>
#include <stdatomic.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"

struct evd_http {
    struct MHD_Daemon *daemon;
    struct evd_http_options opts;
    unsigned port;
    atomic_int exchanges; /* requests begun and not yet fully answered */
};

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
};

static const char *query_lookup(void *conn, const char *key)
{
    return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
}

static const char *header_lookup(void *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

static int valid_request_id(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n <= 64 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static int json_content_type(const char *ct)
{
    if (ct == NULL)
        return 0;
    size_t n = strcspn(ct, ";");
    while (n > 0 && ct[n - 1] == ' ')
        n--;
    return (n == 16 && strncasecmp(ct, "application/json", 16) == 0) ||
           (n > 17 && strncasecmp(ct + n - 5, "+json", 5) == 0);
}

static int authorized(const struct evd_http *h, const struct evd_route *route,
                      struct MHD_Connection *c)
{
    const char *token = h->opts.api_token;
    if (token == NULL || (route->flags & EVD_ROUTE_PUBLIC))
        return 1;
    size_t tlen = strlen(token);
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (auth != NULL && strncasecmp(auth, "Bearer ", 7) == 0) {
        const char *t = auth + 7;
        if (evd_consttime_eq(t, strlen(t), token, tlen))
            return 1;
    }
    if (route->flags & EVD_ROUTE_QUERY_TOKEN) {
        const char *q = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "access_token");
        if (q != NULL && evd_consttime_eq(q, strlen(q), token, tlen))
            return 1;
    }
    return 0;
}

/*
 * Matches the route of the request into *req and checks the caller: the route, or NULL
 * after filling *resp with the answer (404/405 or 401).
 */
static const struct evd_route *route_of(struct evd_http *h, struct MHD_Connection *c,
                                        const char *url, const char *method, struct evd_req *req,
                                        struct evd_resp *resp)
{
    bool path_known = false;
    const struct evd_route *route =
        evd_router_match(h->opts.routes, h->opts.nroutes, method, url, req, &path_known);
    if (route == NULL) {
        char detail[300];
        snprintf(detail, sizeof(detail), "%s %.200s: %s", method, url,
                 path_known ? "method not allowed on this resource" : "no such resource");
        evd_resp_problem(resp, EVD_ENOTFOUND, detail);
        return NULL;
    }
    if (!authorized(h, route, c)) {
        evd_resp_problem(resp, EVD_EUNAUTH, "missing or invalid bearer token");
        evd_resp_header(resp, "WWW-Authenticate", "Bearer realm=\"evald\"");
        return NULL;
    }
    return route;
}

/* Fills ex->resp for the request; never fails (errors become problems). */
static void dispatch(struct evd_http *h, struct exchange *ex, struct MHD_Connection *c,
                     const char *url, const char *method, const char **route_name)
{
    struct evd_resp *resp = &ex->resp;
    struct evd_req req = {
        .ctx = h->opts.ctx,
        .method = method,
        .path = url,
        .request_id = ex->request_id,
        .query_fn = query_lookup,
        .header_fn = header_lookup,
        .conn = c,
    };
    const struct evd_route *route = route_of(h, c, url, method, &req, resp);
    if (route == NULL)
        return;
    *route_name = route->pattern;
    if (ex->too_large) {
        evd_resp_problem(resp, EVD_ETOOLARGE, "request body exceeds the 1 MiB limit");
        return;
    }
    json_t *body = NULL;
    if (ex->body.len > 0) {
        if (!json_content_type(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type"))) {
            evd_resp_problem(resp, EVD_EMEDIA, "request body must be application/json");
            return;
        }
        json_error_t jerr;
        body = json_loadb(ex->body.data, ex->body.len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES,
                          &jerr);
        if (body == NULL) {
            char detail[300];
            snprintf(detail, sizeof(detail), "malformed JSON: %s at line %d column %d", jerr.text,
                     jerr.line, jerr.column);
            evd_resp_problem(resp, EVD_EINVAL, detail);
            return;
        }
    }
    req.body = body;
    resp->status = 500;
    route->fn(&req, resp);
    json_decref(body);
    if (resp->body == NULL && resp->stream == NULL)
        evd_resp_problem(resp, EVD_EINTERNAL, "the handler produced no response");
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct evd_resp *resp = cls;
    ssize_t n = resp->stream(resp->stream_cls, buf, max);
    return n > 0 ? n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_done(void *cls)
{
    struct evd_resp *resp = cls;
    if (resp->stream_free)
        resp->stream_free(resp->stream_cls);
    free(resp);
}

static enum MHD_Result respond(struct MHD_Connection *c, struct exchange *ex)
{
    struct evd_resp *r = &ex->resp;
    struct MHD_Response *mr;
    if (r->stream != NULL) {
        /* The streaming state outlives the exchange: hand a copy to MHD. */
        struct evd_resp *copy = malloc(sizeof(*copy));
        if (copy == NULL)
            return MHD_NO;
        *copy = *r;
        r->stream_free = NULL;
        r->stream = NULL;
        mr = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, copy,
                                               stream_done);
        if (mr == NULL) {
            stream_done(copy);
            return MHD_NO;
        }
        r = copy;
    } else {
        mr = MHD_create_response_from_buffer_with_free_callback(r->len, r->body, free);
        if (mr == NULL)
            return MHD_NO;
        r->body = NULL; /* now MHD's */
    }
    if (r->content_type)
        MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
    MHD_add_response_header(mr, "X-Request-Id", ex->request_id);
    int has_cache = 0;
    for (size_t i = 0; i < r->nheaders; i++) {
        MHD_add_response_header(mr, r->header_names[i], r->header_values[i]);
        has_cache |= strcasecmp(r->header_names[i], "Cache-Control") == 0;
    }
    if (!has_cache)
        MHD_add_response_header(mr, "Cache-Control", "no-store");
    MHD_add_response_header(mr, "X-Content-Type-Options", "nosniff");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, mr);
    MHD_destroy_response(mr);
    return ret;
}

static enum MHD_Result finish(struct MHD_Connection *c, struct exchange *ex, const char *method,
                              const char *url, const char *route_name);

/*
 * Upload routes (EVD_ROUTE_UPLOAD) are routed as soon as the headers are in, so
 * that their body goes to the handler piece by piece instead of into ex->body. Any other
 * request, and an unknown route, is left to dispatch() at the end of the body.
 */
static void upload_open(struct evd_http *h, struct exchange *ex, struct MHD_Connection *c,
                        const char *url, const char *method)
{
    if (strcmp(method, "POST") != 0)
        return; /* every upload route is a POST: the common request pays nothing */
    struct evd_req probe = {0};
    bool path_known = false;
    const struct evd_route *route =
        evd_router_match(h->opts.routes, h->opts.nroutes, method, url, &probe, &path_known);
    if (route == NULL || !(route->flags & EVD_ROUTE_UPLOAD))
        return;
    ex->upload_route = route;
    ex->upload_req = (struct evd_req){
        .ctx = h->opts.ctx,
        .method = method,
        .path = url,
        .request_id = ex->request_id,
        .query_fn = query_lookup,
        .header_fn = header_lookup,
        .conn = c,
    };
    if (route_of(h, c, url, method, &ex->upload_req, &ex->resp) == NULL) {
        ex->upload_answered = true;
        return;
    }
    ex->resp.status = 500;
    route->fn(&ex->upload_req, &ex->resp);
    ex->upload_answered = ex->resp.upload == NULL;
}

static enum MHD_Result upload_step(struct evd_http *h, struct exchange *ex,
                                   struct MHD_Connection *c, const char *method, const char *data,
                                   size_t *size)
{
    const struct evd_upload_ops *ops = ex->resp.upload;
    if (*size > 0) {
        size_t limit = (size_t)h->opts.ctx->max_dataset_bytes;
        ex->upload_bytes += *size;
        if (!ex->upload_answered && ex->upload_bytes > limit) {
            char detail[96];
            snprintf(detail, sizeof(detail), "request body exceeds the %zu byte limit", limit);
            evd_resp_problem(&ex->resp, EVD_ETOOLARGE, detail);
            ex->upload_answered = true;
        }
        if (!ex->upload_answered && ops->chunk(ex->resp.upload_state, data, *size, &ex->resp) != 0)
            ex->upload_answered = true;
        *size = 0;
        return MHD_YES;
    }
    if (!ex->upload_answered)
        ops->end(ex->resp.upload_state, &ex->upload_req, &ex->resp);
    if (ex->resp.body == NULL && ex->resp.stream == NULL)
        evd_resp_problem(&ex->resp, EVD_EINTERNAL, "the handler produced no response");
    return finish(c, ex, method, ex->upload_req.path, ex->upload_route->pattern);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **state)
{
    (void)version;
    struct evd_http *h = cls;
    struct exchange *ex = *state;
    if (ex == NULL) {
        ex = calloc(1, sizeof(*ex));
        if (ex == NULL)
            return MHD_NO;
        ex->start_ms = evd_mono_ms();
        const char *rid = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
        if (rid != NULL && valid_request_id(rid))
            snprintf(ex->request_id, sizeof(ex->request_id), "%s", rid);
        else
            evd_new_id("req_", ex->request_id, sizeof(ex->request_id));
        ex->body.limit = EVD_HTTP_BODY_LIMIT;
        atomic_fetch_add(&h->exchanges, 1);
        *state = ex;
        upload_open(h, ex, c, url, method);
        return MHD_YES;
    }
    if (ex->upload_route != NULL)
        return upload_step(h, ex, c, method, upload_data, upload_data_size);
    if (*upload_data_size > 0) {
        if (!ex->too_large && evd_buf_append(&ex->body, upload_data, *upload_data_size) != 0) {
            ex->too_large = 1;
            evd_buf_free(&ex->body);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    const char *route_name = "unmatched";
    dispatch(h, ex, c, url, method, &route_name);
    return finish(c, ex, method, url, route_name);
}

static enum MHD_Result finish(struct MHD_Connection *c, struct exchange *ex, const char *method,
                              const char *url, const char *route_name)
{
    double secs = (double)(evd_mono_ms() - ex->start_ms) / 1000.0;
    evd_metrics_http(route_name, method, ex->resp.status, secs);
    char status[8], dur[24];
    snprintf(status, sizeof(status), "%d", ex->resp.status);
    snprintf(dur, sizeof(dur), "%lld", (long long)(evd_mono_ms() - ex->start_ms));
    evd_log(ex->resp.status >= 500 ? EVD_LOG_WARN : EVD_LOG_INFO, "request", "method", method,
            "route", route_name, "path", url, "status", status, "dur_ms", dur, "req_id",
            ex->request_id, "code", ex->resp.code, NULL);
    return respond(c, ex);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode toe)
{
    (void)c;
    (void)toe;
    struct evd_http *h = cls;
    struct exchange *ex = *state;
    if (ex == NULL)
        return;
    atomic_fetch_sub(&h->exchanges, 1);
    evd_buf_free(&ex->body);
    if (ex->resp.upload != NULL)
        ex->resp.upload->free(ex->resp.upload_state);
    free(ex->resp.body);
    if (ex->resp.stream_free)
        ex->resp.stream_free(ex->resp.stream_cls);
    free(ex);
    *state = NULL;
}

struct evd_http *evd_http_start(const struct evd_http_options *opts, struct evd_err *err)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char port[8];
    snprintf(port, sizeof(port), "%u", opts->port);
    int gai = getaddrinfo(opts->host, port, &hints, &ai);
    if (gai != 0) {
        evd_err_set(err, EVD_EINVAL, "EVALD_LISTEN: cannot resolve %s: %s", opts->host,
                    gai_strerror(gai));
        return NULL;
    }
    struct evd_http *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        freeaddrinfo(ai);
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        return NULL;
    }
    h->opts = *opts;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_ERROR_LOG | MHD_USE_ITC;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->daemon = MHD_start_daemon(flags, (uint16_t)opts->port, NULL, NULL, on_request, h,
                                 MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED,
                                 on_completed, h, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)2000,
                                 MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (h->daemon == NULL) {
        evd_err_set(err, EVD_EUNAVAIL, "could not listen on %s:%u (address in use?)", opts->host,
                    opts->port);
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : opts->port;
    return h;
}

unsigned evd_http_port(const struct evd_http *h)
{
    return h->port;
}

void evd_http_quiesce(struct evd_http *h)
{
    MHD_socket s = MHD_quiesce_daemon(h->daemon);
    if (s != MHD_INVALID_SOCKET)
        close(s);
}

bool evd_http_drain(struct evd_http *h, int timeout_ms)
{
    int64_t deadline = evd_mono_ms() + timeout_ms;
    while (atomic_load(&h->exchanges) > 0) {
        if (evd_mono_ms() >= deadline)
            return false;
        usleep(10000);
    }
    return true;
}

void evd_http_stop(struct evd_http *h)
{
    if (h == NULL)
        return;
    MHD_stop_daemon(h->daemon);
    free(h);
}
