"""`sweep chart DIR`: render a sweep's charts again from its result directory."""

from __future__ import annotations

import json
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

    By default the charts the grid names in `[charts]`, else the default catalogue.
    Each HTML file embeds the Vega JavaScript and opens offline; a chart holds a
    bounded slice of the results (shown axes thinned, GPU and model as dropdowns, the
    other axes held at a representative value its subtitle names), so no file grows
    past a few MB whatever the grid size.

    \b
    Examples:
      sweep chart outputs/grid-0123456789ab
      sweep chart outputs/grid-0123456789ab --only roofline --png --svg
    """
    names = [name.strip() for entry in only for name in entry.split(",") if name.strip()]
    written = charts.render_charts(result_dir, only=names or None, png=png, svg=svg)
    if as_json:
        click.echo(json.dumps([str(path) for path in written], indent=2))
    else:
        for path in written:
            click.echo(str(path))
