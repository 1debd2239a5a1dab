/*
 * See dataset.h. Three front ends (JSON document, JSONL lines, CSV rows through libcsv)
 * turn their input into one raw case object each and pass it to accept(), the single
 * place where a case is normalized, its id checked for uniqueness, counted, hashed and
 * handed to the sink. libcsv is used instead of a parser of our own: quoted fields with
 * embedded commas, quotes and line breaks, CRLF and a missing final newline are its job.
 */
#include "domain/dataset.h"

#include <csv.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"
#include "domain/canonical.h"

/* Room for "cases[<index>]", "line <n>" or "row <n>". */
#define WHERE_MAX 48

struct evd_dataset_reader {
    enum evd_dataset_format format;
    size_t max_cases;
    evd_dataset_sink sink;
    void *ctx;

    enum evd_code refused; /* EVD_OK until a refusal; then it and err_saved stick */
    struct evd_err err_saved;
    bool finished;

    size_t count;
    json_t *ids; /* set of ids seen: object whose keys are the ids (values null) */
    struct evd_sha256 sha;
    struct evd_buf canon; /* scratch for one case's canonical form */
    char sha_hex[65];
    char *name; /* JSON uploads: the body's name */

    struct evd_buf text; /* JSON: the whole document; JSONL: the current line */
    size_t line_no;      /* JSONL: physical lines completed */
    bool at_start;       /* nothing seen yet: a UTF-8 byte order mark is skipped */
    size_t bom_seen;     /* bytes of a possible BOM already matched */

    /* CSV */
    struct csv_parser csv;
    bool csv_ready;
    json_t *header; /* array of column names */
    json_t *row;    /* array of the current row's cells (strings) */
    size_t row_no;  /* data rows completed */
    bool header_done;
};

static enum evd_code refuse(struct evd_dataset_reader *r, enum evd_code code,
                            const struct evd_err *why, struct evd_err *err)
{
    r->refused = code;
    r->err_saved = *why;
    r->err_saved.code = code;
    if (err != NULL)
        *err = r->err_saved;
    return code;
}

static enum evd_code again(const struct evd_dataset_reader *r, struct evd_err *err)
{
    if (err != NULL)
        *err = r->err_saved;
    return r->refused;
}

/*
 * A case's conversation so far (../shared/spec/agent-cases.md): absent or null, or 1 to
 * EVD_DATASET_MESSAGES_MAX messages {role: "user" | "assistant", content: string}.
 */
static enum evd_code check_messages(const json_t *messages, const char *where,
                                    struct evd_err *err)
{
    static const char *const known[] = {"role", "content", NULL};
    if (messages == NULL || json_is_null(messages))
        return EVD_OK;
    if (!json_is_array(messages))
        return evd_err_set(err, EVD_EINVAL, "%s: messages must be an array", where);
    size_t n = json_array_size(messages);
    if (n == 0 || n > EVD_DATASET_MESSAGES_MAX)
        return evd_err_set(err, EVD_EINVAL, "%s: messages must hold between 1 and %d messages",
                           where, EVD_DATASET_MESSAGES_MAX);
    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(messages, i);
        if (!json_is_object(m))
            return evd_err_set(err, EVD_EINVAL, "%s: messages[%zu] must be an object", where, i);
        const char *unknown = evd_json_unknown_member(m, known);
        if (unknown != NULL)
            return evd_err_set(err, EVD_EINVAL, "%s: messages[%zu].%.100s is not a known field",
                               where, i, unknown);
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role == NULL || (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0))
            return evd_err_set(err, EVD_EINVAL, "%s: messages[%zu].role must be user or assistant",
                               where, i);
        if (!json_is_string(json_object_get(m, "content")))
            return evd_err_set(err, EVD_EINVAL, "%s: messages[%zu].content must be a string",
                               where, i);
    }
    return EVD_OK;
}

/*
 * Normalizes the raw case (borrowed) named `where` at 1-based position into a new object
 * of the four keys (and messages and tool_results when it has them), sharing (not copying)
 * the member values. EVD_OK with *out a new
 * reference, or the refusal.
 */
