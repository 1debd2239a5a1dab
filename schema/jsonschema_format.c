/*
 * The `format` checkers of draft-07 (dates and times per RFC 3339, email per RFC 5321,
 * hostnames per RFC 1123, IP addresses, URIs, JSON pointers, regexes) and the PCRE2
 * dialect used for `pattern`, `patternProperties` and the `regex` format.
 * Pure and thread-safe; compiled regexes belong to the caller.
 */
#include "schema/jsonschema_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static int num(const char *s, size_t n)
{
    int v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (s[i] - '0');
    return v;
}

static bool is_leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static bool date_ok(const char *s, size_t n)
{
    if (n != 10 || s[4] != '-' || s[7] != '-' || !digits(s, 4) || !digits(s + 5, 2) ||
        !digits(s + 8, 2))
        return false;
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y = num(s, 4), m = num(s + 5, 2), d = num(s + 8, 2);
    if (m < 1 || m > 12 || d < 1)
        return false;
    int max = mdays[m - 1] + (m == 2 && is_leap(y) ? 1 : 0);
    return d <= max;
}

/* RFC 3339 full-time: HH:MM:SS[.frac](Z|+HH:MM|-HH:MM); a leap second only at 23:59 UTC. */
static bool time_ok(const char *s, size_t n)
{
    if (n < 9 || s[2] != ':' || s[5] != ':' || !digits(s, 2) || !digits(s + 3, 2) ||
        !digits(s + 6, 2))
        return false;
    int h = num(s, 2), m = num(s + 3, 2), sec = num(s + 6, 2);
    if (h > 23 || m > 59 || sec > 60)
        return false;
    size_t i = 8;
    if (s[i] == '.') {
        size_t j = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == j)
            return false;
    }
    if (i >= n)
        return false;
    int oh = 0, om = 0, sign = 0;
    if ((s[i] == 'Z' || s[i] == 'z') && i + 1 == n) {
        sign = 0;
    } else if ((s[i] == '+' || s[i] == '-') && n - i == 6 && s[i + 3] == ':' &&
               digits(s + i + 1, 2) && digits(s + i + 4, 2)) {
        sign = s[i] == '+' ? 1 : -1;
        oh = num(s + i + 1, 2);
        om = num(s + i + 4, 2);
        if (oh > 23 || om > 59)
            return false;
    } else {
        return false;
    }
    if (sec == 60) {
        int utc = (h * 60 + m - sign * (oh * 60 + om)) % 1440;
        if (utc < 0)
            utc += 1440;
        if (utc != 23 * 60 + 59)
            return false;
    }
    return true;
}

static bool fmt_date(const char *s, size_t n)
{
    return date_ok(s, n);
}

static bool fmt_time(const char *s, size_t n)
{
    return time_ok(s, n);
}

static bool fmt_date_time(const char *s, size_t n)
{
    if (n < 11 || (s[10] != 'T' && s[10] != 't'))
        return false;
    return date_ok(s, 10) && time_ok(s + 11, n - 11);
}

static bool hostname_labels(const char *s, size_t n, bool idn)
{
    if (n == 0)
        return false;
    if (n > 253)
        return false;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.') {
            unsigned char c = (unsigned char)s[i];
            bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || (idn && c >= 0x80);
            if (!ok)
                return false;
            continue;
        }
        size_t len = i - start;
        if (len == 0 || (!idn && len > 63) || (idn && evd_utf8_count(s + start, len) > 63))
            return false;
        if (s[start] == '-' || s[i - 1] == '-')
            return false;
        /* "xn--" labels hold punycode, and "--" at 3-4 is reserved for such prefixes. */
        if (len >= 4 && s[start + 2] == '-' && s[start + 3] == '-' &&
            !((s[start] == 'x' || s[start] == 'X') && (s[start + 1] == 'n' || s[start + 1] == 'N')))
            return false;
        start = i + 1;
    }
    return true;
}

bool evd_js_format_hostname(const char *s, size_t n)
{
    return hostname_labels(s, n, false);
}

static bool fmt_idn_hostname(const char *s, size_t n)
{
    return hostname_labels(s, n, true);
}

bool evd_js_format_ipv4(const char *s, size_t n)
{
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        size_t j = i;
        while (j < n && s[j] >= '0' && s[j] <= '9' && j - i < 4)
            j++;
        size_t len = j - i;
        if (len == 0 || len > 3 || (len > 1 && s[i] == '0') || num(s + i, len) > 255)
            return false;
        i = j;
        if (part < 3) {
            if (i >= n || s[i] != '.')
                return false;
            i++;
        }
    }
    return i == n;
}

