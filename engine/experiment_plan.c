/*
 * What a start would run and cost before anything is paid (POST /v1/experiments/plan,
 * ../shared/spec/sequential.md, "Planning"), and the budget a start stores with the
 * reservation of a run before any finished ("Budgets"). See docs/experiments.md.
 */
#include "engine/experiments.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "domain/experiment.h"
#include "domain/sequential.h"
#include "engine/internal.h"
#include "harness/providers.h"
#include "store/experiments.h"

/* Input tokens are estimated from bytes: about four bytes a token (docs/experiments.md). */
#define BYTES_PER_TOKEN 4.0

/* limits.execution.max_output_tokens_per_call of arm `arm` (a model variant may have its
 * own: evd_experiment_arm_limits). */
static double max_output_per_call(const json_t *normalized, size_t arm)
{
    json_t *limits = evd_experiment_arm_limits(normalized, arm);
    const json_t *v = json_object_get(json_object_get(limits, "execution"),
                                      "max_output_tokens_per_call");
    double n = json_is_integer(v) && json_integer_value(v) > 0
                   ? (double)json_integer_value(v)
                   : (double)EVD_LIMITS_DEFAULT_MAX_OUTPUT_TOKENS;
    json_decref(limits);
    return n;
}

/* The price of arm `arm`'s model (the shared one, or a model variant's); false when it has
 * none (or cannot be resolved). */
static bool model_price(struct evd_engine *e, const json_t *normalized, size_t arm,
                        struct evd_price *out)
{
    struct evd_resolved_model m;
    struct evd_err err = {0};
    json_t *model = NULL;
    bool priced = evd_experiment_arm_model(normalized, arm, &model, &err) == EVD_OK &&
                  evd_providers_resolve(e->opts.providers, model, &m, &err) == EVD_OK &&
                  evd_providers_price(e->opts.providers, m.provider, m.model, out);
    json_decref(model);
    return priced;
}

/* The arms with a model of their own: every arm for the model dimension, else one. */
static size_t priced_arms(const json_t *normalized)
{
    return json_object_get(normalized, "model") != NULL ? 1 : evd_experiment_arms(normalized);
}

/* The price of the judge's model (domain/judge.h); false without a judge or a price. */
static bool judge_price(struct evd_engine *e, const json_t *normalized, struct evd_price *out)
{
    const json_t *judge = json_object_get(normalized, "judge");
    struct evd_resolved_model m;
    struct evd_err err = {0};
    return json_is_object(judge) &&
           evd_providers_resolve(e->opts.providers, json_object_get(judge, "model"), &m, &err) ==
               EVD_OK &&
           evd_providers_price(e->opts.providers, m.provider, m.model, out);
}

/* The price of the simulated user's model (domain/simulator.h); false without one or a
 * price. */
static bool simulator_price(struct evd_engine *e, const json_t *normalized,
                            struct evd_price *out)
{
    const json_t *sim = json_object_get(normalized, "simulator");
    struct evd_resolved_model m;
    struct evd_err err = {0};
    return json_is_object(sim) &&
           evd_providers_resolve(e->opts.providers, json_object_get(sim, "model"), &m, &err) ==
               EVD_OK &&
           evd_providers_price(e->opts.providers, m.provider, m.model, out);
}

/* The agent answers a run may make: the simulator's max_turns, else one. */
static double answers_per_run(const json_t *normalized)
{
    const json_t *sim = json_object_get(normalized, "simulator");
    return json_is_object(sim) ? (double)json_integer_value(json_object_get(sim, "max_turns"))
                               : 1.0;
}

/* The model id of arm `arm` (the shared model's for one model). */
static const char *model_id(const json_t *normalized, size_t arm)
{
    const json_t *model = json_object_get(normalized, "model");
    if (model == NULL)
        model = json_object_get(arm == 0 ? json_object_get(normalized, "control")
                                         : json_array_get(json_object_get(normalized,
                                                                          "treatments"),
                                                          arm - 1),
                                "model");
    const char *id = json_string_value(json_object_get(model, "model"));
    return id != NULL ? id : "";
}

