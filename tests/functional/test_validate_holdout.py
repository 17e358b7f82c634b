"""`sweep validate --holdout`: out-of-sample errors, intervals that cover held-out data,
the error's parts (--explain), and [interval] tables written into a profile; on the
published measurements in MEASURED_DIR (read from there, never copied)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from rooftui.core.assumptions import load_profile
from rooftui.core.intervals import coverage
from rooftui.sweeps.measured import read_measured_paths
from rooftui.sweeps.validation import (
    PARTS,
    RESIDUAL_PART,
    build_corpus,
    hold_out,
    holdout_summary,
    residuals,
)
from tests.conftest import run_sweep, sweep_process

# kernels (GEMM, decode attention) and steps of three engines, small enough to hold each
# dataset out in about a minute on two cores
FILES = ("aiconfigurator-gemm-h100-h200-trtllm.csv",
         "aiconfigurator-generation-attention-llama-shapes-h100-h200-trtllm.csv",
         "llmcompass-a100-matmul-fp16.csv", "splitwise-perf-model-a100-h100.csv",
         "sarathi-fig2-decode-yi34b-tp2-a100pcie.csv",
         "sarathi-fig2-prefill-yi34b-tp2-a100pcie.csv",
         "sarathi-table2-hybrid-batch-yi34b-tp2-a100pcie.csv")


_HELD_OUT: dict = {}  # the leave-one-dataset-out run, made once for this module's tests


@pytest.fixture
def measured(shared_dir: Path) -> Path:
    """MEASURED_DIR; skips when the published measurements are absent."""
    folder = shared_dir / "reference" / "measured"
    return folder if folder.is_dir() else pytest.skip(f"no measured data at {folder}")


@pytest.fixture
def left_out(measured):
    if "run" not in _HELD_OUT:
        corpus, _ = build_corpus(read_measured_paths([measured / f for f in FILES]))
        _HELD_OUT["run"] = corpus, hold_out(corpus, "dataset", explain=True)
    return _HELD_OUT["run"]


def test_the_80_percent_interval_covers_70_to_90_percent_of_held_out_datasets(left_out):
    corpus, results = left_out
    summary = holdout_summary(corpus, results)["kind"]
    assert set(summary) == {"gemm", "attention", "step"}
    for kind, row in summary.items():
        # each dataset scored against the interval made from the other datasets only
        assert 0.7 <= row["coverage"] <= 0.9, (kind, row)
        low, high = row["interval"]
        assert 0 < low <= 1 <= high


def test_no_held_out_row_was_fitted(left_out):
    corpus, results = left_out
    rows = np.concatenate([r.rows for r in results])
    assert sorted(rows) == list(range(len(corpus.rows)))  # every row once
    for result in results:
        assert len(result.datasets) == 1  # --holdout dataset: one dataset per group
        assert np.isfinite(result.predicted_s).all()
    # a dataset's own half-fit would be far closer: the held-out error is not in-sample
    log_ratios, _ = residuals(corpus, results)
    assert np.mean(np.abs(log_ratios)) > 0.05


def test_the_explained_parts_add_up_to_the_held_out_error(left_out):
    corpus, results = left_out
    for result in results:
        times = corpus.costs.time_s[result.rows]
        total = float(np.mean(np.abs(np.log(result.predicted_s / times))))
        parts = result.explained
        assert set(parts) == {*PARTS, RESIDUAL_PART}
        # Shapley values: the parts and what none explains sum to the whole error
        assert sum(parts.values()) == pytest.approx(total, rel=1e-6, abs=1e-9), result.group
        assert parts[RESIDUAL_PART] >= 0


def test_a_held_out_step_dataset_takes_its_own_machines_fixed_times(left_out):
    """Splitwise's DGX-A100 and DGX-H100 hosts add different fixed times to a step, growing
    with the TP degree: each held-out step dataset is predicted with the fixed times of
    its own machine (GPU and engine), fitted on that machine's other datasets beside
    efficiencies shared by all, and the decode steps meet the issue's 15 % target."""
    corpus, results = left_out
    steps = [r for r in results if corpus.kind_group[r.rows[0]] == "step"]
    assert len(steps) == 15
    assert not any(r.notes for r in steps)  # every machine has other step datasets
    decode = holdout_summary(corpus, results)["step phase"]["decode step"]
    assert decode["datasets"] == 8 and decode["mape"] <= 0.15, decode


