/*
 * Integration tests of the agent loop's faults against a real evald-stub child process,
 * once per wire kind (OpenAI Responses, Anthropic Messages, Chat Completions): 429 with
 * Retry-After, 500 and truncation retried, 401 not retried (and no key in the error), a
 * 1 MiB header named and not retried, cancellation of a stalled call and of a backoff,
 * invocation and scenario timeouts. The fixture is tests/support/harness_loop_fixture.h;
 * the loop's normal paths are in test_harness_loop.c. Runs without fork so that the stub
 * and the tool server started once serve every test.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "harness/harness.h"
#include "tests/support/harness_loop_fixture.h"

/* ---- retries and provider errors ------------------------------------------------------ */

START_TEST(rate_limit_then_success)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":[{\"when\":{\"api\":\"%s\"},\"times\":1,\"fault\":{\"status\":429,"
              "\"retry_after_s\":1}}],\"default\":{\"reply\":{\"text\":\"OK\"},\"usage\":"
              "{\"input_tokens\":3,\"output_tokens\":1}}}",
              k->api);
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k};
    int64_t t0 = evd_mono_ms();
    hl_run(&a, &o, NULL);
    int64_t took = evd_mono_ms() - t0;
    hl_assert_completed(&o);
    ck_assert_int_ge(took, 1000); /* Retry-After: 1 was honoured */
    ck_assert_int_lt(took, 5000);
    json_t *gen = json_array_get(json_object_get(o.transcript, "generations"), 0);
    ck_assert_int_eq(JI(gen, "attempts"), 2);
    ck_assert_int_eq(JI(json_object_get(o.metrics, "totals"), "turns"), 1);
    ck_assert_int_eq(JI(json_object_get(o.metrics, "totals"), "input_tokens"), 3);
    json_t *stats = evd_t_stub_stats(&hl_stub);
    ck_assert_int_eq(JI(stats, "requests"), 2);
    ck_assert_int_eq(JI(json_object_get(stats, "by_status"), "429"), 1);
    ck_assert_int_eq(JI(json_object_get(stats, "by_status"), "200"), 1);
    json_decref(stats);
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(server_error_and_truncation_are_retried)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":[{\"when\":{\"api\":\"%s\"},\"times\":1,\"fault\":{\"status\":500}},"
              "{\"when\":{\"api\":\"%s\"},\"times\":1,\"fault\":{\"truncate\":true}}],"
              "\"default\":{\"reply\":{\"text\":\"OK\"}}}",
              k->api, k->api);
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k};
    hl_run(&a, &o, NULL);
    hl_assert_completed(&o);
    json_t *gen = json_array_get(json_object_get(o.transcript, "generations"), 0);
    ck_assert_int_eq(JI(gen, "attempts"), 3);
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(huge_header_is_named_not_retried)
{
    /* A 1 MiB header line: the run fails at once with what happened and the limit, not
     * "could not reach …: Out of memory". */
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":[{\"when\":{\"api\":\"%s\"},\"fault\":{\"header_bytes\":1048576}}],"
              "\"default\":{\"reply\":{\"text\":\"OK\"}}}",
              k->api);
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k};
    hl_run(&a, &o, NULL);
    ck_assert_int_eq(o.status, EVD_HARNESS_FAILED);
    ck_assert_str_eq(o.phase, "send");
    char want[160];
    snprintf(want, sizeof(want),
             "provider %s sent a response header too large (a header line longer than 102400 "
             "bytes)",
             k->provider);
    ck_assert_str_eq(o.result_error, want);
    json_t *stats = evd_t_stub_stats(&hl_stub);
    ck_assert_int_eq(JI(stats, "requests"), 1);
    json_decref(stats);
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(unauthorized_is_not_retried)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":[],\"default\":{\"reply\":{\"text\":\"OK\"}}}");
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k, .providers = hl_wrong_providers};
    hl_run(&a, &o, NULL);
    ck_assert_int_eq(o.status, EVD_HARNESS_FAILED);
    ck_assert_str_eq(o.phase, "send");
    char want[64];
    snprintf(want, sizeof(want), "%s returned 401: ", k->provider);
    ck_assert_msg(strncmp(o.result_error, want, strlen(want)) == 0, "%s", o.result_error);
    ck_assert_ptr_null(strstr(o.result_error, "OTHERSECRET"));
    ck_assert_ptr_null(strstr(o.result_error, "SECRETVALUE"));
    char *dump = json_dumps(o.transcript, 0);
    ck_assert_ptr_null(strstr(dump, "OTHERSECRET"));
    free(dump);
    json_t *stats = evd_t_stub_stats(&hl_stub);
    ck_assert_int_eq(JI(stats, "requests"), 1);
    json_decref(stats);
    json_t *tot = json_object_get(o.metrics, "totals");
    ck_assert_int_eq(JI(tot, "turns"), 0);
    ck_assert_ptr_null(json_object_get(tot, "input_tokens"));
    ck_assert_int_eq(JI(json_object_get(o.metrics, "traces"), "error_span_count"), 2);
    evd_harness_outcome_clear(&o);
}
END_TEST

/* ---- cancellation and timeouts -------------------------------------------------------- */

struct cancel_ctx {
    const struct hl_kind_case *k;
    struct evd_cancel *cancel;
    struct evd_harness_outcome out;
    int64_t returned_at;
};

