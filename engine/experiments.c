/*
 * Experiments: reading one, cancelling and deleting it, its analysis (built
 * from the per-case cells the case jobs write, engine/cells.c), and the analyst thread
 * that rebuilds the analysis of running experiments and finishes those a crash left
 * without a job (starting one is engine/experiment_start.c). See experiments.h and
 * docs/experiments.md.
 */
#include "engine/experiments.h"

#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "domain/analysis.h"
#include "domain/judge.h"
#include "domain/preference.h"
#include "domain/dataset.h"
#include "domain/experiment.h"
#include "domain/plan.h"
#include "engine/internal.h"
#include "store/datasets.h"
#include "store/events.h"
#include "store/experiments.h"
#include "store/listen.h"

/* How often the analyst looks for out-of-date analyses, and for stalled experiments; more
 * often while an experiment with the anytime rule runs, whose cases dispatched between a
 * decision and the pass that sees it are paid for in vain. */
#define ANALYST_PERIOD_MS 500
#define ANALYST_ANYTIME_PERIOD_MS 100
#define ANALYST_STALLED_EVERY 10

static bool live_status(const char *s)
{
    return strcmp(s, "queued") == 0 || strcmp(s, "running") == 0;
}

/* ---- cells ---------------------------------------------------------------------- */

json_t *evd_engine_cell_json(const struct evd_analysis_cell *cell, uint32_t failed)
{
    json_t *medians = json_object();
    for (unsigned j = 0; medians != NULL && j < EVD_ANALYSIS_METRICS; j++)
        if (cell->metric_mask & (1u << j))
            json_object_set_new(medians, evd_analysis_metric_names[j], json_real(cell->median[j]));
    return json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:o*}", "runs", (int)cell->runs, "evaluated",
                     (int)cell->evaluated, "passed", (int)cell->passed, "failed", (int)failed,
                     "first_runs", (int)cell->first_runs, "first_passed",
                     (int)cell->first_passed, "medians", medians);
}

/* The cell stored as JSON back into a struct. */
static void cell_of_json(const json_t *j, struct evd_analysis_cell *cell)
{
    memset(cell, 0, sizeof(*cell));
    cell->runs = (uint32_t)json_integer_value(json_object_get(j, "runs"));
    cell->evaluated = (uint32_t)json_integer_value(json_object_get(j, "evaluated"));
    cell->passed = (uint32_t)json_integer_value(json_object_get(j, "passed"));
    cell->first_runs = (uint32_t)json_integer_value(json_object_get(j, "first_runs"));
    cell->first_passed = (uint32_t)json_integer_value(json_object_get(j, "first_passed"));
    const json_t *medians = json_object_get(j, "medians");
    for (unsigned m = 0; m < EVD_ANALYSIS_METRICS; m++) {
        const json_t *v = json_object_get(medians, evd_analysis_metric_names[m]);
        if (json_is_number(v)) {
            cell->metric_mask |= 1u << m;
            cell->median[m] = json_number_value(v);
        }
    }
}

/* ---- analysis ------------------------------------------------------------------- */


/*
 * The analysis of one experiment held in memory: the accumulator (domain/analysis.h) and
 * the row of cells of every case, so that a changed case costs O(arms) to take in.
 */
struct xstate {
    char id[64];
    json_t *request;
    unsigned arms;
    size_t cases;
    const char *cluster_by; /* borrowed from request */
    json_t *clusters;       /* cluster key -> index */
    uint32_t *cluster;      /* per case */
    struct evd_analysis_cell *cells; /* cases x arms */
    uint8_t *sequenced;              /* per case: seen in the sequence (experiment_sequence.c) */
    /* With a judge (engine/judgements.c): per treatment, each case's tally and judge
     * spend ([(t − 1) · cases + k]). */
    bool judged;
    struct evd_pref_tally *tallies;
    struct evd_judge_spend *jspend;
    uint32_t *unjudged; /* per case: its judgements left unjudged */
    struct evd_analysis *a;
    int64_t counts[3]; /* terminal, passed, failed (evaluated, not passed) runs */
    int64_t seen;      /* the highest change number taken in */
    int64_t used_ms;
    struct xstate *next;
};

static void xstate_free(struct xstate *x)
{
    if (x == NULL)
        return;
    json_decref(x->request);
    json_decref(x->clusters);
    free(x->cluster);
    free(x->cells);
    free(x->sequenced);
    free(x->tallies);
    free(x->jspend);
    free(x->unjudged);
    evd_analysis_free(x->a);
    free(x);
}

