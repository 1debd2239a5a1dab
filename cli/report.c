/*
 * What evald-cli prints of a finished experiment: the verdict table, a Markdown summary,
 * JUnit XML and GitHub workflow commands. Pure over the experiment document of
 * GET /v1/experiments/{id} and its case rows (GET /v1/experiments/{id}/cases), both
 * borrowed. See cli.h.
 *
 * A case "passes" for an arm when every evaluated run of the arm on it passed; a case
 * regressed for a treatment when the control passes it and the treatment does not. Under
 * the anytime rule a verdict is sequential: each output says so beside it, with the
 * confidence sequence and the case it was decided at, and the stop of an experiment that
 * ended early.
 */
#include <math.h>
#include <string.h>

#include "cli/cli.h"

/*
 * The cost metrics the table and the summary show, with their headings. A cell is the mean
 * paired change in the heading's unit, then the relative change (cost()).
 */
static const struct {
    const char *name, *heading;
} COSTS[] = {
    {"total_tokens", "Δ tokens"},
    {"cost_usd", "Δ cost $"},
    {"wall_time_ms", "Δ wall ms"},
    {"function_calls", "Δ calls"},
};
#define NCOSTS (sizeof(COSTS) / sizeof(COSTS[0]))

/* The verdict of a comparison, "" when it has none. */
static const char *verdict_of(const json_t *comparison)
{
    const char *v = json_string_value(json_object_get(comparison, "verdict"));
    return v != NULL ? v : "";
}

static const json_t *arm_of(const json_t *experiment, json_int_t index)
{
    size_t i;
    const json_t *a;
    json_array_foreach(json_object_get(experiment, "arms"), i, a)
    {
        if (json_integer_value(json_object_get(a, "index")) == index)
            return a;
    }
    return NULL;
}

static const char *label_of(const json_t *experiment, json_int_t index)
{
    const char *l = json_string_value(json_object_get(arm_of(experiment, index), "label"));
    return l != NULL ? l : "?";
}

/* A number as text: "n/a" for null, else with `digits` decimals and a sign when `sign`. */
static const char *num(char *buf, size_t n, const json_t *v, int digits, bool sign)
{
    if (!json_is_number(v)) {
        snprintf(buf, n, "n/a");
        return buf;
    }
    snprintf(buf, n, sign ? "%+.*f" : "%.*f", digits, json_number_value(v));
    return buf;
}

static const char *interval(char *buf, size_t n, const json_t *pr)
{
    char lo[32], hi[32];
    const json_t *l = json_object_get(pr, "ci_low"), *h = json_object_get(pr, "ci_high");
    if (!json_is_number(l) || !json_is_number(h))
        snprintf(buf, n, "n/a");
    else
        snprintf(buf, n, "[%s, %s]", num(lo, sizeof(lo), l, 3, true),
                 num(hi, sizeof(hi), h, 3, true));
    return buf;
}

/*
 * The change of a cost metric in its own unit, with the relative change beside it when
 * there is one: "+2 (+16.7%)" from metrics.<name>.delta and .relative; "+16.7%" with no
 * delta, n/a with neither.
 */
static const char *cost(char *buf, size_t n, const json_t *comparison, const char *name)
{
    const json_t *m = json_object_get(json_object_get(comparison, "metrics"), name);
    const json_t *rel = json_object_get(m, "relative");
    const json_t *delta = json_object_get(m, "delta");
    if (json_is_number(delta) && json_is_number(rel))
        snprintf(buf, n, "%+.4g (%+.1f%%)", json_number_value(delta),
                 100.0 * json_number_value(rel));
    else if (json_is_number(delta))
        snprintf(buf, n, "%+.4g", json_number_value(delta));
    else if (json_is_number(rel))
        snprintf(buf, n, "%+.1f%%", 100.0 * json_number_value(rel));
    else
        snprintf(buf, n, "n/a");
    return buf;
}

static double confidence(const json_t *experiment)
{
    const json_t *a = json_object_get(json_object_get(experiment, "analysis"), "alpha");
    return 100.0 * (1.0 - (json_is_number(a) ? json_number_value(a) : 0.05));
}

