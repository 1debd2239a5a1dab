/*
 * docs/ci.md, run (CTest cli/ci_example): every fenced block of the page is marked with the
 * file it is (`<!-- ci-example: PATH -->`) and written into a fresh workspace; the workflow
 * is read with evald-cli's own YAML loader and its `run:` steps are executed in order with
 * bash, with the environment a GitHub runner gives (GITHUB_WORKSPACE, RUNNER_TEMP, a
 * GITHUB_STEP_SUMMARY file per step, CI, GITHUB_ACTIONS) and the step's `if:` honoured.
 * What a runner has and this machine has not is replaced, and only that: the PostgreSQL
 * service is a throwaway database of the test server, the loopback port of evald a free
 * one, OpenAI an evald-stub scripted from the page's own experiment and cases (the
 * treatment right and the control wrong, then the other way round), the secret a dummy.
 * `uses:` steps are actions (the test has done the checkout); the step `install-evald`
 * builds evald, which the test has already built: its binaries are first on PATH.
 * Also: the README's CI lines are the workflow's gate step, and the page's example of a
 * mistake is the message evald-cli prints for it.
 */
#define _GNU_SOURCE /* asprintf */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "tests/support/itest.h"
#include "tests/support/testutil.h"

#define MAX_FILES 8
#define MAX_STEPS 32

static char db_url[1024];
static char db_name[64];
static struct evd_t_proc stub;
static char root[64], ws[128], tmp[128];

/* The files of the page: path in the workspace, text. */
static struct {
    char path[256];
    char *text;
} files[MAX_FILES];
static size_t nfiles;

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
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

static void write_file(const char *path, const char *text)
{
    char *dir = strdup(path);
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0755);
            *p = '/';
        }
    free(dir);
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
}

/* Reads docs/ci.md into files[]; every fenced block must be marked. */
static void read_page(void)
{
    char *path = NULL;
    ck_assert_int_gt(asprintf(&path, "%s/docs/ci.md", evd_t_source_dir()), 0);
    char *md = slurp(path);
    free(path);
    nfiles = 0;
    char *save = NULL, *prev = NULL;
    for (char *line = strtok_r(md, "\n", &save); line != NULL;
         prev = line, line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "```", 3) != 0)
            continue;
        char name[256];
        ck_assert_msg(prev != NULL && sscanf(prev, "<!-- ci-example: %255s -->", name) == 1,
                      "docs/ci.md: a block that no test runs (mark it <!-- ci-example: PATH "
                      "-->): after %s",
                      prev != NULL ? prev : "(start)");
        ck_assert_uint_lt(nfiles, MAX_FILES);
        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        for (line = strtok_r(NULL, "\n", &save); line != NULL && strcmp(line, "```") != 0;
             line = strtok_r(NULL, "\n", &save))
            fprintf(m, "%s\n", line);
        fclose(m);
        ck_assert_msg(line != NULL, "docs/ci.md: the block of %s does not end", name);
        snprintf(files[nfiles].path, sizeof(files[nfiles].path), "%s", name);
        files[nfiles++].text = buf;
    }
    free(md);
}

static const char *page_file(const char *path)
{
    for (size_t i = 0; i < nfiles; i++)
        if (strcmp(files[i].path, path) == 0)
            return files[i].text;
    ck_abort_msg("docs/ci.md has no block of %s", path);
    return NULL;
}

/* The workflow, as JSON (new reference). */
static json_t *workflow(void)
{
    char *path = NULL;
    ck_assert_int_gt(asprintf(&path, "%s/.github/workflows/prompts.yml", ws), 0);
    struct cli_doc d;
    char err[600];
    ck_assert_msg(cli_doc_load(&d, path, err, sizeof(err)), "%s", err);
    json_t *w = json_incref(d.root);
    cli_doc_free(&d);
    free(path);
    return w;
}

/* The one job of the workflow (borrowed from w). */
static json_t *the_job(json_t *w)
{
    json_t *jobs = json_object_get(w, "jobs");
    ck_assert_msg(json_object_size(jobs) == 1, "the example has one job");
    void *it = json_object_iter(jobs);
    return json_object_iter_value(it);
}

