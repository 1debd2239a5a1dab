/*
 * The running analysis of an experiment (see analysis.h for the model and the algebra).
 * Pure; an accumulator belongs to one writer; JSON results are new references.
 */
#include "domain/analysis.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const evd_analysis_metric_names[EVD_ANALYSIS_METRICS] = {
    "total_tokens", "input_tokens", "output_tokens",  "reasoning_tokens",     "cost_usd",
    "wall_time_ms", "turns",        "function_calls", "function_call_errors",
    "judge_total_tokens", "judge_cost_usd",
};

void evd_analysis_cell_from_runs(const struct evd_analysis_run *runs, size_t n, double *scratch,
                                 struct evd_analysis_cell *out)
{
    memset(out, 0, sizeof(*out));
    out->runs = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        if (!runs[i].evaluated)
            continue;
        out->evaluated++;
        out->passed += runs[i].passed;
        out->first_runs += runs[i].first;
        out->first_passed += runs[i].first && runs[i].passed;
    }
    for (unsigned j = 0; j < EVD_ANALYSIS_METRICS; j++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            if ((runs[i].metric_mask >> j & 1u) && isfinite(runs[i].metric[j]))
                scratch[m++] = runs[i].metric[j];
        }
        if (evd_stats_median(scratch, m, &out->median[j]))
            out->metric_mask |= 1u << j;
    }
}

/* ---- one paired quantity ---- */

struct pair_cluster {
    struct evd_stats_sum s; /* S_c = Σ_{i∈c} e_i */
    uint64_t n;             /* n_c */
};

struct evd_analysis_pair {
    uint64_t n, wins, losses, ties, at_shift; /* at_shift: #(d_i == shift) */
    double shift;                             /* K, set by the first d after empty */
    struct evd_stats_sum se, se2;             /* Σ e_i, Σ e_i² */
    struct evd_stats_sum control, treatment;  /* Σ control, Σ treatment values */
    size_t nclusters;
    uint64_t clusters_used;    /* clusters with n_c >= 1 */
    struct evd_stats_sum q, p; /* Q = Σ S_c², P = Σ n_c S_c */
    uint64_t n2;               /* N2 = Σ n_c² */
    struct pair_cluster *cl;
};

struct evd_analysis_pair *evd_analysis_pair_new(size_t nclusters)
{
    struct evd_analysis_pair *pair = calloc(1, sizeof(*pair));
    if (pair == NULL)
        return NULL;
    pair->nclusters = nclusters;
    if (nclusters > 0) {
        pair->cl = calloc(nclusters, sizeof(*pair->cl));
        if (pair->cl == NULL) {
            free(pair);
            return NULL;
        }
    }
    return pair;
}

void evd_analysis_pair_free(struct evd_analysis_pair *pair)
{
    if (pair == NULL)
        return;
    free(pair->cl);
    free(pair);
}

/*
 * Double-double helpers: a value hi + lo carried to about 106 bits. The squares and
 * products that feed Q, P and Σ e² are added exactly (hi and lo of an fma product), and
 * the final Σ e² − ē Σ e and Q − 2ē P + ē² N2 are combined in double-double, so that
 * the cancellation between those large terms (when the shift K is far from d̄, or the
 * clusters are large) costs no digits.
 */
struct dd {
    double hi, lo;
};

static struct dd dd_two_sum(double a, double b)
{
    double s = a + b, bb = s - a;
    return (struct dd){s, (a - (s - bb)) + (b - bb)};
}

static struct dd dd_add(struct dd a, struct dd b)
{
    struct dd s = dd_two_sum(a.hi, b.hi);
    s.lo += a.lo + b.lo;
    return dd_two_sum(s.hi, s.lo);
}

static struct dd dd_mul(struct dd a, struct dd b)
{
    double p = a.hi * b.hi;
    double e = fma(a.hi, b.hi, -p) + (a.hi * b.lo + a.lo * b.hi);
    return dd_two_sum(p, e);
}

