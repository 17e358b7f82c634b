"""`c` in the Results view: which columns the table shows, and in what order (the
table's: what varies, the headline metrics, the rest). Space shows or hides the column
under the cursor, Enter applies, Escape leaves the table as it was."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import SelectionList, Static

from rooftui.tui.results_columns import heading


class ColumnPicker(ModalScreen[list[str] | None]):
    BINDINGS = [
        Binding("enter", "apply", "Apply", id="columns-apply", priority=True),
        Binding("escape", "dismiss(None)", "Cancel", id="columns-cancel"),
    ]

    DEFAULT_CSS = """
    ColumnPicker { align: center middle; }
    #columns-body { width: 60; max-width: 90%; height: 80%; border: round $primary;
                    background: $surface; padding: 0 1; }
    #columns-list { height: 1fr; }
    #columns-help { height: 1; color: $text-muted; }
    """

    def __init__(self, columns: list[str], shown: list[str]) -> None:
        super().__init__(id="columns")
        self._columns = columns
        self._shown = set(shown)

    def compose(self) -> ComposeResult:
        def label(column: str) -> str:
            return column if heading(column) == column else f"{heading(column)} ({column})"

        with Vertical(id="columns-body"):
            yield SelectionList[str](*((label(c), c, c in self._shown) for c in self._columns),
                                     id="columns-list")
            yield Static("space: show or hide · enter: apply · escape: cancel",
                         id="columns-help")

    def action_apply(self) -> None:
        chosen = set(self.query_one(SelectionList).selected)
        self.dismiss([c for c in self._columns if c in chosen] or None)
