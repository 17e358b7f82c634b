"""Calibration by format: per-dtype GEMM parameters are recovered, rows are priced in their
own dtypes, the calibration CSV carries what was measured, and a bound is flagged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rooftui.core.assumptions import Assumptions
from rooftui.core.calibration import AT_BOUND, E2E_KINDS, at_bound, fit, predict, row_costs
from rooftui.core.dtypes import BYTES_PER_ELEMENT
from rooftui.core.efficiency import DtypeEfficiency, Efficiency
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.informed import informed_parameters
from rooftui.core.tables import dtype_code
from rooftui.sweeps.measured import (
    COLUMNS,
    read_calibration_csv,
    read_measured_paths,
    to_measurements,
    write_calibration_csv,
)

H100 = load_gpu("h100-sxm")
B200 = load_gpu("b200")
TRUE = Efficiency(kernel_overhead_s=4e-6, gemm_mfu=0.78, gemm_mbu=0.86, gemm_m_half=48.0,
                  fp8=DtypeEfficiency(gemm_mfu=0.62, gemm_mbu=0.8, gemm_m_half=20.0,
                                      kernel_overhead_s=1.2e-5, activation_quant_bytes=8.0))
TOKENS = (1, 4, 16, 64, 128, 256, 512, 1024, 4096, 16384)
SHAPES = [(n, k) for n in (1024, 4096, 14336) for k in (1024, 4096, 8192)]
NOISE = 0.03  # the synthetic measurements' scatter: sigma of log time


def gemm_rows(dtypes=("bf16", "fp8")) -> list[dict]:
    return [{"kind": "gemm", "gpu": "h100-sxm", "m": float(m), "n": float(n), "k": float(k),
             "weight_dtype": dtype, "time_s": 1.0, "dataset": f"synthetic {dtype}"}
            for dtype in dtypes for m in TOKENS for n, k in SHAPES]


def with_times(rows: list[dict], seconds) -> list[dict]:
    return [{**row, "time_s": float(t)} for row, t in zip(rows, seconds, strict=True)]


def synthetic(efficiency: Efficiency, noise: float = 0.0, seed: int = 0):
    """(rows, noise-free seconds): GEMM rows timed by `efficiency`, scattered by `noise`."""
    rows = gemm_rows()
    clean = predict(row_costs(to_measurements(rows), H100, Assumptions()), efficiency)
    scatter = np.exp(np.random.default_rng(seed).normal(0.0, noise, len(clean)))
    return with_times(rows, clean * scatter), clean


def test_bf16_and_fp8_gemms_inform_their_own_parameters():
    rows = to_measurements(gemm_rows())
    assert informed_parameters(rows) == [
        "kernel_overhead_s", "gemm_mfu", "gemm_mbu", "gemm_m_half", "fp8.gemm_mfu",
        "fp8.gemm_mbu", "fp8.gemm_m_half", "fp8.kernel_overhead_s",
        "fp8.activation_quant_bytes"]
    assert informed_parameters(to_measurements(gemm_rows(("fp8",))))[0] == "fp8.gemm_mfu"


def test_fit_recovers_per_dtype_parameters_and_the_quantisation_cost():
    rows, _ = synthetic(TRUE)
    measurements = to_measurements(rows)
    free = informed_parameters(measurements)
    result = fit(row_costs(measurements, H100, Assumptions()), free)
    # noise-free: the parameters many rows set come back to the rounding and the fit's
    # convergence; the half-efficiency sizes, set by the few rows near M = m_half only,
    # are shifted 1-2 % by the fit's weak pull towards typical values (PRIOR_WEIGHT)
    for name in free:
        tolerance = 0.03 if name.endswith("m_half") else 1e-3
        assert result.efficiency.value(name) == pytest.approx(TRUE.value(name),
                                                              rel=tolerance), name
    assert result.rms_log_error < 1e-3
    assert result.at_bound == ()


@pytest.mark.parametrize("seed", [0, 1])
def test_fit_with_noise_recovers_them_within_what_the_noise_allows(seed):
    """With a 3 % scatter over 90 rows per dtype, a parameter the rows pin down (an
    efficiency, a fixed time, the quantisation bytes: each set by tens of rows) has a
    standard error of about 3 % / sqrt(90 / 5) ~ 0.7 %; 4 % is over five of them. The
    half-efficiency sizes are informed by the few rows near M = m_half only: they are
    checked through what they predict (the fitted model within half the noise of the
    noise-free truth) instead."""
    rows, clean = synthetic(TRUE, noise=NOISE, seed=seed)
    measurements = to_measurements(rows)
    free = informed_parameters(measurements)
    costs = row_costs(measurements, H100, Assumptions())
    result = fit(costs, free)
    for name in free:
        if not name.endswith("m_half"):
            assert result.efficiency.value(name) == pytest.approx(TRUE.value(name),
                                                                  rel=0.04), name
    predicted = predict(costs, result.efficiency, mbu=result.mbu)
    assert np.sqrt(np.mean(np.log(predicted / clean) ** 2)) < NOISE / 2
    assert 0.8 * NOISE < result.rms_log_error < 1.2 * NOISE


def test_without_its_quantisation_cost_an_fp8_fit_is_worse():
    """The cost is needed: the same fit without it errs by the shape's N."""
    rows, _ = synthetic(TRUE)
    measurements = to_measurements(rows)
    costs = row_costs(measurements, H100, Assumptions())
    free = [n for n in informed_parameters(measurements) if n != "fp8.activation_quant_bytes"]
    assert fit(costs, free).rms_log_error > 0.03


