/*
 * RFC 3986 for the validator: reference resolution (for $id and $ref), percent-decoding
 * (for JSON pointer fragments), and syntax checks for the uri, uri-reference, iri,
 * iri-reference and uri-template formats (RFC 3987 only widens the character set, RFC 6570
 * for templates). Pure; results are malloc'd and owned by the caller.
 */
#include "schema/jsonschema_impl.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

struct uri {
    const char *scheme, *auth, *path, *query, *frag;
    size_t scheme_len, auth_len, path_len, query_len, frag_len;
    bool has_scheme, has_auth, has_query, has_frag;
};

static bool is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(int c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static void uri_parse(const char *s, size_t n, struct uri *u)
{
    memset(u, 0, sizeof(*u));
    size_t i = 0;
    if (n > 0 && is_alpha((unsigned char)s[0])) {
        size_t j = 1;
        while (j < n && (is_alpha((unsigned char)s[j]) || is_digit((unsigned char)s[j]) ||
                         s[j] == '+' || s[j] == '-' || s[j] == '.'))
            j++;
        if (j < n && s[j] == ':') {
            u->has_scheme = true;
            u->scheme = s;
            u->scheme_len = j;
            i = j + 1;
        }
    }
    if (i + 1 < n && s[i] == '/' && s[i + 1] == '/') {
        size_t j = i + 2;
        while (j < n && s[j] != '/' && s[j] != '?' && s[j] != '#')
            j++;
        u->has_auth = true;
        u->auth = s + i + 2;
        u->auth_len = j - (i + 2);
        i = j;
    }
    size_t j = i;
    while (j < n && s[j] != '?' && s[j] != '#')
        j++;
    u->path = s + i;
    u->path_len = j - i;
    i = j;
    if (i < n && s[i] == '?') {
        j = i + 1;
        while (j < n && s[j] != '#')
            j++;
        u->has_query = true;
        u->query = s + i + 1;
        u->query_len = j - (i + 1);
        i = j;
    }
    if (i < n && s[i] == '#') {
        u->has_frag = true;
        u->frag = s + i + 1;
        u->frag_len = n - (i + 1);
    }
}

/* RFC 3986 §5.2.4 on in[0..n); writes into out (capacity >= n + 1), returns length. */
static size_t remove_dots(const char *in, size_t n, char *out)
{
    size_t o = 0, i = 0;
    while (i < n) {
        if (n - i >= 3 && memcmp(in + i, "../", 3) == 0) {
            i += 3;
        } else if (n - i >= 2 && memcmp(in + i, "./", 2) == 0) {
            i += 2;
        } else if (n - i >= 3 && memcmp(in + i, "/./", 3) == 0) {
            i += 2;
        } else if (n - i == 2 && memcmp(in + i, "/.", 2) == 0) {
            i += 1;
            out[o++] = '/';
            i = n;
        } else if ((n - i >= 4 && memcmp(in + i, "/../", 4) == 0) ||
                   (n - i == 3 && memcmp(in + i, "/..", 3) == 0)) {
            bool last = n - i == 3;
            i += 3;
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--;
            if (last) {
                out[o++] = '/';
                i = n;
            }
        } else if ((n - i == 1 && in[i] == '.') || (n - i == 2 && memcmp(in + i, "..", 2) == 0)) {
            i = n;
        } else {
            if (in[i] == '/')
                out[o++] = in[i++];
            while (i < n && in[i] != '/')
                out[o++] = in[i++];
        }
    }
    out[o] = '\0';
    return o;
}

char *evd_uri_resolve(const char *base, const char *ref)
{
    struct uri b, r;
    size_t bn = strlen(base), rn = strlen(ref);
    uri_parse(base, bn, &b);
    uri_parse(ref, rn, &r);

    /* Upper bound of the result: every part of both plus separators. */
    char *merged = malloc(bn + rn + 2);
    char *path = malloc(bn + rn + 2);
    char *out = malloc(bn + rn + 8);
    if (merged == NULL || path == NULL || out == NULL) {
        free(merged);
        free(path);
        free(out);
        return NULL;
    }
    const struct uri *sch = &b, *auth = &b, *qry = &b;
    size_t plen;
    if (r.has_scheme) {
        sch = auth = qry = &r;
        plen = remove_dots(r.path, r.path_len, path);
    } else if (r.has_auth) {
        auth = qry = &r;
        plen = remove_dots(r.path, r.path_len, path);
    } else if (r.path_len == 0) {
        memcpy(path, b.path, b.path_len);
        plen = b.path_len;
        path[plen] = '\0';
        if (r.has_query)
            qry = &r;
    } else {
        qry = &r;
        if (r.path[0] == '/') {
            plen = remove_dots(r.path, r.path_len, path);
        } else {
            size_t m = 0;
            if (b.has_auth && b.path_len == 0) {
                merged[m++] = '/';
            } else {
                size_t cut = b.path_len;
                while (cut > 0 && b.path[cut - 1] != '/')
                    cut--;
                memcpy(merged, b.path, cut);
                m = cut;
            }
            memcpy(merged + m, r.path, r.path_len);
            m += r.path_len;
            plen = remove_dots(merged, m, path);
        }
    }
    size_t o = 0;
    if (sch->has_scheme) {
        memcpy(out + o, sch->scheme, sch->scheme_len);
        o += sch->scheme_len;
        out[o++] = ':';
    }
    if (auth->has_auth) {
        out[o++] = '/';
        out[o++] = '/';
        memcpy(out + o, auth->auth, auth->auth_len);
        o += auth->auth_len;
    }
    memcpy(out + o, path, plen);
    o += plen;
    if (qry->has_query) {
        out[o++] = '?';
        memcpy(out + o, qry->query, qry->query_len);
        o += qry->query_len;
    }
    if (r.has_frag) {
        out[o++] = '#';
        memcpy(out + o, r.frag, r.frag_len);
        o += r.frag_len;
    }
    out[o] = '\0';
    free(merged);
    free(path);
    return out;
}

/* ---- syntax checks ------------------------------------------------------------------- */

static bool is_unreserved(int c)
{
    return is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

static bool is_subdelim(int c)
{
    return c != '\0' && strchr("!$&'()*+,;=", c) != NULL;
}

/*
 * Checks that s[0..n) consists of unreserved, sub-delims, pct-encoded, the characters in
 * `extra`, and (for IRIs) non-ASCII bytes.
 */
static bool chars_ok(const char *s, size_t n, const char *extra, bool iri)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            if (i + 2 >= n)
                return false;
            if (!is_hex((unsigned char)s[i + 1]) || !is_hex((unsigned char)s[i + 2]))
                return false;
            i += 2;
            continue;
        }
        if (c >= 0x80) {
            if (!iri)
                return false;
            continue;
        }
        if (is_unreserved(c) || is_subdelim(c) || (c != '\0' && strchr(extra, c) != NULL))
            continue;
        return false;
    }
    return true;
}

