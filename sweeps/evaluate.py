"""Point ids to columns: a grid's parameters mapped onto the core's inputs and evaluated a
block at a time with the vectorised step model.

A `Block` is a rectangular sub-grid, so each parameter is an array along its own numpy
axis (or a scalar) and the core broadcasts: a quantity that depends on the model and the
batch only is computed once per (model, batch), not once per point. The flat columns are
made by broadcasting each result to the block's shape at the end.

`Sweep.step_parameters` is the one place where grid parameters become the core's inputs:
every parameter whose name is a keyword of `gather_step_inputs` is passed to it by name, so
a new keyword (such as `tp`) needs only its entry in `grid.PARAMETERS` (kind and default);
one whose default depends on the model needs a line in `step_parameters` too.

String columns (gpu, model, dtypes, choices and the `*bound` columns) travel as int32 codes
into `Sweep.dictionaries[column]` and are written dictionary-encoded. Metric columns are
derived from whatever `evaluate_step` returns, so new metrics appear without edits here.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import numpy as np

from rooftui.core.assumptions import Assumptions, load_profile
from rooftui.core.dtypes import default_compute_dtype
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.model import ModelArrays, load_model
from rooftui.core.point import ASSUMPTION_OVERRIDES, PointConfig, uneven_split
from rooftui.core.step import evaluate_step
from rooftui.core.systems import load_system
from rooftui.core.tables import DTYPES, GPUTable, SystemTable, dtype_code, gather_step_inputs
from rooftui.sweeps.grid import (
    FLAG_KINDS,
    INTEGER_KINDS,
    PARAMETERS,
    STRING_KINDS,
    Block,
    Grid,
)
from rooftui.sweeps.results import is_derived

# Points evaluated in one call at most: bounds memory (about 1 kB per point in flight,
# ~150 MB peak per process) while amortising numpy's per-call overhead; 2^15 to 2^17 run
# at the same speed, 2^17 needs ~50 MB more.
EVALUATION_POINTS = 1 << 16
# Blocks smaller than this (at shard boundaries, or when the trailing axes are small) are
# gathered into one parquet row group; larger ones are a row group each (no copy).
ROW_GROUP_POINTS = 1 << 14

GATHER_KEYWORDS = frozenset(inspect.signature(gather_step_inputs).parameters) - {"gpus", "models"}
BOUNDS = ("memory", "compute")  # codes 0 and 1 of the *_bound columns
BOUND_SUFFIX = "compute_bound"


def bound_column(key: str) -> str:
    """`compute_bound` -> `bound`, `gemm_compute_bound` -> `gemm_bound`."""
    return key[: -len(BOUND_SUFFIX)] + "bound"


class Sweep:
    """A validated grid with its GPUs, models and profile loaded. Construction checks
    every combination the grid can reach (before any work) and raises SpecError."""

    estimate_points = 1 << 16  # `sweep run --dry-run` times this many points

    def __init__(self, grid: Grid) -> None:
        self.grid = grid
        where = str(grid.path)
        # a system brings its GPU: the GPU table holds the grid's and the systems' GPUs
        self.system_names = tuple(grid.values_of("system")) if grid.given("system") else ()
        self.systems = [load_system(grid.catalog_path(name)) for name in self.system_names]
        if self.systems and grid.given("gpu"):
            raise SpecError(f"{where}: give gpu or system, not both (a system names its GPU)")
        self.gpu_names = tuple(dict.fromkeys((*grid.values_of("gpu"),
                                              *(s.gpu.key for s in self.systems))))
        # one table for the models and the draft models (codes of both index it)
        drafts = grid.values_of("draft_model") if grid.given("draft_model") else ()
        self.model_names = tuple(dict.fromkeys((*grid.values_of("model"), *drafts)))
        self.gpus = [load_gpu(grid.catalog_path(name)) for name in self.gpu_names]
        self.models = [load_model(grid.catalog_path(name)) for name in self.model_names]
        self.gpu_table = GPUTable.of(self.gpus)
        self.system_table = SystemTable.of(self.systems) if self.systems else None
        self._system_gpu = np.array([self.gpu_names.index(s.gpu.key) for s in self.systems],
                                    np.int64)
        self.model_arrays = ModelArrays.stack(self.models)
        profile = load_profile(grid.catalog_path(grid.profile)) if grid.profile else Assumptions()
        try:
            self.assumptions = profile.with_overrides(
                **{key: grid.fixed.get(key) for key in ASSUMPTION_OVERRIDES})
        except SpecError as error:
            raise SpecError(f"{where} [fixed]: {error}") from None

        self._names_of = {name: self._names(name)
                          for name, p in PARAMETERS.items() if p.kind in STRING_KINDS}
        # per-model and per-dtype defaults, by the rules `sweep point` uses
        configs = [PointConfig(gpu=self.gpus[0], model=model) for model in self.models]
        self._model_heads = np.array([m.num_attention_heads for m in self.models], np.int64)
        self._model_kv_heads = np.array([m.num_key_value_heads for m in self.models], np.int64)
        self._model_is_mla = np.array([m.is_mla for m in self.models])
        self._model_weight_dtype = np.array([dtype_code(c.resolved_weight_dtype) for c in configs])
        self._model_kv_dtype = np.array([dtype_code(c.resolved_kv_dtype) for c in configs])
        self._model_expert_dtype = np.array([dtype_code(c.resolved_expert_weight_dtype
                                                        or c.resolved_weight_dtype)
                                             for c in configs])
        self._compute_for_weight = np.array([dtype_code(default_compute_dtype(d)) for d in DTYPES])
        self._axis_codes = {axis.name: self._encode(axis.name, axis.values) for axis in grid.axes}
        self._constants = {name: self._encode(name, [value])[0]
                           for name, value in self._constant_values().items()}

        self.parameter_columns = tuple(name for name, parameter in PARAMETERS.items()
                                       if not parameter.column_when_given or grid.given(name))
        self.skipped_points = self._check()
        # the columns and their numpy types, from the first point: all of them as a reader
        # sees them (`result_types`), and those the files store (`column_types`: not the
        # ones `results.with_derived` computes on read); the names that each string
        # column's int32 codes index
        first = next(grid.blocks(0, 1))
        self.result_types = {name: column.dtype for name, column in
                             self.evaluate(first, derived=True).items()}
        self.column_types = {name: dtype for name, dtype in self.result_types.items()
                             if not is_derived(name)}
        self.dictionaries = {
            name: self._names_of.get(name.removesuffix("_assumed"), BOUNDS)
            for name, dtype in self.column_types.items() if dtype == np.int32}
        names = list(self.column_types)
        self.input_columns = tuple(names[: names.index("peak_flops")])  # point_id, inputs

    # --- the mapping ---------------------------------------------------------------------
    def step_parameters(self, given: dict[str, Any]) -> dict[str, Any]:
        """Every parameter at each point, from the values the grid gives (codes for names,
        numbers otherwise; arrays that broadcast, or scalars): defaults filled per model as
        `sweep point` fills them. The one place grid parameters meet the core's inputs."""
        p = {**self._constants, **given}
        model = p["model"]
        p.setdefault("weight_dtype", self._model_weight_dtype[model])
        p.setdefault("kv_dtype", self._model_kv_dtype[model])
        p.setdefault("compute_dtype", self._compute_for_weight[p["weight_dtype"]])
        # routed experts: as given, else like weights the grid gives, else the model's own
        p["expert_weight_dtype"] = p.get("expert_dtype", p["weight_dtype"] if (
            "weight_dtype" in given) else self._model_expert_dtype[model])
        for key in ("tp", "spec_tokens", "pp", "ep", "dp", "micro_batches"):
            # given, an array even where it is 1 or 0: every block then has the same parts
            # (communication, drafting, all_to_all, pipeline_transfer) and the same columns
            if key in given:
                p[key] = np.atleast_1d(p[key])
        if "system" in given:  # the system's GPU, and its links for the collectives
            p["gpu"] = self._system_gpu[p["system"]]
            p["systems"] = self.system_table
        heads = self._model_heads[model]
        if "group_size" in given:
            p["kv_heads"] = heads // p["group_size"]
        p.setdefault("kv_heads", self._model_kv_heads[model])
        p["group_size"] = heads // p["kv_heads"]
        return p

    def evaluate(self, block: Block, derived: bool = False) -> dict[str, np.ndarray]:
        """The block's rows: point ids, parameters, the GPU's roofs and every metric the
        files store (with `derived`, also those computed on read)."""
        p = self.step_parameters(self._given(block))
        inputs = gather_step_inputs(self.gpu_table, self.model_arrays,
                                    **{k: v for k, v in p.items() if k in GATHER_KEYWORDS})
        metrics = evaluate_step(inputs, self.assumptions, p.get("tpot_budget"))
        shape = block.shape

        def flat(value, dtype) -> np.ndarray:
            return np.broadcast_to(np.asarray(value, dtype), shape).reshape(-1)

        columns = {"point_id": np.arange(block.start, block.start + block.size, dtype=np.int64)}
        for name in self.parameter_columns:
            # metrics keep the core's names; an input a metric shares its name with (mfu:
            # assumed efficiency vs achieved) is written as <name>_assumed
            column = f"{name}_assumed" if name in metrics else name
            columns[column] = flat(p[name], _column_dtype(name))
        columns["peak_flops"] = flat(inputs.peak_flops, np.float64)
        columns["bandwidth_bytes_per_s"] = flat(inputs.bandwidth, np.float64)
        bounds = {}
        for key, value in metrics.items():
            if np.asarray(value).dtype == bool:
                if key.endswith(BOUND_SUFFIX):
                    bounds[bound_column(key)] = flat(value, np.int32)
                if derived or not is_derived(key):
                    columns[key] = flat(value, bool)
            elif derived or not is_derived(key):
                columns[key] = flat(value, np.float64)
        columns.update(bounds)
        if self.grid.skip_unsupported:
            keep = ~flat(np.isnan(inputs.peak_flops), bool)
            if not keep.all():
                columns = {name: column[keep] for name, column in columns.items()}
        return columns

    def row_groups(self, start: int, stop: int) -> Iterator[tuple[dict[str, np.ndarray], int]]:
        """Columns of ids [start, stop) in order, as groups of at least ROW_GROUP_POINTS
        rows (the last may be smaller), each with the number of points it covers."""
        pending: list[dict[str, np.ndarray]] = []
        rows = points = 0
        for block in self.grid.blocks(start, stop, EVALUATION_POINTS):
            columns = self.evaluate(block)
            pending.append(columns)
            rows += len(columns["point_id"])
            points += block.size
            if rows >= ROW_GROUP_POINTS:
                yield _concatenate(pending), points
                pending, rows, points = [], 0, 0
        if pending:
            yield _concatenate(pending), points

    def unsupported_points(self, start: int, stop: int) -> int:
        """Points in [start, stop) dropped by `skip_unsupported` (0 without it)."""
        if not self.grid.skip_unsupported:
            return 0
        total = 0
        for block in self.grid.blocks(start, stop):
            mask = self._unsupported(self.step_parameters(self._given(block)))
            total += int(mask.sum()) * (block.size // mask.size)
        return total

    # --- helpers -----------------------------------------------------------------------
    def _names(self, name: str) -> tuple[str, ...]:
        kind = PARAMETERS[name].kind
        if kind == "gpu":
            return self.gpu_names
        if kind == "system":
            return self.system_names
        if kind == "model":
            return self.model_names
        if kind == "dtype":
            return DTYPES
        return PARAMETERS[name].choices

    def _encode(self, name: str, values) -> np.ndarray:
        if PARAMETERS[name].kind in STRING_KINDS:
            return np.array([self._names_of[name].index(v) for v in values], np.int64)
        return np.array(values, _column_dtype(name))

    def _constant_values(self) -> dict[str, Any]:
        """Fixed values, then defaults: `sweep point`'s, else the profile's."""
        values = {}
        for name, parameter in PARAMETERS.items():
            if name in self.grid.fixed:
                values[name] = self.grid.fixed[name]
            elif not self.grid.given(name):
                if name in ASSUMPTION_OVERRIDES:
                    values[name] = getattr(self.assumptions, name)
                elif parameter.default is not None:
                    values[name] = parameter.default
        return values

    def _given(self, block: Block) -> dict[str, Any]:
        given = {name: self._constants[name] for name in self.grid.fixed}
        for dim, digit in zip(self.grid.dimensions, block.digits(), strict=True):
            for axis in dim.axes:
                given[axis.name] = self._axis_codes[axis.name][digit]
        return given

    def _unsupported(self, p: dict[str, Any]) -> np.ndarray:
        return np.isnan(self.gpu_table.peak_flops[p["gpu"], p["compute_dtype"]])

    def _check(self) -> int:
        """Reject impossible combinations anywhere in the grid; return the points that
        `skip_unsupported` drops. Only the parameters' own small arrays are built."""
        where = str(self.grid.path)
        whole = next(self.grid.blocks(0, self.grid.size))
        given = self._given(whole)
        p = self.step_parameters(given)
        heads = self._model_heads[p["model"]]
        for key in ("group_size", "kv_heads"):
            if key not in given:
                continue
            bad = heads % given[key] != 0
            if bad.any():
                at = _first(bad)
                raise SpecError(
                    f"{where}: {key} {at(given[key])} does not divide the "
                    f"{at(heads)} attention heads of {self.model_names[at(p['model'])]}; "
                    f"choose values that divide every model's head count")
        self._check_parallelism(p, where)
        self._check_speculation(where)
        unsupported = self._unsupported(p)
        if not unsupported.any():
            return 0
        at = _first(unsupported)
        gpu = self.gpus[at(p["gpu"])]
        dtype = DTYPES[at(p["compute_dtype"])]
        if not self.grid.skip_unsupported:
            raise SpecError(
                f"{where}: GPU {self.gpu_names[at(p['gpu'])]} has no {dtype} peak "
                f"(compute_dtype {dtype}; it has {', '.join(gpu.tflops)}); drop the pair or "
                "set skip_unsupported = true to skip such points")
        skipped = int(unsupported.sum()) * (whole.size // unsupported.size)
        if skipped == self.grid.size:
            raise SpecError(f"{where}: every point is unsupported (no GPU in the grid has a "
                            "peak for its compute dtype)")
        return skipped

    def _check_layout(self, p: dict[str, Any], where: str) -> None:
        """As `sweep point` checks --ep: 1 or tp x dp, on an MoE model whose experts it
        divides."""
        ep = np.asarray(p.get("ep", 1))
        if not (ep > 1).any():
            return
        gpus = np.asarray(p.get("tp", 1)) * np.asarray(p.get("dp", 1))
        experts = np.array([m.num_experts for m in self.models], np.int64)[p["model"]]
        for bad, why in (((ep > 1) & (ep != gpus), "must be 1 or tp x dp (zip ep with tp and "
                                                   "dp)"),
                         ((ep > 1) & (experts == 0), "needs a mixture-of-experts model"),
                         ((ep > 1) & (experts % np.maximum(ep, 1) != 0),
                          "does not divide the model's routed experts")):
            if np.any(bad):
                at = _first(bad)
                raise SpecError(f"{where}: ep {at(ep)} {why} (model "
                                f"{self.model_names[at(p['model'])]})")

    def _check_parallelism(self, p: dict[str, Any], where: str) -> None:
        """As `sweep point` checks --tp: a link to split over, heads that split evenly."""
        self._check_layout(p, where)
        tp = np.asarray(p.get("tp", 1))
        if not (tp > 1).any():
            return
        no_link = (tp > 1) & np.isnan(self.gpu_table.interconnect[p["gpu"]])
        if no_link.any():
            at = _first(no_link)
            raise SpecError(f"{where}: {self.gpu_names[at(p['gpu'])]} lists no "
                            f"interconnect_gbs, which tp {at(tp)} needs for its all-reduces; "
                            "add it to the GPU spec or drop the pair")
        models = [("model", p["model"], p["kv_heads"])]
        if "draft_model" in p:
            models.append(("draft_model", p["draft_model"],
                           self._model_kv_heads[p["draft_model"]]))
        for key, model, kv_heads in models:
            heads = self._model_heads[model]
            uneven, kv_uneven = uneven_split(tp, heads, kv_heads, self._model_is_mla[model])
            if uneven.any():
                at = _first(uneven)
                raise SpecError(f"{where}: tp {at(tp)} does not divide the {at(heads)} "
                                f"attention heads of {key} {self.model_names[at(model)]}; "
                                "tensor parallelism splits them evenly")
            if kv_uneven.any():
                at = _first(kv_uneven)
                raise SpecError(f"{where}: tp {at(tp)} and the {at(kv_heads)} KV heads of "
                                f"{key} {self.model_names[at(model)]}: one must divide the "
                                "other (split, or replicate each KV head)")

    def _check_speculation(self, where: str) -> None:
        grid = self.grid
        if not grid.given("spec_tokens"):
            for key in ("acceptance", "draft_model"):
                if grid.given(key):
                    raise SpecError(f"{where}: {key} needs spec_tokens (tokens drafted per "
                                    "sequence and step); give it in [fixed] or [axes]")
        elif max(grid.values_of("spec_tokens")) > 0 and not grid.given("acceptance"):
            raise SpecError(f"{where}: spec_tokens needs acceptance, each drafted token's "
                            "acceptance rate (0 to 1), in [fixed] or [axes]")


def _column_dtype(name: str) -> type:
    kind = PARAMETERS[name].kind
    if kind in STRING_KINDS:
        return np.int32  # codes into Sweep.dictionaries[column]
    if kind in INTEGER_KINDS:
        return np.int64
    if kind in FLAG_KINDS:
        return np.bool_
    return np.float64


def _first(mask: np.ndarray):
    """A function reading any broadcastable array at the first True of `mask`."""
    index = tuple(np.argwhere(mask)[0])
    return lambda value: np.broadcast_to(value, mask.shape)[index].item()


def _concatenate(groups: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    if len(groups) == 1:
        return groups[0]
    return {name: np.concatenate([g[name] for g in groups]) for name in groups[0]}
