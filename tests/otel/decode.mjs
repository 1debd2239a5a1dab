// Decodes an OTLP/HTTP trace export body as a receiver would: JSON as it is, protobuf with
// the official opentelemetry-proto definitions (the protobufjs code that
// @opentelemetry/otlp-transformer generates from them), converted to the OTLP JSON mapping
// that evald's JSON follows (hex ids, decimal-string times and intValue, integer enums,
// fields at their default left out except the repeated ones), so one set of assertions
// checks both encodings.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root.js');
const v1 = root.opentelemetry.proto;
export const ExportTraceServiceRequest = v1.collector.trace.v1.ExportTraceServiceRequest;

const hex = (bytes) => Buffer.from(bytes ?? []).toString('hex');

// protobufjs gives 64-bit integers as Long (with the long package) or, without it, as a
// number that may have lost digits: refuse those rather than compare rounded values.
function decimal(v) {
  if (v === null || v === undefined) return '0';
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new Error(`64-bit value ${v} lost precision`);
    return String(v);
  }
  return v.toString();
}

function anyValue(av) {
  switch (av?.value) {
    case 'stringValue':
      return { stringValue: av.stringValue };
    case 'boolValue':
      return { boolValue: av.boolValue };
    case 'intValue':
      return { intValue: decimal(av.intValue) };
    case 'doubleValue':
      return { doubleValue: av.doubleValue };
    case 'arrayValue':
      return { arrayValue: { values: (av.arrayValue.values ?? []).map(anyValue) } };
    case 'kvlistValue':
      return { kvlistValue: { values: keyValues(av.kvlistValue.values) } };
    case 'bytesValue':
      return { bytesValue: Buffer.from(av.bytesValue).toString('base64') };
    default:
      return {};
  }
}

function keyValues(kvs) {
  return (kvs ?? []).map((kv) => ({ key: kv.key, value: anyValue(kv.value) }));
}

// Copies the counters that are set: proto3 leaves zeros off the wire, JSON leaves them out.
function counts(from, to, names) {
  for (const n of names) if (from[n]) to[n] = from[n];
  return to;
}

function span(s) {
  const out = { traceId: hex(s.traceId), spanId: hex(s.spanId) };
  if (s.traceState) out.traceState = s.traceState;
  if (s.parentSpanId?.length) out.parentSpanId = hex(s.parentSpanId);
  out.name = s.name;
  out.kind = s.kind;
  out.startTimeUnixNano = decimal(s.startTimeUnixNano);
  out.endTimeUnixNano = decimal(s.endTimeUnixNano);
  out.attributes = keyValues(s.attributes);
  out.events = (s.events ?? []).map((e) =>
    counts(e, {
      timeUnixNano: decimal(e.timeUnixNano),
      name: e.name,
      attributes: keyValues(e.attributes),
    }, ['droppedAttributesCount']));
  counts(s, out, ['droppedAttributesCount', 'droppedEventsCount', 'droppedLinksCount']);
  const status = { code: s.status?.code ?? 0 };
  if (s.status?.message) status.message = s.status.message;
  out.status = status;
  return out;
}

function scope(sc) {
  const out = {};
  if (sc?.name) out.name = sc.name;
  if (sc?.version) out.version = sc.version;
  if (sc?.attributes?.length) out.attributes = keyValues(sc.attributes);
  return out;
}

// The JSON-mapping shape of a decoded ExportTraceServiceRequest.
export function fromProtobuf(req) {
  return {
    resourceSpans: (req.resourceSpans ?? []).map((rs) => {
      const out = {
        resource: counts(rs.resource ?? {}, { attributes: keyValues(rs.resource?.attributes) },
          ['droppedAttributesCount']),
        scopeSpans: (rs.scopeSpans ?? []).map((ss) => {
          const o = { scope: scope(ss.scope), spans: (ss.spans ?? []).map(span) };
          if (ss.schemaUrl) o.schemaUrl = ss.schemaUrl;
          return o;
        }),
      };
      if (rs.schemaUrl) out.schemaUrl = rs.schemaUrl;
      return out;
    }),
  };
}

// The export body `buffer` (Buffer or Uint8Array) as the OTLP JSON mapping, whichever of
// application/json and application/x-protobuf `contentType` names (parameters ignored).
export function decodeExport(buffer, contentType) {
  const type = String(contentType ?? '').split(';')[0].trim().toLowerCase();
  if (type === 'application/json') return JSON.parse(Buffer.from(buffer).toString('utf8'));
  if (type === 'application/x-protobuf' || type === 'application/protobuf') {
    return fromProtobuf(ExportTraceServiceRequest.decode(new Uint8Array(buffer)));
  }
  throw new Error(`not an OTLP/HTTP content type: ${contentType}`);
}
