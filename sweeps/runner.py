"""`sweep run`'s engine: shards of a grid evaluated and written as parquet, resumably.

Layout of an output folder (the contract the charts and the TUI read):

    <out>/manifest.json                      the run's record (see `build_manifest`)
    <out>/points/shard-<index:06d>.parquet   point ids [index * shard_size, ...) in order
    <out>/charts/                            filled by `sweep chart` / the charts module

    <out>/points/shard-<index:06d>.parquet.crc32, .claims    see `shard_files`

A shard is written to a hidden temporary file (`.shard-<index>.parquet.tmp`) and
renamed into place, then its checksum is committed beside it, so a reader or a rerun never
sees a partial shard under a shard's name, whenever the process dies. A shard counts as
complete when its checksum matches its bytes, its parquet footer carries this spec's hash
and the shard's id range, and its row count and columns are the expected ones; a rerun
recomputes the rest (`--force`: everything it covers). Workers (local processes or Dask)
claim and write their shards themselves: only a status travels back. A shard another
process holds is left to it and waited for at the end, so concurrent runs on one folder
compute each shard once.
"""

from __future__ import annotations

import json
import math
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rooftui.core.errors import SpecError
from rooftui.sweeps.chart_rows import ShardRows
from rooftui.sweeps.evaluate import EVALUATION_POINTS, Sweep
from rooftui.sweeps.grid import MODEL_VERSION, Grid, parse_grid
from rooftui.sweeps.kinds import evaluator_for
from rooftui.sweeps.output_files import make_folder, write_text_atomic
from rooftui.sweeps.results import (
    MANIFEST,
    POINTS,
    read_run_manifest,
    shard_indices,
    skipped_note,
)
from rooftui.sweeps.shard_files import (
    FORMAT,
    MANIFEST_CLAIM,
    META,
    claim,
    remove_shard,
    shard_state,
)
from rooftui.sweeps.shard_writer import (  # noqa: F401  (also importable from here)
    MIN_SHARD_POINTS,
    Layout,
    ShardWriter,
    claim_and_write,
    default_shard_size,
    shard_check,
    shard_path,
)

if TYPE_CHECKING:
    from rooftui.sweeps.chart_rows import Columns, RowCollector, RowCut

CONFIRM_POINTS = 10**9  # larger grids need --yes
OUTPUTS = Path("outputs")


def default_out_dir(grid: Grid) -> Path:
    return OUTPUTS / f"{grid.name}-{grid.spec_hash[:12]}"


# --- workers -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ShardTask:
    """What a worker needs to compute a shard on its own: the spec travels as text."""

    spec_text: str
    spec_path: str
    out_dir: str
    shard_size: int
    index: int
    environment: dict[str, Any]
    wait: bool = False  # for the shard's claim (the second round: shards others held)
    keep_complete: bool = True  # False under --force (first round)
    cut: RowCut | None = None  # the rows its charts draw, kept as it is written


@lru_cache(maxsize=4)
def _sweep_from(spec_text: str, spec_path: str) -> Sweep:
    return evaluator_for(parse_grid(spec_text, Path(spec_path)))


def compute_shard(task: ShardTask, sweep: Sweep | None = None,
                  on_points: Callable[[int], None] | None = None
                  ) -> tuple[int, str, Columns | None]:
    """Run in a worker (or inline, with the parent's `sweep`): claim, evaluate and write
    one shard; (index, `claim_and_write`'s word, the rows `task.cut` keeps of it when
    written here). numpy and pyarrow only: polars deadlocks in a forked child."""
    sweep = sweep or _sweep_from(task.spec_text, task.spec_path)
    layout = Layout(sweep.grid.size, task.shard_size)
    kept = ShardRows(task.cut, sweep.dictionaries) if task.cut is not None else None
    word = claim_and_write(sweep, Path(task.out_dir), layout, task.index, task.environment,
                           wait=task.wait, keep_complete=task.keep_complete,
                           on_points=on_points, on_columns=kept.add if kept is not None else None)
    return task.index, word, kept.rows() if kept is not None and word == "written" else None


def _run_inline(sweep, layout, tasks, progress, rows) -> dict[int, str]:
    done = {}
    if rows is not None:  # the writer's imports here, then polars in the rows' thread
        import pyarrow.parquet  # noqa: F401
        rows.start()
    for task in tasks:
        index, done[task.index], kept = compute_shard(task, sweep, progress.advance)
        if done[index] == "complete":  # written by another process
            progress.advance(_points(layout, index))
        if done[index] != "busy" and rows is not None:
            rows.landed(index, kept)
    return done


