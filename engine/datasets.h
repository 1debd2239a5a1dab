/*
 * Datasets of test cases (docs/experiments.md): uploads and reads. An upload is read as
 * it arrives (domain/dataset.h) and its normalized cases are spooled to an unlinked
 * temporary file, so neither memory nor a database connection is held while a slow
 * client sends its body; only a complete, valid upload is written, in one transaction.
 *
 * Thread-safety: every function may be called from any thread; an upload belongs to
 * the thread that feeds it. Responses are new references.
 */
#ifndef EVD_ENGINE_DATASETS_H
#define EVD_ENGINE_DATASETS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "domain/dataset.h"

struct evd_engine;
struct evd_dataset_upload;

/*
 * Begins an upload in format f of at most max_cases cases. `name` (borrowed) is the
 * ?name= of a JSONL or CSV upload (required for them: "name is required"), NULL for a
 * JSON upload, which names itself.
 */
enum evd_code evd_dataset_upload_begin(struct evd_engine *e, enum evd_dataset_format f,
                                       const char *name, size_t max_cases,
                                       struct evd_dataset_upload **out, struct evd_err *err);

/* The next piece of the body. EVD_OK, or the refusal (the upload is then spent). */
enum evd_code evd_dataset_upload_feed(struct evd_dataset_upload *u, const void *data, size_t len,
                                      struct evd_err *err);

/*
 * Ends the body and stores the dataset. On EVD_OK *dataset is its row
 * {dataset_id, name, sha256, case_count, created_at} and *created says whether it is new
 * (false: the same name and cases existed already).
 */
enum evd_code evd_dataset_upload_finish(struct evd_dataset_upload *u, json_t **dataset,
                                        bool *created, struct evd_err *err);

/* After the last piece, before finish, for Idempotency-Key: the SHA-256 (hex) of a JSON
 * upload's canonical JSON; false for the other formats (their bytes are compared) and
 * for a body that is not JSON. */
bool evd_dataset_upload_fingerprint(struct evd_dataset_upload *u, char out[65]);

/* NULL-safe; removes the spool. */
void evd_dataset_upload_free(struct evd_dataset_upload *u);

/* GET /v1/datasets/{id}: the row, or EVD_ENOTFOUND. */
enum evd_code evd_dataset_get(struct evd_engine *e, const char *id, json_t **dataset,
                              struct evd_err *err);

/* GET /v1/datasets: {datasets: [...], next_cursor?} newest first. */
enum evd_code evd_dataset_list(struct evd_engine *e, unsigned limit, const char *before,
                               json_t **response, struct evd_err *err);

/* GET /v1/datasets/{id}/cases: {cases: [...], next_cursor?} in dataset order. */
enum evd_code evd_dataset_cases(struct evd_engine *e, const char *id, unsigned limit,
                                const char *before, json_t **response, struct evd_err *err);

/* DELETE /v1/datasets/{id}: EVD_OK, EVD_ENOTFOUND. */
enum evd_code evd_dataset_delete(struct evd_engine *e, const char *id, struct evd_err *err);

#endif
