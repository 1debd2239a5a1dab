/*
 * The statistics of a pairwise judge (see preference.h for every rule and formula). Pure;
 * thread-safe; evd_pref_summarize's scratch block lives for the call only.
 */
#include "domain/preference.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

bool evd_pref_slot_parse(const char *text, enum evd_pref_slot *out)
{
    if (text == NULL)
        return false;
    if (strcmp(text, "1") == 0)
        *out = EVD_PREF_SLOT_1;
    else if (strcmp(text, "2") == 0)
        *out = EVD_PREF_SLOT_2;
    else if (strcmp(text, "tie") == 0)
        *out = EVD_PREF_TIE;
    else
        return false;
    return true;
}

const char *evd_pref_slot_name(enum evd_pref_slot slot)
{
    switch (slot) {
    case EVD_PREF_SLOT_1:
        return "1";
    case EVD_PREF_SLOT_2:
        return "2";
    case EVD_PREF_TIE:
        break;
    }
    return "tie";
}

const char *evd_pref_outcome_name(enum evd_pref_outcome outcome)
{
    switch (outcome) {
    case EVD_PREF_OUTCOME_CONTROL:
        return "control";
    case EVD_PREF_OUTCOME_TREATMENT:
        return "treatment";
    case EVD_PREF_OUTCOME_TIE:
        break;
    }
    return "tie";
}

enum evd_pref_outcome evd_pref_order_winner(unsigned order, enum evd_pref_slot answer)
{
    assert(order == 1 || order == 2);
    if (answer == EVD_PREF_TIE)
        return EVD_PREF_OUTCOME_TIE;
    /* order 1 has the control in slot 1, order 2 the treatment */
    bool first = answer == EVD_PREF_SLOT_1;
    if (order == 1)
        return first ? EVD_PREF_OUTCOME_CONTROL : EVD_PREF_OUTCOME_TREATMENT;
    return first ? EVD_PREF_OUTCOME_TREATMENT : EVD_PREF_OUTCOME_CONTROL;
}

unsigned evd_pref_single_order(uint32_t repeat)
{
    return repeat % 2 == 1 ? 1 : 2;
}

void evd_pref_pair_both(enum evd_pref_slot order1, enum evd_pref_slot order2,
                        struct evd_pref_pair *out)
{
    *out = (struct evd_pref_pair){0};
    out->judged[0] = out->judged[1] = true;
    out->slot[0] = order1;
    out->slot[1] = order2;
    enum evd_pref_outcome a = evd_pref_order_winner(1, order1);
    enum evd_pref_outcome b = evd_pref_order_winner(2, order2);
    out->winner[0] = a;
    out->winner[1] = b;
    out->both = true;
    if (a == b) {
        out->outcome = a;
        out->consistent = true;
    } else if (a == EVD_PREF_OUTCOME_TIE || b == EVD_PREF_OUTCOME_TIE) {
        out->outcome = a == EVD_PREF_OUTCOME_TIE ? b : a; /* one arm named, the other tied */
    } else {
        out->outcome = EVD_PREF_OUTCOME_TIE; /* the orders name different arms */
        out->inconsistent = true;
    }
}

void evd_pref_pair_single(unsigned order, enum evd_pref_slot answer, struct evd_pref_pair *out)
{
    assert(order == 1 || order == 2);
    *out = (struct evd_pref_pair){0};
    out->judged[order - 1] = true;
    out->slot[order - 1] = answer;
    out->winner[order - 1] = evd_pref_order_winner(order, answer);
    out->outcome = out->winner[order - 1];
}

void evd_pref_pair_one(uint32_t repeat, enum evd_pref_slot answer, struct evd_pref_pair *out)
{
    evd_pref_pair_single(evd_pref_single_order(repeat), answer, out);
}

void evd_pref_case_add(struct evd_pref_case *c, const struct evd_pref_pair *pair)
{
    switch (pair->outcome) {
    case EVD_PREF_OUTCOME_TREATMENT:
        c->wins++;
        break;
    case EVD_PREF_OUTCOME_CONTROL:
        c->losses++;
        break;
    case EVD_PREF_OUTCOME_TIE:
        c->ties++;
        break;
    }
}

bool evd_pref_case_p(const struct evd_pref_case *c, double *p)
{
    uint64_t k = c->wins + c->losses + c->ties;
    if (k == 0)
        return false;
    /* w − l as a signed difference, then one division: ±1 and 0 come out exact */
    double diff =
        c->wins >= c->losses ? (double)(c->wins - c->losses) : -(double)(c->losses - c->wins);
    *p = diff / (double)k;
    return true;
}

/* hits / n with its Wilson interval at 1 − alpha; has = false when n = 0. */
static void fraction_of(uint64_t hits, uint64_t n, double alpha, struct evd_pref_fraction *out)
{
    *out = (struct evd_pref_fraction){.hits = hits, .n = n};
    if (n == 0)
        return;
    out->has = evd_stats_wilson(hits, n, alpha, &out->wilson_low, &out->wilson_high);
    out->fraction = (double)hits / (double)n;
}

void evd_pref_tally_add(struct evd_pref_tally *t, const struct evd_pref_pair *pair,
                        uint64_t len_control, uint64_t len_treatment)
{
    evd_pref_case_add(&t->c, pair);
    t->inconsistent += pair->inconsistent;
    if (!pair->both)
        return; /* only pairs judged in both orders count in the judge quality */
    t->both++;
    t->consistent += pair->consistent;
    for (int o = 0; o < 2; o++) {
        if (pair->slot[o] == EVD_PREF_TIE)
            continue;
        t->named++;
        t->first += pair->slot[o] == EVD_PREF_SLOT_1;
    }
    if (pair->outcome == EVD_PREF_OUTCOME_TIE || len_control == len_treatment)
        return;
    t->decisive++;
    bool treatment_longer = len_treatment > len_control;
    t->longer += (pair->outcome == EVD_PREF_OUTCOME_TREATMENT) == treatment_longer;
}

