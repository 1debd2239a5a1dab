/*
 * Ad-hoc session requests, metrics sums and transcript views (see session.h).
 * Pure; thread-safe. Every builder owns what it creates until it returns it.
 */
#include "domain/session.h"

#include <stdio.h>
#include <string.h>

#include "domain/fields.h"
#include "domain/request.h"
#include "domain/text.h"

static const char *const CREATE_FIELDS[] = {
    "title", "model", "system_prompt", "prompt", "functions", "output", "limits", "metadata", NULL};
static const char *const MESSAGE_FIELDS[] = {"content", NULL};

void evd_session_request_clear(struct evd_session_request *c)
{
    if (c == NULL)
        return;
    json_decref(c->config);
    memset(c, 0, sizeof(*c));
}

/* Number of code points of well-formed UTF-8 (jansson guarantees it for strings). */
static size_t utf8_chars(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

enum evd_code evd_session_request_decode(const json_t *body, struct evd_session_request *out,
                                        struct evd_err *err)
{
    json_t *title, *model, *system_prompt, *prompt, *functions, *output, *limits, *metadata;
    json_t *nmodel = NULL, *nfunctions = NULL, *noutput = NULL, *nlimits = NULL, *config = NULL;
    memset(out, 0, sizeof(*out));
    if (!json_is_object(body))
        return evd_err_set(err, EVD_EINVAL, "request body must be a JSON object");
    enum evd_code rc = evd_fields_only(body, "", CREATE_FIELDS, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "title", EVD_F_STRING | EVD_F_NULLABLE, &title, err);
    if (rc == EVD_OK && title != NULL &&
        utf8_chars(json_string_value(title), json_string_length(title)) > EVD_SESSION_TITLE_MAX)
        rc = evd_err_set(err, EVD_EINVAL, "title must be at most %d characters",
                         EVD_SESSION_TITLE_MAX);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "model", EVD_F_OBJECT | EVD_F_REQUIRED, &model, err);
    if (rc == EVD_OK)
        rc = evd_request_model(model, &nmodel, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "system_prompt", EVD_F_STRING | EVD_F_NULLABLE,
                            &system_prompt, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "prompt", EVD_F_STRING, &prompt, err);
    if (rc == EVD_OK && prompt != NULL &&
        evd_text_is_blank(json_string_value(prompt), json_string_length(prompt)))
        rc = evd_err_set(err, EVD_EINVAL, "prompt cannot be empty");
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "functions", EVD_F_OBJECT | EVD_F_NULLABLE, &functions, err);
    if (rc == EVD_OK)
        rc = evd_request_functions_or_default(functions, &nfunctions, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "output", EVD_F_OBJECT | EVD_F_NULLABLE, &output, err);
    if (rc == EVD_OK)
        rc = evd_request_output(output, &noutput, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "limits", EVD_F_OBJECT | EVD_F_NULLABLE, &limits, err);
    if (rc == EVD_OK)
        rc = evd_limits_decode_execution(limits, "limits", &out->limits, err);
    if (rc == EVD_OK)
        rc = evd_limits_validate_at(&out->limits, "limits", err);
    if (rc != EVD_OK)
        goto out;
    metadata = json_object_get(body, "metadata");
    if (json_is_null(metadata))
        metadata = NULL;

    json_t *both = evd_limits_to_json(&out->limits);
    nlimits = both ? json_incref(json_object_get(both, "execution")) : NULL;
    json_decref(both);
    config = json_object();
    int bad = config == NULL || nlimits == NULL;
    bad |= json_object_set(config, "model", nmodel);
    bad |= json_object_set_new(config, "system_prompt",
                               system_prompt ? json_deep_copy(system_prompt) : json_null());
    bad |= json_object_set(config, "functions", nfunctions);
    bad |= json_object_set(config, "output", noutput);
    bad |= json_object_set(config, "limits", nlimits);
    if (metadata != NULL)
        bad |= evd_fields_set_copy(config, "metadata", metadata);
    if (bad) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    out->config = config;
    config = NULL;
    out->title = json_string_value(title);
    out->prompt = json_string_value(prompt);
