/*
 * eval::completed and eval::experiment::completed: the bindings the engine announces
 * and the delivery thread that fires the completion events of the outbox
 * (completion_events, written once per terminal evaluation or experiment by whichever
 * evald process finished it) to them: evaluation.completed events to eval::completed
 * bindings, experiment.completed events to eval::experiment::completed bindings.
 *
 * DESIGN. Bindings live in memory for the current session (the engine replays them
 * after a reconnect) and are also recorded in iii_bindings with the time they were
 * first seen, so that a binding the engine replays after a restart (same id) keeps
 * its place. An event is due to a binding when no iii_deliveries row pairs them and
 *   - the binding filters on that evaluation (or experiment) (whenever it completed,
 *     within the retention window: binding after starting one never misses it), or
 *   - the binding has no filter and the event is not older than the binding.
 * Each delivery inserts its (event_id, binding_id) row, queues the fire-and-forget
 * invokefunction, waits until the frame is written to the socket and only then
 * commits; an engine that goes away before that leaves the row uncommitted and the
 * event due. The insert also keeps two evald processes from firing the same pair.
 * The thread owns its PostgreSQL connection and LISTENs on evald_events and
 * evald_completed.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adapter/internal.h"
#include "common/log.h"
#include "store/db.h"
#include "store/evals.h"
#include "store/iii.h"
#include "store/listen.h"

#define DELIVER_BATCH 100
#define FLUSH_WAIT_MS 5000
#define BINDINGS_REFRESH_MS 60000
#define PRUNE_EVERY_MS 3600000
#define MIN_PASS_GAP_MS 100

/* ---- config and binding table ---------------------------------------------------------- */

/* A binding config of `trigger`: null or an object whose only member is `field`. */
static enum evd_code trigger_config(const char *trigger, const char *field, const json_t *config,
                                    char **filter, struct evd_err *err)
{
    *filter = NULL;
    if (config == NULL || json_is_null(config))
        return EVD_OK;
    if (!json_is_object(config))
        return evd_err_set(err, EVD_EINVAL, "invalid %s config: expected an object", trigger);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)config, key, v)
    {
        if (strcmp(key, field) != 0)
            return evd_err_set(err, EVD_EINVAL,
                               "invalid %s config: unknown field `%.100s`, expected `%s`", trigger,
                               key, field);
    }
    json_t *id = json_object_get(config, field);
    if (id == NULL || json_is_null(id))
        return EVD_OK;
    if (!json_is_string(id))
        return evd_err_set(err, EVD_EINVAL, "invalid %s config: %s must be a string", trigger,
                           field);
    if (json_string_length(id) == 0 || json_string_length(id) > 200)
        return evd_err_set(err, EVD_EINVAL, "invalid %s config: %s must be 1 to 200 characters",
                           trigger, field);
    *filter = strdup(json_string_value(id));
    if (*filter == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    return EVD_OK;
}

enum evd_code evd_iii_completed_config(const json_t *config, char **evaluation_id,
                                       struct evd_err *err)
{
    return trigger_config(EVD_III_TRIGGER, "evaluation_id", config, evaluation_id, err);
}

enum evd_code evd_iii_experiment_config(const json_t *config, char **experiment_id,
                                        struct evd_err *err)
{
    return trigger_config(EVD_III_TRIGGER_EXPERIMENT, "experiment_id", config, experiment_id, err);
}

static void binding_clear(struct evd_iii_binding *b)
{
    free(b->id);
    free(b->function_id);
    free(b->filter);
    free(b->ns);
    json_decref(b->metadata);
    memset(b, 0, sizeof(*b));
}

