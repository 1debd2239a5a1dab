// Unit tests of console/analysis.js (the Experiments view's pure helpers) under node --test:
// the form → request conversion and its checks, the server-detail field mapping, upload types,
// the verdict banner texts, the matrix cells, the forest plot scale and the word diff; for
// sequential experiments the stopping rule, budget and plan of the form, the anytime banner, the
// stop line, the spend against a budget and the figures of a plan.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
    armList, defaultExperimentForm, defaultTreatment, experimentFieldForDetail, experimentRequest, experimentToForm, fmtPp, forestScale, matrixCell, niceTicks,
    outputText, planFigures, runPassed, spendView, stopLine, tokenize, uploadType, verdictBanner, wordDiff,
} from '../../console/analysis.js';

function form(over = {}) {
    const f = defaultExperimentForm();
    f.model = 'stub-model';
    f.provider = 'openai';
    f.control.prompt = 'Q: {{question}}';
    f.treatments[0].prompt = 'Answer in one word. Q: {{question}}';
    f.dataset_id = 'ds_00000000000000000000000000000001';
    return Object.assign(f, over);
}
const errorsOf = (f) => experimentRequest(f).errors.map((e) => `${e.field}: ${e.message}`);

test('the default form builds the start request of the spec', () => {
    const { request, errors } = experimentRequest(form({ name: ' qa ' }));
    assert.deepEqual(errors, []);
    assert.deepEqual(request, {
        dimension: 'prompt',
        name: 'qa',
        model: { model: 'stub-model', provider: 'openai' },
        control: { label: 'A', prompt: 'Q: {{question}}', system_prompt: null },
        treatments: [{ label: 'B', prompt: 'Answer in one word. Q: {{question}}', system_prompt: null }],
        dataset_id: 'ds_00000000000000000000000000000001',
        evaluator: { function_id: 'eval::assert::normalized_text', arguments: { expected: '{{expected}}' } },
        repeats: 3,
        concurrency: 4,
        analysis: { alpha: 0.05, min_effect: 0 },
    });
});

test('cluster_by, min_effect, advanced JSON and several treatments reach the request', () => {
    const f = form({ cluster_by: 'topic', min_effect: '0.05', alpha: '0.1', repeats: '5', concurrency: '16', extra: '{"limits":{"execution":{"max_turns":2}},"metadata":{"team":"qa"}}' });
    f.treatments.push({ label: '', prompt: 'Be brief: {{question}}', system_prompt: 'terse' });
    const { request, errors } = experimentRequest(f);
    assert.deepEqual(errors, []);
    assert.deepEqual(request.analysis, { alpha: 0.1, min_effect: 0.05, cluster_by: 'topic' });
    assert.equal(request.repeats, 5);
    assert.equal(request.concurrency, 16);
    assert.deepEqual(request.limits, { execution: { max_turns: 2 } });
    assert.deepEqual(request.metadata, { team: 'qa' });
    assert.deepEqual(request.treatments[1], { prompt: 'Be brief: {{question}}', system_prompt: 'terse' }, 'an empty label is left to the server');
});

test('an evaluator or a judge is required, as on the server', () => {
    assert.deepEqual(errorsOf(form({ evaluator_function_id: '  ' })), ['evaluator_function_id: an experiment needs an evaluator or a judge']);
    assert.deepEqual(experimentRequest(form({ evaluator_arguments: '' })).request.evaluator, { function_id: 'eval::assert::normalized_text', arguments: {} });
    assert.equal(experimentRequest(form()).request.judge, undefined, 'no judge unless one is filled in');
});

