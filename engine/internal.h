/*
 * Engine internals shared by its files. Lock order: inflight_mu, hub_mu, finals_mu,
 * starts_mu and work_mu are leaf locks, never held across a query, a provider call or each
 * other.
 */
#ifndef EVD_ENGINE_INTERNAL_H
#define EVD_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "common/queue.h"
#include "engine/engine.h"
#include "domain/limits.h"
#include "harness/harness.h"
#include "store/evals.h"

/* Attempts a run (or session turn) may lose to interruptions — a crash or kill of its
 * process, a process stopped or cut off from the database past its lease — before it
 * fails with phase setup. A failed provider call or evaluator is no attempt to repeat: it
 * fails the run at once. An attempt given back (a stop, or a worker that could not renew
 * its lease in time) does not count. The bound only ends a crash loop (a run whose every
 * attempt kills its process), so it is well above what kills alone reach. */
#define EVD_MAX_ATTEMPTS 8
/* A worker stops calling out for a run once its last renewed lease is this close to
 * running out (by its own clock, which starts before the database's): renewals come every
 * third of the lease, so one may be missed, and an aborted call has ended at the
 * provider before a second process can claim the run. */
#define EVD_LEASE_MARGIN_MS(lease_ms) ((lease_ms) / 4)
/* In-flight slots: a worker holds one for its run, and one more while the writer has its
 * previous outcome: 2 per worker, and the runs started ahead (from their batch until they
 * are written or end) up to e->ahead_cap in all (e->ninflight). */
/* Starter threads (engine/starter.c): two, so that a burst of starts keeps both cores
 * busy; each writes its batches on a connection it borrows from the handlers' pool. */
#define EVD_STARTERS 2

enum inflight_reason {
    REASON_NONE = 0,
    REASON_CANCELLED, /* the evaluation was cancelled or the job taken away */
    REASON_DEADLINE,  /* scenario_timeout_seconds passed */
    REASON_SHUTDOWN,  /* this process is stopping: hand the run back */
    REASON_LEASE,     /* the lease was not renewed in time: calls stopped, hand it back */
};

struct inflight {
    bool used;
    int64_t job_id;
    char evaluation_id[64];
    int position;
    int attempt;
    struct evd_cancel *cancel;
    int64_t deadline_mono; /* evd_mono_ms() at which the run times out */
    enum inflight_reason reason;
    bool writing; /* finished, its outcome with the writer: the lease is still renewed */
    bool ahead;   /* a run started ahead (counted in inflight_ahead until it ends) */
    bool lost;    /* a renewal found the lease gone: there is nothing left to write */
};

/* A change subscription: sees a new version when any of its ids (evaluation or session
 * ids) changes. */
struct evd_subscription {
    char ids[EVD_SUB_IDS_MAX][64];
    size_t nids;
    uint64_t version;
    uint64_t seen;
    struct evd_subscription *next;
};

struct evd_engine {
    struct evd_engine_options opts;
    char owner[128]; /* lease owner: host:pid:random */
    atomic_bool stopping;
    int wake_pipe[2]; /* written once at stop; wakes every poll */

    /* The kinds of job its workers run (engine/jobs.c): the core calls a kind only through
     * this table. */
    const struct evd_job_kind *kinds;
    size_t nkinds;

    pthread_t *workers;
    struct worker_arg *worker_args;
    size_t nworkers;
    pthread_t keeper, sweeper, analyst;
    bool threads_started;

    pthread_mutex_t inflight_mu;
    struct inflight *inflight; /* ninflight slots */
    int ninflight;
    int inflight_ahead; /* slots of runs started ahead, at most ahead_cap (inflight_mu) */
    int64_t *renew_ids;                 /* the keeper's scratch, ninflight each */
    enum evd_lease_state *renew_state;

    /* The workers' connections: a worker holds one only while it talks to the database,
     * never during a provider call (struct evd_wconn). */
    struct evd_db *wdb;

    pthread_mutex_t hub_mu;
    pthread_cond_t hub_cv;
    struct evd_subscription *subs;
    uint64_t hub_gen; /* moves when a publish moves a subscription, and on every nudge
                        (evd_engine_wait_any) */

