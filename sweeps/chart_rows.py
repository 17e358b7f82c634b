"""The rows of a run's charts, cut from each shard as it is computed.

A step chart draws a bounded slice of the results (`chart_slices.take_slice`) whose
filters follow from the grid's axes alone: the values each shown axis keeps, the value
each other axis is held at, the menus' star rows. So `sweep run` asks each of its charts
for those filters before any shard is written (`plan_cut`: plain data, `row_filters`),
and the worker that computes a shard keeps the rows one of them draws from the columns
it already holds (`ShardRows`: a numpy mask, since polars must not run in a forked
worker), a few thousand of a million rows that travel back with its outcome; the parent
puts them together in shard order (`RowCollector`, numpy columns: `chart_table.Table`)
and renders its charts from them when the last shard lands, rather than scanning the
folder once per chart, and without importing polars. The charts are the same: each
filter looks at one row at a time (the first rows of the intensity chart's ridge
groups excepted, see `row_filters`), so the rows it keeps of all the results are the
rows it keeps of each shard, in the shards' order.

A chart whose slice needs the rows themselves (an axis the grid does not declare, a
fixed value it lacks) is not cut: it reads the folder as before, and so does
`sweep chart DIR`. Shards whose rows did not come back (a resumed run's, another
process's, the Dask executor's) are cut from their files, with polars, in the thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rooftui.core.errors import SpecError
from rooftui.sweeps.chart_table import Names, Table, derived_columns
from rooftui.sweeps.row_filters import AnyOf, Rows

if TYPE_CHECKING:
    from concurrent.futures import Future

# a shard's kept rows as a worker sends them: its stored columns (names as codes)
Columns = dict[str, np.ndarray]


@dataclass(frozen=True)
class RowCut:
    """What to keep of each shard: the rows one of `charts` draws (`rows`, a
    `row_filters` test), with the columns `scan_results` gives, in its order."""

    charts: tuple[str, ...]
    rows: AnyOf
    columns: tuple[str, ...]


@dataclass(frozen=True)
class ChartRows:
    """Every row the charts in `charts` draw, from all the shards, in order: what they
    are built from in place of the folder (`render_charts(rows=...)`)."""

    charts: tuple[str, ...]
    table: Table


def plan_cut(out_dir: Path | str, names: Sequence[str] | Mapping | None = None
             ) -> RowCut | None:
    """The cut for the charts `render_charts(out_dir, names)` renders, from the folder's
    manifest (written before any shard); None when none of them can be cut. Imports
    neither polars nor pyarrow (a parent about to fork its workers)."""
    from rooftui.sweeps.charts import chart_plan, declared_axes
    from rooftui.sweeps.charts_step import STEP_SLICES

    manifest, settings, files = chart_plan(Path(out_dir), names, None, False, False)
    axes = declared_axes(manifest)
    columns = list(manifest.get("columns") or {})
    if manifest.get("kind", "step") != "step" or not columns:
        return None
    drawn = {}
    for name in files:
        if name not in STEP_SLICES:
            continue
        try:
            rows = STEP_SLICES[name](columns).rows(columns, fixed=settings.fixed, axes=axes,
                                                   grid=manifest)
        except SpecError:  # a fixed value the grid lacks: the render says so
            rows = None
        if rows is not None:
            drawn[name] = rows
    if not drawn:
        return None
    return RowCut(tuple(drawn), AnyOf(tuple(drawn.values())), tuple(columns))


def cut_shard(path: Path, cut: RowCut) -> Table:
    """The rows of the shard file at `path` that `cut` keeps, as `scan_results` reads
    them (the derived metrics added, its columns and their order)."""
    import polars as pl

    from rooftui.sweeps.results import with_derived

    return Table.from_polars(with_derived(pl.scan_parquet(path)).select(cut.columns)
                             .filter(cut.rows.polars(pl)).collect())


class ShardRows:
    """In the process computing a shard: the rows `cut` keeps of it, from the columns of
    each row group as it is written (`add`), numpy only. The first rows of a `whole`
    group are first in their row group too, so what each group keeps holds them, and
    the same test over those rows (`rows`) keeps what it keeps of the whole shard."""

    def __init__(self, cut: RowCut, dictionaries: Mapping[str, Sequence[str]]) -> None:
        self.cut, self.dictionaries = cut, dictionaries
        self.tested = cut.rows.columns
        self.pieces: list[Columns] = []

    def add(self, columns: Mapping[str, np.ndarray]) -> None:
        self.pieces.append(self._kept({name: columns[name] for name in self.cut.columns
                                       if name in columns}))

    def rows(self) -> Columns | None:
        """The kept rows of the shard's stored columns; None for a shard of no rows."""
        if not self.pieces:
            return None
        return self._kept({name: np.concatenate([piece[name] for piece in self.pieces])
                           for name in self.pieces[0]})

    def _kept(self, stored: Columns) -> Columns:
        rows = Rows(derived_columns(stored, self.tested), self.dictionaries)
        kept = np.flatnonzero(self.cut.rows.mask(rows))
        return {name: values[kept] for name, values in stored.items()}


