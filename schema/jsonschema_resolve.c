/*
 * JSON Schema draft-07: the compiler's indexing of "$id" and its resolution of "$ref"
 * (jsonschema_compile.h), over the documents of one compilation.
 */
#include "schema/jsonschema_compile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* ---- indexing of $id ------------------------------------------------------------------- */

static bool add_res(struct cctx *c, const char *uri, json_t *schema, const char *base)
{
    if (c->nres == c->capres) {
        size_t cap = c->capres ? c->capres * 2 : 16;
        struct res *r = realloc(c->res, cap * sizeof(*r));
        if (r == NULL)
            return false;
        c->res = r;
        c->capres = cap;
    }
    struct res *r = &c->res[c->nres];
    r->uri = evd_jsc_strdup(c->v, uri);
    r->base = evd_jsc_strdup(c->v, base);
    r->schema = schema;
    if (r->uri == NULL || r->base == NULL)
        return false;
    c->nres++;
    return true;
}

static bool is_map_keyword(const char *k)
{
    return strcmp(k, "properties") == 0 || strcmp(k, "patternProperties") == 0 ||
           strcmp(k, "definitions") == 0 || strcmp(k, "dependencies") == 0;
}

static bool is_list_keyword(const char *k)
{
    return strcmp(k, "allOf") == 0 || strcmp(k, "anyOf") == 0 || strcmp(k, "oneOf") == 0 ||
           strcmp(k, "items") == 0;
}

static bool is_schema_keyword(const char *k)
{
    static const char *const names[] = {"items",
                                        "additionalItems",
                                        "contains",
                                        "additionalProperties",
                                        "propertyNames",
                                        "if",
                                        "then",
                                        "else",
                                        "not"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(k, names[i]) == 0)
            return true;
    return false;
}

/*
 * Applies a schema object's "$id" to base: returns a new malloc'd base, and registers
 * the identifier. A "$id" beside "$ref" is ignored, as draft-07 ignores $ref's siblings.
 */
char *evd_jsc_apply_id(struct cctx *c, json_t *s, const char *base, bool index)
{
    json_t *id = json_object_get(s, "$id");
    if (!json_is_string(id) || json_object_get(s, "$ref") != NULL)
        return strdup(base);
    char *abs = evd_uri_resolve(base, json_string_value(id));
    if (abs == NULL)
        return NULL;
    char *nbase = evd_jsc_strip_fragment(abs);
    if (nbase == NULL) {
        free(abs);
        return NULL;
    }
    bool ok = true;
    if (index) {
        const char *hash = strchr(abs, '#');
        if (hash != NULL && hash[1] != '\0' && hash[1] != '/')
            ok = add_res(c, abs, s, nbase);
        if (ok && json_string_value(id)[0] != '#')
            ok = add_res(c, nbase, s, nbase);
    }
    free(abs);
    if (!ok) {
        free(nbase);
        return NULL;
    }
    if (json_string_value(id)[0] == '#') {
        free(nbase);
        return strdup(base);
    }
    return nbase;
}

static bool walk_schema(struct cctx *c, json_t *s, const char *base, unsigned depth)
{
    if (!json_is_object(s) || depth > EVD_JSONSCHEMA_MAX_SCHEMA_DEPTH)
        return true;
    if (json_object_get(s, "$ref") != NULL)
        return true;
    char *nbase = evd_jsc_apply_id(c, s, base, true);
    if (nbase == NULL)
        return false;
    bool ok = true;
    const char *k;
    json_t *val;
    json_object_foreach(s, k, val)
    {
        if (!ok)
            break;
        if (is_map_keyword(k) && json_is_object(val)) {
            const char *k2;
            json_t *sub;
            json_object_foreach(val, k2, sub)
            {
                if (!walk_schema(c, sub, nbase, depth + 1)) {
                    ok = false;
                    break;
                }
            }
        } else if (is_list_keyword(k) && json_is_array(val)) {
            size_t i;
            json_t *sub;
            json_array_foreach(val, i, sub)
            {
                if (!walk_schema(c, sub, nbase, depth + 1)) {
                    ok = false;
                    break;
                }
            }
        } else if (is_schema_keyword(k)) {
            ok = walk_schema(c, val, nbase, depth + 1);
        }
    }
    free(nbase);
    return ok;
}

bool evd_jsc_walk_doc(struct cctx *c, struct doc *d)
{
    d->walked = true;
    char *base = json_is_object(d->root) ? evd_jsc_apply_id(c, d->root, d->uri, false) : strdup(d->uri);
    if (base == NULL)
        return false;
    bool ok = add_res(c, d->uri, d->root, base) && walk_schema(c, d->root, d->uri, 0);
    free(base);
    return ok;
}

