// Pure helpers of a pairwise judge's console parts (shared/spec/judges.md): the preference
// verdict and judge-quality texts of a comparison, the rules for distrusting a judge, the
// judgements progress line, the pairs built from judgement rows, the arm a slot names in an
// order, the pair review's keys and its walk from pair to pair, the judge/human agreement
// figure and the pair view's address. No DOM, no state outside the objects they return, no I/O.
import { fmtPp, fmtP, ciLevel } from './analysis.js';
import { DASH, fmtInt, fmtPct, fmtUsd } from './format.js';
import { fmtKappa, isTyping } from './reviewing.js';

// The outcomes of a pair, in the order of the agreement's confusion rows and columns.
export const OUTCOMES = ['control', 'tie', 'treatment'];

// A judge is distrusted below this consistency, or when its first-slot interval excludes 1/2.
export const MIN_CONSISTENCY = 0.8;

// The keys of a pair review: c control, = tie, t treatment (the initial of the arm, as run
// review's p / f / s; a tie has the sign of equality), s skip to the next pair, b back to the
// previous one; → and ← do what s and b do.
export const PAIR_KEYS = { c: 'control', '=': 'tie', t: 'treatment', s: 'next', b: 'previous', arrowright: 'next', arrowleft: 'previous' };

function finite(v) {
    return typeof v === 'number' && Number.isFinite(v);
}

const plural = (n, one, many) => `${fmtInt(n)} ${n === 1 ? one : many}`;

// The action of a keydown event ({key, target, ctrlKey, metaKey, altKey, repeat}): 'control',
// 'tie', 'treatment', 'next', 'previous', or null (another key, a modifier other than Shift,
// a held key, or typing in a text field).
export function pairAction(ev) {
    if (!ev || ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat) return null;
    if (isTyping(ev.target)) return null;
    return PAIR_KEYS[String(ev.key || '').toLowerCase()] || null;
}

// The arm that a judge's winner_slot names in an order: order 1 has the control in slot 1,
// order 2 the treatment. Returns 'control', 'treatment', or null (a tie, or not a slot).
export function slotArm(order, slot) {
    if (slot !== '1' && slot !== '2') return null;
    if (order !== 1 && order !== 2) return null;
    return (order === 1) === (slot === '1') ? 'control' : 'treatment';
}

// The label of an outcome with the arm's own label: "v2 (treatment)", "v1 (control)", "tie";
// labels: {control, treatment}.
export function outcomeText(outcome, labels = {}) {
    if (outcome === 'control') return `${labels.control || 'control'} (control)`;
    if (outcome === 'treatment') return `${labels.treatment || 'treatment'} (treatment)`;
    if (outcome === 'tie') return 'tie';
    return 'not judged';
}

// One judgement in words: {order, slots, answer, arm}, e.g. order "order 2", slots "v2 in
// slot 1, v1 in slot 2", answer "slot 1 → v2 (treatment)" or "tie".
export function judgementText(j, labels = {}) {
    const c = labels.control || 'control';
    const t = labels.treatment || 'treatment';
    const order = j && j.order;
    const slots = order === 2 ? `${t} in slot 1, ${c} in slot 2` : `${c} in slot 1, ${t} in slot 2`;
    const arm = slotArm(order, j && j.winner_slot);
    let answer;
    if (j && j.winner_slot === 'tie') answer = 'tie';
    else if (arm) answer = `slot ${j.winner_slot} → ${outcomeText(arm, labels)}`;
    else answer = j && j.status && j.status !== 'completed' ? j.status : 'no answer';
    return { order: `order ${order ?? '?'}`, slots, answer, arm };
}

// The key of a pair: "case\u0000repeat\u0000treatment".
export function pairKey(p) {
    return `${p.case_id}\u0000${p.repeat}\u0000${p.treatment}`;
}

