"""`sweep run` end to end: points per second with parquet written, and peak memory.

Writes two grids to a temporary folder — the shipped default grid (1.1 M points) and the
same with 100 batch sizes (10.1 M points) — and runs `sweep run` on each from a fresh
wrapper process, timing it. Peak resident memory: the `sweep` process's own from
`resource.getrusage(RUSAGE_CHILDREN)` in the wrapper (so one size's peak never leaks into
the other's), and every worker's high-water mark (VmHWM) and the summed RSS of the whole
process tree, sampled from /proc every 20 ms (Linux). Targets (issue 3): >= 3 M points/s
end to end on 2 cores, < 500 MB peak at either size.

`--charts N` instead times `sweep run` of the shipped grid with its charts against the
same with `--no-charts`, alternately N times each into fresh folders (same machine, same
load), and prints the median wall times, their ratio and the run's own chart seconds;
`--before-tree DIR` adds the same from a checkout of an older commit (`git worktree add
DIR REV`), in the same minutes; `--tree DIR` measures a checkout in place of the installed
package (so that edits made meanwhile do not reach the runs). Target (issue 19): with
charts <= 1.5x the time without. The runs read their modules' bytecode from a cache (a
private PYTHONPYCACHEPREFIX, filled by one untimed run per tree), as an installed package
does.

    python benchmarks/bench_sweep_run.py                 # both sizes, --workers 2
    python benchmarks/bench_sweep_run.py --sizes 1M --workers 1
    python benchmarks/bench_sweep_run.py --charts 5 --workers 1 --before-tree /tmp/old
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine_info import describe_machine  # the script's folder is on sys.path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_GRID = REPO / "specs" / "grid.toml"
SIZES = {
    "1M": None,  # the shipped grid as it is
    "10M": 'batch = { start = 1, stop = 100, step = 1 }',  # 100 batch sizes instead of 11
}


def grid_text(size: str) -> str:
    text = DEFAULT_GRID.read_text(encoding="utf-8").replace('name = "default"',
                                                           f'name = "bench-{size}"')
    if SIZES[size]:
        text = text.replace('batch = { start = 1, stop = 1024, scale = "log2" }', SIZES[size])
    return text


def sweep_command(grid: Path, out: Path, workers: int, charts: bool = False) -> list[str]:
    return [sys.executable, "-m", "rooftui.sweeps", "run", str(grid), "--out", str(out),
            "--workers", str(workers), *([] if charts else ["--no-charts"]), "--json"]


def charts_side_by_side(folder: Path, workers: int, repeats: int,
                        before: Path | None, now: Path | None = None) -> None:
    """`sweep run` of the shipped grid with and without its charts, alternately; with
    `before` (a checkout of an older commit, e.g. `git worktree add`) the same with the
    package imported from there, in the same minutes."""
    grid = folder / "grid.toml"
    grid.write_text(grid_text("1M"), encoding="utf-8")
    # the modules' bytecode cached, as an installed package has it, even where
    # PYTHONDONTWRITEBYTECODE is set (it is on the development machines)
    cached = {key: value for key, value in os.environ.items()
              if key != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPYCACHEPREFIX": str(folder / "pyc")}
    trees = {"now": cached}
    for tree, checkout in (("now", now), ("before", before)):
        if checkout is not None:  # `rooftui` resolved to the checkout, ahead of this one
            (folder / tree).mkdir()
            (folder / tree / "rooftui").symlink_to(checkout.resolve())
            trees[tree] = {**cached, "PYTHONPATH": str(folder / tree)}
    for tree, environment in trees.items():  # untimed: compiles and caches the bytecode
        subprocess.run(sweep_command(grid, folder / f"warm-{tree}", workers, True),
                       capture_output=True, check=True, env=environment)
    walls: dict[tuple[str, bool], list[float]] = {}
    cpus: dict[tuple[str, bool], list[float]] = {}
    chart_seconds: dict[str, list[float]] = {}
    for repeat in range(repeats):
        for tree, environment in trees.items():
            for charts in (False, True):
                command = sweep_command(grid, folder / f"out-{tree}-{repeat}-{charts}",
                                        workers, charts)
                if repeat == 0 and tree == "now":
                    print("command: " + " ".join(command))
                began, used = time.perf_counter(), _children_cpu()
                done = subprocess.run(command, capture_output=True, text=True, check=True,
                                      env=environment)
                walls.setdefault((tree, charts), []).append(time.perf_counter() - began)
                cpus.setdefault((tree, charts), []).append(_children_cpu() - used)
                if charts:
                    chart_seconds.setdefault(tree, []).append(
                        json.loads(done.stdout)["charts_seconds"])
    for tree in trees:
        without, with_charts = (statistics.median(walls[tree, c]) for c in (False, True))
        print(f"  {tree}: --no-charts median {without:.2f} s of "
              + ", ".join(f"{w:.2f}" for w in walls[tree, False])
              + f"; with charts median {with_charts:.2f} s of "
              + ", ".join(f"{w:.2f}" for w in walls[tree, True])
              + f" (charts {statistics.median(chart_seconds[tree]):.2f} s in the summary); "
              f"ratio {with_charts / without:.2f}x (target <= 1.5x)")
        cpu_without, cpu_with = (statistics.median(cpus[tree, c]) for c in (False, True))
        print(f"  {tree}: CPU (user + system, less moved by the load) median "
              f"{cpu_without:.2f} s without, {cpu_with:.2f} s with charts: "
              f"{cpu_with / cpu_without:.2f}x")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _memory_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in kB; zeros once it is gone."""
    values = {"VmRSS:": 0, "VmHWM:": 0}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, *rest = line.split()
            if key in values:
                values[key] = int(rest[0])
    except (OSError, ValueError, IndexError):
        pass
    return values["VmRSS:"], values["VmHWM:"]


