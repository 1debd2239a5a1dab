/*
 * Datasets end to end (/v1/datasets): JSON, JSONL and CSV uploads through the real evald
 * over loopback against a throwaway PostgreSQL; idempotence and content addressing;
 * paged lists and case reads; the refusal messages with nothing written; media types
 * and the body limit of upload routes; auth before the body; deletion.
 */
#define _GNU_SOURCE /* asprintf */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static char db_url[1024];
static char db_name[64];
static struct evd_t_proc evald;

static void start(char *const env[])
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    ck_assert_int_eq(evd_t_evald_start(&evald, db_url, env), 0);
}

static void setup(void)
{
    char *env[] = {"EVALD_MAX_DATASET_CASES=50", "EVALD_MAX_DATASET_BYTES=65536", NULL};
    start(env);
}

static void teardown(void)
{
    evd_t_stop(&evald, SIGTERM, 10000);
    evd_t_db_drop(db_name);
}

/* POSTs body with content type ct to path; the response (free it). */
static void post(const char *path, const char *ct, const char *body, size_t len,
                 struct evd_t_resp *r)
{
    char url[512], hdr[160];
    snprintf(url, sizeof(url), "%s%s", evald.base, path);
    snprintf(hdr, sizeof(hdr), "Content-Type: %s", ct);
    const char *headers[] = {hdr, NULL};
    evd_t_http("POST", url, headers, body, len, r);
}

static json_t *get(const char *path, long *status)
{
    char url[512];
    snprintf(url, sizeof(url), "%s%s", evald.base, path);
    return evd_t_http_json("GET", url, NULL, status);
}

static long count_rows(const char *table)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
    char *n = evd_t_sql(db_url, sql);
    ck_assert_ptr_nonnull(n);
    long v = atol(n);
    free(n);
    return v;
}

static const char CSV[] = "id,question,expected\r\n"
                          "q1,\"What is 2+2? Say \"\"four\"\".\",4\r\n"
                          ",\"Multi\nline\",6\r\n";
static const char JSONL[] =
    "{\"id\":\"q1\",\"vars\":{\"question\":\"What is 2+2? Say \\\"four\\\".\"},"
    "\"expected\":\"4\"}\n\n"
    "{\"vars\":{\"question\":\"Multi\\nline\"},\"expected\":\"6\"}\n";

START_TEST(uploads_are_content_addressed_and_idempotent)
{
    struct evd_t_resp a, b, c, d;
    post("/v1/datasets?name=qa", "text/csv; charset=utf-8", CSV, strlen(CSV), &a);
    ck_assert_msg(a.status == 201, "%ld %s", a.status, a.body);
    json_t *ja = a.json;
    const char *id = json_string_value(json_object_get(ja, "dataset_id"));
    ck_assert_uint_eq(strlen(id), 35);
    ck_assert(strncmp(id, "ds_", 3) == 0);
    ck_assert_int_eq(json_integer_value(json_object_get(ja, "case_count")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(ja, "name")), "qa");
    char loc[128];
    snprintf(loc, sizeof(loc), "/v1/datasets/%s", id);
    ck_assert_str_eq(a.location, loc);

    /* The sha256 is that of the canonical normalized cases, computed here by hand. */
    const char *canon = "[{\"expected\":\"4\",\"id\":\"q1\",\"metadata\":{},\"vars\":{\"question\":"
                        "\"What is 2+2? Say \\\"four\\\".\"}},{\"expected\":\"6\",\"id\":\"c2\","
                        "\"metadata\":{},\"vars\":{\"question\":\"Multi\\nline\"}}]";
    char sha[65];
    evd_sha256_hex(canon, strlen(canon), sha);
    ck_assert_str_eq(json_string_value(json_object_get(ja, "sha256")), sha);

    /* The same name and cases again: 200 with the same dataset, nothing new written. */
    post("/v1/datasets?name=qa", "text/csv", CSV, strlen(CSV), &b);
    ck_assert_int_eq(b.status, 200);
    ck_assert_str_eq(json_string_value(json_object_get(b.json, "dataset_id")), id);
    ck_assert_int_eq(count_rows("datasets"), 1);
    ck_assert_int_eq(count_rows("dataset_cases"), 2);

    /* The same cases as JSONL under that name are the same dataset too. */
    post("/v1/datasets?name=qa", "application/x-ndjson", JSONL, strlen(JSONL), &c);
    ck_assert_int_eq(c.status, 200);
    ck_assert_str_eq(json_string_value(json_object_get(c.json, "dataset_id")), id);

    /* Another name makes another dataset with the same sha256. */
    const char *json = "{\"name\":\"qa-copy\",\"cases\":[{\"id\":\"q1\",\"vars\":{\"question\":"
                       "\"What is 2+2? Say \\\"four\\\".\"},\"expected\":\"4\"},{\"vars\":"
                       "{\"question\":\"Multi\\nline\"},\"expected\":\"6\"}]}";
    post("/v1/datasets", "application/json", json, strlen(json), &d);
    ck_assert_int_eq(d.status, 201);
    ck_assert_str_ne(json_string_value(json_object_get(d.json, "dataset_id")), id);
    ck_assert_str_eq(json_string_value(json_object_get(d.json, "sha256")), sha);
    ck_assert_int_eq(count_rows("datasets"), 2);

    /* GET one, and its cases in dataset order, normalized. */
    long status = 0;
    json_t *one = get(loc, &status);
    ck_assert_int_eq(status, 200);
    ck_assert(json_equal(one, ja));
    json_decref(one);
    char path[256];
    snprintf(path, sizeof(path), "%s/cases?limit=1", loc);
    json_t *p1 = get(path, &status);
    ck_assert_int_eq(status, 200);
    json_t *c1 = json_array_get(json_object_get(p1, "cases"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(c1, "id")), "q1");
    ck_assert_str_eq(json_string_value(json_object_get(c1, "expected")), "4");
    ck_assert(json_is_object(json_object_get(c1, "metadata")));
    const char *cursor = json_string_value(json_object_get(p1, "next_cursor"));
    ck_assert_ptr_nonnull(cursor);
    snprintf(path, sizeof(path), "%s/cases?limit=1&before=%s", loc, cursor);
    json_t *p2 = get(path, &status);
    ck_assert_int_eq(status, 200);
    json_t *c2 = json_array_get(json_object_get(p2, "cases"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(c2, "id")), "c2");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(c2, "vars"), "question")),
                     "Multi\nline");
    ck_assert_ptr_null(json_object_get(p2, "next_cursor"));
    json_decref(p1);
    json_decref(p2);
    evd_t_resp_free(&a);
    evd_t_resp_free(&b);
    evd_t_resp_free(&c);
    evd_t_resp_free(&d);
}
END_TEST

