#!/usr/bin/env python3
"""Experiment benchmarks: throughput of one large experiment, and reads of a finished one.

E1  one experiment of --cases cases, 2 arms, --repeats repeats (cases x 2 x repeats model
    calls) against the stub at --latency ms, --concurrency cases at once, EVALD_WORKERS
    --workers: calls per second from the experiment's created_at to its completed_at, and
    evald's peak RSS.
E2  GET /v1/experiments/{id} of a finished experiment of --read-cases cases (2 arms, one
    repeat), --reads sequential requests over one kept-alive connection: p50, p99, max.
    Also GET .../cases?limit=100 (the first page), and evald's peak RSS over the upload, the
    whole experiment and the reads.

Each run uses a fresh database on --db-server and fresh evald and stub processes, all on
loopback. Usage:
  bench/experiment.py --db-server postgresql://evald@127.0.0.1:54330/evald [--cases 2000]
"""
import argparse
import http.client
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the processes, database and stub helpers of bench.py)


def post_raw(base, path, data, ctype):
    host, port = base.replace("http://", "").split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=120)
    try:
        c.request("POST", path, body=data, headers={"Content-Type": ctype})
        r = c.getresponse()
        return r.status, json.loads(r.read() or b"null")
    finally:
        c.close()


def experiment(base, cases, repeats, concurrency):
    lines = "".join(json.dumps({"id": "q%d" % i, "vars": {"q": "question %d" % i},
                                "expected": "OK"}) + "\n" for i in range(1, cases + 1))
    st, ds = post_raw(base, "/v1/datasets?name=bench-%d" % cases, lines.encode(),
                      "application/x-ndjson")
    if st not in (200, 201):
        raise RuntimeError("dataset upload answered %d: %s" % (st, ds))
    body = {"name": "bench", "dimension": "prompt",
            "model": {"model": bench.MODEL, "provider": "bench"},
            "control": {"label": "reply", "prompt": "Reply to: {{q}}"},
            "treatments": [{"label": "return", "prompt": "Return OK for: {{q}}"}],
            "dataset_id": ds["dataset_id"],
            "evaluator": {"function_id": "eval::assert::exact",
                          "arguments": {"expected": "{{expected}}"}},
            "repeats": repeats, "concurrency": concurrency}
    st, x = bench.call(base, "POST", "/v1/experiments", body)
    if st != 202:
        raise RuntimeError("experiment start answered %d: %s" % (st, x))
    return x["experiment_id"]


def wait_terminal(base, xid, timeout_s):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        st, doc = bench.call(base, "GET", "/v1/experiments/%s" % xid)
        if st == 200 and doc["status"] not in ("queued", "running"):
            return doc
        time.sleep(0.25)
    raise RuntimeError("experiment %s did not finish in %d s" % (xid, timeout_s))


def with_evald(opts, workers, fn):
    work = tempfile.mkdtemp(prefix="evald-bench-x-")
    db = stub = ev = None
    try:
        db = bench.Database(opts.db_server)
        stub = bench.start_stub(opts.stub, opts.latency, work)
        ev = bench.Evald(opts, db, stub, work, 100, workers=workers)
        ev.db = db
        ev.stub_pid = stub.pid
        ev.stub_base = stub.base
        ev.env["EVALD_MAX_EXPERIMENT_RUNS"] = "10000000"
        ev.env["EVALD_MAX_DATASET_CASES"] = "100000"
        ev.start()
        return fn(ev)
    finally:
        if ev:
            ev.stop()
        if stub:
            stub.stop()
        if db:
            db.drop()
        shutil.rmtree(work, ignore_errors=True)


