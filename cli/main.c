/*
 * evald-cli: experiments from a file, a live terminal view, and a CI gate on the verdict;
 * the seed's evaluations, datasets and the live session comparison, over evald's REST
 * API. Options, commands and exit codes: docs/evald-cli.1 (and --help). This file parses
 * the command line and runs the commands; cli/client.c speaks HTTP, cli/doc.c reads the
 * files, cli/progress.c draws the progress, cli/report.c writes the outputs and
 * cli/plan.c prints plans.
 */
#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

#define MAX_ARGS 16

struct opts {
    struct cli_conn conn;
    const char *args[MAX_ARGS]; /* the words that are not options */
    size_t nargs;
    const char *junit, *markdown, *json_path, *format, *require, *output, *name, *baseline;
    bool json, detach, fail_on_inconclusive, help;
};

/*
 * Where the text meant for a person goes: progress, the verdict table and GitHub
 * annotations. stdout, unless stdout carries a document (`--json`, or `-` as the path of
 * --json, --junit or --markdown): then stderr, so that stdout holds that document alone.
 */
static FILE *human;

static const char USAGE[] =
    "usage: evald-cli [--url URL] [--token TOKEN] [--timeout SECONDS] COMMAND [ARGS] [OPTIONS]\n"
    "\n"
    "commands:\n"
    "  experiment run FILE     start the experiment of FILE (YAML or JSON), follow it, print\n"
    "                          the verdicts; exit 1 when a treatment is worse\n"
    "      --junit PATH        JUnit XML: one testsuite per treatment, one testcase per case\n"
    "      --markdown PATH     a summary table (for $GITHUB_STEP_SUMMARY)\n"
    "      --json PATH         the whole experiment document ('-' for stdout: progress,\n"
    "                          the table and annotations then go to stderr; so for\n"
    "                          --junit - and --markdown -)\n"
    "      --format github     also print GitHub workflow annotations\n"
    "      --require better    exit 1 unless every treatment is better\n"
    "      --fail-on-inconclusive  exit 3 when a treatment is inconclusive\n"
    "      --detach            print the experiment id once accepted and exit 0\n"
    "                          (run prints the plan's runs, calls and cost before it starts)\n"
    "  experiment plan FILE    what FILE would run and cost, and the cases its effect needs;\n"
    "                          nothing is started (--json: the plan as evald answers it)\n"
    "  experiment watch ID     follow a running experiment (the options of run)\n"
    "  experiment show ID      print an experiment's verdicts (--json: its document)\n"
    "  experiment cancel ID    cancel an experiment\n"
    "  experiment export ID    one record per run [--format jsonl|csv] [--output PATH]\n"
    "  dataset import FILE     upload a CSV, JSONL or JSON dataset [--name NAME]\n"
    "  eval start FILE         start an evaluation (the seed's A/B) and follow it [--detach]\n"
    "  eval watch ID           follow an evaluation and print its report\n"
    "  compare ID...           the live comparison of 2-5 sessions [--baseline ID]\n"
    "\n"
    "global options (before or after the command):\n"
    "  --url URL         evald's address (default $EVALD_URL, else http://127.0.0.1:8080)\n"
    "  --token TOKEN     bearer token (default $EVALD_API_TOKEN)\n"
    "  --timeout SECONDS connect and request timeout of each call (default 30)\n"
    "  --json            print the JSON answer instead of text (commands but run/watch)\n"
    "  --help, --version\n"
    "\n"
    "exit codes: 0 no treatment worse; 1 a treatment worse (or --require unmet); 2 usage,\n"
    "file or request errors (a 4xx answer); 3 inconclusive with --fail-on-inconclusive;\n"
    "4 transport errors and 5xx answers; 130 interrupted (the experiment is cancelled)\n";

static enum cli_exit usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static enum cli_exit usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "evald-cli: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(evald-cli --help shows the commands)\n");
    va_end(ap);
    return CLI_USAGE;
}

static bool github(const struct opts *o)
{
    return o->format != NULL && strcmp(o->format, "github") == 0;
}

/*
 * A mistake in a file: "evald-cli: FILE:LINE: message" on stderr (no line when 0) and, with
 * --format github, an ::error annotation of that line on `human` (stdout, or stderr when
 * stdout carries a document), so that a pull request shows it on the file.
 */
static void file_error(const struct opts *o, const char *file, int line, int col, const char *fmt,
                       ...) __attribute__((format(printf, 5, 6)));