START_TEST(lists_page_newest_first_and_delete_removes_cases)
{
    char *ids[3];
    for (int i = 0; i < 3; i++) {
        /* created_at has millisecond resolution and ties are ordered by id, which is random:
         * a clock tick between the uploads makes "newest first" a fixed order. */
        if (i > 0)
            nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);
        char path[64], body[64];
        snprintf(path, sizeof(path), "/v1/datasets?name=d%d", i);
        snprintf(body, sizeof(body), "q\nrow %d\n", i);
        struct evd_t_resp r;
        post(path, "text/csv", body, strlen(body), &r);
        ck_assert_int_eq(r.status, 201);
        ids[i] = strdup(json_string_value(json_object_get(r.json, "dataset_id")));
        evd_t_resp_free(&r);
    }
    long status = 0;
    json_t *p1 = get("/v1/datasets?limit=2", &status);
    ck_assert_int_eq(status, 200);
    json_t *list = json_object_get(p1, "datasets");
    ck_assert_uint_eq(json_array_size(list), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "dataset_id")),
                     ids[2]);
    char path[256];
    snprintf(path, sizeof(path), "/v1/datasets?limit=2&before=%s",
             json_string_value(json_object_get(p1, "next_cursor")));
    json_t *p2 = get(path, &status);
    ck_assert_int_eq(status, 200);
    list = json_object_get(p2, "datasets");
    ck_assert_uint_eq(json_array_size(list), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "dataset_id")),
                     ids[0]);
    json_decref(p1);
    json_decref(p2);

    json_t *bad = get("/v1/datasets?limit=0", &status);
    ck_assert_int_eq(status, 400);
    ck_assert_str_eq(json_string_value(json_object_get(bad, "detail")),
                     "limit must be between 1 and 100");
    json_decref(bad);

    snprintf(path, sizeof(path), "%s/v1/datasets/%s", evald.base, ids[1]);
    json_t *del = evd_t_http_json("DELETE", path, NULL, &status);
    ck_assert_int_eq(status, 200);
    json_decref(del);
    del = evd_t_http_json("DELETE", path, NULL, &status);
    ck_assert_int_eq(status, 404);
    json_decref(del);
    ck_assert_int_eq(count_rows("datasets"), 2);
    ck_assert_int_eq(count_rows("dataset_cases"), 2);
    snprintf(path, sizeof(path), "/v1/datasets/%s/cases", ids[1]);
    json_t *gone = get(path, &status);
    ck_assert_int_eq(status, 404);
    char want[128];
    snprintf(want, sizeof(want), "dataset not found: %s", ids[1]);
    ck_assert_str_eq(json_string_value(json_object_get(gone, "detail")), want);
    json_decref(gone);
    for (int i = 0; i < 3; i++)
        free(ids[i]);
}
END_TEST

struct refusal {
    const char *path;
    const char *ct;
    const char *body;
    long status;
    const char *detail;
};

