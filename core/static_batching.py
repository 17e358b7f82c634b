"""Static batching (`--policy static`, core/scheduler.py's docstring): a batch is fixed
from its prefill to its longest member's last token, so its steps are timed as one numpy
stretch."""

from __future__ import annotations

import math

import numpy as np

from rooftui.core.simulation import SchedulerConfig, Simulation
from rooftui.core.step_costs import StepCosts
from rooftui.core.step_log import STEP_COLUMNS
from rooftui.core.workloads import Requests


def _static_batches(costs: StepCosts, inputs: np.ndarray, outputs: np.ndarray,
                    bounds: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Step records of static batches, all at once: batch b holds requests
    bounds[b] .. bounds[b+1] - 1 and runs one prefill step then decode steps j = 1 ..
    max(L) - 1, where the members with L > j decode at context I + j. Returns the
    records (no start times) and, per request, the index of its last step."""
    sizes = np.diff(bounds)
    batch_of = np.repeat(np.arange(sizes.size), sizes)  # of each request
    lengths = np.maximum.reduceat(outputs, bounds[:-1])  # steps of each batch
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    total = int(offsets[-1])
    first = offsets[batch_of]  # each request's prefill step
    last = first + outputs - 1

    def over_decodes(begin, end, weights=None):
        """Sum over requests of `weights` on steps begin .. end - 1 (difference array)."""
        delta = np.bincount(begin, weights, total + 1) - np.bincount(end, weights, total + 1)
        return np.cumsum(delta)[:total]

    begin, end = first + 1, first + outputs
    active = np.rint(over_decodes(begin, end)).astype(np.int64)
    j = np.arange(total) - np.repeat(offsets[:-1], lengths)
    sum_context = over_decodes(begin, end, inputs.astype(np.float64)) + j * active
    window = costs.window
    if math.isfinite(window):
        # context I + j stays below the window while j < w - I, then counts as w
        turn = np.clip(first + (int(window) - inputs), begin, end)
        below = over_decodes(begin, turn)
        sum_window = (over_decodes(begin, turn, inputs.astype(np.float64)) + j * below
                      + window * over_decodes(turn, end))
    else:
        sum_window = sum_context
    durations = costs.times(*costs.decode_arrays(active, sum_context, sum_window), active)

    chunk_flops, chunk_bytes = costs.chunk_arrays(inputs, np.zeros(inputs.size))
    per_batch = [[np.bincount(batch_of, part, sizes.size) for part in parts]
                 for parts in (chunk_flops, chunk_bytes)]
    prompts = np.bincount(batch_of, inputs, sizes.size)
    durations[offsets[:-1]] = costs.times(*per_batch, prompts, sizes, 0)  # no decodes
    records = {
        "duration_s": durations,
        "decode_tokens": active,
        "decode_context_tokens": np.rint(sum_context).astype(np.int64),
        "prefill_tokens": np.zeros(total, np.int64),
        "prefill_chunks": np.zeros(total, np.int64),
        "running": active.copy(),
        "kv_tokens": np.repeat(np.bincount(batch_of, inputs + outputs, sizes.size),
                               lengths).astype(np.int64),
    }
    records["prefill_tokens"][offsets[:-1]] = prompts.astype(np.int64)
    records["prefill_chunks"][offsets[:-1]] = sizes
    records["running"][offsets[:-1]] = sizes
    return records, last


def _static_bounds(lengths: np.ndarray, start: int, stop: int, max_batch: int,
                   capacity: int, batches: float = math.inf) -> np.ndarray:
    """Boundaries of up to `batches` batches over requests start .. stop - 1, each the
    longest prefix of at most max_batch requests whose reserved tokens fit the KV."""
    bounds = [start]
    while bounds[-1] < stop and len(bounds) <= batches:
        head = bounds[-1]
        window = lengths[head:min(stop, head + max_batch)]
        bounds.append(head + int(np.count_nonzero(np.cumsum(window) <= capacity)))
    return np.array(bounds)


def run_static(costs: StepCosts, config: SchedulerConfig, requests: Requests) -> Simulation:
    """Static batching. A batch's composition is fixed from its prefill to its longest
    member's last token, so each batch is timed as one vectorised stretch; with closed
    arrivals every batch is known at t = 0 and all are timed in one go."""
    arrival = requests.arrival_s
    inputs, outputs = requests.input_tokens, requests.output_tokens
    lengths = inputs + outputs
    count = len(requests)
    capacity = costs.kv_capacity_tokens
    first = np.empty(count)
    finish = np.empty(count)
    parts: list[dict[str, np.ndarray]] = []
    now, start = 0.0, 0
    while start < count:
        now = max(now, float(arrival[start]))
        arrived = int(np.searchsorted(arrival, now, side="right"))
        # once every request has arrived the remaining batches are fixed: time them all
        bounds = _static_bounds(lengths, start, arrived, config.max_batch, capacity,
                                math.inf if arrived == count else 1)
        records, last = _static_batches(costs, inputs[bounds[0]:bounds[-1]],
                                        outputs[bounds[0]:bounds[-1]], bounds - bounds[0])
        ends = now + np.cumsum(records["duration_s"])
        starts = ends - records["duration_s"]
        members = slice(bounds[0], bounds[-1])
        prefill_steps = np.flatnonzero(records["prefill_chunks"])
        first[members] = np.repeat(ends[prefill_steps], np.diff(bounds))
        finish[members] = ends[last]
        admitted = np.repeat(bounds[1:], np.diff(np.append(prefill_steps, ends.size)))
        records["start_s"] = starts
        records["waiting"] = np.maximum(
            np.searchsorted(arrival, starts, side="right") - admitted, 0)
        parts.append(records)
        now = float(ends[-1])
        start = int(bounds[-1])
    steps = {name: parts[0][name] if len(parts) == 1 else
             np.concatenate([part[name] for part in parts]) for name in STEP_COLUMNS}
    return Simulation(config=config, requests=requests, first_token_s=first, finish_s=finish,
                      preemptions=np.zeros(count, np.int64), steps=steps,
                      resume_gaps_s=np.array([]), kv_capacity_tokens=capacity)
