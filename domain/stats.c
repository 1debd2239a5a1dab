/*
 * The statistics of an experiment (see stats.h for every formula). Pure arithmetic;
 * thread-safe; no allocation.
 */
#include "domain/stats.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#define LN_SQRT_2PI 0.91893853320467274178 /* log √(2π) */
#define LN_SQRT_PI 0.57236494292470008707  /* log √π = log Γ(1/2) */
#define LN_2 0.69314718055994530942
#define CF_EPS 1e-16
#define CF_TINY 1e-300
#define CF_MAX_TERMS 200000

/*
 * Stirling's correction δ(x) = log Γ(x) − ((x − ½) log x − x + log √(2π)) for x >= 10:
 * the series Σ B_2j / (2j (2j − 1) x^(2j−1)) with Bernoulli numbers B_2..B_14. At x = 10 the
 * first omitted term is below 1e-17.
 */
static double stirling_corr(double x)
{
    double r = 1.0 / x, r2 = r * r;
    return r *
           (1.0 / 12 +
            r2 * (-1.0 / 360 +
                  r2 * (1.0 / 1260 + r2 * (-1.0 / 1680 + r2 * (1.0 / 1188 + r2 * (-691.0 / 360360 +
                                                                                  r2 / 156))))));
}

double evd_stats_lgamma(double x)
{
    if (!(x > 0))
        return NAN;
    if (isinf(x))
        return INFINITY;
    if (x <= 30 && floor(2 * x) == 2 * x) {
        /* integers and half-integers (every df/2 of an integer df): Γ(n) = (n − 1)! and
         * Γ(n + ½) = √π · ½ · (3/2) ⋯ (n − ½), as products that are exact or nearly so */
        bool half = floor(x) != x;
        double prod = 1.0;
        for (double k = half ? 0.5 : 1.0; k < x - 0.25; k += 1)
            prod *= k;
        return log(prod) + (half ? LN_SQRT_PI : 0.0);
    }
    /* below 10, shift up: log Γ(x) = log Γ(x + k) − log(x (x + 1) … (x + k − 1)) */
    double prod = 1.0;
    while (x < 10) {
        prod *= x;
        x += 1;
    }
    return (x - 0.5) * log(x) - x + LN_SQRT_2PI + stirling_corr(x) - log(prod);
}

/*
 * log Γ(a) − log Γ(a + b) for a, b > 0. For a >= 10 both Stirling expansions are
 * subtracted term by term so that the large (a − ½) log a parts cancel analytically:
 *   (a − ½) log1p(−b/(a + b)) − b log(a + b) + b + δ(a) − δ(a + b).
 */
static double lgamma_ratio(double a, double b)
{
    if (a >= 10) {
        double ab = a + b;
        return (a - 0.5) * log1p(-b / ab) - b * log(ab) + b + stirling_corr(a) - stirling_corr(ab);
    }
    return evd_stats_lgamma(a) - evd_stats_lgamma(a + b);
}

/* log B(a, b) = log Γ(a) + log Γ(b) − log Γ(a + b), the larger argument through the ratio. */
static double lbeta(double a, double b)
{
    double lo = a < b ? a : b, hi = a < b ? b : a;
    return evd_stats_lgamma(lo) + lgamma_ratio(hi, lo);
}

/*
 * The continued fraction K = 1 + d1/(1 + d2/(1 + …)) of I_x(a, b) = x^a y^b / (a B(a, b) K),
 *   d_{2j+1} = −(a + j)(a + b + j) x / ((a + 2j)(a + 2j + 1)),
 *   d_{2j}   = j (b − j) x / ((a + 2j − 1)(a + 2j)),
 * evaluated forward by the modified Lentz method: C_i = 1 + d_i / C_{i−1} and
 * D_i = 1 / (1 + d_i D_{i−1}) are the ratios of successive numerators and denominators,
 * and K is the product of C_i D_i.
 *
 * Near x = 1 with large a (the t distribution at large df) d_{2j+1} is close to −1, and
 * on the odd steps both 1 + d_i / C and 1 + d_i D cancel to a few significant digits. There
 * (when b <= 1) the step is taken as C_i = (Cm + g) / C_{i−1} and D_i = 1 / (g + d_i Dm),
 * with Cm = C_{i−1} − 1 = d_{i−1} / C_{i−2} and Dm = D_{i−1} − 1 = −d_{i−1} D_{i−2} D_{i−1}
 * from the previous step (both without cancellation), and g = 1 + d_i from the identity
 *   (a + 2j)(a + 2j + 1) g = a (2j + 1 − b) + 3j² + j (2 − b) + (a + j)(a + b + j) y,
 * whose terms are all non-negative (y = 1 − x, given exactly by the caller). The even steps
 * keep the plain form. Cm and Dm are recomputed at every step from C and D, never carried
 * on their own (which would let their rounding grow).
 */
