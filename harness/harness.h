/*
 * The agent harness: one run is one agent turn (prompt in, model generations and function
 * calls, final answer out) with every token, dollar, millisecond and call accounted for.
 * The harness knows no SQL and serves no HTTP: the engine hands it a run description,
 * a provider registry and a cancel token, and gets an outcome back.
 * Thread-safety: evd_harness_run may run on many threads at once; each call owns its
 * scratch state, and each thread keeps its own connection cache (a curl multi handle,
 * freed when the thread exits or calls evd_harness_thread_cleanup). A cancel token is shared between the run's thread and
 * any thread that cancels it. Inputs are borrowed for the duration of the call; outcome
 * fields are new references owned by the caller until evd_harness_outcome_clear.
 */
#ifndef EVD_HARNESS_HARNESS_H
#define EVD_HARNESS_HARNESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/cancel.h" /* the token every run takes */
#include "common/err.h"
#include "common/trace.h"
#include "harness/providers.h"
#include "schema/structured.h"

/* ---- rate limits ------------------------------------------------------------------------ */

struct evd_buf;
/* Appends the Prometheus text of every provider/model limiter (in flight, waiting, window,
 * limits in force, calls, 429s and the time waited) to out; nonzero without memory. */
int evd_hx_limiter_render(struct evd_buf *out);
/*
 * What every provider/model limiter of this process shows now: new reference to
 * [{provider, model, in_flight, waiting, window, share, part, limit_rpm, limit_tpm (null:
 *   none known),
 *   rpm_configured, tpm_configured, calls, throttled, hold_ms (0: no hold), held_until
 *   (epoch ms, or null), limiter_wait_ms}], ordered by provider then model; NULL without
 * memory. A limiter exists once a call to its model was made.
 */
json_t *evd_hx_limiter_view(void);
/* Forgets every limiter, what it learnt and its counters (the next call starts afresh with
 * the providers file's limits): for a test process that runs many cases. No provider call
 * may be in flight. */
void evd_hx_limiter_forget(void);
/*
 * What this process asks of each limit it knows, for the split of a limit between the
 * processes of a database (harness/ratelimit.h, evd_rl_part; the engine's keeper trades
 * the figures through the database): a limiter with a known limit has its calls waiting
 * plus the calls it let through since the last call of this function. Fills out[0..max)
 * and returns how many.
 */
struct evd_hx_demand {
    char provider[72];
    char model[256];
    int demand;
};
size_t evd_hx_limiter_demands(struct evd_hx_demand *out, size_t max);
/* Makes `part` (0, 1] the agreed part of the limit of provider/model (no limiter: none). */
void evd_hx_limiter_set_part(const char *provider, const char *model, double part);

/* ---- other function sources ----------------------------------------------------------- */

/*
 * A function source besides HTTP tools (the iii adapter): `functions` is a borrowed array of
 * {id, description, request_schema}; `call` runs one of them and returns a new reference to
 * its JSON result, or NULL with *err set (EVD_ETIMEOUT when timeout_ms passed). `call` is
 * invoked on the run's thread; `payload` is borrowed.
 */
struct evd_harness_dispatch {
    json_t *functions;
    json_t *(*call)(void *ctx, const char *function_id, json_t *payload, int64_t timeout_ms,
                    struct evd_err *err);
    void *ctx;
};

/* ---- run description ------------------------------------------------------------------ */

/*
 * Everything one run needs; every pointer is borrowed for the duration of evd_harness_run.
 * JSON values follow the seed's shapes, already normalized by the domain layer:
 *   model      {model, provider?, system_prompt_strategy, mode?, thinking_level?,
 *               provider_options?}
 *   limits     {execution{invocation_timeout_seconds, scenario_timeout_seconds, max_turns,
 *               max_output_tokens_per_call, max_total_tokens?, max_cost_usd?}, evaluation{}}
 *              (missing execution fields take the seed defaults)
 *   functions  {allow[], deny[], expose:"native"|"agent_trigger"}; NULL = deny everything
 *   output     {type:"text"} | {type:"json", schema?}; NULL = text
 *   tools      [{id, description, request_schema, url, timeout_ms}] HTTP tools; NULL = none
 *   conversation  the `conversation` of an earlier outcome of the same session, for a
 *               follow-up message; NULL for a first message
 * The last members serve callers other than an evaluation run (the agent review evaluator):
 *   contract   the final answer's structured-output contract (e.g. a GREEN/RED verdict);
 *              when set it replaces `output`. NULL: `output` decides
 *   max_tool_calls  with has_max_tool_calls, the function calls the run may execute; the
 *              next call fails the run (phase "limit") before it runs
 *   mock_tools, tool_results  mocked tools and the case's answers to them (below)
 */
