// Browser test of the console's Experiments view against a running evald (EVALD_URL) whose
// openai provider points at evald-stub (EVALD_STUB_URL), with the system Chromium through
// playwright-core. Uploads a CSV dataset through the form, has a server refusal shown beside
// its field (with nothing written), starts a two-arm experiment whose per-case answers the
// stub script decides, watches it finish, and checks the verdict banner against the API, the
// forest plot (one interval per treatment, right of the zero line), the matrix's x/k counts,
// the flaky and disagree filters, a case's runs with the word diff against the control, the
// export links and the list. A second experiment, one case fast and two slow, is followed
// live (progress, matrix, partial banner over the event stream) and cancelled from the view;
// a third, of 230 inline cases, has its matrix read page by page.
// Screenshots: experiment-form.png and experiment-detail.png in $EVALD_ARTIFACTS_DIR. The
// stub script is global: run this file alone or with --test-concurrency=1 (package.json does).
// Without EVALD_URL it prints SKIPPED and passes.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';

const BASE = (process.env.EVALD_URL || '').replace(/\/+$/, '');
const STUB = (process.env.EVALD_STUB_URL || '').replace(/\/+$/, '');
const TOKEN = process.env.EVALD_API_TOKEN || '';
const ARTIFACTS = process.env.EVALD_ARTIFACTS_DIR || 'artifacts';
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const COMPLETE_MS = 120000;

const skip = !BASE ? 'EVALD_URL is not set' : !STUB ? 'EVALD_STUB_URL is not set (the test scripts the stub)' : false;
if (skip) console.log(`SKIPPED: experiments view browser test: ${skip}`);

// Six cases. The treatment ("TREAT …") always answers "yes" (the expected answer); the
// control ("CTRL …") answers "yes" on alpha, "yes" only the first time on bravo (flaky: 1 of
// 3), and "no" on the other four. Repeats 3: control 3/3, 1/3, 0/3 ×4; treatment 3/3 ×6.
const CASES = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot'];
const STUB_SCRIPT = {
    rules: [
        { when: { prompt_contains: 'SLOWEXP' }, latency_ms: 30000, reply: { text: 'late' } },
        { when: { prompt_contains: 'TREAT ' }, reply: { text: 'yes' }, usage: { input_tokens: 8, output_tokens: 1 } },
        { when: { prompt_contains: 'CTRL alpha' }, reply: { text: 'yes' }, usage: { input_tokens: 12, output_tokens: 1 } },
        { when: { prompt_contains: 'CTRL bravo' }, times: 1, reply: { text: 'yes' }, usage: { input_tokens: 12, output_tokens: 1 } },
        { when: { prompt_contains: 'CTRL ' }, reply: { text: 'no' }, usage: { input_tokens: 12, output_tokens: 1 } },
    ],
    default: { reply: { text: 'OK' }, usage: { input_tokens: 10, output_tokens: 2 } },
};
// Expected per case: [control passes, treatment passes] of 3.
const EXPECTED = { k1: [3, 3], k2: [1, 3], k3: [0, 3], k4: [0, 3], k5: [0, 3], k6: [0, 3] };

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
    return { status: res.status, data, text, type: res.headers.get('content-type') || '' };
}

// The banner's number format, written independently of the console: +77.8 pp, −5 pp.
function pp(v) {
    const s = Math.abs(v * 100).toFixed(1).replace(/\.0$/, '');
    if (s === '0') return '0 pp';
    return `${v > 0 ? '+' : '−'}${s} pp`;
}

