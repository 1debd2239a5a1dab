// Pure helpers of the Experiments view: the create form → POST /v1/experiments body with the
// client checks, the server detail → form field mapping, the upload content type of a file,
// the verdict banner texts of a comparison, the matrix cell of an arm on a case, the layout
// of the forest plot, a word-level text diff and the arms of an experiment; for sequential
// experiments the stop line, the spend against a budget and the figures of a plan. No DOM, no
// state, no I/O.
import { DASH, fmtInt, fmtUsd } from './format.js';

export const MAX_TREATMENTS = 4;
const LETTERS = 'ABCDE';

export function defaultTreatment(i = 0) {
    return { label: LETTERS[i + 1] || '', prompt: '', system_prompt: '' };
}

export function defaultExperimentForm() {
    return {
        name: '',
        dimension: 'prompt',
        model: '',
        provider: '',
        control: { label: 'A', prompt: '', system_prompt: '' },
        treatments: [defaultTreatment(0)],
        evaluator_function_id: 'eval::assert::normalized_text',
        evaluator_arguments: '{"expected": "{{expected}}"}',
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
// judge_instructions, judge_orders, judge_max_tokens, verdict_by. The request is null when
// there are errors. The evaluator may be left empty when there is a judge.
// stopping is sent with the anytime rule only (min_cases and seed apply to it); budget and
// plan only when one of their fields is filled in.
export function experimentRequest(form) {
    const errors = [];
    const fail = (field, message) => errors.push({ field, message });
    const model = form.model.trim();
    if (!model) fail('model', 'model.model cannot be empty');
    const arm = (v, field, where) => {
        if (!v.prompt.trim()) fail(`${field}_prompt`, `${where}.prompt cannot be empty`);
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
    const request = { dimension: form.dimension === 'system_prompt' ? 'system_prompt' : 'prompt' };
    if (form.name.trim()) request.name = form.name.trim();
    request.model = { model };
    if (form.provider.trim()) request.model.provider = form.provider.trim();
    request.control = control;
    request.treatments = treatments;
    if (!form.dataset_id) fail('dataset', 'choose a dataset or upload a file');
    else request.dataset_id = form.dataset_id;
    const judge = judgePart(form, fail);
    const fid = form.evaluator_function_id.trim();
    if (!fid && !judge) fail('evaluator_function_id', 'an experiment needs an evaluator or a judge');
    if (fid) {
        const args = form.evaluator_arguments.trim() ? jsonObject(form.evaluator_arguments) : {};
        if (!args) fail('evaluator_arguments', 'evaluator.arguments must be a JSON object');
        request.evaluator = { function_id: fid, arguments: args || {} };
    }
    if (judge) request.judge = judge;
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
                if (!['limits', 'functions', 'output', 'metadata'].includes(k)) fail('extra', `advanced settings: unknown field ${k} (limits, functions, output, metadata)`);
                else request[k] = v;
            }
        }
    }
    return { request: errors.length ? null : request, errors };
}

const filled = (v) => String(v ?? '').trim() !== '';

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
    const arm = (v, i) => ({
        label: text(v && v.label, 'ABCDE'[i] || ''),
        prompt: text(v && v.prompt),
        system_prompt: text(v && v.system_prompt),
    });
    f.name = text(req.name, text(exp && exp.name));
    f.dimension = req.dimension === 'system_prompt' ? 'system_prompt' : 'prompt';
    f.model = text(req.model && req.model.model);
    f.provider = text(req.model && req.model.provider);
    f.control = arm(req.control, 0);
    if (Array.isArray(req.treatments) && req.treatments.length) f.treatments = req.treatments.slice(0, MAX_TREATMENTS).map((t, i) => arm(t, i + 1));
    if (req.evaluator && typeof req.evaluator === 'object') {
        f.evaluator_function_id = text(req.evaluator.function_id);
        f.evaluator_arguments = JSON.stringify(req.evaluator.arguments ?? {});
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
    const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? String(v) : '');
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
    return f;
}

// The form field a server 400 detail is about, or null (shown above the submit button).
export function experimentFieldForDetail(detail) {
    const d = String(detail || '');
    let m;
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
    if (/^case [^:]+: template variable/.test(d)) return 'control_prompt';
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
// stopping rule.
export function planFigures(plan, rule = 'fixed') {
    const p = plan || {};
    const anytime = rule === 'anytime';
    const out = [];
    out.push({ key: 'runs', label: 'Runs', text: `${fmtInt(p.runs)} (${plural(p.cases, 'case', 'cases')} × ${plural(p.arms, 'arm', 'arms')} × ${plural(p.repeats, 'repeat', 'repeats')})` });
    const calls = (p.calls || {}).min;
    out.push({ key: 'calls', label: 'Calls, at least', text: anytime ? `${fmtInt(calls)} (the cases before the first possible stop; more until it is decided)` : `${fmtInt(calls)} (one a run)` });
    const tk = p.tokens || {};
    out.push({ key: 'tokens', label: 'Tokens', text: `about ${fmtInt(tk.input_estimate)} input · at most ${fmtInt(tk.output_max)} output` });
    const cost = p.cost_usd;
    out.push({ key: 'cost', label: 'Cost', text: cost && typeof cost === 'object' ? `about ${fmtUsd(cost.estimate)} · at most ${fmtUsd(cost.max)}` : 'no price for this model: not estimated' });
    const pw = p.power || {};
    let power;
    if (Number.isInteger(pw.cases_needed)) {
        power = `${fmtInt(pw.cases_needed)} cases (${fmtInt(pw.runs_needed)} runs) for 80% power at ${fmtPp(pw.effect).replace(/^\+/, '')} with s.d. ${pw.sd}, α'' ${pw.alpha_adjusted}`;
        if (anytime) power += '; the anytime rule needs about twice as many at exactly that effect, far fewer when the effect is larger';
        if (Number.isInteger(p.cases) && pw.cases_needed > p.cases) power += ` · more than the ${fmtInt(p.cases)} cases of the data`;
    } else {
        power = `not computed: needs an effect (${finite(pw.effect) ? 'given' : 'plan effect or min_effect'}) and an s.d. (${finite(pw.sd) ? 'given' : 'plan s.d. or a pilot'})`;
    }
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
