"""Keys every screen offers, and how a screen gives the keys back from a field.

Screens derive from `KeyboardScreen` and list their own bindings after these, so that the
footer shows these first: at 80 columns the footer cannot show every binding, and quit,
help and (while a field has focus) how to leave it must stay visible. The rest are all in
the command palette, ctrl+p, and in the help.

A focused Input takes every printable key, `q` included: ctrl+q quits from there (the
footer shows it in place of `q`), and Escape leaves the field, after which the screen's
single-letter keys act again.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Input, Select

from rooftui.tui.compositor import ChangedBoxesCompositor

# A screen's own binding of a key replaces the one it inherits: a screen that binds
# Escape (back) lists this again beside it; while a field has focus it comes first.
LEAVE_FIELD = Binding("escape", "leave_field", "Leave field", id="leave-field",
                      priority=True)
COMMON_BINDINGS = [
    Binding("q", "app.quit", "Quit", id="quit"),
    # the same action as `q`: the footer shows one key per action, this one while an
    # Input has focus (it takes `q`); the app's own ctrl+q, also a priority key, quits
    Binding("ctrl+q", "app.quit", "Quit", id="quit-from-field", priority=True),
    LEAVE_FIELD,
    Binding("question_mark,f1", "app.help", "Help", id="help"),
]


class KeyboardScreen(Screen):
    """A screen whose fields (inputs and selects) Escape leaves: the focus goes to
    `home_widget()` (None: no widget, the screen's own keys)."""

    BINDINGS = COMMON_BINDINGS

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._compositor = ChangedBoxesCompositor()  # partial updates render less

    def field_has_focus(self) -> bool:
        """An Input or a closed Select has focus (an open one's list closes on Escape)."""
        return isinstance(self.focused, Input | Select)

    def home_widget(self):
        return None

    def action_leave_field(self) -> None:
        home = self.home_widget()
        # set now, not through `focus()` (a callback later): the next key typed goes
        # where this one sent the focus
        self.set_focus(home if home is not None and home.focusable else None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "leave_field":
            return self.field_has_focus()
        return True