static double beta_cf(double a, double b, double x, double y)
{
    double f = 1.0, c = 1.0, cm = 0.0, d = 0.0, dm = -1.0;
    int settled = 0; /* consecutive steps that changed nothing */
    for (int i = 1; i <= CF_MAX_TERMS; i++) {
        double j = (double)(i / 2), num, c_new, d_new;
        if (i % 2 == 1) {
            double den = (a + 2 * j) * (a + 2 * j + 1);
            num = -(a + j) * (a + b + j) * x / den;
        } else {
            num = j * (b - j) * x / ((a + 2 * j - 1) * (a + 2 * j));
        }
        if (i % 2 == 1 && b <= 1) {
            double g = (a * (2 * j + 1 - b) + 3 * j * j + j * (2 - b) + (a + j) * (a + b + j) * y) /
                       ((a + 2 * j) * (a + 2 * j + 1));
            c_new = (cm + g) / c;
            d_new = g + num * dm;
        } else {
            c_new = 1.0 + num / c;
            d_new = 1.0 + num * d;
        }
        if (fabs(d_new) < CF_TINY)
            d_new = CF_TINY;
        d_new = 1.0 / d_new;
        if (fabs(c_new) < CF_TINY)
            c_new = CF_TINY;
        cm = num / c;          /* C_i − 1, for the next step */
        dm = -num * d * d_new; /* D_i − 1 */
        c = c_new;
        d = d_new;
        double delta = c * d;
        f *= delta;
        /* the odd and even steps can differ by orders of magnitude near x = 1: stop only
         * when an odd and an even step in a row both leave f unchanged */
        settled = fabs(delta - 1.0) < CF_EPS ? settled + 1 : 0;
        if (settled >= 2)
            break;
    }
    return f;
}

/*
 * I_x(a, b) into *p and 1 − I_x(a, b) into *q, with y = 1 − x and the logarithms lx, ly
 * of x and y given separately (by the caller, without cancellation or underflow). The
 * side the fraction converges on is computed directly, the other by subtraction from 1;
 * the prefactor x^a y^b / (a B(a, b)) is taken in logs.
 */
struct txy {
    double x, y, lx, ly;
};

static void ibeta(double a, double b, struct txy r, double *p, double *q)
{
    if (r.lx == -INFINITY) {
        *p = 0.0;
        *q = 1.0;
        return;
    }
    if (r.ly == -INFINITY) {
        *p = 1.0;
        *q = 0.0;
        return;
    }
    bool swap = r.x > (a + 1) / (a + b + 2);
    if (swap) {
        double t = a;
        a = b;
        b = t;
        r = (struct txy){.x = r.y, .y = r.x, .lx = r.ly, .ly = r.lx};
    }
    double v = exp(a * r.lx + b * r.ly - lbeta(a, b) - log(a)) / beta_cf(a, b, r.x, r.y);
    if (v > 1)
        v = 1;
    if (swap) {
        *q = v;
        *p = 1.0 - v;
    } else {
        *p = v;
        *q = 1.0 - v;
    }
}

/*
 * x = df/(df + t²), y = t²/(df + t²) and their logarithms, each without subtraction:
 * log x = log1p(−y) when x is near 1, and log df − 2 log|t| when t² would overflow.
 */
