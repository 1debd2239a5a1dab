/*
 * The running analysis of an experiment (the spec's arms[] and comparisons[]), kept as an
 * accumulator that the engine updates in O(arms) per finished run instead of a pass over
 * all runs; the formulas themselves are in stats.h.
 *
 * Model. For case i and arm a the caller keeps one `struct evd_analysis_cell` (k_ia, x_ia,
 * the order counts and the per-case medians of the metrics), a few dozen bytes a cell; it
 * needs them for the per-case rows anyway. When a run of (i, a) finishes the caller builds
 * the cell's new value (evd_analysis_cell_from_runs over the case's runs of that arm, at
 * most `repeats` of them) and calls evd_analysis_set_cell with the case's current row of
 * cells: the accumulator takes out what the old cell contributed and puts in the new one.
 * Changing the control's cell touches the m comparisons, a treatment's cell one.
 *
 * What it keeps, per arm: pooled (passed, evaluated, runs), Σ s_ia and the number of
 * cases with k_ia >= 1 (the case-weighted pass rate), the order counts, the flaky cases.
 * Per comparison and per quantity (pass rate and each metric): a `struct evd_analysis_pair`
 * holding, for the paired cases, n, Σ e_i and Σ e_i² of the shifted differences
 * e_i = d_i − K (K the first difference seen, which cancels in every spread and keeps
 * the sums small), wins/losses/ties, Σ control and Σ treatment values, and with
 * clustering per cluster S_c = Σ_{i∈c} e_i and n_c plus the running sums
 *   Q = Σ_c S_c²,  P = Σ_c n_c S_c,  N2 = Σ_c n_c²,
 * so that the clustered sum needs no pass over the clusters:
 *   Σ_c (Σ_{i∈c} (d_i − d̄))² = Σ_c (S_c − n_c ē)²          (d_i − d̄ = e_i − ē)
 *                             = Σ_c S_c² − 2ē Σ_c n_c S_c + ē² Σ_c n_c²
 *                             = Q − 2ē P + ē² N2,            ē = Σ e_i / n.
 * Adding or removing one d_i in cluster c changes S_c and n_c only, and Q, P, N2 by the
 * differences of their terms for c: O(1). Every real sum is compensated
 * (evd_stats_sum), and the counts of d_i = 0 and d_i = K are exact, so all-equal
 * differences (the se = 0 rules) are recognised exactly however long the history.
 *
 * After a restart the engine rebuilds the accumulator from its stored cells (each set once
 * on an empty row: a pass over cells, not runs); a finished experiment's JSON is stored.
 *
 * Memory: O(arms) without clustering; with C clusters (1 + 11 metrics) · m · C · 24 bytes.
 * Not thread-safe: one accumulator belongs to one writer (the engine serialises the
 * updates of an experiment); the JSON builders only read it.
 */
#ifndef EVD_DOMAIN_ANALYSIS_H
#define EVD_DOMAIN_ANALYSIS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "domain/stats.h"

/* The metrics of the analysis, in the order of evd_analysis_metric_names. */
enum {
    EVD_METRIC_TOTAL_TOKENS,
    EVD_METRIC_INPUT_TOKENS,
    EVD_METRIC_OUTPUT_TOKENS,
    EVD_METRIC_REASONING_TOKENS,
    EVD_METRIC_COST_USD,
    EVD_METRIC_WALL_TIME_MS,
    EVD_METRIC_TURNS,
    EVD_METRIC_FUNCTION_CALLS,
    EVD_METRIC_FUNCTION_CALL_ERRORS,
    EVD_METRIC_JUDGE_TOTAL_TOKENS, /* the agent review's own model use (engine/scenario.c) */
    EVD_METRIC_JUDGE_COST_USD,
    EVD_ANALYSIS_METRICS
};

/* "total_tokens", "input_tokens", … "function_call_errors": the spec's metric names, then
 * "judge_total_tokens" and "judge_cost_usd". */
extern const char *const evd_analysis_metric_names[EVD_ANALYSIS_METRICS];

/* Arm a on case i. */
struct evd_analysis_cell {
    uint32_t runs;                       /* terminal runs */
    uint32_t evaluated;                  /* k_ia: runs with a verdict (passed not null) */
    uint32_t passed;                     /* x_ia */
    uint32_t first_runs;                 /* evaluated runs that ran first in their repeat ... */
    uint32_t first_passed;               /* ... and of those the passed ones */
    uint32_t metric_mask;                /* bit j set: median[j] is known */
    double median[EVD_ANALYSIS_METRICS]; /* per-case median over the runs that reported j */
};

/* One finished run, as evd_analysis_cell_from_runs reads it. */
struct evd_analysis_run {
    bool evaluated; /* the evaluator gave a verdict */
    bool passed;
    bool first;           /* ran first in its repeat: position (repeat − 1)·arms + 1 (plan.h) */
    uint32_t metric_mask; /* bit j: metric[j] was reported */
    double metric[EVD_ANALYSIS_METRICS];
};

