/*
 * The members of an experiment's start that say when it may stop and what it may spend
 * (../shared/spec/sequential.md, "Request"): `stopping`, `budget`, and the `plan` a start
 * accepts and keeps unused. See experiment.h.
 */
#include "domain/experiment.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "domain/fields.h"

static bool present(const json_t *v)
{
    return v != NULL && !json_is_null(v);
}

/* A JSON number that is an integer value (2 and 2.0 alike). */
static bool integral(const json_t *v, double *out)
{
    if (!json_is_number(v))
        return false;
    double d = json_number_value(v);
    if (!isfinite(d) || d != floor(d))
        return false;
    *out = d;
    return true;
}

static enum evd_code oom(struct evd_err *err)
{
    return evd_err_set(err, EVD_ENOMEM, "out of memory");
}

enum evd_code evd_experiment_stopping(const json_t *s, json_t **out, struct evd_err *err)
{
    static const char *const known[] = {"rule", "min_cases", "seed", NULL};
    *out = NULL;
    const char *rule = "fixed";
    double min_cases = EVD_EXPERIMENT_DEFAULT_MIN_CASES, seed = -1;
    if (present(s)) {
        enum evd_code rc;
        if (!json_is_object(s))
            return evd_err_set(err, EVD_EINVAL, "stopping must be an object");
        if ((rc = evd_fields_only(s, "stopping", known, err)) != EVD_OK)
            return rc;
        const json_t *v = json_object_get(s, "rule");
        if (present(v)) {
            rule = json_string_value(v);
            if (rule == NULL || (strcmp(rule, "fixed") != 0 && strcmp(rule, "anytime") != 0))
                return evd_err_set(err, EVD_EINVAL, "stopping.rule must be fixed or anytime");
        }
        v = json_object_get(s, "min_cases");
        if (present(v) &&
            (!integral(v, &min_cases) || min_cases < 2 || min_cases > EVD_EXPERIMENT_MAX_MIN_CASES))
            return evd_err_set(err, EVD_EINVAL, "stopping.min_cases must be between 2 and %u",
                               EVD_EXPERIMENT_MAX_MIN_CASES);
        v = json_object_get(s, "seed");
        if (present(v) && (!integral(v, &seed) || seed < 0 || seed > EVD_EXPERIMENT_MAX_SEED))
            return evd_err_set(err, EVD_EINVAL, "stopping.seed must be a non-negative integer");
    }
    *out = json_pack("{s:s, s:I, s:o}", "rule", rule, "min_cases", (json_int_t)min_cases, "seed",
                     seed >= 0 ? json_integer((json_int_t)seed) : json_null());
    return *out != NULL ? EVD_OK : oom(err);
}

enum evd_code evd_experiment_budget(const json_t *b, json_t **out, struct evd_err *err)
{
    static const char *const known[] = {"max_calls", "max_tokens", "max_cost_usd", NULL};
    *out = NULL;
    if (!present(b)) {
        *out = json_null();
        return EVD_OK;
    }
    enum evd_code rc;
    if (!json_is_object(b))
        return evd_err_set(err, EVD_EINVAL, "budget must be an object");
    if ((rc = evd_fields_only(b, "budget", known, err)) != EVD_OK)
        return rc;
    json_t *o = json_object();
    if (o == NULL)
        return oom(err);
    static const char *const ints[] = {"max_calls", "max_tokens"};
    for (size_t i = 0; i < 2; i++) {
        const json_t *v = json_object_get(b, ints[i]);
        double d;
        if (!present(v))
            continue;
        if (!integral(v, &d) || d < 1 || d > 9007199254740991.0) {
            json_decref(o);
            return evd_err_set(err, EVD_EINVAL, "budget.%s must be a positive integer", ints[i]);
        }
        json_object_set_new(o, ints[i], json_integer((json_int_t)d));
    }
    const json_t *v = json_object_get(b, "max_cost_usd");
    if (present(v)) {
        double d = json_is_number(v) ? json_number_value(v) : NAN;
        if (!(d > 0) || !isfinite(d)) {
            json_decref(o);
            return evd_err_set(err, EVD_EINVAL, "budget.max_cost_usd must be a positive number");
        }
        json_object_set_new(o, "max_cost_usd", json_real(d));
    }
    *out = o;
    return EVD_OK;
}

enum evd_code evd_experiment_plan_options(const json_t *p, struct evd_experiment_plan_opts *out,
                                          struct evd_err *err)
{
    static const char *const known[] = {"effect", "sd", "pilot_experiment_id", NULL};
    memset(out, 0, sizeof(*out));
    if (!present(p))
        return EVD_OK;
    enum evd_code rc;
    if (!json_is_object(p))
        return evd_err_set(err, EVD_EINVAL, "plan must be an object");
    if ((rc = evd_fields_only(p, "plan", known, err)) != EVD_OK)
        return rc;
    const json_t *v = json_object_get(p, "effect");
    if (present(v)) {
        double d = json_is_number(v) ? json_number_value(v) : NAN;
        if (!(d > 0 && d <= 1))
            return evd_err_set(err, EVD_EINVAL, "plan.effect must be between 0 and 1");
        out->has_effect = true;
        out->effect = d;
    }
    v = json_object_get(p, "sd");
    if (present(v)) {
        double d = json_is_number(v) ? json_number_value(v) : NAN;
        if (!(d > 0) || !isfinite(d))
            return evd_err_set(err, EVD_EINVAL, "plan.sd must be a positive number");
        out->has_sd = true;
        out->sd = d;
    }
    v = json_object_get(p, "pilot_experiment_id");
    if (present(v)) {
        if (!json_is_string(v))
            return evd_err_set(err, EVD_EINVAL, "plan.pilot_experiment_id must be a string");
        out->pilot = json_string_value(v);
    }
    return EVD_OK;
}
