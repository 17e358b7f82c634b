"""An engine's sustained compute share (sweeps/compute_share.py): chosen with the
overheads on the training groups only, recovered from runs the simulator made with it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rooftui.sweeps import compute_share, engine_profiles
from rooftui.sweeps import end_to_end as e2e
from tests.unit.test_end_to_end import BASE, LOCKSTEP, TARGETS, closed_run, measured_as

TRUTH = np.array([2e-3, 40e-6, 20e-6, 0.0])


def runs_made_at(share: float) -> tuple[list, list]:
    """Lockstep closed loops (exact replays) of every target, made at `share`."""
    truth = e2e.with_overheads(compute_share.at_share(BASE, share), TRUTH)
    runs, targets = [], []
    for target in TARGETS:
        for concurrency, isl, osl in ((2, 300, 24), (12, 900, 40)):
            replay = e2e.replay_run(closed_run(concurrency, isl, osl), target, truth, LOCKSTEP)
            runs.append(measured_as(replay))
            targets.append(target)
    return runs, targets


def test_at_share_slows_compute_bound_work_only():
    assert compute_share.at_share(BASE, 0.5).mfu == pytest.approx(BASE.mfu * 0.5)
    assert compute_share.at_share(BASE, 0.5).efficiency == BASE.efficiency
    prefill, decode = closed_run(1, 4000, 2, waves=1), closed_run(1, 8, 200, waves=1)
    target = e2e.Target("llama-3.1-8b", "h100-sxm", 1, engine="vllm")
    slow, fast = (compute_share.at_share(BASE, share) for share in (0.5, 1.0))
    ttft = [e2e.replay_run(prefill, target, a, LOCKSTEP).predicted["ttft_s"]["mean"]
            for a in (slow, fast)]
    tpot = [e2e.replay_run(decode, target, a, LOCKSTEP).predicted["tpot_s"]["mean"]
            for a in (slow, fast)]
    assert 1.6 < ttft[0] / ttft[1] <= 2.0  # a 4k-token prefill is compute-bound
    assert 1.0 <= tpot[0] / tpot[1] < 1.1  # a batch-1 decode streams weights


def test_the_share_and_overheads_are_recovered_and_chosen_per_fold():
    runs, targets = runs_made_at(0.65)
    shares = compute_share.Shares(e2e.replay_runs(runs, targets, BASE, LOCKSTEP), BASE,
                                  e2e.replay_again)
    chosen = shares.fit()
    assert chosen.share == 0.65 and chosen.assumptions.mfu == pytest.approx(0.65)
    np.testing.assert_allclose(chosen.fit.overheads[:3], TRUTH[:3], rtol=0.02)
    held = shares.leave_one_group_out()
    assert len(held.groups) == 3
    for group in held.groups.values():  # each fold chose 0.65 without its own runs
        assert group["mfu"] == pytest.approx(0.65)
        assert group["mape_tpot"] < 0.005 and group["mape_ttft"] < 0.005


def test_runs_at_the_kernel_rate_keep_it_and_one_share_is_plain_leave_one_out():
    runs, targets = runs_made_at(1.0)
    replays = e2e.replay_runs(runs, targets, BASE, LOCKSTEP)
    assert compute_share.Shares(replays, BASE, e2e.replay_again).fit().share == 1.0
    plain = e2e.leave_one_group_out(replays, BASE, e2e.replay_again)
    single = compute_share.Shares(replays, BASE, e2e.replay_again, shares=(1.0,))
    for key, group in single.leave_one_group_out().groups.items():
        assert group["mape_tpot"] == plain.groups[key]["mape_tpot"]
        np.testing.assert_array_equal(group["overheads"], plain.groups[key]["overheads"])


def test_only_tensorrt_llm_chooses_a_compute_share():
    assert e2e.engine_defaults("trtllm").compute_shares == e2e.COMPUTE_SHARES
    assert 1.0 in e2e.COMPUTE_SHARES and all(0 < s <= 1 for s in e2e.COMPUTE_SHARES)
    for engine in ("vllm", "sglang", "splitwise", None):
        assert e2e.engine_defaults(engine).compute_shares == (1.0,)


HOST_TRUTH = (8e-3, 30e-6)
HOST_CANDIDATES = ((0.0, 0.0), HOST_TRUTH, (8e-3, 0.0), (16e-3, 30e-6))
FRONT_END = 0.05


def test_a_host_floor_and_the_front_end_are_recovered_and_chosen_per_fold():
    """SGLang-like runs (an overlapping scheduler: no step overheads of its own) made with
    steps no shorter than a host floor, most of these short steps held at it: the
    candidate floor that made them wins, with the front end, in every fold."""
    truth = compute_share.at_host_floor(
        e2e.with_overheads(BASE, [0.0, 0.0, 0.0, FRONT_END]), HOST_TRUTH)
    runs, targets = [], []
    for target in TARGETS:
        target = dataclasses.replace(target, engine="sglang")
        for concurrency, isl, osl in ((2, 300, 24), (12, 900, 40), (48, 200, 30)):
            replay = e2e.replay_run(closed_run(concurrency, isl, osl), target, truth, LOCKSTEP)
            runs.append(measured_as(replay))
            targets.append(target)
    replays = e2e.replay_runs(runs, targets, BASE, LOCKSTEP)
    shares = compute_share.Shares(replays, BASE, e2e.replay_again, shares=(1.0,),
                                  host_floors=HOST_CANDIDATES)
    # SGLang's step is its host's: only its front end is fitted, under any floor or none
    for candidate in HOST_CANDIDATES:
        assert e2e.free_overheads(shares.replays[1.0, candidate]) == ["request_overhead_s"]
    vllm = [e2e.replay_run(run, TARGETS[0], BASE, LOCKSTEP) for run in runs[:3]]
    assert e2e.free_overheads(vllm + replays) == list(e2e.OVERHEADS)
    chosen = shares.fit()
    assert chosen.host_floor == HOST_TRUTH
    efficiency = chosen.assumptions.efficiency
    assert (efficiency.host_step_s, efficiency.host_sequence_s) == HOST_TRUTH
    np.testing.assert_allclose(chosen.fit.overheads, [0, 0, 0, FRONT_END], atol=1e-4)
    for group in shares.leave_one_group_out().groups.values():
        assert group["host_floor_s"] == list(HOST_TRUTH)
        assert group["mape_tpot"] < 0.005 and group["mape_ttft"] < 0.005


def test_a_step_held_at_its_host_floor_is_no_slope():
    """The fit's slopes count the steps a little more GPU time lengthens: none where the
    host sets every step, all of them without a floor."""
    run, target = closed_run(4, 300, 40), TARGETS[0]
    plain = e2e.replay_run(run, target, BASE, LOCKSTEP)
    held = e2e.replay_run(run, target, compute_share.at_host_floor(BASE, (1.0, 0.0)),
                          LOCKSTEP)
    assert plain.tpot_slope == pytest.approx(1.0) and plain.ttft_slope >= 1.0
    assert held.tpot_slope == 0.0 and held.ttft_slope == 0.0


def test_only_engines_with_an_overlapping_scheduler_choose_a_host_floor():
    assert e2e.engine_defaults("sglang").host_floors == e2e.HOST_FLOORS
    assert (0.0, 0.0) in e2e.HOST_FLOORS
    for engine in ("vllm", "splitwise", None):
        assert e2e.engine_defaults(engine).host_floors == (None,)


def test_a_benchmark_file_fit_chooses_sglangs_host_floor():
    """`sweep replay FILES --fit` (`fit_engine_profile`) on SGLang's runs chooses its floor
    from the engine's candidates, as the published runs' fit does, and fits the front end
    on it; a base with a floor of its own keeps it."""
    floor = (10e-3, 40e-6)
    truth = compute_share.at_host_floor(
        e2e.with_overheads(BASE, [0.0, 0.0, 0.0, FRONT_END]), floor)
    runs, targets = [], []
    for target in TARGETS[:2]:
        target = dataclasses.replace(target, engine="sglang")
        for concurrency, isl, osl in ((4, 300, 24), (32, 200, 30)):
            replay = e2e.replay_run(closed_run(concurrency, isl, osl), target, truth, LOCKSTEP)
            runs.append(measured_as(replay))
            targets.append(target)
    efficiency, summary = engine_profiles.fit_engine_profile(runs, BASE, targets, LOCKSTEP)
    assert summary["host_floor_s"] == list(floor) and summary["fitted"] == ["request_overhead_s"]
    assert (efficiency.host_step_s, efficiency.host_sequence_s) == floor
    assert summary["overheads_s"]["request_overhead_s"] == pytest.approx(FRONT_END, abs=1e-4)
    assert summary["mape_tpot"] < 1e-3 and summary["mape_ttft"] < 1e-3
    # a base's own floor is chosen again, as `--measured-dir`'s fit does
    own = compute_share.at_host_floor(BASE, (20e-3, 0.0))
    _, again = engine_profiles.fit_engine_profile(runs, own, targets, LOCKSTEP)
    assert again["host_floor_s"] == list(floor)
    # another engine keeps a base's floor, says so, and fits its overheads on it
    vllm = [dataclasses.replace(target, engine="vllm") for target in targets]
    _, kept = engine_profiles.fit_engine_profile(runs, own, vllm, LOCKSTEP)
    assert kept["host_floor_s"] == [20e-3, 0.0] and "step_overhead_s" in kept["fitted"]
    assert engine_profiles.floor_edges((20e-3, 60e-6), e2e.HOST_FLOORS) == ["host_step_s",
                                                               "host_sequence_s"]
    assert engine_profiles.floor_edges(floor, e2e.HOST_FLOORS) == []
    assert engine_profiles.floor_edges((20e-3, 0.0), (None,)) == []
