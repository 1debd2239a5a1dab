// evald's trace export without content capture (the default), end to end: an experiment
// over a tiny inline dataset with two arms (roots carry evald.experiment_id, evald.case_id,
// evald.repeat; the /runs rows name their trace), the weather evaluation with its HTTP tool
// and HTTP evaluator (no message content anywhere, the rest as with capture), runs that
// fail (ERROR spans with error.type: a tool and an evaluator answering 500, a provider
// answering 400), a generation retried after a 429 (an evald.retry event), a run with a
// simulated user and mocked tools (one trace per run: the agent's and the simulator's chat
// spans under its root, counted against the API's figures), a session turn, and the
// signal-specific protocol variable winning. Real evald, evald-stub and PostgreSQL
// on loopback; this process is the collector, the tools and the evaluators.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import {
    createDatabase, startStub, startEvald, Receiver, registerWeatherTools, weatherScript,
    weatherRoutes, weatherRequest, runEvaluation, runExperiment, runsOf, waitForTraces, waitFor,
    checkWeatherTraces, checkSpanFormat, spansOf, traces, attrs, attrChecker, putTool, api,
    CONTENT_KEYS, MARK, HEX32,
} from './e2e_support.mjs';

const EXP_CONTROL = 'exp-ctl';
const EXP_TREATMENT = 'exp-trt';

// The weather rules, and in front of them the experiment's and the failing runs' rules.
function script() {
    const base = weatherScript();
    return {
        ...base,
        rules: [
            { when: { has_tool_result: false, prompt_contains: '(BROKEN)' },
                reply: { tool_calls: [{ name: 'otel_broken', arguments: { gauge: 'g1' } }] } },
            { when: { has_tool_result: true, prompt_contains: '(BROKEN)' }, reply: { text: 'the gauge is broken' } },
            { when: { prompt_contains: '(PROVIDER-400)' }, fault: { status: 400, message: 'scripted bad request' } },
            { when: { prompt_contains: '(RETRY) A' }, times: 1, fault: { status: 429, retry_after_ms: 100 } },
            { when: { prompt_contains: '(RETRY) B' }, times: 1, fault: { status: 429, retry_after_ms: 100 } },
            { when: { prompt_contains: '(RETRY)' }, reply: { text: 'OK' } },
            { when: { prompt_contains: '(EXP-A)' }, reply: { text: 'OK' }, usage: { input_tokens: 7, output_tokens: 1 } },
            { when: { prompt_contains: '(EXP-B)' }, reply: { text: 'Sure, here it is: OK' }, usage: { input_tokens: 7, output_tokens: 6 } },
            ...SIM_RULES,
            ...base.rules,
        ],
    };
}

// The simulated conversation (docs/agents.md, "Simulated users", "Mocked tools"): the agent
// (stub-model) calls the mocked tool search, asks for the night; the simulated user
// (SIM_MODEL, matched by model) answers "Friday, please."; the agent calls the mocked tool
// book, answers that it booked; the user says [[DONE]]. Each rule has its own usage so
// that the spans' tokens can be summed against the run's benchmark.
const SIM_MODEL = 'stub-user';
const SIM_RULES = [
    { when: { model: SIM_MODEL, prompt_contains: 'Which night?' }, reply: { text: 'Friday, please.' },
        usage: { input_tokens: 9, output_tokens: 3 } },
    { when: { model: SIM_MODEL, prompt_contains: 'Booked' }, reply: { text: 'Thanks! [[DONE]]' },
        usage: { input_tokens: 11, output_tokens: 2 } },
    { when: { model: 'stub-model', prompt_contains: '(SIM-ROOM)', has_tool_result: false },
        reply: { tool_calls: [{ name: 'search', arguments: { query: 'free rooms' } }] }, usage: { input_tokens: 13, output_tokens: 4 } },
    { when: { model: 'stub-model', prompt_contains: '(SIM-ROOM)', has_tool_result: true },
        reply: { text: 'Room R12 is free. Which night?' }, usage: { input_tokens: 17, output_tokens: 5 } },
    { when: { model: 'stub-model', prompt_contains: 'Friday, please.', has_tool_result: false },
        reply: { tool_calls: [{ name: 'book', arguments: { room: 'R12' } }] }, usage: { input_tokens: 19, output_tokens: 6 } },
    { when: { model: 'stub-model', prompt_contains: 'Friday, please.', has_tool_result: true },
        reply: { text: 'Booked R12 for Friday.' }, usage: { input_tokens: 23, output_tokens: 7 } },
];

