"""`sweep specs`: list, show and validate GPU, model, profile, workload and system specs."""

from __future__ import annotations

import json

import click

from rooftui.core import spec_files, units
from rooftui.core.assumptions import load_profile
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.model import load_model
from rooftui.core.systems import load_system
from rooftui.core.workloads import load_workload

LOADERS = {"gpus": load_gpu, "models": load_model, "profiles": load_profile,
           "workloads": load_workload, "systems": load_system}


@click.group()
def specs() -> None:
    """The shipped specs, and checks for your own."""


@specs.command("list")
@click.argument("kind", required=False, type=click.Choice(spec_files.KINDS))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_specs(kind, as_json):
    """Names of the shipped specs (all kinds, or one)."""
    kinds = [kind] if kind else list(spec_files.KINDS)
    listing = {k: spec_files.shipped_names(k) for k in kinds}
    if as_json:
        click.echo(json.dumps(listing, indent=2))
        return
    for k, names in listing.items():
        click.echo(f"{k}: {', '.join(names) if names else '(none)'}")


@specs.command("show")
@click.argument("name")
@click.option("--kind", type=click.Choice(spec_files.KINDS),
              help="Which kind NAME is, when more than one kind has it.")
def show(name, kind):
    """Print a shipped spec (or a spec file) with the figures derived from it."""
    kinds = [kind] if kind else [k for k in spec_files.KINDS
                                 if spec_files.looks_like_path(name)
                                 or name in spec_files.shipped_names(k)]
    if not kinds:
        raise SpecError(f"no shipped spec named {name!r} (`sweep specs list` shows them)")
    path = spec_files.resolve(kinds[0], name)
    click.echo(f"# {path}")
    click.echo(path.read_text(encoding="utf-8").rstrip())
    if kinds[0] == "models":
        model = load_model(name)
        click.echo(f"\n# derived: {model.total_params():,} parameters; "
                   f"{model.gemm_params():,} in matmuls read per step; KV "
                   f"{model.kv_bytes_per_token('bf16'):,.0f} B/token in bf16; "
                   f"group size {model.group_size}")
    elif kinds[0] == "gpus":
        gpu = load_gpu(name)
        ridges = ", ".join(f"{d} {gpu.ridge(d):.0f}" for d in gpu.tflops)
        click.echo(f"\n# derived: ridge (FLOP/B) {ridges}; "
                   f"memory {units.si(gpu.memory_bytes, 'B')}")


@specs.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--kind", type=click.Choice(spec_files.KINDS),
              help="Kind of spec [default: from the parent folder, else tried in turn].")
def validate(paths, kind):
    """Check spec files: exit 0 with one 'ok' line each, or one error line and exit 2."""
    for path in paths:
        parent = path.replace("\\", "/").rsplit("/", 2)
        guess = kind or (parent[-2] if len(parent) > 1 and parent[-2] in LOADERS else None)
        if guess:
            LOADERS[guess](path if "/" in path else f"./{path}")
            click.echo(f"ok: {path} ({guess[:-1]})")
            continue
        errors = []
        for candidate, loader in LOADERS.items():
            try:
                loader(path if "/" in path else f"./{path}")
            except SpecError as error:
                errors.append(str(error))
                continue
            click.echo(f"ok: {path} ({candidate[:-1]})")
            break
        else:
            raise SpecError(f"{path}: not a valid GPU, model, profile or workload spec: {errors[0]}")
