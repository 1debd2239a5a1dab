// Pure helpers of the Experiments view: the create form → POST /v1/experiments body with the
// client checks (the model dimension's variants, the trajectory evaluator's arguments, and the
// mocked tools and simulated user of agents.js included), the server detail → form field mapping, an arm's model and its options, the upload content type of a file,
// the verdict banner texts of a comparison, the matrix cell of an arm on a case, the layout
// of the forest plot, a word-level text diff and the arms of an experiment; for sequential
// experiments the stop line, the spend against a budget and the figures of a plan. No DOM, no
// state, no I/O.
import { agentFieldForDetail, agentToForm, defaultAgentFields, planAgentFigures, simulatorPart, toolsPart } from './agents.js';
import { DASH, fmtInt, fmtUsd } from './format.js';

export const MAX_TREATMENTS = 4;
const LETTERS = 'ABCDE';

// An arm of the form: its label, its texts (prompt and system prompt dimensions) and its model
// (model dimension: model, provider and the options, '' when not given).
export function defaultArm(label = '') {
    return { label, prompt: '', system_prompt: '', model: '', provider: '', temperature: '', top_p: '', reasoning_effort: '', max_output_tokens: '' };
}

export function defaultTreatment(i = 0) {
    return defaultArm(LETTERS[i + 1] || '');
}

// The built-in evaluators the form offers by name; any other function id can be typed.
export const TRAJECTORY = 'eval::assert::trajectory';
export const EVALUATORS = [
    ['eval::assert::normalized_text', 'normalized text: the output equals the expected text, case and spaces aside'],
    ['eval::assert::exact', 'exact: the output equals the expected value'],
    [TRAJECTORY, 'trajectory: the function calls the run made against the expected calls'],
];
export const TRAJECTORY_MODES = ['strict', 'unordered', 'subset', 'superset'];
export const TRAJECTORY_MATCHES = ['exact', 'subset', 'ignore'];
export const REASONING_EFFORTS = ['minimal', 'low', 'medium', 'high', 'xhigh'];
// The options of a model variant, in the order the form shows them.
export const MODEL_OPTIONS = ['temperature', 'top_p', 'reasoning_effort', 'max_output_tokens'];

export function defaultExperimentForm() {
    return {
        name: '',
        dimension: 'prompt',
        model: '',
        provider: '',
        control: defaultArm('A'),
        treatments: [defaultTreatment(0)],
        // dimension model: the shared texts (each arm has its model)
        prompt: '',
        system_prompt: '',
        evaluator_function_id: 'eval::assert::normalized_text',
        evaluator_arguments: '{"expected": "{{expected}}"}',
        // eval::assert::trajectory: its arguments from the editor (expected calls listed here,
        // or the case's expected value)
        trajectory_mode: 'strict',
        trajectory_match: 'exact',
        trajectory_from: 'list',
        trajectory_calls: [{ name: '', arguments: '' }],
        // an agent's mocked tools (JSON text) and simulated user (agents.js)
        ...defaultAgentFields(),
        repeats: '3',
        concurrency: '4',
        alpha: '0.05',
        min_effect: '0',
        cluster_by: '',
        dataset_id: '',
        extra: '',
        stopping_rule: 'fixed',
        min_cases: '',
        seed: '',
        max_calls: '',
        max_tokens: '',
        max_cost_usd: '',
        plan_effect: '',
        plan_sd: '',
        plan_pilot: '',
        // a pairwise judge (shared/spec/judges.md): sent when judge_model or judge_task is filled
        judge_model: '',
        judge_provider: '',
        judge_task: '',
        judge_instructions: '',
        judge_orders: 'both',
        judge_max_tokens: '',
        verdict_by: '',
    };
}

export const JUDGE_MAX_TOKENS = 100000;

export const MIN_CASES_MAX = 100000;

function wholeNumber(text) {
    const s = String(text).trim();
    return /^[0-9]+$/.test(s) ? Number(s) : null;
}

function decimal(text) {
    const s = String(text).trim();
    if (!/^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$/.test(s)) return null;
    return Number(s);
}

function jsonObject(text) {
    try {
        const v = JSON.parse(text);
        return v && typeof v === 'object' && !Array.isArray(v) ? v : null;
    } catch {
        return null;
    }
}

