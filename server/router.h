/*
 * The routing table type and matcher. Patterns are literal segments and
 * "{name}" parameters, matched segment by segment; a parameter never spans a '/',
 * except a final "{name*}", which takes the rest of the path (never "..").
 * Matching is pure and thread-safe; the table is immutable.
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
 * than 255 bytes does not match.
 */
const struct evd_route *evd_router_match(const struct evd_route *table, size_t n,
                                         const char *method, const char *path,
                                         struct evd_req *req, bool *path_known);

#endif
