"""seeds/000 'Decode is memory-bound by construction': every number it states.

The seed's assumptions: the reference model (d = 4096, 32 layers, 32 heads of 128, MHA,
non-gated FFN of 4d, FP16, no embedding and no LM head) on an H100 SXM at 989 TFLOP/s
and 3.35 TB/s. The closed forms use no KV write and no activation traffic; its latency
section uses mfu 0.5, mbu 0.8 (the `derated` profile) and full-square attention FLOPs;
its capacity section leaves 65 GB of an 80 GB card for KV (a 2.12 GB reserve).
"""

from __future__ import annotations

import pytest

from rooftui.core.closed_forms import (
    decode_intensity_ceiling_standard,
    exponential_static_occupancy,
)
from rooftui.core.model import load_model
from tests.conftest import sweep_json

REFERENCE = ("--model", "reference-mha-6.4b", "--gpu", "h100-sxm", "--peak-tflops", "989")
IDEAL = (*REFERENCE, "--profile", "ideal", "--no-kv-write")
DERATED = (*REFERENCE, "--profile", "derated", "--attention-flops", "full")


def point(*args) -> dict:
    return sweep_json("point", *args)


def test_reference_model_size():
    model = load_model("reference-mha-6.4b")
    assert f"{model.total_params() / 1e9:.2f}" == "6.44"
    assert model.total_params() == 12 * 4096**2 * 32
    r = point(*IDEAL, "--batch", 1, "--context", 512)
    assert f"{r['weight_bytes'] / 1e9:.2f}" == "12.88"


def test_ridge_points():
    assert f"{point(*IDEAL)['ridge']:.0f}" == "295"
    # "H200 keeps the same compute and adds bandwidth, which pulls the ridge down to 206"
    assert f"{point('--gpu', 'h200', '--peak-tflops', 989)['ridge']:.0f}" == "206"


@pytest.mark.parametrize("context, printed", [(512, "49"), (2048, "13"), (8192, "4.0"),
                                              (131072, "1.2")])
def test_decode_intensity_ceiling(context, printed):
    """Direct computation and the closed form g (6d/S + 1) agree to the decimal."""
    r = point(*IDEAL, "--batch", 1, "--context", context)
    digits = 1 if "." in printed else 0
    assert f"{r['intensity_ceiling']:.{digits}f}" == printed
    closed = decode_intensity_ceiling_standard(4096, 1, context)
    assert r["intensity_ceiling"] == pytest.approx(float(closed), rel=1e-12)
    # and the step itself approaches it as the batch runs away
    assert point(*IDEAL, "--batch", 10**9, "--context", context)["intensity"] == pytest.approx(
        float(closed), rel=1e-6)


def test_decode_reads_13_2_gb_for_one_token():
    r = point(*IDEAL, "--batch", 1, "--context", 512)
    assert f"{r['bytes'] / 1e9:.1f}" == "13.2"
    assert r["intensity"] == pytest.approx(1.0)  # MHA in FP16: 1 FLOP per byte


def test_prefill_compute_is_512x_and_intensity_about_430x():
    """Prefilling 512 tokens against decoding one: 512x the matmul FLOPs, and about 430x
    the intensity once the hidden states each kernel reads and writes are counted."""
    counted = ("--activation-traffic", "--kv-write", "--attention-flops", "full")
    decode = point(*IDEAL, *counted, "--batch", 1, "--context", 512)
    prefill = point(*IDEAL, *counted, "--batch", 0, "--prefill", 512)
    ratio = prefill["parts"]["gemm"]["flops"] / decode["parts"]["gemm"]["flops"]
    assert ratio == 512
    assert f"{prefill['intensity'] / decode['intensity']:.2g}" == "4.3e+02"


def test_kv_at_128k_context():
    r = point(*IDEAL, "--batch", 1, "--context", 131072)
    assert f"{r['kv_bytes'] / 1e9:.1f}" == "68.7"
    assert f"{r['weight_bytes'] / 1e9:.1f}" == "12.9"


def test_static_batch_occupancy():
    assert f"{100 * float(exponential_static_occupancy(32)):.1f}" == "24.6"


@pytest.mark.parametrize("context, sequences", [(512, 242), (8192, 15), (32768, 3)])
def test_capacity(context, sequences):
    r = point(*IDEAL, "--memory-reserve-gb", 2.12, "--batch", 1, "--context", context)
    free_gb = (80e9 - r["weight_bytes"] - 2.12e9) / 1e9
    assert f"{free_gb:.0f}" == "65"
    assert r["max_batch"] == sequences


def test_latency_section():
    decode = point(*DERATED, "--batch", 32, "--context", 512)
    assert f"{decode['step_time_s'] * 1e3:.0f}" == "8"
    prefill_ms = {n: point(*DERATED, "--batch", 0, "--prefill", n)["step_time_s"] * 1e3
                  for n in (512, 8192, 32768)}
    assert f"{prefill_ms[512]:.0f}" == "14"
    assert f"{prefill_ms[8192]:.0f}" == "285"
    assert f"{prefill_ms[32768]:.2g}" == "2e+03"
    # chunked: a queued decode waits for at most one 512-token chunk (the last one of a
    # 32K prompt attends to the most keys) plus its own step
    chunk = point(*DERATED, "--batch", 0, "--prefill", 512, "--prefill-context", 32768 - 512)
    assert f"{(chunk['step_time_s'] + decode['step_time_s']) * 1e3:.0f}" == "39"


def test_decode_tokens_and_a_chunk_sit_on_opposite_sides_of_the_ridge():
    decode = point(*IDEAL, "--batch", 256, "--context", 512)
    chunk = point(*IDEAL, "--batch", 0, "--prefill", 512)
    assert decode["intensity"] < decode["ridge"] < chunk["intensity"]
    mixed = point(*IDEAL, "--batch", 256, "--context", 512, "--prefill", 512)
    assert mixed["intensity"] > decode["intensity"]
