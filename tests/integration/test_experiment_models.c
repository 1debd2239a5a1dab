/*
 * The model dimension of experiments (../shared/spec/agent-cases.md, "Model variants";
 * docs/experiments.md, "The model dimension"): the real evald and evald-stub over loopback
 * against a throwaway PostgreSQL per test. The script below replaces the fixture's: the
 * stub answers by the model asked, so each arm's runs show which model they reached.
 *
 * gpt-4.1-mini (the control; $0.40 / $1.60 a million input / output tokens in
 * harness/prices.json) answers "yes" with 10 + 2 tokens: 7.2 millionths of a dollar a run.
 * gpt-4.1-nano (the treatment; $0.10 / $0.40) answers "no" with 10 + 4 tokens: 2.6
 * millionths. Every case expects "yes": the control passes, the treatment misses.
 */
#define _GNU_SOURCE /* asprintf */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/experiments_fixtures.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static const char SCRIPT[] = "{\"rules\":["
                             "{\"when\":{\"model\":\"gpt-4.1-mini\"},\"reply\":{\"text\":\"yes\"},"
                             "\"usage\":{\"input_tokens\":10,\"output_tokens\":2}},"
                             "{\"when\":{\"model\":\"gpt-4.1-nano\"},\"reply\":{\"text\":\"no\"},"
                             "\"usage\":{\"input_tokens\":10,\"output_tokens\":4}}"
                             "]}";

#define MINI_RUN_USD (10 * 0.4e-6 + 2 * 1.6e-6)
#define NANO_RUN_USD (10 * 0.1e-6 + 4 * 0.4e-6)

#define MINI "{\"model\":\"gpt-4.1-mini\",\"provider\":\"openai\"}"
#define NANO_OPTIONS                                                                               \
    "{\"temperature\":0.2,\"top_p\":0.9,\"reasoning_effort\":\"low\",\"max_output_tokens\":32}"
#define NANO "{\"model\":\"gpt-4.1-nano\",\"provider\":\"openai\",\"options\":" NANO_OPTIONS "}"

/* A model experiment over the five fixture cases; `control`, `treatments` and `more`
 * (extra members, or "") go in as they are. */
static char *body_of(const char *control, const char *treatments, unsigned repeats,
                     const char *more)
{
    return xt_printf("{\"name\":\"models\",\"dimension\":\"model\","
                     "\"prompt\":\"{{tag}}: {{question}}\","
                     "\"system_prompt\":\"Answer yes or no.\","
                     "\"control\":%s,\"treatments\":%s," EXACT ",\"repeats\":%u,"
                     "\"concurrency\":2%s%s,\"cases\":" FIVE_CASES "}",
                     control, treatments, repeats, more[0] ? "," : "", more);
}

static void use_script(void)
{
    ck_assert_int_eq(evd_t_stub_script(&xt_stub, SCRIPT), 200);
    ck_assert_int_eq(evd_t_stub_reset(&xt_stub), 200);
}

/* The body of a stub request log entry as an object (new reference). */
static json_t *request_body(const json_t *req)
{
    const json_t *b = json_object_get(req, "body");
    if (json_is_string(b))
        return json_loads(json_string_value(b), 0, NULL);
    return json_incref((json_t *)b);
}

