/*
 * Adapter internals shared by its files: the adapter object, its connection state,
 * the calls waiting for a result, the trigger bindings and the queue of
 * invocations for the handler threads.
 *
 * Locking: one mutex `mu` guards everything below it in struct evd_iii; `cv` is
 * broadcast on every change a waiter may care about (connection up or down, bytes
 * flushed, a call answered, stop). `mu` is a leaf lock: it is never held across a
 * blocking socket call, a query or a function call (socket writes under it are
 * non-blocking).
 */
#ifndef EVD_ADAPTER_INTERNAL_H
#define EVD_ADAPTER_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "adapter/iii.h"
#include "adapter/ws.h"
#include "common/util.h"
#include "engine/engine.h"

#define EVD_III_MAX_FRAME (16u * 1024 * 1024)   /* one frame, either direction */
#define EVD_III_MAX_MESSAGE (16u * 1024 * 1024) /* a reassembled inbound message */
#define EVD_III_MAX_OUTBOX (64u * 1024 * 1024)  /* frames waiting for the socket */
#define EVD_III_MAX_JOBS 1024                   /* queued inbound invocations */
#define EVD_III_MAX_BINDINGS 4096
#define EVD_III_TRIGGER "eval::completed"                        /* evaluation.completed */
#define EVD_III_TRIGGER_EXPERIMENT "eval::experiment::completed" /* experiment.completed */

/* A call of an engine function waiting for its invocationresult. */
struct evd_iii_waiter {
    char id[37];
    uint64_t generation; /* the session it was sent on */
    bool done;           /* answered, or the session ended (lost) */
    bool lost;
    json_t *result; /* new reference when answered without error */
    char code[64];  /* error code when answered with one */
    char message[EVD_ERR_MSG_MAX];
    struct evd_iii_waiter *next;
};

/* A binding of eval::completed or eval::experiment::completed the engine announced on
 * the current session. */
struct evd_iii_binding {
    char *id;
    bool experiment; /* eval::experiment::completed, else eval::completed */
    char *function_id;
    char *filter;        /* evaluation_id (or experiment_id) filter, NULL = every one */
    json_t *metadata;    /* forwarded with each event, or NULL */
    char *ns;            /* the binding's namespace, or NULL */
    int64_t received_at; /* wall clock ms */
};

/* An inbound invocation for a handler thread. */
struct evd_iii_job {
    uint64_t generation;
    char invocation_id[64]; /* "" for fire-and-forget */
    char *function_id;
    json_t *data; /* new reference */
    char *traceparent, *baggage;
    struct evd_iii_job *next;
};

struct evd_iii {
    struct evd_iii_options opts; /* url and conninfo point at the copies below */
    char *url_copy, *conninfo_copy;
    struct evd_ws_url url;
    struct evd_ctx *ctx;
    struct evd_engine_remote remote;
    char worker_name[160];

    atomic_bool stopping;
    int wake[2];  /* wakes the connection thread (frames to send, stop) */
    int dwake[2]; /* wakes the delivery thread (bindings changed, connected, stop) */
    pthread_t conn_thread, deliver_thread;
    pthread_t *handlers;
    int nhandlers;
    bool started;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_cond_t jobs_cv;
    /* ---- guarded by mu ---- */
    bool connected;
    uint64_t generation;       /* bumped when a session opens */
    int64_t connected_at_mono; /* when the current session opened */
    struct evd_buf out;        /* encoded frames not yet written */
    size_t out_sent;           /* bytes of `out` already written */
    uint64_t out_total;        /* bytes ever queued in this session */
    uint64_t out_flushed;      /* bytes ever written in this session */
    char worker_id[64];
    char reattach_token[64];
    struct evd_iii_waiter *waiters;
    struct evd_iii_binding *bindings;
    size_t nbindings;
    uint64_t bindings_version; /* bumped on every change */
    struct evd_iii_job *jobs_head, *jobs_tail;
    size_t njobs;
    int active_jobs; /* jobs being executed by handler threads */
};

