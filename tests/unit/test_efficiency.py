"""The efficiency model: ideal is the roofline itself, and no efficiency makes it faster."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core.assumptions import Assumptions
from rooftui.core.calibration import KINDS, TIMERS, Measurements, predict, row_costs
from rooftui.core.efficiency import (
    COMPUTE_TABLES,
    PARAMETERS,
    QUANTISING_TABLES,
    TABLE_PARAMETERS,
    DtypeEfficiency,
    Efficiency,
    attention_times,
    efficiency_from_dict,
    fixed_step_time,
    gemm_times,
    link_time,
)
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.model import load_model
from rooftui.core.step import StepInputs
from rooftui.core.tables import dtype_code

H100 = load_gpu("h100-sxm")


def _value(name: str):
    kind = PARAMETERS[name][0]
    if kind == "fraction":
        return st.floats(min_value=1e-3, max_value=1.0)
    return st.floats(min_value=0.0, max_value=1e4 if "half" in name or "bytes" in name
                     else 0.1)


def _dtype_table(table: str):
    """A dtype's own GEMM and attention values, each one given or not (None: the
    base's)."""
    names = [n for n in TABLE_PARAMETERS
             if n != "activation_quant_bytes" or table in QUANTISING_TABLES]
    return st.builds(DtypeEfficiency, **{n: st.none() | _value(n) for n in names})


def efficiencies():
    """Any valid efficiency: fractions in (0, 1], amounts >= 0, with any dtype tables."""
    values = {name: _value(name) for name in PARAMETERS}
    tables = {table: _dtype_table(table) for table in COMPUTE_TABLES}
    return st.builds(Efficiency, **values, **tables)


def test_defaults_are_the_ideal_roofline():
    ideal = Efficiency()
    assert ideal.is_ideal
    flops, nbytes = np.array([2e12, 0.0]), np.array([1e9, 5e8])
    compute, memory = gemm_times(flops, nbytes, 1e9, 1e15, 1e12, ideal)
    np.testing.assert_array_equal(compute, flops / 1e15)
    np.testing.assert_array_equal(memory, nbytes / 1e12)
    compute, memory = attention_times(flops, nbytes, 8, 8, 1e6, 1e3, 1e15, 1e12, ideal)
    np.testing.assert_array_equal(compute, flops / 1e15)
    np.testing.assert_array_equal(memory, nbytes / 1e12)
    assert fixed_step_time(80, ideal) == 0.0
    assert link_time(0.0, 0.0, 450e9, ideal) == 0.0
    assert link_time(1e6, 1, 450e9, ideal) == pytest.approx(1e6 / 450e9)


@pytest.mark.parametrize(("name", "value"), [
    ("gemm_mfu", 0.0), ("gemm_mbu", 1.5), ("attention_mbu", -0.1),
    ("step_overhead_s", -1e-3), ("gemm_m_half", math.nan), ("kernel_overhead_s", math.inf)])
def test_out_of_range_values_are_refused(name, value):
    with pytest.raises(SpecError, match=name):
        Efficiency(**{name: value})


def test_profile_table_is_checked_and_names_the_file():
    efficiency = efficiency_from_dict({"gemm_mfu": 0.8, "step_overhead_s": 0.02}, "p.toml")
    assert efficiency == Efficiency(gemm_mfu=0.8, step_overhead_s=0.02)
    with pytest.raises(SpecError, match=r"p.toml \[efficiency\].*gemm_mfuu.*gemm_mfu"):
        efficiency_from_dict({"gemm_mfuu": 0.8}, "p.toml")
    with pytest.raises(SpecError, match=r"p.toml \[efficiency\].*attention_mbu"):
        efficiency_from_dict({"attention_mbu": 2.0}, "p.toml")
    with pytest.raises(SpecError, match="must be a number"):
        efficiency_from_dict({"gemm_mbu": "fast"}, "p.toml")


