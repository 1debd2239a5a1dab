/*
 * The compiled form of a JSON Schema draft-07 validator, shared by its compiler
 * (jsonschema_compile.c) and its evaluator (jsonschema_eval.c); internal to schema/.
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
#ifndef EVD_SCHEMA_JSONSCHEMA_NODE_H
#define EVD_SCHEMA_JSONSCHEMA_NODE_H

#include "schema/jsonschema.h"
#include "schema/jsonschema_impl.h"

#include <stdbool.h>
#include <stddef.h>

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

#endif
