// Checks of openapi/openapi.yaml beyond what `redocly lint` checks: openapi.json and the
// seed schemas are in sync, every route of the spec is documented (and nothing else), the
// conventions every operation follows (X-Request-Id, security, problem responses), and every
// example validates against its schema with ajv (JSON Schema 2020-12).
// Run: node --test tests/openapi/openapi.test.mjs (after npm ci --prefix tests/openapi).
// Parts that need ../shared (the seed, the spec) print SKIPPED when it is absent.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';

import {
  JSON_PATH,
  hoistSeed,
  loadSeed,
  readDocument,
  renderJson,
  sharedDir,
  staleSeedSchemas,
} from '../../openapi/build.mjs';
import { makeValidator } from './schema.mjs';

const require = createRequire(import.meta.url);
const YAML = require('yaml');

const yamlDoc = readDocument();
const api = yamlDoc.toJS({ maxAliasCount: -1 });
const seed = loadSeed();
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

// The REST surface of the spec (evald.md) as refined by the task, plus the session and
// comparison event streams; `{}` is any parameter.
const ROUTES = [
  'GET /v1/functions',
  'POST /v1/datasets',
  'GET /v1/datasets',
  'GET /v1/datasets/{}',
  'DELETE /v1/datasets/{}',
  'GET /v1/datasets/{}/cases',
  'POST /v1/experiments',
  'POST /v1/experiments/plan',
  'GET /v1/experiments',
  'GET /v1/experiments/{}',
  'DELETE /v1/experiments/{}',
  'GET /v1/experiments/{}/cases',
  'GET /v1/experiments/{}/runs',
  'GET /v1/experiments/{}/events',
  'GET /v1/experiments/{}/export',
  'POST /v1/experiments/{}/cancel',
  'PUT /v1/experiments/{}/runs/{}/review',
  'GET /v1/experiments/{}/reviews',
  'GET /v1/experiments/{}/review-queue',
  'GET /v1/experiments/{}/agreement',
  'GET /v1/experiments/{}/judgements',
  'GET /v1/experiments/{}/pairs/reviews',
  'GET /v1/experiments/{}/pairs/{}/{}/{}',
  'PUT /v1/experiments/{}/pairs/{}/{}/{}/review',
  'GET /v1/experiments/{}/judge/agreement',
  'POST /v1/experiments/{}/rescore',
  'POST /v1/experiments/{}/retry',
  'POST /v1/evaluations',
  'GET /v1/evaluations',
  'GET /v1/evaluations/{}',
  'GET /v1/evaluations/{}/status',
  'GET /v1/evaluations/{}/events',
  'POST /v1/evaluations/{}/cancel',
  'POST /v1/evaluations/{}/rerun',
  'POST /v1/evaluations/{}/rescore',
  'DELETE /v1/evaluations/{}',
  'POST /v1/evaluators/exact',
  'POST /v1/evaluators/normalized_text',
  'POST /v1/evaluators/trajectory',
  'POST /v1/sessions',
  'GET /v1/sessions',
  'GET /v1/sessions/{}',
  'POST /v1/sessions/{}/messages',
  'POST /v1/sessions/{}/cancel',
  'DELETE /v1/sessions/{}',
  'GET /v1/sessions/compare',
  'GET /v1/sessions/compare/events',
  'GET /v1/sessions/{}/events',
  'GET /v1/subscriptions',
  'POST /v1/subscriptions',
  'GET /v1/subscriptions/{}',
  'DELETE /v1/subscriptions/{}',
  'GET /v1/subscriptions/{}/deliveries',
  'GET /v1/tools',
  'PUT /v1/tools/{}',
  'GET /v1/tools/{}',
  'DELETE /v1/tools/{}',
  'GET /v1/models',
  'GET /v1/providers',
  'GET /healthz',
  'GET /readyz',
  'GET /metrics',
  'GET /openapi.json',
  'GET /',
  'GET /console/{}',
];

