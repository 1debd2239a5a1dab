/*
 * Unit tests for domain/preference.h: the judge's answer, every row of the outcome table,
 * orders "one" by repeat, the spec's position-biased judge (always slot 1), a fair judge's
 * preference figures worked by hand (unclustered and clustered), the length bias, the
 * consistency subtlety, the null figures, and the code-point count of valid and invalid
 * UTF-8. Agreement with an independent SciPy implementation over random judges is
 * tests/stats/check_preference.py.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "domain/preference.h"
#include "domain/stats.h"
#include "tests/support/testutil.h"

#define TOL 1e-12

#define ck_assert_near(a, b)                                                                       \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        ck_assert_msg(fabs(a_ - b_) <= TOL, "%s = %.17g, expected %.17g", #a, a_, b_);             \
    } while (0)

/* z = Φ⁻¹(0.975) and z², for the hand-worked Wilson intervals at α = 0.05 */
#define Z975 1.959963984540054
#define Z975_SQ 3.8414588206941254

static const enum evd_pref_slot S1 = EVD_PREF_SLOT_1, S2 = EVD_PREF_SLOT_2, TIE = EVD_PREF_TIE;
static const struct evd_stats_params ALPHA05 = {.alpha = 0.05, .comparisons = 1, .min_effect = 0};

/* A pair judged in both orders, on case `c`, with outputs of equal length. */
static struct evd_pref_judged both(uint32_t c, enum evd_pref_slot o1, enum evd_pref_slot o2)
{
    struct evd_pref_judged j = {.case_index = c, .len_control = 10, .len_treatment = 10};
    evd_pref_pair_both(o1, o2, &j.pair);
    return j;
}

START_TEST(parse_answers)
{
    enum evd_pref_slot s = EVD_PREF_TIE;
    ck_assert(evd_pref_slot_parse("1", &s) && s == EVD_PREF_SLOT_1);
    ck_assert(evd_pref_slot_parse("2", &s) && s == EVD_PREF_SLOT_2);
    ck_assert(evd_pref_slot_parse("tie", &s) && s == EVD_PREF_TIE);
    const char *bad[] = {"", "0", "3", "12", " 1", "1 ", "Tie", "TIE", "ties", "one", "none"};
    s = EVD_PREF_SLOT_2;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(!evd_pref_slot_parse(bad[i], &s), "accepted '%s'", bad[i]);
    ck_assert(!evd_pref_slot_parse(NULL, &s));
    ck_assert(s == EVD_PREF_SLOT_2); /* untouched */
    ck_assert_str_eq(evd_pref_slot_name(EVD_PREF_SLOT_1), "1");
    ck_assert_str_eq(evd_pref_slot_name(EVD_PREF_SLOT_2), "2");
    ck_assert_str_eq(evd_pref_slot_name(EVD_PREF_TIE), "tie");
    ck_assert_str_eq(evd_pref_outcome_name(EVD_PREF_OUTCOME_CONTROL), "control");
    ck_assert_str_eq(evd_pref_outcome_name(EVD_PREF_OUTCOME_TIE), "tie");
    ck_assert_str_eq(evd_pref_outcome_name(EVD_PREF_OUTCOME_TREATMENT), "treatment");
}
END_TEST

START_TEST(order_winners)
{
    /* order 1: control in slot 1; order 2: treatment in slot 1 */
    ck_assert_int_eq(evd_pref_order_winner(1, S1), EVD_PREF_OUTCOME_CONTROL);
    ck_assert_int_eq(evd_pref_order_winner(1, S2), EVD_PREF_OUTCOME_TREATMENT);
    ck_assert_int_eq(evd_pref_order_winner(1, TIE), EVD_PREF_OUTCOME_TIE);
    ck_assert_int_eq(evd_pref_order_winner(2, S1), EVD_PREF_OUTCOME_TREATMENT);
    ck_assert_int_eq(evd_pref_order_winner(2, S2), EVD_PREF_OUTCOME_CONTROL);
    ck_assert_int_eq(evd_pref_order_winner(2, TIE), EVD_PREF_OUTCOME_TIE);
}
END_TEST