def test_dtype_tables_are_parsed_and_checked():
    efficiency = efficiency_from_dict({"gemm_mfu": 0.8, "fp8": {"gemm_mfu": 0.6,
                                                                "activation_quant_bytes": 4}},
                                      "p.toml")
    assert efficiency.value("fp8.gemm_mfu") == 0.6
    assert efficiency.value("fp4.gemm_mfu") == 0.8  # none of its own: the base
    assert efficiency.as_dict()["fp8.activation_quant_bytes"] == 4
    assert "fp4.gemm_mfu" not in efficiency.as_dict()
    with pytest.raises(SpecError, match=r"p.toml \[efficiency.fp8\].*gemm_mfuu"):
        efficiency_from_dict({"fp8": {"gemm_mfuu": 0.6}}, "p.toml")
    with pytest.raises(SpecError, match=r"p.toml \[efficiency.bf16\].*activation_quant"):
        efficiency_from_dict({"bf16": {"activation_quant_bytes": 3}}, "p.toml")
    with pytest.raises(SpecError, match=r"p.toml \[efficiency\].*fp8.gemm_mbu|gemm_mbu"):
        efficiency_from_dict({"fp8": {"gemm_mbu": 1.5}}, "p.toml")
    with pytest.raises(SpecError, match=r"\[efficiency\].*unknown key 'fp6'"):
        efficiency_from_dict({"fp6": {"gemm_mfu": 0.5}}, "p.toml")
    with pytest.raises(SpecError, match=r"\[efficiency.fp8\] must be a table"):
        efficiency_from_dict({"fp8": 0.5}, "p.toml")


def test_each_compute_dtype_gets_its_own_gemm_values_else_the_base():
    efficiency = Efficiency(gemm_mfu=0.8, kernel_overhead_s=4e-6, activation_quant_bytes=2.0,
                            fp8=DtypeEfficiency(gemm_mfu=0.6, kernel_overhead_s=1.3e-5),
                            fp4=DtypeEfficiency(activation_quant_bytes=5.0))
    names = ("bf16", "fp16", "fp32", "fp8", "int8", "fp4")
    chosen = efficiency.for_compute_dtypes(np.array([dtype_code(n) for n in names]))
    np.testing.assert_array_equal(chosen.gemm_mfu, [0.8, 0.8, 0.8, 0.6, 0.6, 0.8])
    np.testing.assert_array_equal(chosen.kernel_overhead_s,
                                  [4e-6, 4e-6, 4e-6, 1.3e-5, 1.3e-5, 4e-6])
    # only 8- and 4-bit GEMMs quantise their activations
    np.testing.assert_array_equal(chosen.activation_quant_bytes, [0, 0, 0, 2.0, 2.0, 5.0])
    assert chosen.attention_mbu == efficiency.attention_mbu
    assert Efficiency().with_values(efficiency.as_dict()) == efficiency


def test_gemm_compute_efficiency_is_half_at_m_half():
    efficiency = Efficiency(gemm_mfu=0.8, gemm_m_half=64)
    params, m = 4096 * 4096, 64
    compute, _ = gemm_times(2.0 * params * m, 0.0, params, 1e15, 1e12, efficiency)
    assert 2.0 * params * m / compute / 1e15 == pytest.approx(0.4)
    compute, _ = gemm_times(2.0 * params * 8192, 0.0, params, 1e15, 1e12, efficiency)
    assert 2.0 * params * 8192 / compute / 1e15 == pytest.approx(0.8 * 8192 / (8192 + 64))


def test_attention_bandwidth_efficiency_rises_with_context():
    efficiency = Efficiency(attention_mbu=0.9, attention_mbu_half=512)
    bytes_per_key = 4096.0
    reached = []
    for context in (128, 512, 8192):
        _, memory = attention_times(0.0, context * bytes_per_key, 1, 1, 0.0, bytes_per_key,
                                    1e15, 1e12, efficiency)
        reached.append(context * bytes_per_key / memory / 1e12)
    assert reached[0] < reached[1] < reached[2] < 0.9
    assert reached[1] == pytest.approx(0.45)


