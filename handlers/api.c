/* Response helpers and the evd_code → HTTP status map. Thread-safe (no state). */
#include "handlers/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *evd_req_param(const struct evd_req *req, const char *name)
{
    for (size_t i = 0; i < req->nparams; i++)
        if (strcmp(req->names[i], name) == 0)
            return req->values[i];
    return NULL;
}

const char *evd_req_query(const struct evd_req *req, const char *key)
{
    return req->query_fn ? req->query_fn(req->conn, key) : NULL;
}

const char *evd_req_header(const struct evd_req *req, const char *name)
{
    return req->header_fn ? req->header_fn(req->conn, name) : NULL;
}

struct evd_deferred *evd_req_defer(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_deferred *d = req->defer_fn ? req->defer_fn(req->defer_ctx) : NULL;
    if (d != NULL)
        resp->deferred = true;
    return d;
}

void evd_deferred_answer(struct evd_deferred *d, struct evd_resp *answer)
{
    d->answer(d, answer);
}

json_t *evd_req_list_request(const struct evd_req *req, struct evd_resp *resp)
{
    json_t *request = json_object();
    const char *limit = evd_req_query(req, "limit");
    if (request == NULL) {
        evd_resp_problem(resp, EVD_ENOMEM, "out of memory");
        return NULL;
    }
    if (limit != NULL) {
        char *end = NULL;
        long v = strtol(limit, &end, 10);
        if (*limit == '\0' || *end != '\0') {
            json_decref(request);
            evd_resp_problem(resp, EVD_EINVAL, "limit must be an integer");
            return NULL;
        }
        json_object_set_new(request, "limit", json_integer(v));
    }
    return request;
}

bool evd_req_page_limit(const struct evd_req *req, struct evd_resp *resp, unsigned *limit)
{
    const char *s = evd_req_query(req, "limit");
    *limit = EVD_PAGE_DEFAULT;
    if (s == NULL)
        return true;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 1 || v > EVD_PAGE_MAX) {
        char detail[64];
        snprintf(detail, sizeof(detail), "limit must be between 1 and %d", EVD_PAGE_MAX);
        evd_resp_problem(resp, EVD_EINVAL, detail);
        return false;
    }
    *limit = (unsigned)v;
    return true;
}

int evd_http_status(enum evd_code code)
{
    switch (code) {
    case EVD_OK:
        return 200;
    case EVD_EINVAL:
        return 400;
    case EVD_EUNAUTH:
        return 401;
    case EVD_ENOTFOUND:
        return 404;
    case EVD_ECONFLICT:
        return 409;
    case EVD_ETOOLARGE:
        return 413;
    case EVD_EMEDIA:
        return 415;
    case EVD_EMISMATCH:
        return 422;
    case EVD_EDB:
    case EVD_EUNAVAIL:
        return 503;
    case EVD_ENOMEM:
    case EVD_EUPSTREAM:
    case EVD_ETIMEOUT:
    case EVD_ECANCELLED:
    case EVD_EINTERNAL:
        return 500;
    }
    return 500;
}

static const char *problem_code(enum evd_code code)
{
    switch (evd_http_status(code)) {
    case 400:
        return "invalid_request";
    case 401:
        return "unauthorized";
    case 404:
        return "not_found";
    case 409:
        return "conflict";
    case 413:
        return "payload_too_large";
    case 415:
        return "unsupported_media_type";
    case 422:
        return "unprocessable";
    case 503:
        return "unavailable";
    default:
        return "internal";
    }
}

static const char *status_title(int status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 404:
        return "Not Found";
    case 409:
        return "Conflict";
    case 413:
        return "Content Too Large";
    case 415:
        return "Unsupported Media Type";
    case 422:
        return "Unprocessable Content";
    case 503:
        return "Service Unavailable";
    default:
        return "Internal Server Error";
    }
}

char *evd_json_dump(const json_t *value, size_t *len)
{
    char *s = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    if (s != NULL && len != NULL)
        *len = strlen(s);
    return s;
}

static void set_body(struct evd_resp *resp, int status, const char *ctype, char *body, size_t len)
{
    free(resp->body);
    resp->status = status;
    resp->content_type = ctype;
    resp->body = body;
    resp->len = len;
}