enum evd_code evd_engine_experiment_budget(struct evd_engine *e, const json_t *normalized,
                                           json_t **out, struct evd_err *err)
{
    *out = NULL;
    const json_t *caps = json_object_get(normalized, "budget");
    if (!json_is_object(caps))
        return EVD_OK;
    /* Every arm's model needs a price under a cost cap; a run reserves what the dearest
     * arm's run could write before any has finished. */
    bool priced = true;
    double tokens = 0, reserve_usd = 0;
    for (size_t arm = 0; arm < priced_arms(normalized); arm++) {
        struct evd_price price;
        double t = max_output_per_call(normalized, arm);
        if (!model_price(e, normalized, arm, &price)) {
            if (json_object_get(caps, "max_cost_usd") != NULL)
                return evd_err_set(err, EVD_EINVAL,
                                   "budget.max_cost_usd needs a price for model %s",
                                   model_id(normalized, arm));
            priced = false;
        } else if (t * price.output_usd_per_mtok / 1e6 > reserve_usd) {
            reserve_usd = t * price.output_usd_per_mtok / 1e6;
        }
        tokens = fmax(tokens, t);
    }
    /* The judge's calls count in the budget too (docs/judges.md). */
    const json_t *judge = json_object_get(normalized, "judge");
    struct evd_price jp;
    if (json_object_get(caps, "max_cost_usd") != NULL && json_is_object(judge) &&
        !judge_price(e, normalized, &jp)) {
        const char *jm = json_string_value(json_object_get(json_object_get(judge, "model"),
                                                           "model"));
        return evd_err_set(err, EVD_EINVAL, "budget.max_cost_usd needs a price for model %s",
                           jm != NULL ? jm : "");
    }
    /* So do a simulated user's (docs/agents.md). */
    const json_t *sim = json_object_get(normalized, "simulator");
    struct evd_price sp;
    if (json_object_get(caps, "max_cost_usd") != NULL && json_is_object(sim) &&
        !simulator_price(e, normalized, &sp)) {
        const char *sm = json_string_value(json_object_get(json_object_get(sim, "model"),
                                                           "model"));
        return evd_err_set(err, EVD_EINVAL, "budget.max_cost_usd needs a price for model %s",
                           sm != NULL ? sm : "");
    }
    json_t *b = json_deep_copy(caps);
    json_t *reserve = json_pack("{s:i, s:f, s:f}", "calls", 1, "tokens", tokens, "cost_usd",
                                priced ? reserve_usd : 0.0);
    if (b == NULL || reserve == NULL || json_object_set_new(b, "reserve", reserve) != 0) {
        json_decref(b);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    *out = b;
    return EVD_OK;
}

/* A number, or null when not finite. */
static json_t *num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

enum evd_code evd_engine_experiment_plan(struct evd_engine *e, PGconn *c,
                                         const json_t *normalized, size_t ncases,
                                         uint64_t prompt_bytes, json_t **out,
                                         struct evd_err *err)
{
    *out = NULL;
    struct evd_experiment_plan_opts opts;
    enum evd_code rc = evd_experiment_plan_options(json_object_get(normalized, "plan"), &opts, err);
    if (rc != EVD_OK)
        return rc;
    const double arms = (double)evd_experiment_arms(normalized);
    const double repeats = (double)json_integer_value(json_object_get(normalized, "repeats"));
    const double cases = (double)ncases, runs = cases * arms * repeats;
    const json_t *stopping = json_object_get(normalized, "stopping");
    const bool anytime =
        strcmp(json_string_value(json_object_get(stopping, "rule")), "anytime") == 0;
    double min_cases = (double)json_integer_value(json_object_get(stopping, "min_cases"));
    const double calls_min = anytime ? fmin(cases, min_cases) * arms * repeats : runs;
    /* Each case's prompts were counted once per arm; every repeat sends them again. */
    const double input = ceil((double)prompt_bytes / BYTES_PER_TOKEN) * repeats;
    /* Each arm's runs write at most its own cap (a model variant may have one). */
    const size_t nprice = priced_arms(normalized);
    /* With a simulated user a run makes up to max_turns agent answers. */
    const double answers = answers_per_run(normalized);
    double output_max = 0;
    for (size_t arm = 0; arm < evd_experiment_arms(normalized); arm++)
        output_max += cases * repeats * answers * max_output_per_call(normalized, arm);

    struct evd_store_experiment_pilot pilot = {0};
    if (opts.pilot != NULL) {
        if ((rc = evd_store_experiment_pilot(c, opts.pilot, &pilot, err)) != EVD_OK)
            return rc;
        if (!pilot.finished)
            return evd_err_set(err, EVD_EINVAL,
                               "plan.pilot_experiment_id names no finished experiment: %s",
                               opts.pilot);
    }
    json_t *cost = json_null();
    struct evd_price price;
    if (nprice == 1 && model_price(e, normalized, 0, &price)) {
        /* The estimate counts the prompts and, after a pilot, its mean output a run; the
         * maximum lets every call write max_output_tokens_per_call. */
        double in_usd = input * price.input_usd_per_mtok / 1e6;
        double out_est = pilot.has_output ? pilot.output_per_run * runs : 0;
        cost = json_pack("{s:f, s:f}", "estimate", in_usd + out_est * price.output_usd_per_mtok / 1e6,
                         "max", in_usd + output_max * price.output_usd_per_mtok / 1e6);
    } else if (nprice > 1) {
        /* A model experiment: each arm at its own model's price, the shared prompt's
         * tokens an equal share of the input; null unless every arm is priced. */
        double est = 0, max = 0;
        bool all = true;
        for (size_t arm = 0; all && arm < nprice; arm++) {
            if (!(all = model_price(e, normalized, arm, &price)))
                break;
            double in_usd = input / arms * price.input_usd_per_mtok / 1e6;
            double out_est = pilot.has_output ? pilot.output_per_run * cases * repeats : 0;
            est += in_usd + out_est * price.output_usd_per_mtok / 1e6;
            max += in_usd + cases * repeats * answers * max_output_per_call(normalized, arm) *
                                price.output_usd_per_mtok / 1e6;
        }
        if (all)
            cost = json_pack("{s:f, s:f}", "estimate", est, "max", max);
    }

    const json_t *an = json_object_get(normalized, "analysis");
    const double alpha = json_number_value(json_object_get(an, "alpha"));
    const double alpha_adj = alpha / (arms - 1);
    const double min_effect = json_number_value(json_object_get(an, "min_effect"));
    bool has_effect = opts.has_effect || min_effect > 0;
    double effect = opts.has_effect ? opts.effect : min_effect;
    bool has_sd = opts.has_sd || pilot.has_sd;
    double sd = opts.has_sd ? opts.sd : pilot.sd;
    double needed = 0;
    bool has_needed = has_effect && has_sd && evd_seq_cases_needed(effect, sd, alpha_adj, &needed);
    json_t *power = json_pack("{s:o, s:o, s:f, s:o, s:o}", "effect",
                              has_effect ? json_real(effect) : json_null(), "sd",
                              has_sd ? num(sd) : json_null(), "alpha_adjusted", alpha_adj,
                              "cases_needed",
                              has_needed ? json_integer((json_int_t)needed) : json_null(),
                              "runs_needed",
                              has_needed ? json_integer((json_int_t)(needed * arms * repeats))
                                         : json_null());
    /* The judge's calls: one a pair and order, at most judge.max_tokens each; their input is
     * the two outputs, unknown before the runs, so only the output side has a maximum. */
    const json_t *jdg = json_object_get(normalized, "judge");
    json_t *judge = json_null();
    if (json_is_object(jdg)) {
        const char *orders = json_string_value(json_object_get(jdg, "orders"));
        double jcalls = cases * repeats * (arms - 1) *
                        (orders != NULL && strcmp(orders, "one") == 0 ? 1 : 2);
        double jout = jcalls * (double)json_integer_value(json_object_get(jdg, "max_tokens"));
        struct evd_price jp;
        json_t *jcost = judge_price(e, normalized, &jp)
                            ? json_pack("{s:f}", "output_max", jout * jp.output_usd_per_mtok / 1e6)
                            : json_null();
        judge = json_pack("{s:I, s:I, s:o}", "calls", (json_int_t)jcalls, "output_tokens_max",
                          (json_int_t)jout, "cost_usd", jcost);
    }
    /* A simulated user's calls: at most max_turns − 1 a run (it does not answer the last
     * turn), each at most the run's per-call output cap; their input is the conversation,
     * unknown before the runs. */
    const json_t *sim = json_object_get(normalized, "simulator");
    json_t *simulator = json_null();
    if (json_is_object(sim)) {
        double scalls = runs * (answers - 1);
        double sout = scalls * max_output_per_call(normalized, 0);
        struct evd_price sp;
        json_t *scost = simulator_price(e, normalized, &sp)
                            ? json_pack("{s:f}", "output_max", sout * sp.output_usd_per_mtok / 1e6)
                            : json_null();
        simulator = json_pack("{s:I, s:I, s:I, s:o}", "calls_max", (json_int_t)scalls,
                              "agent_answers_max", (json_int_t)(runs * answers),
                              "output_tokens_max", (json_int_t)sout, "cost_usd", scost);
    }
    *out = json_pack("{s:I, s:I, s:I, s:I, s:{s:I}, s:{s:I, s:I}, s:o, s:o, s:o, s:o}", "cases",
                     (json_int_t)cases, "arms", (json_int_t)arms, "repeats", (json_int_t)repeats,
                     "runs", (json_int_t)runs, "calls", "min", (json_int_t)calls_min, "tokens",
                     "input_estimate", (json_int_t)input, "output_max", (json_int_t)output_max,
                     "cost_usd", cost, "power", power, "judge", judge, "simulator", simulator);
    return *out != NULL ? EVD_OK : evd_err_set(err, EVD_ENOMEM, "out of memory");
}
