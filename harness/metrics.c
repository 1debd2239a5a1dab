/*
 * What a run records besides its conversation: spans, token usage, cost, and the metrics
 * and traces built from them (at the end, and as snapshots for the progress callback).
 * Runs on the run's thread; reads and updates the run (harness/run.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/run.h"

/* ---- spans, transcript, metrics ------------------------------------------------------- */

json_t *evd_hx_span_new(const char *name, const char *kind, int64_t start, int64_t end,
                        const char *error, json_t *attrs /* steals */)
{
    json_t *s = json_pack("{s:s,s:s,s:I,s:I,s:s,s:o}", "name", name, "kind", kind, "start_ms",
                          (json_int_t)start, "end_ms", (json_int_t)end, "status",
                          error ? "error" : "ok", "attributes", attrs ? attrs : json_object());
    if (s != NULL && error != NULL)
        json_object_set_new(s, "error", json_string(error));
    return s;
}

void evd_hx_run_add_usage(struct evd_hx_run *r, const struct evd_hx_usage *u)
{
    r->all_input &= u->has_input;
    r->all_output &= u->has_output;
    r->all_cache_read &= u->has_cache_read;
    r->all_cache_write &= u->has_cache_write;
    r->all_reasoning &= u->has_reasoning;
    r->tot.input += u->has_input ? u->input : 0;
    r->tot.output += u->has_output ? u->output : 0;
    r->tot.cache_read += u->has_cache_read ? u->cache_read : 0;
    r->tot.cache_write += u->has_cache_write ? u->cache_write : 0;
    r->tot.reasoning += u->has_reasoning ? u->reasoning : 0;
}

/* Cost of one generation, or a negative number when it cannot be priced. */
double evd_hx_run_generation_cost(const struct evd_hx_run *r, const char *model,
                                  const struct evd_hx_usage *u)
{
    struct evd_price p;
    if (!u->has_input || !u->has_output ||
        !evd_providers_price(r->providers, r->rm.provider, model, &p))
        return -1;
    int64_t cr = u->has_cache_read ? u->cache_read : 0;
    int64_t cw = u->has_cache_write ? u->cache_write : 0;
    int64_t uncached = u->input - cr - cw;
    if (uncached < 0)
        uncached = 0;
    return ((double)uncached * p.input_usd_per_mtok + (double)cr * p.cached_input_usd_per_mtok +
            (double)cw * p.cache_write_usd_per_mtok + (double)u->output * p.output_usd_per_mtok) /
           1e6;
}

json_t *evd_hx_usage_json(const struct evd_hx_usage *u)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    if (u->has_input)
        json_object_set_new(o, "input_tokens", json_integer(u->input));
    if (u->has_output)
        json_object_set_new(o, "output_tokens", json_integer(u->output));
    if (u->has_cache_read)
        json_object_set_new(o, "cache_read_tokens", json_integer(u->cache_read));
    if (u->has_cache_write)
        json_object_set_new(o, "cache_write_tokens", json_integer(u->cache_write));
    if (u->has_reasoning)
        json_object_set_new(o, "reasoning_tokens", json_integer(u->reasoning));
    return o;
}

/* Usage fields shared by totals and by_session entries. */
static void put_totals(const struct evd_hx_run *r, json_t *o)
{
    bool any = r->turns > 0;
    json_object_set_new(o, "turns", json_integer(r->turns));
    json_object_set_new(o, "function_calls", json_integer(r->function_calls));
    json_object_set_new(o, "function_call_errors", json_integer(r->function_call_errors));
    if (any && r->all_input)
        json_object_set_new(o, "input_tokens", json_integer(r->tot.input));
    if (any && r->all_output)
        json_object_set_new(o, "output_tokens", json_integer(r->tot.output));
    if (any && r->all_cache_read)
        json_object_set_new(o, "cache_read_tokens", json_integer(r->tot.cache_read));
    if (any && r->all_cache_write)
        json_object_set_new(o, "cache_write_tokens", json_integer(r->tot.cache_write));
    if (any && r->all_reasoning)
        json_object_set_new(o, "reasoning_tokens", json_integer(r->tot.reasoning));
    if (any && r->all_priced)
        json_object_set_new(o, "cost_usd", json_real(r->cost_usd));
}

json_t *evd_harness_traces_from_spans(const char *session_id, json_t *spans)
{
    int64_t first = INT64_MAX, last = INT64_MIN, errors = 0;
    size_t i;
    json_t *s;
    json_array_foreach(spans, i, s)
    {
        int64_t a = (int64_t)json_integer_value(json_object_get(s, "start_ms"));
        int64_t b = (int64_t)json_integer_value(json_object_get(s, "end_ms"));
        const char *st = json_string_value(json_object_get(s, "status"));
        first = a < first ? a : first;
        last = b > last ? b : last;
        errors += st != NULL && strcmp(st, "error") == 0;
    }
    size_t n = json_array_size(spans);
    json_int_t dur = n > 0 && last > first ? (json_int_t)(last - first) : 0;
    return json_pack("{s:I,s:I,s:I,s:I,s:[{s:s,s:n,s:i,s:I,s:I,s:I,s:I}]}", "trace_count",
                     (json_int_t)(n > 0), "span_count", (json_int_t)n, "error_span_count",
                     (json_int_t)errors, "duration_ms", dur, "by_session", "session_id", session_id,
                     "parent_session_id", "depth", 0, "trace_count", (json_int_t)(n > 0),
                     "span_count", (json_int_t)n, "error_span_count", (json_int_t)errors,
                     "duration_ms", dur);
}

json_t *evd_hx_run_metrics(const struct evd_hx_run *r)
{
    json_t *totals = json_pack("{s:i}", "sessions", 1);
    json_t *entry = json_pack("{s:s,s:n,s:i}", "session_id", r->in->session_id, "parent_session_id",
                              "depth", 0);
    json_t *traces = evd_harness_traces_from_spans(r->in->session_id, r->spans);
    if (totals == NULL || entry == NULL || traces == NULL) {
        json_decref(totals);
        json_decref(entry);
        json_decref(traces);
        return NULL;
    }
    put_totals(r, totals);
    put_totals(r, entry);
    return json_pack("{s:s,s:b,s:o,s:[o],s:o}", "root_session_id", r->in->session_id, "complete", 1,
                     "totals", totals, "by_session", entry, "traces", traces);
}

/* Hands a snapshot of the metrics so far to the input's progress callback, if any. */
void evd_hx_run_progress(const struct evd_hx_run *r)
{
    if (r->in->progress == NULL || r->in->session_id == NULL)
        return;
    json_t *m = evd_hx_run_metrics(r);
    if (m == NULL)
        return; /* out of memory: skip this report, the final metrics still come */
    json_object_set_new(m, "complete", json_false());
    r->in->progress(r->in->progress_ctx, m);
    json_decref(m);
}
