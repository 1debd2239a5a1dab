// A recording reverse proxy for the contract check (docs/contract.md): tests/stack.sh puts
// it in front of evald when EVALD_CONTRACT_RECORD is set, so that every exchange of a
// stack-based suite (the browser's fetches and event streams, the README examples) is
// appended to <record dir>/<suite>-<pid>.jsonl in the format of contract_record.c.
// Requests and responses pass through unchanged and streamed (Server-Sent Events flow at
// once). An exchange the client abandons is recorded with "complete": false. Node only,
// no dependencies. Prints {"listen":"127.0.0.1:PORT"} on stdout when ready.
//   usage: node contract_proxy.mjs --target http://127.0.0.1:8080 --record DIR
//                                  [--suite NAME] [--listen 127.0.0.1:0]
import { appendFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';

const RECORD_LIMIT = 16 * 1024 * 1024; // a body beyond this is recorded by size only

function args(argv) {
  const out = { listen: '127.0.0.1:0', suite: process.env.EVALD_CONTRACT_SUITE || 'stack' };
  for (let i = 2; i < argv.length; i += 2) out[argv[i].replace(/^--/, '')] = argv[i + 1];
  if (!out.target || !out.record) {
    console.error('usage: contract_proxy.mjs --target URL --record DIR [--suite NAME] [--listen HOST:PORT]');
    process.exit(2);
  }
  return out;
}

const opts = args(process.argv);
const target = new URL(opts.target);
const file = join(opts.record, `${opts.suite.replace(/[/\\ :]/g, '_')}-${process.pid}.jsonl`);
const utf8 = new TextDecoder('utf-8', { fatal: true });
let seq = 0;

function record(req, reqBytes, res, chunks, size, complete) {
  const headerLines = [`HTTP/1.1 ${res.statusCode} ${res.statusMessage ?? ''}`];
  for (let i = 0; i < res.rawHeaders.length; i += 2)
    headerLines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
  const line = {
    suite: opts.suite,
    pid: process.pid,
    seq: ++seq,
    method: req.method,
    url: req.url,
    request_headers: Object.fromEntries(
      Object.entries(req.headers).map(([k, v]) => [k, k === 'authorization' ? '<redacted>' : String(v)]),
    ),
    request_body_bytes: reqBytes,
    status: res.statusCode,
    headers: `${headerLines.join('\r\n')}\r\n\r\n`,
  };
  if (!complete) line.complete = false;
  try {
    if (chunks === null) throw new Error('too large');
    line.body = utf8.decode(Buffer.concat(chunks));
  } catch {
    line.body_bytes = size;
  }
  appendFileSync(file, `${JSON.stringify(line)}\n`);
}

const server = http.createServer((req, res) => {
  let reqBytes = 0;
  req.on('data', (c) => {
    reqBytes += c.length;
  });
  const headers = { ...req.headers, host: target.host };
  const upstream = http.request(
    { host: target.hostname, port: target.port, method: req.method, path: req.url, headers },
    (up) => {
      res.writeHead(up.statusCode, up.statusMessage, up.rawHeaders);
      res.flushHeaders();
      let chunks = [];
      let size = 0;
      let done = false;
      const finish = (complete) => {
        if (done) return;
        done = true;
        record(req, reqBytes, up, chunks, size, complete);
      };
      up.on('data', (c) => {
        size += c.length;
        if (chunks !== null && size <= RECORD_LIMIT) chunks.push(c);
        else chunks = null;
        res.write(c);
      });
      up.on('end', () => {
        finish(true);
        res.end();
      });
      up.on('error', () => finish(false));
      res.on('close', () => {
        if (!up.complete) {
          finish(false);
          up.destroy();
        }
      });
    },
  );
  upstream.on('error', (e) => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end(`contract_proxy: ${e.message}\n`);
  });
  req.pipe(upstream);
});

const [host, port] = [opts.listen.replace(/:\d+$/, ''), Number(opts.listen.replace(/^.*:/, ''))];
server.listen(port, host, () => {
  const a = server.address();
  process.stdout.write(`${JSON.stringify({ listen: `${a.address}:${a.port}` })}\n`);
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
