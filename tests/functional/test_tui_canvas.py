"""The plots' canvas writes text into exactly the cells textual-hires-canvas's own
`write_text` writes, styles included, wherever the text lands (clipped at either edge,
any alignment): it only parses each text's markup once."""

from __future__ import annotations

import random

from textual.geometry import Size
from textual_hires_canvas import Canvas, TextAlign

from rooftui.tui.widgets.plot_base import _Canvas

TEXTS = ["", "1k", "10T", "[bold red]5[/]00", "[italic #aaaaaa]tok/s per user[/]",
         "[white on blue]ab[/][green]cd[/]e", "[dim]x[/dim]"]


def cells(canvas: Canvas) -> tuple[list[list[str]], list[list[str]]]:
    return [line[:] for line in canvas._buffer], [line[:] for line in canvas._styles]


def test_write_text_writes_the_cells_the_library_writes():
    rng = random.Random(14)
    for _ in range(3000):
        width, height = rng.randint(1, 30), rng.randint(1, 4)
        ours, theirs = _Canvas(width, height), Canvas(width, height)
        for canvas in (ours, theirs):
            canvas.reset(size=Size(width, height), refresh=False)
        for _ in range(rng.randint(1, 4)):
            text = rng.choice(TEXTS) + rng.choice(["", "·", "12", "abc"])
            x, y = rng.randint(-12, width + 12), rng.randint(-1, height)
            align = rng.choice(list(TextAlign))
            ours.write_text(x, y, text, align)
            theirs.write_text(x, y, text, align)
        assert cells(ours) == cells(theirs), (width, height, text, x, y, align)
