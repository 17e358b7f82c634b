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
- `efficiency` (the profile's `[efficiency]` table): overheads and per-kernel efficiencies
  that rise with size, usually fitted by `sweep calibrate` (see `core.efficiency`); they
  multiply mfu and mbu. The defaults are the ideal roofline. A calibrated profile's
  `[calibration]` table records how it was fitted and is not read.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from rooftui.core import limits, spec_files
from rooftui.core.efficiency import Efficiency, efficiency_from_dict
from rooftui.core.errors import SpecError

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
    name: str = "ideal"
    efficiency: Efficiency = field(default_factory=Efficiency)

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

    def with_overrides(self, **overrides: object) -> Assumptions:
        """Explicit flags win over the profile; None means 'not given'."""
        given = {k: v for k, v in overrides.items() if v is not None}
        return replace(self, **given) if given else self


PROFILE_KEYS = {f.name for f in fields(Assumptions)} | {"description", "sources",
                                                       "calibration"}


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
    for key in ("overlap", "attention_flops"):
        if key in data:
            values[key] = data[key]
    if "efficiency" in data:
        values["efficiency"] = efficiency_from_dict(data["efficiency"], where)
    if not isinstance(data.get("calibration", {}), dict):
        raise SpecError(f"{where}: [calibration] must be a table")
    try:
        return Assumptions(**values)
    except SpecError as error:
        raise SpecError(f"{where}: {error}") from None


def load_profile(name_or_path: str) -> Assumptions:
    """A shipped profile by name (`ideal`, `derated`) or a profile TOML by path."""
    path = spec_files.resolve("profiles", name_or_path)
    return assumptions_from_dict(spec_files.read_document(path), str(path), str(name_or_path))