static enum evd_code normalize(const json_t *raw, const char *where, size_t position, json_t **out,
                               struct evd_err *err)
{
    static const char *const known[] = {"id",       "vars",     "expected", "metadata",
                                        "messages", "tool_results", NULL};
    *out = NULL;
    if (!json_is_object(raw))
        return evd_err_set(err, EVD_EINVAL, "%s: a case must be a JSON object", where);
    const char *unknown = evd_json_unknown_member(raw, known);
    if (unknown != NULL)
        return evd_err_set(err, EVD_EINVAL, "%s: %.100s is not a known field", where, unknown);

    json_t *id = json_object_get(raw, "id");
    json_t *vars = json_object_get(raw, "vars");
    json_t *expected = json_object_get(raw, "expected");
    json_t *metadata = json_object_get(raw, "metadata");
    json_t *id_value = NULL;
    if (id == NULL || json_is_null(id)) {
        char dflt[32];
        snprintf(dflt, sizeof(dflt), "c%zu", position);
        id_value = json_string(dflt);
    } else if (!json_is_string(id)) {
        return evd_err_set(err, EVD_EINVAL, "%s: id must be a string", where);
    } else if (json_string_length(id) == 0) {
        return evd_err_set(err, EVD_EINVAL, "%s: id cannot be empty", where);
    } else if (json_string_length(id) > EVD_DATASET_ID_MAX) {
        return evd_err_set(err, EVD_EINVAL, "%s: id must be at most %d bytes", where,
                           EVD_DATASET_ID_MAX);
    } else {
        id_value = json_incref(id);
    }
    if (vars != NULL && !json_is_null(vars) && !json_is_object(vars)) {
        json_decref(id_value);
        return evd_err_set(err, EVD_EINVAL, "%s: vars must be an object", where);
    }
    if (json_is_object(vars) && json_object_get(vars, "expected") != NULL) {
        json_decref(id_value);
        return evd_err_set(err, EVD_EINVAL, "%s: vars.expected is reserved; use the expected field",
                           where);
    }
    if (metadata != NULL && !json_is_null(metadata) && !json_is_object(metadata)) {
        json_decref(id_value);
        return evd_err_set(err, EVD_EINVAL, "%s: metadata must be an object", where);
    }
    json_t *messages = json_object_get(raw, "messages");
    json_t *tool_results = json_object_get(raw, "tool_results");
    enum evd_code mrc = check_messages(messages, where, err);
    if (mrc == EVD_OK && tool_results != NULL && !json_is_null(tool_results) &&
        !json_is_object(tool_results))
        mrc = evd_err_set(err, EVD_EINVAL, "%s: tool_results must be an object", where);
    if (mrc != EVD_OK) {
        json_decref(id_value);
        return mrc;
    }

    json_t *c = json_object();
    if (c == NULL || id_value == NULL || json_object_set_new(c, "id", id_value) != 0 ||
        json_object_set_new(c, "vars", json_is_object(vars) ? json_incref(vars) : json_object()) !=
            0 ||
        json_object_set_new(c, "expected",
                            expected != NULL ? json_incref(expected) : json_null()) != 0 ||
        json_object_set_new(
            c, "metadata", json_is_object(metadata) ? json_incref(metadata) : json_object()) != 0 ||
        (json_is_array(messages) && json_object_set(c, "messages", messages) != 0) ||
        (json_is_object(tool_results) && json_object_set(c, "tool_results", tool_results) != 0)) {
        if (c == NULL)
            json_decref(id_value);
        json_decref(c);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    *out = c;
    return EVD_OK;
}

/* Takes one raw case (borrowed) through normalization, the id set, the count, the hash and the
 * sink. */
static enum evd_code accept(struct evd_dataset_reader *r, const json_t *raw, const char *where,
                            struct evd_err *err)
{
    struct evd_err why = {0};
    enum evd_code rc;
    json_t *c = NULL;
    if (r->count >= r->max_cases) {
        evd_err_set(&why, EVD_EINVAL, "cases must contain between 1 and %zu cases", r->max_cases);
        return refuse(r, EVD_EINVAL, &why, err);
    }
    size_t position = r->count + 1;
    rc = normalize(raw, where, position, &c, &why);
    if (rc != EVD_OK)
        return refuse(r, rc, &why, err);

