/*
 * Canonical JSON: the one serialization every `*_sha256` artifact is computed over.
 * Compact (no whitespace), object keys sorted by their UTF-8 bytes, integers printed
 * plainly, reals in the shortest form that reads back to the same double, written the
 * way Rust's ryu prints an f64 (0.5, 1.0, 1e-7, 1.5e300), strings escaped as serde_json
 * does (only `"`, `\` and control characters; \u00XX in lowercase hex).
 * The writer, its real formatter (evd_json_format_real) and the unsorted compact form
 * (evd_json_compact) live in common/json.h, which this header includes.
 * Pure functions; thread-safe; values are borrowed for the duration of the call.
 */
#ifndef EVD_DOMAIN_CANONICAL_H
#define EVD_DOMAIN_CANONICAL_H

#include <jansson.h>
#include <stddef.h>

#include "common/json.h"
#include "common/util.h"

/* Appends the canonical form of v (borrowed) to out; 0, or -1 when out cannot grow. */
int evd_canonical_append(struct evd_buf *out, const json_t *v);

/* The canonical form of v (borrowed) as a malloc'd string the caller frees; NULL on ENOMEM. */
char *evd_canonical_dump(const json_t *v);

/* Lowercase hex SHA-256 of the canonical form of v into out[65]; 0, or -1 on ENOMEM. */
int evd_canonical_sha256(const json_t *v, char out[65]);

#endif
