"""An engine's sustained compute share (sweeps/compute_share.py): chosen with the
overheads on the training groups only, recovered from runs the simulator made with it."""

from __future__ import annotations

import numpy as np
import pytest

from rooftui.sweeps import compute_share
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
