"""Charts of simulate and optimize grids (rooftui.sweeps.kinds): occupancy, latency and
stalls against their knobs, the optimizer's frontier and its rate heatmap, and TTFT
against the prefix cache's capacity."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rooftui.sweeps.chart_marks import (
    HEIGHT,
    INFEASIBLE,
    KV_FIT_COLUMNS,
    WIDTH,
    capped,
    dropdown_params,
    has_columns,
    highlight,
    import_altair,
    legend_selection,
    menu_params,
    note_chart,
    only_chosen,
    palette,
    title_params,
    when_fits,
    with_batch_fit,
)
from rooftui.sweeps.chart_slices import SERVING_AXES, ChartSlice, positive, take_slice

if TYPE_CHECKING:
    import altair as alt

    from rooftui.sweeps.chart_slices import Dimensions, Frame

def _label(pl, *columns: str, present: Sequence[str]):
    """The last non-empty of `columns` as a name: a length law overrides the workload's."""
    label = pl.lit("all")
    for column in columns:
        if column in present:
            value = pl.col(column).cast(pl.String)
            label = pl.when(value == "").then(label).otherwise(value)
    return label


# held inputs of simulate grids offered as menus while the rows allow
SERVING_MENUS = ("max_batch", "token_budget", "tp", "kv_dtype", "mfu_assumed")
SLO_AXES = ("slo_ttft", "slo_tpot")
SERVING_DROPDOWNS = ("gpu", "model", "workload", "slo_ttft", "slo_tpot")


