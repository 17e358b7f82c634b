"""Intervals from out-of-sample residuals (core.intervals) and the `calibrated` profile
(core.assumptions): the maths on synthetic residuals, the [interval] table's checks, and
the transfer rule."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core import spec_files
from rooftui.core.assumptions import (
    KERNEL_PROFILES,
    OTHER_VENDOR_WIDENING,
    TRANSFER_WIDENING,
    calibrated_profile,
    interval_report,
    load_profile,
    nearest_measured_gpu,
)
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.intervals import (
    Interval,
    coverage,
    coverage_by_the_others,
    dataset_weights,
    interval_from_dict,
    ratio_bounds,
    weighted_quantile,
    widening_factor,
)


def test_lognormal_residuals_give_their_quantiles_and_cover_new_draws():
    rng = np.random.default_rng(7)
    sigma = 0.2
    fitted = rng.normal(0.0, sigma, 20_000)
    low, high = ratio_bounds(fitted)
    z = 1.2815515655446004  # the normal's 90th percentile
    assert math.log(low) == pytest.approx(-z * sigma, rel=0.05)
    assert math.log(high) == pytest.approx(z * sigma, rel=0.05)
    fresh = rng.normal(0.0, sigma, 20_000)
    assert coverage(fresh, (low, high)) == pytest.approx(0.8, abs=0.02)


def test_a_biased_profile_keeps_its_prediction_inside_the_interval():
    # every point 20-60 % slower than predicted: the interval starts at the prediction
    residuals = np.log(np.linspace(1.2, 1.6, 101))
    low, high = ratio_bounds(residuals)
    assert low == 1.0
    assert high == pytest.approx(1.56, abs=0.005)


def test_each_dataset_counts_once_whatever_its_rows():
    # 1,000 rows at +0.5 and 10 rows at -0.5: weighted by dataset, each holds half
    values = np.concatenate([np.full(1000, 0.5), np.full(10, -0.5)])
    groups = np.concatenate([np.zeros(1000), np.ones(10)])
    weights = dataset_weights(groups)
    assert weights.sum() == pytest.approx(2.0)
    assert weighted_quantile(values, weights, 0.25) == -0.5
    assert weighted_quantile(values, weights, 0.75) == 0.5
    assert weighted_quantile(values, np.ones(len(values)), 0.25) == 0.5


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-3, 3), min_size=5, max_size=200), st.floats(0.5, 0.95))
def test_bounds_hold_the_prediction_and_cover_at_least_their_level(values, level):
    residuals = np.array(values)
    low, high = ratio_bounds(residuals, level=level)
    assert 0 < low <= 1 <= high
    # interpolated quantiles of n points: the share inside is at least level - 1/n
    assert coverage(residuals, (low, high)) >= level - 1.0 / len(values) - 1e-9


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-2, 2), min_size=5, max_size=100), st.floats(0.05, 1.0))
def test_widening_by_the_factor_needed_covers_the_level(values, half_width):
    residuals = np.array(values)
    bounds = (math.exp(-half_width), math.exp(half_width))
    factor = widening_factor(residuals, bounds)
    assert factor >= 1.0
    wider = (bounds[0] / factor, bounds[1] * factor)
    assert coverage(residuals, wider) >= 0.8 - 1.0 / len(values) - 1e-9


def test_intervals_scale_times_and_invert_rates():
    interval = Interval(ratios=(("step", 0.9, 1.2),))
    assert interval.around("step", 10.0) == pytest.approx((9.0, 12.0))
    assert interval.around_rate("step", 100.0) == pytest.approx((100 / 1.2, 100 / 0.9))
    assert interval.around("tpot", 10.0) is None
    wider = interval.widened(1.1, "h200-kernels")
    assert wider.bounds("step") == pytest.approx((0.9 / 1.1, 1.2 * 1.1))
    assert wider.transferred_from == "h200-kernels"


def test_a_tpot_without_its_own_bounds_uses_the_step_bounds():
    profile = load_profile("h100-splitwise")
    report = interval_report(profile, {"tpot_s.p50": ("tpot", 0.05)},
                             {"goodput_tokens_per_s": ("tpot", 100.0)})
    low, high = profile.interval.bounds("step")
    assert report["interval"]["bounds"]["tpot_s.p50"] == pytest.approx([0.05 * low,
                                                                        0.05 * high])
    assert report["interval"]["kinds"] == {"tpot_s.p50": "step",
                                           "goodput_tokens_per_s": "step"}
    assert "engine profile" in report["provenance"]
    ideal = interval_report(load_profile("ideal"), {"step_time_s": ("step", 0.01)})
    assert ideal["interval"] is None and "roofline bound" in ideal["provenance"]


@pytest.mark.parametrize(("table", "message"), [
    ({"step": [1.1, 1.3]}, "0 < low ≤ 1 ≤ high"),
    ({"step": [0.9, 0.95]}, "0 < low ≤ 1 ≤ high"),
    ({"step": [0.0, 1.2]}, "0 < low ≤ 1 ≤ high"),
    ({"step": [0.9]}, "[low, high]"),
    ({"step": ["a", 1.2]}, "[low, high]"),
    ({"level": 1.0, "step": [0.9, 1.1]}, "level must be a number in (0, 1)"),
    ({"level": True}, "level must be a number in (0, 1)"),
    ({"steps": [0.9, 1.1]}, "unknown keys steps"),
    ({"held_out": 3}, "held_out must be a string"),
])
def test_bad_interval_tables_are_refused_with_what_to_do(table, message):
    with pytest.raises(SpecError, match=f"somewhere: .*{message[:12]}"):
        interval_from_dict(table, "somewhere")


def test_every_fitted_profile_ships_an_interval_and_the_ideal_none():
    for name in ("h100-sxm-kernels", "h200-kernels", "h100-splitwise", "a100-splitwise",
                 "a100-pcie-sarathi"):
        profile = load_profile(name)
        assert profile.interval is not None, name
        assert profile.interval.bounds("step") is not None, name
        assert profile.interval.held_out.startswith("leave-one-dataset-out"), name
        text = spec_files.resolve("profiles", name).read_text()
        assert text.startswith("# Calibrated by: sweep calibrate ")
        assert "# Interval by: sweep validate " in text
    for name in ("ideal", "derated"):
        assert load_profile(name).interval is None


def test_calibrated_is_the_gpus_kernel_profile_where_it_has_one():
    for gpu, own in KERNEL_PROFILES.items():
        profile = calibrated_profile(load_gpu(gpu))
        assert profile.efficiency == load_profile(own).efficiency
        assert profile.interval == load_profile(own).interval
        assert own in profile.name and "transferred" not in profile.provenance


def test_a_gpu_without_data_gets_the_nearest_measured_gpus_profile_widened():
    assert nearest_measured_gpu(load_gpu("b200")) == ("h200", True)
    assert nearest_measured_gpu(load_gpu("a100-80gb")) == ("h100-sxm", True)
    assert nearest_measured_gpu(load_gpu("mi300x"))[1] is False
    b200 = load_profile("calibrated", gpu="b200")
    source = load_profile("h200-kernels")
    assert b200.efficiency == source.efficiency
    assert b200.interval.transferred_from == "h200-kernels"
    low, high = source.interval.bounds("step")
    assert b200.interval.bounds("step") == pytest.approx((low / TRANSFER_WIDENING,
                                                          high * TRANSFER_WIDENING))
    assert "transferred from h200-kernels" in b200.provenance
    mi300x = load_profile("calibrated", gpu="mi300x")
    source = load_profile(KERNEL_PROFILES[nearest_measured_gpu(load_gpu("mi300x"))[0]])
    assert mi300x.interval.bounds("gemm")[1] == pytest.approx(
        source.interval.bounds("gemm")[1] * OTHER_VENDOR_WIDENING)


def test_calibrated_needs_a_gpu():
    with pytest.raises(SpecError, match="resolves per GPU"):
        load_profile("calibrated")


def test_the_explorers_step_time_shows_a_fitted_profiles_interval():
    from rooftui.core.point import named_config, point_report
    from rooftui.tui.widgets.key_figures import key_figures

    def step_time(profile: str) -> str:
        config = named_config("h100-sxm", "llama-2-70b", profile, tp=4, batch=8,
                              context=640)
        return dict(key_figures(point_report(config), config.assumptions.interval))[
            "step time"]

    shown = step_time("h100-splitwise")
    assert "(80 %: " in shown and shown.endswith(" ms)")
    assert "(" not in step_time("ideal")


def test_coverage_by_the_others_leaves_each_groups_own_residuals_out():
    rng = np.random.default_rng(2)
    alike = np.concatenate([rng.normal(0.0, 0.1, 400) for _ in range(3)])
    labels = np.repeat([0, 1, 2], 400)
    shares = coverage_by_the_others(alike, labels, 0.8)
    assert set(shares) == {0, 1, 2} and all(0.7 < s < 0.9 for s in shares.values())
    apart = np.concatenate([alike, np.full(20, 3.0)])
    assert coverage_by_the_others(apart, np.append(labels, [3] * 20))[3] == 0.0
    assert coverage_by_the_others(alike[:400], labels[:400]) == {}
