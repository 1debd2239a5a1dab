// The experiment detail's forest plots (inline SVG), used by experiment.js: the pass-rate
// delta of every treatment with its interval and ±min_effect shaded (forestPlot()), and one
// small plot per efficiency metric (metricForests()); also the metrics' labels and signed
// values of the metric tables. The layout is analysis.js's forestScale(). All text is inserted
// as text nodes.
import { ciLevel, fmtPp, forestScale, niceTicks } from './analysis.js';
import { h, svg } from './dom.js';
import { DASH, fmtValue } from './format.js';

const FOREST_WIDE = 760;
const FOREST_WIDE_LEFT = 130;
const FOREST_WIDE_RIGHT = 520;
const FOREST_SMALL = { w: 560, left: 70, right: 330, ticks: 4 };
const FOREST_ROW = 30;

// A forest plot: one row per treatment, its delta as a dot and its interval as a line with
// ends, the zero line, ±margin shaded when given, round ticks. rows: [{label, treatment,
// verdict, delta, low, high}]; fmt formats a value; ids: {row, zero} data-testids.
function forestSvg(rows, { fmt, margin = 0, marginTitle = '', ids = {}, aria, metric, geometry = {} }) {
    const { w, left, right, ticks } = { w: FOREST_WIDE, left: FOREST_WIDE_LEFT, right: FOREST_WIDE_RIGHT, ticks: 8, ...geometry };
    const top = 22;
    const height = top + rows.length * FOREST_ROW + 26;
    const { min, max, x } = forestScale(rows, { left, right, margin });
    const root = svg('svg', { viewBox: `0 0 ${w} ${height}`, role: 'img', preserveAspectRatio: 'xMidYMid meet', 'aria-label': aria });
    const bottom = top + rows.length * FOREST_ROW;
    if (margin > 0) {
        root.appendChild(svg('rect', { x: x(-margin), y: top - 6, width: x(margin) - x(-margin), height: bottom - top + 6, class: 'forest-margin', 'data-testid': ids.margin },
            svg('title', null, marginTitle)));
    }
    root.appendChild(svg('line', { x1: x(0), x2: x(0), y1: top - 8, y2: bottom, class: 'forest-zero', 'data-testid': ids.zero }));
    root.appendChild(svg('line', { x1: left, x2: right, y1: bottom, y2: bottom, class: 'axis' }));
    for (const v of niceTicks(min, max, ticks)) {
        root.appendChild(svg('line', { x1: x(v), x2: x(v), y1: bottom, y2: bottom + 4, class: 'axis' }));
        root.appendChild(svg('text', { x: x(v), y: bottom + 16, class: 'tick', 'text-anchor': 'middle' }, v === 0 ? '0' : fmt(v)));
    }
    root.appendChild(svg('text', { x: right + 10, y: top - 8, class: 'tick' }, 'delta [interval]'));
    const num = (v) => (Number.isFinite(v) ? v : '');
    rows.forEach((r, i) => {
        const cy = top + i * FOREST_ROW + FOREST_ROW / 2;
        const g = svg('g', {
            class: `forest-row v-${r.verdict || 'inconclusive'}`, 'data-testid': ids.row, 'data-treatment': r.treatment, 'data-metric': metric,
            'data-delta': num(r.delta), 'data-low': num(r.low), 'data-high': num(r.high),
        });
        g.appendChild(svg('text', { x: left - 10, y: cy + 4, class: 'forest-label', 'text-anchor': 'end' }, r.label));
        if (Number.isFinite(r.low) && Number.isFinite(r.high)) {
            g.appendChild(svg('line', { x1: x(r.low), x2: x(r.high), y1: cy, y2: cy, class: 'forest-ci' }));
            for (const v of [r.low, r.high]) g.appendChild(svg('line', { x1: x(v), x2: x(v), y1: cy - 5, y2: cy + 5, class: 'forest-ci' }));
        }
        if (Number.isFinite(r.delta)) g.appendChild(svg('circle', { cx: x(r.delta), cy, r: 5, class: 'forest-point' }));
        g.appendChild(svg('text', { x: right + 10, y: cy + 4, class: 'tick' },
            Number.isFinite(r.low) ? `${fmt(r.delta)} [${fmt(r.low)}, ${fmt(r.high)}]` : `${fmt(r.delta)} (no interval)`));
        g.appendChild(svg('title', null, `${r.label}: ${r.verdict || 'no verdict'}`));
        root.appendChild(g);
    });
    return root;
}

