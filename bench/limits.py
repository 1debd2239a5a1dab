#!/usr/bin/env python3
"""Calls in flight and provider rate limits: two builds of evald side by side.

Two workloads, each run for every build given, the builds taking turns (A B A B) so that
a noisy machine weighs on both alike:

  inflight   the stub answers after --latency ms (2,000); --evaluations evaluations of
             `runs: 1` (1,024: 2,048 calls, an evaluation's two runs one after the other)
             are started at once on one process. Reports the makespan, the stub's peak of
             calls in flight, the ideal (latency x ceil(calls / peak)) and the ratio to it,
             evald's peak of PostgreSQL connections and its peak RSS.
  ratelimit  the stub allows --rpm requests a minute per key (a rolling window of one
             second, 429 with Retry-After beyond it) and answers after --rl-latency ms
             (500); the same 2,048 runs, on one process and on two processes sharing one
             database (the starts split between them). Reports the makespan against the
             limit-bound ideal (calls / rpm minutes), the 429 answers as a share of the
             calls, and the failed runs.

A build is `NAME=PATH` (the evald binary) and may take its own in-flight setting:
`--build old=/tmp/old/evald:workers=256 --build new=build/evald:concurrency=1024`
(`workers=` sets EVALD_WORKERS, the setting of builds before EVALD_MAX_CONCURRENCY;
`concurrency=` sets EVALD_MAX_CONCURRENCY; `connections=` EVALD_WORKER_CONNECTIONS). With two processes, the old build's workers
are halved so that both fit in the server's connections as one process did.

  bench/limits.py --db-server postgresql://evald@127.0.0.1:55471/evald \
      --build old=/work/old/build/evald:workers=256 --build new=build/evald:concurrency=1024
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


class Build:
    def __init__(self, spec):
        name, _, rest = spec.partition("=")
        path, *opts = rest.split(":")
        if not name or not path:
            raise ValueError("--build wants NAME=PATH[:OPTION=N ...]: %r" % spec)
        self.name, self.path = name, path
        self.workers = self.concurrency = self.connections = None
        for o in opts:
            k, _, v = o.partition("=")
            if k == "workers":
                self.workers = int(v)
            elif k == "concurrency":
                self.concurrency = int(v)
            elif k == "connections":
                self.connections = int(v)
            else:
                raise ValueError("unknown build option %r" % o)

    def env(self, processes):
        e = {}
        if self.workers:
            e["EVALD_WORKERS"] = str(max(1, self.workers // processes))
        if self.concurrency:
            e["EVALD_MAX_CONCURRENCY"] = str(self.concurrency)
        if self.connections:
            e["EVALD_WORKER_CONNECTIONS"] = str(self.connections)
        return e


def rate_limited_stub(stub_bin, latency_ms, rpm, workdir):
    """The stub with a scripted limit of rpm requests a minute, as rpm/60 in any second."""
    script = {"default": {"latency_ms": latency_ms, "reply": {"text": "OK"},
                          "usage": {"input_tokens": 12, "output_tokens": 1}},
              "models": [bench.MODEL],
              "rate_limit": {"requests": rpm // 60, "window_ms": 1000}}
    path = os.path.join(workdir, "stub-script.json")
    with open(path, "w") as f:
        json.dump(script, f)
    return bench.Proc([stub_bin, "--listen", "127.0.0.1:0", "--script", path],
                      log_path=os.path.join(workdir, "stub.log"))


def start_all(evalds, n):
    """Starts n evaluations of `runs: 1`, written back to back on connections opened
    beforehand, dealt in turn to the processes. Returns t0 (ms) and the ids."""
    t0, ids, errors = bench.start_back_to_back(
        [(evalds[i % len(evalds)].proc.listen, bench.eval_request(1)) for i in range(n)],
        timeout=120)
    if errors:
        raise RuntimeError("%d starts refused, the first: %s" % (len(errors), errors[0]))
    return t0, ids


def wait_done(db, ids, timeout_s):
    """Waits until every evaluation of ids is terminal; returns their totals from the
    database (looking costs evald nothing)."""
    arr = "ARRAY[%s]" % ",".join("'%s'" % i for i in ids)
    end = time.time() + timeout_s
    while time.time() < end:
        row = db.q("SELECT count(*) FILTER (WHERE status IN ('queued','running')),"
                   " count(*) FILTER (WHERE status = 'completed'), coalesce(sum(passed_runs),0),"
                   " coalesce(sum(failed_runs),0), coalesce(sum(total_runs),0),"
                   " coalesce(max(completed_at),0) FROM evaluations WHERE id = ANY(%s)" % arr)
        live, completed, passed, failed, total, last = (int(x) for x in row.split("|"))
        if live == 0:
            return {"completed": completed, "passed_runs": passed, "failed_runs": failed,
                    "total_runs": total, "last_completed_ms": last}
        time.sleep(0.25)
    raise RuntimeError("evaluations not terminal within %d s" % timeout_s)


STAGES = (("created", "e.created_at"), ("run 1 started", "r1.started_at"),
          ("run 1 written", "r1.completed_at"), ("run 2 started", "r2.started_at"),
          ("run 2 written", "r2.completed_at"), ("evaluation done", "e.completed_at"))


def stages(db, ids, t0):
    """Where an evaluation's time went: for each stage of its two runs, the median and the
    last moment (s after the first start was sent) at which the evaluations reached it.
    The first run's start minus the creation is its claim's wait; the second's minus
    the first's write, the next claim's; the end minus the last write, the finalizer's."""
    arr = "ARRAY[%s]" % ",".join("'%s'" % i for i in ids)
    cols = ",".join("percentile_disc(0.5) WITHIN GROUP (ORDER BY %s), max(%s)" % (c, c)
                    for _, c in STAGES)
    row = db.q("SELECT %s FROM evaluations e JOIN runs r1 ON r1.evaluation_id = e.id AND"
               " r1.position = 1 LEFT JOIN runs r2 ON r2.evaluation_id = e.id AND"
               " r2.position = 2 WHERE e.id = ANY(%s)" % (cols, arr))
    v = [(int(x) - t0) / 1000.0 if x else None for x in row.split("|")]
    return {name: {"median": v[2 * i], "last": v[2 * i + 1]}
            for i, (name, _) in enumerate(STAGES)}


