"""`sweep simulate`: requests through a batching policy, each step timed by the step model."""

from __future__ import annotations

import math
import os
from pathlib import Path

import click

from rooftui.core import units
from rooftui.core.arrivals import parse_arrivals
from rooftui.core.errors import SpecError
from rooftui.core.lengths import parse_distribution
from rooftui.core.scheduler import (
    KV_ADMISSIONS,
    POLICIES,
    SchedulerConfig,
    Simulation,
    request_metrics,
    simulate,
    summarize,
)
from rooftui.core.workloads import Workload, load_workload
from rooftui.sweeps.cli import prefix_caching
from rooftui.sweeps.cli.options import JSON_NULLS, Number, build_config, json_text, setup_options
from rooftui.sweeps.derive_workloads import read_trace_file
from rooftui.sweeps.output_files import atomic_path, make_folder

DEFAULT_WORKLOAD = "sharegpt-8k"


def resolve_workload(workload: str | None, input_tokens: str | None,
                     output_tokens: str | None) -> Workload:
    """A workload from `--workload` and/or the two length laws (which override it)."""
    lengths = {name: parse_distribution(spec, name, read_trace_file) if spec else None
               for name, spec in (("input_tokens", input_tokens),
                                  ("output_tokens", output_tokens))}
    if workload is not None:
        return load_workload(workload, read_trace_file).with_lengths(**lengths)
    if input_tokens and output_tokens:
        return Workload(name=f"input {input_tokens}, output {output_tokens}", **lengths)
    if input_tokens or output_tokens:
        raise click.UsageError("give both --input-tokens and --output-tokens, or a --workload "
                               "for the one not given")
    return load_workload(DEFAULT_WORKLOAD)


def trace_paths(path: str) -> tuple[Path, Path]:
    """Where `--trace-out PATH` writes: PATH-steps.parquet and PATH-requests.parquet (a
    trailing .parquet is dropped first), or steps.parquet and requests.parquet inside PATH
    when it is a folder (an existing one, or a name ending in a slash)."""
    target = Path(path).expanduser()
    if target.is_dir() or str(path).endswith(("/", os.sep)):
        return target / "steps.parquet", target / "requests.parquet"
    stem = target.with_suffix("") if target.suffix == ".parquet" else target
    return (stem.parent / f"{stem.name}-steps.parquet",
            stem.parent / f"{stem.name}-requests.parquet")


def write_trace(simulation: Simulation, path: str) -> tuple[Path, Path]:
    """The per-step and per-request records as parquet, both or neither (temporary files
    renamed into place once both are written); a file-system failure is one line."""
    import numpy as np
    import polars as pl  # only when records are written

    steps_path, requests_path = trace_paths(path)
    folder = steps_path.parent
    try:
        if str(path).endswith(("/", os.sep)):
            make_folder(folder)
    except SpecError as error:
        raise SpecError(f"--trace-out: {error}") from None
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "does not exist"
        raise SpecError(f"--trace-out: folder {folder} {what}")
    steps = pl.DataFrame({"step": np.arange(simulation.useful_slots.size),
                          **simulation.steps, "useful_slots": simulation.useful_slots})
    requests = simulation.requests
    frame = pl.DataFrame({
        "request": np.arange(len(requests)),
        "arrival_s": simulation.arrivals,
        "input_tokens": requests.input_tokens,
        "output_tokens": requests.output_tokens,
        "first_token_s": simulation.first_token_s,
        "finish_s": simulation.finish_s,
        **request_metrics(simulation),
        "preemptions": simulation.preemptions,
    })
    try:
        with atomic_path(steps_path) as steps_file, atomic_path(requests_path) as requests_file:
            steps.write_parquet(steps_file)
            frame.write_parquet(requests_file)
    except SpecError as error:
        raise SpecError(f"--trace-out: {error}") from None
    return steps_path, requests_path


