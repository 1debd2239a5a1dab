// Pure helpers of the run view's conversation (shared/spec/agent-cases.md): the turns of a
// run as a list of user / assistant entries in conversation order, each assistant entry with
// the function calls of that answer (name, arguments, result or error). A run document's
// conversation (`transcript.conversation`, which the server keeps for a run over a case with
// messages; `conversation`, or a `transcript` that is such a list) is taken as it is; without one the
// turns are derived from what the run document has: the case's `messages` and the arm's
// prompt template, rendered with the case (as the server renders them, domain/template.h), then the
// run's answer with the harness's function calls (transcript.function_calls, or the
// generations' tool calls), as the server builds an evaluator's transcript
// (evd_trajectory_transcript). No DOM, no state, no I/O.

function isObject(v) {
    return v !== null && typeof v === 'object' && !Array.isArray(v);
}

const hasOwn = (o, k) => Object.prototype.hasOwnProperty.call(o, k);

const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*\}\}/g;

// The case's value of a dotted name: `expected` is the case's expected value, any other root a
// member of its vars; undefined when it is not defined.
export function lookup(c, name) {
    const parts = String(name).split('.');
    const root = parts[0] === 'expected' ? c : c && c.vars;
    if (!isObject(root) || !hasOwn(root, parts[0])) return undefined;
    let v = root[parts[0]];
    for (const p of parts.slice(1)) {
        if (!isObject(v) || !hasOwn(v, p)) return undefined;
        v = v[p];
    }
    return v;
}

// tmpl with every {{name}} replaced by the case's value (a string as it is, anything else as
// compact JSON); a name the case does not define is left as it is, and listed in `missing`.
// Returns {text, missing: [name…]}.
export function renderTemplate(tmpl, c) {
    const missing = [];
    const text = String(tmpl ?? '').replace(PLACEHOLDER, (all, name) => {
        const v = lookup(c, name);
        if (v === undefined) {
            if (!missing.includes(name)) missing.push(name);
            return all;
        }
        return typeof v === 'string' ? v : JSON.stringify(v);
    });
    return { text, missing };
}

// The texts an arm sends: {prompt, system_prompt} templates (null when none): the request's
// shared ones with dimension model, else the arm's variant's.
export function armTexts(exp, index) {
    const req = (exp && exp.request) || {};
    const str = (v) => (typeof v === 'string' ? v : null);
    if (req.dimension === 'model') return { prompt: str(req.prompt), system_prompt: str(req.system_prompt) };
    const v = index === 0 ? req.control : Array.isArray(req.treatments) ? req.treatments[index - 1] : null;
    return { prompt: str(v && v.prompt), system_prompt: str(v && v.system_prompt) };
}

function textOf(v) {
    if (v === undefined || v === null) return '';
    return typeof v === 'string' ? v : JSON.stringify(v);
}


// One function call as the conversation shows it: {name, arguments, result?, error?}.
function call(c) {
    const out = { name: String(c.name ?? c.function_id ?? c.tool_name ?? ''), arguments: isObject(c.arguments) ? c.arguments : {} };
    if (typeof c.error === 'string') out.error = c.error;
    else if (c.error !== undefined && c.error !== null) out.error = textOf(c.error);
    else if (hasOwn(c, 'result')) out.result = c.result;
    return out;
}

// A harness call record (transcript.function_calls[i]) named as the server names it in a
// transcript: by function id, else by tool name.
function harnessCall(fc) {
    return call({ ...fc, name: fc.function_id ?? fc.tool_name ?? fc.name });
}

function entry(m) {
    const role = m && m.role === 'assistant' ? 'assistant' : 'user';
    const out = { role, content: textOf(m && m.content) };
    if (role === 'assistant' && Array.isArray(m.function_calls) && m.function_calls.length) {
        out.function_calls = m.function_calls.filter(isObject).map(call);
    }
    return out;
}

// The harness's records of a run: {generations, function_calls} from the run document's
// transcript object (experiment runs) or the run itself (evaluation runs).
function harnessOf(run) {
    const t = run && isObject(run.transcript) ? run.transcript : run || {};
    return {
        generations: Array.isArray(t.generations) ? t.generations.filter(isObject) : [],
        function_calls: Array.isArray(t.function_calls) ? t.function_calls.filter(isObject) : [],
    };
}

