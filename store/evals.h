/*
 * All SQL of evaluations, their runs, the job table and completion events.
 * Every function takes a connection the caller owns and runs inside whatever
 * transaction the caller opened; none begins or commits on its own.
 *
 * Lock order (deadlock freedom): a transaction that changes runs first locks the
 * evaluation row (evd_store_eval_lock), then touches its runs and jobs.
 * JSON arguments are borrowed; returned json_t are new references.
 */
#ifndef EVD_STORE_EVALS_H
#define EVD_STORE_EVALS_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

/* The evaluation row. Strings are NUL-terminated copies; release with _clear. */
struct evd_store_eval {
    char id[64];
    char status[16];
    json_t *request; /* NormalizedEvalRequestV1 */
    json_t *report;  /* EvalReportV1 or NULL */
    int64_t step;
    int concurrency;
    int total_runs, terminal_runs, passed_runs, failed_runs;
    int eligible; /* -1 unknown, 0, 1 */
    char *error;
    char source_id[64]; /* "" when none */
    int64_t created_at, updated_at, completed_at; /* completed_at 0 = not yet */
    bool rescore; /* a re-score of source_id: its runs score stored outputs again */
};

void evd_store_eval_clear(struct evd_store_eval *e);

/* A new evaluation: its id, normalized request, concurrency, planned runs (an array of
 * EvalRunReportV1 objects with execution_position, pair_position, ...) and the evaluation
 * it reruns (NULL: none). Borrowed. */
struct evd_store_new_eval {
    const char *id;
    const json_t *request;
    int concurrency;
    const json_t *runs;
    const char *source_id;
};
struct evd_store_claims;
/*
 * Inserts n evaluations and their planned runs, enqueues the runs that may start and
 * notifies EVD_CHANNEL_EVENTS (and EVD_CHANNEL_JOBS, with `owner` after the count when
 * not NULL), then, with `claims` (NULL: none), claims up to claims->n jobs for `owner`;
 * one statement (evald_create_many, migrations/0016), which autocommits outside a
 * transaction: all of it is written, or nothing. enqueued[i] (may be NULL): the jobs
 * enqueued for item i. EVD_ECONFLICT when an id exists.
 */
enum evd_code evd_store_evals_create(PGconn *c, const struct evd_store_new_eval *items, size_t n,
                                     int64_t now, const char *owner, int *enqueued,
                                     struct evd_store_claims *claims, struct evd_err *err);
/* One evaluation, as evd_store_evals_create with no claims; *enqueued may be NULL. */
enum evd_code evd_store_eval_insert(PGconn *c, const char *id, const json_t *request,
                                    int concurrency, const json_t *runs, const char *source_id,
                                    int64_t now, const char *owner, int *enqueued,
                                    struct evd_err *err);

/* Reads the evaluation row; with `lock`, SELECT … FOR UPDATE. EVD_ENOTFOUND when unknown. */
enum evd_code evd_store_eval_get(PGconn *c, const char *id, bool lock,
                                 struct evd_store_eval *out, struct evd_err *err);

/* What the step machine needs of an evaluation, without decoding its request. */
struct evd_store_eval_state {
    char status[16];
    int concurrency;
};
/* With `lock`, SELECT … FOR UPDATE. EVD_ENOTFOUND when unknown. */
enum evd_code evd_store_eval_state(PGconn *c, const char *id, bool lock,
                                   struct evd_store_eval_state *out, struct evd_err *err);

/*
 * The runs in plan order as EvalRunReportV1 objects (new reference). With `extras`,
 * each also carries `attempt` and, when recorded, `generations` and `function_calls`
 * from its transcript (the resource representation; not the function mirror's).
 */
json_t *evd_store_runs(PGconn *c, const char *id, bool extras, struct evd_err *err);
/* Sets `trace_id` on each run of `runs` (borrowed array of run objects with run_id and
 * attempt) to its latest attempt's trace id under owner_id (common/trace.h), null for a run
 * that never started. NULL-safe. */
void evd_store_runs_trace_ids(json_t *runs, const char *owner_id);

/* Run bookkeeping. */
struct evd_store_run_state {
    char status[16];
    int attempt;
    int64_t started_at;
};
enum evd_code evd_store_run_state(PGconn *c, const char *id, int position,
                                  struct evd_store_run_state *out, struct evd_err *err);
/* Marks a run running for attempt `attempt` from `now`, the evaluation running (and
 * updated), and notifies EVD_CHANNEL_EVENTS; one statement. */
