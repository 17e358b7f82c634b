"""Options shared by every command that evaluates the step model, and how they become a
`PointConfig`: explicit flags override the profile, the profile overrides the defaults."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import click

from rooftui.core import limits
from rooftui.core.dtypes import BYTES_PER_ELEMENT
from rooftui.core.errors import SpecError

if TYPE_CHECKING:
    from rooftui.core.point import PointConfig

DEFAULT_GPU = "h100-sxm"
DEFAULT_MODEL = "llama-3-8b"
DTYPE = click.Choice(sorted(BYTES_PER_ELEMENT))


class Number(click.ParamType):
    """A numeric option checked against `core.limits.BOUNDS[bound]` (click's FloatRange
    takes `nan` and `inf`): finite, in range, whole where it must be; the error names the
    option and states the range. `changes` narrow the bound for one option
    (`Number("batch", minimum=1)`)."""

    def __init__(self, bound: str, **changes: float) -> None:
        self.bound = replace(limits.BOUNDS[bound], **changes)
        self.name = "integer" if self.bound.integer else "number"

    def convert(self, value, param, ctx):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return self.bound.check(value, param.name if param else "value")  # a default
        text = str(value).strip()
        try:
            parsed = int(text) if self.bound.integer else float(text)
        except ValueError:
            try:
                parsed = float(text)  # 1e3 for a whole number; 5,000 digits become inf
            except ValueError:
                parsed = None
        try:
            return self.bound.check(parsed, "value")
        except SpecError:
            shown = text if len(text) <= 24 else f"{text[:20]}... ({len(text)} characters)"
            self.fail(f"expected {self.bound.describe()}, got {shown!r}", param, ctx)

    def get_metavar(self, param, ctx=None) -> str:
        return "N" if self.bound.integer else "X"



def setup_options(command: Callable) -> Callable:
    """GPU, model, dtypes and assumptions: everything but the step's token counts."""
    options = [
        click.option("--gpu", default=DEFAULT_GPU, show_default=True, metavar="NAME|PATH",
                     help="Shipped GPU (`sweep specs list gpus`) or a GPU TOML file."),
        click.option("--model", default=DEFAULT_MODEL, show_default=True, metavar="NAME|PATH",
                     help="Shipped model, a model TOML, or a Hugging Face config.json."),
        click.option("--kv-heads", type=Number("kv_heads"), metavar="H",
                     help="KV heads instead of the model's own (a GQA/MQA what-if)."),
        click.option("--weight-dtype", type=DTYPE,
                     help="Weight format [default: the model's]. int4-g128/int8-g128 add a "
                          "16-bit scale per 128 weights; mxfp4 is 4.25 bits per weight."),
        click.option("--expert-dtype", type=DTYPE,
                     help="Routed experts' format [default: the model's (mxfp4 for gpt-oss), "
                          "else --weight-dtype]."),
        click.option("--kv-dtype", type=DTYPE, help="KV-cache format [default: bf16]."),
        click.option("--compute-dtype", type=DTYPE,
                     help="Format the matmuls run in, which picks the peak "
                          "[default: follows the weights; weight-only int4/int8/fp4/mxfp4: "
                          "bf16; fp8 weights and activations: fp8]."),
        click.option("--tp", type=Number("tp"), default=1, show_default=True,
                     metavar="N",
                     help="Tensor parallelism: split weights, heads and KV over N GPUs, "
                          "adding two all-reduces per layer over the interconnect. "
                          "Throughput, capacity and cost are per replica of N GPUs."),
        click.option("--spec-tokens", type=Number("spec_tokens"), default=0, show_default=True,
                     metavar="K",
                     help="Speculative decoding: K drafted tokens verified per step."),
        click.option("--acceptance", type=Number("acceptance"), metavar="A",
                     help="Acceptance rate of a drafted token (with --spec-tokens); a step "
                          "yields (1 - A^(K+1)) / (1 - A) tokens per sequence."),
        click.option("--draft-model", metavar="NAME|PATH",
                     help="Draft model for --spec-tokens (its K steps are counted) "
                          "[default: none, drafting is free: n-gram or prompt lookup]."),
        click.option("--price-per-gpu-hour", type=Number("price_per_gpu_hour"), metavar="PRICE",
                     help="Also report the cost per million tokens, in the same currency."),
        click.option("--profile", default="ideal", show_default=True, metavar="NAME|PATH",
                     help="Assumption profile (`sweep specs list profiles`) or a TOML file; "
                          "calibrated: the GPU's kernel profile, or one transferred to it."),
        click.option("--mfu", type=Number("mfu"), help="Fraction of dense peak FLOP/s reached."),
        click.option("--mbu", type=Number("mbu"), help="Fraction of peak bandwidth reached."),
        click.option("--overlap", type=click.Choice(["parts", "full"]),
                     help="parts: sum the parts' rooflines; full: one roofline over the sums."),
        click.option("--attention-flops", type=click.Choice(["causal", "full"]),
                     help="Prefill scores: causal triangle or the full square."),
        click.option("--activation-traffic/--no-activation-traffic", default=None,
                     help="Count hidden states read and written between kernels."),
        click.option("--kv-write/--no-kv-write", default=None,
                     help="Count writing the step's new K and V."),
        click.option("--memory-reserve-gb", type=Number("memory_reserve_gb"), metavar="GB",
                     help="Memory held back from the KV cache."),
        click.option("--collective-library", type=click.Choice(["nccl", "trtllm"]),
                     help="Whose fitted all-reduce parameters the step's collectives pay: "
                          "the profile's [efficiency.nccl] or [efficiency.trtllm] table "
                          "(NCCL, TensorRT-LLM's custom all-reduce) [default: the "
                          "profile's collective_library, else its base values]."),
        click.option("--peak-tflops", type=Number("peak_tflops"),
                     metavar="TFLOPS",
                     help="What-if: another dense peak for the compute dtype."),
        click.option("--bandwidth-tbs", type=Number("bandwidth_tbs"),
                     metavar="TBS", help="What-if: another memory bandwidth (TB/s)."),
        click.option("--memory-gb", type=Number("memory_gb"), metavar="GB",
                     help="What-if: another memory capacity (GB)."),
    ]
    return functools.reduce(lambda cmd, option: option(cmd), reversed(options), command)


