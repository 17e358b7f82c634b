"""Workloads: the prompt and output lengths (and maybe arrivals) a simulation draws from.

Three sources:
- a shipped preset (`specs/workloads/NAME.toml`) or a preset file: quantile tables of
  input and output tokens plus their caps, derived from a public trace by
  `python -m rooftui.sweeps.derive_workloads` (see each file's [sources]); the two
  columns are sampled independently;
- a trace file (CSV here, parquet through the reader `sweep` passes in) with
  `input_tokens`, `output_tokens` and optionally `arrival_s`: requests are drawn as whole
  rows, so the joint law of (input, output) is kept, and `trace` arrivals replay it;
- two distributions (`--input-tokens DIST --output-tokens DIST`), sampled independently.

Random streams: one seed is split into separate streams for inputs, outputs, trace rows
and arrival gaps, so changing the arrival process or one length law leaves the other
draws as they were (common random numbers across compared runs).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from rooftui.core import spec_files
from rooftui.core.arrivals import Arrivals
from rooftui.core.errors import SpecError
from rooftui.core.lengths import (
    ARRIVAL_COLUMN,
    TRACE_COLUMNS,
    Empirical,
    LengthDistribution,
    QuantileTable,
    TraceReader,
    read_trace,
)

TRACE_SUFFIXES = (".csv", ".parquet")
WORKLOAD_KEYS = {"name", "description", "input_tokens", "output_tokens", "arrivals", "sources"}
COLUMN_KEYS = {"quantiles", "values", "cap", "mean", "rows"}
ARRIVAL_KEYS = {"rate_per_s", "interarrival_cv", "span_s"}


@dataclass(frozen=True)
class Requests:
    """The requests of one simulation, in arrival order. Tokens are int64, times s."""

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray

    def __post_init__(self) -> None:
        sizes = {np.size(self.arrival_s), np.size(self.input_tokens), np.size(self.output_tokens)}
        if len(sizes) != 1:
            raise SpecError("requests: arrival, input and output arrays differ in length")
        if np.any(np.diff(self.arrival_s) < 0):
            raise SpecError("requests must be in arrival order")
        if np.size(self.input_tokens) and (np.min(self.input_tokens) < 1
                                           or np.min(self.output_tokens) < 1):
            raise SpecError("requests need at least 1 input and 1 output token")

    def __len__(self) -> int:
        return int(np.size(self.arrival_s))


@dataclass(frozen=True)
class Workload:
    name: str
    input_tokens: LengthDistribution
    output_tokens: LengthDistribution
    rows: dict[str, np.ndarray] | None = None  # a trace: sampled whole rows at a time
    arrival_rate: float | None = None  # requests/s of the source trace, if it had times
    interarrival_cv: float | None = None

    def with_lengths(self, input_tokens: LengthDistribution | None = None,
                     output_tokens: LengthDistribution | None = None) -> Workload:
        """This workload with one or both length laws replaced; rows are then no longer
        drawn jointly."""
        if input_tokens is None and output_tokens is None:
            return self
        return replace(self, input_tokens=input_tokens or self.input_tokens,
                       output_tokens=output_tokens or self.output_tokens, rows=None,
                       name=f"{self.name} (lengths overridden)")

    def requests(self, count: int, arrivals: Arrivals, seed: int) -> Requests:
        """`count` requests: lengths from this workload, times from `arrivals`."""
        if count < 1:
            raise SpecError(f"the number of requests must be >= 1, got {count}")
        input_rng, output_rng, row_rng, arrival_rng = np.random.default_rng(seed).spawn(4)
        if arrivals.replays_trace:
            if self.rows is None or ARRIVAL_COLUMN not in self.rows:
                raise SpecError(f"trace arrivals need a trace file with an {ARRIVAL_COLUMN} "
                                f"column (workload {self.name!r} has none); use "
                                "--workload PATH or another --arrival")
            times, row = arrivals.replay(self.rows[ARRIVAL_COLUMN], count)
            inputs, outputs = (self.rows[name][row] for name in TRACE_COLUMNS)
        else:
            times = arrivals.times(arrival_rng, count)
            if self.rows is not None:
                row = row_rng.integers(0, self.rows[TRACE_COLUMNS[0]].size, count)
                inputs, outputs = (self.rows[name][row] for name in TRACE_COLUMNS)
            else:
                inputs = self.input_tokens.sample(input_rng, count)
                outputs = self.output_tokens.sample(output_rng, count)
        return Requests(arrival_s=np.asarray(times, dtype=np.float64),
                        input_tokens=np.asarray(inputs).astype(np.int64),
                        output_tokens=np.asarray(outputs).astype(np.int64))


def arrival_statistics(arrival_s: np.ndarray) -> tuple[float | None, float | None]:
    """(requests/s over the trace's span, coefficient of variation of the gaps)."""
    if arrival_s.size < 3 or arrival_s[-1] <= arrival_s[0]:
        return None, None
    gaps = np.diff(arrival_s)
    return float((arrival_s.size - 1) / (arrival_s[-1] - arrival_s[0])), float(
        gaps.std() / gaps.mean())


def workload_from_trace(path: Path, reader: TraceReader | None = None) -> Workload:
    rows = read_trace(path, reader)
    rate, cv = (arrival_statistics(rows[ARRIVAL_COLUMN]) if ARRIVAL_COLUMN in rows
                else (None, None))
    return Workload(
        name=Path(path).name,
        input_tokens=Empirical.of(rows["input_tokens"], spec=f"empirical:{path}"),
        output_tokens=Empirical.of(rows["output_tokens"], spec=f"empirical:{path}"),
        rows=rows, arrival_rate=rate, interarrival_cv=cv)


def _column(data: dict, key: str, where: str) -> LengthDistribution:
    table = data.get(key)
    here = f"{where} [{key}]"
    if not isinstance(table, dict):
        raise SpecError(f"{where}: missing table [{key}] (quantiles, values, cap)")
    spec_files.check_keys(table, COLUMN_KEYS, here)
    for name in ("quantiles", "values"):
        if not isinstance(table.get(name), list):
            raise SpecError(f"{here}: missing list {name!r}")
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in table[name]):
            raise SpecError(f"{here}: {name!r} must be a list of numbers")
    distribution = QuantileTable.of(table["quantiles"], table["values"], here)
    cap = spec_files.number(table, "cap", here, bound="token_scale")
    if distribution.upper > cap:
        raise SpecError(f"{here}: the last value {distribution.upper:g} is above the cap {cap:g}")
    return distribution


