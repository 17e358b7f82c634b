"""`sweep point`: one step on the roofline, as a table or JSON; `sweep gemm`: one matmul."""

from __future__ import annotations

import click

from rooftui.core import units
from rooftui.core.dtypes import bytes_per_element
from rooftui.sweeps.cli.options import (
    DTYPE,
    JSON_NULLS,
    Number,
    build_config,
    json_text,
    parallel_options,
    setup_options,
)


@click.command()
@setup_options
@parallel_options
@click.option("--batch", "-b", type=Number("batch"), default=1, show_default=True,
              help="Decode sequences in the step (one token each).")
@click.option("--context", "-s", type=Number("context"), default=1024, show_default=True,
              help="Tokens already cached per decode sequence.")
@click.option("--prefill", type=Number("prefill"), default=0, show_default=True,
              help="Prefill tokens in the step (a prompt or a chunk of one).")
@click.option("--prefill-context", type=Number("prefill_context"), default=0, show_default=True,
              help="Tokens of that prompt already cached (earlier chunks).")
@click.option("--tpot-budget", type=Number("tpot_budget"), metavar="SECONDS",
              help="Also report the largest batch whose decode step fits this time.")
@click.option("--json", "as_json", is_flag=True, help=f"Print one JSON object. {JSON_NULLS}")
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
      sweep point --model mixtral-8x7b --batch 64 --tp 2 --price-per-gpu-hour 2.5
      sweep point --model llama-3-70b --tp 4 --spec-tokens 4 --acceptance 0.7
      # the kernel profile's TensorRT-LLM all-reduce instead of NCCL's (the default)
      sweep point --gpu h100-sxm --profile h100-sxm-kernels --model llama-3-70b --tp 8 \\
          --collective-library trtllm
      sweep point --model gpt-oss-120b --draft-model gpt-oss-20b --spec-tokens 3 --acceptance 0.6
      sweep point --model deepseek-v3 --system gb200-nvl72 --dp 32 --ep 32 --batch 64
      sweep point --model llama-3.1-405b --system hgx-h100-ib --tp 8 --pp 2

    Energy per token uses the GPU's board power (tdp_w), an upper bound: a memory-bound
    step draws less.
    """
    config = build_config(setup, batch=batch, context=context, prefill=prefill,
                          prefill_context=prefill_context, tpot_budget=tpot_budget)
    from rooftui.core.assumptions import interval_report
    from rooftui.core.point import point_report  # numpy: not for `sweep point --help`

    report = point_report(config)
    report["calibration"] = interval_report(config.assumptions, {
        "step_time_s": ("step", report["step_time_s"])}, {
        name: ("step", report[name]) for name in (
            "tokens_per_s", "per_user_tokens_per_s", "tokens_per_s_per_gpu",
            "prefill_tokens_per_s") if report.get(name)})
    for warning in report["warnings"]:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        click.echo(json_text(report, null_reasons(config)))
    else:
        click.echo(render_report(report))


# ratios over the step's tokens: undefined when it has none
PER_TOKEN = ("tokens_per_s", "tokens_per_s_per_gpu", "per_user_tokens_per_s", "intensity",
             "parts.gemm.intensity", "parts.attention.intensity", "attention_share", "mfu",
             "mbu", "energy_j_per_token", "cost_per_million_tokens")


def null_reasons(config) -> dict[str, str]:
    """Why a metric of `sweep point --json` can be null (those that are null say so)."""
    reasons = {"prefill_tokens_per_s": "no prefill tokens in the step",
               "throughput_ceiling_tokens_per_s": "no cached context: KV reads do not bound "
                                                  "decode throughput",
               "intensity_ceiling": "no cached context: the decode intensity grows without "
                                    "bound with the batch",
               "max_batch": "unbounded: a decode sequence at this context holds no KV",
               "max_batch_for_tpot": "unbounded: every batch fits the TPOT budget",
               "energy_j_per_token": "the GPU spec gives no tdp_w",
               "cost_per_million_tokens": "no --price-per-gpu-hour given",
               "parallelism.system": "no --system: collectives use the GPU's interconnect",
               "parallelism.gpus_per_domain": "no --system: no NVLink domain is modelled",
               "calibration.interval": "the profile has no [interval] (the ideal one is a "
                                       "bound; an assumed one is not fitted)",
               "assumptions.collective_library": "none selected: all-reduces pay the "
                                                 "profile's base parameters",
               "calibration.interval.transferred_from": "fitted on this GPU, not "
                                                        "transferred"}
    if not config.batch and not config.prefill:
        reasons.update(dict.fromkeys(PER_TOKEN, "no tokens in the step"))
    return reasons


def render_report(r: dict) -> str:
    """The human table: headline figures, the parts, memory, and why."""
    a = r["assumptions"]
    experts = f", experts {r['expert_weight_dtype']}" if r["expert_weight_dtype"] else ""
    layout = r["parallelism"]
    replica = f" · tp {r['tp']} (figures per GPU, rates per replica)" if r["tp"] > 1 else ""
    if layout["gpus"] > layout["tp"] or layout["system"]:
        replica = (f" · tp {layout['tp']} × dp {layout['dp']} × pp {layout['pp']}, "
                   f"ep {layout['ep']} = {layout['gpus']} GPUs"
                   + (f" on {layout['system']}" if layout["system"] else "")
                   + " (figures per GPU of one attention group and stage, rates per replica)")
    if r["attention_kind"] == "MLA":
        heads = "MLA: one latent per token for all heads"
    else:
        heads = f"{r['kv_heads']} KV heads (group size {r['group_size']})"
    lines = [
        f"{r['model']} on {r['gpu']} · weights {r['weight_dtype']}{experts}, "
        f"KV {r['kv_dtype']}, compute {r['compute_dtype']} · profile {a['profile']} "
        f"(mfu {a['mfu']:g}, mbu {a['mbu']:g}, overlap {a['overlap']}"
        + (f", all-reduce {a['collective_library']}" if a["collective_library"] else "")
        + f"){replica}",
        f"batch {r['batch']:,} × context {r['context']:,}"
        + (f" + prefill {r['prefill']:,} (after {r['prefill_context']:,} cached)"
           if r["prefill"] else "")
        + f" · {heads}",
    ]
    spec = r["speculative"]
    if spec:
        draft = spec["draft_model"] or "free drafting (n-gram / prompt lookup)"
        lines.append(f"speculative: {spec['spec_tokens']} drafted by {draft}, acceptance "
                     f"{spec['acceptance']:g} → {spec['expected_tokens_per_step']:.2f} tokens "
                     "per sequence per step")
    calibration = r.get("calibration") or {}
    if calibration:
        lines.append(f"calibration: {calibration['provenance']}")
    interval = calibration.get("interval") or {"bounds": {}}
    if calibration.get("interval") and not interval["bounds"]:
        lines.append("  (its interval bounds end-to-end TTFT and TPOT, not one step: "
                     "`sweep simulate` prints them)")

    def bounds(name: str, show) -> str:
        if name not in interval["bounds"]:
            return ""
        low, high = interval["bounds"][name]
        return f"   {100 * interval['level']:g} % interval {show(low)}-{show(high)}"

    lines += [
        "",
        f"  step time            {units.seconds(r['step_time_s']):>14}   {r['bound']}-bound"
        + bounds("step_time_s", units.seconds),
        f"  decode throughput    {units.rate(r['tokens_per_s']):>14}   all users"
        + bounds("tokens_per_s", units.rate),
        f"  per-user rate        {units.rate(r['per_user_tokens_per_s']):>14}"
        + bounds("per_user_tokens_per_s", units.rate),
    ]
    if layout["gpus"] > 1:
        lines.append(f"  per GPU              {units.rate(r['tokens_per_s_per_gpu']):>14}"
                     + bounds("tokens_per_s_per_gpu", units.rate))
    if r["prefill"]:
        lines.append(f"  prefill throughput   {units.rate(r['prefill_tokens_per_s']):>14}"
                     + bounds("prefill_tokens_per_s", units.rate))
    lines += [
        f"  attention share      {units.percent(r['attention_share']):>14}   of the parts' time",
        f"  MFU / MBU            {units.percent(r['mfu']):>7} / {units.percent(r['mbu'])}",
        "",
        f"  {'part':<20}{'FLOPs':>12}{'bytes':>12}{'time':>12}{'intensity':>16}  bound",
    ]
    rows = [(name, part) for name, part in r["parts"].items()]
    if r["overhead_s"]:  # a calibrated profile's fixed time per step and per layer
        rows.append(("overhead", {"flops": 0.0, "bytes": 0.0, "time_s": r["overhead_s"],
                                  "intensity": None, "bound": "fixed"}))
    from rooftui.core.point import host_row  # numpy, as below
    if (host := host_row(r)) is not None:  # an overlapping scheduler's host time per step
        rows.append(("host", host))
    rows.append(("step", {"flops": r["flops"], "bytes": r["bytes"], "time_s": r["step_time_s"],
                          "intensity": r["intensity"], "bound": r["bound"]}))
    for name, part in rows:
        lines.append(
            f"  {name:<20}{units.si(part['flops'], 'FLOP'):>12}{units.si(part['bytes'], 'B'):>12}"
            f"{units.seconds(part['time_s']):>12}{units.intensity(part['intensity']):>16}"
            f"  {part['bound']}")
    lines += _collective_lines(r)
    max_batch = "unbounded" if r["max_batch"] is None else f"{r['max_batch']:,}"
    per_gpu = " per GPU" if layout["gpus"] > 1 else ""
    lines += [
        "",
        f"  ridge                {units.intensity(r['ridge']):>14}   peak / bandwidth",
        f"  intensity ceiling    {units.intensity(r['intensity_ceiling']):>14}   "
        "decode as batch → ∞ at this context",
        f"  throughput ceiling   {units.rate(r['throughput_ceiling_tokens_per_s']):>14}   "
        "bandwidth / (KV per token × context)",
        f"  KV per token         {units.si(r['kv_bytes_per_token'], 'B'):>14}   "
        f"{r['kv_bytes_per_token']:,.0f} B (all GPUs)",
        f"  weights              {units.si(r['weight_bytes'], 'B'):>14}{per_gpu}",
        f"  KV of this step      {units.si(r['kv_bytes'], 'B'):>14}{per_gpu}   "
        + ("fits" if r["fits"] else "does NOT fit") + " in memory",
        f"  max batch in memory  {max_batch:>14}   at context {r['context']:,}, "
        f"reserve {a['memory_reserve_gb']:g} GB",
    ]
    if "max_batch_for_tpot" in r:
        best = r["max_batch_for_tpot"]
        lines.append(f"  max batch for TPOT   {('unbounded' if best is None else f'{best:,}'):>14}"
                     f"   time per token ≤ {units.seconds(r['tpot_budget_s'])}, memory aside")
    if r["energy_j_per_token"] is not None:
        lines.append(f"  energy per token     {r['energy_j_per_token']:>12.3g} J   at "
                     f"{r['board_power_w']:g} W board power × {layout['tp'] * layout['pp']} "
                     "GPU(s), an upper bound")
    if r["cost_per_million_tokens"] is not None:
        lines.append(f"  cost per 1M tokens   {r['cost_per_million_tokens']:>14,.4g}   at "
                     f"{r['price_per_gpu_hour']:g} per GPU-hour × "
                     f"{layout['tp'] * layout['pp']} GPU(s)")
    lines += _why(r)
    return "\n".join(lines)


def _collective_lines(r: dict) -> list[str]:
    """Each collective's bytes per GPU, the link it crosses and its time."""
    if not r["collectives"]:
        return []
    from rooftui.core.point import link_label  # numpy, as above
    lines = ["", f"  {'collective':<20}{'bytes':>12}{'time':>12}  link"]
    for name, link in r["collectives"].items():
        lines.append(f"  {name:<20}{units.si(link['bytes'], 'B'):>12}"
                     f"{units.seconds(link['time_s']):>12}  {link_label(link)}")
    layout, moe = r["parallelism"], r["moe"]
    if layout["pp"] > 1:
        lines.append(f"  pipeline bubble      ×{layout['bubble']:.3f}   ({layout['micro_batches']} "
                     f"micro-batches over {layout['pp']} stages: (M + pp − 1) / M)")
    if moe and "busiest_gpu_pairs_per_layer" in moe:
        lines.append(f"  busiest expert GPU   {moe['busiest_gpu_pairs_per_layer']:>14,.1f}   "
                     f"(token, expert) pairs per MoE layer; mean "
                     f"{moe['mean_gpu_pairs_per_layer']:,.1f}")
    return lines


