/*
 * The built-in evaluators and the evaluator answer check (see evaluators.h).
 * Pure; thread-safe; allocation only for reasons and answers.
 */
#include "domain/evaluators.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"
#include "domain/canonical.h"
#include "domain/text.h"
#include "domain/trajectory.h"

static const char ELLIPSIS[] = "\xE2\x80\xA6"; /* U+2026 */

bool evd_evaluator_is_builtin(const char *function_id)
{
    return function_id != NULL && (strcmp(function_id, EVD_EVALUATOR_EXACT) == 0 ||
                                   strcmp(function_id, EVD_EVALUATOR_NORMALIZED_TEXT) == 0 ||
                                   strcmp(function_id, EVD_EVALUATOR_TRAJECTORY) == 0);
}

bool evd_evaluator_reads_transcript(const char *function_id)
{
    return function_id == NULL || (strcmp(function_id, EVD_EVALUATOR_EXACT) != 0 &&
                                   strcmp(function_id, EVD_EVALUATOR_NORMALIZED_TEXT) != 0);
}

bool evd_evaluator_is_agent_review(const char *function_id)
{
    return function_id != NULL && strcmp(function_id, EVD_EVALUATOR_AGENT_REVIEW) == 0;
}

enum evd_code evd_evaluator_run(const char *function_id, const struct evd_evaluator_input *in,
                                json_t **response, struct evd_err *err)
{
    *response = NULL;
    if (function_id != NULL && strcmp(function_id, EVD_EVALUATOR_EXACT) == 0)
        return evd_evaluator_exact(in, response, err);
    if (function_id != NULL && strcmp(function_id, EVD_EVALUATOR_NORMALIZED_TEXT) == 0)
        return evd_evaluator_normalized_text(in, response, err);
    if (function_id != NULL && strcmp(function_id, EVD_EVALUATOR_TRAJECTORY) == 0)
        return evd_evaluator_trajectory(in, response, err);
    return evd_err_set(err, EVD_ENOTFOUND, "evaluator %s is not built in",
                       function_id != NULL ? function_id : "(none)");
}

bool evd_evaluator_json_equal(const json_t *a, const json_t *b)
{
    /*
     * jansson's equality already has the contract's semantics: values of different
     * types (integer vs real) differ, reals compare with ==, objects compare by member
     * regardless of order, strings by length and bytes.
     */
    return json_equal(a, b) != 0;
}

char *evd_evaluator_excerpt(const char *s, size_t len)
{
    size_t i = 0, chars = 0;
    while (i < len && chars < EVD_EVALUATOR_EXCERPT_CHARS) {
        uint32_t cp;
        i += evd_text_decode(s + i, len - i, &cp);
        chars++;
    }
    bool cut = i < len;
    char *out = malloc(i + (cut ? sizeof(ELLIPSIS) : 1));
    if (out == NULL)
        return NULL;
    memcpy(out, s, i);
    if (cut)
        memcpy(out + i, ELLIPSIS, sizeof(ELLIPSIS));
    else
        out[i] = '\0';
    return out;
}

/* Canonical JSON of v cut to an excerpt; malloc'd or NULL. */
static char *json_excerpt(const json_t *v)
{
    char *full = evd_canonical_dump(v);
    if (full == NULL)
        return NULL;
    char *ex = evd_evaluator_excerpt(full, strlen(full));
    free(full);
    return ex;
}

static json_t *answer(bool passed, const char *reason)
{
    json_t *r = json_object();
    int rc = 0;
    rc |= json_object_set_new(r, "passed", json_boolean(passed));
    rc |= json_object_set_new(r, "score", json_real(passed ? 1.0 : 0.0));
    rc |= json_object_set_new(r, "reason", json_string(reason));
    if (rc != 0) {
        json_decref(r);
        return NULL;
    }
    return r;
}

