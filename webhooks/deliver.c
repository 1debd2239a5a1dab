/*
 * The delivery threads. DESIGN: each thread owns a PostgreSQL connection that
 * LISTENs on EVD_CHANNEL_COMPLETED and a curl easy handle, and loops:
 *   1. claim the earliest due delivery (FOR UPDATE SKIP LOCKED, a lease, attempts+1;
 *      committed before any network I/O), POST it signed, record the attempt and the
 *      next due time, release the lease;
 *   2. when nothing is due: fan pending completion events out to the subscriptions
 *      (under the fan-out lock), or sleep until notified, until the next delivery is
 *      due, or at most poll_ms (the fallback when a notification is lost).
 * A process that dies mid-attempt leaves a lease that expires; the attempt is made
 * again (at-least-once). On stop, in-flight requests are aborted and their attempt is
 * handed back uncounted. Nothing here holds a lock across the network.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "store/db.h"
#include "store/evals.h"
#include "store/webhooks.h"
#include "webhooks/internal.h"

#define FANOUT_BATCH 100
#define MIN_SLEEP_MS 20
/* A lease outlives the longest attempt (the request timeout) with room to record it. */
#define LEASE_MS (EVD_WEBHOOK_TIMEOUT_MS + 5000)

long evd_webhook_backoff_ms(long base_ms, int attempt, double r)
{
    double d = (double)base_ms;
    for (int i = 1; i < attempt && d < (double)EVD_WEBHOOK_BACKOFF_CAP_MS; i++)
        d *= 2;
    if (d > (double)EVD_WEBHOOK_BACKOFF_CAP_MS)
        d = (double)EVD_WEBHOOK_BACKOFF_CAP_MS;
    if (r < 0)
        r = 0;
    if (r >= 1)
        r = 0.999999;
    return (long)(d * (0.75 + 0.5 * r));
}

static double uniform01(void)
{
    uint32_t x = 0;
    if (RAND_bytes((unsigned char *)&x, sizeof(x)) != 1)
        x = (uint32_t)evd_mono_ms();
    return (double)x / 4294967296.0;
}

/* ---- connections -------------------------------------------------------------------- */

static PGconn *listen_conn(struct evd_webhooks *w)
{
    while (!atomic_load(&w->stopping)) {
        struct evd_err err = {0};
        PGconn *c = evd_db_connect(w->opts.conninfo, &err);
        if (c != NULL && evd_db_exec(c, "LISTEN " EVD_CHANNEL_COMPLETED, 0, NULL, &err) == EVD_OK)
            return c;
        PQfinish(c);
        evd_log(EVD_LOG_WARN, "webhook connection failed, retrying", "error", err.msg, NULL);
        struct pollfd pfd = {.fd = w->wake_pipe[0], .events = POLLIN};
        poll(&pfd, 1, 1000);
    }
    return NULL;
}

/* Waits up to ms for a notification on c or the stop pipe; false when c broke. */
static bool wait_input(struct evd_webhooks *w, PGconn *c, long ms)
{
    struct pollfd pfd[2] = {{.fd = PQsocket(c), .events = POLLIN},
                            {.fd = w->wake_pipe[0], .events = POLLIN}};
    if (poll(pfd, 2, (int)ms) < 0 && errno != EINTR)
        return false;
    if (pfd[0].revents && !PQconsumeInput(c))
        return false;
    PGnotify *n;
    while ((n = PQnotifies(c)) != NULL)
        PQfreemem(n);
    return PQstatus(c) == CONNECTION_OK;
}

/* After a failed query: reconnect when the connection broke, else pause briefly. */
static PGconn *recover(struct evd_webhooks *w, PGconn *c, const struct evd_err *err)
{
    if (PQstatus(c) != CONNECTION_OK) {
        PQfinish(c);
        return listen_conn(w);
    }
    evd_log(EVD_LOG_WARN, "webhook query failed", "error", err->msg, NULL);
    wait_input(w, c, 500);
    return c;
}

