"""The helpers every bench script shares, read through bench.py. Standard library only.

Owns: the paths and the stub workload's model and prompts, logging, starting and stopping
children that announce where they listen (evald-stub, evald), plain HTTP calls, throwaway
PostgreSQL databases, memory and CPU sampling from /proc, evald's configuration, the A/B
scripts' common options, and starting a plan of evaluations back to back and waiting for
them. bench.py imports every one of them, so the other scripts read them as bench.X.
"""
import argparse
import http.client
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROMPTS = ("Reply with exactly OK.", "Return exactly the text OK.")
MODEL = "stub-model"


def keep_logs(work):
    """Copies the evald and stub *.log files of a scratch folder into EVALD_TEST_LOG_DIR
    when it is set (the test suite's logs/json check reads them there)."""
    dest = os.environ.get("EVALD_TEST_LOG_DIR")
    if not dest or not os.path.isdir(work):
        return
    os.makedirs(dest, exist_ok=True)
    for name in os.listdir(work):
        if name.endswith(".log") and name.startswith(("evald", "stub")):
            shutil.copy(os.path.join(work, name),
                        os.path.join(dest, "%s-%s" % (os.path.basename(work), name)))


def log(*a):
    print("bench:", *a, file=sys.stderr, flush=True)


def now_ms():
    return time.time() * 1000.0


# ---- processes ------------------------------------------------------------------------


class Proc:
    """A child that prints {"listen": "host:port"} when ready (evald, evald-stub)."""

    def __init__(self, argv, env=None, log_path=None, ready_timeout=30.0):
        self.log_path = log_path
        self.log = open(log_path, "wb") if log_path else subprocess.DEVNULL
        self.p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=self.log)
        self.listen = None
        line = self._read_line(ready_timeout)
        if line is None:
            self.stop()
            raise RuntimeError("%s did not start (log: %s)" % (argv[0], log_path))
        self.listen = json.loads(line)["listen"]
        self.base = "http://" + self.listen

    def _read_line(self, timeout):
        out = []
        t = threading.Thread(target=lambda: out.append(self.p.stdout.readline()), daemon=True)
        t.start()
        t.join(timeout)
        if not out or not out[0]:
            return None
        return out[0].decode()

    @property
    def pid(self):
        return self.p.pid

    def stop(self, timeout=20.0):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        if self.log is not subprocess.DEVNULL:
            self.log.close()
        return self.p.returncode


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_stub(stub_bin, latency_ms, workdir, name="stub"):
    script = {"default": {"latency_ms": latency_ms, "reply": {"text": "OK"},
                          "usage": {"input_tokens": 12, "output_tokens": 1}},
              "models": [MODEL]}
    path = os.path.join(workdir, name + "-script.json")
    with open(path, "w") as f:
        json.dump(script, f)
    return Proc([stub_bin, "--listen", "127.0.0.1:0", "--script", path],
                log_path=os.path.join(workdir, name + ".log"))


# ---- HTTP -----------------------------------------------------------------------------