enum evd_code evd_iii_binding_put(struct evd_iii *a, const char *id, const char *trigger,
                                  const char *function_id, char *filter_take,
                                  const json_t *metadata, const char *ns)
{
    struct evd_iii_binding nb = {
        .id = strdup(id),
        .experiment = strcmp(trigger, EVD_III_TRIGGER_EXPERIMENT) == 0,
        .function_id = strdup(function_id),
        .filter = filter_take,
        .metadata = metadata && !json_is_null(metadata) ? json_deep_copy(metadata) : NULL,
        .ns = ns ? strdup(ns) : NULL,
        .received_at = evd_now_ms(),
    };
    if (nb.id == NULL || nb.function_id == NULL || (ns && nb.ns == NULL)) {
        binding_clear(&nb);
        return EVD_ENOMEM;
    }
    enum evd_code rc = EVD_OK;
    pthread_mutex_lock(&a->mu);
    size_t i = 0;
    while (i < a->nbindings && strcmp(a->bindings[i].id, id) != 0)
        i++;
    if (i < a->nbindings) {
        nb.received_at = a->bindings[i].received_at; /* a replay keeps its age */
        binding_clear(&a->bindings[i]);
        a->bindings[i] = nb;
    } else if (a->nbindings >= EVD_III_MAX_BINDINGS) {
        rc = EVD_ENOMEM;
    } else {
        struct evd_iii_binding *grown =
            realloc(a->bindings, (a->nbindings + 1) * sizeof(*a->bindings));
        if (grown == NULL) {
            rc = EVD_ENOMEM;
        } else {
            a->bindings = grown;
            a->bindings[a->nbindings++] = nb;
        }
    }
    if (rc == EVD_OK)
        a->bindings_version++;
    pthread_mutex_unlock(&a->mu);
    if (rc != EVD_OK)
        binding_clear(&nb);
    return rc;
}

void evd_iii_binding_remove(struct evd_iii *a, const char *id)
{
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->nbindings; i++)
        if (strcmp(a->bindings[i].id, id) == 0) {
            binding_clear(&a->bindings[i]);
            a->bindings[i] = a->bindings[--a->nbindings];
            a->bindings_version++;
            break;
        }
    pthread_mutex_unlock(&a->mu);
}

void evd_iii_bindings_clear_locked(struct evd_iii *a)
{
    for (size_t i = 0; i < a->nbindings; i++)
        binding_clear(&a->bindings[i]);
    free(a->bindings);
    a->bindings = NULL;
    a->nbindings = 0;
    a->bindings_version++;
}

/* ---- delivery ----------------------------------------------------------------------------- */

/* What a pass works from: a copy of the bindings, taken under mu. */
struct snapshot {
    uint64_t generation;
    uint64_t version;
    /* [{binding_id, trigger_type, function_id, evaluation_id, experiment_id, seen_at,
     *   metadata?, namespace?}] */
    json_t *rows;
};

static bool take_snapshot(struct evd_iii *a, struct snapshot *s)
{
    s->rows = json_array();
    if (s->rows == NULL)
        return false;
    pthread_mutex_lock(&a->mu);
    bool live = a->connected && a->nbindings > 0;
    s->generation = a->generation;
    s->version = a->bindings_version;
    for (size_t i = 0; live && i < a->nbindings; i++) {
        const struct evd_iii_binding *b = &a->bindings[i];
        json_t *r = json_pack(
            "{s:s, s:s, s:s, s:s?, s:s?, s:I}", "binding_id", b->id, "trigger_type",
            b->experiment ? EVD_III_TRIGGER_EXPERIMENT : EVD_III_TRIGGER, "function_id",
            b->function_id, "evaluation_id", b->experiment ? NULL : b->filter, "experiment_id",
            b->experiment ? b->filter : NULL, "seen_at", (json_int_t)b->received_at);
        if (r != NULL && b->metadata)
            json_object_set_new(r, "metadata", json_deep_copy(b->metadata));
        if (r != NULL && b->ns)
            json_object_set_new(r, "namespace", json_string(b->ns));
        json_array_append_new(s->rows, r);
    }
    pthread_mutex_unlock(&a->mu);
    return live;
}

