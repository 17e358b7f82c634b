"""Large grids evaluated in cache-sized blocks of rows (used by core/step.py).

A step evaluation makes a few hundred temporary arrays the size of the grid. Past a few
tens of thousands of points they no longer stay in the CPU's caches, and a flat array of
a million configurations ran 2.6x slower per point than the same in blocks of 65,536.
`evaluate_step` therefore splits a grid of more than twice `CHUNK_POINTS` points along
its first axis, evaluates each block of rows and joins the outputs: every operation is
elementwise, so each point's numbers are the same as in one call.
"""

from __future__ import annotations

import math
from dataclasses import fields, is_dataclass, replace

import numpy as np

CHUNK_POINTS = 65_536


def _arrays(values):
    """Every array among the fields of `values` (a StepInputs), its models' included."""
    for item in fields(values):
        value = getattr(values, item.name)
        if type(value) is np.ndarray:
            yield value
        elif is_dataclass(value):
            yield from _arrays(value)


def row_blocks(inputs, tpot_budget) -> tuple[tuple[int, ...], list[slice]] | None:
    """The broadcast grid shape and its blocks of rows, or None for a grid small enough
    for one call."""
    if np.ndarray not in set(map(type, vars(inputs).values())):
        return None  # one configuration: nothing to split
    shapes = [value.shape for value in _arrays(inputs)]
    if type(tpot_budget) is np.ndarray:
        shapes.append(tpot_budget.shape)
    grid = np.broadcast_shapes(*shapes)
    if not grid or math.prod(grid) <= 2 * CHUNK_POINTS or grid[0] < 4:
        return None
    rows = max(2, CHUNK_POINTS // max(1, math.prod(grid[1:])))
    starts = list(range(0, grid[0], rows))
    if grid[0] - starts[-1] == 1:  # every block has 2 rows or more (see `evaluated_in_blocks`)
        starts.pop()
    ends = starts[1:] + [grid[0]]
    return grid, [slice(start, end) for start, end in zip(starts, ends, strict=True)]


def sliced(values, rows: slice, grid: tuple[int, ...]):
    """`values` (a StepInputs, or a field of one) at the grid's rows `rows`."""
    if type(values) is np.ndarray:
        spans_rows = values.ndim == len(grid) and values.shape[0] == grid[0]
        return values[rows] if spans_rows else values
    if not is_dataclass(values):
        return values
    return replace(values, **{item.name: sliced(getattr(values, item.name), rows, grid)
                              for item in fields(values)})


def evaluated_in_blocks(evaluate, inputs, tpot_budget, grid: tuple[int, ...],
                        rows: list[slice]) -> dict | None:
    """`evaluate(inputs, tpot_budget)` block by block, each output that spans a block's
    rows (at least 2, so never one that is constant along them) written into one array
    of the grid as soon as the block is done (the block's temporaries are then freed and
    reused by the next; holding every block to concatenate them at the end cost a
    quarter of the time at 1 M points), any other the same in every block. None where
    the blocks disagree on which outputs they have."""
    out, spanning = {}, []
    for block in rows:
        values = evaluate(sliced(inputs, block, grid), sliced(tpot_budget, block, grid))
        if not out:
            first = block.stop - block.start
            for key, value in values.items():
                if np.ndim(value) == len(grid) and np.shape(value)[0] == first:
                    out[key] = np.empty(grid[:1] + np.shape(value)[1:], np.result_type(value))
                    spanning.append(key)
                else:
                    out[key] = value
        elif values.keys() != out.keys():
            return None
        for key in spanning:
            out[key][block] = values[key]
    return out
