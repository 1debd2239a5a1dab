/*
 * What evald-cli prints of a plan (the answer of POST /v1/experiments/plan): the one line
 * `experiment run` prints before it starts, and the readable plan of `experiment plan`.
 * Pure over the plan and the request it was made for, both borrowed. See cli.h.
 */
#include <math.h>
#include <string.h>

#include "cli/cli.h"

static long long int_of(const json_t *v)
{
    return (long long)json_integer_value(v);
}

/* "cost ≈ $1.20 (max $9.80)", or "cost unknown (no price)". */
static const char *cost_text(char *buf, size_t n, const json_t *plan)
{
    const json_t *cost = json_object_get(plan, "cost_usd");
    const json_t *est = json_object_get(cost, "estimate"), *max = json_object_get(cost, "max");
    if (!json_is_number(est) || !json_is_number(max)) {
        snprintf(buf, n, "cost unknown (no price)");
        return buf;
    }
    char e[48], m[48];
    snprintf(buf, n, "cost ≈ %s (max %s)", cli_usd_text(e, sizeof(e), json_number_value(est)),
             cli_usd_text(m, sizeof(m), json_number_value(max)));
    return buf;
}

const char *cli_plan_line(char *buf, size_t n, const json_t *plan)
{
    char runs[32], calls[32], cost[128];
    snprintf(buf, n, "plan: %s runs, at least %s calls, %s",
             cli_count_text(runs, sizeof(runs), int_of(json_object_get(plan, "runs"))),
             cli_count_text(calls, sizeof(calls),
                            int_of(json_object_get(json_object_get(plan, "calls"), "min"))),
             cost_text(cost, sizeof(cost), plan));
    return buf;
}

/* A figure of the power block: "0.2", "0.35". */
static const char *figure(char *buf, size_t n, const json_t *v)
{
    snprintf(buf, n, "%.3g", json_number_value(v));
    return buf;
}

/* The power line: the cases and runs a fixed design needs, or why they are not known. */
static void print_power(FILE *out, const json_t *plan, bool anytime)
{
    const json_t *power = json_object_get(plan, "power");
    const json_t *effect = json_object_get(power, "effect"), *sd = json_object_get(power, "sd");
    const json_t *needed = json_object_get(power, "cases_needed");
    char e[32], s[32], a[32], c[32], r[32];
    if (!json_is_number(effect) && !json_is_number(sd)) {
        fprintf(out,
                "%-15s unknown: no effect (plan.effect, or analysis.min_effect above 0) and "
                "no s.d. (plan.sd or plan.pilot_experiment_id)\n",
                "power");
        return;
    }
    if (!json_is_number(effect)) {
        fprintf(out, "%-15s unknown: no effect (plan.effect, or analysis.min_effect above 0)\n",
                "power");
        return;
    }
    if (!json_is_number(sd)) {
        fprintf(out,
                "%-15s unknown: no s.d. of the per-case difference (plan.sd or "
                "plan.pilot_experiment_id)\n",
                "power");
        return;
    }
    if (!json_is_integer(needed)) {
        fprintf(out, "%-15s unknown for an effect of %s at s.d. %s\n", "power",
                figure(e, sizeof(e), effect), figure(s, sizeof(s), sd));
        return;
    }
    long long want = int_of(needed), have = int_of(json_object_get(plan, "cases"));
    fprintf(out,
            "%-15s %s cases needed, %s runs (effect %s, s.d. %s, alpha %s adjusted; "
            "fixed-sample, 80%% power)\n",
            "power", cli_count_text(c, sizeof(c), want),
            cli_count_text(r, sizeof(r), int_of(json_object_get(power, "runs_needed"))),
            figure(e, sizeof(e), effect), figure(s, sizeof(s), sd),
            figure(a, sizeof(a), json_object_get(power, "alpha_adjusted")));
    if (want > have)
        fprintf(out, "%-15s more than the %s cases there are\n", "",
                cli_count_text(c, sizeof(c), have));
    if (anytime)
        fprintf(out,
                "%-15s the anytime rule needs about twice as many cases at this effect, "
                "far fewer when the effect is larger\n",
                "");
}

/*
 * The calls a judge or a simulated user adds (docs/judges.md, docs/agents.md), apart from the
 * arms': "judge           40 calls, at most 20,480 output tokens, at most $0.03", with "at most"
 * before the calls when `calls` is a maximum. Nothing when the plan has none.
 */
static void print_extra_calls(FILE *out, const char *what, const json_t *part, const char *calls)
{
    if (!json_is_object(part))
        return;
    char n[32], t[32], usd[48];
    const json_t *max = json_object_get(json_object_get(part, "cost_usd"), "output_max");
    fprintf(out, "%-15s %s%s calls, at most %s output tokens", what,
            strcmp(calls, "calls_max") == 0 ? "at most " : "",
            cli_count_text(n, sizeof(n), int_of(json_object_get(part, calls))),
            cli_count_text(t, sizeof(t), int_of(json_object_get(part, "output_tokens_max"))));
    if (json_is_number(max))
        fprintf(out, ", at most %s\n", cli_usd_text(usd, sizeof(usd), json_number_value(max)));
    else
        fprintf(out, " (no price for its model)\n");
}

void cli_plan_print(FILE *out, const json_t *plan, const json_t *request)
{
    const char *rule =
        json_string_value(json_object_get(json_object_get(request, "stopping"), "rule"));
    bool anytime = rule != NULL && strcmp(rule, "anytime") == 0;
    char runs[32], cases[32], calls[32], in[32], outmax[32];
    long long narms = int_of(json_object_get(plan, "arms"));
    long long nrep = int_of(json_object_get(plan, "repeats"));
    fprintf(out, "%-15s %s (%s cases × %lld arm%s × %lld repeat%s)\n", "runs",
            cli_count_text(runs, sizeof(runs), int_of(json_object_get(plan, "runs"))),
            cli_count_text(cases, sizeof(cases), int_of(json_object_get(plan, "cases"))), narms,
            narms == 1 ? "" : "s", nrep, nrep == 1 ? "" : "s");
    fprintf(out, "%-15s at least %s%s\n", "calls",
            cli_count_text(calls, sizeof(calls),
                           int_of(json_object_get(json_object_get(plan, "calls"), "min"))),
            anytime ? " (the anytime rule may stop after min_cases cases)" : "");
    const json_t *tokens = json_object_get(plan, "tokens");
    fprintf(out, "%-15s about %s\n", "input tokens",
            cli_count_text(in, sizeof(in), int_of(json_object_get(tokens, "input_estimate"))));
    fprintf(out, "%-15s at most %s\n", "output tokens",
            cli_count_text(outmax, sizeof(outmax), int_of(json_object_get(tokens, "output_max"))));
    const json_t *cost = json_object_get(plan, "cost_usd");
    const json_t *est = json_object_get(cost, "estimate"), *max = json_object_get(cost, "max");
    if (json_is_number(est) && json_is_number(max)) {
        char e[48], m[48];
        fprintf(out, "%-15s about %s, at most %s\n", "cost",
                cli_usd_text(e, sizeof(e), json_number_value(est)),
                cli_usd_text(m, sizeof(m), json_number_value(max)));
    } else {
        fprintf(out, "%-15s unknown (no price for the model)\n", "cost");
    }
    print_extra_calls(out, "judge", json_object_get(plan, "judge"), "calls");
    print_extra_calls(out, "simulated user", json_object_get(plan, "simulator"), "calls_max");
    print_power(out, plan, anytime);
}