static enum evd_code upsert_bindings(PGconn *c, const struct snapshot *s, struct evd_err *err)
{
    char *rows = json_dumps(s->rows, JSON_COMPACT);
    enum evd_code rc = rows ? evd_store_iii_upsert_bindings(c, rows, evd_now_ms(), err)
                            : evd_err_set(err, EVD_ENOMEM, "out of memory");
    free(rows);
    return rc;
}

static const json_t *binding_row(const struct snapshot *s, const char *id)
{
    size_t i;
    json_t *r;
    json_array_foreach(s->rows, i, r)
    {
        if (strcmp(json_string_value(json_object_get(r, "binding_id")), id) == 0)
            return r;
    }
    return NULL;
}

enum outcome { FIRED, SKIPPED, FAILED };

/* Fires one event to one binding and records it. */
static enum outcome deliver_one(struct evd_iii *a, PGconn *c, const struct snapshot *s,
                                const char *event_id, const char *binding_id, const char *payload)
{
    struct evd_err err = {0};
    const json_t *b = binding_row(s, binding_id);
    const char *trigger = b ? json_string_value(json_object_get(b, "trigger_type")) : NULL;
    json_t *data = json_loads(payload, 0, NULL);
    bool done = false;
    enum outcome o = FAILED;
    if (b == NULL || data == NULL) {
        o = SKIPPED; /* cannot happen: the binding is in the snapshot, payloads are JSON */
        goto out;
    }
    if (evd_db_begin(c, &err) != EVD_OK)
        goto out;
    bool claimed = false;
    evd_store_iii_claim(c, event_id, binding_id, evd_now_ms(), &claimed, &err);
    if (!claimed) {
        if (err.code == EVD_OK)
            o = SKIPPED; /* another evald process fired it meanwhile */
        goto out;
    }
    json_t *msg = json_pack("{s:s, s:s, s:O, s:{s:s}}", "type", "invokefunction", "function_id",
                            json_string_value(json_object_get(b, "function_id")), "data", data,
                            "action", "type", "void");
    json_t *meta = json_object_get(b, "metadata");
    json_t *ns = json_object_get(b, "namespace");
    if (msg != NULL && meta != NULL)
        json_object_set(msg, "metadata", meta);
    if (msg != NULL && ns != NULL)
        json_object_set(msg, "namespace", ns);
    uint64_t offset = 0;
    if (evd_iii_send(a, s->generation, msg, &offset, &err) != 0 ||
        !evd_iii_wait_flushed(a, s->generation, offset, FLUSH_WAIT_MS))
        goto out;
    done = evd_db_commit(c, &err) == EVD_OK;
    if (done) {
        o = FIRED;
        evd_log(EVD_LOG_INFO, "iii trigger fired", "trigger", trigger, "event_id", event_id,
                "binding", binding_id, "function_id",
                json_string_value(json_object_get(b, "function_id")), NULL);
    }
out:
    evd_db_rollback(c);
    json_decref(data);
    if (!done && err.code != EVD_OK)
        evd_log(EVD_LOG_WARN, "could not fire an iii trigger", "trigger", trigger, "event_id",
                event_id, "error", err.msg, NULL);
    return o;
}

struct pass {
    struct evd_iii *a;
    PGconn *c;
    const struct snapshot *s;
    int worked;
};

static bool deliver_due(void *arg, const char *event_id, const char *binding_id,
                        const char *payload)
{
    struct pass *ps = arg;
    if (atomic_load(&ps->a->stopping))
        return false;
    ps->worked++;
    if (deliver_one(ps->a, ps->c, ps->s, event_id, binding_id, payload) == FAILED) {
        ps->worked = 0; /* the session is gone or the database failed: wait for the next pass */
        return false;
    }
    return true;
}

