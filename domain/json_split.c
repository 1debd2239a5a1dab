/*
 * The streaming splitter; see json_split.h. A byte scanner with the little state JSON's
 * lexical structure needs: nesting depth, whether it is inside a string (and after a
 * backslash), the key being read at depth 1, and whether the member's array is open.
 * Depth 1 is inside the top-level object; the member's array is depth 2, so its elements
 * start at depth 2 and whatever they nest is deeper.
 */
#include "domain/json_split.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

struct evd_json_split {
    char member[64];
    size_t member_len;
    evd_json_split_fn fn;
    void *ctx;
    struct evd_buf rest; /* the body without the elements */
    struct evd_buf elem; /* the element being read */
    int depth;
    bool in_string, escape;
    /* Depth 1: the next string is a key; the key being read; a value comes next. */
    bool expect_key, key_reading, key_is_member, after_colon;
    size_t key_len;
    bool key_match; /* the key read so far equals the member's prefix */
    /* The member's array. */
    bool in_array, in_elem, after_comma;
    int elem_line, elem_column;
    size_t index;
    int line, column; /* of the next byte, from 1 */
    enum evd_code failed;
    struct evd_err why;
};

struct evd_json_split *evd_json_split_new(const char *member, evd_json_split_fn fn, void *ctx)
{
    struct evd_json_split *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    snprintf(s->member, sizeof(s->member), "%s", member);
    s->member_len = strlen(s->member);
    s->fn = fn;
    s->ctx = ctx;
    s->line = 1;
    s->column = 1;
    return s;
}

void evd_json_split_free(struct evd_json_split *s)
{
    if (s == NULL)
        return;
    evd_buf_free(&s->rest);
    evd_buf_free(&s->elem);
    free(s);
}

static bool space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static enum evd_code fail(struct evd_json_split *s, enum evd_code code, const struct evd_err *why,
                          struct evd_err *err)
{
    s->failed = code;
    s->why = *why;
    if (err != NULL)
        *err = *why;
    return code;
}

static enum evd_code nomem(struct evd_json_split *s, struct evd_err *err)
{
    struct evd_err why = {0};
    evd_err_set(&why, EVD_ENOMEM, "out of memory");
    return fail(s, EVD_ENOMEM, &why, err);
}

/* Hands the element read so far to fn (empty when there was none between two commas). */
static enum evd_code emit(struct evd_json_split *s, struct evd_err *err)
{
    size_t len = s->elem.len;
    while (len > 0 && space(s->elem.data[len - 1]))
        len--;
    struct evd_err why = {0};
    enum evd_code rc = s->fn(s->ctx, s->index++, s->elem.data != NULL ? s->elem.data : "", len,
                             s->elem_line, s->elem_column, &why);
    s->elem.len = 0;
    s->in_elem = false;
    return rc == EVD_OK ? EVD_OK : fail(s, rc, &why, err);
}

/* One byte inside the member's array: an element's, or between elements. */
static enum evd_code array_byte(struct evd_json_split *s, char c, struct evd_err *err)
{
    /* The body's line breaks stay in the rest, so that its errors are on the body's lines. */
    if (c == '\n' && evd_buf_append(&s->rest, "\n", 1) != 0)
        return nomem(s, err);
    if (!s->in_elem) {
        if (space(c))
            return EVD_OK;
        if (c == ']') {
            /* "[1,]": an empty last element, which its parse refuses. */
            if (s->after_comma && emit(s, err) != EVD_OK)
                return s->failed;
            s->in_array = false;
            s->after_comma = false;
            s->depth = 1;
            return evd_buf_append(&s->rest, "]", 1) == 0 ? EVD_OK : nomem(s, err);
        }
        if (c == ',') {
            s->elem_line = s->line;
            s->elem_column = s->column;
            s->after_comma = true;
            return emit(s, err); /* "[,1]" or "[1,,2]": an empty element */
        }
        s->in_elem = true;
        s->after_comma = false;
        s->elem_line = s->line;
        s->elem_column = s->column;
    }
    if (s->in_string) {
        if (s->escape)
            s->escape = false;
        else if (c == '\\')
            s->escape = true;
        else if (c == '"')
            s->in_string = false;
    } else if (c == '"') {
        s->in_string = true;
    } else if (c == '{' || c == '[') {
        s->depth++;
    } else if ((c == '}' || c == ']') && s->depth > 2) {
        s->depth--;
    } else if (c == ',' && s->depth == 2) {
        s->after_comma = true;
        return emit(s, err);
    } else if (c == ']' && s->depth == 2) {
        if (emit(s, err) != EVD_OK)
            return s->failed;
        return array_byte(s, c, err); /* closes the array */
    }
    return evd_buf_append(&s->elem, &c, 1) == 0 ? EVD_OK : nomem(s, err);
}

