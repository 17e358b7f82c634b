"""Properties of the step model that would fail if a formula were wrong."""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rooftui.core.assumptions import Assumptions
from rooftui.core.closed_forms import kv_capacity, throughput_ceiling
from rooftui.core.dtypes import BYTES_PER_ELEMENT
from rooftui.core.hardware import load_gpu
from rooftui.core.model import ModelArrays, load_model
from rooftui.core.step import evaluate_step
from rooftui.core.tables import DTYPES, GPUTable, gather_step_inputs
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from plain_step import plain_step  # noqa: E402

MODELS = [load_model(name) for name in
          ("llama-3-8b", "reference-mha-6.4b", "llama-2-7b", "qwen2.5-7b", "mistral-7b",
           "phi-3-mini")]
GPUS = [load_gpu(name) for name in ("h100-sxm", "a100-80gb", "l4")]
MODEL_TABLE = ModelArrays.stack(MODELS)
GPU_TABLE = GPUTable.of(GPUS)
STORAGE = ["bf16", "fp16", "fp8", "int8", "int4"]

assumption_sets = st.builds(
    Assumptions,
    mfu=st.floats(0.05, 1.0), mbu=st.floats(0.05, 1.0),
    overlap=st.sampled_from(["parts", "full"]),
    attention_flops=st.sampled_from(["causal", "full"]),
    activation_traffic=st.booleans(), kv_write=st.booleans(),
    memory_reserve_gb=st.floats(0, 10),
)
configs = st.fixed_dictionaries({
    "gpu": st.integers(0, len(GPUS) - 1),
    "model": st.integers(0, len(MODELS) - 1),
    "batch": st.integers(0, 4096),
    "context": st.integers(1, 200_000),
    "prefill": st.integers(0, 16384),
    "prefill_context": st.integers(0, 100_000),
    "weight_dtype": st.sampled_from(STORAGE),
    "kv_dtype": st.sampled_from(["bf16", "fp8", "int4"]),
})


def inputs_for(cfg: dict, assumptions: Assumptions, **arrays):
    values = {**cfg, **arrays}
    return gather_step_inputs(
        GPU_TABLE, MODEL_TABLE, gpu=values["gpu"], model=values["model"],
        batch=values["batch"], context=values["context"], prefill=values["prefill"],
        prefill_context=values["prefill_context"],
        weight_dtype=DTYPES.index(values["weight_dtype"]),
        kv_dtype=DTYPES.index(values["kv_dtype"]),
        compute_dtype=DTYPES.index("bf16"), mfu=assumptions.mfu, mbu=assumptions.mbu,
        memory_reserve_gb=assumptions.memory_reserve_gb)


@settings(max_examples=60, deadline=None)
@given(cfg=configs, assumptions=assumption_sets)
def test_step_time_never_decreases_with_batch_or_context(cfg, assumptions):
    grown = np.array([1.0, 2.0, 3.0, 17.0, 1000.0])
    batch = evaluate_step(inputs_for(cfg, assumptions, batch=cfg["batch"] + grown - 1),
                          assumptions)["step_time_s"]
    context = evaluate_step(inputs_for(cfg, assumptions, context=cfg["context"] * grown),
                            assumptions)["step_time_s"]
    assert np.all(np.diff(batch) >= 0)
    assert np.all(np.diff(context) >= 0)


