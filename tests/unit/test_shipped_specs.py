"""The shipped GPU and model specs against the checked reference table.

Two layers of checks:
- every shipped spec equals the expected table below (always runs);
- the expected table equals `../shared/reference/hardware-and-models.md`, parsed at test
  time (skipped, with the reason, when the shared folder is not beside the repository).

The expected table is a snapshot of the reference with the choices the specs make where the
reference is conflicting or gives a range; each such choice is commented here and in the
spec file, and the cross-check asserts the chosen figure appears in the reference's cell.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import NamedTuple

import pytest

from rooftui.core import spec_files
from rooftui.core.hardware import load_gpu
from rooftui.core.model import load_model

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
REFERENCE = SHARED / "reference" / "hardware-and-models.md"

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")


class GPURow(NamedTuple):
    a1: str  # the row label in reference table A1 (memory, bandwidth, interconnect, power)
    a2: str  # the row label in reference table A2 (dense peak compute)
    memory_gb: float
    bandwidth_tbs: float
    interconnect_gbs: float  # per direction
    tdp_w: float
    tflops: dict[str, float | None]  # dense; None = n/a / not published: absent from the spec


def _tf(fp32, tf32, bf16, fp16, fp8, int8, fp4):
    return dict(zip(DTYPES, (fp32, tf32, bf16, fp16, fp8, int8, fp4), strict=True))


A100_COMPUTE = _tf(19.5, 156, 312, 312, None, 624, None)  # A2 "A100 SXM (40 and 80 GB)"
MI300_COMPUTE = _tf(163.4, 653.7, 1307.4, 1307.4, 2614.9, 2614.9, None)  # A2 MI300X = MI325X

EXPECTED_GPUS: dict[str, GPURow] = {
    "a100-40gb": GPURow("A100 40GB SXM4", "A100 SXM (40 and 80 GB)",
                        40, 1.555, 300, 400, A100_COMPUTE),
    # A1: 400 W (CTS up to 500 W): the standard 400.
    "a100-80gb": GPURow("A100 80GB SXM4", "A100 SXM (40 and 80 GB)",
                        80, 2.039, 300, 400, A100_COMPUTE),
    "h100-sxm": GPURow("H100 SXM5", "H100 SXM5", 80, 3.35, 450, 700,
                       _tf(66.9, 494.7, 989.4, 989.4, 1978.9, 1978.9, None)),
    # A1: 350 W in the whitepaper (product page 300-350 W); NVLink bridge 600 bidir -> 300/dir.
    "h100-pcie": GPURow("H100 PCIe", "H100 PCIe", 80, 2.0, 300, 350,
                        _tf(51, 378, 756, 756, 1513, 1513, None)),
    # A1: 350-400 W configurable: the upper bound, as "up to 700 W" is for SXM.
    "h100-nvl": GPURow("H100 NVL (per GPU)", "H100 NVL (per GPU)", 94, 3.9, 300, 400,
                       _tf(60, 417.5, 835.5, 835.5, 1670.5, 1670.5, None)),
    "h200": GPURow("H200 SXM", "H200 SXM", 141, 4.8, 450, 700,
                   _tf(67, 494.7, 989.4, 989.4, 1978.9, 1978.9, None)),
    # A1 [L: conflict]: 7.7 TB/s on the newer HGX table (used), 8.0 on DGX B200 / launch.
    "b200": GPURow("B200 (HGX)", "B200 (HGX, 1,000 W)", 180, 7.7, 900, 1000,
                   _tf(75, 1100, 2250, 2250, 4500, 4500, 9000)),
    "gb200": GPURow("GB200 (per Blackwell GPU)", "GB200 (per GPU, 1,200 W)", 186, 8.0, 900, 1200,
                    _tf(80, 1250, 2500, 2500, 5000, 5000, 10000)),
    # A1: no NVLink; PCIe Gen4 x16 = 64 GB/s bidir -> 32/dir.
    "l40s": GPURow("L40S", "L40S", 48, 0.864, 32, 350,
                   _tf(91.6, 183, 362.05, 362.05, 733, 733, None)),
    "l4": GPURow("L4", "L4", 24, 0.300, 32, 72,
                 _tf(30.3, 60, 121, 121, 242.5, 242.5, None)),
    # A2: bf16/fp16 165.2 and fp8 330.3 with FP32 accumulate (330.3 / 660.6 with FP16
    # accumulate). A1 gives "PCIe 4.0 x16" without a figure: 32/dir as for the L40S row.
    "rtx-4090": GPURow("RTX 4090", "RTX 4090", 24, 1.008, 32, 450,
                       _tf(82.6, 82.6, 165.2, 165.2, 330.3, 660.6, None)),
    # A1: aggregate 896 GB/s bidir / 448 GB/s/dir over 7 links [M].
    "mi300x": GPURow("MI300X", "MI300X", 192, 5.3, 448, 750, MI300_COMPUTE),
    # A1: "Same as MI300X (7 links, drop-in UBB)".
    "mi325x": GPURow("MI325X", "MI325X", 256, 6.0, 448, 1000, MI300_COMPUTE),
    # A1 [L]: 7 x ~153.6 GB/s bidir = ~1,075 bidir -> 537.6/dir. A2: TF32 not published.
    "mi355x": GPURow("MI355X", "MI355X (1,400 W)", 288, 8.0, 537.6, 1400,
                     _tf(157.3, None, 2500, 2500, 5000, 5000, 10100)),
    # A2: bf16/fp8 1,677 as shipped at 1,600 MHz (1,835 on paper at 1,750 MHz); fp16 is
    # listed as 459; int8 supported but not published. A1: 21 scale-up ports = 525 GB/s/dir.
    "gaudi3": GPURow("Intel Gaudi 3 (OAM)", "Intel Gaudi 3", 128, 3.7, 525, 900,
                     _tf(229, 459, 1677, 459, 1677, None, None)),
}

# Figures the first-number rule cannot read from an A2 cell: (stem, dtype) -> the figure,
# which must still appear in that cell.
A2_CHOICES = {
    ("gaudi3", "bf16"): 1677,  # "BF16 **1,835** on paper ... as shipped it is **1,677**"
    ("gaudi3", "fp16"): 459,  # "... FP16 is listed as 459"
    ("gaudi3", "fp8"): 1677,  # "1,835 on paper / 1,677 as shipped"
}


class ModelRow(NamedTuple):
    b1: str | None  # the row label in reference table B1 (None: Part C, or not in it)
    b4: str | None  # the row label in reference table B4 (None: Part C, or not in it)
    params: int  # computed from the config, every tensor
    kv_bytes_per_token: int  # bf16, all layers at full length


EXPECTED_MODELS: dict[str, ModelRow] = {
    "llama-2-7b": ModelRow("Llama-2-7B", "Llama-2-7B", 6_738_415_616, 524_288),
    "llama-2-70b": ModelRow("Llama-2-70B", "Llama-2-70B", 68_976_648_192, 327_680),
    "llama-3-8b": ModelRow("Llama-3-8B", "Llama-3-8B", 8_030_261_248, 131_072),
    # B4 has no Llama-3.1-8B row: the shape is Llama-3-8B's.
    "llama-3.1-8b": ModelRow("Llama-3.1-8B", "Llama-3-8B", 8_030_261_248, 131_072),
    "llama-3-70b": ModelRow("Llama-3-70B / 3.1-70B", "Llama-3-70B", 70_553_706_496, 327_680),
    "llama-3.1-405b": ModelRow("Llama-3.1-405B", "Llama-3.1-405B", 405_853_388_800, 516_096),
    "mistral-7b": ModelRow("Mistral-7B-v0.1", "Mistral-7B", 7_241_732_096, 131_072),
    "qwen2.5-7b": ModelRow("Qwen2.5-7B (base)", "Qwen2.5-7B", 7_615_616_512, 57_344),
    "qwen2.5-72b": ModelRow("Qwen2.5-72B (base)", "Qwen2.5-72B", 72_706_203_648, 327_680),
    "phi-3-mini": ModelRow("Phi-3-mini-4k-instruct", "Phi-3-mini-4k", 3_821_079_552, 393_216),
    # Not in the reference: 64 x (attention 94,371,840 + q/k norms 256 + FFN 393,216,000
    # + norms 10,240) + 2 x 777,912,320 (untied embedding and head) + 5,120; 32.8B stated.
    "qwen3-32b": ModelRow(None, None, 32_762_123_264, 262_144),
    # Part C (1), the seed's "boring" model: 12 d^2 L; KV 524,288 B/token in FP16 (2 B, as bf16).
    "reference-mha-6.4b": ModelRow(None, None, 6_442_450_944, 524_288),
}

# B1 shape columns and the spec keys they hold.
B1_SHAPE = {
    "hidden": "hidden_size",
    "layers": "num_hidden_layers",
    "heads": "num_attention_heads",
    "KV heads": "num_key_value_heads",
    "head_dim": "head_dim",
    "intermediate": "intermediate_size",
    "vocab": "vocab_size",
    "max_pos": "max_position_embeddings",
}

GPU_OPTIONAL_KEYS = ("l2_mb", "interconnect_gbs", "tdp_w")


# --- reading the reference markdown -------------------------------------------------------

NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def numbers(text: str) -> list[float]:
    return [float(n.replace(",", "")) for n in NUMBER.findall(text)]


def first_number(text: str) -> float | None:
    found = numbers(text)
    return found[0] if found else None


def section(text: str, heading: str) -> str:
    """The text from the heading that starts with `heading` to the next heading."""
    start = re.search(rf"^#+ {re.escape(heading)}.*$", text, re.M)
    if start is None:
        raise AssertionError(f"reference has no section {heading!r}")
    rest = text[start.end():]
    end = re.search(r"^#+ ", rest, re.M)
    return rest[: end.start()] if end else rest


def table(text: str) -> tuple[list[str], list[list[str]]]:
    """The first markdown table in `text`: header cells and body rows (escaped \\| kept)."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    if len(lines) < 2:
        raise AssertionError("no table found in the reference section")

    def cells(line: str) -> list[str]:
        parts = re.split(r"(?<!\\)\|", line.strip())[1:-1]
        return [part.strip() for part in parts]

    return cells(lines[0]), [cells(line) for line in lines[2:]]


