/*
 * Datasets and their cases (migrations/0008_datasets.sql). SQL only: reading and
 * validating an upload is the domain's (domain/dataset.h). Every function runs on the
 * connection it is given, from the thread that holds it.
 *
 * A dataset row as JSON is {dataset_id, name, sha256, case_count, created_at}.
 */
#ifndef EVD_STORE_DATASETS_H
#define EVD_STORE_DATASETS_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

/*
 * Hands out the normalized cases of a new dataset one at a time, in order, as compact
 * JSON text (borrowed until the next call): 1 with *json and *len set, 0 at the end, -1
 * on failure (err set).
 */
typedef int (*evd_store_case_source)(void *ctx, const char **json, size_t *len,
                                     struct evd_err *err);

/*
 * Creates dataset `id` named `name` with `count` cases whose canonical hash is `sha256`,
 * the cases read from next(ctx), all in one transaction. When a dataset with that name
 * and hash exists already (before or concurrently), nothing is written and *created is
 * false. On EVD_OK *row is the dataset (new reference): the new one or the existing one.
 */
enum evd_code evd_store_dataset_create(PGconn *c, const char *id, const char *name,
                                       const char *sha256, size_t count, int64_t created_at,
                                       evd_store_case_source next, void *ctx, json_t **row,
                                       bool *created, struct evd_err *err);

/* The dataset row (new reference), or NULL + err (EVD_ENOTFOUND "dataset not found: <id>"). */
json_t *evd_store_dataset_get(PGconn *c, const char *id, struct evd_err *err);

/*
 * Datasets newest first, a page of `limit` after the cursor `before` (NULL: the first
 * page) as a new array; *next_cursor (malloc'd) when more remain. NULL + err.
 */
json_t *evd_store_dataset_list(PGconn *c, unsigned limit, const char *before, char **next_cursor,
                               struct evd_err *err);

/*
 * The normalized cases of dataset `id` in dataset order, a page of `limit` after the
 * cursor `before`, as a new array; *next_cursor (malloc'd) when more remain. NULL + err
 * (EVD_ENOTFOUND when the dataset is unknown).
 */
json_t *evd_store_dataset_cases(PGconn *c, const char *id, unsigned limit, const char *before,
                                char **next_cursor, struct evd_err *err);

/* Deletes the dataset and its cases: EVD_OK, EVD_ENOTFOUND when unknown, EVD_ECONFLICT
 * while a queued or running experiment uses it. */
enum evd_code evd_store_dataset_delete(PGconn *c, const char *id, struct evd_err *err);

#endif
