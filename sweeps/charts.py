"""The chart catalogue: Altair views of a sweep's results, as standalone HTML, PNG and SVG.

Each chart function takes the results (a polars DataFrame or LazyFrame with the columns
`sweep run` writes: the axes, every step metric, peaks) and returns an Altair chart; the
registry `CHARTS` maps a name to it and `render_charts` writes a result directory's charts
into its `charts/` folder. The HTML embeds the Vega JavaScript (vl-convert's bundle), so
a chart opens from a disk or an e-mail with no network at all.

Bounded whatever the grid size: a chart never hands altair the raw rows. It takes a
*slice* (`take_slice`): each axis it shows keeps at most a fixed number of values (the
first, the last and others evenly spaced, on a log scale for numbers spanning more than
a decade), GPU and model become dropdowns, and every other axis is held at one
representative value:

- batch, context, group size, KV heads: the median of the grid's values (the lower one
  of an even count);
- prefill, prefill context and the memory reserve: the smallest (a pure decode step
  when the grid has one);
- the assumed mfu and mbu: the largest;
- GPUs per replica (tp) and speculated tokens: the smallest (one GPU, no speculation);
  the acceptance rate: the largest;
- dtypes: bf16 when the grid has it, else the first (the experts' format: the first);
  GPU, model and draft model: the grid's first (dropdowns list names in the grid's order
  and open on the first).

Only the grid's own axes are held (the manifest's dimensions): a column that follows
from the others (KV heads from model and group size, a model's own dtype, the partner of
a zipped axis) keeps its matching value, and each held axis is one equality filter the
parquet reader applies as it scans, so a chart of a 10-million-point grid reads little.
Without the manifest every input column is held, choosing within each combination of
the shown axes. `fixed={"context": 8192}` (or `[charts] fixed` in the grid) picks other
values, and each chart's subtitle says what was held fixed.

Size: a slice holds at most `MAX_ROWS` rows (`_fit` cuts the shown axes until the
product of their counts fits), each of at most ten short fields with metrics rounded to
4 significant digits: about 160 bytes of JSON a row with the shipped names, so about
2.5 MB of data beside the 0.9 MB of Vega JavaScript (names four times as long would
still fit in 5 MB). Altair stores a frame once however many layers draw it. A
slice may exceed Altair's default 5,000-row guard: `save_chart` lifts it (as
`Chart.save` does); anything else serialising a chart should wrap the call in
`alt.data_transformers.disable_max_rows()`.

polars and altair are imported inside the functions that use them: importing this
module stays light for the CLI and the TUI.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rooftui.core.errors import SpecError
from rooftui.sweeps.output_files import atomic_path

if TYPE_CHECKING:
    import altair as alt
    import polars as pl

    Frame = pl.DataFrame | pl.LazyFrame
    Dimensions = Sequence[Mapping[str, Sequence]]  # axis columns -> values, zipped together

# Columns of the inputs a grid can sweep (see rooftui.sweeps.results), in the order they
# are held fixed: names first, then numbers.
AXES = ("gpu", "model", "weight_dtype", "kv_dtype", "compute_dtype", "expert_dtype",
        "group_size", "kv_heads", "tp", "spec_tokens", "acceptance", "draft_model", "batch",
        "context", "prefill", "prefill_context", "mfu_assumed", "mbu_assumed",
        "memory_reserve_gb", "tpot_budget", "price_per_gpu_hour")
# A grid axis whose name a metric also uses is written as `<name>_assumed`.
AXIS_COLUMNS = {"mfu": "mfu_assumed", "mbu": "mbu_assumed"}
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
MAX_ROWS = 15_000
FLOOR = 4  # values a shown axis keeps before a GPU or model is cut
CUT_LAST = ("gpu", "model")  # a GPU or model cut from a chart is hidden entirely
SIGNIFICANT_DIGITS = 4
CHART_KEYS = {"names", "fixed", "png", "svg"}
# Save as PNG/SVG from the page; no "open in the Vega editor" link (it needs the web).
EMBED_OPTIONS = {"renderer": "svg",
                 "actions": {"export": True, "source": False, "compiled": False,
                             "editor": False}}
PNG_SCALE = 2.0
WIDTH, HEIGHT = 560, 360


# --- slices ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ChartSlice:
    """The rows a chart draws (its shown axes and metrics), the values each shown axis
    kept, and the value each other swept axis was held at."""

    data: pl.DataFrame
    kept: dict[str, list]
    fixed: dict[str, Any] = field(default_factory=dict)

    def values(self, axis: str) -> list:
        return self.kept.get(axis, [])

    def subtitle(self, *notes: str) -> list[str]:
        held = " · ".join(f"{LABELS[a]} {_show(v)}" for a, v in self.fixed.items())
        return [line for line in (f"held fixed: {held}" if held else "", *notes) if line]


def _show(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else str(value)


def _spread(values: list, count: int) -> list:
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
    return {axis: _spread(values[axis], sizes[axis]) for axis in values}


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


def _pick_within(pl, axis: str, rule: str):
    """`_pick` as a polars aggregation, to choose within each group of rows."""
    column = pl.col(axis)
    if rule == "bf16":
        return pl.when((column == "bf16").any()).then(pl.lit("bf16")).otherwise(column.min())
    return {"min": column.min(), "first": column.first(), "max": column.max()}.get(
        rule, column.unique().sort().get((column.n_unique() - 1) // 2))


def take_slice(frame: Frame, shown: Mapping[str, int], metrics: Sequence[str], *,
               fixed: Mapping[str, Any] | None = None,
               axes: Dimensions | None = None,
               prefer: Mapping[str, str] | None = None, rows_per_point: int = 1) -> ChartSlice:
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
    """
    import polars as pl

    lazy = frame.lazy()
    present = lazy.collect_schema().names()
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
    if unknown:
        found = lazy.select(pl.col(a).drop_nulls().unique().sort().implode()
                            for a in unknown).collect()
        distinct |= {a: found[a][0].to_list() for a in unknown}
    kept = _fit({a: distinct[a] for a in shown_axes}, shown, MAX_ROWS // rows_per_point,
                last=CUT_LAST)
    for axis in shown_axes:
        lazy = lazy.filter(pl.col(axis).is_in(kept[axis]))

    rules = {**REPRESENTATIVE, **(prefer or {})}
    for dimension in dimensions:
        given = [a for a in dimension if fixed and a in fixed]
        # zipped axes: hold the one with the most values, its partners follow
        lead = max(dimension, key=lambda a: len(distinct[a]))
        for axis in given or [lead]:
            rule = rules.get(axis, "median")
            if axis in given:
                value = _check_fixed(axis, fixed[axis], distinct[axis])
            elif len(distinct[axis]) < 2:
                continue
            elif axes is None and shown_axes:
                value = _pick_within(pl, axis, rule).over(shown_axes)
            else:
                value = _pick(distinct[axis], rule)
            lazy = lazy.filter(pl.col(axis) == value)
    chosen = [a for a in held_axes if len(distinct[a]) > 1]
    wanted = [m for m in metrics if m in present and m not in shown_axes]
    # One row per shown combination, even if a column varies that no one declared an
    # axis (a frame passed without its manifest, with a column this module does not know).
    data = (lazy.select(list(dict.fromkeys(shown_axes + chosen + wanted)))
            .unique(subset=shown_axes, keep="first").sort(shown_axes).collect())
    held = {a: data[a][0] for a in chosen if data.height and data[a].n_unique() == 1}
    data = _tidy(pl, data.select(shown_axes + wanted))
    return ChartSlice(data=data, kept=kept, fixed=held)


def _check_fixed(axis: str, value: Any, values: list) -> Any:
    for candidate in values:
        same = candidate == value if isinstance(candidate, str) else (
            isinstance(value, int | float) and not isinstance(value, bool)
            and float(candidate) == float(value))
        if same:
            return candidate
    have = ", ".join(_show(v) for v in values[:12]) + (" ..." if len(values) > 12 else "")
    raise SpecError(f"charts: fixed {axis} = {value!r} is not in the results (they have "
                    f"{have})")


