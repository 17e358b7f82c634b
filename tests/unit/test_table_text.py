"""table_text replicates polars without importing it: `round_sig_figs` / `rounded` equal
polars' to the bit, `float_texts` equals polars' CSV and `pl.format` text, `csv_text`
equals `DataFrame.write_csv()` byte for byte, on random frames (floats of every
magnitude and bit pattern, 4-significant-digit values, values next to powers of ten,
integers, bools, strings with separators, quotes, line breaks, unicode, empty and None)."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.sweeps.table_text import CodedText, csv_text, float_texts, round_sig_figs, rounded


def _next_to_ten(power: int, ulps: int) -> float:
    """The float `ulps` steps from 10^power."""
    return float((np.float64(float(f"1e{power}")).view(np.int64) + np.int64(ulps))
                 .view(np.float64))


FLOATS = st.one_of(
    st.floats(width=64),  # any value, NaN and ±inf included
    st.integers(0, 2**64 - 1).map(lambda bits: float(np.uint64(bits).view(np.float64))),
    st.floats(min_value=1e-320, max_value=1e-290),  # subnormal and just above
    st.floats(min_value=1e290, max_value=1.7976931348623157e308),
    st.integers(-2**62, 2**62).map(float),  # whole numbers
    st.builds(lambda m, e: float(f"{m}e{e}"), st.integers(-9999, 9999), st.integers(-30, 30)),
    st.builds(_next_to_ten, st.integers(-307, 308), st.integers(-3000, 3000)),
)


STRING_CHARACTERS = st.sampled_from(list('a Z0,"\n\r\t;\'≥×é'))
STRINGS = st.one_of(st.none(), st.text(STRING_CHARACTERS, max_size=6), st.text(max_size=4))


def polars_float(values: np.ndarray) -> pl.Series:
    return pl.Series("x", values, dtype=pl.Float64)


def bits(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).view(np.uint64)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(FLOATS, max_size=30), digits=st.integers(1, 20))
def test_round_sig_figs_is_polars_to_the_bit(values, digits):
    x = np.array(values, dtype=np.float64)
    theirs = polars_float(x).round_sig_figs(digits).to_numpy()
    np.testing.assert_array_equal(bits(round_sig_figs(x, digits)), bits(theirs))


@settings(max_examples=200, deadline=None)
@given(values=st.lists(FLOATS, max_size=30), digits=st.integers(1, 8))
def test_rounded_is_the_charts_when_finite_then_round(values, digits):
    x = polars_float(np.array(values, dtype=np.float64))
    theirs = (pl.select(pl.when(x.is_finite()).then(x.round_sig_figs(digits)))
              .to_series().fill_null(np.nan).to_numpy())
    np.testing.assert_array_equal(bits(rounded(x.to_numpy(), digits)), bits(theirs))


@settings(max_examples=300, deadline=None)
@given(values=st.lists(FLOATS, max_size=30))
def test_float_texts_are_polars_csv_and_format_texts(values):
    x = np.array(values, dtype=np.float64)
    frame = pl.DataFrame([polars_float(x)])
    as_format = frame.select(pl.format("{}", pl.col("x"))).to_series().to_list()
    as_csv = frame.write_csv().split("\n")[1:-1]
    ours = float_texts(x)
    assert ours == as_format
    assert ours == as_csv


def _column(kind: str, length: int):
    if kind == "float":
        return st.lists(st.one_of(FLOATS, st.just(math.nan)), min_size=length,
                        max_size=length).map(lambda v: np.array(v, dtype=np.float64))
    if kind == "int":
        return st.lists(st.integers(-2**63, 2**63 - 1), min_size=length,
                        max_size=length).map(lambda v: np.array(v, dtype=np.int64))
    if kind == "bool":
        return st.lists(st.booleans(), min_size=length,
                        max_size=length).map(lambda v: np.array(v, dtype=bool))
    return st.lists(STRINGS, min_size=length,
                    max_size=length).map(lambda v: np.array(v, dtype=object))


@st.composite
def frames(draw) -> dict[str, np.ndarray]:
    names = draw(st.lists(st.text(STRING_CHARACTERS, max_size=4), max_size=5, unique=True))
    length = draw(st.integers(0, 12))
    kinds = draw(st.lists(st.sampled_from(["float", "int", "bool", "str"]),
                          min_size=len(names), max_size=len(names)))
    return {name: draw(_column(kind, length)) for name, kind in zip(names, kinds, strict=True)}


POLARS_TYPES = {"f": pl.Float64, "i": pl.Int64, "b": pl.Boolean, "O": pl.String}


def polars_frame(columns: dict[str, np.ndarray]) -> pl.DataFrame:
    """The frame polars would have: NaN in a float column is its null. (From a dict: a
    list of Series names a column "" column_0.)"""
    series = {name: pl.Series(name, values.tolist(), dtype=POLARS_TYPES[values.dtype.kind])
              for name, values in columns.items()}
    return pl.DataFrame({name: s.fill_nan(None) if s.dtype == pl.Float64 else s
                         for name, s in series.items()})


@settings(max_examples=300, deadline=None)
@given(columns=frames())
def test_csv_text_is_polars_write_csv_byte_for_byte(columns):
    assert csv_text(columns) == polars_frame(columns).write_csv()


def coded(values: np.ndarray) -> CodedText:
    """A str column as codes into its distinct names, None first (as `Names` holds it)."""
    names = sorted(set(values.tolist()), key=lambda v: (v is not None, v or ""))
    place = {name: code for code, name in enumerate(names)}
    return CodedText(np.array([place[v] for v in values.tolist()], dtype=np.int64), names)


@settings(max_examples=200, deadline=None)
@given(columns=frames())
def test_a_coded_str_column_writes_as_its_text(columns):
    as_codes = {name: coded(values) if values.dtype.kind == "O" else values
                for name, values in columns.items()}
    assert csv_text(as_codes) == csv_text(columns)


def test_sink_csv_writes_the_same_bytes(tmp_path):
    columns = {"name, unit": np.array(["", None, 'a "b"', "x\r\ny", "≥ 2 ×"], dtype=object),
               "x": np.array([1.0, math.nan, 1e-7, 2.5e-5, 1e16]),
               "n": np.array([-1, 0, 2**62, 3, 4]), "ok": np.array([True, False] * 2 + [True])}
    path = tmp_path / "frame.csv"
    polars_frame(columns).lazy().sink_csv(path)
    assert path.read_bytes() == csv_text(columns).encode()


@pytest.mark.parametrize(("value", "text"), [
    (1.0, "1.0"), (0.1, "0.1"), (1e-7, "1e-7"), (1e20, "1e+20"), (123456789.0, "123456789.0"),
    (2.5e-5, "0.000025"), (1.5e15, "1500000000000000.0"), (1e16, "1e+16"), (3e-4, "0.0003"),
    (1e-5, "0.00001"), (-1.5e-5, "-0.000015"), (1e-6, "1e-6"), (1.23e22, "1.23e+22"),
    (-0.0, "-0.0"), (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e+308"),
    (math.nan, "NaN"), (math.inf, "inf"), (-math.inf, "-inf"), (0.1 + 0.2, "0.30000000000000004"),
])
def test_float_text_examples(value, text):
    assert float_texts(np.array([value])) == [text]


def test_float_texts_keep_the_sign_of_zero_among_repeats():
    assert float_texts(np.array([0.0, -0.0, 0.0, 1.0, -0.0])) == ["0.0", "-0.0", "0.0", "1.0",
                                                                  "-0.0"]


def test_round_sig_figs_examples():
    x = np.array([123456789.0, 0.00012345, -2.5, 2.5, 0.0, -0.0, math.nan, math.inf, 1e-310])
    ours = round_sig_figs(x, 2)
    np.testing.assert_array_equal(bits(ours), bits(polars_float(x).round_sig_figs(2)))
    assert ours[2:4].tolist() == [-2.5, 2.5]
    halves = np.array([2.5, -2.5, 0.25])
    assert round_sig_figs(halves, 1).tolist() == [3.0, -3.0, 0.3]  # away from zero, not to even
    np.testing.assert_array_equal(bits(round_sig_figs(halves, 1)),
                                  bits(polars_float(halves).round_sig_figs(1)))
    assert np.signbit(ours[5]) and math.isnan(ours[6]) and ours[7] == math.inf
    assert math.isnan(rounded(np.array([math.inf]))[0])


def test_round_sig_figs_next_to_powers_of_ten():
    """Where numpy's log10 and the C library's (which Rust calls) floor differently, a
    digit moves: every power of ten's neighbours, thousands of ulps either side."""
    x = np.concatenate([(np.float64(float(f"1e{k}")).view(np.int64)
                         + np.arange(-3000, 3001, 3)).view(np.float64) for k in range(-307, 309)])
    x = x[np.isfinite(x)]
    for digits in (1, 4, 17):
        theirs = polars_float(x).round_sig_figs(digits).to_numpy()
        np.testing.assert_array_equal(bits(round_sig_figs(x, digits)), bits(theirs))


