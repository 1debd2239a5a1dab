/*
 * The routing table type and matcher. Patterns are literal segments and
 * "{name}" parameters, matched segment by segment; a parameter never spans a '/',
 * except a final "{name*}", which takes the rest of the path (never "..").
 * Matching and checking are pure and thread-safe; the table is immutable.
 */
#ifndef EVD_SERVER_ROUTER_H
#define EVD_SERVER_ROUTER_H

#include <stdbool.h>
#include <stddef.h>

#include "handlers/api.h"

typedef void (*evd_handler_fn)(struct evd_req *req, struct evd_resp *resp);

enum {
    EVD_ROUTE_PUBLIC = 1,      /* no bearer token needed */
    EVD_ROUTE_QUERY_TOKEN = 2, /* also accepts ?access_token= (EventSource cannot send headers) */
    EVD_ROUTE_UPLOAD = 4,      /* fn runs when the headers arrive and takes the body as an
                                  upload (struct evd_upload_ops, handlers/api.h) */
    EVD_ROUTE_INLINE = 8,      /* cheap, and waits on no database and no lock held across
                                  a query: answered on the HTTP thread, never queued behind
                                  the handler pool (server/pool.h) */
    EVD_ROUTE_URGENT = 16,     /* runs on the handler pool ahead of every request queued
                                  there (a readiness probe) */
    EVD_ROUTE_IDEMPOTENT = 32, /* a POST that creates: honours Idempotency-Key
                                  (engine/idempotency.h) */
};

struct evd_route {
    const char *method;
    const char *pattern;
    evd_handler_fn fn;
    unsigned flags;
};

/*
 * Finds the route for method+path and fills req->names/values/nparams/route.
 * Returns NULL when none matches; *path_known tells whether the path matched
 * under another method. Parameter values are percent-decoded; a value longer
 * than 255 bytes, or with a NUL byte (%00), does not match.
 */
const struct evd_route *evd_router_match(const struct evd_route *table, size_t n,
                                         const char *method, const char *path, struct evd_req *req,
                                         bool *path_known);

/*
 * The detail of the 404 for a request no route serves: "METHOD path: no such resource"
 * (or "...: method not allowed on this resource" when path_known), into out (size n,
 * 300 is enough). The method and path are shortened on character boundaries and bytes
 * that are not UTF-8 become U+FFFD, so the detail is always text.
 */
void evd_router_unmatched(const char *method, const char *path, bool path_known, char *out,
                          size_t n);

/*
 * Visits every query argument of a request: calls visit(cls, key, key_len, value,
 * value_len) for each (value NULL for "?flag" with no '='), in order, until it returns
 * false; returns false when a visit did.
 */
typedef bool (*evd_query_visit_fn)(void *cls, const char *key, size_t key_len, const char *value,
                                   size_t value_len);
typedef bool (*evd_query_each_fn)(void *conn, evd_query_visit_fn visit, void *cls);

/*
 * The one check of what a handler may read from the URL, run after matching and
 * authentication: every path parameter of req and every query argument (through
 * `each`, which may be NULL) must be well-formed UTF-8 without NUL bytes, so that no
 * handler, log line or SQL statement sees bytes that are not text. EVD_OK, or
 * EVD_EINVAL with a message naming the parameter ("path parameter id must be valid
 * UTF-8", "query parameter baseline must not contain a NUL byte").
 */
enum evd_code evd_router_check(const struct evd_req *req, evd_query_each_fn each,
                               struct evd_err *err);

/* The check of one value, named `kind` ("path", "query") and `name`; as above. */
enum evd_code evd_router_check_value(const char *kind, const char *name, size_t name_len,
                                     const char *value, size_t value_len, struct evd_err *err);

#endif
