"""A decode sequence's attention fixed time per KV head and query head
(`attention_kv_head_overhead_s`, `attention_query_head_overhead_s`): seconds, paid by
decode sequences only, affine in the batch (the TPOT solver stays exact), the same in the
step model, the simulator's costs and a fit's predictions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core.assumptions import Assumptions
from rooftui.core.calibration import predict, row_costs
from rooftui.core.efficiency import Efficiency
from rooftui.core.hardware import load_gpu
from rooftui.core.model import load_model
from rooftui.core.point import PointConfig, evaluate_point
from rooftui.core.scheduler import StepCosts
from rooftui.sweeps.measured import to_measurements

H100, H200 = load_gpu("h100-sxm"), load_gpu("h200")
BASE = Efficiency(step_overhead_s=1e-3, attention_mbu=0.8, attention_mbu_half=50.0)
overheads = st.tuples(st.floats(0.0, 1e-7), st.floats(0.0, 1e-7))


def with_heads(kv_head: float, query_head: float, base: Efficiency = BASE) -> Efficiency:
    return base.with_values({"attention_kv_head_overhead_s": kv_head,
                             "attention_query_head_overhead_s": query_head})


def step(efficiency, gpu=H100, model="llama-3-8b", **values):
    config = PointConfig(gpu=gpu, model=load_model(model),
                         assumptions=Assumptions(efficiency=efficiency), **values)
    return evaluate_point(config)


@settings(max_examples=40, deadline=None)
@given(overheads, st.integers(1, 512), st.integers(1, 32768), st.sampled_from([1, 2, 8]))
def test_a_decode_step_pays_each_sequences_head_times_exactly(times, batch, context, tp):
    kv_head, query_head = times
    model = load_model("llama-3-8b")
    kv_heads = max(model.num_key_value_heads / tp, 1.0)
    query_heads = model.num_attention_heads / tp
    plain = step(BASE, batch=batch, context=context, tp=tp)["step_time_s"]
    paid = step(with_heads(kv_head, query_head), batch=batch, context=context,
                tp=tp)["step_time_s"]
    # decode attention is memory-bound here, so the time adds as it is
    expected = batch * model.num_hidden_layers * (kv_heads * kv_head + query_heads * query_head)
    assert paid - plain == pytest.approx(expected, rel=1e-9, abs=1e-15)


@settings(max_examples=40, deadline=None)
@given(overheads, overheads, st.integers(0, 512), st.integers(1, 32768),
       st.sampled_from([0, 512]))
def test_the_step_time_never_falls_as_a_head_time_grows(low, extra, batch, context, prefill):
    high = (low[0] + extra[0], low[1] + extra[1])
    times = [step(with_heads(*t), batch=batch, context=context,
                  prefill=prefill)["step_time_s"] for t in (low, high)]
    assert times[1] >= times[0]


def test_a_prefill_only_step_does_not_pay_them():
    prompt = {"batch": 0, "prefill": 2048}
    assert (step(with_heads(5e-8, 5e-8), **prompt)["step_time_s"]
            == step(BASE, **prompt)["step_time_s"])


def test_the_time_is_in_seconds_whatever_the_bandwidth():
    """At a few cached tokens the head times dominate and carry over between GPUs: the
    same on H100 and H200 (bandwidth 1 : 1.43), unlike attention_mbu_half's bytes."""
    decode = {"batch": 512, "context": 15}
    extra = {}
    for gpu in (H100, H200):
        extra[gpu.name] = (step(with_heads(3e-8, 3e-9), gpu=gpu, **decode)["attention_time_s"]
                           - step(BASE, gpu=gpu, **decode)["attention_time_s"])
    assert extra[H100.name] == pytest.approx(extra[H200.name], rel=1e-9)


@settings(max_examples=30, deadline=None)
@given(overheads, st.integers(1, 16384), st.floats(0.005, 0.2), st.sampled_from([1, 4]))
def test_the_largest_batch_under_a_budget_meets_it_with_the_head_times(times, context,
                                                                       budget, tp):
    efficiency = with_heads(*times)
    best = step(efficiency, context=context, tp=tp, tpot_budget=budget)["max_batch_for_tpot"]
    if best >= 1:
        assert step(efficiency, batch=int(best), context=context,
                    tp=tp)["step_time_s"] <= budget * (1 + 1e-12)
    assert step(efficiency, batch=int(best) + 1, context=context, tp=tp)["step_time_s"] > budget


def test_the_simulator_charges_decodes_not_prompt_chunks():
    """StepCosts checks itself against evaluate_step when built (steps mixing decodes and
    chunks among them); its array path agrees with it for prefill-only steps too."""
    assumptions = Assumptions(efficiency=with_heads(4e-8, 6e-9))
    config = PointConfig(gpu=H100, model=load_model("llama-2-7b"), assumptions=assumptions)
    costs = StepCosts(config.step_inputs(), assumptions, max_batch=64)
    flops, nbytes = costs.chunk_arrays(np.array([512.0]), np.array([0.0]))
    alone = costs.times(flops, nbytes, np.array([512]), np.array([1]), 0)
    assert alone[0] == pytest.approx(costs.time(0, 0.0, 0.0, [(512.0, 0.0)]), rel=1e-12)


def test_a_fits_prediction_of_a_step_row_is_the_step_models():
    efficiency = with_heads(3e-8, 5e-9)
    rows = to_measurements([{
        "kind": "step", "gpu": "h100-sxm", "model": "llama-2-7b", "tp": float(tp),
        "batch": float(batch), "context": 1000.0, "prefill": 0.0, "prompts": 0.0,
        "time_s": 1.0, "dataset": "steps"} for tp in (1, 2) for batch in (1, 64)])
    predicted = predict(row_costs(rows, H100, Assumptions()), efficiency)
    for i, (tp, batch) in enumerate((tp, b) for tp in (1, 2) for b in (1, 64)):
        want = step(efficiency, model="llama-2-7b", batch=batch, context=1000,
                    tp=tp)["step_time_s"]
        assert predicted[i] == pytest.approx(want, rel=1e-9)


def test_explains_split_names_a_part_for_every_parameter_a_kernel_or_step_fit_moves():
    """`sweep validate --explain` switches parameters by part: one left out of every part
    would have its error counted as the model's shape."""
    from rooftui.core.calibration import FIT_PARAMETERS
    from rooftui.sweeps.validation import PARTS

    named = {name for names in PARTS.values() for name in names}
    replayed = {"request_overhead_s"}  # fitted by replay, not by a kernel or step fit
    assert {n.rpartition(".")[2] for n in FIT_PARAMETERS} - named == replayed
