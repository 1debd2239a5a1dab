/*
 * Unit tests of the session domain (domain/session.h, domain/compare.h): request decoding
 * and its messages, sums of per-turn metrics, the transcript view, summary metrics, deltas
 * and the comparison's partial/complete and error reporting. No I/O.
 */
#include <check.h>
#include <math.h>
#include <string.h>

#include "domain/compare.h"
#include "domain/limits.h"
#include "domain/metrics.h"
#include "domain/session.h"

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    ck_assert_msg(j != NULL, "bad test JSON: %s", e.text);
    return j;
}

/* A one-turn SessionMetricsResponseV1 as the harness reports it. */
static json_t *turn_metrics(const char *sid, int turns, int calls, int errors, int in, int out,
                            double cost, int spans, int dur)
{
    json_t *totals = json_pack("{s:i, s:i, s:i, s:i}", "sessions", 1, "turns", turns,
                               "function_calls", calls, "function_call_errors", errors);
    if (in >= 0)
        json_object_set_new(totals, "input_tokens", json_integer(in));
    if (out >= 0)
        json_object_set_new(totals, "output_tokens", json_integer(out));
    if (cost >= 0)
        json_object_set_new(totals, "cost_usd", json_real(cost));
    json_t *entry = json_deep_copy(totals);
    json_object_del(entry, "sessions");
    json_object_set_new(entry, "session_id", json_string(sid));
    json_object_set_new(entry, "parent_session_id", json_null());
    json_object_set_new(entry, "depth", json_integer(0));
    return json_pack("{s:s, s:b, s:o, s:[o], s:{s:i, s:i, s:i, s:i, s:[{s:s, s:n, s:i, s:i, "
                     "s:i, s:i, s:i}]}}",
                     "root_session_id", sid, "complete", 1, "totals", totals, "by_session", entry,
                     "traces", "trace_count", 1, "span_count", spans, "error_span_count", errors,
                     "duration_ms", dur, "by_session", "session_id", sid, "parent_session_id",
                     "depth", 0, "trace_count", 1, "span_count", spans, "error_span_count", errors,
                     "duration_ms", dur);
}

static json_int_t total_int(const json_t *m, const char *key)
{
    json_t *v = json_object_get(json_object_get(m, "totals"), key);
    ck_assert_msg(json_is_integer(v), "totals.%s is not an integer", key);
    return json_integer_value(v);
}

/* ---- requests ---------------------------------------------------------------------------- */

START_TEST(create_defaults_and_normalization)
{
    json_t *body = parse("{\"title\":\"t\",\"model\":{\"model\":\"gpt-5\"},\"prompt\":\"hi\","
                         "\"limits\":{\"max_turns\":3},\"metadata\":{\"a\":1}}");
    struct evd_session_request c;
    struct evd_err err = {0};
    ck_assert_int_eq(evd_session_request_decode(body, &c, &err), EVD_OK);
    ck_assert_str_eq(c.title, "t");
    ck_assert_str_eq(c.prompt, "hi");
    ck_assert(json_is_null(json_object_get(c.config, "system_prompt")));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(c.config, "model"),
                                                       "system_prompt_strategy")),
                     "enrich");
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(c.config, "functions"), "expose")),
        "agent_trigger");
    ck_assert_int_eq(
        json_array_size(json_object_get(json_object_get(c.config, "functions"), "allow")), 0);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(c.config, "output"), "type")), "text");
    json_t *limits = json_object_get(c.config, "limits");
    ck_assert_int_eq(json_integer_value(json_object_get(limits, "max_turns")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(limits, "scenario_timeout_seconds")), 600);
    ck_assert_ptr_null(json_object_get(limits, "max_total_tokens"));
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(c.config, "metadata"), "a")), 1);
    json_t *hl = evd_session_harness_limits(c.config);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(hl, "execution"), "max_turns")), 3);
    json_decref(hl);
    evd_session_request_clear(&c);
    json_decref(body);
}
END_TEST