def _tidy(pl, data: pl.DataFrame) -> pl.DataFrame:
    """Names as plain strings, whole-number axes as integers, other numbers rounded (JSON
    size), NaN and infinities as null."""
    fixes = []
    for name, dtype in data.schema.items():
        if dtype == pl.Categorical:  # how the runner's parquet stores names
            fixes.append(pl.col(name).cast(pl.String))
        elif name in INTEGER_AXES and dtype.is_numeric():
            fixes.append(pl.col(name).cast(pl.Int64))
        elif dtype.is_float() and name not in AXES:
            fixes.append(_rounded(pl, pl.col(name)))
    return data.with_columns(fixes)


def _rounded(pl, value):
    return pl.when(value.is_finite()).then(value.round_sig_figs(SIGNIFICANT_DIGITS))


def _positive(pl, *names: str):
    """Rows whose `names` are finite and positive (what a log scale can place)."""
    return pl.all_horizontal([pl.col(n).is_not_null() & (pl.col(n) > 0) for n in names])


# --- shared chart pieces ----------------------------------------------------------------

def _spaced(frame: pl.DataFrame, column: str, factor: float) -> pl.DataFrame:
    """The rows of `frame` (sorted by `column`) whose value is at least `factor` times
    the last one kept: labels on a log axis that would otherwise print over each other."""
    keep, last = [], 0.0
    for value in frame[column]:
        keep.append(value >= factor * last)
        last = value if keep[-1] else last
    return frame.filter(keep)


def _altair():
    import altair as alt

    return alt


def _dropdowns(alt, chart_slice: ChartSlice, *axes: str) -> list:
    """A select box for each axis with more than one kept value (default: the first)."""
    params = []
    for axis in axes:
        options = chart_slice.values(axis)
        if len(options) > 1:
            params.append(alt.param(name=f"{axis}_choice", value=options[0],
                                    bind=alt.binding_select(options=options,
                                                            name=f"{LABELS[axis]} ")))
    return params


def _only_chosen(alt, chart, params: list):
    """`chart` keeping the rows whose dropdown axes equal the current choices."""
    for param in params:
        chart = chart.transform_filter(alt.datum[param.name.removesuffix("_choice")] == param)
    return chart


def _legend_selection(alt, axis: str):
    return alt.selection_point(name=f"{axis}_legend", fields=[axis], bind="legend")


def _highlight(alt, selection, *, on: float = 1.0, off: float = 0.12):
    return alt.when(selection).then(alt.value(on)).otherwise(alt.value(off))


def _title(alt, text: str, chart_slice: ChartSlice, *notes: str):
    return alt.TitleParams(text=text, subtitle=chart_slice.subtitle(*notes), anchor="start")


def _empty(alt, text: str, reason: str) -> alt.TopLevelMixin:
    """A chart that says why there is nothing to draw, rather than failing the render."""
    return alt.Chart(alt.Data(values=[{"message": reason}])).mark_text(size=14).encode(
        text="message:N").properties(title=text, width=WIDTH, height=80)


FITS = "datum.fits ? 'fits' : 'exceeds memory'"
PART_LABELS = {"gemm": "GEMM (weights)", "attention": "attention (KV)", "step": "whole step",
               "activations": "activations", "communication": "communication"}


# --- the charts -------------------------------------------------------------------------

def roofline_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                   axes: Dimensions | None = None) -> alt.TopLevelMixin:
    """Attainable FLOP/s vs intensity (log-log): roofs, ridges, the step's parts.

    One roof per GPU and compute dtype with its ridge, and the step's GEMM part,
    attention part and whole step as points coloured by batch (one model at a time,
    chosen from a dropdown)."""
    import polars as pl

    alt = _altair()
    title = "Roofline: where the step's parts sit"
    parts = ("gemm", "attention", "step")
    metrics = ["peak_flops", "bandwidth_bytes_per_s", "flops", "step_time_s", "intensity",
               "bound"] + [f"{p}_{m}" for p in parts[:2]
                           for m in ("flops", "time_s", "intensity", "bound")]
    chart_slice = take_slice(frame, {"gpu": 10, "compute_dtype": 3, "model": 12, "batch": 12},
                             metrics, fixed=fixed, axes=axes, rows_per_point=len(parts))
    data = chart_slice.data.with_columns(roof=pl.format("{} · {}", "gpu", "compute_dtype"))

    def part_rows(part: str):
        prefix = "" if part == "step" else f"{part}_"
        time = "step_time_s" if part == "step" else f"{part}_time_s"
        return data.select(
            "roof", "model", "batch", part=pl.lit(PART_LABELS[part]),
            intensity=pl.col(f"{prefix}intensity"),
            tflops=_rounded(pl, pl.col(f"{prefix}flops") / pl.col(time) / 1e12),
            bound=pl.col(f"{prefix}bound"))

    points = pl.concat([part_rows(p) for p in parts]).filter(
        _positive(pl, "intensity", "tflops"))
    ridges = data.group_by("roof").agg(
        peak_tflops=pl.col("peak_flops").first() / 1e12,
        bandwidth_tbs=pl.col("bandwidth_bytes_per_s").first() / 1e12).with_columns(
        ridge=_rounded(pl, pl.col("peak_tflops") / pl.col("bandwidth_tbs"))).filter(
        _positive(pl, "ridge")).sort("roof")
    if points.is_empty() or ridges.is_empty():
        return _empty(alt, title, "no step with work to place in these results")
    low = min(points["intensity"].min(), ridges["ridge"].min()) / 4
    high = max(points["intensity"].max(), ridges["ridge"].max()) * 4
    roofs = pl.concat([
        ridges.with_columns(intensity=pl.lit(low),
                            tflops=pl.lit(low) * pl.col("bandwidth_tbs")),
        ridges.with_columns(intensity=pl.col("ridge"), tflops=pl.col("peak_tflops")),
        ridges.with_columns(intensity=pl.lit(high), tflops=pl.col("peak_tflops")),
    ]).with_columns(_rounded(pl, pl.col("intensity")), _rounded(pl, pl.col("tflops")))

    x = alt.X("intensity:Q", scale=alt.Scale(type="log"),
              title="Arithmetic intensity (FLOP/byte)")
    y = alt.Y("tflops:Q", scale=alt.Scale(type="log"), axis=alt.Axis(format="~g"),
              title="Attainable throughput (TFLOP/s)")
    roof_pick = _legend_selection(alt, "roof")
    batch_pick = _legend_selection(alt, "batch")
    models = _dropdowns(alt, chart_slice, "model")
    roof_tooltip = [alt.Tooltip("roof:N"),
                    alt.Tooltip("peak_tflops:Q", title="peak (TFLOP/s)", format=",.4~g"),
                    alt.Tooltip("bandwidth_tbs:Q", title="bandwidth (TB/s)", format=",.4~g"),
                    alt.Tooltip("ridge:Q", title="ridge (FLOP/byte)", format=",.1f")]
    roof_lines = alt.Chart(roofs).mark_line(strokeWidth=2).encode(
        x=x, y=y, detail="roof:N", tooltip=roof_tooltip,
        color=alt.Color("roof:N", title="Roof (GPU · compute dtype)",
                        scale=alt.Scale(scheme="tableau20")),
        opacity=_highlight(alt, roof_pick)).add_params(roof_pick).properties(name="roofs")
    ridge_marks = alt.Chart(ridges).mark_point(
        shape="diamond", filled=True, size=90, color="#333").encode(
        x="ridge:Q", y="peak_tflops:Q", tooltip=roof_tooltip,
        opacity=_highlight(alt, roof_pick)).properties(name="ridges")
    dots = _only_chosen(alt, alt.Chart(points), models).mark_point(
        filled=True, size=70).encode(
        x=x, y=y,
        color=alt.Color("batch:O", title="Batch (sequences)",
                        scale=alt.Scale(scheme="viridis")),
        shape=alt.Shape("part:N", title="Part", sort=[PART_LABELS[p] for p in parts]),
        opacity=_highlight(alt, roof_pick & batch_pick, on=0.95, off=0.08),
        tooltip=[alt.Tooltip("roof:N"), alt.Tooltip("model:N"),
                 alt.Tooltip("batch:Q", title="batch (sequences)", format=","),
                 alt.Tooltip("part:N"),
                 alt.Tooltip("intensity:Q", title="intensity (FLOP/byte)", format=",.2f"),
                 alt.Tooltip("tflops:Q", title="achieved (TFLOP/s)", format=",.4~g"),
                 alt.Tooltip("bound:N")],
    ).add_params(batch_pick, *models).properties(name="parts")
    layers = alt.layer(roof_lines, ridge_marks, dots).resolve_scale(color="independent")
    return layers.properties(
        width=WIDTH, height=HEIGHT,
        title=_title(alt, title, chart_slice,
                     "lines: memory roof (intensity × bandwidth) up to the ridge (diamond), "
                     "then the compute roof; points: the FLOP/s each part achieves"))


