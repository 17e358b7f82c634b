"""`sweep optimize` end to end: the JSON contract, the optimum replayed by `sweep simulate`,
the text report, charts, and one-line errors."""

from __future__ import annotations

import json
import shlex

import pytest

from tests.conftest import sweep

QUICK = ["--workload", "azure-conv-2023", "--profile", "derated", "--requests", "150",
         "--batches", "8,64,512", "--budgets", "32,512,2048"]


@pytest.fixture(scope="module")
def report() -> dict:
    out, _ = sweep("optimize", "--slo-ttft", 1, "--slo-tpot", 0.05, *QUICK,
                   "--price-per-gpu-hour", 2.5, "--json")
    return json.loads(out)


def test_json_lists_the_best_and_every_candidate(report):
    best = report["best"]
    for key in ("max_batch", "token_budget", "rate", "goodput_tokens_per_s", "ttft_s",
                "tpot_s", "cost_per_million_tokens"):
        assert key in best, key
    assert set(best["ttft_s"]) == {"mean", "p50", "p90", "p99"}
    assert best["cost_per_million_tokens"] == pytest.approx(
        2.5 / 3600 / best["goodput_tokens_per_s"] * 1e6)
    pairs = {(c["max_batch"], c["token_budget"]) for c in report["candidates"]}
    assert pairs == {(b, t) for b in (8, 64, 512) for t in (32, 512, 2048)}
    for candidate in report["candidates"]:
        if candidate["status"] == "sustained":
            assert candidate["rate"] > 0 and candidate["reason"] is None
            assert candidate["rate"] <= best["rate"]
        else:
            assert candidate["rate"] is None and candidate["reason"] and candidate["detail"]
    assert sum(report["rejected"].values()) == sum(
        c["status"] != "sustained" for c in report["candidates"])
    frontier = report["pareto"]
    assert frontier and all(p["tokens_per_s_per_gpu"] > 0 for p in frontier)
    # the frontier rises in throughput per GPU as speed per user falls
    users = [p["per_user_tokens_per_s"] for p in frontier]
    gpus = [p["tokens_per_s_per_gpu"] for p in frontier]
    assert users == sorted(users) and gpus == sorted(gpus, reverse=True)


def test_the_optimum_matches_sweep_simulate_at_its_configuration_and_rate(report):
    best = report["best"]
    command = shlex.split(best["simulate_command"])
    assert command[:2] == ["sweep", "simulate"]
    assert f"poisson:rate={best['rate']!r}" in command
    simulated = json.loads(sweep(*command[1:])[0])
    assert simulated["max_batch"] == best["max_batch"]
    assert simulated["token_budget"] == best["token_budget"]
    for key in ("ttft_s", "tpot_s", "goodput_tokens_per_s", "slo_attainment",
                "throughput_tokens_per_s", "mean_batch", "occupancy"):
        assert simulated[key] == best[key], key


def test_text_report_has_units_a_table_and_the_frontier():
    out, _ = sweep("optimize", "--slo-ttft", 1, "--slo-tpot", 0.05, *QUICK)
    assert "best: max batch" in out and "req/s" in out and "tok/s" in out
    assert "b: budget below the max batch" in out  # 512 > 32 and 512 > 64... has letters
    assert "Pareto frontier" in out and "sweep simulate" in out


def test_gpus_per_replica_is_tensor_parallelism(tmp_path):
    out, _ = sweep("optimize", "--model", "llama-3-70b", "--gpu", "h100-sxm",
                   "--gpus-per-replica", 4, "--slo-ttft", 2, "--slo-tpot", 0.1,
                   "--workload", "azure-conv-2023", "--requests", 100, "--batches", "32",
                   "--budgets", "1024", "--profile", "derated", "--json")
    r = json.loads(out)
    assert r["gpus_per_replica"] == 4
    best = r["best"]
    assert "--tp 4" in best["simulate_command"]
    assert best["tokens_per_s_per_gpu"] == pytest.approx(
        best["rate"] * r["candidates"][0]["analytic"]["mean_output_tokens"] / 4)
    sweep("optimize", "--tp", 2, "--gpus-per-replica", 4, "--slo-ttft", 1, "--slo-tpot", 0.1,
          expect=2)


def test_charts_are_written(tmp_path):
    _, err = sweep("optimize", "--slo-ttft", 1, "--slo-tpot", 0.05, *QUICK, "--json",
                   "--charts", tmp_path / "charts")
    written = sorted(p.name for p in (tmp_path / "charts").iterdir())
    assert written == ["pareto_frontier.html", "rate_heatmap.html"]
    assert "wrote" in err


@pytest.mark.parametrize(("args", "needle"), [
    (["--batches", "8,x"], "--batches"),
    (["--budgets", "0"], "--budgets"),
    (["--arrival", "gamma:cv=-1"], "--arrival"),
    (["--arrival", "closed"], "--arrival"),
    (["--quantile", "0.8"], "--quantile"),
    (["--workload", "no-such-workload"], "no-such-workload"),
    (["--arrival", "trace"], "arrival_s"),  # the preset has no arrival times
])
def test_bad_input_is_one_line_and_status_2(args, needle):
    _, err = sweep("optimize", "--slo-ttft", 1, "--slo-tpot", 0.1, "--requests", 20,
                   "--batches", "8", "--budgets", "64", *args, expect=2)
    assert needle in err and err.count("\n") == 1, err


def test_missing_slo_is_a_usage_error():
    _, err = sweep("optimize", "--slo-tpot", 0.1, expect=2)
    assert "--slo-ttft" in err
