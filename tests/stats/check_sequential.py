#!/usr/bin/env python3
"""Checks domain/sequential.c (through tests/stats/sequential_dump) against this file.

This file computes, from the formulas of the sequential contract (shared spec
sequential.md, "The sequence and the confidence sequence", "Dispatch order",
"Planning") and of domain/sequential.h:
  - the confidence sequence of every prefix of a sequence of paired differences: low and
    high on the d scale (to 1e-9 absolute), the verdict while running, decided_at, and
    the verdict once terminal;
  - the dispatch permutation of a seed (exactly) and the default seed of an id (exactly);
  - cases_needed, with SciPy's normal quantile (exactly, unless the real value lies
    within 1e-9 relative of an integer, where either neighbour is accepted).
Vectors: fixed ones, then --count random ones (n up to 500, alpha'' in (0.001, 0.25),
min_cases, min_effect, differences drawn as pass-rate differences with ties such as 0,
+-1 and +-1/3, or continuous). A verdict that differs where a bound lies within 1e-9 of a
threshold is counted as a tie, not a failure.

Usage: check_sequential.py <sequential_dump> [--seed N] [--count N] [--perturb]
--perturb moves one expected bound by 1e-8 to show that the check fails.
Exit 0 when everything agrees, 1 with the first disagreements printed otherwise.
"""
import argparse
import math
import random
import subprocess
import sys

from scipy.stats import norm

TOL = 1e-9
MASK64 = (1 << 64) - 1


# ---- the confidence sequence, straight from the contract ------------------------------

def confidence_sequence(alpha2, min_cases, min_effect, ds):
    """Per prefix n = 1..len(ds): (low, high, verdict while running, decided_at), plus the
    bounds before any case and the terminal verdict."""
    xs = [(d + 1) / 2 for d in ds]
    log_term = math.log(2 / alpha2)
    mu_hat = [0.5]      # mu_hat[i] for i = 0..n
    sigma2_hat = [0.25]  # sigma2_hat[i]
    running_x = 0.0
    running_sq = 0.0
    weights = 0.0        # sum of lambda_i
    weighted_x = 0.0     # sum of lambda_i x_i
    penalty = 0.0        # sum of v_i psi(lambda_i)
    big_l, big_u = 0.0, 1.0
    rows = []
    decided_at, decided = None, None
    for i, x in enumerate(xs, start=1):
        lam = min(math.sqrt(2 * log_term / (sigma2_hat[i - 1] * i * math.log(i + 1))), 0.5)
        v = 4 * (x - mu_hat[i - 1]) ** 2
        psi = (-math.log1p(-lam) - lam) / 4
        weights += lam
        weighted_x += lam * x
        penalty += v * psi
        centre = weighted_x / weights
        radius = (log_term + penalty) / weights
        big_l = max(big_l, centre - radius)
        big_u = min(big_u, centre + radius)
        running_x += x
        mu_hat.append((0.5 + running_x) / (i + 1))
        running_sq += (x - mu_hat[i]) ** 2
        sigma2_hat.append((0.25 + running_sq) / (i + 1))
        low, high = 2 * big_l - 1, 2 * big_u - 1
        if decided_at is None and i >= min_cases:
            now = verdict_of(low, high, min_effect)
            if now != "continue":
                decided_at, decided = i, now
        rows.append((low, high, decided if decided else "continue", decided_at or 0))
    return rows, (decided if decided else "inconclusive")


def verdict_of(low, high, delta):
    if low > 0:
        return "better"
    if high < 0:
        return "worse"
    if delta > 0 and -delta < low and high < delta:
        return "equivalent"
    return "continue"


def near_threshold(low, high, delta):
    edges = [abs(low), abs(high)]
    if delta > 0:
        edges += [abs(low + delta), abs(high - delta)]
    return min(edges) <= TOL


# ---- the dispatch order and the default seed, from the header's description -----------

class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, bound):
        floor = (1 << 64) % bound
        while True:
            r = self.next()
            if r >= floor:
                return r % bound


