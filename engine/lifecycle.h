/*
 * The run lifecycle (engine/lifecycle.c): what every job kind's attempt goes through once
 * its attempt has started (claim, then the kind's prepare), the same way for an
 * evaluation run, a session turn and an experiment's cell — and for the next kinds:
 *
 *   register   a cancel token in the in-flight registry under the subject's id, with the
 *              scenario deadline and the claim's lease as its limits (the keeper renews
 *              the lease, delivers cancels and deadlines to it);
 *   execute    the kind's provider calls, with no database connection held (the
 *              lifecycle gives the worker's back first); progress snapshots go through
 *              evd_attempt_progress, which borrows one for the statement, and a kind
 *              that works in steps (a simulated conversation) keeps a checkpoint the
 *              same way (evd_attempt_checkpoint) for a later attempt to go on from;
 *   end        what stopped it, as one answer: finished, timed out, cancelled, handed back
 *              (a stop, or a lease not renewed in time: the kind's hand-back statement,
 *              made here, with the attempt not counted), or dropped (never started);
 *   fold       the kind writes its outcome by that answer (the writer's batch for a run,
 *              the next step for a cell, a transaction of its own for a turn), then
 *              evd_attempt_clear ends the slot.
 *
 * An attempt the claim did not start (a run someone held when it was claimed, a session
 * turn) is started by evd_attempt_start, one transaction with the rules every kind
 * shares: a unit gone or over needs none, one whose EVD_MAX_ATTEMPTS attempts were all
 * interrupted fails with phase setup, any other starts its next attempt. (An experiment's
 * cells start in their step's statement, migrations/0023, by the same rules.)
 *
 * A kind supplies its operations (struct evd_attempt_ops) and its context (kind); it has
 * no start_attempt, progress writer, hand-back or in-flight bookkeeping of its own.
 * Threads: an attempt belongs to one worker; execute runs on it.
 */
#ifndef EVD_ENGINE_LIFECYCLE_H
#define EVD_ENGINE_LIFECYCLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include "store/db.h"

#include "common/cancel.h"
#include "common/err.h"
#include "common/trace.h"

struct evd_engine;
struct evd_wconn;
struct evd_store_job;
struct evd_attempt;

/* What ended an attempt. */
enum evd_attempt_end {
    EVD_ATTEMPT_FINISHED,    /* it ran to its end: write the outcome */
    EVD_ATTEMPT_TIMED_OUT,   /* its scenario deadline passed: write it failed, phase await */
    EVD_ATTEMPT_CANCELLED,   /* cancelled, or its job taken away: nothing to write */
    EVD_ATTEMPT_HANDED_BACK, /* a stop or a lease not renewed: given back, not counted */
    EVD_ATTEMPT_DROPPED,     /* it never started (no memory; a kind's own setup failed): the
                                lease runs out and another attempt runs it */
};

/* What evd_attempt_start found of the unit (run, turn) to start. */
enum evd_unit_state {
    EVD_UNIT_GONE, /* its subject was deleted or is over: the job is obsolete */
    EVD_UNIT_DONE, /* the unit itself is terminal */
    EVD_UNIT_OPEN, /* it may run: *used attempts so far */
};

/* The statements of a kind's start (evd_attempt_start), each in its transaction. */
struct evd_attempt_start_ops {
    /* Locks the subject and reads the unit. EVD_ENOTFOUND counts as EVD_UNIT_GONE. */
    enum evd_code (*load)(PGconn *c, struct evd_attempt *a, enum evd_unit_state *state,
                          int *used, struct evd_err *err);
    /* A unit that needs no attempt (GONE or DONE): its job deleted, and whatever follows. */
    enum evd_code (*settle)(PGconn *c, struct evd_attempt *a, enum evd_unit_state state,
                            struct evd_err *err);
    /* Every one of `used` attempts was interrupted: the unit fails, phase setup, `msg`. */
    enum evd_code (*exhaust)(PGconn *c, struct evd_attempt *a, int used, const char *msg,
                             struct evd_err *err);
    /* Starts attempt a->attempt. */
    enum evd_code (*begin)(PGconn *c, struct evd_attempt *a, struct evd_err *err);
};

