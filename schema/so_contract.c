/*
 * Structured-output contracts (owner schemas checked and compiled once), the decoding of
 * a final answer into the stored value with its failure codes, and the byte-exact repair
 * message. Contracts are immutable after construction; decoding keeps its state on the
 * caller's stack, so both are thread-safe. Model output may appear in failure lines
 * (sent back to the model only), never in failure codes (which may be persisted).
 */
#include "schema/jsonschema_impl.h"
#include "schema/so_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const RESERVED[] = {
    "verdict", "reference", "reusedFrom", "executionProvenance", "attemptId", "provider",
    "model",   "stdout",    "stderr",     "durationMs",          "exitCode",  "toolCalls",
};

static const char CODE_OVER_SIZE_TEXT[] = "over_size: final JSON exceeds 1 MiB";
static const char CODE_EMPTY[] = "empty: return one JSON object";
static const char CODE_NOT_JSON[] =
    "not_json: return exactly one JSON object, without prose or code fences";
static const char CODE_VERDICT[] = "schema_mismatch: verdict must be GREEN or RED";
static const char CODE_OWNER[] =
    "schema_mismatch: result must match the selected verdict's owner schema";
static const char CODE_OUTPUT[] = "schema_mismatch: result must match the output schema";
static const char CODE_OVER_SIZE_RESULT[] =
    "over_size: normalized result exceeds 256000 characters";
static const char CODE_NOMEM[] = "internal: could not allocate memory to decode the result";

void evd_so_contract_free(struct evd_so_contract *c)
{
    if (c == NULL)
        return;
    for (int i = 0; i < 2; i++) {
        json_decref(c->owner[i]);
        json_decref(c->branch[i]);
        evd_jsonschema_free(c->validator[i]);
    }
    free(c);
}

/* §2.1 of the structured-output notes: what an owner schema of a verdict may be. */
static enum evd_code check_owner(const char *label, json_t *owner, struct evd_err *err)
{
    if (!json_is_object(owner))
        return evd_err_set(err, EVD_EINVAL, "%s must be a JSON Schema object", label);
    size_t size = json_dumpb(owner, NULL, 0, JSON_COMPACT);
    if (size > EVD_SO_MAX_OWNER_SCHEMA_BYTES)
        return evd_err_set(err, EVD_EINVAL, "%s exceeds 8 MiB", label);
    json_t *type = json_object_get(owner, "type");
    if (type != NULL && !(json_is_string(type) && strcmp(json_string_value(type), "object") == 0))
        return evd_err_set(err, EVD_EINVAL, "%s: type must be \"object\" when declared", label);
    static const char *const composition[] = {"allOf", "anyOf", "oneOf", "not"};
    for (size_t i = 0; i < sizeof(composition) / sizeof(composition[0]); i++)
        if (json_object_get(owner, composition[i]) != NULL)
            return evd_err_set(err, EVD_EINVAL,
                               "%s cannot use top-level composition; compose inside owner fields",
                               label);
    if (json_object_get(owner, "$ref") != NULL)
        return evd_err_set(err, EVD_EINVAL,
                           "%s cannot be a top-level $ref; declare the owner fields at the top",
                           label);
    json_t *ap = json_object_get(owner, "additionalProperties");
    if (ap != NULL && !json_is_false(ap))
        return evd_err_set(err, EVD_EINVAL, "%s must forbid undeclared top-level fields", label);
    json_t *props = json_object_get(owner, "properties"), *req = json_object_get(owner, "required");
    for (size_t i = 0; i < sizeof(RESERVED) / sizeof(RESERVED[0]); i++) {
        bool required = false;
        size_t j;
        json_t *name;
        json_array_foreach(req, j, name)
        {
            required = required ||
                       (json_is_string(name) && strcmp(json_string_value(name), RESERVED[i]) == 0);
        }
        if (json_object_get(props, RESERVED[i]) != NULL || required)
            return evd_err_set(err, EVD_EINVAL, "%s must not use the reserved field name \"%s\"",
                               label, RESERVED[i]);
    }
    return EVD_OK;
}

