"""`sweep replay`: benchmark result files predicted through the simulator, engine
profiles fitted from them, and the published end-to-end datasets replayed."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from rooftui.core.assumptions import load_profile
from tests.conftest import REPO, sweep, sweep_json

FIXTURES = REPO / "tests" / "data" / "bench_results"
SETUP = ("--model", "llama-3.1-8b", "--gpu", "h100-sxm")


def test_replay_every_fixture_as_strict_json():
    files = sorted(FIXTURES.glob("*.json")) + sorted(FIXTURES.glob("*.jsonl"))
    files = [f for f in files if f.name != "damaged.json"]
    report = sweep_json("replay", *files, *SETUP)
    assert len(report["runs"]) == 6  # the SGLang file holds two runs
    for row in report["runs"]:
        assert row["predicted"]["ttft_s"]["mean"] > 0
        assert row["predicted"]["output_throughput"] > 0
        assert set(row["errors"]) >= {"ttft", "tpot", "itl", "output_throughput"}
    vllm = next(r for r in report["runs"] if r["tool"] == "vllm")
    assert vllm["errors"]["tpot"] == pytest.approx(
        vllm["predicted"]["tpot_s"]["mean"] / vllm["tpot_s"]["mean"] - 1)


def test_replay_prints_measured_and_predicted_with_units():
    out, _ = sweep("replay", FIXTURES / "sglang-bench-serving.jsonl", *SETUP)
    assert "TTFT" in out and "TPOT" in out and " ms" in out
    assert "4 req/s" in out and "c=8" in out


def test_clients_in_step_are_replayed_as_asked_and_said():
    """--clients overrides the engine's client start; each run says which it had."""
    aiperf = FIXTURES / "profile_export_aiperf.json"
    staggered = sweep_json("replay", aiperf, *SETUP)["runs"][0]
    in_step = sweep_json("replay", aiperf, *SETUP, "--clients", "in-step")["runs"][0]
    assert (staggered["clients"], in_step["clients"]) == ("staggered", "in-step")
    # eight prompts sent together queue behind each other: a longer first token
    assert in_step["predicted"]["ttft_s"]["mean"] > staggered["predicted"]["ttft_s"]["mean"]
    out, _ = sweep("replay", aiperf, *SETUP, "--clients", "in-step")
    assert "c=8 in step" in out


def test_repeated_prompts_are_cached_as_the_file_or_the_option_says():
    """AIPerf's synthetic dataset (100 prompts by default) repeats prompts; a pool of one
    makes every later request a hit, 0 none."""
    aiperf = FIXTURES / "profile_export_aiperf.json"
    default, one, none = (sweep_json("replay", aiperf, *SETUP, *more)["runs"][0] for more in (
        (), ("--prompt-pool", "1"), ("--prompt-pool", "0")))
    assert default["prompt_pool"] == 100 and none["predicted"]["prefix_hit_rate"] is None
    assert one["predicted"]["prefix_hit_rate"] > default["predicted"]["prefix_hit_rate"] > 0
    assert one["predicted"]["ttft_s"]["mean"] < none["predicted"]["ttft_s"]["mean"]
    out, _ = sweep("replay", aiperf, *SETUP, "--prompt-pool", "1")
    assert "of prompt tokens cached" in out
    vllm = sweep_json("replay", FIXTURES / "vllm-bench-serve.json", *SETUP)["runs"][0]
    assert vllm["predicted"]["prefix_hit_rate"] is None


def test_a_fit_with_clients_in_step_keeps_them_and_its_profile_says_so(tmp_path):
    out = tmp_path / "mine.toml"
    report = sweep_json("replay", FIXTURES / "profile_export_aiperf.json", *SETUP,
                        "--clients", "in-step", "--fit", "--out", out)
    assert report["fit"]["runs_after"][0]["clients"] == "in-step"
    calibration = tomllib.loads(out.read_text())["calibration"]
    assert calibration["clients"] == "in-step"


