// The evaluation detail view: header and actions, live progress from the Server-Sent Events stream
// (no polling), the A / B / B − A table, charts, run cards in execution order with their trace ids
// and transcripts, the definition and hashes. mountDetail() owns one EventSource and one ticking
// timer for the elapsed time of the active run; dispose() closes both. The result object is
// replaced on every refetch and patched in place by "run" events.
import { api, ApiError, eventsUrl } from './api.js';
import { copyButton, h, replace } from './dom.js';
import { DASH, fmtDate, fmtDelta, fmtInt, fmtMs, fmtScore, fmtUsd, fmtValue, isTerminal, shortId, traceIdOf } from './format.js';
import { executionOrder, metricRows, parseOrder, runCost, runCounts, runTokens, runVerdict, runWallTime, variantLabels } from './report.js';
import { chartLegend, metricChart } from './charts.js';
import { renderMarkdown } from './markdown.js';

const ROLE_SIDE = { control: 'a', treatment: 'b' };

function pretty(v) {
    return JSON.stringify(v, null, 2);
}

function jsonBlock(v, testid) {
    return h('pre', { class: 'json', 'data-testid': testid || null }, typeof v === 'string' ? v : pretty(v));
}

function markdownBlock(text, testid) {
    const div = h('div', { class: 'md', 'data-testid': testid || null });
    div.innerHTML = renderMarkdown(text);
    return div;
}

// Output of a run: markdown for a string, pretty JSON otherwise, with a raw/rendered toggle.
function outputBlock(output) {
    if (output === undefined || output === null) return h('p', { class: 'muted' }, 'no output');
    if (typeof output !== 'string') return jsonBlock(output, 'run-output');
    const rendered = markdownBlock(output, 'run-output');
    const raw = h('pre', { class: 'raw', hidden: true }, output);
    const toggle = h('button', {
        type: 'button', class: 'small ghost',
        onclick: () => {
            raw.hidden = !raw.hidden;
            rendered.hidden = !rendered.hidden;
            toggle.textContent = raw.hidden ? 'Show raw text' : 'Show rendered';
        },
    }, 'Show raw text');
    return h('div', { class: 'output' }, rendered, raw, toggle);
}

function failureLine(f) {
    return h('li', { 'data-testid': 'run-failure' },
        h('span', { class: 'phase' }, f.phase), f.function_id ? ` · ${f.function_id}` : '', ` — ${f.message}`,
        f.code ? h('span', { class: 'muted' }, ` (${f.code})`) : null);
}

function generationsBlock(gens) {
    return h('section', { class: 'transcript' },
        h('h4', null, `Generations (${gens.length})`),
        h('ol', { class: 'gens' }, gens.map((g) => h('li', { class: 'gen', 'data-testid': 'run-generation' },
            h('p', { class: 'gen-meta' },
                h('strong', null, `#${g.turn ?? g.index ?? ''}`),
                ` · ${fmtMs(g.latency_ms ?? g.duration_ms)} · ${fmtInt(g.usage?.input_tokens ?? g.input_tokens)} in / ${fmtInt(g.usage?.output_tokens ?? g.output_tokens)} out tokens`,
                (g.started_at_ms ?? g.started_at) ? h('span', { class: 'muted' }, ` · ${fmtDate(g.started_at_ms ?? g.started_at)}`) : null),
            g.text ? markdownBlock(g.text) : null,
            (g.tool_calls || []).length ? h('ul', { class: 'tool-calls' }, g.tool_calls.map((t) => h('li', null,
                h('code', null, t.name), ' ', jsonBlock(t.arguments ?? {})))) : null))));
}

function functionCallsBlock(calls) {
    return h('section', { class: 'transcript' },
        h('h4', null, `Function calls (${calls.length})`),
        h('ol', { class: 'calls' }, calls.map((c) => {
            const failed = c.is_error ?? c.status === 'error';
            return h('li', { class: ['call', failed && 'is-error'], 'data-testid': 'run-function-call' },
            h('p', { class: 'gen-meta' }, h('code', null, c.function_id ?? c.name ?? c.tool_name), ` · ${fmtMs(c.duration_ms)} · `,
                failed ? h('span', { class: 'bad' }, 'error') : h('span', { class: 'good' }, 'ok')),
            h('div', { class: 'call-io' },
                h('div', null, h('span', { class: 'label' }, 'arguments'), jsonBlock(c.arguments ?? {})),
                h('div', null, h('span', { class: 'label' }, failed || c.error !== undefined ? 'error' : 'result'),
                    jsonBlock(c.error !== undefined ? c.error : c.result ?? null))));
        })));
}

