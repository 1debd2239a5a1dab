/*
 * `evald-cli experiment ...` end to end: the real evald-cli against the real evald and
 * evald-stub over loopback, a throwaway PostgreSQL database per test. Every exit code of
 * the CI gate (0, 1, 2, 3, 4, 130), --detach, the JUnit, Markdown, JSON and GitHub outputs
 * line by line, the progress view in a pipe and in a pseudo-terminal, a YAML experiment
 * whose dataset is a CSV file next to it (uploaded once, reused by a rerun) and a JSON one
 * with inline cases, and the watch, show, cancel and export commands.
 *
 * The stub answers by the marker word of an arm's prompt, so every verdict below follows
 * from the script: PASS answers "yes" (the expected answer of every case), FAIL answers
 * "no", MIXED answers "no" on case q1 only, and "slow " prompts take SLOW_MS.
 */
#define _GNU_SOURCE /* asprintf */
#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/itest.h"
#include "tests/support/testutil.h"

#define SLOW_MS 1500
/* The longest a command of these tests may take (the slowest takes about 10 s). */
#define CHILD_LIMIT_S 120

/* Fixed usage per marker: control PASS 12 tokens, MIXED 14, FAIL 11. */
static const char SCRIPT[] =
    "{\"rules\":["
    "{\"when\":{\"prompt_contains\":\"slow \"},\"latency_ms\":1500,\"reply\":{\"text\":\"yes\"}},"
    "{\"when\":{\"prompt_contains\":\"MIXED q1\"},\"reply\":{\"text\":\"no\"},"
    "\"usage\":{\"input_tokens\":10,\"output_tokens\":4}},"
    "{\"when\":{\"prompt_contains\":\"MIXED\"},\"reply\":{\"text\":\"yes\"},"
    "\"usage\":{\"input_tokens\":10,\"output_tokens\":4}},"
    "{\"when\":{\"prompt_contains\":\"FAIL\"},\"reply\":{\"text\":\"no\"},"
    "\"usage\":{\"input_tokens\":10,\"output_tokens\":1}},"
    "{\"when\":{\"prompt_contains\":\"PASS\"},\"reply\":{\"text\":\"yes\"},"
    "\"usage\":{\"input_tokens\":10,\"output_tokens\":2}}"
    "]}";

static char db_url[1024];
static char db_name[64];
static struct evd_t_proc stub, evald;
static char dir[64];

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&stub, SCRIPT, NULL), 0);
    static char base[300];
    snprintf(base, sizeof(base), "OPENAI_BASE_URL=%s/v1", stub.base);
    char *env[] = {base, "OPENAI_API_KEY=stub-key", NULL};
    ck_assert_int_eq(evd_t_evald_start(&evald, db_url, env), 0);
    snprintf(dir, sizeof(dir), "/tmp/evald-cli-exp-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    evd_t_stop(&evald, SIGTERM, 10000);
    evd_t_stop(&stub, SIGTERM, 5000);
    evd_t_db_drop(db_name);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *cli_bin(void)
{
    const char *b = getenv("EVALD_CLI_BIN");
    ck_assert_msg(b != NULL, "EVALD_CLI_BIN is not set (ctest sets it)");
    return b;
}

/* dir/name, malloc'd. */
static char *in_dir(const char *name)
{
    char *path = NULL;
    ck_assert_int_gt(asprintf(&path, "%s/%s", dir, name), 0);
    return path;
}

static char *file_in_dir(const char *name, const char *text)
{
    char *path = in_dir(name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* The whole file as a malloc'd string ("" when absent). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return strdup("");
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        fwrite(chunk, 1, n, m);
    fclose(f);
    fclose(m);
    return buf;
}

struct ran {
    int code;
    char out[65536], err[16384];
    double seconds;
};

struct child {
    pid_t pid;
    int out, err;
    struct timespec t0;
};

static void spawn(char *const argv[], struct child *c)
{
    int po[2], pe[2];
    ck_assert_int_eq(pipe(po), 0);
    ck_assert_int_eq(pipe(pe), 0);
    clock_gettime(CLOCK_MONOTONIC, &c->t0);
    c->pid = fork();
    ck_assert_int_ge(c->pid, 0);
    if (c->pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(pe[0]);
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        execv(argv[0], argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    c->out = po[0];
    c->err = pe[0];
}

/*
 * Reads the child's output into r until both pipes close, or (until != NULL) until stderr
 * holds `until`; then, when it closed, reaps the child. Returns whether it was reaped.
 */
static bool collect(struct child *c, struct ran *r, const char *until)
{
    size_t no = strlen(r->out), ne = strlen(r->err);
    struct pollfd fds[2] = {{c->out, POLLIN, 0}, {c->err, POLLIN, 0}};
    int open_fds = (c->out >= 0) + (c->err >= 0);
    fds[0].fd = c->out;
    fds[1].fd = c->err;
    while (open_fds > 0) {
        if (until != NULL && strstr(r->err, until) != NULL)
            return false;
        /* A child that never ends (it prints a progress line every 5 s) fails the test with
         * what it and evald said, rather than hanging the suite (CK_FORK=no has no timeout). */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left_ms = (CHILD_LIMIT_S - (now.tv_sec - c->t0.tv_sec)) * 1000;
        if (left_ms <= 0 || poll(fds, 2, (int)(left_ms < 60000 ? left_ms : 60000)) <= 0) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, NULL, 0);
            evd_t_dump_log(&evald);
            static char rows[1024];
            char *db = evd_t_sql(db_url, "SELECT string_agg(id || ' ' || status, ', ') || '; jobs "
                                         "' || (SELECT count(*) FROM jobs) FROM experiments");
            snprintf(rows, sizeof(rows), "%s", db != NULL ? db : "(unread)");
            free(db);
            ck_abort_msg("no end after %d s (or no output in 60 s):\nstdout: %s\nstderr: %s\n"
                         "experiments: %s",
                         CHILD_LIMIT_S, r->out, r->err, rows);
        }
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP)))
                continue;
            char *buf = i == 0 ? r->out + no : r->err + ne;
            size_t room = i == 0 ? sizeof(r->out) - 1 - no : sizeof(r->err) - 1 - ne;
            char scratch[4096];
            ssize_t n =
                read(fds[i].fd, room > 0 ? buf : scratch, room > 0 ? room : sizeof(scratch));
            if (n <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                *(i == 0 ? &c->out : &c->err) = -1;
                open_fds--;
            } else if (room > 0) {
                *(i == 0 ? &no : &ne) += (size_t)n;
                buf[n] = '\0';
            }
        }
    }
    int status = 0;
    ck_assert_int_eq(waitpid(c->pid, &status, 0), c->pid);
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->seconds = (double)(t1.tv_sec - c->t0.tv_sec) + (double)(t1.tv_nsec - c->t0.tv_nsec) / 1e9;
    r->code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
}

