/*
 * The helpers of the evald-stub suites; see stub_client.h. Each fails the running
 * Check test with ck_assert, so they are called only from inside a test or its fixture.
 */
#include "tests/support/stub_client.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct evd_t_proc sc_stub;

/* Value at a dotted path ("output.0.content.0.text"); borrowed reference or NULL. */
json_t *sc_jp(json_t *root, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    json_t *cur = root;
    for (char *save = NULL, *seg = strtok_r(buf, ".", &save); seg != NULL && cur != NULL;
         seg = strtok_r(NULL, ".", &save)) {
        if (json_is_array(cur))
            cur = json_array_get(cur, strtoul(seg, NULL, 10));
        else
            cur = json_object_get(cur, seg);
    }
    return cur;
}

const char *sc_js(json_t *root, const char *path)
{
    return json_string_value(sc_jp(root, path));
}

long long sc_ji(json_t *root, const char *path)
{
    json_t *v = sc_jp(root, path);
    ck_assert_msg(json_is_integer(v), "%s is not an integer", path);
    return (long long)json_integer_value(v);
}

void sc_req(struct evd_t_resp *r, const char *method, const char *path, const char *body,
            const char *const *headers)
{
    char url[256];
    snprintf(url, sizeof(url), "%s%s", sc_stub.base, path);
    evd_t_http_timed(method, url, headers, body, body ? strlen(body) : 0, 10000, r);
    ck_assert_msg(r->curl_code == 0, "%s %s: curl error %d", method, path, r->curl_code);
}

/* POST `body` to `path` and expect `status`; the response is left in *r. */
void sc_post(struct evd_t_resp *r, const char *path, const char *body, long status)
{
    sc_req(r, "POST", path, body, NULL);
    ck_assert_msg(r->status == status, "POST %s: status %ld, want %ld: %s", path, r->status, status,
                  r->body);
    ck_assert_msg(r->json != NULL, "POST %s: body is not JSON: %s", path, r->body);
}

void sc_put_script(const char *script)
{
    struct evd_t_resp r;
    sc_req(&r, "PUT", "/_stub/script", script, NULL);
    ck_assert_msg(r.status == 200, "PUT /_stub/script: %ld %s", r.status, r.body);
    evd_t_resp_free(&r);
}

json_t *sc_stats(void)
{
    struct evd_t_resp r;
    sc_req(&r, "GET", "/_stub/stats", NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    json_t *s = json_incref(r.json);
    evd_t_resp_free(&r);
    return s;
}

json_t *sc_request_log(const char *query)
{
    struct evd_t_resp r;
    char path[64];
    snprintf(path, sizeof(path), "/_stub/requests%s", query);
    sc_req(&r, "GET", path, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    json_t *l = json_incref(sc_jp(r.json, "requests"));
    ck_assert(json_is_array(l));
    evd_t_resp_free(&r);
    return l;
}

/* Text of the reply in any of the three wires. */
const char *sc_reply_text(json_t *body)
{
    if (sc_js(body, "object") != NULL && strcmp(sc_js(body, "object"), "response") == 0) {
        size_t i;
        json_t *item;
        json_array_foreach(sc_jp(body, "output"), i, item)
        {
            if (strcmp(sc_js(item, "type"), "message") == 0)
                return sc_js(item, "content.0.text");
        }
        return NULL;
    }
    if (sc_jp(body, "choices") != NULL)
        return sc_js(body, "choices.0.message.content");
    return sc_js(body, "content.0.text");
}

void sc_setup(void)
{
    ck_assert_msg(evd_t_stub_start(&sc_stub, NULL, NULL) == 0, "evald-stub did not start");
}

void sc_teardown(void)
{
    ck_assert_int_eq(evd_t_stop(&sc_stub, SIGTERM, 5000), 0);
}
