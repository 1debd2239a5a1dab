#!/usr/bin/env python3
"""Checks domain/agreement.c (through tests/stats/kappa_dump) against an exact computation.

Draws random k x k tables (k 2 for the run agreement, 3 for the judge's over control, tie
and treatment, and up to 5) from a seeded generator (small and large counts, empty rows
and columns included), computes Cohen's kappa and the Fleiss-Cohen-Everitt variance in exact
rational arithmetic (fractions.Fraction), the interval with the standard library's
NormalDist, and requires agreement to 1e-12 relative (1e-12 absolute near 0). Needs only
the standard library, so it runs wherever python3 does.

Usage: check_kappa.py <kappa_dump> [--seed N] [--count N] [--perturb]
--perturb changes the first defined expected kappa by 1e-9 to show the check fails.
"""
import argparse
import math
import random
import subprocess
import sys
from fractions import Fraction as F
from statistics import NormalDist

TOL = 1e-12


def exact(alpha, k, t):
    n = sum(t)
    if n == 0:
        return [math.nan] * 5
    p = [[F(t[i * k + j], n) for j in range(k)] for i in range(k)]
    row = [sum(p[i][j] for j in range(k)) for i in range(k)]
    col = [sum(p[i][j] for i in range(k)) for j in range(k)]
    po = sum(p[i][i] for i in range(k))
    pe = sum(row[i] * col[i] for i in range(k))
    if pe == 1:
        return [float(po)] + [math.nan] * 4
    kap = (po - pe) / (1 - pe)
    a = sum(p[i][i] * (1 - (row[i] + col[i]) * (1 - kap)) ** 2 for i in range(k))
    b = (1 - kap) ** 2 * sum(p[i][j] * (col[i] + row[j]) ** 2
                             for i in range(k) for j in range(k) if i != j)
    c = (kap - pe * (1 - kap)) ** 2
    var = (a + b - c) / (n * (1 - pe) ** 2)
    se = math.sqrt(float(var)) if var > 0 else 0.0
    z = NormalDist().inv_cdf(1 - alpha / 2)
    kf = float(kap)
    return [float(po), kf, se, max(-1.0, kf - z * se), min(1.0, kf + z * se)]


def agree(ours, ref):
    if math.isnan(ref):
        return math.isnan(ours)
    return abs(ours - ref) <= TOL * max(1.0, abs(ref))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--seed", type=int, default=19)
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--perturb", action="store_true")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    cases = []
    for i in range(args.count):
        k = rng.choice([2, 2, 3, 3, 4, 5])
        top = rng.choice([3, 20, 1000, 10 ** 6])
        t = [rng.randint(0, top) for _ in range(k * k)]
        if i % 10 == 0:
            t[rng.randrange(k * k)] = 0
            t[rng.randrange(k * k)] = 0
        if i % 17 == 0:  # a category nobody used
            c = rng.randrange(k)
            for j in range(k):
                t[c * k + j] = t[j * k + c] = 0
        alpha = rng.choice([0.05, 0.01, 0.1, rng.uniform(0.001, 0.5)])
        cases.append((alpha, k, t))
    lines = "".join(f"{a!r} {k} {' '.join(map(str, t))}\n" for a, k, t in cases)
    out = subprocess.run([args.dump], input=lines, capture_output=True, text=True, check=True)
    rows = out.stdout.split("\n")
    bad = 0
    perturb = args.perturb
    for i, (alpha, k, t) in enumerate(cases):
        ours = [float(v) for v in rows[i].split()]
        ref = exact(alpha, k, t)
        if perturb and not math.isnan(ref[1]):
            ref[1] += 1e-9
            perturb = False
        for name, o, r in zip(["agreement", "kappa", "se", "ci_low", "ci_high"], ours, ref):
            if not agree(o, r):
                bad += 1
                if bad <= 10:
                    print(f"table {t} alpha {alpha}: {name} = {o!r}, exact {r!r}")
    print(f"kappa: {len(cases)} tables, {bad} disagreements")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
