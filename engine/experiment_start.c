/*
 * Starting an experiment (POST /v1/experiments; experiments.h, docs/experiments.md). The
 * body streams in: its inline cases are split off as they come (domain/json_split.h),
 * normalized by a dataset reader and spooled to a temporary file (engine/datasets.c), so
 * that a start of tens of megabytes holds one case at a time, never the body or its tree.
 * At the end the rest of the body (the request without its cases) is parsed and checked;
 * then every case, read back one at a time, is checked against the templates; only then
 * is the dataset written, and the experiment with it, in one transaction.
 *
 * The order of refusals is the order of a parse of the whole body: malformed JSON first,
 * then the request's fields, then the cases (the first case refused, by its index).
 */
#include "engine/experiments.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "domain/canonical.h"
#include "domain/dataset.h"
#include "domain/experiment.h"
#include "domain/json_split.h"
#include "domain/judge.h"
#include "domain/mock_tools.h"
#include "domain/plan.h"
#include "domain/sequential.h"
#include "engine/datasets.h"
#include "engine/internal.h"
#include "store/datasets.h"
#include "store/experiments.h"
#include "store/tools.h"

struct evd_experiment_upload {
    struct evd_engine *engine;
    struct evd_json_split *split;
    struct evd_dataset_upload *cases; /* EVD_DATASET_CASES: the inline cases, spooled */
    size_t ncases;                    /* elements split off */
    /* For Idempotency-Key: the canonical JSON of every element, as received. */
    struct evd_sha256 cases_hash;
    struct evd_buf canon;
    /* The first element that is not JSON, and the first case the reader refused. */
    struct evd_err malformed, refused;
    /* The rest of the body, parsed once (parse_rest), for the fingerprint and the end. */
    json_t *request;
    struct evd_err request_err;
};

/* The splitter's element: parsed, hashed and handed to the reader. A failure is kept, not
 * returned, so that the rest of the body is still read and its own errors come first. */
