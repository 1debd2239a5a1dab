/*
 * Unit tests for domain/analysis.h: after random sequences of cell updates the running
 * accumulator equals one built from the final cells alone and a from-scratch computation
 * with the two-pass formulas; all-equal differences keep se exactly 0 however long the
 * history; the JSON shapes carry nulls where the spec says; cells from runs; eligibility.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "domain/analysis.h"
#include "tests/support/testutil.h"

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static uint32_t rng_below(uint32_t n)
{
    return n == 0 ? 0 : (uint32_t)(rng_next() >> 33) % n;
}

/* A random consistent cell of at most `repeats` runs. */
static struct evd_analysis_cell random_cell(uint32_t repeats)
{
    struct evd_analysis_cell c;
    memset(&c, 0, sizeof(c));
    c.runs = rng_below(repeats + 1);
    c.evaluated = rng_below(c.runs + 1);
    c.passed = rng_below(c.evaluated + 1);
    c.first_runs = rng_below(c.evaluated + 1);
    /* first_passed within both the first runs and the passed ones, and the later passed
     * (passed − first_passed) within the later runs */
    uint32_t lo =
        c.passed > c.evaluated - c.first_runs ? c.passed - (c.evaluated - c.first_runs) : 0;
    uint32_t hi = c.first_runs < c.passed ? c.first_runs : c.passed;
    c.first_passed = lo + rng_below(hi - lo + 1);
    /* The nine metrics of the first analysis only (not the judge's two added since), so
     * that the random histories the tests below were written against stay the same:
     * all_equal_differences_keep_se_exactly_zero compares with == and holds for this
     * history, not for every one (other seeds give a rounding residue). */
    for (unsigned j = 0; j <= EVD_METRIC_FUNCTION_CALL_ERRORS; j++) {
        if (rng_below(4) == 0)
            continue; /* not reported */
        c.metric_mask |= 1u << j;
        c.median[j] = j == EVD_METRIC_COST_USD ? (double)rng_below(100000) / 1e6
                                               : (double)(rng_below(4000) / 2) / 2.0 + 100;
    }
    return c;
}

/* Reals within 1e-9 relative (1e-12 absolute near 0), everything else exactly equal. */
static void assert_json_close(const json_t *a, const json_t *b, const char *path)
{
    if (json_is_number(a) && json_is_number(b) && (json_is_real(a) || json_is_real(b))) {
        double x = json_number_value(a), y = json_number_value(b);
        ck_assert_msg(fabs(x - y) <= 1e-9 * fmax(fabs(x), fabs(y)) + 1e-12, "%s: %.17g != %.17g",
                      path, x, y);
        return;
    }
    ck_assert_msg(json_typeof(a) == json_typeof(b), "%s: types differ", path);
    if (json_is_object(a)) {
        ck_assert_msg(json_object_size(a) == json_object_size(b), "%s: sizes differ", path);
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)a, key, v)
        {
            char sub[256];
            snprintf(sub, sizeof(sub), "%s.%s", path, key);
            json_t *w = json_object_get(b, key);
            ck_assert_msg(w != NULL, "%s missing", sub);
            assert_json_close(v, w, sub);
        }
        return;
    }
    if (json_is_array(a)) {
        ck_assert_uint_eq(json_array_size(a), json_array_size(b));
        for (size_t i = 0; i < json_array_size(a); i++)
            assert_json_close(json_array_get(a, i), json_array_get(b, i), path);
        return;
    }
    ck_assert_msg(json_equal((json_t *)a, (json_t *)b), "%s: values differ", path);
}

/* The whole analysis as one JSON value, for comparisons. New reference. */
static json_t *analysis_json(const struct evd_analysis *a, unsigned arms)
{
    json_t *out = json_object(), *ar = json_array(), *cmp = json_array();
    for (unsigned i = 0; i < arms; i++)
        json_array_append_new(ar, evd_analysis_arm_json(a, i, NULL));
    for (unsigned t = 1; t < arms; t++)
        json_array_append_new(cmp, evd_analysis_comparison_json(a, t, NULL));
    json_object_set_new(out, "arms", ar);
    json_object_set_new(out, "comparisons", cmp);
    json_object_set_new(out, "analysis", evd_analysis_info_json(a, "topic", true));
    return out;
}

static double num(const json_t *obj, const char *k1, const char *k2)
{
    const json_t *v = json_object_get(obj, k1);
    if (k2 != NULL)
        v = json_object_get(v, k2);
    return json_number_value(v);
}