def rows_by_label(header: list[str], body: list[list[str]]) -> dict[str, dict[str, str]]:
    return {row[0]: dict(zip(header, row, strict=True)) for row in body}


def upper_watts(text: str) -> float | None:
    """The first power figure in a cell; the upper bound of a range such as 350–400 W."""
    match = re.search(r"(\d[\d,]*)(?:\s*[–-]\s*(\d[\d,]*))?\s*W\b", text)
    if match is None:
        return None
    return float((match.group(2) or match.group(1)).replace(",", ""))


@pytest.fixture(scope="module")
def reference_text() -> str:
    if not REFERENCE.is_file():
        pytest.skip(f"the checked reference table is not at {REFERENCE} "
                    "(../shared beside the repository); the specs are still checked "
                    "against the expected table in this module")
    return REFERENCE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def a1(reference_text: str) -> dict[str, dict[str, str]]:
    return rows_by_label(*table(section(reference_text, "A1.")))


@pytest.fixture(scope="module")
def a2(reference_text: str) -> dict[str, dict[str, str]]:
    return rows_by_label(*table(section(reference_text, "A2.")))


@pytest.fixture(scope="module")
def b1(reference_text: str) -> dict[str, dict[str, str]]:
    return rows_by_label(*table(section(reference_text, "B1.")))


