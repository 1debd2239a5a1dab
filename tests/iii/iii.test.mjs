// evald as an iii worker, end to end: a throwaway PostgreSQL database, evald-stub as the
// model, the fake iii engine (fake-engine.mjs) in this process, evald connected to it
// with III_URL, and a second worker written with the real iii-sdk that starts
// evaluations through the engine, scores runs as the evaluator, serves a function the
// agent calls, and binds eval::completed and eval::experiment::completed. Run through run.sh (tests/cmake/iii.cmake).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { registerWorker } from 'iii-sdk';
import { startFakeEngine } from './fake-engine.mjs';

const EVALD_BIN = process.env.EVALD_BIN;
const STUB_BIN = process.env.EVALD_STUB_BIN;
const ADMIN_URL = process.env.EVALD_TEST_DATABASE_URL;

const scratch = mkdtempSync(join(tmpdir(), 'evald-iii-'));
const children = [];
let dbName, dbUrl, stub, evald, engine, worker, enginePort;

// What the SDK worker saw.
const seen = { completed: [], any: [], experiments: [], scored: [], lookups: [] };

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function psql(url, sql) {
  return execFileSync('psql', [url, '-v', 'ON_ERROR_STOP=1', '-tAqc', sql], { encoding: 'utf8' }).trim();
}

