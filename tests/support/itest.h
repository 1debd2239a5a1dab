/*
 * Integration-test support: throwaway PostgreSQL databases, real child processes
 * (evald, evald-stub, private clusters) and a small libcurl HTTP client. Every
 * address is loopback. Not thread-safe unless stated; tests call it from one thread.
 */
#ifndef EVD_TESTS_ITEST_H
#define EVD_TESTS_ITEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Admin URL of the test PostgreSQL server (EVALD_TEST_DATABASE_URL, else
 * EVALD_DATABASE_URL). Aborts the test with a clear message when neither is set. */
const char *evd_t_pg_admin_url(void);

/* Creates an empty database; writes its conninfo into url (size n) and its name
 * into name (size >= 64). Returns 0 or aborts. */
void evd_t_db_create(char *url, size_t n, char *name);
/* Drops a database created above (terminating its connections). */
void evd_t_db_drop(const char *name);
/* Runs SQL on `url` and returns the first column of the first row as a new
 * malloc'd string ("" for no row, NULL on error). */
char *evd_t_sql(const char *url, const char *sql);

struct evd_t_proc {
    pid_t pid;
    char listen[128];   /* from the {"listen":"host:port"} ready line */
    char base[160];     /* "http://" + listen */
    char log_path[600]; /* stderr of the child */
};

/*
 * Starts `argv[0]` with `env` (NULL-terminated "K=V" strings added to the current
 * environment) and waits up to `timeout_ms` for its ready line on stdout. Returns
 * 0, or -1 when it exited or timed out (the child is killed). With want_ready
 * false, returns right after the fork.
 */
int evd_t_spawn(struct evd_t_proc *p, char *const argv[], char *const env[], bool want_ready,
                int timeout_ms);
/* Starts the evald binary (EVALD_BIN) against `db_url` on 127.0.0.1:0 with extra env. */
int evd_t_evald_start(struct evd_t_proc *p, const char *db_url, char *const extra_env[]);
/* Sends `sig` and waits up to timeout_ms; returns the exit status (128+signal when
 * killed by one), or -1 on timeout (then SIGKILLs). */
int evd_t_stop(struct evd_t_proc *p, int sig, int timeout_ms);
/* Waits for exit without signalling; as evd_t_stop. */
int evd_t_wait(struct evd_t_proc *p, int timeout_ms);
/* Prints the child's stderr log (for failing tests). */
void evd_t_dump_log(const struct evd_t_proc *p);

struct evd_t_resp {
    long status;
    char *body;            /* NUL-terminated, malloc'd */
    size_t len;
    char content_type[128];
    char request_id[80];
    char location[256];
    char headers[4096];    /* raw response headers */
};

/*
 * One HTTP request. `headers` is a NULL-terminated list of "Name: value" or NULL;
 * a non-NULL `body` is sent with Content-Type application/json unless a header
 * overrides it. Returns 0 (transport ok) or -1. Free with evd_t_resp_free.
 */
int evd_t_http(const char *method, const char *url, const char *const *headers,
               const char *body, size_t body_len, struct evd_t_resp *out);
/* Convenience: request + parse the JSON body (new reference, NULL when not JSON). */
json_t *evd_t_http_json(const char *method, const char *url, const char *body, long *status);
void evd_t_resp_free(struct evd_t_resp *r);

/* Polls `url` until it answers `want_status` or timeout_ms passes; true on success. */
bool evd_t_wait_status(const char *url, long want_status, int timeout_ms);

/* A free TCP port on 127.0.0.1 (racy by nature; good enough for tests). */
unsigned evd_t_free_port(void);

/* Path of the evald binary (EVALD_BIN); exits with a clear message when unset. */
const char *evd_t_evald_bin(void);

/* The source tree (EVALD_SOURCE_DIR). */
const char *evd_t_source_dir(void);

#endif

/* ---- helpers for suites that run evaluations ---- */

/* Starts evald-stub (EVALD_STUB_BIN) on a free loopback port with an optional script. */
int evd_t_stub_start(struct evd_t_proc *p, const char *script_json);
/* Replaces the stub's script (PUT /_stub/script); returns the HTTP status. */
long evd_t_stub_script(const struct evd_t_proc *stub, const char *script_json);

/*
 * Validates a function-mirror response against the seed contract's response schema
 * of `function` (../shared/spec/seed/eval-api-reference.json). Returns true when valid
 * or when ../shared is absent (then it notes the skip once); on failure prints the
 * errors and returns false.
 */
bool evd_t_valid_response(const char *function, const json_t *response);

/* POSTs `body` to /v1/functions/<function> on `base`; returns the JSON answer (new
 * reference) and asserts nothing; *status gets the HTTP status. */
json_t *evd_t_call(const char *base, const char *function, const char *body, long *status);

/*
 * Polls GET /v1/evaluations/{id}/status until the evaluation is terminal or timeout_ms
 * passes; returns the final status string (static buffer) or "timeout".
 */
const char *evd_t_wait_terminal(const char *base, const char *evaluation_id, int timeout_ms);