def _run_processes(tasks: list[ShardTask], layout, workers, progress, rows
                   ) -> dict[int, str]:
    import multiprocessing

    # Linux: fork, so a worker starts with the modules and the sweep already loaded (a
    # fresh interpreter per worker costs ~0.3 s, 12-15 % of a 10 M-point run on 2 cores).
    # The parent holds no lock a worker needs: it only waits here, and pyarrow, numpy's
    # BLAS and mimalloc reset their thread pools in a forked child.
    methods = multiprocessing.get_all_start_methods()
    method = ("fork" if sys.platform == "linux" and "fork" in methods
              else "forkserver" if "forkserver" in methods else "spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(tasks)),
                             mp_context=multiprocessing.get_context(method)) as pool:
        futures = [pool.submit(compute_shard, task) for task in tasks]
        if rows is not None:  # forked at the first submit: polars may load now
            rows.start()
        done = {}
        try:
            for future in as_completed(futures):
                index, done[index], kept = future.result()
                if done[index] != "busy":
                    progress.advance(_points(layout, index))
                    if rows is not None:
                        rows.landed(index, kept)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return done


def _run_dask(tasks: list[ShardTask], layout, workers, scheduler, progress, rows
              ) -> dict[int, str]:
    try:
        from dask.distributed import Client, LocalCluster
        from dask.distributed import as_completed as dask_completed
    except ImportError:
        raise SpecError("--executor dask needs the dask extra: "
                        "pip install 'rooftui[dask]'") from None
    if scheduler:
        client, cluster = Client(scheduler), None
    else:  # threads in this process for one worker, processes for more
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1,
                               processes=workers > 1, dashboard_address=None)
        client = Client(cluster)
    done = {}
    try:
        futures = client.map(compute_shard, tasks, pure=False)
        for future in dask_completed(futures):
            index, done[index], _ = future.result()  # the tasks carry no cut
            if done[index] != "busy":
                progress.advance(_points(layout, index))
                if rows is not None:
                    rows.landed(index)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return done


def _points(layout: Layout, index: int) -> int:
    start, stop = layout.range(index)
    return stop - start


# --- the run -----------------------------------------------------------------------------
@dataclass(frozen=True)
class RunOptions:
    out_dir: Path | None = None
    shard_size: int | None = None  # None: the existing run's, else default_shard_size
    part: tuple[int, int] | None = None  # (i, N): slice i of N (0-based)
    workers: int = 1
    executor: str = "local"  # or "dask"
    scheduler: str | None = None
    force: bool = False
    charts: bool = True


def prepare_out_dir(grid: Grid, options: RunOptions) -> tuple[Path, Layout, dict | None]:
    """The output folder and shard layout; refuses to mix with another spec's results or
    to guess past a damaged manifest (`--force` replaces either)."""
    out_dir = Path(options.out_dir) if options.out_dir else default_out_dir(grid)
    previous = None
    if (out_dir / MANIFEST).exists():
        try:
            previous = read_run_manifest(out_dir)
        except SpecError as error:
            if not options.force:
                raise SpecError(f"{error}; remove it, or --force to start over") from None
    elif out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / POINTS).is_dir():
        raise SpecError(f"{out_dir} exists and is not a sweep output folder; choose a new "
                        "or empty folder with --out")
    same_spec = previous is not None and previous["spec_hash"] == grid.spec_hash
    if previous is not None and not same_spec and not options.force:
        raise SpecError(
            f"{out_dir} holds results of another spec ({previous['name']}, hash "
            f"{previous['spec_hash'][:12]}); choose another --out, or --force to replace "
            "them")
    shard_size = options.shard_size or (same_spec and previous["shard_size"]) \
        or default_shard_size(grid.size, grid.kind, unit=(
            grid.block_unit(EVALUATION_POINTS) if grid.kind == "step" else 1))
    if same_spec and previous["shard_size"] != shard_size and not options.force:
        raise SpecError(
            f"{out_dir} was written with --shard-size {previous['shard_size']}; pass that "
            "to resume, or --force to start over")
    return out_dir, Layout(grid.size, shard_size), (previous if same_spec else None)