def _serving_slice(frame: Frame, shown: Mapping[str, int], metrics: Sequence[str], *,
                   grid: Mapping[str, Any] | None = None, menus: Sequence[str] = (),
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
    return take_slice(frame, shown, metrics, fixed=fixed, axes=axes, grid=grid,
                      rows_per_point=rows_per_point, menus=menus)


def occupancy_vs_batch_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                             axes: Dimensions | None = None,
                             grid: Mapping[str, Any] | None = None) -> alt.TopLevelMixin:
    """Slot occupancy vs max batch, one colour per length distribution, with 1/H_B.

    Simulated occupancy (points, one shape per policy: static batching against continuous
    batching and chunked prefill), the exact E[L] / E[max of B] of each output law
    (lines: what static batching should reach) and the exponential law's 1/H_B (dashed):
    how far real lengths move static batching from the seed's result."""
    import polars as pl

    alt = import_altair()
    title = "Slot occupancy vs max batch"
    if not has_columns(frame, "max_batch", "occupancy", "static_occupancy"):
        return note_chart(alt, title, "no simulate results (max_batch, occupancy) here")
    chart_slice = _serving_slice(
        frame, {"gpu": 8, "model": 8, "policy": 3, "workload": 12, "output_tokens": 12,
                "max_batch": 32},
        ["occupancy", "static_occupancy", "harmonic_occupancy", "mean_batch",
         *KV_FIT_COLUMNS], fixed=fixed, axes=axes, grid=grid, menus=SERVING_MENUS)
    present = chart_slice.data.columns
    data = with_batch_fit(pl, chart_slice.data.filter(pl.col("occupancy").is_not_null()),
                          chart_slice.fixed).with_columns(
        distribution=_label(pl, "workload", "output_tokens", present=present))
    if "policy" not in present:
        data = data.with_columns(policy=pl.lit("simulated"))
    if data.is_empty():
        return note_chart(alt, title, "no simulation in these results")
    # the lines and the reference keep the menus' columns: a menu redraws them with the
    # points, over the max batches its rows have
    chosen = [c for c in ("gpu", "model", *chart_slice.menu_columns) if c in present]
    harmonic = data.select(*chosen, "max_batch", "harmonic_occupancy").unique().sort(
        "max_batch")
    analytic = data.select(*chosen, "distribution", "max_batch",
                           "static_occupancy").unique().sort("max_batch")
    dropdowns = dropdown_params(alt, chart_slice, "gpu", "model") + menu_params(
        alt, chart_slice)
    pick = legend_selection(alt, "distribution")
    x = alt.X("max_batch:Q", scale=alt.Scale(type="log", base=2), axis=alt.Axis(format=","),
              title="Max batch (slots)")
    y = alt.Y("occupancy:Q", title="Occupancy (useful slot-steps)",
              axis=alt.Axis(format=".0%"), scale=alt.Scale(domain=[0, 1]))
    lengths = palette(alt, sorted(data["distribution"].unique()))
    color = alt.Color("distribution:N", title="Lengths", scale=lengths)
    tooltip = [alt.Tooltip("distribution:N", title="lengths"), alt.Tooltip("policy:N"),
               alt.Tooltip("max_batch:Q", title="max batch", format=","),
               alt.Tooltip("occupancy:Q", title="simulated", format=".1%"),
               alt.Tooltip("static_occupancy:Q", title="E[L] / E[max of B]", format=".1%"),
               alt.Tooltip("harmonic_occupancy:Q", title="1/H_B", format=".1%"),
               alt.Tooltip("mean_batch:Q", title="mean batch", format=",.1f"),
               alt.Tooltip("memory:N", title="KV cache")]
    lines = only_chosen(alt, alt.Chart(analytic), dropdowns).mark_line().encode(
        x=x, y="static_occupancy:Q", color=color, opacity=highlight(alt, pick),
        tooltip=[alt.Tooltip("distribution:N", title="lengths"),
                 alt.Tooltip("max_batch:Q", title="max batch", format=","),
                 alt.Tooltip("static_occupancy:Q", title="E[L] / E[max of B]", format=".1%")]
    ).add_params(pick, *dropdowns).properties(name="analytic")
    # hollow where the max batch does not fit: one layer (a layer of their own would be
    # empty, and Vega warn, whenever the menus show none)
    dots = only_chosen(alt, alt.Chart(data), dropdowns).mark_point(
        size=60, filled=False, strokeWidth=1.5).encode(
        x=x, y=y, color=color, opacity=highlight(alt, pick), tooltip=tooltip,
        fill=when_fits(alt, alt.Fill("distribution:N", legend=None, scale=lengths), "white"),
        shape=alt.Shape("policy:N", title="Policy")).properties(name="simulated")
    # drawn last, thin and black: the exponential law's own line would hide it
    reference = only_chosen(alt, alt.Chart(harmonic), dropdowns).mark_line(
        strokeDash=[6, 4], color="#000", strokeWidth=1.5).encode(
        x=x, y="harmonic_occupancy:Q",
        tooltip=[alt.Tooltip("max_batch:Q", title="max batch", format=","),
                 alt.Tooltip("harmonic_occupancy:Q", title="1/H_B", format=".1%")]
    ).properties(name="harmonic")
    return alt.layer(lines, dots, reference).properties(
        width=WIDTH, height=HEIGHT,
        title=title_params(alt, title, chart_slice,
                     "points: simulated, by policy; lines: E[L] / E[max of B] of the output "
                     "law (exact, static batching); dashed: 1/H_B, the exponential law's",
                     *_kv_note(data), grid=grid))


def _kv_note(data) -> list[str]:
    """The subtitle's line on rows whose max batch the KV cache cannot hold, if any."""
    return ([] if data["fits"].all() else
            ["grey (points: hollow): a max batch above the sequences the KV cache holds at the "
             "requests' mean length, so never reached (why in the tooltip; kept off the "
             "value axis)"])


def _fitting_lines(alt, base, field: str, name: str, pick, color, **encoding):
    """Lines (with points) of `base`'s rows on `field`, as `y` encodes it on "shown":
    rows whose max batch fits the KV cache in `color`, the others grey and cut to the
    highest value of the rows that fit (`capped`), so they never stretch the axis. One
    layer: a layer of its own for the grey rows would be empty (Vega warns) whenever the
    menus show none."""
    return capped(alt, base, field, "shown").mark_line(point=True).encode(
        color=when_fits(alt, color, INFEASIBLE),
        opacity=highlight(alt, pick), **encoding).properties(name=name)


