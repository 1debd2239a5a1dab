/*
 * Unit tests for schema/jsonschema: the message wording and instance path of every
 * keyword, error order and the `max` cap, recursive schemas, invalid-schema reports,
 * depth and size bounds, remote documents, and concurrent use of one validator.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/jsonschema.h"
#include "tests/support/testutil.h"

static json_t *parse(const char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
    ck_assert_msg(v != NULL, "bad test JSON %s: %s", text, jerr.text);
    return v;
}

struct msg_case {
    const char *schema;
    const char *instance;
    const char *path;
    const char *keyword;
    const char *message;
};

/* One row per keyword (and per wording variant): the first error of each. */
static const struct msg_case MESSAGES[] = {
    {"{\"type\":\"object\",\"properties\":{\"covered\":{\"type\":\"array\"}}}",
     "{\"covered\":\"R1\"}", "/covered", "type", "\"R1\" is not of type \"array\""},
    {"{\"properties\":{\"reason\":{\"type\":\"string\"}}}", "{\"reason\":false}", "/reason", "type",
     "false is not of type \"string\""},
    {"{\"required\":[\"approved\"]}", "{}", "", "required", "\"approved\" is a required property"},
    {"{\"type\":[\"string\",\"null\"]}", "5", "", "type", "5 is not of types \"string\", \"null\""},
    {"{\"type\":\"integer\"}", "1.5", "", "type", "1.5 is not of type \"integer\""},
    {"{\"enum\":[\"a\",1,null]}", "\"b\"", "", "enum", "\"b\" is not one of [\"a\",1,null]"},
    {"{\"const\":{\"x\":[1,2]}}", "2", "", "const", "{\"x\":[1,2]} was expected"},
    {"{\"multipleOf\":2}", "3", "", "multipleOf", "3 is not a multiple of 2"},
    {"{\"multipleOf\":0.1}", "0.35", "", "multipleOf", "0.35 is not a multiple of 0.1"},
    {"{\"maximum\":5}", "6.5", "", "maximum", "6.5 is greater than the maximum of 5"},
    {"{\"exclusiveMaximum\":5}", "5", "", "exclusiveMaximum",
     "5 is greater than or equal to the maximum of 5"},
    {"{\"minimum\":1.5}", "1", "", "minimum", "1 is less than the minimum of 1.5"},
    {"{\"exclusiveMinimum\":0}", "0.0", "", "exclusiveMinimum",
     "0.0 is less than or equal to the minimum of 0"},
    {"{\"maxLength\":2}", "\"h\xc3\xa9\xc3\xa9\"", "", "maxLength",
     "\"h\xc3\xa9\xc3\xa9\" is longer than 2 characters"},
    {"{\"maxLength\":1}", "\"ab\"", "", "maxLength", "\"ab\" is longer than 1 character"},
    {"{\"minLength\":1}", "\"\"", "", "minLength", "\"\" is shorter than 1 character"},
    {"{\"minLength\":3}", "\"ab\"", "", "minLength", "\"ab\" is shorter than 3 characters"},
    {"{\"pattern\":\"^a+$\"}", "\"ab\"", "", "pattern", "\"ab\" does not match \"^a+$\""},
    {"{\"format\":\"date\"}", "\"2021-02-29\"", "", "format", "\"2021-02-29\" is not a \"date\""},
    {"{\"format\":\"email\"}", "\"a..b@x.org\"", "", "format", "\"a..b@x.org\" is not a \"email\""},
    {"{\"items\":{\"type\":\"integer\"}}", "[1,\"x\"]", "/1", "type",
     "\"x\" is not of type \"integer\""},
    {"{\"items\":[{\"type\":\"string\"},{\"type\":\"string\"}]}", "[\"a\",2]", "/1", "type",
     "2 is not of type \"string\""},
    {"{\"items\":[{}],\"additionalItems\":false}", "[1,2,3]", "", "additionalItems",
     "Additional items are not allowed (2, 3 were unexpected)"},
    {"{\"items\":[{}],\"additionalItems\":false}", "[1,{\"a\":2}]", "", "additionalItems",
     "Additional items are not allowed ({\"a\":2} was unexpected)"},
    {"{\"items\":[{}],\"additionalItems\":{\"type\":\"string\"}}", "[1,2]", "/1", "type",
     "2 is not of type \"string\""},
    {"{\"maxItems\":1}", "[1,2]", "", "maxItems", "[1,2] has more than 1 item"},
    {"{\"minItems\":2}", "[1]", "", "minItems", "[1] has less than 2 items"},
    {"{\"uniqueItems\":true}", "[1,\"a\",1.0]", "", "uniqueItems",
     "[1,\"a\",1.0] has non-unique elements"},
    {"{\"contains\":{\"type\":\"string\"}}", "[1,2]", "", "contains",
     "None of [1,2] are valid under the given schema"},
    {"{\"maxProperties\":1}", "{\"a\":1,\"b\":2}", "", "maxProperties",
     "{\"a\":1,\"b\":2} has more than 1 property"},
    {"{\"minProperties\":2}", "{}", "", "minProperties", "{} has less than 2 properties"},
    {"{\"properties\":{\"a\":{}},\"additionalProperties\":false}", "{\"a\":1,\"b\":2,\"c\":3}", "",
     "additionalProperties", "Additional properties are not allowed ('b', 'c' were unexpected)"},
    {"{\"patternProperties\":{\"^x\":{}},\"additionalProperties\":false}", "{\"xa\":1,\"b\":2}", "",
     "additionalProperties", "Additional properties are not allowed ('b' was unexpected)"},
    {"{\"additionalProperties\":{\"type\":\"string\"}}", "{\"x\":1}", "/x", "type",
     "1 is not of type \"string\""},
    {"{\"patternProperties\":{\"^n_\":{\"type\":\"number\"}}}", "{\"n_a\":\"1\"}", "/n_a", "type",
     "\"1\" is not of type \"number\""},
    {"{\"dependencies\":{\"a\":[\"b\"]}}", "{\"a\":1}", "", "dependencies",
     "\"b\" is a required property"},
    {"{\"dependencies\":{\"a\":{\"required\":[\"c\"]}}}", "{\"a\":1}", "", "required",
     "\"c\" is a required property"},
    {"{\"propertyNames\":{\"maxLength\":2}}", "{\"abc\":1}", "", "maxLength",
     "\"abc\" is longer than 2 characters"},
    {"{\"if\":{\"type\":\"integer\"},\"then\":{\"minimum\":5},\"else\":{\"type\":\"string\"}}", "3",
     "", "minimum", "3 is less than the minimum of 5"},
    {"{\"if\":{\"type\":\"integer\"},\"then\":{\"minimum\":5},\"else\":{\"type\":\"string\"}}",
     "null", "", "type", "null is not of type \"string\""},
    {"{\"allOf\":[{\"type\":\"number\"},{\"maximum\":2}]}", "3", "", "maximum",
     "3 is greater than the maximum of 2"},
    {"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}", "1", "", "anyOf",
     "1 is not valid under any of the schemas listed in the 'anyOf' keyword"},
    {"{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}", "1", "", "oneOf",
     "1 is not valid under any of the schemas listed in the 'oneOf' keyword"},
    {"{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":0}]}", "1", "", "oneOf",
     "1 is valid under more than one of the schemas listed in the 'oneOf' keyword"},
    {"{\"not\":{\"type\":\"string\"}}", "\"x\"", "", "not",
     "{\"type\":\"string\"} is not allowed for \"x\""},
    {"{\"properties\":{\"a\":false}}", "{\"a\":1}", "/a", "false", "False schema does not allow 1"},
    {"false", "{}", "", "false", "False schema does not allow {}"},
    {"{\"definitions\":{\"s\":{\"type\":\"string\"}},\"properties\":{\"a\":{\"$ref\":\"#/"
     "definitions/s\"}}}",
     "{\"a\":1}", "/a", "type", "1 is not of type \"string\""},
    {"{\"properties\":{\"a/b\":{\"properties\":{\"m~n\":{\"type\":\"string\"}}}}}",
     "{\"a/b\":{\"m~n\":1}}", "/a~1b/m~0n", "type", "1 is not of type \"string\""},
    {"{\"items\":{\"properties\":{\"x\":{\"enum\":[1.5]}}}}", "[{},{\"x\":1e300}]", "/1/x", "enum",
     "1e300 is not one of [1.5]"},
};