/* Runs argv (NULL-terminated) with stdout and stderr captured. */
static void run(char *const argv[], struct ran *r)
{
    memset(r, 0, sizeof(*r));
    struct child c;
    spawn(argv, &c);
    collect(&c, r, NULL);
}

#define CLI(...) ((char *[]){(char *)cli_bin(), "--url", evald.base, __VA_ARGS__, NULL})
#define CHECK_EXIT(r, want)                                                                        \
    ck_assert_msg((r).code == (want), "exit %d, not %d\nstdout: %s\nstderr: %s", (r).code, want,   \
                  (r).out, (r).err)

/* The output a pipe gets: plain lines, no carriage return, no escape sequence. */
static void assert_plain(const struct ran *r)
{
    ck_assert_msg(strchr(r->out, '\r') == NULL && strchr(r->out, '\033') == NULL, "%s", r->out);
    ck_assert_msg(strchr(r->err, '\r') == NULL && strchr(r->err, '\033') == NULL, "%s", r->err);
}

/* s matches pattern, where '*' stands for any run of characters but '|' (a table cell). */
static bool match_cell(const char *pattern, const char *s)
{
    if (*pattern == '\0')
        return *s == '\0';
    if (*pattern == '*') {
        for (const char *t = s;; t++) {
            if (match_cell(pattern + 1, t))
                return true;
            if (*t == '\0' || *t == '|')
                return false;
        }
    }
    return *pattern == *s && match_cell(pattern + 1, s + 1);
}

/* Checks text line by line against patterns (NULL-terminated). */
static void assert_lines(const char *text, const char *const *patterns)
{
    char *copy = strdup(text), *save = NULL;
    size_t i = 0;
    for (char *line = strtok_r(copy, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save), i++) {
        ck_assert_msg(patterns[i] != NULL, "extra line %zu: %s\nin:\n%s", i + 1, line, text);
        ck_assert_msg(match_cell(patterns[i], line), "line %zu:\n%s\nis not\n%s\nin:\n%s", i + 1,
                      line, patterns[i], text);
    }
    ck_assert_msg(patterns[i] == NULL, "missing line %zu: %s\nin:\n%s", i + 1, patterns[i], text);
    free(copy);
}

/* The lines of text that start with prefix, joined with '\n' (malloc'd). */
static char *lines_starting(const char *text, const char *prefix)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    for (const char *p = text; *p;) {
        const char *end = strchr(p, '\n');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        if (strncmp(p, prefix, strlen(prefix)) == 0)
            fprintf(m, "%.*s\n", (int)n, p);
        p += n + (end != NULL);
    }
    fclose(m);
    return buf;
}

/* The experiment id of "evald-cli: experiment exp_… started" on stderr (static buffer). */
static const char *started_id(const struct ran *r)
{
    static char id[64];
    const char *p = strstr(r->err, "evald-cli: experiment exp_");
    ck_assert_msg(p != NULL, "%s", r->err);
    ck_assert_int_eq(sscanf(p, "evald-cli: experiment %40s started", id), 1);
    ck_assert_uint_eq(strlen(id), 36);
    return id;
}

static json_t *get(const char *path)
{
    char url[512];
    snprintf(url, sizeof(url), "%s%s", evald.base, path);
    long status = 0;
    json_t *v = evd_t_http_json("GET", url, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_ptr_nonnull(v);
    return v;
}

static char *status_of(const char *id)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    json_t *e = get(path);
    char *s = strdup(json_string_value(json_object_get(e, "status")));
    json_decref(e);
    return s;
}

/* Polls until the experiment's status is `want` (up to 20 s). */
static void wait_status(const char *id, const char *want)
{
    char *s = NULL;
    for (int i = 0; i < 200; i++) {
        free(s);
        s = status_of(id);
        if (strcmp(s, want) == 0)
            break;
        usleep(100000);
    }
    ck_assert_str_eq(s, want);
    free(s);
}

static const char CASES_CSV[] = "id,question,expected\n"
                                "q1,q1: one?,yes\n"
                                "q2,q2: two?,yes\n"
                                "q3,q3: three?,yes\n";

/* A YAML experiment over cases.csv next to it; %s are the control's and treatment's
 * markers. Line 4 is the control, line 7 the dataset, line 11 repeats. */
static const char YAML_FMT[] = "name: gate\n"
                               "dimension: prompt\n"
                               "model: {model: stub-model, provider: openai}\n"
                               "control: {label: base, prompt: \"%s {{question}}\"}\n"
                               "treatments:\n"
                               "  - {label: cand, prompt: \"%s {{question}}\"}\n"
                               "dataset: %s\n"
                               "evaluator:\n"
                               "  function_id: eval::assert::exact\n"
                               "  arguments: {expected: \"{{expected}}\"}\n"
                               "repeats: %s\n"
                               "concurrency: 3\n";

static char *yaml_file(const char *name, const char *control, const char *treatment,
                       const char *dataset, const char *repeats)
{
    char *text = NULL;
    ck_assert_int_gt(asprintf(&text, YAML_FMT, control, treatment, dataset, repeats), 0);
    char *path = file_in_dir(name, text);
    free(text);
    return path;
}

