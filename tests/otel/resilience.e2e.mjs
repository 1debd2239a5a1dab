// evald's exporter against collectors that misbehave, end to end (real evald, evald-stub
// and PostgreSQL on loopback): one that answers 503 for 10 s and then 200 (no span lost,
// none twice), one that is down for the whole run (the runs' outcomes and wall time as with
// exporting off, nothing blocks, a bounded shutdown), one that always answers 503 with
// Retry-After: 5 to a queue of 4 (spans dropped and counted, runs unaffected, the shutdown
// flush still bounded by OTEL_EXPORTER_OTLP_TIMEOUT), and one that answers 400 (never
// retried, counted as failed).
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import {
    createDatabase, startStub, startEvald, Receiver, closedPort, registerWeatherTools,
    weatherScript, weatherRoutes, weatherRequest, runEvaluation, runsOf, waitFor, spansOf,
    traces, metrics, median, attrs, sleep,
} from './e2e_support.mjs';

// Each generation waits a little at the stub, so that a run takes a measurable time.
const LATENCY_MS = 40;
const SPANS_PER_RUN = 5; // root, two chats, the tool call, the evaluator call
// OTEL_EXPORTER_OTLP_TIMEOUT of the scenarios whose collector never accepts: the shutdown
// flush must end within it. The slack covers the rest of evald's stop on a busy machine
// (without exporting it takes well under 100 ms).
const TIMEOUT_MS = 500;
const STOP_SLACK_MS = 1500;

let db;
let stub;

before(async () => {
    db = createDatabase();
    stub = await startStub();
    await stub.script(weatherScript({ latencyMs: LATENCY_MS }));
});

after(async () => {
    await stub?.stop();
    db?.drop();
});

// The verdict of each run of a document, by run id.
const outcomes = (doc) => Object.fromEntries(runsOf(doc).map((r) => [r.run_id, { status: r.status, passed: r.passed }]));

