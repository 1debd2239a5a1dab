/*
 * Experiment resources over the engine; see experiments.h. The handlers add HTTP
 * semantics only (202 + Location, 204, the statuses of evd_http_status): the engine
 * validates and answers the documents. POST /v1/experiments is an upload route: its JSON
 * body is buffered up to ctx->max_dataset_bytes, parsed once, and the buffer freed before
 * the engine reads the parsed request. The events stream parks on the engine's change
 * subscription of the experiment id (handlers/sse.h); the export streams in the pieces
 * the engine reads, never holding the whole export. Every stream belongs to one server
 * thread at a time and is freed by the server's stream_free callback.
 */
#include "handlers/experiments.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/util.h"
#include "engine/engine.h"
#include "engine/experiments.h"
#include "handlers/reviews.h"
#include "handlers/sse.h"

#define PROGRESS_MIN_INTERVAL_MS 250 /* coalesces the bursts of runs finishing together */

static void location(struct evd_resp *resp, const char *id)
{
    char loc[160];
    snprintf(loc, sizeof(loc), "/v1/experiments/%s", id ? id : "");
    evd_resp_header(resp, "Location", loc);
}

static bool terminal_status(const char *st)
{
    return st != NULL &&
           (!strcmp(st, "completed") || !strcmp(st, "cancelled") || !strcmp(st, "failed"));
}

/* ---- POST /v1/experiments (an upload route) ------------------------------------------- */

struct start {
    struct evd_experiment_upload *u; /* the body as it streams in (engine/experiments.h) */
    size_t bytes, limit;             /* read so far; ctx->max_dataset_bytes */
    bool json;    /* Content-Type is JSON */
    bool refused; /* a refusal is in *resp already; the rest of the body is discarded */
    bool plan;    /* POST /v1/experiments/plan: validate and answer the plan, write nothing */
};

/* application/json or a +json type, parameters ignored (the rule of the other routes). */
static bool json_media(const char *ct)
{
    if (ct == NULL)
        return false;
    size_t n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    return (n == 16 && strncasecmp(ct, "application/json", 16) == 0) ||
           (n > 17 && strncasecmp(ct + n - 5, "+json", 5) == 0);
}

static void too_large(struct evd_resp *resp, size_t limit)
{
    char detail[96];
    snprintf(detail, sizeof(detail), "request body exceeds the %zu byte limit", limit);
    evd_resp_problem(resp, EVD_ETOOLARGE, detail);
}

static const char MEDIA_DETAIL[] = "request body must be application/json";

static const struct evd_upload_ops start_ops;

static void begin(struct evd_req *req, struct evd_resp *resp, bool plan);

void evd_h_experiment_start(struct evd_req *req, struct evd_resp *resp)
{
    begin(req, resp, false);
}

void evd_h_experiment_plan(struct evd_req *req, struct evd_resp *resp)
{
    begin(req, resp, true);
}

static void begin(struct evd_req *req, struct evd_resp *resp, bool plan)
{
    size_t limit = (size_t)req->ctx->max_dataset_bytes;
    const char *ct = evd_req_header(req, "Content-Type");
    const char *cl = evd_req_header(req, "Content-Length");
    long long declared = -1;
    if (cl != NULL) {
        char *end = NULL;
        declared = strtoll(cl, &end, 10);
        if (*cl == '\0' || *end != '\0' || declared < 0)
            declared = -1;
    }
    /* Refuse what can be refused from the headers before any of the body is read. */
    if (declared > 0 && (unsigned long long)declared > limit) {
        too_large(resp, limit);
        return;
    }
    if ((ct != NULL || declared > 0) && !json_media(ct)) {
        evd_resp_problem(resp, EVD_EMEDIA, MEDIA_DETAIL);
        return;
    }
    struct start *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        evd_resp_problem(resp, EVD_ENOMEM, "out of memory");
        return;
    }
    st->limit = limit;
    st->json = json_media(ct);
    st->plan = plan;
    struct evd_err err = {0};
    if (evd_experiment_upload_begin(req->ctx->engine, &st->u, &err) != EVD_OK) {
        free(st);
        evd_resp_error(resp, &err);
        return;
    }
    resp->upload = &start_ops;
    resp->upload_state = st;
}

static int start_chunk(void *state, const char *data, size_t len, struct evd_resp *resp)
{
    struct start *st = state;
    if (st->refused)
        return -1;
    if (!st->json) {
        st->refused = true;
        evd_resp_problem(resp, EVD_EMEDIA, MEDIA_DETAIL);
        return -1;
    }
    if (st->bytes + len > st->limit) {
        st->refused = true;
        too_large(resp, st->limit);
        return -1;
    }
    st->bytes += len;
    struct evd_err err = {0};
    if (evd_experiment_upload_feed(st->u, data, len, &err) != EVD_OK) {
        st->refused = true;
        evd_resp_error(resp, &err);
        return -1;
    }
    return 0;
}

