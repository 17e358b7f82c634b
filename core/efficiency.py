"""How far real kernels and engines fall short of the roofline: a closed-form model.

A datasheet roofline is a bound. Measured steps pay more, in ways with a clear shape:

- a fixed cost per engine step (scheduling, sampling, the host launching the step) and
  per layer (kernel launches, the small ops the roofline does not count: norms, rotary,
  activation functions, residual adds): `step_overhead_s + layers * layer_overhead_s`;
- weight GEMMs stream their weights at `gemm_mbu` of the bandwidth, and reach `gemm_mfu`
  of peak FLOP/s only when the token count M is large: the compute efficiency is
  `gemm_mfu * M / (M + gemm_m_half)` (half its best at M = `gemm_m_half`: tiles are padded,
  waves are partial). Equivalently a GEMM pays the FLOPs of `gemm_m_half` more tokens;
- attention kernels reach `attention_mbu` of the bandwidth only at long contexts: every
  sequence reads as if it held `attention_mbu_half` more keys, so at context S the
  bandwidth efficiency is `attention_mbu * S / (S + attention_mbu_half)`; likewise they
  reach `attention_mfu` of peak only when each query attends many keys: every query
  costs as if it attended `attention_mfu_half` more;
- an isolated kernel (one row of a kernel benchmark) pays a fixed time: a GEMM or a copy
  `kernel_overhead_s` (launch, ramp-up, tail), an attention op `attention_overhead_s`
  (its kernels and the QKV preparation benchmarks time with it); in a step those costs
  are inside `layer_overhead_s`;
- an all-reduce over n GPUs moves `2 (n - 1) / n` of its message at
  `interconnect_efficiency` of the per-direction interconnect bandwidth, after
  `allreduce_overhead_s`.

Every form keeps a part's time affine in the batch (so the closed-form largest batch under
a TPOT budget still holds), efficiencies stay in (0, 1] and overheads >= 0, so a calibrated
prediction is never faster than the ideal roofline. The defaults are the ideal roofline:
`Efficiency()` changes nothing. The functions take numpy arrays or scalars and broadcast.
Units: seconds, FLOPs, bytes, FLOP/s, bytes/s, tokens.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import numpy as np

from rooftui.core import spec_files
from rooftui.core.errors import SpecError

# parameter -> (kind, unit, meaning); kind "fraction" is in (0, 1], "amount" is >= 0
PARAMETERS: dict[str, tuple[str, str, str]] = {
    "step_overhead_s": ("amount", "s", "fixed time of every engine step"),
    "layer_overhead_s": ("amount", "s", "fixed time per layer per step (launches, small ops)"),
    "kernel_overhead_s": ("amount", "s", "fixed time of one isolated GEMM or copy kernel"),
    "attention_overhead_s": ("amount", "s", "fixed time of one isolated attention op"),
    "gemm_mfu": ("fraction", "", "weight GEMMs: fraction of peak FLOP/s at large M"),
    "gemm_mbu": ("fraction", "", "weight GEMMs: fraction of bandwidth streaming weights"),
    "gemm_m_half": ("amount", "tokens", "token count at which GEMMs reach half of gemm_mfu"),
    "attention_mfu": ("fraction", "", "attention: fraction of peak FLOP/s, many keys per query"),
    "attention_mfu_half": ("amount", "tokens",
                           "keys per query at which attention reaches half of attention_mfu"),
    "attention_mbu": ("fraction", "", "attention: fraction of bandwidth at long context"),
    "attention_mbu_half": ("amount", "tokens",
                           "context at which attention reaches half of attention_mbu"),
    "interconnect_efficiency": ("fraction", "",
                                "all-reduce: fraction of the interconnect bandwidth"),
    "allreduce_overhead_s": ("amount", "s", "fixed time of one all-reduce"),
}


@dataclass(frozen=True)
class Efficiency:
    """The parameters of the module docstring; the defaults are the ideal roofline."""

    step_overhead_s: float = 0.0
    layer_overhead_s: float = 0.0
    kernel_overhead_s: float = 0.0
    attention_overhead_s: float = 0.0
    gemm_mfu: float = 1.0
    gemm_mbu: float = 1.0
    gemm_m_half: float = 0.0
    attention_mfu: float = 1.0
    attention_mfu_half: float = 0.0
    attention_mbu: float = 1.0
    attention_mbu_half: float = 0.0
    interconnect_efficiency: float = 1.0
    allreduce_overhead_s: float = 0.0

    def __post_init__(self) -> None:
        for name, (kind, _, _) in PARAMETERS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SpecError(f"{name} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise SpecError(f"{name} must be finite, got {value!r}")
            if kind == "fraction" and not 0 < value <= 1:
                raise SpecError(f"{name} must be in (0, 1], got {value!r}")
            if kind == "amount" and value < 0:
                raise SpecError(f"{name} must be >= 0, got {value!r}")

    @property
    def is_ideal(self) -> bool:
        return self == _IDEAL

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


_IDEAL = Efficiency()  # built once: is_ideal runs on every step evaluation
EFFICIENCY_KEYS = {f.name for f in fields(Efficiency)}


def efficiency_from_dict(data: dict, where: str) -> Efficiency:
    """An `[efficiency]` table of a profile TOML; unknown keys are errors that name them."""
    if not isinstance(data, dict):
        raise SpecError(f"{where}: [efficiency] must be a table of parameter = number")
    spec_files.check_keys(data, EFFICIENCY_KEYS, f"{where} [efficiency]")
    values = {}
    for name in data:
        kind = PARAMETERS[name][0]
        values[name] = spec_files.number(data, name, f"{where} [efficiency]",
                                         strict=kind == "fraction")
    try:
        return Efficiency(**values)
    except SpecError as error:
        raise SpecError(f"{where} [efficiency]: {error}") from None


def part_efficiencies(part: str, efficiency: Efficiency) -> tuple[float, float]:
    """(compute, bandwidth) fractions of a step part; a draft model's parts
    (`draft_gemm`, ...) run the same kernels as the target's."""
    kernel = part.removeprefix("draft_")
    if kernel == "gemm":
        return efficiency.gemm_mfu, efficiency.gemm_mbu
    if kernel == "attention":
        return efficiency.attention_mfu, efficiency.attention_mbu
    return 1.0, 1.0


