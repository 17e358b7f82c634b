"""The serving metrics of a `Simulation` (`sweep simulate --json`), under the serving
engines' names: TTFT (first token minus arrival), TPOT = (E2E - TTFT) / (L - 1)
(requests with L > 1 output tokens), ITL (every gap between consecutive tokens of a
request), E2E; occupancy is useful slot-steps (sequences that advanced in a step) over
all slot-steps (B per step)."""

from __future__ import annotations

import math

import numpy as np

from rooftui.core.simulation import Simulation

PERCENTILES = (50, 90, 99)


def weighted_percentiles(values: np.ndarray, weights: np.ndarray, q) -> np.ndarray:
    """`np.percentile(np.repeat(values, weights), q)` (linear interpolation) without
    building the repeated array; weights are non-negative integers."""
    values, weights = np.asarray(values, np.float64), np.asarray(weights, np.int64)
    keep = weights > 0
    values, weights = values[keep], weights[keep]
    order = np.argsort(values, kind="stable")
    values, ends = values[order], np.cumsum(weights[order])
    position = (ends[-1] - 1) * np.asarray(q, np.float64) / 100.0
    low = np.floor(position)
    below = values[np.searchsorted(ends, low, side="right")]
    above = values[np.searchsorted(ends, np.minimum(low + 1, ends[-1] - 1), side="right")]
    return below + (position - low) * (above - below)


def _statistics(values: np.ndarray, weights: np.ndarray | None = None) -> dict | None:
    if weights is None:
        values = values[np.isfinite(values)]
        weights = np.ones(values.size, np.int64)
    if values.size == 0 or weights.sum() == 0:
        return None
    # fsum, not np.dot: a BLAS dot sums in an order that changes with its thread count
    mean = math.fsum(values * weights) / int(weights.sum())
    points = weighted_percentiles(values, weights, PERCENTILES)
    return {"mean": mean, **{f"p{q}": float(v) for q, v in zip(PERCENTILES, points, strict=True)}}


def request_metrics(simulation: Simulation) -> dict[str, np.ndarray]:
    """Per-request TTFT, TPOT, E2E (seconds) as the client sees them (the front end's
    delay on TTFT and E2E); TPOT is NaN for one-token outputs."""
    requests = simulation.requests
    ttft = simulation.first_token_s - simulation.arrivals
    e2e = simulation.finish_s - simulation.arrivals
    later = requests.output_tokens - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(later > 0, (e2e - ttft) / later, np.nan)  # the engine's token pace
    ttft, e2e = ttft + simulation.front_end_s, e2e + simulation.front_end_s
    return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e}


def summarize(simulation: Simulation, slo_ttft: float | None = None,
              slo_tpot: float | None = None) -> dict:
    """The `sweep simulate --json` metrics."""
    requests, steps = simulation.requests, simulation.steps
    per_request = request_metrics(simulation)
    duration = float(np.max(simulation.finish_s))
    output_tokens = int(requests.output_tokens.sum())
    useful = simulation.useful_slots
    # every decode token's gap is its step's duration (decoding sequences run in every
    # step); a sequence resumed after preemption adds its own, longer, gap, and decodes
    # that waited through prefill batches (prefill_first) the time since their last token
    itl_values = np.concatenate([steps["duration_s"], simulation.resume_gaps_s])
    itl_weights = np.concatenate([steps["decode_tokens"],
                                  np.ones(simulation.resume_gaps_s.size, np.int64)])
    stalls = simulation.stall_gaps
    if stalls is not None and stalls.size:
        ends = steps["start_s"] + steps["duration_s"]
        itl_weights[:useful.size] -= np.bincount(stalls[:, 1], stalls[:, 2], useful.size
                                                 ).astype(np.int64)
        itl_values = np.concatenate([itl_values, ends[stalls[:, 1]] - ends[stalls[:, 0]]])
        itl_weights = np.concatenate([itl_weights, stalls[:, 2]])
    result = {
        "requests": len(requests),
        "duration_s": duration,
        "throughput_tokens_per_s": output_tokens / duration,
        "request_throughput": len(requests) / duration,
        "occupancy": float(useful.sum() / (useful.size * simulation.config.max_batch)),
        "mean_batch": float(useful.mean()),
        "preemptions": int(simulation.preemptions.sum()),
        "ttft_s": _statistics(per_request["ttft_s"]),
        "tpot_s": _statistics(per_request["tpot_s"]),
        "itl_s": _statistics(itl_values, itl_weights),
        "e2e_s": _statistics(per_request["e2e_s"]),
        "steps": int(useful.size),
        "output_tokens": output_tokens,
        "kv_capacity_tokens": simulation.kv_capacity_tokens,
    }
    if slo_ttft is not None or slo_tpot is not None:
        met = np.ones(len(requests), dtype=bool)
        if slo_ttft is not None:
            met &= per_request["ttft_s"] <= slo_ttft
        if slo_tpot is not None:
            met &= ~(per_request["tpot_s"] > slo_tpot)  # one-token outputs have no TPOT
        result["slo_attainment"] = float(met.mean())
        result["goodput_tokens_per_s"] = float(requests.output_tokens[met].sum() / duration)
    return result
