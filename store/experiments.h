/*
 * SQL of experiments (migrations/0010_experiments.sql): the experiment rows, their copied
 * cases with the per-arm analysis cells, the planned runs, and the case jobs (kind
 * 'cell') the engine's workers execute. JSON in and out is text or new references;
 * every function runs on the caller's connection (in its transaction when it has one).
 */
#ifndef EVD_STORE_EXPERIMENTS_H
#define EVD_STORE_EXPERIMENTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "store/db.h"

/* Locks dataset `id` FOR SHARE in the caller's transaction; *found false when unknown. */
enum evd_code evd_store_dataset_lock_share(PGconn *c, const char *id, bool *found,
                                           struct evd_err *err);
/* Every case body of dataset `id` in dataset order (new array), or NULL + err. */
json_t *evd_store_dataset_bodies(PGconn *c, const char *id, struct evd_err *err);

struct evd_store_experiment_new {
    const char *id;
    const char *name;         /* or NULL */
    const char *request;      /* the normalized request, JSON text */
    const char *dataset_id;
    const char *sha256;
    int arms, repeats, concurrency, case_count;
    const char *analysis;     /* the empty analysis, JSON text */
    const char *clusters;     /* text[] literal of the cases' cluster keys, or NULL */
    const char *plan_arms;    /* int[] literals: arm and repeat of positions 1..arms·repeats */
    const char *plan_repeats;
    const char *dispatch;     /* int[] literal: each case's dispatch_index, or NULL (its index) */
    const char *stop_rule;    /* "fixed" or "anytime" */
    const char *budget;       /* the budget's caps and reservation, JSON text, or NULL */
    int judge_orders;         /* 0: no judge; 1 or 2 orders a pair (domain/judge.h) */
    const char *judge_repeats, *judge_treatments, *judge_order; /* int[] literals: a case's
                                                                   judge calls 1..n */
    int64_t now;
};
/* Creates the experiment, its cases (copied from the dataset), its runs, and its first
 * case jobs. The caller holds a transaction. */
enum evd_code evd_store_experiment_create(PGconn *c, const struct evd_store_experiment_new *x,
                                          const char *owner, struct evd_err *err);

/* The experiment as the API shows it (without the analysis members merged in: the row's
 * `analysis` member holds {arms, comparisons, analysis}). NULL + EVD_ENOTFOUND. */
json_t *evd_store_experiment_get(PGconn *c, const char *id, struct evd_err *err);
/* The status and progress only: {experiment_id, status, updated_at, progress,
 * analysis: {partial}}. */
json_t *evd_store_experiment_progress(PGconn *c, const char *id, struct evd_err *err);
/* Newest first (store/page.h). */
json_t *evd_store_experiment_list(PGconn *c, unsigned limit, const char *before,
                                  char **next_cursor, struct evd_err *err);
/* Cases in dataset order, filter NULL | "flaky" | "disagree"; EVD_ENOTFOUND when the
 * experiment is unknown. Rows: {case_id, case_index, vars, expected, cells, flaky}. */
json_t *evd_store_experiment_cases(PGconn *c, const char *id, const char *filter,
                                   unsigned limit, const char *before, char **next_cursor,
                                   struct evd_err *err);
/* Runs in case then position order (case_id NULL: every case); with_transcript adds it,
 * without it a row has the transcript's `conversation` alone (null when the run kept none:
 * docs/agents.md), for the export. Each row is the run object of the API (see
 * docs/experiments.md). */
json_t *evd_store_experiment_runs(PGconn *c, const char *id, const char *case_id,
                                  unsigned limit, const char *before, bool with_transcript,
                                  char **next_cursor, struct evd_err *err);

/* The normalized request (text, malloc'd) and shape of an experiment. */
struct evd_store_experiment_shape {
    char *request;
    int arms, repeats, case_count;
    char status[16];
    bool rescore; /* a re-score: its cells score stored outputs again (engine/rescore.c) */
};
enum evd_code evd_store_experiment_shape(PGconn *c, const char *id,
                                         struct evd_store_experiment_shape *out,
                                         struct evd_err *err);
void evd_store_experiment_shape_clear(struct evd_store_experiment_shape *s);

/* What a case job needs: the case body and cluster, and the case's terminal runs
 * [{position, arm, repeat, status, passed, metrics}] (new references). */
enum evd_code evd_store_cell_case(PGconn *c, const char *id, int case_index, json_t **body,
                                  json_t **runs, struct evd_err *err);

