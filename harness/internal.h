/*
 * Internal interfaces of the harness folder (evd_hx_ prefix): the HTTP transport with
 * cancellation and retries, the three wire formats, the function policy and the HTTP
 * tools. Not for other layers. Everything here runs on the calling run's thread; json_t
 * ownership is stated per function.
 *
 * The provider-neutral conversation that every wire format reads (see docs/harness.md):
 *   {"role":"user","content":"text"}
 *   {"role":"assistant","content":"text","tool_calls":[{"id","name","arguments",
 *    "arguments_text"}],"provider_state":{"kind":"<wire kind>","items":[…]}}
 *   {"role":"tool","tool_call_id","name","content":"text","is_error":bool}
 * provider_state keeps what a wire format must replay verbatim (reasoning items with their
 * encrypted content, thinking blocks with signatures); other kinds ignore it.
 */
#ifndef EVD_HARNESS_INTERNAL_H
#define EVD_HARNESS_INTERNAL_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/util.h"
#include "harness/harness.h"
#include "harness/providers.h"
#include "harness/ratelimit.h"
#include "schema/structured.h"

/* ---- HTTP transport ------------------------------------------------------------------- */

#define EVD_HX_MAX_BODY (8u << 20) /* largest response body read */

/*
 * One run's HTTP client: its own easy handle, driven through the calling thread's multi
 * handle, whose connection cache outlives the run, so generations, tool calls and the
 * next runs on the same thread reuse their connections.
 */
struct evd_hx_client {
    CURLM *multi;
    CURL *easy;
};

/* Creates both handles; false when out of memory. evd_hx_client_close is NULL-safe. */
bool evd_hx_client_open(struct evd_hx_client *cl);
void evd_hx_client_close(struct evd_hx_client *cl);

struct evd_hx_http_resp {
    long status;            /* HTTP status, 0 when no response arrived */
    struct evd_buf body;    /* response body (bounded) */
    int64_t retry_after_ms; /* from Retry-After, -1 when absent */
    /* The rate-limit headers of the answer (retry-after*, x-ratelimit-*, anthropic-ratelimit-*),
     * names in lower case, values trimmed; the last block of headers only. */
    struct {
        char name[64];
        char value[64];
    } rl_headers[24];
    int n_rl_headers;
    CURLcode curl_code;
    bool cancelled;
    bool timed_out;
    bool too_large; /* the answer broke a size limit; curl_error says which */
    char curl_error[CURL_ERROR_SIZE];
};

/*
 * POSTs `body` to `url` with `headers` on the client (its easy handle reset first), giving up at
 * the monotonic deadline `deadline_ms` or when `cancel` triggers (checked at least every 50 ms).
 * Fills *resp (caller frees resp->body). Returns CURLE_OK when a response arrived (any status).
 */
CURLcode evd_hx_http_post(struct evd_hx_client *cl, const char *url, struct curl_slist *headers,
                          const char *body, size_t body_len, int64_t deadline_ms,
                          struct evd_cancel *cancel, struct evd_hx_http_resp *resp);
void evd_hx_http_resp_free(struct evd_hx_http_resp *resp);

/* Parses a Retry-After value (delta-seconds or an HTTP date) into ms; -1 when unusable. */
int64_t evd_hx_parse_retry_after(const char *value, int64_t now_wall_ms);

/* Backoff before attempt `attempt` (2, 3, …): exponential from 500 ms, capped, with jitter. */
int64_t evd_hx_backoff_ms(int attempt);

/* Replaces every occurrence of `secret` (of 4 bytes or more) with "[redacted]", or with as
 * many '*' when it is shorter than that, and every "sk-…" token in s. */
void evd_hx_scrub(char *s, const char *secret);

/* ---- provider calls with retries ------------------------------------------------------ */

