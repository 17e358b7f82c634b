"""Grid specs for `sweep run`: a TOML file naming the values each step parameter takes.

```toml
name = "default"          # names the output folder: outputs/<name>-<12 hex of the hash>/
kind = "step"             # what a point is: "step" (one serving step, the default),
                          # "simulate" (one serving simulation), "optimize" (the sustained
                          # request rate of one max batch and token budget under an SLO) or
                          # "disagg" (the best disaggregated and aggregated deployments
                          # under TTFT and TPOT objectives, `sweep disagg`)
description = "..."       # optional, free text
profile = "ideal"         # optional assumption profile (a shipped name or a TOML path)
skip_unsupported = false  # true: drop points whose GPU has no peak for the compute dtype

[fixed]                   # one value for every point
prefill = 0
overlap = "parts"

[axes]                    # crossed with each other, in this order (the last varies fastest)
gpu = ["h100-sxm", "h200"]
batch = { start = 1, stop = 1024, scale = "log2" }         # 1, 2, 4, ..., 1024
context = { start = 1024, stop = 8192, step = 1024 }       # linear (the default scale)
mfu = { start = 0.3, stop = 0.9, num = 4, scale = "geometric" }
weight_dtype = ["bf16", "fp8"]
compute_dtype = ["bf16", "fp8"]

[[zip]]                   # pair axes element by element instead of crossing them
axes = ["weight_dtype", "compute_dtype"]

[charts]                  # carried for `sweep chart`; not part of the points
names = ["roofline"]
```

Parameters are the `sweep point` options (see `PARAMETERS`); one that a grid does not
give takes `sweep point`'s default (the model's own KV heads and weight dtype, the
profile's mfu/mbu/reserve). Parallelism (`tp`, `pp`, `ep`, `dp`, `micro_batches`, a
`system`; zip ep with tp and dp), speculative decoding
(`spec_tokens`, `acceptance`, `draft_model`), the experts' format, a price and energy
are columns only in grids that give them; where such a grid crosses spec_tokens 0 with
acceptance values, the acceptance does nothing at 0. Paths to GPU or model files are relative to the grid file.
The other kinds have their own parameters (`KIND_PARAMETERS`: `sweep simulate`'s,
`sweep optimize`'s and `sweep disagg`'s options), evaluated one point at a time
(rooftui.sweeps.kinds). A disagg grid that names no `[charts]` renders none (no chart
reads its rows yet).

Points: every axis (or zipped group of axes) is one digit of a mixed-radix number, the
first axis most significant; a point's id is that number, so ids are dense, deterministic
and need no table. A contiguous id range splits into a few rectangular `Block`s, each a
sub-grid the vectorised core evaluates by broadcasting, without materialising the grid.

The spec hash is the sha256 of `canonical()`: the expanded axes, the fixed values, the
parsed GPU, model, profile and workload files the grid names, the sha256 of every data
file it reads (traces, `empirical:PATH` length laws) and `MODEL_VERSION` (editing a GPU's
bandwidth or a length file changes the hash; reformatting the grid, its `description` or
its `[charts]` do not). An upgrade that changes a formula bumps `MODEL_VERSION`, so its
results go to a folder of their own.

Bounded before any work: a range's length is computed before it is expanded, and an axis
of more than `MAX_AXIS_VALUES` values or a grid of more points than `limits.BOUNDS
["points"]` is refused; every value is checked against its `limits.BOUNDS` entry (or its
kind's range), so no NaN, infinity or overflow reaches the evaluators.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from rooftui.core import limits, spec_files
from rooftui.core.assumptions import ATTENTION_FLOPS, OVERLAPS
from rooftui.core.dtypes import check_dtype
from rooftui.core.errors import SpecError
from rooftui.core.point import ASSUMPTION_OVERRIDES, PointConfig
from rooftui.core.prefix_cache import POLICIES as PREFIX_POLICIES
from rooftui.core.scheduler import KV_ADMISSIONS, POLICIES
from rooftui.core.sessions import GENERATOR_PREFIX
from rooftui.core.workloads import TRACE_SUFFIXES

GRID_KEYS = {"name", "kind", "description", "profile", "skip_unsupported", "fixed", "axes",
             "zip", "charts"}
KINDS = ("step", "simulate", "optimize", "disagg")
SCALES = ("linear", "log2", "geometric")
RANGE_KEYS = {"start", "stop", "scale", "step", "num"}
ZIP_KEYS = {"axes"}
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
DEFAULT_GPU = "h100-sxm"  # as `sweep point`
DEFAULT_MODEL = "llama-3-8b"
# Bump when a formula of the core or of an evaluator changes what a point's row holds:
# it is part of every spec hash, so results of the old formulas are never resumed into.
MODEL_VERSION = 2  # 2: simulate rows gained kv_free_bytes, sequence_tokens_mean, kv_sequences
MAX_AXIS_VALUES = 1 << 20  # values of one axis: ~40 MB as Python numbers

# Value kinds: how a parameter's values are checked, and the type of its parquet column.
STRING_KINDS = {"gpu", "model", "dtype", "choice", "workload", "distribution", "system"}
INTEGER_KINDS = {"count", "positive_count"}
FLOAT_KINDS = {"fraction", "probability", "amount", "positive"}
FLAG_KINDS = {"flag"}
# the range of a numeric value whose name has no `limits.BOUNDS` entry
KIND_BOUNDS = {
    "count": limits.Bound(0, 10**9, integer=True),
    "positive_count": limits.Bound(1, 10**9, integer=True),
    "fraction": limits.Bound(0, 1, min_open=True),
    "probability": limits.Bound(0, 1),
    "amount": limits.Bound(0, 10**15),
    "positive": limits.Bound(0, 10**15, min_open=True),
}


@dataclass(frozen=True)
class Parameter:
    """One input of a step, as a grid names it."""

    kind: str  # gpu, model, system, dtype, choice, workload, distribution, count, positive_count,
    # fraction (0, 1], probability [0, 1], amount, positive, flag
    meaning: str  # with its unit
    default: Any = None  # when the grid does not give it; None: resolved per point
    choices: tuple[str, ...] = ()
    fixed_only: bool = False  # changes what is counted: one value per grid
    # a parquet column only when the grid gives it (its default adds nothing to a step)
    column_when_given: bool = False
    bound: str = ""  # the `limits.BOUNDS` entry of its values when not its own name's


_POINT_DEFAULTS = {f.name: f.default for f in fields(PointConfig)}

PARAMETERS: dict[str, Parameter] = {
    "gpu": Parameter("gpu", "GPU: a shipped name or a GPU TOML path", DEFAULT_GPU),
    "model": Parameter("model", "model: a shipped name, a model TOML or a config.json",
                       DEFAULT_MODEL),
    "batch": Parameter("count", "decode sequences in the step", _POINT_DEFAULTS["batch"]),
    "context": Parameter("count", "tokens cached per decode sequence",
                         _POINT_DEFAULTS["context"]),
    "prefill": Parameter("count", "prefill tokens in the step", _POINT_DEFAULTS["prefill"]),
    "prefill_context": Parameter("count", "tokens of the prefilled prompt already cached",
                                 _POINT_DEFAULTS["prefill_context"]),
    "kv_heads": Parameter("positive_count", "KV heads [default: the model's own]"),
    "group_size": Parameter("positive_count",
                            "query heads per KV head: sets kv_heads = heads / group_size"),
    "weight_dtype": Parameter("dtype", "weight format [default: the model's]"),
    "kv_dtype": Parameter("dtype", "KV-cache format [default: bf16; fp16 for fp16 models]"),
    "compute_dtype": Parameter("dtype", "matmul format [default: follows the weights]"),
    "expert_dtype": Parameter("dtype", "routed experts' format (MoE) [default: the model's "
                              "own when the weights are, else the weights']",
                              column_when_given=True),
    "tp": Parameter("positive_count", "GPUs one replica is split over (tensor "
                    "parallelism; adds the communication part)", 1, column_when_given=True),
    "pp": Parameter("positive_count", "pipeline stages (adds pipeline_transfer)", 1,
                    column_when_given=True),
    "ep": Parameter("positive_count", "GPUs the routed experts are split over: 1 or tp x dp "
                    "(zip it with tp and dp; adds all_to_all)", 1, column_when_given=True),
    "dp": Parameter("positive_count", "data-parallel attention groups of tp GPUs per stage",
                    1, column_when_given=True),
    "micro_batches": Parameter("positive_count", "micro-batches over the pipeline "
                               "[default: pp]", column_when_given=True),
    "system": Parameter("system", "system (sweep specs list systems): its GPU, and the links "
                        "collectives cross [default: the GPU's interconnect]",
                        column_when_given=True),
    "spec_tokens": Parameter("count", "speculative decoding: tokens drafted per sequence "
                             "and step (needs acceptance)", 0, column_when_given=True),
    "acceptance": Parameter("probability", "each drafted token's acceptance rate, 0 to 1",
                            column_when_given=True),
    "draft_model": Parameter("model", "the draft model (a shipped name or a file) "
                             "[default: drafting costs nothing]", column_when_given=True),
    "mfu": Parameter("fraction", "fraction of dense peak FLOP/s reached [default: profile]"),
    "mbu": Parameter("fraction", "fraction of peak bandwidth reached [default: profile]"),
    "memory_reserve_gb": Parameter("amount", "GB held back from the KV cache [default: profile]"),
    "tpot_budget": Parameter("positive", "seconds: adds max_batch_for_tpot [default: none]",
                             column_when_given=True),
    "price_per_gpu_hour": Parameter("amount", "adds cost_per_million_tokens (price per "
                                    "GPU-hour)", column_when_given=True),
    "energy": Parameter("flag", "adds energy_j_per_token from each GPU's board power "
                        "(tdp_w)", False, fixed_only=True, column_when_given=True),
    "overlap": Parameter("choice", "parts or full [default: profile]", choices=OVERLAPS,
                         fixed_only=True),
    "attention_flops": Parameter("choice", "causal or full [default: profile]",
                                 choices=ATTENTION_FLOPS, fixed_only=True),
    "activation_traffic": Parameter("flag", "count hidden-state traffic [default: profile]",
                                    fixed_only=True),
    "kv_write": Parameter("flag", "count writing new K and V [default: profile]",
                          fixed_only=True),
}
CATALOG = {"gpu": "gpus", "model": "models", "draft_model": "models",  # naming spec files
           "system": "systems"}

# The simulator's configuration: GPU, model, dtypes and assumptions as for a step (no
# what-if KV heads), tensor parallelism, and `sweep simulate`'s scheduler and workload.
_SETUP = {name: PARAMETERS[name] for name in (
    "gpu", "model", "weight_dtype", "kv_dtype", "compute_dtype", *ASSUMPTION_OVERRIDES)}
_SERVING = {
    "tp": Parameter("positive_count", "GPUs one replica is split over (tensor parallelism)", 1),
    "max_batch": Parameter("positive_count", "sequences in flight at most (slots)", 128),
    "kv_admission": Parameter("choice", "reserve (whole sequences) or paged (blocks with "
                              "recompute preemption)", "reserve", choices=KV_ADMISSIONS),
    "block_size": Parameter("positive_count", "tokens per KV block (paged)", 16),
    "workload": Parameter("workload", "length preset (sweep specs list workloads), preset "
                          "TOML or trace CSV/parquet", "sharegpt-8k"),
    "input_tokens": Parameter("distribution", "prompt lengths instead of the workload's "
                              "(fixed:N, exp:mean=M, ...); \"\": the workload's", ""),
    "output_tokens": Parameter("distribution", "output lengths instead of the workload's; "
                               "\"\": the workload's", ""),
    "cv": Parameter("positive", "coefficient of variation of the gaps (gamma arrivals)", 1.0),
    "requests": Parameter("positive_count", "requests per simulation", 1000),
    "seed": Parameter("count", "seed of the length and arrival draws", 0),
}
SIMULATE_PARAMETERS: dict[str, Parameter] = {
    **_SETUP, **_SERVING,
    "policy": Parameter("choice", "static, continuous, chunked or prefill_first (SGLang's: "
                        "a step prefills or decodes, never both; sweep simulate --help)",
                        "continuous", choices=POLICIES),
    "token_budget": Parameter("count", "tokens per step; 0: the policy's default (chunked "
                              "512, prefill_first 8192, continuous no cap; static has none)",
                              0),
    "arrival": Parameter("choice", "closed, poisson, gamma or trace", "closed",
                         choices=("closed", "poisson", "gamma", "trace")),
    "rate": Parameter("positive", "requests/s (poisson, gamma)"),
    "speed": Parameter("positive", "trace replay speed-up (trace)", 1.0),
    "slo_ttft": Parameter("positive", "seconds: adds slo_attainment and goodput"),
    "slo_tpot": Parameter("positive", "seconds: adds slo_attainment and goodput"),
    # prefix caching (core.prefix_cache): a session workload, `sessions:...` or a trace
    "prefix_cache": Parameter("choice", "lru or none: keep KV blocks of earlier prompts "
                              "for later ones (session workloads)", "none",
                              choices=PREFIX_POLICIES),
    "cache_capacity_gb": Parameter("amount", "GB of HBM per GPU for the prefix cache "
                                   "[default: what the running batch leaves free]"),
    "cpu_tier_gb": Parameter("amount", "GB of host memory per GPU below HBM", 0.0),
    "ssd_tier_gb": Parameter("amount", "GB of local SSD per GPU below the CPU tier", 0.0),
}
OPTIMIZE_PARAMETERS: dict[str, Parameter] = {
    **_SETUP, **_SERVING,
    "policy": Parameter("choice", "chunked or continuous (the search's analytic pass models "
                        "mixed steps: not prefill_first)", "chunked",
                        choices=("chunked", "continuous")),
    "token_budget": Parameter("positive_count", "tokens per step (chunked: shared with the "
                              "decodes; continuous: a cap)", 512),
    "arrival": Parameter("choice", "poisson, gamma (with cv) or trace (replayed, sped up)",
                         "poisson", choices=("poisson", "gamma", "trace")),
    "slo_ttft": Parameter("positive", "seconds: time-to-first-token objective", 2.0),
    "slo_tpot": Parameter("positive", "seconds: time-per-output-token objective", 0.1),
    "quantile": Parameter("fraction", "0.5, 0.9 or 0.99: that quantile of TTFT and of TPOT "
                          "within its objective [default: none, attainment decides]"),
    "attainment": Parameter("fraction", "share of requests meeting both objectives "
                            "[default: 0.9 without a quantile]"),
    "rate_tolerance": Parameter("positive", "relative width at which the rate bisection "
                                "stops", 0.02),
    "price_per_gpu_hour": Parameter("amount", "adds the cost per million tokens"),
}
# `sweep disagg`'s options, with its defaults; a length given replaces the workload's mean
DISAGG_PARAMETERS: dict[str, Parameter] = {
    "model": replace(PARAMETERS["model"], default="llama-3-70b"),
    "system": Parameter("system", "system (sweep specs list systems): its GPU, domain and "
                        "network", "hgx-h200-ib"),
    "workload": Parameter("workload", "length preset (sweep specs list workloads), preset "
                          "TOML or trace CSV/parquet: its mean prompt and output lengths",
                          "sharegpt-8k"),
    "input_tokens": Parameter("positive_count", "prompt length instead of the workload's "
                              "mean", bound="tokens"),
    "output_tokens": Parameter("positive_count", "output length instead of the workload's "
                               "mean", bound="tokens"),
    "slo_ttft": Parameter("positive", "seconds: mean time-to-first-token objective", 1.0),
    "slo_tpot": Parameter("positive", "seconds: time-per-output-token objective", 0.05),
    **{name: PARAMETERS[name] for name in ("weight_dtype", "expert_dtype")},
    "kv_dtype": Parameter("dtype", "KV-cache format", "bf16"),
    "compute_dtype": PARAMETERS["compute_dtype"],
    "max_gpus": Parameter("positive_count", "GPUs a deployment may use", 64),
    "price_per_gpu_hour": Parameter("amount", "adds the cost per hour and per million "
                                    "output tokens"),
    **{name: PARAMETERS[name] for name in ASSUMPTION_OVERRIDES},
}
KIND_PARAMETERS = {"step": PARAMETERS, "simulate": SIMULATE_PARAMETERS,
                   "optimize": OPTIMIZE_PARAMETERS, "disagg": DISAGG_PARAMETERS}


@dataclass(frozen=True)
class Axis:
    name: str
    values: tuple


@dataclass(frozen=True)
class Dimension:
    """One digit of a point id: a lone axis, or zipped axes that advance together."""

    axes: tuple[Axis, ...]

    @property
    def size(self) -> int:
        return len(self.axes[0].values)


@dataclass(frozen=True)
class Block:
    """A rectangular sub-grid: the leading dimensions at the digits in `prefix`, the next
    over digits lo .. lo + shape[0] - 1, every later one in full (`shape` covers those).
    Its points, in C order, are the ids start .. start + size - 1."""

    start: int
    prefix: tuple[int, ...]
    lo: int
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def digits(self) -> list[np.ndarray | int]:
        """Each dimension's digit: an int for the fixed leading ones, else an int64 array
        shaped to broadcast along its own numpy axis of `shape`."""
        digits: list[np.ndarray | int] = list(self.prefix)
        for axis, length in enumerate(self.shape):
            first = self.lo if axis == 0 else 0
            shape = [1] * len(self.shape)
            shape[axis] = length
            digits.append(np.arange(first, first + length, dtype=np.int64).reshape(shape))
        return digits


@dataclass(frozen=True)
class Grid:
    name: str
    kind: str
    profile: str | None
    skip_unsupported: bool
    fixed: dict[str, Any]
    dimensions: tuple[Dimension, ...]
    charts: dict[str, Any]
    description: str
    text: str  # the file, verbatim
    path: Path
    specs: dict[str, Any] = field(repr=False)  # parsed GPU/model/profile files, for the hash

    # --- shape -------------------------------------------------------------------------
    @property
    def axes(self) -> tuple[Axis, ...]:
        return tuple(axis for dim in self.dimensions for axis in dim.axes)

    @property
    def radices(self) -> tuple[int, ...]:
        return tuple(dim.size for dim in self.dimensions)

    @property
    def size(self) -> int:
        """Points in the grid: the product of the dimensions' sizes."""
        return math.prod(self.radices)

    @property
    def parameters(self) -> dict[str, Parameter]:
        """The parameters a point of this kind has."""
        return KIND_PARAMETERS[self.kind]

    def given(self, name: str) -> bool:
        return name in self.fixed or any(axis.name == name for axis in self.axes)

    def values_of(self, name: str) -> tuple:
        """The distinct values a parameter takes (its default alone when not given)."""
        if name in self.fixed:
            return (self.fixed[name],)
        for axis in self.axes:
            if axis.name == name:
                return axis.values
        return (self.parameters[name].default,)

    def catalog_path(self, name: str) -> str:
        """Where a GPU or model name resolves from: relative paths start at the grid file."""
        if spec_files.looks_like_path(name) and not Path(name).expanduser().is_absolute():
            return str(self.path.parent / name)
        return name

    def workload_path(self, name: str) -> str:
        """A workload preset name as is; a preset or trace file relative to the grid file."""
        if name.lower().startswith(GENERATOR_PREFIX):
            return name  # generated sessions: the spec is the workload
        is_file = name.lower().endswith(TRACE_SUFFIXES) or spec_files.looks_like_path(name)
        if is_file and not Path(name).expanduser().is_absolute():
            return str(self.path.parent / name)
        return name

    def block_unit(self, max_points: int) -> int:
        """The stride of the coarsest dimension that fits in `max_points`: `blocks` cuts
        an id range whose ends are multiples of it into blocks of whole multiples of it,
        with no small pieces of the finer dimensions at its edges."""
        strides = (math.prod(self.radices[d + 1:]) for d in range(len(self.radices)))
        return next((stride for stride in strides if stride <= max_points), 1)

    def blocks(self, start: int, stop: int, max_points: int | None = None):
        """Rectangular blocks covering ids [start, stop) in order, each of at most
        `max_points` points (about 2 per dimension more than stop - start / max_points)."""
        radices = self.radices
        if not radices:  # no axes: the grid is one point
            if start < stop:
                yield Block(0, (), 0, ())
            return
        limit = max_points or self.size
        strides = [math.prod(radices[d + 1:]) for d in range(len(radices))]
        at = start
        while at < stop:
            for d, stride in enumerate(strides):  # the coarsest aligned dimension that fits
                if stride > limit or at % stride:
                    continue
                digit = at // stride % radices[d]
                count = min((stop - at) // stride, radices[d] - digit, limit // stride)
                if count:
                    break
            prefix = tuple(at // strides[j] % radices[j] for j in range(d))
            yield Block(at, prefix, digit, (count, *radices[d + 1:]))
            at += count * stride

    # --- identity ----------------------------------------------------------------------
    def canonical(self) -> dict[str, Any]:
        """What decides the points, in a fixed form: the hash covers exactly this."""
        return {
            "name": self.name,
            "kind": self.kind,
            "profile": self.profile,
            "skip_unsupported": self.skip_unsupported,
            "fixed": dict(sorted(self.fixed.items())),
            "dimensions": [[{"axis": a.name, "values": list(a.values)} for a in dim.axes]
                           for dim in self.dimensions],
            "specs": self.specs,
            "model_version": MODEL_VERSION,
        }

    @cached_property
    def canonical_text(self) -> str:
        return canonical_json(self.canonical())

    @cached_property
    def spec_hash(self) -> str:
        return hashlib.sha256(self.canonical_text.encode()).hexdigest()


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


# --- parsing ---------------------------------------------------------------------------
def load_grid(path: str | Path) -> Grid:
    """Read and validate a grid file: every error names the file and the key."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(f"{path}: cannot read the grid: {error}") from None
    return parse_grid(text, path)


def parse_grid(text: str, path: Path) -> Grid:
    """A `Grid` from TOML text; `path` names it in errors and anchors relative paths."""
    import tomllib

    where = str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{where}: invalid TOML: {error}") from None
    spec_files.check_keys(data, GRID_KEYS, where)

    name = data.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise SpecError(f"{where}: key 'name' must be a name of letters, digits, '.', '_' "
                        f"or '-' (it names the output folder), got {name!r}")
    kind = data.get("kind", "step")
    if kind not in KINDS:
        raise SpecError(f"{where}: key 'kind' must be one of {', '.join(KINDS)}, got {kind!r}")
    profile = data.get("profile")
    if profile is not None and (not isinstance(profile, str) or not profile):
        raise SpecError(f"{where}: key 'profile' must be a profile name or path, got {profile!r}")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise SpecError(f"{where}: key 'description' must be a string")
    skip_unsupported = spec_files.flag(data, "skip_unsupported", where, False)
    charts = _table(data, "charts", where)
    # a bad [charts] entry must fail before the points are computed, not after
    from rooftui.sweeps.charts import chart_settings

    chart_settings(charts, f"{where} [charts]", kind=kind)
    if kind == "disagg" and "names" not in charts:
        charts = {**charts, "names": []}  # no chart reads its rows: not the step charts

    parameters = KIND_PARAMETERS[kind]
    fixed = {}
    for key, value in _table(data, "fixed", where).items():
        parameter = _parameter(key, f"{where} [fixed]", parameters)
        fixed[key] = _check_value(key, parameter, value, f"{where} [fixed] {key}")

    axes: dict[str, Axis] = {}
    for key, spec in _table(data, "axes", where).items():
        parameter = _parameter(key, f"{where} [axes]", parameters)
        here = f"{where} [axes] {key}"
        if parameter.fixed_only:
            raise SpecError(f"{here}: {key} changes what is counted, so it can only be one "
                            "value per grid: move it to [fixed]")
        if key in fixed:
            raise SpecError(f"{here}: {key} is also in [fixed]; give it in one place")
        axes[key] = Axis(key, _axis_values(key, parameter, spec, here))
    if all(name in axes or name in fixed for name in ("kv_heads", "group_size")):
        raise SpecError(f"{where}: give kv_heads or group_size, not both "
                        "(group_size sets kv_heads = heads / group_size)")

    dimensions = _dimensions(axes, data.get("zip", []), where)
    size = math.prod(dimension.size for dimension in dimensions)
    if size > limits.BOUNDS["points"].maximum:
        shape = " × ".join(f"{dimension.size:,}" for dimension in dimensions)
        raise SpecError(f"{where}: the grid has {size:,} points ({shape}), more than "
                        f"{limits.BOUNDS['points'].maximum:,}; use fewer or shorter axes")
    for dimension in dimensions:  # zipped axes may repeat a value, not a combination
        combinations = list(zip(*(axis.values for axis in dimension.axes), strict=True))
        if len(set(combinations)) == len(combinations):
            continue
        seen = set()
        for value in combinations:
            if value in seen:
                names = " and ".join(axis.name for axis in dimension.axes)
                shown = value[0] if len(value) == 1 else value
                raise SpecError(f"{where} [axes] {names}: value {shown!r} appears twice; "
                                "each point must be unique")
            seen.add(value)
    grid = Grid(name=name, kind=kind, profile=profile, skip_unsupported=skip_unsupported,
                fixed=fixed, dimensions=dimensions, charts=charts, description=description,
                text=text, path=path, specs={})
    return _with_specs(grid, where)


def _table(data: dict, key: str, where: str) -> dict:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise SpecError(f"{where}: [{key}] must be a table")
    return value


def _parameter(key: str, where: str, parameters: dict[str, Parameter]) -> Parameter:
    if key not in parameters:
        spec_files.check_keys({key: None}, set(parameters), where)
    return parameters[key]


def _axis_values(key: str, parameter: Parameter, spec: Any, where: str) -> tuple:
    if isinstance(spec, dict):
        if parameter.kind not in INTEGER_KINDS | FLOAT_KINDS:
            raise SpecError(f"{where}: a range needs a numeric axis; list the values instead")
        values = _expand_range(parameter, spec, where)
        # a range is monotone: its ends in range put every value in range
        for value in (values[0], values[-1]):
            _check_value(key, parameter, value, where)
        return tuple(values)
    if not isinstance(spec, list):
        raise SpecError(f"{where}: expected a list of values or a range table "
                        "{ start, stop, scale, step | num }")
    if not spec:
        raise SpecError(f"{where}: the axis is empty; give at least one value")
    if len(spec) > MAX_AXIS_VALUES:
        raise SpecError(f"{where}: {len(spec):,} values, more than the {MAX_AXIS_VALUES:,} "
                        "an axis may hold")
    return tuple(_check_value(key, parameter, value, where) for value in spec)


def _expand_range(parameter: Parameter, spec: dict, where: str) -> list:
    spec_files.check_keys(spec, RANGE_KEYS, where)
    scale = spec.get("scale", "linear")
    if scale not in SCALES:
        raise SpecError(f"{where}: scale must be one of {', '.join(SCALES)}, got {scale!r}")
    positive = scale != "linear"
    start = spec_files.number(spec, "start", where, strict=positive)
    stop = spec_files.number(spec, "stop", where, strict=positive)
    if stop < start:
        raise SpecError(f"{where}: stop ({stop:g}) is below start ({start:g})")
    if "num" in spec:
        num = int(spec_files.number(spec, "num", where, minimum=1, integer=True))
        if num == 1 and stop != start:
            raise SpecError(f"{where}: num = 1 needs start = stop")
    if scale == "log2":
        for key in ("step", "num"):
            if key in spec:
                raise SpecError(f"{where}: a log2 range doubles from start to stop; "
                                f"drop {key!r}")
        count = math.floor(math.log2(stop / start) + 1e-9) + 1
    elif scale == "geometric":
        if "num" not in spec or "step" in spec:
            raise SpecError(f"{where}: a geometric range needs 'num' (points from start to "
                            "stop), not 'step'")
        count = num
    elif "num" in spec:
        if "step" in spec:
            raise SpecError(f"{where}: give 'step' or 'num', not both")
        count = num
    else:
        step = spec_files.number(spec, "step", where, default=1.0, strict=True)
        count = math.floor((stop - start) / step + 1e-9) + 1
    if count > MAX_AXIS_VALUES:  # counted before anything is materialised
        raise SpecError(f"{where}: the range gives {count:,} values, more than the "
                        f"{MAX_AXIS_VALUES:,} an axis may hold; use a larger step, fewer "
                        "points (num) or a log2 scale")
    if scale == "log2":
        values = start * 2.0 ** np.arange(count)
    elif scale == "geometric":
        values = np.geomspace(start, stop, num)
    elif "num" in spec:
        values = np.linspace(start, stop, num)
    else:
        values = start + step * np.arange(count)
    if parameter.kind in INTEGER_KINDS:
        rounded = np.rint(values)
        if scale != "geometric" and not np.allclose(values, rounded, rtol=0, atol=1e-9):
            raise SpecError(f"{where}: this range gives fractional values for a whole-number "
                            "axis; choose start, stop and step that are whole")
        if len(np.unique(rounded)) < len(rounded):
            raise SpecError(f"{where}: rounded to whole numbers the range repeats values; "
                            "use fewer points (num) or a wider range")
        return rounded.astype(np.int64).tolist()
    return values.tolist()


def _check_value(key: str, parameter: Parameter, value: Any, where: str) -> Any:
    """The value in canonical form (ints for counts, floats for fractions), or an error."""
    kind = parameter.kind
    if kind in STRING_KINDS:
        if not isinstance(value, str) or not (value or kind == "distribution"):
            raise SpecError(f"{where}: expected a name (a string), got {value!r}")
        if kind == "dtype":
            try:
                check_dtype(value, key.replace("_", " "))
            except SpecError as error:
                raise SpecError(f"{where}: {error}") from None
        elif kind == "choice" and value not in parameter.choices:
            raise SpecError(f"{where}: expected one of {', '.join(parameter.choices)}, "
                            f"got {value!r}")
        return value
    if kind in FLAG_KINDS:
        if not isinstance(value, bool):
            raise SpecError(f"{where}: expected true or false, got {value!r}")
        return value
    bound, of_kind = limits.BOUNDS.get(parameter.bound or key), KIND_BOUNDS[kind]
    if bound is None or bound.integer != of_kind.integer:
        bound = of_kind
    elif of_kind.minimum != bound.minimum:  # the kind's minimum wins: a simulation's
        # token_budget 0 is its default; a disagg prompt (the "tokens" bound) is at least 1
        bound = replace(bound, minimum=of_kind.minimum, min_open=of_kind.min_open)
    return bound.check(value, key, where)


def _dimensions(axes: dict[str, Axis], zips: Any, where: str) -> tuple[Dimension, ...]:
    if not isinstance(zips, list) or not all(isinstance(z, dict) for z in zips):
        raise SpecError(f"{where}: 'zip' must be tables [[zip]] with axes = [\"a\", \"b\"]")
    group_of: dict[str, tuple[str, ...]] = {}
    for number, table in enumerate(zips, start=1):
        here = f"{where} [[zip]] #{number}"
        spec_files.check_keys(table, ZIP_KEYS, here)
        names = table.get("axes")
        if not isinstance(names, list) or len(names) < 2:
            raise SpecError(f"{here}: 'axes' must list two or more axes to pair")
        for name in names:
            if name not in axes:
                raise SpecError(f"{here}: {name!r} is not in [axes]; zip pairs axes listed there")
            if name in group_of:
                raise SpecError(f"{here}: {name!r} is already zipped; an axis joins one zip")
        lengths = {name: len(axes[name].values) for name in names}
        if len(set(lengths.values())) > 1:
            described = ", ".join(f"{n} has {k}" for n, k in lengths.items())
            raise SpecError(f"{here}: zipped axes need the same number of values ({described})")
        for name in names:
            group_of[name] = tuple(names)
    dimensions, placed = [], set()
    for name in axes:  # a zipped group sits where its first-listed member is
        if name in placed:
            continue
        group = group_of.get(name, (name,))
        dimensions.append(Dimension(tuple(axes[member] for member in group)))
        placed.update(group)
    return tuple(dimensions)


def _with_specs(grid: Grid, where: str) -> Grid:
    """Check that every GPU, model and profile name resolves, and record the parsed files
    (part of the hash: the points depend on their numbers)."""
    specs: dict[str, Any] = {"gpus": {}, "models": {}, "profile": None}
    for parameter, kind in CATALOG.items():
        if parameter not in grid.parameters or not grid.given(parameter) and (
                grid.parameters[parameter].default is None):
            continue
        for name in grid.values_of(parameter):
            try:
                path = spec_files.resolve(kind, grid.catalog_path(name))
            except SpecError as error:
                raise SpecError(f"{where} {parameter}: {error}") from None
            # (systems only where a grid names one, so older grids keep their hash)
            specs.setdefault(kind, {})[name] = spec_files.read_document(path)
    if grid.profile is not None:
        try:
            path = spec_files.resolve("profiles", grid.catalog_path(grid.profile))
        except SpecError as error:
            raise SpecError(f"{where} profile: {error}") from None
        specs["profile"] = spec_files.read_document(path)
    if "workload" in grid.parameters:
        specs["workloads"] = {name: _workload_document(grid.workload_path(name),
                                                       f"{where} workload")
                              for name in grid.values_of("workload")}
    # the length laws that read a file (`empirical:PATH`, as `sweep simulate` reads it)
    laws = [(name, law) for name, parameter in grid.parameters.items()
            if parameter.kind == "distribution" for law in grid.values_of(name)
            if law.strip().startswith("empirical:")]
    if laws:
        specs["length_files"] = {law: _file_digest(law.split(":", 1)[1].strip(),
                                                   f"{where} {name}")
                                 for name, law in laws}
    return replace(grid, specs=specs)


def _workload_document(path: str, where: str) -> Any:
    """A preset's parsed TOML, a trace file's sha256 (its rows decide the points), or a
    session generator's spec."""
    if path.lower().startswith(GENERATOR_PREFIX):
        return path
    if path.lower().endswith(TRACE_SUFFIXES):
        return _file_digest(path, where)
    try:
        return spec_files.read_document(spec_files.resolve("workloads", path))
    except SpecError as error:
        raise SpecError(f"{where}: {error}") from None


def _file_digest(path: str, where: str) -> dict[str, str]:
    try:
        with open(Path(path).expanduser(), "rb") as file:
            return {"sha256": hashlib.file_digest(file, "sha256").hexdigest()}
    except OSError as error:
        raise SpecError(f"{where}: cannot read {path}: {error.strerror or error}") from None
