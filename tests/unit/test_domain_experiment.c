/*
 * Unit tests for domain/template.h and domain/experiment.h: placeholder rendering (spaces,
 * dots, non-string values, the whole-argument rule, text that is not a placeholder), the
 * normalized experiment request with its defaults, every validation message of the
 * contract (table-driven), the per-case checks and the plan size; the model dimension (its
 * normalized form, each arm's model and limits, and its refusals).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/experiment.h"
#include "domain/template.h"
#include "tests/support/testutil.h"

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    ck_assert_msg(v != NULL, "%s: %s", text, e.text);
    return v;
}

static const char CASE[] =
    "{\"id\":\"k1\",\"vars\":{\"q\":\"2+2?\",\"n\":3,\"user\":{\"name\":\"Ada\","
    "\"tags\":[1,2]},\"none\":null},\"expected\":{\"answer\":4},"
    "\"metadata\":{}}";

struct render {
    const char *tmpl;
    const char *want; /* NULL: refused with msg */
    const char *msg;
};

static const struct render RENDERS[] = {
    {"Question: {{q}}", "Question: 2+2?", NULL},
    {"{{ q }} and {{q}}", "2+2? and 2+2?", NULL},
    {"n={{n}} none={{none}}", "n=3 none=null", NULL},
    {"{{user.name}} {{user.tags}}", "Ada [1,2]", NULL},
    {"{{expected}} / {{expected.answer}}", "{\"answer\":4} / 4", NULL},
    {"{{}} {{ 1x }} {{q} {q}} {{a..b}} {", "{{}} {{ 1x }} {{q} {q}} {{a..b}} {", NULL},
    {"{{{q}}}", "{2+2?}", NULL},
    {"no placeholder", "no placeholder", NULL},
    {"{{missing}}", NULL, "case k1: template variable missing is not defined"},
    {"{{user.age}}", NULL, "case k1: template variable user.age is not defined"},
    {"{{q.x}}", NULL, "case k1: template variable q.x is not defined"},
};

START_TEST(placeholders_render)
{
    const struct render *t = &RENDERS[_i];
    json_t *c = parse(CASE);
    struct evd_buf out = {0};
    struct evd_err err = {0};
    enum evd_code rc = evd_template_render(t->tmpl, strlen(t->tmpl), c, &out, &err);
    if (t->want != NULL) {
        ck_assert_msg(rc == EVD_OK, "%s: %s", t->tmpl, err.msg);
        ck_assert_str_eq(out.data, t->want);
    } else {
        ck_assert_int_eq(rc, EVD_EINVAL);
        ck_assert_str_eq(err.msg, t->msg);
    }
    evd_buf_free(&out);
    json_decref(c);
}
END_TEST

START_TEST(a_whole_argument_placeholder_keeps_its_value)
{
    json_t *c = parse(CASE);
    json_t *args = parse("{\"expected\":\"{{expected}}\",\"n\":\"{{ n }}\",\"text\":\"got {{n}}\","
                         "\"list\":[\"{{user.tags}}\",7],\"{{q}}\":\"key stays\"}");
    json_t *out = NULL;
    struct evd_err err = {0};
    ck_assert_int_eq(evd_template_render_json(args, c, &out, &err), EVD_OK);
    json_t *want = parse("{\"expected\":{\"answer\":4},\"n\":3,\"text\":\"got 3\","
                         "\"list\":[[1,2],7],\"{{q}}\":\"key stays\"}");
    ck_assert(json_equal(out, want));
    ck_assert(evd_template_has_placeholder(args));
    ck_assert(!evd_template_has_placeholder(want));
    json_decref(want);
    json_decref(out);
    json_decref(args);
    json_decref(c);
}
END_TEST

static const char BASE[] =
    "{\"name\":\"qa\",\"dimension\":\"prompt\",\"model\":{\"model\":\"stub-model\",\"provider\":"
    "\"openai\"},\"control\":{\"label\":\"v1\",\"prompt\":\"Q: {{q}}\"},\"treatments\":[{\"label\":"
    "\"v2\",\"prompt\":\"Answer briefly. Q: {{q}}\"}],\"dataset_id\":\"ds_1\",\"evaluator\":{"
    "\"function_id\":\"eval::assert::normalized_text\",\"arguments\":{\"expected\":\"{{expected}}"
    "\"}}}";

