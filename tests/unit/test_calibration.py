"""Fitting: known parameters are recovered, the split never leaks, readers check rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rooftui.core.assumptions import Assumptions
from rooftui.core.calibration import (
    KINDS,
    error_summary,
    fit,
    predict,
    row_costs,
    split_halves,
)
from rooftui.core.efficiency import Efficiency
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.informed import informed_parameters
from rooftui.core.model import load_model
from rooftui.core.point import PointConfig, evaluate_point
from rooftui.sweeps.measured import read_calibration_csv, to_measurements

H100 = load_gpu("h100-sxm")
TRUE = Efficiency(kernel_overhead_s=4e-6, gemm_mfu=0.78, gemm_mbu=0.86, gemm_m_half=48.0)


def gemm_rows(times=None) -> list[dict]:
    shapes = [(n, k) for n in (1024, 4096, 14336) for k in (1024, 4096, 8192)]
    rows = [{"kind": "gemm", "gpu": "h100-sxm", "m": float(m), "n": float(n), "k": float(k),
             "dtype": "bf16", "time_s": 1.0, "dataset": "synthetic"}
            for m in (1, 4, 16, 64, 128, 256, 512, 1024, 4096, 16384) for n, k in shapes]
    if times is not None:
        for row, seconds in zip(rows, times, strict=True):
            row["time_s"] = float(seconds)
    return rows


def test_fit_recovers_the_parameters_that_made_the_data():
    rows = to_measurements(gemm_rows())
    synthetic = predict(row_costs(rows, H100, Assumptions()), TRUE)
    rows = to_measurements(gemm_rows(synthetic))
    free = informed_parameters(rows)
    assert free == ["kernel_overhead_s", "gemm_mfu", "gemm_mbu", "gemm_m_half"]
    result = fit(row_costs(rows, H100, Assumptions()), free)
    for name in free:
        assert getattr(result.efficiency, name) == pytest.approx(getattr(TRUE, name),
                                                                 rel=0.02), name
    assert result.rms_log_error < 1e-3


def test_fit_keeps_parameters_it_cannot_inform():
    rows = to_measurements(gemm_rows())
    synthetic = predict(row_costs(rows, H100, Assumptions()), TRUE)
    rows = to_measurements(gemm_rows(synthetic))
    start = Efficiency(attention_mbu=0.5, step_overhead_s=0.01)
    result = fit(row_costs(rows, H100, Assumptions()), ["gemm_mbu"], start=start)
    assert result.efficiency.attention_mbu == 0.5
    assert result.efficiency.step_overhead_s == 0.01
    assert result.efficiency.gemm_mfu == 1.0


def test_split_keeps_repeats_together_alternates_and_calibrates_the_largest():
    rows = []
    for dataset in ("a", "b"):
        for batch in (1, 2, 4, 8, 16, 32):
            for _ in range(3):  # repeats of one configuration
                rows.append({"kind": "step", "gpu": "h100-sxm", "model": "llama-3-8b",
                             "batch": float(batch), "context": 512.0, "time_s": 0.01,
                             "dataset": dataset})
    measurements = to_measurements(rows)
    calibration = split_halves(measurements)
    assert np.array_equal(calibration, split_halves(measurements))  # deterministic
    for dataset in (0, 1):
        for batch, expected in ((1, True), (2, False), (4, True), (8, False), (16, True),
                                (32, True)):
            members = (measurements.dataset == dataset) & (measurements.batch == batch)
            assert set(calibration[members]) == {expected}, (dataset, batch)


def test_error_summary_is_signed_relative_error():
    summary = error_summary(np.array([1.1, 0.8, 1.0]), np.ones(3))
    assert summary["mape"] == pytest.approx(0.1)
    assert summary["worst"] == pytest.approx(-0.2)
    assert summary["bias"] == pytest.approx(-0.1 / 3)
    assert summary["rows"] == 3


def test_informed_parameters_follow_what_the_rows_vary():
    def step(batch, context, model="llama-3-8b", prefill=0.0):
        return {"kind": "step", "gpu": "h100-sxm", "model": model, "batch": float(batch),
                "context": float(context), "prefill": prefill, "time_s": 0.01,
                "dataset": "d"}

    one_context = to_measurements([step(b, 1024) for b in (1, 8, 64)])
    assert informed_parameters(one_context) == ["step_overhead_s", "gemm_mbu",
                                                "attention_mbu"]
    varied = to_measurements([step(1, c) for c in (512, 1024, 4096)]
                             + [step(0, 0, prefill=2048.0)]
                             + [step(1, 512, model="llama-2-70b")])
    assert informed_parameters(varied) == [
        "step_overhead_s", "layer_overhead_s", "gemm_mfu", "gemm_mbu", "attention_mfu",
        "attention_mbu", "attention_mbu_half"]


CALIBRATED = Efficiency(step_overhead_s=0.02, layer_overhead_s=1e-5, gemm_mfu=0.7,
                        gemm_mbu=0.8, gemm_m_half=64.0, attention_mfu=0.5, attention_mbu=0.6,
                        attention_mfu_half=300.0, attention_mbu_half=200.0, interconnect_efficiency=0.5,
                        allreduce_overhead_s=2e-5)


@pytest.mark.parametrize("efficiency", [Efficiency(), CALIBRATED])
@pytest.mark.parametrize("overlap", ["parts", "full"])
def test_a_step_row_is_the_step_model(efficiency, overlap):
    """What a fit evaluates equals what `sweep point` shows, under any efficiency."""
    steps = [(32, 2048, 512, 0, 1), (1, 1024, 0, 0, 4), (0, 0, 4096, 1024, 8),
             (128, 8192, 0, 0, 2)]
    rows = to_measurements([{"kind": "step", "gpu": "h100-sxm", "model": "llama-3-70b",
                             "batch": float(b), "context": float(s), "prefill": float(n),
                             "prefill_context": float(c), "tp": float(tp), "time_s": 1.0,
                             "dataset": "d"} for b, s, n, c, tp in steps])
    assumptions = Assumptions(overlap=overlap, efficiency=efficiency)
    predicted = predict(row_costs(rows, H100, assumptions), efficiency, overlap=overlap)
    model = load_model("llama-3-70b")
    for (b, s, n, c, tp), got in zip(steps, predicted, strict=True):
        config = PointConfig(gpu=H100, model=model, batch=b, context=s, prefill=n,
                             prefill_context=c, tp=tp, assumptions=assumptions)
        assert got == pytest.approx(evaluate_point(config)["step_time_s"], rel=1e-12)


def test_calibration_csv_rows_are_checked(tmp_path: Path):
    path = tmp_path / "m.csv"
    path.write_text("kind,gpu,m,n,k,time_s\ngemm,h100-sxm,1,1024,1024,4e-6\n"
                    "gemv,h100-sxm,1,1024,1024,4e-6\n")
    with pytest.raises(SpecError, match=r"m.csv: line 3: kind must be one of"):
        read_calibration_csv(path)
    path.write_text("kind,gpu,m,n,time_s\ngemm,h100-sxm,1,1024,4e-6\n")
    with pytest.raises(SpecError, match=r"line 2: a gemm row needs column 'k'"):
        read_calibration_csv(path)
    path.write_text("kind,gpu,m,n,k,time_s\ngemm,h100-sxm,1,1024,1024,-1\n")
    with pytest.raises(SpecError, match=r"line 2: time_s must be a number in \[1e-09, 1,000,000\] s"):
        read_calibration_csv(path)
    path.write_text("kind,gpu,m,n,k,time_s\ngemm,h100-sxm,1e300,1024,1024,1e-3\n")
    with pytest.raises(SpecError, match=r"line 2: m must be a number in \[0, 100,000,000\]"):
        read_calibration_csv(path)
    path.write_text("kind,gpu,m,n,k,time_s,dtype\ngemm,h100-sxm,1,1024,1024,4e-6,bfloat16\n")
    conversion = read_calibration_csv(path)
    assert conversion.datasets[0].name == "m"
    assert conversion.datasets[0].rows[0]["weight_dtype"] == "bf16"


def test_kinds_are_the_documented_ones():
    assert KINDS == ("gemm", "attention_decode", "attention_prefill", "step", "allreduce",
                     "copy", "e2e_ttft", "e2e_tpot", "e2e_itl")
