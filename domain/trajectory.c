/*
 * The trajectory evaluator and the evaluator input's transcript (see trajectory.h).
 * Pure; thread-safe; allocation only for the pairing, reasons and answers.
 */
#include "domain/trajectory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"
#include "domain/canonical.h"
#include "domain/evaluators.h"
#include "domain/fields.h"
#include "domain/text.h"

#define ARGS_PATH "evaluator arguments"
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *const MODES[] = {"strict", "unordered", "subset", "superset"};
static const char *const MATCHES[] = {"exact", "subset", "ignore"};

/* ---- arguments ------------------------------------------------------------------------ */

static enum evd_code decode_expected_call(const json_t *item, size_t i, struct evd_err *err)
{
    char path[EVD_FIELDS_PATH_MAX];
    snprintf(path, sizeof(path), ARGS_PATH ".expected[%zu]", i);
    if (!json_is_object(item))
        return evd_err_set(err, EVD_EINVAL, "%s must be an object", path);
    static const char *const known[] = {"name", "arguments", NULL};
    json_t *name = NULL, *args = NULL;
    enum evd_code rc = evd_fields_only(item, path, known, err);
    if (rc == EVD_OK)
        rc = evd_fields_get(item, path, "name", EVD_F_STRING | EVD_F_REQUIRED, &name, err);
    if (rc == EVD_OK && evd_text_is_blank(json_string_value(name), json_string_length(name)))
        rc = evd_err_set(err, EVD_EINVAL, "%s.name cannot be empty", path);
    if (rc == EVD_OK)
        rc = evd_fields_get(item, path, "arguments", EVD_F_OBJECT | EVD_F_NULLABLE, &args, err);
    return rc;
}

enum evd_code evd_trajectory_args_decode(const json_t *arguments, struct evd_trajectory_args *out,
                                         struct evd_err *err)
{
    *out = (struct evd_trajectory_args){NULL, EVD_TRAJECTORY_STRICT, EVD_TRAJECTORY_ARGS_EXACT};
    if (arguments != NULL && !json_is_object(arguments))
        return evd_err_set(err, EVD_EINVAL, ARGS_PATH " must be an object");
    const json_t *expected = arguments != NULL ? json_object_get(arguments, "expected") : NULL;
    if (expected == NULL)
        return evd_err_set(err, EVD_EINVAL,
                           EVD_EVALUATOR_TRAJECTORY " requires evaluator arguments.expected");
    static const char *const known[] = {"expected", "mode", "match_arguments", NULL};
    enum evd_code rc = evd_fields_only(arguments, ARGS_PATH, known, err);
    if (rc != EVD_OK)
        return rc;
    if (!json_is_array(expected))
        return evd_err_set(err, EVD_EINVAL, ARGS_PATH ".expected must be an array");
    size_t i;
    const json_t *item;
    json_array_foreach(expected, i, item)
    {
        if ((rc = decode_expected_call(item, i, err)) != EVD_OK)
            return rc;
    }
    int mode = -1, match = -1;
    rc = evd_fields_enum(arguments, ARGS_PATH, "mode", EVD_F_NULLABLE, MODES, COUNT(MODES), &mode,
                         err);
    if (rc == EVD_OK)
        rc = evd_fields_enum(arguments, ARGS_PATH, "match_arguments", EVD_F_NULLABLE, MATCHES,
                             COUNT(MATCHES), &match, err);
    if (rc != EVD_OK)
        return rc;
    out->expected = expected;
    if (mode >= 0)
        out->mode = (enum evd_trajectory_mode)mode;
    if (match >= 0)
        out->match = (enum evd_trajectory_match)match;
    return EVD_OK;
}

/* ---- the calls of a transcript ---------------------------------------------------------- */

