/*
 * Tests of the final-answer checks and the repair message (schema/structured.h): failure
 * codes in the order they are checked, byte-exact repair texts (the seed's examples, the
 * 200-character line bound, the five-line cap), and the owner-schema rules of a verdict.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/structured.h"
#include "tests/support/testutil.h"

static json_t *parse(const char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
    ck_assert_msg(v != NULL, "bad test JSON %s: %s", text, jerr.text);
    return v;
}

static struct evd_so_contract *verdict_contract(const char *green, const char *red)
{
    json_t *g = green ? parse(green) : NULL, *r = red ? parse(red) : NULL;
    struct evd_err err = {0};
    struct evd_so_contract *c = evd_so_verdict_new(g, r, &err);
    ck_assert_msg(c != NULL, "%s", err.msg);
    json_decref(g);
    json_decref(r);
    return c;
}

/* Decodes `text` in plain mode and returns the repair message (caller frees). */
static char *repair_for(const struct evd_so_contract *c, const struct evd_so_wire *w,
                        const char *text)
{
    json_t *out = NULL;
    struct evd_so_failure f;
    ck_assert_int_eq(evd_so_decode(c, w, text, strlen(text), &out, &f), EVD_SO_INVALID);
    ck_assert_ptr_null(out);
    char *msg = evd_so_repair_message(&f);
    ck_assert_ptr_nonnull(msg);
    return msg;
}

static const char COVERED[] = "{\"type\":\"object\",\"properties\":{\"covered\":"
                              "{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},"
                              "\"required\":[\"covered\"]}";

START_TEST(seed_covered_example_is_byte_exact)
{
    struct evd_so_contract *c = verdict_contract(COVERED, COVERED);
    const char *want = "Your final response did not match the required schema: schema_mismatch: "
                       "result must match the selected verdict's owner schema\n"
                       "- instancePath \"/covered\": \"R1\" is not of type \"array\"\n"
                       "Return only one JSON object matching the schema.";
    /* Plain mode: the flat object. */
    char *msg = repair_for(c, NULL, "{\"verdict\":\"RED\",\"covered\":\"R1\"}");
    ck_assert_str_eq(msg, want);
    free(msg);
    /* Structured mode: paths point into the decoded flat object, not the wire envelope. */
    for (int p = 0; p < 3; p++) {
        struct evd_so_wire *w = evd_so_wire_new(c, (enum evd_so_provider)p, NULL);
        msg = repair_for(
            c, w, "{\"result\":{\"verdict\":\"RED\",\"verdictFields\":{\"covered\":\"R1\"}}}");
        ck_assert_str_eq(msg, want);
        free(msg);
        evd_so_wire_free(w);
    }
    evd_so_contract_free(c);
}
END_TEST

START_TEST(reference_examples_are_byte_exact)
{
    struct evd_so_contract *c = verdict_contract(
        "{\"properties\":{\"reason\":{\"type\":\"string\"}}}",
        "{\"properties\":{\"approved\":{\"type\":\"boolean\"}},\"required\":[\"approved\"]}");
    char *msg = repair_for(c, NULL, "{\"verdict\":\"GREEN\",\"reason\":false}");
    ck_assert_str_eq(msg, "Your final response did not match the required schema: "
                          "schema_mismatch: result must match the selected verdict's owner "
                          "schema\n- instancePath \"/reason\": false is not of type \"string\"\n"
                          "Return only one JSON object matching the schema.");
    free(msg);
    msg = repair_for(c, NULL, "{\"verdict\":\"RED\"}");
    ck_assert_str_eq(msg, "Your final response did not match the required schema: "
                          "schema_mismatch: result must match the selected verdict's owner "
                          "schema\n- instancePath \"\": \"approved\" is a required property\n"
                          "Return only one JSON object matching the schema.");
    free(msg);
    /* Not JSON: the code line only, and nothing about verdicts. */
    msg = repair_for(c, NULL, "```json\n{\"verdict\":\"GREEN\"}\n```");
    ck_assert_str_eq(msg, "Your final response did not match the required schema: not_json: "
                          "return exactly one JSON object, without prose or code fences\n"
                          "Return only one JSON object matching the schema.");
    ck_assert_ptr_null(strstr(msg, "GREEN"));
    free(msg);
    evd_so_contract_free(c);
}
END_TEST

