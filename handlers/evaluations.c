/*
 * Evaluation resources over the engine; see evaluations.h. The resource routes
 * and the function mirror call the same engine functions; the resources add HTTP
 * semantics (202 + Location, 404 for unknown ids) and fields beyond the contract.
 * Server-Sent Events stream from the engine's change subscriptions and read the
 * evaluation through the engine (engine/evaluation_events.h).
 */
#include "handlers/evaluations.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "engine/engine.h"
#include "engine/evaluation_events.h"
#include "handlers/functions.h"
#include "handlers/sse.h"

/* ---- function mirror ----------------------------------------------------------------- */

#define MIRROR(name, call)                                                                         \
    static enum evd_code name(struct evd_ctx *ctx, json_t *request, json_t **response,          \
                              struct evd_err *err)                                               \
    {                                                                                              \
        return call;                                                                               \
    }

MIRROR(fn_start, evd_eval_start(ctx->engine, request, response, err))
MIRROR(fn_list, evd_eval_list(ctx->engine, request, NULL, false, response, err))
MIRROR(fn_status, evd_eval_status(ctx->engine, request, response, err))
MIRROR(fn_result, evd_eval_result(ctx->engine, request, false, response, err))
MIRROR(fn_cancel, evd_eval_cancel(ctx->engine, request, response, err))
MIRROR(fn_delete, evd_eval_delete(ctx->engine, request, response, err))
MIRROR(fn_rerun, evd_eval_rerun(ctx->engine, request, response, err))
MIRROR(fn_step, evd_eval_step(ctx->engine, request, response, err))
MIRROR(fn_sweep, evd_eval_sweep(ctx->engine, request, response, err))
MIRROR(fn_wake, evd_eval_wake(ctx->engine, request, response, err))
MIRROR(fn_exact, evd_eval_assert(ctx->engine, "eval::assert::exact", request, response, err))
MIRROR(fn_normalized,
       evd_eval_assert(ctx->engine, "eval::assert::normalized_text", request, response, err))
MIRROR(fn_trajectory,
       evd_eval_assert(ctx->engine, "eval::assert::trajectory", request, response, err))

void evd_evaluations_register(void)
{
    evd_functions_register("eval::start", fn_start);
    evd_functions_register("eval::list", fn_list);
    evd_functions_register("eval::status", fn_status);
    evd_functions_register("eval::result", fn_result);
    evd_functions_register("eval::cancel", fn_cancel);
    evd_functions_register("eval::delete", fn_delete);
    evd_functions_register("eval::rerun", fn_rerun);
    evd_functions_register("eval::step", fn_step);
    evd_functions_register("eval::sweep", fn_sweep);
    evd_functions_register("eval::on-turn-completed", fn_wake);
    evd_functions_register("eval::assert::exact", fn_exact);
    evd_functions_register("eval::assert::normalized_text", fn_normalized);
    evd_functions_register("eval::assert::trajectory", fn_trajectory);
}

/* ---- resources ------------------------------------------------------------------------ */

static json_t *id_request(const struct evd_req *req)
{
    return json_pack("{s:s}", "evaluation_id", evd_req_param(req, "id"));
}

static bool require_object(const struct evd_req *req, struct evd_resp *resp)
{
    if (req->body != NULL && json_is_object(req->body))
        return true;
    evd_resp_problem(resp, EVD_EINVAL, "request body must be a JSON object");
    return false;
}

static void accepted(struct evd_resp *resp, json_t *out)
{
    char loc[128];
    snprintf(loc, sizeof(loc), "/v1/evaluations/%s",
             json_string_value(json_object_get(out, "evaluation_id")));
    evd_resp_header(resp, "Location", loc);
    evd_resp_json(resp, 202, out);
}

/* The answer of a deferred start (evd_eval_started_fn), on the engine's starter thread. */
static void started(void *arg, enum evd_code rc, json_t *out, const struct evd_err *err)
{
    struct evd_resp resp = {0};
    if (rc == EVD_OK)
        accepted(&resp, out);
    else
        evd_resp_error(&resp, err);
    evd_deferred_answer(arg, &resp);
}

/* The engine writes starts in batches: the answer waits for the batch's commit without
 * holding this thread, which meanwhile reads the next request. */
void evd_h_eval_create(struct evd_req *req, struct evd_resp *resp)
{
    if (!require_object(req, resp))
        return;
    struct evd_err err = {0};
    json_t *out = NULL;
    struct evd_deferred *later = evd_req_defer(req, resp);
    if (later != NULL) {
        if (evd_eval_start_async(req->ctx->engine, req->body, started, later, &err) != EVD_OK)
            started(later, err.code, NULL, &err);
        return;
    }
    if (evd_eval_start(req->ctx->engine, req->body, &out, &err) != EVD_OK) {
        evd_resp_error(resp, &err);
        return;
    }
    accepted(resp, out);
}

