/*
 * The owner-schema → provider wire transform and the provider limits that trigger the
 * whole-value JSON-text fallback (the envelopes and decoding are in so_wire.c). The rules
 * are listed in docs/schema.md ("Wire transform"); each wire object is built with "type"
 * first, then "description", then the rest, so that the wire text is stable.
 */
#include "schema/jsonschema_impl.h"
#include "schema/so_transform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define XF_MAX_DEPTH 64    /* owner nesting beyond this travels as JSON text */
#define TEXT_DESC_MAX 4000 /* bytes of a JSON-text field's description */

/* OpenAI structured-output limits (Responses and Chat Completions). */
#define OAI_MAX_DEPTH 10
#define OAI_MAX_PROPERTIES 5000
#define OAI_MAX_STRING_TOTAL 120000
#define OAI_MAX_ENUM_VALUES 1000
#define OAI_BIG_ENUM_COUNT 250
#define OAI_BIG_ENUM_CHARS 15000
/* Anthropic strict-schema limits. */
#define ANT_MAX_OPTIONAL 24
#define ANT_MAX_UNIONS 16

/* ---- type bits --------------------------------------------------------------------- */

static const char *bit_name(unsigned bit)
{
    switch (bit) {
    case EVD_JS_T_NULL:
        return "null";
    case EVD_JS_T_BOOLEAN:
        return "boolean";
    case EVD_JS_T_OBJECT:
        return "object";
    case EVD_JS_T_ARRAY:
        return "array";
    case EVD_JS_T_NUMBER:
        return "number";
    case EVD_JS_T_STRING:
        return "string";
    default:
        return "integer";
    }
}

static unsigned value_bit(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_NULL:
        return EVD_JS_T_NULL;
    case JSON_TRUE:
    case JSON_FALSE:
        return EVD_JS_T_BOOLEAN;
    case JSON_OBJECT:
        return EVD_JS_T_OBJECT;
    case JSON_ARRAY:
        return EVD_JS_T_ARRAY;
    case JSON_STRING:
        return EVD_JS_T_STRING;
    case JSON_INTEGER:
        return EVD_JS_T_INTEGER;
    case JSON_REAL:
        return evd_js_is_integral(v) ? EVD_JS_T_INTEGER : EVD_JS_T_NUMBER;
    }
    return 0;
}

static bool has_any(json_t *s, const char *const *keys)
{
    for (size_t i = 0; keys[i] != NULL; i++)
        if (json_object_get(s, keys[i]) != NULL)
            return true;
    return false;
}

static const char *const OBJECT_KEYS[] = {
    "properties",        "required",      "additionalProperties",
    "patternProperties", "minProperties", "maxProperties",
    "propertyNames",     "dependencies",  NULL};
static const char *const ARRAY_KEYS[] = {"items",    "additionalItems", "minItems", "maxItems",
                                         "contains", "uniqueItems",     NULL};
static const char *const STRING_KEYS[] = {"minLength", "maxLength", "pattern", "format", NULL};
static const char *const NUMBER_KEYS[] = {"minimum",          "maximum",    "exclusiveMinimum",
                                          "exclusiveMaximum", "multipleOf", NULL};

/* The types a schema admits: its "type", else what enum/const and its keywords imply. */
static unsigned schema_types(json_t *s)
{
    json_t *type = json_object_get(s, "type");
    unsigned t = 0;
    if (json_is_string(type))
        return evd_js_type_bit(json_string_value(type));
    if (json_is_array(type)) {
        size_t i;
        json_t *name;
        json_array_foreach(type, i, name) t |= evd_js_type_bit(json_string_value(name));
        return t;
    }
    json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    if (cn != NULL)
        return value_bit(cn);
    if (json_is_array(en)) {
        size_t i;
        json_t *v;
        json_array_foreach(en, i, v) t |= value_bit(v);
        return t;
    }
    if (has_any(s, OBJECT_KEYS))
        t |= EVD_JS_T_OBJECT;
    if (has_any(s, ARRAY_KEYS))
        t |= EVD_JS_T_ARRAY;
    if (has_any(s, STRING_KEYS))
        t |= EVD_JS_T_STRING;
    if (has_any(s, NUMBER_KEYS))
        t |= EVD_JS_T_NUMBER;
    return t;
}

static int popcount(unsigned t)
{
    int n = 0;
    for (; t; t &= t - 1)
        n++;
    return n;
}

/* ---- transform context ------------------------------------------------------------- */

static void *oom(struct xf *x)
{
    x->nomem = true;
    return NULL;
}

