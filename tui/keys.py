"""Keys every screen offers. Screens list them first so that the footer shows them first:
at 80 columns the footer cannot show every binding, and quit and help must stay visible
(the rest are all in the command palette, ctrl+p, and in the help)."""

from __future__ import annotations

from textual.binding import Binding

COMMON_BINDINGS = [
    Binding("q", "app.quit", "Quit", id="quit"),
    Binding("question_mark,f1", "app.help", "Help", id="help"),
]