struct evd_harness_input {
    const char *session_id;    /* required; sent as X-Evald-Session */
    const char *prompt;        /* required, the user message; "" when `conversation` ends
                                  with the user's message, which is then sent as it is */
    const char *system_prompt; /* NULL = none, "" = built-in identity prompt, else text */
    json_t *model;
    json_t *limits;
    json_t *functions;
    json_t *output;
    json_t *metadata;
    json_t *tools;
    json_t *conversation;
    const struct evd_harness_dispatch *dispatch; /* optional */
    /*
     * Optional progress report: called on the run's thread after each successful generation
     * that the loop goes on from (function calls to run, or a repair to ask for; not after
     * the final answer, whose figures come with the outcome) and after each function call,
     * with a snapshot of the turn's metrics so far (a
     * SessionMetricsResponseV1 with complete:false, traces of the spans so far; borrowed for
     * the call only). It delays the loop while it runs, so it must be quick.
     */
    void (*progress)(void *ctx, json_t *metrics);
    void *progress_ctx;
    const struct evd_so_contract *contract;      /* optional, borrowed */
    /* The run's root span (common/trace.h), or NULL: generations and function calls become
     * its child spans, and HTTP tools get a traceparent naming their call's span. */
    const struct evd_trace_ctx *trace;
    /* A run with no root span of its own (a judge's call, docs/judges.md): its first
     * generation's `chat` span is the trace's root (trace's span id), later ones its
     * children; `span_attributes` (an object, borrowed, or NULL) go on every `chat` span. */
    bool chat_root;
    const json_t *span_attributes;
    bool has_max_tool_calls;
    int64_t max_tool_calls;
    /*
     * Mocked tools (harness/mock.c, docs/harness.md "Mocked tools"): mock_tools is an
     * experiment's [{name, description?, parameters?}] (borrowed, NULL = none), each
     * offered natively whatever `functions` says; tool_results is the case's object
     * {"<name>": value | [value, …] | [{when, result}, …]} (borrowed, NULL = none) that
     * answers their calls, which never reach the network.
     */
    json_t *mock_tools;
    json_t *tool_results;
    /* Calls of each mocked tool made before this run, {name: n} (a conversation's earlier
     * agent turns, engine/simulate.c), so that a sequence goes on where it was; borrowed,
     * NULL = none. */
    json_t *mock_counts;
};

enum evd_harness_status {
    EVD_HARNESS_COMPLETED,
    EVD_HARNESS_FAILED,
    EVD_HARNESS_CANCELLED,
};

/*
 * What a run produced. All json_t fields are new references (or NULL), result_error is
 * malloc'd (or NULL); release everything with evd_harness_outcome_clear.
 *   output      the final answer: a JSON string for text output, the decoded value for json
 *               output; NULL when the run produced none
 *   metrics     SessionMetricsResponseV1 (complete:true, one session, traces included)
 *   spans       [{name, kind:"run"|"generation"|"function", start_ms, end_ms, status:"ok"|
 *               "error", error?, attributes{}}], the run span first
 *   transcript  {generations:[…], function_calls:[…]} (see docs/harness.md); never a key
 *   conversation  provider-neutral messages (prior + this turn) to pass back as
 *               input.conversation for a follow-up message
 */
struct evd_harness_outcome {
    enum evd_harness_status status;
    json_t *output;
    char *result_error;
    const char *phase;  /* when failed or cancelled: "setup", "send", "limit", "await" */
    enum evd_code code; /* EVD_OK when completed */
    /*
     * True when the run failed because its final answer still broke the output contract
     * after the one repair turn (phase "await", code EVD_EINVAL). result_error is then the
     * failure code alone ("schema_mismatch: …"), never the model's output.
     */
    bool output_invalid;
    json_t *metrics;
    json_t *spans;
    json_t *transcript;
    json_t *conversation;
    int64_t started_at_ms; /* wall clock */
    int64_t wall_time_ms;
    /* Of the wall time, how long the run's provider calls waited for the process's rate
     * limiter before they were sent (all attempts of all generations); each generation
     * span has its own as the attribute limiter_wait_ms. */
    int64_t limiter_wait_ms;
};