test('a pairwise judge reaches the request, with or without an evaluator, and comes back for edit as new', () => {
    const judged = { judge_model: ' judge-model ', judge_provider: 'openai', judge_task: '{{question}}', judge_instructions: 'Prefer the concise answer.', judge_max_tokens: '256' };
    const { request, errors } = experimentRequest(form({ ...judged, evaluator_function_id: '', evaluator_arguments: 'not json', verdict_by: 'judge' }));
    assert.deepEqual(errors, []);
    assert.equal(request.evaluator, undefined, 'the evaluator may be left out, its arguments then unread');
    assert.deepEqual(request.judge, {
        kind: 'pairwise', model: { model: 'judge-model', provider: 'openai' }, task: '{{question}}', instructions: 'Prefer the concise answer.', orders: 'both', max_tokens: 256,
    });
    assert.equal(request.analysis.verdict_by, 'judge');
    const both = experimentRequest(form({ judge_model: 'm', judge_task: 't', judge_orders: 'one' })).request;
    assert.equal(both.evaluator.function_id, 'eval::assert::normalized_text');
    assert.deepEqual(both.judge, { kind: 'pairwise', model: { model: 'm' }, task: 't', orders: 'one' });
    assert.equal(both.analysis.verdict_by, undefined, 'the server\'s default');
    // The checks, with the server's wording.
    assert.deepEqual(errorsOf(form({ judge_model: 'm' })), ['judge_task: judge.task cannot be empty']);
    assert.deepEqual(errorsOf(form({ judge_task: 'x' })), ['judge_model: judge.model.model cannot be empty']);
    for (const v of ['0', '100001', '1.5', 'x']) assert.deepEqual(errorsOf(form({ judge_model: 'm', judge_task: 't', judge_max_tokens: v })), ['judge_max_tokens: judge.max_tokens must be between 1 and 100000'], v);
    assert.deepEqual(errorsOf(form({ judge_model: 'm', judge_task: 't', judge_orders: 'two' })), ['judge_orders: judge.orders must be both or one']);
    assert.deepEqual(errorsOf(form({ verdict_by: 'judge' })), ['verdict_by: analysis.verdict_by judge needs a judge']);
    assert.deepEqual(errorsOf(form({ verdict_by: 'human' })), ['verdict_by: analysis.verdict_by must be evaluator or judge']);
    // Edit as new: the judge and verdict_by come back; a judge-only experiment has no evaluator.
    const back = experimentToForm({ request: { ...request, dataset_id: 'ds_1' } });
    assert.deepEqual([back.judge_model, back.judge_provider, back.judge_task, back.judge_instructions, back.judge_orders, back.judge_max_tokens, back.verdict_by, back.evaluator_function_id],
        ['judge-model', 'openai', '{{question}}', 'Prefer the concise answer.', 'both', '256', 'judge', '']);
    assert.deepEqual(experimentRequest(back).request, { ...request, dataset_id: 'ds_1' }, 'round trip');
    // Server details land at the judge's fields.
    assert.equal(experimentFieldForDetail('judge.kind must be pairwise'), 'judge_model');
    assert.equal(experimentFieldForDetail('judge.model.model cannot be empty'), 'judge_model');
    assert.equal(experimentFieldForDetail('judge.model.provider unknown is not supported'), 'judge_provider');
    assert.equal(experimentFieldForDetail('judge.task is required'), 'judge_task');
    assert.equal(experimentFieldForDetail('judge.orders must be both or one'), 'judge_orders');
    assert.equal(experimentFieldForDetail('judge.max_tokens must be between 1 and 100000'), 'judge_max_tokens');
    assert.equal(experimentFieldForDetail('analysis.verdict_by judge needs a judge'), 'verdict_by');
    assert.equal(experimentFieldForDetail('an experiment needs an evaluator or a judge'), 'evaluator_function_id');
});