/* Takes in changed case rows {case_index, cells, changed_seq} (a row seen before is a
 * no-op: its cells replace themselves). */
static void xstate_apply(struct xstate *x, const json_t *rows)
{
    size_t i;
    const json_t *r;
    json_array_foreach(rows, i, r)
    {
        json_int_t ci = json_integer_value(json_object_get(r, "case_index"));
        if (ci < 1 || (size_t)ci > x->cases)
            continue;
        size_t k = (size_t)ci - 1;
        const char *key = json_string_value(json_object_get(r, "cluster"));
        json_t *idx = x->cluster_by != NULL && key != NULL ? json_object_get(x->clusters, key)
                                                            : NULL;
        if (idx != NULL) /* a case never changes cluster: this sets it once */
            x->cluster[k] = (uint32_t)json_integer_value(idx);
        const json_t *cells = json_object_get(r, "cells");
        for (unsigned arm = 0; arm < x->arms && arm < json_array_size(cells); arm++) {
            struct evd_analysis_cell cell, *old = &x->cells[k * x->arms + arm];
            cell_of_json(json_array_get(cells, arm), &cell);
            /* failed_runs as an evaluation counts them: evaluated and not passed. */
            x->counts[0] += (int64_t)cell.runs - old->runs;
            x->counts[1] += (int64_t)cell.passed - old->passed;
            x->counts[2] += ((int64_t)cell.evaluated - cell.passed) -
                            ((int64_t)old->evaluated - old->passed);
            evd_analysis_set_cell(x->a, x->cluster[k], &x->cells[k * x->arms], arm, &cell);
        }
        const json_t *judged = json_object_get(r, "judged");
        if (x->judged)
            x->unjudged[k] = (uint32_t)json_integer_value(json_object_get(r, "judge_unjudged"));
        for (unsigned t = 1; x->judged && t < x->arms; t++) {
            size_t at = (size_t)(t - 1) * x->cases + k;
            evd_engine_judged_decode(judged, t, &x->tallies[at], &x->jspend[at]);
        }
        json_int_t seq = json_integer_value(json_object_get(r, "changed_seq"));
        if (seq > x->seen)
            x->seen = seq;
    }
}

/* An empty state; `keys` (borrowed, strings) are the cluster keys of the cases, NULL without
 * cluster_by. The cases' rows are taken in afterwards (xstate_apply). */
static struct xstate *xstate_new(const char *id, const json_t *request, unsigned arms,
                                 size_t cases, const json_t *keys)
{
    struct xstate *x = calloc(1, sizeof(*x));
    if (x == NULL)
        return NULL;
    snprintf(x->id, sizeof(x->id), "%s", id);
    x->request = json_deep_copy(request);
    x->arms = arms;
    x->cases = cases;
    x->clusters = json_object();
    x->cluster = calloc(cases + 1, sizeof(*x->cluster));
    x->cells = calloc((cases + 1) * arms, sizeof(*x->cells));
    x->sequenced = calloc(cases + 1, 1);
    x->judged = json_is_object(json_object_get(x->request, "judge"));
    if (x->judged) {
        x->tallies = calloc((size_t)(arms - 1) * cases + 1, sizeof(*x->tallies));
        x->jspend = calloc((size_t)(arms - 1) * cases + 1, sizeof(*x->jspend));
        x->unjudged = calloc(cases + 1, sizeof(*x->unjudged));
    }
    if (x->request == NULL || x->clusters == NULL || x->cluster == NULL || x->cells == NULL ||
        x->sequenced == NULL || (x->judged && (x->tallies == NULL || x->jspend == NULL || x->unjudged == NULL)))
        goto fail;
    const json_t *an = json_object_get(x->request, "analysis");
    x->cluster_by = json_string_value(json_object_get(an, "cluster_by"));
    size_t i;
    const json_t *k;
    if (x->cluster_by != NULL) {
        json_array_foreach(keys, i, k)
        {
            const char *key = json_string_value(k);
            if (key != NULL && json_object_get(x->clusters, key) == NULL)
                json_object_set_new(x->clusters, key,
                                    json_integer((json_int_t)json_object_size(x->clusters)));
        }
    }
    struct evd_analysis_config cfg = {
        .arms = arms,
        .cases = cases,
        .clusters = x->cluster_by != NULL ? json_object_size(x->clusters) : 0,
        .alpha = json_number_value(json_object_get(an, "alpha")),
        .min_effect = json_number_value(json_object_get(an, "min_effect")),
    };
    if (cfg.alpha <= 0)
        cfg.alpha = EVD_EXPERIMENT_DEFAULT_ALPHA;
    if (x->cluster_by != NULL && cfg.clusters == 0)
        cfg.clusters = 1;
    if ((x->a = evd_analysis_new(&cfg)) == NULL)
        goto fail;
    return x;
fail:
    xstate_free(x);
    return NULL;
}

