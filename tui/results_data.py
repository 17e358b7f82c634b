"""Queries the Results view makes of a sweep's output, lazily, so that a directory of 10⁷
rows opens at once: the row count comes from parquet metadata, a page is a `slice` of
the filtered (and sorted) scan, a plot reads a bounded sample.

This module imports polars at the top; the TUI imports it only when the Results view
opens. No Textual here: the screen drives it from worker threads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from rooftui.core.errors import SpecError
from rooftui.sweeps.charts import declared_axes
from rooftui.sweeps.grid import PARAMETERS
from rooftui.sweeps.results import read_manifest, scan_results
from rooftui.tui.results_columns import HEADLINE_METRICS
from rooftui.tui.results_query import PAGE_ROWS, PlotChoice, Query

# Input columns: one per grid parameter; one whose name a metric also uses is written
# `<name>_assumed` (see rooftui.sweeps.results).
INPUTS = frozenset(PARAMETERS) | {f"{name}_assumed" for name in PARAMETERS}
ID_COLUMNS = ("point_id",)
MAX_FILTER_VALUES = 500  # an axis with more distinct values gets no value list
PLOT_POINTS = 4000
UNREADABLE = (pl.exceptions.PolarsError, OSError)  # a damaged or vanished shard


def unreadable(directory: Path, error: Exception) -> SpecError:
    return SpecError(f"{directory}: cannot read the results: {str(error).splitlines()[0]}")


@dataclass(frozen=True)
class Page:
    offset: int
    total: int  # rows matching the query
    frame: pl.DataFrame


class ResultsData:
    """One results directory: its columns sorted into the grid's axes, labels (such as
    `bound`) and metrics; and the queries the view makes."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        # shards left out (damaged, of another spec): the view names them
        self.skipped: str | None = None
        self.frame = scan_results(directory, on_skipped=self._note_skipped)
        self.manifest = read_manifest(directory)  # scan_results has checked it
        try:
            schema = self.frame.collect_schema()
        except UNREADABLE as error:
            raise unreadable(directory, error) from None
        self.columns = list(schema.names())
        numeric = {name for name, dtype in schema.items() if dtype.is_numeric()}
        inputs = [c for c in self.columns if c in INPUTS]
        dimensions = declared_axes(self.manifest)  # tuples of axes (zipped ones share one)
        # the axes are what the grid varies, of any kind of grid (an optimize grid's
        # max_batch and token_budget too); a manifest without axes: every input column
        declared = {axis: values for dimension in dimensions or () for axis, values
                    in dimension.items()}
        self.axes = inputs if dimensions is None else [c for c in self.columns
                                                       if c in declared]
        varying = [c for c in self.axes if dimensions is None or len(declared[c]) > 1]
        # labels worth filtering and colouring by (`bound`, `fits`), without the booleans
        # `*compute_bound` that a word column (`*bound`) already says
        self.categories = [c for c in self.columns if c not in INPUTS
                           and c not in self.axes and c not in ID_COLUMNS
                           and c not in numeric
                           and not (c.endswith("compute_bound") and
                                    c.removesuffix("compute_bound") + "bound" in self.columns)]
        self.metrics = [c for c in self.columns if c in numeric and c not in INPUTS
                        and c not in self.axes and c not in ID_COLUMNS]
        self.numeric_axes = [c for c in self.axes if c in numeric]
        # the table: what varies, the headline metrics, then the other axes and the rest
        headline = [c for c in HEADLINE_METRICS if c in self.columns and c not in varying]
        first = varying + headline
        self.table_columns = first + [c for c in self.columns if c not in first
                                      and c not in ID_COLUMNS] + [
            c for c in ID_COLUMNS if c in self.columns]


    def _note_skipped(self, note: Exception) -> None:
        # the note starts with the points folder, which the view's title already names
        self.skipped = str(note).split(": ", 1)[-1]

    def default_plot(self) -> PlotChoice:
        """tokens/s against batch coloured by context, or the nearest the results allow."""
        def pick(preferred: str, options: list[str], skip: str | None = None) -> str | None:
            if preferred in options:
                return preferred
            return next((o for o in options if o != skip), None)

        x = pick("batch", self.numeric_axes or self.metrics)
        return PlotChoice(x=x, y=pick("tokens_per_s", self.metrics, skip=x),
                          colour=pick("context", [c for c in self.axes + self.categories
                                                  if c != x]))

    @property
    def profile(self) -> str | None:
        """The assumption profile the grid names (its mfu and mbu are in the rows)."""
        spec = self.manifest.get("spec")
        return spec.get("profile") if isinstance(spec, dict) else None

    def filtered(self, query: Query) -> pl.LazyFrame:
        frame = self.frame
        for column, value in query.filters.items():
            frame = frame.filter(pl.col(column) == value)
        if query.typed.strip():
            frame = frame.filter(self.typed_filter(query.typed))
        return frame

    def typed_filter(self, text: str) -> pl.Expr:
        """`text` as a SQL expression over the columns when it is one (it names a column
        and polars parses it), else: any text column contains it (any case)."""
        try:
            expression = pl.sql_expr(text)
            if set(expression.meta.root_names()) <= set(self.columns) and \
                    expression.meta.root_names():
                return expression
        except pl.exceptions.PolarsError:  # not SQL: plain text, searched for
            pass
        texts = [c for c in self.columns if c in self.categories or c in self.axes
                 and c not in self.numeric_axes]
        if not texts:
            raise SpecError(f"filter {text!r}: not an expression over the columns, and "
                            "there is no text column to search")
        pattern = "(?i)" + re.escape(text.strip())
        return pl.any_horizontal(pl.col(c).cast(pl.String).str.contains(pattern)
                                 for c in texts)

    def count(self, query: Query) -> int:
        return int(self._collect(self.filtered(query).select(pl.len())).item())

    def page(self, query: Query, offset: int, rows: int = PAGE_ROWS) -> Page:
        """Rows `offset`..`offset + rows` of the query's result (clamped to it)."""
        total = self.count(query)
        offset = max(0, min(offset, max(total - 1, 0) // rows * rows))
        frame = self.filtered(query)
        if query.sort:
            frame = frame.sort(query.sort, descending=query.descending, nulls_last=True)
        return Page(offset=offset, total=total,
                    frame=self._collect(frame.slice(offset, rows).select(self.table_columns)))

    def distinct(self, column: str) -> list[object] | None:
        """The column's values, sorted; None when there are too many to list."""
        values = self._collect(self.frame.select(
            pl.col(column).unique().head(MAX_FILTER_VALUES + 1))).to_series()
        if len(values) > MAX_FILTER_VALUES:
            return None
        return values.drop_nulls().sort().to_list()

    def plot_sample(self, query: Query, columns: list[str],
                    points: int = PLOT_POINTS) -> pl.DataFrame:
        """At most about `points` rows of `columns`, every n-th of the query's rows (a
        deterministic, evenly spread sample), without nulls."""
        total = self.count(query)
        step = max(1, -(-total // points))
        frame = self.filtered(query).select(list(dict.fromkeys(columns)))
        return self._collect(frame.gather_every(step).drop_nulls())

    def _collect(self, frame: pl.LazyFrame) -> pl.DataFrame:
        """Run a query; a shard that cannot be read is a SpecError naming the folder."""
        try:
            return frame.collect()
        except UNREADABLE as error:
            raise unreadable(self.directory, error) from None

    def row(self, page: Page, index: int) -> dict[str, object]:
        return page.frame.row(index, named=True)