// form: as defaultExperimentForm(). Returns {request, errors: [{field, message}]}; field names
// are the form's: name, model, control_label, control_prompt, treatment_<i>_label|prompt,
// evaluator_function_id, evaluator_arguments, repeats, concurrency, alpha, min_effect,
// cluster_by, dataset, extra, stopping_rule, min_cases, seed, max_calls, max_tokens,
// max_cost_usd, plan_effect, plan_sd, plan_pilot, judge_model, judge_provider, judge_task,
// judge_instructions, judge_orders, judge_max_tokens, verdict_by, tools, simulator_model,
// simulator_provider, simulator_instructions, simulator_max_turns, simulator_stop. The request is null when
// there are errors. The evaluator may be left empty when there is a judge.
// stopping is sent with the anytime rule only (min_cases and seed apply to it); budget and
// plan only when one of their fields is filled in.
// With dimension model the request has the shared prompt and system_prompt and no model, and
// each variant is {label?, model: {model, provider, options?}}: options only those filled in,
// checked with the server's messages; variants must differ in model, provider or options.
export function experimentRequest(form) {
    const errors = [];
    const fail = (field, message) => errors.push({ field, message });
    const byModel = form.dimension === 'model';
    const model = String(form.model ?? '').trim();
    if (!byModel && !model) fail('model', 'model.model cannot be empty');
    // A prompt may be "" (the case's conversation is sent as it is), not blank.
    const blankText = (t) => t !== '' && !t.trim();
    const arm = byModel ? (v, field, where) => modelVariant(v, field, where, fail) : (v, field, where) => {
        if (blankText(v.prompt)) fail(`${field}_prompt`, `${where}.prompt cannot be empty`);
        const out = { prompt: v.prompt, system_prompt: v.system_prompt === '' ? null : v.system_prompt };
        if (v.label.trim()) out.label = v.label.trim();
        return out;
    };
    const control = arm(form.control, 'control', 'control');
    const treatments = form.treatments.map((t, i) => arm(t, `treatment_${i}`, `treatments[${i}]`));
    if (treatments.length < 1 || treatments.length > MAX_TREATMENTS) {
        fail('treatments', `treatments must contain between 1 and ${MAX_TREATMENTS} variants`);
    }
    // Labels default to A, B, C… in arm order on the server: check the effective ones.
    const labels = [control, ...treatments].map((a, i) => a.label || LETTERS[i]);
    const seen = new Map();
    labels.forEach((l, i) => {
        if (seen.has(l)) fail(i === 0 ? 'control_label' : `treatment_${i - 1}_label`, 'variant labels must be unique');
        seen.set(l, i);
    });
    if (byModel) sameModels([control, ...treatments], fail);
    const request = { dimension: byModel ? 'model' : form.dimension === 'system_prompt' ? 'system_prompt' : 'prompt' };
    if (form.name.trim()) request.name = form.name.trim();
    if (byModel) {
        const prompt = String(form.prompt ?? '');
        if (blankText(prompt)) fail('prompt', 'prompt cannot be empty');
        request.prompt = prompt;
        request.system_prompt = String(form.system_prompt ?? '') === '' ? null : form.system_prompt;
    } else {
        request.model = { model };
        if (String(form.provider ?? '').trim()) request.model.provider = form.provider.trim();
    }
    request.control = control;
    request.treatments = treatments;
    if (!form.dataset_id) fail('dataset', 'choose a dataset or upload a file');
    else request.dataset_id = form.dataset_id;
    const judge = judgePart(form, fail);
    const fid = form.evaluator_function_id.trim();
    if (!fid && !judge) fail('evaluator_function_id', 'an experiment needs an evaluator or a judge');
    if (fid === TRAJECTORY) request.evaluator = { function_id: fid, arguments: trajectoryArguments(form, fail) };
    else if (fid) {
        const args = form.evaluator_arguments.trim() ? jsonObject(form.evaluator_arguments) : {};
        if (!args) fail('evaluator_arguments', 'evaluator.arguments must be a JSON object');
        request.evaluator = { function_id: fid, arguments: args || {} };
    }
    if (judge) request.judge = judge;
    const tools = toolsPart(form, fail);
    if (tools !== undefined) request.tools = tools;
    const simulator = simulatorPart(form, fail);
    if (simulator) request.simulator = simulator;
    const repeats = wholeNumber(form.repeats);
    if (repeats === null || repeats < 1) fail('repeats', 'repeats must be a whole number of at least 1');
    request.repeats = repeats;
    const concurrency = wholeNumber(form.concurrency);
    if (concurrency === null || concurrency < 1) fail('concurrency', 'concurrency must be a whole number of at least 1');
    request.concurrency = concurrency;
    const alpha = decimal(form.alpha);
    if (alpha === null || !(alpha > 0 && alpha < 0.5)) fail('alpha', 'analysis.alpha must be greater than 0 and less than 0.5');
    const minEffect = decimal(form.min_effect || '0');
    if (minEffect === null || minEffect < 0 || minEffect > 1) fail('min_effect', 'analysis.min_effect must be between 0 and 1');
    request.analysis = { alpha, min_effect: minEffect };
    if (form.cluster_by.trim()) request.analysis.cluster_by = form.cluster_by.trim();
    const by = form.verdict_by || '';
    if (by && by !== 'evaluator' && by !== 'judge') fail('verdict_by', 'analysis.verdict_by must be evaluator or judge');
    else if (by === 'judge' && !judge) fail('verdict_by', 'analysis.verdict_by judge needs a judge');
    else if (by) request.analysis.verdict_by = by;
    sequentialParts(form, request, fail);
    if (form.extra.trim()) {
        const extra = jsonObject(form.extra);
        if (!extra) fail('extra', 'the advanced settings must be a JSON object');
        else {
            for (const [k, v] of Object.entries(extra)) {
                if (k === 'tools' || k === 'simulator') fail('extra', `advanced settings: ${k} has its own fields (Agent: mocked tools and a simulated user)`);
                else if (!['limits', 'functions', 'output', 'metadata'].includes(k)) fail('extra', `advanced settings: unknown field ${k} (limits, functions, output, metadata)`);
                else request[k] = v;
            }
        }
    }
    return { request: errors.length ? null : request, errors };
}

const filled = (v) => String(v ?? '').trim() !== '';

// A model-dimension variant of the form: {label?, model: {model, provider, options?}}, with the
// server's messages (where: control, treatments[i]; field: the form's arm key).
function modelVariant(v, field, where, fail) {
    const path = `${where}.model`;
    const id = String(v.model ?? '').trim();
    const provider = String(v.provider ?? '').trim();
    if (!id) fail(`${field}_model`, `${path}.model cannot be empty`);
    if (!provider) fail(`${field}_provider`, `${path}.provider cannot be empty`);
    const options = {};
    const opt = `${path}.options`;
    if (filled(v.temperature)) {
        const t = decimal(v.temperature);
        if (t === null || !(t >= 0 && t <= 2)) fail(`${field}_temperature`, `${opt}.temperature must be between 0 and 2`);
        else options.temperature = t;
    }
    if (filled(v.top_p)) {
        const p = decimal(v.top_p);
        if (p === null || !(p > 0 && p <= 1)) fail(`${field}_top_p`, `${opt}.top_p must be greater than 0 and at most 1`);
        else options.top_p = p;
    }
    if (filled(v.reasoning_effort)) {
        if (!REASONING_EFFORTS.includes(v.reasoning_effort)) fail(`${field}_reasoning_effort`, `${opt}.reasoning_effort must be one of ${REASONING_EFFORTS.join(', ')}`);
        else options.reasoning_effort = v.reasoning_effort;
    }
    if (filled(v.max_output_tokens)) {
        const n = wholeNumber(v.max_output_tokens);
        if (n === null || n < 1 || n > 2147483647) fail(`${field}_max_output_tokens`, `${opt}.max_output_tokens must be greater than zero`);
        else options.max_output_tokens = n;
    }
    const out = { model: { model: id, provider } };
    if (Object.keys(options).length) out.model.options = options;
    if (String(v.label ?? '').trim()) out.label = v.label.trim();
    return out;
}

