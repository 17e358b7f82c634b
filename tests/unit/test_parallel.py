"""Pipeline, expert and attention-data parallelism (core/parallel.py): hand-computed
cases, the busiest GPU's expected load against exact and sampled values, and properties."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core.assumptions import Assumptions
from rooftui.core.efficiency import Efficiency
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.model import ModelArrays, load_model
from rooftui.core.parallel import busiest_excess, busiest_expert_load
from rooftui.core.point import PointConfig, evaluate_point, named_config, point_report
from rooftui.core.step import evaluate_step
from rooftui.core.systems import load_system
from rooftui.core.tables import GPUTable, SystemTable, dtype_code, gather_step_inputs

H200 = load_gpu("h200")
DEEPSEEK = load_model("deepseek-v3")
LLAMA_405B = load_model("llama-3.1-405b")
IDEAL = Assumptions()


def test_all_to_all_bytes_and_time_inside_one_nvlink_domain():
    # DeepSeek-V3 (hidden 7168, 58 MoE layers, k = 8), fp8 activations, 8 GPUs of one
    # HGX H200: 16 tokens per GPU, each sent to 8 experts, 7/8 of them on other GPUs, and
    # back: 2 x 8 x 7/8 x 16 x 58 x 7168 x 1 B
    r = point_report(named_config("h200", "deepseek-v3", "ideal", system="hgx-h200-ib",
                                  weight_dtype="fp8", batch=16, dp=8, ep=8))
    sent = 2 * 8 * 7 / 8 * 16 * 58 * 7168 * 1
    link = r["collectives"]["all_to_all"]
    assert link["bytes"] == pytest.approx(sent, rel=1e-15)
    assert link["link"] == "nvlink_domain"
    # 450 GB/s per direction, and 2 us of latency at each dispatch and combine
    assert link["time_s"] == pytest.approx(sent / 450e9 + 2 * 58 * 2e-6, rel=1e-12)


def test_all_to_all_across_domains_takes_the_slower_link():
    # 16 GPUs over two 8-GPU domains: of the 15 other GPUs 7 are on NVLink, 8 behind the
    # 50 GB/s NIC: the NIC's 8/15 of the bytes set the time; 5 us latency per collective
    r = point_report(named_config("h200", "deepseek-v3", "ideal", system="hgx-h200-ib",
                                  weight_dtype="fp8", batch=16, dp=16, ep=16))
    sent = 2 * 8 * 15 / 16 * 16 * 58 * 7168
    link = r["collectives"]["all_to_all"]
    assert link["bytes"] == pytest.approx(sent, rel=1e-15)
    assert link["link"] == "nvlink_domain+network"
    assert link["time_s"] == pytest.approx(sent * 8 / 15 / 50e9 + 2 * 58 * 5e-6, rel=1e-12)
    # the same 16 GPUs inside one NVL72 domain: NVLink at 900 GB/s
    nvl = point_report(named_config("gb200", "deepseek-v3", "ideal", system="gb200-nvl72",
                                    weight_dtype="fp8", batch=16, dp=16, ep=16))
    assert nvl["collectives"]["all_to_all"]["time_s"] == pytest.approx(
        sent / 900e9 + 2 * 58 * 2e-6, rel=1e-12)


def test_pp_2_halves_weights_and_kv_and_adds_one_transfer_per_boundary():
    def report(pp):
        return point_report(named_config("h100-sxm", "llama-3.1-405b", "ideal",
                                         system="hgx-h100-ib", weight_dtype="fp8", tp=8,
                                         pp=pp, batch=32, context=4096, micro_batches=1))
    one, two = report(1), report(2)
    assert two["weight_bytes"] == pytest.approx(one["weight_bytes"] / 2, rel=1e-15)
    assert two["kv_bytes"] == pytest.approx(one["kv_bytes"] / 2, rel=1e-15)
    assert two["parts"]["gemm"]["flops"] == pytest.approx(one["parts"]["gemm"]["flops"] / 2)
    assert "pipeline_transfer" not in one["collectives"]
    # one boundary: 32 tokens x hidden 16384 x 1 B (fp8), 1/8 from each of the tp GPUs,
    # over the network (16 GPUs do not fit one 8-GPU domain), one 5 us latency
    boundary = two["collectives"]["pipeline_transfer"]
    assert boundary["bytes"] == 32 * 16384 * 1 / 8
    assert boundary["link"] == "network"
    # one micro-batch: no overlap between stages, the bubble is (1 + 2 - 1)/1 = 2
    assert boundary["time_s"] == pytest.approx(2 * (32 * 16384 / 8 / 50e9 + 5e-6))
    assert two["parallelism"]["bubble"] == 2.0
    assert two["step_time_s"] == pytest.approx(
        sum(part["time_s"] for part in two["parts"].values()))


def test_micro_batches_read_the_weights_again_and_shrink_the_bubble():
    def point(m):
        return evaluate_point(PointConfig(gpu=load_gpu("h100-sxm"), model=LLAMA_405B,
                                          weight_dtype="fp8", tp=8, pp=4, batch=64,
                                          micro_batches=m))
    one, four = point(1), point(4)
    assert four["gemm_bytes"] == pytest.approx(4 * one["gemm_bytes"], rel=1e-12)
    # busy time x (m + pp - 1)/m: 4/1 at m = 1, 7/4 at m = 4
    assert one["gemm_time_s"] == pytest.approx(4 * one["gemm_bytes"] / 3.35e12, rel=1e-12)
    assert four["gemm_time_s"] == pytest.approx(7 / 4 * four["gemm_bytes"] / 3.35e12,
                                                rel=1e-12)


@pytest.mark.parametrize("pp, m", [(1, 1), (2, 1), (2, 2), (4, 1), (4, 4), (4, 8)])
def test_a_pipelined_step_pays_each_all_reduce_of_each_micro_batch_once(pp, m):
    """Each micro-batch runs 2 all-reduces per layer of each stage (and the logits'
    gather): a stage's (2 L + 1) / pp of them m times, and the step the stage's time x
    (m + pp - 1) / m, so (2 L + 1) (m + pp - 1) / pp fixed times in all (one stage after
    another at m = 1: every layer's pair, once)."""
    def communication(overhead):
        efficiency = Efficiency(interconnect_efficiency=0.9, allreduce_overhead_s=overhead)
        return evaluate_point(PointConfig(
            gpu=load_gpu("h100-sxm"), model=LLAMA_405B, weight_dtype="fp8", tp=8, pp=pp,
            batch=64, micro_batches=m, assumptions=Assumptions(efficiency=efficiency))
        )["communication_time_s"]
    overhead = 1e-5
    collectives = 2 * LLAMA_405B.num_hidden_layers + 1
    assert communication(overhead) - communication(0.0) == pytest.approx(
        collectives * overhead * (m + pp - 1) / pp, rel=1e-9)


def exact_busiest_of_two(tokens, experts, k):
    """E[max(X, N k - X)] for X the pairs on one of two GPUs holding E/2 experts each: X
    is a sum of `tokens` iid hypergeometric(E, E/2, k) counts, convolved exactly."""
    half = experts // 2
    one = np.array([math.comb(half, j) * math.comb(experts - half, k - j)
                    for j in range(k + 1)], dtype=np.float64) / math.comb(experts, k)
    total = np.array([1.0])
    for _ in range(tokens):
        total = np.convolve(total, one)
    pairs = np.arange(total.size)
    return float(np.sum(total * np.maximum(pairs, tokens * k - pairs)))


def sampled_busiest(tokens, experts, k, ep, samples, seed):
    rng = np.random.default_rng(seed)
    picks = np.argsort(rng.random((samples, tokens, experts)), axis=2)[:, :, :k]
    gpu = picks // (experts // ep)
    loads = np.stack([(gpu == g).sum(axis=(1, 2)) for g in range(ep)], axis=1)
    maxima = loads.max(axis=1)
    return maxima.mean(), maxima.std() / math.sqrt(samples)


def test_busiest_gpu_load_by_hand():
    # E = 256, k = 8, ep = 32 (DeepSeek-V3 over 32 GPUs), T = 64 tokens: mean 64 x 8 / 32
    # = 16 pairs; one token's pairs on a GPU: variance 8 (1/32)(31/32)(248/255) = 0.23554,
    # so sigma = sqrt(64 x 0.23554) = 3.8826; z = c_32 / sqrt(31/32) = 2.0697 / 0.98425 =
    # 2.1028; skew term (z^2 - 1)(1 - 2/32)/6 = 0.5347: 16 + 8.1644 + 0.5347 = 24.699
    assert busiest_excess(32) == pytest.approx(2.0697 / math.sqrt(31 / 32), abs=1e-4)
    assert busiest_excess(2) == pytest.approx(math.sqrt(2 / math.pi), rel=1e-9)
    assert float(busiest_expert_load(64, 256, 8, 32)) == pytest.approx(24.699, abs=1e-3)
    assert float(busiest_expert_load(64, 256, 8, 1)) == 64 * 8


@pytest.mark.parametrize("tokens", [2, 16, 128])
def test_busiest_of_two_gpus_against_the_exact_distribution(tokens):
    exact = exact_busiest_of_two(tokens, 256, 8)
    assert float(busiest_expert_load(tokens, 256, 8, 2)) == pytest.approx(exact, rel=0.01)


@pytest.mark.parametrize(("tokens", "ep", "within"), [(16, 32, 0.01), (64, 32, 0.01),
                                                      (2, 8, 0.01), (32, 8, 0.01)])
def test_busiest_gpu_against_sampled_routing(tokens, ep, within):
    mean, error = sampled_busiest(tokens, 256, 8, ep, samples=1500, seed=17)
    approx = float(busiest_expert_load(tokens, 256, 8, ep))
    assert abs(approx - mean) <= within * mean + 3 * error


def deepseek_inputs(**options):
    models = ModelArrays.stack([DEEPSEEK])
    system = options.pop("system_table", SystemTable.of([load_system("hgx-h200-ib")]))
    return gather_step_inputs(
        GPUTable.of([H200]), models, gpu=0, model=0, batch=options.pop("batch", 64),
        context=options.pop("context", 2048), prefill=options.pop("prefill", 0),
        prefill_context=0, weight_dtype=dtype_code("fp8"), kv_dtype=dtype_code("bf16"),
        compute_dtype=dtype_code("fp8"), systems=system, system=0, **options)


def test_a_grid_of_layouts_equals_each_point():
    tp, dp, ep = np.array([8, 8, 1, 1, 2]), np.array([1, 1, 8, 16, 4]), np.array([1, 8, 8, 16, 8])
    batch = np.array([[1], [48], [512]])
    grid = evaluate_step(deepseek_inputs(tp=tp, dp=dp, ep=ep, batch=batch), IDEAL, 0.04)
    for j in range(tp.size):
        for i in range(batch.shape[0]):
            one = evaluate_step(deepseek_inputs(tp=int(tp[j]), dp=int(dp[j]), ep=int(ep[j]),
                                                batch=int(batch[i, 0])), IDEAL, 0.04)
            for key in ("step_time_s", "tokens_per_s", "all_to_all_bytes", "weight_bytes",
                        "max_batch_for_tpot"):
                assert np.broadcast_to(grid[key], (3, 5))[i, j] == pytest.approx(
                    float(one.get(key, 0.0)), rel=1e-12)


@pytest.mark.parametrize("layout", [dict(tp=8, ep=8), dict(tp=1, dp=16, ep=16),
                                    dict(tp=2, dp=4, ep=8, pp=2)])
def test_max_batch_for_tpot_is_the_largest_batch_that_fits(layout):
    budget = 0.03
    solved = float(evaluate_step(deepseek_inputs(**layout), IDEAL, budget)["max_batch_for_tpot"])
    batches = np.arange(1, 4097, dtype=np.float64)
    times = evaluate_step(deepseek_inputs(batch=batches, **layout), IDEAL)["step_time_s"]
    fits = batches[times <= budget]
    assert solved == (fits.max() if fits.size else 0.0)


def test_layout_of_ones_is_bit_identical_to_the_plain_step():
    # a grid with a pp/ep/dp axis evaluates its pp = ep = dp = 1 column exactly as today
    plain = evaluate_step(deepseek_inputs(tp=8, system_table=None), IDEAL, 0.05)
    with_axis = evaluate_step(replace(deepseek_inputs(tp=8, system_table=None),
                                      pp=np.array([1.0, 2.0]), ep=np.array([1.0, 8.0])),
                              IDEAL, 0.05)
    for key, value in plain.items():
        assert np.broadcast_to(with_axis[key], (2,))[0] == value, key


def test_parallelism_is_checked():
    for options, message in ((dict(ep=4), "ep 4 must be 1 or tp x dp"),
                             (dict(ep=8, tp=8, model="llama-3-8b"), "dense"),
                             (dict(pp=200), "more stages"),
                             (dict(micro_batches=4), "give --pp")):
        model = options.pop("model", "deepseek-v3")
        with pytest.raises(SpecError, match=message):
            named_config("h200", model, "ideal", **options)


systems = st.sampled_from(["hgx-h200-ib", "hgx-b200", "gb200-nvl72", "mi300x-8"])
layouts = st.sampled_from([(8, 1, 1, 8), (1, 8, 1, 8), (1, 16, 1, 16), (2, 8, 1, 16),
                           (8, 1, 2, 1), (4, 2, 2, 8), (1, 72, 1, 72)])


@settings(max_examples=60, deadline=None)
@given(systems, layouts, st.integers(1, 2048), st.integers(0, 32768), st.integers(0, 4096),
       st.floats(1.01, 20))
def test_more_nvlink_bandwidth_never_slows_a_step(system, layout, batch, context, prefill,
                                                 factor):
    tp, dp, pp, ep = layout
    base = SystemTable.of([load_system(system)])
    faster = replace(base, domain_rate=base.domain_rate * factor)
    times = [evaluate_step(deepseek_inputs(tp=tp, dp=dp, pp=pp, ep=ep, batch=batch,
                                           context=context, prefill=prefill,
                                           system_table=table), IDEAL)["step_time_s"]
             for table in (base, faster)]
    assert times[1] <= times[0]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([(1, 8), (8, 1), (2, 4), (1, 32), (4, 16)]), st.integers(1, 4),
       st.sampled_from(["deepseek-v3", "qwen3-235b-a22b", "mixtral-8x22b", "gpt-oss-120b"]))
def test_ep_never_increases_per_gpu_expert_weight_bytes(group, pp, name):
    tp, dp = group
    model = load_model(name)
    if model.num_experts % (tp * dp) or model.num_hidden_layers < pp:
        return
    models = ModelArrays.stack([model])

    def weights(ep):
        inputs = gather_step_inputs(
            GPUTable.of([H200]), models, gpu=0, model=0, batch=1, context=1, prefill=0,
            prefill_context=0, weight_dtype=dtype_code("bf16"), kv_dtype=dtype_code("bf16"),
            compute_dtype=dtype_code("bf16"), tp=tp, dp=dp, pp=pp, ep=ep)
        return float(evaluate_step(inputs, IDEAL)["weight_bytes"])

    assert weights(tp * dp) <= weights(1)