/* Steals v; records ENOMEM when the set fails. */
static void put(struct xf *x, json_t *obj, const char *key, json_t *v)
{
    if (v == NULL || json_object_set_new(obj, key, v) != 0)
        x->nomem = true;
}

static char *loc_push(const char *loc, const char *seg, size_t len)
{
    size_t n = strlen(loc), extra = 0;
    for (size_t i = 0; i < len; i++)
        extra += seg[i] == '~' || seg[i] == '/';
    char *out = malloc(n + len + extra + 2);
    if (out == NULL)
        return NULL;
    memcpy(out, loc, n);
    size_t o = n;
    out[o++] = '/';
    for (size_t i = 0; i < len; i++) {
        if (seg[i] == '~' || seg[i] == '/') {
            out[o++] = '~';
            out[o++] = seg[i] == '~' ? '0' : '1';
        } else {
            out[o++] = seg[i];
        }
    }
    out[o] = '\0';
    return out;
}

bool evd_so_any_nested_id(json_t *v, unsigned depth)
{
    if (depth > 200)
        return true;
    if (json_is_object(v)) {
        if (depth > 0 && json_is_string(json_object_get(v, "$id")))
            return true;
        const char *k;
        json_t *m;
        json_object_foreach(v, k, m)
        {
            if (evd_so_any_nested_id(m, depth + 1))
                return true;
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *m;
        json_array_foreach(v, i, m)
        {
            if (evd_so_any_nested_id(m, depth + 1))
                return true;
        }
    }
    return false;
}

/* RFC 6901 lookup in doc; ptr is already percent-decoded. Borrowed result or NULL. */
static json_t *doc_pointer(json_t *doc, const char *ptr)
{
    json_t *cur = doc;
    const char *p = ptr;
    char tok[512];
    while (cur != NULL && *p == '/') {
        size_t tl = evd_pointer_token(&p, tok, sizeof(tok)), idx;
        if (tl == (size_t)-1)
            return NULL;
        if (json_is_object(cur)) {
            cur = json_object_getn(cur, tok, tl);
        } else if (json_is_array(cur) && evd_pointer_index(tok, tl, &idx)) {
            cur = json_array_get(cur, idx);
        } else {
            cur = NULL;
        }
    }
    return *p == '\0' ? cur : NULL;
}

/* Decodes a local "#..." reference into a pointer (malloc'd), or NULL if not local. */
static char *local_pointer(const char *ref, bool *nomem)
{
    *nomem = false;
    if (ref[0] != '#' || (ref[1] != '\0' && ref[1] != '/'))
        return NULL;
    bool invalid = false;
    char *ptr = evd_pct_decode(ref + 1, strlen(ref + 1), NULL, &invalid);
    if (ptr == NULL && !invalid)
        *nomem = true;
    return ptr;
}

/* ---- descriptions ------------------------------------------------------------------ */

static void collect_refs(struct xf *x, json_t *v, json_t *seen, unsigned depth)
{
    if (depth > 64 || json_array_size(seen) >= 16)
        return;
    if (json_is_object(v)) {
        json_t *ref = json_object_get(v, "$ref");
        if (json_is_string(ref)) {
            bool known = false;
            for (size_t i = 0; i < json_array_size(seen) && !known; i++)
                known = json_equal(json_array_get(seen, i), ref);
            bool nomem = false;
            char *ptr = known ? NULL : local_pointer(json_string_value(ref), &nomem);
            if (nomem)
                x->nomem = true;
            json_t *target = ptr != NULL ? doc_pointer(x->doc, ptr) : NULL;
            free(ptr);
            if (target != NULL) {
                if (json_array_append(seen, ref) != 0)
                    x->nomem = true;
                collect_refs(x, target, seen, depth + 1);
            }
        }
        const char *k;
        json_t *m;
        json_object_foreach(v, k, m) collect_refs(x, m, seen, depth + 1);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *m;
        json_array_foreach(v, i, m) collect_refs(x, m, seen, depth + 1);
    }
}

/* Appends the owner's description (if any) and a blank line separator to b. */
static void desc_prefix(struct evd_sbuf *b, json_t *s)
{
    json_t *d = json_is_object(s) ? json_object_get(s, "description") : NULL;
    if (json_is_string(d) && json_string_length(d) > 0) {
        evd_sbuf_put(b, json_string_value(d), json_string_length(d));
        evd_sbuf_puts(b, "\n\n");
    }
}

/* "JSON-encoded value matching this JSON Schema: {...}; "#/definitions/x" is {...}". */
static void describe_schema(struct xf *x, struct evd_sbuf *b, json_t *s)
{
    evd_js_dump(b, s);
    json_t *seen = json_array();
    if (seen == NULL) {
        x->nomem = true;
        return;
    }
    collect_refs(x, s, seen, 0);
    for (size_t i = 0; i < json_array_size(seen); i++) {
        json_t *ref = json_array_get(seen, i);
        bool nomem = false;
        char *ptr = local_pointer(json_string_value(ref), &nomem);
        json_t *target = ptr != NULL ? doc_pointer(x->doc, ptr) : NULL;
        free(ptr);
        if (target == NULL)
            continue;
        evd_sbuf_puts(b, "; ");
        evd_js_dump_string(b, json_string_value(ref), json_string_length(ref));
        evd_sbuf_puts(b, " is ");
        evd_js_dump(b, target);
    }
    json_decref(seen);
}

json_t *evd_so_text_schema(struct xf *x, json_t *s, struct so_plan **plan, const char *lead,
                           size_t cap)
{
    char *buf = malloc(cap);
    json_t *w = json_object();
    *plan = evd_so_plan_new(PL_TEXT, false);
    if (buf == NULL || w == NULL || *plan == NULL) {
        free(buf);
        json_decref(w);
        evd_so_plan_free(*plan);
        *plan = NULL;
        return oom(x);
    }
    struct evd_sbuf b;
    evd_sbuf_init(&b, buf, cap);
    desc_prefix(&b, s);
    evd_sbuf_puts(&b, lead);
    describe_schema(x, &b, s);
    evd_sbuf_finish(&b);
    put(x, w, "type", json_string("string"));
    put(x, w, "description", json_stringn(buf, b.len));
    free(buf);
    return w;
}

/* A field that travels as JSON-encoded text. */
static json_t *xf_text(struct xf *x, json_t *s, struct so_plan **plan)
{
    return evd_so_text_schema(x, s, plan,
                              "JSON-encoded value matching this JSON Schema: ", TEXT_DESC_MAX);
}

/* Sets "description": the owner's text plus moved constraints as "{k: v, ...}". */
static void set_description(struct xf *x, json_t *w, json_t *s, json_t *moved)
{
    char buf[2048];
    struct evd_sbuf b;
    evd_sbuf_init(&b, buf, sizeof(buf));
    json_t *d = json_object_get(s, "description");
    if (json_is_string(d))
        evd_sbuf_put(&b, json_string_value(d), json_string_length(d));
    if (json_object_size(moved) > 0) {
        if (b.len > 0)
            evd_sbuf_puts(&b, "\n\n");
        evd_sbuf_puts(&b, "{");
        const char *k;
        json_t *v;
        bool first = true;
        json_object_foreach(moved, k, v)
        {
            if (!first)
                evd_sbuf_puts(&b, ", ");
            first = false;
            evd_sbuf_puts(&b, k);
            evd_sbuf_puts(&b, ": ");
            evd_js_dump(&b, v);
        }
        evd_sbuf_puts(&b, "}");
    }
    evd_sbuf_finish(&b);
    if (b.len > 0)
        put(x, w, "description", json_stringn(buf, b.len));
}

/* ---- keyword classification -------------------------------------------------------- */

enum kw_fate { KW_HANDLED, KW_KEEP, KW_MOVE, KW_DROP };

static bool in_list(const char *k, const char *const *list)
{
    for (size_t i = 0; list[i] != NULL; i++)
        if (strcmp(k, list[i]) == 0)
            return true;
    return false;
}

static bool format_supported(enum evd_so_provider p, const char *f)
{
    static const char *const common[] = {"date-time", "time", "date", "duration", "email",
                                         "hostname",  "ipv4", "ipv6", "uuid",     NULL};
    if (f == NULL)
        return false;
    if (in_list(f, common))
        return true;
    return p == EVD_SO_ANTHROPIC && strcmp(f, "uri") == 0;
}

/* Anthropic's regex subset: no backreferences, lookaround, \b/\B or large {n,m}. */
static bool pattern_simple(const char *s)
{
    for (const char *p = s; *p != '\0'; p++) {
        if (p[0] == '\\' && p[1] != '\0') {
            if (strchr("123456789kbB", p[1]) != NULL)
                return false;
            p++;
        } else if (p[0] == '(' && p[1] == '?' &&
                   (p[2] == '=' || p[2] == '!' || (p[2] == '<' && (p[3] == '=' || p[3] == '!')))) {
            return false;
        } else if (p[0] == '{') {
            long a = strtol(p + 1, NULL, 10);
            const char *comma = strchr(p, ',');
            const char *close = strchr(p, '}');
            long m =
                comma != NULL && close != NULL && comma < close ? strtol(comma + 1, NULL, 10) : 0;
            if (a > 100 || m > 100)
                return false;
        }
    }
    return true;
}

/* Annotations and bookkeeping that no wire schema carries. */
static const char *const STRIPPED[] = {
    "$schema",   "$id",         "$comment", "default",          "examples",        "readOnly",
    "writeOnly", "definitions", "$defs",    "contentMediaType", "contentEncoding", NULL};

/* What happens to keyword k of a schema whose single wire type is `kind`. */
static enum kw_fate fate(enum evd_so_provider p, unsigned kind, const char *k, json_t *v)
{
    if (strcmp(k, "title") == 0)
        return KW_KEEP;
    if (in_list(k, STRIPPED))
        return KW_DROP;
    if (strcmp(k, "type") == 0 || strcmp(k, "enum") == 0 || strcmp(k, "const") == 0 ||
        strcmp(k, "description") == 0)
        return KW_HANDLED;
    bool openai = p != EVD_SO_ANTHROPIC;
    if (strcmp(k, "not") == 0 || strcmp(k, "if") == 0 || strcmp(k, "then") == 0 ||
        strcmp(k, "else") == 0)
        return KW_MOVE;
    if (kind == 0) /* a union: constraints beside anyOf apply to its branches */
        return in_list(k, NUMBER_KEYS) || in_list(k, STRING_KEYS) || in_list(k, ARRAY_KEYS) ||
                       in_list(k, OBJECT_KEYS)
                   ? KW_MOVE
                   : KW_DROP;
    if (in_list(k, NUMBER_KEYS))
        return !(kind & (EVD_JS_T_NUMBER | EVD_JS_T_INTEGER)) ? KW_DROP
               : openai                                       ? KW_KEEP
                                                              : KW_MOVE;
    if (in_list(k, STRING_KEYS)) {
        if (kind != EVD_JS_T_STRING)
            return KW_DROP;
        if (strcmp(k, "format") == 0)
            return format_supported(p, json_string_value(v)) ? KW_KEEP : KW_MOVE;
        if (strcmp(k, "pattern") == 0)
            return openai || pattern_simple(json_string_value(v)) ? KW_KEEP : KW_MOVE;
        return KW_MOVE;
    }
    if (in_list(k, ARRAY_KEYS)) {
        if (kind != EVD_JS_T_ARRAY)
            return KW_DROP;
        if (strcmp(k, "items") == 0)
            return KW_HANDLED;
        if (strcmp(k, "additionalItems") == 0)
            return KW_DROP; /* only tuples use it, and tuples travel as text */
        if (strcmp(k, "maxItems") == 0)
            return openai ? KW_KEEP : KW_MOVE;
        if (strcmp(k, "minItems") == 0) {
            if (openai)
                return KW_KEEP;
            json_int_t n = json_integer_value(v);
            return json_is_integer(v) && (n == 0 || n == 1) ? KW_KEEP : KW_MOVE;
        }
        return KW_MOVE;
    }
    if (in_list(k, OBJECT_KEYS)) {
        if (kind != EVD_JS_T_OBJECT)
            return KW_DROP;
        if (strcmp(k, "properties") == 0 || strcmp(k, "required") == 0 ||
            strcmp(k, "additionalProperties") == 0 || strcmp(k, "patternProperties") == 0)
            return KW_HANDLED;
        return KW_MOVE;
    }
    return KW_DROP; /* unknown keywords and annotations */
}

/* Starts a wire object: "type", then description/title, then kept keywords. */
static json_t *begin(struct xf *x, json_t *s, unsigned kind, const char *type)
{
    json_t *w = json_object(), *moved = json_object(), *kept = json_object();
    if (w == NULL || moved == NULL || kept == NULL) {
        json_decref(w);
        json_decref(moved);
        json_decref(kept);
        return oom(x);
    }
    if (type != NULL)
        put(x, w, "type", json_string(type));
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v)
    {
        enum kw_fate f = fate(x->p, kind, k, v);
        if (f == KW_MOVE && json_object_set(moved, k, v) != 0)
            x->nomem = true;
        if (f == KW_KEEP && json_object_set(kept, k, v) != 0)
            x->nomem = true;
    }
    json_t *title = json_object_get(kept, "title");
    if (title != NULL) {
        put(x, w, "title", json_incref(title));
        json_object_del(kept, "title");
    }
    set_description(x, w, s, moved);
    if (json_object_update(w, kept) != 0)
        x->nomem = true;
    json_decref(moved);
    json_decref(kept);
    return w;
}

