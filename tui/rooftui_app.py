"""The rooftui App: the Explorer, and the Results view of a sweep's output.

A thin App: the screens do the work. Start-up imports only what the Explorer needs;
the Results view (polars) and export (altair) load when first used. The command line
is rooftui.tui.app's, which imports this module only once its arguments are parsed.
"""

from __future__ import annotations

import gc
import os
from collections import deque
from collections.abc import Iterable
from functools import partial
from pathlib import Path

from textual import events
from textual.app import App, SystemCommand
from textual.dom import DOMNode
from textual.filter import LineFilter, Monochrome
from textual.screen import Screen

from rooftui.tui.app import DEFAULT_OUTPUT_DIR
from rooftui.tui.commands import ExplorerCommands
from rooftui.tui.crash_report import write_crash_report
from rooftui.tui.monochrome import UnstyledSafeMonochrome, is_monochrome_terminal
from rooftui.tui.screens.explorer import ExplorerScreen
from rooftui.tui.settings import ExplorerSettings


class RooftuiApp(App):
    TITLE = "rooftui"
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses live elsewhere
    COMMANDS = App.COMMANDS | {ExplorerCommands}

    def __init__(self, results_dir: Path | None = None, *,
                 settings: ExplorerSettings | None = None,
                 output_dir: Path = DEFAULT_OUTPUT_DIR, hires: str = "halfblock") -> None:
        super().__init__()
        self.results_dir = results_dir
        self.output_dir = output_dir
        self._settings = settings or ExplorerSettings()
        self._hires = hires
        self._monochrome = UnstyledSafeMonochrome()
        self._monochrome_terminal = is_monochrome_terminal(os.environ)
        self.crash_report: Path | None = None
        self._keys: deque[events.Key] = deque()  # read, not yet delivered
        self._key_in_flight = False
        self._key_screen: Screen | None = None  # the screen the last key was read on

    # --- keys in order ------------------------------------------------------------------
    # Textual gives each key to the widget focused when the app takes it from its queue,
    # but a key that moves the focus (Tab, Enter on a select, a binding) does so only
    # after it has passed through that widget and bubbled up to the app, a few message
    # queues later: keys read in the same burst went to the old widget meanwhile (from
    # the GPU select, `Tab Tab Tab Tab 6 4` typed 6 and 4 into the select). So the app
    # delivers one key at a time, the next once the previous one has been handled all
    # the way up: a callback follows the key through every queue it passes.
    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded:
            self._keys.append(event)
            if not self._key_in_flight:
                await self._deliver_next_key()
            return
        await super().on_event(event)

    async def _deliver_next_key(self) -> None:
        if not self._keys:
            self._key_in_flight = False
            return
        self._key_in_flight = True
        key = self._keys.popleft()
        self._key_screen = self.screen
        target = self.focused or self.screen
        await super().on_event(key)  # a priority binding, or forwarded to `target`
        self._follow_key(target if key.is_forwarded else self)

    def _follow_key(self, node: DOMNode | None) -> None:
        """Once `node` has handled the key, on to its parent; at the app, the next key
        (after a screen the key opened or uncovered has taken the focus). A node that
        has closed meanwhile is skipped."""
        if node is not None and node is not self:
            if not node.call_later(self._follow_key, node.parent):
                self._follow_key(node.parent)
        elif self.screen is self._key_screen or not self.screen.call_later(
                self.call_later, self._deliver_next_key):
            self.call_later(self._deliver_next_key)

    @property
    def monochrome(self) -> bool:
        """NO_COLOR is set or the terminal has no colour: the plots mark series by
        character, not hue alone."""
        return self.no_color or self._monochrome_terminal

    def get_line_filters(self) -> list[LineFilter]:
        """Textual's filters, with a monochrome one that survives unstyled segments, and
        added for a terminal without colour that does not set NO_COLOR."""
        filters = [self._monochrome if type(line_filter) is Monochrome else line_filter
                   for line_filter in super().get_line_filters()]
        if self._monochrome_terminal and self._monochrome not in filters:
            filters.append(self._monochrome)
        return filters

    def _handle_exception(self, error: Exception) -> None:
        """An unhandled exception ends the app as Textual ends it (exit status 1), but
        leaves one line on the terminal and the full report in a file."""
        super()._handle_exception(error)
        self.crash_report = write_crash_report(error)
        where = (f"full report: {self.crash_report}" if self.crash_report
                 else "no folder could be written for the full report")
        self._exit_renderables[:] = [
            f"rooftui: error: {type(error).__name__}: {_first_line(error)} ({where})"]

    def on_mount(self) -> None:
        self.install_screen(ExplorerScreen(self._settings, hires=self._hires), "explorer")
        if self.results_dir is None:
            self.push_screen("explorer")
        else:  # the Explorer is composed when first shown (`show_explorer`), not beneath
            self.open_results()
        # What exists once the first screen is up (modules, widgets, styles) lives as
        # long as the app: frozen, the collector's full passes skip it. Unfrozen, each
        # takes ~60 ms at 200×50, every few key presses.
        self.call_after_refresh(gc.freeze)

    @property
    def explorer(self) -> ExplorerScreen:
        return self.get_screen("explorer")

    def open_results(self) -> None:
        """Show the Results view (created on first use: that is when polars loads)."""
        if not self.is_screen_installed("results"):
            from rooftui.tui.screens.results import ResultsScreen

            self.install_screen(ResultsScreen(self.results_dir, hires=self._hires), "results")
        self.push_screen("results")

    def open_optimize(self) -> None:
        """The Optimize view, for the Explorer's GPU, model and profile: one for the
        app's life, so its fields, its results and a search in flight stay when left."""
        if not self.is_screen_installed("optimize"):
            from rooftui.tui.screens.optimize import OptimizeScreen

            self.install_screen(OptimizeScreen(self.explorer.settings, hires=self._hires),
                                "optimize")
        self.get_screen("optimize").follow(self.explorer.settings)
        if self.screen is not self.get_screen("optimize"):
            self.push_screen("optimize")

    def show_explorer(self) -> ExplorerScreen:
        """Back to the Explorer: down the screens above it, or, when the app started on
        a results folder and has not shown it yet, in place of the Results view (which
        stays installed: `o` opens it again, above the Explorer)."""
        explorer = self.explorer
        if explorer in self.screen_stack:
            while self.screen is not explorer:
                self.pop_screen()
        else:
            while self.screen is not self.get_screen("results"):
                self.pop_screen()
            self.switch_screen(explorer)
        return explorer

    def open_in_explorer(self, settings: ExplorerSettings) -> None:
        """Back from the Results view to the Explorer, showing `settings`."""
        self.show_explorer().open_settings(settings)

    def action_help(self) -> None:
        from rooftui.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The palette (ctrl+p) lists every key binding of the screen by its description,
        next to Textual's own commands."""
        yield from super().get_system_commands(screen)
        seen = set()
        for active in screen.active_bindings.values():
            binding = active.binding
            if not binding.id or binding.id in seen or not active.enabled:
                continue
            seen.add(binding.id)
            yield SystemCommand(
                binding.description,
                f"key {self.get_key_display(binding)} · {binding.id}",
                partial(self.run_action, binding.action, active.node))


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else "(no message)"