static const struct {
    const char *body;
    const char *msg;
} CREATE_ERRORS[] = {
    {"[]", "request body must be a JSON object"},
    {"{}", "model is required"},
    {"{\"model\":\"gpt-5\"}", "model must be an object"},
    {"{\"model\":{\"model\":\"\"}}", "model.model cannot be empty"},
    {"{\"model\":{\"model\":\"m\",\"provider\":\" \"}}",
     "model.provider cannot be empty when supplied"},
    {"{\"model\":{\"model\":\"m\",\"mode\":\"fast\"}}", "model.mode must be one of ask, agent"},
    {"{\"model\":{\"model\":\"m\"},\"x\":1}", "x is not a known field"},
    {"{\"model\":{\"model\":\"m\"},\"title\":1}", "title must be a string"},
    {"{\"model\":{\"model\":\"m\"},\"prompt\":\"\"}", "prompt cannot be empty"},
    {"{\"model\":{\"model\":\"m\"},\"functions\":{\"allow\":[1]}}",
     "functions.allow[0] must be a string"},
    {"{\"model\":{\"model\":\"m\"},\"functions\":[]}", "functions must be an object"},
    {"{\"model\":{\"model\":\"m\"},\"output\":{\"type\":\"text\",\"schema\":{}}}",
     "output.schema is not a known field"},
    {"{\"model\":{\"model\":\"m\"},\"limits\":[]}", "limits must be an object"},
    {"{\"model\":{\"model\":\"m\"},\"limits\":{\"invocation_timeout_seconds\":0}}",
     "limits.invocation_timeout_seconds must be greater than zero"},
    {"{\"model\":{\"model\":\"m\"},\"limits\":{\"max_total_tokens\":0}}",
     "limits.max_total_tokens must be greater than zero when supplied"},
    {"{\"model\":{\"model\":\"m\"},\"limits\":{\"max_cost_usd\":-1}}",
     "limits.max_cost_usd must be a finite non-negative number"},
    {"{\"model\":{\"model\":\"m\"},\"limits\":{\"max_turns\":4294967296}}",
     "limits.max_turns must be at most 4294967295"},
};

