"""Grid kinds whose points are evaluated one at a time: `simulate` (one serving simulation
per point, `sweep simulate`'s engine), `optimize` (one (max batch, token budget)
candidate per point under a TTFT/TPOT objective: its sustained request rate or why it
fails, `sweep optimize`'s engine) and `disagg` (`sweep disagg`'s search per point, in
rooftui.sweeps.kind_disagg). `evaluator_for(grid)` picks the evaluator of a grid's kind;
`step` grids keep the vectorised `Sweep`.

Each evaluator has `Sweep`'s interface, so `sweep run` shards, resumes and distributes
them unchanged: `grid`, `column_types`, `result_types`, `dictionaries`, `input_columns`,
`skipped_points`, `row_groups(start, stop)`, `unsupported_points(start, stop)`,
`estimate_points`.

Rows (the column contract; `sweep chart` and the TUI read them):
- `point_id`, then one column per parameter of the kind (`grid.KIND_PARAMETERS`) that has
  a value: the grid's, or the default; dtypes as the model resolves them; `mfu` and `mbu`
  as `mfu_assumed`, `mbu_assumed` (as in step grids); optional parameters not given
  (`rate`, the SLOs of a simulation, `attainment`, `quantile`, `price_per_gpu_hour`) have
  no column. A `token_budget` of 0 in a simulate grid is the policy's default (static
  batching ignores the budget); `input_tokens` / `output_tokens` "" keep the workload's.
- simulate: `sweep simulate --json`'s metrics, flattened (`ttft_p90_s`, ...), and when
  the grid gives `prefix_cache` the cache's (`prefix_hit_rate`, `prefix_hit_rate_hbm`
  / `_cpu` / `_ssd`, `cached_prefill_tokens`, `computed_prefill_tokens`,
  `load_stall_s`; 0 hits without a cache); with
  `requests` as the parameter and its `output_tokens` as `total_output_tokens`, plus `itl_max_s` (the longest gap between two tokens of a
  request), `static_occupancy` (E[L] / E[max of B] of the output law, exact) and
  `harmonic_occupancy` (1/H_B, the exponential law's); and what the KV cache holds:
  `kv_free_bytes` (the KV capacity in bytes, per GPU), `sequence_tokens_mean` (the mean
  prompt + output tokens of the point's requests: what `reserve` admission holds per
  request) and `kv_sequences` (the requests of that mean length the KV holds at once; a
  max batch above it is never reached).
- optimize: `rooftui.sweeps.optimize.candidate_columns`: status, reason, the sustained
  rate and the metrics there, the capacity, and the analytic pass's numbers.

Points that cannot run (a GPU without a peak for the compute dtype; in simulate grids a
chunked budget below the max batch, or paged KV with static batching) are an error when
the grid is loaded, or dropped with `skip_unsupported = true`. In optimize grids a budget
below the batch is a candidate like any other, rejected with its reason.

Simulations of one configuration share their step costs (built once, for the grid's
largest max batch); optimize points share simulations across objectives (put the SLO
axes last so that neighbouring points, which one worker evaluates in turn, differ only in
the objective).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np

from rooftui.core.arrivals import parse_arrivals
from rooftui.core.assumptions import Assumptions, load_profile
from rooftui.core.closed_forms import exponential_static_occupancy
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.lengths import Empirical, parse_distribution
from rooftui.core.model import load_model
from rooftui.core.occupancy import static_occupancy
from rooftui.core.point import ASSUMPTION_OVERRIDES, PointConfig
from rooftui.core.prefix_cache import TIERS, CacheConfig
from rooftui.core.scheduler import PERCENTILES, SchedulerConfig, StepCosts, simulate, summarize
from rooftui.core.sessions import (
    SessionRequests,
    is_session_source,
    parse_generator,
    session_requests,
)
from rooftui.core.tables import DTYPES
from rooftui.core.workloads import Workload, load_workload
from rooftui.sweeps.derive_workloads import read_trace_file
from rooftui.sweeps.grid import FLAG_KINDS, INTEGER_KINDS, STRING_KINDS, Grid
from rooftui.sweeps.optimize import (
    QUANTILES,
    REASONS,
    STATUSES,
    Objective,
    Problem,
    Server,
    candidate_columns,
    evaluate_candidate,
)

# Points per parquet file: a simulation takes 0.05-1 s, an optimize point (a dozen of them)
# 1-10 s; shards of a few minutes at most, so that a killed run loses little.
# A disagg point (one `sweep disagg`) takes 0.05-0.5 s.
SHARD_POINTS = {"simulate": (16, 256), "optimize": (1, 16), "disagg": (16, 256)}
# Each point is checked when the grid is loaded (~5 µs) and takes 0.05-10 s to evaluate:
# a million is days of work on one core, more is refused before the check loops over it.
MAX_POINTS = 10**6
SETUP_KEYS = ("gpu", "model", "weight_dtype", "kv_dtype", "compute_dtype", "tp",
              *ASSUMPTION_OVERRIDES)
WORKLOAD_KEYS = ("workload", "input_tokens", "output_tokens")
RENAMED = {"mfu": "mfu_assumed", "mbu": "mbu_assumed"}  # as step grids write them
STATISTICS = ("mean", *(f"p{q}" for q in PERCENTILES))
SIMULATE_METRICS = ("duration_s", "throughput_tokens_per_s", "request_throughput",
                    "occupancy", "mean_batch", "preemptions", "steps", "kv_capacity_tokens")
WHOLE_METRICS = ("preemptions", "steps", "kv_capacity_tokens", "total_output_tokens",
                 "cached_prefill_tokens", "computed_prefill_tokens")
PREFIX_METRICS = ("prefix_hit_rate", *(f"prefix_hit_rate_{tier}" for tier in TIERS),
                  "cached_prefill_tokens", "computed_prefill_tokens", "load_stall_s")
SESSIONS_KEPT = 8  # simulate: session workloads' requests kept per process
SERVERS_KEPT = 2  # optimize: served configurations kept per process


def evaluator_for(grid: Grid):
    """The evaluator of a grid's kind: `Sweep` for steps, else a `PointwiseSweep`."""
    if grid.kind == "step":
        from rooftui.sweeps.evaluate import Sweep

        return Sweep(grid)
    if grid.kind == "disagg":
        from rooftui.sweeps.kind_disagg import DisaggSweep  # it builds on PointwiseSweep

        return DisaggSweep(grid)
    return {"simulate": SimulateSweep, "optimize": OptimizeSweep}[grid.kind](grid)