@settings(max_examples=60, deadline=None)
@given(cfg=configs, assumptions=assumption_sets)
def test_ceiling_and_capacity_are_their_closed_forms(cfg, assumptions):
    """Without windowed layers, the decode rate no batch passes is bandwidth / (KV per
    token x context) and the sequences that fit are the free memory over one's KV."""
    assume(MODEL_TABLE.windowed_layers[cfg["model"]] == 0)
    out = evaluate_step(inputs_for(cfg, assumptions), assumptions)
    gpu, kv_per_token = GPUS[cfg["gpu"]], float(out["kv_bytes_per_token"])
    bandwidth = assumptions.mbu * gpu.bandwidth_bytes_per_s
    assert float(out["throughput_ceiling_tokens_per_s"]) == pytest.approx(
        throughput_ceiling(bandwidth, kv_per_token, cfg["context"]), rel=1e-12)
    # the prompt being prefilled holds its cached and new tokens' KV, whether or not this
    # step carries a chunk of it
    prompt_kv = kv_per_token * (cfg["prefill_context"] + cfg["prefill"])
    assert float(out["max_batch"]) == pytest.approx(float(kv_capacity(
        gpu.memory_bytes, float(out["weight_bytes"]) + prompt_kv,
        assumptions.memory_reserve_gb * 1e9, kv_per_token, cfg["context"])), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(cfg=configs, batch=st.integers(1, 64))
def test_gemm_intensity_is_two_flops_per_weight_byte_per_token(cfg, batch):
    """For B << d, (2 B P) / (P w) = 2 B / w: the batch itself for 2-byte weights."""
    a = Assumptions(activation_traffic=False)
    out = evaluate_step(inputs_for(cfg, a, batch=batch, prefill=0), a)
    width = BYTES_PER_ELEMENT[cfg["weight_dtype"]]
    assert float(out["gemm_intensity"]) == pytest.approx(2 * batch / width, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(cfg=configs, batch=st.integers(1, 100_000))
def test_attention_intensity_is_the_group_size_at_any_batch_and_context(cfg, batch):
    a = Assumptions(kv_write=False)
    out = evaluate_step(inputs_for(cfg, a, batch=batch, prefill=0), a)
    model = MODELS[cfg["model"]]
    expected = model.group_size * 2 / BYTES_PER_ELEMENT[cfg["kv_dtype"]]
    assert float(out["attention_intensity"]) == pytest.approx(expected, rel=1e-12)


def test_arrays_equal_a_plain_per_configuration_evaluation():
    rng = np.random.default_rng(7)
    n = 400
    cfg = {
        "gpu": rng.integers(0, len(GPUS), n), "model": rng.integers(0, len(MODELS), n),
        "batch": rng.integers(0, 2048, n).astype(float),
        "context": rng.integers(1, 150_000, n).astype(float),
        "prefill": rng.integers(0, 8192, n) * (rng.random(n) < 0.5),
        "prefill_context": rng.integers(0, 60_000, n).astype(float),
    }
    weight = rng.choice(["bf16", "fp8", "int4"], n)
    kv = rng.choice(["bf16", "fp8"], n)
    for assumptions in (Assumptions(), Assumptions(
            mfu=0.6, mbu=0.85, overlap="full", attention_flops="full",
            activation_traffic=True, kv_write=False, memory_reserve_gb=3)):
        inputs = gather_step_inputs(
            GPU_TABLE, MODEL_TABLE, gpu=cfg["gpu"], model=cfg["model"], batch=cfg["batch"],
            context=cfg["context"], prefill=cfg["prefill"],
            prefill_context=cfg["prefill_context"],
            weight_dtype=np.array([DTYPES.index(w) for w in weight]),
            kv_dtype=np.array([DTYPES.index(k) for k in kv]),
            compute_dtype=DTYPES.index("bf16"), mfu=assumptions.mfu, mbu=assumptions.mbu,
            memory_reserve_gb=assumptions.memory_reserve_gb)
        arrays = evaluate_step(inputs, assumptions)
        for i in range(n):
            model = inputs.model
            plain = plain_step({
                "hidden": model.hidden[i], "layers": model.layers[i], "heads": model.heads[i],
                "kv_heads": inputs.kv_heads[i], "head_dim": model.head_dim[i],
                "ffn_params_per_layer": model.ffn_params_per_layer[i],
                "lm_head_params": model.lm_head_params[i],
                "static_resident_params": model.static_resident_params[i],
                "qkv_bias": model.qkv_bias[i], "window": model.window[i],
                "windowed_layers": model.windowed_layers[i],
                "batch": cfg["batch"][i], "context": cfg["context"][i],
                "prefill": cfg["prefill"][i], "prefill_context": cfg["prefill_context"][i],
                "weight_bytes": inputs.weight_bytes[i], "kv_bytes": inputs.kv_bytes[i],
                "activation_bytes": float(inputs.activation_bytes),
                "peak_flops": inputs.peak_flops[i], "bandwidth": inputs.bandwidth[i],
                "memory": inputs.memory[i], "mfu": assumptions.mfu, "mbu": assumptions.mbu,
                "memory_reserve": assumptions.memory_reserve_gb * 1e9,
                "causal": assumptions.attention_flops == "causal",
                "kv_write": assumptions.kv_write,
                "activation_traffic": assumptions.activation_traffic,
                "overlap_full": assumptions.overlap == "full",
            })
            for key, value in plain.items():
                assert arrays[key][i] == pytest.approx(value, rel=1e-9, nan_ok=True), (key, i)


@settings(max_examples=40, deadline=None)
@given(cfg=configs, assumptions=assumption_sets, budget=st.floats(1e-3, 1.0))
def test_max_batch_for_tpot_is_the_largest_batch_within_the_budget(cfg, assumptions, budget):
    cfg = {**cfg, "prefill": 0}
    best = float(evaluate_step(inputs_for(cfg, assumptions), assumptions, budget)[
        "max_batch_for_tpot"])
    if best >= 1:
        inside = evaluate_step(inputs_for(cfg, assumptions, batch=best), assumptions)
        assert float(inside["step_time_s"]) <= budget * (1 + 1e-12)
    outside = evaluate_step(inputs_for(cfg, assumptions, batch=best + 1), assumptions)
    assert float(outside["step_time_s"]) > budget


def test_kv_heads_override_changes_kv_projection_weights():
    model = MODELS[0]
    mha = replace(model, num_key_value_heads=model.num_attention_heads)
    assert mha.gemm_params() - model.gemm_params() == (
        2 * model.hidden_size * model.head_dim * (32 - 8) * model.num_hidden_layers)
