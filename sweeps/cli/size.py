"""`sweep size`: the smallest deployment (aggregated or disaggregated) on a system that
sustains a request rate under TTFT and TPOT objectives, and its bill."""

from __future__ import annotations

import click

from rooftui.core import units
from rooftui.core.disagg import deployments
from rooftui.sweeps.cli.disagg import NULL_REASONS, build_serving, describe, header, serving_options
from rooftui.sweeps.cli.options import Number, json_text


@click.command()
@click.option("--rate", type=Number("rate"), required=True, metavar="REQ_S",
              help="Requests per second to sustain.")
@serving_options
def size(rate, as_json, **options):
    """The fewest GPUs (aggregated or disaggregated, ties: the most tokens/s per GPU) that
    sustain --rate requests/s with the objectives met; with --price-per-gpu-hour, $/h and $
    per million output tokens.

    \b
    Example:
      sweep size --rate 20 --model llama-3-70b --system hgx-h200-ib --price-per-gpu-hour 3
    """
    serving = build_serving(options)
    best = deployments(serving, rate=rate)
    chosen = min((d for d in best.values() if d is not None),
                 key=lambda d: (d["gpus"], -d["tokens_per_s_per_gpu"]), default=None)
    report = {**header(serving), "rate_req_s": rate,
              "smallest": None if chosen is None else chosen["kind"], **best}
    reasons = {**NULL_REASONS, "smallest": f"nothing within --max-gpus {serving.max_gpus} "
                                           "sustains the rate under the objectives"}
    if as_json:
        click.echo(json_text(report, reasons))
        return
    click.echo(f"{rate:g} req/s of {serving.model.name} on {serving.system.name} · TTFT ≤ "
               f"{units.seconds(serving.slo_ttft)}, TPOT ≤ {units.seconds(serving.slo_tpot)}")
    if chosen is None:
        click.echo(reasons["smallest"])
    for name in ("disaggregated", "aggregated"):
        mark = " (smallest)" if chosen is not None and chosen["kind"] == name else ""
        click.echo("\n".join(describe(best[name], name + mark)))
