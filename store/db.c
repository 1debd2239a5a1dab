/*
 * Connection pool and query helpers; see db.h. Lock order: pool->mu and prep_mu are
 * leaf locks, never held across a query or a connect.
 */
#include "store/db.h"

#include <ctype.h>
#include <libpq-events.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"

struct slot {
    PGconn *conn;
    bool busy;
};

struct evd_db {
    char *conninfo;
    int size;
    struct slot *slots;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

struct evd_db *evd_db_open(const char *conninfo, int size, struct evd_err *err)
{
    if (conninfo == NULL || *conninfo == '\0' || size < 1) {
        evd_err_set(err, EVD_EINVAL, "EVALD_DATABASE_URL must be set");
        return NULL;
    }
    struct evd_db *db = calloc(1, sizeof(*db));
    if (db == NULL)
        goto nomem;
    db->conninfo = strdup(conninfo);
    db->slots = calloc((size_t)size, sizeof(*db->slots));
    if (db->conninfo == NULL || db->slots == NULL)
        goto nomem;
    db->size = size;
    pthread_mutex_init(&db->mu, NULL);
    pthread_cond_init(&db->cv, NULL);
    return db;
nomem:
    if (db) {
        free(db->conninfo);
        free(db->slots);
        free(db);
    }
    evd_err_set(err, EVD_ENOMEM, "out of memory");
    return NULL;
}

void evd_db_close(struct evd_db *db)
{
    if (db == NULL)
        return;
    for (int i = 0; i < db->size; i++)
        if (db->slots[i].conn)
            PQfinish(db->slots[i].conn);
    pthread_mutex_destroy(&db->mu);
    pthread_cond_destroy(&db->cv);
    free(db->slots);
    free(db->conninfo);
    free(db);
}

const char *evd_db_conninfo(const struct evd_db *db)
{
    return db->conninfo;
}

PGconn *evd_db_connect(const char *conninfo, struct evd_err *err)
{
    PGconn *c = PQconnectdb(conninfo);
    if (c != NULL) /* notices become log lines, not plain text on stderr */
        PQsetNoticeProcessor(c, evd_log_pq_notice, NULL);
    if (c == NULL || PQstatus(c) != CONNECTION_OK) {
        /* libpq's message may echo the host but never the password. */
        const char *m = c ? PQerrorMessage(c) : "out of memory";
        char first[200];
        snprintf(first, sizeof(first), "%s", m);
        char *nl = strchr(first, '\n');
        if (nl)
            *nl = '\0';
        evd_err_set(err, EVD_EDB, "could not connect to the database: %s", first);
        PQfinish(c);
        return NULL;
    }
    /* Quiet NOTICEs (e.g. "relation already exists, skipping"). */
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    return c;
}

static const char SQL_CAPACITY[] =
    "SELECT current_setting('max_connections')::bigint,"
    " current_setting('superuser_reserved_connections')::bigint"
    "  + coalesce(current_setting('reserved_connections', true)::bigint, 0),"
    " (SELECT count(*) FROM pg_stat_activity"
    "   WHERE backend_type = 'client backend' AND pid <> pg_backend_pid())";

enum evd_code evd_db_capacity(const char *conninfo, struct evd_db_capacity *cap,
                              struct evd_err *err)
{
    enum evd_code rc = EVD_EDB;
    PGresult *r = NULL;
    PGconn *c = evd_db_connect(conninfo, err);
    if (c == NULL)
        goto out;
    if ((r = evd_db_query(c, SQL_CAPACITY, 0, NULL, err)) == NULL)
        goto out;
    if (PQntuples(r) != 1 || PQnfields(r) != 3) {
        evd_err_set(err, EVD_EDB, "database error: unexpected answer to the capacity query");
        goto out;
    }
    cap->max_connections = strtol(PQgetvalue(r, 0, 0), NULL, 10);
    cap->reserved = strtol(PQgetvalue(r, 0, 1), NULL, 10);
    cap->in_use = strtol(PQgetvalue(r, 0, 2), NULL, 10);
    rc = EVD_OK;
out:
    PQclear(r);
    PQfinish(c);
    return rc;
}

/*
 * Stale connections. A server that restarted closed every connection it had, but libpq
 * learns it only at the next statement, which then fails. An idle connection has nothing
 * to read, so a socket that is readable holds a notification, a notice, or the server's
 * goodbye and end of file: reading it tells which, without sending anything.
 */
static bool alive(PGconn *conn)
{
    if (PQstatus(conn) != CONNECTION_OK)
        return false;
    struct pollfd pfd = {.fd = PQsocket(conn), .events = POLLIN};
    if (pfd.fd < 0)
        return false;
    if (poll(&pfd, 1, 0) <= 0)
        return true; /* nothing to read (or poll failed: the statement will tell) */
    return PQconsumeInput(conn) && PQstatus(conn) == CONNECTION_OK;
}

void evd_db_finish(PGconn *conn)
{
    PQfinish(conn);
}

bool evd_db_in_transaction(PGconn *conn)
{
    return PQtransactionStatus(conn) == PQTRANS_INTRANS;
}

bool evd_db_ensure(PGconn *conn)
{
    if (alive(conn))
        return true;
    PQreset(conn);
    return PQstatus(conn) == CONNECTION_OK;
}

/*
 * Pool connections carry a libpq event procedure, whose only role is to mark them: a
 * statement on one that finds it dead may reconnect it and run again (evd_db_query). A
 * dedicated connection (a worker's, a LISTENing one) is never reconnected behind its
 * owner's back: its owner re-arms what a new session lacks.
 */
static int pool_mark(PGEventId id, void *info, void *pass)
{
    (void)id, (void)info, (void)pass;
    return 1;
}

static bool pooled(const PGconn *conn)
{
    return PQinstanceData(conn, pool_mark) != NULL;
}

PGconn *evd_db_acquire(struct evd_db *db, struct evd_err *err)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    int idx = -1;
    pthread_mutex_lock(&db->mu);
    for (;;) {
        /* Prefer a free slot that already has a connection. */
        for (int i = 0; i < db->size && idx < 0; i++)
            if (!db->slots[i].busy && db->slots[i].conn != NULL)
                idx = i;
        for (int i = 0; i < db->size && idx < 0; i++)
            if (!db->slots[i].busy)
                idx = i;
        if (idx >= 0)
            break;
        if (pthread_cond_timedwait(&db->cv, &db->mu, &deadline) != 0) {
            pthread_mutex_unlock(&db->mu);
            evd_err_set(err, EVD_EUNAVAIL, "no database connection became free within 5 s");
            return NULL;
        }
    }
    db->slots[idx].busy = true;
    PGconn *c = db->slots[idx].conn;
    pthread_mutex_unlock(&db->mu);