// The pairs of judgement rows (GET …/judgements, one row per judge call, in case, repeat,
// treatment, order order), appended to `pairs` (a list from earlier pages, not changed): a
// pair whose first order ended one page continues on the next. Each pair: {case_id,
// case_index, repeat, treatment, outcome, inconsistent, judgements: [rows by order]}.
export function addJudgements(pairs, rows) {
    const out = pairs.slice();
    const index = new Map(out.map((p, i) => [pairKey(p), i]));
    for (const r of Array.isArray(rows) ? rows : []) {
        if (!r || r.case_id === undefined) continue;
        const k = pairKey(r);
        let i = index.get(k);
        if (i === undefined) {
            i = out.length;
            index.set(k, i);
            out.push({ case_id: r.case_id, case_index: r.case_index, repeat: r.repeat, treatment: r.treatment, outcome: null, inconsistent: false, judgements: [] });
        } else {
            out[i] = { ...out[i], judgements: out[i].judgements.slice() };
        }
        const p = out[i];
        if (!p.judgements.some((j) => j.order === r.order)) p.judgements.push(r);
        p.judgements.sort((a, b) => (a.order || 0) - (b.order || 0));
        if (r.outcome) p.outcome = r.outcome;
        if (r.inconsistent) p.inconsistent = true;
    }
    return out;
}

// The walk through an experiment's pairs in the pair view: the pairs read so far, the
// current one, whether more pages are behind them, and which pairs the reviewer has reviewed.
// Returns {add(rows, more), setReviewed(keys), markReviewed(pair), reviewed(pair), goTo(pair)
// (index or -1), current(), index(), pairs(), next({unreviewed}), previous(), wantsMore(),
// progress(), firstUnreviewed()}.
export function createPairWalk() {
    let list = [];
    let at = -1;
    let more = false;
    let loaded = false;
    const done = new Set();
    const counts = { reviewed: 0, skipped: 0 };
    const walk = {
        counts,
        // rows: one page of judgements; hasMore: the page had a next_cursor.
        add(rows, hasMore) {
            list = addJudgements(list, rows);
            more = Boolean(hasMore);
            loaded = true;
            return list.length;
        },
        // keys: every pair the reviewer has reviewed (pairKey()); replaces what was known.
        setReviewed(keys) {
            done.clear();
            for (const k of keys) done.add(k);
        },
        markReviewed(p) {
            done.add(pairKey(p));
        },
        reviewed(p) {
            return Boolean(p) && done.has(pairKey(p));
        },
        // Makes the pair (by case_id, repeat, treatment) the current one; -1 when it is not
        // among the pairs read so far (the current one is then unchanged).
        goTo(p) {
            const k = pairKey(p);
            const i = list.findIndex((x) => pairKey(x) === k);
            if (i >= 0) at = i;
            return i;
        },
        current() {
            return at >= 0 && at < list.length ? list[at] : null;
        },
        index() {
            return at;
        },
        pairs() {
            return list;
        },
        // The index of the next pair after the current one (the next one the reviewer has not
        // reviewed with unreviewed), or -1 when none is read yet.
        peekNext({ unreviewed = false } = {}) {
            for (let i = at + 1; i < list.length; i++) if (!unreviewed || !done.has(pairKey(list[i]))) return i;
            return -1;
        },
        // Moves to that pair; returns it, or null at the end of what is read (at stays).
        next(opts) {
            const i = walk.peekNext(opts);
            if (i < 0) return null;
            at = i;
            return list[at];
        },
        previous() {
            if (at <= 0) return null;
            at--;
            return list[at];
        },
        // At the end of the pairs read (for opts) while another page may hold more.
        wantsMore(opts) {
            return more && walk.peekNext(opts) < 0;
        },
        more() {
            return more;
        },
        // The first pair the reviewer has not reviewed (index), or -1.
        firstUnreviewed() {
            return list.findIndex((p) => !done.has(pairKey(p)));
        },
        // {position (1-based), total, more, loaded, reviewed (of the pairs read), text};
        // mine: whether there is a reviewer to count the reviews of (else the text omits them).
        progress(mine = true) {
            const total = list.length;
            const position = at >= 0 ? at + 1 : 0;
            const reviewed = list.filter((p) => done.has(pairKey(p))).length;
            let text;
            if (!loaded) text = 'the pairs are not read yet';
            else if (!total) text = 'no judged pair yet';
            else text = `pair ${fmtInt(position)} of ${fmtInt(total)}${more ? '+' : ''}${mine ? ` · ${fmtInt(reviewed)} reviewed by you` : ''}`;
            return { position, total, more, loaded, reviewed, text };
        },
    };
    return walk;
}

// The address of a pair view; the case id is encoded (it may hold any character).
export function pairHash(id, p) {
    return `#/experiments/${encodeURIComponent(id)}/pairs/${encodeURIComponent(p.case_id)}/${p.repeat}/${p.treatment}`;
}

