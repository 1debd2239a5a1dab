/*
 * Human review of experiment runs over store/reviews.h: the reviews, the queue, the
 * agreement of evaluator and reviewers (domain/agreement.h), and the analysis recomputed
 * from another source of verdicts by the engine's own analysis path (the case cells of
 * engine/cells.c fed to evd_engine_experiment_analysis). See reviews.h.
 */
#include "engine/reviews.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "domain/agreement.h"
#include "domain/experiment.h"
#include "domain/human_review.h"
#include "engine/experiments.h"
#include "engine/internal.h"
#include "store/experiments.h"
#include "store/reviews.h"

enum evd_code evd_experiment_review_put(struct evd_engine *e, const char *id, const char *run_id,
                                        const json_t *body, json_t **review, bool *created,
                                        struct evd_err *err)
{
    struct evd_human_review hr;
    enum evd_code rc = evd_human_review_decode(body, &hr, err);
    if (rc != EVD_OK)
        return rc;
    const struct evd_store_review rv = {
        .experiment_id = id,
        .run_id = run_id,
        .verdict = hr.pass ? "pass" : "fail",
        .note = hr.note,
        .reviewer = hr.reviewer,
        .now = evd_now_ms(),
    };
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    rc = evd_store_review_put(c, &rv, review, created, err);
    evd_db_release(e->opts.db, c);
    return rc;
}

enum evd_code evd_experiment_reviews(struct evd_engine *e, const char *id, const char *reviewer,
                                     unsigned limit, const char *before, json_t **response,
                                     struct evd_err *err)
{
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    char *next = NULL;
    json_t *items = evd_store_reviews_list(c, id, reviewer, limit, before, &next, err);
    evd_db_release(e->opts.db, c);
    if (items == NULL)
        return evd_db_code(err);
    *response = json_pack("{s:o}", "reviews", items);
    if (*response != NULL && next != NULL)
        json_object_set_new(*response, "next_cursor", json_string(next));
    free(next);
    return *response ? EVD_OK : evd_err_set(err, EVD_ENOMEM, "out of memory");
}

/* The normalized request of `id` with its shape (internal.h). */
json_t *evd_engine_experiment_request(PGconn *c, const char *id,
                                      struct evd_store_experiment_shape *shape,
                                      struct evd_err *err)
{
    if (evd_store_experiment_shape(c, id, shape, err) != EVD_OK)
        return NULL;
    json_t *request = json_loads(shape->request, 0, NULL);
    if (request == NULL) {
        evd_store_experiment_shape_clear(shape);
        evd_err_set(err, EVD_EINTERNAL, "stored request of %s cannot be decoded", id);
    }
    return request;
}

enum evd_code evd_experiment_review_queue(struct evd_engine *e, const char *id,
                                          const char *reviewer, unsigned limit, unsigned offset,
                                          json_t **response, struct evd_err *err)
{
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    struct evd_store_experiment_shape shape = {0};
    json_t *items = NULL;
    enum evd_code rc = EVD_OK;
    json_t *request = evd_engine_experiment_request(c, id, &shape, err);
    if (request == NULL) {
        rc = evd_db_code(err);
        goto out;
    }
    double threshold = evd_human_review_threshold(json_object_get(request, "evaluator"));
    if ((items = evd_store_review_queue(c, id, reviewer, threshold, EVD_HUMAN_REVIEW_NEAR, limit,
                                        offset, err)) == NULL) {
        rc = evd_db_code(err);
        goto out;
    }
    /* Each run with the prompt its arm rendered for the case, for a reviewer to read. */
    json_t *bodies = evd_store_experiment_bodies(c, id, err);
    if (bodies == NULL) {
        rc = evd_db_code(err);
        goto out;
    }
    size_t i;
    json_t *run;
    json_array_foreach(items, i, run)
    {
        json_int_t ci = json_integer_value(json_object_get(run, "case_index"));
        json_int_t arm = json_integer_value(json_object_get(run, "arm"));
        json_t *variant = NULL, *evaluator = NULL;
        struct evd_err cerr = {0};
        if (ci >= 1 && evd_experiment_cell(request, json_array_get(bodies, (size_t)ci - 1),
                                           (size_t)arm, &variant, &evaluator, &cerr) == EVD_OK) {
            json_object_set(run, "prompt", json_object_get(variant, "prompt"));
            json_object_set(run, "system_prompt", json_object_get(variant, "system_prompt"));
        }
        json_decref(variant);
        json_decref(evaluator);
    }
    json_decref(bodies);
    *response = json_pack("{s:o, s:f, s:f}", "runs", items, "threshold", threshold, "near",
                          EVD_HUMAN_REVIEW_NEAR);
    items = NULL;
    if (*response == NULL)
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
out:
    evd_db_release(e->opts.db, c);
    evd_store_experiment_shape_clear(&shape);
    json_decref(request);
    json_decref(items);
    return rc;
}

