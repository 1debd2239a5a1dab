/*
 * Tests of the structured-output wire transform (schema/structured.h): golden wire schemas
 * per provider for representative owner schemas (tests/unit/jsonschema_golden/<case>.json, each
 * {"contract", "owner", "red"?, "wire": {"responses", "anthropic", "chat"}, "fallback"}),
 * request fragments, and round trips from a provider's wire answer to the stored value.
 * EVALD_UPDATE_GOLDEN=1 rewrites the "wire" and "fallback" members from the current code.
 */
#include <check.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/jsonschema.h"
#include "schema/structured.h"
#include "tests/support/testutil.h"

static const char *const GOLDEN[] = {
    "optional_fields", "open_map",        "recursion",       "nested_arrays",
    "unions",          "no_owner_fields", "oversized_depth", "oversized_optional",
};
static const char *const PROVIDERS[] = {"responses", "anthropic", "chat"};

/* The RED owner of every golden verdict case unless the file has "red". */
static const char DEFAULT_RED[] =
    "{\"properties\":{\"why\":{\"type\":\"string\"}},\"required\":[\"why\"]}";

static json_t *parse(const char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
    ck_assert_msg(v != NULL, "bad test JSON %s: %s", text, jerr.text);
    return v;
}

static struct evd_so_contract *contract_of(json_t *golden)
{
    json_t *owner = json_object_get(golden, "owner");
    if (json_is_null(owner))
        owner = NULL;
    struct evd_err err = {0};
    struct evd_so_contract *c;
    if (strcmp(json_string_value(json_object_get(golden, "contract")), "value") == 0) {
        c = evd_so_value_new(owner, &err);
    } else {
        json_t *red = json_object_get(golden, "red");
        json_t *def = red != NULL ? NULL : parse(DEFAULT_RED);
        c = evd_so_verdict_new(owner, red != NULL ? red : def, &err);
        json_decref(def);
    }
    ck_assert_msg(c != NULL, "contract: %s", err.msg);
    return c;
}

static char *dump(const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    ck_assert_ptr_nonnull(s);
    return s;
}

START_TEST(golden_wire_schemas)
{
    const char *name = GOLDEN[_i];
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/tests/unit/jsonschema_golden/%s.json", EVALD_SOURCE_DIR, name);
    json_t *golden = evd_test_load_json(path);
    ck_assert_ptr_nonnull(golden);
    struct evd_so_contract *c = contract_of(golden);
    bool update = getenv("EVALD_UPDATE_GOLDEN") != NULL;
    json_t *wires = json_object(), *fallbacks = json_object();
    for (int p = 0; p < 3; p++) {
        struct evd_err err = {0};
        struct evd_so_wire *w = evd_so_wire_new(c, (enum evd_so_provider)p, &err);
        ck_assert_msg(w != NULL, "%s", err.msg);
        json_t *schema = evd_so_wire_schema(w);
        json_object_set(wires, PROVIDERS[p], schema);
        json_object_set_new(fallbacks, PROVIDERS[p], json_boolean(evd_so_wire_fallback(w)));
        if (!update) {
            json_t *want = json_object_get(json_object_get(golden, "wire"), PROVIDERS[p]);
            ck_assert_msg(want != NULL, "%s has no %s wire; run with EVALD_UPDATE_GOLDEN=1", name,
                          PROVIDERS[p]);
            char *got_s = dump(schema), *want_s = dump(want);
            ck_assert_msg(strcmp(got_s, want_s) == 0, "%s/%s wire differs:\n got %s\nwant %s", name,
                          PROVIDERS[p], got_s, want_s);
            free(got_s);
            free(want_s);
            json_t *fb = json_object_get(json_object_get(golden, "fallback"), PROVIDERS[p]);
            ck_assert_msg(json_is_boolean(fb) && json_boolean_value(fb) == evd_so_wire_fallback(w),
                          "%s/%s fallback differs", name, PROVIDERS[p]);
        }
        evd_so_wire_free(w);
    }
    if (update) {
        json_object_set(golden, "wire", wires);
        json_object_set(golden, "fallback", fallbacks);
        ck_assert_int_eq(json_dump_file(golden, path, JSON_INDENT(2)), 0);
        fprintf(stderr, "updated %s\n", path);
    }
    json_decref(wires);
    json_decref(fallbacks);
    evd_so_contract_free(c);
    json_decref(golden);
}
END_TEST

