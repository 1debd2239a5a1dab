/*
 * Small pure helpers shared by every layer: clocks, ids, hex SHA-256, bounded
 * string buffers. Thread-safe; no global state except the OpenSSL RNG.
 */
#ifndef EVD_COMMON_UTIL_H
#define EVD_COMMON_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Wall clock, Unix epoch milliseconds. */
int64_t evd_now_ms(void);
/* Monotonic clock in milliseconds, for durations and deadlines. */
int64_t evd_mono_ms(void);
/* *out = clock's now + ms (ms >= 0): an absolute deadline for pthread_cond_timedwait. */
void evd_clock_after(clockid_t clock, int64_t ms, struct timespec *out);

/* Writes "<prefix>" + 32 lowercase hex (a UUIDv4 without hyphens) into out (>= strlen(prefix)+33).
 */
void evd_new_id(const char *prefix, char *out, size_t outsz);

/* Writes the 2n lowercase hex digits of in[0..n) and a NUL into out (2n + 1 bytes). */
void evd_hex_encode(const unsigned char *in, size_t n, char *out);
/* The value of hex digit c (either case), or -1 when c is not one. */
int evd_hex_value(char c);
/*
 * Percent-decodes s[0..n) into a malloc'd NUL-terminated string, its length in *outlen
 * (may be NULL; a decoded %00 is a NUL inside it). NULL with *invalid set when a '%' is not
 * followed by two hex digits, NULL with *invalid clear on ENOMEM.
 */
char *evd_pct_decode(const char *s, size_t n, size_t *outlen, bool *invalid);

/* Lowercase hex SHA-256 of data into out[65]. */
void evd_sha256_hex(const void *data, size_t len, char out[65]);

/* SHA-256 over data given in pieces: init, update…, final_hex, then free (NULL-safe). */
struct evd_sha256 {
    void *md; /* EVP_MD_CTX */
};
/* 0, or -1 on ENOMEM. */
int evd_sha256_init(struct evd_sha256 *s);
void evd_sha256_update(struct evd_sha256 *s, const void *data, size_t len);
/* Lowercase hex of the digest into out[65]; the context is spent (free it). */
void evd_sha256_final_hex(struct evd_sha256 *s, char out[65]);
void evd_sha256_free(struct evd_sha256 *s);

/* Constant-time comparison of two byte strings (length leaks, content does not). */
bool evd_consttime_eq(const char *a, size_t alen, const char *b, size_t blen);

/* Growable byte buffer; `data` is always NUL-terminated. Zero-initialise before use. */
struct evd_buf {
    char *data;
    size_t len;
    size_t cap;
    size_t limit; /* 0 = unlimited; appending past it fails */
};
/* Returns 0, or -1 on allocation failure or when `limit` would be exceeded. */
int evd_buf_append(struct evd_buf *b, const void *data, size_t len);
int evd_buf_printf(struct evd_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void evd_buf_free(struct evd_buf *b);

/*
 * Length (1..4) of the well-formed UTF-8 sequence that starts s[0..n), or 0 when the
 * bytes there are not one (a stray continuation byte, a truncated sequence, an overlong
 * form, a UTF-16 surrogate or a code point above U+10FFFF). n must be at least 1.
 */
size_t evd_utf8_seq(const unsigned char *s, size_t n);
/* Whether s[0..n) is well-formed UTF-8 (NUL bytes included). */
bool evd_utf8_valid(const char *s, size_t n);

/*
 * Gives freed memory back to the system after a large passing use (a report of many runs),
 * through the hook the process set at start, and does nothing without one. The server sets
 * glibc's malloc_trim when it runs on glibc's malloc; with jemalloc it sets none, since
 * jemalloc returns freed pages by itself (its decay) and malloc_trim would only walk
 * glibc's unused arena. Set the hook before any thread starts.
 */
void evd_memory_trim(void);
void evd_memory_trim_hook(void (*trim)(void));

#endif
