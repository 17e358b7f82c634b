"""System specs (specs/systems), the Blackwell Ultra GPUs and the NVFP4 format."""

from __future__ import annotations

import tomllib

import pytest

from rooftui.core import spec_files
from rooftui.core.dtypes import bytes_per_element, default_compute_dtype
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.systems import SYSTEM_KEYS, load_system, system_from_dict

# name -> (GPU spec, GPUs per domain, per node, domain GB/s, network GB/s per direction)
EXPECTED_SYSTEMS = {
    "hgx-h100-ib": ("h100-sxm", 8, 8, 450, 50),
    "hgx-h200-ib": ("h200", 8, 8, 450, 50),
    "hgx-b200": ("b200", 8, 8, 900, 50),
    "gb200-nvl72": ("gb200", 72, 4, 900, 50),
    "gb300-nvl72": ("gb300", 72, 4, 900, 100),
    "mi300x-8": ("mi300x", 8, 8, 448, 50),
}

# the cited dense figures (verda.com/blog/gb300-nvl72-architecture)
EXPECTED_ULTRA = {
    "b300": dict(memory_gb=270, bandwidth_tbs=7.7, interconnect_gbs=900, tdp_w=1100,
                 tflops=dict(fp32=75, tf32=1100, bf16=2250, fp16=2250, fp8=4500, int8=150,
                             fp4=14000)),
    "gb300": dict(memory_gb=279, bandwidth_tbs=8.0, interconnect_gbs=900, tdp_w=1400,
                  tflops=dict(fp32=80, tf32=1250, bf16=2500, fp16=2500, fp8=5000, int8=165,
                              fp4=15000)),
}


def test_every_shipped_system_is_checked():
    assert set(spec_files.shipped_names("systems")) == set(EXPECTED_SYSTEMS)


@pytest.mark.parametrize("name", sorted(EXPECTED_SYSTEMS))
def test_system_matches_expected(name):
    gpu, domain, node, inside, across = EXPECTED_SYSTEMS[name]
    system = load_system(name)
    assert system.gpu == load_gpu(gpu)
    assert (system.gpus_per_domain, system.gpus_per_node) == (domain, node)
    assert (system.domain_bandwidth_gbs, system.network_bandwidth_gbs) == (inside, across)
    assert system.network_bandwidth_gbs <= system.domain_bandwidth_gbs


@pytest.mark.parametrize("name", sorted(EXPECTED_SYSTEMS))
def test_system_numbers_have_sources(name):
    data = tomllib.loads(spec_files.resolve("systems", name).read_text(encoding="utf-8"))
    numbers = [key for key, value in data.items() if isinstance(value, int | float)]
    missing = [key for key in numbers if key not in data["sources"]
               and key not in ("gpus_per_domain", "gpus_per_node")]
    # GPU counts are cited with the domain's bandwidth where no key of their own
    assert missing == [], f"{name}: no source for {missing}"
    assert set(data) <= SYSTEM_KEYS


def test_link_for_a_group_inside_and_across_the_domain():
    system = load_system("hgx-h100-ib")
    bandwidth, latency = system.link_for([1, 8, 9, 64])
    assert list(bandwidth) == [450e9, 450e9, 50e9, 50e9]
    assert list(latency) == [2e-6, 2e-6, 5e-6, 5e-6]


def test_bad_system_is_one_line_error(tmp_path):
    with pytest.raises(SpecError, match="unknown key 'gpus_per_rack'"):
        system_from_dict({"name": "x", "gpu": "h100-sxm", "gpus_per_rack": 8}, "x.toml")
    with pytest.raises(SpecError, match="gpus_per_domain"):
        system_from_dict({"name": "x", "gpu": "h100-sxm", "gpus_per_domain": 0,
                          "gpus_per_node": 8, "domain_bandwidth_gbs": 1,
                          "domain_latency_us": 1, "network_bandwidth_gbs": 1,
                          "network_latency_us": 1}, "x.toml")
    with pytest.raises(SpecError, match="unknown gpu"):
        system_from_dict({"name": "x", "gpu": "h900"}, "x.toml")


@pytest.mark.parametrize("name", sorted(EXPECTED_ULTRA))
def test_blackwell_ultra_matches_its_sources(name):
    gpu, want = load_gpu(name), EXPECTED_ULTRA[name]
    assert gpu.tflops == want["tflops"]
    assert (gpu.memory_gb, gpu.bandwidth_tbs, gpu.interconnect_gbs, gpu.tdp_w) == (
        want["memory_gb"], want["bandwidth_tbs"], want["interconnect_gbs"], want["tdp_w"])
    data = tomllib.loads(spec_files.resolve("gpus", name).read_text(encoding="utf-8"))
    assert {"tflops", "memory_gb", "bandwidth_tbs", "interconnect_gbs", "tdp_w"} <= set(
        data["sources"])


def test_nvfp4_is_four_and_a_half_bits_and_runs_at_the_fp4_peak():
    # 16 E2M1 values (4 bits each) share one 8-bit E4M3 scale: (16 * 4 + 8) / 16 bits
    assert bytes_per_element("nvfp4") == (16 * 4 + 8) / 16 / 8 == 0.5625
    assert default_compute_dtype("nvfp4") == "fp4"
