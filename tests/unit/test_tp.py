"""Tensor parallelism: weights, heads and KV split over N GPUs, all-reduces on the link."""

from __future__ import annotations

import numpy as np
import pytest

from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.model import ModelArrays, load_model
from rooftui.core.point import PointConfig, evaluate_point
from rooftui.core.step import evaluate_step
from rooftui.core.tables import GPUTable, dtype_code, gather_step_inputs
from tests.conftest import sweep_json

H100 = load_gpu("h100-sxm")
LLAMA = load_model("llama-3-8b")


def test_tp_2_halves_per_gpu_weights_and_adds_communication():
    one = sweep_json("point", "--batch", 16, "--context", 2048)
    two = sweep_json("point", "--batch", 16, "--context", 2048, "--tp", 2)
    assert two["weight_bytes"] == one["weight_bytes"] / 2
    assert two["parts"]["gemm"]["bytes"] == one["parts"]["gemm"]["bytes"] / 2
    assert two["parts"]["gemm"]["flops"] == one["parts"]["gemm"]["flops"] / 2
    assert "communication" not in one["parts"]
    link = two["parts"]["communication"]
    assert link["time_s"] > 0 and link["bound"] == "interconnect"
    # two ring all-reduces per layer of tokens x hidden x 2 bytes, 2(N-1)/N of them per
    # GPU, and the logits' all-gather, (N-1)/N of rows x vocab x 2 bytes
    expected = 0.5 * 2 * (2 * 32 * 16 * 4096 * 2) + 0.5 * 16 * 128_256 * 2
    assert link["bytes"] == expected
    assert link["time_s"] == pytest.approx(expected / 450e9)
    assert two["step_time_s"] == pytest.approx(
        sum(part["time_s"] for part in two["parts"].values()))
    assert two["tokens_per_s_per_gpu"] == two["tokens_per_s"] / 2


def test_capacity_is_per_replica():
    one = evaluate_point(PointConfig(gpu=H100, model=LLAMA, context=8192))
    two = evaluate_point(PointConfig(gpu=H100, model=LLAMA, context=8192, tp=2))
    # twice the memory for the KV of each sequence, halved per GPU: more than twice the room
    assert two["max_batch"] > 2 * one["max_batch"]
    assert two["kv_bytes"] == one["kv_bytes"] / 2


def test_kv_heads_replicate_past_the_split_and_mla_latent_everywhere():
    llama70 = load_model("llama-3-70b")  # 8 KV heads
    at = {tp: evaluate_point(PointConfig(gpu=H100, model=llama70, batch=8, context=4096,
                                         tp=tp)) for tp in (1, 8, 16)}
    assert at[8]["kv_bytes"] == at[1]["kv_bytes"] / 8
    assert at[16]["kv_bytes"] == at[8]["kv_bytes"]  # one KV head per GPU, replicated
    deepseek = load_model("deepseek-v3")
    one = evaluate_point(PointConfig(gpu=load_gpu("h200"), model=deepseek, batch=8, tp=1))
    eight = evaluate_point(PointConfig(gpu=load_gpu("h200"), model=deepseek, batch=8, tp=8))
    assert eight["kv_bytes"] == one["kv_bytes"]
    assert eight["attention_flops"] == one["attention_flops"] / 8


def test_energy_and_cost_per_token():
    point = evaluate_point(PointConfig(gpu=H100, model=LLAMA, batch=32, tp=2,
                                       price_per_gpu_hour=3.0, energy=True))
    gpu_seconds_per_token = point["step_time_s"] * 2 / 32
    assert point["energy_j_per_token"] == pytest.approx(700 * gpu_seconds_per_token)
    assert point["cost_per_million_tokens"] == pytest.approx(
        3.0 / 3600 * gpu_seconds_per_token * 1e6)
    assert "cost_per_million_tokens" not in evaluate_point(PointConfig(gpu=H100, model=LLAMA))


def test_a_tp_axis_in_a_grid_equals_each_point():
    models = ModelArrays.stack([LLAMA, load_model("mixtral-8x7b"), load_model("deepseek-v3")])
    gpus = GPUTable.of([H100, load_gpu("b200")])
    tp = np.array([1, 2, 4, 8, 2, 8])
    model = np.array([0, 0, 1, 1, 2, 2])
    gpu = np.array([0, 1, 0, 1, 0, 1])
    inputs = gather_step_inputs(gpus, models, gpu=gpu, model=model, batch=24, context=3000,
                                prefill=0, prefill_context=0, weight_dtype=dtype_code("bf16"),
                                kv_dtype=dtype_code("bf16"), compute_dtype=dtype_code("bf16"),
                                tp=tp, energy=True)
    grid = evaluate_step(inputs, PointConfig(gpu=H100, model=LLAMA).assumptions)
    for i in range(len(tp)):
        single = evaluate_point(PointConfig(
            gpu=gpus.gpus[gpu[i]], model=[LLAMA, load_model("mixtral-8x7b"),
                                          load_model("deepseek-v3")][model[i]],
            batch=24, context=3000, weight_dtype="bf16", kv_dtype="bf16", tp=int(tp[i]),
            energy=True))
        for key in ("step_time_s", "weight_bytes", "kv_bytes", "max_batch",
                    "energy_j_per_token"):
            assert grid[key][i] == pytest.approx(single[key], rel=1e-12), (key, i)


@pytest.mark.parametrize(("changes", "message"), [
    ({"tp": 3}, "does not divide"),
    ({"tp": 0}, "whole number"),
    ({"gpu": load_gpu("h100-sxm").__class__(name="bare", memory_gb=80, bandwidth_tbs=3,
                                            tflops={"bf16": 900}), "tp": 2}, "interconnect"),
])
def test_bad_parallelism_is_refused(changes, message):
    with pytest.raises(SpecError, match=message):
        PointConfig(**{"gpu": H100, "model": LLAMA, **changes})
