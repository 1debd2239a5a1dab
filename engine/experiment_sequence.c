/*
 * The sequence of an experiment and its anytime-valid verdicts
 * (../shared/spec/sequential.md, "The sequence and the confidence sequence", "Stopping";
 * docs/experiments.md, "Stopping early"). Each analysis pass, holding the experiment's
 * row, gives the cases that completed since the last one their place in the sequence
 * (store: seq, in dispatch order), reads the whole sequence back, and runs each
 * treatment's confidence sequence over it from the first case (domain/sequential.h), so
 * that the figures depend on the stored sequence only, never on when or where the pass
 * ran. Every comparison gains `sequential`; with the anytime rule its verdict is the
 * sequential one, and once every treatment is decided the pass stops the dispatch.
 */
#include "engine/experiments.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "domain/analysis.h"
#include "domain/preference.h"
#include "domain/sequential.h"
#include "engine/internal.h"
#include "store/experiments.h"

/* Whether case k's runs (per_case of them) are all terminal and, in a judged experiment,
 * its judgements all settled (answered, failed or unjudged) as the analyst has read them:
 * no case job writes its row any more (the pass that places it holds the experiment's row,
 * which a judgement's finish may be waiting for while it holds the case's). */
static bool case_complete(const struct evd_analysis_cell *cells, unsigned arms,
                          uint32_t per_case, const struct evd_judge_seq *judge, size_t cases,
                          size_t k)
{
    uint32_t runs = 0;
    for (unsigned arm = 0; arm < arms; arm++)
        runs += cells[k * arms + arm].runs;
    if (runs < per_case)
        return false;
    if (judge == NULL)
        return true;
    uint64_t settled = judge->unjudged[k];
    for (unsigned t = 1; t < arms; t++)
        settled += judge->spend[(size_t)(t - 1) * cases + k].settled;
    return settled >= judge->per_case;
}

/* The int[] literal of the cases whose planned runs are all terminal (none skipped), but
 * those `sequenced` marks (NULL: none) as in the sequence already. */
static char *complete_cases(const struct evd_analysis_cell *cells, unsigned arms, size_t cases,
                            uint32_t per_case, const struct evd_judge_seq *judge,
                            const uint8_t *sequenced)
{
    struct evd_buf b = {0};
    int rc = evd_buf_append(&b, "{", 1);
    bool first = true;
    for (size_t k = 0; k < cases && rc == 0; k++) {
        if ((sequenced != NULL && sequenced[k]) ||
            !case_complete(cells, arms, per_case, judge, cases, k))
            continue;
        char s[24];
        int n = snprintf(s, sizeof(s), "%s%zu", first ? "" : ",", k + 1);
        rc = evd_buf_append(&b, s, (size_t)n);
        first = false;
    }
    if (rc != 0 || evd_buf_append(&b, "}", 2) != 0) {
        evd_buf_free(&b);
        return NULL;
    }
    return b.data;
}

/* The case pass rate of a cell; false when it has no evaluated run. */
static bool rate(const struct evd_analysis_cell *cell, double *out)
{
    if (cell->evaluated == 0)
        return false;
    *out = (double)cell->passed / cell->evaluated;
    return true;
}