/* A stub script from the page's experiment and cases: the arm `right` answers each case's
 * expected text, the other arm something the evaluator refuses. */
static char *script_for(const char *right)
{
    struct cli_doc d;
    char err[600], *path = NULL;
    ck_assert_int_gt(asprintf(&path, "%s/prompts/experiment.yaml", ws), 0);
    ck_assert_msg(cli_doc_load(&d, path, err, sizeof(err)), "%s", err);
    free(path);
    const char *prompts[2] = {
        json_string_value(json_object_get(json_object_get(d.root, "control"), "prompt")),
        json_string_value(
            json_object_get(json_array_get(json_object_get(d.root, "treatments"), 0), "prompt"))};
    ck_assert_ptr_nonnull(prompts[0]);
    ck_assert_ptr_nonnull(prompts[1]);
    ck_assert_uint_eq(json_array_size(json_object_get(d.root, "treatments")), 1);
    char *csv = strdup(page_file("prompts/cases.csv"));
    ck_assert_msg(strchr(csv, '"') == NULL, "the test reads a CSV without quotes");
    json_t *rules = json_array();
    char *save = NULL, *header = strtok_r(csv, "\n", &save);
    char *cols[8];
    size_t ncols = 0;
    char *hs = NULL;
    for (char *c = strtok_r(header, ",", &hs); c != NULL && ncols < 8; c = strtok_r(NULL, ",", &hs))
        cols[ncols++] = c;
    for (char *row = strtok_r(NULL, "\n", &save); row != NULL; row = strtok_r(NULL, "\n", &save)) {
        char *vals[8], *rs = NULL;
        size_t n = 0;
        for (char *v = strtok_r(row, ",", &rs); v != NULL && n < 8; v = strtok_r(NULL, ",", &rs))
            vals[n++] = v;
        ck_assert_uint_eq(n, ncols);
        const char *expected = NULL;
        for (size_t k = 0; k < n; k++)
            if (strcmp(cols[k], "expected") == 0)
                expected = vals[k];
        ck_assert_ptr_nonnull(expected);
        for (int arm = 0; arm < 2; arm++) {
            /* The prompt of this arm on this case: {{column}} replaced. */
            char text[1024];
            snprintf(text, sizeof(text), "%s", prompts[arm]);
            for (size_t k = 0; k < n; k++) {
                char ph[80];
                snprintf(ph, sizeof(ph), "{{%s}}", cols[k]);
                char *at;
                while ((at = strstr(text, ph)) != NULL) {
                    char rest[1024];
                    snprintf(rest, sizeof(rest), "%s", at + strlen(ph));
                    snprintf(at, sizeof(text) - (size_t)(at - text), "%s%s", vals[k], rest);
                }
            }
            ck_assert_msg(strstr(text, "{{") == NULL, "%s", text);
            bool is_right = (arm == 1) == (strcmp(right, "treatment") == 0);
            char reply[300];
            snprintf(reply, sizeof(reply), is_right ? "%s" : "It might be %s, or not.", expected);
            json_array_append_new(rules, json_pack("{s:{s:s},s:{s:s}}", "when", "prompt_contains",
                                                   text, "reply", "text", reply));
        }
    }
    json_t *script = json_pack("{s:o}", "rules", rules);
    char *text = json_dumps(script, JSON_COMPACT);
    json_decref(script);
    free(csv);
    cli_doc_free(&d);
    return text;
}

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    snprintf(root, sizeof(root), "/tmp/evald-ci-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(ws, sizeof(ws), "%s/work", root);
    snprintf(tmp, sizeof(tmp), "%s/runner-temp", root);
    ck_assert_int_eq(mkdir(ws, 0755), 0);
    ck_assert_int_eq(mkdir(tmp, 0755), 0);
    read_page();
    for (size_t i = 0; i < nfiles; i++) {
        char *path = NULL;
        ck_assert_int_gt(asprintf(&path, "%s/%s", ws, files[i].path), 0);
        write_file(path, files[i].text);
        free(path);
    }
}

