/*
 * The stub's script: validation and compilation of the JSON document of rules into
 * plain C structs (so that request threads never touch a shared json_t), and rule
 * matching. A compiled script is immutable except for rule hit counters, which the
 * server changes under its lock (stub_script_pick).
 */
#include "stub/stub.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"

#define LATENCY_MAX_MS 600000

/* Formats a field path for messages; a path cut short is still a useful message. */
static void field_path(char *out, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void field_path(char *out, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(out, n, fmt, ap);
    va_end(ap);
    if (w < 0)
        out[0] = '\0';
}

static const char *const DEFAULT_MODELS[] = {"stub-model", "stub-model-mini"};

static bool only_keys(json_t *obj, const char *const *allowed, const char *path,
                      struct evd_err *err)
{
    const char *key = evd_json_unknown_member(obj, allowed);
    if (key != NULL)
        evd_err_set(err, EVD_EINVAL, "%s: unknown field \"%s\"", path, key);
    return key == NULL;
}

/* Copies an optional string field into *out; false (err set) when of another type. */
static bool opt_str(json_t *obj, const char *key, const char *path, char **out, struct evd_err *err)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (v == NULL)
        return true;
    if (!json_is_string(v)) {
        evd_err_set(err, EVD_EINVAL, "%s.%s must be a string", path, key);
        return false;
    }
    *out = strdup(json_string_value(v));
    if (*out == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        return false;
    }
    return true;
}

/* Reads an optional integer in [lo, hi] into *out (left alone when absent). */
static bool opt_int(json_t *obj, const char *key, const char *path, int64_t lo, int64_t hi,
                    int64_t *out, bool *present, struct evd_err *err)
{
    json_t *v = json_object_get(obj, key);
    if (present != NULL)
        *present = v != NULL;
    if (v == NULL)
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        evd_err_set(err, EVD_EINVAL, "%s.%s must be an integer between %lld and %lld", path, key,
                    (long long)lo, (long long)hi);
        return false;
    }
    *out = (int64_t)json_integer_value(v);
    return true;
}

static bool parse_when(json_t *when, const char *path, struct stub_match *m, struct evd_err *err)
{
    static const char *const keys[] = {"api",
                                       "model",
                                       "prompt_contains",
                                       "system_contains",
                                       "has_tool_result",
                                       "tool_result_contains",
                                       "session",
                                       NULL};
    m->api = -1;
    m->has_tool_result = -1;
    if (when == NULL)
        return true;
    if (!json_is_object(when)) {
        evd_err_set(err, EVD_EINVAL, "%s must be an object", path);
        return false;
    }
    if (!only_keys(when, keys, path, err))
        return false;
    json_t *api = json_object_get(when, "api");
    if (api != NULL) {
        const char *s = json_string_value(api);
        if (s != NULL && strcmp(s, "responses") == 0)
            m->api = STUB_API_RESPONSES;
        else if (s != NULL && strcmp(s, "chat") == 0)
            m->api = STUB_API_CHAT;
        else if (s != NULL && strcmp(s, "messages") == 0)
            m->api = STUB_API_MESSAGES;
        else {
            evd_err_set(err, EVD_EINVAL, "%s.api must be \"responses\", \"chat\" or \"messages\"",
                        path);
            return false;
        }
    }
    json_t *htr = json_object_get(when, "has_tool_result");
    if (htr != NULL) {
        if (!json_is_boolean(htr)) {
            evd_err_set(err, EVD_EINVAL, "%s.has_tool_result must be a boolean", path);
            return false;
        }
        m->has_tool_result = json_is_true(htr) ? 1 : 0;
    }
    return opt_str(when, "model", path, &m->model, err) &&
           opt_str(when, "prompt_contains", path, &m->prompt_contains, err) &&
           opt_str(when, "system_contains", path, &m->system_contains, err) &&
           opt_str(when, "tool_result_contains", path, &m->tool_result_contains, err) &&
           opt_str(when, "session", path, &m->session, err);
}

