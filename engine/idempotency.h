/*
 * Idempotent creation (docs/idempotency.md): a creating request sent with an
 * Idempotency-Key runs once; a request with the same key and body within 24 hours gets
 * the first one's answer again, and one with another body is refused.
 *
 * evd_idem_begin claims the key in the database. In this process, requests with the same
 * key wait for each other (a striped lock, held from begin to end, on the handler pool's
 * thread: a duplicate sent at the same time waits for the first and answers its answer);
 * a request of another process that holds the key is waited for by reading the key again
 * every 50 ms, for up to 60 s (then 409). A key whose first request's process died is
 * taken over after 2 minutes.
 */
#ifndef EVD_ENGINE_IDEMPOTENCY_H
#define EVD_ENGINE_IDEMPOTENCY_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

struct evd_engine;

/* What begin found. */
enum evd_idem_outcome {
    EVD_IDEM_RUN,      /* the key is this request's: run it, then evd_idem_end */
    EVD_IDEM_REPLAY,   /* the key has an answer: send it (the fields below) */
};

struct evd_idem {
    enum evd_idem_outcome outcome;
    /* REPLAY: the stored answer (malloc'd; location and content_type may be NULL). */
    int status;
    char *location, *content_type, *body;
    /* The engine's: */
    struct evd_engine *engine;
    char scope[65];
    char key[256];
    unsigned stripe;
    bool locked;
    bool claimed; /* begin claimed the key: end records the answer or forgets it */
};

/* True when `key` is a valid Idempotency-Key: 1 to 255 visible ASCII characters. */
bool evd_idem_key_valid(const char *key);

/*
 * Begins a request with Idempotency-Key `key` (valid) of the caller whose bearer token is
 * `token` ("" without one) on method+path, whose body has the SHA-256 `fingerprint` (hex).
 * EVD_OK with t->outcome; EVD_EMISMATCH when the key came with another body;
 * EVD_ECONFLICT when another process still runs its first request after 60 s; or the
 * database's failure. Whatever it returns, evd_idem_end must follow.
 */
enum evd_code evd_idem_begin(struct evd_engine *e, const char *token, const char *method,
                             const char *path, const char *key, const char *fingerprint,
                             struct evd_idem *t, struct evd_err *err);

/*
 * Ends it. After EVD_IDEM_RUN, `status` > 0 records the answer (below 500: it is the key's
 * answer from now on; 500 and above: the key is forgotten, so that a retry runs the
 * request again); status 0 forgets it too. Frees what t holds. NULL-safe strings.
 */
void evd_idem_end(struct evd_idem *t, int status, const char *location,
                  const char *content_type, const char *body);

#endif
