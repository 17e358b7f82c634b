"""Step costs shared between replays (`StepCosts.with_efficiency` and the end-to-end
replay's caches): a StepCosts carried to other overheads, host floor or fractions of the
peaks times every step as one built afresh there, to the bit, and a replay made with warm
caches is the replay made with none."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core.arrivals import parse_arrivals
from rooftui.core.assumptions import Assumptions, load_profile
from rooftui.core.hardware import load_gpu
from rooftui.core.model import load_model
from rooftui.core.point import IDEAL_ASSUMPTIONS, PointConfig
from rooftui.core.scheduler import SchedulerConfig, StepCosts, simulate
from rooftui.core.workloads import load_workload
from rooftui.sweeps import end_to_end as e2e
from rooftui.sweeps.bench_results import Run

KERNELS = load_profile("h100-sxm-kernels")  # two all-reduce protocols, prompt head times
TRTLLM = load_profile("h100-trtllm")
CONFIGS = {
    "llama-3-70b TP4": PointConfig(gpu=load_gpu("h100-sxm"), model=load_model("llama-3-70b"),
                                   tp=4),
    "mixtral TP2": PointConfig(gpu=load_gpu("h100-sxm"), model=load_model("mixtral-8x7b"),
                               tp=2),
    "gemma-2 windowed": PointConfig(gpu=load_gpu("h200"), model=load_model("gemma-2-9b")),
}
STEPS = [(1, 300, 0, 0), (8, 5000, 512, 0), (64, 2000, 3000, 2500), (0, 0, 2048, 1000),
         (64, 9000, 0, 0), (3, 100, 37, 10_000)]
MAX_BATCH = 64


def step_times(costs: StepCosts) -> list[float]:
    return [costs.time(b, b * s, b * min(s, costs.window), [(n, c)] if n else ())
            for b, s, n, c in STEPS]


def efficiency(base: Assumptions, step_s, layer_s, allreduce_s, host_step_s, host_seq_s):
    return replace(base.efficiency, step_overhead_s=step_s, layer_overhead_s=layer_s,
                   allreduce_overhead_s=allreduce_s, host_step_s=host_step_s,
                   host_sequence_s=host_seq_s)


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("base", [KERNELS, TRTLLM, IDEAL_ASSUMPTIONS],
                         ids=["h100-sxm-kernels", "h100-trtllm", "ideal"])
@settings(max_examples=8, deadline=None)
@given(step_s=st.sampled_from([0.0, 1e-3, 7.3e-3]), layer_s=st.sampled_from([0.0, 21.7e-6]),
       allreduce_s=st.sampled_from([0.0, 18.7e-6, 0.13e-3]),
       host=st.sampled_from([(0.0, 0.0), (10e-3, 40e-6), (5e-3, 0.0)]))
def test_costs_carried_to_another_efficiency_are_the_costs_built_there(
        name, base, step_s, layer_s, allreduce_s, host):
    config = CONFIGS[name].with_changes(assumptions=base)
    costs = StepCosts(config.step_inputs(), base, MAX_BATCH)
    before = step_times(costs)
    other = replace(base, efficiency=efficiency(KERNELS, step_s, layer_s, allreduce_s, *host))
    carried = costs.with_efficiency(other.efficiency)
    fresh = StepCosts(config.step_inputs(), other, MAX_BATCH)
    assert step_times(carried) == step_times(fresh)
    assert step_times(costs) == before  # the one carried from is untouched
    sums = np.array([300, 2000, 40_000], np.int64)
    for batch in (1, MAX_BATCH):
        assert (carried.decode_times(batch, sums * batch, sums * batch).tolist()
                == fresh.decode_times(batch, sums * batch, sums * batch).tolist())


def test_a_simulation_on_carried_costs_is_the_one_on_fresh_costs():
    config = CONFIGS["llama-3-70b TP4"].with_changes(assumptions=KERNELS)
    other = replace(KERNELS, efficiency=efficiency(KERNELS, 2e-3, 10e-6, 20e-6, 8e-3, 30e-6))
    carried = StepCosts(config.step_inputs(), KERNELS, MAX_BATCH).with_efficiency(
        other.efficiency)
    fresh = StepCosts(config.step_inputs(), other, MAX_BATCH)
    scheduler = SchedulerConfig(policy="chunked", max_batch=MAX_BATCH, token_budget=2048)
    requests = load_workload("sharegpt-8k").requests(200, parse_arrivals("poisson:rate=8"), 3)
    one = simulate(config.step_inputs(), other, scheduler, requests, carried)
    two = simulate(config.step_inputs(), other, scheduler, requests, fresh)
    assert np.array_equal(one.first_token_s, two.first_token_s)
    assert np.array_equal(one.finish_s, two.finish_s)
    assert all(np.array_equal(one.steps[key], two.steps[key]) for key in one.steps)


def test_a_replay_with_warm_caches_is_the_replay_with_none():
    run = Run(tool="test", source="c12 900/40", concurrency=12, requests=24, input_mean=900,
              output_mean=40)
    target = e2e.Target("llama-3-70b", "h200", 4, "fp8", engine="vllm")
    at = e2e.with_overheads(TRTLLM, [1e-3, 20e-6, 15e-6, 0.09])
    for overheads in ([0.0, 0.0, 0.0, 0.0], [2e-3, 0.0, 30e-6, 0.2]):  # warm them elsewhere
        e2e.replay_run(run, target, e2e.with_overheads(TRTLLM, overheads))
    warm = e2e.replay_run(run, target, at)
    for cached in (e2e._costs_at_no_overheads, e2e._costs_without_front_end,
                   e2e._coefficients_at_no_overheads):
        cached.cache_clear()
    cold = e2e.replay_run(run, target, at)
    assert warm.predicted == cold.predicted
    assert np.array_equal(warm.step_coefficients, cold.step_coefficients)