/* Cases read a page at a time: a 10,000-case experiment is never held whole as JSON. */
#define CELL_PAGE 500

/* Takes in the stored rows of the cases changed after `after_seq` (every case when < 0),
 * a page at a time. */
static enum evd_code xstate_read(PGconn *c, struct xstate *x, int64_t after_seq,
                                 struct evd_err *err)
{
    int after_case = 0;
    for (;;) {
        json_t *rows = evd_store_experiment_cells(c, x->id, after_seq, after_case, CELL_PAGE, err);
        if (rows == NULL)
            return evd_db_code(err);
        size_t n = json_array_size(rows);
        xstate_apply(x, rows);
        if (n > 0)
            after_case = (int)json_integer_value(
                json_object_get(json_array_get(rows, n - 1), "case_index"));
        json_decref(rows);
        if (n < CELL_PAGE)
            return EVD_OK;
    }
}

/* The state of `id` from every stored case. NULL with *err. */
static struct xstate *xstate_load(PGconn *c, const char *id, struct evd_err *err)
{
    struct evd_store_experiment_shape shape;
    if (evd_store_experiment_shape(c, id, &shape, err) != EVD_OK)
        return NULL;
    struct xstate *x = NULL;
    json_t *keys = NULL;
    json_t *request = json_loads(shape.request, 0, NULL);
    if (request == NULL) {
        evd_err_set(err, EVD_EINTERNAL, "stored request of %s cannot be decoded", id);
        goto out;
    }
    bool clustered =
        json_is_string(json_object_get(json_object_get(request, "analysis"), "cluster_by"));
    if (clustered && (keys = evd_store_experiment_cluster_keys(c, id, err)) == NULL)
        goto out;
    if ((x = xstate_new(id, request, (unsigned)shape.arms, (size_t)shape.case_count, keys)) ==
        NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    if (xstate_read(c, x, -1, err) != EVD_OK) {
        xstate_free(x);
        x = NULL;
    }
out:
    json_decref(keys);
    json_decref(request);
    evd_store_experiment_shape_clear(&shape);
    return x;
}

/* "evaluator" or "judge": which verdict a comparison's `verdict` is (docs/judges.md). */
static const char *verdict_by(const struct xstate *x)
{
    const char *by = json_string_value(
        json_object_get(json_object_get(x->request, "analysis"), "verdict_by"));
    if (by != NULL)
        return by;
    return json_is_object(json_object_get(x->request, "evaluator")) || !x->judged ? "evaluator"
                                                                                  : "judge";
}

static json_t *real_or_null(bool has, double v)
{
    return has ? json_real(v) : json_null();
}

static json_t *fraction_json(const struct evd_pref_fraction *f)
{
    if (!f->has)
        return json_null();
    return json_pack("{s:f, s:I, s:f, s:f}", "fraction", f->fraction, "n", (json_int_t)f->n,
                     "wilson_low", f->wilson_low, "wilson_high", f->wilson_high);
}

/*
 * A comparison's judge members (docs/judges.md): `preference` and `judge_quality` (null
 * without a judge), `evaluator_verdict`, and `verdict` the one analysis.verdict_by
 * chooses. 0, or -1 on ENOMEM.
 */
static int judge_members(const struct xstate *x, unsigned t, json_t *cj)
{
    json_t *ev = json_object_get(cj, "verdict");
    bool has_evaluator = json_is_object(json_object_get(x->request, "evaluator"));
    int bad = json_object_set_new(cj, "evaluator_verdict",
                                  has_evaluator && ev != NULL ? json_incref(ev) : json_null());
    if (!x->judged)
        return bad | json_object_set_new(cj, "preference", json_null()) |
               json_object_set_new(cj, "judge_quality", json_null());
    const json_t *an = json_object_get(x->request, "analysis");
    struct evd_stats_params params = {
        .alpha = json_number_value(json_object_get(an, "alpha")),
        .comparisons = x->arms - 1,
        .min_effect = json_number_value(json_object_get(an, "min_effect")),
    };
    if (params.alpha <= 0)
        params.alpha = EVD_EXPERIMENT_DEFAULT_ALPHA;
    const size_t at = (size_t)(t - 1) * x->cases;
    struct evd_pref_summary s;
    if (!evd_pref_summarize_tallies(&x->tallies[at], x->cases,
                                    x->cluster_by != NULL ? x->cluster : NULL,
                                    x->cluster_by != NULL ? json_object_size(x->clusters) : 0,
                                    &params, &s))
        return -1;
    struct evd_judge_spend sp = {0};
    for (size_t k = 0; k < x->cases; k++) {
        const struct evd_judge_spend *c = &x->jspend[at + k];
        sp.calls += c->calls;
        sp.input_tokens += c->input_tokens;
        sp.output_tokens += c->output_tokens;
        sp.cost_usd += c->cost_usd;
        sp.unpriced += c->unpriced;
    }
    const struct evd_stats_paired *d = &s.delta;
    const char *verdict = evd_stats_verdict_name(d->verdict);
    json_t *pref = json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:s}", "pairs",
        (json_int_t)s.pairs, "wins", (json_int_t)s.wins, "losses", (json_int_t)s.losses, "ties",
        (json_int_t)s.ties, "inconsistent", (json_int_t)s.inconsistent, "rate",
        real_or_null(s.has_rate, s.rate), "paired_cases", (json_int_t)s.paired_cases, "delta",
        real_or_null(d->has_mean, d->mean), "se", real_or_null(d->has_var, d->se), "df",
        real_or_null(d->has_var, d->df), "ci_low", real_or_null(d->has_var, d->ci_low),
        "ci_high", real_or_null(d->has_var, d->ci_high), "t_p_value",
        real_or_null(d->has_var, d->t_p_value), "p_value_adjusted",
        real_or_null(d->has_var, d->p_value_adjusted), "verdict", verdict);
    json_t *quality = json_pack(
        "{s:I, s:I, s:o, s:o, s:o, s:{s:I, s:I, s:I, s:o}}", "pairs", (json_int_t)s.both_pairs,
        "consistent_pairs", (json_int_t)s.consistent_pairs, "consistency",
        real_or_null(s.has_consistency, s.consistency), "first_slot",
        fraction_json(&s.first_slot), "length", fraction_json(&s.length), "metrics", "calls",
        (json_int_t)sp.calls, "input_tokens", (json_int_t)sp.input_tokens, "output_tokens",
        (json_int_t)sp.output_tokens, "cost_usd",
        sp.unpriced > 0 ? json_null() : json_real(sp.cost_usd));
    if (pref == NULL || quality == NULL) {
        json_decref(pref);
        json_decref(quality);
        return -1;
    }
    bad |= json_object_set_new(cj, "preference", pref);
    bad |= json_object_set_new(cj, "judge_quality", quality);
    if (strcmp(verdict_by(x), "judge") == 0)
        bad |= json_object_set_new(cj, "verdict", json_string(verdict));
    return bad ? -1 : 0;
}

