/*
 * eval::assert::trajectory (domain/trajectory.h): every mode passing and failing with its
 * reason, each match_arguments, the score rule, the maximum pairing where a greedy one
 * fails, the argument and transcript checks, and the transcript an agent turn gives the
 * evaluator input.
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/evaluators.h"
#include "domain/request.h"
#include "domain/trajectory.h"
#include "tests/support/domain_fixtures.h"
#include "tests/support/testutil.h"

/*
 * Decodes an EvaluatorInputV1 whose transcript is `transcript` (JSON text, NULL: none)
 * and whose arguments are `arguments` (JSON text, NULL: omitted).
 */
static json_t *make_input(const char *transcript, const char *arguments,
                          struct evd_evaluator_input *in)
{
    json_t *body = evd_dt_parse("{\"evaluation_id\":\"eval_1\",\"run_id\":\"treatment-1\","
                                "\"role\":\"treatment\",\"session_id\":\"eval_1_t_1\","
                                "\"output\":\"done\"}");
    if (transcript != NULL)
        json_object_set_new(body, "transcript", evd_dt_parse(transcript));
    if (arguments != NULL)
        json_object_set_new(body, "arguments", evd_dt_parse(arguments));
    json_object_set_new(body, "metrics", evd_dt_metrics("eval_1_t_1", true, 1, 0, 0, 3, 4, 0.1, 0));
    struct evd_err err;
    ck_assert_msg(evd_request_evaluator_input(body, in, &err) == EVD_OK, "%s", err.msg);
    return body;
}

/* A one-turn transcript whose assistant entry made `calls` (a JSON array text). */
static char *turn_of(const char *calls)
{
    static char buf[4096];
    snprintf(buf, sizeof(buf),
             "[{\"role\":\"user\",\"content\":\"Book a room in Oslo.\"},"
             "{\"role\":\"assistant\",\"content\":\"done\",\"function_calls\":%s}]",
             calls);
    return buf;
}

#define SEARCH "{\"name\":\"search\",\"arguments\":{\"q\":\"oslo\"}}"
#define BOOK "{\"name\":\"book\",\"arguments\":{\"room\":\"R42\"}}"
#define BOOK_R1 "{\"name\":\"book\",\"arguments\":{\"room\":\"R1\"}}"
#define LOOKUP "{\"name\":\"lookup\",\"arguments\":{\"room\":\"R42\"}}"
/* The expected search then book, in a mode and a match_arguments ("" for the default). */
#define ARGS(mode, match) "{\"expected\":[" SEARCH "," BOOK "]" mode match "}"
#define MODE(m) ",\"mode\":\"" m "\""
#define MATCH(m) ",\"match_arguments\":\"" m "\""

struct verdict_case {
    const char *calls;     /* the assistant's function_calls */
    const char *arguments; /* the evaluator arguments */
    int passed;
    double score;
    const char *reason;
};