static void file_error(const struct opts *o, const char *file, int line, int col, const char *fmt,
                       ...)
{
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (line > 0 && col > 0)
        fprintf(stderr, "evald-cli: %s:%d:%d: %s\n", file, line, col, msg);
    else if (line > 0)
        fprintf(stderr, "evald-cli: %s:%d: %s\n", file, line, msg);
    else
        fprintf(stderr, "evald-cli: %s: %s\n", file, msg);
    if (github(o)) {
        cli_github_file_error(human, file, line, col, msg);
        fflush(human);
    }
}

/* A file that cannot be loaded: err is "FILE:LINE:COL: message" or "FILE: message". */
static void load_error(const struct opts *o, const char *file, const char *err)
{
    size_t n = strlen(file);
    int line = 0, col = 0, used = 0;
    const char *rest = err;
    if (strncmp(err, file, n) == 0 && err[n] == ':') {
        rest = err + n + 1;
        if (sscanf(rest, "%d:%d: %n", &line, &col, &used) == 2 && used > 0) {
            rest += used;
        } else {
            line = col = 0;
            rest += strspn(rest, " ");
        }
    }
    file_error(o, file, line, col, "%s", rest);
}

/* The value of option argv[*i] ("--x VALUE" or "--x=VALUE"); NULL when missing. */
static const char *value_of(int argc, char **argv, int *i, const char *eq)
{
    if (eq != NULL)
        return eq + 1;
    if (*i + 1 < argc)
        return argv[++*i];
    return NULL;
}

static enum cli_exit parse(int argc, char **argv, struct opts *o)
{
    const char *env_url = getenv("EVALD_URL");
    o->conn.url = env_url != NULL && *env_url ? env_url : "http://127.0.0.1:8080";
    o->conn.token = getenv("EVALD_API_TOKEN");
    o->conn.timeout_ms = 30000;
    bool in_run = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || strcmp(a, "--") == 0) {
            if (o->nargs == MAX_ARGS)
                return usage_error("too many arguments at %s", a);
            o->args[o->nargs++] = a;
            in_run = o->nargs >= 2 && strcmp(o->args[0], "experiment") == 0 &&
                     (strcmp(o->args[1], "run") == 0 || strcmp(o->args[1], "watch") == 0);
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t n = eq != NULL ? (size_t)(eq - a) : strlen(a);
#define IS(name) (n == strlen(name) && strncmp(a, name, n) == 0)
#define VALUE(dst)                                                                                 \
    do {                                                                                           \
        if (((dst) = value_of(argc, argv, &i, eq)) == NULL)                                        \
            return usage_error("%s needs a value", a);                                             \
    } while (0)
        if (IS("--help")) {
            o->help = true;
        } else if (IS("--version")) {
            printf("evald-cli %s\n", EVALD_VERSION);
            exit(CLI_OK);
        } else if (IS("--url")) {
            VALUE(o->conn.url);
        } else if (IS("--token")) {
            VALUE(o->conn.token);
        } else if (IS("--timeout")) {
            const char *v;
            VALUE(v);
            char *end = NULL;
            double s = strtod(v, &end);
            if (*v == '\0' || *end != '\0' || !(s > 0 && s <= 86400))
                return usage_error("--timeout must be a number of seconds, not %s", v);
            o->conn.timeout_ms = (long)(s * 1000);
        } else if (IS("--json")) {
            /* experiment run/watch: --json PATH writes the document; elsewhere a flag */
            if (in_run || eq != NULL)
                VALUE(o->json_path);
            else
                o->json = true;
        } else if (IS("--junit")) {
            VALUE(o->junit);
        } else if (IS("--markdown")) {
            VALUE(o->markdown);
        } else if (IS("--format")) {
            VALUE(o->format);
        } else if (IS("--require")) {
            VALUE(o->require);
            if (strcmp(o->require, "better") != 0)
                return usage_error("--require takes one value, better (not %s)", o->require);
        } else if (IS("--fail-on-inconclusive")) {
            o->fail_on_inconclusive = true;
        } else if (IS("--detach")) {
            o->detach = true;
        } else if (IS("--output") || IS("-o")) {
            VALUE(o->output);
        } else if (IS("--name")) {
            VALUE(o->name);
        } else if (IS("--baseline")) {
            VALUE(o->baseline);
        } else {
            return usage_error("unknown option %s", a);
        }
#undef IS
#undef VALUE
    }
    size_t len = strlen(o->conn.url);
    while (len > 0 && o->conn.url[len - 1] == '/')
        len--;
    static char url[1024];
    snprintf(url, sizeof(url), "%.*s", (int)len, o->conn.url);
    o->conn.url = url;
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return usage_error("--url must start with http:// or https://, not %s", url);
    return CLI_OK;
}

