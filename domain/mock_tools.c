/*
 * The checks of mocked tools and of a case's tool_results (domain/mock_tools.h). Pure:
 * the parameters are compiled with the schema layer's validator and freed at once.
 * Thread-safe; inputs are borrowed.
 */
#include "domain/mock_tools.h"

#include <string.h>

#include "common/json.h"
#include "schema/jsonschema.h"

static bool valid_name(const char *s)
{
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    size_t n = strlen(s);
    return n >= 1 && n <= EVD_MOCK_TOOL_NAME_MAX && strchr(alnum, s[0]) != NULL &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

static enum evd_code check_tool(json_t *tools, size_t i, struct evd_err *err)
{
    static const char *const known[] = {"name", "description", "parameters", NULL};
    json_t *t = json_array_get(tools, i);
    if (!json_is_object(t))
        return evd_err_set(err, EVD_EINVAL, "tools[%zu] must be an object", i);
    const char *unknown = evd_json_unknown_member(t, known);
    if (unknown != NULL)
        return evd_err_set(err, EVD_EINVAL, "tools[%zu].%s is not a known field", i, unknown);

    json_t *name = json_object_get(t, "name");
    if (name == NULL)
        return evd_err_set(err, EVD_EINVAL, "tools[%zu].name is required", i);
    if (!json_is_string(name))
        return evd_err_set(err, EVD_EINVAL, "tools[%zu].name must be a string", i);
    if (strlen(json_string_value(name)) != json_string_length(name) ||
        !valid_name(json_string_value(name)))
        return evd_err_set(err, EVD_EINVAL,
                           "tools[%zu].name must be 1-%d characters of letters, digits, '_', '.' "
                           "or '-', starting with a letter or digit",
                           i, EVD_MOCK_TOOL_NAME_MAX);
    for (size_t j = 0; j < i; j++) {
        if (strcmp(json_string_value(json_object_get(json_array_get(tools, j), "name")),
                   json_string_value(name)) == 0)
            return evd_err_set(err, EVD_EINVAL, "tools[%zu].name \"%s\" is declared twice", i,
                               json_string_value(name));
    }

    json_t *desc = json_object_get(t, "description");
    if (desc != NULL && !json_is_string(desc))
        return evd_err_set(err, EVD_EINVAL, "tools[%zu].description must be a string", i);
    if (json_string_length(desc) > EVD_MOCK_TOOL_DESCRIPTION_MAX)
        return evd_err_set(err, EVD_EINVAL, "tools[%zu].description must be at most %d bytes", i,
                           EVD_MOCK_TOOL_DESCRIPTION_MAX);

    json_t *params = json_object_get(t, "parameters");
    if (params == NULL)
        return evd_err_set(err, EVD_EINVAL, "tools[%zu].parameters is required", i);
    if (!json_is_object(params))
        return evd_err_set(err, EVD_EINVAL, "tools[%zu].parameters must be a JSON Schema object",
                           i);
    struct evd_err serr = {EVD_OK, ""};
    struct evd_jsonschema *compiled = evd_jsonschema_new(params, &serr);
    if (compiled == NULL) {
        if (serr.code == EVD_ENOMEM)
            return evd_err_set(err, EVD_ENOMEM, "out of memory compiling tools[%zu].parameters", i);
        return evd_err_set(err, EVD_EINVAL, "tools[%zu].parameters is not a valid JSON Schema: %s",
                           i, serr.msg);
    }
    evd_jsonschema_free(compiled);
    return EVD_OK;
}

enum evd_code evd_mock_tools_check(json_t *tools, struct evd_err *err)
{
    if (tools == NULL || json_is_null(tools))
        return EVD_OK;
    if (!json_is_array(tools))
        return evd_err_set(err, EVD_EINVAL, "tools must be an array");
    if (json_array_size(tools) > EVD_MOCK_TOOLS_MAX)
        return evd_err_set(err, EVD_EINVAL, "tools must have at most %d items", EVD_MOCK_TOOLS_MAX);
    for (size_t i = 0; i < json_array_size(tools); i++) {
        enum evd_code rc = check_tool(tools, i, err);
        if (rc != EVD_OK)
            return rc;
    }
    return EVD_OK;
}

bool evd_tool_results_is_when_list(json_t *value)
{
    size_t i;
    json_t *item;
    if (!json_is_array(value) || json_array_size(value) == 0)
        return false;
    json_array_foreach(value, i, item)
    {
        if (!json_is_object(item) || json_object_get(item, "when") == NULL)
            return false;
    }
    return true;
}

static bool declared(json_t *tools, const char *name)
{
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t)
    {
        const char *n = json_string_value(json_object_get(t, "name"));
        if (n != NULL && strcmp(n, name) == 0)
            return true;
    }
    return false;
}

enum evd_code evd_tool_results_check(json_t *tool_results, json_t *tools, const char *case_id,
                                     struct evd_err *err)
{
    static const char *const known[] = {"when", "result", NULL};
    const char *cid = case_id != NULL ? case_id : "";
    if (tool_results == NULL || json_is_null(tool_results))
        return EVD_OK;
    if (!json_is_object(tool_results))
        return evd_err_set(err, EVD_EINVAL, "case %s: tool_results must be an object", cid);
    const char *name;
    json_t *value;
    json_object_foreach(tool_results, name, value)
    {
        if (!declared(tools, name))
            return evd_err_set(err, EVD_EINVAL, "case %s: tool_results.%s names no declared tool",
                               cid, name);
        if (!evd_tool_results_is_when_list(value))
            continue; /* one value, or a sequence: any JSON */
        size_t i;
        json_t *item;
        json_array_foreach(value, i, item)
        {
            const char *unknown = evd_json_unknown_member(item, known);
            if (!json_is_object(json_object_get(item, "when")))
                return evd_err_set(err, EVD_EINVAL,
                                   "case %s: tool_results.%s[%zu].when must be an object", cid,
                                   name, i);
            if (json_object_get(item, "result") == NULL)
                return evd_err_set(err, EVD_EINVAL,
                                   "case %s: tool_results.%s[%zu].result is required", cid, name,
                                   i);
            if (unknown != NULL)
                return evd_err_set(err, EVD_EINVAL,
                                   "case %s: tool_results.%s[%zu].%s is not a known field", cid,
                                   name, i, unknown);
        }
    }
    return EVD_OK;
}

enum evd_code evd_mock_tools_check_registered(json_t *tools, json_t *registered,
                                              struct evd_err *err)
{
    size_t i, j;
    json_t *t, *reg;
    json_array_foreach(tools, i, t)
    {
        const char *name = json_string_value(json_object_get(t, "name"));
        if (name == NULL)
            continue;
        json_array_foreach(registered, j, reg)
        {
            const char *id = json_is_string(reg) ? json_string_value(reg)
                                                 : json_string_value(json_object_get(reg, "id"));
            if (id != NULL && strcmp(id, name) == 0)
                return evd_err_set(err, EVD_EINVAL, "tools[%zu]: %s is also a registered tool", i,
                                   name);
        }
    }
    return EVD_OK;
}