/* The JSON experiment with inline cases: control PASS, treatments MIXED and FAIL. */
static const char TWO_TREATMENTS_JSON[] =
    "{\"name\": \"two treatments\", \"dimension\": \"prompt\",\n"
    " \"model\": {\"model\": \"stub-model\", \"provider\": \"openai\"},\n"
    " \"control\": {\"label\": \"pass\", \"prompt\": \"PASS {{question}}\"},\n"
    " \"treatments\": [{\"label\": \"mixed\", \"prompt\": \"MIXED {{question}}\"},\n"
    "                {\"label\": \"fail\", \"prompt\": \"FAIL {{question}}\"}],\n"
    " \"cases\": [{\"id\": \"q1\", \"vars\": {\"question\": \"q1: one?\"}, \"expected\": "
    "\"yes\"},\n"
    "           {\"id\": \"q2\", \"vars\": {\"question\": \"q2: two?\"}, \"expected\": "
    "\"yes\"},\n"
    "           {\"id\": \"q3\", \"vars\": {\"question\": \"q3: three?\"}, \"expected\": "
    "\"yes\"}],\n"
    " \"evaluator\": {\"function_id\": \"eval::assert::exact\", \"arguments\": {\"expected\": "
    "\"{{expected}}\"}},\n"
    " \"repeats\": 1, \"concurrency\": 3}\n";

START_TEST(better_exits_0_and_a_rerun_reuses_the_uploaded_dataset)
{
    free(file_in_dir("cases.csv", CASES_CSV));
    char *exp = yaml_file("experiment.yaml", "FAIL", "PASS", "cases.csv", "2");
    char *json1 = in_dir("first.json"), *json2 = in_dir("second.json");
    struct ran r;
    /* Run from another directory: the dataset is found next to the experiment file. */
    run(CLI("experiment", "run", exp, "--json", json1), &r);
    CHECK_EXIT(r, 0);
    assert_plain(&r);
    /* 3 cases x 2 arms x 2 repeats; the treatment passes its 6. */
    ck_assert_msg(strstr(r.out, "runs 12/12, passed 6 (50.0%), ") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "\ncand vs base         +1.000    [+1.000, +1.000]   0.000    "
                                "0.000   better ") != NULL,
                  "%s", r.out);
    /* Every treatment better: --require better is met. */
    run(CLI("experiment", "run", exp, "--require", "better", "--json", json2), &r);
    CHECK_EXIT(r, 0);
    json_t *a = evd_test_load_json(json1), *b = evd_test_load_json(json2);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    const char *ds =
        json_string_value(json_object_get(json_object_get(a, "dataset"), "dataset_id"));
    ck_assert_msg(ds != NULL && strncmp(ds, "ds_", 3) == 0, "%s", ds);
    ck_assert_str_eq(
        ds, json_string_value(json_object_get(json_object_get(b, "dataset"), "dataset_id")));
    ck_assert_str_ne(json_string_value(json_object_get(a, "experiment_id")),
                     json_string_value(json_object_get(b, "experiment_id")));
    char *n = evd_t_sql(db_url, "SELECT count(*) FROM datasets");
    ck_assert_str_eq(n, "1");
    free(n);
    /* The request sent names the dataset, not the file. */
    const json_t *req = json_object_get(a, "request");
    ck_assert_ptr_null(json_object_get(req, "dataset"));
    ck_assert_str_eq(json_string_value(json_object_get(req, "dataset_id")), ds);
    json_decref(a);
    json_decref(b);
    free(json1);
    free(json2);
    free(exp);
}
END_TEST

