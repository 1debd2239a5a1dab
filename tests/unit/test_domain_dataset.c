/*
 * Unit tests for domain/dataset.h: normalization of JSON, JSONL and CSV uploads, the
 * refusal messages of the contract (table-driven, per format), the SHA-256 against a
 * direct canonical hash of the normalized array, and streaming: any split of the body
 * into pieces gives the same cases and hash as one piece.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "domain/canonical.h"
#include "domain/dataset.h"
#include "tests/support/testutil.h"

/* Collects every case the reader hands out (new references kept in an array). */
struct sink {
    json_t *cases;
    size_t stop_at; /* refuse case number stop_at (0: never) */
};

static enum evd_code collect(void *ctx, size_t position, const json_t *c, struct evd_err *err)
{
    struct sink *s = ctx;
    ck_assert_uint_eq(position, json_array_size(s->cases) + 1);
    if (s->stop_at != 0 && position == s->stop_at)
        return evd_err_set(err, EVD_EDB, "could not store case %zu", position);
    json_array_append_new(s->cases, json_deep_copy(c));
    return EVD_OK;
}

/* Reads body in pieces of `piece` bytes (0: one piece); returns the code, err filled. */
static enum evd_code read_body(enum evd_dataset_format f, const char *body, size_t piece,
                               size_t max, struct sink *s, char sha[65], struct evd_err *err)
{
    struct evd_dataset_reader *r = evd_dataset_reader_new(f, max, collect, s);
    ck_assert_ptr_nonnull(r);
    size_t len = strlen(body);
    enum evd_code rc = EVD_OK;
    size_t off = 0;
    while (off < len && rc == EVD_OK) {
        size_t n = piece == 0 || len - off < piece ? len - off : piece;
        rc = evd_dataset_reader_feed(r, body + off, n, err);
        off += n;
    }
    if (rc == EVD_OK)
        rc = evd_dataset_reader_finish(r, err);
    if (rc == EVD_OK && sha != NULL)
        strcpy(sha, evd_dataset_reader_sha256(r));
    evd_dataset_reader_free(r);
    return rc;
}

static void assert_sha_of(const json_t *cases, const char *sha)
{
    char direct[65];
    ck_assert_int_eq(evd_canonical_sha256(cases, direct), 0);
    ck_assert_str_eq(sha, direct);
}

START_TEST(json_upload_is_normalized)
{
    const char *body = "{\"name\":\"qa\",\"cases\":["
                       "{\"vars\":{\"q\":\"2+2\"},\"expected\":\"4\"},"
                       "{\"id\":\"x\",\"metadata\":{\"topic\":\"t\"}},"
                       "{}]}";
    struct sink s = {json_array(), 0};
    char sha[65];
    struct evd_err err = {0};
    ck_assert_int_eq(read_body(EVD_DATASET_JSON, body, 0, 100, &s, sha, &err), EVD_OK);
    json_t *want =
        json_loads("[{\"id\":\"c1\",\"vars\":{\"q\":\"2+2\"},\"expected\":\"4\",\"metadata\":{}},"
                   "{\"id\":\"x\",\"vars\":{},\"expected\":null,\"metadata\":{\"topic\":\"t\"}},"
                   "{\"id\":\"c3\",\"vars\":{},\"expected\":null,\"metadata\":{}}]",
                   0, NULL);
    ck_assert(json_equal(s.cases, want));
    /* The four keys, in order. */
    const char *keys[] = {"id", "vars", "expected", "metadata"};
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach(json_array_get(s.cases, 0), k, v)
    {
        ck_assert_str_eq(k, keys[i++]);
    }
    ck_assert_uint_eq(i, 4);
    assert_sha_of(want, sha);
    json_decref(want);
    json_decref(s.cases);
}
END_TEST

