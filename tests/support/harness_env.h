/*
 * A fake process environment for the harness unit suites: evd_providers_load reads its
 * variables through hs_env_get, which answers from a small table the test fills with
 * hs_env_set. One table per process, for one thread; the strings are borrowed, not
 * copied.
 */
#ifndef EVD_TESTS_HARNESS_ENV_H
#define EVD_TESTS_HARNESS_ENV_H

struct evd_providers;

/* The getter to pass to evd_providers_load (ctx unused): the value set, or NULL. */
const char *hs_env_get(void *ctx, const char *name);
/* Sets or replaces a variable (at most 15 distinct names). */
void hs_env_set(const char *name, const char *value);
/* Removes every variable. */
void hs_env_clear(void);

/*
 * Clears the table, sets OPENAI_API_KEY, ANTHROPIC_API_KEY and OPENAI_BASE_URL
 * (http://127.0.0.1:9/v1/, a port nothing answers on) and loads the built-in providers
 * from it, failing the test unless that succeeds. Free with evd_providers_free.
 */
struct evd_providers *hs_env_default_providers(void);

#endif