static const struct verdict_case VERDICTS[] = {
    /* strict (the default mode), exact arguments (the default) */
    {"[" SEARCH "," BOOK "]", ARGS("", ""), 1, 1.0, "2 calls matched the expected calls in order"},
    {"[" SEARCH "," LOOKUP "]", ARGS("", ""), 0, 0.5, "call 2: expected book, got lookup"},
    {"[" SEARCH "," BOOK_R1 "]", ARGS(MODE("strict"), ""), 0, 0.5,
     "call 2: expected book {\"room\":\"R42\"}, got book {\"room\":\"R1\"}"},
    {"[" SEARCH "]", ARGS("", ""), 0, 0.5, "call 2: expected book, got no call"},
    {"[" SEARCH "," BOOK "," LOOKUP "]", ARGS("", ""), 0, 1.0,
     "call 3: expected no call, got lookup"},
    {"[" BOOK "," SEARCH "]", ARGS("", ""), 0, 0.0, "call 1: expected search, got book"},
    {"[]", ARGS("", ""), 0, 0.0, "call 1: expected search, got no call"},
    /* unordered */
    {"[" BOOK "," SEARCH "]", ARGS(MODE("unordered"), ""), 1, 1.0,
     "2 calls matched the expected calls in some order"},
    {"[" BOOK "," LOOKUP "]", ARGS(MODE("unordered"), ""), 0, 0.5,
     "call 2: unexpected lookup; expected call 1: search was not made"},
    {"[" SEARCH "," BOOK "," SEARCH "]", ARGS(MODE("unordered"), ""), 0, 1.0,
     "call 3: unexpected search"},
    {"[" BOOK "]", ARGS(MODE("unordered"), ""), 0, 0.5, "expected call 1: search was not made"},
    {"[" BOOK_R1 "," SEARCH "]", ARGS(MODE("unordered"), ""), 0, 0.5,
     "call 1: unexpected book {\"room\":\"R1\"}; expected call 2: book {\"room\":\"R42\"} was "
     "not made"},
    /* subset: nothing unexpected; the spec's "one of two expected calls scores 0.5" */
    {"[" SEARCH "]", ARGS(MODE("subset"), ""), 1, 0.5,
     "every call was expected (1 of 2 expected calls made)"},
    {"[]", ARGS(MODE("subset"), ""), 1, 0.0,
     "every call was expected (0 of 2 expected calls made)"},
    {"[" BOOK "," SEARCH "]", ARGS(MODE("subset"), ""), 1, 1.0,
     "every call was expected (2 of 2 expected calls made)"},
    {"[" SEARCH "," LOOKUP "]", ARGS(MODE("subset"), ""), 0, 0.5, "call 2: unexpected lookup"},
    {"[" SEARCH "," SEARCH "]", ARGS(MODE("subset"), ""), 0, 0.5, "call 2: unexpected search"},
    /* superset: every expected call made, extras allowed */
    {"[" LOOKUP "," BOOK "," SEARCH "]", ARGS(MODE("superset"), ""), 1, 1.0,
     "every expected call was made (3 calls, 2 expected)"},
    {"[" SEARCH "," LOOKUP "]", ARGS(MODE("superset"), ""), 0, 0.5,
     "expected call 2: book was not made"},
    {"[" SEARCH "," BOOK_R1 "]", ARGS(MODE("superset"), ""), 0, 0.5,
     "expected call 2: book {\"room\":\"R42\"} was not made"},
    /* match_arguments */
    {"[{\"name\":\"search\",\"arguments\":{\"q\":\"oslo\",\"lang\":\"no\"}},"
     "{\"name\":\"book\",\"arguments\":{\"room\":\"R42\",\"nights\":2}}]",
     ARGS("", MATCH("subset")), 1, 1.0, "2 calls matched the expected calls in order"},
    {"[{\"name\":\"search\",\"arguments\":{\"q\":\"oslo\",\"lang\":\"no\"}}," BOOK "]",
     ARGS("", MATCH("exact")), 0, 0.5,
     "call 1: expected search {\"q\":\"oslo\"}, got search {\"lang\":\"no\",\"q\":\"oslo\"}"},
    {"[{\"name\":\"search\",\"arguments\":{\"q\":\"bergen\"}}," BOOK "]", ARGS("", MATCH("subset")),
     0, 0.5, "call 1: expected search {\"q\":\"oslo\"}, got search {\"q\":\"bergen\"}"},
    {"[{\"name\":\"search\",\"arguments\":{\"q\":\"bergen\"}},{\"name\":\"book\"}]",
     ARGS("", MATCH("ignore")), 1, 1.0, "2 calls matched the expected calls in order"},
    {"[" SEARCH "," LOOKUP "]", ARGS(MODE("unordered"), MATCH("ignore")), 0, 0.5,
     "call 2: unexpected lookup; expected call 2: book was not made"},
    /* subset matching is member-wise for nested objects, equality for arrays */
    {"[{\"name\":\"book\",\"arguments\":{\"guest\":{\"name\":\"Ann\",\"age\":30},\"room\":1}}]",
     "{\"expected\":[{\"name\":\"book\",\"arguments\":{\"guest\":{\"name\":\"Ann\"}}}],"
     "\"match_arguments\":\"subset\"}",
     1, 1.0, "1 call matched the expected calls in order"},
    {"[{\"name\":\"tag\",\"arguments\":{\"tags\":[\"a\",\"b\"]}}]",
     "{\"expected\":[{\"name\":\"tag\",\"arguments\":{\"tags\":[\"a\"]}}],"
     "\"match_arguments\":\"subset\"}",
     0, 0.0, "call 1: expected tag {\"tags\":[\"a\"]}, got tag {\"tags\":[\"a\",\"b\"]}"},
    /* numbers compare as the exact evaluator does: integer 1 is not real 1.0 */
    {"[{\"name\":\"n\",\"arguments\":{\"k\":1.0}}]",
     "{\"expected\":[{\"name\":\"n\",\"arguments\":{\"k\":1}}]}", 0, 0.0,
     "call 1: expected n {\"k\":1}, got n {\"k\":1.0}"},
    /* an expected call without arguments (or null) matches any arguments of its name */
    {"[" SEARCH "," BOOK_R1 "]",
     "{\"expected\":[{\"name\":\"search\"},{\"name\":\"book\",\"arguments\":null}]}", 1, 1.0,
     "2 calls matched the expected calls in order"},
    /* nothing expected: score 1 whatever passed says */
    {"[]", "{\"expected\":[]}", 1, 1.0, "0 calls matched the expected calls in order"},
    {"[" LOOKUP "]", "{\"expected\":[]}", 0, 1.0, "call 1: expected no call, got lookup"},
    {"[" LOOKUP "]", "{\"expected\":[],\"mode\":\"superset\"}", 1, 1.0,
     "every expected call was made (1 call, 0 expected)"},
    /* null mode and match_arguments read as the defaults */
    {"[" SEARCH "," BOOK "]",
     "{\"expected\":[" SEARCH "," BOOK "],\"mode\":null,"
     "\"match_arguments\":null}",
     1, 1.0, "2 calls matched the expected calls in order"},
};

