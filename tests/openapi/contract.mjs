// The contract check: every HTTP exchange the end-to-end suites had with evald, recorded
// as JSON lines in a directory (EVALD_CONTRACT_RECORD; tests/support/contract_record.c and
// tests/support/contract_proxy.mjs write them), is matched to an operation of
// openapi/openapi.json and checked: the route and method are documented (an unknown one
// must answer the documented 404 problem), the status is documented, the headers are
// documented (required ones present, values valid), the content type is one the response
// lists, and the body validates against its schema (JSON, or each Server-Sent Event).
// A documented operation the router does not know yet (its 404 "no such resource") is
// reported as a NOTE. Exits 1 with a list of mismatches, or when nothing was recorded.
//   usage: node tests/openapi/contract.mjs RECORD_DIR [--document openapi/openapi.json]
//                                          [--uncovered]
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { makeValidator } from './schema.mjs';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

// Headers any response may carry without being listed by the operation. Cache-Control
// and X-Content-Type-Options have documented defaults (see info.description).
const UNIVERSAL_HEADERS = new Set([
  'date',
  'content-type',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'x-content-type-options',
  'cache-control',
]);
const HEADER_DEFAULTS = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' };

/** Resolves a local `$ref` chain inside `api`. */
function deref(api, node) {
  let cur = node;
  for (let i = 0; cur && typeof cur.$ref === 'string'; i++) {
    if (i > 10 || !cur.$ref.startsWith('#/')) throw new Error(`cannot resolve ${cur.$ref}`);
    cur = cur.$ref
      .slice(2)
      .split('/')
      .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce((o, k) => (o === undefined ? undefined : o[k]), api);
  }
  if (cur === undefined) throw new Error(`unresolved reference ${node.$ref}`);
  return cur;
}

/**
 * The documented paths as matchers. A literal segment must be equal; a `{param}` segment
 * matches one non-empty segment, or the rest of the path when its parameter says
 * `x-evald-greedy: true` (it must be the last segment). The most literal match wins.
 */
export function compileRoutes(api) {
  const routes = [];
  for (const [template, item] of Object.entries(api.paths)) {
    const params = new Map();
    for (const p of [
      ...(item.parameters ?? []),
      ...METHODS.flatMap((m) => item[m]?.parameters ?? []),
    ].map((p) => deref(api, p)))
      if (p.in === 'path') params.set(p.name, p);
    const segments = template
      .split('/')
      .slice(1)
      .map((s) => {
        const m = /^\{([^}]+)\}$/.exec(s);
        if (!m) return { literal: s };
        return { param: m[1], greedy: params.get(m[1])?.['x-evald-greedy'] === true };
      });
    routes.push({ template, item, segments });
  }
  return routes;
}

export function matchRoute(routes, path) {
  // A segment whose escapes are not UTF-8 (%FF) stays as sent: it still fills a
  // {param}, whose 400 is then checked like any other answer.
  const decode = (s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  };
  const segs = path.split('/').slice(1).map(decode);
  let best = null;
  for (const route of routes) {
    let score = 0;
    let ok = true;
    let i = 0;
    for (const [k, seg] of route.segments.entries()) {
      if (seg.greedy && k === route.segments.length - 1) {
        if (i >= segs.length || segs.slice(i).some((s) => s === '')) ok = false;
        i = segs.length;
        break;
      }
      if (i >= segs.length) {
        ok = false;
        break;
      }
      if (seg.literal !== undefined) {
        if (seg.literal !== segs[i]) {
          ok = false;
          break;
        }
        score += 2 ** (20 - k); // earlier literal segments weigh more
      } else if (segs[i] === '') {
        ok = false;
        break;
      }
      i++;
    }
    if (ok && i === segs.length && (best === null || score > best.score)) best = { route, score };
  }
  return best?.route ?? null;
}

/** The last header block of a raw response header text, as {lowercase name: value}. */
export function parseHeaders(raw) {
  const blocks = String(raw ?? '')
    .split(/\r?\n\r?\n/)
    .filter((b) => b.startsWith('HTTP/'));
  const out = {};
  const lines = (blocks.at(-1) ?? '').split(/\r?\n/).slice(1);
  for (const line of lines) {
    const c = line.indexOf(':');
    if (c <= 0) continue;
    const name = line.slice(0, c).trim().toLowerCase();
    const value = line.slice(c + 1).trim();
    out[name] = name in out ? `${out[name]}, ${value}` : value;
  }
  return out;
}

