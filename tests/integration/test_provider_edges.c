/*
 * End-to-end tests of providers at their edges: the real evald and evald-stub over
 * loopback and a throwaway PostgreSQL database per test. A providers file declares one
 * keyless server of each wire kind (openai-responses, anthropic-messages, openai-chat),
 * all pointing at a stub that requires no key: each runs an evaluation without sending
 * a key header, while the built-in providers without their key stay refused; a provider
 * answer with a 1 MiB header fails its runs with a message that names the limit; and a
 * structured answer without the result envelope from such a server is the run's output.
 */
#define _GNU_SOURCE /* asprintf */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/itest.h"
#include "tests/support/testutil.h"

#define JS(o, k) json_string_value(json_object_get((o), (k)))

static char db_url[1024];
static char db_name[64];
static char providers_path[64];
static struct evd_t_proc stub;
static struct evd_t_proc evald;

/* The keyless servers, one per wire kind, and the stub API each one speaks. */
static const struct {
    const char *provider, *api;
} keyless[] = {
    {"free-resp", "responses"},
    {"free-msgs", "messages"},
    {"free-chat", "chat"},
};
#define NKEYLESS 3

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    snprintf(providers_path, sizeof(providers_path), "/tmp/evald-providers-XXXXXX");
    int fd = mkstemp(providers_path);
    ck_assert_int_ge(fd, 0);
    char doc[1024];
    int n =
        snprintf(doc, sizeof(doc),
                 "{\"providers\":["
                 "{\"name\":\"free-resp\",\"kind\":\"openai-responses\",\"base_url\":\"%s/v1\"},"
                 "{\"name\":\"free-msgs\",\"kind\":\"anthropic-messages\",\"base_url\":\"%s\"},"
                 "{\"name\":\"free-chat\",\"kind\":\"openai-chat\",\"base_url\":\"%s/v1\"}]}",
                 stub.base, stub.base, stub.base);
    ck_assert_int_eq(write(fd, doc, (size_t)n), n);
    close(fd);
    static char env_file[128], env_openai[300], env_anthropic[300];
    snprintf(env_file, sizeof(env_file), "EVALD_PROVIDERS_FILE=%s", providers_path);
    snprintf(env_openai, sizeof(env_openai), "OPENAI_BASE_URL=%s/v1", stub.base);
    snprintf(env_anthropic, sizeof(env_anthropic), "ANTHROPIC_BASE_URL=%s", stub.base);
    /* Empty keys count as unset, whatever the calling environment holds. */
    char *env[] = {
        env_file,          env_openai, env_anthropic, "OPENAI_API_KEY=", "ANTHROPIC_API_KEY=",
        "EVALD_WORKERS=3", NULL};
    ck_assert_int_eq(evd_t_evald_start(&evald, db_url, env), 0);
}

static void teardown(void)
{
    int rc = evd_t_stop(&evald, SIGTERM, 15000);
    if (rc != 0)
        evd_t_dump_log(&evald);
    evd_t_stop(&stub, SIGTERM, 5000);
    unlink(providers_path);
    evd_t_db_drop(db_name);
    ck_assert_msg(rc == 0, "evald exited with status %d", rc);
}

/* POST /v1/evaluations; returns the answer (new reference) and its status. */
static json_t *post_eval(const char *body, long *status)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/evaluations", evald.base);
    return evd_t_http_json("POST", url, body, status);
}

static char *start_eval(const char *body)
{
    long status = 0;
    json_t *r = post_eval(body, &status);
    ck_assert_msg(status == 202, "POST /v1/evaluations answered %ld: %s", status,
                  r ? JS(r, "detail") : "(no body)");
    char *id = strdup(JS(r, "evaluation_id"));
    json_decref(r);
    return id;
}

/* The report's runs of a finished evaluation (new reference). */
static json_t *runs_of(const char *id)
{
    char body[128];
    snprintf(body, sizeof(body), "{\"evaluation_id\":\"%s\"}", id);
    long status = 0;
    json_t *r = evd_t_call(evald.base, "eval::result", body, &status);
    ck_assert_int_eq(status, 200);
    json_t *runs = json_incref(json_object_get(json_object_get(r, "report"), "runs"));
    json_decref(r);
    ck_assert_int_eq(json_array_size(runs), 2);
    return runs;
}

/* Every request the stub logged since the last reset (new reference). */
static json_t *stub_requests(void)
{
    json_t *r = evd_t_stub_requests(&stub, 0);
    ck_assert_ptr_nonnull(r);
    json_t *a = json_incref(json_object_get(r, "requests"));
    json_decref(r);
    return a;
}

static char *text_eval(const char *provider)
{
    char *body = NULL;
    ck_assert_int_ge(
        asprintf(&body,
                 "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
                 "\"%s\"},\"control\":{\"label\":\"reply\",\"prompt\":\"Reply with exactly OK.\","
                 "\"system_prompt\":\"Follow the user request exactly.\"},\"treatment\":"
                 "{\"label\":\"return\",\"prompt\":\"Return exactly the text OK.\","
                 "\"system_prompt\":\"Follow the user request exactly.\"},\"evaluator\":"
                 "{\"function_id\":\"eval::assert::normalized_text\",\"arguments\":"
                 "{\"expected\":\"OK\"}},\"runs\":1}",
                 provider),
        0);
    return body;
}