static struct txy t_xy(double t, double df)
{
    struct txy r;
    double at = fabs(t);
    if (at > 1e150) {
        double lr = log(df) - 2 * log(at); /* log(df / t²) */
        double ratio = exp(lr);
        r.x = ratio / (1 + ratio);
        r.y = 1 / (1 + ratio);
        r.lx = lr - log1p(ratio);
        r.ly = -log1p(ratio);
        return r;
    }
    double z = at * at;
    r.x = df / (df + z);
    r.y = z / (df + z);
    r.lx = r.x < 0.5 ? log(r.x) : log1p(-r.y);
    r.ly = z == 0 ? -INFINITY : r.y < 0.5 ? log(r.y) : log1p(-r.x);
    return r;
}

/* P(T <= −|t|) into *tail and P(−|t| < T <= 0) = ½ − tail into *centre. */
static void t_halves(double t, double df, double *tail, double *centre)
{
    double p, q;
    ibeta(df / 2, 0.5, t_xy(t, df), &p, &q);
    *tail = p / 2;
    *centre = q / 2;
}

/* The density of T_df at t: Γ((df+1)/2) / (√(df π) Γ(df/2)) · (1 + t²/df)^(−(df+1)/2). */
static double t_pdf(double t, double df)
{
    double at = fabs(t);
    double l1p = at > 1e150 ? 2 * log(at) - log(df) : log1p(at / df * at);
    return exp(-lbeta(df / 2, 0.5) - 0.5 * log(df) - (df + 1) / 2 * l1p);
}

double evd_stats_t_cdf(double t, double df)
{
    if (isnan(t) || !(df > 0))
        return NAN;
    if (t == 0)
        return 0.5;
    if (isinf(t))
        return t < 0 ? 0.0 : 1.0;
    double tail, centre;
    t_halves(t, df, &tail, &centre);
    return t < 0 ? tail : 1.0 - tail;
}

double evd_stats_t_two_sided(double t, double df)
{
    if (isnan(t) || !(df > 0))
        return NAN;
    if (isinf(t))
        return 0.0;
    double p, q;
    ibeta(df / 2, 0.5, t_xy(t, df), &p, &q);
    return p;
}

/*
 * The quantile solver shared by t and normal. For u > 0 a distribution supplies
 * H(u) = the tail P(X <= −u) or the central mass P(−u < X <= 0), and its density f(u).
 * We solve log H(e^w) = log target for w = log u by Newton's method: the tail is nearly
 * linear in w for power-law tails, and a step in w is a relative step in u.
 */
struct qdist {
    bool normal;
    double df;
    bool central; /* solve the central equation instead of the tail one */
};

static void qdist_eval(const struct qdist *qd, double u, double *h, double *f)
{
    double tail, centre;
    if (qd->normal) {
        tail = 0.5 * erfc(u / M_SQRT2);
        centre = 0.5 * erf(u / M_SQRT2);
        *f = exp(-0.5 * u * u - LN_SQRT_2PI);
    } else {
        t_halves(u, qd->df, &tail, &centre);
        *f = t_pdf(u, qd->df);
    }
    *h = qd->central ? centre : tail;
}

/* g(w) = log H(e^w) − log target, and its derivative in w (sign: tail decreasing). */
static void qdist_g(const struct qdist *qd, double w, double ltarget, double *g, double *dg)
{
    double u = exp(w), h, f;
    qdist_eval(qd, u, &h, &f);
    *g = h > 0 ? log(h) - ltarget : -INFINITY;
    double slope = h > 0 ? f * u / h : 0.0;
    *dg = qd->central ? slope : -slope;
}

/*
 * Newton with a bracket. g is decreasing (tail) or increasing (central) in w; a point
 * with g > 0 lies on the side of larger H. Steps that leave the bracket, or that the
 * derivative cannot give, are replaced by bisection (or, while the bracket is still open
 * on that side, by a unit step in w, a factor e in u).
 */
