// Drives a real evald-stub with the official `openai` and `@anthropic-ai/sdk` clients:
// Responses, Chat Completions and Messages (each with a function-call round trip),
// model lists, structured output and error mapping. Each SDK must parse every reply.
// The stub binary comes from EVALD_STUB_BIN (set by CTest) or ../../build/evald-stub.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const here = path.dirname(fileURLToPath(import.meta.url));
const bin = process.env.EVALD_STUB_BIN || path.join(here, '..', '..', 'build', 'evald-stub');
const KEY = 'sk-js-sdk-test-key';

let child;
let base;
let openai;
let anthropic;

function startStub() {
  return new Promise((resolve, reject) => {
    assert.ok(existsSync(bin), `evald-stub not found at ${bin}`);
    child = spawn(bin, [], {
      env: { ...process.env, EVALD_STUB_LISTEN: '127.0.0.1:0', EVALD_STUB_REQUIRE_KEY: KEY,
             EVALD_STUB_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let buf = '';
    const timer = setTimeout(() => reject(new Error('no ready line from evald-stub')), 10000);
    child.stdout.on('data', (chunk) => {
      buf += chunk;
      const nl = buf.indexOf('\n');
      if (nl >= 0 && !base) {
        clearTimeout(timer);
        base = `http://${JSON.parse(buf.slice(0, nl)).listen}`;
        resolve();
      }
    });
    child.on('exit', (code) => {
      if (!base) reject(new Error(`evald-stub exited with ${code} before it was ready`));
    });
  });
}

async function control(method, p, body) {
  const res = await fetch(`${base}${p}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  assert.equal(res.status, 200, `${method} ${p}: ${JSON.stringify(json)}`);
  return json;
}

before(async () => {
  await startStub();
  openai = new OpenAI({ apiKey: KEY, baseURL: `${base}/v1`, maxRetries: 0, timeout: 10000 });
  anthropic = new Anthropic({ apiKey: KEY, baseURL: base, maxRetries: 0, timeout: 10000 });
});

after(async () => {
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.on('exit', (code, sig) => resolve({ code, sig })));
  child.kill('SIGTERM');
  const { code } = await exited;
  assert.equal(code, 0, 'evald-stub must exit 0 on SIGTERM');
});

const weatherSchema = {
  type: 'object',
  properties: { city: { type: 'string' } },
  required: ['city'],
  additionalProperties: false,
};

test('responses: text, usage and a function-call round trip', async () => {
  await control('PUT', '/_stub/script', {});
  const r1 = await openai.responses.create({ model: 'stub-model', input: 'Reply with exactly OK.' });
  assert.equal(r1.object, 'response');
  assert.equal(r1.status, 'completed');
  assert.equal(r1.output_text, 'OK');
  assert.equal(r1.usage.total_tokens, r1.usage.input_tokens + r1.usage.output_tokens);
  assert.equal(r1.usage.input_tokens_details.cached_tokens, 0);

  const tools = [{ type: 'function', name: 'get_weather', description: 'Weather of a city',
                   parameters: weatherSchema, strict: true }];
  const input = [{ role: 'user', content: 'Use get_weather for the city.' }];
  const r2 = await openai.responses.create({ model: 'stub-model', input, tools });
  const call = r2.output.find((item) => item.type === 'function_call');
  assert.ok(call, 'a function_call item');
  assert.equal(call.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.arguments), { city: 'stub' });
  assert.ok(call.call_id);

  const r3 = await openai.responses.create({
    model: 'stub-model',
    tools,
    input: [...input, call, { type: 'function_call_output', call_id: call.call_id,
                               output: 'sunny, 21 C' }],
  });
  assert.match(r3.output_text, /sunny, 21 C/);
});

test('chat completions: text and a tool-call round trip', async () => {
  await control('PUT', '/_stub/script', {});
  const c1 = await openai.chat.completions.create({
    model: 'stub-model',
    messages: [{ role: 'system', content: 'Be exact.' },
               { role: 'user', content: 'Reply with exactly OK.' }],
  });
  assert.equal(c1.object, 'chat.completion');
  assert.equal(c1.choices[0].message.content, 'OK');
  assert.equal(c1.choices[0].finish_reason, 'stop');
  assert.equal(c1.usage.total_tokens, c1.usage.prompt_tokens + c1.usage.completion_tokens);

  const tools = [{ type: 'function',
                   function: { name: 'get_weather', parameters: weatherSchema } }];
  const messages = [{ role: 'user', content: 'Please call get_weather.' }];
  const c2 = await openai.chat.completions.create({ model: 'stub-model', messages, tools });
  const msg = c2.choices[0].message;
  assert.equal(c2.choices[0].finish_reason, 'tool_calls');
  assert.equal(msg.tool_calls.length, 1);
  assert.equal(msg.tool_calls[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(msg.tool_calls[0].function.arguments), { city: 'stub' });

  const c3 = await openai.chat.completions.create({
    model: 'stub-model',
    tools,
    messages: [...messages, msg,
               { role: 'tool', tool_call_id: msg.tool_calls[0].id, content: 'rain, 9 C' }],
  });
  assert.match(c3.choices[0].message.content, /rain, 9 C/);
});

test('messages: text, usage and a tool-use round trip', async () => {
  await control('PUT', '/_stub/script', {});
  const m1 = await anthropic.messages.create({
    model: 'stub-model',
    max_tokens: 64,
    system: 'Be exact.',
    messages: [{ role: 'user', content: 'Reply with exactly OK.' }],
  });
  assert.equal(m1.type, 'message');
  assert.equal(m1.stop_reason, 'end_turn');
  assert.equal(m1.content[0].type, 'text');
  assert.equal(m1.content[0].text, 'OK');
  assert.equal(m1.usage.cache_read_input_tokens, 0);
  assert.ok(m1.usage.output_tokens >= 1);

  const tools = [{ name: 'get_weather', description: 'Weather of a city',
                   input_schema: weatherSchema }];
  const messages = [{ role: 'user', content: 'Please call get_weather.' }];
  const m2 = await anthropic.messages.create({ model: 'stub-model', max_tokens: 64, tools,
                                               messages });
  assert.equal(m2.stop_reason, 'tool_use');
  const use = m2.content.find((b) => b.type === 'tool_use');
  assert.equal(use.name, 'get_weather');
  assert.deepEqual(use.input, { city: 'stub' });

  const m3 = await anthropic.messages.create({
    model: 'stub-model',
    max_tokens: 64,
    tools,
    messages: [...messages, { role: 'assistant', content: m2.content },
               { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id,
                                           content: 'fog, 4 C' }] }],
  });
  assert.match(m3.content[0].text, /fog, 4 C/);
});

test('scripted replies and usage reach both SDKs', async () => {
  await control('PUT', '/_stub/script', {
    rules: [{ when: { api: 'messages' }, reply: { text: 'from script' },
              usage: { input_tokens: 10, cached_tokens: 4, cache_write_tokens: 1,
                       output_tokens: 6, reasoning_tokens: 2 } }],
    default: { reply: { json: { verdict: 'GREEN' } },
               usage: { input_tokens: 10, cached_tokens: 4, cache_write_tokens: 1,
                        output_tokens: 6, reasoning_tokens: 2 } },
  });
  const r = await openai.responses.create({
    model: 'stub-model',
    input: 'judge',
    text: { format: { type: 'json_schema', name: 'verdict', strict: true,
                      schema: { type: 'object', properties: { verdict: { type: 'string' } },
                                required: ['verdict'], additionalProperties: false } } },
  });
  assert.deepEqual(JSON.parse(r.output_text), { verdict: 'GREEN' });
  assert.equal(r.usage.input_tokens, 15);
  assert.equal(r.usage.input_tokens_details.cached_tokens, 4);
  assert.equal(r.usage.output_tokens_details.reasoning_tokens, 2);

  const m = await anthropic.messages.create({
    model: 'stub-model', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }],
  });
  assert.equal(m.content[0].text, 'from script');
  assert.equal(m.usage.input_tokens, 10);
  assert.equal(m.usage.cache_read_input_tokens, 4);
  assert.equal(m.usage.cache_creation_input_tokens, 1);
  assert.equal(m.usage.output_tokens, 6);
});

test('model lists in both shapes', async () => {
  await control('PUT', '/_stub/script', { models: ['alpha', 'beta'] });
  const ids = [];
  for await (const model of openai.models.list()) ids.push(model.id);
  assert.deepEqual(ids, ['alpha', 'beta']);
  const page = await anthropic.models.list();
  assert.deepEqual(page.data.map((m) => m.id), ['alpha', 'beta']);
  assert.equal(page.data[0].type, 'model');
  const one = await anthropic.models.retrieve('beta');
  assert.equal(one.display_name, 'beta');
});

test('provider errors become the SDKs\' typed errors', async () => {
  await control('PUT', '/_stub/script', {
    rules: [{ when: { prompt_contains: 'busy' }, fault: { status: 429, retry_after_s: 1 } },
            { when: { prompt_contains: 'broken' }, fault: { status: 500 } }],
  });
  await assert.rejects(
    openai.responses.create({ model: 'stub-model', input: 'busy' }),
    (err) => err instanceof OpenAI.RateLimitError && err.status === 429 &&
      err.headers.get('retry-after') === '1' && err.code === 'rate_limit_exceeded');
  await assert.rejects(
    openai.chat.completions.create({ model: 'stub-model',
                                     messages: [{ role: 'user', content: 'broken' }] }),
    (err) => err instanceof OpenAI.InternalServerError && err.status === 500);
  await assert.rejects(
    anthropic.messages.create({ model: 'stub-model', max_tokens: 8,
                                messages: [{ role: 'user', content: 'busy' }] }),
    (err) => err instanceof Anthropic.RateLimitError && err.error.error.type === 'rate_limit_error');
  const wrong = new OpenAI({ apiKey: 'sk-wrong', baseURL: `${base}/v1`, maxRetries: 0 });
  await assert.rejects(wrong.responses.create({ model: 'stub-model', input: 'x' }),
                       (err) => err instanceof OpenAI.AuthenticationError);
  const wrongA = new Anthropic({ apiKey: 'sk-wrong', baseURL: base, maxRetries: 0 });
  await assert.rejects(
    wrongA.messages.create({ model: 'stub-model', max_tokens: 8,
                             messages: [{ role: 'user', content: 'x' }] }),
    (err) => err instanceof Anthropic.AuthenticationError);
});

test('the request log saw the SDKs\' headers, with keys redacted', async () => {
  const log = await control('GET', '/_stub/requests');
  assert.ok(log.requests.length > 0);
  const text = JSON.stringify(log);
  assert.ok(!text.includes(KEY), 'the API key must never appear in the log');
  const oa = log.requests.find((r) => r.api === 'responses');
  assert.equal(oa.headers.authorization, 'REDACTED');
  assert.match(oa.headers['user-agent'], /OpenAI/);
  const an = log.requests.find((r) => r.api === 'messages');
  // Recent Anthropic SDKs send the key as a bearer token, older ones as x-api-key.
  assert.equal(an.headers['x-api-key'] ?? an.headers.authorization, 'REDACTED');
  assert.ok(an.headers['anthropic-version']);
});