@click.command("simulate")
@setup_options
@click.option("--policy", type=click.Choice(POLICIES), default="continuous", show_default=True,
              help="static: a batch runs until its longest member ends; continuous: a freed "
                   "slot is refilled next step, prompts prefilled whole; chunked: a per-step "
                   "token budget, decodes first, then partial and new prompts; prefill_first: "
                   "a step is either a prefill batch (whenever a prompt can be admitted, "
                   "decodes wait) or all decodes (SGLang's default scheduler).")
@click.option("--max-batch", "-B", type=Number("max_batch"), default=128, show_default=True,
              help="Slots: sequences in flight (decoding or prefilling) at most.")
@click.option("--token-budget", "-T", type=Number("token_budget"), metavar="TOKENS",
              help="Tokens per step. chunked: shared by decodes and prefill chunks "
                   "[default: 512; at least --max-batch]; continuous: a cap on decodes plus "
                   "whole prompts [default: none]; prefill_first: a prefill batch's tokens, "
                   "the last prompt cut to fit [default: 8192, SGLang's chunked prefill].")
@click.option("--workload", "-w", metavar="NAME|PATH",
              help="Preset (`sweep specs list workloads`), preset TOML, or a trace "
                   "CSV/parquet with input_tokens, output_tokens[, arrival_s], or generated "
                   "sessions: sessions:turns=T,system=S,first=F,growth=G,output=O,think=X "
                   f"[default: {DEFAULT_WORKLOAD}].")
@click.option("--input-tokens", metavar="DIST",
              help="Prompt lengths: fixed:N, exp:mean=M[,cap=C], lognormal:median=M,sigma=S"
                   "[,cap=C], bimodal:p=P,a=A,b=B, empirical:PATH (overrides the workload's).")
@click.option("--output-tokens", metavar="DIST", help="Output lengths, same forms.")
@click.option("--arrival", default="closed", show_default=True, metavar="PROCESS",
              help="closed (all waiting at t = 0), poisson:rate=R (req/s), "
                   "gamma:rate=R,cv=C, or trace[:PATH][,speed=X] (replay the trace file's "
                   "arrival_s; a session trace or a hash_ids trace as PATH brings its "
                   "sessions and prefix blocks).")
@click.option("--requests", "-n", "request_count", type=Number("requests"), default=1000,
              show_default=True, help="Requests to simulate.")
@click.option("--seed", type=Number("seed"), default=0, show_default=True,
              help="Seed of the length and arrival draws (the same seed, the same run).")
@click.option("--kv-admission", type=click.Choice(KV_ADMISSIONS), default="reserve",
              show_default=True,
              help="reserve: admit when the whole sequence fits; paged: 16-token blocks, "
                   "preempt and recompute the latest request when they run out.")
@click.option("--block-size", type=Number("block_size"), default=16, show_default=True,
              help="Tokens per KV block (paged).")
@click.option("--slo-ttft", type=Number("slo_ttft"), metavar="SECONDS",
              help="TTFT objective: adds slo_attainment and goodput.")
@click.option("--slo-tpot", type=Number("slo_tpot"), metavar="SECONDS",
              help="TPOT objective: adds slo_attainment and goodput.")
@click.option("--trace-out", metavar="PATH",
              help="Write per-step and per-request records: PATH-steps.parquet and "
                   "PATH-requests.parquet, or steps/requests.parquet inside a folder PATH/.")
