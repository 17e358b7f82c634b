"""`sweep simulate` with sessions and the prefix cache: the `prefix_cache` JSON, the
options, trace:PATH, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_sweep, sweep, sweep_json

GENERATOR = ("sessions:turns=4,system=800,first=(exp:mean=400),growth=(exp:mean=150),"
             "output=(exp:mean=120),think=2")
STATISTICS = {"mean", "p50", "p90", "p99"}


def session_trace(tmp_path: Path) -> Path:
    rows = ["session_id,turn,input_tokens,output_tokens,arrival_s,think_time_s"]
    for session in range(20):
        context = 1500
        for turn in range(3):
            rows.append(f"s{session},{turn},{context},200,{session * 0.5 if turn == 0 else ''},"
                        f"{'' if turn == 0 else 1.5}")
            context += 200 + 300
    path = tmp_path / "sessions.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_json_has_the_prefix_cache_keys(tmp_path):
    report = sweep_json("simulate", "--arrival", f"trace:{session_trace(tmp_path)}", "-n", 60,
                        "--prefix-cache", "lru", "--policy", "chunked", "--slo-ttft", "1")
    cache = report["prefix_cache"]
    assert cache.keys() >= {"hit_rate", "hit_rate_by_tier", "cached_prefill_tokens",
                            "computed_prefill_tokens", "latency", "without_cache"}
    assert cache["hit_rate_by_tier"].keys() == {"hbm", "cpu", "ssd"}
    for key in ("ttft_s", "tpot_s"):
        assert cache["latency"][key]["with_cache"].keys() == STATISTICS
        assert cache["latency"][key]["with_cache"] == report[key]
    # 40 later turns, each hitting the previous turn's 1,699 written tokens in 16-token
    # blocks; the first turns hit nothing
    per_turn = sum((1500 + 500 * t + 200 - 1) // 16 * 16 for t in range(2))
    assert cache["cached_prefill_tokens"] == 20 * per_turn
    assert cache["latency"]["ttft_s"]["with_cache"]["p90"] < \
        cache["latency"]["ttft_s"]["without_cache"]["p90"]
    assert "slo_attainment" in cache["without_cache"]


def test_zero_capacity_is_no_cache():
    args = ("simulate", "--workload", GENERATOR, "--arrival", "poisson:rate=4", "-n", 300)
    plain = sweep_json(*args)
    empty = sweep_json(*args, "--prefix-cache", "lru", "--cache-capacity-gb", "0")
    assert empty["prefix_cache"]["hit_rate"] == 0
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "duration_s", "steps"):
        assert empty[key] == plain[key], key


def test_tiers_report_their_hits_and_transfers():
    report = sweep_json("simulate", "--workload", GENERATOR, "--arrival", "poisson:rate=4",
                        "-n", 300, "--prefix-cache", "lru", "--cache-capacity-gb", "0",
                        "--cpu-tier-gb", "50")
    cache = report["prefix_cache"]
    assert cache["hit_rate_by_tier"]["hbm"] == 0 < cache["hit_rate_by_tier"]["cpu"]
    assert cache["tiers"]["cpu"]["bandwidth_gbs"] == 63.0  # H100 SXM: PCIe 5.0 x16
    # every CPU hit crosses the link: its bytes over the bandwidth
    kv_bytes_per_token = 131_072  # Llama-3-8B, bf16: 2 x 8 heads x 128 x 32 layers x 2 B
    assert cache["load_s"] == pytest.approx(
        cache["cached_prefill_tokens_by_tier"]["cpu"] * kv_bytes_per_token / 63e9, rel=1e-9)


def test_table_shows_the_cache_and_the_comparison():
    out = run_sweep("simulate", "--workload", GENERATOR, "-n", 200, "--prefix-cache", "lru")
    for text in ("prefix cache", "of prefill tokens cached", "without the cache", "TTFT p90"):
        assert text in out


def test_trace_path_reads_a_plain_trace_as_before(shared_dir):
    trace = shared_dir / "traces" / "azure-conv-2023.csv"
    via_path = sweep_json("simulate", "--arrival", f"trace:{trace},speed=2", "-n", 200)
    via_workload = sweep_json("simulate", "--workload", str(trace), "--arrival", "trace:speed=2",
                              "-n", 200)
    for key in ("ttft_s", "tpot_s", "duration_s"):
        assert via_path[key] == via_workload[key]


@pytest.mark.parametrize("args, message", [
    (("--cpu-tier-gb", "10"), "add --prefix-cache lru"),
    (("--prefix-cache", "lru"), "share prefixes"),
    (("--prefix-cache", "lru", "--workload", GENERATOR, "--policy", "static"),
     "continuous or chunked"),
    (("--prefix-cache", "lru", "--cache-capacity-gb", "-1"), "--cache-capacity-gb"),
    (("--workload", "sessions:turns=2,system=0,first=10,output=5,think=1"), "missing growth"),
    (("--workload", GENERATOR, "--arrival", "trace"), "start at an arrival process"),
])
def test_bad_input_is_one_line(args, message):
    err = sweep("simulate", "-n", 50, *args, expect=2)[1]
    assert message in err and err.count("\n") == 1, err


def test_more_requests_than_a_session_trace_has_are_refused(tmp_path):
    err = sweep("simulate", "--arrival", f"trace:{session_trace(tmp_path)}", "-n", 61,
                expect=2)[1]
    assert "at most that" in err


def test_capacity_with_the_cache_is_at_least_without():
    args = ("simulate", "--workload", GENERATOR, "--arrival", "poisson:rate=2", "-n", 600,
            "--prefix-cache", "lru", "--slo-ttft", "0.2", "--slo-tpot", "0.05", "--capacity")
    capacity = sweep_json(*args)["prefix_cache"]["capacity"]
    with_cache, without = capacity["with_cache"], capacity["without_cache"]
    assert with_cache["slo_attainment"] >= 0.9 and without["slo_attainment"] >= 0.9
    assert with_cache["load_scale"] > without["load_scale"]
    assert with_cache["offered_requests_per_s"] == pytest.approx(
        2 * with_cache["load_scale"] * 4, rel=0.01)  # 4 turns per session
    assert "capacity" in run_sweep(*args)
    err = sweep("simulate", "--workload", GENERATOR, "-n", 50, "--prefix-cache", "lru",
                "--capacity", expect=2)[1]
    assert "needs an objective" in err
