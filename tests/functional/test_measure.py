"""`sweep measure` on the CPU at tiny sizes, and its output calibrating (round trip)."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from rooftui.sweeps.cli import main
from tests.conftest import run_sweep

TINY_MODEL = """\
name = "tiny"
hidden_size = 256
num_hidden_layers = 2
num_attention_heads = 4
num_key_value_heads = 2
head_dim = 64
intermediate_size = 512
vocab_size = 1000
"""


@pytest.fixture
def tiny_model(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY_MODEL)
    return path


def test_measure_on_the_cpu_writes_rows_that_calibrate(tiny_model, tmp_path, capsys):
    pytest.importorskip("torch")
    rows_path = tmp_path / "cpu.csv"
    with pytest.raises(SystemExit) as exit_info:
        main(["measure", "--model", str(tiny_model), "--device", "cpu", "--out",
              str(rows_path)])
    assert exit_info.value.code == 0
    err = capsys.readouterr().err
    assert "CPU figures, not GPU figures" in err
    with rows_path.open() as handle:
        rows = list(csv.DictReader(handle))
    kinds = {row["kind"] for row in rows}
    assert kinds == {"copy", "gemm", "attention_decode"}
    assert {row["gpu"] for row in rows} == {"cpu"}
    assert all(float(row["time_s"]) > 0 for row in rows)
    gemm_shapes = {(row["n"], row["k"]) for row in rows if row["kind"] == "gemm"}
    # fused QKV (4 + 2*2 heads of 64), O, gate+up, down of the tiny model
    assert gemm_shapes == {("512", "256"), ("256", "256"), ("1024", "256"), ("256", "512")}

    profile = tmp_path / "cpu-profile.toml"
    report = json.loads(run_sweep("calibrate", "--measured", rows_path, "--gpu", "h100-sxm",
                                  "--rows-gpu", "cpu", "--out", profile, "--json"))
    fitted, base = report["datasets"][0]["fitted"], report["datasets"][0]["base"]
    assert fitted["mape"] < base["mape"]  # the fit explains the CPU far better than ideal
    assert 0 < report["parameters"]["mbu"] < 1  # a CPU streams far below an H100
    point = json.loads(run_sweep("point", "--profile", profile, "--json"))
    ideal = json.loads(run_sweep("point", "--json"))
    assert point["step_time_s"] > ideal["step_time_s"]


def test_measure_without_pytorch_says_how_to_install_it(tiny_model, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(SystemExit) as exit_info:
        main(["measure", "--model", str(tiny_model), "--out", "x.csv"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "rooftui[measure]" in err and err.count("\n") == 1


def test_measure_refuses_a_shard_the_model_cannot_make(tiny_model, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["measure", "--model", str(tiny_model), "--tp", "3"])
    assert exit_info.value.code == 2
    assert "does not split over tp = 3" in capsys.readouterr().err
