/*
 * The durable evaluation engine: the eval functions (start, list, status, result,
 * cancel, delete, rerun, step, sweep, wake), the worker threads that execute runs
 * claimed from the PostgreSQL job table, the lease keeper (lease renewal, cancel
 * and deadline delivery, change notifications) and the sweeper.
 *
 * Several evald processes may share one database: every decision about an
 * evaluation is taken in a transaction that holds its row lock, a run is written
 * only by the attempt that owns it, and a job is claimed with SKIP LOCKED and a
 * lease. See docs/engine.md for the protocol.
 *
 * Thread-safety: every evd_eval_* function may be called from any thread
 * (handlers, the iii adapter); they borrow pool connections. start/stop from main.
 */
#ifndef EVD_ENGINE_ENGINE_H
#define EVD_ENGINE_ENGINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

struct evd_db;
struct evd_providers;
struct evd_engine;
struct evd_cancel;

/*
 * Functions reachable outside this process (the iii engine, adapter/iii.h), as a
 * table so the engine knows nothing of the adapter. Both calls may block and are
 * made from worker threads.
 *   call       runs `function_id` with `payload` (borrowed) within timeout_ms and
 *              returns a new reference to its result, or NULL + err (EVD_ENOTFOUND
 *              when nobody serves it, EVD_ETIMEOUT, EVD_ECANCELLED when `cancel`
 *              fired, EVD_EUPSTREAM when the callee failed). `at_least_once` lets it
 *              repeat a call whose answer was lost with the connection.
 *   functions  the functions `policy` ({allow[], deny[]}, borrowed) could allow, as
 *              [{id, description, request_schema}] (new reference), or NULL + err.
 */
struct evd_engine_remote {
    json_t *(*call)(void *ctx, const char *function_id, json_t *payload, int64_t timeout_ms,
                    struct evd_cancel *cancel, bool at_least_once, struct evd_err *err);
    json_t *(*functions)(void *ctx, json_t *policy, int64_t timeout_ms, struct evd_err *err);
    void *ctx;
};

struct evd_engine_options {
    const char *conninfo;               /* for the threads' own connections */
    struct evd_db *db;                  /* pool for the function calls */
    const struct evd_providers *providers;
    long workers;                       /* worker threads (0 = serve functions only) */
    long worker_connections;            /* their database connections, shared (0 = 16) */
    long lease_ms;
    long sweep_interval_ms;
    long max_runs;
    long max_concurrency;     /* an experiment's concurrency at most */
    long max_experiment_runs; /* an experiment's runs at most */
    long max_dataset_cases;   /* inline experiment cases at most */
    /* Evaluators and agent functions served elsewhere (the iii engine); NULL = none.
     * Borrowed; must outlive evd_engine_stop. */
    const struct evd_engine_remote *remote;
};

/* Creates the engine; starts its threads when opts->workers > 0. */
struct evd_engine *evd_engine_start(const struct evd_engine_options *opts, struct evd_err *err);
/* Begins stopping: change subscriptions (SSE) and in-flight runs are told at once.
 * NULL-safe; idempotent. */
void evd_engine_signal_stop(struct evd_engine *e);
/* Stops the threads: in-flight runs are handed back (their attempt does not count).
 * NULL-safe. */
void evd_engine_stop(struct evd_engine *e);

/*
 * The model catalogue of the configured providers {models:[…]} (new reference), each entry
 * with `rate_limit`: what this process's limiter of that model shows (evd_hx_limiter_view,
 * without provider and model), or null before the first call to it (engine/providers.c).
 */
json_t *evd_engine_models(struct evd_engine *e);

/*
 * The configured providers and their limiters in this process {providers:[{name, kind,
 * host, available, rpm, tpm, model_limits, models:[limiter…]}]} (new reference; never a
 * key or a key's variable). NULL without memory.
 */
json_t *evd_engine_providers(struct evd_engine *e);

/*
 * The eval functions. `request` is borrowed; on EVD_OK *response is a new reference
 * in the contract's shape (json_null() where the contract answers null). With
 * `extras`, result/list add what the REST resources show beyond the contract.
 */
enum evd_code evd_eval_start(struct evd_engine *e, json_t *request, json_t **response,
                             struct evd_err *err);
