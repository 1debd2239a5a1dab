/*
 * HTTP transport of the harness: one POST on a caller-owned easy handle driven through the
 * calling thread's own multi handle, so that a cancel token or the deadline interrupts it
 * within 50 ms (the xferinfo callback is a second line of defence), plus the provider retry
 * policy. The multi handle lives as long as its thread (a thread-specific key frees it), so
 * its connection cache keeps connections alive from one call to the next: a worker talks
 * to a provider over one connection instead of a new TCP and TLS handshake per call.
 * Runs on the calling thread only. Response bodies are bounded to EVD_HX_MAX_BODY.
 * Keys go into headers only; every message built here is scrubbed of the key.
 */
#define _XOPEN_SOURCE 700 /* strptime */
#include "harness/internal.h"

#include <ctype.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/log.h"

struct xfer {
    struct evd_hx_http_resp *resp;
    struct evd_cancel *cancel;
    int64_t deadline_ms;
    bool overflow;
    bool headers_done; /* the blank line after the headers was seen */
};

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t n = size * nmemb;
    if (evd_buf_append(&x->resp->body, ptr, n) != 0) {
        x->overflow = true;
        return 0;
    }
    return n;
}

/* Keeps a header that says something about rate limits (name lower-cased). */
static void keep_rl_header(struct evd_hx_http_resp *resp, const char *line, size_t n)
{
    static const char *const prefixes[] = {"retry-after", "x-ratelimit-", "anthropic-ratelimit-"};
    const char *colon = memchr(line, ':', n);
    size_t nl = colon ? (size_t)(colon - line) : 0;
    int max = (int)(sizeof(resp->rl_headers) / sizeof(resp->rl_headers[0]));
    if (colon == NULL || nl == 0 || nl >= sizeof(resp->rl_headers[0].name) ||
        resp->n_rl_headers >= max)
        return;
    bool wanted = false;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]) && !wanted; i++)
        wanted = nl >= strlen(prefixes[i]) && strncasecmp(line, prefixes[i], strlen(prefixes[i])) == 0;
    if (!wanted)
        return;
    const char *v = colon + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    if ((size_t)(end - v) >= sizeof(resp->rl_headers[0].value))
        return;
    char *name = resp->rl_headers[resp->n_rl_headers].name;
    for (size_t i = 0; i < nl; i++)
        name[i] = (char)tolower((unsigned char)line[i]);
    name[nl] = '\0';
    memcpy(resp->rl_headers[resp->n_rl_headers].value, v, (size_t)(end - v));
    resp->rl_headers[resp->n_rl_headers].value[end - v] = '\0';
    resp->n_rl_headers++;
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t n = size * nmemb;
    static const char name[] = "retry-after:";
    if (n <= 2 && (ptr[0] == '\r' || ptr[0] == '\n')) {
        x->headers_done = true; /* (a 1xx block ends the same way; a later one reopens) */
    } else {
        if (x->headers_done)
            x->resp->n_rl_headers = 0; /* a new block: what the previous one said is moot */
        x->headers_done = false;
        keep_rl_header(x->resp, ptr, n);
    }
    if (n > sizeof(name) - 1 && n < 256 && strncasecmp(ptr, name, sizeof(name) - 1) == 0) {
        char v[256];
        size_t vn = n - (sizeof(name) - 1);
        memcpy(v, ptr + sizeof(name) - 1, vn);
        v[vn] = '\0';
        x->resp->retry_after_ms = evd_hx_parse_retry_after(v, evd_now_ms());
    }
    return n;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    struct xfer *x = ud;
    if (evd_cancel_is_set(x->cancel))
        return 1;
    return 0;
}

static pthread_once_t multi_once = PTHREAD_ONCE_INIT;
static pthread_key_t multi_key;

static void multi_free(void *m)
{
    curl_multi_cleanup(m);
}

static void multi_key_init(void)
{
    pthread_key_create(&multi_key, multi_free);
}

