/* Idempotent creation; see idempotency.h. */
#include "engine/idempotency.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "engine/internal.h"
#include "store/db.h"
#include "store/idempotency.h"

#define STRIPES 64
#define WAIT_OTHERS_MS 60000
#define POLL_MS 50
#define STALE_MS 120000

/* Requests of this process with the same key (or a key of the same stripe) one at a time:
 * each lock is held from begin to end on one handler thread, never by an HTTP thread. */
static pthread_mutex_t stripes[STRIPES];
static pthread_once_t stripes_once = PTHREAD_ONCE_INIT;

static void stripes_init(void)
{
    for (int i = 0; i < STRIPES; i++)
        pthread_mutex_init(&stripes[i], NULL);
}

bool evd_idem_key_valid(const char *key)
{
    size_t n = 0;
    for (const char *p = key; *p != '\0'; p++, n++)
        if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
            return false;
    return n >= 1 && n <= 255;
}

static unsigned stripe_of(const char *scope, const char *key)
{
    uint32_t h = 2166136261u;
    for (const char *s = scope; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    for (const char *s = key; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % STRIPES;
}

static void drop_answer(struct evd_idem *t)
{
    free(t->location);
    free(t->content_type);
    free(t->body);
    t->location = t->content_type = t->body = NULL;
}

enum evd_code evd_idem_begin(struct evd_engine *e, const char *token, const char *method,
                             const char *path, const char *key, const char *fingerprint,
                             struct evd_idem *t, struct evd_err *err)
{
    memset(t, 0, sizeof(*t));
    t->engine = e;
    snprintf(t->key, sizeof(t->key), "%s", key);
    /* The scope: the token, method and path, hashed (no token is stored). */
    struct evd_sha256 h;
    if (evd_sha256_init(&h) != 0)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    evd_sha256_update(&h, "evald idempotency\n", 18);
    evd_sha256_update(&h, token, strlen(token) + 1);
    evd_sha256_update(&h, method, strlen(method) + 1);
    evd_sha256_update(&h, path, strlen(path) + 1);
    evd_sha256_final_hex(&h, t->scope);
    evd_sha256_free(&h);
    t->stripe = stripe_of(t->scope, t->key);
    pthread_once(&stripes_once, stripes_init);
    pthread_mutex_lock(&stripes[t->stripe]);
    t->locked = true;

    enum evd_code rc = EVD_OK;
    int64_t deadline = evd_mono_ms() + WAIT_OTHERS_MS;
    for (;;) {
        struct evd_store_idem k;
        PGconn *c = evd_db_acquire(e->opts.db, err);
        if (c == NULL)
            return evd_db_code(err);
        rc = evd_store_idem_claim(c, t->scope, t->key, fingerprint, STALE_MS, &k, err);
        evd_db_release(e->opts.db, c);
        if (rc != EVD_OK)
            return rc;
        if (k.found && strcmp(k.fingerprint, fingerprint) != 0) {
            evd_store_idem_clear(&k);
            return evd_err_set(err, EVD_EMISMATCH,
                               "Idempotency-Key was first used with another request body; "
                               "send a new key with a new request");
        }
        if (k.found && k.claimed) {
            evd_store_idem_clear(&k);
            t->outcome = EVD_IDEM_RUN;
            t->claimed = true;
            return EVD_OK;
        }
        if (k.found && k.status > 0) {
            t->outcome = EVD_IDEM_REPLAY;
            t->status = k.status;
            t->location = k.location;
            t->content_type = k.content_type;
            t->body = k.body;
            k.location = k.content_type = k.body = NULL;
            evd_store_idem_clear(&k);
            return EVD_OK;
        }
        evd_store_idem_clear(&k);
        /* Another process runs the first request (or it just forgot the key): again. */
        if (evd_mono_ms() >= deadline)
            return evd_err_set(err, EVD_ECONFLICT,
                               "a request with this Idempotency-Key is still in progress; "
                               "retry later");
        usleep(POLL_MS * 1000);
    }
}

void evd_idem_end(struct evd_idem *t, int status, const char *location,
                  const char *content_type, const char *body)
{
    if (t->claimed) {
        struct evd_err err = {0};
        PGconn *c = evd_db_acquire(t->engine->opts.db, &err);
        enum evd_code rc = c == NULL ? evd_db_code(&err) : EVD_OK;
        if (c != NULL) {
            rc = status > 0 && status < 500
                     ? evd_store_idem_answer(c, t->scope, t->key, status, location,
                                             content_type, body != NULL ? body : "", &err)
                     : evd_store_idem_forget(c, t->scope, t->key, &err);
            evd_db_release(t->engine->opts.db, c);
        }
        /* The answer went to the client; the key waits for its answer until it is stale,
         * and a retry then runs the request again. */
        if (rc != EVD_OK)
            evd_log(EVD_LOG_WARN, "could not record the answer of an idempotent request",
                    "code", evd_code_name(rc), "error", err.msg, NULL);
    }
    drop_answer(t);
    t->claimed = false;
    if (t->locked) {
        pthread_mutex_unlock(&stripes[t->stripe]);
        t->locked = false;
    }
}
