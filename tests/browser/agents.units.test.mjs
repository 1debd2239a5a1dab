// Unit tests of the console's agent parts under node --test: the model dimension of the
// experiment form (console/analysis.js: request, client checks with the server's messages,
// the field of a server detail, edit as new, the plan's models line, an arm's model), the
// trajectory evaluator's editor (its arguments, checks and round trip) and the run view's
// conversation (console/conversation.js: templates rendered as the server renders them, the
// turns of a run document with or without a `conversation`, function calls and their
// outcomes, the simulated user's turns), and console/agents.js: the mocked tools and the
// simulated user of the form (request, the server's messages, edit as new, the field of a
// server detail), the plan's judge and simulated-user lines and a run's figures.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
    TRAJECTORY, armModel, defaultArm, defaultExperimentForm, experimentFieldForDetail, experimentRequest, experimentToForm, modelText, optionsText, planFigures,
} from '../../console/analysis.js';
import {
    armTexts, callOutcome, conversationSummary, lookup, renderTemplate, runConversation, turnTitle,
} from '../../console/conversation.js';
import {
    SIMULATOR_DEFAULT_STOP, agentFieldForDetail, planAgentFigures, runFigures, simulatorPart, toolsPart, toolsProblem,
} from '../../console/agents.js';

const DS = 'ds_00000000000000000000000000000001';

// A model-dimension form: control stub-model, treatment stub-model-mini.
function modelForm(over = {}) {
    const f = defaultExperimentForm();
    f.dimension = 'model';
    f.prompt = 'Q: {{question}}';
    f.control = { ...defaultArm('big'), model: 'stub-model', provider: 'openai' };
    f.treatments = [{ ...defaultArm('mini'), model: 'stub-model-mini', provider: 'openai' }];
    f.dataset_id = DS;
    return Object.assign(f, over);
}
const errorsOf = (f) => experimentRequest(f).errors.map((e) => `${e.field}: ${e.message}`);

test('the model dimension builds the shared prompts and one model per variant, no top-level model', () => {
    const f = modelForm({ model: 'ignored-model', provider: 'openai', system_prompt: 'Be terse.' });
    Object.assign(f.treatments[0], { temperature: '0.2', top_p: '0.9', reasoning_effort: 'low', max_output_tokens: '256' });
    const { request, errors } = experimentRequest(f);
    assert.deepEqual(errors, []);
    assert.deepEqual(request, {
        dimension: 'model',
        prompt: 'Q: {{question}}',
        system_prompt: 'Be terse.',
        control: { label: 'big', model: { model: 'stub-model', provider: 'openai' } },
        treatments: [{ label: 'mini', model: { model: 'stub-model-mini', provider: 'openai', options: { temperature: 0.2, top_p: 0.9, reasoning_effort: 'low', max_output_tokens: 256 } } }],
        dataset_id: DS,
        evaluator: { function_id: 'eval::assert::normalized_text', arguments: { expected: '{{expected}}' } },
        repeats: 3,
        concurrency: 4,
        analysis: { alpha: 0.05, min_effect: 0 },
    });
    assert.equal(experimentRequest(modelForm()).request.system_prompt, null, 'an empty system prompt is none');
    // An empty prompt sends the case's conversation as it is (a blank one is refused).
    assert.equal(experimentRequest(modelForm({ prompt: '' })).request.prompt, '');
    const empty = modelForm();
    empty.dimension = 'prompt';
    empty.control = { ...defaultArm('A'), prompt: '' };
    empty.treatments = [{ ...defaultArm('B'), prompt: ' ' }];
    assert.deepEqual(errorsOf({ ...empty, model: 'm' }), ['treatment_0_prompt: treatments[0].prompt cannot be empty']);
    // The other dimensions are as before: the variants' prompts and one model.
    const p = experimentRequest({ ...modelForm(), dimension: 'prompt', model: 'stub-model', control: { ...defaultArm('A'), prompt: 'a' }, treatments: [{ ...defaultArm('B'), prompt: 'b' }] }).request;
    assert.deepEqual([p.dimension, p.model, p.prompt, p.control], ['prompt', { model: 'stub-model' }, undefined, { label: 'A', prompt: 'a', system_prompt: null }]);
});

test('the model dimension\'s client checks use the server\'s messages', () => {
    const f = modelForm({ prompt: '  ' });
    Object.assign(f.control, { model: ' ', provider: '' });
    Object.assign(f.treatments[0], { temperature: '2.5', top_p: '0', max_output_tokens: '0', reasoning_effort: 'huge' });
    assert.deepEqual(errorsOf(f), [
        'control_model: control.model.model cannot be empty',
        'control_provider: control.model.provider cannot be empty',
        'treatment_0_temperature: treatments[0].model.options.temperature must be between 0 and 2',
        'treatment_0_top_p: treatments[0].model.options.top_p must be greater than 0 and at most 1',
        'treatment_0_reasoning_effort: treatments[0].model.options.reasoning_effort must be one of minimal, low, medium, high, xhigh',
        'treatment_0_max_output_tokens: treatments[0].model.options.max_output_tokens must be greater than zero',
        'prompt: prompt cannot be empty',
    ]);
    // Bounds are inclusive where the server's are.
    const edge = modelForm();
    Object.assign(edge.treatments[0], { temperature: '2', top_p: '1', max_output_tokens: '1' });
    assert.deepEqual(errorsOf(edge), []);
    Object.assign(edge.treatments[0], { temperature: '-0.1', max_output_tokens: '1.5' });
    assert.deepEqual(errorsOf(edge), [
        'treatment_0_temperature: treatments[0].model.options.temperature must be between 0 and 2',
        'treatment_0_max_output_tokens: treatments[0].model.options.max_output_tokens must be greater than zero',
    ]);
});