def parallel_options(command: Callable) -> Callable:
    """Pipeline, expert and attention-data parallelism and the system (core/parallel.py)."""
    options = [
        click.option("--pp", type=Number("pp"), default=1, show_default=True, metavar="N",
                     help="Pipeline stages: each holds 1/N of the layers; activations cross "
                          "each stage boundary."),
        click.option("--micro-batches", type=Number("micro_batches"), metavar="M",
                     help="Micro-batches a step runs over the pipeline; the step takes "
                          "(M + pp - 1)/M of the busy time [default: pp]."),
        click.option("--ep", type=Number("ep"), default=1, show_default=True, metavar="N",
                     help="Expert parallelism: routed experts split over N = tp x dp GPUs, "
                          "tokens dispatched and combined by all-to-all."),
        click.option("--dp", type=Number("dp"), default=1, show_default=True, metavar="N",
                     help="Data-parallel attention: N groups of tp GPUs per stage, each with "
                          "its own --batch (with --ep, as DeepSeek deployments run)."),
        click.option("--system", metavar="NAME|PATH",
                     help="System (`sweep specs list systems`): its GPU replaces --gpu, and "
                          "each collective is timed on the link it crosses (NVLink domain "
                          "or network) [default: the GPU's interconnect, no latency]."),
    ]
    return functools.reduce(lambda cmd, option: option(cmd), reversed(options), command)


PARALLEL_KEYS = ("pp", "micro_batches", "ep", "dp", "system")

