/*
 * Tool server of the suites that let evald or the agent loop call functions: a tiny
 * libmicrohttpd server on loopback that answers a few fixed tools and counts the calls it
 * gets. One per test process; start and stop from one thread, the counters are
 * thread-safe. (evald-stub and the HTTP client are in itest.h.)
 */
#ifndef EVD_TESTS_HARNESS_SUPPORT_H
#define EVD_TESTS_HARNESS_SUPPORT_H

#include <jansson.h>
#include <stdbool.h>

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
