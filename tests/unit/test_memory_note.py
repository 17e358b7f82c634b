"""`chart_marks.with_memory_note` writes each distinct input's note once and joins it
back: every row must get the note the formula gives it (on every row, or on it alone),
in its place, its other columns kept (duplicates, nulls, NaN, an unknown GPU)."""

from __future__ import annotations

import math

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.sweeps.chart_marks import _memory_notes, with_memory_note

GPUS = ["h100-sxm", "h200", "l40s", "no-such-gpu"]  # the last: memory unknown
SIZES = [0.0, 8e9, 16e9, 80e9, 141e9, 141.1e9, 1.1e12, 22e12, math.nan, None]


def row():
    return st.fixed_dictionaries({
        "gpu": st.sampled_from(GPUS), "fits": st.booleans(),
        "weight_bytes": st.sampled_from(SIZES[:-2]),  # a step always has its weights
        "kv_bytes": st.sampled_from(SIZES),
        "memory_reserve_gb": st.sampled_from([0.0, 2.0, None]),
        "tp": st.sampled_from([1, 2, 8, None]), "batch": st.integers(1, 4)})


@settings(max_examples=200, deadline=None)
@given(st.lists(row(), min_size=1, max_size=40),
       st.sets(st.sampled_from(["gpu", "memory_reserve_gb", "tp"])), st.sampled_from(GPUS))
def test_each_row_gets_the_note_it_gets_alone(rows, dropped, held_gpu):
    data = pl.DataFrame(rows, schema={"gpu": pl.String, "fits": pl.Boolean,
                                      "weight_bytes": pl.Float64, "kv_bytes": pl.Float64,
                                      "memory_reserve_gb": pl.Float64, "tp": pl.Int64,
                                      "batch": pl.Int64}).drop(dropped)
    noted = with_memory_note(pl, data, None, gpu=held_gpu)
    assert noted.columns == [*data.columns, "memory"]
    assert noted.drop("memory").equals(data)
    # the note formula on every row as it stands (no distinct inputs, no join)
    inputs = [c for c in data.columns if c != "batch"]
    direct = _memory_notes(pl, data.select(inputs), None, held_gpu)["memory"].to_list()
    assert noted["memory"].to_list() == direct
    alone = [with_memory_note(pl, data[i:i + 1], None, gpu=held_gpu)["memory"][0]
             for i in range(data.height)]
    assert alone == direct
