"""What the terminal shows after a run of partial updates equals a full render of the
screen, cell for cell (character and style): the compositor that renders only the
widgets a change touches (rooftui.tui.compositor) leaves nothing stale, and a plot that
repaints only the lines it changed leaves no line of the last figure behind."""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import ControlType, Segment
from rich.style import Style
from test_tui_support import pilot_test, settle, wait_for_explorer
from textual._compositor import CompositorUpdate
from textual.geometry import Region

from rooftui.tui.compositor import column_boxes
from rooftui.tui.rooftui_app import RooftuiApp

Cell = tuple[str, Style]


def paint(cells: dict[tuple[int, int], Cell], segments) -> None:
    """Write an update's segments at their cursor positions, as a terminal does."""
    x = y = 0
    for segment in segments:
        if segment.control:
            for code in segment.control:
                if code[0] == ControlType.CURSOR_MOVE_TO:
                    x, y = code[1], code[2]
            continue
        if segment.text == "\n":  # each line of an update starts with a move
            continue
        for character in segment.text:
            cells[x, y] = (character, segment.style or Style.null())
            x += cell_len(character)


def cells_of(lines) -> dict[tuple[int, int], Cell]:
    cells: dict[tuple[int, int], Cell] = {}
    for y, strip in enumerate(lines):
        paint(cells, [Segment("", None, [(ControlType.CURSOR_MOVE_TO, 0, y)]), *strip])
    return cells


class TerminalApp(RooftuiApp):
    """Keeps what a terminal would show: every update the app writes, painted in order."""

    def __init__(self) -> None:
        super().__init__()
        self.terminal: dict[tuple[int, int], Cell] = {}

    def _display(self, screen, renderable) -> None:
        super()._display(screen, renderable)
        if isinstance(renderable, CompositorUpdate):
            paint(self.terminal, renderable.__rich_console__(self.console,
                                                             self.console.options))


def fresh_render(screen) -> dict[tuple[int, int], Cell]:
    """The screen rendered from every widget's content, none of its cached lines (a line
    left unrefreshed would otherwise come out of the cache stale in both pictures);
    nothing is marked for repainting, so the app's next updates are as they would be."""
    for widget in screen.walk_children(with_self=True):
        widget._styles_cache.clear()
        widget._dirty_regions.add(widget.size.region)
    return cells_of(screen._compositor.render_strips())


def differences(app: TerminalApp) -> list[str]:
    full = fresh_render(app.screen)
    wrong = [(x, y) for (x, y), cell in full.items() if app.terminal.get((x, y)) != cell]
    return [f"({x}, {y}): shown {app.terminal.get((x, y))!r}, rendered {full[x, y]!r}"
            for x, y in sorted(wrong, key=lambda cell: cell[::-1])[:5]]


def test_column_boxes_merge_overlapping_columns_only():
    field, plot, legend = Region(9, 8, 23, 1), Region(42, 8, 74, 30), Region(35, 41, 81, 2)
    assert column_boxes([plot, field, legend]) == [field, Region(35, 8, 81, 35)]
    footer = Region(0, 49, 200, 1)
    assert column_boxes([field, plot, footer]) == [Region(0, 8, 200, 42)]
    assert column_boxes([]) == []


async def check_after(pilot, keys: list[str]) -> None:
    for key in keys:  # one at a time: each change its own frames
        await pilot.press(key)
        await settle(pilot)
    await pilot.pause()
    assert not differences(pilot.app), differences(pilot.app)


@pilot_test
async def test_the_terminal_shows_what_a_full_render_shows_at_200x50():
    async with TerminalApp().run_test(size=(200, 50)) as pilot:
        await wait_for_explorer(pilot)
        await check_after(pilot, ["right_square_bracket"] * 6 + ["right_curly_bracket"] * 3)
        await check_after(pilot, ["left_square_bracket"] * 6 + ["left_curly_bracket"] * 3)
        await check_after(pilot, ["tab", "tab", "tab", "tab", "6", "4", "escape"])


@pilot_test
async def test_the_terminal_shows_what_a_full_render_shows_at_80x24():
    async with TerminalApp().run_test(size=(80, 24)) as pilot:
        await wait_for_explorer(pilot)
        await check_after(pilot, ["right_square_bracket"] * 6 + ["v"])
        await check_after(pilot, ["right_curly_bracket"] * 3 + ["v", "v", "v"])
        await check_after(pilot, ["O", "escape"])