def test_a_kernel_fit_leaves_the_engine_overheads_at_zero():
    rows, _ = synthetic(TRUE)
    result = fit(row_costs(to_measurements(rows), H100, Assumptions()),
                 informed_parameters(to_measurements(rows)))
    assert result.efficiency.step_overhead_s == 0.0
    assert result.efficiency.layer_overhead_s == 0.0


# --- priced in its own formats -----------------------------------------------------------

def _gpt_oss_step(expert_dtype: str) -> dict:
    return {"kind": "step", "gpu": "h100-sxm", "model": "gpt-oss-120b", "batch": 1.0,
            "context": 1024.0, "weight_dtype": "bf16", "expert_dtype": expert_dtype,
            "time_s": 1e-3, "dataset": "gpt-oss"}


def test_routed_experts_are_priced_in_their_own_dtype():
    """A decode step at batch 1 is memory-bound: its time moves with the experts' bytes
    per weight, and only with them (the rest of the model stays bf16)."""
    rows = to_measurements([_gpt_oss_step(d) for d in ("bf16", "fp8", "mxfp4")])
    costs = row_costs(rows, H100, Assumptions())
    bf16, fp8, mxfp4 = costs.gemm_bytes
    per_byte_saved = (bf16 - mxfp4) / (bf16 - fp8)  # expert weights read: the same
    assert per_byte_saved == pytest.approx(
        (2.0 - BYTES_PER_ELEMENT["mxfp4"]) / (2.0 - 1.0), rel=1e-9)
    assert mxfp4 < 0.5 * bf16  # most of gpt-oss-120b's weights are routed experts
    ideal = predict(costs, Efficiency())
    assert (ideal[0] - ideal[2]) / (ideal[0] - ideal[1]) == pytest.approx(per_byte_saved,
                                                                          rel=1e-6)
    np.testing.assert_array_equal(costs.gemm_params, costs.gemm_params[0])  # same FLOPs
    assert rows.compute_dtype[2] == dtype_code("bf16")  # mxfp4 is dequantised to bf16


def test_an_nvfp4_gemm_runs_at_the_fp4_peak():
    m, n, k = 16384.0, 8192.0, 8192.0
    rows = to_measurements([{"kind": "gemm", "gpu": "b200", "m": m, "n": n, "k": k,
                             "weight_dtype": dtype, "time_s": 1e-3, "dataset": "fp4"}
                            for dtype in ("nvfp4", "bf16")])
    assert list(rows.compute_dtype) == [dtype_code("fp4"), dtype_code("bf16")]
    costs = row_costs(rows, B200, Assumptions())
    assert costs.peak_flops[0] == pytest.approx(B200.tflops["fp4"] * 1e12)
    assert costs.gemm_bytes[0] == pytest.approx(BYTES_PER_ELEMENT["nvfp4"]
                                                * (n * k + m * k + m * n))
    ideal = predict(costs, Efficiency())
    assert ideal[0] == pytest.approx(2 * m * n * k / (B200.tflops["fp4"] * 1e12))
    assert ideal[1] / ideal[0] == pytest.approx(B200.tflops["fp4"] / B200.tflops["bf16"])


def test_a_compute_dtype_without_a_peak_says_so():
    rows = to_measurements([{"kind": "gemm", "gpu": "h100-sxm", "m": 64.0, "n": 1024.0,
                             "k": 1024.0, "weight_dtype": "nvfp4", "time_s": 1e-5,
                             "dataset": "x"}])
    with pytest.raises(SpecError, match="no peak for fp4"):
        row_costs(rows, H100, Assumptions())