test('every client check names its field, and a request with errors is null', () => {
    const f = form({ model: ' ', dataset_id: '', repeats: '0', concurrency: '1.5', alpha: '0.5', min_effect: '2', evaluator_arguments: '[1]', extra: '{"bogus":1}' });
    f.control.prompt = ' ';
    assert.equal(experimentRequest(f).request, null);
    assert.deepEqual(errorsOf(f), [
        'model: model.model cannot be empty',
        'control_prompt: control.prompt cannot be empty',
        'dataset: choose a dataset or upload a file',
        'evaluator_arguments: evaluator.arguments must be a JSON object',
        'repeats: repeats must be a whole number of at least 1',
        'concurrency: concurrency must be a whole number of at least 1',
        'alpha: analysis.alpha must be greater than 0 and less than 0.5',
        'min_effect: analysis.min_effect must be between 0 and 1',
        'extra: advanced settings: unknown field bogus (limits, functions, output, metadata)',
    ]);
    assert.deepEqual(errorsOf(form({ alpha: 'abc' })), ['alpha: analysis.alpha must be greater than 0 and less than 0.5']);
});

test('labels are checked as the server defaults them (A, B, C… in arm order)', () => {
    const f = form();
    f.treatments[0].label = 'A';
    assert.deepEqual(errorsOf(f), ['treatment_0_label: variant labels must be unique']);
    const g = form();
    g.control.label = '';
    g.treatments[0].label = '';
    g.treatments.push({ ...defaultTreatment(1), label: 'B', prompt: 'x {{question}}' });
    assert.deepEqual(errorsOf(g), ['treatment_1_label: variant labels must be unique'], 'the second treatment is B by default');
    const h = form();
    for (let i = 1; i < 5; i++) h.treatments.push({ ...defaultTreatment(i), label: `T${i}`, prompt: `p${i}` });
    assert.deepEqual(errorsOf(h), ['treatments: treatments must contain between 1 and 4 variants']);
});

test('edit as new: a stored request gives back a form that builds the same request', () => {
    const f = form({ name: 'qa', cluster_by: 'topic', min_effect: '0.05', repeats: '4', extra: '{"metadata":{"team":"qa"}}' });
    f.control.system_prompt = 'be kind';
    f.treatments[0].system_prompt = 'be kind';
    f.treatments.push({ label: 'C', prompt: 'third {{question}}', system_prompt: 'be kind' });
    const { request } = experimentRequest(f);
    const back = experimentToForm({ name: 'qa', request: { ...request, dataset_id: undefined }, dataset: { dataset_id: f.dataset_id } });
    assert.deepEqual(experimentRequest(back), { request, errors: [] });
    assert.equal(back.extra, '{\n  "metadata": {\n    "team": "qa"\n  }\n}');
    const empty = experimentToForm({ request: { control: { prompt: 'x', system_prompt: null } } });
    assert.equal(empty.control.system_prompt, '', 'null (none) reads back as an empty field');
    assert.equal(empty.repeats, '3');
    assert.equal(empty.treatments.length, 1);
});

test('server details are placed at their field', () => {
    const cases = {
        'treatments[1].prompt cannot be empty': 'treatment_1_prompt',
        'treatments[0].label must be a string': 'treatment_0_label',
        'control.system_prompt must be a string or null': 'control_system_prompt',
        'system prompt comparison requires identical prompts': 'control_system_prompt',
        'treatments must contain between 1 and 4 variants': 'treatments',
        'variant labels must be unique': 'control_label',
        'prompt comparison requires identical system prompts': 'control_prompt',
        'case q7: template variable question is not defined': 'control_prompt',
        'case q7: cluster_by variable topic is not defined': 'cluster_by',
        'model.model cannot be empty': 'model',
        'evaluator.arguments must be an object': 'evaluator_arguments',
        'evaluator.function_id is not an evaluator': 'evaluator_function_id',
        'repeats must be between 1 and 100': 'repeats',
        'concurrency must be between 1 and 256': 'concurrency',
        'analysis.alpha must be greater than 0 and less than 0.5': 'alpha',
        'analysis.min_effect must be between 0 and 1': 'min_effect',
        'exactly one of dataset_id and cases must be given': 'dataset',
        'dataset_id names no dataset: ds_1': 'dataset',
        'limits.execution.max_turns must be at least 1': 'extra',
        'an experiment may plan at most 100000 runs (cases × arms × repeats = 120000)': null,
    };
    for (const [detail, field] of Object.entries(cases)) assert.equal(experimentFieldForDetail(detail), field, detail);
});

