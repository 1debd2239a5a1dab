// Pure helpers of an agent experiment's mocked tools and simulated user
// (shared/spec/agent-cases.md; the server's checks are domain/mock_tools.h and
// domain/simulator.h): the form's fields → the request's `tools` and `simulator` with the
// server's messages, a stored request → those fields ("edit as new"), the form field a server
// detail about them names, the plan's lines of the simulated user and the judge, and a run's
// figures: the agent's answers, tokens and cost apart from the simulated user's. No DOM, no
// state, no I/O.
import { DASH, fmtInt, fmtUsd } from './format.js';

export const TOOLS_MAX = 64;
export const TOOL_DESCRIPTION_MAX = 4096; // bytes
export const SIMULATOR_MAX_TURNS = 20;
export const SIMULATOR_DEFAULT_MAX_TURNS = 5;
export const SIMULATOR_DEFAULT_STOP = '[[DONE]]';
// A mocked tool's name: 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit.
const TOOL_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const TOOL_FIELDS = ['name', 'description', 'parameters'];

// The form's fields of this part, empty: tools as JSON text, the simulator's as text.
export function defaultAgentFields() {
    return { tools: '', simulator_model: '', simulator_provider: '', simulator_instructions: '', simulator_max_turns: '', simulator_stop: '' };
}

const filled = (v) => String(v ?? '').trim() !== '';
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const bytes = (s) => new TextEncoder().encode(s).length;

// form.tools (JSON text) → the request's `tools`, or undefined when empty; fail(field, message)
// with the server's messages (the first problem only, as the server).
export function toolsPart(form, fail) {
    const text = String(form.tools ?? '');
    if (!text.trim()) return undefined;
    let tools;
    try {
        tools = JSON.parse(text);
    } catch (e) {
        fail('tools', `tools must be a JSON array of {name, description, parameters}: ${e.message}`);
        return undefined;
    }
    const problem = toolsProblem(tools);
    if (problem) {
        fail('tools', problem);
        return undefined;
    }
    return tools;
}

// The server's first message about a `tools` value, or null (the JSON Schema itself is the
// server's to check).
export function toolsProblem(tools) {
    if (!Array.isArray(tools)) return 'tools must be an array';
    if (tools.length > TOOLS_MAX) return `tools must have at most ${TOOLS_MAX} items`;
    const names = [];
    for (let i = 0; i < tools.length; i++) {
        const t = tools[i];
        const at = `tools[${i}]`;
        if (!isObject(t)) return `${at} must be an object`;
        const unknown = Object.keys(t).find((k) => !TOOL_FIELDS.includes(k));
        if (unknown !== undefined) return `${at}.${unknown} is not a known field`;
        if (!('name' in t)) return `${at}.name is required`;
        if (typeof t.name !== 'string') return `${at}.name must be a string`;
        if (!TOOL_NAME.test(t.name)) return `${at}.name must be 1-64 characters of letters, digits, '_', '.' or '-', starting with a letter or digit`;
        if (names.includes(t.name)) return `${at}.name "${t.name}" is declared twice`;
        names.push(t.name);
        if ('description' in t && typeof t.description !== 'string') return `${at}.description must be a string`;
        if (typeof t.description === 'string' && bytes(t.description) > TOOL_DESCRIPTION_MAX) return `${at}.description must be at most ${TOOL_DESCRIPTION_MAX} bytes`;
        if (!('parameters' in t)) return `${at}.parameters is required`;
        if (!isObject(t.parameters)) return `${at}.parameters must be a JSON Schema object`;
    }
    return null;
}

// True when any of the simulated user's fields is filled in: then it is sent.
export function hasSimulator(form) {
    return ['simulator_model', 'simulator_provider', 'simulator_instructions', 'simulator_max_turns', 'simulator_stop'].some((k) => String(form[k] ?? '') !== '');
}

// The form's simulated user → {model: {model, provider?}, instructions, max_turns?, stop?}, or
// undefined when none of its fields is filled in; max_turns and stop are sent only when given
// (the server's defaults: 5 and "[[DONE]]"). fail(field, message) with the server's messages.
export function simulatorPart(form, fail) {
    if (!hasSimulator(form)) return undefined;
    const model = String(form.simulator_model ?? '').trim();
    if (!model) fail('simulator_model', 'simulator.model.model cannot be empty');
    const sim = { model: { model } };
    if (filled(form.simulator_provider)) sim.model.provider = String(form.simulator_provider).trim();
    const instructions = String(form.simulator_instructions ?? '');
    if (!instructions.trim()) fail('simulator_instructions', 'simulator.instructions cannot be empty');
    sim.instructions = instructions;
    if (filled(form.simulator_max_turns)) {
        const t = String(form.simulator_max_turns).trim();
        const n = /^\d+$/.test(t) ? Number(t) : null;
        if (n === null || n < 1 || n > SIMULATOR_MAX_TURNS) fail('simulator_max_turns', `simulator.max_turns must be an integer between 1 and ${SIMULATOR_MAX_TURNS}`);
        else sim.max_turns = n;
    }
    // The stop token is matched as typed; spaces are part of it.
    if (String(form.simulator_stop ?? '') !== '') sim.stop = String(form.simulator_stop);
    return sim;
}

