/* See domain_fixtures.h. Test-only helpers; single-threaded. */
#include "tests/support/domain_fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/limits.h"
#include "domain/request.h"
#include "domain/evaluators.h"
#include "domain/plan.h"
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

/* The start body with `runs` and the execution order set (new reference). */
static json_t *start_body(uint32_t runs, enum evd_order order)
{
    json_t *body = evd_dt_start_body();
    char text[32];
    snprintf(text, sizeof(text), "%u", runs);
    evd_dt_set(body, "runs", text);
    evd_dt_set(body, "execution_order",
               order == EVD_ORDER_CONTROL_FIRST ? "\"balanced_control_first\""
                                                : "\"balanced_treatment_first\"");
    return body;
}

json_t *evd_dt_normalized(uint32_t runs, enum evd_order order, bool with_evaluator)
{
    json_t *body = start_body(runs, order);
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

uint64_t evd_dt_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t pick(uint64_t *rng, uint64_t n)
{
    return evd_dt_rand(rng) % n;
}

static json_t *random_metrics(uint64_t *rng, const char *session_id)
{
    bool complete = pick(rng, 6) != 0;
    int64_t in = pick(rng, 5) == 0 ? -1 : (int64_t)pick(rng, 5000);
    int64_t out = pick(rng, 5) == 0 ? -1 : (int64_t)pick(rng, 2000);
    double cost = pick(rng, 4) == 0 ? -1.0 : (double)pick(rng, 100000) / 1e6;
    int64_t spans = pick(rng, 4) == 0 ? -1 : (int64_t)pick(rng, 3);
    json_t *m = evd_dt_metrics(session_id, complete, 1 + (int64_t)pick(rng, 6),
                               (int64_t)pick(rng, 5), (int64_t)pick(rng, 3), in, out, cost, spans);
    json_t *totals = json_object_get(m, "totals");
    if (pick(rng, 2))
        json_object_set_new(totals, "reasoning_tokens", json_integer((json_int_t)pick(rng, 900)));
    if (pick(rng, 3) == 0)
        json_object_set_new(totals, "cache_read_tokens", json_integer((json_int_t)pick(rng, 90)));
    return m;
}

static const char *random_limits(uint64_t *rng)
{
    static const char *const LIMITS[] = {
        "{}",
        "{\"evaluation\":{\"max_function_call_errors\":0}}",
        "{\"execution\":{\"max_total_tokens\":3000}}",
        "{\"execution\":{\"max_cost_usd\":0.05},\"evaluation\":{\"max_error_spans\":1}}",
    };
    return LIMITS[pick(rng, sizeof(LIMITS) / sizeof(LIMITS[0]))];
}

/* Completes, fails or cancels a running run at random. */
static void random_outcome(uint64_t *rng, const json_t *request, const struct evd_limits *limits,
                           json_t *run, int64_t now)
{
    static const char *const OUTPUTS[] = {"\"OK\"", "\"ok !\"", "null", "{\"answer\":42}",
                                          "[1,2.5]"};
    const char *sid = json_string_value(json_object_get(run, "session_id"));
    json_t *output = evd_dt_parse(OUTPUTS[pick(rng, sizeof(OUTPUTS) / sizeof(OUTPUTS[0]))]);
    json_t *metrics = pick(rng, 8) == 0 ? NULL : random_metrics(rng, sid);
    switch (pick(rng, 10)) {
    case 0:
        evd_run_fail(run, EVD_PHASE_SEND, NULL, "provider answered 500", now);
        break;
    case 1:
        evd_run_record_outcome(run, output, metrics, (uint64_t)pick(rng, 9000), now);
        evd_run_fail(run, EVD_PHASE_AWAIT, "harness::status", "run exceeded 600s wall-clock limit",
                     now);
        break;
    case 2:
        evd_run_record_outcome(run, output, metrics, (uint64_t)pick(rng, 9000), now);
        evd_run_cancel(run, EVD_PHASE_AWAIT, "harness::status", "harness run was cancelled", now);
        break;
    default: {
        evd_run_record_outcome(run, output, metrics, (uint64_t)pick(rng, 9000), now);
        json_t *evaluation = NULL;
        if (evd_run_needs_evaluation(request, run)) {
            if (pick(rng, 8) == 0) {
                evd_run_fail(run, EVD_PHASE_EVALUATE, "eval::assert::exact",
                             "evaluator score must be a finite number between 0 and 1", now);
                break;
            }
            json_t *answer = json_pack("{s:b, s:f}", "passed", (int)pick(rng, 2), "score",
                                       (double)pick(rng, 5) / 4.0);
            if (pick(rng, 2))
                json_object_set_new(answer, "reason", json_string("random verdict"));
            evd_evaluator_check_response(answer, &evaluation, NULL);
            json_decref(answer);
        }
        evd_run_complete(run, limits, evaluation);
        json_decref(evaluation);
        break;
    }
    }
    json_decref(metrics);
    json_decref(output);
}

void evd_dt_random_eval(uint64_t *rng, uint32_t max_runs, struct evd_dt_eval *out)
{
    uint32_t runs = 1 + (uint32_t)pick(rng, max_runs);
    enum evd_order order = pick(rng, 2) ? EVD_ORDER_CONTROL_FIRST : EVD_ORDER_TREATMENT_FIRST;
    json_t *body = start_body(runs, order);
    evd_dt_set(body, "limits", random_limits(rng));
    switch (pick(rng, 3)) {
    case 0:
        evd_dt_set(body, "evaluator", NULL);
        break;
    case 1:
        evd_dt_set(body, "evaluator",
                   "{\"function_id\":\"eval::assert::normalized_text\",\"arguments\":"
                   "{\"expected\":\"ok\"}}");
        break;
    default:
        break;
    }
    if (pick(rng, 3) == 0)
        evd_dt_set(body, "output", "{\"type\":\"json\",\"schema\":{\"type\":\"object\"}}");
    if (pick(rng, 3) == 0)
        evd_dt_set(body, "control.label", NULL);
    struct evd_err err;
    out->request = NULL;
    if (evd_request_start(body, 1000, &out->request, NULL, &err) != EVD_OK) {
        fprintf(stderr, "random start request rejected: %s\n", err.msg);
        abort();
    }
    json_decref(body);
    struct evd_limits limits;
    evd_limits_decode(json_object_get(out->request, "limits"), &limits, NULL);

    out->runs = evd_plan_build("eval_0123456789abcdef0123456789abcdef", runs, order);
    size_t total = json_array_size(out->runs);
    size_t done = (size_t)pick(rng, total + 1);
    int64_t now = 1700000000000;
    for (size_t i = 0; i < done; i++) {
        json_t *run = json_array_get(out->runs, i);
        evd_run_mark_running(run, now);
        if (pick(rng, 2))
            evd_run_set_turn_id(run, "turn_1");
        now += 1000;
        random_outcome(rng, out->request, &limits, run, now);
    }
    out->cancelled = false;
    if (done < total) {
        switch (pick(rng, 3)) {
        case 0:
            evd_run_mark_running(json_array_get(out->runs, done), now);
            break;
        case 1:
            evd_runs_cancel_open(out->runs, now);
            out->cancelled = true;
            break;
        default:
            break;
        }
    }
}

void evd_dt_eval_release(struct evd_dt_eval *e)
{
    json_decref(e->request);
    json_decref(e->runs);
    e->request = e->runs = NULL;
}

void evd_dt_swap_roles(json_t *runs)
{
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run)
    {
        const char *role = json_string_value(json_object_get(run, "role"));
        json_object_set_new(run, "role",
                            json_string(strcmp(role, "control") == 0 ? "treatment" : "control"));
    }
}