/* ---- the transform ----------------------------------------------------------------- */

/* Makes a wire schema accept null as well (the placeholder of an optional field). */
static void make_nullable(struct xf *x, json_t **wp)
{
    json_t *w = *wp;
    json_t *type = json_object_get(w, "type");
    if (json_is_string(type) && strcmp(json_string_value(type), "null") == 0)
        return;
    if (json_is_string(type)) {
        json_t *pair = json_pack("[Os]", type, "null");
        put(x, w, "type", pair);
        json_t *en = json_object_get(w, "enum"), *cn = json_object_get(w, "const");
        if (cn != NULL) {
            put(x, w, "enum", json_pack("[On]", cn));
            json_object_del(w, "const");
        } else if (json_is_array(en)) {
            bool has_null = false;
            for (size_t i = 0; i < json_array_size(en); i++)
                has_null = has_null || json_is_null(json_array_get(en, i));
            if (!has_null && json_array_append_new(en, json_null()) != 0)
                x->nomem = true;
        }
        return;
    }
    if (json_is_array(type)) {
        for (size_t i = 0; i < json_array_size(type); i++) {
            json_t *t = json_array_get(type, i);
            if (json_is_string(t) && strcmp(json_string_value(t), "null") == 0)
                return; /* already accepts null */
        }
    }
    json_t *any = json_object_get(w, "anyOf");
    if (json_is_array(any)) {
        for (size_t i = 0; i < json_array_size(any); i++) {
            json_t *t = json_object_get(json_array_get(any, i), "type");
            if (json_is_string(t) && strcmp(json_string_value(t), "null") == 0)
                return;
        }
        if (json_array_append_new(any, json_pack("{ss}", "type", "null")) != 0)
            x->nomem = true;
        return;
    }
    json_t *wrapped = json_pack("{s:[O,{ss}]}", "anyOf", w, "type", "null");
    if (wrapped == NULL) {
        x->nomem = true;
        return;
    }
    json_decref(w);
    *wp = wrapped;
}

