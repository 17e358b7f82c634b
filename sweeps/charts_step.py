"""Charts of step grids: the roofline, throughput and intensity against batch and
context, attention's share and each GPU's time split (see `rooftui.sweeps.charts`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rooftui.sweeps.chart_marks import (
    HEIGHT,
    MEMORY_COLUMNS,
    OKABE_ITO,
    PART_LABELS,
    WIDTH,
    capped,
    columns_of,
    dropdown_params,
    empty_chart,
    highlight,
    import_altair,
    legend_selection,
    menu_params,
    only_chosen,
    palette,
    spaced_labels,
    title_params,
    with_memory_note,
)
from rooftui.sweeps.chart_slices import (
    LABELS,
    ChartSlice,
    SliceRequest,
    positive,
    rounded,
    show,
    spread,
    tidy,
)

LOG_Y = "log_y"  # the throughput chart's log/linear toggle (tokens/s spans decades)
# every held axis a step chart offers as a menu, the most useful first (kept while the
# rows allow; see `take_slice`)
STEP_MENUS = ("context", "kv_dtype", "mfu_assumed", "prefill", "group_size", "compute_dtype",
              "weight_dtype", "tp")

RIDGES = ("gpu", "compute_dtype", "ridge")  # every GPU's ridge, from all the rows

if TYPE_CHECKING:
    import altair as alt

    from rooftui.sweeps.chart_slices import Dimensions, Frame

ROOFLINE_PARTS = ("gemm", "attention", "step")


def roofline_slice(columns: Sequence[str]) -> SliceRequest:
    """What the roofline draws of results with `columns` (also what `sweep run` cuts
    from each shard for it)."""
    metrics = ["peak_flops", "bandwidth_bytes_per_s", "flops", "step_time_s", "intensity",
               "bound", *MEMORY_COLUMNS] + [f"{p}_{m}" for p in ROOFLINE_PARTS[:2]
                                            for m in ("flops", "time_s", "intensity", "bound")]
    return SliceRequest({"gpu": 8, "compute_dtype": 3, "model": 12, "batch": 12}, metrics,
                        rows_per_point=len(ROOFLINE_PARTS), menus=STEP_MENUS,
                        menu_over=("gpu", "model", "batch"))


def roofline_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                   axes: Dimensions | None = None,
                   grid: Mapping[str, Any] | None = None) -> alt.TopLevelMixin:
    """Attainable FLOP/s vs intensity (log-log): roofs, ridges, the step's parts.

    One hue per GPU: its roof (the memory roof up to the ridge, then the compute roof of
    the chosen compute dtype) and the GEMM part, attention part and whole step of each
    batch as points (larger: more sequences). Menus choose the GPU (or all), the model
    and the compute dtype; a batch whose weights and KV do not fit is hollow, its reason
    in the tooltip, and does not stretch the axes."""
    import polars as pl

    alt = import_altair()
    title = "Roofline: where the step's parts sit"
    parts = ROOFLINE_PARTS
    chart_slice = roofline_slice(columns_of(frame)).take(frame, fixed=fixed, axes=axes,
                                                         grid=grid)
    held_menus = chart_slice.menu_columns
    data = with_memory_note(pl, chart_slice.data, grid)
    if "compute_dtype" not in data.columns:
        data = data.with_columns(compute_dtype=pl.lit(chart_slice.fixed.get("compute_dtype",
                                                                             "")))
    if "fits" not in data.columns:
        data = data.with_columns(fits=pl.lit(True))

    def part_rows(part: str):
        prefix = "" if part == "step" else f"{part}_"
        time = "step_time_s" if part == "step" else f"{part}_time_s"
        return data.select(
            "gpu", "compute_dtype", "model", "batch", "fits", "memory", *held_menus,
            part=pl.lit(PART_LABELS[part]), intensity=pl.col(f"{prefix}intensity"),
            tflops=rounded(pl, pl.col(f"{prefix}flops") / pl.col(time) / 1e12),
            bound=pl.col(f"{prefix}bound"))

    points = pl.concat([part_rows(p) for p in parts]).filter(
        positive(pl, "intensity", "tflops"))
    ridges = data.group_by("gpu", "compute_dtype").agg(
        peak_tflops=pl.col("peak_flops").first() / 1e12,
        bandwidth_tbs=pl.col("bandwidth_bytes_per_s").first() / 1e12).with_columns(
        ridge=rounded(pl, pl.col("peak_tflops") / pl.col("bandwidth_tbs"))).filter(
        positive(pl, "ridge")).sort("gpu", "compute_dtype")
    if points.is_empty() or ridges.is_empty():
        return empty_chart(alt, title, "no step with work to place in these results")
    # the axes span the roofs and the points that fit, never those that do not
    feasible = points.filter(pl.col("fits"))
    placed = feasible if not feasible.is_empty() else points
    low = min(placed["intensity"].min(), ridges["ridge"].min()) / 4
    high = max(placed["intensity"].max(), ridges["ridge"].max()) * 4
    roofs = pl.concat([
        ridges.with_columns(intensity=pl.lit(low),
                            tflops=pl.lit(low) * pl.col("bandwidth_tbs")),
        ridges.with_columns(intensity=pl.col("ridge"), tflops=pl.col("peak_tflops")),
        ridges.with_columns(intensity=pl.lit(high), tflops=pl.col("peak_tflops")),
    ]).with_columns(rounded(pl, pl.col("intensity")), rounded(pl, pl.col("tflops")))
    bottom = min(roofs["tflops"].min(), placed["tflops"].min()) / 1.5
    top = max(roofs["tflops"].max(), placed["tflops"].max()) * 1.5

    gpus = chart_slice.values("gpu") or data["gpu"].unique(maintain_order=True).to_list()
    gpu_menu = ([alt.param(name="gpu_choice", value="all", bind=alt.binding_select(
        options=["all", *gpus], name="GPU "))] if len(gpus) > 1 else [])
    menus = dropdown_params(alt, chart_slice, "model", "compute_dtype",
                            initial={"compute_dtype": _pick_dtype(chart_slice)})
    point_menus = menu_params(alt, chart_slice)

    def chosen(chart):
        chart = only_chosen(alt, chart, [m for m in menus if m.name == "compute_dtype_choice"])
        if gpu_menu:
            chart = chart.transform_filter("gpu_choice == 'all' || datum.gpu == gpu_choice")
        return chart

    x = alt.X("intensity:Q", scale=alt.Scale(type="log", domain=[low, high]),
              title="Arithmetic intensity (FLOP/byte)")
    y = alt.Y("tflops:Q", scale=alt.Scale(type="log", domain=[bottom, top]),
              axis=alt.Axis(format="~g"), title="Attainable throughput (TFLOP/s)")
    color = alt.Color("gpu:N", title="GPU", scale=palette(alt, gpus))
    gpu_pick = legend_selection(alt, "gpu")
    roof_tooltip = [alt.Tooltip("gpu:N", title="GPU"), alt.Tooltip("compute_dtype:N",
                                                                    title="compute"),
                    alt.Tooltip("peak_tflops:Q", title="peak (TFLOP/s)", format=",.4~g"),
                    alt.Tooltip("bandwidth_tbs:Q", title="bandwidth (TB/s)", format=",.4~g"),
                    alt.Tooltip("ridge:Q", title="ridge (FLOP/byte)", format=",.1f")]
    roof_lines = chosen(alt.Chart(roofs)).mark_line(strokeWidth=2, clip=True).encode(
        x=x, y=y, detail="gpu:N", color=color, tooltip=roof_tooltip,
        opacity=highlight(alt, gpu_pick)).add_params(gpu_pick, *gpu_menu, *menus, *point_menus
                                                     ).properties(name="roofs")
    ridge_marks = chosen(alt.Chart(ridges)).mark_point(
        shape="diamond", filled=True, size=90, clip=True).encode(
        x="ridge:Q", y="peak_tflops:Q", color=color, tooltip=roof_tooltip,
        opacity=highlight(alt, gpu_pick)).properties(name="ridges")
    point_tooltip = [alt.Tooltip("gpu:N", title="GPU"), alt.Tooltip("model:N"),
                     alt.Tooltip("compute_dtype:N", title="compute"),
                     alt.Tooltip("batch:Q", title="batch (sequences)", format=","),
                     alt.Tooltip("part:N"),
                     alt.Tooltip("intensity:Q", title="intensity (FLOP/byte)",
                                 format=",.2f"),
                     alt.Tooltip("tflops:Q", title="achieved (TFLOP/s)", format=",.4~g"),
                     alt.Tooltip("bound:N"), alt.Tooltip("memory:N", title="memory")]
    base = only_chosen(alt, chosen(alt.Chart(points)),
                       [m for m in menus if m.name == "model_choice"] + point_menus)
    encoding = {"x": x, "y": y, "color": color, "tooltip": point_tooltip,
                "shape": alt.Shape("part:N", title="Part",
                                   sort=[PART_LABELS[p] for p in parts]),
                "size": alt.Size("batch:Q", title="Batch (sequences)",
                                 scale=alt.Scale(type="log", range=[25, 220]),
                                 legend=alt.Legend(format=","))}
    dots = base.transform_filter("datum.fits").mark_point(filled=True).encode(
        **encoding, opacity=highlight(alt, gpu_pick, on=0.9, off=0.08)).properties(name="parts")
    hollow = base.transform_filter("!datum.fits").mark_point(
        filled=False, strokeWidth=1.2, clip=True).encode(
        **encoding, opacity=highlight(alt, gpu_pick, on=0.6, off=0.05)).properties(
        name="parts_over_memory")
    return alt.layer(
        roof_lines, ridge_marks, dots, hollow, width=WIDTH, height=HEIGHT,
        title=title_params(alt, title, chart_slice,
                           "lines: memory roof (intensity × bandwidth) up to the ridge "
                           "(diamond), then the compute roof; points: the FLOP/s each part "
                           "achieves; hollow: weights + KV exceed GPU memory",
                           grid=grid, menus=("model",)))


def _pick_dtype(chart_slice: ChartSlice) -> Any:
    values = chart_slice.values("compute_dtype")
    return "bf16" if "bf16" in values else (values[0] if values else None)


def throughput_slice(columns: Sequence[str]) -> SliceRequest:
    return SliceRequest({"gpu": 16, "model": 12, "context": 8, "batch": 24},
                        ["tokens_per_s", "per_user_tokens_per_s", "step_time_s",
                         "attention_share", "max_batch", *MEMORY_COLUMNS],
                        menus=STEP_MENUS, menu_over=("gpu", "model", "batch"))


def throughput_vs_batch_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                              axes: Dimensions | None = None,
                              grid: Mapping[str, Any] | None = None) -> alt.TopLevelMixin:
    """Decode tokens/s vs batch, all users and per user, one line per context.

    Lines join the batches that fit; a hollow circle marks one whose weights and KV do
    not (its reason in the tooltip; above the axis's top it sits at the edge), a dashed
    rule the largest batch that fits (the seed's chart, for every GPU and model)."""
    import polars as pl

    alt = import_altair()
    title = "Decode throughput vs batch"
    chart_slice = throughput_slice(columns_of(frame)).take(frame, fixed=fixed, axes=axes,
                                                           grid=grid)
    held_menus = chart_slice.menu_columns
    data = chart_slice.data.filter(positive(pl, "batch", "tokens_per_s"))
    if data.is_empty():
        return empty_chart(alt, title, "no decode step (batch > 0) in these results")
    data = with_memory_note(pl, data if "fits" in data.columns
                            else data.with_columns(fits=pl.lit(True)), grid)
    limits = data.group_by("gpu", "model", "context", *held_menus).agg(
        pl.col("max_batch").first()).filter(
        (pl.col("max_batch") >= 1) & (pl.col("max_batch") < data["batch"].max()))
    points = data.select(
        "gpu", "model", "context", "batch", "fits", "memory", *held_menus,
        tok_s=pl.col("tokens_per_s"),
        user_tok_s=pl.col("per_user_tokens_per_s"),
        step_ms=rounded(pl, pl.col("step_time_s") * 1e3),
        attention=pl.col("attention_share"))
    dropdowns = dropdown_params(alt, chart_slice, "gpu", "model") + menu_params(alt,
                                                                                chart_slice)
    context_pick = legend_selection(alt, "context")
    x = alt.X("batch:Q", scale=alt.Scale(type="log", base=2), axis=alt.Axis(format=","),
              title="Batch (sequences)")
    color = alt.Color("context:O", title="Context (tokens)", scale=alt.Scale(scheme="viridis"),
                      legend=alt.Legend(format=","))
    tooltip = [alt.Tooltip("gpu:N", title="GPU"), alt.Tooltip("model:N"),
               alt.Tooltip("context:Q", title="context (tokens)", format=","),
               alt.Tooltip("batch:Q", title="batch (sequences)", format=","),
               alt.Tooltip("tok_s:Q", title="all users (tok/s)", format=",.0f"),
               alt.Tooltip("user_tok_s:Q", title="per user (tok/s)", format=",.1f"),
               alt.Tooltip("step_ms:Q", title="step time (ms)", format=",.4~g"),
               alt.Tooltip("attention:Q", title="attention share", format=".0%"),
               alt.Tooltip("memory:N", title="memory")]
    opacity = highlight(alt, context_pick)

    def panel(name: str, metric: str, axis_title: str, params: list):
        base = capped(alt, only_chosen(alt, alt.Chart(points), dropdowns), metric, "shown"
                      ).transform_calculate(plotted=f"{LOG_Y} ? log(max(datum.shown, 1e-9)) "
                                                    "/ LN10 : datum.shown")
        # Vega-Lite cannot bind a scale's type: the toggle plots log10 and labels powers
        y = alt.Y("plotted:Q", title=axis_title, scale=alt.Scale(zero=alt.expr(f"!{LOG_Y}")),
                  axis=alt.Axis(labelExpr=f"{LOG_Y} ? format(pow(10, datum.value), '~s') "
                                          ": format(datum.value, '~s')"))
        fitting = base.transform_filter("datum.fits")
        line = fitting.mark_line().encode(x=x, y=y, color=color, opacity=opacity,
                                          tooltip=tooltip)
        marks = fitting.mark_point(size=55, filled=True).encode(
            x=x, y=y, color=color, opacity=opacity, tooltip=tooltip)
        over = base.transform_filter("!datum.fits").mark_point(
            size=55, filled=False, strokeWidth=1.5).encode(
            x=x, y=y, color=color, opacity=opacity, tooltip=tooltip)
        rules = only_chosen(alt, alt.Chart(limits), dropdowns).mark_rule(
            strokeDash=[5, 4]).encode(
            x="max_batch:Q", color=color, opacity=opacity,
            tooltip=[alt.Tooltip("context:Q", title="context (tokens)", format=","),
                     alt.Tooltip("max_batch:Q", title="largest batch in memory",
                                 format=",")])
        # Only the layer holding the selection is named: Altair binds a selection to
        # every named layer of a layered chart inside a concat (a duplicate signal).
        return alt.layer(line.add_params(*params).properties(name=f"{name}_lines"),
                         marks, over, rules, width=WIDTH // 2 + 60, height=HEIGHT - 40)

    return alt.hconcat(
        panel("all_users", "tok_s", "Tokens per second, all users (tok/s)",
              [context_pick, *dropdowns, alt.param(name=LOG_Y, value=False,
                                                   bind=alt.binding_checkbox(
                                                       name="log tokens/s "))]),
        panel("per_user", "user_tok_s", "Tokens per second per user (tok/s)", []),
        title=title_params(
        alt, title, chart_slice, "hollow = weights + KV exceed GPU memory (at the top edge "
        "when above the batches that fit); dashed rule = the largest batch that fits",
        grid=grid, menus=("gpu", "model")))


def _group_axis(columns: Sequence[str]) -> str:
    return "group_size" if "group_size" in columns else "kv_heads"


def intensity_slice(columns: Sequence[str]) -> SliceRequest:
    return SliceRequest({"model": 12, _group_axis(columns): 8, "context": 32},
                        ["intensity_ceiling", "intensity", "batch", *MEMORY_COLUMNS],
                        prefer={"batch": "max"}, menus=STEP_MENUS, whole=(RIDGES,))


def intensity_ceiling_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                            axes: Dimensions | None = None,
                            grid: Mapping[str, Any] | None = None) -> alt.TopLevelMixin:
    """Decode intensity ceiling vs context, per group size, against the ridges.

    The closed form as batch grows without bound (the step's `intensity_ceiling`) as
    lines, the step's intensity at the grid's largest batch as points (hollow where that
    batch does not fit), the held GPU's ridge as a solid rule and other GPUs' dashed."""
    import polars as pl

    alt = import_altair()
    title = "Decode intensity ceiling vs context"
    columns = columns_of(frame)
    group = _group_axis(columns)
    chart_slice = intensity_slice(columns).take(frame, fixed=fixed, axes=axes, grid=grid)
    data = chart_slice.data.filter(positive(pl, "context", "intensity_ceiling")).rename(
        {group: "group", "intensity_ceiling": "ceiling"})
    if data.is_empty():
        return empty_chart(alt, title, "no decode step with context > 0 in these results")
    held_gpu = chart_slice.fixed.get("gpu")
    data = with_memory_note(pl, data if "fits" in data.columns
                            else data.with_columns(fits=pl.lit(True)), grid, gpu=held_gpu)
    held_dtype = chart_slice.fixed.get("compute_dtype")
    # ties in ridge ordered by name: which GPUs are spread below never depends on the
    # order the rows came in
    all_ridges = (frame.lazy().select(RIDGES).unique().sort("ridge", "gpu", "compute_dtype")
                  .collect().filter(positive(pl, "ridge"))
                  .with_columns(pl.col("gpu", "compute_dtype").cast(pl.String)))
    is_held = ((pl.col("gpu") == held_gpu) if held_gpu is not None else pl.lit(False)) & (
        (pl.col("compute_dtype") == held_dtype) if held_dtype is not None else pl.lit(True))
    held_ridges = all_ridges.filter(is_held)
    others = all_ridges.filter(~is_held)
    others = others.gather(spread(list(range(others.height)), 8 - min(held_ridges.height, 1)))
    ridges = tidy(pl, pl.concat([held_ridges, others]).sort("ridge")).select(
        "ridge", held=is_held,
        label=pl.format("{} {} ridge", "gpu", "compute_dtype"),
        context=pl.lit(data["context"].max()))
    models = dropdown_params(alt, chart_slice, "model") + menu_params(alt, chart_slice)
    group_pick = legend_selection(alt, "group")
    x = alt.X("context:Q", scale=alt.Scale(type="log", base=2), axis=alt.Axis(format=","),
              title="Context (tokens cached per sequence)")
    color = alt.Color("group:O", title=LABELS[group].capitalize(),
                      scale=alt.Scale(range=OKABE_ITO))
    opacity = highlight(alt, group_pick)
    largest = show(data["batch"].max())
    tooltip = [alt.Tooltip("model:N"), alt.Tooltip("group:Q", title=LABELS[group]),
               alt.Tooltip("context:Q", title="context (tokens)", format=","),
               alt.Tooltip("ceiling:Q", title="ceiling, batch → ∞ (FLOP/byte)",
                           format=",.2f"),
               alt.Tooltip("intensity:Q", title=f"intensity at batch {largest} (FLOP/byte)",
                           format=",.2f"),
               alt.Tooltip("memory:N", title=f"memory at batch {largest}")]
    base = only_chosen(alt, alt.Chart(data), models)
    line = base.mark_line().encode(
        x=x, y=alt.Y("ceiling:Q", scale=alt.Scale(type="log"),
                     title="Arithmetic intensity (FLOP/byte)"),
        color=color, opacity=opacity, tooltip=tooltip).add_params(
        group_pick, *models).properties(name="ceilings")
    dots = base.mark_point(size=60).encode(
        x=x, y="intensity:Q", color=color, opacity=opacity, tooltip=tooltip,
        fill=alt.condition("datum.fits", alt.Color("group:O", legend=None,
                                                   scale=alt.Scale(range=OKABE_ITO)),
                           alt.value("transparent"))).properties(name="largest_batch")
    ridge_tooltip = [alt.Tooltip("label:N", title="GPU"),
                     alt.Tooltip("ridge:Q", title="ridge (FLOP/byte)", format=",.1f")]
    rules = alt.Chart(ridges).mark_rule().encode(
        y="ridge:Q", tooltip=ridge_tooltip,
        color=alt.condition("datum.held", alt.value("#222"), alt.value("#888")),
        strokeDash=alt.condition("datum.held", alt.value([1, 0]), alt.value([6, 4])),
        strokeWidth=alt.condition("datum.held", alt.value(2), alt.value(1))).properties(
        name="ridges")
    # a label's height (14 px) as a factor on the log axis (its data span, plus the
    # decade Vega's rounding adds)
    values = pl.concat([data["ceiling"], data["intensity"], ridges["ridge"]]).drop_nulls()
    decades = math.log10(values.max() / values.min()) + 1
    factor = 10 ** (14 * decades / HEIGHT)
    held_rows = ridges.filter(pl.col("held"))
    near_held = pl.lit(False)
    for value in held_rows["ridge"]:  # the held GPU's label always prints
        near_held = near_held | pl.col("ridge").is_between(value / factor, value * factor)
    labelled = pl.concat([held_rows, spaced_labels(ridges.filter(~pl.col("held") & ~near_held),
                                                   "ridge", factor)])
    labels = alt.Chart(labelled).mark_text(
        align="right", dy=-6).encode(
        x="context:Q", y="ridge:Q", text="label:N", tooltip=ridge_tooltip,
        color=alt.condition("datum.held", alt.value("#222"), alt.value("#666"))).properties(
        name="ridge_labels")
    shown_ridges = f"{ridges.height} of {all_ridges.height} GPU · dtype ridges, spread by value"
    return alt.layer(
        rules, labels, line, dots, width=WIDTH, height=HEIGHT,
        title=title_params(alt, title, chart_slice,
                           f"lines: closed-form ceiling as batch → ∞; points: the step's "
                           f"intensity at batch {largest} (hollow: it does not fit); solid "
                           f"rule: the held GPU's ridge, dashed: {shown_ridges} (above a "
                           "ridge a step is compute-bound)", grid=grid, menus=("model",)))


SHARE_BANDS = 10  # the heatmap's colour classes, so that its legend can select them
BAND_WIDTH = 100 // SHARE_BANDS


def attention_slice(columns: Sequence[str]) -> SliceRequest:
    return SliceRequest({"gpu": 16, "model": 12, "batch": 16, "context": 16},
                        ["attention_share", "step_time_s", "tokens_per_s", "bound",
                         *MEMORY_COLUMNS], menus=STEP_MENUS,
                        menu_over=("model", "batch", "context"))


def attention_share_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                          axes: Dimensions | None = None,
                          grid: Mapping[str, Any] | None = None) -> alt.TopLevelMixin:
    """Attention's share of the step time, a heatmap over batch × context.

    In 10 % bands (the legend selects bands); × marks configurations that do not fit."""
    import polars as pl

    alt = import_altair()
    title = "Attention's share of the decode step"
    chart_slice = attention_slice(columns_of(frame)).take(frame, fixed=fixed, axes=axes,
                                                          grid=grid)
    data = chart_slice.data.filter(pl.col("attention_share").is_not_null())
    if data.is_empty():
        return empty_chart(alt, title, "no step with a finite attention share in these results")
    data = with_memory_note(pl, data if "fits" in data.columns
                            else data.with_columns(fits=pl.lit(True)), grid)
    cells = data.select("gpu", "model", "batch", "context", "fits", "bound", "memory",
                        *chart_slice.menu_columns,
                        attention=pl.col("attention_share"), tok_s=pl.col("tokens_per_s"),
                        step_ms=rounded(pl, pl.col("step_time_s") * 1e3))
    bands = [f"{b}–{b + BAND_WIDTH} %" for b in range(0, 100, BAND_WIDTH)]
    band = f"floor(min(datum.attention, 0.9999) * {SHARE_BANDS}) * {BAND_WIDTH}"
    dropdowns = dropdown_params(alt, chart_slice, "gpu", "model") + menu_params(alt,
                                                                                chart_slice)
    band_pick = legend_selection(alt, "band")
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
               alt.Tooltip("bound:N"), alt.Tooltip("memory:N", title="memory")]
    label = f"format({band}, 'd') + '–' + format({band} + {BAND_WIDTH}, 'd') + ' %'"
    base = only_chosen(alt, alt.Chart(cells), dropdowns).transform_calculate(band=label)
    # a cell that does not fit is faded (and crossed): its share is of a step no GPU runs
    heat = base.mark_rect().encode(
        x=x, y=y, tooltip=tooltip,
        opacity=alt.when(band_pick, alt.datum.fits).then(alt.value(1.0)).when(
            band_pick).then(alt.value(0.35)).otherwise(alt.value(0.12)),
        color=alt.Color("band:O", title="Attention share",
                        scale=alt.Scale(domain=bands, scheme="orangered")),
    ).add_params(band_pick, *dropdowns).properties(name="cells")
    crosses = base.transform_filter("!datum.fits").mark_text(
        text="×", fontSize=16, color="#222").encode(x=x, y=y, tooltip=tooltip).properties(
        name="over_memory")
    return alt.layer(
        heat, crosses, width=WIDTH, height=HEIGHT,
        title=title_params(alt, title, chart_slice,
                           "share of the parts' time spent in attention; faded × = weights "
                           "+ KV exceed GPU memory (the reason in the tooltip)", grid=grid,
                           menus=("gpu", "model")))