/* ---- fan-out ------------------------------------------------------------------------- */

static enum evd_code fanout(PGconn *c, struct evd_err *err)
{
    long events = 0, deliveries = 0;
    do {
        enum evd_code rc = evd_db_begin(c, err);
        if (rc == EVD_OK)
            rc = evd_store_webhook_fanout(c, FANOUT_BATCH, evd_now_ms(), &events, &deliveries, err);
        if (rc == EVD_OK)
            rc = evd_db_commit(c, err);
        if (rc != EVD_OK) {
            evd_db_rollback(c);
            return rc;
        }
        if (events > 0) {
            char ne[24], nd[24];
            snprintf(ne, sizeof(ne), "%ld", events);
            snprintf(nd, sizeof(nd), "%ld", deliveries);
            evd_log(EVD_LOG_DEBUG, "webhook events fanned out", "events", ne, "deliveries", nd,
                    NULL);
        }
    } while (events == FANOUT_BATCH);
    return EVD_OK;
}

/* ---- one attempt --------------------------------------------------------------------- */

struct attempt_ctx {
    struct evd_webhooks *w;
    enum evd_webhook_trust trust;
    bool refused;
    char refused_addr[INET6_ADDRSTRLEN];
};

/* Every address libcurl connects to passes here: the DNS-rebinding guard. */
static curl_socket_t open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
    struct attempt_ctx *x = clientp;
    if (purpose == CURLSOCKTYPE_IPCXN && x->trust != EVD_WEBHOOK_TRUSTED &&
        !evd_webhook_addr_public(&a->addr)) {
        x->refused = true;
        const void *raw = a->family == AF_INET6
                              ? (const void *)&((struct sockaddr_in6 *)(void *)&a->addr)->sin6_addr
                              : (const void *)&((struct sockaddr_in *)(void *)&a->addr)->sin_addr;
        if (inet_ntop(a->family, raw, x->refused_addr, sizeof(x->refused_addr)) == NULL)
            snprintf(x->refused_addr, sizeof(x->refused_addr), "?");
        return CURL_SOCKET_BAD;
    }
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static int on_progress(void *clientp, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    const struct attempt_ctx *x = clientp;
    return atomic_load(&x->w->stopping) ? 1 : 0;
}

static size_t discard(char *data, size_t size, size_t n, void *userdata)
{
    (void)data, (void)userdata;
    return size * n;
}

/* The body: the event in a fixed key order (new malloc'd string, or NULL). */
static char *event_body(const char *payload_text)
{
    json_t *in = json_loads(payload_text, 0, NULL);
    json_t *out = json_object();
    static const char *const order[] = {"evaluation_id", "status", "timestamp", "eligible"};
    const char *key;
    json_t *v;
    for (size_t i = 0; in && out && i < sizeof(order) / sizeof(order[0]); i++)
        if ((v = json_object_get(in, order[i])) != NULL)
            json_object_set(out, order[i], v);
    json_object_foreach(in, key, v)
    {
        if (json_object_get(out, key) == NULL)
            json_object_set(out, key, v);
    }
    char *body = in && out ? json_dumps(out, JSON_COMPACT) : NULL;
    json_decref(in);
    json_decref(out);
    return body;
}

/*
 * POSTs the event. Returns the HTTP status (0 when none came back); `error` receives
 * why the attempt failed ("" when an answer came back). *aborted when stopping cut it.
 */