/* Properties that every wire schema must have, whatever the owner schema. */
static void assert_strict(const json_t *w, const char *where)
{
    if (json_is_array(w)) {
        for (size_t i = 0; i < json_array_size(w); i++)
            assert_strict(json_array_get(w, i), where);
        return;
    }
    if (!json_is_object(w))
        return;
    json_t *props = json_object_get(w, "properties");
    if (props != NULL) {
        ck_assert_msg(json_is_false(json_object_get(w, "additionalProperties")),
                      "%s: an object is not closed", where);
        json_t *req = json_object_get(w, "required");
        ck_assert_msg(json_array_size(req) == json_object_size(props),
                      "%s: not every field is required", where);
        size_t i = 0;
        const char *k;
        json_t *v;
        json_object_foreach(props, k, v)
        {
            ck_assert_str_eq(json_string_value(json_array_get(req, i++)), k);
        }
    }
    static const char *const banned[] = {"default", "$ref", "definitions",       "oneOf", "allOf",
                                         "not",     "if",   "patternProperties", "$id",   NULL};
    for (size_t i = 0; banned[i] != NULL; i++)
        ck_assert_msg(json_object_get(w, banned[i]) == NULL, "%s: wire keeps \"%s\"", where,
                      banned[i]);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)w, k, v)
    {
        if (strcmp(k, "enum") != 0 && strcmp(k, "const") != 0)
            assert_strict(v, where);
    }
}

START_TEST(wire_schemas_are_strict_everywhere)
{
    const char *name = GOLDEN[_i];
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/tests/unit/jsonschema_golden/%s.json", EVALD_SOURCE_DIR, name);
    json_t *golden = evd_test_load_json(path);
    struct evd_so_contract *c = contract_of(golden);
    for (int p = 0; p < 3; p++) {
        struct evd_so_wire *w = evd_so_wire_new(c, (enum evd_so_provider)p, NULL);
        ck_assert_ptr_nonnull(w);
        json_t *schema = evd_so_wire_schema(w);
        assert_strict(schema, name);
        /* The discriminator comes first in both alternatives. */
        json_t *any = json_object_get(
            json_object_get(json_object_get(schema, "properties"), "result"), "anyOf");
        for (size_t i = 0; i < json_array_size(any); i++) {
            void *it = json_object_iter(json_object_get(json_array_get(any, i), "properties"));
            ck_assert_str_eq(json_object_iter_key(it), "verdict");
        }
        /* Every wire schema is itself a valid draft-07 schema. */
        struct evd_err err = {0};
        ck_assert_uint_eq(evd_jsonschema_check(evd_jsonschema_draft7(), schema, NULL, 0, &err), 0);
        evd_so_wire_free(w);
    }
    evd_so_contract_free(c);
    json_decref(golden);
}
END_TEST

START_TEST(request_fragments_per_provider)
{
    json_t *owner = parse("{\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"a\"]}");
    struct evd_so_contract *c = evd_so_verdict_new(owner, NULL, NULL);
    ck_assert_ptr_nonnull(c);
    struct evd_so_wire *w = evd_so_wire_new(c, EVD_SO_RESPONSES, NULL);
    json_t *f = evd_so_wire_request_format(w);
    json_t *fmt = json_object_get(f, "format");
    ck_assert_str_eq(json_string_value(json_object_get(fmt, "type")), "json_schema");
    ck_assert_str_eq(json_string_value(json_object_get(fmt, "name")), "evald_verdict");
    ck_assert(json_is_true(json_object_get(fmt, "strict")));
    ck_assert(json_equal(json_object_get(fmt, "schema"), evd_so_wire_schema(w)));
    json_decref(f);
    evd_so_wire_free(w);

    w = evd_so_wire_new(c, EVD_SO_ANTHROPIC, NULL);
    f = evd_so_wire_request_format(w);
    ck_assert_uint_eq(json_object_size(f), 2);
    ck_assert_str_eq(json_string_value(json_object_get(f, "type")), "json_schema");
    ck_assert(json_equal(json_object_get(f, "schema"), evd_so_wire_schema(w)));
    json_decref(f);
    evd_so_wire_free(w);

    w = evd_so_wire_new(c, EVD_SO_CHAT, NULL);
    f = evd_so_wire_request_format(w);
    json_t *js = json_object_get(f, "json_schema");
    ck_assert_str_eq(json_string_value(json_object_get(f, "type")), "json_schema");
    ck_assert_str_eq(json_string_value(json_object_get(js, "name")), "evald_verdict");
    ck_assert(json_is_true(json_object_get(js, "strict")));
    ck_assert(json_equal(json_object_get(js, "schema"), evd_so_wire_schema(w)));
    json_decref(f);
    evd_so_wire_free(w);
    evd_so_contract_free(c);

    c = evd_so_value_new(owner, NULL);
    w = evd_so_wire_new(c, EVD_SO_RESPONSES, NULL);
    f = evd_so_wire_request_format(w);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(f, "format"), "name")),
                     "evald_result");
    json_decref(f);
    evd_so_wire_free(w);
    evd_so_contract_free(c);
    json_decref(owner);
}
END_TEST

