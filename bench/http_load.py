#!/usr/bin/env python3
"""HTTP under load: clients that start evaluations and poll their status, two builds in turn.

--clients (200) clients, each on its own keep-alive connection, start an evaluation (one
run per variant against evald-stub at --stub-ms, 20 ms), poll GET /v1/evaluations/{id}/status
every --poll-ms (250 ms) until it is terminal, and start the next, for --seconds (30). A
prober on a connection of its own asks GET /healthz every 20 ms. Every answer's latency is
kept by route; any answer that is not 2xx, and any transport error, counts as an error.

Each build (--evald A and --evald-b B) runs on a fresh database, stub and evald, after a
warm-up of --warmup seconds, A B A B for --rounds rounds. Prints a line per run and a table
of medians over the rounds: requests/s, errors, p50 and p99 of /healthz, of status reads
and of starts, and the ratio B/A of requests/s; then the targets' verdict for B
(/healthz p99 <= 20 ms, status p99 <= 100 ms, start p99 <= 250 ms, requests/s >= 1.5 x A).

  bench/http_load.py --db-server postgresql://evald@127.0.0.1:54341/evald \\
      --evald /path/to/before/evald --evald-b build-rel/evald [--rounds 2]

Loopback only; every process it starts is stopped before it returns.
"""
import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (processes, databases, stub)

TERMINAL = ("completed", "failed", "cancelled")
TARGETS = {"healthz_p99": 20.0, "status_p99": 100.0, "start_p99": 250.0, "rps_ratio": 1.5}


