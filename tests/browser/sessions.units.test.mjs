// Unit tests of console/compare.js (the pure part of the Sessions view): matrix rows and
// groups, delta verdicts, lifecycle labels, selection checks with the server's messages, and
// the delta text. Run by node --test without a browser or a server.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GROUPS, allTerminal, checkSelection, deltaText, lifecycleLabel, matrix, parseSelection, verdict } from '../../console/compare.js';

const summary = (over) => ({
    generations: 1, input_tokens: 100, output_tokens: 20, total_tokens: 120, cache_read_tokens: 0, cache_write_tokens: null,
    reasoning_tokens: 0, cost_usd: null, tokens_per_generation: 120, cost_per_generation_usd: null, function_calls: 0,
    function_call_errors: 0, function_error_rate: null, trace_count: 1, span_count: 2, error_span_count: 0,
    trace_duration_ms: 25, wall_time_ms: 30, sessions: 1, descendants: 0, max_depth: 0, ...over,
});
const deltas = (pairs) => Object.fromEntries(Object.keys(summary()).map((k) => [k, pairs[k] || { absolute: 0, percent: 0 }]));
const cmp = {
    schema_version: '1',
    captured_at: 1,
    baseline_session_id: 'a',
    sessions: [
        { session_id: 'a', lifecycle: { turn_status: 'completed', terminal: true, complete: true, partial: false }, metrics: {}, summary: summary(), deltas: deltas({}) },
        {
            session_id: 'b',
            lifecycle: { turn_status: 'running', terminal: false, complete: false, partial: true },
            metrics: {},
            summary: summary({ total_tokens: 60, function_calls: 1 }),
            deltas: deltas({ total_tokens: { absolute: -60, percent: -50 }, function_calls: { absolute: 1, percent: null }, cost_usd: { absolute: null, percent: null } }),
        },
    ],
};

test('the matrix groups every summary metric under efficiency, reliability and orchestration', () => {
    const rows = matrix(cmp);
    assert.deepEqual(rows.map((g) => g.group), ['efficiency', 'reliability', 'orchestration']);
    const keys = GROUPS.flatMap((g) => g.metrics.map((m) => m.key));
    assert.equal(new Set(keys).size, keys.length, 'no metric twice');
    for (const k of keys) assert.ok(k in summary(), `${k} is a summary metric`);
    const total = rows[0].rows.find((r) => r.key === 'total_tokens');
    assert.deepEqual(total.cells.map((c) => c.value), [120, 60]);
    assert.equal(total.cells[0].baseline, true);
    assert.equal(total.cells[0].verdict, null);
    assert.deepEqual(total.cells[1], { value: 60, absolute: -60, percent: -50, baseline: false, verdict: 'better' });
    const calls = rows[2].rows.find((r) => r.key === 'function_calls');
    assert.equal(calls.cells[1].verdict, 'changed');
    assert.equal(calls.cells[1].percent, null);
    const cost = rows[0].rows.find((r) => r.key === 'cost_usd');
    assert.equal(cost.cells[1].absolute, null);
    assert.equal(cost.cells[1].verdict, null);
});

test('verdicts: lower is better, descriptive metrics only change, unknown is null', () => {
    assert.equal(verdict(-1, 'lower'), 'better');
    assert.equal(verdict(2, 'lower'), 'worse');
    assert.equal(verdict(0, 'lower'), 'same');
    assert.equal(verdict(3, null), 'changed');
    assert.equal(verdict(null, 'lower'), null);
    assert.equal(verdict(Number.NaN, 'lower'), null);
});

test('lifecycle labels and the end of a live comparison', () => {
    assert.equal(lifecycleLabel(cmp.sessions[0]), 'final');
    assert.equal(lifecycleLabel(cmp.sessions[1]), 'partial');
    assert.equal(lifecycleLabel({ lifecycle: { terminal: false, turn_status: 'queued' }, metrics: null }), 'waiting');
    assert.equal(lifecycleLabel({ lifecycle: { terminal: true, turn_status: null }, metrics: null }), 'no turns');
    assert.equal(allTerminal(cmp), false);
    assert.equal(allTerminal({ sessions: [cmp.sessions[0], cmp.sessions[0]] }), true);
    assert.equal(allTerminal(null), false);
});

test('selection checks use the server messages, in its order', () => {
    assert.equal(checkSelection(['a'], 'a'), 'session_ids must contain between 2 and 5 sessions');
    assert.equal(checkSelection(['a', 'b', 'c', 'd', 'e', 'f'], 'a'), 'session_ids must contain between 2 and 5 sessions');
    assert.equal(checkSelection(['a', ' '], 'a'), 'session_ids cannot contain empty values');
    assert.equal(checkSelection(['a', 'a'], 'a'), 'session_ids must be unique');
    assert.equal(checkSelection(['a', 'b'], 'c'), 'baseline_session_id must belong to session_ids');
    assert.equal(checkSelection(['a', 'b'], 'b'), null);
});

test('delta text and the selection in the URL', () => {
    const fmt = (x) => String(x);
    assert.equal(deltaText({ baseline: true }, fmt), 'baseline');
    assert.equal(deltaText({ absolute: null, percent: null }, fmt), '—');
    assert.equal(deltaText({ absolute: 220, percent: 183.333 }, fmt), '+220 (+183.3%)');
    assert.equal(deltaText({ absolute: -60, percent: -50 }, fmt), '−60 (−50%)');
    assert.equal(deltaText({ absolute: 1, percent: null }, fmt), '+1');
    assert.equal(deltaText({ absolute: 0, percent: 0 }, fmt), '±0 (±0%)');
    assert.deepEqual(parseSelection(new URLSearchParams('ids=a,b,c&baseline=b')), { ids: ['a', 'b', 'c'], baseline: 'b' });
    assert.deepEqual(parseSelection(new URLSearchParams('ids=a,b')), { ids: ['a', 'b'], baseline: 'a' });
    assert.deepEqual(parseSelection(new URLSearchParams('')), { ids: [], baseline: null });
});
