// Entry point of the console: hash routing (#/, #/new, #/new?from=<id>, #/evaluations/<id>,
// #/sessions?ids=…&baseline=…, #/experiments, #/experiments/new?from=<id>, #/experiments/<id>
// (?source=evaluator|human|human_then_evaluator), #/experiments/<id>/review,
// #/experiments/<id>/pairs and #/experiments/<id>/pairs/<case id>/<repeat>/<treatment>),
// the token and confirmation dialogs, the toast line, and the wiring between the history
// sidebar and the main view. One view is mounted in <main> at a time; the previous one is
// disposed (its event stream and timers stopped) before the next mounts.
import { setTokenPrompt } from './api.js';
import { h, replace } from './dom.js';
import { createHistory } from './history.js';

const main = document.getElementById('main');
let view = null;
let toastTimer = 0;

function toast(message, kind = 'info') {
    const el = document.getElementById('toast');
    el.textContent = message;
    el.className = `toast show ${kind}`;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => {
        el.className = 'toast';
    }, kind === 'error' ? 8000 : 3500);
}

// Shows the confirmation dialog; resolves true when the user confirms.
function confirmAction(title, text, okLabel = 'Confirm') {
    const dlg = document.getElementById('confirm-dialog');
    document.getElementById('confirm-title').textContent = title;
    document.getElementById('confirm-text').textContent = text;
    document.getElementById('confirm-ok').textContent = okLabel;
    return new Promise((resolve) => {
        dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok'), { once: true });
        dlg.returnValue = '';
        dlg.showModal();
        dlg.querySelector('[value="cancel"]').focus();
    });
}

setTokenPrompt((reason) => {
    const dlg = document.getElementById('token-dialog');
    const input = document.getElementById('token-input');
    document.getElementById('token-reason').textContent = `${reason}.`;
    input.value = '';
    return new Promise((resolve) => {
        dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok' ? input.value.trim() || null : null), { once: true });
        dlg.returnValue = '';
        dlg.showModal();
        input.focus();
    });
});

function navigate(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
}

const ctx = { toast, confirm: confirmAction, navigate, history: null };
ctx.history = createHistory(document.getElementById('history'), ctx);

function home() {
    const empty = ctx.history.isEmpty();
    return h('section', { class: 'welcome', 'data-testid': 'welcome' },
        h('h1', null, empty ? 'No evaluations yet' : 'Prompt A/B evaluations'),
        h('p', null, 'Run a control (A) and a treatment (B) variant of a prompt or system prompt against the same model, several times each in a balanced order, and compare pass rates, tokens, cost, latency, function calls and traces.'),
        h('p', null, empty ? 'Start with a new evaluation.' : 'Pick an evaluation from the history, or start a new one.'),
        h('p', null, h('a', { href: '#/new', class: 'button primary' }, 'New evaluation')),
        h('p', { class: 'muted small' }, 'Keyboard: Tab moves between controls; in the history, ↑ and ↓ move between evaluations and Enter opens one.'));
}

function parseHash() {
    const raw = (location.hash || '#/').slice(1);
    const [path, query] = raw.split('?');
    const params = new URLSearchParams(query || '');
    let m;
    if (path === '/new') return { name: 'new', from: params.get('from') };
    if ((m = /^\/evaluations\/([A-Za-z0-9_-]+)$/.exec(path))) return { name: 'detail', id: m[1] };
    if (path === '/sessions') return { name: 'sessions', params };
    if (path === '/experiments') return { name: 'experiments', page: 'list' };
    if (path === '/experiments/new') return { name: 'experiments', page: 'new', from: params.get('from') };
    if ((m = /^\/experiments\/([A-Za-z0-9_-]+)$/.exec(path))) return { name: 'experiments', page: 'detail', id: m[1], source: params.get('source') };
    if ((m = /^\/experiments\/([A-Za-z0-9_-]+)\/review$/.exec(path))) return { name: 'experiments', page: 'review', id: m[1] };
    // The pair view parses the rest of its path itself (judging.js, parsePairPath()).
    if ((m = /^\/experiments\/([A-Za-z0-9_-]+)\/pairs(\/[^?]*)?$/.exec(path))) return { name: 'experiments', page: 'pair', id: m[1], path };
    return { name: 'home' };
}

// The form, detail, experiments, review and pair views load on first use so the history renders without waiting for them.
let routeSeq = 0;

async function mount(loader, name, ...args) {
    const seq = ++routeSeq;
    let mod;
    try {
        mod = await loader();
    } catch (e) {
        replace(main, h('p', { class: 'error-text' }, `Could not load the console: ${e.message}`));
        return;
    }
    if (seq !== routeSeq) return;
    view = mod[name](main, ctx, ...args);
}

function route() {
    if (view && view.dispose) view.dispose();
    view = null;
    routeSeq++;
    const r = parseHash();
    document.body.className = `route-${r.name}`;
    ctx.history.select(r.name === 'detail' ? r.id : null);
    if (r.name === 'new') {
        document.title = 'New evaluation · evald';
        mount(() => import('./form.js'), 'mountForm', { from: r.from });
    } else if (r.name === 'sessions') {
        document.title = 'Sessions · evald';
        mount(() => import('./sessions.js'), 'mountSessions', r.params);
    } else if (r.name === 'experiments' && r.page === 'review') {
        document.title = 'Review · evald';
        mount(() => import('./review.js'), 'mountReview', r.id);
    } else if (r.name === 'experiments' && r.page === 'pair') {
        document.title = 'Pair · evald';
        mount(() => import('./pair.js'), 'mountPair', r.id, r.path);
    } else if (r.name === 'experiments') {
        document.title = r.page === 'new' ? 'New experiment · evald' : r.page === 'detail' ? 'Experiment · evald' : 'Experiments · evald';
        mount(() => import('./experiments.js'), 'mountExperiments', r);
    } else if (r.name === 'detail') {
        document.title = 'Evaluation · evald';
        mount(() => import('./detail.js'), 'mountDetail', r.id);
    } else {
        document.title = 'evald console';
        replace(main, home());
        view = { refreshHome: true };
    }
    if (r.name !== 'home') main.focus({ preventScroll: true });
    window.scrollTo(0, 0);
}

ctx.onHistoryLoaded = () => {
    if (view && view.refreshHome) replace(main, home());
};

window.addEventListener('hashchange', route);
ctx.history.load(true, window.evaldFirstHistory);
window.evaldFirstHistory = null;
route();
