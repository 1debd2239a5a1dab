#!/usr/bin/env python3
"""The cost of exporting traces: W1 with OpenTelemetry exporting off and on, taking turns.

W1 of bench/bench.py (--n calls, 2,000, over --c concurrent evaluations, 32, each strictly
sequential, against evald-stub at 0 ms, EVALD_WORKERS = C) runs with exporting off (no
OTEL_* variable: no sink, no span is built) and on (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT at
a live receiver on loopback, bench/otel_receiver.py), A B A B for --rounds rounds, against
the same build. Each run is bench.py's: a fresh database, stub and evald, one warm-up round
of the same shape, then the measured round, calls/s from the first start request to the
last completed_at, and evald's peak RSS (VmHWM, read after the last span was exported).

With exporting on, the queue is sized so that nothing is dropped (--queue, default 65,536
spans: OTEL_BSP_MAX_QUEUE_SIZE), and the script waits after the measured round until
evald's queue is empty, then reads /metrics (evald_otel_spans_exported_total, _dropped_total,
export failures and retries) and the receiver's counts (requests, bytes, spans decoded from
the bodies, after the round so that decoding costs nothing while it runs). A round is valid
when no span was dropped or refused and, with JSON, the receiver decoded as many spans as
evald says it exported. Prints a line per round, a Markdown table and the verdict against
the targets: median ratio on/off of calls/s ≥ 0.90, worst peak RSS difference ≤ +16 MiB.

  bench/otel.py --db-server postgresql://evald@127.0.0.1:54341/evald \
      --pg-data var/pg-bench/data [--rounds 3] [--protocol json|protobuf]

Loopback only; every process it starts is stopped before it returns.
"""
import argparse
import datetime
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (processes, databases, stub, W1's plan, warm-up and driver)

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_RATIO = 0.90
TARGET_RSS_MIB = 16.0
METRICS = ("evald_otel_spans_exported_total", "evald_otel_spans_dropped_total",
           "evald_otel_export_failures_total", "evald_otel_export_retries_total",
           "evald_otel_spans_queued")


def metrics(ev):
    """evald's OTel counters from /metrics (zeros when it does not export)."""
    host, port = ev.proc.listen.rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        c.request("GET", "/metrics")
        r = c.getresponse()
        text = r.read().decode()
    finally:
        c.close()
    out = dict.fromkeys(METRICS, 0)
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in out:
            out[name] = int(float(value))
    return out


class QueuePeak:
    """GET /metrics every `period` s during the measured round; keeps the peak of
    evald_otel_spans_queued. Runs in both configurations, so that its cost is alike."""

    def __init__(self, ev, period=0.25):
        self.ev, self.period, self.peak = ev, period, 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, metrics(self.ev)["evald_otel_spans_queued"])
            except (OSError, http.client.HTTPException, ValueError):
                pass
            self._stop.wait(self.period)

    def stop(self):
        self._stop.set()
        self._t.join()


def flushed(ev, timeout_s):
    """Waits until evald's export queue is empty at two looks 0.2 s apart (every span of
    the finished runs was submitted before its run was written); returns the counters."""
    end = time.time() + timeout_s
    empty = 0
    while time.time() < end:
        m = metrics(ev)
        empty = empty + 1 if m["evald_otel_spans_queued"] == 0 else 0
        if empty >= 2:
            return m
        time.sleep(0.2)
    raise RuntimeError("evald's export queue was not empty within %.0f s" % timeout_s)


