"""`sweep calibrate` on synthetic measurements: a kernel profile, an engine profile on top of
it, rows priced in their own formats, bounds flagged, end-to-end rows left out."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from rooftui.core.assumptions import Assumptions, load_profile
from rooftui.core.calibration import predict, row_costs
from rooftui.core.efficiency import DtypeEfficiency, Efficiency
from rooftui.core.hardware import load_gpu
from rooftui.sweeps.measured import to_measurements, write_calibration_csv
from tests.conftest import run_sweep, sweep, sweep_process

KERNELS = Efficiency(kernel_overhead_s=4e-6, gemm_mfu=0.78, gemm_mbu=0.86, gemm_m_half=48.0,
                     fp8=DtypeEfficiency(gemm_mfu=0.62, gemm_mbu=0.8, gemm_m_half=20.0,
                                         kernel_overhead_s=1.2e-5, activation_quant_bytes=8.0))
OVERHEADS = {"step_overhead_s": 5e-3, "layer_overhead_s": 5e-5}  # an engine's, on its kernels
# the CSV's six significant digits: what a prediction that matches exactly can be off by
WRITTEN = 1e-5


def timed(rows: list[dict], efficiency: Efficiency, gpu: str = "h100-sxm") -> list[dict]:
    """The rows, timed as `efficiency` predicts them."""
    seconds = predict(row_costs(to_measurements(rows), load_gpu(gpu), Assumptions()),
                      efficiency)
    return [{**row, "time_s": float(t)} for row, t in zip(rows, seconds, strict=True)]


def csv_file(path: Path, rows: list[dict]) -> Path:
    write_calibration_csv(rows, path)
    return path


def kernel_rows() -> list[dict]:
    return [{"kind": "gemm", "gpu": "h100-sxm", "m": float(m), "n": float(n), "k": float(k),
             "weight_dtype": dtype, "dataset": f"GEMM {dtype}", "time_s": 1.0}
            for dtype in ("bf16", "fp8") for m in (1, 16, 64, 256, 1024, 4096, 16384)
            for n in (1024, 4096, 14336) for k in (1024, 4096)]


def step_rows() -> list[dict]:
    return [{"kind": "step", "gpu": "h100-sxm", "model": model, "batch": float(batch),
             "context": 1024.0, "dataset": f"steps {model}", "time_s": 1.0}
            for model in ("llama-3-8b", "llama-3-70b") for batch in (1, 8, 32, 128)]


def test_an_engine_profile_fits_its_overheads_on_top_of_a_kernel_profile(tmp_path: Path):
    kernels = csv_file(tmp_path / "kernels.csv", timed(kernel_rows(), KERNELS))
    kernel_profile = tmp_path / "h100-kernels.toml"
    report = json.loads(run_sweep("calibrate", "--measured", kernels, "--gpu", "h100-sxm",
                                  "--out", kernel_profile, "--json"))
    assert "step_overhead_s" not in report["fitted"]
    assert report["parameters"]["fp8.activation_quant_bytes"] == pytest.approx(8.0, rel=1e-3)
    kernel = load_profile(str(kernel_profile)).efficiency
    assert kernel.step_overhead_s == 0.0 and kernel.layer_overhead_s == 0.0
    assert tomllib.loads(kernel_profile.read_text())["efficiency"]["fp8"]["gemm_mfu"] == (
        pytest.approx(0.62, rel=1e-3))

    # steps timed as the kernels were fitted, plus the engine's overheads
    steps = csv_file(tmp_path / "steps.csv", timed(step_rows(), kernel.with_values(OVERHEADS)))
    engine_profile = tmp_path / "h100-engine.toml"
    report = json.loads(run_sweep(
        "calibrate", "--measured", steps, "--gpu", "h100-sxm", "--base", kernel_profile,
        "--fit", "step_overhead_s,layer_overhead_s", "--out", engine_profile, "--json"))
    assert report["fitted"] == ["step_overhead_s", "layer_overhead_s"]
    # the kernel profile prices the steps' GEMMs as the data were made: only the
    # overheads are left; they come back but for the fit's weak pull towards typical
    # values (PRIOR_WEIGHT: 0.2 % and 0.6 % here; 0 without it)
    for name, value in OVERHEADS.items():
        assert report["parameters"][name] == pytest.approx(value, rel=0.01), name
    engine = load_profile(str(engine_profile)).efficiency
    assert engine.value("fp8.gemm_mfu") == kernel.value("fp8.gemm_mfu")  # kept from --base
    assert engine.gemm_mbu == kernel.gemm_mbu
    assert tomllib.loads(engine_profile.read_text())["calibration"]["at_bound"] == []


def _gpt_oss(expert_dtype: str) -> list[dict]:
    return [{"kind": "step", "gpu": "h100-sxm", "model": "gpt-oss-120b", "batch": float(b),
             "context": 2048.0, "weight_dtype": "bf16", "expert_dtype": expert_dtype,
             "dataset": "gpt-oss", "time_s": 1.0} for b in (1, 4, 16)]


def test_calibrate_prices_mxfp4_experts_and_nvfp4_compute_in_their_formats(tmp_path: Path):
    """Steps timed at the ideal roofline of mxfp4 experts match it exactly when the CSV
    says mxfp4, and are priced slower (bf16 experts: 3.8 times the bytes) when it says
    bf16; an nvfp4 GEMM timed at the fp4 peak matches the ideal on a B200."""
    measured = timed(_gpt_oss("mxfp4"), Efficiency())
    as_measured = csv_file(tmp_path / "mxfp4.csv", measured)
    report = json.loads(run_sweep("calibrate", "--measured", as_measured, "--gpu",
                                  "h100-sxm", "--fit", "step_overhead_s", "--json"))
    assert report["datasets"][0]["base"]["mape"] < WRITTEN
    mislabelled = csv_file(tmp_path / "bf16.csv", [{**row, "expert_dtype": "bf16"}
                                                  for row in measured])
    report = json.loads(run_sweep("calibrate", "--measured", mislabelled, "--gpu",
                                  "h100-sxm", "--fit", "step_overhead_s", "--json"))
    assert report["datasets"][0]["base"]["bias"] > 1.0

    nvfp4 = [{"kind": "gemm", "gpu": "b200", "m": float(m), "n": 8192.0, "k": 8192.0,
              "weight_dtype": "nvfp4", "dataset": "nvfp4", "time_s": 1.0}
             for m in (1024, 4096, 16384)]
    fp4 = csv_file(tmp_path / "nvfp4.csv", timed(nvfp4, Efficiency(), gpu="b200"))
    report = json.loads(run_sweep("calibrate", "--measured", fp4, "--gpu", "b200",
                                  "--fit", "fp4.gemm_mfu", "--json"))
    assert report["datasets"][0]["base"]["mape"] < WRITTEN


def test_a_fit_at_a_bound_is_flagged_in_text_json_and_profile(tmp_path: Path):
    rows = [{**row, "time_s": 0.7 * row["time_s"]}  # faster than the datasheet allows
            for row in timed([r for r in kernel_rows() if r["weight_dtype"] == "bf16"],
                             Efficiency())]
    path = csv_file(tmp_path / "fast.csv", rows)
    profile = tmp_path / "fast.toml"
    text = run_sweep("calibrate", "--measured", path, "--gpu", "h100-sxm", "--out", profile)
    assert "AT BOUND" in text and "at a bound of its range: " in text
    report = json.loads(run_sweep("calibrate", "--measured", path, "--gpu", "h100-sxm",
                                  "--json"))
    assert "gemm_mbu" in report["at_bound"]
    assert "gemm_mbu" in tomllib.loads(profile.read_text())["calibration"]["at_bound"]


def test_steps_of_two_engines_in_one_profile_are_noted(tmp_path: Path):
    """An engine's host sets its own step overheads: one profile fitted on two engines'
    steps says so, and one engine's steps say nothing."""
    rows = [{**row, "engine": "vllm" if "8b" in row["dataset"] else "sglang"}
            for row in timed(step_rows(), KERNELS.with_values(OVERHEADS))]
    both = csv_file(tmp_path / "both.csv", rows)
    report = json.loads(run_sweep("calibrate", "--measured", both, "--gpu", "h100-sxm",
                                  "--json"))
    (note,) = report["notes"]
    assert "steps of 2 engines (sglang, vllm) share one set of fixed times" in note
    assert f"note: {note}" in run_sweep("calibrate", "--measured", both, "--gpu", "h100-sxm")
    one = csv_file(tmp_path / "one.csv", [r for r in rows if r["engine"] == "vllm"])
    assert json.loads(run_sweep("calibrate", "--measured", one, "--gpu", "h100-sxm",
                                "--json"))["notes"] == []


