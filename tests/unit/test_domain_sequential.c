/*
 * Unit tests for domain/sequential.h: the confidence sequence worked by hand for its first
 * three cases and in closed form for a constant sequence, the λ of a late step against its
 * formula, the verdict rules (min_cases, the equivalence margin, terminal, finality), the
 * dispatch permutation, the default seed, the planned number of cases, and the spec's
 * simulation: the error rate of null experiments checked after every case, and the stopping
 * time under a true effect. Agreement with an independent implementation over random
 * sequences is tests/stats/check_sequential.py.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/sequential.h"
#include "domain/stats.h"
#include "tests/support/testutil.h"

#define TOL 1e-12

#define ck_assert_near(a, b)                                                                       \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        ck_assert_msg(fabs(a_ - b_) <= TOL, "%s = %.17g, expected %.17g", #a, a_, b_);             \
    } while (0)

/* A small deterministic generator (xorshift64*), so that every run draws the same data. */
struct rng {
    uint64_t s;
};

static double rng_unit(struct rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return (double)((r->s * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* The pass rate of one arm on one case: passes of `repeats` runs, each with probability p. */
static double pass_rate(struct rng *r, double p, int repeats)
{
    int k = 0;
    for (int j = 0; j < repeats; j++)
        k += rng_unit(r) < p;
    return (double)k / repeats;
}

START_TEST(hand_worked_first_cases)
{
    /*
     * α'' = 0.05, ln(2/α'') = ln 40 = 3.6888794541139363; d = (1, 0, −1), so x = (1, 1/2, 0).
     * ψ(1/2) = (ln 2 − 1/2)/4 = 0.04828679513998632.
     * n = 1: μ̂_0 = 1/2, σ̂²_0 = 1/4; λ_1 = min(√(2 ln 40 / (1/4 · 1 · ln 2)), 1/2)
     *        = min(√42.57..., 1/2) = 1/2; v_1 = 4 (1 − 1/2)² = 1;
     *        centre_1 = (1/2 · 1)/(1/2) = 1; radius_1 = (ln 40 + 1 · ψ)/(1/2) = 7.474332498507845;
     *        L = max(0, 1 − 7.47) = 0, U = min(1, 1 + 7.47) = 1: low = −1, high = 1.
     *        Then μ̂_1 = (1/2 + 1)/2 = 3/4, (x_1 − μ̂_1)² = 1/16, σ̂²_1 = (1/4 + 1/16)/2 = 5/32.
     * n = 2: λ_2 = min(√(2 ln 40 / (5/32 · 2 · ln 3)), 1/2) = min(√21.49..., 1/2) = 1/2;
     *        v_2 = 4 (1/2 − 3/4)² = 1/4; Σλ = 1, Σλx = 1/2 + 1/4 = 3/4: centre_2 = 3/4;
     *        radius_2 = (ln 40 + (1 + 1/4) ψ)/1 = 3.7492379480389193; low = −1, high = 1.
     *        μ̂_2 = (1/2 + 3/2)/3 = 2/3, (x_2 − μ̂_2)² = 1/36,
     *        σ̂²_2 = (1/4 + 1/16 + 1/36)/3 = (49/144)/3 = 49/432.
     * n = 3: λ_3 = min(√(2 ln 40 / (49/432 · 3 · ln 4)), 1/2) = min(√15.64..., 1/2) = 1/2;
     *        v_3 = 4 (0 − 2/3)² = 16/9; Σλ = 3/2, Σλx = 3/4: centre_3 = 1/2;
     *        radius_3 = (ln 40 + (1 + 1/4 + 16/9) ψ)/(3/2) = (2/3)(ln 40 + (109/36) ψ)
     *                 = 2.556720759599263; low = −1, high = 1.
     *        μ̂_3 = (1/2 + 3/2)/4 = 1/2, (x_3 − μ̂_3)² = 1/4,
     *        σ̂²_3 = (1/4 + 1/16 + 1/36 + 1/4)/4 = (85/144)/4 = 85/576.
     */
    const double ln40 = log(40.0), psi = (log(2.0) - 0.5) / 4;
    struct evd_seq_cs cs;
    evd_seq_cs_init(&cs, 0.05, 1, 0);
    ck_assert_near(evd_seq_cs_low(&cs), -1);
    ck_assert_near(evd_seq_cs_high(&cs), 1);
    ck_assert_near(cs.mu, 0.5);
    ck_assert_near(cs.var, 0.25);

    evd_seq_cs_add(&cs, 1);
    ck_assert_near(cs.centre, 1);
    ck_assert_near(cs.radius, 2 * (ln40 + psi));
    ck_assert_near(cs.radius, 7.474332498507845);
    ck_assert_near(cs.mu, 0.75);
    ck_assert_near(cs.var, 5.0 / 32);
    ck_assert_near(evd_seq_cs_low(&cs), -1);
    ck_assert_near(evd_seq_cs_high(&cs), 1);

    evd_seq_cs_add(&cs, 0);
    ck_assert_near(cs.centre, 0.75);
    ck_assert_near(cs.radius, ln40 + 1.25 * psi);
    ck_assert_near(cs.radius, 3.7492379480389193);
    ck_assert_near(cs.mu, 2.0 / 3);
    ck_assert_near(cs.var, 49.0 / 432);

    evd_seq_cs_add(&cs, -1);
    ck_assert_near(cs.centre, 0.5);
    ck_assert_near(cs.radius, 2.0 / 3 * (ln40 + 109.0 / 36 * psi));
    ck_assert_near(cs.radius, 2.556720759599263);
    ck_assert_near(cs.mu, 0.5);
    ck_assert_near(cs.var, 85.0 / 576);
    ck_assert_near(evd_seq_cs_low(&cs), -1);
    ck_assert_near(evd_seq_cs_high(&cs), 1);
    ck_assert_uint_eq(cs.n, 3);
    ck_assert_int_eq(evd_seq_cs_verdict(&cs, false), EVD_SEQ_CONTINUE);
}
END_TEST

START_TEST(constant_zero_closed_form)
{
    /*
     * Every d = 0: x = 1/2 = μ̂ at every step, so v = 0 and σ̂²_{i−1} · i = 1/4, which keeps
     * λ_i = min(√(8 ln(2/α'') / ln(i + 1)), 1/2) = 1/2. Then centre = 1/2 and
     * radius_n = ln(2/α'') / (n/2): low = max(−1, −4 ln(2/α'')/n), high = −low.
     */
    const double alphas[] = {0.05, 0.01, 0.2};
    for (size_t a = 0; a < sizeof(alphas) / sizeof(alphas[0]); a++) {
        struct evd_seq_cs cs;
        evd_seq_cs_init(&cs, alphas[a], 1, 0);
        double k = 4 * log(2 / alphas[a]);
        for (int n = 1; n <= 400; n++) {
            evd_seq_cs_add(&cs, 0);
            double want = fmax(-1.0, -k / n);
            ck_assert_near(evd_seq_cs_low(&cs), want);
            ck_assert_near(evd_seq_cs_high(&cs), -want);
            ck_assert_near(cs.centre, 0.5);
        }
    }
}
END_TEST

START_TEST(lambda_of_a_late_step)
{
    /*
     * After 60 cases alternating d = +1, −1, σ̂² is near 1/4 and i ln(i + 1) is large enough
     * for λ to fall below 1/2: each step's increments of Σλ and Σ v ψ(λ) are the formula's.
     */
    struct evd_seq_cs cs;
    evd_seq_cs_init(&cs, 0.05, 1, 0);
    int below_half = 0;
    for (int n = 1; n <= 200; n++) {
        double d = n % 2 ? 1.0 : -1.0, x = (d + 1) / 2;
        double var = cs.var, mu = cs.mu, i = n;
        double sl = evd_stats_sum_value(&cs.sum_lambda), svp = evd_stats_sum_value(&cs.sum_vpsi);
        double lambda = fmin(sqrt(2 * log(40.0) / (var * i * log(i + 1))), 0.5);
        double psi = (-log(1 - lambda) - lambda) / 4;
        evd_seq_cs_add(&cs, d);
        ck_assert_near(evd_stats_sum_value(&cs.sum_lambda) - sl, lambda);
        ck_assert_near(evd_stats_sum_value(&cs.sum_vpsi) - svp, 4 * (x - mu) * (x - mu) * psi);
        below_half += lambda < 0.5;
    }
    ck_assert_int_gt(below_half, 100);
}
END_TEST

START_TEST(verdict_names)
{
    ck_assert_str_eq(evd_seq_verdict_name(EVD_SEQ_CONTINUE), "continue");
    ck_assert_str_eq(evd_seq_verdict_name(EVD_SEQ_BETTER), "better");
    ck_assert_str_eq(evd_seq_verdict_name(EVD_SEQ_WORSE), "worse");
    ck_assert_str_eq(evd_seq_verdict_name(EVD_SEQ_EQUIVALENT), "equivalent");
    ck_assert_str_eq(evd_seq_verdict_name(EVD_SEQ_INCONCLUSIVE), "inconclusive");
}
END_TEST

START_TEST(verdict_rules)
{
    static const struct {
        double low, high, min_effect;
        enum evd_seq_verdict want;
    } rows[] = {
        {0.01, 0.5, 0, EVD_SEQ_BETTER},
        {0.01, 0.05, 0.1, EVD_SEQ_BETTER}, /* better comes first */
        {0.0, 0.5, 0, EVD_SEQ_CONTINUE},   /* strict */
        {-0.5, -0.01, 0, EVD_SEQ_WORSE},
        {-0.5, 0.0, 0, EVD_SEQ_CONTINUE},
        {-0.05, 0.05, 0.1, EVD_SEQ_EQUIVALENT},
        {-0.1, 0.05, 0.1, EVD_SEQ_CONTINUE}, /* strict on both sides */
        {-0.05, 0.1, 0.1, EVD_SEQ_CONTINUE},
        {-0.05, 0.05, 0, EVD_SEQ_CONTINUE}, /* no margin, no equivalence */
        {-1, 1, 0.5, EVD_SEQ_CONTINUE},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        ck_assert_msg(evd_seq_decide(rows[i].low, rows[i].high, rows[i].min_effect) == rows[i].want,
                      "row %zu", i);
}
END_TEST

START_TEST(equivalence_and_min_cases)
{
    /* all d = 0 at α'' = 0.05, δ = 0.2: high = 4 ln 40 / n < 0.2 first at n = 74 */
    struct evd_seq_cs cs;
    evd_seq_cs_init(&cs, 0.05, 10, 0.2);
    for (int n = 1; n <= 73; n++) {
        evd_seq_cs_add(&cs, 0);
        ck_assert_int_eq(evd_seq_cs_verdict(&cs, false), EVD_SEQ_CONTINUE);
        ck_assert_int_eq(evd_seq_cs_verdict(&cs, true), EVD_SEQ_INCONCLUSIVE);
    }
    ck_assert_uint_eq(cs.decided_at, 0);
    evd_seq_cs_add(&cs, 0);
    ck_assert_uint_eq(cs.decided_at, 74);
    ck_assert_int_eq(evd_seq_cs_verdict(&cs, false), EVD_SEQ_EQUIVALENT);
    ck_assert_int_eq(evd_seq_cs_verdict(&cs, true), EVD_SEQ_EQUIVALENT);

    /* the same data with min_cases 100: undecided until n = 100, then decided there */
    evd_seq_cs_init(&cs, 0.05, 100, 0.2);
    for (int n = 1; n <= 99; n++)
        evd_seq_cs_add(&cs, 0);
    ck_assert(evd_seq_decide(evd_seq_cs_low(&cs), evd_seq_cs_high(&cs), 0.2) == EVD_SEQ_EQUIVALENT);
    ck_assert_int_eq(evd_seq_cs_verdict(&cs, false), EVD_SEQ_CONTINUE);
    ck_assert_int_eq(evd_seq_cs_verdict(&cs, true), EVD_SEQ_INCONCLUSIVE);
    evd_seq_cs_add(&cs, 0);
    ck_assert_uint_eq(cs.decided_at, 100);
    ck_assert_int_eq(evd_seq_cs_verdict(&cs, false), EVD_SEQ_EQUIVALENT);

    /* without a margin the same data never decide */
    evd_seq_cs_init(&cs, 0.05, 10, 0);
    for (int n = 1; n <= 1000; n++)
        evd_seq_cs_add(&cs, 0);
    ck_assert_uint_eq(cs.decided_at, 0);
    ck_assert_int_eq(evd_seq_cs_verdict(&cs, true), EVD_SEQ_INCONCLUSIVE);
}
END_TEST

START_TEST(better_worse_decided_at)
{
    /* constant d = +1 (and −1 by symmetry): decided_at is the first n >= min_cases with
     * low > 0 (high < 0), and the verdict is better (worse) */
    for (int sign = -1; sign <= 1; sign += 2) {
        for (uint64_t min_cases = 2; min_cases <= 40; min_cases += 19) {
            struct evd_seq_cs cs;
            evd_seq_cs_init(&cs, 0.05, min_cases, 0);
            uint64_t first = 0;
            for (uint64_t n = 1; n <= 200; n++) {
                evd_seq_cs_add(&cs, sign);
                double edge = sign > 0 ? evd_seq_cs_low(&cs) : -evd_seq_cs_high(&cs);
                if (first == 0 && n >= min_cases && edge > 0)
                    first = n;
                ck_assert_uint_eq(cs.decided_at, first);
            }
            ck_assert_uint_gt(first, 0);
            ck_assert_int_eq(evd_seq_cs_verdict(&cs, true),
                             sign > 0 ? EVD_SEQ_BETTER : EVD_SEQ_WORSE);
        }
    }
}
END_TEST

START_TEST(decided_is_final)
{
    /* better, then a long run of contrary data: L never falls, the verdict stays */
    struct evd_seq_cs cs;
    evd_seq_cs_init(&cs, 0.05, 10, 0);
    while (cs.decided_at == 0)
        evd_seq_cs_add(&cs, 1);
    uint64_t at = cs.decided_at;
    double low = evd_seq_cs_low(&cs);
    for (int n = 0; n < 3000; n++) {
        evd_seq_cs_add(&cs, -1);
        ck_assert(evd_seq_cs_low(&cs) >= low);
        low = evd_seq_cs_low(&cs);
        ck_assert_int_eq(evd_seq_cs_verdict(&cs, false), EVD_SEQ_BETTER);
    }
    ck_assert_uint_eq(cs.decided_at, at);

    /* equivalent at 74 (as above), then only d = +1: the bounds come to exclude 0 as well,
     * and the verdict stays the first one */
    evd_seq_cs_init(&cs, 0.05, 10, 0.2);
    for (int n = 0; n < 80; n++)
        evd_seq_cs_add(&cs, 0);
    ck_assert_uint_eq(cs.decided_at, 74);
    for (int n = 0; n < 3000; n++)
        evd_seq_cs_add(&cs, 1);
    ck_assert(evd_seq_decide(evd_seq_cs_low(&cs), evd_seq_cs_high(&cs), 0.2) == EVD_SEQ_BETTER);
    ck_assert_int_eq(evd_seq_cs_verdict(&cs, true), EVD_SEQ_EQUIVALENT);
    ck_assert_uint_eq(cs.decided_at, 74);
}
END_TEST

START_TEST(bounds_only_tighten)
{
    struct rng r = {0x2545F4914F6CDD1Dull};
    for (int e = 0; e < 50; e++) {
        struct evd_seq_cs cs;
        evd_seq_cs_init(&cs, 0.001 + 0.2 * rng_unit(&r), 1, 0);
        double low = -1, high = 1;
        for (int n = 0; n < 300; n++) {
            evd_seq_cs_add(&cs, pass_rate(&r, 0.6, 3) - pass_rate(&r, 0.5, 3));
            ck_assert(evd_seq_cs_low(&cs) >= low && evd_seq_cs_high(&cs) <= high);
            ck_assert(evd_seq_cs_low(&cs) >= -1 && evd_seq_cs_high(&cs) <= 1);
            low = evd_seq_cs_low(&cs);
            high = evd_seq_cs_high(&cs);
        }
    }
}
END_TEST

START_TEST(permutation_is_a_permutation)
{
    static uint32_t out[5000], again[5000], other[5000];
    static unsigned char seen[5001];
    const uint64_t seeds[] = {0, 1, 42, 4503599627370495ull, UINT64_MAX};
    const uint32_t sizes[] = {0, 1, 2, 3, 10, 1000, 5000};
    for (size_t s = 0; s < sizeof(seeds) / sizeof(seeds[0]); s++) {
        for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
            uint32_t n = sizes[z];
            evd_seq_permutation(seeds[s], n, out);
            memset(seen, 0, sizeof(seen));
            for (uint32_t k = 0; k < n; k++) {
                ck_assert(out[k] >= 1 && out[k] <= n);
                ck_assert(!seen[out[k]]);
                seen[out[k]] = 1;
            }
            evd_seq_permutation(seeds[s], n, again);
            ck_assert(n == 0 || memcmp(out, again, n * sizeof(out[0])) == 0);
        }
    }
    /* different seeds, different orders */
    evd_seq_permutation(1, 1000, out);
    evd_seq_permutation(2, 1000, other);
    ck_assert(memcmp(out, other, sizeof(out[0]) * 1000) != 0);
    /* worked by hand from the header's algorithm: seed 0 draws 0xE220A8397B1DCDAF (mod 3 = 1,
     * none rejected since 2^64 mod 3 = 1) and 0x6E789E6AA1B965F4 (mod 2 = 0): [1,2,3] → swap
     * positions 2 and 1 → [1,3,2] → swap 1 and 0 → [3,1,2] */
    evd_seq_permutation(0, 3, out);
    ck_assert_uint_eq(out[0], 3);
    ck_assert_uint_eq(out[1], 1);
    ck_assert_uint_eq(out[2], 2);
}
END_TEST

START_TEST(permutation_is_uniform)
{
    /* the 6 orders of 3 cases over 60,000 seeds: each within 4 % of 10,000 (about 10
     * standard deviations of a multinomial count) */
    int count[9] = {0}; /* indexed by (out[0] − 1) · 3 + out[1] − 1: six of them occur */
    for (uint64_t seed = 0; seed < 60000; seed++) {
        uint32_t out[3];
        evd_seq_permutation(seed * 7919 + 3, 3, out);
        count[(out[0] - 1) * 3 + out[1] - 1]++;
    }
    for (int i = 0; i < 9; i++) {
        if (i % 4 == 0) /* out[0] = out[1]: never */
            ck_assert_int_eq(count[i], 0);
        else
            ck_assert_msg(abs(count[i] - 10000) < 400, "order %d drawn %d times", i, count[i]);
    }
    /* the position of the first dispatched case among 10 is uniform too */
    int pos[10] = {0};
    for (uint64_t seed = 0; seed < 100000; seed++) {
        uint32_t out[10];
        evd_seq_permutation(seed, 10, out);
        for (int k = 0; k < 10; k++)
            pos[k] += out[k] == 1;
    }
    for (int k = 0; k < 10; k++)
        ck_assert_msg(abs(pos[k] - 10000) < 500, "position %d first %d times", k, pos[k]);
}
END_TEST

START_TEST(default_seed)
{
    /* the first 13 hex digits after exp_: 0x0123456789abc */
    ck_assert_uint_eq(evd_seq_default_seed("exp_0123456789abcdef0123456789abcdef"),
                      0x0123456789abcull);
    ck_assert_uint_eq(evd_seq_default_seed("exp_0123456789ABCdef0123456789abcdef"),
                      20015998343868ull);
    ck_assert_uint_eq(evd_seq_default_seed("exp_ffffffffffffffffffffffffffffffff"),
                      (1ull << 52) - 1);
    ck_assert_uint_eq(evd_seq_default_seed("exp_0000000000000"), 0);
    /* any other id: FNV-1a 64 of its bytes, shifted right by 12 */
    ck_assert_uint_eq(evd_seq_default_seed("exp_hooks_1"), 2069193248764854ull);
    ck_assert_uint_eq(evd_seq_default_seed(""), 0xCBF29CE484222325ull >> 12);
    ck_assert_uint_eq(evd_seq_default_seed(NULL), 0);
    /* always below 2^53 − 1, and stable */
    const char *ids[] = {"exp_012345678901", "exp_", "x", "exp_zzzzzzzzzzzzzzzz", "EXP_0123"};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        ck_assert_uint_lt(evd_seq_default_seed(ids[i]), 1ull << 52);
        ck_assert_uint_eq(evd_seq_default_seed(ids[i]), evd_seq_default_seed(ids[i]));
    }
}
END_TEST

START_TEST(cases_needed)
{
    /* z_0.975 = 1.959963984540054, z_0.8 = 0.8416212335729143:
     * effect 0.1, sd 0.5, α'' 0.05: ((2.8015852181129683) · 5)² = 196.222 → 197;
     * effect 0.2, sd 0.4, α'' 0.025: z_0.9875 = 2.241402727604947,
     * ((3.0830239611778613) · 2)² = 38.020 → 39; effect = sd: 2.80158...² = 7.849 → 8 */
    double c = -1;
    ck_assert(evd_seq_cases_needed(0.1, 0.5, 0.05, &c));
    ck_assert_double_eq(c, 197);
    ck_assert(evd_seq_cases_needed(0.2, 0.4, 0.025, &c));
    ck_assert_double_eq(c, 39);
    ck_assert(evd_seq_cases_needed(0.3, 0.3, 0.05, &c));
    ck_assert_double_eq(c, 8);
    ck_assert(evd_seq_cases_needed(1e-9, 1, 0.05, &c));
    ck_assert_double_eq(c, 9007199254740992.0); /* saturated at 2^53 */
    /* refusals leave the output alone */
    c = -1;
    const double bad[][3] = {{0, 0.5, 0.05},        {-0.1, 0.5, 0.05},     {0.1, 0, 0.05},
                             {0.1, -1, 0.05},       {NAN, 0.5, 0.05},      {0.1, NAN, 0.05},
                             {INFINITY, 0.5, 0.05}, {0.1, INFINITY, 0.05}, {0.1, 0.5, 0},
                             {0.1, 0.5, 1},         {0.1, 0.5, NAN}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(!evd_seq_cases_needed(bad[i][0], bad[i][1], bad[i][2], &c), "row %zu", i);
    ck_assert_double_eq(c, -1);
}
END_TEST

/* The distributions of d the simulation draws from. */
enum draw {
    DRAW_BINOMIAL_NULL, /* repeats 3 at p = 0.5 in both arms */
    DRAW_UNIFORM_NULL,  /* continuous uniform on [−1, 1] */
    DRAW_SIGN_NULL,     /* −1 or +1, each with probability 1/2 */
    DRAW_EFFECT,        /* repeats 3 at p = 0.5 (control) and 0.7 (treatment): E d = 0.2 */
};

static double draw_d(struct rng *r, enum draw kind)
{
    switch (kind) {
    case DRAW_BINOMIAL_NULL:
        return pass_rate(r, 0.5, 3) - pass_rate(r, 0.5, 3);
    case DRAW_UNIFORM_NULL:
        return 2 * rng_unit(r) - 1;
    case DRAW_SIGN_NULL:
        return rng_unit(r) < 0.5 ? -1.0 : 1.0;
    case DRAW_EFFECT:
        break;
    }
    return pass_rate(r, 0.7, 3) - pass_rate(r, 0.5, 3);
}

/*
 * `experiments` sequences of up to `cases` cases at α = 0.05, m = 1, min_cases 10, checked
 * after every case and stopped when decided. Counts the verdicts; stops[] receives each
 * decided experiment's decided_at.
 */
static void simulate(enum draw kind, int experiments, int cases, uint64_t seed, int counts[5],
                     double *stops)
{
    struct rng r = {seed};
    for (int e = 0; e < experiments; e++) {
        struct evd_seq_cs cs;
        evd_seq_cs_init(&cs, 0.05, 10, 0);
        for (int n = 0; n < cases && cs.decided_at == 0; n++)
            evd_seq_cs_add(&cs, draw_d(&r, kind));
        counts[evd_seq_cs_verdict(&cs, true)]++;
        if (stops != NULL)
            stops[e] = cs.decided_at > 0 ? (double)cs.decided_at : INFINITY;
    }
}

START_TEST(simulation_null_error_rate)
{
    static const struct {
        enum draw kind;
        const char *name;
        uint64_t seed;
    } nulls[] = {
        {DRAW_BINOMIAL_NULL, "binomial repeats 3, p 0.5 both arms", 0x9E3779B97F4A7C15ull},
        {DRAW_UNIFORM_NULL, "uniform on [-1, 1]", 0xD1B54A32D192ED03ull},
        {DRAW_SIGN_NULL, "-1 or +1", 0x8CB92BA72F3D8DD7ull},
    };
    for (size_t i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++) {
        int counts[5] = {0};
        simulate(nulls[i].kind, 1000, 1000, nulls[i].seed, counts, NULL);
        int decided = counts[EVD_SEQ_BETTER] + counts[EVD_SEQ_WORSE];
        printf("sequential null (%s): 1000 experiments x 1000 cases, checked after every case "
               "from n = 10, alpha 0.05: decided %d (%.3f; better %d, worse %d)\n",
               nulls[i].name, decided, decided / 1000.0, counts[EVD_SEQ_BETTER],
               counts[EVD_SEQ_WORSE]);
        ck_assert_int_eq(counts[EVD_SEQ_EQUIVALENT], 0);
        ck_assert_int_le(decided, 50);
    }
}
END_TEST

START_TEST(simulation_effect_stops_early)
{
    enum { EXPERIMENTS = 1000 };
    static double stops[EXPERIMENTS];
    int counts[5] = {0};
    simulate(DRAW_EFFECT, EXPERIMENTS, 1000, 0x5851F42D4C957F2Dull, counts, stops);
    double median = NAN, q90 = NAN;
    ck_assert(evd_stats_median(stops, EXPERIMENTS, &median)); /* sorts stops */
    q90 = stops[EXPERIMENTS * 9 / 10];
    printf("sequential effect +0.2 (p 0.5 -> 0.7, repeats 3): %d experiments, better %d, "
           "median stop %.1f cases (min %.0f, 90th percentile %.0f, max %.0f)\n",
           EXPERIMENTS, counts[EVD_SEQ_BETTER], median, stops[0], q90, stops[EXPERIMENTS - 1]);
    ck_assert_int_eq(counts[EVD_SEQ_BETTER], EXPERIMENTS);
    ck_assert(median <= 150);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_sequential");
    TCase *tc = tcase_create("sequential");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, hand_worked_first_cases);
    tcase_add_test(tc, constant_zero_closed_form);
    tcase_add_test(tc, lambda_of_a_late_step);
    tcase_add_test(tc, verdict_names);
    tcase_add_test(tc, verdict_rules);
    tcase_add_test(tc, equivalence_and_min_cases);
    tcase_add_test(tc, better_worse_decided_at);
    tcase_add_test(tc, decided_is_final);
    tcase_add_test(tc, bounds_only_tighten);
    tcase_add_test(tc, permutation_is_a_permutation);
    tcase_add_test(tc, permutation_is_uniform);
    tcase_add_test(tc, default_seed);
    tcase_add_test(tc, cases_needed);
    tcase_add_test(tc, simulation_null_error_rate);
    tcase_add_test(tc, simulation_effect_stops_early);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
