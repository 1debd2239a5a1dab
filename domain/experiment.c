/*
 * Experiment start requests; see experiment.h. The seed's validation (domain/request.h)
 * is reused as it is, once per treatment against the control, so that an experiment's
 * model, evaluator, limits, function policy and output contract obey exactly the rules
 * of an evaluation's.
 */
#include "domain/experiment.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"
#include "domain/dataset.h"
#include "domain/fields.h"
#include "domain/judge.h"
#include "domain/request.h"
#include "domain/template.h"

static const char *const KNOWN[] = {"name",       "dimension",   "model",    "control",
                                    "treatments", "dataset_id",  "cases",    "evaluator",
                                    "repeats",    "concurrency", "limits",   "functions",
                                    "output",     "metadata",    "analysis", "stopping",
                                    "budget",     "plan",        "judge",    NULL};

/* Members of the seed's start request that an experiment passes through unchanged. */
static const char *const SHARED[] = {"dimension", "model",  "control",  "evaluator", "limits",
                                     "functions", "output", "metadata", NULL};

static bool present(const json_t *v)
{
    return v != NULL && !json_is_null(v);
}

/* Reads an optional integer member in [1, max] with the contract's message. */
static enum evd_code bounded(const json_t *body, const char *key, uint32_t dflt, uint32_t max,
                             uint32_t *out, struct evd_err *err)
{
    json_t *v = json_object_get(body, key);
    *out = dflt;
    if (!present(v))
        return EVD_OK;
    if (!json_is_integer(v))
        return evd_err_set(err, EVD_EINVAL, "%s must be an integer", key);
    json_int_t n = json_integer_value(v);
    if (n < 1 || n > (json_int_t)max)
        return evd_err_set(err, EVD_EINVAL, "%s must be between 1 and %u", key, max);
    *out = (uint32_t)n;
    return EVD_OK;
}

/* analysis {alpha, min_effect, cluster_by} with defaults; *out a new reference. */
static enum evd_code analysis(const json_t *a, json_t **out, struct evd_err *err)
{
    static const char *const known[] = {"alpha", "min_effect", "cluster_by", "verdict_by",
                                        NULL};
    *out = NULL;
    double alpha = EVD_EXPERIMENT_DEFAULT_ALPHA, min_effect = 0;
    const char *cluster_by = NULL;
    if (present(a)) {
        json_t *v;
        enum evd_code rc;
        if (!json_is_object(a))
            return evd_err_set(err, EVD_EINVAL, "analysis must be an object");
        if ((rc = evd_fields_only(a, "analysis", known, err)) != EVD_OK)
            return rc;
        if ((rc = evd_fields_get(a, "analysis", "alpha", EVD_F_NUMBER | EVD_F_NULLABLE, &v, err)) !=
            EVD_OK)
            return rc;
        if (v != NULL) {
            alpha = json_number_value(v);
            if (!(alpha > 0 && alpha < 0.5))
                return evd_err_set(err, EVD_EINVAL,
                                   "analysis.alpha must be greater than 0 and less than 0.5");
        }
        if ((rc = evd_fields_get(a, "analysis", "min_effect", EVD_F_NUMBER | EVD_F_NULLABLE, &v,
                                 err)) != EVD_OK)
            return rc;
        if (v != NULL) {
            min_effect = json_number_value(v);
            if (!(min_effect >= 0 && min_effect <= 1))
                return evd_err_set(err, EVD_EINVAL, "analysis.min_effect must be between 0 and 1");
        }
        if ((rc = evd_fields_get(a, "analysis", "cluster_by", EVD_F_STRING | EVD_F_NULLABLE, &v,
                                 err)) != EVD_OK)
            return rc;
        if (v != NULL) {
            cluster_by = json_string_value(v);
            if (!evd_template_is_name(cluster_by, json_string_length(v)))
                return evd_err_set(err, EVD_EINVAL,
                                   "analysis.cluster_by must be a variable name (letters, "
                                   "digits and _, dots for nested objects)");
        }
    }
    const char *verdict_by = NULL;
    if (present(a)) {
        json_t *v;
        enum evd_code rc = evd_fields_get(a, "analysis", "verdict_by",
                                          EVD_F_STRING | EVD_F_NULLABLE, &v, err);
        if (rc != EVD_OK)
            return rc;
        if (v != NULL) {
            verdict_by = json_string_value(v);
            if (strcmp(verdict_by, "evaluator") != 0 && strcmp(verdict_by, "judge") != 0)
                return evd_err_set(err, EVD_EINVAL,
                                   "analysis.verdict_by must be evaluator or judge");
        }
    }
    /* verdict_by stays absent here when not given: the request's end resolves it. */
    *out = json_pack("{s:f, s:f, s:s?, s:s?}", "alpha", alpha, "min_effect", min_effect,
                     "cluster_by", cluster_by, "verdict_by", verdict_by);
    return *out != NULL ? EVD_OK : evd_err_set(err, EVD_ENOMEM, "out of memory");
}