START_TEST(name_is_read_from_a_json_upload)
{
    struct evd_dataset_reader *r = evd_dataset_reader_new(EVD_DATASET_JSON, 10, NULL, NULL);
    const char *body = "{\"cases\":[{}],\"name\":\"brevity\"}";
    struct evd_err err = {0};
    ck_assert_int_eq(evd_dataset_reader_feed(r, body, strlen(body), &err), EVD_OK);
    ck_assert_int_eq(evd_dataset_reader_finish(r, &err), EVD_OK);
    ck_assert_str_eq(evd_dataset_reader_name(r), "brevity");
    ck_assert_uint_eq(evd_dataset_reader_count(r), 1);
    evd_dataset_reader_free(r);
}
END_TEST

/* The same cases in the three formats hash the same (CSV vars are strings). */
START_TEST(formats_agree)
{
    const char *json =
        "{\"name\":\"n\",\"cases\":[{\"id\":\"a\",\"vars\":{\"q\":\"hi, there\",\"t\":\"x\"},"
        "\"expected\":\"HI\"},{\"vars\":{\"q\":\"line1\\nline2\",\"t\":\"\"},\"expected\":\"\"}]}";
    const char *jsonl =
        "{\"id\":\"a\",\"vars\":{\"q\":\"hi, there\",\"t\":\"x\"},\"expected\":\"HI\"}\n"
        "\n"
        "{\"vars\":{\"q\":\"line1\\nline2\",\"t\":\"\"},\"expected\":\"\"}";
    const char *csv = "\xEF\xBB\xBFid,q,expected,t\r\n"
                      "a,\"hi, there\",HI,x\r\n"
                      ",\"line1\nline2\",,\r\n";
    char sha_json[65], sha_jsonl[65], sha_csv[65];
    struct evd_err err = {0};
    struct sink a = {json_array(), 0}, b = {json_array(), 0}, c = {json_array(), 0};
    ck_assert_int_eq(read_body(EVD_DATASET_JSON, json, 0, 10, &a, sha_json, &err), EVD_OK);
    ck_assert_int_eq(read_body(EVD_DATASET_JSONL, jsonl, 0, 10, &b, sha_jsonl, &err), EVD_OK);
    ck_assert_msg(read_body(EVD_DATASET_CSV, csv, 0, 10, &c, sha_csv, &err) == EVD_OK, "%s",
                  err.msg);
    ck_assert(json_equal(a.cases, b.cases));
    ck_assert(json_equal(a.cases, c.cases));
    ck_assert_str_eq(sha_json, sha_jsonl);
    ck_assert_str_eq(sha_json, sha_csv);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(c.cases, 1), "id")), "c2");
    json_decref(a.cases);
    json_decref(b.cases);
    json_decref(c.cases);
}
END_TEST

/* Cells keep their spaces; quotes inside quoted cells are unescaped. */
START_TEST(csv_cells_are_kept_as_sent)
{
    const char *csv = "q,r\n  padded  ,\"say \"\"hi\"\"\"\n";
    struct sink s = {json_array(), 0};
    struct evd_err err = {0};
    ck_assert_int_eq(read_body(EVD_DATASET_CSV, csv, 0, 10, &s, NULL, &err), EVD_OK);
    json_t *vars = json_object_get(json_array_get(s.cases, 0), "vars");
    ck_assert_str_eq(json_string_value(json_object_get(vars, "q")), "  padded  ");
    ck_assert_str_eq(json_string_value(json_object_get(vars, "r")), "say \"hi\"");
    json_decref(s.cases);
}
END_TEST

/* Every split of the body into pieces gives the same cases and hash. */
START_TEST(streaming_split_is_invisible)
{
    static const struct {
        enum evd_dataset_format f;
        const char *body;
    } bodies[] = {
        {EVD_DATASET_CSV, "\xEF\xBB\xBFid,q\r\n1,\"a,\"\"b\"\"\r\nc\"\r\n,z\n3,y"},
        {EVD_DATASET_JSONL, "\xEF\xBB\xBF{\"vars\":{\"q\":\"\xC3\xA9\"}}\r\n\n{\"id\":\"k\"}"},
        {EVD_DATASET_JSON,
         "{\"name\":\"n\",\"cases\":[{\"vars\":{\"q\":1.5}},{\"expected\":[1,2]}]}"},
    };
    for (size_t b = 0; b < sizeof(bodies) / sizeof(bodies[0]); b++) {
        struct sink whole = {json_array(), 0};
        char sha_whole[65];
        struct evd_err err = {0};
        ck_assert_msg(read_body(bodies[b].f, bodies[b].body, 0, 10, &whole, sha_whole, &err) ==
                          EVD_OK,
                      "body %zu: %s", b, err.msg);
        for (size_t piece = 1; piece <= 7; piece++) {
            struct sink split = {json_array(), 0};
            char sha_split[65];
            ck_assert_int_eq(
                read_body(bodies[b].f, bodies[b].body, piece, 10, &split, sha_split, &err), EVD_OK);
            ck_assert(json_equal(whole.cases, split.cases));
            ck_assert_str_eq(sha_whole, sha_split);
            json_decref(split.cases);
        }
        assert_sha_of(whole.cases, sha_whole);
        json_decref(whole.cases);
    }
}
END_TEST