PERCENTILE_DASHES = {"p50": [1, 0], "p90": [6, 3], "p99": [2, 2]}


def latency_vs_rate_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                          axes: Dimensions | None = None,
                          grid: Mapping[str, Any] | None = None) -> alt.TopLevelMixin:
    """TTFT and TPOT percentiles (p50, p90, p99) vs arrival rate, one colour per policy."""
    import polars as pl

    alt = import_altair()
    title = "Latency vs arrival rate"
    if not has_columns(frame, "rate", "ttft_p50_s", "policy"):
        return note_chart(alt, title, "no simulations at a given rate (a rate axis) here")
    stats = ("p50", "p90", "p99")
    metrics = [f"{m}_{q}_s" for m in ("ttft", "tpot") for q in stats] + [
        "slo_ttft", "slo_tpot", *KV_FIT_COLUMNS]
    chart_slice = _serving_slice(frame, {"gpu": 6, "model": 6, "workload": 8, "policy": 3,
                                     "rate": 32}, metrics, fixed=fixed, axes=axes, grid=grid,
                             rows_per_point=len(metrics), menus=(*SLO_AXES, *SERVING_MENUS))
    data = with_batch_fit(pl, chart_slice.data, chart_slice.fixed)
    keys = [c for c in ("gpu", "model", "workload", "policy", "rate", *chart_slice.menus)
            if c in data.columns]
    long = pl.concat([data.select(*keys, "fits", "memory", metric=pl.lit(m.upper()),
                                  percentile=pl.lit(q),
                                  seconds=pl.col(f"{m}_{q}_s"))
                      for m in ("ttft", "tpot") for q in stats]).filter(
        positive(pl, "rate", "seconds"))
    if long.is_empty():
        return note_chart(alt, title, "no latency at a positive rate in these results")
    dropdowns = dropdown_params(alt, chart_slice, "gpu", "model", "workload") + menu_params(
        alt, chart_slice)
    slos = _slo_rows(pl, chart_slice, keys)
    pick = legend_selection(alt, "policy")
    tooltip = [alt.Tooltip("policy:N"), alt.Tooltip("rate:Q", title="rate (req/s)",
                                                    format=",.3~g"),
               alt.Tooltip("metric:N"), alt.Tooltip("percentile:N"),
               alt.Tooltip("seconds:Q", title="seconds", format=",.4~g"),
               alt.Tooltip("memory:N", title="KV cache")]

    def panel(metric: str, params: list):
        base = only_chosen(alt, alt.Chart(long), dropdowns).transform_filter(
            alt.datum.metric == metric)
        line = _fitting_lines(
            alt, base, "seconds", f"{metric.lower()}_lines", pick,
            x=alt.X("rate:Q", title="Arrival rate (requests/s)", scale=alt.Scale(type="log")),
            y=alt.Y("shown:Q", scale=alt.Scale(type="log"), title=f"{metric} (s)",
                    axis=alt.Axis(format="~g")),
            color=alt.Color("policy:N", title="Policy",
                            scale=palette(alt, sorted(long["policy"].unique()))),
            strokeDash=alt.StrokeDash("percentile:N", title="Percentile",
                                      scale=alt.Scale(domain=list(PERCENTILE_DASHES),
                                                      range=list(PERCENTILE_DASHES.values()))),
            tooltip=tooltip)
        layers = [line.add_params(*params) if params else line]
        if not slos.is_empty():
            layers.append(only_chosen(alt, alt.Chart(slos), [
                d for d in dropdowns if d.name.removesuffix("_choice") in slos.columns]
            ).transform_filter(alt.datum.metric == metric).mark_rule(
                color="#D55E00", strokeWidth=2, strokeDash=[8, 3]).encode(
                y="slo:Q", tooltip=[alt.Tooltip("metric:N"),
                                    alt.Tooltip("slo:Q", title="SLO (s)", format=",.4~g")]))
        return alt.layer(*layers).properties(width=WIDTH // 2 + 40, height=HEIGHT - 40)

    slo_note = ("red dashed rule: the SLO" if not slos.is_empty()
                else "no SLO in these results")
    return alt.hconcat(panel("TTFT", [pick, *dropdowns]), panel("TPOT", [])).properties(
        title=title_params(alt, title, chart_slice,
                           f"solid p50, dashed p90, dotted p99; both axes logarithmic; "
                           f"{slo_note}", *_kv_note(long), grid=grid))


def _slo_rows(pl, chart_slice: ChartSlice, keys: Sequence[str]):
    """One row per (menu choice, metric) with the SLO the latency must meet: from the
    rows when the grid sweeps it (each SLO menu's column kept, for its filter), else the
    held value."""
    data = chart_slice.data
    menus = [k for k in keys if k in ("gpu", "model", "workload") and k in data.columns]
    menus += [k for k in SLO_AXES if k in chart_slice.menus]
    rows = []
    for metric, column in (("TTFT", "slo_ttft"), ("TPOT", "slo_tpot")):
        if column in data.columns:
            rows.append(data.select(*menus, slo=pl.col(column).cast(pl.Float64)).unique()
                        .with_columns(metric=pl.lit(metric)))
        elif isinstance(chart_slice.fixed.get(column), int | float):
            rows.append(pl.DataFrame({"slo": [float(chart_slice.fixed[column])],
                                      "metric": [metric]}))
    if not rows:
        return pl.DataFrame(schema={"metric": pl.String, "slo": pl.Float64})
    common = sorted(set.intersection(*(set(r.columns) for r in rows)))
    return pl.concat([r.select(common) for r in rows]).filter(pl.col("slo") > 0)


def itl_spike_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                    axes: Dimensions | None = None,
                    grid: Mapping[str, Any] | None = None) -> alt.TopLevelMixin:
    """The longest inter-token gap vs the chunked token budget, per prompt length, against
    the unchunked (continuous batching, whole prompts) gap as a dashed rule."""
    import polars as pl

    alt = import_altair()
    title = "Inter-token stall of long prompts vs chunk size"
    if not has_columns(frame, "itl_max_s", "token_budget", "policy"):
        return note_chart(alt, title, "no simulate results (token_budget, itl_max_s) here")
    held = {key: value for key, value in (fixed or {}).items() if key != "policy"}
    chart_slice = _serving_slice(frame, {"gpu": 6, "model": 6, "policy": 3, "workload": 8,
                                     "input_tokens": 8, "token_budget": 24},
                             ["itl_max_s", "itl_p50_s", "itl_p99_s", *KV_FIT_COLUMNS],
                             fixed=held, axes=axes, grid=grid, menus=SERVING_MENUS)
    present = chart_slice.data.columns
    data = with_batch_fit(pl, chart_slice.data, chart_slice.fixed).with_columns(
        prompts=_label(pl, "workload", "input_tokens", present=present)).filter(
        positive(pl, "itl_max_s"))
    chunked = data.filter((pl.col("policy") == "chunked") & (pl.col("token_budget") > 0))
    if chunked.is_empty():
        return note_chart(alt, title, "no chunked simulations with a token budget here")
    keys = [c for c in ("gpu", "model", "prompts", *chart_slice.menu_columns)
            if c in data.columns]
    # the unchunked gap, one per menu choice (a menu redraws it with the lines); where
    # its max batch does not fit, cut (as the lines are) to the longest chunked gap that
    # fits, so that it never stretches the axis
    cap = chunked.filter("fits").group_by(keys).agg(cap=pl.col("itl_max_s").max())
    whole = data.filter(pl.col("policy") == "continuous").group_by(keys).agg(
        pl.col("itl_max_s").max(), pl.col("fits").all(), pl.col("memory").first()).join(
        cap, on=keys, how="left").with_columns(shown=pl.when(
            pl.col("fits") | pl.col("cap").is_null()).then(pl.col("itl_max_s")).otherwise(
            pl.min_horizontal("itl_max_s", "cap"))).drop("cap")
    dropdowns = dropdown_params(alt, chart_slice, "gpu", "model") + menu_params(
        alt, chart_slice)
    pick = legend_selection(alt, "prompts")
    color = alt.Color("prompts:N", title="Prompt lengths",
                      scale=palette(alt, sorted(data["prompts"].unique())))
    y = alt.Y("shown:Q", scale=alt.Scale(type="log"), axis=alt.Axis(format="~g"),
              title="Longest gap between two tokens (s)")
    tooltip = [alt.Tooltip("prompts:N", title="prompts"),
               alt.Tooltip("token_budget:Q", title="token budget", format=","),
               alt.Tooltip("itl_max_s:Q", title="longest gap (s)", format=",.4~g"),
               alt.Tooltip("itl_p99_s:Q", title="ITL p99 (s)", format=",.4~g"),
               alt.Tooltip("itl_p50_s:Q", title="ITL p50 (s)", format=",.4~g"),
               alt.Tooltip("memory:N", title="KV cache")]
    layers = [_fitting_lines(
        alt, only_chosen(alt, alt.Chart(chunked), dropdowns), "itl_max_s", "chunked", pick,
        x=alt.X("token_budget:Q", scale=alt.Scale(type="log", base=2),
                axis=alt.Axis(format=","), title="Chunked token budget (tokens per step)"),
        y=y, color=color, tooltip=tooltip).add_params(pick, *dropdowns)]
    if not whole.is_empty():
        layers.append(only_chosen(alt, alt.Chart(whole), dropdowns).mark_rule(
            strokeDash=[6, 4]).encode(
            y="shown:Q", color=when_fits(alt, color, INFEASIBLE),
            opacity=highlight(alt, pick),
            tooltip=[alt.Tooltip("prompts:N", title="prompts"),
                     alt.Tooltip("itl_max_s:Q", title="unchunked longest gap (s)",
                                 format=",.4~g"),
                     alt.Tooltip("memory:N", title="KV cache")]).properties(name="unchunked"))
    return alt.layer(*layers).properties(
        width=WIDTH, height=HEIGHT,
        title=title_params(alt, title, chart_slice,
                     "lines: chunked prefill; dashed rules: whole prompts (continuous "
                     "batching), the stall chunking removes", *_kv_note(data), grid=grid))