/* Rewrites a seed message about "treatment…" to name treatments[i]. */
static void rename_treatment(struct evd_err *err, size_t i)
{
    if (err == NULL || strncmp(err->msg, "treatment", 9) != 0 ||
        (err->msg[9] != '.' && err->msg[9] != ' '))
        return;
    char msg[EVD_ERR_MSG_MAX];
    snprintf(msg, sizeof(msg), "treatments[%zu]%s", i, err->msg + 9);
    snprintf(err->msg, sizeof(err->msg), "%s", msg);
}

/* The seed's normalized request of the control against treatment t (new reference). */
static enum evd_code seed_pair(const json_t *body, const json_t *t, uint32_t repeats, size_t i,
                               json_t **normalized, struct evd_err *err)
{
    *normalized = NULL;
    json_t *pair = json_object();
    if (pair == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    int bad = 0;
    for (const char *const *k = SHARED; *k != NULL; k++) {
        json_t *v = json_object_get(body, *k);
        if (v != NULL)
            bad |= json_object_set(pair, *k, v);
    }
    bad |= json_object_set(pair, "treatment", (json_t *)t);
    bad |= json_object_set_new(pair, "runs", json_integer(repeats));
    if (bad) {
        json_decref(pair);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    enum evd_code rc = evd_request_start(pair, repeats, normalized, NULL, err);
    json_decref(pair);
    if (rc != EVD_OK)
        rename_treatment(err, i);
    return rc;
}

static bool same_string(const json_t *a, const json_t *b)
{
    if (json_is_null(a) || json_is_null(b))
        return json_is_null(a) && json_is_null(b);
    return json_string_length(a) == json_string_length(b) &&
           memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
}

/* {label, prompt, system_prompt} of a seed-normalized variant with its label filled in. */
static json_t *variant(const json_t *v, size_t arm)
{
    json_t *label = json_object_get(v, "label");
    char dflt[8];
    snprintf(dflt, sizeof(dflt), "%c", (char)('A' + arm));
    return json_pack("{s:s, s:O, s:O}", "label", label != NULL ? json_string_value(label) : dflt,
                     "prompt", json_object_get(v, "prompt"), "system_prompt",
                     json_object_get(v, "system_prompt"));
}

enum evd_code evd_experiment_request(const json_t *body, const struct evd_experiment_limits *lim,
                                     json_t **normalized, const json_t **cases, struct evd_err *err)
{
    *normalized = NULL;
    *cases = NULL;
    json_t *out = NULL, *an = NULL, *arms = NULL, *first = NULL, *stop = NULL, *budget = NULL;
    json_t *judge = NULL;
    enum evd_code rc;
    if (!json_is_object(body))
        return evd_err_set(err, EVD_EINVAL, "request body must be a JSON object");
    const char *unknown = evd_json_unknown_member(body, KNOWN);
    if (unknown != NULL)
        return evd_err_set(err, EVD_EINVAL, "%.100s is not a known field", unknown);

    json_t *dataset_id = json_object_get(body, "dataset_id");
    json_t *inline_cases = json_object_get(body, "cases");
    if (present(dataset_id) == present(inline_cases))
        return evd_err_set(err, EVD_EINVAL, "exactly one of dataset_id and cases must be given");
    if (present(dataset_id) && (!json_is_string(dataset_id) || json_string_length(dataset_id) == 0))
        return evd_err_set(err, EVD_EINVAL, "dataset_id must be a non-empty string");
    if (present(inline_cases) && !json_is_array(inline_cases))
        return evd_err_set(err, EVD_EINVAL, "cases must be an array");

    json_t *name = json_object_get(body, "name");
    if (present(name)) {
        if (!json_is_string(name))
            return evd_err_set(err, EVD_EINVAL, "name must be a string");
        if ((rc = evd_dataset_check_name(json_string_value(name), json_string_length(name), err)) !=
            EVD_OK)
            return rc;
    }

    json_t *treatments = json_object_get(body, "treatments");
    if (!present(treatments))
        return evd_err_set(err, EVD_EINVAL, "treatments is required");
    if (!json_is_array(treatments))
        return evd_err_set(err, EVD_EINVAL, "treatments must be an array");
    size_t m = json_array_size(treatments);
    if (m < 1 || m > EVD_EXPERIMENT_MAX_TREATMENTS)
        return evd_err_set(err, EVD_EINVAL, "treatments must contain between 1 and %u variants",
                           EVD_EXPERIMENT_MAX_TREATMENTS);
    for (size_t i = 0; i < m; i++)
        if (!json_is_object(json_array_get(treatments, i)))
            return evd_err_set(err, EVD_EINVAL, "treatments[%zu] must be an object", i);

    uint32_t repeats, concurrency;
    if ((rc = bounded(body, "repeats", EVD_EXPERIMENT_DEFAULT_REPEATS, lim->max_repeats, &repeats,
                      err)) != EVD_OK)
        return rc;
    uint32_t dflt_conc = EVD_EXPERIMENT_DEFAULT_CONCURRENCY;
    if (dflt_conc > lim->max_concurrency)
        dflt_conc = lim->max_concurrency;
    if ((rc = bounded(body, "concurrency", dflt_conc, lim->max_concurrency, &concurrency, err)) !=
        EVD_OK)
        return rc;
    if ((rc = analysis(json_object_get(body, "analysis"), &an, err)) != EVD_OK)
        return rc;
    struct evd_experiment_plan_opts plan;
    if ((rc = evd_experiment_stopping(json_object_get(body, "stopping"), &stop, err)) != EVD_OK ||
        (rc = evd_experiment_budget(json_object_get(body, "budget"), &budget, err)) != EVD_OK ||
        (rc = evd_experiment_plan_options(json_object_get(body, "plan"), &plan, err)) != EVD_OK)
        goto out;
    if ((rc = evd_judge_request(json_object_get(body, "judge"), &judge, err)) != EVD_OK)
        goto out;
    bool has_evaluator = present(json_object_get(body, "evaluator"));
    if (!has_evaluator && json_is_null(judge)) {
        rc = evd_err_set(err, EVD_EINVAL, "an experiment needs an evaluator or a judge");
        goto out;
    }
    const char *by = json_string_value(json_object_get(an, "verdict_by"));
    if (by != NULL && strcmp(by, "judge") == 0 && json_is_null(judge)) {
        rc = evd_err_set(err, EVD_EINVAL, "analysis.verdict_by judge needs a judge");
        goto out;
    }
    if (by != NULL && strcmp(by, "evaluator") == 0 && !has_evaluator) {
        rc = evd_err_set(err, EVD_EINVAL, "analysis.verdict_by evaluator needs an evaluator");
        goto out;
    }
    if (by == NULL &&
        json_object_set_new(an, "verdict_by",
                            json_string(has_evaluator ? "evaluator" : "judge")) != 0) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }

    /* Every treatment against the control, with the seed's rules and messages. */
    arms = json_array();
    if (arms == NULL) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < m; i++) {
        json_t *pair = NULL;
        if ((rc = seed_pair(body, json_array_get(treatments, i), repeats, i, &pair, err)) != EVD_OK)
            goto out;
        if (i == 0) {
            first = pair;
            json_array_append_new(arms, variant(json_object_get(pair, "control"), 0));
        }
        json_array_append_new(arms, variant(json_object_get(pair, "treatment"), i + 1));
        if (i > 0)
            json_decref(pair);
    }
    if (json_array_size(arms) != m + 1) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    /* The treatments pairwise: the dimension's compared text differs between every two. */
    bool by_prompt = strcmp(json_string_value(json_object_get(first, "dimension")), "prompt") == 0;
    const char *what = by_prompt ? "prompt" : "system_prompt";
    for (size_t i = 1; i <= m; i++)
        for (size_t j = i + 1; j <= m; j++)
            if (same_string(json_object_get(json_array_get(arms, i), what),
                            json_object_get(json_array_get(arms, j), what))) {
                rc = evd_err_set(err, EVD_EINVAL,
                                 by_prompt ? "prompt comparison requires different prompts"
                                           : "system_prompt comparison requires different "
                                             "system prompts");
                goto out;
            }
    for (size_t i = 0; i <= m; i++)
        for (size_t j = i + 1; j <= m; j++)
            if (same_string(json_object_get(json_array_get(arms, i), "label"),
                            json_object_get(json_array_get(arms, j), "label"))) {
                rc = evd_err_set(err, EVD_EINVAL, "variant labels must be unique");
                goto out;
            }

    json_t *treat = json_array();
    out =
        json_pack("{s:O?, s:O, s:O, s:O, s:o, s:O?, s:i, s:i, s:O, s:O, s:O, s:O}", "name", name,
                  "dimension", json_object_get(first, "dimension"), "model",
                  json_object_get(first, "model"), "control", json_array_get(arms, 0), "treatments",
                  treat, "evaluator", json_object_get(first, "evaluator"), "repeats", (int)repeats,
                  "concurrency", (int)concurrency, "limits", json_object_get(first, "limits"),
                  "functions", json_object_get(first, "functions"), "output",
                  json_object_get(first, "output"), "analysis", an);
    if (out == NULL) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 1; i <= m; i++)
        json_array_append(treat, json_array_get(arms, i));
    int bad = json_array_size(treat) != m;
    if (json_object_get(first, "metadata") != NULL)
        bad |= json_object_set(out, "metadata", json_object_get(first, "metadata"));
    if (present(dataset_id))
        bad |= json_object_set(out, "dataset_id", dataset_id);
    bad |= json_object_set(out, "stopping", stop);
    bad |= json_object_set(out, "budget", budget);
    bad |= json_object_set(out, "judge", judge);
    if (present(json_object_get(body, "plan")))
        bad |= json_object_set(out, "plan", json_object_get(body, "plan"));
    if (bad) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    *normalized = out;
    out = NULL;
    *cases = present(inline_cases) ? inline_cases : NULL;
    rc = EVD_OK;