describe('a collector that answers 503 for 10 s, then 200', () => {
    const DOWN_MS = 10000;
    const BATCH = 8;
    let receiver;
    let evald;
    let doc;
    let before503;
    let stopped;
    let m;
    before(async () => {
        receiver = await new Receiver({
            tools: weatherRoutes(),
            tracesPolicy: (req, n, self) => (Date.now() - self.firstExportAt < DOWN_MS
                ? { status: 503, headers: n % 2 ? { 'Retry-After': '1' } : {} }
                : { status: 200 }),
        }).start();
        evald = await startEvald({
            db, stub,
            env: {
                OTEL_EXPORTER_OTLP_ENDPOINT: receiver.base,
                OTEL_BSP_SCHEDULE_DELAY: '200',
                OTEL_BSP_MAX_EXPORT_BATCH_SIZE: String(BATCH),
                OTEL_EXPORTER_OTLP_TIMEOUT: '2000',
            },
        });
        await registerWeatherTools(evald, receiver);
        doc = await runEvaluation(evald, weatherRequest({ runs: 2 }));
        before503 = receiver.exports.length;
        const runs = runsOf(doc);
        const want = runs.length * SPANS_PER_RUN;
        await waitFor(`${want} spans accepted by the collector once it answers 200`,
            () => spansOf(receiver.decoded()).length >= want, DOWN_MS + 15000, 200);
        await sleep(300); // a duplicate would come now
        m = await metrics(evald); // before stopping
        stopped = await evald.stop();
    });
    after(async () => {
        await evald?.stop();
        await receiver?.stop();
    });

    test('the collector was really down for the runs', (t) => {
        assert.ok(before503 >= 1, 'evald tried to export while the runs went on');
        const refused = receiver.exports.filter((e) => e.status === 503);
        assert.ok(refused.length >= 2, `503 was answered ${refused.length} times: evald retried the refused batch`);
        const firstOk = receiver.accepted()[0];
        assert.ok(firstOk.at - receiver.firstExportAt >= DOWN_MS, 'the first accepted export came after the 10 s');
        t.diagnostic(`${refused.length} exports refused with 503; the first accepted ${firstOk.at - receiver.firstExportAt} ms after the first attempt`);
        assert.ok(runsOf(doc).every((r) => r.completed_at - receiver.firstExportAt < DOWN_MS),
            'every run ended while the collector was refusing exports');
        assert.ok(m.value('evald_otel_export_retries_total') >= 1, `evald_otel_export_retries_total is ${m.value('evald_otel_export_retries_total')}`);
    });

    test('every span of every run arrived exactly once', () => {
        const runs = runsOf(doc);
        const spans = spansOf(receiver.decoded()).map((x) => x.span);
        const ids = spans.map((s) => s.spanId);
        const dup = ids.filter((id, i) => ids.indexOf(id) !== i);
        assert.deepEqual(dup, [], `span ids accepted more than once: ${dup.join(', ')}`);
        const byTrace = traces(spansOf(receiver.decoded()));
        const roots = spans.filter((s) => !s.parentSpanId);
        assert.equal(roots.length, runs.length, `roots accepted: ${roots.length}, runs: ${runs.length}`);
        for (const r of runs) {
            const t = byTrace.get(r.trace_id);
            assert.ok(t, `no span of run ${r.run_id} (trace ${r.trace_id}) arrived`);
            assert.equal(t.all.length, SPANS_PER_RUN, `run ${r.run_id}: ${t.all.length} spans arrived, ${SPANS_PER_RUN} expected`);
            assert.equal(attrs(t.roots[0].attributes)['evald.run_id']?.stringValue, r.run_id);
        }
        assert.equal(spans.length, runs.length * SPANS_PER_RUN, 'no span beyond those of the runs');
    });

    test('exports hold at most OTEL_BSP_MAX_EXPORT_BATCH_SIZE spans', () => {
        for (const { doc: d } of receiver.decoded()) {
            const n = d.resourceSpans.flatMap((rs) => rs.scopeSpans).flatMap((ss) => ss.spans).length;
            assert.ok(n >= 1 && n <= BATCH, `an export held ${n} spans, the batch size is ${BATCH}`);
        }
    });

    test('/metrics, read before the stop: nothing dropped, nothing failed, nothing left', () => {
        assert.equal(m.value('evald_otel_spans_dropped_total'), 0, 'evald_otel_spans_dropped_total');
        assert.equal(m.value('evald_otel_export_failures_total'), 0, 'evald_otel_export_failures_total');
        assert.equal(m.value('evald_otel_spans_queued'), 0, 'evald_otel_spans_queued');
        assert.equal(m.value('evald_otel_spans_exported_total'), runsOf(doc).length * SPANS_PER_RUN, 'evald_otel_spans_exported_total');
        assert.equal(stopped.code, 0, `evald exits 0 at SIGTERM: ${JSON.stringify(stopped)}`);
    });
});