class Conn:
    """One keep-alive HTTP/1.1 connection; answers with Content-Length or chunked."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.r = self.w = None

    async def open(self):
        self.r, self.w = await asyncio.open_connection(self.host, self.port)

    def close(self):
        if self.w is not None:
            self.w.close()
            self.r = self.w = None

    async def request(self, method, path, body=None):
        if self.w is None:
            await self.open()
        data = b"" if body is None else body
        head = "%s %s HTTP/1.1\r\nHost: %s:%d\r\n" % (method, path, self.host, self.port)
        if body is not None:
            head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(data)
        self.w.write(head.encode() + b"\r\n" + data)
        await self.w.drain()
        status_line = await self.r.readline()
        if not status_line:
            raise ConnectionError("connection closed")
        status = int(status_line.split()[1])
        length, chunked, close = None, False, False
        while True:
            line = await self.r.readline()
            if line in (b"\r\n", b""):
                break
            k, _, v = line.decode("latin-1").partition(":")
            k, v = k.strip().lower(), v.strip()
            if k == "content-length":
                length = int(v)
            elif k == "transfer-encoding" and "chunked" in v.lower():
                chunked = True
            elif k == "connection" and v.lower() == "close":
                close = True
        if chunked:
            parts = []
            while True:
                size = int((await self.r.readline()).split(b";")[0], 16)
                if size == 0:
                    await self.r.readline()
                    break
                parts.append(await self.r.readexactly(size))
                await self.r.readline()
            payload = b"".join(parts)
        else:
            payload = await self.r.readexactly(length or 0)
        if close:
            self.close()
        return status, payload


class Stats:
    def __init__(self):
        self.ms = {"healthz": [], "status": [], "start": []}
        self.errors = 0
        self.error_samples = []
        self.requests = 0

    def add(self, route, ms, ok, what=""):
        self.requests += 1
        self.ms[route].append(ms)
        if not ok:
            self.errors += 1
            if len(self.error_samples) < 5:
                self.error_samples.append("%s: %s" % (route, what))


async def timed(conn, stats, route, method, path, body=None):
    t0 = time.monotonic()
    try:
        status, payload = await conn.request(method, path, body)
    except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError) as e:
        conn.close()
        stats.add(route, (time.monotonic() - t0) * 1000.0, False, repr(e))
        return None, None
    stats.add(route, (time.monotonic() - t0) * 1000.0, 200 <= status < 300,
              "%d %s" % (status, payload[:200]))
    return status, payload


async def client(host, port, stats, until, poll_s, body):
    conn = Conn(host, port)
    try:
        while time.monotonic() < until:
            status, payload = await timed(conn, stats, "start", "POST", "/v1/evaluations", body)
            if status != 202:
                await asyncio.sleep(poll_s)
                continue
            eid = json.loads(payload)["evaluation_id"]
            while time.monotonic() < until:
                await asyncio.sleep(poll_s)
                status, payload = await timed(conn, stats, "status", "GET",
                                              "/v1/evaluations/%s/status" % eid)
                if status == 200 and json.loads(payload).get("status") in TERMINAL:
                    break
    finally:
        conn.close()


async def prober(host, port, stats, until):
    conn = Conn(host, port)
    try:
        while time.monotonic() < until:
            await timed(conn, stats, "healthz", "GET", "/healthz")
            await asyncio.sleep(0.02)
    finally:
        conn.close()


async def load(base, clients, seconds, poll_s):
    host, port = base[len("http://"):].rsplit(":", 1)
    port = int(port)
    stats = Stats()
    body = json.dumps(bench.eval_request(1)).encode()
    t0 = time.monotonic()
    until = t0 + seconds
    tasks = [asyncio.create_task(client(host, port, stats, until, poll_s, body))
             for _ in range(clients)]
    tasks.append(asyncio.create_task(prober(host, port, stats, until)))
    await asyncio.gather(*tasks)
    stats.seconds = time.monotonic() - t0
    return stats


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def one_run(opts, evald_bin, label):
    work = tempfile.mkdtemp(prefix="evald-bench-http-")
    db = stub = ev = None
    try:
        db = bench.Database(opts.db_server)
        stub = bench.start_stub(opts.stub, opts.stub_ms, work)
        run_opts = argparse.Namespace(**vars(opts))
        run_opts.evald = evald_bin
        ev = bench.Evald(run_opts, db, stub, work, 1).start()
        if opts.warmup > 0:
            asyncio.run(load(ev.base, opts.clients, opts.warmup, opts.poll_ms / 1000.0))
        s = asyncio.run(load(ev.base, opts.clients, opts.seconds, opts.poll_ms / 1000.0))
        r = {"build": label, "rps": s.requests / s.seconds, "requests": s.requests,
             "errors": s.errors, "error_samples": s.error_samples}
        for route in ("healthz", "status", "start"):
            r[route + "_p50"] = pct(s.ms[route], 0.50)
            r[route + "_p99"] = pct(s.ms[route], 0.99)
            r[route + "_n"] = len(s.ms[route])
        print("%s: %.0f requests/s, %d errors; /healthz p50 %.1f p99 %.1f ms; status p50 %.1f "
              "p99 %.1f ms; start p50 %.1f p99 %.1f ms" % (
                  label, r["rps"], r["errors"], r["healthz_p50"], r["healthz_p99"],
                  r["status_p50"], r["status_p99"], r["start_p50"], r["start_p99"]), flush=True)
        for e in s.error_samples:
            print("  error: %s" % e, flush=True)
        return r
    finally:
        bench.stop_all(opts, work, (ev, stub), db)


def main():
    ap = bench.ab_parser(__doc__)
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--poll-ms", type=float, default=250.0)
    ap.add_argument("--stub-ms", type=int, default=20)
    ap.add_argument("--workers", type=int, default=0, help="EVALD_WORKERS (0: evald's default)")
    ap.add_argument("--json", help="write every measurement here")
    opts = ap.parse_args()
    bench.ab_check(ap, opts)
    runs = []
    for rnd in range(opts.rounds):
        for label, path in (("A", opts.evald), ("B", opts.evald_b)):
            runs.append(one_run(opts, path, label))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(runs, f, indent=1)
    keys = ("rps", "errors", "healthz_p50", "healthz_p99", "status_p50", "status_p99",
            "start_p50", "start_p99")
    med = {}
    for label in ("A", "B"):
        mine = [r for r in runs if r["build"] == label]
        med[label] = {k: statistics.median(r[k] for r in mine) for k in keys}
    ratios = [b["rps"] / a["rps"] for a, b in zip(runs[0::2], runs[1::2])]
    print("\n| build | requests/s | errors | /healthz p50 / p99 ms | status p50 / p99 ms "
          "| start p50 / p99 ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for label in ("A", "B"):
        m = med[label]
        print("| %s | %.0f | %d | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f |" % (
            label, m["rps"], m["errors"], m["healthz_p50"], m["healthz_p99"],
            m["status_p50"], m["status_p99"], m["start_p50"], m["start_p99"]))
    print("\nrequests/s B/A by round: %s (median %.2f)" % (
        ", ".join("%.2f" % x for x in ratios), statistics.median(ratios)))
    b = med["B"]
    verdict = [
        ("/healthz p99 <= %.0f ms" % TARGETS["healthz_p99"], b["healthz_p99"] <= TARGETS["healthz_p99"]),
        ("status p99 <= %.0f ms" % TARGETS["status_p99"], b["status_p99"] <= TARGETS["status_p99"]),
        ("start p99 <= %.0f ms" % TARGETS["start_p99"], b["start_p99"] <= TARGETS["start_p99"]),
        ("requests/s >= %.1f x A" % TARGETS["rps_ratio"],
         statistics.median(ratios) >= TARGETS["rps_ratio"]),
        ("no errors", b["errors"] == 0),
    ]
    for what, ok in verdict:
        print("%s: %s" % (what, "met" if ok else "NOT met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
