/*
 * The two bodies of an OTLP/HTTP trace export, built from the same spans: the JSON
 * mapping (hex ids, decimal-string times and intValue, integer enums) and the binary
 * protobuf (the protobuf-c structs generated from otel/otlp_*.proto). Both walk the
 * attributes in sorted key order, skip values OTLP cannot carry (null, objects, NaN and
 * infinities), and cut a span's name or status message back to whole UTF-8 characters
 * (evd_span_new cuts names at a byte count). Nothing is appended unless the whole body is
 * built. Thread-safety: pure functions of their arguments; the spans and the resource are
 * only read (borrowed), so no other thread may change them meanwhile.
 */
#include "otel/otel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otel/otlp_trace_service.pb-c.h"

#define SCOPE_NAME "evald"

/* ---- shared ------------------------------------------------------------------------ */

/* Length of the longest prefix of s that is whole UTF-8 characters. */
static size_t utf8_prefix(const char *s)
{
    size_t n = strlen(s), i = 0;
    while (i < n) {
        size_t k = evd_utf8_seq((const unsigned char *)s + i, n - i);
        if (k == 0)
            break;
        i += k;
    }
    return i;
}

/* Unix nanoseconds as OTLP's fixed64: a time before the epoch is no time at all. */
static uint64_t unix_nano(int64_t ns)
{
    return ns > 0 ? (uint64_t)ns : 0;
}

/* Whether OTLP's AnyValue can carry v: a string, an integer, a finite real, a boolean, or
 * an array of those (arrays nest). */
static bool carried(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_STRING:
    case JSON_INTEGER:
    case JSON_TRUE:
    case JSON_FALSE:
        return true;
    case JSON_REAL:
        return isfinite(json_real_value(v));
    case JSON_ARRAY:
        for (size_t i = 0; i < json_array_size(v); i++)
            if (!carried(json_array_get(v, i)))
                return false;
        return true;
    default:
        return false;
    }
}

static int cmp_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * The keys of obj (NULL or not an object: none) whose values are carried, sorted, into
 * *keys (a new array of borrowed keys, valid while obj lives and is unchanged; free it).
 * 0, or -1 without memory.
 */
static int sorted_keys(const json_t *obj, const char ***keys, size_t *n)
{
    *keys = NULL;
    *n = 0;
    if (!json_is_object(obj) || json_object_size(obj) == 0)
        return 0;
    const char **k = malloc(json_object_size(obj) * sizeof(*k));
    if (k == NULL)
        return -1;
    const char *key;
    json_t *value;
    size_t m = 0;
    /* jansson's iteration takes a non-const object; nothing here changes it */
    json_object_foreach((json_t *)obj, key, value)
    {
        if (carried(value))
            k[m++] = key;
    }
    qsort(k, m, sizeof(*k), cmp_keys);
    *keys = k;
    *n = m;
    return 0;
}

/* ---- JSON -------------------------------------------------------------------------- */

/*
 * The JSON body is written straight into the buffer, not built as a jansson tree and then
 * dumped: the tree cost an allocation per value and most of the export thread's CPU
 * (bench/otel.py). Each writer returns 0, or -1 without memory; a failure leaves the
 * buffer's tail to the caller, who cuts it off.
 */

static int put(struct evd_buf *b, const char *s)
{
    return evd_buf_append(b, s, strlen(s));
}

/* s[0..n) as a JSON string literal: ", \ and control characters escaped, the rest (whole
 * UTF-8 characters, which the callers guarantee) as it is. */
static int put_string(struct evd_buf *b, const char *s, size_t n)
{
    static const char HEX[] = "0123456789abcdef";
    if (evd_buf_append(b, "\"", 1) != 0)
        return -1;
    size_t run = 0; /* start of the bytes not yet written */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        if (evd_buf_append(b, s + run, i - run) != 0)
            return -1;
        char esc[7] = {'\\', (char)c, 0};
        size_t len = 2;
        switch (c) {
        case '"':
        case '\\':
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        default:
            memcpy(esc, "\\u00", 4);
            esc[4] = HEX[c >> 4];
            esc[5] = HEX[c & 15];
            len = 6;
        }
        if (evd_buf_append(b, esc, len) != 0)
            return -1;
        run = i + 1;
    }
    if (evd_buf_append(b, s + run, n - run) != 0)
        return -1;
    return evd_buf_append(b, "\"", 1);
}

/* A C string cut back to whole UTF-8 characters, as a JSON string. */
static int put_text(struct evd_buf *b, const char *s)
{
    return put_string(b, s, utf8_prefix(s));
}

