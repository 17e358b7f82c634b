"""`sweep chart DIR`: render a sweep's charts again from its result directory."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import click

from rooftui.sweeps import charts  # light: polars and altair load when a chart is made


def _catalogue() -> str:
    lines = [f"  {name:<21}{(function.__doc__ or '').split(chr(10))[0]}"
             for name, function in charts.CHARTS.items()]
    default = ", ".join(charts.DEFAULT_CHARTS)
    return "\b\nCharts (default set: " + default + "):\n" + "\n".join(lines)


@click.command(epilog=_catalogue())
@click.argument("result_dir", metavar="DIR", type=click.Path(path_type=Path))
@click.option("--only", multiple=True, metavar="NAME[,NAME...]",
              help="Render only these charts (repeat, or separate names with commas).")
@click.option("--png", is_flag=True, help="Also write each chart as PNG (2x scale).")
@click.option("--svg", is_flag=True, help="Also write each chart as SVG.")
@click.option("--json", "as_json", is_flag=True, help="Print the written paths as JSON.")
def chart(result_dir, only, png, svg, as_json):
    """Render the charts of a `sweep run` result directory into DIR/charts/.

    By default the charts the grid names in `[charts]`, else the default catalogue,
    and DIR/charts/index.html, a dashboard linking every chart with the grid's summary.
    Each HTML file embeds the Vega JavaScript and opens offline; a chart holds a
    bounded slice of the results (shown axes thinned; GPU, model and every held axis as
    menus opening on a representative value, group size on each model's own, one menu
    changed at a time; what the row budget cannot offer is held and named in the
    subtitle), so no file grows past a few MB whatever the grid size. PNG and SVG show
    what the page opens on. Points that do not fit in GPU memory are hollow or faded, with the reason in
    the tooltip. The Vega bundle is built once and cached under ~/.cache/rooftui
    ($ROOFTUI_CACHE_DIR, else $XDG_CACHE_HOME/rooftui).

    \b
    Examples:
      sweep chart outputs/grid-0123456789ab
      sweep chart outputs/grid-0123456789ab --only roofline --png --svg
    """
    from rooftui.sweeps.output_files import file_error
    from rooftui.sweeps.results import SkippedShardsWarning

    names = [name.strip() for entry in only for name in entry.split(",") if name.strip()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SkippedShardsWarning)
        try:
            written = charts.render_charts(result_dir, only=names or None, png=png, svg=svg)
        except OSError as error:  # one that no writer turned into a SpecError
            raise file_error(error, error.filename or result_dir, "use") from None
    for warning in caught:  # the shards the charts left out: one line each
        if isinstance(warning.message, SkippedShardsWarning):
            sys.stderr.write(f"sweep chart: warning: {warning.message}\n")
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename,
                                 warning.lineno)
    if as_json:
        click.echo(json.dumps([str(path) for path in written], indent=2))
    else:
        for path in written:
            click.echo(str(path))