void evd_h_eval_list(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *request = evd_req_list_request(req, resp);
    if (request == NULL)
        return;
    json_t *out = NULL;
    enum evd_code rc = evd_eval_list(req->ctx->engine, request, evd_req_query(req, "before"),
                                     true, &out, &err);
    json_decref(request);
    if (rc != EVD_OK)
        evd_resp_error(resp, &err);
    else
        evd_resp_json(resp, 200, out);
}

typedef enum evd_code (*id_call)(struct evd_engine *, json_t *, json_t **, struct evd_err *);

static enum evd_code result_extras(struct evd_engine *e, json_t *r, json_t **o, struct evd_err *x)
{
    return evd_eval_result(e, r, true, o, x);
}

/* Calls an id-taking engine function; a JSON null answer becomes 404. */
static void by_id(struct evd_req *req, struct evd_resp *resp, id_call call, int ok_status)
{
    struct evd_err err = {0};
    json_t *request = id_request(req);
    json_t *out = NULL;
    enum evd_code rc = call(req->ctx->engine, request, &out, &err);
    json_decref(request);
    if (rc != EVD_OK) {
        evd_resp_error(resp, &err);
    } else if (out == NULL || json_is_null(out)) {
        json_decref(out);
        char detail[128];
        snprintf(detail, sizeof(detail), "evaluation not found: %s", evd_req_param(req, "id"));
        evd_resp_problem(resp, EVD_ENOTFOUND, detail);
    } else {
        evd_resp_json(resp, ok_status, out);
    }
}

void evd_h_eval_get(struct evd_req *req, struct evd_resp *resp)
{
    by_id(req, resp, result_extras, 200);
}

void evd_h_eval_status(struct evd_req *req, struct evd_resp *resp)
{
    by_id(req, resp, evd_eval_status, 200);
}

void evd_h_eval_cancel(struct evd_req *req, struct evd_resp *resp)
{
    by_id(req, resp, evd_eval_cancel, 200);
}

void evd_h_eval_delete(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *request = id_request(req);
    json_t *out = NULL;
    enum evd_code rc = evd_eval_delete(req->ctx->engine, request, &out, &err);
    json_decref(request);
    if (rc != EVD_OK) {
        evd_resp_error(resp, &err);
    } else if (!json_is_true(json_object_get(out, "deleted"))) {
        json_decref(out);
        char detail[128];
        snprintf(detail, sizeof(detail), "evaluation not found: %s", evd_req_param(req, "id"));
        evd_resp_problem(resp, EVD_ENOTFOUND, detail);
    } else {
        evd_resp_json(resp, 200, out);
    }
}

void evd_h_eval_rerun(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    if (req->body != NULL && !json_is_object(req->body)) {
        evd_resp_problem(resp, EVD_EINVAL, "request body must be a JSON object");
        return;
    }
    json_t *request = req->body ? json_deep_copy(req->body) : json_object();
    json_t *reverse = json_object_get(request, "reverse_order");
    size_t known = reverse ? 1 : 0;
    if (json_object_size(request) > known) {
        json_decref(request);
        evd_resp_problem(resp, EVD_EINVAL, "only reverse_order may be given to a rerun");
        return;
    }
    json_object_set_new(request, "evaluation_id", json_string(evd_req_param(req, "id")));
    json_t *out = NULL;
    enum evd_code rc = evd_eval_rerun(req->ctx->engine, request, &out, &err);
    json_decref(request);
    if (rc != EVD_OK)
        evd_resp_error(resp, &err);
    else
        accepted(resp, out);
}

void evd_h_eval_rescore(struct evd_req *req, struct evd_resp *resp)
{
    if (!require_object(req, resp))
        return;
    struct evd_err err = {0};
    json_t *out = NULL;
    if (evd_eval_rescore(req->ctx->engine, evd_req_param(req, "id"), req->body, &out, &err) !=
        EVD_OK)
        evd_resp_error(resp, &err);
    else
        accepted(resp, out);
}

static void evaluator(struct evd_req *req, struct evd_resp *resp, const char *fid)
{
    if (!require_object(req, resp))
        return;
    struct evd_err err = {0};
    json_t *out = NULL;
    if (evd_eval_assert(req->ctx->engine, fid, req->body, &out, &err) != EVD_OK)
        evd_resp_error(resp, &err);
    else
        evd_resp_json(resp, 200, out);
}

