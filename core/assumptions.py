"""Assumption profiles: how far real kernels fall short of the roofs, and what is counted.

- `mfu`, `mbu`: the fraction of dense peak FLOP/s and of peak bandwidth a kernel reaches.
- `overlap`: "parts" sums the parts' rooflines (GEMMs, attention, ... run one after the
  other); "full" puts the summed FLOPs and bytes under one roofline.
- `attention_flops`: "causal" counts the lower triangle of a prefill's score matrix,
  "full" the whole square.
- `activation_traffic`: count the hidden states each GEMM and attention kernel reads and
  writes, as a separate memory-bound part.
- `kv_write`: count writing the step's new K and V to the cache.
- `memory_reserve_gb`: memory held back from the KV cache (activations, CUDA graphs,
  fragmentation).
- `collective_library`: whose all-reduce parameters a step's collectives pay (the
  `[efficiency.nccl]`, `[efficiency.trtllm]` tables); unset: the base values. A profile
  without that library's table refuses it.
- `efficiency` (the profile's `[efficiency]` table): overheads and per-kernel efficiencies
  that rise with size, usually fitted by `sweep calibrate` (see `core.efficiency`); they
  multiply mfu and mbu. The defaults are the ideal roofline. A calibrated profile's
  `[calibration]` table records how it was fitted: what `provenance` says of it.
- `interval` (the `[interval]` table, see `core.intervals`): multiplicative error bars
  from out-of-sample residuals. The ideal profile is a bound and has none.

`calibrated` names no file: it resolves per GPU (`calibrated_profile`) to the GPU's kernel
profile, or, for a GPU without kernel data, to the nearest measured GPU's, transferred
with a wider interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from pathlib import Path

from rooftui.core import limits, spec_files
from rooftui.core.efficiency import COLLECTIVE_TABLES, Efficiency, efficiency_from_dict
from rooftui.core.errors import SpecError
from rooftui.core.hardware import GPU, load_gpu
from rooftui.core.intervals import Interval, interval_from_dict

OVERLAPS = ("parts", "full")
ATTENTION_FLOPS = ("causal", "full")


@dataclass(frozen=True)
class Assumptions:
    mfu: float = 1.0
    mbu: float = 1.0
    overlap: str = "parts"
    attention_flops: str = "causal"
    activation_traffic: bool = False
    kv_write: bool = True
    memory_reserve_gb: float = 0.0
    collective_library: str = ""  # "": the base all-reduce parameters
    name: str = "ideal"
    efficiency: Efficiency = field(default_factory=Efficiency)
    interval: Interval | None = None
    provenance: str = ""  # what a calibrated profile was fitted on (one line)

    def __post_init__(self) -> None:
        for key in ("mfu", "mbu", "memory_reserve_gb"):
            limits.check(key, getattr(self, key))
        if self.overlap not in OVERLAPS:
            raise SpecError(f"overlap must be one of {', '.join(OVERLAPS)}, got {self.overlap!r}")
        if self.attention_flops not in ATTENTION_FLOPS:
            raise SpecError(
                f"attention_flops must be one of {', '.join(ATTENTION_FLOPS)}, "
                f"got {self.attention_flops!r}"
            )
        library = self.collective_library
        if library and library not in COLLECTIVE_TABLES:
            raise SpecError(f"collective_library must be one of "
                            f"{', '.join(COLLECTIVE_TABLES)} (or unset), got {library!r}")
        if library and not self.efficiency.has_collective_table(library):
            tables = [t for t in COLLECTIVE_TABLES if self.efficiency.has_collective_table(t)]
            raise SpecError(
                f"collective_library {library!r}: profile {self.name!r} has no "
                f"[efficiency.{library}] table of all-reduce parameters ("
                + (f"it has: {', '.join(tables)}" if tables else "it has none")
                + "); fit one with `sweep calibrate` on that library's all-reduce rows, "
                "or leave collective_library unset for the base values")

    @cached_property
    def step_efficiency(self) -> Efficiency:
        """The efficiency a step pays: the collective library's all-reduce parameters."""
        return self.efficiency.for_collective_library(self.collective_library)

    def with_overrides(self, **overrides: object) -> Assumptions:
        """Explicit flags win over the profile; None means 'not given'."""
        given = {k: v for k, v in overrides.items() if v is not None}
        return replace(self, **given) if given else self


