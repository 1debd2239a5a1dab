/*
 * The streaming splitter (domain/json_split.h): on random documents fed in random pieces,
 * the elements handed out are the member's elements and the rest is the document with
 * that member emptied; element errors are restated where the whole body's parse puts
 * them; stray commas make empty elements; an escaped key is not the member.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "domain/json_split.h"
#include "tests/support/testutil.h"

struct got {
    json_t *elements; /* parsed, in order */
    size_t empty;     /* empty texts */
    json_error_t first_error;
    int error_line, error_column;
    bool failed;
};

static enum evd_code collect(void *ctx, size_t index, const char *text, size_t len, int line,
                             int column, struct evd_err *err)
{
    (void)err;
    struct got *g = ctx;
    ck_assert_uint_eq(index, json_array_size(g->elements) + g->empty + (g->failed ? 1 : 0));
    if (len == 0) {
        g->empty++;
        return EVD_OK;
    }
    json_error_t jerr;
    json_t *v = json_loadb(text, len, JSON_DECODE_ANY, &jerr);
    if (v == NULL) {
        if (!g->failed) {
            g->first_error = jerr;
            g->error_line = line;
            g->error_column = column;
        }
        g->failed = true;
        return EVD_OK;
    }
    json_array_append_new(g->elements, v);
    return EVD_OK;
}

static unsigned seed = 12345;
static unsigned rnd(unsigned n)
{
    seed = seed * 1103515245u + 12345u;
    return (seed >> 16) % n;
}

/* Strings with the bytes a scanner could trip on. */
static json_t *random_string(void)
{
    static const char *const parts[] = {"a", "\"", "\\", "[", "]", "{", "}", ",", ":", " ",
                                        "\n", "caf\xc3\xa9", "\\u0041", "cases"};
    char buf[128] = "";
    int n = (int)rnd(8);
    for (int i = 0; i < n; i++)
        strcat(buf, parts[rnd(sizeof(parts) / sizeof(*parts))]);
    return json_string(buf);
}

