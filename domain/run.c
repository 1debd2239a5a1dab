/*
 * EvalRunV1 construction and transitions (see run.h). Mutates only the objects passed
 * in; thread-safe for distinct objects.
 */
#include "domain/run.h"

#include <string.h>

#include "domain/fields.h"
#include "domain/metrics.h"

/* The members of EvalRunReportV1, in a stable order. */
static const char *const RUN_FIELDS[] = {
    "run_id",
    "role",
    "iteration",
    "execution_position",
    "pair_position",
    "session_id",
    "status",
    "started_at",
    "turn_id",
    "completed_at",
    "output",
    "passed",
    "evaluation",
    "benchmark",
    "metrics",
    "failures",
    NULL,
};

json_t *evd_run_new(const char *evaluation_id, const struct evd_plan_entry *e)
{
    char run_id[64], session_id[256];
    evd_plan_run_id(e->role, e->iteration, run_id, sizeof(run_id));
    evd_plan_session_id(evaluation_id, e->role, e->iteration, session_id, sizeof(session_id));
    json_t *run = json_object();
    int rc = 0;
    rc |= json_object_set_new(run, "run_id", json_string(run_id));
    rc |= json_object_set_new(run, "role", json_string(evd_role_name(e->role)));
    rc |= json_object_set_new(run, "iteration", json_integer(e->iteration));
    rc |= json_object_set_new(run, "execution_position", json_integer(e->execution_position));
    rc |= json_object_set_new(run, "pair_position", json_integer(e->pair_position));
    rc |= json_object_set_new(run, "session_id", json_string(session_id));
    rc |= json_object_set_new(run, "status", json_string(evd_run_status_name(EVD_RUN_PENDING)));
    rc |= json_object_set_new(run, "started_at", json_integer(0));
    rc |= json_object_set_new(run, "failures", json_array());
    if (rc != 0) {
        json_decref(run);
        return NULL;
    }
    return run;
}

json_t *evd_run_failure_new(enum evd_phase phase, const char *function_id, const char *message)
{
    json_t *f = json_object();
    int rc = 0;
    rc |= json_object_set_new(f, "phase", json_string(evd_phase_name(phase)));
    if (function_id != NULL)
        rc |= json_object_set_new(f, "function_id", json_string(function_id));
    rc |= json_object_set_new(f, "message", json_string(message != NULL ? message : ""));
    if (rc != 0) {
        json_decref(f);
        return NULL;
    }
    return f;
}

int evd_run_add_failure(json_t *run, json_t *failure)
{
    json_t *failures = json_object_get(run, "failures");
    if (!json_is_array(failures)) {
        failures = json_array();
        if (json_object_set_new(run, "failures", failures) != 0) {
            json_decref(failure);
            return -1;
        }
    }
    return json_array_append_new(failures, failure);
}

bool evd_run_get_role(const json_t *run, enum evd_role *out)
{
    return evd_role_parse(evd_fields_str(run, "role"), out);
}

bool evd_run_get_status(const json_t *run, enum evd_run_status *out)
{
    return evd_run_status_parse(evd_fields_str(run, "status"), out);
}

bool evd_run_is_terminal(const json_t *run)
{
    enum evd_run_status s;
    return evd_run_get_status(run, &s) && evd_run_status_is_terminal(s);
}

int evd_run_passed(const json_t *run)
{
    json_t *p = json_object_get(run, "passed");
    if (json_is_true(p))
        return 1;
    if (json_is_false(p))
        return 0;
    return -1;
}

static int set_status(json_t *run, enum evd_run_status status)
{
    return json_object_set_new(run, "status", json_string(evd_run_status_name(status)));
}

int evd_run_mark_running(json_t *run, int64_t started_at)
{
    int rc = set_status(run, EVD_RUN_RUNNING);
    rc |= json_object_set_new(run, "started_at", json_integer(started_at));
    return rc != 0 ? -1 : 0;
}

int evd_run_set_turn_id(json_t *run, const char *turn_id)
{
    if (turn_id == NULL) {
        json_object_del(run, "turn_id");
        return 0;
    }
    return json_object_set_new(run, "turn_id", json_string(turn_id));
}

int evd_run_record_outcome(json_t *run, const json_t *output, const json_t *metrics,
                           uint64_t wall_time_ms, int64_t completed_at)
{
    int rc = 0;
    json_t *bench = NULL;
    rc |= json_object_set_new(run, "output", output != NULL ? json_deep_copy(output) : json_null());
    if (metrics != NULL) {
        rc |= evd_fields_set_copy(run, "metrics", metrics);
        if (evd_metrics_benchmark(metrics, wall_time_ms, &bench) != EVD_OK)
            rc = -1;
    } else {
        json_object_del(run, "metrics");
    }
    if (bench != NULL)
        rc |= json_object_set_new(run, "benchmark", bench);
    else
        json_object_del(run, "benchmark");
    rc |= json_object_set_new(run, "completed_at", json_integer(completed_at));
    return rc != 0 ? -1 : 0;
}