PROFILE_KEYS = ({f.name for f in fields(Assumptions)} - {"provenance"}) | {
    "description", "sources", "calibration"}


def assumptions_from_dict(data: dict, where: str, name: str) -> Assumptions:
    spec_files.check_keys(data, PROFILE_KEYS, where)
    values: dict[str, object] = {"name": str(data.get("name", name))}
    for key in ("mfu", "mbu"):
        if key in data:
            values[key] = spec_files.number(data, key, where)
    if "memory_reserve_gb" in data:
        values["memory_reserve_gb"] = spec_files.number(data, "memory_reserve_gb", where)
    for key in ("activation_traffic", "kv_write"):
        if key in data:
            values[key] = spec_files.flag(data, key, where, False)
    for key in ("overlap", "attention_flops", "collective_library"):
        if key in data:
            values[key] = data[key]
    if "efficiency" in data:
        values["efficiency"] = efficiency_from_dict(data["efficiency"], where)
    if not isinstance(data.get("calibration", {}), dict):
        raise SpecError(f"{where}: [calibration] must be a table")
    if "interval" in data:
        values["interval"] = interval_from_dict(data["interval"], where)
    if data.get("calibration"):
        values["provenance"] = _provenance(data)
    try:
        return Assumptions(**values)
    except SpecError as error:
        raise SpecError(f"{where}: {error}") from None


def _provenance(data: dict) -> str:
    """One line: kernel or engine profile, the GPU and rows it was fitted on, and what."""
    calibration = data["calibration"]
    if calibration.get("kind") == "end_to_end":
        kind = (f"engine profile ({calibration.get('engine', 'an engine')} end to end, "
                f"on kernel profile {calibration.get('base', '?')})")
    elif "step_overhead_s" in calibration.get("fitted", ()):
        kind = "engine profile (steps of one engine)"
    else:
        kind = "kernel profile (isolated kernels, no engine overheads)"
    rows = calibration.get("rows")
    counted = f", {rows:,} rows" if isinstance(rows, int) else ""
    return (f"{kind} fitted on {calibration.get('gpu', '?')}{counted}: "
            f"{data.get('description', '')}").rstrip(": ")


CALIBRATED = "calibrated"
# the GPUs with kernel measurements, and the kernel profile fitted to each
KERNEL_PROFILES = {"h100-sxm": "h100-sxm-kernels", "h200": "h200-kernels"}
# how much a transferred profile's interval widens (low / f, high · f): measured by
# transferring h100-sxm-kernels to the H200 and scoring it on the H200's held-out kernel
# data (docs/validation.md, "Transfer"); another vendor's GPU doubles it, unmeasured
TRANSFER_WIDENING = 1.15
OTHER_VENDOR_WIDENING = TRANSFER_WIDENING ** 2


def load_profile(name_or_path: str, gpu: str | GPU | None = None) -> Assumptions:
    """A shipped profile by name (`ideal`, `derated`, `h100-sxm-kernels`) or a profile
    TOML by path; `calibrated` needs `gpu` (see `calibrated_profile`)."""
    if name_or_path == CALIBRATED:
        if gpu is None:
            raise SpecError("profile 'calibrated' resolves per GPU: give a GPU (--gpu), or "
                            "name a profile (`sweep specs list profiles`)")
        return calibrated_profile(load_gpu(gpu) if isinstance(gpu, str) else gpu)
    path = spec_files.resolve("profiles", name_or_path)
    return assumptions_from_dict(spec_files.read_document(path), str(path), str(name_or_path))


