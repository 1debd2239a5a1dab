/*
 * Keyset pagination shared by the store's list queries: newest first over
 * (created_at, id), with an opaque "<created_at>_<id>" cursor. A list query selects the
 * row as JSON text in column 0, then its created_at and id, and asks for one row more
 * than the page holds: `... WHERE $ts::bigint IS NULL OR (created_at, id) < ($ts, $id)
 * ORDER BY created_at DESC, id DESC LIMIT $lim::int + 1`. Pure over libpq results;
 * thread-safe.
 */
#ifndef EVD_STORE_PAGE_H
#define EVD_STORE_PAGE_H

#include <jansson.h>
#include <libpq-fe.h>

#include "common/err.h"

/* The text parameters of one page query; ts and id are NULL for the first page. */
struct evd_store_page {
    char lim_buf[16], ts_buf[32], id_buf[64];
    const char *lim, *ts, *id;
};

/* Fills *pg for `limit` rows after the cursor `before` (NULL: the first page). EVD_EINVAL
 * when `before` is not a cursor the store issued. */
enum evd_code evd_store_page_open(struct evd_store_page *pg, unsigned limit, const char *before,
                                  struct evd_err *err);

/*
 * The first `limit` rows of a page query's result as a new array of their column 0 (new
 * reference), and *next_cursor (malloc'd, else NULL) when the query found one row more.
 * NULL with *err set when out of memory.
 */
json_t *evd_store_page_rows(PGresult *r, unsigned limit, char **next_cursor, struct evd_err *err);

/*
 * A whole list query of the shape above whose only parameters are $1 limit, $2 cursor time
 * and $3 cursor id: runs it on c and returns its page as evd_store_page_rows does (new
 * reference, *next_cursor malloc'd when more remain), or NULL + err.
 */
json_t *evd_store_page_list(PGconn *c, const char *sql, unsigned limit, const char *before,
                            char **next_cursor, struct evd_err *err);

/*
 * An ascending page inside one parent (a dataset's cases, an experiment's cases or runs),
 * keyed by an integer: `sql` takes $1 the parent id, $2 the limit, $3 the last key read
 * (NULL: the first page) and $4 `extra` (may be NULL), and selects (row JSON text, key),
 * first a marker row (NULL, key below every other) when the parent exists, then at most
 * limit + 1 rows in key order. The cursor is "<key>_<parent id>", refused for another
 * parent. Returns the page (new reference, *next_cursor malloc'd when more remain), or NULL
 * + err: EVD_ENOTFOUND "<what> not found: <id>" without the marker row.
 */
json_t *evd_store_page_ascending(PGconn *c, const char *sql, const char *what, const char *id,
                                 const char *extra, unsigned limit, const char *before,
                                 char **next_cursor, struct evd_err *err);

#endif