enum evd_cell_next {
    EVD_CELL_LOST,
    EVD_CELL_GONE,
    EVD_CELL_DONE,
    EVD_CELL_EXHAUSTED,
    EVD_CELL_STARTED,
    EVD_CELL_JUDGE,           /* a judgement of the case started (migrations/0025) */
    EVD_CELL_JUDGE_EXHAUSTED, /* a judgement whose attempts were all interrupted */
};
/* A finished cell to write (evald_cell_finish). */
struct evd_store_cell_done {
    const char *experiment_id;
    int case_index, position, attempt;
    const json_t *run;        /* the terminal run object */
    const json_t *transcript; /* or NULL */
    const json_t *cells;      /* the case's cells, one per arm */
    bool flaky, disagree;
    /* A finished judgement instead of a run (evald_judge_step; run, transcript and cells
     * unused): {status, winner_slot, reason, len_control, len_treatment, metrics, error,
     * completed_at}, and the case's tallies with it. */
    const json_t *judgement, *judged;
};
/* What evald_cell_next answered. */
struct evd_store_cell_next {
    enum evd_cell_next outcome;
    int position, attempt; /* STARTED, EXHAUSTED, JUDGE (the judgement's position) */
    int schedule;          /* DONE: the scheduler's answer (-1: every run terminal) */
    int64_t lease_left_ms; /* STARTED, EXHAUSTED: what is left of the job's lease */
    int case_index;        /* STARTED, EXHAUSTED: the case of the cell */
    json_t *body, *done;   /* when the job moved to another case: that case's body and
                              terminal runs (as evd_store_cell_case), the caller's */
};
/*
 * evald_cell_step (migrations/0010 and 0023): writes `done` (when not NULL; EVD_CELL_LOST
 * when it was not written: taken over or cancelled), then starts the next cell of job
 * `job_id`, moving the job on to the next case to dispatch when its case is done.
 * Autocommits: one round trip a cell.
 */
enum evd_code evd_store_cell_step(PGconn *c, int64_t job_id, const char *owner, long lease_ms,
                                  int64_t now, int max_attempts,
                                  const struct evd_store_cell_done *done,
                                  struct evd_store_cell_next *next, struct evd_err *err);
/* One case job's step in a batch of them (evd_store_cell_steps). */
struct evd_store_cell_step_item {
    int64_t job_id;
    const struct evd_store_cell_done *done; /* or NULL: the job's first step */
    struct evd_store_cell_next next;         /* the answer */
};
/*
 * evald_cell_steps (migrations/0028): the steps of n jobs (at most one each) as
 * evd_store_cell_step takes them, in one statement: the finished cells written together,
 * their spend, case rows and the analysis's mark folded once, then each job's next cell.
 * Only for cells of experiments without a judge, a budget or an anytime stopping rule.
 * On error nothing was written and no item holds an answer.
 */
enum evd_code evd_store_cell_steps(PGconn *c, const char *owner, long lease_ms, int64_t now,
                                   int max_attempts, struct evd_store_cell_step_item *items,
                                   size_t n, struct evd_err *err);
/* evald_cell_finish alone: *written false when the run was taken over or cancelled. */
enum evd_code evd_store_cell_finish(PGconn *c, const struct evd_store_cell_done *done,
                                    int64_t now, bool *written, struct evd_err *err);
/* The running run's metrics snapshot (one statement). */
enum evd_code evd_store_cell_progress(PGconn *c, const char *id, int case_index, int position,
                                      int attempt, const json_t *metrics, struct evd_err *err);
/* A simulated conversation's checkpoint (migrations/0026), written only while the run
 * runs with `attempt` (one statement). */
enum evd_code evd_store_cell_checkpoint(PGconn *c, const char *id, int case_index, int position,
                                        int attempt, const json_t *checkpoint,
                                        struct evd_err *err);
/* The run's checkpoint (new reference): JSON null when it has none; NULL with *err when it
 * could not be read. */
json_t *evd_store_cell_checkpoint_get(PGconn *c, const char *id, int case_index, int position,
                                      struct evd_err *err);
/* Gives a running cell back (pending again, attempt not counted, the job free at once),
 * while `owner` holds job `job_id`. */
enum evd_code evd_store_cell_hand_back(PGconn *c, int64_t job_id, const char *owner,
                                       const char *id, int case_index, int position, int attempt,
                                       struct evd_err *err);

/* The inputs of an analysis, a page at a time: per case {case_index, cluster, cells,
 * changed_seq} in dataset order (new array) of at most `limit` cases after case
 * `after_case`, every case (after_seq < 0) or those changed after change number after_seq. */
