"""Number formats and their size in bytes per element.

`tf32` is a tensor-core compute format over fp32 storage, so it stores 4 bytes.
`int4` and `fp4` pack two values per byte, with no scales counted. Quantised weight
formats that carry their scales:
- `int4-g128`, `int8-g128` (GPTQ/AWQ-style weight-only): one 16-bit scale per group of
  128 weights adds 2 bytes per 128 weights, 1/64 of a byte per weight (zero points, when
  a checkpoint has them, are not counted);
- `mxfp4` (OCP microscaling, as gpt-oss ships its experts): 4-bit values plus one 8-bit
  shared scale per block of 32, 4.25 bits per weight;
- `nvfp4` (NVIDIA's Blackwell format): 4-bit E2M1 values plus one FP8 E4M3 scale per
  block of 16, 4.5 bits per weight (the one FP32 scale per tensor is not counted).
  Blackwell tensor cores multiply it directly, so its compute dtype is `fp4`.
fp8 block scales (DeepSeek-V3: one fp32 scale per 128 x 128 block, 1/4096 of a byte per
weight) are negligible and not counted.
"""

from __future__ import annotations

from rooftui.core.errors import SpecError

BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "fp4": 0.5,
    "int8-g128": 1.0 + 2.0 / 128,
    "int4-g128": 0.5 + 2.0 / 128,
    "mxfp4": 4.25 / 8,
    "nvfp4": 4.5 / 8,
}

# nvfp4 runs at the fp4 peak (`default_compute_dtype`); a GPU without one needs
# --compute-dtype bf16.
NATIVE = {"nvfp4": "fp4"}

# Weight formats that tensor cores do not multiply directly: weight-only quantisation
# dequantises to 16 bits, so the matmul runs at the bf16 peak (give the compute dtype to
# run int8 or fp4 matmuls natively).
WEIGHT_ONLY = {"int4": "bf16", "fp4": "bf16", "int8": "bf16", "int8-g128": "bf16",
               "int4-g128": "bf16", "mxfp4": "bf16"}


def check_dtype(name: str, what: str = "dtype") -> str:
    """Return `name` if it is a known format, else raise with the closest names."""
    if name in BYTES_PER_ELEMENT:
        return name
    import difflib  # only a mistyped name needs it: not imported on every start

    close = difflib.get_close_matches(str(name), BYTES_PER_ELEMENT, n=3, cutoff=0.3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise SpecError(
        f"unknown {what} {name!r}: expected one of {', '.join(BYTES_PER_ELEMENT)}{hint}"
    )


def bytes_per_element(name: str) -> float:
    return BYTES_PER_ELEMENT[check_dtype(name)]


def default_compute_dtype(weight_dtype: str) -> str:
    """The format the matmuls run in when only the weight format is given: the weights'
    own when tensor cores take it (fp8 weights and activations run at the fp8 peak),
    bf16 for weight-only formats."""
    weight_dtype = check_dtype(weight_dtype, "weight dtype")
    return NATIVE.get(weight_dtype, WEIGHT_ONLY.get(weight_dtype, weight_dtype))
