/*
 * JSON-lines logger; see log.h. A line is built in a bounded stack buffer, escaped by
 * hand (invalid UTF-8 becomes U+FFFD), and shortened field by field so that it always
 * ends with "}\n" and parses. Writes are serialised by one mutex so that a line longer
 * than PIPE_BUF still reaches a pipe whole.
 */
#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/json.h"
#include "common/util.h"

static atomic_int min_level = EVD_LOG_INFO;
static pthread_mutex_t write_mu = PTHREAD_MUTEX_INITIALIZER;
/* The run this thread works on (evd_log_set_trace): hex ids, "" when none. */
static _Thread_local char thread_trace[33], thread_span[17];

void evd_log_set_trace(const char *trace_hex, const char *span_hex)
{
    snprintf(thread_trace, sizeof(thread_trace), "%s",
             trace_hex && span_hex ? trace_hex : "");
    snprintf(thread_span, sizeof(thread_span), "%s", trace_hex && span_hex ? span_hex : "");
}

void evd_log_set_level(enum evd_log_level level)
{
    atomic_store(&min_level, (int)level);
}

int evd_log_level_parse(const char *s)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

struct line {
    char buf[EVD_LOG_LINE_MAX];
    size_t len;
};

/* Room left for content: the closing "}\n" is always kept free. */
static size_t room(const struct line *l)
{
    return sizeof(l->buf) - 2 - l->len;
}

static bool put(struct line *l, const char *s, size_t n)
{
    if (n > room(l))
        return false;
    memcpy(l->buf + l->len, s, n);
    l->len += n;
    return true;
}

/*
 * The JSON form of the character that starts s[0..n): sets *used to the input bytes it
 * takes and returns its text (into esc, or s itself) with its length in *outn.
 */
static const char *unit(const unsigned char *s, size_t n, char esc[8], size_t *used, size_t *outn)
{
    unsigned char c = s[0];
    *used = 1;
    if (c < 0x80) {
        const char *e = evd_json_escape(c, esc);
        if (e == NULL) {
            *outn = 1;
            return (const char *)s;
        }
        *outn = strlen(e);
        return e;
    }
    size_t k = evd_utf8_seq(s, n);
    if (k == 0) {
        *outn = 6;
        return "\\ufffd";
    }
    *used = k;
    *outn = k;
    return (const char *)s;
}

/* Bytes s[0..n) take as the inside of a JSON string. */
static size_t escaped_len(const char *s, size_t n)
{
    size_t total = 0;
    char esc[8];
    for (size_t i = 0; i < n;) {
        size_t used, outn;
        unit((const unsigned char *)s + i, n - i, esc, &used, &outn);
        total += outn;
        i += used;
    }
    return total;
}

/*
 * Writes s[0..n) as a JSON string of at most `cap` bytes (quotes included), shortened
 * with a marker when it is longer. Returns false, writing nothing, when not even the
 * marker fits.
 */
static bool put_str(struct line *l, const char *s, size_t n, size_t cap)
{
    if (cap > room(l))
        cap = room(l);
    size_t full = escaped_len(s, n);
    if (full + 2 <= cap) {
        size_t at = l->len;
        l->buf[at++] = '"';
        char esc[8];
        for (size_t i = 0; i < n;) {
            size_t used, outn;
            const char *t = unit((const unsigned char *)s + i, n - i, esc, &used, &outn);
            memcpy(l->buf + at, t, outn);
            at += outn;
            i += used;
        }
        l->buf[at++] = '"';
        l->len = at;
        return true;
    }
    char marker[64];
    int mn = snprintf(marker, sizeof(marker), EVD_LOG_TRUNCATED ", %zu bytes in all]", n);
    if (mn < 0 || (size_t)mn + 2 > cap)
        return false;
    size_t budget = cap - 2 - (size_t)mn; /* for the kept prefix */
    size_t at = l->len;
    l->buf[at++] = '"';
    char esc[8];
    for (size_t i = 0, out = 0; i < n;) {
        size_t used, outn;
        const char *t = unit((const unsigned char *)s + i, n - i, esc, &used, &outn);
        if (out + outn > budget)
            break;
        memcpy(l->buf + at, t, outn);
        at += outn;
        out += outn;
        i += used;
    }
    memcpy(l->buf + at, marker, (size_t)mn);
    at += (size_t)mn;
    l->buf[at++] = '"';
    l->len = at;
    return true;
}

