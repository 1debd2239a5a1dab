/*
 * Experiments (../shared/spec/experiments.md; docs/experiments.md): a control and 1–4
 * treatments over every case of a dataset, `repeats` times each, with a paired,
 * case-clustered analysis. The runs of an experiment are cells (a case, an arm, a repeat)
 * executed by the engine's workers as the third job kind (engine/jobs.h): one job per
 * case, whose cells run one after another in the planned order, `concurrency` cases at
 * once in dataset order. The analysis is rebuilt from the per-case cells at most about
 * once a second while runs finish, and once more when the experiment ends.
 *
 * Thread-safety: every function may be called from any thread (handlers, the adapter);
 * they borrow pool connections. Responses are new references.
 */
#ifndef EVD_ENGINE_EXPERIMENTS_H
#define EVD_ENGINE_EXPERIMENTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "common/util.h"

struct evd_engine;

/*
 * POST /v1/experiments, as its body streams in (engine/experiment_start.c): begin, feed
 * each piece, finish. Inline `cases` are split off and spooled as they come and make a
 * dataset (as an upload would); the start holds one case at a time. Every case is checked
 * against the templates before anything is written. On EVD_OK finish sets *response to
 * {experiment_id, status: "queued"}. EVD_EINVAL names the field or case (malformed JSON
 * first, then the request, then the cases); an unknown dataset_id is EVD_EINVAL too
 * ("dataset_id names no dataset: <id>"). An upload belongs to one thread at a time.
 */
struct evd_experiment_upload;
enum evd_code evd_experiment_upload_begin(struct evd_engine *e,
                                          struct evd_experiment_upload **out,
                                          struct evd_err *err);
enum evd_code evd_experiment_upload_feed(struct evd_experiment_upload *u, const void *data,
                                         size_t len, struct evd_err *err);
enum evd_code evd_experiment_upload_finish(struct evd_experiment_upload *u, json_t **response,
                                           struct evd_err *err);
/* POST /v1/experiments/plan: the start's validation, nothing written, and on EVD_OK the
 * plan (../shared/spec/sequential.md, "Planning"; engine/experiment_plan.c). */
enum evd_code evd_experiment_upload_plan(struct evd_experiment_upload *u, json_t **response,
                                         struct evd_err *err);
/* After the last piece, before finish, for Idempotency-Key: the SHA-256 (hex) of the
 * body's canonical JSON (of its request and of each of its cases); false when the body is
 * not JSON. Call at most once. */
bool evd_experiment_upload_fingerprint(struct evd_experiment_upload *u, char out[65]);
/* NULL-safe; removes the spool. */
void evd_experiment_upload_free(struct evd_experiment_upload *u);

/* GET /v1/experiments/{id}: the document of the spec's "Reading an experiment", or
 * EVD_ENOTFOUND. */
enum evd_code evd_experiment_get(struct evd_engine *e, const char *id, json_t **experiment,
                                 struct evd_err *err);

/* {experiment_id, status, progress: {...}, analysis: {partial}}: the payload of an SSE
 * `progress` (or, once terminal, `status`) event; EVD_ENOTFOUND. */
enum evd_code evd_experiment_progress(struct evd_engine *e, const char *id, json_t **progress,
                                      struct evd_err *err);

/* GET /v1/experiments: {experiments: [summary...], next_cursor?}, newest first. A summary
 * is {experiment_id, name, status, created_at, updated_at, completed_at, dataset_id,
 * arms, repeats, progress}. */
enum evd_code evd_experiment_list(struct evd_engine *e, unsigned limit, const char *before,
                                  json_t **response, struct evd_err *err);

/* GET /v1/experiments/{id}/cases: {cases: [...], next_cursor?} in dataset order; filter
 * NULL, "flaky" or "disagree" (anything else: EVD_EINVAL naming filter). */
enum evd_code evd_experiment_cases(struct evd_engine *e, const char *id, const char *filter,
                                   unsigned limit, const char *before, json_t **response,
                                   struct evd_err *err);

/* GET /v1/experiments/{id}/runs: {runs: [...], next_cursor?} in case then position order;
 * case_id NULL for every case (an unknown case_id gives an empty list). */
enum evd_code evd_experiment_runs(struct evd_engine *e, const char *id, const char *case_id,
                                  unsigned limit, const char *before, json_t **response,
                                  struct evd_err *err);

/* POST /v1/experiments/{id}/cancel: {experiment_id, status}; a terminal experiment is left
 * as it is (its status answered). In-flight cells stop within about a second. */
enum evd_code evd_experiment_cancel(struct evd_engine *e, const char *id, json_t **response,
                                    struct evd_err *err);

/* DELETE /v1/experiments/{id}: EVD_OK, EVD_ENOTFOUND, EVD_ECONFLICT unless terminal. */
enum evd_code evd_experiment_delete(struct evd_engine *e, const char *id, struct evd_err *err);

/* GET /v1/experiments/{id}/export?format=jsonl|csv&records=runs|judgements, read in
 * pieces: _open checks the experiment (EVD_ENOTFOUND), the format and the records
 * (EVD_EINVAL naming the parameter; NULL: jsonl, runs); _next appends the next records
 * (CSV: the header first) to *out and returns 1, 0 at the end (nothing appended), or -1
 * with *err. */
struct evd_experiment_export;
enum evd_code evd_experiment_export_open(struct evd_engine *e, const char *id, const char *format,
                                         const char *records,
                                         struct evd_experiment_export **out, struct evd_err *err);
/* Whether the export is of judge calls (records=judgements). */
bool evd_experiment_export_judgements(const struct evd_experiment_export *x);
int evd_experiment_export_next(struct evd_experiment_export *x, struct evd_buf *out,
                               struct evd_err *err);
/* "application/x-ndjson" or "text/csv". */
const char *evd_experiment_export_type(const struct evd_experiment_export *x);
void evd_experiment_export_free(struct evd_experiment_export *x);

#endif
