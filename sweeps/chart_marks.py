"""Pieces every chart shares: the palette, dropdowns bound to Vega parameters, legend
selections, titles that name what the chart holds, and the reason a point does not fit.

The step charts take the Vega-Lite dicts (`dropdowns`, `menus`, `chosen_filters`,
`title_spec`, `palette_scale`, `capped_steps`); the serving charts take the same as
altair objects (`dropdown_params`, ..., `capped`), altair imported inside the functions
that use it (`import_altair`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rooftui.sweeps.chart_slices import LABELS, OWN, ChartSlice, show
from rooftui.sweeps.chart_table import Names, Table
from rooftui.sweeps.table_text import float_texts, round_sig_figs
from rooftui.sweeps.vega_spec import VegaChart, select_param, title
from rooftui.sweeps.vega_spec import note_chart as note_spec

if TYPE_CHECKING:
    import altair as alt
    import polars as pl

    from rooftui.sweeps.chart_slices import Frame

WIDTH, HEIGHT = 560, 360

def spaced_labels(table: Table, column: str, factor: float) -> Table:
    """The rows of `table` (sorted by `column`) whose value is at least `factor` times
    the last one kept: labels on a log axis that would otherwise print over each other."""
    keep, last = [], 0.0
    for value in table[column].tolist():
        keep.append(value >= factor * last)
        last = value if keep[-1] else last
    return table.filter(np.asarray(keep, dtype=bool))


def import_altair():
    """altair, its debug mode off: in it every schema object validates itself when made
    (~10 % of building the catalogue; the tests validate every spec the catalogue
    builds, and a chart's file is written without validation anyway)."""
    import altair as alt

    alt.utils.schemapi.disable_debug_mode()
    return alt


def dropdowns(chart_slice: ChartSlice, *axes: str,
              initial: Mapping[str, Any] | None = None) -> list[dict]:
    """A select box for each axis with more than one kept value (default: `initial`'s
    value, else the first), as a Vega-Lite parameter."""
    params = []
    for axis in axes:
        options = chart_slice.values(axis)
        if len(options) > 1:
            params.append(select_param(f"{axis}_choice", (initial or {}).get(axis, options[0]),
                                       options, f"{LABELS[axis]} "))
    return params


def menus(chart_slice: ChartSlice) -> list[dict]:
    """A select box for each held axis offered as a menu, open on its representative (a
    structure axis: on "own", each model's own value, then the values)."""
    return [select_param(f"{axis}_choice", value, [OWN, *chart_slice.values(axis)]
                         if value == OWN else chart_slice.values(axis), f"{LABELS[axis]} ")
            for axis, value in chart_slice.menus.items()]


def chosen_filters(params: Sequence[dict]) -> list[dict]:
    """Filters keeping the rows whose dropdown axes equal the current choices ("own":
    the rows at each model's own value)."""
    filters = []
    for param in params:
        name = param["name"]
        axis = name.removesuffix("_choice")
        filters.append({"filter": f"{name} == '{OWN}' ? datum['{axis}_own'] "
                                  f": datum['{axis}'] == {name}"})
    return filters


def _altair_params(alt, params: Sequence[dict]) -> list:
    return [alt.param(name=p["name"], value=p["value"], bind=alt.binding_select(
        options=p["bind"]["options"], name=p["bind"]["name"])) for p in params]


def dropdown_params(alt, chart_slice: ChartSlice, *axes: str,
                    initial: Mapping[str, Any] | None = None) -> list:
    """`dropdowns` as altair parameters."""
    return _altair_params(alt, dropdowns(chart_slice, *axes, initial=initial))


def menu_params(alt, chart_slice: ChartSlice) -> list:
    """`menus` as altair parameters."""
    return _altair_params(alt, menus(chart_slice))


def only_chosen(alt, chart, params: list):
    """`chart` keeping the rows whose dropdown axes equal the current choices ("own":
    the rows at each model's own value). A parameter's value is an expression here, so
    every filter takes the "own" form (as the dict charts write it)."""
    for step in chosen_filters([{"name": p.name} for p in params]):
        chart = chart.transform_filter(step["filter"])
    return chart


def legend_selection(alt, axis: str):
    return alt.selection_point(name=f"{axis}_legend", fields=[axis], bind="legend")


def highlight(alt, selection, *, on: float = 1.0, off: float = 0.12):
    """Opacity `on` for the rows `selection` holds, else `off`: the channel made at
    once (`alt.when` builds a dict that altair then matches against its schema, ~5 ms
    a use)."""
    return alt.OpacityValue(value=off, condition=[{"param": selection.name, "value": on}])


def when_fits(alt, channel, otherwise: str):
    """`channel` (a colour or fill field) where the row fits, else the value
    `otherwise`: `alt.condition` without its validation."""
    kind = getattr(alt, f"{type(channel).__name__}Value")
    return kind(value=otherwise,
                condition={"test": "datum.fits", **channel.to_dict(validate=False)})


def title_spec(text: str, chart_slice: ChartSlice, *notes: str,
               grid: Mapping[str, Any] | None = None, menus: Sequence[str] = ()) -> dict:
    """The chart's title with what it is about (`about`) and its subtitle: held values,
    then `notes` (what it reduces over, how to read it)."""
    return title(text, [about(chart_slice, grid, menus), *chart_slice.subtitle(*notes)])


def title_params(alt, text: str, chart_slice: ChartSlice, *notes: str,
                 grid: Mapping[str, Any] | None = None, menus: Sequence[str] = ()):
    """`title_spec` as altair's title."""
    return alt.TitleParams(**title_spec(text, chart_slice, *notes, grid=grid, menus=menus))


ABOUT = ("model", "gpu", "tp", "workload", "slo_ttft", "slo_tpot")


def about(chart_slice: ChartSlice, grid: Mapping[str, Any] | None,
          menus: Sequence[str] = ()) -> str:
    """One line naming the model, GPU, GPUs per replica, profile, workload and SLOs the
    chart draws: held ones by value, menus by the value they open on, others as 'each'
    (a legend, panels or colours tell them apart)."""
    present = set(chart_slice.data.columns) | set(chart_slice.fixed)
    parts = []
    for axis in ABOUT:
        name = LABELS[axis] if axis != "tp" else "TP"
        if axis in chart_slice.fixed:
            parts.append(f"{name} {show(chart_slice.fixed[axis])}")
        elif len(chart_slice.values(axis)) == 1:
            parts.append(f"{name} {show(chart_slice.values(axis)[0])}")
        elif axis in menus and chart_slice.values(axis):
            parts.append(f"{name} {show(chart_slice.values(axis)[0])} (menu)")
        elif axis in chart_slice.menus:
            parts.append(f"{name} {show(chart_slice.menus[axis])} (menu)")
        elif axis in present:
            parts.append(f"each {name}")
        elif axis == "tp":
            parts.append("TP 1")
    spec = (grid or {}).get("spec")
    profile = spec.get("profile") if isinstance(spec, dict) else None
    if isinstance(profile, str) and profile:
        parts.append(f"profile {profile}")
    return " · ".join(parts)


# Okabe and Ito's eight colours: told apart with any colour vision
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
             "#000000"]
