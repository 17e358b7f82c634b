"""Attention per KV-cache format: an 8-bit cache is its own kernel, with its own
efficiencies and fixed times (`[efficiency.fp8]`), selected per configuration by the KV
cache's width, in the fit and in one step-model evaluation of a grid mixing formats."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core.assumptions import Assumptions
from rooftui.core.calibration import KINDS, fit, predict, row_costs
from rooftui.core.efficiency import Efficiency, efficiency_from_dict
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.informed import informed_parameters
from rooftui.core.model import ModelArrays, load_model
from rooftui.core.step import evaluate_step
from rooftui.core.tables import GPUTable, dtype_code, gather_step_inputs
from rooftui.sweeps.measured import to_measurements

H100 = load_gpu("h100-sxm")
TRUE = Efficiency(attention_mbu=0.85, attention_kv_head_overhead_s=2e-8,
                  attention_query_head_overhead_s=4e-9, attention_mfu=0.58,
                  attention_mfu_half=760.0, attention_overhead_s=9e-6,
                  prefill_attention_overhead_s=7e-6,
                  attention_prompt_head_overhead_s=2e-8).with_values({
    "fp8.attention_mbu": 0.7, "fp8.attention_kv_head_overhead_s": 1e-8,
    "fp8.attention_query_head_overhead_s": 1e-9, "fp8.attention_mfu": 0.42,
    "fp8.attention_mfu_half": 1000.0, "fp8.attention_overhead_s": 7e-6,
    "fp8.prefill_attention_overhead_s": 1.2e-5, "fp8.attention_prompt_head_overhead_s": 1.5e-8})


def attention_rows(kv_dtypes=("bf16", "fp8"), times=None) -> list[dict]:
    rows = []
    for kv in kv_dtypes:
        for model in ("llama-2-7b", "llama-3-8b"):
            rows += [{"kind": "attention_decode", "gpu": "h100-sxm", "model": model,
                      "batch": float(b), "context": float(s), "kv_dtype": kv,
                      "compute_dtype": "bf16", "cuda_graphs": "true", "time_s": 1.0,
                      "dataset": f"decode {kv}"}
                     for b in (1, 8, 64, 512) for s in (16, 128, 1024, 8192, 65536)]
            rows += [{"kind": "attention_prefill", "gpu": "h100-sxm", "model": model,
                      "prefill": float(n), "prompts": float(p), "kv_dtype": kv,
                      "compute_dtype": "fp8" if kv == "fp8" else "bf16",
                      "cuda_graphs": "true", "time_s": 1.0, "dataset": f"prefill {kv}"}
                     for p in (1, 8, 64) for n in (16, 128, 512, 2048, 8192, 16384)]
    for row, seconds in zip(rows, times if times is not None else [], strict=False):
        row["time_s"] = float(seconds)
    return rows


def synthetic(kv_dtypes=("bf16", "fp8")):
    rows = to_measurements(attention_rows(kv_dtypes))
    times = predict(row_costs(rows, H100, Assumptions()), TRUE)
    return to_measurements(attention_rows(kv_dtypes, times))


def test_an_8_bit_cache_informs_its_own_attention_parameters():
    # decode kernels inform their per-head fixed times, not attention_mbu_half (the same
    # cost per sequence on one GPU: the form in seconds is the one that carries over)
    assert informed_parameters(synthetic(("bf16",))) == [
        "attention_overhead_s", "prefill_attention_overhead_s", "attention_mfu",
        "attention_mfu_half", "attention_mbu", "attention_kv_head_overhead_s",
        "attention_query_head_overhead_s", "attention_prompt_head_overhead_s"]
    assert informed_parameters(synthetic(("fp8",))) == [
        f"fp8.{name}" for name in ("attention_mfu", "attention_mfu_half", "attention_mbu",
                                   "attention_overhead_s", "prefill_attention_overhead_s",
                                   "attention_kv_head_overhead_s",
                                   "attention_query_head_overhead_s",
                                   "attention_prompt_head_overhead_s")]


def test_a_prompts_head_time_needs_three_counts_of_prompt_heads():
    """One prompt count of one head count: the time per prompt and head is one number
    with the op's fixed time; from three products of the two on, its own."""
    rows = synthetic(("bf16",))
    prefill = rows.kind == KINDS.index("attention_prefill")
    two = rows.subset(~prefill | (rows.prompts < 64))
    assert "attention_prompt_head_overhead_s" in informed_parameters(rows)
    assert "attention_prompt_head_overhead_s" not in informed_parameters(two)
    # per KV-cache table: an fp8 cache's one prompt count is not told apart by the bf16
    # rows' three
    one_fp8 = to_measurements([row for row in attention_rows() if not (
        row["kind"] == "attention_prefill" and row["kv_dtype"] == "fp8" and row["prompts"] > 1)])
    names = informed_parameters(one_fp8)
    assert "attention_prompt_head_overhead_s" in names
    assert "fp8.attention_prompt_head_overhead_s" not in names