describe('a collector that is down for the whole run', () => {
    const RUNS = 3;
    let off;
    let down;
    let disabledReceiver;
    let tools;
    before(async () => {
        tools = await new Receiver({ tools: weatherRoutes() }).start();
        // Exporting off: OTEL_SDK_DISABLED wins over an endpoint that would accept.
        disabledReceiver = await new Receiver().start();
        const a = await startEvald({
            db, stub,
            env: { OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: disabledReceiver.base, OTEL_BSP_SCHEDULE_DELAY: '100' },
        });
        try {
            await registerWeatherTools(a, tools);
            off = { doc: await runEvaluation(a, weatherRequest({ runs: RUNS })) };
            await sleep(400);
            off.metrics = await metrics(a);
        } finally {
            off = { ...off, stopped: await a.stop() };
        }
        const port = await closedPort();
        const b = await startEvald({
            db, stub,
            env: {
                OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
                OTEL_BSP_SCHEDULE_DELAY: '100',
                OTEL_EXPORTER_OTLP_TIMEOUT: String(TIMEOUT_MS),
            },
        });
        try {
            await registerWeatherTools(b, tools);
            down = { doc: await runEvaluation(b, weatherRequest({ runs: RUNS })) };
            // The exporter has tried by now; /metrics must answer at once meanwhile.
            await waitFor('the exporter to count a retry or a drop', async () => {
                const t0 = Date.now();
                const mm = await metrics(b);
                down.metricsMs = Math.max(down.metricsMs ?? 0, Date.now() - t0);
                down.metrics = mm;
                return mm.value('evald_otel_export_retries_total') + mm.value('evald_otel_spans_dropped_total') > 0;
            }, 5000, 100);
        } finally {
            down = { ...down, stopped: await b.stop(10000) };
        }
    });
    after(async () => {
        await tools?.stop();
        await disabledReceiver?.stop();
    });

    test('OTEL_SDK_DISABLED=true exports nothing', () => {
        assert.equal(disabledReceiver.exports.length, 0, 'an export arrived although OTEL_SDK_DISABLED=true');
    });

    test('the runs end as they do with exporting off', () => {
        assert.equal(down.doc.status, off.doc.status, 'the evaluation\'s status');
        assert.deepEqual(outcomes(down.doc), outcomes(off.doc), 'each run\'s status and verdict');
        assert.ok(runsOf(down.doc).every((r) => r.status === 'completed'), 'every run completed');
    });

    test('their wall time is not inflated', (t) => {
        const wall = (doc) => runsOf(doc).map((r) => r.benchmark?.wall_time_ms).filter((x) => typeof x === 'number');
        const a = median(wall(off.doc));
        const b = median(wall(down.doc));
        t.diagnostic(`median run wall_time_ms: ${a} with exporting off, ${b} with the collector down`);
        assert.ok(Number.isFinite(a) && Number.isFinite(b), `wall_time_ms of the runs: off ${wall(off.doc)}, down ${wall(down.doc)}`);
        // Loose: a noisy 2-core machine; a blocking export would cost at least the 500 ms timeout.
        assert.ok(b <= 2 * a + 150, `median run wall_time_ms with the collector down ${b} vs ${a} with exporting off`);
    });

    test('/metrics counts retries or drops, answers at once, and exported nothing', () => {
        const m = down.metrics;
        assert.ok(m.value('evald_otel_export_retries_total') + m.value('evald_otel_spans_dropped_total') > 0,
            'evald_otel_export_retries_total or evald_otel_spans_dropped_total counts the failed exports');
        assert.equal(m.value('evald_otel_spans_exported_total'), 0, 'nothing was exported');
        assert.ok(down.metricsMs < 2000, `GET /metrics took ${down.metricsMs} ms`);
    });

    test('evald stops within a few seconds (the shutdown flush is bounded)', (t) => {
        t.diagnostic(`SIGTERM to exit: ${down.stopped.ms} ms with the collector down, ${off.stopped.ms} ms with exporting off`);
        assert.equal(down.stopped.killed, false, `evald did not stop within 10 s of SIGTERM: ${JSON.stringify(down.stopped)}`);
        assert.equal(down.stopped.code, 0, `evald exits 0 at SIGTERM: ${JSON.stringify(down.stopped)}`);
        assert.ok(down.stopped.ms <= TIMEOUT_MS + STOP_SLACK_MS,
            `evald took ${down.stopped.ms} ms from SIGTERM to exit with the collector down and OTEL_EXPORTER_OTLP_TIMEOUT=${TIMEOUT_MS} ` +
            `(${off.stopped.ms} ms with exporting off): the shutdown flush must end within the timeout`);
    });
});

