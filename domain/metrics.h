/*
 * Run metrics: the shape check of a SessionMetricsResponseV1 (what the harness reports
 * for one run's session tree) and the per-run benchmark (EvalBenchmarkV1) derived from
 * it. Pure; thread-safe; JSON arguments are borrowed.
 */
#ifndef EVD_DOMAIN_METRICS_H
#define EVD_DOMAIN_METRICS_H

#include <jansson.h>
#include <stdint.h>

#include "common/err.h"

/*
 * Checks that metrics is a SessionMetricsResponseV1: required members, types, unsigned
 * integers, and no unknown member at any level. Messages name the field under `path`
 * (e.g. "metrics.totals.turns must be an integer",
 * "metrics.by_session[0].colour is not a known field").
 */
enum evd_code evd_metrics_check(const json_t *metrics, const char *path, struct evd_err *err);

/*
 * The EvalBenchmarkV1 of a run: wall_time_ms, sessions (= by_session length), turns,
 * function_calls, function_call_errors, the token counts and cost_usd the totals carry,
 * total_tokens = input + output (saturating) only when both are present, and
 * trace_count / span_count / error_span_count / trace_duration_ms from `traces` when
 * present. A benchmark exists only for complete metrics: *out is NULL when metrics is
 * NULL or its `complete` is not true. *out is a new reference. Returns EVD_OK, or
 * EVD_ENOMEM.
 */
enum evd_code evd_metrics_benchmark(const json_t *metrics, uint64_t wall_time_ms, json_t **out);

#endif
