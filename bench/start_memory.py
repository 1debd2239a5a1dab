#!/usr/bin/env python3
"""Peak memory of a large experiment start: 30 MB of inline cases, two builds in turn.

Each build (--evald A, --evald-b B) gets a fresh database, evald-stub and evald (one worker,
so that the runs the start enqueues cost little meanwhile). The script reads evald's peak
resident memory (VmHWM) once it is ready, sends POST /v1/experiments whose body holds
--cases (10,000) inline cases of about --case-bytes (3,000) each (30 MB), reads VmHWM again
after the 202, and cancels the experiment. A B A B for --rounds rounds; prints each run,
the medians and the verdict for B (peak <= --target-mib, 40).

  bench/start_memory.py --db-server postgresql://evald@127.0.0.1:54341/evald \\
      --evald /path/to/before/evald --evald-b build-rel/evald [--rounds 2]

Loopback only; every process it starts is stopped before it returns.
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (processes, databases, stub)


def body(cases, case_bytes):
    pad = "x" * max(0, case_bytes - 60)
    items = ",".join('{"id":"c%d","vars":{"question":"q%d %s"}}' % (i, i, pad)
                     for i in range(cases))
    req = {"name": "memory", "dimension": "prompt",
           "model": {"model": bench.MODEL, "provider": "bench"},
           "control": {"prompt": "A {{question}}"}, "treatments": [{"prompt": "B {{question}}"}],
           "evaluator": {"function_id": "eval::assert::exact", "arguments": {"expected": "OK"}},
           "concurrency": 1}
    text = json.dumps(req)
    return (text[:-1] + ', "cases": [' + items + "]}").encode()


def post(base, path, data):
    host, port = base[len("http://"):].rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=300)
    c.request("POST", path, body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    out = r.read()
    c.close()
    return r.status, out


def one_run(opts, evald_bin, label, data):
    work = tempfile.mkdtemp(prefix="evald-bench-start-")
    db = stub = ev = None
    try:
        db = bench.Database(opts.db_server)
        stub = bench.start_stub(opts.stub, 1000, work)
        run_opts = argparse.Namespace(**vars(opts))
        run_opts.evald = evald_bin
        ev = bench.Evald(run_opts, db, stub, work, 1, workers=1)
        ev.env["EVALD_MAX_DATASET_BYTES"] = str(max(33554432, len(data) + 1024))
        ev.env["EVALD_MAX_EXPERIMENT_RUNS"] = str(max(100000, 2 * opts.cases))
        ev.start()
        before = bench.proc_kb(ev.proc.pid, "VmHWM")
        t0 = time.monotonic()
        status, out = post(ev.base, "/v1/experiments", data)
        took = time.monotonic() - t0
        peak = bench.proc_kb(ev.proc.pid, "VmHWM")
        if status != 202:
            raise RuntimeError("%s: the start answered %d: %s" % (label, status, out[:300]))
        xid = json.loads(out)["experiment_id"]
        post(ev.base, "/v1/experiments/%s/cancel" % xid, b"")
        r = {"build": label, "peak_mib": peak / 1024.0, "ready_mib": before / 1024.0,
             "seconds": took}
        print("%s: peak %.1f MiB (%.1f MiB when ready), the start took %.2f s"
              % (label, r["peak_mib"], r["ready_mib"], took), flush=True)
        return r
    finally:
        bench.stop_all(opts, work, (ev, stub), db)


def main():
    ap = bench.ab_parser(__doc__)
    ap.add_argument("--cases", type=int, default=10000)
    ap.add_argument("--case-bytes", type=int, default=3000)
    ap.add_argument("--target-mib", type=float, default=40.0)
    ap.add_argument("--workers", type=int, default=1)
    opts = ap.parse_args()
    bench.ab_check(ap, opts)
    data = body(opts.cases, opts.case_bytes)
    print("body: %d cases, %.1f MB" % (opts.cases, len(data) / 1e6), flush=True)
    runs = []
    for _ in range(opts.rounds):
        for label, path in (("A", opts.evald), ("B", opts.evald_b)):
            runs.append(one_run(opts, path, label, data))
    print("\n| build | peak RSS MiB | RSS when ready MiB | start s |\n|---|---:|---:|---:|")
    med = {}
    for label in ("A", "B"):
        mine = [r for r in runs if r["build"] == label]
        med[label] = {k: statistics.median(r[k] for r in mine)
                      for k in ("peak_mib", "ready_mib", "seconds")}
        print("| %s | %.1f | %.1f | %.2f |" % (label, med[label]["peak_mib"],
                                              med[label]["ready_mib"], med[label]["seconds"]))
    ok = med["B"]["peak_mib"] <= opts.target_mib
    print("\npeak RSS of B <= %.0f MiB: %s" % (opts.target_mib, "met" if ok else "NOT met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
