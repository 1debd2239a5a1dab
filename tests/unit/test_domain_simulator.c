/*
 * The simulated user (domain/simulator.h): the request member's defaults and refusals, the
 * instructions rendered for a case, the simulator's view with the roles swapped and the
 * stop token, against hand-written expectations.
 */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "domain/simulator.h"
#include "tests/support/testutil.h"

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    ck_assert_msg(v != NULL, "%s: %s", text, e.text);
    return v;
}

START_TEST(defaults_are_filled_in)
{
    json_t *in = parse("{\"model\":{\"model\":\"m\",\"provider\":\"openai\"},"
                       "\"instructions\":\"You are {{name}}.\"}");
    json_t *out = NULL;
    struct evd_err err = {0};
    ck_assert_int_eq(evd_simulator_request(in, &out, &err), EVD_OK);
    ck_assert_int_eq(json_integer_value(json_object_get(out, "max_turns")), 5);
    ck_assert_str_eq(json_string_value(json_object_get(out, "stop")), "[[DONE]]");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(out, "model"), "model")),
                     "m");
    json_t *c = parse("{\"id\":\"q1\",\"vars\":{\"name\":\"Ana\"}}");
    char *ins = NULL;
    ck_assert_int_eq(evd_simulator_instructions(out, c, &ins, &err), EVD_OK);
    ck_assert_str_eq(ins, "You are Ana.");
    free(ins);
    json_object_del(json_object_get(c, "vars"), "name");
    ck_assert_int_eq(evd_simulator_instructions(out, c, &ins, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "case q1: template variable name is not defined");
    ck_assert_ptr_null(ins);
    json_decref(c);
    json_decref(out);
    json_decref(in);
    /* absent or null: none */
    ck_assert_int_eq(evd_simulator_request(NULL, &out, &err), EVD_OK);
    ck_assert(json_is_null(out));
    json_decref(out);
}
END_TEST

static const struct {
    const char *in, *msg;
} REFUSALS[] = {
    {"7", "simulator must be an object"},
    {"{\"instructions\":\"x\"}", "simulator.model is required"},
    {"{\"model\":{},\"instructions\":\"x\"}", "simulator.model.model is required"},
    {"{\"model\":{\"model\":\"m\"},\"instructions\":\"x\",\"turns\":2}",
     "simulator.turns is not a known field"},
    {"{\"model\":{\"model\":\"m\"}}", "simulator.instructions is required"},
    {"{\"model\":{\"model\":\"m\"},\"instructions\":3}", "simulator.instructions must be a string"},
    {"{\"model\":{\"model\":\"m\"},\"instructions\":\"\\n \"}",
     "simulator.instructions cannot be empty"},
    {"{\"model\":{\"model\":\"m\"},\"instructions\":\"x\",\"max_turns\":0}",
     "simulator.max_turns must be an integer between 1 and 20"},
    {"{\"model\":{\"model\":\"m\"},\"instructions\":\"x\",\"max_turns\":2.5}",
     "simulator.max_turns must be an integer between 1 and 20"},
    {"{\"model\":{\"model\":\"m\"},\"instructions\":\"x\",\"stop\":1}",
     "simulator.stop must be a non-empty string"},
};

START_TEST(refusals_name_the_field)
{
    json_t *in = parse(REFUSALS[_i].in), *out = NULL;
    struct evd_err err = {0};
    ck_assert_int_eq(evd_simulator_request(in, &out, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, REFUSALS[_i].msg);
    ck_assert_ptr_null(out);
    json_decref(in);
}
END_TEST

/* The simulator sees the agent's answers as the user's and its own turns as the
 * assistant's, without function calls; the stop token may be anywhere in a reply. */
START_TEST(the_view_swaps_roles_and_the_token_stops)
{
    json_t *t = parse("[{\"role\":\"user\",\"content\":\"A room?\"},"
                      "{\"role\":\"assistant\",\"content\":\"Which city?\",\"function_calls\":"
                      "[{\"name\":\"search\",\"arguments\":{}}]},"
                      "{\"role\":\"user\",\"content\":\"Oslo.\"},"
                      "{\"role\":\"assistant\",\"content\":\"Booked.\"}]");
    json_t *v = evd_simulator_view(t);
    json_t *want = parse("[{\"role\":\"assistant\",\"content\":\"A room?\"},"
                         "{\"role\":\"user\",\"content\":\"Which city?\"},"
                         "{\"role\":\"assistant\",\"content\":\"Oslo.\"},"
                         "{\"role\":\"user\",\"content\":\"Booked.\"}]");
    ck_assert(json_equal(v, want));
    json_decref(want);
    json_decref(v);
    json_decref(t);
    json_t *sim = parse("{\"stop\":\"<END>\"}");
    ck_assert(evd_simulator_stops(sim, "Thanks <END>", 12));
    ck_assert(evd_simulator_stops(sim, "<END>", 5));
    ck_assert(!evd_simulator_stops(sim, "<END", 4));
    ck_assert(!evd_simulator_stops(sim, "Thanks [[DONE]]", 15));
    json_decref(sim);
    sim = parse("{}"); /* the default token */
    ck_assert(evd_simulator_stops(sim, "ok [[DONE]] bye", 15));
    json_decref(sim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_simulator");
    TCase *tc = tcase_create("simulator");
    tcase_add_test(tc, defaults_are_filled_in);
    tcase_add_loop_test(tc, refusals_name_the_field, 0, sizeof(REFUSALS) / sizeof(REFUSALS[0]));
    tcase_add_test(tc, the_view_swaps_roles_and_the_token_stops);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
