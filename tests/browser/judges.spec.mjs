// Browser test of the console's pairwise-judge parts against a running evald (EVALD_URL) whose
// openai provider points at evald-stub (EVALD_STUB_URL), with the system Chromium through
// playwright-core. A two-arm experiment of six cases, one repeat, with an evaluator and a
// judge (analysis.verdict_by judge) runs to the end; the stub script makes the arms' outputs
// and the judge: an answer starting "BEST" wins in both orders, any other pair is given to
// slot 1 (a position-biased judge). The detail shows the judgements' progress, the evaluator's
// and the judge's verdicts side by side with the judge's marked as chosen, the judge-quality
// figures (worked out here: consistency 2/6, first slot 10/12 with its Wilson interval, length
// 1/2) and both reasons to distrust the judge; its pairs list leads to the pair view, where
// both outputs, both judgements and the outcome are shown, and five pairs are reviewed with
// the keyboard only (c / = / t; a t typed into the note is text; b goes back, s on). After
// every review the agreement figure equals GET …/judge/agreement and the raw agreement and κ
// worked out by hand, the last one with its interval from the Fleiss–Cohen–Everitt variance
// written out; the stored reviews are the ones given. Last, edit as new brings the judge back
// into the form, whose plan sends it. Screenshots: experiment-judge.png and experiment-pair.png
// in $EVALD_ARTIFACTS_DIR. The stub script is global: run this file alone or with
// --test-concurrency=1 (package.json does). Without EVALD_URL it prints SKIPPED and passes.
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
if (skip) console.log(`SKIPPED: pairwise judge browser test: ${skip}`);

// The arms' outputs, by case: k1's treatment and k2's control start with "BEST"; k1's
// treatment is the longer of its pair, k2's control the shorter of its.
const OUT = {
    k1: { control: 'a plain control answer', treatment: 'BEST answer: alpha, explained at some length' },
    k2: { control: 'BEST bravo', treatment: 'bravo, answered at great and needless length' },
    other: { control: 'a plain control answer', treatment: 'a plain treatment answer' },
};
const outputs = (caseId) => OUT[caseId] || OUT.other;
const REASON_1 = 'the first answer is the best one';
const REASON_2 = 'the second answer is the best one';
const REASON_BIASED = 'first is better';
const STUB_SCRIPT = {
    rules: [
        // The judge (its prompt holds <answer_1>\n…\n</answer_1> then <answer_2>\n…; its answer
        // is the structured output {"result": {winner, reason}} of the provider's schema mode).
        { when: { model: 'judge-model', prompt_contains: '<answer_1>\nBEST' }, reply: { json: { result: { winner: '1', reason: REASON_1 } } }, usage: { input_tokens: 100, output_tokens: 10 } },
        { when: { model: 'judge-model', prompt_contains: '<answer_2>\nBEST' }, reply: { json: { result: { winner: '2', reason: REASON_2 } } }, usage: { input_tokens: 100, output_tokens: 10 } },
        { when: { model: 'judge-model' }, reply: { json: { result: { winner: '1', reason: REASON_BIASED } } }, usage: { input_tokens: 100, output_tokens: 10 } },
        // The arms.
        { when: { model: 'stub-model', prompt_contains: 'JUC alpha' }, reply: { text: OUT.k1.control } },
        { when: { model: 'stub-model', prompt_contains: 'JUT alpha' }, reply: { text: OUT.k1.treatment } },
        { when: { model: 'stub-model', prompt_contains: 'JUC bravo' }, reply: { text: OUT.k2.control } },
        { when: { model: 'stub-model', prompt_contains: 'JUT bravo' }, reply: { text: OUT.k2.treatment } },
        { when: { model: 'stub-model', prompt_contains: 'JUC ' }, reply: { text: OUT.other.control } },
        { when: { model: 'stub-model', prompt_contains: 'JUT ' }, reply: { text: OUT.other.treatment } },
    ],
    default: { reply: { text: 'OK' }, usage: { input_tokens: 10, output_tokens: 2 } },
};
const CASES = [['k1', 'alpha'], ['k2', 'bravo'], ['k3', 'charlie'], ['k4', 'delta'], ['k5', 'echo'], ['k6', 'foxtrot']];

