/*
 * The real evald-cli against a real evald, evald-stub and PostgreSQL over loopback: the
 * exit codes (0, 1, 2 with the file and line of a refusal, 4 for a dead server within
 * its timeout), dataset uploads, the progress view as plain lines in a pipe and redrawn
 * in a pseudo-terminal (script(1)), --detach, and global options after the command.
 * Experiment commands are tested with experiments (tests/integration/test_cli_experiment*).
 */
#define _GNU_SOURCE /* asprintf */
#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static char db_url[1024];
static char db_name[64];
static struct evd_t_proc stub, evald;
static char dir[64];

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
    ck_assert_int_eq(evd_t_stub_start(&stub, NULL, NULL), 0);
    static char base[300];
    snprintf(base, sizeof(base), "OPENAI_BASE_URL=%s/v1", stub.base);
    char *env[] = {base, "OPENAI_API_KEY=stub-key", NULL};
    ck_assert_int_eq(evd_t_evald_start(&evald, db_url, env), 0);
    snprintf(dir, sizeof(dir), "/tmp/evald-cli-XXXXXX");
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

static char *file_in_dir(const char *name, const char *text)
{
    char *path = NULL;
    ck_assert_int_gt(asprintf(&path, "%s/%s", dir, name), 0);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

struct ran {
    int code;
    char out[65536], err[16384];
    double seconds;
};

/* Runs argv (NULL-terminated) with stdout and stderr captured, up to 60 s. */
static void run(char *const argv[], struct ran *r)
{
    memset(r, 0, sizeof(*r));
    int po[2], pe[2];
    ck_assert_int_eq(pipe(po), 0);
    ck_assert_int_eq(pipe(pe), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
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
    size_t no = 0, ne = 0;
    struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    int open_fds = 2;
    while (open_fds > 0) {
        ck_assert_int_gt(poll(fds, 2, 60000), 0);
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
                open_fds--;
            } else if (room > 0) {
                *(i == 0 ? &no : &ne) += (size_t)n;
            }
        }
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    r->code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static const char EVAL_YAML[] = "# the README's question, as YAML\n"
                                "dimension: prompt\n"
                                "model: {model: stub-model, provider: openai}\n"
                                "control:   {label: reply,  prompt: Reply with exactly OK.}\n"
                                "treatment: {label: return, prompt: Return exactly the text OK.}\n"
                                "evaluator:\n"
                                "  function_id: eval::assert::normalized_text\n"
                                "  arguments: {expected: OK}\n"
                                "runs: %s\n";

static char *eval_file(const char *runs)
{
    char *text = NULL;
    ck_assert_int_gt(asprintf(&text, EVAL_YAML, runs), 0);
    char *path = file_in_dir("eval.yaml", text);
    free(text);
    return path;
}

START_TEST(a_worse_treatment_exits_1_with_plain_progress_in_a_pipe)
{
    char *path = eval_file("2");
    struct ran r;
    /* Global options after the command. */
    char *argv[] = {(char *)cli_bin(), "eval", "start", path, "--url", evald.base, NULL};
    run(argv, &r);
    ck_assert_msg(r.code == 1, "exit %d\nstdout: %s\nstderr: %s", r.code, r.out, r.err);
    ck_assert_msg(strchr(r.out, '\r') == NULL && strchr(r.out, '\033') == NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "runs 4/4, passed 2 (50.0%)") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, " completed: pass rate 1 -> 0 (delta -1), eligible no\n"), "%s",
                  r.out);
    ck_assert_ptr_nonnull(strstr(r.err, "evald-cli: evaluation eval_"));
    free(path);
}
END_TEST

START_TEST(a_mistake_in_a_yaml_file_is_named_by_its_line)
{
    char *path = eval_file("0");
    struct ran r;
    char *argv[] = {(char *)cli_bin(), "--url", evald.base, "eval", "start", path, NULL};
    run(argv, &r);
    ck_assert_int_eq(r.code, 2);
    char want[512];
    snprintf(want, sizeof(want), "evald-cli: %s:9: runs must be between 1 and 100\n", path);
    ck_assert_str_eq(r.err, want);
    char *count = evd_t_sql(db_url, "SELECT count(*) FROM evaluations");
    ck_assert_str_eq(count, "0");
    free(count);
    char *broken = file_in_dir("broken.yaml", "dimension: prompt\nmodel: {model: x\n");
    char *argv2[] = {(char *)cli_bin(), "--url", evald.base, "eval", "start", broken, NULL};
    run(argv2, &r);
    ck_assert_int_eq(r.code, 2);
    ck_assert_msg(strstr(r.err, "broken.yaml:3:1: ") != NULL, "%s", r.err);
    free(broken);
    free(path);
}
END_TEST

START_TEST(the_progress_line_is_redrawn_on_a_terminal)
{
    if (system("command -v script >/dev/null 2>&1") != 0) {
        fprintf(stderr, "SKIPPED: pseudo-terminal check (script from bsdutils is absent)\n");
        return;
    }
    char *path = eval_file("1");
    char *cmd = NULL;
    ck_assert_int_gt(asprintf(&cmd, "%s --url %s eval start %s", cli_bin(), evald.base, path), 0);
    struct ran r;
    char *argv[] = {"/usr/bin/script", "-qefc", cmd, "/dev/null", NULL};
    run(argv, &r);
    ck_assert_msg(r.code == 1, "exit %d: %s %s", r.code, r.out, r.err);
    ck_assert_msg(strstr(r.out, "\r\033[K\033[1mruns ") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "runs 2/2\033[0m  passed 1 (50.0%)") != NULL, "%s", r.out);
    free(cmd);
    free(path);
}
END_TEST