START_TEST(message_and_path_per_keyword)
{
    const struct msg_case *tc = &MESSAGES[_i];
    json_t *schema = parse(tc->schema), *inst = parse(tc->instance);
    struct evd_err err = {0};
    struct evd_jsonschema *v = evd_jsonschema_new(schema, &err);
    ck_assert_msg(v != NULL, "%s: %s", tc->schema, err.msg);
    struct evd_schema_error errs[4];
    size_t n = evd_jsonschema_validate(v, inst, errs, 4);
    ck_assert_msg(n >= 1, "%s accepted %s", tc->schema, tc->instance);
    ck_assert_str_eq(errs[0].message, tc->message);
    ck_assert_str_eq(errs[0].instance_path, tc->path);
    ck_assert_str_eq(errs[0].keyword, tc->keyword);
    ck_assert(!evd_jsonschema_is_valid(v, inst));
    evd_jsonschema_free(v);
    json_decref(schema);
    json_decref(inst);
}
END_TEST

struct valid_case {
    const char *schema;
    const char *instance;
    bool valid;
};

static const struct valid_case VALIDITY[] = {
    {"{\"type\":\"integer\"}", "1.0", true},
    {"{\"type\":\"integer\"}", "-0.0", true},
    {"{\"enum\":[1]}", "1.0", true},
    {"{\"const\":{\"a\":[1,2.0]}}", "{\"a\":[1.0,2]}", true},
    {"{\"uniqueItems\":true}", "[{\"a\":1,\"b\":2},{\"b\":2,\"a\":1.0}]", false},
    {"{\"uniqueItems\":true}", "[[1],[true]]", true},
    {"{\"maxLength\":2}", "\"\xf0\x9f\x92\xa9\xf0\x9f\x92\xa9\"", true},
    {"{\"multipleOf\":0.0001}", "0.0075", true},
    {"{\"multipleOf\":0.0001}", "0.00751", false},
    {"{\"maximum\":9007199254740993}", "9007199254740992.0", true},
    {"{\"minimum\":9007199254740993}", "9007199254740992", false},
    {"{\"pattern\":\"^\\\\u0041+$\"}", "\"AAA\"", true},
    {"{\"pattern\":\"^a$\"}", "\"a\\n\"", false},
    {"{\"pattern\":\"b\"}", "\"abc\"", true},
    {"{\"pattern\":\"^\\\\s$\"}", "\"\xc2\xa0\"", true},
    {"{\"format\":\"date-time\"}", "\"1998-12-31T23:59:60Z\"", true},
    {"{\"format\":\"date-time\"}", "\"1998-12-31T23:58:60Z\"", false},
    {"{\"format\":\"ipv6\"}", "\"::ffff:192.168.0.1\"", true},
    {"{\"format\":\"ipv4\"}", "\"192.168.0.01\"", false},
    {"{\"format\":\"uri\"}", "\"https://example.com/a?b#c\"", true},
    {"{\"format\":\"uri\"}", "\"//example.com\"", false},
    {"{\"format\":\"unknown-format\"}", "\"anything\"", true},
    {"{\"$ref\":\"#/definitions/"
     "a\",\"definitions\":{\"a\":{\"type\":\"string\"}},\"type\":\"number\"}",
     "\"s\"", true},
    {"{\"$ref\":\"http://json-schema.org/draft-07/schema#\"}", "{\"type\":\"string\"}", true},
    {"{\"$ref\":\"http://json-schema.org/draft-07/schema#\"}", "{\"minLength\":-1}", false},
};

