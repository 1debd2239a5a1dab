/*
 * The export thread (DESIGN). The span sink appends finished spans to one queue under
 * `mu`; the thread takes up to max_batch of them when the batch is full, schedule_delay
 * has passed since the last export, or a stop was asked, encodes them once and POSTs them
 * until a receiver accepts them (2xx), refuses them for good (any other answer but 429,
 * 502, 503 and 504: counted as failed) or they are evicted. Retries (429, 502, 503, 504, no answer) wait with
 * exponential backoff from 500 ms to 8 s with jitter, or what Retry-After says (at most
 * 60 s). The batch being retried counts against max_queue with the queued spans: when a
 * new span finds the queue full, a batch in retry is evicted (its spans counted dropped)
 * to make room, else the new span itself is dropped. So a receiver that is down costs
 * memory up to the bound and nothing else; a span never waits for the network.
 * A stop sets one deadline, timeout_ms from then: the thread exports what is queued (and
 * the batch in retry) until it, cutting short any attempt or wait that would run past it
 * (however long Retry-After asked to wait), then drops the rest. `mu` is never held across encoding or I/O.
 */
#include "otel/otel.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "harness/harness.h"

#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 8000
#define RETRY_AFTER_MAX_MS 60000

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* the thread waits on it: spans, a stop, or a timeout */
    struct evd_span *head, *tail;
    size_t queued;           /* spans in the list */
    size_t retrying;         /* spans of the batch the thread holds (0: none) */
    bool evict;              /* the held batch is to be dropped (set by the sink) */
    bool stop;
    int64_t deadline;        /* with stop: when the shutdown flush ends (monotonic ms) */
    bool running;
    pthread_t thread;
    struct evd_otel_config cfg; /* the thread's copy: endpoint, headers, resource, numbers */
    atomic_uint_fast64_t exported, dropped, failed, batches, retries;
} X = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void sink(struct evd_span *s)
{
    bool wake = false;
    pthread_mutex_lock(&X.mu);
    size_t bound = (size_t)X.cfg.max_queue;
    if (X.stop && !X.running) {
        pthread_mutex_unlock(&X.mu);
        evd_span_free(s);
        return;
    }
    if (X.queued + X.retrying >= bound && X.retrying > 0 && !X.evict) {
        /* Newer spans win over a batch that cannot get out. */
        X.evict = true;
        wake = true;
    }
    size_t held = X.evict ? 0 : X.retrying;
    if (X.queued + held >= bound) {
        pthread_mutex_unlock(&X.mu);
        atomic_fetch_add(&X.dropped, 1);
        evd_span_free(s);
        return;
    }
    s->next = NULL;
    if (X.tail != NULL)
        X.tail->next = s;
    else
        X.head = s;
    X.tail = s;
    X.queued++;
    if (X.queued >= (size_t)X.cfg.max_batch)
        wake = true;
    pthread_mutex_unlock(&X.mu);
    if (wake)
        pthread_cond_signal(&X.cv);
}

static void free_list(struct evd_span *s)
{
    while (s != NULL) {
        struct evd_span *n = s->next;
        evd_span_free(s);
        s = n;
    }
}

/* Takes up to max_batch queued spans into batch[]; under mu. */
static size_t take(struct evd_span **batch)
{
    size_t n = 0;
    while (X.head != NULL && n < (size_t)X.cfg.max_batch) {
        struct evd_span *s = X.head;
        X.head = s->next;
        s->next = NULL;
        batch[n++] = s;
    }
    if (X.head == NULL)
        X.tail = NULL;
    X.queued -= n;
    X.retrying = n;
    X.evict = false;
    return n;
}

static int64_t backoff(int attempt)
{
    int64_t base = BACKOFF_MIN_MS;
    for (int i = 1; i < attempt && base < BACKOFF_MAX_MS; i++)
        base *= 2;
    if (base > BACKOFF_MAX_MS)
        base = BACKOFF_MAX_MS;
    unsigned int r = 0;
    if (RAND_bytes((unsigned char *)&r, sizeof(r)) != 1)
        r = (unsigned int)evd_mono_ms();
    return base / 2 + (int64_t)(r % (unsigned int)(base / 2 + 1));
}

