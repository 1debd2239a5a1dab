// The history sidebar: pages of EvalSummaryV1 newest first (cursor pagination, 50 a page),
// the selected row, in-place updates from the detail view's live events, and arrow-key
// navigation between rows. Owns its element and the loaded summaries; one instance per page.
import { api } from './api.js';
import { h, replace } from './dom.js';
import { fmtAgo, fmtDate, isTerminal, shortId } from './format.js';

const PAGE = 50;

function labelsOf(s) {
    return `${s.control_label || 'control'} vs ${s.treatment_label || 'treatment'}`;
}

function eligibility(s) {
    if (s.eligible === true) return h('span', { class: 'badge elig yes', title: 'candidate eligible' }, 'eligible');
    if (s.eligible === false) return h('span', { class: 'badge elig no', title: 'candidate not eligible' }, 'not eligible');
    return null;
}

function row(s, selected) {
    const total = s.total_runs || 0;
    const done = s.terminal_runs || 0;
    const pct = total ? Math.round((done / total) * 100) : 0;
    const when = s.created_at ? fmtAgo(s.created_at) : '';
    return h('li', null,
        h('a', {
            class: ['row', selected && 'selected'],
            href: `#/evaluations/${encodeURIComponent(s.evaluation_id)}`,
            'data-testid': 'history-row',
            'data-id': s.evaluation_id,
            'data-status': s.status,
            'aria-current': selected ? 'page' : null,
        },
        h('span', { class: 'row-top' },
            h('span', { class: `badge status ${s.status}`, 'data-testid': 'history-status' }, s.status),
            eligibility(s),
            h('span', { class: 'count', title: `${done} of ${total} runs finished, ${s.passed_runs || 0} passed` },
                `${done}/${total}`)),
        h('span', { class: 'row-title' }, labelsOf(s)),
        h('span', { class: 'row-meta' }, `${s.model}${s.provider ? ` (${s.provider})` : ''} · ${s.dimension === 'system_prompt' ? 'system prompt' : 'prompt'}`),
        isTerminal(s.status) && done === total ? null
            : h('span', { class: 'mini-progress', 'aria-hidden': 'true' }, h('span', { style: `width:${pct}%` })),
        h('span', { class: 'row-meta' },
            h('time', { datetime: s.created_at ? new Date(s.created_at).toISOString() : null, title: fmtDate(s.created_at) }, when),
            ` · ${shortId(s.evaluation_id)}`)));
}

