/* The simulated user of an experiment; see simulator.h. */
#include "domain/simulator.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "domain/fields.h"
#include "domain/request.h"
#include "domain/template.h"
#include "domain/text.h"

static bool present(const json_t *v)
{
    return v != NULL && !json_is_null(v);
}

enum evd_code evd_simulator_request(const json_t *simulator, json_t **out, struct evd_err *err)
{
    static const char *const known[] = {"model", "instructions", "max_turns", "stop", NULL};
    *out = NULL;
    if (!present(simulator)) {
        *out = json_null();
        return EVD_OK;
    }
    if (!json_is_object(simulator))
        return evd_err_set(err, EVD_EINVAL, "simulator must be an object");
    enum evd_code rc = evd_fields_only(simulator, "simulator", known, err);
    if (rc != EVD_OK)
        return rc;
    const json_t *model = json_object_get(simulator, "model");
    if (!present(model))
        return evd_err_set(err, EVD_EINVAL, "simulator.model is required");
    json_t *m = NULL;
    if ((rc = evd_request_model(model, &m, err)) != EVD_OK) {
        evd_err_prefix(err, "model", "simulator.");
        return rc;
    }
    const json_t *ins = json_object_get(simulator, "instructions");
    const json_t *max = json_object_get(simulator, "max_turns");
    const json_t *stop = json_object_get(simulator, "stop");
    if (!present(ins))
        rc = evd_err_set(err, EVD_EINVAL, "simulator.instructions is required");
    else if (!json_is_string(ins))
        rc = evd_err_set(err, EVD_EINVAL, "simulator.instructions must be a string");
    else if (evd_text_is_blank(json_string_value(ins), json_string_length(ins)))
        rc = evd_err_set(err, EVD_EINVAL, "simulator.instructions cannot be empty");
    else if (present(max) && (!json_is_integer(max) || json_integer_value(max) < 1 ||
                              json_integer_value(max) > EVD_SIMULATOR_MAX_TURNS))
        rc = evd_err_set(err, EVD_EINVAL, "simulator.max_turns must be an integer between 1 and %d",
                         EVD_SIMULATOR_MAX_TURNS);
    else if (present(stop) && (!json_is_string(stop) || json_string_length(stop) == 0))
        rc = evd_err_set(err, EVD_EINVAL, "simulator.stop must be a non-empty string");
    if (rc != EVD_OK) {
        json_decref(m);
        return rc;
    }
    *out = json_pack("{s:o, s:O, s:I, s:s}", "model", m, "instructions", ins, "max_turns",
                     present(max) ? json_integer_value(max)
                                  : (json_int_t)EVD_SIMULATOR_DEFAULT_MAX_TURNS,
                     "stop", present(stop) ? json_string_value(stop) : EVD_SIMULATOR_DEFAULT_STOP);
    return *out != NULL ? EVD_OK : evd_err_set(err, EVD_ENOMEM, "out of memory");
}

enum evd_code evd_simulator_instructions(const json_t *simulator, const json_t *c, char **out,
                                         struct evd_err *err)
{
    *out = NULL;
    const json_t *ins = json_object_get(simulator, "instructions");
    struct evd_buf b = {0};
    enum evd_code rc =
        evd_template_render(json_string_value(ins), json_string_length(ins), c, &b, err);
    if (rc == EVD_OK && evd_buf_append(&b, "", 1) != 0)
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
    if (rc != EVD_OK) {
        evd_buf_free(&b);
        return rc;
    }
    *out = b.data; /* the buffer's bytes, NUL-terminated */
    return EVD_OK;
}

json_t *evd_simulator_view(const json_t *transcript)
{
    json_t *view = json_array();
    size_t i;
    const json_t *m;
    json_array_foreach(transcript, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        const json_t *content = json_object_get(m, "content");
        if (view == NULL || role == NULL || !json_is_string(content))
            continue;
        if (json_array_append_new(view, json_pack("{s:s, s:O}", "role",
                                                  strcmp(role, "user") == 0 ? "assistant" : "user",
                                                  "content", content)) != 0) {
            json_decref(view);
            return NULL;
        }
    }
    return view;
}

bool evd_simulator_stops(const json_t *simulator, const char *reply, size_t len)
{
    const char *stop = json_string_value(json_object_get(simulator, "stop"));
    if (stop == NULL)
        stop = EVD_SIMULATOR_DEFAULT_STOP;
    size_t n = strlen(stop);
    if (reply == NULL || n == 0 || n > len)
        return false;
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(reply + i, stop, n) == 0)
            return true;
    return false;
}