static bool parse_fault(json_t *f, const char *path, struct stub_action *a, struct evd_err *err)
{
    static const char *const keys[] = {"status",    "retry_after_s", "retry_after_ms",
                                       "message",   "stall",         "truncate",
                                       "malformed", "header_bytes",  NULL};
    static const struct {
        const char *name;
        enum stub_fault_kind kind;
    } flags[] = {{"stall", STUB_FAULT_STALL},
                 {"truncate", STUB_FAULT_TRUNCATE},
                 {"malformed", STUB_FAULT_MALFORMED}};
    a->retry_after_s = -1;
    a->retry_after_ms = -1;
    if (f == NULL)
        return true;
    if (!json_is_object(f)) {
        evd_err_set(err, EVD_EINVAL, "%s must be an object", path);
        return false;
    }
    if (!only_keys(f, keys, path, err))
        return false;
    int kinds = 0;
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        json_t *v = json_object_get(f, flags[i].name);
        if (v == NULL)
            continue;
        if (!json_is_true(v)) {
            evd_err_set(err, EVD_EINVAL, "%s.%s must be true when present", path, flags[i].name);
            return false;
        }
        a->fault = flags[i].kind;
        kinds++;
    }
    bool has_status = false;
    int64_t status = 0;
    if (!opt_int(f, "status", path, 400, 599, &status, &has_status, err))
        return false;
    if (has_status) {
        a->fault = STUB_FAULT_STATUS;
        a->fault_status = (int)status;
        kinds++;
    }
    bool has_header = false;
    if (!opt_int(f, "header_bytes", path, 1, STUB_MAX_HEADER_BYTES, &a->header_bytes, &has_header,
                 err))
        return false;
    if (has_header) {
        a->fault = STUB_FAULT_HEADER;
        kinds++;
    }
    if (kinds != 1) {
        evd_err_set(err, EVD_EINVAL,
                    "%s needs exactly one of \"status\", \"stall\", \"truncate\", "
                    "\"malformed\", \"header_bytes\"",
                    path);
        return false;
    }
    if (!has_status &&
        (json_object_get(f, "retry_after_s") != NULL ||
         json_object_get(f, "retry_after_ms") != NULL || json_object_get(f, "message") != NULL)) {
        evd_err_set(err, EVD_EINVAL,
                    "%s: retry_after_s, retry_after_ms and message need \"status\"", path);
        return false;
    }
    return opt_int(f, "retry_after_s", path, 0, 86400, &a->retry_after_s, NULL, err) &&
           opt_int(f, "retry_after_ms", path, 0, 86400000, &a->retry_after_ms, NULL, err) &&
           opt_str(f, "message", path, &a->fault_message, err);
}

static bool parse_calls(json_t *calls, const char *path, struct stub_action *a, struct evd_err *err)
{
    if (!json_is_array(calls) || json_array_size(calls) == 0) {
        evd_err_set(err, EVD_EINVAL, "%s must be a non-empty array", path);
        return false;
    }
    a->calls = calloc(json_array_size(calls), sizeof(*a->calls));
    if (a->calls == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        return false;
    }
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c)
    {
        static const char *const keys[] = {"name", "arguments", NULL};
        char sub[96];
        field_path(sub, sizeof(sub), "%s[%zu]", path, i);
        if (!json_is_object(c)) {
            evd_err_set(err, EVD_EINVAL, "%s must be an object", sub);
            return false;
        }
        if (!only_keys(c, keys, sub, err))
            return false;
        json_t *name = json_object_get(c, "name");
        if (!json_is_string(name) || json_string_length(name) == 0) {
            evd_err_set(err, EVD_EINVAL, "%s.name must be a non-empty string", sub);
            return false;
        }
        json_t *args = json_object_get(c, "arguments");
        if (args != NULL && !json_is_object(args)) {
            evd_err_set(err, EVD_EINVAL, "%s.arguments must be an object", sub);
            return false;
        }
        a->ncalls++;
        a->calls[i].name = strdup(json_string_value(name));
        a->calls[i].arguments =
            args != NULL ? json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("{}");
        if (a->calls[i].name == NULL || a->calls[i].arguments == NULL) {
            evd_err_set(err, EVD_ENOMEM, "out of memory");
            return false;
        }
    }
    return true;
}