// The identity of a variant's model: model, provider and options compared as values.
function modelKey(m) {
    const o = (m && m.options) || {};
    return JSON.stringify([m && m.model, m && m.provider, MODEL_OPTIONS.map((k) => (o[k] === undefined ? null : o[k]))]);
}

// Variants must differ in model, provider or options (the server's messages, indices from 0).
function sameModels(variants, fail) {
    const keys = variants.map((v) => modelKey(v.model));
    for (let j = 1; j < keys.length; j++) {
        const i = keys.indexOf(keys[j]);
        if (i === j) continue;
        fail(`treatment_${j - 1}_model`, i === 0 ? `treatments[${j - 1}]: differs from the control in nothing` : `treatments[${j - 1}]: differs from treatments[${i - 1}] in nothing`);
    }
}

// The arguments of eval::assert::trajectory from the form's editor: {expected, mode,
// match_arguments}; expected is the listed calls ({name, arguments?}) or, from the case,
// "{{expected}}" (a whole-value placeholder: the case's expected list itself).
function trajectoryArguments(form, fail) {
    const mode = form.trajectory_mode || 'strict';
    const match = form.trajectory_match || 'exact';
    if (!TRAJECTORY_MODES.includes(mode)) fail('trajectory_mode', `evaluator arguments.mode must be one of ${TRAJECTORY_MODES.join(', ')}`);
    if (!TRAJECTORY_MATCHES.includes(match)) fail('trajectory_match', `evaluator arguments.match_arguments must be one of ${TRAJECTORY_MATCHES.join(', ')}`);
    let expected = '{{expected}}';
    if (form.trajectory_from !== 'case') {
        expected = (form.trajectory_calls || []).map((c, i) => {
            const name = String(c.name ?? '').trim();
            if (!name) fail(`trajectory_call_${i}_name`, `evaluator arguments.expected[${i}].name cannot be empty`);
            const call = { name };
            if (filled(c.arguments)) {
                const a = jsonObject(c.arguments);
                if (!a) fail(`trajectory_call_${i}_arguments`, `evaluator arguments.expected[${i}].arguments must be an object`);
                else call.arguments = a;
            }
            return call;
        });
    }
    return { expected, mode, match_arguments: match };
}

// The judge of the form, or null when neither its model nor its task is filled in; with the
// server's messages.
function judgePart(form, fail) {
    if (!filled(form.judge_model) && !filled(form.judge_task)) return null;
    const model = String(form.judge_model ?? '').trim();
    if (!model) fail('judge_model', 'judge.model.model cannot be empty');
    const task = String(form.judge_task ?? '');
    if (!task.trim()) fail('judge_task', 'judge.task cannot be empty');
    const judge = { kind: 'pairwise', model: { model } };
    if (filled(form.judge_provider)) judge.model.provider = String(form.judge_provider).trim();
    judge.task = task;
    if (filled(form.judge_instructions)) judge.instructions = form.judge_instructions;
    const orders = form.judge_orders || 'both';
    if (orders !== 'both' && orders !== 'one') fail('judge_orders', 'judge.orders must be both or one');
    judge.orders = orders;
    if (filled(form.judge_max_tokens)) {
        const n = wholeNumber(form.judge_max_tokens);
        if (n === null || n < 1 || n > JUDGE_MAX_TOKENS) fail('judge_max_tokens', `judge.max_tokens must be between 1 and ${JUDGE_MAX_TOKENS}`);
        else judge.max_tokens = n;
    }
    return judge;
}

// stopping, budget and plan of the form into request, with the server's messages.
function sequentialParts(form, request, fail) {
    const rule = form.stopping_rule || 'fixed';
    if (rule !== 'fixed' && rule !== 'anytime') fail('stopping_rule', 'stopping.rule must be fixed or anytime');
    if (rule === 'anytime') {
        const stopping = { rule };
        if (filled(form.min_cases)) {
            const n = wholeNumber(form.min_cases);
            if (n === null || n < 2 || n > MIN_CASES_MAX) fail('min_cases', `stopping.min_cases must be between 2 and ${MIN_CASES_MAX}`);
            else stopping.min_cases = n;
        }
        if (filled(form.seed)) {
            const n = wholeNumber(form.seed);
            if (n === null || !Number.isSafeInteger(n)) fail('seed', 'stopping.seed must be a non-negative integer');
            else stopping.seed = n;
        }
        request.stopping = stopping;
    }
    const budget = {};
    for (const key of ['max_calls', 'max_tokens']) {
        if (!filled(form[key])) continue;
        const n = wholeNumber(form[key]);
        if (n === null || n < 1 || !Number.isSafeInteger(n)) fail(key, `budget.${key} must be a positive integer`);
        else budget[key] = n;
    }
    if (filled(form.max_cost_usd)) {
        const v = decimal(form.max_cost_usd);
        if (v === null || !(v > 0) || !Number.isFinite(v)) fail('max_cost_usd', 'budget.max_cost_usd must be a positive number');
        else budget.max_cost_usd = v;
    }
    if (Object.keys(budget).length) request.budget = budget;
    const plan = {};
    if (filled(form.plan_effect)) {
        const v = decimal(form.plan_effect);
        if (v === null || !(v > 0 && v <= 1)) fail('plan_effect', 'plan.effect must be between 0 and 1');
        else plan.effect = v;
    }
    if (filled(form.plan_sd)) {
        const v = decimal(form.plan_sd);
        if (v === null || !(v > 0) || !Number.isFinite(v)) fail('plan_sd', 'plan.sd must be a positive number');
        else plan.sd = v;
    }
    if (filled(form.plan_pilot)) plan.pilot_experiment_id = String(form.plan_pilot).trim();
    if (Object.keys(plan).length) request.plan = plan;
}

