/*
 * Ad-hoc agent sessions and the live comparison of 2–5 sessions, on top of the engine.
 * A session is a configuration (model, system prompt, function policy, output contract,
 * limits, metadata) and a sequence of turns; each user message starts one turn, which the
 * workers execute as a durable 'session' job with the same harness, leases, cancel tokens
 * and crash recovery as evaluation runs (see docs/sessions.md).
 *
 * Thread-safety: every function may be called from any thread; each borrows a pool
 * connection for its duration, and writes happen in one transaction holding the session's
 * row lock. `request` arguments are borrowed; on EVD_OK *response is a new reference.
 */
#ifndef EVD_ENGINE_SESSIONS_H
#define EVD_ENGINE_SESSIONS_H

#include <jansson.h>
#include <stdbool.h>

#include "common/err.h"

struct evd_engine;

/*
 * Creates a session (SessionCreateRequestV1). With a prompt the first turn is queued at
 * once and *started is true. *response is the SessionV1.
 */
enum evd_code evd_session_create(struct evd_engine *e, json_t *request, json_t **response,
                                 bool *started, struct evd_err *err);
/* Newest first: {sessions:[SessionV1…], next_cursor?}; request {limit?} as eval::list. */
enum evd_code evd_session_list(struct evd_engine *e, json_t *request, const char *before,
                               json_t **response, struct evd_err *err);
/*
 * SessionDetailV1: the SessionV1 plus `metrics` (summed over the turns; while a turn runs,
 * with its latest snapshot and complete:false) and, with `messages`, the transcript.
 * EVD_ENOTFOUND "session not found: <id>".
 */
enum evd_code evd_session_get(struct evd_engine *e, const char *id, bool messages,
                              json_t **response, struct evd_err *err);
/* A follow-up message {content}: queues the next turn (SessionTurnV1). EVD_ECONFLICT while
 * a turn is queued or running. */
enum evd_code evd_session_send(struct evd_engine *e, const char *id, json_t *request,
                               json_t **response, struct evd_err *err);
/* {cancelled, status}: interrupts the queued or running turn; idempotent. */
enum evd_code evd_session_cancel(struct evd_engine *e, const char *id, json_t **response,
                                 struct evd_err *err);
/* {deleted:true}; EVD_ECONFLICT while a turn is queued or running, EVD_ENOTFOUND. */
enum evd_code evd_session_delete(struct evd_engine *e, const char *id, json_t **response,
                                 struct evd_err *err);

/*
 * eval::compare-sessions {session_ids, baseline_session_id} → SessionComparisonV1. Ids are
 * ad-hoc sessions or evaluation runs' session ids; all of them are read in one query. An
 * unknown id is EVD_ENOTFOUND "session not found: <id>"; a session whose stored figures
 * cannot be read is reported in its item's `errors`.
 */
enum evd_code evd_sessions_compare(struct evd_engine *e, json_t *request, json_t **response,
                                   struct evd_err *err);
/* The ids to watch for changes of a comparison: the session ids and the evaluation ids
 * of the runs among them (new reference, array of strings). */
json_t *evd_sessions_watch_ids(struct evd_engine *e, json_t *request, struct evd_err *err);

#endif
