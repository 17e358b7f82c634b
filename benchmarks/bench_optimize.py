"""Speed of `sweep optimize`: one search over 8 max batches x 6 token budgets.

Runs the real command (`sweep optimize ... --json` in a subprocess) on Llama-3-8B, H100 SXM,
the derated profile, the sharegpt-8k workload, TTFT <= 2 s and TPOT <= 100 ms for 90 % of
requests, 1,000 requests per simulation, with 1 and with 2 worker processes, and prints
the wall time, plus the candidates simulated and the simulations they used. With 1 worker
it also prints the CPU time of the whole search (user + system of the command, from
getrusage of the children); worker processes belong to multiprocessing's forkserver, so
that figure is not available for them (the work is the same). Target (issue 7): under 60 s
on 2 cores. On a shared machine the wall time is longer than the CPU time / workers; the
CPU time is the steadier figure.

Run: python benchmarks/bench_optimize.py [--workers 1,2] [--requests N] [--repeats R]
The best of R runs is reported.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

from machine_info import describe_machine  # the script's folder is on sys.path

BATCHES = "8,16,32,64,96,128,192,256"
BUDGETS = "256,512,1024,2048,4096,8192"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(workers: int, requests: int) -> tuple[float, float, dict]:
    command = [sys.executable, "-m", "rooftui.sweeps", "optimize", "--profile", "derated",
               "--workload", "sharegpt-8k", "--slo-ttft", "2", "--slo-tpot", "0.1",
               "--batches", BATCHES, "--budgets", BUDGETS, "--requests", str(requests),
               "--workers", str(workers), "--json"]
    cpu, began = children_cpu(), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return time.perf_counter() - began, children_cpu() - cpu, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    print(f"machine: {describe_machine()}")
    print(f"command: python {' '.join(sys.argv)}")
    print(f"search: 8 max batches ({BATCHES}) x 6 budgets ({BUDGETS}), {args.requests:,} "
          "requests per simulation")
    for workers in (int(w) for w in args.workers.split(",")):
        runs = [run(workers, args.requests) for _ in range(args.repeats)]
        wall, cpu, report = min(runs, key=lambda r: r[0])
        simulated = sum(c["status"] == "sustained" for c in report["candidates"])
        best = report["best"]
        cpu_text = f", CPU {cpu:6.1f} s" if workers == 1 else ""
        print(f"workers {workers}: wall {wall:6.1f} s{cpu_text} · "
              f"{simulated} of {len(report['candidates'])} candidates simulated, "
              f"{report['simulations']} simulations · best B {best['max_batch']}, "
              f"T {best['token_budget']}: {best['rate']:.3g} req/s")


if __name__ == "__main__":
    main()
