/*
 * Traces of runs as OpenTelemetry spans (docs/otel.md): W3C trace-context ids, the span
 * record the harness and the engine fill in, and the process's one span sink, which the
 * OTLP exporter (otel/) registers at start-up. Without a sink every span is freed at once
 * and evd_trace_enabled() is false, so callers may skip building them.
 * Thread-safety: the sink and the capture flag are set once before any thread starts; a
 * span belongs to one thread until it is submitted, then to the sink.
 */
#ifndef EVD_COMMON_TRACE_H
#define EVD_COMMON_TRACE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define EVD_TRACE_ID_LEN 16
#define EVD_SPAN_ID_LEN 8
#define EVD_TRACEPARENT_LEN 55 /* "00-" 32 "-" 16 "-01", without the NUL */

/* A position in a trace: the trace and the span that children of it name as parent. */
struct evd_trace_ctx {
    unsigned char trace_id[EVD_TRACE_ID_LEN];
    unsigned char span_id[EVD_SPAN_ID_LEN];
};

/*
 * The trace of one attempt of a run, derived from its ids (SHA-256 of owner, run and
 * attempt), so every process computes the same ids and a run document names its trace
 * without storing it: trace_id for the attempt, span_id for its root span. `owner_id` is
 * the evaluation, experiment or session id; `run_id` unique within it.
 */
void evd_trace_for_run(const char *owner_id, const char *run_id, int attempt,
                       struct evd_trace_ctx *out);
/* The lowercase hex of a run attempt's trace id (33 bytes with the NUL). */
void evd_trace_id_for_run(const char *owner_id, const char *run_id, int attempt, char out[33]);
/* A random span id, never all zero. */
void evd_trace_random_span_id(unsigned char out[EVD_SPAN_ID_LEN]);
/* Lowercase hex of ctx's ids: trace_hex[33], span_hex[17] (either may be NULL). */
void evd_trace_hex(const struct evd_trace_ctx *ctx, char *trace_hex, char *span_hex);
/* "00-<trace>-<span>-01" and a NUL into out[EVD_TRACEPARENT_LEN + 1]. */
void evd_traceparent(const struct evd_trace_ctx *ctx, char out[EVD_TRACEPARENT_LEN + 1]);

/* Wall clock, Unix epoch nanoseconds. */
int64_t evd_now_ns(void);

/* OTLP's numbers for Span.SpanKind and Status.StatusCode. */
enum evd_span_kind { EVD_SPAN_INTERNAL = 1, EVD_SPAN_SERVER = 2, EVD_SPAN_CLIENT = 3 };
enum evd_span_status { EVD_SPAN_UNSET = 0, EVD_SPAN_OK = 1, EVD_SPAN_ERROR = 2 };

/*
 * One finished (or finishing) span. attributes is an object whose values are strings,
 * integers, reals, booleans or arrays of those (OTLP's AnyValue kinds); events an array of
 * {"name": string, "time_ns": integer, "attributes": object}. Both owned by the span.
 */
struct evd_span {
    struct evd_span *next; /* the sink's queue link */
    unsigned char trace_id[EVD_TRACE_ID_LEN];
    unsigned char span_id[EVD_SPAN_ID_LEN];
    unsigned char parent_span_id[EVD_SPAN_ID_LEN];
    bool has_parent;
    char name[192];
    enum evd_span_kind kind;
    int64_t start_ns, end_ns;
    enum evd_span_status status;
    char status_message[256];
    json_t *attributes;
    json_t *events;
};

/*
 * A new span in `parent`'s trace, child of parent->span_id when `child` (else a root
 * span whose id is parent->span_id itself: the root of a run is evd_trace_for_run's span).
 * A child gets a random span id. NULL without memory. The name is cut at 191 bytes.
 */
struct evd_span *evd_span_new(const struct evd_trace_ctx *parent, bool child, const char *name,
                              enum evd_span_kind kind, int64_t start_ns);
/* The span's own position (its trace and id), for its children and for traceparent. */
void evd_span_ctx(const struct evd_span *s, struct evd_trace_ctx *out);
/* Sets attribute `key` to `value` (steals; NULL is ignored). */
void evd_span_set(struct evd_span *s, const char *key, json_t *value);
void evd_span_set_str(struct evd_span *s, const char *key, const char *value); /* NULL: none */
void evd_span_set_int(struct evd_span *s, const char *key, int64_t value);
/* Adds an event (attrs stolen; NULL for none). */
void evd_span_event(struct evd_span *s, const char *name, int64_t time_ns, json_t *attrs);
/* Status ERROR with `error.type` = type and the status message (both may be NULL). */
void evd_span_fail(struct evd_span *s, const char *type, const char *message);
void evd_span_free(struct evd_span *s);

/* ---- the sink --------------------------------------------------------------------- */

/* Takes a finished span (stolen). Must not block. */
typedef void (*evd_span_sink_fn)(struct evd_span *span);
/* Registers the sink (NULL: none) and whether message content may be exported. Call before
 * threads start, or after they stopped. */
void evd_trace_set_sink(evd_span_sink_fn fn, bool capture_content);
/* Whether a sink is registered: spans are worth building. */
bool evd_trace_enabled(void);
/* Whether prompts, outputs and tool arguments may go into attributes. */
bool evd_trace_capture_content(void);
/* Ends nothing: hands `s` (stolen, NULL-safe) to the sink, or frees it without one. */
void evd_span_submit(struct evd_span *s);

#endif
