/*
 * Splits a JSON object as it streams in: the elements of one of its top-level members (an
 * array, e.g. an experiment's inline "cases") are handed out one at a time, as their own
 * text, the moment each is complete; everything else is kept as the object's text with
 * that array emptied ("cases": []), to be parsed whole at the end. So a large array is
 * never held, only its current element.
 *
 * The splitter scans bytes only (strings, escapes, nesting); it does not validate JSON.
 * The element texts and the rest are parsed by the caller, and a malformed body fails
 * there: evd_json_split_error turns a parse error of an element into one at the
 * element's place in the whole body ("… at line L column C"), and the rest keeps the
 * body's line breaks, so its own errors are on the body's lines.
 *
 * Pure (no I/O); a splitter belongs to one thread at a time.
 */
#ifndef EVD_DOMAIN_JSON_SPLIT_H
#define EVD_DOMAIN_JSON_SPLIT_H

#include <jansson.h>
#include <stddef.h>

#include "common/err.h"

struct evd_json_split;

/*
 * Receives the element at `index` (0-based): its text (borrowed for the call, not
 * NUL-terminated, surrounding spaces removed), and where it began in the body (line and
 * column from 1). Returns EVD_OK to go on; another code stops the splitter, and feed
 * returns it.
 */
typedef enum evd_code (*evd_json_split_fn)(void *ctx, size_t index, const char *text,
                                           size_t len, int line, int column,
                                           struct evd_err *err);

/* A splitter of top-level member `member` (borrowed; at most 63 bytes). NULL on ENOMEM. */
struct evd_json_split *evd_json_split_new(const char *member, evd_json_split_fn fn, void *ctx);

/* The next len bytes of the body. EVD_OK, or the first failure (of fn, or ENOMEM). */
enum evd_code evd_json_split_feed(struct evd_json_split *s, const void *data, size_t len,
                                  struct evd_err *err);

/* The body without the member's elements (borrowed; NUL-terminated; valid until free). */
const char *evd_json_split_rest(const struct evd_json_split *s, size_t *len);

/* Elements handed out so far. */
size_t evd_json_split_count(const struct evd_json_split *s);

/*
 * The error of parsing an element that began at line/column of the body, as jansson
 * reported it for the element's own text (jerr), restated at its place in the body:
 * "malformed JSON: <text> at line L column C".
 */
void evd_json_split_error(const json_error_t *jerr, int line, int column, struct evd_err *err);

void evd_json_split_free(struct evd_json_split *s);

#endif
