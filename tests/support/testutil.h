/*
 * Helpers shared by the Check suites: locating ../shared (the spec seeds and the
 * conformance suites, absent on a user's machine), loading JSON files, and the
 * seed's function schemas.
 */
#ifndef EVD_TESTS_TESTUTIL_H
#define EVD_TESTS_TESTUTIL_H

#include <jansson.h>
#include <stdbool.h>

/*
 * Path of the shared folder (EVALD_SHARED_DIR, else <source>/../shared), or NULL when
 * it does not exist. Callers that need it print a clear "skipped" line when NULL.
 */
const char *evd_test_shared_dir(void);

/* Loads a JSON file; new reference, or NULL with a message on stderr. */
json_t *evd_test_load_json(const char *path);

/*
 * The seed's eval-api-reference.json (borrowed reference, cached for the process),
 * or NULL when ../shared is absent.
 */
json_t *evd_test_seed_reference(void);

/* The function entry named `name` (e.g. "eval::start") of the seed; borrowed, or NULL. */
json_t *evd_test_seed_function(const char *name);

/* Prints "SKIPPED: <what> (../shared is absent)" to stderr. */
void evd_test_skip_note(const char *what);

/* Runs a Check suite with CK_NORMAL output; returns the process exit status. */
int evd_test_run_suite(void *suite /* Suite * */);

#endif
