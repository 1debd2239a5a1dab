/*
 * GET /v1/experiments/{id}/export (engine/experiments.h): every run of an experiment, or
 * every judge call (records=judgements, docs/judges.md), as JSON lines or CSV, read from
 * the database a page at a time as the client reads, so that a large experiment is never
 * held whole.
 */
#include "engine/experiments.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "domain/analysis.h"
#include "domain/experiment.h"
#include "engine/internal.h"
#include "store/db.h"
#include "store/experiments.h"
#include "store/judgements.h"

#define EXPORT_PAGE 200

struct evd_experiment_export {
    struct evd_engine *e;
    char id[64];
    bool csv;
    bool judgements; /* records=judgements */
    bool header_done;
    bool done;
    char *cursor;
    json_t *labels; /* arm -> label */
};

enum evd_code evd_experiment_export_open(struct evd_engine *e, const char *id, const char *format,
                                         const char *records,
                                         struct evd_experiment_export **out, struct evd_err *err)
{
    if (format == NULL)
        format = "jsonl";
    if (records == NULL)
        records = "runs";
    if (strcmp(format, "jsonl") != 0 && strcmp(format, "csv") != 0)
        return evd_err_set(err, EVD_EINVAL, "format must be jsonl or csv");
    if (strcmp(records, "runs") != 0 && strcmp(records, "judgements") != 0)
        return evd_err_set(err, EVD_EINVAL, "records must be runs or judgements");
    struct evd_store_experiment_shape shape = {0};
    enum evd_code rc = EVD_OK;
    PGconn *c = evd_db_acquire(e->opts.db, err);
    if (c == NULL)
        return evd_db_code(err);
    rc = evd_store_experiment_shape(c, id, &shape, err);
    evd_db_release(e->opts.db, c);
    if (rc != EVD_OK)
        return rc;
    struct evd_experiment_export *x = calloc(1, sizeof(*x));
    json_t *request = json_loads(shape.request, 0, NULL);
    if (x == NULL || request == NULL || (x->labels = json_array()) == NULL) {
        free(x);
        json_decref(request);
        evd_store_experiment_shape_clear(&shape);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    for (unsigned arm = 0; arm < (unsigned)shape.arms; arm++) {
        const char *l = evd_experiment_arm_label(request, arm);
        json_array_append_new(x->labels, l ? json_string(l) : json_null());
    }
    json_decref(request);
    evd_store_experiment_shape_clear(&shape);
    x->e = e;
    snprintf(x->id, sizeof(x->id), "%s", id);
    x->csv = strcmp(format, "csv") == 0;
    x->judgements = strcmp(records, "judgements") == 0;
    *out = x;
    return EVD_OK;
}

bool evd_experiment_export_judgements(const struct evd_experiment_export *x)
{
    return x->judgements;
}

const char *evd_experiment_export_type(const struct evd_experiment_export *x)
{
    return x->csv ? "text/csv" : "application/x-ndjson";
}

/* One CSV field, quoted when it must be (RFC 4180). */
static void csv_field(struct evd_buf *out, const char *s, bool first)
{
    if (!first)
        evd_buf_append(out, ",", 1);
    if (s == NULL)
        return;
    if (strpbrk(s, ",\"\r\n") == NULL) {
        evd_buf_append(out, s, strlen(s));
        return;
    }
    evd_buf_append(out, "\"", 1);
    for (; *s; s++) {
        if (*s == '"')
            evd_buf_append(out, "\"", 1);
        evd_buf_append(out, s, 1);
    }
    evd_buf_append(out, "\"", 1);
}

static const char *const EXPORT_FIELDS[] = {
    "experiment_id", "run_id", "session_id", "case_id", "case_index", "arm", "label", "repeat",
    "position", "status", "passed", "score", "output"};
#define NEXPORT (sizeof(EXPORT_FIELDS) / sizeof(EXPORT_FIELDS[0]))
/* After the metrics: a simulated user's own use, and the conversation a run kept
 * (docs/agents.md; null for a run without one). */
static const char *const EXPORT_AGENT_FIELDS[] = {"simulator_calls", "simulator_total_tokens",
                                                  "simulator_cost_usd", "transcript"};
#define NAGENT (sizeof(EXPORT_AGENT_FIELDS) / sizeof(EXPORT_AGENT_FIELDS[0]))

/* The export record of an API run object. New reference. */
static json_t *export_record(const struct evd_experiment_export *x, const json_t *run)
{
    json_t *rec = json_object();
    json_object_set_new(rec, "experiment_id", json_string(x->id));
    for (size_t i = 1; i < NEXPORT; i++) {
        const char *k = EXPORT_FIELDS[i];
        if (strcmp(k, "label") == 0) {
            json_t *l = json_array_get(x->labels, (size_t)json_integer_value(
                                                      json_object_get(run, "arm")));
            json_object_set(rec, k, l ? l : json_null());
            continue;
        }
        const json_t *v = json_object_get(run, k);
        json_object_set(rec, k, v ? (json_t *)v : json_null());
    }
    const json_t *bench = json_object_get(run, "benchmark");
    for (unsigned m = 0; m < EVD_ANALYSIS_METRICS; m++) {
        const json_t *v = json_object_get(bench, evd_analysis_metric_names[m]);
        json_object_set(rec, evd_analysis_metric_names[m], v ? (json_t *)v : json_null());
    }
    for (size_t i = 0; i + 1 < NAGENT; i++) {
        const json_t *v = json_object_get(bench, EXPORT_AGENT_FIELDS[i]);
        json_object_set(rec, EXPORT_AGENT_FIELDS[i], v ? (json_t *)v : json_null());
    }
    const json_t *conv = json_object_get(run, "conversation");
    json_object_set(rec, "transcript", conv ? (json_t *)conv : json_null());
    return rec;
}

static const char *const JUDGEMENT_FIELDS[] = {
    "experiment_id", "case_id",    "case_index", "repeat",       "treatment",
    "label",         "order",      "status",     "winner_slot",  "winner_arm",
    "reason",        "outcome",    "inconsistent", "calls",      "input_tokens",
    "output_tokens", "cost_usd",   "latency_ms", "error"};
#define NJUDGEMENT (sizeof(JUDGEMENT_FIELDS) / sizeof(JUDGEMENT_FIELDS[0]))

/* The export record of an API judgement row (store/judgements.h). New reference. */
static json_t *judgement_record(const struct evd_experiment_export *x, const json_t *j)
{
    json_t *rec = json_object();
    const json_t *metrics = json_object_get(j, "metrics");
    json_object_set_new(rec, "experiment_id", json_string(x->id));
    for (size_t i = 1; i < NJUDGEMENT; i++) {
        const char *k = JUDGEMENT_FIELDS[i];
        const json_t *v;
        if (strcmp(k, "label") == 0)
            v = json_array_get(x->labels, (size_t)json_integer_value(
                                              json_object_get(j, "treatment")));
        else if (i >= 13 && i <= 17)
            v = json_object_get(metrics, k);
        else
            v = json_object_get(j, k);
        json_object_set(rec, k, v ? (json_t *)v : json_null());
    }
    return rec;
}

int evd_experiment_export_next(struct evd_experiment_export *x, struct evd_buf *out,
                               struct evd_err *err)
{
    if (x->done)
        return 0;
    if (x->csv && !x->header_done) {
        if (x->judgements) {
            for (size_t i = 0; i < NJUDGEMENT; i++)
                csv_field(out, JUDGEMENT_FIELDS[i], i == 0);
            evd_buf_append(out, "\r\n", 2);
            x->header_done = true;
            return 1;
        }
        for (size_t i = 0; i < NEXPORT; i++)
            csv_field(out, EXPORT_FIELDS[i], i == 0);
        for (unsigned m = 0; m < EVD_ANALYSIS_METRICS; m++)
            csv_field(out, evd_analysis_metric_names[m], false);
        for (size_t i = 0; i < NAGENT; i++)
            csv_field(out, EXPORT_AGENT_FIELDS[i], false);
        evd_buf_append(out, "\r\n", 2);
        x->header_done = true;
        return 1;
    }
    json_t *items = NULL;
    char *next = NULL;
    PGconn *c = evd_db_acquire(x->e->opts.db, err);
    if (c == NULL)
        return -1;
    items = x->judgements ? evd_store_judgements_list(c, x->id, NULL, 0, EXPORT_PAGE, x->cursor,
                                                      &next, err)
                          : evd_store_experiment_runs(c, x->id, NULL, EXPORT_PAGE, x->cursor,
                                                      false, &next, err);
    evd_db_release(x->e->opts.db, c);
    if (items == NULL) {
        free(next);
        return -1;
    }
    size_t i;
    json_t *run;
    json_array_foreach(items, i, run)
    {
        json_t *rec = x->judgements ? judgement_record(x, run) : export_record(x, run);
        if (rec == NULL)
            continue;
        if (!x->csv) {
            char *line = json_dumps(rec, JSON_COMPACT);
            if (line != NULL) {
                evd_buf_append(out, line, strlen(line));
                evd_buf_append(out, "\n", 1);
            }
            free(line);
        } else {
            const char *key;
            json_t *v;
            bool first = true;
            json_object_foreach(rec, key, v)
            {
                char *text = NULL;
                if (json_is_string(v) && strcmp(key, "output") != 0)
                    csv_field(out, json_string_value(v), first);
                else if (json_is_null(v) && strcmp(key, "output") != 0)
                    csv_field(out, NULL, first);
                else {
                    text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
                    csv_field(out, text, first);
                }
                free(text);
                first = false;
            }
            evd_buf_append(out, "\r\n", 2);
        }
        json_decref(rec);
    }
    json_decref(items);
    free(x->cursor);
    x->cursor = next;
    if (next == NULL)
        x->done = true;
    return 1;
}

void evd_experiment_export_free(struct evd_experiment_export *x)
{
    if (x == NULL)
        return;
    free(x->cursor);
    json_decref(x->labels);
    free(x);
}
