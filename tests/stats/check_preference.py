#!/usr/bin/env python3
"""Checks domain/preference.c (through tests/stats/preference_dump) against this file.

This file computes, from the judges contract (shared spec judges.md, "Judging",
"Analysis", "Judge quality") and the paired rules of experiments.md, with NumPy and SciPy:
  - each pair's outcome, consistent and inconsistent from its one or two answers (exactly);
  - wins, losses, ties, inconsistent, paired cases, clusters (exactly), and rate;
  - over the cases' p_i = (w_i - l_i)/k_i: delta, se, df, ci_low, ci_high, t_p_value,
    p_value_adjusted and mde with scipy.stats.t (the quantile polished by Newton steps on
    SciPy's own cdf, since stats.t.ppf alone stops near 1e-9), clustered when drawn so;
    the verdict;
  - consistency, and first_slot and length with their Wilson bounds at the unadjusted
    1 - alpha from scipy.special.ndtri;
  - the code points of random byte strings, as Python's UTF-8 decoder with
    errors="replace" counts them (one U+FFFD per maximal ill-formed subpart).
Reals agree when |ours - ref| <= 1e-9 * max(|ref|, scale): scale 1e-300 (relative) for se,
df, p values and mde; the mean of |p_i| for delta and |delta| + half width for the CI
bounds (differences of larger terms); 1 for rate, consistency and the fractions and Wilson
bounds (values in [0, 1]). Nulls must be nulls. A verdict that differs where a bound lies
within 1e-9 of a threshold counts as tied, not failed. Where every cluster's deviations
sum to exactly 0 (checked in rationals) the true se is 0 but both sides round to ~1e-17:
there ours must be below 1e-12 and the p values and mde, ratios of rounding noise, are
not compared (the count is printed).

Usage: check_preference.py <preference_dump> [--seed N] [--count N] [--perturb]
--perturb moves one expected delta by 1e-8 to show that the check fails.
Exit 0 when everything agrees, 1 with the first disagreements printed otherwise.
"""
import argparse
import math
import random
import subprocess
import sys
import warnings
from fractions import Fraction

import numpy as np
from scipy import special, stats

TOL = 1e-9


# ---- the contract, written out --------------------------------------------------------

def arm_named(order, answer):
    """'C', 'T' or None (a tie) for one order's answer."""
    if answer == "tie":
        return None
    control_first = order == 1
    return "C" if (answer == "1") == control_first else "T"


def pair_outcome(a1, a2):
    """(outcome, consistent, inconsistent, both) of a pair; '-' marks an unjudged order."""
    named = [arm_named(o, a) for o, a in ((1, a1), (2, a2)) if a != "-"]
    if len(named) == 1:
        return {"C": "control", "T": "treatment", None: "tie"}[named[0]], False, False, False
    arms = {x for x in named if x is not None}
    if len(arms) == 2:
        return "tie", False, True, True
    if not arms:
        return "tie", True, False, True
    winner = "control" if arms == {"C"} else "treatment"
    return winner, named[0] == named[1], False, True


def t_quantile(p, df):
    """The root of SciPy's t cdf, from stats.t.ppf polished by Newton steps."""
    lower = min(p, 1 - p)
    t = stats.t.ppf(lower, df)
    for _ in range(4):
        t -= (stats.t.cdf(t, df) - lower) / stats.t.pdf(t, df)
    return -t if p > 0.5 else t