static enum evd_code on_case(void *ctx, size_t index, const char *text, size_t len, int line,
                             int column, struct evd_err *err)
{
    (void)err;
    struct evd_experiment_upload *u = ctx;
    u->ncases = index + 1;
    if (u->malformed.code != EVD_OK)
        return EVD_OK;
    json_error_t jerr;
    json_t *raw = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
    if (raw == NULL) {
        evd_json_split_error(&jerr, line, column, &u->malformed);
        return EVD_OK;
    }
    u->canon.len = 0;
    if (evd_buf_append(&u->canon, index == 0 ? "[" : ",", 1) != 0 ||
        evd_canonical_append(&u->canon, raw) != 0) {
        json_decref(raw);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    evd_sha256_update(&u->cases_hash, u->canon.data, u->canon.len);
    if (u->refused.code == EVD_OK)
        evd_dataset_upload_case(u->cases, raw, index, &u->refused);
    json_decref(raw);
    return EVD_OK;
}

enum evd_code evd_experiment_upload_begin(struct evd_engine *e,
                                          struct evd_experiment_upload **out,
                                          struct evd_err *err)
{
    *out = NULL;
    struct evd_experiment_upload *u = calloc(1, sizeof(*u));
    if (u == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    u->engine = e;
    size_t max = e->opts.max_dataset_cases > 0 ? (size_t)e->opts.max_dataset_cases : 10000;
    enum evd_code rc = evd_dataset_upload_begin(e, EVD_DATASET_CASES, NULL, max, &u->cases, err);
    if (rc != EVD_OK) {
        evd_experiment_upload_free(u);
        return rc;
    }
    u->split = evd_json_split_new("cases", on_case, u);
    if (u->split == NULL || evd_sha256_init(&u->cases_hash) != 0) {
        evd_experiment_upload_free(u);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    *out = u;
    return EVD_OK;
}

enum evd_code evd_experiment_upload_feed(struct evd_experiment_upload *u, const void *data,
                                         size_t len, struct evd_err *err)
{
    return evd_json_split_feed(u->split, data, len, err);
}

void evd_experiment_upload_free(struct evd_experiment_upload *u)
{
    if (u == NULL)
        return;
    evd_json_split_free(u->split);
    evd_dataset_upload_free(u->cases);
    evd_sha256_free(&u->cases_hash);
    evd_buf_free(&u->canon);
    json_decref(u->request);
    free(u);
}

/* The rest of the body, parsed once (borrowed from u), or NULL with its refusal: an empty
 * body is not a JSON object, anything else that does not parse is malformed JSON. */
static const json_t *parse_rest(struct evd_experiment_upload *u, struct evd_err *err)
{
    if (u->request == NULL && u->request_err.code == EVD_OK) {
        size_t len = 0;
        const char *rest = evd_json_split_rest(u->split, &len);
        size_t blank = 0;
        while (blank < len && (rest[blank] == ' ' || rest[blank] == '\t' ||
                               rest[blank] == '\r' || rest[blank] == '\n'))
            blank++;
        json_error_t jerr;
        if (blank == len)
            evd_err_set(&u->request_err, EVD_EINVAL, "request body must be a JSON object");
        else if ((u->request = json_loadb(rest, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES,
                                          &jerr)) == NULL)
            evd_err_set(&u->request_err, EVD_EINVAL, "malformed JSON: %s at line %d column %d",
                        jerr.text, jerr.line, jerr.column);
    }
    if (u->request == NULL && err != NULL)
        *err = u->request_err;
    return u->request;
}

bool evd_experiment_upload_fingerprint(struct evd_experiment_upload *u, char out[65])
{
    const json_t *rest = parse_rest(u, NULL);
    char rest_sha[65], cases_sha[65];
    bool ok = rest != NULL && u->malformed.code == EVD_OK &&
              evd_canonical_sha256(rest, rest_sha) == 0;
    if (!ok)
        return false;
    evd_sha256_update(&u->cases_hash, "]", 1);
    evd_sha256_final_hex(&u->cases_hash, cases_sha);
    char both[140];
    int n = snprintf(both, sizeof(both), "%s %s %zu", rest_sha, cases_sha, u->ncases);
    evd_sha256_hex(both, (size_t)n, out);
    return true;
}

/* ---- the start ------------------------------------------------------------------ */

/* Where a start's cases come from: a dataset's bodies, or an upload's spool. */
struct cases {
    json_t *bodies; /* dataset_id: every case (owned) */
    size_t next;
    struct evd_dataset_upload *spool; /* inline: the normalized cases (borrowed) */
};

/* The next case (new reference), NULL at the end, or NULL with err->code set. */
static json_t *next_case(struct cases *cs, struct evd_err *err)
{
    if (cs->bodies != NULL)
        return json_incref(json_array_get(cs->bodies, cs->next++));
    return evd_dataset_upload_next(cs->spool, err);
}

/* "{1,0,0,1}" of n ints. */
static char *int_array(const unsigned *v, size_t n)
{
    struct evd_buf b = {0};
    evd_buf_append(&b, "{", 1);
    for (size_t i = 0; i < n; i++) {
        char s[16];
        int k = snprintf(s, sizeof(s), "%s%u", i ? "," : "", v[i]);
        evd_buf_append(&b, s, (size_t)k);
    }
    if (evd_buf_append(&b, "}", 2) != 0) {
        evd_buf_free(&b);
        return NULL;
    }
    return b.data;
}

/* A text[] literal of strings (each quoted and escaped), NULL entries as NULL. */
static char *text_array(char **v, size_t n)
{
    struct evd_buf b = {0};
    int rc = evd_buf_append(&b, "{", 1);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (i)
            rc |= evd_buf_append(&b, ",", 1);
        if (v[i] == NULL) {
            rc |= evd_buf_append(&b, "NULL", 4);
            continue;
        }
        rc |= evd_buf_append(&b, "\"", 1);
        for (const char *s = v[i]; *s && rc == 0; s++) {
            if (*s == '"' || *s == '\\')
                rc |= evd_buf_append(&b, "\\", 1);
            rc |= evd_buf_append(&b, s, 1);
        }
        rc |= evd_buf_append(&b, "\"", 1);
    }
    if (rc != 0 || evd_buf_append(&b, "}", 2) != 0) {
        evd_buf_free(&b);
        return NULL;
    }
    return b.data;
}

/* Prefixes a message about "model…" with the arm's variant ("control.", "treatments[i]."). */
static void name_arm(struct evd_err *err, size_t arm)
{
    if (err == NULL || strncmp(err->msg, "model", 5) != 0)
        return;
    char msg[EVD_ERR_MSG_MAX];
    if (arm == 0)
        snprintf(msg, sizeof(msg), "control.%.400s", err->msg);
    else
        snprintf(msg, sizeof(msg), "treatments[%zu].%.400s", arm - 1, err->msg);
    snprintf(err->msg, sizeof(err->msg), "%s", msg);
}

/* The model of every arm (one shared model, or a model experiment's one an arm) must
 * resolve to a configured provider, with the output contract, as an evaluation's start
 * checks them (evd_engine_check_start). */
static enum evd_code check_arm_models(struct evd_engine *e, PGconn *c, const json_t *normalized,
                                      size_t arms, struct evd_err *err)
{
    enum evd_code rc = EVD_OK;
    if (json_object_get(normalized, "model") != NULL)
        arms = 1;
    for (size_t arm = 0; rc == EVD_OK && arm < arms; arm++) {
        json_t *model = NULL;
        rc = evd_experiment_arm_model(normalized, arm, &model, err);
        if (rc == EVD_OK) {
            rc = evd_engine_check_start(e, c, model, json_object_get(normalized, "output"), NULL,
                                        err);
            if (rc != EVD_OK && arms > 1)
                name_arm(err, arm);
        }
        json_decref(model);
    }
    return rc;
}

/*
 * A mocked tool may not share its name with a registered tool (agent-cases.md), and a
 * simulated user's model must resolve like an arm's ("simulator.<the start's message>").
 */
static enum evd_code check_mock_names(struct evd_engine *e, PGconn *c, const json_t *normalized,
                                      struct evd_err *err)
{
    enum evd_code rc = EVD_OK;
    json_t *tools = json_object_get(normalized, "tools");
    if (json_array_size(tools) > 0) {
        json_t *registered = evd_store_tools_json(c, err);
        rc = registered != NULL ? evd_mock_tools_check_registered(tools, registered, err)
                                : evd_db_code(err);
        json_decref(registered);
    }
    const json_t *sim = json_object_get(normalized, "simulator");
    if (rc == EVD_OK && json_is_object(sim) &&
        (rc = evd_engine_check_start(e, c, json_object_get(sim, "model"), NULL, NULL, err)) !=
            EVD_OK) {
        char msg[EVD_ERR_MSG_MAX];
        snprintf(msg, sizeof(msg), "simulator.%.400s", err->msg);
        snprintf(err->msg, sizeof(err->msg), "%s", msg);
    }
    return rc;
}

/*
 * Checks every case against the request (each one read once, in order): its templates'
 * variables, its cluster key (clusters[i], malloc'd, when the analysis clusters), and, for
 * the first case, the model, the output contract and the evaluator as an evaluation's
 * start checks them.
 */
static enum evd_code check_cases(struct evd_engine *e, PGconn *c, const json_t *normalized,
                                 struct cases *cs, size_t ncases, char **clusters,
                                 uint64_t *prompt_bytes, struct evd_err *err)
{
    const size_t arms = evd_experiment_arms(normalized);
    const bool clustered =
        json_is_string(json_object_get(json_object_get(normalized, "analysis"), "cluster_by"));
    for (size_t i = 0; i < ncases; i++) {
        json_t *body = next_case(cs, err);
        if (body == NULL)
            return err && err->code ? err->code
                                    : evd_err_set(err, EVD_EINTERNAL, "a case went missing");
        enum evd_code rc = evd_experiment_check_case(normalized, body, err);
        if (rc == EVD_OK && clustered &&
            (clusters[i] = evd_experiment_cluster_key(normalized, body, err)) == NULL)
            rc = err && err->code ? err->code : EVD_ENOMEM;
        if (rc == EVD_OK && i == 0) {
            json_t *variant = NULL, *evaluator = NULL;
            rc = evd_experiment_cell(normalized, body, 0, &variant, &evaluator, err);
            if (rc == EVD_OK)
                rc = check_arm_models(e, c, normalized, arms, err);
            if (rc == EVD_OK && json_is_object(evaluator))
                rc = evd_engine_check_evaluator(e, c, evaluator, err);
            if (rc == EVD_OK)
                rc = check_mock_names(e, c, normalized, err);
            json_decref(variant);
            json_decref(evaluator);
        }
        /* A plan counts the bytes of every rendered prompt and system prompt. */
        for (size_t arm = 0; rc == EVD_OK && prompt_bytes != NULL && arm < arms; arm++) {
            json_t *variant = NULL, *evaluator = NULL;
            rc = evd_experiment_cell(normalized, body, arm, &variant, &evaluator, err);
            if (rc == EVD_OK)
                *prompt_bytes +=
                    json_string_length(json_object_get(variant, "prompt")) +
                    json_string_length(json_object_get(variant, "system_prompt"));
            json_decref(variant);
            json_decref(evaluator);
        }
        json_decref(body);
        if (rc != EVD_OK)
            return rc;
    }
    return EVD_OK;
}

/* The start once the request is valid: `normalized` (borrowed) and, for inline cases, the
 * sealed spool u (else the dataset of normalized.dataset_id). */
static enum evd_code start(struct evd_engine *e, json_t *normalized, struct evd_dataset_upload *u,
                           bool plan_only, json_t **response, struct evd_err *err)
{
    uint64_t prompt_bytes = 0;
    char *dispatch_text = NULL, *budget_text = NULL;
    json_t *dataset = NULL, *analysis = NULL;
    struct cases cs = {.spool = u};
    char **clusters = NULL;
    char *request_text = NULL, *analysis_text = NULL, *clusters_text = NULL;
    char *plan_arms = NULL, *plan_repeats = NULL;
    char *judge_repeats = NULL, *judge_treatments = NULL, *judge_order = NULL;
    size_t ncases = 0;
    enum evd_code rc = EVD_OK;
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    char id[64], dataset_id[64] = "";
    evd_new_id("exp_", id, sizeof(id));
    if (u != NULL) {
        ncases = evd_dataset_upload_count(u);
    } else {
        snprintf(dataset_id, sizeof(dataset_id), "%s",
                 json_string_value(json_object_get(normalized, "dataset_id")));
        if ((dataset = evd_store_dataset_get(c, dataset_id, err)) == NULL) {
            rc = evd_db_code(err);
            if (rc == EVD_ENOTFOUND)
                rc = evd_err_set(err, EVD_EINVAL, "dataset_id names no dataset: %s", dataset_id);
            goto out;
        }
        if ((cs.bodies = evd_store_dataset_bodies(c, dataset_id, err)) == NULL) {
            rc = evd_db_code(err);
            goto out;
        }
        ncases = json_array_size(cs.bodies);
    }
    uint64_t max_runs = e->opts.max_experiment_runs > 0 ? (uint64_t)e->opts.max_experiment_runs
                                                        : 100000;
    if ((rc = evd_experiment_check_size(normalized, ncases, max_runs, err)) != EVD_OK)
        goto out;
    const bool clustered =
        json_is_string(json_object_get(json_object_get(normalized, "analysis"), "cluster_by"));
    if ((clusters = calloc(ncases + 1, sizeof(char *))) == NULL) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = check_cases(e, c, normalized, &cs, ncases, clusters,
                          plan_only ? &prompt_bytes : NULL, err)) != EVD_OK)
        goto out;
    json_t *budget = NULL;
    if ((rc = evd_engine_experiment_budget(e, normalized, &budget, err)) != EVD_OK)
        goto out;
    if (plan_only) {
        json_decref(budget);
        rc = evd_engine_experiment_plan(e, c, normalized, ncases, prompt_bytes, response, err);
        goto out;
    }
    budget_text = budget != NULL ? json_dumps(budget, JSON_COMPACT) : NULL;
    json_decref(budget);
    /* The anytime rule dispatches the cases in the order of a permutation of its seed. */
    json_t *stopping = json_object_get(normalized, "stopping");
    if (!json_is_integer(json_object_get(stopping, "seed")))
        json_object_set_new(stopping, "seed", json_integer((json_int_t)evd_seq_default_seed(id)));
    const bool anytime =
        strcmp(json_string_value(json_object_get(stopping, "rule")), "anytime") == 0;
    if (anytime) {
        unsigned *order = calloc(ncases + 1, sizeof(unsigned));
        uint32_t *di = calloc(ncases + 1, sizeof(uint32_t));
        if (order != NULL && di != NULL) {
            evd_seq_permutation((uint64_t)json_integer_value(json_object_get(stopping, "seed")),
                                (uint32_t)ncases, di);
            for (size_t i = 0; i < ncases; i++)
                order[i] = di[i];
            dispatch_text = int_array(order, ncases);
        }
        free(order);
        free(di);
        if (dispatch_text == NULL) {
            rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
            goto out;
        }
    }
    if (u != NULL) {
        /* Stored only now that every case passed the checks. */
        const char *name = json_string_value(json_object_get(normalized, "name"));
        bool created = false;
        if ((rc = evd_dataset_upload_store(u, c, name ? name : id, &dataset, &created, err)) !=
            EVD_OK)
            goto out;
        snprintf(dataset_id, sizeof(dataset_id), "%s",
                 json_string_value(json_object_get(dataset, "dataset_id")));
    }
    json_object_set_new(normalized, "dataset_id", json_string(dataset_id));
    unsigned arms = (unsigned)evd_experiment_arms(normalized);
    unsigned repeats = (unsigned)json_integer_value(json_object_get(normalized, "repeats"));
    unsigned conc = (unsigned)json_integer_value(json_object_get(normalized, "concurrency"));
    unsigned *pa = calloc((size_t)arms * repeats, sizeof(unsigned));
    unsigned *pr = calloc((size_t)arms * repeats, sizeof(unsigned));
    for (unsigned pos = 1; pa && pr && pos <= arms * repeats; pos++) {
        uint32_t rep;
        unsigned arm;
        evd_plan_cell_at(arms, pos, &rep, &arm);
        pa[pos - 1] = arm;
        pr[pos - 1] = rep;
    }
    if (pa && pr) {
        plan_arms = int_array(pa, (size_t)arms * repeats);
        plan_repeats = int_array(pr, (size_t)arms * repeats);
    }
    free(pa);
    free(pr);
    /* The judge calls of a case (domain/judge.h), when there is a judge. */
    unsigned orders = evd_judge_orders(json_object_get(normalized, "judge"));
    size_t ncalls = (size_t)repeats * (arms - 1) * orders;
    if (orders > 0) {
        unsigned *jr = calloc(ncalls, sizeof(unsigned));
        unsigned *jt = calloc(ncalls, sizeof(unsigned));
        unsigned *jo = calloc(ncalls, sizeof(unsigned));
        for (size_t k = 0; jr && jt && jo && k < ncalls; k++) {
            struct evd_judge_call call;
            evd_judge_call_at(arms - 1, orders, (uint32_t)k + 1, &call);
            jr[k] = call.repeat;
            jt[k] = call.treatment;
            jo[k] = call.order;
        }
        if (jr && jt && jo) {
            judge_repeats = int_array(jr, ncalls);
            judge_treatments = int_array(jt, ncalls);
            judge_order = int_array(jo, ncalls);
        }
        free(jr);
        free(jt);
        free(jo);
        if (judge_repeats == NULL || judge_treatments == NULL || judge_order == NULL) {
            rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
            goto out;
        }
    }
    int64_t counts[3];
    analysis = evd_engine_experiment_analysis(normalized, arms, ncases, NULL, true, counts);
    request_text = json_dumps(normalized, JSON_COMPACT);
    analysis_text = analysis ? json_dumps(analysis, JSON_COMPACT) : NULL;
    clusters_text = clustered ? text_array(clusters, ncases) : NULL;
    if (plan_arms == NULL || plan_repeats == NULL || request_text == NULL ||
        analysis_text == NULL || (clustered && clusters_text == NULL)) {
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto out;
    }
    const struct evd_store_experiment_new x = {
        .id = id,
        .name = json_string_value(json_object_get(normalized, "name")),
        .request = request_text,
        .dataset_id = dataset_id,
        .sha256 = json_string_value(json_object_get(dataset, "sha256")),
        .arms = (int)arms,
        .repeats = (int)repeats,
        .concurrency = (int)conc,
        .case_count = (int)ncases,
        .analysis = analysis_text,
        .clusters = clusters_text,
        .plan_arms = plan_arms,
        .plan_repeats = plan_repeats,
        .dispatch = dispatch_text,
        .stop_rule = anytime ? "anytime" : "fixed",
        .budget = budget_text,
        .judge_orders = (int)orders,
        .judge_repeats = judge_repeats,
        .judge_treatments = judge_treatments,
        .judge_order = judge_order,
        .now = evd_now_ms(),
    };
    /* The dataset's row lock keeps a concurrent delete from taking the cases away. */
    bool found = false;
    if ((rc = evd_db_begin(c, err)) != EVD_OK ||
        (rc = evd_store_dataset_lock_share(c, dataset_id, &found, err)) != EVD_OK) {
        evd_db_rollback(c);
        goto out;
    }
    if (!found) {
        rc = evd_err_set(err, EVD_EINVAL, "dataset_id names no dataset: %s", dataset_id);
        evd_db_rollback(c);
        goto out;
    }
    if ((rc = evd_store_experiment_create(c, &x, e->owner, err)) != EVD_OK ||
        (rc = evd_db_commit(c, err)) != EVD_OK) {
        evd_db_rollback(c);
        goto out;
    }
    char total[32];
    snprintf(total, sizeof(total), "%llu", (unsigned long long)ncases * arms * repeats);
    evd_log(EVD_LOG_INFO, "experiment started", "experiment_id", id, "dataset_id", dataset_id,
            "runs", total, NULL);
    evd_engine_wake(e, conc);
    *response = json_pack("{s:s, s:s}", "experiment_id", id, "status", "queued");
    if (*response == NULL)
        rc = evd_err_set(err, EVD_ENOMEM, "out of memory");
out:
    evd_db_release(e->opts.db, c);
    for (size_t i = 0; clusters != NULL && i < ncases; i++)
        free(clusters[i]);
    free(clusters);
    free(request_text);
    free(analysis_text);
    free(clusters_text);
    free(plan_arms);
    free(plan_repeats);
    free(judge_repeats);
    free(judge_treatments);
    free(judge_order);
    free(dispatch_text);
    free(budget_text);
    json_decref(cs.bodies);
    json_decref(dataset);
    json_decref(analysis);
    return rc;
}

