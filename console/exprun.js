// One run of an experiment as a case's runs show it (experiment.js): verdict, repeat and
// position, failures, output, the word diff against the control's run of the same repeat, the
// agent's answers, tokens and cost and, with a simulated user, its calls, tokens and cost apart
// (agents.js), the conversation turn by turn (conversation.js, folded, the simulated user's
// turns labelled), the session and the trace id with a Copy button. All text is inserted as
// text nodes.
import { runFigures } from './agents.js';
import { outputText, runPassed, wordDiff } from './analysis.js';
import { armTexts, callOutcome, conversationSummary, renderTemplate, runConversation, turnTitle } from './conversation.js';
import { copyButton, h } from './dom.js';
import { traceIdOf } from './format.js';

// run: a row of GET /v1/experiments/{id}/runs; control: the control's run to diff against (or
// null); view: {exp: the experiment, caseRow: the case, openConversations: a Set of the run ids
// whose conversation is open, kept across re-renders; toast(text, kind)}.
export function runBlock(run, control, view) {
    const passed = runPassed(run);
    const text = outputText(run.output);
    const verdict = run.status !== 'completed' ? (passed === false ? 'missed criteria' : run.status)
        : passed === true ? 'met criteria' : passed === false ? 'missed criteria' : 'not evaluated';
    const diff = control && run.arm !== control.arm ? wordDiff(outputText(control.output), text) : null;
    const failures = Array.isArray(run.failures) ? run.failures : [];
    return h('div', { class: 'exp-run', 'data-testid': 'exp-run', 'data-run-id': run.run_id, 'data-arm': run.arm, 'data-repeat': run.repeat, 'data-passed': String(passed) },
        h('p', { class: 'exp-run-head small' },
            h('span', { class: `verdict v-${verdict.replace(/\s+/g, '-')}`, 'data-testid': 'exp-run-verdict' }, verdict),
            ` repeat ${run.repeat} · #${run.position}`,
            run.verdict && typeof run.verdict === 'object' && run.verdict.reason ? h('span', { class: 'muted' }, ` · ${run.verdict.reason}`) : null),
        failures.length ? h('ul', { class: 'failures' }, failures.map((f) => h('li', null, `${f.phase || ''}${f.function_id ? ` · ${f.function_id}` : ''} — ${f.message || ''}`))) : null,
        h('pre', { class: 'raw', 'data-testid': 'exp-run-output' }, text || '(no output)'),
        diff ? h('div', { class: 'diff', 'data-testid': 'exp-run-diff', title: `words removed from / added to the control's repeat ${control.repeat}` },
            h('span', { class: 'muted small' }, `vs control repeat ${control.repeat}: `),
            diff.map((p) => {
                if (p.op === 'same') return p.text;
                const lead = p.text.startsWith(' ') ? ' ' : '';
                return [lead, h(p.op === 'add' ? 'ins' : 'del', null, p.text.slice(lead.length))];
            })) : null,
        figuresLine(run),
        conversationBlock(run, view),
        run.session_id ? h('p', { class: 'small muted' }, 'session ', h('code', null, run.session_id)) : null,
        traceLine(run, view.toast));
}

// What the run used: the agent's turns (its answers, with a simulated user), tokens and cost,
// and the simulated user's calls, tokens and cost apart; nothing before the run has a benchmark.
function figuresLine(run) {
    if (!run.benchmark || typeof run.benchmark !== 'object') return null;
    const f = runFigures(run.benchmark);
    const data = (x) => ({ 'data-input-tokens': x.input ?? '', 'data-output-tokens': x.output ?? '', 'data-total-tokens': x.total ?? '', 'data-cost': x.cost ?? '' });
    return h('p', { class: 'run-figures small', 'data-testid': 'exp-run-figures' },
        h('span', { 'data-testid': 'exp-run-agent', 'data-turns': f.agent.turns ?? '', ...data(f.agent) },
            h('span', { class: 'label' }, 'agent'), f.agent.text),
        f.simulator ? h('span', { class: 'sim', 'data-testid': 'exp-run-simulator', 'data-calls': f.simulator.calls, ...data(f.simulator) },
            h('span', { class: 'label' }, 'simulated user'), f.simulator.text) : null);
}

