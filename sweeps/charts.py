"""The chart catalogue: Vega-Lite views of a sweep's results, as standalone HTML, PNG and
SVG.

Each chart function takes the results (a polars DataFrame or LazyFrame with the columns
`sweep run` writes: the axes, every step metric, peaks; a step chart also the rows
`sweep run` cut, a `chart_table.Table`) and returns a chart (the step charts a
`vega_spec.VegaChart`, their spec built as plain dicts from numpy columns; the serving
charts an Altair chart); the
registry `CHARTS` maps a name to it and `render_charts` writes a result directory's charts
into its `charts/` folder. The HTML embeds the Vega JavaScript (vl-convert's bundle), so
a chart opens from a disk or an e-mail with no network at all.

Bounded whatever the grid size: a chart never draws the raw rows. It takes a
*slice* (`take_slice`): each axis it shows keeps at most a fixed number of values (the
first, the last and others evenly spaced, on a log scale for numbers spanning more than
a decade), GPU and model become dropdowns, and every other axis is held at one
representative value:

- group size and KV heads (they change what a model is): each model's own value (from
  the manifest's specs, else the shipped spec); the median only for a model whose own
  value the grid lacks, or when the chart shows one of them;
- batch and context: the median of the grid's values (the lower one of an even count),
  and a chart that shows the axis keeps that value among those it draws;
- prefill, prefill context and the memory reserve: the smallest (a pure decode step
  when the grid has one);
- the assumed mfu and mbu: the largest;
- GPUs per replica (tp) and speculated tokens: the smallest (one GPU, no speculation);
  the acceptance rate: the largest;
- dtypes: bf16 when the grid has it, else the first (the experts' format: the first);
  GPU, model and draft model: the grid's first (dropdowns list names in the grid's order
  and open on the first).

Only the grid's own axes are held (the manifest's dimensions): a column that follows
from the others (KV heads from model and group size, a model's own dtype, the partner of
a zipped axis) keeps its matching value, and each held axis is one equality filter the
parquet reader applies as it scans, so a chart of a 10-million-point grid reads little.
Without the manifest every input column is held, choosing within each combination of
the shown axes. `fixed={"context": 8192}` (or `[charts] fixed` in the grid) picks other
values. A chart names the held axes it offers as menus (`menus=`: for step charts
context, KV dtype, mfu, prefill, group size, compute dtype with its zipped weights, TP;
for the latency chart also the SLOs): each becomes a select box bound to a Vega parameter,
opening on its representative (group size on "own", each model's own). Their rows are a
star around the opening values, not the product of the menus: every other value of one
menu with all the others at their opening, drawn over the chart's `menu_over` axes (the
rest of its shown axes at their opening value), so a menu costs its values times the
shown rows and any folder keeps within `MAX_ROWS`: past it the widest menu is thinned
(its opening value kept), then the last menus stay held. A page therefore shows one
menu away from its opening value at a time (the subtitle says so). Each chart's first
subtitle line names the model, GPU, GPUs per replica, profile, workload and SLOs it
draws; the next lists every held value and every menu.

Feasibility: a point or bar whose weights and KV do not fit the GPU is drawn hollow or
faded, its reason in the tooltip ("weights 141 GB > 80 GB: needs TP ≥ 2", "KV 550 GB >
64 GB free"), and it never sets an axis: log axes span the roofs and what fits, linear
ones cut what does not fit to the largest value that does (`chart_marks.capped`).

Size: a slice holds at most `MAX_ROWS` rows (`_fit` cuts the shown axes until the
product of their counts fits), each of at most ten short fields with metrics rounded to
4 significant digits: about 160 bytes of JSON a row with the shipped names, so about
2.5 MB of data beside the 0.9 MB of Vega JavaScript (names four times as long would
still fit in 5 MB). A chart stores a frame once however many layers draw it. A
slice may exceed Altair's default 5,000-row guard: `save_chart` lifts it for the serving
charts (as `Chart.save` does); anything else serialising one should wrap the call in
`alt.data_transformers.disable_max_rows()`.

The catalogue lives in `chart_slices` (the slice rules), `chart_marks` (pieces every chart
shares), `charts_step` and `charts_serving` (the chart families) and `chart_files` (HTML,
PNG, SVG and the dashboard); this module holds the registry, the `[charts]` settings and
`render_charts`, and names the public parts of the others. polars and altair are imported
inside the functions that use them (altair only by the serving charts: `sweep run` of a
step grid never imports it), so importing this module stays light for the CLI and the
TUI. `sweep run` builds its charts from the rows it cut from each shard as the shard
landed (`chart_rows`: the slices' filters follow from the grid's axes, so they are known
before any row), in numpy, never importing polars; `sweep chart DIR` slices the folder
with polars and builds the same charts from what it collects.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rooftui.core.errors import SpecError
from rooftui.sweeps.chart_files import (
    PNG_SCALE,
    write_chart_files,
    write_dashboard,
)
from rooftui.sweeps.chart_slices import (
    AXES,
    AXIS_COLUMNS,
    CUT_LAST,
    LABELS,
    MAX_ROWS,
    SERVING_AXES,
    ChartSlice,
    _fit,
    take_slice,
)
from rooftui.sweeps.charts_serving import (
    _with_best,
    itl_spike_chart,
    latency_vs_rate_chart,
    occupancy_vs_batch_chart,
    pareto_frontier_chart,
    rate_heatmap_chart,
    ttft_vs_cache_capacity_chart,
)
from rooftui.sweeps.charts_step import (
    attention_share_chart,
    gpu_comparison_chart,
    intensity_ceiling_chart,
    roofline_chart,
    throughput_vs_batch_chart,
)

if TYPE_CHECKING:
    import altair as alt

    from rooftui.sweeps.chart_rows import ChartRows

__all__ = ["AXES", "AXIS_COLUMNS", "CHARTS", "CUT_LAST", "DEFAULT_CHARTS",
           "KIND_CHARTS", "LABELS", "MAX_ROWS", "PNG_SCALE", "SERVING_AXES", "ChartSettings",
           "ChartSlice", "_fit", "_with_best", "attention_share_chart", "chart_paths",
           "chart_settings", "check_chart_names", "declared_axes", "gpu_comparison_chart",
           "intensity_ceiling_chart", "itl_spike_chart", "latency_vs_rate_chart",
           "occupancy_vs_batch_chart", "pareto_frontier_chart", "rate_heatmap_chart",
           "render_charts", "roofline_chart", "save_chart", "stale_charts", "take_slice",
           "throughput_vs_batch_chart", "ttft_vs_cache_capacity_chart"]
CHART_KEYS = {"names", "fixed", "png", "svg"}


CHARTS: dict[str, Callable[..., Any]] = {
    "roofline": roofline_chart,
    "throughput_vs_batch": throughput_vs_batch_chart,
    "intensity_ceiling": intensity_ceiling_chart,
    "attention_share": attention_share_chart,
    "gpu_comparison": gpu_comparison_chart,
    "occupancy_vs_batch": occupancy_vs_batch_chart,
    "latency_vs_rate": latency_vs_rate_chart,
    "itl_spike": itl_spike_chart,
    "pareto_frontier": pareto_frontier_chart,
    "rate_heatmap": rate_heatmap_chart,
    "ttft_vs_cache_capacity": ttft_vs_cache_capacity_chart,
}
DEFAULT_CHARTS = ("roofline", "throughput_vs_batch", "intensity_ceiling", "attention_share",
                  "gpu_comparison")
KIND_CHARTS = {"step": DEFAULT_CHARTS,  # what a grid of each kind renders by default
               "simulate": ("occupancy_vs_batch", "latency_vs_rate", "itl_spike"),
               "optimize": ("rate_heatmap", "pareto_frontier")}


def chart_paths(stem: Path, *, png: bool = False, svg: bool = False) -> list[Path]:
    """The files `save_chart` writes for `stem`."""
    return [stem.with_name(f"{stem.name}.{extension}")
            for extension, wanted in (("html", True), ("png", png), ("svg", svg)) if wanted]


def save_chart(chart: alt.TopLevelMixin, stem: Path, *, png: bool = False,
               svg: bool = False) -> list[Path]:
    """Write `stem`.html (self-contained, offline) and optionally .png and .svg; each file
    goes to a temporary name first and is renamed into place (`atomic_path`), so none is
    ever half-written and a file-system failure is one line naming the file."""
    paths = chart_paths(stem, png=png, svg=svg)
    write_chart_files(chart, paths)
    return paths


@dataclass(frozen=True)
class ChartSettings:
    """The grid's `[charts]` table: `names` to render (default: `DEFAULT_CHARTS`),
    `fixed` values (`axis = value`, axes as the grid names them) for the axes a chart
    would otherwise hold at their representative, and `png` / `svg` exports."""

    names: tuple[str, ...] = DEFAULT_CHARTS
    fixed: dict[str, Any] = field(default_factory=dict)
    png: bool = False
    svg: bool = False


def chart_settings(table: Any, where: str = "[charts]", kind: str = "step") -> ChartSettings:
    """Validate a grid's `[charts]` table; a runner can call it before any work starts.
    `kind` (the grid's) sets the default charts and the axes `fixed` may name."""
    defaults = KIND_CHARTS.get(kind, DEFAULT_CHARTS)
    if not table:
        return ChartSettings(names=defaults)
    if not isinstance(table, dict):
        raise SpecError(f"{where} must be a table with keys {', '.join(sorted(CHART_KEYS))}")
    unknown = sorted(set(table) - CHART_KEYS)
    if unknown:
        raise SpecError(f"{where}: unknown key {unknown[0]!r}; expected "
                        f"{', '.join(sorted(CHART_KEYS))}")
    names = table.get("names", list(defaults))
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise SpecError(f"{where} names must be a list of chart names")
    check_chart_names(names, f"{where} names: ")
    fixed = table.get("fixed", {})
    columns = {AXIS_COLUMNS.get(key, key): value for key, value in fixed.items()} if (
        isinstance(fixed, dict)) else None
    axes = AXES if kind == "step" else SERVING_AXES
    if columns is None or set(columns) - set(axes):
        grid_names = [a.removesuffix("_assumed") for a in axes]
        raise SpecError(f"{where} fixed must be a table of axis = value, with axes from "
                        f"{', '.join(grid_names)}")
    for key in ("png", "svg"):
        if not isinstance(table.get(key, False), bool):
            raise SpecError(f"{where} {key} must be true or false")
    return ChartSettings(names=tuple(names), fixed=columns, png=table.get("png", False),
                         svg=table.get("svg", False))


def check_chart_names(names: Sequence[str], where: str = "") -> None:
    import difflib

    for name in names:
        if name not in CHARTS:
            close = difflib.get_close_matches(name, CHARTS, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise SpecError(f"{where}unknown chart {name!r}: expected one of "
                            f"{', '.join(CHARTS)}{hint}")


def declared_axes(manifest: dict) -> list[dict[str, list]] | None:
    """The dimensions of the grid a manifest records, each mapping its axis columns
    (several when zipped) to their values, from its canonical `dimensions` (lists of
    `{"axis": name, "values": [...]}`); None when it records none."""
    spec = manifest.get("spec")
    dimensions = spec.get("dimensions") if isinstance(spec, dict) else None
    if not isinstance(dimensions, list):
        return None
    return [{AXIS_COLUMNS.get(axis["axis"], axis["axis"]): list(axis["values"])
             for axis in dimension if isinstance(axis, dict)
             and isinstance(axis.get("axis"), str) and isinstance(axis.get("values"), list)}
            for dimension in dimensions if isinstance(dimension, list)]


def chart_plan(result_dir: Path, names, only, png: bool, svg: bool):
    """(manifest, settings, {chart name: its files}) of a render."""
    from rooftui.sweeps.results import read_manifest

    manifest = read_manifest(result_dir)
    if not isinstance(manifest, dict):
        raise SpecError(f"{result_dir}: manifest.json is not an object of keys")
    table = manifest.get("charts") if names is None or not isinstance(names, Mapping) else names
    settings = chart_settings(dict(table or {}) if isinstance(table, dict) else table,
                              f"{result_dir}: [charts]", kind=manifest.get("kind", "step"))
    if names is not None and not isinstance(names, Mapping):
        settings = replace(settings, names=tuple(names))
    selected = list(only or settings.names)
    check_chart_names(selected)
    files = {name: chart_paths(result_dir / "charts" / name, png=png or settings.png,
                               svg=svg or settings.svg) for name in dict.fromkeys(selected)}
    return manifest, settings, files


def stale_charts(out_dir: Path | str, names: Sequence[str] | Mapping | None = None
                 ) -> list[str]:
    """The charts `render_charts(out_dir, names)` would write whose files are missing or
    older than the newest shard: what a rerun renders (a kill during rendering, or data
    recomputed since, leaves them so)."""
    result_dir = Path(out_dir)
    return _stale(result_dir, chart_plan(result_dir, names, None, False, False)[2])


def _stale(result_dir: Path, files: Mapping[str, list[Path]]) -> list[str]:
    def modified(path: Path) -> int | None:
        try:
            return path.stat().st_mtime_ns
        except OSError:
            return None

    newest = max(filter(None, map(modified, (result_dir / "points").glob("shard-*.parquet"))),
                 default=0)
    return [name for name, paths in files.items()
            if not all((modified(path) or -1) >= newest for path in paths)]


def render_charts(out_dir: Path | str, names: Sequence[str] | Mapping | None = None, *,
                  only: Sequence[str] | None = None, png: bool = False,
                  svg: bool = False, stale_only: bool = False,
                  rows: ChartRows | None = None) -> list[Path]:
    """Render a result directory's charts into `out_dir/charts/`; return the files written.

    `names`: chart names, or a whole `[charts]` table; default: the manifest's `[charts]`
    (else `DEFAULT_CHARTS`). `only` renders just those (any catalogue name). PNG and SVG
    when asked here or in `[charts]`. `stale_only`: only those `stale_charts` names.
    With any chart written, `charts/index.html` (the dashboard: the grid's summary and
    a link to every chart of the folder) is rewritten and listed last.
    One process renders a folder's charts at a time (its charts claim), and it clears
    the temporary files a killed renderer left. `rows`: the rows the charts it names
    draw, cut from the shards as they were written (`chart_rows`), which those charts
    are built from instead of the folder.
    """
    import contextlib
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from rooftui.sweeps.forked_work import map_split
    from rooftui.sweeps.output_files import make_folder
    from rooftui.sweeps.results import scan_results
    from rooftui.sweeps.shard_files import CHARTS_CLAIM, claim
    from rooftui.sweeps.vega_spec import VegaChart

    result_dir = Path(out_dir)
    manifest, settings, files = chart_plan(result_dir, names, only, png, svg)
    cut = rows.charts if rows is not None else ()
    folder = scan_results(result_dir) if rows is None else None
    charts_dir = make_folder(result_dir / "charts")
    axes = declared_axes(manifest)
    written = []
    with claim(result_dir / "points", CHARTS_CLAIM):
        for leftover in charts_dir.glob(".*.tmp-*"):
            leftover.unlink(missing_ok=True)
        stale = set(_stale(result_dir, files) if stale_only else files)
        todo = [name for name in files if name in stale]
        if rows is not None and set(todo) - set(cut):  # only what is drawn reads the folder
            folder = scan_results(result_dir)
        if set(todo) & set(cut):  # each row's memory note once, not once per chart
            from rooftui.sweeps.chart_marks import with_memory_note

            rows = replace(rows, table=with_memory_note(rows.table, manifest))

        # altair's data transformers and vl-convert's converter are the process's own:
        # an Altair chart or a picture is saved by one thread at a time
        one_at_a_time = threading.Lock()

        def render(name: str) -> list[Path]:
            frame = rows.table if name in cut else folder
            chart = CHARTS[name](frame, fixed=settings.fixed, axes=axes, grid=manifest)
            extensions = {path.suffix for path in files[name]}
            page_only = isinstance(chart, VegaChart) and extensions == {".html"}
            with contextlib.nullcontext() if page_only else one_at_a_time:
                return save_chart(chart, charts_dir / name, png=".png" in extensions,
                                  svg=".svg" in extensions)

        if rows is not None and set(todo) <= set(cut) and all(
                path.suffix == ".html" for name in todo for path in files[name]):
            # pages from the rows in numpy (the GIL held): half in a forked child, on the
            # core the run's workers have left
            for paths in map_split(lambda name: [str(p) for p in render(name)], todo):
                written += [Path(path) for path in paths]
        else:
            # two charts at once: one's parquet scan and CSV text (polars, no GIL) run
            # while the other builds its spec
            with ThreadPoolExecutor(2) as pool:
                for paths in pool.map(render, todo):
                    written += paths
        if written:
            titles = {name: (function.__doc__ or name).split("\n")[0].rstrip(".")
                      for name, function in CHARTS.items()}
            written.append(write_dashboard(charts_dir, manifest, axes, titles))
    return written