/* Every row of the outcome table (preference.h), as the two answers. */
START_TEST(outcome_table)
{
    enum { C = EVD_PREF_OUTCOME_CONTROL, T = EVD_PREF_OUTCOME_TREATMENT, X = EVD_PREF_OUTCOME_TIE };
    static const struct {
        enum evd_pref_slot o1, o2;
        int arm1, arm2, outcome;
        bool consistent, inconsistent;
    } rows[] = {
        {EVD_PREF_SLOT_2, EVD_PREF_SLOT_1, T, T, T, true, false}, /* both name T */
        {EVD_PREF_SLOT_2, EVD_PREF_TIE, T, X, T, false, false},   /* T and tie */
        {EVD_PREF_TIE, EVD_PREF_SLOT_1, X, T, T, false, false},   /* tie and T */
        {EVD_PREF_SLOT_1, EVD_PREF_SLOT_2, C, C, C, true, false}, /* both name C */
        {EVD_PREF_SLOT_1, EVD_PREF_TIE, C, X, C, false, false},   /* C and tie */
        {EVD_PREF_TIE, EVD_PREF_SLOT_2, X, C, C, false, false},   /* tie and C */
        {EVD_PREF_TIE, EVD_PREF_TIE, X, X, X, true, false},       /* both tie */
        {EVD_PREF_SLOT_1, EVD_PREF_SLOT_1, C, T, X, false, true}, /* always slot 1 */
        {EVD_PREF_SLOT_2, EVD_PREF_SLOT_2, T, C, X, false, true}, /* always slot 2 */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct evd_pref_pair p;
        evd_pref_pair_both(rows[i].o1, rows[i].o2, &p);
        ck_assert_msg(p.judged[0] && p.judged[1] && p.both, "row %zu", i);
        ck_assert_msg(p.slot[0] == rows[i].o1 && p.slot[1] == rows[i].o2, "row %zu", i);
        ck_assert_msg((int)p.winner[0] == rows[i].arm1, "row %zu: order 1 names %d", i,
                      p.winner[0]);
        ck_assert_msg((int)p.winner[1] == rows[i].arm2, "row %zu: order 2 names %d", i,
                      p.winner[1]);
        ck_assert_msg((int)p.outcome == rows[i].outcome, "row %zu: outcome %s", i,
                      evd_pref_outcome_name(p.outcome));
        ck_assert_msg(p.consistent == rows[i].consistent, "row %zu: consistent", i);
        ck_assert_msg(p.inconsistent == rows[i].inconsistent, "row %zu: inconsistent", i);
    }
}
END_TEST

START_TEST(orders_one_alternate_by_repeat)
{
    /* odd r: control first (order 1); even r: treatment first (order 2) */
    for (uint32_t r = 1; r <= 6; r++)
        ck_assert_uint_eq(evd_pref_single_order(r), r % 2 == 1 ? 1 : 2);
    struct evd_pref_pair p;
    /* the same answer "1" names the control on odd repeats and the treatment on even ones */
    evd_pref_pair_one(1, S1, &p);
    ck_assert(p.judged[0] && !p.judged[1] && !p.both);
    ck_assert_int_eq(p.outcome, EVD_PREF_OUTCOME_CONTROL);
    ck_assert(!p.consistent && !p.inconsistent);
    evd_pref_pair_one(2, S1, &p);
    ck_assert(!p.judged[0] && p.judged[1] && !p.both);
    ck_assert_int_eq(p.winner[1], EVD_PREF_OUTCOME_TREATMENT);
    ck_assert_int_eq(p.outcome, EVD_PREF_OUTCOME_TREATMENT);
    evd_pref_pair_one(3, S2, &p);
    ck_assert_int_eq(p.outcome, EVD_PREF_OUTCOME_TREATMENT);
    evd_pref_pair_one(4, S2, &p);
    ck_assert_int_eq(p.outcome, EVD_PREF_OUTCOME_CONTROL);
    evd_pref_pair_one(5, TIE, &p);
    ck_assert_int_eq(p.outcome, EVD_PREF_OUTCOME_TIE);
    ck_assert(!p.consistent && !p.inconsistent);

    /* a summary of "one" pairs: preference figures, but every judge-quality figure null.
     * Case 0: r1 "2" T, r2 "1" T; case 1: r1 "1" C, r2 "tie" tie. p = (1, −1/2). */
    struct evd_pref_judged j[4] = {{.case_index = 0},
                                   {.case_index = 0},
                                   {.case_index = 1},
                                   {.case_index = 1, .len_control = 1, .len_treatment = 9}};
    evd_pref_pair_one(1, S2, &j[0].pair);
    evd_pref_pair_one(2, S1, &j[1].pair);
    evd_pref_pair_one(1, S1, &j[2].pair);
    evd_pref_pair_one(2, TIE, &j[3].pair);
    struct evd_pref_summary s;
    ck_assert(evd_pref_summarize(j, 4, 2, NULL, 0, &ALPHA05, &s));
    ck_assert_uint_eq(s.wins, 2);
    ck_assert_uint_eq(s.losses, 1);
    ck_assert_uint_eq(s.ties, 1);
    ck_assert_uint_eq(s.inconsistent, 0);
    ck_assert_near(s.rate, 2.5 / 4);
    ck_assert_uint_eq(s.paired_cases, 2);
    ck_assert_near(s.delta.mean, 0.25);
    ck_assert_uint_eq(s.both_pairs, 0);
    ck_assert(!s.has_consistency && !s.first_slot.has && !s.length.has);
}
END_TEST