test('uploads are typed by file name', () => {
    assert.equal(uploadType('cases.CSV'), 'text/csv');
    assert.equal(uploadType('cases.jsonl'), 'application/x-ndjson');
    assert.equal(uploadType('cases.ndjson'), 'application/x-ndjson');
    assert.equal(uploadType('cases.json'), 'application/json');
    assert.equal(uploadType('cases.xlsx'), null);
});

const exp = (over = {}) => ({ arms: [{ index: 0, label: 'v1', role: 'control' }, { index: 1, label: 'v2', role: 'treatment' }], analysis: { alpha: 0.05, alpha_adjusted: 0.05, min_effect: 0.05, partial: false, ...over } });
const cmp = (verdict, pr, paired = 40) => ({ treatment: 1, label: 'v2', verdict, paired_cases: paired, pass_rate: pr });

test('verdict banners read delta, interval, adjusted p, MDE and the paired cases', () => {
    const better = verdictBanner(cmp('better', { delta: 0.125, ci_low: 0.05, ci_high: 0.2, p_value_adjusted: 0.0004, mde: 0.07, cases_needed: null }), exp());
    assert.equal(better.headline, 'v2 is better than v1');
    assert.deepEqual(better.figures, ['pass rate +12.5 pp', '95% CI [+5 pp, +20 pp]', 'p (adjusted) < 0.001', 'MDE 7 pp', '40 paired cases']);
    assert.equal(better.needs, null);
    const worse = verdictBanner(cmp('worse', { delta: -0.3, ci_low: -0.5, ci_high: -0.1, p_value_adjusted: 0.0123, mde: 0.2 }), exp({ alpha_adjusted: 0.025 }));
    assert.equal(worse.headline, 'v2 is worse than v1');
    assert.equal(worse.figures[1], '97.5% CI [−50 pp, −10 pp]');
    assert.equal(worse.figures[2], 'p (adjusted) 0.012');
    const eq = verdictBanner(cmp('equivalent', { delta: 0, ci_low: -0.01, ci_high: 0.01, p_value_adjusted: 1, mde: 0.02 }), exp());
    assert.equal(eq.headline, 'v2 is equivalent to v1 (within ±5 pp)');
    assert.equal(eq.figures[0], 'pass rate 0 pp');
});

test('an inconclusive verdict says how many more cases it needs, and a partial one says so', () => {
    const b = verdictBanner(cmp('inconclusive', { delta: 0.02, ci_low: -0.05, ci_high: 0.09, p_value_adjusted: 0.6, mde: 0.1, cases_needed: 160 }), exp({ partial: true }));
    assert.equal(b.headline, 'v2 vs v1: inconclusive');
    assert.equal(b.needs, 'needs about 120 more cases (160 in all) to detect 5 pp');
    assert.equal(b.partial, true);
    const early = verdictBanner(cmp('inconclusive', { delta: null, ci_low: null, ci_high: null, p_value_adjusted: null, mde: null, cases_needed: null }, 1), exp());
    assert.deepEqual(early.figures, ['pass rate —', 'no interval yet (fewer than 2 paired cases)', 'p (adjusted) —', 'MDE —', '1 paired case']);
    assert.equal(early.needs, null);
});

test('matrix cells are x/k with flaky and pending marks', () => {
    assert.deepEqual(matrixCell({ index: 0, passed: 1, evaluated: 3, runs: 3 }), { text: '1/3', flaky: true, pending: false, rate: 1 / 3, planned: 3 });
    assert.deepEqual(matrixCell({ index: 0, passed: 3, evaluated: 3, runs: 3 }), { text: '3/3', flaky: false, pending: false, rate: 1, planned: 3 });
    assert.deepEqual(matrixCell({ index: 1, passed: 0, evaluated: 2, runs: 3 }), { text: '0/2', flaky: false, pending: true, rate: 0, planned: 3 });
    assert.deepEqual(matrixCell(undefined), { text: '0/0', flaky: false, pending: false, rate: null, planned: 0 });
});