/*
 * A start that was not accepted: a 4xx is the file's fault, printed with the line of the
 * file it is about (CLI_USAGE); anything else names the call and what came back.
 */
static enum cli_exit start_refused(const struct opts *o, const struct cli_doc *doc,
                                   const char *kind, const struct cli_answer *a)
{
    const char *detail = cli_answer_detail(a);
    if (a->status >= 400 && a->status < 500) {
        int line = cli_doc_line_of(doc, detail);
        char field[512];
        if (line > 0)
            file_error(o, doc->path, line, 0, "%s", detail);
        else if ((line = cli_doc_template_line(doc, detail, field, sizeof(field))) > 0)
            /* "case q3: template variable x is not defined": the template that uses it. */
            file_error(o, doc->path, line, 0, "%s: %s", field, detail);
        else
            file_error(o, doc->path, 0, 0, "%s", detail);
        return CLI_USAGE;
    }
    fprintf(stderr, "evald-cli: could not start the %s: POST %s/v1/%ss answered %ld: %.300s\n",
            kind, o->conn.url, kind, a->status, detail);
    return CLI_TRANSPORT;
}

/* ---- datasets ---------------------------------------------------------------------------- */

/* Uploads a dataset file; *id gets its dataset_id (malloc'd). `name` defaults to the file's
 * base name without its extension. A mistake is reported against the experiment file
 * `from` at `line` ("exp.yaml:7: dataset cases.csv: row 2: ..."), or the dataset file
 * itself when from is NULL. */
static enum cli_exit upload_dataset(const struct opts *o, const char *path, const char *name,
                                    const char *from, int line, char **id, json_t **row)
{
    char where[1100];
    snprintf(where, sizeof(where), "dataset %s: ", path);
    if (from == NULL) {
        from = path;
        line = 0;
        where[0] = '\0';
    }
    const char *ct = cli_ends_with(path, ".csv") ? "text/csv"
                     : cli_ends_with(path, ".jsonl") || cli_ends_with(path, ".ndjson")
                         ? "application/x-ndjson"
                     : cli_ends_with(path, ".json") ? "application/json"
                                                : NULL;
    if (ct == NULL) {
        file_error(o, from, line, 0, "%sa dataset file ends in .csv, .jsonl, .ndjson or .json",
                   where);
        return CLI_USAGE;
    }
    size_t len = 0;
    char *body = cli_read_file(path, &len);
    if (body == NULL) {
        file_error(o, from, line, 0, "%s%s", where, strerror(errno));
        return CLI_USAGE;
    }
    char base[256];
    const char *slash = strrchr(path, '/');
    snprintf(base, sizeof(base), "%s", slash != NULL ? slash + 1 : path);
    char *dot = strrchr(base, '.');
    if (dot != NULL && dot != base)
        *dot = '\0';
    char q[600], esc[512];
    snprintf(q, sizeof(q), "/v1/datasets?name=%s",
             cli_url_escape(name != NULL ? name : base, esc, sizeof(esc)));
    struct cli_answer a;
    enum cli_exit rc = cli_create(&o->conn, q, ct, body, len, CLI_CREATE_ATTEMPTS, &a);
    free(body);
    if (rc != CLI_OK) {
        fprintf(stderr, "evald-cli: could not upload the dataset %s\n", path);
        return rc;
    }
    if (a.status == 200 || a.status == 201) {
        *id = strdup(json_string_value(json_object_get(a.json, "dataset_id")));
        if (row != NULL)
            *row = json_incref(a.json);
    } else if (a.status >= 400 && a.status < 500) {
        /* The server names the line or row: prefix the file. */
        file_error(o, from, line, 0, "%s%s", where, cli_answer_detail(&a));
        rc = CLI_USAGE;
    } else {
        fprintf(stderr,
                "evald-cli: could not upload the dataset %s: POST %s%s answered %ld: %.300s\n",
                path, o->conn.url, q, a.status, cli_answer_detail(&a));
        rc = CLI_TRANSPORT;
    }
    cli_answer_free(&a);
    return rc;
}