/* The agreement figures of a table (new reference): {reviewed_runs, agreement, kappa,
 * kappa_ci_low, kappa_ci_high, table}; null where undefined. */
static json_t *agreement_json(const uint64_t counts[4], double alpha, const char *const names[4])
{
    struct evd_agreement_table t = {counts[0], counts[1], counts[2], counts[3]};
    struct evd_agreement a;
    evd_agreement_kappa(&t, alpha, &a);
    json_t *table = json_object();
    for (int i = 0; table != NULL && i < 4; i++)
        json_object_set_new(table, names[i], json_integer((json_int_t)counts[i]));
    return json_pack("{s:I, s:o, s:o, s:o, s:o, s:o}", "reviewed_runs", (json_int_t)a.n,
                     "agreement", a.has_agreement ? json_real(a.agreement) : json_null(), "kappa",
                     a.has_kappa ? json_real(a.kappa) : json_null(), "kappa_ci_low",
                     a.has_kappa ? json_real(a.ci_low) : json_null(), "kappa_ci_high",
                     a.has_kappa ? json_real(a.ci_high) : json_null(), "table", table);
}

enum evd_code evd_experiment_agreement(struct evd_engine *e, const char *id, json_t **response,
                                       struct evd_err *err)
{
    static const char *const human[4] = {"evaluator_pass_human_pass", "evaluator_pass_human_fail",
                                         "evaluator_fail_human_pass", "evaluator_fail_human_fail"};
    static const char *const source[4] = {"pass_pass", "pass_fail", "fail_pass", "fail_fail"};
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    struct evd_store_experiment_shape shape = {0};
    json_t *request = NULL, *derived = NULL;
    uint64_t counts[4];
    int64_t reviews = 0;
    enum evd_code rc = EVD_OK;
    if ((request = evd_engine_experiment_request(c, id, &shape, err)) == NULL ||
        (derived = evd_store_experiment_derived(c, id, err)) == NULL) {
        rc = evd_db_code(err);
        goto out;
    }
    double alpha =
        json_number_value(json_object_get(json_object_get(request, "analysis"), "alpha"));
    if (!(alpha > 0 && alpha < 1))
        alpha = EVD_EXPERIMENT_DEFAULT_ALPHA;
    if ((rc = evd_store_review_table(c, id, counts, &reviews, err)) != EVD_OK)
        goto out;
    if ((*response = agreement_json(counts, alpha, human)) == NULL) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    json_object_set_new(*response, "reviews", json_integer((json_int_t)reviews));
    json_object_set_new(*response, "confidence", json_real(1 - alpha));
    /* A re-score: how far the new evaluator agrees with the source's, run for run. */
    const char *src = json_string_value(json_object_get(derived, "source_experiment_id"));
    const char *kind = json_string_value(json_object_get(derived, "derivation"));
    json_t *sa = json_null();
    if (src != NULL && kind != NULL && strcmp(kind, "rescore") == 0) {
        if ((rc = evd_store_source_table(c, id, src, counts, err)) != EVD_OK) {
            json_decref(*response);
            *response = NULL;
            goto out;
        }
        sa = agreement_json(counts, alpha, source);
        if (sa != NULL) {
            json_object_set_new(sa, "source_experiment_id", json_string(src));
            json_object_set_new(sa, "runs", json_incref(json_object_get(sa, "reviewed_runs")));
            json_object_del(sa, "reviewed_runs");
        }
    }
    json_object_set_new(*response, "source_agreement", sa ? sa : json_null());
out:
    evd_db_release(e->opts.db, c);
    evd_store_experiment_shape_clear(&shape);
    json_decref(request);
    json_decref(derived);
    return rc;
}