enum evd_code evd_store_run_start(PGconn *c, const char *id, int position, int attempt,
                                  int64_t now, struct evd_err *err);
/*
 * Writes a finished run (`run` is the EvalRunReportV1 to store, `transcript` may be
 * NULL) only if the run is still running with `attempt`; when it does, also deletes the
 * run's job, advances the evaluation's step and run counters, sets updated_at = now,
 * notifies EVD_CHANNEL_EVENTS and schedules the runs that may start now (see
 * evd_store_schedule), all in one statement (evald_finish_runs, migrations/0019: the
 * writer's, for a batch of one). Locks the
 * evaluation's row. *result: EVD_RUN_NOT_WRITTEN, EVD_RUN_ALL_TERMINAL (written, and no
 * run is open: the evaluation is ready to be finalized) or the number of jobs enqueued.
 * *job_left: the run's job when its row was locked by someone else for the moment and
 * so stayed behind (still leased to this process), else 0: the caller deletes it.
 */
#define EVD_RUN_NOT_WRITTEN (-2)
#define EVD_RUN_ALL_TERMINAL (-1)
enum evd_code evd_store_run_finish(PGconn *c, const char *id, int position, int attempt,
                                   const json_t *run, const json_t *transcript, int64_t now,
                                   int *result, int64_t *job_left,
                                   struct evd_err *err);
/*
 * Runs started ahead (migrations/0027): what the worker of a batch asks for beside its
 * writes. An item with an evaluation id asks for up to n runs of it that follow position
 * `after` (an evaluation with concurrency 1 only, and only an unbroken sequence); `need`
 * asks for a job as the batch's claims do when it gets no run ahead.
 */
struct evd_store_ahead_item {
    const char *evaluation_id; /* NULL: no run ahead */
    int after;
    int n;
    bool need;
};
struct evd_store_ahead_run {
    size_t item; /* 0-based */
    int64_t job_id;
    int position;
    int job_attempts;
    int attempt;
};
struct evd_store_ahead {
    const struct evd_store_ahead_item *items;
    size_t nitems;
    struct evd_store_ahead_run *out; /* room for `cap`; `got` filled, in order */
    size_t cap, got;
    long taken; /* enqueued jobs the runs ahead took over (not to announce) */
    int64_t sent; /* evd_mono_ms() when the statement was sent: their leases count from it */
};
/*
 * The writer's batch, one statement (evald_finish_runs_ahead): finishes several runs
 * (evald_finish_runs: `array` is the JSON text of an array of objects with
 * evald_finish_run's parameters by name; results[i] and job_left[i], n of each, are what
 * it answered for element i; every job enqueued is announced, with `owner` after the
 * count), then starts each item's runs ahead, then claims a job (claims->out, in the
 * items' order; claims->n at least the items that may need one; NULL: none) for each item
 * that needs one and got no run ahead (migrations/0015 and 0027).
 */
enum evd_code evd_store_runs_finish_ahead(PGconn *c, const char *array, int64_t now,
                                          const char *owner, size_t n, int *results,
                                          int64_t *job_left, struct evd_store_claims *claims,
                                          struct evd_store_ahead *ahead, struct evd_err *err);
/* The object for evd_store_runs_finish_ahead of one finished run, as JSON text. */
char *evd_store_finish_record(const char *id, int position, int attempt, const json_t *run,
                              const json_t *transcript);
/*
 * The step machine's scheduling rule, for an evaluation whose row lock the caller holds:
 * pairs run in plan order, at most `concurrency` unfinished pairs are open at once, inside
 * a pair the second run starts only after the first is terminal. Enqueues a job for each
 * run that may start and has none, and notifies EVD_CHANNEL_JOBS with their number.
 * *result: the number
 * enqueued, or EVD_RUN_ALL_TERMINAL when no run is open. One statement.
 */
enum evd_code evd_store_schedule(PGconn *c, const char *id, int concurrency,
                                 int *result, struct evd_err *err);
/*
 * Keeps the metrics snapshot of a running run (progress, SessionMetricsResponseV1 with
 * complete:false) if it is still running with `attempt`, and notifies the change under the
 * run's session id (comparison streams watch it; the evaluation's own stream, which has
 * nothing new to show, is not woken). Autocommits when no transaction is open.
 */
enum evd_code evd_store_run_progress(PGconn *c, const char *id, int position, int attempt,
                                     const json_t *metrics, struct evd_err *err);
