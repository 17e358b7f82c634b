"""A chart slice's row filters as plain data: a small tree of column tests that becomes a
polars predicate (`polars`, what `take_slice` and `sweep chart DIR` filter with) or a
numpy mask over a shard's columns (`mask`, what a `sweep run` worker keeps of the shard
it has just computed, where polars must not run: a forked child deadlocks in polars
once the parent has used its thread pool).

The two agree row for row (a property test): numbers compare as polars compares them
(NaN equals NaN); a name column is the shard's int32 codes into its dictionary; a test
against each model's own value (`Own`) is null for a model without one, which the
mask counts as false: no test negates another, so a row passes the same tests either
way. `FirstDistinct` (the first row of each combination) looks across the rows: it is
only ever one arm of an `AnyOf`, so the first rows of a shard are among the rows each
of its row groups keeps (see `chart_rows.ShardRows`).

numpy and the standard library only: importing this module is cheap in a worker.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Rows:
    """A shard's columns as a mask reads them: numbers as they are, names as codes into
    `dictionaries[column]`. Each test's mask is kept (`tested`): the charts' filters
    share most of their tests."""

    columns: Mapping[str, np.ndarray]
    dictionaries: Mapping[str, Sequence[str]]
    tested: dict = field(default_factory=dict)

    @property
    def length(self) -> int:
        return len(next(iter(self.columns.values())))

    def equal(self, name: str, value: Any) -> np.ndarray:
        """`column == value` as polars compares (NaN equals NaN)."""
        return self.within(name, (value,))

    def within(self, name: str, values: Sequence) -> np.ndarray:
        """`column.is_in(values)` as polars tests it."""
        key = (name, tuple(values))
        if key not in self.tested:
            self.tested[key] = self._within(self.columns[name], name, values)
        return self.tested[key]

    def _within(self, column: np.ndarray, name: str, values: Sequence) -> np.ndarray:
        if name in self.dictionaries:
            names = self.dictionaries[name]
            table = np.fromiter((text in values for text in names), bool, len(names))
            return table[column]  # a code's answer looked up, for any number of names
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        found = reduce(np.logical_or, (column == v for v in numbers),
                       np.zeros(len(column), bool))
        if column.dtype.kind == "f" and any(isinstance(v, float) and math.isnan(v)
                                            for v in numbers):
            found = found | np.isnan(column)
        return found


@dataclass(frozen=True)
class Own:
    """Each model's own value of a structure axis (`pairs`: model, value), null for any
    other model: a chain of comparisons, a tenth of the cost of mapping the names in
    polars (the Categorical cast to strings first)."""

    pairs: tuple[tuple[str, Any], ...]

    def polars(self, pl):
        (model, value), *others = self.pairs
        chain = pl.when(pl.col("model") == model).then(pl.lit(value))
        for model, value in others:
            chain = chain.when(pl.col("model") == model).then(pl.lit(value))
        return chain.otherwise(None)


@dataclass(frozen=True)
class Within:
    """The representative of `axis` (its `rule`, see `chart_slices.REPRESENTATIVE`) within
    each combination of the `over` columns: a window over the rows, for a frame read
    without its grid's axes; never a per-shard mask (`SliceRequest.rows` plans none)."""

    axis: str
    rule: str
    over: tuple[str, ...]

    def polars(self, pl):
        column = pl.col(self.axis)
        if self.rule == "bf16":
            pick = pl.when((column == "bf16").any()).then(pl.lit("bf16")).otherwise(
                column.min())
        else:
            pick = {"min": column.min(), "first": column.first(), "max": column.max()}.get(
                self.rule, column.unique().sort().get((column.n_unique() - 1) // 2))
        return pick.over(list(self.over))


@dataclass(frozen=True)
class Compare:
    """`column == value` (`equal`) or `!=`; `value` a number or name, or `Own`."""

    column: str
    value: Any
    equal: bool = True

    @property
    def columns(self) -> set[str]:
        return {self.column} | ({"model"} if isinstance(self.value, Own) else set())

    def polars(self, pl):
        value = self.value.polars(pl) if isinstance(self.value, Own | Within) else self.value
        column = pl.col(self.column)
        return column == value if self.equal else column != value

    def mask(self, rows: Rows) -> np.ndarray:
        if self not in rows.tested:  # the charts share most of their tests
            rows.tested[self] = self._mask(rows)
        return rows.tested[self]

    def _mask(self, rows: Rows) -> np.ndarray:
        if isinstance(self.value, Within):
            raise ValueError("a window over the rows has no per-row mask")
        if not isinstance(self.value, Own):
            same = rows.equal(self.column, self.value)
            return same if self.equal else ~same
        found = np.zeros(rows.length, bool)
        seen = np.zeros(rows.length, bool)  # the chain's first matching model decides
        for model, value in self.value.pairs:
            hit = rows.equal("model", model) & ~seen
            same = rows.equal(self.column, value)
            found |= hit & (same if self.equal else ~same)
            seen |= hit
        return found


@dataclass(frozen=True)
class IsIn:
    column: str
    values: tuple

    @property
    def columns(self) -> set[str]:
        return {self.column}

    def polars(self, pl):
        return pl.col(self.column).is_in(list(self.values))

    def mask(self, rows: Rows) -> np.ndarray:
        return rows.within(self.column, self.values)


@dataclass(frozen=True)
class _Parts:
    parts: tuple

    @property
    def columns(self) -> set[str]:
        return set().union(*(part.columns for part in self.parts))


@dataclass(frozen=True)
class All(_Parts):
    """Rows where every part holds (no part: every row)."""

    def polars(self, pl):
        return pl.all_horizontal([p.polars(pl) for p in self.parts]) if self.parts \
            else pl.lit(True)

    def mask(self, rows: Rows) -> np.ndarray:
        kept = np.ones(rows.length, bool)
        for part in self.parts:
            kept &= part.mask(rows)
        return kept


@dataclass(frozen=True)
class AnyOf(_Parts):
    """Rows where one of the parts holds."""

    def polars(self, pl):
        return pl.any_horizontal([p.polars(pl) for p in self.parts])

    def mask(self, rows: Rows) -> np.ndarray:
        kept = np.zeros(rows.length, bool)
        for part in self.parts:
            kept |= part.mask(rows)
        return kept


@dataclass(frozen=True)
class Count(_Parts):
    """Rows where between `low` and `high` of `parts` hold (a null part counts as
    false, as polars' sum ignores it)."""

    low: int
    high: int

    def polars(self, pl):
        total = pl.sum_horizontal([p.polars(pl).cast(pl.Int32) for p in self.parts])
        return total == self.low if self.low == self.high else (
            (total >= self.low) & (total <= self.high))

    def mask(self, rows: Rows) -> np.ndarray:
        total = np.zeros(rows.length, np.uint16)  # a count of a chart's menus: two bytes a row
        for part in self.parts:
            total += part.mask(rows)
        return total == self.low if self.low == self.high else (
            (total >= self.low) & (total <= self.high))


@dataclass(frozen=True)
class FirstDistinct:
    """The first row of each combination of `group`'s values."""

    group: tuple[str, ...]

    @property
    def columns(self) -> set[str]:
        return set(self.group)

    def polars(self, pl):
        return pl.struct(list(self.group)).is_first_distinct()

    def mask(self, rows: Rows) -> np.ndarray:
        # a combination's first row differs from the row before it: only the rows where
        # a column changes (a grid's axes change slowly along its points) are sorted
        changed = np.zeros(rows.length, bool)
        changed[:1] = True
        for name in self.group:
            column = rows.columns[name]
            changed[1:] |= column[1:] != column[:-1]  # NaN after NaN too: sorted below
        where = np.flatnonzero(changed)
        key = combination_keys([
            (rows.columns[name][where], len(rows.dictionaries[name])
             if name in rows.dictionaries else None)  # names: their codes already are
            for name in self.group])
        kept = np.zeros(rows.length, bool)
        kept[where[np.unique(key, return_index=True)[1]]] = True
        return kept


def combination_keys(columns: Sequence[tuple[np.ndarray, int | None]]) -> np.ndarray:
    """One integer per row naming its combination of the columns' values, each column
    given as (codes, how many codes there are), or (values, None) to be numbered here
    (NaN as one value)."""
    key, size = np.zeros(len(columns[0][0]), np.int64), 1
    for values, count in columns:  # one number per combination so far
        if count is None:
            distinct, codes = np.unique(values, return_inverse=True)
            count = len(distinct)
        else:
            codes = values.astype(np.int64)
        if size * count >= 1 << 62:  # renumbered before it could overflow
            distinct, key = np.unique(key, return_inverse=True)
            size = len(distinct)
        key, size = key * count + codes, size * max(count, 1)
    return key