test('variants must differ in model, provider or options, options compared as values', () => {
    const same = modelForm();
    same.treatments[0].model = 'stub-model';
    assert.deepEqual(errorsOf(same), ['treatment_0_model: treatments[0]: differs from the control in nothing']);
    // 1 and 1.0 are the same temperature; another provider or another option is a difference.
    const a = modelForm();
    Object.assign(a.control, { temperature: '1' });
    a.treatments = [{ ...defaultArm('t1'), model: 'stub-model', provider: 'openai', temperature: '1.0' }];
    assert.deepEqual(errorsOf(a), ['treatment_0_model: treatments[0]: differs from the control in nothing']);
    a.treatments[0].provider = 'anthropic';
    assert.deepEqual(errorsOf(a), []);
    a.treatments[0] = { ...a.treatments[0], provider: 'openai', temperature: '', reasoning_effort: 'high' };
    assert.deepEqual(errorsOf(a), []);
    // Between treatments, indices from 0.
    a.treatments.push({ ...a.treatments[0], label: 't2' });
    assert.deepEqual(errorsOf(a), ['treatment_1_model: treatments[1]: differs from treatments[0] in nothing']);
    // Labels stay unique as in the other dimensions.
    const l = modelForm();
    l.treatments[0].label = 'big';
    assert.deepEqual(errorsOf(l), ['treatment_0_label: variant labels must be unique']);
});

test('edit as new: a stored model-dimension request comes back to the same form and request', () => {
    const f = modelForm({ system_prompt: 'sys' });
    Object.assign(f.treatments[0], { temperature: '0.2', max_output_tokens: '256' });
    f.treatments.push({ ...defaultArm('claude'), model: 'claude-x', provider: 'anthropic', reasoning_effort: 'minimal', top_p: '0.5' });
    const { request } = experimentRequest(f);
    // As the server normalizes it: options {} when none, every variant labelled, no model.
    const stored = {
        ...request,
        control: { ...request.control, model: { ...request.control.model, options: {} } },
        dataset_id: DS,
    };
    const back = experimentToForm({ request: stored });
    assert.equal(back.dimension, 'model');
    assert.deepEqual([back.prompt, back.system_prompt], ['Q: {{question}}', 'sys']);
    assert.deepEqual([back.treatments[0].model, back.treatments[0].temperature, back.treatments[0].max_output_tokens, back.treatments[1].reasoning_effort, back.treatments[1].top_p],
        ['stub-model-mini', '0.2', '256', 'minimal', '0.5']);
    assert.deepEqual(experimentRequest(back), { request, errors: [] });
    const none = experimentToForm({ request: { dimension: 'model', prompt: 'p', system_prompt: null, control: { label: 'A', model: { model: 'm', provider: 'openai', options: {} } } } });
    assert.deepEqual([none.system_prompt, none.control.temperature, none.control.reasoning_effort], ['', '', '']);
});

test('server details of the model dimension are placed at their field', () => {
    const model = { dimension: 'model' };
    const cases = {
        'prompt cannot be empty': 'prompt',
        'prompt is required': 'prompt',
        'system_prompt must be a string': 'system_prompt',
        'treatments[1].model.options.temperature must be between 0 and 2': 'treatment_1_temperature',
        'control.model.options.top_p must be greater than 0 and at most 1': 'control_top_p',
        'treatments[0].model.options.reasoning_effort must be one of minimal, low, medium, high, xhigh': 'treatment_0_reasoning_effort',
        'treatments[0].model.options.max_output_tokens must be greater than zero': 'treatment_0_max_output_tokens',
        'treatments[0].model.options.seed is not a known field': 'treatment_0_model',
        'treatments[0].model.provider "x" is not a configured provider (openai, anthropic)': 'treatment_0_provider',
        'control.model.model cannot be empty': 'control_model',
        'treatments[2]: differs from treatments[0] in nothing': 'treatment_2_model',
        'treatments[0].prompt is not allowed with dimension model (it is shared: give the top-level prompt)': 'treatment_0_model',
        'case k1: template variable q is not defined': 'prompt',
        'case q3: messages must end with a user message when the prompt is empty': 'prompt',
        'treatments[0].label cannot be empty': 'treatment_0_label',
    };
    for (const [detail, field] of Object.entries(cases)) assert.equal(experimentFieldForDetail(detail, model), field, detail);
    // The other dimensions keep their fields.
    assert.equal(experimentFieldForDetail('case k1: template variable q is not defined'), 'control_prompt');
    assert.equal(experimentFieldForDetail('case q3: messages must end with a user message when the prompt is empty'), 'control_prompt');
    assert.equal(experimentFieldForDetail('treatments[0].prompt cannot be empty', { dimension: 'prompt' }), 'treatment_0_prompt');
});