    if (c != NULL && !evd_db_ensure(c)) {
        PQfinish(c);
        c = NULL;
    }
    if (c == NULL && (c = evd_db_connect(db->conninfo, err)) != NULL &&
        (!PQregisterEventProc(c, pool_mark, "evald pool", NULL) ||
         !PQsetInstanceData(c, pool_mark, db))) {
        PQfinish(c);
        c = NULL;
        evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    pthread_mutex_lock(&db->mu);
    db->slots[idx].conn = c;
    if (c == NULL) {
        db->slots[idx].busy = false;
        pthread_cond_signal(&db->cv);
    }
    pthread_mutex_unlock(&db->mu);
    return c;
}

void evd_db_release(struct evd_db *db, PGconn *conn)
{
    if (conn == NULL)
        return;
    if (PQstatus(conn) == CONNECTION_OK && PQtransactionStatus(conn) != PQTRANS_IDLE)
        evd_db_rollback(conn);
    pthread_mutex_lock(&db->mu);
    for (int i = 0; i < db->size; i++)
        if (db->slots[i].conn == conn) {
            db->slots[i].busy = false;
            break;
        }
    pthread_cond_signal(&db->cv);
    pthread_mutex_unlock(&db->mu);
}

void evd_db_stats(struct evd_db *db, int *size, int *in_use, int *open)
{
    pthread_mutex_lock(&db->mu);
    *size = db->size;
    *in_use = *open = 0;
    for (int i = 0; i < db->size; i++) {
        *in_use += db->slots[i].busy;
        *open += db->slots[i].conn != NULL;
    }
    pthread_mutex_unlock(&db->mu);
}

/*
 * Prepared statements. A statement with parameters is prepared on a connection the first
 * time it runs there and executed by name afterwards, which spares the server its parse
 * and plan on every call. prep[] remembers, per connection, the hashes of the statements
 * prepared on it. An entry is keyed by the connection and its server process, so a
 * reconnected or new connection (even at a reused address) starts with none. Statement
 * names carry the entry's generation: when an entry is evicted (more live connections
 * than a probe window holds) and recreated, the new names cannot collide with statements
 * the server still has, so preparing never fails on a name and never aborts a transaction.
 */
#define PREP_SLOTS 1024 /* connections remembered */
#define PREP_PROBE 16   /* slots searched per connection */
#define PREP_STMTS 96   /* statements per connection; beyond, statements run unnamed */

struct prep_conn {
    const PGconn *conn;
    int pid;
    unsigned long long gen;
    unsigned long long used; /* prep_clock at last use: the oldest in a window is evicted */
    int n;
    uint64_t stmt[PREP_STMTS];
};

static pthread_mutex_t prep_mu = PTHREAD_MUTEX_INITIALIZER;
static struct prep_conn prep[PREP_SLOTS];
static unsigned long long prep_gen, prep_clock;

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Names the statement for conn in `name` and tells whether it is already prepared
 * there; false with name[0] == '\0' when it is to run unnamed. */
static bool prep_lookup(const PGconn *conn, uint64_t h, char *name, size_t len)
{
    int pid = PQbackendPID(conn);
    size_t start = (size_t)(((uintptr_t)conn >> 4) * 2654435761u) % PREP_SLOTS;
    bool prepared = false;
    name[0] = '\0';
    pthread_mutex_lock(&prep_mu);
    struct prep_conn *e = NULL, *oldest = NULL;
    for (size_t k = 0; k < PREP_PROBE && e == NULL; k++) {
        struct prep_conn *c = &prep[(start + k) % PREP_SLOTS];
        if (c->conn == conn && c->pid == pid)
            e = c;
        else if (oldest == NULL || c->used < oldest->used)
            oldest = c;
    }
    if (e == NULL) {
        e = oldest;
        e->conn = conn;
        e->pid = pid;
        e->gen = ++prep_gen;
        e->n = 0;
    }
    e->used = ++prep_clock;
    for (int i = 0; i < e->n && !prepared; i++)
        prepared = e->stmt[i] == h;
    if (prepared || e->n < PREP_STMTS)
        snprintf(name, len, "evd_%llx_%016llx", e->gen, (unsigned long long)h);
    pthread_mutex_unlock(&prep_mu);
    return prepared;
}

static void prep_remember(const PGconn *conn, uint64_t h)
{
    int pid = PQbackendPID(conn);
    size_t start = (size_t)(((uintptr_t)conn >> 4) * 2654435761u) % PREP_SLOTS;
    pthread_mutex_lock(&prep_mu);
    for (size_t k = 0; k < PREP_PROBE; k++) {
        struct prep_conn *c = &prep[(start + k) % PREP_SLOTS];
        if (c->conn == conn && c->pid == pid) {
            if (c->n < PREP_STMTS)
                c->stmt[c->n++] = h;
            break;
        }
    }
    pthread_mutex_unlock(&prep_mu);
}

static PGresult *run(PGconn *conn, const char *sql, int nparams, const char *const *params)
{
    if (nparams == 0) /* migrations, BEGIN/COMMIT, LISTEN: may be several statements */
        return PQexecParams(conn, sql, 0, NULL, NULL, NULL, NULL, 0);
    char name[64];
    uint64_t h = fnv1a(sql);
    if (!prep_lookup(conn, h, name, sizeof(name))) {
        if (name[0] == '\0')
            return PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
        PGresult *p = PQprepare(conn, name, sql, nparams, NULL);
        if (p == NULL || PQresultStatus(p) != PGRES_COMMAND_OK)
            return p; /* the error is reported like the statement's own */
        PQclear(p);
        prep_remember(conn, h);
    }
    return PQexecPrepared(conn, name, nparams, params, NULL, NULL, 0);
}

/* True for a word of `sql` (ASCII, any case) that starts at a word boundary. */
static bool has_word(const char *sql, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = sql; *p; p++)
        if (strncasecmp(p, word, n) == 0 && (p == sql || !(isalnum((unsigned char)p[-1]) ||
                                                         p[-1] == '_')))
            return true;
    return false;
}

