#!/usr/bin/env python3
"""Sequential experiments: what the anytime rule saves against the fixed one.

S1  one experiment of --cases cases, 2 arms, --repeats repeats against evald-stub with a
    true effect of --effect on the pass rate (each control run passes with probability
    --base, each treatment run with --base + --effect, drawn from --seed and scripted at the
    stub run by run), run once with `stopping.rule` fixed and once with
    anytime (min_cases --min-cases), each on a fresh database and fresh evald and stub
    processes, loopback only. Prints for each: provider calls counted at the stub, the
    verdict, the stop, and the anytime calls as a share of the fixed ones (issue 27: the
    same verdict with at most 15 % of the calls).

Usage:
  bench/sequential.py --db-server postgresql://evald@127.0.0.1:54341/evald [--cases 1000]
"""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import experiment  # noqa: E402  (with_evald, wait_terminal, post_raw)


def outcomes(opts):
    """Per case, per arm, per repeat: passes or not, each run on its own (Bernoulli)."""
    rng = random.Random(opts.seed)
    p = (opts.base, opts.base + opts.effect)
    return [[[rng.random() < p[arm] for _ in range(opts.repeats)] for arm in range(2)]
            for _ in range(opts.cases)]


def script(opts, runs):
    """A rule per run: the r-th call of a case's arm answers its r-th outcome (a case's cells
    run one after another, repeat by repeat)."""
    usage = {"input_tokens": 12, "output_tokens": 1}
    rules = []
    for i, case in enumerate(runs, 1):
        for arm, tag in enumerate("AB"):
            for ok in case[arm]:
                rules.append({"when": {"prompt_contains": "%s [q%d]" % (tag, i)}, "times": 1,
                              "latency_ms": opts.latency, "reply": {"text": "yes" if ok else "no"},
                              "usage": usage})
    return {"rules": rules,
            "default": {"latency_ms": opts.latency, "reply": {"text": "no"}, "usage": usage},
            "models": [bench.MODEL]}


def dataset(opts):
    lines = [json.dumps({"id": "q%d" % i, "vars": {"k": "q%d" % i}, "expected": "yes"})
             for i in range(1, opts.cases + 1)]
    return ("\n".join(lines) + "\n").encode()


def one(opts, rule):
    def run(ev):
        st, _ = bench.call(ev.stub_base, "PUT", "/_stub/script", script(opts, outcomes(opts)))
        if st != 200:
            raise RuntimeError("the stub refused the script (%d)" % st)
        st, ds = experiment.post_raw(ev.base, "/v1/datasets?name=seq-%s" % rule, dataset(opts),
                                     "application/x-ndjson")
        if st not in (200, 201):
            raise RuntimeError("dataset upload answered %d: %s" % (st, ds))
        body = {"name": "sequential-" + rule, "dimension": "prompt",
                "model": {"model": bench.MODEL, "provider": "bench"},
                "control": {"label": "a", "prompt": "A [{{k}}] reply"},
                "treatments": [{"label": "b", "prompt": "B [{{k}}] reply please"}],
                "dataset_id": ds["dataset_id"],
                "evaluator": {"function_id": "eval::assert::exact",
                              "arguments": {"expected": "{{expected}}"}},
                "repeats": opts.repeats, "concurrency": opts.concurrency,
                "stopping": {"rule": rule, "min_cases": opts.min_cases, "seed": opts.seed}}
        st, x = bench.call(ev.base, "POST", "/v1/experiments", body)
        if st != 202:
            raise RuntimeError("experiment start answered %d: %s" % (st, x))
        doc = experiment.wait_terminal(ev.base, x["experiment_id"], 3600)
        st, stats = bench.call(ev.stub_base, "GET", "/_stub/stats")
        cmp0 = doc["comparisons"][0]
        return {"rule": rule, "status": doc["status"], "calls": stats["requests"],
                "verdict": cmp0["verdict"], "fixed_verdict": cmp0.get("fixed_verdict"),
                "sequential": cmp0.get("sequential"), "stopped": doc.get("stopped"),
                "spend_calls": doc["spend"]["calls"], "runs": doc["progress"]["total_runs"],
                "seconds": (doc["completed_at"] - doc["created_at"]) / 1000.0}
    return experiment.with_evald(opts, opts.workers, run)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--evald", default=os.path.join(bench.ROOT, "build", "evald"))
    ap.add_argument("--stub", default=os.path.join(bench.ROOT, "build", "evald-stub"))
    ap.add_argument("--db-server", default=os.environ.get("EVALD_BENCH_DATABASE_URL"))
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--base", type=float, default=0.5)
    ap.add_argument("--effect", type=float, default=0.3)
    ap.add_argument("--min-cases", type=int, default=10)
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--latency", type=int, default=0)
    ap.add_argument("--evald-log-level", default="warn")
    ap.add_argument("--json", help="write the measurements here")
    ap.add_argument("--no-targets", action="store_true",
                    help="exit 0 whatever the share and the verdicts (the smoke run's size is "
                    "too small to judge them)")
    opts = ap.parse_args()
    if not opts.db_server:
        ap.error("--db-server (or EVALD_BENCH_DATABASE_URL) is required")
    out = {}
    for rule in ("fixed", "anytime"):
        r = out[rule] = one(opts, rule)
        seq = r["sequential"] or {}
        print("S1 %s: %d cases x 2 arms x %d repeats, effect +%.2f: %s, verdict %s "
              "(sequential %s decided at n %s, final n %s, [%.3f, %.3f]), %d calls at the "
              "stub (spend %d), %.1f s, stopped %s" %
              (rule, opts.cases, opts.repeats, opts.effect, r["status"], r["verdict"],
               seq.get("verdict"), seq.get("decided_at"), seq.get("n"), seq.get("low"),
               seq.get("high"), r["calls"],
               r["spend_calls"], r["seconds"], json.dumps(r["stopped"])), flush=True)
    f, a = out["fixed"], out["anytime"]
    share = a["calls"] / f["calls"] if f["calls"] else float("nan")
    same = a["verdict"] == f["verdict"]
    print("S1 anytime: %.1f %% of the fixed rule's calls (target <= 15 %%), verdict %s %s" %
          (100.0 * share, a["verdict"], "= fixed" if same else "!= fixed " + f["verdict"]),
          flush=True)
    if opts.json:
        with open(opts.json, "w") as fp:
            json.dump(out, fp, indent=2)
    if any(r["status"] != "completed" for r in out.values()):
        return 1
    return 0 if opts.no_targets or (same and share <= 0.15) else 1


if __name__ == "__main__":
    sys.exit(main())
