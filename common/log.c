/* JSON-lines logger; see log.h. Lines are bounded to 4 KiB and escaped by hand. */
#include "common/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int min_level = EVD_LOG_INFO;

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
    char buf[4096];
    size_t len;
};

static void put(struct line *l, const char *s, size_t n)
{
    if (l->len + n >= sizeof(l->buf) - 2)
        n = sizeof(l->buf) - 2 - l->len;
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void put_str(struct line *l, const char *s)
{
    put(l, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(l, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof(esc), "\\u%04x", c);
            put(l, esc, 6);
        } else {
            put(l, (const char *)&c, 1);
        }
    }
    put(l, "\"", 1);
}

static int numeric(const char *s)
{
    if (*s == '-')
        s++;
    if (*s == '\0')
        return 0;
    for (; *s; s++)
        if ((*s < '0' || *s > '9') && *s != '.')
            return 0;
    return 1;
}

static int numeric_key(const char *k)
{
    size_t n = strlen(k);
    return strcmp(k, "status") == 0 || (n > 3 && strcmp(k + n - 3, "_ms") == 0) ||
           strcmp(k, "attempt") == 0 || strcmp(k, "worker") == 0;
}

void evd_log(enum evd_log_level level, const char *msg, ...)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    if ((int)level < atomic_load(&min_level))
        return;
    struct line l = {.len = 0};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char tbuf[64];
    size_t tn = strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(tbuf + tn, sizeof(tbuf) - tn, ".%03ldZ", ts.tv_nsec / 1000000);
    put(&l, "{\"ts\":", 6);
    put_str(&l, tbuf);
    put(&l, ",\"level\":", 9);
    put_str(&l, names[level]);
    put(&l, ",\"msg\":", 7);
    put_str(&l, msg);
    va_list ap;
    va_start(ap, msg);
    for (;;) {
        const char *k = va_arg(ap, const char *);
        if (k == NULL)
            break;
        const char *v = va_arg(ap, const char *);
        if (v == NULL)
            continue;
        put(&l, ",", 1);
        put_str(&l, k);
        put(&l, ":", 1);
        if (numeric_key(k) && numeric(v))
            put(&l, v, strlen(v));
        else
            put_str(&l, v);
    }
    va_end(ap);
    l.buf[l.len++] = '}';
    l.buf[l.len++] = '\n';
    ssize_t w = write(STDERR_FILENO, l.buf, l.len);
    (void)w;
}
