/*
 * Subscriptions: validation of {url, secret, evaluation_id?, events?}, sealing of the secret and
 * the calls behind /v1/subscriptions. The plain secret lives only in the request's
 * json_t and in the buffer sealed here; it never reaches a response, a log line, an
 * error message or the database. Thread-safe (pool connections, immutable policy).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "store/db.h"
#include "store/events.h"
#include "store/webhooks.h"
#include "webhooks/internal.h"

#define SECRET_MIN 16
#define SECRET_MAX 256
#define LIST_DEFAULT 50
#define LIST_MAX 100

static enum evd_code not_running(struct evd_err *err)
{
    return evd_err_set(err, EVD_EUNAVAIL, "webhooks are not running in this process");
}

/* Code points of a UTF-8 string (jansson has validated it). */
static size_t utf8_chars(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xc0) != 0x80;
    return n;
}

static bool valid_eval_id(const char *s)
{
    size_t n = strlen(s);
    return n >= 1 && n <= 63 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

enum evd_code evd_webhook_events_check(const json_t *events, bool has_evaluation_id,
                                       struct evd_err *err)
{
    static const char *const types[] = {EVD_EVENT_EVALUATION, EVD_EVENT_EXPERIMENT};
    if (events == NULL)
        return EVD_OK;
    if (!json_is_array(events) || json_array_size(events) == 0)
        return evd_err_set(err, EVD_EINVAL, "events must be a non-empty array of event types");
    bool seen[2] = {false, false};
    for (size_t i = 0; i < json_array_size(events); i++) {
        const json_t *v = json_array_get(events, i);
        if (!json_is_string(v))
            return evd_err_set(err, EVD_EINVAL, "events[%zu] must be a string", i);
        const char *s = json_string_value(v);
        size_t k = 0;
        while (k < 2 && (strlen(s) != json_string_length(v) || strcmp(s, types[k]) != 0))
            k++;
        if (k == 2)
            return evd_err_set(
                err, EVD_EINVAL,
                "events[%zu] is not a known event type: %.64s (expected " EVD_EVENT_EVALUATION
                " or " EVD_EVENT_EXPERIMENT ")",
                i, s);
        if (seen[k])
            return evd_err_set(err, EVD_EINVAL, "events[%zu] repeats %s", i, types[k]);
        seen[k] = true;
    }
    if (has_evaluation_id && seen[1])
        return evd_err_set(err, EVD_EINVAL,
                           "events cannot include " EVD_EVENT_EXPERIMENT
                           " when evaluation_id is set: an evaluation filter matches that "
                           "evaluation's event only");
    return EVD_OK;
}

/* Checks the request; on EVD_OK the borrowed pointers point into `request`. */
static enum evd_code decode(const struct evd_webhooks *w, json_t *request, const char **url,
                            const char **secret, size_t *secret_len, const char **evaluation_id,
                            json_t **events, char *host, size_t hostsz, struct evd_err *err)
{
    static const char *const known[] = {"url", "secret", "evaluation_id", "events", NULL};
    if (!json_is_object(request))
        return evd_err_set(err, EVD_EINVAL, "request body must be a JSON object");
    const char *unknown = evd_json_unknown_member(request, known);
    if (unknown != NULL)
        return evd_err_set(err, EVD_EINVAL, "%.64s is not a known field", unknown);
    json_t *u = json_object_get(request, "url");
    if (u == NULL)
        return evd_err_set(err, EVD_EINVAL, "url is required");
    if (!json_is_string(u))
        return evd_err_set(err, EVD_EINVAL, "url must be a string");
    if (strlen(json_string_value(u)) != json_string_length(u))
        return evd_err_set(err, EVD_EINVAL, "url must not contain NUL characters");
    enum evd_code rc = evd_webhook_url_check(w->policy, json_string_value(u), host, hostsz, err);
    if (rc != EVD_OK)
        return rc;
    json_t *s = json_object_get(request, "secret");
    if (s == NULL)
        return evd_err_set(err, EVD_EINVAL, "secret is required");
    if (!json_is_string(s))
        return evd_err_set(err, EVD_EINVAL, "secret must be a string");
    size_t slen = json_string_length(s);
    if (strlen(json_string_value(s)) != slen)
        return evd_err_set(err, EVD_EINVAL, "secret must not contain NUL characters");
    size_t chars = utf8_chars(json_string_value(s), slen);
    if (chars < SECRET_MIN || chars > SECRET_MAX)
        return evd_err_set(err, EVD_EINVAL, "secret must be %d to %d characters long", SECRET_MIN,
                           SECRET_MAX);
    json_t *e = json_object_get(request, "evaluation_id");
    *evaluation_id = NULL;
    if (e != NULL && !json_is_null(e)) {
        if (!json_is_string(e))
            return evd_err_set(err, EVD_EINVAL, "evaluation_id must be a string or null");
        if (!valid_eval_id(json_string_value(e)))
            return evd_err_set(err, EVD_EINVAL,
                               "evaluation_id must be an evaluation id (1 to 63 letters, digits, "
                               "'_' or '-')");
        *evaluation_id = json_string_value(e);
    }
    *events = json_object_get(request, "events");
    rc = evd_webhook_events_check(*events, *evaluation_id != NULL, err);
    if (rc != EVD_OK)
        return rc;
    *url = json_string_value(u);
    *secret = json_string_value(s);
    *secret_len = slen;
    return EVD_OK;
}

enum evd_code evd_webhooks_subscribe(struct evd_webhooks *w, json_t *request, json_t **response,
                                     struct evd_err *err)
{
    if (w == NULL)
        return not_running(err);
    *response = NULL;
    const char *url = NULL, *secret = NULL, *evaluation_id = NULL;
    json_t *events = NULL; /* borrowed from request */
    size_t secret_len = 0;
    char host[256], id[48];
    char *sealed = NULL, *events_text = NULL;
    PGconn *c = NULL;
    enum evd_code rc = decode(w, request, &url, &secret, &secret_len, &evaluation_id, &events, host,
                              sizeof(host), err);
    if (rc != EVD_OK)
        goto out;
    if (events != NULL && (events_text = evd_json_compact(events, NULL)) == NULL) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    if (!w->has_key) {
        rc = evd_err_set(err, EVD_EUNAVAIL,
                         "webhook subscriptions need EVALD_SECRET_KEY (64 hexadecimal "
                         "characters) to seal their secrets; see docs/webhooks.md");
        goto out;
    }
    evd_new_id("sub_", id, sizeof(id));
    sealed = evd_webhook_seal(w->key, id, secret, secret_len);
    if (sealed == NULL) {
        rc = evd_err_set(err, EVD_ENOMEM, "could not seal the secret");
        goto out;
    }
    if ((c = evd_db_acquire(w->opts.db, err)) == NULL) {
        rc = err ? err->code : EVD_EDB;
        goto out;
    }
    if ((rc = evd_db_begin(c, err)) != EVD_OK ||
        (rc = evd_store_sub_insert(c, id, url, evaluation_id, events_text, sealed, evd_now_ms(),
                                   response, err)) != EVD_OK ||
        (rc = evd_db_commit(c, err)) != EVD_OK) {
        json_decref(*response);
        *response = NULL;
        goto out;
    }
    evd_log(EVD_LOG_INFO, "webhook subscription created", "subscription_id", id, "host", host,
            "evaluation_id", evaluation_id, NULL);
out:
    evd_db_release(w->opts.db, c); /* rolls back an open transaction */
    free(sealed);
    free(events_text);
    return rc;
}

enum evd_code evd_webhooks_list(struct evd_webhooks *w, json_t **response, struct evd_err *err)
{
    if (w == NULL)
        return not_running(err);
    *response = NULL;
    PGconn *c = evd_db_acquire(w->opts.db, err);
    json_t *subs = c ? evd_store_sub_list(c, err) : NULL;
    evd_db_release(w->opts.db, c);
    if (subs == NULL)
        return err && err->code != EVD_OK ? err->code : EVD_EDB;
    *response = json_pack("{s:o}", "subscriptions", subs);
    return *response ? EVD_OK : evd_err_set(err, EVD_ENOMEM, "out of memory");
}

enum evd_code evd_webhooks_get(struct evd_webhooks *w, const char *id, json_t **response,
                               struct evd_err *err)
{
    if (w == NULL)
        return not_running(err);
    PGconn *c = evd_db_acquire(w->opts.db, err);
    *response = c ? evd_store_sub_get(c, id, err) : NULL;
    evd_db_release(w->opts.db, c);
    if (*response == NULL)
        return err && err->code != EVD_OK ? err->code : EVD_EDB;
    return EVD_OK;
}

enum evd_code evd_webhooks_delete(struct evd_webhooks *w, const char *id, struct evd_err *err)
{
    if (w == NULL)
        return not_running(err);
    bool deleted = false;
    PGconn *c = evd_db_acquire(w->opts.db, err);
    enum evd_code rc = c ? evd_store_sub_delete(c, id, &deleted, err)
                         : (err && err->code != EVD_OK ? err->code : EVD_EDB);
    evd_db_release(w->opts.db, c);
    if (rc == EVD_OK && !deleted)
        rc = evd_err_set(err, EVD_ENOTFOUND, "subscription not found: %.128s", id);
    if (rc == EVD_OK)
        evd_log(EVD_LOG_INFO, "webhook subscription deleted", "subscription_id", id, NULL);
    return rc;
}

enum evd_code evd_webhooks_deliveries(struct evd_webhooks *w, const char *id, long limit,
                                      const char *before, json_t **response, struct evd_err *err)
{
    if (w == NULL)
        return not_running(err);
    *response = NULL;
    if (limit == 0)
        limit = LIST_DEFAULT;
    if (limit < 1 || limit > LIST_MAX)
        return evd_err_set(err, EVD_EINVAL, "limit must be between 1 and %d", LIST_MAX);
    char *next = NULL;
    json_t *list = NULL, *sub = NULL;
    enum evd_code rc = EVD_OK;
    PGconn *c = evd_db_acquire(w->opts.db, err);
    if (c == NULL) {
        rc = err && err->code != EVD_OK ? err->code : EVD_EDB;
        goto out;
    }
    if ((sub = evd_store_sub_get(c, id, err)) == NULL ||
        (list = evd_store_deliveries(c, id, (unsigned)limit, before, &next, err)) == NULL) {
        rc = err && err->code != EVD_OK ? err->code : EVD_EDB;
        goto out;
    }
    *response = json_pack("{s:O}", "deliveries", list);
    if (*response != NULL && next != NULL)
        json_object_set_new(*response, "next_cursor", json_string(next));
    if (*response == NULL)
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
out:
    evd_db_release(w->opts.db, c);
    json_decref(sub);
    json_decref(list);
    free(next);
    return rc;
}
