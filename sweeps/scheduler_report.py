"""The tables of docs/scheduler.md: does the exponential-length result survive real traffic?

    python -m rooftui.sweeps.scheduler_report [--traces DIR] [--requests N] > tables.md

prints, as markdown:
1. static-batch occupancy E[L] / E[max of B] against 1/H_B for exponential, capped,
   bimodal, log-normal and the four shipped trace presets (and, with --traces, the
   exact order statistics of the raw traces);
2. the simulator's static-batching occupancy beside the analytic one (the two tiers
   checking each other);
3. what the occupancy loss costs in throughput: static against continuous batching on
   each preset at saturation;
4. the inter-token stall one long prompt causes, whole against chunked (the seed's
   chunked-prefill numbers);
5. with --traces: correlated arrivals, trace replay against Poisson at the same rate
   (the same requests in the same order, only the times differ) and Gamma at the
   trace's gap CV, for continuous and chunked batching, at the trace's own pace and
   compressed.
Every simulation: Llama-3-8B on H100 SXM, the `derated` profile (mfu 0.5, mbu 0.8),
seed 0. Deterministic: rerunning prints the same tables.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from rooftui.core.arrivals import Arrivals, parse_arrivals
from rooftui.core.assumptions import load_profile
from rooftui.core.closed_forms import exponential_static_occupancy
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.lengths import parse_distribution
from rooftui.core.model import load_model
from rooftui.core.occupancy import static_occupancy
from rooftui.core.point import PointConfig
from rooftui.core.scheduler import SchedulerConfig, StepCosts, simulate, summarize
from rooftui.core.workloads import Requests, Workload, load_workload
from rooftui.sweeps.derive_workloads import PRESETS

BATCHES = (4, 8, 16, 32, 64, 128, 256)
PARAMETRIC = (
    ("exponential", "exp:mean=200"),
    ("capped exponential, cap = 2 x mean", "exp:mean=200,cap=400"),
    ("capped exponential, ShareGPT's mean and cap", "exp:mean=439,cap=1024"),
    ("bimodal, two exponentials", "bimodal:p=0.6,a=90,b=420"),
    ("bimodal, two narrow modes",
     "bimodal:p=0.6,a=(lognormal:median=90,sigma=0.35),b=(lognormal:median=420,sigma=0.15)"),
    ("log-normal, sigma = 1", "lognormal:median=150,sigma=1"),
)
ARRIVAL_TRACES = ("azure-conv-2023", "azure-code-2023")
SPEEDS = (1, 2, 3)
SEED = 0


def configuration() -> PointConfig:
    return PointConfig(gpu=load_gpu("h100-sxm"), model=load_model("llama-3-8b"),
                       assumptions=load_profile("derated"))


def _row(cells) -> str:
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def _table(header, rows) -> list[str]:
    return [_row(header), _row(["---"] * len(header)), *(_row(row) for row in rows)]


def output_laws(traces: Path | None) -> list[tuple[str, object]]:
    laws = [(f"{label} (`{spec}`)", parse_distribution(spec)) for label, spec in PARAMETRIC]
    for name in PRESETS:
        laws.append((f"{name} preset", load_workload(name).output_tokens))
        if traces is not None:
            laws.append((f"{name} trace, exact",
                         parse_distribution(f"empirical:{traces / f'{name}.csv'}")))
    return laws


def occupancy_section(traces: Path | None) -> list[str]:
    rows = [["1/H_B (any exponential)",
             *(f"{float(exponential_static_occupancy(b)):.3f}" for b in BATCHES)]]
    rows += [[label, *(f"{static_occupancy(law, b):.3f}" for b in BATCHES)]
             for label, law in output_laws(traces)]
    return ["### Static-batch occupancy E[L] / E[max of B] (analytic, exact)", "",
            *_table(["output lengths", *(f"B = {b}" for b in BATCHES)], rows)]


def _ratio_standard_error(useful: np.ndarray, longest: np.ndarray, batch: int) -> float:
    """Standard error of sum(useful) / (B sum(longest)) over independent batches (delta
    method for a ratio of means)."""
    ratio = useful.sum() / (batch * longest.sum())
    residual = useful - ratio * batch * longest
    return float(residual.std(ddof=1) / (batch * longest.mean() * np.sqrt(useful.size)))


def simulated_section(traces: Path | None, batches_per_point: int) -> list[str]:
    """Static batching simulated with 16-token prompts (so the KV cache never shortens a
    batch) beside the analytic occupancy, with the sampling error of the estimate."""
    config = configuration()
    inputs, assumptions = config.step_inputs(), config.assumptions
    costs = StepCosts(inputs, assumptions, max(BATCHES))
    rows = []
    for label, law in output_laws(traces):
        cells = [label]
        for batch in (4, 32, 128):
            load = Workload("check", parse_distribution("fixed:16", "input_tokens"), law)
            requests = load.requests(batch * batches_per_point, parse_arrivals("closed"), SEED)
            simulation = simulate(inputs, assumptions,
                                  SchedulerConfig(policy="static", max_batch=batch),
                                  requests, costs)
            sizes = simulation.steps["prefill_chunks"]
            if not np.all(sizes[sizes > 0] == batch):
                raise SpecError(f"{label}: the KV cache shortened a static batch of {batch}")
            outputs = requests.output_tokens.reshape(-1, batch)
            error = _ratio_standard_error(outputs.sum(axis=1), outputs.max(axis=1), batch)
            simulated = summarize(simulation)["occupancy"]
            analytic = static_occupancy(law, batch)
            difference = 100 * (simulated / analytic - 1)
            cells.append(f"{simulated:.3f} ± {error:.3f} ({difference:+.1f} %)")
        rows.append(cells)
    return [f"### Simulated static batching ({batches_per_point:,} batches per cell, closed "
            "arrivals): occupancy ± one standard error, and its difference from the "
            "analytic value", "",
            *_table(["output lengths", "B = 4", "B = 32", "B = 128"], rows)]


def throughput_section(requests_count: int) -> list[str]:
    config = configuration()
    inputs, assumptions = config.step_inputs(), config.assumptions
    rows = []
    for name in PRESETS:
        requests = load_workload(name).requests(requests_count, parse_arrivals("closed"), SEED)
        cells = [name]
        for batch in (32, 128):
            results = {policy: summarize(simulate(
                inputs, assumptions, SchedulerConfig(policy=policy, max_batch=batch), requests))
                for policy in ("static", "continuous")}
            static, continuous = results["static"], results["continuous"]
            static_rate = static["throughput_tokens_per_s"]
            continuous_rate = continuous["throughput_tokens_per_s"]
            cells += [f"{static['occupancy']:.2f} / {continuous['occupancy']:.2f}",
                      f"{static_rate:,.0f} / {continuous_rate:,.0f}",
                      f"{static_rate / continuous_rate:.2f}"]
        rows.append(cells)
    header = ["workload"]
    for batch in (32, 128):
        header += [f"B = {batch}: occupancy static / continuous",
                   "output tok/s static / continuous", "ratio"]
    return [f"### Static against continuous batching at saturation ({requests_count:,} "
            "requests, closed arrivals, KV admission by reservation)", "",
            *_table(header, rows)]


def _statistic(summary: dict, key: str, quantile: str) -> str:
    value = summary[key][quantile]
    return f"{value * 1e3:,.0f} ms" if value < 1 else f"{value:,.1f} s"


def arrivals_section(traces: Path) -> list[str]:
    config = configuration()
    inputs, assumptions = config.step_inputs(), config.assumptions
    rows = []
    for name in ARRIVAL_TRACES:
        trace = load_workload(str(traces / f"{name}.csv"))
        count = trace.rows["arrival_s"].size
        for speed in SPEEDS:
            replay = trace.requests(count, parse_arrivals(f"trace:speed={speed}"), SEED)
            rate = (count - 1) / replay.arrival_s[-1]
            gaps = np.diff(replay.arrival_s)
            processes = {
                "trace replay": replay.arrival_s,
                "Poisson": Arrivals("poisson", rate=rate).times(np.random.default_rng(SEED),
                                                               count),
                f"Gamma, CV {gaps.std() / gaps.mean():.1f}": Arrivals(
                    "gamma", rate=rate, cv=gaps.std() / gaps.mean()).times(
                    np.random.default_rng(SEED), count),
            }
            for policy in ("continuous", "chunked"):
                for label, times in processes.items():
                    requests = Requests(times, replay.input_tokens, replay.output_tokens)
                    summary = summarize(simulate(inputs, assumptions,
                                                 SchedulerConfig(policy=policy), requests))
                    rows.append([f"{name} x{speed} ({rate:.1f} req/s)", policy, label,
                                 _statistic(summary, "ttft_s", "p50"),
                                 _statistic(summary, "ttft_s", "p99"),
                                 _statistic(summary, "tpot_s", "p50"),
                                 _statistic(summary, "tpot_s", "p99"),
                                 _statistic(summary, "itl_s", "p99"),
                                 f"{summary['mean_batch']:.1f}"])
    header = ["trace, pace", "policy", "arrivals", "TTFT p50", "TTFT p99", "TPOT p50",
              "TPOT p99", "ITL p99", "mean batch"]
    return ["### Correlated arrivals: the same requests, replayed or re-timed at the same "
            "rate (max batch 128, chunked budget 512 tokens)", "", *_table(header, rows)]


def stall_section() -> list[str]:
    """The seed's chunked-prefill numbers, simulated: 32 users decode (512-token prompts,
    seed's reference model, mfu 0.5, mbu 0.8, full-square attention); one prompt of P
    tokens arrives; the worst gap between two tokens of a decoding user."""
    config = PointConfig(gpu=load_gpu("h100-sxm"), model=load_model("reference-mha-6.4b"),
                         assumptions=load_profile("derated").with_overrides(
                             attention_flops="full"))
    inputs, assumptions = config.step_inputs(), config.assumptions
    users, prompts, chunks = 32, (512, 8192, 32768), (256, 512, 2048)
    rows = []
    for prompt in prompts:
        requests = Requests(np.array([0.0] * users + [0.5]),
                            np.array([512] * users + [prompt]), np.array([200] * users + [2]))
        cells = [f"{prompt:,}"]
        for budget in (None, *chunks):
            policy = "continuous" if budget is None else "chunked"
            steps = simulate(inputs, assumptions, SchedulerConfig(
                policy=policy, max_batch=users + 1,
                token_budget=None if budget is None else budget + users), requests).steps
            decoding = steps["decode_tokens"] == users
            cells.append(f"{steps['duration_s'][decoding].max() * 1e3:,.0f} ms")
        typical = np.median(steps["duration_s"][decoding & (steps["prefill_tokens"] == 0)])
        rows.append(cells)
    return ["### The inter-token stall of one long prompt: the worst gap of 32 decoding users "
            f"(a plain decode step is {typical * 1e3:.1f} ms; reference model, derated, "
            "full-square attention)", "",
            *_table(["prompt tokens", "continuous (whole prompt)",
                     *(f"chunked, {c} prefill tokens per step" for c in chunks)], rows)]


def report(traces: Path | None, batches_per_point: int, requests_count: int) -> str:
    sections = [occupancy_section(traces), simulated_section(traces, batches_per_point),
                throughput_section(requests_count), stall_section()]
    if traces is not None:
        sections.append(arrivals_section(traces))
    command = "python -m rooftui.sweeps.scheduler_report" + (
        " --traces TRACES_DIR" if traces is not None else "")
    lines = [f"<!-- generated by `{command}`; Llama-3-8B on H100 SXM, profile derated, "
             f"seed {SEED} -->", ""]
    for section in sections:
        lines += [*section, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rooftui.sweeps.scheduler_report",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path,
                        help="folder of the raw trace CSVs: adds exact trace occupancy and "
                             "the correlated-arrival tables")
    parser.add_argument("--batches", type=int, default=2000,
                        help="static batches per simulated occupancy cell [default: 2000]")
    parser.add_argument("--requests", type=int, default=20_000,
                        help="requests per static-vs-continuous run [default: 20000]")
    args = parser.parse_args(argv)
    try:
        if args.traces is not None and not args.traces.is_dir():
            raise SpecError(f"--traces: no folder {args.traces}")
        sys.stdout.write(report(args.traces, args.batches, args.requests) + "\n")
    except SpecError as error:
        sys.stderr.write(f"scheduler_report: error: {error}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
