/*
 * Small helpers over jansson values shared by every layer: the member check of the layers
 * that validate JSON input (domain, handlers, webhooks, the stub), the string escape of
 * the log lines and the writers, and the compact JSON writer that the store and transport
 * use and the domain's canonical form (domain/canonical.h) sorts. Pure; thread-safe for
 * values no other thread mutates; returned pointers are borrowed from the value passed in.
 */
#ifndef EVD_COMMON_JSON_H
#define EVD_COMMON_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/util.h"

/*
 * The first member name of `obj` that is not in the NULL-terminated list `known`
 * (borrowed from obj), or NULL when every member is known or obj is not an object.
 * Names compare over their whole length, so a name with an escaped NUL is never known.
 */
const char *evd_json_unknown_member(const json_t *obj, const char *const *known);

/*
 * How byte c is written inside a JSON string: the short escape for " \ \b \f \n \r \t,
 * "\u00xx" (lowercase hex) for another control byte, written into esc and returned; NULL
 * when c stands for itself.
 */
const char *evd_json_escape(unsigned char c, char esc[7]);

/* Large enough for any output of evd_json_format_real (24 is the longest). */
#define EVD_JSON_REAL_MAX 32

/*
 * Writes the shortest round-trip decimal form of a finite double into buf, with the
 * layout rules of ryu: plain notation with a ".0" for integral values when the decimal
 * exponent allows it (1e-5 <= |d| < 1e16), scientific notation otherwise ("1e16",
 * "1.2345e-7", no "+" and no padding in the exponent). Negative zero prints "-0.0".
 * Returns the length written (without the NUL), or 0 when d is not finite or size is
 * smaller than EVD_JSON_REAL_MAX.
 */
size_t evd_json_format_real(double d, char *buf, size_t size);

/*
 * Appends the compact JSON text of v (borrowed) to out: no whitespace, integers printed
 * plainly, reals by evd_json_format_real, strings escaped as serde_json does (only `"`,
 * `\` and control characters; \u00XX in lowercase hex), object members sorted by their
 * UTF-8 bytes when `sorted` (the canonical form) or in the order they were set otherwise.
 * 0, or -1 when out cannot grow.
 */
int evd_json_append(struct evd_buf *out, const json_t *v, bool sorted);

/*
 * The compact JSON text of v (borrowed) for storage and transport: evd_json_append with
 * members in the order they were set (not sorted). It reads back equal to v. Three times
 * cheaper than json_dumps, which formats every number with snprintf (the 708 kB report of
 * a 1,000-run evaluation: 2.6-3.5 ms against 7.7-12.1 ms). A malloc'd string of exactly its
 * size; *len (may be NULL) its length. NULL when v is NULL or on ENOMEM.
 */
char *evd_json_compact(const json_t *v, size_t *len);

#endif
