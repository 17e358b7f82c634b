"""Any metric of a sweep against any axis, coloured by a third column, as character-cell
points. An axis whose values are all positive and span two decades or more is drawn on
a log scale (as log10 of the data, with value labels)."""

from __future__ import annotations

import numpy as np
from textual.widgets import Static
from textual_plot import NumericAxisFormatter

from rooftui.tui.widgets.log_axis import LogAxisFormatter, padded_bounds, to_log
from rooftui.tui.widgets.palette import MARKERS
from rooftui.tui.widgets.palette import SERIES as PALETTE
from rooftui.tui.widgets.plot_base import LabelledPlot

# Past the palette, values share a dim dot.
OTHER = "grey50"
OTHER_MARKER = "·"


def wants_log(values: np.ndarray) -> bool:
    finite = values[np.isfinite(values)]
    return finite.size > 0 and finite.min() > 0 and finite.max() / finite.min() >= 100


def scaled(values: np.ndarray) -> tuple[np.ndarray, bool]:
    """The values as plotted, and whether that is log10 of them."""
    values = np.asarray(values, dtype=np.float64)
    return (to_log(values), True) if wants_log(values) else (values, False)


class ResultsPlot(LabelledPlot):
    TITLE = "Plot"

    def draw(self, x_values: np.ndarray, y_values: np.ndarray, colours: list | None,
             *, x: str, y: str, colour: str | None, total: int) -> None:
        xs, log_x = scaled(x_values)
        ys, log_y = scaled(y_values)
        plot = self.plot
        plot.clear()
        plot.set_x_formatter(LogAxisFormatter() if log_x else NumericAxisFormatter())
        plot.set_y_formatter(LogAxisFormatter() if log_y else NumericAxisFormatter())
        plot.set_xlabel(x + (" (log)" if log_x else ""))
        plot.set_ylabel(y + (" (log)" if log_y else ""))
        self.query_one(".plot-title", Static).update(f"{y} vs {x}", layout=False)
        plot.set_xlimits(*limits(xs, log_x))
        plot.set_ylimits(*limits(ys, log_y))
        legend = []
        # each group its colour and its character (hires pixels carry only colour)
        hires, markers = None, MARKERS
        if colours is None:
            plot.scatter(xs, ys, marker=markers[0], marker_style=PALETTE[0], hires_mode=hires)
        else:
            labels = np.asarray([str(c) for c in colours])
            groups = [str(g) for g in sorted(set(colours), key=_order)]
            shown, others = groups[:len(PALETTE)], groups[len(PALETTE):]
            if others:  # drawn first, so the coloured points stay on top
                rest = np.isin(labels, others)
                plot.scatter(xs[rest], ys[rest], marker=OTHER_MARKER, marker_style=OTHER,
                             hires_mode=hires)
            for group, style, marker in zip(shown, PALETTE, markers, strict=False):
                mask = labels == group
                plot.scatter(xs[mask], ys[mask], marker=marker, marker_style=style,
                             hires_mode=hires)
                legend.append(f"[{style}]{marker}[/] {group}")
            if others:
                legend.append(f"[{OTHER}]{OTHER_MARKER}[/] {len(others)} more")
        sample = f"{xs.size:,} of {total:,} rows" if xs.size < total else f"{total:,} rows"
        colour_note = f" · colour: {colour}" if colour else ""
        self.set_legend(f"{sample}{colour_note}  " + "  ".join(legend))
        plot.paint_now()


def limits(values: np.ndarray, log: bool) -> tuple[float, float]:
    """Axis limits with a margin: 0.1 decade on a log axis, 5 % of the range otherwise."""
    if log:
        return padded_bounds(values, 0.1)
    low, high = padded_bounds(values, 0.0)
    margin = 0.05 * (high - low) or 0.5
    return low - margin, high + margin


def _order(value: object) -> tuple[int, object]:
    """Numbers before text, each in natural order."""
    return (0, value) if isinstance(value, int | float) else (1, str(value))