def machine_busy_s():
    """CPU seconds the whole machine spent busy so far (every core, /proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / bench.CLK_TCK


class Perf:
    """perf record of one process (evald) into `path`, stopped with SIGINT. Read it with
    `perf report -i PATH --children --stdio` (docs/bench.md, "Trace export")."""

    def __init__(self, pid, path, freq, call_graph):
        self.path = path
        self.p = subprocess.Popen(["perf", "record", "-F", str(freq), "--call-graph",
                                   call_graph, "-p", str(pid), "-o", path],
                                  stdout=subprocess.DEVNULL,
                                  stderr=open(path + ".log", "wb"))
        time.sleep(0.3)  # perf attaches before the window opens

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def thread_cpu_s(pid):
    """{tid: CPU seconds} of every thread of pid."""
    out = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for t in tids:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                st = f.read()
            fields = st[st.rindex(")") + 2:].split()
            out[int(t)] = (int(fields[11]) + int(fields[12])) / bench.CLK_TCK
        except (OSError, ValueError, IndexError):
            pass
    return out


def exporter_tid(pid, threads):
    """The span exporter's thread: evald starts it before any other that lives
    (server/main.c), so it is the oldest thread after the main one."""
    tids = sorted(t for t in threads if t != pid)
    return tids[0] if tids else None


def receiver_stats(rec):
    st, body = bench.call(rec.base, "GET", "/stats")
    if st != 200:
        raise RuntimeError("receiver /stats answered %d" % st)
    return body


def delta(a, b):
    return {k: b[k] - a[k] for k in b}


def one_run(opts, export, rec, rnd=0):
    """One measured W1 run, exporting off or on. Returns its figures."""
    work = tempfile.mkdtemp(prefix="evald-bench-otel-")
    db = stub = ev = sampler = peak = perf = None
    try:
        db = bench.Database(opts.db_server)
        stub = bench.start_stub(opts.stub, 0, work)
        plan = bench.evald_plan(opts.n, opts.c, "evals")
        workers = opts.workers or opts.c
        ev = bench.Evald(opts, db, stub, work, max(r for r, _ in plan), workers=workers)
        for k in list(ev.env):
            if k.startswith("OTEL_"):
                del ev.env[k]
        for kv in opts.env:
            k, _, v = kv.partition("=")
            ev.env[k] = v
        if export:
            ev.env.update({
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rec.base + "/v1/traces",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL":
                    "http/protobuf" if opts.protocol == "protobuf" else "http/json",
                "OTEL_BSP_SCHEDULE_DELAY": str(opts.schedule_delay),
                "OTEL_BSP_MAX_QUEUE_SIZE": str(opts.queue),
                "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": str(opts.batch),
            })
        ev.start()
        bench.warm_up(ev, workers, plan)
        flush_timeout = opts.schedule_delay / 1000.0 + 30
        m0 = flushed(ev, flush_timeout) if export else metrics(ev)
        r0 = receiver_stats(rec)
        pm = bench.postmaster_pid(opts.pg_data)
        pg_pids = bench.tree(pm)[1:] if pm else []
        if opts.perf:
            perf = Perf(ev.proc.pid, os.path.join(opts.perf, "perf-round%d-%s.data"
                                                  % (rnd, "on" if export else "off")),
                        opts.perf_freq, opts.perf_call_graph)
        me = [os.getpid()]
        cpu0 = (bench.cpu_s([ev.proc.pid]), bench.cpu_s(pg_pids), bench.cpu_s([stub.pid]),
                bench.cpu_s([rec.pid]), machine_busy_s(), bench.cpu_s(me))
        th0 = thread_cpu_s(ev.proc.pid)
        w0 = time.monotonic()
        sampler = bench.Sampler(postmaster=pm)
        peak = QueuePeak(ev)
        t0, summaries = bench.drive_evald(ev, plan)
        cpu1 = (bench.cpu_s([ev.proc.pid]), bench.cpu_s(pg_pids), bench.cpu_s([stub.pid]),
                bench.cpu_s([rec.pid]), machine_busy_s(), bench.cpu_s(me))
        interval = time.monotonic() - w0
        th1 = thread_cpu_s(ev.proc.pid)
        xt = exporter_tid(ev.proc.pid, th0) if export else None
        rss_at_end = bench.proc_kb(ev.proc.pid, "VmHWM")
        peak.stop()
        sampler.stop()
        m1 = flushed(ev, flush_timeout) if export else metrics(ev)
        cpu2 = (bench.cpu_s([ev.proc.pid]), bench.cpu_s([rec.pid]))
        if perf:
            perf.stop()
        r1 = receiver_stats(rec)
        rss = bench.proc_kb(ev.proc.pid, "VmHWM")
        t_end = max(e["completed_at"] for e in summaries)
        makespan = (t_end - t0) / 1000.0
        passed = sum(e["passed_runs"] for e in summaries)
        total = sum(e["total_runs"] for e in summaries)
        bad = [e for e in summaries if e["status"] != "completed"]
        if total != opts.n or passed != opts.n or bad:
            raise RuntimeError("evald: %d of %d runs passed, %d evaluations not completed "
                               "(log %s)" % (passed, total, len(bad), ev.log_path))
        m, r = delta(m0, m1), delta(r0, r1)
        n = opts.n
        res = {"export": "on" if export else "off", "protocol": opts.protocol if export else None,
               "n": n, "c": opts.c, "makespan_s": makespan, "calls_per_s": n / makespan,
               "peak_rss_kb": rss, "peak_rss_kb_at_last_run": rss_at_end,
               "pg_pss_kb": sampler.pg_pss_kb or None,
               "evald_cpu_ms_per_call": 1000 * (cpu1[0] - cpu0[0]) / n,
               "evald_cpu_ms_per_call_with_flush": 1000 * (cpu2[0] - cpu0[0]) / n,
               "pg_cpu_ms_per_call": 1000 * (cpu1[1] - cpu0[1]) / n if pm else None,
               "stub_cpu_ms_per_call": 1000 * (cpu1[2] - cpu0[2]) / n,
               "receiver_cpu_s": cpu2[1] - cpu0[3],
               # What else ran on the machine during the window: every busy core-second
               # less evald, PostgreSQL, the stub, the receiver and this driver.
               "other_cpu_s": (cpu1[4] - cpu0[4]) - sum(cpu1[i] - cpu0[i] for i in range(4))
               - (cpu1[5] - cpu0[5]),
               "cpu_interval_s": interval,
               # Busy share of all cores over the window (1.0: the machine was saturated).
               "machine_busy": (cpu1[4] - cpu0[4]) / (interval * (os.cpu_count() or 1)),
               "exporter_thread_cpu_ms_per_call":
                   1000 * (th1.get(xt, 0) - th0.get(xt, 0)) / n if xt else None,
               "spans_exported": m["evald_otel_spans_exported_total"],
               "spans_dropped": m["evald_otel_spans_dropped_total"],
               "spans_failed": m["evald_otel_export_failures_total"],
               "export_retries": m["evald_otel_export_retries_total"],
               "peak_queued": peak.peak,
               "received_requests": r["requests"], "received_bytes": r["bytes"],
               "received_spans": r["spans"], "receiver_errors": r["errors"]}
        problems = []
        if export:
            if res["spans_dropped"] or res["spans_failed"]:
                problems.append("%d spans dropped, %d refused" % (res["spans_dropped"],
                                                                  res["spans_failed"]))
            if res["spans_exported"] == 0:
                problems.append("nothing exported")
            if r["errors"]:
                problems.append("%d bodies the receiver could not decode" % r["errors"])
            if res["received_spans"] != res["spans_exported"]:
                problems.append("receiver decoded %d spans, evald exported %d"
                                % (res["received_spans"], res["spans_exported"]))
        elif r["requests"]:
            problems.append("the receiver got %d requests with exporting off" % r["requests"])
        res["problems"] = problems
        return res
    finally:
        bench.stop_all(opts, work, (perf, peak, sampler, ev, stub), db)


def mib(kb):
    return kb / 1024.0


def describe(rnd, off, on):
    ratio = on["calls_per_s"] / off["calls_per_s"]
    d = mib(on["peak_rss_kb"] - off["peak_rss_kb"])
    return ("round %d: calls/s off %.0f, on %.0f, ratio %.3f; peak RSS off %.1f, on %.1f MiB "
            "(%+.1f); spans received %d (%d requests, %.1f MB), exported %d, dropped %d, "
            "peak queued %d; evald CPU ms/call off %.3f, on %.3f (exporter thread %.3f; %.3f "
            "with the flush); receiver CPU %.2f s; other processes' CPU in the windows off "
            "%.2f, on %.2f s; machine busy off %.0f %%, on %.0f %%%s"
            % (rnd, off["calls_per_s"], on["calls_per_s"], ratio, mib(off["peak_rss_kb"]),
               mib(on["peak_rss_kb"]), d, on["received_spans"], on["received_requests"],
               on["received_bytes"] / 1e6, on["spans_exported"], on["spans_dropped"],
               on["peak_queued"], off["evald_cpu_ms_per_call"], on["evald_cpu_ms_per_call"],
               on["exporter_thread_cpu_ms_per_call"] or 0,
               on["evald_cpu_ms_per_call_with_flush"], on["receiver_cpu_s"],
               off["other_cpu_s"], on["other_cpu_s"], 100 * off["machine_busy"],
               100 * on["machine_busy"],
               "" if not (off["problems"] or on["problems"]) else
               "; INVALID: " + "; ".join(off["problems"] + on["problems"])))


def quiet(x, limit):
    """Whether other processes took less than `limit` of one core over the run's window."""
    return x["other_cpu_s"] / x["cpu_interval_s"] < limit