// The fields of a stored request's tools and simulator (its normalized form: max_turns and
// stop always present), into form f.
export function agentToForm(req, f) {
    const r = isObject(req) ? req : {};
    f.tools = Array.isArray(r.tools) ? JSON.stringify(r.tools, null, 2) : '';
    const sim = isObject(r.simulator) ? r.simulator : null;
    if (!sim) return f;
    const m = isObject(sim.model) ? sim.model : {};
    f.simulator_model = typeof m.model === 'string' ? m.model : '';
    f.simulator_provider = typeof m.provider === 'string' ? m.provider : '';
    f.simulator_instructions = typeof sim.instructions === 'string' ? sim.instructions : '';
    f.simulator_max_turns = Number.isInteger(sim.max_turns) ? String(sim.max_turns) : '';
    f.simulator_stop = typeof sim.stop === 'string' ? sim.stop : '';
    return f;
}

const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

// The form field a server detail about the tools or the simulated user names, or null.
// instructions: the form's simulator instructions (a case's undefined template variable is
// theirs when they use it).
export function agentFieldForDetail(detail, { instructions = '' } = {}) {
    const d = String(detail || '');
    let m;
    if (/^tools\b/.test(d) || /^case [^:]+: tool_results\b/.test(d)) return 'tools';
    if (/^simulator\.model\.provider\b/.test(d)) return 'simulator_provider';
    if ((m = /^simulator\.(instructions|max_turns|stop)\b/.exec(d))) return `simulator_${m[1]}`;
    if (/^simulator\b/.test(d)) return 'simulator_model';
    if ((m = /^case [^:]+: template variable (\S+) is not defined/.exec(d)) && instructions
        && new RegExp(`\\{\\{\\s*${escapeRe(m[1])}\\s*\\}\\}`).test(instructions)) return 'simulator_instructions';
    return null;
}

const plural = (n, one, many) => `${fmtInt(n)} ${n === 1 ? one : many}`;

// The plan's lines of a judge and a simulated user (POST /v1/experiments/plan's `judge` and
// `simulator`, null without one): [{key, label, text}].
export function planAgentFigures(plan) {
    const p = plan || {};
    const out = [];
    const j = isObject(p.judge) ? p.judge : null;
    if (j) {
        const cost = isObject(j.cost_usd) ? `at most ${fmtUsd(j.cost_usd.output_max)} of output` : 'no price for the judge\'s model: not estimated';
        out.push({ key: 'judge', label: 'Judge', text: `${plural(j.calls, 'call', 'calls')} · at most ${fmtInt(j.output_tokens_max)} output tokens · ${cost}` });
    }
    const s = isObject(p.simulator) ? p.simulator : null;
    if (s) {
        const cost = isObject(s.cost_usd) ? `at most ${fmtUsd(s.cost_usd.output_max)} of output` : 'no price for its model: not estimated';
        out.push({
            key: 'simulator', label: 'Simulated user',
            text: `at most ${plural(s.calls_max, 'call', 'calls')} · at most ${fmtInt(s.output_tokens_max)} output tokens · ${cost} · the arms answer at most ${plural(s.agent_answers_max, 'time', 'times')} (the output maximum above counts every answer)`,
        });
    }
    return out;
}

const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

// A run's figures from its benchmark: {agent: {turns, input, output, total, cost, text},
// simulator: null | {calls, input, output, total, cost, text}}. With a simulated user `turns`
// counts the agent's answers and the simulator's use is its own (never in the agent's tokens
// and cost); its cost is absent when a call had no price.
export function runFigures(benchmark) {
    const b = isObject(benchmark) ? benchmark : {};
    const simulated = num(b.simulator_calls) !== null;
    const tokens = (input, output, total) => `${fmtInt(total)} tokens (${fmtInt(input)} input, ${fmtInt(output)} output)`;
    const cost = (v) => (v === null ? 'no price' : fmtUsd(v));
    const agent = {
        turns: num(b.turns), input: num(b.input_tokens), output: num(b.output_tokens),
        total: num(b.total_tokens) ?? (num(b.input_tokens) !== null && num(b.output_tokens) !== null ? b.input_tokens + b.output_tokens : null),
        cost: num(b.cost_usd),
    };
    const turns = agent.turns === null ? DASH : simulated ? plural(agent.turns, 'answer', 'answers') : plural(agent.turns, 'turn', 'turns');
    agent.text = `${turns} · ${tokens(agent.input, agent.output, agent.total)} · ${cost(agent.cost)}`;
    let simulator = null;
    if (simulated) {
        simulator = {
            calls: b.simulator_calls, input: num(b.simulator_input_tokens), output: num(b.simulator_output_tokens),
            total: num(b.simulator_total_tokens), cost: num(b.simulator_cost_usd),
        };
        simulator.text = `${plural(simulator.calls, 'call', 'calls')} · ${tokens(simulator.input, simulator.output, simulator.total)} · ${cost(simulator.cost)}`;
    }
    return { agent, simulator };
}
