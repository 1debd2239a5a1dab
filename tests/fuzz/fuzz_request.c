/*
 * Fuzz target: the decoding of every route body. The first input byte picks the decoder
 * (modulo the table below); the rest is the body, parsed as server/http.c parses it
 * (JSON_DECODE_ANY | JSON_REJECT_DUPLICATES) and handed to what the handler calls before
 * it touches the database. A successful decode is followed by what the handler does next
 * with the decoded value without a database (the view of a normalized request, the output
 * schema and review checks of a start, the built-in evaluators), so those see fuzzed but
 * well-formed requests too.
 *
 * Decoders (byte % 16):
 *   0  POST /v1/evaluations, eval::start    evd_request_start and the start's checks
 *   1  a stored normalized request          evd_request_check_normalized, _view, _rerun
 *   2  eval::list, GET lists                evd_request_list
 *   3  eval::status/result/cancel/delete    evd_request_evaluation_id
 *   4  eval::rerun                          evd_request_rerun_args
 *   5  eval::step                           evd_request_step
 *   6  eval::on-turn-completed              evd_request_wake
 *   7  eval::sweep                          evd_request_sweep
 *   8  POST /v1/evaluators/{name}          evd_request_evaluator_input, evd_evaluator_run
 *   9  POST /v1/sessions                    evd_session_request_decode
 *  10  POST /v1/sessions/{id}/messages      evd_session_message_decode
 *  11  PUT /v1/tools/{id}                   evd_tools_decode
 *  12  POST /v1/subscriptions               evd_webhooks_subscribe (no key: stops after decode)
 *  13  agent review arguments               evd_engine_review_check
 *  14  an evaluator's answer                evd_evaluator_check_response
 *  15  session pieces                       evd_request_model, _functions_or_default, _output
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "domain/evaluators.h"
#include "domain/request.h"
#include "domain/review.h"
#include "domain/session.h"
#include "engine/internal.h"
#include "engine/tools.h"
#include "harness/providers.h"
#include "schema/structured.h"
#include "store/tools.h"
#include "tests/fuzz/fuzz.h"
#include "webhooks/webhooks.h"

static struct evd_providers *providers;
static struct evd_webhooks *webhooks;
/* FUZZ_VERBOSE=1 prints each decoder's answer (to check what a seed reaches). */
static int verbose;

/* A fixed environment: both hosted providers with a key, nothing read from disk. */
static const char *fuzz_env(void *ctx, const char *name)
{
    (void)ctx;
    if (strcmp(name, "OPENAI_API_KEY") == 0)
        return "sk-fuzz-openai";
    if (strcmp(name, "ANTHROPIC_API_KEY") == 0)
        return "sk-fuzz-anthropic";
    return NULL;
}

static void setup(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    verbose = getenv("FUZZ_VERBOSE") != NULL;
    evd_log_set_level(EVD_LOG_ERROR + 1);
    struct evd_err err = {0};
    if (evd_providers_load(fuzz_env, NULL, &providers, &err) != EVD_OK)
        abort();
    /* No key and no worker: evd_webhooks_subscribe decodes, then answers EUNAVAIL. */
    struct evd_webhooks_options wo = {0};
    wo.allow_hosts = "127.0.0.1,hooks.example.com,*.example.org";
    if ((webhooks = evd_webhooks_start(&wo, &err)) == NULL)
        abort();
}

/* What eval::start does with a normalized request before it is written. */
static void after_start(json_t *normalized)
{
    struct evd_err err = {0};
    struct evd_request_view view;
    if (evd_request_view(normalized, &view, &err) != EVD_OK)
        abort(); /* a request start normalized must pass its own check */
    struct evd_resolved_model rm;
    evd_providers_resolve(providers, (json_t *)view.model, &rm, &err);
    json_t *schema = json_object_get(view.output, "schema");
    if (schema != NULL && !json_is_null(schema)) {
        struct evd_so_contract *c = evd_so_value_new(schema, &err);
        evd_so_contract_free(c);
    }
    if (view.evaluator_function_id != NULL &&
        evd_evaluator_is_agent_review(view.evaluator_function_id))
        evd_engine_review_check(providers, view.evaluator_arguments, &err);
    json_t *rerun = evd_request_rerun(normalized, "eval_fuzz", true);
    if (rerun != NULL && evd_request_check_normalized(rerun, &err) != EVD_OK)
        abort(); /* a rerun of a valid request is valid */
    json_decref(rerun);
}