test('the forest scale always shows zero, every interval and the margin', () => {
    const rows = [{ delta: 0.4, low: 0.2, high: 0.6 }, { delta: null, low: null, high: null }];
    const s = forestScale(rows, { left: 100, right: 500 });
    assert.ok(s.min < 0 && s.max > 0.6, `${s.min} ${s.max}`);
    assert.ok(s.x(0) > 100 && s.x(0.6) < 500);
    assert.ok(Math.abs(s.x(s.min) - 100) < 1e-9 && Math.abs(s.x(s.max) - 500) < 1e-9);
    const m = forestScale([{ delta: 0, low: 0, high: 0 }], { margin: 0.1 });
    assert.ok(m.min < -0.1 && m.max > 0.1);
    const flat = forestScale([]);
    assert.ok(flat.max > flat.min);
    assert.equal(fmtPp(-0.0001), '0 pp');
});

test('axis ticks are round, in range, and hold zero', () => {
    assert.deepEqual(niceTicks(-0.096, 1.298, 8), [0, 0.2, 0.4, 0.6, 0.8, 1, 1.2]);
    assert.deepEqual(niceTicks(-0.096, 1.298, 6), [0, 0.5, 1], 'at most 6 steps');
    assert.deepEqual(niceTicks(-0.31, 0.2, 8), [-0.3, -0.2, -0.1, 0, 0.1, 0.2]);
    assert.deepEqual(niceTicks(-0.011, 0.012, 4), [-0.01, 0, 0.01]);
    assert.deepEqual(niceTicks(1, 1), [1]);
});

test('the word diff keeps every word once, in order, and marks only changes', () => {
    assert.deepEqual(wordDiff('the cat sat on the mat', 'the dog sat on a mat'), [
        { op: 'same', text: 'the' }, { op: 'del', text: ' cat' }, { op: 'add', text: ' dog' }, { op: 'same', text: ' sat on' },
        { op: 'del', text: ' the' }, { op: 'add', text: ' a' }, { op: 'same', text: ' mat' },
    ]);
    assert.deepEqual(wordDiff('same text', 'same  text\n'), [{ op: 'same', text: 'same text' }]);
    assert.deepEqual(wordDiff('', 'new'), [{ op: 'add', text: 'new' }]);
    // Random texts: the kept and removed words give a, the kept and added words give b.
    let seed = 7;
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const words = ['a', 'b', 'c', 'd', 'e'];
    for (let t = 0; t < 200; t++) {
        const a = Array.from({ length: Math.floor(rnd() * 12) }, () => words[Math.floor(rnd() * 5)]);
        const b = Array.from({ length: Math.floor(rnd() * 12) }, () => words[Math.floor(rnd() * 5)]);
        const d = wordDiff(a.join(' '), b.join(' '));
        const side = (op) => d.filter((p) => p.op === 'same' || p.op === op).map((p) => p.text.trim()).join(' ').split(/\s+/).filter(Boolean);
        assert.deepEqual(side('del'), a);
        assert.deepEqual(side('add'), b);
    }
    assert.equal(wordDiff('x '.repeat(5), 'y '.repeat(5), 4), null, 'beyond the limit no diff is computed');
    assert.deepEqual(tokenize('a  b\nc'), ['a', '  ', 'b', '\n', 'c']);
});

test('outputs and run outcomes read every shape the runs may have', () => {
    assert.equal(outputText('hi'), 'hi');
    assert.equal(outputText(null), '');
    assert.equal(outputText({ a: 1 }), '{\n  "a": 1\n}');
    assert.equal(runPassed({ passed: true }), true);
    assert.equal(runPassed({ verdict: { passed: false } }), false);
    assert.equal(runPassed({ status: 'running' }), null);
});

