"""Charts of step grids: the roofline, throughput and intensity against batch and
context, attention's share and each GPU's time split (see `rooftui.sweeps.charts`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rooftui.sweeps.chart_marks import (
    FITS,
    HEIGHT,
    PART_LABELS,
    WIDTH,
    dropdown_params,
    empty_chart,
    highlight,
    import_altair,
    legend_selection,
    only_chosen,
    spaced_labels,
    title_params,
)
from rooftui.sweeps.chart_slices import LABELS, positive, rounded, show, spread, take_slice, tidy

if TYPE_CHECKING:
    import altair as alt

    from rooftui.sweeps.chart_slices import Dimensions, Frame

def roofline_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                   axes: Dimensions | None = None,
                   grid: Mapping[str, Any] | None = None) -> alt.TopLevelMixin:
    """Attainable FLOP/s vs intensity (log-log): roofs, ridges, the step's parts.

    One roof per GPU and compute dtype with its ridge, and the step's GEMM part,
    attention part and whole step as points coloured by batch (one model at a time,
    chosen from a dropdown)."""
    import polars as pl

    alt = import_altair()
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
            tflops=rounded(pl, pl.col(f"{prefix}flops") / pl.col(time) / 1e12),
            bound=pl.col(f"{prefix}bound"))

    points = pl.concat([part_rows(p) for p in parts]).filter(
        positive(pl, "intensity", "tflops"))
    ridges = data.group_by("roof").agg(
        peak_tflops=pl.col("peak_flops").first() / 1e12,
        bandwidth_tbs=pl.col("bandwidth_bytes_per_s").first() / 1e12).with_columns(
        ridge=rounded(pl, pl.col("peak_tflops") / pl.col("bandwidth_tbs"))).filter(
        positive(pl, "ridge")).sort("roof")
    if points.is_empty() or ridges.is_empty():
        return empty_chart(alt, title, "no step with work to place in these results")
    low = min(points["intensity"].min(), ridges["ridge"].min()) / 4
    high = max(points["intensity"].max(), ridges["ridge"].max()) * 4
    roofs = pl.concat([
        ridges.with_columns(intensity=pl.lit(low),
                            tflops=pl.lit(low) * pl.col("bandwidth_tbs")),
        ridges.with_columns(intensity=pl.col("ridge"), tflops=pl.col("peak_tflops")),
        ridges.with_columns(intensity=pl.lit(high), tflops=pl.col("peak_tflops")),
    ]).with_columns(rounded(pl, pl.col("intensity")), rounded(pl, pl.col("tflops")))

    x = alt.X("intensity:Q", scale=alt.Scale(type="log"),
              title="Arithmetic intensity (FLOP/byte)")
    y = alt.Y("tflops:Q", scale=alt.Scale(type="log"), axis=alt.Axis(format="~g"),
              title="Attainable throughput (TFLOP/s)")
    roof_pick = legend_selection(alt, "roof")
    batch_pick = legend_selection(alt, "batch")
    models = dropdown_params(alt, chart_slice, "model")
    roof_tooltip = [alt.Tooltip("roof:N"),
                    alt.Tooltip("peak_tflops:Q", title="peak (TFLOP/s)", format=",.4~g"),
                    alt.Tooltip("bandwidth_tbs:Q", title="bandwidth (TB/s)", format=",.4~g"),
                    alt.Tooltip("ridge:Q", title="ridge (FLOP/byte)", format=",.1f")]
    roof_lines = alt.Chart(roofs).mark_line(strokeWidth=2).encode(
        x=x, y=y, detail="roof:N", tooltip=roof_tooltip,
        color=alt.Color("roof:N", title="Roof (GPU · compute dtype)",
                        scale=alt.Scale(scheme="tableau20")),
        opacity=highlight(alt, roof_pick)).add_params(roof_pick).properties(name="roofs")
    ridge_marks = alt.Chart(ridges).mark_point(
        shape="diamond", filled=True, size=90, color="#333").encode(
        x="ridge:Q", y="peak_tflops:Q", tooltip=roof_tooltip,
        opacity=highlight(alt, roof_pick)).properties(name="ridges")
    dots = only_chosen(alt, alt.Chart(points), models).mark_point(
        filled=True, size=70).encode(
        x=x, y=y,
        color=alt.Color("batch:O", title="Batch (sequences)",
                        scale=alt.Scale(scheme="viridis")),
        shape=alt.Shape("part:N", title="Part", sort=[PART_LABELS[p] for p in parts]),
        opacity=highlight(alt, roof_pick & batch_pick, on=0.95, off=0.08),
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
        title=title_params(alt, title, chart_slice,
                     "lines: memory roof (intensity × bandwidth) up to the ridge (diamond), "
                     "then the compute roof; points: the FLOP/s each part achieves"))


def throughput_vs_batch_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                              axes: Dimensions | None = None,
                              grid: Mapping[str, Any] | None = None) -> alt.TopLevelMixin:
    """Decode tokens/s vs batch, all users and per user, one line per context.

    A cross marks a batch whose KV cache no longer fits, a dashed rule the largest that
    does (the seed's chart, for every GPU and model of the grid)."""
    import polars as pl

    alt = import_altair()
    title = "Decode throughput vs batch"
    chart_slice = take_slice(
        frame, {"gpu": 16, "model": 12, "context": 8, "batch": 24},
        ["tokens_per_s", "per_user_tokens_per_s", "step_time_s", "attention_share", "fits",
         "max_batch"], fixed=fixed, axes=axes)
    data = chart_slice.data.filter(positive(pl, "batch", "tokens_per_s"))
    if data.is_empty():
        return empty_chart(alt, title, "no decode step (batch > 0) in these results")
    limits = data.group_by("gpu", "model", "context").agg(pl.col("max_batch").first()).filter(
        (pl.col("max_batch") >= 1) & (pl.col("max_batch") < data["batch"].max()))
    points = data.select(
        "gpu", "model", "context", "batch", "fits", tok_s=pl.col("tokens_per_s"),
        user_tok_s=pl.col("per_user_tokens_per_s"),
        step_ms=rounded(pl, pl.col("step_time_s") * 1e3),
        attention=pl.col("attention_share"))
    dropdowns = dropdown_params(alt, chart_slice, "gpu", "model")
    context_pick = legend_selection(alt, "context")
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
    opacity = highlight(alt, context_pick)

    def panel(name: str, metric: str, axis_title: str, params: list):
        base = only_chosen(alt, alt.Chart(points), dropdowns
                            ).transform_calculate(memory=FITS)
        y = alt.Y(f"{metric}:Q", title=axis_title, axis=alt.Axis(format="~s"))
        line = base.mark_line().encode(x=x, y=y, color=color, opacity=opacity,
                                       tooltip=tooltip)
        marks = base.mark_point(size=55, filled=True).encode(
            x=x, y=y, color=color, opacity=opacity, tooltip=tooltip,
            shape=alt.Shape("memory:N", title="KV cache",
                            scale=alt.Scale(domain=["fits", "exceeds memory"],
                                            range=["circle", "cross"])))
        rules = only_chosen(alt, alt.Chart(limits), dropdowns).mark_rule(
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
    ).properties(title=title_params(alt, title, chart_slice,
                              "× = the batch's KV cache exceeds GPU memory; dashed rule = "
                              "the largest batch that fits"))


def intensity_ceiling_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                            axes: Dimensions | None = None,
                            grid: Mapping[str, Any] | None = None) -> alt.TopLevelMixin:
    """Decode intensity ceiling vs context, per group size, against the ridges.

    The closed form as batch grows without bound (the step's `intensity_ceiling`) as
    lines, the step's intensity at the grid's largest batch as points, and each GPU's
    ridge as a dashed rule."""
    import polars as pl

    alt = import_altair()
    title = "Decode intensity ceiling vs context"
    lazy = frame.lazy()
    group = "group_size" if "group_size" in lazy.collect_schema().names() else "kv_heads"
    chart_slice = take_slice(frame, {"model": 12, group: 8, "context": 32},
                             ["intensity_ceiling", "intensity", "batch"], fixed=fixed,
                             axes=axes, prefer={"batch": "max"})
    data = chart_slice.data.filter(positive(pl, "context", "intensity_ceiling")).rename(
        {group: "group", "intensity_ceiling": "ceiling"})
    if data.is_empty():
        return empty_chart(alt, title, "no decode step with context > 0 in these results")
    ridges = (lazy.select("gpu", "compute_dtype", "ridge").unique().sort("ridge")
              .collect().filter(positive(pl, "ridge")))
    ridges = tidy(pl, ridges.gather(spread(list(range(ridges.height)), 8))).select(
        "ridge", label=pl.format("{} {} ridge", "gpu", "compute_dtype"),
        context=pl.lit(data["context"].max()))
    models = dropdown_params(alt, chart_slice, "model")
    group_pick = legend_selection(alt, "group")
    x = alt.X("context:Q", scale=alt.Scale(type="log", base=2), axis=alt.Axis(format=","),
              title="Context (tokens cached per sequence)")
    color = alt.Color("group:O", title=LABELS[group].capitalize(),
                      scale=alt.Scale(scheme="dark2"))
    opacity = highlight(alt, group_pick)
    largest = show(data["batch"].max())
    tooltip = [alt.Tooltip("model:N"), alt.Tooltip("group:Q", title=LABELS[group]),
               alt.Tooltip("context:Q", title="context (tokens)", format=","),
               alt.Tooltip("ceiling:Q", title="ceiling, batch → ∞ (FLOP/byte)",
                           format=",.2f"),
               alt.Tooltip("intensity:Q", title=f"intensity at batch {largest} (FLOP/byte)",
                           format=",.2f")]
    base = only_chosen(alt, alt.Chart(data), models)
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
    labels = alt.Chart(spaced_labels(ridges, "ridge", 10 ** (14 * decades / HEIGHT))).mark_text(
        align="right", dy=-6, color="#555").encode(
        x="context:Q", y="ridge:Q", text="label:N", tooltip=ridge_tooltip).properties(
        name="ridge_labels")
    return alt.layer(rules, labels, line, dots).properties(
        width=WIDTH, height=HEIGHT,
        title=title_params(alt, title, chart_slice,
                     f"lines: closed-form ceiling as batch → ∞; points: the step's intensity "
                     f"at batch {largest}; dashed: ridges (above them a step would be "
                     "compute-bound)"))