out:
    json_decref(nmodel);
    json_decref(nfunctions);
    json_decref(noutput);
    json_decref(nlimits);
    json_decref(config);
    return rc;
}

enum evd_code evd_session_message_decode(const json_t *body, const char **content,
                                         struct evd_err *err)
{
    json_t *c;
    *content = NULL;
    if (!json_is_object(body))
        return evd_err_set(err, EVD_EINVAL, "request body must be a JSON object");
    enum evd_code rc = evd_fields_only(body, "", MESSAGE_FIELDS, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(body, "", "content", EVD_F_STRING | EVD_F_REQUIRED, &c, err);
    if (rc != EVD_OK)
        return rc;
    if (evd_text_is_blank(json_string_value(c), json_string_length(c)))
        return evd_err_set(err, EVD_EINVAL, "content cannot be empty");
    *content = json_string_value(c);
    return EVD_OK;
}

json_t *evd_session_harness_limits(const json_t *config)
{
    json_t *limits = json_object_get(config, "limits");
    return json_pack("{s:O}", "execution", limits ? limits : json_object());
}

/* ---- metrics sums ---------------------------------------------------------------------- */

static const char *const COUNTS[] = {"turns", "function_calls", "function_call_errors", NULL};
static const char *const OPTIONAL_COUNTS[] = {"input_tokens",      "output_tokens",
                                              "cache_read_tokens", "cache_write_tokens",
                                              "reasoning_tokens",  NULL};
static const char *const TRACE_COUNTS[] = {"trace_count", "span_count", "error_span_count",
                                           "duration_ms", NULL};

static json_int_t count_of(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? json_integer_value(v) : 0;
}

/* Sums the usage members of two totals-like objects (either may be NULL) into out. */
static int add_usage(json_t *out, const json_t *a, const json_t *b)
{
    int bad = 0;
    bool a_gen = count_of(a, "turns") > 0, b_gen = count_of(b, "turns") > 0;
    for (const char *const *k = COUNTS; *k; k++)
        bad |= json_object_set_new(out, *k, json_integer(count_of(a, *k) + count_of(b, *k)));
    for (const char *const *k = OPTIONAL_COUNTS; *k; k++) {
        json_t *va = json_object_get(a, *k), *vb = json_object_get(b, *k);
        bool ok =
            (a_gen || b_gen) && (!a_gen || json_is_integer(va)) && (!b_gen || json_is_integer(vb));
        if (ok)
            bad |= json_object_set_new(out, *k,
                                       json_integer((a_gen ? json_integer_value(va) : 0) +
                                                    (b_gen ? json_integer_value(vb) : 0)));
    }
    json_t *ca = json_object_get(a, "cost_usd"), *cb = json_object_get(b, "cost_usd");
    if ((a_gen || b_gen) && (!a_gen || json_is_number(ca)) && (!b_gen || json_is_number(cb)))
        bad |= json_object_set_new(out, "cost_usd",
                                   json_real((a_gen ? json_number_value(ca) : 0.0) +
                                             (b_gen ? json_number_value(cb) : 0.0)));
    return bad;
}

/* Traces of a metrics object when it has usable ones, else NULL (borrowed). */
static json_t *traces_of(const json_t *m)
{
    json_t *t = json_object_get(m, "traces");
    return json_is_object(t) ? t : NULL;
}

json_t *evd_session_metrics_add(const json_t *acc, const json_t *turn, const char *session_id,
                                bool complete)
{
    const json_t *ta = json_object_get(acc, "totals"), *tb = json_object_get(turn, "totals");
    json_t *totals = json_pack("{s:i}", "sessions", 1);
    json_t *entry =
        json_pack("{s:s, s:n, s:i}", "session_id", session_id, "parent_session_id", "depth", 0);
    json_t *out = NULL, *traces = json_null();
    int bad = totals == NULL || entry == NULL;
    if (!bad)
        bad |= add_usage(totals, ta, tb) | add_usage(entry, ta, tb);
    json_t *xa = traces_of(acc), *xb = traces_of(turn);
    if (!bad && (acc == NULL || xa != NULL) && (turn == NULL || xb != NULL) &&
        (xa != NULL || xb != NULL)) {
        json_t *tr = json_object(), *te = json_pack("{s:s, s:n, s:i}", "session_id", session_id,
                                                    "parent_session_id", "depth", 0);
        bad |= tr == NULL || te == NULL;
        for (const char *const *k = TRACE_COUNTS; !bad && *k; k++) {
            json_int_t v = count_of(xa, *k) + count_of(xb, *k);
            bad |= json_object_set_new(tr, *k, json_integer(v));
            bad |= json_object_set_new(te, *k, json_integer(v));
        }
        if (!bad)
            bad |= json_object_set_new(tr, "by_session", json_pack("[O]", te));
        json_decref(te);
        traces = tr;
    }
    if (!bad)
        out = json_pack("{s:s, s:b, s:O, s:[O], s:O}", "root_session_id", session_id, "complete",
                        complete, "totals", totals, "by_session", entry, "traces", traces);
    json_decref(totals);
    json_decref(entry);
    json_decref(traces);
    return out;
}

/* ---- transcript view --------------------------------------------------------------------- */

static json_t *usage_view(const json_t *gen)
{
    static const char *const keys[] = {"input_tokens",      "output_tokens",
                                       "cache_read_tokens", "cache_write_tokens",
                                       "reasoning_tokens",  NULL};
    json_t *u = json_object_get(gen, "usage");
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    for (const char *const *k = keys; *k; k++) {
        json_t *v = json_object_get(u, *k);
        json_object_set_new(o, *k, json_is_integer(v) ? json_incref(v) : json_null());
    }
    json_t *c = json_object_get(gen, "cost_usd");
    json_object_set_new(o, "cost_usd", json_is_number(c) ? json_incref(c) : json_null());
    return o;
}

/* The function-call entry of a harness transcript with this call id, or NULL (borrowed). */
static json_t *find_call(const json_t *fcalls, const char *call_id)
{
    size_t i;
    json_t *f;
    json_array_foreach(fcalls, i, f)
    {
        const char *id = json_string_value(json_object_get(f, "call_id"));
        if (id != NULL && call_id != NULL && strcmp(id, call_id) == 0)
            return f;
    }
    return NULL;
}

static bool generation_ok(const json_t *gen)
{
    const char *st = json_string_value(json_object_get(gen, "status"));
    return st != NULL && strcmp(st, "ok") == 0;
}

size_t evd_session_transcript_messages(const json_t *transcript)
{
    size_t n = 0, i;
    json_t *g;
    json_array_foreach(json_object_get(transcript, "generations"), i, g) n += generation_ok(g);
    return n + json_array_size(json_object_get(transcript, "function_calls"));
}

/* Appends the assistant message of one generation and the results of its calls. */
static int add_generation(json_t *out, const char *turn_id, const json_t *gen, const json_t *fcalls)
{
    json_int_t turn = json_integer_value(json_object_get(gen, "turn"));
    json_int_t at = json_integer_value(json_object_get(gen, "started_at_ms")) +
                    json_integer_value(json_object_get(gen, "latency_ms"));
    const char *model = json_string_value(json_object_get(gen, "response_model"));
    if (model == NULL || model[0] == '\0')
        model = json_string_value(json_object_get(gen, "model"));
    const char *text = json_string_value(json_object_get(gen, "text"));
    json_t *tool_calls = json_object_get(gen, "tool_calls");
    json_t *calls = json_array();
    json_t *results = json_array();
    int bad = calls == NULL || results == NULL;
    size_t i;
    json_t *tc;
    json_array_foreach(tool_calls, i, tc)
    {
        const char *id = json_string_value(json_object_get(tc, "id"));
        json_t *f = find_call(fcalls, id);
        const char *fid = json_string_value(json_object_get(f, "function_id"));
        if (fid == NULL)
            fid = json_string_value(json_object_get(tc, "name"));
        json_t *args = f ? json_object_get(f, "arguments") : json_object_get(tc, "arguments");
        bad |= json_array_append_new(calls, json_pack("{s:s, s:s, s:O}", "call_id", id ? id : "",
                                                      "function_id", fid ? fid : "", "arguments",
                                                      args ? args : json_null()));
    }
    json_array_foreach(fcalls, i, tc)
    {
        if (json_integer_value(json_object_get(tc, "turn")) != turn)
            continue;
        json_t *result = json_object_get(tc, "result");
        const char *error = json_string_value(json_object_get(tc, "error"));
        bad |= json_array_append_new(
            results,
            json_pack(
                "{s:s, s:s, s:I, s:s, s:s, s:O, s:s?, s:I}", "turn_id", turn_id, "role", "function",
                "created_at", (json_int_t)json_integer_value(json_object_get(tc, "started_at_ms")),
                "call_id", json_string_value(json_object_get(tc, "call_id")) ?: "", "function_id",
                json_string_value(json_object_get(tc, "function_id")) ?: "", "result",
                result && !error ? result : json_null(), "error", error, "duration_ms",
                (json_int_t)json_integer_value(json_object_get(tc, "duration_ms"))));
        if (!bad && error == NULL)
            bad |= json_object_set_new(json_array_get(results, json_array_size(results) - 1),
                                       "error", json_null());
    }
    json_t *content = text != NULL && (text[0] != '\0' || json_array_size(calls) == 0)
                          ? json_string(text)
                          : json_null();
    if (!bad)
        bad |= json_array_append_new(
            out, json_pack("{s:s, s:s, s:I, s:s, s:o, s:O, s:o}", "turn_id", turn_id, "role",
                           "assistant", "created_at", at, "model", model ? model : "", "content",
                           content, "function_calls", calls, "usage", usage_view(gen)));
    else
        json_decref(content);
    json_array_extend(out, results);
    json_decref(calls);
    json_decref(results);
    return bad;
}

json_t *evd_session_messages(const json_t *turns)
{
    json_t *out = json_array();
    int bad = out == NULL;
    size_t i;
    json_t *t;
    json_array_foreach(turns, i, t)
    {
        const char *turn_id = json_string_value(json_object_get(t, "turn_id"));
        const char *prompt = json_string_value(json_object_get(t, "prompt"));
        if (turn_id == NULL || prompt == NULL)
            continue;
        bad |= json_array_append_new(
            out, json_pack("{s:s, s:s, s:I, s:s}", "turn_id", turn_id, "role", "user", "created_at",
                           (json_int_t)json_integer_value(json_object_get(t, "created_at")),
                           "content", prompt));
        json_t *tr = json_object_get(t, "transcript");
        json_t *fcalls = json_object_get(tr, "function_calls");
        size_t j;
        json_t *g;
        json_array_foreach(json_object_get(tr, "generations"), j, g)
        {
            if (generation_ok(g))
                bad |= add_generation(out, turn_id, g, fcalls);
        }
    }
    json_array_foreach(out, i, t) bad |=
        json_object_set_new(t, "index", json_integer((json_int_t)i));
    if (bad) {
        json_decref(out);
        return NULL;
    }
    return out;
}

const char *evd_session_status_for_turn(const char *turn_status)
{
    if (turn_status == NULL)
        return "idle";
    if (strcmp(turn_status, "queued") == 0 || strcmp(turn_status, "running") == 0)
        return "working";
    if (strcmp(turn_status, "completed") == 0)
        return "done";
    if (strcmp(turn_status, "failed") == 0)
        return "error";
    return "cancelled";
}