function benchmarkTable(b) {
    if (!b) return null;
    const rows = [
        ['turns', fmtInt(b.turns)], ['sessions', fmtInt(b.sessions)],
        ['input tokens', fmtInt(b.input_tokens)], ['output tokens', fmtInt(b.output_tokens)],
        ['cache read / write', `${fmtInt(b.cache_read_tokens)} / ${fmtInt(b.cache_write_tokens)}`],
        ['reasoning tokens', fmtInt(b.reasoning_tokens)], ['cost', fmtUsd(b.cost_usd)],
        ['function calls', `${fmtInt(b.function_calls)} (${fmtInt(b.function_call_errors)} errors)`],
        ['traces · spans · error spans', `${fmtInt(b.trace_count)} · ${fmtInt(b.span_count)} · ${fmtInt(b.error_span_count)}`],
        ['trace duration', fmtMs(b.trace_duration_ms)],
    ];
    return h('dl', { class: 'kv small' }, rows.map(([k, val]) => [h('dt', null, k), h('dd', null, val)]));
}

// The run's trace id (its latest attempt's OpenTelemetry trace, docs/otel.md) with a copy
// button, as a dt/dd pair; nothing when the run has none.
function traceRow(run, toast) {
    const traceId = traceIdOf(run);
    if (!traceId) return null;
    const code = h('code', { 'data-testid': 'run-trace-id' }, traceId);
    return [h('dt', null, 'trace'), h('dd', { 'data-testid': 'run-trace', 'data-trace-id': traceId }, code, ' ',
        copyButton(traceId, {
            ariaLabel: 'Copy the trace id', testid: 'run-trace-copy', target: code,
            done: (ok) => (ok ? toast('Trace id copied') : toast('Could not copy the trace id; it is selected for Ctrl+C', 'error')),
        }))];
}

// One run card. labels: variant labels; toast: the app's toast (for the copy button).
function runCard(run, labels, open, toast) {
    const side = ROLE_SIDE[run.role] || 'a';
    const verdict = runVerdict(run);
    const tokens = runTokens(run);
    const wall = runWallTime(run);
    const cost = runCost(run);
    const running = run.status === 'running';
    const elapsed = running && run.started_at > 0
        ? h('span', { class: 'elapsed', 'data-tick-start': String(run.started_at) }, fmtMs(Date.now() - run.started_at))
        : h('span', { class: 'elapsed' }, fmtMs(wall));
    const ev = run.evaluation;
    const body = h('div', { class: 'run-body' },
        h('dl', { class: 'kv small' },
            h('dt', null, 'session'), h('dd', null, h('code', null, run.session_id || DASH)),
            traceRow(run, toast),
            run.turn_id ? [h('dt', null, 'turn'), h('dd', null, h('code', null, run.turn_id))] : null,
            h('dt', null, 'started'), h('dd', null, run.started_at > 0 ? fmtDate(run.started_at) : 'not yet'),
            run.completed_at ? [h('dt', null, 'finished'), h('dd', null, fmtDate(run.completed_at))] : null,
            ev ? [h('dt', null, 'score'), h('dd', { 'data-testid': 'run-score' }, fmtScore(ev.score))] : null),
        ev && ev.reason ? h('p', { class: 'reason', 'data-testid': 'run-reason' }, h('span', { class: 'label' }, 'evaluator: '), ev.reason) : null,
        (run.failures || []).length ? h('ul', { class: 'failures' }, run.failures.map(failureLine)) : null,
        h('h4', null, 'Output'),
        outputBlock(run.output),
        ev && ev.details !== undefined && ev.details !== null ? [h('h4', null, 'Evaluator details'), jsonBlock(ev.details)] : null,
        Array.isArray(run.generations) && run.generations.length ? generationsBlock(run.generations) : null,
        Array.isArray(run.function_calls) && run.function_calls.length ? functionCallsBlock(run.function_calls) : null,
        run.benchmark ? [h('h4', null, 'Metrics'), benchmarkTable(run.benchmark)] : null);

    const details = h('details', {
        class: ['run-card', `role-${side}`, `st-${run.status}`],
        'data-testid': 'run-card',
        'data-run-id': run.run_id,
        'data-role': run.role,
        'data-status': run.status,
        'data-position': run.execution_position,
        open,
    },
    h('summary', null,
        h('span', { class: 'pos', title: 'execution position' }, `#${run.execution_position ?? '?'}`),
        h('span', { class: `chip chip-${side}` }, side.toUpperCase()),
        h('span', { class: 'run-name' }, `${side === 'a' ? labels.a : labels.b} · run ${run.iteration}`),
        h('span', { class: 'order', 'data-testid': 'run-order' },
            run.pair_position === 2 ? `ran second · #${run.execution_position}` : 'ran first'),
        h('span', { class: `verdict v-${verdict.replace(/\s+/g, '-')}`, 'data-testid': 'run-verdict' }, verdict),
        h('span', { class: 'run-stats' },
            tokens !== null ? `${fmtInt(tokens)} tok · ` : '', elapsed, cost !== null ? ` · ${fmtUsd(cost)}` : '')),
    body);
    details.addEventListener('toggle', () => details.dispatchEvent(new CustomEvent('runtoggle', { bubbles: true })));
    return h('li', null, details);
}

