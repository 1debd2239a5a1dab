/*
 * Experiment and evaluation files: YAML (through libyaml's event parser) or JSON (through
 * jansson), turned into JSON with the line of every value kept by its path, so that a
 * refusal of the server ("treatments[1].prompt cannot be empty") can name the line of
 * the file it is about. Plain YAML scalars follow the YAML 1.2 core schema (null, true,
 * false, integers, floats; `yes` and `no` stay strings); quoted and block scalars are
 * strings. Anchors and aliases are supported; a repeated key is refused. See cli.h.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "cli/cli.h"

#define PATH_MAX_LEN 512
#define MAX_DEPTH 64
#define MAX_ANCHORS 256

struct loader {
    yaml_parser_t parser;
    json_t *lines;
    char *err;
    size_t errsz;
    const char *file;
    struct {
        char *name;
        json_t *value;
    } anchors[MAX_ANCHORS];
    size_t nanchors;
};

static bool fail(struct loader *l, size_t line, size_t col, const char *msg)
{
    snprintf(l->err, l->errsz, "%s:%zu:%zu: %s", l->file, line, col, msg);
    return false;
}

static bool next(struct loader *l, yaml_event_t *ev)
{
    if (yaml_parser_parse(&l->parser, ev))
        return true;
    char msg[256];
    snprintf(msg, sizeof(msg), "%s%s%s", l->parser.problem ? l->parser.problem : "invalid YAML",
             l->parser.context ? " " : "", l->parser.context ? l->parser.context : "");
    return fail(l, l->parser.problem_mark.line + 1, l->parser.problem_mark.column + 1, msg);
}

static bool match(const char *s, const char *const *words)
{
    for (; *words != NULL; words++)
        if (strcmp(s, *words) == 0)
            return true;
    return false;
}

/* A plain scalar under the YAML 1.2 core schema (new reference). */
static json_t *plain(const char *s)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"true", "True", "TRUE", NULL};
    static const char *const falses[] = {"false", "False", "FALSE", NULL};
    if (match(s, nulls))
        return json_null();
    if (match(s, trues))
        return json_true();
    if (match(s, falses))
        return json_false();
    char *end = NULL;
    errno = 0;
    if (strspn(s, "+-0123456789") == strlen(s) && strchr("+-0123456789", s[0]) != NULL) {
        long long v = strtoll(s, &end, 10);
        if (*end == '\0' && errno == 0 && end != s)
            return json_integer(v);
    }
    if (strncmp(s, "0x", 2) == 0 || strncmp(s, "0o", 2) == 0) {
        long long v = strtoll(s + 2, &end, s[1] == 'x' ? 16 : 8);
        if (*end == '\0' && errno == 0 && end != s + 2)
            return json_integer(v);
    }
    if (strspn(s, "+-0123456789.eE") == strlen(s) && strpbrk(s, "0123456789") != NULL) {
        double d = strtod(s, &end);
        if (*end == '\0' && isfinite(d))
            return json_real(d);
    }
    return json_string(s);
}

static void note_line(struct loader *l, const char *path, const yaml_mark_t *m)
{
    if (json_object_get(l->lines, path) == NULL)
        json_object_set_new(l->lines, path, json_integer((json_int_t)m->line + 1));
}

static bool node(struct loader *l, yaml_event_t *ev, const char *path, int depth, json_t **out);

static bool remember(struct loader *l, const yaml_char_t *anchor, json_t *v)
{
    if (anchor == NULL)
        return true;
    if (l->nanchors == MAX_ANCHORS)
        return fail(l, 0, 0, "too many anchors");
    l->anchors[l->nanchors].name = strdup((const char *)anchor);
    l->anchors[l->nanchors].value = json_incref(v);
    l->nanchors++;
    return true;
}

