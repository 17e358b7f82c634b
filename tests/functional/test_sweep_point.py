"""`sweep point` through the real console script: output, JSON contract, bad input."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, sweep, sweep_json, sweep_process

REQUIRED_KEYS = {
    "step_time_s", "tokens_per_s", "prefill_tokens_per_s", "per_user_tokens_per_s", "flops",
    "bytes", "intensity", "ridge", "bound", "parts", "attention_share", "mfu", "mbu",
    "weight_bytes", "kv_bytes", "kv_bytes_per_token", "intensity_ceiling",
    "throughput_ceiling_tokens_per_s", "max_batch", "fits",
}


def test_json_contract():
    done = sweep_process("point", "--batch", 32, "--context", 4096, "--tpot-budget", 0.02, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report.keys() >= REQUIRED_KEYS
    for part in ("gemm", "attention"):
        assert {"flops", "bytes", "time_s", "intensity", "bound"} <= report["parts"][part].keys()
    assert report["bound"] in {"memory", "compute"}
    assert isinstance(report["max_batch_for_tpot"], int)


def test_table_has_units():
    done = sweep_process("point", "--batch", 8)
    assert done.returncode == 0
    for unit in ("ms", "tok/s", "FLOP/B", "GB", "%"):
        assert unit in done.stdout


def test_overrides_beat_the_profile():
    report = json.loads(sweep_process("point", "--profile", "derated", "--mfu", "0.7", "--json").stdout)
    assert report["assumptions"]["mfu"] == 0.7 and report["assumptions"]["mbu"] == 0.8


def test_calibrated_resolves_for_the_systems_gpu():
    """A system brings its GPU: `calibrated` is that GPU's profile (the GB200 has no kernel
    data, so a transferred one), not the default --gpu's."""
    report = json.loads(sweep_process("point", "--system", "gb200-nvl72", "--profile",
                                      "calibrated", "--json").stdout)
    assert report["assumptions"]["profile"].startswith("calibrated (transferred from ")
    plain = json.loads(sweep_process("point", "--gpu", "gb200", "--profile", "calibrated",
                                     "--json").stdout)
    assert report["assumptions"]["profile"] == plain["assumptions"]["profile"]


def test_hf_config_json_is_accepted(tmp_path):
    config = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
              "vocab_size": 128256, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
              "max_position_embeddings": 8192, "rope_theta": 500000.0}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    mine = json.loads(sweep_process("point", "--model", path, "--json").stdout)
    shipped = json.loads(sweep_process("point", "--model", "llama-3-8b", "--json").stdout)
    assert mine["step_time_s"] == shipped["step_time_s"]


def test_a_hugging_face_model_folder_is_its_config(tmp_path):
    folder = tmp_path / "Llama-3-8B"  # as `huggingface-cli download` leaves it
    folder.mkdir()
    (folder / "config.json").write_text(
        (REPO / "tests" / "data" / "hf-configs" / "llama-3-8b.json").read_text())
    by_folder = sweep_json("point", "--model", folder, "--draft-model", folder,
                           "--spec-tokens", 2, "--acceptance", 0.5)
    by_file = sweep_json("point", "--model", folder / "config.json", "--draft-model",
                         folder / "config.json", "--spec-tokens", 2, "--acceptance", 0.5)
    assert by_folder["step_time_s"] == by_file["step_time_s"]
    assert by_folder["model"] == str(folder)  # named as given
    empty = tmp_path / "empty"
    empty.mkdir()
    _, err = sweep("point", "--model", empty, expect=2)
    assert "without a config.json" in err
    _, err = sweep("point", "--gpu", folder, expect=2)
    assert "is a folder, not a gpu spec file" in err


def test_context_past_the_model_limit_is_a_warning():
    done = sweep_process("point", "--context", 100_000, "--json")
    assert done.returncode == 0
    assert "max_position_embeddings" in done.stderr


