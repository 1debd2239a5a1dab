/*
 * PostgreSQL access: a small connection pool for HTTP handlers, dedicated
 * connections for worker threads, parameterized queries, transactions and the
 * one place where a SQLSTATE becomes an evd_code.
 *
 * Thread-safety: the pool is safe to share; a PGconn is used by one thread at a
 * time (the one that acquired or opened it). A pool connection whose server went
 * away (a restart, even an immediate one) is found dead before a statement is sent on
 * it and reconnected; a statement that fails because its connection died runs once
 * more on a new one when that is safe (BEGIN or a read, outside a transaction). So
 * the service recovers from a database restart without restarting itself and without
 * failing requests once the database answers again. The connection string may hold a password: it is
 * never logged.
 */
#ifndef EVD_STORE_DB_H
#define EVD_STORE_DB_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdint.h>
#include <stdbool.h>

#include "common/err.h"

struct evd_db;

/* Creates a pool of `size` connections opened lazily. NULL + err on bad arguments. */
struct evd_db *evd_db_open(const char *conninfo, int size, struct evd_err *err);
/* Closes every connection; no connection may still be acquired. */
void evd_db_close(struct evd_db *db);
/* The connection string (borrowed). */
const char *evd_db_conninfo(const struct evd_db *db);

/* Borrows a healthy connection, waiting up to 5 s for one to be free. NULL + err
 * (EVD_EDB "could not connect to the database") when none can be had. */
PGconn *evd_db_acquire(struct evd_db *db, struct evd_err *err);
/* Returns a connection; an open transaction is rolled back first. */
void evd_db_release(struct evd_db *db, PGconn *conn);
/* Pool figures for /metrics. */
void evd_db_stats(struct evd_db *db, int *size, int *in_use, int *open);

/* What the server allows: max_connections, the slots reserved for superusers and roles
 * with pg_use_reserved_connections (superuser_reserved_connections + reserved_connections
 * where the server has it), and the client connections open now, the one asking
 * excluded. */
struct evd_db_capacity {
    long max_connections;
    long reserved;
    long in_use;
};
/* Asks the server on a connection of its own, closed before it returns. */
enum evd_code evd_db_capacity(const char *conninfo, struct evd_db_capacity *cap,
                              struct evd_err *err);

/* Opens a dedicated connection (worker threads); NULL + err on failure. */
PGconn *evd_db_connect(const char *conninfo, struct evd_err *err);
/* Closes a dedicated connection (NULL-safe). */
void evd_db_finish(PGconn *conn);
/* True when a transaction is open on conn and has not failed. */
bool evd_db_in_transaction(PGconn *conn);
/* Resets `*conn` when its server went away (also when the connection has not yet noticed:
 * an idle connection with its end of file waiting); returns true when it is usable. */
bool evd_db_ensure(PGconn *conn);

/*
 * Runs a parameterized statement (text parameters; NULL = SQL NULL). Returns the
 * result when it succeeded (the caller PQclear()s it), or NULL + err with the
 * SQLSTATE mapped: 23505 → EVD_ECONFLICT, connection failures → EVD_EDB,
 * others → EVD_EDB with "database error: <message>". On a pool connection outside a
 * transaction, a dead connection is reconnected first, and a read (a SELECT or WITH that
 * calls no evald_ function, writes nothing and notifies no one) or BEGIN that failed
 * because the connection died runs once more. A statement with parameters is
 * prepared on the connection at its first use and executed by name afterwards (it
 * must then be a single statement); one without may hold several.
 */
PGresult *evd_db_query(PGconn *conn, const char *sql, int nparams, const char *const *params,
                       struct evd_err *err);
/* Runs a statement and discards its result. */
enum evd_code evd_db_exec(PGconn *conn, const char *sql, int nparams,
                          const char *const *params, struct evd_err *err);

/* Column readers for result rows: JSON (new reference; NULL for SQL NULL or text that is
 * not JSON) and int64 (0 for SQL NULL). */
json_t *evd_db_col_json(PGresult *r, int row, int col);
/* The one row that `sql` (whose $1 is `id`) selects, FOR UPDATE when `lock`: a result the
 * caller clears, or NULL + err (EVD_ENOTFOUND "<what> not found: <id>" without a row). */
PGresult *evd_db_get_row(PGconn *conn, const char *sql, bool lock, const char *id,
                         const char *what, struct evd_err *err);
int64_t evd_db_col_i64(PGresult *r, int row, int col);
/* Row `row` of r as an object of its JSON columns, named by names[0..n-1] in column order,
 * SQL NULLs left out (new reference); NULL + err (EVD_ENOMEM) without memory. */
json_t *evd_db_row_json_object(PGresult *r, int row, const char *const *names, int n,
                               struct evd_err *err);
/* The code a failed store call returns: err's code, or EVD_EDB when none was set. */
enum evd_code evd_db_code(const struct evd_err *err);

enum evd_code evd_db_begin(PGconn *conn, struct evd_err *err);
enum evd_code evd_db_commit(PGconn *conn, struct evd_err *err);
/* Rolls back when a transaction is open; never fails loudly. */
void evd_db_rollback(PGconn *conn);
/* Inside a transaction: marks the point that evd_db_rollback_to_mark undoes back to (what
 * came after it, also a failed statement, and nothing before it). */
enum evd_code evd_db_mark(PGconn *conn, struct evd_err *err);
enum evd_code evd_db_rollback_to_mark(PGconn *conn, struct evd_err *err);

/* Applies the embedded migrations under an advisory lock; see migrate.c. */
enum evd_code evd_db_migrate(const char *conninfo, struct evd_err *err);
/* True when the database answers and every embedded migration is applied. */
enum evd_code evd_db_ready(struct evd_db *db, struct evd_err *err);
/* EVD_EINTERNAL when two embedded migrations share a version or are out of order. */
enum evd_code evd_db_check_migrations(struct evd_err *err);
/* Number of migrations embedded in this binary. */
int evd_db_migration_count(void);

#endif
