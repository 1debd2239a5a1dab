// The pair view of an experiment with a judge (#/experiments/<id>/pairs/<case>/<repeat>/<t>;
// #/experiments/<id>/pairs starts at the first pair the reviewer has not reviewed): the
// task, the control's and the treatment's outputs side by side, both judgements (order, the
// slot the judge chose and the arm it names, its reason), the pair's outcome and the human
// reviews, and a pair review by keyboard as run review's: c control, = tie, t treatment
// (PUT …/pairs/{case}/{repeat}/{t}/review), s or → the next pair, b or ← the previous one.
// After a saved review it moves to the next pair the reviewer has not reviewed and re-reads
// the judge/human agreement (GET …/judge/agreement, per treatment, with the 3 × 3 confusion).
// The pairs come from GET …/judgements, 100 rows a page, read as the walk needs them; the
// address follows the pair shown (replaceState). The reviewer's name is run review's
// (localStorage "evald.reviewer"). mountPair() returns {dispose}, which removes the key
// handler. All text is inserted as text nodes.
import { api, ApiError } from './api.js';
import { armList, outputText } from './analysis.js';
import { h, replace } from './dom.js';
import { fmtInt } from './format.js';
import {
    OUTCOMES, createPairWalk, judgeAgreementFigure, judgementText, outcomeText, pairAction, pairHash, pairKey, parsePairPath,
} from './judging.js';
import { NOTE_MAX, REVIEWER_MAX, storedReviewer, storeReviewer } from './reviewer.js';

const PAGE = 100;
const MAX_PAGES = 500; // judgement pages read to find a pair: 50,000 judge calls

function num(v) {
    return typeof v === 'number' && Number.isFinite(v) ? String(v) : '';
}

