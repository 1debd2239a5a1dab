/*
 * The handler pool: threads that run the work an HTTP thread must not wait for (a
 * handler that reads or writes the database, a stream's next piece, an upload's end).
 * The HTTP threads only parse, route, answer the cheap routes, and move bytes.
 *
 * A job is the caller's struct with a struct evd_pool_job embedded (no allocation per
 * job, so a submit cannot fail). Jobs run in the order they were submitted, except urgent
 * ones (a readiness probe), which go before every job not yet started. The job's run
 * function owns the job from then on: it frees it, or hands it on.
 *
 * Stop: evd_pool_stop runs what is still queued, then joins the threads; nothing may be
 * submitted after it began. Thread-safety: evd_pool_submit from any thread.
 */
#ifndef EVD_SERVER_POOL_H
#define EVD_SERVER_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

struct evd_pool_job {
    void (*run)(struct evd_pool_job *job);
    struct evd_pool_job *next; /* the pool's */
};

struct evd_pool;

/*
 * Starts `threads` threads (at least 1). With `metrics` (e.g. "evald_http_handlers") the
 * pool keeps the gauges <metrics>_queued and <metrics>_busy of common/prometheus.h up to
 * date; NULL for none. NULL with *err set when no thread could start.
 */
struct evd_pool *evd_pool_start(unsigned threads, const char *metrics, struct evd_err *err);
/* Queues `job` (its run set by the caller). */
void evd_pool_submit(struct evd_pool *p, struct evd_pool_job *job, bool urgent);
/* Jobs queued and not started, and jobs running, now (for /metrics). */
void evd_pool_stats(struct evd_pool *p, size_t *queued, size_t *running);
/* Runs what is queued, joins the threads, frees the pool. NULL-safe. */
void evd_pool_stop(struct evd_pool *p);

#endif
