"""Numbers with units, for people: SI prefixes, as datasheets print them."""

from __future__ import annotations

import math

_PREFIXES = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]


def si(value: float | None, unit: str, digits: int = 3) -> str:
    """`si(15.0e9, "B")` -> '15.0 GB'. Three significant digits by default."""
    if value is None or not math.isfinite(value):
        return "—"
    if value == 0:
        return f"0 {unit}"
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{_significant(value / scale, digits)} {prefix}{unit}"
    return f"{_significant(value, digits)} {unit}"


def _significant(value: float, digits: int) -> str:
    magnitude = int(math.floor(math.log10(abs(value)))) if value else 0
    decimals = max(0, digits - 1 - magnitude)
    return f"{value:,.{decimals}f}"


def seconds(value: float | None) -> str:
    """Step times: '4.52 ms', '1.99 s', '850 µs'."""
    if value is None or not math.isfinite(value):
        return "—"
    if value >= 1:
        return f"{value:,.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.2f} ms"
    return f"{value * 1e6:.1f} µs"


def rate(value: float | None, unit: str = "tok/s") -> str:
    """Throughputs as whole numbers with separators: '13,321 tok/s'."""
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:,.0f} {unit}" if value >= 100 else f"{value:,.1f} {unit}"


def percent(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{100 * value:.1f} %"


def intensity(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:,.1f} FLOP/B"
