/* A conversation with a simulated user; see simulate.h. */
#include "engine/simulate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "domain/session.h"
#include "domain/simulator.h"
#include "domain/trajectory.h"

/* What the turns so far add up to. */
struct conv {
    json_t *metrics;     /* the agent's, summed */
    json_t *spans;       /* every harness run's, in order */
    json_t *generations; /* the agent's */
    json_t *fcalls;      /* the agent's */
    json_t *transcript;  /* agent-cases.md's, in conversation order */
    json_t *neutral;     /* the harness's conversation, the next turn's history */
    int64_t limiter_wait_ms;
    int bad; /* out of memory somewhere */
};

static void append_all(json_t *to, const json_t *from, int *bad)
{
    size_t i;
    json_t *v;
    json_array_foreach(from, i, v)
    {
        *bad |= json_array_append(to, v);
    }
}

/* Folds one harness run of the agent (o, borrowed) into c. */
static void fold_agent(struct conv *c, const char *session_id, const char *prompt,
                       const struct evd_harness_outcome *o)
{
    json_t *sum = evd_session_metrics_add(c->metrics, o->metrics, session_id, true);
    c->bad |= sum == NULL;
    if (sum != NULL) {
        json_decref(c->metrics);
        c->metrics = sum;
    }
    append_all(c->spans, o->spans, &c->bad);
    append_all(c->generations, json_object_get(o->transcript, "generations"), &c->bad);
    append_all(c->fcalls, json_object_get(o->transcript, "function_calls"), &c->bad);
    c->limiter_wait_ms += o->limiter_wait_ms;
    if (o->status != EVD_HARNESS_COMPLETED)
        return;
    /* This turn: the user message it sent (none for an empty prompt) and the answer. */
    json_t *turn = evd_trajectory_transcript(NULL, prompt, o->output, o->transcript);
    c->bad |= turn == NULL;
    append_all(c->transcript, turn, &c->bad);
    json_decref(turn);
    json_decref(c->neutral);
    c->neutral = json_incref(o->conversation);
}

/*
 * The calls of each mocked tool the agent's turns so far made that a sequence counts (those
 * that passed the check of their arguments: answered, or told there was no mock), so that
 * the next turn's k-th call goes on from them (docs/harness.md, "Mocked tools"). New
 * reference; NULL without memory.
 */
static json_t *mock_counts_of(const json_t *fcalls)
{
    json_t *counts = json_object();
    size_t i;
    const json_t *f;
    json_array_foreach(fcalls, i, f)
    {
        const char *id = json_string_value(json_object_get(f, "function_id"));
        const char *error = json_string_value(json_object_get(f, "error"));
        if (counts == NULL || id == NULL || !json_is_true(json_object_get(f, "mocked")) ||
            (error != NULL && strncmp(error, "no mocked result for ", 21) != 0))
            continue;
        json_object_set_new(counts, id,
                            json_integer(json_integer_value(json_object_get(counts, id)) + 1));
    }
    return counts;
}

/* The simulator's figures of one call (o, borrowed) into *use. */
static void fold_simulator(struct evd_sim_use *use, const struct evd_harness_outcome *o,
                           struct conv *c)
{
    const json_t *t = json_object_get(o->metrics, "totals");
    use->calls += json_integer_value(json_object_get(t, "turns"));
    use->input_tokens += json_integer_value(json_object_get(t, "input_tokens"));
    use->output_tokens += json_integer_value(json_object_get(t, "output_tokens"));
    const json_t *cost = json_object_get(t, "cost_usd");
    if (json_is_number(cost))
        use->cost_usd += json_number_value(cost);
    else if (json_integer_value(json_object_get(t, "turns")) > 0)
        use->priced = false;
    append_all(c->spans, o->spans, &c->bad);
    c->limiter_wait_ms += o->limiter_wait_ms;
}

/*
 * The run's token and cost budgets (limits.execution.max_total_tokens, max_cost_usd) are
 * the whole conversation's: each agent turn gets what the turns before left of them, and
 * a conversation that spent them all ends before its next user turn, failed in phase
 * "limit" as a turn that spends them before its function calls does. NULL limits (none given, or
 * no memory) leave the agent's limits as they are.
 */
