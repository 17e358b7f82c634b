"""Export what a view shows as standalone HTML charts (Vega embedded, open offline).

Imported only when the user exports: polars, altair and vl-convert load here, never at
start. The Explorer's export is the charts catalogue's own roofline and throughput charts
(`rooftui.sweeps.charts`) drawn over the current configuration at a range of batch sizes,
one file each (the catalogue's charts carry legend selections that Vega refuses twice in
one page); the Results view's is its plot (a metric against an axis, coloured by a third
column), which the catalogue has no chart for. All are written under `output_dir`
(default `outputs/`), in files named after what they show, through
`rooftui.sweeps.output_files` (a temporary file renamed into place): a failure (a
read-only folder, a full disk, a file where the folder should be) is a one-line SpecError
and leaves nothing half-written.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import altair as alt
import numpy as np
import polars as pl

from rooftui.sweeps.chart_files import write_chart_files
from rooftui.sweeps.charts import roofline_chart, throughput_vs_batch_chart
from rooftui.sweeps.output_files import make_folder
from rooftui.tui.figures import ExplorerFigures, evaluate_batches

BOUND_SUFFIX = "compute_bound"  # the core's booleans; sweep results hold them as words


def _slug(text: object) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", str(text).lower()).strip("-")


def _unique_path(output_dir: Path, stem: str) -> Path:
    """`output_dir`/`stem`-`time`.html, numbered if that exists; the folder is made."""
    make_folder(output_dir)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate, counter = output_dir / f"{stem}-{stamp}.html", 1
    while candidate.exists():
        counter += 1
        candidate = output_dir / f"{stem}-{stamp}-{counter}.html"
    return candidate


def _save_html(chart, path: Path) -> Path:
    """The chart (an altair chart or a step chart's `VegaChart`) as a self-contained
    HTML page (opens offline), written atomically as `sweep run` writes its charts."""
    write_chart_files(chart, [path])
    return path


def explorer_frame(figures: ExplorerFigures) -> pl.DataFrame:
    """The Explorer's configuration at batch 1, 2, 4, ... and the current batch, in the
    columns `sweep run` writes (rooftui.sweeps.results), for the catalogue's charts."""
    settings, report = figures.settings, figures.report
    top = int(figures.curve.batch[-1])
    batches = np.unique(np.append(2 ** np.arange(top.bit_length()), max(settings.batch, 1)))
    metrics = evaluate_batches(settings.config(), batches)
    columns: dict[str, object] = {
        "gpu": settings.gpu, "model": settings.model, "batch": batches.astype(np.int64),
        "context": report["context"], "prefill": report["prefill"],
        "kv_heads": report["kv_heads"], "group_size": report["group_size"],
        "weight_dtype": report["weight_dtype"], "kv_dtype": report["kv_dtype"],
        "compute_dtype": report["compute_dtype"], "peak_flops": report["peak_flops"],
        "bandwidth_bytes_per_s": report["bandwidth_bytes_per_s"],
    }
    for key, values in metrics.items():
        values = np.broadcast_to(values, batches.shape)
        if key.endswith(BOUND_SUFFIX):
            columns[key.removesuffix(BOUND_SUFFIX) + "bound"] = np.where(
                values, "compute", "memory")
        columns[key] = values
    return pl.DataFrame({key: np.broadcast_to(value, batches.shape) for key, value in
                         columns.items()})


def export_explorer(figures: ExplorerFigures, output_dir: Path) -> list[Path]:
    """The catalogue's roofline and throughput-vs-batch charts of the Explorer's
    configuration: two HTML files."""
    report = figures.report
    frame = explorer_frame(figures)
    stem = "-".join(_slug(part) for part in (
        "explorer", figures.settings.gpu, figures.settings.model,
        f"b{report['batch']}", f"s{report['context']}"))
    return [_save_html(chart, _unique_path(output_dir, f"{stem}-{name}"))
            for name, chart in (("roofline", roofline_chart(frame)),
                                ("throughput", throughput_vs_batch_chart(frame)))]


def export_results(rows: pl.DataFrame, *, x: str, y: str, colour: str | None, log_x: bool,
                   log_y: bool, title: str, output_dir: Path) -> Path:
    """A scatter of metric `y` against axis `x`, coloured by `colour`, of the rows the
    Results view plots (already filtered and sampled to a size a browser handles)."""
    columns = list(dict.fromkeys(c for c in (x, y, colour) if c))
    data = rows.select(columns).with_columns(
        pl.col(pl.Categorical).cast(pl.String))  # how sweep results store names
    encoding = {
        "x": alt.X(f"{x}:Q", scale=alt.Scale(type="log" if log_x else "linear"), title=x),
        "y": alt.Y(f"{y}:Q", scale=alt.Scale(type="log" if log_y else "linear"), title=y),
        "tooltip": columns,
    }
    chart = alt.Chart(data).mark_circle(size=40)
    if colour:
        selection = alt.selection_point(fields=[colour], bind="legend")
        encoding["color"] = alt.Color(f"{colour}:N", title=colour)
        encoding["opacity"] = alt.when(selection).then(alt.value(0.9)).otherwise(
            alt.value(0.1))
        chart = chart.add_params(selection)
    chart = chart.encode(**encoding).properties(name="points", title=title, width=640,
                                                height=400)
    stem = "-".join(_slug(part) for part in ("results", y, "vs", x) + ((colour,) if colour
                                                                         else ()))
    return _save_html(chart, _unique_path(output_dir, stem))
