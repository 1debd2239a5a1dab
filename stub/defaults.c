/*
 * Built-in behaviour of the stub when no rule decides: deterministic replies derived
 * from the request text (docs/stub.md "Built-in replies"), derived usage, built-in
 * latency and a minimal instance of a requested JSON Schema. Pure functions.
 */
#include "stub/stub.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define RESULT_ECHO_MAX 200
#define INSTANCE_DEPTH_MAX 16

void stub_out_free(struct stub_out *o)
{
    if (o == NULL)
        return;
    free(o->text);
    free(o->refusal);
    for (size_t i = 0; i < o->ncalls; i++) {
        free(o->calls[i].name);
        free(o->calls[i].arguments);
    }
    free(o->calls);
    memset(o, 0, sizeof(*o));
}

static char *dup_or_null(const char *s, bool *oom)
{
    if (s == NULL)
        return NULL;
    char *d = strdup(s);
    if (d == NULL)
        *oom = true;
    return d;
}

enum evd_code stub_out_from_action(const struct stub_action *a, struct stub_out *o)
{
    bool oom = false;
    memset(o, 0, sizeof(*o));
    o->text = dup_or_null(a->text, &oom);
    o->refusal = dup_or_null(a->refusal, &oom);
    o->incomplete = a->incomplete;
    o->usage = a->usage;
    if (a->ncalls > 0) {
        o->calls = calloc(a->ncalls, sizeof(*o->calls));
        if (o->calls == NULL)
            oom = true;
        for (size_t i = 0; o->calls != NULL && i < a->ncalls; i++) {
            o->ncalls++;
            o->calls[i].name = dup_or_null(a->calls[i].name, &oom);
            o->calls[i].arguments = dup_or_null(a->calls[i].arguments, &oom);
        }
    }
    if (oom) {
        stub_out_free(o);
        return EVD_ENOMEM;
    }
    return EVD_OK;
}

/* 64-bit FNV-1a, to derive stable small numbers from text. */
static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; s != NULL && *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

int64_t stub_default_latency_ms(const struct stub_view *v)
{
    uint64_t h = fnv1a(1469598103934665603ull, v->prompt);
    h = fnv1a(h, "\n");
    h = fnv1a(h, v->session);
    return 20 + (int64_t)(h % 41);
}

static int64_t ceil_div4(size_t n)
{
    return (int64_t)((n + 3) / 4);
}

void stub_usage_derive(const struct stub_view *v, struct stub_out *o)
{
    if (o->usage.set)
        return;
    size_t out =
        (o->text != NULL ? strlen(o->text) : 0) + (o->refusal != NULL ? strlen(o->refusal) : 0);
    for (size_t i = 0; i < o->ncalls; i++)
        out += strlen(o->calls[i].name) + strlen(o->calls[i].arguments);
    o->usage.set = true;
    o->usage.input = 8 + ceil_div4(v->input_chars);
    o->usage.cached = 0;
    o->usage.cache_write = 0;
    o->usage.output = ceil_div4(out) > 0 ? ceil_div4(out) : 1;
    o->usage.reasoning = 0;
}

/* Case-insensitive strstr. */
static const char *find_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0)
            return hay;
    return NULL;
}

/*
 * The phrase after `at` up to the end of its line, trimmed, without one final period
 * and without surrounding quotes. New string or NULL (no memory, or empty).
 */
static char *phrase(const char *at)
{
    size_t n = strcspn(at, "\n");
    while (n > 0 && isspace((unsigned char)*at)) {
        at++;
        n--;
    }
    while (n > 0 && isspace((unsigned char)at[n - 1]))
        n--;
    if (n > 0 && at[n - 1] == '.')
        n--;
    if (n >= 2 && strchr("\"'`", at[0]) != NULL && at[n - 1] == at[0]) {
        at++;
        n -= 2;
    }
    if (n == 0)
        return NULL;
    return strndup(at, n);
}

static const char *const LEADS[] = {"the text ", "the word ", "the string ", "the phrase ", NULL};

