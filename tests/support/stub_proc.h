/*
 * Test helper: run a server binary (evald-stub, evald, …) as a child process that
 * announces readiness with one JSON object line on stdout, then stop it. A proc struct
 * belongs to one test; the child is always reaped by evd_test_proc_stop (call it in the
 * teardown even after a failed spawn: it is a no-op then). Not thread-safe per struct.
 *
 * Typical use:
 *     struct evd_test_proc p;
 *     char *argv[] = {bin, "--listen", "127.0.0.1:0", NULL};
 *     ck_assert_int_eq(evd_test_proc_spawn(&p, argv, NULL, 10000), 0);
 *     const char *addr = json_string_value(json_object_get(p.ready, "listen"));
 *     ...
 *     ck_assert_int_eq(evd_test_proc_stop(&p, 5000), 0);   // exit status 0
 */
#ifndef EVD_TESTS_STUB_PROC_H
#define EVD_TESTS_STUB_PROC_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

struct evd_test_proc {
    pid_t pid;          /* 0 when not running */
    int out_fd;         /* read end of the child's stdout, -1 when closed */
    json_t *ready;      /* the ready line (new reference owned by the struct), or NULL */
    char base_url[160]; /* "http://" + ready.listen when the line has "listen" */
};

/*
 * Starts argv[0] (a path) with argv, the current environment plus `env` ("NAME=value"
 * strings, NULL-terminated; may be NULL), stdin from /dev/null, stderr inherited (or
 * /dev/null when EVALD_TEST_QUIET is set). Waits up to timeout_ms for the first stdout
 * line and parses it as a JSON object. Returns 0; or -1 with a reason on stderr (the
 * child is stopped and reaped then).
 */
int evd_test_proc_spawn(struct evd_test_proc *p, char *const argv[], char *const env[],
                        int timeout_ms);

/*
 * Sends SIGTERM, waits up to timeout_ms, then SIGKILLs. Returns the exit status
 * (0..255), 128 + signal number when killed by a signal, or -1 when nothing ran.
 * Frees the ready line and closes the pipe.
 */
int evd_test_proc_stop(struct evd_test_proc *p, int timeout_ms);

/* Waits up to timeout_ms for the child to exit by itself; same result as stop, or -2
 * when it is still running (it is left running). */
int evd_test_proc_wait(struct evd_test_proc *p, int timeout_ms);

/*
 * Starts the evald-stub named by env EVALD_STUB_BIN on 127.0.0.1:0 with optional
 * `script_json` (written to a temporary file passed with --script) and `require_key`
 * (passed in EVALD_STUB_REQUIRE_KEY). Returns 0 with p->base_url set, or -1.
 */
int evd_test_stub_start(struct evd_test_proc *p, const char *script_json, const char *require_key);

#endif