static const struct evd_experiment_limits LIMITS = {100, 256};

/* BASE with member `key` set to the JSON `value` ("-" removes it). */
static json_t *with(const char *key, const char *value)
{
    json_t *b = parse(BASE);
    if (key == NULL)
        return b;
    if (strcmp(value, "-") == 0)
        json_object_del(b, key);
    else
        json_object_set_new(b, key, parse(value));
    return b;
}

START_TEST(normalized_request_has_its_defaults)
{
    json_t *b = with("treatments", "[{\"prompt\":\"A: {{q}}\"},{\"prompt\":\"B: {{q}}\"}]");
    json_t *n = NULL;
    const json_t *cases = (const json_t *)1;
    struct evd_err err = {0};
    ck_assert_msg(evd_experiment_request(b, &LIMITS, &n, &cases, &err) == EVD_OK, "%s", err.msg);
    ck_assert_ptr_null(cases);
    ck_assert_int_eq(json_integer_value(json_object_get(n, "repeats")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(n, "concurrency")), 4);
    json_t *an = json_object_get(n, "analysis");
    ck_assert(json_real_value(json_object_get(an, "alpha")) == 0.05);
    ck_assert(json_real_value(json_object_get(an, "min_effect")) == 0);
    ck_assert(json_is_null(json_object_get(an, "cluster_by")));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(n, "control"), "label")),
                     "v1");
    json_t *tr = json_object_get(n, "treatments");
    ck_assert_uint_eq(json_array_size(tr), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(tr, 0), "label")), "B");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(tr, 1), "label")), "C");
    ck_assert(json_is_null(json_object_get(json_array_get(tr, 1), "system_prompt")));
    ck_assert_str_eq(json_string_value(json_object_get(n, "dataset_id")), "ds_1");
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(n, "model"), "system_prompt_strategy")),
        "enrich");
    ck_assert_uint_eq(evd_experiment_arms(n), 3);

    /* The cell of arm 2 on a case: templates rendered, the evaluator's expected an object. */
    json_t *c = parse(CASE);
    json_t *v = NULL, *e = NULL;
    ck_assert_int_eq(evd_experiment_cell(n, c, 2, &v, &e, &err), EVD_OK);
    ck_assert_str_eq(json_string_value(json_object_get(v, "prompt")), "B: 2+2?");
    ck_assert_str_eq(json_string_value(json_object_get(v, "label")), "C");
    json_t *want = parse("{\"answer\":4}");
    ck_assert(json_equal(json_object_get(json_object_get(e, "arguments"), "expected"), want));
    json_decref(want);
    json_decref(v);
    json_decref(e);
    json_decref(c);
    json_decref(n);
    json_decref(b);
}
END_TEST

struct refusal {
    const char *key, *value, *msg;
};

static const struct refusal REFUSALS[] = {
    {"colour", "1", "colour is not a known field"},
    {"cases", "[{}]", "exactly one of dataset_id and cases must be given"},
    {"dataset_id", "-", "exactly one of dataset_id and cases must be given"},
    {"dataset_id", "\"\"", "dataset_id must be a non-empty string"},
    {"name", "\"\"", "name must be a non-empty string of at most 200 bytes"},
    {"treatments", "[]", "treatments must contain between 1 and 4 variants"},
    {"treatments",
     "[{\"prompt\":\"1\"},{\"prompt\":\"2\"},{\"prompt\":\"3\"},{\"prompt\":\"4\"},{\"prompt\":"
     "\"5\"}]",
     "treatments must contain between 1 and 4 variants"},
    {"treatments", "[3]", "treatments[0] must be an object"},
    {"treatments", "-", "treatments is required"},
    {"repeats", "0", "repeats must be between 1 and 100"},
    {"repeats", "101", "repeats must be between 1 and 100"},
    {"repeats", "\"3\"", "repeats must be an integer"},
    {"concurrency", "257", "concurrency must be between 1 and 256"},
    {"analysis", "{\"alpha\":0.5}", "analysis.alpha must be greater than 0 and less than 0.5"},
    {"analysis", "{\"alpha\":0}", "analysis.alpha must be greater than 0 and less than 0.5"},
    {"analysis", "{\"min_effect\":1.5}", "analysis.min_effect must be between 0 and 1"},
    {"analysis", "{\"power\":0.8}", "analysis.power is not a known field"},
    {"analysis", "{\"cluster_by\":\"a b\"}",
     "analysis.cluster_by must be a variable name (letters, digits and _, dots for nested "
     "objects)"},
    {"evaluator", "-", "an experiment needs an evaluator or a judge"},
    {"treatments", "[{\"label\":\"v2\",\"prompt\":\"Q: {{q}}\"}]",
     "prompt comparison requires different prompts"},
    {"treatments", "[{\"prompt\":\"x\",\"system_prompt\":\"be brief\"}]",
     "prompt comparison requires identical system prompts"},
    {"treatments", "[{\"prompt\":\"x\"},{\"prompt\":\" \"}]",
     "treatments[1].prompt cannot be empty"},
    {"treatments", "[{\"prompt\":\"x\"},{\"prompt\":\"x\"}]",
     "prompt comparison requires different prompts"},
    {"treatments", "[{\"label\":\"v1\",\"prompt\":\"x\"}]", "variant labels must be unique"},
    {"treatments", "[{\"label\":\"\",\"prompt\":\"x\"}]",
     "variant labels cannot be empty when supplied"},
    {"treatments", "[{\"prompt\":\"x\",\"colour\":1}]",
     "treatments[0].colour is not a known field"},
    {"model", "{\"model\":\"\"}", "model.model cannot be empty"},
};

