// The detail of one experiment (#/experiments/<id>), mounted by experiments.js: live progress, a
// verdict banner per treatment, the forest plot of the pass-rate deltas (forest.js), arms and
// metric tables, the per-case matrix with its flaky/disagree filters and paging, a case's runs
// side by side (each drawn by exprun.js: a word diff against the control, the conversation turn
// by turn, the simulated user's figures, the trace id), each arm's model and cost, export,
// cancel and delete, the source of
// the verdicts the analysis is read from, and the way to the review screen, review.js. For a
// sequential experiment: the stop (decided, budget, every case ran), the anytime-valid verdicts
// with the fixed-sample figures beside them, the spend against the budget's caps, skipped runs
// and cases, and per treatment the confidence sequence case by case, recomputed from every
// case row (sequential.js) and checked against the server's last point. It follows the
// experiment's event stream while it runs; progress events update the bar at once and, at most
// every 1.5 s, one read of the experiment refreshes the analysis; the matrix's first page is
// re-read at most every 4 s (not once later pages are loaded), so a 10,000-case experiment is
// never reloaded whole per event; the case rows of the sequence are read whole only when the
// sequence has grown, at most every 5 s, and for more than 2,000 cases only once it is terminal.
// With a pairwise judge: the judgements' progress, each treatment's banner and the judged
// pairs of judge.js (GET …/judgements, 100 rows a page), which lead to the pair view, pair.js.
// mountExperiment() returns {dispose}, which closes the stream and stops the timers. All text is
// inserted as text nodes.
import { api, ApiError, experimentEventsUrl, exportBlob, exportPath, getToken } from './api.js';
import {
    armList, armModel, ciLevel, fmtPp, matrixCell, modelText, optionsText, spendView, stopLine, verdictBanner,
} from './analysis.js';
import { sequenceChart } from './charts.js';
import { h, replace } from './dom.js';
import { METRIC_LABELS, forestPlot, metricEntries, metricForests, signed } from './forest.js';
import { runBlock } from './exprun.js';
import { confidenceSequence, sequenceDiffs } from './sequential.js';
import { SOURCES, isSource } from './reviewing.js';
import { judgedBanner, pairsCard } from './judge.js';
import { addJudgements, judgementsProgress, verdictSources } from './judging.js';
import { DASH, fmtDate, fmtInt, fmtPct, fmtUsd, isTerminal } from './format.js';

const SEQ_PAGES = 1000; // case pages of 100 read for the sequence: 100,000 cases
const SEQ_LIVE_CASES = 2000; // larger sequences are drawn once the experiment is terminal
const SEQ_EVERY_MS = 5000;
const SEQ_TOLERANCE = 1e-9;
const STOP_BADGES = { decided: 'stopped early', budget: 'budget', exhausted: 'ran every case', '': 'anytime' };