static bool mapping(struct loader *l, const char *path, int depth, json_t **out)
{
    json_t *obj = json_object();
    yaml_event_t ev;
    for (;;) {
        if (!next(l, &ev))
            goto bad;
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            *out = obj;
            return true;
        }
        if (ev.type != YAML_SCALAR_EVENT) {
            fail(l, ev.start_mark.line + 1, ev.start_mark.column + 1,
                 "a mapping key must be a plain text");
            yaml_event_delete(&ev);
            goto bad;
        }
        char *key = strdup((const char *)ev.data.scalar.value);
        yaml_mark_t mark = ev.start_mark;
        yaml_event_delete(&ev);
        if (json_object_get(obj, key) != NULL) {
            char msg[300];
            snprintf(msg, sizeof(msg), "duplicate key %.200s", key);
            free(key);
            fail(l, mark.line + 1, mark.column + 1, msg);
            goto bad;
        }
        char sub[PATH_MAX_LEN];
        snprintf(sub, sizeof(sub), "%s%s%s", path, path[0] ? "." : "", key);
        note_line(l, sub, &mark);
        json_t *v = NULL;
        if (!next(l, &ev) || !node(l, &ev, sub, depth + 1, &v)) {
            free(key);
            goto bad;
        }
        json_object_set_new(obj, key, v);
        free(key);
    }
bad:
    json_decref(obj);
    return false;
}

static bool sequence(struct loader *l, const char *path, int depth, json_t **out)
{
    json_t *arr = json_array();
    yaml_event_t ev;
    for (size_t i = 0;; i++) {
        if (!next(l, &ev)) {
            json_decref(arr);
            return false;
        }
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            *out = arr;
            return true;
        }
        char sub[PATH_MAX_LEN];
        snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
        note_line(l, sub, &ev.start_mark);
        json_t *v = NULL;
        if (!node(l, &ev, sub, depth + 1, &v)) {
            json_decref(arr);
            return false;
        }
        json_array_append_new(arr, v);
    }
}

/* Reads the node that starts with *ev (consumed). */
static bool node(struct loader *l, yaml_event_t *ev, const char *path, int depth, json_t **out)
{
    bool ok = true;
    *out = NULL;
    yaml_mark_t mark = ev->start_mark;
    if (depth > MAX_DEPTH) {
        yaml_event_delete(ev);
        return fail(l, mark.line + 1, mark.column + 1, "nested too deep");
    }
    switch (ev->type) {
    case YAML_SCALAR_EVENT: {
        const char *v = (const char *)ev->data.scalar.value;
        const char *tag = (const char *)ev->data.scalar.tag;
        if (tag != NULL && strcmp(tag, YAML_STR_TAG) == 0)
            *out = json_string(v);
        else
            *out = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? plain(v) : json_string(v);
        if (*out == NULL)
            ok = fail(l, ev->start_mark.line + 1, ev->start_mark.column + 1,
                      "a text that is not valid UTF-8");
        else
            ok = remember(l, ev->data.scalar.anchor, *out);
        break;
    }
    case YAML_MAPPING_START_EVENT: {
        yaml_char_t *anchor = ev->data.mapping_start.anchor;
        char *a = anchor ? strdup((const char *)anchor) : NULL;
        ok = mapping(l, path, depth, out) && remember(l, (yaml_char_t *)a, *out);
        free(a);
        break;
    }
    case YAML_SEQUENCE_START_EVENT: {
        yaml_char_t *anchor = ev->data.sequence_start.anchor;
        char *a = anchor ? strdup((const char *)anchor) : NULL;
        ok = sequence(l, path, depth, out) && remember(l, (yaml_char_t *)a, *out);
        free(a);
        break;
    }
    case YAML_ALIAS_EVENT: {
        const char *name = (const char *)ev->data.alias.anchor;
        for (size_t i = l->nanchors; i-- > 0;)
            if (strcmp(l->anchors[i].name, name) == 0) {
                *out = json_deep_copy(l->anchors[i].value);
                break;
            }
        if (*out == NULL)
            ok = fail(l, ev->start_mark.line + 1, ev->start_mark.column + 1, "unknown alias");
        break;
    }
    default:
        ok = fail(l, ev->start_mark.line + 1, ev->start_mark.column + 1, "unexpected YAML");
    }
    if (!ok) {
        json_decref(*out);
        *out = NULL;
    }
    yaml_event_delete(ev);
    return ok;
}

