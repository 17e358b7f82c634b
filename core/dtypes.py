"""Number formats and their size in bytes per element.

`tf32` is a tensor-core compute format over fp32 storage, so it stores 4 bytes.
`int4` and `fp4` pack two values per byte; group scales are not counted here.
"""

from __future__ import annotations

import difflib

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
}

# Weight formats that tensor cores do not multiply directly: weight-only quantisation
# dequantises to 16 bits, so the matmul runs at the bf16 peak.
WEIGHT_ONLY = {"int4": "bf16", "fp4": "bf16", "int8": "bf16"}


def check_dtype(name: str, what: str = "dtype") -> str:
    """Return `name` if it is a known format, else raise with the closest names."""
    if name in BYTES_PER_ELEMENT:
        return name
    close = difflib.get_close_matches(str(name), BYTES_PER_ELEMENT, n=3, cutoff=0.3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise SpecError(
        f"unknown {what} {name!r}: expected one of {', '.join(BYTES_PER_ELEMENT)}{hint}"
    )


def bytes_per_element(name: str) -> float:
    return BYTES_PER_ELEMENT[check_dtype(name)]


def default_compute_dtype(weight_dtype: str) -> str:
    """The format the matmuls run in when only the weight format is given."""
    return WEIGHT_ONLY.get(check_dtype(weight_dtype, "weight dtype"), weight_dtype)
