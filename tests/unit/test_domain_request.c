/*
 * Unit tests for domain/request.h: start validation (order and messages), the
 * normalized request and its defaults, concurrency, stored-request checks, rerun, and
 * the small request decoders. Table-driven where the input space is a table.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/request.h"
#include "tests/support/domain_fixtures.h"
#include "tests/support/testutil.h"

/* One edit of the base start request: set path to value (NULL deletes). */
struct edit {
    const char *path;
    const char *value;
};

struct reject_case {
    struct edit edits[3];
    const char *message;
};

static const struct reject_case REJECTS[] = {
    /* shape: required members */
    {{{"dimension", NULL}}, "dimension is required"},
    {{{"model", NULL}}, "model is required"},
    {{{"model.model", NULL}}, "model.model is required"},
    {{{"control", NULL}}, "control is required"},
    {{{"treatment", NULL}}, "treatment is required"},
    {{{"control.prompt", NULL}}, "control.prompt is required"},
    {{{"evaluator.function_id", NULL}}, "evaluator.function_id is required"},
    {{{"output", "{}"}}, "output.type is required"},
    /* shape: types */
    {{{"dimension", "1"}}, "dimension must be a string"},
    {{{"model", "\"gpt\""}}, "model must be an object"},
    {{{"model.model", "5"}}, "model.model must be a string"},
    {{{"model.provider", "7"}}, "model.provider must be a string"},
    {{{"model.provider_options", "[]"}}, "model.provider_options must be an object"},
    {{{"model.system_prompt_strategy", "null"}}, "model.system_prompt_strategy must be a string"},
    {{{"control", "[]"}}, "control must be an object"},
    {{{"control.prompt", "42"}}, "control.prompt must be a string"},
    {{{"control.prompt", "null"}}, "control.prompt must be a string"},
    {{{"treatment.prompt", "true"}}, "treatment.prompt must be a string"},
    {{{"control.label", "1"}}, "control.label must be a string"},
    {{{"control.system_prompt", "{}"}}, "control.system_prompt must be a string"},
    {{{"evaluator", "\"exact\""}}, "evaluator must be an object"},
    {{{"evaluator.function_id", "1"}}, "evaluator.function_id must be a string"},
    {{{"runs", "\"3\""}}, "runs must be an integer"},
    {{{"runs", "2.0"}}, "runs must be an integer"},
    {{{"limits", "null"}}, "limits must be an object"},
    {{{"limits", "[]"}}, "limits must be an object"},
    {{{"limits.execution", "[]"}}, "limits.execution must be an object"},
    {{{"limits.evaluation", "null"}}, "limits.evaluation must be an object"},
    {{{"limits.execution.max_turns", "\"10\""}}, "limits.execution.max_turns must be an integer"},
    {{{"limits.execution.max_turns", "-1"}},
     "limits.execution.max_turns must be a non-negative integer"},
    {{{"limits.execution.max_turns", "4294967296"}},
     "limits.execution.max_turns must be at most 4294967295"},
    {{{"limits.execution.invocation_timeout_seconds", "null"}},
     "limits.execution.invocation_timeout_seconds must be an integer"},
    {{{"limits.execution.max_cost_usd", "\"1\""}},
     "limits.execution.max_cost_usd must be a number"},
    {{{"limits.evaluation.max_error_spans", "-1"}},
     "limits.evaluation.max_error_spans must be a non-negative integer"},
    {{{"limits.evaluation.max_function_call_errors", "1.5"}},
     "limits.evaluation.max_function_call_errors must be an integer"},
    {{{"functions", "[]"}}, "functions must be an object"},
    {{{"functions.allow", "\"*\""}}, "functions.allow must be an array"},
    {{{"functions.allow", "[\"a\",2]"}}, "functions.allow[1] must be a string"},
    {{{"functions.deny", "null"}}, "functions.deny must be an array"},
    {{{"output", "\"text\""}}, "output must be an object"},
    {{{"output", "{\"type\":1}"}}, "output.type must be a string"},
    {{{"output", "{\"type\":\"json\",\"schema\":1}"}},
     "output.schema must be an object or a boolean"},
    {{{"concurrency", "\"2\""}}, "concurrency must be an integer"},
    /* shape: enum values */
    {{{"dimension", "\"tone\""}}, "dimension must be one of prompt, system_prompt"},
    {{{"model.system_prompt_strategy", "\"replace\""}},
     "model.system_prompt_strategy must be one of override, enrich, disabled"},
    {{{"model.mode", "\"chat\""}}, "model.mode must be one of ask, agent"},
    {{{"model.thinking_level", "\"max\""}},
     "model.thinking_level must be one of minimal, low, medium, high, xhigh"},
    {{{"execution_order", "\"random\""}},
     "execution_order must be one of balanced_control_first, balanced_treatment_first"},
    {{{"functions.expose", "\"all\""}}, "functions.expose must be one of agent_trigger, native"},
    {{{"output", "{\"type\":\"yaml\"}"}}, "output.type must be one of text, json"},
    /* shape: unknown members of nested objects */
    {{{"model.colour", "\"red\""}}, "model.colour is not a known field"},
    {{{"control.tone", "1"}}, "control.tone is not a known field"},
    {{{"treatment.tone", "1"}}, "treatment.tone is not a known field"},
    {{{"evaluator.weight", "1"}}, "evaluator.weight is not a known field"},
    {{{"limits.extra", "{}"}}, "limits.extra is not a known field"},
    {{{"limits.execution.timeout", "1"}}, "limits.execution.timeout is not a known field"},
    {{{"limits.evaluation.other", "1"}}, "limits.evaluation.other is not a known field"},
    {{{"functions.extra", "1"}}, "functions.extra is not a known field"},
    {{{"output", "{\"type\":\"text\",\"schema\":{}}"}}, "output.schema is not a known field"},
    {{{"output", "{\"type\":\"json\",\"strict\":true}"}}, "output.strict is not a known field"},
    /* rules, in the contract's order */
    {{{"model.model", "\"   \""}}, "model.model cannot be empty"},
    {{{"model.model", "\"\\u3000\\t\\u00a0\""}}, "model.model cannot be empty"},
    {{{"model.provider", "\" \""}}, "model.provider cannot be empty when supplied"},
    {{{"control.prompt", "\"\""}}, "control.prompt cannot be empty"},
    {{{"treatment.prompt", "\" \\n\""}}, "treatment.prompt cannot be empty"},
    {{{"evaluator.function_id", "\" \""}}, "evaluator.function_id cannot be empty"},
    {{{"control.label", "\"\""}}, "variant labels cannot be empty when supplied"},
    {{{"treatment.label", "\" \""}}, "variant labels cannot be empty when supplied"},
    {{{"treatment.system_prompt", "\"Be brief.\""}},
     "prompt comparison requires identical system prompts"},
    {{{"treatment.system_prompt", "null"}}, "prompt comparison requires identical system prompts"},
    {{{"treatment.system_prompt", NULL}}, "prompt comparison requires identical system prompts"},
    {{{"control.system_prompt", "\"\""}, {"treatment.system_prompt", "null"}},
     "prompt comparison requires identical system prompts"},
    {{{"treatment.prompt", "\"Reply with OK.\""}}, "prompt comparison requires different prompts"},
    {{{"dimension", "\"system_prompt\""}}, "system_prompt comparison requires identical prompts"},
    {{{"dimension", "\"system_prompt\""}, {"treatment.prompt", "\"Reply with OK.\""}},
     "system_prompt comparison requires different system prompts"},
    {{{"dimension", "\"system_prompt\""},
      {"treatment.prompt", "\"Reply with OK.\""},
      {"treatment.system_prompt", "\"Be exact. \""}},
     NULL /* accepted: system prompts differ by one byte */},
    {{{"runs", "0"}}, "runs must be between 1 and 100"},
    {{{"runs", "101"}}, "runs must be between 1 and 100"},
    {{{"runs", "-1"}}, "runs must be between 1 and 100"},
    {{{"runs", "100"}}, NULL},
    {{{"limits.execution.invocation_timeout_seconds", "0"}},
     "limits.execution.invocation_timeout_seconds must be greater than zero"},
    {{{"limits.execution.scenario_timeout_seconds", "0"}},
     "limits.execution.scenario_timeout_seconds must be greater than zero"},
    {{{"limits.execution.max_turns", "0"}}, "limits.execution.max_turns must be greater than zero"},
    {{{"limits.execution.max_output_tokens_per_call", "0"}},
     "limits.execution.max_output_tokens_per_call must be greater than zero"},
    {{{"limits.execution.max_total_tokens", "0"}},
     "limits.execution.max_total_tokens must be greater than zero when supplied"},
    {{{"limits.execution.max_cost_usd", "-0.5"}},
     "limits.execution.max_cost_usd must be a finite non-negative number"},
    {{{"limits.execution.max_cost_usd", "0"}}, NULL},
    {{{"concurrency", "0"}}, "concurrency must be between 1 and 16"},
    {{{"concurrency", "17"}}, "concurrency must be between 1 and 16"},
    {{{"concurrency", "16"}}, NULL},
    /* first failure wins: shape before rules, rules in order */
    {{{"model.model", "\"\""}, {"runs", "\"x\""}}, "runs must be an integer"},
    {{{"model.model", "\"\""}, {"control.prompt", "\"\""}}, "model.model cannot be empty"},
    {{{"control.prompt", "\"\""}, {"treatment.prompt", "\"\""}}, "control.prompt cannot be empty"},
    {{{"runs", "0"}, {"limits.execution.max_turns", "0"}}, "runs must be between 1 and 100"},
    {{{"limits.execution.max_turns", "0"}, {"concurrency", "99"}},
     "limits.execution.max_turns must be greater than zero"},
    {{{"model.colour", "1"}, {"control.prompt", "1"}}, "model.colour is not a known field"},
};

