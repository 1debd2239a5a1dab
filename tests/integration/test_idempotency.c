/*
 * Idempotency-Key on the creating POSTs (docs/idempotency.md), against a real PostgreSQL,
 * evald and evald-stub: the same key and body answer the first answer again and create
 * nothing; another body is refused with 422; a malformed key with 400; twenty duplicates
 * sent at once create one evaluation and get one answer; a key outlives a restart; an
 * upload (CSV bytes) and an experiment start (canonical JSON) are covered too; and a key
 * belongs to its token and path.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static char db_url[1024];
static char db_name[64];
static struct evd_t_proc stub;
static struct evd_t_proc evald;
static char env_base[300], env_key[] = "OPENAI_API_KEY=stub-key";

static const char REQUEST[] =
    "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
    "\"control\":{\"prompt\":\"Reply with exactly OK.\"},\"treatment\":{\"prompt\":"
    "\"Return exactly the text OK.\"},\"evaluator\":{\"function_id\":"
    "\"eval::assert::normalized_text\",\"arguments\":{\"expected\":\"OK\"}},\"runs\":1}";
/* The same request: members in another order, with spaces. */
static const char REQUEST_REORDERED[] =
    "{ \"runs\": 1, \"evaluator\": {\"arguments\": {\"expected\": \"OK\"}, \"function_id\":"
    " \"eval::assert::normalized_text\"}, \"treatment\": {\"prompt\": \"Return exactly the "
    "text OK.\"}, \"control\": {\"prompt\": \"Reply with exactly OK.\"}, \"model\": "
    "{\"provider\": \"openai\", \"model\": \"stub-model\"}, \"dimension\": \"prompt\" }";

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    snprintf(env_base, sizeof(env_base), "OPENAI_BASE_URL=%s/v1", stub.base);
    char *env[] = {env_base, env_key, NULL};
    ck_assert_int_eq(evd_t_evald_start(&evald, db_url, env), 0);
}

static void teardown(void)
{
    evd_t_stop(&evald, SIGTERM, 10000);
    evd_t_stop(&stub, SIGTERM, 5000);
    evd_t_db_drop(db_name);
}

/* POST path with Idempotency-Key `key` (NULL: none) and content type `ctype`. */
static long post(const char *path, const char *key, const char *ctype, const char *body,
                 struct evd_t_resp *r)
{
    char url[1024], kh[400], ch[160];
    snprintf(url, sizeof(url), "%s%s", evald.base, path);
    snprintf(ch, sizeof(ch), "Content-Type: %s", ctype);
    const char *headers[3] = {ch, NULL, NULL};
    if (key != NULL) {
        /* curl drops "Name: " with nothing after it; "Name;" sends an empty value. */
        snprintf(kh, sizeof(kh), *key ? "Idempotency-Key: %s" : "Idempotency-Key;", key);
        headers[1] = kh;
    }
    ck_assert_int_eq(evd_t_http("POST", url, headers, body, strlen(body), r), 0);
    return r->status;
}

static long count_rows(const char *table)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
    char *out = evd_t_sql(db_url, sql);
    ck_assert_ptr_nonnull(out);
    long n = atol(out);
    free(out);
    return n;
}

static bool replayed(const struct evd_t_resp *r)
{
    char v[16];
    return evd_t_resp_header(r, "Idempotent-Replayed", v, sizeof(v)) && strcmp(v, "true") == 0;
}

