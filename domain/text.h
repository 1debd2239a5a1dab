/*
 * Text rules of the domain on UTF-8 strings with explicit lengths (a JSON string may
 * hold U+0000): Unicode whitespace (the White_Space property, as Rust's
 * char::is_whitespace), blank checks, and the normalization of the normalized_text
 * evaluator. Pure; thread-safe; no global state.
 */
#ifndef EVD_DOMAIN_TEXT_H
#define EVD_DOMAIN_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether the code point has the Unicode White_Space property. */
bool evd_text_is_space(uint32_t cp);

/*
 * Decodes one code point of well-formed UTF-8 at s[0..len); returns the bytes used
 * (1..4), and U+FFFD with 1 byte for a malformed sequence.
 */
size_t evd_text_decode(const char *s, size_t len, uint32_t *cp);

/* Whether s is empty or only Unicode whitespace (Rust's s.trim().is_empty()). */
bool evd_text_is_blank(const char *s, size_t len);

/*
 * The normalization of eval::assert::normalized_text, in this order: split on Unicode
 * whitespace dropping empty pieces; join the pieces with one ASCII space; trim ASCII
 * punctuation (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~) at both ends only (whitespace
 * uncovered by that trim stays); full Unicode lowercasing (libunistring's u8_tolower,
 * context-sensitive: a final capital sigma becomes ς).
 * Returns a malloc'd NUL-terminated string (caller frees) with its length in *out_len,
 * or NULL on ENOMEM.
 */
char *evd_text_normalize(const char *s, size_t len, size_t *out_len);

#endif