def throughput_vs_batch_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                              axes: Dimensions | None = None) -> alt.TopLevelMixin:
    """Decode tokens/s vs batch, all users and per user, one line per context.

    A cross marks a batch whose KV cache no longer fits, a dashed rule the largest that
    does (the seed's chart, for every GPU and model of the grid)."""
    import polars as pl

    alt = _altair()
    title = "Decode throughput vs batch"
    chart_slice = take_slice(
        frame, {"gpu": 16, "model": 12, "context": 8, "batch": 24},
        ["tokens_per_s", "per_user_tokens_per_s", "step_time_s", "attention_share", "fits",
         "max_batch"], fixed=fixed, axes=axes)
    data = chart_slice.data.filter(_positive(pl, "batch", "tokens_per_s"))
    if data.is_empty():
        return _empty(alt, title, "no decode step (batch > 0) in these results")
    limits = data.group_by("gpu", "model", "context").agg(pl.col("max_batch").first()).filter(
        (pl.col("max_batch") >= 1) & (pl.col("max_batch") < data["batch"].max()))
    points = data.select(
        "gpu", "model", "context", "batch", "fits", tok_s=pl.col("tokens_per_s"),
        user_tok_s=pl.col("per_user_tokens_per_s"),
        step_ms=_rounded(pl, pl.col("step_time_s") * 1e3),
        attention=pl.col("attention_share"))
    dropdowns = _dropdowns(alt, chart_slice, "gpu", "model")
    context_pick = _legend_selection(alt, "context")
    x = alt.X("batch:Q", scale=alt.Scale(type="log", base=2), axis=alt.Axis(format=","),
              title="Batch (sequences)")
    color = alt.Color("context:O", title="Context (tokens)", scale=alt.Scale(scheme="plasma"),
                      legend=alt.Legend(format=","))
    tooltip = [alt.Tooltip("gpu:N", title="GPU"), alt.Tooltip("model:N"),
               alt.Tooltip("context:Q", title="context (tokens)", format=","),
               alt.Tooltip("batch:Q", title="batch (sequences)", format=","),
               alt.Tooltip("tok_s:Q", title="all users (tok/s)", format=",.0f"),
               alt.Tooltip("user_tok_s:Q", title="per user (tok/s)", format=",.1f"),
               alt.Tooltip("step_ms:Q", title="step time (ms)", format=",.4~g"),
               alt.Tooltip("attention:Q", title="attention share", format=".0%"),
               alt.Tooltip("memory:N", title="KV cache")]
    opacity = _highlight(alt, context_pick)

    def panel(name: str, metric: str, axis_title: str, params: list):
        base = _only_chosen(alt, alt.Chart(points), dropdowns
                            ).transform_calculate(memory=FITS)
        y = alt.Y(f"{metric}:Q", title=axis_title, axis=alt.Axis(format="~s"))
        line = base.mark_line().encode(x=x, y=y, color=color, opacity=opacity,
                                       tooltip=tooltip)
        marks = base.mark_point(size=55, filled=True).encode(
            x=x, y=y, color=color, opacity=opacity, tooltip=tooltip,
            shape=alt.Shape("memory:N", title="KV cache",
                            scale=alt.Scale(domain=["fits", "exceeds memory"],
                                            range=["circle", "cross"])))
        rules = _only_chosen(alt, alt.Chart(limits), dropdowns).mark_rule(
            strokeDash=[5, 4]).encode(
            x="max_batch:Q", color=color, opacity=opacity,
            tooltip=[alt.Tooltip("context:Q", title="context (tokens)", format=","),
                     alt.Tooltip("max_batch:Q", title="largest batch in memory",
                                 format=",")])
        # Only the layer holding the selection is named: Altair binds a selection to
        # every named layer of a layered chart inside a concat (a duplicate signal).
        return alt.layer(line.add_params(*params).properties(name=f"{name}_lines"),
                         marks, rules).properties(width=WIDTH // 2 + 60, height=HEIGHT - 40)

    return alt.hconcat(
        panel("all_users", "tok_s", "Tokens per second, all users (tok/s)",
              [context_pick, *dropdowns]),
        panel("per_user", "user_tok_s", "Tokens per second per user (tok/s)", []),
    ).properties(title=_title(alt, title, chart_slice,
                              "× = the batch's KV cache exceeds GPU memory; dashed rule = "
                              "the largest batch that fits"))


def intensity_ceiling_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                            axes: Dimensions | None = None) -> alt.TopLevelMixin:
    """Decode intensity ceiling vs context, per group size, against the ridges.

    The closed form as batch grows without bound (the step's `intensity_ceiling`) as
    lines, the step's intensity at the grid's largest batch as points, and each GPU's
    ridge as a dashed rule."""
    import polars as pl

    alt = _altair()
    title = "Decode intensity ceiling vs context"
    lazy = frame.lazy()
    group = "group_size" if "group_size" in lazy.collect_schema().names() else "kv_heads"
    chart_slice = take_slice(frame, {"model": 12, group: 8, "context": 32},
                             ["intensity_ceiling", "intensity", "batch"], fixed=fixed,
                             axes=axes, prefer={"batch": "max"})
    data = chart_slice.data.filter(_positive(pl, "context", "intensity_ceiling")).rename(
        {group: "group", "intensity_ceiling": "ceiling"})
    if data.is_empty():
        return _empty(alt, title, "no decode step with context > 0 in these results")
    ridges = (lazy.select("gpu", "compute_dtype", "ridge").unique().sort("ridge")
              .collect().filter(_positive(pl, "ridge")))
    ridges = _tidy(pl, ridges.gather(_spread(list(range(ridges.height)), 8))).select(
        "ridge", label=pl.format("{} {} ridge", "gpu", "compute_dtype"),
        context=pl.lit(data["context"].max()))
    models = _dropdowns(alt, chart_slice, "model")
    group_pick = _legend_selection(alt, "group")
    x = alt.X("context:Q", scale=alt.Scale(type="log", base=2), axis=alt.Axis(format=","),
              title="Context (tokens cached per sequence)")
    color = alt.Color("group:O", title=LABELS[group].capitalize(),
                      scale=alt.Scale(scheme="dark2"))
    opacity = _highlight(alt, group_pick)
    largest = _show(data["batch"].max())
    tooltip = [alt.Tooltip("model:N"), alt.Tooltip("group:Q", title=LABELS[group]),
               alt.Tooltip("context:Q", title="context (tokens)", format=","),
               alt.Tooltip("ceiling:Q", title="ceiling, batch → ∞ (FLOP/byte)",
                           format=",.2f"),
               alt.Tooltip("intensity:Q", title=f"intensity at batch {largest} (FLOP/byte)",
                           format=",.2f")]
    base = _only_chosen(alt, alt.Chart(data), models)
    line = base.mark_line().encode(
        x=x, y=alt.Y("ceiling:Q", scale=alt.Scale(type="log"),
                     title="Arithmetic intensity (FLOP/byte)"),
        color=color, opacity=opacity, tooltip=tooltip).add_params(
        group_pick, *models).properties(name="ceilings")
    dots = base.mark_point(size=60, filled=True).encode(
        x=x, y="intensity:Q", color=color, opacity=opacity, tooltip=tooltip).properties(
        name="largest_batch")
    ridge_tooltip = [alt.Tooltip("label:N", title="GPU"),
                     alt.Tooltip("ridge:Q", title="ridge (FLOP/byte)", format=",.1f")]
    rules = alt.Chart(ridges).mark_rule(strokeDash=[6, 4], color="#777").encode(
        y="ridge:Q", tooltip=ridge_tooltip).properties(name="ridges")
    # a label's height (14 px) as a factor on the log axis (its data span, plus the
    # decade Vega's rounding adds)
    values = pl.concat([data["ceiling"], data["intensity"], ridges["ridge"]]).drop_nulls()
    decades = math.log10(values.max() / values.min()) + 1
    labels = alt.Chart(_spaced(ridges, "ridge", 10 ** (14 * decades / HEIGHT))).mark_text(
        align="right", dy=-6, color="#555").encode(
        x="context:Q", y="ridge:Q", text="label:N", tooltip=ridge_tooltip).properties(
        name="ridge_labels")
    return alt.layer(rules, labels, line, dots).properties(
        width=WIDTH, height=HEIGHT,
        title=_title(alt, title, chart_slice,
                     f"lines: closed-form ceiling as batch → ∞; points: the step's intensity "
                     f"at batch {largest}; dashed: ridges (above them a step would be "
                     "compute-bound)"))