static bool authority_ok(const char *s, size_t n, bool iri)
{
    const char *at = memchr(s, '@', n);
    if (at != NULL) {
        if (!chars_ok(s, (size_t)(at - s), ":", iri))
            return false;
        n -= (size_t)(at - s) + 1;
        s = at + 1;
    }
    size_t hostlen;
    if (n > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (close == NULL)
            return false;
        size_t inner = (size_t)(close - s) - 1;
        if (inner > 0 && (s[1] == 'v' || s[1] == 'V')) {
            if (!chars_ok(s + 1, inner, ":", false))
                return false;
        } else if (!evd_js_format_ipv6(s + 1, inner)) {
            return false;
        }
        hostlen = (size_t)(close - s) + 1;
    } else {
        const char *colon = memchr(s, ':', n);
        hostlen = colon != NULL ? (size_t)(colon - s) : n;
        if (!chars_ok(s, hostlen, "", iri))
            return false;
    }
    if (hostlen == n)
        return true;
    if (s[hostlen] != ':')
        return false;
    for (size_t i = hostlen + 1; i < n; i++)
        if (!is_digit((unsigned char)s[i]))
            return false;
    return true;
}

static bool uri_ok(const char *s, size_t n, bool need_scheme, bool iri)
{
    struct uri u;
    uri_parse(s, n, &u);
    if (need_scheme && !u.has_scheme)
        return false;
    if (u.has_auth && !authority_ok(u.auth, u.auth_len, iri))
        return false;
    if (!chars_ok(u.path, u.path_len, ":@/", iri))
        return false;
    if (u.has_auth && u.path_len > 0 && u.path[0] != '/')
        return false;
    if (!u.has_auth && u.path_len >= 2 && u.path[0] == '/' && u.path[1] == '/')
        return false;
    if (!u.has_scheme) {
        /* path-noscheme: no ':' in the first segment. */
        const char *slash = memchr(u.path, '/', u.path_len);
        size_t first = slash != NULL ? (size_t)(slash - u.path) : u.path_len;
        if (memchr(u.path, ':', first) != NULL)
            return false;
    }
    if (u.has_query && !chars_ok(u.query, u.query_len, ":@/?", iri))
        return false;
    if (u.has_frag && !chars_ok(u.frag, u.frag_len, ":@/?", iri))
        return false;
    return true;
}

