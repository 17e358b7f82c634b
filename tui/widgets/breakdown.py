"""Where the step's time goes: each part's FLOPs, bytes, time, intensity and bound, then,
on a cluster layout, each collective's bytes, time and link, the pipeline bubble and the
busiest expert GPU, in `sweep point`'s units and words."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from rooftui.core import units
from rooftui.core.point import host_row, link_label
from rooftui.tui.figures import ExplorerFigures


def breakdown_rows(report: dict) -> list[tuple[str, ...]]:
    """One row per part, then the whole step, formatted with units."""
    parts = list(report["parts"].items())
    if (host := host_row(report)) is not None:  # an overlapping scheduler's host time
        parts.append(("host", host))
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
COLLECTIVE_HEADINGS = ("collective", "bytes", "time", "link")
COLLECTIVE_RIGHT_ALIGNED = {1, 2}


def collective_rows(report: dict) -> list[tuple[str, ...]]:
    """One row per collective: its bytes per GPU, time and the link it crosses (and the
    all-reduce protocol that timed it, under a profile with two)."""
    return [(name, units.si(link["bytes"], "B"), units.seconds(link["time_s"]),
             link_label(link)) for name, link in report["collectives"].items()]


def layout_lines(report: dict) -> list[str]:
    """The pipeline bubble and the busiest expert GPU, where the layout has them."""
    layout, moe = report["parallelism"], report["moe"]
    lines = []
    if layout["pp"] > 1:
        lines.append(f"pipeline bubble ×{layout['bubble']:.3f} ({layout['micro_batches']} "
                     f"micro-batches over {layout['pp']} stages: (M + pp − 1) / M)")
    if moe and "busiest_gpu_pairs_per_layer" in moe:
        lines.append(f"busiest expert GPU {moe['busiest_gpu_pairs_per_layer']:,.1f} "
                     f"(token, expert) pairs per MoE layer; mean "
                     f"{moe['mean_gpu_pairs_per_layer']:,.1f}")
    return lines


def aligned(rows: list[tuple[str, ...]], right: set[int]) -> list[str]:
    """The rows as lines of columns padded to the widest cell, numbers right-aligned."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return [" ".join(cell.rjust(width) if column in right else cell.ljust(width)
                     for column, (cell, width) in enumerate(zip(row, widths, strict=True)))
            .rstrip() for row in rows]


class Breakdown(Static):
    """The parts and the whole step as aligned text (no table measuring its cells on
    every change)."""

    def show_figures(self, figures: ExplorerFigures) -> None:
        report = figures.report
        lines = aligned([HEADINGS, *breakdown_rows(report)], RIGHT_ALIGNED)
        bold = {0, len(lines) - 1}  # headings and the whole step
        if report["collectives"]:
            bold.add(len(lines) + 1)
            lines += ["", *aligned([COLLECTIVE_HEADINGS, *collective_rows(report)],
                                   COLLECTIVE_RIGHT_ALIGNED), *layout_lines(report)]
        text = Text(no_wrap=True, overflow="ellipsis")
        for index, line in enumerate(lines):
            text.append(("\n" if index else "") + line, "bold" if index in bold else "")
        # a layout pass only when the number of lines changes (activation traffic, a
        # cluster layout)
        layout, self._row_count = len(lines) != self._row_count, len(lines)
        self.update(text, layout=layout)

    _row_count = 0
