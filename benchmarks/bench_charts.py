"""Rendering a folder's whole chart catalogue: wall time, where it goes, file sizes.

Runs `sweep run specs/grid.toml --no-charts` (the default grid: 1,045,440 rows) into a
temporary folder, or reuses `--results DIR`; `--ten-million` runs it with 100 batch
sizes instead (10.1 M rows). Then, each in a fresh process as `sweep chart` would, it
renders every chart the folder's kind offers (`render_charts(DIR, only=...)`, the
dashboard included) three times:

- cold: an empty bundle cache (`ROOFTUI_CACHE_DIR`), so the Vega bundle is built;
- warm: the bundle read back from that cache;
- warm with PNG: every chart also converted to PNG through vl-convert.

`--before REV` first times `sweep chart DIR` (and `--png`) with the catalogue as it was at
git revision REV, when it was one module (`sweeps/charts.py`, e.g. 55f0fc2), loaded in
its place, and then as it is now: a before/after on the same machine and load.
`--before-tree DIR` does the same with the whole package imported from DIR, a checkout
of any older commit (`git worktree add DIR REV`), alternately with now, `--repeats` times.

Each run reports its wall time from the interpreter's start, the import of the chart
module, the bundle, each chart's build (slice and spec: the data's own cost) and save,
and the peak RSS. Target (issue 15): a warm render of the catalogue within 3 s plus the
builds. Run on an idle machine; the `uptime` load before and after is printed.

    python benchmarks/bench_charts.py
    python benchmarks/bench_charts.py --results outputs/default-0123456789ab
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GRID = REPO / "specs" / "grid.toml"
TEN_MILLION = 'batch = { start = 1, stop = 100, step = 1 }'  # 100 batch sizes instead of 11

MEASURE = """
import functools, json, resource, sys, time
started = time.perf_counter()
from pathlib import Path
from rooftui.sweeps import chart_files, charts
imported = time.perf_counter()
out, png = Path(sys.argv[1]), sys.argv[2] == "png"
report = {"import_s": imported - started, "charts": {}, "bundle_s": 0.0}
kind = json.loads((out / "manifest.json").read_text())["kind"]

def timed(name, function, key):
    @functools.wraps(function)  # the dashboard titles a chart by its docstring
    def run(*args, **kwargs):
        start = time.perf_counter()
        result = function(*args, **kwargs)
        report["charts"].setdefault(name, {})[key] = time.perf_counter() - start
        return result
    return run

real_bundle = chart_files.vega_bundle
def bundle():
    start = time.perf_counter()
    text = real_bundle()
    report["bundle_s"] += time.perf_counter() - start
    return text
chart_files.vega_bundle = bundle
for name in charts.KIND_CHARTS[kind]:
    charts.CHARTS[name] = timed(name, charts.CHARTS[name], "build_s")
real_save = charts.save_chart
charts.save_chart = lambda chart, stem, **options: timed(stem.name, real_save, "save_s")(
    chart, stem, **options)