static enum evd_code append_calls(const json_t *entry, size_t t, json_t *calls, struct evd_err *err)
{
    char path[EVD_FIELDS_PATH_MAX];
    snprintf(path, sizeof(path), "transcript[%zu]", t);
    if (!json_is_object(entry))
        return evd_err_set(err, EVD_EINVAL, "%s must be an object", path);
    json_t *fcs = NULL;
    enum evd_code rc =
        evd_fields_get(entry, path, "function_calls", EVD_F_ARRAY | EVD_F_NULLABLE, &fcs, err);
    if (rc != EVD_OK || fcs == NULL)
        return rc;
    size_t i;
    json_t *fc;
    json_array_foreach(fcs, i, fc)
    {
        char cpath[EVD_FIELDS_PATH_MAX];
        snprintf(cpath, sizeof(cpath), "transcript[%zu].function_calls[%zu]", t, i);
        if (!json_is_object(fc))
            return evd_err_set(err, EVD_EINVAL, "%s must be an object", cpath);
        json_t *name = NULL, *args = NULL;
        if ((rc = evd_fields_get(fc, cpath, "name", EVD_F_STRING | EVD_F_REQUIRED, &name, err)) ||
            (rc =
                 evd_fields_get(fc, cpath, "arguments", EVD_F_OBJECT | EVD_F_NULLABLE, &args, err)))
            return rc;
        json_t *call = json_pack("{s:O,s:o}", "name", name, "arguments",
                                 args != NULL ? json_incref(args) : json_object());
        if (call == NULL || json_array_append_new(calls, call) != 0)
            return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    return EVD_OK;
}

enum evd_code evd_trajectory_calls(const json_t *transcript, json_t **calls, struct evd_err *err)
{
    *calls = NULL;
    if (transcript != NULL && !json_is_null(transcript) && !json_is_array(transcript))
        return evd_err_set(err, EVD_EINVAL, "transcript must be an array");
    json_t *out = json_array();
    if (out == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    size_t t;
    const json_t *entry;
    json_array_foreach(transcript, t, entry)
    {
        enum evd_code rc = append_calls(entry, t, out, err);
        if (rc != EVD_OK) {
            json_decref(out);
            return rc;
        }
    }
    *calls = out;
    return EVD_OK;
}

/* ---- matching ------------------------------------------------------------------------- */

/* Every member of object e is in a and matches it the same way; other values are equal. */
static bool subset_of(const json_t *e, const json_t *a)
{
    if (!json_is_object(e))
        return evd_evaluator_json_equal(e, a);
    if (!json_is_object(a))
        return false;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)e, key, v)
    {
        const json_t *av = json_object_get(a, key);
        if (av == NULL || !subset_of(v, av))
            return false;
    }
    return true;
}

bool evd_trajectory_args_match(enum evd_trajectory_match match, const json_t *expected,
                               const json_t *actual)
{
    if (expected == NULL || json_is_null(expected) || match == EVD_TRAJECTORY_ARGS_IGNORE)
        return true;
    if (actual == NULL || json_is_null(actual))
        return false;
    if (match == EVD_TRAJECTORY_ARGS_SUBSET)
        return subset_of(expected, actual);
    return evd_evaluator_json_equal(expected, actual);
}

static const char *name_of(const json_t *v)
{
    const char *s = json_string_value(json_object_get(v, "name"));
    return s != NULL ? s : "";
}

static bool call_matches(enum evd_trajectory_match match, const json_t *exp, const json_t *call)
{
    return strcmp(name_of(exp), name_of(call)) == 0 &&
           evd_trajectory_args_match(match, json_object_get(exp, "arguments"),
                                     json_object_get(call, "arguments"));
}

/*
 * A maximum matching of calls (n) to expected calls (m) where adj[i*m+j] says call i may
 * stand for expected call j: augmenting paths found breadth-first, calls taken in order
 * (Kuhn's algorithm; O(n·n·m), the lists are short). Fills pair_call[i] (expected index or
 * -1) and pair_exp[j] (call index or -1); returns the size, or -1 on ENOMEM.
 */
