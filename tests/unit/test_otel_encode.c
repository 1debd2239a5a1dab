/*
 * Unit tests for otel/encode.c: the exact OTLP JSON of hand-built spans, the protobuf
 * body unpacked again with the generated protobuf-c code and compared field by field,
 * one tiny message checked byte by byte against the wire format worked out by hand, and
 * allocation failures. With EVALD_OTEL_FIXTURE_DIR set, the "fixture" case also writes
 * both encodings of the same spans there (export.json, export.pb) for tests/otel, which
 * decodes them with the official OTLP definitions.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otel/otel.h"
#include "otel/otlp_trace_service.pb-c.h"
#include "tests/support/testutil.h"

static const unsigned char TRACE_ID[16] = {0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
                                           0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36};
static const unsigned char ROOT_ID[8] = {0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
static const unsigned char CHILD_ID[8] = {0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31};

typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest pb_request;

/* The request in b, unpacked by the generated code (free with unpacked_free). */
static pb_request *unpack(const struct evd_buf *b)
{
    pb_request *req =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
            NULL, b->len, (const uint8_t *)b->data);
    ck_assert_ptr_nonnull(req);
    return req;
}

static void unpacked_free(pb_request *req)
{
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(req,
                                                                                            NULL);
}

/* A span with the ids above: the root, or its child. */
static struct evd_span *make_span(bool child, const char *name, enum evd_span_kind kind,
                                  int64_t start, int64_t end)
{
    struct evd_trace_ctx ctx;
    memcpy(ctx.trace_id, TRACE_ID, sizeof(TRACE_ID));
    memcpy(ctx.span_id, ROOT_ID, sizeof(ROOT_ID));
    struct evd_span *s = evd_span_new(&ctx, child, name, kind, start);
    ck_assert_ptr_nonnull(s);
    if (child)
        memcpy(s->span_id, CHILD_ID, sizeof(CHILD_ID));
    s->end_ns = end;
    return s;
}

/* The two spans most cases use: a root with every attribute kind, an event and an error,
 * and a client child with nothing but its times. */
struct fixture {
    struct evd_span *spans[2];
    json_t *resource;
};

static void fixture_make(struct fixture *f)
{
    struct evd_span *root = make_span(false, "invoke_agent control", EVD_SPAN_INTERNAL,
                                      1700000000123456789LL, 1700000001000000000LL);
    evd_span_set_str(root, "s", "text");
    evd_span_set_int(root, "i", 42);
    evd_span_set_int(root, "neg", -7);
    evd_span_set_int(root, "big", 9007199254740993LL); /* 2^53 + 1: no double holds it */
    evd_span_set(root, "d", json_real(0.5));
    evd_span_set(root, "t", json_true());
    evd_span_set(root, "f", json_false());
    evd_span_set(root, "arr", json_pack("[ss]", "stop", "length"));
    evd_span_set(root, "mixed", json_pack("[If[bs]]", (json_int_t)1, 2.25, 1, "x"));
    evd_span_set(root, "skipped.null", json_null());
    evd_span_set(root, "skipped.object", json_pack("{s:i}", "a", 1));
    evd_span_set(root, "skipped.array", json_pack("[in]", 1));
    evd_span_event(root, "gen_ai.evaluation.result", 1700000000500000000LL,
                   json_pack("{s:f,s:s}", "gen_ai.evaluation.score.value", 0.75,
                             "gen_ai.evaluation.score.label", "pass"));
    evd_span_fail(root, "timeout", "boom");
    struct evd_span *child =
        make_span(true, "chat m", EVD_SPAN_CLIENT, 1700000000200000000LL, 1700000000300000000LL);
    evd_span_event(child, "evald.retry", 1700000000250000000LL, NULL);
    f->spans[0] = root;
    f->spans[1] = child;
    f->resource = json_pack("{s:s,s:s,s:s}", "service.name", "evald", "service.version",
                            EVALD_VERSION, "deployment.environment", "test");
    ck_assert_ptr_nonnull(f->resource);
}

static void fixture_free(struct fixture *f)
{
    evd_span_free(f->spans[0]);
    evd_span_free(f->spans[1]);
    json_decref(f->resource);
}