static enum cli_exit cmd_dataset_import(const struct opts *o)
{
    if (o->nargs != 3)
        return usage_error("%s", "usage: evald-cli dataset import FILE [--name NAME]");
    char *id = NULL;
    json_t *row = NULL;
    enum cli_exit rc = upload_dataset(o, o->args[2], o->name, NULL, 0, &id, &row);
    if (rc == CLI_OK) {
        if (o->json)
            cli_print_json(row);
        else
            printf("%s %lld cases sha256 %s\n", id,
                   (long long)json_integer_value(json_object_get(row, "case_count")),
                   json_string_value(json_object_get(row, "sha256")));
    }
    free(id);
    json_decref(row);
    return rc;
}

/* ---- experiments ---------------------------------------------------------------------- */

static enum cli_exit get_json(const struct opts *o, const char *what, const char *path,
                              json_t **out)
{
    struct cli_answer a;
    enum cli_exit rc = cli_expect(&o->conn, what, "GET", path, NULL, NULL, 0, &a);
    *out = rc == CLI_OK ? json_incref(a.json) : NULL;
    cli_answer_free(&a);
    if (rc == CLI_OK && *out == NULL) {
        fprintf(stderr, "evald-cli: could not %s: the answer is not JSON\n", what);
        rc = CLI_TRANSPORT;
    }
    return rc;
}

/* Every case row of an experiment (all pages); new reference. */
static enum cli_exit all_cases(const struct opts *o, const char *id, json_t **cases)
{
    *cases = json_array();
    char cursor[300] = "";
    for (;;) {
        char path[600];
        snprintf(path, sizeof(path), "/v1/experiments/%s/cases?limit=100%s%s", id,
                 cursor[0] ? "&before=" : "", cursor);
        json_t *page = NULL;
        enum cli_exit rc = get_json(o, "read the experiment's cases", path, &page);
        if (rc != CLI_OK) {
            json_decref(*cases);
            *cases = NULL;
            return rc;
        }
        json_array_extend(*cases, json_object_get(page, "cases"));
        const char *next = json_string_value(json_object_get(page, "next_cursor"));
        char esc[300];
        if (next != NULL)
            cli_url_escape(next, esc, sizeof(esc));
        snprintf(cursor, sizeof(cursor), "%s", next != NULL ? esc : "");
        json_decref(page);
        if (cursor[0] == '\0')
            return CLI_OK;
    }
}

/* The outputs of a finished experiment and the exit code it earns. */
static enum cli_exit finish_experiment(const struct opts *o, const char *id)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    json_t *exp = NULL, *cases = NULL;
    enum cli_exit rc = get_json(o, "read the experiment", path, &exp);
    if (rc != CLI_OK)
        return rc;
    bool gh = github(o);
    if (o->junit != NULL || gh)
        rc = all_cases(o, id, &cases);
    if (rc == CLI_OK) {
        cli_report_table(human, exp);
        if (gh)
            cli_report_github(human, exp, cases);
        fflush(human);
        const struct {
            const char *path;
            int kind;
        } outs[] = {{o->junit, 0}, {o->markdown, 1}, {o->json_path, 2}};
        for (size_t i = 0; i < 3 && rc == CLI_OK; i++) {
            if (outs[i].path == NULL)
                continue;
            FILE *f = cli_open_out(outs[i].path);
            if (f == NULL) {
                rc = CLI_USAGE;
                break;
            }
            if (outs[i].kind == 0)
                cli_report_junit(f, exp, cases);
            else if (outs[i].kind == 1)
                cli_report_markdown(f, exp);
            else
                json_dumpf(exp, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER), fputc('\n', f);
            if (!cli_close_out(f, outs[i].path))
                rc = CLI_USAGE;
        }
    }
    const char *status = json_string_value(json_object_get(exp, "status"));
    if (rc == CLI_OK) {
        if (status != NULL && strcmp(status, "failed") == 0) {
            fprintf(stderr, "evald-cli: experiment %s failed\n", id);
            rc = CLI_TRANSPORT;
        } else if (status != NULL && strcmp(status, "cancelled") == 0) {
            /* Cancelled elsewhere (the console, another client): its partial verdicts are
             * no gate to pass. */
            fprintf(stderr, "evald-cli: experiment %s was cancelled before it completed\n", id);
            rc = CLI_TRANSPORT;
        } else {
            rc = cli_report_exit(exp, o->require != NULL, o->fail_on_inconclusive);
        }
    }
    json_decref(exp);
    json_decref(cases);
    return rc;
}

static void on_sigint(int sig)
{
    (void)sig;
    cli_interrupted = 1;
}