START_TEST(verdicts)
{
    const struct verdict_case *c = &VERDICTS[_i];
    struct evd_evaluator_input in;
    json_t *body = make_input(turn_of(c->calls), c->arguments, &in);
    json_t *resp = NULL;
    struct evd_err err;
    ck_assert_msg(evd_evaluator_run(EVD_EVALUATOR_TRAJECTORY, &in, &resp, &err) == EVD_OK,
                  "case %d: %s", _i, err.msg);
    ck_assert_msg(json_is_true(json_object_get(resp, "passed")) == (c->passed == 1),
                  "case %d: passed %s", _i, evd_dt_dump(resp));
    json_t *score = json_object_get(resp, "score");
    ck_assert(json_is_real(score));
    ck_assert_msg(json_real_value(score) == c->score, "case %d: score %g, want %g", _i,
                  json_real_value(score), c->score);
    ck_assert_str_eq(json_string_value(json_object_get(resp, "reason")), c->reason);
    json_t *checked = NULL;
    ck_assert_int_eq(evd_evaluator_check_response(resp, &checked, &err), EVD_OK);
    ck_assert(json_equal(checked, resp));
    json_decref(checked);
    json_decref(resp);
    json_decref(body);
}
END_TEST

/* A greedy pairing (each call takes the first expected call it matches) pairs call 1 with
 * the expected a {} and leaves call 2 unpaired; the maximum pairing gives call 1 the
 * expected a {"x":1} and call 2 the a {}. */