// The functions of the mirror: every seed function (the internal ones too: the spec requires
// them behind the mirror) and evald's eval::compare-sessions and eval::assert::trajectory.
const SEED_INTERNAL_FUNCTIONS = ['eval::on-turn-completed', 'eval::step', 'eval::sweep', 'eval::ui-content'];
const SEED_PUBLIC_FUNCTIONS = [
  'eval::assert::exact',
  'eval::assert::normalized_text',
  'eval::cancel',
  'eval::delete',
  'eval::list',
  'eval::rerun',
  'eval::result',
  'eval::start',
  'eval::status',
];
// Operations whose body is a dataset upload (JSON, JSONL or CSV).
const UPLOADS = ['POST /v1/datasets'];
const MIRRORED = [
  ...SEED_PUBLIC_FUNCTIONS,
  ...SEED_INTERNAL_FUNCTIONS,
  'eval::compare-sessions',
  'eval::assert::trajectory',
];

const ERROR_RESPONSES = {
  400: ['BadRequest', 'invalid_request', 'Bad Request'],
  401: ['Unauthorized', 'unauthorized', 'Unauthorized'],
  404: ['NotFound', 'not_found', 'Not Found'],
  409: ['Conflict', 'conflict', 'Conflict'],
  413: ['PayloadTooLarge', 'payload_too_large', 'Content Too Large'],
  415: ['UnsupportedMediaType', 'unsupported_media_type', 'Unsupported Media Type'],
  422: ['IdempotencyKeyReused', 'unprocessable', 'Unprocessable Content'],
  500: ['Internal', 'internal', 'Internal Server Error'],
  503: ['Unavailable', 'unavailable', 'Service Unavailable'],
};

const normalize = (path) => path.replace(/\{[^}]*\}/g, '{}');

/** Every operation as {key: "METHOD /path", path, method, op, pathItem}. */
function operations(root = api.paths) {
  const out = [];
  for (const [path, item] of Object.entries(root)) {
    for (const method of METHODS) {
      if (item[method]) {
        out.push({ key: `${method.toUpperCase()} ${path}`, path, method, op: item[method], item });
      }
    }
  }
  return out;
}

/** Resolves a local `$ref` (one level at a time, until a non-reference). */
function deref(node) {
  let cur = node;
  for (let i = 0; cur && typeof cur.$ref === 'string'; i++) {
    assert.ok(i < 10, `reference loop at ${node.$ref}`);
    assert.ok(cur.$ref.startsWith('#/'), `non-local $ref ${cur.$ref}`);
    const target = cur.$ref
      .slice(2)
      .split('/')
      .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce((o, k) => (o === undefined ? undefined : o[k]), api);
    assert.ok(target !== undefined, `unresolved $ref ${cur.$ref}`);
    cur = target;
  }
  return cur;
}

function responsesOf(op) {
  return Object.entries(op.responses ?? {}).map(([status, r]) => [status, r, deref(r)]);
}

/** Names of components.schemas generated from the seed: the comment marks the first. */
function seedSchemaNames() {
  const schemas = yamlDoc.getIn(['components', 'schemas']);
  const names = [];
  let inSeed = false;
  for (const pair of schemas.items) {
    if (String(pair.key.commentBefore ?? '').includes('Generated from the seed')) inSeed = true;
    if (inSeed) names.push(String(pair.key.value));
  }
  return names;
}

// ------------------------------------------------------------------- JSON Schema validator
const validator = makeValidator(api);

function assertValid(schema, value, where) {
  let fn;
  try {
    fn = validator.compile(schema);
  } catch (e) {
    throw new Error(`${where}: cannot compile its schema: ${e.message}`);
  }
  assert.ok(fn(value), `${where}: ${validator.errors(fn)}`);
}

// ================================================================================= tests
test('openapi.yaml is an OpenAPI 3.1 document', () => {
  assert.match(api.openapi, /^3\.1\.\d+$/);
  assert.equal(typeof api.info.version, 'string');
  assert.ok(Object.keys(api.paths).length > 30);
});

