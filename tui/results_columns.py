"""How the Results table heads and prints a column: headline metrics under short names
with their unit, in human scale ("4.52 ms", "12.3 k"); everything else under its own
name. Plain values (no polars), so the view's widgets load without it."""

from __future__ import annotations

import math
from collections.abc import Callable

from rooftui.core import units

# Metrics shown right after the axes that vary, in this order, when present: the step
# grid's, then the simulate and optimize grids'.
HEADLINE_METRICS = ("step_time_s", "tokens_per_s", "per_user_tokens_per_s", "bound", "fits",
                    "rate", "status", "reason", "goodput_tokens_per_s",
                    "tokens_per_s_per_gpu", "ttft_p90_s", "tpot_p90_s", "slo_attainment")


def count(value: float) -> str:
    """A rate or a count in three significant digits with an SI prefix: '12.3 k'."""
    return units.si(value, "").strip()


def seconds(value: float) -> str:
    return units.seconds(value)


def share(value: float) -> str:
    return units.percent(value)


# column -> (heading, how a value prints)
DISPLAY: dict[str, tuple[str, Callable[[float], str]]] = {
    "step_time_s": ("step", seconds),
    "tokens_per_s": ("tok/s", count),
    "per_user_tokens_per_s": ("tok/s/user", count),
    "tokens_per_s_per_gpu": ("tok/s/GPU", count),
    "goodput_tokens_per_s": ("goodput tok/s", count),
    "throughput_tokens_per_s": ("tok/s", count),
    "rate": ("req/s", count),
    "ttft_p90_s": ("TTFT p90", seconds),
    "tpot_p90_s": ("TPOT p90", seconds),
    "slo_attainment": ("SLO met", share),
    "attention_share": ("attention", share),
}


def heading(column: str) -> str:
    return DISPLAY[column][0] if column in DISPLAY else column


def cell(value: object, column: str | None = None) -> str:
    """A value as the table and the status line print it."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if column in DISPLAY and isinstance(value, int | float):
        return DISPLAY[column][1](value)
    if column is not None and isinstance(value, float):
        if column.endswith("per_s"):
            return count(value)
        if column.endswith("_s"):
            return units.seconds(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        # four significant digits, without exponents for the usual magnitudes
        return f"{value:,.0f}" if 1e4 <= abs(value) < 1e15 else f"{value:.4g}"
    return str(value)
