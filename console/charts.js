// Inline SVG charts: of per-run metrics, bars in execution order coloured by variant (second-in-
// pair runs drawn hatched) and beside them the median of each variant at each pair position;
// and of a sequential experiment, a treatment's confidence sequence case by case. Builds new
// SVG elements on every call; holds no state. Colours come from CSS classes.
import { h, svg } from './dom.js';
import { series } from './report.js';
import { fmtValue } from './format.js';
import { fmtPp, niceTicks } from './analysis.js';

const W = 360;
const H = 160;
const TOP = 16;
const BOTTOM = 22;
const LEFT = 6;
const SPLIT = 262; // x where the per-position medians start

function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
}

// One chart. runs: EvalRunV1[]; valueOf(run) → number|null; kind: format kind of the values;
// labels: {a, b} variant labels. Returns a <figure>.
export function metricChart({ title, key, runs, valueOf, kind, labels }) {
    const { points, groups } = series(runs, valueOf);
    const known = points.filter((p) => p.value !== null);
    const fig = h('figure', { class: 'chart', 'data-testid': `chart-${key}` });
    fig.appendChild(h('figcaption', null, title));
    if (!known.length) {
        fig.appendChild(h('p', { class: 'chart-empty' }, 'no data yet'));
        return fig;
    }
    const max = niceMax(Math.max(...known.map((p) => p.value), ...groups.map((g) => g.median || 0)));
    const plotH = H - TOP - BOTTOM;
    const y = (v) => TOP + plotH - (v / max) * plotH;
    const roleName = (role) => (role === 'control' ? `A ${labels.a}` : `B ${labels.b}`);

    const root = svg('svg', {
        viewBox: `0 0 ${W} ${H}`,
        role: 'img',
        'aria-label': `${title}: per-run values in execution order and medians by variant and position`,
        preserveAspectRatio: 'xMidYMid meet',
    });
    root.appendChild(svg('defs', null,
        svg('pattern', { id: `hatch-${key}`, width: 4, height: 4, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' },
            svg('rect', { width: 4, height: 4, class: 'hatch-bg' }),
            svg('line', { x1: 0, y1: 0, x2: 0, y2: 4, class: 'hatch-line' }))));
    for (const frac of [0, 0.5, 1]) {
        const yy = y(max * frac);
        root.appendChild(svg('line', { x1: LEFT, x2: W - 4, y1: yy, y2: yy, class: frac ? 'grid' : 'axis' }));
    }
    root.appendChild(svg('text', { x: LEFT, y: TOP - 5, class: 'tick' }, fmtValue(max, kind)));

    const n = points.length;
    const slot = (SPLIT - LEFT - 8) / n;
    const bw = Math.max(2, Math.min(24, slot * 0.7));
    points.forEach((p, i) => {
        const cx = LEFT + slot * i + slot / 2;
        const cls = ['bar', p.role === 'control' ? 'bar-a' : 'bar-b', p.pair === 2 ? 'second' : 'first'];
        if (p.value === null) {
            root.appendChild(svg('text', { x: cx, y: TOP + plotH - 3, class: 'tick missing', 'text-anchor': 'middle' }, '·'));
        } else {
            const top = y(p.value);
            const bar = svg('rect', {
                x: cx - bw / 2, y: top, width: bw, height: Math.max(1, TOP + plotH - top), class: cls.join(' '), rx: 1.5,
            });
            bar.appendChild(svg('title', null,
                `#${p.position} ${roleName(p.role)} run ${p.iteration}, ran ${p.pair === 2 ? 'second' : 'first'}: ${fmtValue(p.value, kind)}`));
            root.appendChild(bar);
            if (p.pair === 2) {
                root.appendChild(svg('rect', { x: cx - bw / 2, y: top, width: bw, height: Math.max(1, TOP + plotH - top), fill: `url(#hatch-${key})`, class: 'hatch', 'pointer-events': 'none' }));
            }
        }
        if (n <= 24) root.appendChild(svg('text', { x: cx, y: H - 8, class: 'tick', 'text-anchor': 'middle' }, String(p.position)));
    });

    root.appendChild(svg('line', { x1: SPLIT - 2, x2: SPLIT - 2, y1: TOP - 6, y2: TOP + plotH, class: 'divider' }));
    const gw = (W - SPLIT - 4) / groups.length;
    groups.forEach((g, i) => {
        const cx = SPLIT + gw * i + gw / 2;
        const label = `${g.role === 'control' ? 'A' : 'B'}${g.pair}`;
        root.appendChild(svg('text', { x: cx, y: H - 8, class: 'tick', 'text-anchor': 'middle' }, label));
        if (g.median === null) return;
        const top = y(g.median);
        const cls = ['bar', 'median', g.role === 'control' ? 'bar-a' : 'bar-b', g.pair === 2 ? 'second' : 'first'];
        const bar = svg('rect', { x: cx - 7, y: top, width: 14, height: Math.max(1, TOP + plotH - top), class: cls.join(' '), rx: 1.5 });
        bar.appendChild(svg('title', null,
            `median of ${roleName(g.role)} when it ran ${g.pair === 2 ? 'second' : 'first'} (${g.n} run${g.n === 1 ? '' : 's'}): ${fmtValue(g.median, kind)}`));
        root.appendChild(bar);
        if (g.pair === 2) root.appendChild(svg('rect', { x: cx - 7, y: top, width: 14, height: Math.max(1, TOP + plotH - top), fill: `url(#hatch-${key})`, class: 'hatch', 'pointer-events': 'none' }));
    });
    root.appendChild(svg('text', { x: W - 4, y: TOP - 5, class: 'tick', 'text-anchor': 'end' }, 'medians'));
    fig.appendChild(root);
    return fig;
}

export function chartLegend(labels) {
    return h('p', { class: 'chart-legend' },
        h('span', { class: 'swatch swatch-a' }), ` A ${labels.a}  `,
        h('span', { class: 'swatch swatch-b' }), ` B ${labels.b}  `,
        h('span', { class: 'swatch swatch-second' }), ' hatched: ran second in its pair · x axis: execution position; A1/A2, B1/B2: median when the variant ran first/second');
}

const CS = { w: 760, h: 250, left: 58, right: 700, top: 18, bottom: 216 };

// The confidence sequence of one treatment: x = n, the cases in the sequence; the band
// [low_n, high_n] on the pass-rate-difference scale [−1, 1], from the whole interval before
// the first case; 0, ±minEffect (shaded), min_cases and the decision point marked; the last
// point labelled. points: [{n, low, high}] (sequential.js); verdict: the comparison's;
// decidedAt: n or null. Returns an <svg>.
export function sequenceChart({ points, label, verdict, minEffect = 0, minCases = 0, decidedAt = null, level = '' }) {
    const { w, left, right, top, bottom } = CS;
    const last = points[points.length - 1];
    const maxN = Math.max(last ? last.n : 0, 1);
    const x = (n) => left + (n / maxN) * (right - left);
    const y = (v) => top + ((1 - v) / 2) * (bottom - top);
    const decided = Number.isInteger(decidedAt) ? points.find((p) => p.n === decidedAt) : null;
    const aria = last
        ? `${label}: the ${level} anytime-valid confidence sequence of the pass-rate difference over ${last.n} case${last.n === 1 ? '' : 's'}, `
            + `last [${fmtPp(last.low)}, ${fmtPp(last.high)}]${decided ? `; decided ${verdict} at case ${decided.n}` : '; not decided'}`
        : `${label}: no case in the sequence yet`;
    const root = svg('svg', { viewBox: `0 0 ${w} ${CS.h}`, role: 'img', preserveAspectRatio: 'xMidYMid meet', 'aria-label': aria });
    if (points.length) {
        // The band from n = 0 (the whole interval) to the last case.
        const all = [{ n: 0, low: -1, high: 1 }, ...points];
        const upper = all.map((p) => `${x(p.n).toFixed(2)},${y(p.high).toFixed(2)}`);
        const lower = all.slice().reverse().map((p) => `${x(p.n).toFixed(2)},${y(p.low).toFixed(2)}`);
        root.appendChild(svg('polygon', { points: [...upper, ...lower].join(' '), class: `cs-band v-${verdict || 'continue'}`, 'data-testid': 'cs-band', 'data-points': all.length }));
        root.appendChild(svg('polyline', { points: upper.join(' '), class: 'cs-bound' }));
        root.appendChild(svg('polyline', { points: all.map((p) => `${x(p.n).toFixed(2)},${y(p.low).toFixed(2)}`).join(' '), class: 'cs-bound' }));
    }
    // Grid and margin over the band, so that both stay visible through it.
    for (const v of [-0.5, 0.5]) {
        root.appendChild(svg('line', { x1: left, x2: right, y1: y(v), y2: y(v), class: 'grid' }));
    }
    if (minEffect > 0) {
        root.appendChild(svg('rect', { x: left, y: y(minEffect), width: right - left, height: y(-minEffect) - y(minEffect), class: 'cs-margin', 'data-testid': 'cs-margin' },
            svg('title', null, `±${fmtPp(minEffect).replace(/^\+/, '')}: the smallest effect that matters`)));
        for (const v of [minEffect, -minEffect]) {
            root.appendChild(svg('line', { x1: left, x2: right, y1: y(v), y2: y(v), class: 'cs-margin-line' }));
            root.appendChild(svg('text', { x: left + 4, y: v > 0 ? y(v) - 3 : y(v) + 11, class: 'tick' }, `${v > 0 ? '+' : '−'}min_effect`));
        }
    }
    for (const v of [-1, -0.5, 0, 0.5, 1]) {
        root.appendChild(svg('text', { x: left - 6, y: y(v) + 4, class: 'tick', 'text-anchor': 'end' }, v === 0 ? '0' : fmtPp(v)));
    }
    root.appendChild(svg('line', { x1: left, x2: left, y1: top, y2: bottom, class: 'axis' }));
    root.appendChild(svg('line', { x1: left, x2: right, y1: bottom, y2: bottom, class: 'axis' }));
    for (const n of niceTicks(0, maxN, 8).filter((v) => Number.isInteger(v) && v >= 0)) {
        root.appendChild(svg('line', { x1: x(n), x2: x(n), y1: bottom, y2: bottom + 4, class: 'axis' }));
        root.appendChild(svg('text', { x: x(n), y: bottom + 16, class: 'tick', 'text-anchor': 'middle' }, String(n)));
    }
    root.appendChild(svg('text', { x: right, y: bottom + 30, class: 'tick', 'text-anchor': 'end' }, 'cases in the sequence (n)'));
    if (minCases > 0 && minCases <= maxN) {
        root.appendChild(svg('line', { x1: x(minCases), x2: x(minCases), y1: top, y2: bottom, class: 'cs-min', 'data-testid': 'cs-min-cases' },
            svg('title', null, `min_cases ${minCases}: no stop before`)));
        root.appendChild(svg('text', { x: x(minCases) + 4, y: bottom - 5, class: 'tick' }, 'min_cases'));
    }
    root.appendChild(svg('line', { x1: left, x2: right, y1: y(0), y2: y(0), class: 'cs-zero', 'data-testid': 'cs-zero' }));
    if (decided) {
        const g = svg('g', { class: 'cs-decided', 'data-testid': 'cs-decided', 'data-n': decided.n });
        g.appendChild(svg('line', { x1: x(decided.n), x2: x(decided.n), y1: top, y2: bottom }));
        const at = verdict === 'worse' ? [decided.high] : verdict === 'equivalent' ? [decided.low, decided.high] : [decided.low];
        for (const v of at) g.appendChild(svg('circle', { cx: x(decided.n), cy: y(v), r: 4.5 }));
        const anchorEnd = x(decided.n) > (left + right) / 2;
        g.appendChild(svg('text', { x: x(decided.n) + (anchorEnd ? -6 : 6), y: top + 10, class: 'cs-decided-label', 'text-anchor': anchorEnd ? 'end' : 'start' },
            `decided ${verdict} at case ${decided.n}`));
        g.appendChild(svg('title', null, `decided at case ${decided.n}: [${fmtPp(decided.low)}, ${fmtPp(decided.high)}]`));
        root.appendChild(g);
    }
    if (last) {
        const g = svg('g', { class: 'cs-last', 'data-testid': 'cs-last', 'data-n': last.n, 'data-low': last.low, 'data-high': last.high });
        for (const v of [last.low, last.high]) g.appendChild(svg('circle', { cx: x(last.n), cy: y(v), r: 3.5 }));
        g.appendChild(svg('text', { x: right + 6, y: (y(last.low) + y(last.high)) / 2 + 4, class: 'tick' }, `n ${last.n}`));
        g.appendChild(svg('title', null, `case ${last.n}: [${fmtPp(last.low)}, ${fmtPp(last.high)}]`));
        root.appendChild(g);
    }
    return root;
}