// root: <main>; ctx: app context; id: the experiment; path: the route's path (parsed here).
// Returns {dispose}.
export function mountPair(root, ctx, id, path) {
    const target = parsePairPath(path);
    const st = {
        exp: null, reviewer: storedReviewer(), askReviewer: false, walk: createPairWalk(), cursor: null, reading: null,
        pair: null, pairError: null, pairSeq: 0, agreement: null, agreementError: null, agreementSeq: 0,
        busy: false, visit: { reviewed: 0 }, disposed: false,
    };
    const detailHref = `#/experiments/${encodeURIComponent(id)}`;
    const els = {
        head: h('header', { class: 'detail-head' }),
        who: h('section', { class: 'card review-who', 'data-testid': 'pair-who', 'aria-label': 'Reviewer' }),
        agreement: h('section', { class: 'card', 'data-testid': 'judge-agreement', 'aria-label': 'Agreement of the judge and the reviewers', 'aria-live': 'polite' }),
        progress: h('section', { class: 'review-progress-row' }),
        status: h('p', { class: 'review-status small', 'data-testid': 'pair-status', role: 'status' }),
        pair: h('section', { class: 'card review-run pair-card', 'data-testid': 'pair-view', tabindex: -1, 'aria-label': 'Pair under review' }),
    };
    let note = null;
    let buttons = [];
    replace(root, h('div', { class: 'page experiments-page review-page', 'data-testid': 'pair-page' },
        h('p', { class: 'small' }, h('a', { href: detailHref, 'data-testid': 'pair-back' }, '← Experiment')),
        els.head, els.who, els.agreement, els.progress, els.status, els.pair));

    const alphaOf = () => {
        const a = ((st.exp && st.exp.analysis) || {}).alpha ?? (((st.exp && st.exp.request) || {}).analysis || {}).alpha;
        return typeof a === 'number' && a > 0 && a < 1 ? a : 0.05;
    };
    const level = () => `${(100 * (1 - alphaOf())).toFixed(1).replace(/\.0$/, '')}%`;

    function labels(treatment) {
        const arms = armList(st.exp);
        const t = arms.find((a) => a.index === treatment);
        return {
            control: (st.pair && st.pair.control_label) || (arms[0] && arms[0].label) || 'control',
            treatment: (st.pair && st.pair.treatment === treatment && st.pair.label) || (t && t.label) || `treatment ${treatment}`,
        };
    }

    // ---- header, reviewer, agreement, progress
    function renderHead() {
        const e = st.exp;
        replace(els.head,
            h('div', { class: 'title-row' }, h('h1', { 'data-testid': 'pair-title' }, `Pairs · ${(e && e.name) || id}`)),
            h('p', { class: 'subtitle muted' }, 'The judge saw each pair twice, once in each order. Say which output is better: ',
                h('kbd', null, 'c'), ' control, ', h('kbd', null, '='), ' tie, ', h('kbd', null, 't'), ' treatment; ',
                h('kbd', null, 's'), ' or ', h('kbd', null, '→'), ' next pair, ', h('kbd', null, 'b'), ' or ', h('kbd', null, '←'), ' previous.'));
    }

    function renderWho() {
        if (!st.reviewer || st.askReviewer) {
            const input = h('input', {
                id: 'pair-reviewer', type: 'text', 'data-testid': 'pair-reviewer-input', maxlength: REVIEWER_MAX, autocomplete: 'name',
                value: st.reviewer, placeholder: 'e.g. ann', 'aria-describedby': 'pair-reviewer-hint',
            });
            const error = h('p', { class: 'field-error', 'data-testid': 'pair-reviewer-error', role: 'alert', hidden: true });
            const form = h('form', {
                class: 'review-who-form', 'data-testid': 'pair-reviewer-form', novalidate: true,
                onsubmit: async (ev) => {
                    ev.preventDefault();
                    const name = input.value.trim();
                    if (!name) {
                        error.textContent = 'reviewer cannot be empty';
                        error.hidden = false;
                        input.setAttribute('aria-invalid', 'true');
                        input.focus();
                        return;
                    }
                    const changed = name !== st.reviewer;
                    st.reviewer = name;
                    st.askReviewer = false;
                    storeReviewer(name);
                    renderWho();
                    // Another reviewer has reviewed other pairs: read theirs.
                    if (changed) await readReviewed();
                    if (st.disposed) return;
                    renderProgress();
                    renderPair();
                    els.pair.focus({ preventScroll: true });
                },
            },
            h('label', { for: 'pair-reviewer' }, 'Who is reviewing?'),
            h('div', { class: 'review-who-row' }, input, h('button', { type: 'submit', class: 'primary', 'data-testid': 'pair-reviewer-save' }, 'Start reviewing')),
            h('p', { class: 'hint', id: 'pair-reviewer-hint' }, 'Your name goes with every review and is kept in this browser (as for run review). A second review of the same pair by the same name replaces the first.'),
            error);
            replace(els.who, form);
            queueMicrotask(() => { if (!st.disposed && input.isConnected) input.focus(); });
            return;
        }
        replace(els.who, h('p', { class: 'review-who-line' },
            'Reviewing as ', h('strong', { 'data-testid': 'pair-reviewer' }, st.reviewer), ' ',
            h('button', { type: 'button', class: 'small ghost', 'data-testid': 'pair-reviewer-change', onclick: () => { st.askReviewer = true; renderWho(); renderPair(); } }, 'Change')));
    }

    function renderAgreement() {
        const a = st.agreement;
        if (!a) {
            replace(els.agreement, h('p', { class: st.agreementError ? 'error-text' : 'muted' }, st.agreementError || 'Loading the agreement…'));
            return;
        }
        const list = Array.isArray(a.treatments) ? a.treatments : [];
        const current = st.pair ? st.pair.treatment : null;
        const lvl = typeof a.confidence === 'number' && a.confidence > 0 && a.confidence < 1
            ? `${(100 * a.confidence).toFixed(1).replace(/\.0$/, '')}%` : level();
        replace(els.agreement,
            h('h2', null, 'Judge and reviewers'),
            h('p', { class: 'muted small' }, 'Over the pairs with both a judge outcome and a human one (the majority of a pair\'s reviewers); κ corrects the agreement for chance. Rows: the judge; columns: the reviewers.'),
            list.length ? h('div', { class: 'judge-agreement-grid' }, list.map((t) => {
                const f = judgeAgreementFigure(t, lvl);
                const cell = (i, j) => h('td', { 'data-testid': `judge-confusion-${OUTCOMES[i]}-${OUTCOMES[j]}` }, fmtInt(f.confusion[i][j]));
                return h('div', {
                    class: ['judge-agreement', t.treatment === current && 'is-current'], 'data-testid': 'judge-agreement-treatment',
                    'data-treatment': t.treatment, 'data-count': f.count, 'data-raw': num(t.raw), 'data-kappa': num(t.kappa),
                    'data-kappa-low': num(t.kappa_ci_low), 'data-kappa-high': num(t.kappa_ci_high),
                },
                h('h3', null, `${t.label || `treatment ${t.treatment}`} vs ${labels(t.treatment).control}`),
                h('p', { class: 'review-figure-main', 'data-testid': 'judge-agreement-text' },
                    h('span', { class: 'figure-big' }, `κ ${f.kappa}`), f.interval ? ` · ${f.interval}` : '', ` · ${f.raw} raw agreement · ${f.countText}`),
                f.note ? h('p', { class: 'muted small', 'data-testid': 'judge-agreement-note' }, f.note) : null,
                h('table', { class: 'report review-table judge-confusion', 'data-testid': 'judge-confusion' },
                    h('caption', { class: 'sr-only' }, 'Reviewed pairs by the judge\'s outcome (rows) and the reviewers\' (columns)'),
                    h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'judge ↓ · human →'), OUTCOMES.map((o) => h('th', { scope: 'col' }, o)))),
                    h('tbody', null, OUTCOMES.map((o, i) => h('tr', null, h('th', { scope: 'row' }, o), OUTCOMES.map((_, j) => cell(i, j)))))));
            })) : h('p', { class: 'muted' }, 'No treatment to compare.'));
    }

    function allReviewed(p) {
        return Boolean(st.reviewer) && !st.askReviewer && p.loaded && p.total > 0 && !st.walk.more() && st.walk.firstUnreviewed() < 0;
    }

    function progressText(p) {
        if (st.pairError && !st.pair) return 'The pair could not be read.';
        if (!p.loaded) return 'Reading the pairs…';
        if (p.position === 0 && st.pair) return `a pair not among the ${fmtInt(p.total)} read`;
        return p.text;
    }

    function renderProgress() {
        const p = st.walk.progress(Boolean(st.reviewer) && !st.askReviewer);
        replace(els.progress,
            h('p', { class: 'review-progress', 'data-testid': 'pair-progress', 'data-position': p.position, 'data-total': p.total, 'data-reviewed': p.reviewed },
                progressText(p)),
            h('p', { class: 'muted small', 'data-testid': 'pair-counts' }, `${fmtInt(st.visit.reviewed)} reviewed in this visit`),
            allReviewed(p) ? h('p', { class: 'small', 'data-testid': 'pair-done' }, 'Every judged pair has your review. ', h('a', { href: detailHref }, 'Back to the experiment')) : null);
    }

    function setStatus(text, kind = '') {
        els.status.textContent = text;
        els.status.className = `review-status small ${kind === 'error' ? 'error-text' : 'muted'}`;
    }

    // ---- the pair
    function runColumn(role, run, lb) {
        const text = run ? outputText(run.output) : '';
        const status = run ? run.status || '' : 'no run';
        return h('div', { class: 'review-col pair-col', 'data-testid': `pair-${role}`, 'data-run-id': run ? run.run_id || '' : '', 'data-status': status },
            h('h3', null, role === 'control' ? lb.control : lb.treatment, h('small', { class: 'muted' }, ` · ${role}`),
                status && status !== 'completed' ? h('span', { class: 'badge' }, status) : null),
            h('pre', { class: 'raw', 'data-testid': `pair-output-${role}` }, text || '(no output)'));
    }

    function renderPair() {
        note = null;
        buttons = [];
        for (const k of ['caseId', 'repeat', 'treatment', 'outcome', 'human', 'inconsistent']) delete els.pair.dataset[k];
        const p = st.pair;
        if (st.pairError) {
            replace(els.pair, h('p', { class: 'error-text', 'data-testid': 'pair-error' }, st.pairError),
                h('p', null, h('a', { href: detailHref }, 'Back to the experiment')));
            return;
        }
        if (!p) {
            const w = st.walk.progress();
            replace(els.pair, h('p', { class: 'muted', 'data-testid': w.loaded && !w.total ? 'pair-empty' : null },
                w.loaded && !w.total ? 'No pair has been judged yet: a pair is judged once both of its runs have an output.' : 'Loading the pair…'));
            return;
        }
        const lb = labels(p.treatment);
        // The reviewers' outcome: a string ("control", "tie", "treatment"), or {winner}; null
        // when nobody reviewed the pair or the reviewers are split evenly.
        const human = typeof p.human === 'string' ? p.human : p.human && typeof p.human === 'object' ? p.human.winner || null : null;
        Object.assign(els.pair.dataset, {
            caseId: p.case_id, repeat: String(p.repeat), treatment: String(p.treatment), outcome: p.outcome || '',
            human: human || '', inconsistent: String(Boolean(p.inconsistent)),
        });
        const judgements = Array.isArray(p.judgements) ? p.judgements : [];
        const reviews = Array.isArray(p.reviews) ? p.reviews : [];
        const mine = reviews.find((r) => r.reviewer === st.reviewer) || null;
        const decideDisabled = st.busy || !st.reviewer || st.askReviewer;
        note = h('textarea', {
            id: 'pair-note', 'data-testid': 'pair-note', rows: 2, maxlength: NOTE_MAX, placeholder: 'optional: why (Esc to leave the note)',
            onkeydown: (e) => {
                if (e.key === 'Escape') {
                    e.preventDefault();
                    note.blur();
                    els.pair.focus({ preventScroll: true });
                }
            },
        });
        const button = (action, label, key, cls, testid) => {
            const b = h('button', {
                type: 'button', class: cls, 'data-testid': testid, 'aria-keyshortcuts': key, disabled: ['control', 'tie', 'treatment'].includes(action) ? decideDisabled : st.busy,
                onclick: () => act(action),
            }, label, ' ', h('kbd', null, key));
            buttons.push(b);
            return b;
        };
        replace(els.pair,
            h('div', { class: 'review-run-head' },
                h('h2', { 'data-testid': 'pair-heading' }, `Case ${p.case_id}`, h('span', { class: 'muted' }, ` · repeat ${p.repeat} · ${lb.treatment} vs ${lb.control}`)),
                p.inconsistent ? h('span', { class: 'badge flaky', 'data-testid': 'pair-inconsistent', title: 'the two orders named different arms' }, 'inconsistent') : null,
                st.walk.reviewed(p) ? h('span', { class: 'badge eligible', 'data-testid': 'pair-reviewed-badge' }, 'reviewed by you') : null),
            h('p', { class: 'label' }, 'Task'),
            h('pre', { class: 'prompt-text', 'data-testid': 'pair-task' }, typeof p.task === 'string' ? p.task : '(not available)'),
            h('div', { class: 'pair-cols' }, runColumn('control', p.control, lb), runColumn('treatment', p.treatment_run, lb)),
            h('h3', null, 'The judge'),
            judgements.length ? h('ol', { class: 'pair-judgements', 'data-testid': 'pair-judgements' }, judgements.map((j) => {
                const t = judgementText(j, lb);
                return h('li', { 'data-testid': 'pair-judgement', 'data-order': j.order, 'data-slot': j.winner_slot ?? '', 'data-arm': t.arm || '' },
                    h('strong', null, t.order), h('span', { class: 'muted' }, ` (${t.slots}): `),
                    h('span', { class: `verdict v-${t.arm || 'tie'}`, 'data-testid': 'pair-judgement-answer' }, t.answer),
                    j.reason ? h('span', { class: 'reason', 'data-testid': 'pair-judgement-reason' }, ` — ${j.reason}`) : null,
                    j.error ? h('span', { class: 'error-text small', 'data-testid': 'pair-judgement-error' }, ` — ${j.error}`) : null);
            })) : h('p', { class: 'muted' }, 'Not judged yet.'),
            h('p', { class: 'pair-outcome', 'data-testid': 'pair-outcome', 'data-outcome': p.outcome || '' },
                'Judge\'s outcome: ', h('strong', null, outcomeText(p.outcome, lb)),
                p.inconsistent ? h('span', { class: 'muted' }, ' · the orders named different arms') : null),
            h('div', { class: 'pair-human', 'data-testid': 'pair-human', 'data-winner': human || '' },
                h('p', null, 'Reviewers\' outcome: ', h('strong', { 'data-testid': 'pair-human-outcome' }, human ? outcomeText(human, lb) : reviews.length ? 'no majority' : 'not reviewed yet'),
                    reviews.length ? h('span', { class: 'muted' }, ` · ${reviews.length === 1 ? '1 review' : `${fmtInt(reviews.length)} reviews`}`) : null),
                reviews.length ? h('ul', { class: 'pair-reviews small' }, reviews.map((r) => h('li', {
                    'data-testid': 'pair-review', 'data-reviewer': r.reviewer, 'data-winner': r.winner, class: r.reviewer === st.reviewer ? 'mine' : null,
                }, h('strong', null, r.reviewer), `: ${outcomeText(r.winner, lb)}`, r.note ? h('span', { class: 'muted' }, ` — ${r.note}`) : null))) : null),
            h('div', { class: 'review-decide' },
                h('div', { class: 'field review-note-field' }, h('label', { for: 'pair-note' }, mine ? 'Note (optional; a new verdict replaces yours)' : 'Note (optional)'), note),
                h('div', { class: 'actions review-buttons', role: 'group', 'aria-label': 'Which output is better' },
                    button('control', `${lb.control} is better`, 'c', 'pair-pick', 'pair-decide-control'),
                    button('tie', 'Tie', '=', 'pair-pick', 'pair-decide-tie'),
                    button('treatment', `${lb.treatment} is better`, 't', 'pair-pick', 'pair-decide-treatment')),
                h('div', { class: 'actions', role: 'group', 'aria-label': 'Move between pairs' },
                    button('previous', '← Previous', 'b', 'ghost', 'pair-prev'),
                    button('next', 'Next →', 's', 'ghost', 'pair-next'))),
            h('p', { class: 'muted small' }, 'Keys: ', h('kbd', null, 'c'), ' control better · ', h('kbd', null, '='), ' tie · ', h('kbd', null, 't'),
                ' treatment better · ', h('kbd', null, 's'), '/', h('kbd', null, '→'), ' next · ', h('kbd', null, 'b'), '/', h('kbd', null, '←'),
                ' previous; they do nothing while you type in a field.'));
        if (mine) {
            const b = buttons.find((x) => x.dataset.testid === `pair-decide-${mine.winner}`);
            if (b) b.setAttribute('aria-pressed', 'true');
        }
    }

    function setBusy(busy) {
        st.busy = busy;
        els.pair.setAttribute('aria-busy', String(busy));
        for (const b of buttons) b.disabled = busy || (['pair-decide-control', 'pair-decide-tie', 'pair-decide-treatment'].includes(b.dataset.testid) && (!st.reviewer || st.askReviewer));
    }

    // ---- reading
    // Reads the next page of judgements into the walk; false when there is none or it failed.
    async function readPage() {
        if (st.reading) return st.reading;
        st.reading = (async () => {
            try {
                const res = await api.judgements(id, { limit: PAGE, before: st.cursor || undefined });
                if (st.disposed) return false;
                st.cursor = res.next_cursor || null;
                st.walk.add(res.judgements || [], Boolean(st.cursor));
                return true;
            } catch (e) {
                if (!st.disposed) setStatus(`Could not read the judgements: ${e.message}`, 'error');
                return false;
            } finally {
                st.reading = null;
            }
        })();
        return st.reading;
    }

    // Every pair review of the reviewer, so that the walk knows what is left.
    async function readReviewed() {
        if (!st.reviewer) return;
        const keys = [];
        let before;
        try {
            for (let page = 0; page < MAX_PAGES; page++) {
                const res = await api.pairReviews(id, { reviewer: st.reviewer, limit: PAGE, before });
                for (const r of res.reviews || []) keys.push(pairKey(r));
                before = res.next_cursor;
                if (!before) break;
            }
        } catch (e) {
            if (!st.disposed) setStatus(`Could not read your reviews: ${e.message}`, 'error');
        }
        if (!st.disposed) st.walk.setReviewed(keys);
    }

    async function loadAgreement() {
        const seq = ++st.agreementSeq;
        try {
            const a = await api.judgeAgreement(id);
            if (st.disposed || seq !== st.agreementSeq) return;
            st.agreement = a;
            st.agreementError = null;
        } catch (e) {
            if (st.disposed || seq !== st.agreementSeq) return;
            st.agreementError = `Could not load the agreement: ${e.message}`;
        }
        renderAgreement();
    }

    // Shows pair p ({case_id, repeat, treatment}): reads it, puts it in the address.
    async function show(p) {
        const seq = ++st.pairSeq;
        st.walk.goTo(p);
        history.replaceState(null, '', pairHash(id, p));
        renderProgress();
        try {
            const answer = await api.pair(id, p);
            if (st.disposed || seq !== st.pairSeq) return;
            st.pair = answer;
            st.pairError = null;
        } catch (e) {
            if (st.disposed || seq !== st.pairSeq) return;
            st.pair = null;
            st.pairError = e instanceof ApiError && e.status === 404
                ? `There is no judged pair of case ${p.case_id}, repeat ${p.repeat}, treatment ${p.treatment}.` : `Could not load the pair: ${e.message}`;
        }
        document.title = st.pair ? `Pair ${st.pair.case_id} · ${(st.exp && st.exp.name) || 'Experiment'} · evald` : 'Pair · evald';
        renderProgress();
        renderPair();
        renderAgreement();
    }

    // The first pair to show: the address's, else the first the reviewer has not reviewed
    // (reading pages until one is found), else the first.
    async function start(want) {
        if (st.reviewer) await readReviewed();
        if (!st.walk.progress().loaded) await readPage();
        if (st.disposed) return;
        if (want && want.case_id !== undefined) {
            while (st.walk.goTo(want) < 0 && st.walk.more()) if (!(await readPage()) || st.disposed) break;
            if (st.disposed) return;
            await show(want);
            return;
        }
        let i = st.walk.firstUnreviewed();
        while (i < 0 && st.walk.more()) {
            if (!(await readPage()) || st.disposed) break;
            i = st.walk.firstUnreviewed();
        }
        if (st.disposed) return;
        const list = st.walk.pairs();
        if (!list.length) {
            renderProgress();
            renderPair();
            return;
        }
        await show(list[Math.max(0, i)]);
    }

    // Moves on (after a review: to the next pair the reviewer has not reviewed).
    async function step(dir, unreviewed) {
        const opts = { unreviewed };
        if (dir > 0) {
            while (st.walk.wantsMore(opts)) if (!(await readPage()) || st.disposed) break;
            if (st.disposed) return false;
            const p = st.walk.next(opts);
            if (!p) return false;
            await show(p);
            return true;
        }
        const p = st.walk.previous();
        if (!p) return false;
        await show(p);
        return true;
    }

    // ---- actions
    async function act(action) {
        const p = st.pair;
        if (st.busy || !p) return;
        if (action === 'next' || action === 'previous') {
            setBusy(true);
            const moved = await step(action === 'next' ? 1 : -1, false);
            if (st.disposed) return;
            setBusy(false);
            if (!moved) setStatus(action === 'next' ? 'This is the last pair.' : 'This is the first pair.');
            else setStatus('');
            focusCard();
            return;
        }
        if (!st.reviewer || st.askReviewer) return;
        const body = { winner: action, reviewer: st.reviewer };
        const text = note ? note.value : '';
        if (text.trim()) body.note = text;
        setBusy(true);
        try {
            await api.putPairReview(id, p, body);
        } catch (e) {
            if (st.disposed) return;
            setBusy(false);
            setStatus(`Could not save the review: ${e instanceof ApiError ? e.detail : e.message}`, 'error');
            return;
        }
        if (st.disposed) return;
        st.walk.markReviewed(p);
        st.visit.reviewed++;
        const lb = labels(p.treatment);
        setStatus(`Saved: case ${p.case_id} · repeat ${p.repeat} · ${action === 'tie' ? 'a tie' : `${outcomeText(action, lb)} is better`}`);
        loadAgreement();
        const moved = await step(1, true);
        if (st.disposed) return;
        setBusy(false);
        // The last pair to review: show it again with the review just saved.
        if (!moved) await show(p);
        renderProgress();
        focusCard();
    }

    function focusCard() {
        const active = document.activeElement;
        if (!active || active === document.body || !active.isConnected || els.pair.contains(active)) els.pair.focus({ preventScroll: true });
    }

    function onKey(e) {
        if (st.disposed) return;
        if (document.querySelector('dialog[open]')) return;
        const action = pairAction(e);
        if (!action) return;
        if (!st.pair) return;
        if (['control', 'tie', 'treatment'].includes(action) && (!st.reviewer || st.askReviewer)) return;
        e.preventDefault();
        act(action);
    }

    document.addEventListener('keydown', onKey);
    renderHead();
    renderWho();
    renderAgreement();
    renderProgress();
    renderPair();

    if (!target) {
        replace(els.pair, h('p', { class: 'error-text', 'data-testid': 'pair-error' }, 'This is not the address of a pair.'));
        return { dispose() { st.disposed = true; document.removeEventListener('keydown', onKey); } };
    }

    api.experiment(id).then((e) => {
        if (st.disposed) return;
        st.exp = e;
        renderHead();
        renderAgreement();
        if (st.pair) renderPair();
    }).catch((e) => {
        if (st.disposed) return;
        const notFound = e instanceof ApiError && e.status === 404;
        document.removeEventListener('keydown', onKey);
        st.disposed = true;
        replace(root, h('div', { class: 'page', 'data-testid': 'pair-error' },
            h('h1', null, notFound ? 'Experiment not found' : 'Could not load the experiment'),
            h('p', null, notFound ? `There is no experiment ${id}; it may have been deleted.` : e.message),
            h('p', null, h('a', { href: '#/experiments' }, 'Back to the experiments'))));
    });
    loadAgreement();
    start(target.case_id !== undefined ? target : null);

    return {
        dispose() {
            st.disposed = true;
            document.removeEventListener('keydown', onKey);
        },
    };
}