SHARE_BANDS = 10  # the heatmap's colour classes, so that its legend can select them
BAND_WIDTH = 100 // SHARE_BANDS


def attention_share_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                          axes: Dimensions | None = None,
                          grid: Mapping[str, Any] | None = None) -> alt.TopLevelMixin:
    """Attention's share of the step time, a heatmap over batch × context.

    In 10 % bands (the legend selects bands); × marks configurations that do not fit."""
    import polars as pl

    alt = import_altair()
    title = "Attention's share of the decode step"
    chart_slice = take_slice(
        frame, {"gpu": 16, "model": 12, "batch": 16, "context": 16},
        ["attention_share", "step_time_s", "tokens_per_s", "fits", "bound"],
        fixed=fixed, axes=axes)
    data = chart_slice.data.filter(pl.col("attention_share").is_not_null())
    if data.is_empty():
        return empty_chart(alt, title, "no step with a finite attention share in these results")
    cells = data.select("gpu", "model", "batch", "context", "fits", "bound",
                        attention=pl.col("attention_share"), tok_s=pl.col("tokens_per_s"),
                        step_ms=rounded(pl, pl.col("step_time_s") * 1e3))
    bands = [f"{b}–{b + BAND_WIDTH} %" for b in range(0, 100, BAND_WIDTH)]
    band = f"floor(min(datum.attention, 0.9999) * {SHARE_BANDS}) * {BAND_WIDTH}"
    dropdowns = dropdown_params(alt, chart_slice, "gpu", "model")
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
               alt.Tooltip("bound:N"), alt.Tooltip("memory:N", title="KV cache")]
    label = f"format({band}, 'd') + '–' + format({band} + {BAND_WIDTH}, 'd') + ' %'"
    base = only_chosen(alt, alt.Chart(cells), dropdowns).transform_calculate(
        memory=FITS, band=label)
    heat = base.mark_rect().encode(
        x=x, y=y, tooltip=tooltip, opacity=highlight(alt, band_pick, off=0.15),
        color=alt.Color("band:O", title="Attention share",
                        scale=alt.Scale(domain=bands, scheme="orangered")),
    ).add_params(band_pick, *dropdowns).properties(name="cells")
    crosses = base.transform_filter("!datum.fits").mark_text(
        text="×", fontSize=16, color="#222").encode(x=x, y=y, tooltip=tooltip).properties(
        name="over_memory")
    return alt.layer(heat, crosses).properties(
        width=WIDTH, height=HEIGHT,
        title=title_params(alt, title, chart_slice,
                     "share of the parts' time spent in attention; × = the KV cache exceeds "
                     "GPU memory"))