static void teardown(void)
{
    evd_t_stop(&stub, SIGTERM, 5000);
    evd_t_db_drop(db_name);
    for (size_t i = 0; i < nfiles; i++)
        free(files[i].text);
    nfiles = 0;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    ck_assert_int_eq(system(cmd), 0);
}

/* Replaces ${{ secrets.NAME }} by a dummy; any other expression fails the test. */
static char *expand(const char *s, const char *where)
{
    char *out = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&out, &len);
    for (const char *p = s; *p;) {
        const char *e = strstr(p, "${{");
        if (e == NULL) {
            fputs(p, m);
            break;
        }
        fwrite(p, 1, (size_t)(e - p), m);
        const char *end = strstr(e, "}}");
        ck_assert_msg(end != NULL, "%s: an expression that does not end", where);
        char expr[200];
        snprintf(expr, sizeof(expr), "%.*s", (int)(end - e - 3), e + 3);
        char name[100];
        ck_assert_msg(sscanf(expr, " secrets.%99[A-Za-z0-9_] ", name) == 1,
                      "%s: the test knows no value of ${{%s}}", where, expr);
        fputs("dummy-secret", m);
        p = end + 2;
    }
    fclose(m);
    return out;
}

struct step_result {
    char name[128];
    int code;     /* exit status; -1 when not run */
    bool skipped; /* not run: an action, the build, or its `if:` */
    char log[300];
    char summary[300];
};

struct job_result {
    struct step_result steps[MAX_STEPS];
    size_t n;
    bool failed;
};

/* The environment of a step: the runner's, the job's (with the replacements), the step's. */
static char **step_env(const json_t *job, const json_t *step, const char *summary, unsigned port)
{
    static char *env[64];
    static char store[64][2400];
    size_t n = 0;
    const char *bin = getenv("EVALD_BIN"), *cli = getenv("EVALD_CLI_BIN");
    ck_assert_msg(bin != NULL && cli != NULL, "EVALD_BIN and EVALD_CLI_BIN are not set (ctest "
                                              "sets them)");
    char bindir[512], clidir[512];
    snprintf(bindir, sizeof(bindir), "%s", bin);
    snprintf(clidir, sizeof(clidir), "%s", cli);
    *strrchr(bindir, '/') = '\0';
    *strrchr(clidir, '/') = '\0';
#define PUT(...) (snprintf(store[n], sizeof(store[n]), __VA_ARGS__), env[n] = store[n], n++)
    PUT("PATH=%s:%s:/usr/local/bin:/usr/bin:/bin", bindir, clidir);
    PUT("HOME=%s", root);
    PUT("LANG=C.UTF-8");
    PUT("CI=true");
    PUT("GITHUB_ACTIONS=true");
    PUT("GITHUB_WORKSPACE=%s", ws);
    PUT("RUNNER_TEMP=%s", tmp);
    PUT("GITHUB_STEP_SUMMARY=%s", summary);
    PUT("GITHUB_OUTPUT=%s/output", tmp);
    PUT("GITHUB_ENV=%s/env", tmp);
    /* OpenAI is the stub (the workflow leaves the provider's address at its default). */
    PUT("OPENAI_BASE_URL=%s/v1", stub.base);
    const json_t *layers[2] = {json_object_get(job, "env"), json_object_get(step, "env")};
    for (int l = 0; l < 2; l++) {
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)layers[l], key, v)
        {
            char text[1200];
            if (json_is_string(v))
                snprintf(text, sizeof(text), "%s", json_string_value(v));
            else
                snprintf(text, sizeof(text), "%lld", (long long)json_integer_value(v));
            /* The service and the port of this machine instead of the runner's. */
            if (strcmp(key, "EVALD_DATABASE_URL") == 0)
                snprintf(text, sizeof(text), "%s", db_url);
            else if (strcmp(key, "EVALD_LISTEN") == 0)
                snprintf(text, sizeof(text), "127.0.0.1:%u", port);
            else if (strcmp(key, "EVALD_URL") == 0)
                snprintf(text, sizeof(text), "http://127.0.0.1:%u", port);
            char *x = expand(text, key);
            ck_assert_uint_lt(n, 63);
            PUT("%s=%s", key, x);
            free(x);
        }
    }