/* A decimal string of u ("123"): OTLP's JSON form of a 64-bit integer. */
static int put_decimal(struct evd_buf *b, uint64_t u)
{
    return evd_buf_printf(b, "\"%llu\"", (unsigned long long)u);
}

/* OTLP JSON AnyValue of v (carried: callers filter first). */
static int put_any(struct evd_buf *b, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_STRING:
        return put(b, "{\"stringValue\":") ||
               put_string(b, json_string_value(v), json_string_length(v)) || put(b, "}");
    case JSON_INTEGER:
        return evd_buf_printf(b, "{\"intValue\":\"%lld\"}", (long long)json_integer_value(v));
    case JSON_REAL: {
        /* shortest exact form; a whole number keeps a ".0" so that it reads as a double */
        char num[40];
        snprintf(num, sizeof(num), "%.17g", json_real_value(v));
        bool plain = strpbrk(num, ".eE") == NULL;
        return evd_buf_printf(b, "{\"doubleValue\":%s%s}", num, plain ? ".0" : "");
    }
    case JSON_TRUE:
        return put(b, "{\"boolValue\":true}");
    case JSON_FALSE:
        return put(b, "{\"boolValue\":false}");
    case JSON_ARRAY:
        if (put(b, "{\"arrayValue\":{\"values\":[") != 0)
            return -1;
        for (size_t i = 0; i < json_array_size(v); i++)
            if ((i > 0 && put(b, ",") != 0) || put_any(b, json_array_get(v, i)) != 0)
                return -1;
        return put(b, "]}}");
    default:
        return -1; /* not carried */
    }
}

/* [{key, value}] of obj's carried attributes in key order. */
static int put_attrs(struct evd_buf *b, const json_t *obj)
{
    const char **keys;
    size_t n;
    if (sorted_keys(obj, &keys, &n) != 0)
        return -1;
    int rc = put(b, "[");
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = (i > 0 ? put(b, ",") : 0) || put(b, "{\"key\":") ||
             put_string(b, keys[i], strlen(keys[i])) || put(b, ",\"value\":") ||
             put_any(b, json_object_get(obj, keys[i])) || put(b, "}");
    free(keys);
    return rc || put(b, "]");
}

static int put_event(struct evd_buf *b, const json_t *ev)
{
    const char *name = json_string_value(json_object_get(ev, "name"));
    json_int_t t = json_integer_value(json_object_get(ev, "time_ns"));
    return put(b, "{\"timeUnixNano\":") || put_decimal(b, unix_nano(t)) || put(b, ",\"name\":") ||
           put_text(b, name ? name : "") || put(b, ",\"attributes\":") ||
           put_attrs(b, json_object_get(ev, "attributes")) || put(b, "}");
}

static int put_span(struct evd_buf *b, const struct evd_span *s)
{
    char trace[2 * EVD_TRACE_ID_LEN + 1], span[2 * EVD_SPAN_ID_LEN + 1];
    evd_hex_encode(s->trace_id, EVD_TRACE_ID_LEN, trace);
    evd_hex_encode(s->span_id, EVD_SPAN_ID_LEN, span);
    if (evd_buf_printf(b, "{\"traceId\":\"%s\",\"spanId\":\"%s\",", trace, span) != 0)
        return -1;
    if (s->has_parent) {
        char parent[2 * EVD_SPAN_ID_LEN + 1];
        evd_hex_encode(s->parent_span_id, EVD_SPAN_ID_LEN, parent);
        if (evd_buf_printf(b, "\"parentSpanId\":\"%s\",", parent) != 0)
            return -1;
    }
    if (put(b, "\"name\":") || put_text(b, s->name) ||
        evd_buf_printf(b, ",\"kind\":%d,\"startTimeUnixNano\":", (int)s->kind) ||
        put_decimal(b, unix_nano(s->start_ns)) || put(b, ",\"endTimeUnixNano\":") ||
        put_decimal(b, unix_nano(s->end_ns)) || put(b, ",\"attributes\":") ||
        put_attrs(b, s->attributes) || put(b, ",\"events\":["))
        return -1;
    for (size_t i = 0; i < json_array_size(s->events); i++)
        if ((i > 0 && put(b, ",") != 0) || put_event(b, json_array_get(s->events, i)) != 0)
            return -1;
    if (evd_buf_printf(b, "],\"status\":{\"code\":%d", (int)s->status) != 0)
        return -1;
    if (utf8_prefix(s->status_message) > 0 &&
        (put(b, ",\"message\":") || put_text(b, s->status_message)))
        return -1;
    return put(b, "}}");
}