/** Complete Server-Sent Events of a stream text: [{event, data}]. */
export function parseEvents(text, complete) {
  const blocks = text.split(/\r?\n\r?\n/);
  if (!complete || !/\r?\n\r?\n$/.test(text)) blocks.pop(); // a partial last event
  const events = [];
  for (const block of blocks) {
    let event = 'message';
    const data = [];
    for (const line of block.split(/\r?\n/)) {
      if (line === '' || line.startsWith(':')) continue;
      const c = line.indexOf(':');
      const field = c < 0 ? line : line.slice(0, c);
      const value = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (data.length > 0) events.push({ event, data: data.join('\n') });
  }
  return events;
}

/** Reads every *.jsonl record of `dir`: [{exchange, where}] and unreadable lines. */
export function readRecords(dir) {
  const exchanges = [];
  const unreadable = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.jsonl')).sort()) {
    const lines = readFileSync(join(dir, file), 'utf8').split('\n');
    lines.forEach((line, i) => {
      if (line.trim() === '') return;
      const where = `${file}:${i + 1}`;
      try {
        exchanges.push({ exchange: JSON.parse(line), where });
      } catch (e) {
        unreadable.push(`${where}: ${e.message}`);
      }
    });
  }
  return { exchanges, unreadable };
}

/**
 * Checks one exchange against the document. Returns {op, problems: [string]}, where op
 * names the matched operation and status ("GET /v1/models 200") for the coverage count.
 */
export function checkExchange(api, routes, validator, ex) {
  const problems = [];
  const method = String(ex.method ?? '').toUpperCase();
  const url = String(ex.url ?? '/');
  const path = url.split('?')[0];
  const status = Number(ex.status);
  const headers = parseHeaders(ex.headers);
  const route = matchRoute(routes, path);
  const head = method === 'HEAD';
  let op = route ? route.item[method.toLowerCase()] : undefined;
  if (!op && head && route) op = route.item.get; // HEAD is GET without a body
  let responses;
  let name;
  if (!route || !op) {
    // Unknown route or method: only the documented 404 problem is acceptable.
    name = `${method} ${route ? route.template : '(no documented path)'}`;
    if (status !== 404) {
      problems.push(`${method} ${path} is not a documented operation, yet it answered ${status}`);
      return { op: `${name} ${status}`, problems };
    }
    responses = { 404: api.components.responses.NotFound };
  } else {
    name = `${method} ${route.template}`;
    responses = op.responses ?? {};
  }
  // A documented operation the server does not route yet (another branch builds it) is
  // noted, not failed: the router's 404 says so in its detail.
  if (route && op && status === 404 && responses['404'] === undefined) {
    let detail = '';
    try {
      detail = JSON.parse(ex.body ?? '').detail ?? '';
    } catch {
      // not a problem document: checked as an undocumented status below
    }
    if (/: (no such resource|method not allowed on this resource)$/.test(detail))
      return { op: `${name} 404`, problems, unserved: true };
  }
  const raw =
    responses[String(status)] ?? responses[`${String(status)[0]}XX`] ?? responses.default;
  if (raw === undefined) {
    problems.push(`status ${status} is not documented (documented: ${Object.keys(responses).join(', ')})`);
    return { op: `${name} ${status}`, problems };
  }
  const response = deref(api, raw);
  const where = `${name} ${status}`;

  // Headers: the documented ones, then anything else that is not universal.
  const documented = new Map(
    Object.entries(response.headers ?? {}).map(([k, v]) => [k.toLowerCase(), deref(api, v)]),
  );
  for (const [hname, h] of documented) {
    if (hname === 'content-type') continue;
    const value = headers[hname];
    if (value === undefined) {
      if (h.required) problems.push(`header ${hname} is required but absent`);
      continue;
    }
    if (h.schema) {
      const fn = validator.compile(h.schema);
      const typed = h.schema.type === 'integer' || h.schema.type === 'number' ? Number(value) : value;
      if (!fn(typed)) problems.push(`header ${hname}: ${JSON.stringify(value)}: ${validator.errors(fn)}`);
    }
  }
  for (const [hname, value] of Object.entries(headers)) {
    if (documented.has(hname)) continue;
    if (!UNIVERSAL_HEADERS.has(hname)) problems.push(`header ${hname} is not documented`);
    else if (HEADER_DEFAULTS[hname] !== undefined && value !== HEADER_DEFAULTS[hname])
      problems.push(`header ${hname}: ${value} differs from the default ${HEADER_DEFAULTS[hname]} and the response does not document it`);
  }

  // Content type and body.
  const complete = ex.complete !== false;
  const body = ex.body;
  const empty = (body === undefined ? Number(ex.body_bytes ?? 0) : body.length) === 0;
  if (!response.content) {
    if (!empty) problems.push('the response documents no content, but a body was sent');
    if (headers['content-type'] !== undefined)
      problems.push(`the response documents no content, but Content-Type is ${headers['content-type']}`);
    return { op: where, problems };
  }
  const ctype = headers['content-type'];
  if (ctype === undefined) {
    problems.push('Content-Type is absent');
    return { op: where, problems };
  }
  const media = ctype.split(';')[0].trim().toLowerCase();
  const content = response.content;
  const key =
    Object.keys(content).find((k) => k.toLowerCase() === media) ??
    Object.keys(content).find((k) => k === `${media.split('/')[0]}/*`) ??
    Object.keys(content).find((k) => k === '*/*');
  if (key === undefined) {
    problems.push(`content type ${media} is not documented (documented: ${Object.keys(content).join(', ')})`);
    return { op: where, problems };
  }
  if (head) {
    if (!empty) problems.push('HEAD answered with a body');
    return { op: where, problems };
  }
  const m = content[key];
  if (media === 'application/json' || media.endsWith('+json')) {
    if (body === undefined) {
      problems.push('a JSON body was recorded as binary');
    } else if (complete) {
      let value;
      try {
        value = JSON.parse(body);
      } catch (e) {
        problems.push(`the body is not JSON: ${e.message}`);
        return { op: where, problems };
      }
      if (m.schema !== undefined) {
        const fn = validator.compile(m.schema);
        if (!fn(value)) problems.push(`body: ${validator.errors(fn)}`);
      }
    }
  } else if (media === 'text/event-stream') {
    const schemas = m['x-evald-events'] ?? {};
    for (const ev of parseEvents(body ?? '', complete)) {
      const schema = schemas[ev.event];
      if (schema === undefined) {
        problems.push(`event "${ev.event}" is not documented (documented: ${Object.keys(schemas).join(', ')})`);
        continue;
      }
      let value;
      try {
        value = JSON.parse(ev.data);
      } catch (e) {
        problems.push(`event "${ev.event}": data is not JSON: ${e.message}`);
        continue;
      }
      const fn = validator.compile(schema);
      if (!fn(value)) problems.push(`event "${ev.event}": ${validator.errors(fn)}`);
    }
  } else if (m.schema?.type === 'string' && body === undefined && !m.schema.contentMediaType) {
    problems.push(`a ${media} body was recorded as binary`);
  }
  return { op: where, problems };
}