def _why(r: dict) -> list[str]:
    """One line on what sets the GEMM's intensity."""
    gemm = r["parts"]["gemm"]
    tokens = r["batch"] * ((r["speculative"] or {}).get("spec_tokens", 0) + 1) + r["prefill"]
    if not tokens or not gemm["intensity"]:
        return []
    if r["moe"]:
        moe = r["moe"]
        return ["", f"  why: {tokens:,} tokens, {moe['experts_per_token']} experts each, touch "
                    f"{moe['experts_touched_per_layer']:,.1f} of {moe['experts']} routed experts "
                    "per MoE layer (E·(1 − (1 − k/E)^T)): the weights read grow with the batch "
                    f"until every expert is read; gemm intensity {gemm['intensity']:,.1f}"]
    weight_bytes = bytes_per_element(r["weight_dtype"])
    return ["", f"  why: gemm intensity ≈ 2 FLOPs per weight × {tokens:,} tokens / "
                f"{weight_bytes:g} bytes per weight = {2 * tokens / weight_bytes:,.1f} "
                f"(computed {gemm['intensity']:,.1f}); with 2-byte weights it equals "
                "the token count, not half of it"]


@click.command()
@click.option("--rows", "-m", type=Number("matrix_dimension"), multiple=True, default=(1, 8, 64, 256, 1024),
              show_default=True, help="Rows of the activation (the batch in decode); repeat.")