def _optimize_slice(frame: Frame, fixed, axes, metrics: Sequence[str], grid) -> ChartSlice:
    return _serving_slice(frame, {"gpu": 6, "model": 6, "workload": 6, "slo_ttft": 6,
                              "slo_tpot": 6, "max_batch": 24, "token_budget": 24},
                      ["status", "reason", *metrics], fixed=fixed, axes=axes, grid=grid)


def _search_groups(data) -> list[str]:
    """The columns that tell one search (a GPU, model, workload and SLO) from another."""
    return [c for c in SERVING_DROPDOWNS if c in data.columns]


def _with_best(pl, data):
    """`best`: the candidate `sweep optimize` picks in each search (highest rate, then
    goodput; ties to the smaller batch and budget); `shade`: the rate's place between the
    search's lowest and highest sustained rates (0 to 1)."""
    groups = _search_groups(data)
    sustained = pl.col("status") == "sustained"
    # one rank over all rows, taken as a column first: ranking inside `.over(groups)`
    # would restart it in each search, and only the overall best would match
    ranked = data.with_columns(_order=pl.struct(
        -pl.col("rate").fill_nan(None), -pl.col("goodput_tokens_per_s"), "max_batch",
        "token_budget").rank("ordinal"))
    order = pl.col("_order")
    low, high = pl.col("rate").filter(sustained).min(), pl.col("rate").filter(sustained).max()

    def within(expression):
        return expression.over(groups) if groups else expression

    return ranked.with_columns(
        best=(sustained & (within(order.filter(sustained).min()) == order)).fill_null(False),
        shade=((pl.col("rate") - within(low)) / (within(high) - within(low))).fill_nan(1.0)
    ).drop("_order")


