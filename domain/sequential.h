/*
 * The statistics of a sequential experiment (shared spec sequential.md, "The sequence and
 * the confidence sequence", "Dispatch order", "Planning"): the anytime-valid confidence
 * sequence of one treatment's paired differences and its verdict, the random dispatch
 * order drawn from a seed, and the number of cases a fixed-sample plan needs.
 *
 * Pure arithmetic on values the caller owns: no allocation, no I/O, no global state; every
 * function is thread-safe. An accumulator is a plain value, rebuilt from scratch by the
 * analysis on each pass (init, then one add per case in seq order, O(n)); nothing in it
 * needs to be stored. Cross-checked case by case against an independent Python
 * implementation of the formulas below by tests/stats/check_sequential.py.
 *
 * The confidence sequence (predictable plug-in empirical Bernstein, Waudby-Smith and
 * Ramdas 2024, eqs. 13-15). Case i (1-based, in seq order) brings d_i ∈ [−1, 1], the
 * difference of the treatment's and the control's pass rates; x_i = (d_i + 1)/2 ∈ [0, 1];
 * α'' = α/m is the level after Bonferroni over the m treatments.
 *   μ̂_0 = 1/2,  σ̂²_0 = 1/4,
 *   μ̂_i = (1/2 + Σ_{j≤i} x_j) / (i + 1),   σ̂²_i = (1/4 + Σ_{j≤i} (x_j − μ̂_j)²) / (i + 1)
 *     (each square uses the μ̂_j that already includes x_j);
 *   λ_i = min(√(2 ln(2/α'') / (σ̂²_{i−1} · i · ln(i + 1))), 1/2),
 *   v_i = 4 (x_i − μ̂_{i−1})²,   ψ(λ) = (−ln(1 − λ) − λ)/4 (as −log1p(−λ) − λ, over 4),
 *   centre_n = Σ_{i≤n} λ_i x_i / Σ_{i≤n} λ_i,
 *   radius_n = (ln(2/α'') + Σ_{i≤n} v_i ψ(λ_i)) / Σ_{i≤n} λ_i,
 *   L_n = max(0, max_{k≤n} (centre_k − radius_k)),  U_n = min(1, min_{k≤n} (centre_k + radius_k)),
 *   and on the scale of d: low = 2 L_n − 1, high = 2 U_n − 1 (−1 and +1 before any case).
 * The five long sums (Σ x, Σ (x − μ̂)², Σ λ, Σ λ x, Σ v ψ) are compensated (evd_stats_sum).
 * L_n only rises and U_n only falls. Should the running intersection ever be empty
 * (L_n > U_n, an event of probability at most α'' under the model) the bounds are reported
 * as they are, low > high.
 *
 * The verdict, with δ = analysis.min_effect (0 <= δ <= 1): better when low > 0; else worse
 * when high < 0; else equivalent when δ > 0, −δ < low and high < δ; else undecided
 * (continue while the experiment runs, inconclusive once it is terminal). Before n reaches
 * min_cases every verdict is undecided. decided_at is the first n >= min_cases at which the
 * bounds gave a decided verdict; that verdict is final: it is the one reported from then
 * on, and it stays true because the bounds only tighten (an equivalent CS that later also
 * excludes 0 stays equivalent, and reports the bounds that show both).
 */
#ifndef EVD_DOMAIN_SEQUENTIAL_H
#define EVD_DOMAIN_SEQUENTIAL_H

#include <stdbool.h>
#include <stdint.h>

#include "domain/stats.h"

/* The sequential verdict of one treatment. */
enum evd_seq_verdict {
    EVD_SEQ_CONTINUE = 0,
    EVD_SEQ_BETTER,
    EVD_SEQ_WORSE,
    EVD_SEQ_EQUIVALENT,
    EVD_SEQ_INCONCLUSIVE,
};

/* "continue", "better", "worse", "equivalent", "inconclusive". */
const char *evd_seq_verdict_name(enum evd_seq_verdict v);

/*
 * The verdict that bounds [low, high] on the d scale give with margin min_effect, the rule
 * above without min_cases and finality: better, worse, equivalent, or continue.
 */
enum evd_seq_verdict evd_seq_decide(double low, double high, double min_effect);

