/* SQL of datasets and dataset_cases; see datasets.h. */
#include "store/datasets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "store/db.h"
#include "store/page.h"

/* Cases go to the database in batches of this many, or of this many bytes of JSON. */
#define CASE_BATCH 1000
#define CASE_BATCH_BYTES (1u << 20)

#define ROW_JSON                                                                                   \
    "json_build_object('dataset_id', id, 'name', name, 'sha256', sha256, 'case_count',"            \
    " case_count, 'created_at', created_at)::text"

static const char SQL_FIND[] = "SELECT " ROW_JSON " FROM datasets WHERE name = $1 AND sha256 = $2";

static const char SQL_INSERT[] =
    "INSERT INTO datasets (id, name, sha256, case_count, created_at)"
    " VALUES ($1, $2, $3, $4::int, $5::bigint) ON CONFLICT (name, sha256) DO NOTHING"
    " RETURNING " ROW_JSON;

/* One batch: $2 is a JSON array of cases whose positions start after $3. */
static const char SQL_CASES[] = "INSERT INTO dataset_cases (dataset_id, position, case_id, body)"
                                " SELECT $1, $3::int + t.p::int, t.b->>'id', t.b"
                                " FROM jsonb_array_elements($2::jsonb) WITH ORDINALITY AS t(b, p)";

/* *row: the existing dataset of that name and hash (new reference), or NULL when none. */
static enum evd_code find(PGconn *c, const char *name, const char *sha256, json_t **row,
                          struct evd_err *err)
{
    *row = NULL;
    const char *p[] = {name, sha256};
    PGresult *r = evd_db_query(c, SQL_FIND, 2, p, err);
    if (r == NULL)
        return evd_db_code(err);
    enum evd_code rc = EVD_OK;
    if (PQntuples(r) > 0 && (*row = evd_db_col_json(r, 0, 0)) == NULL)
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
    PQclear(r);
    return rc;
}

static enum evd_code flush(PGconn *c, const char *id, struct evd_buf *batch, size_t *written,
                           size_t n, struct evd_err *err)
{
    if (n == 0)
        return EVD_OK;
    if (evd_buf_append(batch, "]", 1) != 0)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    char off[24];
    snprintf(off, sizeof(off), "%zu", *written);
    const char *p[] = {id, batch->data, off};
    enum evd_code rc = evd_db_exec(c, SQL_CASES, 3, p, err);
    batch->len = 0;
    *written += n;
    return rc;
}

enum evd_code evd_store_dataset_create(PGconn *c, const char *id, const char *name,
                                       const char *sha256, size_t count, int64_t created_at,
                                       evd_store_case_source next, void *ctx, json_t **row,
                                       bool *created, struct evd_err *err)
{
    *row = NULL;
    *created = false;
    struct evd_buf batch = {0};
    enum evd_code rc;
    /* The common repeat upload costs one read and writes nothing. */
    rc = find(c, name, sha256, row, err);
    if (rc != EVD_OK || *row != NULL)
        return rc;

    rc = evd_db_begin(c, err);
    if (rc != EVD_OK)
        return rc;
    char n[24], ts[24];
    snprintf(n, sizeof(n), "%zu", count);
    snprintf(ts, sizeof(ts), "%lld", (long long)created_at);
    const char *p[] = {id, name, sha256, n, ts};
    PGresult *r = evd_db_query(c, SQL_INSERT, 5, p, err);
    if (r == NULL) {
        rc = evd_db_code(err);
        goto out;
    }
    if (PQntuples(r) == 0) {
        /* Another upload of the same cases under that name committed first. */
        PQclear(r);
        evd_db_rollback(c);
        rc = find(c, name, sha256, row, err);
        if (rc != EVD_OK || *row != NULL)
            return rc;
        return evd_err_set(err, EVD_EDB, "could not read the dataset that exists already");
    }
    *row = evd_db_col_json(r, 0, 0);
    PQclear(r);
    if (*row == NULL) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }

    size_t written = 0, in_batch = 0;
    for (;;) {
        const char *json;
        size_t len;
        int got = next(ctx, &json, &len, err);
        if (got < 0) {
            rc = evd_db_code(err);
            goto out;
        }
        if (got == 0)
            break;
        if (evd_buf_append(&batch, in_batch == 0 ? "[" : ",", 1) != 0 ||
            evd_buf_append(&batch, json, len) != 0) {
            rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
            goto out;
        }
        if (++in_batch == CASE_BATCH || batch.len >= CASE_BATCH_BYTES) {
            rc = flush(c, id, &batch, &written, in_batch, err);
            in_batch = 0;
            if (rc != EVD_OK)
                goto out;
        }
    }
    rc = flush(c, id, &batch, &written, in_batch, err);
    if (rc != EVD_OK)
        goto out;
    if (written != count) {
        rc = evd_err_set(err, EVD_EINTERNAL, "dataset %s: %zu cases announced, %zu written", id,
                         count, written);
        goto out;
    }
    rc = evd_db_commit(c, err);
    if (rc == EVD_OK)
        *created = true;
