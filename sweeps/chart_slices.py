"""Slices: the bounded rows a chart draws (`take_slice`), the values each shown axis keeps
and the value each other axis is held at (see `rooftui.sweeps.charts` for the rules).

polars is imported inside the functions that use it: importing this module stays light.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rooftui.core.errors import SpecError
from rooftui.sweeps import table_text
from rooftui.sweeps.chart_table import Table
from rooftui.sweeps.row_filters import All, AnyOf, Compare, Count, FirstDistinct, IsIn, Own, Within

if TYPE_CHECKING:
    import polars as pl

    Frame = pl.DataFrame | pl.LazyFrame
    Dimensions = Sequence[Mapping[str, Sequence]]  # axis columns -> values, zipped together

AXES = ("gpu", "model", "weight_dtype", "kv_dtype", "compute_dtype", "expert_dtype",
        "group_size", "kv_heads", "tp", "spec_tokens", "acceptance", "draft_model", "batch",
        "context", "prefill", "prefill_context", "mfu_assumed", "mbu_assumed",
        "memory_reserve_gb", "tpot_budget", "price_per_gpu_hour")
# A grid axis whose name a metric also uses is written as `<name>_assumed`.
AXIS_COLUMNS = {"mfu": "mfu_assumed", "mbu": "mbu_assumed"}
# Axes that change what a model is (its KV heads): held at each model's own value.
STRUCTURE_AXES = ("group_size", "kv_heads")
INTEGER_AXES = ("batch", "context", "prefill", "prefill_context", "group_size", "kv_heads",
                "tp", "spec_tokens")
REPRESENTATIVE = {"prefill": "min", "prefill_context": "min", "mfu_assumed": "max",
                  "mbu_assumed": "max", "memory_reserve_gb": "min", "weight_dtype": "bf16",
                  "kv_dtype": "bf16", "compute_dtype": "bf16", "expert_dtype": "first",
                  "gpu": "first", "model": "first", "draft_model": "first", "tp": "min",
                  "spec_tokens": "min", "acceptance": "max"}  # any other axis: "median"
LABELS = {"gpu": "GPU", "model": "model", "weight_dtype": "weights", "kv_dtype": "KV",
          "compute_dtype": "compute", "group_size": "group size", "kv_heads": "KV heads",
          "batch": "batch", "context": "context", "prefill": "prefill",
          "prefill_context": "prefill context", "mfu_assumed": "mfu",
          "mbu_assumed": "mbu", "memory_reserve_gb": "reserve (GB)",
          "tpot_budget": "TPOT budget (s)", "expert_dtype": "experts",
          "spec_tokens": "spec tokens", "acceptance": "acceptance",
          "draft_model": "draft model"}
# Inputs of `simulate` and `optimize` grids (rooftui.sweeps.kinds): held like the step
# axes, and allowed in their grids' `[charts] fixed`.
SERVING_AXES = ("gpu", "model", "weight_dtype", "kv_dtype", "compute_dtype", "tp",
                "mfu_assumed", "mbu_assumed", "memory_reserve_gb", "max_batch",
                "token_budget", "policy", "kv_admission", "block_size", "workload",
                "input_tokens", "output_tokens", "arrival", "rate", "cv", "speed", "requests",
                "seed", "slo_ttft", "slo_tpot", "quantile", "attainment", "rate_tolerance",
                "price_per_gpu_hour", "prefix_cache", "cache_capacity_gb", "cpu_tier_gb",
                "ssd_tier_gb")
LABELS |= {"tp": "GPUs per replica", "max_batch": "max batch", "token_budget": "token budget",
           "policy": "policy", "kv_admission": "KV admission", "block_size": "block size",
           "workload": "workload", "input_tokens": "input lengths",
           "output_tokens": "output lengths", "arrival": "arrivals", "rate": "rate (req/s)",
           "cv": "gap CV", "speed": "replay speed", "requests": "requests", "seed": "seed",
           "slo_ttft": "TTFT SLO (s)", "slo_tpot": "TPOT SLO (s)", "quantile": "quantile",
           "attainment": "attainment", "rate_tolerance": "rate tolerance",
           "price_per_gpu_hour": "price per GPU-hour", "prefix_cache": "prefix cache",
           "cache_capacity_gb": "HBM cache (GB)", "cpu_tier_gb": "CPU tier (GB)",
           "ssd_tier_gb": "SSD tier (GB)"}
# the remaining step axes: assumptions, cluster layouts, the energy flag
LABELS |= {"mfu": "mfu", "mbu": "mbu", "overlap": "overlap", "attention_flops": "attention FLOPs",
           "attention_flops_assumed": "attention FLOPs", "activation_traffic": "activations",
           "kv_write": "KV write", "energy": "energy", "pp": "pipeline stages",
           "ep": "expert-parallel GPUs", "dp": "attention groups",
           "micro_batches": "micro-batches", "system": "system", "max_gpus": "max GPUs"}
MAX_ROWS = 15_000
FLOOR = 4  # values a shown axis keeps before a GPU or model is cut
CUT_LAST = ("gpu", "model")  # a GPU or model cut from a chart is hidden entirely
SIGNIFICANT_DIGITS = 4
OWN = "own"  # the opening choice of a structure axis's menu: each model's own value


@dataclass(frozen=True)
class ChartSlice:
    """The rows a chart draws (its shown axes and metrics), the values each shown axis
    kept, and the value each other swept axis was held at."""

    data: pl.DataFrame | Table
    kept: dict[str, list]
    fixed: dict[str, Any] = field(default_factory=dict)
    # structure axes held at each model's own value: axis -> {model: value}
    native: dict[str, dict[str, Any]] = field(default_factory=dict)
    # held axes offered as menus: axis -> the value it opens on (OWN: each model's own)
    menus: dict[str, Any] = field(default_factory=dict)
    # each shown axis's opening value (what a changed menu draws of an axis not in menu_over)
    opening: dict[str, Any] = field(default_factory=dict)
    # the shown axes a changed menu is drawn over (the others stay at their opening value)
    menu_over: tuple[str, ...] = ()

    def values(self, axis: str) -> list:
        return self.kept.get(axis, [])

    @property
    def menu_columns(self) -> list[str]:
        """The columns the menus filter on: each menu's axis, and for a structure axis
        the flag of the rows at each model's own value (`<axis>_own`)."""
        return [*self.menus, *(f"{a}_own" for a, v in self.menus.items() if v == OWN)]

    def subtitle(self, *notes: str) -> list[str]:
        def held_value(axis: str, value: Any) -> str:
            own = " (the model's own)" if axis in self.native else ""
            return f"{LABELS[axis]} {show(value)}{own}"

        held = [held_value(a, v) for a, v in self.fixed.items()]
        models = set(self.values("model"))

        def own_values(axis: str) -> str:
            return ", ".join(f"{m} {show(v)}" for m, v in self.native[axis].items()
                             if m in models)

        held += [f"{LABELS[a]}: each model's own ({own_values(a)})"
                 for a in self.native if a not in self.fixed and a not in self.menus]
        line = " · ".join(held)
        menus = " · ".join(
            f"{LABELS[a]} (opens on {LABELS[a]}: each model's own ({own_values(a)}))"
            if v == OWN
            else f"{LABELS[a]} (opens on {show(v)})" for a, v in self.menus.items())
        if menus:
            over = [a for a in self.kept if a not in self.menus and a not in self.menu_over]
            menus += " · one menu away from its opening value at a time" + (
                "; then " + ", ".join(f"{LABELS[a]} {show(self.opening[a])}" for a in over)
                + " only" if over else "")
        return [text for text in (f"held fixed: {line}" if line else "",
                                  f"menus: {menus}" if menus else "", *notes) if text]