static void start_end(void *state, struct evd_req *req, struct evd_resp *resp)
{
    (void)req;
    struct start *st = state;
    if (st->refused)
        return;
    struct evd_err err = {0};
    json_t *out = NULL;
    if (st->plan) {
        if (evd_experiment_upload_plan(st->u, &out, &err) != EVD_OK)
            evd_resp_error(resp, &err);
        else
            evd_resp_json(resp, 200, out);
        return;
    }
    if (evd_experiment_upload_finish(st->u, &out, &err) != EVD_OK) {
        evd_resp_error(resp, &err);
        return;
    }
    location(resp, json_string_value(json_object_get(out, "experiment_id")));
    evd_resp_json(resp, 202, out);
}

/* The start's fingerprint for Idempotency-Key: its canonical JSON, so that a retry whose
 * body differs only in spacing or member order is the same request. */
static bool start_fingerprint(void *state, char out[65])
{
    struct start *st = state;
    return !st->refused && evd_experiment_upload_fingerprint(st->u, out);
}

static void start_free(void *state)
{
    struct start *st = state;
    if (st == NULL)
        return;
    evd_experiment_upload_free(st->u);
    free(st);
}

static const struct evd_upload_ops start_ops = {
    .chunk = start_chunk,
    .end = start_end,
    .free = start_free,
    .fingerprint = start_fingerprint,
};

/* ---- reads ------------------------------------------------------------------------------ */

void evd_h_experiments_list(struct evd_req *req, struct evd_resp *resp)
{
    unsigned limit;
    if (!evd_req_page_limit(req, resp, &limit))
        return;
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc =
        evd_experiment_list(req->ctx->engine, limit, evd_req_query(req, "before"), &out, &err);
    evd_resp_outcome(resp, 200, rc, out, &err);
}

void evd_h_experiment_get(struct evd_req *req, struct evd_resp *resp)
{
    if (evd_req_query(req, "source") != NULL) { /* the analysis of another source */
        evd_h_experiment_get_source(req, resp);
        return;
    }
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc = evd_experiment_get(req->ctx->engine, evd_req_param(req, "id"), &out, &err);
    evd_resp_outcome(resp, 200, rc, out, &err);
}

void evd_h_experiment_cases(struct evd_req *req, struct evd_resp *resp)
{
    unsigned limit;
    if (!evd_req_page_limit(req, resp, &limit))
        return;
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc = evd_experiment_cases(req->ctx->engine, evd_req_param(req, "id"),
                                            evd_req_query(req, "filter"), limit,
                                            evd_req_query(req, "before"), &out, &err);
    evd_resp_outcome(resp, 200, rc, out, &err);
}

void evd_h_experiment_runs(struct evd_req *req, struct evd_resp *resp)
{
    unsigned limit;
    if (!evd_req_page_limit(req, resp, &limit))
        return;
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc = evd_experiment_runs(req->ctx->engine, evd_req_param(req, "id"),
                                           evd_req_query(req, "case_id"), limit,
                                           evd_req_query(req, "before"), &out, &err);
    evd_resp_outcome(resp, 200, rc, out, &err);
}

void evd_h_experiment_cancel(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    json_t *out = NULL;
    enum evd_code rc =
        evd_experiment_cancel(req->ctx->engine, evd_req_param(req, "id"), &out, &err);
    evd_resp_outcome(resp, 200, rc, out, &err);
}

void evd_h_experiment_delete(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    if (evd_experiment_delete(req->ctx->engine, evd_req_param(req, "id"), &err) != EVD_OK)
        evd_resp_error(resp, &err);
    else
        evd_resp_raw(resp, 204, NULL, "", 0);
}

/* ---- events ----------------------------------------------------------------------------- */

struct stream {
    struct evd_sse base; /* first: the stream callbacks get a struct stream */
    char id[256];
    int64_t last_emit;
};

/* A `progress` event while the experiment runs; the terminal one is the `status` event
 * that ends the stream, and a deletion meanwhile ends it with `deleted`. */
static void emit_progress(struct evd_sse *base)
{
    struct stream *s = (struct stream *)base;
    struct evd_err err = {0};
    json_t *p = NULL;
    if (evd_experiment_progress(base->engine, s->id, &p, &err) != EVD_OK) {
        if (err.code == EVD_ENOTFOUND) {
            json_t *d = json_pack("{s:s}", "experiment_id", s->id);
            evd_sse_event(base, "deleted", d);
            json_decref(d);
            base->done = true;
        } else {
            evd_buf_printf(&base->pending, ": could not read the experiment, retrying\n\n");
            base->retry = true;
        }
        return;
    }
    bool terminal = terminal_status(json_string_value(json_object_get(p, "status")));
    evd_sse_event(base, terminal ? "status" : "progress", p);
    base->done = terminal;
    s->last_emit = evd_mono_ms();
    json_decref(p);
}