@click.option("--k", "k", type=Number("matrix_dimension"), default=4096, show_default=True,
              help="Inner dimension (the layer's input width).")
@click.option("--n", "n", type=Number("matrix_dimension"), default=14336, show_default=True,
              help="Output width of the weight matrix.")
@click.option("--dtype", type=DTYPE, default="bf16", show_default=True,
              help="Format of weights, input and output.")
@click.option("--ridge", type=Number("ridge"), default=295.0,
              show_default=True, help="FLOPs per byte to compare against.")
@click.option("--json", "as_json", is_flag=True, help=f"Print JSON. {JSON_NULLS}")
def gemm(rows, k, n, dtype, ridge, as_json):
    """Intensity of one (ROWS x K) @ (K x N) matmul, counting weights, input and output.

    For ROWS much smaller than K and N this is 2·ROWS / bytes per element: the batch
    itself for 2-byte formats.
    """
    from rooftui.core.closed_forms import gemm_intensity  # numpy, as above

    width = bytes_per_element(dtype)
    result = [{"rows": m, "k": k, "n": n, "dtype": dtype,
               "intensity": float(gemm_intensity(m, k, n, width)),
               "bound": "compute" if gemm_intensity(m, k, n, width) > ridge else "memory"}
              for m in rows]
    if as_json:
        click.echo(json_text(result))
        return
    click.echo(f"one ({k:,} x {n:,}) weight matmul in {dtype}, ridge {ridge:g} FLOP/B")
    for row in result:
        click.echo(f"  B={row['rows']:>5}: {row['intensity']:7.1f} FLOP/B -> {row['bound']}-bound")
