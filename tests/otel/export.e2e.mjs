// evald's trace export end to end, once as OTLP/HTTP JSON and once as protobuf: an
// evaluation of two runs per arm whose agent calls a registered HTTP tool and whose
// evaluator is an HTTP tool, against the real evald, evald-stub and PostgreSQL, with this
// process as the collector, the tool and the evaluator. Checks the resource and scope, one
// trace per run attempt, the span tree and every attribute with its value type, the
// evaluation event, the traceparent the tool and the evaluator got, the run documents'
// trace_id, the export headers (and that no secret leaks into an export or a log line), and
// the log lines of a run.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';

import {
    EVALD_BIN, createDatabase, startStub, startEvald, Receiver, closedPort, registerWeatherTools,
    weatherScript, weatherRoutes, weatherRequest, runEvaluation, runsOf, waitForTraces,
    checkWeatherTraces, checkSpanFormat, spansOf, attrs, metrics, api, HEX16,
} from './e2e_support.mjs';

const API_KEY = 'sk-otel-e2e-provider-key-7f3a91';
const OTLP_TOKEN = 'sekrit-otel-token-123';
const VERSION = /^evald (\S+)/.exec(execFileSync(EVALD_BIN, ['--version']).toString())?.[1];
// Per run: two generations, one tool call, one evaluator call.
const CHILDREN = () => 4;

let db;
let stub;

before(async () => {
    assert.ok(VERSION, 'evald --version names no version');
    db = createDatabase();
    stub = await startStub({ requireKey: API_KEY });
    await stub.script(weatherScript());
});

after(async () => {
    await stub?.stop();
    db?.drop();
});

// One evald exporting to a fresh receiver; the evaluation ran and its spans arrived.
async function scenario(env) {
    const receiver = await new Receiver({ tools: weatherRoutes() }).start();
    const evald = await startEvald({
        db, stub, apiKey: API_KEY,
        env: typeof env === 'function' ? env(receiver) : env,
    });
    try {
        await registerWeatherTools(evald, receiver);
        const doc = await runEvaluation(evald, weatherRequest({ runs: 2 }));
        const runs = runsOf(doc);
        assert.equal(runs.length, 4, 'runs: 2 makes two runs per arm');
        const byTrace = await waitForTraces(receiver, runs, CHILDREN);
        const m = await metrics(evald);
        const seed = await api(evald.base, 'POST', '/v1/functions/eval::result', { evaluation_id: doc.evaluation_id });
        return { receiver, evald, doc, runs, byTrace, metrics: m, seed };
    } catch (e) {
        await evald.stop();
        await receiver.stop();
        throw new Error(`${e.message}\nevald stderr (tail):\n${evald.stderr.split('\n').slice(-15).join('\n')}`);
    }
}

