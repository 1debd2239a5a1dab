/*
 * eval::compare-sessions in the domain: the request (2–5 unique session ids and a
 * baseline among them, with the reference's messages) and the comparison built from what
 * the store read about each session: metrics in the SessionMetricsResponseV1 shape, the
 * lifecycle, the summary metrics and their deltas against the baseline.
 * Pure; thread-safe; JSON arguments are borrowed.
 */
#ifndef EVD_DOMAIN_COMPARE_H
#define EVD_DOMAIN_COMPARE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define EVD_COMPARE_MIN 2
#define EVD_COMPARE_MAX 5

/* A decoded request; the strings are borrowed from the body. */
struct evd_compare_request {
    const char *ids[EVD_COMPARE_MAX];
    size_t n;
    size_t baseline; /* index into ids */
};

/*
 * {session_ids:[…], baseline_session_id}; unknown members are refused ("colour is not a
 * known field"). Shape messages: "session_ids is required", "session_ids must be an array",
 * "session_ids[1] must be a string", "baseline_session_id is required",
 * "baseline_session_id must be a string". Then, in this order:
 *   "session_ids must contain between 2 and 5 sessions"
 *   "session_ids cannot contain empty values"   (blank after Unicode trim)
 *   "session_ids must be unique"
 *   "baseline_session_id must belong to session_ids"
 */
enum evd_code evd_compare_request_decode(const json_t *body, struct evd_compare_request *out,
                                         struct evd_err *err);

/*
 * What is known of one compared session. `metrics` are the figures of its finished turns
 * (ad-hoc session) or its final run metrics (evaluation run), `progress` the snapshot of
 * the turn or run in flight; either may be NULL. Stored JSON is checked here: a value that
 * is not a SessionMetricsResponseV1 becomes an entry of the item's `errors`.
 */
struct evd_compare_source {
    const char *session_id;
    const char *kind;        /* "session", "evaluation_run" or "experiment_run" */
    const char *title;       /* may be NULL */
    const json_t *session;   /* the metadata projection, copied into the item */
    const char *turn_status; /* queued|running|completed|failed|cancelled, NULL before any */
    bool terminal;           /* nothing is queued or running */
    const json_t *metrics;
    const json_t *progress;
    bool has_wall_time;
    int64_t wall_time_ms;
    const char *error; /* a read failure to report in the item, or NULL */
};

/*
 * The SessionComparisonV1 for sources[0..n) with sources[baseline] as the baseline (new
 * reference, NULL on ENOMEM). Each item: session_id, kind, title, session, lifecycle
 * {turn_status, terminal, complete, partial}, metrics (or null), summary, deltas, errors.
 * While a session is not terminal its metrics are the finished figures plus the snapshot
 * in flight, with complete:false, and the item says partial:true.
 */
json_t *evd_compare_build(const struct evd_compare_source *sources, size_t n, size_t baseline,
                          int64_t captured_at);

/*
 * The summary metrics of a SessionMetricsResponseV1 (NULL gives every metric null):
 * generations, input/output/total/cache/reasoning tokens, cost_usd, tokens and cost per
 * generation, function calls, errors and error rate, trace/span/error-span counts and
 * trace duration, wall_time_ms (when has_wall_time), sessions, descendants, max_depth.
 * New reference, NULL on ENOMEM.
 */
json_t *evd_compare_summary(const json_t *metrics, bool has_wall_time, int64_t wall_time_ms);

/*
 * One {absolute, percent} per summary metric: absolute = value − baseline, percent =
 * absolute / baseline × 100; both null when either value is null (or either summary is
 * NULL), percent null when the baseline is 0. New reference, NULL on ENOMEM.
 */
json_t *evd_compare_deltas(const json_t *summary, const json_t *baseline);

/* The summary metric names in display order, NULL-terminated. */
extern const char *const EVD_COMPARE_METRICS[];

#endif