START_TEST(maximum_pairing_beats_greedy)
{
    static const char CALLS[] = "[{\"name\":\"a\",\"arguments\":{\"x\":1}},"
                                "{\"name\":\"a\",\"arguments\":{\"y\":2}}]";
    static const char *const MODES[] = {"unordered", "subset", "superset"};
    for (size_t k = 0; k < 3; k++) {
        char args[256];
        snprintf(args, sizeof(args),
                 "{\"expected\":[{\"name\":\"a\",\"arguments\":{}},{\"name\":\"a\",\"arguments\":"
                 "{\"x\":1}}],\"mode\":\"%s\",\"match_arguments\":\"subset\"}",
                 MODES[k]);
        struct evd_evaluator_input in;
        json_t *body = make_input(turn_of(CALLS), args, &in);
        json_t *resp = NULL;
        struct evd_err err;
        ck_assert_int_eq(evd_evaluator_trajectory(&in, &resp, &err), EVD_OK);
        ck_assert_msg(json_is_true(json_object_get(resp, "passed")), "%s: %s", MODES[k],
                      evd_dt_dump(resp));
        ck_assert(json_real_value(json_object_get(resp, "score")) == 1.0);
        ck_assert_int_eq(
            json_integer_value(json_object_get(json_object_get(resp, "details"), "matched")), 2);
        json_decref(resp);
        json_decref(body);
    }
}
END_TEST

START_TEST(defaults_and_details)
{
    struct evd_evaluator_input in;
    json_t *body = make_input(turn_of("[" SEARCH "," LOOKUP "]"), ARGS("", ""), &in);
    json_t *resp = NULL;
    struct evd_err err;
    ck_assert_int_eq(evd_evaluator_trajectory(&in, &resp, &err), EVD_OK);
    json_t *want = evd_dt_parse("{\"mode\":\"strict\",\"match_arguments\":\"exact\","
                                "\"calls\":[\"search\",\"lookup\"],\"expected\":2,\"matched\":1}");
    ck_assert_msg(json_equal(json_object_get(resp, "details"), want), "%s", evd_dt_dump(resp));
    json_decref(want);
    json_decref(resp);
    json_decref(body);
    ck_assert(evd_evaluator_is_builtin(EVD_EVALUATOR_TRAJECTORY));
}
END_TEST

/* The calls come from every entry of the transcript, in order; none without a transcript. */
START_TEST(calls_are_read_in_conversation_order)
{
    static const char T[] =
        "[{\"role\":\"user\",\"content\":\"hi\"},"
        "{\"role\":\"assistant\",\"content\":\"a\",\"function_calls\":[" SEARCH "]},"
        "{\"role\":\"user\",\"content\":\"and?\"},"
        "{\"role\":\"assistant\",\"content\":\"b\"},"
        "{\"role\":\"assistant\",\"content\":\"c\",\"function_calls\":[{\"name\":\"book\","
        "\"arguments\":{\"room\":\"R42\"},\"error\":\"no rooms\"}]}]";
    struct evd_evaluator_input in;
    json_t *body = make_input(T, ARGS("", ""), &in);
    json_t *resp = NULL;
    struct evd_err err;
    ck_assert_int_eq(evd_evaluator_trajectory(&in, &resp, &err), EVD_OK);
    ck_assert(json_is_true(json_object_get(resp, "passed")));
    json_decref(resp);
    json_decref(body);

    body = make_input(NULL, ARGS(MODE("subset"), ""), &in);
    ck_assert_ptr_null(in.transcript);
    ck_assert_int_eq(evd_evaluator_trajectory(&in, &resp, &err), EVD_OK);
    ck_assert_str_eq(json_string_value(json_object_get(resp, "reason")),
                     "every call was expected (0 of 2 expected calls made)");
    json_decref(resp);
    json_decref(body);

    json_t *calls = NULL;
    json_t *t = evd_dt_parse("[{\"function_calls\":[{\"name\":\"x\"},{\"name\":\"y\","
                             "\"arguments\":null}]}]");
    ck_assert_int_eq(evd_trajectory_calls(t, &calls, &err), EVD_OK);
    json_t *want =
        evd_dt_parse("[{\"name\":\"x\",\"arguments\":{}},{\"name\":\"y\",\"arguments\":{}}]");
    ck_assert(json_equal(calls, want));
    json_decref(want);
    json_decref(calls);
    json_decref(t);
}
END_TEST