static size_t utf8_chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

START_TEST(lines_are_bounded_to_200_characters)
{
    struct evd_so_failure f;
    memset(&f, 0, sizeof(f));
    snprintf(f.code, sizeof(f.code), "schema_mismatch: x");
    f.nlines = 3;
    /* 1: exactly 200 characters stays whole; 2: 201 is cut; 3: multi-byte text is cut by
       characters, never inside one. */
    const char *prefix = "- instancePath \"/a\": "; /* 21 characters */
    memset(f.lines[0].message, 'm', 179);
    snprintf(f.lines[0].path, sizeof(f.lines[0].path), "/a");
    memset(f.lines[1].message, 'n', 180);
    snprintf(f.lines[1].path, sizeof(f.lines[1].path), "/a");
    for (int i = 0; i < 250; i++)
        memcpy(f.lines[2].message + 2 * i, "\xc3\xa9", 2);
    snprintf(f.lines[2].path, sizeof(f.lines[2].path), "/a");
    char *msg = evd_so_repair_message(&f);
    ck_assert_ptr_nonnull(msg);

    char *lines[8];
    size_t n = 0;
    for (char *p = strtok(msg, "\n"); p != NULL && n < 8; p = strtok(NULL, "\n"))
        lines[n++] = p;
    ck_assert_uint_eq(n, 5);
    ck_assert_str_eq(lines[0],
                     "Your final response did not match the required schema: schema_mismatch: x");
    ck_assert_uint_eq(utf8_chars(lines[1], strlen(lines[1])), 200);
    ck_assert(strncmp(lines[1], prefix, strlen(prefix)) == 0);
    ck_assert_ptr_null(strstr(lines[1], "truncated"));
    ck_assert_uint_eq(utf8_chars(lines[2], strlen(lines[2])), 200);
    const char *tail = "n\xe2\x80\xa6 (truncated)";
    ck_assert_str_eq(lines[2] + strlen(lines[2]) - strlen(tail), tail);
    ck_assert_uint_eq(utf8_chars(lines[3], strlen(lines[3])), 200);
    ck_assert_str_eq(lines[3] + strlen(lines[3]) - strlen("\xc3\xa9\xe2\x80\xa6 (truncated)"),
                     "\xc3\xa9\xe2\x80\xa6 (truncated)");
    ck_assert_str_eq(lines[4], "Return only one JSON object matching the schema.");
    free(msg);
}
END_TEST

START_TEST(at_most_five_lines)
{
    struct evd_so_contract *c = verdict_contract(
        "{\"properties\":{\"a\":{\"type\":\"string\"},\"b\":{\"type\":\"string\"},"
        "\"c\":{\"type\":\"string\"},\"d\":{\"type\":\"string\"},\"e\":{\"type\":\"string\"},"
        "\"f\":{\"type\":\"string\"},\"g\":{\"type\":\"string\"}}}",
        NULL);
    char *msg = repair_for(
        c, NULL, "{\"verdict\":\"GREEN\",\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7}");
    ck_assert_str_eq(msg, "Your final response did not match the required schema: "
                          "schema_mismatch: result must match the selected verdict's owner schema\n"
                          "- instancePath \"/a\": 1 is not of type \"string\"\n"
                          "- instancePath \"/b\": 2 is not of type \"string\"\n"
                          "- instancePath \"/c\": 3 is not of type \"string\"\n"
                          "- instancePath \"/d\": 4 is not of type \"string\"\n"
                          "- instancePath \"/e\": 5 is not of type \"string\"\n"
                          "Return only one JSON object matching the schema.");
    free(msg);
    evd_so_contract_free(c);
}
END_TEST

START_TEST(undeclared_fields_cannot_open_the_result)
{
    /* patternProperties would admit "x-note"; the declared-keys check still refuses it. */
    struct evd_so_contract *c = verdict_contract(
        "{\"properties\":{\"a\":{\"type\":\"string\"}},\"patternProperties\":{\"^x-\":{}}}", NULL);
    char *msg = repair_for(c, NULL, "{\"verdict\":\"GREEN\",\"a\":\"ok\",\"x-note\":1}");
    ck_assert_str_eq(msg, "Your final response did not match the required schema: "
                          "schema_mismatch: result must match the selected verdict's owner schema\n"
                          "- field \"x-note\" is not declared.\n"
                          "Return only one JSON object matching the schema.");
    free(msg);
    evd_so_contract_free(c);
}
END_TEST

