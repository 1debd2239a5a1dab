/* Trace ids, span records and the process's span sink; see trace.h. */
#include "common/trace.h"

#include <openssl/rand.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

static evd_span_sink_fn sink;
static bool capture;

void evd_trace_set_sink(evd_span_sink_fn fn, bool capture_content)
{
    sink = fn;
    capture = fn != NULL && capture_content;
}

bool evd_trace_enabled(void)
{
    return sink != NULL;
}

bool evd_trace_capture_content(void)
{
    return capture;
}

int64_t evd_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            return false;
    return true;
}

void evd_trace_for_run(const char *owner_id, const char *run_id, int attempt,
                       struct evd_trace_ctx *out)
{
    /* "evald-trace" NUL owner NUL run NUL attempt: the NULs keep ("ab","c") from ("a","bc"). */
    struct evd_sha256 h;
    char att[16], hex[65];
    unsigned char digest[32];
    snprintf(att, sizeof(att), "%d", attempt);
    if (evd_sha256_init(&h) != 0) {
        /* Without memory for a digest context, random ids: the run still has a trace. */
        RAND_bytes(out->trace_id, sizeof(out->trace_id));
        evd_trace_random_span_id(out->span_id);
        return;
    }
    evd_sha256_update(&h, "evald-trace", 12);
    evd_sha256_update(&h, owner_id ? owner_id : "", strlen(owner_id ? owner_id : "") + 1);
    evd_sha256_update(&h, run_id ? run_id : "", strlen(run_id ? run_id : "") + 1);
    evd_sha256_update(&h, att, strlen(att));
    evd_sha256_final_hex(&h, hex);
    evd_sha256_free(&h);
    for (size_t i = 0; i < sizeof(digest); i++)
        digest[i] = (unsigned char)(evd_hex_value(hex[2 * i]) << 4 | evd_hex_value(hex[2 * i + 1]));
    memcpy(out->trace_id, digest, EVD_TRACE_ID_LEN);
    memcpy(out->span_id, digest + EVD_TRACE_ID_LEN, EVD_SPAN_ID_LEN);
    /* W3C: all-zero ids are invalid (one chance in 2^64 or 2^128). */
    if (all_zero(out->trace_id, EVD_TRACE_ID_LEN))
        out->trace_id[15] = 1;
    if (all_zero(out->span_id, EVD_SPAN_ID_LEN))
        out->span_id[7] = 1;
}

void evd_trace_id_for_run(const char *owner_id, const char *run_id, int attempt, char out[33])
{
    struct evd_trace_ctx ctx;
    evd_trace_for_run(owner_id, run_id, attempt, &ctx);
    evd_hex_encode(ctx.trace_id, EVD_TRACE_ID_LEN, out);
}

void evd_trace_random_span_id(unsigned char out[EVD_SPAN_ID_LEN])
{
    do {
        if (RAND_bytes(out, EVD_SPAN_ID_LEN) != 1) {
            /* The RNG failed: the clock still gives an id distinct enough for a span. */
            int64_t t = evd_now_ns();
            memcpy(out, &t, EVD_SPAN_ID_LEN);
        }
    } while (all_zero(out, EVD_SPAN_ID_LEN));
}

void evd_trace_hex(const struct evd_trace_ctx *ctx, char *trace_hex, char *span_hex)
{
    if (trace_hex != NULL)
        evd_hex_encode(ctx->trace_id, EVD_TRACE_ID_LEN, trace_hex);
    if (span_hex != NULL)
        evd_hex_encode(ctx->span_id, EVD_SPAN_ID_LEN, span_hex);
}

void evd_traceparent(const struct evd_trace_ctx *ctx, char out[EVD_TRACEPARENT_LEN + 1])
{
    char t[33], s[17];
    evd_trace_hex(ctx, t, s);
    snprintf(out, EVD_TRACEPARENT_LEN + 1, "00-%s-%s-01", t, s);
}

struct evd_span *evd_span_new(const struct evd_trace_ctx *parent, bool child, const char *name,
                              enum evd_span_kind kind, int64_t start_ns)
{
    struct evd_span *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->attributes = json_object();
    s->events = json_array();
    if (s->attributes == NULL || s->events == NULL) {
        evd_span_free(s);
        return NULL;
    }
    memcpy(s->trace_id, parent->trace_id, EVD_TRACE_ID_LEN);
    if (child) {
        memcpy(s->parent_span_id, parent->span_id, EVD_SPAN_ID_LEN);
        s->has_parent = true;
        evd_trace_random_span_id(s->span_id);
    } else {
        memcpy(s->span_id, parent->span_id, EVD_SPAN_ID_LEN);
    }
    snprintf(s->name, sizeof(s->name), "%s", name ? name : "");
    s->kind = kind;
    s->start_ns = s->end_ns = start_ns;
    return s;
}

void evd_span_ctx(const struct evd_span *s, struct evd_trace_ctx *out)
{
    memcpy(out->trace_id, s->trace_id, EVD_TRACE_ID_LEN);
    memcpy(out->span_id, s->span_id, EVD_SPAN_ID_LEN);
}

void evd_span_set(struct evd_span *s, const char *key, json_t *value)
{
    if (s == NULL || value == NULL) {
        json_decref(value);
        return;
    }
    json_object_set_new(s->attributes, key, value);
}

void evd_span_set_str(struct evd_span *s, const char *key, const char *value)
{
    if (value != NULL)
        evd_span_set(s, key, json_string(value));
}

void evd_span_set_int(struct evd_span *s, const char *key, int64_t value)
{
    evd_span_set(s, key, json_integer((json_int_t)value));
}

void evd_span_event(struct evd_span *s, const char *name, int64_t time_ns, json_t *attrs)
{
    if (s == NULL) {
        json_decref(attrs);
        return;
    }
    json_t *ev = json_pack("{s:s,s:I,s:o}", "name", name, "time_ns", (json_int_t)time_ns,
                           "attributes", attrs ? attrs : json_object());
    if (ev != NULL)
        json_array_append_new(s->events, ev);
}

void evd_span_fail(struct evd_span *s, const char *type, const char *message)
{
    if (s == NULL)
        return;
    s->status = EVD_SPAN_ERROR;
    evd_span_set_str(s, "error.type", type);
    snprintf(s->status_message, sizeof(s->status_message), "%s", message ? message : "");
}

void evd_span_free(struct evd_span *s)
{
    if (s == NULL)
        return;
    json_decref(s->attributes);
    json_decref(s->events);
    free(s);
}

void evd_span_submit(struct evd_span *s)
{
    if (s == NULL)
        return;
    evd_span_sink_fn fn = sink;
    if (fn != NULL)
        fn(s);
    else
        evd_span_free(s);
}
