"""Static-batch slot occupancy: E[L] / E[max of B draws] for any length distribution.

A static batch of B requests runs until its longest member finishes, so it spends
B * max(L_i) slot-steps of which sum(L_i) do useful work; over many batches the useful
share is E[L] / E[max of B iid draws]. For exponential lengths E[max] = mean * H_B and
the share is 1/H_B (`closed_forms.exponential_static_occupancy`); every other law needs
the order statistic, computed here exactly:

- discrete laws (fixed, empirical traces and mixtures of them): E[max] = sum over the
  support values a_j of a_j * (F(a_j)^B - F(a_{j-1})^B), the exact order statistic of
  the empirical distribution (no bootstrap);
- quantile tables (piecewise-linear quantile function, the workload presets): the same
  integral in closed form per segment;
- parametric laws (capped exponential, log-normal, mixtures): E[max] = integral over
  x >= 0 of 1 - F(x)^B, by Gauss-Legendre quadrature on a logarithmic mesh split at
  every atom (caps, fixed components), to about 1e-10 relative.
"""

from __future__ import annotations

import math

import numpy as np

from rooftui.core.closed_forms import exponential_static_occupancy, harmonic
from rooftui.core.errors import SpecError
from rooftui.core.lengths import Exponential, LengthDistribution, QuantileTable

_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(20)
_INTERVALS_PER_DECADE = 40
_DECADES_BELOW_SCALE = 12  # the mesh starts this far below the distribution's scale


def _check_batch(batch: int) -> int:
    if int(batch) != batch or batch < 1:
        raise SpecError(f"the batch must be a whole number >= 1, got {batch}")
    return int(batch)


def _max_survival(survival: np.ndarray, batch: int) -> np.ndarray:
    """P(max of B draws > x) = 1 - (1 - S)^B, without cancellation when S is small."""
    with np.errstate(divide="ignore"):
        return -np.expm1(batch * np.log1p(-np.clip(survival, 0.0, 1.0)))


def _discrete_expected_max(distribution: LengthDistribution, batch: int) -> float:
    support = np.unique(distribution.atoms())
    cdf = np.clip(distribution.cdf(support), 0.0, 1.0)
    cdf[-1] = 1.0  # the largest atom holds the rest of the mass exactly
    powered = cdf ** batch
    mass = np.diff(np.concatenate([[0.0], powered]))
    return math.fsum(support * mass)  # exact whatever the BLAS: no np.dot


def _quantile_table_expected_max(table: QuantileTable, batch: int) -> float:
    """Integral of 1 - F^B with F linear from p_k to p_{k+1} on [v_k, v_{k+1}]."""
    p, v = table.probabilities, table.values
    width = np.diff(v)
    rising = width > 0
    p0, p1 = p[:-1][rising], p[1:][rising]
    powered = (p1 ** (batch + 1) - p0 ** (batch + 1)) / ((batch + 1) * (p1 - p0))
    return float(v[0] + np.sum(width[rising] * (1.0 - powered)))


def _integrated_expected_max(distribution: LengthDistribution, batch: int) -> float:
    """Integral over x >= 0 of P(max > x), by quadrature on a log-spaced mesh."""
    upper = distribution._finite_upper()
    scale = min(max(distribution.mean_hint(), 1e-300), upper)
    low = scale * 10.0 ** -_DECADES_BELOW_SCALE
    decades = max(math.log10(upper / low), 1.0)
    mesh = np.geomspace(low, upper, int(decades * _INTERVALS_PER_DECADE) + 1)
    atoms = distribution.atoms()
    atoms = atoms[(atoms > low) & (atoms < upper)]
    mesh = np.unique(np.concatenate([mesh, atoms]))
    left, right = mesh[:-1, None], mesh[1:, None]
    half = 0.5 * (right - left)
    x = left + half * (1.0 + _NODES[None, :])
    values = _max_survival(distribution.survival(x.ravel()), batch).reshape(x.shape)
    body = float(np.sum(half * values * _WEIGHTS[None, :]))
    # on [0, low] the integrand is 1 up to the mass below `low` (1e-12 of the scale)
    head = low * float(_max_survival(distribution.survival(np.array([0.5 * low])), batch)[0])
    return head + body


def expected_max(distribution: LengthDistribution, batch: int) -> float:
    """E[max of `batch` iid draws] in tokens (E[L] at batch 1)."""
    batch = _check_batch(batch)
    if isinstance(distribution, Exponential):
        return float(distribution.mean_tokens * harmonic(batch))
    if distribution.discrete:
        return _discrete_expected_max(distribution, batch)
    if isinstance(distribution, QuantileTable):
        return _quantile_table_expected_max(distribution, batch)
    return _integrated_expected_max(distribution, batch)


def static_occupancy(distribution: LengthDistribution, batch: int) -> float:
    """Useful share of a static batch's slot-steps: E[L] / E[max of B draws]."""
    batch = _check_batch(batch)
    if isinstance(distribution, Exponential):
        return float(exponential_static_occupancy(batch))
    return expected_max(distribution, 1) / expected_max(distribution, batch)


def occupancy_report(distribution: LengthDistribution, batch: int) -> dict:
    """The `sweep occupancy --json` object for one batch size."""
    batch = _check_batch(batch)
    return {
        "distribution": distribution.spec,
        "batch": batch,
        "mean_tokens": expected_max(distribution, 1),
        "expected_max_tokens": expected_max(distribution, batch),
        "occupancy": static_occupancy(distribution, batch),
        "exponential_occupancy": float(exponential_static_occupancy(batch)),
        "method": ("closed form 1/H_B" if isinstance(distribution, Exponential)
                   else "exact order statistics" if distribution.discrete
                   else "exact, piecewise-linear quantiles"
                   if isinstance(distribution, QuantileTable)
                   else "numerical integration of 1 - F(x)^B"),
    }