/*
 * The spec's scripted position-biased judge: it answers "1" every time. Order 1 then names
 * the control and order 2 the treatment: every pair is inconsistent, every outcome a tie.
 * 4 cases × 2 repeats = 8 pairs; p_i = 0 for every case, so p̄ = 0 with se = 0: t_p = 1,
 * CI [0, 0], verdict inconclusive (min_effect 0: no equivalence margin).
 * rate = (0 + 8/2)/8 = 1/2; consistency 0/8 = 0; first_slot 16 of 16 answers name slot 1:
 * 1.0, and with p̂ = 1 the Wilson bounds reduce to low = n/(n + z²) = 16/(16 + 3.84146)
 * = 0.80639231946556..., high = 1 exactly.
 */
START_TEST(always_slot_one_judge)
{
    struct evd_pref_judged j[8];
    for (uint32_t k = 0; k < 8; k++) {
        j[k] = both(k / 2, S1, S1);
        j[k].len_control = 5 + k; /* lengths differ, but no outcome is decisive */
        j[k].len_treatment = 40;
    }
    struct evd_pref_summary s;
    ck_assert(evd_pref_summarize(j, 8, 4, NULL, 0, &ALPHA05, &s));
    for (int k = 0; k < 8; k++)
        ck_assert_int_eq(j[k].pair.outcome, EVD_PREF_OUTCOME_TIE);
    ck_assert_uint_eq(s.pairs, 8);
    ck_assert_uint_eq(s.wins, 0);
    ck_assert_uint_eq(s.losses, 0);
    ck_assert_uint_eq(s.ties, 8);
    ck_assert_uint_eq(s.inconsistent, 8);
    ck_assert(s.has_rate);
    ck_assert_near(s.rate, 0.5);
    ck_assert_uint_eq(s.paired_cases, 4);
    ck_assert(s.delta.has_mean && s.delta.has_var);
    ck_assert(s.delta.mean == 0 && s.delta.se == 0);
    ck_assert(s.delta.ci_low == 0 && s.delta.ci_high == 0);
    ck_assert(s.delta.t_p_value == 1 && s.delta.p_value_adjusted == 1);
    ck_assert_int_eq(s.delta.verdict, EVD_VERDICT_INCONCLUSIVE);
    ck_assert(s.has_consistency);
    ck_assert(s.consistency == 0);
    ck_assert(s.first_slot.has);
    ck_assert_uint_eq(s.first_slot.n, 16);
    ck_assert_uint_eq(s.first_slot.hits, 16);
    ck_assert(s.first_slot.fraction == 1.0);
    ck_assert_near(s.first_slot.wilson_low, 16 / (16 + Z975_SQ));
    ck_assert_near(s.first_slot.wilson_low, 0.8063923194655636);
    ck_assert(s.first_slot.wilson_high == 1.0);
    ck_assert(!s.length.has); /* no decisive outcome */
    ck_assert_uint_eq(s.length.n, 0);
}
END_TEST