const routes = {
    ...weatherRoutes(),
    '/broken': async () => ({ status: 500, body: { error: 'the gauge service is down' } }),
    '/badjudge': async () => ({ status: 500, body: { error: 'the judge is down' } }),
};

let db;
let stub;
let receiver;
let evald;

before(async () => {
    db = createDatabase();
    stub = await startStub();
    await stub.script(script());
    receiver = await new Receiver({ tools: routes }).start();
    evald = await startEvald({
        db, stub,
        env: {
            OTEL_EXPORTER_OTLP_ENDPOINT: receiver.base,
            OTEL_BSP_SCHEDULE_DELAY: '200',
            // The signal-specific protocol wins over the general one.
            OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
            OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
        },
    });
    await registerWeatherTools(evald, receiver);
    await putTool(evald, 'otel.broken', `${receiver.base}/broken`, {
        type: 'object', properties: { gauge: { type: 'string' } }, required: ['gauge'],
    });
    await putTool(evald, 'otel.badjudge', `${receiver.base}/badjudge`);
});

after(async () => {
    await evald?.stop();
    await receiver?.stop();
    await stub?.stop();
    db?.drop();
});

describe('an experiment of two arms over an inline dataset', () => {
    let exp;
    let byTrace;
    before(async () => {
        exp = await runExperiment(evald, {
            name: 'otel-e2e',
            dimension: 'prompt',
            cases: [
                { id: 'k1', vars: { word: 'alpha' }, expected: 'OK' },
                { id: 'k2', vars: { word: 'bravo' }, expected: 'OK' },
            ],
            model: { model: 'stub-model', provider: 'openai' },
            control: { label: EXP_CONTROL, prompt: '{{word}}: reply with OK. (EXP-A)' },
            treatments: [{ label: EXP_TREATMENT, prompt: '{{word}}: answer OK. (EXP-B)' }],
            evaluator: { function_id: 'eval::assert::normalized_text', arguments: { expected: '{{expected}}' } },
            repeats: 2,
        });
        // One generation and one (built-in) evaluator call per run.
        byTrace = await waitForTraces(receiver, exp.rows, () => 2);
    });

    test('the /runs rows name their trace, one root per run', () => {
        assert.equal(exp.rows.length, 8, '2 cases × 2 arms × 2 repeats');
        const own = [...byTrace.values()].flatMap((t) => t.roots)
            .filter((s) => attrs(s.attributes)['evald.experiment_id']?.stringValue === exp.id);
        assert.equal(own.length, exp.rows.length, `one root per experiment run: ${own.length} roots for ${exp.rows.length} runs`);
        const runIds = own.map((s) => attrs(s.attributes)['evald.run_id']?.stringValue);
        assert.equal(new Set(runIds).size, runIds.length, `evald.run_id is unique within the experiment: ${runIds.join(', ')}`);
        for (const row of exp.rows) {
            assert.match(row.trace_id ?? '', HEX32, `run ${row.run_id}: GET /v1/experiments/${exp.id}/runs gives no trace_id (${JSON.stringify(row.trace_id)})`);
            const t = byTrace.get(row.trace_id);
            assert.ok(t && t.roots.length === 1, `run ${row.run_id}: no single exported root has the row's trace_id ${row.trace_id}`);
            assert.equal(t.roots[0].traceId, row.trace_id);
        }
    });

    test('roots carry evald.experiment_id, evald.case_id and evald.repeat', () => {
        for (const row of exp.rows) {
            const root = byTrace.get(row.trace_id).roots[0];
            checkSpanFormat(root);
            const where = `experiment run ${row.run_id} (case ${row.case_id}, arm ${row.arm}, repeat ${row.repeat})`;
            const label = row.arm === 0 ? EXP_CONTROL : EXP_TREATMENT;
            assert.equal(root.name, `invoke_agent ${label}`, `${where}: root name`);
            assert.equal(root.kind, 1, `${where}: root kind INTERNAL`);
            const a = attrChecker(root);
            a.str('gen_ai.operation.name', 'invoke_agent');
            a.str('gen_ai.agent.name', label);
            a.str('gen_ai.conversation.id', row.session_id);
            a.str('evald.experiment_id', exp.id);
            a.str('evald.case_id', row.case_id);
            a.int('evald.repeat', row.repeat);
            a.str('evald.run_id', row.run_id);
            a.str('evald.role', row.arm === 0 ? 'control' : 'treatment');
            a.int('evald.attempt', row.attempt);
            a.str('gen_ai.request.model', 'stub-model');
            a.absent('evald.evaluation_id');
            const evs = (root.events ?? []).filter((e) => e.name === 'gen_ai.evaluation.result');
            assert.equal(evs.length, 1, `${where}: one gen_ai.evaluation.result event`);
            const ev = attrChecker({ ...evs[0], spanId: root.spanId, name: `${root.name} event` });
            ev.str('gen_ai.evaluation.name', 'eval::assert::normalized_text');
            ev.str('gen_ai.evaluation.score.label', row.passed ? 'pass' : 'fail');
            ev.double('gen_ai.evaluation.score.value', typeof row.score === 'number' ? row.score : (row.passed ? 1 : 0));
            assert.equal(row.passed, row.arm === 0, `${where}: the control passes and the treatment misses`);
        }
    });

    test('the log line of each experiment run carries its trace_id and span_id', () => {
        const lines = evald.logLines();
        for (const row of exp.rows) {
            const root = byTrace.get(row.trace_id).roots[0];
            const naming = lines.filter((l) => l.session_id === row.session_id);
            assert.ok(naming.length >= 1, `no log line names experiment run ${row.run_id} (session ${row.session_id})`);
            for (const l of naming) {
                assert.equal(l.trace_id, row.trace_id, `a log line naming run ${row.run_id} lacks its trace_id: ${JSON.stringify(l)}`);
                assert.equal(l.span_id, root.spanId, `a log line naming run ${row.run_id} lacks its root span_id: ${JSON.stringify(l)}`);
            }
        }
    });

    test('each experiment run: one chat span and an INTERNAL evaluate span under its root', () => {
        for (const row of exp.rows) {
            const t = byTrace.get(row.trace_id);
            const root = t.roots[0];
            const names = t.children.map((c) => c.name).sort();
            assert.deepEqual(names, ['chat stub-model', 'evaluate eval::assert::normalized_text'], `run ${row.run_id}: children`);
            for (const c of t.children) {
                checkSpanFormat(c);
                assert.equal(c.parentSpanId, root.spanId, `run ${row.run_id}: ${c.name} is a child of the root`);
            }
            const evaluate = t.children.find((c) => c.name.startsWith('evaluate '));
            assert.equal(evaluate.kind, 1, `run ${row.run_id}: a built-in evaluator's span is INTERNAL`);
        }
    });
});