static bool hexdigit(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool evd_js_format_ipv6(const char *s, size_t n)
{
    int groups = 0;
    bool compressed = false;
    size_t i = 0;
    if (n >= 2 && s[0] == ':' && s[1] == ':') {
        compressed = true;
        i = 2;
        if (i == n)
            return true;
    } else if (n > 0 && s[0] == ':') {
        return false;
    }
    while (i < n) {
        size_t j = i;
        while (j < n && hexdigit(s[j]) && j - i < 5)
            j++;
        if (j < n && s[j] == '.') {
            /* An embedded IPv4 address takes the last two groups. */
            if (!evd_js_format_ipv4(s + i, n - i))
                return false;
            groups += 2;
            i = n;
            break;
        }
        if (j == i || j - i > 4)
            return false;
        groups++;
        i = j;
        if (i == n)
            break;
        if (s[i] != ':')
            return false;
        i++;
        if (i < n && s[i] == ':') {
            if (compressed)
                return false;
            compressed = true;
            i++;
            if (i == n)
                break;
        } else if (i == n) {
            return false;
        }
    }
    return compressed ? groups < 8 : groups == 8;
}

static bool atext(unsigned char c, bool idn)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("!#$%&'*+-/=?^_`{|}~", c) != NULL || (idn && c >= 0x80);
}

static bool email_ok(const char *s, size_t n, bool idn)
{
    if (n == 0)
        return false;
    size_t i = 0;
    if (s[0] == '"') {
        for (i = 1; i < n && s[i] != '"'; i++) {
            if (s[i] == '\\') {
                i++;
                continue;
            }
            if ((unsigned char)s[i] < 0x20 && s[i] != '\t')
                return false;
        }
        if (i >= n)
            return false;
        i++;
    } else {
        bool prev_dot = true;
        for (; i < n && s[i] != '@'; i++) {
            if (s[i] == '.') {
                if (prev_dot)
                    return false;
                prev_dot = true;
            } else if (s[i] != '\0' && atext((unsigned char)s[i], idn)) {
                prev_dot = false;
            } else {
                return false;
            }
        }
        if (prev_dot)
            return false;
    }
    if (i > 64 && !idn)
        return false;
    if (i >= n || s[i] != '@')
        return false;
    const char *d = s + i + 1;
    size_t dn = n - i - 1;
    if (dn >= 2 && d[0] == '[' && d[dn - 1] == ']') {
        if (dn > 7 && strncmp(d + 1, "IPv6:", 5) == 0)
            return evd_js_format_ipv6(d + 6, dn - 7);
        return evd_js_format_ipv4(d + 1, dn - 2);
    }
    return hostname_labels(d, dn, idn) && d[dn - 1] != '.';
}

static bool fmt_email(const char *s, size_t n)
{
    return email_ok(s, n, false);
}

static bool fmt_idn_email(const char *s, size_t n)
{
    return email_ok(s, n, true);
}

static bool fmt_uri(const char *s, size_t n)
{
    return evd_uri_is_uri(s, n, false);
}

static bool fmt_uri_reference(const char *s, size_t n)
{
    return evd_uri_is_reference(s, n, false);
}

static bool fmt_iri(const char *s, size_t n)
{
    return evd_uri_is_uri(s, n, true);
}

static bool fmt_iri_reference(const char *s, size_t n)
{
    return evd_uri_is_reference(s, n, true);
}

static bool json_pointer_ok(const char *s, size_t n)
{
    if (n > 0 && s[0] != '/')
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '~' && (i + 1 >= n || (s[i + 1] != '0' && s[i + 1] != '1')))
            return false;
    return true;
}

static bool fmt_json_pointer(const char *s, size_t n)
{
    return json_pointer_ok(s, n);
}

static bool fmt_relative_json_pointer(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++;
    if (i == 0 || (i > 1 && s[0] == '0'))
        return false;
    if (i < n && s[i] == '#')
        return i + 1 == n;
    return json_pointer_ok(s + i, n - i);
}

/* Constructs PCRE2 accepts but ECMA-262 does not: \a and friends, (?P..), (?#..), (?i). */
static bool ecma_only(const char *s, size_t n)
{
    bool in_class = false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n) {
            if (strchr("aeAZzGQEKhHRXCN", s[i + 1]) != NULL && s[i + 1] != '\0')
                return false;
            i++;
        } else if (in_class) {
            in_class = s[i] != ']';
        } else if (s[i] == '[') {
            in_class = true;
        } else if (s[i] == '(' && i + 2 < n && s[i + 1] == '?') {
            if (s[i + 2] == 'P' || s[i + 2] == '#')
                return false;
            size_t j = i + 2;
            while (j < n && ((s[j] >= 'a' && s[j] <= 'z') || s[j] == '-'))
                j++;
            if (j > i + 2 && j < n && s[j] == ')')
                return false;
        }
    }
    return true;
}

static bool fmt_regex(const char *s, size_t n)
{
    char msg[8];
    if (!ecma_only(s, n))
        return false;
    pcre2_code *re = evd_js_regex_compile(s, n, msg, sizeof(msg), NULL);
    pcre2_code_free(re);
    return re != NULL;
}

static bool fmt_uuid(const char *s, size_t n)
{
    if (n != 36)
        return false;
    for (size_t i = 0; i < n; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !hexdigit(s[i]))
            return false;
    }
    return true;
}

static bool fmt_ipv4(const char *s, size_t n)
{
    return evd_js_format_ipv4(s, n);
}

static bool fmt_ipv6(const char *s, size_t n)
{
    return evd_js_format_ipv6(s, n);
}

