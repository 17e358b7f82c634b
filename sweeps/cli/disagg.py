"""`sweep disagg`: the best disaggregated (prefill pool + decode pool) deployment on a
system under TTFT and TPOT objectives, with the best aggregated one beside it."""

from __future__ import annotations

import functools
from collections.abc import Callable

import click

from rooftui.core import units
from rooftui.core.assumptions import load_profile
from rooftui.core.disagg import Serving, deployments, mean_lengths
from rooftui.core.dtypes import default_compute_dtype
from rooftui.core.model import load_model
from rooftui.core.systems import load_system
from rooftui.core.workloads import load_workload
from rooftui.sweeps.cli.options import DTYPE, JSON_NULLS, Number, json_text


def serving_options(command: Callable) -> Callable:
    options = [
        click.option("--model", default="llama-3-70b", show_default=True, metavar="NAME|PATH"),
        click.option("--system", default="hgx-h200-ib", show_default=True, metavar="NAME|PATH",
                     help="System (`sweep specs list systems`)."),
        click.option("--workload", default="sharegpt-8k", show_default=True,
                     metavar="NAME|PATH", help="Its mean prompt and output lengths are used."),
        click.option("--input-tokens", type=Number("tokens", minimum=1), metavar="N",
                     help="Prompt length instead of the workload's mean."),
        click.option("--output-tokens", type=Number("tokens", minimum=1), metavar="N",
                     help="Output length instead of the workload's mean."),
        click.option("--slo-ttft", type=Number("slo_ttft"), default=1.0, show_default=True,
                     metavar="S", help="Mean time to first token, seconds."),
        click.option("--slo-tpot", type=Number("slo_tpot"), default=0.05, show_default=True,
                     metavar="S", help="Time per output token, seconds."),
        click.option("--weight-dtype", type=DTYPE, help="[default: the model's]"),
        click.option("--expert-dtype", type=DTYPE, help="[default: the model's experts']"),
        click.option("--kv-dtype", type=DTYPE, default="bf16", show_default=True),
        click.option("--compute-dtype", type=DTYPE, help="[default: follows the weights]"),
        click.option("--profile", default="ideal", show_default=True, metavar="NAME|PATH"),
        click.option("--max-gpus", type=Number("max_gpus"), default=64, show_default=True,
                     metavar="N", help="GPUs a deployment may use."),
        click.option("--price-per-gpu-hour", type=Number("price_per_gpu_hour"),
                     metavar="PRICE", help="For $/h and $ per million output tokens."),
        click.option("--json", "as_json", is_flag=True, help=f"Print JSON. {JSON_NULLS}"),
    ]
    return functools.reduce(lambda cmd, option: option(cmd), reversed(options), command)


def build_serving(options: dict) -> Serving:
    model = load_model(options["model"])
    length, output = mean_lengths(load_workload(options["workload"]))
    weight = options["weight_dtype"] or model.weight_dtype
    expert = options["expert_dtype"] or (model.expert_weight_dtype
                                         if not options["weight_dtype"] else None)
    return Serving(
        model=model, system=load_system(options["system"]),
        input_tokens=float(options["input_tokens"] or length),
        output_tokens=float(options["output_tokens"] or output),
        slo_ttft=options["slo_ttft"], slo_tpot=options["slo_tpot"], weight_dtype=weight,
        kv_dtype=options["kv_dtype"],
        compute_dtype=options["compute_dtype"] or default_compute_dtype(weight),
        expert_weight_dtype=expert if model.is_moe else None,
        assumptions=load_profile(options["profile"]), max_gpus=int(options["max_gpus"]),
        price_per_gpu_hour=options["price_per_gpu_hour"])


