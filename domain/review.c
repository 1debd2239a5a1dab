/*
 * The agent review evaluator's arguments, verdict contract, prompts and answer (see
 * review.h). Pure; thread-safe; every allocation is returned to the caller.
 */
#include "domain/review.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "domain/fields.h"
#include "domain/text.h"

#define PARENT "evaluator.arguments"
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *const FIELDS[] = {
    "model",     "provider",       "instructions", "green_schema",   "red_schema",
    "functions", "thinking_level", "max_tokens",   "max_tool_calls", NULL};
static const char *const THINKING[] = {"minimal", "low", "medium", "high", "xhigh"};

static const char PREAMBLE[] =
    "You are a reviewer run by evald. You judge one finished agent run against the review "
    "instructions below and answer with a verdict: GREEN when the run meets them, RED when "
    "it does not. Use the functions offered to you when they help you check the run. Finish "
    "with the verdict in the required structured format; fill every field of the verdict you "
    "choose.";

static const char ELLIPSIS[] = "\xE2\x80\xA6"; /* U+2026 */

void evd_review_args_clear(struct evd_review_args *a)
{
    if (a == NULL)
        return;
    json_decref(a->functions);
    memset(a, 0, sizeof(*a));
}

/* A string member that must not be blank when present. */
static enum evd_code text_field(const json_t *args, const char *key, bool required,
                                const char **out, struct evd_err *err)
{
    json_t *v;
    enum evd_code rc =
        evd_fields_get(args, PARENT, key,
                       EVD_F_STRING | EVD_F_NULLABLE | (required ? EVD_F_REQUIRED : 0), &v, err);
    if (rc != EVD_OK)
        return rc;
    if (v != NULL && evd_text_is_blank(json_string_value(v), json_string_length(v)))
        return evd_err_set(err, EVD_EINVAL, PARENT ".%s cannot be empty", key);
    if (v != NULL && strlen(json_string_value(v)) != json_string_length(v))
        return evd_err_set(err, EVD_EINVAL, PARENT ".%s cannot contain NUL characters", key);
    *out = json_string_value(v);
    return EVD_OK;
}