SHARE_BANDS = 10  # the heatmap's colour classes, so that its legend can select them
BAND_WIDTH = 100 // SHARE_BANDS


def attention_share_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                          axes: Dimensions | None = None) -> alt.TopLevelMixin:
    """Attention's share of the step time, a heatmap over batch × context.

    In 10 % bands (the legend selects bands); × marks configurations that do not fit."""
    import polars as pl

    alt = _altair()
    title = "Attention's share of the decode step"
    chart_slice = take_slice(
        frame, {"gpu": 16, "model": 12, "batch": 16, "context": 16},
        ["attention_share", "step_time_s", "tokens_per_s", "fits", "bound"],
        fixed=fixed, axes=axes)
    data = chart_slice.data.filter(pl.col("attention_share").is_not_null())
    if data.is_empty():
        return _empty(alt, title, "no step with a finite attention share in these results")
    cells = data.select("gpu", "model", "batch", "context", "fits", "bound",
                        attention=pl.col("attention_share"), tok_s=pl.col("tokens_per_s"),
                        step_ms=_rounded(pl, pl.col("step_time_s") * 1e3))
    bands = [f"{b}–{b + BAND_WIDTH} %" for b in range(0, 100, BAND_WIDTH)]
    band = f"floor(min(datum.attention, 0.9999) * {SHARE_BANDS}) * {BAND_WIDTH}"
    dropdowns = _dropdowns(alt, chart_slice, "gpu", "model")
    band_pick = _legend_selection(alt, "band")
    x = alt.X("batch:O", title="Batch (sequences)", sort="ascending",
              axis=alt.Axis(labelAngle=0))
    y = alt.Y("context:O", title="Context (tokens)", sort="descending",
              axis=alt.Axis(format=","))
    tooltip = [alt.Tooltip("gpu:N", title="GPU"), alt.Tooltip("model:N"),
               alt.Tooltip("batch:Q", title="batch (sequences)", format=","),
               alt.Tooltip("context:Q", title="context (tokens)", format=","),
               alt.Tooltip("attention:Q", title="attention share", format=".1%"),
               alt.Tooltip("step_ms:Q", title="step time (ms)", format=",.4~g"),
               alt.Tooltip("tok_s:Q", title="all users (tok/s)", format=",.0f"),
               alt.Tooltip("bound:N"), alt.Tooltip("memory:N", title="KV cache")]
    label = f"format({band}, 'd') + '–' + format({band} + {BAND_WIDTH}, 'd') + ' %'"
    base = _only_chosen(alt, alt.Chart(cells), dropdowns).transform_calculate(
        memory=FITS, band=label)
    heat = base.mark_rect().encode(
        x=x, y=y, tooltip=tooltip, opacity=_highlight(alt, band_pick, off=0.15),
        color=alt.Color("band:O", title="Attention share",
                        scale=alt.Scale(domain=bands, scheme="orangered")),
    ).add_params(band_pick, *dropdowns).properties(name="cells")
    crosses = base.transform_filter("!datum.fits").mark_text(
        text="×", fontSize=16, color="#222").encode(x=x, y=y, tooltip=tooltip).properties(
        name="over_memory")
    return alt.layer(heat, crosses).properties(
        width=WIDTH, height=HEIGHT,
        title=_title(alt, title, chart_slice,
                     "share of the parts' time spent in attention; × = the KV cache exceeds "
                     "GPU memory"))


