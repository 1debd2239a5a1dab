#!/usr/bin/env python3
"""Checks domain/agreement.c (through tests/stats/kappa_dump) against an exact computation.

Draws random 2 x 2 tables from a seeded generator (small and large counts, empty rows and
columns included), computes Cohen's kappa and the Fleiss-Cohen-Everitt variance in exact
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


def exact(alpha, t):
    n = sum(t)
    if n == 0:
        return [math.nan] * 5
    p = [[F(t[0], n), F(t[1], n)], [F(t[2], n), F(t[3], n)]]
    row = [p[0][0] + p[0][1], p[1][0] + p[1][1]]
    col = [p[0][0] + p[1][0], p[0][1] + p[1][1]]
    po = p[0][0] + p[1][1]
    pe = row[0] * col[0] + row[1] * col[1]
    if pe == 1:
        return [float(po)] + [math.nan] * 4
    k = (po - pe) / (1 - pe)
    a = sum(p[i][i] * (1 - (row[i] + col[i]) * (1 - k)) ** 2 for i in range(2))
    b = (1 - k) ** 2 * sum(p[i][j] * (col[i] + row[j]) ** 2
                           for i in range(2) for j in range(2) if i != j)
    c = (k - pe * (1 - k)) ** 2
    var = (a + b - c) / (n * (1 - pe) ** 2)
    se = math.sqrt(float(var)) if var > 0 else 0.0
    z = NormalDist().inv_cdf(1 - alpha / 2)
    kf = float(k)
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
        top = rng.choice([3, 20, 1000, 10 ** 6])
        t = [rng.randint(0, top) for _ in range(4)]
        if i % 10 == 0:
            t[rng.randrange(4)] = 0
            t[rng.randrange(4)] = 0
        alpha = rng.choice([0.05, 0.01, 0.1, rng.uniform(0.001, 0.5)])
        cases.append((alpha, t))
    lines = "".join(f"{a!r} {t[0]} {t[1]} {t[2]} {t[3]}\n" for a, t in cases)
    out = subprocess.run([args.dump], input=lines, capture_output=True, text=True, check=True)
    rows = out.stdout.split("\n")
    bad = 0
    perturb = args.perturb
    for i, (alpha, t) in enumerate(cases):
        ours = [float(v) for v in rows[i].split()]
        ref = exact(alpha, t)
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
