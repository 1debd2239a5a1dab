/*
 * The in-flight registry of a process: one slot per run, turn or cell whose provider
 * calls are under way (or whose outcome the writer still has), with its cancel token, its
 * scenario deadline and why it was stopped. The keeper renews the leases of the slots and
 * delivers cancellations and deadlines to them; the workers add and end them.
 * inflight_mu is a leaf lock (internal.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "engine/internal.h"

static int add_slot(struct evd_engine *e, const struct evd_store_job *job, int attempt,
                    struct evd_cancel *cancel, int64_t deadline_mono, bool ahead)
{
    int slot = -1;
    /* No call may outlast the lease the claim took (renewals move this later; a run
     * without a slot is not renewed, so its calls end with that first lease). */
    evd_cancel_set_deadline(cancel, job->claimed_mono + e->opts.lease_ms -
                                        EVD_LEASE_MARGIN_MS(e->opts.lease_ms));
    pthread_mutex_lock(&e->inflight_mu);
    for (int i = 0; i < e->ninflight && slot < 0 && !(ahead && e->inflight_ahead >= e->ahead_cap);
         i++)
        if (!e->inflight[i].used)
            slot = i;
    if (slot >= 0) {
        struct inflight *f = &e->inflight[slot];
        memset(f, 0, sizeof(*f));
        f->used = true;
        f->job_id = job->id;
        snprintf(f->evaluation_id, sizeof(f->evaluation_id), "%s", job->evaluation_id);
        f->position = job->run_position;
        f->attempt = attempt;
        f->cancel = cancel;
        f->deadline_mono = deadline_mono;
        f->ahead = ahead;
        e->inflight_ahead += ahead;
        if (atomic_load(&e->stopping)) {
            f->reason = REASON_SHUTDOWN;
            evd_cancel_trigger(cancel);
        }
    }
    pthread_mutex_unlock(&e->inflight_mu);
    return slot;
}

int evd_engine_inflight_add(struct evd_engine *e, const struct evd_store_job *job, int attempt,
                            struct evd_cancel *cancel, int64_t deadline_mono)
{
    return add_slot(e, job, attempt, cancel, deadline_mono, false);
}

int evd_engine_inflight_add_ahead(struct evd_engine *e, const struct evd_store_job *job,
                                  int attempt, struct evd_cancel *cancel)
{
    /* Its scenario deadline is set when its call begins (evd_engine_inflight_begin). */
    return add_slot(e, job, attempt, cancel, INT64_MAX, true);
}

int evd_engine_inflight_ahead_room(struct evd_engine *e)
{
    pthread_mutex_lock(&e->inflight_mu);
    int room = e->ahead_cap - e->inflight_ahead;
    pthread_mutex_unlock(&e->inflight_mu);
    return room > 0 ? room : 0;
}

static enum inflight_reason end_slot(struct evd_engine *e, int slot, bool hold)
{
    if (slot < 0)
        return REASON_NONE;
    pthread_mutex_lock(&e->inflight_mu);
    struct inflight *f = &e->inflight[slot];
    enum inflight_reason r = f->reason;
    if (r == REASON_NONE && evd_cancel_is_set(f->cancel))
        r = REASON_LEASE; /* nobody triggered it: its lease deadline passed */
    f->used = hold;
    f->writing = hold;
    f->cancel = NULL;
    if (!hold && f->ahead) {
        f->ahead = false;
        e->inflight_ahead--;
    }
    pthread_mutex_unlock(&e->inflight_mu);
    return r;
}

enum inflight_reason evd_engine_inflight_remove(struct evd_engine *e, int slot)
{
    return end_slot(e, slot, false);
}

enum inflight_reason evd_engine_inflight_hold(struct evd_engine *e, int slot)
{
    return end_slot(e, slot, true);
}

void evd_engine_inflight_begin(struct evd_engine *e, int slot, int64_t deadline_mono)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&e->inflight_mu);
    e->inflight[slot].deadline_mono = deadline_mono;
    pthread_mutex_unlock(&e->inflight_mu);
}

bool evd_engine_inflight_lost(struct evd_engine *e, int slot)
{
    if (slot < 0)
        return false;
    pthread_mutex_lock(&e->inflight_mu);
    bool lost = e->inflight[slot].lost;
    pthread_mutex_unlock(&e->inflight_mu);
    return lost;
}

static void trigger(struct inflight *f, enum inflight_reason reason)
{
    if (f->reason == REASON_NONE)
        f->reason = reason;
    evd_cancel_trigger(f->cancel);
}

void evd_engine_inflight_cancel(struct evd_engine *e, const char *evaluation_id, int position,
                                enum inflight_reason reason)
{
    pthread_mutex_lock(&e->inflight_mu);
    for (int i = 0; i < e->ninflight; i++) {
        struct inflight *f = &e->inflight[i];
        if (f->used && (evaluation_id == NULL || strcmp(f->evaluation_id, evaluation_id) == 0) &&
            (position == 0 || f->position == position))
            trigger(f, reason);
    }
    pthread_mutex_unlock(&e->inflight_mu);
}


size_t evd_engine_inflight_due(struct evd_engine *e, int64_t *ids)
{
    size_t n = 0;
    int64_t now = evd_mono_ms();
    pthread_mutex_lock(&e->inflight_mu);
    for (int i = 0; i < e->ninflight; i++) {
        struct inflight *f = &e->inflight[i];
        if (!f->used)
            continue;
        if (!f->writing && now >= f->deadline_mono)
            trigger(f, REASON_DEADLINE);
        ids[n++] = f->job_id;
    }
    pthread_mutex_unlock(&e->inflight_mu);
    return n;
}

void evd_engine_inflight_renewed(struct evd_engine *e, const int64_t *ids,
                                 const enum evd_lease_state *state, size_t n, int64_t until)
{
    pthread_mutex_lock(&e->inflight_mu);
    for (size_t k = 0; k < n; k++) {
        for (int i = 0; i < e->ninflight; i++) {
            struct inflight *f = &e->inflight[i];
            if (!f->used || f->job_id != ids[k])
                continue;
            if (state[k] == EVD_LEASE_RENEWED)
                evd_cancel_set_deadline(f->cancel, until); /* NULL-safe: a held slot has none */
            else if (state[k] == EVD_LEASE_GONE && f->writing)
                f->lost = true;
            else if (state[k] == EVD_LEASE_GONE)
                trigger(f, REASON_CANCELLED);
        }
    }
    pthread_mutex_unlock(&e->inflight_mu);
}