/* The calling thread's multi handle (created on first use), or NULL without memory. */
static CURLM *thread_multi(void)
{
    pthread_once(&multi_once, multi_key_init);
    CURLM *m = pthread_getspecific(multi_key);
    if (m == NULL && (m = curl_multi_init()) != NULL) {
        curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, 8L);
        if (pthread_setspecific(multi_key, m) != 0) {
            curl_multi_cleanup(m);
            m = NULL;
        }
    }
    return m;
}

void evd_harness_thread_cleanup(void)
{
    pthread_once(&multi_once, multi_key_init);
    CURLM *m = pthread_getspecific(multi_key);
    if (m != NULL) {
        pthread_setspecific(multi_key, NULL);
        curl_multi_cleanup(m);
    }
}

/* The longest a transfer's poll sleeps without looking at its deadlines. */
#define POLL_MAX_MS 1000

static void wake_multi(void *multi)
{
    curl_multi_wakeup(multi);
}

/* The codes libcurl ends a transfer with when a response header exceeds its limit. */
static bool header_limit(CURLcode rc)
{
#if LIBCURL_VERSION_NUM >= 0x080600
    if (rc == CURLE_TOO_LARGE)
        return true;
#endif
    return rc == CURLE_OUT_OF_MEMORY;
}

CURLcode evd_hx_http_post(struct evd_hx_client *cl, const char *url, struct curl_slist *headers,
                          const char *body, size_t body_len, int64_t deadline_ms,
                          struct evd_cancel *cancel, struct evd_hx_http_resp *resp)
{
    struct xfer x = {resp, cancel, deadline_ms, false, false};
    CURLM *multi = cl->multi;
    CURL *easy = cl->easy;
    CURLcode rc = CURLE_OK;
    bool added = false;
    struct evd_cancel_waker waker = {wake_multi, multi, NULL};

    memset(resp, 0, sizeof(*resp));
    resp->retry_after_ms = -1;
    resp->body.limit = EVD_HX_MAX_BODY;
    int64_t left = deadline_ms - evd_mono_ms();
    if (evd_cancel_is_set(cancel)) {
        resp->cancelled = true;
        return CURLE_ABORTED_BY_CALLBACK;
    }
    if (left <= 0) {
        resp->timed_out = true;
        return CURLE_OPERATION_TIMEDOUT;
    }
    curl_easy_reset(easy);
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_POST, 1L);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(easy, CURLOPT_XFERINFODATA, &x);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)left);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, (long)(left < 10000 ? left : 10000));
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, resp->curl_error);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(easy, CURLOPT_USERAGENT, "evald/" EVALD_VERSION);

    if (curl_multi_add_handle(multi, easy) != CURLM_OK) {
        rc = CURLE_OUT_OF_MEMORY;
        goto out;
    }
    added = true;
    /* The poll below sleeps until the transfer has something to do, the invocation
     * deadline, or the token (its trigger wakes the poll); at most a second, so that a
     * token's deadline moved later is looked at again. A thousand calls in flight that
     * woke every 50 ms to look at their tokens cost more CPU than the calls. */
    evd_cancel_watch(cancel, &waker);
    int running = 1;
    while (running) {
        if (curl_multi_perform(multi, &running) != CURLM_OK) {
            rc = CURLE_OUT_OF_MEMORY;
            goto out;
        }
        if (!running)
            break;
        if (evd_cancel_is_set(cancel)) {
            resp->cancelled = true;
            rc = CURLE_ABORTED_BY_CALLBACK;
            goto out;
        }
        if (evd_mono_ms() >= deadline_ms) {
            resp->timed_out = true;
            rc = CURLE_OPERATION_TIMEDOUT;
            goto out;
        }
        int64_t now = evd_mono_ms(), until = deadline_ms;
        int64_t token_deadline = evd_cancel_deadline(cancel);
        if (token_deadline > 0 && token_deadline < until)
            until = token_deadline;
        int64_t wait = until - now;
        if (wait > POLL_MAX_MS)
            wait = POLL_MAX_MS;
        curl_multi_poll(multi, NULL, 0, wait > 0 ? (int)wait : 0, NULL);
    }
    CURLMsg *m;
    int q;
    rc = CURLE_GOT_NOTHING;
    while ((m = curl_multi_info_read(multi, &q)) != NULL)
        if (m->msg == CURLMSG_DONE && m->easy_handle == easy)
            rc = m->data.result;
    if (rc == CURLE_ABORTED_BY_CALLBACK && evd_cancel_is_set(cancel))
        resp->cancelled = true;
    if (rc == CURLE_OPERATION_TIMEDOUT)
        resp->timed_out = true;
    if (x.overflow) {
        resp->too_large = true;
        snprintf(resp->curl_error, sizeof(resp->curl_error), "response body larger than %u bytes",
                 EVD_HX_MAX_BODY);
    } else if (header_limit(rc) && !x.headers_done) {
        /* libcurl keeps the header line being read in a buffer capped at
         * CURL_MAX_HTTP_HEADER; a longer line ends the transfer with
         * CURLE_OUT_OF_MEMORY and no message (CURLE_TOO_LARGE from 8.6 on). Nothing
         * else in the header phase allocates enough to fail first. */
        resp->too_large = true;
        snprintf(resp->curl_error, sizeof(resp->curl_error),
                 "response header too large (a header line longer than %d bytes)",
                 CURL_MAX_HTTP_HEADER);
    }
    if (rc == CURLE_OK)
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &resp->status);
out:
    resp->curl_code = rc;
    if (added) {
        evd_cancel_unwatch(cancel, &waker);
        curl_multi_remove_handle(multi, easy); /* the connection stays in the multi's pool */
    }
    return rc;
}

