"""The one validation layer for numbers a user gives: CLI options, every spec kind, the
TUI's fields. Each quantity has a physical range; a value outside it, NaN, ±inf, a bool or
a string where a number belongs, or a fraction where a whole number belongs is refused
with a SpecError that names the key and states the range, so nothing non-finite or
absurd ever enters the core.

The ranges are generous (a GPU of 10⁶ TFLOP/s is allowed; one of 10¹⁸ is not): they
exist to keep the arithmetic finite and the memory bounded, not to second-guess a
what-if.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from rooftui.core.errors import SpecError

INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Bound:
    """A closed range [minimum, maximum], open at the minimum when `min_open`."""

    minimum: float
    maximum: float
    integer: bool = False
    min_open: bool = False
    unit: str = ""

    def describe(self) -> str:
        """'a whole number from 1 to 4,096', 'a number in (0, 1]'."""
        low, high = _format(self.minimum), _format(self.maximum)
        unit = f" {self.unit}" if self.unit else ""
        if self.integer:
            low_text = f"{low}" if not self.min_open else f"above {low}"
            return f"a whole number from {low_text} to {high}{unit}"
        left = "(" if self.min_open else "["
        return f"a number in {left}{low}, {high}]{unit}"

    def check(self, value: object, name: str, where: str = "") -> int | float:
        """`value` as an int (integer bounds) or a float, or a SpecError naming `name`."""
        prefix = f"{where}: " if where else ""
        wanted = self.describe()
        # numbers.Real: numpy's scalars too (a grid's values), never bools
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise SpecError(f"{prefix}{name} must be {wanted}, got {value!r}")
        if not isinstance(value, int) and not math.isfinite(value):
            raise SpecError(f"{prefix}{name} must be {wanted}, got {value!r}")
        if self.integer and value != int(value):
            raise SpecError(f"{prefix}{name} must be {wanted}, got {value!r}")
        below = value < self.minimum or (self.min_open and value == self.minimum)
        if below or value > self.maximum:
            shown = f"{value:g}" if isinstance(value, float) else _format(value)
            raise SpecError(f"{prefix}{name} must be {wanted}, got {shown}")
        return int(value) if self.integer else float(value)


def _format(number: float) -> str:
    if isinstance(number, int) and abs(number) >= 10**308:  # past float, past str()'s limit
        return f"about {'-' if number < 0 else ''}10^{int(abs(number).bit_length() * 0.30103)}"
    if float(number).is_integer() and abs(number) < 1e13:
        return f"{int(number):,}"
    return f"{number:g}"


# name -> range. Names are `sweep point`'s option names with underscores (the grid axes'
# names too); spec-file keys of the same meaning share an entry.
BOUNDS: dict[str, Bound] = {
    # the step's token counts
    "batch": Bound(0, 10**12, integer=True, unit="sequences"),  # the seeds take B → ∞ as 10⁹
    "context": Bound(0, 10**8, integer=True, unit="tokens"),
    "prefill": Bound(0, 10**8, integer=True, unit="tokens"),
    "prefill_context": Bound(0, 10**8, integer=True, unit="tokens"),
    # parallelism and speculation
    "tp": Bound(1, 4096, integer=True, unit="GPUs"),
    "kv_heads": Bound(1, 10**5, integer=True, unit="heads"),
    "spec_tokens": Bound(0, 64, integer=True, unit="tokens"),
    "acceptance": Bound(0, 1),
    # efficiency and what-ifs of the GPU
    # floors far below any real machine, so that no time divides by almost nothing
    "mfu": Bound(1e-4, 1),
    "mbu": Bound(1e-4, 1),
    # a profile's [efficiency] fractions (core.efficiency; spec files name them so)
    **dict.fromkeys(("gemm_mfu", "gemm_mbu", "attention_mfu", "attention_mbu",
                     "interconnect_efficiency", "allreduce_ll_share"), Bound(1e-4, 1)),
    "peak_tflops": Bound(1e-3, 10**6, unit="TFLOP/s"),
    "bandwidth_tbs": Bound(1e-6, 10**4, unit="TB/s"),
    "memory_gb": Bound(0, 10**6, min_open=True, unit="GB"),
    "memory_reserve_gb": Bound(0, 10**6, unit="GB"),
    "interconnect_gbs": Bound(1e-3, 10**6, unit="GB/s"),
    "tdp_w": Bound(0, 10**6, min_open=True, unit="W"),
    "l2_mb": Bound(0, 10**6, min_open=True, unit="MB"),
    # money and service objectives
    "price_per_gpu_hour": Bound(0, 10**6),
    "tpot_budget": Bound(0, 3600, min_open=True, unit="s"),
    "slo_ttft": Bound(0, 10**6, min_open=True, unit="s"),
    "slo_tpot": Bound(0, 3600, min_open=True, unit="s"),
    # the scheduler
    "max_batch": Bound(1, 10**6, integer=True, unit="sequences"),
    "token_budget": Bound(1, 10**8, integer=True, unit="tokens"),
    "requests": Bound(1, 10**7, integer=True, unit="requests"),
    "prompt_pool": Bound(0, 10**7, integer=True, unit="prompts"),
    "rate": Bound(1e-6, 10**7, unit="req/s"),
    "seed": Bound(0, 2**32 - 1, integer=True),
    "block_size": Bound(1, 10**6, integer=True, unit="tokens"),
    "interarrival_cv": Bound(1e-3, 100),
    "speed": Bound(1e-6, 10**6),
    # searches and the commands' own knobs
    "attainment": Bound(0, 1, min_open=True),
    "rate_tolerance": Bound(0, 1, min_open=True),
    "workers": Bound(1, 4096, integer=True, unit="processes"),
    "matrix_dimension": Bound(1, 10**8, integer=True),
    "ridge": Bound(0, 10**6, min_open=True, unit="FLOP/B"),
    # model shapes (spec files and config.json)
    "hidden_size": Bound(1, 10**7, integer=True),
    "intermediate_size": Bound(1, 10**8, integer=True),
    "num_hidden_layers": Bound(1, 10**5, integer=True),
    "num_attention_heads": Bound(1, 10**5, integer=True),
    "num_key_value_heads": Bound(1, 10**5, integer=True),
    "head_dim": Bound(1, 10**5, integer=True),
    "vocab_size": Bound(1, 10**8, integer=True),
    "max_position_embeddings": Bound(1, 10**9, integer=True),
    "sliding_window": Bound(1, 10**9, integer=True, unit="tokens"),
    "model_count": Bound(0, 10**5, integer=True),  # experts, norms, windowed layers, ranks
    # output lengths and prompt lengths of workloads, in tokens
    "tokens": Bound(0, 10**8, integer=True, unit="tokens"),
    # calibration rows: a kernel's or a step's measured time, an all-reduce's message
    "time_s": Bound(1e-9, 10**6, unit="s"),
    "bytes": Bound(0, 10**15, unit="B"),
    "token_scale": Bound(1e-3, 10**8, unit="tokens"),  # a mean, a median
    "sigma": Bound(1e-3, 10),
    # any other number a spec file holds: finite and far from overflow
    "spec_number": Bound(-10**15, 10**15),
    # sweep grids and their manifests: point ids are int64, and 10^15 points take years
    "points": Bound(1, 10**15, integer=True, unit="points"),
    "shard_size": Bound(1, 10**9, integer=True, unit="points"),
    # prefix caching and KV tiers (per GPU), session traces
    "cache_capacity_gb": Bound(0, 10**6, unit="GB"),
    "cpu_tier_gb": Bound(0, 10**6, unit="GB"),
    "ssd_tier_gb": Bound(0, 10**9, unit="GB"),
    "cpu_tier_bandwidth_gbs": Bound(0, 10**5, min_open=True, unit="GB/s"),
    "ssd_tier_bandwidth_gbs": Bound(0, 10**5, min_open=True, unit="GB/s"),
    "arrival_s": Bound(0, 10**9, unit="s"),
    "think_time_s": Bound(0, 10**7, unit="s"),
    # cluster scale: pipeline, expert and attention-data parallelism, systems
    "pp": Bound(1, 4096, integer=True, unit="stages"),
    "ep": Bound(1, 4096, integer=True, unit="GPUs"),
    "dp": Bound(1, 4096, integer=True, unit="GPUs"),
    "micro_batches": Bound(1, 4096, integer=True, unit="micro-batches"),
    "gpus_per_domain": Bound(1, 10**6, integer=True, unit="GPUs"),
    "link_latency_us": Bound(0, 10**6, unit="us"),
    # a deployment `sweep disagg` and `sweep size` search: pools of replicas up to it
    "max_gpus": Bound(1, 256, integer=True, unit="GPUs"),
}


def check(name: str, value: object, where: str = "", label: str | None = None) -> int | float:
    """`value` checked against BOUNDS[name]; the error names `label` (default: `name`)."""
    return BOUNDS[name].check(value, label or name, where)


def finite_or_none(value: float | None) -> float | None:
    """For strict JSON: a non-finite ratio becomes null (the caller says why)."""
    if value is None or not math.isfinite(value):
        return None
    return value
