"""The headline numbers of the step, each with its unit, in a compact two-column grid."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from rooftui.core import units
from rooftui.core.intervals import Interval


def _max_batch(report: dict) -> str:
    if report["max_batch"] is None:
        return "unbounded"
    return f"{report['max_batch']:,}" + ("" if report["fits"] else " (exceeded)")


def _step_time(report: dict, interval: Interval | None) -> str:
    """The step time, with the profile's interval when it has one (a fitted profile)."""
    time = units.seconds(report["step_time_s"])
    bounds = interval.around("step", report["step_time_s"]) if interval else None
    if bounds is None:
        return time
    return (f"{time} ({100 * interval.level:g} %: {units.seconds(bounds[0])}-"
            f"{units.seconds(bounds[1])})")


def key_figures(report: dict, interval: Interval | None = None) -> list[tuple[str, str]]:
    """(label, value with unit) pairs, in reading order; `interval` is the profile's."""
    return [
        ("step time", _step_time(report, interval)),
        ("bound", report["bound"]),
        ("ridge", units.intensity(report["ridge"])),
        ("tokens/s", units.rate(report["tokens_per_s"])),
        ("intensity", units.intensity(report["intensity"])),
        ("per user", units.rate(report["per_user_tokens_per_s"])),
        ("I ceiling", units.intensity(report["intensity_ceiling"])),
        ("MFU / MBU", f"{units.percent(report['mfu'])} / {units.percent(report['mbu'])}"),
        ("tok/s ceil", units.rate(report["throughput_ceiling_tokens_per_s"])),
        ("attention", units.percent(report["attention_share"])),
        ("KV/token", units.si(report["kv_bytes_per_token"], "B")),
        ("max batch", _max_batch(report)),
    ]


class KeyFigures(Static):
    """Step time, tokens/s, ridge, ceilings, KV per token, memory limit, MFU and MBU, in
    two columns of label and value.

    Always six rows (fixed in the CSS), laid out here as padded text: an update repaints
    without a layout pass or a table measuring its cells (this runs on every change)."""

    def show_report(self, report: dict, interval: Interval | None = None) -> None:
        pairs = key_figures(report, interval)
        left, right = pairs[::2], pairs[1::2]
        widths = [max(len(text) for text in column)
                  for side in (left, right) for column in zip(*side, strict=True)]
        text = Text(no_wrap=True, overflow="ellipsis")
        for row, ((label_a, value_a), (label_b, value_b)) in enumerate(
                zip(left, right, strict=True)):
            if row:
                text.append("\n")
            text.append(label_a.ljust(widths[0] + 1), "dim")
            text.append(value_a.ljust(widths[1] + 1), "bold")
            text.append(label_b.ljust(widths[2] + 1), "dim")
            text.append(value_b, "bold")
        self.update(text, layout=False)
