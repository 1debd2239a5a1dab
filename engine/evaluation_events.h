/*
 * What the event stream of an evaluation (GET /v1/evaluations/{id}/events) reads each
 * time the evaluation changes: its status and its runs, in one pool connection, so the
 * stream needs no database access of its own. Thread-safe; callable from any thread.
 */
#ifndef EVD_ENGINE_EVALUATION_EVENTS_H
#define EVD_ENGINE_EVALUATION_EVENTS_H

#include <jansson.h>

#include "common/err.h"

struct evd_engine;

/*
 * On EVD_OK *status is the evaluation's status object (as eval::status answers it) and
 * *runs its runs in position order (both new references). EVD_ENOTFOUND when no
 * evaluation has the id (it was deleted); any other code when the database could not be
 * read (both outputs stay NULL).
 */
enum evd_code evd_eval_events_read(struct evd_engine *e, const char *evaluation_id, json_t **status,
                                   json_t **runs, struct evd_err *err);

#endif