static const struct refusal REFUSALS[] = {
    {"/v1/datasets?name=x", "application/x-ndjson", "{}\n\n{\"vars\":3}\n", 400,
     "line 3: vars must be an object"},
    {"/v1/datasets?name=x", "text/csv", "id,q\nc7,a\nb,c\nd,e\ne,f\nf,g\ng,h\n,i\n", 400,
     "row 7: duplicate id c7"},
    {"/v1/datasets", "application/json",
     "{\"name\":\"x\",\"cases\":[{},{\"vars\":"
     "{\"expected\":1}}]}",
     400, "cases[1]: vars.expected is reserved; use the expected field"},
    {"/v1/datasets", "application/json", "{\"name\":\"x\",\"cases\":[]}", 400,
     "cases must contain between 1 and 50 cases"},
    {"/v1/datasets?name=x", "text/csv",
     "q\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n"
     "16\n17\n18\n19\n20\n21\n22\n23\n24\n25\n26\n27\n28\n29\n"
     "30\n31\n32\n33\n34\n35\n36\n37\n38\n39\n40\n41\n42\n43\n"
     "44\n45\n46\n47\n48\n49\n50\n51\n",
     400, "cases must contain between 1 and 50 cases"},
    {"/v1/datasets", "text/csv", "q\na\n", 400, "name is required"},
    {"/v1/datasets", "application/json", "{\"name\":", 400,
     "malformed JSON: unexpected token near end of file at line 1 column 8"},
    {"/v1/datasets?name=x", "text/plain", "q\na\n", 415,
     "request body must be application/json, application/x-ndjson or text/csv"},
};

START_TEST(refusals_name_the_case_and_write_nothing)
{
    const struct refusal *t = &REFUSALS[_i];
    struct evd_t_resp r;
    post(t->path, t->ct, t->body, strlen(t->body), &r);
    ck_assert_msg(r.status == t->status, "case %d: %ld %s", _i, r.status, r.body);
    ck_assert_str_eq(json_string_value(json_object_get(r.json, "detail")), t->detail);
    ck_assert_str_eq(r.content_type, "application/problem+json");
    evd_t_resp_free(&r);
    ck_assert_int_eq(count_rows("datasets"), 0);
    ck_assert_int_eq(count_rows("dataset_cases"), 0);
}
END_TEST

/* A body over EVALD_MAX_DATASET_BYTES (64 KiB here) is refused with 413; a body over the
 * 1 MiB limit of other routes but under the dataset limit is not (checked with a
 * limit raised above 1 MiB in its own server below). */
START_TEST(upload_routes_have_their_own_body_limit)
{
    struct evd_buf body = {0};
    evd_buf_printf(&body, "q\n");
    char cell[4001];
    memset(cell, 'x', 4000);
    cell[4000] = '\0';
    while (body.len <= 65536) /* 17 cases: under the 50 of EVALD_MAX_DATASET_CASES */
        evd_buf_printf(&body, "%s\n", cell);
    struct evd_t_resp r;
    post("/v1/datasets?name=big", "text/csv", body.data, body.len, &r);
    ck_assert_int_eq(r.status, 413);
    ck_assert_str_eq(json_string_value(json_object_get(r.json, "detail")),
                     "request body exceeds the 65536 byte limit");
    evd_t_resp_free(&r);
    ck_assert_int_eq(count_rows("datasets"), 0);
    evd_buf_free(&body);

    teardown();
    char *env[] = {"EVALD_MAX_DATASET_BYTES=4194304", "EVALD_MAX_DATASET_CASES=100000", NULL};
    start(env);
    struct evd_buf big = {0};
    evd_buf_printf(&big, "id,q\n");
    for (int i = 1; big.len <= 2u << 20; i++)
        evd_buf_printf(&big, "k%d,\"%s\"\n", i,
                       "a case of a dataset that is bigger than the 1 MiB limit of other routes");
    post("/v1/datasets?name=big", "text/csv", big.data, big.len, &r);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    ck_assert_int_eq(json_integer_value(json_object_get(r.json, "case_count")),
                     count_rows("dataset_cases"));
    ck_assert_int_gt(count_rows("dataset_cases"), 20000);
    evd_t_resp_free(&r);
    evd_buf_free(&big);
}
END_TEST

/* With a token, an upload without it is refused before its body is read. */
START_TEST(uploads_need_the_token)
{
    teardown();
    char *env[] = {"EVALD_API_TOKEN=datasets-test-token-0123456789", NULL};
    start(env);
    struct evd_t_resp r;
    post("/v1/datasets?name=x", "text/csv", "q\na\n", 4, &r);
    ck_assert_int_eq(r.status, 401);
    evd_t_resp_free(&r);
    char url[512];
    snprintf(url, sizeof(url), "%s/v1/datasets?name=x", evald.base);
    const char *headers[] = {"Content-Type: text/csv",
                             "Authorization: Bearer datasets-test-token-0123456789", NULL};
    evd_t_http("POST", url, headers, "q\na\n", 4, &r);
    ck_assert_int_eq(r.status, 201);
    evd_t_resp_free(&r);
    ck_assert_int_eq(count_rows("datasets"), 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("datasets");
    TCase *tc = tcase_create("datasets");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, uploads_are_content_addressed_and_idempotent);
    tcase_add_test(tc, lists_page_newest_first_and_delete_removes_cases);
    tcase_add_loop_test(tc, refusals_name_the_case_and_write_nothing, 0,
                        sizeof(REFUSALS) / sizeof(REFUSALS[0]));
    tcase_add_test(tc, upload_routes_have_their_own_body_limit);
    tcase_add_test(tc, uploads_need_the_token);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