@pytest.fixture(scope="module")
def b4(reference_text: str) -> dict[str, float]:
    """B4 lays two (model, B/token) pairs per row; "A / B" labels share or split values."""
    _, body = table(section(reference_text, "B4."))
    out: dict[str, float] = {}
    for row in body:
        for label, value in zip(row[0::2], row[1::2], strict=True):
            names = [name.strip() for name in label.split(" / ")]
            values = numbers(value.split("(")[0])
            if len(values) != len(names):
                values = values[:1] * len(names)
            out.update(zip(names, values, strict=True))
    return out


def a2_columns(row: dict[str, str]) -> dict[str, str]:
    """The A2 cell for each dtype; BF16 and FP16 share one column."""
    column = {"fp32": "FP32 (non-tensor)", "tf32": "TF32", "bf16": "BF16 / FP16",
              "fp16": "BF16 / FP16", "fp8": "FP8", "int8": "INT8", "fp4": "FP4"}
    return {dtype: row[name] for dtype, name in column.items()}


def reference_dense(stem: str, a2_rows: dict[str, dict[str, str]]) -> dict[str, float | None]:
    cells = a2_columns(a2_rows[EXPECTED_GPUS[stem].a2])
    dense: dict[str, float | None] = {}
    for dtype, cell in cells.items():
        chosen = A2_CHOICES.get((stem, dtype))
        if chosen is not None:
            assert chosen in numbers(cell), f"A2 {stem} {dtype}: {chosen} not in {cell!r}"
            dense[dtype] = chosen
        else:
            dense[dtype] = first_number(cell)  # None for n/a, not published
    return dense


