"""Charts of a 10-million-point sweep: time to make each one, its HTML size, peak memory.

Runs `sweep run` on the shipped grid with 100 batch sizes (10.1 M points; `--no-charts`)
into a temporary folder (or reuses `--results DIR`), then, in one fresh process, builds
every chart of the catalogue from the LazyFrame over the shards and saves it as HTML,
timing the slice-and-build step and the save separately. Targets (issue 4): every HTML
file under 5 MB whatever the grid size; building a chart reads only the columns it needs,
so its time grows with the points but its memory and output do not.

    python benchmarks/bench_charts.py
    python benchmarks/bench_charts.py --results outputs/bench-10M-0123456789ab
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GRID = REPO / "specs" / "grid.toml"
TEN_MILLION = 'batch = { start = 1, stop = 100, step = 1 }'  # 100 batch sizes instead of 11

MEASURE = """
import json, resource, sys, time
from pathlib import Path
import altair as alt
from rooftui.sweeps import charts
from rooftui.sweeps.results import read_manifest, scan_results
out = Path(sys.argv[1])
frame = scan_results(out)
axes = charts.declared_axes(read_manifest(out))
report = {"points": frame.select(__import__("polars").len()).collect().item(), "charts": {}}
for name, function in charts.CHARTS.items():
    start = time.perf_counter()
    chart = function(frame, axes=axes)
    built = time.perf_counter()
    with alt.data_transformers.disable_max_rows():
        rows = max(len(r) for r in chart.to_dict()["datasets"].values())
    path = charts.save_chart(chart, out / "charts" / name)[0]
    report["charts"][name] = {"build_s": round(built - start, 2),
                              "save_s": round(time.perf_counter() - built, 2),
                              "rows": rows, "html_mb": round(path.stat().st_size / 1e6, 2)}
report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3)
print(json.dumps(report))
"""


def run_grid(folder: Path) -> Path:
    text = GRID.read_text(encoding="utf-8").replace('name = "default"', 'name = "bench-10M"')
    grid = folder / "grid.toml"
    grid.write_text(text.replace('batch = { start = 1, stop = 1024, scale = "log2" }',
                                 TEN_MILLION))
    out = folder / "out"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rooftui.sweeps", "run", str(grid), "--out",
                    str(out), "--no-charts", "--workers", "2"], check=True,
                   stdout=subprocess.DEVNULL)
    print(f"sweep run: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, help="an existing `sweep run` output folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-charts-") as scratch:
        out = args.results or run_grid(Path(scratch))
        done = subprocess.run([sys.executable, "-c", MEASURE, str(out)], check=True,
                              capture_output=True, text=True)
    report = json.loads(done.stdout)
    print(f"{report['points']:,} points; peak RSS {report['peak_rss_mb']} MB")
    print(f"{'chart':<22}{'build s':>9}{'save s':>8}{'rows':>8}{'HTML MB':>9}")
    for name, row in report["charts"].items():
        print(f"{name:<22}{row['build_s']:>9}{row['save_s']:>8}{row['rows']:>8,}"
              f"{row['html_mb']:>9}")


if __name__ == "__main__":
    main()
