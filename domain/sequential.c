/*
 * The statistics of a sequential experiment (see sequential.h for every formula and the
 * exact permutation and seed algorithms). Pure arithmetic; thread-safe; no allocation.
 */
#include "domain/sequential.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>

#define SAT_CASES 9007199254740992.0 /* 2^53 */

const char *evd_seq_verdict_name(enum evd_seq_verdict v)
{
    switch (v) {
    case EVD_SEQ_BETTER:
        return "better";
    case EVD_SEQ_WORSE:
        return "worse";
    case EVD_SEQ_EQUIVALENT:
        return "equivalent";
    case EVD_SEQ_INCONCLUSIVE:
        return "inconclusive";
    case EVD_SEQ_CONTINUE:
        break;
    }
    return "continue";
}

enum evd_seq_verdict evd_seq_decide(double low, double high, double min_effect)
{
    if (low > 0)
        return EVD_SEQ_BETTER;
    if (high < 0)
        return EVD_SEQ_WORSE;
    if (min_effect > 0 && -min_effect < low && high < min_effect)
        return EVD_SEQ_EQUIVALENT;
    return EVD_SEQ_CONTINUE;
}

void evd_seq_cs_init(struct evd_seq_cs *cs, double alpha_adjusted, uint64_t min_cases,
                     double min_effect)
{
    assert(alpha_adjusted > 0 && alpha_adjusted < 1);
    *cs = (struct evd_seq_cs){0};
    cs->alpha2 = alpha_adjusted;
    cs->min_cases = min_cases > 0 ? min_cases : 1;
    cs->min_effect = min_effect;
    cs->decided = EVD_SEQ_CONTINUE;
    cs->mu = 0.5;   /* μ̂_0 */
    cs->var = 0.25; /* σ̂²_0 */
    cs->lo = 0.0;
    cs->hi = 1.0;
}

/* ψ(λ) = (−ln(1 − λ) − λ)/4, for 0 < λ <= 1/2. */
static double psi(double lambda)
{
    return (-log1p(-lambda) - lambda) / 4;
}

void evd_seq_cs_add(struct evd_seq_cs *cs, double d)
{
    assert(d >= -1 && d <= 1);
    double x = (d + 1) / 2;
    double i = (double)(cs->n + 1);
    double log_term = log(2 / cs->alpha2);

    /* the step's weight and variance term, from the estimates before x_i (predictable) */
    double lambda = sqrt(2 * log_term / (cs->var * i * log(i + 1)));
    if (!(lambda < 0.5))
        lambda = 0.5;
    double dev = x - cs->mu;
    double v = 4 * dev * dev;
    evd_stats_sum_add(&cs->sum_lambda, lambda);
    evd_stats_sum_add(&cs->sum_lambda_x, lambda * x);
    evd_stats_sum_add(&cs->sum_vpsi, v * psi(lambda));

    double sl = evd_stats_sum_value(&cs->sum_lambda);
    cs->centre = evd_stats_sum_value(&cs->sum_lambda_x) / sl;
    cs->radius = (log_term + evd_stats_sum_value(&cs->sum_vpsi)) / sl;
    if (cs->centre - cs->radius > cs->lo)
        cs->lo = cs->centre - cs->radius;
    if (cs->centre + cs->radius < cs->hi)
        cs->hi = cs->centre + cs->radius;

    /* the estimates after x_i: μ̂_i first, then the square that uses it */
    cs->n++;
    evd_stats_sum_add(&cs->sum_x, x);
    cs->mu = (0.5 + evd_stats_sum_value(&cs->sum_x)) / (i + 1);
    double dev_after = x - cs->mu;
    evd_stats_sum_add(&cs->sum_dev2, dev_after * dev_after);
    cs->var = (0.25 + evd_stats_sum_value(&cs->sum_dev2)) / (i + 1);

    if (cs->decided_at == 0 && cs->n >= cs->min_cases) {
        enum evd_seq_verdict v_now =
            evd_seq_decide(evd_seq_cs_low(cs), evd_seq_cs_high(cs), cs->min_effect);
        if (v_now != EVD_SEQ_CONTINUE) {
            cs->decided_at = cs->n;
            cs->decided = v_now;
        }
    }
}

double evd_seq_cs_low(const struct evd_seq_cs *cs)
{
    return 2 * cs->lo - 1;
}

double evd_seq_cs_high(const struct evd_seq_cs *cs)
{
    return 2 * cs->hi - 1;
}

enum evd_seq_verdict evd_seq_cs_verdict(const struct evd_seq_cs *cs, bool terminal)
{
    if (cs->decided_at > 0)
        return cs->decided;
    return terminal ? EVD_SEQ_INCONCLUSIVE : EVD_SEQ_CONTINUE;
}

/* The next value of the splitmix64 stream in *state. */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A uniform draw in [0, bound), bound >= 1: rejects the r < 2^64 mod bound. */
static uint64_t draw_below(uint64_t *state, uint64_t bound)
{
    uint64_t reject_below = (0 - bound) % bound; /* (2^64 − bound) mod bound = 2^64 mod bound */
    for (;;) {
        uint64_t r = splitmix64(state);
        if (r >= reject_below)
            return r % bound;
    }
}

void evd_seq_permutation(uint64_t seed, uint32_t n, uint32_t *out_dispatch_index)
{
    uint64_t state = seed;
    for (uint32_t k = 0; k < n; k++)
        out_dispatch_index[k] = k + 1;
    for (uint32_t i = n > 0 ? n - 1 : 0; i >= 1; i--) {
        uint32_t j = (uint32_t)draw_below(&state, (uint64_t)i + 1);
        uint32_t t = out_dispatch_index[i];
        out_dispatch_index[i] = out_dispatch_index[j];
        out_dispatch_index[j] = t;
    }
}

/* The value of hex digit c, or −1. */
static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#define SEED_HEX_DIGITS 13

uint64_t evd_seq_default_seed(const char *experiment_id)
{
    if (experiment_id == NULL)
        return 0;
    const char *p = experiment_id;
    if (p[0] == 'e' && p[1] == 'x' && p[2] == 'p' && p[3] == '_') {
        uint64_t v = 0;
        int k = 0;
        for (; k < SEED_HEX_DIGITS && hex_value(p[4 + k]) >= 0; k++)
            v = v * 16 + (uint64_t)hex_value(p[4 + k]);
        if (k == SEED_HEX_DIGITS)
            return v;
    }
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *p != '\0'; p++) {
        h ^= (unsigned char)*p;
        h *= 0x100000001B3ull;
    }
    return h >> 12;
}

bool evd_seq_cases_needed(double effect, double sd, double alpha_adjusted, double *cases)
{
    if (!(effect > 0) || !(sd > 0) || !(alpha_adjusted > 0 && alpha_adjusted < 1) ||
        !isfinite(effect) || !isfinite(sd))
        return false;
    double z = evd_stats_normal_quantile(1 - alpha_adjusted / 2) + evd_stats_normal_quantile(0.8);
    double r = z * sd / effect;
    double need = ceil(r * r);
    *cases = need < SAT_CASES ? need : SAT_CASES;
    return true;
}