struct code_case {
    const char *text;
    const char *code;
};

static const struct code_case CODES[] = {
    {"", "empty: return one JSON object"},
    {" \n\t ", "empty: return one JSON object"},
    {"null", "schema_mismatch: verdict must be GREEN or RED"},
    {"[]", "schema_mismatch: verdict must be GREEN or RED"},
    {"{}", "schema_mismatch: verdict must be GREEN or RED"},
    {"{\"verdict\":\"green\"}", "schema_mismatch: verdict must be GREEN or RED"},
    {"{\"verdict\":true}", "schema_mismatch: verdict must be GREEN or RED"},
    {"{\"verdict\":\"GREEN\"} {}",
     "not_json: return exactly one JSON object, without prose or code fences"},
    {"```json\n{\"verdict\":\"GREEN\"}\n```",
     "not_json: return exactly one JSON object, without prose or code fences"},
    {"Verdict: {\"verdict\":\"GREEN\"}",
     "not_json: return exactly one JSON object, without prose or code fences"},
    {"{\"verdict\":\"GREEN\",\"undeclared\":1}",
     "schema_mismatch: result must match the selected verdict's owner schema"},
    {"{\"verdict\":\"GREEN\",\"model\":\"forged\"}",
     "schema_mismatch: result must match the selected verdict's owner schema"},
    {"{\"verdict\":\"GREEN\",\"reason\":7}",
     "schema_mismatch: result must match the selected verdict's owner schema"},
};

START_TEST(failure_codes_in_order)
{
    const struct code_case *tc = &CODES[_i];
    struct evd_so_contract *c =
        verdict_contract("{\"properties\":{\"reason\":{\"type\":\"string\"}}}", NULL);
    json_t *out = NULL;
    struct evd_so_failure f;
    ck_assert_int_eq(evd_so_decode(c, NULL, tc->text, strlen(tc->text), &out, &f), EVD_SO_INVALID);
    ck_assert_str_eq(f.code, tc->code);
    evd_so_contract_free(c);
}
END_TEST

START_TEST(size_bounds)
{
    struct evd_so_contract *c =
        verdict_contract("{\"properties\":{\"reason\":{\"type\":\"string\"}}}", NULL);
    json_t *out = NULL;
    struct evd_so_failure f;
    /* Over 1 MiB of text, even of whitespace, is refused before parsing. */
    size_t big = EVD_SO_MAX_TEXT_BYTES + 1;
    char *text = malloc(big);
    memset(text, ' ', big);
    ck_assert_int_eq(evd_so_decode(c, NULL, text, big, &out, &f), EVD_SO_INVALID);
    ck_assert_str_eq(f.code, "over_size: final JSON exceeds 1 MiB");
    /* Under 1 MiB, but the normalized result is over 256000 UTF-16 units (escapes count). */
    size_t n = 0;
    n += (size_t)sprintf(text, "{\"verdict\":\"GREEN\",\"reason\":\"");
    for (int i = 0; i < 130000; i++) {
        memcpy(text + n, "\\n", 2);
        n += 2;
    }
    n += (size_t)sprintf(text + n, "\"}");
    ck_assert_int_eq(evd_so_decode(c, NULL, text, n, &out, &f), EVD_SO_INVALID);
    ck_assert_str_eq(f.code, "over_size: normalized result exceeds 256000 characters");
    ck_assert_uint_eq(f.nlines, 0);
    /* 60000 emoji are 120000 UTF-16 units (two each) plus the wrapper: accepted. */
    n = (size_t)sprintf(text, "{\"verdict\":\"GREEN\",\"reason\":\"");
    for (int i = 0; i < 60000; i++) {
        memcpy(text + n, "\xf0\x9f\x92\xa9", 4);
        n += 4;
    }
    n += (size_t)sprintf(text + n, "\"}");
    ck_assert_int_eq(evd_so_decode(c, NULL, text, n, &out, &f), EVD_SO_VALID);
    json_decref(out);
    free(text);
    evd_so_contract_free(c);
}
END_TEST

