/*
 * The calls of the handler pool (http_internal.h): a request's handler, or an upload's
 * end, run off the HTTP threads with a copy of what the handler may read, and the
 * Idempotency-Key of a creating request (docs/idempotency.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "domain/canonical.h"
#include "engine/idempotency.h"
#include "server/http_internal.h"

/*
 * A request on the handler pool: a copy of what its handler may read (the request line,
 * the path parameters, the body, a snapshot of its headers and query arguments), so that
 * it reads nothing of libmicrohttpd's, which may free the connection once the server has
 * stopped and answered 503 itself. The exchange's deferral carries the answer back.
 */
struct call {
    struct evd_pool_job job; /* first */
    struct evd_req req;      /* its strings point into this call */
    const struct evd_route *route;
    struct deferred *defer; /* the exchange's; answered here unless the handler took it */
    bool taken;             /* the handler took the deferral (evd_req_defer) */
    /* An upload's end, instead of the route's handler: the call owns the state. */
    const struct evd_upload_ops *upload;
    void *upload_state;
    char method[16];
    char request_id[72];
    char *path;
    /* The request's Idempotency-Key (a route flagged EVD_ROUTE_IDEMPOTENT), or "". */
    char idem_key[256];
    char upload_sha256[65]; /* an upload's bytes, hashed as they came ("": none) */
    /* The headers and query arguments: a kind byte ('h' or 'q'), the key and its NUL,
     * a presence byte ('=' or '-': an argument without a value), the value and its NUL. */
    struct evd_buf values;
};

static const char *call_lookup(const struct call *k, char kind, const char *key)
{
    const char *p = k->values.data, *end = p + k->values.len;
    while (p != NULL && p < end) {
        char kd = *p++;
        const char *name = p;
        p += strlen(p) + 1;
        bool has = *p++ == '=';
        const char *value = p;
        p += strlen(p) + 1;
        /* Case-insensitive and the first of a name, as libmicrohttpd's own lookup. */
        if (kd == kind && strcasecmp(name, key) == 0)
            return has ? value : NULL;
    }
    return NULL;
}

static const char *call_query(void *conn, const char *key)
{
    return call_lookup(conn, 'q', key);
}

static const char *call_header(void *conn, const char *name)
{
    return call_lookup(conn, 'h', name);
}

/* evd_req's defer_fn on the pool: the exchange's deferral, which the call holds. */
static struct evd_deferred *call_defer(void *arg)
{
    struct call *k = arg;
    /* An idempotent request's answer is recorded by the call, which must see it. */
    if (k->taken || k->idem_key[0] != '\0')
        return NULL;
    k->taken = true;
    return &k->defer->base;
}

static enum MHD_Result call_value(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    struct call *k = cls;
    char kd = kind == MHD_HEADER_KIND ? 'h' : 'q';
    bool ok = evd_buf_append(&k->values, &kd, 1) == 0 &&
              evd_buf_append(&k->values, key, strlen(key) + 1) == 0 &&
              evd_buf_append(&k->values, value != NULL ? "=" : "-", 1) == 0 &&
              evd_buf_append(&k->values, value != NULL ? value : "", value ? strlen(value) + 1 : 1) ==
                  0;
    return ok ? MHD_YES : MHD_NO;
}

static void call_free(struct call *k)
{
    if (k == NULL)
        return;
    json_decref(k->req.body);
    if (k->upload != NULL)
        k->upload->free(k->upload_state);
    evd_buf_free(&k->values);
    free(k->path);
    free(k);
}

/* A call for `req` (routed; its body is stolen), or NULL when out of memory. */
static struct call *call_new(struct MHD_Connection *c, const struct evd_route *route,
                             const struct evd_req *req)
{
    struct call *k = calloc(1, sizeof(*k));
    if (k == NULL)
        return NULL;
    k->route = route;
    k->req = *req;
    k->req.body = NULL;
    k->path = strdup(req->path);
    snprintf(k->method, sizeof(k->method), "%s", req->method);
    snprintf(k->request_id, sizeof(k->request_id), "%s", req->request_id);
    int n = MHD_get_connection_values(c, MHD_HEADER_KIND | MHD_GET_ARGUMENT_KIND, call_value, k);
    bool whole = n >= 0 && MHD_get_connection_values(c, MHD_HEADER_KIND | MHD_GET_ARGUMENT_KIND,
                                                     NULL, NULL) == n;
    if (k->path == NULL || !whole) {
        call_free(k);
        return NULL;
    }
    k->req.method = k->method;
    k->req.path = k->path;
    k->req.request_id = k->request_id;
    k->req.conn = k;
    k->req.query_fn = call_query;
    k->req.header_fn = call_header;
    k->req.defer_fn = call_defer;
    k->req.defer_ctx = k;
    return k;
}

/* True when the server has answered the call's request itself (it stopped). */
static bool call_dropped(const struct call *k)
{
    pthread_mutex_lock(&evd_http_deferred_mu);
    bool dropped = k->defer->answered;
    pthread_mutex_unlock(&evd_http_deferred_mu);
    return dropped;
}

/* Runs the call's handler, or its upload's end, into *resp. */
static void call_handle(struct call *k, struct evd_resp *resp)
{
    if (k->upload != NULL)
        k->upload->end(k->upload_state, &k->req, resp);
    else
        k->route->fn(&k->req, resp);
}

/* The value of response header `name` in r, or NULL. */
static const char *resp_header(const struct evd_resp *r, const char *name)
{
    for (size_t i = 0; i < r->nheaders; i++)
        if (strcasecmp(r->header_names[i], name) == 0)
            return r->header_values[i];
    return NULL;
}