static enum evd_code finish(struct evd_experiment_upload *u, bool plan_only, json_t **response,
                            struct evd_err *err)
{
    *response = NULL;
    struct evd_experiment_limits lim = {
        .max_repeats = (uint32_t)(u->engine->opts.max_runs > 0 ? u->engine->opts.max_runs : 100),
        .max_concurrency = (uint32_t)(u->engine->opts.max_concurrency > 0
                                          ? u->engine->opts.max_concurrency
                                          : 256),
    };
    json_t *normalized = NULL;
    const json_t *body = NULL, *inline_cases = NULL;
    enum evd_code rc;
    if (u->malformed.code != EVD_OK) {
        if (err != NULL)
            *err = u->malformed;
        return u->malformed.code;
    }
    if ((body = parse_rest(u, err)) == NULL)
        return EVD_EINVAL;
    if ((rc = evd_experiment_request(body, &lim, &normalized, &inline_cases, err)) != EVD_OK)
        goto out;
    if (inline_cases != NULL) {
        /* Cases the splitter left in the rest (an escaped member name) go the same way. */
        size_t i;
        json_t *raw;
        json_array_foreach(inline_cases, i, raw)
        {
            if (u->refused.code == EVD_OK)
                evd_dataset_upload_case(u->cases, raw, u->ncases + i, &u->refused);
        }
        if (u->refused.code != EVD_OK) {
            if (err != NULL)
                *err = u->refused;
            rc = u->refused.code;
            goto out;
        }
        if ((rc = evd_dataset_upload_seal(u->cases, err)) != EVD_OK)
            goto out;
    }
    rc = start(u->engine, normalized, inline_cases != NULL ? u->cases : NULL, plan_only, response,
               err);
out:
    json_decref(normalized);
    return rc;
}

enum evd_code evd_experiment_upload_finish(struct evd_experiment_upload *u, json_t **response,
                                           struct evd_err *err)
{
    return finish(u, false, response, err);
}

enum evd_code evd_experiment_upload_plan(struct evd_experiment_upload *u, json_t **response,
                                         struct evd_err *err)
{
    return finish(u, true, response, err);
}
