/*
 * JSON value helpers for the validator: bounded text sinks, UTF-8 counting, exact number
 * comparison, mathematical equality and hashing, and compact JSON text for messages.
 * Pure functions over borrowed values; thread-safe.
 */
#include "schema/jsonschema_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"

#define VALUE_MAX_DEPTH 2048 /* equality and hashing give up beyond this nesting */
#define DUMP_MAX_DEPTH 64

static const char ELLIPSIS[] = "\xe2\x80\xa6"; /* U+2026 */

void evd_sbuf_init(struct evd_sbuf *b, char *p, size_t cap)
{
    b->p = p;
    b->cap = cap;
    b->len = 0;
    b->truncated = false;
    if (cap > 0)
        p[0] = '\0';
}

void evd_sbuf_put(struct evd_sbuf *b, const char *s, size_t n)
{
    if (b->cap == 0 || b->truncated) {
        b->truncated = b->truncated || n > 0;
        return;
    }
    size_t room = b->cap - 1 - b->len;
    if (n > room) {
        n = room;
        b->truncated = true;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void evd_sbuf_puts(struct evd_sbuf *b, const char *s)
{
    evd_sbuf_put(b, s, strlen(s));
}

void evd_sbuf_put_pointer_token(struct evd_sbuf *b, const char *seg, size_t len)
{
    evd_sbuf_put(b, "/", 1);
    for (size_t i = 0; i < len; i++) {
        if (seg[i] == '~')
            evd_sbuf_put(b, "~0", 2);
        else if (seg[i] == '/')
            evd_sbuf_put(b, "~1", 2);
        else
            evd_sbuf_put(b, seg + i, 1);
    }
}

size_t evd_pointer_token(const char **p, char *tok, size_t cap)
{
    const char *s = *p + 1;
    size_t tl = 0;
    while (*s != '\0' && *s != '/') {
        if (tl + 1 >= cap)
            return (size_t)-1;
        if (*s == '~' && (s[1] == '0' || s[1] == '1')) {
            tok[tl++] = s[1] == '0' ? '~' : '/';
            s += 2;
        } else {
            tok[tl++] = *s++;
        }
    }
    tok[tl] = '\0';
    *p = s;
    return tl;
}

bool evd_pointer_index(const char *tok, size_t len, size_t *idx)
{
    if (len == 0 || len >= 19 || (len > 1 && tok[0] == '0'))
        return false;
    for (size_t i = 0; i < len; i++)
        if (tok[i] < '0' || tok[i] > '9')
            return false;
    *idx = (size_t)strtoull(tok, NULL, 10);
    return true;
}

void evd_sbuf_printf(struct evd_sbuf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(tmp)) {
        evd_sbuf_put(b, tmp, sizeof(tmp) - 1);
        b->truncated = true;
        return;
    }
    evd_sbuf_put(b, tmp, (size_t)n);
}

void evd_sbuf_finish(struct evd_sbuf *b)
{
    if (!b->truncated || b->cap == 0)
        return;
    size_t el = sizeof(ELLIPSIS) - 1;
    if (b->cap - 1 < el) {
        b->len = 0;
        b->p[0] = '\0';
        return;
    }
    size_t keep = b->len;
    if (keep > b->cap - 1 - el)
        keep = b->cap - 1 - el;
    keep = evd_utf8_clip(b->p, keep);
    memcpy(b->p + keep, ELLIPSIS, el);
    b->len = keep + el;
    b->p[b->len] = '\0';
}

size_t evd_utf8_clip(const char *s, size_t n)
{
    /* Walk back over continuation bytes to the start of the last sequence. */
    size_t i = n;
    while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
        i--;
    if (i == 0)
        return 0;
    unsigned char lead = (unsigned char)s[i - 1];
    size_t need = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    size_t have = n - (i - 1);
    return have >= need ? n : i - 1;
}

size_t evd_utf8_count(const char *s, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            count++;
    return count;
}

unsigned evd_js_type_bit(const char *name)
{
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {
        {"null", EVD_JS_T_NULL},       {"boolean", EVD_JS_T_BOOLEAN}, {"object", EVD_JS_T_OBJECT},
        {"array", EVD_JS_T_ARRAY},     {"number", EVD_JS_T_NUMBER},   {"string", EVD_JS_T_STRING},
        {"integer", EVD_JS_T_INTEGER},
    };
    for (size_t i = 0; name != NULL && i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(name, names[i].name) == 0)
            return names[i].bit;
    return 0;
}

bool evd_js_is_integral(const json_t *x)
{
    if (json_is_integer(x))
        return true;
    if (!json_is_real(x))
        return false;
    double d = json_real_value(x);
    return isfinite(d) && floor(d) == d;
}

/* Compares integer i with real d exactly. */
static int int_real_cmp(json_int_t i, double d)
{
    if (d >= 9223372036854775808.0)
        return -1;
    if (d < -9223372036854775808.0)
        return 1;
    double f = floor(d);
    json_int_t li = (json_int_t)f;
    if (i < li)
        return -1;
    if (i > li)
        return 1;
    return d > f ? -1 : 0;
}

int evd_js_num_cmp(const json_t *a, const json_t *b)
{
    if (json_is_integer(a) && json_is_integer(b)) {
        json_int_t x = json_integer_value(a), y = json_integer_value(b);
        return (x > y) - (x < y);
    }
    if (json_is_integer(a))
        return int_real_cmp(json_integer_value(a), json_real_value(b));
    if (json_is_integer(b))
        return -int_real_cmp(json_integer_value(b), json_real_value(a));
    double x = json_real_value(a), y = json_real_value(b);
    return (x > y) - (x < y);
}

static bool equal_at(const json_t *a, const json_t *b, unsigned depth)
{
    if (depth > VALUE_MAX_DEPTH)
        return false;
    if (json_is_number(a) && json_is_number(b))
        return evd_js_num_cmp(a, b) == 0;
    if (json_typeof(a) != json_typeof(b))
        return false;
    switch (json_typeof(a)) {
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_ARRAY: {
        size_t n = json_array_size(a);
        if (n != json_array_size(b))
            return false;
        for (size_t i = 0; i < n; i++)
            if (!equal_at(json_array_get(a, i), json_array_get(b, i), depth + 1))
                return false;
        return true;
    }
    case JSON_OBJECT: {
        if (json_object_size(a) != json_object_size(b))
            return false;
        const char *k;
        size_t klen;
        json_t *va;
        json_object_keylen_foreach((json_t *)a, k, klen, va)
        {
            json_t *vb = json_object_getn(b, k, klen);
            if (vb == NULL || !equal_at(va, vb, depth + 1))
                return false;
        }
        return true;
    }
    default:
        return true; /* null, true, false: same type is enough */
    }
}

bool evd_js_equal(const json_t *a, const json_t *b)
{
    return equal_at(a, b, 0);
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static uint64_t bytes_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static uint64_t hash_at(const json_t *x, unsigned depth)
{
    if (depth > VALUE_MAX_DEPTH)
        return 0;
    switch (json_typeof(x)) {
    case JSON_NULL:
        return 0x11;
    case JSON_TRUE:
        return 0x22;
    case JSON_FALSE:
        return 0x33;
    case JSON_INTEGER:
        return mix64((uint64_t)json_integer_value(x));
    case JSON_REAL: {
        double d = json_real_value(x);
        if (floor(d) == d && d >= -9223372036854775808.0 && d < 9223372036854775808.0)
            return mix64((uint64_t)(json_int_t)d);
        uint64_t bits;
        memcpy(&bits, &d, sizeof(bits));
        return mix64(bits ^ 0x5555);
    }
    case JSON_STRING:
        return bytes_hash(json_string_value(x), json_string_length(x));
    case JSON_ARRAY: {
        uint64_t h = 0xA5;
        for (size_t i = 0; i < json_array_size(x); i++)
            h = mix64(h * 31 + hash_at(json_array_get(x, i), depth + 1));
        return h;
    }
    case JSON_OBJECT: {
        uint64_t h = 0x0B;
        const char *k;
        size_t klen;
        json_t *v;
        json_object_keylen_foreach((json_t *)x, k, klen, v)
        {
            h += mix64(bytes_hash(k, klen) ^ (hash_at(v, depth + 1) * 0x9E3779B97F4A7C15ULL));
        }
        return h;
    }
    }
    return 0;
}

uint64_t evd_js_hash(const json_t *x)
{
    return hash_at(x, 0);
}

/* Rewrites "1e+100" as "1e100" and "1e-07" as "1e-7", as JSON writers usually do. */
static void tidy_exponent(char *s)
{
    char *e = strchr(s, 'e');
    if (e == NULL)
        return;
    char *src = e + 1, *dst = e + 1;
    if (*src == '+')
        src++;
    else if (*src == '-')
        *dst++ = *src++;
    while (*src == '0' && src[1] != '\0')
        src++;
    memmove(dst, src, strlen(src) + 1);
}

void evd_js_number_text(const json_t *x, char *out, size_t outsz)
{
    if (json_is_integer(x)) {
        snprintf(out, outsz, "%" JSON_INTEGER_FORMAT, json_integer_value(x));
        return;
    }
    double d = json_real_value(x);
    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*g", prec, d);
        if (strtod(tmp, NULL) == d)
            break;
    }
    tidy_exponent(tmp);
    if (strpbrk(tmp, ".en") == NULL)
        strcat(tmp, ".0");
    snprintf(out, outsz, "%s", tmp);
}

void evd_js_dump_string(struct evd_sbuf *b, const char *s, size_t n)
{
    evd_sbuf_put(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n && !b->truncated; i++) {
        char ubuf[7];
        const char *esc = evd_json_escape((unsigned char)s[i], ubuf);
        if (esc == NULL) {
            run++;
            continue;
        }
        evd_sbuf_put(b, s + i - run, run);
        run = 0;
        evd_sbuf_puts(b, esc);
    }
    if (!b->truncated)
        evd_sbuf_put(b, s + n - run, run);
    evd_sbuf_put(b, "\"", 1);
}

static void dump_at(struct evd_sbuf *b, const json_t *x, unsigned depth)
{
    if (b->truncated)
        return;
    if (depth > DUMP_MAX_DEPTH) {
        evd_sbuf_puts(b, ELLIPSIS);
        return;
    }
    char num[48];
    switch (json_typeof(x)) {
    case JSON_NULL:
        evd_sbuf_puts(b, "null");
        break;
    case JSON_TRUE:
        evd_sbuf_puts(b, "true");
        break;
    case JSON_FALSE:
        evd_sbuf_puts(b, "false");
        break;
    case JSON_INTEGER:
    case JSON_REAL:
        evd_js_number_text(x, num, sizeof(num));
        evd_sbuf_puts(b, num);
        break;
    case JSON_STRING:
        evd_js_dump_string(b, json_string_value(x), json_string_length(x));
        break;
    case JSON_ARRAY:
        evd_sbuf_put(b, "[", 1);
        for (size_t i = 0; i < json_array_size(x) && !b->truncated; i++) {
            if (i > 0)
                evd_sbuf_put(b, ",", 1);
            dump_at(b, json_array_get(x, i), depth + 1);
        }
        evd_sbuf_put(b, "]", 1);
        break;
    case JSON_OBJECT: {
        evd_sbuf_put(b, "{", 1);
        const char *k;
        size_t klen;
        json_t *v;
        bool first = true;
        json_object_keylen_foreach((json_t *)x, k, klen, v)
        {
            if (b->truncated)
                break;
            if (!first)
                evd_sbuf_put(b, ",", 1);
            first = false;
            evd_js_dump_string(b, k, klen);
            evd_sbuf_put(b, ":", 1);
            dump_at(b, v, depth + 1);
        }
        evd_sbuf_put(b, "}", 1);
        break;
    }
    }
}

void evd_js_dump(struct evd_sbuf *b, const json_t *x)
{
    dump_at(b, x, 0);
}
