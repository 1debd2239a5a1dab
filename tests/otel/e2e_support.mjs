// Shared pieces of the OTLP end-to-end suites (tests/otel/*.e2e.mjs, run by tests/otel/e2e.sh):
// a throwaway database on the test PostgreSQL server, the real evald-stub and evald
// binaries started on loopback with the environment each scenario needs, an HTTP receiver
// on 127.0.0.1 that plays the OTLP collector, the HTTP tool and the HTTP evaluator, and the
// helpers that read exports (decoded with decode.mjs) as spans and attributes.
// Every process started here is stopped by its suite's `after`, and killed at exit at the
// latest; nothing listens beyond 127.0.0.1.
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { join } from 'node:path';

import { decodeExport } from './decode.mjs';

export const EVALD_BIN = process.env.EVALD_BIN;
export const STUB_BIN = process.env.EVALD_STUB_BIN;
export const ADMIN_DB_URL = process.env.EVALD_TEST_DATABASE_URL;
for (const [name, value] of [['EVALD_BIN', EVALD_BIN], ['EVALD_STUB_BIN', STUB_BIN],
    ['EVALD_TEST_DATABASE_URL', ADMIN_DB_URL]]) {
    if (!value) throw new Error(`${name} must be set (tests/otel/e2e.sh and scripts/test.sh set it)`);
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const children = new Set();

// With EVALD_TEST_LOG_DIR set (CTest sets it for integration suites), each child's stderr
// is kept there once it exits, for the logs/json check (tests/cmake/logs.cmake).
function keepLog(name, pid, text) {
    const dir = process.env.EVALD_TEST_LOG_DIR;
    if (!dir || !text) return;
    try {
        mkdirSync(dir, { recursive: true });
        writeFileSync(join(dir, `otel-e2e-${name}-${pid}.log`), text);
    } catch { /* the check reports missing logs itself */ }
}
process.on('exit', () => {
    for (const child of children) {
        try { child.kill('SIGKILL'); } catch { /* already gone */ }
    }
});

// ---- PostgreSQL --------------------------------------------------------------------------

// A database made for one suite; drop() removes it (FORCE: a killed evald may hold a session).
export function createDatabase() {
    const name = `evald_otel_${randomBytes(6).toString('hex')}`;
    execFileSync('psql', ['-q', '-v', 'ON_ERROR_STOP=1', ADMIN_DB_URL, '-c', `CREATE DATABASE ${name}`],
        { stdio: ['ignore', 'ignore', 'pipe'] });
    let url;
    if (/^postgres(ql)?:\/\//.test(ADMIN_DB_URL)) {
        const u = new URL(ADMIN_DB_URL);
        u.pathname = `/${name}`;
        url = u.toString();
    } else {
        url = `${ADMIN_DB_URL} dbname=${name}`;
    }
    return {
        name,
        url,
        drop() {
            try {
                execFileSync('psql', ['-q', ADMIN_DB_URL, '-c', `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`],
                    { stdio: 'ignore' });
            } catch { /* best effort */ }
        },
    };
}

// ---- processes ---------------------------------------------------------------------------

// The environment of a child: ours without any OTEL_*, EVALD_* or provider setting, so only
// what a scenario sets reaches evald.
function cleanEnv(extra) {
    const env = {};
    for (const [k, v] of Object.entries(process.env)) {
        if (/^(OTEL_|EVALD_|OPENAI_|ANTHROPIC_)/.test(k)) continue;
        env[k] = v;
    }
    return { ...env, ...extra };
}

// Starts `bin` and waits for its {"listen":"host:port"} line on stdout. Resolves with a
// handle: base URL, the stderr text so far, exit promise, stop().
function startListening(name, bin, args, env, { timeoutMs = 20000 } = {}) {
    return new Promise((resolve, reject) => {
        const child = spawn(bin, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
        children.add(child);
        let out = '';
        let err = '';
        let settled = false;
        const exited = new Promise((res) => child.on('close', (code, signal) => {
            children.delete(child);
            keepLog(name, child.pid, err);
            res({ code, signal });
        }));
        const handle = {
            name,
            child,
            base: null,
            port: 0,
            get stderr() { return err; },
            exited,
            // SIGTERM, then SIGKILL after timeoutMs; {code, signal, ms, killed}.
            async stop(timeoutMs2 = 15000) {
                if (child.exitCode !== null || child.signalCode !== null) {
                    return { ...(await exited), ms: 0, killed: false };
                }
                const t0 = Date.now();
                child.kill('SIGTERM');
                let timer;
                const late = new Promise((res) => { timer = setTimeout(() => res(null), timeoutMs2); });
                let r = await Promise.race([exited, late]);
                clearTimeout(timer);
                let killed = false;
                if (r === null) {
                    killed = true;
                    child.kill('SIGKILL');
                    r = await exited;
                }
                return { ...r, ms: Date.now() - t0, killed };
            },
        };
        const timer = setTimeout(() => {
            if (settled) return;
            settled = true;
            child.kill('SIGKILL');
            reject(new Error(`${name} did not print its listen line within ${timeoutMs} ms; stderr:\n${err.slice(-4000)}`));
        }, timeoutMs);
        child.stdout.on('data', (d) => {
            out += d;
            const m = /"listen":"([^"]+)"/.exec(out);
            if (m && !settled) {
                settled = true;
                clearTimeout(timer);
                handle.base = `http://${m[1]}`;
                handle.port = Number(m[1].split(':').pop());
                resolve(handle);
            }
        });
        child.stderr.on('data', (d) => { err += d; });
        exited.then(({ code, signal }) => {
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            reject(new Error(`${name} exited (code ${code}, signal ${signal}) before listening; stderr:\n${err.slice(-4000)}`));
        });
    });
}

