/*
 * libmicrohttpd glue; see http.h. Each connection has a `struct exchange` that
 * accumulates the body (bounded) and lives until MHD's completion callback. Every request
 * that is not answered on the HTTP thread (EVD_ROUTE_INLINE) is a call on the handler pool
 * (calls.c); a streaming answer is a `struct live` (streams.c), owned by MHD's response
 * object. The types they share are in http_internal.h.
 *
 * A deferred answer (handlers/api.h, evd_req_defer; and every call) is a `struct
 * deferred`: the request is suspended after its handler returns, unless the answer came
 * first, and the answer, from another thread, resumes it; libmicrohttpd then calls
 * on_request again, which sends it. It has two references, the exchange's and the
 * answerer's, and its flags live under evd_http_deferred_mu, a lock of the server's own,
 * because an answer may come after the server has stopped (it answered 503 itself then,
 * and the late answer is dropped).
 *
 * Header deadline: libmicrohttpd's timeout counts silence only, so a client that sends a
 * byte now and then could hold a connection forever without finishing its headers. Each
 * connection has a `struct watch` (its socket context) that records since when its
 * request's headers are awaited; the reaper thread shuts down the socket of one past
 * the deadline, and libmicrohttpd then closes it as if the client had. watch_mu makes
 * that safe: libmicrohttpd reports a connection closed (and the watch leaves the list)
 * before it closes the descriptor.
 */
#include "server/http.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <microhttpd.h>
#include <netdb.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/log.h"
#include "common/prometheus.h"
#include "common/util.h"
#include "server/http_internal.h"

pthread_mutex_t evd_http_deferred_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *query_lookup(void *conn, const char *key)
{
    return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
}

struct query_visit {
    evd_query_visit_fn visit;
    void *cls;
};

static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                 size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    struct query_visit *v = cls;
    return v->visit(v->cls, key, key_size, value, value_size) ? MHD_YES : MHD_NO;
}

/* The evd_query_each_fn of the router's check over MHD's parsed query arguments. */
static bool query_each(void *conn, evd_query_visit_fn visit, void *cls)
{
    struct query_visit v = {.visit = visit, .cls = cls};
    int n = MHD_get_connection_values_n(conn, MHD_GET_ARGUMENT_KIND, query_arg, &v);
    return n >= 0;
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
 * Matches the route of the request into *req, checks the caller and the path and query
 * parameters: the route, or NULL after filling *resp with the answer (404/405, 401, 400).
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
        evd_router_unmatched(method, url, path_known, detail, sizeof(detail));
        evd_resp_problem(resp, EVD_ENOTFOUND, detail);
        return NULL;
    }
    if (!authorized(h, route, c)) {
        evd_resp_problem(resp, EVD_EUNAUTH, "missing or invalid bearer token");
        evd_resp_header(resp, "WWW-Authenticate", "Bearer realm=\"evald\"");
        return NULL;
    }
    struct evd_err perr = {0};
    if (evd_router_check(req, query_each, &perr) != EVD_OK) {
        evd_resp_error(resp, &perr);
        return NULL;
    }
    return route;
}

void evd_http_resp_drop(struct evd_resp *r)
{
    free(r->body);
    if (r->stream_free != NULL)
        r->stream_free(r->stream_cls);
    memset(r, 0, sizeof(*r));
}

/* Frees a deferred answer nobody refers to any more. */
static void deferred_free(struct deferred *d)
{
    evd_http_resp_drop(&d->answer);
    free(d);
}

/* Drops one reference under evd_http_deferred_mu; true when it was the last (the caller frees). */
static bool deferred_unref_locked(struct deferred *d)
{
    if (--d->refs > 0)
        return false;
    if (d->h != NULL) {
        if (d->prev != NULL)
            d->prev->next = d->next;
        else
            d->h->deferreds = d->next;
        if (d->next != NULL)
            d->next->prev = d->prev;
    }
    return true;
}

/* The answer of a deferral (struct evd_deferred's `answer`): any thread, once. */
static void deferred_answer(struct evd_deferred *base, struct evd_resp *answer)
{
    struct deferred *d = (struct deferred *)base;
    bool resume = false;
    struct evd_resp late = {0};
    pthread_mutex_lock(&evd_http_deferred_mu);
    if (d->answered) {
        late = *answer; /* the server answered 503 when it stopped */
    } else {
        d->answer = *answer;
        d->answered = true;
        resume = d->suspended;
        d->suspended = false;
    }
    memset(answer, 0, sizeof(*answer));
    struct MHD_Connection *conn = d->conn;
    bool last = deferred_unref_locked(d);
    pthread_mutex_unlock(&evd_http_deferred_mu);
    /* Still suspended until this call, so MHD cannot have freed the connection, nor the
     * exchange its reference. */
    if (resume)
        MHD_resume_connection(conn);
    if (last)
        deferred_free(d);
    evd_http_resp_drop(&late);
}

