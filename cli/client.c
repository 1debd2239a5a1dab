/*
 * The HTTP client of evald-cli: one easy handle a call, explicit timeouts, the bearer
 * token, and a Server-Sent Events reader over a streaming call. See cli.h.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

volatile int cli_interrupted;

/* Bodies of answers are bounded: an experiment document of 10,000 cases is a few MB. */
#define ANSWER_MAX (256u << 20)

struct sink {
    char *data;
    size_t len, cap;
    bool over;
};

static size_t on_body(char *p, size_t size, size_t n, void *cls)
{
    struct sink *s = cls;
    size_t len = size * n;
    if (s->len + len + 1 > ANSWER_MAX) {
        s->over = true;
        return 0;
    }
    if (s->len + len + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->len + len + 1)
            cap *= 2;
        char *d = realloc(s->data, cap);
        if (d == NULL)
            return 0;
        s->data = d;
        s->cap = cap;
    }
    memcpy(s->data + s->len, p, len);
    s->len += len;
    s->data[s->len] = '\0';
    return len;
}

void cli_answer_free(struct cli_answer *a)
{
    json_decref(a->json);
    free(a->body);
    memset(a, 0, sizeof(*a));
}

static struct curl_slist *headers_for(const struct cli_conn *c, const char *accept,
                                      const char *content_type, const char *idempotency_key)
{
    char line[1024];
    snprintf(line, sizeof(line), "Accept: %s", accept);
    struct curl_slist *h = curl_slist_append(NULL, line);
    if (idempotency_key != NULL) {
        snprintf(line, sizeof(line), "Idempotency-Key: %s", idempotency_key);
        h = curl_slist_append(h, line);
    }
    if (content_type != NULL) {
        snprintf(line, sizeof(line), "Content-Type: %s", content_type);
        h = curl_slist_append(h, line);
    }
    if (c->token != NULL && *c->token != '\0') {
        snprintf(line, sizeof(line), "Authorization: Bearer %s", c->token);
        h = curl_slist_append(h, line);
    }
    return curl_slist_append(h, "Expect:");
}

static int abort_on_interrupt(void *p, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)p, (void)a, (void)b, (void)c, (void)d;
    return cli_interrupted ? 1 : 0;
}

static CURL *easy_for(const struct cli_conn *c, const char *method, const char *path, char *url,
                      size_t urlsz)
{
    CURL *h = curl_easy_init();
    if (h == NULL)
        return NULL;
    snprintf(url, urlsz, "%s%s", c->url, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "evald-cli/" EVALD_VERSION);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, abort_on_interrupt);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    return h;
}

static enum cli_exit call_keyed(const struct cli_conn *c, const char *method, const char *path,
                                 const char *content_type, const char *body, size_t len,
                                 const char *idempotency_key, struct cli_answer *a);

enum cli_exit cli_call(const struct cli_conn *c, const char *method, const char *path,
                       const char *content_type, const char *body, size_t len, struct cli_answer *a)
{
    return call_keyed(c, method, path, content_type, body, len, NULL, a);
}

enum cli_exit cli_create(const struct cli_conn *c, const char *path, const char *content_type,
                         const char *body, size_t len, int attempts, struct cli_answer *a)
{
    /* A key of this invocation's own: every attempt of this one creation sends it. */
    unsigned char r[16];
    char key[64];
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
        fprintf(stderr, "evald-cli: could not draw an Idempotency-Key\n");
        return CLI_TRANSPORT;
    }
    int n = snprintf(key, sizeof(key), "evald-cli-");
    for (size_t i = 0; i < sizeof(r); i++)
        n += snprintf(key + n, sizeof(key) - (size_t)n, "%02x", r[i]);
    unsigned wait_s = 1;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int attempt = 1;; attempt++) {
        enum cli_exit rc = call_keyed(c, "POST", path, content_type, body, len, key, a);
        bool again = (rc == CLI_TRANSPORT && !cli_interrupted) || (rc == CLI_OK && a->status == 503);
        /* Another attempt only when it can end within three timeouts of the first. */
        clock_gettime(CLOCK_MONOTONIC, &now);
        long elapsed_ms = (long)(now.tv_sec - t0.tv_sec) * 1000 +
                          (long)(now.tv_nsec - t0.tv_nsec) / 1000000;
        bool in_budget = elapsed_ms + (long)wait_s * 1000 + c->timeout_ms <= 3 * c->timeout_ms;
        if (!again || attempt >= attempts || !in_budget)
            return rc;
        if (rc == CLI_OK) {
            fprintf(stderr, "evald-cli: POST %s%s answered 503 (%.200s); trying again in %u s\n",
                    c->url, path, cli_answer_detail(a), wait_s);
            cli_answer_free(a);
        } else {
            fprintf(stderr, "evald-cli: trying again in %u s with the same Idempotency-Key\n",
                    wait_s);
        }
        sleep(wait_s);
        wait_s *= 2;
    }
}