def call(base, method, path, body=None, timeout=60.0):
    u = urllib.parse.urlsplit(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        headers = {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        c.request(method, path, body=data, headers=headers)
        r = c.getresponse()
        raw = r.read()
        return r.status, (json.loads(raw) if raw else None)
    finally:
        c.close()


# ---- PostgreSQL -----------------------------------------------------------------------


def psql(server_url, sql, db=None):
    url = db_url(server_url, db) if db else server_url
    r = subprocess.run(["psql", "-qAtX", "-v", "ON_ERROR_STOP=1", url, "-c", sql],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("psql failed: %s" % r.stderr.strip())
    return r.stdout.strip()


def db_url(server_url, name):
    if re.match(r"^postgres(ql)?://", server_url):
        u = urllib.parse.urlsplit(server_url)
        return urllib.parse.urlunsplit((u.scheme, u.netloc, "/" + name, u.query, u.fragment))
    return server_url + " dbname=" + name


class Database:
    def __init__(self, server_url, prefix="evald_bench"):
        self.server = server_url
        self.name = "%s_%s" % (prefix, os.urandom(5).hex())
        psql(server_url, "CREATE DATABASE %s" % self.name)
        self.url = db_url(server_url, self.name)

    def q(self, sql):
        return psql(self.server, sql, self.name)

    def drop(self):
        try:
            psql(self.server, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % self.name)
        except RuntimeError as e:
            log("could not drop", self.name, e)


class Statements:
    """What PostgreSQL's statements cost one database between two moments, from
    pg_stat_statements (on a server started with it preloaded, `track = all` to see the
    statements inside the run functions, `track_planning = on` for planning): reset() at
    the start, read(n) at the end, per run of n. Unavailable (None from read) where the
    server lacks the extension (said once a process)."""
    warned = False

    def __init__(self, db):
        self.db = db
        self.ok = False
        try:
            db.q("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            self.oid = db.q("SELECT oid FROM pg_database WHERE datname = current_database()")
            self.track = db.q("SHOW pg_stat_statements.track")
            self.ok = True
        except RuntimeError as e:
            if not Statements.warned:
                log("no statement figures: pg_stat_statements is not loaded on this server "
                    "(shared_preload_libraries):", str(e).splitlines()[0])
            Statements.warned = True

    def reset(self):
        if self.ok:
            self.db.q("SELECT pg_stat_statements_reset(0, %s, 0)" % self.oid)

    def read(self, n, top=40):
        """Per run: statements (all levels), top-level statements (round trips), their
        execution and planning time; and the `top` statements by time."""
        if not self.ok:
            return None
        rows = self.db.q(
            "SELECT toplevel, calls, total_exec_time, total_plan_time,"
            " regexp_replace(left(query, 90), '\\s+', ' ', 'g')"
            " FROM pg_stat_statements WHERE dbid = %s"
            " AND query !~* 'pg_stat_statements'"
            " ORDER BY total_exec_time + total_plan_time DESC" % self.oid)
        stmts = []
        for line in rows.splitlines():
            top_s, calls, ex, pl, q = line.split("|", 4)
            stmts.append({"toplevel": top_s == "t", "calls": int(calls), "exec_ms": float(ex),
                          "plan_ms": float(pl), "query": q})
        return {"track": self.track,
                "statements_per_run": sum(x["calls"] for x in stmts) / n,
                "toplevel_per_run": sum(x["calls"] for x in stmts if x["toplevel"]) / n,
                # A top-level statement's time includes the statements run inside it.
                "ms_per_run": sum(x["exec_ms"] + x["plan_ms"] for x in stmts
                                  if x["toplevel"]) / n,
                "plan_ms_per_run": sum(x["plan_ms"] for x in stmts) / n,
                "top": [dict(x, calls_per_run=x["calls"] / n) for x in stmts[:top]]}


def pg_setting(server_url, name):
    try:
        return psql(server_url, "SHOW %s" % name)
    except RuntimeError:
        return "unknown"


# ---- memory ---------------------------------------------------------------------------


def proc_kb(pid, field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def pss_kb(pid):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children_map():
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            ppid = int(st[st.rindex(")") + 2:].split()[1])
        except (OSError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    return kids


def tree(pid):
    kids = children_map()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


class Sampler:
    """Samples, every `period` s, the RSS of a process tree and the PSS of a PostgreSQL
    cluster (its postmaster and backends); keeps the peaks. The sampler runs on the
    machine it measures, so it is kept cheap: the process trees are listed again only
    every `tree_period` s (a listing reads every /proc/*/stat), and PSS, which walks each
    backend's page tables, is read every `pss_period` s."""

    def __init__(self, pid=None, postmaster=None, period=0.1, pss_period=0.5, tree_period=1.0):
        self.pid, self.postmaster, self.period = pid, postmaster, period
        self.pss_period, self.tree_period = pss_period, tree_period
        self.tree_rss_kb = 0
        self.pg_pss_kb = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        pids, pg_pids = [], []
        next_tree = next_pss = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_tree:
                pids = tree(self.pid) if self.pid else []
                pg_pids = tree(self.postmaster) if self.postmaster else []
                next_tree = now + self.tree_period
            if self.pid:
                self.tree_rss_kb = max(self.tree_rss_kb, sum(proc_kb(p, "VmRSS") for p in pids))
            if self.postmaster and now >= next_pss:
                self.pg_pss_kb = max(self.pg_pss_kb, sum(pss_kb(p) for p in pg_pids))
                next_pss = now + self.pss_period
            self._stop.wait(self.period)

    def stop(self):
        self._stop.set()
        self._t.join()


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pids):
    """User + system CPU seconds consumed so far by these processes (all threads)."""
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                st = f.read()
            fields = st[st.rindex(")") + 2:].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, ValueError, IndexError):
            pass
    return total / CLK_TCK


def postmaster_pid(pg_data):
    if not pg_data:
        return None
    try:
        with open(os.path.join(pg_data, "postmaster.pid")) as f:
            return int(f.readline())
    except (OSError, ValueError):
        return None


# ---- evald ----------------------------------------------------------------------------


class Evald:
    def __init__(self, opts, db, stub, workdir, max_runs, port=None, workers=None):
        prov = {"providers": [{"name": "bench", "kind": "openai-chat",
                               "base_url": stub.base + "/v1", "models": [{"id": MODEL}]}]}
        ppath = os.path.join(workdir, "providers.json")
        with open(ppath, "w") as f:
            json.dump(prov, f)
        self.env = dict(os.environ)
        self.env.update({
            "EVALD_DATABASE_URL": db.url,
            "EVALD_LISTEN": "127.0.0.1:%d" % (port or 0),
            "EVALD_PROVIDERS_FILE": ppath,
            "EVALD_MAX_RUNS": str(max(100, max_runs)),
            "EVALD_LOG_LEVEL": opts.evald_log_level,
        })
        if workers or opts.workers:
            self.env["EVALD_WORKERS"] = str(workers or opts.workers)
        for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
            self.env.pop(k, None)
        self.argv = [opts.evald]
        self.log_path = os.path.join(workdir, "evald.log")
        self.proc = None

    def start(self):
        self.proc = Proc(self.argv, env=self.env, log_path=self.log_path)
        self.base = self.proc.base
        return self

    def stop(self):
        if self.proc:
            self.proc.stop()


def stop_all(opts, work, procs, db=None):
    """The end of a measured run: stops each of procs in order (None is skipped: samplers,
    evald, the stub), then, unless --keep, drops db, keeps the logs (keep_logs) and removes
    the work folder; with --keep says where they are."""
    for p in procs:
        if p:
            p.stop()
    if not opts.keep:
        if db:
            db.drop()
        keep_logs(work)
        shutil.rmtree(work, ignore_errors=True)
    else:
        log("kept", work, "and database", db.name if db else "")


def ab_parser(doc):
    """The parser of a script that runs build A (--evald) against build B (--evald-b) in
    turns: the options every such script has; the caller adds its own."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0], allow_abbrev=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(doc.split("\n")[1:]))
    ap.add_argument("--evald", required=True, help="build A (e.g. the build before a change)")
    ap.add_argument("--evald-b", required=True, help="build B")
    ap.add_argument("--stub", default=os.path.join(ROOT, "build-rel", "evald-stub"))
    ap.add_argument("--db-server", default=os.environ.get("EVALD_BENCH_DATABASE_URL"),
                    help="PostgreSQL server where databases may be created")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of A then B")
    ap.add_argument("--evald-log-level", default="warn")
    ap.add_argument("--keep", action="store_true", help="keep work folders and databases")
    return ap


def ab_check(ap, opts):
    """The checks of ab_parser's options after parsing (exits with the parser's error)."""
    if not opts.db_server:
        ap.error("--db-server (or EVALD_BENCH_DATABASE_URL) is required")
    for path in (opts.evald, opts.evald_b, opts.stub):
        if not os.access(path, os.X_OK):
            ap.error("%s is not an executable" % path)


def eval_request(runs, concurrency=None):
    r = {"dimension": "prompt", "model": {"model": MODEL, "provider": "bench"},
         "control": {"label": "reply", "prompt": PROMPTS[0]},
         "treatment": {"label": "return", "prompt": PROMPTS[1]},
         "evaluator": {"function_id": "eval::assert::exact", "arguments": {"expected": "OK"}},
         "runs": runs}
    if concurrency:
        r["concurrency"] = concurrency
    return r


def split_runs(n_calls, c):
    """runs per variant of c evaluations whose calls (2 per run pair) add up to n_calls."""
    pairs = n_calls // 2
    if pairs < c:
        raise ValueError("N = %d calls cannot be split over %d evaluations" % (n_calls, c))
    base, extra = divmod(pairs, c)
    return [base + (1 if i < extra else 0) for i in range(c)]


def post_back_to_back(reqs, timeout=60):
    """Sends raw HTTP requests, a list of ((host, port), bytes) each with `Connection:
    close`, on connections opened beforehand, written back to back. Returns t0 (ms, before
    the first write) and [(status, body)] in order (status 0: no answer)."""
    socks = [socket.create_connection(addr, timeout=timeout) for addr, _ in reqs]
    answers = []
    try:
        t0 = now_ms()
        for s, (_, req) in zip(socks, reqs):
            s.sendall(req)
        for s in socks:
            raw = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                raw += chunk
            head, _, body = raw.partition(b"\r\n\r\n")
            answers.append((int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0,
                            body))
    finally:
        for s in socks:
            s.close()
    return t0, answers


def start_back_to_back(starts, timeout=60):
    """POST /v1/evaluations for each (listen "host:port", request) of `starts`, written back
    to back (post_back_to_back). Returns t0 (ms), the ids of the evaluations started, in
    order, and a message for each start refused."""
    reqs = []
    for listen, request in starts:
        host, port = listen.rsplit(":", 1)
        body = json.dumps(request).encode()
        reqs.append(((host, int(port)),
                     b"POST /v1/evaluations HTTP/1.1\r\nHost: %s\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n%s" % (host.encode(), len(body), body)))
    t0, answers = post_back_to_back(reqs, timeout)
    ids, errors = [], []
    for i, (status, body) in enumerate(answers):
        if status not in (200, 201, 202):
            errors.append("start %d: HTTP %d %s" % (i, status, body[:200]))
        else:
            ids.append(json.loads(body)["evaluation_id"])
    return t0, ids, errors


def drive_evald(ev, plan):
    """Starts every evaluation of `plan` (a list of (runs, concurrency)) at once and waits
    until all are terminal. Returns t0 (ms, before the first start request) and the
    final summaries. The start requests are serialized and their connections opened
    beforehand, then written back to back: a client that builds and sends them one thread
    at a time would spread the starts over tens of milliseconds of its own CPU, which the
    makespan would charge to evald."""
    t0, ids, errors = start_back_to_back(
        [(ev.proc.listen, eval_request(runs, conc)) for runs, conc in plan])
    if errors:
        raise RuntimeError("; ".join(errors))
    want = set(ids)
    deadline = time.time() + 600
    while time.time() < deadline:
        st, body = call(ev.base, "GET", "/v1/evaluations?limit=100")
        mine = [e for e in body["evaluations"] if e["evaluation_id"] in want]
        if len(mine) == len(want) and all(
                e["status"] in ("completed", "failed", "cancelled") for e in mine):
            return t0, mine
        # The makespan ends at the evaluations' own completed_at, so how often this looks
        # changes only when the run is seen to be over, not the figure; every look costs
        # evald and PostgreSQL some CPU, which the measurement would charge to evald.
        time.sleep(0.25)
    raise RuntimeError("evaluations did not finish within 600 s")


def warm_up(ev, workers, plan):
    """Runs one round of small evaluations on a fresh evald before it is measured, so that
    its pooled and worker connections have run their statements once (PostgreSQL parses
    and plans them, and compiles the run functions, per connection), as on a server that
    has been up for a while. promptfoo's own warm-up is outside its measurement too: it is
    timed from its first provider request. The round has the measured plan's evaluations
    (as many start requests at once, each with up to 4 pairs, all open) and enough pairs
    in flight to give every worker a run."""
    small = [(min(r, 4), min(r, 4)) for r, _ in plan]
    pairs = sum(r for r, _ in small)
    while pairs < workers:
        extra = min(workers - pairs, 16)
        small.append((extra, extra))
        pairs += extra
    drive_evald(ev, small)


def evald_plan(n, c, mode):
    """The evaluations of one evald run, as (runs per variant, concurrency or None).
    'evals': c concurrent evaluations, each strictly sequential (the spec's default);
    'pairs': the same evaluations with every pair open at once (`concurrency` = their
    pairs, at most 16); 'one': one evaluation with `concurrency` c (at most 16). evald
    runs with c workers (EVALD_WORKERS), so that at most c calls are in flight, as with
    promptfoo's -j c."""
    if mode == "evals":
        return [(r, None) for r in split_runs(n, c)]
    if mode == "pairs":
        return [(r, min(r, 16)) for r in split_runs(n, c)]
    return [(n // 2, c)]


# ---- the machine ----------------------------------------------------------------------


def machine():
    cpu = "unknown cpu"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return "%s, %d cores, %.0f GiB, %s %s" % (cpu, os.cpu_count(), mem, platform.system(),
                                             platform.release())
