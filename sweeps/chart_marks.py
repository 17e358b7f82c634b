"""Pieces every chart shares: the palette, dropdowns bound to Vega parameters, legend
selections, titles that name what the chart holds, and the reason a point does not fit.

altair is imported inside the functions that use it (`import_altair`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rooftui.sweeps.chart_slices import LABELS, ChartSlice

if TYPE_CHECKING:
    import altair as alt
    import polars as pl

    from rooftui.sweeps.chart_slices import Frame

WIDTH, HEIGHT = 560, 360

def spaced_labels(frame: pl.DataFrame, column: str, factor: float) -> pl.DataFrame:
    """The rows of `frame` (sorted by `column`) whose value is at least `factor` times
    the last one kept: labels on a log axis that would otherwise print over each other."""
    keep, last = [], 0.0
    for value in frame[column]:
        keep.append(value >= factor * last)
        last = value if keep[-1] else last
    return frame.filter(keep)


def import_altair():
    import altair as alt

    return alt


def dropdown_params(alt, chart_slice: ChartSlice, *axes: str) -> list:
    """A select box for each axis with more than one kept value (default: the first)."""
    params = []
    for axis in axes:
        options = chart_slice.values(axis)
        if len(options) > 1:
            params.append(alt.param(name=f"{axis}_choice", value=options[0],
                                    bind=alt.binding_select(options=options,
                                                            name=f"{LABELS[axis]} ")))
    return params


def only_chosen(alt, chart, params: list):
    """`chart` keeping the rows whose dropdown axes equal the current choices."""
    for param in params:
        chart = chart.transform_filter(alt.datum[param.name.removesuffix("_choice")] == param)
    return chart


def legend_selection(alt, axis: str):
    return alt.selection_point(name=f"{axis}_legend", fields=[axis], bind="legend")


def highlight(alt, selection, *, on: float = 1.0, off: float = 0.12):
    return alt.when(selection).then(alt.value(on)).otherwise(alt.value(off))


def title_params(alt, text: str, chart_slice: ChartSlice, *notes: str):
    return alt.TitleParams(text=text, subtitle=chart_slice.subtitle(*notes), anchor="start")


def empty_chart(alt, text: str, reason: str) -> alt.TopLevelMixin:
    """A chart that says why there is nothing to draw, rather than failing the render."""
    return alt.Chart(alt.Data(values=[{"message": reason}])).mark_text(size=14).encode(
        text="message:N").properties(title=text, width=WIDTH, height=80)


FITS = "datum.fits ? 'fits' : 'exceeds memory'"
PART_LABELS = {"gemm": "GEMM (weights)", "attention": "attention (KV)", "step": "whole step",
               "activations": "activations", "communication": "communication"}


def note_chart(alt, text: str, reason: str) -> alt.TopLevelMixin:
    """`_empty`, its message held as a data set like every chart's rows."""
    import polars as pl

    return alt.Chart(pl.DataFrame({"message": [reason]})).mark_text(size=14).encode(
        text="message:N").properties(title=text, width=WIDTH, height=80)


def has_columns(frame: Frame, *columns: str) -> bool:
    present = frame.lazy().collect_schema().names()
    return all(column in present for column in columns)
