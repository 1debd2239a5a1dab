// Unit tests of the console's pure modules (request building and validation, server-error field
// mapping, the safe markdown renderer, report rows and formatting), run by node --test without a
// browser or a server. They import the shipped files from console/ directly.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultForm, formToRequest, requestToForm, fieldForDetail } from '../../console/request.js';
import { renderMarkdown } from '../../console/markdown.js';
import { judge, metricRows, runCounts, runVerdict, series, parseOrder } from '../../console/report.js';
import { fmtDelta, fmtMs, fmtUsd, fmtPct, shortId, traceIdOf } from '../../console/format.js';

const form = (over) => ({ ...defaultForm(), model: 'stub-model', provider: 'openai', prompt_a: 'Say hi', prompt_b: 'Say hello', expected: 'hi', ...over });
const errorsOf = (over) => formToRequest(form(over)).errors.map((e) => `${e.field}: ${e.message}`);

test('a prompt comparison builds the start request with the documented defaults', () => {
    const { request, errors } = formToRequest(form());
    assert.deepEqual(errors, []);
    assert.deepEqual(request, {
        dimension: 'prompt',
        model: { model: 'stub-model', provider: 'openai', system_prompt_strategy: 'enrich' },
        control: { label: 'baseline', prompt: 'Say hi', system_prompt: '' },
        treatment: { label: 'candidate', prompt: 'Say hello', system_prompt: '' },
        runs: 3,
        execution_order: 'balanced_control_first',
        limits: { execution: {}, evaluation: {} },
        evaluator: { function_id: 'eval::assert::normalized_text', arguments: { expected: 'hi' } },
    });
});

test('a system prompt comparison shares the prompt and sends null for "none"', () => {
    const { request, errors } = formToRequest(form({
        dimension: 'system_prompt', prompt_shared: 'Q', system_a_source: 'default', system_b_source: 'none', criteria: 'none',
    }));
    assert.deepEqual(errors, []);
    assert.equal(request.dimension, 'system_prompt');
    assert.deepEqual(request.control, { label: 'baseline', prompt: 'Q', system_prompt: '' });
    assert.deepEqual(request.treatment, { label: 'candidate', prompt: 'Q', system_prompt: null });
    assert.equal('evaluator' in request, false);
});