/* One pass; returns the number of rows it worked on (a full batch asks for another). */
static int deliver_pass(struct evd_iii *a, PGconn *c, uint64_t *persisted_version,
                        int64_t *persisted_at)
{
    struct snapshot s = {0};
    int worked = 0;
    char *ids = NULL;
    struct evd_err err = {0};
    if (!take_snapshot(a, &s))
        goto out;
    if (s.version != *persisted_version || evd_mono_ms() - *persisted_at > BINDINGS_REFRESH_MS) {
        if (upsert_bindings(c, &s, &err) != EVD_OK)
            goto out;
        *persisted_version = s.version;
        *persisted_at = evd_mono_ms();
    }
    json_t *idlist = json_array();
    size_t i;
    json_t *row;
    json_array_foreach(s.rows, i, row)
    {
        json_array_append(idlist, json_object_get(row, "binding_id"));
    }
    ids = json_dumps(idlist, JSON_COMPACT);
    json_decref(idlist);
    struct pass ps = {.a = a, .c = c, .s = &s};
    if (ids == NULL)
        goto out;
    evd_store_iii_due(c, ids, evd_now_ms() - a->opts.retention_ms, DELIVER_BATCH, deliver_due, &ps,
                      &err);
    worked = ps.worked;
out:
    if (err.code != EVD_OK)
        evd_log(EVD_LOG_WARN, "iii trigger delivery pass failed", "error", err.msg, NULL);
    free(ids);
    json_decref(s.rows);
    return worked;
}

static void prune(struct evd_iii *a, PGconn *c)
{
    struct evd_err err = {0};
    if (evd_store_iii_prune(c, evd_now_ms() - a->opts.retention_ms, &err) != EVD_OK)
        evd_log(EVD_LOG_WARN, "could not prune iii delivery records", "error", err.msg, NULL);
}

/* evald_events: an evaluation changed (its event is written with the last change);
 * evald_completed: a completion event was recorded (experiments notify only this). */
static const char *const events_channels[] = {EVD_CHANNEL_EVENTS, EVD_CHANNEL_COMPLETED, NULL};

void *evd_iii_deliver_main(void *arg)
{
    struct evd_iii *a = arg;
    struct evd_listener_opts o = {.conninfo = a->opts.conninfo,
                                  .channels = events_channels,
                                  .wake_fd = a->dwake[0],
                                  .stopping = &a->stopping,
                                  .what = "iii delivery: database not reachable, retrying"};
    struct evd_listener *l = evd_listener_new(&o);
    if (l == NULL)
        evd_log(EVD_LOG_ERROR, "out of memory for the iii delivery connection", NULL);
    PGconn *c = l ? evd_listener_conn(l) : NULL;
    uint64_t persisted_version = UINT64_MAX;
    int64_t persisted_at = 0, last_prune = 0, last_pass = 0;
    bool again = true;
    while (c != NULL && !atomic_load(&a->stopping)) {
        if (!again) {
            bool woken = false;
            bool ok = evd_listener_wait(l, (int)a->opts.deliver_poll_ms, &woken);
            if (woken) {
                char buf[64];
                while (read(a->dwake[0], buf, sizeof(buf)) > 0)
                    ;
            }
            if (!ok) {
                c = evd_listener_conn(l);
                persisted_version = UINT64_MAX;
                continue;
            }
        }
        if (atomic_load(&a->stopping))
            break;
        if (!evd_listener_ensure(l)) {
            c = evd_listener_conn(l);
            persisted_version = UINT64_MAX;
            continue;
        }
        /* Notifications come in bursts (every run change): one pass per gap is enough. */
        int64_t gap = MIN_PASS_GAP_MS - (evd_mono_ms() - last_pass);
        if (gap > 0) {
            struct pollfd p = {.fd = a->dwake[0], .events = POLLIN};
            poll(&p, 1, (int)gap);
        }
        last_pass = evd_mono_ms();
        again = deliver_pass(a, c, &persisted_version, &persisted_at) >= DELIVER_BATCH;
        if (evd_mono_ms() - last_prune > PRUNE_EVERY_MS) {
            prune(a, c);
            last_prune = evd_mono_ms();
        }
    }
    evd_listener_free(l);
    return NULL;
}
