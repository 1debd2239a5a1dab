/*
 * Unit tests for domain/agreement.h: Cohen's kappa and its Fleiss–Cohen–Everitt interval
 * on tables worked out by hand (below, in exact fractions), the degenerate tables (no run,
 * one verdict everywhere, perfect agreement and perfect disagreement), and the clipping of
 * the interval to [−1, 1]. tests/stats/check_kappa.py checks random tables against an
 * independent exact computation.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "domain/agreement.h"
#include "tests/support/testutil.h"

#define ck_assert_near(a, b)                                                                       \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        ck_assert_msg(fabs(a_ - b_) <= 1e-12 * fmax(1.0, fabs(b_)), "%s = %.17g, expected %.17g",  \
                      #a, a_, b_);                                                                 \
    } while (0)

/* z(0.975) of the standard normal */
#define Z975 1.959963984540054

START_TEST(hand_worked_moderate)
{
    /*
     * 50 runs: evaluator pass & human pass 20, evaluator pass & human fail 5, evaluator fail
     * & human pass 10, both fail 15. p = [.4 .1; .2 .3], rows (evaluator) .5 .5, columns
     * (human) .6 .4. p_o = .7, p_e = .5·.6 + .5·.4 = .5, κ = .2/.5 = .4, 1 − κ = .6.
     *   Σ p_ii [1 − (p_i. + p_.i)(1 − κ)]² = .4(1 − 1.1·.6)² + .3(1 − .9·.6)²
     *                                       = .4·.1156 + .3·.2116 = .10972
     *   (1 − κ)² Σ_{i≠j} p_ij (p_.i + p_j.)² = .36 (.1·1.1² + .2·.9²) = .36·.283 = .10188
     *   [κ − p_e(1 − κ)]² = (.4 − .3)² = .01
     *   var = (.10972 + .10188 − .01) / (50 · .25) = .2016 / 12.5 = .016128
     */
    struct evd_agreement_table t = {20, 5, 10, 15};
    struct evd_agreement a;
    evd_agreement_kappa(&t, 0.05, &a);
    ck_assert_uint_eq(a.n, 50);
    ck_assert(a.has_agreement && a.has_kappa);
    ck_assert_near(a.agreement, 0.7);
    ck_assert_near(a.kappa, 0.4);
    ck_assert_near(a.se, sqrt(0.016128));
    ck_assert_near(a.ci_low, 0.4 - Z975 * sqrt(0.016128));
    ck_assert_near(a.ci_high, 0.4 + Z975 * sqrt(0.016128));
    /* a 90 % interval is narrower: z(0.95) = 1.6448536269514722 */
    evd_agreement_kappa(&t, 0.10, &a);
    ck_assert_near(a.ci_high - a.kappa, 1.6448536269514722 * sqrt(0.016128));
}
END_TEST

START_TEST(hand_worked_slight)
{
    /*
     * 100 runs: 45, 15, 25, 15. Rows .6 .4, columns .7 .3; p_o = .6, p_e = .42 + .12 = .54,
     * κ = .06/.46 = 3/23. In fractions var = 2724/279841 (the three sums as above with
     * 1 − κ = 20/23), se = √(2724/279841) ≈ 0.098661.
     */
    struct evd_agreement_table t = {45, 15, 25, 15};
    struct evd_agreement a;
    evd_agreement_kappa(&t, 0.05, &a);
    ck_assert_near(a.agreement, 0.6);
    ck_assert_near(a.kappa, 3.0 / 23.0);
    ck_assert_near(a.se, sqrt(2724.0 / 279841.0));
    ck_assert_near(a.ci_low, 3.0 / 23.0 - Z975 * sqrt(2724.0 / 279841.0));
}
END_TEST

