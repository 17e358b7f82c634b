"""`sweep run` builds its charts from the rows it cut from each shard as it landed
(`chart_rows`): the same charts as `sweep chart DIR` builds from the folder."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooftui.sweeps import charts
from rooftui.sweeps.chart_rows import RowCollector, ShardRows, cut_shard, plan_cut, rows_table
from rooftui.sweeps.chart_table import Table
from rooftui.sweeps.charts_step import STEP_SLICES
from rooftui.sweeps.grid import load_grid
from rooftui.sweeps.kinds import evaluator_for
from rooftui.sweeps.results import read_manifest, scan_results
from rooftui.sweeps.row_filters import Rows
from tests.conftest import run_sweep

# menus on every held axis, group size held at each model's own, a zipped pair, a
# prefill axis: every kind of filter a step chart's slice has
GRID = """
name = "chart-rows"
kind = "step"
skip_unsupported = true  # A100 x fp8: rows some shards lack

[axes]
gpu = ["h100-sxm", "a100-80gb", "h200"]
model = ["llama-3-8b", "llama-2-7b", "llama-3-70b"]
weight_dtype = ["bf16", "fp8"]
compute_dtype = ["bf16", "fp8"]
kv_dtype = ["bf16", "fp8"]
group_size = [1, 4, 8]
prefill = [0, 2048]
context = [1024, 8192, 32768]
batch = [1, 8, 32, 128, 512]

[[zip]]
axes = ["weight_dtype", "compute_dtype"]
"""


def page_specs(charts_dir: Path) -> dict[str, dict]:
    """Each chart page's Vega-Lite spec, its CSV datasets as sorted rows (row order is
    not part of a chart)."""
    specs = {}
    for page in sorted(charts_dir.glob("*.html")):
        if page.name == "index.html":
            continue
        text = page.read_text(encoding="utf-8")
        spec = json.loads(re.search(r"const spec = (.*);\n  const embedOpt", text, re.S)[1])
        spec["datasets"] = {name: sorted(csv.reader(io.StringIO(rows)))
                            if isinstance(rows, str) else rows
                            for name, rows in spec["datasets"].items()}
        specs[page.stem] = spec
    return specs


def grid_file(tmp_path: Path, text: str = GRID) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def result_dir(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("chart-rows")
    out = base / "out"
    run_sweep("run", grid_file(base), "--out", out, "--shard-size", "1000")
    return out


def rerendered(out: Path, tmp_path: Path) -> dict[str, dict]:
    """`sweep chart` of a copy of `out`: the charts from the folder alone."""
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    shutil.rmtree(copy / "charts")
    run_sweep("chart", copy)
    return page_specs(copy / "charts")


def test_every_default_chart_of_a_step_grid_is_cut(result_dir):
    cut = plan_cut(result_dir)
    assert cut is not None and set(cut.charts) == set(charts.DEFAULT_CHARTS)
    assert read_manifest(result_dir)["shards"] > 3  # the rows came from several shards


def test_run_charts_equal_chart_from_the_folder(result_dir, tmp_path):
    made = page_specs(result_dir / "charts")
    assert set(made) == set(charts.DEFAULT_CHARTS)
    assert made == rerendered(result_dir, tmp_path)


FIXED_GPU = """
name = "chart-rows-one-gpu"
kind = "step"
[fixed]
gpu = "h100-sxm"
[axes]
model = ["llama-3-8b", "llama-3-70b"]
group_size = [1, 4, 8]
context = [1024, 32768, 131072]
batch = [1, 32, 512]
"""


def test_run_charts_equal_chart_from_the_folder_with_the_gpu_fixed(tmp_path):
    """The GPU a memory note needs is no column of the slice when the grid fixes it:
    both paths still name the same GPU's memory."""
    out = tmp_path / "out"
    run_sweep("run", grid_file(tmp_path, FIXED_GPU), "--out", out)
    made = page_specs(out / "charts")
    assert made == rerendered(out, tmp_path)
    notes = set()
    for name, page in made.items():
        for rows in page["datasets"].values():
            header = next((row for row in rows if "memory" in row), None) if isinstance(
                rows, list) else None
            if header is not None:
                notes |= {(name, row[header.index("memory")]) for row in rows
                          if row is not header}
    assert {name for name, _ in notes} == set(charts.DEFAULT_CHARTS)
    fitting = [note for _, note in notes if note.startswith("fits:")]
    assert fitting and all(" of 80 GB" in note for note in fitting)  # the H100's memory
    assert "exceeds GPU memory" not in {note for _, note in notes}