// root: <main>; ctx: app context; id: evaluation id. Returns {dispose}.
export function mountDetail(root, ctx, id) {
    const st = {
        result: null,
        status: null,
        es: null,
        retry: 0,
        retryTimer: 0,
        tick: 0,
        refreshing: false,
        refreshAgain: false,
        disposed: false,
        openRuns: new Set(),
        hashesOpen: false,
        live: 'idle',
    };
    const els = {
        head: h('section', { class: 'detail-head' }),
        progress: h('section', { class: 'card progress-panel', 'aria-label': 'Progress' }),
        warning: h('div'),
        table: h('section', { class: 'card', 'aria-label': 'Comparison' }),
        charts: h('section', { class: 'card charts', 'aria-label': 'Charts of per-run metrics' }),
        runs: h('section', { class: 'card', 'aria-label': 'Runs in execution order' }),
        definition: h('section', { class: 'card definition', 'aria-label': 'Definition' }),
    };
    replace(root, h('div', { class: 'page detail-page', 'data-testid': 'detail', 'data-id': id },
        h('p', { class: 'muted' }, 'Loading…')));

    const statusOf = () => (st.status && st.status.status) || (st.result && st.result.status) || 'queued';
    const labels = () => variantLabels(st.result && st.result.request);
    const source = () => (st.result && (st.result.report || st.result.progress)) || {};
    const runs = () => (st.result && st.result.progress && st.result.progress.runs) || (st.result && st.result.report && st.result.report.runs) || [];

    // ---- header and actions
    function action(label, testid, onclick, cls = '') {
        return h('button', { type: 'button', class: cls, 'data-testid': testid, onclick }, label);
    }

    async function doCancel(btn) {
        btn.disabled = true;
        try {
            const res = await api.cancel(id);
            ctx.toast(res.cancelled ? 'Evaluation cancelled' : `Already ${res.status}`);
            await refresh();
        } catch (e) {
            ctx.toast(`Could not cancel: ${e.message}`, 'error');
            btn.disabled = false;
        }
    }

    async function doRerun(reverse) {
        try {
            const res = await api.rerun(id, reverse);
            ctx.toast(reverse ? 'Started a reversed rerun' : 'Started a rerun');
            ctx.history.load(true);
            ctx.navigate(`#/evaluations/${encodeURIComponent(res.evaluation_id)}`);
        } catch (e) {
            ctx.toast(`Could not rerun: ${e.message}`, 'error');
        }
    }

    async function doDelete() {
        const ok = await ctx.confirm('Delete this evaluation?', 'This deletes the evaluation and its stored report. It cannot be undone.', 'Delete');
        if (!ok) return;
        try {
            await api.remove(id);
            ctx.history.remove(id);
            ctx.toast('Evaluation deleted');
            ctx.navigate('#/');
        } catch (e) {
            ctx.toast(`Could not delete: ${e.message}`, 'error');
        }
    }

    function download() {
        const blob = new Blob([pretty(st.result)], { type: 'application/json' });
        const a = h('a', { href: URL.createObjectURL(blob), download: `${id}.json` });
        document.body.appendChild(a);
        a.click();
        setTimeout(() => {
            URL.revokeObjectURL(a.href);
            a.remove();
        }, 1000);
    }

    function renderHead() {
        const r = st.result;
        const req = r.request || {};
        const m = req.model || {};
        const status = statusOf();
        const terminal = isTerminal(status);
        const report = r.report;
        const L = labels();
        const eligible = report ? report.eligible : undefined;
        const srcId = r.source_evaluation_id || req.source_evaluation_id || (report && report.source_evaluation_id);
        const copy = h('button', {
            type: 'button', class: 'small ghost', 'aria-label': 'Copy the evaluation id',
            onclick: () => navigator.clipboard && navigator.clipboard.writeText(id).then(() => ctx.toast('Id copied')),
        }, 'Copy');
        const actions = terminal
            ? [action('Run again', 'action-rerun', () => doRerun(false), 'primary'),
                action('Run reversed', 'action-rerun-reversed', () => doRerun(true)),
                action('Edit as new', 'action-edit', () => ctx.navigate(`#/new?from=${encodeURIComponent(id)}`), 'ghost'),
                action('Download JSON', 'action-download', download, 'ghost'),
                action('Delete', 'action-delete', doDelete, 'danger')]
            : [action('Cancel', 'action-cancel', (e) => doCancel(e.currentTarget), 'danger'),
                action('Edit as new', 'action-edit', () => ctx.navigate(`#/new?from=${encodeURIComponent(id)}`), 'ghost')];
        replace(els.head,
            h('div', { class: 'title-row' },
                h('h1', { 'data-testid': 'detail-title' }, h('span', { class: 'chip chip-a' }, 'A'), ` ${L.a} vs `, h('span', { class: 'chip chip-b' }, 'B'), ` ${L.b}`),
                h('span', { class: `badge status ${status}`, 'data-testid': 'eval-status' }, status),
                eligible === true ? h('span', { class: 'badge elig yes', 'data-testid': 'eligibility' }, 'candidate eligible')
                    : eligible === false ? h('span', { class: 'badge elig no', 'data-testid': 'eligibility' }, 'candidate not eligible') : null,
                !terminal ? h('span', { class: `live ${st.live}`, 'data-testid': 'live-indicator', title: 'live updates' },
                    st.live === 'open' ? 'live' : st.live === 'retrying' ? 'reconnecting…' : 'connecting…') : null),
            h('p', { class: 'subtitle' }, `${m.model || '?'}${m.provider ? ` · ${m.provider}` : ''} · ${req.dimension === 'system_prompt' ? 'system prompt comparison' : 'prompt comparison'}`),
            h('p', { class: 'idline muted small' }, h('code', { 'data-testid': 'evaluation-id' }, id), ' ', copy,
                r.created_at || (report && report.created_at) ? ` · created ${fmtDate(r.created_at || report.created_at)}` : '',
                srcId ? [' · rerun of ', h('a', { href: `#/evaluations/${encodeURIComponent(srcId)}`, 'data-testid': 'source-link' }, shortId(srcId))] : null,
                st.status && st.status.error ? h('span', { class: 'bad' }, ` · ${st.status.error}`) : null),
            h('div', { class: 'actions', 'data-testid': 'actions' }, actions));
    }

    // ---- progress
    function renderProgress() {
        const rs = runs();
        const c = runCounts(rs);
        const total = (st.status && st.status.total_runs) || c.total;
        const pct = total ? Math.round((c.terminal / total) * 100) : 0;
        const active = st.status && st.status.active;
        const activeRun = rs.find((x) => x.status === 'running');
        const status = statusOf();
        const who = active || activeRun;
        replace(els.progress,
            h('div', { class: 'progressbar', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': total, 'aria-valuenow': c.terminal, 'aria-label': 'runs complete' },
                h('span', { style: `width:${pct}%` })),
            h('p', { 'data-testid': 'progress-text' },
                `${c.terminal}/${total} runs complete · ${c.met} met criteria · ${c.missed} missed criteria · ${c.notEvaluated} not evaluated`),
            !isTerminal(status) ? h('p', { class: 'muted small', 'data-testid': 'active-run' },
                `evaluation ${status}`,
                who ? [` · ${who.role} run ${who.iteration} is active (`, h('code', null, who.session_id), ')',
                    who.started_at > 0 ? [' · ', h('span', { 'data-tick-start': String(who.started_at) }, fmtMs(Date.now() - who.started_at))] : null] : null) : null);
        const os = source().order_sensitivity;
        if (os && os.detected) {
            const line = (name, x) => `${name}: ${x.first_passed}/${x.first_runs} passed when first, ${x.second_passed}/${x.second_runs} when second`;
            replace(els.warning, h('div', { class: 'warning', role: 'note', 'data-testid': 'order-warning' },
                h('strong', null, 'Order sensitivity: '),
                'At least one variant has a different pass rate when it runs first versus second.',
                h('span', { class: 'small' }, ` ${line(`A ${labels().a}`, os.control)}; ${line(`B ${labels().b}`, os.treatment)}.`)));
        } else {
            replace(els.warning);
        }
    }

    // ---- comparison table
    function renderTable() {
        const src = source();
        const L = labels();
        const rows = metricRows(src);
        const live = !st.result.report;
        const cell = (testid, value, kind, extra) => h('td', { 'data-testid': testid, 'data-value': value === null ? '' : String(value) },
            fmtValue(value, kind), extra ? h('small', { class: 'muted' }, ` ${extra}`) : null);
        const body = rows.map((row) => {
            const hide = row.key === 'pass_rate' && !row.evaluated;
            return h('tr', { 'data-metric': row.key },
                h('th', { scope: 'row' }, row.label, h('small', { class: 'muted dir' }, row.better === 'higher' ? ' ↑' : ' ↓')),
                hide ? [h('td', { 'data-testid': `metric-${row.key}-a`, 'data-value': '', colspan: 1, class: 'muted' }, 'not evaluated'),
                    h('td', { 'data-testid': `metric-${row.key}-b`, 'data-value': '', class: 'muted' }, 'not evaluated'),
                    h('td', { 'data-testid': `metric-${row.key}-delta`, 'data-value': '', class: 'muted' }, DASH)]
                    : [cell(`metric-${row.key}-a`, row.a, row.kind, row.aCount),
                        cell(`metric-${row.key}-b`, row.b, row.kind, row.bCount),
                        h('td', {
                            class: ['delta', row.verdict],
                            'data-testid': `metric-${row.key}-delta`,
                            'data-value': row.delta === null ? '' : String(row.delta),
                            'data-verdict': row.verdict || '',
                            title: row.verdict ? `${row.verdict} (${row.better} is better)` : null,
                        }, fmtDelta(row.delta, row.kind), row.verdict === 'better' || row.verdict === 'worse' ? h('span', { class: 'sr-only' }, ` (${row.verdict})`) : null)]);
        });
        const ca = src.control_aggregate || {};
        const ta = src.treatment_aggregate || {};
        replace(els.table,
            h('h2', null, live ? 'Comparison so far' : 'Report'),
            h('div', { class: 'table-wrap' },
                h('table', { class: 'report', 'data-testid': 'report-table' },
                    h('caption', null, live
                        ? 'Medians over the runs finished so far; the report is final when the evaluation ends.'
                        : 'Medians per variant over every finished run. Pass rate counts evaluated runs.'),
                    h('thead', null, h('tr', null,
                        h('th', { scope: 'col' }, 'Metric'),
                        h('th', { scope: 'col' }, h('span', { class: 'chip chip-a' }, 'A'), ` ${L.a}`, h('small', { class: 'muted' }, ` ${ca.runs ?? 0} runs`)),
                        h('th', { scope: 'col' }, h('span', { class: 'chip chip-b' }, 'B'), ` ${L.b}`, h('small', { class: 'muted' }, ` ${ta.runs ?? 0} runs`)),
                        h('th', { scope: 'col' }, 'B − A'))),
                    h('tbody', null, body))),
            h('p', { class: 'muted small legend' }, h('span', { class: 'delta better' }, 'green'), ' is better, ', h('span', { class: 'delta worse' }, 'red'), ' is worse: higher is better for pass rate and score (↑), lower is better for everything else (↓).'));
    }

    function renderCharts() {
        const L = labels();
        const rs = runs();
        replace(els.charts,
            h('h2', null, 'Per-run metrics'),
            chartLegend(L),
            h('div', { class: 'chart-grid' },
                metricChart({ title: 'Wall time', key: 'wall', runs: rs, valueOf: runWallTime, kind: 'ms', labels: L }),
                metricChart({ title: 'Total tokens', key: 'tokens', runs: rs, valueOf: runTokens, kind: 'count', labels: L }),
                metricChart({ title: 'Cost', key: 'cost', runs: rs, valueOf: runCost, kind: 'usd', labels: L })));
    }

    function renderRuns() {
        const L = labels();
        const ordered = executionOrder(runs());
        const list = h('ol', { class: 'runs', 'data-testid': 'runs' }, ordered.map((r) => runCard(r, L, st.openRuns.has(r.run_id), ctx.toast)));
        list.addEventListener('runtoggle', (e) => {
            const d = e.target;
            if (d.open) st.openRuns.add(d.dataset.runId);
            else st.openRuns.delete(d.dataset.runId);
        });
        replace(els.runs,
            h('h2', null, 'Runs in execution order'),
            ordered.length ? list : h('p', { class: 'muted' }, 'No runs planned.'),
            ordered.length ? h('p', { class: 'muted small' }, 'Open a run for its evaluator reason, failures, output, generations and function calls.') : null);
    }

    // Replaces the card of one run (after a "run" event), keeping its open state.
    function replaceRunCard(run) {
        const old = els.runs.querySelector(`details[data-run-id="${CSS.escape(run.run_id)}"]`);
        if (!old) return renderRuns();
        old.parentElement.replaceWith(runCard(run, labels(), st.openRuns.has(run.run_id), ctx.toast));
    }

    function renderDefinition() {
        const r = st.result;
        const req = r.request || {};
        const L = labels();
        const report = r.report;
        const lim = req.limits || {};
        const ex = lim.execution || {};
        const ev = lim.evaluation || {};
        const byPrompt = req.dimension !== 'system_prompt';
        const order = parseOrder((r.progress && r.progress.effective_execution_order) || (report && report.effective_execution_order));
        const sysText = (s) => (s === null || s === undefined ? '— no system prompt —' : s === '' ? '— built-in system prompt —' : s);
        const c = req.control || {};
        const t = req.treatment || {};
        const textBlock = (title, text, side) => h('div', { class: ['text-block', side && `variant-${side}`] },
            h('h4', null, side ? h('span', { class: `chip chip-${side}` }, side.toUpperCase()) : null, ` ${title}`),
            h('pre', { class: 'prompt-text' }, text));
        const evaluator = req.evaluator;
        const hashRows = [];
        if (report) {
            const add = (k, val) => val && hashRows.push(h('tr', null, h('th', { scope: 'row' }, k), h('td', null, h('code', null, val))));
            add('A prompt', report.control && report.control.prompt_sha256);
            add('A system prompt', report.control && report.control.system_prompt_sha256);
            add('B prompt', report.treatment && report.treatment.prompt_sha256);
            add('B system prompt', report.treatment && report.treatment.system_prompt_sha256);
            const sa = report.shared_artifacts || {};
            add('model', sa.model_sha256);
            add('functions', sa.function_policy_sha256);
            add('limits', sa.limits_sha256);
            add('output', sa.output_sha256);
            add('evaluator arguments', report.evaluator && report.evaluator.arguments_sha256);
        }
        const hashes = h('details', { class: 'hashes', 'data-testid': 'hashes', open: st.hashesOpen },
            h('summary', null, 'Comparison hashes'),
            hashRows.length ? h('table', { class: 'hash-table' }, h('tbody', null, hashRows))
                : h('p', { class: 'muted small' }, 'Hashes are part of the final report.'),
            h('p', { class: 'muted small' }, 'SHA-256 of each artifact; equal hashes across evaluations mean identical inputs.'));
        hashes.addEventListener('toggle', () => {
            st.hashesOpen = hashes.open;
        });
        replace(els.definition,
            h('h2', null, 'Definition'),
            h('dl', { class: 'kv' },
                h('dt', null, 'runs per variant'), h('dd', null, String(req.runs ?? DASH)),
                h('dt', null, 'order'), h('dd', null, req.execution_order === 'balanced_treatment_first' ? 'balanced · B first' : 'balanced · A first'),
                r.concurrency ? [h('dt', null, 'concurrency'), h('dd', null, String(r.concurrency))] : null,
                h('dt', null, 'success criteria'), h('dd', null, evaluator
                    ? [h('code', null, evaluator.function_id), evaluator.arguments && Object.keys(evaluator.arguments).length ? [' ', h('code', { class: 'args' }, JSON.stringify(evaluator.arguments))] : null]
                    : 'no success criteria'),
                h('dt', null, 'limits per run'), h('dd', null,
                    `${ex.max_total_tokens ? `${fmtInt(ex.max_total_tokens)} tokens` : 'no token limit'} · ${ex.max_cost_usd != null ? fmtUsd(ex.max_cost_usd) : 'no cost limit'} · ${fmtInt(ex.max_turns)} turns · ${fmtInt(ex.max_output_tokens_per_call)} output tokens per call · timeouts ${ex.invocation_timeout_seconds ?? DASH} s / ${ex.scenario_timeout_seconds ?? DASH} s`
                    + (ev.max_function_call_errors != null ? ` · ≤ ${ev.max_function_call_errors} function-call errors` : '')
                    + (ev.max_error_spans != null ? ` · ≤ ${ev.max_error_spans} error spans` : '')),
                h('dt', null, 'model settings'), h('dd', null, [
                    `strategy ${(req.model && req.model.system_prompt_strategy) || 'enrich'}`,
                    req.model && req.model.mode ? `mode ${req.model.mode}` : null,
                    req.model && req.model.thinking_level ? `thinking ${req.model.thinking_level}` : null,
                ].filter(Boolean).join(' · ')),
                h('dt', null, 'functions'), h('dd', null, h('code', null, JSON.stringify(req.functions ?? { allow: [], deny: [] }))),
                h('dt', null, 'output'), h('dd', null, h('code', null, JSON.stringify(req.output ?? { type: 'text' })))),
            h('div', { class: 'sequence', 'data-testid': 'sequence', 'aria-label': 'execution sequence' },
                h('span', { class: 'label' }, 'Execution sequence '),
                order.map((o) => h('span', { class: `chip chip-${ROLE_SIDE[o.role] || 'a'}`, title: `#${o.position} ${o.role} run ${o.iteration}` }, (ROLE_SIDE[o.role] || '?').toUpperCase()))),
            h('div', { class: 'texts' },
                byPrompt
                    ? [textBlock('Shared system prompt', sysText(c.system_prompt)), h('div', { class: 'pair' }, textBlock(`${L.a} prompt`, c.prompt ?? '', 'a'), textBlock(`${L.b} prompt`, t.prompt ?? '', 'b'))]
                    : [textBlock('Shared prompt', c.prompt ?? ''), h('div', { class: 'pair' }, textBlock(`${L.a} system prompt`, sysText(c.system_prompt), 'a'), textBlock(`${L.b} system prompt`, sysText(t.system_prompt), 'b'))]),
            hashes);
    }

    function renderAll() {
        if (st.disposed) return;
        const page = h('div', { class: 'page detail-page', 'data-testid': 'detail', 'data-id': id },
            els.head, els.progress, els.warning, els.table, els.charts, els.runs, els.definition,
            h('p', { class: 'footnote', 'data-testid': 'footnote' }, 'Efficiency metrics are descriptive and do not select a winner.'));
        renderHead();
        renderProgress();
        renderTable();
        renderCharts();
        renderRuns();
        renderDefinition();
        if (!root.contains(els.head)) replace(root, page);
        startTicking();
    }

    // ---- elapsed-time ticking for running runs (display only; no requests)
    function startTicking() {
        const needed = !isTerminal(statusOf()) && runs().some((r) => r.status === 'running');
        if (needed && !st.tick) {
            st.tick = setInterval(() => {
                const now = Date.now();
                for (const el of root.querySelectorAll('[data-tick-start]')) el.textContent = fmtMs(now - Number(el.dataset.tickStart));
            }, 1000);
        } else if (!needed && st.tick) {
            clearInterval(st.tick);
            st.tick = 0;
        }
    }

    // ---- data
    async function refresh() {
        if (st.refreshing) {
            st.refreshAgain = true;
            return;
        }
        st.refreshing = true;
        try {
            do {
                st.refreshAgain = false;
                const r = await api.get(id);
                if (st.disposed) return;
                st.result = r;
                if (st.status && isTerminal(r.status)) st.status = { ...st.status, status: r.status };
                if (r.report) ctx.history.patch(id, { status: r.status, eligible: r.report.eligible ?? null });
                renderAll();
                if (isTerminal(r.status)) closeStream();
            } while (st.refreshAgain && !st.disposed);
        } catch (e) {
            if (!st.disposed) ctx.toast(`Could not refresh: ${e.message}`, 'error');
        } finally {
            st.refreshing = false;
        }
    }

    let refreshTimer = 0;
    function scheduleRefresh(delay = 150) {
        clearTimeout(refreshTimer);
        refreshTimer = setTimeout(refresh, delay);
    }

    function closeStream() {
        if (st.es) {
            st.es.close();
            st.es = null;
        }
        clearTimeout(st.retryTimer);
    }

    function onStatus(ev) {
        let s;
        try {
            s = JSON.parse(ev.data);
        } catch {
            return;
        }
        const before = st.status || {};
        st.status = s;
        ctx.history.patch(id, s);
        if (isTerminal(s.status)) {
            // The terminal state is shown with the result that goes with it: refresh()
            // renders the badge, the progress and the report together once it has loaded,
            // so the page never shows "completed" beside a report it has not read yet.
            closeStream();
            refresh();
            return;
        }
        renderHead();
        renderProgress();
        startTicking();
        if (before.terminal_runs !== s.terminal_runs || before.status !== s.status) {
            scheduleRefresh();
        }
    }

    function onRun(ev) {
        let run;
        try {
            run = JSON.parse(ev.data);
        } catch {
            return;
        }
        if (!st.result || !run || !run.run_id) return;
        const list = st.result.progress && st.result.progress.runs;
        if (!list) return;
        const i = list.findIndex((x) => x.run_id === run.run_id);
        if (i >= 0) {
            // Events carry no trace id: the one last read stays, unless the run started again
            // (another attempt, another trace); then none shows until the next read.
            const restarted = run.started_at !== undefined && run.started_at !== list[i].started_at && !('trace_id' in run);
            list[i] = { ...list[i], ...run, ...(restarted ? { trace_id: null } : null) };
        } else {
            list.push(run);
        }
        replaceRunCard(i >= 0 ? list[i] : run);
        renderProgress();
        renderCharts();
        startTicking();
        if (isTerminal(run.status)) scheduleRefresh();
    }

    function openStream() {
        if (st.disposed || st.es || isTerminal(statusOf())) return;
        const es = new EventSource(eventsUrl(id));
        st.es = es;
        es.addEventListener('open', () => {
            st.retry = 0;
            st.live = 'open';
            renderHead();
        });
        es.addEventListener('status', onStatus);
        es.addEventListener('run', onRun);
        es.addEventListener('error', () => {
            if (st.disposed || st.es !== es) return;
            if (es.readyState === EventSource.CLOSED) {
                // The server refused or ended the stream: catch up once, then reconnect with backoff.
                st.es = null;
                st.live = 'retrying';
                renderHead();
                const delay = Math.min(15000, 500 * 2 ** st.retry++);
                st.retryTimer = setTimeout(async () => {
                    await refresh();
                    openStream();
                }, delay);
            } else {
                st.live = 'retrying';
                renderHead();
            }
        });
    }

    api.get(id).then((r) => {
        if (st.disposed) return;
        st.result = r;
        ctx.history.notice(id, r.created_at || (r.report && r.report.created_at) || 0);
        document.title = `${variantLabels(r.request).a} vs ${variantLabels(r.request).b} · evald`;
        renderAll();
        openStream();
    }).catch((e) => {
        if (st.disposed) return;
        const notFound = e instanceof ApiError && e.status === 404;
        replace(root, h('div', { class: 'page', 'data-testid': 'detail-error' },
            h('h1', null, notFound ? 'Evaluation not found' : 'Could not load the evaluation'),
            h('p', null, notFound ? `There is no evaluation ${id}; it may have been deleted.` : e.message),
            h('p', null, h('a', { href: '#/' }, 'Back to the history'))));
    });

    return {
        dispose() {
            st.disposed = true;
            closeStream();
            clearTimeout(refreshTimer);
            if (st.tick) clearInterval(st.tick);
        },
    };
}
