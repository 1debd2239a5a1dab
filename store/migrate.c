/*
 * Migrations: the numbered SQL files of migrations/ are embedded at build time
 * (scripts/embed_assets.cmake) and applied at start-up, each in its own
 * transaction, under a session advisory lock, and recorded in schema_migrations.
 * Two processes starting at once on an empty database serialize on the lock; the
 * second finds everything applied. A file's number is its version.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/assets.h"
#include "store/db.h"

extern const struct evd_asset evd_migrations[];

/* Arbitrary constant shared by every evald process: "evald" in ASCII. */
#define MIGRATION_LOCK_KEY "435921904740"

int evd_db_migration_count(void)
{
    int n = 0;
    for (const struct evd_asset *a = evd_migrations; a->path != NULL; a++)
        n++;
    return n;
}

static const char SQL_CREATE[] =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version integer PRIMARY KEY,"
    " name text NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now())";

static const char SQL_APPLIED[] = "SELECT 1 FROM schema_migrations WHERE version = $1";
static const char SQL_RECORD[] = "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)";

enum evd_code evd_db_check_migrations(struct evd_err *err)
{
    int last = 0;
    for (const struct evd_asset *a = evd_migrations; a->path != NULL; a++) {
        int v = atoi(a->path);
        if (v <= last)
            return evd_err_set(err, EVD_EINTERNAL,
                               "migration %s does not have a version above %d: each file needs "
                               "its own increasing number",
                               a->path, last);
        last = v;
    }
    return EVD_OK;
}

enum evd_code evd_db_migrate(const char *conninfo, struct evd_err *err)
{
    enum evd_code rc = evd_db_check_migrations(err);
    if (rc != EVD_OK)
        return rc;
    PGconn *c = evd_db_connect(conninfo, err);
    if (c == NULL)
        return err ? err->code : EVD_EDB;
    if ((rc = evd_db_exec(c, "SELECT pg_advisory_lock(" MIGRATION_LOCK_KEY ")", 0, NULL, err)))
        goto out;
    if ((rc = evd_db_exec(c, SQL_CREATE, 0, NULL, err)))
        goto unlock;
    for (const struct evd_asset *a = evd_migrations; a->path != NULL; a++) {
        char version[16];
        snprintf(version, sizeof(version), "%d", atoi(a->path));
        const char *p1[] = {version};
        PGresult *r = evd_db_query(c, SQL_APPLIED, 1, p1, err);
        if (r == NULL) {
            rc = err ? err->code : EVD_EDB;
            goto unlock;
        }
        int applied = PQntuples(r) > 0;
        PQclear(r);
        if (applied)
            continue;
        if ((rc = evd_db_begin(c, err)))
            goto unlock;
        char *sql = strndup((const char *)a->data, a->len);
        PGresult *m = sql ? PQexec(c, sql) : NULL;
        free(sql);
        if (m == NULL || PQresultStatus(m) != PGRES_COMMAND_OK) {
            rc = evd_err_set(err, EVD_EDB, "could not apply migration %s: %s", a->path,
                             m ? PQresultErrorField(m, PG_DIAG_MESSAGE_PRIMARY) : "no result");
            PQclear(m);
            evd_db_rollback(c);
            goto unlock;
        }
        PQclear(m);
        const char *p2[] = {version, a->path};
        if ((rc = evd_db_exec(c, SQL_RECORD, 2, p2, err)) || (rc = evd_db_commit(c, err))) {
            evd_db_rollback(c);
            goto unlock;
        }
        evd_log(EVD_LOG_INFO, "migration applied", "migration", a->path, NULL);
    }
unlock:
    evd_db_exec(c, "SELECT pg_advisory_unlock(" MIGRATION_LOCK_KEY ")", 0, NULL, NULL);
out:
    PQfinish(c);
    return rc;
}

enum evd_code evd_db_ready(struct evd_db *db, struct evd_err *err)
{
    enum evd_code rc = EVD_OK;
    PGconn *c = evd_db_acquire(db, err);
    if (c == NULL)
        return err ? err->code : EVD_EDB;
    PGresult *r = evd_db_query(c, "SELECT count(*) FROM schema_migrations", 0, NULL, err);
    if (r == NULL) {
        rc = err ? err->code : EVD_EDB;
        goto out;
    }
    int applied = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    if (applied < evd_db_migration_count())
        rc = evd_err_set(err, EVD_EUNAVAIL, "migrations pending: %d of %d applied", applied,
                         evd_db_migration_count());
out:
    evd_db_release(db, c);
    return rc;
}