// The pair of an address's path (after "#"), or null: {id, case_id, repeat, treatment}; the
// path "/experiments/<id>/pairs" gives {id} alone (start at the first pair to review).
export function parsePairPath(path) {
    let m = /^\/experiments\/([A-Za-z0-9_-]+)\/pairs\/([^/]+)\/(\d+)\/(\d+)$/.exec(path);
    if (m) {
        let caseId;
        try {
            caseId = decodeURIComponent(m[2]);
        } catch {
            return null;
        }
        return { id: m[1], case_id: caseId, repeat: Number(m[3]), treatment: Number(m[4]) };
    }
    m = /^\/experiments\/([A-Za-z0-9_-]+)\/pairs$/.exec(path);
    return m ? { id: m[1] } : null;
}

// The reasons to distrust a judge from its judge_quality: [{code, text}], empty when none.
// Consistency below 0.8: it changes its answer when the outputs swap places; a first-slot
// Wilson interval that excludes 1/2: it favours a slot whatever the answers say.
export function distrustReasons(q) {
    const out = [];
    if (!q || typeof q !== 'object') return out;
    if (finite(q.consistency) && q.consistency < MIN_CONSISTENCY) {
        const of = Number.isInteger(q.pairs) ? ` (${fmtInt(q.consistent_pairs)} of ${plural(q.pairs, 'pair', 'pairs')})` : '';
        out.push({ code: 'consistency', text: `consistency ${fmtPct(q.consistency)}${of} is below ${fmtPct(MIN_CONSISTENCY)}: it often changes its answer when the two outputs swap places` });
    }
    const fs = q.first_slot;
    if (fs && finite(fs.wilson_low) && finite(fs.wilson_high) && (fs.wilson_low > 0.5 || fs.wilson_high < 0.5)) {
        const slot = fs.wilson_low > 0.5 ? 'first' : 'second';
        out.push({ code: 'first_slot', text: `it favours the ${slot} slot: slot 1 in ${fmtPct(fs.fraction)} of ${plural(fs.n, 'answer', 'answers')}, interval [${fmtPct(fs.wilson_low)}, ${fmtPct(fs.wilson_high)}] excludes 50%` });
    }
    return out;
}

// A fraction {fraction, n, wilson_low, wilson_high} as "83.3% [55.2%, 95.3%] of 12", or the
// text for none.
export function fractionText(f, none = 'none yet') {
    if (!f || typeof f !== 'object' || !finite(f.fraction)) return none;
    const interval = finite(f.wilson_low) && finite(f.wilson_high) ? ` [${fmtPct(f.wilson_low)}, ${fmtPct(f.wilson_high)}]` : '';
    return `${fmtPct(f.fraction)}${interval} of ${fmtInt(f.n)}`;
}

// The judge-quality figures of a comparison: [{key, label, text}] (consistency, first_slot,
// length, calls, tokens, cost); level: the interval's level text (the unadjusted 1 − α).
export function qualityFigures(q, level = '95%') {
    const jq = q && typeof q === 'object' ? q : {};
    const m = jq.metrics && typeof jq.metrics === 'object' ? jq.metrics : {};
    const both = Number.isInteger(jq.pairs) ? jq.pairs : 0;
    return [
        { key: 'consistency', label: 'consistency', text: finite(jq.consistency) ? `${fmtPct(jq.consistency)} (${fmtInt(jq.consistent_pairs)} of ${plural(both, 'pair', 'pairs')} in both orders)` : 'no pair judged in both orders' },
        { key: 'first_slot', label: `first slot (${level} Wilson)`, text: fractionText(jq.first_slot, 'no answer named a slot') },
        { key: 'length', label: `longer output won (${level} Wilson)`, text: fractionText(jq.length, 'no decisive pair of unequal lengths') },
        { key: 'calls', label: 'judge calls', text: fmtInt(m.calls ?? 0) },
        { key: 'tokens', label: 'judge tokens', text: `${fmtInt(m.input_tokens ?? 0)} input + ${fmtInt(m.output_tokens ?? 0)} output` },
        { key: 'cost', label: 'judge cost', text: finite(m.cost_usd) ? fmtUsd(m.cost_usd) : 'not counted (no price)' },
    ];
}

