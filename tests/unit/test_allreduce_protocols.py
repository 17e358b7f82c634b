"""A step's all-reduces by the faster of two protocols (`allreduce_ll_share`,
`allreduce_bulk_overhead_s`): what evaluate_step, its TPOT budget solver, the
simulator's step costing and the simulator itself pay under them (the parameters
themselves and their fit: tests/unit/test_collective_libraries.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core.arrivals import parse_arrivals
from rooftui.core.assumptions import Assumptions, load_profile
from rooftui.core.efficiency import link_time
from rooftui.core.hardware import load_gpu
from rooftui.core.model import load_model
from rooftui.core.point import PointConfig, evaluate_point
from rooftui.core.scheduler import SchedulerConfig, StepCosts, simulate
from rooftui.core.step import evaluate_step
from rooftui.core.workloads import load_workload

H100 = load_gpu("h100-sxm")
LLAMA_70B, MIXTRAL = load_model("llama-3-70b"), load_model("mixtral-8x7b")
DRAFT = load_model("llama-3.1-8b")
# a calibrated profile's GEMM, attention and link values, its all-reduce protocols set
# here (the collective library's table cleared, so the base values are the step's)
KERNELS = replace(load_profile("h100-sxm-kernels"), collective_library="")


def with_protocols(share: float, bulk_s: float, base: Assumptions = KERNELS,
                   **assumptions) -> Assumptions:
    return replace(base, efficiency=base.efficiency.with_values(
        {"allreduce_ll_share": share, "allreduce_bulk_overhead_s": bulk_s}), **assumptions)


# NCCL's on the H100, as fitted: the low-latency protocol at 0.4 of the bulk one's
# bandwidth, the bulk one 14.5 us more per all-reduce
TWO = with_protocols(0.4, 14.5e-6)
ONE = with_protocols(1.0, 0.0)


def config(assumptions: Assumptions, tp: int, model=LLAMA_70B, **step) -> PointConfig:
    return PointConfig(gpu=H100, model=model, tp=tp, assumptions=assumptions, **step)


def batches(cfg: PointConfig, batch: np.ndarray, budget=None) -> dict:
    """evaluate_step of `cfg` at every batch of `batch` (one call)."""
    return evaluate_step(replace(cfg.step_inputs(), batch=batch), cfg.assumptions, budget)


def collectives(model) -> float:
    """A step's all-reduces and the logits' gather (as core/calibration.py prices a row)."""
    return 2.0 * model.num_hidden_layers + 1.0


def protocol_times(link_bytes, count, cfg: PointConfig):
    """(low-latency, bulk) seconds of `count` collectives moving `link_bytes`."""
    efficiency, rate = cfg.assumptions.step_efficiency, cfg.step_inputs().interconnect
    fixed = count * (efficiency.allreduce_overhead_s
                     + (cfg.tp - 1) * efficiency.allreduce_peer_overhead_s)
    moving = link_bytes / (efficiency.interconnect_efficiency * rate)
    return (moving / efficiency.allreduce_ll_share + fixed,
            moving + fixed + count * efficiency.allreduce_bulk_overhead_s)


@settings(max_examples=15, deadline=None)
@given(st.floats(0.0, 1e-4), st.sampled_from([2, 4, 8]), st.sampled_from(["parts", "full"]),
       st.sampled_from([0, 512]))
def test_a_share_of_one_is_the_single_protocol_bit_for_bit(bulk_s, tp, overlap, prefill):
    """With the low-latency protocol at the bulk one's bandwidth the bulk one never wins:
    any bulk overhead leaves every metric (and the TPOT solver's answer) as it was."""
    grid = np.arange(0.0, 2049.0)
    one = batches(config(replace(ONE, overlap=overlap), tp, prefill=prefill), grid, 0.05)
    bulk = batches(config(with_protocols(1.0, bulk_s, overlap=overlap), tp,
                          prefill=prefill), grid, 0.05)
    assert list(bulk) == list(one)
    for key, value in one.items():
        np.testing.assert_array_equal(bulk[key], value, err_msg=key)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4096), st.integers(1, 32_768), st.sampled_from([2, 4, 8]),
       st.sampled_from([0, 0, 1, 2048]))