START_TEST(a_repeat_gets_the_first_answer_and_creates_nothing)
{
    struct evd_t_resp a, b;
    ck_assert_int_eq(post("/v1/evaluations", "order-4711", "application/json", REQUEST, &a), 202);
    ck_assert(!replayed(&a));
    ck_assert_str_eq(json_string_value(json_object_get(a.json, "status")), "queued");
    /* Spacing and member order do not make another request: its canonical JSON is the same. */
    ck_assert_int_eq(
        post("/v1/evaluations", "order-4711", "application/json", REQUEST_REORDERED, &b), 202);
    ck_assert_msg(replayed(&b), "no Idempotent-Replayed: %s", b.headers);
    ck_assert_str_eq(a.body, b.body); /* unchanged: it still says queued */
    ck_assert_str_eq(a.location, b.location);
    ck_assert_str_eq(b.content_type, a.content_type);
    ck_assert_int_eq(count_rows("evaluations"), 1);
    evd_t_resp_free(&b);

    /* The same key with another body: 422 naming the header, and nothing created. */
    char other[sizeof(REQUEST)];
    snprintf(other, sizeof(other), "%s", REQUEST);
    *strstr(other, "\"runs\":1") = '\0';
    char body[sizeof(REQUEST) + 16];
    snprintf(body, sizeof(body), "%s\"runs\":2}", other);
    ck_assert_int_eq(post("/v1/evaluations", "order-4711", "application/json", body, &b), 422);
    ck_assert_str_eq(json_string_value(json_object_get(b.json, "code")), "unprocessable");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(b.json, "detail")),
                                 "Idempotency-Key"));
    ck_assert_ptr_nonnull(json_object_get(b.json, "request_id"));
    evd_t_resp_free(&b);

    /* Another key is another request. */
    ck_assert_int_eq(post("/v1/evaluations", "order-4712", "application/json", REQUEST, &b), 202);
    ck_assert(!replayed(&b));
    ck_assert_str_ne(a.location, b.location);
    ck_assert_int_eq(count_rows("evaluations"), 2);
    evd_t_resp_free(&b);

    /* The key of one path is not the key of another: a session with it is created. */
    ck_assert_int_eq(post("/v1/sessions", "order-4711", "application/json",
                          "{\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"},"
                          "\"prompt\":\"Reply with exactly OK.\"}",
                          &b),
                     202);
    ck_assert(!replayed(&b));
    evd_t_resp_free(&b);
    evd_t_resp_free(&a);
}
END_TEST

START_TEST(a_malformed_key_is_refused_by_name)
{
    char longest[300];
    memset(longest, 'k', 256);
    longest[256] = '\0';
    const char *bad[] = {"", "two words", "caf\xc3\xa9", longest};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct evd_t_resp r;
        ck_assert_int_eq(post("/v1/evaluations", bad[i], "application/json", REQUEST, &r), 400);
        ck_assert_str_eq(json_string_value(json_object_get(r.json, "detail")),
                         "Idempotency-Key must be 1 to 255 visible ASCII characters");
        evd_t_resp_free(&r);
        /* The upload routes check it before they read the body. */
        ck_assert_int_eq(post("/v1/datasets?name=d", bad[i], "text/csv", "input\nx\n", &r), 400);
        ck_assert_ptr_nonnull(strstr(r.body, "Idempotency-Key"));
        evd_t_resp_free(&r);
    }
    ck_assert_int_eq(count_rows("evaluations"), 0);
    ck_assert_int_eq(count_rows("datasets"), 0);
    /* 255 characters is a key. */
    longest[255] = '\0';
    struct evd_t_resp r;
    ck_assert_int_eq(post("/v1/evaluations", longest, "application/json", REQUEST, &r), 202);
    evd_t_resp_free(&r);
}
END_TEST

struct dup {
    struct evd_t_resp r;
    int rc;
};

static void *send_dup(void *arg)
{
    struct dup *d = arg;
    char url[1024];
    snprintf(url, sizeof(url), "%s/v1/evaluations", evald.base);
    const char *headers[] = {"Content-Type: application/json", "Idempotency-Key: burst-1", NULL};
    d->rc = evd_t_http("POST", url, headers, REQUEST, strlen(REQUEST), &d->r);
    return NULL;
}

