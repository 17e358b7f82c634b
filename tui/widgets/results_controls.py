"""The Results view's sidebar: a value filter per axis, the sort, and what the plot shows.

Each filter starts as "all" and gets its values once a worker has read them (a scan of
one column); every change of the choice posts `ResultsControls.Changed` with all of it.
"""

from __future__ import annotations

from dataclasses import replace

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Label, Select, Static

from rooftui.tui.results_query import PlotChoice, Query
from rooftui.tui.widgets.controls import CONTROLS

# the Explorer's short names for the columns that are its controls (they fit the label)
LABELS = {spec.key: spec.label for spec in CONTROLS}

ALL = "all"


def _value_label(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}" if isinstance(
        value, float) else str(value)


def _id(prefix: str, column: str) -> str:
    return f"{prefix}-{column.replace('_', '-')}"


class ResultsControls(VerticalScroll, can_focus=False):
    class Changed(Message):
        def __init__(self, query: Query, plot: PlotChoice) -> None:
            super().__init__()
            self.query = query
            self.plot = plot

    def __init__(self, *, filters: list[str], axes: list[str], metrics: list[str],
                 colours: list[str], sortable: list[str], plot: PlotChoice,
                 id: str | None = None) -> None:
        super().__init__(id=id)
        self._filters = filters
        self._axes, self._metrics, self._colours = axes, metrics, colours
        self._sortable = sortable
        self._query = Query()
        self._plot = plot

    def compose(self) -> ComposeResult:
        yield Static("[b]filter[/b]", classes="section")
        for column in self._filters:
            with Horizontal(classes="control-row"):
                yield Label(LABELS.get(column, column), classes="control-label")
                yield Select([(ALL, ALL)], value=ALL, allow_blank=False, compact=True,
                             id=_id("filter", column), tooltip=f"Show only this {column}")
        yield Static("[b]sort[/b]", classes="section")
        with Horizontal(classes="control-row"):
            yield Label("by", classes="control-label")
            yield Select([("file order", ALL)] + [(c, c) for c in self._sortable], value=ALL,
                         allow_blank=False, compact=True, id="sort-column")
        with Horizontal(classes="control-row"):
            yield Label("order", classes="control-label")
            yield Select([("ascending", False), ("descending", True)], value=False,
                         allow_blank=False, compact=True, id="sort-order")
        yield Static("[b]plot[/b]", classes="section")
        for key, label, columns in (("y", "metric", self._metrics), ("x", "vs axis", self._axes)):
            with Horizontal(classes="control-row"):
                yield Label(label, classes="control-label")
                yield Select([(c, c) for c in columns], value=getattr(self._plot, key),
                             allow_blank=False, compact=True, id=f"plot-{key}")
        with Horizontal(classes="control-row"):
            yield Label("colour", classes="control-label")
            yield Select([("none", ALL)] + [(c, c) for c in self._colours],
                         value=self._plot.colour or ALL, allow_blank=False, compact=True,
                         id="plot-colour")

    def set_values(self, column: str, values: list[object] | None) -> None:
        """The values a filter offers (None: too many to list, the filter stays 'all')."""
        select = self.query_one(f"#{_id('filter', column)}", Select)
        with select.prevent(Select.Changed):
            select.set_options([(ALL, ALL)] + [(_value_label(v), v) for v in values or []])
            select.value = self._query.filters.get(column, ALL)
        select.disabled = values is None

    def sort_by(self, column: str) -> None:
        """Sort by `column`; sorting by the same column again flips the order."""
        descending = (not self._query.descending) if self._query.sort == column else False
        with self.prevent(Select.Changed):
            self.query_one("#sort-column", Select).value = column
            self.query_one("#sort-order", Select).value = descending
        self._query = replace(self._query, sort=column, descending=descending)
        self.post_message(self.Changed(self._query, self._plot))

    def filter_by(self, typed: str) -> None:
        """The typed filter (`Query.typed`)."""
        self._query = replace(self._query, typed=typed)
        self.post_message(self.Changed(self._query, self._plot))

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        before = self.choice
        select_id = event.select.id or ""
        value = None if event.value == ALL else event.value
        if select_id.startswith("filter-"):
            column = self._filters[[_id("filter", c) for c in self._filters].index(select_id)]
            self._query = self._query.with_filter(column, value)
        elif select_id == "sort-column":
            self._query = replace(self._query, sort=value)
        elif select_id == "sort-order":
            self._query = replace(self._query, descending=bool(event.value))
        elif select_id == "plot-colour":
            self._plot = replace(self._plot, colour=value)
        elif select_id in ("plot-x", "plot-y"):
            key = select_id.removeprefix("plot-")
            self._plot = replace(self._plot, **{key: event.value})
        # a select also says Changed when set to the value it holds (its options filled
        # in, a screen mounted): each would reload the page and the plot for nothing
        if self.choice != before:
            self.post_message(self.Changed(self._query, self._plot))

    @property
    def choice(self) -> tuple[Query, PlotChoice]:
        return self._query, self._plot