test('openapi.json is openapi.yaml rendered as JSON (run node openapi/build.mjs)', () => {
  const actual = readFileSync(JSON_PATH, 'utf8');
  assert.ok(actual === renderJson(yamlDoc), 'openapi/openapi.json is out of date');
  assert.deepEqual(JSON.parse(actual), api);
});

test('the seed schemas in components are in sync with the seed', (t) => {
  if (seed === null) {
    t.skip('SKIPPED: ../shared is absent, the seed copy cannot be compared');
    console.log('SKIPPED: seed sync check (../shared is absent)');
    return;
  }
  const hoisted = hoistSeed(seed);
  assert.deepEqual(staleSeedSchemas(api, hoisted), [], 'run node openapi/build.mjs');
  assert.deepEqual(seedSchemaNames().sort(), [...hoisted.keys()].sort());
  for (const fn of seed.functions) {
    for (const kind of ['request_schema', 'response_schema'])
      assert.ok(api.components.schemas[fn[kind].title], `${fn.name} ${kind} is not in components`);
  }
});

test('the seed copy has no $ref left that points at draft-07 definitions', () => {
  const names = seedSchemaNames();
  assert.ok(names.length >= 50, `only ${names.length} seed schemas are marked`);
  const text = JSON.stringify(names.map((n) => api.components.schemas[n]));
  assert.ok(!text.includes('#/definitions/'));
  assert.ok(!text.includes('"$schema"'));
  assert.ok(!text.includes('"definitions"'));
});

test('every route of the REST surface is documented, and no other', () => {
  const documented = new Set(operations().map(({ key }) => normalize(key)));
  const missing = ROUTES.filter((r) => !documented.has(r));
  assert.deepEqual(missing, [], 'routes missing from openapi.yaml');
  const mirror = new Set(MIRRORED.map((f) => `POST /v1/functions/${f}`));
  const extra = [...documented].filter((r) => !ROUTES.includes(r) && !mirror.has(r));
  assert.deepEqual(extra, [], 'routes in openapi.yaml that the spec does not list');
});

test('every route named in the spec (evald.md) is documented', (t) => {
  const dir = sharedDir();
  const file = dir && join(dir, 'spec', 'evald.md');
  if (!file || !existsSync(file)) {
    t.skip('SKIPPED: ../shared is absent, evald.md cannot be read');
    console.log('SKIPPED: spec route check (../shared is absent)');
    return;
  }
  const text = readFileSync(file, 'utf8');
  const found = [];
  for (const m of text.matchAll(/`((?:GET|POST|PUT|DELETE|PATCH)(?:\|(?:GET|POST|PUT|DELETE|PATCH))*) (\/[^`\s]*)`/g)) {
    const path = normalize(m[2].replace(/\?.*$/, ''));
    for (const method of m[1].split('|')) found.push(`${method} ${path}`);
  }
  assert.ok(found.length >= 25, `read only ${found.length} routes from evald.md`);
  const documented = new Set(operations().map(({ key }) => normalize(key)));
  const missing = [];
  for (const route of found) {
    if (route === 'POST /v1/functions/{}') {
      for (const f of MIRRORED) if (!documented.has(`POST /v1/functions/${f}`)) missing.push(f);
    } else if (!documented.has(route)) {
      missing.push(route);
    }
  }
  assert.deepEqual(missing, []);
});

test('the function mirror serves every seed function with its seed schemas', () => {
  if (seed !== null) {
    const publicNames = seed.functions.filter((f) => !f.metadata?.internal).map((f) => f.name);
    assert.deepEqual([...publicNames].sort(), [...SEED_PUBLIC_FUNCTIONS].sort());
    const internalNames = seed.functions.filter((f) => f.metadata?.internal).map((f) => f.name);
    assert.deepEqual([...internalNames].sort(), [...SEED_INTERNAL_FUNCTIONS].sort());
  }
  for (const name of MIRRORED) {
    const item = api.paths[`/v1/functions/${name}`];
    assert.ok(item?.post, `POST /v1/functions/${name} is missing`);
    assert.deepEqual(Object.keys(item), ['post'], `${name}: only POST`);
    const req = item.post.requestBody;
    assert.equal(req.required, true);
    assert.deepEqual(Object.keys(req.content), ['application/json']);
    const ok = item.post.responses['200'];
    assert.ok(ok, `${name}: no 200 response`);
    assert.deepEqual(Object.keys(ok.content), ['application/json']);
    if (seed === null) continue;
    const fn = seed.functions.find((f) => f.name === name);
    if (!fn) continue; // eval::compare-sessions and eval::assert::trajectory are evald's own
    assert.equal(req.content['application/json'].schema.$ref, `#/components/schemas/${fn.request_schema.title}`);
    assert.equal(ok.content['application/json'].schema.$ref, `#/components/schemas/${fn.response_schema.title}`);
  }
});

