"""Three polars behaviours in numpy and the standard library, to the bit and the byte, so
that chart tables can be rounded and written as CSV without importing polars.

- `round_sig_figs`: polars' `Expr.round_sig_figs` on float64 (crates/polars-ops/src/series/
  ops/round.rs): 0 stays as it is (-0.0 too); otherwise `e = digits - 1 -
  floor(log10(|x|))`, `scalbn(round(scalbn(x, e) * 5^e) / 5^e, -e)`, with Rust's `round`
  (half away from zero) and `powi` (compiler-rt's `__powidf2`: square-and-multiply on
  |e|, then 1/r for e < 0), and the input back where that is not finite (NaN, ±inf, and
  where 5^e overflows). `rounded` is the charts' `when(x.is_finite()).then(...)`: NaN
  where polars has null.
- `float_texts`: how polars writes a float64 in CSV (default options; crates/polars-io/
  src/csv/write/write_impl/serializer.rs, the `zmij` crate) and in `pl.format("{}", x)`
  (the same text): the shortest digits that read back as the value (as `repr`), fixed
  notation for decimal exponents -5..15 ("0.00001", "1500000000000000.0"), else
  "d[.ddd]e±X" with no padding ("1e-7", "1e+16"); "NaN", "inf", "-inf".
- `csv_text`: `DataFrame.write_csv()` / `LazyFrame.sink_csv` with default options (the
  serializer above, crates/polars-io/src/csv/write/write_impl.rs): a header, every row
  ending in "\\n", nulls as empty fields; a string (and a column name) is quoted when it
  is empty or holds `,` `"` `\\n` or `\\r`, a `"` inside doubled.

Checked against polars 2.1.0 by tests/unit/test_table_text.py (property tests that
compare with polars itself).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

NULL_FIELD = ""
QUOTE_FORCING = (",", '"', "\n", "\r")


def round_sig_figs(values: np.ndarray, digits: int) -> np.ndarray:
    """polars' `round_sig_figs(digits)` of float64 values, bit for bit (module
    docstring); `digits` >= 1 as polars requires."""
    if digits < 1:
        raise ValueError(f"round_sig_figs needs digits >= 1, got {digits}")
    values = np.asarray(values, dtype=np.float64)
    result = values.copy()
    todo = np.isfinite(values) & (values != 0)
    x = values[todo]
    if x.size == 0:
        return result
    exponents = digits - 1 - _floor_log10(np.abs(x))
    lowest = int(exponents.min())  # a table over the few hundred exponents there can be
    pow5 = np.array([_powi(5.0, e) for e in range(lowest, int(exponents.max()) + 1)])
    pow5 = pow5[exponents - lowest]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        scaled = np.ldexp(x, exponents) * pow5
        descaled = np.ldexp(_round_half_away(scaled) / pow5, -exponents)
    result[todo] = np.where(np.isfinite(descaled), descaled, x)
    return result


def rounded(values: np.ndarray, digits: int = 4) -> np.ndarray:
    """`pl.when(x.is_finite()).then(x.round_sig_figs(digits))` with NaN for its nulls."""
    values = np.asarray(values, dtype=np.float64)
    return np.where(np.isfinite(values), round_sig_figs(values, digits), np.nan)


def _floor_log10(magnitudes: np.ndarray) -> np.ndarray:
    """`floor(log10(m)) as i32` with the C library's log10, which Rust calls: numpy's own
    (SIMD) log10 can differ by an ulp, which moves the floor only next to an integer, so
    those few (powers of ten, each once) are asked of math.log10 (the same libm)."""
    logs = np.log10(magnitudes)
    near = np.abs(logs - np.rint(logs)) < 1e-9
    distinct, where = np.unique(magnitudes[near], return_inverse=True)
    logs[near] = np.array([math.log10(m) for m in distinct.tolist()])[where]
    return np.floor(logs).astype(np.int64)


def _powi(base: float, exponent: int) -> float:
    """Rust's `f64::powi` (compiler-rt `__powidf2`), each product rounded as it does."""
    result, n = 1.0, abs(exponent)
    while True:
        if n & 1:
            result *= base
        n >>= 1
        if n == 0:
            break
        base *= base
    return 1.0 / result if exponent < 0 else result


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """Rust's `f64::round`: to the nearest whole number, halves away from zero (numpy's
    `round` takes halves to even); `x - trunc(x)` is exact, so no 0.49999999999999994
    slips to 1."""
    whole = np.trunc(x)
    return np.where(np.abs(x - whole) >= 0.5, whole + np.sign(x), whole)


