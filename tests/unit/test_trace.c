/*
 * Unit tests for common/trace.c and the trace fields of common/log.c: a run attempt's ids
 * are the SHA-256 derivation (checked against values worked out with Python's hashlib),
 * traceparent is W3C's version 00 form, child spans name their parent, the sink receives
 * what is submitted (and nothing leaks without one), and log lines carry the thread's
 * run ids only while it names one.
 */
#include <check.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/trace.h"
#include "common/util.h"
#include "tests/support/testutil.h"

static bool is_lower_hex(const char *s, size_t n)
{
    if (strlen(s) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            return false;
    return true;
}

START_TEST(run_ids_are_the_documented_digest)
{
    /* python3: h = sha256(b'evald-trace\0eval_0123\0control-1\0' + b'1').hexdigest()
     * trace = h[:32], root span = h[32:48] */
    struct evd_trace_ctx ctx;
    char t[33], s[17];
    evd_trace_for_run("eval_0123", "control-1", 1, &ctx);
    evd_trace_hex(&ctx, t, s);
    ck_assert_str_eq(t, "a4902dd8ffba97eb23ef982d603c77e3");
    ck_assert_str_eq(s, "b525f024572d3fba");
    evd_trace_for_run("eval_0123", "control-1", 2, &ctx);
    evd_trace_hex(&ctx, t, s);
    ck_assert_str_eq(t, "7e57dcba1a37d9bb2da65657792c9f07");
    ck_assert_str_eq(s, "ecf72e6abc8bd47e");
    char only[33];
    evd_trace_id_for_run("eval_0123", "control-1", 2, only);
    ck_assert_str_eq(only, t);
    /* The NUL separators keep neighbouring ids apart. */
    char a[33], b[33];
    evd_trace_id_for_run("ab", "c", 1, a);
    evd_trace_id_for_run("a", "bc", 1, b);
    ck_assert_str_ne(a, b);
}
END_TEST

START_TEST(traceparent_is_w3c_version_00)
{
    struct evd_trace_ctx ctx;
    char tp[EVD_TRACEPARENT_LEN + 1];
    evd_trace_for_run("eval_0123", "control-1", 1, &ctx);
    evd_traceparent(&ctx, tp);
    ck_assert_str_eq(tp, "00-a4902dd8ffba97eb23ef982d603c77e3-b525f024572d3fba-01");
    ck_assert_uint_eq(strlen(tp), EVD_TRACEPARENT_LEN);
}
END_TEST

START_TEST(children_name_their_parent)
{
    struct evd_trace_ctx root_ctx, child_ctx;
    evd_trace_for_run("exp_1", "case1-arm0-rep1", 1, &root_ctx);
    struct evd_span *root = evd_span_new(&root_ctx, false, "invoke_agent v1", EVD_SPAN_INTERNAL, 5);
    ck_assert_ptr_nonnull(root);
    ck_assert(!root->has_parent);
    ck_assert_mem_eq(root->span_id, root_ctx.span_id, EVD_SPAN_ID_LEN);
    evd_span_ctx(root, &child_ctx);
    struct evd_span *child = evd_span_new(&child_ctx, true, "chat m", EVD_SPAN_CLIENT, 6);
    ck_assert_ptr_nonnull(child);
    ck_assert(child->has_parent);
    ck_assert_mem_eq(child->trace_id, root_ctx.trace_id, EVD_TRACE_ID_LEN);
    ck_assert_mem_eq(child->parent_span_id, root_ctx.span_id, EVD_SPAN_ID_LEN);
    ck_assert(memcmp(child->span_id, root->span_id, EVD_SPAN_ID_LEN) != 0);
    char hex[17];
    evd_hex_encode(child->span_id, EVD_SPAN_ID_LEN, hex);
    ck_assert(is_lower_hex(hex, 16));
    ck_assert_str_ne(hex, "0000000000000000");
    /* Attributes and the failure helper. */
    evd_span_set_str(child, "a", "x");
    evd_span_set_str(child, "none", NULL);
    evd_span_set_int(child, "n", 7);
    evd_span_fail(child, "429", "too many");
    ck_assert_str_eq(json_string_value(json_object_get(child->attributes, "a")), "x");
    ck_assert_ptr_null(json_object_get(child->attributes, "none"));
    ck_assert_int_eq(json_integer_value(json_object_get(child->attributes, "n")), 7);
    ck_assert_str_eq(json_string_value(json_object_get(child->attributes, "error.type")), "429");
    ck_assert_int_eq(child->status, EVD_SPAN_ERROR);
    ck_assert_str_eq(child->status_message, "too many");
    evd_span_event(child, "evald.retry", 9, json_pack("{s:i}", "w", 1));
    ck_assert_uint_eq(json_array_size(child->events), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(child->events, 0),
                                                        "time_ns")),
                     9);
    evd_span_free(child);
    evd_span_free(root);
    /* NULL spans are no-ops (the callers skip building spans when nothing exports). */
    evd_span_set_str(NULL, "a", "b");
    evd_span_event(NULL, "e", 1, json_object());
    evd_span_fail(NULL, "x", "y");
    evd_span_free(NULL);
    evd_span_submit(NULL);
}
END_TEST