static bool parse_reply(json_t *r, const char *path, struct stub_action *a, struct evd_err *err)
{
    static const char *const keys[] = {"text", "json", "tool_calls", "refusal", "incomplete", NULL};
    if (r == NULL)
        return true;
    if (!json_is_object(r)) {
        evd_err_set(err, EVD_EINVAL, "%s must be an object", path);
        return false;
    }
    if (!only_keys(r, keys, path, err))
        return false;
    json_t *text = json_object_get(r, "text");
    json_t *js = json_object_get(r, "json");
    json_t *calls = json_object_get(r, "tool_calls");
    json_t *refusal = json_object_get(r, "refusal");
    json_t *incomplete = json_object_get(r, "incomplete");
    if (text == NULL && js == NULL && calls == NULL && refusal == NULL) {
        evd_err_set(err, EVD_EINVAL,
                    "%s needs one of \"text\", \"json\", \"tool_calls\", \"refusal\"", path);
        return false;
    }
    if (text != NULL && js != NULL) {
        evd_err_set(err, EVD_EINVAL, "%s: \"text\" and \"json\" cannot both be given", path);
        return false;
    }
    if (refusal != NULL && (text != NULL || js != NULL || calls != NULL)) {
        evd_err_set(err, EVD_EINVAL, "%s: \"refusal\" stands alone", path);
        return false;
    }
    if (incomplete != NULL && !json_is_boolean(incomplete)) {
        evd_err_set(err, EVD_EINVAL, "%s.incomplete must be a boolean", path);
        return false;
    }
    a->has_reply = true;
    a->incomplete = json_is_true(incomplete);
    if (text != NULL && !opt_str(r, "text", path, &a->text, err))
        return false;
    if (refusal != NULL && !opt_str(r, "refusal", path, &a->refusal, err))
        return false;
    if (js != NULL) {
        a->text = json_dumps(js, JSON_COMPACT | JSON_ENCODE_ANY);
        if (a->text == NULL) {
            evd_err_set(err, EVD_ENOMEM, "out of memory");
            return false;
        }
    }
    char sub[96];
    field_path(sub, sizeof(sub), "%s.tool_calls", path);
    return calls == NULL || parse_calls(calls, sub, a, err);
}

static bool parse_usage(json_t *u, const char *path, struct stub_usage *us, struct evd_err *err)
{
    static const char *const keys[] = {"input_tokens",  "cached_tokens",    "cache_write_tokens",
                                       "output_tokens", "reasoning_tokens", NULL};
    if (u == NULL)
        return true;
    if (!json_is_object(u)) {
        evd_err_set(err, EVD_EINVAL, "%s must be an object", path);
        return false;
    }
    if (!only_keys(u, keys, path, err))
        return false;
    const int64_t max = (int64_t)1 << 40;
    us->set = true;
    if (!opt_int(u, "input_tokens", path, 0, max, &us->input, NULL, err) ||
        !opt_int(u, "cached_tokens", path, 0, max, &us->cached, NULL, err) ||
        !opt_int(u, "cache_write_tokens", path, 0, max, &us->cache_write, NULL, err) ||
        !opt_int(u, "output_tokens", path, 0, max, &us->output, NULL, err) ||
        !opt_int(u, "reasoning_tokens", path, 0, max, &us->reasoning, NULL, err))
        return false;
    if (us->reasoning > us->output) {
        evd_err_set(err, EVD_EINVAL,
                    "%s.reasoning_tokens must not exceed output_tokens (reasoning "
                    "is part of output)",
                    path);
        return false;
    }
    return true;
}