bool evd_hx_client_open(struct evd_hx_client *cl)
{
    /* The multi handle (and so the connection cache) is the thread's, kept across runs:
     * consecutive runs on a worker reuse their provider connections. */
    cl->multi = thread_multi();
    cl->easy = curl_easy_init();
    if (cl->multi == NULL || cl->easy == NULL) {
        evd_hx_client_close(cl);
        return false;
    }
    return true;
}

void evd_hx_client_close(struct evd_hx_client *cl)
{
    if (cl == NULL)
        return;
    if (cl->easy != NULL)
        curl_easy_cleanup(cl->easy);
    cl->easy = NULL;
    cl->multi = NULL; /* the thread's, freed at thread exit */
}

void evd_hx_http_resp_free(struct evd_hx_http_resp *resp)
{
    evd_buf_free(&resp->body);
}

int64_t evd_hx_parse_retry_after(const char *value, int64_t now_wall_ms)
{
    while (*value == ' ' || *value == '\t')
        value++;
    char v[128];
    size_t n = strcspn(value, "\r\n");
    if (n == 0 || n >= sizeof(v))
        return -1;
    memcpy(v, value, n);
    v[n] = '\0';
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        v[--n] = '\0';
    if (strspn(v, "0123456789.") == n) {
        double s = strtod(v, NULL);
        if (s < 0 || s > 86400)
            return -1;
        return (int64_t)(s * 1000.0);
    }
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (end == NULL || *end != '\0')
        return -1;
    int64_t at = (int64_t)timegm(&tm) * 1000;
    int64_t d = at - now_wall_ms;
    return d < 0 ? 0 : d;
}

int64_t evd_hx_backoff_ms(int attempt)
{
    int64_t base = 500;
    for (int i = 2; i < attempt && base < 8000; i++)
        base *= 2;
    if (base > 8000)
        base = 8000;
    unsigned int r = 0;
    if (RAND_bytes((unsigned char *)&r, sizeof(r)) != 1)
        r = (unsigned int)evd_mono_ms();
    /* "Equal jitter": half fixed, half random. */
    return base / 2 + (int64_t)(r % (unsigned int)(base / 2 + 1));
}

/*
 * Replaces every occurrence of needle in s, in place. A needle shorter than `with` (which
 * cannot grow s) becomes as many '*' as it has bytes, so that short keys are hidden too.
 */
static void replace_all(char *s, const char *needle, const char *with)
{
    size_t nl = strlen(needle), wl = strlen(with);
    if (nl == 0)
        return;
    char *p = s;
    while ((p = strstr(p, needle)) != NULL) {
        if (wl > nl) {
            memset(p, '*', nl);
            p += nl;
            continue;
        }
        memcpy(p, with, wl);
        memmove(p + wl, p + nl, strlen(p + nl) + 1);
        p += wl;
    }
}