# --- the specs against the expected table --------------------------------------------------

def shipped_toml(kind: str, stem: str) -> tuple[Path, dict]:
    path = spec_files.resolve(kind, stem)
    return path, tomllib.loads(path.read_text(encoding="utf-8"))


# Blackwell Ultra (not in the reference): checked against their cited figures in
# test_systems.py.
GPUS_CHECKED_ELSEWHERE = {"b300", "gb300"}

# Mixture-of-experts, MLA and mixed-window models are checked against the reference's
# tables B2-B4 in test_model_coverage.py; yi-34b (not in the reference) in test_validate.
CHECKED_ELSEWHERE = {"deepseek-v3", "gemma-2-9b", "gemma-2-27b", "gpt-oss-20b", "gpt-oss-120b",
                     "mixtral-8x7b", "mixtral-8x22b", "qwen3-30b-a3b", "qwen3-235b-a22b",
                     "yi-34b"}


def test_every_shipped_spec_is_checked():
    assert set(spec_files.shipped_names("gpus")) == set(EXPECTED_GPUS) | GPUS_CHECKED_ELSEWHERE
    assert set(spec_files.shipped_names("models")) == set(EXPECTED_MODELS) | CHECKED_ELSEWHERE


@pytest.mark.parametrize("stem", sorted(EXPECTED_GPUS))
def test_gpu_matches_expected(stem):
    gpu = load_gpu(stem)
    want = EXPECTED_GPUS[stem]
    assert gpu.memory_gb == pytest.approx(want.memory_gb, rel=1e-12)
    assert gpu.bandwidth_tbs == pytest.approx(want.bandwidth_tbs, rel=1e-12)
    assert gpu.interconnect_gbs == pytest.approx(want.interconnect_gbs, rel=1e-12)
    assert gpu.tdp_w == pytest.approx(want.tdp_w, rel=1e-12)
    listed = {dtype for dtype, value in want.tflops.items() if value is not None}
    assert set(gpu.tflops) == listed, "a spec lists exactly the formats with a dense peak"
    for dtype in listed:
        assert gpu.tflops[dtype] == pytest.approx(want.tflops[dtype], rel=1e-12), dtype


@pytest.mark.parametrize("stem", sorted(EXPECTED_MODELS))
def test_model_matches_expected(stem):
    model = load_model(stem)
    want = EXPECTED_MODELS[stem]
    assert model.total_params() == want.params
    assert model.kv_bytes_per_token("bf16") == want.kv_bytes_per_token


@pytest.mark.parametrize("stem", sorted(EXPECTED_GPUS))
def test_gpu_numbers_have_sources(stem):
    path, data = shipped_toml("gpus", stem)
    sources = data.get("sources", {})
    needed = ["memory_gb", "bandwidth_tbs", "tflops"]
    needed += [key for key in GPU_OPTIONAL_KEYS if key in data]
    missing = [key for key in needed if not str(sources.get(key, "")).strip()]
    assert not missing, f"{path}: no [sources] entry for {missing}"


@pytest.mark.parametrize("stem", sorted(EXPECTED_MODELS))
def test_model_numbers_have_sources(stem):
    path, data = shipped_toml("models", stem)
    sources = data.get("sources", {})
    assert any(str(sources.get(key, "")).strip() for key in ("config", "shape")), (
        f"{path}: [sources] needs `config` (the HF config.json URL) or `shape`"
    )
    assert all(isinstance(v, str) and v.strip() for v in sources.values()), path


@pytest.mark.parametrize("kind", ["gpus", "models"])
def test_specs_start_with_a_comment_naming_the_part(kind):
    for stem in spec_files.shipped_names(kind):
        first = spec_files.resolve(kind, stem).read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# ") and len(first) > 4, f"{kind}/{stem}: {first!r}"


# --- the expected table against the reference markdown --------------------------------------

