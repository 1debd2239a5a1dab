/*
 * The provider wire format of a contract: the envelopes around the transformed schema
 * (so_transform.c), its decode plans, the request fragments, and the decoding of a wire
 * answer. Built once per (contract, provider); the result is immutable and shareable
 * between threads.
 */
#include "schema/jsonschema_impl.h"
#include "schema/so_transform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FALLBACK_DESC_MAX 16000

const char *const evd_so_verdict_names[2] = {"GREEN", "RED"};

void evd_so_plan_free(struct so_plan *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->n; i++) {
        free(p->props[i].key);
        evd_so_plan_free(p->props[i].child);
    }
    free(p->props);
    evd_so_plan_free(p->items);
    free(p);
}

struct so_plan *evd_so_plan_new(enum plan_kind kind, bool identity)
{
    struct so_plan *p = calloc(1, sizeof(*p));
    if (p != NULL) {
        p->kind = kind;
        p->identity = identity;
    }
    return p;
}

/* ---- envelopes --------------------------------------------------------------------- */

static json_t *closed(json_t *props /* steals */, const char *const *names, size_t n)
{
    json_t *req = json_array();
    for (size_t i = 0; req != NULL && i < n; i++)
        if (json_array_append_new(req, json_string(names[i])) != 0) {
            json_decref(req);
            req = NULL;
        }
    json_t *w = json_pack("{s:s, s:o, s:o, s:b}", "type", "object", "properties", props, "required",
                          req, "additionalProperties", 0);
    return w;
}

static json_t *fallback_text(struct xf *x, json_t *owner, const char *verdict,
                             struct so_plan **plan)
{
    char lead[128];
    if (verdict != NULL)
        snprintf(lead, sizeof(lead),
                 "JSON-encoded object of the %s owner fields; it must match this JSON Schema: ",
                 verdict);
    else
        snprintf(lead, sizeof(lead), "JSON-encoded value; it must match this JSON Schema: ");
    json_t *any = json_true();
    return evd_so_text_schema(x, owner != NULL ? owner : any, plan, lead, FALLBACK_DESC_MAX);
}

static json_t *build(struct evd_so_wire *w, const struct evd_so_contract *c, bool fallback,
                     size_t *optional)
{
    struct xf x;
    memset(&x, 0, sizeof(x));
    x.p = w->provider;
    if (!c->verdict) {
        json_t *owner = c->owner[0];
        x.doc = owner;
        x.nested_ids = owner != NULL && evd_so_any_nested_id(owner, 0);
        json_t *wv;
        if (fallback || owner == NULL)
            wv = fallback_text(&x, owner, NULL, &w->plan[0]);
        else
            wv = evd_so_xf_node(&x, owner, "", 0, &w->plan[0]);
        *optional = x.optional;
        if (wv == NULL || x.nomem) {
            json_decref(wv);
            return NULL;
        }
        static const char *const names[] = {"result"};
        return closed(json_pack("{s:o}", "result", wv), names, 1);
    }
    json_t *branches = json_array();
    if (branches == NULL)
        return NULL;
    for (int v = SO_GREEN; v <= SO_RED; v++) {
        json_t *owner = c->owner[v];
        x.doc = owner;
        x.nested_ids = owner != NULL && evd_so_any_nested_id(owner, 0);
        x.nrefs = 0;
        json_t *wf;
        if (fallback)
            wf = fallback_text(&x, owner, evd_so_verdict_names[v], &w->plan[v]);
        else if (owner == NULL) {
            json_t *empty = json_object();
            wf = empty != NULL ? evd_so_xf_object(&x, empty, "", 0, &w->plan[v], true) : NULL;
            json_decref(empty);
        } else {
            wf = evd_so_xf_object(&x, owner, "", 0, &w->plan[v], true);
        }
        if (wf == NULL || x.nomem) {
            json_decref(wf);
            json_decref(branches);
            return NULL;
        }
        static const char *const names[] = {"verdict", "verdictFields"};
        json_t *b = closed(json_pack("{s:{s:s, s:[s]}, s:o}", "verdict", "type", "string", "enum",
                                     evd_so_verdict_names[v], "verdictFields", wf),
                           names, 2);
        if (b == NULL || json_array_append_new(branches, b) != 0) {
            json_decref(branches);
            return NULL;
        }
    }
    *optional = x.optional;
    static const char *const names[] = {"result"};
    return closed(json_pack("{s:{s:o}}", "result", "anyOf", branches), names, 1);
}

struct evd_so_wire *evd_so_wire_new(const struct evd_so_contract *c, enum evd_so_provider p,
                                    struct evd_err *err)
{
    struct evd_so_wire *w = calloc(1, sizeof(*w));
    if (w == NULL)
        goto nomem;
    w->provider = p;
    w->verdict = c->verdict;
    size_t optional = 0;
    /* A plain output without a schema can only travel as JSON text. */
    w->fallback = !c->verdict && c->owner[0] == NULL;
    w->schema = build(w, c, w->fallback, &optional);
    if (w->schema == NULL)
        goto nomem;
    if (!w->fallback && evd_so_over_limits(p, w->schema, optional)) {
        json_decref(w->schema);
        evd_so_plan_free(w->plan[0]);
        evd_so_plan_free(w->plan[1]);
        w->plan[0] = w->plan[1] = NULL;
        w->fallback = true;
        w->schema = build(w, c, true, &optional);
        if (w->schema == NULL)
            goto nomem;
    }
    return w;
nomem:
    evd_so_wire_free(w);
    evd_err_set(err, EVD_ENOMEM, "could not allocate the structured-output format");
    return NULL;
}

