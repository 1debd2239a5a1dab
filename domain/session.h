/*
 * Ad-hoc sessions in the domain: decoding and validation of the create and message
 * requests (with the start request's field-naming messages), the normalized session
 * configuration, the sum of per-turn metrics into the session's SessionMetricsResponseV1,
 * and the transcript view (SessionMessageV1 entries) built from the harness transcripts
 * of its turns. Pure; thread-safe; JSON arguments are borrowed unless stated.
 */
#ifndef EVD_DOMAIN_SESSION_H
#define EVD_DOMAIN_SESSION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "domain/limits.h"

#define EVD_SESSION_TITLE_MAX 200 /* characters (code points) */

/* A decoded create request. json_t members are new references; release with _clear. */
struct evd_session_request {
    json_t *config;     /* {model, system_prompt, functions, output, limits, metadata?} */
    const char *title;  /* borrowed from the body; NULL when absent or null */
    const char *prompt; /* borrowed from the body; NULL when absent (the session stays idle) */
    struct evd_limits limits;
};
void evd_session_request_clear(struct evd_session_request *c);

/*
 * POST /v1/sessions: {title?, model, system_prompt?, prompt?, functions?, output?, limits?,
 * metadata?}. Unknown members are refused ("colour is not a known field"); nested objects
 * are decoded as in a start request (evd_request_model, _functions, _output); limits is a
 * flat ExecutionLimitsV1 validated with the limits.h rules ("limits.max_turns must be greater
 * than zero"). Other messages: "title must be at most 200 characters", "prompt cannot be
 * empty", "system_prompt must be a string". The normalized config has every default
 * filled: system_prompt null when absent, functions deny-all, output text, every execution
 * limit.
 */
enum evd_code evd_session_request_decode(const json_t *body, struct evd_session_request *out,
                                        struct evd_err *err);

/* POST /v1/sessions/{id}/messages: {content}; *content is borrowed from body. */
enum evd_code evd_session_message_decode(const json_t *body, const char **content,
                                         struct evd_err *err);

/* The harness `limits` input for a config's flat limits: {execution:{…}} (new reference). */
json_t *evd_session_harness_limits(const json_t *config);

/*
 * Adds one turn's SessionMetricsResponseV1 (`turn`) to a session's running sum (`acc`, NULL
 * for none) and returns the new sum for `session_id` (new reference, NULL on ENOMEM):
 * turns, function calls and errors add up; a token count or cost_usd is present only when
 * every side with at least one generation reports it; traces add up (trace, span and error
 * span counts; duration_ms is the sum of the turns' windows, so time between turns does not
 * count) and are present only when every side reports them. `complete` is set as given.
 */
json_t *evd_session_metrics_add(const json_t *acc, const json_t *turn, const char *session_id,
                                bool complete);

/*
 * The transcript of a session as SessionMessageV1 entries (new reference): for each turn of
 * `turns` ([{turn_id, prompt, created_at, transcript?}] in order) the user message, then
 * each successful generation as an assistant message followed by the results of the
 * function calls it asked for. `index` counts from 0 over the whole session.
 */
json_t *evd_session_messages(const json_t *turns);

/* How many messages one turn adds besides its user message: successful generations plus
 * function calls of a harness transcript (NULL counts 0). */
size_t evd_session_transcript_messages(const json_t *transcript);

/* The session status for the status of its last turn: NULL → idle, queued/running →
 * working, completed → done, failed → error, cancelled → cancelled. */
const char *evd_session_status_for_turn(const char *turn_status);

#endif
