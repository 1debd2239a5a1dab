/*
 * JSON Schema draft-07: compiler and evaluator (API in jsonschema.h).
 *
 * DESIGN. Compilation turns every reachable subschema into a `struct node` holding its
 * keywords as `struct check`s in schema order; all nodes, strings and tables live in one
 * arena owned by the validator, and compiled regexes in a list beside it. Subschemas are
 * memoised by their json_t address, so a $ref cycle becomes a cycle of nodes rather than
 * infinite compilation. $ref targets are found after a first pass that indexes every
 * document's $id (base URIs, location-independent "#name" identifiers), then compiled from
 * a worklist, which keeps compile recursion bounded by lexical nesting. Evaluation walks
 * the nodes with a per-call context on the caller's stack (instance path, PCRE2 match
 * data, depth counter), so a compiled validator is never written after construction and
 * may be shared between threads.
 */
#include "schema/jsonschema.h"
#include "schema/jsonschema_impl.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REGEX_MATCH_LIMIT 1000000u
#define REGEX_DEPTH_LIMIT 10000u
#define MSG_VALUE_MAX 200 /* bytes of an echoed value inside one message */

/* ---- compiled form --------------------------------------------------------------------- */

enum kind {
    K_TYPE,
    K_ENUM,
    K_CONST,
    K_MULTIPLE_OF,
    K_MAXIMUM,
    K_EXCLUSIVE_MAXIMUM,
    K_MINIMUM,
    K_EXCLUSIVE_MINIMUM,
    K_MAX_LENGTH,
    K_MIN_LENGTH,
    K_PATTERN,
    K_FORMAT,
    K_ITEMS,
    K_ADDITIONAL_ITEMS,
    K_MAX_ITEMS,
    K_MIN_ITEMS,
    K_UNIQUE_ITEMS,
    K_CONTAINS,
    K_MAX_PROPERTIES,
    K_MIN_PROPERTIES,
    K_REQUIRED,
    K_PROPERTIES,
    K_PATTERN_PROPERTIES,
    K_ADDITIONAL_PROPERTIES,
    K_DEPENDENCIES,
    K_PROPERTY_NAMES,
    K_IF,
    K_ALL_OF,
    K_ANY_OF,
    K_ONE_OF,
    K_NOT,
    K_REF,
};

struct node;

/* One member of a list or map keyword (allOf, items[], properties, dependencies, ...). */
struct entry {
    const char *key; /* borrowed from the schema; NULL in lists */
    size_t keylen;
    struct node *node;     /* subschema, or NULL for a dependency list */
    const json_t *strings; /* dependencies: the array of required names */
    pcre2_code *re;        /* patternProperties */
};

struct check {
    enum kind kind;
    const char *keyword;   /* static text */
    const json_t *value;   /* the keyword's value; borrowed */
    unsigned types;        /* K_TYPE */
    size_t count;          /* length, item and property limits */
    struct node *sub;      /* single subschema; K_REF target; K_IF's "if" */
    struct node *then_s;   /* K_IF */
    struct node *else_s;   /* K_IF */
    struct entry *entries; /* lists and maps */
    size_t n;
    pcre2_code *re;          /* K_PATTERN */
    evd_js_format_fn format; /* K_FORMAT */
    bool tuple;              /* K_ITEMS in array form */
};

struct node {
    bool is_bool;
    bool bool_value;
    struct check *checks;
    size_t nchecks;
    const struct check *items;              /* sibling "items", for additionalItems */
    const json_t *properties;               /* sibling "properties", for additionalProperties */
    const struct check *pattern_properties; /* sibling "patternProperties" */
};

struct chunk {
    struct chunk *next;
    size_t used, cap;
};
#define CHUNK_HDR ((sizeof(struct chunk) + 15) & ~(size_t)15)
#define CHUNK_MIN 16384

struct evd_jsonschema {
    struct chunk *chunks;
    struct node *root;
    pcre2_code **regexes;
    size_t nregexes, capregexes;
    pcre2_match_context *mctx;
};

