"""`chart_marks.with_memory_note` writes each distinct input's note once and looks it up
for every row: every row must get the note the formula gives it (on every row, or on
it alone), in its place, its other columns kept (duplicates, NaN, an unknown GPU)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.sweeps.chart_marks import _memory_notes, with_memory_note
from rooftui.sweeps.chart_table import Table

GPUS = ["h100-sxm", "h200", "l40s", "no-such-gpu"]  # the last: memory unknown
SIZES = [0.0, 8e9, 16e9, 80e9, 141e9, 141.1e9, 1.1e12, 22e12, math.nan]
KINDS = {"gpu": object, "fits": bool, "weight_bytes": np.float64, "kv_bytes": np.float64,
         "memory_reserve_gb": np.float64, "tp": np.int64, "batch": np.int64}


def row():
    return st.fixed_dictionaries({
        "gpu": st.sampled_from(GPUS), "fits": st.booleans(),
        "weight_bytes": st.sampled_from(SIZES[:-1]),  # a step always has its weights
        "kv_bytes": st.sampled_from(SIZES),
        "memory_reserve_gb": st.sampled_from([0.0, 2.0, math.nan]),
        "tp": st.sampled_from([1, 2, 8]), "batch": st.integers(1, 4)})


@settings(max_examples=200, deadline=None)
@given(st.lists(row(), min_size=1, max_size=40),
       st.sets(st.sampled_from(["gpu", "memory_reserve_gb", "tp"])))
def test_each_row_gets_the_note_it_gets_alone(rows, dropped):
    data = Table({name: np.array([r[name] for r in rows], dtype=kind)
                  for name, kind in KINDS.items() if name not in dropped})
    noted = with_memory_note(data, None)
    assert noted.columns == [*data.columns, "memory"]
    for name in data.columns:
        np.testing.assert_array_equal(noted[name], data[name])
    # the note formula on every row as it stands (no distinct inputs, no lookup)
    direct = _memory_notes(data.select(*(c for c in data.columns if c != "batch")), None)
    assert noted["memory"].tolist() == direct
    alone = [with_memory_note(data.take([i]), None)["memory"][0]
             for i in range(data.height)]
    assert alone == direct