written = charts.render_charts(out, only=list(charts.KIND_CHARTS[kind]), png=png)
report["total_s"] = time.perf_counter() - started
report["files"] = {p.name: p.stat().st_size for p in written}
report["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
print(json.dumps(report))
"""


# `sweep chart` with an older one-module catalogue standing in for rooftui.sweeps.charts
BEFORE = """
import importlib.util, sys
import rooftui.sweeps
spec = importlib.util.spec_from_file_location("rooftui.sweeps.charts", sys.argv[1])
module = importlib.util.module_from_spec(spec)
sys.modules["rooftui.sweeps.charts"] = module
spec.loader.exec_module(module)
rooftui.sweeps.charts = module
from rooftui.sweeps.cli import main
sys.argv = ["sweep", "chart", *sys.argv[2:]]
main()
"""


def sweep_chart(out: Path, module: Path | None, png: bool,
                environment: dict[str, str] | None = None) -> float:
    """Wall seconds of `sweep chart DIR` in a fresh interpreter, with the one-module
    catalogue `module` in place of the current one when given."""
    command = ([sys.executable, "-c", BEFORE, str(module)] if module
               else [sys.executable, "-m", "rooftui.sweeps", "chart"])
    start = time.perf_counter()
    subprocess.run([*command, str(out), *(["--png"] if png else [])], check=True,
                   stdout=subprocess.DEVNULL, env=environment)
    return time.perf_counter() - start


def before_and_now(out: Path, tree: Path, scratch: Path, repeats: int) -> None:
    """`sweep chart DIR` (and `--png`) with the package imported from `tree` (a checkout
    of an older commit) and from here, alternately, the bundle cache warm."""
    (scratch / "before").mkdir()
    (scratch / "before" / "rooftui").symlink_to(tree.resolve())
    trees = {"before": {**os.environ, "PYTHONPATH": str(scratch / "before")},
             "now": dict(os.environ)}
    sweep_chart(out, None, False)  # fills the cache
    for png in (False, True):
        times: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(repeats):
            for name, environment in trees.items():
                times[name].append(sweep_chart(out, None, png, environment))
        flag = " --png" if png else ""
        print(f"sweep chart{flag}: " + "; ".join(
            f"{name} {', '.join(f'{t:.2f}' for t in values)} s" for name, values in
            times.items()))


def old_catalogue(revision: str, scratch: Path) -> Path:
    module = scratch / "charts_before.py"
    module.write_text(subprocess.run(["git", "-C", str(REPO), "show",
                                      f"{revision}:sweeps/charts.py"], check=True,
                                     capture_output=True, text=True).stdout)
    return module


def run_grid(folder: Path, ten_million: bool) -> Path:
    text = GRID.read_text(encoding="utf-8").replace('name = "default"', 'name = "bench"')
    if ten_million:
        text = text.replace('batch = { start = 1, stop = 1024, scale = "log2" }', TEN_MILLION)
    grid = folder / "grid.toml"
    grid.write_text(text)
    out = folder / "out"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rooftui.sweeps", "run", str(grid), "--out",
                    str(out), "--no-charts", "--workers", "2"], check=True,
                   stdout=subprocess.DEVNULL)
    print(f"sweep run: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return out


def render(out: Path, cache: Path, png: bool) -> dict:
    """One render of the catalogue in a fresh interpreter; its wall time from launch."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", MEASURE, str(out), "png" if png else "html"],
                          check=True, capture_output=True, text=True,
                          env={**os.environ, "ROOFTUI_CACHE_DIR": str(cache)})
    report = json.loads(done.stdout)
    report["wall_s"] = time.perf_counter() - start
    return report


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, help="an existing `sweep run` output folder")
    parser.add_argument("--before", metavar="REV",
                        help="also time `sweep chart` with the one-module catalogue at REV")
    parser.add_argument("--before-tree", type=Path, metavar="DIR",
                        help="also time `sweep chart` (and --png) from this checkout of an "
                             "older commit (git worktree add DIR REV), alternately with now")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each with --before-tree [default: 3]")
    parser.add_argument("--ten-million", action="store_true",
                        help="run the default grid with 100 batch sizes (10.1 M rows)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-charts-") as scratch:
        out = args.results or run_grid(Path(scratch), args.ten_million)
        rows = json.loads((out / "manifest.json").read_text())["rows"]
        cache = Path(scratch) / "cache"
        print(f"load before: {uptime()}")
        if args.before_tree:
            os.environ["ROOFTUI_CACHE_DIR"] = str(Path(scratch) / "cli-cache")
            before_and_now(out, args.before_tree, Path(scratch), args.repeats)
        if args.before:  # the same command, then and now (the bundle cache warm)
            module = old_catalogue(args.before, Path(scratch))
            os.environ["ROOFTUI_CACHE_DIR"] = str(Path(scratch) / "cli-cache")
            sweep_chart(out, None, False)  # fills the cache
            for png in (False, True):
                flag = " --png" if png else ""
                print(f"sweep chart{flag}: before ({args.before}) "
                      f"{sweep_chart(out, module, png):.2f} s, now "
                      f"{sweep_chart(out, None, png):.2f} s")
        runs = {"cold": render(out, cache, False), "warm": render(out, cache, False),
                "warm + PNG": render(out, cache, True)}
        print(f"load after:  {uptime()}")
    print(f"{rows:,} rows; wall time from launch, seconds (builds: each chart's, summed;"
          " two run at once)")
    print(f"{'run':<12}{'wall':>7}{'import':>8}{'bundle':>8}{'builds':>8}{'saves':>8}"
          f"{'RSS MB':>8}")
    for name, run in runs.items():
        builds = sum(c.get("build_s", 0) for c in run["charts"].values())
        saves = sum(c.get("save_s", 0) for c in run["charts"].values())
        print(f"{name:<12}{run['wall_s']:>7.2f}{run['import_s']:>8.2f}{run['bundle_s']:>8.2f}"
              f"{builds:>8.2f}{saves:>8.2f}{run['peak_rss_mb']:>8.0f}")
    warm = runs["warm"]
    print(f"\n{'chart (warm)':<24}{'build s':>9}{'save s':>8}{'HTML MB':>9}")
    for name, chart in warm["charts"].items():
        size = warm["files"].get(f"{name}.html", 0) / 1e6
        print(f"{name:<24}{chart.get('build_s', 0):>9.2f}{chart.get('save_s', 0):>8.2f}"
              f"{size:>9.2f}")


if __name__ == "__main__":
    main()
