// Unit tests of console/sequential.js (the confidence sequence the experiment view draws) under
// node --test: the first steps of the CS written out by hand from shared/spec/sequential.md,
// bounds an independent implementation of the same formulas gave (Python, exact sums), bounds
// evald itself reported for an experiment whose every case had d = 1, the monotone running
// intersection, the pairing and order of the case rows, and the verdict rule with min_cases.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { confidenceSequence, firstDecided, seqDecide, sequenceDiffs } from '../../console/sequential.js';

const close = (a, b, what, tol = 1e-12) => assert.ok(Math.abs(a - b) <= tol, `${what}: ${a} vs ${b}`);

test('the first three steps of d = [1, 1, 1] at α\'\' = 0.05, written out from the contract', () => {
    const L = Math.log(2 / 0.05);
    const psi = (l) => (-Math.log(1 - l) - l) / 4;
    // i = 1: σ̂²_0 = 1/4 makes λ_1 = min(√(2L / (1/4 · 1 · ln 2)), 1/2) = 1/2; x_1 = 1,
    // μ̂_0 = 1/2, v_1 = 4 (1/2)² = 1. Then μ̂_1 = 3/4, σ̂²_1 = (1/4 + 1/16)/2 = 5/32.
    // i = 2: λ_2 = min(√(2L / (5/32 · 2 · ln 3)), 1/2) = 1/2, v_2 = 4 (1/4)² = 1/4.
    // Then μ̂_2 = 5/6, σ̂²_2 = (1/4 + 1/16 + 1/36)/3.
    // i = 3: λ_3 = 1/2 again (√(2L / (σ̂²_2 · 3 · ln 4)) > 1/2), v_3 = 4 (1/6)² = 1/9.
    const var2 = (1 / 4 + 1 / 16 + 1 / 36) / 3;
    assert.ok(Math.sqrt((2 * L) / ((5 / 32) * 2 * Math.log(3))) > 0.5);
    assert.ok(Math.sqrt((2 * L) / (var2 * 3 * Math.log(4))) > 0.5);
    const radius = [(L + psi(0.5)) / 0.5, (L + psi(0.5) * (1 + 1 / 4)) / 1, (L + psi(0.5) * (1 + 1 / 4 + 1 / 9)) / 1.5];
    const cs = confidenceSequence([1, 1, 1], 0.05);
    assert.deepEqual(cs.map((p) => p.n), [1, 2, 3]);
    cs.forEach((p, k) => {
        close(p.centre, 1, `centre_${k + 1}`);
        close(p.radius, radius[k], `radius_${k + 1}`);
        // centre − radius < 0 and centre + radius > 1: the interval is [0, 1], [−1, +1] on d.
        assert.equal(p.low, -1);
        assert.equal(p.high, 1);
    });
});

test('all-ones differences: the bounds evald reported for n = 9, 16, 17 and 40', () => {
    // From an anytime experiment on evald-stub whose treatment passed and control failed
    // every case (α 0.05, one treatment): comparisons[0].sequential at four passes.
    const cs = confidenceSequence(Array(40).fill(1), 0.05);
    const server = { 9: -0.6725466236053053, 16: 0.05865438234871467, 17: 0.11398834048440798, 40: 0.6232884157567549 };
    for (const [n, low] of Object.entries(server)) {
        close(cs[n - 1].low, low, `low at n = ${n}`, 1e-12);
        assert.equal(cs[n - 1].high, 1);
    }
    assert.deepEqual(firstDecided(cs, 10, 0.1), { n: 16, verdict: 'better' });
});