START_TEST(validity_edge_cases)
{
    const struct valid_case *tc = &VALIDITY[_i];
    json_t *schema = parse(tc->schema), *inst = parse(tc->instance);
    struct evd_err err = {0};
    size_t n = evd_jsonschema_check(schema, inst, NULL, 0, &err);
    ck_assert_msg(n != (size_t)-1, "%s: %s", tc->schema, err.msg);
    ck_assert_msg((n == 0) == tc->valid, "%s with %s: %zu errors", tc->schema, tc->instance, n);
    json_decref(schema);
    json_decref(inst);
}
END_TEST

START_TEST(errors_come_in_schema_order_and_respect_max)
{
    json_t *schema =
        parse("{\"type\":\"object\",\"required\":[\"a\",\"b\"],"
              "\"properties\":{\"c\":{\"type\":\"string\"},\"d\":{\"type\":\"integer\"}}}");
    json_t *inst = parse("{\"d\":\"x\",\"c\":1}");
    struct evd_jsonschema *v = evd_jsonschema_new(schema, NULL);
    ck_assert_ptr_nonnull(v);
    struct evd_schema_error errs[5];
    ck_assert_uint_eq(evd_jsonschema_validate(v, inst, errs, 5), 4);
    ck_assert_str_eq(errs[0].message, "\"a\" is a required property");
    ck_assert_str_eq(errs[1].message, "\"b\" is a required property");
    ck_assert_str_eq(errs[2].instance_path, "/c");
    ck_assert_str_eq(errs[3].instance_path, "/d");

    /* Capped: the count stays 4, only two entries are written. */
    memset(errs, 0x5a, sizeof(errs));
    ck_assert_uint_eq(evd_jsonschema_validate(v, inst, errs, 2), 4);
    ck_assert_str_eq(errs[1].message, "\"b\" is a required property");
    ck_assert_int_eq((unsigned char)errs[2].message[0], 0x5a);
    ck_assert_uint_eq(evd_jsonschema_validate(v, inst, NULL, 0), 4);
    evd_jsonschema_free(v);
    json_decref(schema);
    json_decref(inst);
}
END_TEST