/* Does the owner's field at `loc` accept null? Compiled from the owner document. */
static bool accepts_null(struct xf *x, const char *loc)
{
    struct evd_err err = {0};
    struct evd_jsonschema *v = evd_jsonschema_new_at(x->doc, loc, NULL, &err);
    if (v == NULL) {
        if (err.code == EVD_ENOMEM)
            x->nomem = true;
        return false;
    }
    bool ok = evd_jsonschema_is_valid(v, json_null());
    evd_jsonschema_free(v);
    return ok;
}

/* A closed object; `empty_ok` turns "no properties" into a null (the verdict root). */
json_t *evd_so_xf_object(struct xf *x, json_t *s, const char *loc, unsigned depth,
                         struct so_plan **plan, bool empty_ok)
{
    json_t *props = json_object_get(s, "properties");
    json_t *ap = json_object_get(s, "additionalProperties");
    json_t *pp = json_object_get(s, "patternProperties");
    json_t *req = json_object_get(s, "required");
    if (props != NULL && !json_is_object(props))
        return xf_text(x, s, plan);
    if (json_object_size(props) == 0) {
        if (!empty_ok)
            return xf_text(x, s, plan);
        *plan = evd_so_plan_new(PL_EMPTY, false);
        json_t *w = json_pack("{ss}", "type", "null");
        if (*plan == NULL || w == NULL) {
            json_decref(w);
            evd_so_plan_free(*plan);
            *plan = NULL;
            return oom(x);
        }
        set_description(x, w, s, NULL);
        return w;
    }
    if ((ap != NULL && !json_is_false(ap)) || json_object_size(pp) > 0)
        return xf_text(x, s, plan); /* an open map */
    size_t i;
    json_t *name;
    json_array_foreach(req, i, name)
    {
        if (json_object_getn(props, json_string_value(name), json_string_length(name)) == NULL)
            return xf_text(x, s, plan); /* requires an undeclared field */
    }