def gemm_padding_flops(gemm_params, efficiency: Efficiency):
    """FLOPs of `gemm_m_half` tokens through `gemm_params` matmul weights: what a GEMM's
    compute time pays on top of its real FLOPs (its efficiency rising with M)."""
    return 2.0 * gemm_params * efficiency.gemm_m_half


def gemm_times(flops, nbytes, gemm_params, compute_rate, memory_rate, efficiency: Efficiency):
    """(compute, memory) seconds of weight GEMMs doing `flops` over `nbytes`, whose weights
    hold `gemm_params` matmul parameters; the rates are the profile's (mfu * peak,
    mbu * bandwidth) before the GEMM efficiencies."""
    flops = np.asarray(flops, dtype=np.float64)
    padded = flops + np.where(flops > 0, gemm_padding_flops(gemm_params, efficiency), 0.0)
    compute = padded / (efficiency.gemm_mfu * compute_rate)
    memory = nbytes / (efficiency.gemm_mbu * memory_rate)
    return compute, memory


def attention_times(flops, nbytes, queries, sequences, flops_per_key, bytes_per_key,
                    compute_rate, memory_rate, efficiency: Efficiency):
    """(compute, memory) seconds of attention: `queries` query tokens in `sequences`
    sequences; a query attending one more key costs `flops_per_key`, a sequence reading
    one more key costs `bytes_per_key` (both summed over the layers counted)."""
    flops = (np.asarray(flops, dtype=np.float64)
             + queries * flops_per_key * efficiency.attention_mfu_half)
    nbytes = (np.asarray(nbytes, dtype=np.float64)
              + sequences * bytes_per_key * efficiency.attention_mbu_half)
    compute = flops / (efficiency.attention_mfu * compute_rate)
    memory = nbytes / (efficiency.attention_mbu * memory_rate)
    return compute, memory


def link_time(link_bytes, collectives, link_rate, efficiency: Efficiency):
    """Seconds of `collectives` collective operations moving `link_bytes` through each
    GPU's link (a ring all-reduce of M bytes over n GPUs moves 2 (n - 1) / n * M)."""
    link_bytes = np.asarray(link_bytes, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        moving = np.where(link_bytes > 0,
                          link_bytes / (efficiency.interconnect_efficiency * link_rate), 0.0)
    return moving + collectives * efficiency.allreduce_overhead_s


def fixed_step_time(layers, efficiency: Efficiency):
    """The step's overheads: per step and per layer."""
    return efficiency.step_overhead_s + np.asarray(layers, dtype=np.float64) * (
        efficiency.layer_overhead_s)