static struct evd_span *received[4];
static int nreceived;

static void test_sink(struct evd_span *s)
{
    if (nreceived < 4)
        received[nreceived++] = s;
    else
        evd_span_free(s);
}

START_TEST(the_sink_takes_what_is_submitted)
{
    struct evd_trace_ctx ctx;
    evd_trace_for_run("s", "turn-1", 1, &ctx);
    ck_assert(!evd_trace_enabled());
    ck_assert(!evd_trace_capture_content());
    /* Without a sink a submitted span is freed (the sanitizer run would see a leak). */
    evd_span_submit(evd_span_new(&ctx, false, "x", EVD_SPAN_INTERNAL, 1));
    evd_trace_set_sink(test_sink, true);
    ck_assert(evd_trace_enabled());
    ck_assert(evd_trace_capture_content());
    struct evd_span *s = evd_span_new(&ctx, false, "y", EVD_SPAN_INTERNAL, 1);
    evd_span_submit(s);
    ck_assert_int_eq(nreceived, 1);
    ck_assert_ptr_eq(received[0], s);
    evd_trace_set_sink(NULL, true); /* no sink: no capture either */
    ck_assert(!evd_trace_enabled());
    ck_assert(!evd_trace_capture_content());
    for (int i = 0; i < nreceived; i++)
        evd_span_free(received[i]);
    nreceived = 0;
}
END_TEST

/* The lines written by `fn` while stderr goes to a temporary file (malloc'd). */
static char *captured_lines(void (*fn)(void))
{
    fflush(stderr);
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    int saved = dup(STDERR_FILENO);
    ck_assert_int_ge(dup2(fileno(f), STDERR_FILENO), 0);
    fn();
    dup2(saved, STDERR_FILENO);
    close(saved);
    long n = ftell(f);
    rewind(f);
    char *buf = calloc(1, (size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return buf;
}

static void three_lines(void)
{
    evd_log(EVD_LOG_INFO, "before", NULL);
    evd_log_set_trace("a4902dd8ffba97eb23ef982d603c77e3", "b525f024572d3fba");
    evd_log(EVD_LOG_INFO, "during", "run_id", "control-1", NULL);
    evd_log_set_trace(NULL, NULL);
    evd_log(EVD_LOG_INFO, "after", NULL);
}

START_TEST(log_lines_carry_the_threads_run)
{
    char *text = captured_lines(three_lines);
    char *save = NULL;
    int n = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *j = json_loads(line, 0, NULL);
        ck_assert_msg(j != NULL, "not JSON: %s", line);
        const char *msg = json_string_value(json_object_get(j, "msg"));
        const char *tid = json_string_value(json_object_get(j, "trace_id"));
        const char *sid = json_string_value(json_object_get(j, "span_id"));
        if (strcmp(msg, "during") == 0) {
            ck_assert_str_eq(tid, "a4902dd8ffba97eb23ef982d603c77e3");
            ck_assert_str_eq(sid, "b525f024572d3fba");
        } else {
            ck_assert_ptr_null(tid);
            ck_assert_ptr_null(sid);
        }
        json_decref(j);
        n++;
    }
    ck_assert_int_eq(n, 3);
    free(text);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("trace");
    tcase_add_test(tc, run_ids_are_the_documented_digest);
    tcase_add_test(tc, traceparent_is_w3c_version_00);
    tcase_add_test(tc, children_name_their_parent);
    tcase_add_test(tc, the_sink_takes_what_is_submitted);
    tcase_add_test(tc, log_lines_carry_the_threads_run);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