def run_sweep(sweep: Sweep, options: RunOptions, progress: Progress) -> dict[str, Any]:
    """Compute the shards this run covers that are not complete yet; return a summary."""
    started = time.perf_counter()
    grid = sweep.grid
    out_dir, layout, previous = prepare_out_dir(grid, options)
    points_dir = make_folder(out_dir / POINTS)
    make_folder(out_dir / "charts")
    existing = shard_indices(points_dir)
    if options.force and options.part is None:  # files of a layout with more shards
        for index in (i for i in existing if i >= layout.shards):
            with claim(points_dir, index):
                remove_shard(shard_path(out_dir, index))

    environment = describe_environment()
    started_at = (previous or {}).get("started_at") or _now()
    counted = (previous or {}).get("shards_done")  # until this run counts them again
    with claim(points_dir, MANIFEST_CLAIM):
        write_manifest(out_dir, build_manifest(
            sweep, layout, environment, started_at, None,
            counted if isinstance(counted, int) and 0 <= counted <= layout.shards else 0))

    mine = layout.slice(*options.part) if options.part else range(layout.shards)
    states = {} if options.force else {
        i: shard_check(sweep, out_dir, layout, i) for i in existing if i in mine}
    todo = [i for i in mine if states.get(i, "missing") != "complete"]
    for state in ("damaged", "uncommitted", "foreign"):
        named = [i for i in todo if states.get(i) == state]
        if named:
            progress.note(skipped_note(points_dir, {i: state for i in named},
                                       "recomputing"))
    progress.start(sum(_points(layout, i) for i in todo),
                   f"{grid.name}: {len(todo):,} of {len(mine):,} shards to compute")
    rows = _chart_rows(out_dir, sweep, options)
    # local workers keep their shards' chart rows; Dask's are cut from the files
    cut = rows.cut if rows is not None and options.executor == "local" else None
    tasks = [ShardTask(grid.text, str(grid.path.resolve()), str(out_dir.resolve()),
                       layout.shard_size, index, environment,
                       keep_complete=not options.force, cut=cut) for index in todo]
    outcomes = _run(sweep, layout, tasks, options, progress, rows)
    # shards another process held: wait for it, then take over what it did not finish
    held = [replace(task, wait=True, keep_complete=True) for task in tasks
            if outcomes[task.index] == "busy"]
    if held:
        progress.note(f"waiting for {len(held):,} shards another process is computing ...")
        outcomes |= _run(sweep, layout, held, options, progress, rows)
    progress.finish()

    written = [i for i in todo if outcomes[i] == "written"]
    with claim(points_dir, MANIFEST_CLAIM):  # the last run to finish counts every shard
        others = sorted(set(shard_indices(points_dir)) - set(mine))
        shards_done = len(mine) + sum(
            shard_check(sweep, out_dir, layout, i, verify=False) == "complete"
            for i in others if i < layout.shards)
        write_manifest(out_dir, build_manifest(sweep, layout, environment, started_at,
                                               _now(), shards_done))
    complete = shards_done == layout.shards
    seconds = time.perf_counter() - started
    charts_seconds = None
    if complete and options.charts:
        charts_seconds = _render_charts(out_dir, grid, layout, progress, rows)
    if rows is not None:
        rows.discard()
    points_computed = sum(_points(layout, i) for i in written)
    return {
        "out_dir": str(out_dir),
        "name": grid.name,
        "spec_hash": grid.spec_hash,
        "points": layout.points,
        "rows": layout.points - sweep.skipped_points,
        "skipped_points": sweep.skipped_points,
        "shard_size": layout.shard_size,
        "shards": layout.shards,
        "shards_in_run": len(mine),
        "shards_computed": len(written),
        "shards_done": shards_done,
        "complete": complete,
        "points_computed": points_computed,
        "seconds": seconds,
        "points_per_s": points_computed / seconds if seconds > 0 else None,
        "charts_seconds": charts_seconds,
    }


def _run(sweep, layout, tasks: list[ShardTask], options: RunOptions, progress,
         rows: RowCollector | None) -> dict[int, str]:
    """Each task's outcome (`claim_and_write`'s word), on the chosen executor; `rows`
    told of each shard as it is complete (written here or by another process)."""
    if not tasks:
        return {}
    if options.executor == "dask":
        return _run_dask(tasks, layout, options.workers, options.scheduler, progress, rows)
    if options.workers > 1 and len(tasks) > 1:
        return _run_processes(tasks, layout, options.workers, progress, rows)
    return _run_inline(sweep, layout, tasks, progress, rows)


