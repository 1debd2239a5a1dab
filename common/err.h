/*
 * evald error codes and the error record every fallible call takes last.
 * A NULL `struct evd_err *` is accepted everywhere and means "caller does not care".
 * Messages follow PostgreSQL's style: lower case, no final period, and name the field.
 * Thread-safety: none needed; an evd_err belongs to one call chain.
 */
#ifndef EVD_COMMON_ERR_H
#define EVD_COMMON_ERR_H

#include <stddef.h>

enum evd_code {
    EVD_OK = 0,
    EVD_EINVAL,      /* invalid input: 400 */
    EVD_EUNAUTH,     /* missing or wrong token: 401 */
    EVD_ENOTFOUND,   /* unknown id or route: 404 */
    EVD_ECONFLICT,   /* state does not allow it: 409 */
    EVD_ETOOLARGE,   /* request body over the limit: 413 */
    EVD_EMEDIA,      /* unsupported media type: 415 */
    EVD_ENOMEM,      /* allocation failed: 500 */
    EVD_EDB,         /* database failed: 503 when unreachable, else 500 */
    EVD_EUNAVAIL,    /* dependency not reachable now: 503 */
    EVD_EUPSTREAM,   /* provider or callee failed */
    EVD_ETIMEOUT,    /* deadline passed */
    EVD_ECANCELLED,  /* cancelled by request */
    EVD_EINTERNAL,   /* a bug or an unexpected state: 500 */
    EVD_EMISMATCH,   /* a request unlike the first one its Idempotency-Key came with: 422 */
};

#define EVD_ERR_MSG_MAX 512

struct evd_err {
    enum evd_code code;
    char msg[EVD_ERR_MSG_MAX];
};

/* Sets *err (when not NULL) and returns `code`, so `return evd_err_set(...)` reads naturally. */
enum evd_code evd_err_set(struct evd_err *err, enum evd_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Clears *err to EVD_OK with an empty message. */
/* Puts `prefix` before a message that starts with `when` (a message about "model…" told
 * of "judge.model…"), cutting its end when the room runs out. NULL-safe. */
void evd_err_prefix(struct evd_err *err, const char *when, const char *prefix);
void evd_err_clear(struct evd_err *err);

/* Stable lower-case name of a code, e.g. "invalid_request". */
const char *evd_code_name(enum evd_code code);

#endif