test('the arms of an experiment: the analysis\'s, else the request\'s', () => {
    const arms = [{ index: 0, label: 'v1', role: 'control' }, { index: 1, label: 'v2', role: 'treatment' }];
    assert.deepEqual(armList({ arms }), arms);
    assert.deepEqual(armList({ arms: [], request: { control: { label: 'c' }, treatments: [{ label: 't1' }, {}] } }),
        [{ index: 0, label: 'c', role: 'control' }, { index: 1, label: 't1', role: 'treatment' }, { index: 2, label: 'C', role: 'treatment' }]);
    assert.deepEqual(armList(null), [{ index: 0, label: 'A', role: 'control' }]);
});

test('the stopping rule, budget and plan reach the request only when set, with the server\'s checks', () => {
    assert.deepEqual(Object.keys(experimentRequest(form()).request).filter((k) => ['stopping', 'budget', 'plan'].includes(k)), [], 'fixed, no cap, no plan: nothing sent');
    const anytime = experimentRequest(form({ stopping_rule: 'anytime', min_cases: '25', seed: '0', max_calls: '2000', max_tokens: '5000000', max_cost_usd: '12.5', plan_effect: '0.1', plan_sd: '0.4', plan_pilot: ' exp_1 ' }));
    assert.deepEqual(anytime.errors, []);
    assert.deepEqual(anytime.request.stopping, { rule: 'anytime', min_cases: 25, seed: 0 });
    assert.deepEqual(anytime.request.budget, { max_calls: 2000, max_tokens: 5000000, max_cost_usd: 12.5 });
    assert.deepEqual(anytime.request.plan, { effect: 0.1, sd: 0.4, pilot_experiment_id: 'exp_1' });
    assert.deepEqual(experimentRequest(form({ stopping_rule: 'anytime' })).request.stopping, { rule: 'anytime' }, 'the server\'s defaults');
    assert.equal(experimentRequest(form({ min_cases: '1', seed: 'x' })).request.stopping, undefined, 'min_cases and seed are the anytime rule\'s');
    assert.deepEqual(errorsOf(form({
        stopping_rule: 'anytime', min_cases: '1', seed: '-1', max_calls: '0', max_tokens: '1.5', max_cost_usd: '0', plan_effect: '1.5', plan_sd: '-2',
    })), [
        'min_cases: stopping.min_cases must be between 2 and 100000',
        'seed: stopping.seed must be a non-negative integer',
        'max_calls: budget.max_calls must be a positive integer',
        'max_tokens: budget.max_tokens must be a positive integer',
        'max_cost_usd: budget.max_cost_usd must be a positive number',
        'plan_effect: plan.effect must be between 0 and 1',
        'plan_sd: plan.sd must be a positive number',
    ]);
    assert.deepEqual(errorsOf(form({ stopping_rule: 'anytime', min_cases: '100001', seed: '9007199254740992' })), [
        'min_cases: stopping.min_cases must be between 2 and 100000', 'seed: stopping.seed must be a non-negative integer']);
    assert.deepEqual(errorsOf(form({ stopping_rule: 'sometimes' })), ['stopping_rule: stopping.rule must be fixed or anytime']);
});

test('edit as new keeps the stopping rule, budget and plan', () => {
    const f = form({ stopping_rule: 'anytime', min_cases: '12', seed: '7', max_calls: '90', max_cost_usd: '0.5', plan_effect: '0.2' });
    const { request } = experimentRequest(f);
    const back = experimentToForm({ request, dataset: { dataset_id: f.dataset_id } });
    assert.deepEqual(experimentRequest(back), { request, errors: [] });
    const fixed = experimentToForm({ request: { ...experimentRequest(form()).request, stopping: { rule: 'fixed', min_cases: 10, seed: null }, budget: null } });
    assert.deepEqual([fixed.stopping_rule, fixed.min_cases, fixed.seed, fixed.max_calls], ['fixed', '', '', '']);
});

