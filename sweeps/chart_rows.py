"""The rows of a run's charts, cut from each shard as it lands.

A step chart draws a bounded slice of the results (`chart_slices.take_slice`) whose
filters follow from the grid's axes alone: the values each shown axis keeps, the value
each other axis is held at, the menus' star rows. So `sweep run` asks each of its charts
for those filters before any shard is written (`plan_cut`), keeps the rows of each shard
that one of them draws as the shard lands (a few thousand of a million rows, read back
from the fresh file as `scan_results` reads it), and renders its charts from those rows
when the last shard lands, rather than scanning the folder once per chart. The charts
are the same: each filter looks at one row at a time, so the rows it keeps of all the
results are the rows it keeps of each shard, put together in the shards' order.

A chart whose slice needs the rows themselves (an axis the grid does not declare, a
fixed value it lacks) is not cut: it reads the folder as before, and so does
`sweep chart DIR`. Shards this run did not write (a resumed run's, another process's)
are cut from their files when the charts are rendered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rooftui.core.errors import SpecError

if TYPE_CHECKING:
    from concurrent.futures import Future

    import polars as pl


@dataclass(frozen=True)
class RowCut:
    """What to keep of each shard: the rows one of `charts` draws (`rows`, a polars
    predicate), with the columns `scan_results` gives, in its order."""

    charts: tuple[str, ...]
    rows: Any
    columns: tuple[str, ...]


@dataclass(frozen=True)
class ChartRows:
    """Every row the charts in `charts` draw, from all the shards, in order: what they
    are built from in place of the folder (`render_charts(rows=...)`)."""

    charts: tuple[str, ...]
    frame: pl.DataFrame


def plan_cut(out_dir: Path | str, names: Sequence[str] | Mapping | None = None
             ) -> RowCut | None:
    """The cut for the charts `render_charts(out_dir, names)` renders, from the folder's
    manifest (written before any shard); None when none of them can be cut."""
    import polars as pl

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
    return RowCut(tuple(drawn), pl.any_horizontal(list(drawn.values())), tuple(columns))


def cut_shard(path: Path, cut: RowCut) -> pl.DataFrame:
    """The rows of the shard file at `path` that `cut` keeps, as `scan_results` reads
    them (the derived metrics added, its columns and their order)."""
    import polars as pl

    from rooftui.sweeps.results import with_derived

    return (with_derived(pl.scan_parquet(path)).select(cut.columns).filter(cut.rows)
            .collect())


class RowCollector:
    """The cut rows of each shard as it lands (`landed`), and all of them once the
    dataset is complete (`gather`), for the charts `render_charts(out_dir, names)`
    renders; `path(index)` is shard `index`'s file. The cut is planned and each shard
    cut in a thread of its own, so that neither holds up the shards (polars, numpy and
    the parquet writer release the GIL)."""

    def __init__(self, out_dir: Path | str, names: Sequence[str] | Mapping | None,
                 path: Callable[[int], Path]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.path = path
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="chart-rows")
        self.cut = self.pool.submit(plan_cut, out_dir, names)  # first in the thread
        self.pieces: dict[int, Future] = {}

    def landed(self, index: int) -> None:
        self.pieces[index] = self.pool.submit(self._cut_shard, index)

    def _cut_shard(self, index: int) -> pl.DataFrame | None:
        cut = self.cut.result()  # planned already: the same thread ran it first
        return None if cut is None else cut_shard(self.path(index), cut)

    def discard(self) -> None:
        """Cancel the cuts not started (a run that renders no chart: the dataset is not
        complete yet, or its charts are up to date) and let the thread go."""
        self.pool.shutdown(wait=False, cancel_futures=True)

    def gather(self, shards: int) -> ChartRows | None:
        """The rows of shards 0 .. `shards` - 1, those that did not land here (a resumed
        run's, another process's) cut from their files now; None when no chart can be
        cut, or a shard could not be read (replaced or removed meanwhile by another
        process): the charts then read the folder, as `sweep chart` does."""
        import polars as pl

        for index in range(shards):
            if index not in self.pieces:
                self.landed(index)
        try:
            cut = self.cut.result()
            frames = [self.pieces[i].result() for i in range(shards)]
        except (OSError, pl.exceptions.PolarsError):
            return None
        finally:
            self.pool.shutdown()
        return None if cut is None else ChartRows(cut.charts,
                                                  pl.concat(frames, how="vertical"))