def test_communication_is_link_time_of_the_steps_collectives(batch, context, tp, prefill):
    cfg = config(TWO, tp, batch=batch, context=context, prefill=prefill)
    step = evaluate_point(cfg)
    want = link_time(step["communication_bytes"], collectives(LLAMA_70B),
                     cfg.step_inputs().interconnect, TWO.step_efficiency, tp - 1.0)
    assert step["communication_time_s"] == pytest.approx(float(want), rel=1e-12)


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_small_batches_take_the_low_latency_protocol_and_large_ones_the_bulk(tp):
    cfg = config(TWO, tp, context=2048)
    step = batches(cfg, np.arange(1.0, 4097.0))
    low_latency, bulk = protocol_times(step["communication_bytes"], collectives(LLAMA_70B),
                                       cfg)
    np.testing.assert_allclose(step["communication_time_s"], np.minimum(low_latency, bulk),
                               rtol=1e-12)
    assert low_latency[0] < bulk[0] and bulk[-1] < low_latency[-1]  # both regimes met
    # one protocol at the same link efficiency and fixed time is faster than either
    single = batches(config(ONE, tp, context=2048), np.arange(1.0, 4097.0))
    assert np.all(step["communication_time_s"] > single["communication_time_s"])


def test_the_drafts_all_reduces_take_their_own_faster_protocol():
    """k draft steps of B tokens each: k times one step's collectives, each of the
    draft's message size."""
    k = 3
    cfg = config(TWO, 4, context=2048, spec_tokens=k, acceptance=0.7, draft_model=DRAFT)
    step = batches(cfg, np.arange(1.0, 2049.0))
    low_latency, bulk = protocol_times(step["draft_communication_bytes"],
                                       k * collectives(DRAFT), cfg)
    np.testing.assert_allclose(step["draft_communication_time_s"],
                               np.minimum(low_latency, bulk), rtol=1e-12)
    assert low_latency[0] < bulk[0] and bulk[-1] < low_latency[-1]


@settings(max_examples=30, deadline=None)
@given(st.floats(0.05, 1.0), st.floats(0.0, 1e-4), st.integers(1, 4096),
       st.integers(1, 32_768), st.sampled_from([2, 4, 8]), st.sampled_from(["parts", "full"]))
def test_a_step_is_never_faster_than_the_ideal_roofline(share, bulk_s, batch, context, tp,
                                                        overlap):
    calibrated = evaluate_point(config(with_protocols(share, bulk_s, overlap=overlap), tp,
                                       batch=batch, context=context))
    ideal = evaluate_point(config(Assumptions(overlap=overlap), tp, batch=batch,
                                  context=context))
    assert calibrated["communication_time_s"] >= ideal["communication_time_s"]
    assert calibrated["step_time_s"] >= ideal["step_time_s"]


BUDGET_CASES = {
    "llama-3-70b tp 2": config(TWO, 2, context=2048),
    "llama-3-70b tp 8, full overlap": config(replace(TWO, overlap="full"), 8, context=2048),
    "mixtral-8x7b tp 4 (routed experts)": config(TWO, 4, model=MIXTRAL, context=4096),
    "llama-3-70b tp 4, a draft's all-reduces too": config(
        TWO, 4, context=2048, spec_tokens=3, acceptance=0.7, draft_model=DRAFT),
}


