/* Template substitution; see template.h. One scanner finds placeholders for every use. */
#include "domain/template.h"

#include <stdlib.h>
#include <string.h>

#include "common/json.h"

static bool name_start(char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_';
}

static bool name_char(char ch)
{
    return name_start(ch) || (ch >= '0' && ch <= '9');
}

/*
 * Finds the next placeholder in s[0..len) at or after *pos: true with [*start, *end) the
 * whole `{{ … }}` and [*name, *name + *nlen) its name; false when there is none.
 */
static bool next_placeholder(const char *s, size_t len, size_t *pos, size_t *start, size_t *end,
                             const char **name, size_t *nlen)
{
    for (size_t i = *pos; i + 1 < len; i++) {
        if (s[i] != '{' || s[i + 1] != '{')
            continue;
        size_t j = i + 2;
        while (j < len && s[j] == ' ')
            j++;
        size_t n0 = j;
        /* segments of a name, separated by single dots */
        bool ok = j < len && name_start(s[j]);
        while (ok) {
            while (j < len && name_char(s[j]))
                j++;
            if (j + 1 < len && s[j] == '.' && name_start(s[j + 1]))
                j++;
            else
                break;
        }
        size_t n1 = j;
        while (j < len && s[j] == ' ')
            j++;
        if (ok && n1 - n0 <= EVD_TEMPLATE_NAME_MAX && j + 1 < len && s[j] == '}' &&
            s[j + 1] == '}') {
            *start = i;
            *end = j + 2;
            *name = s + n0;
            *nlen = n1 - n0;
            *pos = j + 2;
            return true;
        }
    }
    return false;
}

bool evd_template_is_name(const char *s, size_t len)
{
    if (len == 0 || len > EVD_TEMPLATE_NAME_MAX)
        return false;
    bool seg_start = true;
    for (size_t i = 0; i < len; i++) {
        if (seg_start ? !name_start(s[i]) : !(name_char(s[i]) || s[i] == '.'))
            return false;
        seg_start = s[i] == '.';
    }
    return !seg_start;
}

const json_t *evd_template_lookup(const json_t *c, const char *name, size_t len)
{
    const char *dot = memchr(name, '.', len);
    size_t seg = dot != NULL ? (size_t)(dot - name) : len;
    const json_t *v;
    if (seg == 8 && memcmp(name, "expected", 8) == 0)
        v = json_object_get(c, "expected");
    else
        v = json_object_getn(json_object_get(c, "vars"), name, seg);
    size_t i = seg;
    while (v != NULL && i < len) {
        i++; /* the dot */
        size_t n = 0;
        while (i + n < len && name[i + n] != '.')
            n++;
        v = json_is_object(v) ? json_object_getn(v, name + i, n) : NULL;
        i += n;
    }
    return v;
}

static enum evd_code undefined(const json_t *c, const char *name, size_t len, struct evd_err *err)
{
    return evd_err_set(err, EVD_EINVAL, "case %.200s: template variable %.*s is not defined",
                       json_string_value(json_object_get(c, "id")), (int)len, name);
}

enum evd_code evd_template_render(const char *tmpl, size_t len, const json_t *c,
                                  struct evd_buf *out, struct evd_err *err)
{
    size_t pos = 0, copied = 0, start, end, nlen;
    const char *name;
    while (next_placeholder(tmpl, len, &pos, &start, &end, &name, &nlen)) {
        const json_t *v = evd_template_lookup(c, name, nlen);
        if (v == NULL)
            return undefined(c, name, nlen, err);
        if (evd_buf_append(out, tmpl + copied, start - copied) != 0)
            goto nomem;
        if (json_is_string(v)) {
            if (evd_buf_append(out, json_string_value(v), json_string_length(v)) != 0)
                goto nomem;
        } else {
            size_t n = 0;
            char *text = evd_json_compact(v, &n);
            int rc = text != NULL ? evd_buf_append(out, text, n) : -1;
            free(text);
            if (rc != 0)
                goto nomem;
        }
        copied = end;
    }
    if (evd_buf_append(out, tmpl + copied, len - copied) != 0)
        goto nomem;
    return EVD_OK;
nomem:
    return evd_err_set(err, EVD_ENOMEM, "out of memory");
}

enum evd_code evd_template_render_json(const json_t *v, const json_t *c, json_t **out,
                                       struct evd_err *err)
{
    *out = NULL;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t len = json_string_length(v), pos = 0, start, end, nlen;
        const char *name;
        if (!next_placeholder(s, len, &pos, &start, &end, &name, &nlen)) {
            *out = json_incref((json_t *)v);
            return EVD_OK;
        }
        if (start == 0 && end == len) {
            const json_t *val = evd_template_lookup(c, name, nlen);
            if (val == NULL)
                return undefined(c, name, nlen, err);
            *out = json_deep_copy(val);
            return *out != NULL ? EVD_OK : evd_err_set(err, EVD_ENOMEM, "out of memory");
        }
        struct evd_buf b = {0};
        enum evd_code rc = evd_template_render(s, len, c, &b, err);
        if (rc == EVD_OK) {
            *out = json_stringn(b.data != NULL ? b.data : "", b.len);
            if (*out == NULL)
                rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        }
        evd_buf_free(&b);
        return rc;
    }
    if (json_is_object(v)) {
        json_t *o = json_object();
        const char *k;
        json_t *m;
        if (o == NULL)
            return evd_err_set(err, EVD_ENOMEM, "out of memory");
        json_object_foreach((json_t *)v, k, m)
        {
            json_t *r = NULL;
            enum evd_code rc = evd_template_render_json(m, c, &r, err);
            if (rc == EVD_OK && json_object_set_new(o, k, r) != 0)
                rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
            if (rc != EVD_OK) {
                json_decref(o);
                return rc;
            }
        }
        *out = o;
        return EVD_OK;
    }
    if (json_is_array(v)) {
        json_t *a = json_array();
        size_t i;
        json_t *m;
        if (a == NULL)
            return evd_err_set(err, EVD_ENOMEM, "out of memory");
        json_array_foreach(v, i, m)
        {
            json_t *r = NULL;
            enum evd_code rc = evd_template_render_json(m, c, &r, err);
            if (rc == EVD_OK && json_array_append_new(a, r) != 0)
                rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
            if (rc != EVD_OK) {
                json_decref(a);
                return rc;
            }
        }
        *out = a;
        return EVD_OK;
    }
    *out = json_incref((json_t *)v);
    return EVD_OK;
}

bool evd_template_has_placeholder(const json_t *v)
{
    if (json_is_string(v)) {
        size_t pos = 0, start, end, nlen;
        const char *name;
        return next_placeholder(json_string_value(v), json_string_length(v), &pos, &start, &end,
                                &name, &nlen);
    }
    const char *k;
    size_t i;
    json_t *m;
    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, m)
        {
            if (evd_template_has_placeholder(m))
                return true;
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, m)
        {
            if (evd_template_has_placeholder(m))
                return true;
        }
    }
    return false;
}
