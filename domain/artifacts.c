/*
 * Artifact hashes of a normalized request (see artifacts.h). Pure; thread-safe.
 */
#include "domain/artifacts.h"

#include "common/util.h"
#include "domain/canonical.h"
#include "domain/fields.h"

static int set_string_hash(json_t *obj, const char *key, const json_t *s)
{
    char hex[65];
    evd_sha256_hex(json_string_value(s), json_string_length(s), hex);
    return json_object_set_new(obj, key, json_string(hex));
}

static int set_json_hash(json_t *obj, const char *key, const json_t *v)
{
    char hex[65];
    if (v == NULL || evd_canonical_sha256(v, hex) != 0)
        return -1;
    return json_object_set_new(obj, key, json_string(hex));
}

json_t *evd_artifacts_variant(const json_t *variant)
{
    json_t *a = json_object();
    const json_t *label = json_object_get(variant, "label");
    const json_t *prompt = json_object_get(variant, "prompt");
    const json_t *system = json_object_get(variant, "system_prompt");
    int rc = a == NULL || !json_is_string(prompt) ? -1 : 0;
    if (json_is_string(label))
        rc |= evd_fields_set_copy(a, "label", label);
    if (rc == 0)
        rc |= set_string_hash(a, "prompt_sha256", prompt);
    if (rc == 0 && json_is_string(system))
        rc |= set_string_hash(a, "system_prompt_sha256", system);
    if (rc != 0) {
        json_decref(a);
        return NULL;
    }
    return a;
}

json_t *evd_artifacts_shared(const json_t *request)
{
    json_t *a = json_object();
    int rc = a == NULL ? -1 : 0;
    rc |= set_json_hash(a, "model_sha256", json_object_get(request, "model"));
    rc |= set_json_hash(a, "function_policy_sha256", json_object_get(request, "functions"));
    rc |= set_json_hash(a, "limits_sha256", json_object_get(request, "limits"));
    rc |= set_json_hash(a, "output_sha256", json_object_get(request, "output"));
    if (rc != 0) {
        json_decref(a);
        return NULL;
    }
    return a;
}

json_t *evd_artifacts_evaluator(const json_t *evaluator)
{
    json_t *a = json_object();
    json_t *empty = NULL;
    const json_t *args = json_object_get(evaluator, "arguments");
    if (args == NULL)
        args = empty = json_object();
    int rc = a == NULL ? -1 : 0;
    rc |= evd_fields_set_copy(a, "function_id", json_object_get(evaluator, "function_id"));
    rc |= set_json_hash(a, "arguments_sha256", args);
    json_decref(empty);
    if (rc != 0) {
        json_decref(a);
        return NULL;
    }
    return a;
}
