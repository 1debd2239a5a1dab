/*
 * The completion events outbox (completion_events, migrations 0001-0003 and 0011): one
 * row per terminal evaluation (evaluation.completed, written by evd_store_eval_finish)
 * and one per terminal experiment (experiment.completed, written here). Webhook
 * delivery threads and the iii adapter deliver from it (docs/webhooks.md, docs/iii.md).
 * Functions take a connection the caller owns and run in whatever transaction is open.
 */
#ifndef EVD_STORE_EVENTS_H
#define EVD_STORE_EVENTS_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdint.h>

#include "common/err.h"

/* The event types, as stored in completion_events.event_type and subscriptions.events. */
#define EVD_EVENT_EVALUATION "evaluation.completed"
#define EVD_EVENT_EXPERIMENT "experiment.completed"

/*
 * Records the experiment.completed event of `experiment_id`, exactly once: call it in
 * the transaction that makes the experiment terminal (completed, cancelled or failed),
 * after the status update and before the commit. A second call for the same experiment
 * (a retried transition, another process) writes nothing and returns EVD_OK. It also
 * notifies EVD_CHANNEL_COMPLETED (delivered at commit), so the caller has nothing else
 * to do: webhook subscriptions whose `events` include experiment.completed and iii
 * bindings of eval::experiment::completed receive it.
 *
 * `payload` (borrowed, not modified) is the body every receiver gets, as the engine
 * builds it:
 *   {"experiment_id": "<id>", "status": "completed" | "cancelled" | "failed",
 *    "timestamp": <epoch ms of the transition>,
 *    "verdicts": [{"treatment": <arm index>, "label": "<arm label>",
 *                  "verdict": "better" | "worse" | "equivalent" | "inconclusive"}, …]}
 * (one verdict per treatment arm; [] when none was reached). EVD_EINVAL when it is not
 * an object whose experiment_id equals `experiment_id`, whose status is terminal, whose
 * timestamp is an integer and whose verdicts is an array; nothing is written then.
 * `now` (epoch ms) orders the event for the adapter's bindings (created_at).
 */
enum evd_code evd_store_experiment_event(PGconn *c, const char *experiment_id,
                                         const json_t *payload, int64_t now, struct evd_err *err);

#endif