// The forest plot of the pass-rate deltas, ±min_effect shaded.
export function forestPlot(exp) {
    const comps = exp.comparisons || [];
    const margin = (exp.analysis && exp.analysis.min_effect) || 0;
    const rows = comps.map((c) => ({ label: c.label, treatment: c.treatment, verdict: c.verdict, delta: (c.pass_rate || {}).delta, low: (c.pass_rate || {}).ci_low, high: (c.pass_rate || {}).ci_high }));
    const fig = h('figure', { class: 'chart forest', 'data-testid': 'exp-forest' },
        h('figcaption', null, `Pass-rate difference against the control, with its ${ciLevel(exp.analysis)} interval`));
    if (!rows.length) {
        fig.appendChild(h('p', { class: 'chart-empty' }, 'no comparison yet'));
        return fig;
    }
    fig.appendChild(forestSvg(rows, {
        fmt: fmtPp, margin, marginTitle: `±${fmtPp(margin).replace(/^\+/, '')}: the smallest effect that matters`,
        ids: { row: 'forest-interval', zero: 'forest-zero', margin: 'forest-margin' },
        aria: 'Forest plot of the pass-rate difference of every treatment against the control, with its confidence interval',
    }));
    return fig;
}

export const METRIC_LABELS = {
    total_tokens: ['total tokens', 'count'], input_tokens: ['input tokens', 'count'], output_tokens: ['output tokens', 'count'],
    reasoning_tokens: ['reasoning tokens', 'count'], cost_usd: ['cost', 'usd'], wall_time_ms: ['wall time', 'ms'], turns: ['turns', 'count'],
    function_calls: ['function calls', 'count'], function_call_errors: ['function-call errors', 'count'],
};

export function metricEntries(metrics) {
    if (Array.isArray(metrics)) return metrics.map((m) => [m.metric || m.name, m]);
    if (metrics && typeof metrics === 'object') return Object.entries(metrics);
    return [];
}

export function signed(v, kind) {
    if (!Number.isFinite(v)) return DASH;
    const text = fmtValue(Math.abs(v), kind);
    if (/^\$?0( ms)?$/.test(text)) return text; // rounds to zero: no sign
    return v > 0 ? `+${text}` : v < 0 ? `−${text}` : text;
}

// One small forest plot per metric whose deltas or intervals are not all zero.
export function metricForests(comps) {
    const names = [];
    for (const c of comps) for (const [k] of metricEntries(c.metrics)) if (k && !names.includes(k)) names.push(k);
    return names.map((k) => {
        const [label, kind] = METRIC_LABELS[k] || [k, 'count'];
        const rows = comps.map((c) => {
            const m = (metricEntries(c.metrics).find(([n]) => n === k) || [])[1] || {};
            const verdict = Number.isFinite(m.ci_high) && m.ci_high < 0 ? 'better' : Number.isFinite(m.ci_low) && m.ci_low > 0 ? 'worse' : 'inconclusive';
            return { label: c.label, treatment: c.treatment, verdict, delta: m.delta, low: m.ci_low, high: m.ci_high };
        });
        if (!rows.some((r) => [r.delta, r.low, r.high].some((v) => Number.isFinite(v) && v !== 0))) return null;
        return h('figure', { class: 'chart forest', 'data-testid': `exp-forest-${k}` },
            h('figcaption', null, `${label}: treatment − control (lower is better)`),
            forestSvg(rows, { fmt: (v) => signed(v, kind), ids: { row: 'forest-metric-interval' }, metric: k, geometry: FOREST_SMALL, aria: `Forest plot of the ${label} difference of every treatment against the control` }));
    }).filter(Boolean);
}
