"""One GPU's memory in the Explorer's step: a bar of weights, KV cache, reserve and free
memory (each its own character as well as its colour, so it reads without colour), the
figures in GB, the max batch, and a warning naming the smallest TP that fits when the
step does not."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from rooftui.tui.figures import ExplorerFigures
from rooftui.tui.memory import MemoryUse

GB = 1e9
# (name, character, colour: Okabe-Ito, told apart with colour-blindness)
SEGMENTS = (("weights", "█", "#0072B2"), ("KV", "▓", "#E69F00"),
            ("reserve", "▒", "#CC79A7"), ("free", "░", "#999999"))
BAR_WIDTH = 40


def memory_lines(memory: MemoryUse, context: int) -> list[tuple[str, str]]:
    """(text, style) lines below the bar."""
    tp = f" · TP {memory.tp}" if memory.tp > 1 else ""
    max_batch = ("no limit" if memory.max_batch is None
                 else f"{memory.max_batch:,} sequences of context {context:,}")
    lines = [
        (f"per GPU: {memory.capacity / GB:,.0f} GB{tp}", "bold"),
        (f"weights {memory.weights / GB:,.1f} GB · KV of the step {memory.kv / GB:,.2f} GB"
         f" · reserve {memory.reserve / GB:,.1f} GB", ""),
        (f"free {memory.free / GB:,.1f} GB · max batch {max_batch}", ""),
    ]
    if memory.warning():
        lines.append((f"⚠ {memory.warning()}", "bold red"))
    return lines


def memory_bar(memory: MemoryUse, width: int = BAR_WIDTH) -> Text:
    """The bar, scaled to the capacity or to what the step asks for if that is more."""
    sizes = (memory.weights, memory.kv, memory.reserve, max(0.0, memory.free))
    scale = width / max(memory.capacity, sum(sizes[:3]))
    text = Text(no_wrap=True, overflow="crop")
    for (_, character, colour), size in zip(SEGMENTS, sizes, strict=True):
        text.append(character * round(size * scale), colour)
    if sum(sizes[:3]) > memory.capacity:  # where the GPU's memory ends
        edge = round(memory.capacity * scale)
        text = Text.assemble(text[:edge], ("│", "bold red"), text[edge:])
    return text


class MemoryPanel(Static):
    def show_figures(self, figures: ExplorerFigures) -> None:
        memory = figures.memory
        text = Text(no_wrap=False)
        text.append_text(memory_bar(memory))
        text.append("\n")
        text.append_text(Text("  ").join(Text(f"{character} {name}", colour)
                                         for name, character, colour in SEGMENTS))
        lines = memory_lines(memory, figures.settings.context)
        for line, style in lines:
            text.append("\n" + line, style)
        # a layout pass (~tens of ms at 200×50) only when the warning comes or goes, and
        # none where the panel's height is fixed (beside the breakdown)
        layout, self._line_count = len(lines) != self._line_count, len(lines)
        self.update(text, layout=layout and self.styles.height.is_auto)

    _line_count = 0