    /* Finished runs waiting for the writer thread (engine/writer.c), oldest first. */
    pthread_mutex_t writes_mu; /* leaf lock */
    pthread_cond_t writes_cv;  /* the writer waits here for work */
    pthread_cond_t written_cv; /* workers wait here for their write */
    struct evd_queue writes; /* struct pending_write *, under writes_mu; closed when the
                                engine stops and the last worker is gone */
    long writers_clients;    /* workers still running */
    int ahead_cap; /* in-flight slots of runs started ahead at most (internal.h) */
    pthread_t writer;

    /* Finalizations waiting for the finalizer thread (engine/steps.c), oldest first. */
    pthread_mutex_t finals_mu; /* leaf lock */
    pthread_cond_t finals_cv;
    struct evd_queue finals; /* evaluation ids (char *) for the finalizer, under finals_mu */
    pthread_t finalizer;
    /* A second finalizer that helps while a backlog waits (engine/steps.c). */
    pthread_cond_t finals_help_cv; /* under finals_mu; broadcast at the stop */
    bool finals_help;              /* under finals_mu: the finalizer asked for help */
    pthread_t finalizer_helper;

    pthread_mutex_t work_mu; /* leaf lock */
    pthread_cond_t work_cv;  /* idle workers wait here for announced jobs */
    long work_tokens;        /* announced jobs not yet taken by a waking worker */
    long woken_claiming;     /* workers that took a token and have yet to finish its claim */
    long idle;               /* workers waiting for work (wait_for_work) */
    long reserved;           /* idle workers a batch of starts is claiming for */
    /* Jobs a batch of starts claimed, waiting for the idle workers it reserved: a ring of
     * ready_cap (the workers' number), under work_mu. */
    struct evd_store_claimed *ready;
    size_t ready_cap, ready_head, ready_len;

    /* Starts waiting for the starter thread (engine/starter.c), oldest first. */
    pthread_mutex_t starts_mu; /* leaf lock */
    pthread_cond_t starts_cv;  /* the starter waits here for starts */
    struct evd_queue starts;   /* struct pending_start *, under starts_mu; closed at the stop */
    pthread_t starters[EVD_STARTERS];

    /* Case jobs' steps waiting to be written together (engine/cell_batch.c). */
    pthread_mutex_t cells_mu; /* leaf lock */
    pthread_cond_t cells_cv;  /* waiting steps wait here for their answer or their turn */
    struct cell_step *cells_head, **cells_tail; /* under cells_mu, oldest first */
    bool cells_busy; /* a leader is writing a batch (cells_mu) */
};

/*
 * A worker's database connection (engine/conns.c): taken from the workers' pool
 * (e->wdb) when the worker needs one and given back around provider calls, so that a
 * call in flight holds no connection. evd_wconn_get returns the held one or takes one
 * (waiting up to 5 s; NULL + err when none came), evd_wconn_put gives it back (NULL-safe
 * when none is held; an open transaction is rolled back). A progress callback that finds
 * none held takes one for its statement and gives it back (evd_wconn_borrow/_return).
 */
struct evd_wconn {
    struct evd_engine *e;
    PGconn *c;
};
PGconn *evd_wconn_get(struct evd_wconn *w, struct evd_err *err);
void evd_wconn_put(struct evd_wconn *w);
/* For a statement of a callback: *had says whether the worker held one already. */
PGconn *evd_wconn_borrow(struct evd_wconn *w, bool *had, struct evd_err *err);
void evd_wconn_return(struct evd_wconn *w, bool had);

/* step machine (engine/steps.c); every function expects an open transaction that
 * holds the evaluation's row lock. */
enum evd_code evd_engine_advance(PGconn *c, const char *evaluation_id, int64_t now,
                                 struct evd_err *err);
enum evd_code evd_engine_finalize(PGconn *c, const struct evd_store_eval *ev, json_t *runs,
                                  const char *status, int64_t now, struct evd_err *err);
/* The same for an evaluation whose state the caller has just read under its lock. */
enum evd_code evd_engine_advance_state(PGconn *c, const char *evaluation_id,
                                       const struct evd_store_eval_state *st, int64_t now,
                                       struct evd_err *err);
