"""Chart files: standalone HTML with the Vega JavaScript inlined, PNG and SVG through
vl-convert, and the folder's dashboard (`charts/index.html`).

Building vl-convert's JavaScript bundle costs seconds (about 3 s on a 2-core machine), so
it is built once per process and kept on disk per vl-convert and Vega-Lite version
(`bundle_cache_dir`); every later render, in this process or the next, reads it back.
The spec is built once per chart, without JSON-schema validation (about half of
altair's save: the tests validate every spec the catalogue builds), and its data frames
are not converted and hashed row by row: each is a named dataset (a step chart's
`VegaChart` names them; an Altair chart's through `named_datasets`) that polars writes
as CSV text. The HTML page is that text in the template with the cached bundle. PNG and
SVG go through vl-convert's one shared converter, from the spec reduced to what the page
first shows (`default_rows`: rows a menu hides cost the converter time, and a picture
has no menus). vl-convert is imported only when a chart is written, altair only for an
Altair chart (the serving charts).
"""

from __future__ import annotations

import contextlib
import functools
import html
import io
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rooftui.core.errors import SpecError
from rooftui.sweeps.chart_table import Names, Table
from rooftui.sweeps.output_files import atomic_path, write_text_atomic
from rooftui.sweeps.table_text import CodedText, csv_text
from rooftui.sweeps.vega_spec import VEGA_LITE_VERSION, VegaChart

if TYPE_CHECKING:
    import altair as alt
    import polars as pl

# Save as PNG/SVG from the page; no "open in the Vega editor" link (it needs the web).
EMBED_OPTIONS = {"renderer": "svg",
                 "actions": {"export": True, "source": False, "compiled": False,
                             "editor": False}}
PNG_SCALE = 2.0
DASHBOARD = "index.html"

# altair's inline template; `{{ name }}` fields are filled in one pass (`page_text`)
PAGE = """\
<!DOCTYPE html>
<html>
<head>
  <meta charset="UTF-8">
  <style>
    #{{ output_div }}.vega-embed { width: 100%; display: flex; }
    #{{ output_div }}.vega-embed details,
    #{{ output_div }}.vega-embed details summary { position: relative; }
    .vega-bindings { font: 12px sans-serif; }
    .vega-bind { display: inline-block; margin-right: 1em; }
  </style>
  <script type="text/javascript">
    // vega-embed.js bundle with Vega-Lite version v{{ vegalite_version }}
    {{ vegaembed_script }}
  </script>
</head>
<body>
<div class="vega-visualization" id="{{ output_div }}"></div>
<script type="text/javascript">
  const spec = {{ spec }};
  const embedOpt = {{ embed_options }};
  vegaEmbed('#{{ output_div }}', spec, embedOpt).catch(console.error);
</script>
</body>
</html>
"""