/* {arms, comparisons, analysis} of `id` from the verdicts of `source`. New reference. */
static json_t *analysis_from(PGconn *c, const char *id, enum evd_store_verdicts source,
                             bool partial, struct evd_err *err)
{
    struct evd_store_experiment_shape shape = {0};
    json_t *request = evd_engine_experiment_request(c, id, &shape, err);
    json_t *rows = request ? evd_store_verdict_rows(c, id, source, err) : NULL;
    json_t *out = NULL;
    if (rows == NULL)
        goto out;
    /* Each case's cells as a case job would have written them from these verdicts. */
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
    {
        bool flaky, disagree;
        json_t *cells = evd_engine_case_cells((unsigned)shape.arms, (uint32_t)shape.repeats,
                                              json_object_get(row, "runs"), &flaky, &disagree);
        if (cells == NULL) {
            evd_err_set(err, EVD_ENOMEM, "out of memory");
            goto out;
        }
        json_object_set_new(row, "cells", cells);
        json_object_del(row, "runs");
    }
    int64_t counts[3];
    out = evd_engine_experiment_analysis(request, (unsigned)shape.arms, (size_t)shape.case_count,
                                         rows, partial, counts);
    if (out == NULL)
        evd_err_set(err, EVD_ENOMEM, "out of memory");
out:
    evd_store_experiment_shape_clear(&shape);
    json_decref(request);
    json_decref(rows);
    return out;
}

enum evd_code evd_experiment_get_source(struct evd_engine *e, const char *id, const char *source,
                                        json_t **experiment, struct evd_err *err)
{
    enum evd_store_verdicts src;
    if (source == NULL || strcmp(source, "evaluator") == 0)
        return evd_experiment_get(e, id, experiment, err);
    if (strcmp(source, "human") == 0)
        src = EVD_VERDICTS_HUMAN;
    else if (strcmp(source, "human_then_evaluator") == 0)
        src = EVD_VERDICTS_HUMAN_FIRST;
    else
        return evd_err_set(err, EVD_EINVAL,
                           "source must be one of evaluator, human, human_then_evaluator");
    json_t *doc = NULL;
    enum evd_code rc = evd_experiment_get(e, id, &doc, err);
    if (rc != EVD_OK)
        return rc;
    const char *status = json_string_value(json_object_get(doc, "status"));
    bool partial = status != NULL && (!strcmp(status, "queued") || !strcmp(status, "running"));
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL) {
        json_decref(doc);
        return evd_db_code(err);
    }
    json_t *an = analysis_from(c, id, src, partial, err);
    evd_db_release(e->opts.db, c);
    if (an == NULL) {
        json_decref(doc);
        return evd_db_code(err);
    }
    const char *keys[] = {"arms", "comparisons", "analysis"};
    for (size_t i = 0; i < 3; i++)
        json_object_set(doc, keys[i], json_object_get(an, keys[i]));
    size_t i;
    json_t *arm;
    json_array_foreach(json_object_get(doc, "arms"), i, arm) json_object_del(arm, "failed_runs");
    json_object_set_new(json_object_get(doc, "analysis"), "source", json_string(source));
    json_decref(an);
    *experiment = doc;
    return EVD_OK;
}
