/*
 * Small helpers of evald-cli's commands (cli/main.c): files, outputs, clocks and text. See
 * cli.h.
 */
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli/cli.h"

char *cli_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *data = NULL;
    size_t cap = 0;
    *len = 0;
    for (;;) {
        if (*len + 65536 + 1 > cap) {
            cap = cap ? cap * 2 : 131072;
            char *d = realloc(data, cap);
            if (d == NULL) {
                free(data);
                fclose(f);
                return NULL;
            }
            data = d;
        }
        size_t n = fread(data + *len, 1, cap - *len - 1, f);
        *len += n;
        if (n == 0)
            break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(data);
        return NULL;
    }
    data[*len] = '\0';
    return data;
}

bool cli_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

/* Opens PATH for writing ("-" is stdout); NULL with a message. */
FILE *cli_open_out(const char *path)
{
    if (strcmp(path, "-") == 0)
        return stdout;
    FILE *f = fopen(path, "w");
    if (f == NULL)
        fprintf(stderr, "evald-cli: cannot write %s: %s\n", path, strerror(errno));
    return f;
}

bool cli_close_out(FILE *f, const char *path)
{
    if (f == stdout)
        return fflush(f) == 0;
    if (fclose(f) != 0) {
        fprintf(stderr, "evald-cli: cannot write %s: %s\n", path, strerror(errno));
        return false;
    }
    return true;
}

void cli_print_json(const json_t *v)
{
    char *text = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text != NULL)
        puts(text);
    free(text);
}

double cli_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A JSON number as short text, "n/a" otherwise. */
const char *cli_num_text(char *buf, size_t n, const json_t *v)
{
    if (json_is_integer(v))
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
    else if (json_is_number(v))
        snprintf(buf, n, "%.4g", json_number_value(v));
    else
        snprintf(buf, n, "n/a");
    return buf;
}

const char *cli_count_text(char *buf, size_t n, long long v)
{
    char digits[32];
    int len = snprintf(digits, sizeof(digits), "%llu",
                       v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v);
    size_t o = 0;
    if (v < 0 && o + 1 < n)
        buf[o++] = '-';
    for (int i = 0; i < len && o + 1 < n; i++) {
        if (i > 0 && (len - i) % 3 == 0 && o + 2 < n)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o < n ? o : n - 1] = '\0';
    return buf;
}

const char *cli_usd_text(char *buf, size_t n, double usd)
{
    long long cents = isfinite(usd) && usd < 1e15 ? llround(usd * 100) : 0;
    if (cents >= 100000) {
        char whole[40];
        snprintf(buf, n, "$%s.%02lld", cli_count_text(whole, sizeof(whole), cents / 100),
                 cents % 100);
    } else if (usd >= 0.01 || usd <= 0) {
        snprintf(buf, n, "$%.2f", usd);
    } else {
        snprintf(buf, n, "$%.2g", usd); /* a fraction of a cent: two significant digits */
    }
    return buf;
}

/* The first max characters of s (UTF-8; NULL: "") into buf, never cut inside one. */
void cli_utf8_cut(char *buf, size_t n, size_t max, const char *s)
{
    size_t len = 0, chars = 0;
    for (; s != NULL && s[len] != '\0'; len++) {
        bool starts = ((unsigned char)s[len] & 0xC0) != 0x80;
        if (starts && chars++ == max)
            break;
    }
    if (len >= n) { /* the buffer is short: cut before the character that does not fit */
        len = n - 1;
        while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
            len--;
    }
    snprintf(buf, n, "%.*s", (int)len, s != NULL ? s : "");
}

const char *cli_url_escape(const char *s, char *buf, size_t n)
{
    char *e = curl_easy_escape(NULL, s, 0);
    snprintf(buf, n, "%s", e != NULL ? e : "");
    curl_free(e);
    return buf;
}