START_TEST(each_arm_reaches_its_model_and_costs_its_price)
{
    use_script();
    char *body = body_of("{\"label\":\"mini\",\"model\":" MINI "}",
                         "[{\"label\":\"nano\",\"model\":" NANO "}]", 2, "");
    char *id = xt_start(body);
    json_t *doc = xt_wait_done(id, 60000);
    ASSERT_STR(doc, "status", "completed");
    /* The stored request keeps a model an arm and the shared texts. */
    ASSERT_STR(doc, "request.dimension", "model");
    ck_assert_ptr_null(xt_at(doc, "request.model"));
    ASSERT_STR(doc, "request.prompt", "{{tag}}: {{question}}");
    ASSERT_STR(doc, "request.control.model.model", "gpt-4.1-mini");
    ASSERT_STR(doc, "request.treatments.0.model.model", "gpt-4.1-nano");
    ASSERT_NEAR(doc, "request.treatments.0.model.options.temperature", 0.2);
    /* The verdict: the control's model always passes, the treatment's never. */
    ASSERT_NEAR(doc, "arms.0.pass_rate", 1.0);
    ASSERT_NEAR(doc, "arms.1.pass_rate", 0.0);
    ASSERT_NEAR(doc, "comparisons.0.pass_rate.delta", -1.0);
    ASSERT_STR(doc, "comparisons.0.verdict", "worse");
    ASSERT_STR(doc, "comparisons.0.label", "nano");
    /* Each arm's tokens and cost are its own model's, at its own price. */
    ASSERT_NEAR(doc, "arms.0.medians.output_tokens", 2);
    ASSERT_NEAR(doc, "arms.1.medians.output_tokens", 4);
    ASSERT_NEAR(doc, "arms.0.medians.cost_usd", MINI_RUN_USD);
    ASSERT_NEAR(doc, "arms.1.medians.cost_usd", NANO_RUN_USD);
    ASSERT_INT(doc, "spend.calls", 20);
    ASSERT_NEAR(doc, "spend.cost_usd", 10 * MINI_RUN_USD + 10 * NANO_RUN_USD);

    /* The stub saw ten calls of each model, with the shared texts; only the treatment's
     * carry its options (as the OpenAI Responses API takes them). */
    json_t *log = evd_t_stub_requests(&xt_stub, 0);
    json_t *reqs = json_object_get(log, "requests");
    int mini = 0, nano = 0;
    size_t i;
    json_t *req;
    json_array_foreach(reqs, i, req)
    {
        json_t *b = request_body(req);
        ck_assert_ptr_nonnull(b);
        const char *model = json_string_value(json_object_get(b, "model"));
        ck_assert_ptr_nonnull(model);
        char *text = json_dumps(b, JSON_COMPACT);
        ck_assert_msg(strstr(text, ": q") != NULL && strstr(text, "Answer yes or no.") != NULL,
                      "%s", text);
        if (strcmp(model, "gpt-4.1-mini") == 0) {
            mini++;
            ck_assert_ptr_null(json_object_get(b, "temperature"));
            ck_assert_ptr_null(json_object_get(b, "top_p"));
            ck_assert_ptr_null(json_object_get(b, "reasoning"));
        } else {
            ck_assert_str_eq(model, "gpt-4.1-nano");
            nano++;
            ck_assert(json_number_value(json_object_get(b, "temperature")) == 0.2);
            ck_assert(json_number_value(json_object_get(b, "top_p")) == 0.9);
            ck_assert_str_eq(
                json_string_value(json_object_get(json_object_get(b, "reasoning"), "effort")),
                "low");
            ck_assert_int_eq(json_integer_value(json_object_get(b, "max_output_tokens")), 32);
        }
        free(text);
        json_decref(b);
    }
    ck_assert_int_eq(mini, 10);
    ck_assert_int_eq(nano, 10);
    json_decref(log);
    json_decref(doc);
    free(id);
    free(body);
}
END_TEST

START_TEST(a_plan_prices_each_arm_at_its_model)
{
    use_script();
    /* Five cases, one repeat: the control may write 8192 tokens a call at $1.60 a million,
     * the treatment 32 at $0.40. Without a pilot the estimate is the input's cost alone. */
    char *body = body_of("{\"model\":" MINI "}", "[{\"model\":" NANO "}]", 1, "");
    long st = 0;
    json_t *plan = xt_call("POST", "/v1/experiments/plan", body, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_INT(plan, "runs", 10);
    ASSERT_INT(plan, "tokens.output_max", 5 * 8192 + 5 * 32);
    double input = json_number_value(xt_at(plan, "tokens.input_estimate"));
    /* The shared prompt is half of the input on each arm. */
    ASSERT_NEAR(plan, "cost_usd.estimate", input / 2 * 0.4e-6 + input / 2 * 0.1e-6);
    ASSERT_NEAR(plan, "cost_usd.max",
                input / 2 * 0.4e-6 + input / 2 * 0.1e-6 + 5 * 8192 * 1.6e-6 + 5 * 32 * 0.4e-6);
    json_decref(plan);
    ck_assert_int_eq(xt_count_rows("experiments"), 0);
    free(body);

    /* A treatment the price table does not know: the plan has no cost. */
    body = body_of("{\"model\":" MINI "}",
                   "[{\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"}}]", 1, "");
    plan = xt_call("POST", "/v1/experiments/plan", body, &st);
    ck_assert_int_eq(st, 200);
    ASSERT_NULL(plan, "cost_usd");
    json_decref(plan);
    free(body);

    /* A budget over both priced arms reserves what the dearer arm's call may write. */
    body = body_of("{\"model\":" MINI "}", "[{\"model\":" NANO "}]", 1,
                   "\"budget\":{\"max_cost_usd\":1}");
    char *id = xt_start(body);
    json_t *doc = xt_wait_done(id, 60000);
    ASSERT_STR(doc, "status", "completed");
    ASSERT_NEAR(doc, "spend.cost_usd", 5 * MINI_RUN_USD + 5 * NANO_RUN_USD);
    json_decref(doc);
    free(id);
    free(body);
}
END_TEST

