"""Speed of the serving simulator: simulated requests per second of wall time, one core.

Runs `rooftui.core.scheduler.simulate` on the sharegpt-8k preset (Llama-3-8B on H100 SXM,
ideal profile, max batch 128, closed arrivals so the server is saturated) for each
policy and prints requests/s and steps/s per second of CPU time of this process (the
wall time too: on a busy machine it is longer). The time covers `simulate` (building the
step costs from the step model, the run) and splitting its step records into columns
(which `simulate` leaves until they are read), not drawing the requests; `summarize` is
timed separately. Target (issue 6): >= 20,000 simulated requests/s for
continuous batching with >= 20,000 requests.

With `--before REV` the same benchmark runs, in fresh processes, on the package as it was
at REV (from `git archive`, first on PYTHONPATH) and on the checkout, alternately for
`--rounds` rounds, so that both see the same load (issue 19's target: >= 40,000 chunked
requests per CPU second).

Run: python benchmarks/bench_simulator.py [--requests N] [--repeats R]
     [--policies continuous,chunked,static] [--arrival closed] [--token-budget T]
     [--before afe7641 [--rounds 2]]
The best of R runs is reported (the machine may be shared; the minimum is the least noisy).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from code_at import package_at
from machine_info import describe_machine  # the script's folder is on sys.path

from rooftui.core.arrivals import parse_arrivals
from rooftui.core.hardware import load_gpu
from rooftui.core.model import load_model
from rooftui.core.point import PointConfig
from rooftui.core.scheduler import SchedulerConfig, simulate, summarize
from rooftui.core.workloads import load_workload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--policies", default="continuous,chunked,static")
    parser.add_argument("--arrival", default="closed")
    parser.add_argument("--token-budget", type=int, default=512)
    parser.add_argument("--max-batch", type=int, default=128)
    parser.add_argument("--workload", default="sharegpt-8k")
    parser.add_argument("--before", metavar="REV", help="also time the simulator at REV")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if args.before:
        side_by_side(args)
        return

    config = PointConfig(gpu=load_gpu("h100-sxm"), model=load_model("llama-3-8b"))
    inputs = config.step_inputs()
    requests = load_workload(args.workload).requests(args.requests,
                                                     parse_arrivals(args.arrival), seed=0)
    print(f"machine: {describe_machine()}")
    print(f"command: python {' '.join(sys.argv)}")
    print(f"workload {args.workload}, {args.requests:,} requests, arrivals {args.arrival}, "
          f"max batch {args.max_batch}, Llama-3-8B on H100 SXM (ideal); best of {args.repeats}")
    for policy in args.policies.split(","):
        scheduler = SchedulerConfig(
            policy=policy, max_batch=args.max_batch,
            token_budget=args.token_budget if policy == "chunked" else None)
        best_wall = best_cpu = best_summary = float("inf")
        for _ in range(args.repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            simulation = simulate(inputs, config.assumptions, scheduler, requests)
            simulation.steps["duration_s"]  # the records, as they were before they were lazy
            best_wall = min(best_wall, time.perf_counter() - wall)
            best_cpu = min(best_cpu, time.process_time() - cpu)
            middle = time.perf_counter()
            summary = summarize(simulation)
            best_summary = min(best_summary, time.perf_counter() - middle)
        label = policy + (f" (budget {args.token_budget})" if policy == "chunked" else "")
        print(f"  {label:<22} {args.requests / best_cpu:>10,.0f} requests/s "
              f"{summary['steps'] / best_cpu:>12,.0f} steps/s per CPU second "
              f"({best_cpu:.3f} s CPU, {best_wall:.3f} s wall, {summary['steps']:,} steps; "
              f"summarize {best_summary * 1e3:.0f} ms)")


def side_by_side(args) -> None:
    """This benchmark at `args.before` and now, alternately, each in a fresh process."""
    argv = [sys.executable, __file__, "--requests", str(args.requests), "--repeats",
            str(args.repeats), "--policies", args.policies, "--arrival", args.arrival,
            "--token-budget", str(args.token_budget), "--max-batch", str(args.max_batch),
            "--workload", args.workload]
    print(f"machine: {describe_machine()}")
    print(f"command: python {' '.join(sys.argv)}")
    with package_at(args.before) as before:
        for _ in range(args.rounds):
            for name, pythonpath in ((f"at {args.before}", before), ("now", None)):
                env = dict(os.environ) | ({"PYTHONPATH": pythonpath} if pythonpath else {})
                lines = subprocess.run(argv, capture_output=True, text=True, check=True,
                                       env=env).stdout.splitlines()
                print(f"{name} (load {os.getloadavg()[0]:.1f}):")
                print("\n".join(line for line in lines if line.startswith("  ")))


if __name__ == "__main__":
    main()
