/*
 * Progress, report, result, status and summary projections (see report.h).
 * Pure; thread-safe; every object is built fresh from the record.
 */
#include "domain/report.h"

#include "domain/aggregate.h"
#include "domain/artifacts.h"
#include "domain/fields.h"
#include "domain/plan.h"
#include "domain/run.h"

void evd_report_count_runs(const json_t *runs, struct evd_run_counts *out)
{
    *out = (struct evd_run_counts){0};
    size_t i;
    json_t *run;
    out->total = (uint32_t)json_array_size(runs);
    json_array_foreach(runs, i, run)
    {
        int p = evd_run_passed(run);
        bool terminal = evd_run_is_terminal(run);
        out->terminal += terminal;
        out->passed += p == 1;
        out->failed += terminal && p == 0;
    }
}

static bool has_evaluator(const json_t *request)
{
    return json_is_object(json_object_get(request, "evaluator"));
}

static json_t *progress(const json_t *request, const json_t *runs, bool share)
{
    json_t *p = json_object();
    json_t *control = evd_aggregate_variant(runs, EVD_ROLE_CONTROL);
    json_t *treatment = evd_aggregate_variant(runs, EVD_ROLE_TREATMENT);
    json_t *projected = json_array();
    int rc = 0;
    size_t i;
    json_t *run;
    (void)request;
    json_array_foreach(runs, i, run)
    {
        rc |= json_array_append_new(projected,
                                    share ? evd_run_project_shared(run) : evd_run_project(run));
    }
    rc |= json_object_set_new(p, "effective_execution_order", evd_plan_effective_order(runs));
    if (control != NULL && treatment != NULL)
        rc |= json_object_set_new(p, "delta", evd_aggregate_delta(control, treatment));
    rc |= json_object_set_new(p, "control_aggregate", control);
    rc |= json_object_set_new(p, "treatment_aggregate", treatment);
    rc |= json_object_set_new(p, "order_sensitivity", evd_aggregate_order_sensitivity(runs));
    rc |= json_object_set_new(p, "runs", projected);
    if (rc != 0 || json_object_get(p, "delta") == NULL) {
        json_decref(p);
        return NULL;
    }
    return p;
}

json_t *evd_report_progress(const json_t *request, const json_t *runs)
{
    return progress(request, runs, false);
}

json_t *evd_report_build(const struct evd_eval_record *rec)
{
    const json_t *req = rec->request;
    json_t *r = progress(req, rec->runs, rec->share);
    int rc = r == NULL ? -1 : 0;
    const json_t *source = json_object_get(req, "source_evaluation_id");
    const json_t *evaluator = json_object_get(req, "evaluator");

    rc |= json_object_set_new(r, "schema_version", json_string("1"));
    rc |= json_object_set_new(r, "evaluation_id", json_string(rec->evaluation_id));
    if (json_is_string(source))
        rc |= evd_fields_set_copy(r, "source_evaluation_id", source);
    const char *order = evd_fields_str(req, "execution_order");
    rc |= json_object_set_new(
        r, "execution_order_policy",
        json_string(order != NULL ? order : evd_order_name(EVD_ORDER_CONTROL_FIRST)));
    rc |= evd_fields_set_copy(r, "dimension", json_object_get(req, "dimension"));
    rc |= evd_fields_set_copy(r, "model", json_object_get(req, "model"));
    rc |= evd_fields_set_copy(r, "limits", json_object_get(req, "limits"));
    if (json_is_object(evaluator))
        rc |= json_object_set_new(r, "evaluator", evd_artifacts_evaluator(evaluator));
    rc |= json_object_set_new(r, "control", evd_artifacts_variant(json_object_get(req, "control")));
    rc |= json_object_set_new(r, "treatment",
                              evd_artifacts_variant(json_object_get(req, "treatment")));
    rc |= json_object_set_new(r, "shared_artifacts", evd_artifacts_shared(req));
    if (rc == 0) {
        int eligible =
            evd_aggregate_eligible(json_object_get(r, "control_aggregate"),
                                   json_object_get(r, "treatment_aggregate"), has_evaluator(req));
        if (eligible >= 0)
            rc |= json_object_set_new(r, "eligible", json_boolean(eligible));
    }
    rc |= json_object_set_new(r, "created_at", json_integer(rec->created_at));
    rc |= json_object_set_new(r, "completed_at", json_integer(rec->completed_at));
    if (rc != 0) {
        json_decref(r);
        return NULL;
    }
    return r;
}

int evd_report_eligible(const json_t *report)
{
    json_t *e = json_object_get(report, "eligible");
    if (json_is_boolean(e))
        return json_is_true(e) ? 1 : 0;
    return -1;
}

/* The EvalProgressV1 members of a report (which was built from the same, terminal runs). */
static json_t *progress_of_report(const json_t *report, bool share)
{
    static const char *const keys[] = {"effective_execution_order", "delta", "control_aggregate",
                                       "treatment_aggregate", "order_sensitivity", "runs", NULL};
    json_t *p = json_object();
    int rc = p == NULL ? -1 : 0;
    for (const char *const *k = keys; *k != NULL && rc == 0; k++) {
        json_t *v = json_object_get(report, *k);
        if (v != NULL)
            rc |= share ? json_object_set(p, *k, v) : evd_fields_set_copy(p, *k, v);
    }
    if (rc != 0 || json_object_get(p, "delta") == NULL) {
        json_decref(p);
        return NULL;
    }
    return p;
}