// The form of an existing experiment ("edit as new"): its request, with the dataset the
// experiment ran on (also when the request had inline cases). Absent fields keep the defaults.
export function experimentToForm(exp) {
    const f = defaultExperimentForm();
    const req = (exp && exp.request) || {};
    const text = (v, d = '') => (typeof v === 'string' ? v : d);
    const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? String(v) : '');
    const arm = (v, i) => {
        const m = (v && v.model && typeof v.model === 'object') ? v.model : {};
        const o = (m.options && typeof m.options === 'object') ? m.options : {};
        return {
            ...defaultArm(text(v && v.label, 'ABCDE'[i] || '')),
            prompt: text(v && v.prompt),
            system_prompt: text(v && v.system_prompt),
            model: text(m.model),
            provider: text(m.provider),
            temperature: num(o.temperature),
            top_p: num(o.top_p),
            reasoning_effort: REASONING_EFFORTS.includes(o.reasoning_effort) ? o.reasoning_effort : '',
            max_output_tokens: num(o.max_output_tokens),
        };
    };
    f.name = text(req.name, text(exp && exp.name));
    f.dimension = req.dimension === 'system_prompt' || req.dimension === 'model' ? req.dimension : 'prompt';
    f.model = text(req.model && req.model.model);
    f.provider = text(req.model && req.model.provider);
    f.prompt = text(req.prompt);
    f.system_prompt = text(req.system_prompt);
    f.control = arm(req.control, 0);
    if (Array.isArray(req.treatments) && req.treatments.length) f.treatments = req.treatments.slice(0, MAX_TREATMENTS).map((t, i) => arm(t, i + 1));
    if (req.evaluator && typeof req.evaluator === 'object') {
        f.evaluator_function_id = text(req.evaluator.function_id);
        f.evaluator_arguments = JSON.stringify(req.evaluator.arguments ?? {});
        if (f.evaluator_function_id === TRAJECTORY) trajectoryToForm(req.evaluator.arguments, f);
    }
    const judge = req.judge && typeof req.judge === 'object' ? req.judge : null;
    if (judge) {
        if (!req.evaluator) {
            f.evaluator_function_id = '';
            f.evaluator_arguments = '';
        }
        f.judge_model = text(judge.model && judge.model.model);
        f.judge_provider = text(judge.model && judge.model.provider);
        f.judge_task = text(judge.task);
        f.judge_instructions = text(judge.instructions);
        f.judge_orders = judge.orders === 'one' ? 'one' : 'both';
        f.judge_max_tokens = Number.isInteger(judge.max_tokens) ? String(judge.max_tokens) : '';
    }
    if (Number.isInteger(req.repeats)) f.repeats = String(req.repeats);
    if (Number.isInteger(req.concurrency)) f.concurrency = String(req.concurrency);
    const an = req.analysis || {};
    if (typeof an.alpha === 'number') f.alpha = String(an.alpha);
    if (typeof an.min_effect === 'number') f.min_effect = String(an.min_effect);
    f.cluster_by = text(an.cluster_by);
    f.verdict_by = an.verdict_by === 'judge' || an.verdict_by === 'evaluator' ? an.verdict_by : '';
    f.dataset_id = text(exp && exp.dataset && exp.dataset.dataset_id, text(req.dataset_id));
    const stopping = req.stopping && typeof req.stopping === 'object' ? req.stopping : {};
    if (stopping.rule === 'anytime') {
        f.stopping_rule = 'anytime';
        f.min_cases = num(stopping.min_cases);
        f.seed = num(stopping.seed);
    }
    const budget = req.budget && typeof req.budget === 'object' ? req.budget : {};
    f.max_calls = num(budget.max_calls);
    f.max_tokens = num(budget.max_tokens);
    f.max_cost_usd = num(budget.max_cost_usd);
    const plan = req.plan && typeof req.plan === 'object' ? req.plan : {};
    f.plan_effect = num(plan.effect);
    f.plan_sd = num(plan.sd);
    f.plan_pilot = text(plan.pilot_experiment_id);
    const extra = {};
    for (const k of ['limits', 'functions', 'output', 'metadata']) if (req[k] !== undefined && req[k] !== null) extra[k] = req[k];
    f.extra = Object.keys(extra).length ? JSON.stringify(extra, null, 2) : '';
    agentToForm(req, f);
    return f;
}

// The trajectory editor's fields from stored arguments (a list of calls, or a placeholder).
function trajectoryToForm(args, f) {
    const a = args && typeof args === 'object' ? args : {};
    if (TRAJECTORY_MODES.includes(a.mode)) f.trajectory_mode = a.mode;
    if (TRAJECTORY_MATCHES.includes(a.match_arguments)) f.trajectory_match = a.match_arguments;
    if (typeof a.expected === 'string') {
        f.trajectory_from = 'case';
        f.trajectory_calls = [{ name: '', arguments: '' }];
    } else if (Array.isArray(a.expected)) {
        f.trajectory_from = 'list';
        f.trajectory_calls = a.expected.map((c) => ({
            name: typeof (c && c.name) === 'string' ? c.name : '',
            arguments: c && c.arguments && typeof c.arguments === 'object' ? JSON.stringify(c.arguments) : '',
        }));
    }
}