void evd_hx_scrub(char *s, const char *secret)
{
    if (s == NULL)
        return;
    if (secret != NULL && strlen(secret) >= 4)
        replace_all(s, secret, "[redacted]");
    /* Provider messages sometimes echo part of a key ("sk-proj-****abcd"). */
    for (char *p = s; (p = strstr(p, "sk-")) != NULL;) {
        if (p != s && (isalnum((unsigned char)p[-1]) || p[-1] == '-' || p[-1] == '_')) {
            p += 3;
            continue;
        }
        char *e = p + 3;
        while (isalnum((unsigned char)*e) || *e == '-' || *e == '_' || *e == '*')
            e++;
        memcpy(p, "sk-***", 6 <= e - p ? 6 : (size_t)(e - p));
        char *after = p + (6 <= e - p ? 6 : (e - p));
        memmove(after, e, strlen(e) + 1);
        p = after;
    }
}

void evd_hx_error_detail(const char *body, size_t len, char *out, size_t outsz)
{
    json_error_t je;
    json_t *doc = body != NULL && len > 0 ? json_loadb(body, len, 0, &je) : NULL;
    const char *msg = NULL;
    out[0] = '\0';
    if (doc != NULL) {
        json_t *e = json_object_get(doc, "error");
        msg = json_string_value(json_object_get(e, "message"));
        if (msg == NULL)
            msg = json_string_value(e);
        if (msg == NULL)
            msg = json_string_value(json_object_get(doc, "message"));
        if (msg == NULL)
            msg = json_string_value(json_object_get(doc, "detail"));
    }
    if (msg != NULL) {
        snprintf(out, outsz, "%.200s", msg);
    } else if (body != NULL && len > 0) {
        size_t n = len < 200 ? len : 200;
        n = n < outsz - 1 ? n : outsz - 1;
        for (size_t i = 0; i < n; i++)
            out[i] = (body[i] >= 0x20 && body[i] < 0x7f) ? body[i] : ' ';
        out[n] = '\0';
    } else {
        snprintf(out, outsz, "empty body");
    }
    json_decref(doc);
}

static bool retryable_status(long s)
{
    return s == 429 || (s >= 500 && s <= 599);
}

static bool retryable_curl(CURLcode c)
{
    switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return true;
    default:
        return false;
    }
}

static struct curl_slist *provider_headers(const struct evd_provider *pr, const char *session_id)
{
    struct curl_slist *h = NULL, *t;
    char line[2048];
    const char *key = evd_provider_api_key(pr);
#define ADD(s)                                                                                     \
    do {                                                                                           \
        if ((t = curl_slist_append(h, (s))) == NULL)                                               \
            goto fail;                                                                             \
        h = t;                                                                                     \
    } while (0)
    ADD("Content-Type: application/json");
    ADD("Accept: application/json");
    ADD("Expect:");
    snprintf(line, sizeof(line), "X-Evald-Session: %.200s", session_id ? session_id : "");
    ADD(line);
    if (evd_provider_kind(pr) == EVD_KIND_ANTHROPIC_MESSAGES) {
        ADD("anthropic-version: 2023-06-01");
        if (key != NULL) {
            snprintf(line, sizeof(line), "x-api-key: %s", key);
            ADD(line);
        }
    } else if (key != NULL) {
        snprintf(line, sizeof(line), "Authorization: Bearer %s", key);
        ADD(line);
    }
#undef ADD
    memset(line, 0, sizeof(line));
    return h;
fail:
    memset(line, 0, sizeof(line));
    curl_slist_free_all(h);
    return NULL;
}

/* curl_slist_free_all after wiping the key-bearing lines. */
static void free_headers(struct curl_slist *h)
{
    for (struct curl_slist *p = h; p != NULL; p = p->next) {
        volatile char *c = p->data;
        while (*c)
            *c++ = '\0';
    }
    curl_slist_free_all(h);
}

