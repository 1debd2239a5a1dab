// Tests of the contract checker itself (contract.mjs): synthetic exchanges that it must
// accept or refuse, so that a passing contract/openapi means something.
// Run: node --test tests/openapi/contract.test.mjs
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { JSON_PATH } from '../../openapi/build.mjs';
import { checkExchange, compileRoutes, matchRoute, parseEvents, parseHeaders } from './contract.mjs';
import { makeValidator } from './schema.mjs';

const api = JSON.parse(readFileSync(JSON_PATH, 'utf8'));
const routes = compileRoutes(api);
const validator = makeValidator(api);
const CONTRACT = fileURLToPath(new URL('./contract.mjs', import.meta.url));

/** A raw header block with X-Request-Id and the universal headers, plus `extra`. */
function headers(status, ctype, extra = {}) {
  const lines = [`HTTP/1.1 ${status} X`, 'Date: Mon, 30 Nov 2026 09:27:31 GMT', 'X-Request-Id: req_0123'];
  if (ctype) lines.push(`Content-Type: ${ctype}`);
  lines.push('Cache-Control: no-store', 'X-Content-Type-Options: nosniff');
  for (const [k, v] of Object.entries(extra)) lines.push(`${k}: ${v}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

const JSON_TYPE = 'application/json; charset=utf-8';
const PROBLEM = 'application/problem+json';
const problem = (status, title, code) =>
  JSON.stringify({ type: 'about:blank', title, status, detail: 'x', code, request_id: 'req_1' });
const check = (ex) => checkExchange(api, routes, validator, ex).problems;

test('routes match literally first, by template, and greedily where marked', () => {
  assert.equal(matchRoute(routes, '/v1/sessions/compare').template, '/v1/sessions/compare');
  assert.equal(matchRoute(routes, '/v1/sessions/ses_1').template, '/v1/sessions/{session_id}');
  assert.equal(matchRoute(routes, '/v1/functions/eval::start').template, '/v1/functions/eval::start');
  assert.equal(matchRoute(routes, '/v1/functions/eval%3A%3Astart').template, '/v1/functions/eval::start');
  assert.equal(matchRoute(routes, '/console/js/app.js').template, '/console/{path}');
  assert.equal(matchRoute(routes, '/v1/functions/eval::nope'), null);
  assert.equal(matchRoute(routes, '/v1/evaluations/'), null);
  assert.equal(matchRoute(routes, '/').template, '/');
  // escapes that are not UTF-8 still fill a parameter (the router answers 400 for them)
  assert.equal(matchRoute(routes, '/v1/sessions/%FF%FE').template, '/v1/sessions/{session_id}');
});

test('headers and events are parsed as a client sees them', () => {
  const h = parseHeaders('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nA: 1\r\nb: 2\r\nA: 3\r\n\r\n');
  assert.deepEqual(h, { a: '1, 3', b: '2' });
  const text = 'event: status\ndata: {"a":1}\n\n: keep-alive\n\nevent: run\ndata: {"b"';
  assert.deepEqual(parseEvents(text, false), [{ event: 'status', data: '{"a":1}' }]);
  assert.deepEqual(parseEvents('data: 1\n\n', true), [{ event: 'message', data: '1' }]);
});

test('a documented answer passes', () => {
  const ok = {
    method: 'POST',
    url: '/v1/functions/eval::cancel',
    status: 200,
    headers: headers(200, JSON_TYPE),
    body: JSON.stringify({ cancelled: false, status: 'completed' }),
  };
  assert.deepEqual(check(ok), []);
  const notFound = {
    method: 'GET',
    url: '/v1/no/such/route',
    status: 404,
    headers: headers(404, PROBLEM),
    body: problem(404, 'Not Found', 'not_found'),
  };
  assert.deepEqual(check(notFound), [], 'an unknown route answering the 404 problem is fine');
});

test('an undocumented route, status, field, type, header or event is refused', () => {
  const base = { method: 'GET', url: '/v1/evaluations/eval_1/status', status: 200 };
  const status = {
    evaluation_id: 'eval_1', status: 'running', total_runs: 2, terminal_runs: 0, passed_runs: 0,
    failed_runs: 0, created_at: 1, updated_at: 2,
  };
  const cases = [
    [{ ...base, url: '/v1/secret', headers: headers(200, JSON_TYPE), body: '{}' }, /not a documented operation/],
    [{ ...base, status: 418, headers: headers(418, JSON_TYPE), body: '{}' }, /status 418 is not documented/],
    [{ ...base, headers: headers(200, JSON_TYPE), body: JSON.stringify({ ...status, surprise: 1 }) }, /additional properties/],
    [{ ...base, headers: headers(200, JSON_TYPE), body: JSON.stringify({ ...status, total_runs: -1 }) }, /total_runs/],
    [{ ...base, headers: headers(200, 'text/plain'), body: '{}' }, /content type text\/plain is not documented/],
    [{ ...base, headers: headers(200, JSON_TYPE), body: 'not json' }, /not JSON/],
    [{ ...base, headers: headers(200, JSON_TYPE, { ETag: '"0123456789abcdef"' }), body: JSON.stringify(status) }, /header etag is not documented/],
    [{ ...base, headers: headers(200, JSON_TYPE).replace('X-Request-Id: req_0123\r\n', ''), body: JSON.stringify(status) }, /x-request-id is required/],
    [{ ...base, headers: headers(200, JSON_TYPE).replace('no-store', 'max-age=60'), body: JSON.stringify(status) }, /cache-control/],
    [{ ...base, url: '/v1/evaluations/eval_1/events', headers: headers(200, 'text/event-stream', { 'X-Accel-Buffering': 'no' }).replace('no-store', 'no-cache'),
       body: 'event: status\ndata: {}\n\nevent: party\ndata: {}\n\n' }, /event "party" is not documented/],
    [{ ...base, method: 'DELETE', url: '/v1/evaluations/eval_1/status', status: 200, headers: headers(200, JSON_TYPE), body: '{}' }, /not a documented operation/],
  ];
  for (const [ex, expected] of cases) {
    const problems = check(ex);
    assert.ok(problems.some((p) => expected.test(p)), `${ex.method} ${ex.url} ${ex.status}: expected ${expected}, got ${JSON.stringify(problems)}`);
  }
});

test('a documented operation the router does not know yet is noted, not failed', () => {
  const ex = {
    method: 'POST', url: '/v1/subscriptions', status: 404, headers: headers(404, PROBLEM),
    body: JSON.stringify({ type: 'about:blank', title: 'Not Found', status: 404, detail: 'POST /v1/subscriptions: no such resource', code: 'not_found', request_id: 'req_1' }),
  };
  const r = checkExchange(api, routes, validator, ex);
  assert.equal(r.unserved, true);
  assert.deepEqual(r.problems, []);
  const other = checkExchange(api, routes, validator, { ...ex, body: problem(404, 'Not Found', 'not_found') });
  assert.ok(other.problems.some((p) => /status 404 is not documented/.test(p)));
});

test('the command fails on an empty record and on a mismatch, and passes on good traffic', () => {
  const dir = mkdtempSync(join(tmpdir(), 'evald-contract-'));
  try {
    const run = () => spawnSync(process.execPath, [CONTRACT, dir], { encoding: 'utf8' });
    let r = run();
    assert.equal(r.status, 1);
    assert.match(r.stderr, /no exchange was recorded/);
    const good = {
      suite: 't', method: 'GET', url: '/v1/no/such', status: 404,
      headers: headers(404, PROBLEM), body: problem(404, 'Not Found', 'not_found'),
    };
    writeFileSync(join(dir, 't-1.jsonl'), `${JSON.stringify(good)}\n`);
    r = run();
    assert.equal(r.status, 0, r.stderr);
    writeFileSync(join(dir, 't-2.jsonl'), `${JSON.stringify({ ...good, status: 200 })}\n`);
    r = run();
    assert.equal(r.status, 1);
    assert.match(r.stderr, /t-2\.jsonl:1/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