out:
    json_decref(out);
    json_decref(an);
    json_decref(stop);
    json_decref(budget);
    json_decref(judge);
    json_decref(arms);
    json_decref(first);
    return rc;
}

size_t evd_experiment_arms(const json_t *normalized)
{
    return 1 + json_array_size(json_object_get(normalized, "treatments"));
}

static const json_t *arm_variant(const json_t *normalized, size_t arm)
{
    return arm == 0 ? json_object_get(normalized, "control")
                    : json_array_get(json_object_get(normalized, "treatments"), arm - 1);
}

/* Renders a string member of a variant (NULL or null stays null); *out a new reference. */
static enum evd_code render_text(const json_t *v, const json_t *c, json_t **out,
                                 struct evd_err *err)
{
    *out = NULL;
    if (!json_is_string(v)) {
        *out = json_null();
        return EVD_OK;
    }
    struct evd_buf b = {0};
    enum evd_code rc = evd_template_render(json_string_value(v), json_string_length(v), c, &b, err);
    if (rc == EVD_OK && (*out = json_stringn(b.data != NULL ? b.data : "", b.len)) == NULL)
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
    evd_buf_free(&b);
    return rc;
}

enum evd_code evd_experiment_cell(const json_t *normalized, const json_t *c, size_t arm,
                                  json_t **variant_out, json_t **evaluator, struct evd_err *err)
{
    *variant_out = NULL;
    *evaluator = NULL;
    const json_t *v = arm_variant(normalized, arm);
    const json_t *ev = json_object_get(normalized, "evaluator");
    json_t *prompt = NULL, *system = NULL, *args = NULL;
    enum evd_code rc = render_text(json_object_get(v, "prompt"), c, &prompt, err);
    if (rc == EVD_OK)
        rc = render_text(json_object_get(v, "system_prompt"), c, &system, err);
    if (rc == EVD_OK)
        rc = evd_template_render_json(json_object_get(ev, "arguments"), c, &args, err);
    if (rc == EVD_OK) {
        *variant_out = json_pack("{s:O, s:o, s:o}", "label", json_object_get(v, "label"), "prompt",
                                 prompt, "system_prompt", system);
        prompt = system = NULL;
        /* No evaluator (a judged experiment): function_id null, the run is not scored. */
        *evaluator = json_pack("{s:O?, s:o?}", "function_id",
                               json_object_get(ev, "function_id"), "arguments", args);
        args = NULL;
        if (*variant_out == NULL || *evaluator == NULL) {
            json_decref(*variant_out);
            json_decref(*evaluator);
            *variant_out = *evaluator = NULL;
            rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        }
    }
    json_decref(prompt);
    json_decref(system);
    json_decref(args);
    return rc;
}