START_TEST(refusals_have_the_contract_messages)
{
    const struct refusal *t = &REFUSALS[_i];
    json_t *b = with(t->key, t->value);
    json_t *n = NULL;
    const json_t *cases = NULL;
    struct evd_err err = {0};
    ck_assert_msg(evd_experiment_request(b, &LIMITS, &n, &cases, &err) == EVD_EINVAL,
                  "case %d accepted", _i);
    ck_assert_ptr_null(n);
    ck_assert_str_eq(err.msg, t->msg);
    json_decref(b);
}
END_TEST

START_TEST(system_prompt_experiments_compare_system_prompts)
{
    json_t *b = parse(BASE);
    json_object_set_new(b, "dimension", json_string("system_prompt"));
    json_object_set_new(b, "control", parse("{\"prompt\":\"{{q}}\",\"system_prompt\":\"terse\"}"));
    json_object_set_new(b, "treatments",
                        parse("[{\"prompt\":\"{{q}}\",\"system_prompt\":\"chatty\"},"
                              "{\"prompt\":\"{{q}}\",\"system_prompt\":\"chatty\"}]"));
    json_t *n = NULL;
    const json_t *cases = NULL;
    struct evd_err err = {0};
    ck_assert_int_eq(evd_experiment_request(b, &LIMITS, &n, &cases, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "system_prompt comparison requires different system prompts");
    json_array_set_new(json_object_get(b, "treatments"), 1,
                       parse("{\"prompt\":\"{{q}}\",\"system_prompt\":null}"));
    ck_assert_msg(evd_experiment_request(b, &LIMITS, &n, &cases, &err) == EVD_OK, "%s", err.msg);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(n, "control"), "label")),
                     "A");
    json_decref(n);
    json_decref(b);
}
END_TEST