int evd_otel_encode_json(struct evd_span *const *spans, size_t n, const json_t *resource,
                         struct evd_buf *out)
{
    size_t start = out->len;
    int rc = put(out, "{\"resourceSpans\":[{\"resource\":{\"attributes\":") ||
             put_attrs(out, resource) ||
             put(out, "},\"scopeSpans\":[{\"scope\":{\"name\":\"" SCOPE_NAME "\",\"version\":") ||
             put_text(out, EVALD_VERSION) || put(out, "},\"spans\":[");
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = (i > 0 ? put(out, ",") : 0) || put_span(out, spans[i]);
    rc = rc || put(out, "]}]}]}");
    if (rc != 0 && out->data != NULL) {
        /* nothing of a body that could not be built */
        out->len = start;
        out->data[start] = '\0';
    }
    return rc ? -1 : 0;
}

/* ---- protobuf ---------------------------------------------------------------------- */

/* Short names for the generated types (the generated code's own typedefs). */
typedef Opentelemetry__Proto__Common__V1__AnyValue pb_any;
typedef Opentelemetry__Proto__Common__V1__ArrayValue pb_array;
typedef Opentelemetry__Proto__Common__V1__KeyValue pb_kv;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope pb_scope;
typedef Opentelemetry__Proto__Resource__V1__Resource pb_resource;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans pb_resource_spans;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans pb_scope_spans;
typedef Opentelemetry__Proto__Trace__V1__Span pb_span;
typedef Opentelemetry__Proto__Trace__V1__Span__Event pb_event;
typedef Opentelemetry__Proto__Trace__V1__Status pb_status;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest pb_request;

/*
 * Every allocation of one encoding, freed together once the message is packed. The
 * message's strings and bytes point into the spans and the resource (borrowed) except
 * the cut copies of names and status messages, which the pool owns.
 */
struct pool {
    void **ptrs;
    size_t n, cap;
};

/* Zeroed memory owned by the pool; NULL without memory. */
static void *pool_alloc(struct pool *p, size_t size)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        void **ptrs = realloc(p->ptrs, cap * sizeof(*ptrs));
        if (ptrs == NULL)
            return NULL;
        p->ptrs = ptrs;
        p->cap = cap;
    }
    void *m = calloc(1, size ? size : 1);
    if (m != NULL)
        p->ptrs[p->n++] = m;
    return m;
}

static void pool_free(struct pool *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->ptrs[i]);
    free(p->ptrs);
}

/* s cut back to whole UTF-8 characters, owned by the pool; NULL without memory. */
static char *pool_text(struct pool *p, const char *s)
{
    size_t n = utf8_prefix(s);
    char *c = pool_alloc(p, n + 1);
    if (c != NULL)
        memcpy(c, s, n);
    return c;
}

/* The AnyValue of v (carried); NULL without memory. */
static pb_any *any_pb(struct pool *p, const json_t *v)
{
    pb_any *a = pool_alloc(p, sizeof(*a));
    if (a == NULL)
        return NULL;
    opentelemetry__proto__common__v1__any_value__init(a);
    switch (json_typeof(v)) {
    case JSON_STRING:
        a->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
        a->string_value = (char *)json_string_value(v); /* borrowed; packing only reads it */
        break;
    case JSON_INTEGER:
        a->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
        a->int_value = (int64_t)json_integer_value(v);
        break;
    case JSON_REAL:
        a->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE;
        a->double_value = json_real_value(v);
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        a->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
        a->bool_value = json_is_true(v);
        break;
    case JSON_ARRAY: {
        pb_array *arr = pool_alloc(p, sizeof(*arr));
        size_t n = json_array_size(v);
        if (arr == NULL)
            return NULL;
        opentelemetry__proto__common__v1__array_value__init(arr);
        arr->values = pool_alloc(p, n * sizeof(*arr->values));
        if (arr->values == NULL)
            return NULL;
        for (size_t i = 0; i < n; i++)
            if ((arr->values[i] = any_pb(p, json_array_get(v, i))) == NULL)
                return NULL;
        arr->n_values = n;
        a->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE;
        a->array_value = arr;
        break;
    }
    default:
        break; /* not carried: callers filter first */
    }
    return a;
}

/* The KeyValues of obj's carried attributes in key order into *kvs, *n; 0 or -1. */
static int attrs_pb(struct pool *p, const json_t *obj, pb_kv ***kvs, size_t *n)
{
    const char **keys;
    size_t m;
    int rc = -1;
    *kvs = NULL;
    *n = 0;
    if (sorted_keys(obj, &keys, &m) != 0)
        return -1;
    pb_kv **list = pool_alloc(p, m * sizeof(*list));
    if (list == NULL)
        goto out;
    for (size_t i = 0; i < m; i++) {
        pb_kv *kv = pool_alloc(p, sizeof(*kv));
        if (kv == NULL)
            goto out;
        opentelemetry__proto__common__v1__key_value__init(kv);
        kv->key = (char *)keys[i]; /* borrowed from obj */
        if ((kv->value = any_pb(p, json_object_get(obj, keys[i]))) == NULL)
            goto out;
        list[i] = kv;
    }
    *kvs = list;
    *n = m;
    rc = 0;
out:
    free(keys);
    return rc;
}