out:
    evd_buf_free(&batch);
    if (rc != EVD_OK) {
        evd_db_rollback(c);
        json_decref(*row);
        *row = NULL;
    }
    return rc;
}

json_t *evd_store_dataset_get(PGconn *c, const char *id, struct evd_err *err)
{
    const char *p[] = {id};
    PGresult *r = evd_db_query(c, "SELECT " ROW_JSON " FROM datasets WHERE id = $1", 1, p, err);
    if (r == NULL)
        return NULL;
    json_t *row = NULL;
    if (PQntuples(r) == 0)
        evd_err_set(err, EVD_ENOTFOUND, "dataset not found: %s", id);
    else if ((row = evd_db_col_json(r, 0, 0)) == NULL)
        evd_err_set(err, EVD_ENOMEM, "out of memory");
    PQclear(r);
    return row;
}

static const char SQL_LIST[] = "SELECT " ROW_JSON ", created_at, id FROM datasets"
                               " WHERE $2::bigint IS NULL OR (created_at, id) < ($2::bigint, $3)"
                               " ORDER BY created_at DESC, id DESC LIMIT $1::int + 1";

json_t *evd_store_dataset_list(PGconn *c, unsigned limit, const char *before, char **next_cursor,
                               struct evd_err *err)
{
    return evd_store_page_list(c, SQL_LIST, limit, before, next_cursor, err);
}

/*
 * Cases in dataset order. The cursor has the page helper's "<number>_<id>" shape with
 * the last position read and the dataset id, so a cursor of one dataset is refused by
 * another. The first row says whether the dataset exists, so an unknown id is told
 * apart from a page past the end in the same statement (the marker sorts first: position 0).
 * (store/page.h's ascending page; $4, its extra parameter, is unused here.)
 */
static const char SQL_CASES_PAGE[] =
    "SELECT NULL::text, 0 AS position FROM datasets d WHERE d.id = $1"
    " UNION ALL (SELECT body::text, position FROM dataset_cases"
    " WHERE dataset_id = $1 AND ($3::bigint IS NULL OR position > $3::bigint)"
    " AND $4::text IS NULL ORDER BY position LIMIT $2::int + 1) ORDER BY position";

json_t *evd_store_dataset_cases(PGconn *c, const char *id, unsigned limit, const char *before,
                                char **next_cursor, struct evd_err *err)
{
    return evd_store_page_ascending(c, SQL_CASES_PAGE, "dataset", id, NULL, limit, before,
                                    next_cursor, err);
}

enum evd_code evd_store_dataset_delete(PGconn *c, const char *id, struct evd_err *err)
{
    const char *p[] = {id};
    /* The row lock orders a delete after an experiment start that read the dataset (the
     * start takes FOR SHARE), so a live experiment is never left without its cases. */
    PGresult *r = evd_db_query(
        c,
        "WITH d AS (SELECT id FROM datasets WHERE id = $1 FOR UPDATE),"
        " live AS (SELECT x.id FROM experiments x WHERE x.dataset_id = $1"
        " AND x.status IN ('queued', 'running') ORDER BY x.id LIMIT 1),"
        " del AS (DELETE FROM datasets t USING d WHERE t.id = d.id"
        " AND NOT EXISTS (SELECT 1 FROM live) RETURNING 1)"
        " SELECT (SELECT count(*) FROM d), (SELECT id FROM live), (SELECT count(*) FROM del)",
        1, p, err);
    if (r == NULL)
        return evd_db_code(err);
    enum evd_code rc = EVD_OK;
    if (evd_db_col_i64(r, 0, 0) == 0)
        rc = evd_err_set(err, EVD_ENOTFOUND, "dataset not found: %s", id);
    else if (evd_db_col_i64(r, 0, 2) != 1)
        rc = evd_err_set(err, EVD_ECONFLICT,
                         "dataset %s is used by experiment %s, which is not finished", id,
                         PQgetvalue(r, 0, 1));
    PQclear(r);
    return rc;
}