START_TEST(create_errors_name_the_field)
{
    json_t *body = parse(CREATE_ERRORS[_i].body);
    struct evd_session_request c;
    struct evd_err err = {0};
    ck_assert_int_eq(evd_session_request_decode(body, &c, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, CREATE_ERRORS[_i].msg);
    ck_assert_ptr_null(c.config);
    json_decref(body);
}
END_TEST

START_TEST(evaluation_limit_messages_are_unchanged)
{
    struct evd_limits l;
    struct evd_err err = {0};
    evd_limits_defaults(&l);
    l.max_turns = 0;
    ck_assert_int_eq(evd_limits_validate(&l, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, "limits.execution.max_turns must be greater than zero");
}
END_TEST

START_TEST(message_requests)
{
    const char *content = NULL;
    struct evd_err err = {0};
    json_t *ok = parse("{\"content\":\"next\"}");
    ck_assert_int_eq(evd_session_message_decode(ok, &content, &err), EVD_OK);
    ck_assert_str_eq(content, "next");
    json_decref(ok);
    static const char *bad[][2] = {
        {"{}", "content is required"},
        {"{\"content\":1}", "content must be a string"},
        {"{\"content\":\"\\n\"}", "content cannot be empty"},
        {"{\"content\":\"a\",\"role\":\"user\"}", "role is not a known field"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *b = parse(bad[i][0]);
        ck_assert_int_eq(evd_session_message_decode(b, &content, &err), EVD_EINVAL);
        ck_assert_str_eq(err.msg, bad[i][1]);
        json_decref(b);
    }
}
END_TEST

static const struct {
    const char *body;
    const char *msg;
} COMPARE_ERRORS[] = {
    {"{\"session_ids\":[\"a\"],\"baseline_session_id\":\"a\"}",
     "session_ids must contain between 2 and 5 sessions"},
    {"{\"session_ids\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\"],\"baseline_session_id\":\"a\"}",
     "session_ids must contain between 2 and 5 sessions"},
    {"{\"session_ids\":[\"a\",\"\"],\"baseline_session_id\":\"a\"}",
     "session_ids cannot contain empty values"},
    {"{\"session_ids\":[\"a\",\"\\u00a0\"],\"baseline_session_id\":\"a\"}",
     "session_ids cannot contain empty values"},
    {"{\"session_ids\":[\"a\",\"b\",\"b\"],\"baseline_session_id\":\"a\"}",
     "session_ids must be unique"},
    {"{\"session_ids\":[\"a\",\"b\"],\"baseline_session_id\":\"A\"}",
     "baseline_session_id must belong to session_ids"},
    {"{\"session_ids\":[\"a\",\"b\"],\"baseline_session_id\":\"a\",\"limit\":2}",
     "limit is not a known field"},
    {"{\"session_ids\":[\"a\",\"b\"],\"baseline_session_id\":null}",
     "baseline_session_id must be a string"},
    {"{\"session_ids\":null,\"baseline_session_id\":\"a\"}", "session_ids must be an array"},
    /* count is checked before blanks, blanks before uniqueness */
    {"{\"session_ids\":[\"\"],\"baseline_session_id\":\"\"}",
     "session_ids must contain between 2 and 5 sessions"},
    {"{\"session_ids\":[\"\",\"\"],\"baseline_session_id\":\"\"}",
     "session_ids cannot contain empty values"},
};

START_TEST(compare_request_messages)
{
    json_t *body = parse(COMPARE_ERRORS[_i].body);
    struct evd_compare_request req;
    struct evd_err err = {0};
    ck_assert_int_eq(evd_compare_request_decode(body, &req, &err), EVD_EINVAL);
    ck_assert_str_eq(err.msg, COMPARE_ERRORS[_i].msg);
    json_decref(body);
}
END_TEST

START_TEST(compare_request_ok)
{
    json_t *body = parse("{\"session_ids\":[\"a\",\"b\",\"c\"],\"baseline_session_id\":\"c\"}");
    struct evd_compare_request req;
    struct evd_err err = {0};
    ck_assert_int_eq(evd_compare_request_decode(body, &req, &err), EVD_OK);
    ck_assert_int_eq(req.n, 3);
    ck_assert_int_eq(req.baseline, 2);
    ck_assert_str_eq(req.ids[1], "b");
    json_decref(body);
}
END_TEST

/* ---- metrics sums ------------------------------------------------------------------------- */

START_TEST(metrics_add_sums_turns)
{
    json_t *t1 = turn_metrics("s", 2, 1, 1, 100, 20, 0.5, 4, 300);
    json_t *t2 = turn_metrics("s", 1, 0, 0, 50, 5, 0.25, 2, 100);
    json_t *sum = evd_session_metrics_add(NULL, t1, "s", true);
    json_t *sum2 = evd_session_metrics_add(sum, t2, "s", false);
    struct evd_err err = {0};
    ck_assert_int_eq(evd_metrics_check(sum2, "metrics", &err), EVD_OK);
    ck_assert_int_eq(total_int(sum2, "turns"), 3);
    ck_assert_int_eq(total_int(sum2, "function_calls"), 1);
    ck_assert_int_eq(total_int(sum2, "function_call_errors"), 1);
    ck_assert_int_eq(total_int(sum2, "input_tokens"), 150);
    ck_assert_int_eq(total_int(sum2, "output_tokens"), 25);
    ck_assert_int_eq(total_int(sum2, "sessions"), 1);
    ck_assert(fabs(json_real_value(json_object_get(json_object_get(sum2, "totals"), "cost_usd")) -
                   0.75) < 1e-12);
    json_t *tr = json_object_get(sum2, "traces");
    ck_assert_int_eq(json_integer_value(json_object_get(tr, "trace_count")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(tr, "span_count")), 6);
    ck_assert_int_eq(json_integer_value(json_object_get(tr, "error_span_count")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(tr, "duration_ms")), 400);
    ck_assert(json_is_false(json_object_get(sum2, "complete")));
    ck_assert_str_eq(json_string_value(json_object_get(sum2, "root_session_id")), "s");
    json_t *entry = json_array_get(json_object_get(sum2, "by_session"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(entry, "input_tokens")), 150);
    json_decref(t1);
    json_decref(t2);
    json_decref(sum);
    json_decref(sum2);
}
END_TEST

START_TEST(metrics_add_drops_what_a_generation_did_not_report)
{
    json_t *t1 = turn_metrics("s", 1, 0, 0, 100, 20, 0.5, 2, 10);
    json_t *t2 = turn_metrics("s", 1, 0, 0, -1, 5, -1, 2, 10); /* no input, unpriced */
    json_t *t3 = turn_metrics("s", 0, 0, 0, -1, -1, -1, 1, 0); /* failed before any generation */
    json_t *a = evd_session_metrics_add(t1, t3, "s", true);
    /* A turn without generations does not erase the figures. */
    ck_assert_int_eq(total_int(a, "input_tokens"), 100);
    ck_assert_ptr_nonnull(json_object_get(json_object_get(a, "totals"), "cost_usd"));
    json_t *b = evd_session_metrics_add(a, t2, "s", true);
    ck_assert_ptr_null(json_object_get(json_object_get(b, "totals"), "input_tokens"));
    ck_assert_ptr_null(json_object_get(json_object_get(b, "totals"), "cost_usd"));
    ck_assert_int_eq(total_int(b, "output_tokens"), 25);
    ck_assert_int_eq(total_int(b, "turns"), 2);
    /* Once unknown, it stays unknown. */
    json_t *c = evd_session_metrics_add(b, t1, "s", true);
    ck_assert_ptr_null(json_object_get(json_object_get(c, "totals"), "input_tokens"));
    /* Traces missing on one side: none in the sum. */
    json_object_set_new(t1, "traces", json_null());
    json_t *d = evd_session_metrics_add(t2, t1, "s", true);
    ck_assert(json_is_null(json_object_get(d, "traces")));
    json_t *nothing = evd_session_metrics_add(NULL, t3, "s", true);
    ck_assert_ptr_null(json_object_get(json_object_get(nothing, "totals"), "input_tokens"));
    ck_assert_int_eq(total_int(nothing, "turns"), 0);
    json_decref(t1);
    json_decref(t2);
    json_decref(t3);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(d);
    json_decref(nothing);
}
END_TEST

/* ---- transcript --------------------------------------------------------------------------- */

START_TEST(messages_from_transcripts)
{
    json_t *turns = parse(
        "[{\"turn_id\":\"turn_1\",\"prompt\":\"weather?\",\"created_at\":1000,\"transcript\":"
        "{\"generations\":[{\"turn\":1,\"status\":\"ok\",\"model\":\"m\",\"response_model\":"
        "\"m-2025\",\"started_at_ms\":1010,\"latency_ms\":5,\"text\":\"\",\"tool_calls\":[{\"id\":"
        "\"c1\",\"name\":\"agent_trigger\",\"arguments\":{\"function_id\":\"w\",\"payload\":{\"c\":"
        "\"Oslo\"}}}],\"usage\":{\"input_tokens\":10,\"output_tokens\":3},\"cost_usd\":0.5},"
        "{\"turn\":2,\"status\":\"error\",\"error\":\"503\"},"
        "{\"turn\":3,\"status\":\"ok\",\"model\":\"m\",\"started_at_ms\":1100,\"latency_ms\":7,"
        "\"text\":\"cold\",\"tool_calls\":[],\"usage\":{\"input_tokens\":20,\"output_tokens\":1}}],"
        "\"function_calls\":[{\"call_id\":\"c1\",\"function_id\":\"w\",\"turn\":1,\"arguments\":"
        "{\"c\":\"Oslo\"},\"started_at_ms\":1020,\"duration_ms\":4,\"status\":\"ok\",\"result\":"
        "{\"t\":-3}}]}},"
        "{\"turn_id\":\"turn_2\",\"prompt\":\"thanks\",\"created_at\":2000}]");
    json_t *m = evd_session_messages(turns);
    ck_assert_int_eq(json_array_size(m), 5);
    static const char *roles[] = {"user", "assistant", "function", "assistant", "user"};
    for (size_t i = 0; i < 5; i++) {
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(m, i), "role")),
                         roles[i]);
        ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(m, i), "index")),
                         (json_int_t)i);
    }
    json_t *a1 = json_array_get(m, 1);
    ck_assert(json_is_null(json_object_get(a1, "content")));
    ck_assert_str_eq(json_string_value(json_object_get(a1, "model")), "m-2025");
    ck_assert_int_eq(json_integer_value(json_object_get(a1, "created_at")), 1015);
    json_t *fc = json_array_get(json_object_get(a1, "function_calls"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(fc, "function_id")), "w");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(fc, "arguments"), "c")),
                     "Oslo");
    json_t *usage = json_object_get(a1, "usage");
    ck_assert_int_eq(json_integer_value(json_object_get(usage, "input_tokens")), 10);
    ck_assert(json_is_null(json_object_get(usage, "reasoning_tokens")));
    ck_assert(json_real_value(json_object_get(usage, "cost_usd")) == 0.5);
    json_t *f = json_array_get(m, 2);
    ck_assert(json_is_null(json_object_get(f, "error")));
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(f, "result"), "t")), -3);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(m, 3), "content")), "cold");
    ck_assert_int_eq(
        evd_session_transcript_messages(json_object_get(json_array_get(turns, 0), "transcript")),
        3);
    ck_assert_int_eq(evd_session_transcript_messages(NULL), 0);
    json_decref(m);
    json_decref(turns);
}
END_TEST