describe('an experiment with a simulated user and mocked tools', () => {
    const SIM_CONTROL = 'sim-ctl';
    const SIM_TREATMENT = 'sim-trt';
    let exp;
    let byTrace;
    // What the API says of a run: its agent generations, simulator calls and function calls.
    const figures = (row) => ({
        generations: row.transcript?.generations?.length ?? 0,
        simulatorCalls: row.benchmark?.simulator_calls ?? 0,
        functionCalls: row.transcript?.function_calls?.length ?? 0,
    });
    before(async () => {
        exp = await runExperiment(evald, {
            name: 'otel-simulated',
            dimension: 'prompt',
            cases: [{ id: 'ana', vars: { name: 'Ana' },
                tool_results: {
                    search: [{ when: { query: 'free rooms' }, result: { rooms: ['R12'] } }],
                    book: { status: 'confirmed', room: 'R12' },
                } }],
            model: { model: 'stub-model', provider: 'openai' },
            control: { label: SIM_CONTROL, prompt: 'I need a room. (SIM-ROOM)' },
            treatments: [{ label: SIM_TREATMENT, prompt: 'Hello! I need a room. (SIM-ROOM)' }],
            tools: [
                { name: 'search', description: 'Free rooms for a night', parameters: { type: 'object',
                    properties: { query: { type: 'string' } }, required: ['query'] } },
                { name: 'book', parameters: { type: 'object', properties: { room: { type: 'string' } } } },
            ],
            simulator: { model: { model: SIM_MODEL, provider: 'openai' },
                instructions: 'You are {{name}}, a traveller. Book one night.', max_turns: 5 },
            evaluator: { function_id: 'eval::assert::exact', arguments: { expected: 'Booked R12 for Friday.' } },
            repeats: 1,
        });
        for (const row of exp.rows) {
            assert.equal(row.status, 'completed', `simulated run ${row.run_id}: ${JSON.stringify(row.failures)}`);
            assert.match(row.trace_id ?? '', HEX32, `simulated run ${row.run_id}: no trace_id`);
        }
        // Every generation, simulator call and tool call, and the evaluator's span.
        byTrace = await waitForTraces(receiver, exp.rows, (row) => {
            const f = figures(row);
            return f.generations + f.simulatorCalls + f.functionCalls + 1;
        });
    });

    test('the API\'s figures: a conversation of several turns with simulator and tool calls', (t) => {
        assert.equal(exp.rows.length, 2, 'one case × 2 arms × 1 repeat');
        for (const row of exp.rows) {
            const f = figures(row);
            t.diagnostic(`run ${row.run_id}: turns ${row.benchmark?.turns}, generations ${f.generations}, ` +
                `simulator_calls ${f.simulatorCalls}, function calls ${f.functionCalls}`);
            const where = `simulated run ${row.run_id}`;
            // Not the figures checked below, only that the scenario exercised what it is about.
            assert.ok(row.benchmark.turns >= 2, `${where}: several agent turns (benchmark ${JSON.stringify(row.benchmark)})`);
            assert.ok(f.simulatorCalls >= 2, `${where}: several simulator calls (benchmark ${JSON.stringify(row.benchmark)})`);
            assert.ok(f.generations > row.benchmark.turns, `${where}: turns with more than one generation`);
            assert.ok(f.functionCalls >= 2 && row.transcript.function_calls.every((c) => c.mocked === true),
                `${where}: mocked function calls: ${JSON.stringify(row.transcript.function_calls)}`);
        }
    });

    test('each run is one trace whose root is invoke_agent <label>', () => {
        for (const row of exp.rows) {
            const where = `simulated run ${row.run_id} (arm ${row.arm})`;
            const t = byTrace.get(row.trace_id);
            assert.ok(t, `${where}: nothing exported with trace ${row.trace_id}`);
            assert.equal(t.roots.length, 1, `${where}: roots ${t.roots.map((s) => s.name).join(', ')}`);
            const root = t.roots[0];
            checkSpanFormat(root);
            const label = row.arm === 0 ? SIM_CONTROL : SIM_TREATMENT;
            assert.equal(root.name, `invoke_agent ${label}`, `${where}: root name`);
            const a = attrChecker(root);
            a.str('gen_ai.operation.name', 'invoke_agent');
            a.str('gen_ai.agent.name', label);
            a.str('evald.experiment_id', exp.id);
            a.str('evald.run_id', row.run_id);
            a.str('gen_ai.request.model', 'stub-model');
            a.absent('evald.simulator');
        }
        // No simulator span outside the runs' traces (this is the suite's only simulator).
        const simSpans = spansOf(receiver.decoded()).map((x) => x.span)
            .filter((sp) => attrs(sp.attributes)['evald.simulator'] !== undefined);
        const runTraces = new Set(exp.rows.map((row) => row.trace_id));
        assert.deepEqual(simSpans.filter((sp) => !runTraces.has(sp.traceId)).map((sp) => `${sp.name} in ${sp.traceId}`), [],
            'simulator spans outside the runs\' traces');
        assert.equal(simSpans.length, exp.rows.reduce((n, row) => n + figures(row).simulatorCalls, 0),
            'simulator spans exported vs the runs\' benchmark.simulator_calls');
    });

    test('the agent\'s and the simulator\'s chat spans are children of the root, told apart by evald.simulator', () => {
        for (const row of exp.rows) {
            const where = `simulated run ${row.run_id} (arm ${row.arm})`;
            const f = figures(row);
            const t = byTrace.get(row.trace_id);
            const root = t.roots[0];
            for (const c of t.all) checkSpanFormat(c);
            const chats = t.all.filter((s) => attrs(s.attributes)['gen_ai.operation.name']?.stringValue === 'chat');
            const sim = chats.filter((s) => attrs(s.attributes)['evald.simulator'] !== undefined);
            const agent = chats.filter((s) => attrs(s.attributes)['evald.simulator'] === undefined);
            for (const c of chats) {
                assert.equal(c.parentSpanId, root.spanId, `${where}: ${c.name} (${c.spanId}) is not a child of the root ${root.spanId}`);
                assert.equal(c.kind, 3, `${where}: ${c.name} is CLIENT`);
                assert.equal(c.status?.code ?? 0, 0, `${where}: ${c.name} status`);
            }
            assert.equal(sim.length, f.simulatorCalls,
                `${where}: simulator chat spans (${sim.length}) vs benchmark.simulator_calls (${f.simulatorCalls})`);
            assert.equal(agent.length, f.generations,
                `${where}: agent chat spans (${agent.length}) vs transcript.generations (${f.generations})`);
            for (const c of sim) {
                assert.equal(c.name, `chat ${SIM_MODEL}`, `${where}: a simulator span's name`);
                const a = attrChecker(c);
                assert.equal(a.a['evald.simulator'].boolValue, true, `${where}: ${c.name}: evald.simulator must be boolValue true, got ${JSON.stringify(a.a['evald.simulator'])}`);
                a.str('gen_ai.request.model', SIM_MODEL);
            }
            for (const c of agent) {
                assert.equal(c.name, 'chat stub-model', `${where}: an agent span's name`);
                attrChecker(c).str('gen_ai.request.model', 'stub-model');
            }
            // Their usage adds up to the run's figures, the simulator's apart from the agent's.
            const sum = (spans, key) => spans.reduce((n, s) => n + attrChecker(s).int(key), 0);
            assert.equal(sum(sim, 'gen_ai.usage.input_tokens'), row.benchmark.simulator_input_tokens, `${where}: simulator input tokens`);
            assert.equal(sum(sim, 'gen_ai.usage.output_tokens'), row.benchmark.simulator_output_tokens, `${where}: simulator output tokens`);
            assert.equal(sum(agent, 'gen_ai.usage.input_tokens'), row.benchmark.input_tokens, `${where}: agent input tokens`);
            assert.equal(sum(agent, 'gen_ai.usage.output_tokens'), row.benchmark.output_tokens, `${where}: agent output tokens`);
            // The conversation starts with the agent's generation, not the simulator's.
            const byStart = [...chats].sort((x, y) => (BigInt(x.startTimeUnixNano) < BigInt(y.startTimeUnixNano) ? -1 : 1));
            assert.ok(!sim.includes(byStart[0]), `${where}: the conversation starts with the agent`);
        }
    });

    test('a mocked tool\'s execute_tool span carries evald.tool.mocked: true', () => {
        for (const row of exp.rows) {
            const where = `simulated run ${row.run_id} (arm ${row.arm})`;
            const t = byTrace.get(row.trace_id);
            const root = t.roots[0];
            const tools = t.all.filter((s) => attrs(s.attributes)['gen_ai.operation.name']?.stringValue === 'execute_tool');
            const calls = row.transcript.function_calls;
            assert.equal(tools.length, calls.length, `${where}: execute_tool spans (${tools.map((s) => s.name).join(', ')}) vs transcript.function_calls (${calls.length})`);
            assert.deepEqual(tools.map((s) => attrs(s.attributes)['gen_ai.tool.name']?.stringValue).sort(),
                calls.map((c) => c.function_id ?? c.name).sort(), `${where}: the tools called`);
            for (const s of tools) {
                assert.equal(s.parentSpanId, root.spanId, `${where}: ${s.name} is a child of the root`);
                assert.equal(s.name, `execute_tool ${attrs(s.attributes)['gen_ai.tool.name']?.stringValue}`, `${where}: span name`);
                const m = attrs(s.attributes)['evald.tool.mocked'];
                assert.equal(m?.boolValue, true, `${where}: ${s.name}: evald.tool.mocked must be boolValue true, got ${JSON.stringify(m)}`);
                assert.equal(s.status?.code ?? 0, 0, `${where}: ${s.name} status`);
            }
            // Nothing else but the evaluator's span.
            const other = t.children.filter((s) => !tools.includes(s)
                && attrs(s.attributes)['gen_ai.operation.name']?.stringValue !== 'chat');
            assert.deepEqual(other.map((s) => s.name), ['evaluate eval::assert::exact'], `${where}: the root's other children`);
        }
    });
});