/* ---- conn.c ---------------------------------------------------------------------- */
void *evd_iii_conn_main(void *arg);

/*
 * Queues `msg` (steals the reference) as one text frame on session `generation`.
 * Returns 0 and, when `offset` is given, the byte offset that has to be flushed for
 * the frame to be written; -1 with *err when that session is gone, the frame is too
 * large or the queue is full. Wakes the connection thread.
 */
int evd_iii_send(struct evd_iii *a, uint64_t generation, json_t *msg, uint64_t *offset,
                 struct evd_err *err);
/* Waits until `offset` of session `generation` is written to the socket; false when
 * the session ended or timeout_ms passed first. */
bool evd_iii_wait_flushed(struct evd_iii *a, uint64_t generation, uint64_t offset,
                          int64_t timeout_ms);
void evd_iii_wake(int fd);

/* ---- proto.c --------------------------------------------------------------------- */
/* Called on the connection thread when a session opened: announces the worker, its
 * functions and the trigger type. */
void evd_iii_on_open(struct evd_iii *a, uint64_t generation);
/* Called on the connection thread with each inbound text (or binary) message. */
void evd_iii_on_message(struct evd_iii *a, uint64_t generation, const char *text, size_t len);
/* Called on the connection thread when a session ended (under no lock). */
void evd_iii_on_close(struct evd_iii *a, uint64_t generation);
void *evd_iii_handler_main(void *arg);
void evd_iii_jobs_clear(struct evd_iii *a);

json_t *evd_iii_remote_call(void *ctx, const char *function_id, json_t *payload, int64_t timeout_ms,
                            struct evd_cancel *cancel, bool at_least_once, struct evd_err *err);
json_t *evd_iii_remote_functions(void *ctx, json_t *policy, int64_t timeout_ms,
                                 struct evd_err *err);

/*
 * The error an invocation of an eval function answers for `err`: code
 * "invocation_failed" and a message prefixed the way the eval worker's errors are
 * ("invalid request: …", "evaluation not found: …", "evaluation conflict: …",
 * "dependency error: …", "state error: …"). Returns a new reference.
 */
json_t *evd_iii_error_body(const struct evd_err *err);

/* True when `policy` ({allow[], deny[]}, borrowed) allows function_id: an allow glob
 * matches and no deny glob does (fnmatch(3), as the harness decides). */
bool evd_iii_policy_allows(const json_t *policy, const char *function_id);

/* ---- deliver.c ------------------------------------------------------------------- */
/*
 * Validates an eval::completed binding config: null or an object whose only member
 * is evaluation_id (a string or null). *evaluation_id is a malloc'd copy or NULL (no
 * filter). EVD_EINVAL with "invalid eval::completed config: …" otherwise.
 */
enum evd_code evd_iii_completed_config(const json_t *config, char **evaluation_id,
                                       struct evd_err *err);
/* The same for eval::experiment::completed: only experiment_id, and
 * "invalid eval::experiment::completed config: …". */
enum evd_code evd_iii_experiment_config(const json_t *config, char **experiment_id,
                                        struct evd_err *err);
/* Adds or replaces a binding of `trigger` (EVD_III_TRIGGER or EVD_III_TRIGGER_EXPERIMENT)
 * under mu, by the connection thread; steals filter_take (its filter, or NULL), nothing
 * else. */
enum evd_code evd_iii_binding_put(struct evd_iii *a, const char *id, const char *trigger,
                                  const char *function_id, char *filter_take,
                                  const json_t *metadata, const char *ns);
void evd_iii_binding_remove(struct evd_iii *a, const char *id);
/* Drops every binding (the session ended). Caller holds mu. */
void evd_iii_bindings_clear_locked(struct evd_iii *a);
void *evd_iii_deliver_main(void *arg);

#endif
