"""`sweep optimize`: the (max batch, token budget) that sustains the highest request rate
under a TTFT/TPOT objective, the Pareto frontier, and why every other candidate lost."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import click

from rooftui.core import limits, units
from rooftui.core.errors import SpecError
from rooftui.core.scheduler import KV_ADMISSIONS
from rooftui.sweeps.cli.options import (
    JSON_NULLS,
    SETUP_KEYS,
    Number,
    build_config,
    json_text,
    setup_options,
)
from rooftui.sweeps.cli.simulate import NULL_REASONS as SIMULATE_NULLS
from rooftui.sweeps.cli.simulate import interval_lines, latency_intervals, resolve_workload
from rooftui.sweeps.optimize import (
    DEFAULT_REQUESTS,
    DEFAULT_TOLERANCE,
    OPTIMIZE_POLICIES,
    QUANTILES,
    REASONS,
    Candidate,
    Objective,
    Problem,
    Result,
    candidates_frame,
    optimize,
)

DEFAULT_BATCHES = "8,16,32,64,96,128,192,256"
DEFAULT_BUDGETS = "256,512,1024,2048,4096,8192"


def _whole_numbers(text: str, option: str, bound: str) -> list[int]:
    """A comma-separated list, each within `limits.BOUNDS[bound]`."""
    wanted = limits.BOUNDS[bound].describe()
    try:
        values = [limits.check(bound, float(part) if "." in part or "e" in part.lower()
                               else int(part))
                  for part in text.replace(" ", "").split(",") if part]
    except (ValueError, SpecError):
        raise click.BadParameter(f"expected whole numbers separated by commas, each "
                                 f"{wanted}, got {text[:40]!r}", param_hint=option) from None
    if not values:
        raise click.BadParameter(f"expected whole numbers separated by commas, got {text!r}",
                                 param_hint=option)
    return values


def _arrival(text: str) -> tuple[str, float]:
    """(kind, cv) from poisson | gamma:cv=C | trace."""
    kind, _, body = text.strip().partition(":")
    kind = kind.lower()
    if kind in ("poisson", "trace") and not body:
        return kind, 1.0
    if kind == "gamma":
        key, _, value = body.partition("=")
        try:
            cv = limits.check("interarrival_cv", float(value))
        except (ValueError, SpecError):
            cv = None
        if key.strip() == "cv" and cv is not None:
            return kind, cv
    wanted = limits.BOUNDS["interarrival_cv"].describe()
    raise click.BadParameter(f"expected poisson, gamma:cv=C (C {wanted}) or trace, got "
                             f"{text[:40]!r}", param_hint="'--arrival'")


@click.command("optimize")
@setup_options
@click.option("--workload", "-w", metavar="NAME|PATH",
              help="Preset (`sweep specs list workloads`), preset TOML, or a trace "
                   "CSV/parquet [default: sharegpt-8k].")
@click.option("--input-tokens", metavar="DIST",
              help="Prompt lengths (fixed:N, exp:mean=M, ...), overriding the workload's.")
@click.option("--output-tokens", metavar="DIST", help="Output lengths, same forms.")
@click.option("--slo-ttft", type=Number("slo_ttft"), required=True, metavar="SECONDS",
              help="Time-to-first-token objective.")
@click.option("--slo-tpot", type=Number("slo_tpot"), required=True, metavar="SECONDS",
              help="Time-per-output-token objective, (E2E - TTFT) / (output - 1).")
@click.option("--quantile", type=click.Choice([str(q) for q in QUANTILES]),
              help="Require that percentile of TTFT and of TPOT within the objectives.")
@click.option("--attainment", type=Number("attainment"), metavar="SHARE",
              help="Require this share of requests meeting both objectives "
                   "[default: 0.9 without --quantile].")
@click.option("--arrival", default="poisson", show_default=True, metavar="PROCESS",
              help="poisson, gamma:cv=C, or trace (replay the workload file's arrival_s, "
                   "sped up to the rate).")
@click.option("--policy", type=click.Choice(OPTIMIZE_POLICIES), default="chunked",
              show_default=True,
              help="chunked: the budget is shared by decodes and prefill chunks; "
                   "continuous: whole prompts, the budget caps decodes plus prompts.")
@click.option("--batches", default=DEFAULT_BATCHES, show_default=True, metavar="LIST",
              help="Max batches to try, comma-separated.")
@click.option("--budgets", default=DEFAULT_BUDGETS, show_default=True, metavar="LIST",
              help="Token budgets (tokens per step) to try, comma-separated.")
@click.option("--gpus-per-replica", type=Number("tp"), metavar="N",
              help="GPUs one replica is split over: the same as --tp.")
@click.option("--kv-admission", type=click.Choice(KV_ADMISSIONS), default="reserve",
              show_default=True, help="reserve: whole sequences; paged: blocks, preemption.")
@click.option("--block-size", type=Number("block_size"), default=16, show_default=True,
              help="Tokens per KV block (paged).")
@click.option("--requests", "-n", "request_count", type=Number("requests", minimum=2),
              default=DEFAULT_REQUESTS, show_default=True,
              help="Requests per simulation (more: tighter rates near saturation, slower).")
@click.option("--seed", type=Number("seed"), default=0, show_default=True,
              help="Seed of the lengths and arrival gaps (the same for every rate).")
@click.option("--rate-tolerance", type=Number("rate_tolerance"),
              default=DEFAULT_TOLERANCE, show_default=True, metavar="FRACTION",
              help="The rate bisection stops when its bracket is this narrow (relative).")
@click.option("--workers", "-j", type=Number("workers"), default=1, show_default=True,
              help="Processes evaluating candidates (the result does not change).")
@click.option("--charts", "charts_dir", type=click.Path(file_okay=False, path_type=Path),
              metavar="DIR", help="Also write the rate heatmap and the Pareto frontier as "
                                  "HTML into DIR.")
@click.option("--json", "as_json", is_flag=True, help=f"Print one JSON object. {JSON_NULLS}")
@click.pass_context
def optimize_command(ctx, workload, input_tokens, output_tokens, slo_ttft, slo_tpot, quantile,
                     attainment, arrival, policy, batches, budgets, gpus_per_replica,
                     kv_admission, block_size, request_count, seed, rate_tolerance, workers,
                     charts_dir, as_json, **setup):
    """Find the max batch and token budget that sustain the highest request rate with the
    SLO met, by simulation, after an analytic pass that prunes what cannot win.

    For each (max batch, budget): the analytic pass rejects what cannot meet the SLO at any
    rate (a budget below the batch, a request larger than the KV cache, requests that miss
    the SLO even alone) and what another choice dominates (a max batch the KV cache never
    reaches, a decode step over the TPOT, a budget far below the ridge). The simulator then
    measures the capacity (every request waiting) and bisects the arrival rate for the
    highest one meeting the SLO: by default 90 % of requests within both objectives
    (--attainment), or a percentile of each (--quantile). Goodput counts the output tokens
    of the requests meeting both. Each candidate's bisection starts next to the answer of
    the same max batch's next larger budget (rates implied by its simulations are not
    simulated again): about half the simulations, the same answer while meeting the SLO
    is monotone in the rate. Deterministic: the same seed, the same answer, with any
    --workers.

    \b
    Examples:
      sweep optimize --slo-ttft 2 --slo-tpot 0.1
      sweep optimize --model llama-3-70b --gpu h200 --tp 2 --slo-ttft 1 --slo-tpot 0.05 \\
          --workload azure-conv-2023 --quantile 0.99 --price-per-gpu-hour 3.5 --json
      sweep optimize --slo-ttft 0.5 --slo-tpot 0.1 --batches 32,64,128 --budgets 512,2048 \\
          --charts out/
    """
    if gpus_per_replica is not None:
        if ctx.get_parameter_source("tp") == click.core.ParameterSource.COMMANDLINE \
                and setup["tp"] != gpus_per_replica:
            raise click.UsageError("--tp and --gpus-per-replica differ; give one")
        setup["tp"] = gpus_per_replica
    kind, cv = _arrival(arrival)
    objective = Objective(ttft_s=slo_ttft, tpot_s=slo_tpot,
                          quantile=None if quantile is None else float(quantile),
                          attainment=attainment)
    config = build_config(setup)
    load = resolve_workload(workload, input_tokens, output_tokens)
    problem = Problem(config=config, workload=load, policy=policy, arrival=kind, cv=cv,
                      kv_admission=kv_admission, block_size=block_size,
                      requests=request_count, seed=seed)
    batch_list = _whole_numbers(batches, "'--batches'", "max_batch")
    budget_list = _whole_numbers(budgets, "'--budgets'", "token_budget")
    progress = _Progress(len(batch_list) * len(budget_list), quiet=as_json)
    began, cpu = time.perf_counter(), time.process_time()
    result = optimize(problem, objective, batch_list, budget_list, rate_tolerance,
                      on_candidate=progress.advance, workers=workers)
    progress.finish()
    report = build_report(ctx, problem, result, setup, arrival, request_count, seed)
    report["seconds"] = time.perf_counter() - began
    report["cpu_seconds"] = time.process_time() - cpu  # this process; workers not counted
    if charts_dir is not None:
        written = write_charts(result, charts_dir, priced=config.price_per_gpu_hour is not None)
        click.echo("wrote " + ", ".join(str(path) for path in written), err=True)
    click.echo(json_text(report, {"best": "no candidate meets the objective at any rate",
                                  **{key: reason for key, reason in SIMULATE_NULLS.items()
                                     if key.startswith("calibration.")}})
               if as_json else render(report))


class _Progress:
    """`k / n candidates` on stderr while the search runs (silent for --json)."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.total, self.done, self.quiet = total, 0, quiet
        self.interactive = sys.stderr.isatty()

    def advance(self, candidate: Candidate) -> None:
        self.done += 1
        if self.quiet or not self.interactive:
            return
        rate = "" if candidate.rate is None else f": {candidate.rate:,.2f} req/s"
        sys.stderr.write(f"\r\x1b[2K  {self.done} / {self.total} candidates · "
                         f"B {candidate.max_batch}, T {candidate.token_budget} "
                         f"{candidate.status}{rate}")
        sys.stderr.flush()

    def finish(self) -> None:
        if self.interactive and not self.quiet:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()