describe('content capture off (the default)', () => {
    let doc;
    let byTrace;
    before(async () => {
        doc = await runEvaluation(evald, weatherRequest({ runs: 1 }));
        byTrace = await waitForTraces(receiver, runsOf(doc), () => 4);
    });

    test('the weather evaluation: the same tree, attributes and traceparent, no content', () => {
        checkWeatherTraces({ doc, byTrace, receiver, stubPort: stub.port, capture: false });
    });

    test('no message content in any span or event of any export', () => {
        const spans = spansOf(receiver.decoded());
        assert.ok(spans.length > 0, 'nothing was exported');
        for (const { span } of spans) {
            const a = attrs(span.attributes);
            for (const k of CONTENT_KEYS) {
                assert.ok(!Object.hasOwn(a, k), `span ${span.name} carries ${k} without content capture`);
            }
            for (const ev of span.events ?? []) {
                const ea = attrs(ev.attributes);
                for (const k of CONTENT_KEYS) {
                    assert.ok(!Object.hasOwn(ea, k), `event ${ev.name} of ${span.name} carries ${k} without content capture`);
                }
            }
        }
        for (const e of receiver.exports) {
            const text = e.body.toString('utf8');
            for (const marker of [MARK.controlPrompt, MARK.treatmentPrompt, MARK.system, MARK.toolResult, MARK.reason, MARK.pass]) {
                assert.ok(!text.includes(marker), `an export holds message content (${marker}) without content capture`);
            }
        }
    });
});