/*
 * True when running `sql` twice does what running it once does: BEGIN, and a SELECT or
 * WITH that neither writes nor calls one of evald's functions (which write) nor notifies.
 * A statement that cannot be told safe is not run again.
 */
static bool repeatable(const char *sql)
{
    while (isspace((unsigned char)*sql))
        sql++;
    if (strcasecmp(sql, "BEGIN") == 0)
        return true;
    if (strncasecmp(sql, "SELECT", 6) != 0 && strncasecmp(sql, "WITH", 4) != 0)
        return false;
    static const char *const writes[] = {"INSERT", "UPDATE", "DELETE", "MERGE", "evald_",
                                         "pg_notify", "nextval", "setval", "LISTEN", NULL};
    for (size_t i = 0; writes[i]; i++)
        if (has_word(sql, writes[i]))
            return false;
    return true;
}

PGresult *evd_db_query(PGconn *conn, const char *sql, int nparams, const char *const *params,
                       struct evd_err *err)
{
    /* Outside a transaction, a pool connection found dead is replaced before anything is
     * sent, and a statement that failed because the connection died (the server went
     * away between the look and the send) runs once more when running it again is safe.
     * Inside a transaction nothing is repeated: the transaction is lost with the
     * connection and its owner must begin again. */
    bool fresh = pooled(conn) && PQtransactionStatus(conn) == PQTRANS_IDLE;
    if (fresh && !alive(conn))
        PQreset(conn);
    PGresult *r = run(conn, sql, nparams, params);
    ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && fresh &&
        PQstatus(conn) != CONNECTION_OK && repeatable(sql)) {
        PQclear(r);
        PQreset(conn);
        r = run(conn, sql, nparams, params);
        st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    }
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        return r;
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    if (PQstatus(conn) != CONNECTION_OK || state == NULL || strncmp(state, "08", 2) == 0 ||
        strncmp(state, "57P", 3) == 0)
        evd_err_set(err, EVD_EDB, "could not reach the database");
    else if (strcmp(state, "23505") == 0)
        evd_err_set(err, EVD_ECONFLICT, "already exists");
    else if (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0)
        evd_err_set(err, EVD_EDB, "could not complete the transaction (%s), try again", state);
    else
        evd_err_set(err, EVD_EDB, "database error: %s", msg ? msg : "unknown");
    PQclear(r);
    return NULL;
}