static const char TREE[] =
    "{\"$id\":\"http://example.com/tree.json\",\"type\":\"object\",\"required\":[\"value\"],"
    "\"properties\":{\"value\":{\"type\":\"number\"},"
    "\"children\":{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}},"
    "\"additionalProperties\":false}";

/* A chain of `depth` nodes; the innermost value is `leaf` (new reference). */
static json_t *tree_chain(int depth, json_t *leaf)
{
    json_t *node = json_pack("{s:o}", "value", leaf);
    for (int i = 1; i < depth; i++)
        node = json_pack("{s:i, s:[o]}", "value", i, "children", node);
    return node;
}

START_TEST(recursive_schema_reports_deep_paths)
{
    json_t *schema = parse(TREE);
    struct evd_jsonschema *v = evd_jsonschema_new(schema, NULL);
    ck_assert_ptr_nonnull(v);
    json_t *ok = tree_chain(20, json_integer(7));
    ck_assert_uint_eq(evd_jsonschema_validate(v, ok, NULL, 0), 0);
    json_t *bad = tree_chain(4, json_string("seven"));
    struct evd_schema_error e;
    ck_assert_uint_eq(evd_jsonschema_validate(v, bad, &e, 1), 1);
    ck_assert_str_eq(e.instance_path, "/children/0/children/0/children/0/value");
    ck_assert_str_eq(e.message, "\"seven\" is not of type \"number\"");
    json_decref(ok);
    json_decref(bad);
    evd_jsonschema_free(v);
    json_decref(schema);
}
END_TEST

struct bad_schema {
    const char *schema;
    enum evd_code code;
    const char *message;
};

static const struct bad_schema BAD_SCHEMAS[] = {
    {"42", EVD_EINVAL, "invalid schema at \"\": a schema must be an object or a boolean"},
    {"{\"type\":\"strin\"}", EVD_EINVAL,
     "invalid schema at \"/type\": must be one of \"array\", \"boolean\", \"integer\", \"null\", "
     "\"number\", \"object\", \"string\", or an array of them"},
    {"{\"properties\":{\"a\":{\"minLength\":-1}}}", EVD_EINVAL,
     "invalid schema at \"/properties/a/minLength\": must be a non-negative integer"},
    {"{\"multipleOf\":0}", EVD_EINVAL, "invalid schema at \"/multipleOf\": must be greater than 0"},
    {"{\"required\":[1]}", EVD_EINVAL,
     "invalid schema at \"/required\": must be an array of strings"},
    {"{\"anyOf\":[]}", EVD_EINVAL,
     "invalid schema at \"/anyOf\": must be a non-empty array of schemas"},
    {"{\"items\":[{\"type\":\"string\"},3]}", EVD_EINVAL,
     "invalid schema at \"/items/1\": a schema must be an object or a boolean"},
    {"{\"definitions\":{\"x\":{\"enum\":1}}}", EVD_EINVAL,
     "invalid schema at \"/definitions/x/enum\": must be an array"},
    {"{\"$ref\":\"#/definitions/missing\"}", EVD_EINVAL,
     "invalid schema at \"#/definitions/missing\": could not resolve $ref "
     "\"#/definitions/missing\""},
    {"{\"$ref\":\"http://example.com/elsewhere.json\"}", EVD_EINVAL,
     "invalid schema at \"http://example.com/elsewhere.json\": could not resolve $ref "
     "\"http://example.com/elsewhere.json\""},
    {"{\"$ref\":5}", EVD_EINVAL, "invalid schema at \"/$ref\": must be a string"},
};