START_TEST(start_rejects_with_the_contract_message)
{
    const struct reject_case *c = &REJECTS[_i];
    json_t *body = evd_dt_start_body();
    for (size_t k = 0; k < 3 && c->edits[k].path != NULL; k++)
        evd_dt_set(body, c->edits[k].path, c->edits[k].value);
    json_t *n = (json_t *)1;
    uint32_t conc = 0;
    struct evd_err err = {0};
    enum evd_code rc = evd_request_start(body, EVD_REQUEST_DEFAULT_MAX_RUNS, &n, &conc, &err);
    if (c->message == NULL) {
        ck_assert_msg(rc == EVD_OK, "case %d: unexpected rejection: %s", _i, err.msg);
        ck_assert_ptr_nonnull(n);
        ck_assert_int_eq(evd_request_check_normalized(n, &err), EVD_OK);
    } else {
        ck_assert_msg(rc == EVD_EINVAL, "case %d (%s): accepted, expected \"%s\"", _i,
                      c->edits[0].path, c->message);
        ck_assert_str_eq(err.msg, c->message);
        ck_assert_ptr_null(n);
    }
    json_decref(n);
    json_decref(body);
}
END_TEST

START_TEST(start_rejects_a_body_that_is_not_an_object)
{
    static const char *const BODIES[] = {"[]", "\"x\"", "null", "3"};
    for (size_t i = 0; i < sizeof(BODIES) / sizeof(BODIES[0]); i++) {
        json_t *body = evd_dt_parse(BODIES[i]);
        json_t *n;
        struct evd_err err;
        ck_assert_int_eq(evd_request_start(body, 100, &n, NULL, &err), EVD_EINVAL);
        ck_assert_str_eq(err.msg, "request body must be a JSON object");
        json_decref(body);
    }
}
END_TEST