void evd_h_evaluator_exact(struct evd_req *req, struct evd_resp *resp)
{
    evaluator(req, resp, "eval::assert::exact");
}

void evd_h_evaluator_normalized(struct evd_req *req, struct evd_resp *resp)
{
    evaluator(req, resp, "eval::assert::normalized_text");
}

void evd_h_evaluator_trajectory(struct evd_req *req, struct evd_resp *resp)
{
    evaluator(req, resp, "eval::assert::trajectory");
}

/* The REST shape of the catalogue names each model `id` (the value for model.model). */
void evd_h_models(struct evd_req *req, struct evd_resp *resp)
{
    json_t *out = evd_engine_models(req->ctx->engine);
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(out, "models"), i, m)
    {
        json_t *id = json_object_get(m, "model");
        if (id != NULL) {
            json_object_set(m, "id", id);
            json_object_del(m, "model");
        }
    }
    evd_resp_json(resp, 200, out);
}

/* ---- Server-Sent Events --------------------------------------------------------------- */

struct sse {
    struct evd_sse base; /* first: the stream callbacks get a struct sse */
    char id[64];
    char (*seen)[40]; /* per position: last status sent */
    size_t nseen;
};

/* Reads the evaluation and queues the events for what changed since last time. */
static void sse_emit(struct evd_sse *base)
{
    struct sse *s = (struct sse *)base;
    struct evd_err err = {0};
    json_t *status = NULL, *runs = NULL;
    if (evd_eval_events_read(base->engine, s->id, &status, &runs, &err) != EVD_OK) {
        if (err.code == EVD_ENOTFOUND) {
            evd_buf_printf(&base->pending, "event: deleted\ndata: {\"evaluation_id\":\"%s\"}\n\n",
                           s->id);
            base->done = true;
        } else {
            evd_buf_printf(&base->pending, ": database unavailable, retrying\n\n");
            base->retry = true;
        }
        return;
    }
    size_t n = json_array_size(runs);
    if (s->seen == NULL && n > 0) {
        s->seen = calloc(n, sizeof(*s->seen));
        s->nseen = s->seen ? n : 0;
    }
    for (size_t i = 0; i < n && i < s->nseen; i++) {
        json_t *run = json_array_get(runs, i);
        char key[40];
        snprintf(key, sizeof(key), "%s:%lld", json_string_value(json_object_get(run, "status")),
                 (long long)json_integer_value(json_object_get(run, "started_at")));
        if (strcmp(key, s->seen[i]) == 0)
            continue;
        memcpy(s->seen[i], key, sizeof(key));
        if (strncmp(key, "pending:", 8) != 0 || base->started)
            evd_sse_event(base, "run", run);
    }
    evd_sse_event(base, "status", status);
    const char *st = json_string_value(json_object_get(status, "status"));
    if (st && (!strcmp(st, "completed") || !strcmp(st, "failed") || !strcmp(st, "cancelled")))
        base->done = true;
    json_decref(status);
    json_decref(runs);
}

static void sse_free(void *cls)
{
    struct sse *s = cls;
    evd_sse_release(&s->base);
    free(s->seen);
    free(s);
}

void evd_h_eval_events(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    const char *id = evd_req_param(req, "id");
    /* Refuse unknown ids with a plain 404 before switching to a stream. */
    json_t *request = id_request(req), *st = NULL;
    enum evd_code rc = evd_eval_status(req->ctx->engine, request, &st, &err);
    json_decref(request);
    if (rc != EVD_OK) {
        evd_resp_error(resp, &err);
        return;
    }
    bool unknown = json_is_null(st);
    json_decref(st);
    if (unknown) {
        char detail[128];
        snprintf(detail, sizeof(detail), "evaluation not found: %s", id);
        evd_resp_problem(resp, EVD_ENOTFOUND, detail);
        return;
    }
    struct sse *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        evd_resp_problem(resp, EVD_ENOMEM, "out of memory");
        return;
    }
    s->base.engine = req->ctx->engine;
    s->base.hub = req->ctx->sse;
    s->base.emit = sse_emit;
    snprintf(s->id, sizeof(s->id), "%s", id);
    /* Subscribe before the first read so no change can slip between them. */
    s->base.sub = evd_engine_subscribe(s->base.engine, s->id);
    if (s->base.sub == NULL) {
        free(s);
        evd_resp_problem(resp, EVD_ENOMEM, "out of memory");
        return;
    }
    evd_sse_start(resp, &s->base, sse_free);
}
