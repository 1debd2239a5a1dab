// Browser test of the console's Sessions view against a running evald (EVALD_URL) whose openai
// provider points at evald-stub (EVALD_STUB_URL), with the system Chromium through
// playwright-core. Starts three ad-hoc sessions from the form with different scripted usage and
// latency, adds an evaluation's run from the picker, compares them while one session is still
// running (its column is partial), and watches the matrix reach final figures over the event
// stream without polling. Checks every delta against the stub's numbers, the groups and the
// better/worse colours, and a client-side selection error. Screenshot: sessions-comparison.png
// in $EVALD_ARTIFACTS_DIR. The stub script is global: run this file alone or with
// --test-concurrency=1 (package.json does). Without EVALD_URL it prints SKIPPED and passes.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import path from 'node:path';

const BASE = (process.env.EVALD_URL || '').replace(/\/+$/, '');
const STUB = (process.env.EVALD_STUB_URL || '').replace(/\/+$/, '');
const TOKEN = process.env.EVALD_API_TOKEN || '';
const ARTIFACTS = process.env.EVALD_ARTIFACTS_DIR || 'artifacts';
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const MODEL = { model: 'stub-model', provider: 'openai' };
const CHARLIE_LATENCY_MS = 8000;

const skip = !BASE ? 'EVALD_URL is not set' : !STUB ? 'EVALD_STUB_URL is not set (the test scripts the stub)' : false;
if (skip) console.log(`SKIPPED: sessions view browser test: ${skip}`);

// SES-ALPHA 100 in / 20 out; SES-BRAVO 300/40; SES-CHARLIE calls a (denied) function with
// 50/10, then answers after CHARLIE_LATENCY_MS with 70/15. The console suite's rules follow, so
// that its own tests keep working if both run against one stub.
const STUB_SCRIPT = {
    rules: [
        { when: { prompt_contains: 'SES-ALPHA' }, reply: { text: 'alpha' }, usage: { input_tokens: 100, output_tokens: 20 } },
        { when: { prompt_contains: 'SES-BRAVO' }, reply: { text: 'bravo' }, usage: { input_tokens: 300, output_tokens: 40 } },
        {
            when: { prompt_contains: 'SES-CHARLIE', has_tool_result: false },
            reply: { tool_calls: [{ name: 'agent_trigger', arguments: { function_id: 'weather::now', payload: {} } }] },
            usage: { input_tokens: 50, output_tokens: 10 },
        },
        {
            when: { prompt_contains: 'SES-CHARLIE', has_tool_result: true },
            latency_ms: CHARLIE_LATENCY_MS,
            reply: { text: 'charlie' },
            usage: { input_tokens: 70, output_tokens: 15 },
        },
        { when: { prompt_contains: 'SLOW' }, latency_ms: 10000, reply: { text: 'late' } },
        { when: { prompt_contains: 'ANSWER-NO' }, reply: { text: 'no' } },
    ],
    default: { reply: { text: 'OK' }, usage: { input_tokens: 10, output_tokens: 2 } },
};

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
    return { status: res.status, data };
}