/* POST .../cancel; *answer (NULL: not wanted) gets {experiment_id, status}, a new
 * reference: a terminal experiment is left as it is and its status answered. */
static enum cli_exit cancel(const struct opts *o, const char *id, json_t **answer)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/experiments/%s/cancel", id);
    struct cli_answer a;
    /* Cancelling twice is harmless: a 503 is tried again. */
    enum cli_exit rc = cli_expect_retry(&o->conn, "cancel the experiment", "POST", path,
                                        "application/json", "{}", 2, 3, &a);
    if (answer != NULL)
        *answer = rc == CLI_OK ? json_incref(a.json) : NULL;
    cli_answer_free(&a);
    return rc;
}

/* From here on Ctrl-C cancels the experiment instead of ending the program. */
static void catch_sigint(void)
{
    struct sigaction sa = {.sa_handler = on_sigint};
    sigaction(SIGINT, &sa, NULL);
}

static enum cli_exit watch_experiment(const struct opts *o, const char *id)
{
    catch_sigint();
    char status[32];
    enum cli_exit rc =
        cli_progress_follow(&o->conn, human, "experiment", id, status, sizeof(status));
    if (cli_interrupted) {
        cli_interrupted = 0; /* let the cancel call through */
        fprintf(stderr, "evald-cli: interrupted: cancelling experiment %s\n", id);
        cancel(o, id, NULL);
        return 130;
    }
    if (rc != CLI_OK)
        return rc;
    return finish_experiment(o, id);
}

/*
 * The start body of an experiment file: the file loaded into *doc (free it whatever the
 * result) and, when it names a dataset file (`dataset: PATH`, relative to the file), that
 * file uploaded (content-addressed: a second upload reuses the dataset) and named by its
 * dataset_id instead. *body: the request as compact JSON (malloc'd). A mistake is printed
 * against the file.
 */
static enum cli_exit experiment_body(const struct opts *o, const char *file, struct cli_doc *doc,
                                     char **body)
{
    *body = NULL;
    char err[600];
    if (!cli_doc_load(doc, file, err, sizeof(err))) {
        load_error(o, file, err);
        return CLI_USAGE;
    }
    char *dataset_id = NULL;
    json_t *dataset = json_object_get(doc->root, "dataset");
    if (dataset != NULL) {
        int line = cli_doc_line_of(doc, "dataset");
        if (!json_is_string(dataset)) {
            file_error(o, file, line, 0, "dataset must be the path of a CSV or JSONL file");
            return CLI_USAGE;
        }
        if (json_object_get(doc->root, "dataset_id") != NULL ||
            json_object_get(doc->root, "cases") != NULL) {
            file_error(o, file, line, 0,
                       "exactly one of dataset, dataset_id and cases must be given");
            return CLI_USAGE;
        }
        /* Relative to the experiment file. */
        char path[1024];
        const char *p = json_string_value(dataset);
        const char *slash = strrchr(file, '/');
        if (p[0] == '/' || slash == NULL)
            snprintf(path, sizeof(path), "%s", p);
        else
            snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - file), file, p);
        enum cli_exit rc = upload_dataset(o, path, NULL, file, line, &dataset_id, NULL);
        if (rc != CLI_OK)
            return rc;
        json_object_del(doc->root, "dataset");
        json_object_set_new(doc->root, "dataset_id", json_string(dataset_id));
        free(dataset_id);
    }
    *body = json_dumps(doc->root, JSON_COMPACT);
    return CLI_OK;
}

/* POST /v1/experiments/plan of a start's body, a 503 tried again a second later, up to
 * `attempts` calls in all; CLI_OK with *a filled when an answer came. */
static enum cli_exit post_plan(const struct opts *o, const char *body, int attempts,
                               struct cli_answer *a)
{
    for (int attempt = 1;; attempt++) {
        enum cli_exit rc = cli_call(&o->conn, "POST", "/v1/experiments/plan", "application/json",
                                    body, strlen(body), a);
        if (rc != CLI_OK || a->status != 503 || attempt >= attempts)
            return rc;
        cli_answer_free(a);
        sleep(1);
    }
}

