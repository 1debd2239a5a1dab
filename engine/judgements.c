/*
 * The judge calls of an experiment (docs/judges.md, migrations/0025_judges.sql): one
 * judgement of a case, run by the case's job between its cells (engine/cells.c), through
 * the run lifecycle (engine/lifecycle.h) like a cell: registered under the experiment id
 * (so a cancel stops it), bounded by the scenario's wall clock and the job's lease, handed
 * back on a stop, written once by the attempt that ran it.
 *
 * A call reads its pair's two outputs and the case's answered judgements (one statement),
 * renders the judge's task and instructions for the case, and asks the judge's model with
 * structured output (domain/judge.h's schema; the harness's one repair), no functions, at
 * most judge.max_tokens a generation. The case's tallies (one per treatment, below) are
 * rebuilt from its answered judgements with the new one and written with it, so the
 * analyst takes a judged case in as it takes in its cells.
 *
 * The tallies of a case, `experiment_cases.judged`: one array per treatment,
 *   [wins, losses, ties, inconsistent, both, consistent, named, first, decisive, longer,
 *    calls, input_tokens, output_tokens, cost_usd, unpriced, settled]
 * (domain/preference.h's struct evd_pref_tally, then the judge calls' metrics, then the
 * treatment's judgements answered or failed: with experiment_cases.judge_unjudged they
 * tell when every judgement of the case is settled).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/trace.h"
#include "common/util.h"
#include "domain/judge.h"
#include "domain/limits.h"
#include "domain/preference.h"
#include "engine/internal.h"
#include "engine/lifecycle.h"
#include "harness/harness.h"
#include "store/db.h"
#include "store/judgements.h"

enum { TALLY_FIELDS = 16 };

/* The text of a run's output: a text answer itself, a JSON answer as its compact text. */
static char *output_text(const json_t *output)
{
    if (json_is_string(output))
        return strndup(json_string_value(output), json_string_length(output));
    return json_dumps(output, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* The judge calls' usage of one judgement's metrics into m[0..4]. */
static void metrics_add(const json_t *metrics, double m[5])
{
    if (!json_is_object(metrics))
        return;
    m[0] += (double)json_integer_value(json_object_get(metrics, "calls"));
    m[1] += (double)json_integer_value(json_object_get(metrics, "input_tokens"));
    m[2] += (double)json_integer_value(json_object_get(metrics, "output_tokens"));
    const json_t *cost = json_object_get(metrics, "cost_usd");
    if (json_is_number(cost))
        m[3] += json_number_value(cost);
    else if (json_integer_value(json_object_get(metrics, "calls")) > 0)
        m[4] += 1; /* a call that could not be priced */
}

json_t *evd_engine_judged_tallies(unsigned treatments, unsigned orders, uint32_t repeats,
                                  const json_t *rows)
{
    size_t npairs = (size_t)treatments * repeats;
    struct evd_pref_tally *t = calloc(treatments, sizeof(*t));
    double *m = calloc((size_t)treatments * 6, sizeof(double));
    /* per pair: the answer of each order, -1 while unanswered */
    int *slot = malloc(npairs * 2 * sizeof(int));
    uint64_t *len = calloc(npairs * 2, sizeof(uint64_t));
    json_t *out = NULL;
    if (t == NULL || m == NULL || slot == NULL || len == NULL)
        goto done;
    for (size_t k = 0; k < npairs * 2; k++)
        slot[k] = -1;
    size_t i;
    const json_t *r;
    json_array_foreach(rows, i, r)
    {
        json_int_t rep = json_integer_value(json_object_get(r, "repeat"));
        json_int_t tr = json_integer_value(json_object_get(r, "treatment"));
        json_int_t order = json_integer_value(json_object_get(r, "order"));
        if (rep < 1 || (uint32_t)rep > repeats || tr < 1 || (unsigned)tr > treatments ||
            order < 1 || order > 2)
            continue;
        metrics_add(json_object_get(r, "metrics"), &m[(tr - 1) * 6]);
        m[(tr - 1) * 6 + 5] += 1; /* settled: answered or failed */
        enum evd_pref_slot s;
        if (!evd_pref_slot_parse(json_string_value(json_object_get(r, "winner_slot")), &s))
            continue; /* a failed call: no answer */
        size_t pair = (size_t)(rep - 1) * treatments + (size_t)(tr - 1);
        slot[pair * 2 + (size_t)(order - 1)] = (int)s;
        len[pair * 2] = (uint64_t)json_integer_value(json_object_get(r, "len_control"));
        len[pair * 2 + 1] = (uint64_t)json_integer_value(json_object_get(r, "len_treatment"));
    }
    for (size_t pair = 0; pair < npairs; pair++) {
        int s1 = slot[pair * 2], s2 = slot[pair * 2 + 1];
        struct evd_pref_pair p;
        if (s1 < 0 && s2 < 0)
            continue;
        if (orders == 2 && s1 >= 0 && s2 >= 0)
            evd_pref_pair_both((enum evd_pref_slot)s1, (enum evd_pref_slot)s2, &p);
        else if (s1 >= 0)
            evd_pref_pair_single(1, (enum evd_pref_slot)s1, &p);
        else
            evd_pref_pair_single(2, (enum evd_pref_slot)s2, &p);
        evd_pref_tally_add(&t[pair % treatments], &p, len[pair * 2], len[pair * 2 + 1]);
    }
    out = json_array();
    for (unsigned k = 0; out != NULL && k < treatments; k++) {
        const struct evd_pref_tally *x = &t[k];
        const double *mm = &m[k * 6];
        json_t *a = json_pack("[I, I, I, I, I, I, I, I, I, I, I, I, I, f, I, I]",
                              (json_int_t)x->c.wins, (json_int_t)x->c.losses,
                              (json_int_t)x->c.ties, (json_int_t)x->inconsistent,
                              (json_int_t)x->both, (json_int_t)x->consistent,
                              (json_int_t)x->named, (json_int_t)x->first,
                              (json_int_t)x->decisive, (json_int_t)x->longer,
                              (json_int_t)mm[0], (json_int_t)mm[1], (json_int_t)mm[2], mm[3],
                              (json_int_t)mm[4], (json_int_t)mm[5]);
        if (a == NULL || json_array_append_new(out, a) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
done:
    free(t);
    free(m);
    free(slot);
    free(len);
    return out;
}

bool evd_engine_judged_decode(const json_t *judged, unsigned treatment,
                              struct evd_pref_tally *t, struct evd_judge_spend *spend)
{
    memset(t, 0, sizeof(*t));
    memset(spend, 0, sizeof(*spend));
    const json_t *a = json_array_get(judged, treatment - 1);
    if (json_array_size(a) != TALLY_FIELDS)
        return false;
    uint64_t v[TALLY_FIELDS];
    for (size_t k = 0; k < TALLY_FIELDS; k++) {
        const json_t *x = json_array_get(a, k);
        v[k] = json_is_integer(x) && json_integer_value(x) > 0 ? (uint64_t)json_integer_value(x)
                                                               : 0;
    }
    *t = (struct evd_pref_tally){{v[0], v[1], v[2]}, v[3], v[4], v[5], v[6], v[7], v[8], v[9]};
    spend->calls = v[10];
    spend->input_tokens = v[11];
    spend->output_tokens = v[12];
    spend->cost_usd = json_number_value(json_array_get(a, 13));
    spend->unpriced = v[14];
    spend->settled = v[15];
    return true;
}

/* What a judgement's attempt is to the lifecycle. */
struct judge_ctx {
    struct evd_harness_input in;
    struct evd_harness_outcome out;
};

static void judge_execute(struct evd_attempt *a)
{
    struct judge_ctx *k = a->kind;
    struct evd_err err = {0};
    if (evd_harness_run(a->e->opts.providers, &k->in, a->cancel, &k->out, &err) != EVD_OK) {
        a->not_started = true;
        return;
    }
    a->interrupted = k->out.status == EVD_HARNESS_CANCELLED;
}

/* The case and judgement a hand-back names (the lifecycle passes the attempt only). */
struct judge_attempt {
    struct judge_ctx k;
    int case_index;
};

static enum evd_code judge_hand_back_of(PGconn *c, const struct evd_attempt *a,
                                        struct evd_err *err)
{
    const struct judge_attempt *ja = a->kind;
    return evd_store_judge_hand_back(c, a->job->id, a->e->owner, a->subject_id, ja->case_index,
                                     a->position, a->attempt, err);
}

static const struct evd_attempt_ops JUDGE_OPS = {
    .what = "judge call",
    .id_key = "experiment_id",
    .execute = judge_execute,
    .progress = NULL,
    .hand_back = judge_hand_back_of,
};

/* {calls, input_tokens, output_tokens, cost_usd, latency_ms} of a judge call's harness
 * metrics (a call that never reached the provider spent nothing). */
static json_t *call_metrics(const json_t *metrics, int64_t latency_ms)
{
    const json_t *m = json_object_get(metrics, "totals");
    json_int_t calls = json_integer_value(json_object_get(m, "turns"));
    const json_t *cost = json_object_get(m, "cost_usd");
    return json_pack("{s:I, s:I, s:I, s:o, s:I}", "calls", calls, "input_tokens",
                     json_integer_value(json_object_get(m, "input_tokens")), "output_tokens",
                     json_integer_value(json_object_get(m, "output_tokens")), "cost_usd",
                     calls == 0             ? json_real(0)
                     : json_is_number(cost) ? json_real(json_number_value(cost))
                                            : json_null(),
                     "latency_ms", (json_int_t)latency_ms);
}

/* The judge's answer {winner, reason} read from a structured output. */
static bool answer_of(const json_t *output, enum evd_pref_slot *slot, const char **reason)
{
    if (!json_is_object(output) ||
        !evd_pref_slot_parse(json_string_value(json_object_get(output, "winner")), slot))
        return false;
    *reason = json_string_value(json_object_get(output, "reason"));
    return true;
}

/* The judge's limits: the experiment's timeouts, two generations (the answer and its one
 * repair), judge.max_tokens each, no caps of the arms'. */
static json_t *judge_limits(const struct evd_limits *arm, const json_t *judge)
{
    struct evd_limits l = *arm;
    l.max_turns = 2;
    l.max_output_tokens_per_call = (uint64_t)json_integer_value(json_object_get(judge,
                                                                                "max_tokens"));
    l.has_max_total_tokens = l.has_max_cost_usd = false;
    l.has_max_function_call_errors = l.has_max_error_spans = false;
    return evd_limits_to_json(&l);
}

int evd_engine_judge(struct evd_engine *e, struct evd_wconn *w, const struct evd_store_job *job,
                     const struct evd_judge_case *x, int position, int attempt, bool exhausted,
                     json_t **judgement, json_t **judged)
{
    *judgement = *judged = NULL;
    struct evd_err err = {0};
    const json_t *judge = json_object_get(x->request, "judge");
    unsigned treatments = x->arms - 1, orders = evd_judge_orders(judge);
    struct evd_judge_call call;
    evd_judge_call_at(treatments, orders, (uint32_t)position, &call);
    json_t *control = NULL, *treatment = NULL, *rows = NULL, *schema = NULL, *limits = NULL,
           *attrs = NULL;
    char *text[2] = {NULL, NULL}, *prompt = NULL, *instructions = NULL;
    struct judge_attempt ja = {.case_index = x->case_index};
    struct evd_attempt a = {.slot = -1};
    int result = 0;
    PGconn *c = evd_wconn_get(w, &err);
    if (c == NULL || evd_store_judge_pair(c, x->experiment_id, x->case_index, (int)call.repeat,
                                          (int)call.treatment, &control, &treatment, &rows,
                                          &err) != EVD_OK) {
        evd_log(EVD_LOG_WARN, "could not prepare a judge call", "experiment_id",
                x->experiment_id, "error", err.msg, NULL);
        goto out; /* the lease runs out and the judgement is tried again */
    }
    int64_t started = evd_now_ms();
    if ((text[0] = output_text(control)) == NULL || (text[1] = output_text(treatment)) == NULL)
        goto out;
    size_t len[2] = {strlen(text[0]), strlen(text[1])};
    json_t *j = json_pack("{s:s, s:I, s:I, s:I}", "status", "failed", "len_control",
                          (json_int_t)evd_pref_codepoints(text[0], len[0]), "len_treatment",
                          (json_int_t)evd_pref_codepoints(text[1], len[1]), "completed_at",
                          (json_int_t)started);
    if (j == NULL)
        goto out;
    if (exhausted) {
        char msg[160];
        evd_attempt_exhausted_message(msg, sizeof(msg), attempt);
        json_object_set_new(j, "error", json_string(msg));
        json_object_set_new(j, "metrics", call_metrics(NULL, 0));
        *judgement = j;
        result = 1;
        goto tally;
    }
    /* order 1: the control's output in slot 1; order 2: the treatment's */
    int first = call.order == 1 ? 0 : 1;
    if (evd_judge_prompt(judge, x->body, text[first], len[first], text[1 - first],
                         len[1 - first], &prompt, &instructions, &err) != EVD_OK) {
        /* The templates were checked at the start: only a change of the rules gets here. */
        json_object_set_new(j, "error", json_string(err.msg));
        json_object_set_new(j, "metrics", call_metrics(NULL, 0));
        *judgement = j;
        result = 1;
        goto tally;
    }
    schema = json_pack("{s:s, s:o}", "type", "json", "schema", evd_judge_schema());
    limits = judge_limits(x->limits, judge);
    char session[160];
    snprintf(session, sizeof(session), "%s_%d_judge%d", x->experiment_id, x->case_index,
             position);
    if (schema == NULL || limits == NULL) {
        json_decref(j);
        goto out;
    }
    /* Its trace (docs/otel.md): a `chat` span of a trace of its own, named by the
     * judgement and the attempt, with the judgement's attributes. */
    char trace_key[96];
    snprintf(trace_key, sizeof(trace_key), "judgement-%d-%d", x->case_index, position);
    struct evd_trace_ctx trace;
    evd_trace_for_run(x->experiment_id, trace_key, attempt, &trace);
    attrs = json_pack("{s:s, s:O, s:i, s:i, s:i, s:i, s:i}", "evald.experiment_id",
                      x->experiment_id, "evald.case_id", json_object_get(x->body, "id"),
                      "evald.judgement.case_index", x->case_index, "evald.judgement.repeat",
                      (int)call.repeat, "evald.judgement.treatment", (int)call.treatment,
                      "evald.judgement.order", (int)call.order, "evald.attempt", attempt);
    ja.k.in = (struct evd_harness_input){
        .session_id = session,
        .prompt = prompt,
        .system_prompt = instructions,
        .model = json_object_get(judge, "model"),
        .limits = limits,
        .functions = NULL, /* no function may be called */
        .output = schema,
        .trace = &trace,
        .chat_root = true,
        .span_attributes = attrs,
    };
    a = (struct evd_attempt){
        .ops = &JUDGE_OPS,
        .e = e,
        .w = w,
        .job = job,
        .subject_id = x->experiment_id,
        .position = position,
        .attempt = attempt,
        .timeout_ms = (int64_t)x->limits->scenario_timeout_seconds * 1000,
        .trace = &trace,
        .kind = &ja,
        .slot = -1,
    };
    switch (evd_attempt_run(&a)) {
    case EVD_ATTEMPT_FINISHED: {
        int64_t now = evd_now_ms();
        json_object_set_new(j, "metrics", call_metrics(ja.k.out.metrics, now - started));
        json_object_set_new(j, "completed_at", json_integer((json_int_t)now));
        enum evd_pref_slot slot;
        const char *reason = NULL;
        if (ja.k.out.status == EVD_HARNESS_COMPLETED && answer_of(ja.k.out.output, &slot, &reason)) {
            json_object_set_new(j, "status", json_string("completed"));
            json_object_set_new(j, "winner_slot", json_string(evd_pref_slot_name(slot)));
            json_object_set_new(j, "reason", reason ? json_string(reason) : json_null());
        } else {
            const char *why = ja.k.out.result_error != NULL ? ja.k.out.result_error
                                                            : "the judge gave no answer";
            json_object_set_new(j, "error", json_string(why));
        }
        break;
    }
    case EVD_ATTEMPT_TIMED_OUT: {
        int64_t now = evd_now_ms();
        char msg[128];
        snprintf(msg, sizeof(msg), "judge call exceeded %llus wall-clock limit",
                 (unsigned long long)x->limits->scenario_timeout_seconds);
        json_object_set_new(j, "error", json_string(msg));
        json_object_set_new(j, "metrics", call_metrics(ja.k.out.metrics, now - started));
        json_object_set_new(j, "completed_at", json_integer((json_int_t)now));
        break;
    }
    case EVD_ATTEMPT_CANCELLED:
    case EVD_ATTEMPT_HANDED_BACK:
    case EVD_ATTEMPT_DROPPED:
        json_decref(j);
        goto out;
    }
    *judgement = j;
    result = 1;
tally:
    /* The case's answered judgements with this one, tallied per treatment. */
    {
        json_t *row = json_pack("{s:i, s:i, s:i, s:O?, s:O, s:O, s:O?}", "repeat",
                                (int)call.repeat, "treatment", (int)call.treatment, "order",
                                (int)call.order, "winner_slot",
                                json_object_get(*judgement, "winner_slot"), "len_control",
                                json_object_get(*judgement, "len_control"), "len_treatment",
                                json_object_get(*judgement, "len_treatment"), "metrics",
                                json_object_get(*judgement, "metrics"));
        if (row == NULL || json_array_append_new(rows, row) != 0 ||
            (*judged = evd_engine_judged_tallies(treatments, orders, x->repeats, rows)) ==
                NULL) {
            json_decref(*judgement);
            *judgement = NULL;
            result = 0;
        }
    }
out:
    evd_attempt_clear(&a);
    evd_harness_outcome_clear(&ja.k.out);
    json_decref(control);
    json_decref(treatment);
    json_decref(rows);
    json_decref(schema);
    json_decref(limits);
    json_decref(attrs);
    free(text[0]);
    free(text[1]);
    free(prompt);
    free(instructions);
    return result;
}