json_t *evd_report_result(const struct evd_eval_record *rec)
{
    json_t *r = json_object();
    int rc = 0;
    rc |= json_object_set_new(r, "status", json_string(evd_eval_status_name(rec->status)));
    rc |= evd_fields_set_copy(r, "request", rec->request);
    if (rec->runs == NULL && json_is_object(rec->report))
        rc |= json_object_set_new(r, "progress", progress_of_report(rec->report, rec->share));
    else
        rc |= json_object_set_new(r, "progress", progress(rec->request, rec->runs, rec->share));
    if (json_is_object(rec->report))
        rc |= rec->share ? json_object_set(r, "report", (json_t *)rec->report)
                         : evd_fields_set_copy(r, "report", rec->report);
    if (rc != 0) {
        json_decref(r);
        return NULL;
    }
    return r;
}

static void record_counts(const struct evd_eval_record *rec, struct evd_run_counts *c)
{
    if (rec->runs == NULL && rec->counts != NULL)
        *c = *rec->counts;
    else
        evd_report_count_runs(rec->runs, c);
}

/* The members status and summary share. */
static int common_members(json_t *o, const struct evd_eval_record *rec,
                          const struct evd_run_counts *c)
{
    int rc = 0;
    rc |= json_object_set_new(o, "evaluation_id", json_string(rec->evaluation_id));
    rc |= json_object_set_new(o, "status", json_string(evd_eval_status_name(rec->status)));
    rc |= json_object_set_new(o, "terminal_runs", json_integer(c->terminal));
    rc |= json_object_set_new(o, "passed_runs", json_integer(c->passed));
    rc |= json_object_set_new(o, "failed_runs", json_integer(c->failed));
    rc |= json_object_set_new(o, "created_at", json_integer(rec->created_at));
    rc |= json_object_set_new(o, "updated_at", json_integer(rec->updated_at));
    if (rec->completed_at != 0)
        rc |= json_object_set_new(o, "completed_at", json_integer(rec->completed_at));
    if (rec->error != NULL)
        rc |= json_object_set_new(o, "error", json_string(rec->error));
    return rc;
}

static json_t *active_run(const json_t *runs)
{
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run)
    {
        enum evd_run_status s;
        if (!evd_run_get_status(run, &s) || s != EVD_RUN_RUNNING)
            continue;
        json_t *a = json_object();
        int rc = 0;
        static const char *const KEYS[] = {"run_id",     "role",       "iteration",
                                           "session_id", "started_at", NULL};
        for (const char *const *k = KEYS; *k != NULL; k++)
            rc |= evd_fields_set_copy(a, *k, json_object_get(run, *k));
        if (json_is_string(json_object_get(run, "turn_id")))
            rc |= evd_fields_set_copy(a, "turn_id", json_object_get(run, "turn_id"));
        if (rc != 0) {
            json_decref(a);
            return NULL;
        }
        return a;
    }
    return NULL;
}

json_t *evd_report_status(const struct evd_eval_record *rec)
{
    struct evd_run_counts c;
    record_counts(rec, &c);
    json_t *s = json_object();
    int rc = common_members(s, rec, &c);
    rc |= json_object_set_new(s, "total_runs", json_integer(c.total));
    if (rc == 0) {
        json_t *active = active_run(rec->runs);
        if (active != NULL)
            rc |= json_object_set_new(s, "active", active);
    }
    if (rc != 0) {
        json_decref(s);
        return NULL;
    }
    return s;
}

json_t *evd_report_summary(const struct evd_eval_record *rec)
{
    const json_t *req = rec->request;
    const json_t *model = json_object_get(req, "model");
    const json_t *provider = json_object_get(model, "provider");
    const json_t *c_label = json_object_get(json_object_get(req, "control"), "label");
    const json_t *t_label = json_object_get(json_object_get(req, "treatment"), "label");
    struct evd_run_counts c;
    record_counts(rec, &c);
    json_t *s = json_object();
    int rc = common_members(s, rec, &c);
    rc |= json_object_set_new(s, "total_runs",
                              json_integer(2 * evd_fields_int(req, "runs", c.total / 2)));
    rc |= evd_fields_set_copy(s, "dimension", json_object_get(req, "dimension"));
    rc |= evd_fields_set_copy(s, "model", json_object_get(model, "model"));
    if (json_is_string(provider))
        rc |= evd_fields_set_copy(s, "provider", provider);
    if (json_is_string(c_label))
        rc |= evd_fields_set_copy(s, "control_label", c_label);
    if (json_is_string(t_label))
        rc |= evd_fields_set_copy(s, "treatment_label", t_label);
    int eligible = rec->report != NULL ? evd_report_eligible(rec->report)
                   : rec->has_eligible ? (int)rec->eligible
                                       : -1;
    if (eligible >= 0)
        rc |= json_object_set_new(s, "eligible", json_boolean(eligible));
    if (rc != 0) {
        json_decref(s);
        return NULL;
    }
    return s;
}
