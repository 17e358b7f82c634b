"""Every `sweep` subcommand and every spec kind, driven with generated bad values (NaN,
±inf, 1e308, negative, zero, huge integers, wrong types, empty, unicode, missing keys):
the exit status is 0 or 2, stderr never holds a traceback (a failure is one line), and a
success's `--json` is strict JSON whose every number is finite.

The CLI runs in-process through its real entry point; examples are few per property so
the module stays well under a minute on a loaded 2-core machine.
"""

from __future__ import annotations

import io
import json
import math
import tomllib
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rooftui.core.spec_files import shipped_dir
from rooftui.sweeps.cli import main

HF_CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf-configs"
FUZZ = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

# --- what the CLI is given -----------------------------------------------------------

SPECIAL_TEXT = ["nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e308", "1e309", "-1e308",
                "-1", "-0", "0", "0.0", "1", "1.5", "99999999999999999999", "1" * 400,
                "5e-324", "", " ", "abc", "½", "١٢", "0x10", "1_0", "1e3", "٣.٥", "∞", "1,5"]
NUMBER_TEXT = st.one_of(
    st.sampled_from(SPECIAL_TEXT),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
    st.text(max_size=6),
)
# options whose valid values cost time in proportion (simulated requests, slots): the
# fuzz keeps their valid values small, the bad ones are as wild as elsewhere
COSTLY = {"--requests", "-n", "--max-batch", "--batches", "--budgets", "--workers",
          "--token-budget", "--rows", "--batch"}
CHEAP_LIMIT = 64

POINT_OPTIONS = ["--batch", "--context", "--prefill", "--prefill-context", "--tpot-budget",
                 "--kv-heads", "--tp", "--spec-tokens", "--acceptance",
                 "--price-per-gpu-hour", "--mfu", "--mbu", "--memory-reserve-gb",
                 "--peak-tflops", "--bandwidth-tbs", "--memory-gb"]
SIMULATE_OPTIONS = ["--max-batch", "--token-budget", "--requests", "--seed", "--block-size",
                    "--slo-ttft", "--slo-tpot", "--mfu", "--bandwidth-tbs", "--peak-tflops"]
LAWS = ["fixed:{}", "exp:mean={}", "exp:mean=50,cap={}", "lognormal:median={},sigma=1",
        "lognormal:median=50,sigma={}", "bimodal:p={},a=10,b=100", "bimodal:p=0.5,a={},b=9",
        "bimodal:p=0.5,a=(fixed:{}),b=(exp:mean=20)"]
ARRIVALS = ["poisson:rate={}", "gamma:rate={},cv=2", "gamma:rate=5,cv={}", "closed"]


def refuse_constant(name: str):
    raise AssertionError(f"--json printed {name}, which is not JSON")


