/*
 * Runs and experiments derived from a finished one (docs/experiments.md, "Re-score" and
 * "Retry"; "Re-score an evaluation"): the copy of an experiment's cases and runs in one
 * transaction (migrations/0012_reviews.sql), the copy of an evaluation's runs
 * (migrations/0013_evaluation_rescore.sql), and the one step both re-scores share: a run
 * (an experiment's cell, or an evaluation's run job) scores its stored output again by the
 * scenario's evaluator path (engine/scenario.c) instead of running the agent turn. The
 * jobs, leases, cancel, the writer and the analysis or report are those of any experiment
 * or evaluation (engine/cells.c, engine/runner.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/prometheus.h"
#include "common/util.h"
#include "domain/evaluators.h"
#include "domain/experiment.h"
#include "domain/plan.h"
#include "domain/request.h"
#include "engine/internal.h"
#include "engine/reviews.h"
#include "engine/scenario.h"
#include "store/experiments.h"
#include "store/reviews.h"
#include "store/tools.h"

/* Scores the stored agent turn `stored` ({output, metrics, benchmark, transcript}; stolen,
 * NULL when it could not be read: err says why, and the run is tried again after its
 * lease) of `run` with scenario s's evaluator. */
static void score_stored(struct evd_engine *e, struct evd_wconn *w, const struct evd_scenario *s,
                         json_t *stored, const struct evd_err *err, json_t *run,
                         struct evd_cancel *cancel, struct evd_scenario_outcome *out)
{
    if (stored == NULL) {
        evd_log(EVD_LOG_WARN, "could not read the run to score again", "subject_id",
                s->subject_id, "error", err->msg, NULL);
        memset(out, 0, sizeof(*out));
        out->not_started = true; /* tried again once the lease runs out */
        return;
    }
    const struct evd_scenario_stored st = {
        .output = json_object_get(stored, "output"),
        .metrics = json_object_get(stored, "metrics"),
        .benchmark = json_object_get(stored, "benchmark"),
        .transcript = json_object_get(stored, "transcript"),
    };
    evd_scenario_rescore(e, w, s, run, &st, cancel, out);
    json_decref(stored);
}

void evd_engine_rescore_cell(struct evd_engine *e, struct evd_wconn *w,
                             const struct evd_scenario *s, int case_index, int position,
                             json_t *run, struct evd_cancel *cancel,
                             struct evd_scenario_outcome *out)
{
    struct evd_err err = {0};
    PGconn *c = evd_wconn_get(w, &err);
    json_t *stored =
        c != NULL ? evd_store_rescore_input(c, s->subject_id, case_index, position, &err) : NULL;
    score_stored(e, w, s, stored, &err, run, cancel, out);
}

void evd_engine_rescore_run(struct evd_engine *e, struct evd_wconn *w,
                            const struct evd_scenario *s, int position, json_t *run,
                            struct evd_cancel *cancel, struct evd_scenario_outcome *out)
{
    struct evd_err err = {0};
    PGconn *c = evd_wconn_get(w, &err);
    json_t *stored = c != NULL ? evd_store_run_stored(c, s->subject_id, position, &err) : NULL;
    score_stored(e, w, s, stored, &err, run, cancel, out);
}

/* Refuses an evaluator nothing can run (the rule of POST /v1/evaluations): a built-in,
 * the agent review with valid arguments, a registered tool, or any iii function when the
 * adapter is configured. */
static enum evd_code check_evaluator(struct evd_engine *e, PGconn *c, const json_t *normalized,
                                     struct evd_err *err)
{
    const json_t *ev = json_object_get(normalized, "evaluator");
    const char *fid = json_string_value(json_object_get(ev, "function_id"));
    if (fid == NULL || evd_evaluator_is_builtin(fid))
        return EVD_OK;
    if (evd_evaluator_is_agent_review(fid))
        return evd_engine_review_check(e->opts.providers, json_object_get(ev, "arguments"), err);
    if (e->opts.remote != NULL)
        return EVD_OK;
    struct evd_tool tool;
    enum evd_code rc = evd_store_tool_get(c, fid, &tool, err);
    if (rc == EVD_ENOTFOUND)
        return evd_err_set(err, EVD_EINVAL,
                           "evaluator.function_id %s is neither a built-in evaluator nor a "
                           "registered tool",
                           fid);
    if (rc == EVD_OK)
        evd_store_tool_clear(&tool);
    return rc;
}