/*
 * Writes a finished run (if still owned by `attempt`), deletes its job, advances the
 * step counter and schedules what may run next (evd_store_run_finish).
 * *written reports whether the write happened, *finalize whether every run is now
 * terminal: the caller then finalizes with evd_engine_advance in the transaction it holds
 * (finished runs otherwise go through the writer thread). (These writes, of a run that
 * timed out or used up its attempts, are rare: a job whose row someone held at the moment
 * stays behind, leased, until its lease runs out and a claim finds its run terminal.)
 */
enum evd_code evd_engine_write_run(PGconn *c, const char *evaluation_id, int position,
                                   int attempt, json_t *run, json_t *transcript, bool *written,
                                   bool *finalize, int64_t now, struct evd_err *err);
/*
 * What a worker shares with the writer (engine/writer.c): how many of its finished runs
 * wait to be written, what the writer's batch claimed for the worker when it wrote them
 * (migrations/0015: the batch claims, after its writes, a job for a worker that has
 * nothing else to do, who would otherwise claim one in a transaction of its own), and the
 * runs the batch started ahead for it (migrations/0027). The writer sets them under
 * writes_mu; the worker reads them through evd_engine_wait_written and
 * evd_engine_next_ahead.
 *
 * Runs ahead: a worker that executes the runs of an evaluation with concurrency 1 (its
 * chain) and whose runs are quick (under EVD_AHEAD_QUICK_MS) asks each batch that writes
 * one of them to start the runs that follow, up to EVD_AHEAD_MAX held at once. It calls
 * them one after another while the writer writes the earlier ones, so that a run no
 * longer waits for the commit of the one before; each was started (running, attempt + 1,
 * its job leased) by a committed batch before its call, and is registered in flight
 * (lease renewed, cancels delivered) from then on.
 */
enum evd_handover_next {
    EVD_NEXT_UNKNOWN = 0, /* nothing was claimed for it: it claims on its own */
    EVD_NEXT_JOB,         /* `job` was claimed for it */
    EVD_NEXT_NOTHING,     /* its batch found nothing due: it waits until work is announced */
};
#define EVD_AHEAD_MAX 16
#define EVD_AHEAD_QUICK_MS 20
#define EVD_AHEAD_WORKERS 64
/* A run a batch started ahead for a worker: its job (no request: the chain's is used),
 * attempt, in-flight slot and cancel token. */
struct evd_ahead_run {
    struct evd_store_job job;
    int attempt;
    int slot;
    struct evd_cancel *cancel;
};
struct evd_handover {
    int outstanding; /* finished runs with the writer */
    enum evd_handover_next next;
    struct evd_store_claimed job;
    char chain[64]; /* the evaluation whose runs it executes now ("": none) */
    bool quick;     /* its last run took less than EVD_AHEAD_QUICK_MS */
    int tail;       /* the chain's last position it holds (run, written or ahead) */
    struct evd_ahead_run ahead[EVD_AHEAD_MAX]; /* in plan order, ahead[0] next */
    int nahead;
};
/* A finished run for the writer thread: its evald_finish_runs element and the handover
 * of the worker that ran it, whose count is lowered once the batch holding it is written
 * (or failed). */
struct pending_write {
    char *text;
    int slot; /* its in-flight slot, kept (and its lease renewed) until written; -1: none */
    char evaluation_id[64];
    char status[16];
    struct evd_handover *h;
};
/* Queues a finished run for the writer (which frees `text`); a worker has at most
 * EVD_AHEAD_MAX + 1 writes outstanding (it waits for room). `quick`: the run took less
 * than EVD_AHEAD_QUICK_MS. */
void evd_engine_write_later(struct evd_engine *e, char *text, const char *evaluation_id,
                            const char *status, int slot, bool quick, struct evd_handover *h);
/* Waits until none of the worker's writes is outstanding; true when there was one. */
bool evd_engine_wait_written(struct evd_engine *e, struct evd_handover *h);
/* The worker begins (position > 0) or ends (0) a chain of runs of evaluation `id`. */
void evd_engine_chain(struct evd_engine *e, struct evd_handover *h, const char *id, int position);
/* The next run started ahead for the worker, waiting while its writes may still bring
 * one; false when none is held and none can come. */