static json_t *turn_limits(const json_t *limits, const json_t *metrics)
{
    const json_t *exec = json_object_get(limits, "execution");
    const json_t *mt = json_object_get(exec, "max_total_tokens");
    const json_t *mc = json_object_get(exec, "max_cost_usd");
    if (metrics == NULL || (!json_is_integer(mt) && !json_is_number(mc)))
        return NULL;
    const json_t *t = json_object_get(metrics, "totals");
    json_int_t used = json_integer_value(json_object_get(t, "input_tokens")) +
                      json_integer_value(json_object_get(t, "output_tokens"));
    double cost = json_number_value(json_object_get(t, "cost_usd"));
    json_t *copy = json_deep_copy(limits);
    json_t *cexec = json_object_get(copy, "execution");
    if (json_is_integer(mt) && cexec != NULL) {
        json_int_t left = json_integer_value(mt) - used;
        json_object_set_new(cexec, "max_total_tokens", json_integer(left > 0 ? left : 0));
    }
    if (json_is_number(mc) && cexec != NULL) {
        double left = json_number_value(mc) - cost;
        json_object_set_new(cexec, "max_cost_usd", json_real(left > 0 ? left : 0));
    }
    return copy;
}

/* The budget the conversation so far spent past, as the failure's message in msg; false
 * when none was. */
static bool over_budget(const json_t *limits, const json_t *metrics, char *msg, size_t n)
{
    const json_t *exec = json_object_get(limits, "execution");
    const json_t *mt = json_object_get(exec, "max_total_tokens");
    const json_t *mc = json_object_get(exec, "max_cost_usd");
    const json_t *t = json_object_get(metrics, "totals");
    json_int_t used = json_integer_value(json_object_get(t, "input_tokens")) +
                      json_integer_value(json_object_get(t, "output_tokens"));
    const json_t *cost = json_object_get(t, "cost_usd");
    if (json_is_integer(mt) && used >= json_integer_value(mt)) {
        snprintf(msg, n,
                 "total tokens %lld reached max_total_tokens %lld before the next "
                 "user turn",
                 (long long)used, (long long)json_integer_value(mt));
        return true;
    }
    if (json_is_number(mc) && json_is_number(cost) &&
        json_number_value(cost) >= json_number_value(mc)) {
        snprintf(msg, n, "cost $%.6f reached max_cost_usd $%.6f before the next user turn",
                 json_number_value(cost), json_number_value(mc));
        return true;
    }
    return false;
}

/* A turn's progress snapshot with the turns before it added, for the run's own callback. */
struct progress_sum {
    const struct evd_harness_input *agent;
    const json_t *before; /* the turns so far (c.metrics), or NULL */
};

static void progress_summed(void *ctx, json_t *metrics)
{
    const struct progress_sum *p = ctx;
    json_t *sum = p->before != NULL ? evd_session_metrics_add(p->before, metrics,
                                                               p->agent->session_id, false)
                                    : NULL;
    p->agent->progress(p->agent->progress_ctx, sum != NULL ? sum : metrics);
    json_decref(sum);
}

/* The simulator's reply to the conversation so far: a malloc'd string, or NULL with *o
 * (the caller clears it) telling why. */
static char *ask_simulator(const struct evd_providers *providers,
                           const struct evd_harness_input *agent, const json_t *simulator,
                           const char *instructions, const json_t *transcript,
                           struct evd_cancel *cancel, struct evd_harness_outcome *o)
{
    char session[192];
    snprintf(session, sizeof(session), "%s:user", agent->session_id);
    json_t *view = evd_simulator_view(transcript);
    /* One generation, no function, text out: the simulator only writes the next message. */
    json_t *limits = json_deep_copy(agent->limits);
    if (!json_is_object(limits)) {
        json_decref(limits);
        limits = json_object();
    }
    json_t *exec = json_object_get(limits, "execution");
    if (!json_is_object(exec)) {
        exec = json_object();
        json_object_set_new(limits, "execution", exec);
    }
    json_object_set_new(exec, "max_turns", json_integer(1));
    json_object_del(exec, "max_total_tokens");
    json_object_del(exec, "max_cost_usd");
    json_t *attrs = json_pack("{s:b}", "evald.simulator", 1);
    struct evd_err err = {0};
    char *reply = NULL;
    if (view != NULL && limits != NULL && attrs != NULL) {
        const struct evd_harness_input in = {
            .session_id = session,
            .prompt = "",
            .system_prompt = instructions,
            .model = json_object_get(simulator, "model"),
            .limits = limits,
            .conversation = view,
            .metadata = agent->metadata,
            .trace = agent->trace,
            .span_attributes = attrs,
        };
        if (evd_harness_run(providers, &in, cancel, o, &err) != EVD_OK)
            o->status = EVD_HARNESS_FAILED;
        else if (o->status == EVD_HARNESS_COMPLETED && json_is_string(o->output))
            reply = strdup(json_string_value(o->output));
    }
    json_decref(view);
    json_decref(limits);
    json_decref(attrs);
    return reply;
}