// Each pair's judge outcome and what the judge answered in order 1 (control in slot 1) and
// order 2 (treatment in slot 1): k1 the treatment's BEST answer wins both orders, k2 the
// control's; elsewhere slot 1 wins both orders, i.e. the control and then the treatment: a
// tie, inconsistent.
const JUDGE = {
    k1: { outcome: 'treatment', slots: ['2', '1'], reasons: [REASON_2, REASON_1], inconsistent: false },
    k2: { outcome: 'control', slots: ['1', '2'], reasons: [REASON_1, REASON_2], inconsistent: false },
};
const judgeOf = (c) => JUDGE[c] || { outcome: 'tie', slots: ['1', '1'], reasons: [REASON_BIASED, REASON_BIASED], inconsistent: true };

// The five reviews, in the pairs' order, and the key of each: c control, = tie, t treatment.
const PLAN = [['k1', 't', 'treatment'], ['k2', 'c', 'control'], ['k3', '=', 'tie'], ['k4', 't', 'treatment'], ['k5', 'c', 'control']];
// After each, the table (rows judge, columns human, control/tie/treatment) and by hand
// p_o = Σ p_ii, p_e = Σ p_i. p_.i, κ = (p_o − p_e) / (1 − p_e):
//   1. k1 (T, T)    p_o 1,   p_e 1 (both all T)                                κ undefined
//   2. + k2 (C, C)  p_o 1,   p_e 1/4 + 1/4 = 1/2                               κ 1
//   3. + k3 (tie, tie) p_o 1, p_e 3 · 1/9 = 1/3                                κ 1
//   4. + k4 (tie, T) p_o 3/4, rows C 1/4 tie 2/4 T 1/4, columns C 1/4 tie 1/4 T 2/4,
//                    p_e = 1/16 + 2/16 + 2/16 = 5/16                            κ (7/16)/(11/16) = 7/11
//   5. + k5 (tie, C) p_o 3/5, rows C .2 tie .6 T .2, columns C .4 tie .2 T .4,
//                    p_e = .08 + .12 + .08 = .28                                κ .32/.72 = 4/9
const HAND = [
    { count: 1, raw: 1, kappa: null, confusion: [[0, 0, 0], [0, 0, 0], [0, 0, 1]] },
    { count: 2, raw: 1, kappa: 1, confusion: [[1, 0, 0], [0, 0, 0], [0, 0, 1]] },
    { count: 3, raw: 1, kappa: 1, confusion: [[1, 0, 0], [0, 1, 0], [0, 0, 1]] },
    { count: 4, raw: 3 / 4, kappa: 7 / 11, confusion: [[1, 0, 0], [0, 1, 1], [0, 0, 1]] },
    { count: 5, raw: 3 / 5, kappa: 4 / 9, confusion: [[1, 0, 0], [1, 1, 1], [0, 0, 1]] },
];
// The interval of the last one at 95% (α 0.05): p_CC = p_tie,C = p_tie,tie = p_tie,T = p_TT
// = 1/5, rows (judge) C 1/5, tie 3/5, T 1/5, columns (human) C 2/5, tie 1/5, T 2/5, 1 − κ = 5/9:
//   Σ_i p_ii [1 − (p_i. + p_.i)(1 − κ)]²  = (1/5)(1 − (3/5)(5/9))² · 2 + (1/5)(1 − (4/5)(5/9))²
//                                          = (2/5)(2/3)² + (1/5)(5/9)²
//   (1 − κ)² Σ_{i≠j} p_ij (p_.i + p_j.)²  = (25/81) [ (1/5)(1/5 + 1/5)² (tie, C) + (1/5)(1/5 + 1/5)² (tie, T) ]
//   [κ − p_e (1 − κ)]²                     = (4/9 − (7/25)(5/9))² = (13/45)²
//   var = (… + … − …) / (n (1 − p_e)²),  n = 5, 1 − p_e = 18/25
const VAR = ((2 / 5) * (2 / 3) ** 2 + (1 / 5) * (5 / 9) ** 2 + (25 / 81) * 2 * (1 / 5) * (2 / 5) ** 2 - (13 / 45) ** 2) / (5 * (18 / 25) ** 2);
const Z975 = 1.959963984540054;
const HAND_LOW = 4 / 9 - Z975 * Math.sqrt(VAR); // ≈ −0.066
const HAND_HIGH = 4 / 9 + Z975 * Math.sqrt(VAR); // ≈ 0.955

