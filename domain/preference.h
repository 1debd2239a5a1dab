/*
 * The statistics of a pairwise judge (shared spec judges.md, "Judging", "Analysis", "Judge
 * quality"): the judge's answer, the pair's outcome from its one or two orders, and per
 * treatment the preference summary (wins, losses, ties, rate, the paired analysis of the
 * per-case preference p_i and its verdict) and the judge-quality figures (consistency,
 * first-slot bias, length bias), plus the character count the length bias needs.
 *
 * Pure: no I/O, no global state; thread-safe. The summaries allocate their scratch for the
 * call and free it before returning; nothing else allocates. The paired
 * statistics are stats.h's (evd_stats_paired_direct, evd_stats_paired_summary,
 * evd_stats_wilson), applied to p_i instead of d_i. Cross-checked against an independent
 * Python implementation with SciPy by tests/stats/check_preference.py.
 *
 * Orders. Order 1 puts the control's output in slot 1, order 2 the treatment's. The arm an
 * answer names:
 *   order 1: "1" → control, "2" → treatment;  order 2: "1" → treatment, "2" → control;
 *   "tie" names no arm in either order.
 * The pair's outcome with both orders (A1, A2 the arms named, or tie):
 *   A1       A2        outcome     consistent  inconsistent
 *   T        T         treatment   yes         no
 *   T        tie       treatment   no          no
 *   tie      T         treatment   no          no
 *   C        C         control     yes         no
 *   C        tie       control     no          no
 *   tie      C         control     no          no
 *   tie      tie       tie         yes         no
 *   C        T         tie         no          yes
 *   T        C         tie         no          yes
 * (a pair where one order names an arm and the other ties is neither consistent nor
 * inconsistent). With orders "one" repeat r (1-based) is judged in order 1 when r is odd
 * and in order 2 when r is even, and that single answer's arm is the outcome; such a pair
 * is neither consistent nor inconsistent and is left out of every judge-quality figure.
 *
 * Preference (per treatment). Case i has w_i, l_i, t_i pairs won by the treatment, by the
 * control, tied; k_i = w_i + l_i + t_i. Over all judged pairs:
 *   wins = Σ w_i, losses = Σ l_i, ties = Σ t_i, inconsistent = #inconsistent pairs,
 *   rate = (Σ w_i + Σ t_i / 2) / Σ k_i (undefined when Σ k_i = 0).
 * The cases with k_i >= 1 are paired, n of them, with
 *   p_i = (w_i − l_i) / k_i ∈ [−1, 1],
 * and delta = p̄, se, df, ci_low, ci_high, t_p_value, p_value_adjusted, mde, the verdict
 * are evd_stats_paired_summary of the moments of p_1..p_n (clustered by the cases' cluster
 * when given, C = the clusters holding at least one paired case), exactly as the pass rate's
 * d_i: se = s.d.(n − 1)/√n, df = n − 1 (clustered: √(C/(C−1) Σ_c (Σ_{i∈c} (p_i − p̄))²)/n,
 * df = C − 1); ci = p̄ ∓ t(1 − α'/2, df)·se with α' = α/m; t_p_value = P(|T_df| >= |p̄/se|);
 * p_value_adjusted = min(1, m·t_p_value); se = 0: p = 1 and ci [p̄, p̄] when p̄ = 0, p = 0
 * and ci [p̄, p̄] otherwise; verdict better when ci_low > 0, worse when ci_high < 0,
 * equivalent when min_effect > 0 and −min_effect < ci_low, ci_high < min_effect, else
 * inconclusive (and inconclusive with n < 2 or C < 2).
 *
 * Judge quality (per treatment), over the pairs judged in both orders only:
 *   consistency = consistent pairs / such pairs (undefined when there is none);
 *   first_slot: n = the answers of those pairs that named a slot ("1" or "2", two per pair
 *     at most), hits = those naming "1";
 *   length: n = the pairs with a decisive outcome (control or treatment) whose two outputs
 *     differ in length in Unicode code points, hits = those whose winner's output is the
 *     longer one;
 *   each as fraction = hits / n with the Wilson score interval of (hits, n) at the
 *   unadjusted confidence 1 − α (stats.h); undefined (null on the wire) when n = 0.
 */