test('the REST resources extend the seed shapes without changing them', () => {
  const s = api.components.schemas;
  // [evald's schema, the seed's, the properties evald types differently]
  const pairs = [
    ['EvaluationV1', 'EvalResultResponseV1', ['progress']],
    ['EvaluationProgressV1', 'EvalProgressV1', ['runs']],
    ['EvaluationRunV1', 'EvalRunReportV1', []],
    ['EvaluationListV1', 'EvalListResponseV1', []],
  ];
  for (const [mine, theirs, retyped] of pairs) {
    for (const [prop, schema] of Object.entries(s[theirs].properties)) {
      assert.ok(prop in s[mine].properties, `${mine} lacks ${theirs}.${prop}`);
      if (!retyped.includes(prop))
        assert.deepEqual(s[mine].properties[prop], schema, `${mine}.${prop} differs from ${theirs}`);
    }
    for (const req of s[theirs].required ?? [])
      assert.ok(s[mine].required.includes(req), `${mine} does not require ${req} as ${theirs} does`);
    assert.equal(s[mine].additionalProperties, false);
  }
  assert.equal(s.EvaluationV1.properties.progress.$ref, '#/components/schemas/EvaluationProgressV1');
  assert.equal(s.EvaluationProgressV1.properties.runs.items.$ref, '#/components/schemas/EvaluationRunV1');
  const start = s.EvaluationStartRequestV1.allOf;
  assert.equal(start[0].$ref, '#/components/schemas/EvalStartRequestV1');
  assert.deepEqual(start[1].properties.concurrency, {
    ...start[1].properties.concurrency,
    type: 'integer',
    minimum: 1,
    maximum: 16,
  });
});

test('every response carries an X-Request-Id header', () => {
  const missing = [];
  for (const { key, op, webhook } of [...operations(), ...operations(api.webhooks).map((o) => ({ ...o, webhook: true }))]) {
    if (webhook) continue; // a receiver's answer, not evald's
    for (const [status, , r] of responsesOf(op)) {
      const h = r.headers?.['X-Request-Id'];
      if (!h || h.$ref !== '#/components/headers/X-Request-Id') missing.push(`${key} ${status}`);
    }
  }
  assert.deepEqual(missing, []);
  assert.equal(api.components.headers['X-Request-Id'].required, true);
});

test('/v1 routes need the bearer token; the others are public', () => {
  assert.deepEqual(api.security, [{ bearerAuth: [] }]);
  assert.equal(api.components.securitySchemes.bearerAuth.scheme, 'bearer');
  for (const { key, path, op } of operations()) {
    if (path.startsWith('/v1/')) {
      const sec = op.security ?? api.security;
      assert.ok(sec.some((s) => 'bearerAuth' in s), `${key} does not take the bearer token`);
      assert.ok(!sec.some((s) => Object.keys(s).length === 0), `${key} allows anonymous access`);
      assert.ok(op.responses['401'], `${key} does not document 401`);
      assert.ok(op.responses['500'], `${key} does not document 500`);
    } else {
      assert.deepEqual(op.security, [], `${key} must be public (security: [])`);
      assert.ok(!op.responses['401'], `${key} is public but documents 401`);
    }
  }
  const events = api.paths['/v1/evaluations/{evaluation_id}/events'].get;
  assert.deepEqual(events.security, [{ bearerAuth: [] }, { accessToken: [] }]);
  assert.equal(api.components.securitySchemes.accessToken.name, 'access_token');
  assert.equal(api.components.securitySchemes.accessToken.in, 'query');
});

