"""System specs: which GPU, how many share one NVLink (scale-up) domain, and the links
inside and across it.

A system is a fleet of identical GPUs. Up to `gpus_per_domain` of them are joined by the
scale-up fabric (NVLink through NVSwitch, AMD's Infinity Fabric): `domain_bandwidth_gbs`
per GPU per direction, `domain_latency_us` per collective. Domains are joined by the
scale-out network (InfiniBand, RoCE): `network_bandwidth_gbs` per GPU per direction (its
NIC), `network_latency_us` per collective. `gpus_per_node` is the GPUs of one server or
compute tray. Units as datasheets print them: GB/s = 1e9 B/s, microseconds.

A collective over `group` GPUs placed in as few domains as they fill stays inside one
domain when group <= gpus_per_domain, else crosses the network (`link_for`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rooftui.core import spec_files
from rooftui.core.errors import SpecError
from rooftui.core.hardware import GPU, load_gpu

SYSTEM_KEYS = {
    "name", "gpu", "gpus_per_domain", "gpus_per_node", "domain_bandwidth_gbs",
    "domain_latency_us", "network_bandwidth_gbs", "network_latency_us", "sources", "notes",
}

# The two links a collective can cross, as `sweep point` names them.
DOMAIN, NETWORK = "nvlink_domain", "network"


@dataclass(frozen=True)
class System:
    name: str
    gpu: GPU
    gpus_per_domain: int
    gpus_per_node: int
    domain_bandwidth_gbs: float  # per GPU per direction
    domain_latency_us: float
    network_bandwidth_gbs: float  # per GPU per direction
    network_latency_us: float
    sources: dict[str, str] = field(default_factory=dict)
    key: str = ""  # the shipped name or the path it was loaded from

    @property
    def domain_bytes_per_s(self) -> float:
        return self.domain_bandwidth_gbs * 1e9

    @property
    def network_bytes_per_s(self) -> float:
        return self.network_bandwidth_gbs * 1e9

    def link_for(self, group) -> tuple[np.ndarray, np.ndarray]:
        """Per GPU per direction bandwidth (B/s) and latency (s) of a collective over
        `group` GPUs (scalar or array): the domain's while the group fits in one."""
        inside = np.asarray(group) <= self.gpus_per_domain
        return (np.where(inside, self.domain_bytes_per_s, self.network_bytes_per_s),
                np.where(inside, self.domain_latency_us, self.network_latency_us) / 1e6)


def system_from_dict(data: dict, where: str, key: str = "",
                     read_gpu=load_gpu) -> System:
    spec_files.check_keys(data, SYSTEM_KEYS, where)
    for text_key in ("name", "gpu"):
        if not isinstance(data.get(text_key), str) or not data[text_key]:
            raise SpecError(f"{where}: missing key {text_key!r} (a display name, and the "
                            "GPU spec name or path)")
    sources = data.get("sources", {})
    if not isinstance(sources, dict):
        raise SpecError(f"{where}: [sources] must be a table of key = \"source\"")

    def count(name):
        return int(spec_files.number(data, name, where, bound="gpus_per_domain"))

    def number(name, bound):
        return spec_files.number(data, name, where, bound=bound)

    return System(
        name=data["name"], gpu=read_gpu(data["gpu"]),
        gpus_per_domain=count("gpus_per_domain"), gpus_per_node=count("gpus_per_node"),
        domain_bandwidth_gbs=number("domain_bandwidth_gbs", "interconnect_gbs"),
        domain_latency_us=number("domain_latency_us", "link_latency_us"),
        network_bandwidth_gbs=number("network_bandwidth_gbs", "interconnect_gbs"),
        network_latency_us=number("network_latency_us", "link_latency_us"),
        sources={str(k): str(v) for k, v in sources.items()}, key=key)


def load_system(name_or_path: str) -> System:
    """A shipped system by name (`gb200-nvl72`) or a system TOML file by path."""
    path = spec_files.resolve("systems", name_or_path)
    return system_from_dict(spec_files.read_document(path), str(path), key=str(name_or_path))