static bool parse_action(json_t *obj, const char *path, struct stub_action *a, struct evd_err *err)
{
    char sub[96];
    a->retry_after_s = -1;
    a->retry_after_ms = -1;
    if (!opt_int(obj, "latency_ms", path, 0, LATENCY_MAX_MS, &a->latency_ms, &a->has_latency, err))
        return false;
    field_path(sub, sizeof(sub), "%s.fault", path);
    if (!parse_fault(json_object_get(obj, "fault"), sub, a, err))
        return false;
    field_path(sub, sizeof(sub), "%s.reply", path);
    if (!parse_reply(json_object_get(obj, "reply"), sub, a, err))
        return false;
    field_path(sub, sizeof(sub), "%s.usage", path);
    return parse_usage(json_object_get(obj, "usage"), sub, &a->usage, err);
}

static void free_action(struct stub_action *a)
{
    free(a->fault_message);
    free(a->text);
    free(a->refusal);
    for (size_t i = 0; i < a->ncalls; i++) {
        free(a->calls[i].name);
        free(a->calls[i].arguments);
    }
    free(a->calls);
}

static void free_match(struct stub_match *m)
{
    free(m->model);
    free(m->prompt_contains);
    free(m->system_contains);
    free(m->tool_result_contains);
    free(m->session);
}

void stub_script_free(struct stub_script *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->nrules; i++) {
        free_match(&s->rules[i].when);
        free_action(&s->rules[i].act);
    }
    free(s->rules);
    free_action(&s->dflt);
    for (size_t i = 0; i < s->nmodels; i++)
        free(s->models[i]);
    free(s->models);
    json_decref(s->source);
    free(s);
}

static bool set_models(struct stub_script *s, json_t *models, struct evd_err *err)
{
    size_t n = models != NULL ? json_array_size(models) : sizeof(DEFAULT_MODELS) / sizeof(char *);
    if (models != NULL && (!json_is_array(models) || n == 0)) {
        evd_err_set(err, EVD_EINVAL, "models must be a non-empty array of strings");
        return false;
    }
    s->models = calloc(n, sizeof(char *));
    if (s->models == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        const char *name = DEFAULT_MODELS[i < 2 ? i : 0];
        if (models != NULL) {
            name = json_string_value(json_array_get(models, i));
            if (name == NULL || name[0] == '\0') {
                evd_err_set(err, EVD_EINVAL, "models[%zu] must be a non-empty string", i);
                return false;
            }
        }
        s->models[i] = strdup(name);
        if (s->models[i] == NULL) {
            evd_err_set(err, EVD_ENOMEM, "out of memory");
            return false;
        }
        s->nmodels++;
    }
    return true;
}