describe('failed runs and failed calls', () => {
    let doc;
    let byTrace;
    before(async () => {
        doc = await runEvaluation(evald, {
            dimension: 'prompt',
            model: { model: 'stub-model', provider: 'openai' },
            control: { label: 'broken-a', prompt: 'Read the gauge. (BROKEN) A' },
            treatment: { label: 'broken-b', prompt: 'Read the gauge now. (BROKEN) B' },
            runs: 1,
            functions: { allow: ['otel.broken'], expose: 'native' },
            evaluator: { function_id: 'otel.badjudge' },
        });
        byTrace = await waitForTraces(receiver, runsOf(doc), () => 4);
    });

    test('a run that failed has an ERROR root with error.type', () => {
        for (const r of runsOf(doc)) {
            assert.equal(r.status, 'failed', `run ${r.run_id} should fail at its evaluator: ${JSON.stringify(r.failures)}`);
            const root = byTrace.get(r.trace_id).roots[0];
            assert.equal(root.status?.code, 2, `run ${r.run_id}: the root of a failed run has status ERROR (2), got ${JSON.stringify(root.status)}`);
            attrChecker(root).str('error.type', /\S/);
        }
    });

    test('a failed tool call and a failed evaluator call are ERROR spans with error.type', () => {
        for (const r of runsOf(doc)) {
            const t = byTrace.get(r.trace_id);
            const tool = t.children.find((c) => c.name === 'execute_tool otel.broken');
            assert.ok(tool, `run ${r.run_id}: no execute_tool otel.broken span; children: ${t.children.map((c) => c.name).join(', ')}`);
            assert.equal(tool.status?.code, 2, `run ${r.run_id}: the tool answered 500: its span's status is ERROR (2)`);
            attrChecker(tool).str('error.type', /\S/);
            const evaluate = t.children.find((c) => c.name === 'evaluate otel.badjudge');
            assert.ok(evaluate, `run ${r.run_id}: no evaluate otel.badjudge span`);
            assert.equal(evaluate.status?.code, 2, `run ${r.run_id}: the evaluator answered 500: its span's status is ERROR (2)`);
            attrChecker(evaluate).str('error.type', /\S/);
        }
    });
});