def test_a_prompt_pays_its_head_time_per_query_head():
    """256 one-token prompts of 32 heads pay 256 x 32 of it beside their FLOPs and bytes
    (as TensorRT-LLM's context FMHA: 21 ns a prompt and head, 345 us where the work takes
    26 us)."""
    rows = to_measurements([{"kind": "attention_prefill", "gpu": "h100-sxm",
                             "model": "llama-3-8b", "prefill": 1.0, "prompts": p,
                             "kv_dtype": "bf16", "compute_dtype": "bf16", "time_s": 1.0,
                             "dataset": "prompts"} for p in (1.0, 256.0)])
    costs = row_costs(rows, H100, Assumptions())
    base = Efficiency(attention_mbu=0.8, attention_overhead_s=9e-6)
    paid = predict(costs, base.with_values({"attention_prompt_head_overhead_s": 2e-8}))
    assert paid - predict(costs, base) == pytest.approx([32 * 2e-8, 256 * 32 * 2e-8],
                                                        rel=1e-9)


def test_fit_recovers_each_kv_formats_attention_parameters():
    rows = synthetic()
    free = informed_parameters(rows)
    result = fit(row_costs(rows, H100, Assumptions()), free)
    for name in free:
        # the half-efficiency sizes rest on the rows near them, and the prior's weak pull
        tolerance = 0.03 if name.endswith("_half") else 0.01
        assert result.efficiency.value(name) == pytest.approx(TRUE.value(name),
                                                              rel=tolerance), name
    assert result.rms_log_error < 2e-3


def test_one_set_for_both_formats_fits_worse():
    rows = synthetic()
    costs = row_costs(rows, H100, Assumptions())
    shared = [n for n in informed_parameters(rows) if "." not in n]
    assert fit(costs, shared).rms_log_error > 0.05


def test_a_profile_table_takes_attention_parameters_and_checks_them():
    efficiency = efficiency_from_dict({"attention_mbu": 0.9, "fp8": {"attention_mbu": 0.7}},
                                      "p.toml")
    assert efficiency.value("fp8.attention_mbu") == 0.7
    assert efficiency.value("bf16.attention_mbu") == 0.9  # unset: the base value
    with pytest.raises(SpecError, match=r"p.toml \[efficiency.fp8\]: key .attention_mbu. must "):
        efficiency_from_dict({"fp8": {"attention_mbu": 1.5}}, "p.toml")


def _steps(efficiency: Efficiency, kv_dtypes: list[str], batch, context, prefill):
    """One evaluate_step call over configurations that differ in their KV format."""
    model = ModelArrays.stack([load_model("llama-3-8b")])
    count = len(kv_dtypes)
    inputs = gather_step_inputs(
        GPUTable.of([H100]), model, gpu=0, model=np.zeros(count, dtype=int),
        batch=np.asarray(batch, float), context=np.asarray(context, float),
        prefill=np.asarray(prefill, float), prefill_context=np.zeros(count),
        weight_dtype=np.full(count, dtype_code("bf16")),
        kv_dtype=np.array([dtype_code(k) for k in kv_dtypes]),
        compute_dtype=np.full(count, dtype_code("bf16")),
        expert_weight_dtype=np.full(count, dtype_code("bf16")), tp=np.ones(count))
    return evaluate_step(inputs, Assumptions(efficiency=efficiency))["step_time_s"]


def test_a_grid_mixing_kv_formats_is_one_evaluation_with_each_formats_values():
    efficiency = Efficiency(step_overhead_s=1e-3, attention_mbu=0.9).with_values(
        {"fp8.attention_mbu": 0.45})
    kv = ["bf16", "fp8", "int8", "fp16", "fp8"]
    batch, context, prefill = [64, 64, 64, 64, 0], [8192] * 4 + [0], [0, 0, 0, 0, 4096]
    mixed = _steps(efficiency, kv, batch, context, prefill)
    for i, format_ in enumerate(kv):
        alone = _steps(efficiency, [format_], batch[i:i + 1], context[i:i + 1],
                       prefill[i:i + 1])
        assert mixed[i] == alone[0], format_
    # the same step with the 8-bit table at the base value is faster: the table applied
    plain = _steps(Efficiency(step_overhead_s=1e-3, attention_mbu=0.9), kv, batch,
                   context, prefill)
    assert mixed[1] > plain[1] and mixed[2] > plain[2]
    assert mixed[0] == plain[0] and mixed[3] == plain[3]


@settings(max_examples=40, deadline=None)
@given(st.floats(1e-3, 1.0), st.floats(0.0, 1e4), st.floats(0.0, 1e-4),
       st.sampled_from(["fp8", "int8", "fp4", "bf16"]))
def test_a_kv_formats_own_values_never_make_attention_faster_than_ideal(mbu, half,
                                                                       overhead, kv):
    efficiency = Efficiency().with_values({
        "fp8.attention_mbu": mbu, "fp8.attention_mbu_half": half,
        "fp8.attention_overhead_s": overhead, "fp4.attention_mfu": mbu,
        "fp8.attention_kv_head_overhead_s": overhead / 100,
        "fp4.attention_query_head_overhead_s": overhead / 100,
        "fp4.prefill_attention_overhead_s": overhead})
    rows = to_measurements([dict(row, kv_dtype=kv) for row in attention_rows(("bf16",))])
    costs = row_costs(rows, H100, Assumptions())
    assert np.all(predict(costs, efficiency) >= predict(costs, Efficiency()) * (1 - 1e-12))
    steps = _steps(efficiency, [kv] * 3, [1, 64, 0], [128, 8192, 0], [0, 0, 2048])
    assert np.all(steps >= _steps(Efficiency(), [kv] * 3, [1, 64, 0], [128, 8192, 0],
                                  [0, 0, 2048]) * (1 - 1e-12))