if (skip) test('sessions view', { skip }, () => {});
else describe('sessions view', () => {
    let browser;
    let page;
    let evalControl;
    let evalId;

    const cell = async (testid, attr = 'data-value') => {
        const v = await page.getAttribute(`[data-testid="${testid}"]`, attr);
        return v === null || v === '' ? null : Number(v);
    };
    const near = (got, want, what) => assert.ok(got !== null && Math.abs(got - want) < 1e-6, `${what}: ${got}, want ${want}`);

    async function startSession(title, prompt) {
        const before = await page.locator('[data-testid=selection] li').count();
        await page.fill('[data-testid=session-field-model]', MODEL.model);
        await page.fill('[data-testid=session-field-provider]', MODEL.provider);
        await page.fill('[data-testid=session-field-title]', title);
        await page.fill('[data-testid=session-field-prompt]', prompt);
        await page.click('[data-testid=session-start]');
        await page.waitForFunction((n) => document.querySelectorAll('[data-testid=selection] li').length > n, before, { timeout: 15000 });
        const ids = await page.$$eval('[data-testid=selection] li', (els) => els.map((e) => e.dataset.sessionId));
        return ids[ids.length - 1];
    }

    before(async () => {
        const res = await http('PUT', `${STUB}/_stub/script`, STUB_SCRIPT, false);
        assert.ok(res.status >= 200 && res.status < 300, `stub script refused: ${res.status}`);
        // An evaluation whose control run has the same script as SES-ALPHA.
        const start = await http('POST', `${BASE}/v1/evaluations`, {
            dimension: 'prompt',
            model: MODEL,
            runs: 1,
            control: { label: 'terse', prompt: 'SES-ALPHA in an evaluation' },
            treatment: { label: 'wordy', prompt: 'SES-BRAVO in an evaluation' },
        });
        assert.equal(start.status, 202, JSON.stringify(start.data));
        evalId = start.data.evaluation_id;
        for (let i = 0; i < 200; i++) {
            const r = await http('GET', `${BASE}/v1/evaluations/${evalId}`);
            if (r.data && r.data.status === 'completed') {
                evalControl = r.data.progress.runs.find((x) => x.role === 'control').session_id;
                break;
            }
            await new Promise((resolve) => setTimeout(resolve, 100));
        }
        assert.ok(evalControl, 'the evaluation completed');
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

    test('start sessions, compare them live against a baseline, and reach final figures', { timeout: 120000 }, async () => {
        await page.goto(`${BASE}/#/`);
        await page.click('[data-testid=nav-sessions]');
        await page.waitForSelector('[data-testid=sessions-view]');
        assert.equal(await page.textContent('[data-testid=compare-empty]'), 'Pick 2–5 sessions and a baseline, then Compare.');
        // The form starts with the first available model of the catalogue: its id and provider.
        const catalogue = await http('GET', `${BASE}/v1/models`);
        assert.equal(catalogue.status, 200);
        const first = catalogue.data.models.find((m) => m.available);
        assert.ok(first, `no available model in ${JSON.stringify(catalogue.data)}`);
        await page.waitForFunction(() => document.querySelector('[data-testid=session-field-model]').value !== '');
        assert.equal(await page.inputValue('[data-testid=session-field-model]'), first.id);
        assert.equal(await page.inputValue('[data-testid=session-field-provider]'), first.provider);

        const alpha = await startSession('alpha', 'SES-ALPHA: say hi');
        // One session is not a comparison: the server's message, checked before asking it.
        await page.click('[data-testid=compare-button]');
        assert.equal(await page.textContent('[data-testid=compare-error]'), 'session_ids must contain between 2 and 5 sessions');

        const bravo = await startSession('bravo', 'SES-BRAVO: say hi');
        const charlie = await startSession('charlie', 'SES-CHARLIE: what is the weather?');
        assert.match(alpha, /^ses_[0-9a-f]{32}$/);

        // An evaluation's run, from the picker.
        await page.selectOption('[data-testid=eval-select]', evalId);
        await page.waitForSelector(`[data-testid="pick-${evalControl}"]`);
        await page.check(`[data-testid="pick-${evalControl}"]`);
        await page.check(`[data-testid="baseline-${alpha}"]`);
        const selection = await page.$$eval('[data-testid=selection] li', (els) => els.map((e) => e.dataset.sessionId));
        assert.deepEqual(selection, [alpha, bravo, charlie, evalControl]);

        // Count the plain comparison reads: one, then the event stream carries every update.
        let reads = 0;
        let streams = 0;
        page.on('request', (r) => {
            const u = r.url();
            if (u.includes('/v1/sessions/compare/events')) streams++;
            else if (u.includes('/v1/sessions/compare')) reads++;
        });
        await page.evaluate(() => {
            window.__sameDocument = true;
        });
        await page.click('[data-testid=compare-button]');
        await page.waitForSelector('[data-testid=compare-matrix]');
        assert.match(page.url(), new RegExp(`#/sessions\\?ids=${alpha},${bravo},${charlie},${evalControl}&baseline=${alpha}$`));

        // CHARLIE is still waiting for its answer: its column shows partial figures.
        await page.waitForFunction(() => document.querySelector('[data-testid=cmp-col-2]')?.dataset.lifecycle === 'partial', null, { timeout: 15000 });
        assert.equal(await page.getAttribute('[data-testid=cmp-col-2]', 'data-session-id'), charlie);
        assert.equal(await page.getAttribute('[data-testid=cmp-col-2]', 'data-partial'), 'true');
        assert.equal(await page.textContent('[data-testid=cmp-lifecycle-2]'), 'partial');
        assert.equal(await cell('cmp-total_tokens-2'), 60);
        assert.equal(await cell('cmp-total_tokens-2', 'data-absolute'), -60);
        near(await cell('cmp-total_tokens-2', 'data-percent'), -50, 'partial total tokens %');
        assert.equal(await page.getAttribute('[data-testid=cmp-total_tokens-2]', 'data-verdict'), 'better');
        assert.equal(await cell('cmp-function_call_errors-2'), 1);
        assert.equal(await page.textContent('[data-testid=compare-live]'), 'live');
        for (const g of ['efficiency', 'reliability', 'orchestration'])
            assert.equal(await page.locator(`[data-testid=cmp-group-${g}]`).count(), 1, g);
        await shot('sessions-comparison-partial.png');

        // Then the final figures arrive over the stream.
        await page.waitForFunction(() => document.querySelector('[data-testid=cmp-col-2]')?.dataset.lifecycle === 'final', null, { timeout: CHARLIE_LATENCY_MS + 20000 });
        await page.waitForFunction(() => document.querySelector('[data-testid=compare-live]')?.textContent === 'final', null, { timeout: 5000 });
        assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the page must not reload');
        assert.equal(reads, 1, 'one comparison read; updates come over the stream');
        assert.ok(streams >= 1, 'the comparison stream was opened');
        for (let i = 0; i < 4; i++) assert.equal(await page.getAttribute(`[data-testid=cmp-col-${i}]`, 'data-partial'), 'false');

        // The baseline (ALPHA: 120 tokens, 1 generation).
        assert.equal(await cell('cmp-total_tokens-0'), 120);
        assert.equal(await page.textContent('[data-testid=cmp-total_tokens-0] .cmp-delta'), 'baseline');
        // BRAVO: 340 tokens, +220 (+183.3 %), worse.
        assert.equal(await cell('cmp-total_tokens-1'), 340);
        assert.equal(await cell('cmp-total_tokens-1', 'data-absolute'), 220);
        near(await cell('cmp-total_tokens-1', 'data-percent'), (220 / 120) * 100, 'BRAVO total tokens %');
        assert.equal(await page.getAttribute('[data-testid=cmp-total_tokens-1]', 'data-verdict'), 'worse');
        assert.match(await page.getAttribute('[data-testid=cmp-total_tokens-1]', 'class'), /\bworse\b/);
        assert.equal(await page.textContent('[data-testid=cmp-total_tokens-1] .cmp-delta'), '+220 (+183.3%)');
        assert.equal(await cell('cmp-input_tokens-1', 'data-absolute'), 200);
        near(await cell('cmp-input_tokens-1', 'data-percent'), 200, 'BRAVO input %');
        // CHARLIE: 2 generations, 145 tokens (+25, +20.8 %), 1 function call with an error.
        assert.equal(await cell('cmp-generations-2'), 2);
        assert.equal(await cell('cmp-total_tokens-2'), 145);
        assert.equal(await cell('cmp-total_tokens-2', 'data-absolute'), 25);
        near(await cell('cmp-total_tokens-2', 'data-percent'), (25 / 120) * 100, 'CHARLIE total tokens %');
        near(await cell('cmp-tokens_per_generation-2'), 72.5, 'CHARLIE tokens per generation');
        near(await cell('cmp-tokens_per_generation-2', 'data-absolute'), 72.5 - 120, 'CHARLIE tokens per generation delta');
        assert.equal(await page.getAttribute('[data-testid=cmp-tokens_per_generation-2]', 'data-verdict'), 'better');
        assert.equal(await cell('cmp-function_calls-2'), 1);
        assert.equal(await page.getAttribute('[data-testid=cmp-function_calls-2]', 'data-verdict'), 'changed');
        assert.equal(await cell('cmp-function_call_errors-2', 'data-absolute'), 1);
        assert.equal(await cell('cmp-function_call_errors-2', 'data-percent'), null, 'baseline 0: no percentage');
        assert.equal(await cell('cmp-function_error_rate-2'), 1);
        assert.equal(await cell('cmp-function_error_rate-2', 'data-absolute'), null, 'the baseline made no call');
        assert.ok((await cell('cmp-wall_time_ms-2')) >= CHARLIE_LATENCY_MS);
        // The evaluation's control run had ALPHA's script: no difference.
        assert.equal(await cell('cmp-total_tokens-3'), 120);
        assert.equal(await cell('cmp-total_tokens-3', 'data-absolute'), 0);
        assert.equal(await page.getAttribute('[data-testid=cmp-total_tokens-3]', 'data-verdict'), 'same');
        assert.match(await page.textContent('[data-testid=cmp-col-3]'), /eval run/);

        // The numbers are the API's.
        const api = await http('GET', `${BASE}/v1/sessions/compare?ids=${alpha},${bravo},${charlie},${evalControl}&baseline=${alpha}`);
        assert.equal(api.status, 200);
        assert.equal(api.data.sessions[2].summary.total_tokens, 145);
        assert.equal(api.data.sessions[1].deltas.total_tokens.absolute, 220);
        await shot('sessions-comparison.png');

        // Another baseline, from the selection: BRAVO.
        await page.check(`[data-testid="baseline-${bravo}"]`);
        await page.click('[data-testid=compare-button]');
        await page.waitForFunction((id) => document.querySelector('[data-testid=cmp-col-1]')?.classList.contains('is-baseline')
            && document.querySelector('[data-testid=cmp-col-1]')?.dataset.sessionId === id, bravo, { timeout: 10000 });
        await page.waitForFunction(() => document.querySelector('[data-testid=cmp-total_tokens-0]')?.dataset.absolute === '-220', null, { timeout: 10000 });
        assert.equal(await page.getAttribute('[data-testid=cmp-total_tokens-0]', 'data-verdict'), 'better');
    });

    async function shot(name) {
        mkdirSync(ARTIFACTS, { recursive: true });
        await page.evaluate(() => window.scrollTo(0, 0));
        await page.locator('#main').screenshot({ path: path.join(ARTIFACTS, name), style: '.topbar { position: static !important; }' });
    }
});
