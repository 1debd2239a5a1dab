/*
 * The C side of the sequential cross-check (tests/stats/check_sequential.py): reads one
 * request a line on stdin and answers one line on stdout, reals printed to 17 digits.
 * Requests:
 *   c <alpha2> <min_cases> <min_effect> <n> <d_1..d_n>
 *       the confidence sequence: low high before any case, then for every k = 1..n after
 *       adding d_k: low high verdict decided_at (verdict as while running, decided_at 0 when
 *       undecided), and last the verdict once terminal
 *   p <seed> <n>          the dispatch_index of each of the n cases
 *   s <id>                the default seed of an experiment id (no blanks in it)
 *   z <effect> <sd> <alpha2>
 *                         cases_needed, or "none" when refused
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "domain/sequential.h"

static void put(double v)
{
    printf(" %.17g", v);
}

static int sequence(void)
{
    double alpha2, min_effect;
    uint64_t min_cases, n;
    if (scanf("%lf %" SCNu64 " %lf %" SCNu64, &alpha2, &min_cases, &min_effect, &n) != 4)
        return -1;
    struct evd_seq_cs cs;
    evd_seq_cs_init(&cs, alpha2, min_cases, min_effect);
    put(evd_seq_cs_low(&cs));
    put(evd_seq_cs_high(&cs));
    for (uint64_t k = 0; k < n; k++) {
        double d;
        if (scanf("%lf", &d) != 1 || !(d >= -1 && d <= 1))
            return -1;
        evd_seq_cs_add(&cs, d);
        put(evd_seq_cs_low(&cs));
        put(evd_seq_cs_high(&cs));
        printf(" %s %" PRIu64, evd_seq_verdict_name(evd_seq_cs_verdict(&cs, false)), cs.decided_at);
    }
    printf(" %s", evd_seq_verdict_name(evd_seq_cs_verdict(&cs, true)));
    return 0;
}

static int permutation(void)
{
    uint64_t seed;
    uint32_t n;
    if (scanf("%" SCNu64 " %" SCNu32, &seed, &n) != 2)
        return -1;
    uint32_t *out = calloc((size_t)n + 1, sizeof(*out));
    if (out == NULL)
        return -1;
    evd_seq_permutation(seed, n, out);
    for (uint32_t k = 0; k < n; k++)
        printf(" %" PRIu32, out[k]);
    free(out);
    return 0;
}

int main(void)
{
    char kind[4];
    while (scanf("%3s", kind) == 1) {
        int rc = 0;
        if (kind[0] == 'c') {
            rc = sequence();
        } else if (kind[0] == 'p') {
            rc = permutation();
        } else if (kind[0] == 's') {
            char id[256];
            rc = scanf("%255s", id) == 1 ? 0 : -1;
            if (rc == 0)
                printf(" %" PRIu64, evd_seq_default_seed(id));
        } else if (kind[0] == 'z') {
            double effect, sd, alpha2, cases;
            rc = scanf("%lf %lf %lf", &effect, &sd, &alpha2) == 3 ? 0 : -1;
            if (rc == 0 && evd_seq_cases_needed(effect, sd, alpha2, &cases))
                put(cases);
            else if (rc == 0)
                printf(" none");
        } else {
            fprintf(stderr, "sequential_dump: unknown request %s\n", kind);
            return 2;
        }
        if (rc != 0) {
            fprintf(stderr, "sequential_dump: malformed request %s\n", kind);
            return 2;
        }
        putchar('\n');
    }
    return 0;
}
