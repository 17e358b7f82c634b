"""Readers of serving-benchmark result files (sweeps/bench_results.py): one fixture per
tool in tests/data/bench_results/, read into the common record with times in seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooftui.core.errors import SpecError
from rooftui.sweeps.bench_results import detect_format, read_benchmark

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "bench_results"


def test_vllm_save_result_with_per_request_lengths():
    (run,) = read_benchmark(FIXTURES / "vllm-bench-serve.json")
    assert (run.tool, run.engine, run.engine_version) == ("vllm", "vllm", "0.12.0")
    assert run.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert (run.concurrency, run.request_rate, run.requests) == (4, None, 8)
    assert run.input_tokens.tolist() == [1024] * 8 and run.output_tokens.tolist() == [64] * 8
    assert (run.input_mean, run.output_mean) == (1024, 64)
    assert run.ttft.mean == pytest.approx(0.05814) and run.ttft.p99 == pytest.approx(0.0801)
    assert run.tpot.median == pytest.approx(0.0071) and run.itl.p99 == pytest.approx(0.0089)
    assert run.output_throughput == pytest.approx(267.78) and run.duration_s == 1.912


def test_sglang_jsonl_is_one_run_per_line():
    concurrent, rated = read_benchmark(FIXTURES / "sglang-bench-serving.jsonl")
    assert concurrent.tool == rated.tool == "sglang" and concurrent.engine == "sglang"
    assert (concurrent.concurrency, concurrent.request_rate) == (8, None)
    assert (rated.concurrency, rated.request_rate) == (None, 4.0)
    assert concurrent.ttft.mean == pytest.approx(0.092)
    assert rated.tpot.mean == pytest.approx(0.0056) and rated.requests == 16
    assert (rated.input_mean, rated.output_mean) == (1024, 128)
    assert rated.source.endswith("line 2")


def test_guidellm_report_reads_strategy_and_requests():
    (run,) = read_benchmark(FIXTURES / "guidellm-report.json")
    assert run.tool == "guidellm" and run.concurrency == 2 and run.requests == 4
    assert run.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert run.input_tokens.tolist() == [512] * 4 and run.output_mean == 32
    assert run.ttft.mean == pytest.approx(0.05) and run.ttft.p99 == pytest.approx(0.061)
    assert run.tpot.mean == pytest.approx(0.00806) and run.itl.p99 == pytest.approx(0.009)
    assert run.duration_s == pytest.approx(0.6)


def test_genai_perf_inter_token_latency_is_tpot():
    (run,) = read_benchmark(FIXTURES / "profile_export_genai_perf.json")
    assert run.tool == "genai-perf" and run.concurrency == 4 and run.requests == 16
    assert run.tpot.mean == pytest.approx(0.0073) and run.itl.mean is None
    assert run.ttft.p99 == pytest.approx(0.14) and run.input_mean == 1024


def test_aiperf_export_nested_config():
    (run,) = read_benchmark(FIXTURES / "profile_export_aiperf.json")
    assert run.tool == "aiperf" and run.concurrency == 8 and run.requests == 32
    assert run.itl.p99 == pytest.approx(0.0099) and run.tpot.mean == pytest.approx(0.0074)
    assert run.duration_s == pytest.approx(4.2) and run.output_mean == 128


@pytest.mark.parametrize("name, expected", [
    ("vllm-bench-serve.json", "vllm"), ("guidellm-report.json", "guidellm"),
    ("profile_export_genai_perf.json", "genai-perf"),
    ("profile_export_aiperf.json", "aiperf")])
def test_format_is_detected_from_content(name, expected):
    assert detect_format(json.loads((FIXTURES / name).read_text())) == expected


def test_format_override_applies_that_reader(tmp_path):
    path = tmp_path / "renamed.txt"
    path.write_text((FIXTURES / "vllm-bench-serve.json").read_text())
    assert read_benchmark(path, "vllm")[0].requests == 8
    with pytest.raises(SpecError, match="not a guidellm result|benchmarks"):
        read_benchmark(path, "guidellm")


@pytest.mark.parametrize("text, message", [
    ("", "not a result file"),
    ('{"mean_ttft_ms": 1', "not JSON"),
    ('{"hello": 1}', "not a result file"),
    ('{"mean_ttft_ms": 5, "completed": "many", "total_input_tokens": 1}', "completed"),
    ('{"mean_ttft_ms": -5, "completed": 2, "total_input_tokens": 1, '
     '"total_output_tokens": 1}', "mean_ttft_ms"),
    ('{"benchmarks": [{"metrics": {}, "args": {"strategy": {"type_": "sweep"}}}]}',
     "unknown GuideLLM strategy"),
    ('{"benchmarks": [3]}', "expected a JSON object"),
    ('{"time_to_first_token": {"unit": "ms", "avg": 3}}', "input_sequence_length"),
])
def test_damaged_or_unknown_files_are_one_error(tmp_path, text, message):
    path = tmp_path / "result.json"
    path.write_text(text)
    with pytest.raises(SpecError, match=message) as error:
        read_benchmark(path)
    assert "\n" not in str(error.value)


def test_missing_file_is_one_error(tmp_path):
    with pytest.raises(SpecError, match="not found"):
        read_benchmark(tmp_path / "absent.json")


@pytest.mark.parametrize("name, where", [("profile_export_genai_perf.json", ()),
                                         ("profile_export_aiperf.json", ("loadgen",))])
def test_warm_up_requests_are_read_and_kept_apart(tmp_path, name, where):
    """genai-perf's and AIPerf's warm-up requests are not in the run's statistics: the run
    keeps their count apart from the scored requests."""
    data = json.loads((FIXTURES / name).read_text())
    (plain,) = read_benchmark(FIXTURES / name)
    config = data["input_config"]
    for key in where:
        config = config[key]
    config["warmup_request_count"] = 16
    path = tmp_path / name
    path.write_text(json.dumps(data))
    (run,) = read_benchmark(path)
    assert run.warmup_requests == 16 and plain.warmup_requests == 0
    assert run.requests == plain.requests


@pytest.mark.parametrize("name, where, key", [
    ("profile_export_genai_perf.json", (), "num_dataset_entries"),
    ("profile_export_aiperf.json", ("input", "conversation"), "num")])
def test_synthetic_prompt_pool_is_read_or_the_tools_default(tmp_path, name, where, key):
    """genai-perf and AIPerf draw every prompt from a synthetic dataset of 100 unless told
    otherwise (AIPerf's export leaves defaults out); a file's own prompts are no pool."""
    (plain,) = read_benchmark(FIXTURES / name)
    assert plain.prompt_pool == 100 and plain.summary()["prompt_pool"] == 100

    def written(change) -> Path:
        data = json.loads((FIXTURES / name).read_text())
        config = data["input_config"]
        for step in where:
            config = config.setdefault(step, {})
        change(config, data["input_config"])
        path = tmp_path / name
        path.write_text(json.dumps(data))
        return path

    (sized,) = read_benchmark(written(lambda config, _: config.update({key: 7})))
    assert sized.prompt_pool == 7
    own = {"profile_export_genai_perf.json": ("input_file", "prompts.jsonl"),
           "profile_export_aiperf.json": ("file", "prompts.jsonl")}[name]
    (from_file,) = read_benchmark(written(
        lambda _, top: (top if not where else top["input"]).update([own])))
    assert from_file.prompt_pool is None
    with pytest.raises(SpecError, match="whole number"):
        read_benchmark(written(lambda config, _: config.update({key: 0})))


@pytest.mark.parametrize("name", ["vllm-bench-serve.json", "sglang-bench-serving.jsonl",
                                  "guidellm-report.json"])
def test_other_tools_draw_each_prompt_afresh(name):
    assert all(run.prompt_pool is None for run in read_benchmark(FIXTURES / name))
