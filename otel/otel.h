/*
 * The OTLP/HTTP trace exporter (docs/otel.md, shared contract: OpenTelemetry traces): the
 * standard OTEL_* variables read once at start-up, a bounded in-memory queue that the span
 * sink of common/trace.h fills, one export thread that sends batches as OTLP JSON or
 * protobuf through the harness's HTTP transport, retries with backoff (Retry-After
 * honoured), and a flush at shutdown. Exporting never blocks or fails a run: a full queue
 * drops the newest spans and counts them.
 * Thread-safety: evd_otel_start and evd_otel_stop run on the main thread before workers
 * start and after they stopped; the sink may be called from any thread (one mutex, never
 * held across I/O).
 */
#ifndef EVD_OTEL_OTEL_H
#define EVD_OTEL_OTEL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/trace.h"
#include "common/util.h"

enum evd_otel_protocol { EVD_OTEL_HTTP_JSON, EVD_OTEL_HTTP_PROTOBUF };

#define EVD_OTEL_MAX_HEADERS 32

/* What the variables said. Zero-initialise; evd_otel_config_free releases it. */
struct evd_otel_config {
    bool enabled;                  /* an endpoint was given and OTEL_SDK_DISABLED is not true */
    char *endpoint;                /* the full traces URL */
    enum evd_otel_protocol protocol;
    char *headers[EVD_OTEL_MAX_HEADERS]; /* "Name: value" lines, values percent-decoded */
    size_t nheaders;
    json_t *resource;              /* object: service.name, service.version, and the others */
    bool capture_content;
    int64_t schedule_delay_ms;     /* OTEL_BSP_SCHEDULE_DELAY, 5000 */
    int64_t max_queue;             /* OTEL_BSP_MAX_QUEUE_SIZE, 2048 */
    int64_t max_batch;             /* OTEL_BSP_MAX_EXPORT_BATCH_SIZE, 512 */
    int64_t timeout_ms;            /* OTEL_EXPORTER_OTLP_TIMEOUT, 10000 */
};

/*
 * Reads the OTEL_* variables through `get` (getenv in evald; a table in tests). EVD_EINVAL
 * with a message naming the variable when one is invalid (an unknown protocol, a number
 * that is not a non-negative integer, an endpoint that is not an http(s) URL, a malformed
 * k=v pair); the message never holds a header's value.
 */
enum evd_code evd_otel_config_read(const char *(*get)(const char *name),
                                   struct evd_otel_config *cfg, struct evd_err *err);
void evd_otel_config_free(struct evd_otel_config *cfg);

/*
 * Starts the export thread and registers the span sink when cfg->enabled (copies what it
 * needs of cfg); nothing otherwise. EVD_ENOMEM / EVD_EINTERNAL when the thread cannot start.
 */
enum evd_code evd_otel_start(const struct evd_otel_config *cfg, struct evd_err *err);
/* Unregisters the sink, exports what is queued within the configured timeout, joins the
 * thread and frees the rest. Safe without a start. */
void evd_otel_stop(void);

/* The exporter's counters, for /metrics and the tests. */
struct evd_otel_stats {
    uint64_t exported; /* spans a receiver accepted */
    uint64_t dropped;  /* spans dropped: queue full, or evicted while a batch was retried */
    uint64_t failed;   /* spans of batches refused for good (a 4xx other than 429) */
    uint64_t batches;  /* export requests that were accepted */
    uint64_t retries;  /* export attempts that will be tried again */
    uint64_t queued;   /* spans waiting now */
};
void evd_otel_stats(struct evd_otel_stats *out);
/* Appends the Prometheus text of the counters (evald_otel_spans_exported_total,
 * evald_otel_spans_dropped_total, evald_otel_export_failures_total, …); 0 or -1. */
int evd_otel_render_metrics(struct evd_buf *out);

/* ---- encodings (otel/encode.c) ------------------------------------------------------ */

/*
 * One ExportTraceServiceRequest of spans[0..n) under one resource (`resource`: an object
 * of attributes, borrowed) and the scope {"name": "evald", "version": EVALD_VERSION},
 * appended to *out. JSON follows OTLP's JSON mapping (hex ids, decimal-string times,
 * integer enums); protobuf is the binary encoding of the same message. 0, or -1 without
 * memory.
 */
int evd_otel_encode_json(struct evd_span *const *spans, size_t n, const json_t *resource,
                         struct evd_buf *out);
int evd_otel_encode_protobuf(struct evd_span *const *spans, size_t n, const json_t *resource,
                             struct evd_buf *out);

#endif