START_TEST(runs_bound_is_the_configured_maximum)
{
    json_t *body = evd_dt_start_body();
    json_t *n = NULL;
    struct evd_err err;
    evd_dt_set(body, "runs", "21");
    ck_assert_int_eq(evd_request_start(body, 20, &n, NULL, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "runs must be between 1 and 20");
    evd_dt_set(body, "runs", "20");
    ck_assert_int_eq(evd_request_start(body, 20, &n, NULL, &err), EVD_OK);
    ck_assert_int_eq(json_integer_value(json_object_get(n, "runs")), 20);
    json_decref(n);
    json_decref(body);
}
END_TEST

START_TEST(normalized_request_fills_every_default)
{
    json_t *body = evd_dt_start_body();
    json_t *n = NULL;
    uint32_t conc = 0;
    struct evd_err err;
    ck_assert_int_eq(evd_request_start(body, 100, &n, &conc, &err), EVD_OK);
    json_t *want = evd_dt_parse(
        "{\"control\":{\"label\":\"baseline\",\"prompt\":\"Reply with OK.\","
        "\"system_prompt\":\"Be exact.\"},"
        "\"dimension\":\"prompt\","
        "\"evaluator\":{\"function_id\":\"eval::assert::exact\",\"arguments\":{\"expected\":"
        "\"OK\"}},"
        "\"execution_order\":\"balanced_control_first\","
        "\"functions\":{\"allow\":[],\"deny\":[],\"expose\":\"agent_trigger\"},"
        "\"limits\":{\"evaluation\":{},\"execution\":{\"invocation_timeout_seconds\":120,"
        "\"max_output_tokens_per_call\":8192,\"max_turns\":1000,"
        "\"scenario_timeout_seconds\":600}},"
        "\"model\":{\"model\":\"gpt-test\",\"provider\":\"openai\","
        "\"system_prompt_strategy\":\"enrich\"},"
        "\"output\":{\"type\":\"text\"},"
        "\"runs\":3,"
        "\"treatment\":{\"label\":\"candidate\",\"prompt\":\"Return exactly OK.\","
        "\"system_prompt\":\"Be exact.\"}}");
    ck_assert_msg(json_equal(n, want), "got %s", evd_dt_dump(n));
    ck_assert_uint_eq(conc, 1);
    json_decref(want);
    json_decref(n);
    json_decref(body);
}
END_TEST

START_TEST(null_optional_members_read_as_absent)
{
    json_t *body = evd_dt_start_body();
    static const char *const NULLS[] = {"model.provider",
                                        "model.mode",
                                        "model.thinking_level",
                                        "model.provider_options",
                                        "control.label",
                                        "treatment.label",
                                        "runs",
                                        "execution_order",
                                        "functions",
                                        "output",
                                        "metadata",
                                        "concurrency",
                                        "limits.execution.max_total_tokens",
                                        "limits.execution.max_cost_usd",
                                        "limits.evaluation.max_error_spans"};
    for (size_t i = 0; i < sizeof(NULLS) / sizeof(NULLS[0]); i++)
        evd_dt_set(body, NULLS[i], "null");
    json_t *n = NULL;
    uint32_t conc = 0;
    struct evd_err err;
    ck_assert_msg(evd_request_start(body, 100, &n, &conc, &err) == EVD_OK, "%s", err.msg);
    ck_assert_str_eq(evd_dt_dump(json_object_get(n, "model")),
                     "{\"model\":\"gpt-test\",\"system_prompt_strategy\":\"enrich\"}");
    ck_assert_ptr_null(json_object_get(json_object_get(n, "control"), "label"));
    ck_assert_int_eq(json_integer_value(json_object_get(n, "runs")), 3);
    ck_assert_str_eq(json_string_value(json_object_get(n, "execution_order")),
                     "balanced_control_first");
    ck_assert_str_eq(evd_dt_dump(json_object_get(n, "functions")),
                     "{\"allow\":[],\"deny\":[],\"expose\":\"agent_trigger\"}");
    ck_assert_str_eq(evd_dt_dump(json_object_get(n, "output")), "{\"type\":\"text\"}");
    ck_assert_ptr_null(json_object_get(n, "metadata"));
    ck_assert_uint_eq(conc, 1);
    ck_assert_str_eq(evd_dt_dump(json_object_get(n, "limits")),
                     "{\"evaluation\":{},\"execution\":{\"invocation_timeout_seconds\":120,"
                     "\"max_output_tokens_per_call\":8192,\"max_turns\":1000,"
                     "\"scenario_timeout_seconds\":600}}");
    json_decref(n);
    evd_dt_set(body, "evaluator", "null");
    ck_assert_int_eq(evd_request_start(body, 100, &n, NULL, &err), EVD_OK);
    ck_assert_ptr_null(json_object_get(n, "evaluator"));
    json_decref(n);
    json_decref(body);
}
END_TEST

START_TEST(system_prompt_comparison_is_accepted)
{
    json_t *body = evd_dt_start_body();
    evd_dt_set(body, "dimension", "\"system_prompt\"");
    evd_dt_set(body, "treatment.prompt", "\"Reply with OK.\"");
    evd_dt_set(body, "treatment.system_prompt", "\"Answer with one word.\"");
    json_t *n = NULL;
    struct evd_err err;
    ck_assert_msg(evd_request_start(body, 100, &n, NULL, &err) == EVD_OK, "%s", err.msg);
    ck_assert_str_eq(json_string_value(json_object_get(n, "dimension")), "system_prompt");
    json_decref(n);
    json_decref(body);
}
END_TEST

START_TEST(default_versus_disabled_system_prompt_is_accepted)
{
    json_t *body = evd_dt_start_body();
    evd_dt_set(body, "dimension", "\"system_prompt\"");
    evd_dt_set(body, "treatment.prompt", "\"Reply with OK.\"");
    evd_dt_set(body, "control.system_prompt", "\"\"");
    evd_dt_set(body, "treatment.system_prompt", "null");
    json_t *n = NULL;
    struct evd_err err;
    ck_assert_msg(evd_request_start(body, 100, &n, NULL, &err) == EVD_OK, "%s", err.msg);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(n, "control"), "system_prompt")), "");
    ck_assert(json_is_null(json_object_get(json_object_get(n, "treatment"), "system_prompt")));
    json_decref(n);
    /* an absent system prompt is null too, and still differs from "" */
    evd_dt_set(body, "treatment.system_prompt", NULL);
    ck_assert_int_eq(evd_request_start(body, 100, &n, NULL, &err), EVD_OK);
    ck_assert(json_is_null(json_object_get(json_object_get(n, "treatment"), "system_prompt")));
    json_decref(n);
    json_decref(body);
}
END_TEST