START_TEST(a_worse_treatment_exits_1_with_every_output)
{
    char *exp = file_in_dir("two.json", TWO_TREATMENTS_JSON);
    char *junit = in_dir("junit.xml"), *md = in_dir("summary.md"), *doc = in_dir("doc.json");
    struct ran r;
    run(CLI("experiment", "run", exp, "--junit", junit, "--markdown", md, "--json", doc, "--format",
            "github", "--fail-on-inconclusive"),
        &r);
    /* fail is worse: 1, ahead of mixed's inconclusive (3). */
    CHECK_EXIT(r, 1);
    assert_plain(&r);
    const char *id = started_id(&r);
    /* control 3 passes, mixed 2 (all but q1), fail 0: 5 of 9. */
    ck_assert_msg(strstr(r.out, "runs 9/9, passed 5 (55.6%), ") != NULL, "%s", r.out);

    /*
     * Worked by hand, m = 2 treatments so alpha' = 0.025, df = n - 1 = 2:
     * mixed: d = (-1, 0, 0), mean -1/3, s.d. sqrt(1/3), se 1/3; t(0.9875, 2) = 6.2054 gives
     *   the interval -1/3 -+ 2.0685 = [-2.402, +1.735]; t = -1, two-sided p = 1 - 1/sqrt(3)
     *   = 0.4226, adjusted 0.845; MDE (6.2054 + t(0.8, 2) = 1.0607) / 3 = 2.422.
     * fail: d = (-1, -1, -1), se 0: interval [-1, -1], p 0, MDE 0, worse.
     * Tokens: mixed 14 vs 12 (+2, +16.7%), fail 11 vs 12 (-1, -8.3%); stub-model has no price;
     * no function calls (+0); wall time varies (*).
     */
    char *summary = slurp(md);
    char head[128];
    snprintf(head, sizeof(head), "### evald experiment %s: two treatments", id);
    const char *want_md[] = {
        head,
        "Status **completed**, 3 cases, control **pass**; 95% intervals, Bonferroni-adjusted.",
        "| treatment | verdict | Δ pass rate | interval | p (adjusted) | MDE | Δ tokens | Δ cost $ "
        "| Δ wall ms | Δ calls |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|",
        "| mixed | inconclusive | -0.333 | [-2.402, +1.735] | 0.845 | 2.422 | +2 (+16.7%) | n/a | "
        "* | +0 |",
        "| fail | ❌ worse | -1.000 | [-1.000, -1.000] | 0.000 | 0.000 | -1 (-8.3%) | n/a | * | "
        "+0 |",
        NULL};
    assert_lines(summary, want_md);

    /* GitHub workflow commands: the worse treatment, and each case a treatment regressed. */
    char *gh = lines_starting(r.out, "::");
    const char *want_gh[] = {
        "::warning title=evald%3A case q1 regressed in mixed::pass passed 1/1 runs, mixed passed "
        "0/1",
        "::error title=evald%3A fail is worse than pass::pass rate -1.000 [-1.000, -1.000], p "
        "(adjusted) 0.000",
        "::warning title=evald%3A case q1 regressed in fail::pass passed 1/1 runs, fail passed 0/1",
        "::warning title=evald%3A case q2 regressed in fail::pass passed 1/1 runs, fail passed 0/1",
        "::warning title=evald%3A case q3 regressed in fail::pass passed 1/1 runs, fail passed 0/1",
        NULL};
    assert_lines(gh, want_gh);

    /* JUnit: valid against the shipped schema, a suite per treatment, a case per case. */
    char *cmd = NULL;
    ck_assert_int_gt(asprintf(&cmd, "xmllint --noout --schema %s/tests/cli/junit.xsd %s",
                              evd_t_source_dir(), junit),
                     0);
    if (system("command -v xmllint >/dev/null 2>&1") == 0)
        ck_assert_msg(system(cmd) == 0, "%s does not validate", junit);
    else
        fprintf(stderr, "SKIPPED: JUnit schema check (xmllint is absent)\n");
    free(cmd);
    char *xml = slurp(junit);
    ck_assert_msg(strstr(xml, "<testsuite name=\"mixed vs pass\" tests=\"3\" failures=\"1\" ") &&
                      strstr(xml, "<testsuite name=\"fail vs pass\" tests=\"3\" failures=\"3\" "),
                  "%s", xml);
    char mixed_q1[256], mixed_q2[256];
    snprintf(mixed_q1, sizeof(mixed_q1),
             "<testcase classname=\"%s.mixed\" name=\"q1\">\n      <failure message=\"pass "
             "passed 1/1 runs, mixed passed 0/1\" type=\"regression\">",
             id);
    snprintf(mixed_q2, sizeof(mixed_q2), "<testcase classname=\"%s.mixed\" name=\"q2\"/>", id);
    ck_assert_msg(strstr(xml, mixed_q1) && strstr(xml, mixed_q2), "%s", xml);
    int suites = 0, cases = 0, failures = 0;
    for (const char *p = xml; (p = strstr(p, "<testsuite ")) != NULL; p++)
        suites++;
    for (const char *p = xml; (p = strstr(p, "<testcase ")) != NULL; p++)
        cases++;
    for (const char *p = xml; (p = strstr(p, "<failure ")) != NULL; p++)
        failures++;
    ck_assert_int_eq(suites, 2);
    ck_assert_int_eq(cases, 6);
    ck_assert_int_eq(failures, 4);

    /* --json: the full experiment document, as GET /v1/experiments/{id} answers it. */
    json_t *written = evd_test_load_json(doc);
    char path[128];
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    json_t *served = get(path);
    ck_assert_msg(json_equal(written, served), "the --json file is not the experiment document");
    ck_assert(json_is_false(json_object_get(json_object_get(written, "analysis"), "partial")));

    /* show, export and watch of the finished experiment. */
    char *shown = in_dir("shown.json");
    run(CLI("experiment", "show", (char *)id, "--json"), &r);
    CHECK_EXIT(r, 0);
    json_t *s = json_loads(r.out, 0, NULL);
    ck_assert_msg(json_equal(s, served), "%s", r.out);
    json_decref(s);
    free(shown);
    run(CLI("experiment", "show", (char *)id), &r);
    CHECK_EXIT(r, 0);
    ck_assert_msg(strstr(r.out, "\nfail vs pass         -1.000    [-1.000, -1.000]   0.000    "
                                "0.000   worse ") != NULL,
                  "%s", r.out);
    char *csv = in_dir("runs.csv");
    run(CLI("experiment", "export", (char *)id, "--format", "csv", "--output", csv), &r);
    CHECK_EXIT(r, 0);
    char *rows = slurp(csv);
    static const char HEADER[] = "experiment_id,run_id,session_id,case_id,case_index,arm,"
                                 "label,repeat,position,status,passed,score,output,";
    ck_assert_msg(strncmp(rows, HEADER, strlen(HEADER)) == 0, "%s", rows);
    int lines = 0;
    for (const char *p = rows; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    ck_assert_int_eq(lines, 1 + 9);
    run(CLI("experiment", "export", (char *)id), &r);
    CHECK_EXIT(r, 0);
    lines = 0;
    for (char *save = NULL, *l = strtok_r(r.out, "\n", &save); l != NULL;
         l = strtok_r(NULL, "\n", &save), lines++) {
        json_t *rec = json_loads(l, 0, NULL);
        ck_assert_msg(json_is_object(rec), "%s", l);
        ck_assert_str_eq(json_string_value(json_object_get(rec, "experiment_id")), id);
        json_decref(rec);
    }
    ck_assert_int_eq(lines, 9);
    run(CLI("experiment", "export", (char *)id, "--format", "xml"), &r);
    CHECK_EXIT(r, 2);
    /* watch of a finished experiment gives its verdict again: 1. */
    run(CLI("experiment", "watch", (char *)id), &r);
    CHECK_EXIT(r, 1);
    /* compare: the runs of case q1, repeat 1, by their session ids: control 12 tokens,
     * mixed 14 (the script's usage), no function calls. */
    char s0[64], s1[64];
    snprintf(s0, sizeof(s0), "%s_1_0_1", id);
    snprintf(s1, sizeof(s1), "%s_1_1_1", id);
    run(CLI("compare", s0, s1), &r);
    CHECK_EXIT(r, 0);
    const struct {
        const char *session, *title;
        long tokens;
    } want_cmp[] = {{s0, "pass · case q1 · run 1", 12}, {s1, "mixed · case q1 · run 1", 14}};
    for (size_t k = 0; k < 2; k++) {
        const char *line = strstr(r.out, want_cmp[k].session);
        ck_assert_msg(line != NULL, "%s", r.out);
        char lead[160];
        snprintf(lead, sizeof(lead), "%-44s %s ", want_cmp[k].session, want_cmp[k].title);
        ck_assert_msg(strncmp(line, lead, strlen(lead)) == 0, "%s", r.out);
        long tokens = -1, wall = -1, calls = -1;
        char status[32] = "";
        ck_assert_int_eq(
            sscanf(line + strlen(lead), "%31s %ld %ld %ld", status, &tokens, &wall, &calls), 4);
        ck_assert_str_eq(status, "completed");
        ck_assert_int_eq(tokens, want_cmp[k].tokens);
        ck_assert_int_ge(wall, 0);
        ck_assert_int_eq(calls, 0);
    }
    run(CLI("compare", s0, s1, "--baseline", s1, "--json"), &r);
    CHECK_EXIT(r, 0);
    json_t *cmp = json_loads(r.out, 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(cmp, "baseline_session_id")), s1);
    ck_assert_uint_eq(json_array_size(json_object_get(cmp, "sessions")), 2);
    json_decref(cmp);
    /* cancel leaves a finished experiment as it is, and says so. */
    run(CLI("experiment", "cancel", (char *)id), &r);
    CHECK_EXIT(r, 0);
    char said[128];
    snprintf(said, sizeof(said), "%s completed\n", id);
    ck_assert_str_eq(r.out, said);
    run(CLI("experiment", "cancel", (char *)id, "--json"), &r);
    CHECK_EXIT(r, 0);
    json_t *answer = json_loads(r.out, 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(answer, "status")), "completed");
    ck_assert_str_eq(json_string_value(json_object_get(answer, "experiment_id")), id);
    json_decref(answer);

    free(rows);
    free(csv);
    json_decref(served);
    json_decref(written);
    free(xml);
    free(gh);
    free(summary);
    free(doc);
    free(md);
    free(junit);
    free(exp);
}
END_TEST

