"""`?` / F1: what the screen shows and every key that acts on it."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

ABOUT = (
    "[b]rooftui[/b]: where does the time of an LLM serving step go, and what would move "
    "it?\n\n"
    "A step runs [i]batch[/i] decode tokens over [i]context[/i] cached tokens each (plus an "
    "optional [i]prefill[/i] chunk). Its weight matmuls ([b]gemm[/b]: the weights are read "
    "once for the whole batch) and its [b]attention[/b] (each sequence reads its own KV "
    "cache) are separate rooflines; a part's time is max(FLOPs / (MFU·peak), bytes / "
    "(MBU·bandwidth)). The figures are those of `sweep point --json` for the same "
    "configuration. Units are SI (GB = 1e9 B); peaks are dense.\n\n"
    "[b]I ceiling[/b]: the step's intensity as batch → ∞ at this context (the weights "
    "amortise away, the KV reads do not); [b]tok/s ceil[/b]: bandwidth / (KV per token × "
    "context), the throughput no batch size can pass; [b]max batch[/b]: sequences of this "
    "context that fit in memory after the weights and the profile's reserve.\n\n"
    "Bad input in a field is refused in place with a message; the figures keep showing "
    "the last valid configuration. A sweep row opened here may also set inputs that have "
    "no control (compute dtype, overlap, ...): they are listed under the controls, and "
    "`x` clears them. Plots are log-log; on a small terminal `v` (or a click on a tab) "
    "switches between them."
)


def bindings_table(screen: Screen) -> Table:
    """Every rooftui binding that acts on `screen` (those with an id), keys merged per id."""
    keys: dict[str, list[str]] = {}
    descriptions: dict[str, str] = {}
    for active in screen.active_bindings.values():
        binding = active.binding
        if binding.id:
            keys.setdefault(binding.id, []).append(screen.app.get_key_display(binding))
            descriptions[binding.id] = binding.description
    table = Table(box=None, padding=(0, 2), header_style="bold")
    for heading in ("key", "action", "id"):
        table.add_column(heading, no_wrap=heading != "action")
    for binding_id, description in descriptions.items():
        table.add_row(", ".join(keys[binding_id]), description, binding_id)
    table.add_row("ctrl+p", "Command palette: every action above, by name", "")
    table.add_row("tab", "Next control (shift+tab: previous)", "")
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close help",
                        id="close-help")]

    def __init__(self, under: Screen) -> None:
        super().__init__(id="help")
        self._under = under

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Static(ABOUT, id="help-about")
            yield Static(bindings_table(self._under), id="help-keys")
            yield Static("[dim]escape, q, ? or F1 closes this help[/]")