struct round_trip {
    const char *golden; /* the contract comes from this golden file */
    enum evd_so_provider provider;
    const char *answer; /* the wire answer text */
    const char *stored; /* the expected stored value, compact, or NULL */
    const char *code;   /* else the expected failure code */
};

static const struct round_trip ROUND_TRIPS[] = {
    /* Null placeholders: dropped unless the field accepts null; kept order, verdict first. */
    {"optional_fields", EVD_SO_RESPONSES,
     "{\"result\":{\"verdict\":\"GREEN\",\"verdictFields\":{\"covered\":[\"R1\",\"R2\"],"
     "\"reason\":\"all good\",\"confidence\":null,\"severity\":null,\"reviewer\":null,"
     "\"checkedAt\":\"2024-05-01T10:00:00Z\"}}}",
     "{\"verdict\":\"GREEN\",\"covered\":[\"R1\",\"R2\"],\"reason\":\"all good\","
     "\"reviewer\":null,\"checkedAt\":\"2024-05-01T10:00:00Z\"}",
     NULL},
    {"optional_fields", EVD_SO_ANTHROPIC,
     "{\"result\":{\"verdict\":\"GREEN\",\"verdictFields\":{\"covered\":[],\"reason\":\"r\","
     "\"confidence\":0.25,\"severity\":\"low\",\"reviewer\":\"a@b.org\",\"checkedAt\":null}}}",
     "{\"verdict\":\"GREEN\",\"covered\":[],\"reason\":\"r\",\"confidence\":0.25,"
     "\"severity\":\"low\",\"reviewer\":\"a@b.org\"}",
     NULL},
    /* Constraints moved into descriptions are still enforced locally. */
    {"optional_fields", EVD_SO_ANTHROPIC,
     "{\"result\":{\"verdict\":\"GREEN\",\"verdictFields\":{\"covered\":[],\"reason\":\"r\","
     "\"confidence\":1.5,\"severity\":null,\"reviewer\":null,\"checkedAt\":null}}}",
     NULL, "schema_mismatch: result must match the selected verdict's owner schema"},
    {"optional_fields", EVD_SO_CHAT,
     "{\"result\":{\"verdict\":\"RED\",\"verdictFields\":{\"why\":\"missing R3\"}}}",
     "{\"verdict\":\"RED\",\"why\":\"missing R3\"}", NULL},
    /* JSON-encoded text fields are decoded before validation. */
    {"open_map", EVD_SO_RESPONSES,
     "{\"result\":{\"labels\":\"{\\\"env\\\":\\\"prod\\\"}\",\"extra\":\"[1,{\\\"x\\\":null}]\","
     "\"pair\":\"[\\\"a\\\",2]\",\"id\":\"xyz\"}}",
     "{\"labels\":{\"env\":\"prod\"},\"extra\":[1,{\"x\":null}],\"pair\":[\"a\",2],\"id\":\"xyz\"}",
     NULL},
    {"open_map", EVD_SO_RESPONSES,
     "{\"result\":{\"labels\":\"{\\\"env\\\":3}\",\"extra\":\"1\",\"pair\":\"[\\\"a\\\",2]\","
     "\"id\":\"xyz\"}}",
     NULL, "schema_mismatch: result must match the output schema"},
    {"open_map", EVD_SO_RESPONSES,
     "{\"result\":{\"labels\":\"{env}\",\"extra\":\"1\",\"pair\":\"[]\",\"id\":\"x\"}}", NULL,
     "schema_mismatch: result must match the output schema"},
    /* Recursive references travel as JSON text at the recursion. */
    {"recursion", EVD_SO_RESPONSES,
     "{\"result\":{\"verdict\":\"GREEN\",\"verdictFields\":{\"tree\":{\"name\":\"root\","
     "\"children\":[\"{\\\"name\\\":\\\"leaf\\\",\\\"children\\\":[]}\"]}}}}",
     "{\"verdict\":\"GREEN\",\"tree\":{\"name\":\"root\",\"children\":[{\"name\":\"leaf\","
     "\"children\":[]}]}}",
     NULL},
    /* Item limits: kept on Responses, checked locally on Anthropic. */
    {"nested_arrays", EVD_SO_ANTHROPIC, "{\"result\":{\"matrix\":[[2],[4,6],[8],[10]]}}", NULL,
     "schema_mismatch: result must match the output schema"},
    {"nested_arrays", EVD_SO_RESPONSES, "{\"result\":{\"matrix\":[[2],[4,6]]}}",
     "{\"matrix\":[[2],[4,6]]}", NULL},
    {"unions", EVD_SO_RESPONSES,
     "{\"result\":{\"verdict\":\"GREEN\",\"verdictFields\":{\"finding\":3,\"kind\":\"bug\","
     "\"target\":\"https://example.com/x\",\"mixed\":\"7\",\"shapes\":\"{\\\"id\\\":7}\","
     "\"note\":\"n\"}}}",
     "{\"verdict\":\"GREEN\",\"finding\":3,\"kind\":\"bug\",\"target\":\"https://example.com/x\","
     "\"mixed\":7,\"shapes\":{\"id\":7},\"note\":\"n\"}",
     NULL},
    {"unions", EVD_SO_RESPONSES,
     "{\"result\":{\"verdict\":\"GREEN\",\"verdictFields\":{\"finding\":3,\"kind\":\"bug\","
     "\"target\":\"https://example.com/x\",\"mixed\":\"7\",\"shapes\":\"{\\\"id\\\":7}\","
     "\"note\":\"\"}}}",
     NULL, "schema_mismatch: result must match the selected verdict's owner schema"},
    /* No owner fields: verdictFields is null. */
    {"no_owner_fields", EVD_SO_RESPONSES,
     "{\"result\":{\"verdict\":\"GREEN\",\"verdictFields\":null}}", "{\"verdict\":\"GREEN\"}",
     NULL},
    /* The whole-value fallback: owner fields as one JSON text. */
    {"oversized_depth", EVD_SO_RESPONSES,
     "{\"result\":{\"verdict\":\"RED\",\"verdictFields\":\"{\\\"why\\\":\\\"deep\\\"}\"}}",
     "{\"verdict\":\"RED\",\"why\":\"deep\"}", NULL},
    {"oversized_optional", EVD_SO_ANTHROPIC,
     "{\"result\":{\"verdict\":\"GREEN\",\"verdictFields\":"
     "\"{\\\"verdict\\\":\\\"GREEN\\\",\\\"f00\\\":\\\"a\\\",\\\"f07\\\":\\\"b\\\"}\"}}",
     "{\"verdict\":\"GREEN\",\"f00\":\"a\",\"f07\":\"b\"}", NULL},
    {"oversized_optional", EVD_SO_ANTHROPIC,
     "{\"result\":{\"verdict\":\"GREEN\",\"verdictFields\":\"{\\\"verdict\\\":\\\"RED\\\","
     "\\\"f00\\\":\\\"a\\\"}\"}}",
     NULL, "schema_mismatch: verdict must be GREEN or RED"},
    {"oversized_optional", EVD_SO_ANTHROPIC,
     "{\"result\":{\"verdict\":\"GREEN\",\"verdictFields\":\"[1]\"}}", NULL,
     "schema_mismatch: result must match the selected verdict's owner schema"},
    /* Envelope problems. */
    {"optional_fields", EVD_SO_RESPONSES, "{\"verdict\":\"GREEN\"}", NULL,
     "schema_mismatch: verdict must be GREEN or RED"},
    {"optional_fields", EVD_SO_RESPONSES,
     "{\"result\":{\"verdict\":\"YELLOW\",\"verdictFields\":{}}}", NULL,
     "schema_mismatch: verdict must be GREEN or RED"},
    {"optional_fields", EVD_SO_RESPONSES,
     "{\"result\":{\"verdict\":\"RED\",\"verdictFields\":{\"why\":\"x\"}},\"extra\":1}", NULL,
     "schema_mismatch: result must match the selected verdict's owner schema"},
    {"open_map", EVD_SO_RESPONSES, "{\"value\":{}}", NULL,
     "schema_mismatch: result must match the output schema"},
};

