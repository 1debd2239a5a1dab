/*
 * Test helpers of the harness suites: an evald-stub child process on loopback with its
 * control endpoints, a tiny libmicrohttpd tool server that counts the calls it gets, and a
 * fake environment for the provider registry. One instance of each per test process;
 * not thread-safe except where noted.
 */
#ifndef EVD_TESTS_HARNESS_SUPPORT_H
#define EVD_TESTS_HARNESS_SUPPORT_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

/* ---- evald-stub ------------------------------------------------------------------------ */

struct hs_stub {
    pid_t pid;
    char base[64]; /* "http://127.0.0.1:PORT" */
};

/*
 * Starts $EVALD_STUB_BIN on 127.0.0.1:0 requiring `key` (NULL = none) and waits for its
 * ready line. Returns false (with a note on stderr) when the binary is missing or fails.
 */
bool hs_stub_start(struct hs_stub *s, const char *key);
void hs_stub_stop(struct hs_stub *s);
/* PUT /_stub/script with `script` (borrowed); POST /_stub/reset. Both return HTTP status. */
long hs_stub_script(struct hs_stub *s, json_t *script);
long hs_stub_reset(struct hs_stub *s);
/* GET /_stub/requests?limit=N, /_stub/stats: new references or NULL. */
json_t *hs_stub_requests(struct hs_stub *s, int limit);
json_t *hs_stub_stats(struct hs_stub *s);

/* One HTTP exchange; returns the status and *body (malloc'd, may be NULL). */
long hs_http(const char *method, const char *url, const char *body, char **resp_body);

/* ---- tool server ----------------------------------------------------------------------- */

/*
 * Paths served (all POST, JSON in and out):
 *   /add    {a,b} → {"sum":a+b}
 *   /echo   any → {"echo":<payload>}
 *   /fail   → 500 {"error":{"message":"tool exploded"}}
 *   /slow   sleeps 3 s, then {"ok":true}
 * Counters are thread-safe.
 */
bool hs_tools_start(void);
void hs_tools_stop(void);
const char *hs_tools_base(void); /* "http://127.0.0.1:PORT" */
int hs_tools_calls(const char *path);
/* Last payload seen on `path`: new reference or NULL. */
json_t *hs_tools_last(const char *path);
void hs_tools_reset(void);

#endif