static long max_matching(const unsigned char *adj, size_t n, size_t m, long *pair_call,
                         long *pair_exp)
{
    for (size_t i = 0; i < n; i++)
        pair_call[i] = -1;
    for (size_t j = 0; j < m; j++)
        pair_exp[j] = -1;
    if (n == 0 || m == 0)
        return 0;
    size_t *queue = malloc(n * sizeof(*queue));
    long *from = malloc(m * sizeof(*from));
    unsigned char *seen = malloc(m);
    long size = 0;
    if (queue == NULL || from == NULL || seen == NULL) {
        size = -1;
        goto out;
    }
    for (size_t u = 0; u < n; u++) {
        memset(seen, 0, m);
        size_t head = 0, tail = 0;
        long found = -1;
        queue[tail++] = u;
        while (head < tail && found < 0) {
            size_t c = queue[head++];
            for (size_t j = 0; j < m && found < 0; j++) {
                if (!adj[c * m + j] || seen[j])
                    continue;
                seen[j] = 1;
                from[j] = (long)c;
                if (pair_exp[j] < 0)
                    found = (long)j;
                else
                    queue[tail++] = (size_t)pair_exp[j]; /* each call enters at most once */
            }
        }
        if (found < 0)
            continue;
        /* Flip the path: each call on it takes the expected call it reached. */
        for (long j = found;;) {
            long c = from[j];
            long previous = pair_call[c];
            pair_call[c] = j;
            pair_exp[j] = c;
            if ((size_t)c == u)
                break;
            j = previous;
        }
        size++;
    }
out:
    free(queue);
    free(from);
    free(seen);
    return size;
}

/* ---- the verdict ---------------------------------------------------------------------- */

/* "name" or "name {args}" (canonical, cut) into b; 0 or -1. */
static int describe(struct evd_buf *b, const json_t *v, bool with_args)
{
    const json_t *args = json_object_get(v, "arguments");
    if (!with_args || args == NULL || json_is_null(args))
        return evd_buf_printf(b, "%s", name_of(v));
    char *full = evd_canonical_dump(args);
    char *cut = full != NULL ? evd_evaluator_excerpt(full, strlen(full)) : NULL;
    int rc = cut != NULL ? evd_buf_printf(b, "%s %s", name_of(v), cut) : -1;
    free(full);
    free(cut);
    return rc;
}

/* Whether the unpaired items of `others` (pairs[k] < 0) include one named like v. */
static bool unpaired_named(const json_t *v, const json_t *others, const long *pairs)
{
    size_t k;
    const json_t *o;
    json_array_foreach(others, k, o)
    {
        if (pairs[k] < 0 && strcmp(name_of(o), name_of(v)) == 0)
            return true;
    }
    return false;
}

struct verdict {
    const struct evd_trajectory_args *args;
    const json_t *calls;
    size_t n, m;    /* calls, expected calls */
    size_t matched; /* expected calls matched */
    bool passed;
    struct evd_buf reason;
};

static int strict_verdict(struct verdict *v)
{
    const json_t *exp = v->args->expected;
    size_t first = (size_t)-1;
    size_t len = v->n > v->m ? v->n : v->m;
    for (size_t i = 0; i < len; i++) {
        const json_t *e = json_array_get(exp, i), *c = json_array_get(v->calls, i);
        if (e != NULL && c != NULL && call_matches(v->args->match, e, c))
            v->matched++;
        else if (first == (size_t)-1)
            first = i;
    }
    v->passed = first == (size_t)-1;
    struct evd_buf *b = &v->reason;
    if (v->passed)
        return evd_buf_printf(b, "%zu call%s matched the expected calls in order", v->n,
                              v->n == 1 ? "" : "s");
    const json_t *e = json_array_get(exp, first), *c = json_array_get(v->calls, first);
    int rc = evd_buf_printf(b, "call %zu: expected ", first + 1);
    bool same = e != NULL && c != NULL && strcmp(name_of(e), name_of(c)) == 0;
    rc |= e != NULL ? describe(b, e, same) : evd_buf_printf(b, "no call");
    rc |= evd_buf_printf(b, ", got ");
    rc |= c != NULL ? describe(b, c, same) : evd_buf_printf(b, "no call");
    return rc != 0 ? -1 : 0;
}

