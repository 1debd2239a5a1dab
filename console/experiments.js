// The Experiments view: the list (#/experiments, newest first, paged), the create form
// (#/experiments/new: arms, evaluator, repeats, analysis, and the data from a dataset or an
// uploaded CSV/JSONL file) and the detail (#/experiments/<id>: live progress, a verdict banner per
// treatment, the forest plot of the pass-rate deltas, arms and metric tables, the per-case matrix
// with its flaky/disagree filters and paging, a case's runs side by side with a word diff against
// the control and their trace ids, export, cancel and delete, the source of the verdicts the
// analysis is read from, and the way to the review screen, review.js). The detail follows the
// experiment's event stream while it runs; progress events update the bar at once and, at most
// every 1.5 s, one read of the experiment refreshes the analysis; the matrix's first page is
// re-read at most every 4 s (not once later pages are loaded), so a 10,000-case experiment is never
// reloaded whole per event. mountExperiments() returns {dispose}, which closes the stream and stops
// the timers. All text is inserted as text nodes.
import { api, ApiError, experimentEventsUrl, exportBlob, exportPath, getToken } from './api.js';
import {
    MAX_TREATMENTS, armList, ciLevel, defaultExperimentForm, defaultTreatment, experimentFieldForDetail, experimentRequest, experimentToForm,
    fmtPp, forestScale, matrixCell, niceTicks, outputText, runPassed, uploadType, verdictBanner, wordDiff,
} from './analysis.js';
import { copyButton, h, replace, svg } from './dom.js';
import { SOURCES, isSource } from './reviewing.js';
import { DASH, fmtAgo, fmtDate, fmtInt, fmtPct, fmtValue, isTerminal, traceIdOf } from './format.js';

// root: <main>; ctx: app context; r: {page: 'list'|'new'|'detail', id}. Returns {dispose}.
export function mountExperiments(root, ctx, r) {
    if (r.page === 'new') return mountNew(root, ctx, r.from);
    if (r.page === 'detail') return mountDetail(root, ctx, r.id, r.source);
    return mountList(root, ctx);
}

function short(id) {
    const m = /^(?:exp|ds)_([0-9a-f]{8})/.exec(String(id || ''));
    return m ? m[1] : String(id || '').slice(0, 8);
}

function statusBadge(status, testid) {
    return h('span', { class: `badge status ${status}`, 'data-testid': testid, 'data-status': status }, status);
}

function armsText(arms) {
    if (Array.isArray(arms)) return arms.map((a) => (typeof a === 'string' ? a : a && a.label) || '?').join(' · ');
    if (Number.isInteger(arms)) return `${arms} arms`;
    return '';
}

// ---------------------------------------------------------------- list