static void *run_thread(void *arg)
{
    struct cancel_ctx *c = arg;
    struct hl_run_args a = {.k = c->k, .session = "sess-cancel"};
    hl_run(&a, &c->out, c->cancel);
    c->returned_at = evd_mono_ms();
    return NULL;
}

START_TEST(cancel_interrupts_a_call)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":[{\"when\":{\"api\":\"%s\"},\"fault\":{\"stall\":true}}]}", k->api);
    struct cancel_ctx c = {.k = k, .cancel = evd_cancel_new()};
    pthread_t t;
    pthread_create(&t, NULL, run_thread, &c);
    /* Wait until the stub holds the request, then cancel. */
    for (int i = 0; i < 100; i++) {
        json_t *stats = evd_t_stub_stats(&hl_stub);
        json_int_t inflight = JI(stats, "in_flight");
        json_decref(stats);
        if (inflight > 0)
            break;
        usleep(20 * 1000);
    }
    usleep(200 * 1000);
    int64_t t0 = evd_mono_ms();
    evd_cancel_trigger(c.cancel);
    pthread_join(t, NULL);
    /* The trigger wakes the call's poll (which otherwise looks only once a second). */
    ck_assert_int_lt(c.returned_at - t0, 500);
    ck_assert_int_eq(c.out.status, EVD_HARNESS_CANCELLED);
    ck_assert_str_eq(c.out.phase, "cancel");
    evd_harness_outcome_clear(&c.out);
    evd_cancel_free(c.cancel);
}
END_TEST

START_TEST(cancel_interrupts_backoff)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":[{\"when\":{\"api\":\"%s\"},\"fault\":{\"status\":429,"
              "\"retry_after_s\":30}}]}",
              k->api);
    struct cancel_ctx c = {.k = k, .cancel = evd_cancel_new()};
    pthread_t t;
    pthread_create(&t, NULL, run_thread, &c);
    usleep(400 * 1000);
    int64_t t0 = evd_mono_ms();
    evd_cancel_trigger(c.cancel);
    pthread_join(t, NULL);
    ck_assert_int_lt(c.returned_at - t0, 1000);
    ck_assert_int_eq(c.out.status, EVD_HARNESS_CANCELLED);
    evd_harness_outcome_clear(&c.out);
    evd_cancel_free(c.cancel);
}
END_TEST

START_TEST(stalled_call_hits_invocation_timeout)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":[{\"when\":{\"api\":\"%s\"},\"fault\":{\"stall\":true}}]}", k->api);
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k, .limits = "{\"execution\":{\"invocation_timeout_seconds\":1}}"};
    int64_t t0 = evd_mono_ms();
    hl_run(&a, &o, NULL);
    int64_t took = evd_mono_ms() - t0;
    ck_assert_int_ge(took, 900);
    ck_assert_int_lt(took, 2500);
    ck_assert_int_eq(o.status, EVD_HARNESS_FAILED);
    ck_assert_str_eq(o.phase, "send");
    char want[96];
    snprintf(want, sizeof(want), "%s call exceeded 1s invocation timeout", k->provider);
    ck_assert_str_eq(o.result_error, want);
    evd_harness_outcome_clear(&o);
}
END_TEST

START_TEST(scenario_timeout_ends_the_run)
{
    NEED_STUB();
    const struct hl_kind_case *k = &hl_kinds[_i];
    hl_script("{\"rules\":[{\"when\":{\"api\":\"%s\"},\"fault\":{\"stall\":true}}]}", k->api);
    struct evd_harness_outcome o;
    struct hl_run_args a = {.k = k, .limits = "{\"execution\":{\"scenario_timeout_seconds\":1}}"};
    int64_t t0 = evd_mono_ms();
    hl_run(&a, &o, NULL);
    ck_assert_int_lt(evd_mono_ms() - t0, 2500);
    ck_assert_int_eq(o.status, EVD_HARNESS_FAILED);
    ck_assert_str_eq(o.phase, "await");
    ck_assert_str_eq(o.result_error, "run exceeded 1s scenario timeout");
    evd_harness_outcome_clear(&o);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("harness_integration_faults");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 60);
    /* A 429 holds the process's limiter of that provider: each case starts afresh. */
    tcase_add_checked_fixture(tc, evd_hx_limiter_forget, NULL);
    tcase_add_loop_test(tc, rate_limit_then_success, 0, NKINDS);
    tcase_add_loop_test(tc, server_error_and_truncation_are_retried, 0, NKINDS);
    tcase_add_loop_test(tc, unauthorized_is_not_retried, 0, NKINDS);
    tcase_add_loop_test(tc, huge_header_is_named_not_retried, 0, NKINDS);
    tcase_add_loop_test(tc, cancel_interrupts_a_call, 0, NKINDS);
    tcase_add_loop_test(tc, cancel_interrupts_backoff, 0, NKINDS);
    tcase_add_loop_test(tc, stalled_call_hits_invocation_timeout, 0, NKINDS);
    tcase_add_loop_test(tc, scenario_timeout_ends_the_run, 0, 1);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    hl_setup_all();
    SRunner *sr = srunner_create(suite());
    /* One stub and one tool server serve every test: no fork. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    hl_teardown_all();
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