static int multiset_verdict(struct verdict *v)
{
    const json_t *exp = v->args->expected;
    size_t n = v->n, m = v->m;
    unsigned char *adj = calloc(n * m + 1, 1);
    long *pair_call = malloc((n + 1) * sizeof(long));
    long *pair_exp = malloc((m + 1) * sizeof(long));
    int rc = -1;
    if (adj == NULL || pair_call == NULL || pair_exp == NULL)
        goto out;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < m; j++)
            adj[i * m + j] =
                call_matches(v->args->match, json_array_get(exp, j), json_array_get(v->calls, i));
    long size = max_matching(adj, n, m, pair_call, pair_exp);
    if (size < 0)
        goto out;
    v->matched = (size_t)size;
    size_t unexpected = (size_t)-1, missing = (size_t)-1;
    for (size_t i = 0; i < n && unexpected == (size_t)-1; i++)
        if (pair_call[i] < 0)
            unexpected = i;
    for (size_t j = 0; j < m && missing == (size_t)-1; j++)
        if (pair_exp[j] < 0)
            missing = j;
    enum evd_trajectory_mode mode = v->args->mode;
    bool show_unexpected = unexpected != (size_t)-1 && mode != EVD_TRAJECTORY_SUPERSET;
    bool show_missing = missing != (size_t)-1 && mode != EVD_TRAJECTORY_SUBSET;
    v->passed = !show_unexpected && !show_missing;
    struct evd_buf *b = &v->reason;
    bool with_args = v->args->match != EVD_TRAJECTORY_ARGS_IGNORE;
    rc = 0;
    if (v->passed) {
        if (mode == EVD_TRAJECTORY_UNORDERED)
            rc = evd_buf_printf(b, "%zu call%s matched the expected calls in some order", n,
                                n == 1 ? "" : "s");
        else if (mode == EVD_TRAJECTORY_SUBSET)
            rc = evd_buf_printf(b, "every call was expected (%zu of %zu expected calls made)",
                                v->matched, m);
        else
            rc = evd_buf_printf(b, "every expected call was made (%zu call%s, %zu expected)", n,
                                n == 1 ? "" : "s", m);
        goto out;
    }
    if (show_unexpected) {
        const json_t *c = json_array_get(v->calls, unexpected);
        rc |= evd_buf_printf(b, "call %zu: unexpected ", unexpected + 1);
        rc |= describe(b, c, with_args && unpaired_named(c, exp, pair_exp));
    }
    if (show_missing) {
        const json_t *e = json_array_get(exp, missing);
        rc |= evd_buf_printf(b, "%sexpected call %zu: ", show_unexpected ? "; " : "", missing + 1);
        rc |= describe(b, e, with_args && unpaired_named(e, v->calls, pair_call));
        rc |= evd_buf_printf(b, " was not made");
    }
out:
    free(adj);
    free(pair_call);
    free(pair_exp);
    return rc != 0 ? -1 : 0;
}

static json_t *details_of(const struct verdict *v)
{
    json_t *names = json_array();
    size_t i;
    const json_t *c;
    json_array_foreach(v->calls, i, c)
    {
        if (json_array_append_new(names, json_string(name_of(c))) != 0) {
            json_decref(names);
            return NULL;
        }
    }
    return json_pack("{s:s,s:s,s:o,s:I,s:I}", "mode", MODES[v->args->mode], "match_arguments",
                     MATCHES[v->args->match], "calls", names, "expected", (json_int_t)v->m,
                     "matched", (json_int_t)v->matched);
}