// root: the <aside> to fill; ctx: {onHistoryLoaded?}. Returns the sidebar's API.
export function createHistory(root, ctx) {
    const state = { items: [], next: null, loading: false, error: null, selected: null, loaded: false, marked: false };
    const list = h('ul', { class: 'rows', 'data-testid': 'history-list', 'aria-label': 'Evaluations, newest first' });
    const foot = h('div', { class: 'history-foot' });
    const refresh = h('button', { class: 'small ghost', 'data-testid': 'history-refresh', onclick: () => load(true), title: 'Reload the history' }, 'Refresh');
    replace(root,
        h('div', { class: 'history-head' }, h('h2', null, 'History'), refresh),
        list, foot);

    function renderRows() {
        replace(list, state.items.map((s) => row(s, s.evaluation_id === state.selected)));
        if (!state.items.length && state.loaded && !state.error) {
            list.appendChild(h('li', { class: 'empty muted', 'data-testid': 'history-empty' }, 'No evaluations yet.'));
        }
    }

    function renderFoot() {
        replace(foot,
            state.error ? h('p', { class: 'error-text', 'data-testid': 'history-error' }, state.error) : null,
            state.loading ? h('p', { class: 'muted small' }, 'Loading…') : null,
            state.next && !state.loading
                ? h('button', { class: 'ghost wide', 'data-testid': 'history-more', onclick: () => load(false) }, 'Load older evaluations')
                : null,
            state.loaded && !state.next && state.items.length > PAGE
                ? h('p', { class: 'muted small' }, `All ${state.items.length} evaluations loaded.`)
                : null);
    }

    // early: optional promise of a fetch Response for the first page, started by index.html.
    async function load(reset = true, early = null) {
        if (state.loading) {
            // A change came while a page was in flight: fetch the first page again after it.
            if (reset) state.reloadAgain = true;
            return;
        }
        state.loading = true;
        state.error = null;
        renderFoot();
        try {
            let page = null;
            if (early) {
                try {
                    const res = await early;
                    if (res.ok) page = await res.json();
                } catch {
                    page = null; /* fall back to the regular request (which handles 401) */
                }
            }
            if (!page) page = await api.list({ limit: PAGE, before: reset ? undefined : state.next });
            // A status event may have arrived while this page was in flight: keep the fresher.
            const items = (page.evaluations || []).map(fresher);
            state.items = reset ? items : state.items.concat(items.filter((s) => !state.items.some((o) => o.evaluation_id === s.evaluation_id)));
            state.next = page.next_cursor || null;
        } catch (e) {
            state.error = `Could not load the history: ${e.message}`;
        }
        state.loading = false;
        state.loaded = true;
        state.loadedAt = Date.now();
        renderRows();
        renderFoot();
        if (!state.marked) {
            state.marked = true;
            performance.mark('evald:history-rendered');
        }
        if (ctx.onHistoryLoaded) ctx.onHistoryLoaded();
        if (state.reloadAgain) {
            state.reloadAgain = false;
            load(true);
        }
    }

    function select(id) {
        state.selected = id;
        for (const a of list.querySelectorAll('a.row')) {
            const on = a.dataset.id === id;
            a.classList.toggle('selected', on);
            if (on) a.setAttribute('aria-current', 'page');
            else a.removeAttribute('aria-current');
        }
    }

    const PATCHED = ['status', 'total_runs', 'terminal_runs', 'passed_runs', 'failed_runs', 'updated_at', 'completed_at', 'eligible'];
    // The latest fields seen live per evaluation, so a list page fetched before them
    // cannot roll a row back to an older state.
    const latest = new Map();

    function merge(s, fields) {
        const out = { ...s };
        for (const k of PATCHED) if (fields[k] !== undefined) out[k] = fields[k];
        return out;
    }

    function fresher(s) {
        const f = latest.get(s.evaluation_id);
        if (!f) return s;
        const newer = isTerminal(f.status) || (f.updated_at || 0) >= (s.updated_at || 0);
        return newer && !isTerminal(s.status) ? merge(s, f) : s;
    }

    // Merges fields of a status or summary into the row of that evaluation, if loaded.
    // A terminal status is final: fields read before it (a detail refresh that was in
    // flight when the terminal event came) must not roll the row back.
    function patch(id, fields) {
        const known = latest.get(id);
        if (known && isTerminal(known.status) && fields.status !== undefined && !isTerminal(fields.status)) return;
        latest.set(id, { ...(known || {}), ...fields });
        const i = state.items.findIndex((s) => s.evaluation_id === id);
        if (i < 0) {
            // Finished before its row was loaded: show it now rather than at the next reload.
            if (state.loaded && isTerminal(fields.status)) load(true);
            return;
        }
        const s = merge(state.items[i], fields);
        state.items[i] = s;
        const old = list.querySelector(`a.row[data-id="${CSS.escape(id)}"]`);
        if (old) old.parentElement.replaceWith(row(s, s.evaluation_id === state.selected));
    }

    function remove(id) {
        state.items = state.items.filter((s) => s.evaluation_id !== id);
        renderRows();
        renderFoot();
    }

    list.addEventListener('keydown', (e) => {
        if (!['ArrowDown', 'ArrowUp', 'Home', 'End'].includes(e.key)) return;
        const rows = [...list.querySelectorAll('a.row')];
        if (!rows.length) return;
        const at = rows.indexOf(document.activeElement);
        let to = at;
        if (e.key === 'ArrowDown') to = Math.min(rows.length - 1, at + 1);
        else if (e.key === 'ArrowUp') to = Math.max(0, at - 1);
        else if (e.key === 'Home') to = 0;
        else to = rows.length - 1;
        e.preventDefault();
        rows[to].focus();
    });

    // Reloads the first page when an evaluation newer than every loaded row shows up (for
    // example one started through the API), so the history stays current without polling.
    function notice(id, createdAt) {
        if (!state.loaded || state.loading || state.items.some((s) => s.evaluation_id === id)) return;
        const newest = state.items.length ? state.items[0].created_at || 0 : 0;
        if (!createdAt || createdAt >= newest) load(true);
    }

    document.addEventListener('visibilitychange', () => {
        if (document.visibilityState === 'visible' && state.loaded && Date.now() - state.loadedAt > 30000) load(true);
    });

    return {
        load,
        notice,
        select,
        patch,
        remove,
        isEmpty: () => state.loaded && state.items.length === 0,
        summary: (id) => state.items.find((s) => s.evaluation_id === id) || null,
    };
}