static void *arena_alloc(struct evd_jsonschema *v, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    struct chunk *c = v->chunks;
    if (c == NULL || c->cap - c->used < n) {
        size_t cap = n > CHUNK_MIN ? n : CHUNK_MIN;
        c = malloc(CHUNK_HDR + cap);
        if (c == NULL)
            return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = v->chunks;
        v->chunks = c;
    }
    void *p = (char *)c + CHUNK_HDR + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

static char *arena_strdup(struct evd_jsonschema *v, const char *s)
{
    size_t n = strlen(s);
    char *p = arena_alloc(v, n + 1);
    if (p != NULL)
        memcpy(p, s, n + 1);
    return p;
}

void evd_jsonschema_free(struct evd_jsonschema *v)
{
    if (v == NULL)
        return;
    for (size_t i = 0; i < v->nregexes; i++)
        pcre2_code_free(v->regexes[i]);
    free(v->regexes);
    pcre2_match_context_free(v->mctx);
    struct chunk *c = v->chunks;
    while (c != NULL) {
        struct chunk *next = c->next;
        free(c);
        c = next;
    }
    free(v);
}

/* ---- the built-in meta-schema ---------------------------------------------------------- */

static pthread_once_t draft7_once = PTHREAD_ONCE_INIT;
static json_t *draft7_doc;

static void draft7_load(void)
{
    draft7_doc = json_loads(evd_js_draft7_text, 0, NULL);
}

json_t *evd_jsonschema_draft7(void)
{
    pthread_once(&draft7_once, draft7_load);
    return draft7_doc;
}

/* ---- compile context -------------------------------------------------------------------- */

struct doc {
    const char *uri;
    json_t *root;
    bool walked;
};

/* A schema resource found by indexing: a document, an "$id" or a "#name" identifier. */
struct res {
    char *uri;
    json_t *schema;
    char *base;
};

struct memo_slot {
    const json_t *key;
    struct node *node;
};

struct pend {
    struct check *ck;
    char *uri; /* absolute reference */
};

struct cctx {
    struct evd_jsonschema *v;
    struct evd_err *err;
    bool failed;
    struct doc *docs;
    size_t ndocs;
    struct res *res;
    size_t nres, capres;
    struct memo_slot *memo;
    size_t memo_cap, memo_n;
    struct pend *pend;
    size_t npend, cappend;
    char path[400];
    size_t pathlen;
};

static void *cfail(struct cctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void *cfail(struct cctx *c, const char *fmt, ...)
{
    if (c->failed)
        return NULL;
    c->failed = true;
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    evd_err_set(c->err, EVD_EINVAL, "invalid schema at \"%s\": %s", c->path, msg);
    return NULL;
}

static void *cnomem(struct cctx *c)
{
    if (!c->failed) {
        c->failed = true;
        evd_err_set(c->err, EVD_ENOMEM, "could not allocate memory for the schema validator");
    }
    return NULL;
}

static size_t path_push(struct cctx *c, const char *seg, size_t len)
{
    size_t old = c->pathlen;
    struct evd_sbuf b;
    evd_sbuf_init(&b, c->path + old, sizeof(c->path) - old);
    evd_sbuf_put_pointer_token(&b, seg, len);
    evd_sbuf_finish(&b);
    c->pathlen = old + b.len;
    return old;
}

static size_t path_push_index(struct cctx *c, size_t i)
{
    char num[24];
    int n = snprintf(num, sizeof(num), "%zu", i);
    return path_push(c, num, (size_t)n);
}

static void path_pop(struct cctx *c, size_t old)
{
    c->pathlen = old;
    c->path[old] = '\0';
}

static void path_set(struct cctx *c, const char *s)
{
    snprintf(c->path, sizeof(c->path), "%s", s);
    c->pathlen = strlen(c->path);
}

static size_t ptr_hash(const void *p)
{
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 17;
    x *= 0x9E3779B97F4A7C15ULL;
    return (size_t)(x ^ (x >> 29));
}

static struct node *memo_get(struct cctx *c, const json_t *key)
{
    if (c->memo_cap == 0)
        return NULL;
    size_t mask = c->memo_cap - 1;
    for (size_t i = ptr_hash(key) & mask;; i = (i + 1) & mask) {
        if (c->memo[i].key == NULL)
            return NULL;
        if (c->memo[i].key == key)
            return c->memo[i].node;
    }
}

static bool memo_put(struct cctx *c, const json_t *key, struct node *node)
{
    if ((c->memo_n + 1) * 2 > c->memo_cap) {
        size_t cap = c->memo_cap ? c->memo_cap * 2 : 64;
        struct memo_slot *slots = calloc(cap, sizeof(*slots));
        if (slots == NULL)
            return false;
        for (size_t i = 0; i < c->memo_cap; i++) {
            if (c->memo[i].key == NULL)
                continue;
            size_t j = ptr_hash(c->memo[i].key) & (cap - 1);
            while (slots[j].key != NULL)
                j = (j + 1) & (cap - 1);
            slots[j] = c->memo[i];
        }
        free(c->memo);
        c->memo = slots;
        c->memo_cap = cap;
    }
    size_t mask = c->memo_cap - 1;
    size_t i = ptr_hash(key) & mask;
    while (c->memo[i].key != NULL)
        i = (i + 1) & mask;
    c->memo[i].key = key;
    c->memo[i].node = node;
    c->memo_n++;
    return true;
}

static bool keep_regex(struct cctx *c, pcre2_code *re)
{
    struct evd_jsonschema *v = c->v;
    if (v->nregexes == v->capregexes) {
        size_t cap = v->capregexes ? v->capregexes * 2 : 8;
        pcre2_code **p = realloc(v->regexes, cap * sizeof(*p));
        if (p == NULL) {
            pcre2_code_free(re);
            return false;
        }
        v->regexes = p;
        v->capregexes = cap;
    }
    v->regexes[v->nregexes++] = re;
    return true;
}

static pcre2_code *compile_regex(struct cctx *c, const char *pat, size_t len)
{
    char msg[200];
    bool nomem = false;
    pcre2_code *re = evd_js_regex_compile(pat, len, msg, sizeof(msg), &nomem);
    if (re == NULL && nomem)
        return cnomem(c);
    if (re == NULL)
        return cfail(c, "pattern is not a valid regular expression: %s", msg);
    if (!keep_regex(c, re))
        return cnomem(c);
    return re;
}

/* Splits off the fragment: returns the malloc'd part before '#' (NULL on ENOMEM). */
static char *strip_fragment(const char *uri)
{
    const char *hash = strchr(uri, '#');
    size_t n = hash ? (size_t)(hash - uri) : strlen(uri);
    char *out = malloc(n + 1);
    if (out != NULL) {
        memcpy(out, uri, n);
        out[n] = '\0';
    }
    return out;
}

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
    r->uri = arena_strdup(c->v, uri);
    r->base = arena_strdup(c->v, base);
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
static char *apply_id(struct cctx *c, json_t *s, const char *base, bool index)
{
    json_t *id = json_object_get(s, "$id");
    if (!json_is_string(id) || json_object_get(s, "$ref") != NULL)
        return strdup(base);
    char *abs = evd_uri_resolve(base, json_string_value(id));
    if (abs == NULL)
        return NULL;
    char *nbase = strip_fragment(abs);
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
    char *nbase = apply_id(c, s, base, true);
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

static bool walk_doc(struct cctx *c, struct doc *d)
{
    d->walked = true;
    char *base = json_is_object(d->root) ? apply_id(c, d->root, d->uri, false) : strdup(d->uri);
    if (base == NULL)
        return false;
    bool ok = add_res(c, d->uri, d->root, base) && walk_schema(c, d->root, d->uri, 0);
    free(base);
    return ok;
}

static struct res *find_res_now(struct cctx *c, const char *uri)
{
    for (size_t i = 0; i < c->nres; i++)
        if (strcmp(c->res[i].uri, uri) == 0)
            return &c->res[i];
    return NULL;
}

/* Finds a resource, indexing registered documents lazily; NULL when unknown or on ENOMEM. */
static struct res *find_res(struct cctx *c, const char *uri, const char *docpart)
{
    struct res *r = find_res_now(c, uri);
    if (r != NULL)
        return r;
    for (int pass = 0; pass < 2; pass++) {
        bool walked = false;
        for (size_t i = 0; i < c->ndocs; i++) {
            struct doc *d = &c->docs[i];
            if (d->walked || (pass == 0 && strcmp(d->uri, docpart) != 0))
                continue;
            if (!walk_doc(c, d))
                return cnomem(c);
            walked = true;
        }
        if (walked && (r = find_res_now(c, uri)) != NULL)
            return r;
    }
    return NULL;
}

/* ---- JSON pointer walk with base-URI tracking ------------------------------------------ */

enum pos { P_SCHEMA, P_MAP, P_LIST, P_OTHER };

static json_t *pointer_walk(struct cctx *c, json_t *start, const char *startbase, const char *ptr,
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
        return cnomem(c);
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
            char *nb = apply_id(c, next, base, false);
            free(base);
            base = nb;
            if (base == NULL) {
                free(tok);
                return cnomem(c);
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
static json_t *resolve_ref(struct cctx *c, const char *uri, char **outbase)
{
    char *docpart = strip_fragment(uri);
    if (docpart == NULL)
        return cnomem(c);
    const char *hash = strchr(uri, '#');
    const char *frag = hash ? hash + 1 : "";
    json_t *target = NULL;
    bool invalid = false;
    char *fragdec = evd_uri_pct_decode(frag, strlen(frag), NULL, &invalid);
    if (fragdec == NULL) {
        free(docpart);
        if (invalid)
            return cfail(c, "$ref \"%s\" has an invalid percent-encoding", uri);
        return cnomem(c);
    }
    if (fragdec[0] == '\0' || fragdec[0] == '/') {
        struct res *r = find_res(c, docpart, docpart);
        if (r != NULL)
            target = pointer_walk(c, r->schema, r->base, fragdec, outbase);
    } else {
        struct res *r = find_res(c, uri, docpart);
        if (r != NULL) {
            target = r->schema;
            *outbase = strdup(r->base);
            if (*outbase == NULL)
                target = cnomem(c);
        }
    }
    free(fragdec);
    free(docpart);
    if (target == NULL && !c->failed)
        cfail(c, "could not resolve $ref \"%s\"", uri);
    return target;
}

/* ---- keyword compilers ----------------------------------------------------------------- */

static struct node *compile_node(struct cctx *c, json_t *s, const char *base, unsigned depth);

/* Compiles a subschema one level below the current one (the caller has pushed its path). */
static struct node *compile_sub(struct cctx *c, json_t *s, const char *base, unsigned depth)
{
    return compile_node(c, s, base, depth + 1);
}

static bool json_nonneg_int(const json_t *x, size_t *out)
{
    if (!evd_js_is_integral(x))
        return false;
    if (json_is_integer(x)) {
        if (json_integer_value(x) < 0)
            return false;
        *out = (size_t)json_integer_value(x);
        return true;
    }
    double d = json_real_value(x);
    if (d < 0)
        return false;
    *out = d >= 1.8e19 ? SIZE_MAX : (size_t)d;
    return true;
}

static bool compile_list(struct cctx *c, struct check *ck, json_t *val, const char *base,
                         unsigned depth, bool nonempty)
{
    if (!json_is_array(val) || (nonempty && json_array_size(val) == 0)) {
        cfail(c, "must be a non-empty array of schemas");
        return false;
    }
    ck->n = json_array_size(val);
    ck->entries = arena_alloc(c->v, (ck->n ? ck->n : 1) * sizeof(struct entry));
    if (ck->entries == NULL)
        return cnomem(c) != NULL;
    for (size_t i = 0; i < ck->n; i++) {
        size_t old = path_push_index(c, i);
        ck->entries[i].node = compile_sub(c, json_array_get(val, i), base, depth);
        path_pop(c, old);
        if (ck->entries[i].node == NULL)
            return false;
    }
    return true;
}

static bool compile_map(struct cctx *c, struct check *ck, json_t *val, const char *base,
                        unsigned depth, bool regex_keys, bool deps)
{
    if (!json_is_object(val)) {
        cfail(c, "must be an object");
        return false;
    }
    ck->n = json_object_size(val);
    ck->entries = arena_alloc(c->v, (ck->n ? ck->n : 1) * sizeof(struct entry));
    if (ck->entries == NULL)
        return cnomem(c) != NULL;
    size_t i = 0;
    const char *k;
    size_t klen;
    json_t *sub;
    json_object_keylen_foreach(val, k, klen, sub)
    {
        struct entry *e = &ck->entries[i++];
        e->key = k;
        e->keylen = klen;
        size_t old = path_push(c, k, klen);
        if (regex_keys && (e->re = compile_regex(c, k, klen)) == NULL) {
            path_pop(c, old);
            return false;
        }
        if (deps && json_is_array(sub)) {
            size_t j;
            json_t *name;
            json_array_foreach(sub, j, name)
            {
                if (!json_is_string(name)) {
                    cfail(c, "dependency lists must contain only strings");
                    path_pop(c, old);
                    return false;
                }
            }
            e->strings = sub;
        } else {
            e->node = compile_sub(c, sub, base, depth);
            if (e->node == NULL) {
                path_pop(c, old);
                return false;
            }
        }
        path_pop(c, old);
    }
    return true;
}

/* Returns 1 when a check was produced, 0 when the keyword needs none, -1 on error. */
static int compile_keyword(struct cctx *c, size_t parent_len, struct check *ck, json_t *s,
                           const char *k, json_t *val, const char *base, unsigned depth)
{
    ck->value = val;
    if (strcmp(k, "type") == 0) {
        ck->kind = K_TYPE;
        ck->keyword = "type";
        json_t *one = val;
        size_t n = json_is_array(val) ? json_array_size(val) : 1;
        if (json_is_array(val) && n == 0) {
            cfail(c, "must be a type name or a non-empty array of type names");
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            if (json_is_array(val))
                one = json_array_get(val, i);
            unsigned bit = evd_js_type_bit(json_string_value(one));
            if (bit == 0) {
                cfail(c,
                      "must be one of \"array\", \"boolean\", \"integer\", \"null\", \"number\", "
                      "\"object\", \"string\", or an array of them");
                return -1;
            }
            if (ck->types & bit) {
                cfail(c, "type names must be unique");
                return -1;
            }
            ck->types |= bit;
        }
        return 1;
    }
    if (strcmp(k, "enum") == 0) {
        ck->kind = K_ENUM;
        ck->keyword = "enum";
        if (!json_is_array(val)) {
            cfail(c, "must be an array");
            return -1;
        }
        return 1;
    }
    if (strcmp(k, "const") == 0) {
        ck->kind = K_CONST;
        ck->keyword = "const";
        return 1;
    }
    static const struct {
        const char *name;
        enum kind kind;
    } numeric[] = {
        {"multipleOf", K_MULTIPLE_OF},
        {"maximum", K_MAXIMUM},
        {"exclusiveMaximum", K_EXCLUSIVE_MAXIMUM},
        {"minimum", K_MINIMUM},
        {"exclusiveMinimum", K_EXCLUSIVE_MINIMUM},
    };
    for (size_t i = 0; i < sizeof(numeric) / sizeof(numeric[0]); i++) {
        if (strcmp(k, numeric[i].name) != 0)
            continue;
        ck->kind = numeric[i].kind;
        ck->keyword = numeric[i].name;
        if (!json_is_number(val)) {
            cfail(c, "must be a number");
            return -1;
        }
        if (ck->kind == K_MULTIPLE_OF && json_number_value(val) <= 0) {
            cfail(c, "must be greater than 0");
            return -1;
        }
        return 1;
    }
    static const struct {
        const char *name;
        enum kind kind;
    } counts[] = {
        {"maxLength", K_MAX_LENGTH},         {"minLength", K_MIN_LENGTH},
        {"maxItems", K_MAX_ITEMS},           {"minItems", K_MIN_ITEMS},
        {"maxProperties", K_MAX_PROPERTIES}, {"minProperties", K_MIN_PROPERTIES},
    };
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        if (strcmp(k, counts[i].name) != 0)
            continue;
        ck->kind = counts[i].kind;
        ck->keyword = counts[i].name;
        if (!json_nonneg_int(val, &ck->count)) {
            cfail(c, "must be a non-negative integer");
            return -1;
        }
        return 1;
    }
    if (strcmp(k, "pattern") == 0) {
        ck->kind = K_PATTERN;
        ck->keyword = "pattern";
        if (!json_is_string(val)) {
            cfail(c, "must be a string");
            return -1;
        }
        ck->re = compile_regex(c, json_string_value(val), json_string_length(val));
        return ck->re != NULL ? 1 : -1;
    }
    if (strcmp(k, "format") == 0) {
        ck->kind = K_FORMAT;
        ck->keyword = "format";
        if (!json_is_string(val)) {
            cfail(c, "must be a string");
            return -1;
        }
        ck->format = evd_js_format_lookup(json_string_value(val));
        return ck->format != NULL ? 1 : 0; /* unknown formats are annotations only */
    }
    if (strcmp(k, "items") == 0) {
        ck->kind = K_ITEMS;
        ck->keyword = "items";
        if (json_is_array(val)) {
            ck->tuple = true;
            return compile_list(c, ck, val, base, depth, false) ? 1 : -1;
        }
        ck->sub = compile_sub(c, val, base, depth);
        return ck->sub != NULL ? 1 : -1;
    }
    static const struct {
        const char *name;
        enum kind kind;
    } single[] = {
        {"additionalItems", K_ADDITIONAL_ITEMS},
        {"contains", K_CONTAINS},
        {"additionalProperties", K_ADDITIONAL_PROPERTIES},
        {"propertyNames", K_PROPERTY_NAMES},
        {"not", K_NOT},
    };
    for (size_t i = 0; i < sizeof(single) / sizeof(single[0]); i++) {
        if (strcmp(k, single[i].name) != 0)
            continue;
        ck->kind = single[i].kind;
        ck->keyword = single[i].name;
        ck->sub = compile_sub(c, val, base, depth);
        return ck->sub != NULL ? 1 : -1;
    }
    if (strcmp(k, "uniqueItems") == 0) {
        ck->kind = K_UNIQUE_ITEMS;
        ck->keyword = "uniqueItems";
        if (!json_is_boolean(val)) {
            cfail(c, "must be a boolean");
            return -1;
        }
        return json_is_true(val) ? 1 : 0;
    }
    if (strcmp(k, "required") == 0) {
        ck->kind = K_REQUIRED;
        ck->keyword = "required";
        size_t i;
        json_t *name;
        if (!json_is_array(val)) {
            cfail(c, "must be an array of strings");
            return -1;
        }
        json_array_foreach(val, i, name)
        {
            if (!json_is_string(name)) {
                cfail(c, "must be an array of strings");
                return -1;
            }
        }
        return 1;
    }
    if (strcmp(k, "properties") == 0) {
        ck->kind = K_PROPERTIES;
        ck->keyword = "properties";
        return compile_map(c, ck, val, base, depth, false, false) ? 1 : -1;
    }
    if (strcmp(k, "patternProperties") == 0) {
        ck->kind = K_PATTERN_PROPERTIES;
        ck->keyword = "patternProperties";
        return compile_map(c, ck, val, base, depth, true, false) ? 1 : -1;
    }
    if (strcmp(k, "dependencies") == 0) {
        ck->kind = K_DEPENDENCIES;
        ck->keyword = "dependencies";
        return compile_map(c, ck, val, base, depth, false, true) ? 1 : -1;
    }
    if (strcmp(k, "definitions") == 0) {
        /* Compiled eagerly so that a broken definition is reported; produces no check. */
        struct check scratch;
        memset(&scratch, 0, sizeof(scratch));
        return compile_map(c, &scratch, val, base, depth, false, false) ? 0 : -1;
    }
    if (strcmp(k, "if") == 0) {
        ck->kind = K_IF;
        ck->keyword = "if";
        ck->sub = compile_sub(c, val, base, depth);
        if (ck->sub == NULL)
            return -1;
        json_t *branch[2] = {json_object_get(s, "then"), json_object_get(s, "else")};
        static const char *const names[2] = {"then", "else"};
        for (int b = 0; b < 2; b++) {
            if (branch[b] == NULL)
                continue;
            path_pop(c, parent_len);
            path_push(c, names[b], 4);
            struct node *sub = compile_sub(c, branch[b], base, depth);
            path_pop(c, parent_len);
            path_push(c, "if", 2);
            if (sub == NULL)
                return -1;
            if (b == 0)
                ck->then_s = sub;
            else
                ck->else_s = sub;
        }
        return 1;
    }
    static const struct {
        const char *name;
        enum kind kind;
    } lists[] = {{"allOf", K_ALL_OF}, {"anyOf", K_ANY_OF}, {"oneOf", K_ONE_OF}};
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        if (strcmp(k, lists[i].name) != 0)
            continue;
        ck->kind = lists[i].kind;
        ck->keyword = lists[i].name;
        return compile_list(c, ck, val, base, depth, true) ? 1 : -1;
    }
    if (strcmp(k, "$id") == 0 || strcmp(k, "$schema") == 0 || strcmp(k, "$comment") == 0) {
        if (!json_is_string(val)) {
            cfail(c, "must be a string");
            return -1;
        }
        return 0;
    }
    return 0; /* then/else without if, annotations and unknown keywords */
}

static struct node *compile_node(struct cctx *c, json_t *s, const char *base, unsigned depth)
{
    struct node *nd = memo_get(c, s);
    if (nd != NULL)
        return nd;
    if (depth > EVD_JSONSCHEMA_MAX_SCHEMA_DEPTH)
        return cfail(c, "schemas nest deeper than %d levels", EVD_JSONSCHEMA_MAX_SCHEMA_DEPTH);
    if (!json_is_object(s) && !json_is_boolean(s))
        return cfail(c, "a schema must be an object or a boolean");
    nd = arena_alloc(c->v, sizeof(*nd));
    if (nd == NULL || !memo_put(c, s, nd))
        return cnomem(c);
    if (json_is_boolean(s)) {
        nd->is_bool = true;
        nd->bool_value = json_is_true(s);
        return nd;
    }
    json_t *ref = json_object_get(s, "$ref");
    if (ref != NULL) {
        /* draft-07: every sibling of $ref is ignored, $id included. */
        if (!json_is_string(ref)) {
            size_t old = path_push(c, "$ref", 4);
            cfail(c, "must be a string");
            path_pop(c, old);
            return NULL;
        }
        nd->checks = arena_alloc(c->v, sizeof(struct check));
        if (nd->checks == NULL)
            return cnomem(c);
        nd->nchecks = 1;
        nd->checks[0].kind = K_REF;
        nd->checks[0].keyword = "$ref";
        nd->checks[0].value = ref;
        if (c->npend == c->cappend) {
            size_t cap = c->cappend ? c->cappend * 2 : 16;
            struct pend *p = realloc(c->pend, cap * sizeof(*p));
            if (p == NULL)
                return cnomem(c);
            c->pend = p;
            c->cappend = cap;
        }
        char *abs = evd_uri_resolve(base, json_string_value(ref));
        if (abs == NULL)
            return cnomem(c);
        c->pend[c->npend].ck = &nd->checks[0];
        c->pend[c->npend].uri = abs;
        c->npend++;
        return nd;
    }
    json_t *id = json_object_get(s, "$id");
    char *nbase = NULL;
    if (id != NULL) {
        if (!json_is_string(id)) {
            size_t old = path_push(c, "$id", 3);
            cfail(c, "must be a string");
            path_pop(c, old);
            return NULL;
        }
        char *tmp = apply_id(c, s, base, false);
        nbase = tmp ? arena_strdup(c->v, tmp) : NULL;
        free(tmp);
        if (nbase == NULL)
            return cnomem(c);
        base = nbase;
    }
    size_t cap = json_object_size(s);
    nd->checks = arena_alloc(c->v, (cap ? cap : 1) * sizeof(struct check));
    if (nd->checks == NULL)
        return cnomem(c);
    const char *k;
    size_t klen;
    json_t *val;
    json_object_keylen_foreach(s, k, klen, val)
    {
        size_t old = path_push(c, k, klen);
        struct check *ck = &nd->checks[nd->nchecks];
        int rc = compile_keyword(c, old, ck, s, k, val, base, depth);
        path_pop(c, old);
        if (rc < 0)
            return NULL;
        if (rc > 0)
            nd->nchecks++;
        else
            memset(ck, 0, sizeof(*ck));
    }
    for (size_t i = 0; i < nd->nchecks; i++) {
        const struct check *ck = &nd->checks[i];
        if (ck->kind == K_ITEMS)
            nd->items = ck;
        else if (ck->kind == K_PROPERTIES)
            nd->properties = ck->value;
        else if (ck->kind == K_PATTERN_PROPERTIES)
            nd->pattern_properties = ck;
    }
    return nd;
}

static bool resolve_pending(struct cctx *c)
{
    for (size_t i = 0; i < c->npend; i++) {
        struct check *ck = c->pend[i].ck;
        path_set(c, c->pend[i].uri);
        char *base = NULL;
        json_t *target = resolve_ref(c, c->pend[i].uri, &base);
        if (target == NULL)
            return false;
        char *abase = arena_strdup(c->v, base);
        free(base);
        if (abase == NULL)
            return cnomem(c) != NULL;
        ck->sub = compile_node(c, target, abase, 0);
        if (ck->sub == NULL)
            return false;
    }
    return true;
}

static bool add_doc(struct cctx *c, size_t cap, const char *uri, json_t *root)
{
    if (c->ndocs >= cap)
        return false;
    c->docs[c->ndocs].uri = uri;
    c->docs[c->ndocs].root = root;
    c->docs[c->ndocs].walked = false;
    c->ndocs++;
    return true;
}

static struct evd_jsonschema *compile(json_t *schema, const char *pointer, json_t *remotes,
                                      struct evd_err *err)
{
    struct cctx c;
    memset(&c, 0, sizeof(c));
    c.err = err;
    struct evd_jsonschema *v = NULL;
    if (schema == NULL) {
        evd_err_set(err, EVD_EINVAL, "schema is missing");
        return NULL;
    }
    if (remotes != NULL && !json_is_object(remotes)) {
        evd_err_set(err, EVD_EINVAL, "remote schema documents must be an object keyed by URI");
        return NULL;
    }
    v = calloc(1, sizeof(*v));
    c.v = v;
    size_t ndocs = 2 + (remotes != NULL ? json_object_size(remotes) : 0);
    c.docs = calloc(ndocs, sizeof(*c.docs));
    if (v == NULL || c.docs == NULL) {
        cnomem(&c);
        goto fail;
    }
    v->mctx = pcre2_match_context_create(NULL);
    if (v->mctx == NULL) {
        cnomem(&c);
        goto fail;
    }
    pcre2_set_match_limit(v->mctx, REGEX_MATCH_LIMIT);
    pcre2_set_depth_limit(v->mctx, REGEX_DEPTH_LIMIT);

    add_doc(&c, ndocs, "", schema);
    if (remotes != NULL) {
        const char *uri;
        json_t *doc;
        json_object_foreach(remotes, uri, doc)
        {
            add_doc(&c, ndocs, uri, doc);
        }
    }
    json_t *meta = evd_jsonschema_draft7();
    if (meta != NULL)
        add_doc(&c, ndocs, EVD_JSONSCHEMA_DRAFT7_URI, meta);

    if (!walk_doc(&c, &c.docs[0])) {
        cnomem(&c);
        goto fail;
    }
    path_set(&c, pointer);
    json_t *start = schema;
    char *base = NULL;
    if (pointer[0] != '\0') {
        struct res *r = find_res_now(&c, "");
        start = pointer_walk(&c, r->schema, r->base, pointer, &base);
        if (start == NULL) {
            if (!c.failed)
                cfail(&c, "no subschema at this pointer");
            goto fail;
        }
    }
    const char *abase = "";
    if (base != NULL) {
        abase = arena_strdup(v, base);
        free(base);
        if (abase == NULL) {
            cnomem(&c);
            goto fail;
        }
    }
    v->root = compile_node(&c, start, abase, 0);
    if (v->root == NULL || !resolve_pending(&c))
        goto fail;
    goto out;
fail:
    evd_jsonschema_free(v);
    v = NULL;
out:
    for (size_t i = 0; i < c.npend; i++)
        free(c.pend[i].uri);
    free(c.pend);
    free(c.res);
    free(c.memo);
    free(c.docs);
    return v;
}

struct evd_jsonschema *evd_jsonschema_new_with_remotes(json_t *schema, json_t *remotes,
                                                       struct evd_err *err)
{
    return compile(schema, "", remotes, err);
}

struct evd_jsonschema *evd_jsonschema_new_at(json_t *doc, const char *pointer, json_t *remotes,
                                             struct evd_err *err)
{
    if (pointer == NULL || (pointer[0] != '\0' && pointer[0] != '/')) {
        evd_err_set(err, EVD_EINVAL, "schema pointer must be empty or start with \"/\"");
        return NULL;
    }
    return compile(doc, pointer, remotes, err);
}

struct evd_jsonschema *evd_jsonschema_new(json_t *schema, struct evd_err *err)
{
    return evd_jsonschema_new_with_remotes(schema, NULL, err);
}

/* ---- evaluation ------------------------------------------------------------------------ */

struct seg {
    const char *key; /* NULL for an array index */
    size_t len_or_index;
};

struct vctx {
    const struct evd_jsonschema *v;
    struct evd_schema_error *errs;
    size_t max;
    size_t count;
    pcre2_match_data *md;
    unsigned depth;
    bool too_deep;
    bool depth_reported;
    size_t npath;
    struct seg path[EVD_JSONSCHEMA_MAX_EVAL_DEPTH + 2];
};

static size_t eval(struct vctx *c, const struct node *n, const json_t *x, bool collect);

static void push_key(struct vctx *c, const char *k, size_t len)
{
    c->path[c->npath].key = k;
    c->path[c->npath].len_or_index = len;
    c->npath++;
}

static void push_index(struct vctx *c, size_t i)
{
    c->path[c->npath].key = NULL;
    c->path[c->npath].len_or_index = i;
    c->npath++;
}

static void format_path(const struct vctx *c, char *out, size_t outsz)
{
    struct evd_sbuf b;
    evd_sbuf_init(&b, out, outsz);
    for (size_t i = 0; i < c->npath && !b.truncated; i++) {
        const struct seg *s = &c->path[i];
        if (s->key == NULL) {
            evd_sbuf_printf(&b, "/%zu", s->len_or_index);
            continue;
        }
        evd_sbuf_put_pointer_token(&b, s->key, s->len_or_index);
    }
    evd_sbuf_finish(&b);
}

/*
 * Records one error. The template's "{i}" is the instance and "{v}" the value `v`, both
 * as compact JSON bounded to MSG_VALUE_MAX bytes; "{s}" is the raw text `s`.
 */
static __attribute__((noinline)) void report(struct vctx *c, const char *keyword, const char *tmpl,
                                             const json_t *x, const json_t *v, const char *s)
{
    if (strcmp(keyword, "depth") == 0)
        c->depth_reported = true;
    c->count++;
    if (c->count > c->max)
        return;
    struct evd_schema_error *e = &c->errs[c->count - 1];
    format_path(c, e->instance_path, sizeof(e->instance_path));
    snprintf(e->keyword, sizeof(e->keyword), "%s", keyword);
    struct evd_sbuf b;
    evd_sbuf_init(&b, e->message, sizeof(e->message));
    for (const char *p = tmpl; *p != '\0';) {
        if (p[0] == '{' && p[1] != '\0' && p[2] == '}' && strchr("ivs", p[1]) != NULL) {
            if (p[1] == 's') {
                evd_sbuf_puts(&b, s ? s : "");
            } else {
                char vb[MSG_VALUE_MAX + 4];
                struct evd_sbuf sb;
                evd_sbuf_init(&sb, vb, sizeof(vb));
                evd_js_dump(&sb, p[1] == 'i' ? x : v);
                evd_sbuf_finish(&sb);
                evd_sbuf_put(&b, vb, sb.len);
            }
            p += 3;
            continue;
        }
        const char *q = strchr(p + 1, '{');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        evd_sbuf_put(&b, p, n);
        p += n;
    }
    evd_sbuf_finish(&b);
}

static __attribute__((noinline)) void report_type(struct vctx *c, const struct check *k,
                                                  const json_t *x)
{
    char names[200];
    struct evd_sbuf b;
    evd_sbuf_init(&b, names, sizeof(names));
    if (!json_is_array(k->value)) {
        report(c, "type", "{i} is not of type \"{s}\"", x, NULL, json_string_value(k->value));
        return;
    }
    if (json_array_size(k->value) == 1) {
        report(c, "type", "{i} is not of type \"{s}\"", x, NULL,
               json_string_value(json_array_get(k->value, 0)));
        return;
    }
    for (size_t i = 0; i < json_array_size(k->value); i++)
        evd_sbuf_printf(&b, "%s\"%s\"", i ? ", " : "",
                        json_string_value(json_array_get(k->value, i)));
    evd_sbuf_finish(&b);
    report(c, "type", "{i} is not of types {s}", x, NULL, names);
}

/* "Additional ... are not allowed (a, b were unexpected)"; items are JSON texts or names. */
static __attribute__((noinline)) void report_unexpected(struct vctx *c, const char *keyword,
                                                        const char *what, const json_t *x,
                                                        const char **keys, const size_t *lens,
                                                        const json_t *items, size_t from, size_t n)
{
    char list[400];
    struct evd_sbuf b;
    evd_sbuf_init(&b, list, sizeof(list));
    for (size_t i = 0; i < n && !b.truncated; i++) {
        if (i > 0)
            evd_sbuf_puts(&b, ", ");
        if (keys != NULL) {
            evd_sbuf_put(&b, "'", 1);
            evd_sbuf_put(&b, keys[i], lens[i]);
            evd_sbuf_put(&b, "'", 1);
        } else {
            evd_js_dump(&b, json_array_get(items, from + i));
        }
    }
    evd_sbuf_finish(&b);
    char msg[480];
    snprintf(msg, sizeof(msg), "Additional %s are not allowed (%s %s unexpected)", what, list,
             n == 1 ? "was" : "were");
    report(c, keyword, "{s}", x, NULL, msg);
}

static bool type_matches(unsigned types, const json_t *x)
{
    switch (json_typeof(x)) {
    case JSON_NULL:
        return types & EVD_JS_T_NULL;
    case JSON_TRUE:
    case JSON_FALSE:
        return types & EVD_JS_T_BOOLEAN;
    case JSON_OBJECT:
        return types & EVD_JS_T_OBJECT;
    case JSON_ARRAY:
        return types & EVD_JS_T_ARRAY;
    case JSON_STRING:
        return types & EVD_JS_T_STRING;
    case JSON_INTEGER:
        return types & (EVD_JS_T_NUMBER | EVD_JS_T_INTEGER);
    case JSON_REAL:
        return (types & EVD_JS_T_NUMBER) || ((types & EVD_JS_T_INTEGER) && evd_js_is_integral(x));
    }
    return false;
}

static bool multiple_of(const json_t *x, const json_t *m)
{
    if (json_is_integer(x) && json_is_integer(m))
        return json_integer_value(x) % json_integer_value(m) == 0;
    double xv = json_number_value(x), mv = json_number_value(m);
    double q = xv / mv;
    if (!isfinite(q))
        return fmod(xv, mv) == 0.0;
    double r = fabs(q - nearbyint(q));
    return r < 1e-9 * fmax(1.0, fabs(q)) || r == 0.0;
}

static pcre2_match_data *match_data(struct vctx *c)
{
    if (c->md == NULL)
        c->md = pcre2_match_data_create(1, NULL);
    return c->md;
}

static bool regex_match(struct vctx *c, const pcre2_code *re, const char *s, size_t n)
{
    pcre2_match_data *md = match_data(c);
    if (md == NULL)
        return false; /* out of memory: treated as no match, so the value is rejected */
    return evd_js_regex_search(re, s, n, md, c->v->mctx);
}

struct hidx {
    uint64_t h;
    size_t i;
};

static int hidx_cmp(const void *a, const void *b)
{
    const struct hidx *x = a, *y = b;
    if (x->h != y->h)
        return x->h < y->h ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* True when all items differ; hashing keeps it O(n log n). */
static bool items_unique(const json_t *x)
{
    size_t n = json_array_size(x);
    if (n < 2)
        return true;
    if (n <= 16) {
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                if (evd_js_equal(json_array_get(x, i), json_array_get(x, j)))
                    return false;
        return true;
    }
    struct hidx *h = malloc(n * sizeof(*h));
    if (h == NULL)
        return false; /* out of memory: reported as a uniqueItems failure */
    for (size_t i = 0; i < n; i++) {
        h[i].h = evd_js_hash(json_array_get(x, i));
        h[i].i = i;
    }
    qsort(h, n, sizeof(*h), hidx_cmp);
    bool unique = true;
    for (size_t i = 0; i < n && unique; i++)
        for (size_t j = i + 1; j < n && h[j].h == h[i].h && unique; j++)
            if (evd_js_equal(json_array_get(x, h[i].i), json_array_get(x, h[j].i)))
                unique = false;
    free(h);
    return unique;
}

static bool is_additional(const struct node *n, struct vctx *c, const char *k, size_t klen)
{
    if (n->properties != NULL && json_object_getn(n->properties, k, klen) != NULL)
        return false;
    if (n->pattern_properties != NULL)
        for (size_t i = 0; i < n->pattern_properties->n; i++)
            if (regex_match(c, n->pattern_properties->entries[i].re, k, klen))
                return false;
    return true;
}

static size_t eval_additional_properties(struct vctx *c, const struct node *n,
                                         const struct check *k, const json_t *x, bool collect)
{
    if (k->sub->is_bool && k->sub->bool_value)
        return 0;
    bool forbid = k->sub->is_bool && !k->sub->bool_value;
    size_t errs = 0, nextra = 0;
    const char *key;
    size_t klen;
    json_t *val;
    if (forbid) {
        json_object_keylen_foreach((json_t *)x, key, klen, val)
        {
            if (is_additional(n, c, key, klen)) {
                if (!collect)
                    return 1;
                nextra++;
            }
        }
        if (nextra == 0)
            return 0;
        if (c->count < c->max) {
            const char **keys = malloc(nextra * sizeof(*keys));
            size_t *lens = malloc(nextra * sizeof(*lens));
            if (keys != NULL && lens != NULL) {
                size_t i = 0;
                json_object_keylen_foreach((json_t *)x, key, klen, val)
                {
                    if (is_additional(n, c, key, klen)) {
                        keys[i] = key;
                        lens[i++] = klen;
                    }
                }
                report_unexpected(c, "additionalProperties", "properties", x, keys, lens, NULL, 0,
                                  nextra);
            } else {
                report(c, "additionalProperties", "Additional properties are not allowed", x, NULL,
                       NULL);
            }
            free(keys);
            free(lens);
        } else {
            c->count++;
        }
        return 1;
    }
    json_object_keylen_foreach((json_t *)x, key, klen, val)
    {
        if (!is_additional(n, c, key, klen))
            continue;
        push_key(c, key, klen);
        errs += eval(c, k->sub, val, collect);
        c->npath--;
        if (errs && !collect)
            return 1;
    }
    return errs;
}

static size_t eval_check(struct vctx *c, const struct node *n, const struct check *k,
                         const json_t *x, bool collect)
{
    size_t errs = 0;
#define FAIL(tmpl, v, s)                                                                           \
    do {                                                                                           \
        if (!collect)                                                                              \
            return 1;                                                                              \
        report(c, k->keyword, tmpl, x, v, s);                                                      \
        errs++;                                                                                    \
    } while (0)

    switch (k->kind) {
    case K_TYPE:
        if (!type_matches(k->types, x)) {
            if (!collect)
                return 1;
            report_type(c, k, x);
            errs++;
        }
        break;
    case K_ENUM: {
        bool found = false;
        for (size_t i = 0; i < json_array_size(k->value) && !found; i++)
            found = evd_js_equal(json_array_get(k->value, i), x);
        if (!found)
            FAIL("{i} is not one of {v}", k->value, NULL);
        break;
    }
    case K_CONST:
        if (!evd_js_equal(k->value, x))
            FAIL("{v} was expected", k->value, NULL);
        break;
    case K_MULTIPLE_OF:
        if (json_is_number(x) && !multiple_of(x, k->value))
            FAIL("{i} is not a multiple of {v}", k->value, NULL);
        break;
    case K_MAXIMUM:
        if (json_is_number(x) && evd_js_num_cmp(x, k->value) > 0)
            FAIL("{i} is greater than the maximum of {v}", k->value, NULL);
        break;
    case K_EXCLUSIVE_MAXIMUM:
        if (json_is_number(x) && evd_js_num_cmp(x, k->value) >= 0)
            FAIL("{i} is greater than or equal to the maximum of {v}", k->value, NULL);
        break;
    case K_MINIMUM:
        if (json_is_number(x) && evd_js_num_cmp(x, k->value) < 0)
            FAIL("{i} is less than the minimum of {v}", k->value, NULL);
        break;
    case K_EXCLUSIVE_MINIMUM:
        if (json_is_number(x) && evd_js_num_cmp(x, k->value) <= 0)
            FAIL("{i} is less than or equal to the minimum of {v}", k->value, NULL);
        break;
    case K_MAX_LENGTH:
        if (json_is_string(x) &&
            evd_utf8_count(json_string_value(x), json_string_length(x)) > k->count)
            FAIL("{i} is longer than {v} character{s}", k->value, k->count == 1 ? "" : "s");
        break;
    case K_MIN_LENGTH:
        if (json_is_string(x) &&
            evd_utf8_count(json_string_value(x), json_string_length(x)) < k->count)
            FAIL("{i} is shorter than {v} character{s}", k->value, k->count == 1 ? "" : "s");
        break;
    case K_PATTERN:
        if (json_is_string(x) &&
            !regex_match(c, k->re, json_string_value(x), json_string_length(x)))
            FAIL("{i} does not match \"{s}\"", NULL, json_string_value(k->value));
        break;
    case K_FORMAT:
        if (json_is_string(x) && !k->format(json_string_value(x), json_string_length(x)))
            FAIL("{i} is not a \"{s}\"", NULL, json_string_value(k->value));
        break;
    case K_ITEMS: {
        if (!json_is_array(x))
            break;
        size_t n_items = json_array_size(x);
        if (k->tuple && k->n < n_items)
            n_items = k->n;
        for (size_t i = 0; i < n_items; i++) {
            push_index(c, i);
            errs += eval(c, k->tuple ? k->entries[i].node : k->sub, json_array_get(x, i), collect);
            c->npath--;
            if (errs && !collect)
                return 1;
        }
        break;
    }
    case K_ADDITIONAL_ITEMS: {
        if (!json_is_array(x) || n->items == NULL || !n->items->tuple)
            break;
        size_t from = n->items->n, size = json_array_size(x);
        if (size <= from || (k->sub->is_bool && k->sub->bool_value))
            break;
        if (k->sub->is_bool) {
            if (!collect)
                return 1;
            if (c->count < c->max)
                report_unexpected(c, "additionalItems", "items", x, NULL, NULL, x, from,
                                  size - from);
            else
                c->count++;
            errs++;
            break;
        }
        for (size_t i = from; i < size; i++) {
            push_index(c, i);
            errs += eval(c, k->sub, json_array_get(x, i), collect);
            c->npath--;
            if (errs && !collect)
                return 1;
        }
        break;
    }
    case K_MAX_ITEMS:
        if (json_is_array(x) && json_array_size(x) > k->count)
            FAIL("{i} has more than {v} item{s}", k->value, k->count == 1 ? "" : "s");
        break;
    case K_MIN_ITEMS:
        if (json_is_array(x) && json_array_size(x) < k->count)
            FAIL("{i} has less than {v} item{s}", k->value, k->count == 1 ? "" : "s");
        break;
    case K_UNIQUE_ITEMS:
        if (json_is_array(x) && !items_unique(x))
            FAIL("{i} has non-unique elements", NULL, NULL);
        break;
    case K_CONTAINS: {
        if (!json_is_array(x))
            break;
        bool found = false;
        for (size_t i = 0; i < json_array_size(x) && !found; i++) {
            push_index(c, i);
            found = eval(c, k->sub, json_array_get(x, i), false) == 0;
            c->npath--;
        }
        if (!found)
            FAIL("None of {i} are valid under the given schema", NULL, NULL);
        break;
    }
    case K_MAX_PROPERTIES:
        if (json_is_object(x) && json_object_size(x) > k->count)
            FAIL("{i} has more than {v} propert{s}", k->value, k->count == 1 ? "y" : "ies");
        break;
    case K_MIN_PROPERTIES:
        if (json_is_object(x) && json_object_size(x) < k->count)
            FAIL("{i} has less than {v} propert{s}", k->value, k->count == 1 ? "y" : "ies");
        break;
    case K_REQUIRED: {
        if (!json_is_object(x))
            break;
        size_t i;
        json_t *name;
        json_array_foreach(k->value, i, name)
        {
            if (json_object_getn(x, json_string_value(name), json_string_length(name)) == NULL)
                FAIL("{v} is a required property", name, NULL);
        }
        break;
    }
    case K_PROPERTIES:
        if (!json_is_object(x))
            break;
        for (size_t i = 0; i < k->n; i++) {
            const struct entry *e = &k->entries[i];
            json_t *val = json_object_getn(x, e->key, e->keylen);
            if (val == NULL)
                continue;
            push_key(c, e->key, e->keylen);
            errs += eval(c, e->node, val, collect);
            c->npath--;
            if (errs && !collect)
                return 1;
        }
        break;
    case K_PATTERN_PROPERTIES:
        if (!json_is_object(x))
            break;
        for (size_t i = 0; i < k->n; i++) {
            const char *key;
            size_t klen;
            json_t *val;
            json_object_keylen_foreach((json_t *)x, key, klen, val)
            {
                if (!regex_match(c, k->entries[i].re, key, klen))
                    continue;
                push_key(c, key, klen);
                errs += eval(c, k->entries[i].node, val, collect);
                c->npath--;
                if (errs && !collect)
                    return 1;
            }
        }
        break;
    case K_ADDITIONAL_PROPERTIES:
        if (json_is_object(x))
            errs += eval_additional_properties(c, n, k, x, collect);
        break;
    case K_DEPENDENCIES:
        if (!json_is_object(x))
            break;
        for (size_t i = 0; i < k->n; i++) {
            const struct entry *e = &k->entries[i];
            if (json_object_getn(x, e->key, e->keylen) == NULL)
                continue;
            if (e->strings != NULL) {
                size_t j;
                json_t *name;
                json_array_foreach(e->strings, j, name)
                {
                    if (json_object_getn(x, json_string_value(name), json_string_length(name)) ==
                        NULL)
                        FAIL("{v} is a required property", name, NULL);
                }
            } else {
                errs += eval(c, e->node, x, collect);
                if (errs && !collect)
                    return 1;
            }
        }
        break;
    case K_PROPERTY_NAMES: {
        if (!json_is_object(x))
            break;
        const char *key;
        size_t klen;
        json_t *val;
        json_object_keylen_foreach((json_t *)x, key, klen, val)
        {
            json_t *name = json_stringn_nocheck(key, klen);
            if (name == NULL) {
                FAIL("could not allocate a property name", NULL, NULL);
                continue;
            }
            errs += eval(c, k->sub, name, collect);
            json_decref(name);
            if (errs && !collect)
                return 1;
        }
        break;
    }
    case K_IF:
        if (eval(c, k->sub, x, false) == 0) {
            if (k->then_s != NULL)
                errs += eval(c, k->then_s, x, collect);
        } else if (k->else_s != NULL) {
            errs += eval(c, k->else_s, x, collect);
        }
        break;
    case K_ALL_OF:
        for (size_t i = 0; i < k->n; i++) {
            errs += eval(c, k->entries[i].node, x, collect);
            if (errs && !collect)
                return 1;
        }
        break;
    case K_ANY_OF: {
        bool ok = false;
        for (size_t i = 0; i < k->n && !ok; i++)
            ok = eval(c, k->entries[i].node, x, false) == 0;
        if (!ok)
            FAIL("{i} is not valid under any of the schemas listed in the 'anyOf' keyword", NULL,
                 NULL);
        break;
    }
    case K_ONE_OF: {
        size_t valid = 0;
        for (size_t i = 0; i < k->n && valid < 2; i++)
            valid += eval(c, k->entries[i].node, x, false) == 0;
        if (valid == 0)
            FAIL("{i} is not valid under any of the schemas listed in the 'oneOf' keyword", NULL,
                 NULL);
        else if (valid > 1)
            FAIL("{i} is valid under more than one of the schemas listed in the 'oneOf' keyword",
                 NULL, NULL);
        break;
    }
    case K_NOT:
        if (eval(c, k->sub, x, false) == 0)
            FAIL("{v} is not allowed for {i}", k->value, NULL);
        break;
    case K_REF:
        errs += eval(c, k->sub, x, collect);
        break;
    }
#undef FAIL
    return errs;
}

static size_t eval(struct vctx *c, const struct node *n, const json_t *x, bool collect)
{
    if (n->is_bool) {
        if (n->bool_value)
            return 0;
        if (collect)
            report(c, "false", "False schema does not allow {i}", x, NULL, NULL);
        return 1;
    }
    if (c->depth >= EVD_JSONSCHEMA_MAX_EVAL_DEPTH) {
        c->too_deep = true;
        if (collect) {
            char msg[96];
            snprintf(msg, sizeof(msg), "validation exceeds the maximum depth of %d nested schemas",
                     EVD_JSONSCHEMA_MAX_EVAL_DEPTH);
            report(c, "depth", "{s}", x, NULL, msg);
        }
        return 1;
    }
    c->depth++;
    size_t errs = 0;
    for (size_t i = 0; i < n->nchecks; i++) {
        errs += eval_check(c, n, &n->checks[i], x, collect);
        if (errs && !collect)
            break;
    }
    c->depth--;
    return errs;
}

static size_t run(const struct evd_jsonschema *v, const json_t *instance,
                  struct evd_schema_error *errs, size_t max, bool collect)
{
    struct vctx *c = malloc(sizeof(*c));
    if (c == NULL) {
        if (max > 0) {
            memset(&errs[0], 0, sizeof(errs[0]));
            snprintf(errs[0].keyword, sizeof(errs[0].keyword), "memory");
            snprintf(errs[0].message, sizeof(errs[0].message),
                     "could not allocate memory to validate");
        }
        return 1;
    }
    c->v = v;
    c->errs = errs;
    c->max = errs != NULL ? max : 0;
    c->count = 0;
    c->md = NULL;
    c->depth = 0;
    c->too_deep = false;
    c->depth_reported = false;
    c->npath = 0;
    size_t n = eval(c, v->root, instance, collect);
    if (collect)
        n = c->count;
    if (c->too_deep && !c->depth_reported) {
        /*
         * A branch cut off by the depth bound (inside anyOf, not, if, ...) must neither let
         * the value pass nor go unexplained: the bound itself is reported at the root.
         */
        c->npath = 0;
        char msg[96];
        snprintf(msg, sizeof(msg), "validation exceeds the maximum depth of %d nested schemas",
                 EVD_JSONSCHEMA_MAX_EVAL_DEPTH);
        report(c, "depth", "{s}", instance, NULL, msg);
        n = collect ? c->count : 1;
    }
    pcre2_match_data_free(c->md);
    free(c);
    return n;
}

size_t evd_jsonschema_validate(const struct evd_jsonschema *v, const json_t *instance,
                               struct evd_schema_error *errs, size_t max)
{
    return run(v, instance, errs, max, true);
}

bool evd_jsonschema_is_valid(const struct evd_jsonschema *v, const json_t *instance)
{
    return run(v, instance, NULL, 0, false) == 0;
}

size_t evd_jsonschema_check(json_t *schema, const json_t *instance, struct evd_schema_error *errs,
                            size_t max, struct evd_err *err)
{
    struct evd_jsonschema *v = evd_jsonschema_new(schema, err);
    if (v == NULL)
        return (size_t)-1;
    size_t n = evd_jsonschema_validate(v, instance, errs, max);
    evd_jsonschema_free(v);
    return n;
}