bool evd_uri_is_uri(const char *s, size_t n, bool iri)
{
    return uri_ok(s, n, true, iri);
}

bool evd_uri_is_reference(const char *s, size_t n, bool iri)
{
    return uri_ok(s, n, false, iri);
}

static bool varchar_at(const char *s, size_t n, size_t *i)
{
    unsigned char c = (unsigned char)s[*i];
    if (is_alpha(c) || is_digit(c) || c == '_') {
        (*i)++;
        return true;
    }
    if (c == '%' && *i + 2 < n && is_hex((unsigned char)s[*i + 1]) &&
        is_hex((unsigned char)s[*i + 2])) {
        *i += 3;
        return true;
    }
    return false;
}

static bool template_expr_ok(const char *s, size_t n)
{
    size_t i = 0;
    if (n > 0 && s[0] != '\0' && strchr("+#./;?&=,!@|", s[0]) != NULL)
        i++;
    for (;;) {
        /* varname = varchar *( ["."] varchar ) */
        if (i >= n || !varchar_at(s, n, &i))
            return false;
        while (i < n) {
            if (s[i] == '.' && i + 1 < n) {
                i++;
                if (!varchar_at(s, n, &i))
                    return false;
            } else if (!varchar_at(s, n, &i)) {
                break;
            }
        }
        if (i < n && s[i] == '*') {
            i++;
        } else if (i < n && s[i] == ':') {
            i++;
            size_t d = 0;
            if (i >= n || s[i] < '1' || s[i] > '9')
                return false;
            while (i < n && is_digit((unsigned char)s[i]) && d < 4) {
                i++;
                d++;
            }
        }
        if (i == n)
            return true;
        if (s[i] != ',')
            return false;
        i++;
    }
}

bool evd_uri_is_template(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '{') {
            const char *close = memchr(s + i + 1, '}', n - i - 1);
            if (close == NULL)
                return false;
            size_t len = (size_t)(close - (s + i + 1));
            if (memchr(s + i + 1, '{', len) != NULL || !template_expr_ok(s + i + 1, len))
                return false;
            i += len + 1;
            continue;
        }
        if (c == '%') {
            if (i + 2 >= n || !is_hex((unsigned char)s[i + 1]) || !is_hex((unsigned char)s[i + 2]))
                return false;
            i += 2;
            continue;
        }
        if (c <= 0x20 || c == 0x7f || strchr("\"<>\\^`|}", c) != NULL)
            return false;
    }
    return true;
}