static char *text_reply(const char *prompt)
{
    const char *at = find_ci(prompt, "reply with exactly ");
    if (at != NULL) {
        char *x = phrase(at + strlen("reply with exactly "));
        if (x != NULL)
            return x;
    }
    at = find_ci(prompt, "exactly ");
    if (at != NULL) {
        at += strlen("exactly ");
        for (const char *const *l = LEADS; *l != NULL; l++)
            if (strncasecmp(at, *l, strlen(*l)) == 0) {
                at += strlen(*l);
                break;
            }
        char *x = phrase(at);
        if (x != NULL) {
            struct evd_buf b = {0};
            int rc = evd_buf_printf(&b, "Sure! Here is the text you asked for: %s", x);
            free(x);
            if (rc != 0) {
                evd_buf_free(&b);
                return NULL;
            }
            return b.data;
        }
    }
    struct evd_buf b = {0};
    if (evd_buf_printf(&b, "This is a reply from evald-stub to a message of %zu characters.",
                       strlen(prompt)) != 0) {
        evd_buf_free(&b);
        return NULL;
    }
    return b.data;
}

static json_t *instance(json_t *schema, int depth);

/* Sample values of the string formats both providers' strict modes accept. */
static const struct {
    const char *format, *value;
} FORMAT_SAMPLES[] = {
    {"date-time", "2025-01-01T00:00:00Z"},
    {"date", "2025-01-01"},
    {"time", "00:00:00Z"},
    {"duration", "P1D"},
    {"email", "stub@example.com"},
    {"hostname", "example.com"},
    {"uri", "https://example.com/stub"},
    {"ipv4", "192.0.2.1"},
    {"ipv6", "2001:db8::1"},
    {"uuid", "00000000-0000-4000-8000-000000000000"},
};

/* "stub", a sample of its `format`, stretched or cut to minLength/maxLength. */
static json_t *string_instance(json_t *schema)
{
    const char *format = json_string_value(json_object_get(schema, "format"));
    for (size_t i = 0; format != NULL && i < sizeof(FORMAT_SAMPLES) / sizeof(FORMAT_SAMPLES[0]);
         i++)
        if (strcmp(format, FORMAT_SAMPLES[i].format) == 0)
            return json_string(FORMAT_SAMPLES[i].value);
    char buf[64] = "stub";
    json_t *minl = json_object_get(schema, "minLength");
    json_t *maxl = json_object_get(schema, "maxLength");
    size_t len = 4;
    if (json_is_integer(minl) && json_integer_value(minl) > 4)
        len = json_integer_value(minl) < 63 ? (size_t)json_integer_value(minl) : 63;
    if (json_is_integer(maxl) && json_integer_value(maxl) >= 0 &&
        (size_t)json_integer_value(maxl) < len)
        len = (size_t)json_integer_value(maxl);
    for (size_t i = 4; i < len; i++)
        buf[i] = 'x';
    buf[len] = '\0';
    return json_string(buf);
}

/* 1, or the smallest bound the schema sets (integers rounded inwards). */
static json_t *number_instance(json_t *schema, bool integer)
{
    double v = 1;
    json_t *min = json_object_get(schema, "minimum");
    json_t *xmin = json_object_get(schema, "exclusiveMinimum");
    json_t *max = json_object_get(schema, "maximum");
    json_t *xmax = json_object_get(schema, "exclusiveMaximum");
    if (json_is_number(min))
        v = json_number_value(min);
    else if (json_is_number(xmin))
        v = json_number_value(xmin) + 1;
    else if (json_is_number(max) && json_number_value(max) < v)
        v = json_number_value(max);
    else if (json_is_number(xmax) && json_number_value(xmax) <= v)
        v = json_number_value(xmax) - 1;
    if (!integer)
        return json_real(v);
    json_int_t i = (json_int_t)v;
    if ((double)i < v)
        i++; /* ceil for positive fractions */
    return json_integer(i);
}

static json_t *instance_of_type(json_t *schema, const char *type, int depth)
{
    if (strcmp(type, "object") == 0) {
        json_t *obj = json_object();
        json_t *props = json_object_get(schema, "properties");
        const char *key;
        json_t *sub;
        json_object_foreach(props, key, sub)
        {
            json_t *v = instance(sub, depth + 1);
            if (v == NULL || json_object_set_new(obj, key, v) != 0) {
                json_decref(obj);
                return NULL;
            }
        }
        return obj;
    }
    if (strcmp(type, "array") == 0) {
        json_t *arr = json_array();
        json_t *mi = json_object_get(schema, "minItems");
        json_int_t n = json_is_integer(mi) ? json_integer_value(mi) : 0;
        json_t *items = json_object_get(schema, "items");
        for (json_int_t i = 0; arr != NULL && i < n && i < 16; i++)
            if (json_array_append_new(arr, instance(items, depth + 1)) != 0) {
                json_decref(arr);
                return NULL;
            }
        return arr;
    }
    if (strcmp(type, "string") == 0)
        return string_instance(schema);
    if (strcmp(type, "integer") == 0 || strcmp(type, "number") == 0)
        return number_instance(schema, strcmp(type, "integer") == 0);
    if (strcmp(type, "boolean") == 0)
        return json_true();
    return json_null();
}

