// The new-evaluation view: the form, its model catalogue (GET /v1/models), client-side checks
// (request.js) and submission. Server problems are placed beside the field their detail names.
// Owns the form element while mounted; mountForm() returns {dispose}. Values live in one plain
// object that request.js turns into the request.
import { api, ApiError } from './api.js';
import { h, replace } from './dom.js';
import { shortId } from './format.js';
import { defaultForm, formToRequest, requestToForm, fieldForDetail, FUNCTION_POLICY_PRESET, CONCURRENCY_MAX } from './request.js';

const LAST_MODEL_KEY = 'evald.lastModel';

const SOURCES = [
    ['default', 'Built-in default'],
    ['custom', 'Custom text'],
    ['none', 'None (no system prompt)'],
];

function plan(runs, order) {
    const out = [];
    const tFirst = order === 'balanced_treatment_first';
    for (let i = 1; i <= runs; i++) {
        const cFirst = (i % 2 === 1) !== tFirst;
        out.push(cFirst ? 'A' : 'B', cFirst ? 'B' : 'A');
    }
    return out;
}

export function mountForm(main, ctx, { from } = {}) {
    const v = defaultForm();
    try {
        const last = JSON.parse(localStorage.getItem(LAST_MODEL_KEY) || 'null');
        if (last && typeof last.model === 'string') {
            v.model = last.model;
            v.provider = last.provider || '';
        }
    } catch {
        /* no saved model */
    }
    const controls = {};
    const errors = {};
    const wraps = {};
    let disposed = false;
    let busy = false;

    const bind = (name, el) => {
        controls[name] = el;
        el.name = name;
        el.id = `f-${name}`;
        el.setAttribute('data-testid', `field-${name}`);
        el.setAttribute('aria-describedby', `err-${name}`);
        el.value = v[name];
        el.addEventListener('input', () => {
            v[name] = el.value;
            clearError(name);
            sync();
        });
        el.addEventListener('change', () => {
            v[name] = el.value;
            sync();
        });
        return el;
    };
    const input = (name, props = {}) => bind(name, h('input', { type: 'text', autocomplete: 'off', ...props }));
    const area = (name, props = {}) => bind(name, h('textarea', { rows: 4, spellcheck: 'false', ...props }));
    const select = (name, options, props = {}) =>
        bind(name, h('select', props, options.map(([value, label]) => h('option', { value }, label))));

    function radios(name, legend, options) {
        const fs = h('fieldset', { class: 'radios', id: `f-${name}`, 'data-testid': `field-${name}`, 'aria-describedby': `err-${name}` },
            h('legend', null, legend),
            options.map(([value, label, hint]) => h('label', { class: 'radio' },
                h('input', {
                    type: 'radio', name, value, checked: v[name] === value, 'data-testid': `${name}-${value}`,
                    onchange: (e) => {
                        if (!e.target.checked) return;
                        v[name] = value;
                        clearError(name);
                        sync();
                    },
                }),
                h('span', null, label, hint ? h('small', { class: 'muted' }, hint) : null))));
        controls[name] = fs;
        return fs;
    }

    function field(name, label, control, hint, extra) {
        const err = h('p', { class: 'field-error', id: `err-${name}`, 'data-testid': `field-error-${name}`, hidden: true, role: 'alert' });
        errors[name] = err;
        const w = h('div', { class: 'field', 'data-field': name },
            label ? h('label', { for: `f-${name}` }, label) : null,
            control,
            hint ? h('p', { class: 'hint' }, hint) : null,
            extra || null,
            err);
        wraps[name] = w;
        return w;
    }

    function showError(name, message, source) {
        const err = errors[name];
        if (!err) return false;
        err.textContent = message;
        err.hidden = false;
        err.dataset.source = source;
        const c = controls[name];
        if (c) c.setAttribute('aria-invalid', 'true');
        return true;
    }

    function clearError(name) {
        const err = errors[name];
        if (!err || err.hidden) return;
        err.hidden = true;
        err.textContent = '';
        const c = controls[name];
        if (c) c.removeAttribute('aria-invalid');
    }

    function clearErrors() {
        for (const name of Object.keys(errors)) clearError(name);
        formError.hidden = true;
        formError.textContent = '';
    }

    // Makes a field visible (opening the advanced section when needed) and focuses it.
    function reveal(name) {
        const w = wraps[name];
        if (!w) return;
        const det = w.closest('details');
        if (det) det.open = true;
        const c = controls[name];
        const target = c && c.tagName === 'FIELDSET' ? c.querySelector('input:checked') || c.querySelector('input') : c;
        if (target) target.focus();
        w.scrollIntoView({ block: 'center', behavior: 'instant' });
    }

    // ---- model catalogue
    const modelSelect = h('select', { id: 'f-model_pick', 'data-testid': 'model-select', 'aria-label': 'Model catalogue' },
        h('option', { value: '' }, 'Loading the model catalogue…'));
    const modelList = h('datalist', { id: 'model-options' });
    let catalogue = [];
    modelSelect.addEventListener('change', () => {
        const m = catalogue[Number(modelSelect.value)];
        if (!m) return;
        v.model = m.id;
        v.provider = m.provider || '';
        controls.model.value = v.model;
        controls.provider.value = v.provider;
        clearError('model');
        clearError('provider');
    });
    api.models().then((res) => {
        if (disposed) return;
        catalogue = (res && Array.isArray(res.models)) ? res.models : [];
        const byProvider = new Map();
        catalogue.forEach((m, i) => {
            const p = m.provider || 'other';
            if (!byProvider.has(p)) byProvider.set(p, []);
            byProvider.get(p).push([String(i), m.display_name && m.display_name !== m.id ? `${m.display_name} (${m.id})` : m.id]);
        });
        replace(modelSelect,
            h('option', { value: '' }, catalogue.length ? 'Pick from the catalogue…' : 'Catalogue is empty: type the model below'),
            [...byProvider].map(([p, opts]) => h('optgroup', { label: p }, opts.map(([value, label]) => h('option', { value }, label)))));
        replace(modelList, catalogue.map((m) => h('option', { value: m.id }, m.provider || '')));
        const i = catalogue.findIndex((m) => m.id === v.model && (m.provider || '') === v.provider);
        if (i >= 0) modelSelect.value = String(i);
    }).catch((e) => {
        if (disposed) return;
        replace(modelSelect, h('option', { value: '' }, 'Catalogue unavailable: type the model below'));
        modelSelect.title = e.message;
    });

    // ---- sections
    const dim = radios('dimension', 'What changes between A and B', [
        ['prompt', 'Prompt', ' — the user message differs; the system prompt is shared'],
        ['system_prompt', 'System prompt', ' — the system prompt differs; the user prompt is shared'],
    ]);

    const sharedSystem = h('div', { class: 'when-prompt' },
        field('system_shared_source', 'Shared system prompt', select('system_shared_source', SOURCES),
            'Used by both variants. Built-in default lets evald use its identity prompt; none sends no system prompt.'),
        field('system_shared', null, area('system_shared', { rows: 4, placeholder: 'System prompt shared by A and B', 'aria-label': 'Shared system prompt text' })));
    const sharedPrompt = h('div', { class: 'when-system' },
        field('prompt_shared', 'Shared prompt', area('prompt_shared', { rows: 5, placeholder: 'The user prompt both variants receive' }),
            'Sent to both variants; only the system prompt differs.'));

    const variant = (side) => {
        const upper = side.toUpperCase();
        const role = side === 'a' ? 'control' : 'treatment';
        return h('div', { class: `variant variant-${side}` },
            h('h3', null, h('span', { class: `chip chip-${side}` }, upper), side === 'a' ? ' Control' : ' Treatment'),
            field(`${side}_label`, 'Label', input(`${side}_label`, { placeholder: side === 'a' ? 'baseline' : 'candidate', maxlength: 200 })),
            h('div', { class: 'when-prompt' },
                field(`prompt_${side}`, `Prompt ${upper}`, area(`prompt_${side}`, { rows: 7, placeholder: `The ${role} prompt` }))),
            h('div', { class: 'when-system' },
                field(`system_${side}_source`, `System prompt ${upper}`, select(`system_${side}_source`, SOURCES)),
                field(`system_${side}`, null, area(`system_${side}`, { rows: 7, placeholder: `The ${role} system prompt`, 'aria-label': `System prompt ${upper} text` }))));
    };

    const strategy = field('strategy', 'System prompt strategy', select('strategy', [
        ['enrich', 'enrich — append to the built-in identity prompt'],
        ['override', 'override — replace the built-in identity prompt'],
    ]));

    const model = h('div', { class: 'field-group model-picker' },
        h('div', { class: 'field' }, h('label', { for: 'f-model_pick' }, 'Model'), modelSelect,
            h('p', { class: 'hint' }, 'Pick from the catalogue of the configured providers, or type any model and provider below.')),
        h('div', { class: 'row2' },
            field('model', 'Model id', input('model', { list: 'model-options', placeholder: 'e.g. gpt-4.1-mini', required: true })),
            field('provider', 'Provider', input('provider', { placeholder: 'e.g. openai (optional)' }))),
        modelList);

    const runsField = field('runs', 'Runs per variant', input('runs', { type: 'number', min: 1, step: 1, inputmode: 'numeric' }),
        'Each variant runs this many times; pairs alternate A→B and B→A.');
    const planView = h('p', { class: 'plan', 'data-testid': 'plan-preview', 'aria-live': 'polite' });
    const budget = h('div', { class: 'row2' },
        field('max_total_tokens', 'Max total tokens per run', input('max_total_tokens', { type: 'number', min: 1, step: 1, placeholder: 'no limit', inputmode: 'numeric' })),
        field('max_cost_usd', 'Max cost per run (USD)', input('max_cost_usd', { type: 'number', min: 0, step: 'any', placeholder: 'no limit', inputmode: 'decimal' })));

    const criteria = radios('criteria', 'How a run passes', [
        ['normalized', 'Normalized text match', ' — case, surrounding punctuation and whitespace ignored'],
        ['exact', 'Exact value', ' — byte-exact text or deep-equal JSON'],
        ['custom', 'Custom evaluator function', ' — any evaluator by id, with JSON arguments'],
        ['none', 'None', ' — no evaluator; runs are reported but not judged'],
    ]);
    const expected = h('div', { class: 'when-expected' },
        h('div', { class: 'when-exact' }, field('exact_kind', 'Expected value is', select('exact_kind', [['text', 'text'], ['json', 'JSON']]))),
        field('expected', 'Expected output', area('expected', { rows: 3, placeholder: 'What a correct answer says' })));
    const custom = h('div', { class: 'when-custom' },
        field('function_id', 'Evaluator function id', input('function_id', { placeholder: 'e.g. eval::assert::agent_review or a registered tool id' })),
        field('arguments', 'Arguments (JSON)', area('arguments', { rows: 3, placeholder: '{}' })));

    const num = (name, label, placeholder, hint) =>
        field(name, label, input(name, { type: 'number', min: 0, step: 1, placeholder, inputmode: 'numeric' }), hint);
    const policyPreset = h('button', {
        type: 'button', class: 'small ghost', 'data-testid': 'functions-preset',
        onclick: () => {
            v.functions = JSON.stringify(JSON.parse(FUNCTION_POLICY_PRESET), null, 2);
            controls.functions.value = v.functions;
            clearError('functions');
        },
    }, 'Use “allow all but approvals and configuration”');
    const advanced = h('details', { class: 'advanced', 'data-testid': 'advanced' },
        h('summary', null, 'Advanced options'),
        h('div', { class: 'grid3' },
            num('invocation_timeout_seconds', 'Invocation timeout (s)', '120'),
            num('scenario_timeout_seconds', 'Run timeout (s)', '600'),
            num('max_turns', 'Max turns', '1000'),
            num('max_output_tokens_per_call', 'Max output tokens per call', '8192'),
            num('max_function_call_errors', 'Max function-call errors', 'no limit', 'More fails the run’s criteria.'),
            num('max_error_spans', 'Max error spans', 'no limit'),
            field('mode', 'Mode', select('mode', [['', 'default'], ['agent', 'agent'], ['ask', 'ask (no functions)']])),
            field('thinking_level', 'Thinking level', select('thinking_level', [['', 'provider default'], ['minimal', 'minimal'], ['low', 'low'], ['medium', 'medium'], ['high', 'high'], ['xhigh', 'xhigh']])),
            field('execution_order', 'Order', select('execution_order', [['balanced_control_first', 'balanced, A first'], ['balanced_treatment_first', 'balanced, B first']])),
            field('concurrency', 'Concurrency', input('concurrency', { type: 'number', min: 1, max: CONCURRENCY_MAX, step: 1, placeholder: '1', inputmode: 'numeric' }),
                `Runs of this evaluation in flight at once (1–${CONCURRENCY_MAX}).`)),
        h('div', { class: 'row2' },
            field('functions', 'Function policy (JSON)', area('functions', { rows: 4, placeholder: '{"allow":[],"deny":[],"expose":"agent_trigger"} — omitted denies every call' }), null, policyPreset),
            field('output', 'Output contract (JSON)', area('output', { rows: 4, placeholder: '{"type":"text"} — or {"type":"json","schema":{…}}' })),
            field('provider_options', 'Provider options (JSON)', area('provider_options', { rows: 3, placeholder: '{"openai":{…}}' })),
            field('metadata', 'Metadata (JSON)', area('metadata', { rows: 3, placeholder: '{"fs_scope":{"root":"/workspace"}}' }))));

    const formError = h('div', { class: 'form-error', 'data-testid': 'form-error', role: 'alert', hidden: true });
    const submit = h('button', { type: 'submit', class: 'primary', 'data-testid': 'submit' }, 'Start evaluation');
    const heading = h('h1', null, 'New evaluation');

    const form = h('form', { class: 'eval-form', novalidate: true, 'data-testid': 'new-form', 'aria-labelledby': 'new-title' },
        h('section', { class: 'card' }, h('h2', null, '1 · Choose what changes'), dim,
            sharedSystem, sharedPrompt,
            h('div', { class: 'variants' }, variant('a'), variant('b')),
            strategy),
        h('section', { class: 'card' }, h('h2', null, '2 · Shared run settings'), model,
            h('div', { class: 'row2' }, runsField, h('div', { class: 'field' }, h('span', { class: 'label' }, 'Execution order'), planView)),
            budget),
        h('section', { class: 'card' }, h('h2', null, '3 · Success criteria'), criteria, expected, custom),
        h('section', { class: 'card' }, advanced),
        formError,
        h('div', { class: 'submit-bar' }, submit,
            h('button', { type: 'button', class: 'ghost', 'data-testid': 'reset', onclick: () => setValues(defaultForm()) }, 'Reset'),
            h('span', { class: 'muted small' }, 'Nothing runs until you start it; you can cancel at any time.')));
    heading.id = 'new-title';

    function sync() {
        const byPrompt = v.dimension !== 'system_prompt';
        for (const el of form.querySelectorAll('.when-prompt')) el.hidden = !byPrompt;
        for (const el of form.querySelectorAll('.when-system')) el.hidden = byPrompt;
        wraps.system_shared.hidden = v.system_shared_source !== 'custom';
        wraps.system_a.hidden = v.system_a_source !== 'custom';
        wraps.system_b.hidden = v.system_b_source !== 'custom';
        form.querySelector('.when-expected').hidden = v.criteria !== 'normalized' && v.criteria !== 'exact';
        form.querySelector('.when-exact').hidden = v.criteria !== 'exact';
        form.querySelector('.when-custom').hidden = v.criteria !== 'custom';
        const usesSystem = byPrompt ? v.system_shared_source !== 'none' : v.system_a_source !== 'none' || v.system_b_source !== 'none';
        strategy.hidden = !usesSystem;
        const runs = /^\d+$/.test(String(v.runs).trim()) ? Number(v.runs) : 0;
        if (runs >= 1 && runs <= 100) {
            const seq = plan(runs, v.execution_order);
            replace(planView,
                h('span', { class: 'seq' }, seq.map((x) => h('span', { class: `chip chip-${x.toLowerCase()}` }, x))),
                ` ${seq.length} runs`,
                runs === 1 ? h('span', { class: 'warn-text' }, ' · with 1 run per variant the order is not balanced') : null);
        } else {
            replace(planView, runs > 100 ? `${runs * 2} runs` : '');
        }
    }

    function setValues(values) {
        Object.assign(v, values);
        for (const [name, el] of Object.entries(controls)) {
            if (el.tagName === 'FIELDSET') {
                for (const r of el.querySelectorAll('input[type=radio]')) r.checked = r.value === v[name];
            } else {
                el.value = v[name] ?? '';
            }
        }
        clearErrors();
        sync();
    }

    form.addEventListener('submit', async (e) => {
        e.preventDefault();
        if (busy) return;
        clearErrors();
        const { request, errors: problems } = formToRequest(v);
        if (problems.length) {
            for (const p of problems) showError(p.field, p.message, 'client');
            reveal(problems[0].field);
            return;
        }
        busy = true;
        submit.disabled = true;
        submit.textContent = 'Starting…';
        try {
            const res = await api.start(request);
            try {
                localStorage.setItem(LAST_MODEL_KEY, JSON.stringify({ model: request.model.model, provider: request.model.provider || '' }));
            } catch {
                /* storage full or disabled */
            }
            ctx.toast('Evaluation started');
            ctx.history.load(true);
            ctx.navigate(`#/evaluations/${encodeURIComponent(res.evaluation_id)}`);
        } catch (err) {
            const detail = err instanceof ApiError ? err.detail : String(err);
            const name = err instanceof ApiError && err.status === 400 ? fieldForDetail(detail, v.dimension, v.criteria) : null;
            if (name && wraps[name] && showError(name, detail, 'server')) {
                reveal(name);
            } else {
                formError.textContent = `evald refused the evaluation: ${detail}`;
                formError.dataset.source = 'server';
                formError.hidden = false;
                formError.scrollIntoView({ block: 'center' });
            }
        } finally {
            busy = false;
            if (!disposed) {
                submit.disabled = false;
                submit.textContent = 'Start evaluation';
            }
        }
    });

    replace(main, h('div', { class: 'page form-page' }, heading,
        h('p', { class: 'lead muted' }, 'A/B-test one change to a prompt or a system prompt against the same model. Every other setting is shared by both variants.'),
        form));
    sync();

    if (from) {
        heading.textContent = `New evaluation from ${shortId(from)}`;
        api.get(from).then((res) => {
            if (!disposed && res && res.request) setValues(requestToForm(res.request));
        }).catch((e) => ctx.toast(`Could not load ${from}: ${e.message}`, 'error'));
    }

    return {
        dispose() {
            disposed = true;
        },
    };
}
