// Browser test of the console's agent parts against a running evald (EVALD_URL) whose openai
// provider points at evald-stub (EVALD_STUB_URL), with the system Chromium through
// playwright-core. Uploads through the form a JSONL dataset whose cases hold `messages` (the
// conversation so far, shared/spec/agent-cases.md), builds a model-dimension experiment in the
// form (a shared prompt; control stub-model, treatment stub-model-mini with options), has a
// client check refuse two arms that differ in nothing, edits the trajectory evaluator's
// arguments and plans with them (the body sent and the server's 200 checked), plans the real
// request (every arm's model named, the cost estimate equal to the API's plan of the same
// body), starts it and once it completes reads the verdict banner and each arm's model, options
// and cost on the detail against GET /v1/experiments/{id}, and each arm's cost against the
// prices of agents.prices.json times the stub's scripted usage; then opens a run and reads its
// conversation turn by turn: the case's messages first, then the prompt, then the answer with
// its function call (the stub's `lookup`, which fails: no such tool) — as the run document's
// `conversation` has it once the server writes one, else as the run document has it now.
// Last, edit as new brings the models back into the form.
// A second experiment is built in the form with a mocked tool (`search`, answered by the case's
// tool_results) and a simulated user (stub-user, priced): a client check and two server
// refusals (a schema that is not one, an undefined variable of the instructions) land at their
// fields; the plan's simulated-user line equals the API's plan of the same body; once it
// completes each run's agent and simulated-user figures equal its row of
// GET /v1/experiments/{id}/runs (whose figures are checked against the script and price), and
// the conversation shows the simulated user's turns labelled; edit as new brings both back.
// Needs evald started with EVALD_PRICES_FILE=tests/browser/agents.prices.json (run.sh gives
// this spec a stack of its own). Screenshots: experiment-model-form.png (the form with the
// trajectory editor), experiment-models.png (the detail), experiment-conversation.png (the
// opened run), experiment-agent-form.png (the form's tools, simulated user and plan) and
// experiment-simulated.png (a simulated run's case) in $EVALD_ARTIFACTS_DIR.
// The stub script is global: run this file alone or with --test-concurrency=1. Without EVALD_URL it prints
// SKIPPED and passes.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';

const BASE = (process.env.EVALD_URL || '').replace(/\/+$/, '');
const STUB = (process.env.EVALD_STUB_URL || '').replace(/\/+$/, '');
const TOKEN = process.env.EVALD_API_TOKEN || '';
const ARTIFACTS = process.env.EVALD_ARTIFACTS_DIR || 'artifacts';
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const COMPLETE_MS = 120000;
const HERE = path.dirname(fileURLToPath(import.meta.url));
const PRICES = JSON.parse(readFileSync(path.join(HERE, 'agents.prices.json'), 'utf8')).prices;

const skip = !BASE ? 'EVALD_URL is not set' : !STUB ? 'EVALD_STUB_URL is not set (the test scripts the stub)' : false;
if (skip) console.log(`SKIPPED: agents browser test: ${skip}`);

// Every call uses 10 input and 2 output tokens. The treatment's model answers "no" on bravo
// (the control "yes" everywhere); on charlie both models first call `lookup` (not a tool:
// the call fails), then answer "yes" once the error came back.
const USAGE = { input_tokens: 10, output_tokens: 2 };
const STUB_SCRIPT = {
    rules: [
        { when: { model: 'stub-model-mini', prompt_contains: 'bravo' }, reply: { text: 'no' }, usage: USAGE },
        { when: { prompt_contains: 'charlie', has_tool_result: false }, reply: { tool_calls: [{ name: 'lookup', arguments: { q: 'charlie' } }] }, usage: USAGE },
    ],
    default: { reply: { text: 'yes' }, usage: USAGE },
};
const QUESTIONS = ['alpha', 'bravo', 'charlie', 'delta'];
// The conversation so far of each case: no question word in it (the stub reads the prompt).
const messagesOf = (i) => [
    { role: 'user', content: `Earlier message ${i + 1} from the user.` },
    { role: 'assistant', content: `Earlier reply ${i + 1} from the assistant.` },
];
const CASES = QUESTIONS.map((q, i) => ({ id: `k${i + 1}`, vars: { question: q }, expected: 'yes', messages: messagesOf(i) }));
const PROMPT = 'Answer {{question}} with yes.';
const ARMS = [
    { label: 'big', model: 'stub-model', provider: 'openai', options: {} },
    { label: 'mini', model: 'stub-model-mini', provider: 'openai', options: { temperature: 0.2, max_output_tokens: 256 } },
];
const TRAJECTORY = 'eval::assert::trajectory';

