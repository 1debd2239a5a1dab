/*
 * Integration-test support, the one place for it: throwaway PostgreSQL databases, real
 * child processes (evald, evald-stub, private clusters) started and stopped around their
 * {"listen":...} ready line, the stub's control endpoints, and a small libcurl HTTP client
 * that also records exchanges with evald for the contract check. Every address is loopback.
 * The HTTP calls are thread-safe (one easy handle per call); the rest is meant for one
 * thread. A proc or response struct belongs to its caller.
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
/* How many lines of the child's stderr log hold `text` (0 when there is no log). */
int evd_t_log_count(const struct evd_t_proc *p, const char *text);

struct evd_t_resp {
    int curl_code; /* CURLcode: 0, or e.g. 28 (timeout), 18 (partial body), 7 (refused) */
    long status;   /* HTTP status, 0 when none was received */
    char *body;    /* NUL-terminated received body (possibly partial), malloc'd, never NULL */
    size_t len;
    char *headers;   /* raw received header block, malloc'd, never NULL */
    json_t *json;    /* the body parsed when it is a JSON object or array (new reference
                      * owned by the struct), else NULL */
    long elapsed_ms; /* wall time of the request */
    char content_type[128];
    char request_id[80];
    char location[256];
};

/*
 * One HTTP request. `headers` is a NULL-terminated list of "Name: value" or NULL;
 * a non-NULL `body` is sent with Content-Type application/json unless a header
 * overrides it. Times out after 60 s. Always fills *out (free it with evd_t_resp_free);
 * returns 0 when the exchange completed, else -1 (out->curl_code says why).
 */
int evd_t_http(const char *method, const char *url, const char *const *headers, const char *body,
               size_t body_len, struct evd_t_resp *out);
/* As evd_t_http with a whole-request timeout of timeout_ms (0 means 60 s). */
int evd_t_http_timed(const char *method, const char *url, const char *const *headers,
                     const char *body, size_t body_len, long timeout_ms, struct evd_t_resp *out);
/* Convenience: request + parse the JSON body (new reference, NULL when not JSON). */
json_t *evd_t_http_json(const char *method, const char *url, const char *body, long *status);
/* Copies the value of response header `name` (case-insensitive; the last one when
 * repeated) into out (size n); false, with out empty, when it is absent. */
bool evd_t_resp_header(const struct evd_t_resp *r, const char *name, char *out, size_t n);
/* Frees what the response owns; status and curl_code stay readable. */
void evd_t_resp_free(struct evd_t_resp *r);

/* Polls `url` until it answers `want_status` or timeout_ms passes; true on success. */
bool evd_t_wait_status(const char *url, long want_status, int timeout_ms);

/* A free TCP port on 127.0.0.1 (racy by nature; good enough for tests). */
unsigned evd_t_free_port(void);

/* Path of the evald binary (EVALD_BIN); exits with a clear message when unset. */
const char *evd_t_evald_bin(void);

/* The source tree (EVALD_SOURCE_DIR). */
const char *evd_t_source_dir(void);

/* Has a private PostgreSQL cluster under `dir` (a test's own folder) stopped and the folder
 * removed once this process has ended, however it ends, if the folder is still there: a
 * test that fails between starting its cluster and removing it leaves nothing running.
 * (Check ends a failed test's process with _exit, so atexit would not run, and kills its
 * process group.) A small process of a session of its own waits for that end on a pipe
 * only this process holds. */
void evd_t_pg_cleanup_at_exit(const char *dir);

/* ---- helpers for suites that run evaluations ---- */

/*
 * Starts evald-stub (EVALD_STUB_BIN) on 127.0.0.1:0 with an optional script (written to
 * a temporary file passed with --script and removed once the stub is ready) and an
 * optional key it then requires of every provider call (EVALD_STUB_REQUIRE_KEY). Returns
 * 0, or -1 with a reason on stderr (the binary is missing, or the stub exited or stayed
 * silent: then p->pid is 0).
 */
int evd_t_stub_start(struct evd_t_proc *p, const char *script_json, const char *require_key);
/* The value of a counter without labels on evald's /metrics at base (0 when absent). */
long evd_t_metric(const char *base, const char *name);
/* Replaces the stub's script (PUT /_stub/script); returns the HTTP status and prints
 * the stub's answer on stderr when it is not 200. */
long evd_t_stub_script(const struct evd_t_proc *stub, const char *script_json);
/* Clears the stub's request log and counters (POST /_stub/reset); returns the status. */
long evd_t_stub_reset(const struct evd_t_proc *stub);
/* GET /_stub/requests?limit=N (limit <= 0: the stub's default) and GET /_stub/stats:
 * new references, NULL unless the stub answered 200 with a JSON object. */
json_t *evd_t_stub_requests(const struct evd_t_proc *stub, int limit);
json_t *evd_t_stub_stats(const struct evd_t_proc *stub);

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
/* POST /v1/experiments of `body` (stolen) on base, which must answer 202; the experiment's
 * id (static buffer, until the next call). */
const char *evd_t_start_experiment(const char *base, json_t *body);
/* Polls GET /v1/experiments/{id} on base until the experiment is neither queued nor
 * running; its document (new reference). Fails the test after timeout_ms. */
json_t *evd_t_wait_experiment(const char *base, const char *id, int timeout_ms);

#endif
