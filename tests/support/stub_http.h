/*
 * Test helper: one blocking HTTP request with libcurl, capturing status, headers and
 * body (and the body parsed as JSON when it is JSON). Each call uses its own easy
 * handle, so calls from several threads are fine. curl_global_init runs once, on first
 * use (pthread_once). Only loopback URLs are meant to be used.
 *
 *     struct evd_test_http_resp r;
 *     const char *h[] = {"Authorization: Bearer k", NULL};
 *     evd_test_http("POST", url, "{\"model\":\"m\"}", h, 5000, &r);
 *     ck_assert_int_eq(r.status, 200);
 *     ... json_object_get(r.json, "id") ...
 *     evd_test_http_resp_free(&r);
 */
#ifndef EVD_TESTS_STUB_HTTP_H
#define EVD_TESTS_STUB_HTTP_H

#include <jansson.h>
#include <stddef.h>

struct evd_test_http_resp {
    int curl_code; /* CURLcode: 0, or e.g. 28 (timeout), 18 (partial body), 7 (refused) */
    long status;   /* HTTP status, 0 when none was received */
    char *body;    /* NUL-terminated received body (possibly partial), never NULL */
    size_t len;
    char *headers;   /* raw received header block, never NULL */
    json_t *json;    /* the body parsed as JSON (new reference), or NULL */
    long elapsed_ms; /* wall time of the request */
};

/*
 * Performs `method url` with optional `body` (sent with Content-Type: application/json
 * unless a Content-Type header is given) and `headers` ("Name: value", NULL-terminated,
 * may be NULL). timeout_ms 0 means 30 s. Always fills *r (free with
 * evd_test_http_resp_free); returns r->curl_code.
 */
int evd_test_http(const char *method, const char *url, const char *body, const char *const *headers,
                  long timeout_ms, struct evd_test_http_resp *r);

/* Value of response header `name` (case-insensitive), new string; NULL when absent. */
char *evd_test_http_header(const struct evd_test_http_resp *r, const char *name);

void evd_test_http_resp_free(struct evd_test_http_resp *r);

#endif