static enum cli_exit cmd_experiment_plan(const struct opts *o)
{
    if (o->nargs != 3)
        return usage_error("%s", "usage: evald-cli experiment plan FILE [--json]");
    const char *file = o->args[2];
    struct cli_doc doc;
    char *body = NULL;
    struct cli_answer a = {0};
    enum cli_exit rc = experiment_body(o, file, &doc, &body);
    if (rc != CLI_OK)
        goto out;
    if ((rc = post_plan(o, body, 3, &a)) != CLI_OK) {
        fprintf(stderr, "evald-cli: could not plan the experiment\n");
        goto out;
    }
    if (a.status >= 400 && a.status < 500) {
        /* The refusal a start of this file would get, at the line it is about. */
        rc = start_refused(o, &doc, "experiment", &a);
    } else if (a.status != 200 || !json_is_object(a.json)) {
        fprintf(stderr,
                "evald-cli: could not plan the experiment: POST %s/v1/experiments/plan answered "
                "%ld: %.300s\n",
                o->conn.url, a.status, cli_answer_detail(&a));
        rc = CLI_TRANSPORT;
    } else if (o->json) {
        cli_print_json(a.json);
    } else {
        cli_plan_print(stdout, a.json, doc.root);
    }
out:
    cli_answer_free(&a);
    free(body);
    cli_doc_free(&doc);
    return rc;
}

/*
 * The plan of a start about to be made, as one line on stderr. A 400 is the refusal the
 * start would get: printed as the start's (CLI_USAGE). Anything else that is not a plan
 * (an evald without the route, a 5xx, no answer) is no reason not to start: CLI_OK.
 */
static enum cli_exit plan_first(const struct opts *o, const struct cli_doc *doc, const char *body)
{
    struct cli_answer a;
    /* One call: the start that follows has retries of its own. */
    if (post_plan(o, body, 1, &a) != CLI_OK) {
        fprintf(stderr, "evald-cli: no plan; starting without it\n");
        return CLI_OK;
    }
    enum cli_exit rc = CLI_OK;
    if (a.status == 400) {
        rc = start_refused(o, doc, "experiment", &a);
    } else if (a.status == 200 && json_is_object(a.json)) {
        char line[256];
        fprintf(stderr, "evald-cli: %s\n", cli_plan_line(line, sizeof(line), a.json));
    } else if (a.status < 400 || a.status >= 500) {
        /* Another 4xx (a token refused) is the start's to report. */
        fprintf(stderr,
                "evald-cli: no plan (POST %s/v1/experiments/plan answered %ld); "
                "starting without it\n",
                o->conn.url, a.status);
    }
    cli_answer_free(&a);
    return rc;
}

static enum cli_exit cmd_experiment_run(const struct opts *o)
{
    if (o->nargs != 3)
        return usage_error("%s", "usage: evald-cli experiment run FILE [options]");
    const char *file = o->args[2];
    struct cli_doc doc;
    char *body = NULL;
    enum cli_exit rc = experiment_body(o, file, &doc, &body);
    if (rc != CLI_OK)
        goto out;
    if ((rc = plan_first(o, &doc, body)) != CLI_OK)
        goto out;
    struct cli_answer a;
    rc = cli_create(&o->conn, "/v1/experiments", "application/json", body, strlen(body),
                    CLI_CREATE_ATTEMPTS, &a);
    if (rc != CLI_OK) {
        fprintf(stderr, "evald-cli: could not start the experiment\n");
        goto out;
    }
    if (a.status != 202) {
        rc = start_refused(o, &doc, "experiment", &a);
        cli_answer_free(&a);
        goto out;
    }
    char id[128];
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(a.json, "experiment_id")));
    cli_answer_free(&a);
    if (o->detach) {
        printf("%s\n", id);
        goto out;
    }
    catch_sigint(); /* before the line that says it started: Ctrl-C after it cancels */
    fprintf(stderr, "evald-cli: experiment %s started\n", id);
    rc = watch_experiment(o, id);
out:
    free(body);
    cli_doc_free(&doc);
    return rc;
}

