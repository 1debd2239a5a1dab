/*
 * The fixture of the engine suites (tests/integration/test_engine.c and
 * test_engine_recovery.c): a throwaway PostgreSQL database and an evald-stub per test,
 * evald processes with that stub as provider and quick sweeps and leases, and evaluations
 * started and read through the function mirror (checked against the seed contract).
 * Names start with et_ (engine tests). For one test thread.
 */
#ifndef EVD_TESTS_ENGINE_FIXTURES_H
#define EVD_TESTS_ENGINE_FIXTURES_H

#include <jansson.h>

#include "tests/support/itest.h"

/* The test's database (conninfo) and stub, and the settings that point evald at that stub
 * (OPENAI_BASE_URL and OPENAI_API_KEY), for a test that starts evald with its own. */
extern char et_db_url[1024];
extern struct evd_t_proc et_stub;
extern char et_env_base[300];
extern char et_env_key[];

/* The checked fixture: a new database and a stub without a script; then both gone. */
void et_setup(void);
void et_teardown(void);

/* evald with the stub as provider, quick sweeps and leases, plus extra settings (NULL for
 * none). */
void et_start_evald(struct evd_t_proc *p, const char *extra1, const char *extra2);

/* A request of `runs` runs per arm whose prompts carry `tag` (stub scripts match on it);
 * malloc'd. */
char *et_small_request(const char *tag, int runs, int concurrency);

/* eval::start of body on base, which must answer 200; the evaluation id (malloc'd). */
char *et_start_eval(const char *base, const char *body);

/* eval::result of the evaluation, which must answer 200 (new reference). */
json_t *et_result_of(const char *base, const char *id);

/* Waits until the evaluation has an active run. */
void et_wait_active(const char *base, const char *id);

#endif