/* Cancels every open run (pending or running) with a cancel failure. */
enum evd_code evd_store_runs_cancel_open(PGconn *c, const char *id, const json_t *failure,
                                         int64_t now, struct evd_err *err);
/* Recomputes the run counters, bumps step when `advance_step`, and sets updated_at. */
enum evd_code evd_store_eval_touch(PGconn *c, const char *id, bool advance_step, int64_t now,
                                   struct evd_err *err);
/* A terminal transition for evd_store_evals_finish (borrowed): the evaluation's status,
 * its report, its eligibility (-1 = null) and the completion event's (-1: the event says
 * none). */
struct evd_store_final {
    const char *id;
    const char *status;
    const json_t *report;
    int eligible;
    int eligible_event;
};
/* Terminal transitions in one statement (evald_finish_evals, migrations/0017): for each,
 * the status, report, eligible, completed_at, the run counters recounted, the completion
 * event {evaluation_id, status, timestamp, eligible?} in the outbox, and EVD_CHANNEL_EVENTS
 * and EVD_CHANNEL_COMPLETED notified. */
enum evd_code evd_store_evals_finish(PGconn *c, const struct evd_store_final *items, size_t n,
                                     int64_t now, struct evd_err *err);
/*
 * Creates evaluation `id`, the re-score of the terminal evaluation `source`, with the
 * normalized `request` and its planned `runs` (as evd_store_eval_insert takes them), and
 * schedules the runs to score again; one statement (evald_evaluation_rescore,
 * migrations/0013). Each run copies the source run's output, metrics, benchmark and
 * transcript; the ones that reached an evaluator are pending again (*rescored counts
 * them), the others keep their result. *enqueued: the jobs enqueued, or
 * EVD_RUN_ALL_TERMINAL when no run is to be scored again (the caller finalizes).
 * EVD_ENOTFOUND when `source` is unknown, EVD_ECONFLICT while it is live; nothing is
 * written then.
 */
enum evd_code evd_store_eval_rescore(PGconn *c, const char *source, const char *id,
                                     const json_t *request, const json_t *runs, int64_t now,
                                     const char *owner, int *rescored, int *enqueued,
                                     struct evd_err *err);
/* The stored agent turn of run `position` of evaluation `id`: {output, metrics, benchmark,
 * transcript} (new reference; a null column is an absent member), or NULL + err. */
json_t *evd_store_run_stored(PGconn *c, const char *id, int position, struct evd_err *err);

/* Deletes a terminal evaluation (runs cascade). *deleted false when unknown. */
enum evd_code evd_store_eval_delete(PGconn *c, const char *id, bool *deleted,
                                    struct evd_err *err);

/* eval::status projection (EvalStatusResponseV1, new reference) or NULL when unknown. */
json_t *evd_store_eval_status(PGconn *c, const char *id, struct evd_err *err);
/* eval::list summaries, newest first; `before` is a cursor from a previous page
 * ("<created_at>_<id>") or NULL. *next_cursor (malloc'd or NULL) when more remain. */
json_t *evd_store_eval_list(PGconn *c, unsigned limit, const char *before, char **next_cursor,
                            struct evd_err *err);

/*
 * The finalizer's batch (evald_finalize_take, migrations/0017), in the caller's
 * transaction: locks evaluations ids[0..n) in id order, schedules the runs that may start
 * of those with runs still open, and fills out[0..*taken) with the id, created_at, error,
 * request and total_runs of each one whose runs are all terminal (status "running";
 * evd_store_eval_clear each). Terminal and unknown ones are passed over.
 */
enum evd_code evd_store_finals_take(PGconn *c, const char *const *ids, size_t n,
                                    struct evd_store_eval *out, size_t *taken,
                                    struct evd_err *err);
/* The runs of evaluations ids[0..n) as evd_store_runs reads them without extras, in one
 * query: runs[i] a new array for ids[i] (all NULL on failure). */
enum evd_code evd_store_runs_many(PGconn *c, const char *const *ids, size_t n, json_t **runs,
                                  struct evd_err *err);

/* The evaluation id of the run whose harness session is `session_id` into id (size n);
 * "" when no run has it. */
enum evd_code evd_store_run_eval_of_session(PGconn *c, const char *session_id, char *id,
                                            size_t n, struct evd_err *err);

