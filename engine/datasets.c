/*
 * Dataset uploads and reads; see datasets.h. The spool is one compact JSON case a line
 * (compact JSON never holds a raw newline), written by the reader's sink as the body
 * streams in and read back line by line into the store's batches at the end.
 */
#include "engine/datasets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"
#include "domain/canonical.h"
#include "engine/internal.h"
#include "store/datasets.h"
#include "store/db.h"

struct evd_dataset_upload {
    struct evd_engine *engine;
    struct evd_dataset_reader *reader;
    char *name; /* ?name= of a JSONL or CSV upload */
    FILE *spool;
    bool spool_failed;
    char *line; /* read-back buffer */
    size_t line_cap;
};

static enum evd_code spool_case(void *ctx, size_t position, const json_t *c, struct evd_err *err)
{
    (void)position;
    struct evd_dataset_upload *u = ctx;
    size_t len = 0;
    char *text = evd_json_compact(c, &len);
    if (text == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    bool ok = fwrite(text, 1, len, u->spool) == len && fputc('\n', u->spool) != EOF;
    free(text);
    if (!ok) {
        u->spool_failed = true;
        return evd_err_set(err, EVD_EINTERNAL, "could not spool the upload to a temporary file");
    }
    return EVD_OK;
}

enum evd_code evd_dataset_upload_begin(struct evd_engine *e, enum evd_dataset_format f,
                                       const char *name, size_t max_cases,
                                       struct evd_dataset_upload **out, struct evd_err *err)
{
    *out = NULL;
    if (f == EVD_DATASET_JSONL || f == EVD_DATASET_CSV) {
        if (name == NULL)
            return evd_err_set(err, EVD_EINVAL, "name is required");
        enum evd_code rc = evd_dataset_check_name(name, strlen(name), err);
        if (rc != EVD_OK)
            return rc;
    }
    struct evd_dataset_upload *u = calloc(1, sizeof(*u));
    if (u == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    u->engine = e;
    u->spool = tmpfile();
    if (u->spool == NULL) {
        free(u);
        return evd_err_set(err, EVD_EINTERNAL, "could not create a temporary file for the upload");
    }
    u->reader = evd_dataset_reader_new(f, max_cases, spool_case, u);
    if (u->reader == NULL || (name != NULL && (u->name = strdup(name)) == NULL)) {
        evd_dataset_upload_free(u);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    *out = u;
    return EVD_OK;
}

enum evd_code evd_dataset_upload_feed(struct evd_dataset_upload *u, const void *data, size_t len,
                                      struct evd_err *err)
{
    return evd_dataset_reader_feed(u->reader, data, len, err);
}

/* The store's case source: the spool's next line, without its newline. */
static int next_case(void *ctx, const char **json, size_t *len, struct evd_err *err)
{
    struct evd_dataset_upload *u = ctx;
    ssize_t n = getline(&u->line, &u->line_cap, u->spool);
    if (n < 0) {
        if (ferror(u->spool)) {
            evd_err_set(err, EVD_EINTERNAL, "could not read the upload back from its spool");
            return -1;
        }
        return 0;
    }
    if (n > 0 && u->line[n - 1] == '\n')
        n--;
    *json = u->line;
    *len = (size_t)n;
    return 1;
}

static enum evd_code rewind_spool(struct evd_dataset_upload *u, struct evd_err *err)
{
    if (fflush(u->spool) != 0 || fseek(u->spool, 0, SEEK_SET) != 0)
        return evd_err_set(err, EVD_EINTERNAL, "could not read the upload back from its spool");
    return EVD_OK;
}

enum evd_code evd_dataset_upload_store(struct evd_dataset_upload *u, PGconn *c, const char *name,
                                       json_t **dataset, bool *created, struct evd_err *err)
{
    *dataset = NULL;
    *created = false;
    enum evd_code rc = rewind_spool(u, err);
    if (rc != EVD_OK)
        return rc;
    char id[64];
    evd_new_id("ds_", id, sizeof(id));
    return evd_store_dataset_create(c, id, name, evd_dataset_reader_sha256(u->reader),
                                    evd_dataset_reader_count(u->reader), evd_now_ms(), next_case,
                                    u, dataset, created, err);
}

enum evd_code evd_dataset_upload_finish(struct evd_dataset_upload *u, json_t **dataset,
                                        bool *created, struct evd_err *err)
{
    *dataset = NULL;
    *created = false;
    enum evd_code rc = evd_dataset_reader_finish(u->reader, err);
    if (rc != EVD_OK)
        return rc;
    const char *name = u->name != NULL ? u->name : evd_dataset_reader_name(u->reader);
    PGconn *c = evd_db_acquire(u->engine->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    rc = evd_dataset_upload_store(u, c, name, dataset, created, err);
    evd_db_release(u->engine->opts.db, c);
    return rc;
}

enum evd_code evd_dataset_upload_case(struct evd_dataset_upload *u, const json_t *raw,
                                      size_t index, struct evd_err *err)
{
    return evd_dataset_reader_case(u->reader, raw, index, err);
}

enum evd_code evd_dataset_upload_seal(struct evd_dataset_upload *u, struct evd_err *err)
{
    enum evd_code rc = evd_dataset_reader_finish(u->reader, err);
    return rc == EVD_OK ? rewind_spool(u, err) : rc;
}

json_t *evd_dataset_upload_next(struct evd_dataset_upload *u, struct evd_err *err)
{
    const char *text = NULL;
    size_t len = 0;
    int n = next_case(u, &text, &len, err);
    if (n <= 0)
        return NULL;
    json_t *c = json_loadb(text, len, 0, NULL);
    if (c == NULL)
        evd_err_set(err, EVD_EINTERNAL, "could not read the upload back from its spool");
    return c;
}

bool evd_dataset_upload_fingerprint(struct evd_dataset_upload *u, char out[65])
{
    size_t len = 0;
    const char *text = evd_dataset_reader_text(u->reader, &len);
    if (text == NULL)
        return false;
    json_t *doc = json_loadb(text, len, JSON_DECODE_ANY, NULL);
    bool ok = doc != NULL && evd_canonical_sha256(doc, out) == 0;
    json_decref(doc);
    return ok;
}

size_t evd_dataset_upload_count(const struct evd_dataset_upload *u)
{
    return evd_dataset_reader_count(u->reader);
}

void evd_dataset_upload_free(struct evd_dataset_upload *u)
{
    if (u == NULL)
        return;
    evd_dataset_reader_free(u->reader);
    if (u->spool != NULL)
        fclose(u->spool);
    free(u->name);
    free(u->line);
    free(u);
}

enum evd_code evd_dataset_get(struct evd_engine *e, const char *id, json_t **dataset,
                              struct evd_err *err)
{
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    *dataset = evd_store_dataset_get(c, id, err);
    evd_db_release(e->opts.db, c);
    return *dataset != NULL ? EVD_OK : evd_db_code(err);
}

/* {<key>: items, next_cursor?}; steals items and next (malloc'd, may be NULL). */
static enum evd_code page_response(const char *key, json_t *items, char *next, json_t **response,
                                   struct evd_err *err)
{
    *response = json_object();
    if (*response == NULL || json_object_set_new(*response, key, items) != 0 ||
        (next != NULL && json_object_set_new(*response, "next_cursor", json_string(next)) != 0)) {
        if (*response == NULL)
            json_decref(items);
        json_decref(*response);
        *response = NULL;
        free(next);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    free(next);
    return EVD_OK;
}

enum evd_code evd_dataset_list(struct evd_engine *e, unsigned limit, const char *before,
                               json_t **response, struct evd_err *err)
{
    *response = NULL;
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    char *next = NULL;
    json_t *rows = evd_store_dataset_list(c, limit, before, &next, err);
    evd_db_release(e->opts.db, c);
    if (rows == NULL)
        return evd_db_code(err);
    return page_response("datasets", rows, next, response, err);
}

enum evd_code evd_dataset_cases(struct evd_engine *e, const char *id, unsigned limit,
                                const char *before, json_t **response, struct evd_err *err)
{
    *response = NULL;
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    char *next = NULL;
    json_t *rows = evd_store_dataset_cases(c, id, limit, before, &next, err);
    evd_db_release(e->opts.db, c);
    if (rows == NULL)
        return evd_db_code(err);
    return page_response("cases", rows, next, response, err);
}

enum evd_code evd_dataset_delete(struct evd_engine *e, const char *id, struct evd_err *err)
{
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    enum evd_code rc = evd_store_dataset_delete(c, id, err);
    evd_db_release(e->opts.db, c);
    return rc;
}