/*
 * Runs one agent turn to the end and fills *out (which the caller zero-initialises). Always
 * fills an outcome, even for bad input (status failed, phase "setup") or cancellation;
 * returns EVD_OK, or EVD_ENOMEM with *err set when not even an outcome could be built.
 * `cancel` may be NULL.
 */
enum evd_code evd_harness_run(const struct evd_providers *providers,
                              const struct evd_harness_input *in, struct evd_cancel *cancel,
                              struct evd_harness_outcome *out, struct evd_err *err);

/* Releases every field of *o and zeroes it. NULL-safe. */
void evd_harness_outcome_clear(struct evd_harness_outcome *o);

/* Closes the calling thread's kept-alive provider connections now rather than at thread
 * exit (the main thread's are otherwise never released). */
void evd_harness_thread_cleanup(void);

/* "completed", "failed" or "cancelled". */
const char *evd_harness_status_name(enum evd_harness_status s);

/*
 * Recomputes a SessionTraceMetricsV1 object from a span array shaped like outcome.spans
 * (e.g. after the engine appended its evaluator span). New reference, NULL on ENOMEM.
 */
json_t *evd_harness_traces_from_spans(const char *session_id, json_t *spans);

/* The built-in identity prompt ("" system prompt) and the mode paragraphs. */
extern const char EVD_HARNESS_IDENTITY_PROMPT[];
extern const char EVD_HARNESS_MODE_ASK[];
extern const char EVD_HARNESS_MODE_AGENT[];

/*
 * The system prompt a run sends for (system_prompt, strategy, mode): *out is a malloc'd
 * string the caller frees, or NULL when no system prompt is sent. system_prompt NULL means
 * none, "" the identity prompt; strategy NULL means "enrich"; mode NULL, "ask" or "agent".
 * EVD_EINVAL names model.system_prompt_strategy or model.mode when unknown.
 */
enum evd_code evd_harness_system_prompt(const char *system_prompt, const char *strategy,
                                        const char *mode, char **out, struct evd_err *err);

/*
 * POSTs `body` (borrowed) as JSON to an HTTP evaluator at `url`, on the transport of the
 * provider calls (connections kept per thread, the cancel token checked every 50 ms), and
 * returns its JSON answer (new reference), or NULL with *err: EVD_ECANCELLED ("evaluator
 * call cancelled"), EVD_ETIMEOUT ("evaluator exceeded its <n> ms timeout"), EVD_EUPSTREAM
 * ("could not call the evaluator: …", "evaluator returned HTTP <status>", "evaluator
 * answered invalid JSON: …"). `session_id` goes out as X-Evald-Session, and `traceparent`
 * (a W3C trace-context value, or NULL) as traceparent.
 */
json_t *evd_harness_post_json(const char *url, const json_t *body, int64_t timeout_ms,
                              const char *session_id, const char *traceparent,
                              struct evd_cancel *cancel, struct evd_err *err);

/*
 * What evd_harness_post_bytes got back. status is 0 when no answer arrived (then error says
 * why, e.g. curl's message); retry_after_ms is -1 without a usable Retry-After.
 */
struct evd_harness_post_result {
    long status;
    int64_t retry_after_ms;
    bool timed_out;
    char error[256];
};

/*
 * POSTs body[0..len) to `url` with `content_type` and the extra header lines
 * headers[0..nheaders) ("Name: value", borrowed; never logged) within timeout_ms, on the
 * transport of the provider calls (the calling thread's kept-alive connections). The
 * answer's body is read (bounded) and discarded. EVD_OK when an answer arrived (any status:
 * see res->status), EVD_ETIMEOUT or EVD_EUPSTREAM when none did, EVD_ENOMEM.
 */
enum evd_code evd_harness_post_bytes(const char *url, const char *content_type,
                                     const char *const *headers, size_t nheaders,
                                     const void *body, size_t len, int64_t timeout_ms,
                                     struct evd_harness_post_result *res);

#endif
