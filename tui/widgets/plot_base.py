"""A character-cell plot for the Explorer: textual-plot's PlotWidget with log axes, no
focus (its zoom and pan keys would shadow the app's), and a one-line legend below it
instead of a floating box that would hide data in an 80×24 terminal."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import lru_cache

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import Static
from textual_hires_canvas import Canvas, TextAlign
from textual_plot import HiResMode, PlotWidget
from textual_plot.plot_widget import Legend, ScatterPlot

from rooftui.tui.widgets.log_axis import LogAxisFormatter

# Half blocks draw in any terminal font; braille is finer but needs a font that has it.
HIRES_MODES = {"halfblock": HiResMode.HALFBLOCK, "braille": HiResMode.BRAILLE,
               "quadrant": HiResMode.QUADRANT}


@lru_cache(maxsize=1024)
def parsed_markup(text: str) -> tuple[str, tuple[str, ...]]:
    """The plain text of `text` (rich markup) and each character's style, as
    textual-hires-canvas's `write_text` works them out (parsing is most of its time, and
    a plot writes the same tick labels at every change)."""
    rich_text = Text.from_markup(text)
    plain = rich_text.plain
    styles = []
    for character in rich_text.divide(range(1, len(plain))):
        style = Style()
        for span in character._spans:
            style += Style.parse(span.style)
        styles.append(str(style))
    return plain, tuple(styles)


class _Canvas(Canvas):
    """textual-hires-canvas's Canvas, with its widget style worked out once per paint
    rather than once per line (it walks the ancestors' backgrounds: most of a frame's
    time in a plot), and a redraw that repaints only the lines it changed."""

    _paint_style: Style | None = None

    @contextmanager
    def repaint_changed_lines(self) -> Iterator[None]:
        """Draw within: the lines that come out as they were are not repainted (a
        change of batch moves the markers and the curves, rarely the ticks and labels;
        each repainted line costs the compositor its styling and cutting)."""
        chars, styles = [line[:] for line in self._buffer], [line[:] for line in self._styles]
        self._refreshes_pending += 1
        try:
            yield
        finally:
            self._refreshes_pending -= 1
        if self._refreshes_pending:  # within a batch, which refreshes the whole canvas
            return
        if len(chars) != len(self._buffer):  # resized while drawing
            self.refresh()
            return
        width = self._canvas_size.width
        changed = [Region(0, y, width, 1) for y, (old_chars, old_styles)
                   in enumerate(zip(chars, styles, strict=True))
                   if old_chars != self._buffer[y] or old_styles != self._styles[y]]
        if changed:
            self.refresh(*changed)

    def write_text(self, x: int, y: int, text: str, align: TextAlign = TextAlign.LEFT) -> None:
        """textual-hires-canvas's `write_text` (the same cells, clipped the same way),
        with the markup parsed once per distinct text."""
        if not 0 <= y < self._canvas_size.height:
            return
        plain, styles = parsed_markup(text)
        length = len(plain)
        if align == TextAlign.RIGHT:
            x -= length - 1
        elif align == TextAlign.CENTER:  # an even length sits one cell right of centre
            x -= length // 2 - (length % 2 == 0)
        left, right = max(x, 0), min(x + length, self._canvas_size.width)
        if left >= right:
            return
        self._buffer[y][left:right] = plain[left - x:right - x]
        self._styles[y][left:right] = styles[left - x:right - x]
        self.refresh()

    @property
    def rich_style(self) -> Style:
        return self._paint_style if self._paint_style is not None else super().rich_style

    def render_lines(self, crop: Region) -> list[Strip]:
        self._paint_style = super().rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._paint_style = None


class CellPlot(PlotWidget, can_focus=False):
    """A PlotWidget with log10-labelled axes and a small top margin; its ticks and
    labels in the theme's text colours (textual-plot's $secondary is dark blue on
    black)."""

    DEFAULT_CSS = """
    CellPlot > .plot--axis { color: $text-muted; }
    CellPlot > .plot--tick { color: $text; text-style: none; }
    CellPlot > .plot--label { color: $text-muted; text-style: italic; }
    """

    _paint_scheduled = False  # a `paint_now` is on its way

    def compose(self) -> ComposeResult:
        # PlotWidget's own layout, with the faster canvas
        with Grid():
            for canvas_id in ("margin-top", "margin-left", "plot", "margin-bottom"):
                yield _Canvas(1, 1, id=canvas_id)
        yield Legend(id="legend")

    def on_mount(self) -> None:
        self.margin_top = 1
        self.margin_left = 7
        self.set_x_formatter(LogAxisFormatter())
        self.set_y_formatter(LogAxisFormatter())

    def paint_now(self) -> None:
        """Draw the datasets onto the canvases now. textual-plot draws them while a frame
        is composed, which leaves the canvases themselves for the frame after: painting
        here puts the whole change in one frame. A hidden plot waits until shown."""
        self._paint_scheduled = False
        if self._needs_rerender:
            if self.region.area:
                self.render()
            else:
                self.refresh()  # drawn when shown

    def _rerender(self) -> None:
        # textual-plot repaints the whole widget for every change of its data (clear,
        # plot, limits, labels: a dozen per figure), though it is covered by its
        # canvases, which repaint themselves when drawn. Drawing waits for `paint_now`,
        # once per figure (called by the figure's owner, or else once its message is
        # handled).
        self._needs_rerender = True
        if not self._paint_scheduled:
            self._paint_scheduled = True
            self.call_later(self.paint_now)

    def _render_plot(self) -> None:
        # textual-plot refreshes a canvas for every cell it sets (thousands per frame);
        # one refresh per canvas, of the lines that changed, is all that is needed
        with ExitStack() as stack:
            for canvas in self.query(_Canvas):
                stack.enter_context(canvas.repaint_changed_lines())
            super()._render_plot()
            # textual-plot draws vertical lines over the datasets: character markers
            # (a part, the current batch) go on top again, or a marker on a line is lost
            for dataset in self._datasets:
                if isinstance(dataset, ScatterPlot) and dataset.hires_mode is None:
                    self._render_scatter_plot(dataset)

    def _render_y_label(self) -> None:
        # textual-plot centres the y label over the tick labels, which cuts a label
        # longer than the margin; start it at the left edge instead
        # padded to the width: a shorter label leaves nothing of the last one
        # ("step_time_s (log))")
        label_style = self.get_component_rich_style("plot--label")
        canvas = self.query_one("#margin-top", Canvas)
        canvas.write_text(0, 0, f"[{label_style}]{self._y_label.ljust(canvas.size.width)}",
                          TextAlign.LEFT)


class LabelledPlot(Vertical):
    """A title, the plot and a legend line; subclasses fill the plot in `show_figures`
    and end with `plot.paint_now()`."""

    DEFAULT_CSS = """
    LabelledPlot { height: 1fr; }
    LabelledPlot > .plot-title { height: 1; text-style: bold; }
    LabelledPlot > CellPlot { height: 1fr; }
    LabelledPlot > .plot-legend { height: 2; color: $text-muted; }
    """

    TITLE = ""

    def __init__(self, *, hires: str = "halfblock", id: str | None = None) -> None:
        super().__init__(id=id)
        self.hires_mode = HIRES_MODES[hires]

    def compose(self) -> ComposeResult:
        yield Static(self.TITLE, classes="plot-title")
        yield CellPlot(allow_pan_and_zoom=False)
        yield Static("", classes="plot-legend")

    @property
    def plot(self) -> CellPlot:
        return self.query_one(CellPlot)

    @property
    def monochrome(self) -> bool:
        """The terminal shows no colour: series must differ by their characters."""
        return bool(getattr(self.app, "monochrome", False))

    def set_legend(self, markup: str) -> None:
        """Rich markup, so colours are named as the plot lines name them (rich styles:
        `bright_cyan` is the terminal's own colour 14, in 16 or 256 colours)."""
        self.query_one(".plot-legend", Static).update(Text.from_markup(markup), layout=False)