START_TEST(invalid_schemas_name_the_location)
{
    const struct bad_schema *tc = &BAD_SCHEMAS[_i];
    json_t *schema = parse(tc->schema);
    struct evd_err err = {0};
    ck_assert_ptr_null(evd_jsonschema_new(schema, &err));
    ck_assert_int_eq(err.code, tc->code);
    ck_assert_str_eq(err.msg, tc->message);
    ck_assert_ptr_null(evd_jsonschema_new(schema, NULL)); /* NULL err is accepted */
    json_decref(schema);
}
END_TEST

START_TEST(bad_pattern_is_reported_with_pcre2_reason)
{
    json_t *schema = parse("{\"properties\":{\"p\":{\"pattern\":\"(a\"}}}");
    struct evd_err err = {0};
    ck_assert_ptr_null(evd_jsonschema_new(schema, &err));
    ck_assert_int_eq(err.code, EVD_EINVAL);
    ck_assert_str_eq(err.msg, "invalid schema at \"/properties/p/pattern\": pattern is not a valid "
                              "regular expression: missing closing parenthesis");
    json_decref(schema);
}
END_TEST

START_TEST(schema_nesting_is_bounded)
{
    json_t *deep = json_object();
    for (int i = 0; i < EVD_JSONSCHEMA_MAX_SCHEMA_DEPTH + 10; i++)
        deep = json_pack("{s:o}", "items", deep);
    struct evd_err err = {0};
    ck_assert_ptr_null(evd_jsonschema_new(deep, &err));
    ck_assert_int_eq(err.code, EVD_EINVAL);
    ck_assert_msg(strstr(err.msg, "schemas nest deeper than 128 levels") != NULL, "%s", err.msg);
    json_decref(deep);

    json_t *ok = json_object();
    for (int i = 0; i < 100; i++)
        ok = json_pack("{s:o}", "items", ok);
    struct evd_jsonschema *v = evd_jsonschema_new(ok, &err);
    ck_assert_ptr_nonnull(v);
    evd_jsonschema_free(v);
    json_decref(ok);
}
END_TEST

START_TEST(evaluation_depth_is_bounded_and_never_passes)
{
    json_t *list = parse("{\"definitions\":{\"l\":{\"type\":\"object\",\"properties\":"
                         "{\"next\":{\"$ref\":\"#/definitions/l\"}}}},"
                         "\"$ref\":\"#/definitions/l\"}");
    json_t *inst = json_object();
    for (int i = 0; i < 3000; i++)
        inst = json_pack("{s:o}", "next", inst);
    struct evd_jsonschema *v = evd_jsonschema_new(list, NULL);
    ck_assert_ptr_nonnull(v);
    struct evd_schema_error e;
    ck_assert_uint_ge(evd_jsonschema_validate(v, inst, &e, 1), 1);
    ck_assert_str_eq(e.keyword, "depth");
    ck_assert_str_eq(e.message, "validation exceeds the maximum depth of 512 nested schemas");
    ck_assert(strncmp(e.instance_path, "/next/next/", 11) == 0);
    evd_jsonschema_free(v);

    /* Wrapped in "not", a cut-off branch must not turn into a pass. */
    json_t *negated = parse("{\"definitions\":{\"l\":{\"type\":\"object\",\"properties\":"
                            "{\"next\":{\"$ref\":\"#/definitions/l\"}}}},"
                            "\"not\":{\"not\":{\"$ref\":\"#/definitions/l\"}}}");
    v = evd_jsonschema_new(negated, NULL);
    ck_assert_ptr_nonnull(v);
    struct evd_schema_error two[2];
    ck_assert_uint_eq(evd_jsonschema_validate(v, inst, two, 2), 2);
    ck_assert_str_eq(two[0].keyword, "not");
    ck_assert_str_eq(two[1].keyword, "depth");
    ck_assert_str_eq(two[1].instance_path, "");
    ck_assert(!evd_jsonschema_is_valid(v, inst));
    evd_jsonschema_free(v);

    /* A $ref loop that never reaches the instance ends at the bound too. */
    json_t *loop = parse("{\"definitions\":{\"a\":{\"$ref\":\"#/definitions/a\"}},"
                         "\"anyOf\":[{\"$ref\":\"#/definitions/a\"}]}");
    v = evd_jsonschema_new(loop, NULL);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_ge(evd_jsonschema_validate(v, json_null(), NULL, 0), 1);
    evd_jsonschema_free(v);

    json_decref(loop);
    json_decref(negated);
    json_decref(inst);
    json_decref(list);
}
END_TEST

