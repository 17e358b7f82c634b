"""The Explorer: change one thing about a serving step and see at once where its time goes.

Every valid change starts a recomputation in a worker thread (exclusive, so an older one
is cancelled) and the result comes back as a message. Each request carries a generation
number and only the latest generation is drawn, so a slow, stale result never lands
last. The UI thread only draws. A computation that fails (the core refuses the
configuration, or a bug) comes back as a message too, shown in red under the controls,
with the figures of the last valid configuration still drawn.

Layout: the controls on the left, the key figures on top, then the roofline, the
throughput curve, the breakdown and the memory of one GPU: the plots side by side above
the other two when the terminal is large, one at a time with tabs (`v` cycles) when it
is small (80×24).
"""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal, Vertical
from textual.geometry import Size
from textual.message import Message
from textual.widgets import Tab, Tabs
from textual.worker import get_current_worker

from rooftui.core.limits import BOUNDS
from rooftui.tui.failures import failure_text
from rooftui.tui.figures import ExplorerFigures, compute_figures
from rooftui.tui.keys import KeyboardScreen
from rooftui.tui.settings import ExplorerSettings
from rooftui.tui.widgets.breakdown import Breakdown
from rooftui.tui.widgets.controls import Controls
from rooftui.tui.widgets.footer import CoalescingFooter
from rooftui.tui.widgets.key_figures import KeyFigures
from rooftui.tui.widgets.memory_panel import MemoryPanel
from rooftui.tui.widgets.roofline_plot import RooflinePlot
from rooftui.tui.widgets.throughput_plot import ThroughputPlot

PANELS = (("roofline", "Roofline"), ("throughput", "Throughput"), ("breakdown", "Breakdown"),
          ("memory", "Memory"))
# At least this many cells show every panel at once; below, one panel at a time.
WIDE_COLUMNS, WIDE_ROWS = 140, 36


BATCH_KEYS = Binding.Group("batch", compact=True)  # ] ×2, [ ÷2
CONTEXT_KEYS = Binding.Group("context", compact=True)  # } ×2, { ÷2