void evd_so_wire_free(struct evd_so_wire *w)
{
    if (w == NULL)
        return;
    json_decref(w->schema);
    evd_so_plan_free(w->plan[0]);
    evd_so_plan_free(w->plan[1]);
    free(w);
}

json_t *evd_so_wire_schema(const struct evd_so_wire *w)
{
    return w->schema;
}

bool evd_so_wire_fallback(const struct evd_so_wire *w)
{
    return w->fallback;
}

json_t *evd_so_wire_request_format(const struct evd_so_wire *w)
{
    const char *name = w->verdict ? "evald_verdict" : "evald_result";
    switch (w->provider) {
    case EVD_SO_RESPONSES:
        return json_pack("{s:{s:s, s:s, s:O, s:b}}", "format", "type", "json_schema", "name", name,
                         "schema", w->schema, "strict", 1);
    case EVD_SO_ANTHROPIC:
        return json_pack("{s:s, s:O}", "type", "json_schema", "schema", w->schema);
    case EVD_SO_CHAT:
        return json_pack("{s:s, s:{s:s, s:O, s:b}}", "type", "json_schema", "json_schema", "name",
                         name, "schema", w->schema, "strict", 1);
    }
    return NULL;
}

/* ---- decoding ---------------------------------------------------------------------- */

static void path_append(char *path, size_t cap, const char *seg, size_t len)
{
    struct evd_sbuf b;
    size_t n = strlen(path);
    evd_sbuf_init(&b, path + n, cap - n);
    evd_sbuf_put_pointer_token(&b, seg, len);
}

static json_t *decode_at(const struct so_plan *p, json_t *v, char *path, struct evd_so_line *line,
                         bool *nomem)
{
    if (p->identity)
        return json_incref(v);
    switch (p->kind) {
    case PL_PASS:
        return json_incref(v);
    case PL_EMPTY:
        return json_is_null(v) ? json_object() : json_incref(v);
    case PL_TEXT: {
        if (!json_is_string(v))
            return json_incref(v); /* a null placeholder, or left for validation to report */
        json_error_t jerr;
        json_t *d = json_loadb(json_string_value(v), json_string_length(v),
                               JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        if (d == NULL) {
            if (json_error_code(&jerr) == json_error_out_of_memory) {
                *nomem = true;
                return NULL;
            }
            memset(line, 0, sizeof(*line));
            snprintf(line->path, sizeof(line->path), "%s", path);
            struct evd_sbuf b;
            evd_sbuf_init(&b, line->message, sizeof(line->message));
            char val[220];
            struct evd_sbuf vb;
            evd_sbuf_init(&vb, val, sizeof(val));
            evd_js_dump(&vb, v);
            evd_sbuf_finish(&vb);
            evd_sbuf_put(&b, val, vb.len);
            evd_sbuf_puts(&b, " is not JSON-encoded text of a value");
            evd_sbuf_finish(&b);
        }
        return d;
    }
    case PL_ARRAY: {
        if (!json_is_array(v))
            return json_incref(v);
        json_t *out = json_array();
        if (out == NULL) {
            *nomem = true;
            return NULL;
        }
        size_t mark = strlen(path);
        for (size_t i = 0; i < json_array_size(v); i++) {
            char idx[24];
            int n = snprintf(idx, sizeof(idx), "%zu", i);
            path_append(path, 256, idx, (size_t)n);
            json_t *d = decode_at(p->items, json_array_get(v, i), path, line, nomem);
            path[mark] = '\0';
            if (d == NULL || json_array_append_new(out, d) != 0) {
                if (d != NULL)
                    *nomem = true;
                json_decref(out);
                return NULL;
            }
        }
        return out;
    }
    case PL_OBJECT: {
        if (!json_is_object(v))
            return json_incref(v);
        json_t *out = json_object();
        if (out == NULL) {
            *nomem = true;
            return NULL;
        }
        size_t mark = strlen(path);
        const char *k;
        size_t klen;
        json_t *m;
        json_object_keylen_foreach(v, k, klen, m)
        {
            const struct plan_prop *pr = NULL;
            for (size_t i = 0; i < p->n && pr == NULL; i++)
                if (p->props[i].keylen == klen && memcmp(p->props[i].key, k, klen) == 0)
                    pr = &p->props[i];
            json_t *d;
            if (pr == NULL) {
                d = json_incref(m);
            } else {
                path_append(path, 256, k, klen);
                d = decode_at(pr->child, m, path, line, nomem);
                path[mark] = '\0';
                if (d == NULL) {
                    json_decref(out);
                    return NULL;
                }
                if (pr->optional && json_is_null(d) && !pr->keep_null) {
                    json_decref(d); /* the placeholder of an absent field */
                    continue;
                }
            }
            if (json_object_setn_new(out, k, klen, d) != 0) {
                *nomem = true;
                json_decref(out);
                return NULL;
            }
        }
        return out;
    }
    }
    return json_incref(v);
}

json_t *evd_so_plan_decode(const struct so_plan *plan, json_t *v, struct evd_so_line *line,
                           bool *nomem)
{
    char path[256] = "";
    *nomem = false;
    return decode_at(plan, v, path, line, nomem);
}
