/*
 * Decoding and validation of the eval function requests, and the normalized start
 * request (see request.h). Every decoder is a pure function of its input; thread-safe.
 * Intermediate objects are owned by a `struct start_parts` and released in one place.
 */
#include "domain/request.h"

#include <string.h>

#include "domain/fields.h"
#include "domain/metrics.h"
#include "domain/text.h"

enum mode { MODE_START, MODE_NORMALIZED };

static const char *const DIMENSIONS[] = {"prompt", "system_prompt"};
static const char *const ORDERS[] = {"balanced_control_first", "balanced_treatment_first"};
static const char *const STRATEGIES[] = {"override", "enrich", "disabled"};
static const char *const MODES[] = {"ask", "agent"};
static const char *const THINKING[] = {"minimal", "low", "medium", "high", "xhigh"};
static const char *const EXPOSE[] = {"agent_trigger", "native"};
static const char *const OUTPUT_TYPES[] = {"text", "json"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *const MODEL_FIELDS[] = {"model", "provider",       "system_prompt_strategy",
                                           "mode",  "thinking_level", "provider_options",
                                           NULL};
static const char *const VARIANT_FIELDS[] = {"label", "prompt", "system_prompt", NULL};
static const char *const EVALUATOR_FIELDS[] = {"function_id", "arguments", NULL};
static const char *const FUNCTIONS_FIELDS[] = {"allow", "deny", "expose", NULL};
static const char *const OUTPUT_TEXT_FIELDS[] = {"type", NULL};
static const char *const OUTPUT_JSON_FIELDS[] = {"type", "schema", NULL};
static const char *const RESCORE_FIELDS[] = {"evaluator", NULL};
static const char *const NORMALIZED_FIELDS[] = {
    "control", "dimension", "evaluator", "execution_order",      "functions", "limits", "metadata",
    "model",   "output",    "runs",      "source_evaluation_id", "treatment", NULL};

/* Everything decoded from a start request before the rules run; owned json_t are new refs. */
struct start_parts {
    int dimension;
    int order;
    json_t *model;
    json_t *control;
    json_t *treatment;
    json_t *evaluator; /* NULL when absent */
    json_t *functions;
    json_t *output;
    const json_t *runs;        /* borrowed, NULL when absent */
    const json_t *metadata;    /* borrowed, NULL when absent */
    const json_t *concurrency; /* borrowed, NULL when absent */
    const char *source_id;     /* borrowed, NULL when absent */
    struct evd_limits limits;
};

static void parts_release(struct start_parts *p)
{
    json_decref(p->model);
    json_decref(p->control);
    json_decref(p->treatment);
    json_decref(p->evaluator);
    json_decref(p->functions);
    json_decref(p->output);
}

static bool is_blank(const json_t *s)
{
    return evd_text_is_blank(json_string_value(s), json_string_length(s));
}

static bool same_string(const json_t *a, const json_t *b)
{
    return json_string_length(a) == json_string_length(b) &&
           memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
}

/* Option<String> equality: both null, or both the same bytes. */
static bool same_optional_string(const json_t *a, const json_t *b)
{
    if (json_is_null(a) || json_is_null(b))
        return json_is_null(a) && json_is_null(b);
    return same_string(a, b);
}

static enum evd_code copy_member(json_t *dst, const char *key, const json_t *v)
{
    return evd_fields_set_copy(dst, key, v) == 0 ? EVD_OK : EVD_ENOMEM;
}

static enum evd_code set_enum(json_t *dst, const char *key, const char *const *names, int idx)
{
    return json_object_set_new(dst, key, json_string(names[idx])) == 0 ? EVD_OK : EVD_ENOMEM;
}

static enum evd_code decode_model(const json_t *m, json_t **out, struct evd_err *err)
{
    const char *p = "model";
    json_t *model, *provider, *options;
    int strategy, mode, thinking;
    json_t *o = NULL;
    enum evd_code rc = evd_fields_only(m, p, MODEL_FIELDS, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(m, p, "model", EVD_F_STRING | EVD_F_REQUIRED, &model, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(m, p, "provider", EVD_F_STRING | EVD_F_NULLABLE, &provider, err);
    if (rc == EVD_OK)
        rc = evd_fields_enum(m, p, "system_prompt_strategy", 0, STRATEGIES, COUNT(STRATEGIES),
                             &strategy, err);
    if (rc == EVD_OK)
        rc = evd_fields_enum(m, p, "mode", EVD_F_NULLABLE, MODES, COUNT(MODES), &mode, err);
    if (rc == EVD_OK)
        rc = evd_fields_enum(m, p, "thinking_level", EVD_F_NULLABLE, THINKING, COUNT(THINKING),
                             &thinking, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(m, p, "provider_options", EVD_F_OBJECT | EVD_F_NULLABLE, &options, err);
    if (rc != EVD_OK)
        return rc;

    o = json_object();
    rc = o != NULL ? copy_member(o, "model", model) : EVD_ENOMEM;
    if (rc == EVD_OK && provider != NULL)
        rc = copy_member(o, "provider", provider);
    if (rc == EVD_OK)
        rc = set_enum(o, "system_prompt_strategy", STRATEGIES, strategy < 0 ? 1 : strategy);
    if (rc == EVD_OK && mode >= 0)
        rc = set_enum(o, "mode", MODES, mode);
    if (rc == EVD_OK && thinking >= 0)
        rc = set_enum(o, "thinking_level", THINKING, thinking);
    if (rc == EVD_OK && options != NULL)
        rc = copy_member(o, "provider_options", options);
    if (rc != EVD_OK) {
        json_decref(o);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    *out = o;
    return EVD_OK;
}

static enum evd_code decode_variant(const json_t *v, const char *p, json_t **out,
                                    struct evd_err *err)
{
    json_t *label, *prompt, *system_prompt;
    enum evd_code rc = evd_fields_only(v, p, VARIANT_FIELDS, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(v, p, "label", EVD_F_STRING | EVD_F_NULLABLE, &label, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(v, p, "prompt", EVD_F_STRING | EVD_F_REQUIRED, &prompt, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(v, p, "system_prompt", EVD_F_STRING | EVD_F_NULLABLE, &system_prompt,
                            err);
    if (rc != EVD_OK)
        return rc;
    json_t *o = json_object();
    int bad = o == NULL;
    if (label != NULL)
        bad |= evd_fields_set_copy(o, "label", label);
    bad |= evd_fields_set_copy(o, "prompt", prompt);
    bad |= json_object_set_new(o, "system_prompt",
                               system_prompt != NULL ? json_deep_copy(system_prompt) : json_null());
    if (bad) {
        json_decref(o);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    *out = o;
    return EVD_OK;
}

static enum evd_code decode_evaluator(const json_t *e, json_t **out, struct evd_err *err)
{
    json_t *fid, *args;
    enum evd_code rc = evd_fields_only(e, "evaluator", EVALUATOR_FIELDS, err);
    if (rc == EVD_OK)
        rc =
            evd_fields_get(e, "evaluator", "function_id", EVD_F_STRING | EVD_F_REQUIRED, &fid, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(e, "evaluator", "arguments", EVD_F_ANY, &args, err);
    if (rc != EVD_OK)
        return rc;
    json_t *o = json_object();
    int bad = o == NULL;
    bad |= evd_fields_set_copy(o, "function_id", fid);
    bad |= json_object_set_new(o, "arguments", args != NULL ? json_deep_copy(args) : json_object());
    if (bad) {
        json_decref(o);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    *out = o;
    return EVD_OK;
}

static enum evd_code decode_patterns(const json_t *f, const char *parent, const char *key,
                                     json_t **out, struct evd_err *err)
{
    json_t *arr;
    char path[EVD_FIELDS_PATH_MAX];
    enum evd_code rc = evd_fields_get(f, parent, key, EVD_F_ARRAY, &arr, err);
    if (rc != EVD_OK)
        return rc;
    evd_fields_path(path, sizeof(path), parent, key);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        if (!json_is_string(json_array_get(arr, i)))
            return evd_err_set(err, EVD_EINVAL, "%s[%zu] must be a string", path, i);
    }
    *out = arr != NULL ? json_deep_copy(arr) : json_array();
    if (*out == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    return EVD_OK;
}

enum evd_code evd_request_functions(const json_t *f, const char *parent, json_t **out,
                                    struct evd_err *err)
{
    json_t *allow = NULL, *deny = NULL;
    int expose = -1;
    enum evd_code rc = EVD_OK;
    if (f != NULL) {
        rc = evd_fields_only(f, parent, FUNCTIONS_FIELDS, err);
        if (rc == EVD_OK)
            rc = decode_patterns(f, parent, "allow", &allow, err);
        if (rc == EVD_OK)
            rc = decode_patterns(f, parent, "deny", &deny, err);
        if (rc == EVD_OK)
            rc = evd_fields_enum(f, parent, "expose", 0, EXPOSE, COUNT(EXPOSE), &expose, err);
    }
    if (rc != EVD_OK) {
        json_decref(allow);
        json_decref(deny);
        return rc;
    }
    json_t *o = json_object();
    int bad = o == NULL;
    bad |= json_object_set_new(o, "allow", allow != NULL ? allow : json_array());
    bad |= json_object_set_new(o, "deny", deny != NULL ? deny : json_array());
    bad |= json_object_set_new(o, "expose", json_string(EXPOSE[expose < 0 ? 0 : expose]));
    if (bad) {
        json_decref(o);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    *out = o;
    return EVD_OK;
}

/* o NULL (absent or null) gives {"type":"text"}. */
static enum evd_code decode_output(const json_t *o, json_t **out, struct evd_err *err)
{
    int type = 0;
    json_t *schema = NULL;
    enum evd_code rc = EVD_OK;
    if (o != NULL) {
        rc = evd_fields_enum(o, "output", "type", EVD_F_REQUIRED, OUTPUT_TYPES, COUNT(OUTPUT_TYPES),
                             &type, err);
        if (rc == EVD_OK)
            rc = evd_fields_only(o, "output", type == 0 ? OUTPUT_TEXT_FIELDS : OUTPUT_JSON_FIELDS,
                                 err);
        if (rc == EVD_OK && type == 1) {
            rc = evd_fields_get(o, "output", "schema", EVD_F_ANY, &schema, err);
            if (rc == EVD_OK && json_is_null(schema))
                schema = NULL;
            if (rc == EVD_OK && schema != NULL && !json_is_object(schema) &&
                !json_is_boolean(schema))
                rc = evd_err_set(err, EVD_EINVAL, "output.schema must be an object or a boolean");
        }
    }
    if (rc != EVD_OK)
        return rc;
    json_t *n = json_object();
    int bad = n == NULL;
    bad |= json_object_set_new(n, "type", json_string(OUTPUT_TYPES[type]));
    if (schema != NULL)
        bad |= evd_fields_set_copy(n, "schema", schema);
    if (bad) {
        json_decref(n);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    *out = n;
    return EVD_OK;
}

/* Stage 1: shape and types of every member, building the normalized sub-objects. */
static enum evd_code decode_shape(const json_t *body, enum mode mode, struct start_parts *p,
                                  struct evd_err *err)
{
    json_t *v = NULL;
    bool normalized = mode == MODE_NORMALIZED;
    if (!json_is_object(body))
        return evd_err_set(err, EVD_EINVAL, "request body must be a JSON object");
    enum evd_code rc = EVD_OK;
    if (normalized)
        rc = evd_fields_only(body, "", NORMALIZED_FIELDS, err);
    if (rc == EVD_OK)
        rc = evd_fields_enum(body, "", "dimension", EVD_F_REQUIRED, DIMENSIONS, COUNT(DIMENSIONS),
                             &p->dimension, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "model", EVD_F_OBJECT | EVD_F_REQUIRED, &v, err);
    if (rc == EVD_OK)
        rc = decode_model(v, &p->model, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "control", EVD_F_OBJECT | EVD_F_REQUIRED, &v, err);
    if (rc == EVD_OK)
        rc = decode_variant(v, "control", &p->control, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "treatment", EVD_F_OBJECT | EVD_F_REQUIRED, &v, err);
    if (rc == EVD_OK)
        rc = decode_variant(v, "treatment", &p->treatment, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "evaluator", EVD_F_OBJECT | EVD_F_NULLABLE, &v, err);
    if (rc == EVD_OK && v != NULL)
        rc = decode_evaluator(v, &p->evaluator, err);
    if (rc == EVD_OK)
        rc =
            evd_fields_get(body, "", "runs",
                           EVD_F_INTEGER | (normalized ? EVD_F_REQUIRED : EVD_F_NULLABLE), &v, err);
    if (rc == EVD_OK)
        p->runs = v;
    if (rc == EVD_OK)
        rc = evd_fields_enum(body, "", "execution_order", normalized ? 0 : EVD_F_NULLABLE, ORDERS,
                             COUNT(ORDERS), &p->order, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "limits", EVD_F_OBJECT | (normalized ? EVD_F_REQUIRED : 0),
                            &v, err);
    if (rc == EVD_OK)
        rc = evd_limits_decode(v, &p->limits, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "functions",
                            EVD_F_OBJECT | (normalized ? EVD_F_REQUIRED : EVD_F_NULLABLE), &v, err);
    if (rc == EVD_OK)
        rc = evd_request_functions(v, "functions", &p->functions, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "output",
                            EVD_F_OBJECT | (normalized ? EVD_F_REQUIRED : EVD_F_NULLABLE), &v, err);
    if (rc == EVD_OK)
        rc = decode_output(v, &p->output, err);
    if (rc == EVD_OK) {
        p->metadata = json_object_get(body, "metadata");
        if (json_is_null(p->metadata))
            p->metadata = NULL;
    }
    if (rc == EVD_OK && !normalized) {
        rc = evd_fields_get(body, "", "concurrency", EVD_F_INTEGER | EVD_F_NULLABLE, &v, err);
        if (rc == EVD_OK)
            p->concurrency = v;
    }
    if (rc == EVD_OK && normalized) {
        rc = evd_fields_get(body, "", "source_evaluation_id", EVD_F_STRING | EVD_F_NULLABLE, &v,
                            err);
        if (rc == EVD_OK)
            p->source_id = json_string_value(v);
    }
    return rc;
}

/* Stage 2: the contract's rules, first failure wins. */
static enum evd_code check_rules(const struct start_parts *p, uint64_t max_runs,
                                 struct evd_err *err)
{
    const json_t *provider = json_object_get(p->model, "provider");
    const json_t *c_label = json_object_get(p->control, "label");
    const json_t *t_label = json_object_get(p->treatment, "label");
    const json_t *c_prompt = json_object_get(p->control, "prompt");
    const json_t *t_prompt = json_object_get(p->treatment, "prompt");
    const json_t *c_system = json_object_get(p->control, "system_prompt");
    const json_t *t_system = json_object_get(p->treatment, "system_prompt");

    if (is_blank(json_object_get(p->model, "model")))
        return evd_err_set(err, EVD_EINVAL, "model.model cannot be empty");
    if (provider != NULL && is_blank(provider))
        return evd_err_set(err, EVD_EINVAL, "model.provider cannot be empty when supplied");
    if (is_blank(c_prompt))
        return evd_err_set(err, EVD_EINVAL, "control.prompt cannot be empty");
    if (is_blank(t_prompt))
        return evd_err_set(err, EVD_EINVAL, "treatment.prompt cannot be empty");
    if (p->evaluator != NULL && is_blank(json_object_get(p->evaluator, "function_id")))
        return evd_err_set(err, EVD_EINVAL, "evaluator.function_id cannot be empty");
    if ((c_label != NULL && is_blank(c_label)) || (t_label != NULL && is_blank(t_label)))
        return evd_err_set(err, EVD_EINVAL, "variant labels cannot be empty when supplied");
    if (p->dimension == EVD_DIMENSION_PROMPT) {
        if (!same_optional_string(c_system, t_system))
            return evd_err_set(err, EVD_EINVAL,
                               "prompt comparison requires identical system prompts");
        if (same_string(c_prompt, t_prompt))
            return evd_err_set(err, EVD_EINVAL, "prompt comparison requires different prompts");
    } else {
        if (!same_string(c_prompt, t_prompt))
            return evd_err_set(err, EVD_EINVAL,
                               "system_prompt comparison requires identical prompts");
        if (same_optional_string(c_system, t_system))
            return evd_err_set(err, EVD_EINVAL,
                               "system_prompt comparison requires different system prompts");
    }
    if (p->runs != NULL) {
        json_int_t runs = json_integer_value(p->runs);
        if (runs < 1 || (uint64_t)runs > max_runs)
            return evd_err_set(err, EVD_EINVAL, "runs must be between 1 and %llu",
                               (unsigned long long)max_runs);
    }
    enum evd_code rc = evd_limits_validate(&p->limits, err);
    if (rc != EVD_OK)
        return rc;
    if (p->concurrency != NULL) {
        json_int_t c = json_integer_value(p->concurrency);
        if (c < 1 || c > (json_int_t)EVD_REQUEST_MAX_CONCURRENCY)
            return evd_err_set(err, EVD_EINVAL, "concurrency must be between 1 and %u",
                               EVD_REQUEST_MAX_CONCURRENCY);
    }
    return EVD_OK;
}

static json_t *assemble(const struct start_parts *p)
{
    json_t *n = json_object();
    int rc = 0;
    json_int_t runs = p->runs != NULL ? json_integer_value(p->runs) : EVD_REQUEST_DEFAULT_RUNS;
    rc |= json_object_set(n, "control", p->control);
    rc |= json_object_set_new(n, "dimension", json_string(DIMENSIONS[p->dimension]));
    if (p->evaluator != NULL)
        rc |= json_object_set(n, "evaluator", p->evaluator);
    rc |=
        json_object_set_new(n, "execution_order", json_string(ORDERS[p->order < 0 ? 0 : p->order]));
    rc |= json_object_set(n, "functions", p->functions);
    rc |= json_object_set_new(n, "limits", evd_limits_to_json(&p->limits));
    if (p->metadata != NULL)
        rc |= evd_fields_set_copy(n, "metadata", p->metadata);
    rc |= json_object_set(n, "model", p->model);
    rc |= json_object_set(n, "output", p->output);
    rc |= json_object_set_new(n, "runs", json_integer(runs));
    if (p->source_id != NULL)
        rc |= json_object_set_new(n, "source_evaluation_id", json_string(p->source_id));
    rc |= json_object_set(n, "treatment", p->treatment);
    if (rc != 0) {
        json_decref(n);
        return NULL;
    }
    return n;
}

/* Shared by start and the stored-request check. */
static enum evd_code decode(const json_t *body, enum mode mode, uint64_t max_runs,
                            json_t **normalized, uint32_t *concurrency, struct evd_err *err)
{
    struct start_parts p = {.dimension = -1, .order = -1};
    enum evd_code rc = decode_shape(body, mode, &p, err);
    if (rc == EVD_OK)
        rc = check_rules(&p, max_runs, err);
    if (rc == EVD_OK && normalized != NULL) {
        *normalized = assemble(&p);
        if (*normalized == NULL)
            rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    if (rc == EVD_OK && concurrency != NULL)
        *concurrency = p.concurrency != NULL ? (uint32_t)json_integer_value(p.concurrency)
                                             : EVD_REQUEST_DEFAULT_CONCURRENCY;
    parts_release(&p);
    return rc;
}

enum evd_code evd_request_start(const json_t *body, uint32_t max_runs, json_t **normalized,
                                uint32_t *concurrency, struct evd_err *err)
{
    *normalized = NULL;
    return decode(body, MODE_START, max_runs, normalized, concurrency, err);
}

enum evd_code evd_request_check_normalized(const json_t *normalized, struct evd_err *err)
{
    return decode(normalized, MODE_NORMALIZED, UINT32_MAX, NULL, NULL, err);
}

enum evd_code evd_request_view(const json_t *n, struct evd_request_view *out, struct evd_err *err)
{
    enum evd_code rc = evd_request_check_normalized(n, err);
    if (rc != EVD_OK)
        return rc;
    return evd_request_view_trusted(n, out, err);
}

enum evd_code evd_request_view_trusted(const json_t *n, struct evd_request_view *out,
                                       struct evd_err *err)
{
    memset(out, 0, sizeof(*out));
    evd_dimension_parse(evd_fields_str(n, "dimension"), &out->dimension);
    out->order = EVD_ORDER_CONTROL_FIRST;
    evd_order_parse(evd_fields_str(n, "execution_order"), &out->order);
    out->runs = (uint32_t)evd_fields_int(n, "runs", 0);
    out->model = json_object_get(n, "model");
    out->control = json_object_get(n, "control");
    out->treatment = json_object_get(n, "treatment");
    out->evaluator = json_object_get(n, "evaluator");
    if (json_is_null(out->evaluator))
        out->evaluator = NULL;
    if (out->evaluator != NULL) {
        out->evaluator_function_id = evd_fields_str(out->evaluator, "function_id");
        out->evaluator_arguments = json_object_get(out->evaluator, "arguments");
    }
    out->functions = json_object_get(n, "functions");
    out->output = json_object_get(n, "output");
    out->metadata = json_object_get(n, "metadata");
    if (json_is_null(out->metadata))
        out->metadata = NULL;
    out->source_evaluation_id = evd_fields_str(n, "source_evaluation_id");
    return evd_limits_decode(json_object_get(n, "limits"), &out->limits, err);
}

json_t *evd_request_rerun(const json_t *source, const char *source_id, bool reverse_order)
{
    json_t *n = json_deep_copy(source);
    if (n == NULL)
        return NULL;
    enum evd_order order = EVD_ORDER_CONTROL_FIRST;
    evd_order_parse(evd_fields_str(n, "execution_order"), &order);
    if (reverse_order)
        order = evd_order_reverse(order);
    int rc = 0;
    rc |= json_object_set_new(n, "execution_order", json_string(evd_order_name(order)));
    rc |= json_object_set_new(n, "source_evaluation_id", json_string(source_id));
    if (rc != 0) {
        json_decref(n);
        return NULL;
    }
    return n;
}

enum evd_code evd_request_rescore_args(const json_t *body, json_t **evaluator,
                                       struct evd_err *err)
{
    *evaluator = NULL;
    json_t *v = NULL;
    if (!json_is_object(body))
        return evd_err_set(err, EVD_EINVAL, "request body must be a JSON object");
    enum evd_code rc = evd_fields_only(body, "", RESCORE_FIELDS, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "evaluator", EVD_F_OBJECT | EVD_F_REQUIRED | EVD_F_NULLABLE,
                            &v, err);
    if (rc == EVD_OK)
        rc = decode_evaluator(v, evaluator, err);
    if (rc == EVD_OK && is_blank(json_object_get(*evaluator, "function_id")))
        rc = evd_err_set(err, EVD_EINVAL, "evaluator.function_id cannot be empty");
    if (rc != EVD_OK) {
        json_decref(*evaluator);
        *evaluator = NULL;
    }
    return rc;
}

static enum evd_code require_object(const json_t *body, struct evd_err *err)
{
    if (!json_is_object(body))
        return evd_err_set(err, EVD_EINVAL, "request body must be a JSON object");
    return EVD_OK;
}

enum evd_code evd_request_list(const json_t *body, uint32_t *limit, struct evd_err *err)
{
    json_t *v;
    enum evd_code rc = require_object(body, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "limit", EVD_F_INTEGER | EVD_F_NULLABLE, &v, err);
    if (rc != EVD_OK)
        return rc;
    if (v == NULL) {
        *limit = EVD_REQUEST_DEFAULT_LIST_LIMIT;
        return EVD_OK;
    }
    json_int_t l = json_integer_value(v);
    if (l < 1 || l > (json_int_t)EVD_REQUEST_MAX_LIST_LIMIT)
        return evd_err_set(err, EVD_EINVAL, "limit must be between 1 and %u",
                           EVD_REQUEST_MAX_LIST_LIMIT);
    *limit = (uint32_t)l;
    return EVD_OK;
}

enum evd_code evd_request_evaluation_id(const json_t *body, const char **evaluation_id,
                                        struct evd_err *err)
{
    json_t *v;
    enum evd_code rc = require_object(body, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "evaluation_id", EVD_F_STRING | EVD_F_REQUIRED, &v, err);
    if (rc == EVD_OK)
        *evaluation_id = json_string_value(v);
    return rc;
}

enum evd_code evd_request_rerun_args(const json_t *body, const char **evaluation_id,
                                     bool *reverse_order, struct evd_err *err)
{
    json_t *v;
    enum evd_code rc = evd_request_evaluation_id(body, evaluation_id, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "reverse_order", EVD_F_BOOL, &v, err);
    if (rc == EVD_OK)
        *reverse_order = json_is_true(v);
    return rc;
}

enum evd_code evd_request_step(const json_t *body, const char **evaluation_id, uint64_t *step,
                               struct evd_err *err)
{
    bool present;
    enum evd_code rc = evd_request_evaluation_id(body, evaluation_id, err);
    if (rc == EVD_OK)
        rc = evd_fields_uint(body, "", "step", EVD_F_REQUIRED, INT64_MAX, &present, step, err);
    return rc;
}

enum evd_code evd_request_wake(const json_t *body, const char **session_id, bool *terminal,
                               struct evd_err *err)
{
    json_t *sid, *term;
    enum evd_code rc = require_object(body, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "session_id", EVD_F_STRING, &sid, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "terminal", EVD_F_BOOL, &term, err);
    if (rc == EVD_OK) {
        *session_id = sid != NULL ? json_string_value(sid) : "";
        *terminal = json_is_true(term);
    }
    return rc;
}

enum evd_code evd_request_sweep(const json_t *body, struct evd_err *err)
{
    json_t *v;
    enum evd_code rc = require_object(body, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "scheduled_at", EVD_F_INTEGER | EVD_F_NULLABLE, &v, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "scheduled_time", EVD_F_STRING | EVD_F_NULLABLE, &v, err);
    return rc;
}

enum evd_code evd_request_evaluator_input(const json_t *body, struct evd_evaluator_input *out,
                                          struct evd_err *err)
{
    json_t *eid = NULL, *rid = NULL, *sid = NULL, *output = NULL, *metrics = NULL, *args = NULL,
           *transcript = NULL, *case_id = NULL;
    int role = -1;
    static const char *const ROLES[] = {"control", "treatment"};
    enum evd_code rc = require_object(body, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "evaluation_id", EVD_F_STRING | EVD_F_REQUIRED, &eid, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "run_id", EVD_F_STRING | EVD_F_REQUIRED, &rid, err);
    if (rc == EVD_OK)
        rc = evd_fields_enum(body, "", "role", EVD_F_REQUIRED, ROLES, COUNT(ROLES), &role, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "session_id", EVD_F_STRING | EVD_F_REQUIRED, &sid, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "output", EVD_F_ANY | EVD_F_REQUIRED, &output, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "metrics", EVD_F_OBJECT | EVD_F_REQUIRED, &metrics, err);
    if (rc == EVD_OK)
        rc = evd_metrics_check(metrics, "metrics", err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "arguments", EVD_F_ANY, &args, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "transcript", EVD_F_ARRAY | EVD_F_NULLABLE, &transcript, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "case_id", EVD_F_STRING | EVD_F_NULLABLE, &case_id, err);
    if (rc != EVD_OK)
        return rc;
    out->evaluation_id = json_string_value(eid);
    out->run_id = json_string_value(rid);
    out->session_id = json_string_value(sid);
    out->role = (enum evd_role)role;
    out->output = output;
    out->metrics = metrics;
    out->arguments = args;
    out->transcript = transcript;
    out->case_id = case_id != NULL ? json_string_value(case_id) : NULL;
    return EVD_OK;
}

/* ---- pieces shared with ad-hoc sessions ------------------------------------------------ */

enum evd_code evd_request_model(const json_t *model, json_t **out, struct evd_err *err)
{
    json_t *m = NULL;
    *out = NULL;
    if (!json_is_object(model))
        return evd_err_set(err, EVD_EINVAL, "model must be an object");
    enum evd_code rc = decode_model(model, &m, err);
    if (rc != EVD_OK)
        return rc;
    const json_t *provider = json_object_get(m, "provider");
    if (is_blank(json_object_get(m, "model")))
        rc = evd_err_set(err, EVD_EINVAL, "model.model cannot be empty");
    else if (provider != NULL && is_blank(provider))
        rc = evd_err_set(err, EVD_EINVAL, "model.provider cannot be empty when supplied");
    if (rc != EVD_OK) {
        json_decref(m);
        return rc;
    }
    *out = m;
    return EVD_OK;
}

enum evd_code evd_request_functions_or_default(const json_t *functions, json_t **out,
                                               struct evd_err *err)
{
    *out = NULL;
    if (functions != NULL && json_is_null(functions))
        functions = NULL;
    if (functions != NULL && !json_is_object(functions))
        return evd_err_set(err, EVD_EINVAL, "functions must be an object");
    return evd_request_functions(functions, "functions", out, err);
}

enum evd_code evd_request_output(const json_t *output, json_t **out, struct evd_err *err)
{
    *out = NULL;
    if (output != NULL && json_is_null(output))
        output = NULL;
    if (output != NULL && !json_is_object(output))
        return evd_err_set(err, EVD_EINVAL, "output must be an object");
    return decode_output(output, out, err);
}
