/*
 * The iii worker protocol (engine 0.22/0.23, docs/iii.md): what evald announces when a
 * session opens, how it reacts to each message the engine sends, the handler threads
 * that answer invocations of the eval functions through evd_function_call (exactly
 * once per invocation_id), and the calls evald makes to other workers' functions.
 * Runs on the connection thread (messages), the handler threads (invocations) and
 * callers' threads (remote calls); shared state is under a->mu (internal.h).
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "adapter/internal.h"
#include "common/cancel.h"
#include "common/log.h"
#include "handlers/functions.h"

/* A callee may come back later than evald after an engine restart: a call answered
 * function_not_found within this long of (re)connecting is tried again. */
#define NOT_FOUND_GRACE_MS 10000
#define RETRY_PAUSE_MS 250
#define MAX_LISTED 128 /* engine functions offered to one run */
#define INFO_BATCH 32  /* engine::functions::info takes at most 32 ids */

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* ---- errors ------------------------------------------------------------------------ */

json_t *evd_iii_error_body(const struct evd_err *err)
{
    const char *prefix;
    switch (err->code) {
    case EVD_EINVAL:
    case EVD_ETOOLARGE:
    case EVD_EMEDIA:
        prefix = "invalid request";
        break;
    case EVD_ENOTFOUND:
        prefix = "evaluation not found";
        break;
    case EVD_ECONFLICT:
        prefix = "evaluation conflict";
        break;
    case EVD_EDB:
    case EVD_EUNAVAIL:
    case EVD_EUPSTREAM:
    case EVD_ETIMEOUT:
        prefix = "dependency error";
        break;
    default:
        prefix = "state error";
        break;
    }
    const char *msg = err->msg[0] ? err->msg : evd_code_name(err->code);
    size_t k = strlen(prefix);
    char text[EVD_ERR_MSG_MAX + 64];
    if (strncmp(msg, prefix, k) == 0 && msg[k] == ':')
        snprintf(text, sizeof(text), "%s", msg);
    else
        snprintf(text, sizeof(text), "%s: %s", prefix, msg);
    return json_pack("{s:s, s:s}", "code", "invocation_failed", "message", text);
}

/* ---- announcing the worker ------------------------------------------------------------ */

/* The JSON Schema of an eval::completed event. */
static json_t *completed_payload_schema(void)
{
    return json_pack("{s:s, s:s, s:s, s:{s:{s:s}, s:{s:s, s:[s,s,s]}, s:{s:s}, s:{s:s}},"
                     " s:[s,s,s], s:b}",
                     "$schema", "http://json-schema.org/draft-07/schema#", "title",
                     "EvalCompletedEventV1", "type", "object", "properties", "evaluation_id",
                     "type", "string", "status", "type", "string", "enum", "completed", "failed",
                     "cancelled", "timestamp", "type", "integer", "eligible", "type", "boolean",
                     "required", "evaluation_id", "status", "timestamp", "additionalProperties", 0);
}

/* The binding config of eval::experiment::completed ({experiment_id?}). */
static const char EXPERIMENT_CONFIG_SCHEMA[] =
    "{\"$schema\": \"http://json-schema.org/draft-07/schema#\","
    " \"title\": \"ExperimentCompletedBindingConfigV1\", \"type\": \"object\","
    " \"properties\": {\"experiment_id\": {\"type\": [\"string\", \"null\"]}},"
    " \"additionalProperties\": false}";

