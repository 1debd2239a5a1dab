/*
 * SQL of the idempotency keys (migrations/0020); the protocol is the engine's
 * (engine/idempotency.h).
 */
#ifndef EVD_STORE_IDEMPOTENCY_H
#define EVD_STORE_IDEMPOTENCY_H

#include <libpq-fe.h>
#include <stdbool.h>

#include "common/err.h"

/* A key as the claim found it (strings malloc'd; NULL where the column is). */
struct evd_store_idem {
    bool found;      /* false: the row went between the claim's insert and its read */
    bool claimed;    /* this claim made the row */
    char *fingerprint;
    int status;      /* 0 while the first request runs */
    char *location, *content_type, *body;
};

void evd_store_idem_clear(struct evd_store_idem *k);
/* evald_idempotency_claim: see the migration. */
enum evd_code evd_store_idem_claim(PGconn *c, const char *scope, const char *key,
                                   const char *fingerprint, long stale_ms,
                                   struct evd_store_idem *out, struct evd_err *err);
/* Records the answer of the request that claimed the key. */
enum evd_code evd_store_idem_answer(PGconn *c, const char *scope, const char *key, int status,
                                    const char *location, const char *content_type,
                                    const char *body, struct evd_err *err);
/* Deletes the key (its request failed on the server's side: a retry runs it again). */
enum evd_code evd_store_idem_forget(PGconn *c, const char *scope, const char *key,
                                    struct evd_err *err);

#endif