/* "<prefix> (actual=<a>, expected=<e>)" as an answer that did not pass. */
static enum evd_code mismatch(const char *prefix, const char *actual, const char *expected,
                              json_t **response, struct evd_err *err)
{
    struct evd_buf b = {0};
    enum evd_code rc = EVD_OK;
    if (actual == NULL || expected == NULL ||
        evd_buf_printf(&b, "%s (actual=%s, expected=%s)", prefix, actual, expected) != 0)
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
    if (rc == EVD_OK) {
        *response = answer(false, b.data);
        if (*response == NULL)
            rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    evd_buf_free(&b);
    return rc;
}

enum evd_code evd_evaluator_exact(const struct evd_evaluator_input *in, json_t **response,
                                  struct evd_err *err)
{
    *response = NULL;
    const json_t *expected = json_object_get(in->arguments, "expected");
    if (expected == NULL)
        return evd_err_set(err, EVD_EINVAL,
                           "eval::assert::exact requires evaluator arguments.expected");
    if (evd_evaluator_json_equal(in->output, expected)) {
        *response = answer(true, "output exactly matched arguments.expected");
        return *response != NULL ? EVD_OK : evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    char *a = json_excerpt(in->output);
    char *e = json_excerpt(expected);
    enum evd_code rc =
        mismatch("output did not exactly match arguments.expected", a, e, response, err);
    free(a);
    free(e);
    return rc;
}

enum evd_code evd_evaluator_normalized_text(const struct evd_evaluator_input *in, json_t **response,
                                            struct evd_err *err)
{
    *response = NULL;
    const json_t *expected = json_object_get(in->arguments, "expected");
    if (!json_is_string(expected))
        return evd_err_set(err, EVD_EINVAL,
                           "eval::assert::normalized_text requires string "
                           "evaluator arguments.expected");
    enum evd_code rc = EVD_OK;
    char *a = NULL, *e = NULL, *na = NULL, *ne = NULL;
    if (!json_is_string(in->output)) {
        a = json_excerpt(in->output);
        e = json_excerpt(expected);
        rc = mismatch("output was not text", a, e, response, err);
        goto out;
    }
    size_t la = 0, le = 0;
    na = evd_text_normalize(json_string_value(in->output), json_string_length(in->output), &la);
    ne = evd_text_normalize(json_string_value(expected), json_string_length(expected), &le);
    if (na == NULL || ne == NULL) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    if (la == le && memcmp(na, ne, la) == 0) {
        *response = answer(true, "normalized output matched arguments.expected");
        if (*response == NULL)
            rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    a = evd_evaluator_excerpt(na, la);
    e = evd_evaluator_excerpt(ne, le);
    rc = mismatch("normalized output did not match arguments.expected", a, e, response, err);
out:
    free(a);
    free(e);
    free(na);
    free(ne);
    return rc;
}

enum evd_code evd_evaluator_check_response(const json_t *ans, json_t **normalized,
                                           struct evd_err *err)
{
    *normalized = NULL;
    if (!json_is_object(ans))
        return evd_err_set(err, EVD_EINVAL, "evaluator response must be an object");
    static const char *const known[] = {"passed", "score", "reason", "details", NULL};
    const char *key = evd_json_unknown_member(ans, known);
    if (key != NULL)
        return evd_err_set(err, EVD_EINVAL, "evaluator response member %s is not a known field",
                           key);
    const json_t *passed = json_object_get(ans, "passed");
    const json_t *score = json_object_get(ans, "score");
    const json_t *reason = json_object_get(ans, "reason");
    const json_t *details = json_object_get(ans, "details");
    if (passed == NULL)
        return evd_err_set(err, EVD_EINVAL, "evaluator response member passed is required");
    if (!json_is_boolean(passed))
        return evd_err_set(err, EVD_EINVAL, "evaluator response member passed must be a boolean");
    if (score != NULL && !json_is_null(score)) {
        double s = json_is_number(score) ? json_number_value(score) : NAN;
        if (!isfinite(s) || s < 0.0 || s > 1.0)
            return evd_err_set(err, EVD_EINVAL,
                               "evaluator score must be a finite number between 0 and 1");
    }
    if (reason != NULL && !json_is_null(reason) && !json_is_string(reason))
        return evd_err_set(err, EVD_EINVAL, "evaluator response member reason must be a string");

    json_t *n = json_object();
    int rc = 0;
    rc |= json_object_set_new(n, "passed", json_boolean(json_is_true(passed)));
    if (score != NULL && !json_is_null(score))
        rc |= json_object_set_new(n, "score", json_real(json_number_value(score)));
    if (reason != NULL && !json_is_null(reason))
        rc |= json_object_set_new(n, "reason", json_deep_copy(reason));
    if (details != NULL && !json_is_null(details))
        rc |= json_object_set_new(n, "details", json_deep_copy(details));
    if (rc != 0) {
        json_decref(n);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    *normalized = n;
    return EVD_OK;
}
