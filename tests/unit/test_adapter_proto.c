/* Unit tests for the pure parts of the iii adapter: eval::completed binding configs,
 * the error shape of failed invocations, function policies and option validation. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "adapter/internal.h"
#include "common/log.h"
#include "tests/support/testutil.h"

struct config_case {
    const char *json; /* NULL = absent */
    int ok;
    const char *filter; /* expected filter when ok, NULL = none */
    const char *error_part;
};

static const struct config_case configs[] = {
    {NULL, 1, NULL, NULL},
    {"null", 1, NULL, NULL},
    {"{}", 1, NULL, NULL},
    {"{\"evaluation_id\": null}", 1, NULL, NULL},
    {"{\"evaluation_id\": \"eval_1\"}", 1, "eval_1", NULL},
    {"[]", 0, NULL, "expected an object"},
    {"\"eval_1\"", 0, NULL, "expected an object"},
    {"{\"evaluation\": \"eval_1\"}", 0, NULL, "unknown field `evaluation`"},
    {"{\"evaluation_id\": \"e\", \"x\": 1}", 0, NULL, "unknown field `x`"},
    {"{\"evaluation_id\": 5}", 0, NULL, "evaluation_id must be a string"},
    {"{\"evaluation_id\": \"\"}", 0, NULL, "1 to 200 characters"},
};

START_TEST(binding_configs_are_validated)
{
    const struct config_case *c = &configs[_i];
    json_t *config = c->json ? json_loads(c->json, JSON_DECODE_ANY, NULL) : NULL;
    ck_assert(c->json == NULL || config != NULL);
    char *filter = (char *)"untouched";
    struct evd_err err = {0};
    enum evd_code rc = evd_iii_completed_config(config, &filter, &err);
    if (c->ok) {
        ck_assert_msg(rc == EVD_OK, "%s: %s", c->json, err.msg);
        if (c->filter)
            ck_assert_str_eq(filter, c->filter);
        else
            ck_assert_ptr_null(filter);
    } else {
        ck_assert_int_eq(rc, EVD_EINVAL);
        ck_assert_ptr_null(filter);
        ck_assert(strncmp(err.msg, "invalid eval::completed config: ", 32) == 0);
        ck_assert_msg(strstr(err.msg, c->error_part) != NULL, "%s: %s", c->json, err.msg);
    }
    free(filter);
    json_decref(config);
}
END_TEST

static const struct config_case experiment_configs[] = {
    {NULL, 1, NULL, NULL},
    {"null", 1, NULL, NULL},
    {"{}", 1, NULL, NULL},
    {"{\"experiment_id\": null}", 1, NULL, NULL},
    {"{\"experiment_id\": \"exp_1\"}", 1, "exp_1", NULL},
    {"[]", 0, NULL, "expected an object"},
    {"{\"evaluation_id\": \"eval_1\"}", 0, NULL,
     "unknown field `evaluation_id`, expected `experiment_id`"},
    {"{\"experiment_id\": 5}", 0, NULL, "experiment_id must be a string"},
    {"{\"experiment_id\": \"\"}", 0, NULL, "1 to 200 characters"},
};

START_TEST(experiment_binding_configs_are_validated)
{
    const struct config_case *c = &experiment_configs[_i];
    json_t *config = c->json ? json_loads(c->json, JSON_DECODE_ANY, NULL) : NULL;
    ck_assert(c->json == NULL || config != NULL);
    char *filter = (char *)"untouched";
    struct evd_err err = {0};
    enum evd_code rc = evd_iii_experiment_config(config, &filter, &err);
    if (c->ok) {
        ck_assert_msg(rc == EVD_OK, "%s: %s", c->json, err.msg);
        if (c->filter)
            ck_assert_str_eq(filter, c->filter);
        else
            ck_assert_ptr_null(filter);
    } else {
        ck_assert_int_eq(rc, EVD_EINVAL);
        ck_assert_ptr_null(filter);
        const char *prefix = "invalid eval::experiment::completed config: ";
        ck_assert_msg(strncmp(err.msg, prefix, strlen(prefix)) == 0, "%s", err.msg);
        ck_assert_msg(strstr(err.msg, c->error_part) != NULL, "%s: %s", c->json, err.msg);
    }
    free(filter);
    json_decref(config);
}
END_TEST

struct error_case {
    enum evd_code code;
    const char *msg;
    const char *want;
};

static const struct error_case errors[] = {
    {EVD_EINVAL, "model is required", "invalid request: model is required"},
    {EVD_ETOOLARGE, "body too large", "invalid request: body too large"},
    {EVD_ENOTFOUND, "evaluation not found: eval_1", "evaluation not found: eval_1"},
    {EVD_ENOTFOUND, "eval_2", "evaluation not found: eval_2"},
    {EVD_ECONFLICT, "eval_1 is still Running", "evaluation conflict: eval_1 is still Running"},
    {EVD_EDB, "could not connect to the database",
     "dependency error: could not connect to the "
     "database"},
    {EVD_EUPSTREAM, "provider failed", "dependency error: provider failed"},
    {EVD_ETIMEOUT, "late", "dependency error: late"},
    {EVD_EINTERNAL, "bug", "state error: bug"},
    {EVD_ENOMEM, "", "state error: internal"},
    /* A message that merely starts like a prefix is still prefixed. */
    {EVD_EINVAL, "invalid requests abound", "invalid request: invalid requests abound"},
};