describe('a queue of 4 spans and a collector that always answers 503 (Retry-After: 5)', () => {
    const RUNS = 3;
    let receiver;
    let evald;
    let doc;
    let m;
    let stopped;
    before(async () => {
        receiver = await new Receiver({
            tools: weatherRoutes(),
            tracesPolicy: () => ({ status: 503, headers: { 'Retry-After': '5' } }),
        }).start();
        evald = await startEvald({
            db, stub,
            env: {
                OTEL_EXPORTER_OTLP_ENDPOINT: receiver.base,
                OTEL_BSP_MAX_QUEUE_SIZE: '4',
                OTEL_BSP_SCHEDULE_DELAY: '100',
                OTEL_EXPORTER_OTLP_TIMEOUT: String(TIMEOUT_MS),
            },
        });
        await registerWeatherTools(evald, receiver);
        doc = await runEvaluation(evald, weatherRequest({ runs: RUNS }));
        await waitFor('spans to be dropped', async () => {
            m = await metrics(evald);
            return m.value('evald_otel_spans_dropped_total') > 0;
        }, 5000, 100).catch(() => {});
        stopped = await evald.stop(10000);
    });
    after(async () => {
        await evald?.stop();
        await receiver?.stop();
    });

    test('evald_otel_spans_dropped_total > 0 and the queue stays within its bound', () => {
        assert.ok(m.value('evald_otel_spans_dropped_total') > 0,
            `evald_otel_spans_dropped_total is ${m.value('evald_otel_spans_dropped_total')} after ${RUNS * 2 * SPANS_PER_RUN} spans into a queue of 4`);
        assert.ok(m.value('evald_otel_spans_queued') <= 4, `evald_otel_spans_queued ${m.value('evald_otel_spans_queued')} exceeds the queue size 4`);
        assert.equal(m.value('evald_otel_spans_exported_total'), 0, 'nothing was accepted');
        assert.ok(receiver.exports.length >= 1, 'evald tried to export');
        for (const e of receiver.exports) {
            const n = spansOf([{ doc: JSON.parse(e.body.toString('utf8')) }]).length;
            assert.ok(n <= 4, `an export attempt held ${n} spans, more than the queue holds`);
        }
    });

    test('the runs are unaffected', () => {
        const runs = runsOf(doc);
        assert.equal(runs.length, RUNS * 2);
        for (const r of runs) {
            assert.equal(r.status, 'completed', `run ${r.run_id}: ${JSON.stringify(r.failures)}`);
            assert.equal(r.passed, r.role === 'control', `run ${r.run_id}: verdict`);
        }
    });

    test('the shutdown flush ends within OTEL_EXPORTER_OTLP_TIMEOUT, whatever Retry-After says', () => {
        assert.equal(stopped.killed, false, `evald did not stop within 10 s of SIGTERM: ${JSON.stringify(stopped)}`);
        assert.equal(stopped.code, 0, `evald exits 0 at SIGTERM: ${JSON.stringify(stopped)}`);
        assert.ok(stopped.ms <= TIMEOUT_MS + STOP_SLACK_MS,
            `evald took ${stopped.ms} ms from SIGTERM to exit with OTEL_EXPORTER_OTLP_TIMEOUT=${TIMEOUT_MS} and a collector ` +
            'answering 503 with Retry-After: 5: the shutdown flush must end within the timeout');
    });
});

describe('a collector that refuses exports with 400', () => {
    let receiver;
    let evald;
    let doc;
    let m;
    let stopped;
    before(async () => {
        receiver = await new Receiver({ tools: weatherRoutes(), tracesPolicy: () => ({ status: 400 }) }).start();
        evald = await startEvald({
            db, stub,
            env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.base, OTEL_BSP_SCHEDULE_DELAY: '100' },
        });
        await registerWeatherTools(evald, receiver);
        doc = await runEvaluation(evald, weatherRequest({ runs: 1 }));
        const want = runsOf(doc).length * SPANS_PER_RUN;
        await waitFor(`${want} spans counted as failed`, async () => {
            m = await metrics(evald);
            return m.value('evald_otel_export_failures_total') >= want;
        }, 5000, 100).catch(() => {});
        await sleep(600); // a retry would come now
        m = await metrics(evald);
        stopped = await evald.stop(10000);
    });
    after(async () => {
        await evald?.stop();
        await receiver?.stop();
    });

    test('is never retried, and its spans count as export failures', () => {
        const want = runsOf(doc).length * SPANS_PER_RUN;
        assert.equal(m.value('evald_otel_export_failures_total'), want, 'evald_otel_export_failures_total counts the refused spans');
        assert.equal(m.value('evald_otel_export_retries_total'), 0, 'a 400 is not retried');
        assert.equal(m.value('evald_otel_spans_exported_total'), 0, 'nothing was exported');
        const ids = receiver.exports.flatMap((e) => spansOf([{ doc: JSON.parse(e.body.toString('utf8')) }]).map((x) => x.span.spanId));
        const dup = ids.filter((id, i) => ids.indexOf(id) !== i);
        assert.deepEqual(dup, [], 'a span refused with 400 was sent again');
        assert.equal(ids.length, want, 'every span was sent once');
        assert.ok(runsOf(doc).every((r) => r.status === 'completed'), 'the runs completed');
        assert.equal(stopped.code, 0, `evald exits 0 at SIGTERM: ${JSON.stringify(stopped)}`);
    });
});
