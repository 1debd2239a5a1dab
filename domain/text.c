/*
 * UTF-8 text rules (see text.h). Lowercasing is delegated to libunistring, which
 * carries the full Unicode case mappings including the context-sensitive ones.
 * Pure; thread-safe.
 */
#include "domain/text.h"

#include <stdlib.h>
#include <string.h>
#include <unicase.h>

bool evd_text_is_space(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

size_t evd_text_decode(const char *s, size_t len, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t need;
    uint32_t c;
    if (len == 0) {
        *cp = 0xFFFD;
        return 0;
    }
    if (u[0] < 0x80) {
        *cp = u[0];
        return 1;
    } else if ((u[0] & 0xE0) == 0xC0) {
        need = 2;
        c = u[0] & 0x1F;
    } else if ((u[0] & 0xF0) == 0xE0) {
        need = 3;
        c = u[0] & 0x0F;
    } else if ((u[0] & 0xF8) == 0xF0) {
        need = 4;
        c = u[0] & 0x07;
    } else {
        *cp = 0xFFFD;
        return 1;
    }
    if (need > len) {
        *cp = 0xFFFD;
        return 1;
    }
    for (size_t i = 1; i < need; i++) {
        if ((u[i] & 0xC0) != 0x80) {
            *cp = 0xFFFD;
            return 1;
        }
        c = (c << 6) | (u[i] & 0x3F);
    }
    *cp = c;
    return need;
}

bool evd_text_is_blank(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        size_t n = evd_text_decode(s + i, len - i, &cp);
        if (!evd_text_is_space(cp))
            return false;
        i += n;
    }
    return true;
}

static bool is_ascii_punct(unsigned char c)
{
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
}

char *evd_text_normalize(const char *s, size_t len, size_t *out_len)
{
    /* 1-2: collapse whitespace runs into single spaces, dropping leading/trailing ones. */
    char *joined = malloc(len + 1);
    if (joined == NULL)
        return NULL;
    size_t n = 0, i = 0;
    bool pending_space = false;
    while (i < len) {
        uint32_t cp;
        size_t w = evd_text_decode(s + i, len - i, &cp);
        if (evd_text_is_space(cp)) {
            pending_space = n > 0;
        } else {
            if (pending_space)
                joined[n++] = ' ';
            pending_space = false;
            memcpy(joined + n, s + i, w);
            n += w;
        }
        i += w;
    }
    /* 3: trim ASCII punctuation at both ends (bytes < 0x80 are whole characters). */
    size_t start = 0, end = n;
    while (start < end && is_ascii_punct((unsigned char)joined[start]))
        start++;
    while (end > start && is_ascii_punct((unsigned char)joined[end - 1]))
        end--;
    /* 4: full Unicode lowercasing. */
    size_t lower_len = 0;
    uint8_t *lower = NULL;
    if (end > start) {
        lower =
            u8_tolower((const uint8_t *)joined + start, end - start, NULL, NULL, NULL, &lower_len);
        if (lower == NULL) {
            free(joined);
            return NULL;
        }
    }
    char *out = malloc(lower_len + 1);
    if (out != NULL) {
        if (lower_len > 0)
            memcpy(out, lower, lower_len);
        out[lower_len] = '\0';
        *out_len = lower_len;
    }
    free(lower);
    free(joined);
    return out;
}