START_TEST(cases_are_checked_against_templates_and_cluster_by)
{
    json_t *b = with("analysis", "{\"cluster_by\":\"user.name\"}");
    json_t *n = NULL;
    const json_t *cases = NULL;
    struct evd_err err = {0};
    ck_assert_int_eq(evd_experiment_request(b, &LIMITS, &n, &cases, &err), EVD_OK);
    json_t *good = parse(CASE);
    ck_assert_int_eq(evd_experiment_check_case(n, good, &err), EVD_OK);
    char *key = evd_experiment_cluster_key(n, good, &err);
    ck_assert_str_eq(key, "Ada");
    free(key);
    json_t *no_q = parse("{\"id\":\"k2\",\"vars\":{\"user\":{\"name\":\"B\"}},\"expected\":null,"
                         "\"metadata\":{}}");
    ck_assert_int_eq(evd_experiment_check_case(n, no_q, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "case k2: template variable q is not defined");
    json_t *no_user = parse("{\"id\":\"k3\",\"vars\":{\"q\":\"x\"},\"expected\":null,"
                            "\"metadata\":{}}");
    ck_assert_int_eq(evd_experiment_check_case(n, no_user, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "case k3: cluster_by variable user.name is not defined");
    /* {{expected}} of a case without one is null, which is defined. */
    json_t *k4 = parse("{\"id\":\"k4\",\"vars\":{\"q\":\"x\",\"user\":{\"name\":1}},"
                       "\"expected\":null,\"metadata\":{}}");
    ck_assert_int_eq(evd_experiment_check_case(n, k4, &err), EVD_OK);
    key = evd_experiment_cluster_key(n, k4, &err);
    ck_assert_str_eq(key, "1");
    free(key);
    json_decref(k4);

    ck_assert_int_eq(evd_experiment_check_size(n, 16666, 100000, &err), EVD_OK);
    ck_assert_int_eq(evd_experiment_check_size(n, 16667, 100000, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "an experiment may plan at most 100000 runs "
                              "(cases \u00d7 arms \u00d7 repeats = 100002)");
    json_decref(good);
    json_decref(no_q);
    json_decref(no_user);
    json_decref(n);
    json_decref(b);
}
END_TEST

/* ---- the model dimension ------------------------------------------------------------ */

static const char MODEL_BASE[] =
    "{\"name\":\"models\",\"dimension\":\"model\",\"prompt\":\"Q: {{q}}\",\"system_prompt\":"
    "\"Be brief about {{user.name}}.\",\"control\":{\"label\":\"mini\",\"model\":{\"model\":"
    "\"gpt-4.1-mini\",\"provider\":\"openai\"}},\"treatments\":[{\"label\":\"nano\",\"model\":{"
    "\"model\":\"gpt-4.1-nano\",\"provider\":\"openai\",\"options\":{\"temperature\":1,"
    "\"top_p\":0.5,\"reasoning_effort\":\"low\",\"max_output_tokens\":64}}}],\"dataset_id\":"
    "\"ds_1\",\"evaluator\":{\"function_id\":\"eval::assert::normalized_text\",\"arguments\":{"
    "\"expected\":\"{{expected}}\"}},\"limits\":{\"execution\":{\"max_turns\":3}}}";

/* MODEL_BASE with the member at dotted `path` set to the JSON `value` ("-" removes it);
 * "treatments.0" names an array element. */
static json_t *model_with(const char *path, const char *value)
{
    json_t *b = parse(MODEL_BASE);
    if (path == NULL)
        return b;
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", path);
    json_t *at = b;
    char *key = buf, *dot;
    while ((dot = strchr(key, '.')) != NULL) {
        *dot = '\0';
        at = json_is_array(at) ? json_array_get(at, (size_t)atoi(key)) : json_object_get(at, key);
        ck_assert_ptr_nonnull(at);
        key = dot + 1;
    }
    if (strcmp(value, "-") == 0)
        json_object_del(at, key);
    else if (json_is_array(at))
        json_array_set_new(at, (size_t)atoi(key), parse(value));
    else
        json_object_set_new(at, key, parse(value));
    return b;
}

START_TEST(a_model_experiment_keeps_a_model_an_arm)
{
    json_t *b = model_with(NULL, NULL);
    json_t *n = NULL;
    const json_t *cases = NULL;
    struct evd_err err = {0};
    ck_assert_msg(evd_experiment_request(b, &LIMITS, &n, &cases, &err) == EVD_OK, "%s", err.msg);
    /* The normalized form: shared texts, no shared model, each variant its model. */
    ck_assert_str_eq(json_string_value(json_object_get(n, "dimension")), "model");
    ck_assert_ptr_null(json_object_get(n, "model"));
    ck_assert_str_eq(json_string_value(json_object_get(n, "prompt")), "Q: {{q}}");
    ck_assert_str_eq(json_string_value(json_object_get(n, "system_prompt")),
                     "Be brief about {{user.name}}.");
    json_t *want = parse("{\"label\":\"mini\",\"model\":{\"model\":\"gpt-4.1-mini\","
                         "\"provider\":\"openai\",\"options\":{}}}");
    ck_assert(json_equal(json_object_get(n, "control"), want));
    json_decref(want);
    want = parse("[{\"label\":\"nano\",\"model\":{\"model\":\"gpt-4.1-nano\",\"provider\":"
                 "\"openai\",\"options\":{\"temperature\":1.0,\"top_p\":0.5,\"reasoning_effort\":"
                 "\"low\",\"max_output_tokens\":64}}}]");
    ck_assert(json_equal(json_object_get(n, "treatments"), want));
    json_decref(want);
    /* The shared members normalized by the seed's rules. */
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(json_object_get(n, "limits"), "execution"), "max_turns")),
                     3);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(n, "output"), "type")),
                     "text");
    ck_assert_uint_eq(evd_experiment_arms(n), 2);

    /* The harness's model of each arm, options mapped onto the seed's model object. */
    json_t *m = NULL;
    ck_assert_int_eq(evd_experiment_arm_model(n, 0, &m, &err), EVD_OK);
    want = parse("{\"model\":\"gpt-4.1-mini\",\"provider\":\"openai\","
                 "\"system_prompt_strategy\":\"enrich\"}");
    ck_assert(json_equal(m, want));
    json_decref(want);
    json_decref(m);
    ck_assert_int_eq(evd_experiment_arm_model(n, 1, &m, &err), EVD_OK);
    want = parse("{\"model\":\"gpt-4.1-nano\",\"provider\":\"openai\",\"system_prompt_strategy\":"
                 "\"enrich\",\"thinking_level\":\"low\",\"provider_options\":{\"openai\":"
                 "{\"temperature\":1.0,\"top_p\":0.5}}}");
    ck_assert(json_equal(m, want));
    json_decref(want);
    json_decref(m);
    ck_assert_int_eq(evd_experiment_arm_model(n, 2, &m, &err), EVD_EINVAL);
    /* Limits: the treatment's own output cap, the rest shared. */
    json_t *l0 = evd_experiment_arm_limits(n, 0), *l1 = evd_experiment_arm_limits(n, 1);
    ck_assert(json_equal(l0, json_object_get(n, "limits")));
    json_t *ex = json_object_get(l1, "execution");
    ck_assert_int_eq(json_integer_value(json_object_get(ex, "max_output_tokens_per_call")), 64);
    ck_assert_int_eq(json_integer_value(json_object_get(ex, "max_turns")), 3);
    json_decref(l0);
    json_decref(l1);

    /* A cell: the shared texts rendered, the arm's model and limits. */
    json_t *c = parse(CASE);
    json_t *v = NULL, *e = NULL;
    ck_assert_int_eq(evd_experiment_cell(n, c, 1, &v, &e, &err), EVD_OK);
    ck_assert_str_eq(json_string_value(json_object_get(v, "label")), "nano");
    ck_assert_str_eq(json_string_value(json_object_get(v, "prompt")), "Q: 2+2?");
    ck_assert_str_eq(json_string_value(json_object_get(v, "system_prompt")), "Be brief about Ada.");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(v, "model"), "model")),
                     "gpt-4.1-nano");
    ck_assert_int_eq(json_integer_value(
                         json_object_get(json_object_get(json_object_get(v, "limits"), "execution"),
                                         "max_output_tokens_per_call")),
                     64);
    json_decref(v);
    json_decref(e);
    ck_assert_int_eq(evd_experiment_check_case(n, c, &err), EVD_OK);
    json_t *no_user = parse("{\"id\":\"k3\",\"vars\":{\"q\":\"x\"},\"expected\":null,"
                            "\"metadata\":{}}");
    ck_assert_int_eq(evd_experiment_check_case(n, no_user, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "case k3: template variable user.name is not defined");
    json_decref(no_user);
    json_decref(c);

    /* The normalized request is a valid request again (a re-score revalidates it). */
    json_t *again = NULL;
    ck_assert_msg(evd_experiment_request(n, &LIMITS, &again, &cases, &err) == EVD_OK, "%s",
                  err.msg);
    ck_assert(json_equal(json_object_get(again, "treatments"), json_object_get(n, "treatments")));
    json_decref(again);
    json_decref(n);
    json_decref(b);
}
END_TEST