// The form field a server 400 detail is about, or null (shown above the submit button).
// dimension and evaluator (its function id): the form's; with dimension model the shared
// prompt and each arm's model fields, with the trajectory evaluator its editor's fields.
// Details about the mocked tools and the simulated user go to their fields (agents.js;
// instructions: the form's simulator instructions).
export function experimentFieldForDetail(detail, { dimension = 'prompt', evaluator = '', instructions = '' } = {}) {
    const d = String(detail || '');
    let m = agentFieldForDetail(d, { instructions });
    if (m) return m;
    if (evaluator === TRAJECTORY) {
        if ((m = /^evaluator[ .]arguments\.expected\[(\d+)\]\.(name|arguments)\b/.exec(d))) return `trajectory_call_${m[1]}_${m[2]}`;
        if (/^evaluator[ .]arguments\.mode\b/.test(d)) return 'trajectory_mode';
        if (/^evaluator[ .]arguments\.match_arguments\b/.test(d)) return 'trajectory_match';
        if (/^eval::assert::trajectory requires|^evaluator[ .]arguments\b/.test(d)) return 'trajectory_calls';
    }
    if (dimension === 'model') {
        const arm = (where) => (where === 'control' ? 'control' : `treatment_${/\d+/.exec(where)[0]}`);
        if ((m = /^(control|treatments\[\d+\])\.model\.options\.(temperature|top_p|reasoning_effort|max_output_tokens)\b/.exec(d))) return `${arm(m[1])}_${m[2]}`;
        if ((m = /^(control|treatments\[\d+\])\.model\.provider\b/.exec(d))) return `${arm(m[1])}_provider`;
        if ((m = /^(control|treatments\[\d+\])(\.model\b|\.prompt|\.system_prompt|: differs)/.exec(d))) return `${arm(m[1])}_model`;
        if ((m = /^(control|treatments\[\d+\])\.label\b/.exec(d))) return `${arm(m[1])}_label`;
        if (/^prompt\b/.test(d) || /^case [^:]+: (template variable|messages must end)/.test(d)) return 'prompt';
        if (/^system_prompt\b/.test(d)) return 'system_prompt';
        if (/^model is not allowed/.test(d)) return 'control_model';
    }
    if ((m = /^stopping\.(min_cases|seed)\b/.exec(d))) return m[1];
    if (/^stopping\b/.test(d)) return 'stopping_rule';
    if ((m = /^budget\.(max_calls|max_tokens|max_cost_usd)\b/.exec(d))) return m[1];
    if (/^budget\b/.test(d)) return 'max_calls';
    if ((m = /^plan\.(effect|sd)\b/.exec(d))) return `plan_${m[1]}`;
    if (/^plan\.pilot_experiment_id\b/.test(d)) return 'plan_pilot';
    if ((m = /^treatments\[(\d+)\]\.(label|prompt|system_prompt)\b/.exec(d))) return `treatment_${m[1]}_${m[2]}`;
    if ((m = /^control\.(label|prompt|system_prompt)\b/.exec(d))) return `control_${m[1]}`;
    if (/^treatments /.test(d)) return 'treatments';
    if (/^variant labels/.test(d)) return 'control_label';
    if (/^prompt comparison/.test(d)) return 'control_prompt';
    if (/^system[ _]prompt comparison/.test(d)) return 'control_system_prompt';
    if (/^case [^:]+: (template variable|messages must end)/.test(d)) return 'control_prompt';
    if (/^case [^:]+: cluster_by/.test(d) || /^analysis\.cluster_by/.test(d)) return 'cluster_by';
    if (/^judge\.model\.provider/.test(d)) return 'judge_provider';
    if ((m = /^judge\.(task|instructions|orders|max_tokens)\b/.exec(d))) return `judge_${m[1]}`;
    if (/^judge\b/.test(d)) return 'judge_model';
    if (/^analysis\.verdict_by/.test(d)) return 'verdict_by';
    if (/^an experiment needs an evaluator or a judge/.test(d)) return 'evaluator_function_id';
    if (/^model\./.test(d)) return 'model';
    if (/^name\b/.test(d)) return 'name';
    if (/^evaluator\.arguments/.test(d)) return 'evaluator_arguments';
    if (/^evaluator/.test(d)) return 'evaluator_function_id';
    if (/^repeats\b/.test(d)) return 'repeats';
    if (/^concurrency\b/.test(d)) return 'concurrency';
    if (/^analysis\.alpha/.test(d)) return 'alpha';
    if (/^analysis\.min_effect/.test(d)) return 'min_effect';
    if (/dataset_id|^exactly one of/.test(d)) return 'dataset';
    if (/^(limits|functions|output|metadata)\b/.test(d)) return 'extra';
    return null;
}

// Content-Type of a dataset upload by file name, or null when the type is not accepted.
export function uploadType(fileName) {
    const n = String(fileName || '').toLowerCase();
    if (n.endsWith('.csv')) return 'text/csv';
    if (n.endsWith('.jsonl') || n.endsWith('.ndjson')) return 'application/x-ndjson';
    if (n.endsWith('.json')) return 'application/json';
    return null;
}

function finite(v) {
    return typeof v === 'number' && Number.isFinite(v);
}

// Percentage points with a sign: +12.5 pp, −3 pp, 0 pp.
export function fmtPp(v) {
    if (!finite(v)) return DASH;
    const a = Math.abs(v * 100);
    const s = a.toFixed(1).replace(/\.0$/, '');
    if (s === '0') return '0 pp';
    return `${v > 0 ? '+' : '−'}${s} pp`;
}

