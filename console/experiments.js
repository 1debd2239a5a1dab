// The Experiments view: the list (#/experiments, newest first, paged) and the create form
// (#/experiments/new: arms — their prompts, or with the model dimension a shared prompt and a
// model with its options per arm —, the evaluator (built-ins picked by name, the trajectory
// evaluator's arguments from an editor), an optional pairwise judge, an agent's mocked tools and
// simulated user, repeats, analysis,
// stopping rule and budget, the data from a dataset or an uploaded CSV/JSONL file, and a plan
// of the start that writes nothing);
// the detail (#/experiments/<id>) is experiment.js, mounted from here. mountExperiments()
// returns {dispose}. All text is inserted as text nodes.
import { api, ApiError } from './api.js';
import {
    EVALUATORS, MAX_TREATMENTS, MIN_CASES_MAX, REASONING_EFFORTS, TRAJECTORY, TRAJECTORY_MATCHES, TRAJECTORY_MODES,
    defaultExperimentForm, defaultTreatment, experimentFieldForDetail, experimentRequest, experimentToForm, planFigures, uploadType,
} from './analysis.js';
import { SIMULATOR_DEFAULT_MAX_TURNS, SIMULATOR_DEFAULT_STOP, SIMULATOR_MAX_TURNS, hasSimulator } from './agents.js';
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
    function bound(name, get, set, { area = false, rows = 3, placeholder, type = 'text', list, step } = {}) {
        const el = h(area ? 'textarea' : 'input', {
            id: `exp-${name}`, 'data-testid': `exp-field-${name}`, placeholder, rows: area ? rows : undefined, type: area ? undefined : type, list,
            step: type === 'number' ? step : undefined, min: type === 'number' && step ? 0 : undefined,
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

    // The catalogue of GET /v1/models (filled below): picking a model sets its provider.
    const modelName = (m) => m.id || m.model || '';
    const catalogue = { models: [] };
    function providerOf(model) {
        const m = catalogue.models.find((x) => modelName(x) === model);
        return m && m.provider ? m.provider : '';
    }

    // An arm's prompts (prompt and system prompt dimensions) or its model (model dimension).
    const armFields = (arm, key, title, cls) => h('fieldset', { class: `variant ${cls}`, 'data-testid': `exp-arm-${key}` },
        h('legend', null, title),
        field(`${key}_label`, 'Label', bound(`${key}_label`, () => arm.label, (v) => { arm.label = v; })),
        form.dimension === 'model' ? armModelFields(arm, key) : [
            field(`${key}_prompt`, 'Prompt template', bound(`${key}_prompt`, () => arm.prompt, (v) => { arm.prompt = v; }, { area: true, placeholder: 'Question: {{question}}' })),
            field(`${key}_system_prompt`, 'System prompt', bound(`${key}_system_prompt`, () => arm.system_prompt, (v) => { arm.system_prompt = v; }, { area: true, rows: 2, placeholder: 'none' }))]);

    function armModelFields(arm, key) {
        const set = (name) => (v) => { arm[name] = v; };
        const modelInput = bound(`${key}_model`, () => arm.model ?? '', set('model'), { placeholder: 'e.g. gpt-4.1-mini', list: 'exp-models' });
        // A model of the catalogue (typed or picked from the list) brings its provider.
        modelInput.addEventListener('input', () => {
            const provider = providerOf(arm.model);
            if (!provider || provider === arm.provider) return;
            arm.provider = provider;
            controls.get(`${key}_provider`).value = provider;
            errorEl(`${key}_provider`).hidden = true;
        });
        const effort = h('select', {
            id: `exp-${key}_reasoning_effort`, 'data-testid': `exp-field-${key}_reasoning_effort`,
            onchange: (e) => { arm.reasoning_effort = e.target.value; effort.removeAttribute('aria-invalid'); errorEl(`${key}_reasoning_effort`).hidden = true; },
        }, h('option', { value: '', selected: !arm.reasoning_effort }, 'the model\'s default'),
        REASONING_EFFORTS.map((v) => h('option', { value: v, selected: arm.reasoning_effort === v }, v)));
        controls.set(`${key}_reasoning_effort`, effort);
        const num = (name, placeholder, step) => bound(`${key}_${name}`, () => arm[name] ?? '', set(name), { type: 'number', placeholder, step });
        return [
            h('div', { class: 'row2' },
                field(`${key}_model`, 'Model', modelInput),
                field(`${key}_provider`, 'Provider', bound(`${key}_provider`, () => arm.provider ?? '', set('provider'), { placeholder: 'e.g. openai' }))),
            h('div', { class: 'row2' },
                field(`${key}_temperature`, 'Temperature', num('temperature', 'default', 'any'), '0–2'),
                field(`${key}_top_p`, 'top_p', num('top_p', 'default', 'any'), 'greater than 0, at most 1')),
            h('div', { class: 'row2' },
                field(`${key}_reasoning_effort`, 'Reasoning effort', effort),
                field(`${key}_max_output_tokens`, 'Max output tokens', num('max_output_tokens', 'the limits\' cap', '1'), 'per call')),
        ];
    }

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
    api.models().then((res) => {
        if (st.disposed) return;
        const models = (res.models || []).filter((m) => modelName(m));
        catalogue.models = models;
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
        if (first && form.dimension === 'model' && !form.control.model) {
            form.control.model = modelName(first);
            form.control.provider = first.provider || '';
            renderArms();
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

    // ---- stopping rule, budget and plan
    const ruleSelect = h('select', {
        id: 'exp-stopping_rule', 'data-testid': 'exp-field-stopping_rule',
        onchange: (e) => { form.stopping_rule = e.target.value; errorEl('stopping_rule').hidden = true; syncRule(); },
    }, h('option', { value: 'fixed', selected: form.stopping_rule !== 'anytime' }, 'fixed: every case runs'),
    h('option', { value: 'anytime', selected: form.stopping_rule === 'anytime' }, 'anytime: stop once every treatment is decided'));
    controls.set('stopping_rule', ruleSelect);
    // A select bound to the form state.
    const choice = (name, options) => {
        const el = h('select', {
            id: `exp-${name}`, 'data-testid': `exp-field-${name}`,
            onchange: (e) => { form[name] = e.target.value; el.removeAttribute('aria-invalid'); errorEl(name).hidden = true; },
        }, options.map(([value, label]) => h('option', { value, selected: form[name] === value }, label)));
        controls.set(name, el);
        return el;
    };
    const numberInput = (name, placeholder, step = '1') => bound(name, () => form[name], (v) => { form[name] = v; }, { type: 'number', placeholder, step });
    // min_cases and seed belong to the anytime rule: shown with it only.
    const anytimeFields = [
        field('min_cases', 'Fewest cases before a stop', numberInput('min_cases', '10'), `2–${MIN_CASES_MAX.toLocaleString('en-US')}; no verdict rests on fewer cases.`),
        field('seed', 'Seed of the case order', numberInput('seed', 'from the experiment id'), 'Cases run in a random order drawn from it; the same seed, the same order.'),
    ];
    function syncRule() {
        for (const el of anytimeFields) el.hidden = form.stopping_rule !== 'anytime';
    }
    syncRule();

    const planButton = h('button', { type: 'button', 'data-testid': 'exp-plan', onclick: () => plan() }, 'Plan');
    const planStatus = h('span', { class: 'muted small', 'data-testid': 'exp-plan-status', role: 'status' });
    const planError = h('p', { class: 'form-error', 'data-testid': 'exp-plan-error', role: 'alert', hidden: true });
    const planResult = h('div', { class: 'plan-result', 'data-testid': 'exp-plan-result', hidden: true, 'aria-live': 'polite' });
    let planned = false;
    // A plan read for another form is marked stale at the first change.
    formEl.addEventListener('input', markStale);
    formEl.addEventListener('change', markStale);
    function markStale() {
        if (!planned || planResult.classList.contains('stale')) return;
        planResult.classList.add('stale');
        planResult.dataset.stale = 'true';
        planStatus.textContent = 'The form changed since this plan: plan again.';
    }

    function showPlan(res, request) {
        planned = true;
        const pw = res.power || {};
        const cost = res.cost_usd && typeof res.cost_usd === 'object' ? res.cost_usd : null;
        planResult.classList.remove('stale');
        Object.assign(planResult.dataset, {
            stale: 'false', runs: res.runs ?? '', callsMin: (res.calls || {}).min ?? '', inputEstimate: (res.tokens || {}).input_estimate ?? '',
            outputMax: (res.tokens || {}).output_max ?? '', costEstimate: cost ? cost.estimate : '', costMax: cost ? cost.max : '',
            casesNeeded: pw.cases_needed ?? '', runsNeeded: pw.runs_needed ?? '',
        });
        // The simulated user's figures, only with one.
        const sim = res.simulator && typeof res.simulator === 'object' ? res.simulator : null;
        const simData = sim ? {
            simulatorCallsMax: sim.calls_max ?? '', simulatorAnswersMax: sim.agent_answers_max ?? '', simulatorOutputMax: sim.output_tokens_max ?? '',
            simulatorCostMax: sim.cost_usd && typeof sim.cost_usd === 'object' ? sim.cost_usd.output_max : '',
        } : { simulatorCallsMax: null, simulatorAnswersMax: null, simulatorOutputMax: null, simulatorCostMax: null };
        for (const [k, v] of Object.entries(simData)) {
            if (v === null) delete planResult.dataset[k];
            else planResult.dataset[k] = v;
        }
        replace(planResult,
            h('h3', null, 'What the start would do'),
            h('dl', { class: 'kv' }, planFigures(res, form.stopping_rule, request).map((f) => [
                h('dt', null, f.label), h('dd', { 'data-testid': `exp-plan-${f.key}` }, f.text)])));
        planResult.hidden = false;
    }

    async function plan() {
        if (st.uploading || st.planning) return;
        planError.hidden = true;
        const { request, errors } = experimentRequest(form);
        if (errors.length) {
            showErrors(errors, 'client');
            planStatus.textContent = 'Fix the fields marked first.';
            return;
        }
        showErrors([], 'client');
        st.planning = true;
        planButton.disabled = true;
        planStatus.textContent = 'Planning…';
        try {
            const res = await api.planExperiment(request);
            if (st.disposed) return;
            showPlan(res, request);
            planStatus.textContent = 'Nothing was written; start it below.';
        } catch (err) {
            if (st.disposed) return;
            const detail = err instanceof ApiError ? err.detail : String(err);
            planStatus.textContent = '';
            planError.textContent = detail;
            planError.dataset.source = 'server';
            planError.hidden = false;
            const field = fieldFor(detail);
            if (field) showErrors([{ field, message: detail }], 'server', { summary: false });
        } finally {
            st.planning = false;
            planButton.disabled = false;
        }
    }

    const formError = h('p', { class: 'form-error', 'data-testid': 'exp-form-error', role: 'alert', hidden: true });
    const submit = h('button', { type: 'submit', class: 'primary', 'data-testid': 'exp-submit' }, 'Start experiment');
    const fieldFor = (detail) => experimentFieldForDetail(detail, { dimension: form.dimension, evaluator: form.evaluator_function_id.trim(), instructions: form.simulator_instructions });

    // ---- an agent's mocked tools (JSON) and simulated user (model, provider, instructions,
    // max turns, stop), folded; open when the request had either.
    function agentSection() {
        const text = (name, opts) => bound(name, () => form[name], (v) => { form[name] = v; }, opts);
        const simModel = text('simulator_model', { placeholder: 'e.g. gpt-4.1-mini', list: 'exp-models' });
        // A model of the catalogue brings its provider, as an arm's does.
        simModel.addEventListener('input', () => {
            const provider = providerOf(form.simulator_model);
            if (!provider || provider === form.simulator_provider) return;
            form.simulator_provider = provider;
            controls.get('simulator_provider').value = provider;
        });
        return h('details', { class: 'advanced agent-section', 'data-testid': 'exp-agent-fields', open: Boolean(form.tools.trim() || hasSimulator(form)) },
            h('summary', null, 'Agent (optional): mocked tools and a simulated user'),
            field('tools', 'Mocked tools (JSON array)', text('tools', {
                area: true, rows: 4, placeholder: '[{"name": "search", "description": "Rooms free in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]',
            }), 'Each {name, description, parameters (a JSON Schema)} is offered to the model; a case answers its calls in tool_results ({"search": {…}}, a list answered call by call, or [{"when": {…}, "result": …}]). They never reach the network.'),
            h('fieldset', { class: 'simulator', 'data-testid': 'exp-simulator' },
                h('legend', null, 'Simulated user'),
                h('p', { class: 'hint' }, 'After each answer of the agent a model plays the user, with these instructions (a template of the case: the persona and the goal); the conversation ends when its reply holds the stop token or after max turns user turns (the prompt is the first). Its calls, tokens and cost are counted apart from the arms\'.'),
                h('div', { class: 'row2' },
                    field('simulator_model', 'Model', simModel),
                    field('simulator_provider', 'Provider', text('simulator_provider', { placeholder: 'inferred from the model when empty' }))),
                field('simulator_instructions', 'Instructions', text('simulator_instructions', { area: true, rows: 2, placeholder: 'You are {{name}}, a traveller who wants one night in Oslo. Say [[DONE]] once it is booked.' })),
                h('div', { class: 'row2' },
                    field('simulator_max_turns', 'Max user turns', numberInput('simulator_max_turns', String(SIMULATOR_DEFAULT_MAX_TURNS)), `1–${SIMULATOR_MAX_TURNS}; empty: ${SIMULATOR_DEFAULT_MAX_TURNS}.`),
                    field('simulator_stop', 'Stop token', text('simulator_stop', { placeholder: SIMULATOR_DEFAULT_STOP }), `Empty: ${SIMULATOR_DEFAULT_STOP}. A reply holding it is neither sent to the agent nor kept.`))));
    }
    const dimension = h('select', {
        id: 'exp-dimension', 'data-testid': 'exp-field-dimension', onchange: (e) => { form.dimension = e.target.value; syncDimension(); },
    }, h('option', { value: 'prompt', selected: form.dimension === 'prompt' }, 'prompt (same system prompt, different prompts)'),
    h('option', { value: 'system_prompt', selected: form.dimension === 'system_prompt' }, 'system prompt (same prompt, different system prompts)'),
    h('option', { value: 'model', selected: form.dimension === 'model' }, 'model (same prompts, a model and its options per arm)'));
    // One model for every arm (prompt, system prompt), or shared texts (model).
    const sharedModel = h('div', { class: 'row2', 'data-testid': 'exp-shared-model' },
        field('model', 'Model', [bound('model', () => form.model, (v) => { form.model = v; }, { placeholder: 'e.g. gpt-4.1-mini', list: 'exp-models' }), modelList]),
        field('provider', 'Provider', bound('provider', () => form.provider, (v) => { form.provider = v; }, { placeholder: 'inferred from the model when empty' })));
    const sharedTexts = h('div', { class: 'row2', 'data-testid': 'exp-shared-texts' },
        field('prompt', 'Prompt template (every arm)', bound('prompt', () => form.prompt, (v) => { form.prompt = v; }, { area: true, placeholder: 'Question: {{question}}' }),
            'Sent after the case\'s messages, if it has any; empty: the case\'s conversation is sent as it is.'),
        field('system_prompt', 'System prompt (every arm)', bound('system_prompt', () => form.system_prompt, (v) => { form.system_prompt = v; }, { area: true, rows: 2, placeholder: 'none' })));
    function syncDimension() {
        const byModel = form.dimension === 'model';
        // The shared model is where the control's starts.
        if (byModel && !form.control.model && form.model.trim()) {
            form.control.model = form.model.trim();
            form.control.provider = form.provider.trim() || providerOf(form.control.model);
        }
        sharedModel.hidden = byModel;
        sharedTexts.hidden = !byModel;
        renderArms();
    }

    // ---- the evaluator: a built-in picked by name or any function id; the trajectory
    // evaluator's arguments from an editor, the others' as JSON.
    const evaluatorPick = h('select', {
        id: 'exp-evaluator_pick', 'data-testid': 'exp-field-evaluator_pick', 'aria-label': 'Evaluator',
        onchange: (e) => {
            const v = e.target.value;
            if (v) {
                form.evaluator_function_id = v;
                controls.get('evaluator_function_id').value = v;
                errorEl('evaluator_function_id').hidden = true;
            }
            syncEvaluator();
        },
    });
    const trajectoryBox = h('div', { class: 'trajectory-editor', 'data-testid': 'exp-trajectory' });
    const argumentsField = field('evaluator_arguments', 'Arguments (JSON)', bound('evaluator_arguments', () => form.evaluator_arguments, (v) => { form.evaluator_arguments = v; }, { area: true, rows: 2 }));
    function syncEvaluator() {
        const fid = form.evaluator_function_id.trim();
        const known = EVALUATORS.some(([id]) => id === fid);
        replace(evaluatorPick, EVALUATORS.map(([id, label]) => h('option', { value: id, selected: id === fid }, label)),
            h('option', { value: '', selected: !known }, fid ? 'another function: its id below' : 'none (a judge decides)'));
        const trajectory = fid === TRAJECTORY;
        argumentsField.hidden = trajectory;
        trajectoryBox.hidden = !trajectory;
        if (trajectory) renderTrajectory();
    }
    function renderTrajectory() {
        const pick = (name, values, label) => {
            const el = h('select', {
                id: `exp-${name}`, 'data-testid': `exp-field-${name}`,
                onchange: (e) => { form[name] = e.target.value; errorEl(name).hidden = true; el.removeAttribute('aria-invalid'); if (name === 'trajectory_from') renderTrajectory(); },
            }, values.map(([v, text]) => h('option', { value: v, selected: form[name] === v }, text)));
            controls.set(name, el);
            return field(name, label, el);
        };
        const calls = form.trajectory_calls;
        replace(trajectoryBox,
            h('div', { class: 'grid3' },
                pick('trajectory_mode', TRAJECTORY_MODES.map((m) => [m, {
                    strict: 'strict: these calls, in this order', unordered: 'unordered: these calls, in any order',
                    subset: 'subset: no call outside the list', superset: 'superset: every listed call made',
                }[m]]), 'Mode'),
                pick('trajectory_match', TRAJECTORY_MATCHES.map((m) => [m, {
                    exact: 'exact: equal arguments', subset: 'subset: the listed arguments among the call\'s', ignore: 'ignore: names only',
                }[m]]), 'Arguments match'),
                pick('trajectory_from', [['list', 'the calls listed here'], ['case', 'the case\'s expected value ({{expected}})']], 'Expected calls')),
            form.trajectory_from === 'case' ? h('p', { class: 'hint' }, 'Each case\'s expected value is its list of calls: [{"name": "search", "arguments": {…}}, …].') : [
                h('ol', { class: 'trajectory-calls', 'data-testid': 'exp-trajectory-calls' }, calls.map((c, i) => h('li', { class: 'row2' },
                    field(`trajectory_call_${i}_name`, `Call ${i + 1}: function`, bound(`trajectory_call_${i}_name`, () => c.name, (v) => { c.name = v; }, { placeholder: 'e.g. search' })),
                    h('div', null,
                        field(`trajectory_call_${i}_arguments`, 'Arguments (JSON object; empty: any)', bound(`trajectory_call_${i}_arguments`, () => c.arguments, (v) => { c.arguments = v; }, { placeholder: '{"q": "{{question}}"}' })),
                        h('button', {
                            type: 'button', class: 'small ghost', 'data-testid': `exp-trajectory-remove-${i}`,
                            onclick: () => { calls.splice(i, 1); renderTrajectory(); },
                        }, `Remove call ${i + 1}`))))),
                h('button', {
                    type: 'button', class: 'small', 'data-testid': 'exp-trajectory-add',
                    onclick: () => { calls.push({ name: '', arguments: '' }); renderTrajectory(); },
                }, 'Add an expected call'),
                calls.length ? null : h('p', { class: 'hint' }, 'No call listed: strict passes a run that calls nothing.')],
            errorEl('trajectory_calls'));
    }
    const functionInput = bound('evaluator_function_id', () => form.evaluator_function_id, (v) => { form.evaluator_function_id = v; });
    functionInput.addEventListener('input', syncEvaluator);

    replace(formEl,
        h('div', { class: 'row2' },
            field('name', 'Name', bound('name', () => form.name, (v) => { form.name = v; }, { placeholder: 'e.g. qa-brevity' })),
            field('dimension', 'What differs', dimension)),
        sharedModel,
        sharedTexts,
        h('h2', null, 'Arms'),
        armsBox,
        h('h2', null, 'Data'),
        h('div', { class: 'row2' },
            field('dataset', 'Dataset', datasetSelect),
            h('div', { class: 'field' }, h('label', { for: 'exp-file' }, 'or upload a CSV or JSONL file'), fileInput,
                h('p', { class: 'hint' }, 'CSV: a header row; column id and column expected are optional, every other column is a variable.'), uploadStatus)),
        h('h2', null, 'Evaluation'),
        h('div', { class: 'row2' },
            field('evaluator_function_id', 'Evaluator function', [evaluatorPick, functionInput],
                'Decides whether a run passed: pick a built-in, or type any evaluator\'s function id.'),
            argumentsField),
        trajectoryBox,
        h('details', { class: 'advanced', 'data-testid': 'exp-judge-fields', open: Boolean(form.judge_model || form.judge_task) },
            h('summary', null, 'Pairwise judge (optional): a model that compares the control\'s and a treatment\'s outputs'),
            h('p', { class: 'hint' }, 'Every pair of outputs (case, repeat, treatment) is judged in both orders, so that a judge that favours a slot shows. With a judge the evaluator may be left empty.'),
            h('div', { class: 'row2' },
                field('judge_model', 'Judge model', bound('judge_model', () => form.judge_model, (v) => { form.judge_model = v; }, { placeholder: 'e.g. gpt-4.1-mini', list: 'exp-models' })),
                field('judge_provider', 'Judge provider', bound('judge_provider', () => form.judge_provider, (v) => { form.judge_provider = v; }, { placeholder: 'inferred from the model when empty' }))),
            h('div', { class: 'row2' },
                field('judge_task', 'Task shown to the judge', bound('judge_task', () => form.judge_task, (v) => { form.judge_task = v; }, { area: true, rows: 2, placeholder: '{{question}}' }), 'What was asked, a template of the case.'),
                field('judge_instructions', 'Instructions (rubric)', bound('judge_instructions', () => form.judge_instructions, (v) => { form.judge_instructions = v; }, { area: true, rows: 2, placeholder: 'Prefer the answer that is correct and concise.' }))),
            h('div', { class: 'grid3' },
                field('judge_orders', 'Orders', choice('judge_orders', [['both', 'both: each pair twice, swapped'], ['one', 'one: alternating by repeat']])),
                field('judge_max_tokens', 'Max tokens per judge call', numberInput('judge_max_tokens', '512')),
                field('verdict_by', 'Verdict by', choice('verdict_by', [['', 'default (the evaluator when there is one)'], ['evaluator', 'the evaluator'], ['judge', 'the judge']])))),
        agentSection(),
        h('div', { class: 'grid3' },
            field('repeats', 'Repeats per arm and case', bound('repeats', () => form.repeats, (v) => { form.repeats = v; }, { type: 'number' })),
            field('concurrency', 'Cases at once', bound('concurrency', () => form.concurrency, (v) => { form.concurrency = v; }, { type: 'number' })),
            h('div')),
        h('h2', null, 'Analysis'),
        h('div', { class: 'grid3' },
            field('alpha', 'α (family-wise)', bound('alpha', () => form.alpha, (v) => { form.alpha = v; })),
            field('min_effect', 'Smallest effect that matters', bound('min_effect', () => form.min_effect, (v) => { form.min_effect = v; }), 'A pass-rate difference (0.05 = 5 pp); 0: no equivalence verdict.'),
            field('cluster_by', 'Cluster by variable', bound('cluster_by', () => form.cluster_by, (v) => { form.cluster_by = v; }, { placeholder: 'none' }))),
        h('h2', null, 'Stopping and budget'),
        h('div', { class: 'grid3' },
            field('stopping_rule', 'Stopping rule', ruleSelect, 'anytime: cases in a random order, an anytime-valid verdict, no more cases once every treatment is decided.'),
            anytimeFields),
        h('div', { class: 'grid3' },
            field('max_calls', 'Max provider calls', numberInput('max_calls', 'no cap'), 'Every call of the arms and of any judge.'),
            field('max_tokens', 'Max tokens', numberInput('max_tokens', 'no cap'), 'Input and output tokens together.'),
            field('max_cost_usd', 'Max cost (USD)', numberInput('max_cost_usd', 'no cap', 'any'), 'Needs a price for the model.')),
        h('p', { class: 'hint' }, 'Within a budget a case starts only while the spend so far and what the cases in flight and the case itself may spend fit every cap; then the experiment stops with the cases left skipped.'),
        h('h2', null, 'Plan'),
        h('p', { class: 'hint' }, 'What the start would run and cost, and how many cases it needs to find the effect: the form is checked as a start would be, and nothing is written.'),
        h('div', { class: 'grid3' },
            field('plan_effect', 'Effect to detect', numberInput('plan_effect', 'min_effect', 'any'), 'A pass-rate difference, 0.1 = 10 pp.'),
            field('plan_sd', 'S.d. of the per-case difference', numberInput('plan_sd', 'from a pilot', 'any')),
            field('plan_pilot', 'Pilot experiment', bound('plan_pilot', () => form.plan_pilot, (v) => { form.plan_pilot = v; }, { placeholder: 'exp_… (optional)' }), 'A finished experiment whose per-case s.d. (and mean output) the plan uses.')),
        h('div', { class: 'plan-bar' }, planButton, planStatus),
        planError,
        planResult,
        h('details', { class: 'advanced' }, h('summary', null, 'Advanced: limits, function policy, output contract, metadata'),
            field('extra', 'JSON object with any of limits, functions, output, metadata', bound('extra', () => form.extra, (v) => { form.extra = v; }, { area: true, rows: 4, placeholder: '{"limits": {"execution": {"max_turns": 4}}}' }))),
        formError,
        h('div', { class: 'submit-bar' }, submit));
    syncDimension();
    syncEvaluator();

    // errors: [{field, message}] shown at their fields; the rest (all of a server's with
    // summary) above the submit button.
    function showErrors(errors, source, { summary = true } = {}) {
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
        formError.hidden = summary ? !unplaced.length && source !== 'server' : true;
        formError.textContent = source === 'server' ? errors.map((e) => e.message).join('; ') : unplaced.join('; ');
        formError.dataset.source = source;
        const first = errors[0] && controls.get(errors[0].field);
        if (first) {
            const closed = first.closest('details:not([open])');
            if (closed) closed.open = true;
            first.focus();
        }
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
            showErrors([{ field: fieldFor(detail), message: detail }], 'server');
        } finally {
            submit.disabled = false;
        }
    });
    return { dispose() { st.disposed = true; } };
}