static enum cli_exit cmd_experiment(const struct opts *o)
{
    if (o->nargs < 2)
        return usage_error("%s",
                           "usage: evald-cli experiment run|plan|watch|show|cancel|export ...");
    const char *verb = o->args[1];
    if (strcmp(verb, "run") == 0)
        return cmd_experiment_run(o);
    if (strcmp(verb, "plan") == 0)
        return cmd_experiment_plan(o);
    if (o->nargs != 3)
        return usage_error("usage: evald-cli experiment %s ID", verb);
    const char *id = o->args[2];
    char path[256];
    if (strcmp(verb, "watch") == 0)
        return watch_experiment(o, id);
    if (strcmp(verb, "cancel") == 0) {
        json_t *answer = NULL;
        enum cli_exit rc = cancel(o, id, &answer);
        const char *status = json_string_value(json_object_get(answer, "status"));
        if (rc == CLI_OK && o->json)
            cli_print_json(answer);
        else if (rc == CLI_OK) /* "cancelled", or the status it had ended with */
            printf("%s %s\n", id, status != NULL ? status : "cancelled");
        json_decref(answer);
        return rc;
    }
    if (strcmp(verb, "show") == 0) {
        json_t *exp = NULL;
        snprintf(path, sizeof(path), "/v1/experiments/%s", id);
        enum cli_exit rc = get_json(o, "read the experiment", path, &exp);
        if (rc == CLI_OK) {
            if (o->json)
                cli_print_json(exp);
            else
                cli_report_table(stdout, exp);
        }
        json_decref(exp);
        return rc;
    }
    if (strcmp(verb, "export") == 0) {
        const char *fmt = o->format != NULL ? o->format : "jsonl";
        if (strcmp(fmt, "jsonl") != 0 && strcmp(fmt, "csv") != 0)
            return usage_error("--format of export is jsonl or csv, not %s", fmt);
        snprintf(path, sizeof(path), "/v1/experiments/%s/export?format=%s", id, fmt);
        struct cli_answer a;
        enum cli_exit rc =
            cli_expect(&o->conn, "export the experiment", "GET", path, NULL, NULL, 0, &a);
        if (rc == CLI_OK) {
            FILE *f = cli_open_out(o->output != NULL ? o->output : "-");
            if (f == NULL) {
                rc = CLI_USAGE;
            } else {
                fwrite(a.body, 1, a.len, f);
                if (!cli_close_out(f, o->output != NULL ? o->output : "-"))
                    rc = CLI_USAGE;
            }
        }
        cli_answer_free(&a);
        return rc;
    }
    return usage_error("unknown command experiment %s", verb);
}

/* ---- evaluations and sessions --------------------------------------------------------- */

static enum cli_exit eval_report(const struct opts *o, const char *id)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/evaluations/%s", id);
    json_t *ev = NULL;
    enum cli_exit rc = get_json(o, "read the evaluation", path, &ev);
    if (rc != CLI_OK)
        return rc;
    const json_t *report = json_object_get(ev, "report");
    const json_t *delta = json_object_get(json_object_get(report, "delta"), "pass_rate");
    if (o->json) {
        cli_print_json(ev);
    } else {
        char c[32], t[32], d[32];
        printf(
            "%s %s: pass rate %s -> %s (delta %s), eligible %s\n", id,
            json_string_value(json_object_get(ev, "status")),
            cli_num_text(c, sizeof(c),
                     json_object_get(json_object_get(report, "control_aggregate"), "pass_rate")),
            cli_num_text(t, sizeof(t),
                     json_object_get(json_object_get(report, "treatment_aggregate"), "pass_rate")),
            cli_num_text(d, sizeof(d), delta),
            json_is_true(json_object_get(report, "eligible")) ? "yes" : "no");
    }
    /* The treatment passed fewer runs than the control: worse. */
    if (json_is_number(delta) && json_number_value(delta) < 0)
        rc = CLI_WORSE;
    json_decref(ev);
    return rc;
}

static enum cli_exit watch_eval(const struct opts *o, const char *id)
{
    char status[32];
    enum cli_exit rc =
        cli_progress_follow(&o->conn, human, "evaluation", id, status, sizeof(status));
    if (rc != CLI_OK)
        return rc;
    if (cli_interrupted)
        return 130;
    return eval_report(o, id);
}

static enum cli_exit cmd_eval(const struct opts *o)
{
    if (o->nargs != 3)
        return usage_error("%s", "usage: evald-cli eval start FILE | eval watch ID");
    if (strcmp(o->args[1], "watch") == 0)
        return watch_eval(o, o->args[2]);
    if (strcmp(o->args[1], "start") != 0)
        return usage_error("unknown command eval %s", o->args[1]);
    struct cli_doc doc;
    char err[600];
    if (!cli_doc_load(&doc, o->args[2], err, sizeof(err))) {
        load_error(o, o->args[2], err);
        return CLI_USAGE;
    }
    char *body = json_dumps(doc.root, JSON_COMPACT);
    struct cli_answer a;
    enum cli_exit rc =
        cli_create(&o->conn, "/v1/evaluations", "application/json", body, strlen(body),
                   CLI_CREATE_ATTEMPTS, &a);
    free(body);
    if (rc == CLI_OK && a.status != 202) {
        rc = start_refused(o, &doc, "evaluation", &a);
    } else if (rc != CLI_OK) {
        fprintf(stderr, "evald-cli: could not start the evaluation\n");
    }
    char id[128] = "";
    if (rc == CLI_OK)
        snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(a.json, "evaluation_id")));
    cli_answer_free(&a);
    cli_doc_free(&doc);
    if (rc != CLI_OK)
        return rc;
    if (o->detach) {
        printf("%s\n", id);
        return CLI_OK;
    }
    fprintf(stderr, "evald-cli: evaluation %s started\n", id);
    return watch_eval(o, id);
}