class ExplorerScreen(KeyboardScreen):
    # `[` `]` `{` `}` never occur in a number, so they act even while a field has focus.
    BINDINGS = [
        Binding("right_square_bracket", "scale('batch', 2)", "Batch ×2", id="batch-double",
                priority=True, group=BATCH_KEYS),
        Binding("left_square_bracket", "scale('batch', 0.5)", "Batch ÷2", id="batch-halve",
                priority=True, group=BATCH_KEYS),
        Binding("right_curly_bracket", "scale('context', 2)", "Context ×2",
                id="context-double", priority=True, group=CONTEXT_KEYS),
        Binding("left_curly_bracket", "scale('context', 0.5)", "Context ÷2",
                id="context-halve", priority=True, group=CONTEXT_KEYS),
        Binding("v", "next_panel", "View", id="next-view"),
        Binding("e", "export", "Export", id="export"),
        Binding("o", "open_results", "Results", id="open-results"),
        Binding("O", "open_optimize", "Optimize", id="open-optimize"),
        Binding("x", "clear_fixed_inputs", "Clear row inputs", id="clear-row-inputs",
                tooltip="Back to the model's and profile's own compute dtype, overlap, ... "
                        "(the inputs a sweep row set that have no control)"),
    ]

    class Computed(Message):
        """A worker's result for request `generation`."""

        def __init__(self, generation: int, figures: ExplorerFigures) -> None:
            super().__init__()
            self.generation = generation
            self.figures = figures

    class Refused(Message):
        """The computation of request `generation` failed: the core refused the
        configuration (a SpecError), or an unexpected exception (its type and message)."""

        def __init__(self, generation: int, reason: str) -> None:
            super().__init__()
            self.generation = generation
            self.reason = reason

    def __init__(self, settings: ExplorerSettings | None = None, *,
                 hires: str = "halfblock") -> None:
        super().__init__(id="explorer")
        self.settings = settings or ExplorerSettings()
        self.figures: ExplorerFigures | None = None
        self._hires = hires
        self._generation = 0
        self._drawn: dict[str, ExplorerFigures] = {}  # panel -> the figures it shows
        self._controls_behind: set[str] = set()  # fields to update when the figures land
        self._panel = PANELS[0][0]

    def compose(self) -> ComposeResult:
        # laid out for the terminal from the start: the class set once the screen is
        # mounted restyles every widget (~0.2 s of the first frame at 200×50)
        self._fit_layout(self.app.size)
        with Horizontal(id="explorer-body"):
            yield Controls(self.settings, id="controls")
            with Vertical(id="figures"):
                yield KeyFigures(id="key-figures")
                yield Tabs(*(Tab(label, id=f"tab-{name}") for name, label in PANELS),
                           id="panel-tabs")
                with Container(id="panels"):
                    yield RooflinePlot(hires=self._hires, id="roofline")
                    yield ThroughputPlot(hires=self._hires, id="throughput")
                    yield Breakdown(id="breakdown")
                    yield MemoryPanel(id="memory")
        yield CoalescingFooter()

    def on_mount(self) -> None:
        self._show_panel(self._panel)
        self.request_figures()

    def _fit_layout(self, size: Size) -> None:
        self.set_class(size.width >= WIDE_COLUMNS and size.height >= WIDE_ROWS, "-wide")

    def on_resize(self) -> None:
        self._fit_layout(self.size)
        self.refresh_bindings()
        self._draw_visible_panels()

    # --- recomputation ----------------------------------------------------------------
    def request_figures(self) -> None:
        self._generation += 1
        self._compute(self.settings, self._generation)

    @work(thread=True, exclusive=True, group="explorer-compute")
    def _compute(self, settings: ExplorerSettings, generation: int) -> None:
        try:
            figures = compute_figures(settings)
        except Exception as error:  # said in place: an escaping one would end the app
            self.post_message(self.Refused(generation, failure_text(error)))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(self.Computed(generation, figures))

    def on_explorer_screen_computed(self, message: Computed) -> None:
        if message.generation != self._generation:
            return  # a newer request is on its way
        self.figures = message.figures
        self._catch_up_controls()
        self.query_one(KeyFigures).show_report(self.figures.report, self.figures.interval)
        self._draw_visible_panels()
        memory = self.figures.memory.warning()
        warnings = "; ".join([*self.figures.report["warnings"], *([memory] if memory else [])])
        self.query_one(Controls).show_status(warnings, style="yellow")

    def _draw_visible_panels(self) -> None:
        """Draw the figures into the panels on screen; a hidden panel is drawn when it is
        shown (touching it would cost a frame its time, and it re-maps the screen)."""
        if self.figures is None:
            return
        for name, _ in PANELS:
            shown = self.has_class("-wide") or name == self._panel
            if shown and self._drawn.get(name) is not self.figures:
                self.query_one(f"#{name}").show_figures(self.figures)
                self._drawn[name] = self.figures

    def on_explorer_screen_refused(self, message: Refused) -> None:
        if message.generation == self._generation:
            self._catch_up_controls()
            self.query_one(Controls).show_status(
                f"{message.reason} (figures show the last valid configuration)")

    # --- changes ------------------------------------------------------------------------
    def on_controls_changed(self, message: Controls.Changed) -> None:
        self.settings = message.settings
        self.request_figures()

    def open_settings(self, settings: ExplorerSettings) -> None:
        """Show another configuration (from the Results view) and recompute."""
        self.settings = settings
        if not self.is_mounted:  # shown for the first time: composed with `settings`
            return
        self.query_one(Controls).show(settings)
        self.refresh_bindings()  # `x` comes and goes with the row's fixed inputs
        self.request_figures()

    def action_scale(self, key: str, factor: float) -> None:
        """Batch or context ×2 / ÷2, within the range the field accepts. The field shows
        the new value with the figures it gives (one frame for both: the fastest way to
        the screen)."""
        value = max(1, min(round(getattr(self.settings, key) * factor),
                           int(BOUNDS[key].maximum)))
        self.settings = self.settings.with_changes(**{key: value})
        self.query_one(Controls).adopt(self.settings)
        self._controls_behind.add(key)
        self.request_figures()

    def action_clear_fixed_inputs(self) -> None:
        self.open_settings(self.settings.without_fixed_inputs())
        self.refresh_bindings()

    def _catch_up_controls(self) -> None:
        if self._controls_behind:
            self.query_one(Controls).show(self.settings, self._controls_behind)
            self._controls_behind = set()

    # --- views --------------------------------------------------------------------------
    def action_next_panel(self) -> None:
        names = [name for name, _ in PANELS]
        self.query_one(Tabs).active = f"tab-{names[(names.index(self._panel) + 1) % len(names)]}"

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        self._show_panel(event.tab.id.removeprefix("tab-"))

    def _show_panel(self, name: str) -> None:
        self._panel = name
        for panel, _ in PANELS:
            self.query_one(f"#{panel}").set_class(panel == name, "-shown")
        self._draw_visible_panels()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "next_panel":
            return not self.has_class("-wide")
        if action == "open_results":
            return self.app.results_dir is not None
        if action == "export":
            return self.figures is not None or None
        if action == "clear_fixed_inputs":
            return bool(self.settings.fixed_inputs())
        return super().check_action(action, parameters)

    def action_open_results(self) -> None:
        self.app.open_results()

    def action_open_optimize(self) -> None:
        self.app.open_optimize()

    def action_export(self) -> None:
        self._export(self.figures)

    @work(thread=True, group="export")
    def _export(self, figures: ExplorerFigures) -> None:
        from rooftui.tui.export import export_explorer

        try:
            paths = export_explorer(figures, self.app.output_dir)
        except Exception as error:  # a full disk, a read-only folder: said, not raised
            self.app.call_from_thread(self.notify, f"export failed: {failure_text(error)}",
                                      severity="error")
            return
        self.app.call_from_thread(self.notify, "exported " + " and ".join(map(str, paths)),
                                  title="Export", timeout=10)