static bool load_yaml(struct loader *l, FILE *f, json_t **root)
{
    yaml_event_t ev;
    yaml_parser_set_input_file(&l->parser, f);
    bool ok = next(l, &ev) && ev.type == YAML_STREAM_START_EVENT;
    if (ok)
        yaml_event_delete(&ev);
    ok = ok && next(l, &ev);
    if (ok && ev.type == YAML_STREAM_END_EVENT) {
        yaml_event_delete(&ev);
        return fail(l, 1, 1, "the file is empty");
    }
    if (ok && ev.type == YAML_DOCUMENT_START_EVENT) {
        yaml_event_delete(&ev);
        ok = next(l, &ev) && node(l, &ev, "", 0, root);
    } else if (ok) {
        yaml_event_delete(&ev);
        ok = fail(l, 1, 1, "not a YAML document");
    }
    if (ok && next(l, &ev)) {
        bool end = ev.type == YAML_DOCUMENT_END_EVENT;
        yaml_mark_t m = ev.start_mark;
        yaml_event_delete(&ev);
        if (!end)
            ok = fail(l, m.line + 1, m.column + 1, "one document per file");
        else if (next(l, &ev)) {
            end = ev.type == YAML_STREAM_END_EVENT;
            m = ev.start_mark;
            yaml_event_delete(&ev);
            if (!end)
                ok = fail(l, m.line + 1, m.column + 1, "one document per file");
        } else {
            ok = false;
        }
    } else {
        ok = false;
    }
    if (!ok) {
        json_decref(*root);
        *root = NULL;
    }
    return ok;
}

bool cli_doc_load(struct cli_doc *d, const char *path, char *err, size_t errsz)
{
    memset(d, 0, sizeof(*d));
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errsz, "%s: %s", path, strerror(errno));
        return false;
    }
    struct loader l = {.lines = json_object(), .err = err, .errsz = errsz, .file = path};
    yaml_parser_initialize(&l.parser);
    json_t *root = NULL;
    bool ok = load_yaml(&l, f, &root);
    yaml_parser_delete(&l.parser);
    for (size_t i = 0; i < l.nanchors; i++) {
        free(l.anchors[i].name);
        json_decref(l.anchors[i].value);
    }
    size_t n = strlen(path);
    bool is_json = n > 5 && strcmp(path + n - 5, ".json") == 0;
    if (is_json) {
        /* JSON is read by jansson (exact numbers and escapes); YAML only lent the lines. */
        json_error_t je;
        rewind(f);
        json_t *j = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
        json_decref(root);
        root = j;
        ok = j != NULL;
        if (!ok)
            snprintf(err, errsz, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    }
    fclose(f);
    if (!ok) {
        json_decref(l.lines);
        return false;
    }
    if (!json_is_object(root)) {
        snprintf(err, errsz, "%s:1:1: the file must hold an object (a mapping)", path);
        json_decref(root);
        json_decref(l.lines);
        return false;
    }
    d->path = strdup(path);
    d->root = root;
    d->lines = l.lines;
    return true;
}

void cli_doc_free(struct cli_doc *d)
{
    free(d->path);
    json_decref(d->root);
    json_decref(d->lines);
    memset(d, 0, sizeof(*d));
}

/* The index of the inline case whose id is the `len` bytes at id, or -1. */
static long case_index(const struct cli_doc *d, const char *id, size_t len)
{
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(d->root, "cases"), i, c)
    {
        const char *s = json_string_value(json_object_get(c, "id"));
        if (s != NULL && strlen(s) == len && strncmp(s, id, len) == 0)
            return (long)i;
    }
    return -1;
}