struct evd_attempt_ops {
    const char *what;   /* "run", "session turn", "experiment run": for the logs */
    const char *id_key; /* the log key of subject_id: "evaluation_id", ... */
    /* The provider work, with the cancel token a->cancel; no connection is held on entry.
     * Sets a->not_started when nothing ran, a->interrupted when a call was cut short. */
    void (*execute)(struct evd_attempt *a);
    /* One progress snapshot, on c (autocommit; NULL: the kind keeps none). */
    enum evd_code (*progress)(PGconn *c, const struct evd_attempt *a, json_t *metrics,
                              struct evd_err *err);
    /* Keeps the attempt's checkpoint on c (autocommit; NULL: the kind resumes nothing):
     * what a later attempt of the unit goes on from. */
    enum evd_code (*checkpoint)(PGconn *c, const struct evd_attempt *a, const json_t *cp,
                                struct evd_err *err);
    /* Gives the attempt back on c: pending again, the attempt not counted, the job free,
     * only while this process holds its lease and the attempt is still a->attempt. */
    enum evd_code (*hand_back)(PGconn *c, const struct evd_attempt *a, struct evd_err *err);
};

struct evd_attempt {
    /* The kind's, set before evd_attempt_run. */
    const struct evd_attempt_ops *ops;
    struct evd_engine *e;
    struct evd_wconn *w;
    const struct evd_store_job *job; /* its claimed_mono bounds the first lease */
    const char *subject_id;          /* the registry's key: evaluation, experiment, session */
    int position;                    /* run position, turn seq, cell position */
    int attempt;
    int64_t timeout_ms;                 /* the scenario's wall-clock limit */
    const struct evd_trace_ctx *trace;  /* the attempt's trace, for the logs (NULL: none) */
    bool keep_slot; /* a finished attempt keeps its registry slot, and its lease renewed,
                       until the writer has its outcome (evd_engine_write_later) */
    bool registered; /* slot and cancel set by the caller: registered when its batch
                        started it (a run ahead, engine/internal.h) */
    void *kind;      /* the kind's context */
    /* Set by execute. */
    bool not_started, interrupted;
    /* The lifecycle's. */
    struct evd_cancel *cancel;
    int slot; /* in-flight slot, -1: none (a kind that hands it to the writer sets -1) */
};

/* Starts the next attempt of a->job's unit on c in one transaction (above): the attempt
 * started (also in a->attempt), or 0 when there is none to run (err set when a statement
 * failed: nothing was done, and the lease runs out). */
int evd_attempt_start(struct evd_attempt *a, PGconn *c, const struct evd_attempt_start_ops *ops,
                      struct evd_err *err);
/* Registers, executes and ends the attempt (above); the kind then folds its outcome by
 * the answer and calls evd_attempt_clear. */
enum evd_attempt_end evd_attempt_run(struct evd_attempt *a);
/* Ends what evd_attempt_run left: the slot (unless handed on), the token, the log's
 * trace. Safe on an attempt that never ran. */
void evd_attempt_clear(struct evd_attempt *a);
/* Gives the attempt back now (a claimed attempt that cannot be prepared); logged when
 * the statement fails: its lease then runs out. */
void evd_attempt_hand_back(struct evd_attempt *a);
/* The harness's progress callback (ctx: the struct evd_attempt). */
void evd_attempt_progress(void *ctx, json_t *metrics);
/* The same for a checkpoint (ops->checkpoint); 0, or -1 when it could not be written (the
 * work goes on: a later attempt resumes from the checkpoint before). */
int evd_attempt_checkpoint(void *ctx, const json_t *cp);
/* The failure message of an attempt whose `attempts` were all interrupted. */
void evd_attempt_exhausted_message(char *buf, size_t n, int attempts);

#endif