@pytest.mark.parametrize("stem", sorted(EXPECTED_GPUS))
def test_expected_gpu_memory_bandwidth_power_match_reference_a1(stem, a1):
    want = EXPECTED_GPUS[stem]
    row = a1[want.a1]
    assert first_number(row["Memory"]) == want.memory_gb
    assert first_number(row["Peak mem BW"]) == want.bandwidth_tbs
    assert upper_watts(row["TDP / board power"]) == want.tdp_w


@pytest.mark.parametrize("stem", sorted(EXPECTED_GPUS))
def test_expected_gpu_interconnect_matches_reference_a1(stem, a1):
    """Per direction: the cell gives it, or the bidirectional total that is twice it."""
    want = EXPECTED_GPUS[stem].interconnect_gbs
    cell = a1[EXPECTED_GPUS[stem].a1]["Scale-up interconnect per GPU"]
    if stem == "rtx-4090":  # no figure on the row; the same link as the L40S row's
        assert "PCIe 4.0 x16" in cell
        cell = a1["L40S"]["Scale-up interconnect per GPU"]
        assert "PCIe Gen4 x16 = 64 GB/s bidir" in cell
    same_as = re.match(r"Same as (\S+)", cell)
    if same_as:  # MI325X: "Same as MI300X (7 links, drop-in UBB)"
        cell = a1[same_as.group(1)]["Scale-up interconnect per GPU"]
    found = numbers(cell)
    assert any(n == pytest.approx(want, rel=1e-3) or n == pytest.approx(2 * want, rel=1e-3)
               for n in found), f"{stem}: {want} GB/s/dir (or {2 * want} bidir) not in {cell!r}"


@pytest.mark.parametrize("stem", sorted(EXPECTED_GPUS))
def test_expected_gpu_compute_matches_reference_a2(stem, a2):
    assert reference_dense(stem, a2) == EXPECTED_GPUS[stem].tflops


@pytest.mark.parametrize("stem", sorted(EXPECTED_GPUS))
def test_no_gpu_peak_is_a_sparse_figure(stem, a2):
    """NVIDIA prints tensor rows with 2:4 sparsity: twice the dense figure."""
    gpu = load_gpu(stem)
    dense = reference_dense(stem, a2)
    assert dense["bf16"] is not None
    assert gpu.tflops["bf16"] != pytest.approx(2 * dense["bf16"], rel=1e-3)
    for dtype, peak in gpu.tflops.items():
        if dense.get(dtype):
            assert peak != pytest.approx(2 * dense[dtype], rel=1e-3), dtype


@pytest.mark.parametrize("stem", sorted(s for s, row in EXPECTED_MODELS.items() if row.b1))
def test_expected_model_matches_reference_b1_b4(stem, b1, b4):
    want = EXPECTED_MODELS[stem]
    row = b1[want.b1]
    assert first_number(row["Params: computed from config (stated)"]) == want.params
    assert b4[want.b4] == want.kv_bytes_per_token


@pytest.mark.parametrize("stem", sorted(s for s, row in EXPECTED_MODELS.items() if row.b1))
def test_model_shape_matches_reference_b1(stem, b1):
    """The config fields themselves, not only what they multiply to."""
    row = b1[EXPECTED_MODELS[stem].b1]
    _, data = shipped_toml("models", stem)
    for column, key in B1_SHAPE.items():
        cell = row[column]
        same_as = re.match(r"same as (.+)$", row["hidden"])
        if same_as and (not cell or cell == row["hidden"]):
            cell = b1[same_as.group(1).strip()][column]
        assert data[key] == first_number(cell), f"{stem}: {key} vs B1 {column} {cell!r}"
    assert data["tie_word_embeddings"] is row["tied"].lstrip("*").startswith("true")


def test_reference_model_matches_part_c(reference_text):
    part_c = section(reference_text, "Part C.")
    total = re.search(r"Total = 12 · d² · L = \*\*([\d,]+)", part_c)
    kv = re.search(r"KV cache = ([\d,]+) B/token", part_c)
    assert total and kv, "Part C (1) no longer states the total and the KV bytes per token"
    want = EXPECTED_MODELS["reference-mha-6.4b"]
    assert int(total.group(1).replace(",", "")) == want.params
    assert int(kv.group(1).replace(",", "")) == want.kv_bytes_per_token
