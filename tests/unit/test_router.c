/* Unit tests for server/router.c and the problem mapping of handlers/api.c. */
#include <check.h>
#include <string.h>

#include "handlers/api.h"
#include "server/router.h"
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

START_TEST(codes_map_to_statuses_and_problem_codes)
{
    static const struct {
        enum evd_code code;
        int status;
        const char *pcode;
    } map[] = {
        {EVD_EINVAL, 400, "invalid_request"},   {EVD_EUNAUTH, 401, "unauthorized"},
        {EVD_ENOTFOUND, 404, "not_found"},      {EVD_ECONFLICT, 409, "conflict"},
        {EVD_ETOOLARGE, 413, "payload_too_large"}, {EVD_EMEDIA, 415, "unsupported_media_type"},
        {EVD_EINTERNAL, 500, "internal"},       {EVD_EDB, 503, "unavailable"},
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
    tcase_add_test(tc, codes_map_to_statuses_and_problem_codes);
    tcase_add_test(tc, json_response_steals_and_serializes_null);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