START_TEST(codes_never_carry_model_output)
{
    struct evd_so_contract *c =
        verdict_contract("{\"properties\":{\"reason\":{\"type\":\"string\"}}}", NULL);
    const char *texts[] = {"{\"verdict\":\"GREEN\",\"reason\":[\"sk-SECRET-123\"]}",
                           "{\"verdict\":\"GREEN\",\"sk-SECRET-123\":1}", "sk-SECRET-123",
                           "{\"verdict\":\"sk-SECRET-123\"}"};
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        json_t *out = NULL;
        struct evd_so_failure f;
        ck_assert_int_eq(evd_so_decode(c, NULL, texts[i], strlen(texts[i]), &out, &f),
                         EVD_SO_INVALID);
        ck_assert_ptr_null(strstr(f.code, "SECRET"));
    }
    evd_so_contract_free(c);
}
END_TEST

struct owner_case {
    const char *schema;
    const char *message;
};

static const struct owner_case OWNERS[] = {
    {"{\"type\":\"array\"}", "GREEN schema: type must be \"object\" when declared"},
    {"{\"anyOf\":[{}]}",
     "GREEN schema cannot use top-level composition; compose inside owner fields"},
    {"{\"not\":{}}", "GREEN schema cannot use top-level composition; compose inside owner fields"},
    {"{\"additionalProperties\":true}", "GREEN schema must forbid undeclared top-level fields"},
    {"{\"additionalProperties\":{\"type\":\"string\"}}",
     "GREEN schema must forbid undeclared top-level fields"},
    {"{\"properties\":{\"model\":{}}}",
     "GREEN schema must not use the reserved field name \"model\""},
    {"{\"required\":[\"toolCalls\"]}",
     "GREEN schema must not use the reserved field name \"toolCalls\""},
    {"{\"properties\":{\"verdict\":{}}}",
     "GREEN schema must not use the reserved field name \"verdict\""},
    {"{\"$ref\":\"#/definitions/x\",\"definitions\":{\"x\":{}}}",
     "GREEN schema cannot be a top-level $ref; declare the owner fields at the top"},
    {"{\"properties\":{\"a\":{\"minLength\":-1}}}",
     "GREEN schema: invalid schema at \"/properties/a/minLength\": must be a non-negative integer"},
    {"[]", "GREEN schema must be a JSON Schema object"},
};

START_TEST(owner_schemas_are_checked)
{
    const struct owner_case *tc = &OWNERS[_i];
    json_t *bad = parse(tc->schema);
    struct evd_err err = {0};
    ck_assert_ptr_null(evd_so_verdict_new(bad, NULL, &err));
    ck_assert_int_eq(err.code, EVD_EINVAL);
    ck_assert_str_eq(err.msg, tc->message);
    /* The same schema as the RED owner names RED. */
    ck_assert_ptr_null(evd_so_verdict_new(NULL, bad, &err));
    ck_assert(strncmp(err.msg, "RED schema", 10) == 0);
    json_decref(bad);
}
END_TEST

START_TEST(owner_schema_size_is_bounded)
{
    json_t *big = json_object();
    json_t *props = json_object();
    json_object_set_new(big, "properties", props);
    char key[32];
    for (int i = 0; i < 200000; i++) {
        snprintf(key, sizeof(key), "field_%06d", i);
        json_object_set_new(props, key, json_pack("{ss}", "description", "0123456789012345678"));
    }
    struct evd_err err = {0};
    ck_assert_ptr_null(evd_so_verdict_new(big, NULL, &err));
    ck_assert_str_eq(err.msg, "GREEN schema exceeds 8 MiB");
    ck_assert_ptr_null(evd_so_value_new(big, &err));
    ck_assert_str_eq(err.msg, "output schema exceeds 8 MiB");
    json_decref(big);
}
END_TEST

