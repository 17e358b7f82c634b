"""`chart_slices.first_rows` (what `take_slice` keeps of each shown combination): the
first row of each combination of the keys in the frame's order, sorted by the keys, as
`unique(keep="first")` then a sort gives it, for names (string and categorical), whole
numbers, floats with NaN, -0.0 and nulls."""

from __future__ import annotations

import math

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.sweeps.chart_slices import first_rows

KEYS = {"gpu": st.sampled_from(["h100-sxm", "h200", "l40s", None]),
        "batch": st.sampled_from([1, 8, 64, None]),
        "mfu": st.sampled_from([0.5, 0.7, math.nan, -0.0, 0.0, None])}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.fixed_dictionaries(KEYS), min_size=0, max_size=30),
       st.lists(st.sampled_from(list(KEYS)), min_size=1, max_size=3, unique=True),
       st.booleans())
def test_each_combination_keeps_its_first_row(rows, keys, categorical):
    frame = pl.DataFrame(rows, schema={"gpu": pl.String, "batch": pl.Int64,
                                       "mfu": pl.Float64}).with_row_index("row")
    if categorical:  # how the runner's parquet stores names
        frame = frame.with_columns(pl.col("gpu").cast(pl.Categorical))
    expected = frame.unique(subset=keys, keep="first").sort(keys)
    got = first_rows(pl, frame.lazy(), keys)
    assert got.height == expected.height
    # the same first rows (by their index); the key order of equal-sorting values
    # (-0.0 and 0.0, one combination) is the sort's own
    assert got.sort("row")["row"].to_list() == expected.sort("row")["row"].to_list()
    assert got.select(keys).equals(got.select(keys).sort(keys, maintain_order=True))