#ifndef EVD_DOMAIN_PREFERENCE_H
#define EVD_DOMAIN_PREFERENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "domain/stats.h"

/* One judge answer: the slot it prefers, or a tie. */
enum evd_pref_slot {
    EVD_PREF_SLOT_1,
    EVD_PREF_SLOT_2,
    EVD_PREF_TIE,
};

/*
 * The judge's `winner`: exactly "1", "2" or "tie" (case-sensitive, no blanks). False (out
 * untouched) for anything else, NULL included.
 */
bool evd_pref_slot_parse(const char *text, enum evd_pref_slot *out);

/* "1", "2", "tie": the wire's winner_slot. */
const char *evd_pref_slot_name(enum evd_pref_slot slot);

/*
 * A pair's outcome, and the arm one order's answer names (TIE: no arm). The values are in
 * the spec's confusion order control, tie, treatment, so that they index its rows.
 */
enum evd_pref_outcome {
    EVD_PREF_OUTCOME_CONTROL,
    EVD_PREF_OUTCOME_TIE,
    EVD_PREF_OUTCOME_TREATMENT,
};

/* "control", "tie", "treatment". */
const char *evd_pref_outcome_name(enum evd_pref_outcome outcome);

/* The arm that `answer` names in order 1 or 2 (the table above). */
enum evd_pref_outcome evd_pref_order_winner(unsigned order, enum evd_pref_slot answer);

/* The single order of repeat r (1-based) with orders "one": 1 when r is odd, else 2. */
unsigned evd_pref_single_order(uint32_t repeat);

/* One judged pair: its answers, the arm each names, and its outcome. */
struct evd_pref_pair {
    bool judged[2];                  /* [0]: order 1 answered, [1]: order 2 answered */
    enum evd_pref_slot slot[2];      /* the answers, where judged */
    enum evd_pref_outcome winner[2]; /* the arm each answer names, where judged */
    enum evd_pref_outcome outcome;
    bool both;         /* judged in both orders: the pair counts in the judge quality */
    bool consistent;   /* both: the two orders name the same arm, or both tie */
    bool inconsistent; /* both: the two orders name different arms */
};

/* The pair of orders: "both": order1 the answer with the control in slot 1, order2 with the
 * treatment in slot 1. */
void evd_pref_pair_both(enum evd_pref_slot order1, enum evd_pref_slot order2,
                        struct evd_pref_pair *out);

/*
 * A pair judged in one order only (1 or 2): its answer is the outcome, and the pair is
 * neither consistent nor inconsistent nor counted in the judge quality. This is orders
 * "one" (order = evd_pref_single_order(r)); a caller may also use it for an orders "both"
 * pair of which only one order was answered.
 */
void evd_pref_pair_single(unsigned order, enum evd_pref_slot answer, struct evd_pref_pair *out);

/* Orders "one": evd_pref_pair_single(evd_pref_single_order(repeat), answer, out). */
void evd_pref_pair_one(uint32_t repeat, enum evd_pref_slot answer, struct evd_pref_pair *out);

/* w_i, l_i, t_i of one case. */
struct evd_pref_case {
    uint64_t wins, losses, ties;
};

/* Counts `pair` into its case's w_i, l_i or t_i by its outcome. */
void evd_pref_case_add(struct evd_pref_case *c, const struct evd_pref_pair *pair);

/*
 * p_i = (w_i − l_i) / k_i into *p (exactly 0, ±1 where it is). False (p untouched) when
 * k_i = 0: the case is not paired. The anytime rule (sequential.md) feeds these to its CS.
 */
bool evd_pref_case_p(const struct evd_pref_case *c, double *p);