struct res *evd_jsc_find_res_now(struct cctx *c, const char *uri)
{
    for (size_t i = 0; i < c->nres; i++)
        if (strcmp(c->res[i].uri, uri) == 0)
            return &c->res[i];
    return NULL;
}

/* Finds a resource, indexing registered documents lazily; NULL when unknown or on ENOMEM. */
static struct res *find_res(struct cctx *c, const char *uri, const char *docpart)
{
    struct res *r = evd_jsc_find_res_now(c, uri);
    if (r != NULL)
        return r;
    for (int pass = 0; pass < 2; pass++) {
        bool walked = false;
        for (size_t i = 0; i < c->ndocs; i++) {
            struct doc *d = &c->docs[i];
            if (d->walked || (pass == 0 && strcmp(d->uri, docpart) != 0))
                continue;
            if (!evd_jsc_walk_doc(c, d))
                return evd_jsc_nomem(c);
            walked = true;
        }
        if (walked && (r = evd_jsc_find_res_now(c, uri)) != NULL)
            return r;
    }
    return NULL;
}

/* ---- JSON pointer walk with base-URI tracking ------------------------------------------ */

enum pos { P_SCHEMA, P_MAP, P_LIST, P_OTHER };

json_t *evd_jsc_pointer_walk(struct cctx *c, json_t *start, const char *startbase, const char *ptr,
                             char **outbase)
{
    json_t *cur = start;
    enum pos pos = P_SCHEMA;
    char *base = strdup(startbase);
    size_t cap = strlen(ptr) + 1; /* no token is longer than the pointer */
    char *tok = malloc(cap);
    if (base == NULL || tok == NULL) {
        free(base);
        free(tok);
        return evd_jsc_nomem(c);
    }
    const char *p = ptr;
    while (cur != NULL && *p == '/') {
        size_t tl = evd_pointer_token(&p, tok, cap);
        json_t *next = NULL;
        enum pos npos = P_OTHER;
        if (json_is_object(cur)) {
            next = json_object_getn(cur, tok, tl);
            if (pos == P_SCHEMA) {
                if (is_map_keyword(tok))
                    npos = P_MAP;
                else if (is_list_keyword(tok) && json_is_array(next))
                    npos = P_LIST;
                else if (is_schema_keyword(tok))
                    npos = P_SCHEMA;
            } else if (pos == P_MAP) {
                npos = P_SCHEMA;
            }
        } else if (json_is_array(cur)) {
            size_t idx;
            if (evd_pointer_index(tok, tl, &idx))
                next = json_array_get(cur, idx);
            npos = pos == P_LIST ? P_SCHEMA : P_OTHER;
        }
        if (next != NULL && npos == P_SCHEMA && json_is_object(next)) {
            char *nb = evd_jsc_apply_id(c, next, base, false);
            free(base);
            base = nb;
            if (base == NULL) {
                free(tok);
                return evd_jsc_nomem(c);
            }
        }
        cur = next;
        pos = npos;
    }
    free(tok);
    if (cur == NULL || *p != '\0') {
        free(base);
        return NULL;
    }
    *outbase = base;
    return cur;
}

/* Resolves an absolute reference to a schema and its base URI (malloc'd). */
json_t *evd_jsc_resolve_ref(struct cctx *c, const char *uri, char **outbase)
{
    char *docpart = evd_jsc_strip_fragment(uri);
    if (docpart == NULL)
        return evd_jsc_nomem(c);
    const char *hash = strchr(uri, '#');
    const char *frag = hash ? hash + 1 : "";
    json_t *target = NULL;
    bool invalid = false;
    char *fragdec = evd_pct_decode(frag, strlen(frag), NULL, &invalid);
    if (fragdec == NULL) {
        free(docpart);
        if (invalid)
            return evd_jsc_fail(c, "$ref \"%s\" has an invalid percent-encoding", uri);
        return evd_jsc_nomem(c);
    }
    if (fragdec[0] == '\0' || fragdec[0] == '/') {
        struct res *r = find_res(c, docpart, docpart);
        if (r != NULL)
            target = evd_jsc_pointer_walk(c, r->schema, r->base, fragdec, outbase);
    } else {
        struct res *r = find_res(c, uri, docpart);
        if (r != NULL) {
            target = r->schema;
            *outbase = strdup(r->base);
            if (*outbase == NULL)
                target = evd_jsc_nomem(c);
        }
    }
    free(fragdec);
    free(docpart);
    if (target == NULL && !c->failed)
        evd_jsc_fail(c, "could not resolve $ref \"%s\"", uri);
    return target;
}
