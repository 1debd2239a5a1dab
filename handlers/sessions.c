/*
 * Session resources over engine/sessions.h; see sessions.h. The resources add HTTP
 * semantics (201/202 + Location, 404, 409); GET /v1/sessions/compare and the mirror's
 * eval::compare-sessions call the same engine function. The two event streams block in
 * their read callback on an engine change subscription (no polling): a session stream
 * ends once no turn is in flight, a comparison stream once every session is terminal.
 */
#include "handlers/sessions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "engine/engine.h"
#include "engine/sessions.h"
#include "handlers/functions.h"
#include "handlers/sse.h"

#define COMPARE_MIN_INTERVAL_MS 200 /* coalesces bursts of per-generation snapshots */

static enum evd_code fn_compare(struct evd_ctx *ctx, json_t *request, json_t **response,
                                struct evd_err *err)
{
    return evd_sessions_compare(ctx->engine, request, response, err);
}

void evd_sessions_register(void)
{
    evd_functions_register("eval::compare-sessions", fn_compare);
}

static void location(struct evd_resp *resp, const char *id)
{
    char loc[160];
    snprintf(loc, sizeof(loc), "/v1/sessions/%s", id);
    evd_resp_header(resp, "Location", loc);
}

void evd_h_session_create(struct evd_req *req, struct evd_resp *resp)
{
    if (req->body == NULL || !json_is_object(req->body)) {
        evd_resp_problem(resp, EVD_EINVAL, "request body must be a JSON object");
        return;
    }
    struct evd_err err = {0};
    json_t *out = NULL;
    bool started = false;
    if (evd_session_create(req->ctx->engine, req->body, &out, &started, &err) != EVD_OK) {
        evd_resp_error(resp, &err);
        return;
    }
    location(resp, json_string_value(json_object_get(out, "session_id")));
    evd_resp_json(resp, started ? 202 : 201, out);
}

void evd_h_session_list(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *request = evd_req_list_request(req, resp);
    if (request == NULL)
        return;
    json_t *out = NULL;
    enum evd_code rc =
        evd_session_list(req->ctx->engine, request, evd_req_query(req, "before"), &out, &err);
    json_decref(request);
    if (rc != EVD_OK)
        evd_resp_error(resp, &err);
    else
        evd_resp_json(resp, 200, out);
}

void evd_h_session_get(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    if (evd_session_get(req->ctx->engine, evd_req_param(req, "id"), true, &out, &err) != EVD_OK)
        evd_resp_error(resp, &err);
    else
        evd_resp_json(resp, 200, out);
}

void evd_h_session_delete(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    if (evd_session_delete(req->ctx->engine, evd_req_param(req, "id"), &out, &err) != EVD_OK)
        evd_resp_error(resp, &err);
    else
        evd_resp_json(resp, 200, out);
}

void evd_h_session_message(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    const char *id = evd_req_param(req, "id");
    if (req->body == NULL || !json_is_object(req->body)) {
        evd_resp_problem(resp, EVD_EINVAL, "request body must be a JSON object");
        return;
    }
    if (evd_session_send(req->ctx->engine, id, req->body, &out, &err) != EVD_OK) {
        evd_resp_error(resp, &err);
        return;
    }
    location(resp, id);
    evd_resp_json(resp, 202, out);
}

void evd_h_session_cancel(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    if (evd_session_cancel(req->ctx->engine, evd_req_param(req, "id"), &out, &err) != EVD_OK)
        evd_resp_error(resp, &err);
    else
        evd_resp_json(resp, 200, out);
}

/*
 * The compare request of the query string: ids=a,b,c (empty pieces kept, so that they are
 * reported as empty values) and baseline (default: the first id). New reference.
 */
static json_t *compare_request(const struct evd_req *req)
{
    const char *ids = evd_req_query(req, "ids");
    const char *baseline = evd_req_query(req, "baseline");
    json_t *list = json_array();
    if (list == NULL)
        return NULL;
    if (ids != NULL) {
        const char *p = ids;
        for (;;) {
            size_t n = strcspn(p, ",");
            json_array_append_new(list, json_stringn(p, n));
            if (p[n] == '\0')
                break;
            p += n + 1;
        }
    }
    if (baseline == NULL)
        baseline = json_array_size(list) ? json_string_value(json_array_get(list, 0)) : "";
    return json_pack("{s:o, s:s}", "session_ids", list, "baseline_session_id",
                     baseline ? baseline : "");
}

void evd_h_sessions_compare(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *request = compare_request(req), *out = NULL;
    if (request == NULL) {
        evd_resp_problem(resp, EVD_ENOMEM, "out of memory");
        return;
    }
    if (evd_sessions_compare(req->ctx->engine, request, &out, &err) != EVD_OK)
        evd_resp_error(resp, &err);
    else
        evd_resp_json(resp, 200, out);
    json_decref(request);
}

/* ---- event streams ------------------------------------------------------------------------ */

struct stream {
    struct evd_sse base; /* first: the stream callbacks get a struct stream */
    char id[256];        /* the session (session stream) */
    json_t *request;     /* the compare request (comparison stream) */
    int64_t last_emit;
};

