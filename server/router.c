/* Segment-by-segment route matching and the UTF-8 check of URL parameters; see router.h. */
#include "server/router.h"

#include <stdio.h>
#include <string.h>

#include "common/util.h"

/* Percent-decodes src[0..n) into dst (size dstsz); false on overflow, a bad escape or %00. */
static bool decode(const char *src, size_t n, char *dst, size_t dstsz)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = src[i];
        if (c == '%') {
            if (i + 2 >= n)
                return false;
            int h = evd_hex_value(src[i + 1]), l = evd_hex_value(src[i + 2]);
            if (h < 0 || l < 0)
                return false;
            c = (char)(h * 16 + l);
            if (c == '\0') /* a value is a C string: a NUL would cut it short */
                return false;
            i += 2;
        }
        if (o + 1 >= dstsz)
            return false;
        dst[o++] = c;
    }
    dst[o] = '\0';
    return o > 0;
}

static bool match(const char *pattern, const char *path, struct evd_req *req)
{
    size_t np = 0;
    const char *p = pattern, *s = path;
    while (*p && *s) {
        if (*p != '/' || *s != '/')
            return false;
        p++;
        s++;
        const char *pe = strchr(p, '/');
        const char *se = strchr(s, '/');
        size_t pl = pe ? (size_t)(pe - p) : strlen(p);
        size_t sl = se ? (size_t)(se - s) : strlen(s);
        if (pl >= 3 && p[0] == '{' && p[pl - 2] == '*' && p[pl - 1] == '}' && p[pl] == '\0') {
            /* Greedy last parameter: takes the rest of the path, slashes included. */
            sl = strlen(s);
            if (np >= EVD_MAX_PARAMS || sl == 0 || strstr(s, "..") != NULL)
                return false;
            if (!decode(s, sl, req->values[np], sizeof(req->values[np])))
                return false;
            size_t nl = pl - 3 < sizeof(req->names[np]) - 1 ? pl - 3 : sizeof(req->names[np]) - 1;
            memcpy(req->names[np], p + 1, nl);
            req->names[np][nl] = '\0';
            np++;
        } else if (pl >= 2 && p[0] == '{' && p[pl - 1] == '}') {
            if (np >= EVD_MAX_PARAMS || sl == 0)
                return false;
            if (!decode(s, sl, req->values[np], sizeof(req->values[np])))
                return false;
            size_t nl = pl - 2 < sizeof(req->names[np]) - 1 ? pl - 2 : sizeof(req->names[np]) - 1;
            memcpy(req->names[np], p + 1, nl);
            req->names[np][nl] = '\0';
            np++;
        } else if (pl != sl || strncmp(p, s, pl) != 0) {
            return false;
        }
        p += pl;
        s += sl;
    }
    if (*p != '\0' || *s != '\0')
        return false;
    req->nparams = np;
    return true;
}

const struct evd_route *evd_router_match(const struct evd_route *table, size_t n,
                                         const char *method, const char *path, struct evd_req *req,
                                         bool *path_known)
{
    *path_known = false;
    struct evd_req scratch = *req;
    for (size_t i = 0; i < n; i++) {
        if (!match(table[i].pattern, path, &scratch))
            continue;
        *path_known = true;
        if (strcmp(table[i].method, method) != 0 &&
            !(strcmp(method, "HEAD") == 0 && strcmp(table[i].method, "GET") == 0))
            continue;
        *req = scratch;
        req->route = table[i].pattern;
        return &table[i];
    }
    return NULL;
}

/* The longest prefix of name[0..n), at most 64 bytes, that ends on a character boundary. */
static int name_shown(const char *name, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t k = evd_utf8_seq((const unsigned char *)name + i, n - i);
        if (k == 0 || i + k > 64)
            break;
        i += k;
    }
    return (int)i;
}

enum evd_code evd_router_check_value(const char *kind, const char *name, size_t name_len,
                                     const char *value, size_t value_len, struct evd_err *err)
{
    if (!evd_utf8_valid(name, name_len) || memchr(name, '\0', name_len) != NULL)
        return evd_err_set(err, EVD_EINVAL, "%s parameter names must be valid UTF-8", kind);
    int shown = name_shown(name, name_len);
    if (value == NULL)
        return EVD_OK;
    if (!evd_utf8_valid(value, value_len))
        return evd_err_set(err, EVD_EINVAL, "%s parameter %.*s must be valid UTF-8", kind, shown,
                           name);
    if (memchr(value, '\0', value_len) != NULL)
        return evd_err_set(err, EVD_EINVAL, "%s parameter %.*s must not contain a NUL byte", kind,
                           shown, name);
    return EVD_OK;
}

struct query_check {
    struct evd_err *err;
    enum evd_code rc;
};

static bool visit_query(void *cls, const char *key, size_t key_len, const char *value,
                        size_t value_len)
{
    struct query_check *q = cls;
    q->rc = evd_router_check_value("query", key ? key : "", key ? key_len : 0, value, value_len,
                                   q->err);
    return q->rc == EVD_OK;
}

enum evd_code evd_router_check(const struct evd_req *req, evd_query_each_fn each,
                               struct evd_err *err)
{
    for (size_t i = 0; i < req->nparams; i++) {
        /* Values hold no NUL byte: decode() refuses %00. */
        enum evd_code rc = evd_router_check_value("path", req->names[i], strlen(req->names[i]),
                                                  req->values[i], strlen(req->values[i]), err);
        if (rc != EVD_OK)
            return rc;
    }
    if (each == NULL)
        return EVD_OK;
    struct query_check q = {.err = err, .rc = EVD_OK};
    each(req->conn, visit_query, &q);
    return q.rc;
}

/* Appends up to `max` bytes of s to out[*at..n-1) as UTF-8 text (U+FFFD for a byte that
 * is not part of a well-formed sequence), never splitting a character; NUL-terminates. */
static void put_text(char *out, size_t n, size_t *at, const char *s, size_t max)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t len = strlen(s), used = 0;
    for (size_t i = 0; i < len;) {
        size_t k = evd_utf8_seq(u + i, len - i);
        const char *t = k ? s + i : "\xef\xbf\xbd";
        size_t tn = k ? k : 3;
        if (used + tn > max || *at + tn >= n)
            break;
        memcpy(out + *at, t, tn);
        *at += tn;
        used += tn;
        i += k ? k : 1;
    }
    out[*at] = '\0';
}

void evd_router_unmatched(const char *method, const char *path, bool path_known, char *out,
                          size_t n)
{
    size_t at = 0;
    if (n == 0)
        return;
    out[0] = '\0';
    put_text(out, n, &at, method, 16);
    put_text(out, n, &at, " ", 1);
    put_text(out, n, &at, path, 200);
    put_text(out, n, &at,
             path_known ? ": method not allowed on this resource" : ": no such resource", 64);
}