/*
 * evd_eval_start answered later: the request is checked now (a refusal returns at once
 * and `done` is never called), then the evaluation is written in a batch with other
 * starts, and done(arg, rc, response, err) is called once, from the engine's starter
 * thread, with the outcome: on EVD_OK `response` is a new reference (done owns it), else
 * NULL and err (borrowed for the call) says why. `request` is borrowed.
 */
typedef void (*evd_eval_started_fn)(void *arg, enum evd_code rc, json_t *response,
                                    const struct evd_err *err);
enum evd_code evd_eval_start_async(struct evd_engine *e, json_t *request, evd_eval_started_fn done,
                                   void *arg, struct evd_err *err);
/* `before` is a cursor from a previous page; with `extras` the response carries
 * next_cursor when more remain (the resource route), else it is the contract's. */
enum evd_code evd_eval_list(struct evd_engine *e, json_t *request, const char *before,
                            bool extras, json_t **response, struct evd_err *err);
enum evd_code evd_eval_status(struct evd_engine *e, json_t *request, json_t **response,
                              struct evd_err *err);
enum evd_code evd_eval_result(struct evd_engine *e, json_t *request, bool extras,
                              json_t **response, struct evd_err *err);
enum evd_code evd_eval_cancel(struct evd_engine *e, json_t *request, json_t **response,
                              struct evd_err *err);
enum evd_code evd_eval_delete(struct evd_engine *e, json_t *request, json_t **response,
                              struct evd_err *err);
enum evd_code evd_eval_rerun(struct evd_engine *e, json_t *request, json_t **response,
                             struct evd_err *err);
/*
 * POST /v1/evaluations/{id}/rescore with `body` {evaluator} (borrowed; engine/rescore.c):
 * a new evaluation (source_evaluation_id = id, derivation rescore) whose runs copy the
 * terminal source's stored outputs and metrics and are scored again by `evaluator` alone,
 * no model called for the target. *response {evaluation_id, status, source_evaluation_id,
 * rescored_runs}. EVD_EINVAL names the field, EVD_ENOTFOUND, EVD_ECONFLICT while the
 * source is live; nothing is written then.
 */
enum evd_code evd_eval_rescore(struct evd_engine *e, const char *id, const json_t *body,
                               json_t **response, struct evd_err *err);
enum evd_code evd_eval_step(struct evd_engine *e, json_t *request, json_t **response,
                            struct evd_err *err);
enum evd_code evd_eval_sweep(struct evd_engine *e, json_t *request, json_t **response,
                             struct evd_err *err);
enum evd_code evd_eval_wake(struct evd_engine *e, json_t *request, json_t **response,
                            struct evd_err *err);
enum evd_code evd_eval_assert(struct evd_engine *e, const char *function_id, json_t *request,
                              json_t **response, struct evd_err *err);

/*
 * Change subscriptions for Server-Sent Events. A subscription sees a new version
 * each time its evaluation changes (in any process). evd_engine_wait blocks up to
 * timeout_ms and returns 1 when the version moved, 0 on timeout, -1 when the engine
 * is stopping.
 */
struct evd_subscription;
struct evd_subscription *evd_engine_subscribe(struct evd_engine *e, const char *evaluation_id);
/* A subscription to several ids at once (session ids, evaluation ids; at most
 * EVD_SUB_IDS_MAX, the rest are ignored): it moves when any of them changes. NULL on ENOMEM. */
#define EVD_SUB_IDS_MAX 12
struct evd_subscription *evd_engine_subscribe_many(struct evd_engine *e, const char *const *ids,
                                                   size_t n);
int evd_engine_wait(struct evd_engine *e, struct evd_subscription *s, int timeout_ms);
void evd_engine_unsubscribe(struct evd_engine *e, struct evd_subscription *s);
/* For one thread serving many subscriptions (handlers/sse.c): blocks until a
 * subscription moved or a nudge came since *gen was read (1), timeout_ms passes (0) or the
 * engine is stopping (-1); *gen then holds the current generation. evd_engine_wait with timeout 0
 * tells which subscription moved. Start with *gen = 0. */
int evd_engine_wait_any(struct evd_engine *e, uint64_t *gen, int timeout_ms);
/* Wakes every evd_engine_wait_any (a waiter's deadlines changed). */
void evd_engine_nudge(struct evd_engine *e);

#endif