// The conversation of a run, turn by turn:
//   {source: 'run' | 'derived', turns: [{role, content, origin, function_calls?}], missing}
// run: a run document; options: caseRow (the case: vars, expected, messages?), the arm's
// prompt template (armTexts().prompt) and whether a simulated user took part (the request's
// simulator). origin is 'case' (the case's earlier messages),
// 'prompt' (the arm's rendered prompt, the first user turn of the run), 'simulated' (a later
// user turn with a simulated user: its reply), 'user' (a later user turn otherwise),
// 'answer' (an assistant turn of the run), or absent where it cannot be told. A case row
// whose `messages` is null had none (the rows of GET …/cases carry the key); without the key
// the case's messages are unknown. missing: template names the case does not define (derived
// turns only).
export function runConversation(run, { caseRow = null, prompt = null, simulated = false } = {}) {
    // The case's messages as the arm sent them: templates apply to each content.
    const caseMessages = caseRow && Array.isArray(caseRow.messages)
        ? caseRow.messages.filter(isObject).map((m) => ({ ...entry(m), content: renderTemplate(textOf(m.content), caseRow).text }))
        : caseRow && hasOwn(caseRow, 'messages') && caseRow.messages === null ? [] : null;
    const given = run && Array.isArray(run.conversation) ? run.conversation
        : run && isObject(run.transcript) && Array.isArray(run.transcript.conversation) ? run.transcript.conversation
            : run && Array.isArray(run.transcript) ? run.transcript : null;
    if (given) {
        const turns = given.filter(isObject).map(entry);
        // The case's messages come first; the first user turn after them is the prompt. The
        // case's messages known, they are matched; unknown, a run without a simulated user
        // added its prompt (unless "") and one answer; with one, what is whose is not known.
        let k = null;
        if (caseMessages) {
            k = caseMessages.length <= turns.length
                && caseMessages.every((m, i) => turns[i].role === m.role && turns[i].content === m.content) ? caseMessages.length : 0;
        } else if (!simulated && turns.length && turns[turns.length - 1].role === 'assistant') {
            k = Math.max(0, turns.length - (prompt === '' ? 1 : 2));
        }
        if (k === null) return { source: 'run', turns, missing: [] };
        let prompted = prompt === '';
        turns.forEach((t, i) => {
            if (i < k) t.origin = 'case';
            else if (t.role === 'assistant') t.origin = 'answer';
            else {
                t.origin = !prompted ? 'prompt' : simulated ? 'simulated' : 'user';
                prompted = true;
            }
        });
        return { source: 'run', turns, missing: [] };
    }
    const turns = (caseMessages || []).map((m) => ({ ...m, origin: 'case' }));
    let missing = [];
    if (typeof prompt === 'string') {
        const r = renderTemplate(prompt, caseRow || {});
        missing = r.missing;
        // An empty prompt sends the case's conversation as it is.
        if (r.text !== '' || !turns.length) turns.push({ role: 'user', content: r.text, origin: 'prompt' });
    }
    const hv = harnessOf(run);
    let calls = hv.function_calls.map(harnessCall);
    if (!calls.length) {
        for (const g of hv.generations) for (const t of Array.isArray(g.tool_calls) ? g.tool_calls : []) if (isObject(t)) calls.push(call(t));
    }
    const answered = run && (run.output !== undefined && run.output !== null);
    if (answered || calls.length || hv.generations.length) {
        let content = textOf(run && run.output);
        // No output (a failed run): the last generation's text, if any.
        if (!answered) {
            const last = [...hv.generations].reverse().find((g) => typeof g.text === 'string');
            content = last ? last.text : '';
        }
        const a = { role: 'assistant', content, origin: 'answer' };
        if (calls.length) a.function_calls = calls;
        turns.push(a);
    }
    return { source: 'derived', turns, missing };
}

const ORIGIN_TEXT = { case: 'from the case', prompt: 'the prompt', simulated: 'simulated user', user: 'next user turn', answer: 'the answer' };

// The heading of a turn: "user · from the case", "user · simulated user", "assistant · the answer".
export function turnTitle(turn) {
    const o = ORIGIN_TEXT[turn && turn.origin];
    return o ? `${turn.role} · ${o}` : String(turn && turn.role);
}

// What a call gave: {kind: 'result' | 'error' | 'none', text}: the result as pretty JSON (a
// string as it is), the error message, or "no result recorded".
export function callOutcome(c) {
    if (c && typeof c.error === 'string') return { kind: 'error', text: c.error };
    if (c && hasOwn(c, 'result')) {
        return { kind: 'result', text: typeof c.result === 'string' ? c.result : JSON.stringify(c.result, null, 2) };
    }
    return { kind: 'none', text: 'no result recorded' };
}

// "6 turns · 2 from the simulated user · 1 function call", the conversation's summary line.
export function conversationSummary(conv) {
    const turns = (conv && conv.turns) || [];
    const calls = turns.reduce((n, t) => n + ((t.function_calls || []).length), 0);
    const plural = (n, w) => `${n} ${w}${n === 1 ? '' : 's'}`;
    const simulated = turns.filter((t) => t.origin === 'simulated').length;
    return [plural(turns.length, 'turn'), simulated ? `${simulated} from the simulated user` : '', calls ? plural(calls, 'function call') : ''].filter(Boolean).join(' · ');
}