test('operations with a body document 400, 413 and 415; with an id, 404', () => {
  for (const { key, op, item } of operations()) {
    if (op.requestBody) {
      for (const status of ['400', '413', '415'])
        assert.ok(op.responses[status], `${key} takes a body but does not document ${status}`);
      // Upload routes also take JSONL and CSV (their body streams; docs/experiments.md).
      const media = UPLOADS.includes(key)
        ? ['application/json', 'application/x-ndjson', 'text/csv']
        : ['application/json'];
      assert.deepEqual(Object.keys(op.requestBody.content), media, key);
    }
    const params = [...(item.parameters ?? []), ...(op.parameters ?? [])].map(deref);
    // PUT creates what it does not find, so it has no 404.
    if (params.some((p) => p.in === 'path') && key.split(' ')[0] !== 'PUT')
      assert.ok(op.responses['404'], `${key} has no 404`);
  }
});

test('errors are problem details with the status, title and code of their status', () => {
  assert.deepEqual(api.components.schemas.ErrorCode.enum, [
    'invalid_request',
    'unauthorized',
    'not_found',
    'conflict',
    'payload_too_large',
    'unsupported_media_type',
    'unprocessable',
    'internal',
    'unavailable',
  ]);
  const problem = api.components.schemas.Problem;
  assert.deepEqual(problem.required, ['type', 'title', 'status', 'detail', 'code', 'request_id']);
  assert.equal(problem.additionalProperties, false);
  for (const [status, [name, code, title]] of Object.entries(ERROR_RESPONSES)) {
    const r = api.components.responses[name];
    assert.deepEqual(Object.keys(r.content), ['application/problem+json'], name);
    const [base, refine] = r.content['application/problem+json'].schema.allOf;
    assert.equal(base.$ref, '#/components/schemas/Problem');
    assert.equal(refine.type, 'object');
    assert.deepEqual(refine.properties, {
      status: { const: Number(status) },
      title: { const: title },
      code: { const: code },
    });
  }
  for (const { key, op } of operations()) {
    for (const [status, raw] of Object.entries(op.responses)) {
      if (Number(status) < 400 || (key === 'GET /readyz' && status === '503')) continue;
      const expected = ERROR_RESPONSES[status];
      assert.ok(expected, `${key} documents ${status}, which has no error code`);
      assert.equal(raw.$ref, `#/components/responses/${expected[0]}`, `${key} ${status}`);
    }
  }
});

test('201 and 202 answers carry a Location header', () => {
  for (const { key, op } of operations()) {
    for (const status of ['201', '202']) {
      if (op.responses[status]) assert.ok(op.responses[status].headers?.Location, `${key} ${status}`);
    }
  }
});

test('the events stream names a schema for each event, and its example matches them', () => {
  const media = api.paths['/v1/evaluations/{evaluation_id}/events'].get.responses['200'].content['text/event-stream'];
  const events = media['x-evald-events'];
  assert.deepEqual(Object.keys(events).sort(), ['deleted', 'run', 'status']);
  let name = null;
  let seen = 0;
  for (const line of media.example.split('\n')) {
    if (line.startsWith('event: ')) name = line.slice(7);
    if (line.startsWith('data: ')) {
      assert.ok(events[name], `unknown event ${name}`);
      assertValid(events[name], JSON.parse(line.slice(6)), `event ${name}`);
      seen++;
    }
  }
  assert.ok(seen >= 2);
});