void evd_resp_json(struct evd_resp *resp, int status, json_t *body)
{
    size_t len = 0;
    char *text = evd_json_dump(body ? body : json_null(), &len);
    json_decref(body);
    if (text == NULL) {
        evd_resp_problem(resp, EVD_ENOMEM, "could not serialize the response");
        return;
    }
    set_body(resp, status, "application/json; charset=utf-8", text, len);
}

void evd_resp_problem(struct evd_resp *resp, enum evd_code code, const char *detail)
{
    int status = evd_http_status(code);
    const char *pcode = problem_code(code);
    json_t *p = json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", "about:blank", "title",
                          status_title(status), "status", status, "detail",
                          detail ? detail : "", "code", pcode);
    size_t len = 0;
    char *text = p ? evd_json_dump(p, &len) : NULL;
    json_decref(p);
    bool fallback = text == NULL;
    if (fallback) {
        static const char doc[] = "{\"type\":\"about:blank\",\"title\":\"Internal Server "
                                  "Error\",\"status\":500,\"detail\":\"\",\"code\":\"internal\"}";
        text = strdup(doc);
        len = text ? strlen(text) : 0;
        status = 500;
        pcode = "internal";
    }
    set_body(resp, status, "application/problem+json", text, len);
    resp->code = pcode;
    resp->error = fallback ? EVD_ENOMEM : code;
}

/* The detail a client gets of a server-side failure, or NULL to keep the handler's. */
static const char *public_detail(enum evd_code code)
{
    switch (code) {
    case EVD_EDB:
        return "the database is unavailable; retry later";
    case EVD_ENOMEM:
    case EVD_EUPSTREAM:
    case EVD_ETIMEOUT:
    case EVD_ECANCELLED:
    case EVD_EINTERNAL:
        return "an internal error occurred; the server's log has its details under this "
               "request_id";
    default:
        return NULL; /* 4xx and the 503s that say what to do (shutting down, pool busy) */
    }
}

char *evd_resp_finish_problem(struct evd_resp *resp, const char *request_id)
{
    if (resp->error == EVD_OK || resp->stream != NULL || resp->body == NULL)
        return NULL;
    json_t *p = json_loadb(resp->body, resp->len, 0, NULL);
    if (!json_is_object(p)) {
        json_decref(p);
        return NULL;
    }
    char *internal = NULL;
    const char *pub = public_detail(resp->error);
    if (pub != NULL) {
        const char *was = json_string_value(json_object_get(p, "detail"));
        internal = strdup(was != NULL ? was : "");
        json_object_set_new(p, "detail", json_string(pub));
    }
    json_object_set_new(p, "request_id", json_string(request_id));
    size_t len = 0;
    char *text = evd_json_dump(p, &len);
    json_decref(p);
    if (text != NULL)
        set_body(resp, resp->status, "application/problem+json", text, len);
    return internal;
}

void evd_resp_error(struct evd_resp *resp, const struct evd_err *err)
{
    evd_resp_problem(resp, err->code == EVD_OK ? EVD_EINTERNAL : err->code, err->msg);
}

void evd_resp_outcome(struct evd_resp *resp, int status, enum evd_code rc, json_t *out,
                      const struct evd_err *err)
{
    if (rc != EVD_OK) {
        json_decref(out);
        evd_resp_error(resp, err);
    } else {
        evd_resp_json(resp, status, out);
    }
}

void evd_resp_raw(struct evd_resp *resp, int status, const char *content_type, const void *data,
                  size_t len)
{
    char *copy = malloc(len + 1);
    if (copy == NULL) {
        evd_resp_problem(resp, EVD_ENOMEM, "out of memory");
        return;
    }
    memcpy(copy, data, len);
    copy[len] = '\0';
    set_body(resp, status, content_type, copy, len);
}

void evd_resp_header(struct evd_resp *resp, const char *name, const char *value)
{
    if (resp->nheaders >= EVD_RESP_MAX_HEADERS)
        return;
    snprintf(resp->header_names[resp->nheaders], sizeof(resp->header_names[0]), "%s", name);
    snprintf(resp->header_values[resp->nheaders], sizeof(resp->header_values[0]), "%s", value);
    resp->nheaders++;
}