def test_end_to_end_rows_are_left_out_with_a_reason(tmp_path: Path):
    run = {"kind": "e2e_tpot", "gpu": "h100-sxm", "model": "llama-3-8b", "isl": 1024.0,
           "osl": 128.0, "concurrency": 8.0, "time_s": 0.01, "dataset": "runs"}
    kernels = timed(kernel_rows()[:20], KERNELS)
    mixed = csv_file(tmp_path / "mixed.csv", [*kernels, run])
    report = json.loads(run_sweep("calibrate", "--measured", mixed, "--gpu", "h100-sxm",
                                  "--json"))
    assert report["rows"] == 20
    assert report["skipped"] == ["1 end-to-end rows: e2e rows are fitted by replay through "
                                 "the simulator, not by this closed-form fit"]
    assert "left out: 1 end-to-end rows" in run_sweep("calibrate", "--measured", mixed,
                                                      "--gpu", "h100-sxm")
    only = csv_file(tmp_path / "runs.csv", [run])
    _, error = sweep("calibrate", "--measured", only, "--gpu", "h100-sxm", expect=2)
    assert "e2e rows are fitted by replay" in error and error.count("\n") == 1


@pytest.mark.parametrize("command", [("calibrate", "--gpu", "h100-sxm"), ("validate",)])
@pytest.mark.parametrize("name", ["vllm-bench-serve.json", "sglang-bench-serving.jsonl",
                                  "guidellm-report.json", "profile_export_genai_perf.json"])
def test_a_benchmark_result_file_is_sent_to_replay_in_one_line(command, name):
    """A serving benchmark's result holds end-to-end latencies and no GPU or TP: calibrate
    and validate name the tool and the `sweep replay` command that fits it."""
    path = Path(__file__).parents[1] / "data" / "bench_results" / name
    _, err = sweep(command[0], "--measured", path, *command[1:], expect=2)
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"sweep replay {path} --model" in err and "result file" in err


def test_the_front_end_delay_is_refused_with_where_to_fit_it(tmp_path: Path):
    """Step and kernel rows hold no client delay: fitting request_overhead_s from them
    would report the prior's pull as a measurement."""
    steps = csv_file(tmp_path / "steps.csv", timed(step_rows(), KERNELS))
    done = sweep_process("calibrate", "--measured", steps, "--gpu", "h100-sxm",
                         "--fit", "step_overhead_s,request_overhead_s")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "sweep replay --fit" in done.stderr and len(done.stderr.strip().splitlines()) == 1