START_TEST(junit_has_every_case_of_a_dataset_longer_than_a_page)
{
    /* 130 cases, read back 100 a page; a JSONL dataset this time. */
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    for (int i = 1; i <= 130; i++)
        fprintf(m,
                "{\"id\": \"k%d\", \"vars\": {\"question\": \"k%d?\"}, \"expected\": "
                "\"yes\"}\n",
                i, i);
    fclose(m);
    free(file_in_dir("many.jsonl", buf));
    free(buf);
    char *exp = yaml_file("many.yaml", "PASS", "FAIL", "many.jsonl", "1");
    char *junit = in_dir("many.xml");
    struct ran r;
    run(CLI("experiment", "run", exp, "--junit", junit), &r);
    CHECK_EXIT(r, 1);
    char *xml = slurp(junit);
    int cases = 0, failures = 0;
    for (const char *p = xml; (p = strstr(p, "<testcase ")) != NULL; p++)
        cases++;
    for (const char *p = xml; (p = strstr(p, "<failure ")) != NULL; p++)
        failures++;
    ck_assert_int_eq(cases, 130);
    ck_assert_int_eq(failures, 130);
    ck_assert_msg(strstr(xml, "name=\"k1\"") && strstr(xml, "name=\"k100\"") &&
                      strstr(xml, "name=\"k101\"") && strstr(xml, "name=\"k130\""),
                  "%s", xml);
    free(xml);
    free(junit);
    free(exp);
}
END_TEST

START_TEST(inconclusive_exits_3_only_when_asked)
{
    free(file_in_dir("cases.csv", CASES_CSV));
    char *exp = yaml_file("experiment.yaml", "PASS", "MIXED", "cases.csv", "1");
    struct ran r;
    run(CLI("experiment", "run", exp), &r);
    CHECK_EXIT(r, 0); /* inconclusive is not worse */
    ck_assert_msg(strstr(r.out, " inconclusive ") != NULL, "%s", r.out);
    char id[64];
    snprintf(id, sizeof(id), "%s", started_id(&r));
    run(CLI("experiment", "watch", id, "--fail-on-inconclusive"), &r);
    CHECK_EXIT(r, 3);
    run(CLI("experiment", "watch", id, "--require", "better"), &r);
    CHECK_EXIT(r, 1);
    run(CLI("experiment", "watch", id, "--require", "better", "--fail-on-inconclusive"), &r);
    CHECK_EXIT(r, 1);
    /* --json -: stdout holds the document alone; the progress and the table go to stderr. */
    run(CLI("experiment", "watch", id, "--json", "-"), &r);
    CHECK_EXIT(r, 0);
    json_error_t jerr;
    json_t *doc = json_loads(r.out, 0, &jerr); /* fails on anything after the document */
    ck_assert_msg(doc != NULL, "stdout is not one JSON document (%s): %s", jerr.text, r.out);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "experiment_id")), id);
    json_decref(doc);
    ck_assert_msg(strstr(r.err, "runs 6/6, passed ") != NULL, "%s", r.err);
    ck_assert_msg(strstr(r.err, " inconclusive ") != NULL, "%s", r.err);
    run(CLI("experiment", "watch", id, "--json", "-", "--junit", "-"), &r);
    CHECK_EXIT(r, 2);
    ck_assert_msg(strstr(r.err, "only one of --json, --junit and --markdown can write to stdout") !=
                      NULL,
                  "%s", r.err);
    free(exp);
}
END_TEST

