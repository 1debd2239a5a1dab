/*
 * Fuzz target: an experiment's start request and its sequential statistics. Byte 0 picks
 * the part (even: the request, odd: the statistics); the rest is its input.
 *
 *   request     the body, parsed as server/http.c parses it, through evd_experiment_request
 *               (every field, `stopping`, `budget` and `plan` included); a request it
 *               accepts must be whole (arms, repeats, concurrency in their bounds, a
 *               stopping rule), and is then taken through what the start does before the
 *               database: a fixed case checked against its templates, each arm's cell, the
 *               size check and the plan's options.
 *   statistics  the bytes as a sequence of differences d ∈ {−1, −2/3, …, 1} (byte % 7),
 *               the first two choosing α'' and min_cases, through the confidence sequence
 *               (domain/sequential.h): its bounds stay in [−1, 1], never widen, and a
 *               decided verdict never changes; and the dispatch permutation of the input's
 *               length from a seed of its first bytes is a permutation.
 */
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "domain/experiment.h"
#include "domain/sequential.h"
#include "tests/fuzz/fuzz.h"

/* A case with the variables the seed bodies use. */
static const char CASE[] =
    "{\"id\":\"c1\",\"vars\":{\"question\":\"q?\",\"topic\":\"t\"},\"expected\":\"yes\","
    "\"metadata\":{}}";

static void request(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *body = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES,
                              &jerr);
    if (body == NULL)
        return;
    const struct evd_experiment_limits lim = {.max_repeats = 100, .max_concurrency = 256};
    json_t *normalized = NULL;
    const json_t *cases = NULL;
    struct evd_err err = {EVD_OK, ""};
    if (evd_experiment_request(body, &lim, &normalized, &cases, &err) != EVD_OK) {
        if (normalized != NULL || err.msg[0] == '\0')
            abort(); /* a refusal writes nothing and says why */
        json_decref(body);
        return;
    }
    size_t arms = evd_experiment_arms(normalized);
    json_int_t repeats = json_integer_value(json_object_get(normalized, "repeats"));
    json_int_t conc = json_integer_value(json_object_get(normalized, "concurrency"));
    const json_t *stopping = json_object_get(normalized, "stopping");
    const char *rule = json_string_value(json_object_get(stopping, "rule"));
    if (arms < 2 || arms > 1 + EVD_EXPERIMENT_MAX_TREATMENTS || repeats < 1 || repeats > 100 ||
        conc < 1 || conc > 256 || rule == NULL ||
        (strcmp(rule, "fixed") != 0 && strcmp(rule, "anytime") != 0))
        abort();
    json_t *c = json_loads(CASE, 0, NULL);
    if (c != NULL && evd_experiment_check_case(normalized, c, &err) == EVD_OK) {
        for (size_t arm = 0; arm < arms; arm++) {
            json_t *variant = NULL, *evaluator = NULL;
            if (evd_experiment_cell(normalized, c, arm, &variant, &evaluator, &err) != EVD_OK)
                abort(); /* a case that passed the check renders in every arm */
            json_decref(variant);
            json_decref(evaluator);
        }
    }
    json_decref(c);
    evd_experiment_check_size(normalized, 1000, 100000, &err);
    struct evd_experiment_plan_opts plan;
    if (evd_experiment_plan_options(json_object_get(normalized, "plan"), &plan, &err) != EVD_OK)
        abort(); /* the start checked the same object */
    json_decref(normalized);
    json_decref(body);
}

static void statistics(const uint8_t *data, size_t size)
{
    if (size < 2)
        return;
    const double alpha2 = 0.001 + 0.249 * data[0] / 255.0;
    const uint64_t min_cases = 1 + data[1] % 20;
    struct evd_seq_cs cs;
    evd_seq_cs_init(&cs, alpha2, min_cases, (data[0] % 4) * 0.1);
    double low = -1, high = 1;
    enum evd_seq_verdict decided = EVD_SEQ_CONTINUE;
    for (size_t i = 2; i < size; i++) {
        evd_seq_cs_add(&cs, ((double)(data[i] % 7) - 3) / 3);
        double l = evd_seq_cs_low(&cs), h = evd_seq_cs_high(&cs);
        if (isnan(l) || isnan(h) || l < -1 || h > 1 || l < low || h > high)
            abort(); /* the running intersection only narrows, inside [−1, 1] */
        low = l;
        high = h;
        enum evd_seq_verdict v = evd_seq_cs_verdict(&cs, false);
        if (decided != EVD_SEQ_CONTINUE && v != decided)
            abort(); /* a decided verdict is final */
        if (v != EVD_SEQ_CONTINUE && cs.n < min_cases)
            abort();
        decided = v;
    }
    uint64_t seed = 0;
    memcpy(&seed, data, size < sizeof(seed) ? size : sizeof(seed));
    uint32_t n = (uint32_t)(size < 4096 ? size : 4096);
    uint32_t *perm = malloc(n * sizeof(*perm));
    uint8_t *seen = calloc(n + 1, 1);
    if (perm != NULL && seen != NULL) {
        evd_seq_permutation(seed, n, perm);
        for (uint32_t k = 0; k < n; k++) {
            if (perm[k] < 1 || perm[k] > n || seen[perm[k]])
                abort();
            seen[perm[k]] = 1;
        }
    }
    free(perm);
    free(seen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] % 2 == 0)
        request(data + 1, size - 1);
    else
        statistics(data + 1, size - 1);
    return 0;
}
