/*
 * Unit tests for domain/plan.h: the balanced plans of the contract (runs 3 and 2 in
 * both orders), run identity, effective execution order and the rerun reversal.
 */
#include <check.h>
#include <string.h>

#include "domain/plan.h"
#include "domain/run.h"
#include "tests/support/domain_fixtures.h"
#include "tests/support/testutil.h"

struct plan_case {
    uint32_t runs;
    enum evd_order order;
    const char *roles; /* C / T per position */
    const char *order_strings[6];
};

static const struct plan_case PLANS[] = {
    {3,
     EVD_ORDER_CONTROL_FIRST,
     "CTTCCT",
     {"1:control:1", "2:treatment:1", "3:treatment:2", "4:control:2", "5:control:3",
      "6:treatment:3"}},
    {3,
     EVD_ORDER_TREATMENT_FIRST,
     "TCCTTC",
     {"1:treatment:1", "2:control:1", "3:control:2", "4:treatment:2", "5:treatment:3",
      "6:control:3"}},
    {2,
     EVD_ORDER_CONTROL_FIRST,
     "CTTC",
     {"1:control:1", "2:treatment:1", "3:treatment:2", "4:control:2"}},
    {2,
     EVD_ORDER_TREATMENT_FIRST,
     "TCCT",
     {"1:treatment:1", "2:control:1", "3:control:2", "4:treatment:2"}},
    {1, EVD_ORDER_CONTROL_FIRST, "CT", {"1:control:1", "2:treatment:1"}},
    {1, EVD_ORDER_TREATMENT_FIRST, "TC", {"1:treatment:1", "2:control:1"}},
};

START_TEST(balanced_plans)
{
    const struct plan_case *c = &PLANS[_i];
    json_t *plan = evd_plan_build("eval_1", c->runs, c->order);
    ck_assert_uint_eq(json_array_size(plan), 2 * c->runs);
    json_t *eo = evd_plan_effective_order(plan);
    for (size_t i = 0; i < 2 * c->runs; i++) {
        json_t *run = json_array_get(plan, i);
        const char *role = json_string_value(json_object_get(run, "role"));
        ck_assert_str_eq(role, c->roles[i] == 'C' ? "control" : "treatment");
        ck_assert_int_eq(json_integer_value(json_object_get(run, "execution_position")),
                         (json_int_t)i + 1);
        ck_assert_int_eq(json_integer_value(json_object_get(run, "pair_position")),
                         (json_int_t)(i % 2) + 1);
        ck_assert_int_eq(json_integer_value(json_object_get(run, "iteration")),
                         (json_int_t)(i / 2) + 1);
        ck_assert_str_eq(json_string_value(json_object_get(run, "status")), "pending");
        ck_assert_int_eq(json_integer_value(json_object_get(run, "started_at")), 0);
        ck_assert_str_eq(json_string_value(json_array_get(eo, i)), c->order_strings[i]);
        struct evd_plan_entry e = evd_plan_entry_at(c->order, i);
        ck_assert_int_eq(e.role, c->roles[i] == 'C' ? EVD_ROLE_CONTROL : EVD_ROLE_TREATMENT);
    }
    json_decref(eo);
    json_decref(plan);
}
END_TEST

START_TEST(run_identity)
{
    json_t *plan = evd_plan_build("eval_1", 3, EVD_ORDER_CONTROL_FIRST);
    json_t *r0 = json_array_get(plan, 0), *r2 = json_array_get(plan, 2);
    ck_assert_str_eq(json_string_value(json_object_get(r0, "session_id")), "eval_1_c_1");
    ck_assert_str_eq(json_string_value(json_object_get(r0, "run_id")), "control-1");
    ck_assert_str_eq(json_string_value(json_object_get(r2, "session_id")), "eval_1_t_2");
    ck_assert_str_eq(json_string_value(json_object_get(r2, "run_id")), "treatment-2");
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_array_get(plan, 5), "execution_position")), 6);
    ck_assert_uint_eq(json_array_size(json_object_get(r0, "failures")), 0);
    json_decref(plan);

    plan = evd_plan_build("eval_1", 2, EVD_ORDER_TREATMENT_FIRST);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(plan, 0), "run_id")),
                     "treatment-1");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(plan, 1), "run_id")),
                     "control-1");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(plan, 0), "session_id")),
                     "eval_1_t_1");
    json_decref(plan);

    char buf[64];
    evd_plan_run_id(EVD_ROLE_TREATMENT, 12, buf, sizeof(buf));
    ck_assert_str_eq(buf, "treatment-12");
    evd_plan_session_id("eval_ab", EVD_ROLE_CONTROL, 7, buf, sizeof(buf));
    ck_assert_str_eq(buf, "eval_ab_c_7");
}
END_TEST

START_TEST(reversal_swaps_the_balanced_orders)
{
    ck_assert_int_eq(evd_order_reverse(EVD_ORDER_CONTROL_FIRST), EVD_ORDER_TREATMENT_FIRST);
    ck_assert_int_eq(evd_order_reverse(EVD_ORDER_TREATMENT_FIRST), EVD_ORDER_CONTROL_FIRST);
    /* a reversed plan puts the other role at every position */
    for (size_t i = 0; i < 40; i++) {
        struct evd_plan_entry a = evd_plan_entry_at(EVD_ORDER_CONTROL_FIRST, i);
        struct evd_plan_entry b = evd_plan_entry_at(EVD_ORDER_TREATMENT_FIRST, i);
        ck_assert_int_ne(a.role, b.role);
        ck_assert_uint_eq(a.iteration, b.iteration);
    }
    enum evd_order o;
    ck_assert(evd_order_parse("balanced_treatment_first", &o));
    ck_assert_int_eq(o, EVD_ORDER_TREATMENT_FIRST);
    ck_assert(!evd_order_parse("random", &o));
    ck_assert_str_eq(evd_order_name(EVD_ORDER_CONTROL_FIRST), "balanced_control_first");
}
END_TEST

START_TEST(vocabulary_names)
{
    enum evd_run_status rs;
    enum evd_eval_status es;
    enum evd_phase ph;
    ck_assert(evd_run_status_parse("cancelled", &rs) && rs == EVD_RUN_CANCELLED);
    ck_assert(!evd_run_status_is_terminal(EVD_RUN_RUNNING));
    ck_assert(evd_run_status_is_terminal(EVD_RUN_FAILED));
    ck_assert(evd_eval_status_parse("queued", &es) && es == EVD_EVAL_QUEUED);
    ck_assert(evd_eval_status_is_terminal(EVD_EVAL_COMPLETED));
    ck_assert(!evd_eval_status_is_terminal(EVD_EVAL_RUNNING));
    ck_assert(evd_phase_parse("evaluate", &ph) && ph == EVD_PHASE_EVALUATE);
    ck_assert_str_eq(evd_phase_name(EVD_PHASE_LIMIT), "limit");
    ck_assert_str_eq(evd_dimension_name(EVD_DIMENSION_SYSTEM_PROMPT), "system_prompt");
    ck_assert(!evd_role_parse(NULL, &(enum evd_role){0}));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_plan");
    TCase *tc = tcase_create("plan");
    tcase_add_loop_test(tc, balanced_plans, 0, sizeof(PLANS) / sizeof(PLANS[0]));
    tcase_add_test(tc, run_identity);
    tcase_add_test(tc, reversal_swaps_the_balanced_orders);
    tcase_add_test(tc, vocabulary_names);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