def simulate_command(ctx: click.Context, problem: Problem, setup: dict,
                     candidate: Candidate, requests: int, seed: int) -> str:
    """The `sweep simulate` command that reproduces a candidate's metrics."""
    words = ["sweep", "simulate"]
    for param in ctx.command.params:
        name = param.name
        if name not in SETUP_KEYS or ctx.get_parameter_source(name) != \
                click.core.ParameterSource.COMMANDLINE:
            continue
        value = setup[name]
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            words.append(flag if value else f"--no-{name.replace('_', '-')}")
        else:
            words += [flag, str(value)]
    if "--tp" not in words and problem.gpus != 1:  # given as --gpus-per-replica
        words += ["--tp", str(problem.gpus)]
    for name in ("workload", "input_tokens", "output_tokens"):
        if ctx.params.get(name) is not None:
            words += ["--" + name.replace("_", "-"), ctx.params[name]]
    words += ["--policy", problem.policy, "--max-batch", str(candidate.max_batch),
              "--token-budget", str(candidate.token_budget), "--arrival", candidate.arrival,
              "--requests", str(requests), "--seed", str(seed),
              "--kv-admission", problem.kv_admission]
    if problem.kv_admission == "paged":
        words += ["--block-size", str(problem.block_size)]
    words += ["--slo-ttft", repr(ctx.params["slo_ttft"]),
              "--slo-tpot", repr(ctx.params["slo_tpot"]), "--json"]
    return shlex.join(words)


