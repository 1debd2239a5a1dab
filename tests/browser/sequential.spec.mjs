// Browser test of the console's sequential experiments against a running evald (EVALD_URL) whose
// openai provider points at evald-stub (EVALD_STUB_URL), with the system Chromium through
// playwright-core. Fills the create form for an anytime experiment with a budget over a
// 40-case dataset on which the treatment passes and the control fails every case, has a plan
// refused (a cost cap on a model without a price) and then planned (runs, calls, tokens, no
// price, cases needed worked out here), starts it, and once it completes checks the stop line
// (decided, runs saved = progress.skipped_runs), the anytime-valid banner with the fixed-sample
// figures beside it, the confidence-sequence chart (drawn case by case, its last point the
// API's sequential low/high to 1e-9, the decision marked), the spend bars against the caps and
// the skipped cases of the matrix. A second experiment, fixed rule, stops on its max_calls cap.
// Screenshots: experiment-plan.png and experiment-sequential.png in $EVALD_ARTIFACTS_DIR. The
// stub script is global: run this file alone or with --test-concurrency=1 (package.json does).
// Without EVALD_URL it prints SKIPPED and passes.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';

const BASE = (process.env.EVALD_URL || '').replace(/\/+$/, '');
const STUB = (process.env.EVALD_STUB_URL || '').replace(/\/+$/, '');
const TOKEN = process.env.EVALD_API_TOKEN || '';
const ARTIFACTS = process.env.EVALD_ARTIFACTS_DIR || 'artifacts';
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const COMPLETE_MS = 120000;
const CASES = 40;

const skip = !BASE ? 'EVALD_URL is not set' : !STUB ? 'EVALD_STUB_URL is not set (the test scripts the stub)' : false;
if (skip) console.log(`SKIPPED: sequential experiments browser test: ${skip}`);

// The treatment ("SEQT …") always answers the expected "yes", the control ("SEQC …") never:
// every paired difference is +1. Each answer takes 100 ms, so that with one case at a time the
// analysis decides (after min_cases 10) long before the 40th case would be dispatched.
const STUB_SCRIPT = {
    rules: [
        { when: { prompt_contains: 'SEQT ' }, latency_ms: 100, reply: { text: 'yes' }, usage: { input_tokens: 8, output_tokens: 1 } },
        { when: { prompt_contains: 'SEQC ' }, latency_ms: 100, reply: { text: 'no' }, usage: { input_tokens: 12, output_tokens: 1 } },
    ],
    default: { reply: { text: 'OK' }, usage: { input_tokens: 10, output_tokens: 2 } },
};

