"""The Results view of a `sweep run` output directory: a lazy table, filters, sort, a plot
of any metric against any axis, and Enter on a row to open it in the Explorer.

Only one page of rows (100) is ever read for the table, and at most a few thousand
sampled rows for the plot; both in worker threads, exclusive per kind, each result tagged
with the request's generation so a stale one is dropped. A worker's failure (an unreadable
shard, a bug) comes back as a message that the view shows; the app keeps running.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Input, Select, Static, Tab, Tabs

from rooftui.core import units
from rooftui.core.errors import SpecError
from rooftui.core.point import point_report
from rooftui.tui.failures import failure_text
from rooftui.tui.keys import LEAVE_FIELD, KeyboardScreen
from rooftui.tui.results_columns import cell, heading
from rooftui.tui.results_query import PAGE_ROWS, PlotChoice, Query
from rooftui.tui.settings import ExplorerSettings
from rooftui.tui.widgets.footer import CoalescingFooter
from rooftui.tui.widgets.results_controls import ResultsControls
from rooftui.tui.widgets.results_plot import ResultsPlot

if TYPE_CHECKING:
    from rooftui.tui.results_data import Page, ResultsData

PANELS = (("results-table", "Table"), ("results-plot", "Plot"))
WIDE_COLUMNS, WIDE_ROWS = 140, 36
NARROW_COLUMNS = 100  # below, the sidebar hides until `f`: the table needs the width


PAGE_KEYS = Binding.Group("page", compact=True)  # n next, p previous


class ResultsScreen(KeyboardScreen):
    BINDINGS = [
        Binding("o", "open_row", "Open", id="open-row"),
        Binding("n", "page(1)", "Next page", id="next-page", group=PAGE_KEYS),
        Binding("p", "page(-1)", "Previous page", id="previous-page", group=PAGE_KEYS),
        Binding("s", "sort_cursor_column", "Sort", id="sort",
                tooltip="Sort by the column under the cursor; again: the other way"),
        Binding("slash", "typed_filter", "Filter", id="typed-filter",
                tooltip="Filter by an expression (batch >= 64 and bound = 'compute') "
                        "or by text any text column contains"),
        Binding("c", "pick_columns", "Columns", id="results-columns",
                tooltip="Choose the columns the table shows"),
        Binding("v", "next_panel", "View", id="results-next-view"),
        Binding("f", "toggle_sidebar", "Filters", id="results-filters",
                tooltip="Show or hide the filters, sort and plot choices (a narrow "
                        "terminal hides them, for the table's columns)"),
        Binding("e", "export", "Export", id="results-export"),
        Binding("escape", "explorer", "Explorer", id="explorer"),
        LEAVE_FIELD,
    ]

    class PageLoaded(Message):
        def __init__(self, generation: int, page: Page) -> None:
            super().__init__()
            self.generation = generation
            self.page = page

    class PlotLoaded(Message):
        def __init__(self, generation: int, sample, total: int) -> None:
            super().__init__()
            self.generation = generation
            self.sample = sample  # a polars DataFrame
            self.total = total

    class ReadFailed(Message):
        """A query the results could not answer (an unreadable shard, a bug): said, not
        raised."""

        def __init__(self, reason: str) -> None:
            super().__init__()
            self.reason = reason

    class ValuesLoaded(Message):
        def __init__(self, column: str, values: list[object] | None) -> None:
            super().__init__()
            self.column = column
            self.values = values

    class Opened(Message):
        def __init__(self, data) -> None:
            super().__init__()
            self.data = data  # a ResultsData

    class OpenFailed(Message):
        def __init__(self, reason: str) -> None:
            super().__init__()
            self.reason = reason

    def __init__(self, directory: Path, *, hires: str = "halfblock") -> None:
        super().__init__(id="results")
        self.directory = directory
        self.data: ResultsData | None = None  # once opened (polars loads then, in a worker)
        self.page: Page | None = None
        self._columns: list[str] = []  # the table's, in order (`c` chooses)
        self.plot_sample = None
        self._hires = hires
        self._generation = {"page": 0, "plot": 0}
        self._offset = 0
        self._panel = PANELS[0][0]
        self._opening = False  # the first page is on its way: the rest waits for it

    def compose(self) -> ComposeResult:
        yield Horizontal(id="results-body")
        yield CoalescingFooter()

    def on_mount(self) -> None:
        self.query_one("#results-body").mount(
            Static(f"opening {self.directory}…", id="results-opening"))
        self._open()

    @work(thread=True, group="results-open")
    def _open(self) -> None:
        from rooftui.tui.results_data import ResultsData

        try:
            self.post_message(self.Opened(ResultsData(self.directory)))
        except Exception as error:  # said in place: an escaping one would end the app
            self.post_message(self.OpenFailed(failure_text(error)))

    def on_results_screen_open_failed(self, message: OpenFailed) -> None:
        self.query_one("#results-opening", Static).update(Text(message.reason, style="red"))

    async def on_results_screen_opened(self, message: Opened) -> None:
        data = self.data = message.data
        body = self.query_one("#results-body")
        await body.remove_children()
        # a cell cursor: `s` sorts by the column under it, Enter opens its row
        table = DataTable(id="results-table", cursor_type="cell", zebra_stripes=True)
        await body.mount(
            ResultsControls(
                filters=data.axes + data.categories, axes=data.numeric_axes or data.metrics,
                metrics=data.metrics, colours=data.axes + data.categories,
                sortable=data.table_columns, plot=data.default_plot(), id="results-controls"),
            Vertical(
                Static(self.directory.name, id="results-status"),
                Input(placeholder="/ filter: batch >= 64 and bound = 'compute', or text",
                      compact=True, id="results-filter"),
                Tabs(*(Tab(label, id=f"tab-{name}") for name, label in PANELS),
                     id="results-tabs"),
                Container(table, ResultsPlot(hires=self._hires, id="results-plot"),
                          id="results-panels"),
                id="results-main"))
        self._columns = list(data.table_columns)
        for column in self._columns:
            table.add_column(heading(column), key=column)
        self._show_panel(self._panel)
        table.focus()
        self.refresh_bindings()
        # the first page before anything else that reads the rows: the plot's sample
        # and the filters' values wait for it (on two cores they would share its time)
        self._opening = True
        self._request_page()

    def on_resize(self) -> None:
        self.set_class(self.size.width >= WIDE_COLUMNS and self.size.height >= WIDE_ROWS,
                       "-wide")
        self.set_class(self.size.width < NARROW_COLUMNS, "-narrow")
        self.refresh_bindings()

    def action_toggle_sidebar(self) -> None:
        self.toggle_class("-sidebar")
        if self.has_class("-sidebar"):
            self.query_one(ResultsControls).query(Select).first().focus()
        else:
            self.query_one(DataTable).focus()

    # --- loading ----------------------------------------------------------------------
    def refresh_results(self) -> None:
        """Reload the page and the plot for the sidebar's current choice."""
        self._request_page()
        self._request_plot()

    def _request_plot(self) -> None:
        query, plot = self.query_one(ResultsControls).choice
        self._generation["plot"] += 1
        self._load_plot(query, plot, self._generation["plot"])

    def _request_page(self) -> None:
        self._generation["page"] += 1
        query, _ = self.query_one(ResultsControls).choice
        self._status(f"loading rows {self._offset + 1:,}…")
        self._load_page(query, self._offset, self._generation["page"])

    @work(thread=True, exclusive=True, group="results-page")
    def _load_page(self, query: Query, offset: int, generation: int) -> None:
        try:
            self.post_message(self.PageLoaded(generation, self.data.page(query, offset)))
        except Exception as error:
            self.post_message(self.ReadFailed(failure_text(error)))

    @work(thread=True, exclusive=True, group="results-plot")
    def _load_plot(self, query: Query, plot: PlotChoice, generation: int) -> None:
        if plot.x is None or plot.y is None:
            return
        columns = [plot.x, plot.y] + ([plot.colour] if plot.colour else [])
        try:
            sample = self.data.plot_sample(query, columns)
            self.post_message(self.PlotLoaded(generation, sample, self.data.count(query)))
        except Exception as error:
            self.post_message(self.ReadFailed(failure_text(error)))

    @work(thread=True, group="results-values")
    def _load_values(self) -> None:
        """Each filter's values, one column at a time (each a scan of one column)."""
        try:
            for column in self.data.axes + self.data.categories:
                self.post_message(self.ValuesLoaded(column, self.data.distinct(column)))
        except Exception as error:
            self.post_message(self.ReadFailed(failure_text(error)))

    def on_results_screen_page_loaded(self, message: PageLoaded) -> None:
        if message.generation != self._generation["page"]:
            return
        page = self.page = message.page
        self._offset = page.offset
        table = self.query_one(DataTable)
        cursor_column = table.cursor_column  # `s` again on the same column flips the order
        table.clear()
        # rich Text cells: plain strings would be parsed as markup, 5,000 times a page
        shown = page.frame.select(self._columns)
        table.add_rows([tuple(Text(cell(v, column), justify="right"
                                   if isinstance(v, int | float) else "left")
                              for v, column in zip(row, self._columns, strict=True))
                        for row in shown.iter_rows()])
        # measure the columns now rather than when the table next idles, so the first
        # frame of a page already shows whole cells (and every screenshot is the same)
        table._require_update_dimensions = False
        new_rows, table._new_rows = table._new_rows, set()
        table._update_dimensions(new_rows)
        table.move_cursor(row=0, column=cursor_column, animate=False)
        self._status_for(page)
        if self._opening:
            self._opening = False
            self._request_plot()
            self._load_values()

    def on_results_screen_plot_loaded(self, message: PlotLoaded) -> None:
        if message.generation != self._generation["plot"]:
            return
        first = self.plot_sample is None
        self.plot_sample = message.sample
        if first:
            self.refresh_bindings()  # export is enabled from the first sample on
        _, plot = self.query_one(ResultsControls).choice
        sample = message.sample
        colours = sample[plot.colour].to_list() if plot.colour else None
        self.query_one(ResultsPlot).draw(
            sample[plot.x].to_numpy().astype(np.float64),
            sample[plot.y].to_numpy().astype(np.float64), colours,
            x=plot.x, y=plot.y, colour=plot.colour, total=message.total)

    def on_results_screen_read_failed(self, message: ReadFailed) -> None:
        self.query_one("#results-status", Static).update(Text.assemble(
            (self.directory.name, "bold"), " · ", (message.reason, "red")))

    def on_results_screen_values_loaded(self, message: ValuesLoaded) -> None:
        self.query_one(ResultsControls).set_values(message.column, message.values)

    def on_results_controls_changed(self, message: ResultsControls.Changed) -> None:
        self._offset = 0
        self.refresh_results()

    def _status(self, text: str) -> None:
        self.query_one("#results-status", Static).update(
            Text.assemble((self.directory.name, "bold"), f" · {text}"))

    def _status_for(self, page: Page) -> None:
        query, _ = self.query_one(ResultsControls).choice
        if page.total == 0:
            shown = "no rows match"
        else:
            last = page.offset + page.frame.height
            shown = f"rows {page.offset + 1:,}–{last:,} of {page.total:,}"
        details = [shown]
        if query.sort:
            details.append(f"sorted by {query.sort} {'↓' if query.descending else '↑'}")
        if query.filters:
            details.append(", ".join(f"{k} = {cell(v)}" for k, v in query.filters.items()))
        if query.typed.strip():
            details.append(f"/ {query.typed.strip()}")
        if self.data is not None and self.data.skipped:
            details.append(self.data.skipped)  # never read as data, and said so
        self._status(" · ".join(details))

    # --- actions ------------------------------------------------------------------------
    def action_page(self, step: int) -> None:
        if self.page is None:
            return
        offset = self._offset + step * PAGE_ROWS
        if 0 <= offset < self.page.total:
            self._offset = offset
            self._request_page()

    def action_sort_cursor_column(self) -> None:
        table = self.query_one(DataTable)
        if table.columns:
            self._sort_by(self._columns[table.cursor_column])

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        self._sort_by(str(event.column_key.value))

    def _sort_by(self, column: str) -> None:
        self.query_one(ResultsControls).sort_by(column)

    def on_data_table_cell_selected(self, event: DataTable.CellSelected) -> None:
        self.open_row(event.coordinate.row)

    def action_pick_columns(self) -> None:
        from rooftui.tui.screens.columns import ColumnPicker

        self.app.push_screen(ColumnPicker(self.data.table_columns, self._columns),
                             callback=self._show_columns)

    def _show_columns(self, columns: list[str] | None) -> None:
        """The table with `columns` (None: as it was); the page is drawn again."""
        if not columns or columns == self._columns:
            return
        self._columns = columns
        table = self.query_one(DataTable)
        table.clear(columns=True)
        for column in columns:
            table.add_column(heading(column), key=column)
        if self.page is not None:
            self.post_message(self.PageLoaded(self._generation["page"], self.page))

    def action_typed_filter(self) -> None:
        self.query_one("#results-filter", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """The typed filter applies on Enter (blank: none); the keys go back to the
        table."""
        event.input.set_class(bool(event.value.strip()), "-filtering")
        self.query_one(ResultsControls).filter_by(event.value)
        self.query_one(DataTable).focus()

    def action_open_row(self) -> None:
        self.open_row(self.query_one(DataTable).cursor_row)

    def open_row(self, index: int) -> None:
        """Open row `index` of the page in the Explorer, as settings it can change."""
        if self.page is None or not 0 <= index < self.page.frame.height:
            return
        row = self.data.row(self.page, index)
        try:
            settings = ExplorerSettings.from_row(row, profile=self.data.profile)
            report = point_report(settings.config())
        except SpecError as error:
            self.notify(f"cannot open this row: {error}", severity="error")
            return
        if "step_time_s" in row and not math.isclose(report["step_time_s"],
                                                     row["step_time_s"], rel_tol=1e-9):
            # the row used an input the Explorer has no control for (e.g. compute dtype)
            self.notify("the Explorer cannot set every input of this row: its step time "
                        f"is {units.seconds(report['step_time_s'])}, the sweep's "
                        f"{units.seconds(row['step_time_s'])}", severity="warning")
        self.app.open_in_explorer(settings)

    def action_explorer(self) -> None:
        self.app.show_explorer()

    def action_next_panel(self) -> None:
        names = [name for name, _ in PANELS]
        following = names[(names.index(self._panel) + 1) % len(names)]
        self.query_one("#results-tabs", Tabs).active = f"tab-{following}"

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        self._show_panel(event.tab.id.removeprefix("tab-"))

    def _show_panel(self, name: str) -> None:
        self._panel = name
        for panel, _ in PANELS:
            self.query_one(f"#{panel}").set_class(panel == name, "-shown")
        if name == "results-table":
            self.query_one(DataTable).focus()  # arrows and `o` act on the rows again

    def home_widget(self):
        """Escape from a sidebar field goes back to the table (arrows, `o`, `s`)."""
        return self.query_one(DataTable) if self.data is not None else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "leave_field":
            return super().check_action(action, parameters)
        if self.data is None and action != "explorer":
            return None  # shown, disabled, until the results are open
        if action == "next_panel":
            return not self.has_class("-wide")
        if action == "toggle_sidebar":
            return self.has_class("-narrow")
        if action == "export":
            return self.plot_sample is not None or None
        return super().check_action(action, parameters)

    def action_export(self) -> None:
        query, plot = self.query_one(ResultsControls).choice
        self._export(self.plot_sample, query, plot)

    @work(thread=True, group="export")
    def _export(self, sample, query: Query, plot: PlotChoice) -> None:
        from rooftui.tui.export import export_results
        from rooftui.tui.widgets.results_plot import wants_log

        where = ", ".join(f"{k} = {cell(v)}" for k, v in query.filters.items())
        try:
            path = export_results(
                sample, x=plot.x, y=plot.y, colour=plot.colour,
                log_x=wants_log(sample[plot.x].to_numpy().astype(np.float64)),
                log_y=wants_log(sample[plot.y].to_numpy().astype(np.float64)),
                title=f"{plot.y} vs {plot.x} · {self.directory.name}"
                      + (f" · {where}" if where else ""),
                output_dir=self.app.output_dir)
        except Exception as error:  # a full disk, a read-only folder: said, not raised
            self.app.call_from_thread(self.notify, f"export failed: {failure_text(error)}",
                                      severity="error")
            return
        self.app.call_from_thread(self.notify, f"exported {path}", title="Export")