/** Every documented operation and status, as "METHOD /path STATUS". */
function documentedPairs(api) {
  const out = [];
  for (const [path, item] of Object.entries(api.paths))
    for (const m of METHODS)
      for (const status of Object.keys(item[m]?.responses ?? {}))
        out.push(`${m.toUpperCase()} ${path} ${status}`);
  return out;
}

function main(argv) {
  const args = argv.slice(2);
  const dir = args.find((a) => !a.startsWith('--'));
  const docIndex = args.indexOf('--document');
  const docPath = docIndex >= 0 ? args[docIndex + 1] : join(REPO, 'openapi', 'openapi.json');
  if (!dir) {
    console.error('usage: contract.mjs RECORD_DIR [--document FILE] [--uncovered]');
    return 2;
  }
  if (!existsSync(dir)) {
    console.error(`contract: FAILED: ${dir} does not exist: nothing was recorded (run the end-to-end suites with EVALD_CONTRACT_RECORD=${dir})`);
    return 1;
  }
  const api = JSON.parse(readFileSync(docPath, 'utf8'));
  const routes = compileRoutes(api);
  const validator = makeValidator(api);
  const { exchanges, unreadable } = readRecords(dir);
  const suites = new Set(exchanges.map(({ exchange }) => exchange.suite));
  if (exchanges.length === 0) {
    console.error(`contract: FAILED: no exchange was recorded in ${dir}; the end-to-end suites record there when EVALD_CONTRACT_RECORD names it`);
    return 1;
  }
  const groups = new Map();
  const seen = new Set();
  const unserved = new Set();
  for (const { exchange, where } of exchanges) {
    let result;
    try {
      result = checkExchange(api, routes, validator, exchange);
    } catch (e) {
      result = { op: `${exchange.method} ${exchange.url} ${exchange.status}`, problems: [`cannot check: ${e.message}`] };
    }
    if (result.unserved) unserved.add(result.op.replace(/ 404$/, ''));
    else seen.add(result.op);
    for (const problem of result.problems) {
      const k = `${result.op}: ${problem}`;
      const g = groups.get(k) ?? { count: 0, first: `${exchange.suite} ${where} (${exchange.method} ${exchange.url})` };
      g.count++;
      groups.set(k, g);
    }
  }
  for (const u of unreadable) groups.set(`unreadable record ${u}`, { count: 1, first: u });
  const pairs = documentedPairs(api);
  const ops = new Set(pairs.map((p) => p.split(' ').slice(0, 2).join(' ')));
  const seenOps = new Set([...seen].map((p) => p.split(' ').slice(0, 2).join(' ')).filter((o) => ops.has(o)));
  console.log(
    `contract: ${exchanges.length} exchanges from ${suites.size} suites (${[...suites].sort().join(', ')}); ` +
      `${seenOps.size} of ${ops.size} documented operations and ${[...seen].filter((p) => pairs.includes(p)).length} of ${pairs.length} documented statuses exercised`,
  );
  for (const o of [...unserved].sort())
    console.log(`contract: NOTE: ${o} is documented but evald does not serve it yet (the router answered 404)`);
  if (args.includes('--uncovered')) {
    for (const o of [...ops].filter((o) => !seenOps.has(o)).sort()) console.log(`  not exercised: ${o}`);
  }
  if (groups.size === 0) {
    console.log('contract: every recorded response matches openapi/openapi.json');
    return 0;
  }
  console.error(`contract: FAILED: ${groups.size} kinds of mismatch between evald and openapi/openapi.json:`);
  for (const [k, g] of [...groups].sort()) console.error(`  ${k}\n      ${g.count}×, first in ${g.first}`);
  return 1;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv);
}
