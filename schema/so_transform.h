/*
 * Internals shared by the two halves of the provider wire format: schema/so_transform.c
 * (the owner-schema → wire transform and the provider limits) and schema/so_wire.c (the
 * envelopes around the transformed schema, the decode plans and the decoding). Internal
 * to schema/; pure and thread-safe like its users.
 */
#ifndef EVD_SCHEMA_SO_TRANSFORM_H
#define EVD_SCHEMA_SO_TRANSFORM_H

#include <stdbool.h>
#include <stddef.h>

#include "schema/so_impl.h"

#define XF_MAX_REFS 32 /* $ref expansions in progress */

/* ---- decode plans ------------------------------------------------------------------ */

enum plan_kind { PL_PASS, PL_TEXT, PL_OBJECT, PL_ARRAY, PL_EMPTY };

struct plan_prop {
    char *key;
    size_t keylen;
    struct so_plan *child;
    bool optional;  /* the wire carries a null placeholder for "absent" */
    bool keep_null; /* the original field accepts null, so a null stays */
};

struct so_plan {
    enum plan_kind kind;
    bool identity; /* decoding returns the wire value unchanged */
    size_t n;
    struct plan_prop *props;
    struct so_plan *items;
};

/* Frees a plan tree; NULL-safe. */
void evd_so_plan_free(struct so_plan *p);
/* A new plan node of `kind`, or NULL on ENOMEM. */
struct so_plan *evd_so_plan_new(enum plan_kind kind, bool identity);

/* ---- the transform ----------------------------------------------------------------- */

/* The state of one transform of an owner document into a provider's wire subset. */
struct xf {
    enum evd_so_provider p;
    json_t *doc; /* the owner document being transformed (borrowed) */
    bool nested_ids;
    const char *refs[XF_MAX_REFS];
    size_t nrefs;
    size_t optional; /* null placeholders emitted, for Anthropic's limit */
    bool nomem;
};

/* Whether v holds an "$id" below its root (then references resolve against nested bases). */
bool evd_so_any_nested_id(json_t *v, unsigned depth);
/* The wire schema of owner schema s as one JSON-text string field (description `lead`
 * plus the schema text, at most cap bytes), with its decode plan in *plan. */
json_t *evd_so_text_schema(struct xf *x, json_t *s, struct so_plan **plan, const char *lead,
                           size_t cap);
/* The wire schema of owner (sub)schema s at JSON Pointer loc, with its decode plan. */
json_t *evd_so_xf_node(struct xf *x, json_t *s, const char *loc, unsigned depth,
                       struct so_plan **plan);
/* A closed object; `empty_ok` turns "no properties" into a null (the verdict root). */
json_t *evd_so_xf_object(struct xf *x, json_t *s, const char *loc, unsigned depth,
                         struct so_plan **plan, bool empty_ok);
/* Whether wire schema `schema` with `optional` null placeholders exceeds provider p's
 * structured-output limits (then the whole value travels as JSON text). */
bool evd_so_over_limits(enum evd_so_provider p, const json_t *schema, size_t optional);

#endif