/* The schema of a whole verdict V: the owner's fields plus "verdict": V, closed. */
static json_t *make_branch(json_t *owner, const char *verdict)
{
    json_t *b = owner != NULL ? json_deep_copy(owner) : json_object();
    if (b == NULL)
        return NULL;
    json_t *props = json_object_get(b, "properties");
    if (!json_is_object(props)) {
        props = json_object();
        if (json_object_set_new(b, "properties", props) != 0)
            goto fail;
    }
    json_t *req = json_object_get(b, "required");
    if (!json_is_array(req)) {
        req = json_array();
        if (json_object_set_new(b, "required", req) != 0)
            goto fail;
    }
    if (json_object_set_new(props, "verdict",
                            json_pack("{s:s, s:s}", "type", "string", "const", verdict)) != 0 ||
        json_array_append_new(req, json_string("verdict")) != 0 ||
        json_object_set_new(b, "type", json_string("object")) != 0 ||
        json_object_set_new(b, "additionalProperties", json_false()) != 0)
        goto fail;
    return b;
fail:
    json_decref(b);
    return NULL;
}

/* Compiles c's validator v from `schema` (borrowed); err reads "<label>: <why>". */
static enum evd_code compile(struct evd_so_contract *c, int v, json_t *schema, const char *label,
                             struct evd_err *err)
{
    struct evd_err cerr = {0};
    c->validator[v] = evd_jsonschema_new(schema, &cerr);
    if (c->validator[v] == NULL)
        return evd_err_set(err, cerr.code, "%s: %s", label, cerr.msg);
    return EVD_OK;
}

struct evd_so_contract *evd_so_verdict_new(json_t *green_owner, json_t *red_owner,
                                           struct evd_err *err)
{
    json_t *owners[2] = {green_owner, red_owner};
    static const char *const labels[2] = {"GREEN schema", "RED schema"};
    struct evd_so_contract *c = calloc(1, sizeof(*c));
    if (c == NULL)
        goto nomem;
    c->verdict = true;
    for (int v = SO_GREEN; v <= SO_RED; v++) {
        if (owners[v] != NULL && check_owner(labels[v], owners[v], err) != EVD_OK)
            goto fail;
        if (owners[v] != NULL && (c->owner[v] = json_deep_copy(owners[v])) == NULL)
            goto nomem;
        c->branch[v] = make_branch(c->owner[v], evd_so_verdict_names[v]);
        if (c->branch[v] == NULL)
            goto nomem;
        if (compile(c, v, c->branch[v], labels[v], err) != EVD_OK)
            goto fail;
    }
    return c;
nomem:
    evd_err_set(err, EVD_ENOMEM, "could not allocate the verdict schemas");
fail:
    evd_so_contract_free(c);
    return NULL;
}

struct evd_so_contract *evd_so_value_new(json_t *schema, struct evd_err *err)
{
    struct evd_so_contract *c = calloc(1, sizeof(*c));
    if (c == NULL)
        goto nomem;
    if (schema != NULL) {
        if (json_dumpb(schema, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY) >
            EVD_SO_MAX_OWNER_SCHEMA_BYTES) {
            evd_err_set(err, EVD_EINVAL, "output schema exceeds 8 MiB");
            goto fail;
        }
        if ((c->owner[0] = json_deep_copy(schema)) == NULL)
            goto nomem;
        if (compile(c, 0, c->owner[0], "output schema", err) != EVD_OK)
            goto fail;
    }
    return c;
nomem:
    evd_err_set(err, EVD_ENOMEM, "could not allocate the output schema");
fail:
    evd_so_contract_free(c);
    return NULL;
}

/* ---- decoding ---------------------------------------------------------------------- */