#undef PUT
    env[n] = NULL;
    return env;
}

/* Runs the job's steps as a runner would; evald, started by a step, is stopped after. */
static void run_job(struct job_result *res)
{
    memset(res, 0, sizeof(*res));
    json_t *w = workflow();
    json_t *job = the_job(w);
    const json_t *env = json_object_get(job, "env");
    ck_assert_str_eq(json_string_value(json_object_get(env, "EVALD_LISTEN")), "127.0.0.1:8080");
    ck_assert_str_eq(json_string_value(json_object_get(env, "EVALD_URL")), "http://127.0.0.1:8080");
    ck_assert_ptr_nonnull(json_object_get(env, "EVALD_DATABASE_URL"));
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(job, "defaults"), "run"), "shell")),
                     "bash");
    unsigned port = evd_t_free_port();
    const json_t *steps = json_object_get(job, "steps");
    ck_assert_uint_le(json_array_size(steps), MAX_STEPS);

    /* One session for every step: what they leave running ends with the job. */
    pid_t runner = fork();
    ck_assert_int_ge(runner, 0);
    if (runner == 0) {
        setsid();
        bool failed = false;
        size_t i;
        const json_t *step;
        json_array_foreach(steps, i, step)
        {
            const char *cond = json_string_value(json_object_get(step, "if"));
            const char *run = json_string_value(json_object_get(step, "run"));
            const char *id = json_string_value(json_object_get(step, "id"));
            bool go = cond == NULL || strcmp(cond, "success()") == 0 ? !failed
                      : strcmp(cond, "always()") == 0                ? true
                      : strcmp(cond, "failure()") == 0               ? failed
                                                                     : (_exit(90), false);
            char summary[300], log[300], script[300], code_path[300];
            snprintf(summary, sizeof(summary), "%s/summary-%zu.md", tmp, i);
            snprintf(log, sizeof(log), "%s/step-%zu.log", tmp, i);
            snprintf(script, sizeof(script), "%s/step-%zu.sh", tmp, i);
            snprintf(code_path, sizeof(code_path), "%s/step-%zu.code", tmp, i);
            if (!go || run == NULL || (id != NULL && strcmp(id, "install-evald") == 0))
                continue;
            char *text = expand(run, "run");
            write_file(script, text);
            free(text);
            write_file(summary, "");
            char **envp = step_env(job, step, summary, port);
            pid_t pid = fork();
            if (pid == 0) {
                if (chdir(ws) != 0)
                    _exit(91);
                int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
                int in = open("/dev/null", O_RDONLY);
                dup2(in, 0);
                dup2(fd, 1);
                dup2(fd, 2);
                execle("/bin/bash", "bash", "--noprofile", "--norc", "-eo", "pipefail", script,
                       (char *)NULL, envp);
                _exit(127);
            }
            int status = 0;
            waitpid(pid, &status, 0);
            int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            char num[16];
            snprintf(num, sizeof(num), "%d", code);
            write_file(code_path, num);
            failed |= code != 0;
        }
        _exit(0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(runner, &status, 0), runner);
    /* The job is over: end what its steps started (evald), by the session's group. */
    if (kill(-runner, SIGTERM) == 0) {
        for (int t = 0; t < 100 && kill(-runner, 0) == 0; t++)
            usleep(100000);
        kill(-runner, SIGKILL);
    }
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the runner stopped (%d): an `if:` the test does not know?", status);

    size_t i;
    const json_t *step;
    json_array_foreach(steps, i, step)
    {
        struct step_result *s = &res->steps[res->n++];
        const char *name = json_string_value(json_object_get(step, "name"));
        const char *uses = json_string_value(json_object_get(step, "uses"));
        snprintf(s->name, sizeof(s->name), "%s", name ? name : uses ? uses : "?");
        snprintf(s->log, sizeof(s->log), "%s/step-%zu.log", tmp, i);
        snprintf(s->summary, sizeof(s->summary), "%s/summary-%zu.md", tmp, i);
        char code_path[300];
        snprintf(code_path, sizeof(code_path), "%s/step-%zu.code", tmp, i);
        FILE *f = fopen(code_path, "r");
        s->code = -1;
        s->skipped = f == NULL;
        if (f != NULL) {
            ck_assert_int_eq(fscanf(f, "%d", &s->code), 1);
            fclose(f);
            res->failed |= s->code != 0;
        }
        /* An upload the runner would do: its file must be there. */
        if (uses != NULL && strncmp(uses, "actions/upload-artifact@", 24) == 0) {
            const char *cond = json_string_value(json_object_get(step, "if"));
            if (!res->failed || (cond != NULL && strcmp(cond, "always()") == 0)) {
                char *p = NULL;
                ck_assert_int_gt(asprintf(&p, "%s/%s", ws,
                                          json_string_value(json_object_get(
                                              json_object_get(step, "with"), "path"))),
                                 0);
                ck_assert_msg(access(p, R_OK) == 0, "%s: the artifact %s is missing", s->name, p);
                free(p);
            }
        }
    }
    json_decref(w);
}

