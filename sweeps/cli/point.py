"""`sweep point`: one step on the roofline, as a table or JSON; `sweep gemm`: one matmul."""

from __future__ import annotations

import json

import click

from rooftui.core import units
from rooftui.core.closed_forms import gemm_intensity
from rooftui.core.dtypes import bytes_per_element
from rooftui.core.point import point_report
from rooftui.sweeps.cli.options import DTYPE, build_config, setup_options

COUNT = click.IntRange(min=0)


@click.command()
@setup_options
@click.option("--batch", "-b", type=COUNT, default=1, show_default=True,
              help="Decode sequences in the step (one token each).")
@click.option("--context", "-s", type=COUNT, default=1024, show_default=True,
              help="Tokens already cached per decode sequence.")
@click.option("--prefill", type=COUNT, default=0, show_default=True,
              help="Prefill tokens in the step (a prompt or a chunk of one).")
@click.option("--prefill-context", type=COUNT, default=0, show_default=True,
              help="Tokens of that prompt already cached (earlier chunks).")
@click.option("--tpot-budget", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Also report the largest batch whose decode step fits this time.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def point(batch, context, prefill, prefill_context, tpot_budget, as_json, **setup):
    """Model one serving step: where its time goes, and what bounds it.

    The step runs BATCH decode tokens over CONTEXT cached tokens each, plus PREFILL tokens
    of one prompt whose first PREFILL_CONTEXT tokens are cached. Its weight matmuls
    (gemm) and attention are separate rooflines: the weights are read once for the whole
    batch, while each sequence reads its own KV cache.

    \b
    Examples:
      sweep point --batch 128 --context 8192
      sweep point --model reference-mha-6.4b --profile derated --prefill 8192 --batch 0
      sweep point --batch 32 --kv-heads 8 --kv-dtype fp8 --json
    """
    config = build_config(setup, batch=batch, context=context, prefill=prefill,
                          prefill_context=prefill_context, tpot_budget=tpot_budget)
    report = point_report(config)
    for warning in report["warnings"]:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(render_report(report))


def render_report(r: dict) -> str:
    """The human table: headline figures, the parts, memory, and why."""
    a = r["assumptions"]
    lines = [
        f"{r['model']} on {r['gpu']} · weights {r['weight_dtype']}, KV {r['kv_dtype']}, "
        f"compute {r['compute_dtype']} · profile {a['profile']} (mfu {a['mfu']:g}, "
        f"mbu {a['mbu']:g}, overlap {a['overlap']})",
        f"batch {r['batch']:,} × context {r['context']:,}"
        + (f" + prefill {r['prefill']:,} (after {r['prefill_context']:,} cached)"
           if r["prefill"] else "")
        + f" · {r['kv_heads']} KV heads (group size {r['group_size']})",
        "",
        f"  step time            {units.seconds(r['step_time_s']):>14}   {r['bound']}-bound",
        f"  decode throughput    {units.rate(r['tokens_per_s']):>14}   all users",
        f"  per-user rate        {units.rate(r['per_user_tokens_per_s']):>14}",
    ]
    if r["prefill"]:
        lines.append(f"  prefill throughput   {units.rate(r['prefill_tokens_per_s']):>14}")
    lines += [
        f"  attention share      {units.percent(r['attention_share']):>14}   of the parts' time",
        f"  MFU / MBU            {units.percent(r['mfu']):>7} / {units.percent(r['mbu'])}",
        "",
        f"  {'part':<12}{'FLOPs':>12}{'bytes':>12}{'time':>12}{'intensity':>16}  bound",
    ]
    rows = [(name, part) for name, part in r["parts"].items()]
    rows.append(("step", {"flops": r["flops"], "bytes": r["bytes"], "time_s": r["step_time_s"],
                          "intensity": r["intensity"], "bound": r["bound"]}))
    for name, part in rows:
        lines.append(
            f"  {name:<12}{units.si(part['flops'], 'FLOP'):>12}{units.si(part['bytes'], 'B'):>12}"
            f"{units.seconds(part['time_s']):>12}{units.intensity(part['intensity']):>16}"
            f"  {part['bound']}")
    max_batch = "unbounded" if r["max_batch"] is None else f"{r['max_batch']:,}"
    lines += [
        "",
        f"  ridge                {units.intensity(r['ridge']):>14}   peak / bandwidth",
        f"  intensity ceiling    {units.intensity(r['intensity_ceiling']):>14}   "
        "decode as batch → ∞ at this context",
        f"  throughput ceiling   {units.rate(r['throughput_ceiling_tokens_per_s']):>14}   "
        "bandwidth / (KV per token × context)",
        f"  KV per token         {units.si(r['kv_bytes_per_token'], 'B'):>14}   "
        f"{r['kv_bytes_per_token']:,.0f} B",
        f"  weights              {units.si(r['weight_bytes'], 'B'):>14}",
        f"  KV of this step      {units.si(r['kv_bytes'], 'B'):>14}   "
        + ("fits" if r["fits"] else "does NOT fit") + " in memory",
        f"  max batch in memory  {max_batch:>14}   at context {r['context']:,}, "
        f"reserve {a['memory_reserve_gb']:g} GB",
    ]
    if "max_batch_for_tpot" in r:
        best = r["max_batch_for_tpot"]
        lines.append(f"  max batch for TPOT   {('unbounded' if best is None else f'{best:,}'):>14}"
                     f"   step ≤ {units.seconds(r['tpot_budget_s'])}, memory aside")
    gemm = r["parts"]["gemm"]
    if r["batch"] + r["prefill"] and gemm["intensity"]:
        weight_bytes = bytes_per_element(r["weight_dtype"])
        tokens = r["batch"] + r["prefill"]
        noun = "token" if tokens == 1 else "tokens"
        lines += ["", f"  why: gemm intensity ≈ 2 FLOPs per weight × {tokens:,} {noun} / "
                      f"{weight_bytes:g} bytes per weight = {2 * tokens / weight_bytes:,.1f} "
                      f"(computed {gemm['intensity']:,.1f}); with 2-byte weights it equals "
                      "the token count, not half of it"]
    return "\n".join(lines)


@click.command()
@click.option("--rows", "-m", type=click.IntRange(min=1), multiple=True, default=(1, 8, 64, 256, 1024),
              show_default=True, help="Rows of the activation (the batch in decode); repeat.")
@click.option("--k", "k", type=click.IntRange(min=1), default=4096, show_default=True,
              help="Inner dimension (the layer's input width).")
@click.option("--n", "n", type=click.IntRange(min=1), default=14336, show_default=True,
              help="Output width of the weight matrix.")
@click.option("--dtype", type=DTYPE, default="bf16", show_default=True,
              help="Format of weights, input and output.")
@click.option("--ridge", type=click.FloatRange(min=0, min_open=True), default=295.0,
              show_default=True, help="FLOPs per byte to compare against.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def gemm(rows, k, n, dtype, ridge, as_json):
    """Intensity of one (ROWS x K) @ (K x N) matmul, counting weights, input and output.

    For ROWS much smaller than K and N this is 2·ROWS / bytes per element: the batch
    itself for 2-byte formats.
    """
    width = bytes_per_element(dtype)
    result = [{"rows": m, "k": k, "n": n, "dtype": dtype,
               "intensity": float(gemm_intensity(m, k, n, width)),
               "bound": "compute" if gemm_intensity(m, k, n, width) > ridge else "memory"}
              for m in rows]
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    click.echo(f"one ({k:,} x {n:,}) weight matmul in {dtype}, ridge {ridge:g} FLOP/B")
    for row in result:
        click.echo(f"  B={row['rows']:>5}: {row['intensity']:7.1f} FLOP/B -> {row['bound']}-bound")