struct defer_ctx {
    struct evd_http *h;
    struct exchange *ex;
    struct MHD_Connection *conn;
};

/* evd_req's defer_fn: a deferral for the request being dispatched. */
static struct evd_deferred *defer_request(void *arg)
{
    struct defer_ctx *x = arg;
    if (x->ex->defer != NULL)
        return NULL;
    struct deferred *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return NULL;
    d->base.answer = deferred_answer;
    d->h = x->h;
    d->conn = x->conn;
    d->refs = 2;
    pthread_mutex_lock(&evd_http_deferred_mu);
    d->next = x->h->deferreds;
    if (d->next != NULL)
        d->next->prev = d;
    x->h->deferreds = d;
    pthread_mutex_unlock(&evd_http_deferred_mu);
    x->ex->defer = d;
    return &d->base;
}

struct evd_deferred *evd_http_defer(struct evd_http *h, struct exchange *ex,
                                    struct MHD_Connection *c)
{
    struct defer_ctx dctx = {h, ex, c};
    return defer_request(&dctx);
}

/* After the handler of a deferred request: suspends the connection unless the answer is
 * in; true when it is (then in ex->resp, to send now). */
static bool deferred_ready(struct exchange *ex, struct MHD_Connection *c)
{
    struct deferred *d = ex->defer;
    pthread_mutex_lock(&evd_http_deferred_mu);
    bool ready = d->answered;
    if (ready) {
        free(ex->resp.body);
        ex->resp = d->answer;
        memset(&d->answer, 0, sizeof(d->answer));
    } else {
        d->suspended = true;
        MHD_suspend_connection(c);
    }
    pthread_mutex_unlock(&evd_http_deferred_mu);
    return ready;
}

/* Fills ex->resp for the request, or hands it to the pool (ex->defer is then set); never
 * fails (errors become problems). */
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
    struct defer_ctx dctx = {h, ex, c};
    req.defer_fn = defer_request;
    req.defer_ctx = &dctx;
    const struct evd_route *route = route_of(h, c, url, method, &req, resp);
    if (route == NULL)
        return;
    *route_name = route->pattern;
    if (!evd_http_idempotency_key_ok(route, c, resp))
        return;
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
    if (!(route->flags & EVD_ROUTE_INLINE)) {
        if (!evd_http_call_submit(h, ex, c, route, &req, body, NULL, NULL)) {
            json_decref(body);
            evd_resp_problem(resp, EVD_ENOMEM, "out of memory");
        }
        return;
    }
    req.body = body;
    resp->status = 500;
    route->fn(&req, resp);
    json_decref(body);
    if (resp->body == NULL && resp->stream == NULL && ex->defer == NULL)
        evd_resp_problem(resp, EVD_EINTERNAL, "the handler produced no response");
}