describe('http/json export with content capture', () => {
    let s;
    let stopped;
    before(async () => {
        s = await scenario((receiver) => ({
            OTEL_EXPORTER_OTLP_ENDPOINT: receiver.base,
            OTEL_EXPORTER_OTLP_HEADERS: `Authorization=Bearer%20${OTLP_TOKEN},X-Otel-Team=evals%2Cothers`,
            OTEL_BSP_SCHEDULE_DELAY: '200',
            OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
            OTEL_SERVICE_NAME: 'evald-e2e',
            // OTEL_SERVICE_NAME wins over a service.name here, as OpenTelemetry's SDKs have it.
            OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=e2e%20otel,service.name=from-resource-attributes,team=evals',
            EVALD_LOG_LEVEL: 'debug',
        }));
        stopped = await s.evald.stop();
    });
    after(async () => {
        await s?.evald.stop();
        await s?.receiver.stop();
    });

    test('exports go to <endpoint>/v1/traces as application/json with the configured headers', () => {
        const { exports } = s.receiver;
        assert.ok(exports.length >= 1, 'no export arrived');
        for (const e of exports) {
            assert.equal(e.method, 'POST', 'exports are POSTs');
            assert.equal(e.path, '/v1/traces', 'OTEL_EXPORTER_OTLP_ENDPOINT is a base: traces go to <base>/v1/traces');
            assert.equal(e.contentType, 'application/json', 'Content-Type of an http/json export');
            assert.equal(e.headers.authorization, `Bearer ${OTLP_TOKEN}`, 'OTEL_EXPORTER_OTLP_HEADERS values are percent-decoded and sent');
            assert.equal(e.headers['x-otel-team'], 'evals,others', 'a second header, with a percent-encoded comma');
        }
        assert.equal(stopped.code, 0, `evald exits 0 at SIGTERM: ${JSON.stringify(stopped)}`);
    });

    test('resource, scope and the wire format of every span', () => {
        const spans = spansOf(s.receiver.decoded());
        assert.ok(spans.length >= 20, `4 runs × 5 spans expected, got ${spans.length}`);
        const ids = new Set();
        for (const { span, resource, scope } of spans) {
            checkSpanFormat(span);
            assert.ok(!ids.has(span.spanId), `span id ${span.spanId} was exported twice`);
            ids.add(span.spanId);
            assert.deepEqual(resource['service.name'], { stringValue: 'evald-e2e' }, 'OTEL_SERVICE_NAME names the service');
            assert.deepEqual(resource['service.version'], { stringValue: VERSION }, 'service.version is evald\'s version');
            assert.deepEqual(resource['deployment.environment'], { stringValue: 'e2e otel' }, 'OTEL_RESOURCE_ATTRIBUTES values are percent-decoded');
            assert.deepEqual(resource.team, { stringValue: 'evals' }, 'every OTEL_RESOURCE_ATTRIBUTES pair is a resource attribute');
            assert.equal(scope.name, 'evald', 'the scope is evald');
            assert.equal(scope.version, VERSION, 'the scope version is evald\'s version');
        }
        // The JSON mapping as sent, not only as decoded: hex ids, decimal-string times.
        for (const e of s.receiver.accepted()) {
            const raw = JSON.parse(e.body.toString('utf8'));
            assert.ok(Array.isArray(raw.resourceSpans), 'the body is {"resourceSpans": [...]}');
            for (const rs of raw.resourceSpans) {
                assert.ok(Array.isArray(rs.scopeSpans), 'resourceSpans[] hold scopeSpans');
                for (const ss of rs.scopeSpans) for (const sp of ss.spans) checkSpanFormat(sp);
            }
        }
    });

    test('one trace per run attempt: span tree, attributes, evaluation event, traceparent', () => {
        checkWeatherTraces({ doc: s.doc, byTrace: s.byTrace, receiver: s.receiver, stubPort: stub.port, capture: true });
    });

    test('the seed\'s eval::result shape stays closed: no trace_id there', () => {
        assert.equal(s.seed.status, 200, `POST /v1/functions/eval::result answered ${s.seed.status}: ${s.seed.text}`);
        assert.ok(!s.seed.text.includes('trace_id'), `eval::result carries a trace_id: ${s.seed.text.slice(0, 400)}`);
    });

    test('the verdicts reached the traces: control passes, treatment fails', () => {
        for (const r of s.runs) {
            assert.equal(r.passed, r.role === 'control', `run ${r.run_id}: the scenario's verdict`);
        }
    });

    test('/metrics counts the exported spans', () => {
        const exported = s.metrics.value('evald_otel_spans_exported_total');
        const total = spansOf(s.receiver.decoded()).length;
        assert.ok(exported >= 16 && exported <= total, `evald_otel_spans_exported_total ${exported}, receiver has ${total}`);
        assert.equal(s.metrics.value('evald_otel_spans_dropped_total'), 0, 'nothing dropped');
        assert.equal(s.metrics.value('evald_otel_export_failures_total'), 0, 'no failed export');
        for (const name of ['evald_otel_export_retries_total', 'evald_otel_spans_queued']) {
            assert.ok(Number.isFinite(s.metrics.value(name)), `/metrics has ${name}`);
        }
    });

    test('secrets: the OTLP token is never logged, and no export holds it or the provider key', () => {
        assert.ok(!s.evald.stderr.includes(OTLP_TOKEN), 'evald\'s log holds the OTLP header token');
        assert.ok(!s.evald.stderr.includes(API_KEY), 'evald\'s log holds the provider API key');
        for (const e of s.receiver.exports) {
            const text = e.body.toString('latin1');
            assert.ok(!text.includes(API_KEY), 'an export body holds the provider API key');
            assert.ok(!text.includes(OTLP_TOKEN), 'an export body holds the OTLP token');
        }
        // The key was in use: the stub requires it.
        assert.ok(s.runs.every((r) => r.status === 'completed'), 'the runs authenticated with the key');
    });

    test('log lines of a run carry its trace_id and span_id', () => {
        const lines = s.evald.logLines();
        for (const r of s.runs) {
            const root = s.byTrace.get(r.trace_id).roots[0];
            const naming = lines.filter((l) => l.session_id === r.session_id || (l.run_id === r.run_id && l.evaluation_id === s.doc.evaluation_id));
            assert.ok(naming.length >= 1, `no log line names run ${r.run_id} (session ${r.session_id})`);
            assert.ok(naming.some((l) => l.trace_id === r.trace_id && l.span_id === root.spanId),
                `no log line of run ${r.run_id} carries trace_id ${r.trace_id} and span_id ${root.spanId}; its lines:\n${naming.map((l) => JSON.stringify(l)).join('\n')}`);
            // The contract: every line that names a run carries its trace and root span.
            for (const l of naming) {
                assert.equal(l.trace_id, r.trace_id, `a line naming run ${r.run_id} does not carry its trace_id: ${JSON.stringify(l)}`);
                assert.match(l.span_id ?? '', HEX16, `a line naming run ${r.run_id} has no valid span_id: ${JSON.stringify(l)}`);
            }
        }
    });
});

