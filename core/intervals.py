"""Error bars from out-of-sample residuals: multiplicative intervals around a prediction.

A residual is log(measured / predicted) on data the prediction was not fitted on. Its
(1 - level)/2 and (1 + level)/2 quantiles, exponentiated, are the interval's ratios:
the true time lies in [prediction · low, prediction · high] for `level` of such points.
The ratios are clamped to hold the prediction itself (low ≤ 1 ≤ high), so a biased
profile's interval is widened on the side it errs, never moved off its own prediction.

Quantiles are weighted so that every dataset counts equally, whatever its row count, as
the fit weights them (`core.calibration.fit`): an 11,000-row GEMM table would otherwise
decide the interval of a kind alone.

A profile carries its intervals in an `[interval]` table (see `interval_from_dict`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from rooftui.core.errors import SpecError

DEFAULT_LEVEL = 0.8
# the kinds an [interval] table may bound: a step (and what derives from it), the
# kernel kinds, and end-to-end times under load
INTERVAL_KINDS = ("step", "gemm", "attention", "allreduce", "ttft", "tpot")
# the measured row kinds of `core.calibration.KINDS`, grouped as intervals are
KIND_GROUPS = {"gemm": "gemm", "copy": "gemm", "attention_decode": "attention",
               "attention_prefill": "attention", "allreduce": "allreduce", "step": "step",
               "e2e_ttft": "ttft", "e2e_tpot": "tpot", "e2e_itl": "tpot"}


@dataclass(frozen=True)
class Interval:
    """Multiplicative bounds per kind at one level, and how the residuals were made."""

    level: float = DEFAULT_LEVEL
    ratios: tuple[tuple[str, float, float], ...] = ()  # (kind, low, high)
    held_out: str = ""
    transferred_from: str | None = None

    def bounds(self, kind: str) -> tuple[float, float] | None:
        """(low, high) ratios of `kind`, or None when the table has none for it."""
        for name, low, high in self.ratios:
            if name == kind:
                return low, high
        return None

    def around(self, kind: str, value: float) -> tuple[float, float] | None:
        """The interval of a predicted time `value` of `kind`."""
        bounds = self.bounds(kind)
        return None if bounds is None else (value * bounds[0], value * bounds[1])

    def around_rate(self, kind: str, rate: float) -> tuple[float, float] | None:
        """The interval of a rate that is one over a time of `kind` (tok/s): inverted."""
        bounds = self.bounds(kind)
        return None if bounds is None else (rate / bounds[1], rate / bounds[0])

    def widened(self, factor: float, source: str) -> Interval:
        """This interval for a profile transferred from `source`: each bound moved out
        by `factor` (low / factor, high · factor)."""
        return replace(self, ratios=tuple((k, low / factor, high * factor)
                                          for k, low, high in self.ratios),
                       transferred_from=source)

    def as_dict(self) -> dict:
        return {"level": self.level, **{k: [low, high] for k, low, high in self.ratios},
                "held_out": self.held_out,
                **({"transferred_from": self.transferred_from} if self.transferred_from
                   else {})}


def interval_from_dict(data: object, where: str) -> Interval:
    """An `[interval]` table: `level` in (0, 1), each kind a [low, high] pair with
    0 < low ≤ 1 ≤ high, `held_out` (how the residuals were made), optional
    `transferred_from`."""
    if not isinstance(data, dict):
        raise SpecError(f"{where}: [interval] must be a table")
    unknown = sorted(set(data) - {"level", "held_out", "transferred_from", *INTERVAL_KINDS})
    if unknown:
        raise SpecError(f"{where}: [interval] has unknown keys {', '.join(unknown)} (kinds "
                        f"are {', '.join(INTERVAL_KINDS)}; also level, held_out, "
                        "transferred_from)")
    level = data.get("level", DEFAULT_LEVEL)
    if not _number(level) or not 0.0 < level < 1.0:
        raise SpecError(f"{where}: [interval] level must be a number in (0, 1), got {level!r}")
    ratios = []
    for kind in INTERVAL_KINDS:
        if kind not in data:
            continue
        pair = data[kind]
        if (not isinstance(pair, list) or len(pair) != 2 or not all(map(_number, pair))
                or not 0.0 < pair[0] <= 1.0 <= pair[1] < math.inf):
            raise SpecError(f"{where}: [interval] {kind} must be [low, high] with "
                            f"0 < low ≤ 1 ≤ high (ratios to the prediction), got {pair!r}")
        ratios.append((kind, float(pair[0]), float(pair[1])))
    for key in ("held_out", "transferred_from"):
        if key in data and not isinstance(data[key], str):
            raise SpecError(f"{where}: [interval] {key} must be a string")
    return Interval(level=float(level), ratios=tuple(ratios),
                    held_out=str(data.get("held_out", "")),
                    transferred_from=data.get("transferred_from"))


def _number(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The q-quantile of `values` with `weights` (linear between the midpoints of each
    value's weight, so equal weights give the plain quantile's Hazen definition)."""
    order = np.argsort(values)
    values, weights = np.asarray(values)[order], np.asarray(weights, dtype=float)[order]
    cumulative = (np.cumsum(weights) - 0.5 * weights) / weights.sum()
    return float(np.interp(q, cumulative, values))