/* Jobs. */
struct evd_store_job {
    int64_t id;
    char kind[16];
    char evaluation_id[64];
    int run_position;
    int attempts;
    char ref[64]; /* kind 'session': the session id ("" otherwise) */
    int64_t claimed_mono; /* evd_mono_ms() when the claim was sent: the lease runs from
                             no earlier than this */
    bool more;            /* another job was due beside this one (migrations/0014) */
    /* A claimed run's evaluation: its stored request as JSON text (malloc'd, the job's:
     * evd_store_job_clear frees it; NULL for other kinds) and whether it is a re-score
     * (migrations/0019). */
    char *request;
    bool rescore;
};
/* Frees what a job owns (its request); NULL-safe, and safe twice. */
void evd_store_job_clear(struct evd_store_job *job);
/* What evd_store_job_claim_start did (migrations/0006, 0009 and 0014: evald_claim). */
enum evd_claim_outcome {
    EVD_CLAIM_NONE,     /* no job is due */
    EVD_CLAIM_RUN,      /* a run job was claimed and its next attempt started */
    EVD_CLAIM_OBSOLETE, /* the run's evaluation is gone or terminal: job deleted */
    EVD_CLAIM_CLAIMED,  /* a job was claimed, nothing more: a session turn, or a run
                           that is unusual or whose evaluation someone else holds */
};
/*
 * Claims a due job with a lease (an expired lease, a session turn, a run whose
 * evaluation nobody holds, any run: each the oldest) and, for a run job in the ordinary
 * case, starts its next attempt in the same statement (run running with *attempt,
 * evaluation running, EVD_CHANNEL_EVENTS notified). Autocommits, durably (a claim lost
 * in a crash of PostgreSQL would let a second worker start a run the first still
 * executes). On
 * EVD_CLAIM_CLAIMED the caller starts a run in a transaction of its own.
 */
enum evd_code evd_store_job_claim_start(PGconn *c, const char *owner, long lease_ms,
                                        int64_t now, int max_attempts,
                                        struct evd_store_job *out,
                                        enum evd_claim_outcome *outcome, int *attempt,
                                        struct evd_err *err);
/* A job claimed by a batch for a worker of this process: EVD_CLAIM_RUN (its attempt
 * `attempt` started) or EVD_CLAIM_CLAIMED, as evd_store_job_claim_start answers. */
struct evd_store_claimed {
    struct evd_store_job job;
    enum evd_claim_outcome outcome;
    int attempt;
};
/*
 * The claims a batch makes after its own work, in its transaction (evald_claim_many,
 * migrations/0015): the same claim as evd_store_job_claim_start, up to `n` times, for
 * workers of this process that wait for a job. `out` has room for n; `got` says how many
 * were claimed (fewer than n: nothing else was due). A batch that fails claims nothing.
 */
struct evd_store_claims {
    int n;
    long lease_ms;
    int max_attempts;
    struct evd_store_claimed *out;
    size_t got;
};
enum evd_code evd_store_job_delete(PGconn *c, int64_t job_id, struct evd_err *err);
/* Deletes every job of an evaluation. */
enum evd_code evd_store_jobs_delete_eval(PGconn *c, const char *id, struct evd_err *err);
/* What a renewal found for one lease. */
enum evd_lease_state {
    EVD_LEASE_GONE = -1, /* no longer this owner's: finished, cancelled or taken over */
    EVD_LEASE_HELD = 0,  /* another transaction held the job's row: not renewed this time */
    EVD_LEASE_RENEWED = 1,
};
/*
 * Extends the leases of `ids` held by `owner` (evald_renew, migrations/0009: it waits for
 * no lock); state[i] tells what became of ids[i].
 */
enum evd_code evd_store_jobs_renew(PGconn *c, const char *owner, const int64_t *ids, size_t n,
                                   long lease_ms, enum evd_lease_state *state,
                                   struct evd_err *err);

/* Sweeper queries: ids of live evaluations with no job (new reference, array of
 * strings), and runs past their scenario timeout ([{evaluation_id, position,
 * timeout_s}]). */
json_t *evd_store_stalled_evals(PGconn *c, struct evd_err *err);
json_t *evd_store_timed_out_runs(PGconn *c, int64_t now, struct evd_err *err);

/* Notifications: evaluation changed (SSE) and evaluation cancelled (in-flight runs). */
#define EVD_CHANNEL_EVENTS "evald_events"
#define EVD_CHANNEL_CANCEL "evald_cancel"
#define EVD_CHANNEL_JOBS "evald_jobs"
#define EVD_CHANNEL_COMPLETED "evald_completed" /* a completion event was recorded */
enum evd_code evd_store_notify(PGconn *c, const char *channel, const char *payload,
                               struct evd_err *err);

#endif