START_TEST(model_variants_differ_in_options_alone_and_labels_default)
{
    json_t *b = parse(MODEL_BASE);
    json_object_set_new(b, "control",
                        parse("{\"model\":{\"model\":\"gpt-4.1-mini\","
                              "\"provider\":\"openai\"}}"));
    json_object_set_new(b, "treatments",
                        parse("[{\"model\":{\"model\":\"gpt-4.1-mini\",\"provider\":\"openai\","
                              "\"options\":{\"temperature\":0}}},{\"model\":{\"model\":"
                              "\"gpt-4.1-mini\",\"provider\":\"other\"}}]"));
    json_object_del(b, "system_prompt");
    json_t *n = NULL;
    const json_t *cases = NULL;
    struct evd_err err = {0};
    ck_assert_msg(evd_experiment_request(b, &LIMITS, &n, &cases, &err) == EVD_OK, "%s", err.msg);
    ck_assert(json_is_null(json_object_get(n, "system_prompt")));
    ck_assert_str_eq(evd_experiment_arm_label(n, 0), "A");
    ck_assert_str_eq(evd_experiment_arm_label(n, 1), "B");
    ck_assert_str_eq(evd_experiment_arm_label(n, 2), "C");
    json_decref(n);
    json_decref(b);
}
END_TEST