def _rows() -> Measurements:
    """One row of each kind the step model predicts, on Llama-3-8B, and GEMMs and steps
    in fp8 (the last three rows: a GEMM, an fp8 step, and an fp8 GEMM at large M)."""
    kinds = ("gemm", "attention_decode", "attention_prefill", "step", "allreduce", "copy",
             "gemm", "step", "gemm")
    count = len(kinds)
    zeros = np.zeros(count)
    bf16, fp8 = dtype_code("bf16"), dtype_code("fp8")
    return Measurements(
        kind=np.array([KINDS.index(k) for k in kinds]),
        model=np.array([-1, 0, 0, 0, -1, -1, -1, 0, -1]), models=(load_model("llama-3-8b"),),
        tp=np.array([1, 1, 2, 2, 4, 1, 1, 1, 1.0]),
        batch=np.array([0, 32, 0, 16, 0, 0, 0, 64, 0.0]),
        context=np.array([0, 2048, 0, 1024, 0, 0, 0, 512, 0.0]),
        prefill=np.array([0, 0, 512, 256, 0, 0, 0, 1024, 0.0]),
        prefill_context=zeros, prompts=np.array([0, 0, 4, 1, 0, 0, 0, 1, 0.0]),
        m=np.array([64, 0, 0, 0, 0, 0, 8, 0, 16384.0]),
        n=np.array([4096, 0, 0, 0, 0, 0, 4096, 0, 1024.0]),
        k=np.array([14336, 0, 0, 0, 0, 0, 4096, 0, 8192.0]),
        message_bytes=np.array([0, 0, 0, 0, 2e6, 1e8, 0, 0, 0.0]),
        # the prefill attention and the fp8 step read an fp8 KV cache
        dtype=np.array([bf16] * 6 + [fp8] * 3),
        kv_dtype=np.array([bf16, bf16, fp8, bf16, bf16, bf16, bf16, fp8, bf16]),
        time_s=np.ones(count), dataset=np.zeros(count, dtype=int), datasets=("test",),
        # kernels timed every way: graph replays, eager with events, by the host clock
        timer=np.array([TIMERS.index(t) for t in (
            "cuda_graph", "cuda_events", "host_clock", "cuda_events", "cuda_events",
            "host_clock", "cuda_events", "cuda_graph", "cuda_graph")]))


COSTS = row_costs(_rows(), H100, Assumptions())


@settings(max_examples=60, deadline=None)
@given(efficiencies())
def test_calibrated_predictions_are_never_faster_than_the_ideal_roofline(efficiency):
    ideal = predict(COSTS, Efficiency())
    calibrated = predict(COSTS, efficiency)
    assert np.all(calibrated >= ideal * (1 - 1e-12))


@settings(max_examples=40, deadline=None)
@given(efficiencies(), st.floats(min_value=1e-3, max_value=1.0))
def test_lower_profile_bandwidth_never_speeds_up(efficiency, mbu):
    assert np.all(predict(COSTS, efficiency, mbu=mbu)
                  >= predict(COSTS, efficiency) * (1 - 1e-12))


# --- the step model under a profile's efficiency ----------------------------------------

def _grid_point(efficiency: Efficiency, **step):
    from rooftui.core.point import PointConfig, evaluate_point

    config = PointConfig(gpu=H100, model=load_model("llama-3-70b"),
                         assumptions=Assumptions(efficiency=efficiency), **step)
    return evaluate_point(config)


@settings(max_examples=40, deadline=None)
@given(efficiencies(), st.integers(0, 512), st.integers(1, 32768), st.integers(0, 4096),
       st.sampled_from([1, 2, 4, 8]), st.sampled_from(["bf16", "fp8"]))