/*
 * A fair judge over 5 cases × 3 repeats, orders "both" (answers order 1, order 2):
 *   case 0: (2,1) T, (2,1) T, (tie,tie) tie     w 2 l 0 t 1   p = 2/3
 *   case 1: (2,1) T, (1,2) C, (2,tie) T         w 2 l 1 t 0   p = 1/3
 *   case 2: (2,1) T, (2,1) T, (2,1) T           w 3 l 0 t 0   p = 1
 *   case 3: (1,2) C, (tie,tie) tie, (tie,1) T   w 1 l 1 t 1   p = 0
 *   case 4: (2,1) T, (1,2) C, (tie,2) C         w 1 l 2 t 0   p = −1/3
 * wins 9, losses 4, ties 2, 15 pairs, rate = (9 + 2/2)/15 = 2/3, inconsistent 0.
 * p̄ = (2/3 + 1/3 + 1 + 0 − 1/3)/5 = (5/3)/5 = 1/3.
 * Deviations 1/3, 0, 2/3, −1/3, −2/3; Σ squares = (1 + 0 + 4 + 1 + 4)/9 = 10/9.
 * s² = (10/9)/4 = 5/18; se = √(5/18)/√5 = √(1/18) = 0.23570226039551584; df = 4.
 * t = (1/3)/√(1/18) = √18/3 = √2. For df = 4 the cdf is
 *   F(t) = 1/2 + (3/8)·u·(1 − t²/(12 (1 + t²/4))),  u = t/√(1 + t²/4);
 * at t = √2: 1 + t²/4 = 3/2, u = √(4/3), 1 − 2/18 = 8/9, F − 1/2 = (3/8)(2/√3)(8/9) = 2/(3√3),
 * so t_p = 2 (1/2 − 2/(3√3)) = 1 − 4/(3√3) = 0.23019964108049895.
 * t(0.975, 4) = 2.7764451051977987 (m = 1): half width 0.654414387; CI =
 * [−0.32108105382585, 0.98774772049252]: contains 0, inconclusive.
 * With m = 2 (α' = 0.025): t(0.9875, 4) = 3.495405932516977, CI = [−0.49054174596081,
 * 1.15720841262748], p_value_adjusted = 2 t_p = 0.4603992821609979.
 * Quality: consistent pairs 3 + 2 + 3 + 2 + 2 = 12 of 15 (the three pairs where one
 * order ties are neither): 0.8. Answers naming a slot: 4 + 5 + 6 + 3 + 5 = 23, of them
 * slot 1: 2 + 2 + 3 + 2 + 2 = 11, first_slot = 11/23 = 0.47826086956521741 with Wilson
 * p̂ = 11/23, centre = (p̂ + z²/46)/(1 + z²/23), half = z/(1 + z²/23)·√(p̂(1 − p̂)/23 +
 * z²/2116): [0.29237157416646653, 0.6703726266357259]. All lengths equal: length null.
 */
static size_t fair_pairs(struct evd_pref_judged *j)
{
    static const struct {
        uint32_t c;
        enum evd_pref_slot o1, o2;
    } rows[] = {
        {0, EVD_PREF_SLOT_2, EVD_PREF_SLOT_1}, {0, EVD_PREF_SLOT_2, EVD_PREF_SLOT_1},
        {0, EVD_PREF_TIE, EVD_PREF_TIE},       {1, EVD_PREF_SLOT_2, EVD_PREF_SLOT_1},
        {1, EVD_PREF_SLOT_1, EVD_PREF_SLOT_2}, {1, EVD_PREF_SLOT_2, EVD_PREF_TIE},
        {2, EVD_PREF_SLOT_2, EVD_PREF_SLOT_1}, {2, EVD_PREF_SLOT_2, EVD_PREF_SLOT_1},
        {2, EVD_PREF_SLOT_2, EVD_PREF_SLOT_1}, {3, EVD_PREF_SLOT_1, EVD_PREF_SLOT_2},
        {3, EVD_PREF_TIE, EVD_PREF_TIE},       {3, EVD_PREF_TIE, EVD_PREF_SLOT_1},
        {4, EVD_PREF_SLOT_2, EVD_PREF_SLOT_1}, {4, EVD_PREF_SLOT_1, EVD_PREF_SLOT_2},
        {4, EVD_PREF_TIE, EVD_PREF_SLOT_2},
    };
    size_t n = sizeof(rows) / sizeof(rows[0]);
    for (size_t k = 0; k < n; k++)
        j[k] = both(rows[k].c, rows[k].o1, rows[k].o2);
    return n;
}

