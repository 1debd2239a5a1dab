/*
 * SQL of an experiment's judge calls, pair reviews and their agreement (docs/judges.md,
 * migrations/0025_judges.sql). The case job's statements (start, finish, hand back) are
 * store/experiments.h's evd_store_cell_step with a judgement; these are the rest.
 */
#ifndef EVD_STORE_JUDGEMENTS_H
#define EVD_STORE_JUDGEMENTS_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

/*
 * The judgements of every case of a new experiment (in the caller's transaction): the
 * int[] literals give repeat, treatment and order of positions 1..n of a case
 * (domain/judge.h, evd_judge_call_at), and `orders` (1 or 2) is kept on the experiment.
 */
enum evd_code evd_store_judgements_create(PGconn *c, const char *id, int orders,
                                          const char *repeats, const char *treatments,
                                          const char *order, struct evd_err *err);

/*
 * What a judge call of (case, repeat, treatment) needs: the outputs of the pair's control
 * and treatment runs (new references; JSON null when a run has none), and every answered
 * judgement of the case [{repeat, treatment, order, winner_slot, len_control,
 * len_treatment, metrics}] (new reference), for its tallies.
 */
enum evd_code evd_store_judge_pair(PGconn *c, const char *id, int case_index, int repeat,
                                   int treatment, json_t **control, json_t **treatment_out,
                                   json_t **judged, struct evd_err *err);

/* Gives a running judgement back (a stop, a lost lease): pending, attempt not counted, the
 * job free; only while this owner holds the job and the attempt is still `attempt`. */
enum evd_code evd_store_judge_hand_back(PGconn *c, int64_t job_id, const char *owner,
                                        const char *id, int case_index, int position,
                                        int attempt, struct evd_err *err);

/* Cancels the judgements not yet answered (an experiment's cancel, after its jobs). */
enum evd_code evd_store_judgements_cancel(PGconn *c, const char *id, int64_t now,
                                          struct evd_err *err);

/*
 * The judgements in case, repeat, treatment, order order (store/page.h ascending), filtered
 * by case_id and treatment (NULL / 0: any). Rows {case_id, case_index, repeat, treatment,
 * order, status, winner_slot, winner_arm, reason, outcome, inconsistent, metrics, error}.
 */
json_t *evd_store_judgements_list(PGconn *c, const char *id, const char *case_id, int treatment,
                                  unsigned limit, const char *before, char **next_cursor,
                                  struct evd_err *err);

/*
 * One pair (case_id, repeat, treatment): {case_id, case_index, repeat, treatment, body,
 * control: {run_id, status, output}, treatment_run: {…}, judgements: […as listed…],
 * outcome, inconsistent, human, reviews: […]}; NULL + EVD_ENOTFOUND for an unknown
 * experiment or pair.
 */
json_t *evd_store_pair(PGconn *c, const char *id, const char *case_id, int repeat,
                       int treatment, struct evd_err *err);

/* A reviewer's review of a pair, replacing their earlier one: the stored review, or NULL +
 * EVD_ENOTFOUND (unknown experiment or pair). */
json_t *evd_store_pair_review_put(PGconn *c, const char *id, const char *case_id, int repeat,
                                  int treatment, const char *winner, const char *reviewer,
                                  const char *note, int64_t now, struct evd_err *err);

/* The pair reviews in the order they were first made, optionally of one reviewer. */
json_t *evd_store_pair_reviews(PGconn *c, const char *id, const char *reviewer, unsigned limit,
                               const char *before, char **next_cursor, struct evd_err *err);

/*
 * The pairs with both a judge outcome and a human one, counted per treatment:
 * [{treatment, judge, human, count}] (outcomes "control", "tie", "treatment"); NULL +
 * EVD_ENOTFOUND for an unknown experiment.
 */
json_t *evd_store_pair_agreement(PGconn *c, const char *id, struct evd_err *err);

#endif
