// Browser test of the console's review screen against a running evald (EVALD_URL) whose openai
// provider points at evald-stub (EVALD_STUB_URL), with the system Chromium through
// playwright-core. A finished two-arm experiment of four cases (eight runs, whose evaluator
// verdicts the stub script decides) is opened from its detail view; the reviewer's name is
// typed once; five runs are reviewed and one skipped with the keyboard only, and after each
// step the progress text, the agreement figure (against GET …/agreement and against values
// worked out by hand from the verdicts given) and the stored reviews are checked. Keys typed
// into the note do nothing; the note is saved; the output is shown as text. A reload keeps the
// reviewer and shows what is left of the queue; the detail's source selector reads the
// analysis from the human verdicts; the Skip button does what s does. Screenshot: experiment-review.png in $EVALD_ARTIFACTS_DIR.
// The stub script is global: run this file alone or with --test-concurrency=1 (package.json
// does). Without EVALD_URL it prints SKIPPED and passes.
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

const skip = !BASE ? 'EVALD_URL is not set' : !STUB ? 'EVALD_STUB_URL is not set (the test scripts the stub)' : false;
if (skip) console.log(`SKIPPED: review screen browser test: ${skip}`);

// The control answers "yes" (the expected answer) on alpha only, and on the others a "no"
// wrapped in markup that must show as text; the treatment answers "yes" except on delta.
// With one repeat: k1 both arms pass; k2 and k3 the control fails and the treatment passes
// (the arms disagree); k4 both fail.
const MARKUP = 'no <b>bold</b> <img src=x onerror="window.__xss=1"> <script>window.__xss=2</script>';
const STUB_SCRIPT = {
    rules: [
        { when: { prompt_contains: 'RVT delta' }, reply: { text: 'no' } },
        { when: { prompt_contains: 'RVT ' }, reply: { text: 'yes' } },
        { when: { prompt_contains: 'RVC alpha' }, reply: { text: 'yes' } },
        { when: { prompt_contains: 'RVC ' }, reply: { text: MARKUP } },
    ],
    default: { reply: { text: 'OK' }, usage: { input_tokens: 10, output_tokens: 2 } },
};
const CASES = [['k1', 'alpha'], ['k2', 'bravo'], ['k3', 'charlie'], ['k4', 'delta']];
// The evaluator's verdict of each run, by `${case}/${arm}`.
const EVALUATOR = { 'k1/0': true, 'k1/1': true, 'k2/0': false, 'k2/1': true, 'k3/0': false, 'k3/1': true, 'k4/0': false, 'k4/1': false };
// The queue puts the runs of the cases where the arms disagree (k2, k3) first, then the rest in
// dataset order (docs/experiments.md, "The review queue"), so these six come first. The key
// pressed on each:
const PLAN = { 'k2/0': 'f', 'k2/1': 'p', 'k3/0': 'p', 'k3/1': 's', 'k1/0': 'p', 'k1/1': 'f' };
// After each review, worked out by hand from the table (evaluator, human) of the runs
// reviewed so far, p_o = agreement, p_e = p_pass,eval · p_pass,human + p_fail,eval · p_fail,human,
// κ = (p_o − p_e) / (1 − p_e):
//   1. k2/0 f: (fail, fail)                         p_o 1,   p_e 1           κ undefined
//   2. k2/1 p: + (pass, pass)                       p_o 1,   p_e 1/2         κ 1
//   3. k3/0 p: + (fail, pass)                       p_o 2/3, p_e 4/9         κ (2/9)/(5/9) = 0.4
//   4. k1/0 p: + (pass, pass)                       p_o 3/4, p_e 1/2         κ 0.5
//   5. k1/1 f: + (pass, fail)                       p_o 3/5, p_e 0.52        κ 0.08/0.48 = 1/6
const HAND = [
    { reviewed: 1, agreement: 1, kappa: null },
    { reviewed: 2, agreement: 1, kappa: 1 },
    { reviewed: 3, agreement: 2 / 3, kappa: 0.4 },
    { reviewed: 4, agreement: 3 / 4, kappa: 0.5 },
    { reviewed: 5, agreement: 3 / 5, kappa: 1 / 6 },
];
// The interval of the last one at 95%: with p_11 = 2/5, p_12 = p_21 = p_22 = 1/5 and every
// margin 3/5 (pass) or 2/5 (fail), the Fleiss–Cohen–Everitt variance is
//   ( p_11 [1 − (6/5)(5/6)]² + p_22 [1 − (4/5)(5/6)]²            = 0 + (1/5)(1/9)
//   + (1 − κ)² (p_12 (3/5 + 2/5)² + p_21 (2/5 + 3/5)²)            = (25/36)(2/5)
//   − [κ − p_e (1 − κ)]² ) / (n (1 − p_e)²)                        − (−4/15)²,  / (5 · 0.48²)
const VAR = (1 / 45 + (25 / 36) * (2 / 5) - (4 / 15) ** 2) / (5 * 0.48 ** 2);
const Z975 = 1.959963984540054;
const HAND_LOW = 1 / 6 - Z975 * Math.sqrt(VAR); // ≈ −0.707
const HAND_HIGH = 1; // 1/6 + 0.874 clipped to 1

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