/* The OTLP JSON of the fixture, written out by hand. */
static const char EXPECTED_JSON[] =
    "{\"resourceSpans\":[{\"resource\":{\"attributes\":["
    "{\"key\":\"deployment.environment\",\"value\":{\"stringValue\":\"test\"}},"
    "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"evald\"}},"
    "{\"key\":\"service.version\",\"value\":{\"stringValue\":\"" EVALD_VERSION "\"}}]},"
    "\"scopeSpans\":[{\"scope\":{\"name\":\"evald\",\"version\":\"" EVALD_VERSION "\"},"
    "\"spans\":["
    "{\"traceId\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"spanId\":\"00f067aa0ba902b7\","
    "\"name\":\"invoke_agent control\",\"kind\":1,"
    "\"startTimeUnixNano\":\"1700000000123456789\",\"endTimeUnixNano\":\"1700000001000000000\","
    "\"attributes\":["
    "{\"key\":\"arr\",\"value\":{\"arrayValue\":{\"values\":[{\"stringValue\":\"stop\"},"
    "{\"stringValue\":\"length\"}]}}},"
    "{\"key\":\"big\",\"value\":{\"intValue\":\"9007199254740993\"}},"
    "{\"key\":\"d\",\"value\":{\"doubleValue\":0.5}},"
    "{\"key\":\"error.type\",\"value\":{\"stringValue\":\"timeout\"}},"
    "{\"key\":\"f\",\"value\":{\"boolValue\":false}},"
    "{\"key\":\"i\",\"value\":{\"intValue\":\"42\"}},"
    "{\"key\":\"mixed\",\"value\":{\"arrayValue\":{\"values\":[{\"intValue\":\"1\"},"
    "{\"doubleValue\":2.25},{\"arrayValue\":{\"values\":[{\"boolValue\":true},"
    "{\"stringValue\":\"x\"}]}}]}}},"
    "{\"key\":\"neg\",\"value\":{\"intValue\":\"-7\"}},"
    "{\"key\":\"s\",\"value\":{\"stringValue\":\"text\"}},"
    "{\"key\":\"t\",\"value\":{\"boolValue\":true}}],"
    "\"events\":[{\"timeUnixNano\":\"1700000000500000000\",\"name\":\"gen_ai.evaluation.result\","
    "\"attributes\":[{\"key\":\"gen_ai.evaluation.score.label\",\"value\":{\"stringValue\":"
    "\"pass\"}},{\"key\":\"gen_ai.evaluation.score.value\",\"value\":{\"doubleValue\":0.75}}]}],"
    "\"status\":{\"code\":2,\"message\":\"boom\"}},"
    "{\"traceId\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"spanId\":\"b7ad6b7169203331\","
    "\"parentSpanId\":\"00f067aa0ba902b7\",\"name\":\"chat m\",\"kind\":3,"
    "\"startTimeUnixNano\":\"1700000000200000000\",\"endTimeUnixNano\":\"1700000000300000000\","
    "\"attributes\":[],"
    "\"events\":[{\"timeUnixNano\":\"1700000000250000000\",\"name\":\"evald.retry\","
    "\"attributes\":[]}],"
    "\"status\":{\"code\":0}}]}]}]}";

START_TEST(json_has_the_otlp_shape)
{
    struct fixture f;
    fixture_make(&f);
    struct evd_buf out = {0};
    ck_assert_int_eq(evd_otel_encode_json(f.spans, 2, f.resource, &out), 0);
    json_error_t jerr;
    json_t *got = json_loads(out.data, 0, &jerr);
    ck_assert_msg(got != NULL, "not JSON: %s", jerr.text);
    json_t *want = json_loads(EXPECTED_JSON, 0, &jerr);
    ck_assert_msg(want != NULL, "the expected text is not JSON: %s", jerr.text);
    char *g = json_dumps(got, JSON_SORT_KEYS);
    ck_assert_msg(json_equal(got, want), "got %s", g);
    free(g);
    /* the big integer went through as its digits, never through a double */
    ck_assert_ptr_nonnull(strstr(out.data, "\"intValue\":\"9007199254740993\""));
    /* a root span has no parentSpanId at all */
    json_t *rs = json_array_get(json_object_get(got, "resourceSpans"), 0);
    json_t *ss = json_array_get(json_object_get(rs, "scopeSpans"), 0);
    json_t *root = json_array_get(json_object_get(ss, "spans"), 0);
    ck_assert_ptr_nonnull(root);
    ck_assert_ptr_null(json_object_get(root, "parentSpanId"));
    json_decref(got);
    json_decref(want);
    evd_buf_free(&out);
    fixture_free(&f);
}
END_TEST

