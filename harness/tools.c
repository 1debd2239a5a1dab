/*
 * HTTP tools: the functions users register at PUT /v1/tools/{id}. A call POSTs the payload
 * as JSON to the tool's URL within its timeout and the run's deadline, and the answer comes
 * back as a JSON value. Runs on the run's thread with the run's easy handle.
 */
#include "harness/internal.h"
#include "schema/jsonschema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Payload validation against the tool's request_schema (draft-07), before the call. The
 * message lists at most three failing instance paths, as the model has to fix them.
 */
enum evd_code evd_hx_validate_payload(const char *function_id, json_t *schema, json_t *payload,
                                      struct evd_err *err)
{
    struct evd_schema_error errs[3];
    struct evd_err serr = {EVD_OK, ""};
    if (schema == NULL)
        return EVD_OK;
    size_t n = evd_jsonschema_check(schema, payload, errs, 3, &serr);
    if (n == (size_t)-1)
        return evd_err_set(err, EVD_EINVAL, "request_schema of %s is invalid: %s", function_id,
                           serr.msg);
    if (n == 0)
        return EVD_OK;
    char detail[400];
    size_t len = 0;
    detail[0] = '\0';
    for (size_t i = 0; i < n && i < 3 && len < sizeof(detail); i++)
        len += (size_t)snprintf(detail + len, sizeof(detail) - len, "%s\"%s\": %s", i ? "; " : "",
                                errs[i].instance_path, errs[i].message);
    return evd_err_set(err, EVD_EINVAL, "payload of %s does not match its request_schema: %s",
                       function_id, detail);
}

json_t *evd_hx_call_http_tool(struct evd_hx_client *cl, const struct evd_hx_function *fn,
                              json_t *payload, const char *session_id, const char *traceparent,
                              int64_t deadline_ms, struct evd_cancel *cancel,
                              struct evd_err *err)
{
    json_t *result = NULL;
    char *body = NULL;
    struct curl_slist *h = NULL, *t;
    struct evd_hx_http_resp resp;
    char line[320];
    bool have_resp = false;

    int64_t timeout = fn->timeout_ms > 0 ? fn->timeout_ms : 30000;
    int64_t until = evd_mono_ms() + timeout;
    bool run_deadline_first = deadline_ms < until;
    if (run_deadline_first)
        until = deadline_ms;
    body = json_dumps(payload, JSON_COMPACT | JSON_ENCODE_ANY);
    if (body == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory encoding the payload of %s", fn->id);
        goto out;
    }
    const char *lines[3] = {"Content-Type: application/json", "Accept: application/json",
                            "Expect:"};
    for (int i = 0; i < 3; i++) {
        if ((t = curl_slist_append(h, lines[i])) == NULL)
            goto nomem;
        h = t;
    }
    snprintf(line, sizeof(line), "X-Evald-Session: %.200s", session_id ? session_id : "");
    if ((t = curl_slist_append(h, line)) == NULL)
        goto nomem;
    h = t;
    snprintf(line, sizeof(line), "X-Evald-Function: %.200s", fn->id);
    if ((t = curl_slist_append(h, line)) == NULL)
        goto nomem;
    h = t;
    if (traceparent != NULL) {
        snprintf(line, sizeof(line), "traceparent: %.60s", traceparent);
        if ((t = curl_slist_append(h, line)) == NULL)
            goto nomem;
        h = t;
    }

    evd_hx_http_post(cl, fn->url, h, body, strlen(body), until, cancel, &resp);
    have_resp = true;
    if (resp.cancelled) {
        evd_err_set(err, EVD_ECANCELLED, "function %s cancelled", fn->id);
    } else if (resp.timed_out) {
        if (run_deadline_first)
            evd_err_set(err, EVD_ETIMEOUT, "function %s stopped by the scenario timeout", fn->id);
        else
            evd_err_set(err, EVD_ETIMEOUT, "function %s timed out after %lld ms", fn->id,
                        (long long)timeout);
    } else if (resp.curl_code != CURLE_OK) {
        evd_err_set(err, EVD_EUPSTREAM, "could not reach function %s: %s", fn->id,
                    resp.curl_error[0] ? resp.curl_error : curl_easy_strerror(resp.curl_code));
    } else if (resp.status < 200 || resp.status >= 300) {
        char detail[256];
        evd_hx_error_detail(resp.body.data, resp.body.len, detail, sizeof(detail));
        evd_err_set(err, EVD_EUPSTREAM, "function %s returned %ld: %s", fn->id, resp.status,
                    detail);
    } else {
        const char *data = resp.body.data ? resp.body.data : "";
        result = resp.body.len > 0 ? json_loadb(data, resp.body.len, JSON_DECODE_ANY, NULL)
                                   : json_null();
        if (result == NULL)
            result = json_stringn(data, resp.body.len);
        if (result == NULL)
            evd_err_set(err, EVD_EUPSTREAM, "function %s returned a body that is not UTF-8",
                        fn->id);
    }
    goto out;
nomem:
    evd_err_set(err, EVD_ENOMEM, "out of memory calling %s", fn->id);
out:
    if (have_resp)
        evd_hx_http_resp_free(&resp);
    curl_slist_free_all(h);
    free(body);
    return result;
}

