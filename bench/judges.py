#!/usr/bin/env python3
"""Pairwise judges: what judging adds to an experiment's makespan.

J1  one experiment of --cases cases, 2 arms, --repeats repeats against evald-stub, every
    arm run answering after --latency ms, run twice, each on a fresh database and fresh
    evald and stub processes, loopback only: once without a judge (the runs alone), once
    with a pairwise judge (orders --orders, default both) on its own model whose every call
    answers after --judge-latency ms with {"winner": "1"} (an always-first-slot judge:
    every pair inconsistent, a tie). Both at --concurrency cases at once, EVALD_WORKERS
    --workers. Prints each makespan (created_at to completed_at), the judge calls (counted
    at the stub, in judge_quality.metrics and in the judgements listing) and their mean
    latency (the judgements' metrics.latency_ms), and the bound of the spec (judging adds
    no more than its own calls' latency, judge calls of a case overlapping the next cases'
    runs):

        judged makespan <= --factor x (runs makespan + judge calls x mean judge latency
                                        / concurrency)

Exits 1 when a run fails its checks (an experiment not completed, a judge call missing or
failed, a judged experiment that completed before its last judge call answered) or,
without --no-targets, when the bound is missed.

Usage:
  bench/judges.py --db-server postgresql://evald@127.0.0.1:54361/evald [--cases 500]
  bench/judges.py --db-server … --cases 40 --no-targets        # the CI smoke size
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import experiment  # noqa: E402  (wait_terminal, post_raw)

JUDGE_MODEL = "judge-model"
USAGE = {"input_tokens": 12, "output_tokens": 1}
JUDGE_USAGE = {"input_tokens": 60, "output_tokens": 12}


def script(opts):
    """Every call of the judge's model answers slot 1 after --judge-latency ms; every other
    call (the arms' runs) answers OK after --latency ms."""
    return {"rules": [{"when": {"model": JUDGE_MODEL}, "latency_ms": opts.judge_latency,
                       "reply": {"json": {"winner": "1", "reason": "the first reads better"}},
                       "usage": JUDGE_USAGE}],
            "default": {"latency_ms": opts.latency, "reply": {"text": "OK"}, "usage": USAGE},
            "models": [bench.MODEL, JUDGE_MODEL]}


def dataset(opts):
    lines = [json.dumps({"id": "q%d" % i, "vars": {"question": "question %d" % i},
                         "expected": "OK"}) for i in range(1, opts.cases + 1)]
    return ("\n".join(lines) + "\n").encode()


def request(opts, ds_id, judged):
    body = {"name": "judges-" + ("judged" if judged else "runs"), "dimension": "prompt",
            "model": {"model": bench.MODEL, "provider": "bench"},
            "control": {"label": "brief", "prompt": "{{question}} Answer briefly."},
            "treatments": [{"label": "detailed", "prompt": "{{question}} Answer in detail."}],
            "dataset_id": ds_id,
            "evaluator": {"function_id": "eval::assert::exact",
                          "arguments": {"expected": "{{expected}}"}},
            "repeats": opts.repeats, "concurrency": opts.concurrency}
    if judged:
        body["judge"] = {"kind": "pairwise", "model": {"model": JUDGE_MODEL, "provider": "bench"},
                         "task": "{{question}}",
                         "instructions": "Prefer the correct, concise answer.",
                         "orders": opts.orders, "max_tokens": 256}
    return body


def with_evald(opts, fn, second_model=JUDGE_MODEL, prefix="evald-bench-j-"):
    """experiment.with_evald with a second model (the judge's; bench/agents.py: the simulated
    user's) in the providers file: a fresh database, stub (scripted by the caller's script())
    and evald, all stopped and dropped afterwards."""
    work = tempfile.mkdtemp(prefix=prefix)
    db = stub = ev = None
    try:
        db = bench.Database(opts.db_server)
        stub = bench.start_stub(opts.stub, opts.latency, work)
        ev = bench.Evald(opts, db, stub, work, 100, workers=opts.workers)
        with open(os.path.join(work, "providers.json"), "w") as f:
            json.dump({"providers": [{"name": "bench", "kind": "openai-chat",
                                      "base_url": stub.base + "/v1",
                                      "models": [{"id": bench.MODEL}, {"id": second_model}]}]},
                      f)
        ev.stub_base = stub.base
        ev.env["EVALD_MAX_EXPERIMENT_RUNS"] = "10000000"
        ev.env["EVALD_MAX_DATASET_CASES"] = "100000"
        # EVALD_MAX_CONCURRENCY (256 by default) caps an experiment's concurrency; the
        # workers are EVALD_WORKERS (bench.Evald).
        if opts.concurrency > 256:
            ev.env["EVALD_MAX_CONCURRENCY"] = str(opts.concurrency)
        ev.start()
        return fn(ev)
    finally:
        if ev:
            ev.stop()
        if stub:
            stub.stop()
        if db:
            db.drop()
        if not getattr(opts, "keep", False):
            bench.keep_logs(work)
            shutil.rmtree(work, ignore_errors=True)
        else:
            bench.log("kept", work)


def listing(base, xid, what):
    """Every row of GET /v1/experiments/{id}/<what> (judgements, runs), page by page."""
    rows, before = [], None
    while True:
        path = "/v1/experiments/%s/%s?limit=100" % (xid, what)
        if before:
            path += "&before=" + urllib.parse.quote(str(before), safe="")
        st, page = bench.call(base, "GET", path)
        if st != 200:
            raise RuntimeError("GET %s answered %d: %s" % (path, st, page))
        rows.extend(page.get(what) or [])
        before = page.get("next_cursor")
        if not before:
            return rows


def one(opts, judged):
    def run(ev):
        st, x = bench.call(ev.stub_base, "PUT", "/_stub/script", script(opts))
        if st != 200:
            raise RuntimeError("the stub refused the script (%d): %s" % (st, x))
        st, ds = experiment.post_raw(ev.base, "/v1/datasets?name=judges", dataset(opts),
                                     "application/x-ndjson")
        if st not in (200, 201):
            raise RuntimeError("dataset upload answered %d: %s" % (st, ds))
        body = request(opts, ds["dataset_id"], judged)
        st, x = bench.call(ev.base, "POST", "/v1/experiments", body)
        if st != 202:
            raise RuntimeError("experiment start answered %d: %s" % (st, x))
        xid = x["experiment_id"]
        doc = experiment.wait_terminal(ev.base, xid, 3600)
        st, stats = bench.call(ev.stub_base, "GET", "/_stub/stats")
        judge_hits = sum(r.get("hits", 0) for r in stats.get("rules") or [] if r.get("index") == 0)
        out = {"judged": judged, "experiment_id": xid, "status": doc["status"],
               "makespan_s": (doc["completed_at"] - doc["created_at"]) / 1000.0,
               "created_at": doc["created_at"], "completed_at": doc["completed_at"],
               "runs": doc["progress"]["total_runs"],
               "stub_requests": stats["requests"], "stub_judge_requests": judge_hits,
               "stub_max_in_flight": stats.get("max_in_flight"),
               "spend": doc.get("spend"),
               "verdict": doc["comparisons"][0].get("verdict")}
        if not judged:
            return out
        cmp0 = doc["comparisons"][0]
        out["progress_judgements"] = doc["progress"].get("judgements")
        out["preference"] = cmp0.get("preference")
        out["judge_quality"] = cmp0.get("judge_quality")
        out["evaluator_verdict"] = cmp0.get("evaluator_verdict")
        rows = listing(ev.base, xid, "judgements")
        lat = [r["metrics"]["latency_ms"] for r in rows
               if isinstance(r.get("metrics"), dict) and
               isinstance(r["metrics"].get("latency_ms"), (int, float))]
        out["judgements_listed"] = len(rows)
        out["judgements_by_status"] = {}
        for r in rows:
            k = str(r.get("status"))
            out["judgements_by_status"][k] = out["judgements_by_status"].get(k, 0) + 1
        out["judge_latency_ms_n"] = len(lat)
        out["judge_latency_ms_mean"] = sum(lat) / len(lat) if lat else None
        metrics = (out["judge_quality"] or {}).get("metrics") or {}
        out["judge_calls_reported"] = metrics.get("calls")
        # Overlap: the judge calls that had ended before the last arm run started did not
        # wait for the runs to finish.
        runs = listing(ev.base, xid, "runs")
        last_run_start = max((r.get("started_at") or 0) for r in runs) if runs else 0
        done = [r.get("completed_at") for r in rows if isinstance(r.get("completed_at"), int)]
        out["last_run_started_at"] = last_run_start
        out["last_judgement_completed_at"] = max(done) if done else None
        out["judgements_before_last_run"] = sum(1 for t in done if t <= last_run_start)
        # The last judge call the stub received, against the experiment's completion: a
        # judged experiment must not complete before its judge has answered.
        st, log = bench.call(ev.stub_base, "GET", "/_stub/requests?limit=500")
        last = None
        for r in (log or {}).get("requests") or []:
            body = r.get("body")
            if isinstance(body, dict) and body.get("model") == JUDGE_MODEL:
                last = max(last or 0, r.get("received_at_ms") or 0)
        out["last_judge_request_at"] = last
        return out
    return with_evald(opts, run)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--evald", default=os.path.join(bench.ROOT, "build", "evald"))
    ap.add_argument("--stub", default=os.path.join(bench.ROOT, "build", "evald-stub"))
    ap.add_argument("--db-server", default=os.environ.get("EVALD_BENCH_DATABASE_URL"))
    ap.add_argument("--cases", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--orders", choices=("both", "one"), default="both")
    ap.add_argument("--concurrency", type=int, default=20,
                    help="cases at once (the experiment's concurrency), default 20")
    ap.add_argument("--workers", type=int, default=None,
                    help="EVALD_WORKERS (default: twice --concurrency, more than the case "
                    "jobs, which also run the judge calls, can hold)")
    ap.add_argument("--latency", type=int, default=200, help="ms of every arm run's call")
    ap.add_argument("--judge-latency", type=int, default=200, help="ms of every judge call")
    ap.add_argument("--factor", type=float, default=1.2)
    ap.add_argument("--evald-log-level", default="warn")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folders and logs")
    ap.add_argument("--json", help="write the measurements here")
    ap.add_argument("--no-targets", action="store_true",
                    help="exit 0 whatever the ratio (the smoke run's size is too small to "
                    "judge it); the checks still apply")
    opts = ap.parse_args()
    if not opts.db_server:
        ap.error("--db-server (or EVALD_BENCH_DATABASE_URL) is required")
    if opts.cases < 1 or opts.repeats < 1 or opts.concurrency < 1:
        ap.error("--cases, --repeats and --concurrency must be at least 1")
    if opts.workers is None:
        opts.workers = 2 * opts.concurrency
    shape = ("%d cases x 2 arms x %d repeats at %d ms, concurrency %d, EVALD_WORKERS %d" %
             (opts.cases, opts.repeats, opts.latency, opts.concurrency, opts.workers))

    r = one(opts, False)
    print("J1 runs only: %s: %s, makespan %.2f s, %d calls at the stub (peak %s in flight)" %
          (shape, r["status"], r["makespan_s"], r["stub_requests"], r["stub_max_in_flight"]),
          flush=True)
    j = one(opts, True)
    expected = opts.cases * opts.repeats * (2 if opts.orders == "both" else 1)
    calls = j["stub_judge_requests"]
    mean_ms = j["judge_latency_ms_mean"]
    mean_from = "judgements' metrics.latency_ms"
    if mean_ms is None:
        mean_ms, mean_from = float(opts.judge_latency), "the stub's scripted latency (no " \
            "latency_ms in the judgements)"
    own_s = calls * mean_ms / 1000.0 / opts.concurrency
    ideal_s = r["makespan_s"] + own_s
    bound_s = opts.factor * ideal_s
    ratio = j["makespan_s"] / ideal_s if ideal_s > 0 else float("nan")
    met = j["makespan_s"] <= bound_s
    jq = j["judge_quality"] or {}
    pref = j["preference"] or {}
    fs = jq.get("first_slot") or {}
    print("J1 judged (orders %s, judge at %d ms): %s: %s, makespan %.2f s, %d calls at the "
          "stub of which %d judge calls (expected %d; judge_quality.metrics.calls %s, %d "
          "judgements listed %s, progress.judgements %s), mean judge latency %.1f ms (%s), "
          "peak %s in flight; %d judge calls had ended before the last arm run started" %
          (opts.orders, opts.judge_latency, shape, j["status"], j["makespan_s"],
           j["stub_requests"], calls, expected, j["judge_calls_reported"],
           j["judgements_listed"], json.dumps(j["judgements_by_status"]),
           json.dumps(j["progress_judgements"]), mean_ms, mean_from, j["stub_max_in_flight"],
           j["judgements_before_last_run"]), flush=True)
    print("J1 judge (always slot 1): preference %s/%s/%s wins/losses/ties, %s inconsistent, "
          "verdict %s; consistency %s, first_slot %s; comparison verdict %s, evaluator %s" %
          (pref.get("wins"), pref.get("losses"), pref.get("ties"), pref.get("inconsistent"),
           pref.get("verdict"), jq.get("consistency"), fs.get("fraction"), j["verdict"],
           j["evaluator_verdict"]), flush=True)
    print("J1 bound: %.1f x (runs %.2f s + judge calls' own latency %d x %.1f ms / %d = %.2f s) "
          "= %.2f s; judged %.2f s = %.2f x (runs + judge's own), %.2f of the bound: %s" %
          (opts.factor, r["makespan_s"], calls, mean_ms, opts.concurrency, own_s, bound_s,
           j["makespan_s"], ratio, j["makespan_s"] / bound_s if bound_s else float("nan"),
           "met" if met else "MISSED"), flush=True)

    problems = []
    for x in (r, j):
        if x["status"] != "completed":
            problems.append("the %s experiment ended %s" %
                            ("judged" if x["judged"] else "unjudged", x["status"]))
    if calls != expected:
        problems.append("the stub received %d judge calls for %d judgements: %s" %
                        (calls, expected, "%d sent again after a lost attempt (see the "
                         "evald log)" % (calls - expected) if calls > expected else "missing"))
    if j["judge_calls_reported"] != expected:
        problems.append("judge_quality.metrics.calls is %s, expected %d" %
                        (j["judge_calls_reported"], expected))
    if j["judgements_listed"] != expected:
        problems.append("%d judgements listed, expected %d" % (j["judgements_listed"], expected))
    bad = {k: n for k, n in j["judgements_by_status"].items() if k != "completed"}
    if bad:
        problems.append("judgements not completed: %s" % json.dumps(bad))
    pj = j["progress_judgements"] or {}
    if pj.get("failed") or pj.get("unjudged"):
        problems.append("progress.judgements %s" % json.dumps(pj))
    if (j["last_judgement_completed_at"] or 0) > j["completed_at"]:
        problems.append("the judged experiment completed at %d, before its last judgement "
                        "(completed at %d)" % (j["completed_at"],
                                               j["last_judgement_completed_at"]))
    if j["last_judge_request_at"] and j["last_judge_request_at"] + opts.judge_latency > \
            j["completed_at"]:
        problems.append("the judged experiment completed at %d, before its last judge call "
                        "(received at %d) could answer" %
                        (j["completed_at"], j["last_judge_request_at"]))
    for p in problems:
        print("J1 check failed: " + p, flush=True)

    if opts.json:
        with open(opts.json, "w") as fp:
            json.dump({"shape": {"cases": opts.cases, "repeats": opts.repeats,
                                 "orders": opts.orders, "concurrency": opts.concurrency,
                                 "workers": opts.workers, "latency_ms": opts.latency,
                                 "judge_latency_ms": opts.judge_latency},
                       "runs_only": r, "judged": j,
                       "judge_calls": calls, "mean_judge_latency_ms": mean_ms,
                       "judge_own_s": own_s, "factor": opts.factor, "bound_s": bound_s,
                       "ratio_to_runs_plus_judge": ratio, "met": met,
                       "problems": problems, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                 time.gmtime())}, fp, indent=2)
    if problems:
        return 1
    return 0 if opts.no_targets or met else 1


if __name__ == "__main__":
    sys.exit(main())
