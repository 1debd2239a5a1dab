/*
 * Structured final answers (seed "Agent responses"): the pure parts. A contract holds the
 * owner schemas of a GREEN/RED verdict, or the schema of a plain JSON output, compiled once.
 * A wire format is the contract transformed into one provider's structured-output subset,
 * with the plan that decodes the provider's answer back into the owner's value. Decoding
 * validates against the original owner schema and, on failure, yields the error code and
 * up to five explained instance paths for the one repair turn (evd_so_repair_message).
 * Thread-safety: contracts and wire formats are immutable after construction and may be
 * shared between threads. Lifetimes: owner schemas are copied; nothing is borrowed.
 */
#ifndef EVD_SCHEMA_STRUCTURED_H
#define EVD_SCHEMA_STRUCTURED_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

/* The wire dialects. CHAT is OpenAI-compatible Chat Completions (also local servers). */
enum evd_so_provider {
    EVD_SO_RESPONSES = 0, /* OpenAI / Codex Responses: text.format, strict */
    EVD_SO_ANTHROPIC,     /* Anthropic Messages: output_config.format */
    EVD_SO_CHAT,          /* Chat Completions: response_format json_schema, strict */
};

#define EVD_SO_MAX_TEXT_BYTES (1024 * 1024) /* a final answer above this is over_size */
#define EVD_SO_MAX_RESULT_UTF16 256000      /* normalized result bound, in UTF-16 units */
#define EVD_SO_MAX_OWNER_SCHEMA_BYTES (8 * 1024 * 1024)
#define EVD_SO_MAX_LINES 5        /* explained paths in a repair turn */
#define EVD_SO_MAX_LINE_CHARS 200 /* characters per explained line */

/* ---- contracts ----------------------------------------------------------------------- */

struct evd_so_contract;

/*
 * A GREEN/RED verdict contract from the two owner schemas (each borrowed, copied; NULL
 * means no owner fields). Each owner schema must be an object schema: `type` absent or
 * "object", no top-level allOf/anyOf/oneOf/not/$ref, `additionalProperties` absent or false,
 * no reserved field name (verdict, reference, reusedFrom, executionProvenance, attemptId,
 * provider, model, stdout, stderr, durationMs, exitCode, toolCalls), at most 8 MiB, and
 * valid draft-07. Errors are EVD_EINVAL naming "GREEN schema" or "RED schema".
 */
struct evd_so_contract *evd_so_verdict_new(json_t *green_owner, json_t *red_owner,
                                           struct evd_err *err);

/*
 * A contract for a plain JSON output (`output.type = "json"`); `schema` (borrowed, copied)
 * may be any draft-07 schema, or NULL for any JSON value.
 */
struct evd_so_contract *evd_so_value_new(json_t *schema, struct evd_err *err);

void evd_so_contract_free(struct evd_so_contract *c);

/* ---- wire formats -------------------------------------------------------------------- */

struct evd_so_wire;

/*
 * Transforms the contract into provider `p`'s subset (docs/schema.md, "Wire transform"):
 * closed objects with every field required, null placeholders for optional fields,
 * unsupported constraints moved into descriptions, JSON-encoded text for values outside
 * the common subset, and the whole-value JSON-text fallback when the provider's limits
 * would be exceeded. NULL with err (EVD_ENOMEM) on failure.
 */
struct evd_so_wire *evd_so_wire_new(const struct evd_so_contract *c, enum evd_so_provider p,
                                    struct evd_err *err);
void evd_so_wire_free(struct evd_so_wire *w);

/* The wire JSON Schema; borrowed, valid while w lives. */
json_t *evd_so_wire_schema(const struct evd_so_wire *w);

/* True when the owner fields travel as one JSON-encoded string (limits exceeded). */
bool evd_so_wire_fallback(const struct evd_so_wire *w);

/*
 * The request fragment for the provider (new reference, NULL on ENOMEM):
 *   RESPONSES: the value of `text`:
 * {"format":{"type":"json_schema","name":N,"schema":S,"strict":true}} ANTHROPIC: the value of
 * `output_config.format`: {"type":"json_schema","schema":S} CHAT:      the value of
 * `response_format`:
 *              {"type":"json_schema","json_schema":{"name":N,"schema":S,"strict":true}}
 * N is "evald_verdict" or "evald_result".
 */
json_t *evd_so_wire_request_format(const struct evd_so_wire *w);

/* ---- decoding a final answer --------------------------------------------------------- */

/* One explained line of a repair turn. */
struct evd_so_line {
    bool undeclared;   /* true: `path` is a field name that the schema does not declare */
    char path[256];    /* instance path (RFC 6901) into the decoded value, or the field */
    char message[512]; /* the validator's message (may quote model output) */
};

struct evd_so_failure {
    /*
     * "<code>: <detail>", e.g. "schema_mismatch: result must match the selected verdict's
     * owner schema". Never contains model output: it is what may be persisted.
     */
    char code[160];
    size_t nlines; /* <= EVD_SO_MAX_LINES; only when the answer was a JSON object */
    struct evd_so_line lines[EVD_SO_MAX_LINES];
};

enum evd_so_result {
    EVD_SO_VALID = 0,   /* *out is set */
    EVD_SO_INVALID = 1, /* *failure is filled */
    EVD_SO_NOMEM = -1,  /* allocation failed; *failure holds a code naming it */
};

/*
 * Decodes and validates a final answer `text[0..len)`. With `w` (structured output), the
 * text is the wire answer: the envelope is checked, JSON-text fields are decoded and null
 * placeholders removed. Without `w` (no structured output), the text is the owner value
 * itself: a flat verdict object or the plain JSON value. On EVD_SO_VALID, *out is a new
 * reference: for a verdict the stored flat object {"verdict":"GREEN"|"RED", ...owner
 * fields}, otherwise the decoded value. Codes, in the order they are checked:
 *   over_size: final JSON exceeds 1 MiB
 *   empty: return one JSON object
 *   not_json: return exactly one JSON object, without prose or code fences
 *   schema_mismatch: verdict must be GREEN or RED
 *   schema_mismatch: result must match the selected verdict's owner schema
 *   schema_mismatch: result must match the output schema            (value contracts)
 *   over_size: normalized result exceeds 256000 characters
 * Thread-safe.
 */
enum evd_so_result evd_so_decode(const struct evd_so_contract *c, const struct evd_so_wire *w,
                                 const char *text, size_t len, json_t **out,
                                 struct evd_so_failure *failure);

/*
 * As evd_so_decode, for a provider that does not enforce the requested format (a server
 * from the providers file): when the wire answer is invalid, the text is tried once more
 * as the owner value itself (a flat verdict object, or the plain value, as without `w`);
 * if that validates against the owner schema it is the answer. Otherwise the wire
 * answer's failure is reported, so the repair turn names the envelope. An answer that
 * is a valid envelope is always read as one, even when the owner schema would also
 * accept the object whole.
 */
enum evd_so_result evd_so_decode_unenforced(const struct evd_so_contract *c,
                                            const struct evd_so_wire *w, const char *text,
                                            size_t len, json_t **out,
                                            struct evd_so_failure *failure);

/*
 * The repair turn's user message (malloc'd, NULL on ENOMEM), byte for byte:
 *   Your final response did not match the required schema: <code>
 *   - instancePath "<path>": <message>          (up to five; undeclared fields read
 *   - field "<name>" is not declared.             instead like this)
 *   Return only one JSON object matching the schema.
 * Paths and names are JSON string literals. A line longer than 200 characters keeps its
 * first 187 and ends with "… (truncated)".
 */
char *evd_so_repair_message(const struct evd_so_failure *failure);

#endif
