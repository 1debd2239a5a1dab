/* Unit tests for server/router.c and the problem mapping of handlers/api.c. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "handlers/api.h"
#include "server/router.h"
#include "server/routes.h"
#include "tests/support/testutil.h"

static void h_a(struct evd_req *r, struct evd_resp *p)
{
    (void)r;
    (void)p;
}

static const struct evd_route table[] = {
    {"GET", "/v1/evaluations", h_a, 0},
    {"POST", "/v1/evaluations", h_a, 0},
    {"GET", "/v1/evaluations/{id}", h_a, 0},
    {"GET", "/v1/evaluations/{id}/status", h_a, 0},
    {"POST", "/v1/functions/{function_id}", h_a, 0},
    {"GET", "/console/{path*}", h_a, EVD_ROUTE_PUBLIC},
    {"GET", "/", h_a, EVD_ROUTE_PUBLIC},
};
#define N (sizeof(table) / sizeof(table[0]))

struct match_case {
    const char *method, *path;
    int route; /* index, -1 none */
    int path_known;
    const char *param, *value;
};

static const struct match_case cases[] = {
    {"GET", "/v1/evaluations", 0, 1, NULL, NULL},
    {"POST", "/v1/evaluations", 1, 1, NULL, NULL},
    {"DELETE", "/v1/evaluations", -1, 1, NULL, NULL},
    {"GET", "/v1/evaluations/eval_1", 2, 1, "id", "eval_1"},
    {"HEAD", "/v1/evaluations/eval_1", 2, 1, "id", "eval_1"},
    {"GET", "/v1/evaluations/eval_1/status", 3, 1, "id", "eval_1"},
    {"GET", "/v1/evaluations/eval_1/nope", -1, 0, NULL, NULL},
    {"GET", "/v1/evaluations/", -1, 0, NULL, NULL},
    {"POST", "/v1/functions/eval::start", 4, 1, "function_id", "eval::start"},
    {"POST", "/v1/functions/eval%3A%3Astatus", 4, 1, "function_id", "eval::status"},
    {"POST", "/v1/functions/bad%zz", -1, 0, NULL, NULL},
    /* a value is a C string: %00 would cut it short, so it does not match */
    {"GET", "/v1/evaluations/a%00b", -1, 0, NULL, NULL},
    /* bytes that are not UTF-8 match (the check, not the matcher, refuses them) */
    {"GET", "/v1/evaluations/%FF%FE", 2, 1, "id", "\xff\xfe"},
    {"GET", "/console/app.js", 5, 1, "path", "app.js"},
    {"GET", "/console/js/charts.js", 5, 1, "path", "js/charts.js"},
    {"GET", "/console/../secret", -1, 0, NULL, NULL},
    {"GET", "/", 6, 1, NULL, NULL},
    {"GET", "/v2", -1, 0, NULL, NULL},
};

START_TEST(routes_match)
{
    const struct match_case *c = &cases[_i];
    struct evd_req req;
    memset(&req, 0, sizeof(req));
    bool known = false;
    const struct evd_route *r = evd_router_match(table, N, c->method, c->path, &req, &known);
    if (c->route < 0) {
        ck_assert_msg(r == NULL, "%s %s should not match", c->method, c->path);
    } else {
        ck_assert_msg(r == &table[c->route], "%s %s matched the wrong route", c->method, c->path);
        ck_assert_str_eq(req.route, table[c->route].pattern);
    }
    ck_assert_int_eq(known, c->path_known);
    if (c->param)
        ck_assert_str_eq(evd_req_param(&req, c->param), c->value);
}
END_TEST

START_TEST(long_parameters_do_not_match)
{
    char path[600] = "/v1/evaluations/";
    memset(path + strlen(path), 'x', 400);
    struct evd_req req;
    memset(&req, 0, sizeof(req));
    bool known;
    ck_assert_ptr_null(evd_router_match(table, N, "GET", path, &req, &known));
}
END_TEST

