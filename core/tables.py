"""Catalogues as arrays: GPUs and dtypes indexed by integer codes, so a grid of
configurations gathers its inputs with `np.take` instead of a loop."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rooftui.core.assumptions import Assumptions
from rooftui.core.dtypes import BYTES_PER_ELEMENT, check_dtype
from rooftui.core.hardware import GPU
from rooftui.core.model import ModelArrays
from rooftui.core.step import StepInputs

DTYPES = tuple(BYTES_PER_ELEMENT)
DTYPE_BYTES = np.array([BYTES_PER_ELEMENT[name] for name in DTYPES])


def dtype_code(name: str) -> int:
    return DTYPES.index(check_dtype(name))


@dataclass(frozen=True)
class GPUTable:
    """Per-GPU arrays; `peak_flops[g, d]` is NaN where GPU g has no peak for dtype d, and
    `interconnect` (bytes/s per direction) and `tdp_w` are NaN where a spec omits them."""

    gpus: tuple[GPU, ...]
    peak_flops: np.ndarray
    bandwidth: np.ndarray
    memory: np.ndarray
    interconnect: np.ndarray
    tdp_w: np.ndarray

    @staticmethod
    def of(gpus: list[GPU]) -> GPUTable:
        peaks = np.full((len(gpus), len(DTYPES)), np.nan)
        for g, gpu in enumerate(gpus):
            for dtype, tflops in gpu.tflops.items():
                peaks[g, DTYPES.index(dtype)] = tflops * 1e12

        def optional(values: list[float | None]) -> np.ndarray:
            return np.array([np.nan if value is None else value for value in values])

        return GPUTable(
            gpus=tuple(gpus),
            peak_flops=peaks,
            bandwidth=np.array([gpu.bandwidth_bytes_per_s for gpu in gpus]),
            memory=np.array([gpu.memory_bytes for gpu in gpus]),
            interconnect=optional([gpu.interconnect_gbs for gpu in gpus]) * 1e9,
            tdp_w=optional([gpu.tdp_w for gpu in gpus]),
        )


def gather_step_inputs(
    gpus: GPUTable, models: ModelArrays, *, gpu, model, batch, context, prefill,
    prefill_context, weight_dtype, kv_dtype, compute_dtype, kv_heads=None,
    mfu=1.0, mbu=1.0, memory_reserve_gb=0.0, expert_weight_dtype=None, tp=1,
    spec_tokens=0, acceptance=0.0, draft_model=None, energy=False,
    price_per_gpu_hour=None,
) -> StepInputs:
    """StepInputs for a grid: `gpu`, `model`, `draft_model` and the dtypes are integer
    code arrays, the rest numbers; all broadcast together. `kv_heads` None keeps each
    model's own; `expert_weight_dtype` None stores routed experts like the other weights;
    `draft_model` None drafts for free (with `spec_tokens` > 0); `energy` adds joules per
    token from each GPU's board power (NaN where a spec has none), `price_per_gpu_hour`
    the cost per million tokens."""
    taken = models.take(model)
    f64 = np.float64
    return StepInputs(
        model=taken,
        batch=np.asarray(batch, f64),
        context=np.asarray(context, f64),
        prefill=np.asarray(prefill, f64),
        prefill_context=np.asarray(prefill_context, f64),
        kv_heads=taken.kv_heads if kv_heads is None else np.asarray(kv_heads, f64),
        weight_bytes=DTYPE_BYTES[weight_dtype],
        kv_bytes=DTYPE_BYTES[kv_dtype],
        activation_bytes=DTYPE_BYTES[compute_dtype],
        peak_flops=gpus.peak_flops[gpu, compute_dtype],
        bandwidth=gpus.bandwidth[gpu],
        memory=gpus.memory[gpu],
        mfu=np.asarray(mfu, f64),
        mbu=np.asarray(mbu, f64),
        memory_reserve=np.asarray(memory_reserve_gb, f64) * 1e9,
        expert_weight_bytes=(None if expert_weight_dtype is None
                             else DTYPE_BYTES[expert_weight_dtype]),
        tp=tp if np.ndim(tp) == 0 else np.asarray(tp, f64),
        # a replica on one GPU has no link to time (a GPU spec may list none)
        interconnect=(np.inf if np.ndim(tp) == 0 and tp == 1
                      else np.where(np.asarray(tp) == 1, np.inf, gpus.interconnect[gpu])),
        spec_tokens=spec_tokens if np.ndim(spec_tokens) == 0 else np.asarray(spec_tokens, f64),
        acceptance=np.asarray(acceptance, f64),
        draft=None if draft_model is None else models.take(draft_model),
        board_power_w=gpus.tdp_w[gpu] if energy else None,
        price_per_gpu_hour=(None if price_per_gpu_hour is None
                            else np.asarray(price_per_gpu_hour, f64)),
    )


def assumptions_inputs(assumptions: Assumptions) -> dict[str, float]:
    """The numeric assumptions as keyword arguments of `gather_step_inputs`."""
    return {"mfu": assumptions.mfu, "mbu": assumptions.mbu,
            "memory_reserve_gb": assumptions.memory_reserve_gb}