int cli_doc_line_of(const struct cli_doc *d, const char *message)
{
    static const char FIELD[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.[]";
    char path[PATH_MAX_LEN];
    size_t n = strspn(message, FIELD), floor = 0;
    if (n == 0 || n >= sizeof(path))
        return 0;
    memcpy(path, message, n);
    path[n] = '\0';
    /*
     * A refusal about a member inside an inline case names the case, then the member:
     * "cases[0]: messages[1].role must be …" (by index) or "case oslo: tool_results.x names
     * no declared tool" (by id; only a member of that case answers, so that "case oslo:
     * template variable …" is left to cli_doc_template_line).
     */
    const char *rest = NULL;
    if (strncmp(message + n, ": ", 2) == 0) {
        rest = message + n + 2;
    } else if (strcmp(path, "case") == 0 && message[n] == ' ') {
        const char *id = message + n + 1, *colon = strstr(id, ": ");
        long i = colon != NULL ? case_index(d, id, (size_t)(colon - id)) : -1;
        if (i >= 0) {
            n = (size_t)snprintf(path, sizeof(path), "cases[%ld]", i);
            floor = n + 1;
            rest = colon + 2;
        }
    }
    size_t m = rest != NULL ? strspn(rest, FIELD) : 0;
    if (m > 0 && n + 1 + m < sizeof(path))
        snprintf(path + n, sizeof(path) - n, "%s%.*s", rest[0] == '[' ? "" : ".", (int)m, rest);
    else if (floor > 0)
        return 0;
    for (;;) {
        json_t *line = json_object_get(d->lines, path);
        if (line != NULL)
            return (int)json_integer_value(line);
        char *dot = strrchr(path, '.'), *br = strrchr(path, '[');
        char *cut = dot > br ? dot : br;
        if (cut == NULL || cut == path || (size_t)(cut - path) < floor)
            return 0;
        *cut = '\0';
    }
}

/* Whether s has a {{ name }} placeholder (spaces inside the braces allowed). */
static bool has_placeholder(const char *s, const char *name, size_t len)
{
    for (const char *p = strstr(s, "{{"); p != NULL; p = strstr(p + 2, "{{")) {
        const char *q = p + 2;
        q += strspn(q, " ");
        if (strncmp(q, name, len) != 0)
            continue;
        q += len;
        q += strspn(q, " ");
        if (strncmp(q, "}}", 2) == 0)
            return true;
    }
    return false;
}

/* The smallest line of a string under v (at path) that uses the variable; 0 when none. */
static int find_template(const struct cli_doc *d, const json_t *v, const char *path,
                         const char *name, size_t len, char *field, size_t n)
{
    char sub[PATH_MAX_LEN];
    int best = 0;
    if (json_is_string(v)) {
        if (!has_placeholder(json_string_value(v), name, len))
            return 0;
        best = (int)json_integer_value(json_object_get(d->lines, path));
        if (best > 0)
            snprintf(field, n, "%s", path);
        return best;
    }
    char found[PATH_MAX_LEN];
    if (json_is_object(v)) {
        const char *key;
        const json_t *m;
        json_object_foreach((json_t *)v, key, m)
        {
            /* Inline cases hold data, not templates. */
            if (path[0] == '\0' && strcmp(key, "cases") == 0)
                continue;
            snprintf(sub, sizeof(sub), "%s%s%s", path, path[0] ? "." : "", key);
            int line = find_template(d, m, sub, name, len, found, sizeof(found));
            if (line > 0 && (best == 0 || line < best)) {
                best = line;
                snprintf(field, n, "%s", found);
            }
        }
    } else if (json_is_array(v)) {
        size_t i;
        const json_t *m;
        json_array_foreach(v, i, m)
        {
            snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
            int line = find_template(d, m, sub, name, len, found, sizeof(found));
            if (line > 0 && (best == 0 || line < best)) {
                best = line;
                snprintf(field, n, "%s", found);
            }
        }
    }
    return best;
}

int cli_doc_template_line(const struct cli_doc *d, const char *message, char *field, size_t n)
{
    static const char WORDS[] = "template variable ";
    const char *p = strstr(message, WORDS);
    if (p == NULL)
        return 0;
    p += sizeof(WORDS) - 1;
    size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.");
    if (len == 0 || len >= PATH_MAX_LEN)
        return 0;
    return find_template(d, d->root, "", p, len, field, n);
}
