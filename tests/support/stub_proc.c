/* Child-process helper for tests; see stub_proc.h. */
#include "tests/support/stub_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

extern char **environ;

#define READY_LINE_MAX 4096

/* environ without the names that `extra` sets, then `extra`; new array of borrowed strings. */
static char **merged_env(char *const extra[])
{
    size_t n = 0, m = 0;
    while (environ[n] != NULL)
        n++;
    while (extra != NULL && extra[m] != NULL)
        m++;
    char **envp = calloc(n + m + 1, sizeof(char *));
    if (envp == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool overridden = false;
        for (size_t j = 0; j < m && !overridden; j++) {
            size_t len = strcspn(extra[j], "=");
            overridden = strncmp(environ[i], extra[j], len) == 0 && environ[i][len] == '=';
        }
        if (!overridden)
            envp[k++] = environ[i];
    }
    for (size_t j = 0; j < m; j++)
        envp[k++] = extra[j];
    return envp;
}

static int read_ready(struct evd_test_proc *p, int timeout_ms)
{
    char line[READY_LINE_MAX];
    size_t len = 0;
    int64_t deadline = evd_mono_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - evd_mono_ms();
        if (left <= 0) {
            fprintf(stderr, "stub_proc: no ready line within %d ms\n", timeout_ms);
            return -1;
        }
        struct pollfd pfd = {.fd = p->out_fd, .events = POLLIN};
        int n = poll(&pfd, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            continue;
        ssize_t got = read(p->out_fd, line + len, 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            fprintf(stderr, "stub_proc: the child closed stdout before its ready line\n");
            return -1;
        }
        if (line[len] == '\n')
            break;
        if (++len >= sizeof(line) - 1) {
            fprintf(stderr, "stub_proc: ready line too long\n");
            return -1;
        }
    }
    line[len] = '\0';
    json_error_t jerr;
    p->ready = json_loads(line, 0, &jerr);
    if (!json_is_object(p->ready)) {
        fprintf(stderr, "stub_proc: ready line is not a JSON object: %s\n", line);
        return -1;
    }
    const char *listen = json_string_value(json_object_get(p->ready, "listen"));
    if (listen != NULL)
        snprintf(p->base_url, sizeof(p->base_url), "http://%s", listen);
    return 0;
}

int evd_test_proc_spawn(struct evd_test_proc *p, char *const argv[], char *const env[],
                        int timeout_ms)
{
    memset(p, 0, sizeof(*p));
    p->out_fd = -1;
    int pipefd[2];
    if (pipe(pipefd) != 0) {
        perror("stub_proc: pipe");
        return -1;
    }
    fcntl(pipefd[0], F_SETFD, FD_CLOEXEC);
    fcntl(pipefd[1], F_SETFD, FD_CLOEXEC);
    char **envp = merged_env(env);
    bool quiet = getenv("EVALD_TEST_QUIET") != NULL;
    if (envp == NULL) {
        close(pipefd[0]);
        close(pipefd[1]);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("stub_proc: fork");
        free(envp);
        close(pipefd[0]);
        close(pipefd[1]);
        return -1;
    }
    if (pid == 0) {
        /* Child: only async-signal-safe calls until exec. */
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, STDIN_FILENO);
            if (quiet)
                dup2(devnull, STDERR_FILENO);
        }
        dup2(pipefd[1], STDOUT_FILENO);
        execve(argv[0], argv, envp);
        _exit(127);
    }
    free(envp);
    close(pipefd[1]);
    p->pid = pid;
    p->out_fd = pipefd[0];
    if (read_ready(p, timeout_ms) != 0) {
        evd_test_proc_stop(p, 2000);
        return -1;
    }
    return 0;
}

static int decode(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return -1;
}

static void release(struct evd_test_proc *p)
{
    if (p->out_fd >= 0)
        close(p->out_fd);
    p->out_fd = -1;
    json_decref(p->ready);
    p->ready = NULL;
    p->pid = 0;
}

int evd_test_proc_wait(struct evd_test_proc *p, int timeout_ms)
{
    if (p->pid <= 0)
        return -1;
    int64_t deadline = evd_mono_ms() + timeout_ms;
    for (;;) {
        int status = 0;
        pid_t w = waitpid(p->pid, &status, WNOHANG);
        if (w == p->pid) {
            release(p);
            return decode(status);
        }
        if (w < 0 && errno != EINTR) {
            release(p);
            return -1;
        }
        if (evd_mono_ms() >= deadline)
            return -2;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int evd_test_proc_stop(struct evd_test_proc *p, int timeout_ms)
{
    if (p->pid <= 0) {
        release(p);
        return -1;
    }
    kill(p->pid, SIGTERM);
    int rc = evd_test_proc_wait(p, timeout_ms);
    if (rc != -2)
        return rc;
    fprintf(stderr, "stub_proc: pid %d ignored SIGTERM for %d ms; killing it\n", (int)p->pid,
            timeout_ms);
    kill(p->pid, SIGKILL);
    int status = 0;
    while (waitpid(p->pid, &status, 0) < 0 && errno == EINTR)
        ;
    release(p);
    return decode(status);
}

int evd_test_stub_start(struct evd_test_proc *p, const char *script_json, const char *require_key)
{
    memset(p, 0, sizeof(*p));
    p->out_fd = -1;
    const char *bin = getenv("EVALD_STUB_BIN");
    if (bin == NULL || bin[0] == '\0') {
        fprintf(stderr, "stub_proc: EVALD_STUB_BIN is not set (run the test through ctest)\n");
        return -1;
    }
    char path[] = "/tmp/evald-stub-script-XXXXXX";
    int fd = -1;
    if (script_json != NULL) {
        fd = mkstemp(path);
        size_t len = strlen(script_json);
        if (fd < 0 || write(fd, script_json, len) != (ssize_t)len) {
            perror("stub_proc: script file");
            if (fd >= 0) {
                close(fd);
                unlink(path);
            }
            return -1;
        }
        close(fd);
    }
    char key_env[512];
    char *env[3] = {NULL};
    size_t e = 0;
    env[e++] = "EVALD_STUB_LISTEN=127.0.0.1:0";
    if (require_key != NULL) {
        snprintf(key_env, sizeof(key_env), "EVALD_STUB_REQUIRE_KEY=%s", require_key);
        env[e++] = key_env;
    }
    char *argv[4] = {(char *)bin, NULL, NULL, NULL};
    if (script_json != NULL) {
        argv[1] = "--script";
        argv[2] = path;
    }
    int rc = evd_test_proc_spawn(p, argv, env, 10000);
    if (script_json != NULL)
        unlink(path); /* read before the ready line */
    if (rc == 0 && p->base_url[0] == '\0') {
        fprintf(stderr, "stub_proc: the ready line has no \"listen\"\n");
        evd_test_proc_stop(p, 2000);
        return -1;
    }
    return rc;
}
