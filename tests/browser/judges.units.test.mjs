// Unit tests of console/judging.js (a pairwise judge's console parts) under node --test: the
// arm each slot names in each order against shared/spec/judges.md's table, the pair review's
// keys and where they are typing instead, the pairs built from judgement rows across pages,
// the walk from pair to pair (next, next to review, previous, more pages), the distrust rules
// at and around their thresholds, the preference, judge-quality, progress and agreement
// texts, which verdict is chosen, and the pair view's address.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
    MIN_CONSISTENCY, OUTCOMES, addJudgements, createPairWalk, distrustReasons, fractionText, judgeAgreementFigure, judgementText,
    judgementsProgress, outcomeText, pairAction, pairHash, pairKey, parsePairPath, preferenceFigures, qualityFigures, slotArm,
    verdictBy, verdictSources,
} from '../../console/judging.js';

const key = (k, over = {}) => ({ key: k, target: { tagName: 'BODY' }, ...over });

test('order 1 puts the control in slot 1, order 2 the treatment; a tie names no arm', () => {
    assert.equal(slotArm(1, '1'), 'control');
    assert.equal(slotArm(1, '2'), 'treatment');
    assert.equal(slotArm(2, '1'), 'treatment');
    assert.equal(slotArm(2, '2'), 'control');
    for (const o of [1, 2]) assert.equal(slotArm(o, 'tie'), null);
    assert.equal(slotArm(3, '1'), null);
    assert.equal(slotArm(1, 1), null, 'winner_slot is a string on the wire');
    assert.equal(slotArm(1, null), null);
});

test('c, = and t decide a pair; s and → go on, b and ← go back; nothing else, nor with modifiers', () => {
    assert.equal(pairAction(key('c')), 'control');
    assert.equal(pairAction(key('=')), 'tie');
    assert.equal(pairAction(key('t')), 'treatment');
    assert.equal(pairAction(key('T')), 'treatment', 'caps lock or shift');
    assert.equal(pairAction(key('C')), 'control');
    assert.equal(pairAction(key('s')), 'next');
    assert.equal(pairAction(key('ArrowRight')), 'next');
    assert.equal(pairAction(key('b')), 'previous');
    assert.equal(pairAction(key('ArrowLeft')), 'previous');
    for (const k of ['p', 'f', '1', '2', 'x', 'Enter', ' ', 'Escape', 'ArrowDown', '', undefined]) assert.equal(pairAction(key(k)), null, String(k));
    for (const mod of ['ctrlKey', 'metaKey', 'altKey']) assert.equal(pairAction(key('t', { [mod]: true })), null, mod);
    assert.equal(pairAction(key('c', { shiftKey: true })), 'control', 'Shift is allowed (= needs it on some layouts)');
    assert.equal(pairAction(key('t', { repeat: true })), null, 'a held key acts once');
    for (const target of [{ tagName: 'TEXTAREA' }, { tagName: 'INPUT', type: 'text' }, { tagName: 'SELECT' }, { tagName: 'DIV', isContentEditable: true }]) {
        assert.equal(pairAction(key('t', { target })), null, JSON.stringify(target));
        assert.equal(pairAction(key('ArrowLeft', { target })), null, 'arrows move the caret there');
    }
    assert.equal(pairAction(key('=', { target: { tagName: 'BUTTON' } })), 'tie');
    assert.equal(pairAction(null), null);
});

// Two judge calls a pair, in case, repeat, treatment, order order.
const row = (caseId, repeat, treatment, order, slot, outcome, extra = {}) => ({
    case_id: caseId, case_index: Number(caseId.slice(1)) - 1, repeat, treatment, order, winner_slot: slot,
    winner_arm: slotArm(order, slot) === 'control' ? 0 : slotArm(order, slot) ? treatment : null, reason: `r ${order}`, outcome,
    inconsistent: outcome === 'tie' && slot !== 'tie', metrics: { calls: 1 }, status: 'completed', ...extra,
});