struct refusal {
    enum evd_dataset_format f;
    const char *body;
    size_t max;
    const char *msg;
};

static const struct refusal REFUSALS[] = {
    /* JSON: cases named by 0-based index */
    {EVD_DATASET_JSON, "{\"name\":\"n\",\"cases\":[{},{\"vars\":[]}]}", 10,
     "cases[1]: vars must be an object"},
    {EVD_DATASET_JSON, "{\"name\":\"n\",\"cases\":[{\"vars\":{\"expected\":1}}]}", 10,
     "cases[0]: vars.expected is reserved; use the expected field"},
    {EVD_DATASET_JSON, "{\"name\":\"n\",\"cases\":[{\"id\":\"c2\"},{}]}", 10,
     "cases[1]: duplicate id c2"},
    {EVD_DATASET_JSON, "{\"name\":\"n\",\"cases\":[{},{\"id\":\"c1\"}]}", 10,
     "cases[1]: duplicate id c1"},
    {EVD_DATASET_JSON, "{\"name\":\"n\",\"cases\":[]}", 10000,
     "cases must contain between 1 and 10000 cases"},
    {EVD_DATASET_JSON, "{\"name\":\"n\",\"cases\":[{},{},{}]}", 2,
     "cases must contain between 1 and 2 cases"},
    {EVD_DATASET_JSON, "{\"name\":\"n\",\"cases\":[{\"colour\":1}]}", 10,
     "cases[0]: colour is not a known field"},
    {EVD_DATASET_JSON, "{\"name\":\"n\",\"cases\":[{\"id\":7}]}", 10,
     "cases[0]: id must be a string"},
    {EVD_DATASET_JSON, "{\"name\":\"n\",\"cases\":[{\"id\":\"\"}]}", 10,
     "cases[0]: id cannot be empty"},
    {EVD_DATASET_JSON, "{\"name\":\"n\",\"cases\":[{\"metadata\":\"x\"}]}", 10,
     "cases[0]: metadata must be an object"},
    {EVD_DATASET_JSON, "{\"name\":\"n\",\"cases\":[3]}", 10,
     "cases[0]: a case must be a JSON object"},
    {EVD_DATASET_JSON, "{\"cases\":[{}]}", 10, "name is required"},
    {EVD_DATASET_JSON, "{\"name\":\"\",\"cases\":[{}]}", 10,
     "name must be a non-empty string of at most 200 bytes"},
    {EVD_DATASET_JSON, "{\"name\":\"n\"}", 10, "cases is required"},
    {EVD_DATASET_JSON, "{\"name\":\"n\",\"cases\":{}}", 10, "cases must be an array"},
    {EVD_DATASET_JSON, "{\"name\":\"n\",\"cases\":[],\"x\":1}", 10, "x is not a known field"},
    {EVD_DATASET_JSON, "[1]", 10, "request body must be a JSON object"},
    {EVD_DATASET_JSON, "{\"name\":", 10,
     "malformed JSON: unexpected token near end of file at line 1 column 8"},
    /* JSONL: physical lines from 1, blank lines skipped but counted */
    {EVD_DATASET_JSONL, "{}\n\n{\"vars\":3}\n", 10, "line 3: vars must be an object"},
    {EVD_DATASET_JSONL, "{}\n{\"id\":\"c1\"}\n", 10, "line 2: duplicate id c1"},
    {EVD_DATASET_JSONL, "{}\n{oops}\n", 10,
     "line 2: malformed JSON: string or '}' expected near 'oops' at column 5"},
    {EVD_DATASET_JSONL, "[]\n", 10, "line 1: a case must be a JSON object"},
    {EVD_DATASET_JSONL, "\n\n", 10, "cases must contain between 1 and 10 cases"},
    {EVD_DATASET_JSONL, "{}\n{}\n{}\n", 2, "cases must contain between 1 and 2 cases"},
    /* CSV: data rows from 1, the header is not a row */
    {EVD_DATASET_CSV, "id,q\nc7,a\nb,c\nd,e\ne,f\nf,g\ng,h\n,i\n", 10, "row 7: duplicate id c7"},
    {EVD_DATASET_CSV, "q,expected\na,b\n", 10, ""},
    {EVD_DATASET_CSV, "q,r\na,b\nc\n", 10, "row 2: expected 2 fields, found 1"},
    {EVD_DATASET_CSV, "q,q\na,b\n", 10, "header: duplicate column q"},
    {EVD_DATASET_CSV, "q,,r\na,b,c\n", 10, "header: column 2 has no name"},
    {EVD_DATASET_CSV, "q\n\"open\n", 10,
     "row 1: malformed CSV (a quote inside an unquoted field, or a quoted field that does not "
     "end)"},
    {EVD_DATASET_CSV, "q\na\"b\n", 10,
     "row 1: malformed CSV (a quote inside an unquoted field, or a quoted field that does not "
     "end)"},
    {EVD_DATASET_CSV, "q\n\xFF\n", 10, "row 1: column q is not valid UTF-8 text"},
    {EVD_DATASET_CSV, "q\n", 10, "cases must contain between 1 and 10 cases"},
    {EVD_DATASET_CSV, "", 10, "cases must contain between 1 and 10 cases"},
    {EVD_DATASET_CSV, "q\na\nb\nc\n", 2, "cases must contain between 1 and 2 cases"},
    /* conversations and mocked tools' answers (agent-cases.md) */
    {EVD_DATASET_JSON, "{\"name\":\"n\",\"cases\":[{\"messages\":\"hi\"}]}", 10,
     "cases[0]: messages must be an array"},
    {EVD_DATASET_JSON, "{\"name\":\"n\",\"cases\":[{\"messages\":[]}]}", 10,
     "cases[0]: messages must hold between 1 and 200 messages"},
    {EVD_DATASET_JSON,
     "{\"name\":\"n\",\"cases\":[{},{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
     "{\"role\":\"system\",\"content\":\"b\"}]}]}",
     10, "cases[1]: messages[1].role must be user or assistant"},
    {EVD_DATASET_JSON, "{\"name\":\"n\",\"cases\":[{\"messages\":[{\"role\":\"user\"}]}]}", 10,
     "cases[0]: messages[0].content must be a string"},
    {EVD_DATASET_JSON,
     "{\"name\":\"n\",\"cases\":[{\"messages\":[{\"role\":\"user\",\"content\":\"a\","
     "\"name\":\"x\"}]}]}",
     10, "cases[0]: messages[0].name is not a known field"},
    {EVD_DATASET_JSON, "{\"name\":\"n\",\"cases\":[{\"messages\":[7]}]}", 10,
     "cases[0]: messages[0] must be an object"},
    {EVD_DATASET_JSONL, "{}\n{\"tool_results\":[1]}\n", 10,
     "line 2: tool_results must be an object"},
    {EVD_DATASET_CSV, "q,messages\na,\"[{\"\"role\"\":\"\"user\"\"\"\n", 10,
     "row 1: messages is not valid JSON: '}' expected near end of file"},
    {EVD_DATASET_CSV, "q,messages\na,\"[{\"\"role\"\":\"\"bot\"\",\"\"content\"\":\"\"x\"\"}]\"\n", 10,
     "row 1: messages[0].role must be user or assistant"},
    {EVD_DATASET_CSV, "q,tool_results\na,\"[]\"\n", 10, "row 1: tool_results must be an object"},
};