static bool retryable(long status)
{
    return status == 0 || status == 429 || status == 502 || status == 503 || status == 504;
}

/* Waits on cv until `until` (monotonic ms) or a stop; under mu. */
static void wait_until(int64_t until)
{
    struct timespec ts;
    int64_t left = until - evd_mono_ms();
    if (left <= 0)
        return;
    evd_clock_after(CLOCK_MONOTONIC, left, &ts);
    pthread_cond_timedwait(&X.cv, &X.mu, &ts);
}

enum sent { SENT_OK, SENT_FAILED, SENT_DROPPED };

/* The shutdown deadline (monotonic ms), or 0 while no stop was asked; under mu. */
static int64_t deadline_locked(void)
{
    return X.stop ? X.deadline : 0;
}

/*
 * Exports batch[0..n) until accepted, refused for good, evicted, or the shutdown deadline
 * that evd_otel_stop sets: no attempt and no wait between attempts runs past it, whatever
 * Retry-After says. Called without mu.
 */
static enum sent export_batch(struct evd_span **batch, size_t n)
{
    struct evd_buf body = {0};
    bool proto = X.cfg.protocol == EVD_OTEL_HTTP_PROTOBUF;
    int rc = proto ? evd_otel_encode_protobuf(batch, n, X.cfg.resource, &body)
                   : evd_otel_encode_json(batch, n, X.cfg.resource, &body);
    if (rc != 0) {
        evd_buf_free(&body);
        evd_log(EVD_LOG_WARN, "could not encode spans for export", "error", "out of memory",
                NULL);
        return SENT_DROPPED;
    }
    const char *ct = proto ? "application/x-protobuf" : "application/json";
    enum sent result = SENT_DROPPED;
    bool logged = false;
    for (int attempt = 1;; attempt++) {
        struct evd_harness_post_result res;
        int64_t timeout = X.cfg.timeout_ms;
        pthread_mutex_lock(&X.mu);
        int64_t deadline = deadline_locked();
        pthread_mutex_unlock(&X.mu);
        if (deadline > 0) {
            int64_t left = deadline - evd_mono_ms();
            if (left <= 0)
                break;
            if (left < timeout)
                timeout = left;
        }
        enum evd_code code =
            evd_harness_post_bytes(X.cfg.endpoint, ct, (const char *const *)X.cfg.headers,
                                   X.cfg.nheaders, body.data, body.len, timeout, &res);
        if (code == EVD_ENOMEM)
            break;
        if (code == EVD_OK && res.status >= 200 && res.status < 300) {
            result = SENT_OK;
            break;
        }
        if (code == EVD_OK && !retryable(res.status)) {
            char st[16], cnt[24];
            snprintf(st, sizeof(st), "%ld", res.status);
            snprintf(cnt, sizeof(cnt), "%zu", n);
            /* Neither the endpoint (it may hold credentials) nor a header appears here. */
            evd_log(EVD_LOG_WARN, "span export refused; spans dropped", "status", st, "spans",
                    cnt, NULL);
            result = SENT_FAILED;
            break;
        }
        atomic_fetch_add(&X.retries, 1);
        if (!logged) {
            char st[16];
            snprintf(st, sizeof(st), "%ld", res.status);
            evd_log(EVD_LOG_WARN, "span export failed; retrying", "status",
                    res.status ? st : NULL, "error", res.status ? NULL : res.error, NULL);
            logged = true;
        }
        int64_t wait = res.retry_after_ms >= 0 ? res.retry_after_ms : backoff(attempt);
        if (wait > RETRY_AFTER_MAX_MS)
            wait = RETRY_AFTER_MAX_MS;
        int64_t until = evd_mono_ms() + wait;
        pthread_mutex_lock(&X.mu);
        for (;;) {
            /* A stop asked during the wait shortens it to the shutdown deadline. */
            int64_t end = until;
            deadline = deadline_locked();
            if (deadline > 0 && deadline < end)
                end = deadline;
            if (X.evict || evd_mono_ms() >= end)
                break;
            wait_until(end);
        }
        bool evicted = X.evict;
        pthread_mutex_unlock(&X.mu);
        if (evicted)
            break;
    }
    if (logged && result == SENT_OK)
        evd_log(EVD_LOG_INFO, "span export recovered", NULL);
    evd_buf_free(&body);
    return result;
}

