/* The pairwise judge of an experiment; see judge.h. */
#include "domain/judge.h"
#include "domain/preference.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "domain/fields.h"
#include "domain/request.h"
#include "domain/template.h"

static bool present(const json_t *v)
{
    return v != NULL && !json_is_null(v);
}

static enum evd_code oom(struct evd_err *err)
{
    return evd_err_set(err, EVD_ENOMEM, "out of memory");
}

enum evd_code evd_judge_request(const json_t *judge, json_t **out, struct evd_err *err)
{
    static const char *const known[] = {"kind",   "model",      "task", "instructions",
                                        "orders", "max_tokens", NULL};
    *out = NULL;
    if (!present(judge)) {
        *out = json_null();
        return EVD_OK;
    }
    if (!json_is_object(judge))
        return evd_err_set(err, EVD_EINVAL, "judge must be an object");
    enum evd_code rc = evd_fields_only(judge, "judge", known, err);
    if (rc != EVD_OK)
        return rc;
    const json_t *kind = json_object_get(judge, "kind");
    if (present(kind) &&
        (!json_is_string(kind) || strcmp(json_string_value(kind), "pairwise") != 0))
        return evd_err_set(err, EVD_EINVAL, "judge.kind must be pairwise");
    const json_t *model = json_object_get(judge, "model");
    if (!present(model))
        return evd_err_set(err, EVD_EINVAL, "judge.model is required");
    json_t *m = NULL;
    if ((rc = evd_request_model(model, &m, err)) != EVD_OK) {
        evd_err_prefix(err, "model", "judge.");
        return rc;
    }
    const json_t *task = json_object_get(judge, "task");
    const json_t *instructions = json_object_get(judge, "instructions");
    const json_t *orders = json_object_get(judge, "orders");
    const json_t *max = json_object_get(judge, "max_tokens");
    if (!present(task))
        rc = evd_err_set(err, EVD_EINVAL, "judge.task is required");
    else if (!json_is_string(task))
        rc = evd_err_set(err, EVD_EINVAL, "judge.task must be a string");
    else if (json_string_length(task) == 0)
        rc = evd_err_set(err, EVD_EINVAL, "judge.task cannot be empty");
    else if (present(instructions) && !json_is_string(instructions))
        rc = evd_err_set(err, EVD_EINVAL, "judge.instructions must be a string");
    else if (present(orders) &&
             (!json_is_string(orders) || (strcmp(json_string_value(orders), "both") != 0 &&
                                          strcmp(json_string_value(orders), "one") != 0)))
        rc = evd_err_set(err, EVD_EINVAL, "judge.orders must be both or one");
    else if (present(max) && (!json_is_integer(max) || json_integer_value(max) < 1 ||
                              json_integer_value(max) > EVD_JUDGE_MAX_TOKENS))
        rc = evd_err_set(err, EVD_EINVAL, "judge.max_tokens must be between 1 and %d",
                         EVD_JUDGE_MAX_TOKENS);
    if (rc != EVD_OK) {
        json_decref(m);
        return rc;
    }
    *out = json_pack("{s:s, s:o, s:O, s:O, s:s, s:I}", "kind", "pairwise", "model", m, "task",
                     task, "instructions", present(instructions) ? instructions : json_null(),
                     "orders", present(orders) ? json_string_value(orders) : "both",
                     "max_tokens",
                     present(max) ? json_integer_value(max)
                                  : (json_int_t)EVD_JUDGE_DEFAULT_MAX_TOKENS);
    return *out != NULL ? EVD_OK : oom(err);
}

/* Appends the rendered string member `key` of the judge (nothing when it is null). */
static enum evd_code render(const json_t *judge, const char *key, const json_t *c,
                            struct evd_buf *b, struct evd_err *err)
{
    const json_t *v = json_object_get(judge, key);
    if (!json_is_string(v))
        return EVD_OK;
    return evd_template_render(json_string_value(v), json_string_length(v), c, b, err);
}

enum evd_code evd_judge_check_case(const json_t *judge, const json_t *c, struct evd_err *err)
{
    struct evd_buf b = {0};
    enum evd_code rc = render(judge, "task", c, &b, err);
    if (rc == EVD_OK)
        rc = render(judge, "instructions", c, &b, err);
    evd_buf_free(&b);
    return rc;
}

/* Appends "<tag>\n" + text + "\n</tag>\n". */
static int tagged(struct evd_buf *b, const char *tag, const char *text, size_t len)
{
    char open[48], close[48];
    int no = snprintf(open, sizeof(open), "<%s>\n", tag);
    int nc = snprintf(close, sizeof(close), "\n</%s>\n", tag);
    return evd_buf_append(b, open, (size_t)no) | evd_buf_append(b, text, len) |
           evd_buf_append(b, close, (size_t)nc);
}

enum evd_code evd_judge_prompt(const json_t *judge, const json_t *c, const char *slot1,
                               size_t len1, const char *slot2, size_t len2, char **prompt,
                               char **instructions, struct evd_err *err)
{
    *prompt = *instructions = NULL;
    struct evd_buf task = {0}, ins = {0}, out = {0};
    enum evd_code rc = render(judge, "task", c, &task, err);
    if (rc == EVD_OK)
        rc = render(judge, "instructions", c, &ins, err);
    static const char HEAD[] =
        "Two answers were given to the task below. Compare them and say which one is "
        "better, or that neither is: answer with winner \"1\" for the first answer, \"2\" "
        "for the second, or \"tie\", and a short reason.\n\n";
    if (rc == EVD_OK &&
        (evd_buf_append(&out, HEAD, sizeof(HEAD) - 1) != 0 ||
         tagged(&out, "task", task.data != NULL ? task.data : "", task.len) != 0 ||
         tagged(&out, "answer_1", slot1 != NULL ? slot1 : "", slot1 != NULL ? len1 : 0) != 0 ||
         tagged(&out, "answer_2", slot2 != NULL ? slot2 : "", slot2 != NULL ? len2 : 0) != 0 ||
         evd_buf_append(&out, "", 1) != 0))
        rc = oom(err);
    if (rc == EVD_OK && json_is_string(json_object_get(judge, "instructions"))) {
        if (evd_buf_append(&ins, "", 1) != 0) {
            rc = oom(err);
        } else {
            *instructions = ins.data;
            ins.data = NULL;
        }
    }
    if (rc == EVD_OK) {
        *prompt = out.data;
        out.data = NULL;
    }
    evd_buf_free(&task);
    evd_buf_free(&ins);
    evd_buf_free(&out);
    return rc;
}

json_t *evd_judge_schema(void)
{
    return json_pack("{s:s, s:{s:{s:s, s:[s, s, s]}, s:{s:s}}, s:[s, s], s:b}", "type", "object",
                     "properties", "winner", "type", "string", "enum", "1", "2", "tie", "reason",
                     "type", "string", "required", "winner", "reason", "additionalProperties",
                     0);
}

unsigned evd_judge_orders(const json_t *judge)
{
    if (!json_is_object(judge))
        return 0;
    const char *o = json_string_value(json_object_get(judge, "orders"));
    return o != NULL && strcmp(o, "one") == 0 ? 1 : 2;
}

void evd_judge_call_at(unsigned treatments, unsigned orders, uint32_t p,
                       struct evd_judge_call *out)
{
    uint32_t k = p - 1;
    out->repeat = k / (orders * treatments) + 1;
    out->treatment = (k / orders) % treatments + 1;
    out->order = orders == 2 ? k % 2 + 1 : evd_pref_single_order(out->repeat);
}
