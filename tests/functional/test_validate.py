"""`sweep validate` and `sweep calibrate` against the published measurements in
shared/reference/measured/ (read from there, never copied into the project)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from rooftui.sweeps.cli import cli, main
from tests.conftest import run_sweep

CHECKED = {  # the checks: dataset -> the file it comes from
    "Splitwise H100 llama-2-70b TP4 decode": "splitwise-perf-model-a100-h100.csv",
    "Splitwise A100 llama-2-70b TP4 decode": "splitwise-perf-model-a100-h100.csv",
    "Sarathi Yi-34B TP2 decode": "sarathi-fig2-decode-yi34b-tp2-a100pcie.csv",
    "aiconfigurator H100 bf16 GEMM": "aiconfigurator-gemm-h100-h200-trtllm.csv",
}


@pytest.fixture
def measured(shared_dir: Path) -> Path:
    folder = shared_dir / "reference" / "measured"
    if not folder.is_dir():
        pytest.skip(f"no measured data at {folder}")
    return folder


def validate_json(*args) -> dict:
    return json.loads(run_sweep("validate", *args, "--json"))


def test_calibrated_decode_and_gemm_errors_are_within_ten_percent(measured):
    files = sorted(set(CHECKED.values()))
    report = validate_json(*[a for f in files for a in ("--measured", measured / f)])
    by_name = {row["dataset"]: row for row in report["datasets"]}
    for name in CHECKED:
        row = by_name[name]
        assert row["fitted_on_other_half"]["mape"] <= 0.10, (name, row)
        # the ideal roofline is a bound: far too fast, and shown beside the fit
        assert row["ideal"]["bias"] < -0.3, (name, row)
        assert row["validation_rows"] >= 3 and row["calibration_rows"] >= 3


def test_shipped_profiles_are_scored_on_points_they_never_saw(measured):
    for profile, gpu, names in (
            ("h100-splitwise", "h100-sxm", ["Splitwise H100 llama-2-70b TP4 decode"]),
            ("a100-splitwise", "a100-80gb", ["Splitwise A100 llama-2-70b TP4 decode"]),
            ("a100-pcie-sarathi", "a100-80gb", ["Sarathi Yi-34B TP2 decode"]),
            ("h100-trtllm", "h100-sxm", ["aiconfigurator H100 bf16 GEMM"])):
        files = sorted({CHECKED[name] for name in names})
        report = validate_json(*[a for f in files for a in ("--measured", measured / f)],
                               "--profile", profile, "--gpu", gpu)
        by_name = {row["dataset"]: row for row in report["datasets"]}
        for name in names:
            assert by_name[name]["profile"]["name"] == profile
            assert by_name[name]["profile"]["mape"] <= 0.10, (profile, by_name[name])


def test_calibrate_writes_a_profile_every_command_accepts(measured, tmp_path):
    out = tmp_path / "splitwise-h100.toml"
    report = json.loads(run_sweep(
        "calibrate", "--measured", measured / "splitwise-perf-model-a100-h100.csv",
        "--gpu", "h100-sxm", "--dataset", "TP4 decode", "--half", "calibration",
        "--out", out, "--json"))
    assert report["half"] == "calibration"
    assert report["datasets"][0]["fitted"]["mape"] < 0.05
    assert report["datasets"][0]["base"]["mape"] > 0.5  # the ideal roofline
    text = out.read_text()
    assert text.startswith("# Calibrated by: sweep calibrate --measured ")
    assert "[efficiency]" in text and "[sources]" in text and "[calibration]" in text
    point = json.loads(run_sweep("point", "--model", "llama-2-70b", "--tp", "4",
                                 "--batch", "8", "--context", "640", "--profile", out,
                                 "--json"))
    ideal = json.loads(run_sweep("point", "--model", "llama-2-70b", "--tp", "4",
                                 "--batch", "8", "--context", "640", "--json"))
    assert point["step_time_s"] == pytest.approx(0.0314, rel=0.1)  # measured: 31.4 ms
    assert point["step_time_s"] > 2 * ideal["step_time_s"]
    # scored by validate on the half it was not fitted on
    scored = validate_json("--measured", measured / "splitwise-perf-model-a100-h100.csv",
                           "--profile", out, "--gpu", "h100-sxm")
    row = next(r for r in scored["datasets"]
               if r["dataset"] == "Splitwise H100 llama-2-70b TP4 decode")
    assert row["profile"]["mape"] <= 0.10


@pytest.mark.slow
def test_every_measured_file_is_converted_or_its_omission_explained(measured, tmp_path):
    chart = tmp_path / "validation.html"
    report = validate_json("--measured", measured, "--chart", chart)
    names = {row["dataset"] for row in report["datasets"]}
    assert set(CHECKED) <= names
    covered = {path.name for path in measured.glob("*.csv")}
    explained = {line.split(":")[0] for line in report["skipped"]}
    converted = {"splitwise", "sarathi", "aiconfigurator", "vidur", "LLMCompass"}
    for name in covered:
        assert name in explained or any(
            row["dataset"].lower().startswith(prefix.lower()) and prefix.lower() in name
            for row in report["datasets"] for prefix in converted), name
    for row in report["datasets"]:
        assert row["validation_rows"] > 0 and row["source"]
    html = chart.read_text()
    assert not re.search(r"<script[^>]+src=[\"']https?:", html)  # opens offline
    assert "Predicted vs measured" in html


def test_validate_table_names_the_three_predictions(measured):
    text = run_sweep("validate", "--measured",
                     measured / "sarathi-fig2-decode-yi34b-tp2-a100pcie.csv")
    assert "ideal roofline" in text and "fitted on other half" in text
    assert "Sarathi Yi-34B TP2 decode" in text and "MAPE" in text


@pytest.mark.parametrize(("args", "message"), [
    (["validate", "--measured", "{readme}"], "not the calibration format"),
    (["calibrate", "--measured", "{splitwise}", "--gpu", "h100-sxmm"], "unknown gpu"),
    (["calibrate", "--measured", "{splitwise}", "--gpu", "l4"], "no measured rows for GPU l4"),
    (["calibrate", "--measured", "{splitwise}", "--gpu", "h100-sxm", "--fit", "speed"],
     "unknown speed"),
])
def test_bad_input_is_one_line_and_exit_2(measured, tmp_path, capsys, args, message):
    readme = tmp_path / "notes.csv"
    readme.write_text("a,b\n1,2\n")
    args = [a.format(readme=readme, splitwise=measured / "splitwise-perf-model-a100-h100.csv")
            for a in args]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1


def test_help_explains_the_commands():
    for command in ("validate", "calibrate"):
        result = CliRunner().invoke(cli, [command, "--help"])
        assert result.exit_code == 0
        assert "--measured" in result.output and "Examples" in result.output
