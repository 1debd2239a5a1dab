// Pure views of an EvalResultResponseV1: the rows of the A / B / B − A table with their
// better-or-worse direction, run counts for the progress line, labels, run ordering and the
// per-run series the charts draw. No DOM; every function is a function of its arguments.

// Each row: key (used in data-testid), label, the aggregate and delta field names, the value
// kind for formatting, and which direction is better.
export const METRICS = [
    { key: 'pass_rate', label: 'Pass rate', field: 'pass_rate', kind: 'pct', better: 'higher' },
    { key: 'score', label: 'Median score', field: 'median_score', kind: 'score', better: 'higher' },
    { key: 'wall_time', label: 'Wall time', field: 'median_wall_time_ms', kind: 'ms', better: 'lower' },
    { key: 'total_tokens', label: 'Total tokens', field: 'median_total_tokens', kind: 'count', better: 'lower' },
    { key: 'reasoning_tokens', label: 'Reasoning tokens', field: 'median_reasoning_tokens', kind: 'count', better: 'lower' },
    { key: 'cost', label: 'Cost', field: 'median_cost_usd', kind: 'usd', better: 'lower' },
    { key: 'function_calls', label: 'Function calls', field: 'median_function_calls', kind: 'count', better: 'lower' },
    { key: 'function_call_errors', label: 'Function-call errors', field: 'median_function_call_errors', kind: 'count', better: 'lower' },
    { key: 'traces', label: 'Traces', field: 'median_trace_count', kind: 'count', better: 'lower' },
    { key: 'spans', label: 'Spans', field: 'median_span_count', kind: 'count', better: 'lower' },
    { key: 'error_spans', label: 'Error spans', field: 'median_error_span_count', kind: 'count', better: 'lower' },
    { key: 'trace_duration', label: 'Trace duration', field: 'median_trace_duration_ms', kind: 'ms', better: 'lower' },
];

const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

// 'better', 'worse' or 'same' for a B − A difference d of a metric whose better direction is
// 'higher' or 'lower'; null when the difference is unknown.
export function judge(d, better) {
    if (num(d) === null) return null;
    if (d === 0) return 'same';
    return (d > 0) === (better === 'higher') ? 'better' : 'worse';
}

// Rows of the comparison table from progress or report (both carry the aggregates and delta).
// Each row: {key, label, kind, better, a, b, delta, verdict}. The pass-rate row carries
// evaluated=false when neither variant has an evaluated run (the rate would be a meaningless 0).
export function metricRows(source) {
    const a = (source && source.control_aggregate) || {};
    const b = (source && source.treatment_aggregate) || {};
    const delta = (source && source.delta) || {};
    return METRICS.map((m) => {
        const row = { ...m, a: num(a[m.field]), b: num(b[m.field]), delta: num(delta[m.field]) };
        if (m.key === 'pass_rate') {
            row.evaluated = (a.evaluated_runs || 0) + (b.evaluated_runs || 0) > 0;
            row.aCount = a.evaluated_runs ? `${a.passed}/${a.evaluated_runs}` : null;
            row.bCount = b.evaluated_runs ? `${b.passed}/${b.evaluated_runs}` : null;
        }
        row.verdict = judge(row.delta, m.better);
        return row;
    });
}

const TERMINAL_RUN = new Set(['completed', 'failed', 'cancelled']);

// Counts for "N/M runs complete · P met criteria · F missed criteria · K not evaluated".
export function runCounts(runs) {
    const c = { total: 0, terminal: 0, met: 0, missed: 0, notEvaluated: 0, running: 0 };
    for (const r of runs || []) {
        c.total++;
        if (r.status === 'running') c.running++;
        if (!TERMINAL_RUN.has(r.status)) continue;
        c.terminal++;
        if (r.passed === true) c.met++;
        else if (r.passed === false) c.missed++;
        else c.notEvaluated++;
    }
    return c;
}

// Runs sorted by execution position (the order they execute in).
export function executionOrder(runs) {
    return [...(runs || [])].sort((x, y) => (x.execution_position || 0) - (y.execution_position || 0));
}

// The verdict word of one run: met criteria / missed criteria / not evaluated, or its status
// while it is not finished or when it failed or was cancelled.
export function runVerdict(run) {
    if (run.status === 'completed') {
        if (run.passed === true) return 'met criteria';
        if (run.passed === false) return 'missed criteria';
        return 'not evaluated';
    }
    if (run.passed === false) return 'missed criteria';
    return run.status;
}

export function variantLabels(request) {
    const c = (request && request.control) || {};
    const t = (request && request.treatment) || {};
    return { a: c.label || 'control', b: t.label || 'treatment' };
}

// Total tokens of a run: the benchmark's total, else input + output of its generations.
export function runTokens(run) {
    const b = run.benchmark;
    if (b && num(b.total_tokens) !== null) return b.total_tokens;
    if (b && num(b.input_tokens) !== null && num(b.output_tokens) !== null) return b.input_tokens + b.output_tokens;
    if (Array.isArray(run.generations) && run.generations.length) {
        let t = 0;
        for (const g of run.generations) t += (g.input_tokens || 0) + (g.output_tokens || 0);
        return t;
    }
    return null;
}

// Wall time of a run: the benchmark's, else completed_at − started_at when both are known.
export function runWallTime(run) {
    if (run.benchmark && num(run.benchmark.wall_time_ms) !== null) return run.benchmark.wall_time_ms;
    if (run.started_at > 0 && run.completed_at > 0) return run.completed_at - run.started_at;
    return null;
}

export function runCost(run) {
    return run.benchmark ? num(run.benchmark.cost_usd) : null;
}

function median(values) {
    const v = values.filter((x) => x !== null).sort((x, y) => x - y);
    if (!v.length) return null;
    const mid = v.length >> 1;
    return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

// Per-run values of one metric in execution order, and the medians of each variant at each
// pair position (the "by variant and position" view of the charts).
export function series(runs, valueOf) {
    const ordered = executionOrder(runs);
    const points = ordered.map((r) => ({
        position: r.execution_position,
        role: r.role,
        iteration: r.iteration,
        pair: r.pair_position,
        value: valueOf(r),
    }));
    const groups = [];
    for (const role of ['control', 'treatment']) {
        for (const pair of [1, 2]) {
            const vals = points.filter((p) => p.role === role && p.pair === pair).map((p) => p.value);
            groups.push({ role, pair, n: vals.filter((x) => x !== null).length, median: median(vals) });
        }
    }
    return { points, groups };
}

// Parses "3:treatment:2" entries of effective_execution_order.
export function parseOrder(entries) {
    return (entries || []).map((e) => {
        const [pos, role, iter] = String(e).split(':');
        return { position: Number(pos), role, iteration: Number(iter) };
    });
}
