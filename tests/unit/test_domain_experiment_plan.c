/*
 * Unit tests for the experiment plan of domain/plan.h: two arms follow the seed's pairs,
 * the Williams rows for k = 3, 4, 5 are the spec's and are balanced for first-order
 * carryover, positions and cells are inverse, and session ids have the spec's form.
 */
#include <check.h>
#include <string.h>

#include "domain/plan.h"
#include "tests/support/testutil.h"

START_TEST(two_arms_are_the_seed_pairs)
{
    /* the seed's balanced_control_first plan: pair i has the control first when i is odd */
    for (uint32_t r = 1; r <= 12; r++) {
        unsigned order[2];
        evd_plan_arm_order(2, r, order);
        for (unsigned place = 0; place < 2; place++) {
            struct evd_plan_entry e =
                evd_plan_entry_at(EVD_ORDER_CONTROL_FIRST, (size_t)(r - 1) * 2 + place);
            ck_assert_uint_eq(e.iteration, r);
            ck_assert_uint_eq(order[place], e.role == EVD_ROLE_CONTROL ? 0 : 1);
        }
    }
    ck_assert_uint_eq(evd_plan_design_rows(2), 2);
}
END_TEST

/*
 * The rows worked out from the spec's rule. k = 3: s = 0, 1, 2; rows (s + j) mod 3 are
 * 012, 120, 201, then mirrored 210, 021, 102. k = 4: s = 0, 1, 3, 2; rows 0132, 1203,
 * 2310, 3021. k = 5: s = 0, 1, 4, 2, 3; rows 01423, 12034, 23140, 34201, 40312, then
 * mirrored 32410, 43021, 04132, 10243, 21304.
 */
static const char *const ROWS3[] = {"012", "120", "201", "210", "021", "102"};
static const char *const ROWS4[] = {"0132", "1203", "2310", "3021"};
static const char *const ROWS5[] = {"01423", "12034", "23140", "34201", "40312",
                                    "32410", "43021", "04132", "10243", "21304"};

static void row_string(unsigned k, uint32_t repeat, char *buf)
{
    unsigned order[EVD_PLAN_MAX_ARMS];
    evd_plan_arm_order(k, repeat, order);
    for (unsigned i = 0; i < k; i++)
        buf[i] = (char)('0' + order[i]);
    buf[k] = '\0';
}

START_TEST(williams_rows_as_the_spec_builds_them)
{
    struct {
        unsigned k;
        const char *const *rows;
        unsigned n;
    } designs[] = {{3, ROWS3, 6}, {4, ROWS4, 4}, {5, ROWS5, 10}};
    for (size_t d = 0; d < 3; d++) {
        unsigned k = designs[d].k;
        ck_assert_uint_eq(evd_plan_design_rows(k), designs[d].n);
        /* repeat r uses row (r − 1) mod R: three full cycles */
        for (uint32_t r = 1; r <= 3 * designs[d].n; r++) {
            char buf[8];
            row_string(k, r, buf);
            ck_assert_str_eq(buf, designs[d].rows[(r - 1) % designs[d].n]);
        }
    }
}
END_TEST

START_TEST(williams_rows_are_balanced)
{
    for (unsigned k = 2; k <= EVD_PLAN_MAX_ARMS; k++) {
        unsigned rows = evd_plan_design_rows(k);
        unsigned place_count[EVD_PLAN_MAX_ARMS][EVD_PLAN_MAX_ARMS] = {{0}};
        unsigned pair_count[EVD_PLAN_MAX_ARMS][EVD_PLAN_MAX_ARMS] = {{0}};
        for (uint32_t r = 1; r <= rows; r++) {
            unsigned order[EVD_PLAN_MAX_ARMS], seen = 0;
            evd_plan_arm_order(k, r, order);
            for (unsigned i = 0; i < k; i++) {
                ck_assert_uint_lt(order[i], k);
                seen |= 1u << order[i];
                place_count[order[i]][i]++;
                if (i > 0)
                    pair_count[order[i - 1]][order[i]]++;
            }
            ck_assert_uint_eq(seen, (1u << k) - 1); /* each row is a permutation */
        }
        /* every arm in every place R/k times; every ordered pair of distinct arms adjacent
         * equally often: R (k − 1) adjacencies over k (k − 1) pairs, R/k each */
        for (unsigned a = 0; a < k; a++) {
            for (unsigned b = 0; b < k; b++) {
                ck_assert_uint_eq(place_count[a][b], rows / k);
                ck_assert_uint_eq(pair_count[a][b], (a == b ? 0 : rows / k));
            }
        }
    }
}
END_TEST

START_TEST(positions_and_cells_are_inverse)
{
    for (unsigned k = 2; k <= EVD_PLAN_MAX_ARMS; k++) {
        uint32_t repeats = 7;
        bool used[EVD_PLAN_MAX_ARMS * 7 + 1] = {false};
        for (uint32_t r = 1; r <= repeats; r++) {
            unsigned order[EVD_PLAN_MAX_ARMS];
            evd_plan_arm_order(k, r, order);
            for (unsigned arm = 0; arm < k; arm++) {
                uint32_t pos = evd_plan_cell_position(k, r, arm);
                ck_assert_uint_ge(pos, (r - 1) * k + 1); /* the repeats run in order */
                ck_assert_uint_le(pos, r * k);
                ck_assert(!used[pos]);
                used[pos] = true;
                ck_assert_uint_eq(order[(pos - 1) % k], arm);
                uint32_t r2;
                unsigned arm2;
                evd_plan_cell_at(k, pos, &r2, &arm2);
                ck_assert_uint_eq(r2, r);
                ck_assert_uint_eq(arm2, arm);
            }
        }
        for (uint32_t pos = 1; pos <= k * repeats; pos++)
            ck_assert(used[pos]); /* positions 1 … arms × repeats, each once */
    }
    /* the spec's example: 3 arms, repeat 2 runs row 120, so arm 0 is at position 3 + 3 */
    ck_assert_uint_eq(evd_plan_cell_position(3, 2, 0), 6);
    ck_assert_uint_eq(evd_plan_cell_position(3, 2, 1), 4);
}
END_TEST

START_TEST(session_ids)
{
    char buf[96];
    int n = evd_plan_experiment_session_id("exp_0123abcd", 17, 2, 3, buf, sizeof(buf));
    ck_assert_str_eq(buf, "exp_0123abcd_17_2_3");
    ck_assert_int_eq(n, (int)strlen(buf));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_experiment_plan");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, two_arms_are_the_seed_pairs);
    tcase_add_test(tc, williams_rows_as_the_spec_builds_them);
    tcase_add_test(tc, williams_rows_are_balanced);
    tcase_add_test(tc, positions_and_cells_are_inverse);
    tcase_add_test(tc, session_ids);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