START_TEST(fair_judge_hand_worked)
{
    struct evd_pref_judged j[15];
    size_t n = fair_pairs(j);
    struct evd_pref_summary s;
    ck_assert(evd_pref_summarize(j, n, 5, NULL, 0, &ALPHA05, &s));
    ck_assert_uint_eq(s.pairs, 15);
    ck_assert_uint_eq(s.wins, 9);
    ck_assert_uint_eq(s.losses, 4);
    ck_assert_uint_eq(s.ties, 2);
    ck_assert_uint_eq(s.inconsistent, 0);
    ck_assert_near(s.rate, 2.0 / 3);
    ck_assert_uint_eq(s.paired_cases, 5);
    ck_assert(s.delta.has_mean && s.delta.has_var);
    ck_assert_near(s.delta.mean, 1.0 / 3);
    ck_assert_near(s.delta.se, sqrt(1.0 / 18));
    ck_assert_near(s.delta.df, 4);
    ck_assert_near(s.delta.t_p_value, 1 - 4 / (3 * sqrt(3.0)));
    ck_assert_near(s.delta.p_value_adjusted, s.delta.t_p_value);
    ck_assert_near(s.delta.ci_low, 1.0 / 3 - 2.7764451051977987 * sqrt(1.0 / 18));
    ck_assert_near(s.delta.ci_high, 1.0 / 3 + 2.7764451051977987 * sqrt(1.0 / 18));
    ck_assert_near(s.delta.ci_low, -0.3210810538258535);
    ck_assert_near(s.delta.ci_high, 0.9877477204925202);
    ck_assert_int_eq(s.delta.verdict, EVD_VERDICT_INCONCLUSIVE);
    ck_assert(s.has_consistency);
    ck_assert_uint_eq(s.both_pairs, 15);
    ck_assert_uint_eq(s.consistent_pairs, 12);
    ck_assert_near(s.consistency, 0.8);
    ck_assert(s.first_slot.has);
    ck_assert_uint_eq(s.first_slot.n, 23);
    ck_assert_uint_eq(s.first_slot.hits, 11);
    ck_assert_near(s.first_slot.fraction, 11.0 / 23);
    ck_assert_near(s.first_slot.wilson_low, 0.29237157416646653);
    ck_assert_near(s.first_slot.wilson_high, 0.6703726266357259);
    ck_assert(!s.length.has);

    /* two treatments: Bonferroni on the interval and the p value */
    struct evd_stats_params m2 = {.alpha = 0.05, .comparisons = 2, .min_effect = 0};
    ck_assert(evd_pref_summarize(j, n, 5, NULL, 0, &m2, &s));
    ck_assert_near(s.delta.ci_low, -0.490541745960814);
    ck_assert_near(s.delta.ci_high, 1.1572084126274809);
    ck_assert_near(s.delta.p_value_adjusted, 2 * (1 - 4 / (3 * sqrt(3.0))));
    /* the Wilson intervals stay at the unadjusted 1 − α */
    ck_assert_near(s.first_slot.wilson_low, 0.29237157416646653);
}
END_TEST

/*
 * The fair judge's set clustered: cases 0, 1 in cluster 0 and cases 2, 3, 4 in cluster 1.
 * Cluster sums of p_i − p̄: (1/3 + 0) = 1/3 and (2/3 − 1/3 − 2/3) = −1/3; Σ squares 2/9.
 * C = 2: se = √(2/1 · 2/9)/5 = (2/3)/5 = 2/15, df = 1, t = (1/3)/(2/15) = 5/2.
 * df = 1 is Cauchy: t_p = 1 − (2/π) atan(5/2) = 0.24223788318168682 and
 * t(0.975, 1) = tan(0.475 π) = 12.706204736174696, CI = 1/3 ∓ 12.7062·2/15 =
 * [−1.3608272981566263, 2.027493964823293]. An unused cluster (2) does not count in C.
 */
START_TEST(fair_judge_clustered)
{
    struct evd_pref_judged j[15];
    size_t n = fair_pairs(j);
    const uint32_t cluster[5] = {0, 0, 1, 1, 1};
    struct evd_pref_summary s;
    ck_assert(evd_pref_summarize(j, n, 5, cluster, 3, &ALPHA05, &s));
    ck_assert(s.moments.clustered);
    ck_assert_uint_eq(s.moments.clusters, 2);
    ck_assert_near(s.delta.mean, 1.0 / 3);
    ck_assert_near(s.delta.se, 2.0 / 15);
    ck_assert_near(s.delta.df, 1);
    ck_assert_near(s.delta.t_p_value, 1 - 2 / M_PI * atan(2.5));
    ck_assert_near(s.delta.ci_low, 1.0 / 3 - tan(0.475 * M_PI) * 2 / 15);
    ck_assert_near(s.delta.ci_high, 1.0 / 3 + tan(0.475 * M_PI) * 2 / 15);
    ck_assert_int_eq(s.delta.verdict, EVD_VERDICT_INCONCLUSIVE);

    /* one cluster only: no variance, inconclusive */
    const uint32_t one[5] = {1, 1, 1, 1, 1};
    ck_assert(evd_pref_summarize(j, n, 5, one, 2, &ALPHA05, &s));
    ck_assert(s.delta.has_mean && !s.delta.has_var);
    ck_assert_int_eq(s.delta.verdict, EVD_VERDICT_INCONCLUSIVE);
}
END_TEST