START_TEST(json_strings_are_escaped_and_doubles_stay_doubles)
{
    /* Every byte that JSON must escape, a NUL inside a string value, and characters of two,
     * three and four bytes, in a name, a key and a value; 2.0 and 1e300 as doubles. */
    static const char tricky[] =
        "q\"b\\s/n\nr\rt\tb\bf\fc\x01\x1f \xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80";
    struct evd_span *s = make_span(false, "", EVD_SPAN_INTERNAL, 1, 2);
    snprintf(s->name, sizeof(s->name), "%s", tricky);
    evd_span_set(s, tricky, json_string(tricky));
    evd_span_set(s, "nul", json_stringn("a\0b", 3));
    evd_span_set(s, "two", json_real(2.0));
    evd_span_set(s, "huge", json_real(1e300));
    evd_span_set(s, "tiny", json_real(-5e-324));
    struct evd_span *spans[] = {s};
    struct evd_buf out = {0};
    ck_assert_int_eq(evd_otel_encode_json(spans, 1, NULL, &out), 0);
    json_error_t jerr;
    json_t *got = json_loads(out.data, JSON_ALLOW_NUL, &jerr);
    ck_assert_msg(got != NULL, "not JSON (%s): %s", jerr.text, out.data);
    json_t *span = json_array_get(
        json_object_get(
            json_array_get(json_object_get(json_array_get(json_object_get(got, "resourceSpans"), 0),
                                           "scopeSpans"),
                           0),
            "spans"),
        0);
    ck_assert_str_eq(json_string_value(json_object_get(span, "name")), tricky);
    json_t *attrs = json_object_get(span, "attributes");
    ck_assert_uint_eq(json_array_size(attrs), 5);
    bool seen_tricky = false;
    size_t i;
    json_t *kv;
    json_array_foreach(attrs, i, kv)
    {
        const char *key = json_string_value(json_object_get(kv, "key"));
        json_t *value = json_object_get(kv, "value");
        if (strcmp(key, tricky) == 0) {
            ck_assert_str_eq(json_string_value(json_object_get(value, "stringValue")), tricky);
            seen_tricky = true;
        } else if (strcmp(key, "nul") == 0) {
            json_t *v = json_object_get(value, "stringValue");
            ck_assert_uint_eq(json_string_length(v), 3);
            ck_assert_int_eq(memcmp(json_string_value(v), "a\0b", 3), 0);
        } else {
            json_t *d = json_object_get(value, "doubleValue");
            ck_assert_msg(json_is_real(d), "%s is not a real: %s", key, out.data);
            double want = strcmp(key, "two") == 0    ? 2.0
                          : strcmp(key, "huge") == 0 ? 1e300
                                                     : -5e-324;
            ck_assert(json_real_value(d) == want);
        }
    }
    ck_assert(seen_tricky);
    /* no raw control byte in the body */
    for (size_t k = 0; k < out.len; k++)
        ck_assert_msg((unsigned char)out.data[k] >= 0x20, "a raw control byte at %zu", k);
    json_decref(got);
    evd_buf_free(&out);
    evd_span_free(s);
}
END_TEST

START_TEST(json_appends_to_what_the_buffer_holds)
{
    struct evd_buf out = {0};
    ck_assert_int_eq(evd_buf_append(&out, "x", 1), 0);
    ck_assert_int_eq(evd_otel_encode_json(NULL, 0, NULL, &out), 0);
    char want[256];
    snprintf(want, sizeof(want),
             "x{\"resourceSpans\":[{\"resource\":{\"attributes\":[]},\"scopeSpans\":[{\"scope\":"
             "{\"name\":\"evald\",\"version\":\"%s\"},\"spans\":[]}]}]}",
             EVALD_VERSION);
    /* compact, and in the order the contract writes it */
    ck_assert_str_eq(out.data, want);
    evd_buf_free(&out);
}
END_TEST