test('mixed differences at α\'\' = 0.025 and a losing treatment: an independent implementation\'s bounds', () => {
    // Python, straight from the contract with math.fsum for every sum.
    const mixed = [1, 0, 1, -1, 0.5, 1, 1 / 3, 0, 1, 1, -1 / 3, 1, 0.5, 1, 1, 0, 1, 1, 1, 2 / 3];
    const lows = {
        12: -1, 13: -0.9843368318052961, 14: -0.8471033771850334, 15: -0.7276257948707232, 16: -0.6851671073875523,
        17: -0.5892240232414814, 18: -0.5036163994580647, 19: -0.4267596275410206, 20: -0.372219760217406,
    };
    const cs = confidenceSequence(mixed, 0.025);
    for (const [n, low] of Object.entries(lows)) {
        close(cs[n - 1].low, low, `mixed low at n = ${n}`, 1e-12);
        assert.equal(cs[n - 1].high, 1, `mixed high at n = ${n}`);
    }
    assert.equal(firstDecided(cs, 10, 0), null, 'undecided');

    const losing = confidenceSequence([...Array(12).fill(-1), 0, 0, 0], 0.05);
    const highs = { 12: 0.2548157201507435, 13: 0.2478741349414384, 14: 0.2403048432330237, 15: 0.23252546672137986 };
    for (const [n, high] of Object.entries(highs)) {
        close(losing[n - 1].high, high, `losing high at n = ${n}`, 1e-12);
        assert.equal(losing[n - 1].low, -1);
    }
});

test('the running intersection only narrows, whatever the differences', () => {
    let seed = 12345;
    const rnd = () => {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        return seed / 2147483648;
    };
    for (let trial = 0; trial < 50; trial++) {
        const ds = Array.from({ length: 1 + Math.floor(rnd() * 300) }, () => [-1, -2 / 3, -1 / 3, 0, 1 / 3, 2 / 3, 1][Math.floor(rnd() * 7)]);
        const cs = confidenceSequence(ds, 0.001 + rnd() * 0.2);
        assert.equal(cs.length, ds.length);
        for (let k = 1; k < cs.length; k++) {
            assert.ok(cs[k].low >= cs[k - 1].low && cs[k].high <= cs[k - 1].high, `trial ${trial} step ${k + 1}`);
        }
        for (const p of cs) assert.ok(p.low >= -1 && p.high <= 1);
    }
    assert.deepEqual(confidenceSequence([], 0.05), []);
    assert.throws(() => confidenceSequence([1], 0), RangeError);
    assert.throws(() => confidenceSequence([2], 0.05), RangeError);
});

test('case rows give the paired differences in seq order, without skipped or unpaired cases', () => {
    const row = (id, seq, c, t, t2) => ({
        case_id: id, seq, arms: [{ index: 0, passed: c[0], evaluated: c[1] }, { index: 1, passed: t[0], evaluated: t[1] }, ...(t2 ? [{ index: 2, passed: t2[0], evaluated: t2[1] }] : [])],
    });
    const rows = [
        row('k1', 3, [0, 3], [3, 3], [1, 3]),
        row('k2', 1, [1, 3], [2, 3], [0, 0]),
        row('k3', null, [0, 0], [0, 0]), // skipped: never entered the sequence
        row('k4', 2, [0, 0], [1, 1], [1, 1]), // the control evaluated nothing: unpaired
        row('k5', 4, [2, 2], [0, 2], [2, 2]),
    ];
    assert.deepEqual(sequenceDiffs(rows, 1), [{ seq: 1, case_id: 'k2', d: 1 / 3 }, { seq: 3, case_id: 'k1', d: 1 }, { seq: 4, case_id: 'k5', d: -1 }]);
    assert.deepEqual(sequenceDiffs(rows, 2).map((r) => [r.case_id, r.d]), [['k1', 1 / 3], ['k5', 0]], 'k2 has no evaluated run of arm 2');
    assert.deepEqual(sequenceDiffs(null, 1), []);
});

test('the verdict of a pair of bounds, and the first decided n at or after min_cases', () => {
    assert.equal(seqDecide(0.01, 1, 0), 'better');
    assert.equal(seqDecide(-1, -0.2, 0.1), 'worse');
    assert.equal(seqDecide(-0.05, 0.04, 0.1), 'equivalent');
    assert.equal(seqDecide(-0.05, 0.04, 0), 'continue', 'no equivalence without a margin');
    assert.equal(seqDecide(-0.1, 0.04, 0.1), 'continue', 'the margin is exclusive');
    assert.equal(seqDecide(0, 1, 0), 'continue');
    const points = [{ n: 1, low: 0.2, high: 1 }, { n: 2, low: 0.3, high: 1 }, { n: 3, low: 0.4, high: 1 }];
    assert.deepEqual(firstDecided(points, 2, 0), { n: 2, verdict: 'better' });
    assert.deepEqual(firstDecided(points, 1, 0), { n: 1, verdict: 'better' });
    assert.equal(firstDecided(points, 4, 0), null);
});