def float_texts(values: np.ndarray) -> list[str]:
    """Each float64 as polars writes it in CSV and in `pl.format` (module docstring); each
    distinct value (by its bits, so -0.0 keeps its sign) is formatted once."""
    values = np.ascontiguousarray(values, dtype=np.float64)
    bits, where = np.unique(values.view(np.uint64), return_inverse=True)
    texts = np.array([_float_text(v) for v in bits.view(np.float64).tolist()], dtype=object)
    return texts[where.reshape(-1)].tolist()


def _float_text(value: float) -> str:
    # repr has the same shortest digits; it switches to exponents below 1e-4 (polars: 1e-5)
    # and pads them to two digits ("1e-07"; polars: "1e-7").
    text = repr(value)
    if "e" not in text:
        return "NaN" if text == "nan" else text
    mantissa, exponent = text.split("e")
    power = int(exponent)
    if power == -5:
        sign, digits = ("-", mantissa[1:]) if mantissa[0] == "-" else ("", mantissa)
        return f"{sign}0.0000{digits.replace('.', '')}"
    return f"{mantissa}e{'+' if power >= 0 else '-'}{abs(power)}"


class CodedText(NamedTuple):
    """A str column as codes into its distinct `names` (str or None): each name is
    quoted once."""

    codes: np.ndarray
    names: Sequence[str | None]

    def __len__(self) -> int:
        return len(self.codes)


def csv_text(columns: Mapping[str, np.ndarray | CodedText]) -> str:
    """The CSV text polars writes for a frame of these columns with default options, byte
    for byte: float64 (NaN as null), any integer, bool, and str (object arrays of str or
    None, numpy str arrays, or `CodedText`) columns, all of one length."""
    lengths = {len(values) for values in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"csv_text needs columns of one length, got lengths {sorted(lengths)}")
    header = ",".join(_quoted(name) for name in columns) + "\n"
    fields = [_coded_fields(values) if isinstance(values, CodedText)
              else _column_fields(name, np.asarray(values)) for name, values in columns.items()]
    if not fields or not fields[0]:
        return header
    return header + "\n".join(map(",".join, zip(*fields, strict=True))) + "\n"


def _coded_fields(column: CodedText) -> list[str]:
    fields = np.asarray([NULL_FIELD if name is None else _quoted(name)
                         for name in column.names], dtype=object)
    return fields[column.codes].tolist()


def _column_fields(name: str, values: np.ndarray) -> list[str]:
    kind = values.dtype.kind
    if kind == "f" and values.dtype == np.float64:
        texts = float_texts(values)
        for i in np.flatnonzero(np.isnan(values)).tolist():
            texts[i] = NULL_FIELD
        return texts
    if kind in "iu":
        return list(map(str, values.tolist()))
    if kind == "b":
        return np.where(values, "true", "false").tolist()
    if kind in "OU":
        return _string_fields(name, values)
    raise TypeError(f"csv_text writes float64, integer, bool and str columns; "
                    f"column {name!r} is {values.dtype}")


def _string_fields(name: str, values: np.ndarray) -> list[str]:
    strings = values.tolist()
    distinct = set(strings)
    wrong = [s for s in distinct if s is not None and not isinstance(s, str)]
    if wrong:
        raise TypeError(f"csv_text: column {name!r} holds {type(wrong[0]).__name__} "
                        f"values; a str column holds str or None")
    fields = {s: NULL_FIELD if s is None else _quoted(s) for s in distinct}
    return [fields[s] for s in strings]


def _quoted(text: str) -> str:
    """polars' "necessary" quoting: an empty string is quoted (an unquoted empty field is
    null), so is one holding the separator, a quote or a line break."""
    if text and not any(c in text for c in QUOTE_FORCING):
        return text
    return '"' + text.replace('"', '""') + '"'
