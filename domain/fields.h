/*
 * Internal to domain/: typed look-ups of JSON object members that produce the
 * domain's validation messages, always naming the field by its dotted path
 * ("control.prompt must be a string", "model.colour is not a known field").
 * Pure; thread-safe; every json_t returned is borrowed from the object passed in.
 */
#ifndef EVD_DOMAIN_FIELDS_H
#define EVD_DOMAIN_FIELDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Dotted paths are bounded; deeper input is named by a truncated path. */
#define EVD_FIELDS_PATH_MAX 160

/* Accepted kinds of a member; OR them together. */
enum {
    EVD_F_STRING = 1u << 0,
    EVD_F_INTEGER = 1u << 1,
    EVD_F_NUMBER = 1u << 2, /* an integer or a real */
    EVD_F_BOOL = 1u << 3,
    EVD_F_OBJECT = 1u << 4,
    EVD_F_ARRAY = 1u << 5,
    EVD_F_ANY = 1u << 6,      /* any value; null is a value, not an absence */
    EVD_F_NULLABLE = 1u << 7, /* a JSON null reads as absent */
    EVD_F_REQUIRED = 1u << 8, /* absence is an error "<path> is required" */
};

/* Writes "parent.key" (or "key" when parent is empty or NULL) into buf. */
void evd_fields_path(char *buf, size_t size, const char *parent, const char *key);

/*
 * Looks up obj[key]. On success *out is the borrowed member, or NULL when it is absent
 * (or null with EVD_F_NULLABLE). Errors (EVD_EINVAL): "<path> is required",
 * "<path> must be a string|an integer|a number|a boolean|an object|an array".
 */
enum evd_code evd_fields_get(const json_t *obj, const char *parent, const char *key, unsigned flags,
                             json_t **out, struct evd_err *err);

/* Rejects any member of obj not in the NULL-terminated list: "<path> is not a known field". */
enum evd_code evd_fields_only(const json_t *obj, const char *parent, const char *const *allowed,
                              struct evd_err *err);

/*
 * Reads an optional string member that must be one of names[0..n): *out is its index,
 * or -1 when absent. Error "<path> must be one of a, b, c".
 */
enum evd_code evd_fields_enum(const json_t *obj, const char *parent, const char *key,
                              unsigned flags, const char *const *names, size_t n, int *out,
                              struct evd_err *err);

/*
 * Reads an optional non-negative integer member no larger than max: *present says
 * whether it was there. Errors: "<path> must be an integer", "<path> must be a
 * non-negative integer", "<path> must be at most <max>".
 */
enum evd_code evd_fields_uint(const json_t *obj, const char *parent, const char *key,
                              unsigned flags, uint64_t max, bool *present, uint64_t *out,
                              struct evd_err *err);

/* A string member's value as a NUL-terminated string, or NULL when absent/not a string. */
const char *evd_fields_str(const json_t *obj, const char *key);

/* An integer member's value, or dflt when absent or not an integer. */
json_int_t evd_fields_int(const json_t *obj, const char *key, json_int_t dflt);

/* Sets obj[key] to a deep copy of value (borrowed); 0, or -1 on ENOMEM. */
int evd_fields_set_copy(json_t *obj, const char *key, const json_t *value);

#endif