    struct so_plan *p = evd_so_plan_new(PL_OBJECT, true);
    json_t *w = begin(x, s, EVD_JS_T_OBJECT, "object");
    json_t *wprops = json_object(), *wreq = json_array();
    if (p != NULL)
        p->props = calloc(json_object_size(props), sizeof(*p->props));
    if (p == NULL || p->props == NULL || w == NULL || wprops == NULL || wreq == NULL)
        goto fail;
    const char *k;
    size_t klen;
    json_t *sub;
    json_object_keylen_foreach(props, k, klen, sub)
    {
        char *locp = loc_push(loc, "properties", 10);
        char *lock = locp != NULL ? loc_push(locp, k, klen) : NULL;
        free(locp);
        if (lock == NULL)
            goto fail;
        struct plan_prop *pr = &p->props[p->n];
        json_t *wk = evd_so_xf_node(x, sub, lock, depth + 1, &pr->child);
        pr->key = malloc(klen + 1);
        if (wk == NULL || pr->key == NULL) {
            free(lock);
            json_decref(wk);
            p->n++;
            goto fail;
        }
        memcpy(pr->key, k, klen);
        pr->key[klen] = '\0';
        pr->keylen = klen;
        p->n++;
        bool required = false;
        json_array_foreach(req, i, name)
        {
            required = required || (json_string_length(name) == klen &&
                                    memcmp(json_string_value(name), k, klen) == 0);
        }
        if (!required) {
            pr->optional = true;
            pr->keep_null = accepts_null(x, lock);
            make_nullable(x, &wk);
            x->optional++;
        }
        free(lock);
        if (!required || !pr->child->identity)
            p->identity = false;
        if (json_object_setn_new(wprops, k, klen, wk) != 0 ||
            json_array_append_new(wreq, json_stringn(k, klen)) != 0)
            goto fail;
    }
    put(x, w, "properties", wprops);
    put(x, w, "required", wreq);
    put(x, w, "additionalProperties", json_false());
    *plan = p;
    return w;
fail:
    evd_so_plan_free(p);
    json_decref(w);
    json_decref(wprops);
    json_decref(wreq);
    return oom(x);
}

