"""The chart work of `sweep run`, split: cutting each shard's chart rows, and building the
catalogue's specs from those rows, against building them from the folder.

On a result folder (`--results DIR`, else `sweep run specs/grid.toml --no-charts` into a
temporary one), each in a fresh process with altair imported first (the run imports it
while the shards are computed): the CPU seconds of building every spec of the folder's
`[charts]` (chart, spec, text) from the folder, as `sweep chart` does, and of cutting
every shard's file (`chart_rows`, planning included: what `sweep run` does for a shard
whose rows did not come back) then building them from the cut rows, and of keeping each
shard's rows from its columns as a worker does (`ShardRows`: its numpy mask, the columns
computed again first and not counted), turning them into one table in the parent (as
`RowCollector.gather` does) and building from it. `--before-tree DIR` (a `git worktree
add` of an older commit) adds the folder build and the rows as that tree keeps them
(in the workers, or cut from the files; neither before `chart_rows`) from there,
alternately, `--repeats` times.

    python benchmarks/bench_chart_rows.py --before-tree /tmp/old --repeats 3
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from machine_info import describe_machine  # the script's folder is on sys.path

REPO = Path(__file__).resolve().parents[1]

MEASURE = """
import sys, time
from pathlib import Path
import altair  # noqa: F401  (imported by the run while its shards are computed)
from rooftui.sweeps import chart_files, charts
from rooftui.sweeps.results import read_manifest, scan_results
out = Path(sys.argv[1])
manifest = read_manifest(out)
axes = charts.declared_axes(manifest)
settings = charts.chart_settings(manifest.get("charts"), kind=manifest.get("kind", "step"))

def build(frame):
    for name in settings.names:
        chart = charts.CHARTS[name](frame, fixed=settings.fixed, axes=axes, grid=manifest)
        spec, frames = chart_files.chart_spec(chart)
        chart_files.spec_text(spec, frames)

began = time.process_time()
if sys.argv[2] == "worker":
    import numpy as np
    from rooftui.sweeps import chart_rows
    from rooftui.sweeps.chart_rows import ShardRows, plan_cut
    if hasattr(chart_rows, "rows_table"):  # numpy columns: the run never imports polars
        gathered = chart_rows.rows_table
    else:  # a tree before: polars frames, polars imported while the shards are computed
        import polars  # noqa: F401
        gathered = chart_rows.rows_frame
    from rooftui.sweeps.grid import parse_grid
    from rooftui.sweeps.kinds import evaluator_for
    sweep = evaluator_for(parse_grid(manifest["spec_text"], Path(manifest["spec_path"])))
    cut, kept, pieces = plan_cut(out), 0.0, []
    for index in range(manifest["shards"]):
        start = index * manifest["shard_size"]
        groups = [c for c, _ in sweep.row_groups(
            start, min(start + manifest["shard_size"], manifest["points"]))]
        began = time.process_time()
        shard = ShardRows(cut, sweep.dictionaries)
        for columns in groups:
            shard.add(columns)
        pieces.append(shard.rows())
        kept += time.process_time() - began
    began = time.process_time()
    frame = gathered({name: np.concatenate([piece[name] for piece in pieces])
                      for name in pieces[0]}, cut, sweep.dictionaries)  # as gathered
    framed = time.process_time()
    build(frame)
    print(f"keep in the workers {kept:.2f} CPU-s, tables {framed - began:.2f}, "
          f"build from the rows {time.process_time() - framed:.2f}")
elif sys.argv[2] == "rows":
    from rooftui.sweeps.chart_rows import RowCollector
    rows = RowCollector(out, None, lambda i: out / "points" / f"shard-{i:06d}.parquet"
                        ).gather(manifest["shards"])
    cut = time.process_time()
    build(rows.table if hasattr(rows, "table") else rows.frame)
    print(f"cut {cut - began:.2f} CPU-s, build from the rows {time.process_time() - cut:.2f}")
else:
    build(scan_results(out))
    print(f"build from the folder {time.process_time() - began:.2f} CPU-s")
"""


def measure(out: Path, mode: str, path: Path | None = None) -> str:
    """One fresh process; `path`: a folder whose `rooftui` is imported ahead of the
    installed package."""
    environment = {**os.environ, **({"PYTHONPATH": str(path)} if path else {})}
    done = subprocess.run([sys.executable, "-c", MEASURE, str(out), mode], check=True,
                          capture_output=True, text=True, env=environment)
    return done.stdout.strip()


def rows_mode(tree: Path) -> str | None:
    """How a tree keeps a run's chart rows: in the workers, cut from the shards' files, or
    not at all (None: only its folder build is measured)."""
    source = tree / "sweeps" / "chart_rows.py"
    text = source.read_text(encoding="utf-8") if source.is_file() else ""
    return "worker" if "class ShardRows" in text else "rows" if text else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, metavar="DIR")
    parser.add_argument("--before-tree", type=Path, metavar="DIR")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {describe_machine()}")
    with tempfile.TemporaryDirectory(prefix="bench-chart-rows-") as tmp:
        out = args.results
        if out is None:
            out = Path(tmp) / "out"
            subprocess.run([sys.executable, "-m", "rooftui.sweeps", "run",
                            str(REPO / "specs" / "grid.toml"), "--out", str(out),
                            "--no-charts", "--workers", "2"], check=True,
                           capture_output=True)
        before = None
        if args.before_tree is not None:
            before = Path(tmp) / "before"
            before.mkdir()
            (before / "rooftui").symlink_to(args.before_tree.resolve())
            before_rows = rows_mode(args.before_tree)
        for repeat in range(args.repeats):
            if before is not None:
                print(f"  {repeat}: before: {measure(out, 'folder', before)}")
                if before_rows:
                    print(f"  {repeat}: before: {measure(out, before_rows, before)}")
            print(f"  {repeat}: now:    {measure(out, 'folder')}")
            print(f"  {repeat}: now:    {measure(out, 'rows')}")
            print(f"  {repeat}: now:    {measure(out, 'worker')}")
    print(f"machine after: {describe_machine()}")


if __name__ == "__main__":
    main()
