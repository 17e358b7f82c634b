"""`sweep run`, `sweep status`, `sweep plan`: a TOML grid of step configurations into a
resumable parquet dataset, on one machine, a SLURM array or a Dask cluster."""

from __future__ import annotations

import functools
import json
import math
import os
import re
import shlex
import sys
from pathlib import Path

import click

from rooftui.core import units

PART = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")
# what `sweep plan` writes into #SBATCH lines: SLURM's own forms, nothing a shell could run
PARTITIONS = re.compile(r"[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*")
# minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
SLURM_TIME = re.compile(r"\d+(:\d{2}){0,2}|\d+-\d{1,2}(:\d{2}){0,2}")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _part(value: str | None) -> tuple[int, int] | None:
    """`--shard i/N`, else the SLURM array variables, else None (every shard)."""
    if value is None:
        task = os.environ.get("SLURM_ARRAY_TASK_ID")
        if task is None:
            return None
        first = os.environ.get("SLURM_ARRAY_TASK_MIN", "0")
        count = os.environ.get("SLURM_ARRAY_TASK_COUNT")
        if count is None and "SLURM_ARRAY_TASK_MAX" in os.environ:
            count = str(int(os.environ["SLURM_ARRAY_TASK_MAX"]) - int(first) + 1)
        if not (task.isdigit() and first.isdigit() and count and count.isdigit()):
            raise click.UsageError("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_MIN/"
                                   "_COUNT are not whole numbers; pass --shard I/N")
        value = f"{int(task) - int(first)}/{count}"
    match = PART.fullmatch(value)
    if not match or not int(match[1]) < int(match[2]):
        raise click.BadParameter(f"expected I/N with 0 <= I < N, got {value!r}",
                                 param_hint="'--shard'")
    return int(match[1]), int(match[2])


def _load(grid_path: Path, most_points: int | None = None):
    """The grid's evaluator; a grid of more than `most_points` is refused first, before
    the evaluator checks its points."""
    from rooftui.sweeps.grid import load_grid
    from rooftui.sweeps.kinds import evaluator_for

    grid = load_grid(grid_path)
    if most_points is not None and grid.size > most_points:
        raise click.UsageError(f"the grid has {grid.size:,} points (more than "
                               f"{most_points:,}); check it with --dry-run, then pass --yes")
    return evaluator_for(grid)