test('judgement rows make one pair per case, repeat and treatment, both orders in order, across pages', () => {
    const page1 = [row('k1', 1, 1, 1, '2', 'treatment'), row('k1', 1, 1, 2, '1', 'treatment'), row('k1', 1, 2, 1, '1', 'tie'), row('k1', 1, 2, 2, '1', 'tie'), row('k2', 1, 1, 1, '1', 'control')];
    const first = addJudgements([], page1);
    assert.deepEqual(first.map((p) => [p.case_id, p.repeat, p.treatment, p.judgements.map((j) => j.order), p.outcome, p.inconsistent]), [
        ['k1', 1, 1, [1, 2], 'treatment', false],
        ['k1', 1, 2, [1, 2], 'tie', true],
        ['k2', 1, 1, [1], 'control', false],
    ]);
    // The pair of k2 continues on the next page; a row read twice is counted once.
    const second = addJudgements(first, [row('k2', 1, 1, 2, '2', 'control'), row('k2', 1, 1, 2, '2', 'control'), row('k2', 2, 1, 1, 'tie', 'tie')]);
    assert.equal(second.length, 4);
    assert.deepEqual(second[2].judgements.map((j) => j.order), [1, 2]);
    assert.equal(second[3].outcome, 'tie');
    assert.equal(second[3].inconsistent, false, 'a tie answer is not an inconsistency');
    assert.deepEqual(first[2].judgements.map((j) => j.order), [1], 'the earlier list is not changed');
    // The order of the rows within a page does not matter for a pair's judgements.
    const swapped = addJudgements([], [row('k3', 1, 1, 2, '1', 'tie'), row('k3', 1, 1, 1, '1', 'tie')]);
    assert.deepEqual(swapped[0].judgements.map((j) => j.order), [1, 2]);
    assert.deepEqual(addJudgements([], null), []);
    assert.notEqual(pairKey({ case_id: 'a', repeat: 11, treatment: 1 }), pairKey({ case_id: 'a1', repeat: 1, treatment: 1 }));
});

const pairRows = (ids) => ids.flatMap((id) => [row(id, 1, 1, 1, '1', 'tie'), row(id, 1, 1, 2, '1', 'tie')]);

test('the pair walk: next, next to review, previous, and progress', () => {
    const w = createPairWalk();
    assert.equal(w.progress().text, 'the pairs are not read yet');
    w.add(pairRows(['k1', 'k2', 'k3', 'k4']), false);
    assert.equal(w.current(), null, 'no current pair until one is chosen');
    assert.equal(w.firstUnreviewed(), 0);
    assert.equal(w.goTo({ case_id: 'k1', repeat: 1, treatment: 1 }), 0);
    assert.equal(w.progress().text, 'pair 1 of 4 · 0 reviewed by you');
    assert.equal(w.progress(false).text, 'pair 1 of 4', 'no reviewer named yet');
    assert.equal(w.previous(), null, 'nothing before the first');
    assert.equal(w.index(), 0);
    // k2 and k3 were reviewed before: the next pair to review is k4, the next pair is k2.
    w.setReviewed([pairKey({ case_id: 'k2', repeat: 1, treatment: 1 }), pairKey({ case_id: 'k3', repeat: 1, treatment: 1 })]);
    assert.equal(w.firstUnreviewed(), 0);
    assert.equal(w.peekNext({ unreviewed: true }), 3);
    assert.equal(w.peekNext(), 1);
    w.markReviewed(w.current());
    assert.equal(w.firstUnreviewed(), 3);
    assert.equal(w.next({ unreviewed: true }).case_id, 'k4');
    assert.equal(w.progress().text, 'pair 4 of 4 · 3 reviewed by you');
    assert.equal(w.next(), null, 'the end: stays');
    assert.equal(w.current().case_id, 'k4');
    assert.equal(w.wantsMore(), false, 'no page behind');
    assert.equal(w.previous().case_id, 'k3');
    assert.equal(w.previous().case_id, 'k2');
    assert.equal(w.reviewed(w.current()), true);
    assert.equal(w.goTo({ case_id: 'k9', repeat: 1, treatment: 1 }), -1, 'unknown: the current pair stays');
    assert.equal(w.current().case_id, 'k2');
});

test('the pair walk asks for the next page at the end of what it read, and goes on there', () => {
    const w = createPairWalk();
    // The page ends inside k2's pair: its second order comes with the next page.
    w.add([...pairRows(['k1']), row('k2', 1, 1, 1, '1', 'tie')], true);
    w.goTo({ case_id: 'k1', repeat: 1, treatment: 1 });
    assert.equal(w.progress().text, 'pair 1 of 2+ · 0 reviewed by you');
    assert.equal(w.wantsMore(), false, 'k2 is read');
    w.next();
    assert.equal(w.wantsMore(), true);
    assert.equal(w.wantsMore({ unreviewed: true }), true);
    w.add([row('k2', 1, 1, 2, '1', 'tie'), ...pairRows(['k3'])], false);
    assert.equal(w.pairs().length, 3);
    assert.deepEqual(w.current().judgements.map((j) => j.order), [1, 2], 'the current pair is completed by the page');
    assert.equal(w.wantsMore(), false);
    assert.equal(w.next().case_id, 'k3');
    assert.equal(w.progress().text, 'pair 3 of 3 · 0 reviewed by you');
    const empty = createPairWalk();
    empty.add([], false);
    assert.equal(empty.progress().text, 'no judged pair yet');
});