/* {arms, comparisons, analysis} of the state. New reference, or NULL on ENOMEM. */
static json_t *xstate_json(const struct xstate *x, bool partial)
{
    json_t *arms_json = json_array(), *cmps = json_array(), *out = NULL;
    double *vals = malloc((x->cases + 1) * sizeof(double));
    if (arms_json == NULL || cmps == NULL || vals == NULL)
        goto out;
    for (unsigned arm = 0; arm < x->arms; arm++) {
        json_t *aj = evd_analysis_arm_json(x->a, arm, evd_experiment_arm_label(x->request, arm));
        json_t *med = json_object();
        if (aj == NULL || med == NULL) {
            json_decref(aj);
            json_decref(med);
            goto out;
        }
        /* The arm's medians: the median over its cases of their per-case medians. */
        for (unsigned m = 0; m < EVD_ANALYSIS_METRICS; m++) {
            size_t n = 0;
            for (size_t k = 0; k < x->cases; k++) {
                const struct evd_analysis_cell *cell = &x->cells[k * x->arms + arm];
                if (cell->metric_mask & (1u << m))
                    vals[n++] = cell->median[m];
            }
            double v;
            if (n > 0 && evd_stats_median(vals, n, &v))
                json_object_set_new(med, evd_analysis_metric_names[m], json_real(v));
        }
        json_object_set_new(aj, "medians", med);
        json_array_append_new(arms_json, aj);
        if (arm > 0) {
            json_t *cj = evd_analysis_comparison_json(x->a, arm, evd_experiment_arm_label(x->request, arm));
            if (cj == NULL || judge_members(x, arm, cj) != 0) {
                json_decref(cj);
                goto out;
            }
            json_array_append_new(cmps, cj);
        }
    }
    json_t *info = evd_analysis_info_json(x->a, x->cluster_by, partial);
    if (info == NULL)
        goto out;
    json_object_set_new(info, "verdict_by", json_string(verdict_by(x)));
    out = json_pack("{s:o, s:o, s:o}", "arms", arms_json, "comparisons", cmps, "analysis", info);
    arms_json = cmps = NULL;
out:
    free(vals);
    json_decref(arms_json);
    json_decref(cmps);
    return out;
}

