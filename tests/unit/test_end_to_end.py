"""End-to-end replay and the engine-overhead fit (sweeps/end_to_end.py): runs made by
the simulator itself with known overheads are fitted back to those overheads."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core.assumptions import load_profile
from rooftui.sweeps import end_to_end as e2e
from rooftui.sweeps.bench_results import Run, Stat

BASE = load_profile("h100-trtllm")
# three models (32, 64, 80 layers), each with and without TP: any two of them tell the
# step, layer and all-reduce overheads apart (leave-one-group-out fits on two)
TARGETS = [e2e.Target("llama-3.1-8b", "h100-sxm", 1, engine="vllm"),
           e2e.Target("llama-3.1-8b", "h100-sxm", 2, engine="vllm"),
           e2e.Target("qwen3-32b", "h100-sxm", 1, "fp8", engine="vllm"),
           e2e.Target("qwen3-32b", "h100-sxm", 4, "fp8", engine="vllm"),
           e2e.Target("llama-3-70b", "h200", 1, "fp8", engine="vllm"),
           e2e.Target("llama-3-70b", "h200", 4, "fp8", engine="vllm")]


def closed_run(concurrency: int, isl: int, osl: int, waves: int = 2) -> Run:
    return Run(tool="test", source=f"c{concurrency} {isl}/{osl}", concurrency=concurrency,
               requests=waves * concurrency, input_mean=isl, output_mean=osl)


def measured_as(replay: e2e.Replay) -> Run:
    """The replayed run with the prediction as its measurement."""
    p = replay.predicted
    return dataclasses.replace(replay.run, ttft=Stat(mean=p["ttft_s"]["mean"]),
                               tpot=Stat(mean=p["tpot_s"]["mean"]))


def synthetic(overheads) -> tuple[list[Run], list[e2e.Target]]:
    truth = e2e.with_overheads(BASE, overheads)
    runs, targets = [], []
    for target in TARGETS:
        for concurrency, isl, osl in ((2, 300, 24), (12, 900, 40)):
            replay = e2e.replay_run(closed_run(concurrency, isl, osl), target, truth)
            runs.append(measured_as(replay))
            targets.append(target)
    return runs, targets


def test_fit_recovers_known_overheads():
    truth = np.array([2.5e-3, 60e-6, 18e-6])
    runs, targets = synthetic(truth)
    replays = e2e.replay_runs(runs, targets, BASE)
    fit = e2e.fit_overheads(replays, BASE)
    assert fit.fitted == list(e2e.OVERHEADS) and fit.at_bound == []
    np.testing.assert_allclose(fit.overheads, truth, rtol=0.02)


def test_fit_engine_profile_replays_at_the_fitted_values():
    runs, targets = synthetic(np.array([1e-3, 0.0, 30e-6]))
    efficiency, summary = e2e.fit_engine_profile(runs, BASE, targets)
    assert efficiency.step_overhead_s == pytest.approx(1e-3, rel=0.02)
    assert "layer_overhead_s" in summary["at_bound"]  # the truth is 0: flagged
    assert summary["mape_tpot"] < 0.005 and summary["mape_ttft"] < 0.005
    # the kernel efficiencies are the base profile's, untouched
    assert efficiency.gemm_mfu == BASE.efficiency.gemm_mfu


@settings(max_examples=6, deadline=None)
@given(step=st.floats(0, 5e-3), layer=st.floats(0, 2e-4),
       concurrency=st.integers(1, 12), osl=st.integers(2, 40))
def test_closed_loop_is_affine_in_the_overheads(step, layer, concurrency, osl):
    """Under a closed loop the schedule does not depend on step times, so the surrogate
    the fit searches equals a replay at the other overheads."""
    target = TARGETS[1]
    run = closed_run(concurrency, 500, osl)
    at_base = e2e.replay_run(run, target, BASE)
    values = np.array([step, layer, BASE.efficiency.allreduce_overhead_s])
    again = e2e.replay_run(run, target, e2e.with_overheads(BASE, values))
    ttft, tpot = at_base.at(values)
    assert ttft == pytest.approx(again.predicted["ttft_s"]["mean"], rel=1e-9)
    assert tpot == pytest.approx(again.predicted["tpot_s"]["mean"], rel=1e-9)


def test_closed_loop_keeps_concurrency_requests_in_flight():
    requests, sessions = e2e.run_requests(closed_run(4, 100, 10, waves=3))
    assert len(requests) == 12
    assert sessions.previous.tolist() == [-1] * 4 + list(range(8))


def test_request_rate_is_poisson_and_per_request_lengths_are_kept():
    run = Run(tool="test", source="rate", request_rate=2.0, requests=400, input_mean=10,
              output_mean=5, input_tokens=np.arange(1, 401), output_tokens=np.full(400, 5))
    requests, sessions = e2e.run_requests(run)
    assert sessions is None
    assert requests.input_tokens.tolist() == list(range(1, 401))
    gaps = np.diff(requests.arrival_s)
    assert 0.4 < gaps.mean() < 0.6  # mean 1/rate = 0.5 s


def test_interval_holds_the_stated_share_and_the_prediction():
    rng = np.random.default_rng(0)
    groups = [rng.normal(0.1, 0.2, 400), rng.normal(0.3, 0.1, 100)]
    low, high = e2e.interval_bounds(groups, 0.8)
    assert low <= 1 <= high
    # each group weighted equally: the mean of the groups' coverages is the level
    inside = [np.mean((np.exp(g) >= low) & (np.exp(g) <= high)) for g in groups]
    assert 0.7 < np.mean(inside) < 0.9


def test_leave_one_group_out_needs_two_groups():
    runs, targets = synthetic(np.array([1e-3, 0, 0]))
    replays = e2e.replay_runs(runs[:2], targets[:2], BASE)
    with pytest.raises(e2e.SpecError, match="two"):
        e2e.leave_one_group_out(replays, BASE, lambda r, a: r)


def test_leave_one_group_out_scores_unseen_groups():
    truth = np.array([2e-3, 40e-6, 20e-6])
    runs, targets = synthetic(truth)
    replays = e2e.replay_runs(runs, targets, BASE)

    def again(previous, assumptions):
        return e2e.replay_run(previous.run, previous.target, assumptions)

    held = e2e.leave_one_group_out(replays, BASE, again)
    assert len(held.groups) == 3
    for group in held.groups.values():  # each group was fitted without its own runs
        np.testing.assert_allclose(group["overheads"], truth, rtol=0.02)
        assert group["mape_tpot"] < 0.005 and group["mape_ttft"] < 0.005
