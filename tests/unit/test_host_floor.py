"""An overlapping scheduler's host floor (`host_step_s`, `host_sequence_s`): a step takes
at least the host's time on it. What evaluate_step, its TPOT budget solver, the
simulator's step costing, a calibration's prediction and the end-to-end fit's slopes do
with it (its choice per fold: tests/unit/test_compute_share.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core.arrivals import parse_arrivals
from rooftui.core.assumptions import Assumptions, load_profile
from rooftui.core.calibration import KINDS, predict, row_costs
from rooftui.core.efficiency import host_time
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.model import load_model
from rooftui.core.point import PointConfig, evaluate_point
from rooftui.core.scheduler import SchedulerConfig, StepCosts, simulate
from rooftui.core.step import evaluate_step
from rooftui.core.workloads import load_workload
from rooftui.sweeps.measured import to_measurements

H200 = load_gpu("h200")
LLAMA_8B, LLAMA_70B = load_model("llama-3.1-8b"), load_model("llama-3-70b")
KERNELS = load_profile("h100-trtllm")


def with_floor(step_s: float, sequence_s: float, base: Assumptions = KERNELS,
               **assumptions) -> Assumptions:
    return replace(base, efficiency=replace(base.efficiency, host_step_s=step_s,
                                            host_sequence_s=sequence_s), **assumptions)


FLOOR = with_floor(10e-3, 40e-6)  # near what SGLang's H200 Llama-3.1-8B runs fit


def config(assumptions: Assumptions, tp: int = 8, model=LLAMA_8B, **step) -> PointConfig:
    return PointConfig(gpu=H200, model=model, tp=tp, assumptions=assumptions, **step)


def batches(cfg: PointConfig, batch: np.ndarray, budget=None) -> dict:
    return evaluate_step(replace(cfg.step_inputs(), batch=batch), cfg.assumptions, budget)


def test_no_floor_is_the_step_model_as_it_was():
    """The defaults (0, 0) change nothing, and a floor of zero adds no key."""
    grid = np.arange(0.0, 1025.0)
    plain = batches(config(KERNELS, prefill=512), grid, 0.03)
    zero = batches(config(with_floor(0.0, 0.0), prefill=512), grid, 0.03)
    assert "host_s" not in plain and list(zero) == list(plain)
    for key, value in plain.items():
        np.testing.assert_array_equal(zero[key], value, err_msg=key)


@settings(max_examples=30, deadline=None)
@given(st.floats(0.0, 0.05), st.floats(0.0, 1e-4), st.sampled_from([1, 2, 8]),
       st.sampled_from([0, 0, 2048]), st.sampled_from(["parts", "full"]))
def test_a_step_takes_the_larger_of_the_gpus_time_and_the_hosts(step_s, sequence_s, tp,
                                                                 prefill, overlap):
    grid = np.arange(0.0, 1025.0)
    gpu = batches(config(replace(KERNELS, overlap=overlap), tp, prefill=prefill), grid)
    floored = batches(config(with_floor(step_s, sequence_s, overlap=overlap), tp,
                             prefill=prefill), grid)
    sequences = grid + (prefill > 0)
    host = np.where(sequences > 0, step_s + sequences * sequence_s, 0.0)
    np.testing.assert_array_equal(floored["step_time_s"],
                                  np.maximum(gpu["step_time_s"], host))
    if step_s or sequence_s:
        np.testing.assert_array_equal(floored["host_s"], host)
    # the work itself does not change: only the time it takes
    for key in ("flops", "bytes", "gemm_time_s", "attention_time_s"):
        np.testing.assert_array_equal(floored[key], gpu[key], err_msg=key)


def test_a_floor_sets_a_short_step_and_hides_behind_a_long_one():
    small = evaluate_point(config(FLOOR, batch=1, context=1500))
    large = evaluate_point(config(FLOOR, tp=1, model=LLAMA_70B, batch=512, context=1500))
    assert small["step_time_s"] == pytest.approx(10e-3 + 40e-6)
    gpu = evaluate_point(config(KERNELS, tp=1, model=LLAMA_70B, batch=512, context=1500))
    assert large["step_time_s"] == gpu["step_time_s"] > large["host_s"]


BUDGET_CASES = {
    "llama-3.1-8b tp 8": config(FLOOR, 8, context=2048),
    "llama-3.1-8b tp 1": config(FLOOR, 1, context=2048),
    "llama-3-70b tp 2, full overlap": config(with_floor(5e-3, 20e-6, overlap="full"), 2,
                                             model=LLAMA_70B, context=2048),
    "llama-3.1-8b tp 8, no time per sequence": config(with_floor(12e-3, 0.0), 8,
                                                      context=2048),
}


@pytest.mark.parametrize("name", BUDGET_CASES)
def test_max_batch_for_tpot_is_a_brute_force_search(name):
    """Budgets between consecutive batches' times, where the host and where the GPU sets
    them: the solver's answer is the largest batch of 1..4096 whose step fits."""
    cfg = BUDGET_CASES[name]
    grid = np.arange(1.0, 4097.0)
    tpot = batches(cfg, grid)["step_time_s"]
    assert np.all(np.diff(tpot) >= 0)
    rising = np.flatnonzero(np.diff(tpot) > 0)  # where one more sequence costs time
    answers = sorted({int(b) + 1 for b in rising[:: max(1, rising.size // 6)]} | {4095})
    budgets = np.array([0.5 * tpot[0]] + [0.5 * (tpot[b - 1] + tpot[b]) for b in answers])
    solved = batches(cfg, np.float64(1.0), budgets)["max_batch_for_tpot"]
    brute = [np.count_nonzero(tpot <= budget) for budget in budgets]
    assert solved.tolist() == brute
    assert brute[0] == 0


STEP_COSTS_CASES = {
    "llama-3.1-8b tp 8": config(FLOOR, 8),
    "llama-3-70b tp 2": config(with_floor(5e-3, 20e-6), 2, model=LLAMA_70B),
    "llama-3.1-8b tp 1, full overlap": config(with_floor(10e-3, 40e-6, overlap="full"), 1),
}


@pytest.mark.parametrize("name", STEP_COSTS_CASES)
def test_step_costs_time_the_floor_as_the_core(name):
    """Its own check against evaluate_step passes at construction; each prompt chunk of a
    step counts as one sequence for the host."""
    cfg = STEP_COSTS_CASES[name]
    costs = StepCosts(cfg.step_inputs(), cfg.assumptions, 512)
    for batch, context, prefill, cached in [(1, 300, 0, 0), (8, 5000, 512, 0),
                                            (200, 1000, 0, 0), (512, 20_000, 0, 0),
                                            (0, 0, 2048, 1000)]:
        mine = costs.time(batch, batch * context, batch * min(context, costs.window),
                          [(prefill, cached)] if prefill else ())
        core = evaluate_point(cfg.with_changes(batch=batch, context=context, prefill=prefill,
                                               prefill_context=cached))
        assert mine == pytest.approx(core["step_time_s"], rel=1e-12)
    efficiency = cfg.assumptions.step_efficiency
    two_chunks = costs.time(0, 0, 0, [(1, 0), (1, 0)])
    assert two_chunks >= host_time(2, efficiency)
    batch, sums = np.array([1, 8, 0]), np.array([300, 40_000, 0])
    expected = [costs.time(1, 300, 300), costs.time(8, 40_000, 40_000, [(512, 0)]),
                costs.time(0, 0, 0, [(37, 0), (3000, 2500)])]
    got = costs.step_times(batch, sums, sums.astype(np.float64), np.array([1, 2, 2]),
                           np.array([512, 37, 3000]), np.array([0, 0, 2500]))
    assert got.tolist() == expected


def test_the_simulators_steps_are_no_shorter_than_the_hosts():
    requests = load_workload("sharegpt-8k").requests(200, parse_arrivals("poisson:rate=20"), 0)
    cfg = config(FLOOR, 8)
    simulation = simulate(cfg.step_inputs(), FLOOR, SchedulerConfig(policy="chunked"),
                          requests)
    steps = simulation.steps
    host = host_time(simulation.useful_slots, FLOOR.step_efficiency)
    assert np.all(steps["duration_s"] >= host * (1 - 1e-12))
    assert np.any(np.isclose(steps["duration_s"], host, rtol=1e-12))  # it binds


def test_a_calibrated_step_row_is_no_shorter_than_the_hosts_time():
    rows = to_measurements([
        {"kind": "step", "gpu": "h200", "time_s": 0.02, "model": "llama-3.1-8b", "tp": 8,
         "batch": batch, "context": 1000, "weight_dtype": "bf16", "dataset": "steps"}
        for batch in (1, 64, 512)])
    costs = row_costs(rows, H200, Assumptions())
    assert np.all(costs.kind == KINDS.index("step"))
    gpu = predict(costs, KERNELS.efficiency, mbu=KERNELS.mbu)
    floored = predict(costs, FLOOR.efficiency, mbu=KERNELS.mbu)
    np.testing.assert_array_equal(floored, np.maximum(gpu, 10e-3 + 40e-6 * costs.sequences))
    assert floored[0] > gpu[0]


def test_a_negative_host_time_is_refused():
    with pytest.raises(SpecError, match="host_sequence_s must be >= 0"):
        with_floor(0.0, -1e-6)
