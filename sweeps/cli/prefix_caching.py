"""`sweep simulate`'s session workloads and prefix-cache options: where the sessions come
from (a session or hash-id trace through `--arrival trace:PATH`, or the `sessions:`
generator as `--workload`), the cache and tier options, and the `prefix_cache` report."""

from __future__ import annotations

import click

from rooftui.core import units
from rooftui.core.arrivals import Arrivals
from rooftui.core.errors import SpecError
from rooftui.core.prefix_cache import POLICIES, TIERS, CacheConfig
from rooftui.core.scheduler import Simulation, summarize
from rooftui.core.sessions import SessionRequests, is_session_source, session_requests
from rooftui.sweeps.cli.options import Number


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
    ]
    for option in reversed(options):
        command = option(command)
    return command


def cache_config(setup: dict) -> CacheConfig | None:
    """The CacheConfig of the options (popped from `setup`), None when off."""
    values = {key: setup.pop(key) for key in (
        "prefix_cache", "cache_capacity_gb", "cpu_tier_gb", "ssd_tier_gb",
        "cpu_tier_bandwidth_gbs", "ssd_tier_bandwidth_gbs")}
    if values["prefix_cache"] == "none":
        given = [f"--{key.replace('_', '-')}" for key in ("cache_capacity_gb",)
                 if values[key] is not None]
        given += [f"--{key.replace('_', '-')}" for key in ("cpu_tier_gb", "ssd_tier_gb")
                  if values[key]]
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
    return lines