def gpu_comparison_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                         axes: Dimensions | None = None) -> alt.TopLevelMixin:
    """The same workload on each GPU: step time split into parts, vs batch.

    One panel per GPU on a shared time axis."""
    import polars as pl

    alt = _altair()
    title = "Where the step's time goes, GPU by GPU"
    present = frame.lazy().collect_schema().names()
    parts = [p for p in ("gemm", "attention", "activations", "communication")
             if f"{p}_time_s" in present]
    chart_slice = take_slice(
        frame, {"gpu": 12, "model": 12, "batch": 12},
        [f"{p}_time_s" for p in parts] + ["step_time_s", "tokens_per_s"],
        fixed=fixed, axes=axes, rows_per_point=len(parts))
    data = pl.concat([
        chart_slice.data.select(
            "gpu", "model", "batch", part=pl.lit(PART_LABELS[p]),
            ms=_rounded(pl, pl.col(f"{p}_time_s") * 1e3),
            step_ms=_rounded(pl, pl.col("step_time_s") * 1e3), tok_s=pl.col("tokens_per_s"))
        for p in parts]).filter(pl.col("ms").is_not_null())
    if data.is_empty():
        return _empty(alt, title, "no step in these results")
    models = _dropdowns(alt, chart_slice, "model")
    part_pick = _legend_selection(alt, "part")
    order = [PART_LABELS[p] for p in parts]
    bars = _only_chosen(alt, alt.Chart(data), models).mark_bar().encode(
        x=alt.X("batch:O", title="Batch (sequences)", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("sum(ms):Q", title="Step time (ms)", stack="zero"),
        color=alt.Color("part:N", title="Part", sort=order,
                        scale=alt.Scale(domain=order, scheme="set2")),
        order=alt.Order("part:N", sort="ascending"),
        opacity=_highlight(alt, part_pick, off=0.2),
        tooltip=[alt.Tooltip("gpu:N", title="GPU"), alt.Tooltip("model:N"),
                 alt.Tooltip("batch:Q", title="batch (sequences)", format=","),
                 alt.Tooltip("part:N"),
                 alt.Tooltip("ms:Q", title="part time (ms)", format=",.4~g"),
                 alt.Tooltip("step_ms:Q", title="step time (ms)", format=",.4~g"),
                 alt.Tooltip("tok_s:Q", title="all users (tok/s)", format=",.0f")],
    ).add_params(part_pick, *models).properties(name="parts", width=200, height=160)
    return bars.facet(facet=alt.Facet("gpu:N", title=None), columns=4).properties(
        title=_title(alt, title, chart_slice,
                     "stacked: each part's roofline time; the panels share the time axis"))


# --- charts of simulate and optimize grids (rooftui.sweeps.kinds) ----------------------

def _note(alt, text: str, reason: str) -> alt.TopLevelMixin:
    """`_empty`, its message held as a data set like every chart's rows."""
    import polars as pl

    return alt.Chart(pl.DataFrame({"message": [reason]})).mark_text(size=14).encode(
        text="message:N").properties(title=text, width=WIDTH, height=80)


def _has(frame: Frame, *columns: str) -> bool:
    present = frame.lazy().collect_schema().names()
    return all(column in present for column in columns)


def _label(pl, *columns: str, present: Sequence[str]):
    """The last non-empty of `columns` as a name: a length law overrides the workload's."""
    label = pl.lit("all")
    for column in columns:
        if column in present:
            value = pl.col(column).cast(pl.String)
            label = pl.when(value == "").then(label).otherwise(value)
    return label


SERVING_DROPDOWNS = ("gpu", "model", "workload", "slo_ttft", "slo_tpot")


def _serving_slice(frame: Frame, shown: Mapping[str, int], metrics: Sequence[str], *,
                   fixed: Mapping[str, Any] | None, axes: Dimensions | None,
                   rows_per_point: int = 1) -> ChartSlice:
    """`take_slice` for simulate and optimize results: without the grid's dimensions (a
    frame from `sweep optimize`), each input column in `SERVING_AXES` counts as one; an
    axis given in `fixed` is held there rather than shown (a dropdown or a legend)."""
    import polars as pl

    shown = {axis: count for axis, count in shown.items() if axis not in (fixed or {})}

    if axes is None:
        present = [c for c in SERVING_AXES if c in frame.lazy().collect_schema().names()]
        found = frame.lazy().select(pl.col(c).drop_nulls().unique().sort().implode()
                                    for c in present).collect() if present else None
        axes = [{c: found[c][0].to_list()} for c in present]
    return take_slice(frame, shown, metrics, fixed=fixed, axes=axes,
                      rows_per_point=rows_per_point)


def occupancy_vs_batch_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                             axes: Dimensions | None = None) -> alt.TopLevelMixin:
    """Slot occupancy vs max batch, one colour per length distribution, with 1/H_B.

    Simulated occupancy (points, one shape per policy: static batching against continuous
    batching and chunked prefill), the exact E[L] / E[max of B] of each output law
    (lines: what static batching should reach) and the exponential law's 1/H_B (dashed):
    how far real lengths move static batching from the seed's result."""
    import polars as pl

    alt = _altair()
    title = "Slot occupancy vs max batch"
    if not _has(frame, "max_batch", "occupancy", "static_occupancy"):
        return _note(alt, title, "no simulate results (max_batch, occupancy) here")
    chart_slice = _serving_slice(
        frame, {"gpu": 8, "model": 8, "policy": 3, "workload": 12, "output_tokens": 12,
                "max_batch": 32},
        ["occupancy", "static_occupancy", "harmonic_occupancy", "mean_batch"],
        fixed=fixed, axes=axes)
    present = chart_slice.data.columns
    data = chart_slice.data.filter(pl.col("occupancy").is_not_null()).with_columns(
        distribution=_label(pl, "workload", "output_tokens", present=present))
    if "policy" not in present:
        data = data.with_columns(policy=pl.lit("simulated"))
    if data.is_empty():
        return _note(alt, title, "no simulation in these results")
    harmonic = data.select("max_batch", "harmonic_occupancy").unique().sort("max_batch")
    analytic = data.select(*(c for c in ("gpu", "model") if c in present), "distribution",
                           "max_batch", "static_occupancy").unique().sort("max_batch")
    dropdowns = _dropdowns(alt, chart_slice, "gpu", "model")
    pick = _legend_selection(alt, "distribution")
    x = alt.X("max_batch:Q", scale=alt.Scale(type="log", base=2), axis=alt.Axis(format=","),
              title="Max batch (slots)")
    y = alt.Y("occupancy:Q", title="Occupancy (useful slot-steps)",
              axis=alt.Axis(format=".0%"), scale=alt.Scale(domain=[0, 1]))
    color = alt.Color("distribution:N", title="Lengths", scale=alt.Scale(scheme="tableau10"))
    tooltip = [alt.Tooltip("distribution:N", title="lengths"), alt.Tooltip("policy:N"),
               alt.Tooltip("max_batch:Q", title="max batch", format=","),
               alt.Tooltip("occupancy:Q", title="simulated", format=".1%"),
               alt.Tooltip("static_occupancy:Q", title="E[L] / E[max of B]", format=".1%"),
               alt.Tooltip("harmonic_occupancy:Q", title="1/H_B", format=".1%"),
               alt.Tooltip("mean_batch:Q", title="mean batch", format=",.1f")]
    lines = _only_chosen(alt, alt.Chart(analytic), dropdowns).mark_line().encode(
        x=x, y="static_occupancy:Q", color=color, opacity=_highlight(alt, pick),
        tooltip=[alt.Tooltip("distribution:N", title="lengths"),
                 alt.Tooltip("max_batch:Q", title="max batch", format=","),
                 alt.Tooltip("static_occupancy:Q", title="E[L] / E[max of B]", format=".1%")]
    ).add_params(pick, *dropdowns).properties(name="analytic")
    dots = _only_chosen(alt, alt.Chart(data), dropdowns).mark_point(size=60, filled=True
                                                                   ).encode(
        x=x, y=y, color=color, opacity=_highlight(alt, pick), tooltip=tooltip,
        shape=alt.Shape("policy:N", title="Policy")).properties(name="simulated")
    reference = alt.Chart(harmonic).mark_line(strokeDash=[6, 4], color="#333").encode(
        x=x, y="harmonic_occupancy:Q",
        tooltip=[alt.Tooltip("max_batch:Q", title="max batch", format=","),
                 alt.Tooltip("harmonic_occupancy:Q", title="1/H_B", format=".1%")]
    ).properties(name="harmonic")
    return alt.layer(reference, lines, dots).properties(
        width=WIDTH, height=HEIGHT,
        title=_title(alt, title, chart_slice,
                     "points: simulated, by policy; lines: E[L] / E[max of B] of the output "
                     "law (exact, static batching); dashed: 1/H_B, the exponential law's"))


PERCENTILE_DASHES = {"p50": [1, 0], "p90": [6, 3], "p99": [2, 2]}


def latency_vs_rate_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                          axes: Dimensions | None = None) -> alt.TopLevelMixin:
    """TTFT and TPOT percentiles (p50, p90, p99) vs arrival rate, one colour per policy."""
    import polars as pl

    alt = _altair()
    title = "Latency vs arrival rate"
    if not _has(frame, "rate", "ttft_p50_s", "policy"):
        return _note(alt, title, "no simulations at a given rate (a rate axis) here")
    stats = ("p50", "p90", "p99")
    metrics = [f"{m}_{q}_s" for m in ("ttft", "tpot") for q in stats]
    chart_slice = _serving_slice(frame, {"gpu": 6, "model": 6, "workload": 8, "policy": 3,
                                     "rate": 32}, metrics, fixed=fixed, axes=axes,
                             rows_per_point=len(metrics))
    data = chart_slice.data
    keys = [c for c in ("gpu", "model", "workload", "policy", "rate") if c in data.columns]
    long = pl.concat([data.select(*keys, metric=pl.lit(m.upper()), percentile=pl.lit(q),
                                  seconds=pl.col(f"{m}_{q}_s"))
                      for m in ("ttft", "tpot") for q in stats]).filter(
        _positive(pl, "rate", "seconds"))
    if long.is_empty():
        return _note(alt, title, "no latency at a positive rate in these results")
    dropdowns = _dropdowns(alt, chart_slice, "gpu", "model", "workload")
    pick = _legend_selection(alt, "policy")
    tooltip = [alt.Tooltip("policy:N"), alt.Tooltip("rate:Q", title="rate (req/s)",
                                                    format=",.3~g"),
               alt.Tooltip("metric:N"), alt.Tooltip("percentile:N"),
               alt.Tooltip("seconds:Q", title="seconds", format=",.4~g")]

    def panel(metric: str, params: list):
        base = _only_chosen(alt, alt.Chart(long), dropdowns).transform_filter(
            alt.datum.metric == metric)
        line = base.mark_line(point=True).encode(
            x=alt.X("rate:Q", title="Arrival rate (requests/s)", scale=alt.Scale(type="log")),
            y=alt.Y("seconds:Q", scale=alt.Scale(type="log"), title=f"{metric} (s)",
                    axis=alt.Axis(format="~g")),
            color=alt.Color("policy:N", title="Policy", scale=alt.Scale(scheme="set1")),
            strokeDash=alt.StrokeDash("percentile:N", title="Percentile",
                                      scale=alt.Scale(domain=list(PERCENTILE_DASHES),
                                                      range=list(PERCENTILE_DASHES.values()))),
            opacity=_highlight(alt, pick), tooltip=tooltip)
        if params:
            line = line.add_params(*params)
        return line.properties(name=f"{metric.lower()}_lines", width=WIDTH // 2 + 40,
                               height=HEIGHT - 40)

    return alt.hconcat(panel("TTFT", [pick, *dropdowns]), panel("TPOT", [])).properties(
        title=_title(alt, title, chart_slice,
                     "solid p50, dashed p90, dotted p99; both axes logarithmic"))


