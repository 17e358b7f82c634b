"""A prefill's attention fixed time per prompt and query head
(`attention_prompt_head_overhead_s`): seconds, paid once per prompt chunk of a step per
layer and query head on the GPU, on the attention's memory side; never by decodes (nor a
speculative draft's steps); the same in the step model, the simulator's costs and a fit's
predictions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rooftui.core.assumptions import Assumptions
from rooftui.core.calibration import predict, row_costs
from rooftui.core.efficiency import Efficiency
from rooftui.core.hardware import load_gpu
from rooftui.core.model import load_model
from rooftui.core.point import PointConfig, evaluate_point
from rooftui.core.scheduler import StepCosts
from rooftui.sweeps.measured import to_measurements

H100 = load_gpu("h100-sxm")
BASE = Efficiency(step_overhead_s=1e-3, attention_mbu=0.8, attention_mbu_half=50.0)
prompt_head = st.floats(1e-10, 1e-7)
NAME = "attention_prompt_head_overhead_s"


def with_prompt_head(seconds: float, base: Efficiency = BASE) -> Efficiency:
    return base.with_values({NAME: seconds})


def step(efficiency, model="llama-3-8b", **values):
    config = PointConfig(gpu=H100, model=load_model(model),
                         assumptions=Assumptions(efficiency=efficiency), **values)
    return evaluate_point(config)


def attention_compute_s(result) -> float:
    """The attention's compute side under BASE (attention_mfu 1, no attention_mfu_half;
    `attention_compute_bound` compares the real costs, not the timed ones)."""
    inputs = PointConfig(gpu=H100, model=load_model("llama-3-8b")).step_inputs()
    return result["attention_flops"] / float(inputs.mfu * inputs.peak_flops)


def paid(model: str, tp: int, seconds: float, pp: int = 1) -> float:
    """layers (of a stage) x query heads on the GPU x the time per prompt and head."""
    config = load_model(model)
    return config.num_hidden_layers / pp * config.num_attention_heads / tp * seconds


@settings(max_examples=40, deadline=None)
@given(prompt_head, st.integers(0, 256), st.integers(1, 8192), st.integers(1, 64),
       st.integers(0, 256), st.sampled_from([1, 2, 8]))
def test_a_step_with_a_prompt_pays_its_heads_time_exactly(seconds, batch, context, prefill,
                                                          cached, tp):
    """Prefill-only (batch 0) and mixed steps, where attention is memory-bound (both
    ways), so the time adds to the step as it is."""
    point = {"batch": batch, "context": context, "prefill": prefill,
             "prefill_context": cached, "tp": tp}
    plain, priced = step(BASE, **point), step(with_prompt_head(seconds), **point)
    # memory-bound without it, so more so with it
    assume(plain["attention_time_s"] > attention_compute_s(plain) * (1 + 1e-9))
    expected = paid("llama-3-8b", tp, seconds)
    assert priced["attention_time_s"] - plain["attention_time_s"] == pytest.approx(
        expected, rel=1e-9, abs=1e-15)
    assert priced["step_time_s"] - plain["step_time_s"] == pytest.approx(
        expected, rel=1e-9, abs=1e-15)


def test_a_compute_bound_prompt_still_pays_it_on_the_memory_side():
    """A long prompt's attention is compute-bound: the heads' time (memory side) hides
    under its FLOPs until it exceeds them, then the step grows with it."""
    prompt = {"batch": 0, "prefill": 8192}
    plain = step(BASE, **prompt)
    assert plain["attention_time_s"] == attention_compute_s(plain)
    small = step(with_prompt_head(1e-12), **prompt)
    assert small["step_time_s"] == plain["step_time_s"]
    large = step(with_prompt_head(1e-4), **prompt)
    assert large["attention_time_s"] > paid("llama-3-8b", 1, 1e-4) > plain["attention_time_s"]
    assert large["step_time_s"] - plain["step_time_s"] == pytest.approx(
        large["attention_time_s"] - plain["attention_time_s"], rel=1e-9)


def test_a_pipeline_stage_pays_its_layers_as_a_decode_sequence_pays_its_query_heads():
    """Per stage both are layers/pp x heads/tp x the time, stretched alike by the bubble."""
    stage = {"tp": 2, "pp": 2, "context": 16}
    prompt = {**stage, "batch": 0, "prefill": 1}
    decode = {**stage, "batch": 1}
    prompt_extra = (step(with_prompt_head(4e-8), **prompt)["attention_time_s"]
                    - step(BASE, **prompt)["attention_time_s"])
    query_heads = BASE.with_values({"attention_query_head_overhead_s": 4e-8})
    decode_extra = (step(query_heads, **decode)["attention_time_s"]
                    - step(BASE, **decode)["attention_time_s"])
    assert prompt_extra == pytest.approx(decode_extra, rel=1e-9)
    assert prompt_extra > 0


def test_an_8_bit_cache_pays_its_own_tables_value():
    efficiency = BASE.with_values({NAME: 1e-8, f"fp8.{NAME}": 3e-8})
    prompt = {"batch": 0, "prefill": 1, "kv_dtype": "fp8"}
    extra = step(efficiency, **prompt)["step_time_s"] - step(BASE, **prompt)["step_time_s"]
    assert extra == pytest.approx(paid("llama-3-8b", 1, 3e-8), rel=1e-9)


@pytest.mark.parametrize("point", [
    {"batch": 64, "context": 2048},
    {"batch": 8, "context": 300, "tp": 2},
    {"batch": 16, "context": 1000, "spec_tokens": 3, "acceptance": 0.7},
])
def test_a_decode_only_step_pays_nothing_bit_for_bit(point):
    assert step(with_prompt_head(5e-8), **point) == step(BASE, **point)


def test_a_speculative_drafts_steps_do_not_pay_it():
    """The draft's k steps are decodes: only the target's prompt chunk pays, once."""
    point = {"model": "llama-2-70b", "batch": 4, "context": 500, "spec_tokens": 3,
             "acceptance": 0.7, "draft_model": load_model("llama-2-7b")}
    assert step(with_prompt_head(5e-8), **point) == step(BASE, **point)
    prompt = {**point, "prefill": 1}
    plain, priced = step(BASE, **prompt), step(with_prompt_head(5e-8), **prompt)
    assert priced["draft_attention_time_s"] == plain["draft_attention_time_s"]
    assert priced["attention_time_s"] - plain["attention_time_s"] == pytest.approx(
        paid("llama-2-70b", 1, 5e-8), rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.floats(0.0, 1e-7), st.floats(0.0, 1e-7), st.integers(0, 512),
       st.integers(1, 32768), st.sampled_from([0, 1, 512, 8192]), st.sampled_from([1, 4]))
def test_the_step_time_never_falls_as_the_prompt_head_time_grows(low, extra, batch, context,
                                                                  prefill, tp):
    point = {"batch": batch, "context": context, "prefill": prefill, "tp": tp}
    times = [step(with_prompt_head(t), **point)["step_time_s"] for t in (low, low + extra)]
    assert times[1] >= times[0]


@settings(max_examples=30, deadline=None)
@given(prompt_head, st.integers(1, 16384), st.sampled_from([0, 1, 512]),
       st.floats(0.005, 0.2), st.sampled_from([1, 4]))
def test_the_largest_batch_under_a_budget_meets_it_with_the_prompt_head_time(
        seconds, context, prefill, budget, tp):
    efficiency = with_prompt_head(seconds)
    point = {"context": context, "prefill": prefill, "tp": tp}
    best = step(efficiency, tpot_budget=budget, **point)["max_batch_for_tpot"]
    if best >= 1:
        assert step(efficiency, batch=int(best), **point)["step_time_s"] <= budget * (1 + 1e-12)
    assert step(efficiency, batch=int(best) + 1, **point)["step_time_s"] > budget


@pytest.mark.parametrize("tp", [1, 2])
def test_the_simulator_charges_each_prompt_chunk_once(tp):
    """StepCosts checks itself against evaluate_step when built (one chunk per step, with
    and without decodes); a step of two chunks pays twice what one of none pays less, and
    its array paths agree with `time` to the bit."""
    model = load_model("llama-2-7b")
    costs = {}
    for seconds in (0.0, 4e-8):
        assumptions = Assumptions(efficiency=with_prompt_head(seconds))
        config = PointConfig(gpu=H100, model=model, assumptions=assumptions, tp=tp)
        costs[seconds] = StepCosts(config.step_inputs(), assumptions, max_batch=64)
    priced = costs[4e-8]
    chunks = [(1.0, 0.0), (3.0, 20.0)]  # short prompts: memory-bound attention
    extra = priced.time(5, 500.0, 500.0, chunks) - costs[0.0].time(5, 500.0, 500.0, chunks)
    assert extra == pytest.approx(2 * paid("llama-2-7b", tp, 4e-8), rel=1e-9)
    assert priced.time(5, 500.0, 500.0) == costs[0.0].time(5, 500.0, 500.0)

    got = priced.step_times(np.array([5, 0]), np.array([500.0, 0.0]), np.array([500.0, 0.0]),
                            np.array([0, 0, 1]), np.array([1, 3, 512]), np.array([0, 20, 0]))
    assert got.tolist() == [priced.time(5, 500.0, 500.0, chunks),
                            priced.time(0, 0.0, 0.0, [(512.0, 0.0)])]
    flops, nbytes = priced.chunk_arrays(np.array([512.0]), np.array([0.0]))
    alone = priced.times(flops, nbytes, np.array([512]), np.array([1]), 0)
    assert alone[0] == pytest.approx(priced.time(0, 0.0, 0.0, [(512.0, 0.0)]), rel=1e-12)


def test_a_fits_prediction_of_a_step_row_is_the_step_models():
    efficiency = with_prompt_head(3e-8)
    cases = [(tp, batch, prefill) for tp in (1, 2) for batch in (0, 16) for prefill in (1, 256)]
    rows = to_measurements([{
        "kind": "step", "gpu": "h100-sxm", "model": "llama-2-7b", "tp": float(tp),
        "batch": float(batch), "context": 1000.0, "prefill": float(prefill),
        "prompts": 1.0, "time_s": 1.0, "dataset": "steps"} for tp, batch, prefill in cases])
    predicted = predict(row_costs(rows, H100, Assumptions()), efficiency)
    for i, (tp, batch, prefill) in enumerate(cases):
        want = step(efficiency, model="llama-2-7b", batch=batch, context=1000,
                    prefill=prefill, tp=tp)["step_time_s"]
        assert predicted[i] == pytest.approx(want, rel=1e-9)
