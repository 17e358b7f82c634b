"""End-to-end replay and the engine-overhead fit (sweeps/end_to_end.py): runs made by
the simulator itself with known overheads are fitted back to those overheads."""

from __future__ import annotations

import dataclasses
import tomllib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core import spec_files
from rooftui.core.assumptions import load_profile
from rooftui.sweeps import end_to_end as e2e
from rooftui.sweeps import engine_profiles
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


LOCKSTEP = e2e.Scheduling(stagger=False)
STAGGERED = e2e.Scheduling()


def synthetic(overheads, scheduling: e2e.Scheduling = STAGGERED
              ) -> tuple[list[Run], list[e2e.Target]]:
    truth = e2e.with_overheads(BASE, overheads)
    runs, targets = [], []
    for target in TARGETS:
        for concurrency, isl, osl in ((2, 300, 24), (12, 900, 40)):
            replay = e2e.replay_run(closed_run(concurrency, isl, osl), target, truth,
                                    scheduling)
            runs.append(measured_as(replay))
            targets.append(target)
    return runs, targets


def test_fit_recovers_known_overheads():
    """Lockstep clients without a front end: the surrogate is exact, one fit suffices."""
    truth = np.array([2.5e-3, 60e-6, 18e-6, 0.0])
    runs, targets = synthetic(truth, LOCKSTEP)
    replays = e2e.replay_runs(runs, targets, BASE, LOCKSTEP)
    fit = e2e.fit_overheads(replays, BASE, free=list(e2e.STEP_OVERHEADS))
    assert fit.at_bound == []
    np.testing.assert_allclose(fit.overheads, truth, rtol=0.02)


def test_fit_recovers_a_front_end_with_staggered_clients():
    """Staggered clients and a front end move the schedule with the overheads: the fit
    re-linearises by replaying until it settles, and finds every overhead again."""
    truth = np.array([2e-3, 40e-6, 20e-6, 0.03])
    runs, targets = synthetic(truth)
    replays = e2e.replay_runs(runs, targets, BASE)
    assert not any(r.exact for r in replays)
    fit = e2e.fit_overheads(replays, BASE, replay=e2e.replay_again)
    assert fit.fitted == list(e2e.OVERHEADS) and fit.at_bound == []
    np.testing.assert_allclose(fit.overheads, truth, rtol=0.05)
    assert e2e.mape(fit.replays, "ttft") < 0.01 and e2e.mape(fit.replays, "tpot") < 0.01


def test_fit_engine_profile_replays_at_the_fitted_values():
    runs, targets = synthetic(np.array([1e-3, 0.0, 30e-6, 0.0]), LOCKSTEP)
    efficiency, summary = engine_profiles.fit_engine_profile(runs, BASE, targets, LOCKSTEP)
    assert efficiency.step_overhead_s == pytest.approx(1e-3, rel=0.02)
    assert "layer_overhead_s" in summary["at_bound"]  # the truth is 0: flagged
    assert summary["mape_tpot"] < 0.005 and summary["mape_ttft"] < 0.005
    # the kernel efficiencies are the base profile's, untouched
    assert efficiency.gemm_mfu == BASE.efficiency.gemm_mfu


@settings(max_examples=6, deadline=None)
@given(step=st.floats(0, 5e-3), layer=st.floats(0, 2e-4),
       concurrency=st.integers(1, 12), osl=st.integers(2, 40))
def test_closed_loop_is_affine_in_the_overheads(step, layer, concurrency, osl):
    """Under a lockstep closed loop without a front end the schedule does not depend on
    step times, so the surrogate the fit searches equals a replay at other overheads."""
    target = TARGETS[1]
    run = closed_run(concurrency, 500, osl)
    at_base = e2e.replay_run(run, target, BASE, LOCKSTEP)
    assert at_base.exact
    values = np.array([step, layer, BASE.efficiency.allreduce_overhead_s, 0.0])
    again = e2e.replay_run(run, target, e2e.with_overheads(BASE, values), LOCKSTEP)
    ttft, tpot = at_base.at(values)
    assert ttft == pytest.approx(again.predicted["ttft_s"]["mean"], rel=1e-9)
    assert tpot == pytest.approx(again.predicted["tpot_s"]["mean"], rel=1e-9)


@settings(max_examples=6, deadline=None)
@given(front_end=st.floats(0, 0.5), concurrency=st.integers(1, 12), osl=st.integers(2, 40))
def test_front_end_adds_to_ttft_and_e2e_only(front_end, concurrency, osl):
    """One wave (nothing waits on a finish): the front end shifts every request's TTFT
    and E2E by itself and leaves TPOT and the steps alone."""
    run = closed_run(concurrency, 700, osl, waves=1)
    at_zero = e2e.replay_run(run, TARGETS[3], BASE)
    moved = e2e.overheads_of(BASE) + [0, 0, 0, front_end]
    delayed = e2e.replay_run(run, TARGETS[3], e2e.with_overheads(BASE, moved))
    for key in ("ttft_s", "e2e_s"):
        for stat, value in at_zero.predicted[key].items():
            assert delayed.predicted[key][stat] == pytest.approx(value + front_end, abs=1e-12)
    assert delayed.predicted["tpot_s"] == at_zero.predicted["tpot_s"]
    ttft, _ = at_zero.at(moved)
    assert ttft == pytest.approx(delayed.predicted["ttft_s"]["mean"], rel=1e-9)


