// Pure views of a session comparison (SessionComparisonV1): the metric groups of the live matrix
// (efficiency, reliability, orchestration) with their better direction, the cells of each row
// with the delta against the baseline and its verdict, the lifecycle label of a column, and the
// client-side checks of a selection, worded like the server's messages. No DOM, no state.

// Each metric: key (summary field, data-testid), label, value kind for formatting, and which
// direction is better ('lower', or null when the figure is descriptive only).
export const GROUPS = [
    {
        key: 'efficiency',
        label: 'Efficiency',
        metrics: [
            { key: 'total_tokens', label: 'Total tokens', kind: 'count', better: 'lower' },
            { key: 'input_tokens', label: 'Input tokens', kind: 'count', better: 'lower' },
            { key: 'output_tokens', label: 'Output tokens', kind: 'count', better: 'lower' },
            { key: 'reasoning_tokens', label: 'Reasoning tokens', kind: 'count', better: 'lower' },
            { key: 'cache_read_tokens', label: 'Cache-read tokens', kind: 'count', better: null },
            { key: 'cost_usd', label: 'Cost', kind: 'usd', better: 'lower' },
            { key: 'generations', label: 'Generations', kind: 'count', better: 'lower' },
            { key: 'tokens_per_generation', label: 'Tokens per generation', kind: 'count', better: 'lower' },
            { key: 'cost_per_generation_usd', label: 'Cost per generation', kind: 'usd', better: 'lower' },
            { key: 'wall_time_ms', label: 'Wall time', kind: 'ms', better: 'lower' },
        ],
    },
    {
        key: 'reliability',
        label: 'Reliability',
        metrics: [
            { key: 'function_call_errors', label: 'Function-call errors', kind: 'count', better: 'lower' },
            { key: 'function_error_rate', label: 'Function error rate', kind: 'pct', better: 'lower' },
            { key: 'error_span_count', label: 'Error spans', kind: 'count', better: 'lower' },
        ],
    },
    {
        key: 'orchestration',
        label: 'Orchestration',
        metrics: [
            { key: 'function_calls', label: 'Function calls', kind: 'count', better: null },
            { key: 'trace_count', label: 'Traces', kind: 'count', better: null },
            { key: 'span_count', label: 'Spans', kind: 'count', better: null },
            { key: 'trace_duration_ms', label: 'Trace duration', kind: 'ms', better: 'lower' },
            { key: 'sessions', label: 'Sessions', kind: 'count', better: null },
            { key: 'descendants', label: 'Descendants', kind: 'count', better: null },
        ],
    },
];

const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

// 'better', 'worse', 'same', 'changed' (a difference on a descriptive metric) or null when unknown.
export function verdict(absolute, better) {
    if (num(absolute) === null) return null;
    if (absolute === 0) return 'same';
    if (!better) return 'changed';
    return (absolute < 0) === (better === 'lower') ? 'better' : 'worse';
}

// The lifecycle label of one compared session: 'final', 'partial' (figures so far of a session
// that is still working), 'waiting' (queued, nothing yet) or 'no turns'.
export function lifecycleLabel(item) {
    const l = (item && item.lifecycle) || {};
    if (!l.terminal) return item && item.metrics ? 'partial' : 'waiting';
    if (l.turn_status === null || l.turn_status === undefined) return 'no turns';
    return 'final';
}

// True once every session of the comparison is terminal: the figures will not change.
export function allTerminal(cmp) {
    const items = (cmp && cmp.sessions) || [];
    return items.length > 0 && items.every((s) => s.lifecycle && s.lifecycle.terminal);
}

// Rows of the matrix grouped: [{group, label, rows: [{key, label, kind, better, cells: [{value,
// absolute, percent, verdict, baseline}]}]}], the cells in the comparison's session order.
export function matrix(cmp) {
    const items = (cmp && cmp.sessions) || [];
    const baseline = cmp && cmp.baseline_session_id;
    return GROUPS.map((g) => ({
        group: g.key,
        label: g.label,
        rows: g.metrics.map((m) => ({
            ...m,
            cells: items.map((it) => {
                const d = (it.deltas && it.deltas[m.key]) || {};
                const absolute = num(d.absolute);
                return {
                    value: num(it.summary && it.summary[m.key]),
                    absolute,
                    percent: num(d.percent),
                    baseline: it.session_id === baseline,
                    verdict: it.session_id === baseline ? null : verdict(absolute, m.better),
                };
            }),
        })),
    }));
}

// Checks a selection before asking the server; returns the server's message for the first
// problem, or null. ids: the picked session ids in order; baseline: the chosen baseline.
export function checkSelection(ids, baseline) {
    const list = ids || [];
    if (list.length < 2 || list.length > 5) return 'session_ids must contain between 2 and 5 sessions';
    if (list.some((id) => typeof id !== 'string' || id.trim() === '')) return 'session_ids cannot contain empty values';
    if (new Set(list).size !== list.length) return 'session_ids must be unique';
    if (!list.includes(baseline)) return 'baseline_session_id must belong to session_ids';
    return null;
}

// "+12 (+25%)" style text of a delta; percent omitted when unknown.
export function deltaText(cell, fmt) {
    if (cell.baseline) return 'baseline';
    if (cell.absolute === null) return '—';
    const sign = cell.absolute > 0 ? '+' : cell.absolute < 0 ? '−' : '±';
    const abs = fmt(Math.abs(cell.absolute));
    const pct = cell.percent === null ? '' : ` (${cell.percent > 0 ? '+' : cell.percent < 0 ? '−' : '±'}${Math.abs(cell.percent).toFixed(1).replace(/\.0$/, '')}%)`;
    return `${sign}${abs}${pct}`;
}

// Parses "#/sessions?ids=a,b&baseline=a" query parameters into {ids, baseline}.
export function parseSelection(params) {
    const raw = params.get('ids');
    const ids = raw ? raw.split(',').filter((s) => s !== '') : [];
    const baseline = params.get('baseline') || ids[0] || null;
    return { ids, baseline };
}
