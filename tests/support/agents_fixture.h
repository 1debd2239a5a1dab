/*
 * The fixture of the agent suites (tests/integration/test_experiment_agents.c and
 * test_experiment_simulator.c; docs/agents.md): a throwaway database, evald-stub as three
 * keyless providers of its three wire formats (resp, msgs, chat) and as OpenAI, the tool
 * server of harness_support.h, and evald with short leases. Names start with at_ (agent
 * tests). One test thread.
 */
#ifndef EVD_TESTS_AGENTS_FIXTURE_H
#define EVD_TESTS_AGENTS_FIXTURE_H

#include <jansson.h>
#include <stddef.h>

#include "tests/support/itest.h"

extern char at_db_url[1024];
extern struct evd_t_proc at_stub, at_evald;

/* The checked fixture: database, stub, tool server, evald; then all of them gone. */
void at_setup(void);
void at_teardown(void);
/* Starts at_evald again on the same database (after a kill). */
void at_start_evald(void);

/* The JSON answer (new reference) of METHOD path on evald; *status gets the status. */
json_t *at_call(const char *method, const char *path, const char *body, long *status);
/* The string at a dotted path, or "(none)". */
const char *at_str(json_t *v, const char *dotted);
/* Starts an experiment, which must answer 202; its id (malloc'd). */
char *at_start_experiment(const char *body);
/* GET of experiment `id` until it is terminal (new reference). */
json_t *at_wait_done(const char *id, int timeout_ms);
/* The runs of experiment `id` (new reference), in case then position order. */
json_t *at_runs_of(const char *id);
/* The run of arm `arm` on case `case_id` among runs (borrowed); the test fails without. */
json_t *at_run_at(json_t *runs, const char *case_id, int arm);
/* Uploads JSONL cases as dataset `name`; its id (malloc'd). */
char *at_upload_jsonl(const char *name, const char *jsonl);
/* The conversation a provider request body carries, as "role: text" lines (system
 * messages and instructions left out; malloc'd). */
char *at_wire_conversation(const json_t *body);
/* A stub log entry's body (new reference). */
json_t *at_request_body(const json_t *req);
/* Registers the tool server's /echo (it answers {"echo": <input>}) as HTTP tool `id`; the
 * test fails unless evald creates it. */
void at_put_echo_tool(const char *id);
/* The text of a file of the source tree (malloc'd). */
char *at_source_file(const char *rel);

#endif
