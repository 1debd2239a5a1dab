/*
 * The C side of tests/stats/check_kappa.py: reads "<alpha> <pass_pass> <pass_fail>
 * <fail_pass> <fail_fail>" a line on stdin and answers "agreement kappa se ci_low ci_high"
 * to 17 digits (nan where domain/agreement.h leaves a value undefined).
 */
#include <math.h>
#include <stdio.h>

#include "domain/agreement.h"

int main(void)
{
    double alpha;
    unsigned long long a, b, c, d;
    while (scanf("%lf %llu %llu %llu %llu", &alpha, &a, &b, &c, &d) == 5) {
        struct evd_agreement_table t = {a, b, c, d};
        struct evd_agreement r;
        evd_agreement_kappa(&t, alpha, &r);
        printf("%.17g %.17g %.17g %.17g %.17g\n", r.has_agreement ? r.agreement : NAN,
               r.has_kappa ? r.kappa : NAN, r.has_kappa ? r.se : NAN, r.has_kappa ? r.ci_low : NAN,
               r.has_kappa ? r.ci_high : NAN);
    }
    return 0;
}