static pb_event *event_pb(struct pool *p, const json_t *ev)
{
    pb_event *e = pool_alloc(p, sizeof(*e));
    if (e == NULL)
        return NULL;
    opentelemetry__proto__trace__v1__span__event__init(e);
    const char *name = json_string_value(json_object_get(ev, "name"));
    e->name = (char *)(name ? name : ""); /* borrowed from the span */
    e->time_unix_nano = unix_nano(json_integer_value(json_object_get(ev, "time_ns")));
    if (attrs_pb(p, json_object_get(ev, "attributes"), &e->attributes, &e->n_attributes) != 0)
        return NULL;
    return e;
}

static pb_span *span_pb(struct pool *p, struct evd_span *s)
{
    pb_span *ps = pool_alloc(p, sizeof(*ps));
    pb_status *st = pool_alloc(p, sizeof(*st));
    size_t nev = json_array_size(s->events);
    pb_event **events = pool_alloc(p, nev * sizeof(*events));
    if (ps == NULL || st == NULL || events == NULL)
        return NULL;
    opentelemetry__proto__trace__v1__span__init(ps);
    opentelemetry__proto__trace__v1__status__init(st);
    ps->trace_id = (ProtobufCBinaryData){EVD_TRACE_ID_LEN, s->trace_id};
    ps->span_id = (ProtobufCBinaryData){EVD_SPAN_ID_LEN, s->span_id};
    if (s->has_parent)
        ps->parent_span_id = (ProtobufCBinaryData){EVD_SPAN_ID_LEN, s->parent_span_id};
    if ((ps->name = pool_text(p, s->name)) == NULL)
        return NULL;
    ps->kind = (Opentelemetry__Proto__Trace__V1__Span__SpanKind)s->kind;
    ps->start_time_unix_nano = unix_nano(s->start_ns);
    ps->end_time_unix_nano = unix_nano(s->end_ns);
    if (attrs_pb(p, s->attributes, &ps->attributes, &ps->n_attributes) != 0)
        return NULL;
    for (size_t i = 0; i < nev; i++)
        if ((events[i] = event_pb(p, json_array_get(s->events, i))) == NULL)
            return NULL;
    ps->events = events;
    ps->n_events = nev;
    st->code = (Opentelemetry__Proto__Trace__V1__Status__StatusCode)s->status;
    if ((st->message = pool_text(p, s->status_message)) == NULL)
        return NULL;
    ps->status = st;
    return ps;
}

int evd_otel_encode_protobuf(struct evd_span *const *spans, size_t n, const json_t *resource,
                             struct evd_buf *out)
{
    int rc = -1;
    struct pool p = {0};
    uint8_t *packed = NULL;
    pb_request req;
    pb_resource_spans rs, *rsp = &rs;
    pb_resource res;
    pb_scope_spans ss, *ssp = &ss;
    pb_scope scope;
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__init(&req);
    opentelemetry__proto__trace__v1__resource_spans__init(&rs);
    opentelemetry__proto__resource__v1__resource__init(&res);
    opentelemetry__proto__trace__v1__scope_spans__init(&ss);
    opentelemetry__proto__common__v1__instrumentation_scope__init(&scope);

    if (attrs_pb(&p, resource, &res.attributes, &res.n_attributes) != 0)
        goto out;
    scope.name = SCOPE_NAME;
    scope.version = EVALD_VERSION;
    pb_span **list = pool_alloc(&p, n * sizeof(*list));
    if (list == NULL)
        goto out;
    for (size_t i = 0; i < n; i++)
        if ((list[i] = span_pb(&p, spans[i])) == NULL)
            goto out;
    ss.scope = &scope;
    ss.spans = list;
    ss.n_spans = n;
    rs.resource = &res;
    rs.scope_spans = &ssp;
    rs.n_scope_spans = 1;
    req.resource_spans = &rsp;
    req.n_resource_spans = 1;

    size_t size =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(
            &req);
    packed = malloc(size ? size : 1);
    if (packed == NULL)
        goto out;
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, packed);
    rc = evd_buf_append(out, packed, size);
out:
    free(packed);
    pool_free(&p);
    return rc;
}