def wilson(hits, n, alpha):
    if n == 0:
        return None
    z = special.ndtri(1 - alpha / 2)
    ph = hits / n
    centre = (ph + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(ph * (1 - ph) / n + z * z / (4 * n * n))
    low = 0.0 if hits == 0 else centre - half
    high = 1.0 if hits == n else centre + half
    return hits / n, low, high


def verdict_of(low, high, me):
    if low > 0:
        return "better"
    if high < 0:
        return "worse"
    if me > 0 and -me < low and high < me:
        return "equivalent"
    return "inconclusive"


def expected(req):
    """Every answer the dump should give for one drawn request, with the scales."""
    alpha, m, me, ncases, clusters, pairs = req
    per_pair = []
    w, l, t = [0] * ncases, [0] * ncases, [0] * ncases
    inconsistent = both = consistent = 0
    named = first = decisive = longer = 0
    for case, a1, a2, lc, lt in pairs:
        outcome, cons, inc, is_both = pair_outcome(a1, a2)
        per_pair.append((outcome, int(cons), int(inc)))
        {"treatment": w, "control": l, "tie": t}[outcome][case] += 1
        inconsistent += inc
        if not is_both:
            continue
        both += 1
        consistent += cons
        for a in (a1, a2):
            if a != "tie":
                named += 1
                first += a == "1"
        if outcome != "tie" and lc != lt:
            decisive += 1
            longer += (outcome == "treatment") == (lt > lc)
    total = sum(w) + sum(l) + sum(t)
    paired = [i for i in range(ncases) if w[i] + l[i] + t[i] > 0]
    p = np.array([(w[i] - l[i]) / (w[i] + l[i] + t[i]) for i in paired])
    n = len(p)
    out = {
        "counts": [total, sum(w), sum(l), sum(t), inconsistent],
        "rate": (sum(w) + sum(t) / 2) / total if total else None,
        "paired": n,
        "clusters": len({clusters[i] for i in paired}) if clusters else 0,
        "both": [both, consistent],
        "consistency": consistent / both if both else None,
        "first_slot": (named, first, wilson(first, named, alpha)),
        "length": (decisive, longer, wilson(longer, decisive, alpha)),
        "pairs": per_pair,
    }
    nulls = [None] * 7
    out["mean"] = float(np.mean(p)) if n else None
    out["mean_scale"] = float(np.mean(np.abs(p))) if n else 0.0
    out["paired_stats"], out["verdict"], out["ci_scale"] = nulls, "inconclusive", 0.0
    if n == 0:
        return out
    equal = bool(np.all(p == p[0]))
    mean = float(p[0]) if equal else float(np.mean(p))
    out["mean"] = mean
    if clusters:
        c = out["clusters"]
        if c < 2 or n < 2:
            return out
        cl = np.array([clusters[i] for i in paired])
        sums = np.array([np.sum(p[cl == k] - mean) for k in np.unique(cl)])
        se = 0.0 if equal else math.sqrt(c / (c - 1) * float(np.sum(sums ** 2))) / n
        df = c - 1
        # every cluster's deviations summing to exactly 0 (in rationals) makes the true se
        # 0, which floating point only approximates: see compare()
        exact = [Fraction(w[i] - l[i], w[i] + l[i] + t[i]) for i in paired]
        exact_mean = sum(exact) / n
        out["rounded_zero"] = not equal and all(
            sum(e - exact_mean for e, k in zip(exact, cl) if k == label) == 0
            for label in np.unique(cl))
    else:
        if n < 2:
            return out
        se = 0.0 if equal else float(np.std(p, ddof=1)) / math.sqrt(n)
        df = n - 1
    q = t_quantile(1 - alpha / m / 2, df)
    if se == 0:
        tp = 1.0 if mean == 0 else 0.0
        lo = hi = mean
    else:
        tp = float(2 * stats.t.sf(abs(mean / se), df))
        lo, hi = mean - q * se, mean + q * se
    mde = (q + t_quantile(0.8, df)) * se
    out["paired_stats"] = [se, float(df), lo, hi, tp, min(1.0, m * tp), mde]
    out["ci_scale"] = abs(mean) + q * se
    out["verdict"] = verdict_of(lo, hi, me)
    out["near"] = min([abs(lo), abs(hi)] + ([abs(lo + me), abs(hi - me)] if me > 0 else []))
    return out


# ---- inputs -----------------------------------------------------------------------------

def draw_request(rng):
    """A random treatment: cases, repeats, a judge with its own biases, outputs' lengths."""
    ncases = rng.choice([rng.randint(1, 6), rng.randint(2, 40), rng.randint(20, 150)])
    repeats = rng.randint(1, 5)
    orders = "both" if rng.random() < 0.7 else "one"
    effect = rng.choice([0.0, 0.0, rng.uniform(-1.5, 1.5)])  # the treatment's true edge
    spread = rng.choice([0.0, rng.uniform(0.1, 2.0)])        # case-to-case variation
    slot_bias = rng.choice([0.0, 0.0, rng.uniform(0, 1), 1.0])  # answers "1" regardless
    tie_rate = rng.choice([0.0, rng.uniform(0, 0.5), rng.uniform(0.5, 1.0)])
    length_pull = rng.choice([0.0, rng.uniform(-1, 2)])
    fail_rate = rng.choice([0.0, 0.05, 0.3])
    lonely = rng.choice([0.0, 0.05])                         # "both" with one answer missing

    clusters = None
    if rng.random() < 0.35:
        nclusters = rng.randint(1, 10)
        clusters = [rng.randrange(nclusters) for _ in range(ncases)]
    pairs = []
    for case in range(ncases):
        edge = effect + rng.gauss(0, spread) if spread else effect
        for r in range(1, repeats + 1):
            if rng.random() < fail_rate:
                continue  # a run failed before an output: the pair is unjudged
            lc = rng.choice([rng.randint(0, 300), 40])
            lt = rng.choice([rng.randint(0, 300), 40, lc])

            def judge(order):
                if rng.random() < tie_rate:
                    return "tie"
                if rng.random() < slot_bias:
                    return "1"
                pull = edge + length_pull * ((lt > lc) - (lt < lc))
                better_t = rng.random() < 1 / (1 + math.exp(-pull))
                return ("2" if better_t else "1") if order == 1 else ("1" if better_t else "2")

            if orders == "one":
                order = 1 if r % 2 == 1 else 2
                a = judge(order)
                a1, a2 = (a, "-") if order == 1 else ("-", a)
            else:
                a1, a2 = judge(1), judge(2)
                if rng.random() < lonely:
                    if rng.random() < 0.5:
                        a1 = "-"
                    else:
                        a2 = "-"
            pairs.append((case, a1, a2, lc, lt))
    alpha = rng.uniform(0.001, 0.3)
    m = rng.randint(1, 4)
    me = rng.choice([0.0, rng.uniform(0.01, 0.5), 0.2, 0.5])
    return alpha, m, me, ncases, clusters, pairs


def request_line(req):
    alpha, m, me, ncases, clusters, pairs = req
    nclusters = max(clusters) + 1 if clusters else 0
    words = ["j", repr(alpha), str(m), repr(me), str(ncases), str(nclusters), str(len(pairs))]
    if clusters:
        words += [str(c) for c in clusters]
    for case, a1, a2, lc, lt in pairs:
        words += [str(case), a1, a2, str(lc), str(lt)]
    return " ".join(words)


FRAGMENTS = [b"a", b"Z", b"\x00", b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80",
             b"\xed\x9f\xbf", b"\xef\xbf\xbf", b"\xf4\x8f\xbf\xbf", b"\xc0\x80", b"\xe0\x80\x80",
             b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf8", b"\xff", b"\x80", b"\xbf", b"\xc3",
             b"\xe2\x82", b"\xf0\x9f\x98", b"\xf0\x90", b"\xe0\xa0", b"\xed\x80", b"\xc2"]


def draw_bytes(rng):
    if rng.random() < 0.3:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
    return b"".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 30)))


