/*
 * SQL of the iii adapter's eval::completed and eval::experiment::completed delivery:
 * the bindings it has seen, the completion events due to them, and the record of each
 * delivery (iii_bindings, iii_deliveries, completion_events).
 */
#ifndef EVD_STORE_III_H
#define EVD_STORE_III_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "store/db.h"

/* Inserts or refreshes the bindings in `rows` (a JSON array of {binding_id, trigger_type,
 * function_id, evaluation_id, experiment_id, seen_at}; trigger_type eval::completed when
 * absent) as last seen at `now` (ms). */
enum evd_code evd_store_iii_upsert_bindings(PGconn *c, const char *rows, int64_t now,
                                            struct evd_err *err);
/* Called per due (event, binding) pair, oldest first; false stops the walk. The strings
 * are borrowed for the call. */
typedef bool (*evd_store_iii_due_fn)(void *arg, const char *event_id, const char *binding_id,
                                     const char *payload);
/*
 * Walks up to `limit` completion events created at or after `since` (ms) and not yet
 * delivered to one of the bindings in `ids` (a JSON array of binding ids) that they
 * belong to: evaluation events to eval::completed bindings, experiment events to
 * eval::experiment::completed bindings, each by its filter. The callback may run statements on c.
 */
enum evd_code evd_store_iii_due(PGconn *c, const char *ids, int64_t since, int limit,
                                evd_store_iii_due_fn fn, void *arg, struct evd_err *err);
/* Records the delivery of event_id to binding_id at `now`; *claimed false when it was
 * already recorded (another process fired it). */
enum evd_code evd_store_iii_claim(PGconn *c, const char *event_id, const char *binding_id,
                                  int64_t now, bool *claimed, struct evd_err *err);
/* Deletes delivery records and bindings older than `before` (ms). */
enum evd_code evd_store_iii_prune(PGconn *c, int64_t before, struct evd_err *err);

#endif