START_TEST(wire_answer_round_trips_to_stored_value)
{
    const struct round_trip *tc = &ROUND_TRIPS[_i];
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/tests/unit/jsonschema_golden/%s.json", EVALD_SOURCE_DIR,
             tc->golden);
    json_t *golden = evd_test_load_json(path);
    struct evd_so_contract *c = contract_of(golden);
    struct evd_so_wire *w = evd_so_wire_new(c, tc->provider, NULL);
    ck_assert_ptr_nonnull(w);
    /* The answer conforms to the wire schema the provider was given (when valid). */
    json_t *answer = parse(tc->answer);
    if (tc->stored != NULL)
        ck_assert_msg(evd_jsonschema_check(evd_so_wire_schema(w), answer, NULL, 0, NULL) == 0,
                      "case %d: the answer does not match the wire schema", _i);
    json_decref(answer);

    json_t *out = NULL;
    struct evd_so_failure f;
    enum evd_so_result rc = evd_so_decode(c, w, tc->answer, strlen(tc->answer), &out, &f);
    if (tc->stored != NULL) {
        ck_assert_msg(rc == EVD_SO_VALID, "case %d: %s / %s", _i, f.code,
                      f.nlines ? f.lines[0].message : "");
        char *got = dump(out);
        ck_assert_str_eq(got, tc->stored);
        free(got);
        json_decref(out);
    } else {
        ck_assert_int_eq(rc, EVD_SO_INVALID);
        ck_assert_ptr_null(out);
        ck_assert_str_eq(f.code, tc->code);
    }
    evd_so_wire_free(w);
    evd_so_contract_free(c);
    json_decref(golden);
}
END_TEST