test('details of the stopping rule, budget and plan are placed at their field', () => {
    const cases = {
        'stopping.rule must be fixed or anytime': 'stopping_rule',
        'stopping.min_cases must be between 2 and 100000': 'min_cases',
        'stopping.seed must be a non-negative integer': 'seed',
        'stopping: unknown field "rules"': 'stopping_rule',
        'budget.max_calls must be a positive integer': 'max_calls',
        'budget.max_tokens must be a positive integer': 'max_tokens',
        'budget.max_cost_usd must be a positive number': 'max_cost_usd',
        'budget.max_cost_usd needs a price for model stub-model': 'max_cost_usd',
        'plan.effect must be between 0 and 1': 'plan_effect',
        'plan.sd must be a positive number': 'plan_sd',
        'plan.pilot_experiment_id names no finished experiment: exp_1': 'plan_pilot',
    };
    for (const [detail, field] of Object.entries(cases)) assert.equal(experimentFieldForDetail(detail), field, detail);
});

test('an anytime banner shows the sequential verdict and keeps the fixed-sample figures beside it', () => {
    const c = {
        ...cmp('better', { delta: 1, ci_low: 1, ci_high: 1, p_value_adjusted: 0, mde: 0 }, 17),
        fixed_verdict: 'better', sequential: { n: 17, low: 0.11398834048440798, high: 1, verdict: 'better', decided_at: 16 },
    };
    const b = verdictBanner(c, exp({ rule: 'anytime' }));
    assert.equal(b.anytime, true);
    assert.equal(b.headline, 'v2 is better than v1');
    assert.deepEqual(b.figures, ['anytime-valid 95% CS [+11.4 pp, +100 pp]', 'decided at case 16', '17 cases in the sequence']);
    assert.equal(b.fixed, 'fixed-sample, not valid under optional stopping: better · pass rate +100 pp · 95% CI [+100 pp, +100 pp] · p (adjusted) < 0.001 · MDE 0 pp · 17 paired cases');
    const running = verdictBanner({ ...c, verdict: 'continue', fixed_verdict: 'inconclusive', sequential: { n: 1, low: -1, high: 1, verdict: 'continue', decided_at: null } }, exp({ rule: 'anytime', partial: true }));
    assert.equal(running.headline, 'v2 vs v1: undecided so far');
    assert.deepEqual(running.figures, ['anytime-valid 95% CS [−100 pp, +100 pp]', 'not decided yet', '1 case in the sequence']);
    assert.equal(running.needs, null);
    const fixedRule = verdictBanner(c, exp({ rule: 'fixed' }));
    assert.equal(fixedRule.anytime, false, 'under the fixed rule the sequence is information only');
    assert.equal(fixedRule.fixed, null);
    assert.equal(fixedRule.figures[0], 'pass rate +100 pp');
});

test('the stop line: decided, budget, every case ran, and the anytime rule still running', () => {
    const base = { cases: 1000, status: 'completed', rule: 'anytime', minCases: 10 };
    assert.deepEqual(stopLine({ ...base, stopped: { reason: 'decided', at_case: 84, runs_saved: 2748 } }), { reason: 'decided', text: 'decided at case 84 of 1,000 · 2,748 runs saved' });
    assert.deepEqual(stopLine({ ...base, stopped: { reason: 'budget', at_case: 6, runs_saved: 1 } }), { reason: 'budget', text: 'budget reached at case 6 of 1,000 · 1 run saved' });
    assert.equal(stopLine({ ...base, status: 'running', stopped: { reason: 'decided', at_case: 84, runs_saved: 10 } }).text, 'decided at case 84 of 1,000 · 10 runs saved · the cases in flight are finishing');
    assert.deepEqual(stopLine({ ...base, stopped: { reason: 'exhausted', at_case: 1000, runs_saved: 0 } }), { reason: 'exhausted', text: 'every case ran (1,000 of 1,000) · no run saved' });
    assert.equal(stopLine({ ...base, rule: 'fixed', stopped: { reason: 'exhausted', at_case: 1000, runs_saved: 0 } }), null, 'a plain fixed experiment');
    assert.equal(stopLine({ ...base, rule: 'fixed', budget: true, stopped: { reason: 'exhausted', at_case: 1000, runs_saved: 0 } }).reason, 'exhausted', 'within its budget');
    assert.deepEqual(stopLine({ ...base, status: 'running', stopped: null, seqLength: 4 }), { reason: '', text: 'anytime: 4 of 1,000 cases in the sequence · no stop before 10' });
    assert.equal(stopLine({ ...base, status: 'running', stopped: null, seqLength: 12 }).text, 'anytime: 12 of 1,000 cases in the sequence · stops once every treatment is decided');
    assert.equal(stopLine({ ...base, rule: 'fixed', status: 'running', stopped: null }), null);
});