struct refusal_case {
    const char *transcript; /* NULL: none */
    const char *arguments;  /* NULL: omitted */
    const char *message;
};

static const struct refusal_case REFUSALS[] = {
    {NULL, NULL, "eval::assert::trajectory requires evaluator arguments.expected"},
    {NULL, "{}", "eval::assert::trajectory requires evaluator arguments.expected"},
    {NULL, "{\"mode\":\"strict\"}",
     "eval::assert::trajectory requires evaluator arguments.expected"},
    {NULL, "[]", "evaluator arguments must be an object"},
    {NULL, "{\"expected\":null}", "evaluator arguments.expected must be an array"},
    {NULL, "{\"expected\":{\"name\":\"a\"}}", "evaluator arguments.expected must be an array"},
    {NULL, "{\"expected\":[1]}", "evaluator arguments.expected[0] must be an object"},
    {NULL, "{\"expected\":[{}]}", "evaluator arguments.expected[0].name is required"},
    {NULL, "{\"expected\":[{\"name\":3}]}",
     "evaluator arguments.expected[0].name must be a string"},
    {NULL, "{\"expected\":[{\"name\":\"\"}]}",
     "evaluator arguments.expected[0].name cannot be empty"},
    {NULL, "{\"expected\":[{\"name\":\"a\"},{\"name\":\" \\t\"}]}",
     "evaluator arguments.expected[1].name cannot be empty"},
    {NULL, "{\"expected\":[{\"name\":\"a\"},{\"name\":\"b\",\"arguments\":[1]}]}",
     "evaluator arguments.expected[1].arguments must be an object"},
    {NULL, "{\"expected\":[{\"name\":\"a\",\"args\":{}}]}",
     "evaluator arguments.expected[0].args is not a known field"},
    {NULL, "{\"expected\":[],\"mode\":\"ordered\"}",
     "evaluator arguments.mode must be one of strict, unordered, subset, superset"},
    {NULL, "{\"expected\":[],\"mode\":1}", "evaluator arguments.mode must be a string"},
    {NULL, "{\"expected\":[],\"match_arguments\":\"loose\"}",
     "evaluator arguments.match_arguments must be one of exact, subset, ignore"},
    {NULL, "{\"expected\":[],\"colour\":1}", "evaluator arguments.colour is not a known field"},
    {"[1]", "{\"expected\":[]}", "transcript[0] must be an object"},
    {"[{\"role\":\"assistant\",\"function_calls\":{}}]", "{\"expected\":[]}",
     "transcript[0].function_calls must be an array"},
    {"[{},{\"function_calls\":[7]}]", "{\"expected\":[]}",
     "transcript[1].function_calls[0] must be an object"},
    {"[{\"function_calls\":[{\"arguments\":{}}]}]", "{\"expected\":[]}",
     "transcript[0].function_calls[0].name is required"},
    {"[{\"function_calls\":[{\"name\":1}]}]", "{\"expected\":[]}",
     "transcript[0].function_calls[0].name must be a string"},
    {"[{\"function_calls\":[{\"name\":\"a\",\"arguments\":[1]}]}]", "{\"expected\":[]}",
     "transcript[0].function_calls[0].arguments must be an object"},
};

