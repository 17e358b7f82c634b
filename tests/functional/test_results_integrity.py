"""Results that prove themselves (issue 13): checksums of shards, foreign shards left out,
concurrent runs on one folder, charts re-rendered after a kill, bounded grid expansion,
file-system failures, damaged manifests, safe sbatch scripts and a spec hash that covers
every file a grid reads."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from rooftui.core.errors import SpecError
from rooftui.sweeps import charts, runner
from rooftui.sweeps.cli import main
from rooftui.sweeps.grid import MAX_AXIS_VALUES, load_grid
from rooftui.sweeps.results import SkippedShardsWarning, scan_results
from tests.conftest import sweep

REPO = Path(__file__).resolve().parents[2]
GRID = """
name = "integrity"
[axes]
gpu = ["h100-sxm", "mi300x"]
model = ["llama-3-8b", "mistral-7b"]
batch = { start = 1, stop = 64, scale = "log2" }
context = [512, 4096, 32768]
[charts]
names = ["roofline", "attention_share"]
"""
SHARD_SIZE = 12  # 84 points: 7 shards


def run_json(*args) -> dict:
    return json.loads(sweep("run", *args, "--json")[0])


@pytest.fixture
def grid_file(tmp_path) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(GRID)
    return path


@pytest.fixture
def done(grid_file, tmp_path) -> Path:
    """A complete run without charts, and the reference rows in `reference.parquet`."""
    out = tmp_path / "out"
    run_json(grid_file, "--out", out, "--shard-size", SHARD_SIZE, "--no-charts")
    rows(out).write_parquet(tmp_path / "reference.parquet")
    return out


def rows(out: Path) -> pl.DataFrame:
    return scan_results(out).collect().sort("point_id")


def shard(out: Path, index: int) -> Path:
    return out / "points" / f"shard-{index:06d}.parquet"


def one_error(err: str) -> str:
    """The one line of a failure (after any progress lines), with no traceback."""
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and err.endswith(errors[0] + "\n") and "Traceback" not in err
    return errors[0]


def flip_byte(path: Path, at: int, mask: int = 0x40) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= mask
    path.write_bytes(bytes(data))


# --- checksums ----------------------------------------------------------------------------
def test_flipped_and_truncated_shards_are_named_never_read_and_recomputed(done, grid_file):
    reference = pl.read_parquet(done.parent / "reference.parquet")
    flip_byte(shard(done, 1), shard(done, 1).stat().st_size // 3)  # inside a data page
    truncated = shard(done, 4)
    truncated.write_bytes(truncated.read_bytes()[:-100])

    status = json.loads(sweep("status", done, "--json")[0])
    assert status["invalid"] == {"damaged": ["1", "4"]} and not status["complete"]
    text, _ = sweep("status", done)
    assert "2 shards 1, 4 are damaged" in text

    with pytest.warns(SkippedShardsWarning, match="shards 1, 4 are damaged") as caught:
        partial = rows(done)
    assert caught[0].message.shards == {1: "damaged", 4: "damaged"}
    ids = set(partial["point_id"])
    assert not ids & set(range(12, 24)) and not ids & set(range(48, 60))
    assert_frame_equal(partial, reference.filter(pl.col("point_id").is_in(list(ids))))

    _, err = sweep("chart", done, "--only", "roofline")  # the charts say what they left out
    assert err.count("\n") == 1 and "warning" in err and "shards 1, 4" in err

    summary = run_json(grid_file, "--out", done, "--no-charts")
    assert summary["shards_computed"] == 2 and summary["complete"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", SkippedShardsWarning)
        assert_frame_equal(rows(done), reference)


def test_a_flipped_byte_anywhere_is_named_never_a_traceback(done):
    """Data pages, page headers and the footer (its thrift structure and the spec text in
    its key-value metadata, where a flipped byte may be invalid UTF-8)."""
    path = shard(done, 1)
    pristine = path.read_bytes()
    size = len(pristine)
    offsets = sorted({*range(0, size, max(1, size // 24)), *range(size - 400, size, 37)})
    for at in offsets:
        path.write_bytes(pristine)
        flip_byte(path, at, 0xC0)  # ASCII turns into a byte no UTF-8 text begins with
        # a damage found later, by a new process: this one verified the shard when it was
        # written and keeps that verdict while its path, inode, size and mtime stay
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + (at + 1) * 10**9))
        status = json.loads(sweep("status", done, "--json")[0])
        assert status["shards_done"] == 6, at
        assert sum(status["invalid"].values(), []) == ["1"], at
        with pytest.warns(SkippedShardsWarning):
            assert rows(done).height == 84 - SHARD_SIZE, at


def test_a_shard_without_its_checksum_is_incomplete(done, grid_file):
    (done / "points" / "shard-000002.parquet.crc32").unlink()  # killed before committing
    status = json.loads(sweep("status", done, "--json")[0])
    assert status["invalid"] == {"uncommitted": ["2"]}
    with pytest.warns(SkippedShardsWarning, match="no checksum"):
        assert rows(done).height == 84 - SHARD_SIZE
    assert run_json(grid_file, "--out", done, "--no-charts")["shards_computed"] == 1


def test_scan_results_reads_only_the_folders_spec(done, grid_file, tmp_path):
    """After `--force --shard 0/2` on an edited spec, the other half is the old spec's:
    scan_results reads the new half only, and says what it left out."""
    edited = tmp_path / "edited.toml"
    edited.write_text(GRID.replace("32768", "16384"))
    summary = run_json(edited, "--out", done, "--force", "--shard", "0/2", "--shard-size",
                       SHARD_SIZE, "--no-charts")
    new_shards = summary["shards_computed"]
    with pytest.warns(SkippedShardsWarning, match="of another spec") as caught:
        data = rows(done)
    assert set(caught[0].message.shards) == set(range(new_shards, 7))
    assert set(data["context"]) == {512, 4096, 16384}
    assert data.height == new_shards * SHARD_SIZE


# --- concurrency --------------------------------------------------------------------------
def _shards(out: Path) -> list[Path]:
    return sorted((out / "points").glob("shard-*.parquet"))


def test_two_runs_on_one_folder_compute_each_shard_once(tmp_path):
    text = (REPO / "specs" / "grid.toml").read_text().replace('"default"', '"together"')
    grid_path = tmp_path / "grid.toml"
    grid_path.write_text(text)
    shared, alone = tmp_path / "shared", tmp_path / "alone"
    args = [sys.executable, "-m", "rooftui.sweeps", "run", str(grid_path), "--shard-size",
            "16384", "--no-charts", "--json"]
    first = subprocess.Popen([*args, "--out", str(shared)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120  # the second starts once the first is writing
    while time.monotonic() < deadline and first.poll() is None and not _shards(shared):
        time.sleep(0.01)
    second = subprocess.Popen([*args, "--out", str(shared), "--workers", "2"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = [process.communicate(timeout=600) for process in (first, second)]
    for process, (_, err) in zip((first, second), results, strict=True):
        assert process.returncode == 0, err
        assert "Traceback" not in err
    summaries = [json.loads(out) for out, _ in results]
    shards = summaries[0]["shards"]
    assert sum(s["shards_computed"] for s in summaries) == shards  # each exactly once
    assert all(s["complete"] for s in summaries)
    assert json.loads(sweep("status", shared, "--json")[0])["complete"]
    assert not list((shared / "points").glob(".shard-*"))  # no temporaries left

    sweep("run", grid_path, "--out", alone, "--shard-size", 16384, "--no-charts")
    assert [p.name for p in _shards(shared)] == [p.name for p in _shards(alone)]
    for mine, theirs in zip(_shards(shared), _shards(alone), strict=True):
        assert_frame_equal(pl.read_parquet(mine), pl.read_parquet(theirs))


def test_a_held_shard_is_left_to_its_holder(done, grid_file):
    """While another process holds a shard's claim, a run computes the rest and waits."""
    helper = subprocess.Popen(
        [sys.executable, "-c", "import sys, time, fcntl, os\n"
         "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
         "fcntl.lockf(fd, fcntl.LOCK_EX, 1, 3)\nprint('held', flush=True)\n"
         "sys.stdin.readline()\n", str(done / "points" / ".claims")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert helper.stdout.readline() == "held\n"
        state = runner.claim_and_write(
            runner.evaluator_for(load_grid(grid_file)), done,
            runner.Layout(84, SHARD_SIZE), 3, {}, wait=False, keep_complete=False)
        assert state == "busy"
    finally:
        helper.communicate("\n", timeout=60)


# --- charts -------------------------------------------------------------------------------
def test_a_kill_during_charts_is_rendered_by_the_rerun(grid_file, tmp_path, monkeypatch):
    out = tmp_path / "out"
    real_save = charts.save_chart

    def dies_after_the_first(chart, stem, **options):
        if stem.name != "roofline":
            raise RuntimeError("killed while rendering")
        return real_save(chart, stem, **options)

    monkeypatch.setattr(charts, "save_chart", dies_after_the_first)
    with pytest.raises(RuntimeError, match="killed"):
        main(["run", str(grid_file), "--out", str(out), "--shard-size", str(SHARD_SIZE)])
    assert sorted(p.name for p in (out / "charts").iterdir()) == ["roofline.html"]
    monkeypatch.setattr(charts, "save_chart", real_save)

    summary = run_json(grid_file, "--out", out)
    assert summary["shards_computed"] == 0 and summary["charts_seconds"] is not None
    assert sorted(p.name for p in (out / "charts").iterdir()) == [
        "attention_share.html", "index.html", "roofline.html"]
    assert run_json(grid_file, "--out", out)["charts_seconds"] is None  # all up to date

    (out / "points" / "shard-000000.parquet.crc32").unlink()  # recomputed: newer data
    summary = run_json(grid_file, "--out", out)
    assert summary["shards_computed"] == 1 and summary["charts_seconds"] is not None
    newest = shard(out, 0).stat().st_mtime_ns
    assert all(p.stat().st_mtime_ns >= newest for p in (out / "charts").iterdir())


def test_charts_are_written_atomically(done, monkeypatch):
    """A failure while saving (a full disk) leaves neither a partial file nor a temporary."""
    def full_disk(path, spec_json):
        Path(path).write_text("half a chart")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("rooftui.sweeps.chart_files.write_page", full_disk)
    _, err = sweep("chart", done, "--only", "roofline", expect=2)
    assert err.count("\n") == 1 and "no space left" in err and "roofline.html" in err
    assert list((done / "charts").iterdir()) == []


# --- bounded work -------------------------------------------------------------------------
def test_a_huge_axis_is_refused_before_it_is_built(tmp_path):
    path = tmp_path / "wide.toml"
    path.write_text('name = "wide"\n[axes]\nbatch = { start = 1, stop = 2e9, step = 1 }\n')
    tracemalloc.start()
    try:
        _, err = sweep("run", path, "--dry-run", expect=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "2,000,000,000 values" in err and f"{MAX_AXIS_VALUES:,}" in err
    assert err.count("\n") == 1
    assert peak < 20e6  # nothing near 2e9 values was ever allocated


def test_a_trillion_point_grid_is_sized_without_being_built(tmp_path):
    path = tmp_path / "huge.toml"
    path.write_text('name = "huge"\n[axes]\nbatch = { start = 1, stop = 10000 }\n'
                    'context = { start = 1, stop = 10000 }\n'
                    'prefill = { start = 0, stop = 9999 }\n')
    out = tmp_path / "out"
    tracemalloc.start()
    try:
        report = json.loads(sweep("run", path, "--out", out, "--dry-run", "--json")[0])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report["points"] == 10**12 and report["shards"] > 900_000
    assert peak < 200e6  # the 65,536-point sample, never the grid
    _, err = sweep("run", path, "--out", out, expect=2)
    assert "1,000,000,000,000 points" in err and "--yes" in err and err.count("\n") == 1
    assert not out.exists()


def test_more_points_than_any_run_is_refused(tmp_path):
    path = tmp_path / "absurd.toml"
    axes = "".join(f"{name} = {{ start = 1, stop = 100000 }}\n"
                   for name in ("batch", "context", "prefill", "prefill_context"))
    path.write_text('name = "absurd"\n[axes]\n' + axes)
    _, err = sweep("run", path, "--dry-run", expect=2)
    assert "100,000 × 100,000" in err and err.count("\n") == 1


# --- the file system ----------------------------------------------------------------------
def test_out_under_a_file_is_one_line(grid_file, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    _, err = sweep("run", grid_file, "--out", blocker / "out", expect=2)
    assert err.count("\n") == 1 and "a file stands where a folder is expected" in err
    _, err = sweep("chart", blocker, expect=2)
    assert err.count("\n") == 1


def test_a_full_disk_while_writing_a_shard_is_one_line_and_leaves_nothing(
        grid_file, tmp_path, monkeypatch):
    out = tmp_path / "out"
    real_write = runner.ShardWriter.write
    written = []

    def fills_up(self, columns):
        written.append(1)
        if len(written) == 3:  # the third shard (each is one row group)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(self, columns)

    monkeypatch.setattr(runner.ShardWriter, "write", fills_up)
    _, err = sweep("run", grid_file, "--out", out, "--shard-size", SHARD_SIZE, expect=2)
    assert "no space left on the device" in one_error(err)
    assert not list((out / "points").glob(".shard-*"))  # no temporary left
    monkeypatch.undo()
    status = json.loads(sweep("status", out, "--json")[0])  # what is there is whole
    assert status["invalid_files"] == 0 and status["shards_done"] == 2
    assert run_json(grid_file, "--out", out, "--no-charts")["complete"]


def test_a_read_only_folder_is_one_line(done, grid_file, monkeypatch):
    def read_only(*_args, **_kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "replace", read_only)
    (done / "points" / "shard-000000.parquet.crc32").unlink()
    _, err = sweep("run", grid_file, "--out", done, "--no-charts", expect=2)
    assert "read-only" in one_error(err)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes regardless of modes")
def test_permission_denied_is_one_line(done, grid_file):
    (done / "points").chmod(0o500)
    try:
        (done / "points" / "shard-000000.parquet.crc32").unlink(missing_ok=True)
        _, err = sweep("run", grid_file, "--out", done, "--no-charts", expect=2)
    finally:
        (done / "points").chmod(0o700)
    assert "permission denied" in one_error(err)


# --- manifests ----------------------------------------------------------------------------
@pytest.mark.parametrize(("content", "needle"), [
    ("[]", "expected an object"),
    ("{}", "missing key"),
    ("not json", "cannot read the manifest"),
    ('{"name": "x", "spec_hash": "%s", "points": 1e16, "rows": 1, "shard_size": 1}',
     "points must be"),
    ('{"name": "x", "spec_hash": "%s", "points": 100, "rows": 1, "shard_size": "big"}',
     "shard_size must be"),
    ('{"name": "x", "spec_hash": "%s", "points": 100, "rows": 1000, "shard_size": 10}',
     "exceeds"),
    ('{"name": "x", "spec_hash": 7, "points": 100, "rows": 1, "shard_size": 10}',
     "spec_hash"),
    ('{"name": ["x"], "spec_hash": "%s", "points": 100, "rows": 1, "shard_size": 10}',
     "'name'"),
])
def test_a_damaged_manifest_is_one_line(done, grid_file, content, needle):
    (done / "manifest.json").write_text(content.replace("%s", "a" * 64))
    for args in (("status", done), ("run", grid_file, "--out", done)):
        _, err = sweep(*args, expect=2)
        assert err.count("\n") == 1 and needle in err, err
        assert "Traceback" not in err


def test_a_manifest_of_a_quadrillion_points_answers_at_once(done):
    manifest = json.loads((done / "manifest.json").read_text())
    manifest |= {"points": 10**15, "rows": 10**15, "shard_size": 1}
    (done / "manifest.json").write_text(json.dumps(manifest))
    status = json.loads(sweep("status", done, "--json")[0])  # never one entry per shard
    assert status["shards"] == 10**15 and len(status["missing"]) <= 1000


# --- scripts ------------------------------------------------------------------------------
@pytest.mark.parametrize(("option", "value"), [
    ("--partition", "gpu\necho pwned"), ("--partition", "gpu; rm -rf ~"),
    ("--time", "1:00:00\necho pwned"), ("--time", "soon"),
])
def test_plan_refuses_values_a_shell_could_run(grid_file, tmp_path, option, value):
    out, err = sweep("plan", grid_file, "--shards", 2, "--out", tmp_path / "o", option, value,
                     expect=2)
    assert out == "" and err.count("\n") == 1 and option in err


def test_plan_refuses_a_path_with_a_newline(grid_file, tmp_path):
    _, err = sweep("plan", grid_file, "--shards", 2, "--out", tmp_path / "a\nb", expect=2)
    assert err.count("\n") == 1 and "control characters" in err


@pytest.mark.parametrize("value", ["30", "30:00", "1:30:00", "2-12", "2-12:30", "2-12:30:00"])
def test_plan_accepts_slurm_times(grid_file, tmp_path, value):
    text, _ = sweep("plan", grid_file, "--shards", 2, "--shard-size", SHARD_SIZE, "--out",
                    tmp_path / "o", "--time", value)
    assert f"#SBATCH --time={value}\n" in text


# --- the spec hash ------------------------------------------------------------------------
def test_the_hash_covers_length_files_and_spec_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # `empirical:PATH` is read as `sweep simulate` reads it
    Path("lengths.csv").write_text("output_tokens\n10\n20\n30\n")
    gpu = (REPO / "specs" / "gpus" / "h100-sxm.toml").read_text()
    Path("my-gpu.toml").write_text(gpu)
    Path("grid.toml").write_text(
        'name = "hashed"\nkind = "simulate"\n[fixed]\ngpu = "my-gpu.toml"\n'
        'output_tokens = "empirical:lengths.csv"\nrequests = 20\n[axes]\nmax_batch = [4, 8]\n')
    first = load_grid("grid.toml").spec_hash
    assert load_grid("grid.toml").spec_hash == first
    Path("lengths.csv").write_text("output_tokens\n10\n20\n31\n")
    second = load_grid("grid.toml").spec_hash
    assert second != first
    Path("my-gpu.toml").write_text(gpu.replace("3.35", "3.36", 1))
    assert load_grid("grid.toml").spec_hash not in (first, second)
    Path("lengths.csv").unlink()
    with pytest.raises(SpecError, match="lengths.csv"):
        load_grid("grid.toml")


def test_the_hash_covers_the_model_version(grid_file, monkeypatch):
    before = load_grid(grid_file).spec_hash
    monkeypatch.setattr("rooftui.sweeps.grid.MODEL_VERSION", 10**6)
    assert load_grid(grid_file).spec_hash != before


def test_a_huge_simulate_grid_is_refused_before_its_points_are_checked(tmp_path):
    path = tmp_path / "sims.toml"
    path.write_text('name = "sims"\nkind = "simulate"\n[axes]\n'
                    'seed = { start = 0, stop = 99999 }\nrequests = { start = 1, stop = 100 }\n')
    _, err = sweep("run", path, "--dry-run", expect=2)
    assert "10,000,000 points" in err and err.count("\n") == 1