def calibrated_profile(gpu: GPU) -> Assumptions:
    """The GPU's kernel profile; for a GPU without kernel data, the nearest measured GPU's
    (`nearest_measured_gpu`): efficiencies are fractions of each GPU's own peaks, so they
    carry over with its spec ratios, and the interval widens by `TRANSFER_WIDENING`."""
    own = KERNEL_PROFILES.get(_gpu_key(gpu))
    if own:
        return replace(load_profile(own), name=f"{CALIBRATED} ({own})")
    source_key, same_vendor = nearest_measured_gpu(gpu)
    source = load_profile(KERNEL_PROFILES[source_key])
    factor = TRANSFER_WIDENING if same_vendor else OTHER_VENDOR_WIDENING
    interval = source.interval.widened(factor, source.name) if source.interval else None
    return replace(source, name=f"{CALIBRATED} (transferred from {source.name})",
                   interval=interval,
                   provenance=f"transferred from {source.name} to {gpu.name} (nearest "
                              f"measured GPU by bandwidth, peak and interconnect; interval "
                              f"widened ×{factor:g}): {source.provenance}")


def nearest_measured_gpu(gpu: GPU) -> tuple[str, bool]:
    """The measured GPU whose bandwidth, bf16 peak and interconnect are nearest in log
    ratio (another vendor counts as far), and whether it is the same vendor."""
    def distance(other: GPU) -> float:
        ratios = [gpu.bandwidth_tbs / other.bandwidth_tbs,
                  gpu.tflops.get("bf16", 1.0) / other.tflops.get("bf16", 1.0)]
        if gpu.interconnect_gbs and other.interconnect_gbs:
            ratios.append(gpu.interconnect_gbs / other.interconnect_gbs)
        return sum(abs(math.log(r)) for r in ratios) + 10.0 * (_vendor(gpu) != _vendor(other))

    measured = {key: load_gpu(key) for key in KERNEL_PROFILES}
    best = min(measured, key=lambda key: distance(measured[key]))
    return best, _vendor(measured[best]) == _vendor(gpu)


def _gpu_key(gpu: GPU) -> str:
    return Path(gpu.key).stem if gpu.key else ""


def _vendor(gpu: GPU) -> str:
    name = gpu.name.lower()
    return "amd" if name.startswith(("mi", "amd", "instinct")) else (
        "intel" if "gaudi" in name else "nvidia")


def provenance_line(assumptions: Assumptions) -> str:
    """What a profile's numbers are: fitted (on what), the roofline bound, or assumed."""
    if assumptions.provenance:
        return assumptions.provenance
    if assumptions.efficiency.is_ideal and assumptions.mfu == assumptions.mbu == 1.0:
        return "roofline bound: no kernel beats it, so it has no interval"
    return "assumed efficiencies, not fitted to measurements: no interval"


# end-to-end kinds fall back to the step interval when a profile has none of their own
FALLBACK_KIND = {"ttft": "step", "tpot": "step"}


def interval_report(assumptions: Assumptions, times: dict[str, tuple[str, float | None]],
                    rates: dict[str, tuple[str, float | None]] | None = None) -> dict:
    """The profile's provenance, and each figure's interval: `times` map a figure to its
    kind and predicted seconds, `rates` to the kind of the time they invert (tok/s).
    `interval` is None without an [interval] table; its `bounds` map each figure to
    [low, high] and `kinds` to the kind whose ratios it used (a TPOT without its own
    uses the step's)."""
    report: dict = {"provenance": provenance_line(assumptions), "interval": None}
    interval = assumptions.interval
    if interval is None:
        return report
    figures, kinds = {}, {}
    for name, (kind, value), invert in [*((n, v, False) for n, v in times.items()),
                                        *((n, v, True) for n, v in (rates or {}).items())]:
        used = kind if interval.bounds(kind) else FALLBACK_KIND.get(kind)
        if value is None or used is None or not interval.bounds(used):
            continue
        around = interval.around_rate if invert else interval.around
        figures[name] = list(around(used, value))
        kinds[name] = used
    report["interval"] = {"level": interval.level, "bounds": figures, "kinds": kinds,
                          "held_out": interval.held_out,
                          "transferred_from": interval.transferred_from}
    return report
