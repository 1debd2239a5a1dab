// The new-evaluation form as data: the default form values, formToRequest() which validates the
// values and builds an EvalStartRequestV1 (with the server's own messages where the server has
// one), requestToForm() for "edit as new", and fieldForDetail() which finds the form field a
// server problem detail names. Pure functions of their arguments; no DOM.

export const DEFAULT_RUNS = 3;

export const CONCURRENCY_MAX = 16;

// Every form field with its initial value. Values are strings as read from inputs.
export function defaultForm() {
    return {
        dimension: 'prompt',
        prompt_shared: '',
        prompt_a: '',
        prompt_b: '',
        system_shared_source: 'default',
        system_shared: '',
        system_a_source: 'custom',
        system_a: '',
        system_b_source: 'custom',
        system_b: '',
        a_label: 'baseline',
        b_label: 'candidate',
        strategy: 'enrich',
        model: '',
        provider: '',
        runs: String(DEFAULT_RUNS),
        max_total_tokens: '',
        max_cost_usd: '',
        criteria: 'normalized',
        expected: '',
        exact_kind: 'text',
        function_id: '',
        arguments: '',
        invocation_timeout_seconds: '',
        scenario_timeout_seconds: '',
        max_turns: '',
        max_output_tokens_per_call: '',
        max_function_call_errors: '',
        max_error_spans: '',
        mode: '',
        thinking_level: '',
        execution_order: 'balanced_control_first',
        functions: '',
        output: '',
        provider_options: '',
        metadata: '',
        concurrency: '',
    };
}

export const FUNCTION_POLICY_PRESET = '{"allow":["*"],"deny":["approval::*","configuration::*"],"expose":"agent_trigger"}';

const EXECUTION_LIMITS = ['invocation_timeout_seconds', 'scenario_timeout_seconds', 'max_turns', 'max_output_tokens_per_call'];

function blank(s) {
    return s === undefined || s === null || String(s).trim() === '';
}

function wholeNumber(s) {
    const t = String(s).trim();
    return /^\d+$/.test(t) ? Number(t) : NaN;
}

function parseJson(text) {
    try {
        return { ok: true, value: JSON.parse(text) };
    } catch (e) {
        return { ok: false, error: e.message.replace(/^JSON\.parse: /, '') };
    }
}

function isObject(v) {
    return v !== null && typeof v === 'object' && !Array.isArray(v);
}

// The system prompt a variant sends for a source: "none" → null, "default" → "" (built-in),
// "custom" → the text as typed.
function systemPromptOf(source, text) {
    if (source === 'none') return null;
    if (source === 'default') return '';
    return text;
}

