/*
 * The eval function catalogue and its dispatch table. Every function is one row:
 * the REST function mirror (POST /v1/functions/{id}), the resource routes and the
 * iii adapter all call through evd_function_call, so a function behaves the same
 * whichever way it is reached. The catalogue (descriptions, schemas, metadata) is
 * the embedded contract/functions.json. Thread-safe.
 */
#ifndef EVD_HANDLERS_FUNCTIONS_H
#define EVD_HANDLERS_FUNCTIONS_H

#include "handlers/api.h"

/* A function: `request` is borrowed (a JSON object); on success *response is a new
 * reference (json_null() where the contract answers null). */
typedef enum evd_code (*evd_function_fn)(struct evd_ctx *ctx, json_t *request, json_t **response,
                                         struct evd_err *err);

struct evd_function {
    const char *name;
    evd_function_fn fn;
};

/* Registers the implementation of `name` (called at start-up, before threads). */
void evd_functions_register(const char *name, evd_function_fn fn);

/* Calls function `name`; EVD_ENOTFOUND when it is unknown. A NULL request is {}. */
enum evd_code evd_function_call(struct evd_ctx *ctx, const char *name, json_t *request,
                                json_t **response, struct evd_err *err);

/* The catalogue {functions:[{name, description, request_schema, response_schema,
 * metadata}], triggers:[...]}, borrowed and immutable for the process lifetime. */
const json_t *evd_functions_catalogue(void);

void evd_h_functions_list(struct evd_req *req, struct evd_resp *resp);
void evd_h_function_call(struct evd_req *req, struct evd_resp *resp);

#endif
