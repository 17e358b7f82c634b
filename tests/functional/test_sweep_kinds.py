"""Grid kinds `simulate` and `optimize` through `sweep run`: one row per point equal to
`sweep simulate` / the optimizer, shards, resume, Dask, skipped points, charts, errors."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from rooftui.sweeps import charts, runner
from rooftui.sweeps.grid import parse_grid
from rooftui.sweeps.kinds import evaluator_for
from rooftui.sweeps.results import read_manifest, scan_results
from tests.conftest import sweep

SIMULATE = """
name = "sim"
kind = "simulate"
profile = "derated"
[fixed]
requests = 60
input_tokens = "fixed:64"
[axes]
policy = ["static", "continuous", "chunked"]
output_tokens = ["exp:mean=40", "fixed:30"]
max_batch = [4, 16]
"""
RATES = """
name = "rates"
kind = "simulate"
[fixed]
requests = 60
workload = "azure-conv-2023"
arrival = "poisson"
[axes]
policy = ["continuous", "chunked"]
rate = [2.0, 8.0]
"""
OPTIMIZE = """
name = "opt"
kind = "optimize"
profile = "derated"
[fixed]
requests = 80
workload = "azure-code-2023"
price_per_gpu_hour = 2.0
[axes]
max_batch = [8, 64]
token_budget = [32, 1024]
slo_ttft = [0.5, 2.0]
slo_tpot = [0.05, 0.1]
[[zip]]
axes = ["slo_ttft", "slo_tpot"]
"""


def write(tmp_path: Path, text: str, name: str = "grid.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def run(grid: Path, out: Path, *args) -> dict:
    return json.loads(sweep("run", grid, "--out", out, "--json", *args)[0])


def rows(out: Path) -> pl.DataFrame:
    return scan_results(out).collect().sort("point_id").with_columns(
        pl.col(pl.Categorical).cast(pl.String))


def test_simulate_rows_are_sweep_simulate(tmp_path):
    grid = write(tmp_path, SIMULATE)
    summary = run(grid, tmp_path / "out", "--shard-size", 5, "--no-charts")
    assert summary["complete"] and summary["rows"] == 12 and summary["shards"] == 3
    data = rows(tmp_path / "out")
    assert data["point_id"].to_list() == list(range(12))
    manifest = read_manifest(tmp_path / "out")
    assert manifest["kind"] == "simulate" and manifest["columns"]["policy"] == "string"
    row = data.filter((pl.col("policy") == "chunked") & (pl.col("max_batch") == 16)
                      & (pl.col("output_tokens") == "exp:mean=40")).row(0, named=True)
    direct = json.loads(sweep("simulate", "--profile", "derated", "--policy", "chunked",
                              "--max-batch", 16, "--input-tokens", "fixed:64",
                              "--output-tokens", "exp:mean=40", "--requests", 60, "--json")[0])
    for key in ("occupancy", "throughput_tokens_per_s", "mean_batch", "duration_s"):
        assert row[key] == direct[key], key
    assert row["ttft_p90_s"] == direct["ttft_s"]["p90"]
    assert row["itl_p99_s"] == direct["itl_s"]["p99"]
    assert row["total_output_tokens"] == direct["output_tokens"]
    assert row["itl_max_s"] >= row["itl_p99_s"]
    assert row["harmonic_occupancy"] == pytest.approx(1 / sum(1 / k for k in range(1, 17)))
    # fixed outputs: every member of a static batch ends together
    static = data.filter((pl.col("policy") == "static") & (pl.col("output_tokens") == "fixed:30"))
    assert static["static_occupancy"].to_list() == [1.0, 1.0]
    # resume: nothing left to compute
    again = run(grid, tmp_path / "out", "--no-charts")
    assert again["shards_computed"] == 0 and again["complete"]


def test_default_shards_are_small_for_simulations():
    assert runner.default_shard_size(10_000, "simulate") == 256
    assert runner.default_shard_size(100, "simulate") == 16
    assert runner.default_shard_size(100, "optimize") == 2
    assert runner.default_shard_size(100) == 1 << 16


def test_invalid_scheduler_points_are_skipped_or_refused(tmp_path):
    text = SIMULATE.replace('output_tokens = ["exp:mean=40", "fixed:30"]',
                            'token_budget = [8, 64]')
    _, err = sweep("run", write(tmp_path, text), "--dry-run", expect=2)
    assert "token budget (8)" in err and "skip_unsupported" in err and err.count("\n") == 1
    skipping = write(tmp_path, text.replace('kind = "simulate"',
                                            'kind = "simulate"\nskip_unsupported = true'),
                     "skip.toml")
    summary = run(skipping, tmp_path / "skip", "--no-charts")
    assert summary["skipped_points"] == 1 and summary["rows"] == 11  # chunked, B 16, T 8


@pytest.mark.parametrize(("body", "needle"), [
    ('name = "x"\nkind = "simulate"\n[axes]\nbatch = [1]\n', "'batch'"),
    ('name = "x"\nkind = "simulate"\n[fixed]\narrival = "poisson"\n', "need a rate"),
    ('name = "x"\nkind = "simulate"\n[fixed]\nworkload = "nope"\n', "nope"),
    ('name = "x"\nkind = "simulate"\n[fixed]\noutput_tokens = "exp:mean=-1"\n', "exp"),
    ('name = "x"\nkind = "optimize"\n[fixed]\nquantile = 0.8\n', "quantile"),
    ('name = "x"\nkind = "optimize"\n[fixed]\narrival = "closed"\n', "poisson"),
    ('name = "x"\nkind = "simulate"\n[fixed]\ngpu = "l4"\ninput_tokens = "fixed:100000"\n',
     "KV cache"),
    ('name = "x"\nkind = "simulate"\n[axes]\npolicy = ["static", "static"]\n', "twice"),
])
def test_bad_grids_are_one_line_errors(tmp_path, body, needle):
    _, err = sweep("run", write(tmp_path, body), "--dry-run", expect=2)
    assert needle in err and err.count("\n") == 1, err


def test_zipped_axes_may_repeat_a_value_but_not_a_pair(tmp_path):
    text = OPTIMIZE.replace("slo_tpot = [0.05, 0.1]", "slo_tpot = [0.1, 0.1]")
    assert evaluator_for(parse_grid(text, tmp_path / "g.toml")).grid.size == 8
    repeated = text.replace("slo_ttft = [0.5, 2.0]", "slo_ttft = [2.0, 2.0]")
    _, err = sweep("run", write(tmp_path, repeated), "--dry-run", expect=2)
    assert "slo_ttft and slo_tpot" in err and "twice" in err


def test_optimize_rows_are_the_optimizers_candidates(tmp_path):
    out = tmp_path / "out"
    summary = run(write(tmp_path, OPTIMIZE), out, "--no-charts")
    assert summary["rows"] == 8
    data = rows(out)
    assert set(data["status"]) <= {"sustained", "infeasible", "dominated"}
    below = data.filter((pl.col("token_budget") == 32) & (pl.col("max_batch") == 64))
    assert below["reason"].to_list() == ["budget_below_batch"] * 2
    rejected = data.filter(pl.col("status") != "sustained")
    assert rejected["reason"].str.len_chars().min() > 0 and rejected["rate"].is_nan().all()
    # the same candidates as `sweep optimize` with the first SLO pair
    report = json.loads(sweep("optimize", "--profile", "derated", "--requests", 80,
                              "--workload", "azure-code-2023", "--batches", "8,64",
                              "--budgets", "32,1024", "--slo-ttft", 0.5, "--slo-tpot", 0.05,
                              "--price-per-gpu-hour", 2.0, "--json")[0])
    grid_rows = data.filter(pl.col("slo_ttft") == 0.5)
    for candidate in report["candidates"]:
        row = grid_rows.filter((pl.col("max_batch") == candidate["max_batch"])
                               & (pl.col("token_budget") == candidate["token_budget"])
                               ).row(0, named=True)
        assert row["reason"] == (candidate["reason"] or "")
        if candidate["rate"] is not None:
            assert row["rate"] == candidate["rate"]
            assert row["ttft_p90_s"] == candidate["ttft_s"]["p90"]
            assert row["cost_per_million_tokens"] == candidate["cost_per_million_tokens"]
    # a looser SLO pair never sustains less
    by_pair = data.pivot(on="slo_ttft", index=["max_batch", "token_budget"], values="rate")
    assert (by_pair["2.0"].fill_nan(0) >= by_pair["0.5"].fill_nan(0)).all()


def test_grids_render_their_kinds_charts(tmp_path):
    out = tmp_path / "out"
    run(write(tmp_path, RATES), out)
    assert sorted(p.name for p in (out / "charts").iterdir()) == [
        "index.html", "itl_spike.html", "latency_vs_rate.html", "occupancy_vs_batch.html"]
    frame, axes = scan_results(out), charts.declared_axes(read_manifest(out))
    latency = charts.latency_vs_rate_chart(frame, axes=axes).to_dict()
    assert latency["hconcat"] and "no simulations" not in json.dumps(latency)
    # a step chart on simulate results, and a simulate chart on optimize results: a note
    empty = charts.rate_heatmap_chart(frame, axes=axes).to_dict()
    assert "no optimize results" in json.dumps(empty)


def test_optimize_grid_charts_and_dask(tmp_path):
    out = tmp_path / "out"
    summary = run(write(tmp_path, OPTIMIZE), out, "--executor", "dask", "--workers", 1)
    assert summary["complete"]
    assert sorted(p.name for p in (out / "charts").iterdir()) == [
        "index.html", "pareto_frontier.html", "rate_heatmap.html"]
    frame, axes = scan_results(out), charts.declared_axes(read_manifest(out))
    for name in ("pareto_frontier", "rate_heatmap"):
        spec = json.dumps(charts.CHARTS[name](frame, axes=axes).to_dict())
        assert "no optimize results" not in spec and "TTFT SLO" in spec  # the SLO dropdown