def test_a_group_with_nothing_to_fit_on_is_predicted_by_the_transfer_rule(measured):
    report = json.loads(run_sweep(
        "validate", "--measured", measured / "llmcompass-a100-matmul-fp16.csv",
        "--measured", measured / "sarathi-fig2-decode-yi34b-tp2-a100pcie.csv",
        "--holdout", "gpu", "--json"))
    (group,) = report["groups"]
    assert group["group"] == "a100-80gb"
    assert all("no data to fit on" in note and "transferred from h100-sxm-kernels" in note
               for note in group["notes"]), group["notes"]
    assert set(report["summary"]["kind"]) == {"gemm", "step"}
    # one dataset per kind: no other to make its interval from, so no coverage
    assert all(row["coverage"] is None for row in report["summary"]["kind"].values())
    assert report["null_reasons"]["summary.kind.gemm.coverage"].startswith("one dataset")


def test_write_interval_replaces_the_table_and_keeps_the_profile_loadable(measured,
                                                                         tmp_path):
    from rooftui.core import spec_files

    profile = tmp_path / "a100-pcie-sarathi.toml"
    shutil.copy(spec_files.resolve("profiles", "a100-pcie-sarathi"), profile)
    files = [f for f in FILES if f.startswith("sarathi")]
    args = [a for f in files for a in ("--measured", measured / f)]
    for _ in range(2):  # a second run replaces the table, never adds one
        run_sweep("validate", *args, "--holdout", "dataset", "--write-interval", profile)
    text = profile.read_text()
    assert text.count("[interval]") == 1 and text.count("# Interval by:") == 1
    assert text.splitlines()[0].startswith("# Calibrated by: sweep calibrate")
    assert text.splitlines()[1].startswith(
        "# Interval by: sweep validate --measured MEASURED_DIR/sarathi-")
    loaded = load_profile(str(profile))
    low, high = loaded.interval.bounds("step")
    assert 0 < low <= 1 <= high
    assert loaded.interval.held_out.startswith("leave-one-dataset-out over 3 datasets")


def test_holdout_options_that_do_not_combine_are_one_line_errors(measured, tmp_path):
    file = measured / "sarathi-fig2-decode-yi34b-tp2-a100pcie.csv"
    for args, words in ((["--explain"], "need --holdout"),
                        (["--dataset", "decode"], "need --holdout"),
                        (["--holdout", "gpu", "--dataset", "nothing"], "no dataset matches"),
                        (["--holdout", "gpu", "--write-interval",
                          load_profile_path("h100-splitwise")], "needs --holdout dataset"),
                        (["--holdout", "gpu", "--chart", tmp_path / "c.html"], "--chart")):
        result = sweep_process("validate", "--measured", file, *args)
        assert result.returncode == 2, result.stderr
        assert words in result.stderr and "Traceback" not in result.stderr
        assert not (tmp_path / "c.html").exists()


def load_profile_path(name: str) -> Path:
    from rooftui.core import spec_files

    return spec_files.resolve("profiles", name)


def test_shipped_intervals_cover_their_own_held_out_datasets(left_out):
    """A shipped engine profile's step interval, on the held-out predictions of the
    datasets it describes: near its 80 % (it was made from these residuals)."""
    corpus, results = left_out
    log_ratios, rows = residuals(corpus, results)
    names = np.array(corpus.names)[corpus.rows.dataset[rows]]
    splitwise_h100 = np.char.startswith(names.astype(str), "Splitwise H100")
    bounds = load_profile("h100-splitwise").interval.bounds("step")
    assert 0.7 <= coverage(log_ratios[splitwise_h100], bounds) <= 0.9
