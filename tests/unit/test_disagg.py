"""Disaggregated and aggregated serving (core/disagg.py)."""

from __future__ import annotations

import pytest

from rooftui.core.assumptions import Assumptions
from rooftui.core.disagg import (
    Layout,
    Serving,
    deployments,
    kv_transfer,
    largest_load,
    mean_lengths,
    queue_wait,
)
from rooftui.core.model import load_model
from rooftui.core.systems import load_system
from rooftui.core.workloads import load_workload


def serving(workload="sharegpt-8k", model="llama-3-70b", system="hgx-h200-ib", **changes):
    length, output = mean_lengths(load_workload(workload))
    values = dict(model=load_model(model), system=load_system(system), input_tokens=length,
                  output_tokens=output, slo_ttft=1.0, slo_tpot=0.05, weight_dtype="fp8",
                  kv_dtype="bf16", compute_dtype="fp8", expert_weight_dtype=None,
                  assumptions=Assumptions(), max_gpus=64)
    return Serving(**{**values, **changes})


def test_kv_transfer_bytes_and_time_of_a_request():
    # Llama-3-70B: 80 layers x 8 KV heads x 128 x 2 (K and V) x 2 B = 327,680 B per token;
    # 4,096 tokens = 1,342,177,280 B. tp 4 to tp 8 over the network: 4 NICs of 50 GB/s
    # each, 5 us latency; inside one 72-GPU NVLink domain: 4 x 900 GB/s, 2 us
    h200 = serving(input_tokens=4096.0)
    nbytes, seconds = kv_transfer(h200, Layout(4), Layout(8), gpus=16)
    assert nbytes == 4096 * 327_680 == 1_342_177_280
    assert float(seconds) == pytest.approx(nbytes / (4 * 50e9) + 5e-6, rel=1e-12)
    nvl = serving(input_tokens=4096.0, system="gb200-nvl72")
    _, inside = kv_transfer(nvl, Layout(4), Layout(8), gpus=16)
    assert float(inside) == pytest.approx(nbytes / (4 * 900e9) + 2e-6, rel=1e-12)


def test_queue_wait_and_the_largest_load():
    # one server, deterministic service s: M/D/1's wait rho s / (2 (1 - rho)) (the
    # approximation is exact there: sqrt(2 * 2) - 1 = 1)
    assert float(queue_wait(0.5, 1, 0.2)) == pytest.approx(0.5 * 0.2 / (2 * 0.5))
    load = float(largest_load(1, 0.2, 0.0, 0.4))  # 0.2 + wait = 0.4: rho / (1 - rho) = 2
    assert load == pytest.approx(2 / 3, rel=1e-9)
    assert float(largest_load(1, 0.5, 0.0, 0.4)) == 0.0


def test_loose_ttft_short_prompts_aggregated_is_not_worse():
    # azure-conv-2023: the shortest shipped prompts (1,155 tokens on average), TTFT 10 s
    best = deployments(serving("azure-conv-2023", slo_ttft=10.0, slo_tpot=0.1))
    assert (best["aggregated"]["tokens_per_s_per_gpu"]
            >= best["disaggregated"]["tokens_per_s_per_gpu"])


def test_tight_ttft_long_prompts_disaggregated_wins():
    # DistServe's result: sharegpt-8k (2,340-token prompts), TTFT 0.3 s and TPOT 20 ms
    best = deployments(serving("sharegpt-8k", slo_ttft=0.3, slo_tpot=0.02))
    assert (best["disaggregated"]["tokens_per_s_per_gpu"]
            > best["aggregated"]["tokens_per_s_per_gpu"])
    for name in ("disaggregated", "aggregated"):
        assert best[name]["ttft_s"] <= 0.3 * (1 + 1e-9)
        assert best[name]["tpot_s"] <= 0.02


def test_sizing_finds_the_fewest_gpus_for_a_rate():
    for rate in (5.0, 40.0):
        best = deployments(serving(price_per_gpu_hour=3.0), rate=rate)
        for deployment in best.values():
            assert deployment["sustained_req_s"] >= rate
            assert deployment["cost_per_hour"] == 3.0 * deployment["gpus"]
    small = deployments(serving(), rate=5.0)["disaggregated"]["gpus"]
    large = deployments(serving(), rate=40.0)["disaggregated"]["gpus"]
    assert small < large


def test_wide_expert_parallel_layouts_for_an_moe_model():
    best = deployments(serving(model="deepseek-v3", system="gb200-nvl72", max_gpus=72))
    layouts = {best[name]["decode"]["layout"] for name in best}
    assert all("ep" in layout for layout in layouts)