json_t *evd_engine_experiment_analysis(const json_t *request, unsigned arms, size_t cases,
                                       const json_t *rows, bool partial, int64_t counts[3])
{
    json_t *keys = json_array();
    size_t i;
    const json_t *r;
    json_array_foreach(rows, i, r)
    {
        json_t *k = json_object_get(r, "cluster");
        if (json_is_string(k))
            json_array_append(keys, k); /* repeats are taken once by xstate_new */
    }
    struct xstate *x = keys ? xstate_new("", request, arms, cases, keys) : NULL;
    if (x != NULL)
        xstate_apply(x, rows);
    json_t *out = x ? xstate_json(x, partial) : NULL;
    for (int j = 0; j < 3; j++)
        counts[j] = x ? x->counts[j] : 0;
    xstate_free(x);
    json_decref(keys);
    return out;
}

/* The judge's side of the sequence of a judged experiment, else NULL. */
static const struct evd_judge_seq *judge_seq(const struct xstate *x, struct evd_judge_seq *out)
{
    if (!x->judged)
        return NULL;
    const json_t *judge = json_object_get(x->request, "judge");
    const uint32_t repeats =
        (uint32_t)json_integer_value(json_object_get(x->request, "repeats"));
    *out = (struct evd_judge_seq){
        .tallies = x->tallies,
        .spend = x->jspend,
        .unjudged = x->unjudged,
        .per_case = repeats * (x->arms - 1) * evd_judge_orders(judge),
        .by_judge = strcmp(verdict_by(x), "judge") == 0,
    };
    return out;
}

/* The final analysis of `id`, from its stored cells read a page at a time, with its
 * sequence brought up to date and its stop recorded (engine/experiment_sequence.c) in the
 * caller's transaction. */
static json_t *analysis_final(PGconn *c, const char *id, enum evd_stop_pass pass,
                              int64_t counts[3], struct evd_err *err)
{
    struct xstate *x = xstate_load(c, id, err);
    json_t *an = x ? xstate_json(x, false) : NULL;
    if (x != NULL && an == NULL)
        evd_err_set(err, EVD_ENOMEM, "out of memory");
    struct evd_judge_seq js;
    if (an != NULL && evd_engine_experiment_stop_pass(c, id, an, x->request, x->arms, x->cases,
                                                      x->cells, judge_seq(x, &js), x->sequenced,
                                                      pass, err) != EVD_OK) {
        json_decref(an);
        an = NULL;
    }
    for (int j = 0; j < 3; j++)
        counts[j] = x ? x->counts[j] : 0;
    xstate_free(x);
    return an;
}

/* ---- finishing ------------------------------------------------------------------ */

/* The experiment.completed payload: {experiment_id, status, timestamp, verdicts}. */
static json_t *completed_event(const char *id, const char *status, const json_t *analysis,
                               int64_t now)
{
    json_t *verdicts = json_array();
    size_t i;
    const json_t *cj;
    json_array_foreach(json_object_get(analysis, "comparisons"), i, cj)
        json_array_append_new(verdicts,
                              json_pack("{s:O, s:O, s:O}", "treatment",
                                        json_object_get(cj, "treatment"), "label",
                                        json_object_get(cj, "label"), "verdict",
                                        json_object_get(cj, "verdict")));
    return json_pack("{s:s, s:s, s:I, s:o}", "experiment_id", id, "status", status, "timestamp",
                     (json_int_t)now, "verdicts", verdicts);
}

/*
 * Makes `id` terminal in the caller's transaction, which holds its lock: `status` given
 * (cancelled), or completed (failed when no run completed). The final analysis, the
 * counts, and the completion event in the same transaction.
 */