class Psql:
    """One psql session kept open for many one-row queries: a psql process started for
    each sample took half a core of the machine being measured."""

    def __init__(self, url):
        self.p = subprocess.Popen(["psql", "-qAtX", "-v", "ON_ERROR_STOP=1", url],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lock = threading.Lock()

    def q(self, sql):
        with self.lock:
            self.p.stdin.write(sql.rstrip(";") + ";\n")
            self.p.stdin.flush()
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("psql ended")
            return line.strip()

    def close(self):
        self.p.stdin.close()
        self.p.wait(10)


class Peaks:
    """Samples, every 0.25 s, the PostgreSQL connections of the benchmark's database and
    the RSS of the evald processes, keeping the peaks."""

    def __init__(self, db, pids):
        self.db, self.pids = db, pids
        self.pg_connections = 0
        self.rss_kb = {p: 0 for p in pids}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                n = int(self.db.q("SELECT count(*) FROM pg_stat_activity WHERE datname ="
                                  " current_database() AND pid <> pg_backend_pid()"))
                self.pg_connections = max(self.pg_connections, n)
            except RuntimeError:
                pass
            for p in self.pids:
                self.rss_kb[p] = max(self.rss_kb[p], bench.proc_kb(p, "VmRSS"))
            self._stop.wait(0.25)

    def stop(self):
        self._stop.set()
        self._t.join()


def one_run(opts, build, workload, processes):
    work = tempfile.mkdtemp(prefix="evald-bench-limits-")
    db = stub = peaks = sql = None
    evalds = []
    try:
        db = bench.Database(opts.db_server)
        sql = Psql(db.url)
        calls = 2 * opts.evaluations
        if workload == "inflight":
            stub = bench.start_stub(opts.stub, opts.latency, work)
        else:
            stub = rate_limited_stub(opts.stub, opts.rl_latency, opts.rpm, work)
        bopts = argparse.Namespace(evald=build.path, evald_log_level=opts.evald_log_level,
                                   workers=0)
        for i in range(processes):
            ev = bench.Evald(bopts, db, stub, work, 100)
            ev.env.update(build.env(processes))
            # The starts come at once, each on a connection of its own, all from loopback.
            ev.env["EVALD_HTTP_MAX_CONNECTIONS_PER_IP"] = "4096"
            ev.log_path = os.path.join(work, "evald-%d.log" % i)
            evalds.append(ev.start())
        if workload == "inflight":
            # Warm as a server that has been up: every connection has run its statements.
            _, warm = start_all(evalds, min(opts.evaluations, 256))
            wait_done(sql, warm, 300)
        st, _ = bench.call(stub.base, "POST", "/_stub/reset")
        peaks = Peaks(sql, [e.proc.pid for e in evalds])
        pm = bench.postmaster_pid(opts.pg_data)
        pids = [e.proc.pid for e in evalds]
        cpu0 = (bench.cpu_s(pids), bench.cpu_s(bench.tree(pm)[1:]) if pm else 0.0,
                bench.cpu_s([stub.pid]))
        t0, ids = start_all(evalds, opts.evaluations)
        started_s = (bench.now_ms() - t0) / 1000.0
        res = wait_done(sql, ids, 900)
        peaks.stop()
        cpu = (bench.cpu_s(pids) - cpu0[0],
               (bench.cpu_s(bench.tree(pm)[1:]) - cpu0[1]) if pm else None,
               bench.cpu_s([stub.pid]) - cpu0[2])
        _, stats = bench.call(stub.base, "GET", "/_stub/stats")
        makespan = (res["last_completed_ms"] - t0) / 1000.0
        timeline = stages(sql, ids, t0)
        r = {"build": build.name, "workload": workload, "processes": processes,
             "makespan_s": makespan, "starts_s": started_s,
             "passed_runs": res["passed_runs"], "failed_runs": res["failed_runs"],
             "total_runs": res["total_runs"], "requests": stats["requests"],
             "http_429": int(stats["by_status"].get("429", 0)),
             "peak_in_flight": stats["max_in_flight"],
             "pg_connections": peaks.pg_connections,
             "rss_mb": [bench.proc_kb(e.proc.pid, "VmHWM") / 1024.0 for e in evalds],
             "cpu_s": {"evald": cpu[0], "postgresql": cpu[1], "stub": cpu[2]},
             "stages_s": timeline}
        if workload == "inflight":
            r["ideal_s"] = opts.latency / 1000.0 * math.ceil(calls / max(1, r["peak_in_flight"]))
        else:
            r["ideal_s"] = calls / (opts.rpm / 60.0)
        r["ratio"] = makespan / r["ideal_s"]
        return r
    finally:
        if peaks:
            peaks.stop()
        if sql:
            sql.close()
        for ev in evalds:
            ev.stop()
        if stub:
            stub.stop()
        if db:
            db.drop()
        bench.keep_logs(work)
        shutil.rmtree(work, ignore_errors=True)


def describe_stages(r):
    st = r.get("stages_s")
    if not st:
        return ""
    return "\n      stages (median/last, s): " + ", ".join(
        "%s %s/%s" % (k, "-" if v["median"] is None else "%.2f" % v["median"],
                      "-" if v["last"] is None else "%.2f" % v["last"]) for k, v in st.items())


def describe(r):
    s = ("%-4s %-9s x%d  makespan %6.2f s (ideal %5.2f s, x%.2f), starts %.2f s, "
         "runs %d/%d passed, %d failed, peak in flight %d, PostgreSQL connections %d, RSS %s MB"
         % (r["build"], r["workload"], r["processes"], r["makespan_s"], r["ideal_s"], r["ratio"],
            r["starts_s"], r["passed_runs"], r["total_runs"], r["failed_runs"],
            r["peak_in_flight"], r["pg_connections"],
            "/".join("%.0f" % m for m in r["rss_mb"])))
    c = r["cpu_s"]
    s += ", CPU evald %.1f s, PostgreSQL %s s, stub %.1f s" % (
        c["evald"], "%.1f" % c["postgresql"] if c["postgresql"] is not None else "n/a", c["stub"])
    if r["workload"] == "ratelimit":
        s += ", 429: %d of %d requests (%.1f %%)" % (
            r["http_429"], r["requests"], 100.0 * r["http_429"] / max(1, r["requests"]))
    return s + describe_stages(r)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--build", action="append", required=True,
                    help="NAME=PATH[:workers=N][:concurrency=N][:connections=N], in the order they take turns")
    ap.add_argument("--stub", default=os.path.join(bench.ROOT, "build", "evald-stub"))
    ap.add_argument("--db-server", default=os.environ.get("EVALD_BENCH_DATABASE_URL"))
    ap.add_argument("--pg-data", help="its data folder (to measure its CPU)")
    ap.add_argument("--workloads", default="inflight,ratelimit")
    ap.add_argument("--processes", default="1,2", help="for ratelimit")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--evaluations", type=int, default=1024)
    ap.add_argument("--latency", type=int, default=2000)
    ap.add_argument("--rl-latency", type=int, default=500)
    ap.add_argument("--rpm", type=int, default=6000)
    ap.add_argument("--evald-log-level", default="warn")
    ap.add_argument("--json", help="write every measurement here")
    opts = ap.parse_args()
    if not opts.db_server:
        ap.error("--db-server (or EVALD_BENCH_DATABASE_URL) is required")
    builds = [Build(b) for b in opts.build]
    shapes = []
    for w in opts.workloads.split(","):
        if w == "inflight":
            shapes.append((w, 1))
        elif w == "ratelimit":
            shapes += [(w, int(p)) for p in opts.processes.split(",")]
        else:
            ap.error("unknown workload %r" % w)
    out, failures = [], []
    for rnd in range(opts.rounds):
        for w, p in shapes:
            for b in builds:
                try:
                    r = one_run(opts, b, w, p)
                    r["round"] = rnd + 1
                    out.append(r)
                    bench.log("round %d: %s" % (rnd + 1, describe(r)))
                except Exception as e:  # a failed run is reported, not hidden
                    failures.append("%s %s x%d: %s" % (b.name, w, p, e))
                    bench.log("FAILED", failures[-1])
    print("evald calls in flight and rate limits, %s" % bench.machine())
    for r in out:
        print("round %d: %s" % (r["round"], describe(r)))
    for f in failures:
        print("FAILED:", f)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"runs": out, "failures": failures}, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