/* One value through the check: the outcome and the message for each kind of bad bytes. */
struct value_case {
    const char *kind, *name;
    const char *value;
    size_t len;      /* 0: strlen(value) */
    const char *msg; /* NULL: accepted */
};

static const struct value_case value_cases[] = {
    {"path", "id", "eval_1", 0, NULL},
    {"path", "id", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 0, NULL},
    {"path", "id", "", 0, NULL},
    {"path", "id", "\xff\xfe", 0, "path parameter id must be valid UTF-8"},
    {"path", "function_id", "eval\x80", 0, "path parameter function_id must be valid UTF-8"},
    {"path", "id", "\xc0\x80", 0, "path parameter id must be valid UTF-8"},         /* overlong */
    {"path", "id", "\xe0\x80\xaf", 0, "path parameter id must be valid UTF-8"},     /* overlong */
    {"path", "id", "\xed\xa0\x80", 0, "path parameter id must be valid UTF-8"},     /* surrogate */
    {"path", "id", "\xf4\x90\x80\x80", 0, "path parameter id must be valid UTF-8"}, /* > U+10FFFF */
    {"path", "id", "ab\xe2\x82", 0, "path parameter id must be valid UTF-8"},       /* truncated */
    {"query", "baseline", "\xff", 0, "query parameter baseline must be valid UTF-8"},
    {"query", "ids", "a,b,\xfe", 0, "query parameter ids must be valid UTF-8"},
    {"query", "before", "a\0b", 3, "query parameter before must not contain a NUL byte"},
    {"query", "before", "MTc2NzIyNTYwMDAwMDpldmFs", 0, NULL},
};

START_TEST(values_are_checked_as_utf8)
{
    const struct value_case *c = &value_cases[_i];
    struct evd_err err = {0};
    size_t len = c->len ? c->len : strlen(c->value);
    enum evd_code rc =
        evd_router_check_value(c->kind, c->name, strlen(c->name), c->value, len, &err);
    if (c->msg == NULL) {
        ck_assert_msg(rc == EVD_OK, "case %d refused: %s", _i, err.msg);
    } else {
        ck_assert_int_eq(rc, EVD_EINVAL);
        ck_assert_str_eq(err.msg, c->msg);
    }
}
END_TEST