static json_t *xf_array(struct xf *x, json_t *s, const char *loc, unsigned depth,
                        struct so_plan **plan)
{
    json_t *items = json_object_get(s, "items");
    if (json_is_array(items))
        return xf_text(x, s, plan); /* a tuple: its shape depends on the position */
    struct so_plan *p = evd_so_plan_new(PL_ARRAY, true);
    json_t *w = begin(x, s, EVD_JS_T_ARRAY, "array");
    char *loci = loc_push(loc, "items", 5);
    json_t *wi = NULL;
    if (p == NULL || w == NULL || loci == NULL)
        goto fail;
    if (items != NULL) {
        wi = evd_so_xf_node(x, items, loci, depth + 1, &p->items);
    } else {
        json_t *any = json_true();
        wi = xf_text(x, any, &p->items);
    }
    if (wi == NULL)
        goto fail;
    p->identity = p->items->identity;
    /* "items" goes before the kept limits for readability. */
    json_t *limits = json_object();
    if (limits == NULL || json_object_update(limits, w) != 0) {
        json_decref(limits);
        json_decref(wi);
        goto fail;
    }
    json_object_clear(w);
    const char *k;
    json_t *v;
    json_object_foreach(limits, k, v)
    {
        if (strcmp(k, "minItems") != 0 && strcmp(k, "maxItems") != 0)
            put(x, w, k, json_incref(v));
    }
    put(x, w, "items", wi);
    json_object_foreach(limits, k, v)
    {
        if (strcmp(k, "minItems") == 0 || strcmp(k, "maxItems") == 0)
            put(x, w, k, json_incref(v));
    }
    json_decref(limits);
    free(loci);
    *plan = p;
    return w;
fail:
    free(loci);
    evd_so_plan_free(p);
    json_decref(w);
    return oom(x);
}

static bool is_scalar(const json_t *v)
{
    return !json_is_object(v) && !json_is_array(v);
}

static json_t *xf_scalar(struct xf *x, json_t *s, unsigned kind, struct so_plan **plan)
{
    json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    if (cn != NULL && !is_scalar(cn))
        return xf_text(x, s, plan);
    for (size_t i = 0; i < json_array_size(en); i++)
        if (!is_scalar(json_array_get(en, i)))
            return xf_text(x, s, plan);
    json_t *w = begin(x, s, kind, bit_name(kind));
    *plan = evd_so_plan_new(PL_PASS, true);
    if (w == NULL || *plan == NULL) {
        json_decref(w);
        evd_so_plan_free(*plan);
        *plan = NULL;
        return oom(x);
    }
    if (cn != NULL)
        put(x, w, "const", json_incref(cn));
    if (json_is_array(en))
        put(x, w, "enum", json_deep_copy(en));
    return w;
}