def build_report(ctx, problem: Problem, result: Result, setup: dict, arrival: str,
                 requests: int, seed: int) -> dict:
    config = problem.config
    best = result.best
    report = {
        "gpu": config.gpu.name,
        "model": config.model.name,
        "profile": config.assumptions.name,
        "gpus_per_replica": problem.gpus,
        "workload": problem.workload.name,
        "policy": problem.policy,
        "arrival": arrival,
        "kv_admission": problem.kv_admission,
        "requests": requests,
        "seed": seed,
        "objective": result.objective.to_json(),
        "price_per_gpu_hour": config.price_per_gpu_hour,
        "best": None,
        "candidates": [c.to_json() for c in result.candidates],
        "pareto": [_frontier_point(c) for c in result.pareto],
        "rejected": {code: sum(c.reason == code for c in result.candidates)
                     for code in REASONS if code},
        "simulations": sum(c.simulations for c in result.candidates),
    }
    if best is not None:
        report["best"] = {"max_batch": best.max_batch, "token_budget": best.token_budget,
                          **best.metrics(),
                          "simulate_command": simulate_command(ctx, problem, setup, best,
                                                               requests, seed)}
    rates = {name: best.metrics()[name] for name in ("goodput_tokens_per_s",
                                                      "tokens_per_s_per_gpu")} if best else {}
    report["calibration"] = latency_intervals(config.assumptions, report["best"] or {}, rates)
    return report


def _frontier_point(candidate: Candidate) -> dict:
    return {"max_batch": candidate.max_batch, "token_budget": candidate.token_budget,
            "rate": candidate.rate, "tokens_per_s_per_gpu": candidate.tokens_per_s_per_gpu,
            "per_user_tokens_per_s": candidate.per_user_tokens_per_s,
            "goodput_tokens_per_s": candidate.goodput_tokens_per_s}


def write_charts(result: Result, folder: Path, priced: bool) -> list[Path]:
    from rooftui.sweeps.charts import pareto_frontier_chart, rate_heatmap_chart, save_chart

    frame = candidates_frame(result, priced)
    written = []
    for name, chart in (("rate_heatmap", rate_heatmap_chart),
                        ("pareto_frontier", pareto_frontier_chart)):
        try:
            written += save_chart(chart(frame), Path(folder) / name)
        except OSError as error:
            raise SpecError(f"--charts: cannot write into {folder}: "
                            f"{error.strerror or error}") from None
    return written


