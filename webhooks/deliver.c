/*
 * The delivery threads. DESIGN: each thread owns a PostgreSQL connection that
 * LISTENs on EVD_CHANNEL_COMPLETED and a curl multi handle with up to MAX_INFLIGHT
 * attempts in flight, each with its own easy handle and its own 10 s timeout, so a
 * receiver that never answers holds back only its own deliveries. The thread loops:
 *   1. while it has a free slot, claim the earliest due delivery (FOR UPDATE SKIP
 *      LOCKED, a lease, attempts+1; committed before any network I/O), skipping
 *      subscriptions that already have PER_SUBSCRIPTION attempts in flight, sign it
 *      and add its POST to the multi handle;
 *   2. when nothing more is due: fan pending completion events out to the
 *      subscriptions (under the fan-out lock);
 *   3. wait (curl_multi_poll) on the transfers, the LISTEN socket and the stop pipe,
 *      at most until the next delivery is due or poll_ms (the fallback when a
 *      notification is lost); record each finished attempt and its next due time,
 *      releasing the lease; go back to 1 after a notification, a finished attempt or
 *      the timer.
 * The database is consulted only at those moments, never per socket event. A process
 * that dies mid-attempt leaves a lease that expires; the attempt is made again
 * (at-least-once). On stop, in-flight requests are removed and their attempts handed
 * back uncounted. Nothing here holds a lock across the network.
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
#include "common/prometheus.h"
#include "common/util.h"
#include "store/db.h"
#include "store/evals.h"
#include "store/listen.h"
#include "store/webhooks.h"
#include "webhooks/internal.h"

#define FANOUT_BATCH 100
#define MIN_SLEEP_MS 20
/* Attempts one thread keeps in flight, and attempts in flight per subscription across
 * every process (a soft cap: see evd_store_delivery_claim). With the default two
 * threads, up to 32 receivers that never answer leave slots for the others. */
#define MAX_INFLIGHT 64
#define PER_SUBSCRIPTION 4
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

/* After a failed query: reconnect when the connection broke, else pause briefly. */
static PGconn *recover(struct evd_listener *lis, const struct evd_err *err)
{
    if (!evd_listener_alive(lis))
        return evd_listener_conn(lis);
    evd_log(EVD_LOG_WARN, "webhook query failed", "error", err->msg, NULL);
    evd_listener_wait(lis, 500, NULL);
    return evd_listener_conn(lis);
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

/* One attempt in flight: everything its easy handle points to lives here until it ends. */
struct xfer {
    struct evd_webhooks *w;
    struct evd_store_delivery d;
    CURL *easy;
    struct curl_slist *headers;
    char *body;
    char errbuf[CURL_ERROR_SIZE];
    enum evd_webhook_trust trust;
    bool refused;
    char refused_addr[INET6_ADDRSTRLEN];
    int64_t started_at; /* epoch ms */
    int64_t t0;         /* monotonic ms */
};

static void xfer_free(struct xfer *x)
{
    if (x == NULL)
        return;
    if (x->easy != NULL)
        curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->headers);
    free(x->body);
    evd_store_delivery_clear(&x->d);
    free(x);
}

/* Every address libcurl connects to passes here: the DNS-rebinding guard. */
static curl_socket_t open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
    struct xfer *x = clientp;
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

static size_t discard(char *data, size_t size, size_t n, void *userdata)
{
    (void)data, (void)userdata;
    return size * n;
}

/* A new copy of object `in` (borrowed) with the keys of `order` first, in that order,
 * then the others as they come; NULL on ENOMEM. */
static json_t *ordered(const json_t *in, const char *const *order, size_t n)
{
    json_t *out = json_object();
    const char *key;
    json_t *v;
    for (size_t i = 0; out && i < n; i++)
        if ((v = json_object_get(in, order[i])) != NULL)
            json_object_set(out, order[i], v);
    json_object_foreach((json_t *)in, key, v)
    {
        if (out && json_object_get(out, key) == NULL)
            json_object_set(out, key, v);
    }
    return out;
}

/* The body: the event in a fixed key order (new malloc'd string, or NULL). Only one of
 * evaluation_id (evaluation.completed) and experiment_id (experiment.completed) is
 * there; each verdict of an experiment reads treatment, label, verdict. */