/*
 * A judge that always names the treatment, in both orders, on 4 cases × 2 repeats: every
 * p_i = 1, se = 0 and p̄ = 1: t_p = 0, CI [1, 1], better. Mirror: worse. Ties with a
 * margin: all p_i = 0 and min_effect 0.1 make CI [0, 0] inside ±0.1: equivalent.
 * Cases without a judged pair are not paired (k_i = 0), and n < 2 gives no variance.
 */
START_TEST(verdicts_and_unpaired_cases)
{
    struct evd_pref_judged j[8];
    struct evd_pref_summary s;
    for (uint32_t k = 0; k < 8; k++)
        j[k] = both(k / 2, S2, S1);
    ck_assert(evd_pref_summarize(j, 8, 6, NULL, 0, &ALPHA05, &s)); /* cases 4, 5 unjudged */
    ck_assert_uint_eq(s.paired_cases, 4);
    ck_assert(s.delta.mean == 1 && s.delta.se == 0 && s.delta.t_p_value == 0);
    ck_assert(s.delta.ci_low == 1 && s.delta.ci_high == 1);
    ck_assert_int_eq(s.delta.verdict, EVD_VERDICT_BETTER);
    ck_assert_near(s.rate, 1);

    for (uint32_t k = 0; k < 8; k++)
        j[k] = both(k / 2, S1, S2);
    ck_assert(evd_pref_summarize(j, 8, 4, NULL, 0, &ALPHA05, &s));
    ck_assert(s.delta.mean == -1);
    ck_assert_int_eq(s.delta.verdict, EVD_VERDICT_WORSE);
    ck_assert_near(s.rate, 0);

    for (uint32_t k = 0; k < 8; k++)
        j[k] = both(k / 2, TIE, TIE);
    struct evd_stats_params margin = {.alpha = 0.05, .comparisons = 1, .min_effect = 0.1};
    ck_assert(evd_pref_summarize(j, 8, 4, NULL, 0, &margin, &s));
    ck_assert_int_eq(s.delta.verdict, EVD_VERDICT_EQUIVALENT);
    ck_assert_near(s.consistency, 1);
    ck_assert(!s.first_slot.has); /* no answer named a slot */
    ck_assert_uint_eq(s.first_slot.n, 0);

    ck_assert(evd_pref_summarize(j, 2, 4, NULL, 0, &ALPHA05, &s)); /* one case judged */
    ck_assert_uint_eq(s.paired_cases, 1);
    ck_assert(s.delta.has_mean && !s.delta.has_var);
    ck_assert_int_eq(s.delta.verdict, EVD_VERDICT_INCONCLUSIVE);

    ck_assert(evd_pref_summarize(NULL, 0, 4, NULL, 0, &ALPHA05, &s)); /* nothing judged */
    ck_assert(!s.has_rate && !s.delta.has_mean && !s.has_consistency);
    ck_assert(!s.first_slot.has && !s.length.has);
    ck_assert_uint_eq(s.pairs, 0);
    ck_assert(evd_pref_summarize(NULL, 0, 0, NULL, 0, &ALPHA05, &s)); /* no case at all */
    ck_assert_uint_eq(s.paired_cases, 0);
}
END_TEST

/*
 * One order names an arm, the other ties: the outcome is that arm, and the pair is neither
 * consistent nor inconsistent, so consistency ≠ 1 − inconsistent/pairs. Four pairs:
 * (2,tie) T, (tie,2) C, (1,1) inconsistent, (2,1) consistent T: consistency 1/4, while
 * 1 − inconsistent/pairs would be 3/4.
 */