static void *export_main(void *arg)
{
    (void)arg;
    size_t cap = (size_t)X.cfg.max_batch;
    struct evd_span **batch = calloc(cap, sizeof(*batch));
    int64_t last = evd_mono_ms();
    pthread_mutex_lock(&X.mu);
    for (;;) {
        if (X.stop && (X.queued == 0 || evd_mono_ms() >= X.deadline))
            break;
        bool due = X.queued >= (size_t)X.cfg.max_batch || X.stop ||
                   (X.queued > 0 && evd_mono_ms() - last >= X.cfg.schedule_delay_ms);
        if (!due) {
            wait_until(X.queued > 0 ? last + X.cfg.schedule_delay_ms
                                    : evd_mono_ms() + X.cfg.schedule_delay_ms);
            continue;
        }
        if (batch == NULL) {
            /* No memory for the batch array: drop what is queued rather than grow. */
            atomic_fetch_add(&X.dropped, X.queued);
            free_list(X.head);
            X.head = X.tail = NULL;
            X.queued = 0;
            continue;
        }
        size_t n = take(batch);
        pthread_mutex_unlock(&X.mu);
        enum sent s = export_batch(batch, n);
        if (s == SENT_OK) {
            atomic_fetch_add(&X.exported, n);
            atomic_fetch_add(&X.batches, 1);
        } else if (s == SENT_FAILED) {
            atomic_fetch_add(&X.failed, n);
        } else {
            atomic_fetch_add(&X.dropped, n);
        }
        for (size_t i = 0; i < n; i++)
            evd_span_free(batch[i]);
        last = evd_mono_ms();
        pthread_mutex_lock(&X.mu);
        X.retrying = 0;
        X.evict = false;
    }
    /* Past the shutdown deadline: what is left is dropped. */
    atomic_fetch_add(&X.dropped, X.queued);
    free_list(X.head);
    X.head = X.tail = NULL;
    X.queued = 0;
    X.running = false;
    pthread_mutex_unlock(&X.mu);
    free(batch);
    evd_harness_thread_cleanup();
    return NULL;
}

/* Deep copy of what the thread reads of cfg. */
static int copy_config(const struct evd_otel_config *in, struct evd_otel_config *out)
{
    memset(out, 0, sizeof(*out));
    *out = *in;
    out->endpoint = strdup(in->endpoint ? in->endpoint : "");
    out->resource = in->resource ? json_deep_copy(in->resource) : json_object();
    out->nheaders = 0;
    if (out->endpoint == NULL || out->resource == NULL)
        return -1;
    for (size_t i = 0; i < in->nheaders; i++) {
        if ((out->headers[i] = strdup(in->headers[i])) == NULL)
            return -1;
        out->nheaders++;
        /* curl drops "Name:" with nothing after the colon; "Name;" sends it empty. */
        char *colon = strchr(out->headers[i], ':');
        if (colon != NULL && colon[strspn(colon + 1, " \t") + 1] == '\0') {
            colon[0] = ';';
            colon[1] = '\0';
        }
    }
    if (out->max_queue <= 0)
        out->max_queue = 2048;
    if (out->max_batch <= 0)
        out->max_batch = 512;
    if (out->max_batch > out->max_queue)
        out->max_batch = out->max_queue;
    if (out->schedule_delay_ms <= 0)
        out->schedule_delay_ms = 1;
    if (out->timeout_ms <= 0)
        out->timeout_ms = 10000;
    return 0;
}

