/*
 * Templates of experiments (../shared/spec/experiments.md, "Templates"): `{{name}}` in a
 * prompt, a system prompt or a string of evaluator.arguments is replaced by the case's
 * value of that name. Spaces inside the braces are allowed (`{{ question }}`); a name is
 * `[A-Za-z_][A-Za-z0-9_]*`, and dots index nested objects (`{{user.address.city}}`). The
 * root `expected` names the case's expected value; every other root names a member of
 * the case's vars. Text between `{{` and `}}` that is not a name is left as it is.
 *
 * A string value is inserted as it is; any other value (null included) as compact JSON.
 * An argument string that is exactly one placeholder is replaced by the value itself,
 * so `"expected": "{{expected}}"` can be an object.
 *
 * Cases are normalized cases (domain/dataset.h): {id, vars, expected, metadata}.
 * Pure; thread-safe; values passed in are borrowed for the call.
 */
#ifndef EVD_DOMAIN_TEMPLATE_H
#define EVD_DOMAIN_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "common/util.h"

/* Longest placeholder name, dots included. */
#define EVD_TEMPLATE_NAME_MAX 200

/*
 * The case's value of `name` (len bytes; a dotted path), borrowed from the case, or NULL
 * when it is not defined.
 */
const json_t *evd_template_lookup(const json_t *c, const char *name, size_t len);

/*
 * Appends tmpl (len bytes) with every placeholder replaced to out. EVD_OK, or EVD_EINVAL
 * "case <id>: template variable <name> is not defined" for the first undefined name, or
 * EVD_ENOMEM.
 */
enum evd_code evd_template_render(const char *tmpl, size_t len, const json_t *c,
                                  struct evd_buf *out, struct evd_err *err);

/*
 * Renders a JSON value (borrowed): every string in it, at any depth, is rendered (object
 * keys are not); a string that is exactly one placeholder becomes the value itself. On
 * EVD_OK *out is a new reference.
 */
enum evd_code evd_template_render_json(const json_t *v, const json_t *c, json_t **out,
                                       struct evd_err *err);

/* True when s (len bytes) is a name as placeholders write it (dots included, no spaces). */
bool evd_template_is_name(const char *s, size_t len);

/* True when the JSON value (borrowed) holds a placeholder in any string. */
bool evd_template_has_placeholder(const json_t *v);

#endif