bool evd_engine_next_ahead(struct evd_engine *e, struct evd_handover *h,
                           struct evd_ahead_run *out);
/* Wakes up to n idle workers of this process for jobs it has just enqueued (the keeper
 * passes over the notifications that carry this process's owner). */
void evd_engine_wake(struct evd_engine *e, long n);
/* Reserves up to `want` idle workers for the jobs a batch is about to claim (none once
 * the engine stops); returns how many. evd_engine_hand_ready ends the reservation and
 * hands them the `n` jobs claimed (n <= reserved), each to one of them. */
int evd_engine_reserve_idle(struct evd_engine *e, int want);
void evd_engine_hand_ready(struct evd_engine *e, int reserved, const struct evd_store_claimed *jobs,
                           size_t n);
/* Announces `n` new jobs (at least one) to the idle workers: the keeper's notifications. */
void evd_engine_announce(struct evd_engine *e, long n);
/* An idle worker's wait (engine/wake.c): until a wake-up is announced, a batch of starts
 * hands over a job it claimed, timeout_ms pass or the engine stops. True when it took a
 * wake-up: it then owes evd_engine_claim_done its claim's end. */
bool evd_engine_wait_for_work(struct evd_engine *e, int timeout_ms);
/* The oldest job a batch of starts handed over, into *out; false when none. */
bool evd_engine_take_ready(struct evd_engine *e, struct evd_store_claimed *out);
/* The end of a claim of a worker that was idle (woken) or found work (more: another job
 * was due): wakes one more worker for a backlog, unless a wake-up is on its way. */
void evd_engine_claim_done(struct evd_engine *e, bool woken, bool more);

/* The threads' bodies, started by evd_engine_start (engine/engine.c). */
struct worker_arg {
    struct evd_engine *e;
    long index;
};
void *evd_engine_worker_main(void *arg);  /* engine/workers.c; arg: struct worker_arg */
void *evd_engine_keeper_main(void *arg);  /* engine/keeper.c */
void *evd_engine_sweeper_main(void *arg); /* engine/keeper.c */
/* The starter thread's body (engine/starter.c), started with the workers. */
void *evd_engine_starter_main(void *arg);
/* What a start hands to the starter gets back: rc, the jobs it enqueued, and err when
 * rc is not EVD_OK (borrowed for the call). */
typedef void (*evd_engine_created_fn)(void *arg, enum evd_code rc, int enqueued,
                                      const struct evd_err *err);
/* Creates an evaluation through the starter, which writes it in a batch and calls
 * done(arg, ...) once, from its thread, when the batch is committed (or on the caller's
 * thread, on a pool connection, when the engine has no threads); the starter wakes
 * workers for the jobs nobody claimed. Steals item->request and item->runs (the caller
 * must not touch them again: a json_t is never seen by two threads); the strings are
 * copied. */
void evd_engine_create_later(struct evd_engine *e, const struct evd_store_new_eval *item,
                             evd_engine_created_fn done, void *arg);
/* A worker's last act: waits for its write, then lets the writer stop when all are done. */
void evd_engine_worker_done(struct evd_engine *e, struct evd_handover *h);
/* Frees a queued write (what the queue holds at destroy; none is left after the writer). */
void evd_engine_pending_write_free(void *item);
/* The writer thread's body (engine/writer.c), started with the workers. */
void *evd_engine_writer_main(void *arg);

/* Hands an evaluation whose runs may all be terminal to the finalizer thread, which, in
 * a transaction of its own, locks it and, unless it is terminal already, schedules its
 * runs or (every run terminal) builds its report and completes it. */
void evd_engine_finalize_later(struct evd_engine *e, const char *evaluation_id);
/* The finalizer thread's body (engine/steps.c), started with the workers, and its
 * helper's. */
void *evd_engine_finalizer_main(void *arg);
void *evd_engine_finalizer_helper_main(void *arg);
/* One sweep: time out overdue runs, re-advance evaluations without a job. Returns the
 * number of evaluations acted on. */