SETUP_KEYS = (
    "gpu", "model", "kv_heads", "weight_dtype", "kv_dtype", "compute_dtype", "profile", "mfu",
    "mbu", "overlap", "attention_flops", "activation_traffic", "kv_write", "memory_reserve_gb",
    "peak_tflops", "bandwidth_tbs", "memory_gb", "expert_dtype", "tp", "spec_tokens",
    "acceptance", "draft_model", "price_per_gpu_hour", "collective_library",
)


def build_config(params: dict, **step: object) -> PointConfig:
    """A `PointConfig` from the shared options in `params` and the step's token counts."""
    # here, not at the top: `sweep X --help` then starts without numpy
    from rooftui.core.assumptions import load_profile
    from rooftui.core.hardware import load_gpu
    from rooftui.core.model import load_model
    from rooftui.core.point import ASSUMPTION_OVERRIDES, LIBRARY_OVERRIDE, named_config
    from rooftui.core.systems import load_system

    # `calibrated` resolves for the GPU the step runs on: a system brings its own
    profile_gpu = load_system(params["system"]).gpu if params.get("system") else params["gpu"]
    config = named_config(
        params["gpu"], params["model"], params["profile"], kv_heads=params.get("kv_heads"),
        draft_model=params.get("draft_model"), weight_dtype=params.get("weight_dtype"),
        kv_dtype=params.get("kv_dtype"), compute_dtype=params.get("compute_dtype"),
        expert_weight_dtype=params.get("expert_dtype"), tp=params.get("tp") or 1,
        spec_tokens=params.get("spec_tokens") or 0, acceptance=params.get("acceptance"),
        price_per_gpu_hour=params.get("price_per_gpu_hour"),
        **{key: params[key] for key in PARALLEL_KEYS if params.get(key) is not None},
        **{key: params.get(key) for key in (*ASSUMPTION_OVERRIDES, LIBRARY_OVERRIDE)},
        **step,
        loaders=(load_gpu, load_model, functools.partial(load_profile, gpu=profile_gpu)))
    gpu = config.gpu.with_overrides(
        peak_tflops=params.get("peak_tflops"), bandwidth_tbs=params.get("bandwidth_tbs"),
        memory_gb=params.get("memory_gb"), compute_dtype=config.resolved_compute_dtype)
    return config.with_changes(gpu=gpu)


# --- strict JSON -----------------------------------------------------------------------

DEFAULT_NULL_REASON = "undefined for this input (not a finite number)"
JSON_NULLS = "Strict JSON: a number undefined here is null, null_reasons says why."
_MISSING = object()


def json_text(report: dict | list, reasons: dict[str, str] | None = None) -> str:
    """`--json` output, always strict JSON (see `strict_report`)."""
    import json  # only --json needs it: not imported on every start

    return json.dumps(strict_report(report, reasons), indent=2, allow_nan=False)


def strict_report(report: dict | list, reasons: dict[str, str] | None = None) -> dict | list:
    """`report` with every number that is undefined or infinite for this input (0/0, x/0)
    made null. An object gets `null_reasons`, mapping the dotted path of each such null,
    and of each null that `reasons` explains, to why ({"tokens_per_s": "no tokens in the
    step"}); a list's objects get theirs each."""
    if isinstance(report, list):
        return [strict_report(item, reasons) for item in report]
    nulls: dict[str, str] = {}
    clean = _finite_tree(report, "", nulls)
    if isinstance(clean, dict):
        nulls.update({path: reason for path, reason in (reasons or {}).items()
                      if _lookup(clean, path) is None})
        clean["null_reasons"] = dict(sorted(nulls.items()))
    return clean


def _finite_tree(value, path: str, nulls: dict[str, str]):
    if isinstance(value, dict):
        return {key: _finite_tree(item, f"{path}.{key}" if path else str(key), nulls)
                for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_tree(item, f"{path}[{i}]", nulls) for i, item in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        nulls[path] = DEFAULT_NULL_REASON
        return None
    return value


def _lookup(tree: dict, path: str):
    """The value at a dotted path; `_MISSING` when the path is not there."""
    node = tree
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return node
