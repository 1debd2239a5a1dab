// The review screen of an experiment (#/experiments/<id>/review): one run at a time from the
// review queue (GET /v1/experiments/{id}/review-queue, most useful first), the case's prompt,
// the run's output and the evaluator's verdict and reason side by side; p pass, f fail,
// s skip (and the same buttons), an optional note, progress through the queue, and the
// agreement of the evaluator and the reviewers (GET …/agreement), re-read after each review.
// The reviewer's name is asked once and kept in localStorage ("evald.reviewer"). Keys are
// ignored while a text field has the focus; Esc leaves the note. mountReview() returns
// {dispose}, which removes the key handler. All text is inserted as text nodes.
import { api, ApiError } from './api.js';
import { armList, outputText } from './analysis.js';
import { h, replace } from './dom.js';
import { fmtInt, fmtScore } from './format.js';
import { agreementFigure, createWalk, evaluatorVerdict, queueReasons, reviewAction } from './reviewing.js';
import { NOTE_MAX, REVIEWER_MAX, storedReviewer, storeReviewer } from './reviewer.js';

const QUEUE_LIMIT = 100;

function json(v) {
    return JSON.stringify(v ?? null);
}

// root: <main>; ctx: app context; id: the experiment id. Returns {dispose}.
export function mountReview(root, ctx, id) {
    const st = {
        exp: null, reviewer: storedReviewer(), askReviewer: false, walk: createWalk(), loadingQueue: false, queueError: null,
        agreement: null, agreementError: null, agreementSeq: 0, busy: false, status: '', statusKind: '', started: false, disposed: false,
    };
    const detailHref = `#/experiments/${encodeURIComponent(id)}`;
    const els = {
        head: h('header', { class: 'detail-head' }),
        who: h('section', { class: 'card review-who', 'data-testid': 'review-who', 'aria-label': 'Reviewer' }),
        figure: h('section', { class: 'card review-agreement', 'data-testid': 'review-agreement', 'aria-label': 'Agreement', 'aria-live': 'polite' }),
        progress: h('section', { class: 'review-progress-row' }),
        run: h('section', { class: 'card review-run', 'data-testid': 'review-run', tabindex: -1, 'aria-label': 'Run under review' }),
        status: h('p', { class: 'review-status small', 'data-testid': 'review-status', role: 'status' }),
    };
    let note = null;
    let buttons = [];
    replace(root, h('div', { class: 'page experiments-page review-page', 'data-testid': 'review-view' },
        h('p', { class: 'small' }, h('a', { href: detailHref, 'data-testid': 'review-back' }, '← Experiment')),
        els.head, els.who, els.figure, els.progress, els.status, els.run));

    // ---- header, reviewer, figure, progress
    function renderHead() {
        const e = st.exp;
        replace(els.head,
            h('div', { class: 'title-row' },
                h('h1', { 'data-testid': 'review-title' }, `Review · ${(e && e.name) || id}`)),
            h('p', { class: 'subtitle muted' }, 'Runs most worth a look come first: flaky cases, cases where the arms disagree, scores near the evaluator\'s threshold. ',
                'Each verdict is saved at once; ', h('a', { href: `${detailHref}?source=human_then_evaluator`, 'data-testid': 'review-analysis-link' }, 'the analysis from human verdicts'),
                ' follows them.'));
    }

    function renderWho() {
        if (!st.reviewer || st.askReviewer) {
            const input = h('input', {
                id: 'review-reviewer', type: 'text', 'data-testid': 'review-reviewer-input', maxlength: REVIEWER_MAX, autocomplete: 'name',
                value: st.reviewer, placeholder: 'e.g. ann', 'aria-describedby': 'review-reviewer-hint',
            });
            const error = h('p', { class: 'field-error', 'data-testid': 'review-reviewer-error', role: 'alert', hidden: true });
            const form = h('form', {
                class: 'review-who-form', 'data-testid': 'review-reviewer-form', novalidate: true,
                onsubmit: (ev) => {
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
                    if (changed || !st.walk.progress().total) restart();
                    else renderRun();
                    els.run.focus({ preventScroll: true });
                },
            },
            h('label', { for: 'review-reviewer' }, 'Who is reviewing?'),
            h('div', { class: 'review-who-row' }, input, h('button', { type: 'submit', class: 'primary', 'data-testid': 'review-reviewer-save' }, 'Start reviewing')),
            h('p', { class: 'hint', id: 'review-reviewer-hint' }, 'Your name goes with every review and is kept in this browser. A second review of the same run by the same name replaces the first.'),
            error);
            replace(els.who, form);
            queueMicrotask(() => { if (!st.disposed && input.isConnected) input.focus(); });
            return;
        }
        replace(els.who, h('p', { class: 'review-who-line' },
            'Reviewing as ', h('strong', { 'data-testid': 'review-reviewer' }, st.reviewer), ' ',
            h('button', { type: 'button', class: 'small ghost', 'data-testid': 'review-reviewer-change', onclick: () => { st.askReviewer = true; renderWho(); renderRun(); } }, 'Change')));
    }

    function renderFigure() {
        const a = st.agreement;
        if (!a) {
            replace(els.figure, h('p', { class: st.agreementError ? 'error-text' : 'muted' }, st.agreementError || 'Loading the agreement…'));
            return;
        }
        const f = agreementFigure(a);
        const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? String(v) : '');
        els.figure.dataset.reviewed = String(f.reviewed);
        els.figure.dataset.agreement = num(a.agreement);
        els.figure.dataset.kappa = num(a.kappa);
        els.figure.dataset.kappaLow = num(a.kappa_ci_low);
        els.figure.dataset.kappaHigh = num(a.kappa_ci_high);
        const t = a.table || {};
        const cell = (k) => h('td', { 'data-testid': `review-table-${k}` }, fmtInt(t[k] ?? 0));
        replace(els.figure,
            h('div', { class: 'review-figure' },
                h('p', { class: 'review-figure-main', 'data-testid': 'review-agreement-text' },
                    h('span', { class: 'figure-big' }, f.agreement), ' agreement · ',
                    h('span', { class: 'figure-big' }, `κ ${f.kappa}`), f.interval ? ` · ${f.interval}` : '', ` · ${f.reviewedText}`),
                f.note ? h('p', { class: 'muted small', 'data-testid': 'review-agreement-note' }, f.note) : null,
                h('p', { class: 'muted small' }, 'Between the evaluator and the reviewers (the majority verdict of a run\'s reviewers); κ corrects the agreement for chance.')),
            h('table', { class: 'report review-table', 'data-testid': 'review-table' },
                h('caption', { class: 'sr-only' }, 'Reviewed runs by evaluator and human verdict'),
                h('thead', null, h('tr', null, h('th', { scope: 'col' }, ''), h('th', { scope: 'col' }, 'human pass'), h('th', { scope: 'col' }, 'human fail'))),
                h('tbody', null,
                    h('tr', null, h('th', { scope: 'row' }, 'evaluator pass'), cell('evaluator_pass_human_pass'), cell('evaluator_pass_human_fail')),
                    h('tr', null, h('th', { scope: 'row' }, 'evaluator fail'), cell('evaluator_fail_human_pass'), cell('evaluator_fail_human_fail')))));
    }

    // Nothing is said of the queue before a reviewer is named and the queue was read.
    function progressText(p) {
        if (!st.reviewer || st.askReviewer) return 'Say who is reviewing to read the queue.';
        if (st.queueError && !p.loaded) return 'The queue could not be read.';
        if (!p.loaded || (st.loadingQueue && !p.total)) return 'Loading the queue…';
        return p.text;
    }

    function renderProgress() {
        const p = st.walk.progress();
        const pct = p.total ? Math.round(((p.done ? p.total : p.position - 1) / p.total) * 100) : 0;
        replace(els.progress,
            h('p', {
                class: 'review-progress', 'data-testid': 'review-progress', 'data-position': p.position, 'data-total': p.total, 'data-done': String(p.done),
            }, progressText(p)),
            h('div', { class: 'progressbar', role: 'progressbar', 'aria-label': 'Progress through the queue', 'aria-valuemin': 0, 'aria-valuemax': p.total, 'aria-valuenow': p.done ? p.total : Math.max(0, p.position - 1) },
                h('span', { style: `width:${pct}%` })),
            h('p', { class: 'muted small', 'data-testid': 'review-counts' }, `${fmtInt(st.walk.counts.reviewed)} reviewed · ${fmtInt(st.walk.counts.skipped)} skipped in this visit`));
    }

    function setStatus(text, kind = '') {
        st.status = text;
        st.statusKind = kind;
        els.status.textContent = text;
        els.status.className = `review-status small ${kind === 'error' ? 'error-text' : 'muted'}`;
    }

    // ---- the run under review
    function arm(run) {
        const a = armList(st.exp).find((x) => x.index === run.arm);
        return a ? a : { label: `arm ${run.arm}`, role: run.arm === 0 ? 'control' : 'treatment' };
    }

    function renderRun() {
        note = null;
        buttons = [];
        const run = st.walk.current();
        for (const k of ['runId', 'caseId', 'arm', 'evaluatorPassed']) delete els.run.dataset[k];
        if (!st.reviewer || st.askReviewer) {
            replace(els.run, h('p', { class: 'muted' }, 'Say who is reviewing to start.'));
            return;
        }
        if (st.queueError) {
            replace(els.run, h('p', { class: 'error-text', 'data-testid': 'review-error' }, st.queueError),
                h('p', null, h('button', { type: 'button', onclick: () => restart() }, 'Try again')));
            return;
        }
        if (!run) {
            const p = st.walk.progress();
            if (st.loadingQueue || !p.loaded) {
                replace(els.run, h('p', { class: 'muted' }, 'Loading the queue…'));
                return;
            }
            const { reviewed, skipped } = st.walk.counts;
            replace(els.run, h('div', { 'data-testid': p.total ? 'review-done' : 'review-empty' },
                h('h2', null, p.total ? 'The queue is done' : 'Nothing to review'),
                h('p', null, p.total
                    ? `${fmtInt(reviewed)} reviewed and ${fmtInt(skipped)} skipped in this visit.`
                    : `Every run with an output has a review from ${st.reviewer}, or no run has finished yet.`),
                h('p', { class: 'actions' },
                    skipped ? h('button', { type: 'button', 'data-testid': 'review-again', onclick: () => restart() }, 'Review the skipped runs') : null,
                    h('a', { class: 'button', href: detailHref }, 'Back to the experiment'))));
            return;
        }
        const a = arm(run);
        const ev = evaluatorVerdict(run);
        Object.assign(els.run.dataset, { runId: run.run_id, caseId: run.case_id, arm: String(run.arm), evaluatorPassed: String(ev.passed) });
        note = h('textarea', {
            id: 'review-note', 'data-testid': 'review-note', rows: 2, maxlength: NOTE_MAX, placeholder: 'optional: why (Esc to leave the note)',
            onkeydown: (e) => {
                if (e.key === 'Escape') {
                    e.preventDefault();
                    note.blur();
                    els.run.focus({ preventScroll: true });
                }
            },
        });
        const button = (action, label, key, cls) => {
            const b = h('button', {
                type: 'button', class: cls, 'data-testid': `review-${action}`, 'aria-keyshortcuts': key, disabled: st.busy,
                onclick: () => act(action),
            }, label, ' ', h('kbd', null, key));
            buttons.push(b);
            return b;
        };
        const text = outputText(run.output);
        const reasons = queueReasons(run);
        replace(els.run,
            h('div', { class: 'review-run-head' },
                h('h2', { 'data-testid': 'review-run-title' }, `Case ${run.case_id}`,
                    h('span', { class: 'muted' }, ` · ${a.label} (${a.role || (run.arm === 0 ? 'control' : 'treatment')}) · repeat ${run.repeat}`)),
                reasons.map((r) => h('span', { class: 'badge flaky', 'data-testid': 'review-reason' }, r))),
            h('div', { class: 'review-cols' },
                h('div', { class: 'review-col', 'data-testid': 'review-input' },
                    h('h3', null, 'Input'),
                    h('p', { class: 'label' }, 'Prompt'),
                    h('pre', { class: 'prompt-text', 'data-testid': 'review-prompt' }, typeof run.prompt === 'string' ? run.prompt : '(not available)'),
                    typeof run.system_prompt === 'string' && run.system_prompt
                        ? [h('p', { class: 'label' }, 'System prompt'), h('pre', { class: 'prompt-text', 'data-testid': 'review-system-prompt' }, run.system_prompt)] : null,
                    h('dl', { class: 'kv' },
                        h('dt', null, 'variables'), h('dd', null, h('code', { 'data-testid': 'review-vars' }, json(run.vars ?? {}))),
                        h('dt', null, 'expected'), h('dd', null, h('code', { 'data-testid': 'review-expected' }, json(run.expected))))),
                h('div', { class: 'review-col', 'data-testid': 'review-output-col' },
                    h('h3', null, 'Output'),
                    h('pre', { class: 'raw', 'data-testid': 'review-output' }, text || '(empty output)')),
                h('div', { class: 'review-col', 'data-testid': 'review-evaluator' },
                    h('h3', null, 'Evaluator'),
                    h('p', null, h('span', { class: `verdict v-${ev.text.replace(/\s+/g, '-')}`, 'data-testid': 'review-evaluator-verdict' }, ev.text),
                        ev.score !== null ? h('span', { class: 'muted small' }, ` score ${fmtScore(ev.score)}`) : null),
                    h('p', { class: 'reason', 'data-testid': 'review-evaluator-reason' }, ev.reason || '(no reason given)'))),
            h('div', { class: 'review-decide' },
                h('div', { class: 'field review-note-field' }, h('label', { for: 'review-note' }, 'Note (optional)'), note),
                h('div', { class: 'actions review-buttons', role: 'group', 'aria-label': 'Verdict' },
                    button('pass', 'Pass', 'p', 'review-pass'), button('fail', 'Fail', 'f', 'danger review-fail'), button('skip', 'Skip', 's', 'ghost'))),
            h('p', { class: 'muted small' }, 'Keys: ', h('kbd', null, 'p'), ' pass · ', h('kbd', null, 'f'), ' fail · ', h('kbd', null, 's'), ' skip; they do nothing while you type in a field.'));
    }

    function setBusy(busy) {
        st.busy = busy;
        for (const b of buttons) b.disabled = busy;
        els.run.setAttribute('aria-busy', String(busy));
    }

    // ---- actions
    async function act(action) {
        const run = st.walk.current();
        if (!run || st.busy || !st.reviewer || st.askReviewer) return;
        if (action === 'skip') {
            st.walk.next('skipped');
            setStatus(`Skipped case ${run.case_id} · ${arm(run).label}`);
            await advance();
            return;
        }
        const body = { verdict: action, reviewer: st.reviewer };
        const text = note ? note.value : '';
        if (text.trim()) body.note = text;
        setBusy(true);
        try {
            await api.putReview(id, run.run_id, body);
        } catch (e) {
            if (st.disposed) return;
            setBusy(false);
            setStatus(`Could not save the review: ${e instanceof ApiError ? e.detail : e.message}`, 'error');
            return;
        }
        if (st.disposed) return;
        setBusy(false);
        st.walk.next('reviewed');
        setStatus(`Saved: case ${run.case_id} · ${arm(run).label} ${action === 'pass' ? 'passes' : 'fails'}`);
        loadAgreement();
        await advance();
    }

    async function advance() {
        if (st.walk.wantsMore()) await loadQueue();
        if (st.disposed) return;
        renderProgress();
        renderRun();
        // A clicked button is gone with the run it decided: the keys go on from the run's card.
        const active = document.activeElement;
        if (!st.walk.current() || !active || active === document.body || !active.isConnected) els.run.focus({ preventScroll: true });
    }

    function onKey(e) {
        if (st.disposed) return;
        if (document.querySelector('dialog[open]')) return;
        const action = reviewAction(e);
        if (!action) return;
        if (!st.walk.current() || !st.reviewer || st.askReviewer) return;
        e.preventDefault();
        act(action);
    }

    // ---- loading
    async function loadAgreement() {
        const seq = ++st.agreementSeq;
        try {
            const a = await api.agreement(id);
            if (st.disposed || seq !== st.agreementSeq) return;
            st.agreement = a;
            st.agreementError = null;
        } catch (e) {
            if (st.disposed || seq !== st.agreementSeq) return;
            st.agreementError = `Could not load the agreement: ${e.message}`;
        }
        renderFigure();
    }

    async function loadQueue() {
        st.loadingQueue = true;
        renderProgress();
        try {
            const res = await api.reviewQueue(id, { reviewer: st.reviewer, limit: QUEUE_LIMIT, offset: st.walk.offset() });
            if (st.disposed) return;
            st.walk.add(res.runs || [], QUEUE_LIMIT);
            st.queueError = null;
        } catch (e) {
            if (st.disposed) return;
            st.queueError = `Could not load the review queue: ${e.message}`;
        }
        st.loadingQueue = false;
    }

    // A fresh walk from the start of the queue (skipped runs come back).
    async function restart() {
        st.started = true;
        st.walk = createWalk();
        setStatus('');
        renderProgress();
        renderRun();
        await loadQueue();
        if (st.disposed) return;
        renderProgress();
        renderRun();
    }

    document.addEventListener('keydown', onKey);
    renderHead();
    renderWho();
    renderFigure();
    renderProgress();
    renderRun();

    api.experiment(id).then((e) => {
        if (st.disposed) return;
        st.exp = e;
        document.title = `Review · ${e.name || 'Experiment'} · evald`;
        renderHead();
        if (st.walk.current()) renderRun();
        if (st.reviewer && !st.started) restart();
    }).catch((e) => {
        if (st.disposed) return;
        const notFound = e instanceof ApiError && e.status === 404;
        document.removeEventListener('keydown', onKey);
        replace(root, h('div', { class: 'page', 'data-testid': 'review-error' },
            h('h1', null, notFound ? 'Experiment not found' : 'Could not load the experiment'),
            h('p', null, notFound ? `There is no experiment ${id}; it may have been deleted.` : e.message),
            h('p', null, h('a', { href: '#/experiments' }, 'Back to the experiments'))));
    });
    loadAgreement();

    return {
        dispose() {
            st.disposed = true;
            document.removeEventListener('keydown', onKey);
        },
    };
}