START_TEST(optional_null_is_kept_only_when_accepted)
{
    /* b accepts null through a $ref; c does not; d accepts anything. */
    json_t *owner = parse("{\"definitions\":{\"maybe\":{\"type\":[\"integer\",\"null\"]}},"
                          "\"properties\":{\"a\":{\"type\":\"string\"},"
                          "\"b\":{\"$ref\":\"#/definitions/maybe\"},"
                          "\"c\":{\"type\":\"integer\"},\"d\":{\"enum\":[1,null]}}}");
    struct evd_so_contract *c = evd_so_verdict_new(owner, NULL, NULL);
    ck_assert_ptr_nonnull(c);
    struct evd_so_wire *w = evd_so_wire_new(c, EVD_SO_RESPONSES, NULL);
    ck_assert_ptr_nonnull(w);
    const char *answer = "{\"result\":{\"verdict\":\"GREEN\",\"verdictFields\":{\"a\":null,"
                         "\"b\":null,\"c\":null,\"d\":null}}}";
    json_t *out = NULL;
    struct evd_so_failure f;
    ck_assert_int_eq(evd_so_decode(c, w, answer, strlen(answer), &out, &f), EVD_SO_VALID);
    char *got = dump(out);
    ck_assert_str_eq(got, "{\"verdict\":\"GREEN\",\"b\":null,\"d\":null}");
    free(got);
    json_decref(out);
    evd_so_wire_free(w);
    evd_so_contract_free(c);
    json_decref(owner);
}
END_TEST