START_TEST(keyless_server_of_every_kind)
{
    ck_assert_int_eq(
        evd_t_stub_script(&stub, "{\"rules\":[],\"default\":{\"reply\":{\"text\":\"OK\"}}}"), 200);
    for (int i = 0; i < NKEYLESS; i++) {
        ck_assert_int_eq(evd_t_stub_reset(&stub), 200);
        char *body = text_eval(keyless[i].provider);
        char *id = start_eval(body);
        ck_assert_str_eq(evd_t_wait_terminal(evald.base, id, 60000), "completed");
        json_t *runs = runs_of(id);
        for (size_t r = 0; r < 2; r++)
            ck_assert_msg(json_is_true(json_object_get(json_array_get(runs, r), "passed")),
                          "%s: run %zu did not pass", keyless[i].provider, r);
        json_decref(runs);
        /* Both calls reached the stub on the kind's own wire, without any key header. */
        json_t *reqs = stub_requests();
        ck_assert_int_eq(json_array_size(reqs), 2);
        size_t k;
        json_t *q;
        json_array_foreach(reqs, k, q)
        {
            ck_assert_str_eq(JS(q, "api"), keyless[i].api);
            json_t *h = json_object_get(q, "headers");
            ck_assert(json_is_object(h));
            ck_assert_ptr_null(json_object_get(h, "authorization"));
            ck_assert_ptr_null(json_object_get(h, "x-api-key"));
        }
        json_decref(reqs);
        free(id);
        free(body);
    }
    /* The built-in providers without their key stay unavailable, named by variable. */
    static const struct {
        const char *provider, *detail;
    } refused[] = {
        {"openai", "model.provider \"openai\" has no API key: set OPENAI_API_KEY in the "
                   "environment"},
        {"anthropic", "model.provider \"anthropic\" has no API key: set ANTHROPIC_API_KEY in "
                      "the environment"},
    };
    for (size_t i = 0; i < 2; i++) {
        char *body = text_eval(refused[i].provider);
        long status = 0;
        json_t *r = post_eval(body, &status);
        ck_assert_int_eq(status, 400);
        ck_assert_msg(strstr(JS(r, "detail"), refused[i].detail) != NULL, "detail %s",
                      JS(r, "detail"));
        json_decref(r);
        free(body);
    }
    char *n = evd_t_sql(db_url, "SELECT count(*) FROM evaluations");
    ck_assert_str_eq(n, "3");
    free(n);
}
END_TEST

START_TEST(huge_header_names_the_limit)
{
    ck_assert_int_eq(
        evd_t_stub_script(&stub,
                          "{\"rules\":[],\"default\":{\"fault\":{\"header_bytes\":1048576}}}"),
        200);
    ck_assert_int_eq(evd_t_stub_reset(&stub), 200);
    char *body = text_eval("free-chat");
    char *id = start_eval(body);
    ck_assert_str_eq(evd_t_wait_terminal(evald.base, id, 60000), "completed");
    json_t *runs = runs_of(id);
    for (size_t r = 0; r < 2; r++) {
        json_t *run = json_array_get(runs, r);
        ck_assert_str_eq(JS(run, "status"), "failed");
        json_t *f = json_array_get(json_object_get(run, "failures"), 0);
        ck_assert_ptr_nonnull(f);
        ck_assert_str_eq(JS(f, "message"), "provider free-chat sent a response header too large "
                                           "(a header line longer than 102400 bytes)");
    }
    json_decref(runs);
    /* Not retried: one request per run. */
    json_t *reqs = stub_requests();
    ck_assert_int_eq(json_array_size(reqs), 2);
    json_decref(reqs);
    free(id);
    free(body);
}
END_TEST

START_TEST(bare_structured_answer_from_a_server_is_the_output)
{
    /* The server ignores the requested format and answers the owner value itself. */
    ck_assert_int_eq(evd_t_stub_script(&stub, "{\"rules\":[],\"default\":{\"reply\":{\"json\":"
                                              "{\"covered\":[\"R1\"]}}}}"),
                     200);
    char *body = NULL;
    ck_assert_int_ge(
        asprintf(&body,
                 "{\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
                 "\"free-resp\"},\"control\":{\"prompt\":\"List what you covered.\"},"
                 "\"treatment\":{\"prompt\":\"List the covered requirements.\"},\"output\":"
                 "{\"type\":\"json\",\"schema\":{\"type\":\"object\",\"properties\":{\"covered\":"
                 "{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},\"required\":"
                 "[\"covered\"]}},\"evaluator\":{\"function_id\":\"eval::assert::exact\","
                 "\"arguments\":{\"expected\":{\"covered\":[\"R1\"]}}},\"runs\":1}"),
        0);
    ck_assert_int_eq(evd_t_stub_reset(&stub), 200);
    char *id = start_eval(body);
    ck_assert_str_eq(evd_t_wait_terminal(evald.base, id, 60000), "completed");
    json_t *runs = runs_of(id);
    for (size_t r = 0; r < 2; r++) {
        json_t *run = json_array_get(runs, r);
        ck_assert_str_eq(JS(run, "status"), "completed");
        ck_assert(json_is_true(json_object_get(run, "passed")));
    }
    json_decref(runs);
    /* No repair turn: one request per run, each asking for the format. */
    json_t *reqs = stub_requests();
    ck_assert_int_eq(json_array_size(reqs), 2);
    size_t i;
    json_t *q;
    json_array_foreach(reqs, i, q)
    {
        ck_assert_str_eq(JS(q, "api"), "responses");
        ck_assert_ptr_nonnull(json_object_get(json_object_get(q, "body"), "text"));
    }
    json_decref(reqs);
    free(id);
    free(body);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("provider_edges");
    TCase *tc = tcase_create("provider_edges");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, keyless_server_of_every_kind);
    tcase_add_test(tc, huge_header_names_the_limit);
    tcase_add_test(tc, bare_structured_answer_from_a_server_is_the_output);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