static int post(struct evd_webhooks *w, CURL *easy, const struct evd_store_delivery *d, char *error,
                size_t errsz, bool *aborted)
{
    int code = 0;
    size_t slen = 0;
    char *secret = NULL, *body = NULL;
    struct curl_slist *headers = NULL;
    char host[256], errbuf[CURL_ERROR_SIZE] = "";
    struct evd_err perr = {0};
    struct attempt_ctx x = {.w = w};
    error[0] = '\0';
    *aborted = false;

    /* The allowlist may have changed since the subscription was made; the addresses
     * are judged in open_socket, whatever the name resolves to now. */
    if (evd_webhook_url_host(d->url, host, sizeof(host), &perr) != EVD_OK) {
        snprintf(error, errsz, "%s", perr.msg);
        goto out;
    }
    x.trust = evd_webhook_policy_host(w->policy, host);
    if (x.trust == EVD_WEBHOOK_DENIED) {
        snprintf(error, errsz, "url host %s is not allowed by EVALD_WEBHOOK_ALLOW_HOSTS", host);
        goto out;
    }
    secret = evd_webhook_unseal(w->key, d->subscription_id, d->secret_sealed, &slen);
    if (secret == NULL) {
        snprintf(error, errsz,
                 "could not open the subscription's secret (was EVALD_SECRET_KEY changed?)");
        goto out;
    }
    body = event_body(d->payload);
    char sig[EVD_WEBHOOK_SIG_MAX];
    int64_t t = evd_now_ms() / 1000;
    if (body == NULL || !evd_webhook_sign(secret, slen, t, body, strlen(body), sig)) {
        snprintf(error, errsz, "could not sign the event (out of memory)");
        goto out;
    }
    evd_webhook_secret_free(secret, slen);
    secret = NULL;

    char h[5][160];
    snprintf(h[0], sizeof(h[0]), "X-Evald-Event-Id: %s", d->event_id);
    snprintf(h[1], sizeof(h[1]), "X-Evald-Delivery-Id: %s", d->id);
    snprintf(h[2], sizeof(h[2]), "X-Evald-Timestamp: %lld", (long long)t);
    snprintf(h[3], sizeof(h[3]), "X-Evald-Signature: %s", sig);
    snprintf(h[4], sizeof(h[4]), "X-Evald-Attempt: %d", d->attempt);
    const char *fixed[] = {"Content-Type: application/json", "Expect:"};
    for (size_t i = 0; i < 2; i++) {
        struct curl_slist *n = curl_slist_append(headers, fixed[i]);
        headers = n ? n : headers;
    }
    for (size_t i = 0; i < 5; i++) {
        struct curl_slist *n = curl_slist_append(headers, h[i]);
        headers = n ? n : headers;
    }

    curl_easy_reset(easy);
    curl_easy_setopt(easy, CURLOPT_URL, d->url);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_PROXY, ""); /* never through an environment proxy */
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, EVD_WEBHOOK_TIMEOUT_MS);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, EVD_WEBHOOK_TIMEOUT_MS);
    curl_easy_setopt(easy, CURLOPT_POST, 1L);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_USERAGENT, "evald/" EVALD_VERSION " (webhooks)");
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, &x);
    curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(easy, CURLOPT_XFERINFODATA, &x);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
    CURLcode cr = curl_easy_perform(easy);
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    code = (int)status;
    if (cr == CURLE_ABORTED_BY_CALLBACK && atomic_load(&w->stopping)) {
        *aborted = true;
    } else if (x.refused) {
        snprintf(error, errsz,
                 "address %s is not allowed (loopback, private or link-local); name the host "
                 "in EVALD_WEBHOOK_ALLOW_HOSTS to allow it",
                 x.refused_addr);
    } else if (cr == CURLE_OPERATION_TIMEDOUT) {
        snprintf(error, errsz, "no answer within %ld ms", EVD_WEBHOOK_TIMEOUT_MS);
    } else if (cr != CURLE_OK) {
        snprintf(error, errsz, "%.200s", errbuf[0] ? errbuf : curl_easy_strerror(cr));
    } else if (code < 200 || code > 299) {
        snprintf(error, errsz, "receiver answered %d", code);
    }
out:
    /* The easy handle keeps pointers to these until the next reset. */
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, NULL);
    curl_slist_free_all(headers);
    evd_webhook_secret_free(secret, slen);
    free(body);
    return code;
}