test('a judge is distrusted below 80% consistency or when its first-slot interval excludes 1/2, and says why', () => {
    const fair = { pairs: 10, consistent_pairs: 8, consistency: 0.8, first_slot: { fraction: 0.5, n: 20, wilson_low: 0.299, wilson_high: 0.701 }, length: null };
    assert.equal(MIN_CONSISTENCY, 0.8);
    assert.deepEqual(distrustReasons(fair), [], '0.8 itself is trusted');
    assert.deepEqual(distrustReasons({ ...fair, consistent_pairs: 7, consistency: 0.7 }).map((r) => r.text),
        ['consistency 70% (7 of 10 pairs) is below 80%: it often changes its answer when the two outputs swap places']);
    // The position-biased judge of the spec: consistency 0, slot 1 every time.
    const biased = { pairs: 6, consistent_pairs: 0, consistency: 0, first_slot: { fraction: 1, n: 12, wilson_low: 0.7575, wilson_high: 1 } };
    const reasons = distrustReasons(biased);
    assert.deepEqual(reasons.map((r) => r.code), ['consistency', 'first_slot']);
    assert.equal(reasons[1].text, 'it favours the first slot: slot 1 in 100% of 12 answers, interval [75.8%, 100%] excludes 50%');
    assert.equal(distrustReasons({ first_slot: { fraction: 0.1, n: 30, wilson_low: 0.035, wilson_high: 0.256 } })[0].text,
        'it favours the second slot: slot 1 in 10% of 30 answers, interval [3.5%, 25.6%] excludes 50%');
    // An interval that touches 1/2 does not exclude it; missing figures say nothing.
    assert.deepEqual(distrustReasons({ consistency: null, first_slot: { fraction: 0.7, n: 10, wilson_low: 0.5, wilson_high: 0.9 } }), []);
    assert.deepEqual(distrustReasons({ consistency: null, first_slot: null }), []);
    assert.deepEqual(distrustReasons(null), []);
});

test('the judge-quality figures', () => {
    const q = {
        pairs: 6, consistent_pairs: 2, consistency: 1 / 3,
        first_slot: { fraction: 10 / 12, n: 12, wilson_low: 0.5519, wilson_high: 0.9530 },
        length: null, metrics: { calls: 12, input_tokens: 2400, output_tokens: 120, cost_usd: null },
    };
    assert.deepEqual(qualityFigures(q).map((f) => [f.key, f.text]), [
        ['consistency', '33.3% (2 of 6 pairs in both orders)'],
        ['first_slot', '83.3% [55.2%, 95.3%] of 12'],
        ['length', 'no decisive pair of unequal lengths'],
        ['calls', '12'],
        ['tokens', '2,400 input + 120 output'],
        ['cost', 'not counted (no price)'],
    ]);
    assert.equal(qualityFigures(q, '90%')[1].label, 'first slot (90% Wilson)');
    assert.equal(qualityFigures({ ...q, metrics: { ...q.metrics, cost_usd: 0.0123 } })[5].text, '$0.0123');
    assert.equal(qualityFigures({ pairs: 0, consistency: null })[0].text, 'no pair judged in both orders');
    assert.equal(fractionText({ fraction: 0.5, n: 2, wilson_low: null, wilson_high: null }), '50% of 2');
    assert.equal(fractionText(null, 'x'), 'x');
});

test('the preference figures, and which verdict is chosen', () => {
    const pref = {
        pairs: 8, wins: 5, losses: 2, ties: 1, inconsistent: 1, rate: 0.6875, paired_cases: 6, delta: 0.25, ci_low: -0.05, ci_high: 0.55,
        p_value_adjusted: 0.09, verdict: 'inconclusive',
    };
    assert.deepEqual(preferenceFigures(pref, { alpha: 0.05, alpha_adjusted: 0.05 }), [
        'preferred 68.8%', 'preference +25 pp', '95% CI [−5 pp, +55 pp]', 'p (adjusted) 0.090', '8 pairs: 5 won · 2 lost · 1 tie · 1 inconsistent', '6 paired cases',
    ]);
    assert.deepEqual(preferenceFigures({ pairs: 1, wins: 0, losses: 0, ties: 1, inconsistent: 0, rate: 0.5, paired_cases: 1, delta: 0 }, {}), [
        'preferred 50%', 'preference 0 pp', 'no interval yet (fewer than 2 paired cases)', 'p (adjusted) —', '1 pair: 0 won · 0 lost · 1 tie · 0 inconsistent', '1 paired case',
    ]);
    const cmp = { verdict: 'better', evaluator_verdict: 'better', preference: { verdict: 'inconclusive' } };
    assert.equal(verdictBy(cmp, { verdict_by: 'evaluator' }), 'evaluator');
    assert.deepEqual(verdictSources(cmp, { verdict_by: 'evaluator' }), [
        { source: 'evaluator', verdict: 'better', chosen: true }, { source: 'judge', verdict: 'inconclusive', chosen: false },
    ]);
    assert.deepEqual(verdictSources({ ...cmp, verdict: 'inconclusive' }, { verdict_by: 'judge' }).map((s) => s.chosen), [false, true]);
    // No evaluator: the judge's, and the evaluator's is none.
    const judgeOnly = { verdict: 'worse', evaluator_verdict: null, preference: { verdict: 'worse' } };
    assert.equal(verdictBy(judgeOnly, {}), 'judge');
    assert.deepEqual(verdictSources(judgeOnly, { verdict_by: 'judge' })[0], { source: 'evaluator', verdict: null, chosen: false });
    assert.deepEqual(verdictSources({ verdict: 'better', preference: null }, {}), [], 'no judge: nothing beside the verdict');
});