long evd_engine_sweep_once(struct evd_engine *e, PGconn *c);

/* run execution (engine/runner.c): a claimed job of kind 'run' whose attempt is still to
 * be started; _started: one whose attempt `attempt` a claim started. The outcome goes to
 * the writer thread; `h` is the worker's handover for it. */
struct evd_wconn;
void evd_engine_process_job(struct evd_engine *e, struct evd_wconn *w,
                            const struct evd_store_job *job, struct evd_handover *h);
void evd_engine_process_started(struct evd_engine *e, struct evd_wconn *w,
                                const struct evd_store_job *job, int attempt,
                                struct evd_handover *h);

/* session turn execution (engine/session_runner.c): a claimed job of kind 'session' */
void evd_engine_process_session(struct evd_engine *e, struct evd_wconn *w,
                                const struct evd_store_job *job);

/* experiment case execution (engine/cells.c): a claimed job of kind 'cell', whose cells
 * run one after another until the case is done, the lease is lost or the engine stops */
void evd_engine_process_cell(struct evd_engine *e, struct evd_wconn *w,
                             const struct evd_store_job *job);
/* A case job's step (evd_store_cell_step's), written with the steps other workers take at
 * the same moment (engine/cell_batch.c; only for experiments evd_store_cell_steps takes).
 * Gives back the worker's connection first. */
struct evd_store_cell_done;
struct evd_store_cell_next;
enum evd_code evd_engine_cell_step(struct evd_engine *e, struct evd_wconn *w, int64_t job_id,
                                   const struct evd_store_cell_done *done,
                                   struct evd_store_cell_next *next, struct evd_err *err);

/*
 * The kinds of job (engine/jobs.c): a worker hands every claimed job to the entry of its
 * kind. `attempt` is the attempt the claim started (kind 'run' in the ordinary case: the
 * claim and the start are one statement), 0 when the kind starts its own work; the
 * outcome of a run goes to the writer thread with `h` as the worker's handover. A new
 * kind is one entry and its function; docs/engine.md says where it goes.
 */
struct evd_job_kind {
    const char *name; /* jobs.kind */
    void (*process)(struct evd_engine *e, struct evd_wconn *w, const struct evd_store_job *job,
                    int attempt, struct evd_handover *h);
};
extern const struct evd_job_kind evd_engine_kinds[];
extern const size_t evd_engine_nkinds;

/* What a start checks beyond the request's shape (engine/eval_functions.c): the model
 * resolves to a provider, the output schema compiles, and something can run the evaluator
 * ({function_id, arguments}, or NULL for none): a built-in, the agent review with valid
 * arguments, a registered tool (read on c), or with the iii adapter any function. */
/*
 * engine/datasets.c, for an experiment start's inline cases (engine/experiment_start.c):
 * an upload of format EVD_DATASET_CASES takes the cases one at a time (as
 * evd_dataset_reader_case); seal ends it (at least one case) and rewinds its spool; next
 * reads the normalized cases back in order (a new reference; NULL at the end, or on a
 * failure with err->code set); store writes the dataset from the first case on c.
 */
struct evd_dataset_upload;
enum evd_code evd_dataset_upload_case(struct evd_dataset_upload *u, const json_t *raw,
                                      size_t index, struct evd_err *err);
enum evd_code evd_dataset_upload_seal(struct evd_dataset_upload *u, struct evd_err *err);
json_t *evd_dataset_upload_next(struct evd_dataset_upload *u, struct evd_err *err);
size_t evd_dataset_upload_count(const struct evd_dataset_upload *u);
enum evd_code evd_dataset_upload_store(struct evd_dataset_upload *u, PGconn *c, const char *name,
                                       json_t **dataset, bool *created, struct evd_err *err);

enum evd_code evd_engine_check_start(struct evd_engine *e, PGconn *c, const json_t *model,
                                     const json_t *output, const json_t *evaluator,
                                     struct evd_err *err);

/* The evaluator part of that check (an evaluator object, or NULL for none): its messages
 * are a start's ("evaluator.function_id x is neither a built-in evaluator ... nor a
 * registered tool", evaluator.arguments.<field> for the agent review). With c NULL, a
 * pool connection is taken only if the registered tools must be read. */