static const struct step_result *step_named(const struct job_result *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->steps[i].name, name) == 0)
            return &r->steps[i];
    ck_abort_msg("the workflow has no step %s", name);
    return NULL;
}

static void assert_ran(const struct job_result *r, const char *name, int code)
{
    const struct step_result *s = step_named(r, name);
    char *log = s->skipped ? strdup("(not run)") : slurp(s->log);
    ck_assert_msg(s->code == code, "step %s exited %d, not %d:\n%s", name, s->code, code, log);
    free(log);
}

static void validate_junit(void)
{
    if (system("command -v xmllint >/dev/null 2>&1") != 0) {
        fprintf(stderr, "SKIPPED: JUnit schema check (xmllint is absent)\n");
        return;
    }
    char *cmd = NULL;
    ck_assert_int_gt(asprintf(&cmd, "xmllint --noout --schema %s/tests/cli/junit.xsd %s/%s",
                              evd_t_source_dir(), ws, "evald-junit.xml"),
                     0);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    free(cmd);
}

START_TEST(a_better_treatment_passes_the_job)
{
    char *script = script_for("treatment");
    ck_assert_int_eq(evd_t_stub_script(&stub, script), 200);
    free(script);
    struct job_result r;
    run_job(&r);
    assert_ran(&r, "Start evald", 0);
    assert_ran(&r, "Run the experiment", 0);
    ck_assert(!r.failed);
    char *summary = slurp(step_named(&r, "Run the experiment")->summary);
    ck_assert_msg(strstr(summary, "### evald experiment exp_") != NULL, "%s", summary);
    ck_assert_msg(strstr(summary, "| treatment | verdict | Δ pass rate | interval |") != NULL, "%s",
                  summary);
    /* 4 cases, the treatment right on all: +1 with no spread. */
    ck_assert_msg(strstr(summary, "\n| one-word | ✅ better | +1.000 | [+1.000, +1.000] | 0.000 |"),
                  "%s", summary);
    free(summary);
    validate_junit();
    char *xml = NULL, *p = NULL;
    ck_assert_int_gt(asprintf(&p, "%s/evald-junit.xml", ws), 0);
    xml = slurp(p);
    ck_assert_msg(strstr(xml, "<testsuite name=\"one-word vs current\" tests=\"4\" failures=\"0\""),
                  "%s", xml);
    free(xml);
    free(p);
}
END_TEST

START_TEST(a_worse_treatment_fails_the_job)
{
    char *script = script_for("control");
    ck_assert_int_eq(evd_t_stub_script(&stub, script), 200);
    free(script);
    struct job_result r;
    run_job(&r);
    assert_ran(&r, "Start evald", 0);
    assert_ran(&r, "Run the experiment", 1);
    char *log = slurp(step_named(&r, "Run the experiment")->log);
    ck_assert_msg(strstr(log, "\n::error title=evald%3A one-word is worse than current::") != NULL,
                  "%s", log);
    ck_assert_msg(strstr(log, "\n::warning title=evald%3A case capital regressed in one-word::"),
                  "%s", log);
    ck_assert_msg(strchr(log, '\r') == NULL && strchr(log, '\033') == NULL, "%s", log);
    free(log);
    char *summary = slurp(step_named(&r, "Run the experiment")->summary);
    ck_assert_msg(strstr(summary, "\n| one-word | ❌ worse | -1.000 | [-1.000, -1.000] | 0.000 |"),
                  "%s", summary);
    free(summary);
    validate_junit();
}
END_TEST