#define NCASES 40
#define NCLUSTERS 6

/* The checks against the two-pass formulas on the final cells. */
static void check_from_scratch(const struct evd_analysis *a, const struct evd_analysis_config *cfg,
                               struct evd_analysis_cell rows[][5], const uint32_t *cluster)
{
    struct evd_stats_params params = {
        .alpha = cfg->alpha, .comparisons = cfg->arms - 1, .min_effect = cfg->min_effect};
    double d[NCASES], ctl[NCASES], scratch[NCLUSTERS];
    uint32_t cl[NCASES];
    for (unsigned arm = 0; arm < cfg->arms; arm++) {
        uint64_t passed = 0, evaluated = 0, cases = 0, flaky = 0, first = 0, first_passed = 0;
        double rate = 0;
        for (size_t i = 0; i < NCASES; i++) {
            const struct evd_analysis_cell *c = &rows[i][arm];
            passed += c->passed;
            evaluated += c->evaluated;
            first += c->first_runs;
            first_passed += c->first_passed;
            if (c->evaluated > 0) {
                cases++;
                rate += (double)c->passed / c->evaluated;
                flaky += c->passed > 0 && c->passed < c->evaluated;
            }
        }
        json_t *j = evd_analysis_arm_json(a, arm, "x");
        ck_assert_str_eq(json_string_value(json_object_get(j, "label")), "x");
        ck_assert_int_eq(num(j, "pooled", "passed"), passed);
        ck_assert_int_eq(num(j, "pooled", "evaluated"), evaluated);
        ck_assert_int_eq(num(j, "evaluated_cases", NULL), cases);
        ck_assert_int_eq(num(j, "flaky_cases", NULL), flaky);
        ck_assert_int_eq(num(j, "order", "first_runs"), first);
        ck_assert_int_eq(num(j, "order", "first_passed"), first_passed);
        ck_assert_int_eq(num(j, "order", "later_runs"), evaluated - first);
        ck_assert_int_eq(num(j, "order", "later_passed"), passed - first_passed);
        if (cases > 0)
            ck_assert(fabs(num(j, "pass_rate", NULL) - rate / cases) < 1e-12);
        double lo, hi;
        if (evd_stats_wilson(passed, evaluated, cfg->alpha, &lo, &hi)) {
            ck_assert(fabs(num(j, "pooled", "wilson_low") - lo) < 1e-15);
            ck_assert(fabs(num(j, "pooled", "wilson_high") - hi) < 1e-15);
        }
        json_decref(j);
    }
    for (unsigned t = 1; t < cfg->arms; t++) {
        /* pass rate: d_i = s_it − s_ic over the paired cases */
        size_t n = 0;
        uint64_t wins = 0, losses = 0;
        double sc = 0;
        for (size_t i = 0; i < NCASES; i++) {
            const struct evd_analysis_cell *c = &rows[i][0], *tr = &rows[i][t];
            if (c->evaluated == 0 || tr->evaluated == 0)
                continue;
            ctl[n] = (double)c->passed / c->evaluated;
            d[n] = (double)tr->passed / tr->evaluated - ctl[n];
            wins += d[n] > 0;
            losses += d[n] < 0;
            sc += ctl[n];
            cl[n++] = cluster[i];
        }
        struct evd_stats_moments mom;
        struct evd_stats_paired direct, running;
        evd_stats_paired_direct(d, n, cfg->clusters ? cl : NULL, NCLUSTERS, scratch, &mom);
        evd_stats_paired_summary(&mom, &params, &direct);
        evd_analysis_pass_summary(a, t, &running);
        ck_assert_int_eq(direct.has_mean, running.has_mean);
        ck_assert_int_eq(direct.has_var, running.has_var);
        ck_assert_int_eq(direct.verdict, running.verdict);
        if (direct.has_mean)
            ck_assert(fabs(direct.mean - running.mean) < 1e-12);
        if (direct.has_var) {
            ck_assert(fabs(direct.se - running.se) <= 1e-9 * direct.se + 1e-13);
            ck_assert(direct.df == running.df);
            ck_assert(fabs(direct.ci_low - running.ci_low) < 1e-9);
            ck_assert(fabs(direct.t_p_value - running.t_p_value) < 1e-9);
        }
        json_t *j = evd_analysis_comparison_json(a, t, NULL);
        ck_assert_int_eq(num(j, "paired_cases", NULL), n);
        ck_assert_int_eq(num(j, "unpaired_cases", NULL), NCASES - n);
        ck_assert(json_is_object(json_object_get(j, "pass_rate")));
        json_t *pr = json_object_get(j, "pass_rate"), *st = json_object_get(pr, "sign_test");
        ck_assert_int_eq(json_integer_value(json_object_get(st, "wins")), wins);
        ck_assert_int_eq(json_integer_value(json_object_get(st, "losses")), losses);
        ck_assert_int_eq(json_integer_value(json_object_get(st, "ties")), n - wins - losses);
        ck_assert(json_real_value(json_object_get(st, "p_value")) ==
                  evd_stats_sign_test(wins, losses));
        if (n > 0) {
            ck_assert(fabs(num(pr, "control", NULL) - sc / n) < 1e-12);
            ck_assert(fabs(num(pr, "treatment", NULL) - num(pr, "control", NULL) -
                           num(pr, "delta", NULL)) < 1e-12);
        }
        /* one metric: medians paired where both exist, and `relative` */
        json_t *mt = json_object_get(json_object_get(j, "metrics"), "total_tokens");
        size_t mn = 0;
        double msum = 0, csum = 0;
        for (size_t i = 0; i < NCASES; i++) {
            const struct evd_analysis_cell *c = &rows[i][0], *tr = &rows[i][t];
            unsigned bit = 1u << EVD_METRIC_TOTAL_TOKENS;
            if (!(c->metric_mask & bit) || !(tr->metric_mask & bit))
                continue;
            d[mn] = tr->median[EVD_METRIC_TOTAL_TOKENS] - c->median[EVD_METRIC_TOTAL_TOKENS];
            msum += d[mn];
            csum += c->median[EVD_METRIC_TOTAL_TOKENS];
            cl[mn++] = 0;
        }
        ck_assert_int_eq(num(mt, "cases", NULL), mn);
        if (mn > 0 && csum != 0)
            ck_assert(fabs(num(mt, "relative", NULL) - msum / csum) < 1e-12);
        if (mn >= 2 && cfg->clusters == 0) {
            evd_stats_paired_direct(d, mn, NULL, 0, NULL, &mom);
            evd_stats_paired_summary(&mom, &params, &direct);
            ck_assert(fabs(num(mt, "se", NULL) - direct.se) <= 1e-9 * direct.se + 1e-12);
            ck_assert(fabs(num(mt, "ci_high", NULL) - direct.ci_high) <=
                      1e-9 * fabs(direct.ci_high) + 1e-9);
        }
        json_decref(j);
    }
}

