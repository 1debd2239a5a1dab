/*
 * Judgements, pairs and pair reviews over HTTP (engine/judges.h, docs/judges.md): each call
 * one pooled connection, the experiment's shape read first so that a treatment or repeat
 * out of range answers 404 like an unknown experiment.
 */
#include "engine/judges.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "domain/agreement.h"
#include "domain/experiment.h"
#include "domain/human_review.h"
#include "domain/judge.h"
#include "domain/template.h"
#include "engine/internal.h"
#include "store/db.h"
#include "store/experiments.h"
#include "store/judgements.h"

/* A path or query integer in [lo, hi]; false when it is not one. */
static bool in_range(const char *s, long lo, long hi, int *out)
{
    if (s == NULL || *s == '\0')
        return false;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

/* Checks treatment (and repeat, when not NULL) against the shape. */
static enum evd_code pair_keys(const struct evd_store_experiment_shape *shape,
                               const char *repeat, const char *treatment, int *r, int *t,
                               struct evd_err *err)
{
    if (!in_range(treatment, 1, shape->arms - 1, t))
        return evd_err_set(err, EVD_ENOTFOUND, "treatment not found: %.40s", treatment);
    if (repeat != NULL && !in_range(repeat, 1, shape->repeats, r))
        return evd_err_set(err, EVD_ENOTFOUND, "repeat not found: %.40s", repeat);
    return EVD_OK;
}

enum evd_code evd_experiment_judgements(struct evd_engine *e, const char *id,
                                        const char *case_id, const char *treatment,
                                        unsigned limit, const char *before, json_t **response,
                                        struct evd_err *err)
{
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    struct evd_store_experiment_shape shape = {0};
    enum evd_code rc = evd_store_experiment_shape(c, id, &shape, err);
    int t = 0;
    json_t *items = NULL;
    char *next = NULL;
    if (rc == EVD_OK && treatment != NULL)
        rc = pair_keys(&shape, NULL, treatment, NULL, &t, err);
    if (rc == EVD_OK &&
        (items = evd_store_judgements_list(c, id, case_id, t, limit, before, &next, err)) == NULL)
        rc = evd_db_code(err);
    evd_db_release(e->opts.db, c);
    evd_store_experiment_shape_clear(&shape);
    return rc == EVD_OK ? evd_engine_page(items, next, "judgements", response, err) : rc;
}

/* The judge's task rendered for the case (null without a judge, or when it cannot be). */
static json_t *task_of(const json_t *request, const json_t *body)
{
    const json_t *task = json_object_get(json_object_get(request, "judge"), "task");
    if (!json_is_string(task))
        return json_null();
    struct evd_buf b = {0};
    struct evd_err err = {0};
    json_t *out = NULL;
    if (evd_template_render(json_string_value(task), json_string_length(task), body, &b, &err) ==
        EVD_OK)
        out = json_stringn(b.data != NULL ? b.data : "", b.len);
    evd_buf_free(&b);
    return out != NULL ? out : json_null();
}

enum evd_code evd_experiment_pair(struct evd_engine *e, const char *id, const char *case_id,
                                  const char *repeat, const char *treatment, json_t **response,
                                  struct evd_err *err)
{
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    struct evd_store_experiment_shape shape = {0};
    json_t *request = evd_engine_experiment_request(c, id, &shape, err);
    enum evd_code rc = request != NULL ? EVD_OK : evd_db_code(err);
    int r = 0, t = 0;
    if (rc == EVD_OK)
        rc = pair_keys(&shape, repeat, treatment, &r, &t, err);
    json_t *pair = NULL;
    if (rc == EVD_OK && (pair = evd_store_pair(c, id, case_id, r, t, err)) == NULL)
        rc = evd_db_code(err);
    evd_db_release(e->opts.db, c);
    if (rc == EVD_OK) {
        json_t *body = json_incref(json_object_get(pair, "body"));
        json_object_del(pair, "body");
        int bad = json_object_set_new(pair, "task", task_of(request, body));
        bad |= json_object_set_new(pair, "label",
                                   json_string(evd_experiment_arm_label(request, (unsigned)t)));
        bad |= json_object_set_new(pair, "control_label",
                                   json_string(evd_experiment_arm_label(request, 0)));
        json_decref(body);
        if (bad) {
            json_decref(pair);
            pair = NULL;
            rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        }
    }
    *response = pair;
    json_decref(request);
    evd_store_experiment_shape_clear(&shape);
    return rc;
}

enum evd_code evd_experiment_pair_review_put(struct evd_engine *e, const char *id,
                                             const char *case_id, const char *repeat,
                                             const char *treatment, const json_t *body,
                                             json_t **response, struct evd_err *err)
{
    /* The body first, as a run's review checks it: a 400 names the field whatever the
     * path names. */
    struct evd_pair_review pr;
    enum evd_code rc = evd_pair_review_decode(body, &pr, err);
    if (rc != EVD_OK)
        return rc;
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    struct evd_store_experiment_shape shape = {0};
    rc = evd_store_experiment_shape(c, id, &shape, err);
    int r = 0, t = 0;
    if (rc == EVD_OK)
        rc = pair_keys(&shape, repeat, treatment, &r, &t, err);
    if (rc == EVD_OK &&
        (*response = evd_store_pair_review_put(c, id, case_id, r, t, pr.winner, pr.reviewer,
                                               pr.note, evd_now_ms(), err)) == NULL)
        rc = evd_db_code(err);
    evd_db_release(e->opts.db, c);
    evd_store_experiment_shape_clear(&shape);
    return rc;
}

enum evd_code evd_experiment_pair_reviews(struct evd_engine *e, const char *id,
                                          const char *reviewer, unsigned limit,
                                          const char *before, json_t **response,
                                          struct evd_err *err)
{
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    char *next = NULL;
    json_t *items = evd_store_pair_reviews(c, id, reviewer, limit, before, &next, err);
    evd_db_release(e->opts.db, c);
    return evd_engine_page(items, next, "reviews", response, err);
}

/* The index of an outcome in the confusion's order control, tie, treatment; -1 else. */
static int outcome_index(const char *s)
{
    if (s == NULL)
        return -1;
    if (strcmp(s, "control") == 0)
        return 0;
    if (strcmp(s, "tie") == 0)
        return 1;
    if (strcmp(s, "treatment") == 0)
        return 2;
    return -1;
}

static json_t *real_or_null(bool has, double v)
{
    return has ? json_real(v) : json_null();
}

enum evd_code evd_experiment_judge_agreement(struct evd_engine *e, const char *id,
                                             json_t **response, struct evd_err *err)
{
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    struct evd_store_experiment_shape shape = {0};
    json_t *request = evd_engine_experiment_request(c, id, &shape, err), *rows = NULL;
    enum evd_code rc = request != NULL ? EVD_OK : evd_db_code(err);
    if (rc == EVD_OK && (rows = evd_store_pair_agreement(c, id, err)) == NULL)
        rc = evd_db_code(err);
    evd_db_release(e->opts.db, c);
    json_t *list = rc == EVD_OK ? json_array() : NULL;
    if (rc == EVD_OK && list == NULL)
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
    double alpha =
        json_number_value(json_object_get(json_object_get(request, "analysis"), "alpha"));
    if (!(alpha > 0 && alpha < 1))
        alpha = EVD_EXPERIMENT_DEFAULT_ALPHA;
    for (int t = 1; rc == EVD_OK && t < shape.arms; t++) {
        uint64_t counts[9] = {0};
        size_t i;
        const json_t *row;
        json_array_foreach(rows, i, row)
        {
            int ji = outcome_index(json_string_value(json_object_get(row, "judge")));
            int hi = outcome_index(json_string_value(json_object_get(row, "human")));
            if (json_integer_value(json_object_get(row, "treatment")) != t || ji < 0 || hi < 0)
                continue;
            counts[ji * 3 + hi] += (uint64_t)json_integer_value(json_object_get(row, "count"));
        }
        struct evd_agreement a;
        evd_agreement_kappa_k(counts, 3, alpha, &a);
        json_t *conf = json_pack("[[I, I, I], [I, I, I], [I, I, I]]", (json_int_t)counts[0],
                                 (json_int_t)counts[1], (json_int_t)counts[2],
                                 (json_int_t)counts[3], (json_int_t)counts[4],
                                 (json_int_t)counts[5], (json_int_t)counts[6],
                                 (json_int_t)counts[7], (json_int_t)counts[8]);
        json_t *tj = json_pack("{s:i, s:s, s:I, s:o, s:o, s:o, s:o, s:o}", "treatment", t,
                               "label", evd_experiment_arm_label(request, (unsigned)t), "count",
                               (json_int_t)a.n, "raw",
                               real_or_null(a.has_agreement, a.agreement), "kappa",
                               real_or_null(a.has_kappa, a.kappa), "kappa_ci_low",
                               real_or_null(a.has_kappa, a.ci_low), "kappa_ci_high",
                               real_or_null(a.has_kappa, a.ci_high), "confusion", conf);
        if (tj == NULL || json_array_append_new(list, tj) != 0)
            rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    if (rc == EVD_OK) {
        *response = json_pack("{s:o, s:f}", "treatments", list, "confidence", 1 - alpha);
        list = NULL;
        if (*response == NULL)
            rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    json_decref(list);
    json_decref(rows);
    json_decref(request);
    evd_store_experiment_shape_clear(&shape);
    return rc;
}
