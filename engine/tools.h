/*
 * HTTP tools (functions the agent may call and HTTP evaluators), registered with
 * PUT /v1/tools/{id}: the check of a definition {description, request_schema, url,
 * timeout_ms} and its storage. The id names the function the agent sees (and an
 * evaluator.function_id may name it); request_schema must be a valid draft-07 schema
 * because payloads are validated against it before every call.
 *
 * Thread-safety: every function may be called from any thread; each borrows a pool
 * connection for its duration. Arguments are borrowed; responses are new references in
 * the store's shape (the tool's id is `id`).
 */
#ifndef EVD_ENGINE_TOOLS_H
#define EVD_ENGINE_TOOLS_H

#include <jansson.h>
#include <stdbool.h>

#include "common/err.h"

struct evd_engine;
struct evd_tool;

/*
 * Checks a PUT /v1/tools/{id} body (borrowed) for the tool `id`. On EVD_OK *t borrows its
 * strings and schema from id and body (nothing to free); else err names the field. Pure:
 * exposed for the request-decoding fuzz target (tests/fuzz/).
 */
enum evd_code evd_tools_decode(const char *id, json_t *body, struct evd_tool *t,
                               struct evd_err *err);

/* Every tool, ordered by id: *response is [{id, description, request_schema, url,
 * timeout_ms, created_at, updated_at}]. */
enum evd_code evd_tools_list(struct evd_engine *e, json_t **response, struct evd_err *err);
/* Checks `body` (evd_tools_decode) and inserts or replaces the tool; *response is the
 * stored tool and *created tells whether it is new. Nothing is written when the check
 * fails. */
enum evd_code evd_tools_put(struct evd_engine *e, const char *id, json_t *body, json_t **response,
                            bool *created, struct evd_err *err);
/* The stored tool; EVD_ENOTFOUND "tool not found: <id>". */
enum evd_code evd_tools_get(struct evd_engine *e, const char *id, json_t **response,
                            struct evd_err *err);
/* *deleted is false when no tool has that id. */
enum evd_code evd_tools_delete(struct evd_engine *e, const char *id, bool *deleted,
                               struct evd_err *err);

#endif