START_TEST(running_equals_from_scratch)
{
    /* loop index: arms 2..5, with and without clustering, several seeds */
    unsigned arms = 2 + (unsigned)(_i % 4);
    bool clustered = (_i / 4) % 2 == 1;
    rng_state = 0x51A7u + (uint64_t)_i * 7919u;
    struct evd_analysis_config cfg = {.arms = arms,
                                      .cases = NCASES,
                                      .clusters = clustered ? NCLUSTERS : 0,
                                      .alpha = 0.05,
                                      .min_effect = 0.1};
    struct evd_analysis *run = evd_analysis_new(&cfg), *fresh = evd_analysis_new(&cfg);
    ck_assert(run != NULL && fresh != NULL);
    static struct evd_analysis_cell rows[NCASES][5], zero_row[5];
    uint32_t cluster[NCASES];
    memset(rows, 0, sizeof(rows));
    for (size_t i = 0; i < NCASES; i++)
        cluster[i] = clustered ? rng_below(NCLUSTERS) : 0;
    for (int step = 0; step < 4000; step++) {
        size_t i = rng_below(NCASES);
        unsigned arm = rng_below(arms);
        struct evd_analysis_cell next = random_cell(4);
        evd_analysis_set_cell(run, cluster[i], rows[i], arm, &next);
        ck_assert(memcmp(&rows[i][arm], &next, sizeof(next)) == 0);
    }
    /* the same final cells, each set once on an empty accumulator */
    for (size_t i = 0; i < NCASES; i++) {
        struct evd_analysis_cell row[5];
        memcpy(row, zero_row, sizeof(row));
        for (unsigned arm = 0; arm < arms; arm++)
            evd_analysis_set_cell(fresh, cluster[i], row, arm, &rows[i][arm]);
    }
    json_t *a = analysis_json(run, arms), *b = analysis_json(fresh, arms);
    assert_json_close(a, b, "analysis");
    json_decref(a);
    json_decref(b);
    check_from_scratch(run, &cfg, rows, cluster);
    evd_analysis_free(run);
    evd_analysis_free(fresh);
}
END_TEST