function mountList(root, ctx) {
    const st = { items: [], next: null, disposed: false, error: null, loading: false };
    const body = h('div', { 'data-testid': 'exp-list-body' });
    replace(root, h('div', { class: 'page experiments-page', 'data-testid': 'experiments-view' },
        h('div', { class: 'title-row' },
            h('h1', null, 'Experiments'),
            h('a', { href: '#/experiments/new', class: 'button primary', 'data-testid': 'exp-new' }, 'New experiment'),
            h('button', { type: 'button', class: 'small ghost', 'data-testid': 'exp-refresh', onclick: () => load(true) }, 'Refresh')),
        h('p', { class: 'lead muted' }, 'A control and 1–4 treatments over every case of a dataset, several repeats each, with a paired verdict and its uncertainty per treatment.'),
        body));

    function render() {
        if (st.error && !st.items.length) {
            replace(body, h('p', { class: 'error-text', 'data-testid': 'exp-list-error' }, st.error));
            return;
        }
        if (!st.items.length) {
            replace(body, h('p', { class: 'muted', 'data-testid': 'exp-empty' }, st.loading ? 'Loading…' : 'No experiments yet: start one with New experiment.'));
            return;
        }
        replace(body,
            h('div', { class: 'table-wrap card' }, h('table', { class: 'report exp-list', 'data-testid': 'exp-list' },
                h('thead', null, h('tr', null, ['Status', 'Name', 'Arms', 'Runs', 'Created', 'Id'].map((t) => h('th', { scope: 'col' }, t)))),
                h('tbody', null, st.items.map((e) => {
                    const p = e.progress || {};
                    return h('tr', { 'data-testid': 'exp-row', 'data-id': e.experiment_id, 'data-status': e.status },
                        h('td', null, statusBadge(e.status, 'exp-row-status')),
                        h('td', null, h('a', { href: `#/experiments/${e.experiment_id}` }, e.name || '(unnamed)')),
                        h('td', null, armsText(e.arms)),
                        h('td', null, `${fmtInt(p.terminal_runs)}/${fmtInt(p.total_runs)}`),
                        h('td', null, h('time', { title: fmtDate(e.created_at) }, fmtAgo(e.created_at))),
                        h('td', null, h('code', { class: 'small' }, short(e.experiment_id))));
                })))),
            st.next ? h('p', null, h('button', { type: 'button', 'data-testid': 'exp-more', onclick: () => load(false) }, 'Load older')) : null);
    }

    async function load(first) {
        st.loading = true;
        render();
        try {
            const res = await api.experiments({ limit: 50, before: first ? undefined : st.next });
            if (st.disposed) return;
            st.items = first ? res.experiments || [] : [...st.items, ...(res.experiments || [])];
            st.next = res.next_cursor || null;
            st.error = null;
        } catch (e) {
            if (st.disposed) return;
            st.error = `Could not load the experiments: ${e.message}`;
            ctx.toast(st.error, 'error');
        }
        st.loading = false;
        render();
    }
    load(true);
    return { dispose() { st.disposed = true; } };
}

// ---------------------------------------------------------------- create form

// from: an experiment id whose request pre-fills the form ("edit as new"), or null.
function mountNew(root, ctx, from) {
    const st = { datasets: [], disposed: false, uploading: false };
    if (from) {
        replace(root, h('p', { class: 'muted boot' }, 'Loading the experiment…'));
        let disposed = false;
        let inner = null;
        api.experiment(from).then((exp) => {
            if (!disposed) inner = buildForm(root, ctx, experimentToForm(exp), st);
        }).catch((e) => {
            if (disposed) return;
            ctx.toast(`Could not load experiment ${from}: ${e.message}`, 'error');
            inner = buildForm(root, ctx, defaultExperimentForm(), st);
        });
        return { dispose() { disposed = true; if (inner) inner.dispose(); } };
    }
    return buildForm(root, ctx, defaultExperimentForm(), st);
}