static double qdist_solve(const struct qdist *qd, double target, const double *guess, size_t nguess)
{
    double ltarget = log(target);
    double lo = -INFINITY, hi = INFINITY; /* bracket in w: root in (lo, hi) */
    double w = NAN, g = INFINITY, dg = 0;
    bool sign_up = qd->central; /* g increases with w */
    /* start from the guess with the smallest |g|, and let every guess narrow the bracket */
    for (size_t i = 0; i < nguess; i++) {
        if (!(guess[i] > 0) || !isfinite(guess[i]))
            continue;
        double wi = log(guess[i]), gi, dgi;
        qdist_g(qd, wi, ltarget, &gi, &dgi);
        if (gi == 0)
            return guess[i];
        bool below = sign_up ? gi < 0 : gi > 0; /* the root lies at larger w */
        if (below && wi > lo)
            lo = wi;
        if (!below && wi < hi)
            hi = wi;
        if (isnan(w) || fabs(gi) < fabs(g)) {
            w = wi;
            g = gi;
            dg = dgi;
        }
    }
    if (isnan(w))
        return NAN;
    for (int iter = 0; iter < 300; iter++) {
        double wn;
        bool newton = dg != 0 && isfinite(g) && isfinite(dg);
        wn = newton ? w - g / dg : NAN;
        if (!(wn > lo && wn < hi)) {
            if (isfinite(lo) && isfinite(hi))
                wn = lo + (hi - lo) / 2;
            else if (isfinite(lo))
                wn = fmax(w, lo) + 1; /* the bracket is open above */
            else
                wn = fmin(w, hi) - 1; /* open below */
        }
        if (fabs(wn - w) <= 2 * DBL_EPSILON * fmax(1.0, fabs(w)) ||
            (isfinite(lo) && isfinite(hi) && hi - lo <= 2 * DBL_EPSILON * fmax(1.0, fabs(w))))
            return exp(wn);
        w = wn;
        qdist_g(qd, w, ltarget, &g, &dg);
        if (g == 0)
            return exp(w);
        bool below = sign_up ? g < 0 : g > 0;
        if (below)
            lo = w;
        else
            hi = w;
    }
    return exp(w);
}

/*
 * A first approximation of the upper normal quantile for a tail q <= 1/2 (Abramowitz and
 * Stegun 26.2.23, error below 5e-4): z = r − (c0 + c1 r + c2 r²)/(1 + d1 r + d2 r² + d3 r³),
 * r = √(−2 log q).
 */
static double normal_guess(double q)
{
    double r = sqrt(-2 * log(q));
    return r - (2.515517 + r * (0.802853 + r * 0.010328)) /
                   (1 + r * (1.432788 + r * (0.189269 + r * 0.001308)));
}

double evd_stats_normal_quantile(double p)
{
    if (isnan(p) || p < 0 || p > 1)
        return NAN;
    if (p == 0)
        return -INFINITY;
    if (p == 1)
        return INFINITY;
    if (p == 0.5)
        return 0.0;
    double q = p < 0.5 ? p : 1 - p; /* exact for p >= 1/2 */
    struct qdist qd = {.normal = true, .df = 0, .central = q > 0.25};
    double z0 = normal_guess(q);
    double target = qd.central ? 0.5 - q : q;
    double guesses[2] = {z0, qd.central ? target * 2.5066282746310002 : z0};
    double u = qdist_solve(&qd, target, guesses, 2);
    return p < 0.5 ? -u : u;
}

double evd_stats_t_quantile(double p, double df)
{
    if (isnan(p) || p < 0 || p > 1 || !(df > 0))
        return NAN;
    if (p == 0)
        return -INFINITY;
    if (p == 1)
        return INFINITY;
    if (p == 0.5)
        return 0.0;
    double q = p < 0.5 ? p : 1 - p;
    struct qdist qd = {.normal = false, .df = df, .central = q > 0.25};
    double target = qd.central ? 0.5 - q : q;
    /* Cornish-Fisher: t ≈ z + (z³ + z)/(4 df) + (5z⁵ + 16z³ + 3z)/(96 df²) */
    double z = normal_guess(q), z2 = z * z;
    double cf = z + (z2 + 1) * z / (4 * df) + ((5 * z2 + 16) * z2 + 3) * z / (96 * df * df);
    /* the power law of the tail: P(T <= −u) ≈ f0' · u^(−df), f0' = c df^((df−1)/2) */
    double lc = -lbeta(df / 2, 0.5) - 0.5 * log(df);
    double tailg = exp((lc + (df - 1) / 2 * log(df) - log(q)) / df);
    /* the density at 0: P(0 < T <= u) ≈ f(0) u */
    double centg = (0.5 - q) / exp(lc);
    double guesses[4] = {cf, tailg, centg, z};
    double u = qdist_solve(&qd, target, guesses, 4);
    return p < 0.5 ? -u : u;
}