static enum cli_exit call_keyed(const struct cli_conn *c, const char *method, const char *path,
                                 const char *content_type, const char *body, size_t len,
                                 const char *idempotency_key, struct cli_answer *a)
{
    memset(a, 0, sizeof(*a));
    char url[2048];
    CURL *h = easy_for(c, method, path, url, sizeof(url));
    if (h == NULL) {
        fprintf(stderr, "evald-cli: %s %s: out of memory\n", method, url);
        return CLI_TRANSPORT;
    }
    struct sink s = {0};
    struct curl_slist *hdrs =
        headers_for(c, "application/json", body != NULL ? content_type : NULL, idempotency_key);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    if (body != NULL) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    CURLcode rc = curl_easy_perform(h);
    enum cli_exit out = CLI_OK;
    if (rc != CURLE_OK) {
        fprintf(stderr, "evald-cli: %s %s: %s\n", method, url,
                cli_interrupted ? "interrupted"
                : s.over        ? "the answer is too large"
                                : curl_easy_strerror(rc));
        free(s.data);
        out = CLI_TRANSPORT;
    } else {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
        a->body = s.data != NULL ? s.data : strdup("");
        a->len = s.len;
        a->json = json_loadb(a->body, a->len, 0, NULL);
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return out;
}

const char *cli_answer_detail(const struct cli_answer *a)
{
    const char *d = json_string_value(json_object_get(a->json, "detail"));
    return d != NULL ? d : (a->body != NULL ? a->body : "");
}

/* What an answer of a call that must succeed means, with the message of a failure. */
static enum cli_exit judge(const struct cli_conn *c, const char *what, const char *method,
                           const char *path, struct cli_answer *a)
{
    if (a->status >= 200 && a->status < 300)
        return CLI_OK;
    if (a->status >= 400 && a->status < 500) {
        fprintf(stderr, "evald-cli: could not %s: %ld %s\n", what, a->status, cli_answer_detail(a));
        return CLI_USAGE;
    }
    fprintf(stderr, "evald-cli: could not %s: %s %s%s answered %ld: %.300s\n", what, method, c->url,
            path, a->status, cli_answer_detail(a));
    return CLI_TRANSPORT;
}

enum cli_exit cli_expect(const struct cli_conn *c, const char *what, const char *method,
                         const char *path, const char *content_type, const char *body, size_t len,
                         struct cli_answer *a)
{
    return cli_expect_retry(c, what, method, path, content_type, body, len, 1, a);
}

enum cli_exit cli_expect_retry(const struct cli_conn *c, const char *what, const char *method,
                               const char *path, const char *content_type, const char *body,
                               size_t len, int attempts, struct cli_answer *a)
{
    for (int attempt = 1;; attempt++) {
        enum cli_exit rc = cli_call(c, method, path, content_type, body, len, a);
        if (rc != CLI_OK) {
            fprintf(stderr, "evald-cli: could not %s\n", what);
            return rc;
        }
        if (a->status != 503 || attempt >= attempts)
            return judge(c, what, method, path, a);
        cli_answer_free(a);
        sleep(1);
    }
}

/* ---- Server-Sent Events --------------------------------------------------------------- */

struct stream {
    cli_event_fn on_event;
    int (*on_tick)(void *ctx);
    void *ctx;
    char *line;
    size_t len, cap;
    char event[64];
    char *data;
    size_t dlen, dcap;
    bool stop;
    long status;
    CURL *h;
    struct sink error_body; /* a non-2xx answer's body */
};

static bool grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    char *d = realloc(*buf, c);
    if (d == NULL)
        return false;
    *buf = d;
    *cap = c;
    return true;
}