test('client checks use the server wording and name the field', () => {
    const table = [
        [{ model: '  ' }, 'model: model.model cannot be empty'],
        [{ prompt_a: ' ' }, 'prompt_a: control.prompt cannot be empty'],
        [{ prompt_b: '' }, 'prompt_b: treatment.prompt cannot be empty'],
        [{ prompt_b: 'Say hi' }, 'prompt_b: prompt comparison requires different prompts'],
        [{ dimension: 'system_prompt', prompt_shared: '' , system_a: 'x', system_b: 'y' }, 'prompt_shared: control.prompt cannot be empty'],
        [{ dimension: 'system_prompt', prompt_shared: 'q', system_a: 'x', system_b: 'x' }, 'system_b: system_prompt comparison requires different system prompts'],
        [{ dimension: 'system_prompt', prompt_shared: 'q', system_a_source: 'none', system_b_source: 'none' }, 'system_b: system_prompt comparison requires different system prompts'],
        [{ runs: '0' }, 'runs: runs must be a whole number of at least 1'],
        [{ runs: '2.5' }, 'runs: runs must be a whole number of at least 1'],
        [{ max_turns: '0' }, 'max_turns: limits.execution.max_turns must be greater than zero'],
        [{ invocation_timeout_seconds: '0' }, 'invocation_timeout_seconds: limits.execution.invocation_timeout_seconds must be greater than zero'],
        [{ max_total_tokens: '0' }, 'max_total_tokens: limits.execution.max_total_tokens must be greater than zero when supplied'],
        [{ max_cost_usd: '-1' }, 'max_cost_usd: limits.execution.max_cost_usd must be a finite non-negative number'],
        [{ max_cost_usd: 'NaN' }, 'max_cost_usd: limits.execution.max_cost_usd must be a finite non-negative number'],
        [{ criteria: 'custom', function_id: ' ' }, 'function_id: evaluator.function_id cannot be empty'],
        [{ concurrency: '17' }, 'concurrency: concurrency must be between 1 and 16'],
        [{ output: '{"type":"xml"}' }, 'output: output must be an object whose type is "text" or "json"'],
        [{ functions: '[1]' }, 'functions: functions must be a JSON object'],
    ];
    for (const [over, want] of table) assert.deepEqual(errorsOf(over), [want], JSON.stringify(over));
    assert.match(errorsOf({ metadata: '{bad' })[0], /^metadata: metadata must be valid JSON \(/);
    assert.match(errorsOf({ criteria: 'exact', exact_kind: 'json', expected: '{"a":' })[0], /^expected: evaluator.arguments.expected must be valid JSON/);
});

test('default (built-in) versus no system prompt is a valid comparison', () => {
    const { errors } = formToRequest(form({ dimension: 'system_prompt', prompt_shared: 'q', system_a_source: 'default', system_b_source: 'none' }));
    assert.deepEqual(errors, []);
});

test('runs above any client bound are left for the server to judge', () => {
    const { request, errors } = formToRequest(form({ runs: '1000000' }));
    assert.deepEqual(errors, []);
    assert.equal(request.runs, 1000000);
});

test('limits, model options, JSON fields and the exact evaluator are carried through', () => {
    const { request, errors } = formToRequest(form({
        max_total_tokens: '5000', max_cost_usd: '0.25', max_turns: '8', scenario_timeout_seconds: '30', max_error_spans: '0',
        mode: 'ask', thinking_level: 'high', strategy: 'override', execution_order: 'balanced_treatment_first',
        criteria: 'exact', exact_kind: 'json', expected: '{"n": 1}', functions: '{"allow":["a::*"]}', output: '{"type":"json"}',
        metadata: '{"k":[1]}', provider_options: '{"openai":{"x":1}}', concurrency: '4', a_label: ' ', b_label: 'new',
    }));
    assert.deepEqual(errors, []);
    assert.deepEqual(request.limits, { execution: { max_turns: 8, scenario_timeout_seconds: 30, max_total_tokens: 5000, max_cost_usd: 0.25 }, evaluation: { max_error_spans: 0 } });
    assert.deepEqual(request.model, { model: 'stub-model', provider: 'openai', system_prompt_strategy: 'override', mode: 'ask', thinking_level: 'high', provider_options: { openai: { x: 1 } } });
    assert.deepEqual(request.evaluator, { function_id: 'eval::assert::exact', arguments: { expected: { n: 1 } } });
    assert.equal(request.execution_order, 'balanced_treatment_first');
    assert.equal('label' in request.control, false, 'a blank label is omitted, not sent empty');
    assert.equal(request.treatment.label, 'new');
    assert.deepEqual([request.functions, request.output, request.metadata, request.concurrency], [{ allow: ['a::*'] }, { type: 'json' }, { k: [1] }, 4]);
});

test('"edit as new" reproduces the stored request', () => {
    const requests = [
        formToRequest(form()).request,
        formToRequest(form({ dimension: 'system_prompt', prompt_shared: 'q', system_a: 'be brief', system_b_source: 'none', criteria: 'custom', function_id: 'judge::x', arguments: '{"k":2}', max_cost_usd: '1' })).request,
        formToRequest(form({ criteria: 'exact', exact_kind: 'text', expected: 'OK', system_shared_source: 'custom', system_shared: 'sys', metadata: '{"a":null}' })).request,
    ];
    for (const req of requests) assert.deepEqual(formToRequest(requestToForm(req)).request, req);
});

test('server problem details map to the field they name', () => {
    const table = [
        ['model.model cannot be empty', 'prompt', 'normalized', 'model'],
        ['model.provider cannot be empty when supplied', 'prompt', 'normalized', 'provider'],
        ['model.provider_options must be an object', 'prompt', 'normalized', 'provider_options'],
        ['control.prompt cannot be empty', 'prompt', 'normalized', 'prompt_a'],
        ['control.prompt cannot be empty', 'system_prompt', 'normalized', 'prompt_shared'],
        ['treatment.prompt cannot be empty', 'prompt', 'normalized', 'prompt_b'],
        ['prompt comparison requires different prompts', 'prompt', 'normalized', 'prompt_b'],
        ['prompt comparison requires identical system prompts', 'prompt', 'normalized', 'system_shared'],
        ['system_prompt comparison requires identical prompts', 'system_prompt', 'none', 'prompt_shared'],
        ['system_prompt comparison requires different system prompts', 'system_prompt', 'none', 'system_b'],
        ['variant labels cannot be empty when supplied', 'prompt', 'none', 'a_label'],
        ['evaluator.function_id cannot be empty', 'prompt', 'custom', 'function_id'],
        ['eval::assert::normalized_text requires string evaluator arguments.expected', 'prompt', 'normalized', 'expected'],
        ['runs must be between 1 and 100', 'prompt', 'normalized', 'runs'],
        ['limits.execution.max_turns must be greater than zero', 'prompt', 'normalized', 'max_turns'],
        ['limits.execution.max_cost_usd must be a finite non-negative number', 'prompt', 'normalized', 'max_cost_usd'],
        ['limits.evaluation.max_error_spans must be an integer', 'prompt', 'normalized', 'max_error_spans'],
        ['concurrency must be between 1 and 16', 'prompt', 'normalized', 'concurrency'],
        ['functions.expose must be "native" or "agent_trigger"', 'prompt', 'normalized', 'functions'],
        ['output.type must be "text" or "json"', 'prompt', 'normalized', 'output'],
        ['request body is not valid JSON', 'prompt', 'normalized', null],
    ];
    for (const [detail, dim, criteria, want] of table) assert.equal(fieldForDetail(detail, dim, criteria), want, detail);
});

test('markdown never passes HTML through', () => {
    const out = renderMarkdown('<script>alert(1)</script>\n<img src=x onerror=alert(1)>');
    assert.equal(out.includes('<script'), false);
    assert.equal(out.includes('<img'), false);
    assert.ok(out.includes('&lt;script&gt;alert(1)&lt;/script&gt;'));
});

test('markdown links only to http(s) and mailto, and quotes cannot break out of href', () => {
    assert.equal(renderMarkdown('[x](javascript:alert(1))').includes('<a'), false);
    assert.equal(renderMarkdown('[x](data:text/html,hi)').includes('<a'), false);
    const ok = renderMarkdown('[docs](https://example.com/a?b=1&c="2")');
    assert.match(ok, /<a href="https:\/\/example\.com\/a\?b=1&amp;c=&quot;2&quot;" target="_blank" rel="noopener noreferrer">docs<\/a>/);
    assert.match(renderMarkdown('see https://example.com/x.'), /<a href="https:\/\/example\.com\/x"[^>]*>https:\/\/example\.com\/x<\/a>\./);
});

test('markdown renders the common constructs', () => {
    assert.equal(renderMarkdown('**bold** and *it* and `a*b*c`'), '<p><strong>bold</strong> and <em>it</em> and <code>a*b*c</code></p>');
    assert.equal(renderMarkdown('# Title'), '<h3 class="md-h">Title</h3>');
    assert.equal(renderMarkdown('- a\n- b'), '<ul><li>a</li><li>b</li></ul>');
    assert.equal(renderMarkdown('1. a\n2. b'), '<ol><li>a</li><li>b</li></ol>');
    assert.equal(renderMarkdown('```js\nif (a < b) {}\n```'), '<pre class="md-code" data-lang="js"><code>if (a &lt; b) {}</code></pre>');
    assert.equal(renderMarkdown('> quoted'), '<blockquote><p>quoted</p></blockquote>');
    assert.equal(renderMarkdown('line one\nline two\n\nnext'), '<p>line one<br>line two</p>\n<p>next</p>');
    assert.equal(renderMarkdown('snake_case_name stays'), '<p>snake_case_name stays</p>');
});

test('better and worse follow the direction of each metric', () => {
    assert.equal(judge(0.5, 'higher'), 'better');
    assert.equal(judge(-0.5, 'higher'), 'worse');
    assert.equal(judge(-8, 'lower'), 'better');
    assert.equal(judge(8, 'lower'), 'worse');
    assert.equal(judge(0, 'lower'), 'same');
    assert.equal(judge(null, 'lower'), null);
    const rows = metricRows({
        control_aggregate: { runs: 3, evaluated_runs: 3, passed: 1, pass_rate: 1 / 3, median_total_tokens: 20, median_wall_time_ms: 1000 },
        treatment_aggregate: { runs: 3, evaluated_runs: 3, passed: 3, pass_rate: 1, median_total_tokens: 12, median_wall_time_ms: 1500 },
        delta: { pass_rate: 2 / 3, median_total_tokens: -8, median_wall_time_ms: 500 },
    });
    const by = Object.fromEntries(rows.map((r) => [r.key, r]));
    assert.equal(rows.length, 12);
    assert.deepEqual([by.pass_rate.verdict, by.total_tokens.verdict, by.wall_time.verdict, by.cost.verdict], ['better', 'better', 'worse', null]);
    assert.deepEqual([by.pass_rate.aCount, by.pass_rate.bCount, by.pass_rate.evaluated], ['1/3', '3/3', true]);
    const none = metricRows({ control_aggregate: { evaluated_runs: 0, pass_rate: 0 }, treatment_aggregate: { evaluated_runs: 0, pass_rate: 0 }, delta: { pass_rate: 0 } });
    assert.equal(none[0].evaluated, false, 'pass rate is hidden when nothing was evaluated');
});

test('run counts and verdicts follow passed/null semantics', () => {
    const runs = [
        { status: 'completed', passed: true }, { status: 'completed', passed: false }, { status: 'completed', passed: null },
        { status: 'failed', passed: null }, { status: 'running' }, { status: 'pending' },
    ];
    assert.deepEqual(runCounts(runs), { total: 6, terminal: 4, met: 1, missed: 1, notEvaluated: 2, running: 1 });
    assert.deepEqual(runs.map(runVerdict), ['met criteria', 'missed criteria', 'not evaluated', 'failed', 'running', 'pending']);
});

test('chart series are in execution order with medians per variant and position', () => {
    const runs = [
        { execution_position: 2, role: 'treatment', iteration: 1, pair_position: 2, v: 30 },
        { execution_position: 1, role: 'control', iteration: 1, pair_position: 1, v: 10 },
        { execution_position: 3, role: 'treatment', iteration: 2, pair_position: 1, v: 50 },
        { execution_position: 4, role: 'control', iteration: 2, pair_position: 2, v: null },
    ];
    const s = series(runs, (r) => r.v);
    assert.deepEqual(s.points.map((p) => p.position), [1, 2, 3, 4]);
    assert.deepEqual(s.groups.map((g) => [g.role, g.pair, g.median]), [['control', 1, 10], ['control', 2, null], ['treatment', 1, 50], ['treatment', 2, 30]]);
    assert.deepEqual(parseOrder(['1:control:1', '2:treatment:1']), [{ position: 1, role: 'control', iteration: 1 }, { position: 2, role: 'treatment', iteration: 1 }]);
});

test('formatting of deltas, durations, money and ids', () => {
    assert.equal(fmtDelta(2 / 3, 'pct'), '+66.7 pp');
    assert.equal(fmtDelta(-1, 'pct'), '−100 pp');
    assert.equal(fmtDelta(-8, 'count'), '−8');
    assert.equal(fmtDelta(1500, 'ms'), '+1.50 s');
    assert.equal(fmtDelta(null, 'ms'), '—');
    assert.equal(fmtMs(950), '950 ms');
    assert.equal(fmtMs(125000), '2m 05s');
    assert.equal(fmtUsd(0.0000624), '$0.0000624');
    assert.equal(fmtUsd(1.5), '$1.5000');
    assert.equal(fmtPct(1 / 3), '33.3%');
    assert.equal(fmtPct(1), '100%');
    assert.equal(shortId('eval_0123456789abcdef0123456789abcdef'), '01234567');
});

test('a run shows a trace id only when it has a well-formed one', () => {
    const id = '4bf92f3577b34da6a3ce929d0e0e4736';
    assert.equal(traceIdOf({ trace_id: id }), id);
    for (const v of [undefined, null, '', 42, id.toUpperCase(), `${id}0`, id.slice(1), `${id.slice(0, 31)}g`])
        assert.equal(traceIdOf({ trace_id: v }), null, String(v));
    assert.equal(traceIdOf({}), null);
    assert.equal(traceIdOf(null), null);
});