static enum MHD_Result respond(struct evd_http *h, struct MHD_Connection *c, struct exchange *ex)
{
    struct evd_resp *r = &ex->resp;
    struct MHD_Response *mr;
    if (r->stream != NULL) {
        if ((mr = evd_http_stream_response(h, c, r, &r)) == NULL)
            return MHD_NO;
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

static enum MHD_Result finish(struct evd_http *h, struct MHD_Connection *c, struct exchange *ex,
                              const char *method, const char *url, const char *route_name);

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
    if (route_of(h, c, url, method, &ex->upload_req, &ex->resp) == NULL ||
        !evd_http_idempotency_key_ok(route, c, &ex->resp)) {
        ex->upload_answered = true;
        return;
    }
    if ((route->flags & EVD_ROUTE_IDEMPOTENT) &&
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key") != NULL)
        ex->upload_hashing = evd_sha256_init(&ex->upload_hash) == 0;
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
        if (ex->upload_hashing && !ex->upload_answered)
            evd_sha256_update(&ex->upload_hash, data, *size);
        if (!ex->upload_answered && ops->chunk(ex->resp.upload_state, data, *size, &ex->resp) != 0)
            ex->upload_answered = true;
        *size = 0;
        return MHD_YES;
    }
    if (!ex->upload_answered) {
        /* The end writes what was uploaded: on the pool, which then owns the state. */
        if (evd_http_call_submit(h, ex, c, ex->upload_route, &ex->upload_req, NULL, ops,
                        ex->resp.upload_state)) {
            ex->resp.upload = NULL;
            ex->resp.upload_state = NULL;
            ex->route_name = ex->upload_route->pattern;
            if (!deferred_ready(ex, c))
                return MHD_YES; /* suspended until the answer comes */
            return finish(h, c, ex, method, ex->upload_req.path, ex->route_name);
        }
        evd_resp_problem(&ex->resp, EVD_ENOMEM, "out of memory");
    }
    if (ex->resp.body == NULL && ex->resp.stream == NULL)
        evd_resp_problem(&ex->resp, EVD_EINTERNAL, "the handler produced no response");
    return finish(h, c, ex, method, ex->upload_req.path, ex->upload_route->pattern);
}

/* Starts (await) or ends the wait for a request's headers on connection c. */
static void watch_headers(struct evd_http *h, struct MHD_Connection *c, bool await)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct watch *w = info ? info->socket_context : NULL;
    if (w == NULL)
        return;
    pthread_mutex_lock(&h->watch_mu);
    w->since_ms = await ? evd_mono_ms() : 0;
    pthread_mutex_unlock(&h->watch_mu);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct evd_http *h = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct watch *w = info ? calloc(1, sizeof(*w)) : NULL;
        if (w == NULL)
            return; /* only the idle timeout then */
        w->fd = info->connect_fd;
        w->since_ms = evd_mono_ms();
        pthread_mutex_lock(&h->watch_mu);
        w->next = h->watches;
        if (h->watches != NULL)
            h->watches->prev = w;
        h->watches = w;
        pthread_mutex_unlock(&h->watch_mu);
        *socket_context = w;
        return;
    }
    struct watch *w = *socket_context;
    if (w == NULL)
        return;
    pthread_mutex_lock(&h->watch_mu);
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        h->watches = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    pthread_mutex_unlock(&h->watch_mu);
    free(w);
    *socket_context = NULL;
}

/*
 * True when bytes the client sent wait in the socket for the server to read them: the
 * delay is then the server's (its threads busy with other requests), not a slow client's,
 * and the connection is not dropped. A client that trickles its headers is read as soon
 * as a thread is free, so it is caught at a later pass.
 */
