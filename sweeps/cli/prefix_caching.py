"""`sweep simulate`'s session workloads and prefix-cache options: where the sessions come
from (a session or hash-id trace through `--arrival trace:PATH`, or the `sessions:`
generator as `--workload`), the cache and tier options, and the `prefix_cache` report."""

from __future__ import annotations

import math
from dataclasses import replace

import click

from rooftui.core import units
from rooftui.core.arrivals import Arrivals
from rooftui.core.errors import SpecError
from rooftui.core.prefix_cache import POLICIES, TIERS, CacheConfig
from rooftui.core.scheduler import SchedulerConfig, Simulation, simulate, summarize
from rooftui.core.sessions import (
    GENERATOR_PREFIX,
    SessionRequests,
    is_session_source,
    session_requests,
)
from rooftui.sweeps.cli.options import Number
from rooftui.sweeps.optimize import DEFAULT_ATTAINMENT

# the capacity search: from the given load, double or halve up to this many times to
# bracket the largest load that meets the objectives, then this many geometric bisections
# (the bracket's ratio 2^(1/2^7): 0.5 %)
CAPACITY_BRACKET_STEPS = 10
CAPACITY_BISECTIONS = 7


def prefix_cache_options(command):
    """The cache and tier options of `sweep simulate`."""
    options = [
        click.option("--prefix-cache", type=click.Choice(POLICIES), default="none",
                     show_default=True,
                     help="lru: keep prompts' and outputs' KV blocks for later requests with "
                          "the same prefix (sessions, hash-id traces); a hit is not "
                          "prefilled again."),
        click.option("--cache-capacity-gb", type=Number("cache_capacity_gb"), metavar="GB",
                     help="HBM for the prefix cache, per GPU [default: all the KV memory "
                          "the running batch leaves free]."),
        click.option("--cpu-tier-gb", type=Number("cpu_tier_gb"), default=0.0,
                     show_default=True, metavar="GB",
                     help="Host memory below HBM for evicted blocks, per GPU."),
        click.option("--ssd-tier-gb", type=Number("ssd_tier_gb"), default=0.0,
                     show_default=True, metavar="GB",
                     help="Local SSD below the CPU tier, per GPU."),
        click.option("--cpu-tier-bandwidth-gbs", type=Number("cpu_tier_bandwidth_gbs"),
                     metavar="GB/S",
                     help="Host memory to HBM, per direction [default: the GPU's host link, "
                          "PCIe 4.0/5.0 x16 or NVLink-C2C]."),
        click.option("--ssd-tier-bandwidth-gbs", type=Number("ssd_tier_bandwidth_gbs"),
                     default=6.9, show_default=True, metavar="GB/S",
                     help="SSD reads (one NVMe drive per GPU); the host link caps it."),
        click.option("--capacity", is_flag=True,
                     help="With --prefix-cache lru and an SLO: also find the highest load "
                          f"(the arrivals sped up or slowed down) at which "
                          f"{DEFAULT_ATTAINMENT:.0%} of requests meet the SLOs, with and "
                          "without the cache (about 20 more simulations each)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def cache_config(setup: dict) -> CacheConfig | None:
    """The CacheConfig of the options (popped from `setup`), None when off."""
    values = {key: setup.pop(key) for key in (
        "capacity", "prefix_cache", "cache_capacity_gb", "cpu_tier_gb", "ssd_tier_gb",
        "cpu_tier_bandwidth_gbs", "ssd_tier_bandwidth_gbs")}
    if values["prefix_cache"] == "none":
        given = [f"--{key.replace('_', '-')}" for key in ("cache_capacity_gb",)
                 if values[key] is not None]
        given += [f"--{key.replace('_', '-')}" for key in ("cpu_tier_gb", "ssd_tier_gb")
                  if values[key]]
        given += ["--capacity"] if values["capacity"] else []
        if given:
            raise SpecError(f"{', '.join(given)} set a prefix cache: add --prefix-cache lru")
        return None
    return CacheConfig(policy=values["prefix_cache"], hbm_gb=values["cache_capacity_gb"],
                       cpu_gb=values["cpu_tier_gb"], ssd_gb=values["ssd_tier_gb"],
                       cpu_bandwidth_gbs=values["cpu_tier_bandwidth_gbs"],
                       ssd_bandwidth_gbs=values["ssd_tier_bandwidth_gbs"])


def resolve_sessions(workload: str | None, process: Arrivals, count: int,
                     seed: int) -> tuple[SessionRequests | None, str | None]:
    """(sessions, None) for a session source, else (None, the trace path `--workload`
    should read, if `--arrival trace:PATH` named a plain trace)."""
    if process.path is not None and workload is not None:
        raise SpecError("--arrival trace:PATH names the trace; drop --workload (or give "
                        "--workload PATH --arrival trace)")
    source = process.path if process.path is not None else workload
    if source is None or not is_session_source(source):
        return None, process.path
    return session_requests(source, process, count, seed), None


def cache_report(cached: Simulation, uncached: Simulation, config: CacheConfig,
                 slo_ttft: float | None, slo_tpot: float | None) -> dict:
    """The `prefix_cache` object: the cache's statistics and the latencies with and
    without it (the same requests, `--prefix-cache none`)."""
    without = summarize(uncached, slo_ttft, slo_tpot)
    with_cache = summarize(cached, slo_ttft, slo_tpot)
    report = {"policy": config.policy, **cached.prefix_cache}
    report["latency"] = {key: {"with_cache": with_cache[key], "without_cache": without[key]}
                         for key in ("ttft_s", "tpot_s", "e2e_s")}
    report["without_cache"] = {key: without[key] for key in (
        "duration_s", "throughput_tokens_per_s", "request_throughput",
        *(("slo_attainment", "goodput_tokens_per_s") if "slo_attainment" in without else ()))}
    return report


NULL_REASONS = {
    "prefix_cache.tiers.hbm.capacity_gb": "all the KV memory the running batch leaves free "
                                         "(no --cache-capacity-gb)",
    "prefix_cache.tiers.hbm.bandwidth_gbs": "HBM hits need no transfer",
    "prefix_cache.latency.tpot_s.with_cache": "no request has more than one output token",
    "prefix_cache.latency.tpot_s.without_cache": "no request has more than one output token",
    "prefix_cache.capacity.with_cache": "the objectives are missed even at 1/1024 of the load",
    "prefix_cache.capacity.without_cache": "the objectives are missed even at 1/1024 of the "
                                           "load",
}


def render_lines(r: dict) -> list[str]:
    """The human summary's prefix-cache lines."""
    cache = r["prefix_cache"]
    tiers = " · ".join(f"{name.upper()} {units.percent(cache['hit_rate_by_tier'][name])}"
                       for name in TIERS if name in cache["tiers"])
    ttft = cache["latency"]["ttft_s"]
    lines = ["", f"  prefix cache   {units.percent(cache['hit_rate']):>14}   of prefill "
                 f"tokens cached ({tiers}), {cache['block_tokens']}-token blocks",
             f"  prefill tokens {cache['computed_prefill_tokens']:>14,}   computed · "
             f"{cache['cached_prefill_tokens']:,} cached"]
    for q in ("p50", "p90", "p99"):
        lines.append(f"  TTFT {q}       {units.seconds(ttft['with_cache'][q]):>14}   "
                     f"without the cache {units.seconds(ttft['without_cache'][q])}")
    if len(cache["tiers"]) > 1:
        lines.append(f"  tier loads     {units.seconds(cache['load_s']):>14}   transfer time "
                     f"· steps stretched by {units.seconds(cache['load_stall_s'])}")
    if "capacity" in cache:
        def shown(found):
            if found is None:
                return "the SLOs are missed even at 1/1024 of the load"
            at_least = "" if found["bounded"] else "at least "
            return (f"{at_least}{found['offered_requests_per_s']:,.2f} req/s offered "
                    f"({found['arrival']})")
        capacity = cache["capacity"]
        lines += [f"  capacity       with the cache {shown(capacity['with_cache'])}",
                  f"                 without it {shown(capacity['without_cache'])} · "
                  f"{capacity['attainment']:.0%} of requests within the SLOs"]
    return lines



def scaled_arrivals(process: Arrivals, scale: float) -> Arrivals:
    """`process` with `scale` times its load: the rate multiplied, or the replay sped up."""
    if process.kind in ("poisson", "gamma"):
        rate = process.rate * scale
        cv = f",cv={process.cv!r}" if process.kind == "gamma" else ""
        return replace(process, rate=rate, spec=f"{process.kind}:rate={rate!r}{cv}")
    if process.kind == "trace":
        speed = process.speed * scale
        path = f"{process.path}," if process.path else ""
        return replace(process, speed=speed, spec=f"trace:{path}speed={speed!r}")
    raise SpecError("--capacity needs an open arrival process to scale (poisson, gamma or "
                    "trace), not closed arrivals")


def sessions_at(sessions: SessionRequests, source: str, process: Arrivals, scale: float,
                count: int, seed: int) -> SessionRequests:
    """The same sessions at `scale` times the load: generated again at the scaled
    process's times (the same draws, so gaps shrink exactly), or a trace sped up."""
    if source.strip().lower().startswith(GENERATOR_PREFIX):
        return session_requests(source, scaled_arrivals(process, scale), count, seed)
    scaled_arrivals(process, scale)  # refuses closed arrivals
    return sessions.scaled(scale)


def capacity_search(run_at, target: float) -> dict | None:
    """The largest load scale whose simulation (`run_at(scale)` -> its summary) has an
    SLO attainment of at least `target`, and whether a higher one was seen to fail
    (`bounded`); None when even 1/2^10 of the load misses it."""
    def meets(summary: dict) -> bool:
        return summary["slo_attainment"] >= target

    best, best_summary, failed = None, None, None
    summary = run_at(1.0)
    if meets(summary):
        best, best_summary = 1.0, summary
    else:
        failed = 1.0
    for _ in range(CAPACITY_BRACKET_STEPS):
        if best is not None and failed is not None:
            break
        scale = best * 2 if failed is None else failed / 2
        summary = run_at(scale)
        if meets(summary):
            best, best_summary = scale, summary
        else:
            failed = scale
    if best is None:
        return None
    if failed is not None:
        for _ in range(CAPACITY_BISECTIONS):
            scale = math.sqrt(best * failed)
            summary = run_at(scale)
            if meets(summary):
                best, best_summary = scale, summary
            else:
                failed = scale
    return {"load_scale": best, "bounded": failed is not None,
            "slo_attainment": best_summary["slo_attainment"]}


def capacity_report(config, scheduler: SchedulerConfig, cache: CacheConfig,
                    sessions: SessionRequests, source: str, process: Arrivals, count: int,
                    seed: int, slo_ttft: float | None, slo_tpot: float | None) -> dict:
    """`prefix_cache.capacity`: the highest load meeting the SLOs, with the cache and
    without, the same sessions at each load (`config`: the PointConfig)."""
    if slo_ttft is None and slo_tpot is None:
        raise SpecError("--capacity needs an objective: --slo-ttft and/or --slo-tpot")

    def run_at(scale: float, with_cache: bool) -> dict:
        scaled = sessions_at(sessions, source, process, scale, count, seed)
        simulation = simulate(config.step_inputs(), config.assumptions, scheduler,
                              scaled.requests, prefix_cache=cache if with_cache else None,
                              sessions=scaled, gpu_key=config.gpu.key)
        return summarize(simulation, slo_ttft, slo_tpot)

    # the offered load at scale 1: generated sessions start at the process's rate, each
    # bringing its turns; a trace's requests arrive over the span of their (lower-bound)
    # arrival times, service not counted
    if source.strip().lower().startswith(GENERATOR_PREFIX):
        offered = process.rate * len(sessions) / len(set(sessions.session.tolist()))
    else:
        span = float(sessions.requests.arrival_s.max() - sessions.requests.arrival_s.min())
        offered = len(sessions) / span if span > 0 else math.nan
    report = {"attainment": DEFAULT_ATTAINMENT}
    for key, with_cache in (("with_cache", True), ("without_cache", False)):
        found = capacity_search(lambda scale, c=with_cache: run_at(scale, c),
                                DEFAULT_ATTAINMENT)
        if found is not None:
            found["arrival"] = scaled_arrivals(process, found["load_scale"]).spec
            found["offered_requests_per_s"] = offered * found["load_scale"]
        report[key] = found
    return report
