/*
 * JSON Schema draft-07 validation. A schema is compiled once (regexes compiled, every
 * reachable $ref resolved) into an immutable validator that any number of threads may
 * use at the same time; each validation call keeps its scratch state on its own stack.
 * Lifetimes: the schema and any remote documents are borrowed; they must outlive the
 * validator and must not be mutated while it lives. Nothing is fetched from the network:
 * a $ref to another document resolves only to documents registered at compile time and
 * to the built-in draft-07 meta-schema. Error wording and order: docs/schema.md.
 */
#ifndef EVD_SCHEMA_JSONSCHEMA_H
#define EVD_SCHEMA_JSONSCHEMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

/* Subschemas nested in one schema document beyond this depth make the schema invalid. */
#define EVD_JSONSCHEMA_MAX_SCHEMA_DEPTH 128
/* Nested subschema applications during one validation; deeper is reported as an error. */
#define EVD_JSONSCHEMA_MAX_EVAL_DEPTH 512

/* The draft-07 meta-schema's URI; a $ref to it works without registering anything. */
#define EVD_JSONSCHEMA_DRAFT7_URI "http://json-schema.org/draft-07/schema"

struct evd_schema_error {
    char instance_path[256]; /* RFC 6901 pointer into the instance; "" is the root */
    char keyword[32];        /* the failing keyword, e.g. "type", "required", "false" */
    char message[512];       /* jsonschema-style text, e.g. "R1" is not of type "array" */
};

struct evd_jsonschema;

/*
 * Compiles `schema` (borrowed, must outlive the validator). Returns NULL and sets err
 * (EVD_EINVAL naming the schema location, or EVD_ENOMEM) when the schema is invalid:
 * a keyword of the wrong type, a pattern PCRE2 rejects, a $ref that resolves nowhere,
 * or nesting deeper than EVD_JSONSCHEMA_MAX_SCHEMA_DEPTH.
 */
struct evd_jsonschema *evd_jsonschema_new(json_t *schema, struct evd_err *err);

/*
 * Same, with extra documents for $ref: `remotes` is an object mapping absolute URIs
 * (without fragment, e.g. "http://localhost:1234/integer.json") to schema documents.
 * Borrowed; it and its members must outlive the validator. May be NULL.
 */
struct evd_jsonschema *evd_jsonschema_new_with_remotes(json_t *schema, json_t *remotes,
                                                       struct evd_err *err);

/*
 * Compiles the subschema of `doc` at the RFC 6901 `pointer` ("" is the root); its $refs
 * resolve within `doc` (and `remotes`, may be NULL) as they would from the root. Same
 * lifetimes and errors as above; EVD_EINVAL when nothing is at the pointer.
 */
struct evd_jsonschema *evd_jsonschema_new_at(json_t *doc, const char *pointer, json_t *remotes,
                                             struct evd_err *err);

/* NULL-safe. */
void evd_jsonschema_free(struct evd_jsonschema *v);

/*
 * Validates `instance` (borrowed). Returns the number of errors (0 = valid) and fills the
 * first min(count, max) of them into errs (which may be NULL when max is 0), in a stable
 * order: schema keyword order, depth first. Thread-safe on a shared validator.
 */
size_t evd_jsonschema_validate(const struct evd_jsonschema *v, const json_t *instance,
                               struct evd_schema_error *errs, size_t max);

/* True when instance is valid; stops at the first error. Thread-safe. */
bool evd_jsonschema_is_valid(const struct evd_jsonschema *v, const json_t *instance);

/*
 * One-shot helper: compiles `schema`, validates, frees. Returns the error count, or
 * (size_t)-1 with err set when the schema does not compile.
 */
size_t evd_jsonschema_check(json_t *schema, const json_t *instance, struct evd_schema_error *errs,
                            size_t max, struct evd_err *err);

/* The built-in draft-07 meta-schema; borrowed, lives for the process. NULL only on ENOMEM. */
json_t *evd_jsonschema_draft7(void);

#endif