INFEASIBLE = "#9a9a9a"


def palette_scale(values: Sequence) -> dict:
    """A colour-blind-safe scale for a nominal field with `values` (Okabe-Ito, then
    tableau10 past eight)."""
    values = list(values)
    if len(values) <= len(OKABE_ITO):
        return {"domain": values, "range": OKABE_ITO[:len(values)]}
    return {"domain": values, "scheme": "tableau10"}


def palette(alt, values: Sequence) -> Any:
    """`palette_scale` as altair's scale."""
    return alt.Scale(**palette_scale(values))


def byte_texts(values: np.ndarray) -> list[str]:
    """Bytes as short text: '1.1 TB', '141 GB', '8.5 GB' (2 significant digits, whole
    GB from 10 GB), each value's."""
    values = np.asarray(values, dtype=np.float64)
    gigabytes = values / 1e9
    terabytes = float_texts(round_sig_figs(values / 1e12, 2))
    small = float_texts(round_sig_figs(gigabytes, 2))
    whole = np.round(gigabytes).tolist()
    return [f"{tera} TB" if value >= 1e12 else f"{int(rounded_gb)} GB" if giga >= 10
            else f"{few} GB" for value, giga, tera, few, rounded_gb in zip(
                values.tolist(), gigabytes.tolist(), terabytes, small, whole, strict=True)]