bool evd_pref_summarize_tallies(const struct evd_pref_tally *cases, size_t ncases,
                                const uint32_t *cluster, size_t nclusters,
                                const struct evd_stats_params *params,
                                struct evd_pref_summary *out)
{
    *out = (struct evd_pref_summary){0};
    out->delta.verdict = EVD_VERDICT_INCONCLUSIVE;
    /* one block: p of the paired cases, the clustered sums evd_stats_paired_direct needs,
     * the paired cases' clusters */
    size_t nc = cluster != NULL ? nclusters : 0;
    if (ncases > SIZE_MAX / 64 || nc > SIZE_MAX / 64)
        return false; /* the block's size would overflow */
    size_t bytes = ncases * (sizeof(double) + sizeof(uint32_t)) + nc * sizeof(double);
    void *block = calloc(1, bytes > 0 ? bytes : 1);
    if (block == NULL)
        return false;
    double *p = block;
    double *sums = p + ncases;
    uint32_t *pc = (uint32_t *)(sums + nc);

    uint64_t named = 0, first = 0, decisive = 0, longer = 0;
    size_t n = 0;
    for (size_t c = 0; c < ncases; c++) {
        const struct evd_pref_tally *t = &cases[c];
        out->wins += t->c.wins;
        out->losses += t->c.losses;
        out->ties += t->c.ties;
        out->inconsistent += t->inconsistent;
        out->both_pairs += t->both;
        out->consistent_pairs += t->consistent;
        named += t->named;
        first += t->first;
        decisive += t->decisive;
        longer += t->longer;
        if (!evd_pref_case_p(&t->c, &p[n]))
            continue;
        if (cluster != NULL) {
            assert(cluster[c] < nclusters);
            pc[n] = cluster[c];
        }
        n++;
    }
    out->pairs = out->wins + out->losses + out->ties;
    if (out->pairs > 0) {
        out->has_rate = true;
        out->rate = ((double)out->wins + (double)out->ties / 2) / (double)out->pairs;
    }
    out->paired_cases = n;
    evd_stats_paired_direct(p, n, cluster != NULL ? pc : NULL, nc, sums, &out->moments);
    evd_stats_paired_summary(&out->moments, params, &out->delta);

    if (out->both_pairs > 0) {
        out->has_consistency = true;
        out->consistency = (double)out->consistent_pairs / (double)out->both_pairs;
    }
    fraction_of(first, named, params->alpha, &out->first_slot);
    fraction_of(longer, decisive, params->alpha, &out->length);
    free(block);
    return true;
}

bool evd_pref_summarize(const struct evd_pref_judged *pairs, size_t npairs, size_t ncases,
                        const uint32_t *cluster, size_t nclusters,
                        const struct evd_stats_params *params, struct evd_pref_summary *out)
{
    *out = (struct evd_pref_summary){0};
    out->delta.verdict = EVD_VERDICT_INCONCLUSIVE;
    if (ncases > SIZE_MAX / sizeof(struct evd_pref_tally))
        return false;
    struct evd_pref_tally *cases = calloc(ncases > 0 ? ncases : 1, sizeof(*cases));
    if (cases == NULL)
        return false;
    for (size_t k = 0; k < npairs; k++) {
        assert(pairs[k].case_index < ncases);
        evd_pref_tally_add(&cases[pairs[k].case_index], &pairs[k].pair, pairs[k].len_control,
                           pairs[k].len_treatment);
    }
    bool ok = evd_pref_summarize_tallies(cases, ncases, cluster, nclusters, params, out);
    free(cases);
    return ok;
}

/*
 * The accepted range of byte k (1-based after the lead) of a sequence led by `lead`
 * (Unicode table 3-7, well-formed UTF-8 byte sequences).
 */
static bool continuation_ok(unsigned char lead, size_t k, unsigned char b)
{
    unsigned char lo = 0x80, hi = 0xBF;
    if (k == 1) {
        if (lead == 0xE0)
            lo = 0xA0; /* no overlong three-byte form */
        else if (lead == 0xED)
            hi = 0x9F; /* no surrogate */
        else if (lead == 0xF0)
            lo = 0x90; /* no overlong four-byte form */
        else if (lead == 0xF4)
            hi = 0x8F; /* nothing beyond U+10FFFF */
    }
    return b >= lo && b <= hi;
}

/* The length of a well-formed sequence led by `lead`, or 0 when no sequence starts so. */
static size_t sequence_length(unsigned char lead)
{
    if (lead < 0x80)
        return 1;
    if (lead >= 0xC2 && lead <= 0xDF)
        return 2;
    if (lead >= 0xE0 && lead <= 0xEF)
        return 3;
    if (lead >= 0xF0 && lead <= 0xF4)
        return 4;
    return 0; /* a continuation byte, C0, C1 or F5..FF */
}

size_t evd_pref_codepoints(const char *utf8, size_t len)
{
    const unsigned char *s = (const unsigned char *)utf8;
    size_t count = 0, i = 0;
    while (i < len) {
        size_t want = sequence_length(s[i]);
        size_t got = 1; /* the lead, or a lone invalid byte */
        while (got < want && i + got < len && continuation_ok(s[i], got, s[i + got]))
            got++;
        /* a whole sequence is one code point, a maximal ill-formed subpart one U+FFFD */
        count++;
        i += got;
    }
    return count;
}