# ---- the comparison ---------------------------------------------------------------------

def close(ours, ref, scale):
    if ref is None:
        return math.isnan(ours)
    if math.isnan(ours):
        return False
    return abs(ours - ref) <= TOL * max(abs(ref), scale)


def compare(got, want, where, failures, worst):
    """Appends to failures what differs; returns whether a verdict tie was excused."""
    npairs = len(want["pairs"])
    head = got[: 3 * npairs]
    for k, (outcome, cons, inc) in enumerate(want["pairs"]):
        if head[3 * k: 3 * k + 3] != [outcome, str(cons), str(inc)]:
            failures.append(f"{where}: pair {k} answered {head[3 * k: 3 * k + 3]}, expected "
                            f"{[outcome, cons, inc]}")
            return False
    g = got[3 * npairs:]
    if len(g) != 30:
        failures.append(f"{where}: {len(g)} summary values")
        return False
    ints = [int(v) for v in g[0:5]] + [int(g[6]), int(g[7])]
    if ints != want["counts"] + [want["paired"], want["clusters"]]:
        failures.append(f"{where}: counts {ints}, expected "
                        f"{want['counts'] + [want['paired'], want['clusters']]}")
    reals = [("rate", float(g[5]), want["rate"], 1.0),
             ("delta", float(g[8]), want["mean"], want["mean_scale"])]
    names = ["se", "df", "ci_low", "ci_high", "t_p_value", "p_value_adjusted", "mde"]
    for j, name in enumerate(names):
        scale = want["ci_scale"] if name in ("ci_low", "ci_high") else 1e-300
        reals.append((name, float(g[9 + j]), want["paired_stats"][j], scale))
    if [int(g[17]), int(g[18])] != want["both"]:
        failures.append(f"{where}: both/consistent {g[17:19]}, expected {want['both']}")
    reals.append(("consistency", float(g[19]), want["consistency"], 1.0))
    for name, base in (("first_slot", 20), ("length", 25)):
        n, hits, interval = want[name]
        if [int(g[base]), int(g[base + 1])] != [n, hits]:
            failures.append(f"{where}: {name} n/hits {g[base:base + 2]}, expected {[n, hits]}")
        for j, part in enumerate(("fraction", "wilson_low", "wilson_high")):
            reals.append((f"{name}.{part}", float(g[base + 2 + j]),
                          interval[j] if interval else None, 1.0))
    if want.get("rounded_zero"):
        # the true se is 0 but the clustered sums round to ~1e-17 in both implementations:
        # require a negligible se and a CI on the mean, and leave the p values and mde
        # (ratios of rounding noise) out
        se = float(g[9])
        if not se <= 1e-12:
            failures.append(f"{where}: se {se!r} where the exact se is 0")
        reals = [r for r in reals if r[0] not in ("se", "t_p_value", "p_value_adjusted", "mde")]
    for name, ours, ref, scale in reals:
        if not close(ours, ref, scale):
            failures.append(f"{where}: {name} {ours!r}, expected {ref!r}")
        elif ref is not None and ref != 0:
            worst[0] = max(worst[0], abs(ours - ref) / max(abs(ref), scale))
    if g[16] != want["verdict"]:
        if want.get("near", 1.0) <= TOL * max(1.0, want["ci_scale"]):
            return True
        failures.append(f"{where}: verdict {g[16]}, expected {want['verdict']}")
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--seed", type=int, default=20240628)
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--perturb", action="store_true")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    rng = random.Random(args.seed)

    always_one = (0.05, 1, 0.0, 4, None, [(k // 2, "1", "1", 5 + k, 40) for k in range(8)])
    requests = [always_one] + [draw_request(rng) for _ in range(args.count)]
    texts = [b"", b"abc", "aé€😀".encode()] + [draw_bytes(rng) for _ in range(args.count)]
    lines = [request_line(r) for r in requests]
    lines += ["u " + (t.hex() if t else "-") for t in texts]
    proc = subprocess.run([args.dump], input="\n".join(lines) + "\n", capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        print(f"preference_dump failed ({proc.returncode}): {proc.stderr.strip()}")
        return 1
    answers = proc.stdout.split("\n")

    failures, worst, ties, verdicts = [], [0.0], 0, {}
    pairs_seen, clustered, nulls, rounded = 0, 0, 0, 0
    for number, req in enumerate(requests):
        want = expected(req)
        if args.perturb and number == 1 and want["mean"] is not None:
            want["mean"] += 1e-8
        where = f"request {number} ({req[3]} cases, {len(req[5])} pairs)"
        ties += compare(answers[number].split(), want, where, failures, worst)
        verdicts[want["verdict"]] = verdicts.get(want["verdict"], 0) + 1
        pairs_seen += len(req[5])
        clustered += req[4] is not None
        nulls += want["paired_stats"][0] is None
        rounded += bool(want.get("rounded_zero"))
    for k, text in enumerate(texts):
        got = int(answers[len(requests) + k])
        want = len(text.decode("utf-8", errors="replace"))
        if got != want:
            failures.append(f"code points of {text.hex()}: {got}, expected {want}")

    print(f"treatments: {len(requests)} ({pairs_seen} pairs, {clustered} clustered, {nulls} "
          f"without a variance, {rounded} with an exact se of 0 in clusters), verdicts {dict(sorted(verdicts.items()))}, "
          f"verdicts tied at a threshold {ties}, largest relative difference {worst[0]:.3g}")
    print(f"code-point strings: {len(texts)}")
    need = max(1, args.count // 100)
    for name in ("better", "worse", "equivalent", "inconclusive"):
        if verdicts.get(name, 0) < need:
            failures.append(f"only {verdicts.get(name, 0)} treatments end {name}")
    if failures:
        print(f"{len(failures)} disagreements; the first ones:")
        for f in failures[:20]:
            print("  " + f)
        return 1
    print("all agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