# what a chart's memory note is made of; `memory` itself when the rows hold it already
MEMORY_COLUMNS = ("fits", "weight_bytes", "kv_bytes", "memory_reserve_gb", "tp", "memory")


def with_memory_note(data: Table, grid: Mapping[str, Any] | None) -> Table:
    """`data` with `memory` last: why a row does not fit ("weights 141 GB > 80 GB: needs
    TP ≥ 2", "KV 1.1 TB > 65 GB free") or what it uses when it does. Needs `fits` and the
    byte columns; each row's GPU's memory comes from the grid's spec (or the shipped
    one), unknown without a gpu column. Rows that hold their note already
    (`render_charts` notes the rows `sweep run` cut once, for all its charts) keep it."""
    if "memory" in data.columns:
        return data.select(*(c for c in data.columns if c != "memory"), "memory")
    if "fits" not in data.columns or "weight_bytes" not in data.columns:
        return data.with_columns(memory="")
    # the note is text: made once per distinct input, then looked up
    inputs = [c for c in ("gpu", "fits", "weight_bytes", "kv_bytes", "memory_reserve_gb", "tp")
              if c in data.columns]
    firsts, inverse = data.unique_index(inputs)
    notes = _memory_notes(data.take(firsts), grid)
    return data.with_columns(memory=Names.of(notes)[inverse])


def _memory_notes(data: Table, grid: Mapping[str, Any] | None) -> list[str]:
    """Each row's note (`with_memory_note`)."""
    from rooftui.sweeps.chart_slices import gpu_memory_bytes

    height = data.height
    gpus = data["gpu"].tolist() if "gpu" in data.columns else [None] * height
    memory = {g: gpu_memory_bytes(grid, str(g)) if g is not None else None
              for g in dict.fromkeys(gpus)}
    capacity = np.array([math.nan if memory[g] is None else memory[g] for g in gpus],
                        dtype=np.float64)
    reserve = (np.nan_to_num(data["memory_reserve_gb"], nan=0.0)
               if "memory_reserve_gb" in data.columns else np.zeros(height))
    tp = np.nan_to_num(data["tp"], nan=1.0) if "tp" in data.columns else np.ones(height)
    weights = data["weight_bytes"]
    kv = data["kv_bytes"] if "kv_bytes" in data.columns else np.full(height, math.nan)
    room = capacity - reserve * 1e9  # what weights + KV may use
    with np.errstate(divide="ignore", invalid="ignore"):
        needs = np.ceil(weights * tp / room).tolist()
        texts = [byte_texts(v) for v in (weights, kv, room, room - weights)]
        # 141.1 GB of weights on a 141 GB GPU: one decimal where whole GB would read equal
        tenths = [float_texts(np.round(v / 1e9, 1)) for v in (weights, room)]
    notes = []
    for i, (fits, size, space, need) in enumerate(zip(
            data["fits"].tolist(), weights.tolist(), room.tolist(), needs, strict=True)):
        weights_text, kv_text, room_text, free_text = (t[i] for t in texts)
        if fits:
            notes.append(f"fits: weights {weights_text} + KV {kv_text}" + (
                f" of {room_text}" if space == space else ""))
        elif space != space:  # NaN: the GPU's memory is unknown
            notes.append("exceeds GPU memory")
        elif size >= space:
            if weights_text == room_text:
                weights_text, room_text = f"{tenths[0][i]} GB", f"{tenths[1][i]} GB"
            needed = f"{int(need)}" if math.isfinite(need) and need > 0 else "more"
            notes.append(f"weights {weights_text} > {room_text}: needs TP ≥ {needed}")
        else:
            notes.append(f"KV {kv_text} > {free_text} free")
    return notes


KV_FIT_COLUMNS = ("kv_sequences", "kv_free_bytes", "sequence_tokens_mean")