/*
 * The cell of `n` terminal runs (borrowed) of one arm on one case: counts, and per metric
 * the median (stats.h) of the reported values. `scratch` holds n doubles. Non-finite
 * metric values count as not reported.
 */
void evd_analysis_cell_from_runs(const struct evd_analysis_run *runs, size_t n, double *scratch,
                                 struct evd_analysis_cell *out);

/* ---- one paired quantity (public for tests/stats and for reuse) ---- */

struct evd_analysis_pair;

/* A pair accumulator; nclusters = 0 for no clustering. NULL on ENOMEM. */
struct evd_analysis_pair *evd_analysis_pair_new(size_t nclusters);
void evd_analysis_pair_free(struct evd_analysis_pair *pair);

/*
 * Adds (sign = +1) or removes (sign = −1, a value added before) the paired case with
 * control value `control` and treatment value `treatment` (d = treatment − control) in
 * `cluster` (< nclusters; ignored without clustering). O(1).
 */
void evd_analysis_pair_add(struct evd_analysis_pair *pair, uint32_t cluster, double control,
                           double treatment, int sign);

/* The moments (stats.h) of the pairs held. */
void evd_analysis_pair_moments(const struct evd_analysis_pair *pair, struct evd_stats_moments *out);

/* Paired cases, and the signs of their differences. */
void evd_analysis_pair_counts(const struct evd_analysis_pair *pair, uint64_t *n, uint64_t *wins,
                              uint64_t *losses, uint64_t *ties);

/* Mean of the control and of the treatment values over the paired cases (n >= 1). */
void evd_analysis_pair_means(const struct evd_analysis_pair *pair, double *control,
                             double *treatment);

/* ---- the experiment ---- */

struct evd_analysis_config {
    unsigned arms;     /* 2..5: control and 1..4 treatments */
    size_t cases;      /* dataset cases */
    size_t clusters;   /* distinct cluster_by values (cases carry 0..clusters−1); 0: none */
    double alpha;      /* 0 < alpha < 0.5 */
    double min_effect; /* 0 <= min_effect <= 1 */
};

struct evd_analysis;

/* An empty accumulator (no run yet). NULL on ENOMEM or an arms count outside 2..5. */
struct evd_analysis *evd_analysis_new(const struct evd_analysis_config *config);
void evd_analysis_free(struct evd_analysis *a);

/*
 * Case `cells` (config.arms entries, the case's current row; borrowed) changes arm `arm`'s
 * cell to *after: the accumulator exchanges the old cell's contributions for the new
 * one's, and cells[arm] = *after. `cluster` is the case's cluster (0 without clustering);
 * a case never changes cluster. O(arms · metrics).
 */
void evd_analysis_set_cell(struct evd_analysis *a, uint32_t cluster,
                           struct evd_analysis_cell *cells, unsigned arm,
                           const struct evd_analysis_cell *after);

/* The pass-rate summary of treatment t (1..arms−1) (stats.h). */
void evd_analysis_pass_summary(const struct evd_analysis *a, unsigned t,
                               struct evd_stats_paired *out);

/* The seed's eligibility of treatment t over the whole experiment. */
bool evd_analysis_eligible(const struct evd_analysis *a, unsigned t);

/*
 * arms[a] without `medians`: {index, label (when not NULL), role, pass_rate, pooled:
 * {passed, evaluated, wilson_low, wilson_high}, evaluated_cases, flaky_cases, order:
 * {first_passed, first_runs, later_passed, later_runs}}. pass_rate is null before any
 * evaluated case, the Wilson bounds before any evaluated run. New reference, or NULL on
 * ENOMEM.
 */
json_t *evd_analysis_arm_json(const struct evd_analysis *a, unsigned arm, const char *label);

/*
 * comparisons[t−1]: {treatment, label (when not NULL), paired_cases, unpaired_cases
 * (cases − paired_cases: not, or not yet, in the paired analysis), pass_rate: {control,
 * treatment, delta, se, df, ci_low, ci_high, t_p_value, p_value_adjusted, sign_test:
 * {wins, losses, ties, p_value}, mde, cases_needed}, metrics: {<name>: {cases, delta, se,
 * df, ci_low, ci_high, relative}}, verdict, eligible}. control and treatment are the mean
 * case pass rates over the paired cases (so delta = treatment − control); null where
 * stats.h leaves a value undefined. New reference, or NULL on ENOMEM.
 */
json_t *evd_analysis_comparison_json(const struct evd_analysis *a, unsigned t, const char *label);

/*
 * The `analysis` member: {alpha, alpha_adjusted, min_effect, cluster_by, clusters,
 * partial}; cluster_by NULL gives null there and in clusters. New reference, or NULL.
 */
json_t *evd_analysis_info_json(const struct evd_analysis *a, const char *cluster_by, bool partial);

#endif
