/*
 * The C side of tests/stats/check_kappa.py: reads "<alpha> <k> <k·k counts, row by row>" a
 * line on stdin (k 2 goes through evd_agreement_kappa's 2 × 2 table, any other k through
 * evd_agreement_kappa_k) and answers "agreement kappa se ci_low ci_high" to 17 digits (nan
 * where domain/agreement.h leaves a value undefined).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "domain/agreement.h"

int main(void)
{
    double alpha;
    unsigned k;
    while (scanf("%lf %u", &alpha, &k) == 2 && k >= 2 && k <= EVD_AGREEMENT_MAX_CATEGORIES) {
        uint64_t t[EVD_AGREEMENT_MAX_CATEGORIES * EVD_AGREEMENT_MAX_CATEGORIES];
        for (unsigned i = 0; i < k * k; i++) {
            unsigned long long v;
            if (scanf("%llu", &v) != 1)
                return 1;
            t[i] = v;
        }
        struct evd_agreement r;
        if (k == 2) {
            struct evd_agreement_table two = {t[0], t[1], t[2], t[3]};
            evd_agreement_kappa(&two, alpha, &r);
        } else {
            evd_agreement_kappa_k(t, k, alpha, &r);
        }
        printf("%.17g %.17g %.17g %.17g %.17g\n", r.has_agreement ? r.agreement : NAN,
               r.has_kappa ? r.kappa : NAN, r.has_kappa ? r.se : NAN, r.has_kappa ? r.ci_low : NAN,
               r.has_kappa ? r.ci_high : NAN);
    }
    return 0;
}
