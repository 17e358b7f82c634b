"""`sweep validate`: the model's error against every measured dataset in a folder."""

from __future__ import annotations

from pathlib import Path

import click

from rooftui.core.assumptions import load_profile
from rooftui.core.errors import SpecError
from rooftui.sweeps.cli.options import JSON_NULLS, json_text


@click.command()
@click.option("--measured", "measured", required=True, multiple=True, metavar="DIR|FILE",
              type=click.Path(exists=True, path_type=Path),
              help="A folder of measured CSVs (the published datasets' formats, listed in "
                   "docs/validation.md, and the calibration format), or files; repeat.")
@click.option("--profile", metavar="NAME|PATH",
              help="Also score this profile (e.g. a calibrated one) on the validation halves.")
@click.option("--gpu", metavar="NAME|PATH", help="Only the datasets measured on this GPU.")
@click.option("--chart", "chart_path", type=click.Path(path_type=Path), metavar="FILE.html",
              help="Write the predicted-vs-measured chart (log-log, one colour per "
                   "dataset) as offline HTML.")
@click.option("--markdown", is_flag=True,
              help="Print the table as Markdown, with each dataset's source.")
@click.option("--json", "as_json", is_flag=True, help=f"Print one JSON object. {JSON_NULLS}")
def validate(measured, profile, gpu, chart_path, markdown, as_json):
    """Run the model against measured datasets: MAPE, worst error and bias per dataset.

    Each dataset is split in two halves (alternate configurations sorted by size). The
    table shows the validation half's error for the ideal roofline, for a profile fitted
    on the calibration half of the same dataset, and for --profile when given. Errors
    are predicted / measured - 1: positive means the model is slower than the hardware.

    \b
    Examples:
      sweep validate --measured MEASURED_DIR
      sweep validate --measured MEASURED_DIR --profile h100-calibrated \\
          --gpu h100-sxm --chart validation.html
    """
    from rooftui.sweeps.measured import read_measured_paths
    from rooftui.sweeps.validation import results_table, write_chart
    from rooftui.sweeps.validation import validate as run_validation

    assumptions = load_profile(profile) if profile else None
    results, skipped = run_validation(read_measured_paths(list(measured)), assumptions, gpu)
    if not results:
        raise click.UsageError("no dataset could be validated"
                               + (f" ({'; '.join(skipped)})" if skipped else ""))
    table = results_table(results, profile)
    try:
        written = write_chart(results, chart_path) if chart_path else []
    except SpecError as error:
        raise SpecError(f"--chart: {error}") from None
    if as_json:
        click.echo(json_text({"datasets": table, "skipped": skipped,
                               "chart": [str(p) for p in written]}))
        return
    if markdown:
        click.echo(render_markdown(table, profile, skipped))
        return
    click.echo(render_table(table, profile))
    if skipped:
        click.echo("\nleft out:")
        for line in skipped:
            click.echo(f"  {line}")
    for path in written:
        click.echo(f"\nchart: {path}")


def _errors(errors: dict) -> str:
    return (f"{100 * errors['mape']:6.1f} % {100 * errors['worst']:+8.1f} % "
            f"{100 * errors['bias']:+7.1f} %")


def render_table(table: list[dict], profile: str | None) -> str:
    """The human table: one line per dataset, errors on its validation half."""
    width = max(len(row["dataset"]) for row in table)
    groups = ["ideal roofline", "fitted on other half"] + ([f"profile {profile}"] if profile
                                                           else [])
    header = f"{'dataset':<{width}} {'rows':>5}  " + "  ".join(
        f"{g:^27}" for g in groups)
    sub = f"{'':<{width}} {'':>5}  " + "  ".join(
        f"{'MAPE':>8} {'worst':>10} {'bias':>9}" for _ in groups)
    lines = [header, sub]
    for row in table:
        cells = [_errors(row["ideal"]), _errors(row["fitted_on_other_half"])]
        if "profile" in row:
            cells.append(_errors(row["profile"]))
        lines.append(f"{row['dataset']:<{width}} {row['validation_rows']:>5}  "
                     + "  ".join(cells))
    lines.append("\nerrors on each dataset's validation half: predicted / measured - 1 "
                 "(positive: the model is slower than the hardware)")
    return "\n".join(lines)


def _percent(value: float) -> str:
    return f"{100 * value:+.1f} %"


def render_markdown(table: list[dict], profile: str | None, skipped: list[str]) -> str:
    """The table in Markdown: MAPE (worst, bias) per prediction, then the sources."""
    groups = ["ideal roofline", "fitted on the other half"] + (
        [f"profile `{profile}`"] if profile else [])
    lines = ["| dataset | kind | rows (cal./val.) | " + " | ".join(groups) + " |",
             "|---|---|---|" + "---|" * len(groups)]
    for row in table:
        cells = [row["ideal"], row["fitted_on_other_half"]] + (
            [row["profile"]] if "profile" in row else [])
        lines.append(
            f"| {row['dataset']} | {', '.join(row['kinds'])} | "
            f"{row['calibration_rows']} / {row['validation_rows']} | "
            + " | ".join(f"{100 * c['mape']:.1f} % ({_percent(c['worst'])}, "
                         f"{_percent(c['bias'])})" for c in cells) + " |")
    lines += ["", "Each cell: MAPE on the validation half (worst error, bias); error = "
              "predicted / measured − 1, negative when the model is faster than the "
              "hardware.", "", "Sources:", ""]
    for source in sorted({row["source"] for row in table}):
        names = [row["dataset"] for row in table if row["source"] == source]
        lines.append(f"- {source}: {', '.join(names)}")
    if skipped:
        lines += ["", "Left out:", ""] + [f"- {line}" for line in skipped]
    return "\n".join(lines)
