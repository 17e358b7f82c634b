"""Textual's Footer, rebuilt once for a burst of binding changes rather than once each.

The footer recomposes its keys whenever the screen's bindings change (a focus change, a
screen resized or opened, an action enabled), each time after the next refresh; a
screen's start changes them a dozen times, and each rebuild mounts and styles every key
anew (twice each: a key's `compact` starts True and is then bound to the footer's). One
rebuild after the burst shows the same keys.
"""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


class CoalescingFooter(Footer):
    _rebuild_pending = False  # a recompose is scheduled: it will read the latest bindings

    def bindings_changed(self, screen: Screen) -> None:
        self._bindings_ready = True
        if (screen.app.app_focus and self.is_attached and screen is self.screen
                and not self._rebuild_pending):
            self._rebuild_pending = True
            self.call_after_refresh(self.recompose)

    async def recompose(self) -> None:
        self._rebuild_pending = False
        await super().recompose()