bool evd_run_needs_evaluation(const json_t *request, const json_t *run)
{
    const json_t *evaluator = json_object_get(request, "evaluator");
    const json_t *output = json_object_get(run, "output");
    return json_is_object(evaluator) && output != NULL && !json_is_null(output);
}

static int append_all(json_t *run, json_t *failures)
{
    size_t i;
    json_t *f;
    int rc = 0;
    json_array_foreach(failures, i, f)
    {
        rc |= evd_run_add_failure(run, json_incref(f));
    }
    return rc;
}

int evd_run_complete(json_t *run, const struct evd_limits *limits, const json_t *evaluation)
{
    json_t *limit_failures = evd_limits_failures(limits, json_object_get(run, "metrics"));
    if (limit_failures == NULL)
        return -1;
    int rc = 0;
    if (evaluation != NULL) {
        bool passed = json_is_true(json_object_get(evaluation, "passed")) &&
                      json_array_size(limit_failures) == 0;
        rc |= evd_fields_set_copy(run, "evaluation", evaluation);
        rc |= json_object_set_new(run, "passed", json_boolean(passed));
    } else {
        rc |= json_object_set_new(run, "passed", json_null());
    }
    rc |= append_all(run, limit_failures);
    rc |= set_status(run, EVD_RUN_COMPLETED);
    json_decref(limit_failures);
    return rc != 0 ? -1 : 0;
}

static int end_run(json_t *run, enum evd_run_status status, enum evd_phase phase,
                   const char *function_id, const char *message, int64_t completed_at)
{
    int rc = set_status(run, status);
    rc |= json_object_set_new(run, "passed", json_null());
    rc |= json_object_set_new(run, "completed_at", json_integer(completed_at));
    rc |= evd_run_add_failure(run, evd_run_failure_new(phase, function_id, message));
    return rc != 0 ? -1 : 0;
}

int evd_run_fail(json_t *run, enum evd_phase phase, const char *function_id, const char *message,
                 int64_t completed_at)
{
    return end_run(run, EVD_RUN_FAILED, phase, function_id, message, completed_at);
}

int evd_run_cancel(json_t *run, enum evd_phase phase, const char *function_id, const char *message,
                   int64_t completed_at)
{
    return end_run(run, EVD_RUN_CANCELLED, phase, function_id, message, completed_at);
}

int evd_runs_cancel_open(json_t *runs, int64_t completed_at)
{
    size_t i;
    json_t *run;
    int rc = 0;
    json_array_foreach(runs, i, run)
    {
        if (!evd_run_is_terminal(run))
            rc |= evd_run_cancel(run, EVD_PHASE_CANCEL, NULL, "evaluation cancelled", completed_at);
    }
    return rc != 0 ? -1 : 0;
}

static json_t *project(const json_t *run, bool share)
{
    json_t *out = json_object();
    int rc = 0;
    for (const char *const *k = RUN_FIELDS; *k != NULL; k++) {
        json_t *v = json_object_get(run, *k);
        if (v != NULL)
            rc |= share ? json_object_set(out, *k, v) : evd_fields_set_copy(out, *k, v);
    }
    if (rc != 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

json_t *evd_run_project(const json_t *run)
{
    return project(run, false);
}

json_t *evd_run_project_shared(const json_t *run)
{
    return project(run, true);
}

static json_t *empty_metrics(const char *session_id)
{
    return json_pack("{s:s, s:b, s:{s:i, s:i, s:i, s:i}, s:[]}", "root_session_id",
                     session_id != NULL ? session_id : "", "complete", 0, "totals", "sessions", 0,
                     "turns", 0, "function_calls", 0, "function_call_errors", 0, "by_session");
}

json_t *evd_run_evaluator_input(const char *evaluation_id, const json_t *run,
                                const json_t *arguments)
{
    const char *session_id = evd_fields_str(run, "session_id");
    const json_t *metrics = json_object_get(run, "metrics");
    const json_t *output = json_object_get(run, "output");
    json_t *in = json_object();
    int rc = 0;
    rc |= json_object_set_new(in, "evaluation_id", json_string(evaluation_id));
    rc |= evd_fields_set_copy(in, "run_id", json_object_get(run, "run_id"));
    rc |= evd_fields_set_copy(in, "role", json_object_get(run, "role"));
    rc |= evd_fields_set_copy(in, "session_id", json_object_get(run, "session_id"));
    rc |= json_object_set_new(in, "output", output != NULL ? json_deep_copy(output) : json_null());
    rc |= json_object_set_new(in, "metrics",
                              json_is_object(metrics) ? json_deep_copy(metrics)
                                                      : empty_metrics(session_id));
    rc |= json_object_set_new(in, "arguments",
                              arguments != NULL ? json_deep_copy(arguments) : json_object());
    if (rc != 0) {
        json_decref(in);
        return NULL;
    }
    return in;
}