def pareto_frontier_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                          axes: Dimensions | None = None,
                          grid: Mapping[str, Any] | None = None) -> alt.TopLevelMixin:
    """Tokens/s per GPU against tokens/s per user for every sustained (max batch, budget),
    the Pareto frontier joined, the highest sustained rate starred."""
    import polars as pl

    alt = import_altair()
    title = "Pareto frontier: throughput per GPU vs speed per user"
    metrics = ["rate", "tokens_per_s_per_gpu", "per_user_tokens_per_s", "goodput_tokens_per_s",
               "ttft_p90_s", "tpot_p90_s"]
    if not has_columns(frame, "tokens_per_s_per_gpu", "per_user_tokens_per_s", "max_batch"):
        return note_chart(alt, title, "no optimize results (tokens_per_s_per_gpu) here")
    chart_slice = _optimize_slice(frame, fixed, axes, metrics, grid)
    data = chart_slice.data.filter((pl.col("status") == "sustained")
                                   & positive(pl, "per_user_tokens_per_s",
                                               "tokens_per_s_per_gpu"))
    if data.is_empty():
        return note_chart(alt, title, "no candidate sustains the objective in these results")
    groups = _search_groups(data)
    data = data.sort([*groups, "per_user_tokens_per_s", "tokens_per_s_per_gpu"],
                     descending=[False] * len(groups) + [True, True])
    best_so_far = pl.col("tokens_per_s_per_gpu").cum_max().shift(1)
    if groups:
        best_so_far = best_so_far.over(groups)
    data = _with_best(pl, data).with_columns(
        frontier=best_so_far.is_null() | (pl.col("tokens_per_s_per_gpu") > best_so_far))
    dropdowns = dropdown_params(alt, chart_slice, *SERVING_DROPDOWNS)
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
    base = only_chosen(alt, alt.Chart(data), dropdowns)
    dots = base.mark_point(size=60, filled=True, opacity=0.75).encode(
        x=x, y=y, tooltip=tooltip,
        color=alt.Color("max_batch:O", title="Max batch", scale=alt.Scale(scheme="viridis")),
        shape=alt.Shape("token_budget:N", title="Token budget")).add_params(
        *dropdowns).properties(name="candidates")
    front = base.transform_filter(alt.datum.frontier).mark_line(color="#d62728").encode(
        x=x, y=y, tooltip=tooltip).properties(name="frontier")
    star = base.transform_filter(alt.datum.best).mark_point(
        shape="diamond", size=220, filled=False, color="#d62728", strokeWidth=2).encode(
        x=x, y=y, tooltip=tooltip).properties(name="best")
    return alt.layer(dots, front, star).resolve_scale(color="independent").properties(
        width=WIDTH, height=HEIGHT,
        title=title_params(alt, title, chart_slice,
                     "points: every (max batch, budget) at its sustained rate; red line: the "
                     "frontier no other point beats on both; diamond: the highest rate", grid=grid))