// The Wilson score interval of hits / n at 95%.
function wilson(hits, n) {
    const p = hits / n;
    const z2 = Z975 * Z975;
    const centre = (p + z2 / (2 * n)) / (1 + z2 / n);
    const half = (Z975 * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n))) / (1 + z2 / n);
    return [centre - half, centre + half];
}

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

const close = (a, b, eps = 1e-9) => typeof a === 'number' && Math.abs(a - b) < eps;
// The console's formats, written independently: 83.3%, +25 pp, −0.07.
const pct = (v) => `${(v * 100).toFixed(1).replace(/\.0$/, '')}%`;
const pp = (v) => {
    const s = Math.abs(v * 100).toFixed(1).replace(/\.0$/, '');
    return s === '0' ? '0 pp' : `${v > 0 ? '+' : '−'}${s} pp`;
};
const kappaText = (v) => (v === null ? '—' : `${v < 0 ? '−' : ''}${Math.abs(v).toFixed(2)}`);
const OUTCOMES = ['control', 'tie', 'treatment'];

if (skip) test('pairwise judge', { skip }, () => {});
else describe('pairwise judge', () => {
    let browser;
    let page;
    const suffix = randomBytes(4).toString('hex');
    const reviewer = `pairs-${suffix}`;
    let id;

    async function shot(name, selector = '#main') {
        mkdirSync(ARTIFACTS, { recursive: true });
        await page.evaluate(() => window.scrollTo(0, 0));
        await page.locator(selector).screenshot({ path: path.join(ARTIFACTS, name), style: '.topbar { position: static !important; } .toast { display: none !important; }' });
    }

    before(async () => {
        const res = await http('PUT', `${STUB}/_stub/script`, STUB_SCRIPT);
        assert.ok(res.status >= 200 && res.status < 300, `stub script refused: ${res.status} ${res.text}`);
        const start = await http('POST', `${BASE}/v1/experiments`, {
            name: `judged-${suffix}`,
            dimension: 'prompt',
            model: { model: 'stub-model', provider: 'openai' },
            control: { label: 'v1', prompt: 'JUC {{question}}' },
            treatments: [{ label: 'v2', prompt: 'JUT {{question}}' }],
            cases: CASES.map(([cid, q]) => ({ id: cid, vars: { question: q }, expected: OUT.other.treatment })),
            evaluator: { function_id: 'eval::assert::normalized_text', arguments: { expected: '{{expected}}' } },
            judge: {
                kind: 'pairwise', model: { model: 'judge-model', provider: 'openai' }, task: 'Answer: {{question}}',
                instructions: 'Prefer the correct, concise answer.', orders: 'both', max_tokens: 256,
            },
            analysis: { verdict_by: 'judge' },
            repeats: 1,
            concurrency: 2,
        });
        assert.equal(start.status, 202, start.text);
        id = start.data.experiment_id;
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

    test('the judge beside the evaluator, its quality and why to distrust it', { timeout: COMPLETE_MS + 30000 }, async () => {
        await page.goto(`${BASE}/#/experiments/${id}`);
        // A change of the hash alone may keep another view until this one is drawn.
        await page.waitForFunction((name) => document.querySelector('[data-testid=exp-title]')?.textContent === name, `judged-${suffix}`, { timeout: COMPLETE_MS });
        await page.waitForFunction(() => document.querySelector('[data-testid=exp-status]')?.dataset.status === 'completed', null, { timeout: COMPLETE_MS });
        const exp = (await http('GET', `${BASE}/v1/experiments/${id}`)).data;
        assert.equal(exp.status, 'completed');
        assert.equal(exp.analysis.verdict_by, 'judge');
        assert.deepEqual(exp.progress.judgements, { planned: 12, judged: 12, failed: 0, unjudged: 0 });
        await page.waitForSelector('[data-testid=exp-judgements-progress][data-judged="12"]', { timeout: 15000 });
        assert.equal(await page.textContent('[data-testid=exp-judgements-progress]'), 'Judge: 12/12 judgements');

        // The evaluator: k3–k6 the treatment passes and the control fails, k1 and k2 both fail.
        // The judge: one win (k1), one loss (k2), four ties; p_i = 1, −1, 0, 0, 0, 0.
        const cmp = exp.comparisons[0];
        const pref = cmp.preference;
        assert.deepEqual([pref.pairs, pref.wins, pref.losses, pref.ties, pref.inconsistent, pref.paired_cases], [6, 1, 1, 4, 4, 6]);
        assert.ok(close(pref.rate, 0.5), `rate ${pref.rate}`);
        assert.ok(close(pref.delta, 0), `delta ${pref.delta}`);
        // se = s.d.(p) / √6 with s.d.² = 2/5; t(0.975, 5) = 2.5705818366147395.
        assert.ok(close(pref.ci_high, (2.5705818366147395 * Math.sqrt(2 / 5)) / Math.sqrt(6), 1e-6), `ci_high ${pref.ci_high}`);
        assert.equal(pref.verdict, 'inconclusive');
        assert.equal(cmp.verdict, 'inconclusive', 'verdict_by judge: the judge\'s');
        assert.equal(cmp.evaluator_verdict, 'better');

        const banner = page.locator('[data-testid=exp-verdict]');
        await page.waitForSelector('[data-testid=exp-verdict-judge]');
        assert.equal(await banner.getAttribute('data-verdict'), 'inconclusive');
        assert.equal(await banner.getAttribute('data-verdict-by'), 'judge');
        assert.equal(await page.textContent('[data-testid=exp-verdict-headline]'), 'v2 vs v1: inconclusive');
        const box = async (s) => page.$eval(`[data-testid=exp-verdict-${s}]`, (el) => ({
            verdict: el.dataset.verdict, chosen: el.dataset.chosen, badge: el.querySelector('[data-testid=exp-verdict-chosen]')?.textContent || null,
        }));
        assert.deepEqual(await box('evaluator'), { verdict: 'better', chosen: 'false', badge: null });
        assert.deepEqual(await box('judge'), { verdict: 'inconclusive', chosen: 'true', badge: 'chosen' });
        assert.equal(await page.textContent('[data-testid=exp-verdict-judge-figures]'),
            `preferred 50% · preference 0 pp · 95% CI [${pp(pref.ci_low)}, ${pp(pref.ci_high)}] · p (adjusted) 1.000 · 6 pairs: 1 won · 1 lost · 4 ties · 4 inconsistent · 6 paired cases`);
        assert.match(await page.textContent('[data-testid=exp-verdict-evaluator-figures]'), /^pass rate \+66\.7 pp · 95% CI \[/);

        // Judge quality, by hand: of the six pairs judged in both orders k1 and k2 are
        // consistent; the answers name slot 1 ten times of twelve (k1 and k2 once each, the
        // biased four twice); of the two decisive pairs the longer output won k1, not k2.
        const q = cmp.judge_quality;
        assert.deepEqual([q.pairs, q.consistent_pairs], [6, 2]);
        assert.ok(close(q.consistency, 1 / 3));
        const [fsLow, fsHigh] = wilson(10, 12);
        assert.equal(q.first_slot.n, 12);
        assert.ok(close(q.first_slot.fraction, 10 / 12) && close(q.first_slot.wilson_low, fsLow, 1e-9) && close(q.first_slot.wilson_high, fsHigh, 1e-9), JSON.stringify(q.first_slot));
        const [lenLow, lenHigh] = wilson(1, 2);
        assert.equal(q.length.n, 2);
        assert.ok(close(q.length.fraction, 0.5) && close(q.length.wilson_low, lenLow, 1e-9) && close(q.length.wilson_high, lenHigh, 1e-9), JSON.stringify(q.length));
        assert.equal(q.metrics.calls, 12);
        assert.equal(q.metrics.input_tokens, 1200);
        assert.equal(q.metrics.output_tokens, 120);
        const quality = await page.$$eval('[data-testid=exp-judge-quality] dd', (els) => Object.fromEntries(els.map((e) => [e.dataset.testid.replace('exp-judge-', ''), e.textContent])));
        assert.deepEqual(quality, {
            consistency: '33.3% (2 of 6 pairs in both orders)',
            first_slot: `83.3% [${pct(fsLow)}, ${pct(fsHigh)}] of 12`,
            length: `50% [${pct(lenLow)}, ${pct(lenHigh)}] of 2`,
            calls: '12',
            tokens: '1,200 input + 120 output',
            cost: 'not counted (no price)',
        });
        // Both reasons to distrust it: consistency below 0.8 and a first-slot interval above 1/2.
        assert.ok(fsLow > 0.5);
        assert.equal(await page.getAttribute('[data-testid=exp-judge-quality]', 'data-distrust'), 'true');
        const reasons = await page.$$eval('[data-testid=exp-judge-distrust-reason]', (els) => els.map((e) => [e.dataset.code, e.textContent]));
        assert.deepEqual(reasons, [
            ['consistency', 'consistency 33.3% (2 of 6 pairs) is below 80%: it often changes its answer when the two outputs swap places'],
            ['first_slot', `it favours the first slot: slot 1 in 83.3% of 12 answers, interval [${pct(fsLow)}, ${pct(fsHigh)}] excludes 50%`],
        ]);

        // The pairs: one row each, in case order, as GET …/judgements has them.
        const rows = (await http('GET', `${BASE}/v1/experiments/${id}/judgements?limit=100`)).data.judgements;
        assert.equal(rows.length, 12);
        for (const r of rows) {
            const j = judgeOf(r.case_id);
            assert.equal(r.winner_slot, j.slots[r.order - 1], `${r.case_id} order ${r.order}`);
            assert.equal(r.outcome, j.outcome, r.case_id);
            assert.equal(r.inconsistent, j.inconsistent, r.case_id);
        }
        // The judge calls export as one record each.
        assert.equal(await page.getAttribute('[data-testid=exp-export-judgements-jsonl]', 'href'), `/v1/experiments/${id}/export?format=jsonl&records=judgements`);
        const exported = await http('GET', `${BASE}/v1/experiments/${id}/export?format=jsonl&records=judgements`);
        assert.equal(exported.status, 200, exported.text);
        assert.equal(exported.text.trim().split('\n').length, 12);
        await page.waitForSelector('[data-testid=exp-pair-row]');
        const listed = await page.$$eval('[data-testid=exp-pair-row]', (els) => els.map((e) => [e.dataset.caseId, e.dataset.outcome, e.dataset.inconsistent]));
        assert.deepEqual(listed, CASES.map(([c]) => [c, judgeOf(c).outcome, String(judgeOf(c).inconsistent)]));
        await shot('experiment-judge.png', '[data-testid=exp-verdicts]');
    });

    test('five pairs reviewed with the keyboard, the agreement following each review', { timeout: 120000 }, async () => {
        // From the pairs list to the first pair.
        await page.click('[data-testid=exp-pair-row][data-case-id=k1] [data-testid=exp-pair-link]');
        await page.waitForFunction((want) => location.hash === want, `#/experiments/${id}/pairs/k1/1/1`);
        await page.waitForSelector('[data-testid=pair-view][data-case-id=k1]');

        // Nothing reviewed yet.
        await page.waitForSelector('[data-testid=judge-agreement-treatment][data-count="0"]');
        // The name is asked once; a t typed there is a letter of the name, not a verdict.
        await page.waitForSelector('[data-testid=pair-reviewer-input]:focus');
        await page.keyboard.type(reviewer);
        await page.keyboard.press('Enter');
        await page.waitForSelector('[data-testid=pair-reviewer]');
        await page.waitForFunction(() => document.activeElement?.dataset.testid === 'pair-view');
        assert.equal(await page.textContent('[data-testid=pair-reviewer]'), reviewer);
        assert.equal(await page.evaluate(() => localStorage.getItem('evald.reviewer')), reviewer, 'where run review keeps it');
        const stored = async () => {
            const res = await http('GET', `${BASE}/v1/experiments/${id}/pairs/reviews?limit=100`);
            assert.equal(res.status, 200, res.text);
            return res.data.reviews;
        };
        assert.equal((await stored()).length, 0, 'typing the name reviewed nothing');

        for (let step = 0; step < PLAN.length; step++) {
            const [caseId, key, winner] = PLAN[step];
            await page.waitForSelector(`[data-testid=pair-view][data-case-id=${caseId}]`, { timeout: 15000 });
            assert.equal(page.url().split('#')[1], `/experiments/${id}/pairs/${caseId}/1/1`, 'the address follows the pair');
            const text = (sel) => page.textContent(`[data-testid=pair-view] [data-testid=${sel}]`);
            assert.equal(await page.textContent('[data-testid=pair-progress]'), `pair ${step + 1} of 6 · ${step} reviewed by you`);
            // The task, both outputs side by side with their labels, both judgements, the outcome.
            const question = CASES.find((c) => c[0] === caseId)[1];
            assert.equal(await text('pair-task'), `Answer: ${question}`);
            assert.equal(await text('pair-output-control'), outputs(caseId).control);
            assert.equal(await text('pair-output-treatment'), outputs(caseId).treatment);
            assert.match(await page.textContent('[data-testid=pair-control] h3'), /^v1 · control/);
            assert.match(await page.textContent('[data-testid=pair-treatment] h3'), /^v2 · treatment/);
            const j = judgeOf(caseId);
            const shown = await page.$$eval('[data-testid=pair-judgement]', (els) => els.map((e) => ({
                order: e.dataset.order, slot: e.dataset.slot, arm: e.dataset.arm,
                answer: e.querySelector('[data-testid=pair-judgement-answer]').textContent, reason: e.querySelector('[data-testid=pair-judgement-reason]')?.textContent,
            })));
            const armOf = (order, slot) => ((order === 1) === (slot === '1') ? 'control' : 'treatment');
            assert.deepEqual(shown, [1, 2].map((o) => {
                const a = armOf(o, j.slots[o - 1]);
                return { order: String(o), slot: j.slots[o - 1], arm: a, answer: `slot ${j.slots[o - 1]} → ${a === 'control' ? 'v1 (control)' : 'v2 (treatment)'}`, reason: ` — ${j.reasons[o - 1]}` };
            }), caseId);
            assert.equal(await page.getAttribute('[data-testid=pair-outcome]', 'data-outcome'), j.outcome);
            assert.equal(await page.getAttribute('[data-testid=pair-view]', 'data-inconsistent'), String(j.inconsistent));
            assert.equal(await page.getAttribute('[data-testid=pair-human]', 'data-winner'), '');

            if (step === 0) {
                // Keys in the note are text: Tab reaches it, t types a t, Esc leaves it.
                await page.keyboard.press('Tab');
                await page.waitForSelector('[data-testid=pair-note]:focus');
                await page.keyboard.type('t = c: the treatment explains');
                assert.equal(await page.inputValue('[data-testid=pair-note]'), 't = c: the treatment explains');
                assert.equal((await stored()).length, 0, 'typing in the note reviewed nothing');
                await page.keyboard.press('Escape');
                await page.waitForFunction(() => document.activeElement?.dataset.testid === 'pair-view');
            }
            const [response] = await Promise.all([
                page.waitForResponse((r) => r.url().endsWith(`/pairs/${caseId}/1/1/review`) && r.request().method() === 'PUT', { timeout: 15000 }),
                page.keyboard.press(key),
            ]);
            assert.equal(response.status(), 200);
            assert.deepEqual(response.request().postDataJSON(), { winner, reviewer, ...(step === 0 ? { note: 't = c: the treatment explains' } : {}) });
            // On to the next pair; the figure is read again and is what the server says and
            // what the hand computation says.
            const next = CASES[step + 1][0];
            await page.waitForSelector(`[data-testid=pair-view][data-case-id=${next}]`, { timeout: 15000 });
            await page.waitForSelector(`[data-testid=judge-agreement-treatment][data-count="${step + 1}"]`, { timeout: 15000 });
            const ag = (await http('GET', `${BASE}/v1/experiments/${id}/judge/agreement`)).data;
            assert.equal(ag.treatments.length, 1);
            const t = ag.treatments[0];
            const hand = HAND[step];
            assert.equal(t.treatment, 1);
            assert.equal(t.label, 'v2');
            assert.equal(t.count, hand.count);
            assert.ok(close(t.raw, hand.raw), `raw ${t.raw} after ${step + 1}`);
            if (hand.kappa === null) assert.equal(t.kappa, null, `κ after ${step + 1}`);
            else assert.ok(close(t.kappa, hand.kappa), `κ ${t.kappa} after ${step + 1}, by hand ${hand.kappa}`);
            assert.deepEqual(t.confusion, hand.confusion, `confusion after ${step + 1}`);
            const fig = await page.$eval('[data-testid=judge-agreement-treatment]', (el) => ({ ...el.dataset, text: el.querySelector('[data-testid=judge-agreement-text]').textContent }));
            const num = (v) => (v === null ? '' : String(v));
            assert.deepEqual([fig.count, fig.raw, fig.kappa, fig.kappaLow, fig.kappaHigh], [String(t.count), num(t.raw), num(t.kappa), num(t.kappa_ci_low), num(t.kappa_ci_high)]);
            const interval = t.kappa === null ? '' : ` · 95% CI [${kappaText(t.kappa_ci_low)}, ${kappaText(t.kappa_ci_high)}]`;
            assert.equal(fig.text, `κ ${kappaText(hand.kappa)}${interval} · ${pct(hand.raw)} raw agreement · ${hand.count} reviewed pair${hand.count === 1 ? '' : 's'}`);
            const cells = await page.$$eval('[data-testid=judge-confusion] td', (els) => els.map((e) => [e.dataset.testid, Number(e.textContent)]));
            assert.deepEqual(cells, OUTCOMES.flatMap((jo, i) => OUTCOMES.map((ho, k) => [`judge-confusion-${jo}-${ho}`, hand.confusion[i][k]])));
        }

        // The last figure with its interval, by hand.
        const t = (await http('GET', `${BASE}/v1/experiments/${id}/judge/agreement`)).data.treatments[0];
        assert.ok(close(t.kappa_ci_low, HAND_LOW), `κ low ${t.kappa_ci_low}, by hand ${HAND_LOW}`);
        assert.ok(close(t.kappa_ci_high, HAND_HIGH), `κ high ${t.kappa_ci_high}, by hand ${HAND_HIGH}`);
        assert.equal(await page.textContent('[data-testid=judge-agreement-text]'), 'κ 0.44 · 95% CI [−0.07, 0.95] · 60% raw agreement · 5 reviewed pairs');

        // Every review as given, by this reviewer.
        const all = await stored();
        assert.deepEqual(all.map((r) => [r.case_id, r.repeat, r.treatment, r.winner, r.reviewer, r.judge_outcome]).sort(),
            PLAN.map(([c, , w]) => [c, 1, 1, w, reviewer, judgeOf(c).outcome]).sort());
        assert.equal(all.find((r) => r.case_id === 'k1').note, 't = c: the treatment explains');
        assert.equal(await page.textContent('[data-testid=pair-progress]'), 'pair 6 of 6 · 5 reviewed by you');
        assert.equal(await page.textContent('[data-testid=pair-counts]'), '5 reviewed in this visit');

        // b goes back to k5, which shows the review; s goes on to k6; s at the end stays.
        await page.keyboard.press('b');
        await page.waitForSelector('[data-testid=pair-view][data-case-id=k5]');
        assert.equal(await page.getAttribute('[data-testid=pair-human]', 'data-winner'), 'control');
        assert.deepEqual(await page.$$eval('[data-testid=pair-review]', (els) => els.map((e) => [e.dataset.reviewer, e.dataset.winner])), [[reviewer, 'control']]);
        assert.equal(await page.getAttribute('[data-testid=pair-decide-control]', 'aria-pressed'), 'true', 'the reviewer\'s own verdict is marked');
        await shot('experiment-pair.png');
        await page.keyboard.press('s');
        await page.waitForSelector('[data-testid=pair-view][data-case-id=k6]');
        await page.keyboard.press('ArrowRight');
        await page.waitForFunction(() => document.querySelector('[data-testid=pair-status]')?.textContent === 'This is the last pair.');
        assert.equal(await page.getAttribute('[data-testid=pair-view]', 'data-case-id'), 'k6');
        assert.equal((await stored()).length, 5, 'moving reviewed nothing');

        // #/experiments/<id>/pairs, after a reload, starts at the first pair left to review.
        await page.goto(`${BASE}/#/experiments/${id}/pairs`);
        await page.reload();
        await page.waitForSelector('[data-testid=pair-view][data-case-id=k6]');
        assert.equal(page.url().split('#')[1], `/experiments/${id}/pairs/k6/1/1`);
        assert.equal(await page.locator('[data-testid=pair-reviewer-input]').count(), 0, 'the name is not asked again');
    });

    test('edit as new keeps the judge, and the plan of the form sends it', { timeout: 60000 }, async () => {
        await page.goto(`${BASE}/#/experiments/new?from=${id}`);
        await page.waitForFunction(() => document.querySelector('[data-testid=exp-field-judge_model]')?.value === 'judge-model', null, { timeout: 15000 });
        assert.equal(await page.getAttribute('[data-testid=exp-judge-fields]', 'open'), '', 'the judge section is open');
        const value = (name) => page.inputValue(`[data-testid=exp-field-${name}]`);
        assert.deepEqual(
            [await value('judge_provider'), await value('judge_task'), await value('judge_instructions'), await value('judge_orders'), await value('judge_max_tokens'), await value('verdict_by')],
            ['openai', 'Answer: {{question}}', 'Prefer the correct, concise answer.', 'both', '256', 'judge']);
        const [planned] = await Promise.all([
            page.waitForResponse((r) => r.url().endsWith('/v1/experiments/plan') && r.request().method() === 'POST', { timeout: 15000 }),
            page.click('[data-testid=exp-plan]'),
        ]);
        const sent = planned.request().postDataJSON();
        assert.deepEqual(sent.judge, {
            kind: 'pairwise', model: { model: 'judge-model', provider: 'openai' }, task: 'Answer: {{question}}',
            instructions: 'Prefer the correct, concise answer.', orders: 'both', max_tokens: 256,
        });
        assert.equal(sent.analysis.verdict_by, 'judge');
        assert.equal(planned.status(), 200, await planned.text());
    });
});
