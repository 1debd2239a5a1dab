// The Experiments view: the list (#/experiments, newest first, paged) and the create form
// (#/experiments/new: arms, evaluator, repeats, analysis, and the data from a dataset or an
// uploaded CSV/JSONL file); the detail (#/experiments/<id>) is experiment.js, mounted from here.
// mountExperiments() returns {dispose}. All text is inserted as text nodes.
import { api, ApiError } from './api.js';
import {
    MAX_TREATMENTS, defaultExperimentForm, defaultTreatment, experimentFieldForDetail, experimentRequest, experimentToForm, uploadType,
} from './analysis.js';
import { h, replace } from './dom.js';
import { mountExperiment } from './experiment.js';
import { fmtAgo, fmtDate, fmtInt } from './format.js';

// root: <main>; ctx: app context; r: {page: 'list'|'new'|'detail', id}. Returns {dispose}.
export function mountExperiments(root, ctx, r) {
    if (r.page === 'new') return mountNew(root, ctx, r.from);
    if (r.page === 'detail') return mountExperiment(root, ctx, r.id, r.source);
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