START_TEST(plain_text_mode_decodes_flat_objects)
{
    json_t *owner = parse("{\"properties\":{\"reason\":{\"type\":\"string\"}},"
                          "\"required\":[\"reason\"]}");
    struct evd_so_contract *c = evd_so_verdict_new(owner, owner, NULL);
    const char *text = "  {\"verdict\":\"RED\",\"reason\":\"  keep spacing  \"}\n";
    json_t *out = NULL;
    struct evd_so_failure f;
    ck_assert_int_eq(evd_so_decode(c, NULL, text, strlen(text), &out, &f), EVD_SO_VALID);
    ck_assert_str_eq(json_string_value(json_object_get(out, "reason")), "  keep spacing  ");
    json_decref(out);
    evd_so_contract_free(c);

    /* A value contract without a schema accepts any JSON value. */
    c = evd_so_value_new(NULL, NULL);
    ck_assert_int_eq(evd_so_decode(c, NULL, "[1,2]", 5, &out, &f), EVD_SO_VALID);
    ck_assert_uint_eq(json_array_size(out), 2);
    json_decref(out);
    struct evd_so_wire *w = evd_so_wire_new(c, EVD_SO_ANTHROPIC, NULL);
    ck_assert(evd_so_wire_fallback(w));
    const char *wire = "{\"result\":\"{\\\"any\\\":true}\"}";
    ck_assert_int_eq(evd_so_decode(c, w, wire, strlen(wire), &out, &f), EVD_SO_VALID);
    ck_assert(json_is_true(json_object_get(out, "any")));
    json_decref(out);
    evd_so_wire_free(w);
    evd_so_contract_free(c);
    json_decref(owner);
}
END_TEST

struct decode_arg {
    const struct evd_so_contract *c;
    const struct evd_so_wire *w;
    int mismatches;
};

static void *decode_many(void *p)
{
    struct decode_arg *a = p;
    const char *good =
        "{\"result\":{\"verdict\":\"GREEN\",\"verdictFields\":{\"tree\":"
        "{\"name\":\"r\",\"children\":[\"{\\\"name\\\":\\\"l\\\",\\\"children\\\":[]}\"]}}}}";
    const char *bad = "{\"result\":{\"verdict\":\"GREEN\",\"verdictFields\":{\"tree\":"
                      "{\"name\":\"r\",\"children\":[\"{\\\"name\\\":1,\\\"children\\\":[]}\"]}}}}";
    for (int i = 0; i < 1000; i++) {
        json_t *out = NULL;
        struct evd_so_failure f;
        if (evd_so_decode(a->c, a->w, good, strlen(good), &out, &f) != EVD_SO_VALID)
            a->mismatches++;
        json_decref(out);
        if (evd_so_decode(a->c, a->w, bad, strlen(bad), &out, &f) != EVD_SO_INVALID ||
            f.nlines != 1 || strcmp(f.lines[0].path, "/tree/children/0/name") != 0)
            a->mismatches++;
    }
    return NULL;
}

START_TEST(contract_and_wire_are_shared_between_threads)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/tests/unit/jsonschema_golden/recursion.json",
             EVALD_SOURCE_DIR);
    json_t *golden = evd_test_load_json(path);
    struct evd_so_contract *c = contract_of(golden);
    struct evd_so_wire *w = evd_so_wire_new(c, EVD_SO_RESPONSES, NULL);
    ck_assert_ptr_nonnull(w);
    pthread_t th[4];
    struct decode_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct decode_arg){c, w, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, decode_many, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(args[i].mismatches, 0);
    }
    evd_so_wire_free(w);
    evd_so_contract_free(c);
    json_decref(golden);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("jsonschema_wire");
    TCase *tg = tcase_create("golden");
    tcase_add_loop_test(tg, golden_wire_schemas, 0, sizeof(GOLDEN) / sizeof(GOLDEN[0]));
    tcase_add_loop_test(tg, wire_schemas_are_strict_everywhere, 0,
                        sizeof(GOLDEN) / sizeof(GOLDEN[0]));
    tcase_add_test(tg, request_fragments_per_provider);
    suite_add_tcase(s, tg);
    TCase *tr = tcase_create("round trips");
    tcase_add_loop_test(tr, wire_answer_round_trips_to_stored_value, 0,
                        sizeof(ROUND_TRIPS) / sizeof(ROUND_TRIPS[0]));
    tcase_add_test(tr, optional_null_is_kept_only_when_accepted);
    tcase_add_test(tr, plain_text_mode_decodes_flat_objects);
    tcase_add_test(tr, contract_and_wire_are_shared_between_threads);
    tcase_set_timeout(tr, 60);
    suite_add_tcase(s, tr);
    return evd_test_run_suite(s);
}