@pytest.mark.parametrize("args, message", [
    (("--gpu", "h100"), "did you mean"),
    (("--model", "llama-3-8"), "did you mean"),
    (("--weight-dtype", "bf15"), "bf15"),
    (("--batch", "-1"), "--batch"),
    (("--context", "-5"), "--context"),
    (("--kv-heads", "5"), "not divisible"),
    (("--mfu", "0"), "--mfu"),
    (("--mbu", "1.2"), "--mbu"),
    (("--model", "no/such/config.json"), "not found"),
    (("--compute-dtype", "fp8", "--gpu", "a100-80gb"), "no fp8 peak"),
    (("--peak-tflops", "nan", "--json"), "'--peak-tflops': expected a number in"),
    (("--batch", "99999999999999999999"), "'--batch' / '-b': expected a whole number"),
])
def test_bad_input_is_one_line_and_exit_2(args, message):
    done = sweep_process("point", *args)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert message in done.stderr


@pytest.mark.parametrize("content, where", [
    ("hidden_size = 4096\nnum_hidden_layers = = 3\n", "line 2"),
    ("hidden_size = 4096\nnum_hidden_layers = -2\n", "num_hidden_layers"),
    ("num_hidden_layers = 2\n", "hidden_size"),
    ("hidden_size = 64\nnum_hidden_layers = 2\nnum_attention_heads = 4\n"
     "intermediate_size = 128\nhidden_sise = 3\n", "hidden_sise"),
])
def test_bad_model_files_name_file_and_key(tmp_path, content, where):
    path = tmp_path / "model.toml"
    path.write_text(content)
    done = sweep_process("point", "--model", path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert where in done.stderr and "model.toml" in done.stderr


def test_bad_json_names_the_line(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{\n  "hidden_size": 4096,\n  oops\n}')
    done = sweep_process("point", "--model", path)
    assert done.returncode == 2 and "line 3" in done.stderr


def test_moe_is_not_computed_as_dense(tmp_path):
    dense = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 128, "vocab_size": 100}
    moe = {**dense, "num_local_experts": 8, "num_experts_per_tok": 2}
    reports = []
    for name, config in (("dense", dense), ("moe", moe)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(config))
        done = sweep_process("point", "--model", path, "--batch", 64, "--json")
        assert done.returncode == 0, done.stderr
        reports.append(json.loads(done.stdout))
    # 64 tokens routed to 2 of 8 experts touch nearly all of them: more weight bytes read
    # than the dense model's single FFN, for the FLOPs of two experts per token
    dense_report, moe_report = reports
    assert moe_report["parts"]["gemm"]["bytes"] > 4 * dense_report["parts"]["gemm"]["bytes"]
    assert moe_report["parts"]["gemm"]["flops"] < 2.5 * dense_report["parts"]["gemm"]["flops"]


def test_unmodelled_architecture_is_refused(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"hidden_size": 64, "num_hidden_layers": 2,
                                "num_attention_heads": 4, "intermediate_size": 128,
                                "quantization_config": {"quant_method": "no-such-method"}}))
    done = sweep_process("point", "--model", path)
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_specs_commands():
    listing = json.loads(sweep_process("specs", "list", "--json").stdout)
    assert "h100-sxm" in listing["gpus"] and "llama-3-8b" in listing["models"]
    assert sweep_process("specs", "show", "llama-3-8b").returncode == 0
    bad = sweep_process("specs", "show", "nope")
    assert bad.returncode == 2


def test_an_overlapping_schedulers_host_floor_is_shown_where_it_sets_the_step():
    """SGLang's engine profile holds a host floor: a small TP8 decode of Llama-3.1-8B is
    host-bound (its `host` row sets the step), a large TP1 one of Llama-3-70B is not."""
    args = ("point", "--profile", "h200-sglang", "--gpu", "h200", "--context", 2048)
    small = json.loads(sweep_process(*args, "--model", "llama-3.1-8b", "--tp", 8,
                                     "--batch", 64, "--json").stdout)
    assert small["bound"] == "host" and small["step_time_s"] == small["host_s"]
    large = json.loads(sweep_process(*args, "--model", "llama-3-70b", "--batch", 256,
                                     "--json").stdout)
    assert large["bound"] in {"memory", "compute"} and large["host_s"] < large["step_time_s"]
    table = sweep_process(*args, "--model", "llama-3.1-8b", "--tp", 8, "--batch", 64).stdout
    assert "host-bound" in table and "sets the step" in table
    plain = json.loads(sweep_process("point", "--json").stdout)
    assert plain["host_s"] is None
