// Inline SVG charts of per-run metrics: bars in execution order coloured by variant (second-in-
// pair runs drawn hatched), and beside them the median of each variant at each pair position.
// Builds new SVG elements on every call; holds no state. Colours come from CSS classes.
import { h, svg } from './dom.js';
import { series } from './report.js';
import { fmtValue } from './format.js';

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