static enum evd_so_result fail(struct evd_so_failure *f, const char *code)
{
    snprintf(f->code, sizeof(f->code), "%s", code);
    return strcmp(code, CODE_NOMEM) == 0 ? EVD_SO_NOMEM : EVD_SO_INVALID;
}

static void add_field_line(struct evd_so_failure *f, const char *key, size_t klen)
{
    if (f->nlines >= EVD_SO_MAX_LINES)
        return;
    struct evd_so_line *l = &f->lines[f->nlines++];
    memset(l, 0, sizeof(*l));
    l->undeclared = true;
    struct evd_sbuf b;
    evd_sbuf_init(&b, l->path, sizeof(l->path));
    evd_sbuf_put(&b, key, klen);
    evd_sbuf_finish(&b);
}

/* A line at `path` with a fixed message (no model output in it). */
static void add_line(struct evd_so_failure *f, const char *path, const char *message)
{
    if (f->nlines >= EVD_SO_MAX_LINES)
        return;
    struct evd_so_line *l = &f->lines[f->nlines++];
    memset(l, 0, sizeof(*l));
    snprintf(l->path, sizeof(l->path), "%s", path);
    snprintf(l->message, sizeof(l->message), "%s", message);
}

/* The envelope lines of the wire answers; they name the shape the model must return. */
static const char ENVELOPE_VALUE[] =
    "\"result\" is a required property: the answer is {\"result\": <value>} with the value "
    "matching the output schema";
static const char ENVELOPE_VERDICT[] =
    "\"result\" is a required property: the answer is {\"result\": {\"verdict\": \"GREEN\" or "
    "\"RED\", \"verdictFields\": {<owner fields>}}}";
static const char ENVELOPE_NOT_OBJECT[] =
    "the answer must be a JSON object with one field, \"result\"";

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Length of JSON.stringify(v) in UTF-16 code units (compact, shortest numbers). */
static size_t utf16_string(const char *s, size_t n)
{
    size_t units = 2; /* the quotes */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f')
            units += 2;
        else if (c < 0x20)
            units += 6;
        else if (c >= 0xF0)
            units += 2; /* a surrogate pair */
        else if ((c & 0xC0) != 0x80)
            units += 1;
    }
    return units;
}

static size_t utf16_len(const json_t *v, unsigned depth)
{
    if (depth > 4096)
        return 0;
    char num[48];
    size_t n = 0;
    switch (json_typeof(v)) {
    case JSON_NULL:
        return 4;
    case JSON_TRUE:
        return 4;
    case JSON_FALSE:
        return 5;
    case JSON_INTEGER:
    case JSON_REAL:
        evd_js_number_text(v, num, sizeof(num));
        return strlen(num);
    case JSON_STRING:
        return utf16_string(json_string_value(v), json_string_length(v));
    case JSON_ARRAY:
        n = 2 + (json_array_size(v) > 0 ? json_array_size(v) - 1 : 0);
        for (size_t i = 0; i < json_array_size(v); i++)
            n += utf16_len(json_array_get(v, i), depth + 1);
        return n;
    case JSON_OBJECT: {
        n = 2 + (json_object_size(v) > 0 ? json_object_size(v) - 1 : 0);
        const char *k;
        size_t klen;
        json_t *m;
        json_object_keylen_foreach((json_t *)v, k, klen, m)
        {
            n += utf16_string(k, klen) + 1 + utf16_len(m, depth + 1);
        }
        return n;
    }
    }
    return n;
}

/* Validates `value` with validator vi; fills lines from its errors. Returns errors found. */
static size_t explain(const struct evd_so_contract *c, int vi, const json_t *value,
                      struct evd_so_failure *f)
{
    if (c->validator[vi] == NULL)
        return 0;
    struct evd_schema_error errs[EVD_SO_MAX_LINES];
    size_t n = evd_jsonschema_validate(c->validator[vi], value, errs, EVD_SO_MAX_LINES);
    size_t shown = n < EVD_SO_MAX_LINES ? n : EVD_SO_MAX_LINES;
    for (size_t i = 0; i < shown; i++) {
        struct evd_so_line *l = &f->lines[i];
        memset(l, 0, sizeof(*l));
        memcpy(l->path, errs[i].instance_path, sizeof(l->path));
        memcpy(l->message, errs[i].message, sizeof(l->message));
    }
    f->nlines = shown;
    return n;
}