def shard_bounds(kind: str) -> tuple[int, int] | None:
    """(fewest, most) points per shard of a kind evaluated point by point; None for steps."""
    return SHARD_POINTS.get(kind)


class PointwiseSweep:
    """Sweep's interface over points evaluated one at a time (see the module doc)."""

    estimate_points = 2  # `sweep run --dry-run` times this many points
    group_points = 16  # points per yielded row group (progress is reported per group)
    # parameters that are always columns, with the value a point resolves them to
    resolved_parameters = ("weight_dtype", "kv_dtype", "compute_dtype", *ASSUMPTION_OVERRIDES)

    @property
    def result_types(self) -> dict[str, np.dtype]:
        """Every column as a reader sees it: those stored (none is derived on read)."""
        return self.column_types

    def __init__(self, grid: Grid) -> None:
        self.grid = grid
        self.parameters = grid.parameters
        where = str(grid.path)
        if grid.size > MAX_POINTS:
            raise SpecError(f"{where}: a {grid.kind} grid of {grid.size:,} points is more "
                            f"than the {MAX_POINTS:,} a run can check and evaluate one at a "
                            "time; use fewer or shorter axes")
        profile = load_profile(grid.catalog_path(grid.profile)) if grid.profile else Assumptions()
        self.profile = profile
        self.models = {name: load_model(grid.catalog_path(name))
                       for name in grid.values_of("model")}
        self._load_specs()
        self.parameter_columns = tuple(
            name for name in self.parameters
            if grid.given(name) or self.parameters[name].default is not None
            or name in self.resolved_parameters)
        self.dictionaries = {self._column(name): self._names(name)
                             for name in self.parameter_columns
                             if self.parameters[name].kind in STRING_KINDS}
        self.column_types = {"point_id": np.dtype(np.int64)}
        for name in self.parameter_columns:
            self.column_types[self._column(name)] = np.dtype(_dtype(self.parameters[name].kind))
        self.input_columns = tuple(self.column_types)
        self._add_metric_columns()
        self._unsupported = np.zeros(grid.size, dtype=bool)
        for point_id in range(grid.size):
            values = self.values(point_id)
            problem = self._check(values)
            if problem is None:
                continue
            if not grid.skip_unsupported or not problem[1]:
                raise SpecError(f"{where}: {problem[0]}" + (
                    "; set skip_unsupported = true to skip such points" if problem[1] else ""))
            self._unsupported[point_id] = True
        self.skipped_points = int(self._unsupported.sum())
        if self.skipped_points == grid.size:
            raise SpecError(f"{where}: every point is unsupported")

    # --- Sweep's interface ----------------------------------------------------------------
    def row_groups(self, start: int, stop: int) -> Iterator[tuple[dict[str, np.ndarray], int]]:
        """Rows of ids [start, stop) in order, `group_points` points at a time."""
        for first in range(start, stop, self.group_points):
            last = min(stop, first + self.group_points)
            rows = [{"point_id": point_id, **self._row(point_id)}
                    for point_id in range(first, last) if not self._unsupported[point_id]]
            yield self._columns(rows), last - first

    def unsupported_points(self, start: int, stop: int) -> int:
        return int(self._unsupported[start:stop].sum())

    # --- points ---------------------------------------------------------------------------
    def values(self, point_id: int) -> dict[str, Any]:
        """Every parameter at a point: the grid's value, else the default."""
        values = {name: p.default for name, p in self.parameters.items()}
        values |= self.grid.fixed
        remainder = point_id
        for dimension, radix in zip(reversed(self.grid.dimensions),
                                    reversed(self.grid.radices), strict=True):
            remainder, digit = divmod(remainder, radix)
            for axis in dimension.axes:
                values[axis.name] = axis.values[digit]
        return values

    def resolved(self, values: dict[str, Any]) -> dict[str, Any]:
        """The point's values with `resolved_parameters` as the point resolves them."""
        raise NotImplementedError

    def _row(self, point_id: int) -> dict[str, Any]:
        values = self.values(point_id)
        resolved = self.resolved(values)
        row = {self._column(name): resolved[name] for name in self.parameter_columns}
        return row | self.evaluate(values)

    def _load_specs(self) -> None:
        """Read what the points share (spec files), before any point is checked."""

    def _check(self, values: dict[str, Any]) -> tuple[str, bool] | None:
        """Why a point cannot run: (message, whether skip_unsupported may drop it)."""
        raise NotImplementedError

    def evaluate(self, values: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _add_metric_columns(self) -> None:
        raise NotImplementedError

    # --- columns --------------------------------------------------------------------------
    @staticmethod
    def _column(name: str) -> str:
        return RENAMED.get(name, name)

    def _names(self, name: str) -> tuple[str, ...]:
        kind = self.parameters[name].kind
        if kind == "dtype":
            return DTYPES
        if kind == "choice":
            return self.parameters[name].choices
        return tuple(dict.fromkeys((*self.grid.values_of(name), "")))

    def _columns(self, rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
        columns = {}
        for name, dtype in self.column_types.items():
            values = [row[name] for row in rows]
            if name in self.dictionaries:
                names = self.dictionaries[name]
                columns[name] = np.array([names.index(v) for v in values], dtype=np.int32)
            else:
                columns[name] = np.array(values, dtype=dtype)
        return columns


def _dtype(kind: str) -> type:
    if kind in STRING_KINDS:
        return np.int32  # codes into `dictionaries`
    if kind in INTEGER_KINDS:
        return np.int64
    if kind in FLAG_KINDS:
        return np.bool_
    return np.float64


class ServingSweep(PointwiseSweep):
    """A point of a GPU, model, tensor parallelism, workload and scheduler (`simulate`,
    `optimize`): its configuration, workload and step costs, shared between points."""

    def _load_specs(self) -> None:
        self.gpus = {name: load_gpu(self.grid.catalog_path(name))
                     for name in self.grid.values_of("gpu")}
        self.max_batch = max(self.grid.values_of("max_batch"))
        self._configs: dict[tuple, PointConfig] = {}
        self._workloads: dict[tuple, Workload] = {}
        self._costs: OrderedDict[tuple, StepCosts] = OrderedDict()

    def resolved(self, values: dict[str, Any]) -> dict[str, Any]:
        config = self.config(values)
        return (values | {name: getattr(config, f"resolved_{name}")
                          for name in ("weight_dtype", "kv_dtype", "compute_dtype")}
                | {name: getattr(config.assumptions, name) for name in ASSUMPTION_OVERRIDES})

    def config(self, values: dict[str, Any]) -> PointConfig:
        """The point's configuration (GPU, model, dtypes, tp, assumptions, price)."""
        key = (*(values[name] for name in SETUP_KEYS), values.get("price_per_gpu_hour"))
        if key not in self._configs:
            assumptions = self.profile.with_overrides(
                **{name: values[name] for name in ASSUMPTION_OVERRIDES})
            self._configs[key] = PointConfig(
                gpu=self.gpus[values["gpu"]], model=self.models[values["model"]],
                weight_dtype=values["weight_dtype"], kv_dtype=values["kv_dtype"],
                compute_dtype=values["compute_dtype"], tp=values["tp"],
                assumptions=assumptions, price_per_gpu_hour=values.get("price_per_gpu_hour"))
        return self._configs[key]

    def workload(self, values: dict[str, Any]) -> Workload:
        """The point's workload, its lengths overridden as the point gives them."""
        key = tuple(values[name] for name in WORKLOAD_KEYS)
        if key not in self._workloads:
            name, input_tokens, output_tokens = key
            try:
                lengths = {column: parse_distribution(spec, column, read_trace_file)
                           if spec else None for column, spec in
                           (("input_tokens", input_tokens), ("output_tokens", output_tokens))}
                self._workloads[key] = load_workload(self.grid.workload_path(name),
                                                     read_trace_file).with_lengths(**lengths)
            except SpecError as error:
                raise SpecError(f"{self.grid.path} workload {name!r}: {error}") from None
        return self._workloads[key]

    def costs(self, values: dict[str, Any]) -> StepCosts:
        """The step costs of a point's configuration, for the grid's largest max batch."""
        key = tuple(values[name] for name in SETUP_KEYS)
        if key not in self._costs:
            config = self.config(values)
            self._costs[key] = StepCosts(config.step_inputs(), config.assumptions,
                                         self.max_batch)
            if len(self._costs) > 4:
                self._costs.popitem(last=False)
        self._costs.move_to_end(key)
        return self._costs[key]

    def _check(self, values: dict[str, Any]) -> tuple[str, bool] | None:
        config = self.config(values)  # errors about the configuration itself are raised
        dtype = config.resolved_compute_dtype
        if dtype not in config.gpu.tflops:
            return (f"GPU {values['gpu']} has no {dtype} peak (compute_dtype {dtype}; it has "
                    f"{', '.join(config.gpu.tflops)})", True)
        self.workload(values)
        return None


class SimulateSweep(ServingSweep):
    """One `sweep simulate` per point."""

    def _add_metric_columns(self) -> None:
        self._fitting: set[tuple] = set()
        self._occupancy: dict[tuple, float] = {}
        self._sessions: OrderedDict[tuple, SessionRequests] = OrderedDict()
        self._session_traces: dict[str, SessionRequests] = {}
        prefix = PREFIX_METRICS if self.grid.given("prefix_cache") else ()
        for name in (*SIMULATE_METRICS, "total_output_tokens", *prefix):
            self.column_types[name] = np.dtype(np.int64 if name in WHOLE_METRICS else np.float64)
        for metric in ("ttft", "tpot", "itl", "e2e"):
            for statistic in STATISTICS:
                self.column_types[f"{metric}_{statistic}_s"] = np.dtype(np.float64)
        names = ["itl_max_s", "static_occupancy", "harmonic_occupancy"]
        if self.grid.given("slo_ttft") or self.grid.given("slo_tpot"):
            names += ["slo_attainment", "goodput_tokens_per_s"]
        for name in names:
            self.column_types[name] = np.dtype(np.float64)
        self.column_types |= {"kv_free_bytes": np.dtype(np.float64),
                              "sequence_tokens_mean": np.dtype(np.float64),
                              "kv_sequences": np.dtype(np.int64)}

    def scheduler(self, values: dict[str, Any]) -> SchedulerConfig:
        policy = values["policy"]
        budget = values["token_budget"] if policy != "static" and values["token_budget"] else None
        return SchedulerConfig(policy=policy, max_batch=values["max_batch"],
                               token_budget=budget, kv_admission=values["kv_admission"],
                               block_size=values["block_size"])

    def prefix_cache(self, values: dict[str, Any]) -> CacheConfig | None:
        if values["prefix_cache"] == "none":
            return None
        return CacheConfig(policy=values["prefix_cache"], hbm_gb=values["cache_capacity_gb"],
                           cpu_gb=values["cpu_tier_gb"], ssd_gb=values["ssd_tier_gb"])

    def sessions(self, values: dict[str, Any]) -> SessionRequests | None:
        """The point's requests when its workload is a session source, else None."""
        source = self.grid.workload_path(values["workload"])
        if not is_session_source(source):
            return None
        key = (source, self.arrival(values), values["requests"], values["seed"])
        if key not in self._sessions:
            try:
                self._sessions[key] = session_requests(
                    source, parse_arrivals(key[1]), values["requests"], values["seed"],
                    self._session_traces)
            except SpecError as error:
                raise SpecError(f"{self.grid.path} workload {values['workload']!r}: "
                                f"{error}") from None
            if len(self._sessions) > SESSIONS_KEPT:
                self._sessions.popitem(last=False)
        return self._sessions[key]

    def workload(self, values: dict[str, Any]) -> Workload:
        """The point's workload; a session source's is the lengths of its requests."""
        sessions = self.sessions(values)
        if sessions is None:
            return super().workload(values)
        if values["input_tokens"] or values["output_tokens"]:
            raise SpecError(f"{self.grid.path}: session workload {values['workload']!r} has "
                            "its own lengths; input_tokens and output_tokens must be \"\"")
        # the source's own output law, whatever the point's seed and count (static occupancy)
        source = self.grid.workload_path(values["workload"])
        every = self._session_traces.get(source, sessions).requests
        output = (parse_generator(source).output if source.lower().startswith("sessions:")
                  else Empirical.of(every.output_tokens, sessions.name))
        return Workload(sessions.name, Empirical.of(every.input_tokens, sessions.name), output)

    def requests(self, values: dict[str, Any]):
        """(requests, sessions or None) of a point."""
        sessions = self.sessions(values)
        if sessions is not None:
            return sessions.requests, sessions
        return self.workload(values).requests(values["requests"],
                                              parse_arrivals(self.arrival(values)),
                                              values["seed"]), None

    def arrival(self, values: dict[str, Any]) -> str:
        """The point's `sweep simulate --arrival`."""
        kind = values["arrival"]
        if kind in ("poisson", "gamma"):
            if values["rate"] is None:
                raise SpecError(f"{self.grid.path}: {kind} arrivals need a rate (requests/s) "
                                "in [fixed] or [axes]")
            cv = f",cv={values['cv']!r}" if kind == "gamma" else ""
            return f"{kind}:rate={values['rate']!r}{cv}"
        if kind == "trace":
            return f"trace:speed={values['speed']!r}"
        return "closed"

    def _check(self, values):
        problem = super()._check(values)
        if problem is not None:
            return problem
        try:
            scheduler = self.scheduler(values)
        except SpecError as error:
            return (str(error), True)
        if values["prefix_cache"] != "none":
            if self.sessions(values) is None:
                return (f"prefix_cache {values['prefix_cache']} needs a session workload "
                        f"(sessions:... or a session or hash-id trace), not "
                        f"{values['workload']!r}", True)
            if scheduler.policy == "static":
                return ("prefix caching is simulated with policy continuous, chunked or "
                        "prefill_first", True)
        self._check_fit(values)
        return None

    def _check_fit(self, values: dict[str, Any]) -> None:
        """A point whose requests cannot fit the KV cache fails the grid when it is loaded,
        not half-way through a run."""
        key = (*(values[name] for name in SETUP_KEYS), *(values[name] for name in WORKLOAD_KEYS),
               self.arrival(values), values["requests"], values["seed"])
        if key in self._fitting:
            return
        requests = self.requests(values)[0]
        capacity = self.costs(values).kv_capacity_tokens
        longest = int(np.max(requests.input_tokens + requests.output_tokens))
        if longest > capacity:
            config = self.config(values)
            raise SpecError(f"{self.grid.path}: a request of {longest:,} tokens (workload "
                            f"{values['workload']!r}) does not fit the KV cache of "
                            f"{config.model.name} on {config.gpu.name} ({capacity:,} tokens)")
        self._fitting.add(key)

    def static_occupancy(self, values: dict[str, Any]) -> float:
        """E[L] / E[max of B] of the point's output law (exact; see core.occupancy)."""
        key = (*(values[name] for name in WORKLOAD_KEYS), values["max_batch"])
        if key not in self._occupancy:
            self._occupancy[key] = static_occupancy(self.workload(values).output_tokens,
                                                    values["max_batch"])
        return self._occupancy[key]

    def evaluate(self, values: dict[str, Any]) -> dict[str, Any]:
        config = self.config(values)
        requests, sessions = self.requests(values)
        simulation = simulate(config.step_inputs(), config.assumptions, self.scheduler(values),
                              requests, self.costs(values), prefix_cache=self.prefix_cache(values),
                              sessions=sessions, gpu_key=config.gpu.key)
        summary = summarize(simulation, values["slo_ttft"], values["slo_tpot"])
        row = {name: summary[name] for name in SIMULATE_METRICS}
        row["total_output_tokens"] = summary["output_tokens"]  # output_tokens: the parameter
        for metric in ("ttft", "tpot", "itl", "e2e"):
            statistics = summary[f"{metric}_s"] or {}
            for statistic in STATISTICS:
                row[f"{metric}_{statistic}_s"] = statistics.get(statistic, math.nan)
        steps = simulation.steps
        gaps = np.concatenate([steps["duration_s"][steps["decode_tokens"] > 0],
                               simulation.resume_gaps_s])
        row["itl_max_s"] = float(gaps.max()) if gaps.size else math.nan
        row["static_occupancy"] = self.static_occupancy(values)
        row["harmonic_occupancy"] = float(exponential_static_occupancy(values["max_batch"]))
        for name in ("slo_attainment", "goodput_tokens_per_s"):
            if name in self.column_types:
                row[name] = summary[name]
        if "prefix_hit_rate" in self.column_types:
            row |= _prefix_columns(simulation)
        return row | _kv_columns(self.costs(values), requests)


def _kv_columns(costs: StepCosts, requests) -> dict[str, Any]:
    """What the KV cache holds: its bytes, the requests' mean sequence (prompt + output
    tokens) and how many sequences of that length it holds at once (the charts mark a max
    batch above it)."""
    mean = float(np.mean(requests.input_tokens + requests.output_tokens))
    return {"kv_free_bytes": costs.kv_capacity_tokens * costs.kv_bytes_per_token,
            "sequence_tokens_mean": mean,
            "kv_sequences": int(costs.kv_capacity_tokens // mean)}


def _prefix_columns(simulation) -> dict[str, Any]:
    """The prefix cache's columns of a simulate row (no cache: no hits)."""
    stats = simulation.prefix_cache or {"hit_rate": 0.0, "load_stall_s": 0.0,
                                        "hit_rate_by_tier": dict.fromkeys(TIERS, 0.0),
                                        "cached_prefill_tokens": 0}
    row = {"prefix_hit_rate": stats["hit_rate"], "load_stall_s": stats["load_stall_s"],
           "cached_prefill_tokens": stats["cached_prefill_tokens"],
           # what the steps prefilled: the prompts less their hits, recomputes included
           "computed_prefill_tokens": int(simulation.steps["prefill_tokens"].sum())}
    row |= {f"prefix_hit_rate_{tier}": stats["hit_rate_by_tier"][tier] for tier in TIERS}
    return row


class OptimizeSweep(ServingSweep):
    """One optimizer candidate per point: its sustained rate under the point's objective."""

    estimate_points = 1
    group_points = 4  # a row group per 4 points: parquet keeps statistics per group

    def _add_metric_columns(self) -> None:
        priced = self.grid.given("price_per_gpu_hour")
        for name, kind in candidate_columns(priced).items():
            self.column_types[name] = np.dtype(np.int32 if kind is str else kind)
        self.dictionaries["status"] = STATUSES
        self.dictionaries["reason"] = tuple(REASONS)
        self._servers: OrderedDict[tuple, Server] = OrderedDict()

    def objective(self, values: dict[str, Any]) -> Objective:
        return Objective(ttft_s=values["slo_ttft"], tpot_s=values["slo_tpot"],
                         quantile=values["quantile"], attainment=values["attainment"])

    def problem(self, values: dict[str, Any]) -> Problem:
        return Problem(config=self.config(values), workload=self.workload(values),
                       policy=values["policy"], arrival=values["arrival"], cv=values["cv"],
                       kv_admission=values["kv_admission"], block_size=values["block_size"],
                       requests=values["requests"], seed=values["seed"])

    def _check(self, values):
        problem = super()._check(values)
        if problem is not None:
            return problem
        if values["quantile"] is not None and values["quantile"] not in QUANTILES:
            raise SpecError(f"{self.grid.path}: quantile must be one of "
                            f"{', '.join(map(str, QUANTILES))}, got {values['quantile']!r}")
        self.objective(values)
        self.problem(values)
        return None

    def server(self, values: dict[str, Any]) -> Server:
        key = (tuple(values[k] for k in SETUP_KEYS), values.get("price_per_gpu_hour"),
               *(values[k] for k in WORKLOAD_KEYS), values["policy"], values["arrival"],
               values["cv"], values["kv_admission"], values["block_size"],
               values["requests"], values["seed"])
        if key not in self._servers:
            self._servers[key] = Server(self.problem(values), self.max_batch)
            if len(self._servers) > SERVERS_KEPT:
                self._servers.popitem(last=False)
        self._servers.move_to_end(key)
        return self._servers[key]

    def evaluate(self, values: dict[str, Any]) -> dict[str, Any]:
        candidate = evaluate_candidate(self.server(values), self.objective(values),
                                       values["max_batch"], values["token_budget"],
                                       values["rate_tolerance"])
        return candidate.row()
