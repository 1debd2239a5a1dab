/* See domain_fixtures.h. Test-only helpers; single-threaded. */
#include "tests/support/domain_fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/limits.h"
#include "domain/request.h"
#include "domain/run.h"

json_t *evd_dt_parse(const char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (v == NULL) {
        fprintf(stderr, "fixture JSON does not parse: %s: %s\n", jerr.text, text);
        abort();
    }
    return v;
}

json_t *evd_dt_start_body(void)
{
    return evd_dt_parse("{\"dimension\":\"prompt\","
                        "\"model\":{\"model\":\"gpt-test\",\"provider\":\"openai\"},"
                        "\"control\":{\"label\":\"baseline\",\"prompt\":\"Reply with OK.\","
                        "\"system_prompt\":\"Be exact.\"},"
                        "\"treatment\":{\"label\":\"candidate\",\"prompt\":\"Return exactly OK.\","
                        "\"system_prompt\":\"Be exact.\"},"
                        "\"evaluator\":{\"function_id\":\"eval::assert::exact\","
                        "\"arguments\":{\"expected\":\"OK\"}}}");
}

void evd_dt_set(json_t *obj, const char *path, const char *value_json)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    char *seg = buf;
    json_t *cur = obj;
    for (char *dot = strchr(seg, '.'); dot != NULL; dot = strchr(seg, '.')) {
        *dot = '\0';
        json_t *next = json_object_get(cur, seg);
        if (!json_is_object(next)) {
            next = json_object();
            json_object_set_new(cur, seg, next);
        }
        cur = next;
        seg = dot + 1;
    }
    if (value_json == NULL)
        json_object_del(cur, seg);
    else
        json_object_set_new(cur, seg, evd_dt_parse(value_json));
}

const char *evd_dt_dump(const json_t *v)
{
    static char out[8192];
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    snprintf(out, sizeof(out), "%s", s != NULL ? s : "(null)");
    free(s);
    return out;
}

json_t *evd_dt_metrics(const char *session_id, bool complete, int64_t turns, int64_t function_calls,
                       int64_t function_call_errors, int64_t input_tokens, int64_t output_tokens,
                       double cost_usd, int64_t error_spans)
{
    json_t *totals = json_pack("{s:I, s:I, s:I, s:I}", "sessions", (json_int_t)1, "turns",
                               (json_int_t)turns, "function_calls", (json_int_t)function_calls,
                               "function_call_errors", (json_int_t)function_call_errors);
    json_t *session =
        json_pack("{s:s, s:I, s:I, s:I, s:I}", "session_id", session_id, "depth", (json_int_t)0,
                  "turns", (json_int_t)turns, "function_calls", (json_int_t)function_calls,
                  "function_call_errors", (json_int_t)function_call_errors);
    if (input_tokens >= 0)
        json_object_set_new(totals, "input_tokens", json_integer(input_tokens));
    if (output_tokens >= 0)
        json_object_set_new(totals, "output_tokens", json_integer(output_tokens));
    if (cost_usd >= 0)
        json_object_set_new(totals, "cost_usd", json_real(cost_usd));
    json_t *m = json_pack("{s:s, s:b, s:o, s:[o]}", "root_session_id", session_id, "complete",
                          complete, "totals", totals, "by_session", session);
    if (error_spans >= 0)
        json_object_set_new(m, "traces",
                            json_pack("{s:I, s:I, s:I, s:I, s:[]}", "trace_count", (json_int_t)1,
                                      "span_count", (json_int_t)(turns + function_calls + 2),
                                      "error_span_count", (json_int_t)error_spans, "duration_ms",
                                      (json_int_t)1500, "by_session"));
    return m;
}

json_t *evd_dt_normalized(uint32_t runs, enum evd_order order, bool with_evaluator)
{
    json_t *body = evd_dt_start_body();
    char text[32];
    snprintf(text, sizeof(text), "%u", runs);
    evd_dt_set(body, "runs", text);
    evd_dt_set(body, "execution_order",
               order == EVD_ORDER_CONTROL_FIRST ? "\"balanced_control_first\""
                                                : "\"balanced_treatment_first\"");
    if (!with_evaluator)
        evd_dt_set(body, "evaluator", NULL);
    json_t *n = NULL;
    struct evd_err err;
    if (evd_request_start(body, 1000, &n, NULL, &err) != EVD_OK) {
        fprintf(stderr, "fixture start request rejected: %s\n", err.msg);
        abort();
    }
    json_decref(body);
    return n;
}

void evd_dt_finish_run(json_t *run, int passed, int64_t total_tokens, int64_t wall_ms)
{
    struct evd_limits limits;
    evd_limits_defaults(&limits);
    const char *sid = json_string_value(json_object_get(run, "session_id"));
    int64_t in = total_tokens >= 0 ? total_tokens / 2 : -1;
    int64_t out = total_tokens >= 0 ? total_tokens - total_tokens / 2 : -1;
    json_t *metrics = evd_dt_metrics(sid, true, 2, 1, 0, in, out, 0.25, 0);
    json_t *output = json_string("OK");
    evd_run_mark_running(run, 1000);
    evd_run_record_outcome(run, output, metrics, (uint64_t)wall_ms, 1000 + wall_ms);
    if (passed == -2) {
        evd_run_fail(run, EVD_PHASE_AWAIT, "harness::status", "harness run ended as Failed",
                     1000 + wall_ms);
    } else if (passed == -1) {
        evd_run_complete(run, &limits, NULL);
    } else {
        json_t *ev = json_pack("{s:b, s:f, s:s}", "passed", passed, "score", passed ? 1.0 : 0.0,
                               "reason", "fixture");
        evd_run_complete(run, &limits, ev);
        json_decref(ev);
    }
    json_decref(output);
    json_decref(metrics);
}