def _one_line_file_errors(command):
    """An OSError that no writer turned into a SpecError yet is still one line, exit 2."""
    @functools.wraps(command)
    def guarded(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except OSError as error:
            from rooftui.sweeps.output_files import file_error

            raise file_error(error, error.filename or "the output folder", "use") from None
    return guarded


def _dimensions(grid) -> str:
    parts = []
    for dim in grid.dimensions:
        names = ", ".join(axis.name for axis in dim.axes)
        parts.append(f"{names if len(dim.axes) == 1 else f'({names})'} {dim.size:,}")
    return " × ".join(parts) or "(no axes: one point)"


def _parameters_help() -> str:
    from rooftui.sweeps.grid import KIND_PARAMETERS, PARAMETERS

    lines = ["\b", "Grid spec (example: specs/grid.toml): name, kind = \"step\" (or",
             "\"simulate\", \"optimize\", \"disagg\"), profile, skip_unsupported, [fixed]",
             "values, [axes]",
             "as lists or ranges { start, stop, scale = linear|log2|geometric, step | num },",
             "[[zip]] axes = [...] to pair axes, [charts].", "", "\b",
             "Grid parameters of kind \"step\" ([fixed] or [axes]; * only [fixed]):"]
    for name, p in PARAMETERS.items():
        default = "" if p.default is None else f" [default: {p.default}]"
        lines.append(f"  {name + ' *' * p.fixed_only:<20} {p.meaning}{default}")
    points = {"simulate": ("simulation", "GPU, model"),
              "optimize": ("max batch and budget under an SLO", "GPU, model"),
              "disagg": ("best disaggregated and aggregated deployment", "model")}
    for kind, (point, names) in points.items():
        lines += ["", "\b", f"Kind \"{kind}\" (one {point} per point): {names}, dtypes",
                  "and profile values as above, and:"]
        for name, p in KIND_PARAMETERS[kind].items():
            if name in PARAMETERS:
                continue
            default = "" if p.default in (None, "") else f" [default: {p.default!r}]"
            lines.append(f"  {name:<20} {p.meaning}{default}")
    return "\n".join(lines)


@click.command(epilog=_parameters_help())
@click.argument("grid_path", metavar="GRID", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              metavar="DIR", help="Output folder [default: outputs/<name>-<12 hex of the spec "
                                  "hash>/]; a rerun into it resumes.")
@click.option("--shard", "part", metavar="I/N",
              help="Run only slice I of N (0-based) of the shards [default: from "
                   "SLURM_ARRAY_TASK_ID, _MIN and _COUNT when set, else all].")
@click.option("--shard-size", type=click.IntRange(min=1), metavar="POINTS",
              help="Points per parquet file [default: the existing run's, else about 64 "
                   "shards, 2^16..2^20 points each, in whole evaluation blocks].")
@click.option("--workers", "-j", type=click.IntRange(min=1), default=1, show_default=True,
              help="Local worker processes (or Dask workers of a local cluster).")
@click.option("--executor", type=click.Choice(["local", "dask"]), default="local",
              show_default=True, help="local: this machine; dask: a Dask distributed cluster "
                                      "(needs the 'dask' extra).")
@click.option("--scheduler", metavar="ADDRESS",
              help="Dask scheduler (tcp://host:8786) [default: a local cluster of --workers]; "
                   "its workers must see the output folder.")
@click.option("--force", is_flag=True,
              help="Recompute every shard this run covers, replacing what is there.")
@click.option("--dry-run", is_flag=True,
              help="Print points, shards, estimated size and time; compute nothing.")
@click.option("--yes", "-y", is_flag=True, help="Run grids of more than 1e9 points.")
@click.option("--no-charts", is_flag=True, help="Do not render the grid's [charts] at the end.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@_one_line_file_errors
def run(grid_path, out_dir, part, shard_size, workers, executor, scheduler, force, dry_run,
        yes, no_charts, as_json):
    """Evaluate every point of a grid spec (TOML) and write it as parquet.

    Each shard (a contiguous range of point ids) is computed with the vectorised step model
    and written atomically, so an interrupted run resumes where it stopped: rerun the same
    command. Results: DIR/points/*.parquet (one row per point), DIR/manifest.json, charts in
    DIR/charts/; read them with `rooftui DIR` or rooftui.sweeps.results.scan_results(DIR)
    (a polars LazyFrame; it adds the ratios the files leave out, such as tokens_per_s).

    \b
    Examples:
      sweep run specs/grid.toml
      sweep run specs/grid.toml --dry-run
      sweep run specs/grid.toml --workers 8 --out /scratch/sweep
      sweep run specs/grid.toml --shard 3/16          # one slice (SLURM sets it itself)
      sweep run specs/grid.toml --executor dask --scheduler tcp://head:8786
    """
    from rooftui.sweeps.results import POINTS, shard_indices
    from rooftui.sweeps.runner import (
        CONFIRM_POINTS,
        Progress,
        RunOptions,
        estimate,
        prepare_out_dir,
        run_sweep,
    )
    from rooftui.sweeps.shard_writer import shard_is_complete

    if scheduler and executor != "dask":
        raise click.UsageError("--scheduler needs --executor dask")
    options = RunOptions(out_dir=out_dir, shard_size=shard_size, part=_part(part),
                         workers=workers, executor=executor, scheduler=scheduler, force=force,
                         charts=not no_charts)
    sweep = _load(grid_path, None if dry_run or yes else CONFIRM_POINTS)
    grid = sweep.grid
    if dry_run:
        out, layout, _ = prepare_out_dir(grid, options)
        mine = layout.slice(*options.part) if options.part else range(layout.shards)
        present = shard_indices(out / POINTS)  # one listing, however many shards
        complete = 0 if force else sum(shard_is_complete(sweep, out, layout, i)
                                       for i in present if i in mine)
        guess = estimate(sweep, layout, workers)
        report = {"name": grid.name, "spec_hash": grid.spec_hash, "out_dir": str(out),
                  "dimensions": _dimensions(grid), "points": grid.size,
                  "rows": grid.size - sweep.skipped_points,
                  "skipped_points": sweep.skipped_points, "shard_size": layout.shard_size,
                  "shards": layout.shards, "shards_in_run": len(mine),
                  "shards_complete": complete, "estimated_bytes": guess["bytes"],
                  "estimated_seconds": guess["seconds"], "sample_points": guess["sample_points"]}
        click.echo(json.dumps(report, indent=2) if as_json else _render_plan(report, workers))
        return
    summary = run_sweep(sweep, options, Progress())
    click.echo(json.dumps(summary, indent=2) if as_json else _render_summary(summary))


def _render_plan(r: dict, workers: int) -> str:
    skipped = (f" ({r['rows']:,} rows: {r['skipped_points']:,} unsupported points skipped)"
               if r["skipped_points"] else "")
    return "\n".join([
        f"grid {r['name']} · spec hash {r['spec_hash'][:12]}",
        f"  axes      {r['dimensions']}",
        f"  points    {r['points']:,}{skipped}",
        f"  shards    {r['shards']:,} of up to {r['shard_size']:,} points; this run covers "
        f"{r['shards_in_run']:,}, {r['shards_complete']:,} already complete",
        f"  output    {r['out_dir']}",
        f"  estimate  {units.si(r['estimated_bytes'], 'B')} of parquet, "
        f"{_seconds(r['estimated_seconds'])} with {workers} worker{'s' * (workers > 1)} "
        f"(from a sample of {r['sample_points']:,} points; nothing computed)",
    ])


def _render_summary(s: dict) -> str:
    from rooftui.sweeps.runner import points_rate

    rate = f", {points_rate(s['points_per_s'])}" if s["points_computed"] else ""
    lines = [
        f"{s['name']}: computed {s['shards_computed']:,} of {s['shards_in_run']:,} shards "
        f"({s['points_computed']:,} points) in {_seconds(s['seconds'])}{rate}; "
        f"{s['shards_in_run'] - s['shards_computed']:,} were already complete",
    ]
    if s["complete"]:
        skipped = (f", {s['skipped_points']:,} unsupported points skipped"
                   if s["skipped_points"] else "")
        lines.append(f"complete: {s['rows']:,} rows in {s['shards']:,} shards{skipped}")
    else:
        lines.append(f"{s['shards_done']:,} of {s['shards']:,} shards done; run the other "
                     f"slices, then `sweep status {s['out_dir']}`")
    if s["charts_seconds"] is not None:
        lines.append(f"charts: {Path(s['out_dir']) / 'charts'} "
                     f"(rendered in {_seconds(s['charts_seconds'])})")
    lines.append(f"results: {s['out_dir']}")
    return "\n".join(lines)


def _seconds(value: float) -> str:
    if value < 60:
        return units.seconds(value)
    minutes = value / 60
    return f"{minutes:.1f} min" if minutes < 90 else f"{minutes / 60:.1f} h"


@click.command()
@click.argument("out_dir", metavar="DIR", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_one_line_file_errors
def status(out_dir, as_json):
    """Done, missing and damaged shards of a `sweep run` output folder: every shard's
    checksum is verified (its bytes read) and its footer checked against the manifest."""
    from rooftui.sweeps.runner import sweep_status

    s = sweep_status(out_dir)
    if as_json:
        click.echo(json.dumps(s, indent=2))
        return
    lines = [
        f"{s['out_dir']}: grid {s['name']} · spec hash {s['spec_hash'][:12]}",
        f"  shards  {s['shards_done']:,} of {s['shards']:,} done"
        + (f", {s['shards_missing']:,} missing: {', '.join(s['missing'][:20])}"
           + (" ..." if len(s["missing"]) > 20 else "") if s["shards_missing"] else ""),
        f"  rows    {s['rows']:,} of {s['expected_rows']:,} ({s['points']:,} points, "
        f"{s['shard_size']:,} per shard)",
    ]
    if s["invalid_note"]:
        lines.append(f"  {s['invalid_note']}")
    lines.append(f"  started {s['started_at']}, last finished {s['finished_at'] or '—'}; "
                 + ("complete" if s["complete"] else "incomplete: rerun `sweep run` to resume"))
    click.echo("\n".join(lines))


@click.command()
@click.argument("grid_path", metavar="GRID", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--shards", "tasks", type=click.IntRange(min=1), required=True, metavar="N",
              help="Array tasks: each runs slice i/N of the shards.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              metavar="DIR", help="Output folder, on a filesystem every node sees "
                                  "[default: outputs/<name>-<hash>/ here].")
@click.option("--shard-size", type=click.IntRange(min=1), metavar="POINTS",
              help="Points per parquet file [default: as `sweep run`].")
@click.option("--cpus-per-task", type=click.IntRange(min=1), default=1, show_default=True,
              help="CPUs per array task; each task uses them as --workers.")
@click.option("--time", "time_limit", metavar="[D-]HH:MM:SS",
              help="Time limit per task [default: 3x the estimate, at least 10 minutes].")
@click.option("--partition", metavar="NAME", help="SLURM partition.")
def plan(grid_path, tasks, out_dir, shard_size, cpus_per_task, time_limit, partition):
    """Print an `sbatch --array` script that runs a grid as N SLURM array tasks.

    Each task runs `sweep run` on its slice (SLURM_ARRAY_TASK_ID picks it) and writes its
    shards into the shared output folder; a failed or preempted task resumes when rerun.

    \b
    Example:
      sweep plan specs/grid.toml --shards 32 --out /scratch/grid > grid.sbatch
      sbatch grid.sbatch
    """
    from rooftui.sweeps.runner import RunOptions, estimate, prepare_out_dir

    if partition is not None and not PARTITIONS.fullmatch(partition):
        raise click.BadParameter(f"expected a SLURM partition name (letters, digits, '_', "
                                 f"'.', '-'; several separated by commas), got {partition!r}",
                                 param_hint="'--partition'")
    if time_limit is not None and not SLURM_TIME.fullmatch(time_limit):
        raise click.BadParameter(f"expected a SLURM time (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM "
                                 f"or D-HH:MM:SS), got {time_limit!r}", param_hint="'--time'")
    for path in (grid_path, out_dir):
        if path is not None and CONTROL.search(str(path.resolve())):
            raise click.BadParameter(f"a path written into a script cannot hold control "
                                     f"characters (a newline, a tab ...): {str(path)!r}")
    sweep = _load(grid_path)
    grid = sweep.grid
    out, layout, _ = prepare_out_dir(grid, RunOptions(out_dir=out_dir, shard_size=shard_size))
    if tasks > layout.shards:
        raise click.UsageError(f"--shards {tasks} is more than the grid's {layout.shards} "
                               "shards; use fewer tasks or a smaller --shard-size")
    if time_limit is None:
        per_task = estimate(sweep, layout, 1)["seconds"] * math.ceil(
            layout.shards / tasks) / layout.shards / cpus_per_task
        seconds = max(600, math.ceil(3 * per_task))
        time_limit = f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
    command = [sys.executable, "-m", "rooftui.sweeps", "run", str(grid_path.resolve()),
               "--out", str(out.resolve()), "--shard-size", str(layout.shard_size), "--yes"]
    lines = [
        "#!/bin/bash",
        f"# `sweep plan`: grid {grid.name} (spec hash {grid.spec_hash[:12]}), "
        f"{grid.size:,} points in {layout.shards:,} shards of up to {layout.shard_size:,}, "
        f"over {tasks} array tasks.",
        f"# Submit: sbatch THIS_FILE. Progress: sweep status {shlex.quote(str(out.resolve()))}",
        "# The task that completes the dataset renders the charts.",
        f"#SBATCH --job-name=sweep-{grid.name}",
        f"#SBATCH --array=0-{tasks - 1}",
        f"#SBATCH --cpus-per-task={cpus_per_task}",
        f"#SBATCH --time={time_limit}",
        f"#SBATCH --output=sweep-{grid.name}-%A_%a.log",
    ]
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    lines += [
        "set -euo pipefail",
        "# the slice comes from SLURM_ARRAY_TASK_ID / _MIN / _COUNT",
        shlex.join(command) + ' --workers "${SLURM_CPUS_PER_TASK:-1}"',
    ]
    click.echo("\n".join(lines))