// The preference of a comparison in one line's parts: ["treatment preferred 62.5%",
// "preference +25 pp", "95% CI […]", "p (adjusted) …", "8 pairs: 5 won · 2 lost · 1 tie ·
// 1 inconsistent", "6 paired cases"].
export function preferenceFigures(pref, analysis) {
    const p = pref && typeof pref === 'object' ? pref : {};
    const out = [];
    out.push(`preferred ${finite(p.rate) ? fmtPct(p.rate) : DASH}`);
    out.push(`preference ${fmtPp(p.delta)}`);
    if (finite(p.ci_low) && finite(p.ci_high)) out.push(`${ciLevel(analysis)} CI [${fmtPp(p.ci_low)}, ${fmtPp(p.ci_high)}]`);
    else out.push('no interval yet (fewer than 2 paired cases)');
    out.push(`p (adjusted) ${fmtP(p.p_value_adjusted)}`);
    const pairs = Number.isInteger(p.pairs) ? p.pairs : 0;
    out.push(`${plural(pairs, 'pair', 'pairs')}: ${fmtInt(p.wins ?? 0)} won · ${fmtInt(p.losses ?? 0)} lost · ${plural(p.ties ?? 0, 'tie', 'ties')} · ${fmtInt(p.inconsistent ?? 0)} inconsistent`);
    out.push(plural(p.paired_cases ?? 0, 'paired case', 'paired cases'));
    return out;
}

// Who decided a comparison's verdict: 'judge' or 'evaluator' (analysis.verdict_by; without
// it, the judge when there is no evaluator verdict and a preference).
export function verdictBy(cmp, analysis) {
    const by = analysis && analysis.verdict_by;
    if (by === 'judge' || by === 'evaluator') return by;
    return cmp && cmp.preference && !cmp.evaluator_verdict ? 'judge' : 'evaluator';
}

// The two verdicts of a judged comparison side by side: [{source, verdict, chosen}], the
// evaluator's first (null verdict: it has none); [] without a judge.
export function verdictSources(cmp, analysis) {
    if (!cmp || !cmp.preference) return [];
    const by = verdictBy(cmp, analysis);
    const evaluator = cmp.evaluator_verdict !== undefined ? cmp.evaluator_verdict : by === 'evaluator' ? cmp.verdict : null;
    return [
        { source: 'evaluator', verdict: evaluator || null, chosen: by === 'evaluator' },
        { source: 'judge', verdict: cmp.preference.verdict || null, chosen: by === 'judge' },
    ];
}

// The judgements line of progress.judgements {planned, judged, failed, unjudged}, or null.
export function judgementsProgress(j) {
    if (!j || typeof j !== 'object') return null;
    const planned = j.planned || 0;
    const judged = j.judged || 0;
    const parts = [`${fmtInt(judged)}/${fmtInt(planned)} judgements`];
    if (j.failed) parts.push(`${fmtInt(j.failed)} failed`);
    if (j.unjudged) parts.push(`${fmtInt(j.unjudged)} unjudged (a run without an output)`);
    return { planned, judged, failed: j.failed || 0, unjudged: j.unjudged || 0, text: parts.join(' · ') };
}

// The agreement figure of one treatment of GET …/judge/agreement: {count, raw, kappa,
// interval, note, countText, confusion (3 × 3, rows judge, columns human, OUTCOMES order)}.
// level: the interval's level text.
export function judgeAgreementFigure(t, level = '95%') {
    const a = t && typeof t === 'object' ? t : {};
    const count = Number.isInteger(a.count) ? a.count : 0;
    const interval = finite(a.kappa) && finite(a.kappa_ci_low) && finite(a.kappa_ci_high)
        ? `${level} CI [${fmtKappa(a.kappa_ci_low)}, ${fmtKappa(a.kappa_ci_high)}]` : '';
    let note = '';
    if (count === 0) note = 'no pair has both a judge outcome and a human one yet';
    else if (!finite(a.kappa)) note = 'κ is undefined while the judge and the reviewers each give one outcome only';
    const rows = Array.isArray(a.confusion) ? a.confusion : [];
    const confusion = OUTCOMES.map((_, i) => OUTCOMES.map((__, j) => {
        const v = Array.isArray(rows[i]) ? rows[i][j] : 0;
        return Number.isInteger(v) ? v : 0;
    }));
    return {
        count,
        countText: plural(count, 'reviewed pair', 'reviewed pairs'),
        raw: fmtPct(a.raw),
        kappa: fmtKappa(a.kappa),
        interval,
        note,
        confusion,
    };
}