static const struct refusal MODEL_REFUSALS[] = {
    {"model", "{\"model\":\"stub-model\"}",
     "model is not allowed with dimension model (each variant has its own: control.model, "
     "treatments[i].model)"},
    {"prompt", "-", "prompt is required"},
    {"prompt", "3", "prompt must be a string"},
    {"prompt", "\" \"", "prompt cannot be empty"},
    {"system_prompt", "[]", "system_prompt must be a string"},
    {"control", "-", "control is required"},
    {"control.model", "-", "control.model is required"},
    {"control.model", "\"gpt-4.1-mini\"", "control.model must be an object"},
    {"control.model.model", "-", "control.model.model is required"},
    {"control.model.model", "\"\"", "control.model.model cannot be empty"},
    {"control.model.provider", "-", "control.model.provider is required"},
    {"control.model.provider", "\" \"", "control.model.provider cannot be empty"},
    {"control.model.thinking_level", "\"low\"",
     "control.model.thinking_level is not a known field"},
    {"control.prompt", "\"x\"",
     "control.prompt is not allowed with dimension model (it is shared: give the top-level "
     "prompt)"},
    {"treatments.0.prompt", "\"x\"",
     "treatments[0].prompt is not allowed with dimension model (it is shared: give the "
     "top-level prompt)"},
    {"treatments.0.system_prompt", "null",
     "treatments[0].system_prompt is not allowed with dimension model (it is shared: give the "
     "top-level system_prompt)"},
    {"treatments.0.colour", "1", "treatments[0].colour is not a known field"},
    {"treatments.0.label", "\"mini\"", "variant labels must be unique"},
    {"treatments.0.label", "\"\"", "variant labels cannot be empty when supplied"},
    {"treatments.0.model.options", "3", "treatments[0].model.options must be an object"},
    {"treatments.0.model.options.temperature", "2.5",
     "treatments[0].model.options.temperature must be between 0 and 2"},
    {"treatments.0.model.options.temperature", "\"hot\"",
     "treatments[0].model.options.temperature must be a number"},
    {"treatments.0.model.options.top_p", "0",
     "treatments[0].model.options.top_p must be greater than 0 and at most 1"},
    {"treatments.0.model.options.reasoning_effort", "\"max\"",
     "treatments[0].model.options.reasoning_effort must be one of minimal, low, medium, high, "
     "xhigh"},
    {"treatments.0.model.options.max_output_tokens", "0",
     "treatments[0].model.options.max_output_tokens must be greater than zero"},
    {"treatments.0.model.options.seed", "1",
     "treatments[0].model.options.seed is not a known field"},
    {"treatments.0.model", "{\"model\":\"gpt-4.1-mini\",\"provider\":\"openai\",\"options\":{}}",
     "treatments[0]: differs from the control in nothing"},
    {"treatments",
     "[{\"model\":{\"model\":\"a\",\"provider\":\"openai\"}},{\"model\":{\"model\":\"b\","
     "\"provider\":\"openai\"}},{\"model\":{\"model\":\"a\",\"provider\":\"openai\","
     "\"options\":null}}]",
     "treatments[2]: differs from treatments[0] in nothing"},
    {"treatments",
     "[{\"model\":{\"model\":\"a\",\"provider\":\"openai\",\"options\":{\"temperature\":1}}},"
     "{\"model\":{\"model\":\"a\",\"provider\":\"openai\",\"options\":{\"temperature\":1.0}}}]",
     "treatments[1]: differs from treatments[0] in nothing"},
    {"limits", "{\"execution\":{\"max_turns\":0}}",
     "limits.execution.max_turns must be greater than zero"},
    {"evaluator", "{\"function_id\":\"\"}", "evaluator.function_id cannot be empty"},
    {"dimension", "\"tone\"", "dimension must be one of prompt, system_prompt, model"},
};

