"""Mixture of experts, MLA and quantised formats in the step model."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core.assumptions import Assumptions
from rooftui.core.dtypes import bytes_per_element
from rooftui.core.hardware import load_gpu
from rooftui.core.model import ModelArrays, load_model
from rooftui.core.point import PointConfig, evaluate_point
from rooftui.core.step import evaluate_step
from rooftui.core.tables import GPUTable, dtype_code, gather_step_inputs

H100 = load_gpu("h100-sxm")
MIXTRAL = load_model("mixtral-8x7b")


def gemm_bytes(model, batch: int, **changes) -> float:
    return evaluate_point(PointConfig(gpu=H100, model=model, batch=batch, **changes))[
        "gemm_bytes"]


def test_mixtral_weight_bytes_grow_with_batch_and_saturate_at_all_experts():
    expert = MIXTRAL.expert_params()
    dense = MIXTRAL.gemm_params() - MIXTRAL.moe_layers * 2 * expert  # all but the experts
    batches = [1, 2, 4, 8, 16, 32, 64, 128]
    read = [gemm_bytes(MIXTRAL, b) for b in batches]
    assert read == sorted(read) and read[0] < read[3] < read[-1]
    # one token reads its 2 experts of 8; E (1 - (1 - k/E)^T) for more
    assert read[0] == 2 * (dense + MIXTRAL.moe_layers * 2 * expert)
    touched_at_4 = 8 * (1 - (1 - 2 / 8) ** 4)
    assert read[2] == pytest.approx(2 * (dense + MIXTRAL.moe_layers * touched_at_4 * expert),
                                    rel=1e-12)
    every_expert = 2 * (dense + MIXTRAL.routed_expert_params())
    assert read[-1] == pytest.approx(every_expert, rel=1e-12)
    assert gemm_bytes(MIXTRAL, 4096) == pytest.approx(every_expert, rel=1e-15)


def test_moe_flops_use_active_parameters():
    point = evaluate_point(PointConfig(gpu=H100, model=MIXTRAL, batch=16))
    assert point["gemm_flops"] == 2 * 16 * MIXTRAL.gemm_params()
    # the active count the table states, less what a token does not multiply by
    # (embedding lookup, norms)
    assert MIXTRAL.gemm_params() == (MIXTRAL.active_params() - MIXTRAL.embedding_params()
                                     - MIXTRAL.norm_params())


def test_deepseek_dense_first_layers_and_shared_expert():
    model = load_model("deepseek-v3")
    assert (model.moe_layers, model.dense_layers, model.num_shared_experts) == (58, 3, 1)
    per_expert = model.expert_params()
    # one token reads what it multiplies by: the dense weights, and in each MoE layer the
    # router, the shared expert and its 8 routed experts (fp8: 1 byte per weight)
    assert gemm_bytes(model, 1) == model.gemm_params()
    assert model.gemm_params() == (61 * model.attention_params_per_layer()
                                   + 3 * model.ffn_params_per_layer()
                                   + 58 * (7168 * 256 + 9 * per_expert)
                                   + model.lm_head_params())


def test_mla_attention_intensity_is_the_absorbed_form():
    model = load_model("deepseek-v3")
    point = evaluate_point(PointConfig(gpu=load_gpu("h200"), model=model, batch=32,
                                       context=8192, kv_dtype="bf16",
                                       assumptions=Assumptions(kv_write=False)))
    per_key_flops = 128 * (4 * 512 + 2 * 64)  # heads x (scores over 576, values over 512)
    per_key_bytes = (512 + 64) * 2
    assert point["attention_intensity"] == pytest.approx(per_key_flops / per_key_bytes)
    assert point["attention_flops"] == 32 * 8192 * 61 * per_key_flops


def test_gpt_oss_ships_mxfp4_experts():
    model = load_model("gpt-oss-20b")
    point = evaluate_point(PointConfig(gpu=H100, model=model))
    experts = model.routed_expert_params()
    rest = model.total_params() - experts
    assert point["weight_bytes"] == pytest.approx(experts * 4.25 / 8 + rest * 2, rel=1e-12)
    assert 13.7e9 < point["weight_bytes"] < 13.8e9  # the checkpoint's size
    assert PointConfig(gpu=H100, model=model).resolved_compute_dtype == "bf16"
    # --weight-dtype applies to every weight unless the experts' format is given
    assert PointConfig(gpu=H100, model=model, weight_dtype="fp8"
                       ).resolved_expert_weight_dtype == "fp8"
    assert PointConfig(gpu=H100, model=model, weight_dtype="fp8", expert_weight_dtype="mxfp4"
                       ).resolved_expert_weight_dtype == "mxfp4"


def test_quantised_formats_count_their_scales():
    assert bytes_per_element("int4-g128") == 0.5 + 2 / 128
    assert bytes_per_element("int8-g128") == 1 + 2 / 128
    assert bytes_per_element("mxfp4") == 4.25 / 8
    llama = load_model("llama-3-8b")
    int4 = PointConfig(gpu=H100, model=llama, weight_dtype="int4-g128")
    assert int4.resolved_compute_dtype == "bf16"  # weight-only: dequantised to 16 bits
    fp8 = PointConfig(gpu=H100, model=llama, weight_dtype="fp8")
    assert fp8.resolved_compute_dtype == "fp8"  # fp8 weights and activations
    assert evaluate_point(fp8)["ridge"] == pytest.approx(1978.9e12 / 3.35e12)


MOE_MODELS = [load_model(name) for name in (
    "mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3", "gpt-oss-20b", "llama-3-8b")]
GPUS = [load_gpu(name) for name in ("h100-sxm", "b200", "mi300x")]
TABLE, GPU_TABLE = ModelArrays.stack(MOE_MODELS), GPUTable.of(GPUS)


@settings(max_examples=40, deadline=None)
@given(model=st.integers(0, len(MOE_MODELS) - 1), gpu=st.integers(0, len(GPUS) - 1),
       context=st.integers(1, 100_000), prefill=st.sampled_from([0, 0, 512]),
       tp=st.sampled_from([1, 2, 8]), spec=st.sampled_from([0, 3]),
       overlap=st.sampled_from(["parts", "full"]), budget=st.floats(2e-3, 0.5))
def test_max_batch_for_tpot_is_exact_for_moe(model, gpu, context, prefill, tp, spec,
                                             overlap, budget):
    assumptions = Assumptions(overlap=overlap, activation_traffic=True)

    def step(batch):
        inputs = gather_step_inputs(
            GPU_TABLE, TABLE, gpu=gpu, model=model, batch=batch, context=context,
            prefill=prefill, prefill_context=0, weight_dtype=dtype_code("fp8"),
            kv_dtype=dtype_code("bf16"), compute_dtype=dtype_code("fp8"), tp=tp,
            spec_tokens=spec, acceptance=0.6, draft_model=4 if spec else None)
        return evaluate_step(inputs, assumptions, budget)

    out = step(np.array([1.0]))
    best = float(out["max_batch_for_tpot"][0])
    per_token = budget * float(out.get("expected_tokens_per_step", np.ones(1))[0])
    if best >= 1:
        assert float(step(np.array([best]))["step_time_s"][0]) <= per_token * (1 + 1e-12)
    assert float(step(np.array([best + 1]))["step_time_s"][0]) > per_token


def test_max_batch_for_tpot_for_one_point_and_a_broadcast_grid():
    oss = load_model("gpt-oss-120b")
    best = evaluate_point(PointConfig(gpu=H100, model=oss, context=8192, tpot_budget=0.03))[
        "max_batch_for_tpot"]
    assert evaluate_point(PointConfig(gpu=H100, model=oss, context=8192, batch=int(best))
                          )["step_time_s"] <= 0.03
    assert evaluate_point(PointConfig(gpu=H100, model=oss, context=8192, batch=int(best) + 1)
                          )["step_time_s"] > 0.03
    # a block as sweeps evaluate it: each parameter along its own axis
    models = ModelArrays.stack([oss, MIXTRAL])
    context = np.array([[1024.0], [65536.0]])
    grid = dict(gpu=0, model=np.array([0, 1]), context=context, prefill=0, prefill_context=0,
                weight_dtype=dtype_code("bf16"), kv_dtype=dtype_code("bf16"),
                compute_dtype=dtype_code("bf16"))
    best = evaluate_step(gather_step_inputs(GPU_TABLE, models, batch=1, **grid),
                         Assumptions(), 0.04)["max_batch_for_tpot"]
    assert best.shape == (2, 2)
    inside = evaluate_step(gather_step_inputs(GPU_TABLE, models, batch=best, **grid),
                           Assumptions())["step_time_s"]
    outside = evaluate_step(gather_step_inputs(GPU_TABLE, models, batch=best + 1, **grid),
                            Assumptions())["step_time_s"]
    assert np.all(inside[best >= 1] <= 0.04) and np.all(outside > 0.04)