START_TEST(unknown_top_level_members_are_ignored)
{
    json_t *body = evd_dt_start_body();
    evd_dt_set(body, "_caller_worker_id", "\"worker-7\"");
    evd_dt_set(body, "anything", "{\"x\":1}");
    json_t *n = NULL;
    struct evd_err err;
    ck_assert_int_eq(evd_request_start(body, 100, &n, NULL, &err), EVD_OK);
    ck_assert_ptr_null(json_object_get(n, "_caller_worker_id"));
    ck_assert_ptr_null(json_object_get(n, "anything"));
    json_decref(n);
    json_decref(body);
}
END_TEST

START_TEST(concurrency_is_returned_beside_the_normalized_request)
{
    json_t *body = evd_dt_start_body();
    evd_dt_set(body, "concurrency", "4");
    json_t *n = NULL;
    uint32_t conc = 0;
    struct evd_err err;
    ck_assert_int_eq(evd_request_start(body, 100, &n, &conc, &err), EVD_OK);
    ck_assert_uint_eq(conc, 4);
    ck_assert_ptr_null(json_object_get(n, "concurrency"));
    json_decref(n);
    json_decref(body);
}
END_TEST

struct limits_case {
    const char *limits;
    const char *normalized;
};

static const struct limits_case LIMITS[] = {
    {"{}",
     "{\"evaluation\":{},\"execution\":{\"invocation_timeout_seconds\":120,"
     "\"max_output_tokens_per_call\":8192,\"max_turns\":1000,\"scenario_timeout_seconds\":600}}"},
    {"{\"execution\":{},\"evaluation\":{}}",
     "{\"evaluation\":{},\"execution\":{\"invocation_timeout_seconds\":120,"
     "\"max_output_tokens_per_call\":8192,\"max_turns\":1000,\"scenario_timeout_seconds\":600}}"},
    {"{\"execution\":{\"max_turns\":5,\"max_total_tokens\":100000}}",
     "{\"evaluation\":{},\"execution\":{\"invocation_timeout_seconds\":120,"
     "\"max_output_tokens_per_call\":8192,\"max_total_tokens\":100000,\"max_turns\":5,"
     "\"scenario_timeout_seconds\":600}}"},
    {"{\"execution\":{\"max_cost_usd\":2},\"evaluation\":{\"max_function_call_errors\":0}}",
     "{\"evaluation\":{\"max_function_call_errors\":0},\"execution\":{"
     "\"invocation_timeout_seconds\":120,\"max_cost_usd\":2.0,"
     "\"max_output_tokens_per_call\":8192,\"max_turns\":1000,\"scenario_timeout_seconds\":600}}"},
    {"{\"evaluation\":{\"max_error_spans\":3,\"max_function_call_errors\":null}}",
     "{\"evaluation\":{\"max_error_spans\":3},\"execution\":{\"invocation_timeout_seconds\":120,"
     "\"max_output_tokens_per_call\":8192,\"max_turns\":1000,\"scenario_timeout_seconds\":600}}"},
};

START_TEST(partial_limits_resolve_to_defaults)
{
    json_t *body = evd_dt_start_body();
    evd_dt_set(body, "limits", LIMITS[_i].limits);
    json_t *n = NULL;
    struct evd_err err;
    ck_assert_msg(evd_request_start(body, 100, &n, NULL, &err) == EVD_OK, "%s", err.msg);
    json_t *want = evd_dt_parse(LIMITS[_i].normalized);
    ck_assert_msg(json_equal(json_object_get(n, "limits"), want), "got %s",
                  evd_dt_dump(json_object_get(n, "limits")));
    json_decref(want);
    json_decref(n);
    json_decref(body);
}
END_TEST

struct keep_case {
    const char *path;
    const char *value;
    const char *member; /* member of the normalized request to compare */
    const char *want;
};

