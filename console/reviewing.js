// Pure helpers of the review screen (review.js): which review key an event means, the walk
// through the review queue with its progress, the agreement figure's texts, the evaluator's
// verdict of a queued run and the sources of the analysis. No DOM, no state outside the
// objects they return, no I/O.
import { DASH, fmtPct } from './format.js';

// The key of a review action: p pass, f fail, s skip (lower or upper case).
export const REVIEW_KEYS = { p: 'pass', f: 'fail', s: 'skip' };

// The sources of an experiment's analysis (GET /v1/experiments/{id}?source=) with their labels.
export const SOURCES = [
    { value: 'evaluator', label: 'evaluator' },
    { value: 'human', label: 'human' },
    { value: 'human_then_evaluator', label: 'human, then evaluator' },
];

export function isSource(value) {
    return SOURCES.some((s) => s.value === value);
}

// Whether an element takes typed text (so a key pressed there is typing, not a command):
// input (other than buttons, checkboxes and radios), textarea, select, contenteditable.
// el: an element-like {tagName, type, isContentEditable} or null.
export function isTyping(el) {
    if (!el) return false;
    if (el.isContentEditable) return true;
    const tag = String(el.tagName || '').toLowerCase();
    if (tag === 'textarea' || tag === 'select') return true;
    if (tag !== 'input') return false;
    const type = String(el.type || 'text').toLowerCase();
    return !['button', 'submit', 'reset', 'checkbox', 'radio', 'range', 'color', 'file'].includes(type);
}

// The action of a keydown event ({key, target, ctrlKey, metaKey, altKey, repeat}): 'pass',
// 'fail', 'skip', or null when the key is another one, carries a modifier (Shift allowed),
// repeats from being held down, or is typed into a text field.
export function reviewAction(ev) {
    if (!ev || ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat) return null;
    if (isTyping(ev.target)) return null;
    return REVIEW_KEYS[String(ev.key || '').toLowerCase()] || null;
}

// The evaluator's verdict of a queued run: {passed (true|false|null), text, score, reason}.
export function evaluatorVerdict(run) {
    const v = run && run.verdict && typeof run.verdict === 'object' ? run.verdict : {};
    const passed = typeof (run && run.passed) === 'boolean' ? run.passed : typeof v.passed === 'boolean' ? v.passed : null;
    const score = typeof (run && run.score) === 'number' ? run.score : typeof v.score === 'number' ? v.score : null;
    return {
        passed,
        text: passed === true ? 'met criteria' : passed === false ? 'missed criteria' : 'not evaluated',
        score,
        reason: typeof v.reason === 'string' ? v.reason : '',
    };
}

const REASON_TEXT = { flaky: 'flaky case', disagree: 'arms disagree', near_threshold: 'score near the threshold' };

// Why a run is in the queue, as short texts (the queue's reasons, known ones first).
export function queueReasons(run) {
    const list = Array.isArray(run && run.reasons) ? run.reasons : [];
    return list.map((r) => REASON_TEXT[r] || String(r));
}

// A walk through the review queue. The server answers the next runs a reviewer has not
// reviewed, at most `limit` at a time; a skipped run stays in the server's queue, so the walk
// asks past the runs it skipped (offset()), remembers every run it has shown and appends
// only new ones when it asks again (a run that finished meanwhile can move one back in).
// Returns {add(runs, limit), current(), next(outcome), offset(), progress(), wantsMore(),
// counts}.
export function createWalk() {
    const items = [];
    const seen = new Set();
    let index = 0;
    let more = false;
    let loaded = false;
    const counts = { reviewed: 0, skipped: 0 };
    return {
        counts,
        // runs: one answer of the queue; limit: the limit it was asked with. Returns how many
        // runs were new.
        add(runs, limit) {
            loaded = true;
            let added = 0;
            for (const r of Array.isArray(runs) ? runs : []) {
                if (!r || !r.run_id || seen.has(r.run_id)) continue;
                seen.add(r.run_id);
                items.push(r);
                added++;
            }
            // A full answer may have more behind it; an answer with nothing new has none.
            more = Array.isArray(runs) && runs.length >= limit && added > 0;
            return added;
        },
        current() {
            return index < items.length ? items[index] : null;
        },
        // outcome: 'reviewed' | 'skipped'.
        next(outcome) {
            if (index >= items.length) return null;
            counts[outcome === 'skipped' ? 'skipped' : 'reviewed']++;
            index++;
            return this.current();
        },
        // Asks for another answer of the queue: at the end while the last one was full.
        wantsMore() {
            return index >= items.length && more;
        },
        // The `offset` of the next read: the runs this walk skipped are still at the head of
        // the server's queue (the reviewed ones left it), so the next runs are behind them.
        offset() {
            return counts.skipped;
        },
        // {position (1-based, of the current run; total when done), total, more, done, loaded,
        // text}. Before the first answer (loaded false) nothing is known of the queue.
        progress() {
            const total = items.length;
            const done = loaded && index >= total;
            const position = index >= total ? total : index + 1;
            let text = `${position} of ${total}${more ? '+' : ''}${done ? ' · done' : ''}`;
            if (!loaded) text = 'the queue is not read yet';
            else if (total === 0) text = 'nothing to review';
            return { position, total, more, done, loaded, text };
        },
    };
}

function finite(v) {
    return typeof v === 'number' && Number.isFinite(v);
}

// κ with two decimals and a real minus sign: 0.17, −0.71, 1.00.
export function fmtKappa(v) {
    if (!finite(v)) return DASH;
    const s = Math.abs(v).toFixed(2);
    return v < 0 && s !== '0.00' ? `−${s}` : s;
}

// The agreement figure of GET /v1/experiments/{id}/agreement: {reviewed, agreement (text),
// kappa (text), interval (text or ''), note (text or '')}.
export function agreementFigure(a) {
    const ag = a || {};
    const reviewed = Number.isInteger(ag.reviewed_runs) ? ag.reviewed_runs : 0;
    const level = finite(ag.confidence) ? `${(100 * ag.confidence).toFixed(1).replace(/\.0$/, '')}%` : '95%';
    const interval = finite(ag.kappa) && finite(ag.kappa_ci_low) && finite(ag.kappa_ci_high)
        ? `${level} CI [${fmtKappa(ag.kappa_ci_low)}, ${fmtKappa(ag.kappa_ci_high)}]` : '';
    let note = '';
    if (reviewed === 0) note = 'no reviewed run yet';
    else if (!finite(ag.kappa)) note = 'κ is undefined while every verdict is the same';
    return {
        reviewed,
        reviewedText: `${reviewed.toLocaleString('en-US')} reviewed run${reviewed === 1 ? '' : 's'}`,
        agreement: fmtPct(ag.agreement),
        kappa: fmtKappa(ag.kappa),
        interval,
        note,
    };
}