test('the trajectory evaluator\'s editor builds its arguments, with the server\'s messages', () => {
    const f = modelForm({ evaluator_function_id: TRAJECTORY, evaluator_arguments: 'not read', trajectory_mode: 'unordered', trajectory_match: 'subset' });
    f.trajectory_calls = [{ name: ' search ', arguments: '{"q": "{{question}}"}' }, { name: 'book', arguments: '' }];
    assert.deepEqual(experimentRequest(f).request.evaluator, {
        function_id: TRAJECTORY,
        arguments: { expected: [{ name: 'search', arguments: { q: '{{question}}' } }, { name: 'book' }], mode: 'unordered', match_arguments: 'subset' },
    });
    // From the case: the whole-value placeholder, so the case's expected list is the list.
    assert.deepEqual(experimentRequest({ ...f, trajectory_from: 'case' }).request.evaluator.arguments, { expected: '{{expected}}', mode: 'unordered', match_arguments: 'subset' });
    // Defaults: strict, exact; no call listed is a valid list (strict: no call at all).
    assert.deepEqual(experimentRequest(modelForm({ evaluator_function_id: TRAJECTORY, trajectory_calls: [] })).request.evaluator.arguments, { expected: [], mode: 'strict', match_arguments: 'exact' });
    const bad = modelForm({ evaluator_function_id: TRAJECTORY, trajectory_mode: 'loose', trajectory_match: 'fuzzy' });
    bad.trajectory_calls = [{ name: 'ok', arguments: '[1]' }, { name: ' ', arguments: '' }];
    assert.deepEqual(errorsOf(bad), [
        'trajectory_mode: evaluator arguments.mode must be one of strict, unordered, subset, superset',
        'trajectory_match: evaluator arguments.match_arguments must be one of exact, subset, ignore',
        'trajectory_call_0_arguments: evaluator arguments.expected[0].arguments must be an object',
        'trajectory_call_1_name: evaluator arguments.expected[1].name cannot be empty',
    ]);
    // Another evaluator ignores the editor and reads its JSON arguments.
    assert.deepEqual(experimentRequest({ ...f, evaluator_function_id: 'eval::assert::exact', evaluator_arguments: '{"expected": 1}' }).request.evaluator, { function_id: 'eval::assert::exact', arguments: { expected: 1 } });
});

test('edit as new fills the trajectory editor; its server details go to its fields', () => {
    const f = modelForm({ evaluator_function_id: TRAJECTORY, trajectory_mode: 'superset', trajectory_match: 'ignore' });
    f.trajectory_calls = [{ name: 'search', arguments: '{"q":"x"}' }, { name: 'book', arguments: '' }];
    const { request } = experimentRequest(f);
    const back = experimentToForm({ request });
    assert.deepEqual([back.trajectory_mode, back.trajectory_match, back.trajectory_from, back.trajectory_calls],
        ['superset', 'ignore', 'list', [{ name: 'search', arguments: '{"q":"x"}' }, { name: 'book', arguments: '' }]]);
    assert.deepEqual(experimentRequest(back), { request, errors: [] });
    const fromCase = experimentToForm({ request: { ...request, evaluator: { function_id: TRAJECTORY, arguments: { expected: '{{expected}}' } } } });
    assert.deepEqual([fromCase.trajectory_from, fromCase.trajectory_mode, fromCase.trajectory_match], ['case', 'strict', 'exact']);
    const t = { dimension: 'model', evaluator: TRAJECTORY };
    assert.equal(experimentFieldForDetail('evaluator arguments.expected[1].name cannot be empty', t), 'trajectory_call_1_name');
    assert.equal(experimentFieldForDetail('evaluator.arguments.expected[0].arguments must be an object', t), 'trajectory_call_0_arguments');
    assert.equal(experimentFieldForDetail('evaluator arguments.mode must be one of strict, unordered, subset, superset', t), 'trajectory_mode');
    assert.equal(experimentFieldForDetail('evaluator arguments.match_arguments must be one of exact, subset, ignore', t), 'trajectory_match');
    assert.equal(experimentFieldForDetail('eval::assert::trajectory requires evaluator arguments.expected', t), 'trajectory_calls');
    // Without the trajectory evaluator the JSON arguments field keeps them.
    assert.equal(experimentFieldForDetail('evaluator.arguments.expected is required', { dimension: 'model' }), 'evaluator_arguments');
});

test('the plan names every arm\'s model; without every price the cost is not estimated', () => {
    const f = modelForm();
    Object.assign(f.treatments[0], { temperature: '0.2', max_output_tokens: '256' });
    const { request } = experimentRequest(f);
    const plan = { cases: 2, arms: 2, repeats: 3, runs: 12, calls: { min: 12 }, tokens: { input_estimate: 21, output_max: 98304 }, cost_usd: null, power: {} };
    const figures = Object.fromEntries(planFigures(plan, 'fixed', request).map((x) => [x.key, x.text]));
    assert.equal(figures.models, 'big: stub-model (openai) · mini: stub-model-mini (openai), temperature 0.2 · max output tokens 256');
    assert.equal(figures.cost, 'not every arm\'s model has a price: not estimated');
    const priced = Object.fromEntries(planFigures({ ...plan, cost_usd: { estimate: 0.0123, max: 117.97635 } }, 'fixed', request).map((x) => [x.key, x.text]));
    assert.equal(priced.cost, 'about $0.0123 · at most $117.98');
    assert.equal(planFigures(plan, 'fixed').some((x) => x.key === 'models'), false, 'no models line for the other dimensions');
});

test('each arm\'s model: its own with dimension model, else the shared one', () => {
    const exp = { request: { dimension: 'model', control: { label: 'big', model: { model: 'stub-model', provider: 'openai', options: {} } },
        treatments: [{ label: 'mini', model: { model: 'stub-model-mini', provider: 'openai', options: { temperature: 0.2, reasoning_effort: 'low' } } }] } };
    assert.deepEqual(armModel(exp, 0), { model: 'stub-model', provider: 'openai', options: {} });
    assert.deepEqual(armModel(exp, 1), { model: 'stub-model-mini', provider: 'openai', options: { temperature: 0.2, reasoning_effort: 'low' } });
    assert.equal(armModel(exp, 2), null);
    assert.equal(modelText(armModel(exp, 1)), 'stub-model-mini (openai)');
    assert.equal(optionsText(armModel(exp, 1).options), 'temperature 0.2 · reasoning effort low');
    assert.equal(optionsText({}), '');
    const shared = { request: { dimension: 'prompt', model: { model: 'gpt-x', provider: 'openai' } } };
    assert.deepEqual([armModel(shared, 0), armModel(shared, 3)], [{ model: 'gpt-x', provider: 'openai', options: {} }, { model: 'gpt-x', provider: 'openai', options: {} }]);
    assert.equal(armModel({ request: {} }, 0), null);
    assert.equal(modelText({ model: 'm', provider: '' }), 'm');
});

