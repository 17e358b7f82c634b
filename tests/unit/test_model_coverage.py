"""Every shipped model: parameter counts equal the reference table, its raw Hugging Face
config.json gives the same numbers as its TOML, and the KV-cache figures of the issue.

The expected counts are a snapshot of ../shared/reference/hardware-and-models.md (Part B,
recomputed there from each config by param_count.py); a cross-check parses the table at
test time when the shared folder is beside the repository.
"""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from rooftui.core import spec_files
from rooftui.core.assumptions import Assumptions
from rooftui.core.dtypes import bytes_per_element
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.model import Model, load_model, model_from_config
from rooftui.core.point import PointConfig, evaluate_point
from tests.conftest import SHARED

HF_CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf-configs"
REFERENCE = SHARED / "reference" / "hardware-and-models.md"

# stem -> (reference row label, total params, active params or None for dense, whether
# the table's active count leaves the input embedding out, as OpenAI counts gpt-oss)
EXPECTED = {
    "llama-2-7b": ("Llama-2-7B", 6_738_415_616, None, False),
    "llama-2-70b": ("Llama-2-70B", 68_976_648_192, None, False),
    "llama-3-8b": ("Llama-3-8B", 8_030_261_248, None, False),
    "llama-3.1-8b": ("Llama-3.1-8B", 8_030_261_248, None, False),
    "llama-3-70b": ("Llama-3-70B / 3.1-70B", 70_553_706_496, None, False),
    "llama-3.1-405b": ("Llama-3.1-405B", 405_853_388_800, None, False),
    "mistral-7b": ("Mistral-7B-v0.1", 7_241_732_096, None, False),
    "qwen2.5-7b": ("Qwen2.5-7B (base)", 7_615_616_512, None, False),
    "qwen2.5-72b": ("Qwen2.5-72B (base)", 72_706_203_648, None, False),
    "phi-3-mini": ("Phi-3-mini-4k-instruct", 3_821_079_552, None, False),
    "gemma-2-9b": ("Gemma-2-9B", 9_241_705_984, None, False),
    "gemma-2-27b": ("Gemma-2-27B", 27_227_128_320, None, False),
    "mixtral-8x7b": ("Mixtral-8x7B-v0.1", 46_702_792_704, 12_879_925_248, False),
    "mixtral-8x22b": ("Mixtral-8x22B-v0.1", 140_620_634_112, 39_152_031_744, False),
    "qwen3-30b-a3b": ("Qwen3-30B-A3B", 30_532_122_624, 3_353_032_704, False),
    "qwen3-235b-a22b": ("Qwen3-235B-A22B", 235_093_634_560, 22_190_763_520, False),
    "deepseek-v3": ("DeepSeek-V3", 671_026_419_200, 37_552_297_472, False),
    "gpt-oss-20b": ("gpt-oss-20b", 20_914_757_184, 3_608_307_264, True),
    "gpt-oss-120b": ("gpt-oss-120b", 116_829_156_672, 5_132_849_472, True),
}
NO_HF_CONFIG = {"reference-mha-6.4b"}  # the seed's bare stack of layers


def shipped_models() -> list[str]:
    return [name for name in spec_files.shipped_names("models") if name not in NO_HF_CONFIG]


def test_every_shipped_model_has_its_config_json_and_the_table_models_are_shipped():
    assert {path.stem for path in HF_CONFIGS.glob("*.json")} == set(shipped_models())
    assert set(EXPECTED) <= set(shipped_models())


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_parameter_counts_equal_the_reference(stem):
    _, total, active, without_embedding = EXPECTED[stem]
    model = load_model(stem)
    assert model.total_params() == total
    if active is None:
        assert not model.is_moe
        assert model.active_params() == total
    else:
        assert model.active_params(include_embedding=not without_embedding) == active


def test_gpt_oss_active_count_with_the_embedding():
    """param_count.py's `active` (embedding included) beside OpenAI's count."""
    assert load_model("gpt-oss-20b").active_params() == 4_187_440_704
    assert load_model("gpt-oss-120b").active_params() == 5_711_982_912


def reference_counts(text: str) -> dict[str, list[int]]:
    """Row label -> the exact (comma-grouped) counts in its Params column, tables B1, B2."""
    counts = {}
    for section in ("### B1.", "### B2."):
        body = text[text.index(section):].split("\n### ", 1)[0]
        rows = [line for line in body.splitlines() if line.startswith("|")]
        header = [cell.strip() for cell in rows[0].strip("|").split("|")]
        column = next(i for i, name in enumerate(header) if name.startswith("Params"))
        for row in rows[2:]:
            cells = [cell.strip() for cell in row.strip("|").split("|")]
            counts[cells[0]] = [int(n.replace(",", "")) for n in
                                re.findall(r"\d{1,3}(?:,\d{3}){2,}", cells[column])]
    return counts


def test_expected_counts_equal_the_reference_table():
    if not REFERENCE.is_file():
        pytest.skip(f"the reference table is not at {REFERENCE}")
    counts = reference_counts(REFERENCE.read_text(encoding="utf-8"))
    for stem, (label, total, active, _) in EXPECTED.items():
        assert counts[label][:2] == ([total] if active is None else [total, active]), stem


