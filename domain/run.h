/*
 * Runs: the EvalRunV1 objects an evaluation keeps, one per plan position (the seed's
 * EvalRunReportV1 shape), and every transition the engine applies to them.
 *
 * A run is born pending (plan.h), becomes running (evd_run_mark_running), and ends in
 * exactly one terminal status:
 *   completed  the agent finished without error: evd_run_record_outcome, then
 *              evd_run_complete (with the evaluator's answer, or none)
 *   failed     it could not finish or could not be evaluated: evd_run_fail
 *   cancelled  the evaluation was cancelled: evd_run_cancel / evd_runs_cancel_open
 * `passed` is true or false only for completed runs that were evaluated; it is null for
 * every other run ("neither passed nor failed").
 *
 * Mutators change the object passed in place and return 0, or -1 on ENOMEM (the run
 * may then be partly updated: discard it). Not thread-safe for a shared run object;
 * JSON arguments are borrowed and copied unless a comment says "steals".
 */
#ifndef EVD_DOMAIN_RUN_H
#define EVD_DOMAIN_RUN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "domain/limits.h"
#include "domain/plan.h"
#include "domain/vocab.h"

/*
 * A pending run for one plan entry: {run_id, role, iteration, execution_position,
 * pair_position, session_id, status:"pending", started_at:0, failures:[]}.
 * New reference, or NULL on ENOMEM.
 */
json_t *evd_run_new(const char *evaluation_id, const struct evd_plan_entry *entry);

/*
 * A failure record EvalFailureV1 {phase, function_id?, message}; function_id NULL
 * leaves it out. New reference, or NULL on ENOMEM.
 */
json_t *evd_run_failure_new(enum evd_phase phase, const char *function_id, const char *message);

/* Appends a failure record (steals `failure`, also on error). */
int evd_run_add_failure(json_t *run, json_t *failure);

/* Readers; false / -1 when the member is missing or malformed. */
bool evd_run_get_role(const json_t *run, enum evd_role *out);
bool evd_run_get_status(const json_t *run, enum evd_run_status *out);
bool evd_run_is_terminal(const json_t *run);
/* 1 passed, 0 did not pass, -1 not evaluated (null or absent). */
int evd_run_passed(const json_t *run);

/* pending -> running: status "running", started_at. */
int evd_run_mark_running(json_t *run, int64_t started_at);

/* Records the agent's turn id (NULL clears it). */
int evd_run_set_turn_id(json_t *run, const char *turn_id);

/*
 * Records what the agent produced: `output` (the final answer; NULL stores JSON null),
 * `metrics` (a SessionMetricsResponseV1, or NULL when none was collected), the
 * benchmark derived from them (only for complete metrics, see metrics.h) and
 * completed_at. Does not change the status.
 */
int evd_run_record_outcome(json_t *run, const json_t *output, const json_t *metrics,
                           uint64_t wall_time_ms, int64_t completed_at);

/*
 * Whether the engine must call the evaluator for this run: the request (a normalized
 * request) has an evaluator and the recorded output is not null.
 */
bool evd_run_needs_evaluation(const json_t *request, const json_t *run);

/*
 * Ends a run whose agent completed without error. The limit failures of its recorded
 * metrics (limits.h) are appended. `evaluation` is the validated EvaluatorResponseV1
 * (see evd_evaluator_check_response), or NULL when the run is not evaluated (no
 * evaluator, or a null output): then passed stays null. With an evaluation,
 * passed = evaluation.passed AND no limit failure. Status becomes "completed".
 */
int evd_run_complete(json_t *run, const struct evd_limits *limits, const json_t *evaluation);

/*
 * Ends a run as failed: status "failed", passed null, completed_at, and the failure
 * {phase, function_id?, message} appended. Output, metrics and benchmark recorded
 * before are kept (an evaluator failure keeps them; limit failures are not added).
 */
int evd_run_fail(json_t *run, enum evd_phase phase, const char *function_id, const char *message,
                 int64_t completed_at);

/* Ends a run as cancelled, like evd_run_fail but with status "cancelled". */
int evd_run_cancel(json_t *run, enum evd_phase phase, const char *function_id, const char *message,
                   int64_t completed_at);

/*
 * Cancels every run of the array that is not terminal yet (pending or running) with
 * the failure {phase:"cancel", message:"evaluation cancelled"}.
 */
int evd_runs_cancel_open(json_t *runs, int64_t completed_at);

/*
 * The run as the seed's EvalRunReportV1: a deep copy keeping only the members that
 * schema knows (engine bookkeeping such as attempt counters is dropped).
 * New reference, or NULL on ENOMEM.
 */
json_t *evd_run_project(const json_t *run);
/* The same, sharing the run's member values by reference instead of copying them: the
 * run must not be modified while the projection lives. New reference, NULL on ENOMEM. */
json_t *evd_run_project_shared(const json_t *run);

/*
 * The EvaluatorInputV1 sent to an evaluator for a run: {evaluation_id, run_id, role,
 * session_id, output, metrics, arguments}. Missing metrics are sent as an empty,
 * incomplete SessionMetricsResponseV1 for the run's session so the input stays valid.
 * `arguments` NULL sends {}. New reference, or NULL on ENOMEM.
 */
json_t *evd_run_evaluator_input(const char *evaluation_id, const json_t *run,
                                const json_t *arguments);

#endif