/*
 * A value that a strict-mode schema accepts: const, first enum value, first anyOf /
 * oneOf alternative, first non-null type, every declared property. New reference.
 */
static json_t *instance(json_t *schema, int depth)
{
    if (!json_is_object(schema) || depth > INSTANCE_DEPTH_MAX)
        return json_null();
    json_t *c = json_object_get(schema, "const");
    if (c != NULL)
        return json_deep_copy(c);
    json_t *e = json_object_get(schema, "enum");
    if (json_array_size(e) > 0)
        return json_deep_copy(json_array_get(e, 0));
    static const char *const alts[] = {"anyOf", "oneOf", "allOf"};
    for (int i = 0; i < 3; i++) {
        json_t *list = json_object_get(schema, alts[i]);
        if (json_array_size(list) > 0)
            return instance(json_array_get(list, 0), depth + 1);
    }
    json_t *type = json_object_get(schema, "type");
    if (json_is_string(type))
        return instance_of_type(schema, json_string_value(type), depth);
    size_t i;
    json_t *t;
    json_array_foreach(type, i, t)
    {
        if (json_is_string(t) && strcmp(json_string_value(t), "null") != 0)
            return instance_of_type(schema, json_string_value(t), depth);
    }
    if (json_object_get(schema, "properties") != NULL)
        return instance_of_type(schema, "object", depth);
    return json_null();
}

json_t *stub_schema_instance(json_t *schema)
{
    return instance(schema, 0);
}

/* The first offered function whose name appears in the prompt, or NULL (borrowed). */
static json_t *named_tool(const struct stub_view *v)
{
    size_t i;
    json_t *t;
    json_array_foreach(v->tools, i, t)
    {
        const char *name = json_string_value(json_object_get(t, "name"));
        if (name != NULL && name[0] != '\0' && strstr(v->prompt, name) != NULL)
            return t;
    }
    return NULL;
}

static enum evd_code tool_call(json_t *tool, struct stub_out *o)
{
    json_t *schema = json_object_get(tool, "schema");
    json_t *args = json_is_object(schema) ? stub_schema_instance(schema) : json_object();
    if (!json_is_object(args)) {
        json_decref(args);
        args = json_object();
    }
    o->calls = calloc(1, sizeof(*o->calls));
    if (o->calls == NULL || args == NULL) {
        json_decref(args);
        return EVD_ENOMEM;
    }
    o->ncalls = 1;
    o->calls[0].name = strdup(json_string_value(json_object_get(tool, "name")));
    o->calls[0].arguments = json_dumps(args, JSON_COMPACT);
    json_decref(args);
    if (o->calls[0].name == NULL || o->calls[0].arguments == NULL)
        return EVD_ENOMEM;
    return EVD_OK;
}

enum evd_code stub_default_reply(const struct stub_view *v, struct stub_out *o)
{
    enum evd_code rc = EVD_OK;
    memset(o, 0, sizeof(*o));
    json_t *tool = v->has_tool_result ? NULL : named_tool(v);
    if (tool != NULL) {
        rc = tool_call(tool, o);
    } else if (v->schema != NULL) {
        json_t *inst = stub_schema_instance(v->schema);
        o->text = inst != NULL ? json_dumps(inst, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        json_decref(inst);
        rc = o->text != NULL ? EVD_OK : EVD_ENOMEM;
    } else if (v->has_tool_result) {
        struct evd_buf b = {0};
        size_t n = strlen(v->tool_results);
        size_t cut = n > RESULT_ECHO_MAX ? RESULT_ECHO_MAX : n;
        while (cut > 0 && cut < n && ((unsigned char)v->tool_results[cut] & 0xC0) == 0x80)
            cut--; /* never split a UTF-8 sequence */
        int w = evd_buf_printf(&b, "The function returned: %.*s%s", (int)cut, v->tool_results,
                               cut < n ? "..." : "");
        if (w != 0)
            evd_buf_free(&b);
        o->text = b.data;
        rc = o->text != NULL ? EVD_OK : EVD_ENOMEM;
    } else {
        o->text = text_reply(v->prompt);
        rc = o->text != NULL ? EVD_OK : EVD_ENOMEM;
    }
    if (rc != EVD_OK)
        stub_out_free(o);
    return rc;
}