describe('http/protobuf export', () => {
    let s;
    let stopped;
    before(async () => {
        const unused = await closedPort();
        s = await scenario((receiver) => ({
            // The signal-specific endpoint (a full URL) wins over the general one.
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.base}/otlp/custom-traces`,
            OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${unused}`,
            OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
            // …_TRACES_HEADERS wins over the general variable too.
            OTEL_EXPORTER_OTLP_HEADERS: 'Authorization=Bearer%20general-loses',
            OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'Authorization=Bearer%20traces-wins',
            OTEL_BSP_SCHEDULE_DELAY: '200',
            OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
        }));
        stopped = await s.evald.stop();
    });
    after(async () => {
        await s?.evald.stop();
        await s?.receiver.stop();
    });

    test('exports go to the traces endpoint as application/x-protobuf', () => {
        assert.ok(s.receiver.exports.length >= 1, 'no export arrived');
        for (const e of s.receiver.exports) {
            assert.equal(e.path, '/otlp/custom-traces', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as it is, and wins over OTEL_EXPORTER_OTLP_ENDPOINT');
            assert.equal(e.contentType, 'application/x-protobuf', 'Content-Type of an http/protobuf export');
            assert.notEqual(e.body[0], 0x7b, 'a protobuf body, not JSON');
            assert.equal(e.headers.authorization, 'Bearer traces-wins', 'OTEL_EXPORTER_OTLP_TRACES_HEADERS wins over OTEL_EXPORTER_OTLP_HEADERS');
        }
        assert.equal(stopped.code, 0, `evald exits 0 at SIGTERM: ${JSON.stringify(stopped)}`);
    });

    test('resource, scope and the wire format of every decoded span', () => {
        const spans = spansOf(s.receiver.decoded());
        assert.ok(spans.length >= 20, `4 runs × 5 spans expected, got ${spans.length}`);
        const ids = new Set();
        for (const { span, resource, scope } of spans) {
            checkSpanFormat(span);
            assert.ok(!ids.has(span.spanId), `span id ${span.spanId} was exported twice`);
            ids.add(span.spanId);
            assert.deepEqual(resource['service.name'], { stringValue: 'evald' }, 'service.name defaults to evald');
            assert.deepEqual(resource['service.version'], { stringValue: VERSION }, 'service.version is evald\'s version');
            assert.equal(scope.name, 'evald');
            assert.equal(scope.version, VERSION);
        }
    });

    test('one trace per run attempt: the same tree and attributes as JSON', () => {
        checkWeatherTraces({ doc: s.doc, byTrace: s.byTrace, receiver: s.receiver, stubPort: stub.port, capture: true });
    });

    test('root attributes carry the same keys as in JSON', () => {
        const root = [...s.byTrace.values()][0].roots[0];
        const keys = Object.keys(attrs(root.attributes)).sort();
        for (const k of ['evald.attempt', 'evald.evaluation_id', 'evald.repeat', 'evald.role', 'evald.run_id',
            'gen_ai.agent.name', 'gen_ai.conversation.id', 'gen_ai.operation.name', 'gen_ai.request.model']) {
            assert.ok(keys.includes(k), `root attribute ${k} missing from the protobuf export: ${keys.join(', ')}`);
        }
    });
});