/*
 * An idempotent request (docs/idempotency.md): the key is claimed for the body's
 * fingerprint; the first request runs and its answer is recorded, a repeat gets that
 * answer again with Idempotent-Replayed: true, and one with another body a 422.
 */
static void call_idempotent(struct call *k, struct evd_resp *resp)
{
    char fingerprint[65];
    bool canonical = false;
    if (k->upload != NULL) {
        canonical = k->upload->fingerprint != NULL &&
                    k->upload->fingerprint(k->upload_state, fingerprint);
        if (!canonical)
            snprintf(fingerprint, sizeof(fingerprint), "%s", k->upload_sha256);
    } else if (k->req.body != NULL) {
        if (evd_canonical_sha256(k->req.body, fingerprint) != 0) {
            evd_resp_problem(resp, EVD_ENOMEM, "out of memory");
            return;
        }
    } else {
        evd_sha256_hex("", 0, fingerprint);
    }
    const char *auth = call_header(k, "Authorization");
    const char *token = auth != NULL && strncasecmp(auth, "Bearer ", 7) == 0 ? auth + 7 : "";
    struct evd_idem t;
    struct evd_err err = {0};
    enum evd_code rc = evd_idem_begin(k->req.ctx->engine, token, k->method, k->path, k->idem_key,
                                      fingerprint, &t, &err);
    if (rc != EVD_OK) {
        evd_resp_error(resp, &err);
    } else if (t.outcome == EVD_IDEM_REPLAY) {
        /* The content types evald answers with are static strings; another is a header. */
        static const char *const known[] = {"application/json", "application/problem+json"};
        const char *ct = NULL;
        for (size_t i = 0; t.content_type != NULL && i < sizeof(known) / sizeof(*known); i++)
            if (strcmp(t.content_type, known[i]) == 0)
                ct = known[i];
        evd_resp_raw(resp, t.status, ct, t.body ? t.body : "", t.body ? strlen(t.body) : 0);
        if (ct == NULL && t.content_type != NULL)
            evd_resp_header(resp, "Content-Type", t.content_type);
        if (t.location != NULL)
            evd_resp_header(resp, "Location", t.location);
        evd_resp_header(resp, "Idempotent-Replayed", "true");
        /* A replayed problem gains this request's id, as any problem does. */
        if (t.status >= 400)
            resp->error = EVD_EINVAL;
    } else {
        call_handle(k, resp);
        char *body = resp->stream == NULL && resp->body != NULL ? strndup(resp->body, resp->len)
                                                                : NULL;
        int status = resp->stream == NULL && (resp->body == NULL || body != NULL) ? resp->status
                                                                                 : 0;
        evd_idem_end(&t, status, resp_header(resp, "Location"), resp->content_type, body);
        free(body);
        return;
    }
    evd_idem_end(&t, 0, NULL, NULL, NULL);
}

/* The pool's job: runs the handler (or the upload's end) and answers, unless the handler
 * took the deferral to answer later itself. */
static void call_run(struct evd_pool_job *job)
{
    struct call *k = (struct call *)job;
    struct evd_resp resp = {.status = 500};
    /* A request the server answered 503 when it stopped is not run at all: its client
     * was told that nothing was done. */
    if (call_dropped(k)) {
        evd_deferred_answer(&k->defer->base, &resp);
        call_free(k);
        return;
    }
    if (k->idem_key[0] != '\0')
        call_idempotent(k, &resp);
    else
        call_handle(k, &resp);
    if (!k->taken) {
        if (resp.body == NULL && resp.stream == NULL)
            evd_resp_problem(&resp, EVD_EINTERNAL, "the handler produced no response");
        evd_deferred_answer(&k->defer->base, &resp);
    } else {
        evd_http_resp_drop(&resp);
    }
    call_free(k);
}

bool evd_http_call_submit(struct evd_http *h, struct exchange *ex, struct MHD_Connection *c,
                        const struct evd_route *route, const struct evd_req *req, json_t *body,
                        const struct evd_upload_ops *upload, void *upload_state)
{
    struct call *k = call_new(c, route, req);
    if (k == NULL)
        return false;
    const char *key = (route->flags & EVD_ROUTE_IDEMPOTENT)
                          ? MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key")
                          : NULL;
    if (key != NULL)
        snprintf(k->idem_key, sizeof(k->idem_key), "%s", key); /* checked: at most 255 */
    if (ex->upload_hashing) {
        evd_sha256_final_hex(&ex->upload_hash, k->upload_sha256);
        evd_sha256_free(&ex->upload_hash);
        ex->upload_hashing = false;
    }
    k->defer = (struct deferred *)evd_http_defer(h, ex, c);
    if (k->defer == NULL) {
        call_free(k);
        return false;
    }
    k->req.body = body;
    k->upload = upload;
    k->upload_state = upload_state;
    k->job.run = call_run;
    evd_pool_submit(h->pool, &k->job, (route->flags & EVD_ROUTE_URGENT) != 0);
    return true;
}

bool evd_http_idempotency_key_ok(const struct evd_route *route, struct MHD_Connection *c,
                               struct evd_resp *resp)
{
    if (!(route->flags & EVD_ROUTE_IDEMPOTENT))
        return true;
    const char *key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key");
    if (key == NULL || evd_idem_key_valid(key))
        return true;
    evd_resp_problem(resp, EVD_EINVAL,
                     "Idempotency-Key must be 1 to 255 visible ASCII characters");
    return false;
}