/*
 * The verdict and owner fields from a wire answer: a new flat object in *flat, or a failure.
 * `doc` is the parsed answer (borrowed).
 */
static enum evd_so_result unwrap_verdict(const struct evd_so_wire *w, json_t *doc, json_t **flat,
                                         struct evd_so_failure *f)
{
    json_t *result = json_object_get(doc, "result");
    json_t *verdict = json_object_get(result, "verdict");
    int vi = -1;
    for (int v = SO_GREEN; v <= SO_RED; v++)
        if (json_is_string(verdict) &&
            strcmp(json_string_value(verdict), evd_so_verdict_names[v]) == 0)
            vi = v;
    if (!json_is_object(doc)) {
        add_line(f, "", ENVELOPE_NOT_OBJECT);
        return fail(f, CODE_VERDICT);
    }
    if (result == NULL) {
        add_line(f, "", ENVELOPE_VERDICT);
        const char *k;
        size_t klen;
        json_t *m;
        json_object_keylen_foreach(doc, k, klen, m)
        {
            add_field_line(f, k, klen);
        }
        return fail(f, CODE_VERDICT);
    }
    if (!json_is_object(result)) {
        add_line(f, "/result", "must be an object holding verdict and verdictFields");
        return fail(f, CODE_VERDICT);
    }
    if (vi < 0) {
        add_line(f, "/result/verdict", "must be \"GREEN\" or \"RED\"");
        return fail(f, CODE_VERDICT);
    }

    /* Envelope keys other than result / verdict / verdictFields are undeclared. */
    const char *k;
    size_t klen;
    json_t *m;
    json_object_keylen_foreach(doc, k, klen, m)
    {
        if (strcmp(k, "result") != 0)
            add_field_line(f, k, klen);
    }
    json_object_keylen_foreach(result, k, klen, m)
    {
        if (strcmp(k, "verdict") != 0 && strcmp(k, "verdictFields") != 0)
            add_field_line(f, k, klen);
    }
    if (f->nlines > 0)
        return fail(f, CODE_OWNER);

    json_t *fields = json_object_get(result, "verdictFields");
    json_t *decoded = NULL;
    if (fields != NULL) {
        bool nomem = false;
        struct evd_so_line line;
        decoded = evd_so_plan_decode(w->plan[vi], fields, &line, &nomem);
        if (decoded == NULL && nomem)
            return fail(f, CODE_NOMEM);
        if (decoded == NULL) {
            f->lines[0] = line;
            f->nlines = 1;
            return fail(f, CODE_OWNER);
        }
    }
    if (decoded != NULL && !json_is_object(decoded)) {
        json_decref(decoded);
        f->nlines = 1;
        memset(&f->lines[0], 0, sizeof(f->lines[0]));
        snprintf(f->lines[0].message, sizeof(f->lines[0].message),
                 "verdictFields must hold the owner fields as %s",
                 w->fallback ? "a JSON-encoded object" : "an object");
        return fail(f, CODE_OWNER);
    }
    json_t *out = json_object();
    if (out == NULL || json_object_set_new(out, "verdict", json_string(evd_so_verdict_names[vi]))) {
        json_decref(out);
        json_decref(decoded);
        return fail(f, CODE_NOMEM);
    }
    json_object_keylen_foreach(decoded, k, klen, m)
    {
        if (strcmp(k, "verdict") == 0) {
            /* Only a JSON-text fallback can carry it; it must agree with the discriminator. */
            if (!json_is_string(m) || strcmp(json_string_value(m), evd_so_verdict_names[vi]) != 0) {
                json_decref(out);
                json_decref(decoded);
                return fail(f, CODE_VERDICT);
            }
            continue;
        }
        if (json_object_setn(out, k, klen, m) != 0) {
            json_decref(out);
            json_decref(decoded);
            return fail(f, CODE_NOMEM);
        }
    }
    json_decref(decoded);
    *flat = out;
    return EVD_SO_VALID;
}