enum evd_code evd_otel_start(const struct evd_otel_config *cfg, struct evd_err *err)
{
    if (cfg == NULL || !cfg->enabled)
        return EVD_OK;
    if (X.running)
        return evd_err_set(err, EVD_EINTERNAL, "the span exporter is already running");
    if (copy_config(cfg, &X.cfg) != 0) {
        evd_otel_config_free(&X.cfg);
        return evd_err_set(err, EVD_ENOMEM, "out of memory starting the span exporter");
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&X.cv, &ca);
    pthread_condattr_destroy(&ca);
    X.stop = false;
    X.running = true;
    if (pthread_create(&X.thread, NULL, export_main, NULL) != 0) {
        X.running = false;
        pthread_cond_destroy(&X.cv);
        evd_otel_config_free(&X.cfg);
        return evd_err_set(err, EVD_EINTERNAL, "could not start the span exporter thread");
    }
    evd_trace_set_sink(sink, cfg->capture_content);
    return EVD_OK;
}

void evd_otel_stop(void)
{
    pthread_mutex_lock(&X.mu);
    bool running = X.running;
    pthread_mutex_unlock(&X.mu);
    if (!running)
        return;
    evd_trace_set_sink(NULL, false);
    pthread_mutex_lock(&X.mu);
    X.stop = true;
    X.deadline = evd_mono_ms() + X.cfg.timeout_ms;
    pthread_cond_broadcast(&X.cv);
    pthread_mutex_unlock(&X.mu);
    pthread_join(X.thread, NULL);
    pthread_cond_destroy(&X.cv);
    evd_otel_config_free(&X.cfg);
    memset(&X.cfg, 0, sizeof(X.cfg));
}

void evd_otel_stats(struct evd_otel_stats *out)
{
    out->exported = atomic_load(&X.exported);
    out->dropped = atomic_load(&X.dropped);
    out->failed = atomic_load(&X.failed);
    out->batches = atomic_load(&X.batches);
    out->retries = atomic_load(&X.retries);
    pthread_mutex_lock(&X.mu);
    out->queued = X.queued + X.retrying;
    pthread_mutex_unlock(&X.mu);
}

int evd_otel_render_metrics(struct evd_buf *out)
{
    struct evd_otel_stats st;
    evd_otel_stats(&st);
    return evd_buf_printf(
        out,
        "# HELP evald_otel_spans_exported_total Spans an OTLP receiver accepted.\n"
        "# TYPE evald_otel_spans_exported_total counter\n"
        "evald_otel_spans_exported_total %llu\n"
        "# HELP evald_otel_spans_dropped_total Spans dropped: the export queue was full, a "
        "batch was evicted while retried, or the shutdown flush ran out of time.\n"
        "# TYPE evald_otel_spans_dropped_total counter\n"
        "evald_otel_spans_dropped_total %llu\n"
        "# HELP evald_otel_export_failures_total Spans of batches a receiver refused for good "
        "(any answer but 2xx, 429, 502, 503 and 504).\n"
        "# TYPE evald_otel_export_failures_total counter\n"
        "evald_otel_export_failures_total %llu\n"
        "# HELP evald_otel_export_retries_total Export attempts that were tried again.\n"
        "# TYPE evald_otel_export_retries_total counter\n"
        "evald_otel_export_retries_total %llu\n"
        "# HELP evald_otel_spans_queued Spans waiting for export.\n"
        "# TYPE evald_otel_spans_queued gauge\n"
        "evald_otel_spans_queued %llu\n",
        (unsigned long long)st.exported, (unsigned long long)st.dropped,
        (unsigned long long)st.failed, (unsigned long long)st.retries,
        (unsigned long long)st.queued);
}
