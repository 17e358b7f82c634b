"""A chart slice's row filters (`row_filters`): the numpy mask a `sweep run` worker keeps
its shard's chart rows with equals the polars predicate `sweep chart` filters with, row
for row, on random frames and random filters (names as a shard's codes, NaN, each
model's own value and its nulls, the first row of each combination)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.sweeps.row_filters import (
    All,
    AnyOf,
    Compare,
    Count,
    FirstDistinct,
    IsIn,
    Own,
    Rows,
)

NAMES = {"model": ("m0", "m1", "m2"), "gpu": ("g0", "g1")}  # as a shard's dictionaries
NUMBERS = {"x": st.integers(0, 3),
           "y": st.sampled_from([0.5, 1.0, 2.0, math.nan])}


def values_of(column: str):
    if column in NAMES:  # "zz": a name no row has
        return st.sampled_from([*NAMES[column], "zz"])
    return NUMBERS[column]


own = st.lists(st.tuples(st.sampled_from([*NAMES["model"], "zz"]), st.integers(0, 3)),
               min_size=1, max_size=3).map(lambda pairs: Own(tuple(pairs)))
compare = st.sampled_from(["model", "gpu", "x", "y"]).flatmap(
    lambda c: st.builds(Compare, st.just(c), values_of(c), st.booleans()))
compare_own = st.builds(Compare, st.just("x"), own, st.booleans())
is_in = st.sampled_from(["model", "gpu", "x", "y"]).flatmap(
    lambda c: st.builds(IsIn, st.just(c), st.lists(values_of(c), max_size=3).map(tuple)))
first = st.lists(st.sampled_from(["model", "gpu", "x", "y"]), min_size=1, max_size=3,
                 unique=True).map(lambda group: FirstDistinct(tuple(group)))
leaf = st.one_of(compare, compare_own, is_in, first)


def branch(parts):
    many = st.lists(parts, min_size=1, max_size=4).map(tuple)
    return st.one_of(
        many.map(All), many.map(AnyOf),
        st.tuples(many, st.integers(0, 2), st.integers(0, 3)).map(
            lambda t: Count(t[0], t[1], max(t[1], t[2]))))


tests = st.recursive(leaf, branch, max_leaves=12)


@st.composite
def frames(draw):
    length = draw(st.integers(1, 40))
    columns = {name: np.array(draw(st.lists(st.integers(0, len(names) - 1), min_size=length,
                                            max_size=length)), np.int32)
               for name, names in NAMES.items()}
    for name, values in NUMBERS.items():
        drawn = draw(st.lists(values, min_size=length, max_size=length))
        columns[name] = np.array(drawn, np.int64 if name == "x" else np.float64)
    return columns


def polars_frame(columns) -> pl.DataFrame:
    """The columns as polars reads a shard: names Categorical."""
    return pl.DataFrame([
        pl.Series(name, list(NAMES[name])).gather(values).cast(pl.Categorical)
        if name in NAMES else pl.Series(name, values) for name, values in columns.items()])


@settings(max_examples=400, deadline=None)
@given(columns=frames(), test=tests)
def test_the_numpy_mask_equals_the_polars_predicate(columns, test):
    frame = polars_frame(columns)
    expected = frame.select(test.polars(pl).fill_null(False).alias("kept"))["kept"]
    mask = test.mask(Rows(columns, NAMES))
    assert mask.dtype == bool and mask.shape == (frame.height,)
    assert mask.tolist() == expected.to_list(), test


def test_a_model_without_its_own_value_passes_no_test_of_it():
    columns = {"model": np.array([0, 1, 2], np.int32), "gpu": np.zeros(3, np.int32),
               "x": np.array([1, 1, 1]), "y": np.ones(3)}
    own_value = Own((("m0", 1), ("m1", 2)))
    rows = Rows(columns, NAMES)
    assert Compare("x", own_value).mask(rows).tolist() == [True, False, False]
    assert Compare("x", own_value, equal=False).mask(rows).tolist() == [False, True, False]
    # a null counts as no difference: m2 is at its "opening" with nothing to differ from
    away = Count((Compare("x", own_value, equal=False),), 0, 0)
    assert away.mask(rows).tolist() == [True, False, True]
    assert polars_frame(columns).select(away.polars(pl))["x"].to_list() == [True, False, True]


def test_the_first_row_of_each_combination_is_kept_in_order():
    columns = {"model": np.array([1, 0, 1, 1, 0], np.int32), "gpu": np.zeros(5, np.int32),
               "x": np.array([3, 3, 3, 2, 3]), "y": np.array([math.nan, 1, math.nan, 1, 1])}
    kept = FirstDistinct(("model", "x", "y")).mask(Rows(columns, NAMES))
    assert kept.tolist() == [True, True, False, True, False]  # NaN equals NaN