START_TEST(query_names_that_are_not_text_are_refused)
{
    struct evd_err err = {0};
    ck_assert_int_eq(evd_router_check_value("query", "\xff", 1, "x", 1, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "query parameter names must be valid UTF-8");
    /* a key without '=' has no value: nothing to check but its name */
    ck_assert_int_eq(evd_router_check_value("query", "flag", 4, NULL, 0, &err), EVD_OK);
    /* a long name is shown shortened on a character boundary, still text */
    char name[200];
    for (size_t i = 0; i + 2 <= 150; i += 2)
        memcpy(name + i, "\xc3\xa9", 2);
    ck_assert_int_eq(evd_router_check_value("query", name, 150, "\xff", 1, &err), EVD_EINVAL);
    ck_assert(evd_utf8_valid(err.msg, strlen(err.msg)));
    ck_assert_ptr_nonnull(strstr(err.msg, "must be valid UTF-8"));
}
END_TEST

/* A fake query string for evd_router_check: pairs of key, value (value may be NULL). */
struct fake_query {
    const char *pairs[8][2];
    size_t lens[8];
    size_t n;
    size_t visited;
};

static bool fake_each(void *conn, evd_query_visit_fn visit, void *cls)
{
    struct fake_query *q = conn;
    for (size_t i = 0; i < q->n; i++) {
        q->visited++;
        const char *v = q->pairs[i][1];
        if (!visit(cls, q->pairs[i][0], strlen(q->pairs[i][0]), v,
                   v ? (q->lens[i] ? q->lens[i] : strlen(v)) : 0))
            return false;
    }
    return true;
}

START_TEST(check_walks_every_query_argument)
{
    struct fake_query q = {
        .pairs = {{"limit", "5"}, {"flag", NULL}, {"baseline", "\xff"}, {"ids", "\xfe"}}, .n = 4};
    struct evd_req req;
    memset(&req, 0, sizeof(req));
    req.conn = &q;
    struct evd_err err = {0};
    ck_assert_int_eq(evd_router_check(&req, fake_each, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "query parameter baseline must be valid UTF-8");
    ck_assert_uint_eq(q.visited, 3); /* stops at the first bad one */
    struct fake_query good = {.pairs = {{"ids", "a,b"}, {"baseline", "b"}}, .n = 2};
    req.conn = &good;
    ck_assert_int_eq(evd_router_check(&req, fake_each, &err), EVD_OK);
    ck_assert_uint_eq(good.visited, 2);
    struct fake_query nul = {.pairs = {{"before", "a\0b"}}, .lens = {3}, .n = 1};
    req.conn = &nul;
    ck_assert_int_eq(evd_router_check(&req, fake_each, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "query parameter before must not contain a NUL byte");
    /* no query iterator: only the path is checked */
    ck_assert_int_eq(evd_router_check(&req, NULL, &err), EVD_OK);
}
END_TEST

/*
 * Writes the path of `pattern` with parameter number `bad` replaced by `bad_value` (raw,
 * as on the wire) and every other parameter by "x"; returns the bad parameter's name in
 * name (empty when the pattern has fewer parameters).
 */
static void path_of(const char *pattern, size_t bad, const char *bad_value, char *out, size_t n,
                    char *name, size_t namesz)
{
    size_t at = 0, k = 0;
    name[0] = '\0';
    for (const char *p = pattern; *p && at + 1 < n;) {
        if (*p == '{') {
            const char *e = strchr(p, '}');
            size_t nl = (size_t)(e - p - 1);
            if (nl > 0 && p[nl] == '*')
                nl--;
            if (k == bad) {
                snprintf(name, namesz, "%.*s", (int)nl, p + 1);
                at += (size_t)snprintf(out + at, n - at, "%s", bad_value);
            } else {
                at += (size_t)snprintf(out + at, n - at, "x");
            }
            k++;
            p = e + 1;
        } else {
            out[at++] = *p++;
        }
    }
    out[at < n ? at : n - 1] = '\0';
}

/* Every parameter of every route of the real table (so a new route is covered too). */
START_TEST(every_route_parameter_is_checked)
{
    size_t checked = 0;
    for (size_t i = 0; i < evd_nroutes; i++) {
        const struct evd_route *r = &evd_routes[i];
        for (size_t bad = 0;; bad++) {
            char path[512], name[64];
            path_of(r->pattern, bad, "%FF%FE", path, sizeof(path), name, sizeof(name));
            if (name[0] == '\0')
                break;
            struct evd_req req;
            memset(&req, 0, sizeof(req));
            bool known = false;
            const struct evd_route *m =
                evd_router_match(evd_routes, evd_nroutes, r->method, path, &req, &known);
            ck_assert_msg(m != NULL, "%s %s does not match", r->method, path);
            struct evd_err err = {0};
            ck_assert_msg(evd_router_check(&req, NULL, &err) == EVD_EINVAL, "%s %s passed",
                          r->method, path);
            char want[128];
            snprintf(want, sizeof(want), "path parameter %s must be valid UTF-8", name);
            ck_assert_str_eq(err.msg, want);
            /* the same route with text in that place passes */
            path_of(r->pattern, bad, "caf%C3%A9", path, sizeof(path), name, sizeof(name));
            memset(&req, 0, sizeof(req));
            m = evd_router_match(evd_routes, evd_nroutes, r->method, path, &req, &known);
            ck_assert_ptr_nonnull(m);
            ck_assert_int_eq(evd_router_check(&req, NULL, &err), EVD_OK);
            checked++;
        }
    }
    ck_assert_uint_ge(checked, 10); /* the walk did reach the table */
}
END_TEST

START_TEST(unmatched_detail_is_always_text)
{
    char detail[300];
    evd_router_unmatched("GET", "/nope/\xff\xfe", false, detail, sizeof(detail));
    ck_assert_str_eq(detail, "GET /nope/\xef\xbf\xbd\xef\xbf\xbd: no such resource");
    evd_router_unmatched("DELETE", "/v1/models", true, detail, sizeof(detail));
    ck_assert_str_eq(detail, "DELETE /v1/models: method not allowed on this resource");
    /* a long path is cut on a character boundary, never inside "\xe2\x82\xac" */
    char path[700] = "/";
    for (size_t i = 0; i < 200; i++)
        strcat(path, "\xe2\x82\xac");
    evd_router_unmatched("GET", path, false, detail, sizeof(detail));
    ck_assert(evd_utf8_valid(detail, strlen(detail)));
    ck_assert_ptr_nonnull(strstr(detail, ": no such resource"));
    ck_assert_uint_lt(strlen(detail), 300);
}
END_TEST

START_TEST(codes_map_to_statuses_and_problem_codes)
{
    static const struct {
        enum evd_code code;
        int status;
        const char *pcode;
    } map[] = {
        {EVD_EINVAL, 400, "invalid_request"},      {EVD_EUNAUTH, 401, "unauthorized"},
        {EVD_ENOTFOUND, 404, "not_found"},         {EVD_ECONFLICT, 409, "conflict"},
        {EVD_ETOOLARGE, 413, "payload_too_large"}, {EVD_EMEDIA, 415, "unsupported_media_type"},
        {EVD_EINTERNAL, 500, "internal"},          {EVD_EDB, 503, "unavailable"},
        {EVD_EUNAVAIL, 503, "unavailable"},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        struct evd_resp resp;
        memset(&resp, 0, sizeof(resp));
        evd_resp_problem(&resp, map[i].code, "limit must be between 1 and 100");
        ck_assert_int_eq(resp.status, map[i].status);
        ck_assert_str_eq(resp.content_type, "application/problem+json");
        json_t *j = json_loads(resp.body, 0, NULL);
        ck_assert_ptr_nonnull(j);
        ck_assert_str_eq(json_string_value(json_object_get(j, "code")), map[i].pcode);
        ck_assert_int_eq(json_integer_value(json_object_get(j, "status")), map[i].status);
        ck_assert_str_eq(json_string_value(json_object_get(j, "type")), "about:blank");
        ck_assert_str_eq(json_string_value(json_object_get(j, "detail")),
                         "limit must be between 1 and 100");
        ck_assert_ptr_nonnull(json_string_value(json_object_get(j, "title")));
        json_decref(j);
        free(resp.body);
    }
}
END_TEST

START_TEST(json_response_steals_and_serializes_null)
{
    struct evd_resp resp;
    memset(&resp, 0, sizeof(resp));
    evd_resp_json(&resp, 200, NULL);
    ck_assert_str_eq(resp.body, "null");
    free(resp.body);
    memset(&resp, 0, sizeof(resp));
    evd_resp_json(&resp, 202, json_pack("{s:s}", "status", "queued"));
    ck_assert_int_eq(resp.status, 202);
    ck_assert_str_eq(resp.body, "{\"status\":\"queued\"}");
    free(resp.body);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("router");
    TCase *tc = tcase_create("router");
    tcase_add_loop_test(tc, routes_match, 0, sizeof(cases) / sizeof(cases[0]));
    tcase_add_test(tc, long_parameters_do_not_match);
    tcase_add_loop_test(tc, values_are_checked_as_utf8, 0,
                        sizeof(value_cases) / sizeof(value_cases[0]));
    tcase_add_test(tc, query_names_that_are_not_text_are_refused);
    tcase_add_test(tc, check_walks_every_query_argument);
    tcase_add_test(tc, every_route_parameter_is_checked);
    tcase_add_test(tc, unmatched_detail_is_always_text);
    tcase_add_test(tc, codes_map_to_statuses_and_problem_codes);
    tcase_add_test(tc, json_response_steals_and_serializes_null);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