if (skip) test('experiments view', { skip }, () => {});
else describe('experiments view', () => {
    let browser;
    let page;
    const suffix = randomBytes(4).toString('hex');

    async function shot(name) {
        mkdirSync(ARTIFACTS, { recursive: true });
        await page.evaluate(() => window.scrollTo(0, 0));
        await page.locator('#main').screenshot({ path: path.join(ARTIFACTS, name), style: '.topbar { position: static !important; } .toast { display: none !important; }' });
    }

    const currentId = () => (/#\/experiments\/(exp_[0-9a-f]+)/.exec(page.url()) || [])[1] || null;

    async function fillArms(control, treatment) {
        await page.fill('[data-testid=exp-field-control_label]', 'v1');
        await page.fill('[data-testid=exp-field-control_prompt]', control);
        await page.fill('[data-testid=exp-field-treatment_0_label]', 'v2');
        await page.fill('[data-testid=exp-field-treatment_0_prompt]', treatment);
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
        const context = await browser.newContext({ viewport: { width: 1400, height: 1000 }, acceptDownloads: true });
        if (TOKEN) await context.addInitScript((t) => sessionStorage.setItem('evald.token', t), TOKEN);
        page = await context.newPage();
        page.on('pageerror', (e) => console.log(`page error: ${e.message}`));
    });

    after(async () => {
        if (browser) await browser.close();
    });

    test('upload a CSV, start a two-arm experiment, read its verdict, plot, matrix, runs and export', { timeout: COMPLETE_MS + 60000 }, async () => {
        const before = await http('GET', `${BASE}/v1/experiments?limit=100`);
        assert.equal(before.status, 200, JSON.stringify(before.data));
        const countBefore = before.data.experiments.length;

        await page.goto(`${BASE}/#/`);
        await page.click('[data-testid=nav-experiments]');
        await page.waitForSelector('[data-testid=experiments-view]');
        await page.click('[data-testid=exp-new]');
        await page.waitForSelector('[data-testid=exp-form]');

        // The dataset, uploaded through the form.
        const fileName = `browser-${suffix}.csv`;
        const csv = `id,question,expected\n${CASES.map((q, i) => `k${i + 1},${q},yes`).join('\n')}\n`;
        await page.setInputFiles('[data-testid=exp-field-file]', { name: fileName, mimeType: 'text/csv', buffer: Buffer.from(csv) });
        await page.waitForFunction(() => /^Uploaded /.test(document.querySelector('[data-testid=exp-upload-status]')?.textContent || ''), null, { timeout: 15000 });
        const datasetId = await page.inputValue('[data-testid=exp-field-dataset]');
        assert.match(datasetId, /^ds_[0-9a-f]{32}$/);
        assert.equal(await page.textContent('[data-testid=exp-upload-status]'), `Uploaded ${fileName}: 6 cases (${datasetId})`);
        const ds = await http('GET', `${BASE}/v1/datasets/${datasetId}`);
        assert.equal(ds.status, 200);
        assert.equal(ds.data.name, fileName);
        assert.equal(ds.data.case_count, 6);

        // A refused upload shows the server's message at the file field.
        await page.setInputFiles('[data-testid=exp-field-file]', { name: `bad-${suffix}.csv`, mimeType: 'text/csv', buffer: Buffer.from('id,question\nk1,a\nk1,b\n') });
        await page.waitForSelector('[data-testid=exp-error-dataset]:not([hidden])', { timeout: 15000 });
        assert.match(await page.textContent('[data-testid=exp-error-dataset]'), new RegExp(`^bad-${suffix}\\.csv: row 2: duplicate id k1$`));
        assert.equal(await page.inputValue('[data-testid=exp-field-dataset]'), datasetId, 'the uploaded dataset stays chosen');

        await page.fill('[data-testid=exp-field-name]', `browser-${suffix}`);
        await page.fill('[data-testid=exp-field-model]', 'stub-model');
        await page.fill('[data-testid=exp-field-provider]', 'openai');
        await page.fill('[data-testid=exp-field-repeats]', '3');
        await page.fill('[data-testid=exp-field-concurrency]', '3');

        // A template variable no case defines: the server's message beside the prompt, nothing written.
        await fillArms('CTRL {{questoin}}', 'TREAT {{questoin}}');
        await page.click('[data-testid=exp-submit]');
        await page.waitForSelector('[data-testid=exp-form-error]:not([hidden])', { timeout: 15000 });
        assert.equal(await page.textContent('[data-testid=exp-form-error]'), 'case k1: template variable questoin is not defined');
        assert.equal(await page.getAttribute('[data-testid=exp-form-error]', 'data-source'), 'server');
        assert.equal(await page.textContent('[data-testid=exp-error-control_prompt]'), 'case k1: template variable questoin is not defined');
        assert.equal(await page.getAttribute('[data-testid=exp-field-control_prompt]', 'aria-invalid'), 'true');
        assert.equal((await http('GET', `${BASE}/v1/experiments?limit=100`)).data.experiments.length, countBefore, 'nothing was written');

        // A client check: both labels v1.
        await page.fill('[data-testid=exp-field-treatment_0_label]', 'v1');
        await page.click('[data-testid=exp-submit]');
        assert.equal(await page.textContent('[data-testid=exp-error-treatment_0_label]'), 'variant labels must be unique');
        assert.equal(await page.getAttribute('[data-testid=exp-error-treatment_0_label]', 'data-source'), 'client');

        await fillArms('CTRL {{question}}', 'TREAT {{ question }}');
        await shot('experiment-form.png');
        await page.click('[data-testid=exp-submit]');
        await page.waitForFunction(() => /#\/experiments\/exp_[0-9a-f]{32}$/.test(location.hash), null, { timeout: 15000 });
        const id = currentId();
        await page.waitForSelector('[data-testid=exp-detail]');

        await page.waitForFunction(() => document.querySelector('[data-testid=exp-status]')?.dataset.status === 'completed', null, { timeout: COMPLETE_MS });
        assert.equal(await page.locator('[data-testid=exp-cancel]').count(), 0, 'no cancel once terminal');
        assert.equal(await page.locator('[data-testid=exp-partial]').count(), 0, 'the final analysis is not partial');
        const exp = (await http('GET', `${BASE}/v1/experiments/${id}`)).data;
        assert.equal(exp.status, 'completed');
        assert.equal(exp.analysis.partial, false);
        assert.equal(exp.progress.total_runs, 36);
        await page.waitForFunction(() => document.querySelector('[data-testid=exp-progress-text]')?.dataset.done === '36', null, { timeout: 10000 });
        assert.equal(exp.progress.passed_runs, 18 + 4, 'the stub decided 22 passes');
        assert.equal(exp.progress.failed_runs, 14, 'evaluated runs that did not pass');
        assert.equal(await page.textContent('[data-testid=exp-progress-text]'), '36/36 runs finished · 22 met criteria · 14 missed criteria · 0 not evaluated');

        // The verdict: mean paired difference (0 + 2/3 + 1 × 4) / 6 = 7/9, clearly above 0.
        const cmp = exp.comparisons[0];
        assert.ok(Math.abs(cmp.pass_rate.delta - 7 / 9) < 1e-9, `delta ${cmp.pass_rate.delta}`);
        assert.equal(cmp.verdict, 'better');
        await page.waitForFunction(() => document.querySelector('[data-testid=exp-verdict]')?.dataset.partial === 'false', null, { timeout: 10000 });
        assert.equal(await page.locator('[data-testid=exp-verdict]').count(), 1);
        assert.equal(await page.getAttribute('[data-testid=exp-verdict]', 'data-verdict'), 'better');
        assert.equal(await page.textContent('[data-testid=exp-verdict-headline]'), 'v2 is better than v1');
        const pAdj = cmp.pass_rate.p_value_adjusted < 0.001 ? '< 0.001' : cmp.pass_rate.p_value_adjusted.toFixed(3);
        const level = `${(100 * (1 - exp.analysis.alpha_adjusted)).toFixed(1).replace(/\.0$/, '')}%`;
        assert.equal(await page.textContent('[data-testid=exp-verdict-figures]'),
            `pass rate +77.8 pp · ${level} CI [${pp(cmp.pass_rate.ci_low)}, ${pp(cmp.pass_rate.ci_high)}] · p (adjusted) ${pAdj} · MDE ${pp(cmp.pass_rate.mde).replace(/^\+/, '')} · 6 paired cases`);
        assert.equal(await page.locator('[data-testid=exp-verdict-needs]').count(), 0);

        // The forest plot: one interval per treatment, the API's, entirely right of the zero line.
        const intervals = page.locator('[data-testid=forest-interval]');
        assert.equal(await intervals.count(), exp.comparisons.length);
        assert.equal(await intervals.count(), 1);
        assert.ok(Math.abs(Number(await intervals.getAttribute('data-low')) - cmp.pass_rate.ci_low) < 1e-12);
        assert.ok(Math.abs(Number(await intervals.getAttribute('data-high')) - cmp.pass_rate.ci_high) < 1e-12);
        const zero = await page.locator('[data-testid=forest-zero]').boundingBox();
        const ci = await intervals.locator('line.forest-ci').first().boundingBox();
        assert.ok(zero && ci && ci.x > zero.x + zero.width, `the interval (${ci && ci.x}) lies right of zero (${zero && zero.x})`);

        // The metric forests: the stub's usage gives every case 8 + 1 tokens for the treatment
        // and 12 + 1 for the control, so the total-token delta is −4 with the interval [−4, −4].
        const tokens = page.locator('[data-testid=exp-forest-total_tokens] [data-testid=forest-metric-interval]');
        assert.equal(await tokens.count(), 1);
        assert.deepEqual([await tokens.getAttribute('data-delta'), await tokens.getAttribute('data-low'), await tokens.getAttribute('data-high')], ['-4', '-4', '-4']);
        assert.equal(await page.locator('[data-testid=exp-forest-output_tokens]').count(), 0, 'an all-zero metric gets no plot');

        // The matrix: rows = cases, columns = arms, x/k passes.
        await page.waitForSelector('[data-testid=exp-case-row]');
        const matrix = async () => page.$$eval('[data-testid=exp-case-row]', (rows) => rows.map((r) => ({
            id: r.dataset.caseId,
            flaky: r.dataset.flaky,
            cells: [...r.querySelectorAll('[data-testid=exp-cell]')].map((c) => ({ arm: c.dataset.arm, text: c.textContent, flaky: c.classList.contains('flaky') })),
        })));
        const all = await matrix();
        assert.deepEqual(all.map((r) => r.id), Object.keys(EXPECTED));
        for (const row of all) {
            const [xc, xt] = EXPECTED[row.id];
            assert.deepEqual(row.cells.map((c) => c.arm), ['0', '1'], row.id);
            assert.equal(row.cells[0].text.replace(' ~', ''), `${xc}/3`, `${row.id} control`);
            assert.equal(row.cells[1].text, `${xt}/3`, `${row.id} treatment`);
            assert.equal(row.cells[0].flaky, xc > 0 && xc < 3, `${row.id} control flaky mark`);
            assert.equal(row.flaky, String(xc > 0 && xc < 3), `${row.id} flaky`);
        }
        assert.equal(all[1].cells[0].text, '1/3 ~');

        // Filters: flaky keeps bravo; disagree keeps every case where the arms' rates differ.
        await page.click('[data-testid=exp-filter-flaky]');
        await page.waitForFunction(() => document.querySelector('[data-testid=exp-filter-flaky]')?.getAttribute('aria-pressed') === 'true'
            && document.querySelectorAll('[data-testid=exp-case-row]').length === 1, null, { timeout: 10000 });
        assert.deepEqual((await matrix()).map((r) => r.id), ['k2']);
        await page.click('[data-testid=exp-filter-disagree]');
        await page.waitForFunction(() => document.querySelectorAll('[data-testid=exp-case-row]').length === 5, null, { timeout: 10000 });
        assert.deepEqual((await matrix()).map((r) => r.id), ['k2', 'k3', 'k4', 'k5', 'k6']);
        await page.click('[data-testid=exp-filter-all]');
        await page.waitForFunction(() => document.querySelectorAll('[data-testid=exp-case-row]').length === 6, null, { timeout: 10000 });

        // A case's runs side by side, with the word diff against the control's same repeat.
        await page.click('[data-testid=exp-case-row][data-case-id=k2]');
        await page.waitForSelector('[data-testid=exp-case] [data-testid=exp-run]');
        assert.equal(await page.textContent('[data-testid=exp-case-title]'), 'Case k2');
        assert.equal(await page.locator('[data-testid=exp-case-arm]').count(), 2);
        const runs = async (arm) => page.$$eval(`[data-testid=exp-case-arm][data-arm="${arm}"] [data-testid=exp-run]`, (els) => els.map((e) => ({
            repeat: e.dataset.repeat, passed: e.dataset.passed, output: e.querySelector('[data-testid=exp-run-output]').textContent,
        })));
        const control = await runs(0);
        const treatment = await runs(1);
        assert.deepEqual(control.map((r) => r.repeat), ['1', '2', '3']);
        assert.deepEqual(control.filter((r) => r.output === 'yes').length, 1, 'one control repeat of bravo answered yes');
        assert.deepEqual(control.map((r) => r.passed), control.map((r) => String(r.output === 'yes')));
        assert.deepEqual(treatment.map((r) => [r.output, r.passed]), [['yes', 'true'], ['yes', 'true'], ['yes', 'true']]);
        const noRepeat = control.find((r) => r.output === 'no').repeat;
        const diff = page.locator(`[data-testid=exp-case-arm][data-arm="1"] [data-testid=exp-run][data-repeat="${noRepeat}"] [data-testid=exp-run-diff]`);
        assert.equal(await diff.locator('del').textContent(), 'no');
        assert.equal(await diff.locator('ins').textContent(), 'yes');
        // Each finished run shows the trace id of its /runs row.
        const rows = (await http('GET', `${BASE}/v1/experiments/${id}/runs?case_id=k2`)).data.runs;
        assert.equal(rows.length, 6);
        const shown = Object.fromEntries(await page.$$eval('[data-testid=exp-case] [data-testid=exp-run]', (els) => els.map((e) => [
            e.dataset.runId, e.querySelector('[data-testid=exp-run-trace-id]')?.textContent ?? null])));
        for (const r of rows) {
            assert.match(r.trace_id, /^[0-9a-f]{32}$/, `run ${r.run_id} has a trace id`);
            assert.equal(shown[r.run_id], r.trace_id, `run ${r.run_id} shows its trace id`);
        }
        await shot('experiment-detail.png');

        // Export: both links answer 200 with one record per run.
        for (const format of ['jsonl', 'csv']) {
            const href = await page.getAttribute(`[data-testid=exp-export-${format}]`, 'href');
            assert.equal(href, `/v1/experiments/${id}/export?format=${format}`);
            const res = await http('GET', `${BASE}${href}`);
            assert.equal(res.status, 200, `${format} export: ${res.text.slice(0, 200)}`);
            const lines = res.text.split('\n').filter((l) => l.trim());
            assert.equal(lines.length, format === 'csv' ? 37 : 36, `${format} records`);
            if (format === 'jsonl') assert.equal(JSON.parse(lines[0]).experiment_id, id);
            else assert.match(lines[0], /experiment_id/);
        }

        // Clicking the link downloads the same records (with a token, through the Authorization header).
        const [download] = await Promise.all([page.waitForEvent('download', { timeout: 15000 }), page.click('[data-testid=exp-export-jsonl]')]);
        assert.equal(download.suggestedFilename(), `${id}.jsonl`);
        const saved = readFileSync(await download.path(), 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
        assert.equal(saved.length, 36);
        assert.deepEqual(new Set(saved.map((r) => r.run_id)).size, 36);
        assert.equal(saved.filter((r) => r.passed === true).length, 22);

        // Edit as new: the form comes back with this experiment's settings and dataset.
        await page.click('[data-testid=exp-edit]');
        await page.waitForSelector('[data-testid=exp-form]');
        assert.equal(await page.inputValue('[data-testid=exp-field-name]'), `browser-${suffix}`);
        assert.equal(await page.inputValue('[data-testid=exp-field-control_prompt]'), 'CTRL {{question}}');
        assert.equal(await page.inputValue('[data-testid=exp-field-treatment_0_prompt]'), 'TREAT {{ question }}');
        assert.equal(await page.inputValue('[data-testid=exp-field-treatment_0_label]'), 'v2');
        assert.equal(await page.inputValue('[data-testid=exp-field-concurrency]'), '3');
        assert.equal(await page.inputValue('[data-testid=exp-field-dataset]'), datasetId);

        // The list shows it, newest first.
        await page.click('[data-testid=nav-experiments]');
        await page.waitForSelector(`[data-testid=exp-row][data-id="${id}"]`);
        assert.equal(await page.getAttribute(`[data-testid=exp-row][data-id="${id}"]`, 'data-status'), 'completed');
        assert.equal(await page.getAttribute('[data-testid=exp-row]', 'data-id'), id);
    });

    test('a running experiment updates live, shows its partial analysis, and is cancelled from its detail view', { timeout: 60000 }, async () => {
        // c1 answers at once (control "no", treatment "yes"); c2 and c3 wait 30 s on the stub (longer than the checks below).
        const dsRes = await fetch(`${BASE}/v1/datasets?name=${encodeURIComponent(`slow-${suffix}.csv`)}`, {
            method: 'POST',
            headers: { 'Content-Type': 'text/csv', ...(TOKEN ? { Authorization: `Bearer ${TOKEN}` } : {}) },
            body: 'question\nquick\nSLOWEXP one\nSLOWEXP two\n',
        });
        assert.ok(dsRes.status === 201 || dsRes.status === 200, `upload: ${dsRes.status}`);
        const ds = await dsRes.json();
        const start = await http('POST', `${BASE}/v1/experiments`, {
            name: `slow-${suffix}`,
            dimension: 'prompt',
            model: { model: 'stub-model', provider: 'openai' },
            control: { label: 'v1', prompt: 'CTRL {{question}}' },
            treatments: [{ label: 'v2', prompt: 'TREAT {{question}}' }],
            dataset_id: ds.dataset_id,
            evaluator: { function_id: 'eval::assert::normalized_text', arguments: { expected: 'yes' } },
            repeats: 1,
            concurrency: 3,
        });
        assert.equal(start.status, 202, JSON.stringify(start.data));
        const id = start.data.experiment_id;
        await page.goto(`${BASE}/#/experiments/${id}`);
        await page.evaluate(() => { window.__sameDocument = true; });
        await page.waitForSelector('[data-testid=exp-cancel]');
        // Running: the view follows the event stream, and the quick case's runs arrive in the
        // progress, the banner and the matrix without a reload.
        await page.waitForFunction(() => document.querySelector('[data-testid=exp-live]')?.textContent === 'live', null, { timeout: 10000 });
        await page.waitForFunction(() => document.querySelector('[data-testid=exp-progress-text]')?.dataset.done === '2', null, { timeout: 15000 });
        assert.equal(await page.getAttribute('[data-testid=exp-progress-text]', 'data-total'), '6');
        await page.waitForFunction(() => document.querySelector('[data-testid=exp-cell][data-arm="1"]')?.dataset.evaluated === '1', null, { timeout: 15000 });
        const cells = await page.$$eval('[data-testid=exp-case-row]', (rows) => rows.map((r) => [r.dataset.caseId,
            ...[...r.querySelectorAll('[data-testid=exp-cell]')].map((c) => `${c.textContent}${c.classList.contains('pending') ? ' pending' : ''}`)]));
        assert.deepEqual(cells, [['c1', '0/1', '1/1'], ['c2', '0/0 pending', '0/0 pending'], ['c3', '0/0 pending', '0/0 pending']]);
        // The analysis follows (read at most every 1.5 s): one paired case, no interval yet.
        await page.waitForFunction(() => document.querySelector('[data-testid=exp-verdict]')?.dataset.partial === 'true'
            && / 1 paired case$/.test(document.querySelector('[data-testid=exp-verdict-figures]')?.textContent || ''), null, { timeout: 15000 });
        assert.equal(await page.locator('[data-testid=exp-partial]').count(), 1);
        assert.equal(await page.textContent('[data-testid=exp-verdict-figures]'), 'pass rate +100 pp · no interval yet (fewer than 2 paired cases) · p (adjusted) — · MDE — · 1 paired case');
        assert.equal(await page.getAttribute('[data-testid=exp-status]', 'data-status'), 'running');

        await page.click('[data-testid=exp-cancel]');
        await page.waitForFunction(() => document.querySelector('[data-testid=exp-status]')?.dataset.status === 'cancelled', null, { timeout: 15000 });
        assert.equal((await http('GET', `${BASE}/v1/experiments/${id}`)).data.status, 'cancelled');
        assert.equal(await page.locator('[data-testid=exp-cancel]').count(), 0);
        assert.equal(await page.locator('[data-testid=exp-delete]').count(), 1);
        assert.equal(await page.locator('[data-testid=exp-live]').count(), 0, 'the stream is closed');
        assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the page was not reloaded');
    });

    test('the matrix of a larger experiment pages 100 cases at a time', { timeout: COMPLETE_MS + 30000 }, async () => {
        const n = 230;
        const cases = Array.from({ length: n }, (_, i) => ({ id: `p${String(i + 1).padStart(3, '0')}`, vars: { question: `page ${i + 1}` }, expected: 'yes' }));
        const start = await http('POST', `${BASE}/v1/experiments`, {
            name: `paged-${suffix}`,
            dimension: 'prompt',
            model: { model: 'stub-model', provider: 'openai' },
            control: { label: 'v1', prompt: 'CTRL {{question}}' },
            treatments: [{ label: 'v2', prompt: 'TREAT {{question}}' }],
            cases,
            evaluator: { function_id: 'eval::assert::normalized_text', arguments: { expected: '{{expected}}' } },
            repeats: 1,
            concurrency: 16,
        });
        assert.equal(start.status, 202, JSON.stringify(start.data));
        const id = start.data.experiment_id;
        await page.goto(`${BASE}/#/experiments/${id}`);
        await page.waitForFunction(() => document.querySelector('[data-testid=exp-status]')?.dataset.status === 'completed', null, { timeout: COMPLETE_MS });
        await page.waitForFunction(() => document.querySelectorAll('[data-testid=exp-case-row]').length === 100, null, { timeout: 15000 });
        const ids = async () => page.$$eval('[data-testid=exp-case-row]', (rows) => rows.map((r) => r.dataset.caseId));
        assert.deepEqual(await ids(), cases.slice(0, 100).map((c) => c.id));
        await page.click('[data-testid=exp-cases-more]');
        await page.waitForFunction(() => document.querySelectorAll('[data-testid=exp-case-row]').length === 200, null, { timeout: 15000 });
        await page.click('[data-testid=exp-cases-more]');
        await page.waitForFunction((want) => document.querySelectorAll('[data-testid=exp-case-row]').length === want, n, { timeout: 15000 });
        assert.deepEqual(await ids(), cases.map((c) => c.id), 'every case once, in dataset order');
        assert.equal(await page.locator('[data-testid=exp-cases-more]').count(), 0, 'no more pages');
        const texts = await page.$$eval('[data-testid=exp-cell]', (els) => els.map((e) => `${e.dataset.arm}:${e.textContent}`));
        assert.equal(texts.length, 2 * n);
        assert.equal(texts.filter((t) => t === '0:0/1').length, n, 'the control missed every case');
        assert.equal(texts.filter((t) => t === '1:1/1').length, n, 'the treatment met every case');
        // A filter starts again from the first page: no case is flaky with one repeat.
        await page.click('[data-testid=exp-filter-flaky]');
        await page.waitForSelector('[data-testid=exp-cases-empty]', { timeout: 15000 });
        assert.equal(await page.locator('[data-testid=exp-case-row]').count(), 0);
    });
});