static enum evd_code finish_locked(PGconn *c, const char *id, const char *status,
                                   struct evd_err *err)
{
    int64_t counts[3], now = evd_now_ms();
    json_t *an = analysis_final(c, id, status == NULL ? EVD_STOP_PASS_FINISH : EVD_STOP_PASS_CANCEL,
                                counts, err);
    if (an == NULL)
        return evd_db_code(err);
    enum evd_code rc = EVD_OK;
    if (status == NULL) {
        int64_t completed = 0, total = 0;
        if ((rc = evd_store_experiment_outcomes(c, id, &completed, &total, err)) != EVD_OK)
            goto out;
        status = completed > 0 || total == 0 ? "completed" : "failed";
    }
    bool done = false;
    if ((rc = evd_store_experiment_finish(c, id, status, an, now, &done, err)) != EVD_OK ||
        !done)
        goto out;
    json_t *event = completed_event(id, status, an, now);
    if (event == NULL) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    rc = evd_engine_experiment_event(c, id, event, now, err);
    json_decref(event);
    if (rc == EVD_OK)
        evd_log(EVD_LOG_INFO, "experiment finished", "experiment_id", id, "status", status,
                NULL);
out:
    json_decref(an);
    return rc;
}

enum evd_code evd_engine_experiment_finalize(struct evd_engine *e, PGconn *c, const char *id,
                                             struct evd_err *err)
{
    (void)e;
    char status[16];
    enum evd_code rc = evd_db_begin(c, err);
    if (rc == EVD_OK)
        rc = evd_store_experiment_lock(c, id, status, err);
    if (rc == EVD_OK && live_status(status)) {
        /* A case job may exist again (a schedule raced this): then it finishes it. */
        int sched = 0;
        rc = evd_store_experiment_schedule(c, id, e->owner, &sched, err);
        if (rc == EVD_OK && sched == -1)
            rc = finish_locked(c, id, NULL, err);
    }
    if (rc == EVD_OK)
        rc = evd_db_commit(c, err);
    evd_db_rollback(c);
    return rc;
}

/* ---- the analyst thread ---------------------------------------------------------- */

/* How long an experiment's state stays in memory after its last change. */
#define ANALYST_KEEP_MS 30000
/* Change numbers are drawn before their transactions commit, so a change may become
 * visible after a later one was read: the analyst reads again the last ones it saw (taking
 * a case in twice changes nothing). The final analysis is rebuilt from every case. */
#define ANALYST_REREAD 512

/* The state of `id`, brought up to date: built from every case the first time, then from
 * the cases changed since. NULL with *err. */
static struct xstate *analyst_state(PGconn *c, struct xstate **states, const char *id,
                                    struct evd_err *err)
{
    struct xstate *x = *states;
    while (x != NULL && strcmp(x->id, id) != 0)
        x = x->next;
    if (x != NULL) {
        int64_t after = x->seen > ANALYST_REREAD ? x->seen - ANALYST_REREAD : 0;
        if (xstate_read(c, x, after, err) != EVD_OK)
            return NULL;
    } else if ((x = xstate_load(c, id, err)) != NULL) {
        x->next = *states;
        *states = x;
    }
    if (x != NULL)
        x->used_ms = evd_now_ms();
    return x;
}

/* Frees the states not used since `before`. */
static void analyst_evict(struct xstate **states, int64_t before)
{
    for (struct xstate **p = states; *p != NULL;) {
        struct xstate *x = *p;
        if (x->used_ms < before) {
            *p = x->next;
            xstate_free(x);
        } else {
            p = &x->next;
        }
    }
}

