"""`sweep validate`: the model's error against every measured dataset in a folder."""

from __future__ import annotations

from pathlib import Path

import click

from rooftui.core.assumptions import load_profile
from rooftui.core.errors import SpecError
from rooftui.sweeps.cli.options import JSON_NULLS, json_text

HOLDOUT_CHOICES = ("halves", "dataset", "engine", "gpu")


@click.command()
@click.option("--measured", "measured", required=True, multiple=True, metavar="DIR|FILE",
              type=click.Path(exists=True, path_type=Path),
              help="A folder of measured CSVs (the published datasets' formats, listed in "
                   "docs/validation.md, and the calibration format), or files; repeat.")
@click.option("--profile", metavar="NAME|PATH",
              help="Also score this profile (e.g. a calibrated one) on the validation "
                   "halves; with --holdout, on every held-out group, with its interval's "
                   "coverage and the widening it would need.")
@click.option("--gpu", metavar="NAME|PATH", help="Only the datasets measured on this GPU.")
@click.option("--dataset", "datasets", multiple=True, metavar="TEXT",
              help="With --holdout: only datasets whose name contains TEXT "
                   "(case-insensitive); repeat.")
@click.option("--chart", "chart_path", type=click.Path(path_type=Path), metavar="FILE.html",
              help="Write the predicted-vs-measured chart (log-log, one colour per "
                   "dataset) as offline HTML.")
@click.option("--markdown", is_flag=True,
              help="Print the table as Markdown, with each dataset's source.")
@click.option("--holdout", type=click.Choice(HOLDOUT_CHOICES), default="halves",
              show_default=True,
              help="dataset, engine or gpu: fit on every other group's datasets of the same "
                   "kinds and score each group (out of sample); halves: fit each dataset's "
                   "calibration half and score its other half.")
@click.option("--explain", is_flag=True,
              help="With --holdout: split each group's mean |log error| into kernel "
                   "efficiency, per-step overhead, collectives, and what none explains.")
@click.option("--write-interval", "interval_paths", metavar="PROFILE.toml", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="With --holdout dataset: write this fitted profile's [interval] table "
                   "(80 % bounds per kind from the held-out residuals on its GPU); repeat.")
@click.option("--json", "as_json", is_flag=True, help=f"Print one JSON object. {JSON_NULLS}")
def validate(measured, profile, gpu, datasets, chart_path, markdown, holdout, explain,
             interval_paths, as_json):
    """Run the model against measured datasets: MAPE, worst error and bias per dataset
    or held-out group.

    --holdout dataset|engine|gpu (out of sample): each group (one dataset; every dataset
    of one engine; or of one GPU) is predicted by a fit on every other dataset of the
    same kinds, then a summary by kind (gemm, attention, allreduce, step), step phase,
    GPU, engine and dtype, with each kind's 80 % interval and its coverage on held-out
    datasets. A
    kind with nothing left to fit on says "no data to fit on" and is predicted by the
    transfer rule (`--profile calibrated` of its GPU).

    --holdout halves (the default): each dataset split in two halves (alternate
    configurations sorted by size); the validation half's error for the ideal roofline,
    for a fit on the calibration half, and for --profile when given.

    Errors are predicted / measured - 1: positive means the model is slower than the
    hardware. Leave-one-dataset-out over the published folder takes a few minutes.

    \b
    Examples:
      sweep validate --measured MEASURED_DIR --holdout dataset
      sweep validate --measured MEASURED_DIR --holdout gpu --explain
      sweep validate --measured MEASURED_DIR --holdout gpu --gpu h200 \\
          --dataset GEMM --profile h100-sxm-kernels   # the transfer rule's check
      sweep validate --measured MEASURED_DIR --holdout dataset \\
          --write-interval specs/profiles/h100-sxm-kernels.toml
      sweep validate --measured MEASURED_DIR --profile h100-sxm-kernels \\
          --gpu h100-sxm --chart validation.html
    """
    from rooftui.sweeps.measured import read_measured_paths
    from rooftui.sweeps.validation import results_table, write_chart
    from rooftui.sweeps.validation import validate as run_validation

    if holdout == "halves":
        if explain or interval_paths or datasets:
            raise click.UsageError("--explain, --write-interval and --dataset need "
                                   "--holdout dataset, engine or gpu")
    elif chart_path:
        raise click.UsageError("--chart draws the halves' validation: leave out --holdout")
    if interval_paths and holdout != "dataset":
        raise click.UsageError("--write-interval needs --holdout dataset (intervals are "
                               "made from leave-one-dataset-out residuals)")
    if holdout != "halves":
        held_out_report(measured, holdout, gpu, datasets, profile, explain, interval_paths,
                        markdown, as_json)
        return
    assumptions = load_profile(profile, gpu) if profile else None
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