json_t *evd_harness_post_json(const char *url, const json_t *body, int64_t timeout_ms,
                              const char *session_id, const char *traceparent,
                              struct evd_cancel *cancel, struct evd_err *err)
{
    struct evd_hx_client cl = {0};
    struct evd_hx_http_resp resp;
    struct curl_slist *h = NULL, *t;
    json_t *answer = NULL;
    char line[320];
    char *text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
    if (text == NULL || !evd_hx_client_open(&cl)) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    snprintf(line, sizeof(line), "X-Evald-Session: %.200s", session_id ? session_id : "");
    char tp[96];
    snprintf(tp, sizeof(tp), "traceparent: %.60s", traceparent ? traceparent : "");
    const char *lines[5] = {"Content-Type: application/json", "Accept: application/json",
                            "Expect:", line, tp};
    for (int i = 0; i < (traceparent ? 5 : 4); i++) {
        if ((t = curl_slist_append(h, lines[i])) == NULL) {
            evd_err_set(err, EVD_ENOMEM, "out of memory");
            goto out;
        }
        h = t;
    }
    evd_hx_http_post(&cl, url, h, text, strlen(text), evd_mono_ms() + timeout_ms, cancel, &resp);
    if (resp.cancelled) {
        evd_err_set(err, EVD_ECANCELLED, "evaluator call cancelled");
    } else if (resp.timed_out) {
        evd_err_set(err, EVD_ETIMEOUT, "evaluator exceeded its %lld ms timeout",
                    (long long)timeout_ms);
    } else if (resp.curl_code != CURLE_OK) {
        evd_err_set(err, EVD_EUPSTREAM, "could not call the evaluator: %s",
                    resp.curl_error[0] ? resp.curl_error : curl_easy_strerror(resp.curl_code));
    } else if (resp.status < 200 || resp.status > 299) {
        evd_err_set(err, EVD_EUPSTREAM, "evaluator returned HTTP %ld", resp.status);
    } else {
        json_error_t jerr;
        answer = json_loadb(resp.body.data ? resp.body.data : "", resp.body.len, JSON_DECODE_ANY,
                            &jerr);
        if (answer == NULL)
            evd_err_set(err, EVD_EUPSTREAM, "evaluator answered invalid JSON: %s", jerr.text);
    }
    evd_hx_http_resp_free(&resp);
out:
    curl_slist_free_all(h);
    evd_hx_client_close(&cl);
    free(text);
    return answer;
}

enum evd_code evd_harness_post_bytes(const char *url, const char *content_type,
                                     const char *const *headers, size_t nheaders,
                                     const void *body, size_t len, int64_t timeout_ms,
                                     struct evd_harness_post_result *res)
{
    struct evd_hx_client cl = {0};
    struct evd_hx_http_resp resp;
    struct curl_slist *h = NULL, *t;
    char ct[160];
    enum evd_code rc = EVD_ENOMEM;
    memset(res, 0, sizeof(*res));
    res->retry_after_ms = -1;
    if (!evd_hx_client_open(&cl))
        goto out;
    snprintf(ct, sizeof(ct), "Content-Type: %.120s", content_type);
    if ((t = curl_slist_append(h, ct)) == NULL)
        goto out;
    h = t;
    if ((t = curl_slist_append(h, "Expect:")) == NULL)
        goto out;
    h = t;
    for (size_t i = 0; i < nheaders; i++) {
        if ((t = curl_slist_append(h, headers[i])) == NULL)
            goto out;
        h = t;
    }
    evd_hx_http_post(&cl, url, h, (const char *)body, len, evd_mono_ms() + timeout_ms, NULL, &resp);
    res->timed_out = resp.timed_out;
    res->retry_after_ms = resp.retry_after_ms;
    if (resp.curl_code == CURLE_OK) {
        res->status = resp.status;
        rc = EVD_OK;
    } else {
        snprintf(res->error, sizeof(res->error), "%s",
                 resp.curl_error[0] ? resp.curl_error : curl_easy_strerror(resp.curl_code));
        rc = resp.timed_out ? EVD_ETIMEOUT : EVD_EUPSTREAM;
    }
    evd_hx_http_resp_free(&resp);
out:
    curl_slist_free_all(h);
    evd_hx_client_close(&cl);
    return rc;
}