START_TEST(names_are_cut_back_to_whole_characters)
{
    struct evd_span *s = make_span(false, "", EVD_SPAN_INTERNAL, 1, 2);
    strcpy(s->name, "ab\xc3");             /* a two-byte character cut after its first byte */
    strcpy(s->status_message, "\xe2\x82"); /* nothing whole at all */
    s->status = EVD_SPAN_ERROR;
    struct evd_span *spans[] = {s};
    struct evd_buf json = {0}, pb = {0};
    ck_assert_int_eq(evd_otel_encode_json(spans, 1, NULL, &json), 0);
    ck_assert_ptr_nonnull(strstr(json.data, "\"name\":\"ab\""));
    ck_assert_ptr_nonnull(strstr(json.data, "\"status\":{\"code\":2}"));
    ck_assert_int_eq(evd_otel_encode_protobuf(spans, 1, NULL, &pb), 0);
    pb_request *req = unpack(&pb);
    ck_assert_str_eq(req->resource_spans[0]->scope_spans[0]->spans[0]->name, "ab");
    ck_assert_str_eq(req->resource_spans[0]->scope_spans[0]->spans[0]->status->message, "");
    unpacked_free(req);
    evd_buf_free(&json);
    evd_buf_free(&pb);
    evd_span_free(s);
}
END_TEST

/* ---- protobuf ---------------------------------------------------------------------- */

typedef Opentelemetry__Proto__Common__V1__AnyValue pb_any;
typedef Opentelemetry__Proto__Common__V1__KeyValue pb_kv;

static const pb_any *attr(pb_kv **kvs, size_t n, size_t i, const char *key)
{
    ck_assert_uint_lt(i, n);
    ck_assert_str_eq(kvs[i]->key, key);
    ck_assert_ptr_nonnull(kvs[i]->value);
    return kvs[i]->value;
}

static void assert_str(const pb_any *v, const char *s)
{
    ck_assert_int_eq(v->value_case,
                     OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE);
    ck_assert_str_eq(v->string_value, s);
}

static void assert_int(const pb_any *v, int64_t i)
{
    ck_assert_int_eq(v->value_case, OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE);
    ck_assert_int_eq(v->int_value, i);
}

static void assert_double(const pb_any *v, double d)
{
    ck_assert_int_eq(v->value_case,
                     OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE);
    ck_assert(v->double_value == d);
}

static void assert_bool(const pb_any *v, bool b)
{
    ck_assert_int_eq(v->value_case, OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE);
    ck_assert_int_eq(!!v->bool_value, b);
}

static const Opentelemetry__Proto__Common__V1__ArrayValue *assert_array(const pb_any *v, size_t n)
{
    ck_assert_int_eq(v->value_case, OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE);
    ck_assert_ptr_nonnull(v->array_value);
    ck_assert_uint_eq(v->array_value->n_values, n);
    return v->array_value;
}

static void assert_bytes(ProtobufCBinaryData b, const unsigned char *want, size_t n)
{
    ck_assert_uint_eq(b.len, n);
    ck_assert(n == 0 || memcmp(b.data, want, n) == 0);
}