/*
 * log(C(N, k) / 2^N). With p = k + 1 and q = N − k + 1, both >= 10, and P = N + 2:
 *   log C(N, k) = −log(N + 1) − log B(p, q), and Stirling's form of log B gives
 *   log(C(N, k)/2^N) = −log(N + 1) + ½ log q − log √(2π) − (δ(p) + δ(q) − δ(P))
 *                      − (p − ½) log1p((p − q)/P) − q log1p((q − p)/P) + (3/2) log 2,
 * where both log1p terms are small near the centre. Otherwise through lgamma_ratio.
 */
static double log_binom_half(uint64_t n, uint64_t k)
{
    double N = (double)n, K = (double)k;
    double p = K + 1, q = N - K + 1, P = N + 2;
    if (p >= 10 && q >= 10) {
        double corr = stirling_corr(p) + stirling_corr(q) - stirling_corr(P);
        return -log(N + 1) + 0.5 * log(q) - LN_SQRT_2PI - corr - (p - 0.5) * log1p((p - q) / P) -
               q * log1p((q - p) / P) + 1.5 * LN_2;
    }
    /* log Γ(N+1) − log Γ(N−k+1) − log Γ(k+1) − N log 2 */
    double lo = p < q ? p : q, hi = p < q ? q : p; /* {k+1, N−k+1} */
    return -lgamma_ratio(hi, lo - 1) - evd_stats_lgamma(lo) - N * LN_2;
}

double evd_stats_sign_test(uint64_t wins, uint64_t losses)
{
    uint64_t n = wins + losses;
    if (n == 0)
        return 1.0;
    uint64_t k = wins < losses ? wins : losses;
    if (2 * k == n)
        return 1.0; /* the two tails overlap: 2·Σ >= 1 */
    double lead = log_binom_half(n, k);
    /* Σ_{j<=k} C(N, j)/C(N, k), from j = k down; the terms only shrink */
    double sum = 1.0, term = 1.0;
    for (uint64_t j = k; j >= 1; j--) {
        term *= (double)j / (double)(n - j + 1);
        sum += term;
        if (term < sum * 1e-17)
            break;
    }
    double p = 2.0 * exp(lead + log(sum));
    return p < 1.0 ? p : 1.0;
}

bool evd_stats_wilson(uint64_t passed, uint64_t n, double alpha, double *low, double *high)
{
    if (n == 0 || passed > n)
        return false;
    double z = evd_stats_normal_quantile(1 - alpha / 2);
    double N = (double)n, ph = (double)passed / N, z2 = z * z;
    double denom = 1 + z2 / N;
    double centre = (ph + z2 / (2 * N)) / denom;
    double half = z / denom * sqrt(ph * (1 - ph) / N + z2 / (4 * N * N));
    *low = passed == 0 ? 0.0 : centre - half;
    *high = passed == n ? 1.0 : centre + half;
    return true;
}

static int cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

bool evd_stats_median(double *v, size_t n, double *out)
{
    if (n == 0)
        return false;
    qsort(v, n, sizeof(*v), cmp_double);
    *out = n % 2 == 1 ? v[n / 2] : v[n / 2 - 1] / 2 + v[n / 2] / 2;
    return true;
}

void evd_stats_sum_add(struct evd_stats_sum *sum, double x)
{
    double t = sum->s + x;
    if (fabs(sum->s) >= fabs(x))
        sum->c += (sum->s - t) + x;
    else
        sum->c += (x - t) + sum->s;
    sum->s = t;
}

double evd_stats_sum_value(const struct evd_stats_sum *sum)
{
    return sum->s + sum->c;
}