START_TEST(value_contract_reports_output_schema)
{
    json_t *schema = parse("{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}");
    struct evd_so_contract *c = evd_so_value_new(schema, NULL);
    ck_assert_ptr_nonnull(c);
    char *msg = repair_for(c, NULL, "[1,\"two\"]");
    ck_assert_str_eq(msg, "Your final response did not match the required schema: "
                          "schema_mismatch: result must match the output schema\n"
                          "- instancePath \"/1\": \"two\" is not of type \"integer\"\n"
                          "Return only one JSON object matching the schema.");
    free(msg);
    struct evd_err err = {0};
    json_t *bad = parse("{\"type\":\"nope\"}");
    ck_assert_ptr_null(evd_so_value_new(bad, &err));
    ck_assert(strncmp(err.msg, "output schema: invalid schema at \"/type\"", 40) == 0);
    json_decref(bad);
    evd_so_contract_free(c);
    json_decref(schema);
}
END_TEST

/* The wire answers of `c` on Chat Completions (a strict json_schema format). */
static struct evd_so_wire *chat_wire(const struct evd_so_contract *c)
{
    struct evd_err err = {0};
    struct evd_so_wire *w = evd_so_wire_new(c, EVD_SO_CHAT, &err);
    ck_assert_msg(w != NULL, "%s", err.msg);
    return w;
}

START_TEST(missing_envelope_is_named)
{
    /* The model answered the owner value without {"result": …}: the repair turn says
     * which envelope to use, and which fields do not belong at the top. */
    json_t *schema = parse(COVERED);
    struct evd_so_contract *c = evd_so_value_new(schema, NULL);
    ck_assert_ptr_nonnull(c);
    struct evd_so_wire *w = chat_wire(c);
    char *msg = repair_for(c, w, "{\"covered\":[\"R1\"]}");
    ck_assert_str_eq(msg, "Your final response did not match the required schema: "
                          "schema_mismatch: result must match the output schema\n"
                          "- instancePath \"\": \"result\" is a required property: the answer "
                          "is {\"result\": <value>} with the value matching the output schema\n"
                          "- field \"covered\" is not declared.\n"
                          "Return only one JSON object matching the schema.");
    free(msg);
    msg = repair_for(c, w, "[\"R1\"]");
    ck_assert_str_eq(msg, "Your final response did not match the required schema: "
                          "schema_mismatch: result must match the output schema\n"
                          "- instancePath \"\": the answer must be a JSON object with one "
                          "field, \"result\"\n"
                          "Return only one JSON object matching the schema.");
    free(msg);
    msg = repair_for(c, w, "{\"result\":{\"covered\":[]},\"extra\":1}");
    ck_assert_str_eq(msg, "Your final response did not match the required schema: "
                          "schema_mismatch: result must match the output schema\n"
                          "- field \"extra\" is not declared.\n"
                          "Return only one JSON object matching the schema.");
    free(msg);
    evd_so_wire_free(w);
    evd_so_contract_free(c);
    json_decref(schema);

    c = verdict_contract("{\"properties\":{\"reason\":{\"type\":\"string\"}}}", NULL);
    w = chat_wire(c);
    msg = repair_for(c, w, "{\"verdict\":\"GREEN\",\"reason\":\"fine\"}");
    ck_assert_str_eq(msg, "Your final response did not match the required schema: "
                          "schema_mismatch: verdict must be GREEN or RED\n"
                          "- instancePath \"\": \"result\" is a required property: the answer "
                          "is {\"result\": {\"verdict\": \"GREEN\" or \"RED\", "
                          "\"verdictFields\": {<owner fields>}}}\n"
                          "- field \"verdict\" is not declared.\n"
                          "- field \"reason\" is not declared.\n"
                          "Return only one JSON object matching the schema.");
    free(msg);
    msg = repair_for(c, w, "{\"result\":{\"verdict\":\"green\",\"verdictFields\":{}}}");
    ck_assert_str_eq(msg, "Your final response did not match the required schema: "
                          "schema_mismatch: verdict must be GREEN or RED\n"
                          "- instancePath \"/result/verdict\": must be \"GREEN\" or \"RED\"\n"
                          "Return only one JSON object matching the schema.");
    free(msg);
    evd_so_wire_free(w);
    evd_so_contract_free(c);
}
END_TEST