// root: <main>; ctx: app context; id: the experiment; source: the verdicts the analysis is read
// from (evaluator, human, human_then_evaluator). Returns {dispose}.
export function mountExperiment(root, ctx, id, source) {
    const st = {
        source: isSource(source) ? source : 'evaluator', readSeq: 0,
        exp: null, progress: null, es: null, live: 'idle', retry: 0, retryTimer: 0, refreshTimer: 0, matrixTimer: 0, lastMatrix: 0,
        filter: '', cases: [], next: null, casesLoaded: false, caseError: null, selected: null, runs: null, runsError: null, disposed: false,
        openConversations: new Set(),
        // the case rows of the sequence: every page, read again when the sequence grew
        seqRows: null, seqLen: -1, seqFinal: false, seqLoading: false, seqAt: 0, seqTimer: 0, seqError: null, seqTruncated: false, seqOpen: false,
        // the judged pairs: pages of judgements, grouped by pair
        pairs: [], pairsNext: null, pairsLoaded: false, pairsError: null, pairsPages: 0,
    };
    const els = {
        head: h('header', { class: 'detail-head' }),
        progress: h('section', { class: 'card progress-panel', 'data-testid': 'exp-progress' }),
        spend: h('section', { class: 'card spend-panel', 'data-testid': 'exp-spend', 'aria-label': 'Spend', hidden: true }),
        verdicts: h('section', { class: 'exp-verdicts', 'data-testid': 'exp-verdicts', 'aria-label': 'Verdicts' }),
        sequence: h('section', { class: 'card', 'data-testid': 'exp-sequence', 'aria-label': 'Confidence sequence', hidden: true }),
        forest: h('section', { class: 'card' }),
        arms: h('section', { class: 'card' }),
        metrics: h('section', { class: 'card' }),
        matrix: h('section', { class: 'card', 'data-testid': 'exp-matrix', 'aria-label': 'Cases' }),
        caseView: h('section', { class: 'card', 'data-testid': 'exp-case', hidden: true, 'aria-label': 'Runs of a case' }),
        pairs: h('section', { class: 'card', 'data-testid': 'exp-pairs', hidden: true, 'aria-label': 'Judged pairs' }),
    };
    replace(root, h('div', { class: 'page experiments-page', 'data-testid': 'exp-detail' },
        h('p', { class: 'small' }, h('a', { href: '#/experiments' }, '← Experiments')),
        els.head, els.progress, els.spend, els.verdicts, els.sequence, els.forest, els.arms, els.metrics, els.matrix, els.caseView, els.pairs,
        h('p', { class: 'footnote' }, 'Intervals are Bonferroni-adjusted for the number of treatments; token, cost and time deltas are descriptive and never decide a verdict.')));

    const statusOf = () => (st.exp && st.exp.status) || (st.progress && st.progress.status) || '';

    // records: undefined (runs) or 'judgements'.
    function exportLink(format, records) {
        const file = `${id}${records ? `-${records}` : ''}.${format}`;
        return h('a', {
            class: 'button small', href: exportPath(id, format, records), download: file, 'data-testid': `exp-export-${records ? `${records}-` : ''}${format}`,
            onclick: async (e) => {
                if (!getToken()) return; // the plain link works
                e.preventDefault();
                try {
                    const blob = await exportBlob(id, format, records);
                    const url = URL.createObjectURL(blob);
                    const a = h('a', { href: url, download: file });
                    document.body.appendChild(a);
                    a.click();
                    a.remove();
                    setTimeout(() => URL.revokeObjectURL(url), 10000);
                } catch (err) {
                    ctx.toast(`Could not export: ${err.message}`, 'error');
                }
            },
        }, format.toUpperCase());
    }

    function renderHead() {
        const keepFocus = document.activeElement && document.activeElement.id === 'exp-source';
        renderHeadParts();
        // The selector is made again with the header: give the focus back to the new one.
        if (keepFocus) {
            const select = document.getElementById('exp-source');
            if (select) select.focus();
        }
    }

    function renderHeadParts() {
        const e = st.exp;
        const status = statusOf();
        const terminal = isTerminal(status);
        const req = e.request || {};
        const model = req.model || {};
        const ds = e.dataset || {};
        const partial = e.analysis && e.analysis.partial;
        replace(els.head,
            h('div', { class: 'title-row' },
                h('h1', { 'data-testid': 'exp-title' }, e.name || '(unnamed experiment)'),
                h('span', { class: `badge status ${status}`, 'data-testid': 'exp-status', 'data-status': status }, status),
                partial ? h('span', { class: 'badge partial', 'data-testid': 'exp-partial' }, 'partial analysis') : null,
                !terminal ? h('span', { class: `live ${st.live}`, 'data-testid': 'exp-live' },
                    st.live === 'open' ? 'live' : st.live === 'retrying' ? 'reconnecting…' : 'connecting…') : null),
            h('p', { class: 'subtitle' },
                `${armList(e).map((a) => a.label).join(' vs ')} · ${req.dimension || 'prompt'} · ${req.dimension === 'model' ? armList(e).map((a) => `${a.label}: ${modelText(armModel(e, a.index)) || DASH}`).join(' vs ') : `${model.model || ''}${model.provider ? ` (${model.provider})` : ''}`} · ${fmtInt(ds.case_count)} cases × ${fmtInt(req.repeats)} repeats · created ${fmtDate(e.created_at)}`),
            h('p', { class: 'idline small muted' }, h('code', { 'data-testid': 'exp-id' }, e.experiment_id), ' · dataset ', h('code', null, ds.dataset_id || DASH)),
            h('div', { class: 'actions', 'data-testid': 'exp-actions' },
                !terminal ? h('button', { type: 'button', class: 'danger', 'data-testid': 'exp-cancel', onclick: cancel }, 'Cancel') : null,
                h('a', { class: 'button', href: `#/experiments/${encodeURIComponent(id)}/review`, 'data-testid': 'exp-review', title: 'Review runs one at a time: p pass, f fail, s skip' }, 'Review'),
                hasJudge() ? h('a', { class: 'button', href: `#/experiments/${encodeURIComponent(id)}/pairs`, 'data-testid': 'exp-review-pairs', title: 'Review the judged pairs one at a time: c control, = tie, t treatment' }, 'Review pairs') : null,
                h('a', { class: 'button', href: `#/experiments/new?from=${encodeURIComponent(id)}`, 'data-testid': 'exp-edit' }, 'Edit as new'),
                h('span', { class: 'muted small export-label' }, 'Export runs:'), exportLink('jsonl'), exportLink('csv'),
                hasJudge() ? [h('span', { class: 'muted small export-label' }, 'judge calls:'), exportLink('jsonl', 'judgements'), exportLink('csv', 'judgements')] : null,
                terminal ? h('button', { type: 'button', class: 'danger', 'data-testid': 'exp-delete', onclick: remove }, 'Delete') : null),
            sourcePicker());
    }

    // The verdicts the analysis (banners, plots, arms, metrics) is read from; the matrix and a
    // case's runs always show the evaluator's.
    function sourcePicker() {
        const an = (st.exp && st.exp.analysis) || {};
        const shown = an.source || 'evaluator';
        const select = h('select', {
            id: 'exp-source', 'data-testid': 'exp-source', onchange: (ev) => setSource(ev.target.value),
        }, SOURCES.map((s) => h('option', { value: s.value, selected: s.value === st.source }, s.label)));
        select.value = st.source;
        return h('div', { class: 'source-pick small' },
            h('label', { for: 'exp-source' }, 'Analysis from the verdicts of'), select,
            h('span', { class: 'muted', 'data-testid': 'exp-source-note', 'data-source': shown },
                shown === 'human' ? 'reviewed runs only, with their human verdicts; the cases below show the evaluator\'s'
                    : shown === 'human_then_evaluator' ? 'the human verdict where a run has one, the evaluator\'s elsewhere; the cases below show the evaluator\'s'
                        : 'as stored when the runs were scored'));
    }

    function setSource(value) {
        if (!isSource(value) || value === st.source) return;
        st.source = value;
        const hash = `#/experiments/${id}${value === 'evaluator' ? '' : `?source=${value}`}`;
        // Replaces the address without a hashchange (the view stays mounted).
        history.replaceState(null, '', hash);
        refresh();
    }

    function renderProgress() {
        const p = (st.progress && st.progress.progress) || (st.exp && st.exp.progress) || {};
        const total = p.total_runs || 0;
        const done = p.terminal_runs || 0;
        // Skipped runs (cases never dispatched after a stop) are terminal, but not evaluated.
        const skipped = p.skipped_runs || 0;
        const pct = (v) => (total ? (v / total) * 100 : 0).toFixed(2);
        const notEvaluated = Math.max(0, done - skipped - (p.passed_runs || 0) - (p.failed_runs || 0));
        replace(els.progress,
            h('div', {
                class: 'progressbar', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': total, 'aria-valuenow': done,
                'aria-label': 'Runs finished', 'aria-valuetext': `${fmtInt(done)} of ${fmtInt(total)} runs finished${skipped ? `, ${fmtInt(skipped)} of them skipped` : ''}`,
            },
            h('span', { style: `width:${pct(done - skipped)}%` }),
            skipped ? h('span', { class: 'skipped', style: `width:${pct(skipped)}%`, title: `${fmtInt(skipped)} runs skipped` }) : null),
            h('p', { 'data-testid': 'exp-progress-text', 'data-done': done, 'data-total': total, 'data-skipped': skipped },
                `${fmtInt(done)}/${fmtInt(total)} runs finished · ${fmtInt(p.passed_runs)} met criteria · ${fmtInt(p.failed_runs)} missed criteria · ${fmtInt(notEvaluated)} not evaluated`
                + (skipped ? ` · ${fmtInt(skipped)} skipped` : '')),
            judgementsLine(p));
    }

    // progress.judgements (an event's, else the experiment's), or nothing without a judge.
    function judgementsLine(p) {
        const j = judgementsProgress(p.judgements || (st.exp && st.exp.progress && st.exp.progress.judgements));
        if (!j) return null;
        return h('p', {
            class: 'small', 'data-testid': 'exp-judgements-progress', 'data-planned': j.planned, 'data-judged': j.judged,
            'data-failed': j.failed, 'data-unjudged': j.unjudged,
        }, `Judge: ${j.text}`);
    }

    function hasJudge() {
        const e = st.exp || {};
        return Boolean((e.request && e.request.judge) || (e.comparisons || []).some((c) => c.preference) || (e.progress && e.progress.judgements));
    }

    function minCasesOf() {
        const stopping = ((st.exp && st.exp.request) || {}).stopping || {};
        return Number.isInteger(stopping.min_cases) && stopping.min_cases > 0 ? stopping.min_cases : 10;
    }

    // The stop of a sequential experiment (or its state while the anytime rule runs), or null.
    function stopElement() {
        const e = st.exp;
        const an = e.analysis || {};
        const stopped = e.stopped && typeof e.stopped === 'object' ? e.stopped : null;
        const spend = e.spend || {};
        const line = stopLine({
            stopped, cases: (e.dataset || {}).case_count, status: statusOf(), rule: an.rule, seqLength: an.sequence_length,
            minCases: minCasesOf(), budget: Boolean(spend.budget),
        });
        if (!line) return null;
        return h('p', {
            class: `exp-stop stop-${line.reason || 'running'}`, 'data-testid': 'exp-stop', 'data-reason': line.reason,
            'data-at-case': stopped ? stopped.at_case ?? '' : '', 'data-runs-saved': stopped ? stopped.runs_saved ?? '' : '',
        }, h('span', { class: 'badge' }, STOP_BADGES[line.reason] || line.reason), ' ', h('span', { 'data-testid': 'exp-stop-text' }, line.text));
    }

    function renderVerdicts() {
        const comps = st.exp.comparisons || [];
        const stop = stopElement();
        if (!comps.length) {
            replace(els.verdicts, stop, h('p', { class: 'muted', 'data-testid': 'exp-verdicts-empty' }, 'No comparison yet.'));
            return;
        }
        replace(els.verdicts, stop, comps.map((c) => {
            const b = verdictBanner(c, st.exp);
            const sources = verdictSources(c, st.exp.analysis);
            if (sources.length) return judgedBanner(c, b, sources, st.exp);
            return h('div', {
                class: `verdict-banner vb-${b.verdict}`, 'data-testid': 'exp-verdict', 'data-treatment': c.treatment,
                'data-verdict': b.verdict, 'data-partial': String(b.partial),
            },
            h('p', { class: 'vb-head' },
                h('span', { class: 'vb-word', 'data-testid': 'exp-verdict-word' }, b.verdict),
                ' ', h('span', { 'data-testid': 'exp-verdict-headline' }, b.headline),
                b.anytime ? h('span', { class: 'badge anytime', 'data-testid': 'exp-verdict-anytime', title: 'from the confidence sequence: valid however often it was looked at, and when the experiment stopped because of it' }, 'anytime-valid') : null,
                b.partial ? h('span', { class: 'badge partial' }, 'partial') : null,
                c.eligible === true ? h('span', { class: 'badge eligible', title: 'every treatment run passed and it passed at least as often as the control' }, 'eligible') : null),
            h('p', { class: 'vb-figures', 'data-testid': 'exp-verdict-figures' }, b.figures.join(' · ')),
            b.fixed ? h('p', { class: 'vb-fixed small', 'data-testid': 'exp-verdict-fixed', 'data-verdict': c.fixed_verdict || '' }, b.fixed) : null,
            b.needs ? h('p', { class: 'vb-needs', 'data-testid': 'exp-verdict-needs' }, b.needs) : null);
        }));
    }

    // ---- the judged pairs
    function renderPairs() {
        els.pairs.hidden = !hasJudge();
        if (els.pairs.hidden) return;
        replace(els.pairs, pairsCard({
            id, exp: st.exp, pairs: st.pairs, loaded: st.pairsLoaded, error: st.pairsError, more: Boolean(st.pairsNext), onMore: () => loadPairs(false),
        }));
    }

    let pairsSeq = 0;
    // The first page of judgements (first) or the next one.
    async function loadPairs(first) {
        if (!hasJudge()) return;
        const seq = ++pairsSeq;
        try {
            const res = await api.judgements(id, { limit: 100, before: first ? undefined : st.pairsNext });
            if (st.disposed || seq !== pairsSeq) return;
            st.pairs = addJudgements(first ? [] : st.pairs, res.judgements || []);
            st.pairsNext = res.next_cursor || null;
            st.pairsPages = first ? 1 : st.pairsPages + 1;
            st.pairsError = null;
        } catch (e) {
            if (st.disposed || seq !== pairsSeq) return;
            st.pairsError = `Could not load the judgements: ${e.message}`;
        }
        st.pairsLoaded = true;
        renderPairs();
    }

    // The spend against every cap of the budget, or the spend alone without one.
    function renderSpend() {
        const spend = st.exp.spend;
        els.spend.hidden = !spend;
        if (!spend) return;
        const view = spendView(spend);
        replace(els.spend,
            h('h2', null, 'Spend'),
            h('p', { class: 'spend-figures', 'data-testid': 'exp-spend-figures' }, view.figures),
            view.bars.length ? view.bars.map((b) => {
                const labelId = `exp-spend-${b.cap}`;
                const width = b.fraction === null ? 0 : Math.min(100, b.fraction * 100);
                return h('div', {
                    class: ['spend-bar', b.over && 'over'], 'data-testid': 'exp-spend-bar', 'data-cap': b.cap,
                    'data-used': b.used ?? '', 'data-max': b.max, 'data-over': String(b.over),
                },
                h('p', { class: 'spend-label small', id: labelId, 'data-testid': 'exp-spend-text' }, b.text),
                h('div', {
                    class: 'progressbar', role: 'meter', 'aria-labelledby': labelId, 'aria-valuemin': 0, 'aria-valuemax': b.max,
                    'aria-valuenow': b.used === null ? 0 : Math.min(b.used, b.max), 'aria-valuetext': b.text,
                }, h('span', { style: `width:${width.toFixed(2)}%` })));
            }) : h('p', { class: 'muted small', 'data-testid': 'exp-spend-nobudget' }, 'No budget: nothing caps the spend.'));
    }

    // ---- the confidence sequence
    function seqComparisons() {
        return ((st.exp && st.exp.comparisons) || []).filter((c) => c.sequential && typeof c.sequential === 'object');
    }

    function seqLength() {
        const an = st.exp.analysis || {};
        if (Number.isInteger(an.sequence_length)) return an.sequence_length;
        return Math.max(0, ...seqComparisons().map((c) => c.sequential.n || 0));
    }

    // Reads the case rows again when the sequence grew (or once it is final), at most every 5 s.
    function maybeLoadSequence() {
        if (st.disposed || !st.exp || st.seqLoading || !seqComparisons().length) return;
        if ((st.exp.analysis || {}).rule !== 'anytime' && !st.seqOpen) return;
        const terminal = isTerminal(statusOf());
        const len = seqLength();
        if (st.seqRows && len === st.seqLen && (st.seqFinal || !terminal)) return;
        if (st.seqError && len === st.seqLen) return; // "Try again" or a longer sequence reads again
        if (!terminal && ((st.exp.dataset || {}).case_count || 0) > SEQ_LIVE_CASES) return;
        const wait = terminal ? 0 : SEQ_EVERY_MS - (Date.now() - st.seqAt);
        if (wait > 0) {
            if (!st.seqTimer) st.seqTimer = setTimeout(() => { st.seqTimer = 0; maybeLoadSequence(); }, wait);
            return;
        }
        loadSequence();
    }

    async function loadSequence() {
        st.seqLoading = true;
        const len = seqLength();
        const final = isTerminal(statusOf());
        try {
            const rows = [];
            let before;
            let truncated = true;
            for (let page = 0; page < SEQ_PAGES; page++) {
                const res = await api.experimentCases(id, { limit: 100, before });
                if (st.disposed) return;
                for (const c of res.cases || []) {
                    if (Number.isInteger(c.seq)) rows.push({ case_id: c.case_id, seq: c.seq, arms: (c.arms || []).map((a) => ({ index: a.index, passed: a.passed, evaluated: a.evaluated })) });
                }
                before = res.next_cursor;
                if (!before) {
                    truncated = false;
                    break;
                }
            }
            st.seqRows = rows;
            st.seqTruncated = truncated;
            st.seqFinal = final;
            st.seqError = null;
        } catch (e) {
            if (st.disposed) return;
            st.seqError = `Could not read the cases of the sequence: ${e.message}`;
        } finally {
            st.seqLen = len;
            st.seqLoading = false;
            st.seqAt = Date.now();
        }
        renderSequence();
        maybeLoadSequence(); // the analysis may have moved on meanwhile
    }

    // One chart of one comparison: the recomputed CS, up to the server's n, and whether its last
    // point is the server's.
    function sequenceFigure(c, an, controlLabel) {
        const seq = c.sequential;
        const alpha2 = Number.isFinite(an.alpha_adjusted) ? an.alpha_adjusted : (an.alpha || 0.05) / Math.max(1, seqComparisons().length);
        let diffs = sequenceDiffs(st.seqRows, c.treatment);
        // Cases read after the analysis: draw what the analysis had seen.
        if (Number.isInteger(seq.n) && diffs.length > seq.n) diffs = diffs.slice(0, seq.n);
        const points = confidenceSequence(diffs.map((x) => x.d), alpha2);
        const last = points[points.length - 1] || null;
        const serverN = Number.isInteger(seq.n) ? seq.n : 0;
        const match = last ? last.n === serverN && Number.isFinite(seq.low) && Number.isFinite(seq.high)
            && Math.abs(last.low - seq.low) <= SEQ_TOLERANCE && Math.abs(last.high - seq.high) <= SEQ_TOLERANCE : serverN === 0;
        let note;
        if (!last) note = 'No case in the sequence yet.';
        else if (match) note = `Last point [${fmtPp(last.low)}, ${fmtPp(last.high)}] at case ${last.n}, as evald computed it.`;
        else if (last.n < serverN) note = `Drawn to case ${last.n} of ${serverN}: the cases were read before the analysis; the chart follows on the next read.`;
        else note = `Recomputed [${fmtPp(last.low)}, ${fmtPp(last.high)}] at case ${last.n} differs from evald's [${fmtPp(seq.low)}, ${fmtPp(seq.high)}] at case ${serverN}.`;
        return h('figure', {
            class: 'chart cs-chart', 'data-testid': 'exp-seq-chart', 'data-treatment': c.treatment, 'data-verdict': seq.verdict || '',
            'data-n': last ? last.n : 0, 'data-low': last ? last.low : '', 'data-high': last ? last.high : '',
            'data-server-n': serverN, 'data-server-low': seq.low ?? '', 'data-server-high': seq.high ?? '', 'data-decided-at': seq.decided_at ?? '',
            'data-match': String(match),
        },
        h('figcaption', null, `${c.label} − ${controlLabel}: pass-rate difference, ${ciLevel(an)} anytime-valid confidence sequence`),
        sequenceChart({
            points, label: `${c.label} − ${controlLabel}`, verdict: seq.verdict, minEffect: an.min_effect || 0, minCases: minCasesOf(),
            decidedAt: Number.isInteger(seq.decided_at) ? seq.decided_at : null, level: ciLevel(an),
        }),
        h('p', { class: ['small', match || !last ? 'muted' : 'warn-text'], 'data-testid': 'exp-seq-note' }, note));
    }

    function renderSequence() {
        const comps = seqComparisons();
        els.sequence.hidden = !comps.length;
        if (!comps.length) {
            replace(els.sequence);
            return;
        }
        const an = st.exp.analysis || {};
        const anytime = an.rule === 'anytime';
        const controlLabel = (armList(st.exp)[0] || {}).label || 'control';
        let body;
        if (st.seqError) {
            body = h('p', { class: 'error-text', 'data-testid': 'exp-seq-error' }, st.seqError, ' ',
                h('button', { type: 'button', class: 'small', onclick: () => { st.seqError = null; st.seqLen = -1; renderSequence(); maybeLoadSequence(); } }, 'Try again'));
        }
        else if (!st.seqRows) {
            const later = !isTerminal(statusOf()) && ((st.exp.dataset || {}).case_count || 0) > SEQ_LIVE_CASES;
            body = h('p', { class: 'muted' }, later ? 'Drawn once the experiment ends (a large dataset is not re-read while it runs).' : 'Reading the cases of the sequence…');
        } else {
            body = h('div', { class: 'cs-grid' }, comps.map((c) => sequenceFigure(c, an, controlLabel)),
                st.seqTruncated ? h('p', { class: 'warn-text small' }, `Only the first ${fmtInt(SEQ_PAGES * 100)} cases were read.`) : null);
        }
        const legend = h('p', { class: 'chart-legend' },
            'Case by case, in the order the cases finished (seq): the band holds every pass-rate difference still compatible with the cases so far, at any n at once, and only narrows. ',
            'Dashed: 0; shaded: ±min_effect; dotted upright: min_cases; marked: the case at which it was decided.',
            st.source !== 'evaluator' ? ' It is drawn from the evaluator\'s verdicts, as the cases below.' : '');
        if (anytime) {
            replace(els.sequence, h('h2', null, 'Confidence sequence'), legend, body);
            return;
        }
        // The fixed rule: information only, read when opened.
        const details = h('details', {
            class: 'cs-details', 'data-testid': 'exp-sequence-details', open: st.seqOpen,
            ontoggle: (ev) => {
                if (ev.target.open === st.seqOpen) return;
                st.seqOpen = ev.target.open;
                if (st.seqOpen) {
                    renderSequence();
                    maybeLoadSequence();
                }
            },
        }, h('summary', null, h('strong', null, 'Confidence sequence'), h('span', { class: 'muted' }, ' — information only: under the fixed rule the verdict is the fixed-sample one')),
        st.seqOpen ? [legend, body] : null);
        replace(els.sequence, details);
    }

    function renderForest() {
        replace(els.forest, h('h2', null, 'Forest plot'), forestPlot(st.exp));
    }

    function renderArms() {
        const arms = st.exp.arms || [];
        const alpha = (st.exp.analysis && st.exp.analysis.alpha) || 0.05;
        // Each arm's model (its own with dimension model, else the shared one) and what a run
        // of it cost and used: the median over the cases of their per-case medians.
        replace(els.arms, h('h2', null, 'Arms'),
            h('div', { class: 'table-wrap' }, h('table', { class: 'report', 'data-testid': 'exp-arms' },
                h('caption', null, 'Cost and tokens per run: the median over the cases of each case\'s median, at the arm\'s model\'s price.'),
                h('thead', null, h('tr', null, ['Arm and model', 'Pass rate (case mean)', 'Passed runs', `Wilson ${(100 * (1 - alpha)).toFixed(0)}%`, 'Cases', 'Flaky cases', 'Ran first', 'Ran later', 'Cost per run', 'Tokens per run'].map((t) => h('th', { scope: 'col' }, t)))),
                h('tbody', null, arms.map((a) => {
                    const p = a.pooled || {};
                    const o = a.order || {};
                    const med = a.medians || {};
                    const m = armModel(st.exp, a.index);
                    const opts = m ? optionsText(m.options) : '';
                    const rate = (x, n) => (n ? `${fmtInt(x)}/${fmtInt(n)} (${fmtPct(x / n)})` : DASH);
                    return h('tr', { 'data-testid': 'exp-arm-row', 'data-arm': a.index },
                        h('th', { scope: 'row' }, h('span', { class: `swatch ${a.role === 'control' ? 'swatch-a' : 'swatch-b'}` }), ` ${a.label}`, h('small', { class: 'muted' }, ` ${a.role}`),
                            h('span', { class: 'arm-model small', 'data-testid': `exp-arm-model-${a.index}`, 'data-model': m ? m.model : '', 'data-provider': m ? m.provider : '' },
                                m ? h('code', null, m.model) : DASH, m && m.provider ? h('span', { class: 'muted' }, ` ${m.provider}`) : null),
                            opts ? h('small', { class: 'muted block', 'data-testid': `exp-arm-options-${a.index}` }, opts) : null),
                        h('td', { 'data-testid': `exp-arm-pass-${a.index}`, 'data-value': a.pass_rate ?? '' }, fmtPct(a.pass_rate)),
                        h('td', null, `${fmtInt(p.passed)}/${fmtInt(p.evaluated)}`),
                        h('td', null, Number.isFinite(p.wilson_low) ? `${fmtPct(p.wilson_low)} – ${fmtPct(p.wilson_high)}` : DASH),
                        h('td', null, fmtInt(a.evaluated_cases)),
                        h('td', { 'data-testid': `exp-arm-flaky-${a.index}` }, fmtInt(a.flaky_cases)),
                        h('td', null, rate(o.first_passed, o.first_runs)),
                        h('td', null, rate(o.later_passed, o.later_runs)),
                        h('td', { 'data-testid': `exp-arm-cost-${a.index}`, 'data-value': med.cost_usd ?? '' }, Number.isFinite(med.cost_usd) ? fmtUsd(med.cost_usd) : Object.keys(med).length ? 'no price' : DASH),
                        h('td', { 'data-testid': `exp-arm-tokens-${a.index}`, 'data-value': med.total_tokens ?? '' }, fmtInt(med.total_tokens)));
                })))));
    }

    function renderMetrics() {
        const comps = st.exp.comparisons || [];
        const tables = comps.map((c) => {
            const rows = metricEntries(c.metrics).filter(([k]) => k);
            if (!rows.length) return null;
            return h('div', { class: 'table-wrap' }, h('table', { class: 'report', 'data-testid': 'exp-metrics', 'data-treatment': c.treatment },
                h('caption', null, `${c.label} − control, median per case then mean over the cases; lower is better for every metric`),
                h('thead', null, h('tr', null, [`${c.label} − control`, 'Delta', 'Interval', 'Relative', 'Cases'].map((t) => h('th', { scope: 'col' }, t)))),
                h('tbody', null, rows.map(([k, m]) => {
                    const [label, kind] = METRIC_LABELS[k] || [k, 'count'];
                    const verdict = Number.isFinite(m.ci_high) && m.ci_high < 0 ? 'better' : Number.isFinite(m.ci_low) && m.ci_low > 0 ? 'worse' : '';
                    return h('tr', { 'data-metric': k },
                        h('th', { scope: 'row' }, label),
                        h('td', { class: ['delta', verdict], 'data-value': m.delta ?? '' }, signed(m.delta, kind)),
                        h('td', null, Number.isFinite(m.ci_low) ? `[${signed(m.ci_low, kind)}, ${signed(m.ci_high, kind)}]` : DASH),
                        h('td', null, Number.isFinite(m.relative) ? `${m.relative > 0 ? '+' : m.relative < 0 ? '−' : ''}${fmtPct(Math.abs(m.relative))}` : DASH),
                        h('td', null, fmtInt(m.cases)));
                }))));
        }).filter(Boolean);
        els.metrics.hidden = !tables.length;
        const plots = metricForests(comps);
        replace(els.metrics, h('h2', null, 'Cost and efficiency'),
            plots.length ? h('div', { class: 'forest-grid' }, plots) : null, tables);
    }

    // ---- matrix
    function renderMatrix() {
        const arms = armList(st.exp);
        const sequential = ((st.exp.analysis || {}).rule === 'anytime');
        const filterButton = (value, label) => h('button', {
            type: 'button', class: ['small', st.filter === value && 'primary'], 'aria-pressed': String(st.filter === value),
            'data-testid': `exp-filter-${value || 'all'}`, onclick: () => { if (st.filter !== value) { st.filter = value; loadCases(true); } },
        }, label);
        let body;
        if (st.caseError) body = h('p', { class: 'error-text', 'data-testid': 'exp-cases-error' }, st.caseError);
        else if (!st.casesLoaded) body = h('p', { class: 'muted' }, 'Loading cases…');
        else if (!st.cases.length) {
            body = h('p', { class: 'muted', 'data-testid': 'exp-cases-empty' },
                st.filter === 'flaky' ? 'No flaky case: every arm\'s repeats agree.' : st.filter === 'disagree' ? 'No case where the arms\' pass rates differ.' : 'No cases yet.');
        } else {
            body = h('div', { class: 'table-wrap' }, h('table', { class: 'report matrix', 'data-testid': 'exp-matrix-table' },
                h('caption', null, `passed/evaluated runs per arm; ~ marks an arm whose repeats disagree (flaky)${sequential ? '; #n: the case\'s place in the sequence; skipped: never run after the stop' : ''}. Click a case to see its runs.`),
                h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Case'), h('th', { scope: 'col' }, 'Variables'),
                    arms.map((a) => h('th', { scope: 'col' }, a.label)))),
                h('tbody', null, st.cases.map((c) => {
                    const byIndex = new Map((c.arms || []).map((a) => [a.index, a]));
                    const open = () => selectCase(c);
                    const skipped = c.skipped === true;
                    return h('tr', {
                        class: ['case-row', c.flaky && 'is-flaky', skipped && 'is-skipped', st.selected && st.selected.case_id === c.case_id && 'is-selected'],
                        'data-testid': 'exp-case-row', 'data-case-id': c.case_id, 'data-flaky': String(Boolean(c.flaky)), 'data-skipped': String(skipped),
                        'data-seq': c.seq ?? '', 'data-dispatch-index': c.dispatch_index ?? '', tabindex: 0,
                        onclick: open, onkeydown: (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); open(); } },
                    },
                    h('th', { scope: 'row' }, h('span', { class: 'case-id' }, c.case_id),
                        c.flaky ? h('span', { class: 'badge flaky', title: 'the repeats of an arm disagree' }, 'flaky') : null,
                        skipped ? h('span', { class: 'badge skipped', title: 'never run: the experiment stopped before this case' }, 'skipped') : null,
                        Number.isInteger(c.seq) && sequential ? h('small', { class: 'muted case-seq', title: `${ordinal(c.seq)} case in the sequence; dispatched ${ordinal(c.dispatch_index)}` }, ` #${c.seq}`) : null),
                    h('td', { class: 'vars' }, previewVars(c.vars)),
                    arms.map((a) => {
                        if (skipped) {
                            return h('td', { class: 'cell skipped', 'data-testid': 'exp-cell', 'data-arm': a.index, 'data-passed': 0, 'data-evaluated': 0, 'data-skipped': 'true', title: `${a.label}: not run (skipped)` }, 'skipped');
                        }
                        const cell = matrixCell(byIndex.get(a.index));
                        return h('td', {
                            class: ['cell', cell.flaky && 'flaky', cell.pending && 'pending', cell.rate === 1 && 'all', cell.rate === 0 && 'none'],
                            'data-testid': 'exp-cell', 'data-arm': a.index, 'data-passed': (byIndex.get(a.index) || {}).passed ?? 0,
                            'data-evaluated': (byIndex.get(a.index) || {}).evaluated ?? 0,
                            title: `${a.label}: ${cell.text} passed${cell.pending ? ` (${cell.planned} planned)` : ''}${cell.flaky ? ', flaky' : ''}`,
                        }, cell.text, cell.flaky ? h('span', { class: 'flaky-mark', 'aria-label': 'flaky' }, ' ~') : null);
                    }));
                }))));
        }
        replace(els.matrix,
            h('div', { class: 'picker-head' }, h('h2', null, 'Cases'),
                h('div', { class: 'actions', role: 'group', 'aria-label': 'Filter cases' },
                    filterButton('', 'All'), filterButton('flaky', 'Flaky'), filterButton('disagree', 'Arms disagree'))),
            body,
            st.next ? h('p', null, h('button', { type: 'button', 'data-testid': 'exp-cases-more', onclick: () => loadCases(false) }, 'Load more cases')) : null);
    }

    function ordinal(n) {
        if (!Number.isInteger(n)) return '—';
        const s = n % 100 >= 11 && n % 100 <= 13 ? 'th' : ['th', 'st', 'nd', 'rd'][n % 10] || 'th';
        return `${n}${s}`;
    }

    function previewVars(vars) {
        const text = vars && typeof vars === 'object' ? Object.entries(vars).map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' · ') : '';
        return text.length > 90 ? `${text.slice(0, 89)}…` : text;
    }

    let casesSeq = 0;
    async function loadCases(first) {
        const seq = ++casesSeq;
        if (first) {
            st.casesLoaded = false;
            renderMatrix();
        }
        try {
            const res = await api.experimentCases(id, { filter: st.filter, limit: 100, before: first ? undefined : st.next });
            if (st.disposed || seq !== casesSeq) return;
            st.cases = first ? res.cases || [] : [...st.cases, ...(res.cases || [])];
            st.next = res.next_cursor || null;
            st.caseError = null;
        } catch (e) {
            if (st.disposed || seq !== casesSeq) return;
            st.caseError = `Could not load the cases: ${e.message}`;
        }
        st.casesLoaded = true;
        st.lastMatrix = Date.now();
        renderMatrix();
    }

    // Re-reads the first page in place while running (only when no later page is loaded).
    async function refreshFirstPage() {
        if (st.cases.length > 100) return;
        const seq = ++casesSeq;
        try {
            const res = await api.experimentCases(id, { filter: st.filter, limit: 100 });
            if (st.disposed || seq !== casesSeq) return;
            st.cases = res.cases || [];
            st.next = res.next_cursor || null;
            st.casesLoaded = true;
            st.caseError = null;
            st.lastMatrix = Date.now();
            renderMatrix();
        } catch {
            // the next refresh tries again
        }
    }

    // ---- one case's runs
    async function selectCase(c) {
        st.selected = c;
        st.runs = null;
        st.runsError = null;
        renderMatrix();
        renderCase();
        await loadRuns();
        els.caseView.scrollIntoView({ block: 'nearest' });
    }

    async function loadRuns() {
        const c = st.selected;
        if (!c) return;
        try {
            let all = [];
            let before;
            for (let page = 0; page < 20; page++) {
                const res = await api.experimentRuns(id, c.case_id, { limit: 100, before });
                all = all.concat(res.runs || []);
                before = res.next_cursor;
                if (!before) break;
            }
            if (st.disposed || st.selected !== c) return;
            st.runs = all;
        } catch (e) {
            if (st.disposed || st.selected !== c) return;
            st.runsError = `Could not load the runs: ${e.message}`;
        }
        renderCase();
    }

    function renderCase() {
        const c = st.selected;
        els.caseView.hidden = !c;
        if (!c) return;
        const runView = { exp: st.exp, caseRow: c, openConversations: st.openConversations, toast: ctx.toast };
        const arms = armList(st.exp);
        let body;
        if (st.runsError) body = h('p', { class: 'error-text' }, st.runsError);
        else if (!st.runs) body = h('p', { class: 'muted' }, 'Loading runs…');
        else {
            const byArm = new Map(arms.map((a) => [a.index, []]));
            for (const r of [...st.runs].sort((x, y) => (x.repeat - y.repeat) || (x.position - y.position))) {
                if (!byArm.has(r.arm)) byArm.set(r.arm, []);
                byArm.get(r.arm).push(r);
            }
            const controlRuns = byArm.get(0) || [];
            body = h('div', { class: 'exp-case-cols', style: `grid-template-columns: repeat(${Math.max(1, byArm.size)}, minmax(14rem, 1fr))` },
                [...byArm.entries()].map(([arm, runs]) => {
                    const a = arms.find((x) => x.index === arm) || { label: `arm ${arm}` };
                    const m = (st.exp.request || {}).dimension === 'model' ? armModel(st.exp, arm) : null;
                    return h('div', { class: 'exp-case-arm', 'data-testid': 'exp-case-arm', 'data-arm': arm },
                        h('h3', null, a.label, h('small', { class: 'muted' }, arm === 0 ? ' control' : ' treatment')),
                        m ? h('p', { class: 'small muted', 'data-testid': 'exp-case-arm-model' }, modelText(m), optionsText(m.options) ? ` · ${optionsText(m.options)}` : '') : null,
                        runs.length ? runs.map((r) => runBlock(r, controlRuns.find((x) => x.repeat === r.repeat) || controlRuns[0], runView)) : h('p', { class: 'muted small' }, 'no runs yet'));
                }));
        }
        replace(els.caseView,
            h('div', { class: 'picker-head' },
                h('h2', { 'data-testid': 'exp-case-title' }, `Case ${c.case_id}`),
                h('button', { type: 'button', class: 'small ghost', 'data-testid': 'exp-case-close', onclick: () => { st.selected = null; renderCase(); renderMatrix(); } }, 'Close')),
            h('dl', { class: 'kv' },
                h('dt', null, 'variables'), h('dd', null, h('code', null, JSON.stringify(c.vars ?? {}))),
                h('dt', null, 'expected'), h('dd', null, h('code', null, JSON.stringify(c.expected ?? null)))),
            body);
    }

    // ---- actions
    async function cancel() {
        try {
            await api.cancelExperiment(id);
            ctx.toast('Cancelling the experiment');
            scheduleRefresh(0);
        } catch (e) {
            ctx.toast(`Could not cancel: ${e.message}`, 'error');
        }
    }

    async function remove() {
        const ok = await ctx.confirm('Delete this experiment?', 'Its runs and analysis are deleted; the dataset stays.', 'Delete');
        if (!ok) return;
        try {
            await api.removeExperiment(id);
            ctx.toast('Experiment deleted');
            ctx.navigate('#/experiments');
        } catch (e) {
            ctx.toast(`Could not delete: ${e.message}`, 'error');
        }
    }

    // ---- live updates
    function renderAnalysis() {
        renderHead();
        renderProgress();
        renderSpend();
        renderVerdicts();
        renderSequence();
        maybeLoadSequence();
        renderForest();
        renderArms();
        renderMetrics();
        if (!st.pairsLoaded) renderPairs();
    }

    async function refresh() {
        const seq = ++st.readSeq;
        try {
            const e = await api.experiment(id, st.source);
            if (st.disposed || seq !== st.readSeq) return;
            st.exp = e;
            st.progress = null;
            renderAnalysis();
            if (isTerminal(e.status)) {
                closeStream();
                loadCases(true);
                loadPairs(true);
                if (st.selected) loadRuns();
            }
        } catch (e) {
            if (!st.disposed && seq === st.readSeq) ctx.toast(`Could not refresh the experiment: ${e.message}`, 'error');
        }
    }

    function scheduleRefresh(delay = 1500) {
        if (st.refreshTimer) return;
        st.refreshTimer = setTimeout(() => {
            st.refreshTimer = 0;
            refresh();
        }, delay);
    }

    function scheduleMatrix() {
        if (st.matrixTimer) return;
        const wait = Math.max(0, 4000 - (Date.now() - st.lastMatrix));
        st.matrixTimer = setTimeout(() => {
            st.matrixTimer = 0;
            refreshFirstPage();
            if (st.pairsPages <= 1) loadPairs(true);
            if (st.selected) loadRuns();
        }, wait);
    }

    function closeStream() {
        if (st.es) {
            st.es.close();
            st.es = null;
        }
        clearTimeout(st.retryTimer);
    }

    function parse(ev) {
        try {
            return JSON.parse(ev.data);
        } catch {
            return null;
        }
    }

    function onProgress(ev) {
        const p = parse(ev);
        if (!p) return;
        st.progress = p;
        if (st.exp && p.status) st.exp.status = p.status;
        renderProgress();
        if (p.status && isTerminal(p.status)) {
            closeStream();
            clearTimeout(st.refreshTimer);
            st.refreshTimer = 0;
            refresh();
            return;
        }
        renderHead();
        scheduleRefresh();
        scheduleMatrix();
    }

    function openStream() {
        if (st.disposed || st.es || isTerminal(statusOf())) return;
        const es = new EventSource(experimentEventsUrl(id));
        st.es = es;
        es.addEventListener('open', () => {
            st.retry = 0;
            st.live = 'open';
            renderHead();
        });
        es.addEventListener('progress', onProgress);
        es.addEventListener('status', onProgress);
        es.addEventListener('error', () => {
            if (st.disposed || st.es !== es) return;
            st.live = 'retrying';
            if (es.readyState === EventSource.CLOSED) {
                // Refused or ended early: catch up with one read (polling while the stream is
                // away), then try the stream again with backoff.
                st.es = null;
                const delay = Math.min(5000, 500 * 2 ** st.retry++);
                st.retryTimer = setTimeout(async () => {
                    await refresh();
                    if (!isTerminal(statusOf())) {
                        refreshFirstPage();
                        openStream();
                    }
                }, delay);
            }
            if (st.exp) renderHead();
        });
    }

    const firstSeq = ++st.readSeq;
    api.experiment(id, st.source).then((e) => {
        if (st.disposed || firstSeq !== st.readSeq) return;
        st.exp = e;
        document.title = `${e.name || 'Experiment'} · evald`;
        renderAnalysis();
        loadCases(true);
        loadPairs(true);
        openStream();
    }).catch((e) => {
        if (st.disposed) return;
        const notFound = e instanceof ApiError && e.status === 404;
        replace(root, h('div', { class: 'page', 'data-testid': 'exp-detail-error' },
            h('h1', null, notFound ? 'Experiment not found' : 'Could not load the experiment'),
            h('p', null, notFound ? `There is no experiment ${id}; it may have been deleted.` : e.message),
            h('p', null, h('a', { href: '#/experiments' }, 'Back to the experiments'))));
    });

    return {
        dispose() {
            st.disposed = true;
            closeStream();
            clearTimeout(st.refreshTimer);
            clearTimeout(st.matrixTimer);
            clearTimeout(st.seqTimer);
        },
    };
}
