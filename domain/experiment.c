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
#include "domain/mock_tools.h"
#include "domain/simulator.h"
#include "domain/request.h"
#include "domain/template.h"
#include "domain/text.h"

static const char *const KNOWN[] = {"name",       "dimension",   "model",    "control",
                                    "treatments", "dataset_id",  "cases",    "evaluator",
                                    "repeats",    "concurrency", "limits",   "functions",
                                    "output",     "metadata",    "analysis", "stopping",
                                    "budget",     "plan",        "judge",    "prompt",
                                    "system_prompt", "simulator", "tools", NULL};

static const char *const DIMENSIONS[] = {"prompt", "system_prompt", "model"};

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

/*
 * An experiment's prompt may be "" (agent-cases.md: the case's conversation is sent as it
 * is), which the seed's rules refuse: the seed's check sees this stand-in instead, and the
 * normalized variant gets "" back (restore_empty).
 */
static const char EMPTY_PROMPT[] = "\x1f(empty prompt)\x1f";

/* A copy of variant v (new reference) with an empty prompt replaced by the stand-in, or a
 * new reference to v itself when its prompt is not "". NULL without memory. */
static json_t *stand_in_empty(const json_t *v)
{
    const json_t *p = json_object_get(v, "prompt");
    if (!json_is_string(p) || json_string_length(p) != 0)
        return json_incref((json_t *)v);
    json_t *copy = json_copy((json_t *)v);
    if (copy != NULL && json_object_set_new(copy, "prompt", json_string(EMPTY_PROMPT)) != 0) {
        json_decref(copy);
        copy = NULL;
    }
    return copy;
}