/* Whether the experiment's verdicts are sequential (analysis.rule, else the request's). */
static bool anytime(const json_t *experiment)
{
    const char *rule =
        json_string_value(json_object_get(json_object_get(experiment, "analysis"), "rule"));
    if (rule == NULL)
        rule = json_string_value(json_object_get(
            json_object_get(json_object_get(experiment, "request"), "stopping"), "rule"));
    return rule != NULL && strcmp(rule, "anytime") == 0;
}

/*
 * The note beside a sequential verdict: "sequential (anytime-valid): CS [+0.412, +1.000]
 * over 20 cases, decided at case 17" ("…, undecided" before it is). "" when the
 * experiment's rule is not anytime.
 */
static const char *seq_note(char *buf, size_t n, const json_t *experiment, const json_t *c)
{
    buf[0] = '\0';
    if (!anytime(experiment))
        return buf;
    const json_t *sq = json_object_get(c, "sequential");
    const json_t *l = json_object_get(sq, "low"), *h = json_object_get(sq, "high");
    const json_t *at = json_object_get(sq, "decided_at");
    char lo[32], hi[32], cs[80], cases[32], when[64];
    if (json_is_number(l) && json_is_number(h))
        snprintf(cs, sizeof(cs), "[%s, %s]", num(lo, sizeof(lo), l, 3, true),
                 num(hi, sizeof(hi), h, 3, true));
    else
        snprintf(cs, sizeof(cs), "n/a");
    json_int_t count = json_integer_value(json_object_get(sq, "n"));
    if (json_is_integer(at))
        snprintf(when, sizeof(when), "decided at case %s",
                 cli_count_text(cases, sizeof(cases), (long long)json_integer_value(at)));
    else
        snprintf(when, sizeof(when), "undecided");
    snprintf(buf, n, "sequential (anytime-valid): CS %s over %s case%s, %s", cs,
             cli_count_text(cases, sizeof(cases), (long long)count), count == 1 ? "" : "s", when);
    return buf;
}

bool cli_report_stop(char *buf, size_t n, const json_t *experiment)
{
    buf[0] = '\0';
    const json_t *stopped = json_object_get(experiment, "stopped");
    const char *reason = json_string_value(json_object_get(stopped, "reason"));
    const char *what = reason == NULL                   ? NULL
                       : strcmp(reason, "decided") == 0 ? "decided"
                       : strcmp(reason, "budget") == 0  ? "budget reached"
                                                        : NULL;
    if (what == NULL)
        return false;
    const json_t *total = json_object_get(json_object_get(experiment, "dataset"), "case_count");
    json_int_t saved = json_integer_value(json_object_get(stopped, "runs_saved"));
    char at[32], of[48] = "", all[32], runs[32];
    if (json_is_integer(total))
        snprintf(of, sizeof(of), " of %s",
                 cli_count_text(all, sizeof(all), (long long)json_integer_value(total)));
    snprintf(buf, n, "%s at case %s%s, %s run%s saved", what,
             cli_count_text(at, sizeof(at),
                            (long long)json_integer_value(json_object_get(stopped, "at_case"))),
             of, cli_count_text(runs, sizeof(runs), (long long)saved), saved == 1 ? "" : "s");
    return true;
}

/*
 * The judge's line of a comparison (docs/judges.md), "" without a judge: the preference
 * (Δ of the per-case preference, its interval, the rate and the counts, the verdict) and
 * the judge's quality, with a warning when it is not to be trusted (consistency below
 * 0.8, or a first-slot interval that excludes 0.5).
 */
const char *cli_judge_note(char *buf, size_t n, const json_t *c)
{
    const json_t *pref = json_object_get(c, "preference");
    const json_t *q = json_object_get(c, "judge_quality");
    buf[0] = '\0';
    if (!json_is_object(pref))
        return buf;
    char d[32], ci[80], rate[32], cons[32];
    const json_t *fs = json_object_get(q, "first_slot");
    const json_t *consistency = json_object_get(q, "consistency");
    double lo = json_number_value(json_object_get(fs, "wilson_low"));
    double hi = json_number_value(json_object_get(fs, "wilson_high"));
    bool biased = json_is_object(fs) && (lo > 0.5 || hi < 0.5);
    bool inconsistent = json_is_number(consistency) && json_number_value(consistency) < 0.8;
    char fsbuf[32];
    snprintf(buf, n,
             "judge: preference %s %s, rate %s (%lld won, %lld lost, %lld tied), %s; "
             "consistency %s, first slot %s%s%s",
             num(d, sizeof(d), json_object_get(pref, "delta"), 3, true),
             interval(ci, sizeof(ci), pref), num(rate, sizeof(rate), json_object_get(pref, "rate"), 2, false),
             (long long)json_integer_value(json_object_get(pref, "wins")),
             (long long)json_integer_value(json_object_get(pref, "losses")),
             (long long)json_integer_value(json_object_get(pref, "ties")),
             json_string_value(json_object_get(pref, "verdict")),
             num(cons, sizeof(cons), consistency, 2, false),
             num(fsbuf, sizeof(fsbuf), json_object_get(fs, "fraction"), 2, false),
             inconsistent ? "; distrust: consistency below 0.8" : "",
             biased ? "; distrust: the judge favours a slot" : "");
    return buf;
}