def _chart_rows(out_dir: Path, sweep: Sweep, options: RunOptions) -> RowCollector | None:
    """What the run keeps of each shard for its charts as the shard lands (see
    `chart_rows`); None without charts."""
    if not options.charts:
        return None
    from rooftui.sweeps.chart_rows import RowCollector

    return RowCollector(out_dir, sweep.grid.charts, lambda i: shard_path(out_dir, i),
                        sweep.dictionaries)


def _render_charts(out_dir: Path, grid: Grid, layout: Layout, progress: Progress,
                   rows: RowCollector | None) -> float | None:
    """The grid's `[charts]` that are missing or older than the data, once the dataset
    is complete (so a run killed while rendering renders them on the rerun), from the
    rows cut as the shards landed where there are; the seconds it took, None when every
    chart was up to date."""
    from rooftui.sweeps.charts import render_charts, stale_charts

    if not stale_charts(out_dir, grid.charts):
        return None
    progress.note("rendering the grid's charts ...")
    began = time.perf_counter()
    render_charts(out_dir, grid.charts, only=None, stale_only=True,
                  rows=rows.gather(layout.shards) if rows is not None else None)
    return time.perf_counter() - began


# --- manifest ----------------------------------------------------------------------------
def describe_environment() -> dict[str, Any]:
    """Versions, git commit and host, as recorded in the manifest and every shard."""
    def version(package: str) -> str | None:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return None

    return {
        "rooftui": version("rooftui"),
        "model_version": MODEL_VERSION,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "polars": version("polars"),
        "pyarrow": version("pyarrow"),
        "git_commit": _git_commit(),
        "host": socket.gethostname(),
    }


@lru_cache(maxsize=1)
def _git_commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def build_manifest(sweep: Sweep, layout: Layout, environment: dict[str, Any],
                   started_at: str, finished_at: str | None, shards_done: int) -> dict:
    grid = sweep.grid
    return {
        "format": FORMAT,
        "name": grid.name,
        "kind": grid.kind,
        "description": grid.description,
        "spec_hash": grid.spec_hash,
        "spec_path": str(grid.path.resolve()),
        "spec_text": grid.text,
        "spec": grid.canonical(),
        "charts": grid.charts,
        "points": layout.points,
        "rows": layout.points - sweep.skipped_points,
        "skipped_points": sweep.skipped_points,
        "shard_size": layout.shard_size,
        "shards": layout.shards,
        "shards_done": shards_done,
        "complete": shards_done == layout.shards,
        "columns": {name: ("string" if name in sweep.dictionaries else str(dtype))
                    for name, dtype in sweep.result_types.items()},
        "versions": {k: v for k, v in environment.items() if k not in ("git_commit", "host")},
        "git_commit": environment["git_commit"],
        "host": environment["host"],
        "started_at": started_at,
        "finished_at": finished_at,
    }


def write_manifest(out_dir: Path, manifest: dict) -> None:
    """Atomically (temp file + rename), under the folder's manifest claim: concurrent
    runs never leave a torn file, and the last to finish counts every shard."""
    write_text_atomic(Path(out_dir) / MANIFEST,
                      json.dumps(manifest, indent=2, default=str) + "\n")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# --- status and estimates ----------------------------------------------------------------
def sweep_status(out_dir: Path) -> dict[str, Any]:
    """Done and missing shards of an output folder, from the manifest, the shards'
    checksums (every file hashed) and their footers."""
    manifest = read_run_manifest(out_dir)
    layout = Layout(manifest["points"], manifest["shard_size"])
    points_dir = Path(out_dir) / POINTS
    done, invalid, rows = [], {}, 0
    for index in sorted(shard_indices(points_dir)):
        state, footer = shard_state(shard_path(out_dir, index), manifest["spec_hash"], index)
        start, stop = layout.range(index)
        if state == "complete" and (index >= layout.shards or (
                footer["kv"].get(META + "first_point_id"),
                footer["kv"].get(META + "end_point_id")) != (str(start), str(stop))):
            state = "foreign"
        if state == "complete":
            done.append(index)
            rows += footer["rows"]
        else:
            invalid[index] = state
    missing = _gaps(done, layout.shards)
    return {
        "out_dir": str(out_dir),
        "name": manifest["name"],
        "spec_hash": manifest["spec_hash"],
        "points": layout.points,
        "expected_rows": manifest["rows"],
        "rows": rows,
        "shard_size": layout.shard_size,
        "shards": layout.shards,
        "shards_done": len(done),
        "shards_missing": layout.shards - len(done),
        "missing": missing,
        "invalid_files": len(invalid),  # the next run redoes them
        "invalid": {state: _ranges(i for i, s in invalid.items() if s == state)
                    for state in dict.fromkeys(invalid.values())},
        "invalid_note": skipped_note(points_dir, invalid, "the next run recomputes them")
        if invalid else None,
        "complete": len(done) == layout.shards,
        "started_at": manifest["started_at"],
        "finished_at": manifest["finished_at"],
    }