static char *event_body(const char *payload_text)
{
    static const char *const order[] = {"evaluation_id", "experiment_id", "status",
                                        "timestamp",     "eligible",      "verdicts"};
    static const char *const verdict_order[] = {"treatment", "label", "verdict"};
    json_t *in = json_loads(payload_text, 0, NULL);
    json_t *out = in ? ordered(in, order, sizeof(order) / sizeof(order[0])) : NULL;
    json_t *verdicts = json_object_get(out, "verdicts");
    bool ok = out != NULL;
    if (ok && json_is_array(verdicts)) {
        json_t *list = json_array();
        size_t i;
        json_t *v;
        json_array_foreach(verdicts, i, v)
        {
            json_t *o = json_is_object(v) ? ordered(v, verdict_order, 3) : json_incref(v);
            if (o == NULL || json_array_append_new(list, o) != 0)
                ok = false;
        }
        if (list == NULL || json_object_set_new(out, "verdicts", list) != 0)
            ok = false;
    }
    char *body = ok ? json_dumps(out, JSON_COMPACT) : NULL;
    json_decref(in);
    json_decref(out);
    return body;
}

/*
 * Prepares the signed POST of x->d on a new easy handle. Returns true when it is ready
 * to be added to the multi handle; false with `error` set when the attempt failed
 * before any network I/O (host not allowed, secret unreadable, out of memory).
 */
static bool prepare(struct xfer *x, char *error, size_t errsz)
{
    struct evd_webhooks *w = x->w;
    const struct evd_store_delivery *d = &x->d;
    bool ok = false;
    size_t slen = 0;
    char *secret = NULL;
    char host[256];
    struct evd_err perr = {0};
    error[0] = '\0';

    /* The allowlist may have changed since the subscription was made; the addresses
     * are judged in open_socket, whatever the name resolves to now. */
    if (evd_webhook_url_host(d->url, host, sizeof(host), &perr) != EVD_OK) {
        snprintf(error, errsz, "%s", perr.msg);
        goto out;
    }
    x->trust = evd_webhook_policy_host(w->policy, host);
    if (x->trust == EVD_WEBHOOK_DENIED) {
        snprintf(error, errsz, "url host %s is not allowed by EVALD_WEBHOOK_ALLOW_HOSTS", host);
        goto out;
    }
    secret = evd_webhook_unseal(w->key, d->subscription_id, d->secret_sealed, &slen);
    if (secret == NULL) {
        snprintf(error, errsz,
                 "could not open the subscription's secret (was EVALD_SECRET_KEY changed?)");
        goto out;
    }
    x->body = event_body(d->payload);
    char sig[EVD_WEBHOOK_SIG_MAX];
    int64_t t = evd_now_ms() / 1000;
    if (x->body == NULL || !evd_webhook_sign(secret, slen, t, x->body, strlen(x->body), sig)) {
        snprintf(error, errsz, "could not sign the event (out of memory)");
        goto out;
    }
    evd_webhook_secret_free(secret, slen);
    secret = NULL;

    char h[6][160];
    snprintf(h[5], sizeof(h[5]), "X-Evald-Event-Type: %s", d->event_type);
    snprintf(h[0], sizeof(h[0]), "X-Evald-Event-Id: %s", d->event_id);
    snprintf(h[1], sizeof(h[1]), "X-Evald-Delivery-Id: %s", d->id);
    snprintf(h[2], sizeof(h[2]), "X-Evald-Timestamp: %lld", (long long)t);
    snprintf(h[3], sizeof(h[3]), "X-Evald-Signature: %s", sig);
    snprintf(h[4], sizeof(h[4]), "X-Evald-Attempt: %d", d->attempt);
    const char *fixed[] = {"Content-Type: application/json", "Expect:"};
    for (size_t i = 0; i < 8; i++) {
        struct curl_slist *n = curl_slist_append(x->headers, i < 2 ? fixed[i] : h[i - 2]);
        if (n == NULL) {
            snprintf(error, errsz, "could not build the request (out of memory)");
            goto out;
        }
        x->headers = n;
    }

    CURL *easy = x->easy = curl_easy_init();
    if (easy == NULL) {
        snprintf(error, errsz, "could not build the request (out of memory)");
        goto out;
    }
    curl_easy_setopt(easy, CURLOPT_PRIVATE, x);
    curl_easy_setopt(easy, CURLOPT_URL, d->url);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_PROXY, ""); /* never through an environment proxy */
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, EVD_WEBHOOK_TIMEOUT_MS);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, EVD_WEBHOOK_TIMEOUT_MS);
    curl_easy_setopt(easy, CURLOPT_POST, 1L);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, x->body);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, (long)strlen(x->body));
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt(easy, CURLOPT_USERAGENT, "evald/" EVALD_VERSION " (webhooks)");
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, x);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, x->errbuf);
    ok = true;