def table(pairs):
    rows = ["| round | calls/s off | calls/s on | on ÷ off | peak RSS off MiB | on MiB | "
            "difference MiB | spans received (requests, MB) | exported | dropped | "
            "evald CPU ms/call off / on | other processes' CPU s off / on | valid |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for rnd, off, on in pairs:
        valid = not (off["problems"] or on["problems"])
        rows.append("| %d | %.0f | %.0f | %.3f | %.1f | %.1f | %+.1f | %d (%d, %.1f) | %d | %d | "
                    "%.3f / %.3f | %.2f / %.2f | %s |"
                    % (rnd, off["calls_per_s"], on["calls_per_s"],
                       on["calls_per_s"] / off["calls_per_s"], mib(off["peak_rss_kb"]),
                       mib(on["peak_rss_kb"]), mib(on["peak_rss_kb"] - off["peak_rss_kb"]),
                       on["received_spans"], on["received_requests"],
                       on["received_bytes"] / 1e6, on["spans_exported"], on["spans_dropped"],
                       off["evald_cpu_ms_per_call"], on["evald_cpu_ms_per_call"],
                       off["other_cpu_s"], on["other_cpu_s"], "yes" if valid else "**no**"))
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[1:]))
    ap.add_argument("--evald", default=os.path.join(bench.ROOT, "build-rel", "evald"),
                    help="the evald binary (default build-rel/evald, the Release build)")
    ap.add_argument("--stub", default=os.path.join(bench.ROOT, "build-rel", "evald-stub"))
    ap.add_argument("--db-server", default=os.environ.get("EVALD_BENCH_DATABASE_URL"),
                    help="PostgreSQL server where databases may be created")
    ap.add_argument("--pg-data", help="its data folder (PostgreSQL's CPU and memory)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of off then on")
    ap.add_argument("--first", choices=("off", "on"), default="off",
                    help="which configuration runs first in a round")
    ap.add_argument("--n", type=int, default=2000, help="calls (W1: 2,000)")
    ap.add_argument("--c", type=int, default=32, help="concurrent evaluations (W1: 32)")
    ap.add_argument("--workers", type=int, default=0, help="EVALD_WORKERS (0 = C)")
    ap.add_argument("--protocol", choices=("json", "protobuf"), default="json")
    ap.add_argument("--schedule-delay", type=int, default=1000,
                    help="OTEL_BSP_SCHEDULE_DELAY, ms (batches of --batch go at once)")
    ap.add_argument("--queue", type=int, default=65536, help="OTEL_BSP_MAX_QUEUE_SIZE")
    ap.add_argument("--batch", type=int, default=512, help="OTEL_BSP_MAX_EXPORT_BATCH_SIZE")
    ap.add_argument("--quiet", type=float, default=0.15,
                    help="a round is quiet when other processes took less than this share of "
                    "one core in both windows (the summary gives their median apart)")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="an extra variable for evald in both configurations (repeatable)")
    ap.add_argument("--evald-log-level", default="info")
    ap.add_argument("--perf", metavar="DIR",
                    help="perf record -g evald's measured window of every run into DIR")
    ap.add_argument("--perf-freq", type=int, default=999)
    ap.add_argument("--perf-call-graph", default="dwarf",
                    help="perf's --call-graph (dwarf: the Release build has no frame pointers)")
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("--keep", action="store_true", help="keep work folders and databases")
    opts = ap.parse_args()
    if not opts.db_server:
        ap.error("--db-server (or EVALD_BENCH_DATABASE_URL) is required "
                 "(e.g. the URL that scripts/pg.sh start var/pg-bench 54341 prints)")
    for path in (opts.evald, opts.stub):
        if not os.access(path, os.X_OK):
            ap.error("%s is not an executable (cmake --build build-rel?)" % path)
    if opts.perf:
        os.makedirs(opts.perf, exist_ok=True)
    plan = bench.evald_plan(opts.n, opts.c, "evals")
    sizes = {}
    for runs, _ in plan:
        sizes[runs] = sizes.get(runs, 0) + 1
    shape = ", ".join("%d of runs %d" % (k, r) for r, k in sorted(sizes.items(), reverse=True))
    started = datetime.datetime.now().isoformat(timespec="seconds")
    work = tempfile.mkdtemp(prefix="evald-bench-otel-rec-")
    rec = None
    pairs, failures = [], []
    try:
        rec = bench.Proc([sys.executable, os.path.join(HERE, "otel_receiver.py")],
                         log_path=os.path.join(work, "receiver.log"))
        order = (False, True) if opts.first == "off" else (True, False)
        for rnd in range(1, opts.rounds + 1):
            got = {}
            for export in order:
                try:
                    got[export] = one_run(opts, export, rec, rnd)
                    x = got[export]
                    bench.log("round %d export %s: %.0f calls/s, RSS %.1f MiB, evald CPU %.3f "
                              "ms/call, spans exported %d dropped %d"
                              % (rnd, x["export"], x["calls_per_s"], mib(x["peak_rss_kb"]),
                                 x["evald_cpu_ms_per_call"], x["spans_exported"],
                                 x["spans_dropped"]))
                except Exception as e:  # a failed run is reported, not hidden
                    failures.append("round %d export %s: %s" % (rnd, "on" if export else "off", e))
                    bench.log("FAILED", failures[-1])
            if True in got and False in got:
                pairs.append((rnd, got[False], got[True]))
                bench.log(describe(rnd, got[False], got[True]))
    finally:
        if rec:
            rec.stop()
        shutil.rmtree(work, ignore_errors=True)

    print("evald trace export cost, %s, %s" % (started, bench.machine()))
    print("W1: %d calls, %d evaluations (%s), stub at 0 ms, EVALD_WORKERS=%d; exporting on: "
          "%s to bench/otel_receiver.py, OTEL_BSP_SCHEDULE_DELAY=%d, OTEL_BSP_MAX_QUEUE_SIZE=%d, "
          "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=%d; PostgreSQL fsync=%s; %s"
          % (opts.n, opts.c, shape, opts.workers or opts.c,
             "http/protobuf" if opts.protocol == "protobuf" else "http/json",
             opts.schedule_delay, opts.queue, opts.batch,
             bench.pg_setting(opts.db_server, "fsync"), opts.evald))
    print()
    for rnd, off, on in pairs:
        print(describe(rnd, off, on))
    print()
    print(table(pairs))
    valid = [(r, a, b) for r, a, b in pairs if not (a["problems"] or b["problems"])]
    verdicts = []
    if valid:
        ratios = [b["calls_per_s"] / a["calls_per_s"] for _, a, b in valid]
        diffs = [mib(b["peak_rss_kb"] - a["peak_rss_kb"]) for _, a, b in valid]
        # A tiny run can use less CPU than one clock tick (0 ms a call): no ratio then.
        cpu = [b["evald_cpu_ms_per_call"] / a["evald_cpu_ms_per_call"] for _, a, b in valid
               if a["evald_cpu_ms_per_call"] > 0]
        med_ratio, worst = statistics.median(ratios), max(diffs)
        calm = [b["calls_per_s"] / a["calls_per_s"] for _, a, b in valid
                if quiet(a, opts.quiet) and quiet(b, opts.quiet)]
        verdicts = [med_ratio >= TARGET_RATIO, worst <= TARGET_RSS_MIB]
        print()
        print("summary over %d valid rounds of %d: median ratio on/off %.3f (%s; target ≥ %.2f): "
              "%s; worst peak RSS difference %+.1f MiB (%s; target ≤ +%.0f MiB): %s; "
              "evald CPU per call on/off %s (median); spans per call %.2f"
              % (len(valid), opts.rounds, med_ratio, ", ".join("%.3f" % x for x in ratios),
                 TARGET_RATIO, "met" if verdicts[0] else "MISSED", worst,
                 ", ".join("%+.1f" % x for x in diffs), TARGET_RSS_MIB,
                 "met" if verdicts[1] else "MISSED",
                 "%.2f×" % statistics.median(cpu) if cpu else "n/a (under a clock tick)",
                 statistics.median(b["spans_exported"] / b["n"] for _, _, b in valid)))
        print("quiet rounds (other processes under %.0f %% of a core in both windows): %d; "
              "their median ratio %s (%s)"
              % (100 * opts.quiet, len(calm), "%.3f" % statistics.median(calm) if calm else "n/a",
                 ", ".join("%.3f" % x for x in calm)))
    else:
        print()
        print("summary: no valid round")
    for f in failures:
        print("FAILED:", f)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"started": started, "machine": bench.machine(),
                       "options": {k: v for k, v in vars(opts).items()},
                       "rounds": [{"round": r, "off": a, "on": b} for r, a, b in pairs],
                       "failures": failures}, f, indent=1)
    if failures or not valid or len(valid) < len(pairs):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
