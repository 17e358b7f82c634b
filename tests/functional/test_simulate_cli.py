"""`sweep simulate` and `sweep occupancy`: JSON contract, trace records, reproducibility,
agreement with `sweep point`, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import polars as pl
import pytest

from rooftui.sweeps.cli import main
from tests.conftest import run_sweep, sweep_json

STATISTICS = {"mean", "p50", "p90", "p99"}
KEYS = {"requests", "duration_s", "throughput_tokens_per_s", "request_throughput", "occupancy",
        "mean_batch", "preemptions", "ttft_s", "tpot_s", "itl_s", "e2e_s"}


def fails(capsys, *args: str) -> str:
    """Run `sweep ARGS` in-process; assert exit status 2 and one line on stderr."""
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_json_has_the_listed_keys():
    report = sweep_json("simulate", "--requests", 200, "--policy", "chunked",
                        "--arrival", "poisson:rate=4")
    assert report.keys() >= KEYS
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
        assert report[key].keys() == STATISTICS
    assert report["requests"] == 200 and report["token_budget"] == 512
    assert "slo_attainment" not in report


def test_slo_flags_add_attainment_and_goodput():
    report = sweep_json("simulate", "-n", 200, "--arrival", "poisson:rate=4",
                        "--slo-ttft", "0.5", "--slo-tpot", "0.02")
    assert 0 <= report["slo_attainment"] <= 1
    assert report["goodput_tokens_per_s"] <= report["throughput_tokens_per_s"]


def test_seeded_runs_repeat_and_seeds_differ():
    args = ("simulate", "-n", 300, "--workload", "azure-code-2023",
            "--arrival", "gamma:rate=3,cv=4", "--kv-admission", "paged")
    first = sweep_json(*args, "--seed", 3)
    assert first == sweep_json(*args, "--seed", 3)
    assert first != sweep_json(*args, "--seed", 4)


def test_seeded_runs_are_identical_whatever_the_blas_threads():
    """The statistics sum in a fixed order (no BLAS dot), so one BLAS thread or many give
    the same bits; each run is a process of its own, its thread count set before numpy."""
    args = [sys.executable, "-m", "rooftui.sweeps", "simulate", "-n", "4000", "--policy",
            "chunked", "--arrival", "poisson:rate=40", "--seed", "7", "--json"]
    single = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                     "MKL_NUM_THREADS")}
    default = {k: v for k, v in os.environ.items() if k not in single}
    outputs = [subprocess.run(args, capture_output=True, text=True, check=True,
                              env=env).stdout for env in (default, {**default, **single})]
    assert outputs[0] == outputs[1] and json.loads(outputs[0])["requests"] == 4000


def test_table_has_units():
    out = run_sweep("simulate", "-n", 100, "--policy", "static", "--slo-ttft", "1")
    for text in ("tok/s", "req/s", "%", "ms", "TTFT", "TPOT", "ITL", "E2E", "goodput"):
        assert text in out


def test_step_times_equal_sweep_point(tmp_path):
    """Eight fixed requests: every decode step is `sweep point --batch 8 --context S`."""
    prefix = tmp_path / "run"
    run_sweep("simulate", "--input-tokens", "fixed:1000", "--output-tokens", "fixed:40",
              "-n", 8, "--max-batch", 8, "--profile", "derated", "--trace-out", prefix)
    steps = pl.read_parquet(f"{prefix}-steps.parquet")
    for row in steps.filter(pl.col("decode_tokens") == 8).head(5).iter_rows(named=True):
        context = row["decode_context_tokens"] // 8
        point = sweep_json("point", "--batch", 8, "--context", context, "--profile", "derated")
        assert row["duration_s"] == point["step_time_s"]
    chunk = sweep_json("simulate", "--input-tokens", "fixed:700", "--output-tokens", "fixed:2",
                       "-n", 1, "--max-batch", 1)
    point = sweep_json("point", "--batch", 0, "--prefill", 700)
    assert chunk["ttft_s"]["mean"] == point["step_time_s"]


def test_trace_out_writes_steps_and_requests(tmp_path):
    run_sweep("simulate", "-n", 50, "--arrival", "poisson:rate=2", "--trace-out",
              tmp_path / "records.parquet")
    steps = pl.read_parquet(tmp_path / "records-steps.parquet")
    requests = pl.read_parquet(tmp_path / "records-requests.parquet")
    assert {"step", "start_s", "duration_s", "decode_tokens", "prefill_tokens", "waiting",
            "running", "kv_tokens", "useful_slots"} <= set(steps.columns)
    assert {"request", "arrival_s", "input_tokens", "output_tokens", "ttft_s", "tpot_s",
            "e2e_s", "preemptions"} <= set(requests.columns)
    assert requests.height == 50
    folder = tmp_path / "out"
    run_sweep("simulate", "-n", 20, "--trace-out", f"{folder}/")
    assert (folder / "steps.parquet").is_file() and (folder / "requests.parquet").is_file()


def test_trace_files_and_parquet_workloads(shared_dir, tmp_path):
    trace = shared_dir / "traces" / "azure-conv-2023.csv"
    replay = sweep_json("simulate", "--workload", trace, "--arrival", "trace:speed=2", "-n", 300)
    assert replay["workload"] == "azure-conv-2023.csv" and replay["arrival"] == "trace:speed=2"
    parquet = tmp_path / "trace.parquet"
    pl.read_csv(trace).head(400).write_parquet(parquet)
    again = sweep_json("simulate", "--workload", parquet, "--arrival", "trace:speed=2",
                       "-n", 300)
    assert {k: v for k, v in again.items() if k != "workload"} == \
        {k: v for k, v in replay.items() if k != "workload"}
    occupancy = sweep_json("occupancy", "--output-tokens", f"empirical:{parquet}", "-b", 4)
    assert 0 < occupancy["occupancy"] < 1


def test_occupancy_command():
    report = sweep_json("occupancy", "--output-tokens", "exp:mean=100", "--batch", 32)
    assert round(report["occupancy"], 4) == 0.2464
    assert report["exponential_occupancy"] == report["occupancy"]
    several = sweep_json("occupancy", "--workload", "sharegpt-8k", "-b", 4, "-b", 128)
    assert [r["batch"] for r in several] == [4, 128]
    assert several[0]["occupancy"] > several[1]["occupancy"] > 0.4
    out = run_sweep("occupancy", "--output-tokens", "exp:mean=100", "--batch", 32)
    assert "0.2464" in out and "24.6 %" in out


@pytest.mark.parametrize("args, message", [
    (("simulate", "--output-tokens", "exp:mean=0"), "bad distribution"),
    (("simulate", "--input-tokens", "fixed:10", "--output-tokens", "uniform:3"), "expected one of"),
    (("simulate", "--output-tokens", "fixed:10"), "give both"),
    (("simulate", "--workload", "no-such-preset"), "unknown workload"),
    (("simulate", "--workload", "/no/such/trace.csv"), "not found"),
    (("simulate", "--arrival", "poisson"), "expected poisson:rate=R"),
    (("simulate", "--arrival", "gamma:rate=2"), "gamma:rate=R,cv=C"),
    (("simulate", "--arrival", "trace"), "arrival_s"),
    (("simulate", "--policy", "static", "--kv-admission", "paged"), "static batching"),
    (("simulate", "--policy", "static", "--token-budget", "1024"), "chunked or continuous"),
    (("simulate", "--policy", "chunked", "--token-budget", "16"), "at least the max batch"),
    (("simulate", "--model", "llama-3-70b"), "does not fit the KV cache"),
    (("simulate", "--policy", "eager"), "eager"),
    (("simulate", "-n", "0"), "0"),
    (("occupancy", "--batch", "4"), "give one of"),
    (("occupancy", "--output-tokens", "lognormal:median=5", "-b", "4"), "missing sigma"),
    (("occupancy", "--output-tokens", "exp:mean=5", "-b", "0"), "0"),
    (("simulate", "--seed", "-1"), "'--seed': expected a whole number from 0 to 4,294,967,295"),
    (("simulate", "--slo-ttft", "nan"), "'--slo-ttft'"),
    (("simulate", "--arrival", "poisson:rate=inf"), "rate must be a number in [1e-06,"),
    (("simulate", "--input-tokens", "exp:mean=1e300", "--output-tokens", "fixed:4"),
     "mean must be in [0.001, 1e+08]"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, args, message):
    assert message in fails(capsys, *args)


def test_malformed_trace_file_is_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("input_tokens,output_tokens\n10,5\n12,oops\n")
    assert "row 3" in fails(capsys, "simulate", "--workload", bad)
    garbage = tmp_path / "bad.parquet"
    garbage.write_bytes(b"not parquet")
    assert "parquet" in fails(capsys, "occupancy", "--output-tokens", f"empirical:{garbage}",
                              "-b", "2")
    preset = tmp_path / "preset.toml"
    preset.write_text('name = "x"\n[input_tokens]\nquantiles = [0, 1]\nvalues = [5, 1]\ncap = 9\n')
    assert "non-decreasing" in fails(capsys, "simulate", "--workload", preset)


def test_json_is_valid_for_piping():
    out = run_sweep("simulate", "-n", 30, "--json")
    assert json.loads(out)["requests"] == 30


def test_presets_are_what_the_derivation_script_writes(shared_dir, tmp_path):
    from rooftui.core.spec_files import shipped_dir
    from rooftui.sweeps.derive_workloads import PRESETS
    from rooftui.sweeps.derive_workloads import main as derive

    derive([str(shared_dir / "traces"), "--out", str(tmp_path)])
    for name in PRESETS:
        shipped = (shipped_dir("workloads") / f"{name}.toml").read_text()
        assert (tmp_path / f"{name}.toml").read_text() == shipped, name


def test_scheduler_report_prints_its_tables(capsys):
    from rooftui.sweeps.scheduler_report import main as report

    report(["--batches", "10", "--requests", "200"])
    out = capsys.readouterr().out
    assert "| 1/H_B (any exponential) | 0.480 | 0.368 | 0.296 | 0.246 |" in out
    # analytic, simulated and throughput tables; no arrival table without --traces
    assert out.count("| sharegpt-8k") == 3 and "Correlated arrivals" not in out


def test_prefill_first_policy_runs_and_reports_its_budget():
    report = sweep_json("simulate", "-n", 200, "--policy", "prefill_first",
                        "--arrival", "poisson:rate=8", "--kv-admission", "paged")
    assert report["policy"] == "prefill_first" and report["token_budget"] == 8192
    assert report["requests"] == 200 and report["itl_s"]["mean"] > 0
    assert "prefill_first" in run_sweep("simulate", "--help")