out:
    evd_webhook_secret_free(secret, slen);
    return ok;
}

/* Why a finished transfer failed ("" when a 2xx came back); its status in *code. */
static void outcome(struct xfer *x, CURLcode cr, int *code, char *error, size_t errsz)
{
    long status = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    *code = (int)status;
    error[0] = '\0';
    if (x->refused)
        snprintf(error, errsz,
                 "address %s is not allowed (loopback, private or link-local); name the host "
                 "in EVALD_WEBHOOK_ALLOW_HOSTS to allow it",
                 x->refused_addr);
    else if (cr == CURLE_OPERATION_TIMEDOUT)
        snprintf(error, errsz, "no answer within %ld ms", EVD_WEBHOOK_TIMEOUT_MS);
    else if (cr != CURLE_OK)
        snprintf(error, errsz, "%.200s", x->errbuf[0] ? x->errbuf : curl_easy_strerror(cr));
    else if (*code < 200 || *code > 299)
        snprintf(error, errsz, "receiver answered %d", *code);
}

/* Records the attempt's outcome (error "" = delivered), logs it and counts it. */
static void finish(struct evd_webhooks *w, PGconn *c, struct xfer *x, int code, const char *error)
{
    const struct evd_store_delivery *d = &x->d;
    struct evd_store_attempt a = {.started_at = x->started_at};
    struct evd_err err = {0};
    a.finished_at = evd_now_ms();
    a.duration_ms = (long)(evd_mono_ms() - x->t0);
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
            "event_type", d->event_type, "evaluation_id",
            d->evaluation_id[0] ? d->evaluation_id : NULL, "experiment_id",
            d->experiment_id[0] ? d->experiment_id : NULL, "attempt", attempt, "status",
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

struct loop {
    struct evd_webhooks *w;
    struct evd_listener *lis;
    PGconn *c;    /* the listener's connection */
    int notified; /* notifications since wait_and_drive began */
    CURLM *multi;
    struct xfer *inflight[MAX_INFLIGHT];
    size_t n;
};

/* Starts the attempt of a claimed delivery (takes d); a failure before any network I/O
 * is recorded at once. */
static void start_attempt(struct loop *l, struct evd_store_delivery *d)
{
    char error[512];
    struct xfer *x = calloc(1, sizeof(*x));
    if (x == NULL) {
        /* The lease runs out and the attempt is made again. */
        evd_store_delivery_clear(d);
        return;
    }
    x->w = l->w;
    x->d = *d;
    memset(d, 0, sizeof(*d));
    x->started_at = evd_now_ms();
    x->t0 = evd_mono_ms();
    if (!prepare(x, error, sizeof(error))) {
        finish(l->w, l->c, x, 0, error);
        xfer_free(x);
        return;
    }
    if (curl_multi_add_handle(l->multi, x->easy) != CURLM_OK) {
        finish(l->w, l->c, x, 0, "could not start the request (out of memory)");
        xfer_free(x);
        return;
    }
    l->inflight[l->n++] = x;
}

static void forget(struct loop *l, struct xfer *x)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->inflight[i] == x) {
            l->inflight[i] = l->inflight[--l->n];
            break;
        }
    curl_multi_remove_handle(l->multi, x->easy);
}

/* Records every finished attempt; returns how many finished. */
static size_t reap(struct loop *l)
{
    size_t done = 0;
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(l->multi, &left)) != NULL) {
        if (m->msg != CURLMSG_DONE)
            continue;
        char *priv = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
        struct xfer *x = (struct xfer *)(void *)priv;
        CURLcode cr = m->data.result;
        char error[512];
        int code = 0;
        outcome(x, cr, &code, error, sizeof(error));
        forget(l, x);
        finish(l->w, l->c, x, code, error);
        xfer_free(x);
        done++;
    }
    return done;
}

/*
 * Claims due deliveries into the free slots, fans events out when nothing more is
 * due. Returns the ms until the database should be asked again (0 = at once).
 */