# --- out of sample ---------------------------------------------------------------

def held_out_report(measured, holdout, gpu, datasets, profile, explain, interval_paths,
                    markdown, as_json) -> None:
    from rooftui.sweeps.measured import read_measured_paths
    from rooftui.sweeps.validation import (
        build_corpus,
        hold_out,
        holdout_summary,
        holdout_table,
        profile_scores,
    )

    corpus, skipped = build_corpus(read_measured_paths(list(measured)), gpu, datasets)
    results = hold_out(corpus, holdout, explain)
    report = {"holdout": holdout, "groups": holdout_table(corpus, results),
              "summary": holdout_summary(corpus, results), "skipped": skipped}
    if profile:
        report["profile"] = {"name": profile,
                             "groups": profile_scores(corpus, results,
                                                      load_profile(profile, gpu))}
    if interval_paths:
        report["intervals"] = {str(path): write_profile_interval(
            corpus, results, path, holdout, gpu, datasets, measured, interval_paths)
            for path in interval_paths}
    if as_json:
        reasons = {f"summary.{by}.{value}.coverage": "one dataset: no other to make its "
                                                       "interval from"
                   for by, rows in report["summary"].items() for value in rows}
        click.echo(json_text(report, reasons))
        return
    click.echo((render_holdout_markdown if markdown else render_holdout)(report))


def write_profile_interval(corpus, results, path, holdout, gpu, datasets, measured,
                           paths) -> dict:
    import shlex

    from rooftui.core import spec_files
    from rooftui.core.assumptions import assumptions_from_dict
    from rooftui.sweeps.validation import profile_interval, write_interval

    document = spec_files.read_document(path)
    profile = assumptions_from_dict(document, str(path), path.stem)
    words = ["sweep", "validate"]
    for given in measured:  # the published folder, named as the docs name it
        words += ["--measured", "MEASURED_DIR" if given.is_dir()
                  else f"MEASURED_DIR/{given.name}"]
    words += ["--holdout", holdout] + (["--gpu", gpu] if gpu else [])
    for text in datasets:
        words += ["--dataset", text]
    for written in paths:
        words += ["--write-interval", str(written)]
    table = profile_interval(corpus, results, document, profile,
                             f"leave-one-dataset-out over "
                             f"{len(set(corpus.rows.dataset.tolist()))} datasets")
    write_interval(path, table, shlex.join(words))
    return table


def _group_errors(row: dict) -> str:
    return (f"{100 * row['mape']:6.1f} % {100 * row['worst']:+8.1f} % "
            f"{100 * row['bias']:+7.1f} %")


