"""The prefill_first policy (SGLang's scheduler) wherever a policy is named: simulate grids,
`sweep replay` and the results viewer take it end to end; `sweep optimize` and optimize
grids, whose analytic pass prices mixed steps, refuse it in one line."""

from __future__ import annotations

import json

import polars as pl

from rooftui.sweeps import charts
from rooftui.sweeps.results import read_manifest, scan_results
from rooftui.tui.settings import ExplorerSettings
from tests.conftest import REPO, sweep, sweep_json
from tests.functional.test_sweep_kinds import RATES as KINDS_RATES

# test_sweep_kinds' rate grid, chunked against prefill_first
RATES = KINDS_RATES.replace('policy = ["continuous", "chunked"]',
                            'policy = ["chunked", "prefill_first"]')


def test_a_simulate_grid_runs_prefill_first_as_sweep_simulate_does(tmp_path):
    grid, out = tmp_path / "grid.toml", tmp_path / "out"
    grid.write_text(RATES)
    summary = json.loads(sweep("run", grid, "--out", out, "--json")[0])
    assert summary["complete"] and summary["rows"] == 4  # 2 policies x 2 rates
    data = scan_results(out).collect().with_columns(pl.col(pl.Categorical).cast(pl.String))
    row = data.filter((pl.col("policy") == "prefill_first") & (pl.col("rate") == 8.0)
                      ).row(0, named=True)
    assert row["token_budget"] == 0  # the policy's default: 8192, as sweep simulate says
    direct = sweep_json("simulate", "--policy", "prefill_first",
                        "--workload", "azure-conv-2023", "--arrival", "poisson:rate=8",
                        "--requests", 60)
    assert direct["token_budget"] == 8192
    for key in ("throughput_tokens_per_s", "mean_batch", "duration_s", "steps"):
        assert row[key] == direct[key], key
    assert row["ttft_p90_s"] == direct["ttft_s"]["p90"]
    assert row["itl_p99_s"] == direct["itl_s"]["p99"]
    chunked = data.filter((pl.col("policy") == "chunked") & (pl.col("rate") == 8.0))
    assert chunked["steps"].item() != row["steps"]  # another schedule, not chunked renamed
    # the latency-vs-rate chart draws it as a policy of its own
    latency = charts.latency_vs_rate_chart(scan_results(out),
                                           axes=charts.declared_axes(read_manifest(out)))
    assert "prefill_first" in json.dumps(latency.to_dict())


def test_sweep_run_help_names_prefill_first_and_its_default_budget():
    text = sweep("run", "--help")[0]
    simulate = text[text.index('Kind "simulate"'):text.index('Kind "optimize"')]
    optimize = text[text.index('Kind "optimize"'):]
    assert "prefill_first" in simulate.split("policy", 1)[1].splitlines()[0]
    assert "prefill_first 8192" in simulate
    assert "not prefill_first" in optimize


def test_optimize_refuses_prefill_first_in_one_line(tmp_path):
    _, err = sweep("optimize", "--slo-ttft", 1, "--slo-tpot", 0.05, "--policy",
                   "prefill_first", expect=2)
    assert "prefill_first" in err and "chunked" in err and err.count("\n") == 1, err
    grid = tmp_path / "opt.toml"
    grid.write_text('name = "x"\nkind = "optimize"\n[fixed]\npolicy = "prefill_first"\n')
    _, err = sweep("run", grid, "--dry-run", expect=2)
    assert "policy" in err and "chunked, continuous" in err and err.count("\n") == 1, err


def test_replay_takes_prefill_first_for_any_engine():
    result = REPO / "tests" / "data" / "bench_results" / "vllm-bench-serve.json"
    setup = (result, "--model", "llama-3.1-8b", "--gpu", "h100-sxm")

    def predicted(*args) -> dict:
        return sweep_json("replay", *setup, *args)["runs"][0]["predicted"]

    default, chunked = predicted(), predicted("--policy", "chunked")
    prefill_first = predicted("--policy", "prefill_first")
    assert default == chunked != prefill_first  # vLLM's default is chunked
    assert prefill_first["ttft_s"]["mean"] > 0 and prefill_first["tpot_s"]["mean"] > 0


def test_a_prefill_first_row_opens_as_its_decode_step():
    """A prefill_first step prefills or decodes, never both: the results viewer opens the
    row as max batch decodes, where a chunked row adds the prefill its budget leaves."""
    row = {"gpu": "h100-sxm", "model": "llama-3-8b", "max_batch": 64, "token_budget": 512,
           "decode_context": 900.0}
    first = ExplorerSettings.from_row({**row, "policy": "prefill_first"})
    chunked = ExplorerSettings.from_row({**row, "policy": "chunked"})
    assert (first.batch, first.context, first.prefill) == (64, 900, 0)
    assert (chunked.batch, chunked.prefill) == (64, 512 - 64)