enum evd_code evd_experiment_check_case(const json_t *normalized, const json_t *c,
                                        struct evd_err *err)
{
    size_t arms = evd_experiment_arms(normalized);
    enum evd_code rc = EVD_OK;
    for (size_t a = 0; a < arms && rc == EVD_OK; a++) {
        const json_t *v = arm_variant(normalized, a);
        json_t *prompt = NULL, *system = NULL;
        rc = render_text(json_object_get(v, "prompt"), c, &prompt, err);
        if (rc == EVD_OK)
            rc = render_text(json_object_get(v, "system_prompt"), c, &system, err);
        json_decref(prompt);
        json_decref(system);
    }
    if (rc == EVD_OK) { /* the evaluator is the same in every arm */
        json_t *args = NULL;
        rc = evd_template_render_json(
            json_object_get(json_object_get(normalized, "evaluator"), "arguments"), c, &args, err);
        json_decref(args);
    }
    const json_t *judge = json_object_get(normalized, "judge");
    if (rc == EVD_OK && json_is_object(judge))
        rc = evd_judge_check_case(judge, c, err);
    if (rc != EVD_OK)
        return rc;
    const json_t *by = json_object_get(json_object_get(normalized, "analysis"), "cluster_by");
    if (json_is_string(by) &&
        evd_template_lookup(c, json_string_value(by), json_string_length(by)) == NULL)
        return evd_err_set(err, EVD_EINVAL, "case %.200s: cluster_by variable %s is not defined",
                           json_string_value(json_object_get(c, "id")), json_string_value(by));
    return EVD_OK;
}

