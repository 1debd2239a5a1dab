/* See util.h. */
#include "common/util.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t evd_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t evd_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void evd_clock_after(clockid_t clock, int64_t ms, struct timespec *out)
{
    clock_gettime(clock, out);
    out->tv_sec += (time_t)(ms / 1000);
    out->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (out->tv_nsec >= 1000000000L) {
        out->tv_sec++;
        out->tv_nsec -= 1000000000L;
    }
}

void evd_new_id(const char *prefix, char *out, size_t outsz)
{
    unsigned char r[16];
    if (RAND_bytes(r, sizeof(r)) != 1) {
        /* The OpenSSL RNG does not fail on a working system; fall back to time+rand. */
        int64_t t = evd_mono_ms() ^ evd_now_ms();
        for (size_t i = 0; i < sizeof(r); i++)
            r[i] = (unsigned char)((t >> (i % 8)) ^ rand());
    }
    r[6] = (unsigned char)((r[6] & 0x0f) | 0x40); /* version 4 */
    r[8] = (unsigned char)((r[8] & 0x3f) | 0x80); /* variant 10 */
    size_t n = (size_t)snprintf(out, outsz, "%s", prefix);
    for (size_t i = 0; i < sizeof(r) && n + 2 < outsz; i++, n += 2)
        snprintf(out + n, outsz - n, "%02x", r[i]);
}

static const char HEX_DIGITS[] = "0123456789abcdef";

void evd_hex_encode(const unsigned char *in, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = HEX_DIGITS[in[i] >> 4];
        out[2 * i + 1] = HEX_DIGITS[in[i] & 15];
    }
    out[2 * n] = '\0';
}

int evd_hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

char *evd_pct_decode(const char *s, size_t n, size_t *outlen, bool *invalid)
{
    *invalid = false;
    char *out = malloc(n + 1);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            out[o++] = s[i];
            continue;
        }
        int hi = i + 2 < n ? evd_hex_value(s[i + 1]) : -1;
        int lo = i + 2 < n ? evd_hex_value(s[i + 2]) : -1;
        if (hi < 0 || lo < 0) {
            free(out);
            *invalid = true;
            return NULL;
        }
        out[o++] = (char)(hi << 4 | lo);
        i += 2;
    }
    out[o] = '\0';
    if (outlen != NULL)
        *outlen = o;
    return out;
}

void evd_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[32];
    unsigned int mdlen = 0;
    EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
    evd_hex_encode(md, 32, out);
}

int evd_sha256_init(struct evd_sha256 *s)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    s->md = md;
    if (md == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        s->md = NULL;
        return -1;
    }
    return 0;
}

void evd_sha256_update(struct evd_sha256 *s, const void *data, size_t len)
{
    if (s->md != NULL)
        EVP_DigestUpdate(s->md, data, len);
}

void evd_sha256_final_hex(struct evd_sha256 *s, char out[65])
{
    unsigned char md[32] = {0};
    unsigned int mdlen = 0;
    if (s->md != NULL)
        EVP_DigestFinal_ex(s->md, md, &mdlen);
    evd_hex_encode(md, 32, out);
}

void evd_sha256_free(struct evd_sha256 *s)
{
    EVP_MD_CTX_free(s->md);
    s->md = NULL;
}

bool evd_consttime_eq(const char *a, size_t alen, const char *b, size_t blen)
{
    if (alen != blen)
        return false;
    return CRYPTO_memcmp(a, b, alen) == 0;
}

int evd_buf_append(struct evd_buf *b, const void *data, size_t len)
{
    if (b->limit != 0 && b->len + len > b->limit)
        return -1;
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len + 1)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (p == NULL)
            return -1;
        b->data = p;
        b->cap = cap;
    }
    if (len > 0)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}

int evd_buf_printf(struct evd_buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    if ((size_t)n < sizeof(small))
        return evd_buf_append(b, small, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (big == NULL)
        return -1;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int rc = evd_buf_append(b, big, (size_t)n);
    free(big);
    return rc;
}

void evd_buf_free(struct evd_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

size_t evd_utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; /* the range of the second byte */
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0; /* overlong below U+0800 */
        else if (c == 0xed)
            hi = 0x9f; /* surrogates U+D800..U+DFFF */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90; /* overlong below U+10000 */
        else if (c == 0xf4)
            hi = 0x8f; /* above U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

bool evd_utf8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t k = evd_utf8_seq(u + i, n - i);
        if (k == 0)
            return false;
        i += k;
    }
    return true;
}

static void (*memory_trim)(void);

void evd_memory_trim_hook(void (*trim)(void))
{
    memory_trim = trim;
}

void evd_memory_trim(void)
{
    if (memory_trim != NULL)
        memory_trim();
}