def with_batch_fit(pl, data: pl.DataFrame, held: Mapping[str, Any]) -> pl.DataFrame:
    """Simulate rows with `fits` (the max batch is one the KV cache can hold at the
    requests' mean length) and `memory`, why not ("max batch 256 > 119 sequences fit in
    65 GB free KV at 4,096 tokens") or what it holds; a max batch the chart holds comes
    from `held` (a slice's `fixed`). Rows without the KV columns (an older folder,
    optimize results) fit, with no note."""
    if "max_batch" not in data.columns and isinstance(held.get("max_batch"), int):
        data = data.with_columns(max_batch=pl.lit(held["max_batch"], dtype=pl.Int64))
    if not all(column in data.columns for column in ("max_batch", *KV_FIT_COLUMNS)):
        return data.with_columns(fits=pl.lit(True), memory=pl.lit(""))
    keys = ["max_batch", *KV_FIT_COLUMNS]
    cases = data.select(keys).unique()  # a few distinct cases: their text made in Python
    notes = []
    for batch, sequences, free, tokens in cases.iter_rows():
        held = (f"{sequences:,} sequences fit in {_gigabytes(free)} free KV "
                f"at {round(tokens):,} tokens")
        notes.append(f"fits: max batch {batch:,} ≤ {held}" if batch <= sequences
                     else f"max batch {batch:,} > {held}")
    cases = cases.with_columns(fits=pl.col("max_batch") <= pl.col("kv_sequences"),
                               memory=pl.Series(notes, dtype=pl.String))
    return data.join(cases, on=keys, how="left", nulls_equal=True, maintain_order="left")


def _gigabytes(value: float) -> str:
    """Bytes as 'N GB' ('1.1 TB' past a thousand), as `byte_texts` writes them."""
    if value >= 1e12:
        return f"{value / 1e12:.2g} TB"
    return f"{value / 1e9:.0f} GB" if value >= 10e9 else f"{value / 1e9:.2g} GB"


def capped_steps(field: str, into: str, *, groupby: Sequence[str] = ()) -> list[dict]:
    """Transforms adding `into`: `field` where the row fits, else `field` cut to the
    largest value of the rows that fit (of the same `groupby`, after the menus'
    filters): rows that do not fit never stretch the axis; they sit at its edge, their
    value in the tooltip."""
    cap = f"{into}_cap"
    return [{"calculate": f"datum.fits ? datum.{field} : null", "as": f"{into}_fit"},
            {"joinaggregate": [{"op": "max", "field": f"{into}_fit", "as": cap}],
             "groupby": list(groupby)},
            {"calculate": f"datum.fits || !isValid(datum.{cap}) ? datum.{field} "
                          f": min(datum.{field}, datum.{cap})", "as": into}]


def capped(alt, chart, field: str, into: str, *, groupby: Sequence[str] = ()):
    """`chart` with `capped_steps`."""
    fit, (aggregate,), cut = (step.get("joinaggregate", step) for step in capped_steps(
        field, into, groupby=groupby))
    return chart.transform_calculate(**{fit["as"]: fit["calculate"]}).transform_joinaggregate(
        **{aggregate["as"]: f"max({aggregate['field']})"}, groupby=list(groupby)
    ).transform_calculate(**{cut["as"]: cut["calculate"]})


def empty_chart(text: str, reason: str) -> VegaChart:
    """A chart that says why there is nothing to draw, rather than failing the render."""
    return note_spec(text, reason, WIDTH)


PART_LABELS = {"gemm": "GEMM (weights)", "attention": "attention (KV)", "step": "whole step",
               "activations": "activations", "communication": "communication"}


def note_chart(alt, text: str, reason: str) -> alt.TopLevelMixin:
    """`empty_chart`, its message held as a data set like every chart's rows."""
    import polars as pl

    return alt.Chart(pl.DataFrame({"message": [reason]})).mark_text(size=14).encode(
        text="message:N").properties(title=text, width=WIDTH, height=80, name="note")


def columns_of(frame: Frame | Table) -> list[str]:
    if isinstance(frame, Table):
        return frame.columns
    return frame.lazy().collect_schema().names()


def has_columns(frame: Frame, *columns: str) -> bool:
    present = columns_of(frame)
    return all(column in present for column in columns)