def show(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else str(value)


def spread(values: list, count: int) -> list:
    """At most `count` of `values`, first and last included: evenly spaced by rank, or,
    for positive numbers spanning more than a decade, the ones nearest to evenly spaced
    logarithms (the charts draw such axes on log scales)."""
    if len(values) <= count:
        return values
    if count == 1:
        return values[:1]
    numeric = all(isinstance(v, int | float) for v in values)
    if numeric and values[0] > 0 and values[-1] > 10 * values[0]:
        logs = np.log(np.asarray(values, dtype=float))
        targets = np.linspace(logs[0], logs[-1], count)
        picks = np.unique(np.abs(logs[None, :] - targets[:, None]).argmin(axis=1))
        return [values[i] for i in picks]
    step = (len(values) - 1) / (count - 1)
    return [values[round(i * step)] for i in range(count)]


def _fit(values: dict[str, list], caps: Mapping[str, int], budget: int,
         last: Sequence[str] = ()) -> dict[str, list]:
    """Each axis's values thinned to its cap, then cut further, the axis with the most
    values first, until the product of the counts is within `budget`. Axes in `last`
    are cut only once the others are down to `FLOOR` values."""
    sizes = {axis: min(len(v), caps[axis]) for axis, v in values.items()}
    for floor, axes in ((FLOOR, [a for a in sizes if a not in last]), (1, list(sizes))):
        while math.prod(sizes.values()) > budget:
            candidates = [a for a in axes if sizes[a] > floor]
            if not candidates:
                break
            sizes[max(candidates, key=sizes.__getitem__)] -= 1
    return {axis: spread(values[axis], sizes[axis]) for axis in values}


def _in_grid_order(values: Sequence) -> list:
    """An axis's distinct values: numbers ascending, names in the order the grid lists
    them (its first GPU and model are the ones a chart opens on)."""
    if all(isinstance(v, int | float) for v in values):
        return sorted(set(values))
    return list(dict.fromkeys(values))


def _pick(values: list, rule: str) -> Any:
    """The representative of an axis's distinct values, numbers ascending (see the module
    doc)."""
    if rule == "bf16":
        return "bf16" if "bf16" in values else values[0]
    return {"min": values[0], "first": values[0], "max": values[-1]}.get(
        rule, values[(len(values) - 1) // 2])


@dataclass(frozen=True)
class SliceRequest:
    """What a chart asks `take_slice` for (its arguments, see there), so that the rows it
    draws can also be cut from each shard as it is written (`rows`). `whole`: column
    groups the chart reads every combination of, from all the rows (the intensity
    chart's ridges)."""

    shown: Mapping[str, int]
    metrics: Sequence[str]
    prefer: Mapping[str, str] | None = None
    rows_per_point: int = 1
    menus: Sequence[str] = ()
    menu_over: Sequence[str] | None = None
    whole: Sequence[tuple[str, ...]] = ()

    def take(self, frame: Frame | Table, *, fixed: Mapping[str, Any] | None = None,
             axes: Dimensions | None = None,
             grid: Mapping[str, Any] | None = None) -> ChartSlice:
        """The slice, its `data` a `chart_table.Table` (what the step charts draw)."""
        return take_slice(frame, self.shown, self.metrics, fixed=fixed, axes=axes,
                          prefer=self.prefer, rows_per_point=self.rows_per_point, grid=grid,
                          menus=self.menus, menu_over=self.menu_over, as_table=True)

    def rows(self, columns: Sequence[str], *, fixed: Mapping[str, Any] | None = None,
             axes: Dimensions | None = None, grid: Mapping[str, Any] | None = None
             ) -> All | AnyOf | None:
        """A row filter (`row_filters`: a polars predicate or a numpy mask) true on every
        row of results with `columns` that `take` draws, and on the first row of each
        combination of a `whole` group; None when
        it would need the rows themselves (no `axes`: a window over the rows; a shown or
        fixed axis the grid does not declare: its values). Its filters are the slice's
        own, each on one row, so the rows it keeps of each shard, put together in the
        shards' order, give `take` the same slice and `whole` the same combinations as
        all the results. A fixed value the grid lacks raises `take`'s SpecError."""
        if axes is None:
            return None
        shown_axes, dimensions, distinct, unknown = _layout(columns, self.shown, fixed, axes)
        if unknown:
            return None
        plan = _plan(self.shown, shown_axes, dimensions, distinct, columns, self.metrics,
                     fixed=fixed, windows=False, prefer=self.prefer,
                     rows_per_point=self.rows_per_point, grid=grid, menus=self.menus,
                     menu_over=self.menu_over)
        drawn = All(tuple(plan.filters))
        firsts = [FirstDistinct(tuple(group)) for group in self.whole
                  if set(group) <= set(columns)]
        return AnyOf((drawn, *firsts)) if firsts else drawn


def take_slice(frame: Frame | Table, shown: Mapping[str, int], metrics: Sequence[str], *,
               fixed: Mapping[str, Any] | None = None,
               axes: Dimensions | None = None,
               prefer: Mapping[str, str] | None = None, rows_per_point: int = 1,
               grid: Mapping[str, Any] | None = None,
               menus: Sequence[str] = (),
               menu_over: Sequence[str] | None = None,
               as_table: bool = False) -> ChartSlice:
    """The bounded slice of `frame` a chart draws.

    `shown` maps each axis the chart displays to the most values it keeps; `metrics` are
    the other columns it needs (absent ones are skipped). Every other axis is held at
    `fixed[axis]` or at its representative (`prefer` overrides the rule, see the module
    doc). At most `MAX_ROWS / rows_per_point` rows come back.

    `axes`: the grid's dimensions (`declared_axes` of its manifest), each mapping its axis
    columns (several when zipped) to their values. Each dimension with no shown axis is
    held by one equality filter, which the parquet reader applies while scanning; the
    other columns of a zipped dimension, and columns no dimension names (KV heads when
    the grid sweeps the group size), follow. The values come from the grid, so only
    columns it does not sweep are scanned for theirs. Without `axes` every input column
    in `AXES` is held, choosing within each combination of the shown axes (window
    functions over the scanned rows: right for any layout, slower on big grids).

    An axis that changes a model's structure (`STRUCTURE_AXES`: group size, KV heads) is
    held at each model's own value (from `grid`, the manifest, else the shipped spec),
    the representative only for a model whose own value the grid lacks. A shown axis
    keeps the representative among its values, so that what one chart holds another
    draws. Each axis of `menus` that would be held becomes a menu opening on its
    representative (a structure axis: on each model's own, `OWN`), its rows a star around
    the opening values: each menu's other values with the other menus at their opening,
    over the shown axes in `menu_over` (default: all; the others at their opening value).
    While those rows exceed the budget the menu with the most values is thinned (to no
    fewer than two), then the last menus (in the order given) stay held.

    `frame` a `chart_table.Table` (the rows `sweep run` cut from its shards) is sliced
    in numpy with `axes` (without them by polars, as a frame), a polars frame by polars;
    `data` is a Table when `as_table` (what the step charts build their specs from: then
    `metrics` naming `fits` adds it, true, to results without it, and naming "memory"
    adds each row's memory note, last), else a polars frame.
    """
    if isinstance(frame, Table) and axes is None:  # windows over the rows: polars does them
        frame = frame.to_polars()
    if isinstance(frame, Table):
        present = frame.columns
    else:
        import polars as pl

        lazy = frame.lazy()
        present = lazy.collect_schema().names()
    shown_axes, dimensions, distinct, unknown = _layout(present, shown, fixed, axes)
    if unknown and isinstance(frame, Table):
        distinct |= {a: _distinct(frame[a]) for a in unknown}
    elif unknown:
        found = lazy.select(pl.col(a).drop_nulls().unique().sort().implode()
                            for a in unknown).collect()
        distinct |= {a: found[a][0].to_list() for a in unknown}
    plan = _plan(shown, shown_axes, dimensions, distinct, present, metrics, fixed=fixed,
                 windows=axes is None, prefer=prefer, rows_per_point=rows_per_point,
                 grid=grid, menus=menus, menu_over=menu_over)
    # what a step chart's memory note reads beside the slice's own columns: each row's GPU
    noted = as_table and "memory" in metrics and "memory" not in present
    note_inputs = ["gpu"] if noted and "gpu" in present else []
    selected = list(dict.fromkeys(plan.shown + plan.chosen + plan.wanted + plan.flag_names
                                  + note_inputs))
    if isinstance(frame, Table):
        kept = frame.filter(All(tuple(plan.filters)).mask(frame.coded()))
        flags = {name: flag.mask(kept.coded())
                 for flag, name in zip(plan.flags, plan.flag_names, strict=True)}
        data = kept.with_columns(**flags).select(*selected).first_rows(plan.shown, sort=True)
    else:
        for condition in plan.filters:  # in turn: a window sees the rows the others left
            lazy = lazy.filter(condition.polars(pl))
        # One row per shown combination, even if a column varies that no one declared an
        # axis (a frame passed without its manifest, with a column this module does not
        # know).
        data = first_rows(pl, lazy.with_columns(
            flag.polars(pl).alias(name) for flag, name in zip(plan.flags, plan.flag_names,
                                                              strict=True))
            .select(selected), plan.shown)
        if as_table:
            data = Table.from_polars(data)
    if isinstance(data, Table):
        held = {a: _scalar(data[a][0]) for a in plan.chosen
                if data.height and len(set(data[a].tolist())) == 1}
        columns = [c for c in (*plan.shown, *plan.wanted, *plan.flag_names) if c != "memory"]
        if as_table and "fits" in metrics and "fits" not in data.columns:
            data = data.with_columns(fits=True)  # results of an older format: all fit
            columns.append("fits")
        if noted:
            from rooftui.sweeps.chart_marks import with_memory_note

            # of the values as computed, not rounded, as `render_charts` notes the rows
            # `sweep run` cut
            data = with_memory_note(data, grid)
        data = tidy_table(data.select(*columns, *(["memory"] if "memory" in data.columns
                                                  else [])))
    else:
        held = {a: data[a][0] for a in plan.chosen if data.height and data[a].n_unique() == 1}
        data = tidy(pl, data.select(plan.shown + plan.wanted + plan.flag_names))
    return ChartSlice(data=data, kept=plan.kept, fixed=held, native=plan.native,
                      menus=plan.menus, opening=plan.opening, menu_over=plan.over)


def _distinct(values: np.ndarray) -> list:
    """A column's distinct values, sorted, without nulls (as polars lists them)."""
    if values.dtype.kind == "O":
        return sorted({v for v in values.tolist() if v is not None})
    found = np.unique(values)
    return found[~np.isnan(found)].tolist() if found.dtype.kind == "f" else found.tolist()


def _scalar(value: Any) -> Any:
    """A numpy scalar as the Python number polars would give."""
    return value.item() if isinstance(value, np.generic) else value


def first_rows(pl, lazy: pl.LazyFrame, keys: Sequence[str]) -> pl.DataFrame:
    """The first row of each combination of `keys`, sorted by them: after a stable sort,
    the rows where a key changes (hashing every row's combination, `unique`, cost twice
    as much)."""
    data = lazy.sort(keys, maintain_order=True).collect()
    return data.filter((pl.int_range(pl.len()) == 0) | pl.any_horizontal(
        pl.col(k).ne_missing(pl.col(k).shift(1)) for k in keys))


def _layout(present: Sequence[str], shown: Mapping[str, int],
            fixed: Mapping[str, Any] | None, axes: Dimensions | None):
    """(the shown axes present, the dimensions to hold, each axis's values known from
    the grid, the axes whose values only the rows tell)."""
    shown_axes = [a for a in shown if a in present]
    distinct: dict[str, list] = {}
    if axes is None:
        dimensions = [(a,) for a in AXES if a in present and a not in shown_axes]
    else:
        dimensions = [tuple(a for a in d if a in present) for d in axes]
        distinct = {a: _in_grid_order(d[a]) for d in axes for a in d if a in present}
        dimensions += [(a,) for a in (fixed or {}) if a in present and a not in distinct]
        dimensions = [d for d in dimensions if d and not set(d) & set(shown_axes)]
    held_axes = [a for d in dimensions for a in d]
    unknown = [a for a in shown_axes + held_axes if a not in distinct]
    return shown_axes, dimensions, distinct, unknown


@dataclass(frozen=True)
class _Plan:
    """A slice before any row is read: its filters (applied in order), the `<axis>_own`
    flag columns, the columns it selects and what its `ChartSlice` records."""

    filters: list  # of `row_filters` tests
    flags: list  # of `row_filters` tests, named `flag_names`
    shown: list[str]  # the shown axes and the menus: one row per combination
    chosen: list[str]  # held axes with more than one value (their held value recorded)
    wanted: list[str]
    kept: dict[str, list]
    native: dict[str, dict[str, Any]]
    menus: dict[str, Any]
    opening: dict[str, Any]
    over: tuple[str, ...]

    @property
    def flag_names(self) -> list[str]:
        """The `flags` columns: each menu opening on "own"."""
        return [f"{a}_own" for a, v in self.menus.items() if v == OWN]


def _plan(shown: Mapping[str, int], shown_axes: list[str], dimensions: list[tuple[str, ...]],
          distinct: dict[str, list], present: Sequence[str], metrics: Sequence[str], *,
          fixed: Mapping[str, Any] | None, windows: bool, prefer: Mapping[str, str] | None,
          rows_per_point: int, grid: Mapping[str, Any] | None, menus: Sequence[str],
          menu_over: Sequence[str] | None) -> _Plan:
    """`take_slice`'s choices from the axes' values alone (`windows`: hold each axis
    within each combination of the shown axes, from the rows)."""
    held_axes = [a for d in dimensions for a in d]
    rules = {**REPRESENTATIVE, **(prefer or {})}
    kept = _fit({a: distinct[a] for a in shown_axes}, shown, MAX_ROWS // rows_per_point,
                last=CUT_LAST)
    kept = {a: _with_representative(v, distinct[a], rules.get(a, "median"))
            for a, v in kept.items()}
    budget, size = MAX_ROWS // rows_per_point, math.prod(len(v) for v in kept.values())
    models = kept.get("model") or distinct.get("model") or []
    native = {a: _native_values(a, models, distinct[a], rules.get(a, "median"), grid)
              for a in STRUCTURE_AXES if a in held_axes and "model" in present
              and not (fixed and a in fixed) and len(distinct[a]) > 1
              and not set(STRUCTURE_AXES) & set(shown_axes)}  # shown: the others follow
    native = {a: own for a, own in native.items() if own}

    def own_value(axis: str) -> Own:
        return Own(tuple(native[axis].items()))

    over = [a for a in (shown_axes if menu_over is None else menu_over) if a in kept]
    opening = {a: _opening(kept[a], distinct[a], rules.get(a, "median")) for a in kept}
    offered: dict[str, list] = {}
    for axis in menus:  # one menu per dimension: a zipped partner follows it
        dimension = next((d for d in dimensions if axis in d), ())
        if (axis in held_axes and not (fixed and axis in fixed) and len(distinct[axis]) > 1
                and not set(dimension) & set(offered)):
            offered[axis] = distinct[axis]
    menu_values = _fit_menus(offered, rules, budget - size,
                             math.prod(len(kept[a]) for a in over),
                             {a: set(own.values()) for a, own in native.items()})
    chosen_menus = {a: OWN if a in native else _pick(distinct[a], rules.get(a, "median"))
                    for a in menu_values}
    filters, flags = [], []
    shown_axes = list(shown_axes)
    if chosen_menus:
        dimensions = [d for d in dimensions if not set(d) & set(chosen_menus)]
        held_axes = [a for d in dimensions for a in d]
        kept |= menu_values
    filters += [IsIn(axis, tuple(kept[axis])) for axis in shown_axes + list(chosen_menus)]
    if chosen_menus:
        # a star around the opening values: each menu's other values with every other
        # menu at its opening, over the `over` axes only (the rows stay within budget)
        away = tuple(Compare(a, own_value(a) if v == OWN else v, equal=False)
                     for a, v in chosen_menus.items())
        still = tuple(Compare(a, opening[a]) for a in shown_axes if a not in over)
        filters.append(AnyOf((Count(away, 0, 0), All((Count(away, 1, 1), *still))))
                       if still else Count(away, 0, 1))
        flags = [Compare(a, own_value(a)) for a, v in chosen_menus.items() if v == OWN]
        shown_axes += list(chosen_menus)
    for dimension in dimensions:
        given = [a for a in dimension if fixed and a in fixed]
        # zipped axes: hold the one with the most values, its partners follow
        lead = max(dimension, key=lambda a: len(distinct[a]))
        for axis in given or [lead]:
            rule = rules.get(axis, "median")
            if axis in given:
                value = _check_fixed(axis, fixed[axis], distinct[axis])
            elif axis in native:
                value = own_value(axis)
            elif len(distinct[axis]) < 2:
                continue
            elif windows and shown_axes:
                value = Within(axis, rule, tuple(shown_axes))
            else:
                value = _pick(distinct[axis], rule)
            filters.append(Compare(axis, value))
    return _Plan(filters=filters, flags=flags, shown=shown_axes, chosen=[a for a in held_axes if len(distinct[a]) > 1],
                 wanted=[m for m in metrics if m in present and m not in shown_axes],
                 kept=kept, native=native, menus=chosen_menus, opening=opening,
                 over=tuple(over))


def _with_representative(kept: list, values: list, rule: str) -> list:
    """`kept` with the axis's representative in place of the kept value nearest to it
    (the first and last stay): a chart showing the axis draws what others hold."""
    representative = _pick(values, rule)
    if representative in kept or len(kept) < 3 or not all(
            isinstance(v, int | float) for v in kept):
        return kept
    inner = range(1, len(kept) - 1)
    nearest = min(inner, key=lambda i: abs(math.log(kept[i] / representative))
                  if kept[i] > 0 and representative > 0 else abs(kept[i] - representative))
    return sorted({*kept[:nearest], representative, *kept[nearest + 1:]})


def _opening(kept: list, values: list, rule: str) -> Any:
    """The value a shown axis opens on: its representative when kept, else its first."""
    representative = _pick(values, rule)
    return representative if representative in kept else kept[0]


def _fit_menus(offered: Mapping[str, list], rules: Mapping[str, str], room: int,
               unit: int, required: Mapping[str, Any]) -> dict[str, list]:
    """The values each menu keeps: every value of a menu but the one it opens on costs
    `unit` rows of the `room` left; the menu with the most values is thinned first (down
    to two), then the last menus are dropped. A menu keeps its representative, and the
    values in `required` (a structure axis: each model's own)."""
    def thinned(axis: str, count: int) -> list:
        values = offered[axis]
        must = set(required.get(axis, ())) or {_pick(values, rules.get(axis, "median"))}
        picked = set(spread(values, count))
        while len(picked | must) > max(count, len(must)):  # make room for what must stay
            picked.discard(next(v for v in reversed(values) if v in picked - must))
        return [v for v in values if v in picked | must]

    counts = {axis: len(values) for axis, values in offered.items()}
    while counts:
        kept = {axis: thinned(axis, count) for axis, count in counts.items()}
        if unit * sum(len(v) - 1 for v in kept.values()) <= room:
            return kept
        widest = max(counts, key=lambda a: len(kept[a]))
        if len(kept[widest]) > max(2, len(set(required.get(widest, ())))):
            counts[widest] = len(kept[widest]) - 1
        else:
            counts.popitem()
    return {}


def spec_entries(grid: Mapping[str, Any] | None, kind: str) -> dict[str, dict]:
    """The grid's resolved specs of `kind` ("gpus", "models") by name, from its manifest."""
    spec = (grid or {}).get("spec")
    specs = spec.get("specs") if isinstance(spec, dict) else None
    entries = specs.get(kind) if isinstance(specs, dict) else None
    return entries if isinstance(entries, dict) else {}


def model_heads(grid: Mapping[str, Any] | None, model: str) -> tuple[int, int] | None:
    """(attention heads, KV heads) of `model`: the grid's spec, else the shipped one."""
    entry = spec_entries(grid, "models").get(model)
    if isinstance(entry, dict):
        heads, kv_heads = entry.get("num_attention_heads"), entry.get("num_key_value_heads")
        if isinstance(heads, int) and isinstance(kv_heads, int) and kv_heads > 0:
            return heads, kv_heads
    from rooftui.core.model import load_model

    try:
        found = load_model(model)
    except (SpecError, OSError):
        return None
    return found.num_attention_heads, found.num_key_value_heads


def gpu_memory_bytes(grid: Mapping[str, Any] | None, gpu: str) -> float | None:
    """`gpu`'s memory in bytes: the grid's spec, else the shipped one."""
    entry = spec_entries(grid, "gpus").get(gpu)
    if isinstance(entry, dict) and isinstance(entry.get("memory_gb"), int | float):
        return float(entry["memory_gb"]) * 1e9
    from rooftui.core.hardware import load_gpu

    try:
        return load_gpu(gpu).memory_gb * 1e9
    except (SpecError, OSError):
        return None


def _native_values(axis: str, models: Sequence[str], values: list, rule: str,
                   grid: Mapping[str, Any] | None) -> dict[str, Any]:
    """Each model's own value of a structure axis, or the axis's representative for a
    model whose own value the grid does not sweep."""
    own = {}
    for model in models:
        heads = model_heads(grid, str(model))
        value = None if heads is None else (heads[0] // heads[1] if axis == "group_size"
                                            else heads[1])
        own[str(model)] = value if value in values else _pick(values, rule)
    return own


def _check_fixed(axis: str, value: Any, values: list) -> Any:
    for candidate in values:
        same = candidate == value if isinstance(candidate, str) else (
            isinstance(value, int | float) and not isinstance(value, bool)
            and float(candidate) == float(value))
        if same:
            return candidate
    have = ", ".join(show(v) for v in values[:12]) + (" ..." if len(values) > 12 else "")
    raise SpecError(f"charts: fixed {axis} = {value!r} is not in the results (they have "
                    f"{have})")


def tidy_table(data: Table) -> Table:
    """`tidy` of a Table: whole-number axes as integers, other numbers rounded, a value
    that is not finite null (NaN)."""
    fixes = {}
    for name in data.columns:
        values = data[name]
        if name in INTEGER_AXES and values.dtype.kind == "f" and np.isfinite(values).all():
            fixes[name] = values.astype(np.int64)
        elif values.dtype.kind == "f" and name not in AXES:
            fixes[name] = table_text.rounded(values, SIGNIFICANT_DIGITS)
    return data.with_columns(**fixes) if fixes else data


def tidy(pl, data: pl.DataFrame) -> pl.DataFrame:
    """Names as plain strings, whole-number axes as integers, other numbers rounded (JSON
    size), NaN and infinities as null."""
    fixes = []
    for name, dtype in data.schema.items():
        if dtype == pl.Categorical:  # how the runner's parquet stores names
            fixes.append(pl.col(name).cast(pl.String))
        elif name in INTEGER_AXES and dtype.is_numeric():
            fixes.append(pl.col(name).cast(pl.Int64))
        elif dtype.is_float() and name not in AXES:
            fixes.append(rounded(pl, pl.col(name)))
    return data.with_columns(fixes)


def rounded(pl, value):
    return pl.when(value.is_finite()).then(value.round_sig_figs(SIGNIFICANT_DIGITS))


def positive(pl, *names: str):
    """Rows whose `names` are finite and positive (what a log scale can place)."""
    return pl.all_horizontal([pl.col(n).is_not_null() & (pl.col(n) > 0) for n in names])