// ---------------------------------------------------------------- the conversation

const CASE = { case_id: 'k1', vars: { question: 'alpha', n: 3, user: { city: 'Oslo' }, list: [1, 'a'] }, expected: 'yes' };

test('templates are rendered as the server renders them', () => {
    assert.deepEqual(renderTemplate('Q {{question}} / {{ question }} -> {{expected}}', CASE), { text: 'Q alpha / alpha -> yes', missing: [] });
    // Anything but a string as compact JSON; dots index objects.
    assert.equal(renderTemplate('{{n}} {{list}} {{user}} {{user.city}}', CASE).text, '3 [1,"a"] {"city":"Oslo"} Oslo');
    // Undefined names are left as they are and listed once; text that is not a name stays.
    assert.deepEqual(renderTemplate('{{nope}} {{user.zip}} {{nope}} {{ not a name }}', CASE), { text: '{{nope}} {{user.zip}} {{nope}} {{ not a name }}', missing: ['nope', 'user.zip'] });
    assert.equal(renderTemplate('{{expected}}', { vars: {}, expected: null }).text, 'null', 'a null expected value is JSON null');
    assert.equal(lookup({ vars: {} }, 'expected'), undefined, 'a case without expected does not define it');
    assert.equal(lookup({ vars: { expected: 'var' }, expected: 'root' }, 'expected'), 'root');
    assert.deepEqual(armTexts({ request: { dimension: 'model', prompt: 'P', system_prompt: null } }, 1), { prompt: 'P', system_prompt: null });
    assert.deepEqual(armTexts({ request: { dimension: 'prompt', control: { prompt: 'a', system_prompt: 's' }, treatments: [{ prompt: 'b', system_prompt: null }] } }, 1), { prompt: 'b', system_prompt: null });
});

// A run document as the server writes it today (no conversation): the harness's records.
function runDoc(over = {}) {
    return {
        run_id: 'case1-arm1-rep1', arm: 1, status: 'completed', output: 'Booked.',
        transcript: {
            spans: [],
            generations: [
                { turn: 1, text: '', tool_calls: [{ name: 'search', arguments: { q: 'alpha' } }] },
                { turn: 2, text: '', tool_calls: [{ name: 'book', arguments: { id: 7 } }] },
                { turn: 3, text: 'Booked.', tool_calls: [] },
            ],
            function_calls: [
                { call_id: 'c1', function_id: 'tools::search', tool_name: 'search', turn: 1, arguments: { q: 'alpha' }, status: 'ok', result: { hits: [7] } },
                { call_id: 'c2', function_id: null, tool_name: 'book', turn: 2, arguments: { id: 7 }, status: 'error', error: 'sold out' },
            ],
        },
        ...over,
    };
}

test('without a conversation: the case\'s messages, the rendered prompt, then the answer with its calls', () => {
    const caseRow = { ...CASE, messages: [{ role: 'user', content: 'Hi, {{question}} here' }, { role: 'assistant', content: 'Hello!' }] };
    const conv = runConversation(runDoc(), { caseRow, prompt: 'Book {{question}}.' });
    assert.equal(conv.source, 'derived');
    assert.deepEqual(conv.turns, [
        // The case's messages rendered as the server renders them when it sends them.
        { role: 'user', content: 'Hi, alpha here', origin: 'case' },
        { role: 'assistant', content: 'Hello!', origin: 'case' },
        { role: 'user', content: 'Book alpha.', origin: 'prompt' },
        {
            role: 'assistant', content: 'Booked.', origin: 'answer',
            function_calls: [
                { name: 'tools::search', arguments: { q: 'alpha' }, result: { hits: [7] } },
                { name: 'book', arguments: { id: 7 }, error: 'sold out' },
            ],
        },
    ]);
    assert.equal(conversationSummary(conv), '4 turns · 2 function calls');
    assert.deepEqual(conv.turns.map(turnTitle), ['user · from the case', 'assistant · from the case', 'user · the prompt', 'assistant · the answer']);
});

test('derived turns: tool calls of the generations without call records, a failed run, an empty prompt, an evaluation run', () => {
    const noRecords = runDoc();
    noRecords.transcript = { ...noRecords.transcript, function_calls: [] };
    assert.deepEqual(runConversation(noRecords, { caseRow: CASE, prompt: 'x' }).turns[1].function_calls,
        [{ name: 'search', arguments: { q: 'alpha' } }, { name: 'book', arguments: { id: 7 } }], 'named as the model called them, no outcome');
    // No output: the last generation's text, and no answer at all before any generation.
    const failed = runDoc({ status: 'failed', output: null });
    assert.equal(runConversation(failed, { caseRow: CASE, prompt: 'x' }).turns[1].content, 'Booked.');
    const queued = runConversation({ run_id: 'r', status: 'queued', output: null, transcript: null }, { caseRow: CASE, prompt: 'x {{question}} {{zip}}' });
    assert.deepEqual(queued, { source: 'derived', turns: [{ role: 'user', content: 'x alpha {{zip}}', origin: 'prompt' }], missing: ['zip'] });
    // An empty prompt sends the case's conversation as it is.
    const caseRow = { ...CASE, messages: [{ role: 'user', content: 'go' }] };
    assert.deepEqual(runConversation({ output: 'ok' }, { caseRow, prompt: '' }).turns.map((t) => [t.role, t.content, t.origin]),
        [['user', 'go', 'case'], ['assistant', 'ok', 'answer']]);
    // An evaluation run carries the records on the run itself; a JSON output is its text.
    const ev = runConversation({ output: { a: 1 }, generations: [{ turn: 1, text: '{"a":1}' }], function_calls: [{ function_id: 'f', arguments: { x: 1 }, result: 2 }] }, { prompt: 'p' });
    assert.deepEqual(ev.turns, [
        { role: 'user', content: 'p', origin: 'prompt' },
        { role: 'assistant', content: '{"a":1}', origin: 'answer', function_calls: [{ name: 'f', arguments: { x: 1 }, result: 2 }] },
    ]);
});

