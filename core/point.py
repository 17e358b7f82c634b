"""One configuration, named in user terms (a GPU, a model, dtypes, a profile), evaluated
by the vectorised step model; the form `sweep point`, the TUI and the simulator share."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from rooftui.core.assumptions import Assumptions
from rooftui.core.dtypes import check_dtype, default_compute_dtype
from rooftui.core.errors import SpecError
from rooftui.core.hardware import GPU
from rooftui.core.model import Model
from rooftui.core.step import PARTS, StepInputs, evaluate_step
from rooftui.core.tables import GPUTable, assumptions_inputs, dtype_code, gather_step_inputs


@dataclass(frozen=True)
class PointConfig:
    gpu: GPU
    model: Model
    batch: int = 1
    context: int = 1024
    prefill: int = 0
    prefill_context: int = 0
    weight_dtype: str | None = None  # None: the model's own
    kv_dtype: str | None = None  # None: bf16 (fp16 for an fp16 model)
    compute_dtype: str | None = None  # None: follows the weights
    assumptions: Assumptions = field(default_factory=Assumptions)
    tpot_budget: float | None = None

    def __post_init__(self) -> None:
        for key in ("batch", "context", "prefill", "prefill_context"):
            value = getattr(self, key)
            if value < 0:
                raise SpecError(f"{key} must be >= 0, got {value}")
        if self.tpot_budget is not None and self.tpot_budget <= 0:
            raise SpecError(f"the TPOT budget must be > 0 seconds, got {self.tpot_budget}")
        for key in ("weight_dtype", "kv_dtype", "compute_dtype"):
            if getattr(self, key) is not None:
                check_dtype(getattr(self, key), key.replace("_", " "))

    @property
    def resolved_weight_dtype(self) -> str:
        return self.weight_dtype or self.model.weight_dtype

    @property
    def resolved_kv_dtype(self) -> str:
        if self.kv_dtype:
            return self.kv_dtype
        return "fp16" if self.model.weight_dtype == "fp16" else "bf16"

    @property
    def resolved_compute_dtype(self) -> str:
        return self.compute_dtype or default_compute_dtype(self.resolved_weight_dtype)

    def with_changes(self, **changes) -> PointConfig:
        return replace(self, **changes)

    def warnings(self) -> list[str]:
        limit = self.model.max_position_embeddings
        longest = max(self.context, self.prefill_context + self.prefill)
        if limit and longest > limit:
            return [f"context {longest} is past {self.model.name}'s "
                    f"max_position_embeddings ({limit}); computed anyway"]
        return []

    def step_inputs(self) -> StepInputs:
        self.gpu.peak_flops(self.resolved_compute_dtype)  # a clear error if the GPU lacks it
        return gather_step_inputs(
            GPUTable.of([self.gpu]), self.model.as_arrays(), gpu=0, model=0,
            batch=self.batch, context=self.context, prefill=self.prefill,
            prefill_context=self.prefill_context,
            weight_dtype=dtype_code(self.resolved_weight_dtype),
            kv_dtype=dtype_code(self.resolved_kv_dtype),
            compute_dtype=dtype_code(self.resolved_compute_dtype),
            **assumptions_inputs(self.assumptions))


def evaluate_point(config: PointConfig) -> dict[str, float | bool]:
    """The step model's metrics for one configuration, as Python scalars."""
    arrays = evaluate_step(config.step_inputs(), config.assumptions, config.tpot_budget)
    return {key: value.item() for key, value in
            ((k, np.asarray(v)) for k, v in arrays.items())}


def _finite(value: float) -> float | None:
    return None if value is None or not np.isfinite(value) else value


def point_report(config: PointConfig) -> dict:
    """The `sweep point --json` object: inputs, headline metrics, and each part."""
    m = evaluate_point(config)
    bound = {True: "compute", False: "memory"}
    report = {
        "gpu": config.gpu.name,
        "model": config.model.name,
        "batch": config.batch,
        "context": config.context,
        "prefill": config.prefill,
        "prefill_context": config.prefill_context,
        "kv_heads": config.model.num_key_value_heads,
        "group_size": config.model.group_size,
        "weight_dtype": config.resolved_weight_dtype,
        "kv_dtype": config.resolved_kv_dtype,
        "compute_dtype": config.resolved_compute_dtype,
        "peak_flops": config.gpu.peak_flops(config.resolved_compute_dtype),
        "bandwidth_bytes_per_s": config.gpu.bandwidth_bytes_per_s,
        "assumptions": {
            "profile": config.assumptions.name,
            "mfu": config.assumptions.mfu,
            "mbu": config.assumptions.mbu,
            "overlap": config.assumptions.overlap,
            "attention_flops": config.assumptions.attention_flops,
            "activation_traffic": config.assumptions.activation_traffic,
            "kv_write": config.assumptions.kv_write,
            "memory_reserve_gb": config.assumptions.memory_reserve_gb,
        },
        "step_time_s": m["step_time_s"],
        "tokens_per_s": m["tokens_per_s"],
        "prefill_tokens_per_s": m["prefill_tokens_per_s"],
        "per_user_tokens_per_s": m["per_user_tokens_per_s"],
        "flops": m["flops"],
        "bytes": m["bytes"],
        "intensity": _finite(m["intensity"]),
        "ridge": m["ridge"],
        "bound": bound[m["compute_bound"]],
        "parts": {
            name: {
                "flops": m[f"{name}_flops"],
                "bytes": m[f"{name}_bytes"],
                "time_s": m[f"{name}_time_s"],
                "intensity": _finite(m[f"{name}_intensity"]),
                "bound": bound[m[f"{name}_compute_bound"]],
            }
            for name in PARTS if f"{name}_flops" in m
        },
        "attention_share": _finite(m["attention_share"]),
        "mfu": _finite(m["mfu"]),
        "mbu": _finite(m["mbu"]),
        "weight_bytes": m["weight_bytes"],
        "kv_bytes": m["kv_bytes"],
        "kv_bytes_per_token": m["kv_bytes_per_token"],
        "intensity_ceiling": _finite(m["intensity_ceiling"]),
        "throughput_ceiling_tokens_per_s": _finite(m["throughput_ceiling_tokens_per_s"]),
        "max_batch": None if not np.isfinite(m["max_batch"]) else int(m["max_batch"]),
        "fits": m["fits"],
        "warnings": config.warnings(),
    }
    if "max_batch_for_tpot" in m:
        value = m["max_batch_for_tpot"]
        report["tpot_budget_s"] = config.tpot_budget
        report["max_batch_for_tpot"] = int(value) if np.isfinite(value) else None
    return report