struct evd_hx_call {
    int attempts;
    long status;        /* last HTTP status, 0 when none */
    json_t *body;       /* new reference: the decoded 2xx body, else NULL */
    int64_t latency_ms; /* total, including backoff and the wait for the rate limiter */
    int64_t limiter_wait_ms; /* of which waiting for the rate limiter */
    bool scenario_timeout;   /* an EVD_ETIMEOUT was the scenario deadline's */
    enum evd_code code; /* EVD_OK, EVD_EUPSTREAM, EVD_ETIMEOUT, EVD_ECANCELLED, … */
    char error[512];    /* names the provider and status; never a key */
    /* Each attempt that was tried again: when it ended (wall ms), its HTTP status (0: no
     * answer) and the wait before the next (backoff, Retry-After or the limiter's hold). */
    struct {
        int64_t at_ms;
        long status;
        int64_t wait_ms;
    } retries[8];
    int nretries;
};

/*
 * Sends one generation request (borrowed body) for `model` to the provider, retrying 429,
 * 5xx, connection errors and malformed bodies with backoff (honouring Retry-After); 4xx
 * other than 429 fail at once. Each attempt first waits for the process's limiter of the
 * provider and model (limiter.c); that wait ends at the scenario deadline or the cancel
 * token, and does not count against the invocation timeout, which starts when the first
 * attempt is sent and moves on by every later wait. A 429 holds the limiter (every call to
 * the provider waits, with jitter) instead of this call sleeping alone. Adds
 * X-Evald-Session. Fills *call.
 */
void evd_hx_provider_call(struct evd_hx_client *cl, const struct evd_provider *pr,
                          const char *model, json_t *body, const char *session_id,
                          int64_t scenario_deadline_ms, int invocation_timeout_s,
                          struct evd_cancel *cancel, struct evd_hx_call *call);

/* ---- rate limits (limiter.c) ---------------------------------------------------------- */

struct evd_hx_limiter;

/* The process's limiter of model on provider, created on first use with the limits of the
 * providers file; NULL (no limiting) without memory or past 1024 of them. Lives as long as
 * the process. */
struct evd_hx_limiter *evd_hx_limiter_get(const struct evd_provider *pr, const char *model);
/* The tokens to reserve for a call whose request suggests raw_tokens (evd_rl_estimate);
 * NULL l: raw_tokens. */
double evd_hx_limiter_estimate(struct evd_hx_limiter *l, double raw_tokens);
/*
 * Waits until the limiter lets a call estimated at est_tokens go, and counts it in flight:
 * EVD_OK; EVD_ETIMEOUT when deadline_ms passed first, EVD_ECANCELLED when the token was
 * triggered (then nothing is counted). Adds the time waited to *waited_ms. NULL l: EVD_OK.
 */
enum evd_code evd_hx_limiter_wait(struct evd_hx_limiter *l, double est_tokens,
                                  int64_t deadline_ms, struct evd_cancel *cancel,
                                  int64_t *waited_ms);
/* A call that evd_hx_limiter_wait let go ended (evd_rl_done), with its reservation
 * (est_tokens), its raw estimate and its usage (evd_rl_learn). NULL l: nothing. */
void evd_hx_limiter_done(struct evd_hx_limiter *l, long status, double est_tokens,
                         double raw_tokens, double used_tokens,
                         const struct evd_rl_observed *obs);

/* ---- wire formats --------------------------------------------------------------------- */

struct evd_hx_request {
    const char *model;
    const char *system;         /* NULL = no system prompt */
    json_t *messages;           /* neutral conversation, borrowed */
    json_t *tools;              /* [{name, description, parameters}] borrowed; may be empty */
    int64_t max_output_tokens;  /* per-call cap */
    const char *thinking_level; /* NULL or minimal|low|medium|high|xhigh */
    json_t *provider_options;   /* object merged into the body (borrowed) or NULL */
    json_t *output_format;      /* the structured-output fragment (borrowed) or NULL: the value
                                   of Responses `text`, Anthropic `output_config.format`, Chat
                                   `response_format` (evd_so_wire_request_format) */
    bool tools_disabled;        /* the repair turn: Responses and Chat send no tools; Anthropic
                                   keeps `tools` and sends tool_choice {"type":"none"} */
};

struct evd_hx_usage {
    int64_t input; /* every prompt token: uncached + cache read + cache write */
    int64_t cache_read;
    int64_t cache_write;
    int64_t output; /* includes reasoning */
    int64_t reasoning;
    bool has_input, has_cache_read, has_cache_write, has_output, has_reasoning;
};