def rows_table(columns: Columns, cut: RowCut, dictionaries: Mapping[str, Sequence[str]]
               ) -> Table:
    """A worker's kept rows (`ShardRows.rows`) as `cut_shard` reads them from the file:
    names as text, the derived metrics added, `cut.columns` in order."""
    names = {name: Names.coded(values, dictionaries[name]) if name in dictionaries
             else values for name, values in columns.items()}
    found = derived_columns(names, cut.columns)
    return Table((name, found[name]) for name in cut.columns)


class RowCollector:
    """The cut rows of each shard as it lands (`landed`), and all of them once the
    dataset is complete (`gather`), for the charts `render_charts(out_dir, names)`
    renders; `path(index)` is shard `index`'s file and `dictionaries` the names its
    codes stand for. The cut is planned at once (`cut`, for the workers); reading the
    Vega bundle and the cuts of shard files (polars) are left to one thread of their
    own, started by `start` once the workers are forked (two threads importing one
    package could meet a circular import, and a fork while a thread imports would leave
    the child the half-imported package). The workers' rows become one table when
    gathered."""

    def __init__(self, out_dir: Path | str, names: Sequence[str] | Mapping | None,
                 path: Callable[[int], Path],
                 dictionaries: Mapping[str, Sequence[str]] | None = None) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.path, self.dictionaries = path, dictionaries or {}
        self.cut = plan_cut(out_dir, names)
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="chart-rows")
        self.warmed: Future | None = None
        # a worker's kept rows as they came, else the future of the cut of its file
        self.pieces: dict[int, Columns | Future] = {}

    def start(self) -> None:
        """Read the Vega bundle in the thread (while the shards are computed); a failure
        there is left to the render, which says what went wrong."""
        if self.warmed is None:
            self.warmed = self.pool.submit(_warm_up)

    def landed(self, index: int, rows: Columns | None = None) -> None:
        """Shard `index` is complete; `rows`: what its worker kept of it (`ShardRows`),
        else it is cut from its file."""
        self.start()
        if self.cut is not None:
            self.pieces[index] = rows if rows is not None else self.pool.submit(
                cut_shard, self.path(index), self.cut)

    def discard(self) -> None:
        """Cancel the cuts not started (a run that renders no chart: the dataset is not
        complete yet, or its charts are up to date) and let the thread go."""
        self.pool.shutdown(wait=False, cancel_futures=True)

    def gather(self, shards: int) -> ChartRows | None:
        """The rows of shards 0 .. `shards` - 1, those that did not land here (a resumed
        run's, another process's) cut from their files now; None when no chart can be
        cut, or a shard could not be read (replaced or removed meanwhile by another
        process): the charts then read the folder, as `sweep chart` does."""
        if self.cut is None:
            self.pool.shutdown()
            return None
        for index in range(shards):
            if index not in self.pieces:
                self.landed(index)
        self.start()
        self.warmed.result()
        tables, kept = [], []  # the workers' rows made one table per run of shards
        try:
            for index in range(shards):
                piece = self.pieces[index]
                if isinstance(piece, dict):
                    kept.append(piece)
                    continue
                if kept:
                    tables.append(self._table(kept))
                    kept = []
                tables.append(_cut_result(piece))
        except OSError:
            return None
        finally:
            self.pool.shutdown()
        if kept:
            tables.append(self._table(kept))
        return ChartRows(self.cut.charts, Table.concat(tables)) if tables else None

    def _table(self, pieces: list[Columns]) -> Table:
        return rows_table({name: np.concatenate([piece[name] for piece in pieces])
                           for name in pieces[0]}, self.cut, self.dictionaries)


def _cut_result(piece: Future) -> Table:
    """A shard file's cut; a file polars cannot read (replaced or removed meanwhile) as
    OSError."""
    import polars as pl  # imported by the thread that cut it

    try:
        return piece.result()
    except pl.exceptions.PolarsError as error:
        raise OSError(str(error)) from error


def _warm_up() -> None:
    from rooftui.sweeps.chart_files import warm_up

    warm_up()