def rate_heatmap_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                       axes: Dimensions | None = None,
                       grid: Mapping[str, Any] | None = None) -> alt.TopLevelMixin:
    """The sustained request rate over max batch x token budget; rejected cells grey with
    the letter of their reason, the best one outlined."""
    import polars as pl

    from rooftui.sweeps.optimize import REASONS

    alt = import_altair()
    title = "Sustained request rate under the SLO"
    metrics = ["rate", "capacity_rate", "goodput_tokens_per_s", "ttft_p90_s", "tpot_p90_s"]
    if not has_columns(frame, "status", "max_batch", "token_budget"):
        return note_chart(alt, title, "no optimize results (status, max_batch) here")
    chart_slice = _optimize_slice(frame, fixed, axes, metrics, grid)
    data = chart_slice.data
    if data.is_empty():
        return note_chart(alt, title, "no candidate in these results")
    data = _with_best(pl, data).with_columns(
        why=pl.col("reason").replace_strict({k: v[1] for k, v in REASONS.items()},
                                            default=pl.col("reason")),
        letter=pl.col("reason").replace_strict({k: v[2] for k, v in REASONS.items()},
                                               default=""),
        bright=pl.col("shade") > 0.6)  # viridis is bright at the top: dark text there
    dropdowns = dropdown_params(alt, chart_slice, *SERVING_DROPDOWNS)
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
    base = only_chosen(alt, alt.Chart(data), dropdowns)
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
        title=title_params(alt, title, chart_slice,
                     "requests/s at which the objective still holds; red frame: the highest",
                     *([f"grey, rejected: {legend}"] if legend else []), grid=grid))