json_t *evd_store_experiment_cells(PGconn *c, const char *id, int64_t after_seq,
                                   int after_case, int limit, struct evd_err *err);
/* The distinct cluster keys of the experiment's cases, in the order they first appear
 * (new array of strings). */
json_t *evd_store_experiment_cluster_keys(PGconn *c, const char *id, struct evd_err *err);
/* Takes the oldest experiment whose analysis is out of date and that no other process is
 * rebuilding: *id (size 64) and *seq; false when none. Autocommits. */
enum evd_code evd_store_experiment_take_dirty(PGconn *c, char *id, int64_t *seq, bool *found,
                                              struct evd_err *err);
/* Stores an analysis built after take_dirty's `seq` (a newer rebuild wins) with the
 * progress counts {terminal, passed, failed} it was built from. */
enum evd_code evd_store_experiment_set_analysis(PGconn *c, const char *id, int64_t seq,
                                                const json_t *analysis,
                                                const int64_t counts[3], int64_t now,
                                                struct evd_err *err);
/* Makes a live experiment terminal with its final analysis (counts from its runs);
 * *done false when it was terminal already. Locks it. */
enum evd_code evd_store_experiment_finish(PGconn *c, const char *id, const char *status,
                                          const json_t *analysis, int64_t now, bool *done,
                                          struct evd_err *err);
/* Locks a live experiment for finishing: *status its status ("" when unknown). */
enum evd_code evd_store_experiment_lock(PGconn *c, const char *id, char status[16],
                                        struct evd_err *err);
/* Counts of the runs by outcome: completed runs, and evaluated ones. */
enum evd_code evd_store_experiment_outcomes(PGconn *c, const char *id, int64_t *completed,
                                            int64_t *total, struct evd_err *err);
/* Deletes the experiment's jobs, cancels its open runs and tells the workers
 * (EVD_CHANNEL_CANCEL). The caller locks the experiment row afterwards, not before
 * (the lock order of migrations/0010: jobs, runs and cases, the experiment). */
enum evd_code evd_store_experiment_cancel_runs(PGconn *c, const char *id, int64_t now,
                                               struct evd_err *err);
/* Deletes a terminal experiment: EVD_OK, EVD_ENOTFOUND, EVD_ECONFLICT when live. */
enum evd_code evd_store_experiment_delete(PGconn *c, const char *id, struct evd_err *err);
/* Live experiments with no case job (a crash between a case's end and the finish, or a
 * lost schedule): ids (new array). */
json_t *evd_store_experiments_stalled(PGconn *c, struct evd_err *err);
/* Runs evald_experiment_schedule; *result as it answers. */
enum evd_code evd_store_experiment_schedule(PGconn *c, const char *id, const char *owner,
                                            int *result, struct evd_err *err);


/* ---- sequence, stop and plan (store/experiment_stop.c) ---- */

/* A finished experiment used as a plan's pilot. */
struct evd_store_experiment_pilot {
    bool finished;            /* the id names a completed experiment */
    bool has_sd, has_output;
    double sd;                /* the largest per-case s.d. of d over its treatments */
    double output_per_run;    /* mean output tokens of a counted run */
};
enum evd_code evd_store_experiment_pilot(PGconn *c, const char *id,
                                         struct evd_store_experiment_pilot *out,
                                         struct evd_err *err);

/* The experiment's row locked (FOR UPDATE), and what its stop depends on. */
struct evd_store_experiment_stop {
    bool found, anytime, stopped, undispatched;
    char status[16];
};
enum evd_code evd_store_experiment_stop_state(PGconn *c, const char *id,
                                              struct evd_store_experiment_stop *out,
                                              struct evd_err *err);

/* Gives the cases of `complete` (an int[] literal of case indexes whose runs are all
 * terminal) that have no seq yet the next ones, in dispatch order, and answers the whole
 * sequence: the case indexes in seq order (new array). The caller holds the row. */
json_t *evd_store_experiment_sequence(PGconn *c, const char *id, const char *complete,
                                      struct evd_err *err);

/* Stops dispatching: every case not yet dispatched is skipped with its runs, and
 * `stopped` = {reason, at_case, runs_saved} (unless set before). The caller holds the row. */
enum evd_code evd_store_experiment_stop(PGconn *c, const char *id, const char *reason,
                                        int64_t at_case, int64_t now, struct evd_err *err);

/* Whether an experiment with the anytime rule is queued or running (false on an error). */
bool evd_store_experiments_anytime_live(PGconn *c);

#endif