def test_a_resumed_run_cuts_the_shards_it_did_not_write(tmp_path):
    grid = grid_file(tmp_path)
    out = tmp_path / "out"
    run_sweep("run", grid, "--out", out, "--shard-size", "1000", "--shard", "0/2")
    assert not list((out / "charts").glob("*.html"))  # incomplete: no charts yet
    for _ in range(600):  # the run let its cutting thread go: it ends once idle
        if not any(t.name.startswith("chart-rows") for t in threading.enumerate()):
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the chart-rows thread outlived the run")
    run_sweep("run", grid, "--out", out, "--shard-size", "1000")
    made = page_specs(out / "charts")
    assert set(made) == set(charts.DEFAULT_CHARTS)
    assert made == rerendered(out, tmp_path)


def test_a_chart_held_at_a_fixed_value_is_cut_too(tmp_path):
    grid = grid_file(tmp_path, GRID + '\n[charts]\nfixed = { context = 32768, kv_dtype = "fp8" }\n')
    out = tmp_path / "out"
    run_sweep("run", grid, "--out", out, "--shard-size", "700", "--workers", "2")
    assert set(plan_cut(out).charts) == set(charts.DEFAULT_CHARTS)
    assert page_specs(out / "charts") == rerendered(out, tmp_path)


def test_a_slice_that_needs_the_rows_is_not_cut(result_dir):
    """Without the grid's axes a slice holds each axis within the rows (windows), and a
    fixed axis the grid does not declare needs its values from the rows."""
    columns = list(read_manifest(result_dir)["columns"])
    request = STEP_SLICES["roofline"](columns)
    assert request.rows(columns) is None
    axes = charts.declared_axes(read_manifest(result_dir))
    assert request.rows(columns, axes=axes, fixed={"prefill_context": 0}) is None


def drawn(request, frame, axes, manifest, fixed) -> tuple:
    """What a chart reads of `frame` (polars, or a `Table`) through `request`: its slice
    (rows in its order), and every combination of each of its `whole` groups."""
    piece = request.take(frame, fixed=fixed, axes=axes, grid=manifest)
    table = frame if isinstance(frame, Table) else Table.from_polars(frame.lazy().collect())
    groups = [table.unique(group).sorted_by(group).to_dicts() for group in request.whole]
    held_types = {axis: type(value).__name__ for axis, value in piece.fixed.items()}
    return (piece.data.to_dicts(), piece.kept, piece.fixed, held_types, piece.menus,
            piece.opening, groups)


def assert_same_table(found: Table, expected: Table) -> None:
    """The same columns, in order, of the same kinds and values (NaN equal to NaN)."""
    assert found.columns == expected.columns
    for name in found.columns:
        assert found[name].dtype == expected[name].dtype, name
        if found.kind(name) == "f":
            np.testing.assert_array_equal(found[name], expected[name], err_msg=name)
        else:
            assert found[name].tolist() == expected[name].tolist(), name


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(1, 4999), max_size=6, unique=True),
       context=st.sampled_from([None, 1024, 32768]), kv=st.sampled_from([None, "fp8"]),
       gpu=st.sampled_from([None, "a100-80gb"]))
def test_the_rows_cut_from_any_split_give_every_slice(result_dir, cuts, context, kv, gpu):
    """Cut from the results split anywhere (shards of any size), the rows each chart's
    request keeps give it the same slice and groups as all the rows, whatever is held
    fixed."""
    manifest = read_manifest(result_dir)
    axes = charts.declared_axes(manifest)
    fixed = {k: v for k, v in (("context", context), ("kv_dtype", kv), ("gpu", gpu))
             if v is not None}
    whole = scan_results(result_dir).collect()
    edges = [0, *sorted(c for c in cuts if c < whole.height), whole.height]
    for name, request_for in STEP_SLICES.items():
        request = request_for(whole.columns)
        kept = request.rows(whole.columns, fixed=fixed, axes=axes, grid=manifest)
        cut = pl.concat([whole.slice(a, b - a).filter(kept.polars(pl))
                         for a, b in zip(edges, edges[1:], strict=False)])
        assert cut.height < whole.height / 3, name
        expected = drawn(request, whole, axes, manifest, fixed)
        assert drawn(request, cut, axes, manifest, fixed) == expected, name
        # the rows as `sweep run` holds them (numpy columns) give the same slice
        assert drawn(request, Table.from_polars(cut), axes, manifest, fixed) == expected, name


def test_the_collector_reads_a_shard_as_the_folder_does(result_dir):
    cut = plan_cut(result_dir)
    shards = read_manifest(result_dir)["shards"]
    rows = RowCollector(result_dir, None,
                        lambda i: result_dir / "points" / f"shard-{i:06d}.parquet"
                        ).gather(shards)
    assert rows.charts == cut.charts
    same_points = scan_results(result_dir).filter(
        pl.col("point_id").is_in(rows.table["point_id"].tolist())).collect()
    assert 0 < rows.table.height < scan_results(
        result_dir).select(pl.len()).collect().item() / 3
    assert_same_table(rows.table, Table.from_polars(same_points))  # values, types, order