@pytest.mark.parametrize("name", BUDGET_CASES)
def test_max_batch_for_tpot_is_a_brute_force_search(name):
    """Budgets between consecutive batches' times per output token, in each protocol's
    regime, and one below every batch's: the solver's answer is the largest batch of
    1..4096 whose time fits."""
    cfg = BUDGET_CASES[name]
    grid = np.arange(1.0, 4097.0)
    step = batches(cfg, grid)
    tpot = step["step_time_s"] / step.get("expected_tokens_per_step", 1.0)
    assert np.all(np.diff(tpot) > 0)
    low_latency, bulk = protocol_times(step["communication_bytes"],
                                       collectives(cfg.model), cfg)
    takes_bulk = np.flatnonzero(bulk < low_latency)  # 0-based: batch - 1
    handover = int(takes_bulk[0])
    assert 2 < handover < 4000 and np.all(takes_bulk == np.arange(handover, 4096))
    answers = [1, handover // 2, handover - 1, handover, handover + 1,
               (handover + 4096) // 2, 4095]
    budgets = np.array([0.5 * tpot[0]] + [0.5 * (tpot[b - 1] + tpot[b]) for b in answers])
    solved = batches(cfg, np.float64(1.0), budgets)["max_batch_for_tpot"]
    brute = [np.count_nonzero(tpot <= budget) for budget in budgets]
    assert brute == [0, *answers]
    assert solved.tolist() == brute


STEP_COSTS_CASES = {
    "llama-3-70b tp 4": config(TWO, 4),
    "mixtral-8x7b tp 2 (routed experts)": config(TWO, 2, model=MIXTRAL),
    "llama-3-70b tp 8, full overlap": config(replace(TWO, overlap="full"), 8),
}


@pytest.mark.parametrize("name", STEP_COSTS_CASES)
def test_step_costs_time_two_protocols_as_the_core(name):
    cfg = STEP_COSTS_CASES[name]
    costs = StepCosts(cfg.step_inputs(), cfg.assumptions, 512)  # its own check passes
    assert costs.bulk[costs.parts.index("communication")] is not None
    steps = [(1, 300, 0, 0), (8, 5000, 512, 0), (200, 1000, 0, 0), (512, 20_000, 0, 0),
             (0, 0, 2048, 1000), (64, 2000, 3000, 2500)]
    for batch, context, prefill, cached in steps:
        mine = costs.time(batch, batch * context, batch * min(context, costs.window),
                          [(prefill, cached)] if prefill else ())
        core = evaluate_point(cfg.with_changes(batch=batch, context=context, prefill=prefill,
                                               prefill_context=cached))
        assert mine == pytest.approx(core["step_time_s"], rel=1e-12)
    # the arrays' forms are `time`, to the bit, in both regimes
    sums = np.array([300, 2000, 40_000], np.int64)
    for batch in (1, 256, 512):
        expected = [costs.time(batch, int(s) * batch, float(s) * batch) for s in sums]
        assert costs.decode_times(batch, sums * batch, sums * batch).tolist() == expected
    batch, sums = np.array([1, 8, 512, 0]), np.array([300, 8 * 5000, 512 * 100, 0])
    chunk_step, chunk_tokens, chunk_cached = np.array([1, 3, 3]), np.array([512, 37, 3000]), \
        np.array([0, 0, 2500])
    expected = [costs.time(1, 300, 300), costs.time(8, 40_000, 40_000, [(512, 0)]),
                costs.time(512, 51_200, 51_200),
                costs.time(0, 0, 0, [(37, 0), (3000, 2500)])]
    got = costs.step_times(batch, sums, sums.astype(np.float64), chunk_step, chunk_tokens,
                           chunk_cached)
    assert got.tolist() == expected


def test_the_simulator_runs_under_two_protocols():
    requests = load_workload("sharegpt-8k").requests(200, parse_arrivals("poisson:rate=10"), 0)
    finish = {}
    for label, assumptions in (("two", TWO), ("one", ONE)):
        cfg = config(assumptions, 4)
        simulation = simulate(cfg.step_inputs(), assumptions,
                              SchedulerConfig(policy="chunked"), requests)
        assert np.all(simulation.finish_s > simulation.first_token_s)
        finish[label] = simulation.finish_s
    # each all-reduce is slower than the single protocol's: so is every step
    assert finish["two"].max() > finish["one"].max()