def test_end_to_end_rows_are_refused_by_the_closed_form():
    rows = to_measurements([{"kind": "e2e_tpot", "gpu": "h100-sxm", "model": "llama-3-8b",
                             "isl": 1024.0, "osl": 128.0, "concurrency": 8.0,
                             "time_s": 0.01, "dataset": "runs"}])
    assert informed_parameters(rows) == []
    with pytest.raises(SpecError, match=r"e2e rows are fitted by replay: 1 end-to-end rows \(runs\)"):
        row_costs(rows, H100, Assumptions())


# --- the calibration CSV ---------------------------------------------------------------

def test_the_csv_round_trips_every_column(tmp_path: Path):
    rows = [
        {"kind": "gemm", "gpu": "h200", "m": 8.0, "n": 1024.0, "k": 4096.0,
         "weight_dtype": "fp8", "compute_dtype": "fp8", "engine": "trtllm",
         "engine_version": "1.3.0rc20", "cuda_graphs": "true", "time_s": 1.25e-5,
         "dataset": "kernels", "source": "a benchmark"},
        {"kind": "step", "gpu": "h100-sxm", "model": "gpt-oss-20b", "tp": 2.0,
         "weight_dtype": "bf16", "compute_dtype": "bf16", "expert_dtype": "mxfp4",
         "kv_dtype": "fp8", "engine": "vllm", "cuda_graphs": "false", "batch": 32.0,
         "context": 2048.0, "time_s": 0.0123, "dataset": "steps", "source": "a run"},
        {"kind": "e2e_itl", "gpu": "h100-sxm", "model": "llama-3-8b", "weight_dtype": "fp8",
         "engine": "sglang", "engine_version": "0.5.1", "isl": 1024.0, "osl": 256.0,
         "request_rate": 2.5, "num_prompts": 200.0, "time_s": 0.02, "dataset": "serving",
         "source": "a run"}]
    path = tmp_path / "all.csv"
    write_calibration_csv(rows, path)
    assert path.read_text().splitlines()[0] == ",".join(COLUMNS)
    back = [row for dataset in read_calibration_csv(path).datasets for row in dataset.rows]
    assert back == rows
    measurements = to_measurements(back)
    assert list(measurements.expert_dtype) == [dtype_code(d) for d in ("fp8", "mxfp4", "fp8")]
    assert measurements.request_rate[2] == 2.5 and measurements.num_prompts[2] == 200


def test_an_old_csv_still_reads_with_the_stated_defaults(tmp_path: Path):
    path = tmp_path / "old.csv"
    path.write_text("kind,gpu,model,tp,dtype,kv_dtype,m,n,k,batch,context,prefill,"
                    "prefill_context,prompts,bytes,time_s,dataset,source\n"
                    "gemm,b200,,,nvfp4,,64,1024,1024,,,,,,,1e-5,k,\n"
                    "step,h100-sxm,llama-3-8b,1,fp16,,,,,8,512,,,,,0.01,s,\n"
                    "step,h100-sxm,llama-3-8b,1,int4-g128,,,,,8,512,,,,,0.01,s,\n")
    rows = [row for dataset in read_calibration_csv(path).datasets for row in dataset.rows]
    assert [row["weight_dtype"] for row in rows] == ["nvfp4", "fp16", "int4-g128"]
    measurements = to_measurements(rows)
    # a kernel computes in its operands' format (nvfp4 as fp4), a step as the step model
    # would (fp16 weights in fp16, weight-only int4 in bf16)
    assert list(measurements.compute_dtype) == [dtype_code(d) for d in ("fp4", "fp16", "bf16")]
    assert list(measurements.expert_dtype) == list(measurements.dtype)
    assert list(measurements.kv_dtype) == [dtype_code(d) for d in ("bf16", "fp16", "bf16")]


