/*
 * The run lifecycle every job kind's attempt goes through (engine/lifecycle.h): the
 * in-flight registration, the execution with no connection held, what ended it, the
 * hand-back and the progress snapshots, in one place.
 */
#include <stdio.h>

#include "common/log.h"
#include "common/util.h"
#include "engine/internal.h"
#include "engine/lifecycle.h"
#include "store/db.h"

int evd_attempt_start(struct evd_attempt *a, PGconn *c, const struct evd_attempt_start_ops *ops,
                      struct evd_err *err)
{
    a->attempt = 0;
    if (evd_db_begin(c, err) != EVD_OK)
        return 0;
    enum evd_unit_state state = EVD_UNIT_GONE;
    int used = 0;
    enum evd_code rc = ops->load(c, a, &state, &used, err);
    if (rc == EVD_ENOTFOUND) {
        state = EVD_UNIT_GONE;
        evd_err_clear(err);
        rc = EVD_OK;
    }
    if (rc != EVD_OK)
        goto rollback;
    if (state != EVD_UNIT_OPEN) {
        rc = ops->settle(c, a, state, err);
    } else if (used >= EVD_MAX_ATTEMPTS) {
        /* Every attempt was lost to an interruption (a crash loop, most likely: attempts
         * given back do not count). */
        char msg[160];
        evd_attempt_exhausted_message(msg, sizeof(msg), used);
        rc = ops->exhaust(c, a, used, msg, err);
    } else {
        a->attempt = used + 1;
        rc = ops->begin(c, a, err);
    }
    if (rc == EVD_OK && evd_db_commit(c, err) == EVD_OK)
        return a->attempt;
rollback:
    evd_db_rollback(c);
    a->attempt = 0;
    return 0;
}

enum evd_attempt_end evd_attempt_run(struct evd_attempt *a)
{
    if (a->registered) {
        /* Registered when its batch started it (a run ahead): its deadline begins now,
         * and whatever stopped it meanwhile (a cancel, a stop, its lease) ends it here. */
        evd_engine_inflight_begin(a->e, a->slot, evd_mono_ms() + a->timeout_ms);
    } else {
        a->slot = -1;
        a->cancel = evd_cancel_new();
        if (a->cancel == NULL)
            return EVD_ATTEMPT_DROPPED;
        /* The registry knows an attempt by its subject's id (cancels and deadlines are
         * delivered by it) and its job's position. */
        struct evd_store_job reg = *a->job;
        snprintf(reg.evaluation_id, sizeof(reg.evaluation_id), "%s", a->subject_id);
        a->slot = evd_engine_inflight_add(a->e, &reg, a->attempt, a->cancel,
                                          evd_mono_ms() + a->timeout_ms);
    }
    if (a->trace != NULL) {
        char trace_hex[33], span_hex[17];
        evd_trace_hex(a->trace, trace_hex, span_hex);
        evd_log_set_trace(trace_hex, span_hex);
    }
    evd_wconn_put(a->w); /* none held while the provider works */
    if (a->registered && evd_cancel_is_set(a->cancel))
        a->interrupted = true; /* stopped before its call: ended below by its reason */
    else
        a->ops->execute(a);
    if (a->not_started)
        return EVD_ATTEMPT_DROPPED;
    enum inflight_reason reason;
    if (a->keep_slot) {
        reason = evd_engine_inflight_hold(a->e, a->slot);
    } else {
        reason = evd_engine_inflight_remove(a->e, a->slot);
        a->slot = -1;
    }
    if (reason == REASON_LEASE && !a->interrupted)
        reason = REASON_NONE; /* finished before its deadline stopped anything: write it */
    else if (reason == REASON_SHUTDOWN && !a->interrupted && a->keep_slot)
        reason = REASON_NONE; /* finished as the stop came, and the writer, which writes
                                 what it is handed until the end, has it: not paid twice */
    switch (reason) {
    case REASON_SHUTDOWN:
    case REASON_LEASE:
        if (reason == REASON_LEASE)
            evd_log(EVD_LOG_WARN, "lease not renewed in time; attempt handed back", "kind",
                    a->ops->what, a->ops->id_key, a->subject_id, NULL);
        evd_attempt_hand_back(a);
        return EVD_ATTEMPT_HANDED_BACK;
    case REASON_CANCELLED:
        return EVD_ATTEMPT_CANCELLED;
    case REASON_DEADLINE:
        return EVD_ATTEMPT_TIMED_OUT;
    case REASON_NONE:
        break;
    }
    return EVD_ATTEMPT_FINISHED;
}

void evd_attempt_clear(struct evd_attempt *a)
{
    evd_log_set_trace(NULL, NULL);
    if (a->slot >= 0)
        evd_engine_inflight_remove(a->e, a->slot);
    a->slot = -1;
    evd_cancel_free(a->cancel);
    a->cancel = NULL;
}

void evd_attempt_hand_back(struct evd_attempt *a)
{
    struct evd_err err = {0};
    PGconn *c = evd_wconn_get(a->w, &err);
    if (c != NULL && !evd_db_ensure(c))
        evd_err_set(&err, EVD_EUNAVAIL, "the database connection is lost");
    if (c == NULL || err.code != EVD_OK || a->ops->hand_back(c, a, &err) != EVD_OK)
        evd_log(EVD_LOG_WARN, "could not hand an attempt back; its lease runs out", "kind",
                a->ops->what, a->ops->id_key, a->subject_id, "error", err.msg, NULL);
}

void evd_attempt_progress(void *ctx, json_t *metrics)
{
    struct evd_attempt *a = ctx;
    if (a->ops->progress == NULL)
        return;
    struct evd_err err = {0};
    bool had;
    PGconn *c = evd_wconn_borrow(a->w, &had, &err);
    if (c == NULL || a->ops->progress(c, a, metrics, &err) != EVD_OK)
        evd_log(EVD_LOG_DEBUG, "could not record progress", "kind", a->ops->what,
                a->ops->id_key, a->subject_id, "error", err.msg, NULL);
    evd_wconn_return(a->w, had);
}

int evd_attempt_checkpoint(void *ctx, const json_t *cp)
{
    struct evd_attempt *a = ctx;
    if (a->ops->checkpoint == NULL)
        return 0;
    struct evd_err err = {0};
    bool had;
    PGconn *c = evd_wconn_borrow(a->w, &had, &err);
    int rc = c != NULL && a->ops->checkpoint(c, a, cp, &err) == EVD_OK ? 0 : -1;
    if (rc != 0)
        evd_log(EVD_LOG_WARN, "could not keep a checkpoint", "kind", a->ops->what, a->ops->id_key,
                a->subject_id, "error", err.msg, NULL);
    evd_wconn_return(a->w, had);
    return rc;
}

void evd_attempt_exhausted_message(char *buf, size_t n, int attempts)
{
    snprintf(buf, n,
             "run was interrupted %d times (its process crashed, or was stopped or cut off "
             "from the database past its lease); attempts exhausted",
             attempts);
}
