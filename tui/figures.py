"""Everything the Explorer draws for one configuration, computed in one go off the UI thread.

The point itself is `point_report` (exactly what `sweep point --json` prints); the
throughput curve is one vectorised call of the step model over an array of batch sizes
at the same context, so it costs about as much as the point.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from rooftui.core.intervals import Interval
from rooftui.core.point import PointConfig, point_report
from rooftui.core.step import evaluate_step
from rooftui.tui.memory import MemoryUse, memory_use
from rooftui.tui.settings import ExplorerSettings

# The curve spans batch 1 to a few times the larger of the current batch and the memory
# limit, on a geometric grid: enough points for a smooth line in a terminal cell grid.
CURVE_POINTS = 96
CURVE_MIN_TOP = 256
CURVE_MAX_TOP = 2**20


@dataclass(frozen=True)
class ThroughputCurve:
    batch: np.ndarray  # decode sequences per step
    tokens_per_s: np.ndarray  # all users
    per_user_tokens_per_s: np.ndarray


@dataclass(frozen=True)
class ExplorerFigures:
    settings: ExplorerSettings
    report: dict  # the `sweep point --json` object
    curve: ThroughputCurve
    memory: MemoryUse
    interval: Interval | None  # the profile's (a fitted one's), for the step time


def curve_top(batch: int, max_batch: int | None) -> int:
    """The largest batch on the throughput curve: a power of two past both the current
    batch and the memory limit, so both markers fall inside the plot."""
    limit = max(batch, max_batch or 0, CURVE_MIN_TOP // 2)
    return int(min(2 ** np.ceil(np.log2(2 * limit)), CURVE_MAX_TOP))


def evaluate_batches(config: PointConfig, batches: np.ndarray) -> dict[str, np.ndarray]:
    """Every step metric of `config` at each of `batches` (one vectorised call)."""
    inputs = replace(config.step_inputs(), batch=np.asarray(batches, dtype=np.float64))
    return evaluate_step(inputs, config.assumptions)


def compute_figures(settings: ExplorerSettings) -> ExplorerFigures:
    """The report and the throughput curve; raises SpecError for a refused configuration."""
    config = settings.config()
    report = point_report(config)
    top = curve_top(settings.batch, report["max_batch"])
    batches = np.unique(np.round(np.geomspace(1, top, CURVE_POINTS)))
    metrics = evaluate_batches(config, batches)
    curve = ThroughputCurve(
        batch=batches,
        tokens_per_s=np.broadcast_to(metrics["tokens_per_s"], batches.shape),
        per_user_tokens_per_s=np.broadcast_to(metrics["per_user_tokens_per_s"], batches.shape),
    )
    return ExplorerFigures(settings=settings, report=report, curve=curve,
                           memory=memory_use(settings, config, report),
                           interval=config.assumptions.interval)