test('a run document\'s conversation is preferred, and its turns are marked against the case', () => {
    const conversation = [
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello!' },
        { role: 'user', content: 'Book alpha.' },
        { role: 'assistant', content: 'Booked.', function_calls: [{ name: 'book', arguments: { id: 7 }, result: 'ok' }, { name: 'pay', arguments: null, error: 'declined' }] },
        { role: 'user', content: 'Thanks' },
        { role: 'assistant', content: 'Bye' },
    ];
    const caseRow = { ...CASE, messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello{{ expected }}' }] };
    conversation[1].content = 'Helloyes';
    const conv = runConversation(runDoc({ conversation }), { caseRow, prompt: 'ignored {{question}}' });
    assert.equal(conv.source, 'run');
    assert.deepEqual(conv.turns.map((t) => t.origin), ['case', 'case', 'prompt', 'answer', 'user', 'answer']);
    assert.deepEqual(conv.turns[3].function_calls, [{ name: 'book', arguments: { id: 7 }, result: 'ok' }, { name: 'pay', arguments: {}, error: 'declined' }]);
    assert.equal(conv.turns[2].content, 'Book alpha.', 'the server\'s rendering, not the console\'s');
    // Messages that do not match the start of the conversation mark nothing as the case's.
    const other = runConversation(runDoc({ conversation }), { caseRow: { ...CASE, messages: [{ role: 'user', content: 'Other' }] } });
    assert.deepEqual(other.turns.map((t) => t.origin), ['prompt', 'answer', 'user', 'answer', 'user', 'answer']);
    // The case's messages unknown (case rows do not carry them): without a simulated user the
    // run added its prompt and one answer, with an empty prompt the answer only; with one,
    // what is whose is not told.
    const two = conversation.slice(0, 4);
    assert.deepEqual(runConversation({ conversation: two }, { caseRow: CASE, prompt: 'p' }).turns.map((t) => t.origin), ['case', 'case', 'prompt', 'answer']);
    assert.deepEqual(runConversation({ conversation: two }, { caseRow: CASE, prompt: '' }).turns.map((t) => t.origin), ['case', 'case', 'case', 'answer']);
    assert.deepEqual(runConversation({ conversation: two.slice(2) }, { prompt: 'p' }).turns.map((t) => t.origin), ['prompt', 'answer']);
    assert.deepEqual(runConversation({ conversation }, { caseRow: CASE, prompt: 'p', simulated: true }).turns.map((t) => t.origin), [undefined, undefined, undefined, undefined, undefined, undefined]);
    assert.deepEqual(runConversation({ conversation }, { caseRow, prompt: 'p', simulated: true }).turns.map((t) => t.origin), ['case', 'case', 'prompt', 'answer', 'simulated', 'answer']);
    assert.equal(turnTitle({ role: 'user' }), 'user');
    // Where the server keeps it: the transcript's conversation, beside the harness's records.
    const kept = runConversation({ ...runDoc(), transcript: { ...runDoc().transcript, conversation } }, { caseRow, prompt: 'ignored' });
    assert.deepEqual(kept, conv);
    // A transcript that is the list itself is a conversation too.
    assert.equal(runConversation({ transcript: conversation.slice(2, 4) }).source, 'run');
});

test('a call\'s outcome: its result, its error, or nothing recorded', () => {
    assert.deepEqual(callOutcome({ name: 'f', result: { a: [1] } }), { kind: 'result', text: '{\n  "a": [\n    1\n  ]\n}' });
    assert.deepEqual(callOutcome({ name: 'f', result: 'plain' }), { kind: 'result', text: 'plain' });
    assert.deepEqual(callOutcome({ name: 'f', result: null }), { kind: 'result', text: 'null' });
    assert.deepEqual(callOutcome({ name: 'f', error: 'boom' }), { kind: 'error', text: 'boom' });
    assert.deepEqual(callOutcome({ name: 'f' }), { kind: 'none', text: 'no result recorded' });
    assert.equal(conversationSummary({ turns: [{ role: 'user' }] }), '1 turn');
});

// ---- mocked tools and the simulated user (console/agents.js)

// A prompt-dimension form with a dataset, as the form starts.
function promptForm(over = {}) {
    const f = defaultExperimentForm();
    f.model = 'stub-model';
    f.control = { ...defaultArm('terse'), prompt: 'I need a room.' };
    f.treatments = [{ ...defaultArm('polite'), prompt: 'Hello! I need a room.' }];
    f.dataset_id = DS;
    return Object.assign(f, over);
}
const SEARCH = { name: 'search', description: 'Rooms free in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };
const collect = (part, form) => {
    const errors = [];
    const value = part(form, (field, message) => errors.push(`${field}: ${message}`));
    return { value, errors };
};

test('mocked tools reach the request as given; none when the field is empty', () => {
    const { request, errors } = experimentRequest(promptForm({ tools: JSON.stringify([SEARCH, { name: 'book', parameters: { type: 'object' } }]) }));
    assert.deepEqual(errors, []);
    assert.deepEqual(request.tools, [SEARCH, { name: 'book', parameters: { type: 'object' } }]);
    assert.equal('tools' in experimentRequest(promptForm()).request, false);
    assert.equal('tools' in experimentRequest(promptForm({ tools: '  \n' })).request, false);
    assert.deepEqual(experimentRequest(promptForm({ tools: '[]' })).request.tools, [], 'an empty list is the user\'s to send');
});

test('mocked tools are checked with the server\'s messages, the first problem only', () => {
    const longName = 'x'.repeat(65);
    const cases = [
        ['{"name": "search"}', 'tools must be an array'],
        [JSON.stringify(Array.from({ length: 65 }, (_, i) => ({ name: `t${i}`, parameters: {} }))), 'tools must have at most 64 items'],
        ['[7]', 'tools[0] must be an object'],
        [JSON.stringify([SEARCH, { name: 'b', parameters: {}, url: 'http://x' }]), 'tools[1].url is not a known field'],
        ['[{"parameters": {}}]', 'tools[0].name is required'],
        ['[{"name": 3, "parameters": {}}]', 'tools[0].name must be a string'],
        [JSON.stringify([{ name: '_search', parameters: {} }]), 'tools[0].name must be 1-64 characters of letters, digits, \'_\', \'.\' or \'-\', starting with a letter or digit'],
        [JSON.stringify([{ name: 'tools::search', parameters: {} }]), 'tools[0].name must be 1-64 characters of letters, digits, \'_\', \'.\' or \'-\', starting with a letter or digit'],
        [JSON.stringify([{ name: longName, parameters: {} }]), 'tools[0].name must be 1-64 characters of letters, digits, \'_\', \'.\' or \'-\', starting with a letter or digit'],
        [JSON.stringify([SEARCH, { name: 'b', parameters: {} }, { name: 'search', parameters: {} }]), 'tools[2].name "search" is declared twice'],
        [JSON.stringify([{ name: 'a', description: 1, parameters: {} }]), 'tools[0].description must be a string'],
        // 2,049 characters of two bytes each: more than 4,096 bytes, fewer characters.
        [JSON.stringify([{ name: 'a', description: 'é'.repeat(2049), parameters: {} }]), 'tools[0].description must be at most 4096 bytes'],
        ['[{"name": "a"}]', 'tools[0].parameters is required'],
        ['[{"name": "a", "parameters": []}]', 'tools[0].parameters must be a JSON Schema object'],
        ['[{"name": "a", "parameters": "object"}]', 'tools[0].parameters must be a JSON Schema object'],
    ];
    for (const [tools, message] of cases) {
        assert.deepEqual(collect(toolsPart, { tools }).errors, [`tools: ${message}`], tools.slice(0, 60));
        assert.equal(experimentRequest(promptForm({ tools })).request, null, 'no request with an error');
    }
    // At the limits: 64 tools, a 64-character name, 4,096 bytes of description, dots and dashes.
    assert.equal(toolsProblem(Array.from({ length: 64 }, (_, i) => ({ name: `t${i}`, parameters: {} }))), null);
    assert.equal(toolsProblem([{ name: 'x'.repeat(64), description: 'é'.repeat(2048), parameters: {} }, { name: '9a.b-c_d', parameters: {} }]), null);
    assert.match(collect(toolsPart, { tools: '[{"name": ' }).errors[0], /^tools: tools must be a JSON array of \{name, description, parameters\}: /);
    // The advanced JSON points to these fields instead of taking tools or a simulator.
    assert.deepEqual(errorsOf(promptForm({ extra: JSON.stringify({ tools: [SEARCH] }) })), ['extra: advanced settings: tools has its own fields (Agent: mocked tools and a simulated user)']);
    assert.deepEqual(errorsOf(promptForm({ extra: '{"simulator": {}}' })), ['extra: advanced settings: simulator has its own fields (Agent: mocked tools and a simulated user)']);
});

const SIM = { simulator_model: 'stub-user', simulator_provider: 'openai', simulator_instructions: 'You are a traveller named {{name}}.' };

test('the simulated user reaches the request with only what is filled in', () => {
    const { request, errors } = experimentRequest(promptForm({ ...SIM, simulator_max_turns: '4', simulator_stop: '<<END>>' }));
    assert.deepEqual(errors, []);
    assert.deepEqual(request.simulator, { model: { model: 'stub-user', provider: 'openai' }, instructions: 'You are a traveller named {{name}}.', max_turns: 4, stop: '<<END>>' });
    // max_turns and stop left to the server's defaults; the provider inferred by the server.
    assert.deepEqual(experimentRequest(promptForm({ ...SIM, simulator_provider: '' })).request.simulator,
        { model: { model: 'stub-user' }, instructions: 'You are a traveller named {{name}}.' });
    assert.equal('simulator' in experimentRequest(promptForm()).request, false, 'no simulator unless a field of it is filled in');
    // A stop token is matched as typed: spaces are part of it.
    assert.equal(collect(simulatorPart, { ...SIM, simulator_stop: ' ' }).value.stop, ' ');
    assert.equal(collect(simulatorPart, { ...SIM, simulator_max_turns: ' 20 ' }).value.max_turns, 20);
    assert.equal(collect(simulatorPart, { ...SIM, simulator_max_turns: '1' }).value.max_turns, 1);
    // It goes with every dimension, and with tools.
    const both = experimentRequest(modelForm({ ...SIM, tools: JSON.stringify([SEARCH]) })).request;
    assert.deepEqual([both.dimension, both.tools, both.simulator.model], ['model', [SEARCH], { model: 'stub-user', provider: 'openai' }]);
});

test('the simulated user\'s client checks use the server\'s messages', () => {
    const max = 'simulator_max_turns: simulator.max_turns must be an integer between 1 and 20';
    for (const [over, want] of [
        [{ simulator_model: ' ' }, ['simulator_model: simulator.model.model cannot be empty']],
        [{ simulator_instructions: ' \n' }, ['simulator_instructions: simulator.instructions cannot be empty']],
        [{ simulator_max_turns: '0' }, [max]],
        [{ simulator_max_turns: '21' }, [max]],
        [{ simulator_max_turns: '2.5' }, [max]],
        [{ simulator_max_turns: '-1' }, [max]],
        [{ simulator_max_turns: 'five' }, [max]],
    ]) {
        assert.deepEqual(errorsOf(promptForm({ ...SIM, ...over })), want, JSON.stringify(over));
    }
    // One field filled in is a simulated user asked for: the others are required.
    assert.deepEqual(errorsOf(promptForm({ simulator_max_turns: '3' })), [
        'simulator_model: simulator.model.model cannot be empty', 'simulator_instructions: simulator.instructions cannot be empty',
    ]);
    assert.deepEqual(errorsOf(promptForm({ simulator_stop: SIMULATOR_DEFAULT_STOP })).length, 2);
});

test('edit as new brings the tools and the simulated user back, and the same request out', () => {
    const stored = {
        request: {
            dimension: 'prompt', model: { model: 'stub-model' }, control: { label: 'terse', prompt: 'I need a room.', system_prompt: null },
            treatments: [{ label: 'polite', prompt: 'Hello! I need a room.', system_prompt: null }], dataset_id: DS,
            evaluator: { function_id: 'eval::assert::exact', arguments: { expected: '{{expected}}' } }, repeats: 1, concurrency: 2,
            analysis: { alpha: 0.05, min_effect: 0 }, tools: [SEARCH],
            // normalized: max_turns and stop are always there
            simulator: { model: { model: 'stub-user', provider: 'openai' }, instructions: 'You are {{name}}.', max_turns: 5, stop: '[[DONE]]' },
        },
    };
    const f = experimentToForm(stored);
    assert.deepEqual([f.simulator_model, f.simulator_provider, f.simulator_instructions, f.simulator_max_turns, f.simulator_stop],
        ['stub-user', 'openai', 'You are {{name}}.', '5', '[[DONE]]']);
    assert.deepEqual(JSON.parse(f.tools), [SEARCH]);
    assert.equal(f.extra, '', 'neither goes to the advanced JSON');
    const { request, errors } = experimentRequest(f);
    assert.deepEqual(errors, []);
    assert.deepEqual(request.tools, stored.request.tools);
    assert.deepEqual(request.simulator, stored.request.simulator);
    // Without them the fields stay empty.
    const plain = experimentToForm({ request: { ...stored.request, tools: undefined, simulator: null } });
    assert.deepEqual([plain.tools, plain.simulator_model, plain.simulator_instructions, plain.simulator_max_turns], ['', '', '', '']);
});

test('server details about the tools and the simulated user are placed at their fields', () => {
    const instructions = 'You are {{ name }}, from {{user.city}}.';
    for (const [detail, field] of [
        ['tools must be an array', 'tools'],
        ['tools[0].parameters is not a valid JSON Schema: type must be a string or an array', 'tools'],
        ['tools[2]: lookup is also a registered tool', 'tools'],
        ['case q3: tool_results.book names no declared tool', 'tools'],
        ['case q3: tool_results must be an object', 'tools'],
        ['simulator must be an object', 'simulator_model'],
        ['simulator.model is required', 'simulator_model'],
        ['simulator.model.model cannot be empty', 'simulator_model'],
        ['simulator.colour is not a known field', 'simulator_model'],
        ['simulator.model.provider cannot be empty when supplied', 'simulator_provider'],
        ['simulator.instructions cannot be empty', 'simulator_instructions'],
        ['simulator.max_turns must be an integer between 1 and 20', 'simulator_max_turns'],
        ['simulator.stop must be a non-empty string', 'simulator_stop'],
        ['case ana: template variable name is not defined', 'simulator_instructions'],
        ['case ana: template variable user.city is not defined', 'simulator_instructions'],
    ]) {
        assert.equal(agentFieldForDetail(detail, { instructions }), field, detail);
        assert.equal(experimentFieldForDetail(detail, { instructions }), field, detail);
    }
    // A variable the instructions do not use is the prompt's, as before.
    assert.equal(agentFieldForDetail('case ana: template variable question is not defined', { instructions }), null);
    assert.equal(experimentFieldForDetail('case ana: template variable question is not defined', { instructions }), 'control_prompt');
    assert.equal(experimentFieldForDetail('case ana: template variable name is not defined'), 'control_prompt', 'no instructions');
    assert.equal(experimentFieldForDetail('case ana: template variable user is not defined', { instructions }), 'control_prompt', 'user.city is not user');
    assert.equal(experimentFieldForDetail('budget.max_cost_usd needs a price for model stub-user', { instructions }), 'max_cost_usd');
});

test('the plan shows the simulated user\'s and the judge\'s calls, with and without a price', () => {
    const base = { cases: 1, arms: 2, repeats: 1, runs: 2, calls: { min: 2 }, tokens: { input_estimate: 10, output_max: 32768 }, cost_usd: null, power: {} };
    const priced = { ...base, simulator: { calls_max: 6, agent_answers_max: 8, output_tokens_max: 24576, cost_usd: { output_max: 0.049152 } } };
    const lines = planFigures(priced, 'fixed', null);
    const sim = lines.find((l) => l.key === 'simulator');
    assert.deepEqual(sim, {
        key: 'simulator', label: 'Simulated user',
        text: 'at most 6 calls · at most 24,576 output tokens · at most $0.0492 of output · the arms answer at most 8 times (the output maximum above counts every answer)',
    });
    assert.deepEqual(lines.map((l) => l.key), ['runs', 'calls', 'tokens', 'cost', 'simulator', 'cases_needed']);
    const one = planAgentFigures({ simulator: { calls_max: 1, agent_answers_max: 1, output_tokens_max: 0, cost_usd: null } });
    assert.deepEqual(one.map((l) => l.text), ['at most 1 call · at most 0 output tokens · no price for its model: not estimated · the arms answer at most 1 time (the output maximum above counts every answer)']);
    const judged = planAgentFigures({ judge: { calls: 12, output_tokens_max: 6144, cost_usd: null }, simulator: null });
    assert.deepEqual(judged, [{ key: 'judge', label: 'Judge', text: '12 calls · at most 6,144 output tokens · no price for the judge\'s model: not estimated' }]);
    assert.equal(planAgentFigures({ judge: { calls: 1, output_tokens_max: 512, cost_usd: { output_max: 0.001 } } })[0].text, '1 call · at most 512 output tokens · at most $0.001 of output');
    assert.deepEqual(planAgentFigures({ judge: null, simulator: null }), []);
    assert.deepEqual(planAgentFigures(null), []);
});

test('a run\'s figures: the agent\'s answers, tokens and cost apart from the simulated user\'s', () => {
    const simulated = {
        turns: 3, input_tokens: 80, output_tokens: 20, total_tokens: 100, cost_usd: 0.12,
        simulator_calls: 3, simulator_input_tokens: 21, simulator_output_tokens: 9, simulator_total_tokens: 30, simulator_cost_usd: 0.0039,
    };
    const f = runFigures(simulated);
    assert.deepEqual(f.agent, { turns: 3, input: 80, output: 20, total: 100, cost: 0.12, text: '3 answers · 100 tokens (80 input, 20 output) · $0.1200' });
    assert.deepEqual(f.simulator, { calls: 3, input: 21, output: 9, total: 30, cost: 0.0039, text: '3 calls · 30 tokens (21 input, 9 output) · $0.0039' });
    // A simulator without a price for every call has no cost; one call, one answer.
    const unpriced = runFigures({ ...simulated, turns: 1, simulator_calls: 1, simulator_cost_usd: undefined, cost_usd: null });
    assert.equal(unpriced.agent.text, '1 answer · 100 tokens (80 input, 20 output) · no price');
    assert.equal(unpriced.simulator.text, '1 call · 30 tokens (21 input, 9 output) · no price');
    // Without a simulated user: turns are the agent's turns, and there is no simulator figure.
    const plain = runFigures({ turns: 2, input_tokens: 10, output_tokens: 2, total_tokens: null, cost_usd: 0 });
    assert.equal(plain.simulator, null);
    assert.deepEqual(plain.agent, { turns: 2, input: 10, output: 2, total: 12, cost: 0, text: '2 turns · 12 tokens (10 input, 2 output) · $0' });
    assert.equal(runFigures(null).agent.text, '— · — tokens (— input, — output) · no price');
});

test('the simulated user\'s turns are labelled; a case row whose messages are null had none', () => {
    const conversation = [
        { role: 'user', content: 'I need a room.' },
        { role: 'assistant', content: 'Which city?' },
        { role: 'user', content: 'Oslo.' },
        { role: 'assistant', content: 'R42 is free. Which night?', function_calls: [{ name: 'search', arguments: { city: 'Oslo' }, result: { rooms: ['R42'] } }] },
        { role: 'user', content: 'Friday.' },
        { role: 'assistant', content: 'Booked R42 in Oslo for Friday.' },
    ];
    // The rows of GET …/cases carry `messages`, null for a case without.
    const caseRow = { case_id: 'ana', vars: { name: 'Ana' }, expected: 'x', messages: null };
    const conv = runConversation({ transcript: { conversation } }, { caseRow, prompt: 'I need a room.', simulated: true });
    assert.deepEqual(conv.turns.map((t) => t.origin), ['prompt', 'answer', 'simulated', 'answer', 'simulated', 'answer']);
    assert.deepEqual(conv.turns.map(turnTitle), ['user · the prompt', 'assistant · the answer', 'user · simulated user', 'assistant · the answer', 'user · simulated user', 'assistant · the answer']);
    assert.equal(conversationSummary(conv), '6 turns · 2 from the simulated user · 1 function call');
    // Without a simulated user a later user turn is only "next".
    assert.deepEqual(runConversation({ conversation }, { caseRow, prompt: 'p' }).turns.map((t) => t.origin), ['prompt', 'answer', 'user', 'answer', 'user', 'answer']);
    // A case row without the key: its messages are unknown, and with a simulated user nothing is told.
    const { messages, ...unknown } = caseRow;
    assert.equal(messages, null);
    assert.deepEqual(runConversation({ conversation }, { caseRow: unknown, prompt: 'p', simulated: true }).turns.map((t) => t.origin), Array(6).fill(undefined));
    // An empty prompt sends the case's messages as they are: every later user turn is the simulator's.
    const withMessages = { ...caseRow, messages: [{ role: 'user', content: 'I need a room.' }] };
    assert.deepEqual(runConversation({ conversation }, { caseRow: withMessages, prompt: '', simulated: true }).turns.map((t) => t.origin), ['case', 'answer', 'simulated', 'answer', 'simulated', 'answer']);
    assert.equal(conversationSummary({ turns: [{ role: 'user' }, { role: 'assistant' }] }), '2 turns');
});