def test_csv_text_edges():
    assert csv_text({}) == pl.DataFrame().write_csv() == "\n"
    empty = {"a": np.array([], dtype=np.float64), "b c": np.array([], dtype=object)}
    assert csv_text(empty) == "a,b c\n"
    strings = np.array(["", None, " a ", 'he said "hi"', "a,b", "x\ny", "r\rs", "≥×"],
                       dtype=object)
    assert csv_text({"s": strings}) == ('s\n""\n\n a \n"he said ""hi"""\n"a,b"\n"x\ny"\n'
                                        '"r\rs"\n≥×\n')
    assert csv_text({"a,b": np.array([1]), 'q"': np.array([True]), "": np.array([False])}) \
        == '"a,b","q""",""\n1,true,false\n'


@pytest.mark.parametrize(("columns", "error", "says"), [
    ({"a": np.array([1.0]), "b": np.array([1, 2])}, ValueError, "one length"),
    ({"a": np.array([1.0], dtype=np.float32)}, TypeError, "float32"),
    ({"a": np.array([1.5, "x"], dtype=object)}, TypeError, "holds float"),
])
def test_csv_text_refuses_what_it_cannot_write(columns, error, says):
    with pytest.raises(error, match=says):
        csv_text(columns)


def test_round_sig_figs_needs_a_digit():
    with pytest.raises(ValueError, match="digits >= 1"):
        round_sig_figs(np.array([1.0]), 0)


def test_table_text_never_imports_polars():
    code = ("import sys, numpy as np; from rooftui.sweeps import table_text as t; "
            "t.csv_text({'x': t.rounded(np.array([1.23456]))}); "
            "assert 'polars' not in sys.modules, 'polars imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
