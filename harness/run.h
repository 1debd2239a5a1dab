/*
 * The state of one agent-loop run and the functions that the harness's loop files share
 * (harness/ only): setup.c checks the run description and builds the prompt and tools,
 * metrics.c keeps the spans, usage, cost and metrics, calls.c runs one function call, and
 * harness.c is the loop. A run lives on one thread and owns everything in it; its inputs
 * are borrowed.
 */
#ifndef EVD_HARNESS_RUN_H
#define EVD_HARNESS_RUN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "harness/internal.h"

struct evd_hx_run {
    const struct evd_providers *providers;
    const struct evd_harness_input *in;
    struct evd_cancel *cancel;
    struct evd_resolved_model rm;
    enum evd_provider_kind kind;
    struct evd_hx_client http;

    int64_t invocation_timeout_s, scenario_timeout_s, max_turns, max_out;
    bool has_max_total, has_max_cost;
    int64_t max_total_tokens;
    double max_cost_usd;
    const char *thinking;
    bool agent_trigger;
    json_t *policy;              /* borrowed; NULL = deny all */
    json_t *provider_options;    /* borrowed */
    struct evd_hx_output output; /* the final answer's contract and request format */
    char *system;

    struct evd_hx_function *fns; /* every known function; `allowed` marks the exposed ones */
    bool *allowed;
    size_t nfns;
    json_t *wire_tools;

    json_t *messages;
    json_t *spans;
    json_t *generations;
    json_t *fcalls;

    int64_t turns, function_calls, function_call_errors;
    struct evd_hx_usage tot;
    bool all_input, all_output, all_cache_read, all_cache_write, all_reasoning, all_priced;
    double cost_usd;
    int64_t limiter_wait_ms; /* the provider calls' waits for the rate limiter, in all */

    int64_t start_wall, start_mono, deadline;
};

/* setup.c: checks the input and fills the limits, prompt, functions, tools and the
 * starting conversation; err names the field at fault. */
enum evd_code evd_hx_run_setup(struct evd_hx_run *r, struct evd_err *err);

/* metrics.c. A span {name, kind, start_ms, end_ms, status, attributes (stolen), error?}
 * (new reference). */
json_t *evd_hx_span_new(const char *name, const char *kind, int64_t start, int64_t end,
                        const char *error, json_t *attrs);
/* Adds one generation's usage to the run's totals. */
void evd_hx_run_add_usage(struct evd_hx_run *r, const struct evd_hx_usage *u);
/* Cost of one generation, or a negative number when it cannot be priced. */
double evd_hx_run_generation_cost(const struct evd_hx_run *r, const char *model,
                                  const struct evd_hx_usage *u);
/* The usage fields a generation reports (new reference). */
json_t *evd_hx_usage_json(const struct evd_hx_usage *u);
/* The run's metrics so far, complete:true (new reference; NULL when out of memory). */
json_t *evd_hx_run_metrics(const struct evd_hx_run *r);
/* Hands a snapshot of the metrics so far to the input's progress callback, if any. */
void evd_hx_run_progress(const struct evd_hx_run *r);

/* trace.c: the OpenTelemetry spans of a generation and of a function call (docs/otel.md).
 * evd_hx_trace_chat submits the span of one generation (reply NULL when it failed);
 * evd_hx_trace_tool_begin opens a function call's span (NULL when the run has no trace or
 * nothing is exported) and writes the traceparent the callee gets ("" without a trace);
 * evd_hx_trace_tool_end finishes and submits it (NULL-safe; arguments and result borrowed). */
struct evd_span;
void evd_hx_trace_chat(const struct evd_hx_run *r, const struct evd_hx_request *q,
                       const struct evd_hx_call *call, const struct evd_hx_reply *reply,
                       int64_t w0, int64_t w1);
struct evd_span *evd_hx_trace_tool_begin(const struct evd_hx_run *r, const char *function_id,
                                         bool http, char traceparent[56]);
void evd_hx_trace_tool_end(struct evd_span *s, const char *function_id, const char *wire_name,
                           const char *call_id, json_t *arguments, json_t *result,
                           const char *error);

/* mock.c: mocked tools (docs/harness.md "Mocked tools").
 * evd_hx_mock_count checks in->mock_tools (EVD_EINVAL naming mock_tools[i], or a name
 * that is also a registered tool or dispatch function) and sets *n to their number;
 * evd_hx_mock_load then appends them to r->fns (room for *n reserved by the caller),
 * always allowed, each named for the wire as is when provider-safe ([A-Za-z0-9_-],
 * at most 64, not taken) and else as evd_hx_tool_name makes it.
 * evd_hx_mock_answer answers one call of fn (its payload already valid) from
 * in->tool_results: a new reference, or NULL with *err "no mocked result for <name>"
 * (EVD_ENOTFOUND); it counts the call for the k-th item of a sequence. */
enum evd_code evd_hx_mock_count(const struct evd_hx_run *r, size_t *n, struct evd_err *err);
void evd_hx_mock_load(struct evd_hx_run *r);
json_t *evd_hx_mock_answer(const struct evd_hx_run *r, struct evd_hx_function *fn, json_t *payload,
                           struct evd_err *err);

/* calls.c: runs one function call the model asked for and appends the tool message, the
 * span and the transcript entry. EVD_ECANCELLED when the run was cancelled during it. */
enum evd_code evd_hx_run_call(struct evd_hx_run *r, json_t *call, int64_t turn);

#endif