/* A start that must be refused with `msg` (the whole detail), writing nothing. */
static void refused(const char *body, const char *msg)
{
    long st = 0;
    json_t *r = xt_call("POST", "/v1/experiments", body, &st);
    ck_assert_msg(st == 400, "status %ld for %s", st, body);
    const char *detail = json_string_value(json_object_get(r, "detail"));
    ck_assert_msg(detail != NULL && strcmp(detail, msg) == 0, "detail %s, want %s",
                  detail ? detail : "(none)", msg);
    json_decref(r);
    ck_assert_int_eq(xt_count_rows("experiments"), 0);
    ck_assert_int_eq(xt_count_rows("datasets"), 0);
}

START_TEST(every_refusal_writes_nothing)
{
    use_script();
    char *b;
#define REFUSE(control, treatments, more, msg)                                                     \
    do {                                                                                           \
        b = body_of(control, treatments, 1, more);                                                 \
        refused(b, msg);                                                                           \
        free(b);                                                                                   \
    } while (0)
    const char *mini = "{\"model\":" MINI "}";
    REFUSE(mini, "[{\"model\":" MINI "}]", "",
           "treatments[0]: differs from the control in nothing");
    REFUSE(mini, "[{\"model\":" NANO "},{\"model\":" NANO "}]", "",
           "treatments[1]: differs from treatments[0] in nothing");
    REFUSE("{\"label\":\"a\"}", "[{\"model\":" NANO "}]", "", "control.model is required");
    REFUSE(mini, "[{\"model\":{\"model\":\"gpt-4.1-nano\"}}]", "",
           "treatments[0].model.provider is required");
    REFUSE(mini, "[{\"model\":{\"model\":\" \",\"provider\":\"openai\"}}]", "",
           "treatments[0].model.model cannot be empty");
    REFUSE(mini, "[{\"model\":" NANO ",\"prompt\":\"other\"}]", "",
           "treatments[0].prompt is not allowed with dimension model (it is shared: give the "
           "top-level prompt)");
    REFUSE(mini,
           "[{\"model\":{\"model\":\"gpt-4.1-nano\",\"provider\":\"openai\",\"options\":"
           "{\"temperature\":3}}}]",
           "", "treatments[0].model.options.temperature must be between 0 and 2");
    REFUSE(mini,
           "[{\"model\":{\"model\":\"gpt-4.1-nano\",\"provider\":\"openai\",\"options\":"
           "{\"reasoning\":\"low\"}}}]",
           "", "treatments[0].model.options.reasoning is not a known field");
    REFUSE(mini, "[{\"model\":" NANO "}]", "\"model\":" MINI,
           "model is not allowed with dimension model (each variant has its own: control.model, "
           "treatments[i].model)");
    /* A provider evald does not have, found when the models are resolved. */
    REFUSE(mini, "[{\"model\":{\"model\":\"gpt-4.1-nano\",\"provider\":\"nowhere\"}}]", "",
           "treatments[0].model.provider \"nowhere\" is not a configured provider (configured: "
           "openai, openai-codex, anthropic)");
    /* A cost cap needs every arm's price. */
    REFUSE(mini, "[{\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"}}]",
           "\"budget\":{\"max_cost_usd\":1}",
           "budget.max_cost_usd needs a price for model stub-model");
    REFUSE("{\"model\":{\"model\":\"stub-model\",\"provider\":\"openai\"}}",
           "[{\"model\":" NANO "}]", "\"budget\":{\"max_cost_usd\":1}",
           "budget.max_cost_usd needs a price for model stub-model");
#undef REFUSE
    /* No prompt at all. */
    b = body_of(mini, "[{\"model\":" NANO "}]", 1, "");
    static const char shared[] = "\"prompt\":\"{{tag}}: {{question}}\",";
    char *at = strstr(b, shared);
    ck_assert_ptr_nonnull(at);
    memmove(at, at + strlen(shared), strlen(at + strlen(shared)) + 1);
    refused(b, "prompt is required");
    free(b);
    /* The seed's evaluations keep their same-model rule: nothing of this reaches them. */
    long st = 0;
    json_t *r = xt_call("POST", "/v1/evaluations",
                        "{\"dimension\":\"model\"," MODEL ",\"control\":{\"prompt\":\"a\"},"
                        "\"treatment\":{\"prompt\":\"b\"}}",
                        &st);
    ck_assert_int_eq(st, 400);
    ck_assert_str_eq(json_string_value(json_object_get(r, "detail")),
                     "dimension must be one of prompt, system_prompt");
    json_decref(r);
    json_t *stats = evd_t_stub_stats(&xt_stub);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "requests")), 0);
    json_decref(stats);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("experiment_models");
    TCase *tc = tcase_create("experiment_models");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, xt_setup, xt_teardown);
    tcase_add_test(tc, each_arm_reaches_its_model_and_costs_its_price);
    tcase_add_test(tc, a_plan_prices_each_arm_at_its_model);
    tcase_add_test(tc, every_refusal_writes_nothing);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