struct evd_hx_reply {
    char id[160];       /* the provider's response id, "" when it gave none */
    char *text;         /* concatenated answer text, never NULL after a successful parse */
    json_t *tool_calls; /* new reference: [{id, name, arguments?, arguments_text}] */
    json_t *message;    /* new reference: the neutral assistant message */
    struct evd_hx_usage usage;
    char stop_reason[64];
    char model[160];
};

/* Builds the request body for `kind`; new reference, or NULL with *err set. */
json_t *evd_hx_build_request(enum evd_provider_kind kind, const struct evd_hx_request *r,
                             struct evd_err *err);
/* Path appended to the provider's base URL. */
const char *evd_hx_endpoint(enum evd_provider_kind kind);
/* Parses a 2xx body (borrowed). EVD_EUPSTREAM with a message when it is not a usable reply. */
enum evd_code evd_hx_parse_reply(enum evd_provider_kind kind, json_t *body,
                                 struct evd_hx_reply *out, struct evd_err *err);
void evd_hx_reply_clear(struct evd_hx_reply *r);
/* The message of an error body (any kind), bounded; writes into out. */
void evd_hx_error_detail(const char *body, size_t len, char *out, size_t outsz);

/* What an Anthropic request opens with when its conversation starts with the assistant. */
#define EVD_HX_ANTHROPIC_OPENING "(The conversation begins.)"

/* Per-kind builders/parsers, in openai_responses.c, anthropic.c and openai_chat.c. */
json_t *evd_hx_responses_build(const struct evd_hx_request *r, struct evd_err *err);
enum evd_code evd_hx_responses_parse(json_t *body, struct evd_hx_reply *out, struct evd_err *err);
json_t *evd_hx_anthropic_build(const struct evd_hx_request *r, struct evd_err *err);
enum evd_code evd_hx_anthropic_parse(json_t *body, struct evd_hx_reply *out, struct evd_err *err);
json_t *evd_hx_chat_build(const struct evd_hx_request *r, struct evd_err *err);
enum evd_code evd_hx_chat_parse(json_t *body, struct evd_hx_reply *out, struct evd_err *err);

/* Shared by the parsers: a tool call entry {id, name, arguments?, arguments_text}. */
json_t *evd_hx_tool_call(const char *id, const char *name, const char *arguments_text,
                         json_t *arguments /* borrowed, may be NULL */);
/* The same from arguments sent as JSON text (the OpenAI wires); `arguments` is set when
 * the text parses. New reference, NULL when out of memory. */
json_t *evd_hx_tool_call_from_text(const char *id, const char *name, const char *arguments_text);
/*
 * Ends a parse whose answer text was gathered in `text`: out->text takes its bytes (""
 * when none; the buffer is left empty) and out->message becomes the neutral assistant
 * message with out->tool_calls and provider_state {kind, items} (items borrowed), which
 * the builder of that kind replays. false when out of memory.
 */
bool evd_hx_reply_finish(struct evd_hx_reply *out, struct evd_buf *text, const char *kind,
                         json_t *items);
/* Sets obj[key] to an array of one wire entry per element of `items` (borrowed), each made
 * by `shape` (new reference, NULL when out of memory): the tool list, the tool calls of a
 * replayed message. false when out of memory. */
bool evd_hx_put_each(json_t *obj, const char *key, json_t *items, json_t *(*shape)(json_t *item));
/* The arguments of a neutral tool call as JSON text (new malloc'd string). */
char *evd_hx_tool_call_args_text(json_t *call);
/* Reads a non-negative integer field path like "a.b"; false when absent. */
bool evd_hx_get_count(json_t *obj, const char *path, int64_t *out);
/*
 * The tokens a provider's 2xx body says the call used, as its rate limit counts them
 * (prompt, cached or not, plus output), or -1 when body (borrowed, may be NULL) has no
 * usage: the limiter then keeps the estimate it reserved.
 */
double evd_hx_usage_tokens(enum evd_provider_kind kind, json_t *body);