const close = (a, b, eps = 1e-9) => Math.abs(a - b) < eps;

if (skip) test('review screen', { skip }, () => {});
else describe('review screen', () => {
    let browser;
    let context;
    let page;
    const suffix = randomBytes(4).toString('hex');
    const reviewer = `reviewer-${suffix}`;
    let id;

    async function shot(name) {
        mkdirSync(ARTIFACTS, { recursive: true });
        await page.evaluate(() => window.scrollTo(0, 0));
        await page.locator('#main').screenshot({ path: path.join(ARTIFACTS, name), style: '.topbar { position: static !important; } .toast { display: none !important; }' });
    }

    const figure = () => page.$eval('[data-testid=review-agreement]', (el) => ({ ...el.dataset, text: el.querySelector('[data-testid=review-agreement-text]')?.textContent || '' }));
    const progress = () => page.$eval('[data-testid=review-progress]', (el) => ({ text: el.textContent, position: el.dataset.position, total: el.dataset.total }));
    const shown = () => page.$eval('[data-testid=review-run]', (el) => ({ runId: el.dataset.runId, caseId: el.dataset.caseId, arm: el.dataset.arm, evaluatorPassed: el.dataset.evaluatorPassed }));

    before(async () => {
        const res = await http('PUT', `${STUB}/_stub/script`, STUB_SCRIPT);
        assert.ok(res.status >= 200 && res.status < 300, `stub script refused: ${res.status}`);
        const start = await http('POST', `${BASE}/v1/experiments`, {
            name: `review-${suffix}`,
            dimension: 'prompt',
            model: { model: 'stub-model', provider: 'openai' },
            control: { label: 'v1', prompt: 'RVC {{question}}' },
            treatments: [{ label: 'v2', prompt: 'RVT {{question}}' }],
            cases: CASES.map(([cid, q]) => ({ id: cid, vars: { question: q }, expected: 'yes' })),
            evaluator: { function_id: 'eval::assert::normalized_text', arguments: { expected: '{{expected}}' } },
            repeats: 1,
            concurrency: 2,
        });
        assert.equal(start.status, 202, JSON.stringify(start.data));
        id = start.data.experiment_id;
        const until = Date.now() + COMPLETE_MS;
        for (;;) {
            const e = await http('GET', `${BASE}/v1/experiments/${id}`);
            if (e.data && e.data.status === 'completed') break;
            assert.ok(!['failed', 'cancelled'].includes(e.data && e.data.status), `experiment ended ${e.data && e.data.status}`);
            assert.ok(Date.now() < until, 'the experiment did not finish in time');
            await new Promise((r) => setTimeout(r, 250));
        }
        const { chromium } = await import('playwright-core');
        browser = await chromium.launch({
            executablePath: CHROMIUM,
            args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update'],
        });
        context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
        if (TOKEN) await context.addInitScript((t) => sessionStorage.setItem('evald.token', t), TOKEN);
        page = await context.newPage();
        page.on('pageerror', (e) => console.log(`page error: ${e.message}`));
    });

    after(async () => {
        if (browser) await browser.close();
    });

    test('five runs reviewed with the keyboard, one skipped, the agreement following each review', { timeout: 120000 }, async () => {
        // The evaluator verdicts the hand-worked figures start from.
        const queue = await http('GET', `${BASE}/v1/experiments/${id}/review-queue?limit=100`);
        assert.equal(queue.status, 200, queue.text);
        assert.equal(queue.data.runs.length, 8);
        for (const r of queue.data.runs) assert.equal(r.passed, EVALUATOR[`${r.case_id}/${r.arm}`], `${r.case_id}/${r.arm}`);
        const runOf = new Map(queue.data.runs.map((r) => [`${r.case_id}/${r.arm}`, r.run_id]));

        await page.goto(`${BASE}/#/experiments/${id}`);
        await page.waitForSelector('[data-testid=exp-review]');
        await page.click('[data-testid=exp-review]');
        await page.waitForFunction((want) => location.hash === want, `#/experiments/${id}/review`);
        await page.waitForSelector('[data-testid=review-view]');

        // Nothing reviewed yet: the figure says so.
        await page.waitForFunction(() => document.querySelector('[data-testid=review-agreement]')?.dataset.reviewed === '0');
        assert.match((await figure()).text, /^— agreement · κ — · 0 reviewed runs$/);

        // The name is asked once (the input has the focus); Enter starts the review. Until then
        // nothing is said of the queue, which has not been read.
        await page.waitForSelector('[data-testid=review-reviewer-input]:focus');
        assert.equal((await progress()).text, 'Say who is reviewing to read the queue.');
        assert.equal(await page.locator('[data-testid=review-empty]').count(), 0, 'no "Nothing to review" before the queue was read');
        await page.keyboard.press('p'); // typed into the name field, not a verdict
        await page.keyboard.press('Backspace');
        await page.keyboard.type(reviewer);
        await page.keyboard.press('Enter');
        await page.waitForSelector('[data-testid=review-output]');
        assert.equal(await page.textContent('[data-testid=review-reviewer]'), reviewer);
        assert.equal(await page.evaluate(() => localStorage.getItem('evald.reviewer')), reviewer);
        assert.deepEqual(await progress(), { text: '1 of 8', position: '1', total: '8' });

        const reviewsNow = async () => {
            const res = await http('GET', `${BASE}/v1/experiments/${id}/reviews?limit=100`);
            assert.equal(res.status, 200, res.text);
            return res.data.reviews;
        };
        assert.equal((await reviewsNow()).length, 0, 'typing the name reviewed nothing');

        const order = [];
        let reviewed = 0;
        for (let step = 1; step <= 6; step++) {
            const run = await shown();
            const k = `${run.caseId}/${run.arm}`;
            order.push(k);
            const keyToPress = PLAN[k];
            assert.ok(keyToPress, `run ${k} is not one of the six the queue should show first (${order.join(', ')})`);
            assert.equal(run.runId, runOf.get(k));
            assert.equal(run.evaluatorPassed, String(EVALUATOR[k]), `${k}: the evaluator's verdict is shown`);
            assert.deepEqual(await progress(), { text: `${step} of 8`, position: String(step), total: '8' });
            // The prompt of the run's arm for the case, its output and the evaluator's reason side by side.
            const [cid, arm] = k.split('/');
            const question = CASES.find((c) => c[0] === cid)[1];
            assert.equal(await page.textContent('[data-testid=review-prompt]'), `${arm === '0' ? 'RVC' : 'RVT'} ${question}`);
            assert.equal(await page.textContent('[data-testid=review-vars]'), JSON.stringify({ question }));
            assert.equal(await page.textContent('[data-testid=review-evaluator-verdict]'), EVALUATOR[k] ? 'met criteria' : 'missed criteria');
            assert.equal(await page.textContent('[data-testid=review-evaluator-reason]'),
                queue.data.runs.find((r) => r.run_id === run.runId).verdict.reason);
            const output = await page.textContent('[data-testid=review-output]');
            if (arm === '0' && cid !== 'k1') {
                // Untrusted text stays text: no element of the output was made, no script ran.
                assert.equal(output, MARKUP);
                assert.equal(await page.locator('[data-testid=review-output] *').count(), 0);
                assert.equal(await page.evaluate(() => window.__xss), undefined);
            } else {
                assert.equal(output, EVALUATOR[k] ? 'yes' : 'no');
            }

            let note = null;
            if (k === 'k1/1') {
                // Keys typed into the note are text: Tab reaches the note, p, f and s do nothing
                // there, Esc leaves it, and then f fails the run with the note.
                note = 'pfs: fine answer, wrong tone';
                await page.keyboard.press('Tab');
                await page.waitForSelector('[data-testid=review-note]:focus');
                await page.keyboard.type(note);
                assert.equal(await page.inputValue('[data-testid=review-note]'), note);
                assert.deepEqual(await progress(), { text: `${step} of 8`, position: String(step), total: '8' });
                assert.equal((await reviewsNow()).length, reviewed, 'typing in the note reviewed nothing');
                await page.keyboard.press('Escape');
                await page.waitForFunction(() => document.activeElement?.dataset.testid === 'review-run');
            }
            await page.keyboard.press(keyToPress);
            await page.waitForFunction((want) => document.querySelector('[data-testid=review-progress]')?.dataset.position === want, String(step + 1), { timeout: 15000 });
            assert.equal((await progress()).text, `${step + 1} of 8`);
            if (keyToPress === 's') {
                assert.equal((await reviewsNow()).length, reviewed, 'a skip writes nothing');
                assert.equal((await figure()).reviewed, String(reviewed), 'nor changes the figure');
                assert.equal(await page.textContent('[data-testid=review-counts]'), `${reviewed} reviewed · 1 skipped in this visit`);
                continue;
            }
            reviewed++;
            // The figure is read again after the review and shows what the server computes,
            // which is what the hand computation says.
            await page.waitForFunction((want) => document.querySelector('[data-testid=review-agreement]')?.dataset.reviewed === want, String(reviewed), { timeout: 15000 });
            const ag = (await http('GET', `${BASE}/v1/experiments/${id}/agreement`)).data;
            const fig = await figure();
            const hand = HAND[reviewed - 1];
            assert.equal(ag.reviewed_runs, hand.reviewed);
            assert.ok(close(ag.agreement, hand.agreement), `agreement ${ag.agreement} after ${reviewed}`);
            if (hand.kappa === null) assert.equal(ag.kappa, null);
            else assert.ok(close(ag.kappa, hand.kappa), `κ ${ag.kappa} after ${reviewed}, by hand ${hand.kappa}`);
            assert.equal(fig.reviewed, String(ag.reviewed_runs));
            assert.equal(fig.agreement, String(ag.agreement));
            assert.equal(fig.kappa, ag.kappa === null ? '' : String(ag.kappa));
            assert.equal(fig.kappaLow, ag.kappa_ci_low === null ? '' : String(ag.kappa_ci_low));
            assert.equal(fig.kappaHigh, ag.kappa_ci_high === null ? '' : String(ag.kappa_ci_high));
            const pct = `${(hand.agreement * 100).toFixed(1).replace(/\.0$/, '')}%`;
            const kappaText = hand.kappa === null ? '—' : hand.kappa.toFixed(2);
            assert.ok(fig.text.startsWith(`${pct} agreement · κ ${kappaText}`), `figure text "${fig.text}" after ${reviewed}`);
            assert.ok(fig.text.endsWith(` · ${reviewed} reviewed run${reviewed === 1 ? '' : 's'}`), fig.text);

            // The review is stored with the verdict given, the reviewer and the note.
            const stored = await reviewsNow();
            assert.equal(stored.length, reviewed);
            const last = stored.find((r) => r.run_id === run.runId);
            assert.ok(last, `a review of ${run.runId}`);
            assert.equal(last.verdict, keyToPress === 'p' ? 'pass' : 'fail');
            assert.equal(last.reviewer, reviewer);
            assert.equal(last.note, note);
            assert.equal(last.evaluator_passed, EVALUATOR[k]);
        }
        assert.deepEqual(order, ['k2/0', 'k2/1', 'k3/0', 'k3/1', 'k1/0', 'k1/1'], 'the queue order');

        // The last figure: 60%, κ 1/6 with its interval, by hand and as the screen says it.
        const ag = (await http('GET', `${BASE}/v1/experiments/${id}/agreement`)).data;
        assert.deepEqual(ag.table, { evaluator_pass_human_pass: 2, evaluator_pass_human_fail: 1, evaluator_fail_human_pass: 1, evaluator_fail_human_fail: 1 });
        assert.ok(close(ag.kappa_ci_low, HAND_LOW, 1e-9), `κ low ${ag.kappa_ci_low}, by hand ${HAND_LOW}`);
        assert.equal(ag.kappa_ci_high, HAND_HIGH);
        assert.equal((await figure()).text, '60% agreement · κ 0.17 · 95% CI [−0.71, 1.00] · 5 reviewed runs');
        for (const [cell, n] of Object.entries(ag.table)) assert.equal(await page.textContent(`[data-testid=review-table-${cell}]`), String(n));

        // Every review, as given: five, by this reviewer, in the order they were made.
        const all = await reviewsNow();
        assert.deepEqual(all.map((r) => [`${r.case_id}/${r.arm}`, r.verdict, r.reviewer]), [
            ['k2/0', 'fail', reviewer], ['k2/1', 'pass', reviewer], ['k3/0', 'pass', reviewer], ['k1/0', 'pass', reviewer], ['k1/1', 'fail', reviewer],
        ]);
        assert.equal(await page.textContent('[data-testid=review-counts]'), '5 reviewed · 1 skipped in this visit');
        assert.equal((await shown()).caseId, 'k4');
        await shot('experiment-review.png');

        // A reload keeps the reviewer and shows what is left: the skipped run first (its case's
        // arms disagree), then k4's two.
        await page.reload();
        await page.waitForSelector('[data-testid=review-output]');
        assert.equal(await page.locator('[data-testid=review-reviewer-input]').count(), 0, 'the name is not asked again');
        assert.equal(await page.textContent('[data-testid=review-reviewer]'), reviewer);
        assert.deepEqual(await progress(), { text: '1 of 3', position: '1', total: '3' });
        const again = await shown();
        assert.equal(`${again.caseId}/${again.arm}`, 'k3/1');
        // The buttons do what the keys do: Skip moves on, writes nothing, and the keys go on
        // from the run's card.
        assert.equal(await page.textContent('[data-testid=review-skip]'), 'Skip s');
        await page.click('[data-testid=review-skip]');
        await page.waitForFunction(() => document.querySelector('[data-testid=review-progress]')?.dataset.position === '2');
        assert.equal((await progress()).text, '2 of 3');
        assert.equal(`${(await shown()).caseId}/${(await shown()).arm}`, 'k4/0');
        assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), 'review-run');
        assert.equal((await reviewsNow()).length, 5);

        // The detail reads the analysis from the human verdicts: control k1 pass, k2 fail,
        // k3 pass (2 of 3); treatment k1 fail, k2 pass (1 of 2).
        await page.click('[data-testid=review-back]');
        await page.waitForSelector('[data-testid=exp-source]');
        assert.equal(await page.getAttribute('[data-testid=exp-source-note]', 'data-source'), 'evaluator');
        assert.equal(await page.getAttribute('[data-testid=exp-arm-pass-0]', 'data-value'), String(0.25), 'the evaluator: the control passed k1 only');
        await page.focus('[data-testid=exp-source]');
        await page.selectOption('[data-testid=exp-source]', 'human');
        await page.waitForFunction(() => document.querySelector('[data-testid=exp-source-note]')?.dataset.source === 'human', null, { timeout: 15000 });
        assert.equal(await page.evaluate(() => location.hash), `#/experiments/${id}?source=human`);
        const human = (await http('GET', `${BASE}/v1/experiments/${id}?source=human`)).data;
        assert.equal(human.analysis.source, 'human');
        assert.ok(close(human.arms[0].pass_rate, 2 / 3) && close(human.arms[1].pass_rate, 1 / 2), JSON.stringify(human.arms.map((a) => a.pass_rate)));
        assert.equal(await page.getAttribute('[data-testid=exp-arm-pass-0]', 'data-value'), String(human.arms[0].pass_rate));
        assert.equal(await page.getAttribute('[data-testid=exp-arm-pass-1]', 'data-value'), String(human.arms[1].pass_rate));
        const pooled = await page.$$eval('[data-testid=exp-arm-row] td:nth-child(3)', (els) => els.map((e) => e.textContent));
        assert.deepEqual(pooled, ['2/3', '1/2']);
    });
});