export function fmtP(p) {
    if (!finite(p)) return DASH;
    if (p < 0.001) return '< 0.001';
    return p.toFixed(3);
}

// Confidence level in percent of the comparison intervals (1 − α/m), e.g. "95%", "98.3%".
export function ciLevel(analysis) {
    const a = analysis && finite(analysis.alpha_adjusted) ? analysis.alpha_adjusted : analysis && finite(analysis.alpha) ? analysis.alpha : 0.05;
    return `${(100 * (1 - a)).toFixed(1).replace(/\.0$/, '')}%`;
}


// The banner of one comparison: {verdict, headline, figures: [text…], needs (text|null),
// partial, anytime, fixed (text|null)}. cmp: comparisons[i]; exp: the experiment (for the
// control label and analysis). With the anytime rule the verdict is the sequential one
// (continue while undecided) and the figures are the confidence sequence's; the fixed-sample
// figures, not valid under optional stopping, are kept in `fixed`.
export function verdictBanner(cmp, exp) {
    const analysis = (exp && exp.analysis) || {};
    const arms = (exp && exp.arms) || [];
    const control = arms.find((a) => a.role === 'control') || arms[0] || {};
    const pr = cmp.pass_rate || {};
    const verdict = cmp.verdict || 'inconclusive';
    const c = control.label || 'the control';
    const margin = fmtPp(analysis.min_effect).replace(/^\+/, '');
    const headline = verdict === 'better' ? `${cmp.label} is better than ${c}`
        : verdict === 'worse' ? `${cmp.label} is worse than ${c}`
            : verdict === 'equivalent' ? `${cmp.label} is equivalent to ${c} (within ±${margin})`
                : verdict === 'continue' ? `${cmp.label} vs ${c}: undecided so far`
                    : `${cmp.label} vs ${c}: inconclusive`;
    const figures = [];
    figures.push(`pass rate ${fmtPp(pr.delta)}`);
    if (finite(pr.ci_low) && finite(pr.ci_high)) figures.push(`${ciLevel(analysis)} CI [${fmtPp(pr.ci_low)}, ${fmtPp(pr.ci_high)}]`);
    else figures.push('no interval yet (fewer than 2 paired cases)');
    figures.push(`p (adjusted) ${fmtP(pr.p_value_adjusted)}`);
    figures.push(`MDE ${finite(pr.mde) ? fmtPp(pr.mde).replace(/^\+/, '') : DASH}`);
    figures.push(`${cmp.paired_cases ?? 0} paired case${cmp.paired_cases === 1 ? '' : 's'}`);
    const seq = cmp.sequential && typeof cmp.sequential === 'object' ? cmp.sequential : null;
    if (analysis.rule === 'anytime' && seq) {
        const fixedVerdict = cmp.fixed_verdict || 'inconclusive';
        return {
            verdict, headline, figures: sequentialFigures(seq, analysis), needs: null, partial: Boolean(analysis.partial), anytime: true,
            fixed: `fixed-sample, not valid under optional stopping: ${fixedVerdict} · ${figures.join(' · ')}`,
        };
    }
    let needs = null;
    if (verdict === 'inconclusive' && Number.isInteger(pr.cases_needed) && pr.cases_needed > (cmp.paired_cases || 0)) {
        const more = pr.cases_needed - (cmp.paired_cases || 0);
        needs = `needs about ${more.toLocaleString('en-US')} more case${more === 1 ? '' : 's'} (${pr.cases_needed.toLocaleString('en-US')} in all) to detect ${margin}`;
    }
    return { verdict, headline, figures, needs, partial: Boolean(analysis.partial), anytime: false, fixed: null };
}

// The figures of a comparison's confidence sequence: "anytime-valid 95% CS [+5.9 pp, +100 pp]
// · decided at case 16 · 17 cases in the sequence".
export function sequentialFigures(seq, analysis) {
    const out = [];
    const n = Number.isInteger(seq.n) ? seq.n : 0;
    if (n > 0 && finite(seq.low) && finite(seq.high)) out.push(`anytime-valid ${ciLevel(analysis)} CS [${fmtPp(seq.low)}, ${fmtPp(seq.high)}]`);
    else out.push('anytime-valid: no case in the sequence yet');
    if (Number.isInteger(seq.decided_at)) out.push(`decided at case ${fmtInt(seq.decided_at)}`);
    else out.push('not decided yet');
    out.push(`${fmtInt(n)} case${n === 1 ? '' : 's'} in the sequence`);
    return out;
}

const plural = (n, one, many) => `${fmtInt(n)} ${n === 1 ? one : many}`;

// The stop of a sequential experiment: {reason, text} or null when there is nothing to say.
// stopped: the experiment's `stopped`; cases: the dataset's case count; status: the
// experiment's; rule: analysis.rule; seqLength: cases in the sequence so far; budget: whether
// the experiment has one. A fixed experiment without a budget that ran every case has none.
export function stopLine({ stopped, cases, status, rule, seqLength, minCases, budget = false }) {
    const running = status === 'queued' || status === 'running';
    if (stopped && typeof stopped === 'object') {
        if (stopped.reason === 'exhausted' && rule !== 'anytime' && !budget) return null;
        const of = `at case ${fmtInt(stopped.at_case)} of ${fmtInt(cases)}`;
        const saved = `${plural(stopped.runs_saved || 0, 'run', 'runs')} saved`;
        let text;
        if (stopped.reason === 'decided') text = `decided ${of} · ${saved}`;
        else if (stopped.reason === 'budget') text = `budget reached ${of} · ${saved}`;
        else text = `every case ran (${fmtInt(stopped.at_case)} of ${fmtInt(cases)}) · no run saved`;
        if (running) text += ' · the cases in flight are finishing';
        return { reason: stopped.reason || '', text };
    }
    if (rule === 'anytime' && running) {
        const need = Number.isInteger(minCases) && (seqLength || 0) < minCases ? ` · no stop before ${fmtInt(minCases)}` : ' · stops once every treatment is decided';
        return { reason: '', text: `anytime: ${fmtInt(seqLength || 0)} of ${fmtInt(cases)} cases in the sequence${need}` };
    }
    return null;
}