START_TEST(refusals_name_the_field)
{
    const struct refusal_case *c = &REFUSALS[_i];
    struct evd_evaluator_input in;
    json_t *body = make_input(c->transcript, c->arguments, &in);
    json_t *resp = (json_t *)1;
    struct evd_err err = {0};
    ck_assert_int_eq(evd_evaluator_run(EVD_EVALUATOR_TRAJECTORY, &in, &resp, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, c->message);
    ck_assert_ptr_null(resp);
    json_decref(body);
}
END_TEST

START_TEST(input_transcript_must_be_an_array)
{
    json_t *body = evd_dt_parse("{\"evaluation_id\":\"eval_1\",\"run_id\":\"treatment-1\","
                                "\"role\":\"treatment\",\"session_id\":\"eval_1_t_1\","
                                "\"output\":\"done\",\"transcript\":{},\"case_id\":\"q1\"}");
    json_object_set_new(body, "metrics", evd_dt_metrics("eval_1_t_1", true, 1, 0, 0, 3, 4, 0.1, 0));
    struct evd_evaluator_input in;
    struct evd_err err;
    ck_assert_int_eq(evd_request_evaluator_input(body, &in, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "transcript must be an array");
    json_object_set_new(body, "transcript", json_null());
    ck_assert_int_eq(evd_request_evaluator_input(body, &in, &err), EVD_OK);
    ck_assert_ptr_null(in.transcript);
    ck_assert_str_eq(in.case_id, "q1");
    json_object_set_new(body, "case_id", json_integer(1));
    ck_assert_int_eq(evd_request_evaluator_input(body, &in, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "case_id must be a string");
    json_decref(body);
}
END_TEST

START_TEST(transcript_of_a_turn)
{
    json_t *harness = evd_dt_parse(
        "{\"generations\":[],\"function_calls\":["
        "{\"call_id\":\"c1\",\"function_id\":\"hotel.search\",\"tool_name\":\"hotel_search\","
        "\"turn\":1,\"arguments\":{\"q\":\"oslo\"},\"status\":\"ok\",\"result\":{\"ids\":[1]}},"
        "{\"call_id\":\"c2\",\"function_id\":\"book\",\"tool_name\":\"book\",\"turn\":2,"
        "\"arguments\":{},\"status\":\"error\",\"error\":\"no rooms\"}]}");
    json_t *out = json_string("Booked.");
    json_t *t = evd_trajectory_transcript(NULL, "Book a room.", out, harness);
    json_t *want = evd_dt_parse(
        "[{\"role\":\"user\",\"content\":\"Book a room.\"},"
        "{\"role\":\"assistant\",\"content\":\"Booked.\",\"function_calls\":["
        "{\"name\":\"hotel.search\",\"arguments\":{\"q\":\"oslo\"},\"result\":{\"ids\":[1]}},"
        "{\"name\":\"book\",\"arguments\":{},\"error\":\"no rooms\"}]}]");
    ck_assert_msg(json_equal(t, want), "%s", evd_dt_dump(t));
    json_decref(want);
    json_decref(t);
    json_decref(out);

    /* JSON output as canonical text; no calls, no function_calls; no prompt, no user entry */
    out = evd_dt_parse("{\"b\":1,\"a\":[true]}");
    t = evd_trajectory_transcript(NULL, NULL, out, NULL);
    want =
        evd_dt_parse("[{\"role\":\"assistant\",\"content\":\"{\\\"a\\\":[true],\\\"b\\\":1}\"}]");
    ck_assert_msg(json_equal(t, want), "%s", evd_dt_dump(t));
    json_decref(want);
    json_decref(t);
    json_decref(out);
    json_decref(harness);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_trajectory");
    TCase *tc = tcase_create("verdicts");
    tcase_add_loop_test(tc, verdicts, 0, sizeof(VERDICTS) / sizeof(VERDICTS[0]));
    tcase_add_test(tc, maximum_pairing_beats_greedy);
    tcase_add_test(tc, defaults_and_details);
    tcase_add_test(tc, calls_are_read_in_conversation_order);
    suite_add_tcase(s, tc);
    TCase *refusals = tcase_create("refusals");
    tcase_add_loop_test(refusals, refusals_name_the_field, 0,
                        sizeof(REFUSALS) / sizeof(REFUSALS[0]));
    tcase_add_test(refusals, input_transcript_must_be_an_array);
    suite_add_tcase(s, refusals);
    TCase *transcript = tcase_create("transcript");
    tcase_add_test(transcript, transcript_of_a_turn);
    suite_add_tcase(s, transcript);
    return evd_test_run_suite(s);
}