static struct dd dd_of_sum(const struct evd_stats_sum *s)
{
    return dd_two_sum(s->s, s->c);
}

/* Adds x·y exactly (its rounded product and the rounding error) to a compensated sum. */
static void sum_add_product(struct evd_stats_sum *sum, double x, double y)
{
    double p = x * y;
    evd_stats_sum_add(sum, p);
    evd_stats_sum_add(sum, fma(x, y, -p));
}

void evd_analysis_pair_add(struct evd_analysis_pair *pair, uint32_t cluster, double control,
                           double treatment, int sign)
{
    double d = treatment - control;
    if (sign > 0) {
        if (pair->n == 0)
            pair->shift = d;
        pair->n++;
    } else {
        pair->n--;
    }
    double e = d - pair->shift, sg = sign > 0 ? 1.0 : -1.0;
    uint64_t *count = d > 0 ? &pair->wins : d < 0 ? &pair->losses : &pair->ties;
    *count += sign > 0 ? 1 : (uint64_t)-1;
    if (d == pair->shift)
        pair->at_shift += sign > 0 ? 1 : (uint64_t)-1;
    evd_stats_sum_add(&pair->se, sg * e);
    sum_add_product(&pair->se2, sg * e, e);
    evd_stats_sum_add(&pair->control, sg * control);
    evd_stats_sum_add(&pair->treatment, sg * treatment);
    assert(pair->nclusters == 0 || cluster < pair->nclusters);
    if (pair->nclusters > 0) {
        struct pair_cluster *c = &pair->cl[cluster];
        double s_old = evd_stats_sum_value(&c->s);
        uint64_t n_old = c->n;
        evd_stats_sum_add(&c->s, sg * e);
        c->n = sign > 0 ? c->n + 1 : c->n - 1;
        if (c->n == 0)
            c->s = (struct evd_stats_sum){0, 0}; /* an empty cluster holds exactly nothing */
        double s_new = evd_stats_sum_value(&c->s);
        /* Q += S_c'² − S_c², P += n_c' S_c' − n_c S_c, N2 += n_c'² − n_c² */
        sum_add_product(&pair->q, s_new, s_new);
        sum_add_product(&pair->q, -s_old, s_old);
        sum_add_product(&pair->p, (double)c->n, s_new);
        sum_add_product(&pair->p, -(double)n_old, s_old);
        pair->n2 = pair->n2 + c->n * c->n - n_old * n_old;
        if (n_old == 0 && c->n == 1)
            pair->clusters_used++;
        if (n_old == 1 && c->n == 0)
            pair->clusters_used--;
    }
    if (pair->n == 0) { /* empty again: drop what rounding left in the sums */
        pair->se = pair->se2 = pair->control = pair->treatment = pair->q = pair->p =
            (struct evd_stats_sum){0, 0};
        pair->at_shift = 0;
    }
}

void evd_analysis_pair_moments(const struct evd_analysis_pair *pair, struct evd_stats_moments *out)
{
    *out = (struct evd_stats_moments){0};
    out->n = pair->n;
    out->clustered = pair->nclusters > 0;
    out->clusters = pair->clusters_used;
    if (pair->n == 0)
        return;
    double n = (double)pair->n;
    if (pair->ties == pair->n || pair->at_shift == pair->n) {
        /* every d_i is 0, or every d_i is K: known exactly from the counts */
        out->mean = pair->ties == pair->n ? 0.0 : pair->shift;
        out->zero_spread = true;
        return;
    }
    /* ē = Σe / n in double-double: hi by division, lo from the exact remainder */
    struct dd sum_e = dd_of_sum(&pair->se);
    double eh = sum_e.hi / n;
    struct dd ebar = dd_two_sum(eh, (fma(-eh, n, sum_e.hi) + sum_e.lo) / n);
    out->mean = pair->shift + (ebar.hi + ebar.lo);
    /* ss = Σ e² − ē Σ e */
    struct dd ss = dd_add(dd_of_sum(&pair->se2), dd_mul((struct dd){-ebar.hi, -ebar.lo}, sum_e));
    out->ss = ss.hi + ss.lo > 0 ? ss.hi + ss.lo : 0.0;
    if (pair->nclusters > 0) {
        /* css = Q − 2ē P + ē² N2 */
        struct dd two_e = {-2 * ebar.hi, -2 * ebar.lo};
        struct dd css = dd_add(dd_of_sum(&pair->q), dd_mul(two_e, dd_of_sum(&pair->p)));
        struct dd n2 = dd_two_sum((double)pair->n2, 0.0);
        css = dd_add(css, dd_mul(dd_mul(ebar, ebar), n2));
        out->css = css.hi + css.lo > 0 ? css.hi + css.lo : 0.0;
    }
}