START_TEST(twenty_duplicates_at_once_create_one)
{
    enum { N = 20 };
    struct dup d[N];
    pthread_t t[N];
    memset(d, 0, sizeof(d));
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, send_dup, &d[i]), 0);
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    int replays = 0;
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(d[i].rc, 0);
        ck_assert_msg(d[i].r.status == 202, "answer %d: %ld %s", i, d[i].r.status, d[i].r.body);
        ck_assert_str_eq(d[i].r.body, d[0].r.body);
        ck_assert_str_eq(d[i].r.location, d[0].r.location);
        replays += replayed(&d[i].r);
    }
    ck_assert_int_eq(replays, N - 1);
    ck_assert_int_eq(count_rows("evaluations"), 1);
    for (int i = 0; i < N; i++)
        evd_t_resp_free(&d[i].r);
}
END_TEST

START_TEST(a_key_outlives_a_restart)
{
    struct evd_t_resp a, b;
    ck_assert_int_eq(post("/v1/evaluations", "restart-1", "application/json", REQUEST, &a), 202);
    ck_assert_int_eq(evd_t_stop(&evald, SIGTERM, 10000), 0);
    char *env[] = {env_base, env_key, NULL};
    ck_assert_int_eq(evd_t_evald_start(&evald, db_url, env), 0);
    ck_assert_int_eq(post("/v1/evaluations", "restart-1", "application/json", REQUEST, &b), 202);
    ck_assert(replayed(&b));
    ck_assert_str_eq(a.body, b.body);
    ck_assert_int_eq(count_rows("evaluations"), 1);
    evd_t_resp_free(&a);
    evd_t_resp_free(&b);
}
END_TEST

START_TEST(uploads_and_experiment_starts_are_idempotent)
{
    /* A CSV upload compares bytes: the same bytes replay, one more byte is another body. */
    const char csv[] = "input,expected\nhello,OK\nbye,OK\n";
    struct evd_t_resp a, b;
    ck_assert_int_eq(post("/v1/datasets?name=greetings", "ds-1", "text/csv", csv, &a), 201);
    ck_assert_int_eq(post("/v1/datasets?name=greetings", "ds-1", "text/csv", csv, &b), 201);
    ck_assert(replayed(&b));
    ck_assert_str_eq(a.body, b.body);
    evd_t_resp_free(&b);
    ck_assert_int_eq(
        post("/v1/datasets?name=greetings", "ds-1", "text/csv",
             "input,expected\nhello,OK\nbye,OK\n\n", &b),
        422);
    evd_t_resp_free(&b);
    ck_assert_int_eq(count_rows("datasets"), 1);

    /* A JSON dataset upload compares canonical JSON. */
    static const char JSON_DS[] =
        "{\"name\":\"j\",\"cases\":[{\"id\":\"a\",\"vars\":{\"q\":\"1\",\"r\":\"2\"}}]}";
    static const char JSON_DS2[] =
        "{ \"cases\": [ {\"vars\": {\"r\": \"2\", \"q\": \"1\"}, \"id\": \"a\"} ], \"name\": \"j\" }";
    struct evd_t_resp j1, j2;
    ck_assert_int_eq(post("/v1/datasets", "ds-json", "application/json", JSON_DS, &j1), 201);
    ck_assert_int_eq(post("/v1/datasets", "ds-json", "application/json", JSON_DS2, &j2), 201);
    ck_assert(replayed(&j2));
    ck_assert_str_eq(j1.body, j2.body);
    evd_t_resp_free(&j2);
    ck_assert_int_eq(post("/v1/datasets", "ds-json", "application/json",
                          "{\"name\":\"j\",\"cases\":[{\"id\":\"b\"}]}", &j2),
                     422);
    evd_t_resp_free(&j2);
    evd_t_resp_free(&j1);
    ck_assert_int_eq(count_rows("datasets"), 2);

    /* An experiment start compares canonical JSON. */
    const char *id = json_string_value(json_object_get(a.json, "dataset_id"));
    char start[1024], start2[1024];
    snprintf(start, sizeof(start),
             "{\"dataset_id\":\"%s\",\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\","
             "\"provider\":\"openai\"},\"control\":{\"prompt\":\"Say {{input}}\"},"
             "\"treatments\":[{\"prompt\":\"Reply to {{input}}\"}],\"evaluator\":{\"function_id\":"
             "\"eval::assert::normalized_text\",\"arguments\":{\"expected\":\"OK\"}}}",
             id);
    snprintf(start2, sizeof(start2),
             "{\"model\": {\"provider\": \"openai\", \"model\": \"stub-model\"}, \"dataset_id\": "
             "\"%s\", \"dimension\": \"prompt\", \"treatments\": [{\"prompt\": \"Reply to "
             "{{input}}\"}], \"control\": {\"prompt\": \"Say {{input}}\"}, \"evaluator\": "
             "{\"arguments\": {\"expected\": \"OK\"}, \"function_id\": "
             "\"eval::assert::normalized_text\"}}",
             id);
    struct evd_t_resp c, d;
    ck_assert_int_eq(post("/v1/experiments", "xp-1", "application/json", start, &c), 202);
    ck_assert_int_eq(post("/v1/experiments", "xp-1", "application/json", start2, &d), 202);
    ck_assert(replayed(&d));
    ck_assert_str_eq(c.body, d.body);
    ck_assert_str_eq(c.location, d.location);
    ck_assert_int_eq(count_rows("experiments"), 1);
    evd_t_resp_free(&c);
    evd_t_resp_free(&d);
    evd_t_resp_free(&a);
}
END_TEST