static enum evd_so_result check_verdict(const struct evd_so_contract *c, json_t *flat,
                                        struct evd_so_failure *f)
{
    json_t *verdict = json_object_get(flat, "verdict");
    int vi = -1;
    for (int v = SO_GREEN; v <= SO_RED; v++)
        if (json_is_string(verdict) &&
            strcmp(json_string_value(verdict), evd_so_verdict_names[v]) == 0)
            vi = v;
    if (!json_is_object(flat) || vi < 0)
        return fail(f, CODE_VERDICT);
    if (explain(c, vi, flat, f) > 0)
        return fail(f, CODE_OWNER);
    /* Declared keys only, whatever patternProperties or $ref in the owner schema allow. */
    json_t *props = json_object_get(c->branch[vi], "properties");
    const char *k;
    size_t klen;
    json_t *m;
    json_object_keylen_foreach(flat, k, klen, m)
    {
        if (json_object_getn(props, k, klen) == NULL)
            add_field_line(f, k, klen);
    }
    return f->nlines > 0 ? fail(f, CODE_OWNER) : EVD_SO_VALID;
}

enum evd_so_result evd_so_decode(const struct evd_so_contract *c, const struct evd_so_wire *w,
                                 const char *text, size_t len, json_t **out,
                                 struct evd_so_failure *f)
{
    memset(f, 0, sizeof(*f));
    *out = NULL;
    if (len > EVD_SO_MAX_TEXT_BYTES)
        return fail(f, CODE_OVER_SIZE_TEXT);
    size_t i = 0;
    while (i < len && is_space(text[i]))
        i++;
    if (i == len)
        return fail(f, CODE_EMPTY);
    json_error_t jerr;
    json_t *doc = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (doc == NULL)
        return fail(f, json_error_code(&jerr) == json_error_out_of_memory ? CODE_NOMEM
                                                                          : CODE_NOT_JSON);
    json_t *value = NULL;
    enum evd_so_result rc;
    if (c->verdict) {
        if (w != NULL) {
            rc = unwrap_verdict(w, doc, &value, f);
        } else {
            value = json_incref(doc);
            rc = EVD_SO_VALID;
        }
        if (rc == EVD_SO_VALID)
            rc = check_verdict(c, value, f);
    } else {
        rc = EVD_SO_VALID;
        if (w == NULL) {
            value = json_incref(doc);
        } else if (!json_is_object(doc)) {
            add_line(f, "", ENVELOPE_NOT_OBJECT);
            rc = fail(f, CODE_OUTPUT);
        } else if (json_object_size(doc) != 1 || json_object_get(doc, "result") == NULL) {
            if (json_object_get(doc, "result") == NULL)
                add_line(f, "", ENVELOPE_VALUE);
            const char *k;
            size_t klen;
            json_t *m;
            json_object_keylen_foreach(doc, k, klen, m)
            {
                if (strcmp(k, "result") != 0)
                    add_field_line(f, k, klen);
            }
            rc = fail(f, CODE_OUTPUT);
        } else {
            bool nomem = false;
            value = evd_so_plan_decode(w->plan[0], json_object_get(doc, "result"), &f->lines[0],
                                       &nomem);
            if (value == NULL) {
                f->nlines = nomem ? 0 : 1;
                rc = fail(f, nomem ? CODE_NOMEM : CODE_OUTPUT);
            }
        }
        if (rc == EVD_SO_VALID && explain(c, 0, value, f) > 0)
            rc = fail(f, CODE_OUTPUT);
    }
    json_decref(doc);
    if (rc == EVD_SO_VALID && utf16_len(value, 0) > EVD_SO_MAX_RESULT_UTF16) {
        f->nlines = 0;
        rc = fail(f, CODE_OVER_SIZE_RESULT);
    }
    if (rc != EVD_SO_VALID) {
        json_decref(value);
        return rc;
    }
    *out = value;
    return EVD_SO_VALID;
}

