/*
 * Aggregates over the runs of an evaluation: per-variant summaries
 * (VariantAggregateV1), the treatment-minus-control delta (AggregateDeltaV1), the
 * eligibility of the treatment, and order sensitivity (OrderSensitivityV1).
 *
 * A variant aggregate counts the variant's terminal runs (completed, failed,
 * cancelled): runs; evaluated_runs (passed not null); passed; pass_rate =
 * passed / evaluated_runs, 0.0 when nothing was evaluated; benchmarked_runs; and
 * medians: median_score over finite evaluation scores, median_wall_time_ms,
 * median_function_calls, median_function_call_errors over every benchmark, and the
 * token, cost and trace medians over the benchmarks that carry the value. A median of
 * nothing is left out.
 * Medians: integers sorted, the middle one, or floor((a + b) / 2) for an even count
 * ([10,20] -> 15, [1,2] -> 1); reals drop non-finite values, then the middle one or
 * (a + b) / 2.
 * Delta: pass_rate always; median_score, median_wall_time_ms, median_total_tokens,
 * median_reasoning_tokens, median_function_calls, median_function_call_errors,
 * median_cost_usd, median_trace_count, median_span_count, median_error_span_count and
 * median_trace_duration_ms as reals (treatment − control), each left out when either
 * side lacks it or the difference is not finite. Negative efficiency deltas are
 * improvements; efficiency never decides eligibility.
 * Eligible (only with an evaluator): the treatment has terminal runs, all were
 * evaluated, all passed, and it passed at least as many as the control.
 * Order sensitivity per variant over its evaluated runs: first_runs/first_passed
 * (pair_position 1), second_runs/second_passed (pair_position 2); differs when both
 * are non-empty and the pass rates differ (compared exactly by cross-multiplication);
 * detected when either variant differs.
 *
 * Pure; thread-safe; `runs` is a borrowed array of EvalRunV1 objects; results are new
 * references, or NULL on ENOMEM.
 */
#ifndef EVD_DOMAIN_AGGREGATE_H
#define EVD_DOMAIN_AGGREGATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "domain/vocab.h"

/* Median with the integer rule; sorts v in place; false when n == 0. */
bool evd_aggregate_median_u64(uint64_t *v, size_t n, uint64_t *out);

/* Median with the real rule; reorders v in place; false when no finite value. */
bool evd_aggregate_median_f64(double *v, size_t n, double *out);

/* VariantAggregateV1 of one role. */
json_t *evd_aggregate_variant(const json_t *runs, enum evd_role role);

/* AggregateDeltaV1 of two VariantAggregateV1 objects (borrowed). */
json_t *evd_aggregate_delta(const json_t *control, const json_t *treatment);

/* 1 eligible, 0 not eligible, -1 unknown (no evaluator: `eligible` is left out). */
int evd_aggregate_eligible(const json_t *control, const json_t *treatment, bool has_evaluator);

/* OrderSensitivityV1 of a runs array. */
json_t *evd_aggregate_order_sensitivity(const json_t *runs);

#endif
