/*
 * Canonical JSON: the one serialization every `*_sha256` artifact is computed over.
 * Compact (no whitespace), object keys sorted by their UTF-8 bytes, integers printed
 * plainly, reals in the shortest form that reads back to the same double, written the
 * way Rust's ryu prints an f64 (0.5, 1.0, 1e-7, 1.5e300), strings escaped as serde_json
 * does (only `"`, `\` and control characters; \u00XX in lowercase hex).
 * Pure functions; thread-safe; values are borrowed for the duration of the call.
 */
#ifndef EVD_DOMAIN_CANONICAL_H
#define EVD_DOMAIN_CANONICAL_H

#include <jansson.h>
#include <stddef.h>

#include "common/util.h"

/* Large enough for any output of evd_canonical_format_real (24 is the longest). */
#define EVD_CANONICAL_REAL_MAX 32

/*
 * Writes the shortest round-trip decimal form of a finite double into buf, with the
 * layout rules of ryu: plain notation with a ".0" for integral values when the decimal
 * exponent allows it (1e-5 <= |d| < 1e16), scientific notation otherwise ("1e16",
 * "1.2345e-7", no "+" and no padding in the exponent). Negative zero prints "-0.0".
 * Returns the length written (without the NUL), or 0 when d is not finite or size is
 * smaller than EVD_CANONICAL_REAL_MAX.
 */
size_t evd_canonical_format_real(double d, char *buf, size_t size);

/* Appends the canonical form of v (borrowed) to out; 0, or -1 when out cannot grow. */
int evd_canonical_append(struct evd_buf *out, const json_t *v);

/* The canonical form of v (borrowed) as a malloc'd string the caller frees; NULL on ENOMEM. */
char *evd_canonical_dump(const json_t *v);

/*
 * The compact JSON text of v (borrowed) for storage and transport: no whitespace, members
 * in the order they were set (not sorted), numbers and strings written as in the canonical
 * form. It reads back equal to v. Three times cheaper than json_dumps, which formats every
 * number with snprintf (the 708 kB report of a 1,000-run evaluation: 2.6-3.5 ms against
 * 7.7-12.1 ms). A malloc'd string of exactly its size; *len (may be NULL) its length. NULL
 * when v is NULL or on ENOMEM.
 */
char *evd_json_compact(const json_t *v, size_t *len);

/* Lowercase hex SHA-256 of the canonical form of v into out[65]; 0, or -1 on ENOMEM. */
int evd_canonical_sha256(const json_t *v, char out[65]);

#endif
