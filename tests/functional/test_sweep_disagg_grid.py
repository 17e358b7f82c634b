"""Grid kind `disagg` through `sweep run`: one row per point equal to `sweep disagg
--json`, no charts by default, `--dry-run`, and one-line errors for bad values."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

from rooftui.core.limits import BOUNDS
from rooftui.sweeps.kind_disagg import FIGURES, KINDS, PRICED_FIGURES
from rooftui.sweeps.results import read_manifest, scan_results
from tests.conftest import sweep

# a dense and an MoE model; a TPOT of 0.1 ms that nothing meets, and one that something does
DISAGG = """
name = "dis"
kind = "disagg"
[fixed]
system = "hgx-h200-ib"
input_tokens = 1024
slo_ttft = 0.5
max_gpus = 16
price_per_gpu_hour = 2.0
[axes]
model = ["llama-3-8b", "qwen3-30b-a3b"]
slo_tpot = [0.0001, 0.05]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(text)
    return path


def rows(out: Path) -> list[dict]:
    frame = scan_results(out).collect().sort("point_id")
    return frame.with_columns(pl.col(pl.Categorical).cast(pl.String)).to_dicts()


def at(report: dict, path: tuple[str, ...]):
    for key in path:
        report = report[key]
    return report


def test_disagg_rows_are_sweep_disagg(tmp_path):
    out = tmp_path / "out"
    summary = json.loads(sweep("run", write(tmp_path, DISAGG), "--out", out, "--json")[0])
    assert summary["complete"] and summary["rows"] == 4
    assert not list((out / "charts").iterdir())  # no [charts]: none rendered
    assert read_manifest(out)["kind"] == "disagg"
    met = set()
    for row in rows(out):
        report = json.loads(sweep(
            "disagg", "--model", row["model"], "--system", "hgx-h200-ib",
            "--input-tokens", 1024, "--slo-ttft", 0.5, "--slo-tpot", row["slo_tpot"],
            "--max-gpus", 16, "--price-per-gpu-hour", 2.0, "--json")[0])
        assert row["mean_input_tokens"] == report["input_tokens"] == 1024
        assert row["mean_output_tokens"] == report["output_tokens"]
        for key in ("weight_dtype", "kv_dtype", "compute_dtype"):
            assert row[key] == report[key], key
        for kind in KINDS:
            best = report[kind]
            assert row[f"{kind}_meets_slo"] is (best is not None)
            met.add(best is not None)
            for suffix, path, _ in FIGURES[kind] + PRICED_FIGURES:
                value = row[f"{kind}_{suffix}"]
                if best is None:
                    assert value in ("", 0) or math.isnan(value), suffix
                else:
                    assert value == at(best, path), suffix
        per_gpu = {kind: report[kind]["tokens_per_s_per_gpu"] if report[kind] else -math.inf
                   for kind in KINDS}
        assert row["best_kind"] == (
            "" if max(per_gpu.values()) == -math.inf else "disaggregated"
            if per_gpu["disaggregated"] > per_gpu["aggregated"] else "aggregated")
    assert met == {True, False}  # both a point with deployments and one without


def test_dry_run_computes_nothing(tmp_path):
    out, _ = sweep("run", write(tmp_path, DISAGG), "--dry-run", "--out", tmp_path / "out")
    assert "points    4" in out and "nothing computed" in out
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("fixed", "needle"), [
    ("max_gpus = 0", f"max_gpus must be {BOUNDS['max_gpus'].describe()}"),
    ("max_gpus = 300", f"max_gpus must be {BOUNDS['max_gpus'].describe()}"),
    ("input_tokens = 0", "input_tokens must be a whole number from 1 to 100,000,000 tokens"),
    ("output_tokens = 2.5", "output_tokens must be a whole number"),
    ("slo_ttft = 0", f"slo_ttft must be {BOUNDS['slo_ttft'].describe()}"),
    ("slo_tpot = 7200", f"slo_tpot must be {BOUNDS['slo_tpot'].describe()}"),
    ("price_per_gpu_hour = -1",
     f"price_per_gpu_hour must be {BOUNDS['price_per_gpu_hour'].describe()}"),
    ('system = "nope"', "nope"),
    ('workload = "nope"', "nope"),
    ('kv_dtype = "fp5"', "fp5"),
    ('gpu = "h100-sxm"', "'gpu'"),
    ('compute_dtype = "fp4"', "no fp4 peak"),
])
def test_bad_values_are_one_line_errors(tmp_path, fixed, needle):
    text = f'name = "x"\nkind = "disagg"\n[fixed]\n{fixed}\n'
    _, err = sweep("run", write(tmp_path, text), "--dry-run", expect=2)
    assert needle in err and err.count("\n") == 1, err


def test_the_shipped_grid_loads():
    shipped = Path(__file__).resolve().parents[2] / "specs/grids/disagg.toml"
    out, _ = sweep("run", shipped, "--dry-run")
    assert "grid disagg" in out and "points    32" in out