/* evd_rl_parse_headers' lookup over the headers an answer kept. */
static const char *rl_lookup(void *ctx, const char *name)
{
    const struct evd_hx_http_resp *resp = ctx;
    for (int i = 0; i < resp->n_rl_headers; i++)
        if (strcmp(resp->rl_headers[i].name, name) == 0)
            return resp->rl_headers[i].value;
    return NULL;
}

void evd_hx_provider_call(struct evd_hx_client *cl, const struct evd_provider *pr,
                          const char *model, json_t *body, const char *session_id,
                          int64_t scenario_deadline_ms, int invocation_timeout_s,
                          struct evd_cancel *cancel, struct evd_hx_call *call)
{
    const char *name = evd_provider_name(pr);
    const char *key = evd_provider_api_key(pr);
    char url[1200];
    char detail[256];
    char *text = NULL;
    struct curl_slist *headers = NULL;
    int64_t t0 = evd_mono_ms();
    int64_t deadline_ms = 0; /* the invocation deadline: set when the first attempt is sent */
    struct evd_hx_limiter *lim = evd_hx_limiter_get(pr, model);
    double est_tokens = 0;
    enum { MAX_ATTEMPTS = 8 };

    memset(call, 0, sizeof(*call));
    snprintf(url, sizeof(url), "%s%s", evd_provider_base_url(pr),
             evd_hx_endpoint(evd_provider_kind(pr)));
    text = json_dumps(body, JSON_COMPACT);
    headers = provider_headers(pr, session_id);
    if (text == NULL || headers == NULL) {
        call->code = EVD_ENOMEM;
        snprintf(call->error, sizeof(call->error), "out of memory building the %s request", name);
        goto out;
    }
    double raw_tokens = (double)strlen(text) / 4.0; /* about four bytes a token */
    for (;;) {
        /* What calls to this model used per estimated token, learnt from their usage. */
        est_tokens = evd_hx_limiter_estimate(lim, raw_tokens);
        struct evd_hx_http_resp resp;
        /* Waiting for the limiter is not part of the invocation timeout: its deadline moves
         * on by the time waited. The scenario deadline stays where it is. */
        int64_t waited = 0;
        enum evd_code wrc = evd_hx_limiter_wait(lim, est_tokens, scenario_deadline_ms, cancel,
                                                &waited);
        call->limiter_wait_ms += waited;
        if (call->nretries > 0 && call->retries[call->nretries - 1].wait_ms == 0)
            call->retries[call->nretries - 1].wait_ms = waited; /* a 429's hold */
        if (deadline_ms == 0)
            deadline_ms = evd_mono_ms() + (int64_t)invocation_timeout_s * 1000;
        else
            deadline_ms += waited;
        if (deadline_ms > scenario_deadline_ms)
            deadline_ms = scenario_deadline_ms;
        if (wrc == EVD_ECANCELLED) {
            call->code = EVD_ECANCELLED;
            snprintf(call->error, sizeof(call->error), "%s call cancelled", name);
            break;
        }
        if (wrc != EVD_OK) {
            call->code = EVD_ETIMEOUT;
            call->scenario_timeout = true;
            snprintf(call->error, sizeof(call->error),
                     "%s call still waiting for the rate limit at the scenario timeout", name);
            break;
        }
        call->attempts++;
        evd_hx_http_post(cl, url, headers, text, strlen(text), deadline_ms, cancel, &resp);
        call->status = resp.status;
        struct evd_rl_observed obs;
        evd_rl_parse_headers(rl_lookup, &resp, evd_now_ms(), &obs);
        if (obs.retry_after_ms < 0 && resp.retry_after_ms >= 0)
            obs.retry_after_ms = resp.retry_after_ms;
        /* A 2xx body is read here, so that the limiter learns the tokens the call used (its
         * usage) in place of the estimate it reserved. */
        bool answered = !resp.cancelled && !resp.timed_out && !resp.too_large &&
                        resp.curl_code == CURLE_OK && resp.status >= 200 && resp.status < 300;
        json_error_t je;
        json_t *parsed = answered ? json_loadb(resp.body.data ? resp.body.data : "",
                                               resp.body.len, 0, &je)
                                  : NULL;
        evd_hx_limiter_done(lim, resp.curl_code == CURLE_OK ? resp.status : 0, est_tokens,
                            raw_tokens, evd_hx_usage_tokens(evd_provider_kind(pr), parsed), &obs);
        bool retry = false;
        int64_t wait_ms = -1;
        if (resp.cancelled) {
            call->code = EVD_ECANCELLED;
            snprintf(call->error, sizeof(call->error), "%s call cancelled", name);
        } else if (resp.timed_out) {
            call->code = EVD_ETIMEOUT;
            call->scenario_timeout = deadline_ms == scenario_deadline_ms;
            snprintf(call->error, sizeof(call->error), "%s call exceeded %ds invocation timeout",
                     name, invocation_timeout_s);
        } else if (resp.too_large) {
            /* The provider answered, but more than evald reads: not worth a retry. */
            call->code = EVD_EUPSTREAM;
            snprintf(call->error, sizeof(call->error), "provider %s sent a %s", name,
                     resp.curl_error);
        } else if (resp.curl_code != CURLE_OK) {
            call->code = EVD_EUPSTREAM;
            snprintf(call->error, sizeof(call->error), "could not reach %s: %s", name,
                     resp.curl_error[0] ? resp.curl_error : curl_easy_strerror(resp.curl_code));
            retry = retryable_curl(resp.curl_code);
        } else if (resp.status >= 200 && resp.status < 300) {
            call->body = parsed;
            parsed = NULL;
            if (call->body != NULL && json_is_object(call->body)) {
                call->code = EVD_OK;
                call->error[0] = '\0';
            } else {
                json_decref(call->body);
                call->body = NULL;
                call->code = EVD_EUPSTREAM;
                snprintf(call->error, sizeof(call->error),
                         "%s returned %ld with a malformed body: %s", name, resp.status, je.text);
                retry = true;
            }
        } else {
            evd_hx_error_detail(resp.body.data, resp.body.len, detail, sizeof(detail));
            call->code = EVD_EUPSTREAM;
            snprintf(call->error, sizeof(call->error), "%s returned %ld: %s", name, resp.status,
                     detail);
            retry = retryable_status(resp.status);
            wait_ms = resp.retry_after_ms;
            if (resp.status == 429 && lim != NULL)
                wait_ms = 0; /* the limiter holds every call to the provider (evd_rl_done) */
        }
        json_decref(parsed); /* NULL unless a branch above did not take it */
        evd_hx_http_resp_free(&resp);
        if (!retry || call->attempts >= MAX_ATTEMPTS)
            break;
        if (wait_ms < 0)
            wait_ms = evd_hx_backoff_ms(call->attempts + 1);
        if (evd_mono_ms() + wait_ms >= deadline_ms) {
            /* Waiting would pass the invocation timeout: report the last failure. */
            break;
        }
        if (call->nretries < (int)(sizeof(call->retries) / sizeof(call->retries[0]))) {
            call->retries[call->nretries].at_ms = evd_now_ms();
            call->retries[call->nretries].status = call->status;
            call->retries[call->nretries].wait_ms = wait_ms;
            call->nretries++;
        }
        char st[24], at[16], wt[24];
        snprintf(st, sizeof(st), "%ld", call->status);
        snprintf(at, sizeof(at), "%d", call->attempts);
        snprintf(wt, sizeof(wt), "%lld", (long long)wait_ms);
        evd_log(EVD_LOG_WARN, "provider call failed, retrying", "provider", name, "status", st,
                "attempt", at, "wait_ms", wt, "session_id", session_id, (char *)NULL);
        if (evd_cancel_sleep(cancel, wait_ms)) {
            call->code = EVD_ECANCELLED;
            snprintf(call->error, sizeof(call->error), "%s call cancelled", name);
            break;
        }
    }
out:
    evd_hx_scrub(call->error, key);
    call->latency_ms = evd_mono_ms() - t0;
    free(text);
    free_headers(headers);
}