/* A JSON number in the grammar of RFC 8259: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool json_number(const char *s)
{
    if (*s == '-')
        s++;
    if (*s == '0')
        s++;
    else if (*s >= '1' && *s <= '9')
        while (*s >= '0' && *s <= '9')
            s++;
    else
        return false;
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9')
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (*s < '0' || *s > '9')
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

static bool numeric_key(const char *k)
{
    size_t n = strlen(k);
    return strcmp(k, "status") == 0 || (n > 3 && strcmp(k + n - 3, "_ms") == 0) ||
           strcmp(k, "attempt") == 0 || strcmp(k, "worker") == 0;
}

/* Appends ,"key":value; a field that does not fit at all is left out whole. */
static void put_field(struct line *l, const char *k, const char *v)
{
    size_t mark = l->len;
    size_t vn = strlen(v);
    if (!put(l, ",", 1) || !put_str(l, k, strlen(k), EVD_LOG_KEY_MAX) || !put(l, ":", 1))
        goto drop;
    if (numeric_key(k) && vn <= 32 && json_number(v)) {
        if (!put(l, v, vn))
            goto drop;
    } else if (!put_str(l, v, vn, EVD_LOG_FIELD_MAX)) {
        goto drop;
    }
    return;
drop:
    l->len = mark;
}

static void write_line(const char *buf, size_t len)
{
    pthread_mutex_lock(&write_mu);
    while (len > 0) {
        ssize_t w = write(STDERR_FILENO, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        buf += w;
        len -= (size_t)w;
    }
    pthread_mutex_unlock(&write_mu);
}

static void emit(enum evd_log_level level, const char *msg, size_t msglen, const char *source,
                 va_list *ap)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    struct line l = {.len = 0};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char tbuf[64];
    size_t tn = strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(tbuf + tn, sizeof(tbuf) - tn, ".%03ldZ", ts.tv_nsec / 1000000);
    /* These fit whatever the input: the buffer is far larger than their caps. */
    put(&l, "{\"ts\":", 6);
    put_str(&l, tbuf, strlen(tbuf), sizeof(tbuf));
    put(&l, ",\"level\":", 9);
    put_str(&l, names[level], strlen(names[level]), 16);
    put(&l, ",\"msg\":", 7);
    put_str(&l, msg, msglen, EVD_LOG_FIELD_MAX);
    if (source != NULL)
        put_field(&l, "source", source);
    while (ap != NULL) {
        const char *k = va_arg(*ap, const char *);
        if (k == NULL)
            break;
        const char *v = va_arg(*ap, const char *);
        if (v == NULL)
            continue;
        put_field(&l, k, v);
    }
    if (thread_trace[0] != '\0') {
        put_field(&l, "trace_id", thread_trace);
        put_field(&l, "span_id", thread_span);
    }
    l.buf[l.len++] = '}';
    l.buf[l.len++] = '\n';
    write_line(l.buf, l.len);
}

void evd_log(enum evd_log_level level, const char *msg, ...)
{
    if ((int)level < atomic_load(&min_level))
        return;
    va_list ap;
    va_start(ap, msg);
    emit(level, msg, strlen(msg), NULL, &ap);
    va_end(ap);
}

/* msg[0..n) without trailing newlines and spaces. */
static size_t trimmed(const char *msg, size_t n)
{
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r' || msg[n - 1] == ' '))
        n--;
    return n;
}

void evd_log_external(void *source, const char *fmt, va_list ap)
{
    if (EVD_LOG_WARN < atomic_load(&min_level))
        return;
    char text[EVD_LOG_FIELD_MAX];
    int n = vsnprintf(text, sizeof(text), fmt, ap);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1;
    emit(EVD_LOG_WARN, text, trimmed(text, len), source ? source : "library", NULL);
}

void evd_log_pq_notice(void *arg, const char *message)
{
    (void)arg;
    static const struct {
        const char *prefix;
        enum evd_log_level level;
    } severities[] = {
        {"DEBUG:", EVD_LOG_DEBUG}, {"LOG:", EVD_LOG_INFO},     {"INFO:", EVD_LOG_INFO},
        {"NOTICE:", EVD_LOG_INFO}, {"WARNING:", EVD_LOG_WARN},
    };
    enum evd_log_level level = EVD_LOG_WARN;
    for (size_t i = 0; i < sizeof(severities) / sizeof(severities[0]); i++)
        if (strncmp(message, severities[i].prefix, strlen(severities[i].prefix)) == 0)
            level = severities[i].level;
    if ((int)level < atomic_load(&min_level))
        return;
    emit(level, message, trimmed(message, strlen(message)), "libpq", NULL);
}