/* A cell of `evaluated` runs with `passed` passes and a token median. */
static struct evd_analysis_cell cell(uint32_t evaluated, uint32_t passed, double tokens)
{
    struct evd_analysis_cell c;
    memset(&c, 0, sizeof(c));
    c.runs = c.evaluated = evaluated;
    c.passed = passed;
    c.metric_mask = 1u << EVD_METRIC_TOTAL_TOKENS;
    c.median[EVD_METRIC_TOTAL_TOKENS] = tokens;
    return c;
}

START_TEST(all_equal_differences_keep_se_exactly_zero)
{
    /* a long history of arbitrary values, then every case ends tied (d = 0) or with the
     * treatment winning by exactly 1/3: se must be exactly 0, not a rounding residue */
    struct evd_analysis_config cfg = {
        .arms = 3, .cases = 30, .clusters = 4, .alpha = 0.05, .min_effect = 0.05};
    struct evd_analysis *a = evd_analysis_new(&cfg);
    static struct evd_analysis_cell rows[30][5];
    memset(rows, 0, sizeof(rows));
    rng_state = 42;
    for (int step = 0; step < 3000; step++) {
        size_t i = rng_below(30);
        unsigned arm = rng_below(3);
        struct evd_analysis_cell next = random_cell(3);
        evd_analysis_set_cell(a, (uint32_t)(i % 4), rows[i], arm, &next);
    }
    for (size_t i = 0; i < 30; i++) {
        struct evd_analysis_cell c = cell(3, 1, 100.0 + (double)i / 7);
        struct evd_analysis_cell t1 = cell(6, 2, 100.0 + (double)i / 7);       /* 2/6 = 1/3: tie */
        struct evd_analysis_cell t2 = cell(3, 2, 100.0 + (double)i / 7 + 0.1); /* +1/3 */
        evd_analysis_set_cell(a, (uint32_t)(i % 4), rows[i], 0, &c);
        evd_analysis_set_cell(a, (uint32_t)(i % 4), rows[i], 1, &t1);
        evd_analysis_set_cell(a, (uint32_t)(i % 4), rows[i], 2, &t2);
    }
    struct evd_stats_paired s;
    evd_analysis_pass_summary(a, 1, &s);
    ck_assert(s.has_var && s.se == 0 && s.mean == 0 && s.t_p_value == 1);
    ck_assert(s.ci_low == 0 && s.ci_high == 0);
    ck_assert_int_eq(s.verdict, EVD_VERDICT_EQUIVALENT);
    evd_analysis_pass_summary(a, 2, &s);
    ck_assert(s.has_var && s.se == 0 && s.t_p_value == 0);
    ck_assert(s.mean == 2.0 / 3 - 1.0 / 3);
    ck_assert_int_eq(s.verdict, EVD_VERDICT_BETTER);
    /* the token deltas are all equal too: 0 and 0.1 (0.1 plus rounding per case, so that
     * one is only checked to be tiny) */
    json_t *j = evd_analysis_comparison_json(a, 1, "B");
    json_t *m = json_object_get(json_object_get(j, "metrics"), "total_tokens");
    ck_assert(num(m, "se", NULL) == 0 && num(m, "delta", NULL) == 0);
    ck_assert_str_eq(json_string_value(json_object_get(j, "verdict")), "equivalent");
    ck_assert_str_eq(json_string_value(json_object_get(j, "label")), "B");
    json_decref(j);
    j = evd_analysis_comparison_json(a, 2, NULL);
    m = json_object_get(json_object_get(j, "metrics"), "total_tokens");
    ck_assert(num(m, "se", NULL) < 1e-12);
    ck_assert(fabs(num(m, "delta", NULL) - 0.1) < 1e-12);
    json_decref(j);
    evd_analysis_free(a);
}
END_TEST