describe('a generation the provider refuses', () => {
    test('is an ERROR chat span with error.type = the HTTP status, under an ERROR root', async () => {
        const doc = await runEvaluation(evald, {
            dimension: 'prompt',
            model: { model: 'stub-model', provider: 'openai' },
            control: { label: 'p400-a', prompt: 'Say OK. (PROVIDER-400) A' },
            treatment: { label: 'p400-b', prompt: 'Say OK. (PROVIDER-400) B' },
            runs: 1,
            evaluator: { function_id: 'eval::assert::normalized_text', arguments: { expected: 'OK' } },
        });
        const byTrace = await waitForTraces(receiver, runsOf(doc), () => 1);
        for (const r of runsOf(doc)) {
            assert.equal(r.status, 'failed', `run ${r.run_id} should fail: the provider answers 400`);
            const t = byTrace.get(r.trace_id);
            const root = t.roots[0];
            assert.equal(root.status?.code, 2, `run ${r.run_id}: the root of a failed run is ERROR (2)`);
            attrChecker(root).str('error.type', /\S/);
            const chats = t.children.filter((c) => c.name === 'chat stub-model');
            assert.ok(chats.length >= 1, `run ${r.run_id}: no chat span for the refused generation; children: ${t.children.map((c) => c.name).join(', ')}`);
            for (const c of chats) {
                checkSpanFormat(c);
                assert.equal(c.status?.code, 2, `run ${r.run_id}: a refused generation's chat span is ERROR (2)`);
                attrChecker(c).str('error.type', '400');
                assert.equal(c.parentSpanId, root.spanId);
            }
        }
    });
});