START_TEST(model_refusals_name_the_field)
{
    const struct refusal *t = &MODEL_REFUSALS[_i];
    json_t *b = model_with(t->key, t->value);
    json_t *n = NULL;
    const json_t *cases = NULL;
    struct evd_err err = {0};
    ck_assert_msg(evd_experiment_request(b, &LIMITS, &n, &cases, &err) == EVD_EINVAL,
                  "case %d accepted", _i);
    ck_assert_ptr_null(n);
    ck_assert_str_eq(err.msg, t->msg);
    json_decref(b);
}
END_TEST

START_TEST(other_dimensions_keep_their_prompts_in_the_variants)
{
    static const char *const keys[] = {"prompt", "system_prompt"};
    for (size_t i = 0; i < 2; i++) {
        json_t *b = with(keys[i], "\"shared\"");
        json_t *n = NULL;
        const json_t *cases = NULL;
        struct evd_err err = {0};
        ck_assert_int_eq(evd_experiment_request(b, &LIMITS, &n, &cases, &err), EVD_EINVAL);
        char want[160];
        snprintf(want, sizeof(want),
                 "%s is only allowed with dimension model (the variants hold the prompts)",
                 keys[i]);
        ck_assert_str_eq(err.msg, want);
        json_decref(b);
    }
    /* The shared model of a prompt experiment is every arm's. */
    json_t *b = with(NULL, NULL), *n = NULL, *m = NULL;
    const json_t *cases = NULL;
    struct evd_err err = {0};
    ck_assert_int_eq(evd_experiment_request(b, &LIMITS, &n, &cases, &err), EVD_OK);
    ck_assert_int_eq(evd_experiment_arm_model(n, 1, &m, &err), EVD_OK);
    ck_assert_ptr_eq(m, json_object_get(n, "model"));
    json_decref(m);
    json_t *l = evd_experiment_arm_limits(n, 1);
    ck_assert_ptr_eq(l, json_object_get(n, "limits"));
    json_decref(l);
    json_t *c = parse(CASE), *v = NULL, *e = NULL;
    ck_assert_int_eq(evd_experiment_cell(n, c, 1, &v, &e, &err), EVD_OK);
    ck_assert_ptr_null(json_object_get(v, "model"));
    ck_assert_ptr_null(json_object_get(v, "limits"));
    json_decref(v);
    json_decref(e);
    json_decref(c);
    json_decref(n);
    json_decref(b);
}
END_TEST

/*
 * A conversation case (agent-cases.md): its messages rendered per case; an empty prompt
 * sends them as they are, so they must end with the user; blank text is still refused.
 */