static const struct keep_case KEEPS[] = {
    {"functions", "{\"allow\":[\"tools::*\"]}", "functions",
     "{\"allow\":[\"tools::*\"],\"deny\":[],\"expose\":\"agent_trigger\"}"},
    {"functions", "{\"allow\":[\"*\"],\"deny\":[\"approval::*\"],\"expose\":\"native\"}",
     "functions", "{\"allow\":[\"*\"],\"deny\":[\"approval::*\"],\"expose\":\"native\"}"},
    {"output", "{\"type\":\"json\",\"schema\":{\"type\":\"object\"}}", "output",
     "{\"schema\":{\"type\":\"object\"},\"type\":\"json\"}"},
    {"output", "{\"type\":\"json\",\"schema\":null}", "output", "{\"type\":\"json\"}"},
    {"output", "{\"type\":\"json\",\"schema\":true}", "output",
     "{\"schema\":true,\"type\":\"json\"}"},
    {"output", "{\"type\":\"text\"}", "output", "{\"type\":\"text\"}"},
    {"metadata", "{\"fs_scope\":{\"root\":\"/workspace\"}}", "metadata",
     "{\"fs_scope\":{\"root\":\"/workspace\"}}"},
    {"metadata", "[1,2]", "metadata", "[1,2]"},
    {"evaluator", "{\"function_id\":\"my::judge\"}", "evaluator",
     "{\"arguments\":{},\"function_id\":\"my::judge\"}"},
    {"evaluator", "{\"function_id\":\"my::judge\",\"arguments\":null}", "evaluator",
     "{\"arguments\":null,\"function_id\":\"my::judge\"}"},
    {"model",
     "{\"model\":\"m\",\"mode\":\"ask\",\"thinking_level\":\"xhigh\",\"system_prompt_strategy\":"
     "\"override\",\"provider_options\":{\"openai\":{\"store\":false}}}",
     "model",
     "{\"mode\":\"ask\",\"model\":\"m\",\"provider_options\":{\"openai\":{\"store\":false}},"
     "\"system_prompt_strategy\":\"override\",\"thinking_level\":\"xhigh\"}"},
    {"execution_order", "\"balanced_treatment_first\"", "execution_order",
     "\"balanced_treatment_first\""},
    {"runs", "1", "runs", "1"},
};

START_TEST(given_members_are_kept_normalized)
{
    const struct keep_case *c = &KEEPS[_i];
    json_t *body = evd_dt_start_body();
    evd_dt_set(body, c->path, c->value);
    json_t *n = NULL;
    struct evd_err err;
    ck_assert_msg(evd_request_start(body, 100, &n, NULL, &err) == EVD_OK, "case %d: %s", _i,
                  err.msg);
    json_t *want = evd_dt_parse(c->want);
    ck_assert_msg(json_equal(json_object_get(n, c->member), want), "case %d: got %s", _i,
                  evd_dt_dump(json_object_get(n, c->member)));
    json_decref(want);
    json_decref(n);
    json_decref(body);
}
END_TEST