def test_a_shard_that_cannot_be_read_leaves_the_charts_to_the_folder(result_dir, tmp_path):
    shards = read_manifest(result_dir)["shards"]
    gone = RowCollector(result_dir, None, lambda i: tmp_path / f"shard-{i:06d}.parquet")
    assert gone.gather(shards) is None


def test_a_grid_with_no_chart_to_cut_leaves_them_to_the_folder(result_dir):
    rows = RowCollector(result_dir, ["latency_vs_rate"],
                        lambda i: result_dir / "points" / f"shard-{i:06d}.parquet")
    assert rows.gather(read_manifest(result_dir)["shards"]) is None


def shard_columns(sweep, manifest, index: int) -> dict[str, np.ndarray]:
    """Shard `index`'s stored columns as its worker computed them (names as codes)."""
    start = index * manifest["shard_size"]
    groups = [columns for columns, _ in sweep.row_groups(
        start, min(start + manifest["shard_size"], manifest["points"]))]
    return {name: np.concatenate([g[name] for g in groups]) for name in groups[0]}


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(splits=st.lists(st.integers(1, 999), max_size=4, unique=True),
       context=st.sampled_from([None, 1024, 32768]), kv=st.sampled_from([None, "fp8"]))
def test_a_workers_kept_rows_equal_the_shards_cut_from_its_file(result_dir, splits, context,
                                                                 kv, tmp_path_factory):
    """What a worker keeps of the row groups it writes (split anywhere), as a table, is
    what `cut_shard` reads back from the shard's file: values, types, order; and each
    chart's numpy mask keeps the rows its polars predicate keeps."""
    manifest = read_manifest(result_dir)
    sweep = evaluator_for(load_grid(grid_file(tmp_path_factory.mktemp("grid"))))
    fixed = {k: v for k, v in (("context", context), ("kv_dtype", kv)) if v is not None}
    table = {"fixed": fixed} if fixed else None
    cut = plan_cut(result_dir, table)
    assert cut is not None and set(cut.charts) == set(charts.DEFAULT_CHARTS)
    for index in range(manifest["shards"]):
        columns = shard_columns(sweep, manifest, index)
        kept = ShardRows(cut, sweep.dictionaries)
        edges = [0, *sorted(c for c in splits if c < len(columns["point_id"])),
                 len(columns["point_id"])]
        for a, b in zip(edges, edges[1:], strict=False):
            kept.add({name: values[a:b] for name, values in columns.items()})
        table = rows_table(kept.rows(), cut, sweep.dictionaries)
        from_file = cut_shard(result_dir / "points" / f"shard-{index:06d}.parquet", cut)
        assert_same_table(table, from_file)
        whole = scan_results(result_dir).filter(
            pl.col("point_id").is_in(columns["point_id"].tolist())).collect()
        rows = Rows({**columns, "ridge": whole["ridge"].to_numpy()}, sweep.dictionaries)
        for test in cut.rows.parts:
            expected = whole.select(test.polars(pl).fill_null(False))
            assert test.mask(rows).tolist() == expected.to_series().to_list(), index


def test_sweep_run_forks_its_workers_before_importing_polars(tmp_path):
    """A forked worker must not inherit polars (it deadlocks there once the parent has
    used its pool) nor a package another thread is importing: the parent imports
    neither polars nor pyarrow before its workers start, and renders its charts from
    the rows they kept without ever importing polars (~0.3 CPU-s a run), half of the
    pages in a forked child."""
    grid = grid_file(tmp_path)
    out = tmp_path / "out"
    script = f"""
import sys
from concurrent.futures import ProcessPoolExecutor
submit = ProcessPoolExecutor.submit
seen = []
def watched(self, *args, **kwargs):
    if not seen:
        seen.append(sorted(m for m in ("polars", "pyarrow") if m in sys.modules))
    return submit(self, *args, **kwargs)
ProcessPoolExecutor.submit = watched
from rooftui.sweeps import chart_rows, forked_work
forks = []
fork = forked_work._in_child
forked_work._in_child = lambda work: forks.append(1) or fork(work)
cut_from_files = []
original = chart_rows.cut_shard
chart_rows.cut_shard = lambda *a: cut_from_files.append(1) or original(*a)
from rooftui.sweeps.cli import main
try:
    main(["run", {str(grid)!r}, "--out", {str(out)!r}, "--shard-size", "700",
          "--workers", "2"])
except SystemExit as end:
    assert not end.code, end.code
print(seen, len(cut_from_files), "polars" in sys.modules, len(forks))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    # ... and shares the pages with one forked child
    assert done.stdout.strip().splitlines()[-1] == "[[]] 0 False 1", done.stdout + done.stderr
    assert page_specs(out / "charts") == rerendered(out, tmp_path)
