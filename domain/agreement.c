/* Cohen's kappa and its large-sample interval; see agreement.h. Pure; thread-safe. */
#include "domain/agreement.h"

#include <float.h>
#include <math.h>

#include "domain/stats.h"

void evd_agreement_kappa_k(const uint64_t *counts, unsigned k, double alpha,
                           struct evd_agreement *out)
{
    *out = (struct evd_agreement){0};
    uint64_t n = 0, diag = 0;
    for (unsigned i = 0; i < k; i++)
        for (unsigned j = 0; j < k; j++) {
            n += counts[i * k + j];
            diag += i == j ? counts[i * k + j] : 0;
        }
    out->n = n;
    if (n == 0 || k > EVD_AGREEMENT_MAX_CATEGORIES)
        return;
    const double N = (double)n;
    double row[EVD_AGREEMENT_MAX_CATEGORIES] = {0}, col[EVD_AGREEMENT_MAX_CATEGORIES] = {0};
    for (unsigned i = 0; i < k; i++)
        for (unsigned j = 0; j < k; j++) {
            double p = (double)counts[i * k + j] / N;
            row[i] += p;
            col[j] += p;
        }
    const double po = (double)diag / N;
    double pe = 0;
    for (unsigned i = 0; i < k; i++)
        pe += row[i] * col[i];
    out->has_agreement = true;
    out->agreement = po;
    if (!(pe < 1.0))
        return; /* both raters put every item in one and the same category */
    const double kap = (po - pe) / (1.0 - pe);
    double a = 0, b = 0;
    for (unsigned i = 0; i < k; i++) {
        double u = 1.0 - (row[i] + col[i]) * (1.0 - kap);
        a += (double)counts[i * k + i] / N * u * u;
        for (unsigned j = 0; j < k; j++)
            if (i != j)
                b += (double)counts[i * k + j] / N * (col[i] + row[j]) * (col[i] + row[j]);
    }
    b *= (1.0 - kap) * (1.0 - kap);
    double c = kap - pe * (1.0 - kap);
    /* The three terms are of order 1 and cancel exactly when a rater gives one category
     * to every item (or the raters agree or disagree perfectly): a numerator within the
     * rounding of its terms is 0, or its square root would be noise of order 1e-8. */
    double num = a + b - c * c;
    if (num <= 16 * DBL_EPSILON * (a + b + c * c))
        num = 0;
    double var = num / (N * (1.0 - pe) * (1.0 - pe));
    out->has_kappa = true;
    out->kappa = kap;
    out->se = var > 0 ? sqrt(var) : 0.0;
    double z = evd_stats_normal_quantile(1.0 - alpha / 2.0);
    out->ci_low = fmax(-1.0, kap - z * out->se);
    out->ci_high = fmin(1.0, kap + z * out->se);
}

void evd_agreement_kappa(const struct evd_agreement_table *t, double alpha,
                         struct evd_agreement *out)
{
    const uint64_t counts[4] = {t->pass_pass, t->pass_fail, t->fail_pass, t->fail_fail};
    evd_agreement_kappa_k(counts, 2, alpha, out);
}