START_TEST(usage_file_and_request_errors_exit_2)
{
    free(file_in_dir("cases.csv", CASES_CSV));
    struct ran r;
    /* Usage. */
    run(CLI("experiment", "run"), &r);
    CHECK_EXIT(r, 2);
    ck_assert_msg(strstr(r.err, "usage: evald-cli experiment run FILE") != NULL, "%s", r.err);
    char *ok = yaml_file("ok.yaml", "FAIL", "PASS", "cases.csv", "1");
    run(CLI("experiment", "run", ok, "--require", "worse"), &r);
    CHECK_EXIT(r, 2);
    ck_assert_msg(strstr(r.err, "--require takes one value, better (not worse)"), "%s", r.err);
    /* A YAML mistake: the file, line and column of the parser. */
    char *broken = file_in_dir("broken.yaml", "name: x\ncontrol: {label: a, prompt: \"b\"\n"
                                              "treatments: []\n");
    run(CLI("experiment", "run", broken), &r);
    CHECK_EXIT(r, 2);
    char want[1024];
    snprintf(want, sizeof(want), "evald-cli: %s:3:", broken);
    ck_assert_msg(strncmp(r.err, want, strlen(want)) == 0, "%s", r.err);
    /* A refusal of the server: its detail, at the line of the field it names. */
    char *zero = yaml_file("zero.yaml", "FAIL", "PASS", "cases.csv", "0");
    run(CLI("experiment", "run", zero), &r);
    CHECK_EXIT(r, 2);
    snprintf(want, sizeof(want), "evald-cli: %s:11: repeats must be between 1 and 100\n", zero);
    ck_assert_str_eq(r.err, want);
    /* A template variable no case defines: the line and field of the template; with
     * --format github also an annotation of that line. */
    char *tmpl = yaml_file("tmpl.yaml", "FAIL {{topic}}", "PASS", "cases.csv", "1");
    run(CLI("experiment", "run", tmpl, "--format", "github"), &r);
    CHECK_EXIT(r, 2);
    snprintf(want, sizeof(want),
             "evald-cli: %s:4: control.prompt: case q1: template variable topic is not "
             "defined\n",
             tmpl);
    ck_assert_str_eq(r.err, want);
    snprintf(want, sizeof(want),
             "::error file=%s,line=4,title=evald-cli::control.prompt: case q1: template "
             "variable topic is not defined\n",
             tmpl);
    ck_assert_str_eq(r.out, want);
    run(CLI("experiment", "run", broken, "--format", "github"), &r);
    CHECK_EXIT(r, 2);
    snprintf(want, sizeof(want), "::error file=%s,line=3,col=", broken);
    ck_assert_msg(strncmp(r.out, want, strlen(want)) == 0, "%s", r.out);
    /* A dataset file that is not there: the experiment file's line of it. */
    char *missing = yaml_file("missing.yaml", "FAIL", "PASS", "nope.csv", "1");
    run(CLI("experiment", "run", missing), &r);
    CHECK_EXIT(r, 2);
    snprintf(want, sizeof(want),
             "evald-cli: %s:7: dataset %s/nope.csv: No such file or directory\n", missing, dir);
    ck_assert_str_eq(r.err, want);
    /* A dataset the server refuses: the row it names, after the file's line. */
    free(file_in_dir("dup.csv", "id,question,expected\nq1,a,yes\nq1,b,yes\n"));
    char *dup = yaml_file("dup.yaml", "FAIL", "PASS", "dup.csv", "1");
    run(CLI("experiment", "run", dup, "--format", "github"), &r);
    CHECK_EXIT(r, 2);
    snprintf(want, sizeof(want), "evald-cli: %s:7: dataset %s/dup.csv: row 2: duplicate id q1\n",
             dup, dir);
    ck_assert_str_eq(r.err, want);
    snprintf(want, sizeof(want),
             "::error file=%s,line=7,title=evald-cli::dataset %s/dup.csv: row 2: duplicate id "
             "q1\n",
             dup, dir);
    ck_assert_str_eq(r.out, want);
    /* Nothing was written for any of them but the one dataset of the template check. */
    char *n = evd_t_sql(db_url, "SELECT count(*) FROM experiments");
    ck_assert_str_eq(n, "0");
    free(n);
    /* A 4xx of a read: its detail. */
    run(CLI("experiment", "show", "exp_0123456789abcdef0123456789abcdef"), &r);
    CHECK_EXIT(r, 2);
    ck_assert_msg(strstr(r.err, "evald-cli: could not read the experiment: 404 ") != NULL, "%s",
                  r.err);
    ck_assert_msg(strstr(r.err, "exp_0123456789abcdef0123456789abcdef") != NULL, "%s", r.err);
    assert_plain(&r);
    free(dup);
    free(missing);
    free(tmpl);
    free(zero);
    free(broken);
    free(ok);
}
END_TEST

START_TEST(transport_errors_and_5xx_exit_4)
{
    char *exp = file_in_dir("two.json", TWO_TREATMENTS_JSON);
    struct ran r;
    /* Nothing listening: within the timeout, naming the call. */
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", evd_t_free_port());
    run((char *[]){(char *)cli_bin(), "experiment", "run", exp, "--url", url, "--timeout", "2",
                   NULL},
        &r);
    CHECK_EXIT(r, 4);
    ck_assert_msg(strstr(r.err, "POST ") && strstr(r.err, "/v1/experiments: "), "%s", r.err);
    /* A start is tried again 1 and 2 s later with one Idempotency-Key, and no more: a
     * third retry, 4 s later, could not end within three timeouts (6 s). */
    ck_assert_msg(strstr(r.err, "trying again in 2 s with the same Idempotency-Key"), "%s", r.err);
    ck_assert_msg(!strstr(r.err, "trying again in 4 s"), "%s", r.err);
    ck_assert_msg(r.seconds >= 2.5 && r.seconds < 5, "took %.1f s", r.seconds);
    /* A 5xx: the database lost the table evald writes experiments to. */
    char *done = evd_t_sql(db_url, "ALTER TABLE experiments RENAME TO experiments_gone");
    ck_assert_ptr_nonnull(done);
    free(done);
    run(CLI("experiment", "run", exp), &r);
    CHECK_EXIT(r, 4);
    char want[512];
    snprintf(want, sizeof(want),
             "evald-cli: could not start the experiment: POST %s/v1/experiments answered 5",
             evald.base);
    ck_assert_msg(strstr(r.err, want) != NULL, "%s", r.err);
    run(CLI("experiment", "show", "exp_0123456789abcdef0123456789abcdef"), &r);
    CHECK_EXIT(r, 4);
    ck_assert_msg(strstr(r.err, "could not read the experiment: GET ") &&
                      strstr(r.err, "answered 5"),
                  "%s", r.err);
    free(exp);
}
END_TEST

