// evald's two encodings of the same spans (written by tests/unit/test_otel_encode with
// EVALD_OTEL_FIXTURE_DIR set; tests/otel/run.sh does that) decode, with the official
// OTLP definitions, to the same request, field by field, and hold what the contract says.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { decodeExport, ExportTraceServiceRequest } from './decode.mjs';

const dir = process.env.EVALD_OTEL_FIXTURE_DIR;
if (!dir) throw new Error('set EVALD_OTEL_FIXTURE_DIR (tests/otel/run.sh does)');
const jsonBody = readFileSync(join(dir, 'export.json'));
const pbBody = readFileSync(join(dir, 'export.pb'));
const fromJson = decodeExport(jsonBody, 'application/json');
const fromPb = decodeExport(pbBody, 'application/x-protobuf');

const attrs = (list) => Object.fromEntries(list.map((kv) => [kv.key, kv.value]));
const spansOf = (req) => req.resourceSpans[0].scopeSpans[0].spans;

test('the protobuf body decodes to exactly the JSON body', () => {
  assert.deepEqual(fromPb, fromJson);
});

test('the protobuf body carries nothing the official definitions do not know', () => {
  // protobufjs keeps no unknown fields: re-encoding what it decoded gives the same bytes
  // only when every field of ours has the official number and wire type.
  const again = ExportTraceServiceRequest.encode(ExportTraceServiceRequest.decode(pbBody)).finish();
  assert.equal(Buffer.from(again).toString('hex'), pbBody.toString('hex'));
});

for (const [label, req] of [['json', fromJson], ['protobuf', fromPb]]) {
  test(`${label}: resource and scope`, () => {
    assert.equal(req.resourceSpans.length, 1);
    const resource = attrs(req.resourceSpans[0].resource.attributes);
    assert.deepEqual(resource['service.name'], { stringValue: 'evald' });
    assert.ok(resource['service.version'].stringValue);
    const scope = req.resourceSpans[0].scopeSpans[0].scope;
    assert.equal(scope.name, 'evald');
    assert.equal(scope.version, resource['service.version'].stringValue);
  });

  test(`${label}: ids, parent link, times, kinds and status`, () => {
    const [root, child] = spansOf(req);
    assert.equal(root.traceId, '4bf92f3577b34da6a3ce929d0e0e4736');
    assert.equal(root.spanId, '00f067aa0ba902b7');
    assert.equal('parentSpanId' in root, false);
    assert.equal(child.traceId, root.traceId);
    assert.equal(child.spanId, 'b7ad6b7169203331');
    assert.equal(child.parentSpanId, root.spanId);
    assert.equal(root.startTimeUnixNano, '1700000000123456789');
    assert.equal(root.endTimeUnixNano, '1700000001000000000');
    assert.equal(root.name, 'invoke_agent control');
    assert.equal(root.kind, 1);
    assert.equal(child.name, 'chat m');
    assert.equal(child.kind, 3);
    assert.deepEqual(root.status, { code: 2, message: 'boom' });
    assert.deepEqual(child.status, { code: 0 });
  });

  test(`${label}: every attribute value kind`, () => {
    const a = attrs(spansOf(req)[0].attributes);
    assert.deepEqual(a.s, { stringValue: 'text' });
    assert.deepEqual(a.i, { intValue: '42' });
    assert.deepEqual(a.neg, { intValue: '-7' });
    assert.deepEqual(a.big, { intValue: '9007199254740993' });
    assert.deepEqual(a.d, { doubleValue: 0.5 });
    assert.deepEqual(a.t, { boolValue: true });
    assert.deepEqual(a.f, { boolValue: false });
    assert.deepEqual(a['error.type'], { stringValue: 'timeout' });
    assert.deepEqual(a.arr, {
      arrayValue: { values: [{ stringValue: 'stop' }, { stringValue: 'length' }] },
    });
    assert.deepEqual(a.mixed, {
      arrayValue: {
        values: [
          { intValue: '1' },
          { doubleValue: 2.25 },
          { arrayValue: { values: [{ boolValue: true }, { stringValue: 'x' }] } },
        ],
      },
    });
    // null, objects and arrays holding them are not OTLP values: left out
    assert.deepEqual(Object.keys(a).filter((k) => k.startsWith('skipped.')), []);
    // in key order
    const keys = spansOf(req)[0].attributes.map((kv) => kv.key);
    assert.deepEqual(keys, [...keys].sort());
  });

  test(`${label}: events`, () => {
    const [root, child] = spansOf(req);
    assert.equal(root.events.length, 1);
    assert.equal(root.events[0].name, 'gen_ai.evaluation.result');
    assert.equal(root.events[0].timeUnixNano, '1700000000500000000');
    assert.deepEqual(attrs(root.events[0].attributes), {
      'gen_ai.evaluation.score.label': { stringValue: 'pass' },
      'gen_ai.evaluation.score.value': { doubleValue: 0.75 },
    });
    assert.deepEqual(child.events, [
      { timeUnixNano: '1700000000250000000', name: 'evald.retry', attributes: [] },
    ]);
  });
}