enum evd_so_result evd_so_decode_unenforced(const struct evd_so_contract *c,
                                            const struct evd_so_wire *w, const char *text,
                                            size_t len, json_t **out,
                                            struct evd_so_failure *failure)
{
    enum evd_so_result rc = evd_so_decode(c, w, text, len, out, failure);
    if (rc != EVD_SO_INVALID || w == NULL)
        return rc;
    /* The text as the owner value itself, validated against the owner schema. */
    struct evd_so_failure bare;
    json_t *value = NULL;
    if (evd_so_decode(c, NULL, text, len, &value, &bare) != EVD_SO_VALID)
        return rc; /* the wire answer's failure names the envelope to use */
    memset(failure, 0, sizeof(*failure));
    *out = value;
    return EVD_SO_VALID;
}

/* ---- the repair message ------------------------------------------------------------ */

static const char REPAIR_HEAD[] = "Your final response did not match the required schema: ";
static const char REPAIR_TAIL[] = "\nReturn only one JSON object matching the schema.";
static const char TRUNCATED[] = "\xe2\x80\xa6 (truncated)"; /* 13 characters */

/* Appends one explained line, bounded to EVD_SO_MAX_LINE_CHARS characters. */
static void append_line(struct evd_sbuf *out, const struct evd_so_line *l)
{
    char line[4 * 1024];
    struct evd_sbuf b;
    evd_sbuf_init(&b, line, sizeof(line));
    if (l->undeclared) {
        evd_sbuf_puts(&b, "- field ");
        evd_js_dump_string(&b, l->path, strlen(l->path));
        evd_sbuf_puts(&b, " is not declared.");
    } else {
        evd_sbuf_puts(&b, "- instancePath ");
        evd_js_dump_string(&b, l->path, strlen(l->path));
        evd_sbuf_puts(&b, ": ");
        evd_sbuf_puts(&b, l->message);
    }
    size_t len = b.len;
    if (evd_utf8_count(line, len) > EVD_SO_MAX_LINE_CHARS) {
        size_t keep_chars =
            EVD_SO_MAX_LINE_CHARS - evd_utf8_count(TRUNCATED, sizeof(TRUNCATED) - 1);
        size_t i = 0, chars = 0;
        while (i < len && chars < keep_chars) {
            i++;
            while (i < len && ((unsigned char)line[i] & 0xC0) == 0x80)
                i++;
            chars++;
        }
        len = i;
        evd_sbuf_puts(out, "\n");
        evd_sbuf_put(out, line, len);
        evd_sbuf_puts(out, TRUNCATED);
        return;
    }
    evd_sbuf_puts(out, "\n");
    evd_sbuf_put(out, line, len);
}

char *evd_so_repair_message(const struct evd_so_failure *f)
{
    /* Each line is at most 200 characters (800 bytes) plus a newline. */
    size_t cap =
        sizeof(REPAIR_HEAD) + sizeof(f->code) + EVD_SO_MAX_LINES * 802 + sizeof(REPAIR_TAIL) + 1;
    char *msg = malloc(cap);
    if (msg == NULL)
        return NULL;
    struct evd_sbuf b;
    evd_sbuf_init(&b, msg, cap);
    evd_sbuf_puts(&b, REPAIR_HEAD);
    evd_sbuf_puts(&b, f->code);
    size_t n = f->nlines < EVD_SO_MAX_LINES ? f->nlines : EVD_SO_MAX_LINES;
    for (size_t i = 0; i < n; i++)
        append_line(&b, &f->lines[i]);
    evd_sbuf_puts(&b, REPAIR_TAIL);
    return msg;
}