/* A start sent while evald is not listening yet is sent again, with the key of its first
 * attempt, once evald is up: one experiment, one key, and the CLI says what it did. */
START_TEST(a_start_is_tried_again_with_its_idempotency_key)
{
    free(file_in_dir("cases.csv", CASES_CSV));
    char *exp = yaml_file("quick.yaml", "PASS", "FAIL", "cases.csv", "1");
    unsigned port = evd_t_free_port();
    char url[64], listen[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", port);
    snprintf(listen, sizeof(listen), "EVALD_LISTEN=127.0.0.1:%u", port);
    char *n = evd_t_sql(db_url, "SELECT count(*) FROM experiments");
    long before = atol(n);
    free(n);
    struct child c;
    spawn((char *[]){(char *)cli_bin(), "experiment", "run", exp, "--url", url, "--detach", NULL},
          &c);
    usleep(300000);
    struct evd_t_proc late;
    char base[300];
    snprintf(base, sizeof(base), "OPENAI_BASE_URL=%s/v1", stub.base);
    char *env[] = {base, "OPENAI_API_KEY=stub-key", listen, NULL};
    ck_assert_int_eq(evd_t_evald_start(&late, db_url, env), 0);
    struct ran r;
    memset(&r, 0, sizeof(r));
    ck_assert(collect(&c, &r, NULL));
    CHECK_EXIT(r, 0);
    ck_assert_msg(strstr(r.err, "with the same Idempotency-Key") != NULL, "%s", r.err);
    n = evd_t_sql(db_url, "SELECT count(*) FROM experiments");
    ck_assert_int_eq(atol(n), before + 1);
    free(n);
    n = evd_t_sql(db_url, "SELECT count(*) FROM idempotency_keys WHERE key LIKE 'evald-cli-%'"
                          " AND status = 202");
    ck_assert_str_eq(n, "1");
    free(n);
    ck_assert_int_eq(evd_t_stop(&late, SIGTERM, 10000), 0);
    free(exp);
}
END_TEST

START_TEST(sigint_cancels_the_experiment_on_the_server)
{
    free(file_in_dir("cases.csv", CASES_CSV));
    char *exp = yaml_file("slow.yaml", "slow PASS", "slow MIXED", "cases.csv", "2");
    struct ran r;
    memset(&r, 0, sizeof(r));
    struct child c;
    spawn(CLI("experiment", "run", exp), &c);
    ck_assert(!collect(&c, &r, " started\n"));
    char id[64];
    snprintf(id, sizeof(id), "%s", started_id(&r));
    usleep(300000);
    ck_assert_int_eq(kill(c.pid, SIGINT), 0);
    ck_assert(collect(&c, &r, NULL));
    CHECK_EXIT(r, 130);
    char want[128];
    snprintf(want, sizeof(want), "evald-cli: interrupted: cancelling experiment %s\n", id);
    ck_assert_msg(strstr(r.err, want) != NULL, "%s", r.err);
    ck_assert_msg(r.seconds < SLOW_MS * 4 / 1000.0, "took %.1f s", r.seconds);
    wait_status(id, "cancelled");
    free(exp);
}
END_TEST

START_TEST(detach_prints_the_id_and_the_experiment_goes_on)
{
    free(file_in_dir("cases.csv", CASES_CSV));
    /* Each case runs 4 cells of SLOW_MS one after another: 6 s at least. */
    char *exp = yaml_file("slow.yaml", "slow PASS", "slow FAIL", "cases.csv", "2");
    struct ran r;
    run(CLI("experiment", "run", exp, "--detach"), &r);
    CHECK_EXIT(r, 0);
    ck_assert_msg(strncmp(r.out, "exp_", 4) == 0 && strlen(r.out) == 37, "%s", r.out);
    char id[64];
    snprintf(id, sizeof(id), "%.36s", r.out);
    /* It did not wait for the experiment (6 s at least): not timed, which a loaded machine
     * makes flaky, but read from the experiment, which has not ended. */
    char *s = status_of(id);
    ck_assert_msg(strcmp(s, "queued") == 0 || strcmp(s, "running") == 0, "%s", s);
    free(s);
    /* It goes on without a client; watch follows it in a pipe: a plain line every 5 s and
     * one at the end. The "slow " rule answers yes to both arms. */
    run(CLI("experiment", "watch", id), &r);
    CHECK_EXIT(r, 0);
    assert_plain(&r);
    char *lines = lines_starting(r.out, "runs ");
    size_t n = 0;
    for (const char *p = lines; (p = strchr(p, '\n')) != NULL; p++)
        n++;
    ck_assert_msg(n >= 2, "%s", r.out);
    /* The last line is the end's. */
    const char *last = lines + strlen(lines) - 1;
    while (last > lines && last[-1] != '\n')
        last--;
    ck_assert_msg(strncmp(last, "runs 12/12, passed 12 (100.0%), ", 32) == 0, "%s", lines);
    free(lines);
    wait_status(id, "completed");
    free(exp);
}
END_TEST

START_TEST(an_experiment_cancelled_elsewhere_is_no_pass)
{
    free(file_in_dir("cases.csv", CASES_CSV));
    char *exp = yaml_file("slow.yaml", "slow PASS", "slow FAIL", "cases.csv", "3");
    struct ran r;
    run(CLI("experiment", "run", exp, "--detach"), &r);
    CHECK_EXIT(r, 0);
    char id[64];
    snprintf(id, sizeof(id), "%.36s", r.out);
    run(CLI("experiment", "cancel", id), &r);
    CHECK_EXIT(r, 0);
    char want[128];
    snprintf(want, sizeof(want), "%s cancelled\n", id);
    ck_assert_str_eq(r.out, want);
    wait_status(id, "cancelled");
    run(CLI("experiment", "watch", id), &r);
    CHECK_EXIT(r, 4);
    snprintf(want, sizeof(want), "evald-cli: experiment %s was cancelled before it completed\n",
             id);
    ck_assert_msg(strstr(r.err, want) != NULL, "%s", r.err);
    free(exp);
}
END_TEST

START_TEST(a_cancel_that_gets_a_503_is_tried_again)
{
    free(file_in_dir("cases.csv", CASES_CSV));
    char *exp = yaml_file("slow.yaml", "slow PASS", "slow FAIL", "cases.csv", "3");
    struct ran r;
    run(CLI("experiment", "run", exp, "--detach"), &r);
    CHECK_EXIT(r, 0);
    char id[64];
    snprintf(id, sizeof(id), "%.36s", r.out);
    /* While the table is gone every answer is a 503: three calls a second apart, then 4. */
    free(evd_t_sql(db_url, "ALTER TABLE experiments RENAME TO experiments_gone"));
    run(CLI("experiment", "cancel", id), &r);
    CHECK_EXIT(r, 4);
    ck_assert_msg(strstr(r.err, "/cancel answered 503: ") != NULL, "%s", r.err);
    ck_assert_msg(r.seconds >= 1.9, "gave up after %.1f s", r.seconds);
    /* The table is back before the second call: that one cancels. */
    memset(&r, 0, sizeof(r));
    struct child c;
    spawn(CLI("experiment", "cancel", id), &c);
    usleep(300000);
    free(evd_t_sql(db_url, "ALTER TABLE experiments_gone RENAME TO experiments"));
    ck_assert(collect(&c, &r, NULL));
    CHECK_EXIT(r, 0);
    char want[128];
    snprintf(want, sizeof(want), "%s cancelled\n", id);
    ck_assert_str_eq(r.out, want);
    wait_status(id, "cancelled");
    free(exp);
}
END_TEST

START_TEST(the_token_comes_from_the_option_or_the_environment_and_is_never_printed)
{
    static char base[300];
    snprintf(base, sizeof(base), "OPENAI_BASE_URL=%s/v1", stub.base);
    char *env[] = {base, "OPENAI_API_KEY=stub-key", "EVALD_API_TOKEN=tok-s3cret-value", NULL};
    struct evd_t_proc guarded;
    ck_assert_int_eq(evd_t_evald_start(&guarded, db_url, env), 0);
    char *exp = file_in_dir("two.json", TWO_TREATMENTS_JSON);
    struct ran r;
    /* No token: a 401, exit 2 with its detail. */
    unsetenv("EVALD_API_TOKEN");
    run((char *[]){(char *)cli_bin(), "--url", guarded.base, "experiment", "run", exp, NULL}, &r);
    CHECK_EXIT(r, 2);
    ck_assert_msg(strstr(r.err, exp) != NULL, "%s", r.err);
    /* A wrong one: the same, and the token is not echoed. */
    run((char *[]){(char *)cli_bin(), "--url", guarded.base, "--token", "wrong-t0ken", "experiment",
                   "show", "exp_0123456789abcdef0123456789abcdef", NULL},
        &r);
    CHECK_EXIT(r, 2);
    ck_assert_msg(strstr(r.err, "401") != NULL && strstr(r.err, "wrong-t0ken") == NULL, "%s",
                  r.err);
    /* From the environment, after the command. */
    setenv("EVALD_API_TOKEN", "tok-s3cret-value", 1);
    run((char *[]){(char *)cli_bin(), "experiment", "run", exp, "--url", guarded.base, NULL}, &r);
    unsetenv("EVALD_API_TOKEN");
    CHECK_EXIT(r, 1);
    ck_assert_msg(strstr(r.out, "tok-s3cret") == NULL && strstr(r.err, "tok-s3cret") == NULL,
                  "%s %s", r.out, r.err);
    evd_t_stop(&guarded, SIGTERM, 10000);
    free(exp);
}
END_TEST

START_TEST(the_progress_line_is_redrawn_on_a_terminal)
{
    if (system("command -v script >/dev/null 2>&1") != 0) {
        fprintf(stderr, "SKIPPED: pseudo-terminal check (script from bsdutils is absent)\n");
        return;
    }
    free(file_in_dir("cases.csv", CASES_CSV));
    char *exp = yaml_file("experiment.yaml", "PASS", "FAIL", "cases.csv", "1");
    char *cmd = NULL;
    ck_assert_int_gt(asprintf(&cmd, "%s --url %s experiment run %s", cli_bin(), evald.base, exp),
                     0);
    struct ran r;
    run((char *[]){"/usr/bin/script", "-qefc", cmd, "/dev/null", NULL}, &r);
    CHECK_EXIT(r, 1);
    ck_assert_msg(strstr(r.out, "\r\033[K\033[1mruns ") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "runs 6/6\033[0m  passed 3 (50.0%)") != NULL, "%s", r.out);
    free(cmd);
    free(exp);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli_experiment");
    TCase *tc = tcase_create("cli_experiment");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, better_exits_0_and_a_rerun_reuses_the_uploaded_dataset);
    tcase_add_test(tc, a_worse_treatment_exits_1_with_every_output);
    tcase_add_test(tc, junit_has_every_case_of_a_dataset_longer_than_a_page);
    tcase_add_test(tc, inconclusive_exits_3_only_when_asked);
    tcase_add_test(tc, usage_file_and_request_errors_exit_2);
    tcase_add_test(tc, transport_errors_and_5xx_exit_4);
    tcase_add_test(tc, a_start_is_tried_again_with_its_idempotency_key);
    tcase_add_test(tc, sigint_cancels_the_experiment_on_the_server);
    tcase_add_test(tc, detach_prints_the_id_and_the_experiment_goes_on);
    tcase_add_test(tc, an_experiment_cancelled_elsewhere_is_no_pass);
    tcase_add_test(tc, a_cancel_that_gets_a_503_is_tried_again);
    tcase_add_test(tc, the_token_comes_from_the_option_or_the_environment_and_is_never_printed);
    tcase_add_test(tc, the_progress_line_is_redrawn_on_a_terminal);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
