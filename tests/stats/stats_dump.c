/*
 * The C side of the SciPy agreement test (tests/stats/check_scipy.py): reads one request
 * a line on stdin, answers one line on stdout with every value printed to 17 digits
 * (nan for a null). Requests:
 *   c <df> <t>                          t cdf
 *   q <df> <p>                          t quantile
 *   s <wins> <losses>                   sign test p
 *   w <passed> <n> <alpha>              Wilson low high
 *   p <alpha> <m> <min_effect> <n> <d_1..d_n>
 *   k <alpha> <m> <min_effect> <n> <C> <d_1..d_n> <cluster_1..cluster_n>
 * The last two answer mean se df ci_low ci_high t_p_value p_value_adjusted mde, first from
 * the two-pass moments, then from the incremental accumulator (16 values).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/analysis.h"
#include "domain/stats.h"

static void put(double v)
{
    printf(" %.17g", v);
}

static void put_summary(const struct evd_stats_paired *s)
{
    put(s->has_mean ? s->mean : NAN);
    double vals[7] = {s->se, s->df, s->ci_low, s->ci_high, s->t_p_value, s->p_value_adjusted,
                      s->mde};
    for (int i = 0; i < 7; i++)
        put(s->has_var ? vals[i] : NAN);
}

static int paired(char kind)
{
    double alpha, min_effect;
    unsigned m;
    size_t n, nclusters = 0;
    if (scanf("%lf %u %lf %zu", &alpha, &m, &min_effect, &n) != 4)
        return -1;
    if (kind == 'k' && scanf("%zu", &nclusters) != 1)
        return -1;
    double *d = calloc(n + 1, sizeof(*d));
    uint32_t *cl = calloc(n + 1, sizeof(*cl));
    double *scratch = calloc(nclusters + 1, sizeof(*scratch));
    if (d == NULL || cl == NULL || scratch == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (scanf("%lf", &d[i]) != 1)
            return -1;
    for (size_t i = 0; kind == 'k' && i < n; i++)
        if (scanf("%u", &cl[i]) != 1)
            return -1;
    struct evd_stats_params params = {.alpha = alpha, .comparisons = m, .min_effect = min_effect};
    struct evd_stats_moments mom;
    struct evd_stats_paired out;
    evd_stats_paired_direct(d, n, kind == 'k' ? cl : NULL, nclusters, scratch, &mom);
    evd_stats_paired_summary(&mom, &params, &out);
    put_summary(&out);

    /* the accumulator: every value added, then a third of them replaced by a wrong value
     * and put back, so that the removal path is exercised too */
    struct evd_analysis_pair *pair = evd_analysis_pair_new(kind == 'k' ? nclusters : 0);
    if (pair == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        evd_analysis_pair_add(pair, cl[i], 0.0, d[i], +1);
    for (size_t i = 0; i < n; i += 3) {
        evd_analysis_pair_add(pair, cl[i], 0.0, d[i], -1);
        evd_analysis_pair_add(pair, cl[i], 0.0, d[i] * 3 + 0.25, +1);
        evd_analysis_pair_add(pair, cl[i], 0.0, d[i] * 3 + 0.25, -1);
        evd_analysis_pair_add(pair, cl[i], 0.0, d[i], +1);
    }
    evd_analysis_pair_moments(pair, &mom);
    evd_stats_paired_summary(&mom, &params, &out);
    put_summary(&out);
    evd_analysis_pair_free(pair);
    free(d);
    free(cl);
    free(scratch);
    return 0;
}

int main(void)
{
    char kind[4];
    while (scanf("%3s", kind) == 1) {
        if (kind[0] == 'c' || kind[0] == 'q') {
            double df, x;
            if (scanf("%lf %lf", &df, &x) != 2)
                return 2;
            put(kind[0] == 'c' ? evd_stats_t_cdf(x, df) : evd_stats_t_quantile(x, df));
        } else if (kind[0] == 's') {
            unsigned long long w, l;
            if (scanf("%llu %llu", &w, &l) != 2)
                return 2;
            put(evd_stats_sign_test(w, l));
        } else if (kind[0] == 'w') {
            unsigned long long x, n;
            double alpha, lo = NAN, hi = NAN;
            if (scanf("%llu %llu %lf", &x, &n, &alpha) != 3)
                return 2;
            evd_stats_wilson(x, n, alpha, &lo, &hi);
            put(lo);
            put(hi);
        } else if (kind[0] == 'p' || kind[0] == 'k') {
            if (paired(kind[0]) != 0)
                return 2;
        } else {
            fprintf(stderr, "stats_dump: unknown request %s\n", kind);
            return 2;
        }
        putchar('\n');
    }
    return 0;
}