def test_a_row_that_measured_a_run_needs_its_workload(tmp_path: Path):
    path = tmp_path / "m.csv"
    path.write_text("kind,gpu,model,isl,osl,time_s\ne2e_tpot,h100-sxm,llama-3-8b,1024,128,0.01\n")
    with pytest.raises(SpecError, match=r"line 2: a e2e_tpot row needs column 'concurrency'"):
        read_calibration_csv(path)
    path.write_text("kind,gpu,model,osl,concurrency,time_s\n"
                    "e2e_ttft,h100-sxm,llama-3-8b,128,8,0.01\n")
    with pytest.raises(SpecError, match=r"line 2: a e2e_ttft row needs column 'isl'"):
        read_calibration_csv(path)
    path.write_text("kind,gpu,m,n,k,cuda_graphs,time_s\ngemm,h100-sxm,1,1024,1024,maybe,1e-5\n")
    with pytest.raises(SpecError, match=r"line 2: cuda_graphs must be true or false"):
        read_calibration_csv(path)
    path.write_text("kind,gpu,m,n,k,compute_dtype,time_s\ngemm,h100-sxm,1,1024,1024,fp6,1e-5\n")
    with pytest.raises(SpecError, match=r"line 2: unknown dtype 'fp6'"):
        read_calibration_csv(path)


# --- at a bound ----------------------------------------------------------------------------

def test_a_parameter_that_ends_at_its_bound_is_flagged():
    """GEMMs timed faster than the datasheet allows pull the bandwidth fraction past 1."""
    rows = gemm_rows(("bf16",))
    ideal = predict(row_costs(to_measurements(rows), H100, Assumptions()), Efficiency())
    measurements = to_measurements(with_times(rows, 0.7 * ideal))
    result = fit(row_costs(measurements, H100, Assumptions()), informed_parameters(measurements))
    assert "gemm_mbu" in result.at_bound and "gemm_mfu" in result.at_bound
    assert result.efficiency.gemm_mbu >= 1.0 - AT_BOUND
    assert at_bound("fp8.gemm_mfu", 0.995) and not at_bound("fp8.gemm_mfu", 0.98)
    assert at_bound("step_overhead_s", 0.0) and not at_bound("step_overhead_s", 1e-3)
    assert at_bound("mbu", 0.005)


# --- the published datasets ----------------------------------------------------------------

def test_every_converter_fills_what_its_source_says(shared_dir: Path):
    folder = shared_dir / "reference" / "measured"
    if not folder.is_dir():
        pytest.skip(f"no measured data at {folder}")
    datasets = {dataset.name: dataset
                for conversion in read_measured_paths([folder]) for dataset in conversion.datasets}
    for dataset in datasets.values():
        for row in dataset.rows:
            assert set(row) <= set(COLUMNS), (dataset.name, set(row) - set(COLUMNS))
            assert row.get("weight_dtype"), dataset.name
            if row["kind"] not in ("allreduce", "copy"):
                assert row.get("compute_dtype"), dataset.name
        to_measurements(dataset.rows)  # every row reads into the core's arrays
    fp8 = datasets["aiconfigurator H100 fp8 GEMM"].rows[0]
    assert (fp8["weight_dtype"], fp8["compute_dtype"], fp8["engine"], fp8["engine_version"],
            fp8["cuda_graphs"]) == ("fp8", "fp8", "trtllm", "1.3.0rc20", "true")
    tpot = datasets["aiconfigurator H200 llama-3-70b trtllm TPOT"].rows
    assert {row["kind"] for row in tpot} == {"e2e_tpot"}
    assert {row["weight_dtype"] for row in tpot} == {"fp8"}  # all 70B rows are FP8
    assert all(row["isl"] > 0 and row["osl"] > 0 and row["concurrency"] > 0 for row in tpot)
    runs = [row for name, dataset in datasets.items() if "aiconfigurator" in name
            for row in dataset.rows if row["kind"] in E2E_KINDS]
    assert {row["kind"] for row in runs} == {"e2e_ttft", "e2e_tpot"}
    assert {row["engine"] for row in runs} == {"trtllm", "vllm", "sglang"}
    assert "1.0.0rc3" in {row.get("engine_version") for row in runs}
    bf16_release = [row for row in runs if row["model"] == "llama-3.1-8b"
                    and row["engine"] == "trtllm"]
    assert {row["weight_dtype"] for row in bf16_release} == {"bf16"}
    assert not any(row["kind"] == "step" for name, dataset in datasets.items()
                   if "aiconfigurator" in name for row in dataset.rows)
    splitwise = datasets["Splitwise H100 llama-2-70b TP4 decode"].rows[0]
    assert (splitwise["weight_dtype"], splitwise["compute_dtype"]) == ("fp16", "fp16")
    assert "engine" not in splitwise  # not recorded by the source
    vidur = datasets["vidur H100 fp16 GEMMs (Llama shapes)"].rows[0]
    assert vidur["cuda_graphs"] == "false"
    nccl = datasets["aiconfigurator H100 all-reduce (NCCL)"].rows[0]
    assert (nccl["engine"], nccl["engine_version"]) == ("nccl", "2.29.2")