START_TEST(messages_and_paths_are_bounded_utf8)
{
    json_t *schema = parse("{\"additionalProperties\":{\"type\":\"integer\"}}");
    struct evd_jsonschema *v = evd_jsonschema_new(schema, NULL);
    ck_assert_ptr_nonnull(v);
    char *key = malloc(601);
    for (int i = 0; i < 300; i++)
        memcpy(key + 2 * i, "\xc3\xa9", 2);
    key[600] = '\0';
    json_t *inst = json_object();
    json_object_set_new(inst, key, json_string(key));
    struct evd_schema_error e;
    ck_assert_uint_eq(evd_jsonschema_validate(v, inst, &e, 1), 1);
    size_t pl = strlen(e.instance_path), ml = strlen(e.message);
    ck_assert_uint_lt(pl, sizeof(e.instance_path));
    ck_assert_uint_lt(ml, sizeof(e.message));
    ck_assert_str_eq(e.instance_path + pl - 3, "\xe2\x80\xa6");
    /* Text before the ellipsis ends on a whole character. */
    ck_assert_int_eq((unsigned char)e.instance_path[pl - 4], 0xa9);
    ck_assert_msg(strstr(e.message, "\xe2\x80\xa6\" is not") == NULL, "%s", e.message);
    ck_assert_msg(strstr(e.message, "is not of type \"integer\"") != NULL, "%s", e.message);
    json_t *m = json_string(e.message), *p = json_string(e.instance_path); /* valid UTF-8 */
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(p);
    json_decref(m);
    json_decref(p);
    free(key);
    json_decref(inst);
    evd_jsonschema_free(v);
    json_decref(schema);
}
END_TEST

START_TEST(unique_items_scales)
{
    json_t *schema = parse("{\"uniqueItems\":true}");
    struct evd_jsonschema *v = evd_jsonschema_new(schema, NULL);
    json_t *arr = json_array();
    for (int i = 0; i < 100000; i++)
        json_array_append_new(arr, i % 2 ? json_integer(i) : json_real(i + 0.5));
    ck_assert(evd_jsonschema_is_valid(v, arr));
    json_array_append_new(arr, json_real(99999.0)); /* equals the integer 99999 */
    ck_assert(!evd_jsonschema_is_valid(v, arr));
    json_decref(arr);
    evd_jsonschema_free(v);
    json_decref(schema);
}
END_TEST

START_TEST(remote_documents_resolve_by_uri)
{
    json_t *remotes = parse("{\"http://example.com/defs.json\":{\"definitions\":{"
                            "\"id\":{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"}}}}");
    json_t *schema = parse("{\"$id\":\"http://example.com/root.json\",\"properties\":"
                           "{\"id\":{\"$ref\":\"defs.json#/definitions/id\"}}}");
    struct evd_err err = {0};
    struct evd_jsonschema *v = evd_jsonschema_new_with_remotes(schema, remotes, &err);
    ck_assert_msg(v != NULL, "%s", err.msg);
    json_t *good = parse("{\"id\":\"abc\"}"), *bad = parse("{\"id\":\"ABC\"}");
    ck_assert(evd_jsonschema_is_valid(v, good));
    struct evd_schema_error e;
    ck_assert_uint_eq(evd_jsonschema_validate(v, bad, &e, 1), 1);
    ck_assert_str_eq(e.message, "\"ABC\" does not match \"^[a-z]+$\"");
    ck_assert_str_eq(e.instance_path, "/id");
    evd_jsonschema_free(v);
    /* Without the remote it does not compile, and nothing is fetched. */
    ck_assert_ptr_null(evd_jsonschema_new(schema, &err));
    ck_assert_msg(strstr(err.msg, "could not resolve $ref") != NULL, "%s", err.msg);
    json_decref(good);
    json_decref(bad);
    json_decref(schema);
    json_decref(remotes);
}
END_TEST