enum evd_code evd_db_exec(PGconn *conn, const char *sql, int nparams,
                          const char *const *params, struct evd_err *err)
{
    PGresult *r = evd_db_query(conn, sql, nparams, params, err);
    if (r == NULL)
        return err ? err->code : EVD_EDB;
    PQclear(r);
    return EVD_OK;
}

json_t *evd_db_col_json(PGresult *r, int row, int col)
{
    if (PQgetisnull(r, row, col))
        return NULL;
    return json_loads(PQgetvalue(r, row, col), JSON_DECODE_ANY, NULL);
}

int64_t evd_db_col_i64(PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

json_t *evd_db_row_json_object(PGresult *r, int row, const char *const *names, int n,
                               struct evd_err *err)
{
    json_t *out = json_object();
    for (int i = 0; out != NULL && i < n; i++) {
        if (PQgetisnull(r, row, i))
            continue;
        json_t *v = evd_db_col_json(r, row, i);
        if (v == NULL || json_object_set_new(out, names[i], v) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    if (out == NULL)
        evd_err_set(err, EVD_ENOMEM, "out of memory");
    return out;
}

enum evd_code evd_db_code(const struct evd_err *err)
{
    return err && err->code != EVD_OK ? err->code : EVD_EDB;
}

enum evd_code evd_db_begin(PGconn *conn, struct evd_err *err)
{
    return evd_db_exec(conn, "BEGIN", 0, NULL, err);
}

enum evd_code evd_db_commit(PGconn *conn, struct evd_err *err)
{
    return evd_db_exec(conn, "COMMIT", 0, NULL, err);
}

enum evd_code evd_db_mark(PGconn *conn, struct evd_err *err)
{
    return evd_db_exec(conn, "SAVEPOINT evd_mark", 0, NULL, err);
}

enum evd_code evd_db_rollback_to_mark(PGconn *conn, struct evd_err *err)
{
    return evd_db_exec(conn, "ROLLBACK TO SAVEPOINT evd_mark", 0, NULL, err);
}

void evd_db_rollback(PGconn *conn)
{
    if (PQstatus(conn) != CONNECTION_OK || PQtransactionStatus(conn) == PQTRANS_IDLE)
        return;
    PGresult *r = PQexec(conn, "ROLLBACK");
    PQclear(r);
}

PGresult *evd_db_get_row(PGconn *conn, const char *sql, bool lock, const char *id,
                         const char *what, struct evd_err *err)
{
    size_t n = strlen(sql) + sizeof(" FOR UPDATE");
    char *q = malloc(n);
    if (q == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        return NULL;
    }
    snprintf(q, n, "%s%s", sql, lock ? " FOR UPDATE" : "");
    const char *p[] = {id};
    PGresult *r = evd_db_query(conn, q, 1, p, err);
    free(q);
    if (r != NULL && PQntuples(r) == 0) {
        PQclear(r);
        evd_err_set(err, EVD_ENOTFOUND, "%s not found: %s", what, id);
        return NULL;
    }
    return r;
}