static enum cli_exit cmd_compare(const struct opts *o)
{
    if (o->nargs < 3 || o->nargs > 6)
        return usage_error("%s", "usage: evald-cli compare ID ID [ID...] [--baseline ID]");
    char path[1024], esc[256];
    int n = snprintf(path, sizeof(path), "/v1/sessions/compare?ids=");
    for (size_t i = 1; i < o->nargs; i++)
        n += snprintf(path + n, sizeof(path) - (size_t)n, "%s%s", i > 1 ? "," : "",
                      cli_url_escape(o->args[i], esc, sizeof(esc)));
    if (o->baseline != NULL)
        snprintf(path + n, sizeof(path) - (size_t)n, "&baseline=%s",
                 cli_url_escape(o->baseline, esc, sizeof(esc)));
    json_t *cmp = NULL;
    enum cli_exit rc = get_json(o, "compare the sessions", path, &cmp);
    if (rc != CLI_OK)
        return rc;
    if (o->json) {
        cli_print_json(cmp);
    } else {
        /* SessionComparisonV1: per session its lifecycle and its summary of metrics. */
        printf("%-44s %-24s %-10s %12s %12s %10s\n", "session", "title", "status", "tokens",
               "wall ms", "calls");
        size_t i;
        const json_t *s;
        json_array_foreach(json_object_get(cmp, "sessions"), i, s)
        {
            const json_t *m = json_object_get(s, "summary");
            const char *status =
                json_string_value(json_object_get(json_object_get(s, "lifecycle"), "turn_status"));
            char tk[32], wt[32], fc[32], title[128];
            cli_utf8_cut(title, sizeof(title), 24, json_string_value(json_object_get(s, "title")));
            /* The title padded by characters, not bytes ("old · case q1"). */
            size_t chars = 0;
            for (const char *c = title; *c; c++)
                chars += ((unsigned char)*c & 0xC0) != 0x80;
            printf("%-44s %s%*s %-10s %12s %12s %10s\n",
                   json_string_value(json_object_get(s, "session_id")), title,
                   (int)(chars < 24 ? 24 - chars : 0), "", status != NULL ? status : "?",
                   cli_num_text(tk, sizeof(tk), json_object_get(m, "total_tokens")),
                   cli_num_text(wt, sizeof(wt), json_object_get(m, "wall_time_ms")),
                   cli_num_text(fc, sizeof(fc), json_object_get(m, "function_calls")));
        }
    }
    json_decref(cmp);
    return CLI_OK;
}

int main(int argc, char **argv)
{
    struct opts o = {0};
    enum cli_exit rc = parse(argc, argv, &o);
    if (rc != CLI_OK)
        return rc;
    human = o.json ? stderr : stdout;
    const char *paths[] = {o.json_path, o.junit, o.markdown};
    int dashes = 0;
    for (size_t i = 0; i < 3; i++)
        if (paths[i] != NULL && strcmp(paths[i], "-") == 0)
            dashes++;
    if (dashes > 1)
        return usage_error("only one of --json, --junit and --markdown can write to stdout ('-')");
    if (dashes == 1)
        human = stderr;
    if (o.help || o.nargs == 0) {
        fputs(USAGE, o.help ? stdout : stderr);
        return o.help ? CLI_OK : CLI_USAGE;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    json_object_seed(0);
    const char *cmd = o.args[0];
    if (strcmp(cmd, "experiment") == 0)
        rc = cmd_experiment(&o);
    else if (strcmp(cmd, "dataset") == 0 && o.nargs >= 2 && strcmp(o.args[1], "import") == 0)
        rc = cmd_dataset_import(&o);
    else if (strcmp(cmd, "eval") == 0)
        rc = cmd_eval(&o);
    else if (strcmp(cmd, "compare") == 0)
        rc = cmd_compare(&o);
    else
        rc = usage_error("unknown command %s", cmd);
    curl_global_cleanup();
    return rc;
}