void evd_analysis_pair_counts(const struct evd_analysis_pair *pair, uint64_t *n, uint64_t *wins,
                              uint64_t *losses, uint64_t *ties)
{
    *n = pair->n;
    *wins = pair->wins;
    *losses = pair->losses;
    *ties = pair->ties;
}

void evd_analysis_pair_means(const struct evd_analysis_pair *pair, double *control,
                             double *treatment)
{
    double n = pair->n > 0 ? (double)pair->n : NAN;
    *control = evd_stats_sum_value(&pair->control) / n;
    *treatment = evd_stats_sum_value(&pair->treatment) / n;
}

/* ---- the experiment ---- */

struct arm_acc {
    uint64_t runs, evaluated, passed, first_runs, first_passed;
    uint64_t evaluated_cases, flaky_cases;
    struct evd_stats_sum rate_sum; /* Σ s_ia over cases with k_ia >= 1 */
};

struct comparison_acc {
    struct evd_analysis_pair *pass;
    struct evd_analysis_pair *metric[EVD_ANALYSIS_METRICS];
};

struct evd_analysis {
    struct evd_analysis_config cfg;
    struct arm_acc arm[5];
    struct comparison_acc cmp[5]; /* cmp[t] for t = 1..arms−1 */
};

struct evd_analysis *evd_analysis_new(const struct evd_analysis_config *config)
{
    if (config->arms < 2 || config->arms > 5)
        return NULL;
    struct evd_analysis *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return NULL;
    a->cfg = *config;
    for (unsigned t = 1; t < config->arms; t++) {
        a->cmp[t].pass = evd_analysis_pair_new(config->clusters);
        if (a->cmp[t].pass == NULL)
            goto fail;
        for (unsigned j = 0; j < EVD_ANALYSIS_METRICS; j++) {
            a->cmp[t].metric[j] = evd_analysis_pair_new(config->clusters);
            if (a->cmp[t].metric[j] == NULL)
                goto fail;
        }
    }
    return a;
fail:
    evd_analysis_free(a);
    return NULL;
}

void evd_analysis_free(struct evd_analysis *a)
{
    if (a == NULL)
        return;
    for (unsigned t = 1; t < 5; t++) {
        evd_analysis_pair_free(a->cmp[t].pass);
        for (unsigned j = 0; j < EVD_ANALYSIS_METRICS; j++)
            evd_analysis_pair_free(a->cmp[t].metric[j]);
    }
    free(a);
}

static double cell_rate(const struct evd_analysis_cell *c)
{
    return (double)c->passed / (double)c->evaluated;
}

static bool cell_flaky(const struct evd_analysis_cell *c)
{
    return c->passed > 0 && c->passed < c->evaluated;
}

