/*
 * Internals shared by schema/so_contract.c (contracts, decoding, repair text) and the
 * provider wire format, schema/so_wire.c (envelopes, decode plans, decoding) with
 * schema/so_transform.c (the transform and the provider limits; so_transform.h). Plans
 * are immutable trees owned by their wire format; decoding only reads them.
 */
#ifndef EVD_SCHEMA_SO_IMPL_H
#define EVD_SCHEMA_SO_IMPL_H

#include "schema/jsonschema.h"
#include "schema/structured.h"

#define SO_GREEN 0
#define SO_RED 1

struct evd_so_contract {
    bool verdict;
    json_t *owner[2];  /* owned copies; value contracts use owner[0] (NULL = any value) */
    json_t *branch[2]; /* verdict: owner + {"verdict": const V}, closed */
    struct evd_jsonschema *validator[2];
};

struct so_plan;

struct evd_so_wire {
    enum evd_so_provider provider;
    bool verdict;
    bool fallback;
    json_t *schema; /* owned */
    struct so_plan *plan[2];
};

/* The verdict names, indexed by SO_GREEN / SO_RED. */
extern const char *const evd_so_verdict_names[2];

/*
 * Decodes wire value `v` (borrowed) with `plan`. Returns a new reference, or NULL with
 * *line filled (a field's JSON text does not parse) or *nomem set.
 */
json_t *evd_so_plan_decode(const struct so_plan *plan, json_t *v, struct evd_so_line *line,
                           bool *nomem);

#endif