def e1(opts):
    def run(ev):
        pm = bench.postmaster_pid(opts.pg_data)
        cpu0_ev, cpu0_stub = bench.cpu_s([ev.proc.pid]), bench.cpu_s([ev.stub_pid])
        cpu0_pg = bench.cpu_s(bench.tree(pm)[1:]) if pm else 0
        stmts = bench.Statements(ev.db) if opts.statements else None
        if stmts:
            stmts.reset()
        xid = experiment(ev.base, opts.cases, opts.repeats, opts.concurrency)
        doc = wait_terminal(ev.base, xid, 3600)
        cpu_ev = bench.cpu_s([ev.proc.pid]) - cpu0_ev
        cpu_stub = bench.cpu_s([ev.stub_pid]) - cpu0_stub
        cpu_pg = (bench.cpu_s(bench.tree(pm)[1:]) - cpu0_pg) if pm else None
        p = doc["progress"]
        if doc["status"] != "completed" or p["passed_runs"] != p["total_runs"]:
            raise RuntimeError("E1: %s with %d of %d runs passed (log %s)" %
                               (doc["status"], p["passed_runs"], p["total_runs"], ev.log_path))
        secs = (doc["completed_at"] - doc["created_at"]) / 1000.0
        n = p["total_runs"]
        return {"runs": n, "seconds": secs, "calls_per_s": n / secs,
                "statements": stmts.read(n) if stmts else None,
                "peak_rss_mb": bench.proc_kb(ev.proc.pid, "VmHWM") / 1024.0,
                "evald_cpu_ms_per_call": 1000.0 * cpu_ev / n,
                "stub_cpu_ms_per_call": 1000.0 * cpu_stub / n,
                "pg_cpu_ms_per_call": 1000.0 * cpu_pg / n if cpu_pg is not None else None}
    return with_evald(opts, opts.workers, run)


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def timed_gets(base, path, n):
    host, port = base.replace("http://", "").split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=60)
    times = []
    size = 0
    for _ in range(n):
        t0 = time.perf_counter()
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        times.append((time.perf_counter() - t0) * 1000.0)
        if r.status != 200:
            raise RuntimeError("GET %s answered %d" % (path, r.status))
        size = len(body)
    c.close()
    return {"p50_ms": percentile(times, 0.5), "p99_ms": percentile(times, 0.99),
            "max_ms": max(times), "bytes": size}


def e2(opts):
    def run(ev):
        xid = experiment(ev.base, opts.read_cases, 1, opts.concurrency)
        doc = wait_terminal(ev.base, xid, 3600)
        if doc["status"] != "completed":
            raise RuntimeError("E2: experiment %s" % doc["status"])
        get = timed_gets(ev.base, "/v1/experiments/%s" % xid, opts.reads)
        cases = timed_gets(ev.base, "/v1/experiments/%s/cases?limit=100" % xid, opts.reads)
        return {"cases": opts.read_cases, "get": get, "cases_page": cases,
                "peak_rss_mb": bench.proc_kb(ev.proc.pid, "VmHWM") / 1024.0}
    return with_evald(opts, opts.workers, run)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--evald", default=os.path.join(bench.ROOT, "build", "evald"))
    ap.add_argument("--stub", default=os.path.join(bench.ROOT, "build", "evald-stub"))
    ap.add_argument("--db-server", default=os.environ.get("EVALD_BENCH_DATABASE_URL"))
    ap.add_argument("--pg-data", help="the server's data folder (to count its CPU)")
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--workers", type=int, default=64)
    ap.add_argument("--latency", type=int, default=0)
    ap.add_argument("--read-cases", type=int, default=10000)
    ap.add_argument("--reads", type=int, default=500)
    ap.add_argument("--only", default="e1,e2")
    ap.add_argument("--evald-log-level", default="warn")
    ap.add_argument("--statements", action="store_true",
                    help="E1: PostgreSQL's statements per run (pg_stat_statements, as "
                    "bench.py --statements)")
    opts = ap.parse_args()
    if not opts.db_server:
        ap.error("--db-server (or EVALD_BENCH_DATABASE_URL) is required")
    out = {}
    if "e1" in opts.only:
        out["e1"] = e1(opts)
        r = out["e1"]
        print("E1 experiment, %d cases x 2 arms x %d repeats = %d runs, C=%d, W=%d, %d ms: "
              "%.1f s, %.0f calls/s, peak RSS %.0f MB; CPU ms per call: evald %.2f, stub %.2f, "
              "PostgreSQL %s" %
              (opts.cases, opts.repeats, r["runs"], opts.concurrency, opts.workers,
               opts.latency, r["seconds"], r["calls_per_s"], r["peak_rss_mb"],
               r["evald_cpu_ms_per_call"], r["stub_cpu_ms_per_call"],
               "%.2f" % r["pg_cpu_ms_per_call"] if r["pg_cpu_ms_per_call"] is not None
               else "n/a (no --pg-data)"), flush=True)
        if r.get("statements"):
            print(bench.statements_text(r["statements"]), flush=True)
    if "e2" in opts.only:
        out["e2"] = e2(opts)
        r = out["e2"]
        print("E2 upload of %d cases, experiment of %d runs to its end, %d reads: evald peak RSS "
              "%.0f MB" % (opts.read_cases, 2 * opts.read_cases, 2 * opts.reads,
                           r["peak_rss_mb"]), flush=True)
        for k, name in (("get", "GET /v1/experiments/{id}"),
                        ("cases_page", "GET /v1/experiments/{id}/cases?limit=100")):
            print("E2 %s, finished, %d cases, %d reads: p50 %.1f ms, p99 %.1f ms, max %.1f ms, "
                  "%d bytes" % (name, opts.read_cases, opts.reads, r[k]["p50_ms"],
                                r[k]["p99_ms"], r[k]["max_ms"], r[k]["bytes"]), flush=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