/*
 * The accumulator of one treatment. The caller reads n, decided_at and decided, and leaves
 * everything else to the functions below. centre and radius are the last step's, on the x
 * scale (0 before any case), kept for diagnostics and tests.
 */
struct evd_seq_cs {
    uint64_t n;                   /* cases added */
    double alpha2;                /* α'', 0 < α'' < 1 */
    uint64_t min_cases;           /* no verdict before this many cases (at least 1) */
    double min_effect;            /* δ, 0 <= δ <= 1 (0: no equivalence) */
    uint64_t decided_at;          /* the first n >= min_cases with a decided verdict, 0 if none */
    enum evd_seq_verdict decided; /* that verdict; EVD_SEQ_CONTINUE while undecided */
    struct evd_stats_sum sum_x, sum_dev2, sum_lambda, sum_lambda_x, sum_vpsi;
    double mu, var; /* μ̂_n and σ̂²_n, the estimates the next case is weighed by */
    double lo, hi;  /* L_n and U_n on the x scale */
    double centre, radius;
};

/*
 * Starts an empty sequence at level alpha_adjusted = α'' (0 < α'' < 1), with min_cases
 * (0 is taken as 1) and min_effect δ (0 <= δ <= 1) for the verdict and decided_at.
 */
void evd_seq_cs_init(struct evd_seq_cs *cs, double alpha_adjusted, uint64_t min_cases,
                     double min_effect);

/* Adds the next case in seq order, its pass-rate difference d ∈ [−1, 1]. */
void evd_seq_cs_add(struct evd_seq_cs *cs, double d);

/* low = 2 L_n − 1 on the d scale; −1 when n = 0. */
double evd_seq_cs_low(const struct evd_seq_cs *cs);

/* high = 2 U_n − 1 on the d scale; +1 when n = 0. */
double evd_seq_cs_high(const struct evd_seq_cs *cs);

/*
 * The verdict now: the decided one once decided_at is set, else continue, or inconclusive
 * when `terminal` (the experiment will add no more cases).
 */
enum evd_seq_verdict evd_seq_cs_verdict(const struct evd_seq_cs *cs, bool terminal);

/*
 * The dispatch order of an anytime experiment over n cases: out_dispatch_index[k] is the
 * 1-based dispatch_index of the case at 0-based dataset position k, a uniformly random
 * permutation of 1..n that depends only on (seed, n). Exactly:
 *   the stream is splitmix64 from state s = seed: each draw does
 *     s = s + 0x9E3779B97F4A7C15 (mod 2^64); z = s;
 *     z = (z ^ (z >> 30)) · 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) · 0x94D049BB133111EB;
 *     returns z ^ (z >> 31)   (all mod 2^64, unsigned);
 *   a draw below b (b >= 1) rejects every r < 2^64 mod b and returns r mod b for the first
 *     r it keeps (no bias);
 *   out[k] = k + 1 for every k, then for i = n − 1 down to 1: j = draw below i + 1,
 *     swap out[i] and out[j] (Fisher-Yates; n − 1 swaps, j = i allowed).
 */
void evd_seq_permutation(uint64_t seed, uint32_t n, uint32_t *out_dispatch_index);

/*
 * The default seed of an experiment, an integer in [0, 2^52) so that it survives a JSON
 * double. For an id "exp_" followed by at least 13 hex digits (the ids evald makes, with
 * 32): the value of those first 13 digits (either case). For any other string: the
 * FNV-1a 64-bit hash of its bytes (offset 0xCBF29CE484222325, prime 0x100000001B3: for
 * each byte h = (h ^ byte) · prime mod 2^64) shifted right by 12. NULL gives 0.
 */
uint64_t evd_seq_default_seed(const char *experiment_id);

/*
 * The cases a fixed-sample paired test needs to detect `effect` with per-case standard
 * deviation `sd` at two-sided level alpha_adjusted = α'' and power 0.8:
 *   cases = ⌈((z_{1−α''/2} + z_{0.8}) · sd / effect)²⌉,  z = evd_stats_normal_quantile,
 * saturated at 2^53. False (cases untouched) unless effect > 0, sd > 0 and 0 < α'' < 1,
 * all finite.
 */
bool evd_seq_cases_needed(double effect, double sd, double alpha_adjusted, double *cases);

#endif