/* Adds (sign +1) or removes (−1) a cell's contribution to its arm. */
static void arm_apply(struct arm_acc *arm, const struct evd_analysis_cell *c, int sign)
{
    uint64_t s = sign > 0 ? 1 : (uint64_t)-1; /* modular: removal undoes an earlier add */
    arm->runs += s * c->runs;
    arm->evaluated += s * c->evaluated;
    arm->passed += s * c->passed;
    arm->first_runs += s * c->first_runs;
    arm->first_passed += s * c->first_passed;
    if (c->evaluated > 0) {
        arm->evaluated_cases += s;
        arm->flaky_cases += cell_flaky(c) ? s : 0;
        evd_stats_sum_add(&arm->rate_sum, sign > 0 ? cell_rate(c) : -cell_rate(c));
    }
    if (arm->evaluated_cases == 0)
        arm->rate_sum = (struct evd_stats_sum){0, 0};
}

/* Adds or removes the pairs a (control, treatment) cell couple contributes. */
static void comparison_apply(struct comparison_acc *cmp, uint32_t cluster,
                             const struct evd_analysis_cell *c, const struct evd_analysis_cell *t,
                             int sign)
{
    if (c->evaluated > 0 && t->evaluated > 0)
        evd_analysis_pair_add(cmp->pass, cluster, cell_rate(c), cell_rate(t), sign);
    for (unsigned j = 0; j < EVD_ANALYSIS_METRICS; j++) {
        if ((c->metric_mask >> j & 1u) && (t->metric_mask >> j & 1u))
            evd_analysis_pair_add(cmp->metric[j], cluster, c->median[j], t->median[j], sign);
    }
}

void evd_analysis_set_cell(struct evd_analysis *a, uint32_t cluster,
                           struct evd_analysis_cell *cells, unsigned arm,
                           const struct evd_analysis_cell *after)
{
    assert(arm < a->cfg.arms);
    struct evd_analysis_cell before = cells[arm];
    arm_apply(&a->arm[arm], &before, -1);
    arm_apply(&a->arm[arm], after, +1);
    for (unsigned t = 1; t < a->cfg.arms; t++) {
        if (arm != 0 && arm != t)
            continue;
        const struct evd_analysis_cell *c_old = arm == 0 ? &before : &cells[0];
        const struct evd_analysis_cell *t_old = arm == t ? &before : &cells[t];
        const struct evd_analysis_cell *c_new = arm == 0 ? after : &cells[0];
        const struct evd_analysis_cell *t_new = arm == t ? after : &cells[t];
        comparison_apply(&a->cmp[t], cluster, c_old, t_old, -1);
        comparison_apply(&a->cmp[t], cluster, c_new, t_new, +1);
    }
    cells[arm] = *after;
}

static struct evd_stats_params params_of(const struct evd_analysis *a)
{
    return (struct evd_stats_params){
        .alpha = a->cfg.alpha, .comparisons = a->cfg.arms - 1, .min_effect = a->cfg.min_effect};
}

void evd_analysis_pass_summary(const struct evd_analysis *a, unsigned t,
                               struct evd_stats_paired *out)
{
    struct evd_stats_moments mom;
    struct evd_stats_params params = params_of(a);
    evd_analysis_pair_moments(a->cmp[t].pass, &mom);
    evd_stats_paired_summary(&mom, &params, out);
}

bool evd_analysis_eligible(const struct evd_analysis *a, unsigned t)
{
    const struct arm_acc *tr = &a->arm[t];
    return tr->runs > 0 && tr->evaluated == tr->runs && tr->passed == tr->evaluated &&
           tr->passed >= a->arm[0].passed;
}