def gpu_comparison_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                         axes: Dimensions | None = None,
                         grid: Mapping[str, Any] | None = None) -> alt.TopLevelMixin:
    """The same workload on each GPU: step time split into parts, vs batch.

    One panel per GPU on a shared time axis."""
    import polars as pl

    alt = import_altair()
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
            ms=rounded(pl, pl.col(f"{p}_time_s") * 1e3),
            step_ms=rounded(pl, pl.col("step_time_s") * 1e3), tok_s=pl.col("tokens_per_s"))
        for p in parts]).filter(pl.col("ms").is_not_null())
    if data.is_empty():
        return empty_chart(alt, title, "no step in these results")
    models = dropdown_params(alt, chart_slice, "model")
    part_pick = legend_selection(alt, "part")
    order = [PART_LABELS[p] for p in parts]
    bars = only_chosen(alt, alt.Chart(data), models).mark_bar().encode(
        x=alt.X("batch:O", title="Batch (sequences)", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("sum(ms):Q", title="Step time (ms)", stack="zero"),
        color=alt.Color("part:N", title="Part", sort=order,
                        scale=alt.Scale(domain=order, scheme="set2")),
        order=alt.Order("part:N", sort="ascending"),
        opacity=highlight(alt, part_pick, off=0.2),
        tooltip=[alt.Tooltip("gpu:N", title="GPU"), alt.Tooltip("model:N"),
                 alt.Tooltip("batch:Q", title="batch (sequences)", format=","),
                 alt.Tooltip("part:N"),
                 alt.Tooltip("ms:Q", title="part time (ms)", format=",.4~g"),
                 alt.Tooltip("step_ms:Q", title="step time (ms)", format=",.4~g"),
                 alt.Tooltip("tok_s:Q", title="all users (tok/s)", format=",.0f")],
    ).add_params(part_pick, *models).properties(name="parts", width=200, height=160)
    return bars.facet(facet=alt.Facet("gpu:N", title=None), columns=4).properties(
        title=title_params(alt, title, chart_slice,
                     "stacked: each part's roofline time; the panels share the time axis"))