START_TEST(failed_invocations_answer_in_the_eval_worker_shape)
{
    const struct error_case *c = &errors[_i];
    struct evd_err err = {0};
    evd_err_set(&err, c->code, "%s", c->msg);
    json_t *body = evd_iii_error_body(&err);
    ck_assert_str_eq(json_string_value(json_object_get(body, "code")), "invocation_failed");
    ck_assert_str_eq(json_string_value(json_object_get(body, "message")), c->want);
    ck_assert_uint_eq(json_object_size(body), 2);
    json_decref(body);
}
END_TEST

START_TEST(policies_match_like_the_harness)
{
    json_t *p =
        json_pack("{s:[s,s], s:[s]}", "allow", "test::*", "weather::get", "deny", "test::secret*");
    ck_assert(evd_iii_policy_allows(p, "test::lookup"));
    ck_assert(evd_iii_policy_allows(p, "weather::get"));
    ck_assert(!evd_iii_policy_allows(p, "test::secret_key"));
    ck_assert(!evd_iii_policy_allows(p, "weather::set"));
    ck_assert(!evd_iii_policy_allows(p, "eval::start"));
    ck_assert(!evd_iii_policy_allows(NULL, "test::lookup"));
    json_t *empty = json_pack("{s:[]}", "allow");
    ck_assert(!evd_iii_policy_allows(empty, "test::lookup"));
    json_decref(p);
    json_decref(empty);
}
END_TEST

START_TEST(options_are_validated)
{
    struct evd_err err = {0};
    struct evd_iii_options o = {.url = "http://127.0.0.1:49134", .conninfo = "dbname=x"};
    ck_assert_ptr_null(evd_iii_new(&o, &err));
    ck_assert_int_eq(err.code, EVD_EINVAL);
    ck_assert(strstr(err.msg, "III_URL") != NULL);
    o.url = "ws://127.0.0.1:49134";
    o.conninfo = NULL;
    ck_assert_ptr_null(evd_iii_new(&o, &err));
    o.conninfo = "dbname=x";
    struct evd_iii *a = evd_iii_new(&o, &err);
    ck_assert_ptr_nonnull(a);
    const struct evd_engine_remote *r = evd_iii_remote(a);
    ck_assert_ptr_eq(r->ctx, a);
    ck_assert(!evd_iii_connected(a));
    /* Defaults are filled, the worker name is unique per process. */
    ck_assert_int_eq(a->opts.ping_interval_ms, 20000);
    ck_assert_int_eq(a->opts.idle_timeout_ms, 60000);
    ck_assert_int_eq(a->opts.backoff_initial_ms, 1000);
    ck_assert_int_eq(a->opts.backoff_max_ms, 30000);
    ck_assert_int_eq(a->opts.handler_threads, 4);
    ck_assert(strncmp(a->worker_name, "evald:", 6) == 0);
    evd_iii_free(a); /* never started: nothing to join */
}
END_TEST

START_TEST(calls_before_start_fail_within_their_deadline)
{
    struct evd_iii_options o = {.url = "ws://127.0.0.1:9", .conninfo = "dbname=x"};
    struct evd_iii *a = evd_iii_new(&o, NULL);
    ck_assert_ptr_nonnull(a);
    struct evd_err err = {0};
    int64_t t0 = evd_mono_ms();
    json_t *r = evd_iii_remote_call(a, "x::y", NULL, 300, NULL, true, &err);
    int64_t took = evd_mono_ms() - t0;
    ck_assert_ptr_null(r);
    ck_assert_int_eq(err.code, EVD_ETIMEOUT);
    ck_assert(strstr(err.msg, "not connected") != NULL);
    ck_assert(took >= 290 && took < 2000);
    /* After a stop, calls fail at once. */
    evd_iii_signal_stop(a);
    t0 = evd_mono_ms();
    r = evd_iii_remote_call(a, "x::y", NULL, 5000, NULL, true, &err);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(err.code, EVD_ECANCELLED);
    ck_assert(evd_mono_ms() - t0 < 1000);
    evd_iii_free(a);
}
END_TEST

int main(void)
{
    evd_log_set_level(EVD_LOG_ERROR);
    Suite *s = suite_create("adapter_proto");
    TCase *tc = tcase_create("proto");
    tcase_add_loop_test(tc, binding_configs_are_validated, 0, sizeof(configs) / sizeof(configs[0]));
    tcase_add_loop_test(tc, experiment_binding_configs_are_validated, 0,
                        sizeof(experiment_configs) / sizeof(experiment_configs[0]));
    tcase_add_loop_test(tc, failed_invocations_answer_in_the_eval_worker_shape, 0,
                        sizeof(errors) / sizeof(errors[0]));
    tcase_add_test(tc, policies_match_like_the_harness);
    tcase_add_test(tc, options_are_validated);
    tcase_add_test(tc, calls_before_start_fail_within_their_deadline);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
