/*
 * Fixture of the agent-loop integration suites (test_harness_loop.c and
 * test_harness_loop_faults.c): one evald-stub child that requires a key, the tool server
 * of harness_support.h, and two provider registries loaded from a fake environment that
 * points every kind at the stub (hl_providers with the right key, hl_wrong_providers with
 * a wrong one). The prices file gives every test model the same prices (see hl_price).
 * Start it once in main, before any thread, and run the suite without fork; the per-test
 * helpers fail the running Check test on a bad script or a run that does not return
 * EVD_OK.
 */
#ifndef EVD_TESTS_HARNESS_LOOP_FIXTURE_H
#define EVD_TESTS_HARNESS_LOOP_FIXTURE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "harness/harness.h"
#include "tests/support/itest.h"

/* One wire kind: the stub's api name, the evald provider and the model used. */
struct hl_kind_case {
    const char *api;      /* stub api name */
    const char *provider; /* evald provider */
    const char *model;
};

/* responses/openai/gpt-test, messages/anthropic/claude-test, chat/local/local-test. */
#define NKINDS 3
extern const struct hl_kind_case hl_kinds[NKINDS];

extern struct evd_t_proc hl_stub;
extern bool hl_ready;                            /* hl_setup_all succeeded */
extern struct evd_providers *hl_providers;       /* right key */
extern struct evd_providers *hl_wrong_providers; /* wrong key */

/* Starts curl, the stub and the tool server and loads both registries; on any failure
 * leaves hl_ready false (each test then skips itself with NEED_STUB). */
void hl_setup_all(void);
void hl_teardown_all(void);

/* First statement of each test: skips it, with a SKIPPED line, when the stub is missing. */
#define NEED_STUB()                                                                                \
    do {                                                                                           \
        if (!hl_ready) {                                                                           \
            fprintf(stderr, "SKIPPED: %s needs evald-stub\n", __func__);                           \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define JS(o, k) json_string_value(json_object_get((o), (k)))
#define JI(o, k) json_integer_value(json_object_get((o), (k)))

/* Replaces the stub's script (printf-style JSON, checked to parse), then clears the
 * stub's request log and the tool server's counters. */
void hl_script(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One run: NULL fields take the defaults (session "sess-it", prompt "Hi", hl_providers);
 * the JSON texts are parsed, and model_extra is merged into {model, provider}. The
 * tools offered are math::add (/add), net::fetch (/echo) and slow (/slow, 500 ms). */
struct hl_run_args {
    const struct hl_kind_case *k;
    const char *session;
    const char *prompt;
    const char *system_prompt;
    const char *model_extra; /* JSON fields merged into model, or NULL */
    const char *limits;      /* JSON or NULL */
    const char *functions;   /* JSON or NULL */
    const char *output;      /* JSON or NULL */
    json_t *conversation;    /* borrowed or NULL */
    const struct evd_providers *providers;
    const struct evd_harness_dispatch *dispatch;
    const char *mock_tools;   /* JSON or NULL: input.mock_tools */
    const char *tool_results; /* JSON or NULL: input.tool_results */
};

/* Runs the loop (thread-safe: many may run at once); *out is the caller's to clear. */
void hl_run(const struct hl_run_args *a, struct evd_harness_outcome *out,
            struct evd_cancel *cancel);

/* The last n requests the stub received (new reference). */
json_t *hl_last_requests(int n);

/* Cost in USD of a call at the fixture's prices: 1, 0.5 (cache read), 2 (cache write) and
 * 10 (output) USD per million tokens. */
double hl_price(int64_t in, int64_t cached, int64_t write, int64_t o);

/* Fails the test unless the run completed, naming its status and error. */
void hl_assert_completed(const struct evd_harness_outcome *o);

#endif