// Validates the form values v and builds the request. Returns {request, errors} where errors is a
// list of {field, message}; request is null when there is any error. Messages use the server's
// wording where the server has the same rule.
export function formToRequest(v) {
    const errors = [];
    const fail = (field, message) => errors.push({ field, message });
    const byPrompt = v.dimension !== 'system_prompt';

    const model = String(v.model || '').trim();
    if (!model) fail('model', 'model.model cannot be empty');
    const provider = String(v.provider || '').trim();

    let control;
    let treatment;
    if (byPrompt) {
        if (blank(v.prompt_a)) fail('prompt_a', 'control.prompt cannot be empty');
        if (blank(v.prompt_b)) fail('prompt_b', 'treatment.prompt cannot be empty');
        else if (v.prompt_a === v.prompt_b) fail('prompt_b', 'prompt comparison requires different prompts');
        if (v.system_shared_source === 'custom' && blank(v.system_shared))
            fail('system_shared', 'enter the shared system prompt, or choose built-in or none');
        const sys = systemPromptOf(v.system_shared_source, v.system_shared);
        control = { prompt: v.prompt_a, system_prompt: sys };
        treatment = { prompt: v.prompt_b, system_prompt: sys };
    } else {
        if (blank(v.prompt_shared)) fail('prompt_shared', 'control.prompt cannot be empty');
        if (v.system_a_source === 'custom' && blank(v.system_a))
            fail('system_a', 'enter system prompt A, or choose built-in or none');
        if (v.system_b_source === 'custom' && blank(v.system_b))
            fail('system_b', 'enter system prompt B, or choose built-in or none');
        const a = systemPromptOf(v.system_a_source, v.system_a);
        const b = systemPromptOf(v.system_b_source, v.system_b);
        if (a === b && !errors.some((e) => e.field === 'system_a' || e.field === 'system_b'))
            fail('system_b', 'system_prompt comparison requires different system prompts');
        control = { prompt: v.prompt_shared, system_prompt: a };
        treatment = { prompt: v.prompt_shared, system_prompt: b };
    }
    const aLabel = String(v.a_label || '').trim();
    const bLabel = String(v.b_label || '').trim();
    if (aLabel) control = { label: aLabel, ...control };
    if (bLabel) treatment = { label: bLabel, ...treatment };

    const runs = wholeNumber(v.runs);
    if (!(runs >= 1)) fail('runs', 'runs must be a whole number of at least 1');

    const execution = {};
    for (const name of EXECUTION_LIMITS) {
        if (blank(v[name])) continue;
        const n = wholeNumber(v[name]);
        if (Number.isNaN(n)) fail(name, `limits.execution.${name} must be a whole number`);
        else if (n === 0) fail(name, `limits.execution.${name} must be greater than zero`);
        else execution[name] = n;
    }
    if (!blank(v.max_total_tokens)) {
        const n = wholeNumber(v.max_total_tokens);
        if (Number.isNaN(n)) fail('max_total_tokens', 'limits.execution.max_total_tokens must be a whole number');
        else if (n === 0) fail('max_total_tokens', 'limits.execution.max_total_tokens must be greater than zero when supplied');
        else execution.max_total_tokens = n;
    }
    if (!blank(v.max_cost_usd)) {
        const t = String(v.max_cost_usd).trim();
        const n = /^(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(t) ? Number(t) : NaN;
        if (!Number.isFinite(n) || n < 0)
            fail('max_cost_usd', 'limits.execution.max_cost_usd must be a finite non-negative number');
        else execution.max_cost_usd = n;
    }
    const evaluation = {};
    for (const name of ['max_function_call_errors', 'max_error_spans']) {
        if (blank(v[name])) continue;
        const n = wholeNumber(v[name]);
        if (Number.isNaN(n)) fail(name, `limits.evaluation.${name} must be a whole number`);
        else evaluation[name] = n;
    }

    let evaluator = null;
    if (v.criteria === 'normalized') {
        if (blank(v.expected))
            fail('expected', 'evaluator.arguments.expected cannot be empty; choose "none" for no success criteria');
        else evaluator = { function_id: 'eval::assert::normalized_text', arguments: { expected: v.expected } };
    } else if (v.criteria === 'exact') {
        if (v.exact_kind === 'json') {
            const p = blank(v.expected) ? { ok: false, error: 'empty' } : parseJson(v.expected);
            if (!p.ok) fail('expected', `evaluator.arguments.expected must be valid JSON (${p.error})`);
            else evaluator = { function_id: 'eval::assert::exact', arguments: { expected: p.value } };
        } else {
            evaluator = { function_id: 'eval::assert::exact', arguments: { expected: v.expected ?? '' } };
        }
    } else if (v.criteria === 'custom') {
        const fid = String(v.function_id || '').trim();
        if (!fid) fail('function_id', 'evaluator.function_id cannot be empty');
        let args = {};
        if (!blank(v.arguments)) {
            const p = parseJson(v.arguments);
            if (!p.ok) fail('arguments', `evaluator.arguments must be valid JSON (${p.error})`);
            else args = p.value;
        }
        if (fid) evaluator = { function_id: fid, arguments: args };
    }

    const modelConfig = { model };
    if (provider) modelConfig.provider = provider;
    modelConfig.system_prompt_strategy = v.strategy === 'override' ? 'override' : 'enrich';
    if (v.mode) modelConfig.mode = v.mode;
    if (v.thinking_level) modelConfig.thinking_level = v.thinking_level;

    const jsonField = (name, path, check, what) => {
        if (blank(v[name])) return undefined;
        const p = parseJson(v[name]);
        if (!p.ok) {
            fail(name, `${path} must be valid JSON (${p.error})`);
            return undefined;
        }
        if (check && !check(p.value)) {
            fail(name, `${path} must be ${what}`);
            return undefined;
        }
        return p.value;
    };
    const providerOptions = jsonField('provider_options', 'model.provider_options', isObject, 'a JSON object');
    if (providerOptions !== undefined) modelConfig.provider_options = providerOptions;
    const functions = jsonField('functions', 'functions', isObject, 'a JSON object');
    const output = jsonField('output', 'output',
        (o) => isObject(o) && (o.type === 'text' || o.type === 'json'),
        'an object whose type is "text" or "json"');
    const metadata = jsonField('metadata', 'metadata');

    let concurrency;
    if (!blank(v.concurrency)) {
        concurrency = wholeNumber(v.concurrency);
        if (!(concurrency >= 1 && concurrency <= CONCURRENCY_MAX))
            fail('concurrency', `concurrency must be between 1 and ${CONCURRENCY_MAX}`);
    }

    if (errors.length) return { request: null, errors };
    const request = {
        dimension: byPrompt ? 'prompt' : 'system_prompt',
        model: modelConfig,
        control,
        treatment,
        runs,
        execution_order: v.execution_order === 'balanced_treatment_first' ? 'balanced_treatment_first' : 'balanced_control_first',
        limits: { execution, evaluation },
    };
    if (evaluator) request.evaluator = evaluator;
    if (functions !== undefined) request.functions = functions;
    if (output !== undefined) request.output = output;
    if (metadata !== undefined) request.metadata = metadata;
    if (concurrency !== undefined) request.concurrency = concurrency;
    return { request, errors };
}

function sourceOf(systemPrompt) {
    if (systemPrompt === null || systemPrompt === undefined) return 'none';
    return systemPrompt === '' ? 'default' : 'custom';
}

const pretty = (v) => JSON.stringify(v, null, 2);

// Form values that reproduce a stored (normalized) request, for "edit as new".
export function requestToForm(req) {
    const v = defaultForm();
    if (!req || typeof req !== 'object') return v;
    const c = req.control || {};
    const t = req.treatment || {};
    v.dimension = req.dimension === 'system_prompt' ? 'system_prompt' : 'prompt';
    if (v.dimension === 'prompt') {
        v.prompt_a = c.prompt ?? '';
        v.prompt_b = t.prompt ?? '';
        v.system_shared_source = sourceOf(c.system_prompt);
        v.system_shared = c.system_prompt || '';
    } else {
        v.prompt_shared = c.prompt ?? '';
        v.system_a_source = sourceOf(c.system_prompt);
        v.system_a = c.system_prompt || '';
        v.system_b_source = sourceOf(t.system_prompt);
        v.system_b = t.system_prompt || '';
    }
    v.a_label = c.label ?? '';
    v.b_label = t.label ?? '';
    const m = req.model || {};
    v.model = m.model || '';
    v.provider = m.provider || '';
    v.strategy = m.system_prompt_strategy === 'override' ? 'override' : 'enrich';
    v.mode = m.mode || '';
    v.thinking_level = m.thinking_level || '';
    if (m.provider_options) v.provider_options = pretty(m.provider_options);
    v.runs = String(req.runs ?? DEFAULT_RUNS);
    v.execution_order = req.execution_order || 'balanced_control_first';
    const ex = (req.limits && req.limits.execution) || {};
    const ev = (req.limits && req.limits.evaluation) || {};
    for (const k of EXECUTION_LIMITS) if (ex[k] != null) v[k] = String(ex[k]);
    if (ex.max_total_tokens != null) v.max_total_tokens = String(ex.max_total_tokens);
    if (ex.max_cost_usd != null) v.max_cost_usd = String(ex.max_cost_usd);
    if (ev.max_function_call_errors != null) v.max_function_call_errors = String(ev.max_function_call_errors);
    if (ev.max_error_spans != null) v.max_error_spans = String(ev.max_error_spans);
    const e = req.evaluator;
    if (!e) {
        v.criteria = 'none';
    } else if (e.function_id === 'eval::assert::normalized_text' && typeof e.arguments?.expected === 'string') {
        v.criteria = 'normalized';
        v.expected = e.arguments.expected;
    } else if (e.function_id === 'eval::assert::exact' && e.arguments && 'expected' in e.arguments) {
        v.criteria = 'exact';
        if (typeof e.arguments.expected === 'string') {
            v.exact_kind = 'text';
            v.expected = e.arguments.expected;
        } else {
            v.exact_kind = 'json';
            v.expected = pretty(e.arguments.expected);
        }
    } else {
        v.criteria = 'custom';
        v.function_id = e.function_id || '';
        v.arguments = e.arguments === undefined ? '' : pretty(e.arguments);
    }
    if (req.functions) v.functions = pretty(req.functions);
    if (req.output && !(req.output.type === 'text' && Object.keys(req.output).length === 1)) v.output = pretty(req.output);
    if (req.metadata !== undefined && req.metadata !== null) v.metadata = pretty(req.metadata);
    if (req.concurrency != null) v.concurrency = String(req.concurrency);
    return v;
}

// The form field a server validation message is about, or null when it names none.
// dimension and criteria are the current form choices (the same request path maps to a
// different field for each dimension).
export function fieldForDetail(detail, dimension, criteria) {
    const d = String(detail || '');
    const byPrompt = dimension !== 'system_prompt';
    const rules = [
        [/^prompt comparison requires identical system prompts/, 'system_shared'],
        [/^prompt comparison requires different prompts/, 'prompt_b'],
        [/^system_prompt comparison requires identical prompts/, 'prompt_shared'],
        [/^system_prompt comparison requires different system prompts/, 'system_b'],
        [/variant labels?/, 'a_label'],
        [/\bcontrol\.label\b/, 'a_label'],
        [/\btreatment\.label\b/, 'b_label'],
        [/\bcontrol\.prompt\b/, byPrompt ? 'prompt_a' : 'prompt_shared'],
        [/\btreatment\.prompt\b/, byPrompt ? 'prompt_b' : 'prompt_shared'],
        [/\bcontrol\.system_prompt\b/, byPrompt ? 'system_shared' : 'system_a'],
        [/\btreatment\.system_prompt\b/, byPrompt ? 'system_shared' : 'system_b'],
        [/\bmodel\.provider_options\b/, 'provider_options'],
        [/\bmodel\.provider\b/, 'provider'],
        [/\bmodel\.system_prompt_strategy\b/, 'strategy'],
        [/\bmodel\.mode\b/, 'mode'],
        [/\bmodel\.thinking_level\b/, 'thinking_level'],
        [/\bmodel\.model\b|^model\b/, 'model'],
        [/\bevaluator\.function_id\b/, criteria === 'custom' ? 'function_id' : 'criteria'],
        [/\bevaluator\.arguments\b|\bevaluator arguments\b/, criteria === 'custom' ? 'arguments' : 'expected'],
        [/\bevaluator\b|\beval::assert::/, criteria === 'custom' ? 'function_id' : 'expected'],
        [/^runs\b|\bruns must\b/, 'runs'],
        [/\blimits\.execution\.(\w+)/, (m) => m[1]],
        [/\blimits\.evaluation\.(\w+)/, (m) => m[1]],
        [/^concurrency\b|\bconcurrency must\b/, 'concurrency'],
        [/^functions\b|\bfunctions\.(allow|deny|expose)\b/, 'functions'],
        [/^output\b|\boutput\.(type|schema)\b/, 'output'],
        [/^metadata\b/, 'metadata'],
        [/^execution_order\b/, 'execution_order'],
        [/^dimension\b/, 'dimension'],
    ];
    for (const [re, field] of rules) {
        const m = re.exec(d);
        if (m) return typeof field === 'function' ? field(m) : field;
    }
    return null;
}
