// The detail of one experiment (#/experiments/<id>), mounted by experiments.js: live progress, a
// verdict banner per treatment, the forest plot of the pass-rate deltas, arms and metric tables,
// the per-case matrix with its flaky/disagree filters and paging, a case's runs side by side with
// a word diff against the control and their trace ids, export, cancel and delete, the source of
// the verdicts the analysis is read from, and the way to the review screen, review.js. It follows
// the experiment's event stream while it runs; progress events update the bar at once and, at
// most every 1.5 s, one read of the experiment refreshes the analysis; the matrix's first page is
// re-read at most every 4 s (not once later pages are loaded), so a 10,000-case experiment is
// never reloaded whole per event. mountExperiment() returns {dispose}, which closes the stream and
// stops the timers. All text is inserted as text nodes.
import { api, ApiError, experimentEventsUrl, exportBlob, exportPath, getToken } from './api.js';
import {
    armList, ciLevel, fmtPp, forestScale, matrixCell, niceTicks, outputText, runPassed, verdictBanner, wordDiff,
} from './analysis.js';
import { copyButton, h, replace, svg } from './dom.js';
import { SOURCES, isSource } from './reviewing.js';
import { DASH, fmtDate, fmtInt, fmtPct, fmtValue, isTerminal, traceIdOf } from './format.js';

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
function forestPlot(exp) {
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

const METRIC_LABELS = {
    total_tokens: ['total tokens', 'count'], input_tokens: ['input tokens', 'count'], output_tokens: ['output tokens', 'count'],
    reasoning_tokens: ['reasoning tokens', 'count'], cost_usd: ['cost', 'usd'], wall_time_ms: ['wall time', 'ms'], turns: ['turns', 'count'],
    function_calls: ['function calls', 'count'], function_call_errors: ['function-call errors', 'count'],
};

function metricEntries(metrics) {
    if (Array.isArray(metrics)) return metrics.map((m) => [m.metric || m.name, m]);
    if (metrics && typeof metrics === 'object') return Object.entries(metrics);
    return [];
}

function signed(v, kind) {
    if (!Number.isFinite(v)) return DASH;
    const text = fmtValue(Math.abs(v), kind);
    if (/^\$?0( ms)?$/.test(text)) return text; // rounds to zero: no sign
    return v > 0 ? `+${text}` : v < 0 ? `−${text}` : text;
}

// root: <main>; ctx: app context; id: the experiment; source: the verdicts the analysis is read
// from (evaluator, human, human_then_evaluator). Returns {dispose}.
export function mountExperiment(root, ctx, id, source) {
    const st = {
        source: isSource(source) ? source : 'evaluator', readSeq: 0,
        exp: null, progress: null, es: null, live: 'idle', retry: 0, retryTimer: 0, refreshTimer: 0, matrixTimer: 0, lastMatrix: 0,
        filter: '', cases: [], next: null, casesLoaded: false, caseError: null, selected: null, runs: null, runsError: null, disposed: false,
    };
    const els = {
        head: h('header', { class: 'detail-head' }),
        progress: h('section', { class: 'card progress-panel', 'data-testid': 'exp-progress' }),
        verdicts: h('section', { class: 'exp-verdicts', 'data-testid': 'exp-verdicts', 'aria-label': 'Verdicts' }),
        forest: h('section', { class: 'card' }),
        arms: h('section', { class: 'card' }),
        metrics: h('section', { class: 'card' }),
        matrix: h('section', { class: 'card', 'data-testid': 'exp-matrix', 'aria-label': 'Cases' }),
        caseView: h('section', { class: 'card', 'data-testid': 'exp-case', hidden: true, 'aria-label': 'Runs of a case' }),
    };
    replace(root, h('div', { class: 'page experiments-page', 'data-testid': 'exp-detail' },
        h('p', { class: 'small' }, h('a', { href: '#/experiments' }, '← Experiments')),
        els.head, els.progress, els.verdicts, els.forest, els.arms, els.metrics, els.matrix, els.caseView,
        h('p', { class: 'footnote' }, 'Intervals are Bonferroni-adjusted for the number of treatments; token, cost and time deltas are descriptive and never decide a verdict.')));

    const statusOf = () => (st.exp && st.exp.status) || (st.progress && st.progress.status) || '';

    function exportLink(format) {
        return h('a', {
            class: 'button small', href: exportPath(id, format), download: `${id}.${format}`, 'data-testid': `exp-export-${format}`,
            onclick: async (e) => {
                if (!getToken()) return; // the plain link works
                e.preventDefault();
                try {
                    const blob = await exportBlob(id, format);
                    const url = URL.createObjectURL(blob);
                    const a = h('a', { href: url, download: `${id}.${format}` });
                    document.body.appendChild(a);
                    a.click();
                    a.remove();
                    setTimeout(() => URL.revokeObjectURL(url), 10000);
                } catch (err) {
                    ctx.toast(`Could not export: ${err.message}`, 'error');
                }
            },
        }, format.toUpperCase());
    }

    function renderHead() {
        const keepFocus = document.activeElement && document.activeElement.id === 'exp-source';
        renderHeadParts();
        // The selector is made again with the header: give the focus back to the new one.
        if (keepFocus) {
            const select = document.getElementById('exp-source');
            if (select) select.focus();
        }
    }

    function renderHeadParts() {
        const e = st.exp;
        const status = statusOf();
        const terminal = isTerminal(status);
        const req = e.request || {};
        const model = req.model || {};
        const ds = e.dataset || {};
        const partial = e.analysis && e.analysis.partial;
        replace(els.head,
            h('div', { class: 'title-row' },
                h('h1', { 'data-testid': 'exp-title' }, e.name || '(unnamed experiment)'),
                h('span', { class: `badge status ${status}`, 'data-testid': 'exp-status', 'data-status': status }, status),
                partial ? h('span', { class: 'badge partial', 'data-testid': 'exp-partial' }, 'partial analysis') : null,
                !terminal ? h('span', { class: `live ${st.live}`, 'data-testid': 'exp-live' },
                    st.live === 'open' ? 'live' : st.live === 'retrying' ? 'reconnecting…' : 'connecting…') : null),
            h('p', { class: 'subtitle' },
                `${armList(e).map((a) => a.label).join(' vs ')} · ${req.dimension || 'prompt'} · ${model.model || ''}${model.provider ? ` (${model.provider})` : ''} · ${fmtInt(ds.case_count)} cases × ${fmtInt(req.repeats)} repeats · created ${fmtDate(e.created_at)}`),
            h('p', { class: 'idline small muted' }, h('code', { 'data-testid': 'exp-id' }, e.experiment_id), ' · dataset ', h('code', null, ds.dataset_id || DASH)),
            h('div', { class: 'actions', 'data-testid': 'exp-actions' },
                !terminal ? h('button', { type: 'button', class: 'danger', 'data-testid': 'exp-cancel', onclick: cancel }, 'Cancel') : null,
                h('a', { class: 'button', href: `#/experiments/${encodeURIComponent(id)}/review`, 'data-testid': 'exp-review', title: 'Review runs one at a time: p pass, f fail, s skip' }, 'Review'),
                h('a', { class: 'button', href: `#/experiments/new?from=${encodeURIComponent(id)}`, 'data-testid': 'exp-edit' }, 'Edit as new'),
                h('span', { class: 'muted small export-label' }, 'Export runs:'), exportLink('jsonl'), exportLink('csv'),
                terminal ? h('button', { type: 'button', class: 'danger', 'data-testid': 'exp-delete', onclick: remove }, 'Delete') : null),
            sourcePicker());
    }

    // The verdicts the analysis (banners, plots, arms, metrics) is read from; the matrix and a
    // case's runs always show the evaluator's.
    function sourcePicker() {
        const an = (st.exp && st.exp.analysis) || {};
        const shown = an.source || 'evaluator';
        const select = h('select', {
            id: 'exp-source', 'data-testid': 'exp-source', onchange: (ev) => setSource(ev.target.value),
        }, SOURCES.map((s) => h('option', { value: s.value, selected: s.value === st.source }, s.label)));
        select.value = st.source;
        return h('div', { class: 'source-pick small' },
            h('label', { for: 'exp-source' }, 'Analysis from the verdicts of'), select,
            h('span', { class: 'muted', 'data-testid': 'exp-source-note', 'data-source': shown },
                shown === 'human' ? 'reviewed runs only, with their human verdicts; the cases below show the evaluator\'s'
                    : shown === 'human_then_evaluator' ? 'the human verdict where a run has one, the evaluator\'s elsewhere; the cases below show the evaluator\'s'
                        : 'as stored when the runs were scored'));
    }

    function setSource(value) {
        if (!isSource(value) || value === st.source) return;
        st.source = value;
        const hash = `#/experiments/${id}${value === 'evaluator' ? '' : `?source=${value}`}`;
        // Replaces the address without a hashchange (the view stays mounted).
        history.replaceState(null, '', hash);
        refresh();
    }

    function renderProgress() {
        const p = (st.progress && st.progress.progress) || (st.exp && st.exp.progress) || {};
        const total = p.total_runs || 0;
        const done = p.terminal_runs || 0;
        const pct = total ? Math.round((done / total) * 100) : 0;
        replace(els.progress,
            h('div', { class: 'progressbar', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': total, 'aria-valuenow': done },
                h('span', { style: `width:${pct}%` })),
            h('p', { 'data-testid': 'exp-progress-text', 'data-done': done, 'data-total': total },
                `${fmtInt(done)}/${fmtInt(total)} runs finished · ${fmtInt(p.passed_runs)} met criteria · ${fmtInt(p.failed_runs)} missed criteria · ${fmtInt(Math.max(0, done - (p.passed_runs || 0) - (p.failed_runs || 0)))} not evaluated`));
    }

    function renderVerdicts() {
        const comps = st.exp.comparisons || [];
        if (!comps.length) {
            replace(els.verdicts, h('p', { class: 'muted', 'data-testid': 'exp-verdicts-empty' }, 'No comparison yet.'));
            return;
        }
        replace(els.verdicts, comps.map((c) => {
            const b = verdictBanner(c, st.exp);
            return h('div', {
                class: `verdict-banner vb-${b.verdict}`, 'data-testid': 'exp-verdict', 'data-treatment': c.treatment,
                'data-verdict': b.verdict, 'data-partial': String(b.partial),
            },
            h('p', { class: 'vb-head' },
                h('span', { class: 'vb-word', 'data-testid': 'exp-verdict-word' }, b.verdict),
                ' ', h('span', { 'data-testid': 'exp-verdict-headline' }, b.headline),
                b.partial ? h('span', { class: 'badge partial' }, 'partial') : null,
                c.eligible === true ? h('span', { class: 'badge eligible', title: 'every treatment run passed and it passed at least as often as the control' }, 'eligible') : null),
            h('p', { class: 'vb-figures', 'data-testid': 'exp-verdict-figures' }, b.figures.join(' · ')),
            b.needs ? h('p', { class: 'vb-needs', 'data-testid': 'exp-verdict-needs' }, b.needs) : null);
        }));
    }

    function renderForest() {
        replace(els.forest, h('h2', null, 'Forest plot'), forestPlot(st.exp));
    }

    function renderArms() {
        const arms = st.exp.arms || [];
        const alpha = (st.exp.analysis && st.exp.analysis.alpha) || 0.05;
        replace(els.arms, h('h2', null, 'Arms'),
            h('div', { class: 'table-wrap' }, h('table', { class: 'report', 'data-testid': 'exp-arms' },
                h('thead', null, h('tr', null, ['Arm', 'Pass rate (case mean)', 'Passed runs', `Wilson ${(100 * (1 - alpha)).toFixed(0)}%`, 'Cases', 'Flaky cases', 'Ran first', 'Ran later'].map((t) => h('th', { scope: 'col' }, t)))),
                h('tbody', null, arms.map((a) => {
                    const p = a.pooled || {};
                    const o = a.order || {};
                    const rate = (x, n) => (n ? `${fmtInt(x)}/${fmtInt(n)} (${fmtPct(x / n)})` : DASH);
                    return h('tr', { 'data-testid': 'exp-arm-row', 'data-arm': a.index },
                        h('th', { scope: 'row' }, h('span', { class: `swatch ${a.role === 'control' ? 'swatch-a' : 'swatch-b'}` }), ` ${a.label}`, h('small', { class: 'muted' }, ` ${a.role}`)),
                        h('td', { 'data-testid': `exp-arm-pass-${a.index}`, 'data-value': a.pass_rate ?? '' }, fmtPct(a.pass_rate)),
                        h('td', null, `${fmtInt(p.passed)}/${fmtInt(p.evaluated)}`),
                        h('td', null, Number.isFinite(p.wilson_low) ? `${fmtPct(p.wilson_low)} – ${fmtPct(p.wilson_high)}` : DASH),
                        h('td', null, fmtInt(a.evaluated_cases)),
                        h('td', { 'data-testid': `exp-arm-flaky-${a.index}` }, fmtInt(a.flaky_cases)),
                        h('td', null, rate(o.first_passed, o.first_runs)),
                        h('td', null, rate(o.later_passed, o.later_runs)));
                })))));
    }

    // One small forest plot per metric whose deltas or intervals are not all zero.
    function metricForests(comps) {
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

    function renderMetrics() {
        const comps = st.exp.comparisons || [];
        const tables = comps.map((c) => {
            const rows = metricEntries(c.metrics).filter(([k]) => k);
            if (!rows.length) return null;
            return h('div', { class: 'table-wrap' }, h('table', { class: 'report', 'data-testid': 'exp-metrics', 'data-treatment': c.treatment },
                h('caption', null, `${c.label} − control, median per case then mean over the cases; lower is better for every metric`),
                h('thead', null, h('tr', null, [`${c.label} − control`, 'Delta', 'Interval', 'Relative', 'Cases'].map((t) => h('th', { scope: 'col' }, t)))),
                h('tbody', null, rows.map(([k, m]) => {
                    const [label, kind] = METRIC_LABELS[k] || [k, 'count'];
                    const verdict = Number.isFinite(m.ci_high) && m.ci_high < 0 ? 'better' : Number.isFinite(m.ci_low) && m.ci_low > 0 ? 'worse' : '';
                    return h('tr', { 'data-metric': k },
                        h('th', { scope: 'row' }, label),
                        h('td', { class: ['delta', verdict], 'data-value': m.delta ?? '' }, signed(m.delta, kind)),
                        h('td', null, Number.isFinite(m.ci_low) ? `[${signed(m.ci_low, kind)}, ${signed(m.ci_high, kind)}]` : DASH),
                        h('td', null, Number.isFinite(m.relative) ? `${m.relative > 0 ? '+' : m.relative < 0 ? '−' : ''}${fmtPct(Math.abs(m.relative))}` : DASH),
                        h('td', null, fmtInt(m.cases)));
                }))));
        }).filter(Boolean);
        els.metrics.hidden = !tables.length;
        const plots = metricForests(comps);
        replace(els.metrics, h('h2', null, 'Cost and efficiency'),
            plots.length ? h('div', { class: 'forest-grid' }, plots) : null, tables);
    }

    // ---- matrix
    function renderMatrix() {
        const arms = armList(st.exp);
        const filterButton = (value, label) => h('button', {
            type: 'button', class: ['small', st.filter === value && 'primary'], 'aria-pressed': String(st.filter === value),
            'data-testid': `exp-filter-${value || 'all'}`, onclick: () => { if (st.filter !== value) { st.filter = value; loadCases(true); } },
        }, label);
        let body;
        if (st.caseError) body = h('p', { class: 'error-text', 'data-testid': 'exp-cases-error' }, st.caseError);
        else if (!st.casesLoaded) body = h('p', { class: 'muted' }, 'Loading cases…');
        else if (!st.cases.length) {
            body = h('p', { class: 'muted', 'data-testid': 'exp-cases-empty' },
                st.filter === 'flaky' ? 'No flaky case: every arm\'s repeats agree.' : st.filter === 'disagree' ? 'No case where the arms\' pass rates differ.' : 'No cases yet.');
        } else {
            body = h('div', { class: 'table-wrap' }, h('table', { class: 'report matrix', 'data-testid': 'exp-matrix-table' },
                h('caption', null, 'passed/evaluated runs per arm; ~ marks an arm whose repeats disagree (flaky). Click a case to see its runs.'),
                h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Case'), h('th', { scope: 'col' }, 'Variables'),
                    arms.map((a) => h('th', { scope: 'col' }, a.label)))),
                h('tbody', null, st.cases.map((c) => {
                    const byIndex = new Map((c.arms || []).map((a) => [a.index, a]));
                    const open = () => selectCase(c);
                    return h('tr', {
                        class: ['case-row', c.flaky && 'is-flaky', st.selected && st.selected.case_id === c.case_id && 'is-selected'],
                        'data-testid': 'exp-case-row', 'data-case-id': c.case_id, 'data-flaky': String(Boolean(c.flaky)), tabindex: 0,
                        onclick: open, onkeydown: (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); open(); } },
                    },
                    h('th', { scope: 'row' }, h('span', { class: 'case-id' }, c.case_id), c.flaky ? h('span', { class: 'badge flaky', title: 'the repeats of an arm disagree' }, 'flaky') : null),
                    h('td', { class: 'vars' }, previewVars(c.vars)),
                    arms.map((a) => {
                        const cell = matrixCell(byIndex.get(a.index));
                        return h('td', {
                            class: ['cell', cell.flaky && 'flaky', cell.pending && 'pending', cell.rate === 1 && 'all', cell.rate === 0 && 'none'],
                            'data-testid': 'exp-cell', 'data-arm': a.index, 'data-passed': (byIndex.get(a.index) || {}).passed ?? 0,
                            'data-evaluated': (byIndex.get(a.index) || {}).evaluated ?? 0,
                            title: `${a.label}: ${cell.text} passed${cell.pending ? ` (${cell.planned} planned)` : ''}${cell.flaky ? ', flaky' : ''}`,
                        }, cell.text, cell.flaky ? h('span', { class: 'flaky-mark', 'aria-label': 'flaky' }, ' ~') : null);
                    }));
                }))));
        }
        replace(els.matrix,
            h('div', { class: 'picker-head' }, h('h2', null, 'Cases'),
                h('div', { class: 'actions', role: 'group', 'aria-label': 'Filter cases' },
                    filterButton('', 'All'), filterButton('flaky', 'Flaky'), filterButton('disagree', 'Arms disagree'))),
            body,
            st.next ? h('p', null, h('button', { type: 'button', 'data-testid': 'exp-cases-more', onclick: () => loadCases(false) }, 'Load more cases')) : null);
    }

    function previewVars(vars) {
        const text = vars && typeof vars === 'object' ? Object.entries(vars).map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' · ') : '';
        return text.length > 90 ? `${text.slice(0, 89)}…` : text;
    }

    let casesSeq = 0;
    async function loadCases(first) {
        const seq = ++casesSeq;
        if (first) {
            st.casesLoaded = false;
            renderMatrix();
        }
        try {
            const res = await api.experimentCases(id, { filter: st.filter, limit: 100, before: first ? undefined : st.next });
            if (st.disposed || seq !== casesSeq) return;
            st.cases = first ? res.cases || [] : [...st.cases, ...(res.cases || [])];
            st.next = res.next_cursor || null;
            st.caseError = null;
        } catch (e) {
            if (st.disposed || seq !== casesSeq) return;
            st.caseError = `Could not load the cases: ${e.message}`;
        }
        st.casesLoaded = true;
        st.lastMatrix = Date.now();
        renderMatrix();
    }

    // Re-reads the first page in place while running (only when no later page is loaded).
    async function refreshFirstPage() {
        if (st.cases.length > 100) return;
        const seq = ++casesSeq;
        try {
            const res = await api.experimentCases(id, { filter: st.filter, limit: 100 });
            if (st.disposed || seq !== casesSeq) return;
            st.cases = res.cases || [];
            st.next = res.next_cursor || null;
            st.casesLoaded = true;
            st.caseError = null;
            st.lastMatrix = Date.now();
            renderMatrix();
        } catch {
            // the next refresh tries again
        }
    }

    // ---- one case's runs
    async function selectCase(c) {
        st.selected = c;
        st.runs = null;
        st.runsError = null;
        renderMatrix();
        renderCase();
        await loadRuns();
        els.caseView.scrollIntoView({ block: 'nearest' });
    }

    async function loadRuns() {
        const c = st.selected;
        if (!c) return;
        try {
            let all = [];
            let before;
            for (let page = 0; page < 20; page++) {
                const res = await api.experimentRuns(id, c.case_id, { limit: 100, before });
                all = all.concat(res.runs || []);
                before = res.next_cursor;
                if (!before) break;
            }
            if (st.disposed || st.selected !== c) return;
            st.runs = all;
        } catch (e) {
            if (st.disposed || st.selected !== c) return;
            st.runsError = `Could not load the runs: ${e.message}`;
        }
        renderCase();
    }

    function runBlock(run, control) {
        const passed = runPassed(run);
        const text = outputText(run.output);
        const verdict = run.status !== 'completed' ? (passed === false ? 'missed criteria' : run.status)
            : passed === true ? 'met criteria' : passed === false ? 'missed criteria' : 'not evaluated';
        const diff = control && run.arm !== control.arm ? wordDiff(outputText(control.output), text) : null;
        const failures = Array.isArray(run.failures) ? run.failures : [];
        return h('div', { class: 'exp-run', 'data-testid': 'exp-run', 'data-run-id': run.run_id, 'data-arm': run.arm, 'data-repeat': run.repeat, 'data-passed': String(passed) },
            h('p', { class: 'exp-run-head small' },
                h('span', { class: `verdict v-${verdict.replace(/\s+/g, '-')}`, 'data-testid': 'exp-run-verdict' }, verdict),
                ` repeat ${run.repeat} · #${run.position}`,
                run.verdict && typeof run.verdict === 'object' && run.verdict.reason ? h('span', { class: 'muted' }, ` · ${run.verdict.reason}`) : null),
            failures.length ? h('ul', { class: 'failures' }, failures.map((f) => h('li', null, `${f.phase || ''}${f.function_id ? ` · ${f.function_id}` : ''} — ${f.message || ''}`))) : null,
            h('pre', { class: 'raw', 'data-testid': 'exp-run-output' }, text || '(no output)'),
            diff ? h('div', { class: 'diff', 'data-testid': 'exp-run-diff', title: `words removed from / added to the control's repeat ${control.repeat}` },
                h('span', { class: 'muted small' }, `vs control repeat ${control.repeat}: `),
                diff.map((p) => {
                    if (p.op === 'same') return p.text;
                    const lead = p.text.startsWith(' ') ? ' ' : '';
                    return [lead, h(p.op === 'add' ? 'ins' : 'del', null, p.text.slice(lead.length))];
                })) : null,
            run.session_id ? h('p', { class: 'small muted' }, 'session ', h('code', null, run.session_id)) : null,
            traceLine(run));
    }

    // The run's trace id (its latest attempt's OpenTelemetry trace, docs/otel.md) with a copy
    // button; nothing when the run has none.
    function traceLine(run) {
        const traceId = traceIdOf(run);
        if (!traceId) return null;
        const code = h('code', { 'data-testid': 'exp-run-trace-id' }, traceId);
        return h('p', { class: 'small muted trace', 'data-testid': 'exp-run-trace', 'data-trace-id': traceId }, 'trace ', code, ' ',
            copyButton(traceId, {
                ariaLabel: 'Copy the trace id', testid: 'exp-run-trace-copy', target: code,
                done: (ok) => (ok ? ctx.toast('Trace id copied') : ctx.toast('Could not copy the trace id; it is selected for Ctrl+C', 'error')),
            }));
    }

    function renderCase() {
        const c = st.selected;
        els.caseView.hidden = !c;
        if (!c) return;
        const arms = armList(st.exp);
        let body;
        if (st.runsError) body = h('p', { class: 'error-text' }, st.runsError);
        else if (!st.runs) body = h('p', { class: 'muted' }, 'Loading runs…');
        else {
            const byArm = new Map(arms.map((a) => [a.index, []]));
            for (const r of [...st.runs].sort((x, y) => (x.repeat - y.repeat) || (x.position - y.position))) {
                if (!byArm.has(r.arm)) byArm.set(r.arm, []);
                byArm.get(r.arm).push(r);
            }
            const controlRuns = byArm.get(0) || [];
            body = h('div', { class: 'exp-case-cols', style: `grid-template-columns: repeat(${Math.max(1, byArm.size)}, minmax(14rem, 1fr))` },
                [...byArm.entries()].map(([arm, runs]) => {
                    const a = arms.find((x) => x.index === arm) || { label: `arm ${arm}` };
                    return h('div', { class: 'exp-case-arm', 'data-testid': 'exp-case-arm', 'data-arm': arm },
                        h('h3', null, a.label, h('small', { class: 'muted' }, arm === 0 ? ' control' : ' treatment')),
                        runs.length ? runs.map((r) => runBlock(r, controlRuns.find((x) => x.repeat === r.repeat) || controlRuns[0])) : h('p', { class: 'muted small' }, 'no runs yet'));
                }));
        }
        replace(els.caseView,
            h('div', { class: 'picker-head' },
                h('h2', { 'data-testid': 'exp-case-title' }, `Case ${c.case_id}`),
                h('button', { type: 'button', class: 'small ghost', 'data-testid': 'exp-case-close', onclick: () => { st.selected = null; renderCase(); renderMatrix(); } }, 'Close')),
            h('dl', { class: 'kv' },
                h('dt', null, 'variables'), h('dd', null, h('code', null, JSON.stringify(c.vars ?? {}))),
                h('dt', null, 'expected'), h('dd', null, h('code', null, JSON.stringify(c.expected ?? null)))),
            body);
    }

    // ---- actions
    async function cancel() {
        try {
            await api.cancelExperiment(id);
            ctx.toast('Cancelling the experiment');
            scheduleRefresh(0);
        } catch (e) {
            ctx.toast(`Could not cancel: ${e.message}`, 'error');
        }
    }

    async function remove() {
        const ok = await ctx.confirm('Delete this experiment?', 'Its runs and analysis are deleted; the dataset stays.', 'Delete');
        if (!ok) return;
        try {
            await api.removeExperiment(id);
            ctx.toast('Experiment deleted');
            ctx.navigate('#/experiments');
        } catch (e) {
            ctx.toast(`Could not delete: ${e.message}`, 'error');
        }
    }

    // ---- live updates
    function renderAnalysis() {
        renderHead();
        renderProgress();
        renderVerdicts();
        renderForest();
        renderArms();
        renderMetrics();
    }

    async function refresh() {
        const seq = ++st.readSeq;
        try {
            const e = await api.experiment(id, st.source);
            if (st.disposed || seq !== st.readSeq) return;
            st.exp = e;
            st.progress = null;
            renderAnalysis();
            if (isTerminal(e.status)) {
                closeStream();
                loadCases(true);
                if (st.selected) loadRuns();
            }
        } catch (e) {
            if (!st.disposed && seq === st.readSeq) ctx.toast(`Could not refresh the experiment: ${e.message}`, 'error');
        }
    }

    function scheduleRefresh(delay = 1500) {
        if (st.refreshTimer) return;
        st.refreshTimer = setTimeout(() => {
            st.refreshTimer = 0;
            refresh();
        }, delay);
    }

    function scheduleMatrix() {
        if (st.matrixTimer) return;
        const wait = Math.max(0, 4000 - (Date.now() - st.lastMatrix));
        st.matrixTimer = setTimeout(() => {
            st.matrixTimer = 0;
            refreshFirstPage();
            if (st.selected) loadRuns();
        }, wait);
    }

    function closeStream() {
        if (st.es) {
            st.es.close();
            st.es = null;
        }
        clearTimeout(st.retryTimer);
    }

    function parse(ev) {
        try {
            return JSON.parse(ev.data);
        } catch {
            return null;
        }
    }

    function onProgress(ev) {
        const p = parse(ev);
        if (!p) return;
        st.progress = p;
        if (st.exp && p.status) st.exp.status = p.status;
        renderProgress();
        if (p.status && isTerminal(p.status)) {
            closeStream();
            clearTimeout(st.refreshTimer);
            st.refreshTimer = 0;
            refresh();
            return;
        }
        renderHead();
        scheduleRefresh();
        scheduleMatrix();
    }

    function openStream() {
        if (st.disposed || st.es || isTerminal(statusOf())) return;
        const es = new EventSource(experimentEventsUrl(id));
        st.es = es;
        es.addEventListener('open', () => {
            st.retry = 0;
            st.live = 'open';
            renderHead();
        });
        es.addEventListener('progress', onProgress);
        es.addEventListener('status', onProgress);
        es.addEventListener('error', () => {
            if (st.disposed || st.es !== es) return;
            st.live = 'retrying';
            if (es.readyState === EventSource.CLOSED) {
                // Refused or ended early: catch up with one read (polling while the stream is
                // away), then try the stream again with backoff.
                st.es = null;
                const delay = Math.min(5000, 500 * 2 ** st.retry++);
                st.retryTimer = setTimeout(async () => {
                    await refresh();
                    if (!isTerminal(statusOf())) {
                        refreshFirstPage();
                        openStream();
                    }
                }, delay);
            }
            if (st.exp) renderHead();
        });
    }

    const firstSeq = ++st.readSeq;
    api.experiment(id, st.source).then((e) => {
        if (st.disposed || firstSeq !== st.readSeq) return;
        st.exp = e;
        document.title = `${e.name || 'Experiment'} · evald`;
        renderAnalysis();
        loadCases(true);
        openStream();
    }).catch((e) => {
        if (st.disposed) return;
        const notFound = e instanceof ApiError && e.status === 404;
        replace(root, h('div', { class: 'page', 'data-testid': 'exp-detail-error' },
            h('h1', null, notFound ? 'Experiment not found' : 'Could not load the experiment'),
            h('p', null, notFound ? `There is no experiment ${id}; it may have been deleted.` : e.message),
            h('p', null, h('a', { href: '#/experiments' }, 'Back to the experiments'))));
    });

    return {
        dispose() {
            st.disposed = true;
            closeStream();
            clearTimeout(st.refreshTimer);
            clearTimeout(st.matrixTimer);
        },
    };
}
