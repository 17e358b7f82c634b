"""`sweep calibrate`: fit the efficiency model to measured times and write a profile."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import click

from rooftui.core.calibration import FIT_PARAMETERS
from rooftui.sweeps.cli.options import JSON_NULLS, json_text

HALVES = ("all", "calibration")


@click.command()
@click.option("--measured", "measured", required=True, multiple=True, metavar="FILE|DIR",
              type=click.Path(exists=True, path_type=Path),
              help="Measured CSVs: the calibration format (`sweep measure` writes it) or a "
                   "published dataset's own format (docs/validation.md lists them); a folder "
                   "means its *.csv. Repeat.")
@click.option("--gpu", required=True, metavar="NAME|PATH",
              help="GPU spec whose peaks the fit is relative to; picks the rows measured on it.")
@click.option("--rows-gpu", metavar="NAME",
              help="Use the rows whose gpu column is NAME instead (e.g. a device name "
                   "that `sweep measure` wrote).")
@click.option("--dataset", "datasets", multiple=True, metavar="TEXT",
              help="Only datasets whose name contains TEXT (case-insensitive); repeat.")
@click.option("--half", type=click.Choice(HALVES), default="all", show_default=True,
              help="calibration: fit only each dataset's calibration half, so that "
                   "`sweep validate` scores the profile on points it never saw.")
@click.option("--fit", "fit_names", metavar="PARAM,...",
              help="Parameters to fit [default: those the rows can inform], of: "
                   + ", ".join(FIT_PARAMETERS) + ".")
@click.option("--base", default="ideal", show_default=True, metavar="NAME|PATH",
              help="Profile the fit starts from; parameters not fitted keep its values.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), metavar="PROFILE.toml",
              help="Write the fitted profile here (usable as --profile everywhere).")
@click.option("--description", metavar="TEXT", help="The profile's description line.")
@click.option("--json", "as_json", is_flag=True, help=f"Print one JSON object. {JSON_NULLS}")
def calibrate(measured, gpu, rows_gpu, datasets, half, fit_names, base, out, description,
              as_json):
    """Fit the efficiency model (overheads, GEMM and attention efficiencies per compute
    dtype, fp8/fp4 activation quantisation, all-reduce) to measured kernel or step times
    by least squares on log time.

    Each row is priced in its own formats: matmuls at the peak of its compute dtype
    (nvfp4 at the fp4 peak), routed experts in their dtype (gpt-oss: mxfp4). fp8 and fp4
    GEMM rows fit their own parameters (fp8.gemm_mfu, ...; bf16 rows the base ones),
    attention rows with an 8-bit (4-bit) KV cache the fp8 (fp4) table's attention
    parameters; decode attention rows fit a sequence's fixed time per KV head and per
    query head (attention_kv_head_overhead_s, attention_query_head_overhead_s),
    prefill attention rows a prompt's fixed time per query head
    (attention_prompt_head_overhead_s, where prompts x heads take three values), step
    rows attention_mbu_half. All-reduce rows of NCCL or TensorRT-LLM's custom all-reduce
    (the CSV's engine column: nccl, trtllm) fit that library's own table
    ([efficiency.nccl], [efficiency.trtllm]: interconnect_efficiency,
    allreduce_overhead_s, allreduce_peer_overhead_s per other GPU where the rows span
    two GPU counts or more, and its two protocols where they span 8 message sizes or
    more: allreduce_ll_share, the low-latency protocol's share of the bandwidth, and
    allreduce_bulk_overhead_s, the bulk one's extra fixed time; a step pays the faster);
    the base values then follow the library with the most rows
    (`sweep point --collective-library` picks another for a step).
    A kernel's fixed time follows how it was timed (the CSV's cuda_graphs
    and timer columns): a CUDA-graph replay pays kernel_overhead_s, an eager launch
    launch_overhead_s more, a host-clock timing host_timer_overhead_s on top; each is
    fitted only where rows of both kinds are given. End-to-end rows (e2e_ttft, e2e_tpot, e2e_itl) are left out: they are fitted by
    replay through the simulator. A fitted parameter that ends at a bound of its range
    (efficiency 1 or 0, overhead 0) is flagged: the data want more than the form allows.

    Reports the fit quality per dataset (on the rows fitted) and writes a profile TOML
    with the fitted [efficiency] table (and [efficiency.fp8], ... for a dtype's own
    values), the command that produced it and the sources.

    \b
    Examples:
      # a kernel profile from GEMM, attention and all-reduce benchmarks
      sweep calibrate --measured MEASURED_DIR --dataset aiconfigurator --gpu h100-sxm \\
          --out h100-kernels.toml
      # an engine profile on top of it: per-step and per-layer overheads from step rows
      sweep calibrate --measured MEASURED_DIR/splitwise-perf-model-a100-h100.csv \\
          --gpu h100-sxm --dataset "TP4 decode" --base h100-kernels.toml \\
          --fit step_overhead_s,layer_overhead_s --out h100-splitwise.toml
      sweep measure --gpu h100-sxm --out mine.csv
      sweep calibrate --measured mine.csv --gpu h100-sxm --out h100-mine.toml
    """
    from rooftui.core.assumptions import load_profile
    from rooftui.core.calibration import (
        E2E_KINDS,
        error_summary,
        fit,
        predict,
        profile_prediction,
        row_costs,
        split_halves,
    )
    from rooftui.core.hardware import load_gpu
    from rooftui.core.informed import informed_parameters
    from rooftui.sweeps.measured import gpu_matches, read_measured_paths, to_measurements
    from rooftui.sweeps.validation import dataset_engine

    spec = load_gpu(gpu)
    start = load_profile(base)
    chosen, sources, end_to_end, step_engines = [], {}, 0, set()
    for conversion in read_measured_paths(list(measured)):
        for dataset in conversion.datasets:
            if datasets and not any(t.lower() in dataset.name.lower() for t in datasets):
                continue
            rows = [row for row in dataset.rows
                    if (row["gpu"] == rows_gpu if rows_gpu else gpu_matches(row["gpu"], gpu, spec))]
            end_to_end += sum(row["kind"] in E2E_KINDS for row in rows)
            rows = [row for row in rows if row["kind"] not in E2E_KINDS]
            if rows:
                chosen.extend(rows)
                sources[dataset.name] = dataset.source
                if any(row["kind"] == "step" for row in rows):
                    step_engines.add(dataset_engine(dataset))
    skipped = ([f"{end_to_end:,} end-to-end rows: e2e rows are fitted by replay through the "
                "simulator, not by this closed-form fit"] if end_to_end else [])
    # one profile holds one step overhead: an engine's host sets its own
    notes = ([f"steps of {len(step_engines)} engines ({', '.join(sorted(step_engines))}) "
              "share one set of fixed times in this profile; each engine's host sets its "
              "own, so calibrate each engine's datasets apart (--dataset)"]
             if len(step_engines) > 1 else [])
    if not chosen:
        which = f"gpu {rows_gpu!r}" if rows_gpu else f"GPU {gpu}"
        raise click.UsageError(
            f"no measured rows for {which}"
            + (f" in datasets matching {', '.join(datasets)}" if datasets else "")
            + (f" ({skipped[0]})" if skipped else "")
            + " (--rows-gpu picks rows by their gpu column)")
    rows = to_measurements(chosen, sorted(sources))
    if half == "calibration":
        rows = rows.subset(split_halves(rows))
    if fit_names:
        free = [name.strip() for name in fit_names.split(",") if name.strip()]
        unknown = sorted(set(free) - set(FIT_PARAMETERS))
        if unknown:
            raise click.BadParameter(f"unknown {', '.join(unknown)}; parameters are "
                                     f"{', '.join(FIT_PARAMETERS)}", param_hint="--fit")
        if "request_overhead_s" in free:  # no kernel or step row holds a client's delay
            raise click.BadParameter(
                "request_overhead_s is a client's delay outside every step (HTTP, "
                "tokenisation, streaming), which kernel and step rows do not hold: fit it "
                "from end-to-end runs with `sweep replay --fit`", param_hint="--fit")
    else:
        free = informed_parameters(rows, start.collective_library)
    costs = row_costs(rows, spec, start)
    result = fit(costs, free, start=start.efficiency, mbu=start.mbu, mfu=start.mfu,
                 overlap=start.overlap)
    before = profile_prediction(costs, start)
    after = predict(costs, result.efficiency, mfu=start.mfu, mbu=result.mbu,
                    overlap=start.overlap)
    quality = []
    for index, name in enumerate(rows.datasets):
        members = rows.dataset == index
        if members.any():
            quality.append({"dataset": name, "source": sources[name],
                            "base": error_summary(before[members], rows.time_s[members]),
                            "fitted": error_summary(after[members], rows.time_s[members])})
    parameters = {"mbu": result.mbu, **result.efficiency.as_dict()}
    for name in result.fitted:  # a dtype's own value equal to the base one still shows
        parameters[name] = result.mbu if name == "mbu" else result.efficiency.value(name)
    command = _command(measured, gpu, rows_gpu, datasets, half, fit_names, base, out,
                       description)
    written = None
    if out:
        written = write_profile(out, start=start, fitted=result, gpu=gpu, command=command,
                                sources=sources, rows=len(rows), half=half,
                                description=description)
    if as_json:
        click.echo(json_text({"gpu": gpu, "rows": len(rows), "half": half,
                               "fitted": list(result.fitted), "parameters": parameters,
                               "at_bound": list(result.at_bound),
                               "rms_log_error": result.rms_log_error, "datasets": quality,
                               "skipped": skipped, "notes": notes,
                               "profile": str(written) if written else None,
                               "command": command},
                              {"profile": "no --out given"}))
        return
    click.echo(render_fit(result, quality, base, len(rows), gpu))
    for line in skipped:
        click.echo(f"left out: {line}")
    for line in notes:
        click.echo(f"note: {line}")
    if written:
        click.echo(f"\nprofile: {written}  (use it as --profile {written})")


def _command(measured, gpu, rows_gpu, datasets, half, fit_names, base, out,
             description) -> str:
    """The command line that reproduces this fit, for the profile's header."""
    words = ["sweep", "calibrate"]
    for path in measured:
        words += ["--measured", str(path)]
    words += ["--gpu", gpu]
    if rows_gpu:
        words += ["--rows-gpu", rows_gpu]
    for text in datasets:
        words += ["--dataset", text]
    if half != "all":
        words += ["--half", half]
    if fit_names:
        words += ["--fit", fit_names]
    if base != "ideal":
        words += ["--base", base]
    if description:
        words += ["--description", description]
    if out:
        words += ["--out", str(out)]
    return shlex.join(words)


def render_fit(result, quality, base, rows, gpu) -> str:
    from rooftui.core.efficiency import PARAMETERS

    lines = [f"fitted {len(result.fitted)} parameters to {rows:,} rows on {gpu} "
             f"(rms log error {result.rms_log_error:.3f}, {result.iterations} iterations)", ""]
    name_width = max([28, *map(len, result.fitted)])  # trtllm.allreduce_peer_overhead_s
    for name in result.fitted:
        value = result.mbu if name == "mbu" else result.efficiency.value(name)
        parameter = name.rpartition(".")[2]  # fp8.gemm_mfu means what gemm_mfu means
        unit, meaning = (PARAMETERS[parameter][1:] if parameter in PARAMETERS
                         else ("", "fraction of bandwidth a plain copy reaches"))
        flag = "  AT BOUND" if name in result.at_bound else ""
        lines.append(f"  {name:<{name_width}} {value:>12.4g} {unit:<7} {meaning}{flag}")
    if result.at_bound:
        lines += ["", f"  at a bound of its range: {', '.join(result.at_bound)} (the data "
                      "pull it past what the model allows: read its fit with care)"]
    width = max(len(q["dataset"]) for q in quality)
    lines += ["", f"  {'dataset':<{width}} {'rows':>6}  {'MAPE ' + base:>16}  {'MAPE fitted':>12}"
              f"  {'bias fitted':>12}"]
    for q in quality:
        lines.append(f"  {q['dataset']:<{width}} {q['fitted']['rows']:>6}  "
                     f"{100 * q['base']['mape']:>14.1f} %  {100 * q['fitted']['mape']:>10.1f} %"
                     f"  {100 * q['fitted']['bias']:>+10.1f} %")
    lines.append("\n(in-sample: on the rows fitted; `sweep validate` scores held-out halves)")
    return "\n".join(lines)


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(float(value)) if isinstance(value, float) else str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string


def write_profile(path: Path, *, start, fitted, gpu, command, sources, rows, half,
                  description) -> Path:
    """Write the profile TOML atomically, after checking that it loads back."""
    from rooftui.core.assumptions import load_profile
    from rooftui.core.errors import SpecError
    from rooftui.sweeps.output_files import atomic_path

    path = Path(path)
    if path.suffix != ".toml":
        path = path.with_suffix(".toml")
    description = description or (
        f"calibrated on {gpu}: {', '.join(sorted(sources))}")
    lines = [f"# Calibrated by: {command}",
             f"# Fitted on {rows:,} measured rows ({half} half of each dataset); "
             "regenerate with the command above.",
             f"description = {_toml_value(description)}",
             f"mfu = {start.mfu!r}",
             f"mbu = {fitted.mbu!r}",
             f"overlap = {_toml_value(start.overlap)}",
             f"attention_flops = {_toml_value(start.attention_flops)}",
             f"activation_traffic = {_toml_value(start.activation_traffic)}",
             f"kv_write = {_toml_value(start.kv_write)}",
             f"memory_reserve_gb = {start.memory_reserve_gb!r}",
             *([f"collective_library = {_toml_value(start.collective_library)}"]
               if start.collective_library else []),
             "", "[efficiency]"]
    values = fitted.efficiency.as_dict()
    lines += [f"{name} = {value!r}" for name, value in values.items() if "." not in name]
    for table in dict.fromkeys(name.partition(".")[0] for name in values if "." in name):
        lines += ["", f"[efficiency.{table}]"]
        lines += [f"{name.partition('.')[2]} = {value!r}" for name, value in values.items()
                  if name.startswith(f"{table}.")]
    lines += ["", "[calibration]",
              f"gpu = {_toml_value(gpu)}",
              f"command = {_toml_value(command)}",
              f"rows = {rows}",
              f"half = {_toml_value(half)}",
              f"fitted = {_toml_value(list(fitted.fitted))}",
              f"at_bound = {_toml_value(list(fitted.at_bound))}",
              f"rms_log_error = {round(fitted.rms_log_error, 4)!r}",
              "", "[sources]"]
    lines += [f"{_toml_value(name)} = {_toml_value(source)}"
              for name, source in sorted(sources.items())]
    try:
        with atomic_path(path) as temporary:
            temporary.write_text("\n".join(lines) + "\n", encoding="utf-8")
            load_profile(str(temporary.resolve()))  # what --profile will read
    except SpecError as error:
        raise SpecError(f"--out: {error}") from None
    return path
