/*
 * See json.h. The compact writer finds a real's shortest digits by asking printf for 1..17
 * significant digits and keeping the first that strtod reads back exactly; the layout then
 * follows ryu's rules. Pure; thread-safe; allocates only the output buffer and, for sorted
 * objects, a key table.
 */
#include "common/json.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *evd_json_unknown_member(const json_t *obj, const char *const *known)
{
    for (void *it = json_object_iter((json_t *)obj); it != NULL;
         it = json_object_iter_next((json_t *)obj, it)) {
        const char *key = json_object_iter_key(it);
        size_t len = json_object_iter_key_len(it);
        bool found = false;
        for (const char *const *k = known; *k != NULL && !found; k++)
            found = strlen(*k) == len && memcmp(*k, key, len) == 0;
        if (!found)
            return key;
    }
    return NULL;
}

const char *evd_json_escape(unsigned char c, char esc[7])
{
    switch (c) {
    case '"':
        return "\\\"";
    case '\\':
        return "\\\\";
    case '\b':
        return "\\b";
    case '\f':
        return "\\f";
    case '\n':
        return "\\n";
    case '\r':
        return "\\r";
    case '\t':
        return "\\t";
    default:
        break;
    }
    if (c >= 0x20)
        return NULL;
    memcpy(esc, "\\u00", 4);
    esc[4] = "0123456789abcdef"[c >> 4];
    esc[5] = "0123456789abcdef"[c & 0xf];
    esc[6] = '\0';
    return esc;
}

static bool reads_back(uint64_t mantissa, int exp10, double want)
{
    char tmp[48];
    snprintf(tmp, sizeof(tmp), "%llue%d", (unsigned long long)mantissa, exp10);
    return strtod(tmp, NULL) == want;
}

/*
 * Finds the shortest decimal m x 10^e equal to the positive finite double a when read
 * back, preferring the candidate closest to a. m has no trailing zeros.
 */
static void shortest_decimal(double a, uint64_t *m_out, int *e_out)
{
    uint64_t m = 0;
    int e = 0;
    for (int digits = 1; digits <= 17; digits++) {
        char tmp[48];
        snprintf(tmp, sizeof(tmp), "%.*e", digits - 1, a);
        /* tmp is "d.ddde[+-]xx": collect the digits and the exponent. */
        uint64_t mant = 0;
        const char *p = tmp;
        for (; *p != '\0' && *p != 'e'; p++) {
            if (*p >= '0' && *p <= '9')
                mant = mant * 10 + (uint64_t)(*p - '0');
        }
        int exp10 = atoi(p + 1) - (digits - 1);
        if (reads_back(mant, exp10, a)) {
            m = mant;
            e = exp10;
            break;
        }
        /*
         * The correctly rounded candidate misses the rounding interval, but its neighbour
         * on the other side of a may still hit it (the interval is asymmetric at powers
         * of two). Only that neighbour can: the same-side one is farther away.
         */
        double rounded = strtod(tmp, NULL);
        uint64_t other = rounded < a ? mant + 1 : mant - 1;
        if (other > 0 && reads_back(other, exp10, a)) {
            m = other;
            e = exp10;
            break;
        }
    }
    if (m == 0) {
        /* 17 significant digits always round-trip; this is unreachable for finite a. */
        m = 1;
        e = 0;
    }
    while (m % 10 == 0) {
        m /= 10;
        e++;
    }
    *m_out = m;
    *e_out = e;
}

size_t evd_json_format_real(double d, char *buf, size_t size)
{
    if (!isfinite(d) || buf == NULL || size < EVD_JSON_REAL_MAX)
        return 0;
    size_t n = 0;
    if (signbit(d))
        buf[n++] = '-';
    double a = fabs(d);
    if (a == 0.0) {
        memcpy(buf + n, "0.0", 4);
        return n + 3;
    }
    uint64_t m;
    int k;
    shortest_decimal(a, &m, &k);
    char digits[24];
    int length = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)m);
    int kk = length + k; /* 10^(kk-1) <= a < 10^kk */

    if (k >= 0 && kk <= 16) {
        /* 1234e7 -> 12340000000.0 */
        memcpy(buf + n, digits, (size_t)length);
        n += (size_t)length;
        for (int i = length; i < kk; i++)
            buf[n++] = '0';
        buf[n++] = '.';
        buf[n++] = '0';
    } else if (kk > 0 && kk <= 16) {
        /* 1234e-2 -> 12.34 */
        memcpy(buf + n, digits, (size_t)kk);
        n += (size_t)kk;
        buf[n++] = '.';
        memcpy(buf + n, digits + kk, (size_t)(length - kk));
        n += (size_t)(length - kk);
    } else if (kk > -5 && kk <= 0) {
        /* 1234e-6 -> 0.001234 */
        buf[n++] = '0';
        buf[n++] = '.';
        for (int i = 0; i < -kk; i++)
            buf[n++] = '0';
        memcpy(buf + n, digits, (size_t)length);
        n += (size_t)length;
    } else {
        /* 1e30, 1234e30 -> 1.234e33 */
        buf[n++] = digits[0];
        if (length > 1) {
            buf[n++] = '.';
            memcpy(buf + n, digits + 1, (size_t)(length - 1));
            n += (size_t)(length - 1);
        }
        n += (size_t)snprintf(buf + n, size - n, "e%d", kk - 1);
    }
    buf[n] = '\0';
    return n;
}

