"""Catalogues as arrays: GPUs and dtypes indexed by integer codes, so a grid of
configurations gathers its inputs with `np.take` instead of a loop."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from rooftui.core.assumptions import Assumptions
from rooftui.core.dtypes import BYTES_PER_ELEMENT, check_dtype
from rooftui.core.hardware import GPU
from rooftui.core.model import ModelArrays
from rooftui.core.parallel import all_to_all_link, stage_link
from rooftui.core.step import StepInputs
from rooftui.core.systems import System

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


@dataclass(frozen=True)
class SystemTable:
    """Per-system arrays (core.systems): the NVLink domain's size, and per GPU per
    direction the bandwidth (B/s) and latency (s) inside it and across it."""

    systems: tuple[System, ...]
    gpus_per_domain: np.ndarray
    domain_rate: np.ndarray
    domain_latency: np.ndarray
    network_rate: np.ndarray
    network_latency: np.ndarray

    @staticmethod
    def of(systems: list[System]) -> SystemTable:
        return SystemTable(
            systems=tuple(systems),
            gpus_per_domain=np.array([s.gpus_per_domain for s in systems], dtype=np.float64),
            domain_rate=np.array([s.domain_bytes_per_s for s in systems]),
            domain_latency=np.array([s.domain_latency_us / 1e6 for s in systems]),
            network_rate=np.array([s.network_bytes_per_s for s in systems]),
            network_latency=np.array([s.network_latency_us / 1e6 for s in systems]))

    def links(self, system) -> tuple[np.ndarray, ...]:
        """The arrays `core.parallel`'s link functions take, for system codes `system`."""
        return (self.gpus_per_domain[system], self.domain_rate[system],
                self.domain_latency[system], self.network_rate[system],
                self.network_latency[system])


def _links(gpus: GPUTable, gpu, tp, pp, ep, dp, systems: SystemTable | None, system):
    """interconnect (tp's all-reduces), expert_link and its latency, stage_link and its
    latency. Without a system every collective uses the GPU's interconnect, no latency."""
    f64 = np.float64
    tp, pp, ep, dp = (np.asarray(value, f64) for value in (tp, pp, ep, dp))
    if systems is None:
        link = gpus.interconnect[gpu]
        return (np.where(tp == 1, np.inf, link), np.where(ep == 1, np.inf, link), 0.0,
                np.where(pp == 1, np.inf, link), 0.0)
    links = systems.links(system)
    tp_rate, _ = stage_link(tp, *links)  # a tp group is placed inside one domain if it fits
    expert_rate, expert_latency = all_to_all_link(ep, *links)
    boundary_rate, boundary_latency = stage_link(tp * dp * pp, *links)
    return (np.where(tp == 1, np.inf, tp_rate), np.where(ep == 1, np.inf, expert_rate),
            expert_latency, np.where(pp == 1, np.inf, boundary_rate), boundary_latency)


def gather_step_inputs(
    gpus: GPUTable, models: ModelArrays, *, gpu, model, batch, context, prefill,
    prefill_context, weight_dtype, kv_dtype, compute_dtype, kv_heads=None,
    mfu=1.0, mbu=1.0, memory_reserve_gb=0.0, expert_weight_dtype=None, tp=1,
    spec_tokens=0, acceptance=0.0, draft_model=None, energy=False,
    price_per_gpu_hour=None, pp=1, ep=1, dp=1, micro_batches=None, systems=None, system=None,
) -> StepInputs:
    """StepInputs for a grid: `gpu`, `model`, `draft_model` and the dtypes are integer
    code arrays, the rest numbers; all broadcast together. `kv_heads` None keeps each
    model's own; `expert_weight_dtype` None stores routed experts like the other weights;
    `draft_model` None drafts for free (with `spec_tokens` > 0); `energy` adds joules per
    token from each GPU's board power (NaN where a spec has none), `price_per_gpu_hour`
    the cost per million tokens. `pp`, `ep`, `dp` and `micro_batches` are core/parallel.py's;
    `systems` (a SystemTable) and the codes `system` time each collective on the link it
    crosses (None: on the GPU's interconnect)."""
    taken = models.take(model)
    f64 = np.float64
    parallel = {}
    if systems is not None or not all(np.ndim(v) == 0 and v == 1 for v in (pp, ep, dp)) or (
            micro_batches is not None):
        interconnect, expert_link, expert_latency, boundary, boundary_latency = _links(
            gpus, gpu, tp, pp, ep, dp, systems, system)
        parallel = dict(
            interconnect=interconnect, pp=np.asarray(pp, f64), ep=np.asarray(ep, f64),
            dp=np.asarray(dp, f64), expert_link=expert_link,
            expert_link_latency=expert_latency, stage_link=boundary,
            stage_link_latency=boundary_latency,
            micro_batches=None if micro_batches is None else np.asarray(micro_batches, f64))
    inputs = StepInputs(
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
        compute_dtype=compute_dtype,
    )
    return replace(inputs, **parallel) if parallel else inputs


def assumptions_inputs(assumptions: Assumptions) -> dict[str, float]:
    """The numeric assumptions as keyword arguments of `gather_step_inputs`."""
    return {"mfu": assumptions.mfu, "mbu": assumptions.mbu,
            "memory_reserve_gb": assumptions.memory_reserve_gb}
