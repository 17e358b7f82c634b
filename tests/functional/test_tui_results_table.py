"""The Results table answers questions: what varies comes first, then the headline
metrics with their units; `s` sorts by the column under the cursor; `/` filters by
expression or text; an optimize folder gets filters for its axes and opens a row as
the step it describes."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tui_support import (
    pilot_test,
    settle,
    shown_text,
    wait_for_results,
    write_results_dir,
)
from textual.widgets import DataTable, Input, Select, SelectionList

from rooftui.sweeps.cli import cli
from rooftui.tui.rooftui_app import RooftuiApp
from rooftui.tui.screens.explorer import ExplorerScreen

OPTIMIZE_GRID = """
name = "opt"
kind = "optimize"
profile = "derated"
[fixed]
requests = 40
workload = "azure-code-2023"
[axes]
max_batch = [8, 64]
token_budget = [128, 1024]
"""


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    return write_results_dir(tmp_path_factory.mktemp("sweep"))


@pytest.fixture(scope="module")
def optimize_dir(tmp_path_factory) -> Path:
    from click.testing import CliRunner

    directory = tmp_path_factory.mktemp("optimize")
    grid = directory / "grid.toml"
    grid.write_text(OPTIMIZE_GRID)
    out = directory / "opt"
    result = CliRunner().invoke(cli, ["run", str(grid), "--out", str(out), "--no-charts"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


def visible_headings(table: DataTable) -> list[str]:
    """The column headings that fit in the table's width, from the left."""
    shown, used = [], 0
    for column in table.ordered_columns:
        used += column.get_render_width(table)
        if used > table.size.width:
            break
        shown.append(str(column.label))
    return shown


@pilot_test
async def test_at_80x24_the_first_columns_include_a_metric_with_its_unit(results_dir):
    async with RooftuiApp(results_dir).run_test(size=(80, 24)) as pilot:
        screen = await wait_for_results(pilot)
        table = screen.query_one(DataTable)
        headings = visible_headings(table)
        assert headings[:5] == ["gpu", "model", "batch", "context", "kv_dtype"]
        assert "step" in headings
        step = screen.data.table_columns.index("step_time_s")
        assert str(table.get_cell_at((0, step))).endswith(("ms", "µs", " s"))
        await pilot.press("f")  # the filters, hidden for the table's width
        await settle(pilot)
        assert screen.query_one("#results-controls").display


@pilot_test
async def test_sort_follows_the_cursor_column(results_dir):
    async with RooftuiApp(results_dir).run_test(size=(120, 30)) as pilot:
        screen = await wait_for_results(pilot)
        for name in ("step_time_s", "context"):
            await pilot.press("home")
            for _ in range(screen.data.table_columns.index(name)):
                await pilot.press("right")
            await pilot.press("s")
            await settle(pilot)
            values = screen.page.frame[name].to_list()
            assert values == sorted(values), name
            assert f"sorted by {name} ↑" in shown_text(screen.query_one("#results-status"))


@pilot_test
async def test_slash_filters_by_expression_and_by_text(results_dir):
    async with RooftuiApp(results_dir).run_test(size=(120, 30)) as pilot:
        screen = await wait_for_results(pilot)
        for typed, total in (("batch >= 128 and kv_dtype = 'fp8'", 24), ("H200", 60)):
            await pilot.press("slash")
            await settle(pilot)
            field = screen.query_one("#results-filter", Input)
            assert pilot.app.focused is field
            field.value = typed
            await pilot.press("enter")
            await settle(pilot)
            assert screen.page.total == total, typed
            assert isinstance(pilot.app.focused, DataTable)
            assert f"/ {typed}" in shown_text(screen.query_one("#results-status"))


@pilot_test
async def test_an_optimize_folder_filters_its_axes_and_opens_its_rows(optimize_dir):
    async with RooftuiApp(optimize_dir).run_test(size=(200, 50)) as pilot:
        screen = await wait_for_results(pilot)
        assert screen.data.table_columns[:2] == ["max_batch", "token_budget"]
        for axis in ("max_batch", "token_budget"):
            assert screen.query_one(f"#filter-{axis.replace('_', '-')}", Select)
        await settle(pilot, until=lambda: len(screen.query_one(
            "#filter-max-batch", Select)._options) > 1)
        screen.query_one("#filter-max-batch", Select).value = 64
        screen.query_one("#filter-token-budget", Select).value = 1024
        await settle(pilot)
        assert screen.page.total == 1
        row = screen.page.frame.row(0, named=True)
        await pilot.press("o")
        await settle(pilot, until=lambda: isinstance(pilot.app.screen, ExplorerScreen))
        settings = pilot.app.screen.settings
        assert (settings.batch, settings.prefill) == (64, 1024 - 64)
        assert settings.context == round(row["decode_context"])
        assert settings.profile == "derated"


@pilot_test
async def test_the_column_picker_hides_and_keeps_the_order(results_dir):
    async with RooftuiApp(results_dir).run_test(size=(120, 30)) as pilot:
        screen = await wait_for_results(pilot)
        await pilot.press("c")
        await settle(pilot, until=lambda: pilot.app.screen.id == "columns")
        picker = pilot.app.screen.query_one(SelectionList)
        for column in ("model", "kv_dtype"):
            picker.deselect(column)
        await pilot.press("enter")
        await settle(pilot, until=lambda: pilot.app.screen is screen)
        table = screen.query_one(DataTable)
        headings = [str(column.label) for column in table.ordered_columns]
        assert headings[:4] == ["gpu", "batch", "context", "step"]
        assert table.row_count == screen.page.frame.height
        table.move_cursor(column=1)
        await pilot.press("s")  # the cursor's column in the columns shown: batch
        await settle(pilot)
        assert "sorted by batch ↑" in shown_text(screen.query_one("#results-status"))


@pilot_test
async def test_opening_reads_the_first_page_once(results_dir, monkeypatch):
    """Filling each filter with its values changes no choice: no page or plot is read
    again (each reload competed with the first page for the CPU)."""
    from rooftui.tui.results_data import ResultsData

    reads = []
    for name in ("page", "plot_sample"):
        original = getattr(ResultsData, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            reads.append(_name)
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(ResultsData, name, counted)
    async with RooftuiApp(results_dir).run_test(size=(120, 30)) as pilot:
        screen = await wait_for_results(pilot)
        await settle(pilot, until=lambda: all(
            len(select._options) > 1 for select in screen.query(Select)
            if (select.id or "").startswith("filter-") and not select.disabled))
        assert sorted(reads) == ["page", "plot_sample"]
        screen.query_one("#filter-gpu", Select).value = "h200"  # a change reads both
        await settle(pilot, until=lambda: len(reads) == 4)
        assert sorted(reads) == ["page", "page", "plot_sample", "plot_sample"]