static bool unread(int fd)
{
    int n = 0;
    return ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

/*
 * libmicrohttpd's idle timeout is this many times EVALD_HTTP_TIMEOUT_SECONDS. It counts
 * from a connection's last activity as the server saw it, so a thread that was busy with
 * other requests makes a waiting connection look idle: at 1x, 1,024 evaluations started at
 * once lost hundreds of answers after the evaluations had been created. The reaper keeps
 * the 1x deadline for connections that are truly quiet (headers that do not come, idle
 * keep-alives).
 */
#define IDLE_SLACK 3u

/* The reaper thread: twice a second, drops connections past the header deadline. */
static void *reaper_main(void *arg)
{
    struct evd_http *h = arg;
    pthread_mutex_lock(&h->watch_mu);
    while (!h->reaper_stop) {
        int64_t now = evd_mono_ms();
        int dropped = 0;
        for (struct watch *w = h->watches; w != NULL; w = w->next)
            if (w->since_ms != 0 && !w->shut && now - w->since_ms > h->header_ms &&
                !unread(w->fd)) {
                shutdown(w->fd, SHUT_RDWR);
                w->shut = true;
                dropped++;
            }
        if (dropped > 0) {
            char n[16];
            snprintf(n, sizeof(n), "%d", dropped);
            evd_log(EVD_LOG_INFO, "closed connections whose request headers came too late",
                    "connections", n, NULL);
        }
        struct timespec until;
        evd_clock_after(CLOCK_REALTIME, 500, &until);
        pthread_cond_timedwait(&h->watch_cv, &h->watch_mu, &until);
    }
    pthread_mutex_unlock(&h->watch_mu);
    return NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **state)
{
    (void)version;
    struct evd_http *h = cls;
    struct exchange *ex = *state;
    if (ex == NULL) {
        watch_headers(h, c, false);
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
        if (!atomic_load(&h->closing))
            upload_open(h, ex, c, url, method);
        return MHD_YES;
    }
    if (ex->defer != NULL) {
        /* Resumed by its answer (deferred_answer). */
        if (!deferred_ready(ex, c))
            return MHD_YES; /* cannot happen: only the answer resumes it */
        return finish(h, c, ex, method, url, ex->route_name);
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
    if (atomic_load(&h->closing)) {
        evd_resp_problem(&ex->resp, EVD_EUNAVAIL, "the service is shutting down");
        evd_resp_header(&ex->resp, "Connection", "close");
    } else {
        dispatch(h, ex, c, url, method, &route_name);
        if (ex->defer != NULL) {
            ex->route_name = route_name;
            if (!deferred_ready(ex, c))
                return MHD_YES; /* suspended until the answer comes */
        }
    }
    return finish(h, c, ex, method, url, route_name);
}

static enum MHD_Result finish(struct evd_http *h, struct MHD_Connection *c, struct exchange *ex,
                              const char *method, const char *url, const char *route_name)
{
    double secs = (double)(evd_mono_ms() - ex->start_ms) / 1000.0;
    evd_metrics_http(route_name, method, ex->resp.status, secs);
    char status[8], dur[24];
    snprintf(status, sizeof(status), "%d", ex->resp.status);
    snprintf(dur, sizeof(dur), "%lld", (long long)(evd_mono_ms() - ex->start_ms));
    /* A server-side failure's own detail goes to this line only; the client gets its
     * request_id and a detail in its own terms (evd_resp_finish_problem). */
    char *internal = evd_resp_finish_problem(&ex->resp, ex->request_id);
    evd_log(ex->resp.status >= 500 ? EVD_LOG_WARN : EVD_LOG_INFO, "request", "method", method,
            "route", route_name, "path", url, "status", status, "dur_ms", dur, "req_id",
            ex->request_id, "code", ex->resp.code, "error", internal, NULL);
    free(internal);
    return respond(h, c, ex);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    struct evd_http *h = cls;
    watch_headers(h, c, true); /* a kept-alive connection awaits the next request */
    struct exchange *ex = *state;
    if (ex == NULL)
        return;
    atomic_fetch_sub(&h->exchanges, 1);
    if (ex->defer != NULL) {
        pthread_mutex_lock(&evd_http_deferred_mu);
        bool last = deferred_unref_locked(ex->defer);
        pthread_mutex_unlock(&evd_http_deferred_mu);
        if (last)
            deferred_free(ex->defer);
    }
    evd_buf_free(&ex->body);
    if (ex->upload_hashing)
        evd_sha256_free(&ex->upload_hash);
    if (ex->resp.upload != NULL)
        ex->resp.upload->free(ex->resp.upload_state);
    free(ex->resp.body);
    if (ex->resp.stream_free)
        ex->resp.stream_free(ex->resp.stream_cls);
    free(ex);
    *state = NULL;
}

/* Raises the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force. */
static rlim_t raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t was = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            rl.rlim_cur = was;
    }
    return rl.rlim_cur;
}

/* Descriptors kept for what is not an HTTP connection: database connections, provider
 * and webhook calls, the listening socket, epoll and wake descriptors, logs. */