def itl_spike_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                    axes: Dimensions | None = None) -> alt.TopLevelMixin:
    """The longest inter-token gap vs the chunked token budget, per prompt length, against
    the unchunked (continuous batching, whole prompts) gap as a dashed rule."""
    import polars as pl

    alt = _altair()
    title = "Inter-token stall of long prompts vs chunk size"
    if not _has(frame, "itl_max_s", "token_budget", "policy"):
        return _note(alt, title, "no simulate results (token_budget, itl_max_s) here")
    held = {key: value for key, value in (fixed or {}).items() if key != "policy"}
    chart_slice = _serving_slice(frame, {"gpu": 6, "model": 6, "policy": 3, "workload": 8,
                                     "input_tokens": 8, "token_budget": 24},
                             ["itl_max_s", "itl_p50_s", "itl_p99_s"], fixed=held, axes=axes)
    present = chart_slice.data.columns
    data = chart_slice.data.with_columns(
        prompts=_label(pl, "workload", "input_tokens", present=present)).filter(
        _positive(pl, "itl_max_s"))
    chunked = data.filter((pl.col("policy") == "chunked") & (pl.col("token_budget") > 0))
    if chunked.is_empty():
        return _note(alt, title, "no chunked simulations with a token budget here")
    keys = [c for c in ("gpu", "model", "prompts") if c in data.columns]
    whole = data.filter(pl.col("policy") == "continuous").group_by(keys).agg(
        pl.col("itl_max_s").max())
    dropdowns = _dropdowns(alt, chart_slice, "gpu", "model")
    pick = _legend_selection(alt, "prompts")
    color = alt.Color("prompts:N", title="Prompt lengths", scale=alt.Scale(scheme="dark2"))
    y = alt.Y("itl_max_s:Q", scale=alt.Scale(type="log"), axis=alt.Axis(format="~g"),
              title="Longest gap between two tokens (s)")
    tooltip = [alt.Tooltip("prompts:N", title="prompts"),
               alt.Tooltip("token_budget:Q", title="token budget", format=","),
               alt.Tooltip("itl_max_s:Q", title="longest gap (s)", format=",.4~g"),
               alt.Tooltip("itl_p99_s:Q", title="ITL p99 (s)", format=",.4~g"),
               alt.Tooltip("itl_p50_s:Q", title="ITL p50 (s)", format=",.4~g")]
    lines = _only_chosen(alt, alt.Chart(chunked), dropdowns).mark_line(point=True).encode(
        x=alt.X("token_budget:Q", scale=alt.Scale(type="log", base=2),
                axis=alt.Axis(format=","), title="Chunked token budget (tokens per step)"),
        y=y, color=color, opacity=_highlight(alt, pick), tooltip=tooltip).add_params(
        pick, *dropdowns).properties(name="chunked")
    layers = [lines]
    if not whole.is_empty():
        layers.append(_only_chosen(alt, alt.Chart(whole), dropdowns).mark_rule(
            strokeDash=[6, 4]).encode(
            y="itl_max_s:Q", color=color, opacity=_highlight(alt, pick),
            tooltip=[alt.Tooltip("prompts:N", title="prompts"),
                     alt.Tooltip("itl_max_s:Q", title="unchunked longest gap (s)",
                                 format=",.4~g")]).properties(name="unchunked"))
    return alt.layer(*layers).properties(
        width=WIDTH, height=HEIGHT,
        title=_title(alt, title, chart_slice,
                     "lines: chunked prefill; dashed rules: whole prompts (continuous "
                     "batching), the stall chunking removes"))


def _optimize_slice(frame: Frame, fixed, axes, metrics: Sequence[str]) -> ChartSlice:
    return _serving_slice(frame, {"gpu": 6, "model": 6, "workload": 6, "slo_ttft": 6,
                              "slo_tpot": 6, "max_batch": 24, "token_budget": 24},
                      ["status", "reason", *metrics], fixed=fixed, axes=axes)


def _search_groups(data) -> list[str]:
    """The columns that tell one search (a GPU, model, workload and SLO) from another."""
    return [c for c in SERVING_DROPDOWNS if c in data.columns]


def _with_best(pl, data):
    """`best`: the candidate `sweep optimize` picks in each search (highest rate, then
    goodput; ties to the smaller batch and budget); `shade`: the rate's place between the
    search's lowest and highest sustained rates (0 to 1)."""
    groups = _search_groups(data)
    keys = ["rate", "goodput_tokens_per_s", "max_batch", "token_budget"]
    order = pl.struct(-pl.col("rate").fill_nan(None), -pl.col("goodput_tokens_per_s"),
                      *keys[2:]).rank("ordinal")
    sustained = pl.col("status") == "sustained"
    low, high = pl.col("rate").filter(sustained).min(), pl.col("rate").filter(sustained).max()

    def within(expression):
        return expression.over(groups) if groups else expression

    return data.with_columns(
        best=(sustained & (within(pl.when(sustained).then(order).min()) == order)
              ).fill_null(False),
        shade=((pl.col("rate") - within(low)) / (within(high) - within(low))).fill_nan(1.0))


def pareto_frontier_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                          axes: Dimensions | None = None) -> alt.TopLevelMixin:
    """Tokens/s per GPU against tokens/s per user for every sustained (max batch, budget),
    the Pareto frontier joined, the highest sustained rate starred."""
    import polars as pl

    alt = _altair()
    title = "Pareto frontier: throughput per GPU vs speed per user"
    metrics = ["rate", "tokens_per_s_per_gpu", "per_user_tokens_per_s", "goodput_tokens_per_s",
               "ttft_p90_s", "tpot_p90_s"]
    if not _has(frame, "tokens_per_s_per_gpu", "per_user_tokens_per_s", "max_batch"):
        return _note(alt, title, "no optimize results (tokens_per_s_per_gpu) here")
    chart_slice = _optimize_slice(frame, fixed, axes, metrics)
    data = chart_slice.data.filter((pl.col("status") == "sustained")
                                   & _positive(pl, "per_user_tokens_per_s",
                                               "tokens_per_s_per_gpu"))
    if data.is_empty():
        return _note(alt, title, "no candidate sustains the objective in these results")
    groups = _search_groups(data)
    data = data.sort([*groups, "per_user_tokens_per_s", "tokens_per_s_per_gpu"],
                     descending=[False] * len(groups) + [True, True])
    best_so_far = pl.col("tokens_per_s_per_gpu").cum_max().shift(1)
    if groups:
        best_so_far = best_so_far.over(groups)
    data = _with_best(pl, data).with_columns(
        frontier=best_so_far.is_null() | (pl.col("tokens_per_s_per_gpu") > best_so_far))
    dropdowns = _dropdowns(alt, chart_slice, *SERVING_DROPDOWNS)
    x = alt.X("per_user_tokens_per_s:Q", title="Tokens per second per user (1 / mean TPOT)",
              scale=alt.Scale(zero=False))
    y = alt.Y("tokens_per_s_per_gpu:Q", title="Output tokens per second per GPU",
              scale=alt.Scale(zero=False), axis=alt.Axis(format="~s"))
    tooltip = [alt.Tooltip("max_batch:Q", title="max batch", format=","),
               alt.Tooltip("token_budget:Q", title="token budget", format=","),
               alt.Tooltip("rate:Q", title="sustained rate (req/s)", format=",.3~g"),
               alt.Tooltip("tokens_per_s_per_gpu:Q", title="tok/s per GPU", format=",.0f"),
               alt.Tooltip("per_user_tokens_per_s:Q", title="tok/s per user", format=",.1f"),
               alt.Tooltip("goodput_tokens_per_s:Q", title="goodput (tok/s)", format=",.0f"),
               alt.Tooltip("ttft_p90_s:Q", title="TTFT p90 (s)", format=",.3~g"),
               alt.Tooltip("tpot_p90_s:Q", title="TPOT p90 (s)", format=",.3~g")]
    base = _only_chosen(alt, alt.Chart(data), dropdowns)
    dots = base.mark_point(size=60, filled=True, opacity=0.75).encode(
        x=x, y=y, tooltip=tooltip,
        color=alt.Color("max_batch:O", title="Max batch", scale=alt.Scale(scheme="viridis")),
        shape=alt.Shape("token_budget:O", title="Token budget")).add_params(
        *dropdowns).properties(name="candidates")
    front = base.transform_filter(alt.datum.frontier).mark_line(color="#d62728").encode(
        x=x, y=y, tooltip=tooltip).properties(name="frontier")
    star = base.transform_filter(alt.datum.best).mark_point(
        shape="diamond", size=220, filled=False, color="#d62728", strokeWidth=2).encode(
        x=x, y=y, tooltip=tooltip).properties(name="best")
    return alt.layer(dots, front, star).resolve_scale(color="independent").properties(
        width=WIDTH, height=HEIGHT,
        title=_title(alt, title, chart_slice,
                     "points: every (max batch, budget) at its sustained rate; red line: the "
                     "frontier no other point beats on both; diamond: the highest rate"))