START_TEST(consistency_subtlety)
{
    struct evd_pref_pair p;
    evd_pref_pair_both(S2, TIE, &p);
    ck_assert_int_eq(p.outcome, EVD_PREF_OUTCOME_TREATMENT);
    ck_assert(p.both && !p.consistent && !p.inconsistent);
    evd_pref_pair_both(TIE, S2, &p);
    ck_assert_int_eq(p.outcome, EVD_PREF_OUTCOME_CONTROL);
    ck_assert(p.both && !p.consistent && !p.inconsistent);

    struct evd_pref_judged j[4] = {both(0, S2, TIE), both(0, TIE, S2), both(1, S1, S1),
                                   both(1, S2, S1)};
    struct evd_pref_summary s;
    ck_assert(evd_pref_summarize(j, 4, 2, NULL, 0, &ALPHA05, &s));
    ck_assert_uint_eq(s.both_pairs, 4);
    ck_assert_uint_eq(s.consistent_pairs, 1);
    ck_assert_uint_eq(s.inconsistent, 1);
    ck_assert_near(s.consistency, 0.25);
    ck_assert(fabs(s.consistency - (1 - 1.0 / 4)) > 0.4);
    /* case 0: one T, one C: p = 0; case 1: one tie, one T: p = 1/2 */
    ck_assert_uint_eq(s.wins, 2);
    ck_assert_uint_eq(s.losses, 1);
    ck_assert_uint_eq(s.ties, 1);
    ck_assert_near(s.delta.mean, 0.25);
    /* answers naming a slot: 2, 2, 1, 1, 1, 2 → 6 named, 3 slot 1 */
    ck_assert_uint_eq(s.first_slot.n, 6);
    ck_assert_uint_eq(s.first_slot.hits, 3);
}
END_TEST

/*
 * The length bias, on pairs of one case (lengths in code points):
 *   A (2,1) T   control 10, treatment 20   the longer wins            counted, hit
 *   B (1,2) C   30, 5                      the longer wins            counted, hit
 *   C (2,1) T   50, 7                      the shorter wins           counted, miss
 *   D (2,1) T   12, 12                     equal lengths              left out
 *   E (tie,tie) 3, 90                      a tie                      left out
 *   F (1,1)     1, 2                       inconsistent: a tie        left out
 *   G orders one, r = 1, "2": T, 1, 100    not judged in both orders  left out
 *   H (1,tie) C 8, 4                       decisive though not consistent   counted, hit
 *   I (2,1) T   "ééé" (3 code points, 6 bytes) vs "abcd" (4 code points, 4 bytes):
 *               the treatment is longer in characters though shorter in bytes: hit
 * n = 5, hits = 4: fraction 0.8, Wilson at 1 − 0.05: p̂ = 4/5, centre = (p̂ + z²/10)/(1 + z²/5),
 * half = z/(1 + z²/5)·√(p̂(1 − p̂)/5 + z²/100): [0.3755346297625253, 0.9637758913675698].
 */
START_TEST(length_bias)
{
    static const char ctl[] = "\xC3\xA9\xC3\xA9\xC3\xA9", trt[] = "abcd";
    struct evd_pref_judged j[9] = {both(0, S2, S1),   both(0, S1, S2),   both(0, S2, S1),
                                   both(0, S2, S1),   both(0, TIE, TIE), both(0, S1, S1),
                                   {.case_index = 0}, both(0, S1, TIE),  both(0, S2, S1)};
    static const uint64_t len[9][2] = {{10, 20}, {30, 5},  {50, 7}, {12, 12}, {3, 90},
                                       {1, 2},   {1, 100}, {8, 4},  {0, 0}};
    for (int k = 0; k < 9; k++) {
        j[k].len_control = len[k][0];
        j[k].len_treatment = len[k][1];
    }
    evd_pref_pair_one(1, S2, &j[6].pair);
    j[8].len_control = evd_pref_codepoints(ctl, strlen(ctl));
    j[8].len_treatment = evd_pref_codepoints(trt, strlen(trt));
    ck_assert_uint_eq(j[8].len_control, 3);
    ck_assert_uint_eq(strlen(ctl), 6);
    struct evd_pref_summary s;
    ck_assert(evd_pref_summarize(j, 9, 1, NULL, 0, &ALPHA05, &s));
    ck_assert(s.length.has);
    ck_assert_uint_eq(s.length.n, 5);
    ck_assert_uint_eq(s.length.hits, 4);
    ck_assert_near(s.length.fraction, 0.8);
    ck_assert_near(s.length.wilson_low, 0.3755346297625253);
    ck_assert_near(s.length.wilson_high, 0.9637758913675698);
    /* the same interval from its formula */
    double ph = 0.8, den = 1 + Z975_SQ / 5;
    double centre = (ph + Z975_SQ / 10) / den;
    double half = Z975 / den * sqrt(ph * (1 - ph) / 5 + Z975_SQ / 100);
    ck_assert_near(s.length.wilson_low, centre - half);
    ck_assert_near(s.length.wilson_high, centre + half);
    ck_assert_uint_eq(s.both_pairs, 8); /* G is not */
}
END_TEST