/* A refusal is an answer too, and is replayed; a key is the token's own. */
START_TEST(a_refusal_replays_and_a_key_is_the_tokens_own)
{
    struct evd_t_resp a, b;
    ck_assert_int_eq(post("/v1/evaluations", "bad-1", "application/json", "{\"runs\":1}", &a),
                     400);
    ck_assert_int_eq(post("/v1/evaluations", "bad-1", "application/json", "{\"runs\":1}", &b),
                     400);
    ck_assert(replayed(&b));
    ck_assert_str_eq(json_string_value(json_object_get(a.json, "detail")),
                     json_string_value(json_object_get(b.json, "detail")));
    /* Each answer carries its own request's id. */
    ck_assert_str_eq(json_string_value(json_object_get(b.json, "request_id")), b.request_id);
    evd_t_resp_free(&a);
    evd_t_resp_free(&b);

    /* With tokens: the same key under two tokens is two requests. */
    ck_assert_int_eq(evd_t_stop(&evald, SIGTERM, 10000), 0);
    char *env[] = {env_base, env_key, "EVALD_API_TOKEN=idempotency-token-0123456789", NULL};
    ck_assert_int_eq(evd_t_evald_start(&evald, db_url, env), 0);
    char url[1024];
    snprintf(url, sizeof(url), "%s/v1/evaluations", evald.base);
    const char *one[] = {"Content-Type: application/json", "Idempotency-Key: shared",
                         "Authorization: Bearer idempotency-token-0123456789", NULL};
    ck_assert_int_eq(evd_t_http("POST", url, one, REQUEST, strlen(REQUEST), &a), 0);
    ck_assert_int_eq(a.status, 202);
    ck_assert_int_eq(evd_t_http("POST", url, one, REQUEST, strlen(REQUEST), &b), 0);
    ck_assert(replayed(&b));
    evd_t_resp_free(&a);
    evd_t_resp_free(&b);
    /* The token itself is stored nowhere. */
    char *out = evd_t_sql(db_url, "SELECT count(*) FROM idempotency_keys WHERE scope LIKE "
                                  "'%idempotency-token-0123456789%' OR body LIKE '%idempotency-token-0123456789%'");
    ck_assert_str_eq(out, "0");
    free(out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("idempotency");
    TCase *tc = tcase_create("idempotency");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_repeat_gets_the_first_answer_and_creates_nothing);
    tcase_add_test(tc, a_malformed_key_is_refused_by_name);
    tcase_add_test(tc, twenty_duplicates_at_once_create_one);
    tcase_add_test(tc, a_key_outlives_a_restart);
    tcase_add_test(tc, uploads_and_experiment_starts_are_idempotent);
    tcase_add_test(tc, a_refusal_replays_and_a_key_is_the_tokens_own);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
