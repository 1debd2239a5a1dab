/*
 * The agent review evaluator (eval::assert::agent_review) on top of the harness: a
 * reviewing agent reads a run's output and metrics summary (domain/review.h builds the
 * prompts) and answers a GREEN/RED verdict through the structured-output layer, with one
 * tools-disabled repair. The whole review, repair included, shares one deadline: the
 * evaluation's invocation timeout. Runs on the calling worker's thread; inputs are
 * borrowed; answers and transcripts are new references.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/review.h"
#include "engine/internal.h"
#include "harness/providers.h"

/* Renames "model.<field>" in a provider-resolution message to the argument's path. */
static enum evd_code argument_error(struct evd_err *err, const struct evd_err *src)
{
    const char *m = src->msg;
    if (strncmp(m, "model.", 6) == 0)
        return evd_err_set(err, src->code, "evaluator.arguments.%s", m + 6);
    return evd_err_set(err, src->code, "%s", m);
}

enum evd_code evd_engine_review_check(const struct evd_providers *providers,
                                      const json_t *arguments, struct evd_err *err)
{
    struct evd_review_args a;
    enum evd_code rc = evd_review_args_decode(arguments, &a, err);
    if (rc != EVD_OK)
        return rc;
    struct evd_so_contract *c = evd_review_contract_new(&a, err);
    json_t *model = c != NULL ? evd_review_model(&a) : NULL;
    if (c == NULL) {
        rc = err != NULL ? err->code : EVD_EINVAL;
    } else if (model == NULL) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
    } else {
        struct evd_resolved_model rm;
        struct evd_err rerr = {EVD_OK, ""};
        if (evd_providers_resolve(providers, model, &rm, &rerr) != EVD_OK)
            rc = argument_error(err, &rerr);
    }
    json_decref(model);
    evd_so_contract_free(c);
    evd_review_args_clear(&a);
    return rc;
}

/* The review's record for the run's transcript: who reviewed, how it ended, each turn. */
static json_t *review_transcript(const char *session_id, const struct evd_harness_outcome *o)
{
    json_t *t =
        json_pack("{s:s, s:s, s:O*, s:O*}", "session_id", session_id, "status",
                  evd_harness_status_name(o->status), "metrics", o->metrics, "spans", o->spans);
    if (t == NULL)
        return NULL;
    json_t *gens = json_object_get(o->transcript, "generations");
    json_t *calls = json_object_get(o->transcript, "function_calls");
    json_object_set(t, "generations", gens != NULL ? gens : json_array());
    json_object_set(t, "function_calls", calls != NULL ? calls : json_array());
    if (o->status != EVD_HARNESS_COMPLETED && o->phase != NULL)
        json_object_set_new(t, "phase", json_string(o->phase));
    return t;
}

/* "max_total_tokens" is the harness's name of the review's max_tokens budget. */
static void budget_names(char *msg)
{
    static const char from[] = "max_total_tokens", to[] = "max_tokens";
    char *p = strstr(msg, from);
    if (p == NULL)
        return;
    size_t nf = sizeof(from) - 1, nt = sizeof(to) - 1;
    memmove(p + nt, p + nf, strlen(p + nf) + 1); /* the name only gets shorter */
    memcpy(p, to, nt);
}

enum evd_code evd_engine_review(const struct evd_providers *providers, const json_t *input,
                                const struct evd_limits *limits, json_t *tools,
                                struct evd_cancel *cancel, json_t **answer, json_t **transcript,
                                struct evd_err *err)
{
    struct evd_evaluator_input in;
    struct evd_review_args a;
    struct evd_harness_outcome out;
    struct evd_so_contract *contract = NULL;
    json_t *model = NULL, *lim = NULL;
    char *system = NULL, *prompt = NULL;
    char session[160];
    enum evd_code rc;

    *answer = NULL;
    *transcript = NULL;
    memset(&out, 0, sizeof(out));
    memset(&a, 0, sizeof(a));
    if ((rc = evd_request_evaluator_input(input, &in, err)) != EVD_OK ||
        (rc = evd_review_args_decode(in.arguments, &a, err)) != EVD_OK)
        goto out;
    if ((contract = evd_review_contract_new(&a, err)) == NULL) {
        rc = err != NULL ? err->code : EVD_EINVAL;
        goto out;
    }
    model = evd_review_model(&a);
    system = evd_review_system_prompt(&a);
    prompt = evd_review_prompt(&in);
    json_int_t timeout = (json_int_t)limits->invocation_timeout_seconds;
    lim = json_pack("{s:{s:I, s:I}}", "execution", "invocation_timeout_seconds", timeout,
                    "scenario_timeout_seconds", timeout);
    if (model == NULL || system == NULL || prompt == NULL || lim == NULL ||
        (a.has_max_tokens &&
         json_object_set_new(json_object_get(lim, "execution"), "max_total_tokens",
                             json_integer((json_int_t)a.max_tokens)) != 0)) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    snprintf(session, sizeof(session), "%.140s-review", in.session_id);
    struct evd_harness_input hin = {
        .session_id = session,
        .prompt = prompt,
        .system_prompt = system,
        .model = model,
        .limits = lim,
        .functions = a.functions,
        .tools = tools,
        .contract = contract,
        .has_max_tool_calls = a.has_max_tool_calls,
        .max_tool_calls = (int64_t)a.max_tool_calls,
    };
    if ((rc = evd_harness_run(providers, &hin, cancel, &out, err)) != EVD_OK)
        goto out;
    *transcript = review_transcript(session, &out);
    switch (out.status) {
    case EVD_HARNESS_COMPLETED:
        *answer = evd_review_response(out.output, a.model);
        rc = *answer != NULL ? EVD_OK : evd_err_set(err, EVD_ENOMEM, "out of memory");
        break;
    case EVD_HARNESS_CANCELLED:
        rc = evd_err_set(err, EVD_ECANCELLED, "agent review was cancelled");
        break;
    case EVD_HARNESS_FAILED:
        if (out.output_invalid) {
            /* The saved error is the failure code alone, never the reviewer's output. */
            rc = evd_err_set(err, EVD_EINVAL, "%s", out.result_error);
        } else {
            char msg[EVD_ERR_MSG_MAX];
            snprintf(msg, sizeof(msg), "%s", out.result_error ? out.result_error : "failed");
            budget_names(msg);
            rc = evd_err_set(err, out.code != EVD_OK ? out.code : EVD_EUPSTREAM,
                             "agent review failed (%s): %s", out.phase ? out.phase : "send", msg);
        }
        break;
    }
out:
    evd_harness_outcome_clear(&out);
    evd_so_contract_free(contract);
    evd_review_args_clear(&a);
    json_decref(model);
    json_decref(lim);
    free(system);
    free(prompt);
    return rc;
}
