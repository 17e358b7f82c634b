"""The command palette (ctrl+p) drives the Explorer by name: `gpu h200`, `model
llama-3-70b`, `tp 4`, `profile derated`, `kv fp8`, `system gb200-nvl72`, `ep 8`, `open
results`, `export`: one command per choice or number of every control in `CONTROLS`, so
a new control is in the palette as it is added. Fuzzy, as Textual matches: the letters
in order (`kv fp8` finds `KV dtype fp8`).

A control command sets the control's field, so the change goes the way a typed one
does (refused values are refused in place; a model change resets what depends on it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from rooftui.core.errors import SpecError
from rooftui.tui.widgets.controls import CONTROLS, Controls, ControlSpec, parse

Command = tuple[str, str, Callable[[], object]]  # text, help, what it does


def _number_typed(query: str) -> str | None:
    """The last word of the query when it reads as a number ("tp 4" -> "4")."""
    words = query.split()
    return words[-1] if len(words) >= 2 and any(ch.isdigit() for ch in words[-1]) else None


class ExplorerCommands(Provider):
    def _explorer(self):
        """The Explorer (None in an app without one, such as a test's)."""
        return self.app.explorer if self.app.is_screen_installed("explorer") else None

    def _screen_commands(self) -> Iterator[Command]:
        app = self.app
        if app.results_dir is not None:
            yield "open results", "the sweep's results table", app.open_results
        yield ("open optimize", "search max batch and token budget for SLOs",
               app.open_optimize)
        yield ("export", "the Explorer's figures as HTML and JSON",
               partial(self._on_explorer, "export"))
        yield "next view", "the Explorer's next panel", partial(self._on_explorer,
                                                                "next_panel")

    def _control_commands(self, query: str) -> Iterator[Command]:
        """`<control> <choice>` for every choice of every select; `<control> <number>`
        for each number field that accepts the number the query ends with."""
        settings = self._explorer().settings
        typed = _number_typed(query)
        for spec in CONTROLS:
            if spec.kind == "select":
                for label, value in spec.choices(settings):
                    yield (f"{spec.label.lower()} {label}", spec.help,
                           partial(self._set, spec, value))
            elif typed is not None:
                try:
                    value = parse(spec, typed)
                except SpecError:
                    continue
                yield (f"{spec.label.lower()} {typed}", spec.help,
                       partial(self._set, spec, value))

    def _to_explorer(self, then) -> None:
        """Show the Explorer, then call `then(explorer)` once it is mounted (the app
        started on a results folder composes it when first shown)."""
        explorer = self.app.show_explorer()
        if explorer.is_mounted:
            then(explorer)
        else:
            explorer.call_after_refresh(then, explorer)

    def _on_explorer(self, action: str) -> None:
        self._to_explorer(lambda explorer: explorer.run_action(action))

    def _set(self, spec: ControlSpec, value: object) -> None:
        """Set the control's field (on the Explorer: the palette may have been opened
        on another screen)."""
        self._to_explorer(partial(self._set_field, spec, value))

    @staticmethod
    def _set_field(spec: ControlSpec, value: object, explorer) -> None:
        field = explorer.query_one(Controls).field(spec.key)
        field.value = value if spec.kind == "select" else (
            "" if value is None else f"{value:g}" if isinstance(value, float) else str(value))

    async def search(self, query: str) -> Hits:
        if self._explorer() is None:
            return
        matcher = self.matcher(query)
        for text, help_text, action in [*self._screen_commands(),
                                        *self._control_commands(query)]:
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), action, text=text, help=help_text)

    async def discover(self) -> Hits:
        if self._explorer() is None:
            return
        for text, help_text, action in self._screen_commands():
            yield DiscoveryHit(text, action, help=help_text)
