/*
 * evald-stub internals shared by its files: the normalized view of one model request
 * (request.c), the script of rules and the built-in default replies (script.c,
 * defaults.c), the wire encoders of each provider (wire.c) and the HTTP server
 * (server.c). A `struct stub_script` is immutable after parsing except for its
 * per-rule hit counters, which only server.c touches under its lock; requests hold a
 * reference while they use it. Everything else belongs to one request thread.
 */
#ifndef EVD_STUB_STUB_H
#define EVD_STUB_STUB_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

enum stub_api {
    STUB_API_RESPONSES = 0,
    STUB_API_CHAT,
    STUB_API_MESSAGES,
    STUB_API_MODELS,
    STUB_API_OTHER,
    STUB_API_COUNT
};

/* "responses", "chat", "messages", "models", "other". */
const char *stub_api_name(enum stub_api api);

/* ---------------------------------------------------------------- request view */

/*
 * What the script and the default replies look at in one request, whatever its wire.
 * Strings are owned by the view (free with stub_view_free); json_t pointers are
 * borrowed from the request body and valid while the body lives.
 */
struct stub_view {
    enum stub_api api;
    const char *model;    /* borrowed; never NULL after a successful parse */
    char *prompt;         /* text of the latest user message, "" when none */
    char *system;         /* system prompt / instructions, "" when none */
    bool has_tool_result; /* tool results follow the latest user message */
    char *tool_results;   /* their text, joined by "\n", "" when none */
    size_t input_chars;   /* characters of every text sent, for derived usage */
    bool stream;          /* the client asked for streaming */
    json_t *schema;       /* borrowed: requested structured-output JSON Schema, or NULL */
    json_t *tools;        /* new reference: [{"name":..,"schema":..}] offered functions */
    const char *session;  /* borrowed from the connection: X-Evald-Session, or NULL */
};

/*
 * Fills *v from a parsed request body of `api` (responses, chat or messages).
 * `body` is borrowed and must outlive *v. On EVD_EINVAL err->msg names the field.
 */
enum evd_code stub_view_parse(enum stub_api api, json_t *body, struct stub_view *v,
                              struct evd_err *err);
void stub_view_free(struct stub_view *v);

/* ---------------------------------------------------------------- script */

/* Largest value of a scripted header_bytes fault. */
#define STUB_MAX_HEADER_BYTES (16 * 1024 * 1024)

enum stub_fault_kind {
    STUB_FAULT_NONE = 0,
    STUB_FAULT_STATUS,    /* an error status with the provider's error body */
    STUB_FAULT_STALL,     /* no answer until the client goes away */
    STUB_FAULT_TRUNCATE,  /* full Content-Length declared, half the body sent, closed */
    STUB_FAULT_MALFORMED, /* a complete 200 whose body is the first half of the JSON */
    STUB_FAULT_HEADER,    /* the normal 200 with one header of header_bytes bytes */
};

struct stub_tool_call {
    char *name;
    char *arguments; /* compact JSON text of an object */
};

struct stub_usage {
    bool set;
    int64_t input, cached, cache_write, output, reasoning;
};

/* What to answer: one rule's or the default's right-hand side. Strings owned. */
struct stub_action {
    bool has_latency;
    int64_t latency_ms;
    enum stub_fault_kind fault;
    int fault_status;
    int64_t retry_after_s;  /* -1 = no Retry-After header */
    int64_t retry_after_ms; /* -1 = no retry-after-ms header */
    char *fault_message;    /* NULL = a standard message for the status */
    int64_t header_bytes;   /* STUB_FAULT_HEADER: length of the padding header's value */
    bool has_reply;         /* false: the built-in reply is used */
    char *text;             /* reply text (or the compact text of "json"), or NULL */
    char *refusal;          /* a refusal instead of an answer, or NULL */
    struct stub_tool_call *calls;
    size_t ncalls;
    bool incomplete; /* answer as cut by the output-token cap */
    struct stub_usage usage;
};

struct stub_match {
    int api;               /* enum stub_api, or -1 for any */
    char *model;           /* exact, or NULL */
    char *prompt_contains; /* substring, or NULL */
    char *system_contains;
    int has_tool_result; /* -1 any, 0, 1 */
    char *tool_result_contains;
    char *session; /* exact X-Evald-Session, or NULL */
};