async function http(method, url, body) {
    const headers = { Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (TOKEN) headers.Authorization = `Bearer ${TOKEN}`;
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

// Every case row of an experiment (pages of 100).
async function allCases(id) {
    let rows = [];
    let before = '';
    for (;;) {
        const res = await http('GET', `${BASE}/v1/experiments/${id}/cases?limit=100${before ? `&before=${encodeURIComponent(before)}` : ''}`);
        assert.equal(res.status, 200, res.text);
        rows = rows.concat(res.data.cases);
        if (!res.data.next_cursor) return rows;
        before = res.data.next_cursor;
    }
}

// The banner's number format, written independently of the console: +77.8 pp, −5 pp.
function pp(v) {
    const s = Math.abs(v * 100).toFixed(1).replace(/\.0$/, '');
    if (s === '0') return '0 pp';
    return `${v > 0 ? '+' : '−'}${s} pp`;
}

const int = (v) => v.toLocaleString('en-US');

if (skip) test('sequential experiments', { skip }, () => {});
else describe('sequential experiments', () => {
    let browser;
    let page;
    const suffix = randomBytes(4).toString('hex');

    async function shot(name) {
        mkdirSync(ARTIFACTS, { recursive: true });
        await page.evaluate(() => window.scrollTo(0, 0));
        await page.locator('#main').screenshot({ path: path.join(ARTIFACTS, name), style: '.topbar { position: static !important; } .toast { display: none !important; }' });
    }

    before(async () => {
        const res = await http('PUT', `${STUB}/_stub/script`, STUB_SCRIPT);
        assert.ok(res.status >= 200 && res.status < 300, `stub script refused: ${res.status}`);
        await http('POST', `${STUB}/_stub/reset`, {});
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

    test('plan an anytime experiment with a budget, start it, and read its stop, verdict, sequence and spend', { timeout: COMPLETE_MS + 60000 }, async () => {
        await page.goto(`${BASE}/#/experiments/new`);
        await page.waitForSelector('[data-testid=exp-form]');
        const fileName = `seq-${suffix}.csv`;
        const csv = `id,question,expected\n${Array.from({ length: CASES }, (_, i) => `s${String(i + 1).padStart(2, '0')},q${i + 1},yes`).join('\n')}\n`;
        await page.setInputFiles('[data-testid=exp-field-file]', { name: fileName, mimeType: 'text/csv', buffer: Buffer.from(csv) });
        await page.waitForFunction(() => /^Uploaded /.test(document.querySelector('[data-testid=exp-upload-status]')?.textContent || ''), null, { timeout: 15000 });

        await page.fill('[data-testid=exp-field-name]', `seq-${suffix}`);
        await page.fill('[data-testid=exp-field-model]', 'stub-model');
        await page.fill('[data-testid=exp-field-provider]', 'openai');
        await page.fill('[data-testid=exp-field-control_label]', 'v1');
        await page.fill('[data-testid=exp-field-control_prompt]', 'SEQC {{question}}');
        await page.fill('[data-testid=exp-field-treatment_0_label]', 'v2');
        await page.fill('[data-testid=exp-field-treatment_0_prompt]', 'SEQT {{question}}');
        await page.fill('[data-testid=exp-field-repeats]', '1');
        await page.fill('[data-testid=exp-field-concurrency]', '1');
        await page.fill('[data-testid=exp-field-min_effect]', '0.1');

        // min_cases and seed belong to the anytime rule only.
        assert.equal(await page.isVisible('[data-testid=exp-field-min_cases]'), false);
        await page.selectOption('[data-testid=exp-field-stopping_rule]', 'anytime');
        assert.equal(await page.isVisible('[data-testid=exp-field-min_cases]'), true);
        await page.fill('[data-testid=exp-field-min_cases]', '10');
        await page.fill('[data-testid=exp-field-seed]', '42');
        await page.fill('[data-testid=exp-field-max_calls]', '500');
        await page.fill('[data-testid=exp-field-max_tokens]', '100000');
        await page.fill('[data-testid=exp-field-plan_effect]', '0.3');
        await page.fill('[data-testid=exp-field-plan_sd]', '0.5');

        // A plan refused: a cost cap needs a price, and the stub's model has none.
        const listed = (await http('GET', `${BASE}/v1/experiments?limit=100`)).data.experiments.length;
        await page.fill('[data-testid=exp-field-max_cost_usd]', '1');
        await page.click('[data-testid=exp-plan]');
        await page.waitForSelector('[data-testid=exp-plan-error]:not([hidden])', { timeout: 15000 });
        assert.equal(await page.textContent('[data-testid=exp-plan-error]'), 'budget.max_cost_usd needs a price for model stub-model');
        assert.equal(await page.textContent('[data-testid=exp-error-max_cost_usd]'), 'budget.max_cost_usd needs a price for model stub-model');
        assert.equal(await page.getAttribute('[data-testid=exp-error-max_cost_usd]', 'data-source'), 'server');
        assert.equal(await page.getAttribute('[data-testid=exp-field-max_cost_usd]', 'aria-invalid'), 'true');
        assert.equal(await page.isVisible('[data-testid=exp-form-error]'), false, 'the refusal is beside the plan, not above the start');
        assert.equal(await page.isVisible('[data-testid=exp-plan-result]'), false);

        // A client check before any request: min_cases below 2.
        await page.fill('[data-testid=exp-field-max_cost_usd]', '');
        await page.fill('[data-testid=exp-field-min_cases]', '1');
        await page.click('[data-testid=exp-plan]');
        assert.equal(await page.textContent('[data-testid=exp-error-min_cases]'), 'stopping.min_cases must be between 2 and 100000');
        assert.equal(await page.getAttribute('[data-testid=exp-error-min_cases]', 'data-source'), 'client');
        await page.fill('[data-testid=exp-field-min_cases]', '10');

        // The plan: 40 cases × 2 arms × 1 repeat = 80 runs; with anytime only min_cases × 2
        // calls are certain; 80 % power at 0.3 with s.d. 0.5 and α'' 0.05 needs
        // ⌈((z(0.975) + z(0.8)) · 0.5 / 0.3)²⌉ = ⌈21.8⌉ = 22 cases.
        const [planResponse] = await Promise.all([
            page.waitForResponse((r) => r.url().endsWith('/v1/experiments/plan') && r.request().method() === 'POST', { timeout: 15000 }),
            page.click('[data-testid=exp-plan]'),
        ]);
        assert.equal(planResponse.status(), 200);
        const plan = await planResponse.json();
        const sent = planResponse.request().postDataJSON();
        assert.deepEqual(sent.stopping, { rule: 'anytime', min_cases: 10, seed: 42 });
        assert.deepEqual(sent.budget, { max_calls: 500, max_tokens: 100000 });
        assert.deepEqual(sent.plan, { effect: 0.3, sd: 0.5 });
        await page.waitForSelector('[data-testid=exp-plan-result]:not([hidden])');
        assert.equal(await page.isVisible('[data-testid=exp-plan-error]'), false);
        const z = 1.959963984540054 + 0.8416212335729143;
        const casesNeeded = Math.ceil(((z * 0.5) / 0.3) ** 2);
        assert.equal(casesNeeded, 22);
        assert.equal(plan.runs, 80);
        assert.equal(plan.calls.min, 20);
        assert.equal(plan.cost_usd, null);
        assert.equal(plan.power.cases_needed, casesNeeded);
        const data = await page.$eval('[data-testid=exp-plan-result]', (el) => ({ ...el.dataset }));
        assert.deepEqual(data, {
            testid: 'exp-plan-result', stale: 'false', runs: '80', callsMin: '20', inputEstimate: String(plan.tokens.input_estimate), outputMax: String(plan.tokens.output_max),
            costEstimate: '', costMax: '', casesNeeded: '22', runsNeeded: '44',
        });
        assert.equal(await page.textContent('[data-testid=exp-plan-runs]'), '80 (40 cases × 2 arms × 1 repeat)');
        assert.match(await page.textContent('[data-testid=exp-plan-calls]'), /^20 \(/);
        assert.equal(await page.textContent('[data-testid=exp-plan-tokens]'), `about ${int(plan.tokens.input_estimate)} input · at most ${int(plan.tokens.output_max)} output`);
        assert.equal(await page.textContent('[data-testid=exp-plan-cost]'), 'no price for this model: not estimated');
        assert.match(await page.textContent('[data-testid=exp-plan-cases_needed]'), /^22 cases \(44 runs\) for 80% power at 30 pp with s\.d\. 0\.5/);
        assert.equal((await http('GET', `${BASE}/v1/experiments?limit=100`)).data.experiments.length, listed, 'planning wrote nothing');
        await shot('experiment-plan.png');
        // Another form makes the plan stale.
        await page.fill('[data-testid=exp-field-name]', `seq-${suffix}-1`);
        assert.equal(await page.getAttribute('[data-testid=exp-plan-result]', 'data-stale'), 'true');

        await page.click('[data-testid=exp-submit]');
        await page.waitForFunction(() => /#\/experiments\/exp_[0-9a-f]{32}$/.test(location.hash), null, { timeout: 15000 });
        const id = /#\/experiments\/(exp_[0-9a-f]+)/.exec(page.url())[1];
        await page.waitForFunction(() => document.querySelector('[data-testid=exp-status]')?.dataset.status === 'completed', null, { timeout: COMPLETE_MS });
        const exp = (await http('GET', `${BASE}/v1/experiments/${id}`)).data;
        assert.equal(exp.status, 'completed');
        assert.deepEqual(exp.request.stopping, { rule: 'anytime', min_cases: 10, seed: 42 });
        assert.equal(exp.analysis.rule, 'anytime');

        // The stop: decided, with the runs saved = the skipped runs, some of them.
        const { stopped, progress, spend } = exp;
        const cmp = exp.comparisons[0];
        const seq = cmp.sequential;
        assert.equal(stopped.reason, 'decided');
        assert.ok(stopped.runs_saved > 0, `runs saved: ${stopped.runs_saved}`);
        assert.equal(stopped.runs_saved, progress.skipped_runs);
        await page.waitForSelector('[data-testid=exp-stop]');
        assert.equal(await page.getAttribute('[data-testid=exp-stop]', 'data-reason'), 'decided');
        assert.equal(Number(await page.getAttribute('[data-testid=exp-stop]', 'data-runs-saved')), progress.skipped_runs);
        assert.equal(await page.textContent('[data-testid=exp-stop-text]'), `decided at case ${stopped.at_case} of 40 · ${int(progress.skipped_runs)} runs saved`);
        await page.waitForFunction((n) => document.querySelector('[data-testid=exp-progress-text]')?.dataset.skipped === String(n), progress.skipped_runs, { timeout: 10000 });
        assert.equal(await page.textContent('[data-testid=exp-progress-text]'),
            `80/80 runs finished · ${progress.passed_runs} met criteria · ${progress.failed_runs} missed criteria · 0 not evaluated · ${progress.skipped_runs} skipped`);

        // The banner: the sequential verdict, anytime-valid, the fixed-sample figures beside it.
        assert.equal(cmp.verdict, 'better');
        assert.equal(seq.verdict, 'better');
        assert.ok(seq.decided_at >= 10 && seq.decided_at <= seq.n, JSON.stringify(seq));
        assert.equal(await page.getAttribute('[data-testid=exp-verdict]', 'data-verdict'), 'better');
        assert.equal(await page.textContent('[data-testid=exp-verdict-headline]'), 'v2 is better than v1');
        assert.equal(await page.textContent('[data-testid=exp-verdict-anytime]'), 'anytime-valid');
        assert.equal(await page.textContent('[data-testid=exp-verdict-figures]'),
            `anytime-valid 95% CS [${pp(seq.low)}, ${pp(seq.high)}] · decided at case ${seq.decided_at} · ${seq.n} cases in the sequence`);
        assert.match(await page.textContent('[data-testid=exp-verdict-fixed]'),
            new RegExp(`^fixed-sample, not valid under optional stopping: ${cmp.fixed_verdict} · pass rate \\+100 pp · .* · ${cmp.paired_cases} paired cases$`));

        // The confidence sequence, recomputed from the case rows: one point per case of the
        // sequence, the last one the server's to 1e-9, the decision marked at decided_at.
        await page.waitForSelector('[data-testid=exp-seq-chart][data-match=true]', { timeout: 15000 });
        const charts = page.locator('[data-testid=exp-seq-chart]');
        assert.equal(await charts.count(), 1);
        const chart = await charts.evaluate((el) => ({ ...el.dataset }));
        assert.equal(Number(chart.n), seq.n);
        assert.ok(Math.abs(Number(chart.low) - seq.low) <= 1e-9, `low ${chart.low} vs ${seq.low}`);
        assert.ok(Math.abs(Number(chart.high) - seq.high) <= 1e-9, `high ${chart.high} vs ${seq.high}`);
        const last = await page.$eval('[data-testid=cs-last]', (el) => ({ ...el.dataset }));
        assert.equal(Number(last.n), seq.n);
        assert.ok(Math.abs(Number(last.low) - seq.low) <= 1e-9 && Math.abs(Number(last.high) - seq.high) <= 1e-9);
        assert.equal(await page.getAttribute('[data-testid=cs-band]', 'data-points'), String(seq.n + 1), 'from n = 0 to the last case');
        assert.equal(await page.getAttribute('[data-testid=cs-decided]', 'data-n'), String(seq.decided_at));
        assert.equal(await page.locator('[data-testid=exp-sequence] [data-testid=cs-margin]').count(), 1, '±min_effect shaded');
        assert.equal(await page.locator('[data-testid=exp-sequence] [data-testid=cs-min-cases]').count(), 1);
        // Drawn above zero: the last lower bound's dot lies above the zero line.
        const zero = await page.locator('[data-testid=cs-zero]').boundingBox();
        const lowDot = await page.locator('[data-testid=cs-last] circle').first().boundingBox();
        assert.ok(lowDot.y + lowDot.height / 2 < zero.y, `low bound (${lowDot.y}) above zero (${zero.y})`);
        // The sequence has as many cases as the rows with a seq, and the skipped ones have none.
        const rows = await allCases(id);
        const skippedRows = rows.filter((r) => r.skipped);
        assert.equal(rows.filter((r) => Number.isInteger(r.seq)).length, seq.n);
        assert.equal(skippedRows.length * 2, progress.skipped_runs, 'two runs a skipped case');
        assert.ok(skippedRows.every((r) => r.seq === null));

        // The spend against the two caps present; the stub's usage is 1 call a run.
        const ran = progress.total_runs - progress.skipped_runs;
        assert.equal(spend.calls, ran);
        assert.deepEqual(spend.budget, { max_calls: 500, max_tokens: 100000 });
        const bars = await page.$$eval('[data-testid=exp-spend-bar]', (els) => els.map((e) => ({
            cap: e.dataset.cap, used: e.dataset.used, max: e.dataset.max, over: e.dataset.over, text: e.querySelector('[data-testid=exp-spend-text]').textContent,
            width: parseFloat(e.querySelector('.progressbar span').style.width),
        })));
        const tokens = spend.input_tokens + spend.output_tokens;
        assert.equal(tokens, (ran / 2) * (8 + 1 + 12 + 1));
        const pct = (f) => `${(100 * f).toFixed(f < 0.1 ? 1 : 0).replace(/\.0$/, '')}%`;
        for (const [bar, used, max] of [[bars[0], spend.calls, 500], [bars[1], tokens, 100000]]) {
            assert.ok(Math.abs(bar.width - (100 * used) / max) < 0.01, `${bar.cap} bar width ${bar.width}% for ${used} of ${max}`);
            delete bar.width;
        }
        assert.deepEqual(bars, [
            { cap: 'max_calls', used: String(spend.calls), max: '500', over: 'false', text: `${spend.calls} of 500 calls (${pct(spend.calls / 500)})` },
            { cap: 'max_tokens', used: String(tokens), max: '100000', over: 'false', text: `${int(tokens)} of 100,000 tokens (${pct(tokens / 100000)})` },
        ]);
        assert.equal(await page.textContent('[data-testid=exp-spend-figures]'),
            `${spend.calls} calls · ${int(spend.input_tokens)} input + ${int(spend.output_tokens)} output tokens · cost not counted (no price)`);

        // The matrix marks the skipped cases.
        await page.waitForSelector('[data-testid=exp-case-row]');
        const matrix = await page.$$eval('[data-testid=exp-case-row]', (els) => els.map((r) => ({
            id: r.dataset.caseId, skipped: r.dataset.skipped, seq: r.dataset.seq, cells: [...r.querySelectorAll('[data-testid=exp-cell]')].map((c) => c.textContent),
        })));
        assert.equal(matrix.length, CASES);
        const bySkip = new Set(skippedRows.map((r) => r.case_id));
        for (const row of matrix) {
            assert.equal(row.skipped, String(bySkip.has(row.id)), row.id);
            if (bySkip.has(row.id)) assert.deepEqual(row.cells, ['skipped', 'skipped'], row.id);
            else assert.deepEqual(row.cells, ['0/1', '1/1'], row.id);
        }
        await shot('experiment-sequential.png');
    });

    test('a fixed experiment stops on its max_calls cap, and its sequence is drawn on demand', { timeout: COMPLETE_MS + 30000 }, async () => {
        const cases = Array.from({ length: CASES }, (_, i) => ({ id: `b${String(i + 1).padStart(2, '0')}`, vars: { question: `b${i + 1}` }, expected: 'yes' }));
        const start = await http('POST', `${BASE}/v1/experiments`, {
            name: `budget-${suffix}`,
            dimension: 'prompt',
            model: { model: 'stub-model', provider: 'openai' },
            control: { label: 'v1', prompt: 'SEQC {{question}}' },
            treatments: [{ label: 'v2', prompt: 'SEQT {{question}}' }],
            cases,
            evaluator: { function_id: 'eval::assert::normalized_text', arguments: { expected: '{{expected}}' } },
            repeats: 1,
            concurrency: 1,
            budget: { max_calls: 12 },
        });
        assert.equal(start.status, 202, JSON.stringify(start.data));
        const id = start.data.experiment_id;
        await page.goto(`${BASE}/#/experiments/${id}`);
        // A change of the hash alone keeps the last test's (completed) view until this
        // experiment's is drawn: wait for this one's title first.
        await page.waitForFunction((name) => document.querySelector('[data-testid=exp-title]')?.textContent === name, `budget-${suffix}`, { timeout: COMPLETE_MS });
        await page.waitForFunction(() => document.querySelector('[data-testid=exp-status]')?.dataset.status === 'completed', null, { timeout: COMPLETE_MS });
        const exp = (await http('GET', `${BASE}/v1/experiments/${id}`)).data;
        assert.equal(exp.status, 'completed');
        assert.equal(exp.stopped.reason, 'budget');
        assert.equal(exp.stopped.runs_saved, exp.progress.skipped_runs);
        assert.ok(exp.spend.calls <= 12 + 2, `one case's calls at most over the cap: ${exp.spend.calls}`);
        await page.waitForSelector('[data-testid=exp-stop][data-reason=budget]');
        assert.equal(await page.textContent('[data-testid=exp-stop-text]'),
            `budget reached at case ${exp.stopped.at_case} of 40 · ${exp.stopped.runs_saved} runs saved`);
        const bar = await page.$eval('[data-testid=exp-spend-bar]', (e) => ({ ...e.dataset }));
        assert.deepEqual([bar.cap, bar.used, bar.max], ['max_calls', String(exp.spend.calls), '12']);
        assert.equal(await page.locator('[data-testid=exp-spend-bar]').count(), 1, 'one bar per cap present');
        // The fixed rule: the fixed-sample verdict, no anytime badge, the sequence folded away.
        assert.equal(await page.locator('[data-testid=exp-verdict-anytime]').count(), 0);
        assert.equal(await page.locator('[data-testid=exp-verdict-fixed]').count(), 0);
        assert.equal(await page.locator('[data-testid=exp-seq-chart]').count(), 0, 'not read before it is opened');
        await page.click('[data-testid=exp-sequence-details] > summary');
        await page.waitForSelector('[data-testid=exp-seq-chart][data-match=true]', { timeout: 15000 });
        const seq = exp.comparisons[0].sequential;
        const chart = await page.$eval('[data-testid=exp-seq-chart]', (el) => ({ ...el.dataset }));
        assert.equal(Number(chart.n), seq.n);
        assert.ok(Math.abs(Number(chart.low) - seq.low) <= 1e-9 && Math.abs(Number(chart.high) - seq.high) <= 1e-9);
    });
});