describe('a generation retried after a 429', () => {
    test('is one chat span with an evald.retry event holding the wait', async () => {
        const doc = await runEvaluation(evald, {
            dimension: 'prompt',
            model: { model: 'stub-model', provider: 'openai' },
            // No labels: the agent is named after the role.
            control: { prompt: 'Say OK. (RETRY) A' },
            treatment: { prompt: 'Say OK. (RETRY) B' },
            runs: 1,
            evaluator: { function_id: 'eval::assert::normalized_text', arguments: { expected: 'OK' } },
        });
        const byTrace = await waitForTraces(receiver, runsOf(doc), () => 2);
        for (const r of runsOf(doc)) {
            assert.equal(r.status, 'completed', `run ${r.run_id}: ${JSON.stringify(r.failures)}`);
            const root = byTrace.get(r.trace_id).roots[0];
            assert.equal(root.name, `invoke_agent ${r.role}`, `run ${r.run_id}: an unlabelled arm's root is named after its role`);
            attrChecker(root).str('gen_ai.agent.name', r.role);
            const chats = byTrace.get(r.trace_id).children.filter((c) => c.name === 'chat stub-model');
            assert.equal(chats.length, 1, `run ${r.run_id}: a retried generation is one chat span, got ${chats.length}`);
            const chat = chats[0];
            checkSpanFormat(chat);
            assert.equal(chat.status?.code ?? 0, 0, `run ${r.run_id}: the generation succeeded in the end`);
            const retries = (chat.events ?? []).filter((e) => e.name === 'evald.retry');
            assert.equal(retries.length, 1, `run ${r.run_id}: one evald.retry event on the chat span, got ${JSON.stringify(chat.events)}`);
            const ev = attrChecker({ ...retries[0], spanId: chat.spanId, name: 'chat stub-model event evald.retry' });
            ev.int('http.response.status_code', 429);
            const waitKey = Object.keys(ev.a).find((k) => /wait/.test(k));
            assert.ok(waitKey, `the evald.retry event names the wait: ${Object.keys(ev.a).join(', ')}`);
            const wait = ev.int(waitKey);
            assert.ok(wait >= 0 && wait < 10000, `run ${r.run_id}: ${waitKey} = ${wait}`);
            const at = BigInt(retries[0].timeUnixNano);
            assert.ok(at >= BigInt(chat.startTimeUnixNano) - 2_000_000n && at <= BigInt(chat.endTimeUnixNano) + 2_000_000n,
                `run ${r.run_id}: the retry event's time lies outside its chat span`);
        }
    });
});

describe('a session turn', () => {
    test('is a trace of its own: root invoke_agent <title> with evald.session_id and evald.turn', async () => {
        const r = await api(evald.base, 'POST', '/v1/sessions', {
            title: 'otel-session', model: { model: 'stub-model', provider: 'openai' }, prompt: 'Reply with exactly OK.',
        });
        assert.equal(r.status, 202, `POST /v1/sessions answered ${r.status}: ${r.text}`);
        const id = r.json.session_id;
        let root;
        let t;
        await waitFor(`the session ${id}'s turn to be exported`, () => {
            const all = traces(spansOf(receiver.decoded()));
            for (const tr of all.values()) {
                const rt = tr.roots.find((s) => attrs(s.attributes)['evald.session_id']?.stringValue === id);
                if (rt && tr.children.length >= 1) {
                    root = rt;
                    t = tr;
                    return true;
                }
            }
            return false;
        }, 15000);
        checkSpanFormat(root);
        assert.equal(root.kind, 1, 'the turn\'s root is INTERNAL');
        const a = attrChecker(root);
        a.str('gen_ai.operation.name', 'invoke_agent');
        a.str('gen_ai.conversation.id', id);
        a.int('evald.turn', 1);
        a.int('evald.attempt', 1);
        const chats = t.children.filter((c) => c.name === 'chat stub-model');
        assert.equal(chats.length, 1, 'one generation in the turn');
        assert.equal(chats[0].parentSpanId, root.spanId, 'the generation is a child of the turn\'s root');
        // The lines written while the turn executes (docs/otel.md) carry its trace; one that
        // the request wrote ("session created") need not.
        const lines = evald.logLines().filter((l) => l.session_id === id);
        assert.ok(lines.some((l) => l.trace_id === root.traceId && l.span_id === root.spanId),
            `no log line of session ${id}'s turn carries trace_id ${root.traceId} and span_id ${root.spanId}:\n${lines.map((l) => JSON.stringify(l)).join('\n')}`);
        for (const l of lines.filter((x) => x.trace_id !== undefined)) {
            assert.equal(l.trace_id, root.traceId, `a log line of the turn carries another trace: ${JSON.stringify(l)}`);
        }
        assert.equal(root.name, 'invoke_agent otel-session', 'the root is named after the session\'s title');
        a.str('gen_ai.agent.name', 'otel-session');
    });
});