/* A real, or null when not finite (json_real refuses NaN and infinities). New reference. */
static json_t *real_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *uint_json(uint64_t v)
{
    return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

json_t *evd_analysis_arm_json(const struct evd_analysis *a, unsigned arm, const char *label)
{
    const struct arm_acc *s = &a->arm[arm];
    json_t *out = json_object(), *pooled = json_object(), *order = json_object();
    int rc = out == NULL || pooled == NULL || order == NULL ? -1 : 0;
    double lo = NAN, hi = NAN;
    evd_stats_wilson(s->passed, s->evaluated, a->cfg.alpha, &lo, &hi);
    rc |= json_object_set_new(pooled, "passed", uint_json(s->passed));
    rc |= json_object_set_new(pooled, "evaluated", uint_json(s->evaluated));
    rc |= json_object_set_new(pooled, "wilson_low", real_or_null(lo));
    rc |= json_object_set_new(pooled, "wilson_high", real_or_null(hi));
    rc |= json_object_set_new(order, "first_passed", uint_json(s->first_passed));
    rc |= json_object_set_new(order, "first_runs", uint_json(s->first_runs));
    rc |= json_object_set_new(order, "later_passed", uint_json(s->passed - s->first_passed));
    rc |= json_object_set_new(order, "later_runs", uint_json(s->evaluated - s->first_runs));
    rc |= json_object_set_new(out, "index", json_integer(arm));
    if (label != NULL)
        rc |= json_object_set_new(out, "label", json_string(label));
    rc |= json_object_set_new(out, "role", json_string(arm == 0 ? "control" : "treatment"));
    double rate = s->evaluated_cases > 0
                      ? evd_stats_sum_value(&s->rate_sum) / (double)s->evaluated_cases
                      : NAN;
    rc |= json_object_set_new(out, "pass_rate", real_or_null(rate));
    rc |= json_object_set_new(out, "pooled", pooled); /* steals, even on failure */
    pooled = NULL;
    rc |= json_object_set_new(out, "evaluated_cases", uint_json(s->evaluated_cases));
    rc |= json_object_set_new(out, "flaky_cases", uint_json(s->flaky_cases));
    rc |= json_object_set_new(out, "order", order);
    order = NULL;
    if (rc != 0) {
        json_decref(out);
        out = NULL;
    }
    json_decref(pooled);
    json_decref(order);
    return out;
}

/* The members of a summary: has_var-guarded values as reals or null. */
static int summary_members(json_t *obj, const struct evd_stats_paired *s)
{
    int rc = 0;
    rc |= json_object_set_new(obj, "delta", s->has_mean ? real_or_null(s->mean) : json_null());
    rc |= json_object_set_new(obj, "se", s->has_var ? real_or_null(s->se) : json_null());
    rc |=
        json_object_set_new(obj, "df", s->has_var ? json_integer((json_int_t)s->df) : json_null());
    rc |= json_object_set_new(obj, "ci_low", s->has_var ? real_or_null(s->ci_low) : json_null());
    rc |= json_object_set_new(obj, "ci_high", s->has_var ? real_or_null(s->ci_high) : json_null());
    return rc;
}

static json_t *pass_rate_json(const struct evd_analysis *a, unsigned t)
{
    const struct evd_analysis_pair *pair = a->cmp[t].pass;
    struct evd_stats_paired s;
    evd_analysis_pass_summary(a, t, &s);
    uint64_t n, wins, losses, ties;
    evd_analysis_pair_counts(pair, &n, &wins, &losses, &ties);
    double mc = NAN, mt = NAN;
    if (n > 0)
        evd_analysis_pair_means(pair, &mc, &mt);
    json_t *out = json_object(), *sign = json_object();
    int rc = out == NULL || sign == NULL ? -1 : 0;
    rc |= json_object_set_new(out, "control", real_or_null(mc));
    rc |= json_object_set_new(out, "treatment", real_or_null(mt));
    rc |= summary_members(out, &s);
    rc |=
        json_object_set_new(out, "t_p_value", s.has_var ? real_or_null(s.t_p_value) : json_null());
    rc |= json_object_set_new(out, "p_value_adjusted",
                              s.has_var ? real_or_null(s.p_value_adjusted) : json_null());
    rc |= json_object_set_new(sign, "wins", uint_json(wins));
    rc |= json_object_set_new(sign, "losses", uint_json(losses));
    rc |= json_object_set_new(sign, "ties", uint_json(ties));
    rc |= json_object_set_new(sign, "p_value", json_real(evd_stats_sign_test(wins, losses)));
    rc |= json_object_set_new(out, "sign_test", sign); /* steals */
    sign = NULL;
    rc |= json_object_set_new(out, "mde", s.has_var ? real_or_null(s.mde) : json_null());
    rc |= json_object_set_new(out, "cases_needed",
                              s.has_cases_needed ? json_integer((json_int_t)s.cases_needed)
                                                 : json_null());
    json_decref(sign);
    if (rc != 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

static json_t *metric_json(const struct evd_analysis *a, const struct evd_analysis_pair *pair)
{
    struct evd_stats_moments mom;
    struct evd_stats_params params = params_of(a);
    struct evd_stats_paired s;
    evd_analysis_pair_moments(pair, &mom);
    evd_stats_paired_summary(&mom, &params, &s);
    double mc = NAN, mt = NAN;
    if (mom.n > 0)
        evd_analysis_pair_means(pair, &mc, &mt);
    json_t *out = json_object();
    int rc = out == NULL ? -1 : 0;
    rc |= json_object_set_new(out, "cases", uint_json(mom.n));
    rc |= summary_members(out, &s);
    rc |= json_object_set_new(out, "relative",
                              s.has_mean && mc != 0 ? real_or_null(s.mean / mc) : json_null());
    if (rc != 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

json_t *evd_analysis_comparison_json(const struct evd_analysis *a, unsigned t, const char *label)
{
    const struct comparison_acc *cmp = &a->cmp[t];
    struct evd_stats_paired s;
    evd_analysis_pass_summary(a, t, &s);
    uint64_t n, wins, losses, ties;
    evd_analysis_pair_counts(cmp->pass, &n, &wins, &losses, &ties);
    json_t *out = json_object(), *metrics = json_object();
    int rc = out == NULL || metrics == NULL ? -1 : 0;
    rc |= json_object_set_new(out, "treatment", json_integer(t));
    if (label != NULL)
        rc |= json_object_set_new(out, "label", json_string(label));
    rc |= json_object_set_new(out, "paired_cases", uint_json(n));
    rc |= json_object_set_new(out, "unpaired_cases",
                              uint_json(a->cfg.cases > n ? a->cfg.cases - n : 0));
    rc |= json_object_set_new(out, "pass_rate", pass_rate_json(a, t));
    for (unsigned j = 0; j < EVD_ANALYSIS_METRICS; j++)
        rc |= json_object_set_new(metrics, evd_analysis_metric_names[j],
                                  metric_json(a, cmp->metric[j]));
    rc |= json_object_set_new(out, "metrics", metrics); /* steals */
    metrics = NULL;
    rc |= json_object_set_new(out, "verdict", json_string(evd_stats_verdict_name(s.verdict)));
    rc |= json_object_set_new(out, "eligible", json_boolean(evd_analysis_eligible(a, t)));
    json_decref(metrics);
    if (rc != 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

json_t *evd_analysis_info_json(const struct evd_analysis *a, const char *cluster_by, bool partial)
{
    json_t *out = json_object();
    int rc = out == NULL ? -1 : 0;
    rc |= json_object_set_new(out, "alpha", json_real(a->cfg.alpha));
    rc |= json_object_set_new(out, "alpha_adjusted",
                              json_real(a->cfg.alpha / (double)(a->cfg.arms - 1)));
    rc |= json_object_set_new(out, "min_effect", json_real(a->cfg.min_effect));
    rc |= json_object_set_new(out, "cluster_by",
                              cluster_by != NULL ? json_string(cluster_by) : json_null());
    rc |= json_object_set_new(out, "clusters",
                              cluster_by != NULL ? uint_json(a->cfg.clusters) : json_null());
    rc |= json_object_set_new(out, "partial", json_boolean(partial));
    if (rc != 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}