// Starts a binary that prints a {"listen":"host:port"} line when ready.
function spawnReady(name, bin, args, env) {
  return new Promise((resolve, reject) => {
    const logPath = join(scratch, `${name}.log`);
    const child = spawn(bin, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    const log = [];
    child.stderr.on('data', (d) => log.push(d.toString()));
    child.logText = () => log.join('');
    child.on('exit', () => writeFileSync(logPath, log.join('')));
    children.push(child);
    const timer = setTimeout(() => reject(new Error(`${name} did not become ready:\n${log.join('')}`)), 20000);
    const rl = createInterface({ input: child.stdout });
    rl.once('line', (line) => {
      clearTimeout(timer);
      try {
        child.listen = JSON.parse(line).listen;
        resolve(child);
      } catch (e) {
        reject(new Error(`${name} printed ${line}`));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${code}:\n${log.join('')}`));
    });
  });
}

function stopChild(child, signal = 'SIGTERM', timeoutMs = 10000) {
  return new Promise((resolve) => {
    if (!child || child.exitCode !== null || child.signalCode !== null) return resolve(child?.exitCode);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', (code, sig) => {
      clearTimeout(timer);
      resolve(code ?? sig);
    });
    child.kill(signal);
  });
}

async function rest(method, path, body) {
  const res = await fetch(`http://${evald.listen}${path}`, {
    method,
    headers: body ? { 'content-type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

async function waitUntil(fn, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

const terminal = (s) => ['completed', 'failed', 'cancelled'].includes(s);

async function waitTerminal(id, timeoutMs = 30000) {
  return waitUntil(
    async () => {
      const r = await rest('GET', `/v1/evaluations/${id}/status`);
      return r.status === 200 && terminal(r.body?.status) ? r.body : null;
    },
    timeoutMs,
    `evaluation ${id} to finish`,
  );
}

function startRequest(overrides = {}) {
  return {
    dimension: 'prompt',
    model: { model: 'stub-model', provider: 'openai' },
    control: { prompt: 'Reply with exactly OK.', system_prompt: 'Follow the user request exactly.' },
    treatment: { prompt: 'Return exactly the text OK.', system_prompt: 'Follow the user request exactly.' },
    evaluator: { function_id: 'test::score', arguments: { expected: 'OK' } },
    runs: 1,
    ...overrides,
  };
}

async function evaldWorker(timeoutMs = 15000) {
  return engine.waitFor(() => {
    const w = engine.workerNamed('evald:');
    return w && engine.functions.get('eval::start')?.workerId === w.id && engine.triggerTypes.has('eval::completed')
      ? w
      : null;
  }, timeoutMs, 'evald to register with the engine');
}

// The SDK worker: evaluator, agent function, and two completion sinks.
function startSdkWorker() {
  const w = registerWorker(engine.url, {
    workerName: 'iii-test-worker',
    enableMetricsReporting: false,
    otel: { enabled: false },
    invocationTimeoutMs: 20000,
    reconnectionConfig: { initialDelayMs: 200, maxDelayMs: 1000 },
  });
  w.registerFunction(
    'test::score',
    async (input) => {
      seen.scored.push(input);
      const out = typeof input.output === 'string' ? input.output.trim() : JSON.stringify(input.output);
      const passed = out === input.arguments?.expected;
      return { passed, score: passed ? 1 : 0.25, reason: 'scored by the iii test worker', details: { run_id: input.run_id } };
    },
    { description: 'Scores a run: passes when the output equals arguments.expected' },
  );
  w.registerFunction(
    'test::lookup',
    async (input) => {
      seen.lookups.push(input);
      return { city: input.city, temperature_c: 21 };
    },
    {
      description: 'Looks up the weather of a city',
      request_format: {
        type: 'object',
        properties: { city: { type: 'string', minLength: 2 } },
        required: ['city'],
        additionalProperties: false,
      },
    },
  );
  w.registerFunction('test::on-completed', async (event, metadata) => {
    seen.completed.push({ event, metadata });
    return null;
  });
  w.registerFunction('test::on-any', async (event, metadata) => {
    seen.any.push({ event, metadata });
    return null;
  });
  w.registerFunction('test::on-experiment', async (event, metadata) => {
    seen.experiments.push({ event, metadata });
    return null;
  });
  return w;
}

before(async () => {
  dbName = `evald_iii_${randomBytes(6).toString('hex')}`;
  psql(ADMIN_URL, `CREATE DATABASE ${dbName}`);
  const u = new URL(ADMIN_URL);
  u.pathname = `/${dbName}`;
  dbUrl = u.toString();

  // Runs whose prompt mentions "slowly" take 1.5 s at the model.
  const script = join(scratch, 'stub-script.json');
  writeFileSync(script, JSON.stringify({ rules: [{ when: { prompt_contains: 'slowly' }, latency_ms: 1500 }] }));
  stub = await spawnReady('evald-stub', STUB_BIN, ['--listen', '127.0.0.1:0', '--script', script], {});

  engine = await startFakeEngine();
  enginePort = engine.port;
  worker = startSdkWorker();
  await engine.waitFor(() => engine.functions.has('test::score'), 10000, 'the SDK worker');

  evald = await spawnReady('evald', EVALD_BIN, [], {
    EVALD_DATABASE_URL: dbUrl,
    EVALD_LISTEN: '127.0.0.1:0',
    EVALD_WORKERS: '4',
    EVALD_SWEEP_INTERVAL_MS: '500',
    EVALD_LOG_LEVEL: 'debug',
    OPENAI_BASE_URL: `http://${stub.listen}/v1`,
    OPENAI_API_KEY: 'stub-key',
    III_URL: engine.url,
  });
  await evaldWorker();
});

after(async () => {
  try {
    await worker?.shutdown();
  } catch {}
  for (const c of children) await stopChild(c);
  await engine?.close();
  if (dbName) {
    try {
      psql(ADMIN_URL, `DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    } catch {}
  }
  // The logs/json check reads every evald and stub log of the suites there.
  if (process.env.EVALD_TEST_LOG_DIR) {
    for (const f of ['evald.log', 'evald-stub.log']) {
      try {
        mkdirSync(process.env.EVALD_TEST_LOG_DIR, { recursive: true });
        writeFileSync(join(process.env.EVALD_TEST_LOG_DIR, `iii-${process.pid}-${f}`), readFileSync(join(scratch, f)));
      } catch {}
    }
  }
  if (process.exitCode) {
    for (const f of ['evald.log', 'evald-stub.log']) {
      try {
        const text = readFileSync(join(scratch, f), 'utf8');
        console.error(`---- ${f} (last 20000 characters)\n${text.slice(-20000)}`);
        // The whole log goes with the other test artifacts when there is a place for them.
        if (process.env.EVALD_ARTIFACTS_DIR) {
          mkdirSync(join(process.env.EVALD_ARTIFACTS_DIR, 'iii'), { recursive: true });
          writeFileSync(join(process.env.EVALD_ARTIFACTS_DIR, 'iii', f), text);
        }
      } catch {}
    }
  }
  rmSync(scratch, { recursive: true, force: true });
});

test('evald registers as a worker with every eval function, its schemas and the trigger type', async () => {
  const w = await evaldWorker();
  assert.equal(w.info.runtime, 'c');
  assert.match(w.info.name, /^evald:.+:\d+$/);
  assert.equal(typeof w.info.pid, 'number');
  // The registration call came first (0.23 engines buffer registrations until it).
  const firstRegistration = w.received.findIndex((m) => m.type.startsWith('register'));
  const registerCall = w.received.findIndex((m) => m.function_id === 'engine::workers::register');
  assert.ok(registerCall >= 0 && registerCall < firstRegistration, 'engine::workers::register precedes registrations');

  const catalogue = (await rest('GET', '/v1/functions')).body;
  assert.ok(catalogue.functions.length >= 12);
  for (const f of catalogue.functions) {
    const reg = engine.functions.get(f.name);
    assert.ok(reg, `${f.name} is registered`);
    assert.equal(reg.workerId, w.id);
    assert.equal(reg.message.description, f.description);
    assert.deepEqual(reg.message.request_format, f.request_schema);
    assert.deepEqual(reg.message.response_format, f.response_schema);
    assert.deepEqual(reg.message.metadata, f.metadata);
  }
  const tt = engine.triggerTypes.get('eval::completed').message;
  assert.equal(tt.description, 'An evaluation reached a terminal status.');
  assert.equal(tt.trigger_request_format.additionalProperties, false);
  assert.deepEqual(tt.call_request_format.required, ['evaluation_id', 'status', 'timestamp']);
  const xt = engine.triggerTypes.get('eval::experiment::completed');
  assert.ok(xt, 'the experiment trigger type is registered');
  assert.equal(xt.workerId, w.id);
  assert.equal(xt.message.description, 'An experiment reached a terminal status.');
  assert.equal(xt.message.trigger_request_format.additionalProperties, false);
  assert.deepEqual(Object.keys(xt.message.trigger_request_format.properties), ['experiment_id']);
  assert.deepEqual(xt.message.call_request_format.required, ['experiment_id', 'status', 'timestamp', 'verdicts']);
  assert.deepEqual(engine.dropped.filter((d) => d.workerId === w.id), [], 'no frame of evald was undecodable');
});

test('a JSON ping from the engine is answered with a pong', async () => {
  const w = await evaldWorker();
  const before = w.received.filter((m) => m.type === 'pong').length;
  engine.send(w.id, { type: 'ping' });
  await engine.waitFor(() => w.received.filter((m) => m.type === 'pong').length > before, 5000, 'pong');
});

test('eval functions answer through the engine, with errors in the eval worker shape', async () => {
  const list = await worker.trigger({ function_id: 'eval::list', payload: { limit: 5 } });
  assert.ok(Array.isArray(list.evaluations));
  assert.equal(await worker.trigger({ function_id: 'eval::status', payload: { evaluation_id: 'eval_0000' } }), null);

  await assert.rejects(
    worker.trigger({ function_id: 'eval::start', payload: { dimension: 'prompt' } }),
    (e) => e.code === 'invocation_failed' && /^invocation_failed: invalid request: model/.test(e.message),
  );
  await assert.rejects(
    worker.trigger({ function_id: 'eval::cancel', payload: {} }),
    (e) => e.code === 'invocation_failed' && /^invocation_failed: invalid request: .*evaluation_id/.test(e.message),
  );
  // The engine's function_not_found for an id nobody serves.
  await assert.rejects(worker.trigger({ function_id: 'eval::nope', payload: {} }), (e) => e.code === 'function_not_found');
  // A function evald does not serve, sent to it directly, is refused by evald itself.
  const w = await evaldWorker();
  const id = '6f1d2c3b-4a5e-4f60-8172-93a4b5c6d7e8';
  engine.send(w.id, { type: 'invokefunction', invocation_id: id, function_id: 'other::fn', data: {} });
  const answer = await engine.waitFor(
    () => w.received.find((m) => m.type === 'invocationresult' && m.invocation_id === id),
    5000,
    'the refusal',
  );
  assert.equal(answer.error.code, 'function_not_found');
});

test('the SDK worker starts evaluations through the engine, scores them, and hears of its own only', async () => {
  const a = await worker.trigger({ function_id: 'eval::start', payload: startRequest() });
  const b = await worker.trigger({ function_id: 'eval::start', payload: startRequest({ runs: 2 }) });
  assert.equal(a.status, 'queued');
  assert.match(a.evaluation_id, /^eval_[0-9a-f]{32}$/);
  // Bound after starting: a binding filtered on an evaluation gets its event even if it
  // finished first.
  worker.registerTrigger({
    type: 'eval::completed',
    function_id: 'test::on-completed',
    config: { evaluation_id: a.evaluation_id },
    metadata: { who: 'filtered' },
  });
  const anyBinding = worker.registerTrigger({ type: 'eval::completed', function_id: 'test::on-any', config: null });

  await waitTerminal(a.evaluation_id);
  await waitTerminal(b.evaluation_id);
  await waitUntil(() => seen.completed.length >= 1, 10000, 'the completion event');
  await sleep(1500); // anything extra would arrive by now
  assert.equal(seen.completed.length, 1, 'exactly one event for the filtered binding');
  const { event, metadata } = seen.completed[0];
  assert.equal(event.evaluation_id, a.evaluation_id);
  assert.equal(event.status, 'completed');
  assert.equal(typeof event.timestamp, 'number');
  assert.equal(typeof event.eligible, 'boolean');
  assert.deepEqual(metadata, { who: 'filtered' });

  // The evaluator ran in the SDK worker, once per run, and its scores are in the report.
  const result = await worker.trigger({ function_id: 'eval::result', payload: { evaluation_id: a.evaluation_id } });
  assert.equal(result.status, 'completed');
  const runs = result.report.runs;
  assert.equal(runs.length, 2);
  for (const r of runs) {
    assert.equal(r.evaluation.reason, 'scored by the iii test worker');
    assert.equal(r.evaluation.details.run_id, r.run_id);
  }
  assert.deepEqual(runs.map((r) => r.evaluation.passed).sort(), [false, true]);
  const scoredForA = seen.scored.filter((s) => s.evaluation_id === a.evaluation_id);
  assert.equal(scoredForA.length, 2);
  anyBinding.unregister();
});

test('an unfiltered binding hears of evaluations that finish after it, once each', async () => {
  const before = seen.any.length;
  const binding = worker.registerTrigger({ type: 'eval::completed', function_id: 'test::on-any', config: {} });
  await sleep(300);
  const c = await worker.trigger({ function_id: 'eval::start', payload: startRequest({ evaluator: undefined }) });
  await waitTerminal(c.evaluation_id);
  await waitUntil(() => seen.any.slice(before).some((e) => e.event.evaluation_id === c.evaluation_id), 10000, 'the event');
  await sleep(1000);
  const mine = seen.any.slice(before).filter((e) => e.event.evaluation_id === c.evaluation_id);
  assert.equal(mine.length, 1);
  assert.equal(mine[0].event.eligible, undefined, 'no evaluator: eligibility unknown');
  binding.unregister();
});

// An experiment.completed event recorded as evd_store_experiment_event records it (the
// experiments engine calls that in its terminal transaction): the outbox row and the
// notification, in one transaction.
function recordExperimentEvent(experimentId, payload) {
  const eventId = `evt_${randomBytes(16).toString('hex')}`;
  const json = JSON.stringify(payload).replace(/'/g, "''");
  psql(
    dbUrl,
    `BEGIN; INSERT INTO completion_events (event_id, event_type, experiment_id, payload, created_at)` +
      ` VALUES ('${eventId}', 'experiment.completed', '${experimentId}', '${json}'::jsonb,` +
      ` (extract(epoch FROM clock_timestamp()) * 1000)::bigint)` +
      ` ON CONFLICT (experiment_id) DO NOTHING; SELECT pg_notify('evald_completed', '${eventId}'); COMMIT`,
  );
  return eventId;
}

test('eval::experiment::completed reaches its bindings once, and only theirs', async () => {
  const filtered = worker.registerTrigger({
    type: 'eval::experiment::completed',
    function_id: 'test::on-experiment',
    config: { experiment_id: 'exp_iii_1' },
    metadata: { who: 'experiment' },
  });
  const unfiltered = worker.registerTrigger({ type: 'eval::experiment::completed', function_id: 'test::on-experiment', config: null });
  const evalBinding = worker.registerTrigger({ type: 'eval::completed', function_id: 'test::on-any', config: {} });
  try {
    await experimentBindings();
  } finally {
    filtered.unregister();
    unfiltered.unregister();
    evalBinding.unregister();
  }
});

async function experimentBindings() {
  const beforeAny = seen.any.length;
  const beforeCompleted = seen.completed.length;
  await engine.waitFor(
    () => [...engine.triggers.values()].filter((t) => t.message.trigger_type === 'eval::experiment::completed' && t.results.length).length >= 2,
    5000,
    'the experiment bindings to reach evald',
  );
  await sleep(300);

  // An evaluation: the eval::completed binding hears of it, no experiment binding does.
  const c = await worker.trigger({ function_id: 'eval::start', payload: startRequest({ evaluator: undefined }) });
  await waitTerminal(c.evaluation_id);
  await waitUntil(() => seen.any.slice(beforeAny).some((e) => e.event.evaluation_id === c.evaluation_id), 10000, 'the evaluation event');

  const payload = {
    experiment_id: 'exp_iii_1',
    status: 'completed',
    timestamp: Date.now(),
    verdicts: [{ treatment: 1, label: 'shorter', verdict: 'better' }],
  };
  const eventId = recordExperimentEvent('exp_iii_1', payload);
  recordExperimentEvent('exp_iii_1', payload); // a repeated transition writes nothing
  await waitUntil(() => seen.experiments.length >= 2, 10000, 'the experiment event at both bindings');
  await sleep(1500); // anything extra would arrive by now
  assert.equal(seen.experiments.length, 2, 'one firing per experiment binding');
  for (const { event } of seen.experiments) {
    const { _caller_worker_id, ...body } = event; // the engine's addition
    assert.deepEqual(body, payload);
  }
  assert.deepEqual(
    seen.experiments.map((e) => e.metadata ?? null).sort((a, b) => (a === null) - (b === null)),
    [{ who: 'experiment' }, null],
  );
  assert.ok(!seen.any.slice(beforeAny).some((e) => e.event.experiment_id), 'eval::completed got no experiment event');
  assert.equal(seen.completed.length, beforeCompleted);
  assert.equal(psql(dbUrl, `SELECT count(*) FROM completion_events WHERE experiment_id = 'exp_iii_1'`), '1');
  assert.equal(psql(dbUrl, `SELECT count(*) FROM iii_deliveries WHERE event_id = '${eventId}'`), '2');
  assert.equal(
    psql(dbUrl, `SELECT count(*) FROM iii_bindings WHERE trigger_type = 'eval::experiment::completed' AND experiment_id = 'exp_iii_1'`),
    '1',
  );

  // A config of the other trigger type is refused with this one's message.
  worker.registerTrigger({ type: 'eval::experiment::completed', function_id: 'test::on-experiment', config: { evaluation_id: 'x' } });
  const refused = await engine.waitFor(
    () =>
      [...engine.triggers.values()].find(
        (t) => t.message.trigger_type === 'eval::experiment::completed' && t.results.some((r) => r.error),
      ),
    5000,
    'the refusal',
  );
  const err = refused.results.find((r) => r.error).error;
  assert.equal(err.code, 'trigger_registration_failed');
  assert.equal(err.message, 'invalid eval::experiment::completed config: unknown field `evaluation_id`, expected `experiment_id`');
}

test('an invalid binding config is refused with the contract message', async () => {
  worker.registerTrigger({ type: 'eval::completed', function_id: 'test::on-any', config: { evaluation: 'x' } });
  const refused = await engine.waitFor(
    () => [...engine.triggers.values()].find((t) => t.message.trigger_type === 'eval::completed' && t.results.some((r) => r.error)),
    5000,
    'the refusal',
  );
  const err = refused.results.find((r) => r.error).error;
  assert.equal(err.code, 'trigger_registration_failed');
  assert.match(err.message, /^invalid eval::completed config: unknown field `evaluation`/);
});

test('the agent calls a function of the SDK worker through the engine', async () => {
  const before = seen.lookups.length;
  const r = await worker.trigger({
    function_id: 'eval::start',
    payload: startRequest({
      control: { prompt: 'Use test_lookup to find the weather.', system_prompt: null },
      treatment: { prompt: 'Call test_lookup, then report the weather.', system_prompt: null },
      functions: { allow: ['test::*'], deny: ['test::score'], expose: 'native' },
      evaluator: undefined,
    }),
  });
  await waitTerminal(r.evaluation_id);
  const result = await worker.trigger({ function_id: 'eval::result', payload: { evaluation_id: r.evaluation_id } });
  for (const run of result.report.runs) {
    assert.equal(run.status, 'completed', JSON.stringify(run.failures));
    assert.equal(run.metrics.totals.function_calls, 1);
    assert.equal(run.metrics.totals.function_call_errors, 0);
    assert.match(JSON.stringify(run.output), /temperature_c/);
  }
  const calls = seen.lookups.slice(before);
  assert.equal(calls.length, 2);
  // Arguments the stub built from the schema the engine reported (minLength 2).
  assert.ok(calls.every((c) => typeof c.city === 'string' && c.city.length >= 2));
});

test('an engine restart mid-evaluation loses neither the registrations nor the completion', async () => {
  const w0 = await evaldWorker();
  const d = await worker.trigger({
    function_id: 'eval::start',
    payload: startRequest({
      control: { prompt: 'Reply with exactly OK, slowly.', system_prompt: null },
      treatment: { prompt: 'Return exactly the text OK, slowly.', system_prompt: null },
      evaluator: { function_id: 'eval::assert::normalized_text', arguments: { expected: 'OK' } },
    }),
  });
  worker.registerTrigger({
    type: 'eval::completed',
    function_id: 'test::on-completed',
    config: { evaluation_id: d.evaluation_id },
  });
  await engine.waitFor(
    () => [...engine.triggers.values()].some((t) => t.message.config?.evaluation_id === d.evaluation_id && t.results.length),
    5000,
    'the binding to reach evald',
  );
  await waitUntil(async () => (await rest('GET', `/v1/evaluations/${d.evaluation_id}/status`)).body?.status === 'running', 10000, 'running');

  // The engine goes away while the evaluation runs, and stays away until it has finished.
  await engine.close();
  const done = await waitTerminal(d.evaluation_id, 30000);
  assert.equal(done.status, 'completed');
  assert.equal(seen.completed.filter((e) => e.event.evaluation_id === d.evaluation_id).length, 0);

  engine = await startFakeEngine({ port: enginePort });
  const w1 = await evaldWorker(20000);
  assert.notEqual(w1.id, w0.id);
  assert.ok(w1.received.some((m) => m.type === 'reattach' && m.previous_worker_id), 'evald reattaches');
  await waitUntil(() => seen.completed.some((e) => e.event.evaluation_id === d.evaluation_id), 20000, 'the completion after the restart');
  await sleep(1500);
  const mine = seen.completed.filter((e) => e.event.evaluation_id === d.evaluation_id);
  assert.equal(mine.length, 1);
  assert.equal(mine[0].event.status, 'completed');
  assert.equal(psql(dbUrl, `SELECT count(*) FROM iii_deliveries d JOIN completion_events e USING (event_id) WHERE e.evaluation_id = '${d.evaluation_id}'`), '1');
});

test('an engine restart while runs are in flight: the iii evaluator still scores every run', async () => {
  const before = seen.scored.length;
  const e = await worker.trigger({
    function_id: 'eval::start',
    payload: startRequest({
      control: { prompt: 'Reply with exactly OK, slowly.', system_prompt: null },
      treatment: { prompt: 'Return exactly the text OK, slowly.', system_prompt: null },
    }),
  });
  worker.registerTrigger({ type: 'eval::completed', function_id: 'test::on-completed', config: { evaluation_id: e.evaluation_id } });
  await waitUntil(async () => (await rest('GET', `/v1/evaluations/${e.evaluation_id}/status`)).body?.status === 'running', 10000, 'running');
  await sleep(300);
  await engine.close();
  await sleep(800);
  engine = await startFakeEngine({ port: enginePort });
  await evaldWorker(20000);
  const done = await waitTerminal(e.evaluation_id, 40000);
  assert.equal(done.status, 'completed');
  const result = await worker.trigger({ function_id: 'eval::result', payload: { evaluation_id: e.evaluation_id } });
  for (const run of result.report.runs) {
    assert.equal(run.status, 'completed', JSON.stringify(run.failures));
    assert.equal(run.evaluation.reason, 'scored by the iii test worker');
  }
  assert.ok(seen.scored.length - before >= 2);
  await waitUntil(() => seen.completed.some((x) => x.event.evaluation_id === e.evaluation_id), 20000, 'the completion');
});

test('an unusable III_URL stops evald at start-up with status 2', async () => {
  for (const [url, part] of [
    ['wss://127.0.0.1:49134', 'wss:// is not supported'],
    ['http://127.0.0.1:49134', 'must start with ws://'],
    ['ws://127.0.0.1:0', 'invalid port'],
  ]) {
    const child = spawn(EVALD_BIN, [], {
      env: { ...process.env, EVALD_DATABASE_URL: dbUrl, EVALD_LISTEN: '127.0.0.1:0', III_URL: url },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const code = await new Promise((resolve) => child.on('exit', resolve));
    assert.equal(code, 2, stderr);
    assert.match(stderr, new RegExp(`III_URL.*${part.replace(/[/.]/g, '\\$&')}`));
  }
});

test('evald closes its session with a Close frame when it stops', async () => {
  const w = await evaldWorker();
  const status = await stopChild(evald);
  assert.equal(status, 0);
  await engine.waitFor(() => w.closed, 5000, 'the close');
  assert.equal(w.closeCode, 1001);
  assert.equal(w.closeReason, 'evald is shutting down');
  assert.ok(!engine.functions.has('eval::start'), 'the engine dropped evald functions with the session');
});
