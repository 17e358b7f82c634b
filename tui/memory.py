"""Where one GPU's memory goes in the Explorer's step: resident weights, the step's KV
cache, the profile's reserve, what is left, and how many sequences of this context fit.

When the step does not fit, the smallest tensor parallelism (a power of two above the
current one, each a full evaluation by the core, so a TP the model cannot be split over
is skipped) at which it does: Llama-3-70B's 141 GB of bf16 weights need TP 2 on 80 GB
H100s. No Textual here: the Explorer's worker computes it with the figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from rooftui.core.errors import SpecError
from rooftui.core.limits import BOUNDS
from rooftui.core.point import PointConfig, point_report
from rooftui.tui.settings import ExplorerSettings


@dataclass(frozen=True)
class MemoryUse:
    """Bytes per GPU of one replica split `tp` ways."""

    capacity: float
    weights: float
    kv: float  # the step's KV cache: batch sequences of this context, and the prompt's
    reserve: float  # the profile's, for activations, the runtime, fragmentation
    max_batch: int | None  # sequences of this context that fit (None: no limit)
    fits: bool
    tp: int
    smallest_tp: int | None  # when the step does not fit: the smallest TP that fits it

    @property
    def free(self) -> float:
        return self.capacity - self.weights - self.reserve - self.kv

    @property
    def weights_fit(self) -> bool:
        return self.weights + self.reserve < self.capacity

    def warning(self) -> str:
        """One line when the step does not fit, naming what would; else empty."""
        if self.fits:
            return ""
        gb = 1e9
        cure = (f"TP {self.smallest_tp} is the smallest that fits" if self.smallest_tp
                else f"no TP up to {int(BOUNDS['tp'].maximum)} fits")
        if not self.weights_fit:
            return (f"weights alone ({self.weights / gb:,.1f} GB per GPU) do not fit in "
                    f"{self.capacity / gb:,.0f} GB: {cure}")
        return (f"the KV cache of {self.kv / gb:,.1f} GB does not fit beside the weights "
                f"(max batch {self.max_batch:,}): {cure}")


def memory_use(settings: ExplorerSettings, config: PointConfig, report: dict) -> MemoryUse:
    return MemoryUse(
        capacity=config.gpu.memory_bytes, weights=report["weight_bytes"],
        kv=report["kv_bytes"], reserve=report["assumptions"]["memory_reserve_gb"] * 1e9,
        max_batch=report["max_batch"], fits=report["fits"], tp=settings.tp,
        smallest_tp=None if report["fits"] else smallest_fitting_tp(settings))


def smallest_fitting_tp(settings: ExplorerSettings) -> int | None:
    """The smallest power-of-two TP above `settings.tp` at which the step fits."""
    tp = 1
    while tp <= BOUNDS["tp"].maximum:
        if tp > settings.tp:
            try:
                if point_report(settings.with_changes(tp=tp).config())["fits"]:
                    return tp
            except SpecError:  # the model cannot be split this many ways
                pass
        tp *= 2
    return None