def test_closed_loop_keeps_concurrency_requests_in_flight():
    requests, sessions = e2e.run_requests(closed_run(4, 100, 10, waves=3), think_s=0.02)
    assert len(requests) == 12
    assert sessions.previous.tolist() == [-1] * 4 + list(range(8))
    # the next request on a slot reaches the engine a front end after the previous one
    assert sessions.think_s.tolist() == [0.0] * 4 + [0.02] * 8


@settings(max_examples=10, deadline=None)
@given(concurrency=st.integers(1, 64), spread=st.floats(0.001, 100))
def test_staggered_slots_start_within_the_spread(concurrency, spread):
    requests, sessions = e2e.run_requests(closed_run(concurrency, 100, 10, waves=2),
                                          spread_s=spread)
    starts = requests.arrival_s[:concurrency]
    assert np.all((starts >= 0) & (starts < spread)) and np.all(np.diff(starts) >= 0)
    lockstep, _ = e2e.run_requests(closed_run(concurrency, 100, 10, waves=2))
    assert not np.any(lockstep.arrival_s)


def test_a_replay_says_how_its_clients_started():
    """vLLM's closed loops start staggered, SGLang's in step, either as Scheduling says;
    an open loop (a request rate) has no client start to report."""
    target = TARGETS[0]
    run = closed_run(4, 200, 8)
    assert e2e.replay_run(run, target, BASE).clients == "staggered"
    assert e2e.replay_run(run, target, BASE, LOCKSTEP).clients == "in-step"
    sglang = dataclasses.replace(target, engine="sglang")
    assert e2e.replay_run(run, sglang, BASE).clients == "in-step"
    assert e2e.replay_run(run, sglang, BASE, e2e.Scheduling(stagger=True)).clients == (
        "staggered")
    open_loop = dataclasses.replace(run, concurrency=None, request_rate=5.0)
    assert e2e.replay_run(open_loop, target, BASE).clients is None
    one_wave = closed_run(4, 200, 8, waves=1)  # every request sent at once: no loop
    assert e2e.replay_run(one_wave, target, BASE, LOCKSTEP).clients is None
    static = e2e.Scheduling(policy="static", stagger=False)  # a batch timed in the engine
    assert e2e.replay_run(one_wave, target, BASE, static).clients is None


def test_warm_up_requests_run_first_and_are_not_scored():
    """Warm-up requests (genai-perf / AIPerf) take the slots first; the statistics are
    the scored requests'; a run without them (vllm bench serve) scores all."""
    run = dataclasses.replace(closed_run(3, 10, 5, waves=2), warmup_requests=3)
    requests, sessions = e2e.run_requests(run)
    assert len(requests) == 9 and sessions.previous.tolist() == [-1] * 3 + list(range(6))
    assert e2e.measured_requests(run).tolist() == [False] * 3 + [True] * 6
    assert e2e.measured_requests(closed_run(3, 10, 5)).all()
    replay = e2e.replay_run(run, TARGETS[0], BASE)
    scored = e2e.replay_run(dataclasses.replace(run, warmup_requests=0), TARGETS[0], BASE)
    assert replay.predicted["ttft_s"] != scored.predicted["ttft_s"]


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


def test_coverage_by_the_others_uses_none_of_the_groups_own_runs():
    """Groups alike: about the level inside. A group off on its own: none of its runs
    inside the others' interval, though an interval drawn from every group holds some."""
    rng = np.random.default_rng(1)
    alike = [rng.normal(0.0, 0.1, 300) for _ in range(3)]
    shares = e2e.coverage_by_the_others(alike, 0.8)
    assert all(0.7 < share < 0.9 for share in shares)
    apart = [*alike, rng.normal(2.0, 0.01, 50)]
    assert e2e.coverage_by_the_others(apart, 0.8)[-1] == 0.0
    assert e2e.coverage(apart[-1], e2e.interval_bounds(apart, 0.8)) > 0
    assert e2e.coverage_by_the_others([alike[0], np.array([])], 0.8) == [None, None]


def test_leave_one_group_out_needs_two_groups():
    runs, targets = synthetic(np.array([1e-3, 0, 0, 0]), LOCKSTEP)
    replays = e2e.replay_runs(runs[:2], targets[:2], BASE, LOCKSTEP)
    with pytest.raises(e2e.SpecError, match="two"):
        e2e.leave_one_group_out(replays, BASE, lambda r, a: r)