struct stub_rule {
    struct stub_match when;
    int64_t times; /* -1 = every matching request */
    struct stub_action act;
    uint64_t hits; /* guarded by the server lock */
};

struct stub_script {
    int refs; /* guarded by the server lock */
    struct stub_rule *rules;
    size_t nrules;
    bool has_default;
    struct stub_action dflt;
    char **models; /* names listed by GET /v1/models */
    size_t nmodels;
    json_t *source; /* new reference: the script as given (for GET /_stub/script) */
    int64_t rl_requests;  /* rate_limit.requests per rolling rl_window_ms per key; 0 = none */
    int64_t rl_window_ms;
};

/*
 * Validates and compiles a script document. `doc` is borrowed (a copy is kept).
 * Returns a script with refs = 1, or NULL with err naming the offending field.
 */
struct stub_script *stub_script_parse(json_t *doc, struct evd_err *err);
/* The script used when none is given: no rules, built-in replies. refs = 1. */
struct stub_script *stub_script_builtin(void);
/* Frees a script whose refs reached 0 (the caller drops the count under its lock). */
void stub_script_free(struct stub_script *s);

/*
 * First rule that matches *v and still has `times` left, or -1. Increments its hits;
 * call under the server lock.
 */
int stub_script_pick(struct stub_script *s, const struct stub_view *v);

/* ---------------------------------------------------------------- replies */

/* A decided answer: text and/or tool calls, all owned. */
struct stub_out {
    char *text;
    char *refusal;
    struct stub_tool_call *calls;
    size_t ncalls;
    bool incomplete;
    struct stub_usage usage;
};
void stub_out_free(struct stub_out *o);

/* Copies an action's scripted reply into *o (EVD_ENOMEM on allocation failure). */
enum evd_code stub_out_from_action(const struct stub_action *a, struct stub_out *o);

/* The built-in reply to *v (see docs/stub.md "Built-in replies"). */
enum evd_code stub_default_reply(const struct stub_view *v, struct stub_out *o);

/* Built-in latency for *v: 20..60 ms, a deterministic function of prompt and session. */
int64_t stub_default_latency_ms(const struct stub_view *v);

/* Fills o->usage from the text sizes when the script did not set it. */
void stub_usage_derive(const struct stub_view *v, struct stub_out *o);

/* Instance of a JSON Schema built from its first alternatives; new reference. */
json_t *stub_schema_instance(json_t *schema);

/* ---------------------------------------------------------------- wire encoders */

/* Success body of `v->api` for the answer *o; new reference or NULL (no memory). */
json_t *stub_wire_reply(const struct stub_view *v, const struct stub_out *o);

/*
 * Error body in the shape of `api` (OpenAI for responses/chat/models/other,
 * Anthropic for messages, or for models when `anthropic` is set). New reference.
 */
json_t *stub_wire_error(enum stub_api api, bool anthropic, int status, const char *message);

/* Model list in OpenAI or Anthropic shape; `names` borrowed. New reference. */
json_t *stub_wire_models(bool anthropic, char *const *names, size_t n);
/* One model object, as GET /v1/models/{id} answers it. New reference. */
json_t *stub_wire_model(bool anthropic, const char *name);

/* ---------------------------------------------------------------- server */

struct stub_config {
    const char *listen;      /* "host:port"; port 0 picks a free one */
    const char *script_path; /* or NULL */
    const char *require_key; /* or NULL */
    size_t max_body;         /* bytes; larger bodies get 413 */
};

struct stub_server;

/*
 * Binds and starts the HTTP threads. Takes over the caller's reference to `script`
 * (also on failure). On success *out is running and stub_server_address() tells where.
 */
enum evd_code stub_server_start(const struct stub_config *cfg, struct stub_script *script,
                                struct stub_server **out, struct evd_err *err);
/* "127.0.0.1:PORT" (borrowed, valid while the server lives). */
const char *stub_server_address(const struct stub_server *s);
/* Stops accepting, wakes stalled requests, joins every thread and frees. NULL-safe. */
void stub_server_stop(struct stub_server *s);

#endif