void cli_report_table(FILE *out, const json_t *experiment)
{
    const json_t *comparisons = json_object_get(experiment, "comparisons");
    const char *control = label_of(experiment, 0);
    bool partial =
        json_is_true(json_object_get(json_object_get(experiment, "analysis"), "partial"));
    fprintf(out, "%-20s %-10s %-18s %-8s %-7s %-13s", "treatment", "Δ pass", "CI (adjusted)",
            "p (adj)", "MDE", "verdict");
    for (size_t k = 0; k < NCOSTS; k++)
        fprintf(out, " %-19s", COSTS[k].heading); /* "Δ" is two bytes, one column */
    fputc('\n', out);
    size_t i;
    const json_t *c;
    json_array_foreach(comparisons, i, c)
    {
        char name[64], d[32], ci[80], p[32], mde[32];
        snprintf(name, sizeof(name), "%.9s vs %.9s", json_string_value(json_object_get(c, "label")),
                 control);
        const json_t *pr = json_object_get(c, "pass_rate");
        fprintf(out, "%-20s %-9s %-18s %-8s %-7s %-13s", name,
                num(d, sizeof(d), json_object_get(pr, "delta"), 3, true),
                interval(ci, sizeof(ci), pr),
                num(p, sizeof(p), json_object_get(pr, "p_value_adjusted"), 3, false),
                num(mde, sizeof(mde), json_object_get(pr, "mde"), 3, false), verdict_of(c));
        for (size_t k = 0; k < NCOSTS; k++) {
            char v[32];
            fprintf(out, " %-18s", cost(v, sizeof(v), c, COSTS[k].name));
        }
        fputc('\n', out);
        const json_t *needed = json_object_get(pr, "cases_needed");
        if (strcmp(verdict_of(c), "inconclusive") == 0 && json_is_integer(needed))
            fprintf(out, "%20s needs about %lld cases in all to detect the minimum effect\n", "",
                    (long long)json_integer_value(needed));
        char jn[320];
        if (*cli_judge_note(jn, sizeof(jn), c) != '\0')
            fprintf(out, "%20s %s\n", "", jn);
        char note[200];
        if (*seq_note(note, sizeof(note), experiment, c) != '\0') {
            const char *fixed = json_string_value(json_object_get(c, "fixed_verdict"));
            fprintf(out, "%20s %s%s%s\n", "", note, fixed != NULL ? "; fixed-sample verdict " : "",
                    fixed != NULL ? fixed : "");
        }
    }
    fprintf(out, "%.0f%% intervals, Bonferroni-adjusted over %zu treatment%s%s\n",
            confidence(experiment), json_array_size(comparisons),
            json_array_size(comparisons) == 1 ? "" : "s",
            partial ? " (partial: still running)" : "");
    const char *by = json_string_value(
        json_object_get(json_object_get(experiment, "analysis"), "verdict_by"));
    if (by != NULL && strcmp(by, "judge") == 0)
        fprintf(out, "verdicts are the judge's preference (analysis.verdict_by judge)\n");
    if (anytime(experiment))
        fprintf(out, "verdicts are sequential (anytime-valid); Δ pass, CI and p are fixed-sample "
                     "figures, not valid under optional stopping\n");
    char stop[160];
    if (cli_report_stop(stop, sizeof(stop), experiment))
        fprintf(out, "%s\n", stop);
}