def test_leave_one_group_out_scores_unseen_groups():
    truth = np.array([2e-3, 40e-6, 20e-6, 0.0])
    runs, targets = synthetic(truth, LOCKSTEP)
    replays = e2e.replay_runs(runs, targets, BASE, LOCKSTEP)
    held = e2e.leave_one_group_out(replays, BASE, e2e.replay_again)
    assert len(held.groups) == 3
    for group in held.groups.values():  # each group was fitted without its own runs
        np.testing.assert_allclose(group["overheads"][:3], truth[:3], rtol=0.02)
        assert group["overheads"][3] < 1e-4  # no front end in the truth: none found
        assert group["mape_tpot"] < 0.005 and group["mape_ttft"] < 0.005


def test_sglang_replays_run_prefill_batches_without_decodes():
    """SGLang's scheduler runs a prefill batch on its own whenever a prompt can be admitted
    (get_next_batch_to_run): its replays use the prefill_first policy by default, which
    predicts other times than chunked prefill (prefills alongside the decodes)."""
    target = e2e.Target("llama-3.1-8b", "h100-sxm", 1, engine="sglang")
    assert target.defaults.policy == "prefill_first"
    run = closed_run(16, 2000, 64, waves=3)
    default = e2e.replay_run(run, target, BASE)
    named = e2e.replay_run(run, target, BASE, e2e.Scheduling(policy="prefill_first"))
    chunked = e2e.replay_run(run, target, BASE, e2e.Scheduling(policy="chunked"))
    assert default.predicted == named.predicted != chunked.predicted


def test_trtllm_replays_price_its_own_fp8_kernels_and_a_bf16_run_is_unchanged():
    """TensorRT-LLM's runs are priced with h100-trtllm-fp8 (its own fp8 GEMM and fp8-KV
    attention timings); that profile's bf16 parameters are h100-trtllm's, so a bf16 run
    with a bf16 KV cache replays the same on both, and an fp8 run with an fp8 KV cache
    does not. vLLM's and SGLang's fp8 GEMMs are other kernels: they keep h100-trtllm."""
    assert e2e.kernel_profile("trtllm") == "h100-trtllm-fp8"
    assert {e2e.kernel_profile(name) for name in ("vllm", "sglang", "splitwise", None)} == {
        "h100-trtllm"}
    fp8 = load_profile("h100-trtllm-fp8")
    table = {name: value for name, value in fp8.efficiency.as_dict().items()
             if not name.startswith("fp8.")}
    assert table == {name: BASE.efficiency.value(name) for name in table}
    assert fp8.efficiency.value("fp8.attention_mbu") != BASE.efficiency.value("attention_mbu")
    run = closed_run(8, 1000, 32)
    bf16 = e2e.Target("llama-3.1-8b", "h100-sxm", 1, engine="trtllm")
    assert (e2e.replay_run(run, bf16, fp8, LOCKSTEP).predicted
            == e2e.replay_run(run, bf16, BASE, LOCKSTEP).predicted)
    quantised = e2e.Target("llama-3-70b", "h200", 2, "fp8", engine="trtllm", kv_dtype="fp8")
    own, borrowed = (e2e.replay_run(run, quantised, profile, LOCKSTEP).predicted
                     for profile in (fp8, BASE))
    # TensorRT-LLM's fp8 kernels reach a lower share of their (doubled) peaks than bf16's
    assert own["tpot_s"]["mean"] > borrowed["tpot_s"]["mean"]
    assert own["ttft_s"]["mean"] > borrowed["ttft_s"]["mean"]


@pytest.mark.parametrize("engine", ["vllm", "trtllm", "sglang"])
@pytest.mark.parametrize("gpu", ["h100-sxm", "h200"])
def test_shipped_engine_profiles_are_their_kernel_profile_plus_overheads(engine, gpu):
    """An engine profile written by `sweep replay --fit` keeps every kernel parameter of
    the kernel profile its engine is replayed on (to the 4 digits it records), and its
    compute rate at the share the fit chose."""
    name = f"{gpu}-{engine}"
    shipped = load_profile(name)
    calibration = tomllib.loads(spec_files.resolve("profiles", name).read_text())["calibration"]
    assert calibration["base"] == e2e.kernel_profile(engine)
    kernel = load_profile(e2e.kernel_profile(engine))
    # its compute at the share its fit chose, one its engine allows
    assert calibration["compute_share"] in e2e.engine_defaults(engine).compute_shares
    assert shipped.mfu == pytest.approx(kernel.mfu * calibration["compute_share"])
    # and its host floor, one its engine allows (none: the kernel profile's)
    floor = calibration.get("host_floor_s")
    assert (None if floor is None else tuple(floor)) in e2e.engine_defaults(engine).host_floors
    host = ("host_step_s", "host_sequence_s")
    if floor is not None:
        assert [shipped.efficiency.value(name) for name in host] == floor
    kernels = kernel.efficiency.as_dict()
    for parameter, value in kernels.items():
        if parameter not in e2e.OVERHEADS and (floor is None or parameter not in host):
            assert shipped.efficiency.value(parameter) == pytest.approx(value, rel=5e-4), (
                parameter)
