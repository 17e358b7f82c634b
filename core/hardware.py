"""GPU specs: memory, bandwidth and dense peak compute per format.

Units are SI, as datasheets print them: GB = 1e9 B, TB/s = 1e12 B/s, TFLOP/s = 1e12.
Peaks are dense (without 2:4 sparsity). `interconnect_gbs` is per direction.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from rooftui.core import spec_files
from rooftui.core.dtypes import BYTES_PER_ELEMENT, check_dtype
from rooftui.core.errors import SpecError

GPU_KEYS = {
    "name", "memory_gb", "bandwidth_tbs", "tflops", "l2_mb", "interconnect_gbs", "tdp_w",
    "sources", "notes",
}


@dataclass(frozen=True)
class GPU:
    name: str
    memory_gb: float
    bandwidth_tbs: float
    tflops: dict[str, float]
    l2_mb: float | None = None
    interconnect_gbs: float | None = None
    tdp_w: float | None = None
    sources: dict[str, str] = field(default_factory=dict)
    key: str = ""  # the shipped name or the path it was loaded from

    @property
    def memory_bytes(self) -> float:
        return self.memory_gb * 1e9

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth_tbs * 1e12

    def peak_flops(self, dtype: str) -> float:
        """Dense peak FLOP/s in `dtype`; an error naming the formats this GPU has if absent."""
        check_dtype(dtype, "compute dtype")
        if dtype not in self.tflops:
            have = ", ".join(self.tflops)
            raise SpecError(
                f"{self.name} has no {dtype} peak (it has {have}); choose --compute-dtype "
                "from those"
            )
        return self.tflops[dtype] * 1e12

    def ridge(self, dtype: str) -> float:
        """FLOPs per byte at which the compute and memory roofs meet."""
        return self.peak_flops(dtype) / self.bandwidth_bytes_per_s

    def with_overrides(
        self, *, peak_tflops: float | None = None, bandwidth_tbs: float | None = None,
        memory_gb: float | None = None, compute_dtype: str | None = None,
    ) -> GPU:
        """A what-if copy: another bandwidth, memory, or peak for one format."""
        tflops = dict(self.tflops)
        if peak_tflops is not None:
            if compute_dtype is None:
                raise SpecError("a peak override needs the compute dtype it applies to")
            tflops[compute_dtype] = peak_tflops
        return replace(
            self,
            tflops=tflops,
            bandwidth_tbs=self.bandwidth_tbs if bandwidth_tbs is None else bandwidth_tbs,
            memory_gb=self.memory_gb if memory_gb is None else memory_gb,
        )


def gpu_from_dict(data: dict, where: str, key: str = "") -> GPU:
    spec_files.check_keys(data, GPU_KEYS, where)
    tflops_table = data.get("tflops")
    if not isinstance(tflops_table, dict) or not tflops_table:
        raise SpecError(f"{where}: missing table [tflops] (dense peak TFLOP/s per dtype)")
    tflops = {}
    for dtype in tflops_table:
        if dtype not in BYTES_PER_ELEMENT:
            raise SpecError(
                f"{where}: [tflops] has unknown dtype {dtype!r}; "
                f"expected some of {', '.join(BYTES_PER_ELEMENT)}"
            )
        tflops[dtype] = spec_files.number(tflops_table, dtype, f"{where} [tflops]",
                                          bound="peak_tflops")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise SpecError(f"{where}: missing key 'name' (a display name such as \"H100 SXM\")")
    optional = {
        k: spec_files.number(data, k, where) if k in data else None
        for k in ("l2_mb", "interconnect_gbs", "tdp_w")
    }
    sources = data.get("sources", {})
    if not isinstance(sources, dict):
        raise SpecError(f"{where}: [sources] must be a table of key = \"source\"")
    return GPU(
        name=name,
        memory_gb=spec_files.number(data, "memory_gb", where),
        bandwidth_tbs=spec_files.number(data, "bandwidth_tbs", where),
        tflops=tflops,
        sources={str(k): str(v) for k, v in sources.items()},
        key=key,
        **optional,
    )


def load_gpu(name_or_path: str) -> GPU:
    """A shipped GPU by name (`h100-sxm`) or a GPU TOML file by path."""
    path: Path = spec_files.resolve("gpus", name_or_path)
    return gpu_from_dict(spec_files.read_document(path), str(path), key=str(name_or_path))
