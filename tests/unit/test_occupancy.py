"""Static-batch occupancy E[L] / E[max of B]: closed forms, exact order statistics,
quadrature, the shipped presets against their traces."""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core.closed_forms import exponential_static_occupancy, harmonic
from rooftui.core.errors import SpecError
from rooftui.core.lengths import Empirical, QuantileTable, parse_distribution
from rooftui.core.occupancy import (
    _integrated_expected_max,
    _quantile_table_expected_max,
    expected_max,
    static_occupancy,
)
from rooftui.core.workloads import load_workload

TRACES = ("azure-conv-2023", "azure-code-2023", "sharegpt-8k", "arxiv-4k")


def test_exponential_is_one_over_harmonic():
    law = parse_distribution("exp:mean=100")
    for batch in (1, 4, 32, 128, 1000):
        assert static_occupancy(law, batch) == float(exponential_static_occupancy(batch))
    assert round(static_occupancy(law, 32), 4) == 0.2464  # the seed's 24.6 %


@pytest.mark.parametrize("batch", [1, 2, 4, 32, 128, 1024])
def test_quadrature_reproduces_the_exponential_closed_form(batch):
    law = parse_distribution("exp:mean=100")
    assert _integrated_expected_max(law, batch) == pytest.approx(
        100 * float(harmonic(batch)), rel=1e-10)


def test_quadrature_reproduces_lognormal_closed_forms():
    law = parse_distribution("lognormal:median=100,sigma=1")
    assert expected_max(law, 1) == pytest.approx(law.mean(), rel=1e-10)
    # E[max of two lognormals] = 2 E[L] Phi(sigma / sqrt 2)
    assert expected_max(law, 2) == pytest.approx(
        2 * law.mean() * NormalDist().cdf(1 / math.sqrt(2)), rel=1e-10)


def test_capped_exponential_mean_and_max():
    law = parse_distribution("exp:mean=100,cap=300")
    assert expected_max(law, 1) == pytest.approx(100 * (1 - math.exp(-3)), rel=1e-10)
    # E[max of B capped at C] = integral over [0, C) of 1 - (1 - e^{-x/m})^B
    x = np.linspace(0, 300, 600_001)
    direct = np.trapezoid(1 - (1 - np.exp(-x / 100)) ** 32, x)
    assert expected_max(law, 32) == pytest.approx(direct, rel=1e-8)
    assert static_occupancy(law, 32) > static_occupancy(parse_distribution("exp:mean=100"), 32)


def test_mixture_with_an_atom_matches_brute_force_sampling():
    law = parse_distribution("bimodal:p=0.5,a=(fixed:96),b=(exp:mean=450),cap=1000")
    draws = law.sample(np.random.default_rng(0), 1_600_000).reshape(-1, 8)
    maxima = draws.max(axis=1)
    # rounding to whole tokens shifts a max by < 0.5 token; 5 standard errors of sampling
    assert abs(maxima.mean() - expected_max(law, 8)) < 5 * maxima.std() / math.sqrt(
        maxima.size) + 0.5


def test_empirical_order_statistics_enumerate_exactly():
    values = np.array([3, 3, 7, 10, 41])
    law = Empirical.of(values)
    for batch in (1, 2, 3):
        every_tuple = [max(t) for t in itertools.product(values, repeat=batch)]
        assert expected_max(law, batch) == pytest.approx(np.mean(every_tuple), rel=1e-14)


@pytest.mark.parametrize("name", TRACES)
def test_empirical_occupancy_equals_a_direct_computation_on_the_trace(shared_dir, name):
    path = shared_dir / "traces" / f"{name}.csv"
    law = parse_distribution(f"empirical:{path}")
    header = path.read_text().split("\n", 1)[0].split(",")
    column = np.loadtxt(path, delimiter=",", skiprows=1, usecols=header.index("output_tokens"))
    column = np.sort(column)
    for batch in (4, 32, 128):
        # another formula: E[max] = sum over whole k >= 0 of P(max > k) = 1 - F(k)^B
        k = np.arange(int(column[-1]))
        cdf = np.searchsorted(column, k, side="right") / column.size
        direct = np.sum(1 - cdf ** batch) / column.mean()
        assert static_occupancy(law, batch) == pytest.approx(1 / direct, rel=1e-12)


def test_trace_occupancy_matches_the_published_figures(shared_dir):
    """SOURCES.md: sharegpt-8k 0.605 / 0.457 / 0.437, azure-conv 0.545 / 0.376 / 0.301."""
    for name, expected in (("sharegpt-8k", (0.605, 0.457, 0.437)),
                           ("azure-conv-2023", (0.545, 0.376, 0.301))):
        law = parse_distribution(f"empirical:{shared_dir / 'traces' / f'{name}.csv'}")
        got = [round(static_occupancy(law, b), 3) for b in (4, 32, 128)]
        assert got == list(expected)


@pytest.mark.parametrize("name", TRACES)
def test_presets_reproduce_their_trace_occupancy(shared_dir, name):
    preset = load_workload(name).output_tokens
    trace = parse_distribution(f"empirical:{shared_dir / 'traces' / f'{name}.csv'}")
    for batch in (4, 32, 128):
        assert static_occupancy(preset, batch) == pytest.approx(
            static_occupancy(trace, batch), rel=0.005)


def test_quantile_table_closed_form_matches_quadrature():
    table = QuantileTable.of([0, 0.2, 0.5, 0.9, 0.99, 1], [5, 20, 60, 400, 900, 1000], "t")
    for batch in (1, 3, 32, 128):
        assert _quantile_table_expected_max(table, batch) == pytest.approx(
            _integrated_expected_max(table, batch), rel=1e-8)


@settings(max_examples=40, deadline=None)
@given(mean_a=st.floats(5, 500), mean_b=st.floats(5, 5000), p=st.floats(0.05, 0.95),
       batch=st.integers(2, 256))
def test_occupancy_is_a_share_that_falls_with_the_batch(mean_a, mean_b, p, batch):
    law = parse_distribution(f"bimodal:p={p},a={mean_a},b={mean_b}")
    here, larger = static_occupancy(law, batch), static_occupancy(law, batch + 1)
    assert 0 < larger <= here <= 1


def test_fixed_lengths_waste_nothing():
    assert static_occupancy(parse_distribution("fixed:300"), 64) == 1.0


def test_bad_batch_is_an_error():
    with pytest.raises(SpecError, match="batch"):
        static_occupancy(parse_distribution("fixed:3"), 0)