# --- config.json and TOML agree --------------------------------------------------------

def structure(model: Model) -> dict:
    """Every field that shapes the numbers (the weight format by its size)."""
    values = {f.name: getattr(model, f.name) for f in fields(model)
              if f.name not in ("name", "key", "sources", "weight_dtype")}
    values["weight_bytes"] = bytes_per_element(model.weight_dtype)
    return values


@pytest.mark.parametrize("stem", shipped_models())
def test_hf_config_gives_the_toml_numbers(stem):
    from_toml = load_model(stem)
    from_json = load_model(str(HF_CONFIGS / f"{stem}.json"))
    assert structure(from_json) == structure(from_toml)
    h100 = load_gpu("h100-sxm")
    for config in (dict(batch=8, context=3000), dict(batch=2, context=70_000, prefill=512,
                                                     prefill_context=1000)):
        toml_point = evaluate_point(PointConfig(gpu=h100, model=from_toml, **config))
        json_point = evaluate_point(PointConfig(gpu=h100, model=from_json, **config))
        assert json_point == toml_point


# --- KV cache ------------------------------------------------------------------------

def test_deepseek_v3_caches_its_latent():
    model = load_model("deepseek-v3")
    assert model.kv_bytes_per_token("bf16") == 70_272  # (512 + 64) x 61 layers x 2 B
    point = evaluate_point(PointConfig(gpu=load_gpu("h200"), model=model, kv_dtype="bf16"))
    assert point["kv_bytes_per_token"] == 70_272


@pytest.mark.parametrize(("stem", "bytes_per_token"), [
    ("llama-3-8b", 131_072), ("mixtral-8x22b", 229_376), ("qwen3-30b-a3b", 98_304),
    ("qwen3-235b-a22b", 192_512), ("gemma-2-9b", 344_064), ("gemma-2-27b", 376_832),
    ("gpt-oss-20b", 49_152), ("gpt-oss-120b", 73_728)])
def test_kv_bytes_per_token_equal_table_b4(stem, bytes_per_token):
    assert load_model(stem).kv_bytes_per_token("bf16") == bytes_per_token


def kv_read(stem: str, context: int) -> float:
    """Bytes of KV one decode step of one sequence reads (no KV write)."""
    return evaluate_point(PointConfig(gpu=load_gpu("h100-sxm"), model=load_model(stem),
                                      context=context, assumptions=Assumptions(kv_write=False))
                          )["attention_bytes"]


def test_mistral_kv_read_stops_growing_past_its_window():
    per_token = 131_072
    assert kv_read("mistral-7b", 2048) == 2048 * per_token
    assert kv_read("mistral-7b", 4096) == 4096 * per_token
    assert kv_read("mistral-7b", 8192) == kv_read("mistral-7b", 32_768) == 4096 * per_token


def test_gpt_oss_alternates_128_token_windows_with_full_layers():
    per_layer = 2 * 8 * 64 * 2  # K and V of 8 heads of 64, bf16
    for context in (100, 128, 5000):
        full, windowed = 12 * context, 12 * min(context, 128)
        assert kv_read("gpt-oss-20b", context) == per_layer * (full + windowed)


def test_gemma_2_windows_half_its_layers():
    per_layer = 2 * 8 * 256 * 2
    assert kv_read("gemma-2-9b", 8192) == per_layer * (21 * 8192 + 21 * 4096)


# --- what is refused -------------------------------------------------------------------

BASE = {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
        "intermediate_size": 4096, "vocab_size": 1000}


@pytest.mark.parametrize(("extra", "message"), [
    ({"num_experts": 8, "num_experts_per_tok": 2, "shared_expert_intermediate_size": 512},
     "shared experts"),
    ({"layer_types": ["linear_attention", "full_attention"] * 2}, "not modelled"),
    ({"quantization_config": {"quant_method": "bitsandbytes"}}, "not modelled"),
    ({"num_experts": 4, "num_experts_per_tok": 8}, "experts per token"),
])
def test_unmodelled_architectures_are_refused(extra, message):
    with pytest.raises(SpecError, match=message):
        model_from_config({**BASE, **extra}, "config.json")


def test_gqa_what_if_is_refused_for_mla():
    with pytest.raises(SpecError, match="latent"):
        load_model("deepseek-v3").with_kv_heads(8)


def test_quantization_configs_set_the_weight_formats():
    gptq = model_from_config({**BASE, "quantization_config": {
        "quant_method": "gptq", "bits": 4, "group_size": 128}}, "config.json")
    assert gptq.weight_dtype == "int4-g128"
    assert load_model(str(HF_CONFIGS / "deepseek-v3.json")).weight_dtype == "fp8"
    oss = load_model(str(HF_CONFIGS / "gpt-oss-20b.json"))
    assert (oss.weight_dtype, oss.expert_weight_dtype) == ("bf16", "mxfp4")
