/*
 * What callers see of an evaluation: live progress (EvalProgressV1), the final report
 * (EvalReportV1), the result response (EvalResultResponseV1), the status projection
 * (EvalStatusResponseV1) and the list summary (EvalSummaryV1), all computed from the
 * evaluation's record: its normalized request and its runs in plan order.
 *
 * Counting: terminal_runs are runs completed, failed or cancelled; passed_runs have
 * passed = true; failed_runs are terminal runs with passed = false. A run that failed,
 * was cancelled or was never evaluated (passed null) is neither passed nor failed.
 *
 * Pure; thread-safe; record members are borrowed; results are new references, or
 * NULL on ENOMEM.
 */
#ifndef EVD_DOMAIN_REPORT_H
#define EVD_DOMAIN_REPORT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "domain/vocab.h"

struct evd_run_counts {
    uint32_t total;
    uint32_t terminal;
    uint32_t passed;
    uint32_t failed;
};

/* The state of one evaluation as the engine keeps it. */
struct evd_eval_record {
    const char *evaluation_id;
    enum evd_eval_status status;
    const json_t *request; /* NormalizedEvalRequestV1 */
    const json_t *runs;    /* array of EvalRunV1 in plan order; NULL when not loaded */
    const json_t *report;  /* the stored EvalReportV1, or NULL before finalization */
    int64_t created_at;    /* Unix epoch ms */
    int64_t updated_at;
    int64_t completed_at; /* 0 = not completed */
    const char *error;    /* NULL = none */
    /*
     * Optional shortcuts for list queries that do not load runs or reports: counts
     * (used when `runs` is NULL) and eligibility (used when `report` is NULL).
     */
    const struct evd_run_counts *counts;
    bool has_eligible;
    bool eligible;
    /*
     * When true, what is built from this record (report, result) shares the runs' and
     * the stored report's values by reference instead of deep-copying them, which halves
     * the memory a large evaluation needs; the caller must then leave them unmodified
     * while the result lives.
     */
    bool share;
};

/* Counts the runs of an array (borrowed) with the rules above. */
void evd_report_count_runs(const json_t *runs, struct evd_run_counts *out);

/*
 * EvalProgressV1 of a normalized request and its runs: effective_execution_order,
 * control_aggregate, treatment_aggregate, delta, order_sensitivity (terminal runs
 * only, see aggregate.h) and the runs projected to EvalRunReportV1.
 */
json_t *evd_report_progress(const json_t *request, const json_t *runs);

/*
 * EvalReportV1, built once when the evaluation becomes terminal (completed or
 * cancelled): everything in progress plus schema_version "1", evaluation_id,
 * source_evaluation_id (reruns), execution_order_policy, dimension, model, limits,
 * evaluator artifact, control/treatment artifacts, shared_artifacts, eligible (left
 * out without evaluator), created_at and completed_at (the record's; set it first).
 */
json_t *evd_report_build(const struct evd_eval_record *record);

/* The eligibility a report states: 1, 0, or -1 when it has none. */
int evd_report_eligible(const json_t *report);

/*
 * EvalResultResponseV1 {status, request, progress, report?}: progress recomputed from
 * the runs, report only when the record has one. A record with a report and no runs
 * (a terminal evaluation, whose runs no longer change) takes progress from the report,
 * which was built from those same runs.
 */
json_t *evd_report_result(const struct evd_eval_record *record);

/*
 * EvalStatusResponseV1: counts, timestamps, error, and `active` = the first run in
 * plan order that is running ({run_id, role, iteration, session_id, turn_id?,
 * started_at}); with concurrency > 1 other runs may be in flight too.
 */
json_t *evd_report_status(const struct evd_eval_record *record);

/*
 * EvalSummaryV1 for eval::list: id, status, dimension, model name, provider, variant
 * labels, total_runs (2 x runs of the request), counts, eligible, timestamps, error.
 */
json_t *evd_report_summary(const struct evd_eval_record *record);

#endif