static void deliver(struct evd_webhooks *w, PGconn *c, CURL *easy, struct evd_store_delivery *d)
{
    char error[512];
    bool aborted = false;
    struct evd_store_attempt a = {.started_at = evd_now_ms()};
    int64_t t0 = evd_mono_ms();
    int code = post(w, easy, d, error, sizeof(error), &aborted);
    struct evd_err err = {0};
    if (aborted) {
        evd_store_delivery_release(c, d, w->owner, &err);
        return;
    }
    a.finished_at = evd_now_ms();
    a.duration_ms = (long)(evd_mono_ms() - t0);
    a.status_code = code;
    bool ok = error[0] == '\0';
    a.error = ok ? NULL : error;
    if (ok)
        a.status = "delivered";
    else if (a.finished_at - d->created_at >= EVD_WEBHOOK_RETRY_WINDOW_MS)
        a.status = "failed";
    else
        a.status = "pending";
    if (!ok)
        a.retry_in_ms = evd_webhook_backoff_ms(w->opts.backoff_ms, d->attempt, uniform01());
    enum evd_code rc = evd_store_delivery_record(c, d, w->owner, &a, &err);

    char attempt[16], status[16], dur[24], retry[24];
    snprintf(attempt, sizeof(attempt), "%d", d->attempt);
    snprintf(status, sizeof(status), "%d", code);
    snprintf(dur, sizeof(dur), "%ld", a.duration_ms);
    snprintf(retry, sizeof(retry), "%ld", a.retry_in_ms);
    evd_log(ok ? EVD_LOG_INFO : EVD_LOG_WARN,
            ok ? "webhook delivered"
               : (strcmp(a.status, "failed") == 0 ? "webhook delivery given up"
                                                  : "webhook attempt failed"),
            "delivery_id", d->id, "subscription_id", d->subscription_id, "event_id", d->event_id,
            "evaluation_id", d->evaluation_id, "attempt", attempt, "status",
            code > 0 ? status : NULL, "error", a.error, "dur_ms", dur, "retry_in_ms",
            strcmp(a.status, "pending") == 0 ? retry : NULL, NULL);
    if (rc != EVD_OK)
        evd_log(EVD_LOG_WARN, "could not record a webhook attempt; it will be made again",
                "delivery_id", d->id, "error", err.msg, NULL);
    evd_metrics_count("evald_webhook_attempts_total", "result",
                      ok ? "delivered" : (code > 0 ? "http_error" : "transport_error"), 1);
    if (strcmp(a.status, "failed") == 0)
        evd_metrics_count("evald_webhook_deliveries_failed_total", NULL, NULL, 1);
}

/* ---- the thread ---------------------------------------------------------------------- */

void *evd_webhooks_worker_main(void *arg)
{
    struct evd_webhooks *w = arg;
    CURL *easy = curl_easy_init();
    PGconn *c = easy ? listen_conn(w) : NULL;
    if (easy == NULL)
        evd_log(EVD_LOG_ERROR, "could not create a curl handle for webhooks", NULL);
    while (c != NULL && !atomic_load(&w->stopping)) {
        struct evd_err err = {0};
        struct evd_store_delivery d;
        bool found = false;
        if (evd_store_delivery_claim(c, w->owner, LEASE_MS, &d, &found, &err) != EVD_OK) {
            c = recover(w, c, &err);
            continue;
        }
        if (found) {
            deliver(w, c, easy, &d);
            evd_store_delivery_clear(&d);
            continue;
        }
        bool events_pending = false;
        long due = -1;
        if (evd_store_webhook_idle(c, &events_pending, &due, &err) != EVD_OK) {
            c = recover(w, c, &err);
            continue;
        }
        if (events_pending) {
            if (fanout(c, &err) != EVD_OK)
                c = recover(w, c, &err);
            continue;
        }
        long ms = w->opts.poll_ms;
        if (due >= 0 && due < ms)
            ms = due < MIN_SLEEP_MS ? MIN_SLEEP_MS : due;
        if (!wait_input(w, c, ms)) {
            PQfinish(c);
            c = listen_conn(w);
        }
    }
    PQfinish(c);
    curl_easy_cleanup(easy);
    return NULL;
}
