/*
 * The C side of the preference cross-check (tests/stats/check_preference.py): reads one
 * request a line on stdin and answers one line on stdout, reals printed to 17 digits (nan
 * for a null). Requests:
 *   j <alpha> <m> <min_effect> <ncases> <nclusters> <npairs>
 *     [<cluster of case 0> … <cluster of case ncases−1>]     (only when nclusters > 0)
 *     <case> <order 1 answer> <order 2 answer> <len control> <len treatment>   (npairs times)
 *       an answer is 1, 2, tie, or - (that order was not judged; not both)
 *     answers, per pair: outcome (control, tie, treatment) consistent inconsistent (0/1);
 *     then pairs wins losses ties inconsistent rate paired_cases clusters
 *     mean se df ci_low ci_high t_p_value p_value_adjusted mde verdict
 *     both_pairs consistent_pairs consistency
 *     first_slot: n hits fraction wilson_low wilson_high, length: the same five
 *   u <hex bytes>   (or "u -" for no byte)  the code points of those bytes
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/preference.h"

static void put(double v)
{
    printf(" %.17g", v);
}

static void put_fraction(const struct evd_pref_fraction *f)
{
    printf(" %" PRIu64 " %" PRIu64, f->n, f->hits);
    put(f->has ? f->fraction : NAN);
    put(f->has ? f->wilson_low : NAN);
    put(f->has ? f->wilson_high : NAN);
}

/* One order's answer: 1 with *slot set, 0 for "-", −1 when malformed. */
static int answer(const char *text, enum evd_pref_slot *slot)
{
    if (strcmp(text, "-") == 0)
        return 0;
    return evd_pref_slot_parse(text, slot) ? 1 : -1;
}

static void put_summary(const struct evd_pref_summary *s)
{
    printf(" %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64, s->pairs, s->wins,
           s->losses, s->ties, s->inconsistent);
    put(s->has_rate ? s->rate : NAN);
    printf(" %" PRIu64 " %" PRIu64, s->paired_cases, s->moments.clusters);
    const struct evd_stats_paired *d = &s->delta;
    put(d->has_mean ? d->mean : NAN);
    double vals[7] = {d->se, d->df, d->ci_low, d->ci_high, d->t_p_value, d->p_value_adjusted,
                      d->mde};
    for (int i = 0; i < 7; i++)
        put(d->has_var ? vals[i] : NAN);
    printf(" %s %" PRIu64 " %" PRIu64, evd_stats_verdict_name(d->verdict), s->both_pairs,
           s->consistent_pairs);
    put(s->has_consistency ? s->consistency : NAN);
    put_fraction(&s->first_slot);
    put_fraction(&s->length);
}

static int judged(void)
{
    double alpha, min_effect;
    unsigned m;
    size_t ncases, nclusters, npairs;
    if (scanf("%lf %u %lf %zu %zu %zu", &alpha, &m, &min_effect, &ncases, &nclusters, &npairs) != 6)
        return -1;
    int rc = -1;
    uint32_t *cluster = calloc(ncases + 1, sizeof(*cluster));
    struct evd_pref_judged *pairs = calloc(npairs + 1, sizeof(*pairs));
    if (cluster == NULL || pairs == NULL)
        goto out;
    for (size_t c = 0; nclusters > 0 && c < ncases; c++)
        if (scanf("%" SCNu32, &cluster[c]) != 1 || cluster[c] >= nclusters)
            goto out;
    for (size_t k = 0; k < npairs; k++) {
        struct evd_pref_judged *j = &pairs[k];
        char a1[8], a2[8];
        enum evd_pref_slot s1 = EVD_PREF_TIE, s2 = EVD_PREF_TIE;
        if (scanf("%" SCNu32 " %7s %7s %" SCNu64 " %" SCNu64, &j->case_index, a1, a2,
                  &j->len_control, &j->len_treatment) != 5 ||
            j->case_index >= ncases)
            goto out;
        int h1 = answer(a1, &s1), h2 = answer(a2, &s2);
        if (h1 < 0 || h2 < 0 || h1 + h2 == 0)
            goto out;
        if (h1 && h2)
            evd_pref_pair_both(s1, s2, &j->pair);
        else
            evd_pref_pair_single(h1 ? 1 : 2, h1 ? s1 : s2, &j->pair);
        printf(" %s %d %d", evd_pref_outcome_name(j->pair.outcome), j->pair.consistent,
               j->pair.inconsistent);
    }
    struct evd_stats_params params = {.alpha = alpha, .comparisons = m, .min_effect = min_effect};
    struct evd_pref_summary s;
    if (!evd_pref_summarize(pairs, npairs, ncases, nclusters > 0 ? cluster : NULL, nclusters,
                            &params, &s))
        goto out;
    put_summary(&s);
    rc = 0;
out:
    free(cluster);
    free(pairs);
    return rc;
}

static int codepoints(void)
{
    static char hex[1 << 16];
    static char bytes[1 << 15];
    if (scanf("%65535s", hex) != 1)
        return -1;
    size_t len = 0;
    if (strcmp(hex, "-") != 0) {
        size_t h = strlen(hex);
        if (h % 2 != 0 || h / 2 > sizeof(bytes))
            return -1;
        for (size_t i = 0; i < h; i += 2) {
            unsigned v;
            if (sscanf(hex + i, "%2x", &v) != 1)
                return -1;
            bytes[len++] = (char)v;
        }
    }
    printf(" %zu", evd_pref_codepoints(bytes, len));
    return 0;
}

int main(void)
{
    char kind[4];
    while (scanf("%3s", kind) == 1) {
        int rc;
        if (kind[0] == 'j') {
            rc = judged();
        } else if (kind[0] == 'u') {
            rc = codepoints();
        } else {
            fprintf(stderr, "preference_dump: unknown request %s\n", kind);
            return 2;
        }
        if (rc != 0) {
            fprintf(stderr, "preference_dump: malformed request %s\n", kind);
            return 2;
        }
        putchar('\n');
    }
    return 0;
}