struct stub_script *stub_script_parse(json_t *doc, struct evd_err *err)
{
    static const char *const top[] = {"rules", "default", "models", "rate_limit", NULL};
    static const char *const rl_keys[] = {"requests", "window_ms", NULL};
    static const char *const rule_keys[] = {"when",  "times", "latency_ms", "fault",
                                            "reply", "usage", NULL};
    static const char *const dflt_keys[] = {"latency_ms", "fault", "reply", "usage", NULL};
    struct stub_script *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        return NULL;
    }
    s->refs = 1;
    s->dflt.retry_after_s = s->dflt.retry_after_ms = -1;
    if (!json_is_object(doc)) {
        evd_err_set(err, EVD_EINVAL, "the script must be a JSON object");
        goto fail;
    }
    if (!only_keys(doc, top, "script", err))
        goto fail;
    json_t *rules = json_object_get(doc, "rules");
    if (rules != NULL && !json_is_array(rules)) {
        evd_err_set(err, EVD_EINVAL, "rules must be an array");
        goto fail;
    }
    if (json_array_size(rules) > 0) {
        s->rules = calloc(json_array_size(rules), sizeof(*s->rules));
        if (s->rules == NULL) {
            evd_err_set(err, EVD_ENOMEM, "out of memory");
            goto fail;
        }
    }
    size_t i;
    json_t *r;
    json_array_foreach(rules, i, r)
    {
        char path[64];
        field_path(path, sizeof(path), "rules[%zu]", i);
        struct stub_rule *rule = &s->rules[i];
        s->nrules++;
        rule->times = -1;
        rule->act.retry_after_s = rule->act.retry_after_ms = -1;
        if (!json_is_object(r)) {
            evd_err_set(err, EVD_EINVAL, "%s must be an object", path);
            goto fail;
        }
        if (!only_keys(r, rule_keys, path, err))
            goto fail;
        char sub[80];
        field_path(sub, sizeof(sub), "%s.when", path);
        if (!parse_when(json_object_get(r, "when"), sub, &rule->when, err))
            goto fail;
        if (!opt_int(r, "times", path, 1, INT64_MAX, &rule->times, NULL, err))
            goto fail;
        if (!parse_action(r, path, &rule->act, err))
            goto fail;
    }
    json_t *dflt = json_object_get(doc, "default");
    if (dflt != NULL) {
        if (!json_is_object(dflt)) {
            evd_err_set(err, EVD_EINVAL, "default must be an object");
            goto fail;
        }
        if (!only_keys(dflt, dflt_keys, "default", err) ||
            !parse_action(dflt, "default", &s->dflt, err))
            goto fail;
        s->has_default = true;
    }
    if (!set_models(s, json_object_get(doc, "models"), err))
        goto fail;
    json_t *rl = json_object_get(doc, "rate_limit");
    if (rl != NULL) {
        bool has_n = false, has_w = false;
        if (!json_is_object(rl)) {
            evd_err_set(err, EVD_EINVAL, "rate_limit must be an object");
            goto fail;
        }
        if (!only_keys(rl, rl_keys, "rate_limit", err) ||
            !opt_int(rl, "requests", "rate_limit", 1, 100000, &s->rl_requests, &has_n, err) ||
            !opt_int(rl, "window_ms", "rate_limit", 1, 3600000, &s->rl_window_ms, &has_w, err))
            goto fail;
        if (!has_n || !has_w) {
            evd_err_set(err, EVD_EINVAL, "rate_limit needs requests and window_ms");
            goto fail;
        }
    }
    s->source = json_deep_copy(doc);
    if (s->source == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto fail;
    }
    return s;
fail:
    stub_script_free(s);
    return NULL;
}

struct stub_script *stub_script_builtin(void)
{
    json_t *doc = json_object();
    struct stub_script *s = doc != NULL ? stub_script_parse(doc, NULL) : NULL;
    json_decref(doc);
    return s;
}

static bool contains(const char *hay, const char *needle)
{
    return needle == NULL || strstr(hay != NULL ? hay : "", needle) != NULL;
}

static bool matches(const struct stub_match *m, const struct stub_view *v)
{
    if (m->api >= 0 && m->api != (int)v->api)
        return false;
    if (m->model != NULL && (v->model == NULL || strcmp(m->model, v->model) != 0))
        return false;
    if (m->session != NULL && (v->session == NULL || strcmp(m->session, v->session) != 0))
        return false;
    if (m->has_tool_result >= 0 && m->has_tool_result != (v->has_tool_result ? 1 : 0))
        return false;
    if (m->tool_result_contains != NULL &&
        (!v->has_tool_result || !contains(v->tool_results, m->tool_result_contains)))
        return false;
    return contains(v->prompt, m->prompt_contains) && contains(v->system, m->system_contains);
}

int stub_script_pick(struct stub_script *s, const struct stub_view *v)
{
    for (size_t i = 0; i < s->nrules; i++) {
        struct stub_rule *r = &s->rules[i];
        if (r->times >= 0 && r->hits >= (uint64_t)r->times)
            continue;
        if (!matches(&r->when, v))
            continue;
        r->hits++;
        return (int)i;
    }
    return -1;
}
