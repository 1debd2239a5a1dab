/*
 * JSON Schema draft-07: what the compiler's two files share (jsonschema_compile.c, the
 * keyword compilers and the entry points; jsonschema_resolve.c, the indexing of "$id" and
 * the resolution of "$ref"): the compile context and its helpers. Private to schema/.
 */
#ifndef EVD_SCHEMA_JSONSCHEMA_COMPILE_H
#define EVD_SCHEMA_JSONSCHEMA_COMPILE_H

#include "schema/jsonschema_node.h"

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

/* Fails the compilation with "invalid schema at <path>: <message>" (the first failure
 * wins); returns NULL. */
void *evd_jsc_fail(struct cctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Fails the compilation for want of memory; returns NULL. */
void *evd_jsc_nomem(struct cctx *c);
/* A copy of s in the validator's arena (freed with it), or NULL. */
char *evd_jsc_strdup(struct evd_jsonschema *v, const char *s);
/* The malloc'd part of uri before '#' (NULL on ENOMEM). */
char *evd_jsc_strip_fragment(const char *uri);

/* ---- jsonschema_resolve.c ---- */

/* Applies s's "$id" to base: the new base (arena), indexed as a resource when `index`. */
char *evd_jsc_apply_id(struct cctx *c, json_t *s, const char *base, bool index);
/* Indexes every resource of a document once. */
bool evd_jsc_walk_doc(struct cctx *c, struct doc *d);
/* The resource indexed under uri, or NULL. */
struct res *evd_jsc_find_res_now(struct cctx *c, const char *uri);
/* Follows the JSON pointer ptr from start, tracking the base URI into *outbase. */
json_t *evd_jsc_pointer_walk(struct cctx *c, json_t *start, const char *startbase, const char *ptr,
                             char **outbase);
/* The schema an absolute reference names, with its base in *outbase; NULL with the
 * failure recorded. */
json_t *evd_jsc_resolve_ref(struct cctx *c, const char *uri, char **outbase);

#endif