def header(serving: Serving) -> dict:
    return {"model": serving.model.name, "system": serving.system.name,
            "gpu": serving.system.gpu.name, "input_tokens": serving.input_tokens,
            "output_tokens": serving.output_tokens, "slo_ttft_s": serving.slo_ttft,
            "slo_tpot_s": serving.slo_tpot, "weight_dtype": serving.weight_dtype,
            "kv_dtype": serving.kv_dtype, "compute_dtype": serving.compute_dtype,
            "max_gpus": serving.max_gpus, "price_per_gpu_hour": serving.price_per_gpu_hour}


NULL_REASONS = {"disaggregated": "no deployment meets the objectives",
                "aggregated": "no deployment meets the objectives",
                "disaggregated.cost_per_hour": "no --price-per-gpu-hour given",
                "disaggregated.cost_per_million_tokens": "no --price-per-gpu-hour given",
                "aggregated.cost_per_hour": "no --price-per-gpu-hour given",
                "aggregated.cost_per_million_tokens": "no --price-per-gpu-hour given",
                "aggregated.prefill": "aggregated: prefill runs in the decode replicas",
                "aggregated.kv_transfer": "aggregated: no KV moves between pools"}


def describe(best: dict | None, name: str) -> list[str]:
    if best is None:
        return [f"{name}: no deployment meets the objectives"]
    decode = best["decode"]
    lines = [f"{name}: {best['gpus']} GPUs, {best['rate_req_s']:.3g} req/s, "
             f"{units.rate(best['tokens_per_s_per_gpu'])} per GPU, "
             f"{units.rate(best['tokens_per_s_per_user'])} per user, "
             f"{best['req_s_per_gpu']:.3g} req/s per GPU, TTFT "
             f"{units.seconds(best['ttft_s'])}, TPOT {units.seconds(best['tpot_s'])}"]
    if best["prefill"]:
        p, kv = best["prefill"], best["kv_transfer"]
        lines.append(f"  prefill: {p['replicas']} × {p['layout']} ({p['gpus']} GPUs), "
                     f"{units.seconds(p['prefill_time_s'])} per prompt")
        lines.append(f"  KV transfer: {units.si(kv['bytes_per_request'], 'B')} per request "
                     f"over {kv['link']}, {units.seconds(kv['transfer_time_s'])}")
    lines.append(f"  decode: {decode['replicas']} × {decode['layout']} ({decode['gpus']} GPUs), "
                 f"batch {decode['batch_per_group']} per attention group"
                 + (f", prefill chunk {decode['prefill_chunk_tokens']:,.0f} tokens per step"
                    if "prefill_chunk_tokens" in decode else ""))
    if best["cost_per_hour"] is not None:
        lines.append(f"  cost: {best['cost_per_hour']:,.2f} per hour, "
                     f"{best['cost_per_million_tokens']:,.4g} per million output tokens")
    return lines


@click.command()
@serving_options
def disagg(as_json, **options):
    """The best disaggregated deployment (prefill pool, decode pool, each pool's layout and
    replicas, decode batch) by output tokens/s per GPU under --slo-ttft and --slo-tpot, and
    the best aggregated one beside it (core/disagg.py: a fluid model at the workload's mean
    lengths with M/D/c queueing of prompts).

    \b
    Examples:
      sweep disagg --model llama-3-70b --system hgx-h200-ib --workload sharegpt-8k \\
                   --slo-ttft 0.3 --slo-tpot 0.02
      sweep disagg --model deepseek-v3 --system gb200-nvl72 --max-gpus 72 --json
    """
    serving = build_serving(options)
    best = deployments(serving)
    report = {**header(serving), **best}
    if as_json:
        click.echo(json_text(report, NULL_REASONS))
        return
    click.echo(f"{serving.model.name} on {serving.system.name} · prompt "
               f"{serving.input_tokens:,.0f} / output {serving.output_tokens:,.0f} tokens · "
               f"TTFT ≤ {units.seconds(serving.slo_ttft)}, TPOT ≤ "
               f"{units.seconds(serving.slo_tpot)} · up to {serving.max_gpus} GPUs")
    for name in ("disaggregated", "aggregated"):
        click.echo("\n".join(describe(best[name], name)))