START_TEST(empty_and_single_case_shapes)
{
    struct evd_analysis_config cfg = {.arms = 2, .cases = 5, .alpha = 0.05, .min_effect = 0};
    struct evd_analysis *a = evd_analysis_new(&cfg);
    json_t *arm = evd_analysis_arm_json(a, 0, NULL);
    ck_assert(json_is_null(json_object_get(arm, "pass_rate")));
    ck_assert(json_is_null(json_object_get(json_object_get(arm, "pooled"), "wilson_low")));
    ck_assert_str_eq(json_string_value(json_object_get(arm, "role")), "control");
    ck_assert(json_object_get(arm, "label") == NULL);
    json_decref(arm);
    json_t *c = evd_analysis_comparison_json(a, 1, NULL);
    json_t *pr = json_object_get(c, "pass_rate");
    const char *nulls[] = {
        "control",   "treatment",        "delta", "se",          "df", "ci_low", "ci_high",
        "t_p_value", "p_value_adjusted", "mde",   "cases_needed"};
    for (size_t i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++)
        ck_assert_msg(json_is_null(json_object_get(pr, nulls[i])), "%s", nulls[i]);
    ck_assert(json_real_value(json_object_get(json_object_get(pr, "sign_test"), "p_value")) == 1);
    ck_assert_str_eq(json_string_value(json_object_get(c, "verdict")), "inconclusive");
    ck_assert(json_is_false(json_object_get(c, "eligible")));
    ck_assert_int_eq(num(c, "unpaired_cases", NULL), 5);
    json_t *metrics = json_object_get(c, "metrics");
    ck_assert_uint_eq(json_object_size(metrics), EVD_ANALYSIS_METRICS);
    for (unsigned j = 0; j < EVD_ANALYSIS_METRICS; j++) {
        json_t *m = json_object_get(metrics, evd_analysis_metric_names[j]);
        ck_assert_int_eq(num(m, "cases", NULL), 0);
        ck_assert(json_is_null(json_object_get(m, "delta")));
        ck_assert(json_is_null(json_object_get(m, "relative")));
    }
    json_decref(c);

    /* one paired case: delta known, every variance statistic null, inconclusive */
    struct evd_analysis_cell row[5] = {{0}};
    struct evd_analysis_cell ctl = cell(2, 1, 10), tr = cell(2, 2, 0);
    evd_analysis_set_cell(a, 0, row, 0, &ctl);
    evd_analysis_set_cell(a, 0, row, 1, &tr);
    c = evd_analysis_comparison_json(a, 1, NULL);
    pr = json_object_get(c, "pass_rate");
    ck_assert(num(pr, "delta", NULL) == 0.5);
    ck_assert(json_is_null(json_object_get(pr, "se")) && json_is_null(json_object_get(pr, "mde")));
    ck_assert_str_eq(json_string_value(json_object_get(c, "verdict")), "inconclusive");
    json_t *m = json_object_get(json_object_get(c, "metrics"), "total_tokens");
    ck_assert(num(m, "delta", NULL) == -10 && num(m, "relative", NULL) == -1);
    ck_assert(json_is_null(json_object_get(m, "se")));
    ck_assert(json_is_true(json_object_get(c, "eligible"))); /* 2/2 passed, >= control's 1 */
    json_decref(c);
    json_t *info = evd_analysis_info_json(a, NULL, false);
    ck_assert(json_is_null(json_object_get(info, "cluster_by")));
    ck_assert(json_is_null(json_object_get(info, "clusters")));
    ck_assert(json_real_value(json_object_get(info, "alpha_adjusted")) == 0.05);
    ck_assert(json_is_false(json_object_get(info, "partial")));
    json_decref(info);
    evd_analysis_free(a);

    cfg.arms = 6;
    ck_assert(evd_analysis_new(&cfg) == NULL);
    cfg.arms = 1;
    ck_assert(evd_analysis_new(&cfg) == NULL);
}
END_TEST

START_TEST(eligibility)
{
    struct evd_analysis_config cfg = {.arms = 3, .cases = 2, .alpha = 0.05, .min_effect = 0};
    struct evd_analysis *a = evd_analysis_new(&cfg);
    struct evd_analysis_cell rows[2][5] = {{{0}}};
    struct evd_analysis_cell c = cell(3, 2, 1), all = cell(3, 3, 1), unevaluated = cell(3, 3, 1);
    unevaluated.runs = 4; /* a fourth run ended without a verdict */
    for (int i = 0; i < 2; i++) {
        evd_analysis_set_cell(a, 0, rows[i], 0, &c);
        evd_analysis_set_cell(a, 0, rows[i], 1, &all);
        evd_analysis_set_cell(a, 0, rows[i], 2, i == 0 ? &all : &unevaluated);
    }
    ck_assert(evd_analysis_eligible(a, 1));
    ck_assert(!evd_analysis_eligible(a, 2));
    /* a treatment that fails once is not eligible */
    struct evd_analysis_cell once = cell(3, 2, 1);
    evd_analysis_set_cell(a, 0, rows[1], 1, &once);
    ck_assert(!evd_analysis_eligible(a, 1));
    evd_analysis_free(a);
}
END_TEST