test('the spend: one bar per cap present, tokens as input + output, cost without a price', () => {
    const spend = { calls: 160, input_tokens: 1600, output_tokens: 160, cost_usd: null, budget: { max_calls: 200, max_tokens: 100000 } };
    const v = spendView(spend);
    assert.equal(v.figures, '160 calls · 1,600 input + 160 output tokens · cost not counted (no price)');
    assert.deepEqual(v.bars.map((b) => [b.cap, b.used, b.max, b.over, b.text]), [
        ['max_calls', 160, 200, false, '160 of 200 calls (80%)'],
        ['max_tokens', 1760, 100000, false, '1,760 of 100,000 tokens (1.8%)'],
    ]);
    const over = spendView({ calls: 14, input_tokens: 0, output_tokens: 0, cost_usd: 0.25, budget: { max_calls: 12, max_cost_usd: 1 } });
    assert.deepEqual(over.bars.map((b) => [b.cap, b.over, b.text]), [['max_calls', true, '14 of 12 calls (117%)'], ['max_cost_usd', false, '$0.2500 of $1.0000 cost (25%)']]);
    assert.equal(over.figures, '14 calls · 0 input + 0 output tokens · cost $0.2500');
    assert.deepEqual(spendView({ calls: 1, input_tokens: 1, output_tokens: 1, cost_usd: null, budget: null }).bars, []);
    assert.deepEqual(spendView({ calls: 1, cost_usd: null, budget: { max_cost_usd: 2 } }).bars[0].text, 'cost not counted (no price) · cap $2.0000');
});

test('the figures of a plan, with and without a price and a power figure', () => {
    const plan = {
        cases: 40, arms: 2, repeats: 1, runs: 80, calls: { min: 20 }, tokens: { input_estimate: 332, output_max: 655360 }, cost_usd: null,
        power: { effect: 0.3, sd: 0.5, alpha_adjusted: 0.05, cases_needed: 22, runs_needed: 44 },
    };
    const text = (p, rule) => Object.fromEntries(planFigures(p, rule).map((f) => [f.key, f.text]));
    assert.deepEqual(text(plan, 'anytime'), {
        runs: '80 (40 cases × 2 arms × 1 repeat)',
        calls: '20 (the cases before the first possible stop; more until it is decided)',
        tokens: 'about 332 input · at most 655,360 output',
        cost: 'no price for this model: not estimated',
        cases_needed: "22 cases (44 runs) for 80% power at 30 pp with s.d. 0.5, α'' 0.05; the anytime rule needs about twice as many at exactly that effect, far fewer when the effect is larger",
    });
    const priced = text({ ...plan, calls: { min: 80 }, cost_usd: { estimate: 0.0123, max: 1.5 }, power: { effect: 0.05, sd: null, alpha_adjusted: 0.05, cases_needed: null, runs_needed: null } }, 'fixed');
    assert.equal(priced.calls, '80 (one a run)');
    assert.equal(priced.cost, 'about $0.0123 · at most $1.5000');
    assert.equal(priced.cases_needed, 'not computed: needs an effect (given) and an s.d. (plan s.d. or a pilot)');
    assert.match(text({ ...plan, power: { ...plan.power, cases_needed: 400, runs_needed: 800 } }, 'fixed').cases_needed, / · more than the 40 cases of the data$/);
});
