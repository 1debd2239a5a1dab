// The anytime-valid confidence sequence of a sequential experiment, recomputed in the browser
// from the case rows (the server stores only its last point, comparisons[].sequential): the
// paired differences of one treatment in `seq` order, the predictable plug-in empirical-Bernstein
// CS of shared/spec/sequential.md over them (its long sums compensated, as the server's), the
// sequential verdict of a pair of bounds and the first decided n. Pure functions: no DOM, no
// state, no I/O.

// A compensated (Neumaier) running sum: add(x), value().
function compensatedSum() {
    let s = 0;
    let c = 0;
    return {
        add(x) {
            const t = s + x;
            c += Math.abs(s) >= Math.abs(x) ? (s - t) + x : (x - t) + s;
            s = t;
        },
        value() {
            return s + c;
        },
    };
}

// The confidence sequence of the differences ds (each in [−1, 1], in sequence order) at level
// alpha2 (α'' = α / number of treatments, 0 < α'' < 1). Returns one point per prefix,
// [{n, d, low, high, centre, radius}]: low/high on the scale of d, the running intersection of
// every interval so far clipped to [−1, 1] (low only rises, high only falls); centre and
// radius the step's own, on the x = (d + 1)/2 scale of the contract. With no differences, [].
export function confidenceSequence(ds, alpha2) {
    if (!(alpha2 > 0 && alpha2 < 1)) throw new RangeError('alpha2 must be between 0 and 1');
    const logTerm = Math.log(2 / alpha2);
    const sumX = compensatedSum();
    const sumDev2 = compensatedSum();
    const sumLambda = compensatedSum();
    const sumLambdaX = compensatedSum();
    const sumVPsi = compensatedSum();
    let mu = 0.5; // μ̂_{i−1}
    let variance = 0.25; // σ̂²_{i−1}
    let lo = 0; // L on the x scale
    let hi = 1; // U on the x scale
    const out = [];
    ds.forEach((d, k) => {
        if (!(d >= -1 && d <= 1)) throw new RangeError(`difference ${d} is outside [−1, 1]`);
        const i = k + 1;
        const x = (d + 1) / 2;
        const lambda = Math.min(Math.sqrt((2 * logTerm) / (variance * i * Math.log(i + 1))), 0.5);
        const v = 4 * (x - mu) ** 2;
        const psi = (-Math.log1p(-lambda) - lambda) / 4;
        sumLambda.add(lambda);
        sumLambdaX.add(lambda * x);
        sumVPsi.add(v * psi);
        const centre = sumLambdaX.value() / sumLambda.value();
        const radius = (logTerm + sumVPsi.value()) / sumLambda.value();
        lo = Math.max(lo, centre - radius);
        hi = Math.min(hi, centre + radius);
        // μ̂_i includes x_i, and the square of x_i's deviation uses it.
        sumX.add(x);
        mu = (0.5 + sumX.value()) / (i + 1);
        sumDev2.add((x - mu) ** 2);
        variance = (0.25 + sumDev2.value()) / (i + 1);
        out.push({ n: i, d, low: 2 * lo - 1, high: 2 * hi - 1, centre, radius });
    });
    return out;
}

// The paired differences of treatment arm `treatment` (1..m) over case rows of
// GET /v1/experiments/{id}/cases ({seq, arms: [{index, passed, evaluated}]}), in seq order:
// [{seq, case_id, d}], d = s_treatment − s_control with s = passed / evaluated. A case enters
// once it has a seq and both arms evaluated at least one run; the others are left out (as the
// server leaves out a case that is not paired for this treatment).
export function sequenceDiffs(cases, treatment) {
    const rate = (row, index) => {
        const a = (Array.isArray(row.arms) ? row.arms : []).find((x) => x && x.index === index);
        return a && Number.isInteger(a.evaluated) && a.evaluated > 0 ? a.passed / a.evaluated : null;
    };
    return (Array.isArray(cases) ? cases : [])
        .filter((c) => c && Number.isInteger(c.seq))
        .sort((a, b) => a.seq - b.seq)
        .map((c) => {
            const sc = rate(c, 0);
            const st = rate(c, treatment);
            return sc === null || st === null ? null : { seq: c.seq, case_id: c.case_id, d: st - sc };
        })
        .filter(Boolean);
}

// The verdict bounds [low, high] on the d scale give with margin minEffect: better, worse,
// equivalent, or continue (the contract's rule, without min_cases).
export function seqDecide(low, high, minEffect = 0) {
    if (low > 0) return 'better';
    if (high < 0) return 'worse';
    if (minEffect > 0 && -minEffect < low && high < minEffect) return 'equivalent';
    return 'continue';
}

// The first point of a confidence sequence at n >= minCases whose bounds are decided:
// {n, verdict}, or null.
export function firstDecided(points, minCases = 10, minEffect = 0) {
    for (const p of points) {
        if (p.n < minCases) continue;
        const verdict = seqDecide(p.low, p.high, minEffect);
        if (verdict !== 'continue') return { n: p.n, verdict };
    }
    return null;
}
