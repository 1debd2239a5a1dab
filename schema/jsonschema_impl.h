/*
 * Internal helpers of the JSON Schema validator, shared by its source files and by the
 * structured-output transforms in schema/: JSON value arithmetic (mathematical equality,
 * hashing, code-point length), bounded text output, RFC 3986 references, `format`
 * checkers and the PCRE2 dialect. Everything here is pure and thread-safe.
 */
#ifndef EVD_SCHEMA_JSONSCHEMA_IMPL_H
#define EVD_SCHEMA_JSONSCHEMA_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- bounded text ------------------------------------------------------------------ */

/*
 * A fixed-capacity text sink: writes past `cap - 1` bytes are dropped and `truncated` is
 * set; evd_sbuf_finish() then ends the text with "…" on a UTF-8 character boundary.
 */
struct evd_sbuf {
    char *p;
    size_t cap; /* including the NUL */
    size_t len;
    bool truncated;
};
void evd_sbuf_init(struct evd_sbuf *b, char *p, size_t cap);
void evd_sbuf_put(struct evd_sbuf *b, const char *s, size_t n);
void evd_sbuf_puts(struct evd_sbuf *b, const char *s);
void evd_sbuf_printf(struct evd_sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void evd_sbuf_finish(struct evd_sbuf *b);
/* Appends "/" and the JSON Pointer (RFC 6901) form of the key seg[0..len): "~" as "~0",
 * "/" as "~1". */
void evd_sbuf_put_pointer_token(struct evd_sbuf *b, const char *seg, size_t len);
/*
 * Reads the JSON Pointer token after the "/" at *p: decodes it into tok (cap bytes,
 * NUL-terminated), moves *p to the next "/" or the end and returns the token's length;
 * (size_t)-1 when it does not fit in cap.
 */
size_t evd_pointer_token(const char **p, char *tok, size_t cap);
/* The array index a token names ("0", or digits without a leading zero); false if none. */
bool evd_pointer_index(const char *tok, size_t len, size_t *idx);

/* Length of the longest prefix of s[0..n) that does not split a UTF-8 sequence. */
size_t evd_utf8_clip(const char *s, size_t n);
/* Number of code points in the UTF-8 text s[0..n). */
size_t evd_utf8_count(const char *s, size_t n);

/* ---- JSON values ------------------------------------------------------------------- */

/* The JSON Schema type names as bits, to be ORed into a set. */
enum evd_js_type {
    EVD_JS_T_NULL = 1,
    EVD_JS_T_BOOLEAN = 2,
    EVD_JS_T_OBJECT = 4,
    EVD_JS_T_ARRAY = 8,
    EVD_JS_T_NUMBER = 16,
    EVD_JS_T_STRING = 32,
    EVD_JS_T_INTEGER = 64,
};
/* The bit of a type name ("null", ..., "integer"), or 0 for NULL or another name. */
unsigned evd_js_type_bit(const char *name);

/* True for integers and for reals with no fractional part (1.0). */
bool evd_js_is_integral(const json_t *x);
/* Exact comparison of two numbers: <0, 0, >0. Both must be numbers. */
int evd_js_num_cmp(const json_t *a, const json_t *b);
/* Mathematical JSON equality (1 == 1.0; objects by key set), bounded in depth. */
bool evd_js_equal(const json_t *a, const json_t *b);
/* A hash consistent with evd_js_equal. */
uint64_t evd_js_hash(const json_t *x);
/* Writes a number as JSON text: integers plainly, reals in the shortest round-trip form. */
void evd_js_number_text(const json_t *x, char *out, size_t outsz);
/* Appends x as compact JSON (bounded by the sink; deeper than 64 levels prints "…"). */
void evd_js_dump(struct evd_sbuf *b, const json_t *x);
/* Appends s[0..n) as a JSON string literal with quotes. */
void evd_js_dump_string(struct evd_sbuf *b, const char *s, size_t n);

/* ---- URIs (RFC 3986) --------------------------------------------------------------- */

/* Resolves `ref` against `base` (either may be relative or empty); malloc'd, NULL on ENOMEM. */
char *evd_uri_resolve(const char *base, const char *ref);
/* Syntax checks for the `format` keyword. */
bool evd_uri_is_uri(const char *s, size_t n, bool iri);
bool evd_uri_is_reference(const char *s, size_t n, bool iri);
bool evd_uri_is_template(const char *s, size_t n);

/* ---- formats and regexes ----------------------------------------------------------- */

typedef bool (*evd_js_format_fn)(const char *s, size_t n);
/* The checker for a draft-07 format name, or NULL for unknown formats (not asserted). */
evd_js_format_fn evd_js_format_lookup(const char *name);
/* Individual checkers, also used by the structured-output layer. */
bool evd_js_format_hostname(const char *s, size_t n);
bool evd_js_format_ipv4(const char *s, size_t n);
bool evd_js_format_ipv6(const char *s, size_t n);

/*
 * Compiles an ECMA-262-style pattern with PCRE2 (UTF, \u escapes, $ only at the end).
 * Returns the code (free with pcre2_code_free) or NULL with a message in errbuf; *nomem
 * (when not NULL) tells an allocation failure from a bad pattern.
 */
pcre2_code *evd_js_regex_compile(const char *pat, size_t len, char *errbuf, size_t errsz,
                                 bool *nomem);
/* Unanchored search; md must come from pcre2_match_data_create(1, NULL). */
bool evd_js_regex_search(const pcre2_code *re, const char *s, size_t n, pcre2_match_data *md,
                         pcre2_match_context *mctx);

/* ---- the meta-schema --------------------------------------------------------------- */

extern const char evd_js_draft7_text[];

#endif
