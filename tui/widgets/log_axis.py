"""Log scales for textual-plot, which draws linear axes only: the data are plotted as
log10 of the values, and this formatter puts the ticks at 1, 2, 5 × powers of ten and
labels them with the values themselves (SI prefixes: 100, 1k, 10T)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from textual_plot import AxisFormatter

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_MANTISSAS = (1, 2, 5)


def compact(value: float) -> str:
    """A tick label: 0.5, 1, 20, 5k, 1.2M, 10T."""
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:g}{prefix}"
    return f"{value:g}"


def to_log(values: np.ndarray | float) -> np.ndarray:
    """log10 of the values; zero and negative values (nothing to draw) become NaN,
    which textual-plot drops."""
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(values > 0, np.log10(values), np.nan)


def padded_bounds(values: np.ndarray, pad: float = 0.15) -> tuple[float, float]:
    """Axis limits in log10 units: the finite values' range widened by `pad` decades
    each side, so no mark sits on the frame."""
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return 0.0, 1.0
    return float(finite.min()) - pad, float(finite.max()) + pad


class LogAxisFormatter(AxisFormatter):
    """Ticks at 10^k; and at every m·10^k within a decade, at 2·10^k and 5·10^k within
    a few, at 3·10^k within six: four ticks or more on most axes."""

    def get_ticks(self, min_: float, max_: float, max_ticks: int = 8) -> list[float]:
        decades = range(math.floor(min_), math.ceil(max_) + 1)
        span = max_ - min_
        mantissas = (range(1, 10) if span <= 1 else _MANTISSAS if span <= 2.5
                     else (1, 3) if span <= 6 else (1,))
        ticks = [k + math.log10(m) for k in decades for m in mantissas]
        ticks = [t for t in ticks if min_ - 1e-9 <= t <= max_ + 1e-9]
        if len(ticks) > max_ticks:  # thin to every second or third decade
            step = math.ceil(len(ticks) / max_ticks)
            ticks = ticks[::step]
        return ticks

    def get_labels_for_ticks(self, ticks: Sequence[float]) -> list[str]:
        return [compact(float(f"{10 ** t:.3g}")) for t in ticks]
