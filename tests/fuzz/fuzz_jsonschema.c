/*
 * Fuzz target: the JSON Schema compiler and validator (schema/jsonschema*.c) and the
 * structured-output contracts built on them (schema/so_*.c). The input is a JSON value,
 * the schema, followed by the instance text:
 *
 *     {"type":"object","required":["a"]} {"a":1}
 *
 * The schema is compiled (evd_jsonschema_new); when it compiles and the rest parses as
 * JSON, the instance is validated both ways (evd_jsonschema_validate and _is_valid must
 * agree). The schema then becomes a plain-value contract and, when it is an object, the
 * owner schema of a GREEN verdict; each contract is transformed into every provider's wire
 * format and the rest of the input, as a model's final answer, is decoded through them.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "schema/jsonschema.h"
#include "schema/structured.h"
#include "tests/fuzz/fuzz.h"

static void validate(json_t *schema, const char *rest, size_t rest_len)
{
    struct evd_err err = {0};
    struct evd_jsonschema *v = evd_jsonschema_new(schema, &err);
    if (v == NULL)
        return;
    json_error_t jerr;
    json_t *instance = json_loadb(rest, rest_len, JSON_DECODE_ANY, &jerr);
    if (instance != NULL) {
        struct evd_schema_error errs[4];
        size_t n = evd_jsonschema_validate(v, instance, errs, 4);
        if ((n == 0) != evd_jsonschema_is_valid(v, instance))
            abort(); /* the two entry points disagree */
        for (size_t i = 0; i < n && i < 4; i++)
            if (strnlen(errs[i].message, sizeof(errs[i].message)) == sizeof(errs[i].message) ||
                strnlen(errs[i].instance_path, sizeof(errs[i].instance_path)) ==
                    sizeof(errs[i].instance_path))
                abort(); /* an unterminated error field */
        json_decref(instance);
    }
    evd_jsonschema_free(v);
}

/* Decodes `text` as a final answer with and without each provider's wire format. */
static void decode_through(const struct evd_so_contract *c, const char *text, size_t len)
{
    for (int p = EVD_SO_RESPONSES; p <= EVD_SO_CHAT; p++) {
        struct evd_err err = {0};
        struct evd_so_wire *w = evd_so_wire_new(c, (enum evd_so_provider)p, &err);
        if (w == NULL)
            continue;
        json_t *format = evd_so_wire_request_format(w);
        json_decref(format);
        json_t *out = NULL;
        struct evd_so_failure failure;
        memset(&failure, 0, sizeof(failure));
        if (evd_so_decode(c, w, text, len, &out, &failure) == EVD_SO_VALID) {
            json_decref(out);
        } else {
            char *msg = evd_so_repair_message(&failure);
            free(msg);
        }
        evd_so_wire_free(w);
    }
    json_t *out = NULL;
    struct evd_so_failure failure;
    memset(&failure, 0, sizeof(failure));
    if (evd_so_decode(c, NULL, text, len, &out, &failure) == EVD_SO_VALID)
        json_decref(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {
        evd_log_set_level(EVD_LOG_ERROR + 1);
        quiet = 1;
    }
    json_error_t jerr;
    json_t *schema =
        json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK, &jerr);
    if (schema == NULL)
        return 0;
    size_t used = (size_t)jerr.position <= size ? (size_t)jerr.position : size;
    const char *rest = (const char *)data + used;
    size_t rest_len = size - used;

    validate(schema, rest, rest_len);

    struct evd_err err = {0};
    struct evd_so_contract *c = evd_so_value_new(schema, &err);
    if (c != NULL) {
        decode_through(c, rest, rest_len);
        evd_so_contract_free(c);
    }
    if (json_is_object(schema)) {
        c = evd_so_verdict_new(schema, NULL, &err);
        if (c != NULL) {
            decode_through(c, rest, rest_len);
            evd_so_contract_free(c);
        }
    }
    json_decref(schema);
    return 0;
}