def test_fit_writes_an_engine_profile_that_loads(tmp_path):
    out = tmp_path / "mine.toml"
    report = sweep_json("replay", FIXTURES / "vllm-bench-serve.json",
                        FIXTURES / "profile_export_aiperf.json", *SETUP, "--fit",
                        "--out", out)
    # two runs, one model: a step overhead and the client's front end
    assert report["fit"]["fitted"] == ["step_overhead_s", "request_overhead_s"]
    profile = load_profile(str(out))
    for name in report["fit"]["fitted"]:
        assert getattr(profile.efficiency, name) == pytest.approx(
            report["fit"]["overheads_s"][name], rel=1e-3, abs=1e-9)
    assert out.read_text().startswith("# Fitted by: sweep replay ")
    assert "engine profile" in profile.provenance


@pytest.mark.parametrize("args, message", [
    ((FIXTURES / "damaged.json", *SETUP), "not JSON"),
    ((FIXTURES / "absent.json", *SETUP), "not found"),
    ((FIXTURES / "vllm-bench-serve.json",), "--model and --gpu"),
    ((), "at least one RESULT_FILE"),
    ((FIXTURES / "vllm-bench-serve.json", *SETUP, "--out", "x.toml"), "add --fit"),
    ((FIXTURES / "vllm-bench-serve.json", *SETUP, "--format", "guidellm"), "benchmarks"),
    (("--measured-dir", "anywhere", "--clients", "in-step", "--fit", "--out", "x"),
     "drop --out"),
    (("--measured-dir", "anywhere", "--out", "x"), "add --fit"),
    (("--measured-dir", "anywhere", "--prompt-pool", "100", "--fit", "--out", "x"),
     "drop --out"),
    ((FIXTURES / "vllm-bench-serve.json", *SETUP, "--prompt-pool", "-1"), "--prompt-pool"),
    ((FIXTURES / "vllm-bench-serve.json", *SETUP, "--prompt-pool", "1.5"), "whole number"),
])
def test_bad_input_is_one_line_and_status_2(args, message):
    out, err = sweep("replay", *args, expect=2)
    assert out == "" and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_fit_out_must_be_a_profile_file(tmp_path):
    _, err = sweep("replay", FIXTURES / "vllm-bench-serve.json", *SETUP, "--fit", "--out",
                   tmp_path / "mine.txt", expect=2)
    assert ".toml" in err
    assert not (tmp_path / "mine.txt").exists()


def test_each_engine_replays_on_its_kernel_profile_and_a_mix_must_name_one(tmp_path):
    """TensorRT-LLM's runs are priced with its own fp8 kernels (h100-trtllm-fp8), the
    others with h100-trtllm; files of both kinds cannot share one base unasked."""
    trt = tmp_path / "trt.jsonl"
    trt.write_text((FIXTURES / "sglang-bench-serving.jsonl").read_text().replace(
        '"backend": "sglang"', '"backend": "trt"'))
    assert sweep_json("replay", trt, *SETUP)["profile"] == "h100-trtllm-fp8"
    vllm = FIXTURES / "vllm-bench-serve.json"
    assert sweep_json("replay", vllm, *SETUP)["profile"] == "h100-trtllm"
    out, err = sweep("replay", vllm, trt, *SETUP, expect=2)
    assert out == "" and err.count("\n") == 1 and "give --profile or --engine" in err
    named = sweep_json("replay", vllm, trt, *SETUP, "--profile", "h100-trtllm-fp8")
    assert named["profile"] == "h100-trtllm-fp8" and len(named["runs"]) == 3


# --- the published end-to-end runs ---------------------------------------------------

@pytest.fixture
def measured(shared_dir: Path) -> Path:
    folder = shared_dir / "reference" / "measured"
    if not (folder / "aiconfigurator-silicon-e2e-dense-h100-h200.csv").is_file():
        pytest.skip(f"no silicon end-to-end runs in {folder}")
    return folder