/* An eval::experiment::completed event: the experiment.completed webhook body. */
static const char EXPERIMENT_PAYLOAD_SCHEMA[] =
    "{\"$schema\": \"http://json-schema.org/draft-07/schema#\","
    " \"title\": \"ExperimentCompletedEventV1\", \"type\": \"object\","
    " \"properties\": {"
    "  \"experiment_id\": {\"type\": \"string\"},"
    "  \"status\": {\"type\": \"string\", \"enum\": [\"completed\", \"failed\", \"cancelled\"]},"
    "  \"timestamp\": {\"type\": \"integer\"},"
    "  \"verdicts\": {\"type\": \"array\", \"items\": {\"type\": \"object\","
    "   \"properties\": {\"treatment\": {\"type\": \"integer\", \"minimum\": 1},"
    "    \"label\": {\"type\": \"string\"},"
    "    \"verdict\": {\"type\": \"string\","
    "     \"enum\": [\"better\", \"worse\", \"equivalent\", \"inconclusive\"]}},"
    "   \"required\": [\"treatment\", \"label\", \"verdict\"]}}},"
    " \"required\": [\"experiment_id\", \"status\", \"timestamp\", \"verdicts\"],"
    " \"additionalProperties\": false}";

static bool is_our_function(const char *id)
{
    const json_t *cat = evd_functions_catalogue();
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(cat, "functions"), i, f)
    {
        const char *name = str(f, "name");
        if (name && strcmp(name, id) == 0)
            return true;
    }
    return false;
}

void evd_iii_on_open(struct evd_iii *a, uint64_t gen)
{
    struct evd_err err = {0};
    char previous[64], token[64];
    pthread_mutex_lock(&a->mu);
    snprintf(previous, sizeof(previous), "%s", a->worker_id);
    snprintf(token, sizeof(token), "%s", a->reattach_token);
    pthread_mutex_unlock(&a->mu);
    /* After a reconnect the engine may still hold the old session: reattach evicts it. */
    if (previous[0] != '\0')
        evd_iii_send(a, gen,
                     json_pack("{s:s, s:s, s:s}", "type", "reattach", "previous_worker_id",
                               previous, "reattach_token", token),
                     NULL, &err);
    /* Registration first: 0.23 engines buffer what follows until it arrives. */
    struct utsname u;
    char os[256] = "unknown";
    if (uname(&u) == 0)
        snprintf(os, sizeof(os), "%s %s (%s)", u.sysname, u.release, u.machine);
    evd_iii_send(a, gen,
                 json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s, s:I}, s:{s:s}}", "type",
                           "invokefunction", "function_id", "engine::workers::register", "data",
                           "runtime", "c", "version", EVALD_VERSION, "name", a->worker_name,
                           "description", "evald: durable prompt A/B evaluation service", "os", os,
                           "pid", (json_int_t)getpid(), "action", "type", "void"),
                 NULL, &err);
    const json_t *cat = evd_functions_catalogue();
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(cat, "triggers"), i, t)
    {
        const char *name = str(t, "name");
        if (name == NULL || strcmp(name, EVD_III_TRIGGER) != 0)
            continue;
        /* Copies: the catalogue is shared by every thread and must never see its
         * reference counts change. */
        json_t *msg =
            json_pack("{s:s, s:s, s:s, s:o*, s:o}", "type", "registertriggertype", "id", name,
                      "description", str(t, "description") ?: "", "trigger_request_format",
                      json_deep_copy(json_object_get(t, "invocation_schema")),
                      "call_request_format", completed_payload_schema());
        evd_iii_send(a, gen, msg, NULL, &err);
    }
    /* Not part of the eval function contract (contract/functions.json mirrors the
     * seed's): evald's own trigger, announced the same way. */
    evd_iii_send(a, gen,
                 json_pack("{s:s, s:s, s:s, s:o, s:o}", "type", "registertriggertype", "id",
                           EVD_III_TRIGGER_EXPERIMENT, "description",
                           "An experiment reached a terminal status.", "trigger_request_format",
                           json_loads(EXPERIMENT_CONFIG_SCHEMA, 0, NULL), "call_request_format",
                           json_loads(EXPERIMENT_PAYLOAD_SCHEMA, 0, NULL)),
                 NULL, &err);
    json_t *f;
    size_t nfunctions = 0;
    json_array_foreach(json_object_get(cat, "functions"), i, f)
    {
        json_t *msg = json_pack("{s:s, s:s, s:s}", "type", "registerfunction", "id", str(f, "name"),
                                "description", str(f, "description") ?: "");
        if (msg == NULL)
            continue;
        static const char *const keys[][2] = {{"request_schema", "request_format"},
                                              {"response_schema", "response_format"},
                                              {"metadata", "metadata"}};
        for (size_t k = 0; k < 3; k++) {
            json_t *v = json_object_get(f, keys[k][0]);
            if (v != NULL)
                json_object_set_new(msg, keys[k][1], json_deep_copy(v));
        }
        if (evd_iii_send(a, gen, msg, NULL, &err) == 0)
            nfunctions++;
    }
    char n[16];
    snprintf(n, sizeof(n), "%zu", nfunctions);
    evd_log(EVD_LOG_INFO, "registered with the iii engine", "worker", a->worker_name, "functions",
            n, "error", err.code ? err.msg : NULL, NULL);
}

