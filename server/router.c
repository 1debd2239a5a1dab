/* Segment-by-segment route matching; see router.h. */
#include "server/router.h"

#include <string.h>

#include "common/util.h"

/* Percent-decodes src[0..n) into dst (size dstsz); false on overflow or bad escape. */
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
                                         const char *method, const char *path,
                                         struct evd_req *req, bool *path_known)
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
