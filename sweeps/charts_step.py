"""Charts of step grids: the roofline, throughput and intensity against batch and
context, attention's share and each GPU's time split (see `rooftui.sweeps.charts`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rooftui.sweeps import vega_spec as vl
from rooftui.sweeps.chart_marks import (
    HEIGHT,
    MEMORY_COLUMNS,
    OKABE_ITO,
    PART_LABELS,
    WIDTH,
    capped_steps,
    chosen_filters,
    columns_of,
    dropdowns,
    empty_chart,
    menus,
    palette_scale,
    spaced_labels,
    title_spec,
)
from rooftui.sweeps.chart_slices import (
    LABELS,
    ChartSlice,
    SliceRequest,
    show,
    spread,
    tidy_table,
)
from rooftui.sweeps.chart_table import Table, positive
from rooftui.sweeps.table_text import rounded

LOG_Y = "log_y"  # the throughput chart's log/linear toggle (tokens/s spans decades)
# every held axis a step chart offers as a menu, the most useful first (kept while the
# rows allow; see `take_slice`)
STEP_MENUS = ("context", "kv_dtype", "mfu_assumed", "prefill", "group_size", "compute_dtype",
              "weight_dtype", "tp")

RIDGES = ("gpu", "compute_dtype", "ridge")  # every GPU's ridge, from all the rows

if TYPE_CHECKING:
    from rooftui.sweeps.chart_slices import Dimensions, Frame
    from rooftui.sweeps.vega_spec import VegaChart

ROOFLINE_PARTS = ("gemm", "attention", "step")
# the tooltip lines the step charts share
TIPS = {"gpu": vl.tooltip("gpu:N", "GPU"), "model": vl.tooltip("model:N"),
        "batch": vl.tooltip("batch:Q", "batch (sequences)", ","),
        "context": vl.tooltip("context:Q", "context (tokens)", ","),
        "step_ms": vl.tooltip("step_ms:Q", "step time (ms)", ",.4~g"),
        "tok_s": vl.tooltip("tok_s:Q", "all users (tok/s)", ",.0f"),
        "memory": vl.tooltip("memory:N", "memory"), "part": vl.tooltip("part:N"),
        "bound": vl.tooltip("bound:N")}


def roofline_slice(columns: Sequence[str]) -> SliceRequest:
    """What the roofline draws of results with `columns` (also what `sweep run` cuts
    from each shard for it)."""
    metrics = ["peak_flops", "bandwidth_bytes_per_s", "flops", "step_time_s", "intensity",
               "bound", *MEMORY_COLUMNS] + [f"{p}_{m}" for p in ROOFLINE_PARTS[:2]
                                            for m in ("flops", "time_s", "intensity", "bound")]
    return SliceRequest({"gpu": 8, "compute_dtype": 3, "model": 12, "batch": 12}, metrics,
                        rows_per_point=len(ROOFLINE_PARTS), menus=STEP_MENUS,
                        menu_over=("gpu", "model", "batch"))


def roofline_chart(frame: Frame | Table, *, fixed: Mapping[str, Any] | None = None,
                   axes: Dimensions | None = None,
                   grid: Mapping[str, Any] | None = None) -> VegaChart:
    """Attainable FLOP/s vs intensity (log-log): roofs, ridges, the step's parts.

    One hue per GPU: its roof (the memory roof up to the ridge, then the compute roof of
    the chosen compute dtype) and the GEMM part, attention part and whole step of each
    batch as points (larger: more sequences). Menus choose the GPU (or all), the model
    and the compute dtype; a batch whose weights and KV do not fit is hollow, its reason
    in the tooltip, and does not stretch the axes."""
    title = "Roofline: where the step's parts sit"
    parts = ROOFLINE_PARTS
    chart_slice = roofline_slice(columns_of(frame)).take(frame, fixed=fixed, axes=axes,
                                                         grid=grid)
    held_menus = chart_slice.menu_columns
    data = chart_slice.data
    if "compute_dtype" not in data.columns:
        data = data.with_columns(compute_dtype=chart_slice.fixed.get("compute_dtype", ""))

    def part_rows(part: str) -> Table:
        prefix = "" if part == "step" else f"{part}_"
        time = "step_time_s" if part == "step" else f"{part}_time_s"
        with np.errstate(divide="ignore", invalid="ignore"):
            tflops = rounded(data[f"{prefix}flops"] / data[time] / 1e12)
        return data.select(
            "gpu", "compute_dtype", "model", "batch", "fits", "memory", *held_menus,
            part=PART_LABELS[part], intensity=data[f"{prefix}intensity"], tflops=tflops,
            bound=data[f"{prefix}bound"])

    points = Table.concat([part_rows(p) for p in parts])
    points = points.filter(positive(points, "intensity", "tflops"))
    firsts = data.first_rows(["gpu", "compute_dtype"], sort=True)
    peak_tflops = firsts["peak_flops"] / 1e12
    bandwidth_tbs = firsts["bandwidth_bytes_per_s"] / 1e12
    with np.errstate(divide="ignore", invalid="ignore"):
        ridges = firsts.select("gpu", "compute_dtype", peak_tflops=peak_tflops,
                               bandwidth_tbs=bandwidth_tbs,
                               ridge=rounded(peak_tflops / bandwidth_tbs))
    ridges = ridges.filter(positive(ridges, "ridge"))
    if points.is_empty() or ridges.is_empty():
        return empty_chart(title, "no step with work to place in these results")
    # the axes span the roofs and the points that fit, never those that do not
    feasible = points.filter(points["fits"])
    placed = feasible if not feasible.is_empty() else points
    low = min(np.nanmin(placed["intensity"]), np.nanmin(ridges["ridge"])).item() / 4
    high = max(np.nanmax(placed["intensity"]), np.nanmax(ridges["ridge"])).item() * 4
    roofs = Table.concat([
        ridges.with_columns(intensity=low, tflops=low * ridges["bandwidth_tbs"]),
        ridges.with_columns(intensity=ridges["ridge"], tflops=ridges["peak_tflops"]),
        ridges.with_columns(intensity=high, tflops=ridges["peak_tflops"]),
    ])
    roofs = roofs.with_columns(intensity=rounded(roofs["intensity"]),
                               tflops=rounded(roofs["tflops"]))
    bottom = min(np.nanmin(roofs["tflops"]), np.nanmin(placed["tflops"])).item() / 1.5
    top = max(np.nanmax(roofs["tflops"]), np.nanmax(placed["tflops"])).item() * 1.5

    gpus = chart_slice.values("gpu") or list(dict.fromkeys(data["gpu"].tolist()))
    gpu_menu = ([vl.select_param("gpu_choice", "all", ["all", *gpus], "GPU ")]
                if len(gpus) > 1 else [])
    choices = dropdowns(chart_slice, "model", "compute_dtype",
                        initial={"compute_dtype": _pick_dtype(chart_slice)})
    point_menus = menus(chart_slice)
    chosen = chosen_filters([m for m in choices if m["name"] == "compute_dtype_choice"]) + (
        [{"filter": "gpu_choice == 'all' || datum.gpu == gpu_choice"}] if gpu_menu else [])
    x = vl.field("intensity:Q", scale={"type": "log", "domain": [low, high]},
                 title="Arithmetic intensity (FLOP/byte)")
    y = vl.field("tflops:Q", scale={"type": "log", "domain": [bottom, top]},
                 axis={"format": "~g"}, title="Attainable throughput (TFLOP/s)")
    color = vl.field("gpu:N", title="GPU", scale=palette_scale(gpus))
    gpu_pick = vl.legend_selection("gpu")
    roof_tooltip = [TIPS["gpu"], vl.tooltip("compute_dtype:N", "compute"),
                    vl.tooltip("peak_tflops:Q", "peak (TFLOP/s)", ",.4~g"),
                    vl.tooltip("bandwidth_tbs:Q", "bandwidth (TB/s)", ",.4~g"),
                    vl.tooltip("ridge:Q", "ridge (FLOP/byte)", ",.1f")]
    roof_lines = vl.with_params(vl.unit(
        roofs, vl.mark("line", strokeWidth=2, clip=True),
        {"x": x, "y": y, "detail": vl.field("gpu:N"), "color": color,
         "tooltip": roof_tooltip, "opacity": vl.highlight(gpu_pick)},
        transform=chosen, name="roofs"), [gpu_pick, *gpu_menu, *choices, *point_menus])
    ridge_marks = vl.unit(
        ridges, vl.mark("point", shape="diamond", filled=True, size=90, clip=True),
        {"x": vl.field("ridge:Q"), "y": vl.field("peak_tflops:Q"), "color": color,
         "tooltip": roof_tooltip, "opacity": vl.highlight(gpu_pick)},
        transform=chosen, name="ridges")
    point_tooltip = [TIPS["gpu"], TIPS["model"],
                     vl.tooltip("compute_dtype:N", "compute"),
                     TIPS["batch"], TIPS["part"],
                     vl.tooltip("intensity:Q", "intensity (FLOP/byte)", ",.2f"),
                     vl.tooltip("tflops:Q", "achieved (TFLOP/s)", ",.4~g"),
                     TIPS["bound"], TIPS["memory"]]
    base = chosen + chosen_filters([m for m in choices if m["name"] == "model_choice"]
                                   + point_menus)
    encoding = {"x": x, "y": y, "color": color, "tooltip": point_tooltip,
                "shape": vl.field("part:N", title="Part",
                                  sort=[PART_LABELS[p] for p in parts]),
                "size": vl.field("batch:Q", title="Batch (sequences)",
                                 scale={"type": "log", "range": [25, 220]},
                                 legend={"format": ","})}
    dots = vl.unit(points, vl.mark("point", filled=True),
                   {**encoding, "opacity": vl.highlight(gpu_pick, on=0.9, off=0.08)},
                   transform=[*base, {"filter": "datum.fits"}], name="parts")
    hollow = vl.unit(points, vl.mark("point", filled=False, strokeWidth=1.2, clip=True),
                     {**encoding, "opacity": vl.highlight(gpu_pick, on=0.6, off=0.05)},
                     transform=[*base, {"filter": "!datum.fits"}], name="parts_over_memory")
    return vl.VegaChart(vl.layer(
        roof_lines, ridge_marks, dots, hollow, width=WIDTH, height=HEIGHT,
        title=title_spec(title, chart_slice,
                         "lines: memory roof (intensity × bandwidth) up to the ridge "
                         "(diamond), then the compute roof; points: the FLOP/s each part "
                         "achieves; hollow: weights + KV exceed GPU memory",
                         grid=grid, menus=("model",))))


def _pick_dtype(chart_slice: ChartSlice) -> Any:
    values = chart_slice.values("compute_dtype")
    return "bf16" if "bf16" in values else (values[0] if values else None)


def throughput_slice(columns: Sequence[str]) -> SliceRequest:
    return SliceRequest({"gpu": 16, "model": 12, "context": 8, "batch": 24},
                        ["tokens_per_s", "per_user_tokens_per_s", "step_time_s",
                         "attention_share", "max_batch", *MEMORY_COLUMNS],
                        menus=STEP_MENUS, menu_over=("gpu", "model", "batch"))


def throughput_vs_batch_chart(frame: Frame | Table, *, fixed: Mapping[str, Any] | None = None,
                              axes: Dimensions | None = None,
                              grid: Mapping[str, Any] | None = None) -> VegaChart:
    """Decode tokens/s vs batch, all users and per user, one line per context.

    Lines join the batches that fit; a hollow circle marks one whose weights and KV do
    not (its reason in the tooltip; above the axis's top it sits at the edge), a dashed
    rule the largest batch that fits (the seed's chart, for every GPU and model)."""
    title = "Decode throughput vs batch"
    chart_slice = throughput_slice(columns_of(frame)).take(frame, fixed=fixed, axes=axes,
                                                           grid=grid)
    held_menus = chart_slice.menu_columns
    data = chart_slice.data
    data = data.filter(positive(data, "batch", "tokens_per_s"))
    if data.is_empty():
        return empty_chart(title, "no decode step (batch > 0) in these results")
    # in the rows' order: the page's bytes the same from run to run
    keys = ["gpu", "model", "context", *held_menus]
    limits = data.first_rows(keys, sort=False).select(*keys, "max_batch")
    limits = limits.filter((limits["max_batch"] >= 1)
                           & (limits["max_batch"] < data["batch"].max()))
    points = data.select(
        "gpu", "model", "context", "batch", "fits", "memory", *held_menus,
        tok_s=data["tokens_per_s"],
        user_tok_s=data["per_user_tokens_per_s"],
        step_ms=rounded(data["step_time_s"] * 1e3),
        attention=data["attention_share"])
    choices = dropdowns(chart_slice, "gpu", "model") + menus(chart_slice)
    chosen = chosen_filters(choices)
    context_pick = vl.legend_selection("context")
    x = vl.field("batch:Q", scale={"type": "log", "base": 2}, axis={"format": ","},
                 title="Batch (sequences)")
    color = vl.field("context:O", title="Context (tokens)", scale={"scheme": "viridis"},
                     legend={"format": ","})
    tooltip = [TIPS["gpu"], TIPS["model"],
               TIPS["context"],
               TIPS["batch"],
               TIPS["tok_s"],
               vl.tooltip("user_tok_s:Q", "per user (tok/s)", ",.1f"),
               TIPS["step_ms"],
               vl.tooltip("attention:Q", "attention share", ".0%"),
               TIPS["memory"]]
    opacity = vl.highlight(context_pick)

    def panel(name: str, metric: str, axis_title: str, params: list) -> dict:
        base = [*chosen, *capped_steps(metric, "shown"),
                {"calculate": f"{LOG_Y} ? log(max(datum.shown, 1e-9)) / LN10 : datum.shown",
                 "as": "plotted"}]
        # Vega-Lite cannot bind a scale's type: the toggle plots log10 and labels powers
        y = vl.field("plotted:Q", title=axis_title, scale={"zero": {"expr": f"!{LOG_Y}"}},
                     axis={"labelExpr": f"{LOG_Y} ? format(pow(10, datum.value), '~s') "
                                        ": format(datum.value, '~s')"})
        encoding = {"x": x, "y": y, "color": color, "opacity": opacity, "tooltip": tooltip}
        fitting = [*base, {"filter": "datum.fits"}]
        line = vl.unit(points, vl.mark("line"), encoding, transform=fitting,
                       name=f"{name}_lines")
        marks = vl.unit(points, vl.mark("point", size=55, filled=True), encoding,
                        transform=fitting)
        over = vl.unit(points, vl.mark("point", size=55, filled=False, strokeWidth=1.5),
                       encoding, transform=[*base, {"filter": "!datum.fits"}])
        rules = vl.unit(limits, vl.mark("rule", strokeDash=[5, 4]), {
            "x": vl.field("max_batch:Q"), "color": color, "opacity": opacity,
            "tooltip": [TIPS["context"],
                        vl.tooltip("max_batch:Q", "largest batch in memory", ",")]},
            transform=chosen)
        # Only the layer holding the selection is named, as altair's charts had it
        return vl.layer(vl.with_params(line, params), marks, over, rules,
                        width=WIDTH // 2 + 60, height=HEIGHT - 40)

    return vl.VegaChart(vl.hconcat(
        panel("all_users", "tok_s", "Tokens per second, all users (tok/s)",
              [context_pick, *choices, vl.checkbox_param(LOG_Y, False, "log tokens/s ")]),
        panel("per_user", "user_tok_s", "Tokens per second per user (tok/s)", []),
        title=title_spec(
            title, chart_slice, "hollow = weights + KV exceed GPU memory (at the top edge "
            "when above the batches that fit); dashed rule = the largest batch that fits",
            grid=grid, menus=("gpu", "model"))))


def _group_axis(columns: Sequence[str]) -> str:
    return "group_size" if "group_size" in columns else "kv_heads"


def intensity_slice(columns: Sequence[str]) -> SliceRequest:
    return SliceRequest({"model": 12, _group_axis(columns): 8, "context": 32},
                        ["intensity_ceiling", "intensity", "batch", *MEMORY_COLUMNS],
                        prefer={"batch": "max"}, menus=STEP_MENUS, whole=(RIDGES,))


def intensity_ceiling_chart(frame: Frame | Table, *, fixed: Mapping[str, Any] | None = None,
                            axes: Dimensions | None = None,
                            grid: Mapping[str, Any] | None = None) -> VegaChart:
    """Decode intensity ceiling vs context, per group size, against the ridges.

    The closed form as batch grows without bound (the step's `intensity_ceiling`) as
    lines, the step's intensity at the grid's largest batch as points (hollow where that
    batch does not fit), the held GPU's ridge as a solid rule and other GPUs' dashed."""
    title = "Decode intensity ceiling vs context"
    columns = columns_of(frame)
    group = _group_axis(columns)
    chart_slice = intensity_slice(columns).take(frame, fixed=fixed, axes=axes, grid=grid)
    data = chart_slice.data
    data = data.filter(positive(data, "context", "intensity_ceiling")).rename(
        {group: "group", "intensity_ceiling": "ceiling"})
    if data.is_empty():
        return empty_chart(title, "no decode step with context > 0 in these results")
    held_gpu = chart_slice.fixed.get("gpu")
    held_dtype = chart_slice.fixed.get("compute_dtype")
    all_ridges = _all_ridges(frame)

    def is_held(table: Table) -> np.ndarray:
        gpu = table["gpu"] == held_gpu if held_gpu is not None else np.zeros(table.height, bool)
        return gpu & (table["compute_dtype"] == held_dtype if held_dtype is not None else True)

    held_ridges = all_ridges.filter(is_held(all_ridges))
    others = all_ridges.filter(~is_held(all_ridges))
    others = others.take(spread(list(range(others.height)), 8 - min(held_ridges.height, 1)))
    ridges = tidy_table(Table.concat([held_ridges, others]).sorted_by(["ridge"]))
    ridges = ridges.select(
        "ridge", held=is_held(ridges),
        label=np.asarray([f"{gpu} {dtype} ridge" for gpu, dtype in zip(
            ridges["gpu"].tolist(), ridges["compute_dtype"].tolist(), strict=True)],
            dtype=object),
        context=data["context"].max().item())
    choices = dropdowns(chart_slice, "model") + menus(chart_slice)
    group_pick = vl.legend_selection("group")
    x = vl.field("context:Q", scale={"type": "log", "base": 2}, axis={"format": ","},
                 title="Context (tokens cached per sequence)")
    color = vl.field("group:O", title=LABELS[group].capitalize(), scale={"range": OKABE_ITO})
    opacity = vl.highlight(group_pick)
    largest = show(data["batch"].max().item())
    tooltip = [TIPS["model"], vl.tooltip("group:Q", LABELS[group]),
               TIPS["context"],
               vl.tooltip("ceiling:Q", "ceiling, batch → ∞ (FLOP/byte)", ",.2f"),
               vl.tooltip("intensity:Q", f"intensity at batch {largest} (FLOP/byte)", ",.2f"),
               vl.tooltip("memory:N", f"memory at batch {largest}")]
    chosen = chosen_filters(choices)
    line = vl.with_params(vl.unit(data, vl.mark("line"), {
        "x": x, "y": vl.field("ceiling:Q", scale={"type": "log"},
                              title="Arithmetic intensity (FLOP/byte)"),
        "color": color, "opacity": opacity, "tooltip": tooltip}, transform=chosen,
        name="ceilings"), [group_pick, *choices])
    fill = vl.when("datum.fits", vl.field("group:O", legend=None, scale={"range": OKABE_ITO}),
                   "transparent")
    dots = vl.unit(data, vl.mark("point", size=60), {
        "x": x, "y": vl.field("intensity:Q"), "color": color, "opacity": opacity,
        "tooltip": tooltip, "fill": fill}, transform=chosen, name="largest_batch")
    ridge_tooltip = [vl.tooltip("label:N", "GPU"),
                     vl.tooltip("ridge:Q", "ridge (FLOP/byte)", ",.1f")]
    rules = vl.unit(ridges, vl.mark("rule"), {
        "y": vl.field("ridge:Q"), "tooltip": ridge_tooltip,
        "color": vl.when("datum.held", "#222", "#888"),
        "strokeDash": vl.when("datum.held", [1, 0], [6, 4]),
        "strokeWidth": vl.when("datum.held", 2, 1)}, name="ridges")
    # a label's height (14 px) as a factor on the log axis (its data span, plus the
    # decade Vega's rounding adds)
    values = np.concatenate([data["ceiling"], data["intensity"], ridges["ridge"]])
    values = values[~np.isnan(values)]
    decades = math.log10(values.max() / values.min()) + 1
    factor = 10 ** (14 * decades / HEIGHT)
    held_rows = ridges.filter(ridges["held"])
    near_held = np.zeros(ridges.height, bool)
    for value in held_rows["ridge"].tolist():  # the held GPU's label always prints
        near_held |= (ridges["ridge"] >= value / factor) & (ridges["ridge"] <= value * factor)
    labelled = Table.concat([held_rows, spaced_labels(ridges.filter(~ridges["held"] & ~near_held),
                                                      "ridge", factor)])
    labels = vl.unit(labelled, vl.mark("text", align="right", dy=-6), {
        "x": vl.field("context:Q"), "y": vl.field("ridge:Q"), "text": vl.field("label:N"),
        "tooltip": ridge_tooltip, "color": vl.when("datum.held", "#222", "#666")},
        name="ridge_labels")
    shown_ridges = f"{ridges.height} of {all_ridges.height} GPU · dtype ridges, spread by value"
    return vl.VegaChart(vl.layer(
        rules, labels, line, dots, width=WIDTH, height=HEIGHT,
        title=title_spec(title, chart_slice,
                         f"lines: closed-form ceiling as batch → ∞; points: the step's "
                         f"intensity at batch {largest} (hollow: it does not fit); solid "
                         f"rule: the held GPU's ridge, dashed: {shown_ridges} (above a "
                         "ridge a step is compute-bound)", grid=grid, menus=("model",))))


def _all_ridges(frame: Frame | Table) -> Table:
    """Every (GPU, compute dtype, ridge) of the results with a positive ridge, by
    ridge, ties by name: which GPUs are spread over the chart never depends on the
    order the rows came in."""
    if isinstance(frame, Table):
        found = frame.unique(RIDGES)
    else:
        found = Table.from_polars(frame.lazy().select(RIDGES).unique().collect())
    found = found.sorted_by(["ridge", "gpu", "compute_dtype"])
    return found.filter(positive(found, "ridge"))


SHARE_BANDS = 10  # the heatmap's colour classes, so that its legend can select them
BAND_WIDTH = 100 // SHARE_BANDS


def attention_slice(columns: Sequence[str]) -> SliceRequest:
    return SliceRequest({"gpu": 16, "model": 12, "batch": 16, "context": 16},
                        ["attention_share", "step_time_s", "tokens_per_s", "bound",
                         *MEMORY_COLUMNS], menus=STEP_MENUS,
                        menu_over=("model", "batch", "context"))


def attention_share_chart(frame: Frame | Table, *, fixed: Mapping[str, Any] | None = None,
                          axes: Dimensions | None = None,
                          grid: Mapping[str, Any] | None = None) -> VegaChart:
    """Attention's share of the step time, a heatmap over batch × context.

    In 10 % bands (the legend selects bands); × marks configurations that do not fit."""
    title = "Attention's share of the decode step"
    chart_slice = attention_slice(columns_of(frame)).take(frame, fixed=fixed, axes=axes,
                                                          grid=grid)
    data = chart_slice.data
    data = data.filter(~np.isnan(data["attention_share"]))
    if data.is_empty():
        return empty_chart(title, "no step with a finite attention share in these results")
    cells = data.select("gpu", "model", "batch", "context", "fits", "bound", "memory",
                        *chart_slice.menu_columns,
                        attention=data["attention_share"], tok_s=data["tokens_per_s"],
                        step_ms=rounded(data["step_time_s"] * 1e3))
    bands = [f"{b}–{b + BAND_WIDTH} %" for b in range(0, 100, BAND_WIDTH)]
    band = f"floor(min(datum.attention, 0.9999) * {SHARE_BANDS}) * {BAND_WIDTH}"
    choices = dropdowns(chart_slice, "gpu", "model") + menus(chart_slice)
    band_pick = vl.legend_selection("band")
    x = vl.field("batch:O", title="Batch (sequences)", sort="ascending",
                 axis={"labelAngle": 0})
    y = vl.field("context:O", title="Context (tokens)", sort="descending",
                 axis={"format": ","})
    tooltip = [TIPS["gpu"], TIPS["model"],
               TIPS["batch"],
               TIPS["context"],
               vl.tooltip("attention:Q", "attention share", ".1%"),
               TIPS["step_ms"],
               TIPS["tok_s"],
               TIPS["bound"], TIPS["memory"]]
    label = f"format({band}, 'd') + '–' + format({band} + {BAND_WIDTH}, 'd') + ' %'"
    base = [*chosen_filters(choices), {"calculate": label, "as": "band"}]
    # a cell that does not fit is faded (and crossed): its share is of a step no GPU runs
    heat = vl.with_params(vl.unit(cells, vl.mark("rect"), {
        "x": x, "y": y, "tooltip": tooltip,
        "opacity": vl.highlight_fitting(band_pick, 0.35),
        "color": vl.field("band:O", title="Attention share",
                          scale={"domain": bands, "scheme": "orangered"})},
        transform=base, name="cells"), [band_pick, *choices])
    crosses = vl.unit(cells, vl.mark("text", text="×", fontSize=16, color="#222"),
                      {"x": x, "y": y, "tooltip": tooltip},
                      transform=[*base, {"filter": "!datum.fits"}], name="over_memory")
    return vl.VegaChart(vl.layer(
        heat, crosses, width=WIDTH, height=HEIGHT,
        title=title_spec(title, chart_slice,
                         "share of the parts' time spent in attention; faded × = weights "
                         "+ KV exceed GPU memory (the reason in the tooltip)", grid=grid,
                         menus=("gpu", "model"))))


def _time_parts(columns: Sequence[str]) -> list[str]:
    return [p for p in ("gemm", "attention", "activations", "communication")
            if f"{p}_time_s" in columns]


def gpu_comparison_slice(columns: Sequence[str]) -> SliceRequest:
    parts = _time_parts(columns)
    return SliceRequest({"gpu": 8, "model": 12, "batch": 12},
                        [f"{p}_time_s" for p in parts]
                        + ["step_time_s", "tokens_per_s", *MEMORY_COLUMNS],
                        rows_per_point=len(parts), menus=STEP_MENUS)


def gpu_comparison_chart(frame: Frame | Table, *, fixed: Mapping[str, Any] | None = None,
                         axes: Dimensions | None = None,
                         grid: Mapping[str, Any] | None = None) -> VegaChart:
    """The same workload on each GPU: step time split into parts, vs batch.

    One panel per GPU on a shared time axis."""
    title = "Where the step's time goes, GPU by GPU"
    columns = columns_of(frame)
    parts = _time_parts(columns)
    chart_slice = gpu_comparison_slice(columns).take(frame, fixed=fixed, axes=axes, grid=grid)
    steps = chart_slice.data
    data = Table.concat([
        steps.select(
            "gpu", "model", "batch", "fits", "memory", *chart_slice.menu_columns,
            part=PART_LABELS[p],
            ms=rounded(steps[f"{p}_time_s"] * 1e3),
            step_ms=rounded(steps["step_time_s"] * 1e3), tok_s=steps["tokens_per_s"])
        for p in parts])
    data = data.filter(~np.isnan(data["ms"]))
    if data.is_empty():
        return empty_chart(title, "no step in these results")
    choices = dropdowns(chart_slice, "model") + menus(chart_slice)
    part_pick = vl.legend_selection("part")
    order = [PART_LABELS[p] for p in parts]
    # A step that does not fit is scaled down to the tallest step that does (of its
    # model, on any GPU): it never sets the shared axis; its real time is in the tooltip.
    scaled = [{"calculate": "datum.fits ? datum.step_ms : null", "as": "fit_ms"},
              {"joinaggregate": [{"op": "max", "field": "fit_ms", "as": "cap_ms"}],
               "groupby": ["model", *chart_slice.menu_columns]},
              {"calculate": "datum.fits || !isValid(datum.cap_ms) ? datum.ms "
                            ": datum.ms * min(1, datum.cap_ms / datum.step_ms)",
               "as": "shown_ms"}]
    bars = vl.with_params(vl.unit(data, vl.mark("bar"), {
        "x": vl.field("batch:O", title="Batch (sequences)", axis={"labelAngle": 0}),
        "y": vl.field("sum(shown_ms):Q", title="Step time (ms)", stack="zero"),
        "color": vl.field("part:N", title="Part", sort=order, scale=palette_scale(order)),
        "order": vl.field("part:N", sort="ascending"), "detail": vl.field("fits:N"),
        "opacity": vl.highlight_fitting(part_pick, 0.3),
        "tooltip": [TIPS["gpu"], TIPS["model"],
                    TIPS["batch"], TIPS["part"],
                    vl.tooltip("ms:Q", "part time (ms)", ",.4~g"),
                    TIPS["step_ms"],
                    TIPS["tok_s"],
                    TIPS["memory"]]},
        transform=[*scaled, *chosen_filters(choices)], name="parts", width=200, height=160),
        [part_pick, *choices])
    return vl.VegaChart(vl.facet(
        bars, vl.field("gpu:N", title=None), columns=4,
        title=title_spec(title, chart_slice,
                         "stacked: each part's roofline time; the panels share the time "
                         "axis; faded: weights + KV exceed GPU memory (cut to the tallest "
                         "step that fits, the reason in the tooltip)", grid=grid,
                         menus=("model",))))


# each step chart's request, by its name in the catalogue: what `sweep run` cuts from
# each shard as it is written, so that its charts start from those rows
STEP_SLICES = {"roofline": roofline_slice, "throughput_vs_batch": throughput_slice,
               "intensity_ceiling": intensity_slice, "attention_share": attention_slice,
               "gpu_comparison": gpu_comparison_slice}