/* Session stream: the session with its live metrics; ends when no turn is in flight. */
static void emit_session(struct evd_sse *base)
{
    struct stream *s = (struct stream *)base;
    struct evd_err err = {0};
    json_t *view = NULL;
    if (evd_session_get(base->engine, s->id, false, &view, &err) != EVD_OK) {
        if (err.code == EVD_ENOTFOUND) {
            json_t *d = json_pack("{s:s}", "session_id", s->id);
            evd_sse_event(base, "deleted", d);
            json_decref(d);
            base->done = true;
        } else {
            evd_buf_printf(&base->pending, ": could not read the session, retrying\n\n");
            base->retry = true;
        }
        return;
    }
    evd_sse_event(base, "session", view);
    const char *st = json_string_value(json_object_get(view, "status"));
    if (st == NULL || strcmp(st, "working") != 0)
        base->done = true;
    json_decref(view);
}

/* Comparison stream: the whole comparison; ends when every session is terminal. */
static void emit_comparison(struct evd_sse *base)
{
    struct stream *s = (struct stream *)base;
    struct evd_err err = {0};
    json_t *cmp = NULL;
    if (evd_sessions_compare(base->engine, s->request, &cmp, &err) != EVD_OK) {
        if (err.code == EVD_ENOTFOUND) {
            json_t *d = json_pack("{s:s}", "detail", err.msg);
            evd_sse_event(base, "deleted", d);
            json_decref(d);
            base->done = true;
        } else {
            evd_buf_printf(&base->pending, ": could not read the sessions, retrying\n\n");
            base->retry = true;
        }
        return;
    }
    evd_sse_event(base, "comparison", cmp);
    bool all = true;
    size_t i;
    json_t *item;
    json_array_foreach(json_object_get(cmp, "sessions"), i, item)
    {
        all &= json_is_true(json_object_get(json_object_get(item, "lifecycle"), "terminal"));
    }
    base->done = all;
    s->last_emit = evd_mono_ms();
    json_decref(cmp);
}

/* Lets a burst of snapshots settle into one comparison: at most one per interval. */
static int settle_comparison(struct evd_sse *base)
{
    struct stream *s = (struct stream *)base;
    int64_t since = evd_mono_ms() - s->last_emit;
    return since < COMPARE_MIN_INTERVAL_MS ? (int)(COMPARE_MIN_INTERVAL_MS - since) : 0;
}

static void stream_free(void *cls)
{
    struct stream *s = cls;
    evd_sse_release(&s->base);
    json_decref(s->request);
    free(s);
}

void evd_h_session_events(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    const char *id = evd_req_param(req, "id");
    struct stream *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        evd_resp_problem(resp, EVD_ENOMEM, "out of memory");
        return;
    }
    s->base.engine = req->ctx->engine;
    s->base.hub = req->ctx->sse;
    s->base.emit = emit_session;
    s->base.timed = true; /* live metrics */
    snprintf(s->id, sizeof(s->id), "%s", id);
    /* Subscribe before the first read so that no change slips between them. */
    s->base.sub = evd_engine_subscribe(s->base.engine, s->id);
    json_t *view = NULL;
    if (s->base.sub == NULL) {
        evd_resp_problem(resp, EVD_ENOMEM, "out of memory");
    } else if (evd_session_get(s->base.engine, id, false, &view, &err) != EVD_OK) {
        evd_resp_error(resp, &err); /* unknown ids get a plain 404 before any stream */
    } else {
        json_decref(view);
        evd_sse_start(resp, &s->base, stream_free);
        return;
    }
    stream_free(s);
}

void evd_h_sessions_compare_events(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    struct stream *s = calloc(1, sizeof(*s));
    json_t *watch = NULL, *probe = NULL;
    if (s == NULL || (s->request = compare_request(req)) == NULL) {
        free(s);
        evd_resp_problem(resp, EVD_ENOMEM, "out of memory");
        return;
    }
    s->base.engine = req->ctx->engine;
    s->base.hub = req->ctx->sse;
    s->base.emit = emit_comparison;
    s->base.settle = settle_comparison;
    s->base.timed = true; /* a running turn's elapsed time */
    watch = evd_sessions_watch_ids(s->base.engine, s->request, &err);
    if (watch != NULL) {
        const char *ids[EVD_SUB_IDS_MAX];
        size_t n = 0, i;
        json_t *v;
        json_array_foreach(watch, i, v)
        {
            if (n < EVD_SUB_IDS_MAX)
                ids[n++] = json_string_value(v);
        }
        s->base.sub = evd_engine_subscribe_many(s->base.engine, ids, n);
    }
    /* Validation and unknown ids are answered as plain problems before any stream. */
    if (watch == NULL) {
        evd_resp_error(resp, &err);
    } else if (s->base.sub == NULL) {
        evd_resp_problem(resp, EVD_ENOMEM, "out of memory");
    } else if (evd_sessions_compare(s->base.engine, s->request, &probe, &err) != EVD_OK) {
        evd_resp_error(resp, &err);
    } else {
        json_decref(probe);
        json_decref(watch);
        evd_sse_start(resp, &s->base, stream_free);
        return;
    }
    json_decref(watch);
    stream_free(s);
}