/* Ends *out from c: the conversation's figures as one run's. */
static enum evd_code finish(struct conv *c, const struct evd_harness_input *agent,
                            int64_t started_at, int64_t t0, struct evd_harness_outcome *out,
                            struct evd_err *err)
{
    out->started_at_ms = started_at;
    out->wall_time_ms = evd_mono_ms() - t0;
    out->limiter_wait_ms = c->limiter_wait_ms;
    json_decref(out->metrics);
    json_decref(out->spans);
    json_decref(out->transcript);
    json_decref(out->conversation);
    out->metrics = c->metrics;
    out->spans = c->spans;
    out->conversation = c->neutral != NULL ? c->neutral : json_array();
    out->transcript = json_pack("{s:o, s:o, s:o}", "generations", c->generations, "function_calls",
                                c->fcalls, "conversation", c->transcript);
    c->metrics = c->spans = c->neutral = c->generations = c->fcalls = c->transcript = NULL;
    if (out->metrics != NULL) {
        json_t *traces = evd_harness_traces_from_spans(agent->session_id, out->spans);
        if (traces == NULL || json_object_set_new(out->metrics, "traces", traces) != 0)
            c->bad = 1;
    }
    if (c->bad || out->metrics == NULL || out->transcript == NULL || out->conversation == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory folding a simulated conversation");
    return EVD_OK;
}

/* The conversation so far, for a later attempt (evd_sim_resume); NULL without memory. */
static json_t *checkpoint_of(const struct conv *c, const struct evd_sim_use *use,
                             const char *prompt, int64_t elapsed_ms)
{
    return json_pack("{s:I, s:s, s:O, s:O, s:O*, s:O, s:O, s:O, s:I, s:I,"
                     " s:{s:I, s:I, s:I, s:f, s:b}}",
                     "answers", (json_int_t)use->answers, "prompt", prompt, "neutral", c->neutral,
                     "transcript", c->transcript, "metrics", c->metrics, "spans", c->spans,
                     "generations", c->generations, "function_calls", c->fcalls, "limiter_wait_ms",
                     (json_int_t)c->limiter_wait_ms, "elapsed_ms", (json_int_t)elapsed_ms,
                     "simulator", "calls", (json_int_t)use->calls, "input_tokens",
                     (json_int_t)use->input_tokens, "output_tokens", (json_int_t)use->output_tokens,
                     "cost_usd", use->cost_usd, "priced", use->priced);
}

/* Takes an earlier attempt's checkpoint (borrowed) into c, *use and *prompt; false when it
 * is not one (the conversation then starts over). */
static bool resume_from(const json_t *cp, struct conv *c, struct evd_sim_use *use, char **prompt,
                        int64_t *elapsed_ms)
{
    const char *p = json_string_value(json_object_get(cp, "prompt"));
    const json_t *sim = json_object_get(cp, "simulator");
    static const char *const arrays[] = {"neutral", "transcript", "spans", "generations",
                                         "function_calls"};
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
        if (!json_is_array(json_object_get(cp, arrays[i])))
            return false;
    if (p == NULL || !json_is_object(sim) || !json_is_object(json_object_get(cp, "metrics")))
        return false;
    char *copy = strdup(p);
    if (copy == NULL)
        return false;
    free(*prompt);
    *prompt = copy;
    json_t **slots[] = {&c->neutral, &c->transcript, &c->spans, &c->generations, &c->fcalls};
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) {
        json_decref(*slots[i]);
        *slots[i] = json_deep_copy(json_object_get(cp, arrays[i]));
        c->bad |= *slots[i] == NULL;
    }
    c->metrics = json_deep_copy(json_object_get(cp, "metrics"));
    c->bad |= c->metrics == NULL;
    c->limiter_wait_ms = json_integer_value(json_object_get(cp, "limiter_wait_ms"));
    *elapsed_ms = json_integer_value(json_object_get(cp, "elapsed_ms"));
    use->answers = json_integer_value(json_object_get(cp, "answers"));
    use->calls = json_integer_value(json_object_get(sim, "calls"));
    use->input_tokens = json_integer_value(json_object_get(sim, "input_tokens"));
    use->output_tokens = json_integer_value(json_object_get(sim, "output_tokens"));
    use->cost_usd = json_number_value(json_object_get(sim, "cost_usd"));
    use->priced = json_is_true(json_object_get(sim, "priced"));
    return true;
}