START_TEST(protobuf_unpacks_to_the_same_spans)
{
    struct fixture f;
    fixture_make(&f);
    struct evd_buf out = {0};
    ck_assert_int_eq(evd_otel_encode_protobuf(f.spans, 2, f.resource, &out), 0);
    pb_request *req = unpack(&out);
    ck_assert_uint_eq(req->n_resource_spans, 1);
    Opentelemetry__Proto__Trace__V1__ResourceSpans *rs = req->resource_spans[0];
    ck_assert_ptr_nonnull(rs->resource);
    ck_assert_uint_eq(rs->resource->n_attributes, 3);
    assert_str(attr(rs->resource->attributes, 3, 0, "deployment.environment"), "test");
    assert_str(attr(rs->resource->attributes, 3, 1, "service.name"), "evald");
    assert_str(attr(rs->resource->attributes, 3, 2, "service.version"), EVALD_VERSION);
    ck_assert_str_eq(rs->schema_url, "");
    ck_assert_uint_eq(rs->n_scope_spans, 1);
    Opentelemetry__Proto__Trace__V1__ScopeSpans *ss = rs->scope_spans[0];
    ck_assert_str_eq(ss->scope->name, "evald");
    ck_assert_str_eq(ss->scope->version, EVALD_VERSION);
    ck_assert_uint_eq(ss->scope->n_attributes, 0);
    ck_assert_uint_eq(ss->n_spans, 2);

    Opentelemetry__Proto__Trace__V1__Span *root = ss->spans[0];
    assert_bytes(root->trace_id, TRACE_ID, 16);
    assert_bytes(root->span_id, ROOT_ID, 8);
    assert_bytes(root->parent_span_id, NULL, 0);
    ck_assert_str_eq(root->trace_state, "");
    ck_assert_str_eq(root->name, "invoke_agent control");
    ck_assert_int_eq(root->kind,
                     OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_INTERNAL);
    ck_assert_uint_eq(root->start_time_unix_nano, 1700000000123456789ULL);
    ck_assert_uint_eq(root->end_time_unix_nano, 1700000001000000000ULL);
    ck_assert_uint_eq(root->n_attributes, 10);
    pb_kv **a = root->attributes;
    size_t n = root->n_attributes;
    const Opentelemetry__Proto__Common__V1__ArrayValue *arr = assert_array(attr(a, n, 0, "arr"), 2);
    assert_str(arr->values[0], "stop");
    assert_str(arr->values[1], "length");
    assert_int(attr(a, n, 1, "big"), 9007199254740993LL);
    assert_double(attr(a, n, 2, "d"), 0.5);
    assert_str(attr(a, n, 3, "error.type"), "timeout");
    assert_bool(attr(a, n, 4, "f"), false);
    assert_int(attr(a, n, 5, "i"), 42);
    arr = assert_array(attr(a, n, 6, "mixed"), 3);
    assert_int(arr->values[0], 1);
    assert_double(arr->values[1], 2.25);
    const Opentelemetry__Proto__Common__V1__ArrayValue *inner = assert_array(arr->values[2], 2);
    assert_bool(inner->values[0], true);
    assert_str(inner->values[1], "x");
    assert_int(attr(a, n, 7, "neg"), -7);
    assert_str(attr(a, n, 8, "s"), "text");
    assert_bool(attr(a, n, 9, "t"), true);
    ck_assert_uint_eq(root->dropped_attributes_count, 0);
    ck_assert_uint_eq(root->n_events, 1);
    Opentelemetry__Proto__Trace__V1__Span__Event *ev = root->events[0];
    ck_assert_str_eq(ev->name, "gen_ai.evaluation.result");
    ck_assert_uint_eq(ev->time_unix_nano, 1700000000500000000ULL);
    ck_assert_uint_eq(ev->n_attributes, 2);
    assert_str(attr(ev->attributes, 2, 0, "gen_ai.evaluation.score.label"), "pass");
    assert_double(attr(ev->attributes, 2, 1, "gen_ai.evaluation.score.value"), 0.75);
    ck_assert_ptr_nonnull(root->status);
    ck_assert_int_eq(root->status->code,
                     OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR);
    ck_assert_str_eq(root->status->message, "boom");
    ck_assert_uint_eq(root->flags, 0);

    Opentelemetry__Proto__Trace__V1__Span *child = ss->spans[1];
    assert_bytes(child->trace_id, TRACE_ID, 16);
    assert_bytes(child->span_id, CHILD_ID, 8);
    assert_bytes(child->parent_span_id, ROOT_ID, 8);
    ck_assert_str_eq(child->name, "chat m");
    ck_assert_int_eq(child->kind,
                     OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_CLIENT);
    ck_assert_uint_eq(child->start_time_unix_nano, 1700000000200000000ULL);
    ck_assert_uint_eq(child->end_time_unix_nano, 1700000000300000000ULL);
    ck_assert_uint_eq(child->n_attributes, 0);
    ck_assert_uint_eq(child->n_events, 1);
    ck_assert_str_eq(child->events[0]->name, "evald.retry");
    ck_assert_uint_eq(child->events[0]->time_unix_nano, 1700000000250000000ULL);
    ck_assert_uint_eq(child->events[0]->n_attributes, 0);
    ck_assert_int_eq(child->status->code,
                     OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_UNSET);
    ck_assert_str_eq(child->status->message, "");

    unpacked_free(req);
    evd_buf_free(&out);
    fixture_free(&f);
}
END_TEST

/* Appends bytes to a byte string under construction. */
struct bytes {
    unsigned char b[256];
    size_t n;
};