/* Puts "" back where the stand-in is, in variant v (borrowed, changed in place). */
static int restore_empty(json_t *v)
{
    const char *p = json_string_value(json_object_get(v, "prompt"));
    if (p != NULL && strcmp(p, EMPTY_PROMPT) == 0)
        return json_object_set_new(v, "prompt", json_string(""));
    return 0;
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
            bad |= strcmp(*k, "control") == 0 && json_is_object(v)
                       ? json_object_set_new(pair, *k, stand_in_empty(v))
                       : json_object_set(pair, *k, v);
    }
    bad |= json_object_set_new(pair, "treatment", stand_in_empty(t));
    bad |= json_object_set_new(pair, "runs", json_integer(repeats));
    if (bad) {
        json_decref(pair);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    enum evd_code rc = evd_request_start(pair, repeats, normalized, NULL, err);
    json_decref(pair);
    if (rc != EVD_OK) {
        rename_treatment(err, i);
        return rc;
    }
    if (restore_empty(json_object_get(*normalized, "control")) != 0 ||
        restore_empty(json_object_get(*normalized, "treatment")) != 0) {
        json_decref(*normalized);
        *normalized = NULL;
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    return EVD_OK;
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

/* ---- the model dimension (../shared/spec/agent-cases.md, "Model variants") -------------- */

static const char *const EFFORTS[] = {"minimal", "low", "medium", "high", "xhigh"};

static bool blank(const json_t *s)
{
    return evd_text_is_blank(json_string_value(s), json_string_length(s));
}

static bool by_model(const json_t *normalized)
{
    const char *d = json_string_value(json_object_get(normalized, "dimension"));
    return d != NULL && strcmp(d, "model") == 0;
}

/* A variant's options, normalized: temperature and top_p as reals, reasoning_effort,
 * max_output_tokens, each only when given ({} for none); *out a new reference. */
static enum evd_code model_options(const json_t *o, const char *path, json_t **out,
                                   struct evd_err *err)
{
    static const char *const known[] = {"temperature", "top_p", "reasoning_effort",
                                        "max_output_tokens", NULL};
    json_t *t = NULL, *p = NULL;
    int effort = -1;
    bool has_max = false;
    uint64_t max = 0;
    enum evd_code rc = EVD_OK;
    *out = NULL;
    if (o != NULL) {
        rc = evd_fields_only(o, path, known, err);
        if (rc == EVD_OK)
            rc = evd_fields_get(o, path, "temperature", EVD_F_NUMBER | EVD_F_NULLABLE, &t, err);
        if (rc == EVD_OK && t != NULL &&
            !(json_number_value(t) >= 0 && json_number_value(t) <= 2))
            rc = evd_err_set(err, EVD_EINVAL, "%s.temperature must be between 0 and 2", path);
        if (rc == EVD_OK)
            rc = evd_fields_get(o, path, "top_p", EVD_F_NUMBER | EVD_F_NULLABLE, &p, err);
        if (rc == EVD_OK && p != NULL && !(json_number_value(p) > 0 && json_number_value(p) <= 1))
            rc = evd_err_set(err, EVD_EINVAL,
                             "%s.top_p must be greater than 0 and at most 1", path);
        if (rc == EVD_OK)
            rc = evd_fields_enum(o, path, "reasoning_effort", EVD_F_NULLABLE, EFFORTS,
                                 sizeof(EFFORTS) / sizeof(EFFORTS[0]), &effort, err);
        if (rc == EVD_OK)
            rc = evd_fields_uint(o, path, "max_output_tokens", EVD_F_NULLABLE, INT32_MAX,
                                 &has_max, &max, err);
        if (rc == EVD_OK && has_max && max == 0)
            rc = evd_err_set(err, EVD_EINVAL, "%s.max_output_tokens must be greater than zero",
                             path);
        if (rc != EVD_OK)
            return rc;
    }
    json_t *n = json_object();
    int bad = n == NULL;
    if (!bad && t != NULL)
        bad |= json_object_set_new(n, "temperature", json_real(json_number_value(t)));
    if (!bad && p != NULL)
        bad |= json_object_set_new(n, "top_p", json_real(json_number_value(p)));
    if (!bad && effort >= 0)
        bad |= json_object_set_new(n, "reasoning_effort", json_string(EFFORTS[effort]));
    if (!bad && has_max)
        bad |= json_object_set_new(n, "max_output_tokens", json_integer((json_int_t)max));
    if (bad) {
        json_decref(n);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    *out = n;
    return EVD_OK;
}

/*
 * The seed's model object (domain/request.h) of a variant's {model, provider, options},
 * checked by the seed's rules: options.reasoning_effort is thinking_level, temperature and
 * top_p go into provider_options.<provider> (merged into the provider's request body);
 * max_output_tokens is the arm's limit (evd_experiment_arm_limits). New reference in *out.
 */
static enum evd_code seed_model(const json_t *vm, json_t **out, struct evd_err *err)
{
    *out = NULL;
    const json_t *o = json_object_get(vm, "options");
    const json_t *provider = json_object_get(vm, "provider");
    json_t *m = json_pack("{s:O}", "model", json_object_get(vm, "model"));
    json_t *sampling = json_object();
    int bad = m == NULL || sampling == NULL;
    if (!bad && provider != NULL)
        bad |= json_object_set(m, "provider", (json_t *)provider);
    if (!bad && json_object_get(o, "reasoning_effort") != NULL)
        bad |= json_object_set(m, "thinking_level", json_object_get(o, "reasoning_effort"));
    static const char *const sampled[] = {"temperature", "top_p"};
    for (size_t i = 0; !bad && i < 2; i++)
        if (json_object_get(o, sampled[i]) != NULL)
            bad |= json_object_set(sampling, sampled[i], json_object_get(o, sampled[i]));
    if (!bad && json_object_size(sampling) > 0 && json_is_string(provider))
        bad |= json_object_set_new(m, "provider_options",
                                   json_pack("{s:O}", json_string_value(provider), sampling));
    enum evd_code rc = bad ? evd_err_set(err, EVD_ENOMEM, "out of memory")
                           : evd_request_model(m, out, err);
    json_decref(m);
    json_decref(sampling);
    return rc;
}

/* A model-dimension variant at `where` ("control", "treatments[i]") of arm `arm`:
 * {label?, model: {model, provider, options?}}; *out its normalized {label, model: {model,
 * provider, options}} (new reference). */
static enum evd_code model_variant(const json_t *v, const char *where, size_t arm, json_t **out,
                                   struct evd_err *err)
{
    static const char *const vknown[] = {"label", "model", NULL};
    static const char *const mknown[] = {"model", "provider", "options", NULL};
    char path[EVD_FIELDS_PATH_MAX], opath[EVD_FIELDS_PATH_MAX];
    json_t *label = NULL, *m = NULL, *id = NULL, *provider = NULL, *options = NULL, *opts = NULL;
    *out = NULL;
    static const char *const texts[] = {"prompt", "system_prompt"};
    for (size_t i = 0; i < 2; i++)
        if (json_object_get(v, texts[i]) != NULL)
            return evd_err_set(err, EVD_EINVAL,
                               "%s.%s is not allowed with dimension model (it is shared: give "
                               "the top-level %s)",
                               where, texts[i], texts[i]);
    evd_fields_path(path, sizeof(path), where, "model");
    evd_fields_path(opath, sizeof(opath), path, "options");
    enum evd_code rc = evd_fields_only(v, where, vknown, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(v, where, "label", EVD_F_STRING | EVD_F_NULLABLE, &label, err);
    if (rc == EVD_OK && label != NULL && blank(label))
        rc = evd_err_set(err, EVD_EINVAL, "variant labels cannot be empty when supplied");
    if (rc == EVD_OK)
        rc = evd_fields_get(v, where, "model", EVD_F_OBJECT | EVD_F_REQUIRED, &m, err);
    if (rc == EVD_OK)
        rc = evd_fields_only(m, path, mknown, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(m, path, "model", EVD_F_STRING | EVD_F_REQUIRED, &id, err);
    if (rc == EVD_OK && blank(id))
        rc = evd_err_set(err, EVD_EINVAL, "%s.model cannot be empty", path);
    if (rc == EVD_OK)
        rc = evd_fields_get(m, path, "provider", EVD_F_STRING | EVD_F_REQUIRED, &provider, err);
    if (rc == EVD_OK && blank(provider))
        rc = evd_err_set(err, EVD_EINVAL, "%s.provider cannot be empty", path);
    if (rc == EVD_OK)
        rc = evd_fields_get(m, path, "options", EVD_F_OBJECT | EVD_F_NULLABLE, &options, err);
    if (rc == EVD_OK)
        rc = model_options(options, opath, &opts, err);
    if (rc != EVD_OK)
        return rc;
    char dflt[8];
    snprintf(dflt, sizeof(dflt), "%c", (char)('A' + arm));
    *out = json_pack("{s:s, s:{s:O, s:O, s:o}}", "label",
                     label != NULL ? json_string_value(label) : dflt, "model", "model", id,
                     "provider", provider, "options", opts);
    if (*out == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    /* The seed's own model rules, on what the harness is given. */
    json_t *sm = NULL;
    if ((rc = seed_model(json_object_get(*out, "model"), &sm, err)) != EVD_OK) {
        json_decref(*out);
        *out = NULL;
    }
    json_decref(sm);
    return rc;
}

/*
 * The arms of a model-dimension experiment into `arms` (control first), and in *shared
 * (new reference) the seed's normalized request of the shared members: the evaluator,
 * limits, function policy, output contract and metadata are checked by the seed's own
 * rules, with the control's model and the shared prompt in both of its variants.
 */
static enum evd_code model_arms(const json_t *body, const json_t *treatments, uint32_t repeats,
                                json_t *arms, json_t **shared, struct evd_err *err)
{
    json_t *prompt, *system, *v, *nv = NULL;
    enum evd_code rc;
    *shared = NULL;
    if (present(json_object_get(body, "model")))
        return evd_err_set(err, EVD_EINVAL,
                           "model is not allowed with dimension model (each variant has its "
                           "own: control.model, treatments[i].model)");
    if ((rc = evd_fields_get(body, "", "prompt", EVD_F_STRING | EVD_F_REQUIRED | EVD_F_NULLABLE,
                             &prompt, err)) != EVD_OK)
        return rc;
    /* "" sends each case's conversation as it is; blank text is refused. */
    if (json_string_length(prompt) > 0 && blank(prompt))
        return evd_err_set(err, EVD_EINVAL, "prompt cannot be empty");
    if ((rc = evd_fields_get(body, "", "system_prompt", EVD_F_STRING | EVD_F_NULLABLE, &system,
                             err)) != EVD_OK ||
        (rc = evd_fields_get(body, "", "control", EVD_F_OBJECT | EVD_F_REQUIRED, &v, err)) !=
            EVD_OK ||
        (rc = model_variant(v, "control", 0, &nv, err)) != EVD_OK)
        return rc;
    if (json_array_append_new(arms, nv) != 0)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    for (size_t i = 0; i < json_array_size(treatments); i++) {
        char where[48];
        snprintf(where, sizeof(where), "treatments[%zu]", i);
        if ((rc = model_variant(json_array_get(treatments, i), where, i + 1, &nv, err)) != EVD_OK)
            return rc;
        if (json_array_append_new(arms, nv) != 0)
            return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    /* Variants differ in model, provider or options; nothing else is theirs. */
    for (size_t j = 1; j < json_array_size(arms); j++)
        for (size_t i = 0; i < j; i++)
            if (json_equal(json_object_get(json_array_get(arms, i), "model"),
                           json_object_get(json_array_get(arms, j), "model"))) {
                if (i == 0)
                    return evd_err_set(err, EVD_EINVAL,
                                       "treatments[%zu]: differs from the control in nothing",
                                       j - 1);
                return evd_err_set(err, EVD_EINVAL,
                                   "treatments[%zu]: differs from treatments[%zu] in nothing",
                                   j - 1, i - 1);
            }
    json_t *model = NULL;
    if ((rc = seed_model(json_object_get(json_array_get(arms, 0), "model"), &model, err)) !=
        EVD_OK)
        return rc;
    json_t *seen = json_string_length(prompt) > 0 ? json_incref(prompt)
                                                   : json_string(EMPTY_PROMPT);
    json_t *pair = json_pack("{s:s, s:o, s:{s:O, s:n}, s:{s:O, s:s}, s:i}", "dimension",
                             "system_prompt", "model", model, "control", "prompt", seen,
                             "system_prompt", "treatment", "prompt", seen, "system_prompt",
                             "", "runs", (int)repeats);
    json_decref(seen);
    static const char *const members[] = {"evaluator", "limits", "functions", "output",
                                          "metadata", NULL};
    int bad = pair == NULL;
    for (const char *const *k = members; !bad && *k != NULL; k++)
        if (json_object_get(body, *k) != NULL)
            bad |= json_object_set(pair, *k, json_object_get(body, *k));
    if (bad) {
        json_decref(pair);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    rc = evd_request_start(pair, repeats, shared, NULL, err);
    json_decref(pair);
    return rc;
}

enum evd_code evd_experiment_request(const json_t *body, const struct evd_experiment_limits *lim,
                                     json_t **normalized, const json_t **cases, struct evd_err *err)
{
    *normalized = NULL;
    *cases = NULL;
    json_t *out = NULL, *an = NULL, *arms = NULL, *first = NULL, *stop = NULL, *budget = NULL;
    json_t *judge = NULL, *sim = NULL;
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
    if ((rc = evd_judge_request(json_object_get(body, "judge"), &judge, err)) != EVD_OK ||
        (rc = evd_simulator_request(json_object_get(body, "simulator"), &sim, err)) != EVD_OK ||
        (rc = evd_mock_tools_check(json_object_get(body, "tools"), err)) != EVD_OK)
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

    int dim = -1;
    if ((rc = evd_fields_enum(body, "", "dimension", EVD_F_REQUIRED, DIMENSIONS,
                              sizeof(DIMENSIONS) / sizeof(DIMENSIONS[0]), &dim, err)) != EVD_OK)
        goto out;
    const bool models = dim == 2;
    arms = json_array();
    if (arms == NULL) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    if (models) {
        if ((rc = model_arms(body, treatments, repeats, arms, &first, err)) != EVD_OK)
            goto out;
        goto labels;
    }
    static const char *const texts[] = {"prompt", "system_prompt"};
    for (size_t i = 0; i < 2; i++)
        if (json_object_get(body, texts[i]) != NULL) {
            rc = evd_err_set(err, EVD_EINVAL,
                             "%s is only allowed with dimension model (the variants hold the "
                             "prompts)",
                             texts[i]);
            goto out;
        }
    /* Every treatment against the control, with the seed's rules and messages. */
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
labels:
    for (size_t i = 0; i <= m; i++)
        for (size_t j = i + 1; j <= m; j++)
            if (same_string(json_object_get(json_array_get(arms, i), "label"),
                            json_object_get(json_array_get(arms, j), "label"))) {
                rc = evd_err_set(err, EVD_EINVAL, "variant labels must be unique");
                goto out;
            }

    json_t *treat = json_array();
    /* A model experiment has no shared model: its variants hold theirs. */
    out = json_pack("{s:O?, s:s, s:O*, s:O, s:o, s:O?, s:i, s:i, s:O, s:O, s:O, s:O}", "name",
                    name, "dimension", DIMENSIONS[dim], "model",
                    models ? NULL : json_object_get(first, "model"), "control",
                    json_array_get(arms, 0), "treatments", treat, "evaluator",
                    json_object_get(first, "evaluator"), "repeats", (int)repeats, "concurrency",
                    (int)concurrency, "limits", json_object_get(first, "limits"), "functions",
                    json_object_get(first, "functions"), "output",
                    json_object_get(first, "output"), "analysis", an);
    if (out == NULL) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 1; i <= m; i++)
        json_array_append(treat, json_array_get(arms, i));
    int bad = json_array_size(treat) != m;
    if (models) {
        /* The shared texts; the variants keep their models. */
        json_t *sp = json_object_get(body, "system_prompt");
        bad |= json_object_set(out, "prompt", json_object_get(body, "prompt"));
        bad |= json_object_set_new(out, "system_prompt",
                                   json_is_string(sp) ? json_incref(sp) : json_null());
    }
    if (json_object_get(first, "metadata") != NULL)
        bad |= json_object_set(out, "metadata", json_object_get(first, "metadata"));
    if (present(dataset_id))
        bad |= json_object_set(out, "dataset_id", dataset_id);
    bad |= json_object_set(out, "stopping", stop);
    bad |= json_object_set(out, "budget", budget);
    bad |= json_object_set(out, "judge", judge);
    bad |= json_object_set(out, "simulator", sim);
    if (present(json_object_get(body, "tools")))
        bad |= json_object_set(out, "tools", json_object_get(body, "tools"));
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
    json_decref(sim);
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

/* Where an arm's prompt and system prompt templates are: the variant, or the request's
 * shared ones for the model dimension (borrowed from normalized). */
static const json_t *arm_texts(const json_t *normalized, size_t arm)
{
    return by_model(normalized) ? normalized : arm_variant(normalized, arm);
}

enum evd_code evd_experiment_arm_model(const json_t *normalized, size_t arm, json_t **model,
                                       struct evd_err *err)
{
    *model = NULL;
    if (!by_model(normalized)) {
        *model = json_incref(json_object_get(normalized, "model"));
        return *model != NULL ? EVD_OK : evd_err_set(err, EVD_EINVAL, "model is required");
    }
    const json_t *v = arm_variant(normalized, arm);
    if (v == NULL)
        return evd_err_set(err, EVD_EINVAL, "arm %zu is not an arm of the experiment", arm);
    return seed_model(json_object_get(v, "model"), model, err);
}

json_t *evd_experiment_arm_limits(const json_t *normalized, size_t arm)
{
    const json_t *limits = json_object_get(normalized, "limits");
    const json_t *max = by_model(normalized)
                            ? json_object_get(
                                  json_object_get(json_object_get(arm_variant(normalized, arm),
                                                                  "model"),
                                                  "options"),
                                  "max_output_tokens")
                            : NULL;
    if (max == NULL)
        return json_incref((json_t *)limits);
    json_t *l = json_deep_copy(limits);
    json_t *ex = json_object_get(l, "execution");
    if (l != NULL && ex == NULL && json_object_set_new(l, "execution", json_object()) == 0)
        ex = json_object_get(l, "execution");
    if (ex == NULL || json_object_set(ex, "max_output_tokens_per_call", (json_t *)max) != 0) {
        json_decref(l);
        return NULL;
    }
    return l;
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

enum evd_code evd_experiment_messages(const json_t *c, json_t **out, struct evd_err *err)
{
    *out = NULL;
    const json_t *messages = json_object_get(c, "messages");
    if (!json_is_array(messages))
        return EVD_OK;
    json_t *r = json_array();
    if (r == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    size_t i;
    const json_t *m;
    json_array_foreach(messages, i, m)
    {
        json_t *content = NULL;
        enum evd_code rc = render_text(json_object_get(m, "content"), c, &content, err);
        if (rc == EVD_OK &&
            json_array_append_new(r, json_pack("{s:O, s:o}", "role", json_object_get(m, "role"),
                                               "content", content)) != 0)
            rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        if (rc != EVD_OK) {
            json_decref(r);
            return rc;
        }
    }
    *out = r;
    return EVD_OK;
}

/* A case sent with an empty prompt needs a conversation that ends with the user. */
static enum evd_code check_empty_prompt(const json_t *c, struct evd_err *err)
{
    const json_t *messages = json_object_get(c, "messages");
    const json_t *last = json_array_get(messages, json_array_size(messages) - 1);
    const char *role = json_string_value(json_object_get(last, "role"));
    if (role != NULL && strcmp(role, "user") == 0)
        return EVD_OK;
    return evd_err_set(err, EVD_EINVAL,
                       "case %.200s: messages must end with a user message when the prompt is "
                       "empty",
                       json_string_value(json_object_get(c, "id")));
}

enum evd_code evd_experiment_cell(const json_t *normalized, const json_t *c, size_t arm,
                                  json_t **variant_out, json_t **evaluator, struct evd_err *err)
{
    *variant_out = NULL;
    *evaluator = NULL;
    const json_t *v = arm_variant(normalized, arm);
    const json_t *t = arm_texts(normalized, arm);
    const json_t *ev = json_object_get(normalized, "evaluator");
    json_t *prompt = NULL, *system = NULL, *args = NULL, *model = NULL, *limits = NULL;
    json_t *messages = NULL;
    enum evd_code rc = render_text(json_object_get(t, "prompt"), c, &prompt, err);
    if (rc == EVD_OK)
        rc = render_text(json_object_get(t, "system_prompt"), c, &system, err);
    if (rc == EVD_OK)
        rc = evd_template_render_json(json_object_get(ev, "arguments"), c, &args, err);
    if (rc == EVD_OK)
        rc = evd_experiment_messages(c, &messages, err);
    if (rc == EVD_OK && by_model(normalized)) {
        /* The arm's own model and, with options.max_output_tokens, its own limits. */
        rc = evd_experiment_arm_model(normalized, arm, &model, err);
        if (rc == EVD_OK && (limits = evd_experiment_arm_limits(normalized, arm)) == NULL)
            rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    if (rc == EVD_OK) {
        *variant_out = json_pack("{s:O, s:o, s:o, s:o*, s:o*, s:o*, s:O*}", "label",
                                 json_object_get(v, "label"), "prompt", prompt, "system_prompt",
                                 system, "model", model, "limits", limits, "messages", messages,
                                 "tool_results", json_object_get(c, "tool_results"));
        prompt = system = model = limits = messages = NULL;
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
    json_decref(model);
    json_decref(limits);
    json_decref(messages);
    return rc;
}

enum evd_code evd_experiment_check_case(const json_t *normalized, const json_t *c,
                                        struct evd_err *err)
{
    size_t arms = evd_experiment_arms(normalized);
    enum evd_code rc = EVD_OK;
    for (size_t a = 0; a < arms && rc == EVD_OK; a++) {
        const json_t *v = arm_texts(normalized, a);
        json_t *prompt = NULL, *system = NULL;
        rc = render_text(json_object_get(v, "prompt"), c, &prompt, err);
        if (rc == EVD_OK)
            rc = render_text(json_object_get(v, "system_prompt"), c, &system, err);
        if (rc == EVD_OK && json_is_string(prompt) && json_string_length(prompt) == 0)
            rc = check_empty_prompt(c, err);
        json_decref(prompt);
        json_decref(system);
    }
    if (rc == EVD_OK) { /* every message's template */
        json_t *messages = NULL;
        rc = evd_experiment_messages(c, &messages, err);
        json_decref(messages);
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
    if (rc == EVD_OK)
        rc = evd_tool_results_check(json_object_get(c, "tool_results"),
                                    json_object_get(normalized, "tools"),
                                    json_string_value(json_object_get(c, "id")), err);
    const json_t *sim = json_object_get(normalized, "simulator");
    if (rc == EVD_OK && json_is_object(sim)) {
        char *ins = NULL;
        rc = evd_simulator_instructions(sim, c, &ins, err);
        free(ins);
    }
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
