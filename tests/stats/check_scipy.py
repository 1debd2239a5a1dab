#!/usr/bin/env python3
"""Checks domain/stats.c (through tests/stats/stats_dump) against SciPy.

For each function it draws random inputs from a seeded generator, asks stats_dump for
its values, computes SciPy's and requires agreement to 1e-9 relative:
    |ours - scipy| <= 1e-9 * max(|scipy|, scale)
where scale is 1e-300 (a pure relative test) except for values that are sums or
differences of larger terms, whose rounding is relative to those terms in any
implementation: the mean of the differences (scale: the mean of |d_i|) and the CI bounds
(scale: |mean| + half width). Both NaN (a null) or both the same infinity also agree.

Usage: check_scipy.py <stats_dump> [--seed N] [--count N] [--perturb FUNCTION]
--perturb multiplies our first value of FUNCTION by (1 + 1e-8), to show the check fails.
Exit 0 when everything agrees, 1 with the worst cases printed otherwise.
"""
import argparse
import math
import subprocess
import sys
import warnings

import numpy as np
from scipy import special, stats

REL = 1e-9
TINY = 1e-300


def log_uniform(rng, lo, hi, size):
    return np.exp(rng.uniform(math.log(lo), math.log(hi), size))


def draw_df(rng, n):
    """Half integer, half real degrees of freedom, log-uniform over [1, 1e9]."""
    df = log_uniform(rng, 1.0, 1e9, n)
    df[: n // 2] = np.round(df[: n // 2])
    rng.shuffle(df)
    return df


def gen_tcdf(rng, n):
    df = draw_df(rng, n)
    # |t| log-uniform over [1e-6, 1e4], either sign
    t = log_uniform(rng, 1e-6, 1e4, n) * rng.choice([-1.0, 1.0], n)
    ref = stats.t.cdf(t, df)
    keep = ref > 1e-290  # far tails underflow in both
    return [f"c {a!r} {b!r}" for a, b in zip(df[keep], t[keep])], [[r] for r in ref[keep]], None


def t_ppf(p, df):
    """SciPy's t quantile, polished by Newton steps on SciPy's own cdf and pdf.

    stats.t.ppf (stdtrit) stops its root search at a tolerance near 1e-9 relative, so its
    raw answers are off by up to ~3e-9; the polished value is the root of SciPy's cdf,
    which SciPy computes to ~1e-14. Solved on the lower tail and mirrored.
    """
    p = np.asarray(p, dtype=float)
    df = np.broadcast_to(np.asarray(df, dtype=float), p.shape)
    q = np.minimum(p, 1.0 - p)
    t = stats.t.ppf(q, df)
    for _ in range(3):
        t = t - (stats.t.cdf(t, df) - q) / stats.t.pdf(t, df)
    return np.where(p > 0.5, -t, t)


def gen_tq(rng, n):
    df = draw_df(rng, n)
    # tail probabilities log-uniform over [1e-60, 0.5), mirrored to the upper half at
    # random where 1 - q is not rounded to 1
    q = log_uniform(rng, 1e-60, 0.5, n)
    p = np.where((rng.random(n) < 0.5) & (q > 1e-12), 1.0 - q, q)
    ref = t_ppf(p, df)
    keep = np.isfinite(ref) & (np.abs(ref) < 1e90) & (p != 0.5)  # SciPy clamps at 1e100
    return [f"q {a!r} {b!r}" for a, b in zip(df[keep], p[keep])], [[r] for r in ref[keep]], None


def sign_ref(wins, losses):
    """binomtest(w, w + l, 0.5).pvalue, vectorized: for p = 1/2 the pmf is symmetric and
    binomtest's two-sided p is min(1, 2 * cdf(min(w, l))) (1 when w = l)."""
    k = np.minimum(wins, losses)
    return np.where(wins == losses, 1.0, np.minimum(1.0, 2 * stats.binom.cdf(k, wins + losses, 0.5)))


def gen_sign(rng, n):
    total = np.round(log_uniform(rng, 1, 1e5, n)).astype(np.int64)
    # wins near the centre (where the sum has many terms) and anywhere
    centre = np.round(total / 2 + rng.normal(0, 1, n) * np.sqrt(total) * 2).astype(np.int64)
    anywhere = rng.integers(0, total + 1)
    wins = np.clip(np.where(rng.random(n) < 0.6, centre, anywhere), 0, total)
    losses = total - wins
    ref = sign_ref(wins, losses)
    # the vectorized form is binomtest's value: check it on a sample
    for i in range(0, n, n // 200):
        bt = stats.binomtest(int(wins[i]), int(total[i]), 0.5).pvalue
        assert abs(bt - ref[i]) <= 1e-12 * max(bt, 1e-300), (wins[i], losses[i], bt, ref[i])
    keep = ref > 1e-290
    lines = [f"s {int(w)} {int(l)}" for w, l in zip(wins[keep], losses[keep])]
    return lines, [[r] for r in ref[keep]], None


def wilson_ref(x, n, alpha):
    """The Wilson score interval with SciPy's normal quantile (special.ndtri)."""
    z = special.ndtri(1 - alpha / 2)
    p = x / n
    denom = 2 * (n + z**2)
    centre = (2 * n * p + z**2) / denom
    half = z * np.sqrt(4 * n * p * (1 - p) + z**2) / denom
    return centre - half, centre + half


def gen_wilson(rng, n):
    total = np.round(log_uniform(rng, 1, 1e5, n)).astype(np.int64)
    passed = rng.integers(0, total + 1)
    alpha = rng.uniform(0.001, 0.5, n)
    lo, hi = wilson_ref(passed.astype(float), total.astype(float), alpha)
    lo = np.where(passed == 0, 0.0, lo)
    hi = np.where(passed == total, 1.0, hi)
    # the formula is binomtest's proportion_ci(method="wilson"): check it on a sample
    for i in range(0, n, n // 200):
        ci = stats.binomtest(int(passed[i]), int(total[i]), 0.5).proportion_ci(
            1 - alpha[i], method="wilson")
        assert abs(ci.low - lo[i]) <= 1e-12 and abs(ci.high - hi[i]) <= 1e-12, (i, ci, lo[i], hi[i])
    lines = [f"w {int(x)} {int(t)} {a!r}" for x, t, a in zip(passed, total, alpha)]
    return lines, [[a, b] for a, b in zip(lo, hi)], None


def paired_refs(vectors, alphas, ms, clusters=None):
    """mean se df ci_low ci_high t_p p_adj mde for each vector: the moments by numpy, the
    t distribution by SciPy (batched), the clustered se by its formula in numpy."""
    means, ses, dfs = [], [], []
    for i, d in enumerate(vectors):
        n = len(d)
        mean = float(np.mean(d))
        if clusters is None:
            se = float(np.std(d, ddof=1) / np.sqrt(n))
            df = n - 1
        else:
            cl = clusters[i]
            labels = np.unique(cl)
            c = len(labels)
            sums = np.array([np.sum(d[cl == k] - mean) for k in labels])
            se = math.sqrt(c / (c - 1) * float(np.sum(sums**2))) / n
            df = c - 1
        means.append(mean)
        ses.append(se)
        dfs.append(df)
    means, ses, dfs = np.array(means), np.array(ses), np.array(dfs, dtype=float)
    alphas, ms = np.array(alphas), np.array(ms, dtype=float)
    tp = 2 * stats.t.sf(np.abs(means / ses), dfs)
    q = t_ppf(1 - alphas / ms / 2, dfs)
    q8 = t_ppf(np.full(len(dfs), 0.8), dfs)
    out, scales = [], []
    for i in range(len(means)):
        lo, hi = means[i] - q[i] * ses[i], means[i] + q[i] * ses[i]
        ref = [means[i], ses[i], dfs[i], lo, hi, tp[i], min(1.0, ms[i] * tp[i]),
               (q[i] + q8[i]) * ses[i]]
        out.append(ref + ref)  # the direct and the accumulator answers
        scales.append((abs(means[i]) + q[i] * ses[i], float(np.mean(np.abs(vectors[i])))))
    # the batched p value is ttest_1samp's: check it on a sample
    if clusters is None:
        for i in range(0, len(vectors), max(1, len(vectors) // 100)):
            r = stats.ttest_1samp(vectors[i], 0.0).pvalue
            assert abs(r - tp[i]) <= 1e-12 * max(r, 1e-300), (i, r, tp[i])
    return out, scales


def draw_diffs(rng, n):
    kind = rng.integers(0, 3)
    if kind == 0:  # differences of case pass rates x/k with k = 1..5
        k = rng.integers(1, 6)
        return rng.integers(0, k + 1, n) / k - rng.integers(0, k + 1, n) / k
    if kind == 1:  # token-like metric deltas
        return np.round(rng.normal(rng.normal(0, 50), rng.uniform(1, 300), n))
    return rng.normal(rng.normal(0, 0.2), rng.uniform(0.01, 1), n)


def gen_paired(rng, n):
    lines, vectors, alphas, ms = [], [], [], []
    while len(lines) < n:
        size = int(rng.integers(2, 80))
        d = draw_diffs(rng, size)
        if np.std(d) <= 1e-12 * np.mean(np.abs(d)):
            continue  # the se = 0 rules are unit-tested; SciPy's t test gives NaN there
        alpha = float(rng.uniform(0.001, 0.49))
        m = int(rng.integers(1, 5))
        lines.append(f"p {alpha!r} {m} 0.0 {size} " + " ".join(repr(float(v)) for v in d))
        vectors.append(d)
        alphas.append(alpha)
        ms.append(m)
    refs, scales = paired_refs(vectors, alphas, ms)
    return lines, refs, scales


def gen_clustered(rng, n):
    lines, vectors, alphas, ms, clusters = [], [], [], [], []
    while len(lines) < n:
        size = int(rng.integers(3, 120))
        nclusters = int(rng.integers(2, max(3, size // 2)))
        d = draw_diffs(rng, size)
        cl = rng.integers(0, nclusters, size)
        if len(np.unique(cl)) < 2:
            continue
        mean = np.mean(d)
        sums = [np.sum(d[cl == k] - mean) for k in np.unique(cl)]
        if np.max(np.abs(sums)) <= 1e-12 * np.sum(np.abs(d)):
            continue  # se = 0 but for rounding: the se = 0 rules are unit-tested
        alpha = float(rng.uniform(0.001, 0.49))
        m = int(rng.integers(1, 5))
        lines.append(
            f"k {alpha!r} {m} 0.0 {size} {nclusters} "
            + " ".join(repr(float(v)) for v in d)
            + " "
            + " ".join(str(int(c)) for c in cl)
        )
        vectors.append(d)
        alphas.append(alpha)
        ms.append(m)
        clusters.append(cl)
    refs, scales = paired_refs(vectors, alphas, ms, clusters)
    return lines, refs, scales


FUNCTIONS = {
    "t_cdf": gen_tcdf,
    "t_quantile": gen_tq,
    "sign_test": gen_sign,
    "wilson": gen_wilson,
    "paired": gen_paired,
    "clustered": gen_clustered,
}

# for the paired answers: which values are differences of larger terms: the CI bounds
# (relative to |mean| + half width) and the mean (relative to the mean of |d_i|)
PAIRED_CI = {3, 4, 11, 12}
PAIRED_MEAN = {0, 8}


def agree(ours, ref, scale):
    if ref is None or (isinstance(ref, float) and math.isnan(ref)):
        return math.isnan(ours)
    if math.isinf(ref):
        return ours == ref
    if math.isnan(ours):
        return False
    return abs(ours - ref) <= REL * max(abs(ref), scale)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--perturb", default=None)
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # SciPy's underflow notes in the far tails

    failed = False
    for fi, (name, gen) in enumerate(FUNCTIONS.items()):
        rng = np.random.default_rng([args.seed, fi])
        # draw extra for the filters, then keep `count`
        lines, refs, scales = gen(rng, int(args.count * 1.3))
        lines, refs = lines[: args.count], refs[: args.count]
        if scales is not None:
            scales = scales[: args.count]
        if len(lines) < args.count:
            print(f"FAIL {name}: only {len(lines)} inputs drawn", file=sys.stderr)
            failed = True
        proc = subprocess.run(
            [args.dump], input="\n".join(lines) + "\n", capture_output=True, text=True
        )
        if proc.returncode != 0:
            print(f"FAIL {name}: stats_dump exited {proc.returncode}: {proc.stderr}")
            sys.exit(1)
        out = proc.stdout.split("\n")
        bad, worst = [], 0.0
        for i, (line, ref) in enumerate(zip(lines, refs)):
            ours = [float(v) for v in out[i].split()]
            if args.perturb == name and i == 0:
                ours[0] *= 1 + 1e-8
            if len(ours) != len(ref):
                bad.append((line, ours, ref, "arity"))
                continue
            for j, (o, r) in enumerate(zip(ours, ref)):
                scale = TINY
                if scales is not None and j in PAIRED_CI:
                    scale = scales[i][0]
                if scales is not None and j in PAIRED_MEAN:
                    scale = scales[i][1]
                if not agree(o, r, scale):
                    bad.append((line, j, o, r))
                elif r is not None and math.isfinite(r) and r != 0:
                    worst = max(worst, abs(o - r) / max(abs(r), scale))
        status = "ok" if not bad else "FAIL"
        print(f"{status} {name}: {len(lines)} inputs, worst relative difference {worst:.3g}"
              + (f", {len(bad)} disagree" if bad else ""))
        for b in bad[:10]:
            print("   ", b[1:], b[0][:150])
        failed = failed or bool(bad)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