enum evd_code evd_review_args_decode(const json_t *arguments, struct evd_review_args *out,
                                     struct evd_err *err)
{
    memset(out, 0, sizeof(*out));
    json_t *empty = NULL;
    json_t *v = NULL;
    int level = -1;
    enum evd_code rc = EVD_OK;
    if (arguments == NULL || json_is_null(arguments))
        arguments = empty = json_object();
    if (arguments == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    if (!json_is_object(arguments)) {
        rc = evd_err_set(err, EVD_EINVAL, PARENT " must be an object");
        goto out;
    }
    if ((rc = evd_fields_only(arguments, PARENT, FIELDS, err)) != EVD_OK ||
        (rc = text_field(arguments, "model", true, &out->model, err)) != EVD_OK ||
        (rc = text_field(arguments, "provider", false, &out->provider, err)) != EVD_OK ||
        (rc = text_field(arguments, "instructions", true, &out->instructions, err)) != EVD_OK)
        goto out;
    if (strlen(out->instructions) > EVD_REVIEW_MAX_INSTRUCTIONS) {
        rc = evd_err_set(err, EVD_EINVAL, PARENT ".instructions is longer than %d bytes",
                         EVD_REVIEW_MAX_INSTRUCTIONS);
        goto out;
    }
    if ((rc = evd_fields_get(arguments, PARENT, "green_schema", EVD_F_OBJECT | EVD_F_NULLABLE,
                             &out->green_schema, err)) != EVD_OK ||
        (rc = evd_fields_get(arguments, PARENT, "red_schema", EVD_F_OBJECT | EVD_F_NULLABLE,
                             &out->red_schema, err)) != EVD_OK ||
        (rc = evd_fields_get(arguments, PARENT, "functions", EVD_F_OBJECT | EVD_F_NULLABLE, &v,
                             err)) != EVD_OK ||
        (rc = evd_request_functions(v, PARENT ".functions", &out->functions, err)) != EVD_OK ||
        (rc = evd_fields_enum(arguments, PARENT, "thinking_level", EVD_F_NULLABLE, THINKING,
                              COUNT(THINKING), &level, err)) != EVD_OK ||
        (rc = evd_fields_uint(arguments, PARENT, "max_tokens", EVD_F_NULLABLE, (uint64_t)1 << 53,
                              &out->has_max_tokens, &out->max_tokens, err)) != EVD_OK ||
        (rc = evd_fields_uint(arguments, PARENT, "max_tool_calls", EVD_F_NULLABLE,
                              EVD_REVIEW_MAX_TOOL_CALLS, &out->has_max_tool_calls,
                              &out->max_tool_calls, err)) != EVD_OK)
        goto out;
    if (out->has_max_tokens && out->max_tokens == 0) {
        rc = evd_err_set(err, EVD_EINVAL, PARENT ".max_tokens must be greater than zero");
        goto out;
    }
    out->thinking_level = level >= 0 ? THINKING[level] : NULL;
out:
    if (rc != EVD_OK)
        evd_review_args_clear(out);
    json_decref(empty); /* borrowed strings of an empty object: none were kept */
    return rc;
}

struct evd_so_contract *evd_review_contract_new(const struct evd_review_args *a,
                                                struct evd_err *err)
{
    struct evd_err cerr = {EVD_OK, ""};
    struct evd_so_contract *c = evd_so_verdict_new(a->green_schema, a->red_schema, &cerr);
    if (c != NULL)
        return c;
    /* The schema layer names "GREEN schema" / "RED schema"; name the argument instead. */
    const char *m = cerr.msg;
    const char *field = NULL;
    if (strncmp(m, "GREEN schema", 12) == 0) {
        field = "green_schema";
        m += 12;
    } else if (strncmp(m, "RED schema", 10) == 0) {
        field = "red_schema";
        m += 10;
    }
    if (field == NULL)
        evd_err_set(err, cerr.code, "%s", cerr.msg);
    else
        evd_err_set(err, cerr.code, PARENT ".%s%s", field, m);
    return NULL;
}

json_t *evd_review_model(const struct evd_review_args *a)
{
    json_t *m = json_pack("{s:s, s:s}", "model", a->model, "system_prompt_strategy", "override");
    if (m == NULL)
        return NULL;
    if ((a->provider != NULL && json_object_set_new(m, "provider", json_string(a->provider))) ||
        (a->thinking_level != NULL &&
         json_object_set_new(m, "thinking_level", json_string(a->thinking_level)))) {
        json_decref(m);
        return NULL;
    }
    return m;
}

char *evd_review_system_prompt(const struct evd_review_args *a)
{
    struct evd_buf b = {0};
    if (evd_buf_printf(&b, "%s\n\nReview instructions:\n%s", PREAMBLE, a->instructions) != 0) {
        evd_buf_free(&b);
        return NULL;
    }
    return b.data;
}

/* "12", or "not reported" when the counter is absent. */
static int put_count(struct evd_buf *b, const char *label, const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (json_is_integer(v))
        return evd_buf_printf(b, "- %s: %" JSON_INTEGER_FORMAT "\n", label, json_integer_value(v));
    return evd_buf_printf(b, "- %s: not reported\n", label);
}

/* Appends the output, cut at a character boundary after EVD_REVIEW_MAX_OUTPUT_BYTES. */
static int put_output(struct evd_buf *b, const json_t *output)
{
    char *dumped = NULL;
    const char *text;
    size_t len;
    const char *kind;
    if (json_is_string(output)) {
        text = json_string_value(output);
        len = json_string_length(output);
        kind = "text";
    } else {
        dumped = json_dumps(output, JSON_INDENT(2) | JSON_ENCODE_ANY);
        if (dumped == NULL)
            return -1;
        text = dumped;
        len = strlen(dumped);
        kind = "JSON";
    }
    size_t shown = len;
    if (shown > EVD_REVIEW_MAX_OUTPUT_BYTES) {
        shown = EVD_REVIEW_MAX_OUTPUT_BYTES;
        while (shown > 0 && ((unsigned char)text[shown] & 0xC0) == 0x80)
            shown--; /* never split a UTF-8 sequence */
    }
    int rc =
        evd_buf_printf(b, "Final output (%s, %zu bytes):\n----- BEGIN OUTPUT -----\n", kind, len);
    rc |= evd_buf_append(b, text, shown);
    if (shown < len)
        rc |= evd_buf_printf(b, "%s\n[output cut: %zu of %zu bytes shown]", ELLIPSIS, shown, len);
    rc |= evd_buf_printf(b, "\n----- END OUTPUT -----\n\n");
    free(dumped);
    return rc;
}

char *evd_review_prompt(const struct evd_evaluator_input *in)
{
    struct evd_buf b = {0};
    const json_t *totals = json_object_get(in->metrics, "totals");
    const json_t *traces = json_object_get(in->metrics, "traces");
    json_t *cost = json_object_get(totals, "cost_usd");
    int rc = evd_buf_printf(&b,
                            "Review the final output of one agent run against your review "
                            "instructions.\n\nRun %s (%s) of evaluation %s, session %s.\n\n",
                            in->run_id, evd_role_name(in->role), in->evaluation_id, in->session_id);
    rc |= put_output(&b, in->output);
    rc |= evd_buf_printf(&b, "Run metrics:\n");
    rc |= put_count(&b, "model generations (turns)", totals, "turns");
    rc |= put_count(&b, "function calls", totals, "function_calls");
    rc |= put_count(&b, "failed function calls", totals, "function_call_errors");
    rc |= put_count(&b, "input tokens", totals, "input_tokens");
    rc |= put_count(&b, "output tokens", totals, "output_tokens");
    rc |= put_count(&b, "reasoning tokens", totals, "reasoning_tokens");
    if (json_is_number(cost))
        rc |= evd_buf_printf(&b, "- cost: $%.6f\n", json_number_value(cost));
    else
        rc |= evd_buf_printf(&b, "- cost: not reported\n");
    rc |= put_count(&b, "trace spans", traces, "span_count");
    rc |= put_count(&b, "failed spans", traces, "error_span_count");
    rc |= put_count(&b, "trace duration in ms", traces, "duration_ms");
    rc |= evd_buf_printf(&b, "\nAnswer with your verdict: GREEN if the run meets the review "
                             "instructions, RED if it does not, with that verdict's fields "
                             "filled in.");
    if (rc != 0) {
        evd_buf_free(&b);
        return NULL;
    }
    return b.data;
}

json_t *evd_review_response(const json_t *verdict, const char *model)
{
    const char *v = json_string_value(json_object_get(verdict, "verdict"));
    bool green = v != NULL && strcmp(v, "GREEN") == 0;
    char reason[320];
    snprintf(reason, sizeof(reason), "agent review by %.256s: %s", model, green ? "GREEN" : "RED");
    return json_pack("{s:b, s:f, s:s, s:O}", "passed", green, "score", green ? 1.0 : 0.0, "reason",
                     reason, "details", verdict);
}