enum evd_code evd_engine_check_evaluator(struct evd_engine *e, PGconn *c, const json_t *evaluator,
                                         struct evd_err *err);

/* experiment plans and budgets (engine/experiment_plan.c) */
/* The budget a start stores: the request's caps with the reservation of a run before any
 * finished ({calls: 1, tokens: max_output_tokens_per_call, cost_usd: those tokens at the
 * output price}), or NULL without caps. "budget.max_cost_usd needs a price for model <id>"
 * when the model has no price. */
enum evd_code evd_engine_experiment_budget(struct evd_engine *e, const json_t *normalized,
                                           json_t **out, struct evd_err *err);
/* The answer of POST /v1/experiments/plan for a valid request over ncases cases whose
 * rendered prompts and system prompts (every arm) add up to prompt_bytes. */
enum evd_code evd_engine_experiment_plan(struct evd_engine *e, PGconn *c,
                                         const json_t *normalized, size_t ncases,
                                         uint64_t prompt_bytes, json_t **out,
                                         struct evd_err *err);

/* the sequence of an experiment and its stop (engine/experiment_sequence.c) */
struct evd_analysis_cell;
enum evd_stop_pass {
    EVD_STOP_PASS_RUNNING, /* an analysis pass of a running experiment: may decide */
    EVD_STOP_PASS_FINISH,  /* its final pass: stopped = decided, budget or exhausted */
    EVD_STOP_PASS_CANCEL,  /* the final pass of a cancel: no stop */
};
/* In the caller's transaction: locks the experiment's row, gives the cases that completed
 * (their runs all terminal, per `cells`, cases × arms) their place in the sequence
 * (`sequenced`, one byte a case or NULL, remembers the cases already in it from one pass to
 * the next, so that a pass names only the cases it has not seen placed), adds
 * each comparison's `sequential` to `analysis` ({arms, comparisons, analysis}; with the
 * anytime rule the verdict becomes the sequential one), and stops the dispatch as `pass`
 * says (evd_store_experiment_stop). */
struct evd_pref_tally;
struct evd_judge_spend;
/* The judge's side of the sequence of a judged experiment (docs/judges.md): per
 * treatment, each case's tally and settled count ([(t − 1) · cases + k]), each case's
 * unjudged judgements, and the judgements a case plans. A case enters the sequence when
 * its runs and its judgements are all settled (so that the pass, holding the experiment's
 * row, never waits for a case row a judgement's finish holds while it waits for that
 * row); with by_judge the CS runs on p_i instead of d_i. */
struct evd_judge_seq {
    const struct evd_pref_tally *tallies;
    const struct evd_judge_spend *spend;
    const uint32_t *unjudged;
    uint32_t per_case;
    bool by_judge; /* analysis.verdict_by judge */
};
enum evd_code evd_engine_experiment_stop_pass(PGconn *c, const char *id, json_t *analysis,
                                              const json_t *request, unsigned arms,
                                              size_t cases, const struct evd_analysis_cell *cells,
                                              const struct evd_judge_seq *judge,
                                              uint8_t *sequenced, enum evd_stop_pass pass,
                                              struct evd_err *err);
/* The sequence part of it, without the lock and the stop: `anytime` is the experiment's
 * stored rule (a re-score or retry of an anytime experiment runs with the fixed one);
 * *decided when the anytime rule's every treatment is decided, *seq_len the sequence's
 * length. */
enum evd_code evd_engine_experiment_sequence(PGconn *c, const char *id, const json_t *request,
                                             unsigned arms, size_t cases,
                                             const struct evd_analysis_cell *cells,
                                             const struct evd_judge_seq *judge,
                                             uint8_t *sequenced, bool anytime, bool terminal,
                                             json_t *analysis, bool *decided, int64_t *seq_len,
                                             struct evd_err *err);

/* experiments (engine/experiments.c) */
struct evd_analysis_cell;
/* A case's analysis cell as stored in experiment_cases.cells. New reference. */
json_t *evd_engine_cell_json(const struct evd_analysis_cell *cell, uint32_t failed);
/* {arms, comparisons, analysis} from stored case rows (NULL: no run yet); counts[3] =
 * terminal, passed and failed runs. New reference, or NULL on ENOMEM. */