def rate_heatmap_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                       axes: Dimensions | None = None) -> alt.TopLevelMixin:
    """The sustained request rate over max batch x token budget; rejected cells grey with
    the letter of their reason, the best one outlined."""
    import polars as pl

    from rooftui.sweeps.optimize import REASONS

    alt = _altair()
    title = "Sustained request rate under the SLO"
    metrics = ["rate", "capacity_rate", "goodput_tokens_per_s", "ttft_p90_s", "tpot_p90_s"]
    if not _has(frame, "status", "max_batch", "token_budget"):
        return _note(alt, title, "no optimize results (status, max_batch) here")
    chart_slice = _optimize_slice(frame, fixed, axes, metrics)
    data = chart_slice.data
    if data.is_empty():
        return _note(alt, title, "no candidate in these results")
    data = _with_best(pl, data).with_columns(
        why=pl.col("reason").replace_strict({k: v[1] for k, v in REASONS.items()},
                                            default=pl.col("reason")),
        letter=pl.col("reason").replace_strict({k: v[2] for k, v in REASONS.items()},
                                               default=""),
        bright=pl.col("shade") > 0.6)  # viridis is bright at the top: dark text there
    dropdowns = _dropdowns(alt, chart_slice, *SERVING_DROPDOWNS)
    x = alt.X("token_budget:O", title="Token budget (tokens per step)",
              axis=alt.Axis(labelAngle=0, format=","))
    y = alt.Y("max_batch:O", title="Max batch", sort="descending", axis=alt.Axis(format=","))
    tooltip = [alt.Tooltip("max_batch:Q", title="max batch", format=","),
               alt.Tooltip("token_budget:Q", title="token budget", format=","),
               alt.Tooltip("status:N"), alt.Tooltip("why:N", title="reason"),
               alt.Tooltip("rate:Q", title="sustained rate (req/s)", format=",.3~g"),
               alt.Tooltip("capacity_rate:Q", title="capacity (req/s)", format=",.3~g"),
               alt.Tooltip("goodput_tokens_per_s:Q", title="goodput (tok/s)", format=",.0f"),
               alt.Tooltip("ttft_p90_s:Q", title="TTFT p90 (s)", format=",.3~g"),
               alt.Tooltip("tpot_p90_s:Q", title="TPOT p90 (s)", format=",.3~g")]
    base = _only_chosen(alt, alt.Chart(data), dropdowns)
    rejected = base.transform_filter(alt.datum.status != "sustained").mark_rect(
        color="#d9d9d9").encode(x=x, y=y, tooltip=tooltip).add_params(
        *dropdowns).properties(name="rejected")
    cells = base.transform_filter(alt.datum.status == "sustained").mark_rect().encode(
        x=x, y=y, tooltip=tooltip,
        color=alt.Color("rate:Q", title="Requests/s", scale=alt.Scale(scheme="viridis")),
    ).properties(name="sustained")
    letters = base.transform_filter(alt.datum.status != "sustained").mark_text(
        fontSize=13, color="#444").encode(x=x, y=y, text="letter:N", tooltip=tooltip
                                          ).properties(name="reasons")
    values = base.transform_filter(alt.datum.status == "sustained").mark_text(
        fontSize=11).encode(x=x, y=y, text=alt.Text("rate:Q", format=".3~g"), tooltip=tooltip,
                            color=alt.condition(alt.datum.bright, alt.value("#222"),
                                                alt.value("white"))).properties(name="rates")
    best = base.transform_filter(alt.datum.best).mark_rect(
        fill=None, stroke="#d62728", strokeWidth=3).encode(x=x, y=y, tooltip=tooltip
                                                           ).properties(name="best")
    seen = set(data["reason"].to_list())
    legend = " · ".join(f"{v[2]}: {v[1]}" for code, v in REASONS.items() if v[2] and code in seen)
    return alt.layer(rejected, cells, letters, values, best).properties(
        width=WIDTH, height=HEIGHT,
        title=_title(alt, title, chart_slice,
                     "requests/s at which the objective still holds; red frame: the highest",
                     *([f"grey, rejected: {legend}"] if legend else [])))


def ttft_vs_cache_capacity_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                                 axes: Dimensions | None = None) -> alt.TopLevelMixin:
    """TTFT p90 vs the prefix cache's HBM capacity, one colour per policy, one dash per
    set of lower tiers (CPU and SSD GB), with the prefill hit rate in the tooltip; the
    capacity axis is symmetric-logarithmic so that 0 (no HBM cache) shows."""
    import polars as pl

    alt = _altair()
    title = "TTFT p90 vs prefix-cache capacity"
    if not _has(frame, "cache_capacity_gb", "ttft_p90_s", "prefix_hit_rate"):
        return _note(alt, title, "no simulations over a cache_capacity_gb axis here")
    chart_slice = _serving_slice(
        frame, {"gpu": 6, "model": 6, "workload": 8, "policy": 3, "cpu_tier_gb": 4,
                "ssd_tier_gb": 4, "cache_capacity_gb": 32},
        ["ttft_p90_s", "ttft_p50_s", "tpot_p90_s", "prefix_hit_rate"], fixed=fixed, axes=axes)
    data = chart_slice.data
    present = data.columns
    below = [pl.when(pl.col(column) > 0).then(pl.format(f"{name} {{}} GB",
                                                        pl.col(column).round(1)))
             for column, name in (("cpu_tier_gb", "CPU"), ("ssd_tier_gb", "SSD"))
             if column in present]
    tiers = pl.concat_str(below, separator=" + ", ignore_nulls=True) if below else pl.lit("")
    data = data.with_columns(tiers=pl.when(tiers == "").then(pl.lit("none")).otherwise(tiers)
                             if below else pl.lit("none")).filter(
        pl.col("ttft_p90_s").is_not_null() & (pl.col("ttft_p90_s") > 0))
    if "policy" not in present:
        data = data.with_columns(policy=pl.lit("simulated"))
    if data.is_empty():
        return _note(alt, title, "no TTFT in these results")
    dropdowns = _dropdowns(alt, chart_slice, "gpu", "model", "workload")
    pick = _legend_selection(alt, "policy")
    tooltip = [alt.Tooltip("policy:N"), alt.Tooltip("tiers:N", title="tiers"),
               alt.Tooltip("cache_capacity_gb:Q", title="HBM cache (GB)", format=",.3~g"),
               alt.Tooltip("ttft_p90_s:Q", title="TTFT p90 (s)", format=",.4~g"),
               alt.Tooltip("ttft_p50_s:Q", title="TTFT p50 (s)", format=",.4~g"),
               alt.Tooltip("tpot_p90_s:Q", title="TPOT p90 (s)", format=",.4~g"),
               alt.Tooltip("prefix_hit_rate:Q", title="prefill tokens cached", format=".1%")]
    lines = _only_chosen(alt, alt.Chart(data), dropdowns).mark_line(point=True).encode(
        x=alt.X("cache_capacity_gb:Q", title="HBM for the prefix cache (GB per GPU)",
                scale=alt.Scale(type="symlog")),
        y=alt.Y("ttft_p90_s:Q", title="TTFT p90 (s)", scale=alt.Scale(type="log"),
                axis=alt.Axis(format="~g")),
        color=alt.Color("policy:N", title="Policy", scale=alt.Scale(scheme="set1")),
        strokeDash=alt.StrokeDash("tiers:N", title="Tiers below HBM"),
        detail="tiers:N", opacity=_highlight(alt, pick), tooltip=tooltip,
    ).add_params(pick, *dropdowns).properties(name="ttft_lines")
    return lines.properties(width=WIDTH, height=HEIGHT, title=_title(
        alt, title, chart_slice, "capacity 0: no HBM cache (lower tiers still hold blocks); "
        "TTFT axis logarithmic"))


CHARTS: dict[str, Callable[..., Any]] = {
    "roofline": roofline_chart,
    "throughput_vs_batch": throughput_vs_batch_chart,
    "intensity_ceiling": intensity_ceiling_chart,
    "attention_share": attention_share_chart,
    "gpu_comparison": gpu_comparison_chart,
    "occupancy_vs_batch": occupancy_vs_batch_chart,
    "latency_vs_rate": latency_vs_rate_chart,
    "itl_spike": itl_spike_chart,
    "pareto_frontier": pareto_frontier_chart,
    "rate_heatmap": rate_heatmap_chart,
    "ttft_vs_cache_capacity": ttft_vs_cache_capacity_chart,
}
DEFAULT_CHARTS = ("roofline", "throughput_vs_batch", "intensity_ceiling", "attention_share",
                  "gpu_comparison")