static json_t *random_value(int depth)
{
    switch (depth > 3 ? rnd(3) : rnd(6)) {
    case 0:
        return json_integer((json_int_t)rnd(1000) - 500);
    case 1:
        return random_string();
    case 2:
        return rnd(2) ? json_true() : json_null();
    case 3: {
        json_t *a = json_array();
        for (unsigned i = rnd(4); i > 0; i--)
            json_array_append_new(a, random_value(depth + 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        for (unsigned i = rnd(4); i > 0; i--) {
            char key[16];
            snprintf(key, sizeof(key), rnd(4) == 0 ? "cases" : "k%u", rnd(50));
            json_object_set_new(o, key, random_value(depth + 1));
        }
        return o;
    }
    }
}

static void feed_in_pieces(struct evd_json_split *s, const char *text, size_t len)
{
    size_t off = 0;
    while (off < len) {
        size_t n = 1 + rnd(17);
        if (n > len - off)
            n = len - off;
        struct evd_err err = {0};
        ck_assert_int_eq(evd_json_split_feed(s, text + off, n, &err), EVD_OK);
        off += n;
    }
}

START_TEST(random_documents_split_and_reassemble)
{
    for (int round = 0; round < 400; round++) {
        json_t *doc = random_value(1);
        if (!json_is_object(doc)) {
            json_decref(doc);
            doc = json_object();
        }
        json_t *cases = json_array();
        for (unsigned i = rnd(6); i > 0; i--)
            json_array_append_new(cases, random_value(2));
        json_object_set_new(doc, "cases", cases);
        size_t flags = rnd(2) ? JSON_COMPACT : JSON_INDENT(rnd(4));
        char *text = json_dumps(doc, flags | JSON_ENCODE_ANY);
        struct got g = {.elements = json_array()};
        struct evd_json_split *s = evd_json_split_new("cases", collect, &g);
        feed_in_pieces(s, text, strlen(text));
        ck_assert(!g.failed);
        ck_assert_uint_eq(g.empty, 0);
        ck_assert_msg(json_equal(g.elements, cases), "round %d: elements differ: %s", round, text);
        ck_assert_uint_eq(evd_json_split_count(s), json_array_size(cases));
        size_t len = 0;
        const char *rest = evd_json_split_rest(s, &len);
        json_error_t jerr;
        json_t *back = json_loadb(rest, len, JSON_REJECT_DUPLICATES, &jerr);
        ck_assert_msg(back != NULL, "round %d: rest does not parse: %s (%s)", round, jerr.text,
                      rest);
        json_t *want = json_deep_copy(doc);
        json_object_set_new(want, "cases", json_array());
        ck_assert_msg(json_equal(back, want), "round %d: rest differs: %s", round, rest);
        json_decref(want);
        json_decref(back);
        evd_json_split_free(s);
        json_decref(g.elements);
        free(text);
        json_decref(doc);
    }
}
END_TEST

/* A malformed element's error is where jansson puts it in the whole body. */
START_TEST(an_element_error_is_placed_in_the_body)
{
    static const char *const bodies[] = {
        "{\"name\": \"x\",\n \"cases\": [{\"vars\": {}},\n  {\"vars\": }]}",
        "{\"cases\":[{\"a\":1},{\"b\":tru}]}",
        "{\n\"cases\": [\n  {\"a\": 1},\n  {\"b\":\n     [1, 2,, 3]}\n]}",
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(*bodies); i++) {
        struct got g = {.elements = json_array()};
        struct evd_json_split *s = evd_json_split_new("cases", collect, &g);
        struct evd_err err = {0};
        ck_assert_int_eq(evd_json_split_feed(s, bodies[i], strlen(bodies[i]), &err), EVD_OK);
        ck_assert_msg(g.failed, "body %zu: no element failed", i);
        struct evd_err ours = {0};
        evd_json_split_error(&g.first_error, g.error_line, g.error_column, &ours);
        json_error_t whole;
        ck_assert_ptr_null(json_loads(bodies[i], 0, &whole));
        char want[512];
        snprintf(want, sizeof(want), "malformed JSON: %s at line %d column %d", whole.text,
                 whole.line, whole.column);
        ck_assert_str_eq(ours.msg, want);
        evd_json_split_free(s);
        json_decref(g.elements);
    }
}
END_TEST

START_TEST(stray_commas_are_empty_elements_and_escaped_keys_stay)
{
    struct got g = {.elements = json_array()};
    struct evd_json_split *s = evd_json_split_new("cases", collect, &g);
    const char body[] = "{\"cases\": [1,,2,]}";
    ck_assert_int_eq(evd_json_split_feed(s, body, strlen(body), NULL), EVD_OK);
    ck_assert_uint_eq(json_array_size(g.elements), 2);
    ck_assert_uint_eq(g.empty, 2);
    evd_json_split_free(s);
    json_decref(g.elements);

    /* "cas\u0065s" is "cases" to a parser, but the splitter leaves it whole in the rest,
     * where the parse then finds it (and a duplicate of it). */
    g = (struct got){.elements = json_array()};
    s = evd_json_split_new("cases", collect, &g);
    const char esc[] = "{\"cas\\u0065s\": [1, 2], \"other\": {\"cases\": [3]}}";
    ck_assert_int_eq(evd_json_split_feed(s, esc, strlen(esc), NULL), EVD_OK);
    ck_assert_uint_eq(json_array_size(g.elements), 0);
    size_t len;
    const char *rest = evd_json_split_rest(s, &len);
    ck_assert_str_eq(rest, esc);
    evd_json_split_free(s);
    json_decref(g.elements);
}
END_TEST

static enum evd_code refuse_second(void *ctx, size_t index, const char *text, size_t len, int line,
                                   int column, struct evd_err *err)
{
    (void)ctx, (void)text, (void)len, (void)line, (void)column;
    if (index == 1)
        return evd_err_set(err, EVD_EINVAL, "cases[1]: no");
    return EVD_OK;
}

START_TEST(a_refusal_stops_the_splitter)
{
    struct evd_json_split *s = evd_json_split_new("cases", refuse_second, NULL);
    const char body[] = "{\"cases\": [1, 2, 3]}";
    struct evd_err err = {0};
    ck_assert_int_eq(evd_json_split_feed(s, body, strlen(body), &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "cases[1]: no");
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(evd_json_split_feed(s, "x", 1, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "cases[1]: no");
    evd_json_split_free(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("json_split");
    TCase *tc = tcase_create("json_split");
    tcase_add_test(tc, random_documents_split_and_reassemble);
    tcase_add_test(tc, an_element_error_is_placed_in_the_body);
    tcase_add_test(tc, stray_commas_are_empty_elements_and_escaped_keys_stay);
    tcase_add_test(tc, a_refusal_stops_the_splitter);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