/* One complete line of the stream (without its end). */
static void sse_line(struct stream *s, const char *l, size_t n)
{
    if (n == 0) {
        if (s->dlen > 0 || s->event[0] != '\0') {
            json_t *data = s->dlen > 0 ? json_loadb(s->data, s->dlen, 0, NULL) : NULL;
            if (s->on_event(s->ctx, s->event[0] ? s->event : "message", data) != 0)
                s->stop = true;
            json_decref(data);
        }
        s->event[0] = '\0';
        s->dlen = 0;
        return;
    }
    if (l[0] == ':')
        return; /* a comment: keep-alive */
    const char *colon = memchr(l, ':', n);
    size_t flen = colon != NULL ? (size_t)(colon - l) : n;
    const char *v = colon != NULL ? colon + 1 : l + n;
    size_t vlen = colon != NULL ? n - flen - 1 : 0;
    if (vlen > 0 && v[0] == ' ')
        v++, vlen--;
    if (flen == 5 && memcmp(l, "event", 5) == 0) {
        snprintf(s->event, sizeof(s->event), "%.*s", (int)vlen, v);
    } else if (flen == 4 && memcmp(l, "data", 4) == 0) {
        if (!grow(&s->data, &s->dcap, s->dlen + vlen + 2))
            return;
        if (s->dlen > 0)
            s->data[s->dlen++] = '\n';
        memcpy(s->data + s->dlen, v, vlen);
        s->dlen += vlen;
    }
}

static size_t on_stream(char *p, size_t size, size_t n, void *cls)
{
    struct stream *s = cls;
    size_t len = size * n;
    if (s->status == 0)
        curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &s->status);
    if (s->status < 200 || s->status >= 300)
        return on_body(p, size, n, &s->error_body);
    for (size_t i = 0; i < len && !s->stop; i++) {
        if (p[i] == '\n') {
            size_t l = s->len;
            if (l > 0 && s->line[l - 1] == '\r')
                l--;
            sse_line(s, s->line != NULL ? s->line : "", l);
            s->len = 0;
        } else {
            if (!grow(&s->line, &s->cap, s->len + 2))
                return 0;
            s->line[s->len++] = p[i];
        }
    }
    return s->stop ? 0 : len;
}

static int stream_tick(void *cls, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    struct stream *s = cls;
    if (cli_interrupted)
        return 1;
    if (s->on_tick != NULL && s->on_tick(s->ctx) != 0) {
        s->stop = true;
        return 1;
    }
    return 0;
}

enum cli_exit cli_follow(const struct cli_conn *c, const char *path, cli_event_fn on_event,
                         int (*on_tick)(void *ctx), void *ctx)
{
    char url[2048];
    CURL *h = easy_for(c, "GET", path, url, sizeof(url));
    if (h == NULL)
        return CLI_TRANSPORT;
    struct stream s = {.on_event = on_event, .on_tick = on_tick, .ctx = ctx, .h = h};
    struct curl_slist *hdrs = headers_for(c, "text/event-stream", NULL, NULL);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, stream_tick);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &s);
    /* No whole-call timeout: a stream lasts as long as the experiment. A silent server is
     * noticed: evald sends a keep-alive at least every 15 s. */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
    CURLcode rc = curl_easy_perform(h);
    enum cli_exit out = CLI_OK;
    if (s.status == 0)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &s.status);
    if (s.status >= 400 && s.status < 500) {
        fprintf(stderr, "evald-cli: GET %s answered %ld: %.300s\n", url, s.status,
                s.error_body.data != NULL ? s.error_body.data : "");
        out = CLI_USAGE;
    } else if (s.status != 0 && (s.status < 200 || s.status >= 300)) {
        fprintf(stderr, "evald-cli: GET %s answered %ld: %.300s\n", url, s.status,
                s.error_body.data != NULL ? s.error_body.data : "");
        out = CLI_TRANSPORT;
    } else if (rc != CURLE_OK && !s.stop && !cli_interrupted) {
        fprintf(stderr, "evald-cli: GET %s: %s\n", url, curl_easy_strerror(rc));
        out = CLI_TRANSPORT;
    }
    free(s.line);
    free(s.data);
    free(s.error_body.data);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return out;
}