KIND_CHARTS = {"step": DEFAULT_CHARTS,  # what a grid of each kind renders by default
               "simulate": ("occupancy_vs_batch", "latency_vs_rate", "itl_spike"),
               "optimize": ("rate_heatmap", "pareto_frontier")}


# --- files --------------------------------------------------------------------------------

def chart_paths(stem: Path, *, png: bool = False, svg: bool = False) -> list[Path]:
    """The files `save_chart` writes for `stem`."""
    return [stem.with_name(f"{stem.name}.{extension}")
            for extension, wanted in (("html", True), ("png", png), ("svg", svg)) if wanted]


def save_chart(chart: alt.TopLevelMixin, stem: Path, *, png: bool = False,
               svg: bool = False) -> list[Path]:
    """Write `stem`.html (self-contained, offline) and optionally .png and .svg; each file
    goes to a temporary name first and is renamed into place (`atomic_path`), so none is
    ever half-written and a file-system failure is one line naming the file."""
    options = {"html": {"inline": True, "embed_options": EMBED_OPTIONS},
               "png": {"scale_factor": PNG_SCALE}, "svg": {}}
    written = []
    for path in chart_paths(stem, png=png, svg=svg):
        extension = path.suffix.removeprefix(".")
        with atomic_path(path) as temporary:
            chart.save(temporary, format=extension, **options[extension])
        written.append(path)
    return written


@dataclass(frozen=True)
class ChartSettings:
    """The grid's `[charts]` table: `names` to render (default: `DEFAULT_CHARTS`),
    `fixed` values (`axis = value`, axes as the grid names them) for the axes a chart
    would otherwise hold at their representative, and `png` / `svg` exports."""

    names: tuple[str, ...] = DEFAULT_CHARTS
    fixed: dict[str, Any] = field(default_factory=dict)
    png: bool = False
    svg: bool = False


def chart_settings(table: Any, where: str = "[charts]", kind: str = "step") -> ChartSettings:
    """Validate a grid's `[charts]` table; a runner can call it before any work starts.
    `kind` (the grid's) sets the default charts and the axes `fixed` may name."""
    defaults = KIND_CHARTS.get(kind, DEFAULT_CHARTS)
    if not table:
        return ChartSettings(names=defaults)
    if not isinstance(table, dict):
        raise SpecError(f"{where} must be a table with keys {', '.join(sorted(CHART_KEYS))}")
    unknown = sorted(set(table) - CHART_KEYS)
    if unknown:
        raise SpecError(f"{where}: unknown key {unknown[0]!r}; expected "
                        f"{', '.join(sorted(CHART_KEYS))}")
    names = table.get("names", list(defaults))
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise SpecError(f"{where} names must be a list of chart names")
    check_chart_names(names, f"{where} names: ")
    fixed = table.get("fixed", {})
    columns = {AXIS_COLUMNS.get(key, key): value for key, value in fixed.items()} if (
        isinstance(fixed, dict)) else None
    axes = AXES if kind == "step" else SERVING_AXES
    if columns is None or set(columns) - set(axes):
        grid_names = [a.removesuffix("_assumed") for a in axes]
        raise SpecError(f"{where} fixed must be a table of axis = value, with axes from "
                        f"{', '.join(grid_names)}")
    for key in ("png", "svg"):
        if not isinstance(table.get(key, False), bool):
            raise SpecError(f"{where} {key} must be true or false")
    return ChartSettings(names=tuple(names), fixed=columns, png=table.get("png", False),
                         svg=table.get("svg", False))


def check_chart_names(names: Sequence[str], where: str = "") -> None:
    import difflib

    for name in names:
        if name not in CHARTS:
            close = difflib.get_close_matches(name, CHARTS, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise SpecError(f"{where}unknown chart {name!r}: expected one of "
                            f"{', '.join(CHARTS)}{hint}")


def declared_axes(manifest: dict) -> list[dict[str, list]] | None:
    """The dimensions of the grid a manifest records, each mapping its axis columns
    (several when zipped) to their values, from its canonical `dimensions` (lists of
    `{"axis": name, "values": [...]}`); None when it records none."""
    spec = manifest.get("spec")
    dimensions = spec.get("dimensions") if isinstance(spec, dict) else None
    if not isinstance(dimensions, list):
        return None
    return [{AXIS_COLUMNS.get(axis["axis"], axis["axis"]): list(axis["values"])
             for axis in dimension if isinstance(axis, dict)
             and isinstance(axis.get("axis"), str) and isinstance(axis.get("values"), list)}
            for dimension in dimensions if isinstance(dimension, list)]


def _chart_plan(result_dir: Path, names, only, png: bool, svg: bool):
    """(manifest, settings, {chart name: its files}) of a render."""
    from rooftui.sweeps.results import read_manifest

    manifest = read_manifest(result_dir)
    if not isinstance(manifest, dict):
        raise SpecError(f"{result_dir}: manifest.json is not an object of keys")
    table = manifest.get("charts") if names is None or not isinstance(names, Mapping) else names
    settings = chart_settings(dict(table or {}) if isinstance(table, dict) else table,
                              f"{result_dir}: [charts]", kind=manifest.get("kind", "step"))
    if names is not None and not isinstance(names, Mapping):
        settings = replace(settings, names=tuple(names))
    selected = list(only or settings.names)
    check_chart_names(selected)
    files = {name: chart_paths(result_dir / "charts" / name, png=png or settings.png,
                               svg=svg or settings.svg) for name in dict.fromkeys(selected)}
    return manifest, settings, files


def stale_charts(out_dir: Path | str, names: Sequence[str] | Mapping | None = None
                 ) -> list[str]:
    """The charts `render_charts(out_dir, names)` would write whose files are missing or
    older than the newest shard: what a rerun renders (a kill during rendering, or data
    recomputed since, leaves them so)."""
    result_dir = Path(out_dir)
    return _stale(result_dir, _chart_plan(result_dir, names, None, False, False)[2])


def _stale(result_dir: Path, files: Mapping[str, list[Path]]) -> list[str]:
    def modified(path: Path) -> int | None:
        try:
            return path.stat().st_mtime_ns
        except OSError:
            return None

    newest = max(filter(None, map(modified, (result_dir / "points").glob("shard-*.parquet"))),
                 default=0)
    return [name for name, paths in files.items()
            if not all((modified(path) or -1) >= newest for path in paths)]


def render_charts(out_dir: Path | str, names: Sequence[str] | Mapping | None = None, *,
                  only: Sequence[str] | None = None, png: bool = False,
                  svg: bool = False, stale_only: bool = False) -> list[Path]:
    """Render a result directory's charts into `out_dir/charts/`; return the files written.

    `names`: chart names, or a whole `[charts]` table; default: the manifest's `[charts]`
    (else `DEFAULT_CHARTS`). `only` renders just those (any catalogue name). PNG and SVG
    when asked here or in `[charts]`. `stale_only`: only those `stale_charts` names.
    One process renders a folder's charts at a time (its charts claim), and it clears
    the temporary files a killed renderer left.
    """
    from rooftui.sweeps.output_files import make_folder
    from rooftui.sweeps.results import scan_results
    from rooftui.sweeps.shard_files import CHARTS_CLAIM, claim

    result_dir = Path(out_dir)
    manifest, settings, files = _chart_plan(result_dir, names, only, png, svg)
    frame = scan_results(result_dir)
    charts_dir = make_folder(result_dir / "charts")
    axes = declared_axes(manifest)
    written = []
    with claim(result_dir / "points", CHARTS_CLAIM):
        for leftover in charts_dir.glob(".*.tmp-*"):
            leftover.unlink(missing_ok=True)
        stale = set(_stale(result_dir, files) if stale_only else files)
        for name, paths in files.items():
            if name not in stale:
                continue
            chart = CHARTS[name](frame, fixed=settings.fixed, axes=axes)
            extensions = {path.suffix for path in paths}
            written += save_chart(chart, charts_dir / name, png=".png" in extensions,
                                  svg=".svg" in extensions)
    return written