START_TEST(bare_answer_accepted_when_unenforced)
{
    json_t *schema = parse(COVERED);
    struct evd_so_contract *c = evd_so_value_new(schema, NULL);
    struct evd_so_wire *w = chat_wire(c);
    struct evd_so_failure f;
    json_t *out = NULL;
    static const char bare[] = "{\"covered\":[\"R1\"]}";
    /* Enforcing provider: the envelope is required. */
    ck_assert_int_eq(evd_so_decode(c, w, bare, strlen(bare), &out, &f), EVD_SO_INVALID);
    ck_assert_ptr_null(out);
    /* A provider that may ignore the format: the bare value validates, so it is the answer. */
    ck_assert_int_eq(evd_so_decode_unenforced(c, w, bare, strlen(bare), &out, &f), EVD_SO_VALID);
    json_t *want = parse(bare);
    ck_assert(json_equal(out, want));
    json_decref(want);
    json_decref(out);
    /* The envelope still works, and is read as one. */
    static const char wrapped[] = "{\"result\":{\"covered\":[\"a\",\"b\"]}}";
    ck_assert_int_eq(evd_so_decode_unenforced(c, w, wrapped, strlen(wrapped), &out, &f),
                     EVD_SO_VALID);
    ck_assert_uint_eq(json_array_size(json_object_get(out, "covered")), 2);
    json_decref(out);
    /* A bare value that breaks the schema: the failure names the envelope. */
    static const char wrong[] = "{\"covered\":\"R1\"}";
    ck_assert_int_eq(evd_so_decode_unenforced(c, w, wrong, strlen(wrong), &out, &f),
                     EVD_SO_INVALID);
    ck_assert_ptr_null(out);
    ck_assert_str_eq(f.code, "schema_mismatch: result must match the output schema");
    ck_assert_uint_eq(f.nlines, 2);
    ck_assert_str_eq(f.lines[0].path, "");
    ck_assert_ptr_nonnull(strstr(f.lines[0].message, "{\"result\": <value>}"));
    evd_so_wire_free(w);
    evd_so_contract_free(c);
    json_decref(schema);

    /* A flat verdict, checked against the owner schema of the verdict it names. */
    c = verdict_contract("{\"properties\":{\"reason\":{\"type\":\"string\"}}}", NULL);
    w = chat_wire(c);
    static const char flat[] = "{\"verdict\":\"GREEN\",\"reason\":\"fine\"}";
    ck_assert_int_eq(evd_so_decode(c, w, flat, strlen(flat), &out, &f), EVD_SO_INVALID);
    ck_assert_int_eq(evd_so_decode_unenforced(c, w, flat, strlen(flat), &out, &f), EVD_SO_VALID);
    ck_assert_str_eq(json_string_value(json_object_get(out, "verdict")), "GREEN");
    ck_assert_str_eq(json_string_value(json_object_get(out, "reason")), "fine");
    json_decref(out);
    static const char forged[] = "{\"verdict\":\"GREEN\",\"model\":\"x\"}";
    ck_assert_int_eq(evd_so_decode_unenforced(c, w, forged, strlen(forged), &out, &f),
                     EVD_SO_INVALID);
    ck_assert_str_eq(f.code, "schema_mismatch: verdict must be GREEN or RED");
    evd_so_wire_free(w);
    evd_so_contract_free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("jsonschema_repair");
    TCase *tr = tcase_create("repair");
    tcase_add_test(tr, seed_covered_example_is_byte_exact);
    tcase_add_test(tr, reference_examples_are_byte_exact);
    tcase_add_test(tr, lines_are_bounded_to_200_characters);
    tcase_add_test(tr, at_most_five_lines);
    tcase_add_test(tr, undeclared_fields_cannot_open_the_result);
    suite_add_tcase(s, tr);
    TCase *td = tcase_create("decode");
    tcase_add_loop_test(td, failure_codes_in_order, 0, sizeof(CODES) / sizeof(CODES[0]));
    tcase_add_test(td, size_bounds);
    tcase_add_test(td, codes_never_carry_model_output);
    tcase_add_test(td, value_contract_reports_output_schema);
    tcase_add_test(td, missing_envelope_is_named);
    tcase_add_test(td, bare_answer_accepted_when_unenforced);
    suite_add_tcase(s, td);
    TCase *to = tcase_create("owners");
    tcase_add_loop_test(to, owner_schemas_are_checked, 0, sizeof(OWNERS) / sizeof(OWNERS[0]));
    tcase_add_test(to, owner_schema_size_is_bounded);
    tcase_set_timeout(to, 60);
    suite_add_tcase(s, to);
    return evd_test_run_suite(s);
}
