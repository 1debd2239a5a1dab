// The Sessions view (#/sessions, #/sessions?ids=a,b&baseline=a): start an ad-hoc session, pick
// 2–5 sessions (ad-hoc ones, any evaluation's runs, or any session id) and one baseline, and
// watch the comparison matrix grouped by efficiency, reliability and orchestration, with each
// delta against the baseline coloured better or worse. The matrix follows the comparison's
// Server-Sent Events stream (no polling) until every session is terminal. mountSessions() owns
// one EventSource; dispose() closes it. The selection lives in the URL, so a comparison can be
// reloaded or shared.
import { api, ApiError, compareEventsUrl } from './api.js';
import { allTerminal, checkSelection, deltaText, lifecycleLabel, matrix, parseSelection } from './compare.js';
import { h, replace } from './dom.js';
import { DASH, fmtAgo, fmtDate, fmtInt, fmtValue, shortId } from './format.js';

const FIELDS = ['title', 'model', 'provider', 'system_prompt', 'prompt'];

function sessionTitle(s) {
    return s.title || `session ${shortId(s.session_id).slice(4) || s.session_id}`;
}

// root: <main>; ctx: app context; params: URLSearchParams of the route. Returns {dispose}.
export function mountSessions(root, ctx, params) {
    const initial = parseSelection(params);
    const st = {
        sessions: [],
        evaluations: [],
        runs: [], // runs of the chosen evaluation
        evalId: '',
        picked: [...initial.ids],
        labels: new Map(), // titles of picked ids that are not in the session list (evaluation runs)
        baseline: initial.baseline,
        cmp: null,
        es: null,
        retry: 0,
        retryTimer: 0,
        live: 'idle',
        disposed: false,
    };
    const els = {
        form: h('form', { class: 'card session-form', 'data-testid': 'session-form', novalidate: true }),
        picker: h('section', { class: 'card picker', 'data-testid': 'session-picker', 'aria-label': 'Pick sessions' }),
        comparison: h('section', { class: 'card', 'data-testid': 'comparison', 'aria-label': 'Comparison' }),
    };
    replace(root, h('div', { class: 'page sessions-page', 'data-testid': 'sessions-view' },
        h('h1', null, 'Sessions'),
        h('p', { class: 'lead muted' }, 'Compare live objective metrics of 2–5 sessions: ad-hoc agent sessions and the runs of any evaluation. Deltas are against the baseline you pick.'),
        els.form, els.picker, els.comparison,
        h('p', { class: 'footnote' }, 'Efficiency metrics are descriptive and do not select a winner.')));

    // ---- new session form
    const inputs = {
        title: h('input', { id: 'ses-title', 'data-testid': 'session-field-title', placeholder: 'optional', maxlength: 200 }),
        model: h('input', { id: 'ses-model', 'data-testid': 'session-field-model', placeholder: 'e.g. gpt-5-mini', required: true }),
        provider: h('input', { id: 'ses-provider', 'data-testid': 'session-field-provider', placeholder: 'inferred from the model when empty' }),
        system_prompt: h('textarea', { id: 'ses-system_prompt', 'data-testid': 'session-field-system_prompt', rows: 2, placeholder: 'none' }),
        prompt: h('textarea', { id: 'ses-prompt', 'data-testid': 'session-field-prompt', rows: 3, required: true }),
    };
    const formError = h('p', { class: 'error-text', 'data-testid': 'session-form-error', role: 'alert' });
    const field = (name, label, hint) => h('div', { class: 'field' },
        h('label', { for: `ses-${name}` }, label), inputs[name], hint ? h('p', { class: 'hint' }, hint) : null);
    const startButton = h('button', { type: 'submit', class: 'primary', 'data-testid': 'session-start' }, 'Start session');
    replace(els.form,
        h('h2', null, 'New session'),
        h('div', { class: 'row2' }, field('model', 'Model'), field('provider', 'Provider')),
        field('title', 'Title'),
        field('system_prompt', 'System prompt', 'Sent as given (override strategy); leave empty for none.'),
        field('prompt', 'Prompt', 'The first user message; the turn starts at once.'),
        formError,
        h('div', { class: 'actions' }, startButton));
    api.models().then((res) => {
        const first = (res.models || []).find((m) => m.available);
        if (first && !inputs.model.value) {
            inputs.model.value = first.id; // ModelV1 names a model by `id`
            inputs.provider.value = first.provider;
        }
    }).catch(() => {});

    els.form.addEventListener('submit', async (e) => {
        e.preventDefault();
        formError.textContent = '';
        for (const n of FIELDS) inputs[n].removeAttribute('aria-invalid');
        const v = Object.fromEntries(FIELDS.map((n) => [n, inputs[n].value]));
        const problems = [];
        if (!v.model.trim()) problems.push(['model', 'model.model cannot be empty']);
        if (!v.prompt.trim()) problems.push(['prompt', 'prompt cannot be empty']);
        if (problems.length) {
            for (const [n] of problems) inputs[n].setAttribute('aria-invalid', 'true');
            formError.textContent = problems.map((p) => p[1]).join('; ');
            return;
        }
        const body = { model: { model: v.model.trim() }, prompt: v.prompt };
        if (v.provider.trim()) body.model.provider = v.provider.trim();
        if (v.system_prompt) {
            body.system_prompt = v.system_prompt;
            body.model.system_prompt_strategy = 'override';
        }
        if (v.title.trim()) body.title = v.title.trim();
        startButton.disabled = true;
        try {
            const s = await api.createSession(body);
            ctx.toast('Session started');
            inputs.prompt.value = '';
            inputs.title.value = '';
            st.sessions = [s, ...st.sessions.filter((x) => x.session_id !== s.session_id)];
            if (!st.picked.includes(s.session_id) && st.picked.length < 5) pick(s.session_id, true);
            else renderPicker();
        } catch (err) {
            const detail = err instanceof ApiError ? err.detail : String(err);
            const name = FIELDS.find((n) => detail.startsWith(n === 'model' || n === 'provider' ? `model.${n}` : n));
            if (name) inputs[name].setAttribute('aria-invalid', 'true');
            formError.textContent = detail;
        } finally {
            startButton.disabled = false;
        }
    });

    // ---- picker
    const compareError = h('p', { class: 'error-text', 'data-testid': 'compare-error', role: 'alert' });
    const manual = h('input', { 'data-testid': 'add-session-id', placeholder: 'ses_… or eval_…_c_1', 'aria-label': 'Session id' });

    function pick(id, on) {
        if (on && !st.picked.includes(id)) st.picked.push(id);
        if (!on) st.picked = st.picked.filter((x) => x !== id);
        if (!st.picked.includes(st.baseline)) st.baseline = st.picked[0] || null;
        compareError.textContent = '';
        renderPicker();
    }

    function pickBox(id, label) {
        return h('input', {
            type: 'checkbox', 'data-testid': `pick-${id}`, checked: st.picked.includes(id), 'aria-label': `Compare ${label}`,
            onchange: (e) => pick(id, e.target.checked),
        });
    }

    function sessionRow(s) {
        return h('li', { class: 'pick-row', 'data-session-id': s.session_id },
            h('label', null, pickBox(s.session_id, sessionTitle(s)),
                h('span', { class: `badge status ${s.status}`, 'data-testid': 'session-status' }, s.status),
                h('span', { class: 'pick-title' }, sessionTitle(s)),
                h('span', { class: 'muted small' }, ` ${(s.model && s.model.model) || ''} · ${fmtInt(s.message_count)} ${s.message_count === 1 ? 'message' : 'messages'} · `,
                    h('time', { title: fmtDate(s.created_at) }, fmtAgo(s.created_at)))));
    }

    function runRow(r) {
        st.labels.set(r.session_id, `${r.role} · run ${r.iteration}`);
        return h('li', { class: 'pick-row', 'data-session-id': r.session_id },
            h('label', null, pickBox(r.session_id, r.session_id),
                h('span', { class: `badge status ${r.status}` }, r.status),
                h('span', { class: 'pick-title' }, `${r.role} · run ${r.iteration}`),
                h('code', { class: 'small' }, ` ${r.session_id}`)));
    }

    async function chooseEvaluation(id) {
        st.evalId = id;
        st.runs = [];
        renderPicker();
        if (!id) return;
        try {
            const ev = await api.get(id);
            if (st.disposed || st.evalId !== id) return;
            st.runs = (ev.progress && ev.progress.runs) || [];
        } catch (e) {
            ctx.toast(`Could not load the evaluation: ${e.message}`, 'error');
        }
        renderPicker();
    }

    function selectionList() {
        if (!st.picked.length) return h('p', { class: 'muted small' }, 'Nothing picked yet.');
        const known = new Map([...st.labels, ...st.sessions.map((s) => [s.session_id, sessionTitle(s)])]);
        return h('ol', { class: 'selection', 'data-testid': 'selection' }, st.picked.map((id) => h('li', { 'data-session-id': id },
            h('label', { class: 'baseline-pick' },
                h('input', {
                    type: 'radio', name: 'baseline', value: id, 'data-testid': `baseline-${id}`, checked: st.baseline === id,
                    onchange: () => {
                        st.baseline = id;
                        compareError.textContent = '';
                    },
                }), ' baseline'),
            known.has(id) ? [h('span', { class: 'pick-title' }, known.get(id)), ' '] : null, h('code', { class: 'small muted' }, id),
            h('button', { type: 'button', class: 'small ghost', 'aria-label': `Remove ${id}`, onclick: () => pick(id, false) }, 'Remove'))));
    }

    function renderPicker() {
        const evalSelect = h('select', {
            'data-testid': 'eval-select', 'aria-label': 'Evaluation',
            onchange: (e) => chooseEvaluation(e.target.value),
        }, h('option', { value: '' }, 'Runs of an evaluation…'),
        st.evaluations.map((ev) => h('option', { value: ev.evaluation_id, selected: ev.evaluation_id === st.evalId },
            `${ev.control_label || 'control'} vs ${ev.treatment_label || 'treatment'} · ${ev.status} · ${shortId(ev.evaluation_id)}`)));
        replace(els.picker,
            h('div', { class: 'picker-head' },
                h('h2', null, 'Pick 2–5 sessions and a baseline'),
                h('button', { type: 'button', class: 'small ghost', 'data-testid': 'sessions-refresh', onclick: loadLists }, 'Refresh')),
            h('div', { class: 'picker-cols' },
                h('div', null,
                    h('h3', null, 'Ad-hoc sessions'),
                    st.sessions.length
                        ? h('ul', { class: 'pick-list', 'data-testid': 'session-list' }, st.sessions.map(sessionRow))
                        : h('p', { class: 'muted small', 'data-testid': 'session-list-empty' }, 'No sessions yet: start one above.'),
                    h('h3', null, 'Evaluation runs'),
                    evalSelect,
                    st.runs.length ? h('ul', { class: 'pick-list', 'data-testid': 'eval-runs' }, st.runs.map(runRow)) : null,
                    h('div', { class: 'add-id' }, manual,
                        h('button', {
                            type: 'button', 'data-testid': 'add-session', onclick: () => {
                                const id = manual.value.trim();
                                if (id) pick(id, true);
                                manual.value = '';
                            },
                        }, 'Add'))),
                h('div', null,
                    h('h3', null, `Selected (${st.picked.length})`),
                    selectionList(),
                    compareError,
                    h('div', { class: 'actions' },
                        h('button', { type: 'button', class: 'primary', 'data-testid': 'compare-button', onclick: submitSelection }, 'Compare')))));
    }

    function submitSelection() {
        const problem = checkSelection(st.picked, st.baseline);
        if (problem) {
            compareError.textContent = problem;
            return;
        }
        const q = new URLSearchParams({ ids: st.picked.join(','), baseline: st.baseline });
        const hash = `#/sessions?${q.toString().replace(/%2C/g, ',')}`;
        if (location.hash === hash) startComparison();
        else ctx.navigate(hash);
    }

    async function loadLists() {
        try {
            const [ses, evs] = await Promise.all([api.sessions({ limit: 50 }), api.list({ limit: 20 })]);
            if (st.disposed) return;
            st.sessions = ses.sessions || [];
            st.evaluations = evs.evaluations || [];
        } catch (e) {
            if (!st.disposed) ctx.toast(`Could not load the sessions: ${e.message}`, 'error');
        }
        renderPicker();
    }

    // ---- comparison matrix
    function renderComparison() {
        const cmp = st.cmp;
        if (!cmp) {
            replace(els.comparison, h('h2', null, 'Comparison'),
                h('p', { class: 'muted', 'data-testid': 'compare-empty' }, 'Pick 2–5 sessions and a baseline, then Compare.'));
            return;
        }
        const items = cmp.sessions || [];
        const done = allTerminal(cmp);
        const groups = matrix(cmp);
        const head = h('tr', null, h('th', { scope: 'col' }, 'Metric'), items.map((it, i) => {
            const life = lifecycleLabel(it);
            return h('th', {
                scope: 'col', class: ['cmp-col', it.session_id === cmp.baseline_session_id && 'is-baseline'],
                'data-testid': `cmp-col-${i}`, 'data-session-id': it.session_id, 'data-lifecycle': life,
                'data-partial': String(Boolean(it.lifecycle && it.lifecycle.partial)),
            },
            h('span', { class: 'cmp-title' }, it.title || shortId(it.session_id)),
            h('span', { class: 'cmp-meta' },
                h('span', { class: 'badge' }, it.kind === 'evaluation_run' ? 'eval run' : 'session'),
                ' ', h('span', { class: `badge life ${life}`, 'data-testid': `cmp-lifecycle-${i}` }, life),
                it.session_id === cmp.baseline_session_id ? [' ', h('span', { class: 'badge baseline' }, 'baseline')] : null),
            h('code', { class: 'cmp-id small muted' }, it.session_id),
            (it.errors || []).length ? h('span', { class: 'error-text small', 'data-testid': `cmp-errors-${i}` }, it.errors.join('; ')) : null);
        }));
        const bodies = groups.map((g) => h('tbody', { 'data-group': g.group },
            h('tr', { class: 'group-row' }, h('th', { scope: 'rowgroup', colspan: items.length + 1, 'data-testid': `cmp-group-${g.group}` }, g.label)),
            g.rows.map((row) => h('tr', { 'data-metric': row.key },
                h('th', { scope: 'row' }, row.label, row.better ? h('small', { class: 'muted dir' }, ' ↓') : null),
                row.cells.map((c, i) => h('td', {
                    class: ['delta', c.verdict], 'data-testid': `cmp-${row.key}-${i}`,
                    'data-value': c.value === null ? '' : String(c.value),
                    'data-absolute': c.absolute === null ? '' : String(c.absolute),
                    'data-percent': c.percent === null ? '' : String(c.percent),
                    'data-verdict': c.verdict || '',
                    title: c.verdict === 'better' || c.verdict === 'worse' ? `${c.verdict} than the baseline (lower is better)` : null,
                },
                h('span', { class: 'cmp-value' }, fmtValue(c.value, row.kind)),
                h('small', { class: 'cmp-delta' }, deltaText(c, (x) => fmtValue(x, row.kind))),
                c.verdict === 'better' || c.verdict === 'worse' ? h('span', { class: 'sr-only' }, ` (${c.verdict})`) : null))))));
        replace(els.comparison,
            h('div', { class: 'title-row' },
                h('h2', null, 'Comparison'),
                h('span', { class: `live ${done ? 'final' : st.live}`, 'data-testid': 'compare-live' },
                    done ? 'final' : st.live === 'open' ? 'live' : st.live === 'retrying' ? 'reconnecting…' : 'connecting…')),
            h('p', { class: 'muted small' }, `captured ${fmtDate(cmp.captured_at)} · baseline `, h('code', null, cmp.baseline_session_id)),
            h('div', { class: 'table-wrap' },
                h('table', { class: 'report compare', 'data-testid': 'compare-matrix' },
                    h('caption', null, 'Each cell: the value, then the difference from the baseline and its percentage. Partial columns are still working: their figures cover what has finished so far.'),
                    h('thead', null, head), bodies)),
            h('p', { class: 'muted small legend' }, h('span', { class: 'delta better' }, 'green'), ' is better, ',
                h('span', { class: 'delta worse' }, 'red'), ' is worse than the baseline (lower is better, ↓); unmarked rows are descriptive. ', DASH, ' means not reported.'));
        // Keep the statuses of the listed sessions current.
        let changed = false;
        for (const it of items) {
            const s = st.sessions.find((x) => x.session_id === it.session_id);
            if (s && it.session && it.session.status && s.status !== it.session.status) {
                s.status = it.session.status;
                changed = true;
            }
            if (s && it.session && typeof it.session.message_count === 'number' && s.message_count !== it.session.message_count) {
                s.message_count = it.session.message_count;
                changed = true;
            }
            if (it.title && !st.labels.has(it.session_id)) {
                st.labels.set(it.session_id, it.title);
                changed = true;
            }
        }
        if (changed) renderPicker();
    }

    function closeStream() {
        if (st.es) {
            st.es.close();
            st.es = null;
        }
        clearTimeout(st.retryTimer);
    }

    function onComparison(ev) {
        let cmp;
        try {
            cmp = JSON.parse(ev.data);
        } catch {
            return;
        }
        st.cmp = cmp;
        if (allTerminal(cmp)) closeStream();
        renderComparison();
    }

    function openStream() {
        if (st.disposed || st.es || allTerminal(st.cmp)) return;
        const es = new EventSource(compareEventsUrl(st.picked, st.baseline));
        st.es = es;
        es.addEventListener('open', () => {
            st.retry = 0;
            st.live = 'open';
            renderComparison();
        });
        es.addEventListener('comparison', onComparison);
        es.addEventListener('deleted', () => {
            closeStream();
            startComparison();
        });
        es.addEventListener('error', () => {
            if (st.disposed || st.es !== es) return;
            if (allTerminal(st.cmp)) {
                closeStream();
                renderComparison();
            } else if (es.readyState === EventSource.CLOSED) {
                // Ended early or refused: catch up with one read, then reconnect with backoff.
                closeStream();
                st.live = 'retrying';
                renderComparison();
                const delay = Math.min(15000, 500 * 2 ** st.retry++);
                st.retryTimer = setTimeout(startComparison, delay);
            } else {
                st.live = 'retrying';
                renderComparison();
            }
        });
    }

    async function startComparison() {
        closeStream();
        compareError.textContent = '';
        const problem = checkSelection(st.picked, st.baseline);
        if (problem) {
            compareError.textContent = problem;
            return;
        }
        try {
            const cmp = await api.compare(st.picked, st.baseline);
            if (st.disposed) return;
            st.cmp = cmp;
            renderComparison();
            openStream();
        } catch (e) {
            if (st.disposed) return;
            compareError.textContent = e instanceof ApiError ? e.detail : String(e);
            st.cmp = null;
            renderComparison();
        }
    }

    renderPicker();
    renderComparison();
    loadLists();
    if (st.picked.length) startComparison();

    return {
        dispose() {
            st.disposed = true;
            closeStream();
        },
    };
}
