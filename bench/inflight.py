#!/usr/bin/env python3
"""Calls in flight: one evald process holding thousands of provider calls at once.

An experiment of --cases cases, 2 arms, --repeats repeats, every case at once (concurrency =
cases), against the stub answering after --latency ms, with EVALD_WORKERS --workers and
EVALD_WORKER_CONNECTIONS --connections. While the calls wait at the stub it samples, every
250 ms: the stub's calls in flight, evald's PostgreSQL connections (pg_stat_activity), and
evald's RSS and threads. Prints the peaks, and checks that the experiment then completes.

  bench/inflight.py --db-server postgresql://evald@127.0.0.1:54330/evald
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import experiment  # noqa: E402


def threads_of(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--evald", default=os.path.join(bench.ROOT, "build", "evald"))
    ap.add_argument("--stub", default=os.path.join(bench.ROOT, "build", "evald-stub"))
    ap.add_argument("--db-server", default=os.environ.get("EVALD_BENCH_DATABASE_URL"))
    ap.add_argument("--cases", type=int, default=2100)
    ap.add_argument("--workers", type=int, default=2200)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--latency", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--evald-log-level", default="warn")
    opts = ap.parse_args()
    if not opts.db_server:
        ap.error("--db-server (or EVALD_BENCH_DATABASE_URL) is required")
    work = tempfile.mkdtemp(prefix="evald-bench-inflight-")
    db = stub = ev = None
    try:
        db = bench.Database(opts.db_server)
        stub = bench.start_stub(opts.stub, opts.latency, work)
        ev = bench.Evald(opts, db, stub, work, 100, workers=opts.workers)
        ev.env.update({"EVALD_WORKER_CONNECTIONS": str(opts.connections),
                       "EVALD_MAX_CONCURRENCY": str(max(opts.cases, 256)),
                       "EVALD_MAX_EXPERIMENT_RUNS": "10000000",
                       "EVALD_MAX_DATASET_CASES": "100000"})
        ev.start()
        t0 = time.time()
        xid = experiment.experiment(ev.base, opts.cases, opts.repeats, opts.cases)
        peak = {"in_flight": 0, "pg_connections": 0, "rss_mb": 0.0, "threads": 0}
        # The provider's limiter opens its window by doubling each round trip (harness/
        # ratelimit.h): the first round trips ramp up, the later ones run at full width.
        deadline = t0 + opts.latency / 1000.0 * 2 * opts.repeats + 60
        reached_at = None
        while time.time() < deadline:
            st, stats = bench.call(stub.base, "GET", "/_stub/stats")
            n = int(db.q("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                         " AND pid <> pg_backend_pid()"))
            peak["in_flight"] = max(peak["in_flight"], stats["in_flight"])
            peak["pg_connections"] = max(peak["pg_connections"], n)
            peak["rss_mb"] = max(peak["rss_mb"], bench.proc_kb(ev.proc.pid, "VmRSS") / 1024.0)
            peak["threads"] = max(peak["threads"], threads_of(ev.proc.pid))
            if reached_at is None and stats["in_flight"] >= opts.cases:
                reached_at = time.time() - t0
            if stats["in_flight"] == 0 and peak["in_flight"] > 0 and reached_at is not None:
                break
            time.sleep(0.25)
        doc = experiment.wait_terminal(ev.base, xid, 3 * opts.latency // 1000 + 120)
        p = doc["progress"]
        ok = doc["status"] == "completed" and p["passed_runs"] == p["total_runs"]
        print("calls in flight: peak %d of %d cases (all in flight after %s), %d PostgreSQL "
              "connections at most (EVALD_WORKER_CONNECTIONS %d), evald peak RSS %.0f MB, "
              "%d threads; experiment %s, %d of %d runs passed" %
              (peak["in_flight"], opts.cases,
               "%.1f s" % reached_at if reached_at is not None else "never",
               peak["pg_connections"], opts.connections, peak["rss_mb"], peak["threads"],
               doc["status"], p["passed_runs"], p["total_runs"]), flush=True)
        if not ok:
            print("failures: " + db.q("SELECT string_agg(m || ' x' || n, '; ') FROM (SELECT"
                                      " failures->0->>'message' AS m, count(*) AS n FROM"
                                      " experiment_runs WHERE status <> 'completed'"
                                      " GROUP BY 1 ORDER BY 2 DESC LIMIT 5) f"))
        print(json.dumps({"peak": peak, "reached_s": reached_at, "ok": ok}))
        return 0 if ok else 1
    finally:
        if ev:
            ev.stop()
        if stub:
            stub.stop()
        if db:
            db.drop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