#define EVD_HTTP_FD_RESERVE 512

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
    h->pool = evd_pool_start(opts->handler_threads > 0 ? opts->handler_threads : 16,
                             "evald_http_handlers", err);
    if (h->pool == NULL) {
        freeaddrinfo(ai);
        free(h);
        return NULL;
    }
    pthread_mutex_init(&h->streams_mu, NULL);
    pthread_mutex_init(&h->watch_mu, NULL);
    pthread_cond_init(&h->watch_cv, NULL);
    unsigned threads = opts->threads > 0 ? opts->threads : 1;
    unsigned timeout = opts->timeout_seconds > 0 ? opts->timeout_seconds : 10;
    h->header_ms = (int64_t)timeout * 1000;
    unsigned limit = opts->max_connections > 0 ? opts->max_connections : 16000;
    rlim_t nofile = raise_nofile();
    if (nofile != RLIM_INFINITY && (rlim_t)limit + EVD_HTTP_FD_RESERVE > nofile) {
        unsigned fit =
            nofile > EVD_HTTP_FD_RESERVE + 16 ? (unsigned)(nofile - EVD_HTTP_FD_RESERVE) : 16;
        char want[24], got[24], rl[24];
        snprintf(want, sizeof(want), "%u", limit);
        snprintf(got, sizeof(got), "%u", fit);
        snprintf(rl, sizeof(rl), "%llu", (unsigned long long)nofile);
        evd_log(EVD_LOG_WARN, "EVALD_HTTP_MAX_CONNECTIONS lowered to fit RLIMIT_NOFILE",
                "configured", want, "used", got, "rlimit_nofile", rl, NULL);
        limit = fit;
    }
    if (limit < threads)
        limit = threads; /* MHD gives each thread its share */
    unsigned flags =
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | MHD_USE_ITC;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->daemon = MHD_start_daemon(
        flags, (uint16_t)opts->port, NULL, NULL, on_request, h,
        /* the logger first, or MHD prints what it says about the other options itself */
        MHD_OPTION_EXTERNAL_LOGGER, evd_log_external, (void *)"libmicrohttpd", MHD_OPTION_SOCK_ADDR,
        ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, h, MHD_OPTION_CONNECTION_TIMEOUT, timeout * IDLE_SLACK,
        MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_PER_IP_CONNECTION_LIMIT, opts->max_connections_per_ip,
        MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
        MHD_OPTION_END);
    freeaddrinfo(ai);
    if (h->daemon == NULL) {
        evd_err_set(err, EVD_EUNAVAIL, "could not listen on %s:%u (address in use?)", opts->host,
                    opts->port);
        evd_pool_stop(h->pool);
        pthread_mutex_destroy(&h->streams_mu);
        pthread_mutex_destroy(&h->watch_mu);
        pthread_cond_destroy(&h->watch_cv);
        free(h);
        return NULL;
    }
    /* Without the reaper only the idle timeout bounds slow headers; serve anyway. */
    h->reaper_started = pthread_create(&h->reaper, NULL, reaper_main, h) == 0;
    if (!h->reaper_started)
        evd_log(EVD_LOG_WARN, "could not start the header deadline thread", NULL);
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
    /* Not MHD_quiesce_daemon: in epoll mode with a thread pool it races the pool's own
     * removal of the listening socket from its epoll sets, and libmicrohttpd 0.9.75 aborts
     * the process when it loses ("Failed to remove listen FD from epoll set"). The socket
     * stays open until MHD_stop_daemon; a request that arrives meanwhile is answered 503
     * with Connection: close, which tells a client or balancer to go elsewhere. */
    atomic_store(&h->closing, true);
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
    /* MHD must not stop with a connection suspended: end every stream, resuming those
     * that wait. */
    evd_http_streams_close(h);
    /* Deferred answers still to come: answered 503 here, and resumed; their late answers
     * are dropped (deferred_answer). They leave the server's list, which goes with it. The
     * threads get a moment to send those answers before the daemon stops. */
    bool resumed = false;
    for (;;) {
        struct MHD_Connection *c = NULL;
        pthread_mutex_lock(&evd_http_deferred_mu);
        for (struct deferred *d = h->deferreds; d != NULL; d = d->next) {
            if (!d->answered) {
                evd_resp_problem(&d->answer, EVD_EUNAVAIL, "the service is shutting down");
                evd_resp_header(&d->answer, "Connection", "close");
                d->answered = true;
            }
            if (c == NULL && d->suspended) {
                d->suspended = false;
                c = d->conn;
            }
        }
        if (c == NULL) {
            for (struct deferred *d = h->deferreds; d != NULL; d = d->next)
                d->h = NULL;
            h->deferreds = NULL;
        }
        pthread_mutex_unlock(&evd_http_deferred_mu);
        if (c == NULL)
            break;
        MHD_resume_connection(c);
        resumed = true;
    }
    if (resumed)
        evd_http_drain(h, 1000);
    if (h->reaper_started) {
        pthread_mutex_lock(&h->watch_mu);
        h->reaper_stop = true;
        pthread_cond_signal(&h->watch_cv);
        pthread_mutex_unlock(&h->watch_mu);
        pthread_join(h->reaper, NULL);
    }
    MHD_stop_daemon(h->daemon);
    /* After the daemon: what is queued runs (a request answered 503 is dropped unrun, a
     * stream read ends), and a read still running frees the stream MHD let go of. */
    evd_pool_stop(h->pool);
    pthread_mutex_destroy(&h->streams_mu);
    pthread_mutex_destroy(&h->watch_mu);
    pthread_cond_destroy(&h->watch_cv);
    free(h);
}