/* Code points: ASCII, 2-, 3- and 4-byte sequences, NUL, and maximal ill-formed subparts. */
START_TEST(codepoints)
{
    static const struct {
        const char *bytes;
        size_t len, count;
    } rows[] = {
        {"", 0, 0},
        {"abc", 3, 3},
        {"a\0b", 3, 3},             /* NUL is U+0000 */
        {"\xC3\xA9", 2, 1},         /* é */
        {"\xE2\x82\xAC", 3, 1},     /* € */
        {"\xF0\x9F\x98\x80", 4, 1}, /* 😀 */
        {"a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z", 11, 5},
        {"\xEF\xBF\xBF", 3, 1},     /* U+FFFF */
        {"\xF4\x8F\xBF\xBF", 4, 1}, /* U+10FFFF */
        {"\xED\x9F\xBF", 3, 1},     /* U+D7FF, below the surrogates */
        {"\x80", 1, 1},             /* a lone continuation byte */
        {"\xBF\x80", 2, 2},         /* two of them */
        {"\xC0\x80", 2, 2},         /* overlong NUL: C0 is never a lead */
        {"\xC1\xBF", 2, 2},
        {"\xE0\x80\x80", 3, 3},     /* overlong: E0 needs A0..BF next */
        {"\xF0\x80\x80\x80", 4, 4}, /* overlong: F0 needs 90..BF next */
        {"\xED\xA0\x80", 3, 3},     /* a surrogate: ED needs 80..9F next */
        {"\xF4\x90\x80\x80", 4, 4}, /* beyond U+10FFFF */
        {"\xF5\x80", 2, 2},
        {"\xFF\xFE", 2, 2},
        {"\xC3", 1, 1},     /* truncated at the end */
        {"\xE2\x82", 2, 1}, /* one maximal subpart */
        {"\xE2\x82"
         "a",
         3, 2},
        {"\xF0\x9F\x98"
         "x",
         4, 2},
        {"\xF0\x9F\x98\xC3\xA9", 5, 2}, /* a subpart, then é */
        {"\xC3"
         "\xC3\xA9",
         3, 2}, /* a lead interrupted by another lead */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        ck_assert_msg(evd_pref_codepoints(rows[i].bytes, rows[i].len) == rows[i].count,
                      "row %zu: %zu code points, expected %zu", i,
                      evd_pref_codepoints(rows[i].bytes, rows[i].len), rows[i].count);
}
END_TEST

/* p_i, and the case counts a pair adds to. */
START_TEST(case_preference)
{
    struct evd_pref_case c = {0};
    double p = 7;
    ck_assert(!evd_pref_case_p(&c, &p));
    ck_assert(p == 7);
    struct evd_pref_pair t, l, x;
    evd_pref_pair_both(S2, S1, &t);
    evd_pref_pair_both(S1, S2, &l);
    evd_pref_pair_both(TIE, TIE, &x);
    evd_pref_case_add(&c, &l);
    ck_assert(evd_pref_case_p(&c, &p) && p == -1);
    evd_pref_case_add(&c, &t);
    ck_assert(evd_pref_case_p(&c, &p) && p == 0);
    evd_pref_case_add(&c, &t);
    evd_pref_case_add(&c, &x);
    ck_assert(c.wins == 2 && c.losses == 1 && c.ties == 1);
    ck_assert(evd_pref_case_p(&c, &p) && p == 0.25);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_preference");
    TCase *tc = tcase_create("preference");
    tcase_add_test(tc, parse_answers);
    tcase_add_test(tc, order_winners);
    tcase_add_test(tc, outcome_table);
    tcase_add_test(tc, orders_one_alternate_by_repeat);
    tcase_add_test(tc, always_slot_one_judge);
    tcase_add_test(tc, fair_judge_hand_worked);
    tcase_add_test(tc, fair_judge_clustered);
    tcase_add_test(tc, verdicts_and_unpaired_cases);
    tcase_add_test(tc, consistency_subtlety);
    tcase_add_test(tc, length_bias);
    tcase_add_test(tc, codepoints);
    tcase_add_test(tc, case_preference);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
