/*
 * Typed member look-ups with field-naming messages (see fields.h). Pure; thread-safe.
 */
#include "domain/fields.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/json.h"

void evd_fields_path(char *buf, size_t size, const char *parent, const char *key)
{
    if (parent == NULL || *parent == '\0')
        snprintf(buf, size, "%s", key);
    else
        snprintf(buf, size, "%s.%s", parent, key);
}

static const char *kind_phrase(unsigned flags)
{
    if (flags & EVD_F_STRING)
        return "a string";
    if (flags & EVD_F_INTEGER)
        return "an integer";
    if (flags & EVD_F_NUMBER)
        return "a number";
    if (flags & EVD_F_BOOL)
        return "a boolean";
    if (flags & EVD_F_OBJECT)
        return "an object";
    if (flags & EVD_F_ARRAY)
        return "an array";
    return "a JSON value";
}

static bool kind_ok(const json_t *v, unsigned flags)
{
    if (flags & EVD_F_ANY)
        return true;
    switch (json_typeof(v)) {
    case JSON_STRING:
        return (flags & EVD_F_STRING) != 0;
    case JSON_INTEGER:
        return (flags & (EVD_F_INTEGER | EVD_F_NUMBER)) != 0;
    case JSON_REAL:
        return (flags & EVD_F_NUMBER) != 0;
    case JSON_TRUE:
    case JSON_FALSE:
        return (flags & EVD_F_BOOL) != 0;
    case JSON_OBJECT:
        return (flags & EVD_F_OBJECT) != 0;
    case JSON_ARRAY:
        return (flags & EVD_F_ARRAY) != 0;
    case JSON_NULL:
        return false;
    }
    return false;
}

enum evd_code evd_fields_get(const json_t *obj, const char *parent, const char *key, unsigned flags,
                             json_t **out, struct evd_err *err)
{
    char path[EVD_FIELDS_PATH_MAX];
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (v != NULL && json_is_null(v) && !(flags & EVD_F_ANY) && (flags & EVD_F_NULLABLE))
        v = NULL;
    if (v == NULL) {
        if (flags & EVD_F_REQUIRED) {
            evd_fields_path(path, sizeof(path), parent, key);
            return evd_err_set(err, EVD_EINVAL, "%s is required", path);
        }
        return EVD_OK;
    }
    if (!kind_ok(v, flags)) {
        evd_fields_path(path, sizeof(path), parent, key);
        return evd_err_set(err, EVD_EINVAL, "%s must be %s", path, kind_phrase(flags));
    }
    *out = v;
    return EVD_OK;
}

enum evd_code evd_fields_only(const json_t *obj, const char *parent, const char *const *allowed,
                              struct evd_err *err)
{
    const char *key = evd_json_unknown_member(obj, allowed);
    if (key != NULL) {
        char path[EVD_FIELDS_PATH_MAX];
        evd_fields_path(path, sizeof(path), parent, key);
        return evd_err_set(err, EVD_EINVAL, "%s is not a known field", path);
    }
    return EVD_OK;
}

enum evd_code evd_fields_enum(const json_t *obj, const char *parent, const char *key,
                              unsigned flags, const char *const *names, size_t n, int *out,
                              struct evd_err *err)
{
    json_t *v;
    *out = -1;
    enum evd_code rc = evd_fields_get(obj, parent, key, flags | EVD_F_STRING, &v, err);
    if (rc != EVD_OK || v == NULL)
        return rc;
    const char *s = json_string_value(v);
    for (size_t i = 0; i < n; i++) {
        if (strlen(names[i]) == json_string_length(v) && strcmp(names[i], s) == 0) {
            *out = (int)i;
            return EVD_OK;
        }
    }
    char path[EVD_FIELDS_PATH_MAX];
    char list[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < n && used < sizeof(list); i++) {
        int w = snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", names[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    evd_fields_path(path, sizeof(path), parent, key);
    return evd_err_set(err, EVD_EINVAL, "%s must be one of %s", path, list);
}

enum evd_code evd_fields_uint(const json_t *obj, const char *parent, const char *key,
                              unsigned flags, uint64_t max, bool *present, uint64_t *out,
                              struct evd_err *err)
{
    json_t *v;
    *present = false;
    enum evd_code rc = evd_fields_get(obj, parent, key, flags | EVD_F_INTEGER, &v, err);
    if (rc != EVD_OK || v == NULL)
        return rc;
    char path[EVD_FIELDS_PATH_MAX];
    json_int_t i = json_integer_value(v);
    if (i < 0) {
        evd_fields_path(path, sizeof(path), parent, key);
        return evd_err_set(err, EVD_EINVAL, "%s must be a non-negative integer", path);
    }
    if ((uint64_t)i > max) {
        evd_fields_path(path, sizeof(path), parent, key);
        return evd_err_set(err, EVD_EINVAL, "%s must be at most %" PRIu64, path, max);
    }
    *present = true;
    *out = (uint64_t)i;
    return EVD_OK;
}

const char *evd_fields_str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

json_int_t evd_fields_int(const json_t *obj, const char *key, json_int_t dflt)
{
    json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

int evd_fields_set_copy(json_t *obj, const char *key, const json_t *value)
{
    return json_object_set_new(obj, key, json_deep_copy(value));
}