static void put(struct bytes *w, const void *p, size_t n)
{
    ck_assert_uint_le(w->n + n, sizeof(w->b));
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void put1(struct bytes *w, unsigned char c)
{
    put(w, &c, 1);
}

START_TEST(protobuf_bytes_match_the_wire_format_worked_by_hand)
{
    /* One root span: name "s", kind INTERNAL, start 1, end 2, attribute n = 300, status
     * unset; no resource attributes. Worked out from the protobuf encoding rules: a tag
     * is (field << 3 | wire type); wire type 2 (length-delimited) is followed by a varint
     * length, 1 is 8 little-endian bytes (fixed64), 0 a varint. */
    struct evd_span *s = make_span(false, "s", EVD_SPAN_INTERNAL, 1, 2);
    evd_span_set_int(s, "n", 300);
    struct evd_span *spans[] = {s};
    struct evd_buf out = {0};
    ck_assert_int_eq(evd_otel_encode_protobuf(spans, 1, NULL, &out), 0);

    size_t vlen = strlen(EVALD_VERSION);
    ck_assert_uint_lt(vlen, 100); /* one-byte lengths below */
    struct bytes span = {0};
    put(&span, (unsigned char[]){0x0a, 0x10}, 2); /* 1 trace_id, 16 bytes */
    put(&span, TRACE_ID, 16);
    put(&span, (unsigned char[]){0x12, 0x08}, 2); /* 2 span_id, 8 bytes */
    put(&span, ROOT_ID, 8);
    put(&span, (unsigned char[]){0x2a, 0x01, 's'}, 3); /* 5 name; 4 parent_span_id absent */
    put(&span, (unsigned char[]){0x30, 0x01}, 2);      /* 6 kind, varint 1 */
    put(&span, (unsigned char[]){0x39, 1, 0, 0, 0, 0, 0, 0, 0}, 9); /* 7 start, fixed64 */
    put(&span, (unsigned char[]){0x41, 2, 0, 0, 0, 0, 0, 0, 0}, 9); /* 8 end, fixed64 */
    /* 9 attributes: KeyValue{1 key "n", 2 value AnyValue{3 int_value varint 300 = ac 02}} */
    put(&span, (unsigned char[]){0x4a, 0x08, 0x0a, 0x01, 'n', 0x12, 0x03, 0x18, 0xac, 0x02}, 10);
    put(&span, (unsigned char[]){0x7a, 0x00}, 2); /* 15 status, an empty message */
    ck_assert_uint_eq(span.n, 63);

    struct bytes scope = {0}; /* InstrumentationScope{1 name "evald", 2 version} */
    put(&scope, (unsigned char[]){0x0a, 0x05}, 2);
    put(&scope, "evald", 5);
    put1(&scope, 0x12);
    put1(&scope, (unsigned char)vlen);
    put(&scope, EVALD_VERSION, vlen);

    struct bytes ss = {0}; /* ScopeSpans{1 scope, 2 spans} */
    put1(&ss, 0x0a);
    put1(&ss, (unsigned char)scope.n);
    put(&ss, scope.b, scope.n);
    put1(&ss, 0x12);
    put1(&ss, (unsigned char)span.n);
    put(&ss, span.b, span.n);

    struct bytes rs = {0}; /* ResourceSpans{1 resource (empty), 2 scope_spans} */
    put(&rs, (unsigned char[]){0x0a, 0x00, 0x12}, 3);
    put1(&rs, (unsigned char)ss.n);
    put(&rs, ss.b, ss.n);

    struct bytes req = {0}; /* ExportTraceServiceRequest{1 resource_spans} */
    put1(&req, 0x0a);
    put1(&req, (unsigned char)rs.n);
    put(&req, rs.b, rs.n);
    /* request{rs{resource, ss{scope{name, version}, span}}}, each with a 2-byte header */
    ck_assert_uint_eq(req.n, 2 + (2 + 2 + (2 + (2 + 5 + 2 + vlen) + 2 + 63)));

    ck_assert_uint_eq(out.len, req.n);
    for (size_t i = 0; i < req.n; i++)
        ck_assert_msg((unsigned char)out.data[i] == req.b[i], "byte %zu: %02x, want %02x", i,
                      (unsigned char)out.data[i], req.b[i]);
    evd_buf_free(&out);
    evd_span_free(s);
}
END_TEST

/* ---- failures ---------------------------------------------------------------------- */

START_TEST(a_full_buffer_is_left_as_it_was)
{
    struct fixture f;
    fixture_make(&f);
    for (int pb = 0; pb < 2; pb++) {
        struct evd_buf out = {.limit = 64};
        ck_assert_int_eq(evd_buf_append(&out, "prefix", 6), 0);
        int rc = pb ? evd_otel_encode_protobuf(f.spans, 2, f.resource, &out)
                    : evd_otel_encode_json(f.spans, 2, f.resource, &out);
        ck_assert_int_eq(rc, -1);
        ck_assert_uint_eq(out.len, 6);
        ck_assert_str_eq(out.data, "prefix");
        evd_buf_free(&out);
    }
    fixture_free(&f);
}
END_TEST

static bool failing;
static size_t budget;

static void *chaos_malloc(size_t n)
{
    if (failing) {
        if (budget == 0)
            return NULL;
        budget--;
    }
    return malloc(n);
}

static void chaos_free(void *p)
{
    free(p);
}

START_TEST(json_survives_every_allocation_failure)
{
    /* jansson's allocator fails its n-th allocation for n = 0, 1, …: each attempt reports
     * -1 and leaves the buffer alone, until one has memory enough and gives the same text
     * as with memory to spare. Leaks show under the sanitizer build. */
    struct fixture f;
    fixture_make(&f);
    struct evd_buf want = {0};
    ck_assert_int_eq(evd_otel_encode_json(f.spans, 2, f.resource, &want), 0);
    json_set_alloc_funcs(chaos_malloc, chaos_free);
    bool done = false;
    for (size_t n = 0; n < 10000 && !done; n++) {
        struct evd_buf out = {0};
        ck_assert_int_eq(evd_buf_append(&out, "p", 1), 0);
        failing = true;
        budget = n;
        int rc = evd_otel_encode_json(f.spans, 2, f.resource, &out);
        failing = false;
        if (rc == 0) {
            ck_assert_str_eq(out.data + 1, want.data);
            done = true;
        } else {
            ck_assert_int_eq(rc, -1);
            ck_assert_str_eq(out.data, "p");
        }
        evd_buf_free(&out);
    }
    json_set_alloc_funcs(malloc, free);
    ck_assert(done);
    evd_buf_free(&want);
    fixture_free(&f);
}
END_TEST

/* ---- the fixture for tests/otel ---------------------------------------------------- */

static void write_file(const char *dir, const char *name, const struct evd_buf *b)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    ck_assert_msg(fp != NULL, "cannot write %s", path);
    ck_assert_uint_eq(fwrite(b->data, 1, b->len, fp), b->len);
    ck_assert_int_eq(fclose(fp), 0);
}

