// Unit tests of console/reviewing.js (the review screen's pure helpers) under node --test:
// which keys act and where they are typing instead, the walk through the queue with its
// progress text and its re-reads, the evaluator's verdict of a queued run and the agreement
// figure's texts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
    agreementFigure, createWalk, evaluatorVerdict, fmtKappa, isSource, isTyping, queueReasons, reviewAction,
} from '../../console/reviewing.js';

const key = (k, over = {}) => ({ key: k, target: { tagName: 'BODY' }, ...over });

test('p, f and s pass, fail and skip; other keys and modified keys do nothing', () => {
    assert.equal(reviewAction(key('p')), 'pass');
    assert.equal(reviewAction(key('f')), 'fail');
    assert.equal(reviewAction(key('s')), 'skip');
    assert.equal(reviewAction(key('P')), 'pass', 'caps lock or shift');
    for (const k of ['x', 'Enter', ' ', 'Escape', 'ArrowDown', '', undefined]) assert.equal(reviewAction(key(k)), null, String(k));
    for (const mod of ['ctrlKey', 'metaKey', 'altKey']) assert.equal(reviewAction(key('f', { [mod]: true })), null, mod);
    assert.equal(reviewAction(key('p', { repeat: true })), null, 'a held key acts once');
    assert.equal(reviewAction(null), null);
});

test('keys typed into a text field are typing, not verdicts', () => {
    for (const target of [
        { tagName: 'TEXTAREA' }, { tagName: 'INPUT', type: 'text' }, { tagName: 'INPUT' }, { tagName: 'input', type: 'search' },
        { tagName: 'SELECT' }, { tagName: 'DIV', isContentEditable: true },
    ]) {
        assert.equal(isTyping(target), true, JSON.stringify(target));
        assert.equal(reviewAction(key('p', { target })), null, JSON.stringify(target));
    }
    for (const target of [{ tagName: 'BUTTON' }, { tagName: 'INPUT', type: 'checkbox' }, { tagName: 'INPUT', type: 'button' }, { tagName: 'SECTION' }, null]) {
        assert.equal(isTyping(target), false, JSON.stringify(target));
        assert.equal(reviewAction(key('f', { target })), 'fail', JSON.stringify(target));
    }
});

const run = (id) => ({ run_id: id });

test('a new walk has read nothing', () => {
    const w = createWalk();
    assert.deepEqual(w.progress(), { position: 0, total: 0, more: false, done: false, loaded: false, text: 'the queue is not read yet' },
        'nothing is said of a queue before it was read');
    assert.equal(w.add([], 100), 0);
    assert.deepEqual(w.progress(), { position: 0, total: 0, more: false, done: true, loaded: true, text: 'nothing to review' });
});

test('the walk shows the queue in order with its progress, and ends', () => {
    const w = createWalk();
    assert.equal(w.add([run('a'), run('b'), run('c')], 100), 3);
    assert.equal(w.current().run_id, 'a');
    assert.equal(w.progress().text, '1 of 3');
    assert.equal(w.next('reviewed').run_id, 'b');
    assert.equal(w.progress().text, '2 of 3');
    assert.equal(w.next('skipped').run_id, 'c');
    assert.deepEqual(w.progress(), { position: 3, total: 3, more: false, done: false, loaded: true, text: '3 of 3' });
    assert.equal(w.next('reviewed'), null);
    assert.deepEqual(w.progress(), { position: 3, total: 3, more: false, done: true, loaded: true, text: '3 of 3 · done' });
    assert.deepEqual(w.counts, { reviewed: 2, skipped: 1 });
    assert.equal(w.next('reviewed'), null, 'nothing past the end');
    assert.deepEqual(w.counts, { reviewed: 2, skipped: 1 }, 'and nothing counted');
    assert.equal(w.wantsMore(), false, 'an answer shorter than the limit was the whole queue');
});

test('a full answer is followed by another read, and runs already shown (skipped) are not shown again', () => {
    const w = createWalk();
    w.add([run('a'), run('b')], 2);
    assert.equal(w.progress().text, '1 of 2+');
    assert.equal(w.wantsMore(), false, 'not before the end');
    w.next('skipped');
    w.next('reviewed');
    assert.equal(w.wantsMore(), true);
    // The server still has the skipped run a first; b is gone (reviewed); c and d are new.
    assert.equal(w.add([run('a'), run('c')], 2), 1);
    assert.equal(w.current().run_id, 'c');
    assert.equal(w.progress().text, '3 of 3+', 'a full answer with something new: maybe more');
    w.next('reviewed');
    assert.equal(w.wantsMore(), true);
    assert.equal(w.add([run('a'), run('d')], 2), 1);
    w.next('reviewed');
    assert.equal(w.add([run('a')], 2), 0);
    assert.equal(w.wantsMore(), false);
    assert.deepEqual(w.progress(), { position: 4, total: 4, more: false, done: true, loaded: true, text: '4 of 4 · done' });
    assert.equal(w.add([run('a'), run('a')], 2), 0, 'a full answer of runs already shown has nothing behind it');
    assert.equal(w.wantsMore(), false);
    assert.equal(w.add([null, {}, run('e')], 100), 1, 'entries without a run id are ignored');
});