static bool fmt_hostname(const char *s, size_t n)
{
    return evd_js_format_hostname(s, n);
}

static bool fmt_uri_template(const char *s, size_t n)
{
    return evd_uri_is_template(s, n);
}

static const struct {
    const char *name;
    evd_js_format_fn fn;
} FORMATS[] = {
    {"date-time", fmt_date_time},
    {"date", fmt_date},
    {"time", fmt_time},
    {"email", fmt_email},
    {"idn-email", fmt_idn_email},
    {"hostname", fmt_hostname},
    {"idn-hostname", fmt_idn_hostname},
    {"ipv4", fmt_ipv4},
    {"ipv6", fmt_ipv6},
    {"uri", fmt_uri},
    {"uri-reference", fmt_uri_reference},
    {"iri", fmt_iri},
    {"iri-reference", fmt_iri_reference},
    {"uri-template", fmt_uri_template},
    {"json-pointer", fmt_json_pointer},
    {"relative-json-pointer", fmt_relative_json_pointer},
    {"regex", fmt_regex},
    {"uuid", fmt_uuid},
};

evd_js_format_fn evd_js_format_lookup(const char *name)
{
    for (size_t i = 0; i < sizeof(FORMATS) / sizeof(FORMATS[0]); i++)
        if (strcmp(FORMATS[i].name, name) == 0)
            return FORMATS[i].fn;
    return NULL;
}

/* ECMA-262's \s also matches Unicode spaces, which PCRE2's does not without UCP. */
static const char ECMA_SPACE[] =
    "\\s\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff";

/* Rewrites \s and \S for ECMA semantics; returns a malloc'd pattern (NULL on ENOMEM). */
static char *ecma_translate(const char *pat, size_t len, size_t *outlen)
{
    size_t extra = 0;
    for (size_t i = 0; i + 1 < len; i++)
        if (pat[i] == '\\' && (pat[i + 1] == 's' || pat[i + 1] == 'S'))
            extra++;
    size_t cap = len + extra * (sizeof(ECMA_SPACE) + 3) + 1;
    char *out = malloc(cap);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    bool in_class = false;
    for (size_t i = 0; i < len; i++) {
        char ch = pat[i];
        if (ch == '\\' && i + 1 < len) {
            char nx = pat[i + 1];
            if (nx == 's' && in_class) {
                memcpy(out + o, ECMA_SPACE, sizeof(ECMA_SPACE) - 1);
                o += sizeof(ECMA_SPACE) - 1;
            } else if ((nx == 's' || nx == 'S') && !in_class) {
                out[o++] = '[';
                if (nx == 'S')
                    out[o++] = '^';
                memcpy(out + o, ECMA_SPACE, sizeof(ECMA_SPACE) - 1);
                o += sizeof(ECMA_SPACE) - 1;
                out[o++] = ']';
            } else {
                out[o++] = ch;
                out[o++] = nx;
            }
            i++;
            continue;
        }
        if (in_class && ch == ']')
            in_class = false;
        else if (!in_class && ch == '[') {
            in_class = true;
            out[o++] = ch;
            if (i + 1 < len && pat[i + 1] == '^')
                out[o++] = pat[++i];
            continue;
        }
        out[o++] = ch;
    }
    out[o] = '\0';
    *outlen = o;
    return out;
}

pcre2_code *evd_js_regex_compile(const char *pat, size_t len, char *errbuf, size_t errsz,
                                 bool *nomem)
{
    if (nomem != NULL)
        *nomem = false;
    size_t tlen = 0;
    char *tpat = ecma_translate(pat, len, &tlen);
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    if (cc == NULL || tpat == NULL) {
        pcre2_compile_context_free(cc);
        free(tpat);
        snprintf(errbuf, errsz, "out of memory");
        if (nomem != NULL)
            *nomem = true;
        return NULL;
    }
    pcre2_set_compile_extra_options(cc, PCRE2_EXTRA_ALT_BSUX);
    int code = 0;
    PCRE2_SIZE off = 0;
    pcre2_code *re =
        pcre2_compile((PCRE2_SPTR)tpat, tlen,
                      PCRE2_UTF | PCRE2_ALT_BSUX | PCRE2_DOLLAR_ENDONLY | PCRE2_ALLOW_EMPTY_CLASS,
                      &code, &off, cc);
    pcre2_compile_context_free(cc);
    free(tpat);
    if (re == NULL && nomem != NULL)
        *nomem = code == PCRE2_ERROR_HEAP_FAILED;
    if (re == NULL && errsz > 0) {
        PCRE2_UCHAR msg[160];
        if (pcre2_get_error_message(code, msg, sizeof(msg)) < 0)
            snprintf((char *)msg, sizeof(msg), "error %d", code);
        snprintf(errbuf, errsz, "%s", (const char *)msg);
    }
    return re;
}

bool evd_js_regex_search(const pcre2_code *re, const char *s, size_t n, pcre2_match_data *md,
                         pcre2_match_context *mctx)
{
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, mctx);
    return rc >= 0;
}