/* The first property name of an object branch, for OpenAI's distinct-first-key rule. */
static const char *first_key(json_t *w)
{
    json_t *props = json_object_get(w, "properties");
    void *it = json_is_object(props) ? json_object_iter(props) : NULL;
    return it != NULL ? json_object_iter_key(it) : NULL;
}

static json_t *xf_union(struct xf *x, json_t *s, const char *loc, unsigned depth,
                        struct so_plan **plan)
{
    json_t *any = json_object_get(s, "anyOf"), *one = json_object_get(s, "oneOf");
    static const char *const shape[] = {"type",  "properties", "items", "enum",
                                        "const", "allOf",      "$ref",  NULL};
    if ((any != NULL && one != NULL) || has_any(s, shape))
        return xf_text(x, s, plan);
    json_t *list = any != NULL ? any : one;
    const char *kw = any != NULL ? "anyOf" : "oneOf";
    json_t *w = begin(x, s, 0, NULL);
    json_t *branches = json_array();
    json_t *firsts = json_array();
    char *locl = loc_push(loc, kw, strlen(kw));
    if (w == NULL || branches == NULL || firsts == NULL || locl == NULL) {
        json_decref(w);
        json_decref(branches);
        json_decref(firsts);
        free(locl);
        return oom(x);
    }
    bool text = false;
    for (size_t i = 0; i < json_array_size(list) && !text && !x->nomem; i++) {
        char idx[24];
        snprintf(idx, sizeof(idx), "%zu", i);
        char *locb = loc_push(locl, idx, strlen(idx));
        struct so_plan *bp = NULL;
        json_t *wb = locb != NULL ? evd_so_xf_node(x, json_array_get(list, i), locb, depth + 1, &bp)
                                  : oom(x);
        free(locb);
        if (wb == NULL)
            break;
        text = !bp->identity;
        const char *fk = first_key(wb);
        if (fk != NULL && x->p != EVD_SO_ANTHROPIC) {
            for (size_t j = 0; j < json_array_size(firsts) && !text; j++)
                text = strcmp(json_string_value(json_array_get(firsts, j)), fk) == 0;
            if (json_array_append_new(firsts, json_string(fk)) != 0)
                x->nomem = true;
        }
        evd_so_plan_free(bp);
        if (json_array_append_new(branches, wb) != 0)
            x->nomem = true;
    }
    free(locl);
    json_decref(firsts);
    if (x->nomem) {
        json_decref(w);
        json_decref(branches);
        return NULL;
    }
    if (text) {
        json_decref(w);
        json_decref(branches);
        return xf_text(x, s, plan);
    }
    put(x, w, "anyOf", branches);
    *plan = evd_so_plan_new(PL_PASS, true);
    if (*plan == NULL) {
        json_decref(w);
        return oom(x);
    }
    return w;
}

static json_t *xf_ref(struct xf *x, json_t *s, unsigned depth, struct so_plan **plan)
{
    const char *ref = json_string_value(json_object_get(s, "$ref"));
    bool nomem = false;
    char *ptr = x->nested_ids || ref == NULL ? NULL : local_pointer(ref, &nomem);
    if (nomem)
        return oom(x);
    json_t *target = ptr != NULL ? doc_pointer(x->doc, ptr) : NULL;
    bool recursive = false;
    for (size_t i = 0; i < x->nrefs && ptr != NULL; i++)
        recursive = recursive || strcmp(x->refs[i], ptr) == 0;
    if (target == NULL || recursive || x->nrefs >= XF_MAX_REFS) {
        free(ptr);
        return xf_text(x, s, plan);
    }
    x->refs[x->nrefs++] = ptr;
    json_t *w = evd_so_xf_node(x, target, ptr, depth + 1, plan);
    x->nrefs--;
    free(ptr);
    return w;
}