enum evd_code evd_experiment_check_size(const json_t *normalized, size_t cases, uint64_t max_runs,
                                        struct evd_err *err)
{
    uint64_t repeats = (uint64_t)json_integer_value(json_object_get(normalized, "repeats"));
    uint64_t n = (uint64_t)cases * evd_experiment_arms(normalized) * repeats;
    if (n > max_runs)
        return evd_err_set(err, EVD_EINVAL,
                           "an experiment may plan at most %llu runs (cases \u00d7 arms \u00d7 "
                           "repeats = %llu)",
                           (unsigned long long)max_runs, (unsigned long long)n);
    return EVD_OK;
}

char *evd_experiment_cluster_key(const json_t *normalized, const json_t *c, struct evd_err *err)
{
    const json_t *by = json_object_get(json_object_get(normalized, "analysis"), "cluster_by");
    if (!json_is_string(by))
        return NULL;
    const json_t *v = evd_template_lookup(c, json_string_value(by), json_string_length(by));
    char *key = NULL;
    if (v == NULL)
        evd_err_set(err, EVD_EINVAL, "case %.200s: cluster_by variable %s is not defined",
                    json_string_value(json_object_get(c, "id")), json_string_value(by));
    else if ((key = json_is_string(v) ? strdup(json_string_value(v)) : evd_json_compact(v, NULL)) ==
             NULL)
        evd_err_set(err, EVD_ENOMEM, "out of memory");
    return key;
}

const char *evd_experiment_arm_label(const json_t *request, unsigned arm)
{
    const json_t *v = arm == 0 ? json_object_get(request, "control")
                               : json_array_get(json_object_get(request, "treatments"), arm - 1);
    return json_string_value(json_object_get(v, "label"));
}
