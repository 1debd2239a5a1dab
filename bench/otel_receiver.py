#!/usr/bin/env python3
"""A small, fast OTLP/HTTP trace receiver for bench/otel.py. Standard library only.

Answers every POST to /v1/traces with 200 at once (an empty ExportTraceServiceResponse:
`{}` for JSON, an empty body for protobuf) and keeps the bodies; counts requests and bytes
as they arrive. Spans are counted later, when GET /stats is asked, so that decoding costs
nothing while a measurement runs: JSON bodies are decoded with the json module
(resourceSpans[].scopeSpans[].spans[]), protobuf bodies are walked on the wire format
(ExportTraceServiceRequest field 1 -> ResourceSpans field 2 -> ScopeSpans field 2), which
needs no generated code. GET /stats answers
{"requests", "bytes", "spans", "json", "protobuf", "errors", "other"}; POST /reset clears.

Prints {"listen": "127.0.0.1:PORT"} on stdout when ready (as evald and evald-stub do), and
stops on SIGTERM or SIGINT. Loopback only.

  bench/otel_receiver.py [--port 0]
"""
import argparse
import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    def __init__(self):
        self.mu = threading.Lock()
        self.reset()

    def reset(self):
        self.requests = self.bytes = 0
        self.pending = []  # (content type, body) not yet counted
        self.spans = self.json = self.protobuf = self.errors = self.other = 0


STATE = State()


def varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def fields(buf, start, end):
    """Yields (field number, wire type, value or (offset, end) of a length-delimited one)."""
    i = start
    while i < end:
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
            yield num, wt, v
        elif wt == 1:
            i += 8
        elif wt == 2:
            n, i = varint(buf, i)
            yield num, wt, (i, i + n)
            i += n
        elif wt == 5:
            i += 4
        else:
            raise ValueError("wire type %d" % wt)


def protobuf_spans(body):
    n = 0
    for f1, wt1, rs in fields(body, 0, len(body)):
        if f1 != 1 or wt1 != 2:
            continue
        for f2, wt2, ss in fields(body, *rs):
            if f2 != 2 or wt2 != 2:
                continue
            for f3, wt3, _ in fields(body, *ss):
                if f3 == 2 and wt3 == 2:
                    n += 1
    return n


def json_spans(body):
    doc = json.loads(body)
    return sum(len(ss.get("spans", [])) for rs in doc.get("resourceSpans", [])
               for ss in rs.get("scopeSpans", []))


def count_pending():
    with STATE.mu:
        todo, STATE.pending = STATE.pending, []
    spans = js = pb = errors = other = 0
    for ctype, body in todo:
        try:
            if ctype.startswith("application/json"):
                spans += json_spans(body)
                js += 1
            elif ctype.startswith("application/x-protobuf"):
                spans += protobuf_spans(body)
                pb += 1
            else:
                other += 1
        except (ValueError, IndexError, AttributeError, TypeError):
            errors += 1
    with STATE.mu:
        STATE.spans += spans
        STATE.json += js
        STATE.protobuf += pb
        STATE.errors += errors
        STATE.other += other


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: evald's exporter reuses its connection

    def log_message(self, *a):
        pass

    def _answer(self, status, body=b"", ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if self.path == "/reset":
            with STATE.mu:
                STATE.reset()
            self._answer(200, b"{}")
            return
        if self.path != "/v1/traces":
            self._answer(404, b"{}")
            return
        ctype = self.headers.get("Content-Type") or ""
        with STATE.mu:
            STATE.requests += 1
            STATE.bytes += len(body)
            STATE.pending.append((ctype, body))
        if ctype.startswith("application/x-protobuf"):
            self._answer(200, b"", "application/x-protobuf")
        else:
            self._answer(200, b"{}")

    def do_GET(self):
        if self.path != "/stats":
            self._answer(404, b"{}")
            return
        count_pending()
        with STATE.mu:
            out = {k: getattr(STATE, k) for k in
                   ("requests", "bytes", "spans", "json", "protobuf", "errors", "other")}
        self._answer(200, json.dumps(out).encode())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    opts = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", opts.port), Handler)
    srv.daemon_threads = True
    print(json.dumps({"listen": "127.0.0.1:%d" % srv.server_address[1]}), flush=True)

    def stop(*_):
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    srv.serve_forever(poll_interval=0.2)
    srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