// evald-stub on a free loopback port; requireKey makes it refuse calls without that key.
export async function startStub({ requireKey } = {}) {
    const env = cleanEnv(requireKey ? { EVALD_STUB_REQUIRE_KEY: requireKey } : {});
    const stub = await startListening('evald-stub', STUB_BIN, ['--listen', '127.0.0.1:0'], env);
    stub.script = async (script) => {
        const r = await api(stub.base, 'PUT', '/_stub/script', script);
        assert.equal(r.status, 200, `the stub refused the script: ${r.text}`);
    };
    stub.requests = async () => (await api(stub.base, 'GET', '/_stub/requests')).json.requests;
    return stub;
}

// evald against `db` whose openai provider is the stub, with `env` added (the OTEL_*
// variables of the scenario). apiKey is the provider key it is given.
export async function startEvald({ db, stub, env = {}, apiKey = 'stub-key' }) {
    const full = cleanEnv({
        EVALD_DATABASE_URL: db.url,
        EVALD_LISTEN: '127.0.0.1:0',
        OPENAI_BASE_URL: `${stub.base}/v1`,
        OPENAI_API_KEY: apiKey,
        EVALD_SWEEP_INTERVAL_MS: '500',
        ...env,
    });
    const evald = await startListening('evald', EVALD_BIN, [], full);
    evald.logLines = () => evald.stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => {
        try { return JSON.parse(l); } catch { return null; }
    }).filter(Boolean);
    return evald;
}

// Runs evald with `env` (no listening expected) and resolves with {code, signal, stderr,
// ms} once it exits, or rejects after timeoutMs.
export function runEvaldToExit(env, timeoutMs = 10000) {
    return new Promise((resolve, reject) => {
        const t0 = Date.now();
        const child = spawn(EVALD_BIN, [], { env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
        children.add(child);
        let err = '';
        let out = '';
        child.stderr.on('data', (d) => { err += d; });
        child.stdout.on('data', (d) => { out += d; });
        const timer = setTimeout(() => {
            child.kill('SIGKILL');
            reject(new Error(`evald with ${JSON.stringify(env)} was still running after ${timeoutMs} ms ` +
                `(stdout: ${out.slice(0, 200)}); stderr:\n${err.slice(-2000)}`));
        }, timeoutMs);
        child.on('close', (code, signal) => {
            children.delete(child);
            clearTimeout(timer);
            keepLog('evald', child.pid, err);
            resolve({ code, signal, stderr: err, stdout: out, ms: Date.now() - t0 });
        });
    });
}

// A loopback port nothing listens on (taken and released at once).
export function closedPort() {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.on('error', reject);
        s.listen(0, '127.0.0.1', () => {
            const { port } = s.address();
            s.close(() => resolve(port));
        });
    });
}

// ---- REST --------------------------------------------------------------------------------