// The spend of an experiment against its budget: {bars: [{cap, label, used, max, fraction,
// over, text}], figures}. One bar per cap present (tokens are input + output); figures is the
// spend in one line. spend: the experiment's `spend`.
export function spendView(spend) {
    const sp = spend && typeof spend === 'object' ? spend : {};
    const tokens = (sp.input_tokens || 0) + (sp.output_tokens || 0);
    const cost = finite(sp.cost_usd) ? sp.cost_usd : null;
    const figures = [
        plural(sp.calls || 0, 'call', 'calls'),
        `${fmtInt(sp.input_tokens || 0)} input + ${fmtInt(sp.output_tokens || 0)} output tokens`,
        cost === null ? 'cost not counted (no price)' : `cost ${fmtUsd(cost)}`,
    ].join(' · ');
    const budget = sp.budget && typeof sp.budget === 'object' ? sp.budget : {};
    const pct = (f) => `${(100 * f).toFixed(f < 0.1 ? 1 : 0).replace(/\.0$/, '')}%`;
    const bars = [];
    const bar = (cap, label, used, max, fmt) => {
        if (!finite(max) || !(max > 0)) return;
        if (used === null) {
            bars.push({ cap, label, used: null, max, fraction: null, over: false, text: `${label} not counted (no price) · cap ${fmt(max)}` });
            return;
        }
        const fraction = used / max;
        bars.push({ cap, label, used, max, fraction, over: used > max, text: `${fmt(used)} of ${fmt(max)} ${label} (${pct(fraction)})` });
    };
    bar('max_calls', 'calls', sp.calls || 0, budget.max_calls, fmtInt);
    bar('max_tokens', 'tokens', tokens, budget.max_tokens, fmtInt);
    bar('max_cost_usd', 'cost', cost, budget.max_cost_usd, fmtUsd);
    return { bars, figures };
}

// The figures of a plan (POST /v1/experiments/plan): [{key, label, text}]; rule: the form's
// stopping rule; request: the body planned (with dimension model, a line of each arm's model).
export function planFigures(plan, rule = 'fixed', request = null) {
    const p = plan || {};
    const anytime = rule === 'anytime';
    const byModel = Boolean(request && request.dimension === 'model');
    const out = [];
    if (byModel) {
        const variants = [request.control || {}, ...(Array.isArray(request.treatments) ? request.treatments : [])];
        out.push({
            key: 'models', label: 'Models',
            text: variants.map((v, i) => {
                const opts = optionsText(v.model && v.model.options);
                return `${v.label || LETTERS[i]}: ${modelText(v.model)}${opts ? `, ${opts}` : ''}`;
            }).join(' · '),
        });
    }
    out.push({ key: 'runs', label: 'Runs', text: `${fmtInt(p.runs)} (${plural(p.cases, 'case', 'cases')} × ${plural(p.arms, 'arm', 'arms')} × ${plural(p.repeats, 'repeat', 'repeats')})` });
    const calls = (p.calls || {}).min;
    out.push({ key: 'calls', label: 'Calls, at least', text: anytime ? `${fmtInt(calls)} (the cases before the first possible stop; more until it is decided)` : `${fmtInt(calls)} (one a run)` });
    const tk = p.tokens || {};
    out.push({ key: 'tokens', label: 'Tokens', text: `about ${fmtInt(tk.input_estimate)} input · at most ${fmtInt(tk.output_max)} output` });
    const cost = p.cost_usd;
    out.push({
        key: 'cost', label: 'Cost',
        text: cost && typeof cost === 'object' ? `about ${fmtUsd(cost.estimate)} · at most ${fmtUsd(cost.max)}`
            : byModel ? 'not every arm\'s model has a price: not estimated' : 'no price for this model: not estimated',
    });
    const pw = p.power || {};
    let power;
    if (Number.isInteger(pw.cases_needed)) {
        power = `${fmtInt(pw.cases_needed)} cases (${fmtInt(pw.runs_needed)} runs) for 80% power at ${fmtPp(pw.effect).replace(/^\+/, '')} with s.d. ${pw.sd}, α'' ${pw.alpha_adjusted}`;
        if (anytime) power += '; the anytime rule needs about twice as many at exactly that effect, far fewer when the effect is larger';
        if (Number.isInteger(p.cases) && pw.cases_needed > p.cases) power += ` · more than the ${fmtInt(p.cases)} cases of the data`;
    } else {
        power = `not computed: needs an effect (${finite(pw.effect) ? 'given' : 'plan effect or min_effect'}) and an s.d. (${finite(pw.sd) ? 'given' : 'plan s.d. or a pilot'})`;
    }
    out.push(...planAgentFigures(p));
    out.push({ key: 'cases_needed', label: 'Cases needed', text: power });
    return out;
}

// One matrix cell: {text "x/k", flaky, pending (not every planned run evaluated yet), rate}.
export function matrixCell(arm) {
    const x = arm && Number.isInteger(arm.passed) ? arm.passed : 0;
    const k = arm && Number.isInteger(arm.evaluated) ? arm.evaluated : 0;
    const planned = arm && Number.isInteger(arm.runs) ? arm.runs : k;
    return {
        text: `${x}/${k}`,
        flaky: x > 0 && x < k,
        pending: k < planned,
        rate: k > 0 ? x / k : null,
        planned,
    };
}