def ttft_vs_cache_capacity_chart(frame: Frame, *, fixed: Mapping[str, Any] | None = None,
                                 axes: Dimensions | None = None,
                                 grid: Mapping[str, Any] | None = None) -> alt.TopLevelMixin:
    """TTFT p90 vs the prefix cache's HBM capacity, one colour per policy, one dash per
    set of lower tiers (CPU and SSD GB), with the prefill hit rate in the tooltip; the
    capacity axis is symmetric-logarithmic so that 0 (no HBM cache) shows."""
    import polars as pl

    alt = import_altair()
    title = "TTFT p90 vs prefix-cache capacity"
    if not has_columns(frame, "cache_capacity_gb", "ttft_p90_s", "prefix_hit_rate"):
        return note_chart(alt, title, "no simulations over a cache_capacity_gb axis here")
    chart_slice = _serving_slice(
        frame, {"gpu": 6, "model": 6, "workload": 8, "policy": 3, "cpu_tier_gb": 4,
                "ssd_tier_gb": 4, "cache_capacity_gb": 32},
        ["ttft_p90_s", "ttft_p50_s", "tpot_p90_s", "prefix_hit_rate", *KV_FIT_COLUMNS],
        fixed=fixed, axes=axes, grid=grid, menus=SERVING_MENUS)
    data = with_batch_fit(pl, chart_slice.data, chart_slice.fixed)
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
        return note_chart(alt, title, "no TTFT in these results")
    dropdowns = dropdown_params(alt, chart_slice, "gpu", "model", "workload") + menu_params(
        alt, chart_slice)
    pick = legend_selection(alt, "policy")
    tooltip = [alt.Tooltip("policy:N"), alt.Tooltip("tiers:N", title="tiers"),
               alt.Tooltip("cache_capacity_gb:Q", title="HBM cache (GB)", format=",.3~g"),
               alt.Tooltip("ttft_p90_s:Q", title="TTFT p90 (s)", format=",.4~g"),
               alt.Tooltip("ttft_p50_s:Q", title="TTFT p50 (s)", format=",.4~g"),
               alt.Tooltip("tpot_p90_s:Q", title="TPOT p90 (s)", format=",.4~g"),
               alt.Tooltip("prefix_hit_rate:Q", title="prefill tokens cached", format=".1%"),
               alt.Tooltip("memory:N", title="KV cache")]
    lines = _fitting_lines(
        alt, only_chosen(alt, alt.Chart(data), dropdowns), "ttft_p90_s", "ttft_lines", pick,
        x=alt.X("cache_capacity_gb:Q", title="HBM for the prefix cache (GB per GPU)",
                scale=alt.Scale(type="symlog")),
        y=alt.Y("shown:Q", title="TTFT p90 (s)", scale=alt.Scale(type="log"),
                axis=alt.Axis(format="~g")),
        color=alt.Color("policy:N", title="Policy",
                        scale=palette(alt, sorted(data["policy"].unique()))),
        strokeDash=alt.StrokeDash("tiers:N", title="Tiers below HBM"),
        detail="tiers:N", tooltip=tooltip).add_params(pick, *dropdowns)
    return lines.properties(width=WIDTH, height=HEIGHT, title=title_params(
        alt, title, chart_slice, "capacity 0: no HBM cache (lower tiers still hold blocks); "
        "TTFT axis logarithmic", *_kv_note(data)))