test('the comparison has one delta per summary metric', () => {
  const s = api.components.schemas;
  const metrics = Object.keys(s.SessionSummaryMetricsV1.properties);
  assert.deepEqual(Object.keys(s.SessionMetricDeltasV1.properties), metrics);
  assert.deepEqual(s.SessionMetricDeltasV1.required, metrics);
  assert.deepEqual(s.SessionSummaryMetricsV1.required, metrics);
});

test('every hand-written component is used', () => {
  const refs = new Set();
  const walk = (node) => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node && typeof node === 'object') {
      for (const [k, v] of Object.entries(node)) {
        if (k === '$ref' && typeof v === 'string') refs.add(v);
        else walk(v);
      }
    }
  };
  walk({ paths: api.paths, webhooks: api.webhooks, components: api.components });
  const seedNames = new Set(seedSchemaNames());
  const unused = [];
  for (const [kind, entries] of Object.entries(api.components)) {
    if (kind === 'securitySchemes') continue;
    for (const name of Object.keys(entries)) {
      if (kind === 'schemas' && seedNames.has(name)) continue;
      if (!refs.has(`#/components/${kind}/${name}`)) unused.push(`${kind}/${name}`);
    }
  }
  assert.deepEqual(unused, []);
});

test('the validator resolves references and rejects bad data', () => {
  const s = (name) => ({ $ref: `#/components/schemas/${name}` });
  const start = validator.compile(s('EvaluationStartRequestV1'));
  assert.equal(start({}), false);
  const example = api.components.examples.EvalStartRequest.value;
  assert.equal(start(example), true, validator.errors(start));
  assert.equal(start({ ...example, concurrency: 17 }), false);
  assert.equal(start({ ...example, model: { ...example.model, surprise: 1 } }), false);
  const evaluation = validator.compile(s('EvaluationV1'));
  const value = api.components.examples.EvaluationCompleted.value;
  assert.equal(evaluation(value), true, validator.errors(evaluation));
  assert.equal(evaluation({ ...value, unexpected: true }), false);
  const list = validator.compile(s('EvalListResponseV1'));
  assert.equal(list({ evaluations: [{ ...api.components.examples.EvalList.value.evaluations[0], total_runs: -1 }] }), false);
  const session = validator.compile(s('SessionV1'));
  assert.equal(session({ ...api.components.examples.SessionWorking.value, messages: [] }), false);
  const uint32 = validator.compile({ type: 'integer', format: 'uint32' });
  assert.equal(uint32(4294967296), false);
});

test('every example validates against its schema', () => {
  let checked = 0;
  const check = (schema, holder, where) => {
    if (!schema) return;
    if (holder.example !== undefined) {
      assertValid(schema, holder.example, `${where} example`);
      checked++;
    }
    for (const [name, ex] of Object.entries(holder.examples ?? {})) {
      const e = deref(ex);
      assert.ok('value' in e, `${where} example ${name} has no value`);
      assertValid(schema, e.value, `${where} example ${name}`);
      checked++;
    }
  };
  const all = [...operations(), ...operations(api.webhooks)];
  for (const { key, op, item } of all) {
    for (const p of [...(item.parameters ?? []), ...(op.parameters ?? [])].map(deref))
      check(p.schema, p, `${key} parameter ${p.name}`);
    for (const [media, m] of Object.entries(op.requestBody?.content ?? {}))
      check(m.schema, m, `${key} request ${media}`);
    for (const [status, , r] of responsesOf(op)) {
      for (const [media, m] of Object.entries(r.content ?? {}))
        check(m.schema, m, `${key} ${status} ${media}`);
      for (const [name, h] of Object.entries(r.headers ?? {})) {
        const header = deref(h);
        check(header.schema, header, `${key} ${status} header ${name}`);
      }
    }
  }
  // `examples` inside schemas (JSON Schema keyword).
  const walk = (node, where) => {
    if (Array.isArray(node)) node.forEach((n, i) => walk(n, `${where}/${i}`));
    else if (node && typeof node === 'object') {
      if (Array.isArray(node.examples) && (node.type || node.$ref || node.allOf)) {
        node.examples.forEach((ex, i) => assertValid(node, ex, `${where} examples[${i}]`));
        checked += node.examples.length;
      }
      for (const [k, v] of Object.entries(node)) walk(v, `${where}/${k}`);
    }
  };
  walk(api.components.schemas, '#/components/schemas');
  assert.ok(checked >= 60, `only ${checked} examples were checked`);
  console.log(`validated ${checked} examples`);
});