json_t *evd_engine_experiment_analysis(const json_t *request, unsigned arms, size_t cases,
                                       const json_t *rows, bool partial, int64_t counts[3]);
/* A case's cells from its terminal runs `done` ([{position, arm, repeat, status, passed,
 * benchmark}], borrowed): a new array (one object per arm), and whether an arm is flaky
 * and whether the arms' case pass rates differ (engine/cells.c). NULL on ENOMEM. */
json_t *evd_engine_case_cells(unsigned arms, uint32_t repeats, const json_t *done, bool *flaky,
                              bool *disagree);
/* A re-score's cell (engine/rescore.c): the stored agent turn of run (case_index,
 * position) of scenario s->subject_id scored again (evd_scenario_rescore). */
struct evd_scenario;
struct evd_scenario_outcome;
void evd_engine_rescore_cell(struct evd_engine *e, struct evd_wconn *w, const struct evd_scenario *s,
                             int case_index, int position, json_t *run, struct evd_cancel *cancel,
                             struct evd_scenario_outcome *out);
/* The same for run `position` of a re-scored evaluation s->subject_id (engine/runner.c). */
void evd_engine_rescore_run(struct evd_engine *e, struct evd_wconn *w, const struct evd_scenario *s,
                            int position, json_t *run, struct evd_cancel *cancel,
                            struct evd_scenario_outcome *out);
/* {<key>: items, next_cursor?} of a page the store read (engine/experiments.c): steals
 * items and next; items NULL passes the store's error on (next freed). */
enum evd_code evd_engine_page(json_t *items, char *next, const char *key, json_t **response,
                              struct evd_err *err);
/* The normalized request of experiment `id` (new reference) with its shape, which the
 * caller clears (engine/reviews.c); NULL + err (EVD_ENOTFOUND for an unknown id). */
struct evd_store_experiment_shape;
json_t *evd_engine_experiment_request(PGconn *c, const char *id,
                                      struct evd_store_experiment_shape *shape,
                                      struct evd_err *err);

/* judge calls (engine/judgements.c) */
struct evd_limits;
struct evd_pref_tally;
/* The case a judgement belongs to, as its case job holds it. */
struct evd_judge_case {
    const char *experiment_id;
    int case_index;
    unsigned arms;
    uint32_t repeats;
    const json_t *request; /* normalized, with its judge */
    const json_t *body;    /* the case */
    const struct evd_limits *limits;
};
/* The judge calls' usage in a case's tallies, and how many of the treatment's judgements
 * of the case are answered or failed. */
struct evd_judge_spend {
    uint64_t calls, input_tokens, output_tokens, unpriced, settled;
    double cost_usd;
};
/*
 * Runs judgement `position` (attempt `attempt`; `exhausted`: its attempts were all
 * interrupted, so it fails without a call) of case x on the lifecycle. 1 with *judgement
 * (what evald_judge_finish writes) and *judged (the case's tallies with it), both new
 * references; 0 when there is nothing to write (cancelled, handed back, not prepared: the
 * lease runs out and it is tried again).
 */
int evd_engine_judge(struct evd_engine *e, struct evd_wconn *w, const struct evd_store_job *job,
                     const struct evd_judge_case *x, int position, int attempt, bool exhausted,
                     json_t **judgement, json_t **judged);
/* A case's tallies from its answered judgements [{repeat, treatment, order, winner_slot,
 * len_control, len_treatment, metrics}] (engine/judgements.c). New reference or NULL. */
json_t *evd_engine_judged_tallies(unsigned treatments, unsigned orders, uint32_t repeats,
                                  const json_t *rows);
/* Treatment t's (1-based) tally and spend from a case's stored tallies; false (zeroed) when
 * the case has none. */
bool evd_engine_judged_decode(const json_t *judged, unsigned treatment,
                              struct evd_pref_tally *t, struct evd_judge_spend *spend);

/* Finishes `id` when every run is terminal and no case job is left (its own transaction). */
enum evd_code evd_engine_experiment_finalize(struct evd_engine *e, PGconn *c, const char *id,
                                             struct evd_err *err);