/* ---- function policy and exposure ----------------------------------------------------- */

/* One callable function: an HTTP tool or a dispatch function. Borrowed strings/JSON. */
struct evd_hx_function {
    const char *id;
    const char *description;
    json_t *request_schema;
    const char *url;    /* HTTP tools; NULL for dispatch functions */
    int64_t timeout_ms; /* HTTP tools */
    char tool_name[72]; /* the provider tool name in native mode */
    bool mocked;        /* a mocked tool (harness/mock.c): answered from tool_results */
    int64_t mock_calls; /* mocked: the calls answered so far (past the payload check) */
};

/*
 * True when the policy (borrowed; NULL = deny all) allows function_id: it matches an
 * `allow` glob and no `deny` glob (fnmatch).
 */
bool evd_hx_policy_allows(json_t *policy, const char *function_id);
/* Validates a policy object; EVD_EINVAL naming functions.<field>. */
enum evd_code evd_hx_policy_check(json_t *policy, struct evd_err *err);
/* A provider-safe tool name for function_id, unique among `taken` names. */
void evd_hx_tool_name(const char *function_id, char *out, size_t outsz,
                      const struct evd_hx_function *taken, size_t ntaken);

/* Name and schema of the single tool of expose mode "agent_trigger". */
#define EVD_HX_AGENT_TRIGGER "agent_trigger"

/*
 * Validates a function payload (borrowed) against its request_schema (borrowed; NULL
 * accepts anything) with the draft-07 validator. EVD_EINVAL names the function and the
 * failing instance paths, or says the schema itself is invalid.
 */
enum evd_code evd_hx_validate_payload(const char *function_id, json_t *schema, json_t *payload,
                                      struct evd_err *err);

/*
 * POSTs payload (borrowed) to an HTTP tool and returns its JSON result (new reference; a
 * non-JSON body becomes a JSON string), or NULL with *err set: EVD_ETIMEOUT, EVD_ECANCELLED,
 * EVD_EUPSTREAM ("tool <id> returned 500: …"). `traceparent` (or NULL) goes out as the W3C
 * header of that name.
 */
json_t *evd_hx_call_http_tool(struct evd_hx_client *cl, const struct evd_hx_function *fn,
                              json_t *payload, const char *session_id, const char *traceparent,
                              int64_t deadline_ms, struct evd_cancel *cancel,
                              struct evd_err *err);

/* ---- the output contract of the final answer ------------------------------------------ */

/*
 * What a run's final answer must be (harness/output.c). Text output: contract NULL, the
 * final text is the output. JSON output and verdicts: a structured-output contract, and for
 * a schema (or a verdict) the provider's wire format, whose request fragment is `format`.
 */
struct evd_hx_output {
    struct evd_so_contract *owned;          /* built from output.schema, or NULL */
    const struct evd_so_contract *contract; /* NULL = text output */
    struct evd_so_wire *wire;               /* NULL = no structured format on the request */
    json_t *format;                         /* evd_so_wire_request_format(wire), owned */
    bool unenforced; /* the provider may ignore the format: a bare owner value is accepted */
};

/*
 * Prepares the output contract for provider `pr` (its wire kind, and whether it enforces
 * the format): `contract` (borrowed, may be NULL) wins over `output` ({type:"text"} |
 * {type:"json", schema?}, borrowed). EVD_EINVAL names output.schema when it is not a JSON
 * Schema; EVD_ENOMEM. On error *o is left closed.
 */
enum evd_code evd_hx_output_open(struct evd_hx_output *o, const struct evd_provider *pr,
                                 json_t *output, const struct evd_so_contract *contract,
                                 struct evd_err *err);
void evd_hx_output_close(struct evd_hx_output *o);

/*
 * Turns the final text into the run's output: *out is a new reference (a JSON string for
 * text output, the decoded and validated value otherwise). EVD_SO_INVALID fills *failure
 * (its code never holds model output); EVD_SO_NOMEM is an internal error.
 */
enum evd_so_result evd_hx_output_decode(const struct evd_hx_output *o, const char *text,
                                        json_t **out, struct evd_so_failure *failure);

#endif