function buildForm(root, ctx, form, st) {
    const errorEls = new Map();
    const controls = new Map();
    const formEl = h('form', { class: 'card exp-form', 'data-testid': 'exp-form', novalidate: true });
    replace(root, h('div', { class: 'page experiments-page', 'data-testid': 'experiments-view' },
        h('p', { class: 'small' }, h('a', { href: '#/experiments' }, '← Experiments')),
        h('h1', null, 'New experiment'),
        h('p', { class: 'lead muted' }, 'Every case of the dataset runs every arm, one arm after the other in a balanced order; {{name}} in a prompt, system prompt or evaluator argument is the case\'s variable, {{expected}} its expected value.'),
        formEl));

    function errorEl(name) {
        if (!errorEls.has(name)) errorEls.set(name, h('p', { class: 'field-error', 'data-testid': `exp-error-${name}`, role: 'alert', hidden: true }));
        return errorEls.get(name);
    }

    // A text input or textarea bound to get/set on the form state.
    function bound(name, get, set, { area = false, rows = 3, placeholder, type = 'text', list } = {}) {
        const el = h(area ? 'textarea' : 'input', {
            id: `exp-${name}`, 'data-testid': `exp-field-${name}`, placeholder, rows: area ? rows : undefined, type: area ? undefined : type, list,
            value: get(),
            oninput: (e) => {
                set(e.target.value);
                el.removeAttribute('aria-invalid');
                errorEl(name).hidden = true;
            },
        });
        controls.set(name, el);
        return el;
    }

    function field(name, label, control, hint) {
        return h('div', { class: 'field' }, h('label', { for: `exp-${name}` }, label), control,
            hint ? h('p', { class: 'hint' }, hint) : null, errorEl(name));
    }

    const armFields = (arm, key, title, cls) => h('fieldset', { class: `variant ${cls}`, 'data-testid': `exp-arm-${key}` },
        h('legend', null, title),
        field(`${key}_label`, 'Label', bound(`${key}_label`, () => arm.label, (v) => { arm.label = v; })),
        field(`${key}_prompt`, 'Prompt template', bound(`${key}_prompt`, () => arm.prompt, (v) => { arm.prompt = v; }, { area: true, placeholder: 'Question: {{question}}' })),
        field(`${key}_system_prompt`, 'System prompt', bound(`${key}_system_prompt`, () => arm.system_prompt, (v) => { arm.system_prompt = v; }, { area: true, rows: 2, placeholder: 'none' })));

    const armsBox = h('div', { class: 'exp-arms-form' });
    function renderArms() {
        replace(armsBox,
            armFields(form.control, 'control', 'Control', 'variant-a'),
            form.treatments.map((t, i) => h('div', { class: 'treatment-wrap' },
                armFields(t, `treatment_${i}`, `Treatment ${i + 1}`, 'variant-b'),
                form.treatments.length > 1 ? h('button', {
                    type: 'button', class: 'small ghost', 'data-testid': `exp-remove-treatment-${i}`,
                    onclick: () => { form.treatments.splice(i, 1); renderArms(); },
                }, `Remove treatment ${i + 1}`) : null)),
            form.treatments.length < MAX_TREATMENTS ? h('button', {
                type: 'button', 'data-testid': 'exp-add-treatment',
                onclick: () => { form.treatments.push(defaultTreatment(form.treatments.length)); renderArms(); },
            }, 'Add a treatment') : null,
            errorEl('treatments'));
    }
    renderArms();

    const datasetSelect = h('select', {
        id: 'exp-dataset', 'data-testid': 'exp-field-dataset',
        onchange: (e) => { form.dataset_id = e.target.value; errorEl('dataset').hidden = true; datasetSelect.removeAttribute('aria-invalid'); },
    });
    controls.set('dataset', datasetSelect);
    const uploadStatus = h('p', { class: 'hint', 'data-testid': 'exp-upload-status', role: 'status' });
    const fileInput = h('input', {
        type: 'file', id: 'exp-file', 'data-testid': 'exp-field-file', accept: '.csv,.jsonl,.ndjson,.json,text/csv,application/x-ndjson,application/json',
        onchange: (e) => upload(e.target.files && e.target.files[0]),
    });
    function renderDatasets() {
        replace(datasetSelect, h('option', { value: '' }, st.datasets.length ? 'Choose a dataset…' : 'No datasets yet: upload a file'),
            st.datasets.map((d) => h('option', { value: d.dataset_id, selected: d.dataset_id === form.dataset_id },
                `${d.name} · ${fmtInt(d.case_count)} case${d.case_count === 1 ? '' : 's'} · ${short(d.dataset_id)}`)),
            form.dataset_id && !st.datasets.some((d) => d.dataset_id === form.dataset_id) ? h('option', { value: form.dataset_id }, form.dataset_id) : null);
        datasetSelect.value = form.dataset_id;
    }
    renderDatasets();
    api.datasets({ limit: 100 }).then((res) => {
        if (st.disposed) return;
        st.datasets = res.datasets || [];
        renderDatasets();
    }).catch((e) => { if (!st.disposed) ctx.toast(`Could not load the datasets: ${e.message}`, 'error'); });
    // The catalogue fills the model's suggestions; picking one sets its provider.
    const modelList = h('datalist', { id: 'exp-models' });
    const modelName = (m) => m.id || m.model || '';
    api.models().then((res) => {
        if (st.disposed) return;
        const models = (res.models || []).filter((m) => modelName(m));
        replace(modelList, models.map((m) => h('option', { value: modelName(m) }, `${m.provider || ''}${m.available === false ? ' (unavailable)' : ''}`)));
        const modelInput = controls.get('model');
        modelInput.addEventListener('change', () => {
            const m = models.find((x) => modelName(x) === form.model);
            if (m && m.provider) {
                form.provider = m.provider;
                controls.get('provider').value = m.provider;
            }
        });
        const first = models.find((m) => m.available);
        if (first && !form.model) {
            form.model = modelName(first);
            form.provider = first.provider || '';
            modelInput.value = form.model;
            controls.get('provider').value = form.provider;
        }
    }).catch(() => {});

    async function upload(file) {
        if (!file) return;
        const err = errorEl('dataset');
        err.hidden = true;
        const type = uploadType(file.name);
        if (!type) {
            err.textContent = `${file.name}: choose a .csv, .jsonl or .json file`;
            err.dataset.source = 'client';
            err.hidden = false;
            return;
        }
        st.uploading = true;
        submit.disabled = true;
        uploadStatus.textContent = `Uploading ${file.name}…`;
        try {
            const d = await api.uploadDataset(file, file.name, type);
            if (st.disposed) return;
            st.datasets = [d, ...st.datasets.filter((x) => x.dataset_id !== d.dataset_id)];
            form.dataset_id = d.dataset_id;
            renderDatasets();
            uploadStatus.textContent = `Uploaded ${d.name}: ${fmtInt(d.case_count)} case${d.case_count === 1 ? '' : 's'} (${d.dataset_id})`;
        } catch (e) {
            if (st.disposed) return;
            uploadStatus.textContent = '';
            err.textContent = `${file.name}: ${e instanceof ApiError ? e.detail : e.message}`;
            err.dataset.source = 'server';
            err.hidden = false;
        } finally {
            st.uploading = false;
            submit.disabled = false;
            fileInput.value = '';
        }
    }

    const formError = h('p', { class: 'form-error', 'data-testid': 'exp-form-error', role: 'alert', hidden: true });
    const submit = h('button', { type: 'submit', class: 'primary', 'data-testid': 'exp-submit' }, 'Start experiment');
    const dimension = h('select', {
        id: 'exp-dimension', 'data-testid': 'exp-field-dimension', onchange: (e) => { form.dimension = e.target.value; },
    }, h('option', { value: 'prompt', selected: form.dimension === 'prompt' }, 'prompt (same system prompt, different prompts)'),
    h('option', { value: 'system_prompt', selected: form.dimension === 'system_prompt' }, 'system prompt (same prompt, different system prompts)'));

    replace(formEl,
        h('div', { class: 'row2' },
            field('name', 'Name', bound('name', () => form.name, (v) => { form.name = v; }, { placeholder: 'e.g. qa-brevity' })),
            field('dimension', 'What differs', dimension)),
        h('div', { class: 'row2' },
            field('model', 'Model', [bound('model', () => form.model, (v) => { form.model = v; }, { placeholder: 'e.g. gpt-4.1-mini', list: 'exp-models' }), modelList]),
            field('provider', 'Provider', bound('provider', () => form.provider, (v) => { form.provider = v; }, { placeholder: 'inferred from the model when empty' }))),
        h('h2', null, 'Arms'),
        armsBox,
        h('h2', null, 'Data'),
        h('div', { class: 'row2' },
            field('dataset', 'Dataset', datasetSelect),
            h('div', { class: 'field' }, h('label', { for: 'exp-file' }, 'or upload a CSV or JSONL file'), fileInput,
                h('p', { class: 'hint' }, 'CSV: a header row; column id and column expected are optional, every other column is a variable.'), uploadStatus)),
        h('h2', null, 'Evaluation'),
        h('div', { class: 'row2' },
            field('evaluator_function_id', 'Evaluator function', bound('evaluator_function_id', () => form.evaluator_function_id, (v) => { form.evaluator_function_id = v; }),
                'Decides whether a run passed, e.g. eval::assert::normalized_text or eval::assert::exact.'),
            field('evaluator_arguments', 'Arguments (JSON)', bound('evaluator_arguments', () => form.evaluator_arguments, (v) => { form.evaluator_arguments = v; }, { area: true, rows: 2 }))),
        h('div', { class: 'grid3' },
            field('repeats', 'Repeats per arm and case', bound('repeats', () => form.repeats, (v) => { form.repeats = v; }, { type: 'number' })),
            field('concurrency', 'Cases at once', bound('concurrency', () => form.concurrency, (v) => { form.concurrency = v; }, { type: 'number' })),
            h('div')),
        h('h2', null, 'Analysis'),
        h('div', { class: 'grid3' },
            field('alpha', 'α (family-wise)', bound('alpha', () => form.alpha, (v) => { form.alpha = v; })),
            field('min_effect', 'Smallest effect that matters', bound('min_effect', () => form.min_effect, (v) => { form.min_effect = v; }), 'A pass-rate difference (0.05 = 5 pp); 0: no equivalence verdict.'),
            field('cluster_by', 'Cluster by variable', bound('cluster_by', () => form.cluster_by, (v) => { form.cluster_by = v; }, { placeholder: 'none' }))),
        h('details', { class: 'advanced' }, h('summary', null, 'Advanced: limits, function policy, output contract, metadata'),
            field('extra', 'JSON object with any of limits, functions, output, metadata', bound('extra', () => form.extra, (v) => { form.extra = v; }, { area: true, rows: 4, placeholder: '{"limits": {"execution": {"max_turns": 4}}}' }))),
        formError,
        h('div', { class: 'submit-bar' }, submit));

    function showErrors(errors, source) {
        for (const el of errorEls.values()) el.hidden = true;
        for (const c of controls.values()) c.removeAttribute('aria-invalid');
        const unplaced = [];
        for (const e of errors) {
            const el = e.field ? errorEl(e.field) : null;
            if (el && el.isConnected) {
                el.textContent = el.hidden ? e.message : `${el.textContent}; ${e.message}`;
                el.dataset.source = source;
                el.hidden = false;
                if (controls.has(e.field)) controls.get(e.field).setAttribute('aria-invalid', 'true');
            } else unplaced.push(e.message);
        }
        formError.hidden = !unplaced.length && source !== 'server';
        formError.textContent = source === 'server' ? errors.map((e) => e.message).join('; ') : unplaced.join('; ');
        formError.dataset.source = source;
        const first = errors[0] && controls.get(errors[0].field);
        if (first) first.focus();
    }

    formEl.addEventListener('submit', async (e) => {
        e.preventDefault();
        if (st.uploading) return;
        const { request, errors } = experimentRequest(form);
        if (errors.length) {
            showErrors(errors, 'client');
            return;
        }
        showErrors([], 'client');
        submit.disabled = true;
        try {
            const res = await api.startExperiment(request);
            if (st.disposed) return;
            ctx.toast('Experiment started');
            ctx.navigate(`#/experiments/${res.experiment_id}`);
        } catch (err) {
            if (st.disposed) return;
            const detail = err instanceof ApiError ? err.detail : String(err);
            showErrors([{ field: experimentFieldForDetail(detail), message: detail }], 'server');
        } finally {
            submit.disabled = false;
        }
    });
    return { dispose() { st.disposed = true; } };
}

// ---------------------------------------------------------------- detail

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

// source: the verdicts the analysis is read from (evaluator, human, human_then_evaluator).
function mountDetail(root, ctx, id, source) {
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
                statusBadge(status, 'exp-status'),
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