// The run's conversation turn by turn (conversation.js), folded; which runs are open is
// kept across the re-renders of a running experiment.
function conversationBlock(run, { exp, caseRow, openConversations }) {
    const texts = armTexts(exp, run.arm);
    const conv = runConversation(run, { caseRow, prompt: texts.prompt, simulated: Boolean((exp.request || {}).simulator) });
    const system = texts.system_prompt ? renderTemplate(texts.system_prompt, caseRow || {}).text : null;
    const key = `${run.run_id}`;
    return h('details', {
        class: 'conversation', 'data-testid': 'exp-run-conversation', 'data-source': conv.source, 'data-turns': conv.turns.length,
        open: openConversations.has(key),
        ontoggle: (e) => { if (e.target.open) openConversations.add(key); else openConversations.delete(key); },
    },
    h('summary', { 'data-testid': 'exp-run-conversation-toggle' }, `Conversation · ${conversationSummary(conv)}`),
    system ? h('p', { class: 'turn-system small', 'data-testid': 'exp-conversation-system' }, h('span', { class: 'label' }, 'system prompt'), system) : null,
    h('ol', { class: 'turns' }, conv.turns.map((t, i) => h('li', {
        class: ['turn', `turn-${t.role}`, `origin-${t.origin || 'run'}`], 'data-testid': 'exp-turn', 'data-role': t.role, 'data-origin': t.origin || '', 'data-index': i,
    },
    h('p', { class: 'turn-head small', 'data-testid': 'exp-turn-title' }, turnTitle(t)),
    h('div', { class: 'turn-content', 'data-testid': 'exp-turn-content' }, t.content === '' ? h('span', { class: 'muted' }, '(empty)') : t.content),
    (t.function_calls || []).length ? h('ol', { class: 'turn-calls' }, t.function_calls.map((c) => {
        const out = callOutcome(c);
        return h('li', { class: ['turn-call', out.kind === 'error' && 'is-error'], 'data-testid': 'exp-turn-call', 'data-name': c.name, 'data-outcome': out.kind },
            h('p', { class: 'small' }, h('code', { 'data-testid': 'exp-turn-call-name' }, c.name), ' ', h('code', { class: 'muted', 'data-testid': 'exp-turn-call-arguments' }, JSON.stringify(c.arguments))),
            h('p', { class: ['small', out.kind === 'error' ? 'bad' : 'muted'], 'data-testid': 'exp-turn-call-outcome' },
                out.kind === 'error' ? 'error: ' : out.kind === 'result' ? '→ ' : '', out.text));
    })) : null))),
    conv.source === 'derived' ? h('p', { class: 'small muted', 'data-testid': 'exp-conversation-note' },
        'Put together by the console from the case, the arm\'s prompt and the run\'s answer and function calls (this run document has no conversation).',
        conv.missing.length ? ` Not defined by the case: ${conv.missing.join(', ')}.` : '') : null);
}

// The run's trace id (its latest attempt's OpenTelemetry trace, docs/otel.md) with a copy
// button; nothing when the run has none.
function traceLine(run, toast) {
    const traceId = traceIdOf(run);
    if (!traceId) return null;
    const code = h('code', { 'data-testid': 'exp-run-trace-id' }, traceId);
    return h('p', { class: 'small muted trace', 'data-testid': 'exp-run-trace', 'data-trace-id': traceId }, 'trace ', code, ' ',
        copyButton(traceId, {
            ariaLabel: 'Copy the trace id', testid: 'exp-run-trace-copy', target: code,
            done: (ok) => (ok ? toast('Trace id copied') : toast('Could not copy the trace id; it is selected for Ctrl+C', 'error')),
        }));
}
