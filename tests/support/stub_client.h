/*
 * Client side of the evald-stub suites (tests/integration/test_stub_*.c): one stub per
 * test process, started and stopped around each test by the checked fixture
 * sc_setup/sc_teardown, and the calls those suites make to it over HTTP: requests that
 * assert they got an answer, its script, statistics and request log, and dotted-path
 * reads of the JSON it answers. Every helper fails the running Check test on a
 * transport error or an unexpected status. Meant for one thread. (Starting the stub and
 * the HTTP client themselves are in itest.h.)
 */
#ifndef EVD_TESTS_STUB_CLIENT_H
#define EVD_TESTS_STUB_CLIENT_H

#include <jansson.h>

#include "tests/support/itest.h"

/* The stub of this test process; sc_stub.base is "http://127.0.0.1:PORT". */
extern struct evd_t_proc sc_stub;

/* Checked fixture: starts sc_stub without a script or key / stops it with SIGTERM and
 * asserts it exited 0. */
void sc_setup(void);
void sc_teardown(void);

/* Value at a dotted path ("output.0.content.0.text"); borrowed reference or NULL. */
json_t *sc_jp(json_t *root, const char *path);
/* The string at `path`, or NULL. */
const char *sc_js(json_t *root, const char *path);
/* The integer at `path`; fails the test when it is not one. */
long long sc_ji(json_t *root, const char *path);

/* `method` `path` on the stub with optional body and headers (NULL-terminated); the
 * response is left in *r (free with evd_t_resp_free). Asserts the transport worked. */
void sc_req(struct evd_t_resp *r, const char *method, const char *path, const char *body,
            const char *const *headers);
/* POST `body` to `path` and expect `status`; the response is left in *r. */
void sc_post(struct evd_t_resp *r, const char *path, const char *body, long status);
/* PUT /_stub/script, expecting 200. */
void sc_put_script(const char *script);
/* GET /_stub/stats: new reference. */
json_t *sc_stats(void);
/* The "requests" array of GET /_stub/requests<query> (query "" or "?limit=N"): new
 * reference. */
json_t *sc_request_log(const char *query);
/* Text of the reply in any of the three wires (responses, chat, messages), or NULL. */
const char *sc_reply_text(json_t *body);

#endif