START_TEST(an_empty_prompt_sends_the_case_conversation)
{
    json_t *b = with("control", "{\"label\":\"bare\",\"prompt\":\"\"}"), *n = NULL;
    const json_t *cases = NULL;
    struct evd_err err = {0};
    ck_assert_msg(evd_experiment_request(b, &LIMITS, &n, &cases, &err) == EVD_OK, "%s", err.msg);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(n, "control"), "prompt")),
                     "");
    json_t *c = parse("{\"id\":\"q3\",\"vars\":{\"q\":\"2+2\"},\"expected\":null,\"metadata\":{},"
                      "\"messages\":[{\"role\":\"user\",\"content\":\"What is {{q}}?\"},"
                      "{\"role\":\"assistant\",\"content\":\"4\"},{\"role\":\"user\","
                      "\"content\":\"Sure?\"}],\"tool_results\":{\"search\":1}}");
    /* its tool_results name a declared tool, or the case is refused */
    ck_assert_int_eq(evd_experiment_check_case(n, c, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "case q3: tool_results.search names no declared tool");
    json_object_set_new(n, "tools",
                        parse("[{\"name\":\"search\",\"parameters\":{\"type\":\"object\"}}]"));
    ck_assert_int_eq(evd_experiment_check_case(n, c, &err), EVD_OK);
    json_t *v = NULL, *e = NULL;
    ck_assert_int_eq(evd_experiment_cell(n, c, 0, &v, &e, &err), EVD_OK);
    json_t *want = parse("[{\"role\":\"user\",\"content\":\"What is 2+2?\"},{\"role\":"
                         "\"assistant\",\"content\":\"4\"},{\"role\":\"user\",\"content\":"
                         "\"Sure?\"}]");
    ck_assert(json_equal(json_object_get(v, "messages"), want));
    ck_assert_str_eq(json_string_value(json_object_get(v, "prompt")), "");
    ck_assert_ptr_eq(json_object_get(v, "tool_results"), json_object_get(c, "tool_results"));
    json_decref(want);
    json_decref(v);
    json_decref(e);
    /* the treatment's prompt follows the same conversation */
    ck_assert_int_eq(evd_experiment_cell(n, c, 1, &v, &e, &err), EVD_OK);
    ck_assert_str_eq(json_string_value(json_object_get(v, "prompt")), "Answer briefly. Q: 2+2");
    ck_assert_uint_eq(json_array_size(json_object_get(v, "messages")), 3);
    json_decref(v);
    json_decref(e);
    /* ending with the assistant, or no conversation at all */
    json_array_remove(json_object_get(c, "messages"), 2);
    ck_assert_int_eq(evd_experiment_check_case(n, c, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "case q3: messages must end with a user message when the prompt is "
                              "empty");
    json_object_del(c, "messages");
    ck_assert_int_eq(evd_experiment_check_case(n, c, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "case q3: messages must end with a user message when the prompt is "
                              "empty");
    /* a message's template is checked like a prompt's */
    json_object_set_new(c, "messages",
                        parse("[{\"role\":\"user\",\"content\":\"{{nope}}\"}]"));
    ck_assert_int_eq(evd_experiment_check_case(n, c, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "case q3: template variable nope is not defined");
    json_decref(c);
    json_decref(n);
    json_decref(b);
    /* blank is not empty; two empty prompts do not differ */
    b = with("control", "{\"prompt\":\"  \"}");
    ck_assert_int_eq(evd_experiment_request(b, &LIMITS, &n, &cases, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "control.prompt cannot be empty");
    json_decref(b);
    b = with("treatments", "[{\"prompt\":\"\"},{\"prompt\":\"\"}]");
    ck_assert_int_eq(evd_experiment_request(b, &LIMITS, &n, &cases, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "prompt comparison requires different prompts");
    json_decref(b);
    /* the model dimension's shared prompt may be empty too */
    b = model_with("prompt", "\"\"");
    ck_assert_msg(evd_experiment_request(b, &LIMITS, &n, &cases, &err) == EVD_OK, "%s", err.msg);
    ck_assert_str_eq(json_string_value(json_object_get(n, "prompt")), "");
    json_decref(n);
    json_decref(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_experiment");
    TCase *tc = tcase_create("experiment");
    tcase_add_loop_test(tc, placeholders_render, 0, sizeof(RENDERS) / sizeof(RENDERS[0]));
    tcase_add_test(tc, a_whole_argument_placeholder_keeps_its_value);
    tcase_add_test(tc, normalized_request_has_its_defaults);
    tcase_add_loop_test(tc, refusals_have_the_contract_messages, 0,
                        sizeof(REFUSALS) / sizeof(REFUSALS[0]));
    tcase_add_test(tc, system_prompt_experiments_compare_system_prompts);
    tcase_add_test(tc, cases_are_checked_against_templates_and_cluster_by);
    tcase_add_test(tc, a_model_experiment_keeps_a_model_an_arm);
    tcase_add_test(tc, model_variants_differ_in_options_alone_and_labels_default);
    tcase_add_loop_test(tc, model_refusals_name_the_field, 0,
                        sizeof(MODEL_REFUSALS) / sizeof(MODEL_REFUSALS[0]));
    tcase_add_test(tc, other_dimensions_keep_their_prompts_in_the_variants);
    tcase_add_test(tc, an_empty_prompt_sends_the_case_conversation);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