describe('a judge call', () => {
    test('is a chat span of a trace of its own with the judgement\'s attributes', async () => {
        const exp = await runExperiment(evald, {
            name: 'otel-judged',
            dimension: 'prompt',
            cases: [{ id: 'j1', vars: { word: 'judged' }, expected: 'OK' }],
            model: { model: 'stub-model', provider: 'openai' },
            control: { prompt: '{{word}}: reply with OK. (EXP-A)' },
            treatments: [{ prompt: '{{word}}: answer OK. (EXP-B)' }],
            judge: { kind: 'pairwise', model: { model: 'stub-model', provider: 'openai' }, task: '{{word}}' },
            repeats: 1,
        });
        const listed = await api(evald.base, 'GET', `/v1/experiments/${exp.id}/judgements`);
        assert.equal(listed.status, 200);
        assert.equal(listed.json.judgements.length, 2, 'one judge call per order');
        // The script's default answers text, so each judge call also makes its repair
        // generation: a child chat span of the call's root.
        const calls = listed.json.judgements.reduce((n, j) => n + (j.metrics?.calls ?? 0), 0);
        let mine = [];
        await waitFor('the judge calls\' spans', () => {
            mine = spansOf(receiver.decoded()).map((x) => x.span)
                .filter((sp) => attrs(sp.attributes)['evald.experiment_id']?.stringValue === exp.id
                    && attrs(sp.attributes)['evald.judgement.order'] !== undefined);
            return mine.length >= calls;
        }, 15000, 100);
        assert.equal(mine.length, calls, `a chat span per generation of the judge calls (${calls})`);
        const roots = mine.filter((sp) => !sp.parentSpanId);
        assert.equal(roots.length, 2, 'each judge call\'s first chat span is its trace\'s root');
        assert.notEqual(roots[0].traceId, roots[1].traceId, 'a trace per judge call');
        const byTrace = traces(spansOf(receiver.decoded()));
        const orders = new Set();
        for (const sp of mine) {
            checkSpanFormat(sp);
            assert.equal(sp.name, 'chat stub-model');
            assert.equal(sp.kind, 3, 'CLIENT');
            const root = roots.find((r) => r.traceId === sp.traceId);
            assert.ok(root, 'in the trace of a judge call');
            if (sp !== root) {
                assert.equal(sp.parentSpanId, root.spanId, 'a later generation is a child of the first');
                assert.equal(attrs(sp.attributes)['evald.repair']?.boolValue, true);
            }
            assert.ok(byTrace.get(sp.traceId).all.every((x) => mine.some((m) => m.spanId === x.spanId)), 'nothing else in the trace');
            const a = attrChecker(sp);
            a.str('gen_ai.operation.name', 'chat');
            a.str('gen_ai.request.model', 'stub-model');
            a.str('evald.case_id', 'j1');
            a.int('evald.judgement.case_index', 1);
            a.int('evald.judgement.repeat', 1);
            a.int('evald.judgement.treatment', 1);
            a.int('evald.attempt', 1);
            orders.add(attrs(sp.attributes)['evald.judgement.order'].intValue);
        }
        assert.deepEqual([...orders].sort(), ['1', '2'], 'both orders');
        // No run's trace holds a judge span.
        for (const row of exp.rows) assert.ok(!mine.some((sp) => sp.traceId === row.trace_id));
    });
});

test('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL wins over OTEL_EXPORTER_OTLP_PROTOCOL', async () => {
    assert.ok(receiver.exports.length > 0, 'the suites above exported');
    for (const e of receiver.exports) assert.equal(e.contentType, 'application/json', 'http/json, as the traces variable says');
});