def finite_numbers(value, path: str = "") -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            finite_numbers(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            finite_numbers(item, f"{path}[{i}]")
    elif isinstance(value, float):
        assert math.isfinite(value), f"{path} = {value}"


def run(*args) -> tuple[int, str, str]:
    """`sweep ARGS` in-process; asserts the robustness contract, returns (status, out, err).
    numpy's RuntimeWarnings (overflow, 0/0) are errors here: nothing may compute them."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        try:
            main([str(a) for a in args])
            status = 0
        except SystemExit as done:
            status = done.code
    text = err.getvalue()
    assert status in (0, 2), (args, status, text)
    assert "Traceback" not in text, (args, text)
    if status == 2:
        assert text.count("\n") == 1 and text.startswith("sweep"), (args, text)
    if status == 0 and "--json" in args:
        finite_numbers(json.loads(out.getvalue(), parse_constant=refuse_constant))
    return status, out.getvalue(), text


def cheap(option: str, text: str) -> bool:
    """False for a valid-looking large value of a costly option (kept out of the fuzz)."""
    try:
        value = float(text)
    except ValueError:
        return True
    return option not in COSTLY or not (CHEAP_LIMIT < value <= 1e12)


options_with_values = st.lists(st.tuples(st.sampled_from(POINT_OPTIONS), NUMBER_TEXT),
                               min_size=1, max_size=3)


# --- the commands ------------------------------------------------------------------------

@FUZZ
@given(options_with_values)
def test_point(options):
    assume(all(cheap(option, text) for option, text in options))
    run("point", *[word for pair in options for word in pair], "--json")


@FUZZ
@given(st.sampled_from(["--rows", "--k", "--n", "--ridge"]), NUMBER_TEXT)
def test_gemm(option, text):
    assume(cheap(option, text))
    run("gemm", option, text, "--json")


@FUZZ
@given(st.sampled_from(SIMULATE_OPTIONS), NUMBER_TEXT, st.sampled_from(LAWS),
       st.sampled_from(ARRIVALS), NUMBER_TEXT)
def test_simulate(option, text, law, arrival, law_text):
    assume(cheap(option, text))
    count = [] if option == "--requests" else ["--requests", "8"]
    run("simulate", option, text, *count, "--max-batch", "8", "--token-budget", "64",
        "--policy", "chunked", "--json")
    run("simulate", "--requests", "6", "--input-tokens", "fixed:32",
        "--output-tokens", law.format(law_text), "--arrival", arrival.format(law_text),
        "--json")


@FUZZ
@given(st.sampled_from(LAWS), NUMBER_TEXT, NUMBER_TEXT)
def test_occupancy(law, law_text, batch):
    assume(cheap("--batch", batch))
    run("occupancy", "--output-tokens", law.format(law_text), "--batch", batch, "--json")


OPTIMIZE_OPTIONS = ["--slo-ttft", "--slo-tpot", "--attainment", "--rate-tolerance", "--seed",
                    "--requests", "--gpus-per-replica", "--block-size", "--batches",
                    "--budgets"]


@settings(FUZZ, max_examples=12)
@given(st.sampled_from(OPTIMIZE_OPTIONS), NUMBER_TEXT)
def test_optimize(option, text):
    assume(cheap(option, text))
    given_options = {"--slo-ttft": "2", "--slo-tpot": "0.2", "--batches": "8",
                     "--budgets": "512", "--requests": "12", option: text}
    run("optimize", *[word for pair in given_options.items() for word in pair],
        "--output-tokens", "fixed:8", "--input-tokens", "fixed:64", "--json")


MEASURED_HEADER = "kind,gpu,model,m,n,k,batch,context,time_s"
MEASURED_ROWS = ["gemm,h100-sxm,,{v},4096,4096,,,1e-4", "gemm,h100-sxm,,64,4096,4096,,,{v}",
                 "attention_decode,h100-sxm,llama-3-8b,,,,{v},1024,1e-4",
                 "attention_decode,h100-sxm,llama-3-8b,,,,8,{v},1e-4"]
GOOD_ROWS = ["gemm,h100-sxm,,1,4096,4096,,,2.6e-5", "gemm,h100-sxm,,256,4096,4096,,,4.1e-5",
             "gemm,h100-sxm,,1024,4096,14336,,,1.6e-4",
             "attention_decode,h100-sxm,llama-3-8b,,,,8,1024,2.1e-5",
             "attention_decode,h100-sxm,llama-3-8b,,,,64,4096,2.9e-4"]


@settings(FUZZ, max_examples=15)
@given(st.sampled_from(MEASURED_ROWS), NUMBER_TEXT.filter(lambda t: "," not in t
                                                          and "\n" not in t and "\r" not in t
                                                          and '"' not in t))
def test_calibrate_and_validate(tmp_path_factory, row, text):
    path = tmp_path_factory.mktemp("measured") / "mine.csv"
    path.write_text("\n".join([MEASURED_HEADER, *GOOD_ROWS, row.format(v=text)]) + "\n",
                    encoding="utf-8")
    run("calibrate", "--measured", path, "--gpu", "h100-sxm", "--json")
    run("validate", "--measured", path, "--json")


# --- spec files --------------------------------------------------------------------------

BAD_VALUES = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 1e300, -1, 0, -0.0, 0.5,
                     2**63, 2**64, 10**30, -(2**63), "", "nan", "ünïcødé", "1e3", True,
                     False, [], [1, 2], {}, {"a": 1}]),
    st.floats(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.text(max_size=5),
)
DELETE = object()  # a missing key


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else "inf" if value == math.inf \
            else "-inf" if value == -math.inf else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_text(data: dict) -> str:
    """A spec dict as TOML: plain keys first, then each table."""
    lines = [f"{key} = {toml_value(value)}" for key, value in data.items()
             if not isinstance(value, dict)]
    for key, value in data.items():
        if isinstance(value, dict):
            lines += ["", f"[{key}]"] + [f"{k} = {toml_value(v)}" for k, v in value.items()]
    return "\n".join(lines) + "\n"


def damaged(data: dict, table: str | None, key: str, value) -> dict:
    copy = json.loads(json.dumps(data))
    target = copy if table is None else copy.setdefault(table, {})
    if value is DELETE:
        target.pop(key, None)
    else:
        target[key] = value
    return copy


def shipped(kind: str, name: str) -> dict:
    return tomllib.loads((shipped_dir(kind) / f"{name}.toml").read_text(encoding="utf-8"))


GPU = shipped("gpus", "h100-sxm")
MODEL = shipped("models", "llama-3-8b")
PROFILE = shipped("profiles", "derated")
WORKLOAD = shipped("workloads", "sharegpt-8k")
MIXTRAL = json.loads((HF_CONFIGS / "mixtral-8x7b.json").read_text())
GPU_KEYS = [(None, k) for k in ("memory_gb", "bandwidth_tbs", "l2_mb", "interconnect_gbs",
                                "tdp_w", "name", "tflops")] + [("tflops", "bf16"),
                                                               ("tflops", "fp8")]
MODEL_KEYS = [(None, k) for k in (
    "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "head_dim", "intermediate_size", "vocab_size", "max_position_embeddings",
    "tie_word_embeddings", "sliding_window", "sliding_window_layers", "norms_per_layer",
    "weight_dtype", "torch_dtype", "layer_types", "num_local_experts", "kv_lora_rank")]
CONFIG_KEYS = MODEL_KEYS + [(None, k) for k in (
    "num_experts_per_tok", "moe_intermediate_size", "first_k_dense_replace",
    "quantization_config", "text_config", "mlp_only_layers")]
PROFILE_KEYS = [(None, k) for k in ("mfu", "mbu", "memory_reserve_gb", "overlap",
                                    "attention_flops", "kv_write", "efficiency")] + [
    ("efficiency", k) for k in ("gemm_mfu", "step_overhead_s", "gemm_m_half",
                                "attention_mbu_half")]
WORKLOAD_KEYS = [(None, "arrivals"), ("arrivals", "rate_per_s"),
                 ("arrivals", "interarrival_cv"), ("input_tokens", "cap"),
                 ("output_tokens", "cap"), ("output_tokens", "quantiles"),
                 ("output_tokens", "values"), (None, "output_tokens")]


def spec_case(keys):
    return st.tuples(st.sampled_from(keys), st.one_of(BAD_VALUES, st.just(DELETE)))


def check_spec(path: Path, *uses: str) -> None:
    run("specs", "validate", path)
    for use in uses:
        run(*use.split(), path, "--json")


TOML_SPECS = {"gpus": (GPU, GPU_KEYS, "point --gpu"),
              "models": (MODEL, MODEL_KEYS, "point --model"),
              "profiles": (PROFILE, PROFILE_KEYS, "point --profile")}


@pytest.mark.parametrize("kind", sorted(TOML_SPECS))
@FUZZ
@given(data=st.data())
def test_toml_spec(tmp_path_factory, kind, data):
    base, keys, use = TOML_SPECS[kind]
    (table, key), value = data.draw(spec_case(keys))
    path = tmp_path_factory.mktemp(kind) / "spec.toml"
    path.write_text(toml_text(damaged(base, table, key, value)), encoding="utf-8")
    check_spec(path, use)


@FUZZ
@given(spec_case(CONFIG_KEYS), st.booleans())
def test_hf_config(tmp_path_factory, case, as_folder):
    (table, key), value = case
    folder = tmp_path_factory.mktemp("hf")
    (folder / "config.json").write_text(json.dumps(damaged(MIXTRAL, table, key, value)),
                                        encoding="utf-8")
    run("point", "--model", folder if as_folder else folder / "config.json", "--json")


@FUZZ
@given(spec_case(WORKLOAD_KEYS), st.integers(min_value=0, max_value=150))
def test_workload_spec(tmp_path_factory, case, index):
    (table, key), value = case
    data = damaged(WORKLOAD, table, key, value)
    if isinstance(value, float | int) and (table, key) == ("output_tokens", "quantiles"):
        data = json.loads(json.dumps(WORKLOAD))  # one bad entry inside the list
        entries = data["output_tokens"]["values"]
        entries[index % len(entries)] = value
    path = tmp_path_factory.mktemp("workloads") / "workload.toml"
    path.write_text(toml_text(data), encoding="utf-8")
    check_spec(path, "simulate --requests 4 --workload", "occupancy --batch 4 --workload")


# --- the issue's own examples ------------------------------------------------------------

def one_line_error(*args) -> str:
    status, _, err = run(*args)
    assert status == 2, err
    return err


def test_nan_peak_is_refused():
    assert "'--peak-tflops'" in one_line_error("point", "--peak-tflops", "nan", "--json")


def test_nan_bandwidth_fails_specs_validate(tmp_path):
    path = tmp_path / "gpus" / "nan.toml"
    path.parent.mkdir()
    path.write_text(toml_text({**GPU, "bandwidth_tbs": math.nan}), encoding="utf-8")
    assert "key 'bandwidth_tbs' must be a number in" in one_line_error("specs", "validate",
                                                                       path)


@pytest.mark.parametrize("value", [1e308, math.nan])
def test_absurd_hidden_size_in_a_model_file_and_a_config(tmp_path, value):
    model = tmp_path / "model.toml"
    model.write_text(toml_text({**MODEL, "hidden_size": value}), encoding="utf-8")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**MIXTRAL, "hidden_size": value}), encoding="utf-8")
    for path in (model, config, tmp_path):  # the folder holds config.json
        assert "key 'hidden_size' must be a whole number from 1 to 10,000,000" in \
            one_line_error("point", "--model", path)


def test_optimize_takes_a_max_batch_of_one():
    # its analytic pass once indexed a negative decode count (found by the fuzz)
    status, out, _ = run("optimize", "--slo-ttft", "2", "--slo-tpot", "0.2", "--batches", "1",
                         "--budgets", "512", "--requests", "12", "--output-tokens", "fixed:8",
                         "--input-tokens", "fixed:64", "--json")
    assert status == 0 and json.loads(out)["best"]["max_batch"] == 1


def test_negative_seed_is_refused():
    assert "'--seed'" in one_line_error("simulate", "--seed", "-1")


def test_empty_step_has_null_ratios_with_reasons():
    _, out, _ = run("point", "--batch", "0", "--json")
    report = json.loads(out)
    assert report["tokens_per_s"] is None
    assert report["null_reasons"]["tokens_per_s"] == "no tokens in the step"
