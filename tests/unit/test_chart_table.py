"""`chart_table.Table` does what the polars calls it replaces do: the first row of each
combination (sorted as polars sorts, or in the order they appear), distinct
combinations, filters and concatenation of names with different dictionaries, and a
round trip through polars."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.sweeps.chart_slices import first_rows
from rooftui.sweeps.chart_table import Names, Table, derived_columns, positive
from rooftui.sweeps.results import with_derived

NAMES = ["h100-sxm", "a100-80gb", "b200", "H200", "l40s", "mi300x", "bf16", "fp8", ""]


@st.composite
def frames(draw) -> pl.DataFrame:
    height = draw(st.integers(0, 30))
    def column(kind: str):
        if kind == "name":
            return st.lists(st.sampled_from(NAMES), min_size=height, max_size=height)
        if kind == "int":
            return st.lists(st.integers(-3, 3), min_size=height, max_size=height)
        if kind == "bool":
            return st.lists(st.booleans(), min_size=height, max_size=height)
        return st.lists(st.sampled_from([0.5, 1.0, -2.0, 1e9, 3.25]), min_size=height,
                        max_size=height)
    kinds = draw(st.lists(st.sampled_from(["name", "int", "float", "bool"]), min_size=1,
                          max_size=4))
    return pl.DataFrame({f"c{i}": draw(column(kind)) for i, kind in enumerate(kinds)},
                        schema={f"c{i}": {"name": pl.String, "int": pl.Int64,
                                          "float": pl.Float64, "bool": pl.Boolean}[kind]
                                for i, kind in enumerate(kinds)})


def keys_of(frame: pl.DataFrame, draw) -> list[str]:
    return draw(st.lists(st.sampled_from(frame.columns), min_size=1, unique=True))


@settings(max_examples=300, deadline=None)
@given(frame=frames(), data=st.data())
def test_first_rows_sorted_are_polars_first_rows(frame, data):
    keys = keys_of(frame, data.draw)
    expected = first_rows(pl, frame.lazy(), keys)
    found = Table.from_polars(frame).first_rows(keys, sort=True)
    assert found.to_dicts() == expected.to_dicts()
    assert found.to_polars().schema == expected.schema  # no int turned float or bool


@settings(max_examples=300, deadline=None)
@given(frame=frames(), data=st.data())
def test_first_rows_in_order_are_polars_unique_in_order(frame, data):
    keys = keys_of(frame, data.draw)
    expected = frame.unique(keys, keep="first", maintain_order=True)
    table = Table.from_polars(frame)
    assert table.first_rows(keys, sort=False).to_dicts() == expected.to_dicts()
    assert table.unique(keys).to_dicts() == expected.select(keys).to_dicts()
    firsts, places = table.unique_index(keys)
    assert table.take(firsts).to_dicts() == expected.to_dicts()
    assert table.take(firsts[places]).select(*keys).to_dicts() == table.select(
        *keys).to_dicts()  # each row's place names its own combination


@settings(max_examples=200, deadline=None)
@given(frame=frames())
def test_a_table_round_trips_through_polars(frame):
    table = Table.from_polars(frame)
    assert table.to_polars().to_dicts() == frame.to_dicts()
    assert table.to_polars().schema == frame.schema
    assert Table.concat([table, table]).to_dicts() == pl.concat([frame, frame]).to_dicts()


@given(st.lists(st.sampled_from(NAMES)), st.lists(st.sampled_from(NAMES)))
def test_names_of_different_dictionaries_concatenate_as_their_text(first, second):
    joined = Names.concat([Names.of(first), Names.of(second)])
    assert joined.tolist() == first + second
    assert joined.names == sorted(set(first + second))
    for name in NAMES:
        assert (joined == name).tolist() == [v == name for v in first + second]


def test_a_shards_dictionary_is_renumbered_into_sorted_order():
    names = Names.coded(np.array([0, 2, 1, 0]), ["zeta", "alpha", "mid"])
    assert names.names == ["alpha", "mid", "zeta"]
    assert names.tolist() == ["zeta", "mid", "alpha", "zeta"]
    assert names[1] == "mid" and names[np.array([3, 2])].tolist() == ["zeta", "alpha"]


def test_positive_is_a_log_scales_rows():
    table = Table({"x": np.array([1.0, 0.0, -1.0, np.nan, 2.0]),
                   "n": np.array([1, 1, 1, 1, 0])})
    assert positive(table, "x").tolist() == [True, False, False, False, True]
    assert positive(table, "x", "n").tolist() == [True, False, False, False, False]


@settings(max_examples=50, deadline=None)
@given(peak=st.lists(st.floats(1e9, 1e16), min_size=1, max_size=20),
       bandwidth=st.floats(1e9, 1e13))
def test_the_ratios_a_mask_derives_equal_the_folders(peak, bandwidth):
    """`derived_columns` computes the ratio a mask tests (the ridge) as
    `results.with_derived` does, to the last bit."""
    columns = {"peak_flops": np.array(peak),
               "bandwidth_bytes_per_s": np.full(len(peak), bandwidth)}
    derived = derived_columns(columns, ["ridge"])
    expected = with_derived(pl.DataFrame(columns))
    assert derived["ridge"].tobytes() == expected["ridge"].to_numpy().tobytes()