HELD_OUT_HEADER = "| engine | GPU | model | runs | TPOT held out |"
BY_THE_OTHERS = "in the other groups' interval: TPOT / TTFT"


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def documented_held_out(engine: str) -> dict[tuple[str, str], tuple[float, list[float]]]:
    """(GPU, model) -> held-out TPOT MAPE (%) of `engine` in docs/end-to-end.md's held-out
    table, and its coverage by the other groups' interval ([TPOT %, TTFT %])."""
    lines = (REPO / "docs" / "end-to-end.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(HELD_OUT_HEADER))
    header = cells(lines[start])
    mape, others = header.index("TPOT held out"), header.index(BY_THE_OTHERS)
    table = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        row = cells(line)
        if row[0] == engine:
            shares = [float(part.strip().rstrip(" %")) for part in row[others].split("/")]
            table[(row[1], row[2])] = float(row[mape].rstrip(" %")), shares
    return table


def assert_documented_held_out(report: dict, engine: str, groups: int) -> None:
    """The report's held-out TPOT MAPE per group is docs/end-to-end.md's, to 0.1 %, and
    so is its coverage by the other groups' interval, to the whole per cent."""
    documented = documented_held_out(engine)
    held = {(g["gpu"], g["model"]): g for g in report["held_out"]}
    assert set(held) == set(documented) and len(held) == groups
    for key, group in held.items():
        mape, by_the_others = documented[key]
        assert round(100 * group["mape_tpot"], 1) == pytest.approx(mape, abs=0.05), key
        shares = group["interval_coverage_by_the_others"]
        assert None not in shares.values(), key
        assert [100 * shares["tpot"], 100 * shares["ttft"]] == pytest.approx(
            by_the_others, abs=0.5), key


def test_silicon_replay_held_out_tpot_is_what_the_docs_say(measured, tmp_path):
    report = sweep_json("replay", "--measured-dir", measured, "--engine", "vllm", "--fit",
                        "--out", tmp_path)
    assert report["runs"] == 219  # every vLLM run of the 778 (no row dropped)
    assert_documented_held_out(report, "vllm", groups=4)
    (profile,) = report["profiles"]
    low, high = profile["interval"]["tpot"]
    assert low <= 1 <= high
    # one engine profile per GPU with data, loading with the interval it was given
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h100-sxm-vllm.toml", "h200-vllm.toml"]
    written = load_profile(str(tmp_path / "h200-vllm.toml"))
    assert written.interval.bounds("tpot") == (low, high)
    assert "leave-one-group-out over 4" in written.interval.held_out
    assert written.efficiency.allreduce_overhead_s == pytest.approx(
        profile["overheads_s"][2], rel=1e-3)


def test_sglang_replay_runs_prefill_first_and_its_held_out_tpot_is_what_the_docs_say(
        measured):
    """SGLang's runs are replayed with its scheduler (prefill batches without decodes);
    the held-out figures and the fitted overheads are the ones documented and shipped."""
    report = sweep_json("replay", "--measured-dir", measured, "--engine", "sglang", "--fit")
    assert report["runs"] == 130
    assert_documented_held_out(report, "sglang", groups=2)
    (profile,) = report["profiles"]
    shipped = load_profile("h200-sglang")
    assert shipped.efficiency.step_overhead_s == pytest.approx(profile["overheads_s"][0],
                                                               rel=1e-3)
    assert shipped.interval.bounds("tpot") == tuple(profile["interval"]["tpot"])


def test_splitwise_replay_held_out_tpot_is_what_the_docs_say(shared_dir):
    folder = shared_dir / "reference" / "measured"
    if not (folder / "splitwise-perf-model-a100-h100.csv").is_file():
        pytest.skip(f"no Splitwise runs in {folder}")
    report = sweep_json("replay", "--measured-dir", folder, "--engine", "splitwise", "--fit")
    assert_documented_held_out(report, "splitwise", groups=2)