const char *evd_stats_verdict_name(enum evd_stats_verdict v)
{
    switch (v) {
    case EVD_VERDICT_BETTER:
        return "better";
    case EVD_VERDICT_WORSE:
        return "worse";
    case EVD_VERDICT_EQUIVALENT:
        return "equivalent";
    case EVD_VERDICT_INCONCLUSIVE:
        break;
    }
    return "inconclusive";
}

void evd_stats_paired_summary(const struct evd_stats_moments *mom,
                              const struct evd_stats_params *params, struct evd_stats_paired *out)
{
    *out = (struct evd_stats_paired){0};
    out->verdict = EVD_VERDICT_INCONCLUSIVE;
    if (mom->n == 0)
        return;
    out->has_mean = true;
    out->mean = mom->mean;
    double n = (double)mom->n;
    double se, df;
    if (mom->clustered) {
        if (mom->clusters < 2 || mom->n < 2)
            return;
        double C = (double)mom->clusters;
        double css = mom->zero_spread || !(mom->css > 0) ? 0.0 : mom->css;
        se = sqrt(C / (C - 1) * css) / n;
        df = C - 1;
    } else {
        if (mom->n < 2)
            return;
        double ss = mom->zero_spread || !(mom->ss > 0) ? 0.0 : mom->ss;
        se = sqrt(ss / (n - 1)) / sqrt(n);
        df = n - 1;
    }
    unsigned m = params->comparisons > 0 ? params->comparisons : 1;
    double alpha_adj = params->alpha / m;
    double q = evd_stats_t_quantile(1 - alpha_adj / 2, df);
    out->has_var = true;
    out->se = se;
    out->df = df;
    if (se == 0) {
        out->t_p_value = mom->mean == 0 ? 1.0 : 0.0;
        out->ci_low = out->ci_high = mom->mean;
    } else {
        out->t_p_value = evd_stats_t_two_sided(mom->mean / se, df);
        out->ci_low = mom->mean - q * se;
        out->ci_high = mom->mean + q * se;
    }
    double padj = m * out->t_p_value;
    out->p_value_adjusted = padj < 1 ? padj : 1.0;
    out->mde = (q + evd_stats_t_quantile(0.8, df)) * se;
    if (params->min_effect > 0 && se > 0) {
        double r = out->mde / params->min_effect;
        double need = ceil(n * r * r);
        out->has_cases_needed = true;
        out->cases_needed = need < 9007199254740992.0 ? need : 9007199254740992.0;
    }
    double me = params->min_effect;
    if (out->ci_low > 0)
        out->verdict = EVD_VERDICT_BETTER;
    else if (out->ci_high < 0)
        out->verdict = EVD_VERDICT_WORSE;
    else if (me > 0 && -me < out->ci_low && out->ci_high < me)
        out->verdict = EVD_VERDICT_EQUIVALENT;
}

void evd_stats_paired_direct(const double *d, size_t n, const uint32_t *cluster, size_t nclusters,
                             double *scratch, struct evd_stats_moments *out)
{
    *out = (struct evd_stats_moments){0};
    out->n = n;
    out->clustered = cluster != NULL;
    if (n == 0)
        return;
    double sum = 0;
    bool equal = true;
    for (size_t i = 0; i < n; i++) {
        sum += d[i];
        equal = equal && d[i] == d[0];
    }
    double mean = sum / (double)n, ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (d[i] - mean) * (d[i] - mean);
    out->mean = equal ? d[0] : mean;
    out->ss = equal ? 0.0 : ss;
    out->zero_spread = equal;
    if (cluster == NULL)
        return;
    for (size_t c = 0; c < nclusters; c++)
        scratch[c] = NAN; /* NaN: no case yet */
    for (size_t i = 0; i < n; i++) {
        double r = d[i] - out->mean;
        scratch[cluster[i]] = isnan(scratch[cluster[i]]) ? r : scratch[cluster[i]] + r;
    }
    double css = 0;
    for (size_t c = 0; c < nclusters; c++) {
        if (isnan(scratch[c]))
            continue;
        out->clusters++;
        css += scratch[c] * scratch[c];
    }
    out->css = equal ? 0.0 : css;
}