def test_a_calibrated_step_is_never_faster_than_the_roofline(efficiency, batch, context,
                                                             prefill, tp, weights):
    step = {"batch": batch, "context": context, "prefill": prefill, "tp": tp,
            "weight_dtype": weights}
    ideal = _grid_point(Efficiency(), **step)
    calibrated = _grid_point(efficiency, **step)
    assert calibrated["step_time_s"] >= ideal["step_time_s"] * (1 - 1e-12)
    # the work is the work: only its time changes
    assert calibrated["flops"] == ideal["flops"] and calibrated["bytes"] == ideal["bytes"]


@settings(max_examples=30, deadline=None)
@given(efficiencies(), st.integers(1, 16384), st.floats(min_value=0.02, max_value=0.5))
def test_the_largest_batch_under_a_budget_is_exact_under_any_efficiency(efficiency, context,
                                                                        budget):
    best = _grid_point(efficiency, context=context, tpot_budget=budget)["max_batch_for_tpot"]
    if best >= 1:
        assert _grid_point(efficiency, batch=int(best), context=context)["step_time_s"] <= budget
    assert _grid_point(efficiency, batch=int(best) + 1,
                       context=context)["step_time_s"] > budget


@pytest.mark.skipif("compute_dtype" not in {f.name for f in dataclasses.fields(StepInputs)},
                    reason="the step model does not take the compute dtype yet (the "
                           "core/step.py patch of issue 16 is not applied)")
def test_a_step_uses_its_compute_dtypes_gemm_values():
    base = Efficiency(gemm_mbu=0.9, step_overhead_s=1e-3)
    slow_fp8 = base.with_values({"fp8.gemm_mbu": 0.5})
    decode = {"batch": 1, "context": 512}
    for weights, changes in (("bf16", False), ("fp8", True)):
        times = [_grid_point(e, weight_dtype=weights, **decode)["step_time_s"]
                 for e in (base, slow_fp8)]
        assert (times[1] > times[0]) == changes, weights


def test_an_empty_step_costs_nothing_and_overheads_are_reported():
    efficiency = Efficiency(step_overhead_s=0.02, layer_overhead_s=1e-4, gemm_m_half=64)
    assert _grid_point(efficiency, batch=0, prefill=0)["step_time_s"] == 0.0
    busy = _grid_point(efficiency, batch=1, context=100)
    assert busy["overhead_s"] == pytest.approx(0.02 + 80 * 1e-4)
    assert busy["step_time_s"] > busy["overhead_s"]


@pytest.mark.parametrize("model", ["llama-3-8b", "mistral-7b"])  # mistral: a sliding window
@pytest.mark.parametrize("overlap", ["parts", "full"])
def test_the_simulator_times_steps_as_the_step_model_does(model, overlap):
    """StepCosts checks itself against evaluate_step when built; its array path agrees."""
    from rooftui.core.point import PointConfig
    from rooftui.core.scheduler import StepCosts

    efficiency = Efficiency(step_overhead_s=0.01, layer_overhead_s=2e-5, gemm_mfu=0.7,
                            gemm_mbu=0.8, gemm_m_half=64, attention_mfu=0.5,
                            attention_mfu_half=300, attention_mbu=0.6, attention_mbu_half=200,
                            attention_kv_head_overhead_s=2e-8,
                            attention_query_head_overhead_s=4e-9)
    assumptions = Assumptions(overlap=overlap, efficiency=efficiency)
    config = PointConfig(gpu=H100, model=load_model(model), assumptions=assumptions)
    costs = StepCosts(config.step_inputs(), assumptions, max_batch=64)
    batch = np.array([1, 8, 64])
    context = np.array([100.0, 5000.0, 9000.0])
    window = costs.window
    arrays = costs.times(*costs.decode_arrays(batch, batch * context,
                                              batch * np.minimum(context, window)), batch)
    for b, s, got in zip(batch, context, arrays, strict=True):
        assert got == pytest.approx(costs.time(int(b), b * s, b * min(s, window)), rel=1e-12)