/* Records experiment.completed (webhooks, the iii trigger) in the caller's transaction. */
enum evd_code evd_engine_experiment_event(PGconn *c, const char *id, const json_t *payload,
                                          int64_t now, struct evd_err *err);
/* The analyst thread: rebuilds out-of-date analyses, finishes stalled experiments. */
void *evd_engine_analyst_main(void *arg);

/* A connection of the engine's own (store/listen.h) on `channels` (NULL: none). */
struct evd_listener;
typedef void (*evd_engine_notify_fn)(void *arg, const char *channel, const char *payload);
struct evd_listener *evd_engine_listener(struct evd_engine *e, const char *const *channels,
                                         evd_engine_notify_fn on_notify);
/*
 * The agent review evaluator (engine/review.c). _check validates evaluator.arguments when
 * an evaluation starts (messages name evaluator.arguments.<field>, the reviewer's model is
 * resolved). evd_engine_review runs one review of the EvaluatorInputV1 `input` (borrowed)
 * within limits->invocation_timeout_seconds, offering the HTTP `tools` (borrowed) its
 * policy allows: *answer is the EvaluatorResponseV1 (new reference) and *transcript the
 * reviewer's turns (new reference, also on failure when the reviewer ran). An invalid
 * verdict after the repair fails with the failure code alone as the message.
 */
enum evd_code evd_engine_review_check(const struct evd_providers *providers,
                                      const json_t *arguments, struct evd_err *err);
enum evd_code evd_engine_review(const struct evd_providers *providers, const json_t *input,
                                const struct evd_limits *limits, json_t *tools,
                                struct evd_cancel *cancel, json_t **answer, json_t **transcript,
                                struct evd_err *err);

/* change hub (engine/hub.c) */
void evd_engine_publish(struct evd_engine *e, const char *evaluation_id);

/* in-flight registry (engine/inflight.c) */
int evd_engine_inflight_add(struct evd_engine *e, const struct evd_store_job *job, int attempt,
                            struct evd_cancel *cancel, int64_t deadline_mono);
/* The same for a run started ahead, counted in e->inflight_ahead until its slot ends: -1
 * when e->ahead_cap of them are registered already (or none is free). */
int evd_engine_inflight_add_ahead(struct evd_engine *e, const struct evd_store_job *job,
                                  int attempt, struct evd_cancel *cancel);
/* How many more runs ahead may be registered now. */
int evd_engine_inflight_ahead_room(struct evd_engine *e);
/* Ends a slot; the reason it was triggered, REASON_LEASE when its token's lease deadline
 * passed, REASON_NONE when neither. */
enum inflight_reason evd_engine_inflight_remove(struct evd_engine *e, int slot);
/* As _remove, but the slot stays registered without its token (freed by the caller): the
 * keeper renews its lease while the writer writes its outcome, then removes it. */
enum inflight_reason evd_engine_inflight_hold(struct evd_engine *e, int slot);
/* A slot registered before its execution (a run started ahead) begins now: its scenario
 * deadline. */
void evd_engine_inflight_begin(struct evd_engine *e, int slot, int64_t deadline_mono);
/* True when a renewal found the lease of a held slot gone. */
bool evd_engine_inflight_lost(struct evd_engine *e, int slot);
/* For the keeper's renewal: triggers the slots past their scenario deadline and writes
 * the job ids of every slot into ids; returns how many. */
size_t evd_engine_inflight_due(struct evd_engine *e, int64_t *ids);
/* What the renewal found for ids[0..n): a renewed slot's calls may go on until `until`
 * (evd_mono_ms), a slot whose lease is gone is triggered (or, with the writer, lost). */
void evd_engine_inflight_renewed(struct evd_engine *e, const int64_t *ids,
                                 const enum evd_lease_state *state, size_t n, int64_t until);
/* Triggers the in-flight runs of an evaluation (position 0 = all of them). */
void evd_engine_inflight_cancel(struct evd_engine *e, const char *evaluation_id, int position,
                                enum inflight_reason reason);

bool evd_engine_status_terminal(const char *status);

#endif
