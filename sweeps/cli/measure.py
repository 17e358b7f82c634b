"""`sweep measure`: time this machine's copies, GEMMs and decode attention with PyTorch."""

from __future__ import annotations

from pathlib import Path

import click

from rooftui.sweeps.cli.options import Number, json_text


@click.command()
@click.option("--model", default="llama-3-8b", show_default=True, metavar="NAME|PATH",
              help="Model whose layer shapes the GEMMs and attention take.")
@click.option("--tp", type=Number("tp"), default=1, show_default=True,
              help="Measure one GPU's shard under this tensor-parallel degree.")
@click.option("--device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto",
              show_default=True, help="auto: CUDA when PyTorch sees a GPU, else the CPU.")
@click.option("--gpu", "label", metavar="NAME",
              help="The gpu column of the rows [default: the device's name]; a shipped "
                   "spec name (h100-sxm) lets `sweep calibrate --gpu` pick them directly.")
@click.option("--no-fp8", is_flag=True, help="Skip the fp8 GEMMs.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("measured.csv"), show_default=True, metavar="FILE.csv",
              help="Where to write the rows (calibration CSV format).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def measure(model, tp, device, label, no_fp8, out, as_json):
    """Measure device-to-device copy bandwidth, the GEMMs of one layer of MODEL over a
    grid of token counts, and decode attention over batch x context, and write them in
    the calibration CSV format for `sweep calibrate`.

    Needs PyTorch (pip install 'rooftui[measure]'). Without a GPU it runs the same code
    on the CPU at tiny sizes: CPU figures are not GPU figures.

    \b
    Examples:
      sweep measure --model llama-3-8b --gpu h100-sxm --out h100.csv
      sweep calibrate --measured h100.csv --gpu h100-sxm --out h100-mine.toml
    """
    from rooftui.core.model import load_model
    from rooftui.sweeps.measure import CPU_WARNING
    from rooftui.sweeps.measure import measure as run_measure
    from rooftui.sweeps.measured import write_calibration_csv

    spec = load_model(model)
    if spec.num_attention_heads % tp or spec.intermediate_size % tp:
        raise click.BadParameter(f"{spec.name} does not split over tp = {tp}",
                                 param_hint="--tp")

    def progress(message: str) -> None:
        if not as_json:
            click.echo(f"measuring {message} ...", err=True)

    rows, name = run_measure(spec, model, tp=tp, device=device, label=label,
                             fp8=not no_fp8, progress=progress)
    if name == "cpu":
        click.echo(f"warning: {CPU_WARNING}", err=True)
    write_calibration_csv(rows, out)
    counts = {kind: sum(row["kind"] == kind for row in rows)
              for kind in ("copy", "gemm", "attention_decode")}
    if as_json:
        click.echo(json_text({"device": name, "gpu": rows[0]["gpu"], "rows": len(rows),
                               "kinds": counts, "out": str(out),
                               "warning": CPU_WARNING if name == "cpu" else None}))
        return
    copies = [row for row in rows if row["kind"] == "copy"]
    best = max(2 * row["bytes"] / row["time_s"] for row in copies)
    click.echo(f"{len(rows)} rows on {name} -> {out}  "
               + ", ".join(f"{count} {kind}" for kind, count in counts.items()))
    click.echo(f"  copy bandwidth (read + write): {best / 1e9:,.1f} GB/s at best")
