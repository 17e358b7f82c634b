"""Where the step's time goes: each part's FLOPs, bytes, time, intensity and bound."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from rooftui.core import units
from rooftui.tui.figures import ExplorerFigures


def breakdown_rows(report: dict) -> list[tuple[str, ...]]:
    """One row per part, then the whole step, formatted with units."""
    parts = list(report["parts"].items())
    parts.append(("step", {"flops": report["flops"], "bytes": report["bytes"],
                           "time_s": report["step_time_s"], "intensity": report["intensity"],
                           "bound": report["bound"]}))
    return [(name, units.si(part["flops"], "FLOP"), units.si(part["bytes"], "B"),
             units.seconds(part["time_s"]),
             "—" if part["intensity"] is None else f"{part['intensity']:,.1f}",
             part["bound"])
            for name, part in parts]


HEADINGS = ("part", "FLOPs", "bytes", "time", "FLOP/B", "bound")
RIGHT_ALIGNED = {1, 2, 3, 4}  # the numbers


class Breakdown(Static):
    """The parts and the whole step as aligned text (no table measuring its cells on
    every change)."""

    def show_figures(self, figures: ExplorerFigures) -> None:
        rows = [HEADINGS, *breakdown_rows(figures.report)]
        widths = [max(len(row[column]) for row in rows) for column in range(len(HEADINGS))]
        text = Text(no_wrap=True, overflow="ellipsis")
        for index, row in enumerate(rows):
            cells = [cell.rjust(width) if column in RIGHT_ALIGNED else cell.ljust(width)
                     for column, (cell, width) in enumerate(zip(row, widths, strict=True))]
            line = " ".join(cells).rstrip()
            bold = index == 0 or index == len(rows) - 1  # headings and the whole step
            text.append(("\n" if index else "") + line, "bold" if bold else "")
        # a layout pass only when the number of parts changes (activation traffic)
        layout, self._row_count = len(rows) != self._row_count, len(rows)
        self.update(text, layout=layout)

    _row_count = 0