enum evd_code evd_engine_experiment_sequence(PGconn *c, const char *id, const json_t *request,
                                             unsigned arms, size_t cases,
                                             const struct evd_analysis_cell *cells,
                                             const struct evd_judge_seq *judge,
                                             uint8_t *sequenced, bool anytime, bool terminal,
                                             json_t *analysis, bool *decided, int64_t *at_case,
                                             struct evd_err *err)
{
    *decided = false;
    *at_case = 0;
    const uint32_t repeats = (uint32_t)json_integer_value(json_object_get(request, "repeats"));
    char *complete = complete_cases(cells, arms, cases, arms * repeats, judge, sequenced);
    if (complete == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    json_t *seq = evd_store_experiment_sequence(c, id, complete, err);
    free(complete);
    if (seq == NULL)
        return evd_db_code(err);

    const json_t *an = json_object_get(request, "analysis");
    const json_t *stopping = json_object_get(request, "stopping");
    json_int_t min_cases = json_integer_value(json_object_get(stopping, "min_cases"));
    if (min_cases < 1)
        min_cases = 10;
    const double alpha = json_number_value(json_object_get(an, "alpha"));
    const double min_effect = json_number_value(json_object_get(an, "min_effect"));
    const double alpha2 = (alpha > 0 ? alpha : 0.05) / (arms - 1);

    /* Another process may have placed a case this one has not read complete yet: its
     * figures would be wrong here, so such a pass shows them but decides nothing. */
    bool current = true;
    size_t i;
    const json_t *v;
    json_array_foreach(seq, i, v)
    {
        size_t k = (size_t)json_integer_value(v) - 1;
        current = current && k < cases &&
                  case_complete(cells, arms, arms * repeats, judge, cases, k);
        if (sequenced != NULL && k < cases)
            sequenced[k] = 1;
    }
    bool all = arms > 1 && current;
    enum evd_code rc = EVD_OK;
    json_t *cmps = json_object_get(analysis, "comparisons");
    for (unsigned t = 1; t < arms; t++) {
        struct evd_seq_cs cs;
        evd_seq_cs_init(&cs, alpha2, (uint64_t)min_cases, min_effect);
        json_array_foreach(seq, i, v)
        {
            size_t k = (size_t)json_integer_value(v) - 1;
            double sc, st, p;
            if (k >= cases)
                continue;
            if (judge != NULL && judge->by_judge) {
                /* The judge's verdict: the case's preference p_i, when it has a judged pair. */
                if (evd_pref_case_p(&judge->tallies[(size_t)(t - 1) * cases + k].c, &p))
                    evd_seq_cs_add(&cs, p);
                continue;
            }
            if (!rate(&cells[k * arms], &sc) || !rate(&cells[k * arms + t], &st))
                continue; /* not paired for this treatment */
            evd_seq_cs_add(&cs, st - sc);
        }
        enum evd_seq_verdict verdict = evd_seq_cs_verdict(&cs, terminal);
        all = all && cs.decided_at > 0;
        json_t *cj = json_array_get(cmps, t - 1);
        json_t *block = json_pack(
            "{s:I, s:o, s:o, s:s, s:o}", "n", (json_int_t)cs.n, "low",
            cs.n > 0 ? json_real(evd_seq_cs_low(&cs)) : json_null(), "high",
            cs.n > 0 ? json_real(evd_seq_cs_high(&cs)) : json_null(), "verdict",
            evd_seq_verdict_name(verdict), "decided_at",
            cs.decided_at > 0 ? json_integer((json_int_t)cs.decided_at) : json_null());
        if (cj == NULL || block == NULL || json_object_set_new(cj, "sequential", block) != 0) {
            rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
            break;
        }
        if (anytime) {
            /* The fixed-sample verdict stays beside it, not valid under optional stopping. */
            json_object_set(cj, "fixed_verdict", json_object_get(cj, "verdict"));
            json_object_set_new(cj, "verdict", json_string(evd_seq_verdict_name(verdict)));
        }
    }
    json_t *info = json_object_get(analysis, "analysis");
    if (rc == EVD_OK && json_is_object(info)) {
        json_object_set_new(info, "rule", json_string(anytime ? "anytime" : "fixed"));
        json_object_set_new(info, "sequence_length", json_integer((json_int_t)json_array_size(seq)));
    }
    *decided = rc == EVD_OK && anytime && all;
    *at_case = (int64_t)json_array_size(seq);
    json_decref(seq);
    return rc;
}

enum evd_code evd_engine_experiment_stop_pass(PGconn *c, const char *id, json_t *analysis,
                                              const json_t *request, unsigned arms,
                                              size_t cases, const struct evd_analysis_cell *cells,
                                              const struct evd_judge_seq *judge,
                                              uint8_t *sequenced, enum evd_stop_pass pass,
                                              struct evd_err *err)
{
    struct evd_store_experiment_stop st;
    enum evd_code rc = evd_store_experiment_stop_state(c, id, &st, err);
    if (rc != EVD_OK || !st.found)
        return rc;
    bool decided = false;
    int64_t seq_len = 0;
    if ((rc = evd_engine_experiment_sequence(c, id, request, arms, cases, cells, judge, sequenced,
                                             st.anytime, pass != EVD_STOP_PASS_RUNNING, analysis,
                                             &decided, &seq_len, err)) != EVD_OK)
        return rc;
    const bool live = strcmp(st.status, "queued") == 0 || strcmp(st.status, "running") == 0;
    if (!live || st.stopped || pass == EVD_STOP_PASS_CANCEL)
        return EVD_OK;
    if (decided) {
        rc = evd_store_experiment_stop(c, id, "decided", seq_len, evd_now_ms(), err);
        if (rc == EVD_OK)
            evd_log(EVD_LOG_INFO, "experiment decided; no more cases are dispatched",
                    "experiment_id", id, NULL);
    } else if (pass == EVD_STOP_PASS_RUNNING && st.anytime && st.undispatched) {
        /* The sequence grew: the jobs the lookahead ended may go on
         * (evald_experiment_lookahead, migrations/0024). */
        int scheduled = 0;
        rc = evd_store_experiment_schedule(c, id, "", &scheduled, err);
    } else if (pass == EVD_STOP_PASS_FINISH) {
        /* The last dispatched case ended: either a budget left cases undispatched, or
         * every case ran. */
        rc = evd_store_experiment_stop(c, id, st.undispatched ? "budget" : "exhausted",
                                       st.undispatched ? seq_len : (int64_t)cases,
                                       evd_now_ms(), err);
    }
    return rc;
}
