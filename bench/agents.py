#!/usr/bin/env python3
"""Simulated users: the makespan of a multi-turn experiment against its ideal.

A1  one experiment of --cases cases, 2 arms, --repeats repeats against evald-stub, with a
    simulated user (shared/spec/agent-cases.md, "Simulated users") on its own model
    (`user-model`, in the providers file beside `stub-model`) and `max_turns` --turns,
    on a fresh database and fresh evald and stub processes, loopback only, --concurrency
    cases at once, EVALD_WORKERS --workers. Every call, the agent's and the simulator's,
    answers after --latency ms: the agent with `OK`, the simulator with a reply that never
    holds the stop token, so every run ends at max_turns with exactly --turns agent calls
    and --turns - 1 simulator calls (the simulator is not asked after the last answer).
    The calls are counted three ways, the experiment's `spend.calls`, the stub's
    /_stub/stats (its rule on the simulator's model against the rest) and the runs'
    benchmarks (`turns`, `simulator_calls`), and must all equal

        cases x 2 arms x repeats x (2 x turns - 1)

    The wall time runs from just before the start POST to the experiment's completed_at
    (the same clock: one machine); the ideal is what `concurrency` slots of sequential
    calls need, and the bound:

        wall <= --factor x (calls x latency / concurrency)

    Beside it, the runs' own wall time (their benchmarks' wall_time_ms, from their first
    call to their last answer) and rate-limiter wait, so that a miss says whether the time
    went inside the runs (the calls, the harness, the limiter) or between them (claims,
    writes, the dispatch of the next case).

Exits 1 when a check fails (the experiment not completed, a run not passed, a count that
disagrees) or, without --no-targets, when the bound is missed.

Usage:
  bench/agents.py --db-server postgresql://evald@127.0.0.1:54363/evald [--cases 200]
  bench/agents.py --db-server … --cases 20 --concurrency 4 --no-targets   # the smoke size
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import experiment  # noqa: E402  (wait_terminal, post_raw)
import judges  # noqa: E402  (listing)

USER_MODEL = "user-model"
USAGE = {"input_tokens": 12, "output_tokens": 1}
USER_USAGE = {"input_tokens": 20, "output_tokens": 6}
STOP = "[[DONE]]"


def script(opts):
    """Every call of the simulator's model answers a follow-up without the stop token; every
    other call (the agent's turns) answers OK; all after --latency ms."""
    return {"rules": [{"when": {"model": USER_MODEL}, "latency_ms": opts.latency,
                       "reply": {"text": "Thanks. Could you say that once more?"},
                       "usage": USER_USAGE}],
            "default": {"latency_ms": opts.latency, "reply": {"text": "OK"}, "usage": USAGE},
            "models": [bench.MODEL, USER_MODEL]}


def dataset(opts):
    lines = [json.dumps({"id": "q%d" % i, "vars": {"question": "question %d" % i,
                                                    "name": "user %d" % i},
                         "expected": "OK"}) for i in range(1, opts.cases + 1)]
    return ("\n".join(lines) + "\n").encode()


def request(opts, ds_id):
    return {"name": "agents-simulated", "dimension": "prompt",
            "model": {"model": bench.MODEL, "provider": "bench"},
            "control": {"label": "brief", "prompt": "{{question}} Answer briefly."},
            "treatments": [{"label": "detailed", "prompt": "{{question}} Answer in detail."}],
            "simulator": {"model": {"model": USER_MODEL, "provider": "bench"},
                          "instructions": "You are {{name}}. Ask until you are satisfied.",
                          "max_turns": opts.turns, "stop": STOP},
            "dataset_id": ds_id,
            "evaluator": {"function_id": "eval::assert::exact",
                          "arguments": {"expected": "{{expected}}"}},
            "repeats": opts.repeats, "concurrency": opts.concurrency}


def with_evald(opts, fn):
    """A fresh database, stub (scripted by script()) and evald with the simulator's model in
    its providers file, all stopped and dropped afterwards (judges.with_evald)."""
    return judges.with_evald(opts, fn, USER_MODEL, "evald-bench-a-")


def measure(opts):
    def run(ev):
        st, x = bench.call(ev.stub_base, "PUT", "/_stub/script", script(opts))
        if st != 200:
            raise RuntimeError("the stub refused the script (%d): %s" % (st, x))
        st, ds = experiment.post_raw(ev.base, "/v1/datasets?name=agents", dataset(opts),
                                     "application/x-ndjson")
        if st not in (200, 201):
            raise RuntimeError("dataset upload answered %d: %s" % (st, ds))
        body = request(opts, ds["dataset_id"])
        st, _ = bench.call(ev.stub_base, "POST", "/_stub/reset")
        t0 = bench.now_ms()
        st, x = bench.call(ev.base, "POST", "/v1/experiments", body)
        if st != 202:
            raise RuntimeError("experiment start answered %d: %s" % (st, x))
        xid = x["experiment_id"]
        doc = experiment.wait_terminal(ev.base, xid, 3600)
        st, stats = bench.call(ev.stub_base, "GET", "/_stub/stats")
        sim_hits = sum(r.get("hits", 0) for r in stats.get("rules") or [] if r.get("index") == 0)
        model_calls = stats["requests"] - (stats.get("by_api") or {}).get("models", 0)
        runs = judges.listing(ev.base, xid, "runs")
        out = {"experiment_id": xid, "status": doc["status"], "t0_ms": t0,
               "created_at": doc["created_at"], "completed_at": doc.get("completed_at"),
               "wall_s": ((doc.get("completed_at") or 0) - t0) / 1000.0,
               "makespan_s": ((doc.get("completed_at") or 0) - doc["created_at"]) / 1000.0,
               "progress": doc.get("progress"), "spend": doc.get("spend"),
               "stub_requests": stats["requests"], "stub_model_calls": model_calls,
               "stub_simulator_calls": sim_hits,
               "stub_agent_calls": model_calls - sim_hits,
               "stub_max_in_flight": stats.get("max_in_flight"),
               "stub_overlaps": stats.get("overlaps"),
               "runs_listed": len(runs), "runs_by_status": {}, "runs_passed": 0,
               "turns": 0, "simulator_calls": 0, "run_wall_ms": [], "limiter_wait_ms": 0}
        for r in runs:
            k = str(r.get("status"))
            out["runs_by_status"][k] = out["runs_by_status"].get(k, 0) + 1
            ev_ = r.get("evaluation") or {}
            if r.get("passed") is True or ev_.get("passed") is True:
                out["runs_passed"] += 1
            b = r.get("benchmark") or {}
            out["turns"] += int(b.get("turns") or 0)
            out["simulator_calls"] += int(b.get("simulator_calls") or 0)
            out["limiter_wait_ms"] += int(b.get("limiter_wait_ms") or 0)
            if isinstance(b.get("wall_time_ms"), (int, float)):
                out["run_wall_ms"].append(b["wall_time_ms"])
        return out
    return with_evald(opts, run)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--evald", default=os.path.join(bench.ROOT, "build", "evald"))
    ap.add_argument("--stub", default=os.path.join(bench.ROOT, "build", "evald-stub"))
    ap.add_argument("--db-server", default=os.environ.get("EVALD_BENCH_DATABASE_URL"))
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--turns", type=int, default=3,
                    help="the simulator's max_turns: agent calls per run (default 3)")
    ap.add_argument("--concurrency", type=int, default=20,
                    help="cases at once (the experiment's concurrency), default 20")
    ap.add_argument("--workers", type=int, default=None,
                    help="EVALD_WORKERS (default: twice --concurrency, as bench/judges.py)")
    ap.add_argument("--latency", type=int, default=200,
                    help="ms of every call, the agent's and the simulator's")
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
    if not 1 <= opts.turns <= 20:
        ap.error("--turns must be between 1 and 20 (the simulator's max_turns)")
    if opts.workers is None:
        opts.workers = 2 * opts.concurrency
    runs = opts.cases * 2 * opts.repeats
    per_run = 2 * opts.turns - 1
    expected = runs * per_run
    exp_agent, exp_sim = runs * opts.turns, runs * (opts.turns - 1)
    shape = ("%d cases x 2 arms x %d repeats, max_turns %d (%d agent + %d simulator calls a "
             "run), every call %d ms, concurrency %d, EVALD_WORKERS %d" %
             (opts.cases, opts.repeats, opts.turns, opts.turns, opts.turns - 1, opts.latency,
              opts.concurrency, opts.workers))

    m = measure(opts)
    spend_calls = (m["spend"] or {}).get("calls")
    ideal_s = expected * opts.latency / 1000.0 / opts.concurrency
    ratio = m["wall_s"] / ideal_s if ideal_s > 0 else float("nan")
    met = ratio <= opts.factor
    walls = sorted(m["run_wall_ms"])
    mean_run = sum(walls) / len(walls) if walls else float("nan")
    ideal_run = per_run * opts.latency
    busy_s = sum(walls) / 1000.0 / opts.concurrency
    print("A1 simulated users: %s: %s, %d runs (%s), %d passed" %
          (shape, m["status"], m["runs_listed"], json.dumps(m["runs_by_status"]),
           m["runs_passed"]), flush=True)
    print("A1 calls: expected %d (%d runs x %d), spend.calls %s, at the stub %d (%d agent, "
          "%d simulator; expected %d and %d), in the runs' benchmarks %d turns + %d "
          "simulator_calls; peak %s in flight at the stub" %
          (expected, runs, per_run, spend_calls, m["stub_model_calls"], m["stub_agent_calls"],
           m["stub_simulator_calls"], exp_agent, exp_sim, m["turns"], m["simulator_calls"],
           m["stub_max_in_flight"]), flush=True)
    print("A1 runs: wall_time_ms mean %.0f (ideal %d), median %s, max %s; limiter wait %d ms "
          "in all; the runs' own time / concurrency %.2f s" %
          (mean_run, ideal_run, walls[len(walls) // 2] if walls else None,
           walls[-1] if walls else None, m["limiter_wait_ms"], busy_s), flush=True)
    print("A1 bound: wall %.2f s (start POST to completed_at; created_at to completed_at "
          "%.2f s), ideal %d calls x %d ms / %d = %.2f s: %.3f x the ideal, bound %.1f x: %s" %
          (m["wall_s"], m["makespan_s"], expected, opts.latency, opts.concurrency, ideal_s,
           ratio, opts.factor, "met" if met else "MISSED"), flush=True)

    problems = []
    if m["status"] != "completed":
        problems.append("the experiment ended %s" % m["status"])
    if m["runs_listed"] != runs or m["runs_by_status"].get("completed") != runs:
        problems.append("runs %s, expected %d completed" % (json.dumps(m["runs_by_status"]),
                                                            runs))
    p = m["progress"] or {}
    if p.get("passed_runs", m["runs_passed"]) != runs:
        problems.append("%s of %d runs passed" % (p.get("passed_runs", m["runs_passed"]), runs))
    if spend_calls != expected:
        problems.append("spend.calls is %s, expected %d" % (spend_calls, expected))
    if m["stub_model_calls"] != expected:
        problems.append("the stub received %d model calls, expected %d" %
                        (m["stub_model_calls"], expected))
    if m["stub_simulator_calls"] != exp_sim or m["stub_agent_calls"] != exp_agent:
        problems.append("the stub received %d agent and %d simulator calls, expected %d and %d"
                        % (m["stub_agent_calls"], m["stub_simulator_calls"], exp_agent,
                           exp_sim))
    if m["turns"] != exp_agent or m["simulator_calls"] != exp_sim:
        problems.append("the runs' benchmarks count %d turns and %d simulator calls, expected "
                        "%d and %d" % (m["turns"], m["simulator_calls"], exp_agent, exp_sim))
    if m["stub_overlaps"]:
        problems.append("%d calls arrived while another of their run was in flight" %
                        m["stub_overlaps"])
    for msg in problems:
        print("A1 check failed: " + msg, flush=True)

    if opts.json:
        m.pop("run_wall_ms", None)
        with open(opts.json, "w") as fp:
            json.dump({"shape": {"cases": opts.cases, "repeats": opts.repeats,
                                 "max_turns": opts.turns, "concurrency": opts.concurrency,
                                 "workers": opts.workers, "latency_ms": opts.latency},
                       "measured": m, "expected_calls": expected, "ideal_s": ideal_s,
                       "run_wall_ms_mean": mean_run, "ratio": ratio,
                       "factor": opts.factor, "met": met, "problems": problems,
                       "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, fp,
                      indent=2)
    if problems:
        return 1
    return 0 if opts.no_targets or met else 1


if __name__ == "__main__":
    sys.exit(main())