START_TEST(fixture_files_for_the_node_decoder)
{
    const char *dir = getenv("EVALD_OTEL_FIXTURE_DIR");
    if (dir == NULL || dir[0] == '\0')
        return; /* only tests/otel/run.sh asks for them */
    struct fixture f;
    fixture_make(&f);
    struct evd_buf json = {0}, pb = {0};
    ck_assert_int_eq(evd_otel_encode_json(f.spans, 2, f.resource, &json), 0);
    ck_assert_int_eq(evd_otel_encode_protobuf(f.spans, 2, f.resource, &pb), 0);
    write_file(dir, "export.json", &json);
    write_file(dir, "export.pb", &pb);
    evd_buf_free(&json);
    evd_buf_free(&pb);
    fixture_free(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("otel_encode");
    TCase *tc = tcase_create("json");
    tcase_add_test(tc, json_has_the_otlp_shape);
    tcase_add_test(tc, json_appends_to_what_the_buffer_holds);
    tcase_add_test(tc, json_strings_are_escaped_and_doubles_stay_doubles);
    tcase_add_test(tc, names_are_cut_back_to_whole_characters);
    suite_add_tcase(s, tc);
    tc = tcase_create("protobuf");
    tcase_add_test(tc, protobuf_unpacks_to_the_same_spans);
    tcase_add_test(tc, protobuf_bytes_match_the_wire_format_worked_by_hand);
    suite_add_tcase(s, tc);
    tc = tcase_create("failures");
    tcase_add_test(tc, a_full_buffer_is_left_as_it_was);
    tcase_add_test(tc, json_survives_every_allocation_failure);
    suite_add_tcase(s, tc);
    tc = tcase_create("fixture");
    tcase_add_test(tc, fixture_files_for_the_node_decoder);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