def _time_parts(columns: Sequence[str]) -> list[str]:
    return [p for p in ("gemm", "attention", "activations", "communication")
            if f"{p}_time_s" in columns]


def gpu_comparison_slice(columns: Sequence[str]) -> SliceRequest:
    parts = _time_parts(columns)
    return SliceRequest({"gpu": 8, "model": 12, "batch": 12},
                        [f"{p}_time_s" for p in parts]
                        + ["step_time_s", "tokens_per_s", *MEMORY_COLUMNS],
                        rows_per_point=len(parts), menus=STEP_MENUS)


def gpu_comparison_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                         axes: Dimensions | None = None,
                         grid: Mapping[str, Any] | None = None) -> alt.TopLevelMixin:
    """The same workload on each GPU: step time split into parts, vs batch.

    One panel per GPU on a shared time axis."""
    import polars as pl

    alt = import_altair()
    title = "Where the step's time goes, GPU by GPU"
    columns = columns_of(frame)
    parts = _time_parts(columns)
    chart_slice = gpu_comparison_slice(columns).take(frame, fixed=fixed, axes=axes, grid=grid)
    steps = chart_slice.data
    steps = with_memory_note(pl, steps if "fits" in steps.columns
                             else steps.with_columns(fits=pl.lit(True)), grid)
    data = pl.concat([
        steps.select(
            "gpu", "model", "batch", "fits", "memory", *chart_slice.menu_columns,
            part=pl.lit(PART_LABELS[p]),
            ms=rounded(pl, pl.col(f"{p}_time_s") * 1e3),
            step_ms=rounded(pl, pl.col("step_time_s") * 1e3), tok_s=pl.col("tokens_per_s"))
        for p in parts]).filter(pl.col("ms").is_not_null())
    if data.is_empty():
        return empty_chart(alt, title, "no step in these results")
    models = dropdown_params(alt, chart_slice, "model") + menu_params(alt, chart_slice)
    part_pick = legend_selection(alt, "part")
    order = [PART_LABELS[p] for p in parts]
    # A step that does not fit is scaled down to the tallest step that does (of its
    # model, on any GPU): it never sets the shared axis; its real time is in the tooltip.
    scaled = alt.Chart(data).transform_calculate(
        fit_ms="datum.fits ? datum.step_ms : null").transform_joinaggregate(
        cap_ms="max(fit_ms)", groupby=["model", *chart_slice.menu_columns]).transform_calculate(
        shown_ms="datum.fits || !isValid(datum.cap_ms) ? datum.ms "
                 ": datum.ms * min(1, datum.cap_ms / datum.step_ms)")
    bars = only_chosen(alt, scaled, models).mark_bar().encode(
        x=alt.X("batch:O", title="Batch (sequences)", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("sum(shown_ms):Q", title="Step time (ms)", stack="zero"),
        color=alt.Color("part:N", title="Part", sort=order, scale=palette(alt, order)),
        order=alt.Order("part:N", sort="ascending"), detail="fits:N",
        opacity=alt.when(part_pick, alt.datum.fits).then(alt.value(1.0)).when(
            part_pick).then(alt.value(0.3)).otherwise(alt.value(0.12)),
        tooltip=[alt.Tooltip("gpu:N", title="GPU"), alt.Tooltip("model:N"),
                 alt.Tooltip("batch:Q", title="batch (sequences)", format=","),
                 alt.Tooltip("part:N"),
                 alt.Tooltip("ms:Q", title="part time (ms)", format=",.4~g"),
                 alt.Tooltip("step_ms:Q", title="step time (ms)", format=",.4~g"),
                 alt.Tooltip("tok_s:Q", title="all users (tok/s)", format=",.0f"),
                 alt.Tooltip("memory:N", title="memory")],
    ).add_params(part_pick, *models).properties(name="parts", width=200, height=160)
    return bars.facet(
        facet=alt.Facet("gpu:N", title=None), columns=4, title=title_params(alt, title, chart_slice,
                           "stacked: each part's roofline time; the panels share the time "
                           "axis; faded: weights + KV exceed GPU memory (cut to the tallest "
                           "step that fits, the reason in the tooltip)", grid=grid,
                           menus=("model",)))


# each step chart's request, by its name in the catalogue: what `sweep run` cuts from
# each shard as it is written, so that its charts start from those rows
STEP_SLICES = {"roofline": roofline_slice, "throughput_vs_batch": throughput_slice,
               "intensity_ceiling": intensity_slice, "attention_share": attention_slice,
               "gpu_comparison": gpu_comparison_slice}
