"""The Optimize view: run a small search, read the heatmap and the best, open it."""

from __future__ import annotations

import time

import pytest
from test_tui_support import pilot_test
from textual.widgets import DataTable, Input, Static

from rooftui.tui.rooftui_app import RooftuiApp
from rooftui.tui.screens.optimize import OptimizeScreen

pytestmark = pytest.mark.slow


@pilot_test
async def test_search_fills_the_heatmap_and_opens_the_best_in_the_explorer():
    app = RooftuiApp()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        app.explorer.settings = app.explorer.settings.with_changes(profile="derated")
        await pilot.press("O")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, OptimizeScreen)
        screen.query_one("#optimize-requests", Input).value = "150"
        screen.query_one("#optimize-batches", Input).value = "8,64"
        screen.query_one("#optimize-budgets", Input).value = "512,2048"
        await pilot.press("r")
        started = time.monotonic()
        while screen.result is None and time.monotonic() - started < 120:
            await pilot.pause(0.2)
        assert screen.result is not None
        best = screen.result.best
        heatmap = screen.query_one("#optimize-heatmap", DataTable)
        cell = str(heatmap.get_cell(str(best.max_batch), str(best.token_budget)))
        assert cell.strip()
        await pilot.press("o")
        await pilot.pause(0.5)
        assert app.screen is app.explorer
        assert app.explorer.settings.batch == best.max_batch


@pilot_test
async def test_bad_input_is_refused_in_place():
    app = RooftuiApp()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        await pilot.press("O")
        await pilot.pause()
        screen = app.screen
        screen.query_one("#optimize-slo-ttft", Input).value = "abc"
        await pilot.press("r")
        await pilot.pause()
        assert screen.result is None
        assert str(screen.query_one("#optimize-status", Static).render()).strip()