/* One judged pair as evd_pref_summarize reads it. */
struct evd_pref_judged {
    uint32_t case_index; /* the case's 0-based position, < ncases */
    struct evd_pref_pair pair;
    uint64_t len_control;   /* code points of the control's output (evd_pref_codepoints) */
    uint64_t len_treatment; /* and of the treatment's */
};

/* A fraction hits / n with its Wilson interval; has is false (and the rest 0) when n = 0. */
struct evd_pref_fraction {
    bool has;
    uint64_t hits, n;
    double fraction, wilson_low, wilson_high;
};

/* The preference and the judge quality of one treatment. */
struct evd_pref_summary {
    /* comparisons[].preference */
    uint64_t pairs; /* Σ k_i: judged pairs */
    uint64_t wins, losses, ties, inconsistent;
    bool has_rate;
    double rate;
    uint64_t paired_cases;            /* n: cases with k_i >= 1 */
    struct evd_stats_moments moments; /* of p_i (moments.clusters is C when clustered) */
    struct evd_stats_paired delta;    /* delta.mean = p̄ … delta.verdict */
    /* comparisons[].judge_quality */
    uint64_t both_pairs, consistent_pairs; /* pairs judged in both orders, the consistent */
    bool has_consistency;
    double consistency;
    struct evd_pref_fraction first_slot, length;
};

/*
 * What one case contributes to a treatment's summary: its w_i, l_i, t_i and the
 * judge-quality counts of its pairs (the engine keeps one per case and treatment, so that a
 * new judgement costs O(1) to take in). Plain counts: they add.
 */
struct evd_pref_tally {
    struct evd_pref_case c; /* w_i, l_i, t_i */
    uint64_t inconsistent;
    uint64_t both, consistent; /* pairs judged in both orders; the consistent ones */
    uint64_t named, first;     /* answers naming a slot; those naming slot 1 */
    uint64_t decisive, longer; /* decisive outcomes of unequal lengths; won by the longer */
};

/* Counts one judged pair (with its output lengths) into t. */
void evd_pref_tally_add(struct evd_pref_tally *t, const struct evd_pref_pair *pair,
                        uint64_t len_control, uint64_t len_treatment);

/*
 * The summary from per-case tallies (ncases of them, borrowed), as evd_pref_summarize
 * (below) computes it from the pairs themselves. False on ENOMEM (out zeroed).
 */
bool evd_pref_summarize_tallies(const struct evd_pref_tally *cases, size_t ncases,
                                const uint32_t *cluster, size_t nclusters,
                                const struct evd_stats_params *params,
                                struct evd_pref_summary *out);

/*
 * The summary of `npairs` judged pairs (borrowed) of one treatment over `ncases` cases.
 * cluster: NULL, or cluster[c] < nclusters the cluster of case c (ncases entries), for
 * cluster_by. params: α, m and min_effect as for the pass rate (α also sets the Wilson
 * intervals, unadjusted). Direct: one pass over the pairs into per-case counts, one over
 * the cases (O(npairs + ncases + nclusters)); the caller recomputes it when a judgement
 * lands. False on ENOMEM, or when the scratch block's size would overflow (out zeroed).
 */
bool evd_pref_summarize(const struct evd_pref_judged *pairs, size_t npairs, size_t ncases,
                        const uint32_t *cluster, size_t nclusters,
                        const struct evd_stats_params *params, struct evd_pref_summary *out);

/*
 * The number of characters of the UTF-8 text utf8[0..len) (NUL bytes included), as a
 * decoder that follows the Unicode Standard's "U+FFFD substitution of maximal subparts"
 * (chapter 3) yields them: each well-formed sequence (1-4 bytes, no overlong form, no
 * surrogate, at most U+10FFFF) is one code point, and each maximal ill-formed subpart (the
 * longest prefix of a well-formed sequence that starts there, or else a single byte) counts
 * as one replacement character. Valid UTF-8 gives exactly its code points; 0 for len 0.
 */
size_t evd_pref_codepoints(const char *utf8, size_t len);

#endif