void cli_report_markdown(FILE *out, const json_t *experiment)
{
    const json_t *comparisons = json_object_get(experiment, "comparisons");
    const char *name = json_string_value(json_object_get(experiment, "name"));
    const json_t *ds = json_object_get(experiment, "dataset");
    fprintf(out, "### evald experiment %s%s%s\n\n",
            json_string_value(json_object_get(experiment, "experiment_id")), name ? ": " : "",
            name ? name : "");
    fprintf(out,
            "Status **%s**, %lld cases, control **%s**; %.0f%% intervals, "
            "Bonferroni-adjusted.\n\n",
            json_string_value(json_object_get(experiment, "status")),
            (long long)json_integer_value(json_object_get(ds, "case_count")),
            label_of(experiment, 0), confidence(experiment));
    bool seq = anytime(experiment);
    char stop[160];
    bool stopped = cli_report_stop(stop, sizeof(stop), experiment);
    if (seq)
        fprintf(out, "Verdicts are sequential (anytime-valid): each has its confidence sequence "
                     "(CS) beside it; Δ pass rate, interval and p are fixed-sample figures, not "
                     "valid under optional stopping.\n\n");
    if (stopped)
        fprintf(out, "Stopped early: %s.\n\n", stop);
    fprintf(out, "| treatment | verdict | Δ pass rate | interval | p (adjusted) | MDE |");
    for (size_t k = 0; k < NCOSTS; k++)
        fprintf(out, " %s |", COSTS[k].heading);
    fprintf(out, "\n|---|---|---:|---|---:|---:|");
    for (size_t k = 0; k < NCOSTS; k++)
        fprintf(out, "---:|");
    fputc('\n', out);
    size_t i;
    const json_t *c;
    json_array_foreach(comparisons, i, c)
    {
        char d[32], ci[80], p[32], mde[32], note[200];
        const json_t *pr = json_object_get(c, "pass_rate");
        const char *verdict = verdict_of(c);
        seq_note(note, sizeof(note), experiment, c);
        fprintf(out, "| %s | %s%s%s%s | %s | %s | %s | %s |",
                json_string_value(json_object_get(c, "label")),
                strcmp(verdict, "worse") == 0    ? "❌ "
                : strcmp(verdict, "better") == 0 ? "✅ "
                                                 : "",
                verdict, note[0] ? " · " : "", note,
                num(d, sizeof(d), json_object_get(pr, "delta"), 3, true),
                interval(ci, sizeof(ci), pr),
                num(p, sizeof(p), json_object_get(pr, "p_value_adjusted"), 3, false),
                num(mde, sizeof(mde), json_object_get(pr, "mde"), 3, false));
        for (size_t k = 0; k < NCOSTS; k++) {
            char v[32];
            fprintf(out, " %s |", cost(v, sizeof(v), c, COSTS[k].name));
        }
        fputc('\n', out);
    }
    /* The judges' lines after the table (a line inside would break it). */
    bool first = true;
    json_array_foreach(comparisons, i, c)
    {
        char jn[320];
        if (*cli_judge_note(jn, sizeof(jn), c) == '\0')
            continue;
        if (first)
            fputc('\n', out);
        first = false;
        fprintf(out, "- **%s**: %s\n", json_string_value(json_object_get(c, "label")), jn);
    }
}

/* passed/evaluated of arm `index` in a case row. */
static void tally(const json_t *row, json_int_t index, json_int_t *passed, json_int_t *evaluated)
{
    size_t i;
    const json_t *a;
    *passed = *evaluated = 0;
    json_array_foreach(json_object_get(row, "arms"), i, a)
    {
        if (json_integer_value(json_object_get(a, "index")) == index) {
            *passed = json_integer_value(json_object_get(a, "passed"));
            *evaluated = json_integer_value(json_object_get(a, "evaluated"));
        }
    }
}

static bool passes(const json_t *row, json_int_t index)
{
    json_int_t p, e;
    tally(row, index, &p, &e);
    return e > 0 && p == e;
}

static bool regressed(const json_t *row, json_int_t treatment)
{
    return passes(row, 0) && !passes(row, treatment);
}