def workload_from_dict(data: dict, where: str, name: str) -> Workload:
    spec_files.check_keys(data, WORKLOAD_KEYS, where)
    arrivals = data.get("arrivals", {})
    if not isinstance(arrivals, dict):
        raise SpecError(f"{where}: [arrivals] must be a table")
    spec_files.check_keys(arrivals, ARRIVAL_KEYS, f"{where} [arrivals]")
    optional = {key: spec_files.number(arrivals, key, f"{where} [arrivals]", bound=bound)
                if key in arrivals else None
                for key, bound in (("rate_per_s", "rate"), ("interarrival_cv", "interarrival_cv"))}
    return Workload(
        name=str(data.get("name", name)),
        input_tokens=_column(data, "input_tokens", where),
        output_tokens=_column(data, "output_tokens", where),
        arrival_rate=optional["rate_per_s"], interarrival_cv=optional["interarrival_cv"])


def load_workload(name_or_path: str, reader: TraceReader | None = None) -> Workload:
    """A shipped preset by name (`sharegpt-8k`), a preset TOML, or a trace file
    (.csv; .parquet when `reader` can read it)."""
    text = str(name_or_path)
    if Path(text).suffix.lower() in TRACE_SUFFIXES:
        return workload_from_trace(Path(text), reader)
    path = spec_files.resolve("workloads", text)
    return workload_from_dict(spec_files.read_document(path), str(path), text)