// The server's review queue (GET …/review-queue): the runs not reviewed, in a fixed order,
// `limit` of them after the first `offset`.
function serverQueue(n) {
    const runs = Array.from({ length: n }, (_, i) => run(`r${i}`));
    const reviewed = new Set();
    return {
        read: (limit, offset) => runs.filter((r) => !reviewed.has(r.run_id)).slice(offset, offset + limit),
        review: (id) => reviewed.add(id),
    };
}

// Walks the whole queue as the review screen does: reads a page, then acts on each run,
// reading the next page (past the skipped runs) at the end of the last one.
function walkAll(server, limit, act) {
    const w = createWalk();
    w.add(server.read(limit, w.offset()), limit);
    const shown = [];
    for (let r = w.current(); r; r = w.current()) {
        shown.push(r.run_id);
        const outcome = act(r, shown.length);
        if (outcome === 'reviewed') server.review(r.run_id);
        w.next(outcome);
        if (w.wantsMore()) w.add(server.read(limit, w.offset()), limit);
    }
    return { w, shown };
}

test('a visit that skips more runs than a page still reaches every run of the queue', () => {
    for (const [n, limit] of [[250, 100], [100, 100], [101, 100], [7, 3]]) {
        const { w, shown } = walkAll(serverQueue(n), limit, () => 'skipped');
        assert.equal(shown.length, n, `${n} runs, pages of ${limit}: every run shown once`);
        assert.equal(new Set(shown).size, n);
        assert.deepEqual(w.counts, { reviewed: 0, skipped: n });
        assert.equal(w.progress().text, `${n} of ${n} · done`);
    }
});

test('a visit that reviews some runs and skips others shows each run once, in order', () => {
    const { w, shown } = walkAll(serverQueue(230), 100, (r, k) => (k % 3 === 0 ? 'reviewed' : 'skipped'));
    assert.deepEqual(shown, Array.from({ length: 230 }, (_, i) => `r${i}`));
    assert.deepEqual(w.counts, { reviewed: 76, skipped: 154 });
    assert.equal(w.offset(), 154);
});

test('the evaluator verdict of a queued run', () => {
    assert.deepEqual(evaluatorVerdict({ passed: false, score: 0, verdict: { score: 0, passed: false, reason: 'did not match' } }),
        { passed: false, text: 'missed criteria', score: 0, reason: 'did not match' });
    assert.deepEqual(evaluatorVerdict({ passed: true, score: 0.75, verdict: { reason: 'ok' } }), { passed: true, text: 'met criteria', score: 0.75, reason: 'ok' });
    assert.deepEqual(evaluatorVerdict({ verdict: { passed: true, score: 1 } }), { passed: true, text: 'met criteria', score: 1, reason: '' });
    assert.deepEqual(evaluatorVerdict({ passed: null, verdict: null }), { passed: null, text: 'not evaluated', score: null, reason: '' });
    assert.deepEqual(queueReasons({ reasons: ['flaky', 'disagree', 'near_threshold', 'other'] }), ['flaky case', 'arms disagree', 'score near the threshold', 'other']);
    assert.deepEqual(queueReasons({}), []);
});

test('the agreement figure', () => {
    assert.deepEqual(agreementFigure({ reviewed_runs: 0, agreement: null, kappa: null, kappa_ci_low: null, kappa_ci_high: null, confidence: 0.95 }),
        { reviewed: 0, reviewedText: '0 reviewed runs', agreement: '—', kappa: '—', interval: '', note: 'no reviewed run yet' });
    assert.deepEqual(agreementFigure({ reviewed_runs: 1, agreement: 1, kappa: null, kappa_ci_low: null, kappa_ci_high: null, confidence: 0.95 }),
        { reviewed: 1, reviewedText: '1 reviewed run', agreement: '100%', kappa: '—', interval: '', note: 'κ is undefined while every verdict is the same' });
    assert.deepEqual(agreementFigure({ reviewed_runs: 5, agreement: 0.6, kappa: 1 / 6, kappa_ci_low: -0.70698, kappa_ci_high: 1, confidence: 0.9 }),
        { reviewed: 5, reviewedText: '5 reviewed runs', agreement: '60%', kappa: '0.17', interval: '90% CI [−0.71, 1.00]', note: '' });
    assert.equal(agreementFigure({ reviewed_runs: 1200, agreement: 0.5, kappa: 0, kappa_ci_low: -0.05, kappa_ci_high: 0.05, confidence: 0.95 }).reviewedText, '1,200 reviewed runs');
    assert.equal(agreementFigure(null).note, 'no reviewed run yet');
    assert.equal(fmtKappa(-0.004), '0.00', 'no minus sign on a value that rounds to zero');
    assert.equal(fmtKappa(-1), '−1.00');
    assert.equal(fmtKappa(NaN), '—');
});

test('the analysis sources', () => {
    for (const s of ['evaluator', 'human', 'human_then_evaluator']) assert.equal(isSource(s), true, s);
    for (const s of ['', null, 'Human', 'human-then-evaluator']) assert.equal(isSource(s), false, String(s));
});