/* A body that may hold only the members named (NULL-terminated); an absent body is {}. */
static enum evd_code closed_body(const json_t *body, const char *const *allowed,
                                 struct evd_err *err)
{
    if (body == NULL)
        return EVD_OK;
    if (!json_is_object(body))
        return evd_err_set(err, EVD_EINVAL, "request body must be a JSON object");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)body, key, v)
    {
        bool known = false;
        for (size_t i = 0; allowed[i] != NULL && !known; i++)
            known = strcmp(allowed[i], key) == 0;
        if (!known)
            return evd_err_set(err, EVD_EINVAL, "%s is not a known field", key);
    }
    return EVD_OK;
}

/* Stores experiment <new id> of `kind` from `source` with `request` (borrowed) and wakes
 * the workers: *response {experiment_id, status, source_experiment_id[, retried_runs]}. */
static enum evd_code derive(struct evd_engine *e, PGconn *c, const char *source, const char *kind,
                            const json_t *request, json_t **response, struct evd_err *err)
{
    char id[64];
    evd_new_id("exp_", id, sizeof(id));
    char *text = json_dumps(request, JSON_COMPACT);
    if (text == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    int64_t reruns = 0;
    enum evd_code rc = evd_db_begin(c, err);
    if (rc == EVD_OK)
        rc = evd_store_experiment_derive(c, source, id, kind, text, evd_now_ms(), e->owner, &reruns,
                                         err);
    if (rc == EVD_OK)
        rc = evd_db_commit(c, err);
    evd_db_rollback(c);
    free(text);
    if (rc != EVD_OK)
        return rc;
    char runs[32];
    snprintf(runs, sizeof(runs), "%lld", (long long)reruns);
    evd_log(EVD_LOG_INFO, "experiment derived", "experiment_id", id, "source", source, "kind", kind,
            "runs", runs, NULL);
    evd_engine_wake(e, json_integer_value(json_object_get(request, "concurrency")));
    *response = json_pack("{s:s, s:s, s:s}", "experiment_id", id, "status", "queued",
                          "source_experiment_id", source);
    if (*response != NULL && strcmp(kind, "retry") == 0)
        json_object_set_new(*response, "retried_runs", json_integer((json_int_t)reruns));
    return *response ? EVD_OK : evd_err_set(err, EVD_ENOMEM, "out of memory");
}

/* The source's normalized request (new reference) and status; EVD_ENOTFOUND. */
static json_t *source_request(PGconn *c, const char *id, char status[16], struct evd_err *err)
{
    struct evd_store_experiment_shape shape;
    if (evd_store_experiment_shape(c, id, &shape, err) != EVD_OK)
        return NULL;
    json_t *request = json_loads(shape.request, 0, NULL);
    snprintf(status, 16, "%s", shape.status);
    evd_store_experiment_shape_clear(&shape);
    if (request == NULL)
        evd_err_set(err, EVD_EINTERNAL, "stored request of %s cannot be decoded", id);
    return request;
}

static bool live(const char *status)
{
    return strcmp(status, "queued") == 0 || strcmp(status, "running") == 0;
}

static enum evd_code not_finished(const char *id, struct evd_err *err)
{
    return evd_err_set(err, EVD_ECONFLICT,
                       "experiment %s has not finished; only a finished experiment can be "
                       "re-scored or retried",
                       id);
}

enum evd_code evd_experiment_rescore(struct evd_engine *e, const char *id, const json_t *body,
                                     json_t **response, struct evd_err *err)
{
    static const char *const fields[] = {"evaluator", NULL};
    enum evd_code rc = closed_body(body, fields, err);
    if (rc != EVD_OK)
        return rc;
    const json_t *evaluator = json_object_get(body, "evaluator");
    if (evaluator == NULL || json_is_null(evaluator))
        return evd_err_set(err, EVD_EINVAL, "evaluator is required");
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    json_t *request = NULL, *normalized = NULL, *bodies = NULL;
    char status[16];
    if ((request = source_request(c, id, status, err)) == NULL) {
        rc = evd_db_code(err);
        goto out;
    }
    if (live(status)) {
        rc = not_finished(id, err);
        goto out;
    }
    /* The source's request with the new evaluator, validated by the start's own rules. */
    json_object_set(request, "evaluator", (json_t *)evaluator);
    struct evd_experiment_limits lim = {
        .max_repeats = (uint32_t)(e->opts.max_runs > 0 ? e->opts.max_runs : 100),
        .max_concurrency = (uint32_t)(e->opts.max_concurrency > 0 ? e->opts.max_concurrency : 256),
    };
    const json_t *inline_cases = NULL;
    if ((rc = evd_experiment_request(request, &lim, &normalized, &inline_cases, err)) != EVD_OK ||
        (rc = check_evaluator(e, c, normalized, err)) != EVD_OK)
        goto out;
    json_object_set(normalized, "dataset_id", json_object_get(request, "dataset_id"));
    if ((bodies = evd_store_experiment_bodies(c, id, err)) == NULL) {
        rc = evd_db_code(err);
        goto out;
    }
    size_t i;
    const json_t *cs;
    json_array_foreach(bodies, i, cs)
    {
        if ((rc = evd_experiment_check_case(normalized, cs, err)) != EVD_OK)
            goto out;
    }
    rc = derive(e, c, id, "rescore", normalized, response, err);
out:
    evd_db_release(e->opts.db, c);
    json_decref(request);
    json_decref(normalized);
    json_decref(bodies);
    return rc;
}

enum evd_code evd_experiment_retry(struct evd_engine *e, const char *id, const json_t *body,
                                   json_t **response, struct evd_err *err)
{
    static const char *const fields[] = {NULL};
    enum evd_code rc = closed_body(body, fields, err);
    if (rc != EVD_OK)
        return rc;
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    char status[16];
    json_t *request = source_request(c, id, status, err);
    if (request == NULL)
        rc = evd_db_code(err);
    else if (live(status))
        rc = not_finished(id, err);
    else
        rc = derive(e, c, id, "retry", request, response, err);
    evd_db_release(e->opts.db, c);
    json_decref(request);
    return rc;
}

enum evd_code evd_eval_rescore(struct evd_engine *e, const char *id, const json_t *body,
                               json_t **response, struct evd_err *err)
{
    json_t *evaluator = NULL, *request = NULL, *runs = NULL;
    struct evd_store_eval src = {0};
    PGconn *c = NULL;
    enum evd_code rc = evd_request_rescore_args(body, &evaluator, err);
    if (rc != EVD_OK)
        return rc;
    if ((c = evd_db_acquire(e->opts.db, err)) == NULL) {
        rc = evd_db_code(err);
        goto out;
    }
    if ((rc = evd_store_eval_get(c, id, false, &src, err)) != EVD_OK)
        goto out;
    if (!evd_engine_status_terminal(src.status)) {
        rc = evd_err_set(err, EVD_ECONFLICT,
                         "evaluation %s has not finished; only a finished evaluation can be "
                         "re-scored",
                         id);
        goto out;
    }
    /* The start's own check of the evaluator, then the source's request with it. */
    if ((rc = evd_engine_check_evaluator(e, c, evaluator, err)) != EVD_OK)
        goto out;
    request = evd_request_rerun(src.request, id, false);
    if (request == NULL || json_object_set(request, "evaluator", evaluator) != 0) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    struct evd_request_view view;
    if ((rc = evd_request_view_trusted(request, &view, err)) != EVD_OK)
        goto out;
    char nid[48];
    evd_new_id("eval_", nid, sizeof(nid));
    if ((runs = evd_plan_build(nid, view.runs, view.order)) == NULL) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    int rescored = 0, enqueued = 0;
    rc = evd_store_eval_rescore(c, id, nid, request, runs, evd_now_ms(), e->owner, &rescored,
                                &enqueued, err);
    if (rc != EVD_OK)
        goto out;
    if (enqueued == EVD_RUN_ALL_TERMINAL)
        evd_engine_finalize_later(e, nid); /* nothing to score again: report it now */
    else
        evd_engine_wake(e, enqueued);
    evd_metrics_count("evald_evaluations_started_total", NULL, NULL, 1);
    char n[16];
    snprintf(n, sizeof(n), "%d", rescored);
    evd_log(EVD_LOG_INFO, "evaluation started", "evaluation_id", nid, "source_evaluation_id", id,
            "derivation", "rescore", "runs", n, NULL);
    *response = json_pack("{s:s, s:s, s:s, s:i}", "evaluation_id", nid, "status", "queued",
                          "source_evaluation_id", id, "rescored_runs", rescored);
    if (*response == NULL)
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
out:
    if (c != NULL)
        evd_db_release(e->opts.db, c);
    evd_store_eval_clear(&src);
    json_decref(evaluator);
    json_decref(request);
    json_decref(runs);
    return rc;
}
