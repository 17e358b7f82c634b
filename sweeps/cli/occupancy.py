"""`sweep occupancy`: the useful share of a static batch, E[L] / E[max of B draws]."""

from __future__ import annotations

import click

from rooftui.core import units
from rooftui.core.lengths import parse_distribution
from rooftui.core.occupancy import occupancy_report
from rooftui.core.workloads import load_workload
from rooftui.sweeps.cli.options import JSON_NULLS, Number, json_text
from rooftui.sweeps.derive_workloads import read_trace_file


@click.command()
@click.option("--output-tokens", metavar="DIST",
              help="Output lengths: fixed:N, exp:mean=M[,cap=C], lognormal:median=M,sigma=S"
                   "[,cap=C], bimodal:p=P,a=A,b=B[,cap=C], empirical:PATH.")
@click.option("--workload", "-w", metavar="NAME|PATH",
              help="Use a preset's or a trace file's output lengths instead.")
@click.option("--batch", "-b", type=Number("max_batch"), multiple=True, required=True,
              help="Static batch size B; repeat for several.")
@click.option("--json", "as_json", is_flag=True,
              help=f"Print JSON: one object (several batches: a list of them). {JSON_NULLS}")
def occupancy(output_tokens, workload, batch, as_json):
    """Slot occupancy of static batching: a batch of B runs until its longest output
    finishes, so only E[L] / E[max of B draws] of its slot-steps do useful work.

    Exact: exponential gives 1/H_B; empirical traces use the exact order statistics of
    the trace; quantile-table presets a closed form; other laws integrate 1 - F(x)^B.

    \b
    Examples:
      sweep occupancy --output-tokens exp:mean=100 --batch 32
      sweep occupancy --workload azure-conv-2023 -b 4 -b 32 -b 128
      sweep occupancy --output-tokens "bimodal:p=0.6,a=100,b=500,cap=1000" -b 32 --json
    """
    if (output_tokens is None) == (workload is None):
        raise click.UsageError("give one of --output-tokens DIST or --workload NAME|PATH")
    if workload is not None:
        distribution = load_workload(workload, read_trace_file).output_tokens
        label = f"{workload} output tokens"
    else:
        distribution = parse_distribution(output_tokens, "output_tokens", read_trace_file)
        label = output_tokens
    reports = [occupancy_report(distribution, b) for b in batch]
    for report in reports:
        report["distribution"] = label
    if as_json:
        click.echo(json_text(reports[0] if len(reports) == 1 else reports))
        return
    click.echo(f"static-batch occupancy of {label} (mean {reports[0]['mean_tokens']:,.1f} "
               f"tokens; {reports[0]['method']})")
    for r in reports:
        click.echo(f"  B = {r['batch']:>5,}: occupancy {r['occupancy']:.4f} "
                   f"({units.percent(r['occupancy'])}) · E[max] "
                   f"{r['expected_max_tokens']:,.1f} tokens · exponential 1/H_B "
                   f"{r['exponential_occupancy']:.4f}")