START_TEST(refusals_name_the_case)
{
    const struct refusal *t = &REFUSALS[_i];
    struct sink s = {json_array(), 0};
    struct evd_err err = {0};
    enum evd_code rc = read_body(t->f, t->body, 0, t->max, &s, NULL, &err);
    if (t->msg[0] == '\0') {
        ck_assert_msg(rc == EVD_OK, "case %d: %s", _i, err.msg);
    } else {
        ck_assert_msg(rc == EVD_EINVAL, "case %d: accepted", _i);
        ck_assert_str_eq(err.msg, t->msg);
        /* The same refusal, byte by byte. */
        struct sink s2 = {json_array(), 0};
        struct evd_err err2 = {0};
        ck_assert_int_eq(read_body(t->f, t->body, 1, t->max, &s2, NULL, &err2), EVD_EINVAL);
        ck_assert_str_eq(err2.msg, t->msg);
        json_decref(s2.cases);
    }
    json_decref(s.cases);
}
END_TEST

/*
 * A case's conversation and mocked tools' answers are kept after the four keys, only when
 * given, and hashed with the case: the three formats agree, a case without them hashes as
 * before, and a changed message changes the hash.
 */
START_TEST(conversations_are_normalized_and_hashed)
{
    const char *json =
        "{\"name\":\"n\",\"cases\":[{\"id\":\"q1\",\"vars\":{\"city\":\"Oslo\"},"
        "\"messages\":[{\"role\":\"user\",\"content\":\"Hi, {{city}}\"},"
        "{\"role\":\"assistant\",\"content\":\"Hello\"}],"
        "\"tool_results\":{\"search\":[{\"when\":{\"q\":\"x\"},\"result\":1}]}},"
        "{\"id\":\"q2\",\"vars\":{\"city\":\"Rome\"}}]}";
    const char *jsonl =
        "{\"id\":\"q1\",\"vars\":{\"city\":\"Oslo\"},\"messages\":[{\"role\":\"user\","
        "\"content\":\"Hi, {{city}}\"},{\"content\":\"Hello\",\"role\":\"assistant\"}],"
        "\"tool_results\":{\"search\":[{\"when\":{\"q\":\"x\"},\"result\":1}]}}\n"
        "{\"id\":\"q2\",\"vars\":{\"city\":\"Rome\"},\"messages\":null}\n";
    const char *csv =
        "id,city,messages,tool_results\n"
        "q1,Oslo,\"[{\"\"role\"\":\"\"user\"\",\"\"content\"\":\"\"Hi, {{city}}\"\"},"
        "{\"\"role\"\":\"\"assistant\"\",\"\"content\"\":\"\"Hello\"\"}]\","
        "\"{\"\"search\"\":[{\"\"when\"\":{\"\"q\"\":\"\"x\"\"},\"\"result\"\":1}]}\"\n"
        "q2,Rome,,\n";
    char sha[3][65];
    struct evd_err err = {0};
    struct sink s[3] = {{json_array(), 0}, {json_array(), 0}, {json_array(), 0}};
    ck_assert_msg(read_body(EVD_DATASET_JSON, json, 0, 10, &s[0], sha[0], &err) == EVD_OK, "%s",
                  err.msg);
    ck_assert_msg(read_body(EVD_DATASET_JSONL, jsonl, 7, 10, &s[1], sha[1], &err) == EVD_OK, "%s",
                  err.msg);
    ck_assert_msg(read_body(EVD_DATASET_CSV, csv, 5, 10, &s[2], sha[2], &err) == EVD_OK, "%s",
                  err.msg);
    for (int i = 1; i < 3; i++) {
        ck_assert(json_equal(s[0].cases, s[i].cases));
        ck_assert_str_eq(sha[0], sha[i]);
    }
    json_t *q1 = json_array_get(s[0].cases, 0), *q2 = json_array_get(s[0].cases, 1);
    const char *keys[] = {"id", "vars", "expected", "metadata", "messages", "tool_results"};
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach(q1, k, v)
    {
        ck_assert_str_eq(k, keys[i++]);
    }
    ck_assert_uint_eq(i, 6);
    /* templates stay as written: they are rendered per run */
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(q1, "messages"), 0), "content")),
                     "Hi, {{city}}");
    ck_assert_uint_eq(json_object_size(q2), 4); /* none: no key, and q2 hashes as before */
    assert_sha_of(s[0].cases, sha[0]);
    /* one changed word of the conversation is another dataset */
    char *changed = strdup(json);
    memcpy(strstr(changed, "Hello"), "Howdy", 5);
    struct sink t = {json_array(), 0};
    char sha_changed[65];
    ck_assert_int_eq(read_body(EVD_DATASET_JSON, changed, 0, 10, &t, sha_changed, &err), EVD_OK);
    ck_assert_str_ne(sha_changed, sha[0]);
    free(changed);
    json_decref(t.cases);
    for (int j = 0; j < 3; j++)
        json_decref(s[j].cases);
}
END_TEST