static int append_string(struct evd_buf *out, const char *s, size_t len)
{
    if (evd_buf_append(out, "\"", 1) != 0)
        return -1;
    size_t start = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue; /* stands for itself: most bytes, looked at without a call */
        char ubuf[7];
        const char *esc = evd_json_escape(c, ubuf);
        if (evd_buf_append(out, s + start, i - start) != 0 ||
            evd_buf_append(out, esc, strlen(esc)) != 0)
            return -1;
        start = i + 1;
    }
    if (evd_buf_append(out, s + start, len - start) != 0)
        return -1;
    return evd_buf_append(out, "\"", 1);
}

/* An integer in plain decimal, as printf's %lld writes it, without printf. */
static int append_integer(struct evd_buf *out, json_int_t v)
{
    char tmp[24];
    char *p = tmp + sizeof(tmp);
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u != 0);
    if (v < 0)
        *--p = '-';
    return evd_buf_append(out, p, (size_t)(tmp + sizeof(tmp) - p));
}

struct member {
    const char *key;
    size_t len;
    json_t *value;
};

static int member_cmp(const void *pa, const void *pb)
{
    const struct member *a = pa, *b = pb;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->key, b->key, n);
    if (c != 0)
        return c;
    return (a->len > b->len) - (a->len < b->len);
}

static int append_member(struct evd_buf *out, bool first, const char *key, size_t len,
                         const json_t *value, bool sorted)
{
    if ((!first && evd_buf_append(out, ",", 1) != 0) || append_string(out, key, len) != 0 ||
        evd_buf_append(out, ":", 1) != 0)
        return -1;
    return evd_json_append(out, value, sorted);
}

/* An object's members in key order (canonical) or in the order they were set. */
static int append_object(struct evd_buf *out, const json_t *v, bool sorted)
{
    size_t count = json_object_size(v);
    if (count == 0)
        return evd_buf_append(out, "{}", 2);
    int rc = evd_buf_append(out, "{", 1);
    void *it = json_object_iter((json_t *)v);
    if (!sorted) {
        for (bool first = true; rc == 0 && it != NULL; first = false) {
            rc = append_member(out, first, json_object_iter_key(it), json_object_iter_key_len(it),
                               json_object_iter_value(it), false);
            it = json_object_iter_next((json_t *)v, it);
        }
        return rc == 0 ? evd_buf_append(out, "}", 1) : rc;
    }
    struct member *members = calloc(count, sizeof(*members));
    if (members == NULL)
        return -1;
    size_t i = 0;
    while (it != NULL && i < count) {
        members[i].key = json_object_iter_key(it);
        members[i].len = json_object_iter_key_len(it);
        members[i].value = json_object_iter_value(it);
        i++;
        it = json_object_iter_next((json_t *)v, it);
    }
    qsort(members, i, sizeof(*members), member_cmp);
    for (size_t j = 0; rc == 0 && j < i; j++)
        rc = append_member(out, j == 0, members[j].key, members[j].len, members[j].value, true);
    if (rc == 0)
        rc = evd_buf_append(out, "}", 1);
    free(members);
    return rc;
}

int evd_json_append(struct evd_buf *out, const json_t *v, bool sorted)
{
    char num[EVD_JSON_REAL_MAX];
    switch (json_typeof(v)) {
    case JSON_NULL:
        return evd_buf_append(out, "null", 4);
    case JSON_TRUE:
        return evd_buf_append(out, "true", 4);
    case JSON_FALSE:
        return evd_buf_append(out, "false", 5);
    case JSON_INTEGER:
        return append_integer(out, json_integer_value(v));
    case JSON_REAL: {
        size_t n = evd_json_format_real(json_real_value(v), num, sizeof(num));
        if (n == 0) /* jansson never holds a non-finite real; serde would print null */
            return evd_buf_append(out, "null", 4);
        return evd_buf_append(out, num, n);
    }
    case JSON_STRING:
        return append_string(out, json_string_value(v), json_string_length(v));
    case JSON_ARRAY: {
        if (evd_buf_append(out, "[", 1) != 0)
            return -1;
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i > 0 && evd_buf_append(out, ",", 1) != 0)
                return -1;
            if (evd_json_append(out, json_array_get(v, i), sorted) != 0)
                return -1;
        }
        return evd_buf_append(out, "]", 1);
    }
    case JSON_OBJECT:
        return append_object(out, v, sorted);
    }
    return -1;
}

char *evd_json_compact(const json_t *v, size_t *len)
{
    struct evd_buf b = {0};
    if (v == NULL || evd_json_append(&b, v, false) != 0) {
        evd_buf_free(&b);
        return NULL;
    }
    char *exact = realloc(b.data, b.len + 1); /* give back the doubling's slack */
    if (len != NULL)
        *len = b.len;
    return exact != NULL ? exact : b.data;
}