def measure(grid: Path, out: Path, workers: int) -> dict:
    """Run in a fresh wrapper process: one `sweep run`, its wall time and peak memory."""
    command = sweep_command(grid, out, workers)
    began = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    worker_peak_kb = tree_peak_kb = 0
    while process.poll() is None:
        tree = [process.pid, *_descendants(process.pid)]
        samples = [_memory_kb(pid) for pid in tree]
        tree_peak_kb = max(tree_peak_kb, sum(rss for rss, _ in samples))
        worker_peak_kb = max([worker_peak_kb] + [hwm for _, hwm in samples[1:]])
        time.sleep(0.02)
    stdout, stderr = process.communicate()
    wall = time.perf_counter() - began
    if process.returncode:
        raise SystemExit(f"sweep run failed ({process.returncode}): {stderr}")
    summary = json.loads(stdout)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"points": summary["points"], "rows": summary["rows"], "wall_s": wall,
            "run_s": summary["seconds"], "points_per_s": summary["points"] / wall,
            "main_peak_mb": usage.ru_maxrss / 1024, "worker_peak_mb": worker_peak_kb / 1024,
            "tree_peak_mb": tree_peak_kb / 1024,
            "bytes": sum(p.stat().st_size for p in (out / "points").glob("*.parquet"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--charts", type=int, metavar="N",
                        help="time the shipped grid with and without charts, N runs each")
    parser.add_argument("--before-tree", type=Path, metavar="DIR",
                        help="with --charts: also from this checkout of an older commit")
    parser.add_argument("--tree", type=Path, metavar="DIR",
                        help="with --charts: measure this checkout, not the installed one")
    parser.add_argument("--measure", nargs=3, metavar=("GRID", "OUT", "WORKERS"),
                        help=argparse.SUPPRESS)  # the wrapper process
    args = parser.parse_args()
    if args.measure:
        grid, out, workers = args.measure
        print(json.dumps(measure(Path(grid), Path(out), int(workers))))
        return

    print(f"machine: {describe_machine()}")
    if args.charts:
        with tempfile.TemporaryDirectory(prefix="bench-sweep-run-") as tmp:
            charts_side_by_side(Path(tmp), args.workers, args.charts, args.before_tree,
                                args.tree)
        print(f"machine after: {describe_machine()}")
        return
    with tempfile.TemporaryDirectory(prefix="bench-sweep-run-") as tmp:
        for size in args.sizes:
            grid = Path(tmp) / f"grid-{size}.toml"
            grid.write_text(grid_text(size), encoding="utf-8")
            out = Path(tmp) / f"out-{size}"
            print("command: " + " ".join(sweep_command(grid, out, args.workers)))
            wrapper = subprocess.run([sys.executable, __file__, "--measure", str(grid),
                                      str(out), str(args.workers)],
                                     capture_output=True, text=True, check=True)
            r = json.loads(wrapper.stdout)
            print(f"  {size}: {r['points']:,} points ({r['rows']:,} rows) in {r['wall_s']:.2f} s "
                  f"wall ({r['run_s']:.2f} s after start-up): "
                  f"{r['points_per_s'] / 1e6:.2f} M points/s end to end "
                  f"({r['points'] / r['run_s'] / 1e6:.2f} after start-up)\n"
                  f"      peak RSS: sweep process {r['main_peak_mb']:.0f} MB, largest worker "
                  f"{r['worker_peak_mb']:.0f} MB, whole tree {r['tree_peak_mb']:.0f} MB; "
                  f"parquet {r['bytes'] / 1e6:.0f} MB ({r['bytes'] / r['rows']:.1f} B/row)")


if __name__ == "__main__":
    main()