def render_holdout(report: dict) -> str:
    """Held-out groups, then the summaries; the explained parts when asked."""
    groups = report["groups"]
    width = max(len(name) for name in [*(row["group"] for row in groups),
                                        *(v for rows in report["summary"].values()
                                          for v in rows), "by step phase"])
    explained = "explained" in groups[0]
    parts = list(groups[0]["explained"]) if explained else []
    lines = [f"held out: one {report['holdout']} at a time, predicted by a fit on the "
             f"datasets of the same kinds outside it", "",
             f"{'group':<{width}} {'rows':>6}  {'MAPE':>8} {'worst':>10} {'bias':>9}"
             + "".join(f"  {p[:18]:>18}" for p in parts)]
    for row in groups:
        lines.append(f"{row['group']:<{width}} {row['rows']:>6}  {_group_errors(row)}"
                     + "".join(f"  {row['explained'][p]:>18.3f}" for p in parts)
                     + (f"  ({'; '.join(row['notes'])})" if row["notes"] else ""))
    if explained:
        lines.append("\nexplained: each part's share of the mean |log(predicted / "
                     "measured)| (Shapley values: the part switched to a fit on the group "
                     "itself); the last column is what no parameter explains")
    for by, rows in report["summary"].items():
        if not rows:
            continue
        with_interval = "interval" in next(iter(rows.values()))
        lines += ["", f"{'by ' + by:<{width}} {'rows':>6}  {'MAPE':>8} {'worst':>10} "
                  f"{'bias':>9}" + ("   80 % interval  coverage" if with_interval else "")]
        for value, row in rows.items():
            extra = ""
            if "interval" in row:
                low, high = row["interval"]
                extra = (f"   {low:.2f}-{high:.2f} x     "
                         + ("n/a" if row["coverage"] is None or row["coverage"] != row["coverage"]
                            else f"{100 * row['coverage']:.0f} %"))
            lines.append(f"{value:<{width}} {row['rows']:>6}  {_group_errors(row)}{extra}")
    lines.append("\nerrors: predicted / measured - 1 (positive: the model is slower than "
                 "the hardware); summaries weigh each dataset equally; coverage: the share "
                 "of a dataset's points inside the interval made from the other datasets")
    if "profile" in report:
        lines += ["", f"profile {report['profile']['name']} on the same rows:"]
        for row in report["profile"]["groups"]:
            cover = "".join(f"  {kind}: {100 * c['coverage']:.0f} % inside, widen "
                            f"x{c['widening_needed']:.2f} for 80 %"
                            for kind, c in row.get("interval", {}).items())
            lines.append(f"  {row['group']:<{width}} {_group_errors(row)}{cover}")
    for path, table in report.get("intervals", {}).items():
        lines += ["", f"[interval] written to {path}: " + ", ".join(
            f"{k} {v[0]}-{v[1]}" for k, v in table.items() if isinstance(v, list))]
    if report["skipped"]:
        lines += ["", "left out:"] + [f"  {line}" for line in report["skipped"]]
    return "\n".join(lines)


def _cell(row: dict) -> str:
    return f"{100 * row['mape']:.1f} % ({_percent(row['worst'])}, {_percent(row['bias'])})"


def render_holdout_markdown(report: dict) -> str:
    """The held-out tables in Markdown: summaries first, then every group."""
    lines = []
    for by, rows in report["summary"].items():
        if not rows:
            continue
        interval = "interval" in next(iter(rows.values()))
        lines += [f"| {by} | datasets | rows | MAPE (worst, bias) |"
                  + (" 80 % interval | coverage |" if interval else ""),
                  "|---|---|---|---|" + ("---|---|" if interval else "")]
        for value, row in rows.items():
            extra = ""
            if interval:
                cover = row["coverage"]
                extra = (f" {row['interval'][0]:.2f}–{row['interval'][1]:.2f} × | "
                         + ("n/a" if cover != cover or cover is None else f"{100 * cover:.0f} %")
                         + " |")
            lines.append(f"| {value} | {row['datasets']} | {row['rows']} | {_cell(row)} |"
                         + extra)
        lines.append("")
    explained = "explained" in report["groups"][0]
    parts = list(report["groups"][0]["explained"]) if explained else []
    lines += [f"| held-out {report['holdout']} | kind | rows | MAPE (worst, bias) |"
              + "".join(f" {p} |" for p in parts),
              "|---|---|---|---|" + "---|" * len(parts)]
    for row in report["groups"]:
        note = f" ({'; '.join(row['notes'])})" if row["notes"] else ""
        lines.append(f"| {row['group']}{note} | {', '.join(row['kinds'])} | {row['rows']} | "
                     f"{_cell(row)} |" + "".join(f" {row['explained'][p]:.3f} |" for p in parts))
    return "\n".join(lines)