# --- text ----------------------------------------------------------------------------------

def _seconds_stats(stats: dict | None, key: str) -> str:
    return "—" if stats is None else units.seconds(stats[key])


def render(r: dict) -> str:
    objective = r["objective"]
    rule = []
    if objective["quantile"] is not None:
        rule.append(f"p{round(objective['quantile'] * 100)} of each")
    if objective["attainment"] is not None:
        rule.append(f"{units.percent(objective['attainment'])} of requests meeting both")
    level = "p99" if objective["quantile"] == 0.99 else "p50" if objective["quantile"] == 0.5 \
        else "p90"
    lines = [
        f"{r['workload']} on {r['model']} · {r['gpu']} × {r['gpus_per_replica']} per replica · "
        f"profile {r['profile']}",
        f"objective: TTFT ≤ {units.seconds(objective['slo_ttft_s'])}, TPOT ≤ "
        f"{units.seconds(objective['slo_tpot_s'])} ({' and '.join(rule)}) · {r['policy']} · "
        f"arrivals {r['arrival']} · {r['requests']:,} requests per simulation, seed "
        f"{r['seed']}",
        "",
    ]
    best = r["best"]
    if best is None:
        lines.append("no candidate meets the objective at any rate; see the reasons below")
    else:
        saturated = " (at its capacity: throughput, not the SLO, limits it)" \
            if best["saturated"] else ""
        lines += [
            f"best: max batch {best['max_batch']:,}, token budget {best['token_budget']:,} "
            f"tokens/step{saturated}",
            f"  sustained rate   {best['rate']:,.3g} req/s",
            f"  goodput          {units.rate(best['goodput_tokens_per_s'])} "
            f"({units.percent(best['slo_attainment'])} of requests within both objectives)",
            f"  per GPU          {units.rate(best['tokens_per_s_per_gpu'])} · per user "
            f"{units.rate(best['per_user_tokens_per_s'])}",
            f"  TTFT             p50 {_seconds_stats(best['ttft_s'], 'p50')} · {level} "
            f"{_seconds_stats(best['ttft_s'], level)}",
            f"  TPOT             p50 {_seconds_stats(best['tpot_s'], 'p50')} · {level} "
            f"{_seconds_stats(best['tpot_s'], level)}",
        ]
        if best.get("cost_per_million_tokens") is not None:
            lines.append(f"  cost             {best['cost_per_million_tokens']:,.3f} per "
                         "million output tokens within the SLO")
        lines.append(f"  replay           {best['simulate_command']}")
    lines += ["", "sustained rate (req/s) by max batch (rows) and token budget (columns); "
              "letters: why a candidate lost", *_table(r)]
    if r["pareto"]:
        lines += ["", "Pareto frontier (no other candidate is better for both):",
                  f"  {'batch':>6} {'budget':>7} {'req/s':>9} {'tok/s per GPU':>14} "
                  f"{'tok/s per user':>15}"]
        lines += [f"  {p['max_batch']:>6,} {p['token_budget']:>7,} {p['rate']:>9,.3g} "
                  f"{p['tokens_per_s_per_gpu']:>14,.0f} {p['per_user_tokens_per_s']:>15,.1f}"
                  for p in r["pareto"]]
    lines += interval_lines(r)
    lines += ["", f"{r['simulations']:,} simulations in {units.seconds(r['seconds'])}"]
    return "\n".join(lines)


def _table(r: dict) -> list[str]:
    batches = list(dict.fromkeys(c["max_batch"] for c in r["candidates"]))
    budgets = list(dict.fromkeys(c["token_budget"] for c in r["candidates"]))
    cell = {(c["max_batch"], c["token_budget"]): c for c in r["candidates"]}
    best = r["best"]
    lines = ["  " + f"{'':>6}" + "".join(f"{t:>10,}" for t in budgets)]
    for batch in batches:
        cells = []
        for budget in budgets:
            c = cell[(batch, budget)]
            text = REASONS[c["reason"]][2] if c["reason"] else f"{c['rate']:,.3g}"
            if best and (batch, budget) == (best["max_batch"], best["token_budget"]):
                text = "*" + text
            cells.append(f"{text:>10}")
        lines.append(f"  {batch:>6,}" + "".join(cells))
    used = [code for code in REASONS if r["rejected"].get(code)]
    if used:
        lines.append("  " + " · ".join(f"{REASONS[code][2]}: {REASONS[code][1]} "
                                       f"({r['rejected'][code]})" for code in used))
    if best:
        lines.append("  *: the best")
    return lines