/* At most one progress event per interval: a burst of finished runs becomes one event. */
static int settle_progress(struct evd_sse *base)
{
    struct stream *s = (struct stream *)base;
    int64_t since = evd_mono_ms() - s->last_emit;
    return since < PROGRESS_MIN_INTERVAL_MS ? (int)(PROGRESS_MIN_INTERVAL_MS - since) : 0;
}

static void stream_free(void *cls)
{
    struct stream *s = cls;
    evd_sse_release(&s->base);
    free(s);
}

void evd_h_experiment_events(struct evd_req *req, struct evd_resp *resp)
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
    s->base.emit = emit_progress;
    s->base.settle = settle_progress;
    snprintf(s->id, sizeof(s->id), "%s", id);
    /* Subscribe before the first read so that no change slips between them. */
    s->base.sub = evd_engine_subscribe(s->base.engine, s->id);
    json_t *probe = NULL;
    if (s->base.sub == NULL) {
        evd_resp_problem(resp, EVD_ENOMEM, "out of memory");
    } else if (evd_experiment_progress(s->base.engine, id, &probe, &err) != EVD_OK) {
        evd_resp_error(resp, &err); /* an unknown id gets a plain 404 before any stream */
    } else {
        json_decref(probe);
        evd_sse_start(resp, &s->base, stream_free);
        return;
    }
    stream_free(s);
}

/* ---- export ----------------------------------------------------------------------------- */

struct export
{
    struct evd_experiment_export *x; /* owned */
    struct evd_buf piece;            /* the records read last and not sent yet */
    size_t off;
    bool end;
    char id[256];
    char request_id[72];
};

/* Reads the next piece into x->piece: 1, 0 at the end, -1 after a failure (logged: the
 * status line is gone by then, so the body is cut short: EVD_STREAM_ABORT). */
static int export_fill(struct export *x)
{
    struct evd_err err = {0};
    x->piece.len = 0;
    x->off = 0;
    int rc = evd_experiment_export_next(x->x, &x->piece, &err);
    if (rc < 0)
        evd_log(EVD_LOG_WARN, "could not read the next records of an export; its body is cut",
                "experiment_id", x->id, "req_id", x->request_id, "code",
                evd_code_name(err.code), "error", err.msg, NULL);
    return rc;
}

static ssize_t export_read(void *cls, char *buf, size_t max)
{
    struct export *x = cls;
    while (x->off >= x->piece.len) {
        if (x->end)
            return EVD_STREAM_END;
        int rc = export_fill(x);
        if (rc <= 0) {
            x->end = true;
            return rc < 0 ? EVD_STREAM_ABORT : EVD_STREAM_END;
        }
    }
    size_t n = x->piece.len - x->off;
    if (n > max)
        n = max;
    memcpy(buf, x->piece.data + x->off, n);
    x->off += n;
    return (ssize_t)n;
}

static void export_free(void *cls)
{
    struct export *x = cls;
    if (x == NULL)
        return;
    evd_experiment_export_free(x->x);
    evd_buf_free(&x->piece);
    free(x);
}

void evd_h_experiment_export(struct evd_req *req, struct evd_resp *resp)
{
    struct evd_err err = {0};
    const char *id = evd_req_param(req, "id");
    const char *format = evd_req_query(req, "format");
    struct export *x = calloc(1, sizeof(*x));
    if (x == NULL) {
        evd_resp_problem(resp, EVD_ENOMEM, "out of memory");
        return;
    }
    snprintf(x->id, sizeof(x->id), "%s", id);
    snprintf(x->request_id, sizeof(x->request_id), "%s", req->request_id ? req->request_id : "");
    if (evd_experiment_export_open(req->ctx->engine, id, format ? format : "jsonl",
                                   evd_req_query(req, "records"), &x->x, &err) != EVD_OK) {
        evd_resp_error(resp, &err);
        export_free(x);
        return;
    }
    /* The first piece is read here, so that a failure still gets its status. */
    int rc = evd_experiment_export_next(x->x, &x->piece, &err);
    if (rc < 0) {
        evd_resp_error(resp, &err);
        export_free(x);
        return;
    }
    x->end = rc == 0;
    const char *type = evd_experiment_export_type(x->x);
    bool csv = type != NULL && strncmp(type, "text/csv", 8) == 0;
    char disposition[320];
    snprintf(disposition, sizeof(disposition), "attachment; filename=\"%s%s.%s\"", x->id,
             evd_experiment_export_judgements(x->x) ? "-judgements" : "", csv ? "csv" : "jsonl");
    resp->status = 200;
    resp->content_type = type;
    resp->stream = export_read;
    resp->stream_cls = x;
    resp->stream_free = export_free;
    evd_resp_header(resp, "Content-Disposition", disposition);
}