enum evd_code evd_trajectory_score(const struct evd_trajectory_args *args, const json_t *calls,
                                   json_t **response, struct evd_err *err)
{
    *response = NULL;
    struct verdict v = {
        .args = args,
        .calls = calls,
        .n = json_array_size(calls),
        .m = json_array_size(args->expected),
    };
    int rc = args->mode == EVD_TRAJECTORY_STRICT ? strict_verdict(&v) : multiset_verdict(&v);
    json_t *details = rc == 0 ? details_of(&v) : NULL;
    if (details != NULL && v.reason.data != NULL) {
        double score = v.m == 0 ? 1.0 : (double)v.matched / (double)v.m;
        *response = json_pack("{s:b,s:f,s:s,s:o}", "passed", v.passed, "score", score, "reason",
                              v.reason.data, "details", details);
        details = NULL; /* stolen, even on failure */
    }
    json_decref(details);
    evd_buf_free(&v.reason);
    return *response != NULL ? EVD_OK : evd_err_set(err, EVD_ENOMEM, "out of memory");
}

enum evd_code evd_evaluator_trajectory(const struct evd_evaluator_input *in, json_t **response,
                                       struct evd_err *err)
{
    *response = NULL;
    struct evd_trajectory_args args;
    json_t *calls = NULL;
    enum evd_code rc = evd_trajectory_args_decode(in->arguments, &args, err);
    if (rc == EVD_OK)
        rc = evd_trajectory_calls(in->transcript, &calls, err);
    if (rc == EVD_OK)
        rc = evd_trajectory_score(&args, calls, response, err);
    json_decref(calls);
    return rc;
}

/* ---- the transcript of one agent turn ------------------------------------------------- */

/* One harness function_calls entry as the transcript's {name, arguments, result?|error?}. */
static json_t *transcript_call(const json_t *fc)
{
    const char *name = json_string_value(json_object_get(fc, "function_id"));
    if (name == NULL)
        name = json_string_value(json_object_get(fc, "tool_name"));
    const json_t *args = json_object_get(fc, "arguments");
    json_t *call = json_pack("{s:s,s:o}", "name", name != NULL ? name : "", "arguments",
                             json_is_object(args) ? json_deep_copy(args) : json_object());
    const json_t *error = json_object_get(fc, "error");
    const json_t *result = json_object_get(fc, "result");
    int rc = call == NULL;
    if (rc == 0 && json_is_string(error))
        rc = json_object_set_new(call, "error", json_deep_copy(error));
    else if (rc == 0 && result != NULL)
        rc = json_object_set_new(call, "result", json_deep_copy(result));
    if (rc != 0) {
        json_decref(call);
        return NULL;
    }
    return call;
}

json_t *evd_trajectory_transcript(const json_t *prior, const char *prompt, const json_t *output,
                                  const json_t *harness)
{
    json_t *t = json_is_array(prior) ? json_deep_copy(prior) : json_array();
    json_t *answer = NULL;
    char *text = NULL;
    int rc = t == NULL;
    if (rc == 0 && prompt != NULL && prompt[0] != '\0')
        rc = json_array_append_new(t, json_pack("{s:s,s:s}", "role", "user", "content", prompt));
    if (rc == 0 && output != NULL && !json_is_null(output) && !json_is_string(output))
        rc = (text = evd_canonical_dump(output)) == NULL;
    if (rc == 0) {
        const char *content = json_is_string(output) ? json_string_value(output) : text;
        answer = json_pack("{s:s,s:s}", "role", "assistant", "content", content ? content : "");
        rc = answer == NULL;
    }
    const json_t *fcs = json_object_get(harness, "function_calls");
    if (rc == 0 && json_array_size(fcs) > 0) {
        json_t *calls = json_array();
        size_t i;
        const json_t *fc;
        json_array_foreach(fcs, i, fc)
        {
            if (calls == NULL || json_array_append_new(calls, transcript_call(fc)) != 0)
                break;
        }
        if (calls != NULL && json_array_size(calls) != json_array_size(fcs)) {
            json_decref(calls);
            calls = NULL;
        }
        rc = calls == NULL || json_object_set_new(answer, "function_calls", calls) != 0;
    }
    if (rc == 0)
        rc = json_array_append(t, answer) != 0;
    json_decref(answer);
    free(text);
    if (rc != 0) {
        json_decref(t);
        return NULL;
    }
    return t;
}