// Layout of a forest plot of rows [{label, delta, low, high}] (null values allowed): the x
// range [min, max] always holds 0 and every finite value and ±margin (when > 0), padded, and
// x(v) maps a value into [left, right].
export function forestScale(rows, { left = 0, right = 1, margin = 0 } = {}) {
    let min = 0;
    let max = 0;
    for (const r of rows) {
        for (const v of [r.delta, r.low, r.high]) {
            if (finite(v)) {
                min = Math.min(min, v);
                max = Math.max(max, v);
            }
        }
    }
    if (margin > 0) {
        min = Math.min(min, -margin);
        max = Math.max(max, margin);
    }
    if (max - min < 1e-9) {
        min -= 0.1;
        max += 0.1;
    }
    const pad = (max - min) * 0.08;
    min -= pad;
    max += pad;
    const x = (v) => left + ((v - min) / (max - min)) * (right - left);
    return { min, max, x };
}

// Round tick values for an axis over [min, max]: multiples of the smallest step of 1, 2 or
// 5 × 10^k that cuts the range into at most `count` steps; 0 is a tick when it is in range.
export function niceTicks(min, max, count = 5) {
    if (!(max > min)) return [min];
    const raw = (max - min) / Math.max(1, count);
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) || 10 * p;
    const out = [];
    for (let v = Math.ceil(min / step) * step; v <= max + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : Number(v.toPrecision(12)));
    return out;
}

// Splits text into words and the whitespace between them (both kept, so the pieces join back
// into the text).
export function tokenize(text) {
    return String(text ?? '').match(/\s+|[^\s]+/g) || [];
}

// Word-level diff of a against b: [{op: 'same'|'del'|'add', text}] where del pieces are only in
// a and add pieces only in b; words are joined by single spaces (line breaks and runs of
// spaces are not compared). Longest common subsequence over the words; when either text has
// more than `limit` words null is returned (the caller shows the texts side by side only).
export function wordDiff(a, b, limit = 3000) {
    const ta = tokenize(a);
    const tb = tokenize(b);
    const wa = ta.filter((t) => /\S/.test(t));
    const wb = tb.filter((t) => /\S/.test(t));
    if (wa.length > limit || wb.length > limit) return null;
    const n = wa.length;
    const m = wb.length;
    // lcs[i][j] = LCS length of wa[i..] and wb[j..], one row array per i.
    const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) {
        for (let j = m - 1; j >= 0; j--) {
            lcs[i][j] = wa[i] === wb[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
        }
    }
    const out = [];
    const push = (op, text) => {
        const last = out[out.length - 1];
        if (last && last.op === op) last.text += text;
        else out.push({ op, text });
    };
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
        if (i < n && j < m && wa[i] === wb[j]) {
            push('same', (out.length ? ' ' : '') + wa[i]);
            i++;
            j++;
        } else if (i < n && (j === m || lcs[i + 1][j] >= lcs[i][j + 1])) {
            push('del', (out.length ? ' ' : '') + wa[i]);
            i++;
        } else {
            push('add', (out.length ? ' ' : '') + wb[j]);
            j++;
        }
    }
    return out;
}

// Text of a run's output for display and diffing: strings as they are, anything else as
// pretty JSON, absent as ''.
export function outputText(output) {
    if (output === undefined || output === null) return '';
    if (typeof output === 'string') return output;
    return JSON.stringify(output, null, 2);
}

// Whether a run passed: true, false or null (not evaluated / not finished).
export function runPassed(run) {
    if (!run) return null;
    if (typeof run.passed === 'boolean') return run.passed;
    const v = run.verdict;
    if (v && typeof v === 'object' && typeof v.passed === 'boolean') return v.passed;
    if (v === 'passed' || v === 'pass') return true;
    if (v === 'failed' || v === 'fail') return false;
    return null;
}

// The arms of an experiment: the analysis's, or (before the first analysis) the request's;
// [{index, label, role}].
export function armList(exp) {
    if (exp && Array.isArray(exp.arms) && exp.arms.length) return exp.arms;
    const req = (exp && exp.request) || {};
    const variants = [req.control || {}, ...(Array.isArray(req.treatments) ? req.treatments : [])];
    return variants.map((v, i) => ({ index: i, label: v.label || 'ABCDE'[i], role: i === 0 ? 'control' : 'treatment' }));
}

// The model an arm calls: {model, provider, options}: the variant's with dimension model, else
// the request's shared one (options {}); null when the request names none.
export function armModel(exp, index) {
    const req = (exp && exp.request) || {};
    if (req.dimension === 'model') {
        const v = index === 0 ? req.control : Array.isArray(req.treatments) ? req.treatments[index - 1] : null;
        const m = v && v.model;
        if (!m || typeof m !== 'object' || typeof m.model !== 'string') return null;
        return { model: m.model, provider: typeof m.provider === 'string' ? m.provider : '', options: m.options && typeof m.options === 'object' ? m.options : {} };
    }
    const m = req.model;
    if (!m || typeof m !== 'object' || typeof m.model !== 'string' || !m.model) return null;
    return { model: m.model, provider: typeof m.provider === 'string' ? m.provider : '', options: {} };
}

// "stub-model (openai)"; '' without a model.
export function modelText(m) {
    if (!m || !m.model) return '';
    return m.provider ? `${m.model} (${m.provider})` : m.model;
}

const OPTION_LABELS = { temperature: 'temperature', top_p: 'top_p', reasoning_effort: 'reasoning effort', max_output_tokens: 'max output tokens' };

// A variant's options in the form's order: "temperature 0.2 · reasoning effort low"; '' for none.
export function optionsText(options) {
    const o = options && typeof options === 'object' ? options : {};
    return MODEL_OPTIONS.filter((k) => o[k] !== undefined && o[k] !== null)
        .map((k) => `${OPTION_LABELS[k]} ${typeof o[k] === 'number' ? o[k].toLocaleString('en-US', { maximumFractionDigits: 6 }) : o[k]}`).join(' · ');
}