def bundle_cache_dir() -> Path:
    """Where the bundle is kept: `$ROOFTUI_CACHE_DIR`, else the user's cache folder."""
    if os.environ.get("ROOFTUI_CACHE_DIR"):
        return Path(os.environ["ROOFTUI_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rooftui"


def _vega_lite_version() -> str:
    """vl-convert's name of the Vega-Lite version the specs are written for ("v6_4")."""
    return "_".join(VEGA_LITE_VERSION.split(".")[:2])


def _vl_convert_release() -> str:
    """The installed vl-convert's release, from the name of its `dist-info` folder
    beside the package, so that reading the cached bundle loads no vl-convert (its
    extension costs ~20 ms); else from the package itself."""
    import importlib.util

    spec = importlib.util.find_spec("vl_convert")
    if spec is not None and spec.origin:
        found = sorted(Path(spec.origin).parents[1].glob("vl_convert_python-*.dist-info"))
        if len(found) == 1:
            return found[0].name.removeprefix("vl_convert_python-").removesuffix(".dist-info")
    import vl_convert

    return vl_convert.__version__


@functools.cache
def vega_bundle() -> str:
    """vl-convert's vega-embed bundle: read from the disk cache, else built and cached
    (atomically; a cache that cannot be written only costs the next process the build)."""
    version = _vega_lite_version()
    path = bundle_cache_dir() / f"vega-bundle-vl-convert-{_vl_convert_release()}-{version}.js"
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeError):
        pass
    import vl_convert

    bundle = vl_convert.javascript_bundle(vl_version=version)
    with contextlib.suppress(OSError, SpecError):
        write_text_atomic(path, bundle)
    return bundle


def warm_up() -> None:
    """Read the bundle (building it, with vl-convert, on a cache miss), so that a run
    rendering its charts at the end pays for it while its shards are computed: called
    in the one thread that imports for the charts (`chart_rows.RowCollector`, once the
    workers are forked: two threads importing one package could meet a circular
    import). A failure here is left to the render, which says what went wrong."""
    with contextlib.suppress(Exception):
        vega_bundle()


def page_text(spec_json: str) -> str:
    """The standalone page of a chart whose Vega-Lite spec is `spec_json`."""
    fields = {"output_div": "vis", "vegalite_version": _vega_lite_version().lstrip("v"),
              "vegaembed_script": vega_bundle(), "spec": spec_json,
              "embed_options": json.dumps(EMBED_OPTIONS)}
    return re.sub(r"{{ (\w+) }}", lambda field: fields[field[1]], PAGE)


def write_page(path: Path, spec_json: str) -> None:
    path.write_text(page_text(spec_json), encoding="utf-8")


@contextlib.contextmanager
def named_datasets():
    """Within: each polars frame a chart draws becomes a named dataset ("rows-N") when
    the chart is turned into a spec, rather than rows altair converts, checks and hashes
    one by one; yields the frames by name (see `spec_text`)."""
    import altair as alt
    import polars as pl

    frames: dict[str, pl.DataFrame] = {}
    names: dict[int, str] = {}  # the frames stay referenced, so their ids stay unique

    def name_frame(data):
        if not isinstance(data, pl.DataFrame):
            return alt.utils.data.to_values(data)
        name = names.setdefault(id(data), f"rows-{len(names)}")
        frames[name] = data
        return {"name": name}

    alt.data_transformers.register("rooftui-named", name_frame)
    with alt.data_transformers.enable("rooftui-named"):
        yield frames


def chart_spec(chart: alt.TopLevelMixin | VegaChart
               ) -> tuple[dict, dict[str, pl.DataFrame | Table]]:
    """The chart's Vega-Lite spec (unvalidated) and the frames its named datasets hold
    (a step chart is one already: `vega_spec.VegaChart`)."""
    if isinstance(chart, VegaChart):
        return chart.spec_dict(), chart.frames
    with named_datasets() as frames:
        spec = chart.to_dict(validate=False)
    return spec, frames


def spec_text(spec: dict, frames: Mapping[str, pl.DataFrame | Table]) -> str:
    """`spec` as strict JSON with `frames` as its datasets, safe inside a <script>
    element. Each frame is CSV text (a value that is not finite is empty, read as
    null), its columns' types given as the data's `format.parse`: a third of the bytes
    of rows as JSON objects, which repeat every name in every row. A step chart's frames
    are `chart_table.Table`s (written by `table_text.csv_text`, as polars writes them),
    a serving chart's polars frames (written by polars)."""
    parse = {name: _parse_formats(frame) for name, frame in frames.items()}
    _name_formats(spec, parse)
    own = spec.get("datasets", {})
    head = json.dumps({k: v for k, v in spec.items() if k != "datasets"}, allow_nan=False)
    datasets = [f"{json.dumps(name)}: {json.dumps(rows, allow_nan=False)}"
                for name, rows in own.items()]
    for name, frame in frames.items():
        datasets.append(f"{json.dumps(name)}: {json.dumps(_csv(frame))}")
    text = f"{head[:-1]}, \"datasets\": {{{', '.join(datasets)}}}}}"  # a spec has $schema
    return text.replace("</", "<\\/")


def _parse_formats(frame: pl.DataFrame | Table) -> dict[str, str]:
    """The Vega `format.parse` of a frame's numeric and boolean columns."""
    if isinstance(frame, Table):
        kinds = {"f": "number", "i": "number", "u": "number", "b": "boolean"}
        return {column: kinds[frame.kind(column)] for column in frame.columns
                if frame.kind(column) in kinds}
    import polars as pl

    return {column: "boolean" if dtype == pl.Boolean else "number"
            for column, dtype in frame.schema.items() if dtype.is_numeric()
            or dtype == pl.Boolean}


def _csv(frame: pl.DataFrame | Table) -> str:
    """A frame as CSV text, its values that are not finite empty."""
    if isinstance(frame, Table):
        return csv_text({name: CodedText(values.codes, values.names)
                         if isinstance(values, Names)
                         else np.where(np.isfinite(values), values, np.nan)
                         if values.dtype.kind == "f" else values
                         for name, values in frame.data.items()})
    import polars as pl

    csv = io.BytesIO()  # one query a frame: its non-finite numbers emptied as written
    frame.lazy().with_columns(pl.when(pl.col(c).is_finite()).then(pl.col(c))
                              for c, dtype in frame.schema.items() if dtype.is_float()
                              ).sink_csv(csv)
    return csv.getvalue().decode()


def _name_formats(spec: Any, parse: Mapping[str, dict]) -> None:
    """Give every reference to a CSV dataset (`{"name": ...}`) its format."""
    if isinstance(spec, dict):
        data = spec.get("data")
        if isinstance(data, dict) and data.get("name") in parse:
            data["format"] = {"type": "csv", "parse": parse[data["name"]]}
        for value in spec.values():
            _name_formats(value, parse)
    elif isinstance(spec, list):
        for value in spec:
            _name_formats(value, parse)


def menu_choices(spec: Any) -> dict[str, Any]:
    """Each select menu of `spec` (a parameter `<axis>_choice` bound to options) and the
    value it opens on."""
    found = {}
    if isinstance(spec, dict):
        for param in spec.get("params", []):
            if (isinstance(param, dict) and str(param.get("name", "")).endswith("_choice")
                    and "options" in (param.get("bind") or {})):
                found[param["name"].removesuffix("_choice")] = param.get("value")
        for value in spec.values():
            found |= menu_choices(value)
    elif isinstance(spec, list):
        for value in spec:
            found |= menu_choices(value)
    return found


def default_rows(spec: dict, frames: Mapping[str, pl.DataFrame | Table]
                 ) -> dict[str, pl.DataFrame | Table]:
    """`frames` cut to the rows the page shows before any menu changes: every frame that
    holds a menu's axis keeps the rows at the menu's opening value (a menu opening on a
    value no row has, such as the roofline's "all", keeps them all)."""
    from rooftui.sweeps.chart_slices import OWN

    choices = menu_choices(spec)
    reduced = {}
    for name, frame in frames.items():
        for axis, value in choices.items():
            if value == OWN and f"{axis}_own" in frame.columns:
                frame = _rows_where(frame, f"{axis}_own", True, always=True)
            elif axis in frame.columns and isinstance(value, str) == _is_text(frame, axis):
                frame = _rows_where(frame, axis, value)
        reduced[name] = frame
    return reduced


def _is_text(frame: pl.DataFrame | Table, column: str) -> bool:
    if isinstance(frame, Table):
        return frame.kind(column) == "O"
    import polars as pl

    return frame.schema[column] == pl.String


def _rows_where(frame: pl.DataFrame | Table, column: str, value: Any, *,
                always: bool = False) -> pl.DataFrame | Table:
    """The rows whose `column` equals `value`; all of them when none does (a menu's
    value no row has) unless `always`."""
    same = frame[column] == value
    return frame.filter(same) if always or same.any() else frame


def write_chart_files(chart: alt.TopLevelMixin, paths: Sequence[Path]) -> None:
    """Each of `paths` (.html, .png, .svg), through a temporary name (`atomic_path`)."""
    spec, frames = chart_spec(chart)
    picture = None
    for path in paths:
        extension = path.suffix.removeprefix(".")
        with atomic_path(path) as temporary:
            if extension == "html":
                write_page(temporary, spec_text(spec, frames))
                continue
            if picture is None:
                picture = spec_text(spec, default_rows(spec, frames))
            _convert(picture, extension, temporary)


def _convert(spec_json: str, extension: str, target: Path) -> None:
    import vl_convert

    version = _vega_lite_version()
    if extension == "png":
        target.write_bytes(vl_convert.vegalite_to_png(spec_json, vl_version=version,
                                                      scale=PNG_SCALE))
    else:
        target.write_text(vl_convert.vegalite_to_svg(spec_json, vl_version=version),
                          encoding="utf-8")


# --- the dashboard ------------------------------------------------------------------------

def _axis_summary(dimension: Mapping[str, Sequence]) -> str:
    parts = []
    for axis, values in dimension.items():
        shown = [str(v) for v in values]
        listed = ", ".join(shown) if len(shown) <= 8 else (
            f"{shown[0]} … {shown[-1]} ({len(shown)} values)")
        parts.append(f"{axis.removesuffix('_assumed')}: {listed}")
    return " ↔ ".join(parts)  # zipped axes move together


def write_dashboard(charts_dir: Path, manifest: Mapping[str, Any],
                    dimensions: Sequence[Mapping[str, Sequence]] | None,
                    titles: Mapping[str, str]) -> Path:
    """`charts/index.html`: the grid's summary and a link to every chart of the folder
    (with its PNG when there is one). Plain HTML, no script: it opens anywhere offline."""
    spec = manifest.get("spec") if isinstance(manifest.get("spec"), dict) else {}
    facts = [("grid", manifest.get("name")), ("kind", manifest.get("kind")),
             ("profile", spec.get("profile")),
             ("rows", f"{manifest['rows']:,}" if isinstance(manifest.get("rows"), int)
              else None),
             ("points", f"{manifest['points']:,}" if isinstance(manifest.get("points"), int)
              else None),
             ("spec hash", str(manifest.get("spec_hash") or "")[:12] or None),
             ("created", manifest.get("finished_at") or manifest.get("started_at")),
             ("git commit", str(manifest.get("git_commit") or "")[:12] or None)]
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
                   for k, v in facts if v not in (None, ""))
    axes = "".join(f"<li>{html.escape(_axis_summary(d))}</li>" for d in dimensions or [])
    cards = []
    for page in sorted(charts_dir.glob("*.html")):
        if page.name == DASHBOARD:
            continue
        name = page.stem
        image = page.with_suffix(".png")
        thumbnail = (f'<img src="{html.escape(image.name)}" alt="{html.escape(name)}">'
                     if image.exists() else "")
        title = html.escape(titles.get(name, name))
        cards.append(f'<a class="card" href="{html.escape(page.name)}"><h2>{title}</h2>'
                     f'<code>{html.escape(name)}</code>{thumbnail}</a>')
    description = html.escape(str(manifest.get("description") or ""))
    text = f"""<!DOCTYPE html>
<html>
<head>
<meta charset="UTF-8">
<title>{html.escape(str(manifest.get("name") or "sweep"))}: charts</title>
<style>
body {{ font: 14px sans-serif; margin: 2em; color: #222; }}
table th {{ text-align: left; padding-right: 1em; font-weight: 600; }}
.cards {{ display: flex; flex-wrap: wrap; gap: 1em; }}
.card {{ display: block; width: 300px; padding: .8em; border: 1px solid #ccc;
         border-radius: 6px; color: inherit; text-decoration: none; }}
.card:hover {{ border-color: #0072B2; }}
.card h2 {{ font-size: 15px; margin: 0 0 .3em; }}
.card img {{ width: 100%; margin-top: .5em; }}
</style>
</head>
<body>
<h1>{html.escape(str(manifest.get("name") or "sweep"))}</h1>
<p>{description}</p>
<table id="summary">{rows}</table>
<h3>Axes</h3>
<ul id="axes">{axes}</ul>
<h3>Charts</h3>
<div class="cards" id="charts">{"".join(cards)}</div>
</body>
</html>
"""
    return write_text_atomic(charts_dir / DASHBOARD, text)