void cli_xml_text(FILE *out, const char *s)
{
    for (; s != NULL && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        switch (ch) {
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '&':
            fputs("&amp;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        case '\'':
            fputs("&apos;", out);
            break;
        default:
            /* XML 1.0 allows no other control character than tab, newline and return. */
            if (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r')
                fputc('?', out);
            else
                fputc(ch, out);
        }
    }
}

/* A case the experiment never ran: it stopped (decided, or its budget reached) first. */
static bool not_run(const json_t *row)
{
    return json_is_true(json_object_get(row, "skipped"));
}

/* A JUnit <property>; nothing when value is NULL. */
static void property(FILE *out, const char *name, const char *value)
{
    if (value == NULL)
        return;
    fprintf(out, "      <property name=\"%s\" value=\"", name);
    cli_xml_text(out, value);
    fprintf(out, "\"/>\n");
}

void cli_report_junit(FILE *out, const json_t *experiment, const json_t *cases)
{
    const json_t *comparisons = json_object_get(experiment, "comparisons");
    const char *id = json_string_value(json_object_get(experiment, "experiment_id"));
    const char *control = label_of(experiment, 0);
    size_t ncases = json_array_size(cases);
    char note[200], stop[160], skip_why[200];
    bool stopped = cli_report_stop(stop, sizeof(stop), experiment);
    if (stopped)
        snprintf(skip_why, sizeof(skip_why), "not run: the experiment stopped early (%s)", stop);
    else
        snprintf(skip_why, sizeof(skip_why), "not run: the experiment stopped early");
    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"");
    cli_xml_text(out, id);
    fprintf(out, "\">\n");
    size_t i;
    const json_t *c;
    json_array_foreach(comparisons, i, c)
    {
        json_int_t t = json_integer_value(json_object_get(c, "treatment"));
        const char *label = json_string_value(json_object_get(c, "label"));
        size_t failures = 0, skipped = 0;
        for (size_t k = 0; k < ncases; k++) {
            failures += regressed(json_array_get(cases, k), t);
            skipped += not_run(json_array_get(cases, k));
        }
        fprintf(out, "  <testsuite name=\"");
        cli_xml_text(out, label);
        fprintf(out, " vs ");
        cli_xml_text(out, control);
        fprintf(out, "\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\">\n", ncases,
                failures, skipped);
        if (*seq_note(note, sizeof(note), experiment, c) != '\0') {
            /* The verdict is sequential: say so, with its CS, where a CI system lists the
             * suite's properties. */
            fprintf(out, "    <properties>\n");
            property(out, "verdict", verdict_of(c));
            property(out, "verdict_rule", "sequential (anytime-valid)");
            property(out, "sequential", note);
            property(out, "fixed_sample_verdict",
                     json_string_value(json_object_get(c, "fixed_verdict")));
            if (stopped)
                property(out, "stopped", stop);
            fprintf(out, "    </properties>\n");
        }
        for (size_t k = 0; k < ncases; k++) {
            const json_t *row = json_array_get(cases, k);
            fprintf(out, "    <testcase classname=\"");
            cli_xml_text(out, id);
            fprintf(out, ".");
            cli_xml_text(out, label);
            fprintf(out, "\" name=\"");
            cli_xml_text(out, json_string_value(json_object_get(row, "case_id")));
            if (not_run(row)) {
                fprintf(out, "\">\n      <skipped message=\"");
                cli_xml_text(out, skip_why);
                fprintf(out, "\"/>\n    </testcase>\n");
                continue;
            }
            if (!regressed(row, t)) {
                fprintf(out, "\"/>\n");
                continue;
            }
            json_int_t cp, ce, tp, te;
            tally(row, 0, &cp, &ce);
            tally(row, t, &tp, &te);
            char msg[256];
            snprintf(msg, sizeof(msg), "%s passed %lld/%lld runs, %s passed %lld/%lld", control,
                     (long long)cp, (long long)ce, label, (long long)tp, (long long)te);
            fprintf(out, "\">\n      <failure message=\"");
            cli_xml_text(out, msg);
            fprintf(out, "\" type=\"regression\">");
            cli_xml_text(out, msg);
            fprintf(out, "</failure>\n    </testcase>\n");
        }
        fprintf(out, "  </testsuite>\n");
    }
    fprintf(out, "</testsuites>\n");
}

/* Workflow-command data: %, CR and LF are escaped (GitHub's rule). */
static void gh_data(FILE *out, const char *s)
{
    for (; s != NULL && *s; s++) {
        if (*s == '%')
            fputs("%25", out);
        else if (*s == '\r')
            fputs("%0D", out);
        else if (*s == '\n')
            fputs("%0A", out);
        else
            fputc(*s, out);
    }
}

/* Property values escape ':' and ',' too. */
static void gh_prop(FILE *out, const char *s)
{
    for (; s != NULL && *s; s++) {
        if (*s == ':')
            fputs("%3A", out);
        else if (*s == ',')
            fputs("%2C", out);
        else {
            char one[2] = {*s, '\0'};
            gh_data(out, one);
        }
    }
}

void cli_github_file_error(FILE *out, const char *file, int line, int col, const char *msg)
{
    fputs("::error file=", out);
    gh_prop(out, file);
    if (line > 0)
        fprintf(out, ",line=%d", line);
    if (line > 0 && col > 0)
        fprintf(out, ",col=%d", col);
    fputs(",title=evald-cli::", out);
    gh_data(out, msg);
    fputc('\n', out);
}

void cli_report_github(FILE *out, const json_t *experiment, const json_t *cases)
{
    const char *control = label_of(experiment, 0);
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(experiment, "comparisons"), i, c)
    {
        json_int_t t = json_integer_value(json_object_get(c, "treatment"));
        const char *label = json_string_value(json_object_get(c, "label"));
        const json_t *pr = json_object_get(c, "pass_rate");
        if (strcmp(verdict_of(c), "worse") == 0) {
            char title[160], msg[512], d[32], ci[80], p[32], note[200];
            snprintf(title, sizeof(title), "evald: %s is worse than %s", label, control);
            if (*seq_note(note, sizeof(note), experiment, c) != '\0')
                /* The sequential verdict: its CS first, the fixed-sample figures after. */
                snprintf(msg, sizeof(msg), "%s; pass rate %s (fixed-sample %s)", note,
                         num(d, sizeof(d), json_object_get(pr, "delta"), 3, true),
                         interval(ci, sizeof(ci), pr));
            else
                snprintf(msg, sizeof(msg), "pass rate %s %s, p (adjusted) %s",
                         num(d, sizeof(d), json_object_get(pr, "delta"), 3, true),
                         interval(ci, sizeof(ci), pr),
                         num(p, sizeof(p), json_object_get(pr, "p_value_adjusted"), 3, false));
            fputs("::error title=", out);
            gh_prop(out, title);
            fputs("::", out);
            gh_data(out, msg);
            fputc('\n', out);
        }
        size_t k;
        const json_t *row;
        json_array_foreach(cases, k, row)
        {
            if (!regressed(row, t))
                continue;
            json_int_t cp, ce, tp, te;
            tally(row, 0, &cp, &ce);
            tally(row, t, &tp, &te);
            char title[320], msg[256];
            snprintf(title, sizeof(title), "evald: case %.200s regressed in %s",
                     json_string_value(json_object_get(row, "case_id")), label);
            snprintf(msg, sizeof(msg), "%s passed %lld/%lld runs, %s passed %lld/%lld", control,
                     (long long)cp, (long long)ce, label, (long long)tp, (long long)te);
            fputs("::warning title=", out);
            gh_prop(out, title);
            fputs("::", out);
            gh_data(out, msg);
            fputc('\n', out);
        }
    }
    char stop[160];
    if (cli_report_stop(stop, sizeof(stop), experiment)) {
        fputs("::notice title=", out);
        gh_prop(out, "evald: stopped early");
        fputs("::", out);
        gh_data(out, stop);
        fputc('\n', out);
    }
}

enum cli_exit cli_report_exit(const json_t *experiment, bool require_better,
                              bool fail_on_inconclusive)
{
    bool worse = false, unmet = false, inconclusive = false;
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(experiment, "comparisons"), i, c)
    {
        const char *v = verdict_of(c);
        worse |= strcmp(v, "worse") == 0;
        unmet |= require_better && strcmp(v, "better") != 0;
        /* `continue` (a sequential verdict still undecided) is no answer either. */
        inconclusive |= strcmp(v, "inconclusive") == 0 || strcmp(v, "continue") == 0;
    }
    if (worse || unmet)
        return CLI_WORSE;
    if (fail_on_inconclusive && inconclusive)
        return CLI_INCONCLUSIVE;
    return CLI_OK;
}
