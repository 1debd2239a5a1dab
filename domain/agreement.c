/* Cohen's kappa and its large-sample interval; see agreement.h. Pure; thread-safe. */
#include "domain/agreement.h"

#include <float.h>
#include <math.h>

#include "domain/stats.h"

void evd_agreement_kappa(const struct evd_agreement_table *t, double alpha,
                         struct evd_agreement *out)
{
    *out = (struct evd_agreement){0};
    uint64_t n = t->pass_pass + t->pass_fail + t->fail_pass + t->fail_fail;
    out->n = n;
    if (n == 0)
        return;
    const double N = (double)n;
    /* p[i][j]: rater A in i, rater B in j (0 pass, 1 fail). */
    const double p[2][2] = {{(double)t->pass_pass / N, (double)t->pass_fail / N},
                            {(double)t->fail_pass / N, (double)t->fail_fail / N}};
    const double row[2] = {p[0][0] + p[0][1], p[1][0] + p[1][1]};
    const double col[2] = {p[0][0] + p[1][0], p[0][1] + p[1][1]};
    const double po = (double)(t->pass_pass + t->fail_fail) / N;
    const double pe = row[0] * col[0] + row[1] * col[1];
    out->has_agreement = true;
    out->agreement = po;
    if (!(pe < 1.0))
        return; /* both raters gave one and the same verdict to every run */
    const double k = (po - pe) / (1.0 - pe);
    double a = 0, b = 0;
    for (int i = 0; i < 2; i++) {
        double u = 1.0 - (row[i] + col[i]) * (1.0 - k);
        a += p[i][i] * u * u;
        for (int j = 0; j < 2; j++)
            if (i != j)
                b += p[i][j] * (col[i] + row[j]) * (col[i] + row[j]);
    }
    b *= (1.0 - k) * (1.0 - k);
    double c = k - pe * (1.0 - k);
    /* The three terms are of order 1 and cancel exactly when a rater gives one verdict
     * to every run (or the raters agree or disagree perfectly): a numerator within the
     * rounding of its terms is 0, or its square root would be noise of order 1e-8. */
    double num = a + b - c * c;
    if (num <= 16 * DBL_EPSILON * (a + b + c * c))
        num = 0;
    double var = num / (N * (1.0 - pe) * (1.0 - pe));
    out->has_kappa = true;
    out->kappa = k;
    out->se = var > 0 ? sqrt(var) : 0.0;
    double z = evd_stats_normal_quantile(1.0 - alpha / 2.0);
    out->ci_low = fmax(-1.0, k - z * out->se);
    out->ci_high = fmin(1.0, k + z * out->se);
}