def _gaps(done: list[int], total: int, most: int = 1000) -> list[str]:
    """The ranges of [0, total) not in sorted `done`, the first `most` of them (a
    manifest may claim 10^9 shards: never one entry per index)."""
    spans, at = [], 0
    for index in [*done, total]:
        if index > at:
            spans.append(f"{at}-{index - 1}" if index - 1 > at else str(at))
            if len(spans) == most:
                break
        at = index + 1
    return spans


def _ranges(indices: Iterable[int]) -> list[str]:
    """[0, 1, 2, 5] -> ["0-2", "5"]."""
    spans: list[list[int]] = []
    for index in indices:
        if spans and index == spans[-1][1] + 1:
            spans[-1][1] = index
        else:
            spans.append([index, index])
    return [f"{a}-{b}" if a != b else str(a) for a, b in spans]


def estimate(sweep: Sweep, layout: Layout, workers: int, sample_points: int | None = None
             ) -> dict[str, float]:
    """Output size and time from evaluating and writing a sample (the first points; by
    default the evaluator's `estimate_points`) in memory; the time assumes `workers`
    processes on free cores."""
    import io

    stop = min(layout.points, sample_points or sweep.estimate_points)
    buffer = io.BytesIO()
    rows = 0
    began = time.perf_counter()
    writer = ShardWriter(buffer, sweep)
    for columns, _ in sweep.row_groups(0, stop):
        writer.write(columns)
        rows += len(columns["point_id"])
    writer.close()
    seconds_per_point = (time.perf_counter() - began) / stop
    parallel = max(1, min(workers, layout.shards))
    return {
        "sample_points": stop,
        "bytes": buffer.tell() / max(1, rows) * (layout.points - sweep.skipped_points),
        "seconds": seconds_per_point * layout.points / parallel,
    }


# --- progress ----------------------------------------------------------------------------
class Progress:
    """Points done, rate and ETA on stderr: one rewritten line on a terminal, a plain log
    line every `interval` seconds otherwise; silent when `quiet`."""

    def __init__(self, stream=None, interactive: bool | None = None, interval: float = 5.0,
                 quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.interactive = self.stream.isatty() if interactive is None else interactive
        self.interval = 0.2 if self.interactive else interval
        self.quiet = quiet
        self.total = self.done = 0
        self.began = self.shown = 0.0

    def start(self, total: int, label: str) -> None:
        self.total, self.done = total, 0
        self.began = self.shown = time.perf_counter()
        self._emit(label, end="\n")

    def advance(self, points: int) -> None:
        self.done += points
        now = time.perf_counter()
        if now - self.shown >= self.interval:
            self.shown = now
            self._emit(self._line(now), end="\r" if self.interactive else "\n")

    def note(self, text: str) -> None:
        self._emit(text, end="\n")

    def finish(self) -> None:
        if self.total:
            self._emit(self._line(time.perf_counter()), end="\n")

    def _line(self, now: float) -> str:
        elapsed = max(now - self.began, 1e-9)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate else math.inf
        share = self.done / self.total if self.total else 1.0
        return (f"  {100 * share:5.1f} %  {self.done:,} / {self.total:,} points  "
                f"{points_rate(rate)}  elapsed {_duration(elapsed)}  ETA {_duration(left)}")

    def _emit(self, text: str, end: str) -> None:
        if self.quiet:
            return
        prefix = "\r\x1b[2K" if self.interactive else ""
        self.stream.write(prefix + text + end)
        self.stream.flush()


def points_rate(points_per_s: float) -> str:
    if points_per_s >= 1e5:
        return f"{points_per_s / 1e6:.2f} M points/s"
    return f"{points_per_s:,.0f} points/s"


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"
