/*
 * The fixture of the `evald-cli experiment` suites (tests/integration/test_cli_experiment.c,
 * test_cli_experiment_errors.c and test_cli_experiment_plan.c): a throwaway PostgreSQL
 * database, evald-stub with the script below and evald per test, and a temporary folder for
 * the experiment files; the evald-cli binary (EVALD_CLI_BIN) run with its output captured;
 * experiment files; and reads of the experiments on evald. Names start with ct_ (CLI
 * tests); the two structs and the macros keep their short names, as only these suites
 * include this header. One test thread.
 *
 * The stub answers by the marker word of an arm's prompt, so every verdict of the suites
 * follows from the script: PASS answers "yes" (the expected answer of every case), FAIL
 * answers "no", MIXED answers "no" on case q1 only, and "slow " prompts take SLOW_MS. Fixed
 * usage per marker: PASS 12 tokens, MIXED 14, FAIL 11.
 */
#ifndef EVD_TESTS_CLI_EXPERIMENT_FIXTURES_H
#define EVD_TESTS_CLI_EXPERIMENT_FIXTURES_H

#include <check.h>
#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#include "tests/support/itest.h"

#define SLOW_MS 1500

/* The test's database (conninfo), stub and evald, and its folder ("/tmp/evald-cli-exp-…"). */
extern char ct_db_url[1024];
extern struct evd_t_proc ct_stub, ct_evald;
extern char ct_dir[64];

/* The checked fixture: a new database, the stub, evald and the folder; then all gone. */
void ct_setup(void);
void ct_teardown(void);

/* The evald-cli binary (EVALD_CLI_BIN, which ctest sets). */
const char *ct_cli_bin(void);

/* ct_dir/name, malloc'd. */
char *ct_in_dir(const char *name);
/* Writes text to ct_dir/name; the path (malloc'd). */
char *ct_file_in_dir(const char *name, const char *text);

/* What a command did: its exit code (128 + the signal when one ended it), its output and
 * how long it took. */
struct ran {
    int code;
    char out[65536], err[16384];
    double seconds;
};

/* A command running, with pipes for its stdout and stderr. */
struct child {
    pid_t pid;
    int out, err;
    struct timespec t0;
};

/* Starts argv (NULL-terminated) with stdin from /dev/null and its output into pipes. */
void ct_spawn(char *const argv[], struct child *c);
/*
 * Reads the child's output into r until both pipes close, or (until != NULL) until stderr
 * holds `until`; then, when it closed, reaps the child. Returns whether it was reaped.
 */
bool ct_collect(struct child *c, struct ran *r, const char *until);
/* Runs argv (NULL-terminated) with stdout and stderr captured. */
void ct_run(char *const argv[], struct ran *r);

/* evald-cli with --url of the test's evald and the arguments given. */
#define CLI(...) ((char *[]){(char *)ct_cli_bin(), "--url", ct_evald.base, __VA_ARGS__, NULL})
#define CHECK_EXIT(r, want)                                                                        \
    ck_assert_msg((r).code == (want), "exit %d, not %d\nstdout: %s\nstderr: %s", (r).code, want,   \
                  (r).out, (r).err)

/* The output a pipe gets: plain lines, no carriage return, no escape sequence. */
void ct_assert_plain(const struct ran *r);

/* The experiment id of "evald-cli: experiment exp_… started" on stderr (static buffer). */
const char *ct_started_id(const struct ran *r);

/* GET path on evald, which must answer 200 with JSON (new reference). */
json_t *ct_get(const char *path);
/* The status of the experiment (malloc'd). */
char *ct_status_of(const char *id);
/* Polls until the experiment's status is `want` (up to 20 s). */
void ct_wait_status(const char *id, const char *want);

/* cases.csv: three cases, q1 to q3, each expecting "yes". */
extern const char ct_cases_csv[];

/*
 * A YAML experiment in ct_dir/name with the control's and the treatment's markers, the
 * dataset file (next to it) and repeats; the path (malloc'd). Line 4 is the control, line
 * 7 the dataset, line 11 repeats.
 */
char *ct_yaml_file(const char *name, const char *control, const char *treatment,
                   const char *dataset, const char *repeats);

/* The JSON experiment with inline cases q1 to q3: control PASS, treatments MIXED and FAIL. */
extern const char ct_two_treatments_json[];

#endif