@prefix_caching.prefix_cache_options
@click.option("--json", "as_json", is_flag=True, help=f"Print one JSON object. {JSON_NULLS}")
def simulate_command(policy, max_batch, token_budget, workload, input_tokens, output_tokens,
                     arrival, request_count, seed, kv_admission, block_size, slo_ttft, slo_tpot,
                     trace_out, as_json, **setup):
    """Simulate serving: requests arrive, a policy batches them, the step model times
    every step; prints throughput, occupancy and TTFT/TPOT/ITL/E2E percentiles.

    TTFT is first token minus arrival, plus the profile's per-request front end
    (request_overhead_s: HTTP, tokenisation, streaming; an engine profile fitted end to end
    has one) on TTFT and E2E; TPOT = (E2E - TTFT) / (output - 1); ITL is every
    gap between a request's consecutive tokens; occupancy is useful slot-steps over
    max-batch slots per step. Seeded runs are reproducible bit for bit.

    \b
    Examples:
      sweep simulate --workload sharegpt-8k --policy chunked --token-budget 1024
      sweep simulate --workload sharegpt-8k --policy prefill_first --kv-admission paged
      sweep simulate --output-tokens exp:mean=100 --input-tokens fixed:512 --policy static
      sweep simulate --workload traces/azure-conv-2023.csv --arrival trace --slo-ttft 2
    """
    config = build_config(setup)
    scheduler = SchedulerConfig(policy=policy, max_batch=max_batch, token_budget=token_budget,
                                kv_admission=kv_admission, block_size=block_size)
    want_capacity = setup["capacity"]
    cache = prefix_caching.cache_config(setup)
    process = parse_arrivals(arrival)
    sessions, trace = prefix_caching.resolve_sessions(workload, process, request_count, seed)
    if sessions is None:
        load = resolve_workload(trace or workload, input_tokens, output_tokens)
        requests, workload_name = load.requests(request_count, process, seed), load.name
    elif input_tokens or output_tokens:
        raise SpecError("a session workload has its own lengths: drop --input-tokens and "
                        "--output-tokens")
    else:
        requests, workload_name = sessions.requests, sessions.name
    run = {"sessions": sessions, "gpu_key": config.gpu.key}
    simulation = simulate(config.step_inputs(), config.assumptions, scheduler, requests,
                          prefix_cache=cache, **run)
    if trace_out:
        written = write_trace(simulation, trace_out)
        click.echo(f"wrote {written[0]} and {written[1]}", err=True)
    report = {
        "gpu": config.gpu.name,
        "model": config.model.name,
        "profile": config.assumptions.name,
        "policy": policy,
        "max_batch": max_batch,
        "token_budget": scheduler.budget if math.isfinite(scheduler.budget) else None,
        "kv_admission": kv_admission,
        "workload": workload_name,
        "arrival": process.spec,
        "seed": seed,
        **summarize(simulation, slo_ttft, slo_tpot),
        "front_end_s": simulation.front_end_s,
    }
    report["calibration"] = latency_intervals(
        config.assumptions, report, {"throughput_tokens_per_s": report["throughput_tokens_per_s"]})
    if slo_ttft is not None or slo_tpot is not None:
        report["slo_ttft_s"], report["slo_tpot_s"] = slo_ttft, slo_tpot
    if cache is not None:  # the same requests without the cache, for comparison
        uncached = simulate(config.step_inputs(), config.assumptions, scheduler, requests, **run)
        report["prefix_cache"] = prefix_caching.cache_report(simulation, uncached, cache,
                                                             slo_ttft, slo_tpot)
        if want_capacity:
            report["prefix_cache"]["capacity"] = prefix_caching.capacity_report(
                config, scheduler, cache, sessions, workload or process.path, process,
                request_count, seed, slo_ttft, slo_tpot)
    click.echo(json_text(report, NULL_REASONS) if as_json else render(report))


NULL_REASONS = {  # why a field of `sweep simulate --json` can be null
    "token_budget": "no per-step token budget (continuous batching without --token-budget)",
    "tpot_s": "no request has more than one output token",
    "slo_ttft_s": "no --slo-ttft given",
    "slo_tpot_s": "no --slo-tpot given",
    **prefix_caching.NULL_REASONS,
    "calibration.interval": "the profile has no [interval] (the ideal one is a bound; an "
                            "assumed one is not fitted)",
    "calibration.interval.transferred_from": "fitted on this GPU, not transferred",
}


