"""`sweep run`, `sweep status`, `sweep plan` end to end: rows, zips, slices, workers, Dask,
resume after kill -9, truncated and foreign shards, manifests, and one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import types
import zlib
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal

from rooftui.sweeps import chart_rows, runner
from rooftui.sweeps.evaluate import EVALUATION_POINTS
from rooftui.sweeps.grid import load_grid, parse_grid
from rooftui.sweeps.results import read_manifest, scan_results
from rooftui.sweeps.shard_files import read_footer
from tests.conftest import sweep

REPO = Path(__file__).resolve().parents[2]

GRID = """
name = "t"
description = "a test grid"
profile = "derated"
[fixed]
prefill = 0
[axes]
gpu = ["h100-sxm", "mi300x"]
model = ["llama-3-8b", "mistral-7b"]
kv_dtype = ["bf16", "fp8"]
batch = { start = 1, stop = 64, scale = "log2" }
context = [512, 4096, 32768]
[charts]
names = ["roofline"]
"""
POINTS = 2 * 2 * 2 * 7 * 3


def run_json(*args) -> dict:
    return json.loads(sweep("run", *args, "--no-charts", "--json")[0])


@pytest.fixture
def grid_file(tmp_path) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(GRID)
    return path


def frame(out: Path) -> pl.DataFrame:
    return scan_results(out).collect().sort("point_id")


def test_every_point_once_with_contract_columns_and_manifest(grid_file, tmp_path):
    out = tmp_path / "out"
    summary = run_json(grid_file, "--out", out, "--shard-size", 25)
    assert summary["complete"] and summary["points"] == POINTS
    shards = sorted((out / "points").glob("shard-*.parquet"))
    assert summary["shards"] == -(-POINTS // 25) == len(shards)
    for shard in shards:  # each with its checksum: CRC-32, length, name
        data = shard.read_bytes()
        assert (out / "points" / f"{shard.name}.crc32").read_text() == (
            f"{zlib.crc32(data):08x}  {len(data)}  {shard.name}\n")
    data = frame(out)
    assert data["point_id"].to_list() == list(range(POINTS))
    assert data.height == POINTS
    schema = data.schema
    assert schema["point_id"] == pl.Int64 and schema["batch"] == pl.Int64
    assert schema["step_time_s"] == pl.Float64 and schema["fits"] == pl.Boolean
    assert schema["gpu"] in (pl.Categorical, pl.String)
    assert set(data["bound"].cast(pl.String)) <= {"memory", "compute"}
    assert set(data["kv_dtype"].cast(pl.String)) == {"bf16", "fp8"}
    assert (data["mfu_assumed"] == 0.5).all()  # the derated profile
    assert (data["peak_flops"] / data["bandwidth_bytes_per_s"] == data["ridge"]).all()
    # the last axis varies fastest
    assert data["context"].to_list()[:4] == [512, 4096, 32768, 512]

    manifest = read_manifest(out)
    grid = load_grid(grid_file)
    assert manifest["spec_text"] == GRID
    assert manifest["spec_hash"] == grid.spec_hash and out.name != grid.spec_hash
    assert manifest["spec"]["dimensions"][0][0] == {"axis": "gpu",
                                                    "values": ["h100-sxm", "mi300x"]}
    assert manifest["charts"] == {"names": ["roofline"]}
    assert manifest["rows"] == POINTS and manifest["skipped_points"] == 0
    assert manifest["shards"] == summary["shards"] and manifest["complete"]
    assert {"rooftui", "python", "numpy", "polars"} <= manifest["versions"].keys()
    assert "git_commit" in manifest and manifest["host"]
    assert manifest["started_at"] <= manifest["finished_at"]
    assert list(manifest["columns"]) == data.columns

    kv = pq.read_metadata(out / "points" / "shard-000001.parquet").metadata
    assert kv[b"rooftui.spec_hash"].decode() == grid.spec_hash
    assert kv[b"rooftui.first_point_id"] == b"25" and kv[b"rooftui.end_point_id"] == b"50"
    assert json.loads(kv[b"rooftui.spec"])["name"] == "t"
    assert "numpy" in json.loads(kv[b"rooftui.versions"])
    assert (out / "charts").is_dir()


def test_default_out_dir_is_name_and_hash(grid_file, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    summary = run_json(grid_file)
    assert summary["out_dir"] == f"outputs/t-{load_grid(grid_file).spec_hash[:12]}"


def test_zipped_axes_pair_values(tmp_path):
    path = tmp_path / "zip.toml"
    path.write_text('name = "z"\n[axes]\nbatch = [1, 2, 4]\nweight_dtype = ["bf16", "fp8"]\n'
                    'context = [1024, 2048, 4096]\ncompute_dtype = ["bf16", "fp8"]\n'
                    '[[zip]]\naxes = ["weight_dtype", "compute_dtype"]\n'
                    '[[zip]]\naxes = ["batch", "context"]\n')
    run_json(path, "--out", tmp_path / "out")
    data = frame(tmp_path / "out")
    assert data.height == 3 * 2
    assert set(zip(data["batch"], data["context"], strict=True)) == {
        (1, 1024), (2, 2048), (4, 4096)}
    assert (data["weight_dtype"].cast(pl.String) == data["compute_dtype"].cast(pl.String)).all()


def test_slices_union_to_the_single_run(grid_file, tmp_path):
    whole, sliced = tmp_path / "whole", tmp_path / "sliced"
    run_json(grid_file, "--out", whole, "--shard-size", 10)
    parts = [run_json(grid_file, "--out", sliced, "--shard-size", 10, "--shard", f"{i}/3")
             for i in range(3)]
    assert [p["complete"] for p in parts] == [False, False, True]
    assert sum(p["shards_computed"] for p in parts) == parts[0]["shards"]
    assert_frame_equal(frame(sliced), frame(whole))


def test_slurm_array_variables_pick_the_slice(grid_file, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "11")
    monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "10")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "4")
    summary = run_json(grid_file, "--out", tmp_path / "out", "--shard-size", 21)
    layout = runner.Layout(POINTS, 21)
    assert summary["shards_computed"] == len(layout.slice(1, 4))
    written = sorted(p.name for p in (tmp_path / "out" / "points").glob("shard-*.parquet"))
    assert written == [f"shard-{i:06d}.parquet" for i in layout.slice(1, 4)]


def test_local_workers_give_the_same_rows(grid_file, tmp_path):
    run_json(grid_file, "--out", tmp_path / "one", "--shard-size", 40)
    run_json(grid_file, "--out", tmp_path / "two", "--shard-size", 40, "--workers", 2)
    assert_frame_equal(frame(tmp_path / "two"), frame(tmp_path / "one"))


def test_dask_gives_the_same_rows(grid_file, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    run_json(grid_file, "--out", tmp_path / "one", "--shard-size", 40)
    summary = run_json(grid_file, "--out", tmp_path / "dask", "--shard-size", 40,
                       "--executor", "dask", "--workers", 1)  # a local cluster of its own
    assert summary["complete"]
    assert_frame_equal(frame(tmp_path / "dask"), frame(tmp_path / "one"))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        run_json(grid_file, "--out", tmp_path / "remote", "--shard-size", 40,
                 "--executor", "dask", "--scheduler", cluster.scheduler_address)
    assert_frame_equal(frame(tmp_path / "remote"), frame(tmp_path / "one"))


def test_progress_lines():
    import io

    stream = io.StringIO()
    progress = runner.Progress(stream, interactive=False, interval=0)
    progress.start(200, "grid: 2 shards")
    progress.advance(100)
    progress.advance(100)
    progress.finish()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "grid: 2 shards"
    assert "50.0 %" in lines[1] and "100 / 200 points" in lines[1] and "ETA" in lines[1]
    assert "100.0 %" in lines[-1] and "points/s" in lines[-1]
    terminal = io.StringIO()
    progress = runner.Progress(terminal, interactive=True)
    progress.start(10, "x")
    progress.finish()
    assert terminal.getvalue().endswith("\n") and "\r" in terminal.getvalue()


def test_truncated_and_foreign_shards_are_recomputed(grid_file, tmp_path):
    out, other = tmp_path / "out", tmp_path / "other"
    run_json(grid_file, "--out", out, "--shard-size", 50)
    reference = frame(out)
    shard = out / "points" / "shard-000001.parquet"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    # a shard of another spec (same layout) in place of shard 2
    other_grid = tmp_path / "other.toml"
    other_grid.write_text(GRID.replace("32768", "16384"))
    run_json(other_grid, "--out", other, "--shard-size", 50)
    (out / "points" / "shard-000002.parquet").write_bytes(
        (other / "points" / "shard-000002.parquet").read_bytes())
    # a shard an older rooftui wrote (format 1 stored the ratios) in place of shard 3
    third = out / "points" / "shard-000003.parquet"
    table = pq.read_table(third)
    metadata = {**table.schema.metadata, b"rooftui.format": b"rooftui-sweep/1"}
    pq.write_table(table.replace_schema_metadata(metadata), third)
    status = json.loads(sweep("status", out, "--json")[0])
    assert status["missing"] == ["1-3"] and status["invalid_files"] == 3
    summary = run_json(grid_file, "--out", out)
    assert summary["shards_computed"] == 3 and summary["complete"]
    assert_frame_equal(frame(out), reference)


def test_status_force_and_resume_counts(grid_file, tmp_path):
    out = tmp_path / "out"
    run_json(grid_file, "--out", out, "--shard-size", 30)
    (out / "points" / "shard-000003.parquet").unlink()
    text, _ = sweep("status", out)
    assert "missing: 3" in text and "incomplete" in text
    status = json.loads(sweep("status", out, "--json")[0])
    assert (status["shards_done"], status["shards_missing"]) == (status["shards"] - 1, 1)
    assert run_json(grid_file, "--out", out)["shards_computed"] == 1  # keeps --shard-size 30
    assert json.loads(sweep("status", out, "--json")[0])["complete"]
    forced = run_json(grid_file, "--out", out, "--force")
    assert forced["shards_computed"] == forced["shards"]


def test_refuses_to_mix_specs_or_shard_sizes(grid_file, tmp_path):
    out = tmp_path / "out"
    run_json(grid_file, "--out", out, "--shard-size", 30)
    _, err = sweep("run", grid_file, "--out", out, "--shard-size", 40, expect=2)
    assert "--shard-size 30" in err
    other = tmp_path / "other.toml"
    other.write_text(GRID.replace('name = "t"', 'name = "u"'))
    _, err = sweep("run", other, "--out", out, expect=2)
    assert "another spec" in err and err.count("\n") == 1
    elsewhere = tmp_path / "not-a-sweep"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("mine")
    _, err = sweep("run", grid_file, "--out", elsewhere, expect=2)
    assert "not a sweep output folder" in err


def test_dry_run_computes_nothing(grid_file, tmp_path):
    out = tmp_path / "out"
    text, _ = sweep("run", grid_file, "--out", out, "--dry-run")
    assert f"{POINTS:,}" in text and "shards" in text and "B of parquet" in text
    assert not out.exists()
    report = json.loads(sweep("run", grid_file, "--out", out, "--dry-run", "--json")[0])
    assert report["points"] == POINTS and report["estimated_bytes"] > 0
    assert not out.exists()


def test_shipped_grid_dry_run():
    report = json.loads(sweep("run", REPO / "specs" / "grid.toml", "--dry-run", "--json")[0])
    assert report["rows"] >= 1_000_000


def test_huge_grids_need_yes(tmp_path):
    path = tmp_path / "huge.toml"
    path.write_text('name = "huge"\n[axes]\nbatch = { start = 0, stop = 99999 }\n'
                    'context = { start = 0, stop = 99999 }\n')
    _, err = sweep("run", path, "--out", tmp_path / "out", expect=2)
    assert "--yes" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()
    assert json.loads(sweep("run", path, "--dry-run", "--json", "--out",
                            tmp_path / "out")[0])["points"] == 10**10


@pytest.mark.parametrize(("text", "needle"), [
    ('name = "x"\n[axes]\nbatch = [1]\nbogus = [2]\n', "unknown key 'bogus'"),
    ('name = "x"\n[axes]\nbatch = []\n', "empty"),
    ('name = "x"\n[axes]\ngpu = ["h100-sxm", "a100-80gb"]\ncompute_dtype = ["fp8"]\n',
     "a100-80gb has no fp8 peak"),
    ('name = "x"\n[axes]\nmodel = ["qwen2.5-7b"]\ngroup_size = [8]\n', "does not divide"),
    ('name = "x"\n[axes]\nmodel = ["no-such-model"]\n', "no-such-model"),
])
def test_bad_specs_are_one_line_exit_2_and_write_nothing(text, needle, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    _, err = sweep("run", path, "--out", tmp_path / "out", expect=2)
    assert needle in err and str(path) in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_bad_spec_through_the_console_script(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "x"\n[axes]\nbatch = [1, -1]\n')
    done = subprocess.run([sys.executable, "-m", "rooftui.sweeps", "run", str(path)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "batch" in done.stderr
    assert not (tmp_path / "outputs").exists()


def test_bad_shard_option(grid_file):
    _, err = sweep("run", grid_file, "--shard", "3/3", expect=2)
    assert "--shard" in err


def test_plan_prints_an_sbatch_array(grid_file, tmp_path):
    text, _ = sweep("plan", grid_file, "--shards", 4, "--shard-size", 10, "--out",
                    tmp_path / "out", "--cpus-per-task", 2, "--partition", "cpu")
    assert text.startswith("#!/bin/bash")
    for line in ("#SBATCH --array=0-3", "#SBATCH --cpus-per-task=2", "#SBATCH --partition=cpu",
                 "--shard-size 10", str(tmp_path / "out"), "SLURM_CPUS_PER_TASK"):
        assert line in text
    assert "#SBATCH --time=00:10:00" in text
    _, err = sweep("plan", grid_file, "--shards", 1000, expect=2)
    assert "shards" in err


def test_run_renders_the_grids_charts(grid_file, tmp_path, monkeypatch):
    calls = []
    fake = types.ModuleType("rooftui.sweeps.charts")
    fake.render_charts = lambda out_dir, names, only, **_: calls.append((out_dir, names, only))
    fake.chart_settings = lambda table, where, **_: None  # grids validate [charts] on load
    fake.stale_charts = lambda out_dir, names: list(names["names"])
    monkeypatch.setitem(sys.modules, "rooftui.sweeps.charts", fake)
    monkeypatch.setattr(chart_rows, "plan_cut", lambda out_dir, names: None)  # no catalogue
    out = tmp_path / "out"
    sweep("run", grid_file, "--out", out, "--json")
    assert calls == [(out, {"names": ["roofline"]}, None)]


def _resume_grid(tmp_path) -> Path:
    text = (REPO / "specs" / "grid.toml").read_text().replace(
        '"h100-sxm", "h100-pcie", "h200", "b200", "a100-80gb", "l40s", "mi300x", "mi325x"',
        '"h100-sxm", "h200", "a100-80gb", "mi300x"').replace('"default"', '"resume"')
    path = tmp_path / "resume.toml"
    path.write_text(text)
    return path


def _shards(out: Path) -> list[Path]:
    return sorted((out / "points").glob("shard-*.parquet"))


def _stopped_mid_run(args: list[str], out: Path, total: int) -> subprocess.Popen:
    """A `sweep run` stopped (SIGSTOP) with 3 or more of its `total` shards written and 2
    or more to go (at most the one in flight can still land after a signal). One worker
    and small shards make a run of a second or more; where a loaded machine left this
    process unscheduled until the run had (nearly) finished, it is run again."""
    for _ in range(5):
        shutil.rmtree(out, ignore_errors=True)
        process = subprocess.Popen([sys.executable, "-m", "rooftui.sweeps", *args,
                                    "--workers", "1", "--out", str(out)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   text=True, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None and (
                not (out / "points").is_dir() or len(_shards(out)) < 3):
            time.sleep(0.005)
        if process.poll() is None:
            os.kill(process.pid, signal.SIGSTOP)
            if len(_shards(out)) <= total - 2:
                return process
            os.kill(process.pid, signal.SIGCONT)
        process.communicate(timeout=60)
    raise AssertionError("every run finished before it could be stopped mid-way")


@pytest.mark.parametrize("how", ["kill", "interrupt"])
def test_resume_after_kill_matches_an_uninterrupted_run(how, tmp_path):
    grid_path = _resume_grid(tmp_path)
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    args = ["run", str(grid_path), "--shard-size", "2048", "--no-charts"]
    total = runner.Layout(load_grid(grid_path).size, 2048).shards
    process = _stopped_mid_run(args, killed, total)
    os.kill(process.pid, signal.SIGKILL if how == "kill" else signal.SIGINT)
    os.kill(process.pid, signal.SIGCONT)  # a stopped process takes its SIGINT once resumed
    _, err = process.communicate(timeout=60)
    left = _shards(killed)
    assert 3 <= len(left) < total
    for shard in left:  # nothing a reader could mistake for a result
        assert read_footer(shard) is not None
    if how == "interrupt":
        assert process.returncode == 130 and "interrupted" in err
        assert not list((killed / "points").glob(".shard-*"))  # temporaries removed

    sweep("run", *args[1:], "--out", killed)
    sweep("run", *args[1:], "--out", clean)
    assert [p.name for p in _shards(killed)] == [p.name for p in _shards(clean)]
    for mine, theirs in zip(_shards(killed), _shards(clean), strict=True):
        assert_frame_equal(pl.read_parquet(mine), pl.read_parquet(theirs))


@pytest.mark.parametrize("batches", ['{ start = 1, stop = 1024, scale = "log2" }',
                                     '{ start = 1, stop = 100 }'])
def test_default_step_shards_are_whole_evaluation_blocks(batches):
    """Shard edges on block edges: no shard is evaluated in small pieces."""
    path = Path(__file__).resolve().parents[2] / "specs" / "grid.toml"
    text = path.read_text().replace('{ start = 1, stop = 1024, scale = "log2" }', batches)
    grid = parse_grid(text, path)
    unit = grid.block_unit(EVALUATION_POINTS)
    assert EVALUATION_POINTS // 3 < unit <= EVALUATION_POINTS
    size = runner.default_shard_size(grid.size, unit=unit)
    assert size % unit == 0 and size >= runner.MIN_SHARD_POINTS
    layout = runner.Layout(grid.size, size)
    for index in range(layout.shards):
        blocks = list(grid.blocks(*layout.range(index), EVALUATION_POINTS))
        assert all(block.size % unit == 0 for block in blocks[:-1])
        assert len(blocks) <= -(-size // unit) + 1