START_TEST(stored_request_check)
{
    json_t *n = evd_dt_normalized(50, EVD_ORDER_CONTROL_FIRST, true);
    struct evd_err err;
    ck_assert_int_eq(evd_request_check_normalized(n, &err), EVD_OK);
    /* the configured maximum may have been lowered since: stored runs stay valid */
    json_object_set_new(n, "runs", json_integer(5000));
    ck_assert_int_eq(evd_request_check_normalized(n, &err), EVD_OK);
    json_object_set_new(n, "source_evaluation_id", json_string("eval_0"));
    ck_assert_int_eq(evd_request_check_normalized(n, &err), EVD_OK);
    json_object_set_new(n, "concurrency", json_integer(2));
    ck_assert_int_eq(evd_request_check_normalized(n, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "concurrency is not a known field");
    json_object_del(n, "concurrency");
    json_object_del(n, "runs");
    ck_assert_int_eq(evd_request_check_normalized(n, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "runs is required");
    json_object_set_new(n, "runs", json_integer(0));
    ck_assert_int_eq(evd_request_check_normalized(n, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "runs must be between 1 and 4294967295");
    json_object_set_new(n, "runs", json_integer(2));
    json_object_del(n, "functions");
    ck_assert_int_eq(evd_request_check_normalized(n, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "functions is required");
    json_decref(n);
}
END_TEST

START_TEST(view_reads_a_normalized_request)
{
    json_t *n = evd_dt_normalized(4, EVD_ORDER_TREATMENT_FIRST, true);
    struct evd_request_view v;
    struct evd_err err;
    ck_assert_int_eq(evd_request_view(n, &v, &err), EVD_OK);
    ck_assert_int_eq(v.dimension, EVD_DIMENSION_PROMPT);
    ck_assert_int_eq(v.order, EVD_ORDER_TREATMENT_FIRST);
    ck_assert_uint_eq(v.runs, 4);
    ck_assert_str_eq(v.evaluator_function_id, "eval::assert::exact");
    ck_assert_str_eq(evd_dt_dump(v.evaluator_arguments), "{\"expected\":\"OK\"}");
    ck_assert_ptr_null(v.metadata);
    ck_assert_ptr_null(v.source_evaluation_id);
    ck_assert_uint_eq(v.limits.max_turns, 1000);
    ck_assert(!v.limits.has_max_cost_usd);
    ck_assert_ptr_eq(v.control, json_object_get(n, "control"));
    /* The trusted view of the same request is the same view, without the check: a broken
     * dimension passes it (the engine's own stored requests were checked at the start). */
    struct evd_request_view t;
    ck_assert_int_eq(evd_request_view_trusted(n, &t, &err), EVD_OK);
    ck_assert_int_eq(memcmp(&t, &v, sizeof(t)), 0);
    json_object_set_new(n, "dimension", json_string("tone"));
    ck_assert_int_eq(evd_request_view(n, &v, &err), EVD_EINVAL);
    ck_assert_int_eq(evd_request_view_trusted(n, &t, &err), EVD_OK);
    json_object_set_new(n, "limits", json_string("none"));
    ck_assert_int_eq(evd_request_view_trusted(n, &t, &err), EVD_EINVAL);
    json_decref(n);
}
END_TEST

START_TEST(rerun_copies_and_reverses)
{
    json_t *src = evd_dt_normalized(2, EVD_ORDER_CONTROL_FIRST, true);
    json_t *before = json_deep_copy(src);
    json_t *same = evd_request_rerun(src, "eval_src", false);
    json_t *rev = evd_request_rerun(src, "eval_src", true);
    ck_assert_str_eq(json_string_value(json_object_get(same, "execution_order")),
                     "balanced_control_first");
    ck_assert_str_eq(json_string_value(json_object_get(rev, "execution_order")),
                     "balanced_treatment_first");
    ck_assert_str_eq(json_string_value(json_object_get(rev, "source_evaluation_id")), "eval_src");
    /* a chain points at its immediate parent only */
    json_t *again = evd_request_rerun(rev, "eval_rev", true);
    ck_assert_str_eq(json_string_value(json_object_get(again, "source_evaluation_id")), "eval_rev");
    ck_assert_str_eq(json_string_value(json_object_get(again, "execution_order")),
                     "balanced_control_first");
    ck_assert(json_equal(src, before)); /* the source is untouched */
    struct evd_err err;
    ck_assert_int_eq(evd_request_check_normalized(again, &err), EVD_OK);
    json_object_del(again, "source_evaluation_id");
    json_object_del(again, "execution_order");
    json_object_del(before, "execution_order");
    ck_assert(json_equal(again, before));
    json_decref(src);
    json_decref(before);
    json_decref(same);
    json_decref(rev);
    json_decref(again);
}
END_TEST

struct list_case {
    const char *body;
    enum evd_code rc;
    uint32_t limit;
    const char *message;
};

static const struct list_case LISTS[] = {
    {"{}", EVD_OK, 50, NULL},
    {"{\"limit\":null}", EVD_OK, 50, NULL},
    {"{\"limit\":1}", EVD_OK, 1, NULL},
    {"{\"limit\":100}", EVD_OK, 100, NULL},
    {"{\"limit\":7,\"_caller_worker_id\":\"w1\"}", EVD_OK, 7, NULL},
    {"{\"limit\":0}", EVD_EINVAL, 0, "limit must be between 1 and 100"},
    {"{\"limit\":101}", EVD_EINVAL, 0, "limit must be between 1 and 100"},
    {"{\"limit\":-3}", EVD_EINVAL, 0, "limit must be between 1 and 100"},
    {"{\"limit\":\"5\"}", EVD_EINVAL, 0, "limit must be an integer"},
    {"{\"limit\":5.0}", EVD_EINVAL, 0, "limit must be an integer"},
    {"[]", EVD_EINVAL, 0, "request body must be a JSON object"},
};

START_TEST(list_limit)
{
    const struct list_case *c = &LISTS[_i];
    json_t *body = evd_dt_parse(c->body);
    uint32_t limit = 0;
    struct evd_err err;
    ck_assert_int_eq(evd_request_list(body, &limit, &err), c->rc);
    if (c->rc == EVD_OK)
        ck_assert_uint_eq(limit, c->limit);
    else
        ck_assert_str_eq(err.msg, c->message);
    json_decref(body);
}
END_TEST

struct small_case {
    const char *body;
    const char *message; /* NULL = accepted */
};

/* The body of a re-score: closed, the evaluator required and decoded as at a start. */
static const struct small_case RESCORES[] = {
    {"{\"evaluator\":{\"function_id\":\"eval::assert::exact\"}}", NULL},
    {"{\"evaluator\":{\"function_id\":\"x\",\"arguments\":{\"expected\":1}}}", NULL},
    {"[]", "request body must be a JSON object"},
    {"{}", "evaluator is required"},
    {"{\"evaluator\":null}", "evaluator is required"},
    {"{\"evaluator\":{\"function_id\":\"x\"},\"runs\":2}", "runs is not a known field"},
    {"{\"evaluator\":[]}", "evaluator must be an object"},
    {"{\"evaluator\":{}}", "evaluator.function_id is required"},
    {"{\"evaluator\":{\"function_id\":null}}", "evaluator.function_id must be a string"},
    {"{\"evaluator\":{\"function_id\":\" \\t\"}}", "evaluator.function_id cannot be empty"},
    {"{\"evaluator\":{\"function_id\":\"x\",\"colour\":1}}",
     "evaluator.colour is not a known field"},
};

START_TEST(rescore_body)
{
    const struct small_case *c = &RESCORES[_i];
    json_t *body = evd_dt_parse(c->body);
    json_t *ev = (json_t *)1;
    struct evd_err err = {0};
    enum evd_code rc = evd_request_rescore_args(body, &ev, &err);
    if (c->message == NULL) {
        ck_assert_int_eq(rc, EVD_OK);
        /* normalized as at a start: arguments {} when omitted, else a copy */
        json_t *none = json_object();
        const json_t *want = json_object_get(json_object_get(body, "evaluator"), "arguments");
        ck_assert(json_equal(json_object_get(ev, "arguments"), want ? want : none));
        json_decref(none);
        ck_assert(json_equal(json_object_get(ev, "function_id"),
                             json_object_get(json_object_get(body, "evaluator"), "function_id")));
        ck_assert_uint_eq(json_object_size(ev), 2);
    } else {
        ck_assert_int_eq(rc, EVD_EINVAL);
        ck_assert_ptr_null(ev);
        ck_assert_str_eq(err.msg, c->message);
    }
    json_decref(ev);
    json_decref(body);
}
END_TEST

static const struct small_case ID_CASES[] = {
    {"{\"evaluation_id\":\"eval_1\"}", NULL},
    {"{\"evaluation_id\":\"eval_1\",\"_caller_worker_id\":\"w\"}", NULL},
    {"{}", "evaluation_id is required"},
    {"{\"evaluation_id\":null}", "evaluation_id must be a string"},
    {"{\"evaluation_id\":5}", "evaluation_id must be a string"},
    {"\"eval_1\"", "request body must be a JSON object"},
};

START_TEST(evaluation_id_requests)
{
    json_t *body = evd_dt_parse(ID_CASES[_i].body);
    const char *id = NULL;
    struct evd_err err;
    enum evd_code rc = evd_request_evaluation_id(body, &id, &err);
    if (ID_CASES[_i].message == NULL) {
        ck_assert_int_eq(rc, EVD_OK);
        ck_assert_str_eq(id, "eval_1");
    } else {
        ck_assert_int_eq(rc, EVD_EINVAL);
        ck_assert_str_eq(err.msg, ID_CASES[_i].message);
    }
    json_decref(body);
}
END_TEST

START_TEST(rerun_request)
{
    struct evd_err err;
    const char *id;
    bool flag = true;
    json_t *b = evd_dt_parse("{\"evaluation_id\":\"e\"}");
    ck_assert_int_eq(evd_request_rerun_args(b, &id, &flag, &err), EVD_OK);
    ck_assert(!flag);
    json_decref(b);
    b = evd_dt_parse("{\"evaluation_id\":\"e\",\"reverse_order\":true}");
    ck_assert_int_eq(evd_request_rerun_args(b, &id, &flag, &err), EVD_OK);
    ck_assert(flag);
    json_decref(b);
    b = evd_dt_parse("{\"evaluation_id\":\"e\",\"reverse_order\":\"yes\"}");
    ck_assert_int_eq(evd_request_rerun_args(b, &id, &flag, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "reverse_order must be a boolean");
    json_decref(b);
    b = evd_dt_parse("{\"reverse_order\":true}");
    ck_assert_int_eq(evd_request_rerun_args(b, &id, &flag, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "evaluation_id is required");
    json_decref(b);
}
END_TEST

START_TEST(step_request)
{
    struct evd_err err;
    const char *id;
    uint64_t step = 0;
    json_t *b = evd_dt_parse("{\"evaluation_id\":\"e\",\"step\":4}");
    ck_assert_int_eq(evd_request_step(b, &id, &step, &err), EVD_OK);
    ck_assert_uint_eq(step, 4);
    json_decref(b);
    b = evd_dt_parse("{\"evaluation_id\":\"e\"}");
    ck_assert_int_eq(evd_request_step(b, &id, &step, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "step is required");
    json_decref(b);
    b = evd_dt_parse("{\"evaluation_id\":\"e\",\"step\":-1}");
    ck_assert_int_eq(evd_request_step(b, &id, &step, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "step must be a non-negative integer");
    json_decref(b);
    b = evd_dt_parse("{\"evaluation_id\":\"e\",\"step\":\"1\"}");
    ck_assert_int_eq(evd_request_step(b, &id, &step, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "step must be an integer");
    json_decref(b);
}
END_TEST

START_TEST(wake_request)
{
    struct evd_err err;
    const char *sid = NULL;
    bool flag = true;
    json_t *b = evd_dt_parse("{\"turn_id\":\"t\"}");
    ck_assert_int_eq(evd_request_wake(b, &sid, &flag, &err), EVD_OK);
    ck_assert_str_eq(sid, "");
    ck_assert(!flag);
    json_decref(b);
    b = evd_dt_parse("{\"session_id\":\"eval_x_c_1\",\"terminal\":true}");
    ck_assert_int_eq(evd_request_wake(b, &sid, &flag, &err), EVD_OK);
    ck_assert_str_eq(sid, "eval_x_c_1");
    ck_assert(flag);
    json_decref(b);
    b = evd_dt_parse("{\"terminal\":1}");
    ck_assert_int_eq(evd_request_wake(b, &sid, &flag, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "terminal must be a boolean");
    json_decref(b);
}
END_TEST

START_TEST(sweep_request)
{
    struct evd_err err;
    json_t *b = evd_dt_parse("{\"scheduled_at\":null,\"scheduled_time\":\"2026-01-01T00:00:00Z\"}");
    ck_assert_int_eq(evd_request_sweep(b, &err), EVD_OK);
    json_decref(b);
    b = evd_dt_parse("{\"scheduled_at\":\"now\"}");
    ck_assert_int_eq(evd_request_sweep(b, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "scheduled_at must be an integer");
    json_decref(b);
    b = evd_dt_parse("{\"scheduled_time\":5}");
    ck_assert_int_eq(evd_request_sweep(b, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "scheduled_time must be a string");
    json_decref(b);
}
END_TEST

static const struct small_case INPUTS[] = {
    {"{}", NULL},
    {"{\"_caller_worker_id\":\"w\"}", NULL},
    {"{\"arguments\":null}", NULL},
    {"{\"evaluation_id\":null}", "evaluation_id must be a string"},
    {"{\"role\":\"judge\"}", "role must be one of control, treatment"},
    {"{\"output\":null}", NULL},
    {"{\"metrics\":[]}", "metrics must be an object"},
    {"{\"metrics\":{\"complete\":true}}", "metrics.root_session_id is required"},
    {"{\"metrics.totals.turns\":\"2\"}", "metrics.totals.turns must be an integer"},
    {"{\"metrics.totals.input_tokens\":null}", NULL},
    {"{\"metrics.totals.input_tokens\":-4}",
     "metrics.totals.input_tokens must be a non-negative integer"},
    {"{\"metrics.totals.cost_usd\":\"0.1\"}", "metrics.totals.cost_usd must be a number"},
    {"{\"metrics.totals.colour\":1}", "metrics.totals.colour is not a known field"},
    {"{\"metrics.extra\":1}", "metrics.extra is not a known field"},
    {"{\"metrics.traces\":null}", NULL},
    {"{\"metrics.traces\":{\"trace_count\":1}}", "metrics.traces.span_count is required"},
};

START_TEST(evaluator_input)
{
    json_t *body = evd_dt_parse("{\"evaluation_id\":\"eval_1\",\"run_id\":\"control-1\","
                                "\"role\":\"control\",\"session_id\":\"eval_1_c_1\","
                                "\"output\":\"OK\",\"arguments\":{\"expected\":\"OK\"}}");
    json_object_set_new(body, "metrics",
                        evd_dt_metrics("eval_1_c_1", true, 1, 0, 0, 10, 5, 0.01, 0));
    /* each case is a set of edits given as {"path": value} */
    json_t *edits = evd_dt_parse(INPUTS[_i].body);
    const char *key;
    json_t *v;
    json_object_foreach(edits, key, v)
    {
        char *text = json_dumps(v, JSON_ENCODE_ANY);
        evd_dt_set(body, key, text);
        free(text);
    }
    struct evd_evaluator_input in;
    struct evd_err err;
    enum evd_code rc = evd_request_evaluator_input(body, &in, &err);
    if (INPUTS[_i].message == NULL) {
        ck_assert_msg(rc == EVD_OK, "case %d: %s", _i, err.msg);
        ck_assert_str_eq(in.run_id, "control-1");
        ck_assert_int_eq(in.role, EVD_ROLE_CONTROL);
        ck_assert_ptr_eq(in.metrics, json_object_get(body, "metrics"));
    } else {
        ck_assert_int_eq(rc, EVD_EINVAL);
        ck_assert_str_eq(err.msg, INPUTS[_i].message);
    }
    json_decref(edits);
    json_decref(body);
}
END_TEST

START_TEST(evaluator_input_requires_its_members)
{
    static const char *const REQUIRED[] = {"evaluation_id", "run_id", "role",
                                           "session_id",    "output", "metrics"};
    for (size_t i = 0; i < sizeof(REQUIRED) / sizeof(REQUIRED[0]); i++) {
        json_t *body = evd_dt_parse("{\"evaluation_id\":\"e\",\"run_id\":\"r\",\"role\":"
                                    "\"treatment\",\"session_id\":\"s\",\"output\":1}");
        json_object_set_new(body, "metrics", evd_dt_metrics("s", false, 0, 0, 0, -1, -1, -1, -1));
        json_object_del(body, REQUIRED[i]);
        struct evd_evaluator_input in;
        struct evd_err err;
        char want[64];
        snprintf(want, sizeof(want), "%s is required", REQUIRED[i]);
        ck_assert_int_eq(evd_request_evaluator_input(body, &in, &err), EVD_EINVAL);
        ck_assert_str_eq(err.msg, want);
        json_decref(body);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_request");
    TCase *tc = tcase_create("start");
    tcase_add_loop_test(tc, start_rejects_with_the_contract_message, 0,
                        sizeof(REJECTS) / sizeof(REJECTS[0]));
    tcase_add_test(tc, start_rejects_a_body_that_is_not_an_object);
    tcase_add_test(tc, runs_bound_is_the_configured_maximum);
    tcase_add_test(tc, normalized_request_fills_every_default);
    tcase_add_test(tc, null_optional_members_read_as_absent);
    tcase_add_test(tc, system_prompt_comparison_is_accepted);
    tcase_add_test(tc, default_versus_disabled_system_prompt_is_accepted);
    tcase_add_test(tc, unknown_top_level_members_are_ignored);
    tcase_add_test(tc, concurrency_is_returned_beside_the_normalized_request);
    tcase_add_loop_test(tc, partial_limits_resolve_to_defaults, 0,
                        sizeof(LIMITS) / sizeof(LIMITS[0]));
    tcase_add_loop_test(tc, given_members_are_kept_normalized, 0, sizeof(KEEPS) / sizeof(KEEPS[0]));
    suite_add_tcase(s, tc);

    TCase *stored = tcase_create("stored");
    tcase_add_test(stored, stored_request_check);
    tcase_add_test(stored, view_reads_a_normalized_request);
    tcase_add_test(stored, rerun_copies_and_reverses);
    suite_add_tcase(s, stored);

    TCase *small = tcase_create("other_requests");
    tcase_add_loop_test(small, list_limit, 0, sizeof(LISTS) / sizeof(LISTS[0]));
    tcase_add_loop_test(small, evaluation_id_requests, 0, sizeof(ID_CASES) / sizeof(ID_CASES[0]));
    tcase_add_test(small, rerun_request);
    tcase_add_loop_test(small, rescore_body, 0, sizeof(RESCORES) / sizeof(RESCORES[0]));
    tcase_add_test(small, step_request);
    tcase_add_test(small, wake_request);
    tcase_add_test(small, sweep_request);
    tcase_add_loop_test(small, evaluator_input, 0, sizeof(INPUTS) / sizeof(INPUTS[0]));
    tcase_add_test(small, evaluator_input_requires_its_members);
    suite_add_tcase(s, small);
    return evd_test_run_suite(s);
}
