/* See cli_experiment_fixtures.h. */
#define _GNU_SOURCE /* asprintf, mkdtemp */
#include "tests/support/cli_experiment_fixtures.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The longest a command of these tests may take (the slowest takes about 10 s). */
#define CHILD_LIMIT_S 120

/* The script of cli_experiment_fixtures.h. */
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

char ct_db_url[1024];
static char db_name[64];
struct evd_t_proc ct_stub, ct_evald;
char ct_dir[64];

void ct_setup(void)
{
    evd_t_db_create(ct_db_url, sizeof(ct_db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&ct_stub, SCRIPT, NULL), 0);
    static char base[300];
    snprintf(base, sizeof(base), "OPENAI_BASE_URL=%s/v1", ct_stub.base);
    char *env[] = {base, "OPENAI_API_KEY=stub-key", NULL};
    ck_assert_int_eq(evd_t_evald_start(&ct_evald, ct_db_url, env), 0);
    snprintf(ct_dir, sizeof(ct_dir), "/tmp/evald-cli-exp-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(ct_dir));
}

void ct_teardown(void)
{
    evd_t_stop(&ct_evald, SIGTERM, 10000);
    evd_t_stop(&ct_stub, SIGTERM, 5000);
    evd_t_db_drop(db_name);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", ct_dir);
    ck_assert_int_eq(system(cmd), 0);
}

const char *ct_cli_bin(void)
{
    const char *b = getenv("EVALD_CLI_BIN");
    ck_assert_msg(b != NULL, "EVALD_CLI_BIN is not set (ctest sets it)");
    return b;
}

char *ct_in_dir(const char *name)
{
    char *path = NULL;
    ck_assert_int_gt(asprintf(&path, "%s/%s", ct_dir, name), 0);
    return path;
}

char *ct_file_in_dir(const char *name, const char *text)
{
    char *path = ct_in_dir(name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

void ct_spawn(char *const argv[], struct child *c)
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

bool ct_collect(struct child *c, struct ran *r, const char *until)
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
            evd_t_dump_log(&ct_evald);
            static char rows[1024];
            char *db =
                evd_t_sql(ct_db_url, "SELECT string_agg(id || ' ' || status, ', ') || '; jobs "
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

void ct_run(char *const argv[], struct ran *r)
{
    memset(r, 0, sizeof(*r));
    struct child c;
    ct_spawn(argv, &c);
    ct_collect(&c, r, NULL);
}

void ct_assert_plain(const struct ran *r)
{
    ck_assert_msg(strchr(r->out, '\r') == NULL && strchr(r->out, '\033') == NULL, "%s", r->out);
    ck_assert_msg(strchr(r->err, '\r') == NULL && strchr(r->err, '\033') == NULL, "%s", r->err);
}

const char *ct_started_id(const struct ran *r)
{
    static char id[64];
    const char *p = strstr(r->err, "evald-cli: experiment exp_");
    ck_assert_msg(p != NULL, "%s", r->err);
    ck_assert_int_eq(sscanf(p, "evald-cli: experiment %40s started", id), 1);
    ck_assert_uint_eq(strlen(id), 36);
    return id;
}

json_t *ct_get(const char *path)
{
    char url[512];
    snprintf(url, sizeof(url), "%s%s", ct_evald.base, path);
    long status = 0;
    json_t *v = evd_t_http_json("GET", url, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_ptr_nonnull(v);
    return v;
}

char *ct_status_of(const char *id)
{
    char path[128];
    snprintf(path, sizeof(path), "/v1/experiments/%s", id);
    json_t *e = ct_get(path);
    char *s = strdup(json_string_value(json_object_get(e, "status")));
    json_decref(e);
    return s;
}

void ct_wait_status(const char *id, const char *want)
{
    char *s = NULL;
    for (int i = 0; i < 200; i++) {
        free(s);
        s = ct_status_of(id);
        if (strcmp(s, want) == 0)
            break;
        usleep(100000);
    }
    ck_assert_str_eq(s, want);
    free(s);
}

const char ct_cases_csv[] = "id,question,expected\n"
                            "q1,q1: one?,yes\n"
                            "q2,q2: two?,yes\n"
                            "q3,q3: three?,yes\n";

/* A YAML experiment over a dataset file next to it; the %s are the control's and the
 * treatment's markers, the dataset and repeats. Line 4 is the control, line 7 the dataset,
 * line 11 repeats. */
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

char *ct_yaml_file(const char *name, const char *control, const char *treatment,
                   const char *dataset, const char *repeats)
{
    char *text = NULL;
    ck_assert_int_gt(asprintf(&text, YAML_FMT, control, treatment, dataset, repeats), 0);
    char *path = ct_file_in_dir(name, text);
    free(text);
    return path;
}

const char ct_two_treatments_json[] =
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