def dispatch_indices(seed, n):
    gen = SplitMix64(seed)
    order = list(range(1, n + 1))
    for i in range(n - 1, 0, -1):
        j = gen.below(i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def default_seed(exp_id):
    hexdigits = "0123456789abcdefABCDEF"
    head = exp_id[4:17]
    if exp_id.startswith("exp_") and len(head) == 13 and all(c in hexdigits for c in head):
        return int(head, 16)
    h = 0xCBF29CE484222325
    for byte in exp_id.encode():
        h = ((h ^ byte) * 0x100000001B3) & MASK64
    return h >> 12


# ---- planning ---------------------------------------------------------------------------

def cases_needed(effect, sd, alpha2):
    """(accepted values) or None when refused."""
    ok = all(math.isfinite(v) for v in (effect, sd, alpha2))
    if not ok or effect <= 0 or sd <= 0 or not 0 < alpha2 < 1:
        return None
    z = norm.ppf(1 - alpha2 / 2) + norm.ppf(0.8)
    real = (z * sd / effect) ** 2
    cap = float(2**53)
    values = {min(float(math.ceil(real)), cap)}
    nearest = round(real)
    if abs(real - nearest) <= 1e-9 * max(real, 1.0):
        values |= {min(float(nearest), cap), min(float(nearest + 1), cap)}
    return values


# ---- inputs -----------------------------------------------------------------------------

def draw_sequence(rng):
    n = rng.choice([rng.randint(1, 40), rng.randint(1, 500), rng.randint(200, 500)])
    kind = rng.random()
    if kind < 0.6:
        # pass-rate differences with r repeats: multiples of 1/r, exact ties included
        r = rng.choice([1, 2, 3, 3, 3, 5])
        pc = rng.random()
        pt = min(1.0, max(0.0, pc + rng.choice([0.0, 0.0, rng.uniform(-0.5, 0.5)])))
        ds = []
        for _ in range(n):
            st = sum(rng.random() < pt for _ in range(r)) / r
            sc = sum(rng.random() < pc for _ in range(r)) / r
            ds.append(st - sc)
    elif kind < 0.75:
        ds = [rng.choice([-1.0, 0.0, 1.0, 1 / 3, -1 / 3]) for _ in range(n)]
    elif kind < 0.85:
        centre, width = rng.uniform(-0.4, 0.4), rng.uniform(0.01, 0.6)
        ds = [max(-1.0, min(1.0, rng.uniform(centre - width, centre + width))) for _ in range(n)]
    else:
        ds = [rng.uniform(-1, 1) for _ in range(n)]
    alpha2 = math.exp(rng.uniform(math.log(0.001), math.log(0.25)))
    min_cases = rng.choice([1, 2, 10, rng.randint(1, 60)])
    min_effect = rng.choice([0.0, rng.uniform(0.01, 0.5), rng.choice([0.05, 0.1, 0.2])])
    return alpha2, min_cases, min_effect, ds


FIXED_SEQUENCES = [
    (0.05, 1, 0.0, [1.0, 0.0, -1.0]),
    (0.05, 10, 0.2, [0.0] * 400),
    (0.05, 10, 0.0, [1.0] * 300),
    (0.05, 10, 0.0, [-1.0] * 300),
    (0.01, 2, 0.1, [1.0, -1.0] * 200),
    (0.2, 5, 0.3, [1 / 3, -1 / 3, 0.0, 2 / 3] * 100),
    (0.05, 10, 0.2, [0.0] * 80 + [1.0] * 400),
    (0.05, 10, 0.0, [1.0] * 40 + [-1.0] * 400),
]


def random_id(rng):
    if rng.random() < 0.7:
        return "exp_" + "".join(rng.choice("0123456789abcdef") for _ in range(32))
    alphabet = "abcdefxyz_0123456789ABCDEF-"
    return rng.choice(["exp_", "", "run_", "EXP_"]) + "".join(
        rng.choice(alphabet) for _ in range(rng.randint(1, 40)))


# ---- the comparison ---------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--seed", type=int, default=20240611)
    ap.add_argument("--count", type=int, default=2500)
    ap.add_argument("--perturb", action="store_true")
    args = ap.parse_args()
    rng = random.Random(args.seed)

    sequences = list(FIXED_SEQUENCES) + [draw_sequence(rng) for _ in range(args.count)]
    perms = [(s, n) for s in (0, 1, 42, 2**52 - 1, MASK64) for n in (0, 1, 2, 3, 17, 1000)]
    perms += [(rng.getrandbits(64), rng.randint(0, 2000)) for _ in range(300)]
    perms.append((rng.getrandbits(52), 100000))
    ids = ["exp_0123456789abcdef0123456789abcdef", "exp_ffffffffffffffffffffffffffffffff",
           "exp_hooks_1", "exp_012345678901", "exp_0123456789ABCdef", "x"]
    ids += [random_id(rng) for _ in range(2000)]
    plans = [(0.1, 0.5, 0.05), (0.2, 0.4, 0.025), (0.3, 0.3, 0.05), (1e-9, 1.0, 0.05),
             (0.0, 0.5, 0.05), (-0.1, 0.5, 0.05), (0.1, 0.0, 0.05), (0.1, 0.5, 0.0),
             (0.1, 0.5, 1.0), (math.inf, 0.5, 0.05), (0.1, math.nan, 0.05)]
    plans += [(rng.uniform(0.001, 1), rng.uniform(0.01, 2), rng.uniform(0.001, 0.5))
              for _ in range(2000)]

    lines = []
    for alpha2, min_cases, min_effect, ds in sequences:
        lines.append(f"c {alpha2!r} {min_cases} {min_effect!r} {len(ds)} "
                     + " ".join(repr(d) for d in ds))
    lines += [f"p {s} {n}" for s, n in perms]
    lines += [f"s {i}" for i in ids]
    lines += [f"z {e!r} {s!r} {a!r}" for e, s, a in plans]
    proc = subprocess.run([args.dump], input="\n".join(lines) + "\n", capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        print(f"sequential_dump failed ({proc.returncode}): {proc.stderr.strip()}")
        return 1
    answers = proc.stdout.split("\n")
    failures = []
    ties = 0
    counts = {}
    worst = 0.0
    line = 0

    for number, (alpha2, min_cases, min_effect, ds) in enumerate(sequences):
        got = answers[line].split()
        line += 1
        rows, final = confidence_sequence(alpha2, min_cases, min_effect, ds)
        want = [-1.0, 1.0]
        if args.perturb and number == 0:
            rows[0] = (rows[0][0] + 1e-8,) + rows[0][1:]
        where = f"sequence {number} (alpha'' {alpha2:.4g}, min_cases {min_cases}, " \
                f"min_effect {min_effect:.4g}, n {len(ds)})"
        if len(got) != 2 + 4 * len(ds) + 1:
            failures.append(f"{where}: {len(got)} values answered")
            continue
        for k in range(2):
            if abs(float(got[k]) - want[k]) > TOL:
                failures.append(f"{where}: empty bound {got[k]}, expected {want[k]}")
        tied = False
        for k, (low, high, verdict, decided_at) in enumerate(rows, start=1):
            g = got[2 + 4 * (k - 1): 2 + 4 * k]
            err = max(abs(float(g[0]) - low), abs(float(g[1]) - high))
            worst = max(worst, err)
            if err > TOL:
                failures.append(f"{where}, n = {k}: bounds {g[0]} {g[1]}, expected "
                                f"{low!r} {high!r}")
                break
            tied = tied or (k >= min_cases and near_threshold(low, high, min_effect))
            if (g[2], int(g[3])) != (verdict, decided_at):
                if tied:
                    ties += 1
                    break
                failures.append(f"{where}, n = {k}: verdict {g[2]} decided_at {g[3]}, "
                                f"expected {verdict} {decided_at}")
                break
        else:
            if got[-1] != final:
                failures.append(f"{where}: terminal verdict {got[-1]}, expected {final}")
            counts[final] = counts.get(final, 0) + 1

    for seed, n in perms:
        got = [int(v) for v in answers[line].split()]
        line += 1
        if got != dispatch_indices(seed, n):
            failures.append(f"permutation seed {seed} n {n}: differs")

    for exp_id in ids:
        got = int(answers[line])
        line += 1
        want = default_seed(exp_id)
        if got != want or not 0 <= got < 2**53 - 1:
            failures.append(f"default seed of {exp_id}: {got}, expected {want}")

    refused = 0
    for effect, sd, alpha2 in plans:
        got = answers[line].strip()
        line += 1
        want = cases_needed(effect, sd, alpha2)
        if want is None:
            refused += 1
            if got != "none":
                failures.append(f"cases_needed{(effect, sd, alpha2)}: {got}, expected none")
        elif got == "none" or float(got) not in want:
            failures.append(f"cases_needed{(effect, sd, alpha2)}: {got}, expected {want}")

    print(f"sequences: {len(sequences)} (terminal verdicts {dict(sorted(counts.items()))}, "
          f"verdicts tied at a threshold {ties}), largest bound difference {worst:.3g}")
    print(f"permutations: {len(perms)}, default seeds: {len(ids)}, "
          f"cases_needed: {len(plans)} ({refused} refused)")
    # every verdict must have been exercised, or the comparison proves little
    need = max(1, args.count // 125)
    for name in ("better", "worse", "equivalent", "inconclusive"):
        if counts.get(name, 0) < need:
            failures.append(f"only {counts.get(name, 0)} sequences end {name}")
    if failures:
        print(f"{len(failures)} disagreements; the first ones:")
        for f in failures[:20]:
            print("  " + f)
        return 1
    print("all agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