    json_t *id = json_object_get(c, "id");
    const char *idtext = json_string_value(id);
    size_t idlen = json_string_length(id);
    if (json_object_getn(r->ids, idtext, idlen) != NULL) {
        evd_err_set(&why, EVD_EINVAL, "%s: duplicate id %.*s", where,
                    (int)(idlen > 200 ? 200 : idlen), idtext);
        rc = refuse(r, EVD_EINVAL, &why, err);
        goto out;
    }
    if (json_object_setn_new_nocheck(r->ids, idtext, idlen, json_null()) != 0) {
        evd_err_set(&why, EVD_ENOMEM, "out of memory");
        rc = refuse(r, EVD_ENOMEM, &why, err);
        goto out;
    }

    r->canon.len = 0;
    if (evd_buf_append(&r->canon, position == 1 ? "[" : ",", 1) != 0 ||
        evd_canonical_append(&r->canon, c) != 0) {
        evd_err_set(&why, EVD_ENOMEM, "out of memory");
        rc = refuse(r, EVD_ENOMEM, &why, err);
        goto out;
    }
    evd_sha256_update(&r->sha, r->canon.data, r->canon.len);
    r->count = position;

    if (r->sink != NULL) {
        rc = r->sink(r->ctx, position, c, &why);
        if (rc != EVD_OK)
            rc = refuse(r, rc, &why, err);
    }
out:
    json_decref(c);
    return rc;
}

/* ---- JSONL -------------------------------------------------------------------------- */

static enum evd_code jsonl_line(struct evd_dataset_reader *r, struct evd_err *err)
{
    char where[WHERE_MAX];
    struct evd_err why = {0};
    r->line_no++;
    const char *p = r->text.data != NULL ? r->text.data : "";
    size_t n = r->text.len;
    if (n > 0 && p[n - 1] == '\r')
        n--;
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    enum evd_code rc = EVD_OK;
    if (i < n) {
        snprintf(where, sizeof(where), "line %zu", r->line_no);
        json_error_t jerr;
        json_t *raw = json_loadb(p, n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
        if (raw == NULL) {
            evd_err_set(&why, EVD_EINVAL, "%s: malformed JSON: %s at column %d", where, jerr.text,
                        jerr.column);
            rc = refuse(r, EVD_EINVAL, &why, err);
        } else {
            rc = accept(r, raw, where, err);
            json_decref(raw);
        }
    }
    r->text.len = 0;
    return rc;
}

static enum evd_code jsonl_feed(struct evd_dataset_reader *r, const char *p, size_t len,
                                struct evd_err *err)
{
    struct evd_err why = {0};
    while (len > 0) {
        const char *nl = memchr(p, '\n', len);
        size_t take = nl != NULL ? (size_t)(nl - p) : len;
        if (evd_buf_append(&r->text, p, take) != 0) {
            evd_err_set(&why, EVD_ENOMEM, "out of memory");
            return refuse(r, EVD_ENOMEM, &why, err);
        }
        if (nl == NULL)
            break;
        enum evd_code rc = jsonl_line(r, err);
        if (rc != EVD_OK)
            return rc;
        p += take + 1;
        len -= take + 1;
    }
    return EVD_OK;
}

/* ---- CSV ---------------------------------------------------------------------------- */

/* libcsv trims spaces and tabs around unquoted fields by default; a cell is kept as sent. */
static int csv_no_space(unsigned char c)
{
    (void)c;
    return 0;
}

static void csv_cell(void *s, size_t len, void *cls)
{
    struct evd_dataset_reader *r = cls;
    if (r->refused != EVD_OK)
        return;
    json_t *cell = json_stringn_nocheck(s != NULL ? s : "", len);
    if (cell == NULL || json_array_append_new(r->row, cell) != 0) {
        struct evd_err why = {0};
        evd_err_set(&why, EVD_ENOMEM, "out of memory");
        refuse(r, EVD_ENOMEM, &why, NULL);
    }
}

static bool valid_utf8(const char *s, size_t len)
{
    json_t *v = json_stringn(s, len);
    bool ok = v != NULL;
    json_decref(v);
    return ok;
}

static void csv_header(struct evd_dataset_reader *r)
{
    struct evd_err why = {0};
    size_t n = json_array_size(r->row);
    for (size_t i = 0; i < n; i++) {
        json_t *name = json_array_get(r->row, i);
        const char *s = json_string_value(name);
        size_t len = json_string_length(name);
        if (len == 0) {
            evd_err_set(&why, EVD_EINVAL, "header: column %zu has no name", i + 1);
            goto refused;
        }
        if (!valid_utf8(s, len) || memchr(s, '\0', len) != NULL) {
            evd_err_set(&why, EVD_EINVAL, "header: column %zu is not valid UTF-8 text", i + 1);
            goto refused;
        }
        for (size_t j = 0; j < i; j++) {
            json_t *other = json_array_get(r->row, j);
            if (json_string_length(other) == len && memcmp(json_string_value(other), s, len) == 0) {
                evd_err_set(&why, EVD_EINVAL, "header: duplicate column %.100s", s);
                goto refused;
            }
        }
    }
    r->header = r->row;
    r->row = json_array();
    r->header_done = true;
    if (r->row == NULL) {
        evd_err_set(&why, EVD_ENOMEM, "out of memory");
        goto refused;
    }
    return;
refused:
    refuse(r, why.code, &why, NULL);
}

static void csv_data_row(struct evd_dataset_reader *r)
{
    char where[WHERE_MAX];
    struct evd_err why = {0};
    r->row_no++;
    snprintf(where, sizeof(where), "row %zu", r->row_no);
    size_t ncols = json_array_size(r->header);
    size_t n = json_array_size(r->row);
    json_t *raw = NULL, *vars = NULL;
    if (n != ncols) {
        evd_err_set(&why, EVD_EINVAL, "%s: expected %zu fields, found %zu", where, ncols, n);
        goto refused;
    }
    raw = json_object();
    vars = json_object();
    if (raw == NULL || vars == NULL) {
        evd_err_set(&why, EVD_ENOMEM, "out of memory");
        goto refused;
    }
    for (size_t i = 0; i < n; i++) {
        const char *col = json_string_value(json_array_get(r->header, i));
        json_t *cell = json_array_get(r->row, i);
        const char *s = json_string_value(cell);
        size_t len = json_string_length(cell);
        if (!valid_utf8(s, len) || memchr(s, '\0', len) != NULL) {
            evd_err_set(&why, EVD_EINVAL, "%s: column %.100s is not valid UTF-8 text", where, col);
            goto refused;
        }
        int rc;
        if (strcmp(col, "id") == 0)
            rc = len == 0 ? 0 : json_object_set(raw, "id", cell); /* empty: the default id */
        else if (strcmp(col, "expected") == 0)
            rc = json_object_set(raw, "expected", cell);
        else if (strcmp(col, "messages") == 0 || strcmp(col, "tool_results") == 0) {
            /* JSON text; an empty cell: the case has none */
            json_error_t jerr;
            json_t *v = len == 0 ? NULL : json_loadb(s, len, JSON_DECODE_ANY, &jerr);
            if (len > 0 && v == NULL) {
                evd_err_set(&why, EVD_EINVAL, "%s: %s is not valid JSON: %.120s", where, col,
                            jerr.text);
                goto refused;
            }
            rc = v != NULL ? json_object_set_new(raw, col, v) : 0;
        } else
            rc = json_object_set(vars, col, cell);
        if (rc != 0) {
            evd_err_set(&why, EVD_ENOMEM, "out of memory");
            goto refused;
        }
    }
    if (json_object_set_new(raw, "vars", vars) != 0) {
        vars = NULL;
        evd_err_set(&why, EVD_ENOMEM, "out of memory");
        goto refused;
    }
    vars = NULL;
    accept(r, raw, where, NULL);
    json_decref(raw);
    json_array_clear(r->row);
    return;
refused:
    json_decref(raw);
    json_decref(vars);
    refuse(r, why.code, &why, NULL);
}

static void csv_row(int term, void *cls)
{
    (void)term;
    struct evd_dataset_reader *r = cls;
    if (r->refused != EVD_OK)
        return;
    if (!r->header_done)
        csv_header(r);
    else
        csv_data_row(r);
}

static enum evd_code csv_failed(struct evd_dataset_reader *r, struct evd_err *err)
{
    struct evd_err why = {0};
    int e = csv_error(&r->csv);
    if (e == CSV_ENOMEM || e == CSV_ETOOBIG) {
        evd_err_set(&why, EVD_ENOMEM, "out of memory");
        return refuse(r, EVD_ENOMEM, &why, err);
    }
    if (!r->header_done)
        evd_err_set(&why, EVD_EINVAL,
                    "header: malformed CSV (a quote inside an unquoted field, "
                    "or a quoted field that does not end)");
    else
        evd_err_set(&why, EVD_EINVAL,
                    "row %zu: malformed CSV (a quote inside an unquoted field, or a quoted field "
                    "that does not end)",
                    r->row_no + 1);
    return refuse(r, EVD_EINVAL, &why, err);
}

static enum evd_code csv_feed(struct evd_dataset_reader *r, const char *p, size_t len,
                              struct evd_err *err)
{
    if (csv_parse(&r->csv, p, len, csv_cell, csv_row, r) != len && r->refused == EVD_OK)
        return csv_failed(r, err);
    return r->refused != EVD_OK ? again(r, err) : EVD_OK;
}

/* ---- the reader --------------------------------------------------------------------- */

struct evd_dataset_reader *evd_dataset_reader_new(enum evd_dataset_format f, size_t max_cases,
                                                  evd_dataset_sink sink, void *ctx)
{
    struct evd_dataset_reader *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->format = f;
    r->max_cases = max_cases;
    r->sink = sink;
    r->ctx = ctx;
    r->at_start = true;
    r->ids = json_object();
    if (r->ids == NULL || evd_sha256_init(&r->sha) != 0)
        goto fail;
    if (f == EVD_DATASET_CSV) {
        if (csv_init(&r->csv, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0)
            goto fail;
        r->csv_ready = true;
        csv_set_space_func(&r->csv, csv_no_space);
        r->row = json_array();
        if (r->row == NULL)
            goto fail;
    }
    return r;
fail:
    evd_dataset_reader_free(r);
    return NULL;
}

/* Skips a leading UTF-8 byte order mark, even when it arrives split over feeds. */
static void skip_bom(struct evd_dataset_reader *r, const char **p, size_t *len)
{
    static const char bom[3] = {'\xEF', '\xBB', '\xBF'};
    while (r->at_start && *len > 0) {
        if ((*p)[0] != bom[r->bom_seen]) {
            /* Not a BOM after all: give back what was taken for one. */
            r->at_start = false;
            if (r->bom_seen > 0) {
                size_t seen = r->bom_seen;
                r->bom_seen = 0;
                struct evd_err ignored;
                evd_dataset_reader_feed(r, bom, seen, &ignored);
            }
            return;
        }
        r->bom_seen++;
        (*p)++;
        (*len)--;
        if (r->bom_seen == sizeof(bom)) {
            r->at_start = false;
            r->bom_seen = 0;
        }
    }
}

enum evd_code evd_dataset_reader_feed(struct evd_dataset_reader *r, const void *data, size_t len,
                                      struct evd_err *err)
{
    if (r->refused != EVD_OK)
        return again(r, err);
    const char *p = data;
    skip_bom(r, &p, &len);
    if (r->refused != EVD_OK)
        return again(r, err);
    if (len == 0)
        return EVD_OK;
    switch (r->format) {
    case EVD_DATASET_JSON:
        if (evd_buf_append(&r->text, p, len) != 0) {
            struct evd_err why = {0};
            evd_err_set(&why, EVD_ENOMEM, "out of memory");
            return refuse(r, EVD_ENOMEM, &why, err);
        }
        return EVD_OK;
    case EVD_DATASET_JSONL:
        return jsonl_feed(r, p, len, err);
    case EVD_DATASET_CSV:
        return csv_feed(r, p, len, err);
    case EVD_DATASET_CASES:
        return evd_err_set(err, EVD_EINTERNAL, "a reader of cases takes no bytes");
    }
    return EVD_OK;
}

enum evd_code evd_dataset_reader_case(struct evd_dataset_reader *r, const json_t *raw,
                                      size_t index, struct evd_err *err)
{
    if (r->refused != EVD_OK)
        return again(r, err);
    if (r->format != EVD_DATASET_CASES)
        return evd_err_set(err, EVD_EINTERNAL, "this reader takes bytes, not cases");
    char where[WHERE_MAX];
    snprintf(where, sizeof(where), "cases[%zu]", index);
    return accept(r, raw, where, err);
}

/* Every element of a JSON cases array (borrowed), named cases[i]. */
static enum evd_code accept_array(struct evd_dataset_reader *r, const json_t *cases,
                                  struct evd_err *err)
{
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c)
    {
        char where[WHERE_MAX];
        snprintf(where, sizeof(where), "cases[%zu]", i);
        enum evd_code rc = accept(r, c, where, err);
        if (rc != EVD_OK)
            return rc;
    }
    return EVD_OK;
}

/* The end of every reader: at least one case, then the hash of the array is final. */
static enum evd_code seal(struct evd_dataset_reader *r, struct evd_err *err)
{
    if (r->count == 0) {
        struct evd_err why = {0};
        evd_err_set(&why, EVD_EINVAL, "cases must contain between 1 and %zu cases", r->max_cases);
        return refuse(r, EVD_EINVAL, &why, err);
    }
    evd_sha256_update(&r->sha, "]", 1);
    evd_sha256_final_hex(&r->sha, r->sha_hex);
    r->finished = true;
    return EVD_OK;
}

static enum evd_code json_document(struct evd_dataset_reader *r, struct evd_err *err)
{
    static const char *const known[] = {"name", "cases", NULL};
    struct evd_err why = {0};
    json_error_t jerr;
    json_t *doc = json_loadb(r->text.data != NULL ? r->text.data : "", r->text.len,
                             JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    evd_buf_free(&r->text); /* the document is now the tree; do not hold both */
    enum evd_code rc = EVD_OK;
    if (doc == NULL) {
        evd_err_set(&why, EVD_EINVAL, "malformed JSON: %s at line %d column %d", jerr.text,
                    jerr.line, jerr.column);
        return refuse(r, EVD_EINVAL, &why, err);
    }
    if (!json_is_object(doc)) {
        evd_err_set(&why, EVD_EINVAL, "request body must be a JSON object");
        rc = refuse(r, EVD_EINVAL, &why, err);
        goto out;
    }
    const char *unknown = evd_json_unknown_member(doc, known);
    if (unknown != NULL) {
        evd_err_set(&why, EVD_EINVAL, "%.100s is not a known field", unknown);
        rc = refuse(r, EVD_EINVAL, &why, err);
        goto out;
    }
    json_t *name = json_object_get(doc, "name");
    if (!json_is_string(name)) {
        evd_err_set(&why, EVD_EINVAL, name == NULL ? "name is required" : "name must be a string");
        rc = refuse(r, EVD_EINVAL, &why, err);
        goto out;
    }
    rc = evd_dataset_check_name(json_string_value(name), json_string_length(name), &why);
    if (rc != EVD_OK) {
        rc = refuse(r, rc, &why, err);
        goto out;
    }
    r->name = strdup(json_string_value(name));
    if (r->name == NULL) {
        evd_err_set(&why, EVD_ENOMEM, "out of memory");
        rc = refuse(r, EVD_ENOMEM, &why, err);
        goto out;
    }
    json_t *cases = json_object_get(doc, "cases");
    if (!json_is_array(cases)) {
        evd_err_set(&why, EVD_EINVAL,
                    cases == NULL ? "cases is required" : "cases must be an array");
        rc = refuse(r, EVD_EINVAL, &why, err);
        goto out;
    }
    rc = accept_array(r, cases, err);
out:
    json_decref(doc);
    return rc;
}

enum evd_code evd_dataset_reader_finish(struct evd_dataset_reader *r, struct evd_err *err)
{
    if (r->refused != EVD_OK)
        return again(r, err);
    if (r->finished)
        return EVD_OK;
    enum evd_code rc = EVD_OK;
    if (r->at_start && r->bom_seen > 0) {
        /* The body was a lone prefix of a BOM: not a BOM, so it is data. */
        static const char bom[3] = {'\xEF', '\xBB', '\xBF'};
        size_t seen = r->bom_seen;
        r->at_start = false;
        r->bom_seen = 0;
        rc = evd_dataset_reader_feed(r, bom, seen, err);
        if (rc != EVD_OK)
            return rc;
    }
    switch (r->format) {
    case EVD_DATASET_JSON:
        rc = json_document(r, err);
        break;
    case EVD_DATASET_JSONL:
        if (r->text.len > 0)
            rc = jsonl_line(r, err);
        break;
    case EVD_DATASET_CSV:
        if (csv_fini(&r->csv, csv_cell, csv_row, r) != 0 && r->refused == EVD_OK)
            return csv_failed(r, err);
        if (r->refused != EVD_OK)
            return again(r, err);
        break;
    case EVD_DATASET_CASES:
        break;
    }
    if (rc != EVD_OK)
        return rc;
    return seal(r, err);
}

const char *evd_dataset_reader_text(const struct evd_dataset_reader *r, size_t *len)
{
    *len = 0;
    if (r->format != EVD_DATASET_JSON || r->finished || r->refused != EVD_OK)
        return NULL;
    *len = r->text.len;
    return r->text.data != NULL ? r->text.data : "";
}

size_t evd_dataset_reader_count(const struct evd_dataset_reader *r)
{
    return r->count;
}

const char *evd_dataset_reader_sha256(const struct evd_dataset_reader *r)
{
    return r->finished ? r->sha_hex : NULL;
}

const char *evd_dataset_reader_name(const struct evd_dataset_reader *r)
{
    return r->finished ? r->name : NULL;
}

void evd_dataset_reader_free(struct evd_dataset_reader *r)
{
    if (r == NULL)
        return;
    if (r->csv_ready)
        csv_free(&r->csv);
    json_decref(r->header);
    json_decref(r->row);
    json_decref(r->ids);
    evd_sha256_free(&r->sha);
    evd_buf_free(&r->canon);
    evd_buf_free(&r->text);
    free(r->name);
    free(r);
}

enum evd_code evd_dataset_check_name(const char *name, size_t len, struct evd_err *err)
{
    if (name == NULL || len == 0 || len > EVD_DATASET_NAME_MAX || memchr(name, '\0', len) != NULL ||
        !valid_utf8(name, len))
        return evd_err_set(err, EVD_EINVAL, "name must be a non-empty string of at most %d bytes",
                           EVD_DATASET_NAME_MAX);
    return EVD_OK;
}

enum evd_code evd_dataset_normalize_cases(const json_t *cases, size_t max_cases,
                                          evd_dataset_sink sink, void *ctx, size_t *count,
                                          char sha[65], struct evd_err *err)
{
    if (!json_is_array(cases))
        return evd_err_set(err, EVD_EINVAL, "cases must be an array");
    struct evd_dataset_reader *r = evd_dataset_reader_new(EVD_DATASET_JSON, max_cases, sink, ctx);
    if (r == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    enum evd_code rc = accept_array(r, cases, err);
    if (rc == EVD_OK)
        rc = seal(r, err);
    if (rc == EVD_OK) {
        memcpy(sha, r->sha_hex, 65);
        *count = r->count;
    }
    evd_dataset_reader_free(r);
    return rc;
}