static long refill(struct loop *l)
{
    struct evd_webhooks *w = l->w;
    struct evd_err err = {0};
    while (l->n < MAX_INFLIGHT && !atomic_load(&w->stopping)) {
        struct evd_store_delivery d;
        bool found = false;
        if (evd_store_delivery_claim(l->c, w->owner, LEASE_MS, PER_SUBSCRIPTION, &d, &found,
                                     &err) != EVD_OK) {
            l->c = recover(l->lis, &err);
            return MIN_SLEEP_MS;
        }
        if (!found)
            break;
        start_attempt(l, &d);
    }
    if (l->n == MAX_INFLIGHT)
        return w->opts.poll_ms; /* a finished attempt asks again */
    bool events_pending = false;
    long due = -1;
    if (evd_store_webhook_idle(l->c, PER_SUBSCRIPTION, &events_pending, &due, &err) != EVD_OK) {
        l->c = recover(l->lis, &err);
        return MIN_SLEEP_MS;
    }
    if (events_pending) {
        if (fanout(l->c, &err) != EVD_OK) {
            l->c = recover(l->lis, &err);
            return MIN_SLEEP_MS;
        }
        return 0;
    }
    long ms = w->opts.poll_ms;
    if (due >= 0 && due < ms)
        ms = due < MIN_SLEEP_MS ? MIN_SLEEP_MS : due;
    return ms;
}

/*
 * Waits up to ms for the transfers, a notification on the LISTEN connection or the stop
 * pipe, and drives the transfers. *notified when a notification arrived. False when the
 * connection broke.
 */
static bool wait_and_drive(struct loop *l, long ms, bool *notified)
{
    struct curl_waitfd extra[2] = {{.fd = evd_listener_fd(l->lis), .events = CURL_WAIT_POLLIN},
                                   {.fd = l->w->wake_pipe[0], .events = CURL_WAIT_POLLIN}};
    int running = 0;
    /* A notification read along with a query's answer is already in libpq's queue. */
    l->notified = 0;
    evd_listener_deliver(l->lis);
    *notified = l->notified > 0;
    curl_multi_poll(l->multi, extra, 2, *notified ? 0 : (int)ms, NULL);
    curl_multi_perform(l->multi, &running);
    bool ok = extra[0].revents ? evd_listener_read(l->lis) : evd_listener_alive(l->lis);
    *notified = l->notified > 0;
    return ok;
}

static void on_completed(void *arg, const char *channel, const char *payload)
{
    (void)channel, (void)payload;
    ((struct loop *)arg)->notified++;
}

static const char *const completed_channels[] = {EVD_CHANNEL_COMPLETED, NULL};

void *evd_webhooks_worker_main(void *arg)
{
    struct loop l = {.w = arg};
    struct evd_webhooks *w = l.w;
    l.multi = curl_multi_init();
    if (l.multi == NULL)
        evd_log(EVD_LOG_ERROR, "could not create a curl handle for webhooks", NULL);
    else {
        struct evd_listener_opts o = {.conninfo = w->opts.conninfo,
                                      .channels = completed_channels,
                                      .wake_fd = w->wake_pipe[0],
                                      .stopping = &w->stopping,
                                      .what = "webhook connection failed, retrying",
                                      .on_notify = on_completed,
                                      .arg = &l};
        if ((l.lis = evd_listener_new(&o)) == NULL)
            evd_log(EVD_LOG_ERROR, "out of memory for a webhook connection", NULL);
        else
            l.c = evd_listener_conn(l.lis);
    }
    int64_t ask_at = 0; /* monotonic ms at which to consult the database again */
    while (l.c != NULL && !atomic_load(&w->stopping)) {
        if (evd_mono_ms() >= ask_at) {
            long ms = refill(&l);
            if (l.c == NULL)
                break;
            ask_at = evd_mono_ms() + ms;
            if (ms == 0)
                continue;
        }
        long wait = (long)(ask_at - evd_mono_ms());
        bool notified = false;
        if (!wait_and_drive(&l, wait < 0 ? 0 : wait, &notified)) {
            l.c = evd_listener_conn(l.lis);
            ask_at = 0;
            continue;
        }
        if (reap(&l) > 0 || notified)
            ask_at = 0;
    }
    /* Stopping: every attempt still in flight is handed back uncounted. */
    while (l.n > 0) {
        struct xfer *x = l.inflight[l.n - 1];
        struct evd_err err = {0};
        forget(&l, x);
        if (l.c != NULL)
            evd_store_delivery_release(l.c, &x->d, w->owner, &err);
        xfer_free(x);
    }
    evd_listener_free(l.lis);
    curl_multi_cleanup(l.multi);
    return NULL;
}
