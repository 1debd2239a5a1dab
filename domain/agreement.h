/*
 * Agreement between two raters of the same runs (docs/experiments.md, "Agreement"): the
 * evaluator and the human reviewers, or two evaluators. Each rater says pass or fail; the
 * counts form a 2 × 2 table and Cohen's kappa measures how much more often they agree
 * than two raters with the same pass rates would by chance.
 *
 * With p_ij the share of runs rater A put in category i and rater B in j (1 pass, 2 fail),
 * p_i. and p_.j the margins:
 *   p_o = p_11 + p_22                     (observed agreement)
 *   p_e = p_1. p_.1 + p_2. p_.2           (agreement expected by chance)
 *   κ   = (p_o − p_e) / (1 − p_e)         (undefined when p_e = 1)
 * The confidence interval is κ ∓ z(1 − α/2) · se, clipped to [−1, 1], with the large-sample
 * variance of Fleiss, Cohen and Everitt (1969):
 *   var(κ) = ( Σ_i p_ii [1 − (p_i. + p_.i)(1 − κ)]²
 *            + (1 − κ)² Σ_{i≠j} p_ij (p_.i + p_j.)²
 *            − [κ − p_e (1 − κ)]² ) / (n (1 − p_e)²)
 * Pure arithmetic; thread-safe.
 */
#ifndef EVD_DOMAIN_AGREEMENT_H
#define EVD_DOMAIN_AGREEMENT_H

#include <stdbool.h>
#include <stdint.h>

/* Counts of runs by (rater A, rater B) verdict. */
struct evd_agreement_table {
    uint64_t pass_pass; /* both pass */
    uint64_t pass_fail; /* A pass, B fail */
    uint64_t fail_pass; /* A fail, B pass */
    uint64_t fail_fail; /* both fail */
};

struct evd_agreement {
    uint64_t n;         /* runs in the table */
    bool has_agreement; /* n >= 1 */
    double agreement;   /* p_o */
    bool has_kappa;     /* n >= 1 and p_e < 1 */
    double kappa;
    double se;              /* with has_kappa */
    double ci_low, ci_high; /* with has_kappa, at confidence 1 − alpha */
};

#define EVD_AGREEMENT_MAX_CATEGORIES 8

/*
 * Cohen's kappa over k categories (2 <= k <= EVD_AGREEMENT_MAX_CATEGORIES; more gives n
 * only): counts[i·k + j] items rater A put in category i and rater B in j. The formulas
 * above with i, j over the k categories; its interval at confidence 1 − alpha.
 */
void evd_agreement_kappa_k(const uint64_t *counts, unsigned k, double alpha,
                           struct evd_agreement *out);

/* Cohen's kappa of table t and its interval at confidence 1 − alpha (0 < alpha < 1). */
void evd_agreement_kappa(const struct evd_agreement_table *t, double alpha,
                         struct evd_agreement *out);

#endif
