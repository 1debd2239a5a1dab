/*
 * JSON Schema draft-07: the compiler (API in jsonschema.h; the compiled form and its
 * DESIGN in jsonschema_node.h, the evaluator in jsonschema_eval.c).
 */
#include "schema/jsonschema_compile.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REGEX_MATCH_LIMIT 1000000u
#define REGEX_DEPTH_LIMIT 10000u

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

char *evd_jsc_strdup(struct evd_jsonschema *v, const char *s)
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

/* ---- compile context (jsonschema_compile.h) -------------------------------------------- */

void *evd_jsc_fail(struct cctx *c, const char *fmt, ...)
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

void *evd_jsc_nomem(struct cctx *c)
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
        return evd_jsc_nomem(c);
    if (re == NULL)
        return evd_jsc_fail(c, "pattern is not a valid regular expression: %s", msg);
    if (!keep_regex(c, re))
        return evd_jsc_nomem(c);
    return re;
}

/* Splits off the fragment: returns the malloc'd part before '#' (NULL on ENOMEM). */
char *evd_jsc_strip_fragment(const char *uri)
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
        evd_jsc_fail(c, "must be a non-empty array of schemas");
        return false;
    }
    ck->n = json_array_size(val);
    ck->entries = arena_alloc(c->v, (ck->n ? ck->n : 1) * sizeof(struct entry));
    if (ck->entries == NULL)
        return evd_jsc_nomem(c) != NULL;
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
        evd_jsc_fail(c, "must be an object");
        return false;
    }
    ck->n = json_object_size(val);
    ck->entries = arena_alloc(c->v, (ck->n ? ck->n : 1) * sizeof(struct entry));
    if (ck->entries == NULL)
        return evd_jsc_nomem(c) != NULL;
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
                    evd_jsc_fail(c, "dependency lists must contain only strings");
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
            evd_jsc_fail(c, "must be a type name or a non-empty array of type names");
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            if (json_is_array(val))
                one = json_array_get(val, i);
            unsigned bit = evd_js_type_bit(json_string_value(one));
            if (bit == 0) {
                evd_jsc_fail(c,
                      "must be one of \"array\", \"boolean\", \"integer\", \"null\", \"number\", "
                      "\"object\", \"string\", or an array of them");
                return -1;
            }
            if (ck->types & bit) {
                evd_jsc_fail(c, "type names must be unique");
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
            evd_jsc_fail(c, "must be an array");
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
            evd_jsc_fail(c, "must be a number");
            return -1;
        }
        if (ck->kind == K_MULTIPLE_OF && json_number_value(val) <= 0) {
            evd_jsc_fail(c, "must be greater than 0");
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
            evd_jsc_fail(c, "must be a non-negative integer");
            return -1;
        }
        return 1;
    }
    if (strcmp(k, "pattern") == 0) {
        ck->kind = K_PATTERN;
        ck->keyword = "pattern";
        if (!json_is_string(val)) {
            evd_jsc_fail(c, "must be a string");
            return -1;
        }
        ck->re = compile_regex(c, json_string_value(val), json_string_length(val));
        return ck->re != NULL ? 1 : -1;
    }
    if (strcmp(k, "format") == 0) {
        ck->kind = K_FORMAT;
        ck->keyword = "format";
        if (!json_is_string(val)) {
            evd_jsc_fail(c, "must be a string");
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
            evd_jsc_fail(c, "must be a boolean");
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
            evd_jsc_fail(c, "must be an array of strings");
            return -1;
        }
        json_array_foreach(val, i, name)
        {
            if (!json_is_string(name)) {
                evd_jsc_fail(c, "must be an array of strings");
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
            evd_jsc_fail(c, "must be a string");
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
        return evd_jsc_fail(c, "schemas nest deeper than %d levels", EVD_JSONSCHEMA_MAX_SCHEMA_DEPTH);
    if (!json_is_object(s) && !json_is_boolean(s))
        return evd_jsc_fail(c, "a schema must be an object or a boolean");
    nd = arena_alloc(c->v, sizeof(*nd));
    if (nd == NULL || !memo_put(c, s, nd))
        return evd_jsc_nomem(c);
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
            evd_jsc_fail(c, "must be a string");
            path_pop(c, old);
            return NULL;
        }
        nd->checks = arena_alloc(c->v, sizeof(struct check));
        if (nd->checks == NULL)
            return evd_jsc_nomem(c);
        nd->nchecks = 1;
        nd->checks[0].kind = K_REF;
        nd->checks[0].keyword = "$ref";
        nd->checks[0].value = ref;
        if (c->npend == c->cappend) {
            size_t cap = c->cappend ? c->cappend * 2 : 16;
            struct pend *p = realloc(c->pend, cap * sizeof(*p));
            if (p == NULL)
                return evd_jsc_nomem(c);
            c->pend = p;
            c->cappend = cap;
        }
        char *abs = evd_uri_resolve(base, json_string_value(ref));
        if (abs == NULL)
            return evd_jsc_nomem(c);
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
            evd_jsc_fail(c, "must be a string");
            path_pop(c, old);
            return NULL;
        }
        char *tmp = evd_jsc_apply_id(c, s, base, false);
        nbase = tmp ? evd_jsc_strdup(c->v, tmp) : NULL;
        free(tmp);
        if (nbase == NULL)
            return evd_jsc_nomem(c);
        base = nbase;
    }
    size_t cap = json_object_size(s);
    nd->checks = arena_alloc(c->v, (cap ? cap : 1) * sizeof(struct check));
    if (nd->checks == NULL)
        return evd_jsc_nomem(c);
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
        json_t *target = evd_jsc_resolve_ref(c, c->pend[i].uri, &base);
        if (target == NULL)
            return false;
        char *abase = evd_jsc_strdup(c->v, base);
        free(base);
        if (abase == NULL)
            return evd_jsc_nomem(c) != NULL;
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
        evd_jsc_nomem(&c);
        goto fail;
    }
    v->mctx = pcre2_match_context_create(NULL);
    if (v->mctx == NULL) {
        evd_jsc_nomem(&c);
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

    if (!evd_jsc_walk_doc(&c, &c.docs[0])) {
        evd_jsc_nomem(&c);
        goto fail;
    }
    path_set(&c, pointer);
    json_t *start = schema;
    char *base = NULL;
    if (pointer[0] != '\0') {
        struct res *r = evd_jsc_find_res_now(&c, "");
        start = evd_jsc_pointer_walk(&c, r->schema, r->base, pointer, &base);
        if (start == NULL) {
            if (!c.failed)
                evd_jsc_fail(&c, "no subschema at this pointer");
            goto fail;
        }
    }
    const char *abase = "";
    if (base != NULL) {
        abase = evd_jsc_strdup(v, base);
        free(base);
        if (abase == NULL) {
            evd_jsc_nomem(&c);
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
