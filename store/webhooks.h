/*
 * All SQL of webhook subscriptions and their delivery outbox (migrations/0002).
 * Every function takes a connection the caller owns. Functions marked "in a
 * transaction" expect the caller to have begun one; the others autocommit or run in
 * whatever transaction is open. JSON results are new references.
 *
 * Ordering: a subscription takes the fan-out lock in shared mode before drawing its
 * sequence number; the fan-out takes it exclusively. So a fan-out sees every
 * subscription whose number is below the event's (see docs/webhooks.md).
 */
#ifndef EVD_STORE_WEBHOOKS_H
#define EVD_STORE_WEBHOOKS_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

/* Inserts a subscription; in a transaction. `evaluation_id` may be NULL. `events` is a
 * JSON array of the event types it receives (store/events.h, validated by the caller),
 * or NULL for the default ["evaluation.completed"]. On EVD_OK *out is its SubscriptionV1
 * (new reference). */
enum evd_code evd_store_sub_insert(PGconn *c, const char *id, const char *url,
                                   const char *evaluation_id, const char *events,
                                   const char *secret_sealed, int64_t now, json_t **out,
                                   struct evd_err *err);
/* Every subscription, newest first, as SubscriptionV1 objects (new reference array),
 * or NULL + err. */
json_t *evd_store_sub_list(PGconn *c, struct evd_err *err);
/* One subscription (new reference), or NULL + err (EVD_ENOTFOUND when unknown). */
json_t *evd_store_sub_get(PGconn *c, const char *id, struct evd_err *err);
/* Deletes a subscription and its deliveries; *deleted false when unknown. */
enum evd_code evd_store_sub_delete(PGconn *c, const char *id, bool *deleted, struct evd_err *err);

/*
 * A subscription's deliveries, newest first, as DeliveryV1 objects with their
 * attempt_log (new reference array), or NULL + err. `before` is a cursor from a
 * previous page ("<created_at>_<id>") or NULL; *next_cursor (malloc'd or NULL) when
 * more remain.
 */
json_t *evd_store_deliveries(PGconn *c, const char *subscription_id, unsigned limit,
                             const char *before, char **next_cursor, struct evd_err *err);

/*
 * Fans completion events not yet fanned out (at most `batch`) out to the matching
 * subscriptions: one pending delivery per (event, subscription) whose `events` hold the
 * event's type and whose evaluation filter is absent or equal (an evaluation-scoped
 * subscription never gets an experiment event), for subscriptions created before the
 * event. In a transaction (it takes
 * the fan-out lock until commit). *events and *deliveries count what it did.
 */
enum evd_code evd_store_webhook_fanout(PGconn *c, int batch, int64_t now, long *events,
                                       long *deliveries, struct evd_err *err);

/* What a delivery worker needs to make one attempt. Release with _clear. */
struct evd_store_delivery {
    char id[48];
    char event_id[48];
    char event_type[32];    /* evaluation.completed or experiment.completed */
    char evaluation_id[64]; /* "" for an experiment event */
    char experiment_id[64]; /* "" for an evaluation event */
    char subscription_id[48];
    char *url;
    char *secret_sealed;
    char *payload; /* the event's JSON text */
    int attempt;   /* this attempt's number, from 1 */
    int64_t created_at;
};
void evd_store_delivery_clear(struct evd_store_delivery *d);

/* Claims the earliest due delivery with a lease for `owner` and counts the attempt;
 * *found false when none is due. A subscription with `per_subscription` attempts in
 * flight (unexpired leases, any process) is skipped, so one slow receiver cannot take
 * every delivery slot; two concurrent claims may both pass the count, so it is a soft
 * cap. Autocommits. */
enum evd_code evd_store_delivery_claim(PGconn *c, const char *owner, long lease_ms,
                                       int per_subscription, struct evd_store_delivery *out,
                                       bool *found, struct evd_err *err);

/* The outcome of one attempt. */
struct evd_store_attempt {
    const char *status;  /* delivery status after it: pending, delivered or failed */
    int64_t started_at;  /* epoch ms */
    int64_t finished_at; /* epoch ms */
    long duration_ms;
    int status_code;   /* 0 when no answer came back */
    const char *error; /* NULL on success */
    long retry_in_ms;  /* when status is pending */
};
/* Records the attempt and the delivery's new state, and releases the lease, if this
 * owner still holds it for this attempt. Autocommits. */
enum evd_code evd_store_delivery_record(PGconn *c, const struct evd_store_delivery *d,
                                        const char *owner, const struct evd_store_attempt *a,
                                        struct evd_err *err);
/* Gives a claimed attempt back uncounted (this process is stopping). */
enum evd_code evd_store_delivery_release(PGconn *c, const struct evd_store_delivery *d,
                                         const char *owner, struct evd_err *err);

/* Idle check: whether events wait for fan-out, and in how many ms the next pending
 * delivery (or expiring lease) is due (-1 when none). A delivery of a subscription that
 * already has `per_subscription` attempts in flight is not due: one of those ends first. */
enum evd_code evd_store_webhook_idle(PGconn *c, int per_subscription, bool *events_pending,
                                     long *next_due_ms, struct evd_err *err);

#endif
