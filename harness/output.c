/*
 * The output contract of a run's final answer: text output is the final text itself; JSON
 * output (`output.type = "json"`) and GREEN/RED verdicts go through schema/structured.h,
 * which gives the provider's structured-output request fragment and decodes and validates
 * the answer (also a bare owner value when the provider does not enforce the format, as a
 * providers-file server may not). One struct evd_hx_output per run, owned by the run's
 * thread; a contract passed in is borrowed, one built from `output.schema` is owned.
 */
#include "harness/internal.h"

#include <string.h>

static bool wants_json(json_t *output)
{
    const char *type = json_string_value(json_object_get(output, "type"));
    return type != NULL && strcmp(type, "json") == 0;
}

static enum evd_so_provider so_provider(enum evd_provider_kind kind)
{
    switch (kind) {
    case EVD_KIND_OPENAI_RESPONSES:
        return EVD_SO_RESPONSES;
    case EVD_KIND_ANTHROPIC_MESSAGES:
        return EVD_SO_ANTHROPIC;
    case EVD_KIND_OPENAI_CHAT:
        return EVD_SO_CHAT;
    }
    return EVD_SO_CHAT;
}

enum evd_code evd_hx_output_open(struct evd_hx_output *o, const struct evd_provider *pr,
                                 json_t *output, const struct evd_so_contract *contract,
                                 struct evd_err *err)
{
    enum evd_provider_kind kind = evd_provider_kind(pr);
    memset(o, 0, sizeof(*o));
    o->unenforced = !evd_provider_enforces_format(pr);
    if (contract == NULL) {
        if (!wants_json(output))
            return EVD_OK; /* text output: no contract, no format */
        json_t *schema = json_object_get(output, "schema");
        if (json_is_null(schema))
            schema = NULL;
        if (schema != NULL && !json_is_object(schema) && !json_is_boolean(schema))
            return evd_err_set(err, EVD_EINVAL, "output.schema must be an object or a boolean");
        struct evd_err cerr = {EVD_OK, ""};
        o->owned = evd_so_value_new(schema, &cerr);
        if (o->owned == NULL) {
            const char *m = cerr.msg;
            if (strncmp(m, "output schema: ", 15) == 0)
                m += 15;
            return evd_err_set(err, cerr.code, "output.schema: %s", m);
        }
        o->contract = o->owned;
        if (schema == NULL)
            return EVD_OK; /* any JSON value: decoded from the plain text, no wire format */
    } else {
        o->contract = contract;
    }
    o->wire = evd_so_wire_new(o->contract, so_provider(kind), err);
    if (o->wire == NULL)
        goto fail;
    o->format = evd_so_wire_request_format(o->wire);
    if (o->format == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory building the output format");
        goto fail;
    }
    return EVD_OK;
fail:
    evd_hx_output_close(o);
    return err != NULL ? err->code : EVD_ENOMEM;
}

void evd_hx_output_close(struct evd_hx_output *o)
{
    if (o == NULL)
        return;
    json_decref(o->format);
    evd_so_wire_free(o->wire);
    evd_so_contract_free(o->owned);
    memset(o, 0, sizeof(*o));
}

enum evd_so_result evd_hx_output_decode(const struct evd_hx_output *o, const char *text,
                                        json_t **out, struct evd_so_failure *failure)
{
    memset(failure, 0, sizeof(*failure));
    *out = NULL;
    if (o->contract == NULL) {
        /* Provider texts come from parsed JSON, so they are valid UTF-8. */
        *out = json_string(text);
        if (*out != NULL)
            return EVD_SO_VALID;
        snprintf(failure->code, sizeof(failure->code), "out of memory decoding the final answer");
        return EVD_SO_NOMEM;
    }
    if (o->unenforced)
        return evd_so_decode_unenforced(o->contract, o->wire, text, strlen(text), out, failure);
    return evd_so_decode(o->contract, o->wire, text, strlen(text), out, failure);
}
