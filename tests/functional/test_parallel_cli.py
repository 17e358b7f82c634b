"""`sweep point --pp/--ep/--dp/--system`: options, JSON keys and errors."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.conftest import sweep_json, sweep_process
from tests.functional.test_bad_input import FUZZ, NUMBER_TEXT, cheap, run

PARALLELISM_KEYS = {"tp", "pp", "ep", "dp", "micro_batches", "gpus", "system",
                    "gpus_per_domain", "bubble"}
COLLECTIVE_KEYS = {"bytes", "link", "time_s"}


def test_point_json_has_parallelism_and_collectives():
    r = sweep_json("point", "--model", "deepseek-v3", "--system", "gb200-nvl72", "--dp", 32,
                   "--ep", 32, "--batch", 64, "--weight-dtype", "fp8")
    assert set(r["parallelism"]) == PARALLELISM_KEYS
    assert r["parallelism"]["gpus"] == 32 and r["gpu"] == "GB200"
    assert r["parallelism"]["system"] == "GB200 NVL72"
    assert set(r["collectives"]) == {"all_to_all"}
    assert set(r["collectives"]["all_to_all"]) == COLLECTIVE_KEYS
    assert r["collectives"]["all_to_all"]["link"] == "nvlink_domain"
    assert r["parts"]["all_to_all"]["bound"] == "interconnect"
    assert r["moe"]["busiest_gpu_pairs_per_layer"] > r["moe"]["mean_gpu_pairs_per_layer"]
    assert r["tokens_per_s_per_gpu"] == pytest.approx(r["tokens_per_s"] / 32)


def test_point_pipeline_over_the_network():
    r = sweep_json("point", "--model", "llama-3.1-405b", "--system", "hgx-h100-ib", "--tp", 8,
                   "--pp", 2, "--weight-dtype", "fp8", "--batch", 16)
    assert r["collectives"]["pipeline_transfer"]["link"] == "network"
    assert r["collectives"]["communication"]["link"] == "nvlink_domain"
    assert r["parallelism"]["micro_batches"] == 2 and r["parallelism"]["bubble"] == 1.5


def test_point_table_shows_each_collective():
    result = sweep_process("point", "--model", "deepseek-v3", "--system", "hgx-h200-ib",
                           "--dp", 16, "--ep", 16, "--batch", 32)
    assert result.returncode == 0, result.stderr
    assert "all_to_all" in result.stdout and "nvlink_domain+network" in result.stdout
    assert "busiest expert GPU" in result.stdout


@pytest.mark.parametrize(("args", "message"), [
    (("--ep", 2), "ep 2 must be 1 or tp x dp"),
    (("--model", "deepseek-v3", "--pp", 0), "--pp"),
    (("--system", "nvl1000"), "unknown system"),
])
def test_point_parallelism_errors_are_one_line(args, message):
    result = sweep_process("point", *args)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


DEPLOYMENT_KEYS = {"kind", "gpus", "rate_req_s", "sustained_req_s", "tokens_per_s",
                   "tokens_per_s_per_gpu", "tokens_per_s_per_user", "req_s_per_gpu", "ttft_s",
                   "tpot_s", "decode_batch_per_group", "prefill", "decode", "kv_transfer",
                   "cost_per_hour", "cost_per_million_tokens"}
HEADER_KEYS = {"model", "system", "gpu", "input_tokens", "output_tokens", "slo_ttft_s",
               "slo_tpot_s", "weight_dtype", "kv_dtype", "compute_dtype", "max_gpus",
               "price_per_gpu_hour", "null_reasons"}


def test_disagg_json_keys():
    r = sweep_json("disagg", "--model", "llama-3-70b", "--system", "hgx-h200-ib",
                   "--slo-ttft", 0.3, "--slo-tpot", 0.02)
    assert set(r) == HEADER_KEYS | {"disaggregated", "aggregated"}
    assert set(r["disaggregated"]) == DEPLOYMENT_KEYS
    assert set(r["disaggregated"]["prefill"]) == {"layout", "replicas", "gpus", "prefill_time_s"}
    assert set(r["disaggregated"]["kv_transfer"]) == {"bytes_per_request", "transfer_time_s",
                                                      "link"}
    assert set(r["disaggregated"]["decode"]) == {"layout", "replicas", "gpus", "batch_per_group"}
    assert r["aggregated"]["prefill"] is None and "aggregated.prefill" in r["null_reasons"]
    assert r["disaggregated"]["gpus"] == (r["disaggregated"]["prefill"]["gpus"]
                                          + r["disaggregated"]["decode"]["gpus"])


def test_size_json_keys_and_bill():
    r = sweep_json("size", "--rate", 20, "--price-per-gpu-hour", 3, "--input-tokens", 1000,
                   "--output-tokens", 200)
    assert set(r) == HEADER_KEYS | {"disaggregated", "aggregated", "rate_req_s", "smallest"}
    chosen = r[r["smallest"]]
    assert chosen["gpus"] == min(r[k]["gpus"] for k in ("disaggregated", "aggregated"))
    assert chosen["cost_per_hour"] == 3 * chosen["gpus"]
    assert chosen["cost_per_million_tokens"] == pytest.approx(
        3 * chosen["gpus"] / 3600 / (20 * 200) * 1e6)


def test_size_beyond_reach_is_null_with_a_reason():
    r = sweep_json("size", "--rate", 1e6, "--max-gpus", 8)
    assert r["smallest"] is None and r["disaggregated"] is None
    assert "sustains the rate" in r["null_reasons"]["smallest"]


def test_disagg_table_runs():
    result = sweep_process("disagg", "--model", "deepseek-v3", "--system", "gb200-nvl72",
                           "--max-gpus", 72)
    assert result.returncode == 0, result.stderr
    assert "KV transfer" in result.stdout and "aggregated" in result.stdout


# --- generated bad values: exit 0 or 2, one line, strict finite JSON (test_bad_input's run)

LAYOUT_OPTIONS = ["--pp", "--ep", "--dp", "--micro-batches", "--tp", "--batch"]
SERVING_OPTIONS = ["--slo-ttft", "--slo-tpot", "--max-gpus", "--input-tokens",
                   "--output-tokens", "--price-per-gpu-hour"]


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(LAYOUT_OPTIONS), NUMBER_TEXT), min_size=1,
                max_size=3))
def test_point_layout_options_fuzzed(options):
    assume(all(cheap(option, text) for option, text in options))
    run("point", "--model", "deepseek-v3", "--system", "gb200-nvl72",
        *[word for pair in options for word in pair], "--json")


@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.sampled_from(["disagg", "size"]), st.sampled_from(SERVING_OPTIONS), NUMBER_TEXT)
def test_disagg_and_size_options_fuzzed(command, option, text):
    rate = ["--rate", "5"] if command == "size" else []
    run(command, "--model", "llama-3-8b", "--max-gpus", "16", *rate, option, text, "--json")