START_TEST(session_status_for_turns)
{
    ck_assert_str_eq(evd_session_status_for_turn(NULL), "idle");
    ck_assert_str_eq(evd_session_status_for_turn("queued"), "working");
    ck_assert_str_eq(evd_session_status_for_turn("running"), "working");
    ck_assert_str_eq(evd_session_status_for_turn("completed"), "done");
    ck_assert_str_eq(evd_session_status_for_turn("failed"), "error");
    ck_assert_str_eq(evd_session_status_for_turn("cancelled"), "cancelled");
}
END_TEST

/* ---- summary, deltas, comparison ---------------------------------------------------------- */

START_TEST(summary_and_deltas)
{
    json_t *base = turn_metrics("a", 2, 0, 0, 100, 20, 0.0002, 3, 50);
    json_t *other = turn_metrics("b", 4, 2, 1, 300, 60, 0.0006, 7, 80);
    json_t *sb = evd_compare_summary(base, true, 1000);
    json_t *so = evd_compare_summary(other, true, 1500);
    ck_assert_int_eq(json_integer_value(json_object_get(so, "total_tokens")), 360);
    ck_assert(json_real_value(json_object_get(so, "tokens_per_generation")) == 90.0);
    ck_assert(fabs(json_real_value(json_object_get(so, "cost_per_generation_usd")) - 0.00015) <
              1e-15);
    ck_assert(json_real_value(json_object_get(so, "function_error_rate")) == 0.5);
    ck_assert(json_is_null(json_object_get(sb, "function_error_rate")));
    ck_assert_int_eq(json_integer_value(json_object_get(so, "descendants")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(so, "wall_time_ms")), 1500);
    json_t *d = evd_compare_deltas(so, sb);
    json_t *tt = json_object_get(d, "total_tokens");
    ck_assert_int_eq(json_integer_value(json_object_get(tt, "absolute")), 240);
    ck_assert(json_real_value(json_object_get(tt, "percent")) == 200.0);
    json_t *fc = json_object_get(d, "function_calls");
    ck_assert_int_eq(json_integer_value(json_object_get(fc, "absolute")), 2);
    ck_assert(json_is_null(json_object_get(fc, "percent"))); /* baseline 0 */
    json_t *er = json_object_get(d, "function_error_rate");
    ck_assert(json_is_null(json_object_get(er, "absolute")));
    ck_assert(json_is_null(json_object_get(er, "percent")));
    json_t *tpg = json_object_get(d, "tokens_per_generation");
    ck_assert(json_is_real(json_object_get(tpg, "absolute")));
    ck_assert(json_real_value(json_object_get(tpg, "absolute")) == 30.0);
    ck_assert(json_real_value(json_object_get(tpg, "percent")) == 50.0);
    for (const char *const *k = EVD_COMPARE_METRICS; *k; k++) {
        ck_assert_ptr_nonnull(json_object_get(so, *k));
        ck_assert_ptr_nonnull(json_object_get(d, *k));
    }
    json_t *empty = evd_compare_summary(NULL, false, 0);
    for (const char *const *k = EVD_COMPARE_METRICS; *k; k++)
        ck_assert(json_is_null(json_object_get(empty, *k)));
    json_t *dn = evd_compare_deltas(so, NULL);
    ck_assert(json_is_null(json_object_get(json_object_get(dn, "generations"), "absolute")));
    json_decref(dn);
    json_decref(empty);
    json_decref(d);
    json_decref(sb);
    json_decref(so);
    json_decref(base);
    json_decref(other);
}
END_TEST

