"""Speed of `sweep optimize`: one search over 8 max batches x 6 token budgets.

Runs the real command (`sweep optimize ... --json` in a subprocess) on Llama-3-8B, H100 SXM,
the derated profile, the sharegpt-8k workload, TTFT <= 2 s and TPOT <= 100 ms for 90 % of
requests, 1,000 requests per simulation, with 1 and with 2 worker processes, and prints
the wall time and the CPU time of the whole search (user + system of the command and of
the workers it forked, from getrusage of the children), plus the candidates simulated and
the simulations they used. Targets (issue 19): >= 3x faster than the search at afe7641,
and >= 1.6x faster with 2 workers than with 1. On a shared machine the wall time is longer
than the CPU time / workers; the CPU time is the steadier figure.

With `--split` the same search also runs in this process with 2 workers, each candidate
timed in its worker: the CPU seconds and candidates of each worker show whether the work
is split evenly (what 2 free CPUs would turn into a 2x shorter search), whatever the load.

With `--before REV` the same command also runs on the package as it was at REV (from
`git archive`, put first on PYTHONPATH), alternately with the checkout's, so that both
see the same load.

Run: python benchmarks/bench_optimize.py [--workers 1,2] [--requests N] [--repeats R]
     [--before afe7641] [--split]
The best of R runs is reported.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import time

from code_at import package_at
from machine_info import describe_machine  # the script's folder is on sys.path

BATCHES = "8,16,32,64,96,128,192,256"
BUDGETS = "256,512,1024,2048,4096,8192"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(workers: int, requests: int, pythonpath: str | None) -> tuple[float, float, dict]:
    command = [sys.executable, "-m", "rooftui.sweeps", "optimize", "--profile", "derated",
               "--workload", "sharegpt-8k", "--slo-ttft", "2", "--slo-tpot", "0.1",
               "--batches", BATCHES, "--budgets", BUDGETS, "--requests", str(requests),
               "--workers", str(workers), "--json"]
    env = dict(os.environ) | ({"PYTHONPATH": pythonpath} if pythonpath else {})
    cpu, began = children_cpu(), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    return time.perf_counter() - began, children_cpu() - cpu, json.loads(done.stdout)


def timed_candidate(pair, hint):
    """`_candidate_in_worker`, with the worker's pid and the candidate's CPU seconds."""
    began = time.process_time()
    candidate = UNTIMED(pair, hint)
    candidate.worker_cpu = (os.getpid(), time.process_time() - began)
    return candidate


def worker_split(requests: int) -> None:
    """The search with 2 forked workers in this process, each candidate's CPU seconds taken
    in its worker (forked workers run the module as patched here)."""
    global UNTIMED
    from rooftui.core.assumptions import load_profile
    from rooftui.core.hardware import load_gpu
    from rooftui.core.model import load_model
    from rooftui.core.point import PointConfig
    from rooftui.core.workloads import load_workload
    from rooftui.sweeps import optimize as search

    config = PointConfig(gpu=load_gpu("h100-sxm"), model=load_model("llama-3-8b"),
                         assumptions=load_profile("derated"))
    problem = search.Problem(config=config, workload=load_workload("sharegpt-8k"),
                             requests=requests)
    UNTIMED, search._candidate_in_worker = search._candidate_in_worker, timed_candidate
    try:
        result = search.optimize(problem, search.Objective(ttft_s=2.0, tpot_s=0.1),
                                 [int(b) for b in BATCHES.split(",")],
                                 [int(b) for b in BUDGETS.split(",")], workers=2)
    finally:
        search._candidate_in_worker = UNTIMED
    per_worker: dict[int, list[float]] = {}
    for candidate in result.candidates:
        pid, cpu = candidate.worker_cpu
        per_worker.setdefault(pid, []).append(cpu)
    for number, cpus in enumerate(per_worker.values(), 1):
        print(f"split, worker {number}: {len(cpus)} candidates, CPU {sum(cpus):5.2f} s, the "
              f"longest candidate {max(cpus):4.2f} s · load {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--before", metavar="REV", help="also run the search at REV")
    parser.add_argument("--split", action="store_true",
                        help="also show each of 2 workers' CPU seconds")
    args = parser.parse_args()
    print(f"machine: {describe_machine()}")
    print(f"command: python {' '.join(sys.argv)}")
    print(f"search: 8 max batches ({BATCHES}) x 6 budgets ({BUDGETS}), {args.requests:,} "
          "requests per simulation")
    with package_at(args.before) if args.before else contextlib.nullcontext() as before:
        versions = {"now": None} | ({f"at {args.before}": before} if args.before else {})
        for workers in (int(w) for w in args.workers.split(",")):
            runs: dict[str, list] = {name: [] for name in versions}
            for _ in range(args.repeats):
                for name, pythonpath in versions.items():  # alternately: the same load
                    runs[name].append(run(workers, args.requests, pythonpath))
            for name, timings in runs.items():
                wall, cpu, report = min(timings, key=lambda r: r[0])
                simulated = sum(c["status"] == "sustained" for c in report["candidates"])
                best = report["best"]
                print(f"{name:>12}, workers {workers}: wall {wall:6.1f} s, CPU {cpu:6.1f} s · "
                      f"{simulated} of {len(report['candidates'])} candidates simulated, "
                      f"{report['simulations']} simulations · best B {best['max_batch']}, "
                      f"T {best['token_budget']}: {best['rate']:.3g} req/s · load "
                      f"{os.getloadavg()[0]:.1f}")
    if args.split:
        worker_split(args.requests)


if __name__ == "__main__":
    main()