test('judgement progress and outcome texts', () => {
    assert.equal(judgementsProgress(null), null);
    assert.deepEqual(judgementsProgress({ planned: 12, judged: 12, failed: 0, unjudged: 0 }), { planned: 12, judged: 12, failed: 0, unjudged: 0, text: '12/12 judgements' });
    assert.equal(judgementsProgress({ planned: 1200, judged: 1000, failed: 2, unjudged: 4 }).text, '1,000/1,200 judgements · 2 failed · 4 unjudged (a run without an output)');
    const labels = { control: 'v1', treatment: 'v2' };
    assert.equal(outcomeText('treatment', labels), 'v2 (treatment)');
    assert.equal(outcomeText('control', labels), 'v1 (control)');
    assert.equal(outcomeText('tie', labels), 'tie');
    assert.equal(outcomeText(null, labels), 'not judged');
    assert.deepEqual(judgementText({ order: 1, winner_slot: '1' }, labels), { order: 'order 1', slots: 'v1 in slot 1, v2 in slot 2', answer: 'slot 1 → v1 (control)', arm: 'control' });
    assert.deepEqual(judgementText({ order: 2, winner_slot: '1' }, labels), { order: 'order 2', slots: 'v2 in slot 1, v1 in slot 2', answer: 'slot 1 → v2 (treatment)', arm: 'treatment' });
    assert.equal(judgementText({ order: 2, winner_slot: 'tie' }, labels).answer, 'tie');
    assert.equal(judgementText({ order: 1, winner_slot: null, status: 'failed' }, labels).answer, 'failed');
});

test('the judge/human agreement figure with its 3 × 3 confusion', () => {
    assert.deepEqual(OUTCOMES, ['control', 'tie', 'treatment']);
    const t = { treatment: 1, label: 'v2', count: 5, raw: 0.6, kappa: 4 / 9, kappa_ci_low: -0.0660, kappa_ci_high: 0.9549, confusion: [[1, 0, 0], [1, 1, 1], [0, 0, 1]] };
    const f = judgeAgreementFigure(t);
    assert.deepEqual(f, {
        count: 5, countText: '5 reviewed pairs', raw: '60%', kappa: '0.44', interval: '95% CI [−0.07, 0.95]', note: '', confusion: [[1, 0, 0], [1, 1, 1], [0, 0, 1]],
    });
    const none = judgeAgreementFigure({ treatment: 1, count: 0, raw: null, kappa: null, kappa_ci_low: null, kappa_ci_high: null, confusion: null });
    assert.deepEqual([none.countText, none.raw, none.kappa, none.interval, none.note], ['0 reviewed pairs', '—', '—', '', 'no pair has both a judge outcome and a human one yet']);
    assert.deepEqual(none.confusion, [[0, 0, 0], [0, 0, 0], [0, 0, 0]]);
    const one = judgeAgreementFigure({ count: 1, raw: 1, kappa: null, confusion: [[0, 0, 0], [0, 1, 0], [0, 0, 0]] }, '90%');
    assert.deepEqual([one.countText, one.kappa, one.note], ['1 reviewed pair', '—', 'κ is undefined while the judge and the reviewers each give one outcome only']);
});

test('the pair view\'s address goes both ways, any case id included', () => {
    for (const caseId of ['k1', 'case 7', 'a/b?c#d', 'é%']) {
        const hash = pairHash('exp_0123abcd', { case_id: caseId, repeat: 2, treatment: 3 });
        const path = hash.slice(1);
        assert.ok(!/[ ?#]/.test(path.split('/pairs/')[1]), hash);
        assert.deepEqual(parsePairPath(path), { id: 'exp_0123abcd', case_id: caseId, repeat: 2, treatment: 3 });
    }
    assert.deepEqual(parsePairPath('/experiments/exp_1/pairs'), { id: 'exp_1' });
    assert.equal(parsePairPath('/experiments/exp_1/pairs/k1/x/1'), null);
    assert.equal(parsePairPath('/experiments/exp_1/pairs/%E0%A4%A/1/1'), null, 'a broken escape');
    assert.equal(parsePairPath('/experiments/exp_1/review'), null);
});
