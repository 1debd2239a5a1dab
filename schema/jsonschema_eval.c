/*
 * JSON Schema draft-07: the evaluator (API in jsonschema.h; the compiled form and its
 * DESIGN in jsonschema_node.h, the compiler in jsonschema_compile.c).
 */
#include "schema/jsonschema_node.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSG_VALUE_MAX 200 /* bytes of an echoed value inside one message */

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
