/*
 * Function catalogue and dispatch; see functions.h. The registration table is
 * written only before threads start and read-only afterwards; the catalogue is
 * parsed once under pthread_once and never mutated.
 */
#include "handlers/functions.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/assets.h"
#include "handlers/system.h"

#define MAX_FUNCTIONS 32

static struct evd_function table[MAX_FUNCTIONS];
static size_t ntable;

static pthread_once_t catalogue_once = PTHREAD_ONCE_INIT;
static json_t *catalogue;
static char *catalogue_text;
static size_t catalogue_len;

static void load_catalogue(void)
{
    const struct evd_asset *a = evd_asset_find(evd_contract, "functions.json");
    if (a == NULL)
        return;
    catalogue = json_loadb((const char *)a->data, a->len, 0, NULL);
    json_t *out = json_pack("{s:O, s:O}", "functions", json_object_get(catalogue, "functions"),
                            "triggers", json_object_get(catalogue, "triggers"));
    catalogue_text = evd_json_dump(out, &catalogue_len);
    json_decref(out);
}

const json_t *evd_functions_catalogue(void)
{
    pthread_once(&catalogue_once, load_catalogue);
    return catalogue;
}

void evd_functions_register(const char *name, evd_function_fn fn)
{
    for (size_t i = 0; i < ntable; i++)
        if (strcmp(table[i].name, name) == 0) {
            table[i].fn = fn;
            return;
        }
    if (ntable < MAX_FUNCTIONS)
        table[ntable++] = (struct evd_function){name, fn};
}

static enum evd_code ui_content(struct evd_ctx *ctx, json_t *request, json_t **response,
                                struct evd_err *err)
{
    (void)ctx;
    json_t *path = json_object_get(request, "path");
    if (path == NULL || !json_is_string(path))
        return evd_err_set(err, EVD_EINVAL, "path must be a string");
    json_t *out = evd_ui_content(json_string_value(path));
    if (out == NULL)
        return evd_err_set(err, EVD_ENOTFOUND, "no console asset at path %s",
                           json_string_value(path));
    *response = out;
    return EVD_OK;
}

static const struct evd_function *lookup(const char *name)
{
    for (size_t i = 0; i < ntable; i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    if (strcmp(name, "eval::ui-content") == 0) {
        static const struct evd_function builtin = {"eval::ui-content", ui_content};
        return &builtin;
    }
    return NULL;
}

enum evd_code evd_function_call(struct evd_ctx *ctx, const char *name, json_t *request,
                                json_t **response, struct evd_err *err)
{
    const struct evd_function *f = lookup(name);
    if (f == NULL)
        return evd_err_set(err, EVD_ENOTFOUND, "unknown function %s", name);
    json_t *empty = NULL;
    if (request == NULL)
        request = empty = json_object();
    if (!json_is_object(request)) {
        json_decref(empty);
        return evd_err_set(err, EVD_EINVAL, "request body must be a JSON object");
    }
    *response = NULL;
    enum evd_code rc = f->fn(ctx, request, response, err);
    json_decref(empty);
    if (rc == EVD_OK && *response == NULL)
        *response = json_null();
    return rc;
}

void evd_h_functions_list(struct evd_req *req, struct evd_resp *resp)
{
    (void)req;
    evd_functions_catalogue();
    if (catalogue_text == NULL) {
        evd_resp_problem(resp, EVD_EINTERNAL, "the function catalogue is not available");
        return;
    }
    evd_resp_raw(resp, 200, "application/json; charset=utf-8", catalogue_text, catalogue_len);
}

void evd_h_function_call(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    const char *name = evd_req_param(req, "function_id");
    if (evd_function_call(req->ctx, name, req->body, &out, &err) != EVD_OK) {
        evd_resp_error(resp, &err);
        return;
    }
    evd_resp_json(resp, 200, out);
}
