"""Monochrome terminals (`NO_COLOR`, `TERM=xterm-mono`, `TERM=dumb`): Textual's own
Monochrome filter reads `style.color` of every segment, and the plots' canvases emit
segments with no style at all, which ends the app (`'NoneType' object has no attribute
'color'`). This filter leaves an unstyled segment as it is and greys the rest."""

from __future__ import annotations

from rich.segment import Segment
from textual.color import Color
from textual.filter import Monochrome, monochrome_style


class UnstyledSafeMonochrome(Monochrome):
    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return [Segment(text, None if style is None else monochrome_style(style), None)
                for text, style, _ in segments]


def is_monochrome_terminal(environ: dict[str, str]) -> bool:
    """What a user means by "no colour": NO_COLOR set (https://no-color.org, any value),
    or a terminal type that has none."""
    term = environ.get("TERM", "")
    return "NO_COLOR" in environ or term == "dumb" or term.endswith(("-mono", "-m"))