/* ---- inbound messages ------------------------------------------------------------------ */

static void reply_error(struct evd_iii *a, uint64_t gen, const char *invocation_id,
                        const char *function_id, const char *code, const char *message)
{
    evd_iii_send(a, gen,
                 json_pack("{s:s, s:s, s:s, s:{s:s, s:s}}", "type", "invocationresult",
                           "invocation_id", invocation_id, "function_id", function_id, "error",
                           "code", code, "message", message),
                 NULL, NULL);
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void job_free(struct evd_iii_job *j)
{
    if (j == NULL)
        return;
    free(j->function_id);
    free(j->traceparent);
    free(j->baggage);
    json_decref(j->data);
    free(j);
}

static void on_invoke(struct evd_iii *a, uint64_t gen, json_t *msg)
{
    const char *fid = str(msg, "function_id");
    json_t *iid = json_object_get(msg, "invocation_id");
    const char *invocation_id = json_string_value(iid);
    if (fid == NULL || (iid != NULL && !json_is_null(iid) && invocation_id == NULL) ||
        (invocation_id && strlen(invocation_id) >= 64)) {
        evd_log(EVD_LOG_WARN, "iii engine sent a malformed invokefunction", NULL);
        return;
    }
    if (!is_our_function(fid)) {
        if (invocation_id) {
            char m[300];
            snprintf(m, sizeof(m), "function %.200s is not served by this worker", fid);
            reply_error(a, gen, invocation_id, fid, "function_not_found", m);
        }
        return;
    }
    struct evd_iii_job *j = calloc(1, sizeof(*j));
    if (j == NULL || (j->function_id = strdup(fid)) == NULL) {
        job_free(j);
        if (invocation_id)
            reply_error(a, gen, invocation_id, fid, "invocation_failed",
                        "state error: out of memory");
        return;
    }
    j->generation = gen;
    snprintf(j->invocation_id, sizeof(j->invocation_id), "%s", invocation_id ? invocation_id : "");
    json_t *data = json_object_get(msg, "data");
    j->data = data ? json_deep_copy(data) : NULL; /* owned by the handler thread alone */
    j->traceparent = dup_or_null(str(msg, "traceparent"));
    j->baggage = dup_or_null(str(msg, "baggage"));
    const char *refusal = NULL;
    pthread_mutex_lock(&a->mu);
    if (atomic_load(&a->stopping))
        refusal = "state error: evald is shutting down";
    else if (a->njobs >= EVD_III_MAX_JOBS)
        refusal = "dependency error: evald is busy; too many invocations are queued";
    if (refusal == NULL) {
        if (a->jobs_tail)
            a->jobs_tail->next = j;
        else
            a->jobs_head = j;
        a->jobs_tail = j;
        a->njobs++;
        pthread_cond_signal(&a->jobs_cv);
    }
    pthread_mutex_unlock(&a->mu);
    if (refusal != NULL) {
        if (invocation_id)
            reply_error(a, gen, invocation_id, fid, "invocation_failed", refusal);
        job_free(j);
    }
}

static void on_result(struct evd_iii *a, json_t *msg)
{
    const char *id = str(msg, "invocation_id");
    if (id == NULL)
        return;
    json_t *error = json_object_get(msg, "error");
    pthread_mutex_lock(&a->mu);
    for (struct evd_iii_waiter *w = a->waiters; w; w = w->next) {
        if (w->done || strcmp(w->id, id) != 0)
            continue;
        w->done = true;
        if (error != NULL && !json_is_null(error)) {
            /* An error without a code (absent, not a string, or "") still fails the call. */
            const char *code = str(error, "code");
            snprintf(w->code, sizeof(w->code), "%s", code && *code ? code : "invocation_error");
            snprintf(w->message, sizeof(w->message), "%s", str(error, "message") ?: "");
        } else {
            /* A copy: the waiting thread must not share json_t with this one. */
            json_t *r = json_object_get(msg, "result");
            w->result = r ? json_deep_copy(r) : json_null();
            if (w->result == NULL) {
                snprintf(w->code, sizeof(w->code), "invocation_error");
                snprintf(w->message, sizeof(w->message), "out of memory copying the result");
            }
        }
        pthread_cond_broadcast(&a->cv);
        break;
    }
    pthread_mutex_unlock(&a->mu); /* a result nobody waits for any more is dropped */
}

static void on_register_trigger(struct evd_iii *a, uint64_t gen, json_t *msg)
{
    const char *id = str(msg, "id");
    const char *type = str(msg, "trigger_type");
    const char *fid = str(msg, "function_id");
    if (id == NULL || type == NULL || fid == NULL) {
        evd_log(EVD_LOG_WARN, "iii engine sent a malformed registertrigger", NULL);
        return;
    }
    json_t *ack = json_pack("{s:s, s:s, s:s, s:s}", "type", "triggerregistrationresult", "id", id,
                            "trigger_type", type, "function_id", fid);
    struct evd_err err = {0};
    char *filter = NULL;
    bool experiment = strcmp(type, EVD_III_TRIGGER_EXPERIMENT) == 0;
    if (strcmp(type, EVD_III_TRIGGER) != 0 && !experiment) {
        evd_err_set(&err, EVD_ENOTFOUND, "trigger type %.200s is not provided by this worker",
                    type);
        json_object_set_new(
            ack, "error",
            json_pack("{s:s, s:s}", "code", "trigger_type_not_found", "message", err.msg));
    } else if ((experiment
                    ? evd_iii_experiment_config(json_object_get(msg, "config"), &filter, &err)
                    : evd_iii_completed_config(json_object_get(msg, "config"), &filter, &err)) !=
                   EVD_OK ||
               evd_iii_binding_put(a, id, type, fid, filter, json_object_get(msg, "metadata"),
                                   str(msg, "namespace")) != EVD_OK) {
        if (err.code == EVD_OK)
            evd_err_set(&err, EVD_ENOMEM,
                        "could not keep the binding (too many or out of "
                        "memory)");
        json_object_set_new(
            ack, "error",
            json_pack("{s:s, s:s}", "code", "trigger_registration_failed", "message", err.msg));
    } else {
        evd_log(EVD_LOG_INFO, "iii trigger bound", "trigger", type, "binding", id, "function_id",
                fid, NULL);
        evd_iii_wake(a->dwake[1]);
    }
    evd_iii_send(a, gen, ack, NULL, NULL);
}

void evd_iii_on_message(struct evd_iii *a, uint64_t gen, const char *text, size_t len)
{
    if (len == 0)
        return;
    json_error_t jerr;
    json_t *msg = json_loadb(text, len, 0, &jerr);
    const char *type = str(msg, "type");
    if (type == NULL) {
        evd_log(EVD_LOG_WARN, "iii engine sent a message evald cannot decode", "error",
                msg ? "no type" : jerr.text, NULL);
        json_decref(msg);
        return;
    }
    if (strcmp(type, "invokefunction") == 0) {
        on_invoke(a, gen, msg);
    } else if (strcmp(type, "invocationresult") == 0) {
        on_result(a, msg);
    } else if (strcmp(type, "registertrigger") == 0) {
        on_register_trigger(a, gen, msg);
    } else if (strcmp(type, "unregistertrigger") == 0) {
        const char *id = str(msg, "id");
        if (id != NULL) {
            evd_iii_binding_remove(a, id);
            evd_log(EVD_LOG_INFO, "iii trigger unbound", "binding", id, NULL);
        }
    } else if (strcmp(type, "workerregistered") == 0) {
        pthread_mutex_lock(&a->mu);
        snprintf(a->worker_id, sizeof(a->worker_id), "%s", str(msg, "worker_id") ?: "");
        snprintf(a->reattach_token, sizeof(a->reattach_token), "%s",
                 str(msg, "reattach_token") ?: "");
        pthread_mutex_unlock(&a->mu);
        evd_log(EVD_LOG_DEBUG, "iii engine assigned a worker id", "worker_id",
                str(msg, "worker_id"), NULL);
    } else if (strcmp(type, "ping") == 0) {
        evd_iii_send(a, gen, json_pack("{s:s}", "type", "pong"), NULL, NULL);
    } else if (strcmp(type, "registrationrejected") == 0) {
        evd_log(EVD_LOG_ERROR, "iii engine rejected a registration", "code", str(msg, "code"),
                "function_id", str(msg, "function_id"), "owner", str(msg, "owner_worker_id"), NULL);
    } else if (strcmp(type, "triggerregistrationresult") == 0) {
        json_t *e = json_object_get(msg, "error");
        if (e != NULL && !json_is_null(e))
            evd_log(EVD_LOG_WARN, "iii engine refused a trigger", "id", str(msg, "id"), "error",
                    str(e, "message"), NULL);
    } else if (strcmp(type, "error") == 0) {
        json_t *e = json_object_get(msg, "error");
        evd_log(EVD_LOG_ERROR, "iii engine reported an error", "code", str(e, "code"), "error",
                str(e, "message"), NULL);
    } else if (strcmp(type, "pong") != 0) {
        evd_log(EVD_LOG_DEBUG, "iii engine message ignored", "type", type, NULL);
    }
    json_decref(msg);
}

void evd_iii_on_close(struct evd_iii *a, uint64_t gen)
{
    pthread_mutex_lock(&a->mu);
    for (struct evd_iii_waiter *w = a->waiters; w; w = w->next)
        if (w->generation == gen && !w->done) {
            w->done = true;
            w->lost = true;
        }
    /* The engine drops connection-owned bindings with the session and replays the
     * others when the trigger type is registered again. */
    evd_iii_bindings_clear_locked(a);
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

/* ---- handler threads --------------------------------------------------------------------- */

static void run_job(struct evd_iii *a, struct evd_iii_job *j)
{
    struct evd_err err = {0};
    json_t *request = NULL, *response = NULL;
    int64_t t0 = evd_mono_ms();
    if (json_is_object(j->data)) {
        /* The engine adds the caller's worker id; it is not part of any request. */
        request = json_copy(j->data);
        json_object_del(request, "_caller_worker_id");
    } else if (j->data != NULL && !json_is_null(j->data)) {
        request = json_incref(j->data); /* evd_function_call refuses it by name */
    }
    enum evd_code rc = evd_function_call(a->ctx, j->function_id, request, &response, &err);
    json_decref(request);
    char dur[24];
    snprintf(dur, sizeof(dur), "%lld", (long long)(evd_mono_ms() - t0));
    evd_log(rc == EVD_OK ? EVD_LOG_DEBUG : EVD_LOG_INFO, "iii invocation", "function_id",
            j->function_id, "code", rc == EVD_OK ? NULL : evd_code_name(rc), "dur_ms", dur, NULL);
    if (j->invocation_id[0] == '\0') {
        json_decref(response);
        return;
    }
    json_t *msg = json_pack("{s:s, s:s, s:s}", "type", "invocationresult", "invocation_id",
                            j->invocation_id, "function_id", j->function_id);
    if (rc == EVD_OK)
        json_object_set_new(msg, "result", response ? response : json_null());
    else {
        json_decref(response);
        json_object_set_new(msg, "error", evd_iii_error_body(&err));
    }
    if (j->traceparent)
        json_object_set_new(msg, "traceparent", json_string(j->traceparent));
    if (j->baggage)
        json_object_set_new(msg, "baggage", json_string(j->baggage));
    struct evd_err serr = {0};
    if (evd_iii_send(a, j->generation, msg, NULL, &serr) != 0)
        evd_log(EVD_LOG_WARN, "could not answer an iii invocation", "function_id", j->function_id,
                "error", serr.msg, NULL);
}

void *evd_iii_handler_main(void *arg)
{
    struct evd_iii *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (a->jobs_head == NULL && !atomic_load(&a->stopping))
            pthread_cond_wait(&a->jobs_cv, &a->mu);
        if (a->jobs_head == NULL || atomic_load(&a->stopping))
            break; /* stopping: queued invocations are dropped, the engine stops them */
        struct evd_iii_job *j = a->jobs_head;
        a->jobs_head = j->next;
        if (a->jobs_head == NULL)
            a->jobs_tail = NULL;
        a->njobs--;
        a->active_jobs++;
        pthread_mutex_unlock(&a->mu);
        run_job(a, j);
        job_free(j);
        pthread_mutex_lock(&a->mu);
        a->active_jobs--;
        evd_iii_wake(a->wake[1]);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

void evd_iii_jobs_clear(struct evd_iii *a)
{
    pthread_mutex_lock(&a->mu);
    struct evd_iii_job *j = a->jobs_head;
    a->jobs_head = a->jobs_tail = NULL;
    a->njobs = 0;
    pthread_mutex_unlock(&a->mu);
    while (j) {
        struct evd_iii_job *next = j->next;
        job_free(j);
        j = next;
    }
}

/* ---- calls to engine functions ------------------------------------------------------------ */

static void deadline_ts(struct timespec *ts, int64_t ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    ts->tv_sec += ms / 1000 + ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
}

enum attempt_outcome { ATT_OK, ATT_FAILED, ATT_LOST, ATT_UNSENT, ATT_NOT_FOUND_EARLY };

/* Waits (under mu) for a session; false with *err on stop, cancel or deadline. */
static bool wait_connected(struct evd_iii *a, int64_t deadline, struct evd_cancel *cancel,
                           int64_t timeout_ms, struct evd_err *err)
{
    while (!a->connected) {
        if (atomic_load(&a->stopping)) {
            evd_err_set(err, EVD_ECANCELLED, "evald is shutting down");
            return false;
        }
        if (evd_cancel_is_set(cancel)) {
            evd_err_set(err, EVD_ECANCELLED, "cancelled");
            return false;
        }
        int64_t left = deadline - evd_mono_ms();
        if (left <= 0) {
            evd_err_set(err, EVD_ETIMEOUT, "iii engine was not connected within %lld ms",
                        (long long)timeout_ms);
            return false;
        }
        struct timespec ts;
        deadline_ts(&ts, left < 100 ? left : 100);
        pthread_cond_timedwait(&a->cv, &a->mu, &ts);
    }
    return true;
}

static enum attempt_outcome attempt(struct evd_iii *a, const char *fid, json_t *payload,
                                    int64_t deadline, struct evd_cancel *cancel, int64_t timeout_ms,
                                    json_t **result, struct evd_err *err)
{
    struct evd_iii_waiter *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        return ATT_FAILED;
    }
    evd_ws_uuid4(w->id);
    pthread_mutex_lock(&a->mu);
    if (!wait_connected(a, deadline, cancel, timeout_ms, err)) {
        pthread_mutex_unlock(&a->mu);
        free(w);
        return ATT_FAILED;
    }
    uint64_t gen = w->generation = a->generation;
    bool early = evd_mono_ms() - a->connected_at_mono < NOT_FOUND_GRACE_MS;
    w->next = a->waiters;
    a->waiters = w;
    pthread_mutex_unlock(&a->mu);

    enum attempt_outcome out = ATT_FAILED;
    json_t *msg = json_pack("{s:s, s:s, s:s, s:O}", "type", "invokefunction", "invocation_id",
                            w->id, "function_id", fid, "data", payload ? payload : json_null());
    struct evd_err serr = {0};
    bool sent = msg != NULL && evd_iii_send(a, gen, msg, NULL, &serr) == 0;

    pthread_mutex_lock(&a->mu);
    while (sent && !w->done) {
        if (atomic_load(&a->stopping)) {
            evd_err_set(err, EVD_ECANCELLED, "evald is shutting down");
            break;
        }
        if (evd_cancel_is_set(cancel)) {
            evd_err_set(err, EVD_ECANCELLED, "cancelled");
            break;
        }
        int64_t left = deadline - evd_mono_ms();
        if (left <= 0) {
            evd_err_set(err, EVD_ETIMEOUT, "iii function %s did not answer within %lld ms", fid,
                        (long long)timeout_ms);
            break;
        }
        struct timespec ts;
        deadline_ts(&ts, left < 100 ? left : 100);
        pthread_cond_timedwait(&a->cv, &a->mu, &ts);
    }
    for (struct evd_iii_waiter **p = &a->waiters; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    pthread_mutex_unlock(&a->mu);

    if (!sent) {
        out = ATT_UNSENT; /* the session ended before the frame was queued */
        evd_err_set(err, EVD_EUNAVAIL, "%s", serr.msg[0] ? serr.msg : "out of memory");
    } else if (!w->done) {
        out = ATT_FAILED; /* stop, cancel or deadline: *err is set */
    } else if (w->lost) {
        out = ATT_LOST;
        evd_err_set(err, EVD_EUPSTREAM, "iii engine connection was lost during the call to %s",
                    fid);
    } else if (w->result != NULL) {
        *result = w->result;
        w->result = NULL;
        out = ATT_OK;
    } else if (strcmp(w->code, "function_not_found") == 0) {
        evd_err_set(err, EVD_ENOTFOUND, "iii function %s not found: %s", fid, w->message);
        out = early ? ATT_NOT_FOUND_EARLY : ATT_FAILED;
    } else if (strcmp(w->code, "invocation_stopped") == 0) {
        evd_err_set(err, EVD_EUPSTREAM, "iii function %s stopped: %s", fid, w->message);
        out = ATT_LOST; /* its worker went away mid-call */
    } else {
        evd_err_set(err, EVD_EUPSTREAM, "iii function %s failed: %s: %s", fid, w->code, w->message);
    }
    json_decref(w->result);
    free(w);
    return out;
}

json_t *evd_iii_remote_call(void *ctx, const char *function_id, json_t *payload, int64_t timeout_ms,
                            struct evd_cancel *cancel, bool at_least_once, struct evd_err *err)
{
    struct evd_iii *a = ctx;
    int64_t deadline = evd_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        json_t *result = NULL;
        struct evd_err aerr = {0};
        enum attempt_outcome o =
            attempt(a, function_id, payload, deadline, cancel, timeout_ms, &result, &aerr);
        if (o == ATT_OK)
            return result;
        bool again =
            o == ATT_UNSENT || o == ATT_NOT_FOUND_EARLY || (o == ATT_LOST && at_least_once);
        if (!again || deadline - evd_mono_ms() <= RETRY_PAUSE_MS || atomic_load(&a->stopping)) {
            if (err)
                *err = aerr;
            return NULL;
        }
        if (evd_cancel_sleep(cancel, RETRY_PAUSE_MS)) {
            evd_err_set(err, EVD_ECANCELLED, "cancelled");
            return NULL;
        }
    }
}

bool evd_iii_policy_allows(const json_t *policy, const char *function_id)
{
    if (!json_is_object(policy) || function_id == NULL)
        return false;
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(policy, "deny"), i, p)
    {
        if (json_is_string(p) && fnmatch(json_string_value(p), function_id, 0) == 0)
            return false;
    }
    json_array_foreach(json_object_get(policy, "allow"), i, p)
    {
        if (json_is_string(p) && fnmatch(json_string_value(p), function_id, 0) == 0)
            return true;
    }
    return false;
}

/* Fills request schemas (and descriptions) of `out` entries from engine::functions::info. */
static void add_schemas(struct evd_iii *a, json_t *out, int64_t deadline)
{
    size_t n = json_array_size(out);
    for (size_t start = 0; start < n; start += INFO_BATCH) {
        int64_t left = deadline - evd_mono_ms();
        if (left <= 0)
            return;
        json_t *ids = json_array();
        for (size_t i = start; i < n && i < start + INFO_BATCH; i++)
            json_array_append(ids, json_object_get(json_array_get(out, i), "id"));
        json_t *req = json_pack("{s:o}", "function_ids", ids);
        struct evd_err err = {0};
        json_t *info =
            evd_iii_remote_call(a, "engine::functions::info", req, left, NULL, true, &err);
        json_decref(req);
        if (info == NULL) {
            evd_log(EVD_LOG_DEBUG, "engine::functions::info failed; schemas left open", "error",
                    err.msg, NULL);
            return;
        }
        size_t k;
        json_t *d;
        json_array_foreach(json_object_get(info, "functions"), k, d)
        {
            const char *id = str(d, "function_id");
            for (size_t i = start; id && i < n && i < start + INFO_BATCH; i++) {
                json_t *e = json_array_get(out, i);
                if (strcmp(str(e, "id"), id) != 0)
                    continue;
                json_t *schema = json_object_get(d, "request_schema");
                if (json_is_object(schema))
                    json_object_set(e, "request_schema", schema);
                if (str(d, "description") && !str(e, "description"))
                    json_object_set(e, "description", json_object_get(d, "description"));
            }
        }
        json_decref(info);
    }
}

json_t *evd_iii_remote_functions(void *ctx, json_t *policy, int64_t timeout_ms, struct evd_err *err)
{
    struct evd_iii *a = ctx;
    int64_t deadline = evd_mono_ms() + timeout_ms;
    json_t *req = json_object();
    json_t *list =
        evd_iii_remote_call(a, "engine::functions::list", req, timeout_ms, NULL, true, err);
    json_decref(req);
    if (list == NULL)
        return NULL;
    json_t *out = json_array();
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(list, "functions"), i, f)
    {
        const char *id = str(f, "function_id");
        if (id == NULL || !evd_iii_policy_allows(policy, id))
            continue;
        if (json_array_size(out) >= MAX_LISTED) {
            evd_log(EVD_LOG_WARN,
                    "the function policy allows too many iii functions; the rest "
                    "are not offered",
                    "limit", "128", NULL);
            break;
        }
        json_t *e = json_pack("{s:s}", "id", id);
        if (str(f, "description"))
            json_object_set(e, "description", json_object_get(f, "description"));
        json_array_append_new(out, e);
    }
    json_decref(list);
    add_schemas(a, out, deadline);
    return out;
}
