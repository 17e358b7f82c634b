"""Helpers for the TUI tests (no tests here): running a Pilot session, waiting for the
workers, reading what a widget shows, the expected `sweep point` report, and a small
`sweep run` output directory."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console
from rich.text import Text
from textual.widgets import DataTable, Footer
from textual.widgets._footer import FooterKey
from textual.worker import WorkerCancelled

from rooftui.core.point import point_report
from rooftui.sweeps.cli import cli
from rooftui.sweeps.cli.options import build_config
from rooftui.sweeps.cli.point import point as point_command

# `sweep point`'s setup options as it parses them with no arguments (the step's token
# counts aside): every option the CLI gains is covered
STEP_OPTIONS = {"batch", "context", "prefill", "prefill_context", "tpot_budget", "as_json"}
CLI_DEFAULTS = {name: value for name, value in point_command.make_context("point", []).params
                .items() if name not in STEP_OPTIONS}


def sweep_point(batch: int = 1, context: int = 1024, prefill: int = 0,
                prefill_context: int = 0, **options) -> dict:
    """What `sweep point --json` prints for these options (the same code path)."""
    params = {**CLI_DEFAULTS, **options}
    return point_report(build_config(params, batch=batch, context=context, prefill=prefill,
                                     prefill_context=prefill_context))


def pilot_test(test):
    """Run an async test function (a Pilot session) to completion: pytest here has no
    asyncio plugin, and needs none for this."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))
    return run


async def settle(pilot, until=lambda: True, rounds: int = 400) -> None:
    """Wait until no worker runs, every message they posted has been handled, and
    `until()` holds (for work that starts later, such as a screen opening)."""
    app = pilot.app
    for _ in range(rounds):
        for worker in list(app.workers):
            with contextlib.suppress(WorkerCancelled):  # replaced by a newer one
                await worker.wait()
        await pilot.pause()
        if not any(worker.is_running for worker in app.workers) and until():
            await pilot.pause()
            return
    raise AssertionError("the app did not settle")


async def wait_for_explorer(pilot):
    """The Explorer once its first figures are in."""
    from rooftui.tui.screens.explorer import ExplorerScreen

    app = pilot.app
    await settle(pilot, until=lambda: isinstance(app.screen, ExplorerScreen)
                 and app.screen.figures is not None)
    return app.screen


async def wait_for_results(pilot):
    """The Results view once its first page and plot are in."""
    from rooftui.tui.screens.results import ResultsScreen

    def ready() -> bool:
        screen = pilot.app.screen
        if not (isinstance(screen, ResultsScreen) and screen.page is not None
                and screen.plot_sample is not None):
            return False
        # the table measures its columns when idle: until then its cells are cut to the
        # headings' widths (a snapshot taken then differs from run to run)
        table = screen.query_one(DataTable)
        if table._require_update_dimensions or table.row_count == 0:
            return False
        # the footer shows export enabled once the plot sample is in (it rebuilds after
        # the next refresh: a snapshot taken before shows the key dimmed)
        footer = screen.query_one(Footer)
        keys = [key for key in footer.query(FooterKey) if key.key == "e"]
        if footer._rebuild_pending or not keys or keys[0].has_class("-disabled"):
            return False
        return all(column.content_width >= max(
            (Text(str(cell)).cell_len if not isinstance(cell, Text) else cell.cell_len
             for cell in table.get_column(key)), default=0)
            for key, column in table.columns.items())

    await settle(pilot, until=ready)
    # and drawn with those widths: a screenshot reuses the lines drawn last
    table = pilot.app.screen.query_one(DataTable)
    for _ in range(100):
        if not (table._repaint_required or table._layout_required):
            break
        await pilot.pause()
    return pilot.app.screen


def shown_text(widget, width: int = 120) -> str:
    """The text a Static-like widget shows (its rich renderable, rendered plainly)."""
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


GRID = """
name = "tui-test"
kind = "step"
[axes]
gpu = ["h100-sxm", "h200"]
model = ["llama-3-8b", "llama-2-7b"]
batch = [1, 8, 32, 128, 512]
context = [512, 4096, 32768]
kv_dtype = ["bf16", "fp8"]
[charts]
names = []
"""  # 120 points: more than one 100-row page
GRID_ROWS = 120


def write_results_dir(directory: Path) -> Path:
    """A small output of the real `sweep run` (manifest.json, points/*.parquet)."""
    directory.mkdir(parents=True, exist_ok=True)
    grid = directory / "grid.toml"
    grid.write_text(GRID)
    out = directory / "sweep-demo"
    result = CliRunner().invoke(cli, ["run", str(grid), "--out", str(out)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out
