/*
 * Process-wide Prometheus metrics: HTTP request counts and latency histograms by
 * route, method and status, plus named counters and gauges other layers bump.
 * Thread-safe (one mutex, never held while calling out). Rendering produces the
 * Prometheus text exposition format 0.0.4.
 */
#ifndef EVD_COMMON_PROMETHEUS_H
#define EVD_COMMON_PROMETHEUS_H

#include "common/util.h"

/* Records one HTTP request. `route` is the matched pattern (or "unmatched"). */
void evd_metrics_http(const char *route, const char *method, int status, double seconds);

/* Adds `delta` to counter `name` (a valid Prometheus name, e.g. evald_runs_total)
 * with an optional single label `label="value"` (both NULL for none). */
void evd_metrics_count(const char *name, const char *label, const char *value, double delta);

/* Sets gauge `name` to `value`. */
void evd_metrics_gauge(const char *name, double value);

/* Appends the exposition text to *out; returns 0 or -1 when out of memory. */
int evd_metrics_render(struct evd_buf *out);

#endif