def dataset_weights(groups: np.ndarray) -> np.ndarray:
    """One weight per row so that each group (dataset) sums to one."""
    _, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    return 1.0 / counts[inverse.reshape(-1)]


def ratio_bounds(log_ratios: np.ndarray, weights: np.ndarray | None = None,
                 level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """(low, high) multiplicative bounds from residuals log(measured / predicted)."""
    log_ratios = np.asarray(log_ratios, dtype=float)
    if not len(log_ratios):
        raise SpecError("no residuals to make an interval from")
    weights = np.ones(len(log_ratios)) if weights is None else weights
    tail = (1.0 - level) / 2.0
    low = weighted_quantile(log_ratios, weights, tail)
    high = weighted_quantile(log_ratios, weights, 1.0 - tail)
    return math.exp(min(low, 0.0)), math.exp(max(high, 0.0))


def coverage(log_ratios: np.ndarray, bounds: tuple[float, float],
             weights: np.ndarray | None = None) -> float:
    """The (weighted) share of residuals inside the bounds."""
    ratios = np.exp(np.asarray(log_ratios, dtype=float))  # as the bounds are applied
    # a point on a bound is inside: 1e-12 absorbs the rounding of exp(a + b) = e^a · e^b
    inside = (ratios >= bounds[0] * (1 - 1e-12)) & (ratios <= bounds[1] * (1 + 1e-12))
    weights = np.ones(len(ratios)) if weights is None else weights
    return float(np.sum(weights * inside) / np.sum(weights))


def coverage_by_the_others(log_ratios: np.ndarray, groups: np.ndarray,
                           level: float = DEFAULT_LEVEL) -> dict:
    """Each group's share of residuals inside the interval made from the other groups'
    residuals alone (each of them weighted equally): the interval's coverage on data it
    was not drawn from. {group: share}; a group with no other group beside it is left out."""
    log_ratios, groups = np.asarray(log_ratios, dtype=float), np.asarray(groups)
    shares = {}
    for group in np.unique(groups):
        own = groups == group
        if own.all():
            continue
        bounds = ratio_bounds(log_ratios[~own], dataset_weights(groups[~own]), level)
        shares[group.item()] = coverage(log_ratios[own], bounds)
    return shares


def widening_factor(log_ratios: np.ndarray, bounds: tuple[float, float],
                    weights: np.ndarray | None = None, level: float = DEFAULT_LEVEL) -> float:
    """The smallest factor f ≥ 1 such that (low / f, high · f) covers `level` of these
    residuals: how much a transferred profile's interval must widen."""
    log_ratios = np.asarray(log_ratios, dtype=float)
    low, high = math.log(bounds[0]), math.log(bounds[1])
    # each residual's distance outside the bounds; covering `level` of them needs the
    # level-quantile of that distance
    outside = np.maximum(np.maximum(low - log_ratios, log_ratios - high), 0.0)
    weights = np.ones(len(log_ratios)) if weights is None else weights
    return math.exp(weighted_quantile(outside, weights, level))