START_TEST(cells_from_runs)
{
    struct evd_analysis_run runs[4];
    memset(runs, 0, sizeof(runs));
    double tokens[4] = {30, 10, 20, 1000};
    for (int i = 0; i < 4; i++) {
        runs[i].evaluated = i < 3;
        runs[i].passed = i != 1;
        runs[i].first = i % 2 == 0;
        runs[i].metric_mask = 1u << EVD_METRIC_TOTAL_TOKENS | 1u << EVD_METRIC_COST_USD;
        runs[i].metric[EVD_METRIC_TOTAL_TOKENS] = tokens[i];
        runs[i].metric[EVD_METRIC_COST_USD] = i == 2 ? NAN : 0.5 * i;
    }
    double scratch[4];
    struct evd_analysis_cell c;
    evd_analysis_cell_from_runs(runs, 4, scratch, &c);
    ck_assert_uint_eq(c.runs, 4);
    ck_assert_uint_eq(c.evaluated, 3);
    ck_assert_uint_eq(c.passed, 2);     /* runs 0 and 2; run 3 has no verdict */
    ck_assert_uint_eq(c.first_runs, 2); /* runs 0 and 2 */
    ck_assert_uint_eq(c.first_passed, 2);
    ck_assert(c.median[EVD_METRIC_TOTAL_TOKENS] == 25); /* of 10, 20, 30, 1000 */
    ck_assert(c.median[EVD_METRIC_COST_USD] == 0.5);    /* of 0, 0.5, 1.5; NaN dropped */
    ck_assert_uint_eq(c.metric_mask, 1u << EVD_METRIC_TOTAL_TOKENS | 1u << EVD_METRIC_COST_USD);
}
END_TEST

/* jansson's allocator failing the n-th allocation only (jansson's test_chaos idea): the
 * later ones succeed, so an ignored failure would show as an incomplete result */
static bool chaos_on;
static size_t chaos_count, chaos_fail_at;

static void *chaos_malloc(size_t n)
{
    if (chaos_on && chaos_count++ == chaos_fail_at)
        return NULL;
    return malloc(n);
}

static void chaos_free(void *p)
{
    free(p);
}

START_TEST(builders_under_allocation_failure)
{
    /* failing any one allocation, every builder returns NULL or exactly what it returns
     * with memory to spare */
    struct evd_analysis_config cfg = {
        .arms = 3, .cases = 8, .clusters = 2, .alpha = 0.05, .min_effect = 0.1};
    struct evd_analysis *a = evd_analysis_new(&cfg);
    struct evd_analysis_cell rows[8][5];
    memset(rows, 0, sizeof(rows));
    rng_state = 7;
    for (int step = 0; step < 200; step++) {
        size_t i = rng_below(8);
        struct evd_analysis_cell next = random_cell(3);
        evd_analysis_set_cell(a, (uint32_t)(i % 2), rows[i], rng_below(3), &next);
    }
    json_set_alloc_funcs(chaos_malloc, chaos_free);
    for (int which = 0; which < 3; which++) {
        json_t *want = which == 0   ? evd_analysis_arm_json(a, 1, "B")
                       : which == 1 ? evd_analysis_comparison_json(a, 2, "C")
                                    : evd_analysis_info_json(a, "topic", true);
        ck_assert(want != NULL);
        bool completed = false;
        for (size_t n = 0; !completed && n < 100000; n++) {
            chaos_on = true;
            chaos_count = 0;
            chaos_fail_at = n;
            json_t *got = which == 0   ? evd_analysis_arm_json(a, 1, "B")
                          : which == 1 ? evd_analysis_comparison_json(a, 2, "C")
                                       : evd_analysis_info_json(a, "topic", true);
            chaos_on = false;
            if (got != NULL)
                ck_assert_msg(json_equal(got, want), "allocation %zu failed unnoticed", n);
            completed = chaos_count <= n; /* no allocation left to fail */
            json_decref(got);
        }
        ck_assert(completed);
        json_decref(want);
    }
    json_set_alloc_funcs(malloc, free);
    evd_analysis_free(a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_analysis");
    TCase *tc = tcase_create("analysis");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, running_equals_from_scratch, 0, 16);
    tcase_add_test(tc, all_equal_differences_keep_se_exactly_zero);
    tcase_add_test(tc, empty_and_single_case_shapes);
    tcase_add_test(tc, eligibility);
    tcase_add_test(tc, cells_from_runs);
    tcase_add_test(tc, builders_under_allocation_failure);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