// The simulated user's experiment (its own stub script): the agent asks for a city, looks it
// up with the mocked `search` (answered by the case's tool_results), asks for a night and books;
// the traveller (the simulator's instructions name it) answers each question and says it is
// done once booked. Agent calls use 20 input and 5 output tokens, the simulator's 7 and 3.
const AGENT_USAGE = { input_tokens: 20, output_tokens: 5 };
const SIM_USAGE = { input_tokens: 7, output_tokens: 3 };
const SIM_SCRIPT = {
    rules: [
        { when: { system_contains: 'traveller', prompt_contains: 'Which city?' }, reply: { text: 'Oslo.' }, usage: SIM_USAGE },
        { when: { system_contains: 'traveller', prompt_contains: 'Which night?' }, reply: { text: 'Friday.' }, usage: SIM_USAGE },
        { when: { system_contains: 'traveller', prompt_contains: 'Booked' }, reply: { text: 'Thanks! [[DONE]]' }, usage: SIM_USAGE },
        { when: { prompt_contains: 'Friday' }, reply: { text: 'Booked R42 in Oslo for Friday.' }, usage: AGENT_USAGE },
        { when: { prompt_contains: 'Oslo', tool_result_contains: 'R42' }, reply: { text: 'R42 is free. Which night?' }, usage: AGENT_USAGE },
        { when: { prompt_contains: 'Oslo', has_tool_result: false }, reply: { tool_calls: [{ name: 'search', arguments: { city: 'Oslo' } }] }, usage: AGENT_USAGE },
        { when: { prompt_contains: 'room' }, reply: { text: 'Which city?' }, usage: AGENT_USAGE },
    ],
    default: { reply: { text: 'unscripted' }, usage: AGENT_USAGE },
};
const SIM_CASE = { id: 'ana', vars: { name: 'Ana' }, expected: 'Booked R42 in Oslo for Friday.', tool_results: { search: { rooms: ['R42'] } } };
const SIM_TOOLS = [{ name: 'search', description: 'Rooms free in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }];
const SIM_MODEL = { model: 'stub-user', provider: 'openai' };
const SIM_INSTRUCTIONS = 'You are a traveller named {{name}}. Book one night.';
const SIM_MAX_TURNS = 4;
const SIM_ARMS = [{ label: 'terse', prompt: 'I need a room.' }, { label: 'polite', prompt: 'Hello! I need a room.' }];

async function http(method, url, body, auth = true) {
    const headers = { Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (auth && TOKEN) headers.Authorization = `Bearer ${TOKEN}`;
    const res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    let data = null;
    try {
        data = text ? JSON.parse(text) : null;
    } catch {
        data = text;
    }
    return { status: res.status, data, text };
}

// A price of agents.prices.json times one scripted call's usage, in USD.
function callCost(model) {
    const p = PRICES.find((x) => x.model === model);
    assert.ok(p, `agents.prices.json prices ${model}`);
    return (USAGE.input_tokens * p.input_usd_per_mtok + USAGE.output_tokens * p.output_usd_per_mtok) / 1e6;
}

// A simulated user's call at stub-user's price of agents.prices.json, in USD.
function simCallCost() {
    const p = PRICES.find((x) => x.model === SIM_MODEL.model);
    assert.ok(p, `agents.prices.json prices ${SIM_MODEL.model}`);
    return (SIM_USAGE.input_tokens * p.input_usd_per_mtok + SIM_USAGE.output_tokens * p.output_usd_per_mtok) / 1e6;
}

const int = (v) => Math.round(v).toLocaleString('en-US');

// The console's dollar format, written independently: $0.014 below a cent, $0.0140 above.
function usd(v) {
    if (v === 0) return '$0';
    return v < 0.01 ? `$${v.toPrecision(3).replace(/\.?0+$/, '')}` : `$${v.toFixed(v < 10 ? 4 : 2)}`;
}

function pp(v) {
    const s = Math.abs(v * 100).toFixed(1).replace(/\.0$/, '');
    if (s === '0') return '0 pp';
    return `${v > 0 ? '+' : '−'}${s} pp`;
}

const close = (a, b, what) => assert.ok(Math.abs(a - b) < 1e-12, `${what}: ${a} ≠ ${b}`);

if (skip) test('agents view', { skip }, () => {});
else describe('agents: model variants, the trajectory editor, a run\'s conversation, a simulated user', () => {
    let browser;
    let page;
    const suffix = randomBytes(4).toString('hex');

    async function shot(name, selector = '#main') {
        mkdirSync(ARTIFACTS, { recursive: true });
        await page.evaluate(() => window.scrollTo(0, 0));
        await page.locator(selector).screenshot({ path: path.join(ARTIFACTS, name), style: '.topbar { position: static !important; } .toast { display: none !important; }' });
    }

    const visible = (testid) => page.isVisible(`[data-testid=${testid}]`);
    const text = (testid) => page.textContent(`[data-testid=${testid}]`);

    // Clicks Plan and returns the body the console posted.
    async function plan() {
        const [req] = await Promise.all([
            page.waitForRequest((r) => r.url().endsWith('/v1/experiments/plan') && r.method() === 'POST', { timeout: 15000 }),
            page.click('[data-testid=exp-plan]'),
        ]);
        await page.waitForFunction(() => {
            const s = document.querySelector('[data-testid=exp-plan-status]')?.textContent || '';
            return /^Nothing was written/.test(s) || !document.querySelector('[data-testid=exp-plan-error]')?.hidden;
        }, null, { timeout: 15000 });
        assert.equal(await page.isHidden('[data-testid=exp-plan-error]'), true, `the plan was refused: ${await text('exp-plan-error')}`);
        return JSON.parse(req.postData());
    }

    // Clicks Plan, expects the server's refusal beside the button and at the form's field.
    async function refusedPlan(field, detail) {
        await page.click('[data-testid=exp-plan]');
        await page.waitForSelector('[data-testid=exp-plan-error]:not([hidden])', { timeout: 15000 });
        assert.match(await text('exp-plan-error'), detail);
        assert.equal(await page.isVisible(`[data-testid=exp-error-${field}]`), true, `${field} shows the refusal`);
        assert.match(await text(`exp-error-${field}`), detail);
        assert.equal(await page.getAttribute(`[data-testid=exp-error-${field}]`, 'data-source'), 'server');
    }

    before(async () => {
        const res = await http('PUT', `${STUB}/_stub/script`, STUB_SCRIPT, false);
        assert.ok(res.status >= 200 && res.status < 300, `stub script refused: ${res.status}`);
        await http('POST', `${STUB}/_stub/reset`, {}, false);
        const { chromium } = await import('playwright-core');
        browser = await chromium.launch({
            executablePath: CHROMIUM,
            args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update'],
        });
        const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
        if (TOKEN) await context.addInitScript((t) => sessionStorage.setItem('evald.token', t), TOKEN);
        page = await context.newPage();
        page.on('pageerror', (e) => console.log(`page error: ${e.message}`));
    });

    after(async () => {
        if (browser) await browser.close();
    });

    test('a model-dimension experiment over conversation cases: form, plan, verdict, models and costs, a run turn by turn', { timeout: COMPLETE_MS + 90000 }, async () => {
        const countBefore = (await http('GET', `${BASE}/v1/experiments?limit=100`)).data.experiments.length;
        await page.goto(`${BASE}/#/experiments/new`);
        await page.waitForSelector('[data-testid=exp-form]');

        // The dataset, uploaded through the form: cases with the conversation so far.
        const fileName = `agents-${suffix}.jsonl`;
        const jsonl = `${CASES.map((c) => JSON.stringify(c)).join('\n')}\n`;
        await page.setInputFiles('[data-testid=exp-field-file]', { name: fileName, mimeType: 'application/x-ndjson', buffer: Buffer.from(jsonl) });
        await page.waitForFunction(() => /^Uploaded /.test(document.querySelector('[data-testid=exp-upload-status]')?.textContent || '')
            || !document.querySelector('[data-testid=exp-error-dataset]')?.hidden, null, { timeout: 15000 });
        assert.equal(await page.isHidden('[data-testid=exp-error-dataset]'), true,
            `the server refused cases with messages (shared/spec/agent-cases.md): ${await text('exp-error-dataset')}`);
        const datasetId = await page.inputValue('[data-testid=exp-field-dataset]');
        assert.match(datasetId, /^ds_[0-9a-f]{32}$/);
        assert.equal(await text('exp-upload-status'), `Uploaded ${fileName}: 4 cases (${datasetId})`);

        // The model dimension: shared texts instead of the shared model, a model per arm.
        await page.fill('[data-testid=exp-field-name]', `agents-${suffix}`);
        assert.equal(await visible('exp-shared-model'), true);
        assert.equal(await visible('exp-shared-texts'), false);
        await page.selectOption('[data-testid=exp-field-dimension]', 'model');
        assert.equal(await visible('exp-shared-model'), false, 'no shared model with dimension model');
        assert.equal(await visible('exp-shared-texts'), true);
        assert.equal(await page.locator('[data-testid=exp-field-control_prompt]').count(), 0, 'no prompt per arm');
        for (const key of ['control', 'treatment_0']) {
            for (const f of ['label', 'model', 'provider', 'temperature', 'top_p', 'reasoning_effort', 'max_output_tokens']) {
                assert.equal(await visible(`exp-field-${key}_${f}`), true, `${key}_${f} is shown`);
            }
        }
        await page.fill('[data-testid=exp-field-prompt]', PROMPT);
        const fillArm = async (key, arm) => {
            await page.fill(`[data-testid=exp-field-${key}_label]`, arm.label);
            await page.fill(`[data-testid=exp-field-${key}_model]`, arm.model);
            await page.fill(`[data-testid=exp-field-${key}_provider]`, arm.provider);
            await page.fill(`[data-testid=exp-field-${key}_temperature]`, String(arm.options.temperature ?? ''));
            await page.fill(`[data-testid=exp-field-${key}_max_output_tokens]`, String(arm.options.max_output_tokens ?? ''));
        };
        await fillArm('control', ARMS[0]);
        // A client check: a treatment that is the control's model with the same options.
        await fillArm('treatment_0', { ...ARMS[1], model: ARMS[0].model, options: {} });
        await page.click('[data-testid=exp-submit]');
        await page.waitForSelector('[data-testid=exp-error-treatment_0_model]:not([hidden])');
        assert.equal(await text('exp-error-treatment_0_model'), 'treatments[0]: differs from the control in nothing');
        assert.equal(await page.getAttribute('[data-testid=exp-error-treatment_0_model]', 'data-source'), 'client');
        assert.equal((await http('GET', `${BASE}/v1/experiments?limit=100`)).data.experiments.length, countBefore, 'nothing was written');
        await fillArm('treatment_0', ARMS[1]);
        await page.fill('[data-testid=exp-field-repeats]', '2');
        await page.fill('[data-testid=exp-field-concurrency]', '2');

        // The trajectory evaluator: its editor instead of the JSON arguments.
        assert.equal(await visible('exp-trajectory'), false);
        await page.selectOption('[data-testid=exp-field-evaluator_pick]', TRAJECTORY);
        assert.equal(await page.inputValue('[data-testid=exp-field-evaluator_function_id]'), TRAJECTORY);
        assert.equal(await visible('exp-trajectory'), true);
        assert.equal(await visible('exp-field-evaluator_arguments'), false);
        await page.selectOption('[data-testid=exp-field-trajectory_match]', 'subset');
        await page.fill('[data-testid=exp-field-trajectory_call_0_name]', 'lookup');
        await page.fill('[data-testid=exp-field-trajectory_call_0_arguments]', '["q"]');
        await page.click('[data-testid=exp-trajectory-add]');
        await page.fill('[data-testid=exp-field-trajectory_call_1_name]', 'book');
        await page.click('[data-testid=exp-plan]');
        await page.waitForSelector('[data-testid=exp-error-trajectory_call_0_arguments]:not([hidden])');
        assert.equal(await text('exp-error-trajectory_call_0_arguments'), 'evaluator arguments.expected[0].arguments must be an object');
        await page.fill('[data-testid=exp-field-trajectory_call_0_arguments]', '{"q": "{{question}}"}');
        await shot('experiment-model-form.png', '[data-testid=exp-form]');
        let body = await plan();
        assert.deepEqual(body.evaluator, {
            function_id: TRAJECTORY,
            arguments: { expected: [{ name: 'lookup', arguments: { q: '{{question}}' } }, { name: 'book' }], mode: 'strict', match_arguments: 'subset' },
        });
        await page.click('[data-testid=exp-trajectory-remove-1]');
        await page.selectOption('[data-testid=exp-field-trajectory_mode]', 'superset');
        await page.selectOption('[data-testid=exp-field-trajectory_from]', 'case');
        assert.equal(await page.locator('[data-testid=exp-field-trajectory_call_0_name]').count(), 0, 'no list when the case gives the calls');
        body = await plan();
        assert.deepEqual(body.evaluator.arguments, { expected: '{{expected}}', mode: 'superset', match_arguments: 'subset' });
        // Back to the default evaluator: its JSON arguments as they were.
        await page.selectOption('[data-testid=exp-field-evaluator_pick]', 'eval::assert::normalized_text');
        assert.equal(await visible('exp-trajectory'), false);
        assert.equal(await page.inputValue('[data-testid=exp-field-evaluator_arguments]'), '{"expected": "{{expected}}"}');

        // The plan of the real request: the body of the model dimension, every arm's model
        // named, the cost the API's plan gives for the same body (both models are priced).
        body = await plan();
        assert.equal(body.dimension, 'model');
        assert.equal(body.model, undefined, 'no top-level model');
        assert.deepEqual([body.prompt, body.system_prompt], [PROMPT, null]);
        assert.deepEqual([body.control, ...body.treatments], ARMS.map((a) => ({
            label: a.label, model: { model: a.model, provider: a.provider, ...(Object.keys(a.options).length ? { options: a.options } : {}) },
        })));
        assert.equal(await text('exp-plan-models'), 'big: stub-model (openai) · mini: stub-model-mini (openai), temperature 0.2 · max output tokens 256');
        const apiPlan = await http('POST', `${BASE}/v1/experiments/plan`, body);
        assert.equal(apiPlan.status, 200, apiPlan.text);
        assert.ok(apiPlan.data.cost_usd && apiPlan.data.cost_usd.estimate > 0, `both arms are priced: ${apiPlan.text}`);
        assert.equal(await page.getAttribute('[data-testid=exp-plan-result]', 'data-cost-estimate'), String(apiPlan.data.cost_usd.estimate));
        assert.equal(await page.getAttribute('[data-testid=exp-plan-result]', 'data-runs'), String(apiPlan.data.runs));

        await page.click('[data-testid=exp-submit]');
        await page.waitForFunction(() => /#\/experiments\/exp_[0-9a-f]{32}$/.test(location.hash), null, { timeout: 15000 });
        const id = /#\/experiments\/(exp_[0-9a-f]+)/.exec(page.url())[1];
        await page.waitForSelector('[data-testid=exp-detail]');
        await page.waitForFunction(() => document.querySelector('[data-testid=exp-status]')?.dataset.status === 'completed', null, { timeout: COMPLETE_MS });
        await page.waitForFunction(() => document.querySelector('[data-testid=exp-verdict]')?.dataset.partial === 'false', null, { timeout: 10000 });

        const exp = (await http('GET', `${BASE}/v1/experiments/${id}`)).data;
        assert.equal(exp.status, 'completed');
        assert.equal(exp.request.dimension, 'model');
        assert.equal(exp.progress.total_runs, 4 * 2 * 2);
        // The verdict banner, against the API.
        const cmp = exp.comparisons[0];
        assert.equal(exp.arms[0].pass_rate, 1, 'stub-model answers yes on every case');
        close(exp.arms[1].pass_rate, 3 / 4, 'stub-model-mini answers no on bravo');
        close(cmp.pass_rate.delta, -1 / 4, 'pass-rate delta');
        assert.equal(await page.getAttribute('[data-testid=exp-verdict]', 'data-verdict'), cmp.verdict);
        const headline = { better: 'mini is better than big', worse: 'mini is worse than big', inconclusive: 'mini vs big: inconclusive' }[cmp.verdict];
        assert.ok(headline, `verdict ${cmp.verdict}`);
        assert.equal(await text('exp-verdict-headline'), headline);
        assert.match(await text('exp-verdict-figures'), new RegExp(`^pass rate ${pp(cmp.pass_rate.delta)} · `));
        assert.match(await text('exp-verdict-figures'), new RegExp(` · ${cmp.paired_cases} paired cases$`));
        // The subtitle names each arm's model.
        assert.match(await page.textContent('.subtitle'), / · model · big: stub-model \(openai\) vs mini: stub-model-mini \(openai\) · /);

        // Each arm's model and options, from the request; its cost, the API's median, which is
        // the arm's own price times the stub's usage (bravo's, charlie's two calls aside).
        const variants = [exp.request.control, ...exp.request.treatments];
        for (const a of exp.arms) {
            const v = variants[a.index];
            assert.deepEqual([v.label, v.model.model, v.model.provider], [ARMS[a.index].label, ARMS[a.index].model, ARMS[a.index].provider]);
            const cell = `[data-testid=exp-arm-model-${a.index}]`;
            assert.deepEqual([await page.getAttribute(cell, 'data-model'), await page.getAttribute(cell, 'data-provider')], [v.model.model, v.model.provider]);
            assert.match(await page.textContent(cell), new RegExp(`^${v.model.model} ${v.model.provider}`));
            const cost = `[data-testid=exp-arm-cost-${a.index}]`;
            assert.ok(Number.isFinite(a.medians.cost_usd), `arm ${a.index} has a cost`);
            assert.equal(Number(await page.getAttribute(cost, 'data-value')), a.medians.cost_usd);
            assert.equal(await page.textContent(cost), usd(a.medians.cost_usd));
            close(a.medians.cost_usd, callCost(v.model.model), `arm ${a.index} at the price of ${v.model.model}`);
            assert.equal(Number(await page.getAttribute(`[data-testid=exp-arm-tokens-${a.index}]`, 'data-value')), a.medians.total_tokens);
        }
        assert.equal(await page.locator('[data-testid=exp-arm-options-0]').count(), 0, 'the control has no options');
        assert.equal(await text('exp-arm-options-1'), 'temperature 0.2 · max output tokens 256');
        assert.notEqual(exp.arms[0].medians.cost_usd, exp.arms[1].medians.cost_usd, 'the arms cost differently');
        await shot('experiment-models.png');

        // Every run reached its arm's model.
        const rows = [];
        for (const c of CASES) rows.push(...(await http('GET', `${BASE}/v1/experiments/${id}/runs?case_id=${c.id}`)).data.runs);
        assert.equal(rows.length, 16);
        for (const r of rows) {
            const models = ((r.transcript && r.transcript.generations) || []).map((g) => g.model);
            assert.ok(models.length > 0 && models.every((m) => m === ARMS[r.arm].model), `run ${r.run_id} of arm ${r.arm} called ${models}`);
        }

        // A run of charlie, turn by turn: the case's messages, the prompt, the answer with the
        // failed call under it.
        await page.click('[data-testid=exp-case-row][data-case-id=k3]');
        await page.waitForSelector('[data-testid=exp-case] [data-testid=exp-run]');
        assert.equal(await page.textContent('[data-testid=exp-case-arm][data-arm="1"] [data-testid=exp-case-arm-model]'), 'stub-model-mini (openai) · temperature 0.2 · max output tokens 256');
        const run = rows.find((r) => r.case_id === 'k3' && r.arm === 1 && r.repeat === 1);
        const runEl = page.locator(`[data-testid=exp-run][data-run-id="${run.run_id}"]`);
        const conversation = runEl.locator('[data-testid=exp-run-conversation]');
        assert.equal(await conversation.evaluate((d) => d.open), false, 'folded until opened');
        await runEl.locator('[data-testid=exp-run-conversation-toggle]').click();
        assert.equal(await conversation.evaluate((d) => d.open), true);
        const calls = run.transcript.function_calls;
        assert.equal(calls.length, 1, 'one call made');
        assert.equal(calls[0].status, 'error');
        const want = [
            ...CASES[2].messages.map((m) => ({ role: m.role, content: m.content, origin: 'case', calls: [] })),
            { role: 'user', content: 'Answer charlie with yes.', origin: 'prompt', calls: [] },
            { role: 'assistant', content: run.output, origin: 'answer', calls: [{ name: calls[0].function_id || calls[0].tool_name, outcome: 'error', text: `error: ${calls[0].error}` }] },
        ];
        assert.equal(run.output, 'yes');
        assert.equal(want[3].calls[0].name, 'lookup');
        // The run document's conversation (a run over a case's messages keeps it as
        // transcript.conversation) is the same list, and the view shows that one.
        const kept = run.transcript.conversation;
        assert.ok(Array.isArray(kept), 'the run document keeps the conversation');
        assert.deepEqual(kept.map((t) => [t.role, t.content]), want.map((t) => [t.role, t.content]), 'the run document\'s conversation');
        assert.deepEqual((kept[3].function_calls || []).map((c) => [c.name, c.error]), [['lookup', calls[0].error]]);
        assert.equal(await conversation.getAttribute('data-source'), 'run');
        const turns = await conversation.locator('[data-testid=exp-turn]').evaluateAll((els) => els.map((e) => ({
            role: e.dataset.role, content: e.querySelector('[data-testid=exp-turn-content]').textContent, origin: e.dataset.origin,
            calls: [...e.querySelectorAll('[data-testid=exp-turn-call]')].map((c) => ({
                name: c.dataset.name, outcome: c.dataset.outcome, text: c.querySelector('[data-testid=exp-turn-call-outcome]').textContent,
            })),
        })));
        assert.deepEqual(turns, want);
        assert.equal(await conversation.locator('summary').textContent(), 'Conversation · 4 turns · 1 function call');
        // A run without calls: the case's messages, the prompt and its answer.
        const plain = rows.find((r) => r.case_id === 'k3' && r.arm === 0 && r.repeat === 2);
        const plainEl = page.locator(`[data-testid=exp-run][data-run-id="${plain.run_id}"] [data-testid=exp-run-conversation]`);
        assert.equal(await plainEl.evaluate((d) => d.open), false, 'another run stays folded');
        await shot('experiment-conversation.png', `[data-testid=exp-run][data-run-id="${run.run_id}"]`);

        // Edit as new: the model dimension and each arm's model and options come back.
        await page.click('[data-testid=exp-edit]');
        await page.waitForSelector('[data-testid=exp-form]');
        await page.waitForSelector('[data-testid=exp-field-treatment_0_model]');
        assert.equal(await page.inputValue('[data-testid=exp-field-dimension]'), 'model');
        assert.equal(await page.inputValue('[data-testid=exp-field-prompt]'), PROMPT);
        assert.equal(await page.inputValue('[data-testid=exp-field-control_model]'), 'stub-model');
        assert.equal(await page.inputValue('[data-testid=exp-field-treatment_0_model]'), 'stub-model-mini');
        assert.equal(await page.inputValue('[data-testid=exp-field-treatment_0_temperature]'), '0.2');
        assert.equal(await page.inputValue('[data-testid=exp-field-treatment_0_max_output_tokens]'), '256');
        assert.equal(await page.inputValue('[data-testid=exp-field-dataset]'), datasetId);
    });

    test('a simulated user and a mocked tool, built in the form: plan, run figures and turns against the API', { timeout: COMPLETE_MS + 60000 }, async () => {
        const put = await http('PUT', `${STUB}/_stub/script`, SIM_SCRIPT, false);
        assert.ok(put.status >= 200 && put.status < 300, `stub script refused: ${put.status} ${put.text}`);
        await http('POST', `${STUB}/_stub/reset`, {}, false);
        const countBefore = (await http('GET', `${BASE}/v1/experiments?limit=100`)).data.experiments.length;
        await page.goto(`${BASE}/#/experiments/new`);
        await page.waitForSelector('[data-testid=exp-form]');

        // The dataset, uploaded through the form: a case that answers the mocked tool.
        const fileName = `simulated-${suffix}.jsonl`;
        await page.setInputFiles('[data-testid=exp-field-file]', { name: fileName, mimeType: 'application/x-ndjson', buffer: Buffer.from(`${JSON.stringify(SIM_CASE)}\n`) });
        await page.waitForFunction(() => /^Uploaded /.test(document.querySelector('[data-testid=exp-upload-status]')?.textContent || '')
            || !document.querySelector('[data-testid=exp-error-dataset]')?.hidden, null, { timeout: 15000 });
        assert.equal(await page.isHidden('[data-testid=exp-error-dataset]'), true, `upload refused: ${await text('exp-error-dataset')}`);
        const datasetId = await page.inputValue('[data-testid=exp-field-dataset]');
        await page.fill('[data-testid=exp-field-name]', `simulated-${suffix}`);
        // The model's change (on blur) sets the catalogue's provider: let it, then fill it in.
        await page.fill('[data-testid=exp-field-model]', 'stub-model');
        await page.locator('[data-testid=exp-field-model]').blur();
        await page.fill('[data-testid=exp-field-provider]', 'openai');
        for (const [key, arm] of [['control', SIM_ARMS[0]], ['treatment_0', SIM_ARMS[1]]]) {
            await page.fill(`[data-testid=exp-field-${key}_label]`, arm.label);
            await page.fill(`[data-testid=exp-field-${key}_prompt]`, arm.prompt);
        }
        await page.fill('[data-testid=exp-field-repeats]', '1');
        await page.fill('[data-testid=exp-field-concurrency]', '2');

        // The agent's part, folded until opened.
        assert.equal(await visible('exp-field-tools'), false, 'folded');
        await page.click('[data-testid=exp-agent-fields] > summary');
        for (const f of ['tools', 'simulator_model', 'simulator_provider', 'simulator_instructions', 'simulator_max_turns', 'simulator_stop']) {
            assert.equal(await visible(`exp-field-${f}`), true, `${f} is shown`);
        }
        // A client check with the server's message: a tool without parameters.
        const planRequests = [];
        const onRequest = (r) => { if (r.url().endsWith('/v1/experiments/plan')) planRequests.push(r); };
        page.on('request', onRequest);
        await page.fill('[data-testid=exp-field-tools]', '[{"name": "search"}]');
        await page.click('[data-testid=exp-plan]');
        await page.waitForSelector('[data-testid=exp-error-tools]:not([hidden])');
        assert.equal(await text('exp-error-tools'), 'tools[0].parameters is required');
        assert.equal(await page.getAttribute('[data-testid=exp-error-tools]', 'data-source'), 'client');
        assert.equal(planRequests.length, 0, 'nothing was sent');
        page.off('request', onRequest);
        // The server's refusal of a schema that is not one, placed at the tools.
        await page.fill('[data-testid=exp-field-tools]', JSON.stringify([{ ...SIM_TOOLS[0], parameters: { type: 7 } }]));
        await refusedPlan('tools', /^tools\[0\]\.parameters is not a valid JSON Schema/);
        await page.fill('[data-testid=exp-field-tools]', JSON.stringify(SIM_TOOLS, null, 2));
        // The simulated user: a variable the case does not define is refused at the
        // instructions, max turns past 20 by the client.
        await page.fill('[data-testid=exp-field-simulator_model]', SIM_MODEL.model);
        await page.fill('[data-testid=exp-field-simulator_provider]', SIM_MODEL.provider);
        await page.fill('[data-testid=exp-field-simulator_instructions]', 'You are a traveller named {{nobody}}.');
        await refusedPlan('simulator_instructions', /^case ana: template variable nobody is not defined$/);
        await page.fill('[data-testid=exp-field-simulator_instructions]', SIM_INSTRUCTIONS);
        await page.fill('[data-testid=exp-field-simulator_max_turns]', '21');
        await page.click('[data-testid=exp-plan]');
        await page.waitForSelector('[data-testid=exp-error-simulator_max_turns]:not([hidden])');
        assert.equal(await text('exp-error-simulator_max_turns'), 'simulator.max_turns must be an integer between 1 and 20');
        assert.equal(await page.getAttribute('[data-testid=exp-error-simulator_max_turns]', 'data-source'), 'client');
        await page.fill('[data-testid=exp-field-simulator_max_turns]', String(SIM_MAX_TURNS));
        assert.equal((await http('GET', `${BASE}/v1/experiments?limit=100`)).data.experiments.length, countBefore, 'nothing was written');

        // The plan of the request: tools and simulator as built, the simulated user's line
        // and figures those of the API's plan of the same body.
        const body = await plan();
        assert.deepEqual(body.tools, SIM_TOOLS);
        assert.deepEqual(body.simulator, { model: SIM_MODEL, instructions: SIM_INSTRUCTIONS, max_turns: SIM_MAX_TURNS }, 'the default stop is the server\'s');
        const apiPlan = await http('POST', `${BASE}/v1/experiments/plan`, body);
        assert.equal(apiPlan.status, 200, apiPlan.text);
        const ps = apiPlan.data.simulator;
        assert.ok(ps && ps.cost_usd && ps.cost_usd.output_max > 0, `the simulated user is priced: ${apiPlan.text}`);
        assert.equal(ps.agent_answers_max, apiPlan.data.runs * SIM_MAX_TURNS);
        const result = '[data-testid=exp-plan-result]';
        assert.deepEqual(await page.$eval(result, (el) => [el.dataset.simulatorCallsMax, el.dataset.simulatorAnswersMax, el.dataset.simulatorOutputMax, el.dataset.simulatorCostMax]),
            [ps.calls_max, ps.agent_answers_max, ps.output_tokens_max, ps.cost_usd.output_max].map(String));
        assert.equal(await text('exp-plan-simulator'),
            `at most ${int(ps.calls_max)} calls · at most ${int(ps.output_tokens_max)} output tokens · at most ${usd(ps.cost_usd.output_max)} of output · the arms answer at most ${int(ps.agent_answers_max)} times (the output maximum above counts every answer)`);

        await shot('experiment-agent-form.png', '[data-testid=exp-form]');
        await page.click('[data-testid=exp-submit]');
        await page.waitForFunction(() => /#\/experiments\/exp_[0-9a-f]{32}$/.test(location.hash), null, { timeout: 15000 });
        const id = /#\/experiments\/(exp_[0-9a-f]+)/.exec(page.url())[1];
        await page.waitForSelector('[data-testid=exp-detail]');
        await page.waitForFunction(() => document.querySelector('[data-testid=exp-status]')?.dataset.status === 'completed', null, { timeout: COMPLETE_MS });
        const exp = (await http('GET', `${BASE}/v1/experiments/${id}`)).data;
        assert.deepEqual(exp.request.tools, SIM_TOOLS);
        assert.deepEqual([exp.request.simulator.max_turns, exp.request.simulator.stop], [SIM_MAX_TURNS, '[[DONE]]']);

        // The runs as the API has them: the scripted conversation (three answers, the
        // simulated user called three times, its last reply the stop token), priced apart.
        const runs = (await http('GET', `${BASE}/v1/experiments/${id}/runs?case_id=${SIM_CASE.id}`)).data.runs;
        assert.equal(runs.length, 2);
        for (const r of runs) {
            const b = r.benchmark;
            assert.equal(r.status, 'completed', `run ${r.run_id}: ${JSON.stringify(r.failures)}`);
            assert.equal(r.output, 'Booked R42 in Oslo for Friday.');
            assert.deepEqual([b.turns, b.simulator_calls, b.simulator_input_tokens, b.simulator_output_tokens, b.simulator_total_tokens],
                [3, 3, 3 * SIM_USAGE.input_tokens, 3 * SIM_USAGE.output_tokens, 3 * (SIM_USAGE.input_tokens + SIM_USAGE.output_tokens)]);
            close(b.simulator_cost_usd, 3 * simCallCost(), `run ${r.run_id}: the simulated user at stub-user's price`);
            assert.equal(b.function_calls, 1);
            // The agent's tokens are its generations' only (three answers and the call).
            const gens = r.transcript.generations.length;
            assert.equal(gens, 4);
            assert.deepEqual([b.input_tokens, b.output_tokens], [gens * AGENT_USAGE.input_tokens, gens * AGENT_USAGE.output_tokens], 'the simulated user\'s tokens are not the agent\'s');
        }

        // The run view: the agent's figures and the simulated user's apart, each run's equal
        // to its benchmark; its conversation with the simulated turns labelled.
        await page.click(`[data-testid=exp-case-row][data-case-id=${SIM_CASE.id}]`);
        await page.waitForSelector('[data-testid=exp-case] [data-testid=exp-run]');
        for (const r of runs) {
            const b = r.benchmark;
            const runEl = page.locator(`[data-testid=exp-run][data-run-id="${r.run_id}"]`);
            const sim = runEl.locator('[data-testid=exp-run-simulator]');
            assert.deepEqual(await sim.evaluate((e) => [e.dataset.calls, e.dataset.inputTokens, e.dataset.outputTokens, e.dataset.totalTokens, e.dataset.cost]),
                [b.simulator_calls, b.simulator_input_tokens, b.simulator_output_tokens, b.simulator_total_tokens, b.simulator_cost_usd].map(String));
            assert.equal(await sim.textContent(),
                `simulated user${int(b.simulator_calls)} calls · ${int(b.simulator_total_tokens)} tokens (${int(b.simulator_input_tokens)} input, ${int(b.simulator_output_tokens)} output) · ${usd(b.simulator_cost_usd)}`);
            const agent = runEl.locator('[data-testid=exp-run-agent]');
            assert.deepEqual(await agent.evaluate((e) => [e.dataset.turns, e.dataset.inputTokens, e.dataset.outputTokens, e.dataset.totalTokens, e.dataset.cost]),
                [b.turns, b.input_tokens, b.output_tokens, b.total_tokens, b.cost_usd].map(String));
            assert.equal(await agent.textContent(),
                `agent${int(b.turns)} answers · ${int(b.total_tokens)} tokens (${int(b.input_tokens)} input, ${int(b.output_tokens)} output) · ${usd(b.cost_usd)}`);
        }
        const run = runs.find((r) => r.arm === 1);
        const runEl = page.locator(`[data-testid=exp-run][data-run-id="${run.run_id}"]`);
        await runEl.locator('[data-testid=exp-run-conversation-toggle]').click();
        const conversation = runEl.locator('[data-testid=exp-run-conversation]');
        const kept = run.transcript.conversation;
        assert.deepEqual(kept.map((t) => t.content), [SIM_ARMS[1].prompt, 'Which city?', 'Oslo.', 'R42 is free. Which night?', 'Friday.', 'Booked R42 in Oslo for Friday.'],
            'the run document\'s conversation: the stop reply neither sent nor kept');
        assert.equal(await conversation.getAttribute('data-source'), 'run');
        const turns = await conversation.locator('[data-testid=exp-turn]').evaluateAll((els) => els.map((e) => ({
            role: e.dataset.role, origin: e.dataset.origin, title: e.querySelector('[data-testid=exp-turn-title]').textContent,
            content: e.querySelector('[data-testid=exp-turn-content]').textContent,
            calls: [...e.querySelectorAll('[data-testid=exp-turn-call]')].map((c) => [c.dataset.name, c.dataset.outcome]),
        })));
        // The user turns after the prompt are the simulated user's (the case has no messages).
        const origins = kept.map((t, i) => (t.role === 'assistant' ? 'answer' : i === 0 ? 'prompt' : 'simulated'));
        assert.deepEqual(turns, kept.map((t, i) => ({
            role: t.role, origin: origins[i], content: t.content,
            title: `${t.role} · ${{ answer: 'the answer', prompt: 'the prompt', simulated: 'simulated user' }[origins[i]]}`,
            calls: (t.function_calls || []).map((c) => [c.name, c.error ? 'error' : 'result']),
        })));
        assert.deepEqual(turns[3].calls, [['search', 'result']], 'the mocked tool answered');
        const simulatedTurns = turns.filter((t) => t.origin === 'simulated').length;
        assert.equal(simulatedTurns, run.benchmark.simulator_calls - 1, 'every simulator reply but the stop is a turn');
        assert.equal(await conversation.locator('summary').textContent(), `Conversation · ${kept.length} turns · ${simulatedTurns} from the simulated user · 1 function call`);
        await shot('experiment-simulated.png', '[data-testid=exp-case]');

        // Edit as new: the tools and the simulated user come back, the section open.
        await page.click('[data-testid=exp-edit]');
        await page.waitForSelector('[data-testid=exp-form]');
        await page.waitForSelector('[data-testid=exp-field-simulator_model]');
        assert.equal(await page.$eval('[data-testid=exp-agent-fields]', (d) => d.open), true);
        assert.deepEqual(JSON.parse(await page.inputValue('[data-testid=exp-field-tools]')), SIM_TOOLS);
        assert.deepEqual(await Promise.all(['simulator_model', 'simulator_provider', 'simulator_instructions', 'simulator_max_turns', 'simulator_stop'].map((f) => page.inputValue(`[data-testid=exp-field-${f}]`))),
            [SIM_MODEL.model, SIM_MODEL.provider, SIM_INSTRUCTIONS, String(SIM_MAX_TURNS), '[[DONE]]']);
        assert.equal(await page.inputValue('[data-testid=exp-field-dataset]'), datasetId);
    });
});