enum evd_code evd_simulate(const struct evd_providers *providers,
                           const struct evd_harness_input *agent, const json_t *simulator,
                           const char *instructions, const struct evd_sim_resume *resume,
                           struct evd_cancel *cancel, struct evd_harness_outcome *out,
                           struct evd_sim_use *use, struct evd_err *err)
{
    memset(use, 0, sizeof(*use));
    use->priced = true;
    int64_t max_turns = json_integer_value(json_object_get(simulator, "max_turns"));
    struct conv c = {
        .spans = json_array(),
        .generations = json_array(),
        .fcalls = json_array(),
        .transcript =
            json_is_array(agent->conversation) ? json_deep_copy(agent->conversation) : json_array(),
        .neutral = json_incref(agent->conversation),
    };
    int64_t started_at = evd_now_ms(), t0 = evd_mono_ms(), before = 0;
    char *prompt = strdup(agent->prompt != NULL ? agent->prompt : "");
    enum evd_code rc = EVD_OK;
    c.bad = c.spans == NULL || c.generations == NULL || c.fcalls == NULL || c.transcript == NULL ||
            prompt == NULL;
    const json_t *cp = resume != NULL ? resume->checkpoint : NULL;
    if (!c.bad && json_is_object(cp) && !resume_from(cp, &c, use, &prompt, &before))
        evd_log(EVD_LOG_WARN, "a conversation's checkpoint is not one; it starts over",
                "session_id", agent->session_id, NULL);
    while (!c.bad) {
        struct evd_harness_input in = *agent;
        in.prompt = prompt;
        in.conversation = c.neutral;
        json_t *counts = agent->mock_tools != NULL ? mock_counts_of(c.fcalls) : NULL;
        json_t *left = turn_limits(agent->limits, c.metrics);
        in.mock_counts = counts;
        if (left != NULL)
            in.limits = left;
        struct progress_sum sum = {agent, c.metrics};
        if (agent->progress != NULL) {
            in.progress = progress_summed;
            in.progress_ctx = &sum;
        }
        struct evd_harness_outcome o = {0};
        rc = evd_harness_run(providers, &in, cancel, &o, err);
        json_decref(counts);
        json_decref(left);
        if (rc != EVD_OK)
            break;
        fold_agent(&c, agent->session_id, prompt, &o);
        json_decref(out->output);
        out->output = o.output != NULL ? json_incref(o.output) : NULL;
        out->status = o.status;
        out->phase = o.phase;
        out->code = o.code;
        out->output_invalid = o.output_invalid;
        free(out->result_error);
        out->result_error = o.result_error != NULL ? strdup(o.result_error) : NULL;
        bool answered = o.status == EVD_HARNESS_COMPLETED;
        evd_harness_outcome_clear(&o);
        if (!answered || ++use->answers >= max_turns)
            break;
        char why[200];
        if (over_budget(agent->limits, c.metrics, why, sizeof(why))) {
            out->status = EVD_HARNESS_FAILED;
            out->phase = "limit";
            out->code = EVD_ECONFLICT;
            free(out->result_error);
            out->result_error = strdup(why);
            break;
        }
        struct evd_harness_outcome so = {0};
        char *reply =
            ask_simulator(providers, agent, simulator, instructions, c.transcript, cancel, &so);
        fold_simulator(use, &so, &c);
        if (reply == NULL) {
            /* The run fails (or is cancelled) with what stopped the simulator. */
            char msg[600];
            snprintf(msg, sizeof(msg), "simulated user: %s",
                     so.result_error != NULL ? so.result_error : "no text reply");
            out->status =
                so.status == EVD_HARNESS_CANCELLED ? EVD_HARNESS_CANCELLED : EVD_HARNESS_FAILED;
            out->phase = so.phase != NULL ? so.phase : "send";
            out->code = so.code != EVD_OK ? so.code : EVD_EUPSTREAM;
            free(out->result_error);
            out->result_error = strdup(msg);
            evd_harness_outcome_clear(&so);
            break;
        }
        evd_harness_outcome_clear(&so);
        if (evd_simulator_stops(simulator, reply, strlen(reply))) {
            free(reply);
            break;
        }
        free(prompt);
        prompt = reply;
        /* A turn done and the next message known: a later attempt goes on from here. */
        if (resume != NULL && resume->save != NULL) {
            json_t *keep = checkpoint_of(&c, use, prompt, before + evd_mono_ms() - t0);
            if (keep != NULL)
                resume->save(resume->ctx, keep);
            json_decref(keep);
        }
    }
    free(prompt);
    bool failed = rc != EVD_OK || c.bad;
    enum evd_code frc = finish(&c, agent, started_at, t0 - before, out, err);
    if (failed || frc != EVD_OK) {
        /* Out of memory: the run fails, whatever its last turn said. */
        out->status = EVD_HARNESS_FAILED;
        out->phase = "setup";
        out->code = EVD_ENOMEM;
        free(out->result_error);
        out->result_error = strdup("out of memory during a simulated conversation");
        rc = EVD_ENOMEM;
    }
    json_decref(c.metrics);
    json_decref(c.spans);
    json_decref(c.generations);
    json_decref(c.fcalls);
    json_decref(c.transcript);
    json_decref(c.neutral);
    return rc;
}