static void decode(unsigned which, json_t *body)
{
    struct evd_err err = {EVD_OK, ""};
    enum evd_code rc = EVD_OK;
    const char *id = NULL;
    bool flag = false;
    switch (which) {
    case 0: {
        json_t *normalized = NULL;
        uint32_t concurrency = 0;
        rc = evd_request_start(body, EVD_REQUEST_DEFAULT_MAX_RUNS, &normalized, &concurrency, &err);
        if (rc == EVD_OK) {
            if (concurrency < 1 || concurrency > EVD_REQUEST_MAX_CONCURRENCY)
                abort();
            after_start(normalized);
            json_decref(normalized);
        } else if (normalized != NULL) {
            abort(); /* documented: NULL on error */
        }
        break;
    }
    case 1: {
        struct evd_request_view view;
        rc = evd_request_view(body, &view, &err);
        if (rc == EVD_OK) {
            json_t *rerun = evd_request_rerun(body, "eval_fuzz", false);
            json_decref(rerun);
        }
        break;
    }
    case 2: {
        uint32_t limit = 0;
        rc = evd_request_list(body, &limit, &err);
        if (rc == EVD_OK && (limit < 1 || limit > EVD_REQUEST_MAX_LIST_LIMIT))
            abort();
        break;
    }
    case 3:
        rc = evd_request_evaluation_id(body, &id, &err);
        break;
    case 4:
        rc = evd_request_rerun_args(body, &id, &flag, &err);
        break;
    case 5: {
        uint64_t step = 0;
        rc = evd_request_step(body, &id, &step, &err);
        break;
    }
    case 6:
        rc = evd_request_wake(body, &id, &flag, &err);
        break;
    case 7:
        rc = evd_request_sweep(body, &err);
        break;
    case 8: {
        struct evd_evaluator_input in;
        rc = evd_request_evaluator_input(body, &in, &err);
        if (rc == EVD_OK) {
            static const char *const ids[] = {EVD_EVALUATOR_EXACT, EVD_EVALUATOR_NORMALIZED_TEXT};
            for (size_t i = 0; i < 2; i++) {
                json_t *out = NULL;
                struct evd_err e2 = {EVD_OK, ""};
                if (evd_evaluator_run(ids[i], &in, &out, &e2) == EVD_OK) {
                    json_t *norm = NULL;
                    if (evd_evaluator_check_response(out, &norm, &e2) != EVD_OK)
                        abort(); /* a built-in answer must pass the answer check */
                    json_decref(norm);
                }
                json_decref(out);
            }
            char *prompt = evd_review_prompt(&in);
            free(prompt);
        }
        break;
    }
    case 9: {
        struct evd_session_request c;
        memset(&c, 0, sizeof(c));
        rc = evd_session_request_decode(body, &c, &err);
        if (rc == EVD_OK) {
            json_t *limits = evd_session_harness_limits(c.config);
            json_decref(limits);
        }
        evd_session_request_clear(&c);
        break;
    }
    case 10:
        rc = evd_session_message_decode(body, &id, &err);
        break;
    case 11: {
        struct evd_tool t;
        rc = evd_tools_decode("fuzz.tool", body, &t, &err);
        break;
    }
    case 12: {
        json_t *response = NULL;
        rc = evd_webhooks_subscribe(webhooks, body, &response, &err);
        if (rc == EVD_OK)
            abort(); /* without a key nothing can be created */
        json_decref(response);
        break;
    }
    case 13:
        rc = evd_engine_review_check(providers, body, &err);
        break;
    case 14: {
        json_t *norm = NULL;
        rc = evd_evaluator_check_response(body, &norm, &err);
        json_decref(norm);
        break;
    }
    case 15: {
        json_t *out = NULL;
        if ((rc = evd_request_model(json_object_get(body, "model"), &out, &err)) == EVD_OK)
            json_decref(out);
        out = NULL;
        if (rc == EVD_OK && (rc = evd_request_functions_or_default(
                                 json_object_get(body, "functions"), &out, &err)) == EVD_OK)
            json_decref(out);
        out = NULL;
        if (rc == EVD_OK &&
            (rc = evd_request_output(json_object_get(body, "output"), &out, &err)) == EVD_OK)
            json_decref(out);
        break;
    }
    }
    /* Bad input is refused with a message: the code says so and the text is not empty. */
    if (rc != EVD_OK && (err.code != rc || err.msg[0] == '\0'))
        abort();
    if (verbose)
        fprintf(stderr, "fuzz_request: decoder %u: %s\n", which, err.msg[0] ? err.msg : "ok");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    if (size < 1)
        return 0;
    json_error_t jerr;
    json_t *body = json_loadb((const char *)data + 1, size - 1,
                              JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
    if (body == NULL)
        return 0;
    decode(data[0] % 16u, body);
    json_decref(body);
    return 0;
}
