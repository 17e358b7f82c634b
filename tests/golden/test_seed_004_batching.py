"""seeds/004 'Why batching speeds up decode': its ridge, and its B/2 claim corrected.

The seed says decode intensity is about B/2 in FP16 ("B=1 ... about 0.5 FLOPs/byte").
It is B: a weight read once serves B rows, each row costs 2 FLOPs (multiply and add) per
weight, and an FP16 weight is 2 bytes, so 2B FLOPs over 2 bytes. `sweep point` shows it.
"""

from __future__ import annotations

import pytest

from tests.conftest import run_sweep, sweep_json


def test_ridge_330_at_990_tflops_over_3_tbs():
    r = sweep_json("point", "--peak-tflops", 990, "--bandwidth-tbs", 3)
    assert f"{r['ridge']:.0f}" == "330"


@pytest.mark.parametrize("batch", [1, 2, 16, 64])
def test_fp16_gemm_intensity_is_b_not_b_over_2(batch):
    r = sweep_json("point", "--weight-dtype", "fp16", "--batch", batch, "--context", 1024)
    assert r["parts"]["gemm"]["intensity"] == pytest.approx(batch)


def test_intensity_grows_with_batch():
    values = [sweep_json("point", "--batch", b)["intensity"] for b in (1, 4, 16, 64, 256)]
    assert values == sorted(values) and values[-1] > 10 * values[0]


def test_point_explains_why():
    text = run_sweep("point", "--weight-dtype", "fp16", "--batch", 1)
    assert "2 FLOPs per weight" in text and "not half of it" in text
