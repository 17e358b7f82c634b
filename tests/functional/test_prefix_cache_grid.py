"""Simulate grids over the prefix cache: rows equal `sweep simulate`, the cache's columns,
the TTFT-against-capacity chart, refused points."""

from __future__ import annotations

import json

import polars as pl

from rooftui.sweeps import charts
from rooftui.sweeps.results import read_manifest, scan_results
from tests.conftest import sweep

GENERATOR = ("sessions:turns=3,system=600,first=(exp:mean=300),growth=(exp:mean=100),"
             "output=(exp:mean=80),think=1")
GRID = f"""
name = "prefix"
kind = "simulate"
[fixed]
workload = "{GENERATOR}"
arrival = "poisson"
rate = 3.0
requests = 120
prefix_cache = "lru"
[axes]
policy = ["continuous", "chunked"]
cpu_tier_gb = [0.0, 20.0]
cache_capacity_gb = [0.0, 2.0]
[charts]
names = ["ttft_vs_cache_capacity"]
"""


def test_prefix_cache_grid_rows_and_chart(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    out = tmp_path / "out"
    summary = json.loads(sweep("run", grid, "--out", out, "--json")[0])
    assert summary["complete"] and summary["rows"] == 8
    data = scan_results(out).collect().with_columns(pl.col(pl.Categorical).cast(pl.String))
    row = data.filter((pl.col("policy") == "chunked") & (pl.col("cpu_tier_gb") == 20.0)
                      & (pl.col("cache_capacity_gb") == 2.0)).row(0, named=True)
    direct = json.loads(sweep("simulate", "--workload", GENERATOR, "--arrival",
                              "poisson:rate=3", "-n", 120, "--policy", "chunked",
                              "--prefix-cache", "lru", "--cache-capacity-gb", 2,
                              "--cpu-tier-gb", 20, "--json")[0])
    cache = direct["prefix_cache"]
    assert row["ttft_p90_s"] == direct["ttft_s"]["p90"]
    assert row["prefix_hit_rate"] == cache["hit_rate"]
    assert row["prefix_hit_rate_cpu"] == cache["hit_rate_by_tier"]["cpu"]
    assert row["cached_prefill_tokens"] == cache["cached_prefill_tokens"]
    assert row["computed_prefill_tokens"] == cache["computed_prefill_tokens"]
    # no HBM and no tier: no hits, and the simulator without a cache
    empty = data.filter((pl.col("cache_capacity_gb") == 0) & (pl.col("cpu_tier_gb") == 0))
    assert empty["prefix_hit_rate"].to_list() == [0.0, 0.0]
    assert (data["prefix_hit_rate"] > 0).sum() == 6
    assert (out / "charts" / "ttft_vs_cache_capacity.html").is_file()
    chart = charts.ttft_vs_cache_capacity_chart(scan_results(out),
                                                axes=charts.declared_axes(read_manifest(out)))
    text = json.dumps(chart.to_dict())
    assert "no simulations" not in text and "symlog" in text


def test_a_cache_needs_a_session_workload(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text('name = "x"\nkind = "simulate"\n[fixed]\nprefix_cache = "lru"\n')
    err = sweep("run", grid, "--out", tmp_path / "out", expect=2)[1]
    assert "needs a session workload" in err and err.count("\n") == 1
