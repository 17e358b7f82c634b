"""The serving simulator's step records (`core.scheduler`'s dynamic loop) and the steps it
times in numpy rather than one by one: long stretches of decodes alone, and every step
once all requests have arrived (their order then no longer depends on their times). Both
give `StepCosts.time`'s durations to the bit and sum the clock in step order, so a
simulation is the same whichever way its steps were timed."""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping

import numpy as np

from rooftui.core.step_costs import StepCosts

# per step: start and duration; decode sequences and their summed context; prefill
# tokens and chunks; requests waiting and running (admitted, unfinished) when it started;
# KV tokens held (reserved tokens, or allocated blocks times the block size)
STEP_COLUMNS = ("start_s", "duration_s", "decode_tokens", "decode_context_tokens",
                "prefill_tokens", "prefill_chunks", "waiting", "running", "kv_tokens")


class StepLog(Mapping):
    """STEP_COLUMNS from the dynamic loop's flat records ((start, duration) and the seven
    counts, per step), split into columns when first read: a rate search that reads only
    the requests' times never pays for the conversion."""

    def __init__(self, times: array, counts: array) -> None:
        self._records: tuple[array, array] | None = (times, counts)
        self._columns: dict[str, np.ndarray] = {}

    def _split(self) -> dict[str, np.ndarray]:
        if self._records is not None:
            times, counts = self._records
            time_columns = np.ascontiguousarray(np.frombuffer(times, np.float64).reshape(-1, 2).T)
            count_columns = np.ascontiguousarray(
                np.frombuffer(counts, np.int64).reshape(-1, len(STEP_COLUMNS) - 2).T)
            self._columns = dict(zip(STEP_COLUMNS, [*time_columns, *count_columns],
                                     strict=True))
            self._records = None
        return self._columns

    def __getitem__(self, name: str) -> np.ndarray:
        return self._split()[name]

    def __iter__(self):
        return iter(STEP_COLUMNS)

    def __len__(self) -> int:
        return len(STEP_COLUMNS)


def decode_stretch(costs: StepCosts, batch: int, sum_context: int, sum_window: float,
                    below: int, limit: int, now: float, coming: float,
                    logged: tuple[int, int, int], paged: tuple | None):
    """Up to `limit` steps of `batch` decodes alone from `now`, stopping after the step
    that reaches `coming` (an arrival) and, with `paged` (step, blocks needed per residue,
    blocks in use, blocks), before a step whose new blocks do not fit: what the dynamic
    loop's decode stretch runs step by step, to the bit (durations from
    `StepCosts.decode_times`; the clock summed in step order by np.add.accumulate;
    `now` None: untimed, every step up to `limit`). `logged`: the waiting and running
    counts and KV tokens the records carry. Returns (steps run, the clock after them,
    blocks in use, the step records for `times` (None untimed) and `counts`, the steps'
    summed windowed contexts)."""
    steps = np.arange(limit)
    contexts = sum_context + batch * steps
    windows = np.asarray(sum_window + below * steps, np.float64)
    ran = limit
    if now is not None:
        durations = costs.decode_times(batch, contexts, windows)
        clock = np.add.accumulate(np.concatenate(([now], durations)))  # each step's start
    if now is not None and coming != math.inf:
        reached = np.flatnonzero(clock[1:] >= coming)
        if reached.size:
            ran = int(reached[0]) + 1
    waiting, running, kv_tokens = logged
    kv_used = kv_tokens  # reserved tokens, unless paged
    if paged is not None:
        step, bucket, kv_used, total_blocks = paged
        block = len(bucket)
        held = kv_used + np.cumsum(np.array(bucket)[(-(step + steps)) % block])
        ran = min(ran, int(np.searchsorted(held, total_blocks, side="right")))
        if ran == 0:
            return 0, now, kv_used, None, None, None
        kv_used = int(held[ran - 1])
        kv_tokens = held[:ran] * block
    records = None
    if now is not None:
        now, records = float(clock[ran]), np.column_stack((clock[:ran],
                                                           durations[:ran])).tobytes()
    tallies = np.empty((ran, len(STEP_COLUMNS) - 2), np.int64)
    tallies[:] = (batch, 0, 0, 0, waiting, running, 0)
    tallies[:, 1] = contexts[:ran]
    tallies[:, 6] = kv_tokens
    return ran, now, kv_used, records, tallies.tobytes(), windows[:ran].tobytes()


def time_untimed(costs: StepCosts, untimed_from: int, start: float, times: array,
                  counts: array, windows: array | None, chunk_log: array, events):
    """Times the steps the dynamic loop logged untimed (from step `untimed_from`, whose
    start is `start`): their (start, duration) records join `times`, and the requests'
    first and last tokens and resume gaps set then (ints: the steps done, in `events`)
    become seconds. The durations are `StepCosts.time`'s to the bit, the clock is summed
    in step order."""
    tallies = np.frombuffer(counts, np.int64).reshape(-1, len(STEP_COLUMNS) - 2)[untimed_from:]
    chunks = np.frombuffer(chunk_log, np.int64).reshape(-1, 3)
    durations = costs.step_times(
        tallies[:, 0], tallies[:, 1], tallies[:, 1] if windows is None
        else np.frombuffer(windows, np.float64), chunks[:, 0] - untimed_from, chunks[:, 1],
        chunks[:, 2])
    clock = np.add.accumulate(np.concatenate(([start], durations))).tolist()
    records = np.empty((durations.size, 2))
    records[:, 0], records[:, 1] = clock[:-1], durations
    times.frombytes(records.tobytes())

    def seconds(value):
        return clock[value - untimed_from] if type(value) is int else value

    first, finish, gaps = events
    return ([seconds(value) for value in first], [seconds(value) for value in finish],
            [seconds(gap[1]) - seconds(gap[0]) if type(gap) is tuple else gap for gap in gaps])