START_TEST(detach_prints_the_id_and_watch_follows_it)
{
    char *path = eval_file("1");
    struct ran r;
    char *argv[] = {(char *)cli_bin(), "--url", evald.base, "eval",
                    "start",           path,    "--detach", NULL};
    run(argv, &r);
    ck_assert_int_eq(r.code, 0);
    ck_assert_msg(strncmp(r.out, "eval_", 5) == 0 && strlen(r.out) == 38, "%s", r.out);
    r.out[37] = '\0';
    char id[64];
    snprintf(id, sizeof(id), "%.37s", r.out);
    char *argv2[] = {(char *)cli_bin(), "--url", evald.base, "eval", "watch", id, "--json", NULL};
    run(argv2, &r);
    ck_assert_int_eq(r.code, 1);
    ck_assert_ptr_nonnull(strstr(r.out, "\"evaluation_id\": \""));
    /* An unknown id is a 4xx: exit 2 with the answer. */
    char *argv3[] = {(char *)cli_bin(), "--url", evald.base, "eval", "watch", "eval_nope", NULL};
    run(argv3, &r);
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "answered 404"));
    free(path);
}
END_TEST

START_TEST(datasets_import_once_and_refusals_name_the_row)
{
    char *csv = file_in_dir("qa.csv", "id,question,expected\nq1,2+2?,4\nq2,3+3?,6\n");
    struct ran a, b;
    char *argv[] = {(char *)cli_bin(), "dataset", "import", csv, "--url", evald.base, NULL};
    run(argv, &a);
    ck_assert_msg(a.code == 0, "%s", a.err);
    ck_assert_msg(strncmp(a.out, "ds_", 3) == 0 && strstr(a.out, " 2 cases sha256 "), "%s", a.out);
    run(argv, &b);
    ck_assert_int_eq(b.code, 0);
    ck_assert_str_eq(a.out, b.out); /* content-addressed: the same dataset */
    char *bad = file_in_dir("bad.csv", "id,question\nq1,a\nq1,b\n");
    char *argv2[] = {(char *)cli_bin(), "--url", evald.base, "dataset", "import", bad, NULL};
    run(argv2, &a);
    ck_assert_int_eq(a.code, 2);
    char want[512];
    snprintf(want, sizeof(want), "evald-cli: %s: row 2: duplicate id q1\n", bad);
    ck_assert_str_eq(a.err, want);
    free(bad);
    free(csv);
}
END_TEST

/* Exits 4 within three timeouts: a start is tried again (with its Idempotency-Key) only
 * while the next attempt can end within three times --timeout of the first. */
START_TEST(a_dead_server_exits_4_within_three_timeouts)
{
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", evd_t_free_port());
    char *path = eval_file("1");
    struct ran r;
    char *argv[] = {(char *)cli_bin(), "--url", url, "--timeout", "2", "eval", "start", path, NULL};
    run(argv, &r);
    ck_assert_int_eq(r.code, 4);
    ck_assert_msg(strstr(r.err, "POST ") && strstr(r.err, "/v1/evaluations"), "%s", r.err);
    ck_assert_msg(r.seconds < 5, "took %.1f s", r.seconds);
    /* A server that takes the connection but never answers: the same, within the timeout. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(fd, 16), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
    run(argv, &r);
    close(fd);
    ck_assert_int_eq(r.code, 4);
    ck_assert_msg(strstr(r.err, "imeout") != NULL, "%s", r.err);
    /* Two attempts of 2 s, 1 s apart; a third could not end within 6 s. */
    ck_assert_msg(r.seconds >= 4.5 && r.seconds < 7, "took %.1f s", r.seconds);
    ck_assert_msg(strstr(r.err, "trying again in 1 s") && !strstr(r.err, "trying again in 2 s"),
                  "%s", r.err);
    free(path);
}
END_TEST

START_TEST(usage_errors_exit_2)
{
    struct ran r;
    char *argv[] = {(char *)cli_bin(), "experiment", "frobnicate", "x", NULL};
    run(argv, &r);
    ck_assert_int_eq(r.code, 2);
    char *argv2[] = {(char *)cli_bin(), "--timeout", "soon", "compare", "a", "b", NULL};
    run(argv2, &r);
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--timeout must be a number of seconds, not soon"));
    char *argv3[] = {(char *)cli_bin(), "--help", NULL};
    run(argv3, &r);
    ck_assert_int_eq(r.code, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "experiment run FILE"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli_run");
    TCase *tc = tcase_create("cli_run");
    tcase_set_timeout(tc, 180);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_worse_treatment_exits_1_with_plain_progress_in_a_pipe);
    tcase_add_test(tc, a_mistake_in_a_yaml_file_is_named_by_its_line);
    tcase_add_test(tc, the_progress_line_is_redrawn_on_a_terminal);
    tcase_add_test(tc, detach_prints_the_id_and_watch_follows_it);
    tcase_add_test(tc, datasets_import_once_and_refusals_name_the_row);
    tcase_add_test(tc, a_dead_server_exits_4_within_three_timeouts);
    tcase_add_test(tc, usage_errors_exit_2);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