void *evd_engine_analyst_main(void *arg)
{
    struct evd_engine *e = arg;
    struct evd_listener *l = evd_engine_listener(e, NULL, NULL);
    PGconn *c = l ? evd_listener_conn(l) : NULL;
    unsigned round = 0;
    struct xstate *states = NULL; /* this thread's */
    while (c != NULL && !atomic_load(&e->stopping)) {
        struct evd_err err = {0};
        if (!evd_listener_ensure(l)) {
            c = evd_listener_conn(l);
            continue;
        }
        /* Take in what changed in every out-of-date analysis (each at most once a period). */
        for (int n = 0; n < 64 && !atomic_load(&e->stopping); n++) {
            char id[64];
            int64_t seq = 0;
            bool found = false;
            if (evd_store_experiment_take_dirty(c, id, &seq, &found, &err) != EVD_OK || !found)
                break;
            struct xstate *x = analyst_state(c, &states, id, &err);
            json_t *an = x ? xstate_json(x, true) : NULL;
            struct evd_judge_seq js;
            /* The sequence, the analysis and a decision to stop commit together. */
            if (an != NULL && evd_db_begin(c, &err) == EVD_OK &&
                evd_engine_experiment_stop_pass(c, id, an, x->request, x->arms, x->cases,
                                                 x->cells, judge_seq(x, &js), x->sequenced,
                                                 EVD_STOP_PASS_RUNNING, &err) == EVD_OK &&
                evd_store_experiment_set_analysis(c, id, seq, an, x->counts, evd_now_ms(),
                                                  &err) == EVD_OK)
                evd_db_commit(c, &err);
            evd_db_rollback(c);
            json_decref(an);
            if (err.code != EVD_OK) {
                /* A pass that did not commit placed nothing: forget what it saw placed. */
                if (x != NULL)
                    memset(x->sequenced, 0, x->cases + 1);
                evd_log(EVD_LOG_WARN, "could not rebuild an experiment's analysis",
                        "experiment_id", id, "error", err.msg, NULL);
            }
        }
        analyst_evict(&states, evd_now_ms() - ANALYST_KEEP_MS);
        if (++round % ANALYST_STALLED_EVERY == 0) {
            json_t *ids = evd_store_experiments_stalled(c, &err);
            size_t i;
            json_t *v;
            json_array_foreach(ids, i, v)
            {
                struct evd_err ferr = {0};
                if (evd_engine_experiment_finalize(e, c, json_string_value(v), &ferr) != EVD_OK)
                    evd_log(EVD_LOG_WARN, "could not finish an experiment", "experiment_id",
                            json_string_value(v), "error", ferr.msg, NULL);
            }
            json_decref(ids);
        }
        struct pollfd pfd = {.fd = e->wake_pipe[0], .events = POLLIN};
        poll(&pfd, 1,
             evd_store_experiments_anytime_live(c) ? ANALYST_ANYTIME_PERIOD_MS
                                                   : ANALYST_PERIOD_MS);
    }
    analyst_evict(&states, INT64_MAX);
    evd_listener_free(l);
    return NULL;
}

/* ---- reading -------------------------------------------------------------------- */

/* Runs fn(c, ...) on a pool connection. */
#define WITH_CONN(e, err, expr)                                                             \
    do {                                                                                    \
        PGconn *c_ = evd_db_acquire((e)->opts.db, (err));                                   \
        if (c_ == NULL)                                                                     \
            return evd_db_code(err);                                                        \
        PGconn *c = c_;                                                                     \
        expr;                                                                               \
        evd_db_release((e)->opts.db, c_);                                                   \
    } while (0)

/* The stored row with its analysis members lifted to the top. */
static json_t *document(json_t *row)
{
    json_t *an = json_incref(json_object_get(row, "analysis"));
    json_object_del(row, "analysis");
    const char *keys[] = {"arms", "comparisons", "analysis"};
    for (size_t i = 0; i < 3; i++) {
        json_t *v = json_object_get(an, keys[i]);
        json_object_set(row, keys[i], v ? v : json_null());
    }
    json_decref(an);
    return row;
}

enum evd_code evd_experiment_get(struct evd_engine *e, const char *id, json_t **experiment,
                                 struct evd_err *err)
{
    json_t *row = NULL;
    WITH_CONN(e, err, row = evd_store_experiment_get(c, id, err));
    if (row == NULL)
        return evd_db_code(err);
    *experiment = document(row);
    return EVD_OK;
}

enum evd_code evd_experiment_progress(struct evd_engine *e, const char *id, json_t **progress,
                                      struct evd_err *err)
{
    json_t *row = NULL;
    WITH_CONN(e, err, row = evd_store_experiment_progress(c, id, err));
    if (row == NULL)
        return evd_db_code(err);
    *progress = row;
    return EVD_OK;
}

/* {<key>: items, next_cursor?} (internal.h). */
enum evd_code evd_engine_page(json_t *items, char *next, const char *key, json_t **response,
                              struct evd_err *err)
{
    if (items == NULL) {
        free(next);
        return evd_db_code(err);
    }
    *response = json_pack("{s:o}", key, items);
    if (*response != NULL && next != NULL)
        json_object_set_new(*response, "next_cursor", json_string(next));
    free(next);
    return *response ? EVD_OK : evd_err_set(err, EVD_ENOMEM, "out of memory");
}

enum evd_code evd_experiment_list(struct evd_engine *e, unsigned limit, const char *before,
                                  json_t **response, struct evd_err *err)
{
    json_t *items = NULL;
    char *next = NULL;
    WITH_CONN(e, err, items = evd_store_experiment_list(c, limit, before, &next, err));
    return evd_engine_page(items, next, "experiments", response, err);
}

/* A stored case row as the API shows it: {case_id, case_index, vars, expected, metadata,
 * arms: [{index, passed, evaluated, runs, medians}], flaky, disagree}. */