START_TEST(the_readme_lines_are_the_gate_step_and_the_mistake_is_as_shown)
{
    /* The README's two lines are the gate step's script. */
    json_t *w = workflow();
    const char *gate = NULL;
    size_t i;
    const json_t *step;
    json_array_foreach(json_object_get(the_job(w), "steps"), i, step)
    {
        const char *name = json_string_value(json_object_get(step, "name"));
        if (name != NULL && strcmp(name, "Run the experiment") == 0)
            gate = json_string_value(json_object_get(step, "run"));
    }
    ck_assert_ptr_nonnull(gate);
    char *path = NULL;
    ck_assert_int_gt(asprintf(&path, "%s/README.md", evd_t_source_dir()), 0);
    char *readme = slurp(path);
    free(path);
    char *block = NULL;
    ck_assert_int_gt(asprintf(&block, "\n```sh\n%s```\n", gate), 0);
    ck_assert_msg(strstr(readme, block) != NULL, "README.md lacks the gate step:%s", block);
    free(block);
    free(readme);
    json_decref(w);

    /* The page's example of a mistake is what evald-cli prints for it (no server needed:
     * the refusal comes from evald, so one is started on the stub). */
    char *bin = NULL;
    struct evd_t_proc evald;
    static char base[300];
    snprintf(base, sizeof(base), "OPENAI_BASE_URL=%s/v1", stub.base);
    char *env[] = {base, "OPENAI_API_KEY=dummy-secret", NULL};
    ck_assert_int_eq(evd_t_evald_start(&evald, db_url, env), 0);
    char *exp = NULL;
    ck_assert_int_gt(asprintf(&exp, "%s/prompts/experiment.yaml", ws), 0);
    char *text = slurp(exp);
    char *at = strstr(text, "{{question}}\"");
    ck_assert_ptr_nonnull(at);
    char *changed = NULL;
    ck_assert_int_gt(asprintf(&changed, "%.*s{{question}} {{topic}}%s", (int)(at - text), text,
                              at + strlen("{{question}}")),
                     0);
    write_file(exp, changed);
    char *out = NULL;
    ck_assert_int_gt(asprintf(&bin,
                              "cd %s && %s --url %s experiment run prompts/experiment.yaml "
                              "2>&1 >/dev/null",
                              ws, getenv("EVALD_CLI_BIN"), evald.base),
                     0);
    FILE *p = popen(bin, "r");
    char line[1024] = "";
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), p));
    int st = pclose(p);
    evd_t_stop(&evald, SIGTERM, 10000);
    ck_assert_int_eq(WEXITSTATUS(st), 2);
    line[strcspn(line, "\n")] = '\0';
    ck_assert_msg(strncmp(line, "evald-cli: ", 11) == 0, "%s", line);
    /* The page wraps lines: compare with its line ends as spaces. */
    ck_assert_int_gt(asprintf(&path, "%s/docs/ci.md", evd_t_source_dir()), 0);
    char *md = slurp(path);
    for (char *c = md; *c; c++)
        if (*c == '\n')
            *c = ' ';
    char *quoted = NULL;
    ck_assert_int_gt(asprintf(&quoted, "`%s`", line + 11), 0);
    ck_assert_msg(strstr(md, quoted) != NULL, "docs/ci.md does not show %s", quoted);
    free(quoted);
    free(md);
    free(path);
    free(out);
    free(bin);
    free(changed);
    free(text);
    free(exp);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ci_example");
    TCase *tc = tcase_create("ci_example");
    tcase_set_timeout(tc, 240);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_better_treatment_passes_the_job);
    tcase_add_test(tc, a_worse_treatment_fails_the_job);
    tcase_add_test(tc, the_readme_lines_are_the_gate_step_and_the_mistake_is_as_shown);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