export async function api(base, method, path, body) {
    const headers = { Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(base + path, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json = null;
    try { json = JSON.parse(text); } catch { /* not JSON */ }
    return { status: res.status, headers: res.headers, text, json };
}

export async function waitFor(what, fn, timeoutMs = 30000, everyMs = 100) {
    const t0 = Date.now();
    let last;
    for (;;) {
        last = await fn();
        if (last) return last;
        if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
        await sleep(everyMs);
    }
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

// Starts an evaluation and waits until it is terminal; resolves with its resource document.
export async function runEvaluation(evald, request, timeoutMs = 30000) {
    const r = await api(evald.base, 'POST', '/v1/evaluations', request);
    assert.equal(r.status, 202, `POST /v1/evaluations answered ${r.status}: ${r.text}`);
    const id = r.json.evaluation_id;
    await waitFor(`evaluation ${id} to end`, async () => {
        const s = await api(evald.base, 'GET', `/v1/evaluations/${id}/status`);
        return TERMINAL.has(s.json?.status);
    }, timeoutMs);
    const doc = await api(evald.base, 'GET', `/v1/evaluations/${id}`);
    assert.equal(doc.status, 200, `GET /v1/evaluations/${id} answered ${doc.status}`);
    return doc.json;
}

// The runs of an evaluation resource document (they are under progress.runs).
export function runsOf(doc) {
    const runs = doc?.progress?.runs;
    assert.ok(Array.isArray(runs), `the evaluation document has no progress.runs: ${JSON.stringify(doc).slice(0, 300)}`);
    return runs;
}

export async function runExperiment(evald, request, timeoutMs = 30000) {
    const r = await api(evald.base, 'POST', '/v1/experiments', request);
    assert.equal(r.status, 202, `POST /v1/experiments answered ${r.status}: ${r.text}`);
    const id = r.json.experiment_id;
    await waitFor(`experiment ${id} to end`, async () => {
        const s = await api(evald.base, 'GET', `/v1/experiments/${id}`);
        return TERMINAL.has(s.json?.status);
    }, timeoutMs);
    const rows = [];
    let before = null;
    for (;;) {
        const q = `/v1/experiments/${id}/runs?limit=100${before ? `&before=${encodeURIComponent(before)}` : ''}`;
        const page = await api(evald.base, 'GET', q);
        assert.equal(page.status, 200, `GET ${q} answered ${page.status}: ${page.text}`);
        rows.push(...page.json.runs);
        if (!page.json.next_cursor) break;
        before = page.json.next_cursor;
    }
    return { id, rows };
}

export async function putTool(evald, id, url, schema) {
    const r = await api(evald.base, 'PUT', `/v1/tools/${id}`, {
        description: `e2e tool ${id}`,
        request_schema: schema ?? { type: 'object' },
        url,
        timeout_ms: 5000,
    });
    assert.ok(r.status === 200 || r.status === 201, `PUT /v1/tools/${id} answered ${r.status}: ${r.text}`);
}

// The value of a Prometheus sample (no labels) in /metrics text; NaN when absent.
export async function metrics(evald) {
    const r = await fetch(`${evald.base}/metrics`);
    const text = await r.text();
    const value = (name) => {
        const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'm').exec(text);
        return m ? Number(m[1]) : NaN;
    };
    return { text, value };
}

// ---- the receiver ------------------------------------------------------------------------

// One HTTP server on 127.0.0.1 that is, by path: the OTLP collector (any POST whose path is
// not a tool's; answered by `tracesPolicy(request, n)` → {status, headers}), and the tools
// of `tools` (path → async (json, req) → {status?, body}). Every request is recorded.
export class Receiver {
    constructor({ tracesPolicy, tools = {} } = {}) {
        this.tracesPolicy = tracesPolicy ?? (() => ({ status: 200 }));
        this.tools = tools;
        this.exports = []; // {path, status, contentType, headers, body, at}
        this.toolCalls = []; // {path, headers, body, at}
        this.firstExportAt = 0;
    }

    start() {
        this.server = http.createServer((req, res) => {
            const chunks = [];
            req.on('data', (c) => chunks.push(c));
            req.on('end', () => this.handle(req, res, Buffer.concat(chunks)).catch((e) => {
                res.statusCode = 500;
                res.end(String(e));
            }));
        });
        this.server.keepAliveTimeout = 1000;
        return new Promise((resolve) => this.server.listen(0, '127.0.0.1', () => {
            this.port = this.server.address().port;
            this.base = `http://127.0.0.1:${this.port}`;
            resolve(this);
        }));
    }

    async handle(req, res, body) {
        const path = req.url.split('?')[0];
        const tool = this.tools[path];
        if (tool) {
            let json = null;
            try { json = JSON.parse(body.toString('utf8')); } catch { /* recorded as null */ }
            this.toolCalls.push({ path, headers: req.headers, body: json, at: Date.now() });
            const answer = await tool(json, req);
            res.statusCode = answer.status ?? 200;
            res.setHeader('Content-Type', 'application/json');
            res.end(JSON.stringify(answer.body ?? {}));
            return;
        }
        const n = this.exports.length;
        if (n === 0) this.firstExportAt = Date.now();
        const answer = (req.method === 'POST' ? this.tracesPolicy(req, n, this) : { status: 405 }) ?? { status: 200 };
        this.exports.push({
            path, method: req.method, status: answer.status, contentType: req.headers['content-type'],
            headers: req.headers, body, at: Date.now(),
        });
        res.statusCode = answer.status;
        for (const [k, v] of Object.entries(answer.headers ?? {})) res.setHeader(k, v);
        res.setHeader('Content-Type', 'application/json');
        res.end(answer.status >= 200 && answer.status < 300 ? '{}' : '{"error":"scripted"}');
    }

    accepted() {
        return this.exports.filter((e) => e.status >= 200 && e.status < 300);
    }

    // Every accepted export decoded with decodeExport, as {exp, doc}.
    decoded() {
        return this.accepted().map((exp) => {
            let doc;
            try {
                doc = decodeExport(exp.body, exp.contentType);
            } catch (e) {
                assert.fail(`decodeExport refused an export (Content-Type ${exp.contentType}, ${exp.body.length} bytes): ${e.message}`);
            }
            return { exp, doc };
        });
    }

    toolCallsTo(path) {
        return this.toolCalls.filter((c) => c.path === path);
    }

    stop() {
        return new Promise((resolve) => {
            if (!this.server) return resolve();
            this.server.closeAllConnections?.();
            this.server.close(() => resolve());
        });
    }
}

// ---- spans -------------------------------------------------------------------------------

export const attrs = (list) => Object.fromEntries((list ?? []).map((kv) => [kv.key, kv.value]));

// The spans of decoded exports, each with its resource attributes and scope.
export function spansOf(decoded) {
    const out = [];
    for (const { doc } of decoded) {
        for (const rs of doc.resourceSpans ?? []) {
            for (const ss of rs.scopeSpans ?? []) {
                for (const span of ss.spans ?? []) {
                    out.push({ span, resource: attrs(rs.resource?.attributes), scope: ss.scope ?? {} });
                }
            }
        }
    }
    return out;
}

export const isRoot = (span) => !span.parentSpanId;
export const HEX32 = /^[0-9a-f]{32}$/;
export const HEX16 = /^[0-9a-f]{16}$/;
export const DECIMAL = /^[0-9]+$/;

// An attribute check that names the span: {str, int, double, strArray, absent}.
export function attrChecker(span) {
    const a = attrs(span.attributes);
    const where = `span "${span.name}" (${span.spanId})`;
    const get = (key) => {
        assert.ok(Object.hasOwn(a, key), `${where}: attribute ${key} is missing; it has ${Object.keys(a).join(', ')}`);
        return a[key];
    };
    return {
        a,
        where,
        str(key, want) {
            const v = get(key);
            assert.equal(typeof v.stringValue, 'string', `${where}: ${key} must be a stringValue, got ${JSON.stringify(v)}`);
            if (want instanceof RegExp) assert.match(v.stringValue, want, `${where}: ${key}`);
            else if (want !== undefined) assert.equal(v.stringValue, want, `${where}: ${key}`);
            return v.stringValue;
        },
        int(key, want) {
            const v = get(key);
            assert.equal(typeof v.intValue, 'string', `${where}: ${key} must be an intValue as a decimal string, got ${JSON.stringify(v)}`);
            assert.match(v.intValue, /^-?[0-9]+$/, `${where}: ${key} intValue must be decimal`);
            if (want !== undefined) assert.equal(Number(v.intValue), want, `${where}: ${key}`);
            return Number(v.intValue);
        },
        double(key, want) {
            const v = get(key);
            assert.equal(typeof v.doubleValue, 'number', `${where}: ${key} must be a doubleValue, got ${JSON.stringify(v)}`);
            if (want !== undefined) assert.equal(v.doubleValue, want, `${where}: ${key}`);
            return v.doubleValue;
        },
        strArray(key) {
            const v = get(key);
            assert.ok(v.arrayValue && Array.isArray(v.arrayValue.values),
                `${where}: ${key} must be an arrayValue, got ${JSON.stringify(v)}`);
            for (const e of v.arrayValue.values) {
                assert.equal(typeof e.stringValue, 'string', `${where}: ${key} holds a non-string ${JSON.stringify(e)}`);
            }
            return v.arrayValue.values.map((e) => e.stringValue);
        },
        absent(key) {
            assert.ok(!Object.hasOwn(a, key), `${where}: attribute ${key} must not be there, got ${JSON.stringify(a[key])}`);
        },
    };
}

// The wire-format rules every span must hold (ids, times, kind, status, AnyValue shapes).
export function checkSpanFormat(span) {
    const where = `span "${span.name}" (${span.spanId})`;
    assert.match(span.traceId ?? '', HEX32, `${where}: traceId must be 32 lowercase hex characters, got ${span.traceId}`);
    assert.match(span.spanId ?? '', HEX16, `${where}: spanId must be 16 lowercase hex characters, got ${span.spanId}`);
    if (span.parentSpanId) assert.match(span.parentSpanId, HEX16, `${where}: parentSpanId must be 16 lowercase hex characters`);
    assert.equal(typeof span.startTimeUnixNano, 'string', `${where}: startTimeUnixNano must be a decimal string, got ${JSON.stringify(span.startTimeUnixNano)}`);
    assert.equal(typeof span.endTimeUnixNano, 'string', `${where}: endTimeUnixNano must be a decimal string, got ${JSON.stringify(span.endTimeUnixNano)}`);
    assert.match(span.startTimeUnixNano, DECIMAL, `${where}: startTimeUnixNano`);
    assert.match(span.endTimeUnixNano, DECIMAL, `${where}: endTimeUnixNano`);
    assert.ok(BigInt(span.startTimeUnixNano) > 1_600_000_000_000_000_000n, `${where}: startTimeUnixNano ${span.startTimeUnixNano} is not Unix epoch nanoseconds`);
    assert.ok(BigInt(span.startTimeUnixNano) <= BigInt(span.endTimeUnixNano),
        `${where}: starts (${span.startTimeUnixNano}) after it ends (${span.endTimeUnixNano})`);
    assert.ok(Number.isInteger(span.kind), `${where}: kind must be an integer, got ${JSON.stringify(span.kind)}`);
    if (span.status !== undefined && span.status.code !== undefined) {
        assert.ok(Number.isInteger(span.status.code), `${where}: status.code must be an integer, got ${JSON.stringify(span.status.code)}`);
    }
    const checkValue = (key, v) => {
        const kinds = Object.keys(v ?? {});
        assert.equal(kinds.length, 1, `${where}: attribute ${key} must have exactly one value kind, got ${JSON.stringify(v)}`);
        switch (kinds[0]) {
        case 'stringValue':
            assert.equal(typeof v.stringValue, 'string', `${where}: ${key} stringValue must be a string`);
            break;
        case 'intValue':
            assert.equal(typeof v.intValue, 'string', `${where}: ${key} intValue must be a decimal string, got ${JSON.stringify(v.intValue)}`);
            assert.match(v.intValue, /^-?[0-9]+$/, `${where}: ${key} intValue must be decimal`);
            break;
        case 'doubleValue':
            assert.equal(typeof v.doubleValue, 'number', `${where}: ${key} doubleValue must be a number`);
            break;
        case 'boolValue':
            assert.equal(typeof v.boolValue, 'boolean', `${where}: ${key} boolValue must be a boolean`);
            break;
        case 'arrayValue':
            assert.ok(Array.isArray(v.arrayValue?.values), `${where}: ${key} arrayValue must hold values`);
            for (const e of v.arrayValue.values) checkValue(`${key}[]`, e);
            break;
        default:
            assert.fail(`${where}: attribute ${key} has an unexpected value kind ${kinds[0]}`);
        }
    };
    for (const kv of span.attributes ?? []) checkValue(kv.key, kv.value);
    for (const ev of span.events ?? []) {
        assert.equal(typeof ev.timeUnixNano, 'string', `${where}: event ${ev.name} timeUnixNano must be a decimal string`);
        assert.match(ev.timeUnixNano, DECIMAL, `${where}: event ${ev.name} timeUnixNano`);
        for (const kv of ev.attributes ?? []) checkValue(`${ev.name}.${kv.key}`, kv.value);
    }
}

// Spans grouped by traceId: Map traceId → {root, children, all}.
export function traces(spans) {
    const byTrace = new Map();
    for (const { span } of spans) {
        let t = byTrace.get(span.traceId);
        if (!t) byTrace.set(span.traceId, (t = { roots: [], children: [], all: [] }));
        t.all.push(span);
        (isRoot(span) ? t.roots : t.children).push(span);
    }
    return byTrace;
}

// "00-<trace>-<span>-01" split, or null.
export function parseTraceparent(v) {
    const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(v ?? '');
    return m ? { traceId: m[1], spanId: m[2] } : null;
}

export const median = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    const n = s.length;
    return n === 0 ? NaN : n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};

// ---- the weather scenario ----------------------------------------------------------------
// The agent calls the HTTP tool otel.weather (exposed natively as otel_weather), then
// answers; the control's answer mentions 21 degrees and the treatment's does not. The HTTP
// evaluator otel.judge passes an output that mentions 21 (score 0.75) and fails the others
// (0.25). Markers make message content easy to find in an export.

export const MARK = {
    system: 'SYSTEM-MARKER-5d1e',
    controlPrompt: 'What is the weather in Oslo? (A) PROMPT-MARKER-c41',
    treatmentPrompt: 'Tell me the weather in Oslo, please. (B) PROMPT-MARKER-t93',
    toolResult: 'TOOL-RESULT-MARKER-88b',
    reason: 'JUDGE-REASON-MARKER-0aa',
    pass: 'It is 21 degrees in Oslo.',
    fail: 'I could not tell.',
};

// First generation: the tool call (12 in, 3 out); second: the answer (30 in, 4 out).
export const USAGE = [{ input_tokens: 12, output_tokens: 3 }, { input_tokens: 30, output_tokens: 4 }];
export const MAX_TOKENS = 256;

export function weatherScript({ latencyMs = 0 } = {}) {
    const lat = latencyMs ? { latency_ms: latencyMs } : {};
    return {
        rules: [
            { when: { has_tool_result: false, prompt_contains: 'weather' }, ...lat,
                reply: { tool_calls: [{ name: 'otel_weather', arguments: { city: 'Oslo' } }] }, usage: USAGE[0] },
            { when: { has_tool_result: true, prompt_contains: '(A)' }, ...lat, reply: { text: MARK.pass }, usage: USAGE[1] },
            { when: { has_tool_result: true }, ...lat, reply: { text: MARK.fail }, usage: USAGE[1] },
        ],
        default: { reply: { text: 'OK' }, usage: { input_tokens: 5, output_tokens: 1 } },
    };
}

// The receiver's tool routes of the scenario: /tool (the weather), /judge (the evaluator).
export function weatherRoutes() {
    return {
        '/tool': async () => ({ body: { temperature_c: 21, note: MARK.toolResult } }),
        '/judge': async (input) => {
            const passed = typeof input?.output === 'string' && input.output.includes('21');
            return { body: { passed, score: passed ? 0.75 : 0.25, reason: `${MARK.reason} ${passed ? 'mentions 21' : 'no temperature'}` } };
        },
    };
}

export async function registerWeatherTools(evald, receiver) {
    await putTool(evald, 'otel.weather', `${receiver.base}/tool`, {
        type: 'object', properties: { city: { type: 'string' } }, required: ['city'],
    });
    await putTool(evald, 'otel.judge', `${receiver.base}/judge`);
}

export function weatherRequest({ runs = 2 } = {}) {
    return {
        dimension: 'prompt',
        model: { model: 'stub-model', provider: 'openai' },
        control: { label: 'ctl-otel', prompt: MARK.controlPrompt, system_prompt: `Be terse. ${MARK.system}` },
        treatment: { label: 'trt-otel', prompt: MARK.treatmentPrompt, system_prompt: `Be terse. ${MARK.system}` },
        runs,
        functions: { allow: ['otel.weather'], expose: 'native' },
        evaluator: { function_id: 'otel.judge' },
        limits: { execution: { max_output_tokens_per_call: MAX_TOKENS } },
    };
}

// The attributes that only content capture may export.
export const CONTENT_KEYS = ['gen_ai.input.messages', 'gen_ai.output.messages', 'gen_ai.system_instructions',
    'gen_ai.evaluation.explanation', 'gen_ai.tool.call.arguments', 'gen_ai.tool.call.result'];

const NS_PER_MS = 1_000_000n;

// Waits until every run of `runs` (rows with trace_id) has its root span among the accepted
// exports and `childrenOf(run)` children beside it; resolves with the traces by id.
export async function waitForTraces(receiver, runs, childrenOf, timeoutMs = 15000) {
    let byTrace;
    try {
        await waitFor('every run\'s spans to be exported', () => {
            byTrace = traces(spansOf(receiver.decoded()));
            return runs.every((r) => {
                const t = byTrace.get(r.trace_id);
                return t && t.roots.length >= 1 && t.children.length >= childrenOf(r);
            });
        }, timeoutMs, 100);
    } catch (e) {
        const have = runs.map((r) => {
            const t = r.trace_id ? byTrace?.get(r.trace_id) : null;
            return `${r.run_id} trace ${r.trace_id}: ${t ? `${t.roots.length} root(s), ${t.children.length} children` : 'nothing'}`;
        });
        throw new Error(`${e.message}; wanted ${runs.map(childrenOf).join('/')} children; have:\n  ${have.join('\n  ')}\n` +
            `exports: ${receiver.exports.map((x) => `${x.status} ${x.body.length}B`).join(', ')}`);
    }
    return byTrace;
}

// The checks of the weather scenario's export for one evaluation resource document `doc`:
// one trace per run, its span tree, every attribute with its value type, the evaluation
// event, and the traceparent the tool and the evaluator received.
export function checkWeatherTraces({ doc, byTrace, receiver, stubPort, capture }) {
    const runs = runsOf(doc);
    const evalId = doc.evaluation_id;
    const ownRoots = [...byTrace.values()].flatMap((t) => t.roots)
        .filter((s) => attrs(s.attributes)['evald.evaluation_id']?.stringValue === evalId);
    assert.equal(ownRoots.length, runs.length,
        `one root span per run attempt: ${runs.length} runs, ${ownRoots.length} roots named evaluation ${evalId}`);
    const runIds = ownRoots.map((s) => attrs(s.attributes)['evald.run_id']?.stringValue);
    assert.equal(new Set(runIds).size, runIds.length, `evald.run_id is unique within the evaluation: ${runIds.join(', ')}`);
    for (const [traceId, t] of byTrace) {
        assert.equal(t.roots.length, 1, `trace ${traceId} has ${t.roots.length} roots (spans: ${t.all.map((x) => x.name).join(', ')})`);
    }
    for (const r of runs) {
        const where = `run ${r.run_id} (${r.role} ${r.iteration})`;
        assert.equal(r.status, 'completed', `${where} did not complete: ${JSON.stringify(r.failures)}`);
        assert.match(r.trace_id ?? '', HEX32, `${where}: GET /v1/evaluations/${evalId} gives no trace_id (progress.runs[].trace_id = ${JSON.stringify(r.trace_id)})`);
        const t = byTrace.get(r.trace_id);
        assert.ok(t, `${where}: no exported span has the run's trace_id ${r.trace_id}`);
        assert.equal(t.roots.length, 1, `${where}: trace ${r.trace_id} must have exactly one root, has ${t.roots.length}`);
        const root = t.roots[0];
        const label = r.role === 'control' ? 'ctl-otel' : 'trt-otel';

        // The root.
        assert.equal(root.name, `invoke_agent ${label}`, `${where}: root span name`);
        assert.equal(root.kind, 1, `${where}: root kind must be INTERNAL (1)`);
        assert.equal(root.status?.code ?? 0, 0, `${where}: a completed run's root status must be UNSET, got ${JSON.stringify(root.status)}`);
        const ra = attrChecker(root);
        ra.str('gen_ai.operation.name', 'invoke_agent');
        ra.str('gen_ai.agent.name', label);
        ra.str('gen_ai.conversation.id', r.session_id);
        ra.str('evald.evaluation_id', evalId);
        ra.str('evald.run_id', r.run_id);
        ra.str('evald.role', r.role);
        ra.int('evald.repeat', r.iteration);
        ra.int('evald.attempt', r.attempt);
        ra.str('gen_ai.request.model', 'stub-model');
        ra.absent('evald.experiment_id');
        ra.absent('evald.case_id');
        ra.absent('error.type');

        // The evaluator's verdict as an event on the root.
        const evs = (root.events ?? []).filter((e) => e.name === 'gen_ai.evaluation.result');
        assert.equal(evs.length, 1, `${where}: the root must carry one gen_ai.evaluation.result event, has ${evs.length}`);
        const ev = attrChecker({ ...evs[0], spanId: root.spanId, name: `${root.name} event ${evs[0].name}` });
        ev.str('gen_ai.evaluation.name', 'otel.judge');
        ev.double('gen_ai.evaluation.score.value', r.evaluation?.score);
        ev.str('gen_ai.evaluation.score.label', r.passed ? 'pass' : 'fail');
        if (capture) ev.str('gen_ai.evaluation.explanation', r.evaluation?.reason);
        else ev.absent('gen_ai.evaluation.explanation');
        const evTime = BigInt(evs[0].timeUnixNano);
        assert.ok(evTime >= BigInt(root.startTimeUnixNano) && evTime <= BigInt(root.endTimeUnixNano),
            `${where}: the evaluation event's time ${evTime} is outside its root span`);

        // The children: all under the root, in its trace, within its time (ms-rounded: 2 ms slack).
        for (const c of t.children) {
            assert.equal(c.traceId, root.traceId, `${where}: span ${c.name} is not in the root's trace`);
            assert.equal(c.parentSpanId, root.spanId, `${where}: span ${c.name}'s parentSpanId ${c.parentSpanId} is not the root ${root.spanId}`);
            assert.ok(BigInt(c.startTimeUnixNano) >= BigInt(root.startTimeUnixNano) - 2n * NS_PER_MS &&
                BigInt(c.endTimeUnixNano) <= BigInt(root.endTimeUnixNano) + 2n * NS_PER_MS,
            `${where}: span ${c.name} [${c.startTimeUnixNano}, ${c.endTimeUnixNano}] lies outside its root [${root.startTimeUnixNano}, ${root.endTimeUnixNano}]`);
        }
        const names = t.children.map((c) => c.name).sort();
        assert.deepEqual(names, ['chat stub-model', 'chat stub-model', 'evaluate otel.judge', 'execute_tool otel.weather'],
            `${where}: the root's children`);
        const byStart = (a, b) => (BigInt(a.startTimeUnixNano) < BigInt(b.startTimeUnixNano) ? -1 : 1);
        const chats = t.children.filter((c) => c.name.startsWith('chat ')).sort(byStart);
        const tool = t.children.find((c) => c.name.startsWith('execute_tool '));
        const evaluate = t.children.find((c) => c.name.startsWith('evaluate '));

        chats.forEach((c, i) => {
            assert.equal(c.kind, 3, `${where}: ${c.name} kind must be CLIENT (3)`);
            assert.equal(c.status?.code ?? 0, 0, `${where}: ${c.name} status`);
            const ca = attrChecker(c);
            ca.str('gen_ai.operation.name', 'chat');
            ca.str('gen_ai.provider.name', 'openai');
            ca.str('gen_ai.request.model', 'stub-model');
            ca.int('gen_ai.request.max_tokens', MAX_TOKENS);
            ca.str('gen_ai.response.model', 'stub-model');
            ca.str('gen_ai.response.id', /^resp_[0-9a-z]+$/);
            const reasons = ca.strArray('gen_ai.response.finish_reasons');
            assert.ok(reasons.length >= 1 && reasons.every((x) => x.length > 0), `${where}: ${c.name} finish_reasons ${JSON.stringify(reasons)}`);
            ca.int('gen_ai.usage.input_tokens', USAGE[i].input_tokens);
            ca.int('gen_ai.usage.output_tokens', USAGE[i].output_tokens);
            ca.str('server.address', '127.0.0.1');
            ca.int('server.port', stubPort);
            ca.absent('error.type');
            if (capture) {
                const input = JSON.parse(ca.str('gen_ai.input.messages'));
                assert.ok(Array.isArray(input) && input.every((m) => typeof m.role === 'string' && Array.isArray(m.parts)),
                    `${where}: ${c.name} gen_ai.input.messages must be [{role, parts}], got ${JSON.stringify(input).slice(0, 300)}`);
                const prompt = r.role === 'control' ? MARK.controlPrompt : MARK.treatmentPrompt;
                assert.ok(input.some((m) => m.role === 'user' && m.parts.some((p) => p.type === 'text' && p.content === prompt)),
                    `${where}: ${c.name} gen_ai.input.messages lacks the prompt`);
                const sys = JSON.parse(ca.str('gen_ai.system_instructions'));
                assert.ok(Array.isArray(sys) && sys.some((p) => p.type === 'text' && p.content.includes(MARK.system)),
                    `${where}: ${c.name} gen_ai.system_instructions must be [{type:"text", content}] holding the system prompt`);
                const output = JSON.parse(ca.str('gen_ai.output.messages'));
                assert.ok(Array.isArray(output) && output.length >= 1 && output[0].role === 'assistant' && Array.isArray(output[0].parts),
                    `${where}: ${c.name} gen_ai.output.messages must be [{role:"assistant", parts}]`);
                assert.equal(typeof output[0].finish_reason, 'string', `${where}: ${c.name} an output message has its finish_reason`);
                if (i === 0) {
                    const call = output[0].parts.find((p) => p.type === 'tool_call');
                    assert.ok(call && call.name === 'otel_weather', `${where}: the first chat's output must be the tool call`);
                    assert.equal(call.id, attrs(tool.attributes)['gen_ai.tool.call.id']?.stringValue,
                        `${where}: the tool call id of the output messages is the execute_tool span's gen_ai.tool.call.id`);
                } else {
                    const text = output[0].parts.find((p) => p.type === 'text');
                    assert.equal(text?.content, r.output, `${where}: the last chat's output message is the run's output`);
                    assert.ok(input.some((m) => m.parts.some((p) => p.type === 'tool_call_response')),
                        `${where}: the second chat's input must hold the tool's answer`);
                }
            } else {
                for (const k of CONTENT_KEYS) ca.absent(k);
            }
        });

        assert.equal(tool.kind, 3, `${where}: execute_tool of an HTTP tool must be CLIENT (3)`);
        assert.equal(tool.status?.code ?? 0, 0, `${where}: execute_tool status`);
        const ta = attrChecker(tool);
        ta.str('gen_ai.operation.name', 'execute_tool');
        ta.str('gen_ai.tool.name', 'otel.weather');
        ta.str('evald.tool.wire_name', 'otel_weather');
        const callId = ta.str('gen_ai.tool.call.id', /^\S+$/);
        const docCall = (r.function_calls ?? [])[0];
        if (docCall && (docCall.call_id || docCall.id)) {
            assert.equal(callId, docCall.call_id ?? docCall.id, `${where}: gen_ai.tool.call.id is the run's function call id`);
        }
        ta.absent('error.type');
        if (!capture) for (const k of CONTENT_KEYS) ta.absent(k);

        assert.equal(evaluate.kind, 3, `${where}: evaluate of an HTTP evaluator must be CLIENT (3)`);
        assert.equal(evaluate.status?.code ?? 0, 0, `${where}: evaluate status`);

        // What the tool and the evaluator received: a traceparent naming their own span.
        const toolCalls = receiver.toolCallsTo('/tool').filter((c) => c.headers['x-evald-session'] === r.session_id);
        assert.equal(toolCalls.length, 1, `${where}: the weather tool should have been called once for session ${r.session_id}`);
        const tpTool = parseTraceparent(toolCalls[0].headers.traceparent);
        assert.ok(tpTool, `${where}: the tool got no valid W3C traceparent: ${JSON.stringify(toolCalls[0].headers.traceparent)}`);
        assert.equal(tpTool.traceId, r.trace_id, `${where}: the tool's traceparent trace id is the run's trace`);
        assert.equal(tpTool.spanId, tool.spanId, `${where}: the tool's traceparent parent id is its execute_tool span`);
        const judgeCalls = receiver.toolCallsTo('/judge').filter((c) => c.headers['x-evald-session'] === r.session_id);
        assert.equal(judgeCalls.length, 1, `${where}: the evaluator should have been called once for session ${r.session_id}`);
        const tpJudge = parseTraceparent(judgeCalls[0].headers.traceparent);
        assert.ok(tpJudge, `${where}: the evaluator got no valid W3C traceparent: ${JSON.stringify(judgeCalls[0].headers.traceparent)}`);
        assert.equal(tpJudge.traceId, r.trace_id, `${where}: the evaluator's traceparent trace id is the run's trace`);
        assert.equal(tpJudge.spanId, evaluate.spanId, `${where}: the evaluator's traceparent parent id is its evaluate span`);
    }
}