static void case_row(json_t *row, int repeats)
{
    json_t *cells = json_incref(json_object_get(row, "cells"));
    json_object_del(row, "cells");
    json_object_del(row, "cluster");
    json_t *arms = json_array();
    size_t i;
    json_t *cell;
    json_array_foreach(cells, i, cell)
        json_array_append_new(
            arms, json_pack("{s:i, s:O, s:O, s:i, s:O}", "index", (int)i, "passed",
                            json_object_get(cell, "passed"), "evaluated",
                            json_object_get(cell, "evaluated"), "runs", repeats, "medians",
                            json_object_get(cell, "medians")));
    json_object_set_new(row, "arms", arms);
    json_decref(cells);
}

enum evd_code evd_experiment_cases(struct evd_engine *e, const char *id, const char *filter,
                                   unsigned limit, const char *before, json_t **response,
                                   struct evd_err *err)
{
    if (filter != NULL && strcmp(filter, "flaky") != 0 && strcmp(filter, "disagree") != 0)
        return evd_err_set(err, EVD_EINVAL, "filter must be flaky or disagree");
    json_t *items = NULL;
    char *next = NULL;
    struct evd_store_experiment_shape shape = {0};
    WITH_CONN(e, err, {
        if (evd_store_experiment_shape(c, id, &shape, err) == EVD_OK)
            items = evd_store_experiment_cases(c, id, filter, limit, before, &next, err);
    });
    /* A case that has not run yet shows every arm with nothing evaluated. */
    size_t i;
    json_t *row;
    json_array_foreach(items, i, row)
    {
        json_t *cells = json_object_get(row, "cells");
        while (json_array_size(cells) < (size_t)shape.arms)
            json_array_append_new(cells, json_pack("{s:i, s:i, s:{}}", "passed", 0, "evaluated",
                                                   0, "medians"));
        case_row(row, shape.repeats);
    }
    evd_store_experiment_shape_clear(&shape);
    return evd_engine_page(items, next, "cases", response, err);
}

enum evd_code evd_experiment_runs(struct evd_engine *e, const char *id, const char *case_id,
                                  unsigned limit, const char *before, json_t **response,
                                  struct evd_err *err)
{
    json_t *items = NULL;
    char *next = NULL;
    WITH_CONN(e, err,
              items = evd_store_experiment_runs(c, id, case_id, limit, before, true, &next, err));
    return evd_engine_page(items, next, "runs", response, err);
}

/* ---- cancel and delete ----------------------------------------------------------- */

enum evd_code evd_experiment_cancel(struct evd_engine *e, const char *id, json_t **response,
                                    struct evd_err *err)
{
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    struct evd_store_experiment_shape shape = {0};
    char status[16] = "";
    enum evd_code rc = evd_store_experiment_shape(c, id, &shape, err);
    if (rc == EVD_OK)
        snprintf(status, sizeof(status), "%s", shape.status);
    evd_store_experiment_shape_clear(&shape);
    if (rc == EVD_OK && live_status(status)) {
        /* Jobs and runs first, the experiment's row last: the order of a case job's step. */
        if ((rc = evd_db_begin(c, err)) == EVD_OK &&
            (rc = evd_store_experiment_cancel_runs(c, id, evd_now_ms(), err)) == EVD_OK &&
            (rc = evd_store_experiment_lock(c, id, status, err)) == EVD_OK) {
            if (status[0] == '\0')
                rc = evd_err_set(err, EVD_ENOTFOUND, "experiment not found: %s", id);
            else if (live_status(status) &&
                     (rc = finish_locked(c, id, "cancelled", err)) == EVD_OK)
                snprintf(status, sizeof(status), "cancelled");
        }
        if (rc == EVD_OK)
            rc = evd_db_commit(c, err);
        evd_db_rollback(c);
    }
    evd_db_release(e->opts.db, c);
    if (rc == EVD_OK) {
        *response = json_pack("{s:s, s:s}", "experiment_id", id, "status", status);
        if (*response == NULL)
            rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    return rc;
}

enum evd_code evd_experiment_delete(struct evd_engine *e, const char *id, struct evd_err *err)
{
    enum evd_code rc = EVD_OK;
    WITH_CONN(e, err, rc = evd_store_experiment_delete(c, id, err));
    return rc;
}

/* ---- events --------------------------------------------------------------------- */

enum evd_code evd_engine_experiment_event(PGconn *c, const char *id, const json_t *payload,
                                          int64_t now, struct evd_err *err)
{
    /* Once per experiment; webhooks and the iii adapter deliver it from the outbox. */
    return evd_store_experiment_event(c, id, payload, now, err);
}
