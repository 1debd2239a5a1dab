/* Validation of a person's review of a run; see human_review.h. Pure; thread-safe. */
#include "domain/human_review.h"

#include <string.h>

#include "domain/fields.h"

static size_t utf8_chars(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* A string member: no NUL, at most max characters, not empty when required. */
static enum evd_code text(const json_t *body, const char *key, bool required, size_t max,
                          const char **out, struct evd_err *err)
{
    json_t *v = NULL;
    enum evd_code rc = evd_fields_get(
        body, NULL, key, EVD_F_STRING | (required ? EVD_F_REQUIRED : EVD_F_NULLABLE), &v, err);
    *out = NULL;
    if (rc != EVD_OK || v == NULL)
        return rc;
    size_t len = json_string_length(v);
    const char *s = json_string_value(v);
    if (strlen(s) != len)
        return evd_err_set(err, EVD_EINVAL, "%s cannot contain NUL characters", key);
    if (required && len == 0)
        return evd_err_set(err, EVD_EINVAL, "%s cannot be empty", key);
    if (utf8_chars(s, len) > max)
        return evd_err_set(err, EVD_EINVAL, "%s must be at most %zu characters", key, max);
    *out = s;
    return EVD_OK;
}

enum evd_code evd_human_review_decode(const json_t *body, struct evd_human_review *out,
                                      struct evd_err *err)
{
    static const char *const fields[] = {"verdict", "note", "reviewer", NULL};
    static const char *const verdicts[] = {"pass", "fail"};
    memset(out, 0, sizeof(*out));
    if (!json_is_object(body))
        return evd_err_set(err, EVD_EINVAL, "request body must be a JSON object");
    int verdict = -1;
    enum evd_code rc;
    if ((rc = evd_fields_only(body, NULL, fields, err)) != EVD_OK ||
        (rc = evd_fields_enum(body, NULL, "verdict", EVD_F_REQUIRED, verdicts, 2, &verdict, err)) !=
            EVD_OK ||
        (rc = text(body, "note", false, EVD_HUMAN_REVIEW_NOTE_MAX, &out->note, err)) != EVD_OK ||
        (rc = text(body, "reviewer", true, EVD_HUMAN_REVIEW_REVIEWER_MAX, &out->reviewer, err)) !=
            EVD_OK)
        return rc;
    out->pass = verdict == 0;
    return EVD_OK;
}

enum evd_code evd_pair_review_decode(const json_t *body, struct evd_pair_review *out,
                                     struct evd_err *err)
{
    static const char *const fields[] = {"winner", "note", "reviewer", NULL};
    static const char *const winners[] = {"control", "tie", "treatment"};
    memset(out, 0, sizeof(*out));
    if (!json_is_object(body))
        return evd_err_set(err, EVD_EINVAL, "request body must be a JSON object");
    int winner = -1;
    enum evd_code rc;
    if ((rc = evd_fields_only(body, NULL, fields, err)) != EVD_OK ||
        (rc = evd_fields_enum(body, NULL, "winner", EVD_F_REQUIRED, winners, 3, &winner, err)) !=
            EVD_OK ||
        (rc = text(body, "note", false, EVD_HUMAN_REVIEW_NOTE_MAX, &out->note, err)) != EVD_OK ||
        (rc = text(body, "reviewer", true, EVD_HUMAN_REVIEW_REVIEWER_MAX, &out->reviewer, err)) !=
            EVD_OK)
        return rc;
    out->winner = winners[winner];
    return EVD_OK;
}

double evd_human_review_threshold(const json_t *evaluator)
{
    const json_t *t = json_object_get(json_object_get(evaluator, "arguments"), "threshold");
    if (json_is_number(t)) {
        double v = json_number_value(t);
        if (v >= 0 && v <= 1)
            return v;
    }
    return 0.5;
}