json_t *evd_so_xf_node(struct xf *x, json_t *s, const char *loc, unsigned depth,
                       struct so_plan **plan)
{
    *plan = NULL;
    if (x->nomem)
        return NULL;
    if (depth > XF_MAX_DEPTH || !json_is_object(s))
        return xf_text(x, s, plan);
    if (json_object_get(s, "$ref") != NULL)
        return xf_ref(x, s, depth, plan);
    if (json_object_get(s, "anyOf") != NULL || json_object_get(s, "oneOf") != NULL)
        return xf_union(x, s, loc, depth, plan);
    json_t *all = json_object_get(s, "allOf");
    if (all != NULL) {
        static const char *const annotations[] = {"allOf",   "title",    "description", "$comment",
                                                  "default", "examples", NULL};
        const char *k;
        json_t *v;
        bool only = json_array_size(all) == 1;
        json_object_foreach(s, k, v) only = only && in_list(k, annotations);
        if (!only)
            return xf_text(x, s, plan);
        char *l1 = loc_push(loc, "allOf", 5);
        char *l2 = l1 != NULL ? loc_push(l1, "0", 1) : NULL;
        free(l1);
        if (l2 == NULL)
            return oom(x);
        json_t *w = evd_so_xf_node(x, json_array_get(all, 0), l2, depth + 1, plan);
        free(l2);
        return w;
    }
    unsigned t = schema_types(s);
    bool null_ok = (t & EVD_JS_T_NULL) != 0;
    t &= ~(unsigned)EVD_JS_T_NULL;
    if ((t & EVD_JS_T_INTEGER) && (t & EVD_JS_T_NUMBER))
        t &= ~(unsigned)EVD_JS_T_INTEGER;
    if (t == 0 && null_ok) {
        json_t *w = begin(x, s, EVD_JS_T_NULL, "null");
        *plan = evd_so_plan_new(PL_PASS, true);
        if (w == NULL || *plan == NULL) {
            json_decref(w);
            evd_so_plan_free(*plan);
            *plan = NULL;
            return oom(x);
        }
        return w;
    }
    if (t == 0 || popcount(t) > 1)
        return xf_text(x, s, plan); /* any value, or several types */
    json_t *w;
    if (t == EVD_JS_T_OBJECT)
        w = evd_so_xf_object(x, s, loc, depth, plan, false);
    else if (t == EVD_JS_T_ARRAY)
        w = xf_array(x, s, loc, depth, plan);
    else
        w = xf_scalar(x, s, t, plan);
    if (w != NULL && null_ok && (*plan)->kind != PL_TEXT)
        make_nullable(x, &w);
    return w;
}

/* ---- limits ------------------------------------------------------------------------ */

struct counts {
    unsigned depth;
    size_t properties, strings, enum_values, unions;
    bool big_enum;
};

static void count(const json_t *w, unsigned depth, struct counts *c)
{
    if (!json_is_object(w))
        return;
    if (depth > c->depth)
        c->depth = depth;
    json_t *type = json_object_get(w, "type");
    if (json_array_size(type) > 1)
        c->unions++;
    json_t *any = json_object_get(w, "anyOf");
    if (json_is_array(any)) {
        c->unions++;
        for (size_t i = 0; i < json_array_size(any); i++)
            count(json_array_get(any, i), depth + 1, c);
    }
    json_t *props = json_object_get(w, "properties");
    const char *k;
    size_t klen;
    json_t *v;
    if (json_is_object(props)) {
        json_object_keylen_foreach(props, k, klen, v)
        {
            c->properties++;
            c->strings += klen;
            count(v, depth + 1, c);
        }
    }
    json_t *items = json_object_get(w, "items");
    if (items != NULL)
        count(items, depth + 1, c);
    json_t *en = json_object_get(w, "enum");
    if (json_is_array(en)) {
        size_t chars = 0;
        bool strings = true;
        for (size_t i = 0; i < json_array_size(en); i++) {
            json_t *e = json_array_get(en, i);
            if (json_is_string(e))
                chars += json_string_length(e);
            else
                strings = false;
        }
        c->enum_values += json_array_size(en);
        c->strings += chars;
        if (strings && json_array_size(en) > OAI_BIG_ENUM_COUNT && chars > OAI_BIG_ENUM_CHARS)
            c->big_enum = true;
    }
    json_t *cn = json_object_get(w, "const");
    if (json_is_string(cn))
        c->strings += json_string_length(cn);
}

bool evd_so_over_limits(enum evd_so_provider p, const json_t *schema, size_t optional)
{
    struct counts c;
    memset(&c, 0, sizeof(c));
    count(schema, 0, &c);
    if (p == EVD_SO_ANTHROPIC)
        return optional > ANT_MAX_OPTIONAL || c.unions > ANT_MAX_UNIONS;
    return c.depth > OAI_MAX_DEPTH || c.properties > OAI_MAX_PROPERTIES ||
           c.strings > OAI_MAX_STRING_TOTAL || c.enum_values > OAI_MAX_ENUM_VALUES || c.big_enum;
}