START_TEST(a_sink_refusal_stops_the_reader)
{
    struct sink s = {json_array(), 2};
    struct evd_err err = {0};
    ck_assert_int_eq(read_body(EVD_DATASET_JSONL, "{}\n{}\n{}\n", 0, 10, &s, NULL, &err), EVD_EDB);
    ck_assert_str_eq(err.msg, "could not store case 2");
    ck_assert_uint_eq(json_array_size(s.cases), 1);
    json_decref(s.cases);
}
END_TEST

START_TEST(inline_cases_normalize_like_an_upload)
{
    json_t *cases =
        json_loads("[{\"vars\":{\"q\":\"a\"}},{\"id\":\"k\",\"expected\":{\"x\":1}}]", 0, NULL);
    struct sink s = {json_array(), 0};
    size_t n = 0;
    char sha[65];
    struct evd_err err = {0};
    ck_assert_int_eq(evd_dataset_normalize_cases(cases, 10, collect, &s, &n, sha, &err), EVD_OK);
    ck_assert_uint_eq(n, 2);
    assert_sha_of(s.cases, sha);
    json_t *bad = json_loads("[{},{\"vars\":1}]", 0, NULL);
    ck_assert_int_eq(evd_dataset_normalize_cases(bad, 10, NULL, NULL, &n, sha, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "cases[1]: vars must be an object");
    json_decref(bad);
    json_decref(cases);
    json_decref(s.cases);
}
END_TEST

/* 10,000 CSV rows stream through in 4 KiB pieces. */
START_TEST(ten_thousand_rows)
{
    struct evd_buf body = {0};
    evd_buf_printf(&body, "id,question,expected\n");
    for (int i = 1; i <= 10000; i++)
        evd_buf_printf(&body, "q%d,\"What is %d + %d?\",%d\n", i, i, i, 2 * i);
    struct sink s = {json_array(), 0};
    char sha[65];
    struct evd_err err = {0};
    ck_assert_int_eq(read_body(EVD_DATASET_CSV, body.data, 4096, 10000, &s, sha, &err), EVD_OK);
    ck_assert_uint_eq(json_array_size(s.cases), 10000);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(s.cases, 9999), "expected")),
                     "20000");
    assert_sha_of(s.cases, sha);
    evd_buf_free(&body);
    json_decref(s.cases);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_dataset");
    TCase *tc = tcase_create("dataset");
    tcase_add_test(tc, json_upload_is_normalized);
    tcase_add_test(tc, name_is_read_from_a_json_upload);
    tcase_add_test(tc, formats_agree);
    tcase_add_test(tc, csv_cells_are_kept_as_sent);
    tcase_add_test(tc, streaming_split_is_invisible);
    tcase_add_loop_test(tc, refusals_name_the_case, 0, sizeof(REFUSALS) / sizeof(REFUSALS[0]));
    tcase_add_test(tc, a_sink_refusal_stops_the_reader);
    tcase_add_test(tc, conversations_are_normalized_and_hashed);
    tcase_add_test(tc, inline_cases_normalize_like_an_upload);
    tcase_add_test(tc, ten_thousand_rows);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