test('the YAML keeps no duplicate keys and parses without warnings', () => {
  const text = readFileSync(new URL('../../openapi/openapi.yaml', import.meta.url), 'utf8');
  const doc = YAML.parseDocument(text, { uniqueKeys: true });
  assert.deepEqual(doc.errors, []);
  assert.deepEqual(doc.warnings, []);
});

test('the mirror and the REST routes answer the same shapes for the same operations', () => {
  const schemaOf = (path, method, status) =>
    api.paths[path][method].responses[status].content['application/json'].schema;
  const same = [
    ['/v1/functions/eval::start', 'post', '200', '/v1/evaluations', 'post', '202'],
    ['/v1/functions/eval::rerun', 'post', '200', '/v1/evaluations/{evaluation_id}/rerun', 'post', '202'],
    ['/v1/functions/eval::cancel', 'post', '200', '/v1/evaluations/{evaluation_id}/cancel', 'post', '200'],
    ['/v1/functions/eval::assert::exact', 'post', '200', '/v1/evaluators/exact', 'post', '200'],
    ['/v1/functions/eval::assert::normalized_text', 'post', '200', '/v1/evaluators/normalized_text', 'post', '200'],
    ['/v1/functions/eval::assert::trajectory', 'post', '200', '/v1/evaluators/trajectory', 'post', '200'],
    ['/v1/functions/eval::compare-sessions', 'post', '200', '/v1/sessions/compare', 'get', '200'],
  ];
  for (const [p1, m1, s1, p2, m2, s2] of same)
    assert.ok(isDeepStrictEqual(schemaOf(p1, m1, s1), schemaOf(p2, m2, s2)), `${p1} vs ${p2}`);
});

test('objects are closed wherever evald controls their shape', () => {
  // A schema that lists `properties` must refuse others (additionalProperties or
  // unevaluatedProperties false), unless it is a member of an allOf (the composition
  // closes it) or says why it stays open in `x-evald-open`. The seed's copy is checked
  // against the seed instead.
  const seedNames = new Set(seedSchemaNames());
  const open = [];
  const walk = (node, where, inAllOf) => {
    if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${where}/${i}`, inAllOf));
    if (!node || typeof node !== 'object') return;
    if (node.properties && !inAllOf && node['x-evald-open'] === undefined) {
      if (node.additionalProperties !== false && node.unevaluatedProperties !== false) open.push(where);
    }
    for (const [k, v] of Object.entries(node)) {
      if (k === 'examples' || k === 'example') continue;
      if (k === 'allOf') v.forEach((n, i) => walk(n, `${where}/allOf/${i}`, true));
      else walk(v, `${where}/${k}`, false);
    }
  };
  for (const [name, schema] of Object.entries(api.components.schemas))
    if (!seedNames.has(name)) walk(schema, `#/components/schemas/${name}`, false);
  walk(api.paths, '#/paths', false);
  walk(api.components.responses, '#/components/responses', false);
  assert.deepEqual(open, [], 'open objects (close them, or say why in x-evald-open)');
  // An allOf that composes evald's own objects is closed as a whole.
  for (const [name, schema] of Object.entries(api.components.schemas)) {
    if (seedNames.has(name) || !schema.allOf || schema['x-evald-open'] !== undefined) continue;
    const closedMember = schema.allOf.some((m) => {
      const target = m.$ref ? deref(m) : m;
      return target.additionalProperties === false || target.unevaluatedProperties === false;
    });
    assert.ok(schema.unevaluatedProperties === false || closedMember, `${name}: its allOf is open`);
  }
});