START_TEST(subschema_at_pointer_resolves_within_document)
{
    json_t *doc = parse("{\"definitions\":{\"id\":{\"type\":\"string\"}},"
                        "\"properties\":{\"a/b\":{\"type\":\"array\",\"items\":{\"$ref\":"
                        "\"#/definitions/id\"}}}}");
    struct evd_err err = {0};
    struct evd_jsonschema *v = evd_jsonschema_new_at(doc, "/properties/a~1b", NULL, &err);
    ck_assert_msg(v != NULL, "%s", err.msg);
    json_t *good = parse("[\"x\"]"), *bad = parse("[1]");
    ck_assert(evd_jsonschema_is_valid(v, good));
    struct evd_schema_error e;
    ck_assert_uint_eq(evd_jsonschema_validate(v, bad, &e, 1), 1);
    ck_assert_str_eq(e.instance_path, "/0");
    ck_assert(!evd_jsonschema_is_valid(v, json_null()));
    evd_jsonschema_free(v);
    ck_assert_ptr_null(evd_jsonschema_new_at(doc, "/properties/missing", NULL, &err));
    ck_assert_str_eq(err.msg,
                     "invalid schema at \"/properties/missing\": no subschema at this pointer");
    ck_assert_ptr_null(evd_jsonschema_new_at(doc, "properties", NULL, &err));
    ck_assert_int_eq(err.code, EVD_EINVAL);
    json_decref(good);
    json_decref(bad);
    json_decref(doc);
}
END_TEST

struct thread_arg {
    const struct evd_jsonschema *v;
    json_t *good, *bad;
    int mismatches;
};

static void *hammer(void *p)
{
    struct thread_arg *a = p;
    for (int i = 0; i < 2000; i++) {
        struct evd_schema_error e;
        if (evd_jsonschema_validate(a->v, a->good, &e, 1) != 0)
            a->mismatches++;
        if (evd_jsonschema_validate(a->v, a->bad, &e, 1) != 1 ||
            strcmp(e.instance_path, "/children/0/name") != 0)
            a->mismatches++;
    }
    return NULL;
}

START_TEST(one_validator_serves_many_threads)
{
    json_t *schema =
        parse("{\"type\":\"object\",\"properties\":{\"name\":{\"pattern\":\"^[a-z]+$\"},"
              "\"children\":{\"items\":{\"$ref\":\"#\"}}}}");
    struct evd_jsonschema *v = evd_jsonschema_new(schema, NULL);
    ck_assert_ptr_nonnull(v);
    json_t *good = parse("{\"name\":\"root\",\"children\":[{\"name\":\"leaf\"}]}");
    json_t *bad = parse("{\"name\":\"root\",\"children\":[{\"name\":\"Leaf\"}]}");
    pthread_t th[4];
    struct thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct thread_arg){v, good, bad, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, hammer, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(args[i].mismatches, 0);
    }
    json_decref(good);
    json_decref(bad);
    evd_jsonschema_free(v);
    json_decref(schema);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("jsonschema");
    TCase *tc = tcase_create("messages");
    tcase_add_loop_test(tc, message_and_path_per_keyword, 0,
                        sizeof(MESSAGES) / sizeof(MESSAGES[0]));
    tcase_add_loop_test(tc, validity_edge_cases, 0, sizeof(VALIDITY) / sizeof(VALIDITY[0]));
    tcase_add_test(tc, errors_come_in_schema_order_and_respect_max);
    tcase_add_test(tc, messages_and_paths_are_bounded_utf8);
    suite_add_tcase(s, tc);
    TCase *tr = tcase_create("references");
    tcase_add_test(tr, recursive_schema_reports_deep_paths);
    tcase_add_test(tr, remote_documents_resolve_by_uri);
    tcase_add_test(tr, subschema_at_pointer_resolves_within_document);
    suite_add_tcase(s, tr);
    TCase *tb = tcase_create("invalid and bounds");
    tcase_add_loop_test(tb, invalid_schemas_name_the_location, 0,
                        sizeof(BAD_SCHEMAS) / sizeof(BAD_SCHEMAS[0]));
    tcase_add_test(tb, bad_pattern_is_reported_with_pcre2_reason);
    tcase_add_test(tb, schema_nesting_is_bounded);
    tcase_add_test(tb, evaluation_depth_is_bounded_and_never_passes);
    tcase_add_test(tb, unique_items_scales);
    tcase_set_timeout(tb, 60);
    suite_add_tcase(s, tb);
    TCase *tt = tcase_create("threads");
    tcase_add_test(tt, one_validator_serves_many_threads);
    tcase_set_timeout(tt, 60);
    suite_add_tcase(s, tt);
    return evd_test_run_suite(s);
}