def latency_intervals(assumptions, latencies: dict, rates: dict[str, float]) -> dict:
    """The profile's provenance and the intervals of TTFT and TPOT (`latencies`' mean and
    p50 statistics) and of `rates` (tok/s, inverting TPOT): the profile's end-to-end
    bounds, else its step bounds (`kinds` says which)."""
    from rooftui.core.assumptions import interval_report

    times = {f"{key}.{stat}": (kind, latencies[key][stat])
             for key, kind in (("ttft_s", "ttft"), ("tpot_s", "tpot")) if latencies.get(key)
             for stat in ("mean", "p50") if stat in latencies[key]}
    return interval_report(assumptions, times,
                           {name: ("tpot", value) for name, value in rates.items()})


def interval_lines(r: dict) -> list[str]:
    """Provenance, and one line of intervals when the profile has them."""
    calibration = r.get("calibration")
    if not calibration:
        return []
    lines = ["", f"  calibration: {calibration['provenance']}"]
    interval = calibration["interval"]
    if interval:
        labels = {"ttft_s.mean": "TTFT mean", "ttft_s.p50": "TTFT p50",
                  "tpot_s.mean": "TPOT mean", "tpot_s.p50": "TPOT p50"}
        shown = [f"{label} {units.seconds(interval['bounds'][name][0])}-"
                 f"{units.seconds(interval['bounds'][name][1])}"
                 for name, label in labels.items() if name in interval["bounds"]]
        rates = {"throughput_tokens_per_s": "throughput", "goodput_tokens_per_s": "goodput",
                 "tokens_per_s_per_gpu": "per GPU"}
        shown += [f"{label} {units.rate(interval['bounds'][name][0])}-"
                  f"{units.rate(interval['bounds'][name][1])}"
                  for name, label in rates.items() if name in interval["bounds"]]
        from_step = set(interval["kinds"].values()) == {"step"}
        lines.append(f"  {100 * interval['level']:g} % interval: " + ", ".join(shown)
                     + (" (the profile's step bounds: it has no end-to-end ones)"
                        if from_step else ""))
    return lines


def render(r: dict) -> str:
    """The human summary, with units."""
    budget = f", budget {r['token_budget']:,} tok/step" if r["token_budget"] else ""
    lines = [
        f"{r['workload']} on {r['model']} · {r['gpu']} · profile {r['profile']}",
        f"{r['policy']}, max batch {r['max_batch']}{budget}, KV {r['kv_admission']} "
        f"({r['kv_capacity_tokens']:,} tokens) · arrivals {r['arrival']} · "
        f"{r['requests']:,} requests, seed {r['seed']}",
        "",
        f"  duration       {units.seconds(r['duration_s']):>14}   {r['steps']:,} steps",
        f"  throughput     {units.rate(r['throughput_tokens_per_s']):>14}   output tokens · "
        f"{r['request_throughput']:,.2f} req/s",
        f"  occupancy      {units.percent(r['occupancy']):>14}   mean batch "
        f"{r['mean_batch']:,.1f} of {r['max_batch']}",
        f"  preemptions    {r['preemptions']:>14,}",
        "",
        f"  {'latency':<8}{'mean':>12}{'p50':>12}{'p90':>12}{'p99':>12}",
    ]
    for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("itl_s", "ITL"),
                       ("e2e_s", "E2E")):
        stats = r[key]
        if stats is None:
            lines.append(f"  {label:<8}{'—':>12}")
            continue
        lines.append(f"  {label:<8}" + "".join(f"{units.seconds(stats[q]):>12}"
                                               for q in ("mean", "p50", "p90", "p99")))
    if r["front_end_s"]:
        lines.append(f"  TTFT and E2E include the profile's front end, "
                     f"{units.seconds(r['front_end_s'])} per request (request_overhead_s)")
    if "slo_attainment" in r:
        objectives = " and ".join(
            f"{name} ≤ {units.seconds(value)}" for name, value in
            (("TTFT", r["slo_ttft_s"]), ("TPOT", r["slo_tpot_s"])) if value is not None)
        lines += ["", f"  SLO {objectives}: {units.percent(r['slo_attainment'])} of requests "
                      f"· goodput {units.rate(r['goodput_tokens_per_s'])}"]
    if "prefix_cache" in r:
        lines += prefix_caching.render_lines(r)
    lines += interval_lines(r)
    return "\n".join(lines)