START_TEST(comparison_reports_partial_and_errors)
{
    json_t *done = turn_metrics("a", 1, 0, 0, 100, 20, 0.0002, 2, 50);
    json_t *finished = turn_metrics("b", 1, 0, 0, 10, 2, 0.00002, 2, 50);
    json_t *progress = turn_metrics("b", 1, 1, 0, 30, 3, 0.00004, 2, 20);
    json_object_set_new(progress, "complete", json_false());
    json_t *broken = parse("{\"totals\":\"x\"}");
    json_t *meta = parse("{\"status\":\"working\"}");
    struct evd_compare_source src[3] = {
        {.session_id = "a",
         .kind = "session",
         .title = "A",
         .session = meta,
         .turn_status = "completed",
         .terminal = true,
         .metrics = done,
         .has_wall_time = true,
         .wall_time_ms = 10},
        {.session_id = "b",
         .kind = "session",
         .session = meta,
         .turn_status = "running",
         .terminal = false,
         .metrics = finished,
         .progress = progress,
         .has_wall_time = true,
         .wall_time_ms = 20},
        {.session_id = "c",
         .kind = "evaluation_run",
         .session = meta,
         .turn_status = "completed",
         .terminal = true,
         .metrics = broken},
    };
    json_t *cmp = evd_compare_build(src, 3, 0, 42);
    ck_assert_ptr_nonnull(cmp);
    ck_assert_int_eq(json_integer_value(json_object_get(cmp, "captured_at")), 42);
    json_t *items = json_object_get(cmp, "sessions");
    json_t *b = json_array_get(items, 1);
    json_t *life = json_object_get(b, "lifecycle");
    ck_assert(json_is_true(json_object_get(life, "partial")));
    ck_assert(json_is_false(json_object_get(life, "complete")));
    ck_assert(json_is_false(json_object_get(json_object_get(b, "metrics"), "complete")));
    /* finished turn + running snapshot */
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(b, "summary"), "total_tokens")), 45);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(b, "summary"), "generations")), 2);
    ck_assert(json_is_null(json_object_get(b, "title")));
    json_t *c = json_array_get(items, 2);
    ck_assert_int_eq(json_array_size(json_object_get(c, "errors")), 1);
    ck_assert(json_is_null(json_object_get(c, "metrics")));
    ck_assert(json_is_null(
        json_object_get(json_object_get(json_object_get(c, "deltas"), "generations"), "absolute")));
    json_t *a = json_array_get(items, 0);
    ck_assert(json_is_false(json_object_get(json_object_get(a, "lifecycle"), "partial")));
    ck_assert_int_eq(json_array_size(json_object_get(a, "errors")), 0);
    json_decref(cmp);

    /* A baseline without metrics gives null deltas to everyone. */
    cmp = evd_compare_build(src, 3, 2, 42);
    a = json_array_get(json_object_get(cmp, "sessions"), 0);
    ck_assert(json_is_null(json_object_get(
        json_object_get(json_object_get(a, "deltas"), "total_tokens"), "absolute")));
    json_decref(cmp);
    json_decref(done);
    json_decref(finished);
    json_decref(progress);
    json_decref(broken);
    json_decref(meta);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("session_domain");
    TCase *tc = tcase_create("requests");
    tcase_add_test(tc, create_defaults_and_normalization);
    tcase_add_loop_test(tc, create_errors_name_the_field, 0,
                        (int)(sizeof(CREATE_ERRORS) / sizeof(CREATE_ERRORS[0])));
    tcase_add_test(tc, evaluation_limit_messages_are_unchanged);
    tcase_add_test(tc, message_requests);
    tcase_add_loop_test(tc, compare_request_messages, 0,
                        (int)(sizeof(COMPARE_ERRORS) / sizeof(COMPARE_ERRORS[0])));
    tcase_add_test(tc, compare_request_ok);
    suite_add_tcase(s, tc);
    tc = tcase_create("metrics");
    tcase_add_test(tc, metrics_add_sums_turns);
    tcase_add_test(tc, metrics_add_drops_what_a_generation_did_not_report);
    tcase_add_test(tc, messages_from_transcripts);
    tcase_add_test(tc, session_status_for_turns);
    tcase_add_test(tc, summary_and_deltas);
    tcase_add_test(tc, comparison_reports_partial_and_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