/* One byte of the rest: tracks the nesting and the keys of the top-level object. */
static enum evd_code rest_byte(struct evd_json_split *s, char c, struct evd_err *err)
{
    if (s->in_string) {
        if (s->escape) {
            s->escape = false;
            s->key_match = false; /* an escaped key is never the member's */
        } else if (c == '\\') {
            s->escape = true;
        } else if (c == '"') {
            s->in_string = false;
            if (s->key_reading) {
                s->key_reading = false;
                s->key_is_member = s->key_match && s->key_len == s->member_len;
            }
        } else if (s->key_reading) {
            s->key_match = s->key_match && s->key_len < s->member_len &&
                           s->member[s->key_len] == c;
            s->key_len++;
        }
    } else if (!space(c)) {
        bool value = s->depth == 1 && s->after_colon;
        s->after_colon = false;
        switch (c) {
        case '"':
            s->in_string = true;
            if (s->depth == 1 && s->expect_key) {
                s->expect_key = false;
                s->key_reading = true;
                s->key_len = 0;
                s->key_match = true;
            }
            break;
        case '[':
            if (value && s->key_is_member) {
                s->in_array = true;
                s->after_comma = false;
                s->depth = 2;
                break;
            }
            s->depth++;
            break;
        case '{':
            s->depth++;
            if (s->depth == 1)
                s->expect_key = true;
            break;
        case '}':
        case ']':
            s->depth--;
            break;
        case ':':
            if (s->depth == 1)
                s->after_colon = true;
            break;
        case ',':
            if (s->depth == 1) {
                s->expect_key = true;
                s->key_is_member = false;
            }
            break;
        default:
            break;
        }
    }
    return evd_buf_append(&s->rest, &c, 1) == 0 ? EVD_OK : nomem(s, err);
}

enum evd_code evd_json_split_feed(struct evd_json_split *s, const void *data, size_t len,
                                  struct evd_err *err)
{
    if (s->failed != EVD_OK) {
        if (err != NULL)
            *err = s->why;
        return s->failed;
    }
    const char *p = data;
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        enum evd_code rc = s->in_array ? array_byte(s, c, err) : rest_byte(s, c, err);
        if (rc != EVD_OK)
            return rc;
        if (c == '\n') {
            s->line++;
            s->column = 1;
        } else {
            s->column++;
        }
    }
    return EVD_OK;
}

const char *evd_json_split_rest(const struct evd_json_split *s, size_t *len)
{
    *len = s->rest.len;
    return s->rest.data != NULL ? s->rest.data : "";
}

size_t evd_json_split_count(const struct evd_json_split *s)
{
    return s->index;
}

void evd_json_split_error(const json_error_t *jerr, int line, int column, struct evd_err *err)
{
    int l = line + jerr->line - 1;
    int col = jerr->line <= 1 ? column + jerr->column - 1 : jerr->column;
    evd_err_set(err, EVD_EINVAL, "malformed JSON: %s at line %d column %d", jerr->text, l, col);
}