START_TEST(three_categories_hand_worked)
{
    /*
     * The judge against people over control, tie, treatment (docs/judges.md), 5 pairs:
     *   judge control   [1 0 0]      p = [.2 0 0; 0 0 .2; 0 .2 .4]
     *   judge tie       [0 0 1]      rows .2 .2 .6, columns .2 .2 .6
     *   judge treatment [0 1 2]      p_o = .6, p_e = .04 + .04 + .36 = .44, κ = .16/.56 = 2/7
     * 1 − κ = 5/7:
     *   Σ p_ii [1 − (p_i. + p_.i)(1 − κ)]² = .2(5/7)² + .4(1/7)² = 5.4/49
     *   (1 − κ)² Σ_{i≠j} p_ij (p_.i + p_j.)² = 25/49 (.2·.8² + .2·.8²) = 6.4/49
     *   [κ − p_e(1 − κ)]² = (−.2/7)² = .04/49
     *   var = (11.76/49) / (5 · .56²) = .24 / 1.568
     * The upper end 2/7 + 1.96·0.391 passes 1 and is clipped.
     */
    const uint64_t t[9] = {1, 0, 0, 0, 0, 1, 0, 1, 2};
    struct evd_agreement a;
    evd_agreement_kappa_k(t, 3, 0.05, &a);
    ck_assert_uint_eq(a.n, 5);
    ck_assert(a.has_agreement && a.has_kappa);
    ck_assert_near(a.agreement, 0.6);
    ck_assert_near(a.kappa, 2.0 / 7.0);
    ck_assert_near(a.se, sqrt(0.24 / 1.568));
    ck_assert_near(a.ci_low, 2.0 / 7.0 - Z975 * sqrt(0.24 / 1.568));
    ck_assert_near(a.ci_high, 1.0);
    /* A larger table, against an independent implementation of the same formulas. */
    const uint64_t u[9] = {20, 5, 1, 3, 10, 4, 2, 6, 30};
    evd_agreement_kappa_k(u, 3, 0.05, &a);
    ck_assert_near(a.agreement, 0.7407407407407407);
    ck_assert_near(a.kappa, 0.5973011363636364);
    ck_assert_near(a.se, 0.07332684564437393);
    /* k = 2 is the run agreement's table */
    const uint64_t two[4] = {20, 5, 10, 15};
    evd_agreement_kappa_k(two, 2, 0.05, &a);
    ck_assert_near(a.kappa, 0.4);
    /* everyone in one category: no κ */
    const uint64_t one[9] = {0, 0, 0, 0, 7, 0, 0, 0, 0};
    evd_agreement_kappa_k(one, 3, 0.05, &a);
    ck_assert(a.has_agreement && !a.has_kappa);
}
END_TEST

START_TEST(degenerate_tables)
{
    struct evd_agreement a;
    /* no run: nothing defined */
    struct evd_agreement_table none = {0, 0, 0, 0};
    evd_agreement_kappa(&none, 0.05, &a);
    ck_assert_uint_eq(a.n, 0);
    ck_assert(!a.has_agreement && !a.has_kappa);
    /* both say pass every time: they agree, but chance explains it all (p_e = 1) */
    struct evd_agreement_table same = {10, 0, 0, 0};
    evd_agreement_kappa(&same, 0.05, &a);
    ck_assert(a.has_agreement && !a.has_kappa);
    ck_assert_near(a.agreement, 1.0);
    /* perfect agreement on both verdicts: κ = 1 and the large-sample variance is 0 */
    struct evd_agreement_table perfect = {6, 0, 0, 4};
    evd_agreement_kappa(&perfect, 0.05, &a);
    ck_assert_near(a.kappa, 1.0);
    ck_assert_near(a.se, 0.0);
    ck_assert_near(a.ci_low, 1.0);
    ck_assert_near(a.ci_high, 1.0);
    /* perfect disagreement with even margins: p_o = 0, p_e = .5, κ = −1;
     * Σ p_ii… = 0, (1 − κ)² Σ… = 4 (.5·1 + .5·1) = 4, [κ − p_e(1 − κ)]² = (−2)² = 4: var 0 */
    struct evd_agreement_table opposite = {0, 5, 5, 0};
    evd_agreement_kappa(&opposite, 0.05, &a);
    ck_assert_near(a.agreement, 0.0);
    ck_assert_near(a.kappa, -1.0);
    ck_assert_near(a.ci_low, -1.0);
    ck_assert_near(a.ci_high, -1.0);
}
END_TEST

START_TEST(interval_is_clipped)
{
    /* 4 runs, 3 agreeing: κ = .5 with se ≈ .43, so κ + 1.96 se passes 1 */
    struct evd_agreement_table t = {2, 1, 0, 1};
    struct evd_agreement a;
    evd_agreement_kappa(&t, 0.05, &a);
    ck_assert(a.has_kappa);
    ck_assert_near(a.kappa, 0.5);
    ck_assert(a.kappa + Z975 * a.se > 1.0);
    ck_assert_near(a.ci_high, 1.0);
    ck_assert(a.ci_low >= -1.0 && a.ci_low < a.kappa);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_agreement");
    TCase *tc = tcase_create("kappa");
    tcase_add_test(tc, hand_worked_moderate);
    tcase_add_test(tc, hand_worked_slight);
    tcase_add_test(tc, degenerate_tables);
    tcase_add_test(tc, three_categories_hand_worked);
    tcase_add_test(tc, interval_is_clipped);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
