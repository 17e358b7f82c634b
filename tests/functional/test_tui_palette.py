"""The command palette drives the tool by name: `gpu h200`, `model llama-3-70b`,
`tp 4`, `profile derated`, `kv fp8`, fuzzy; and `open optimize`; from the Results view
too."""

from __future__ import annotations

import pytest
from test_tui_support import (
    pilot_test,
    settle,
    wait_for_explorer,
    wait_for_results,
    write_results_dir,
)
from textual.command import CommandPalette

from rooftui.tui.rooftui_app import RooftuiApp
from rooftui.tui.screens.optimize import OptimizeScreen


async def run_command(pilot, typed: str) -> None:
    await pilot.press("ctrl+p")
    await settle(pilot, until=lambda: isinstance(pilot.app.screen, CommandPalette))
    palette = pilot.app.screen
    await pilot.press(*typed)
    # the first hit, once the search for the whole text has listed it
    await settle(pilot, until=lambda: palette._list_visible and
                 palette.query_one("CommandList").option_count > 0)
    await pilot.press("enter")
    await settle(pilot, until=lambda: not isinstance(pilot.app.screen, CommandPalette))


@pytest.mark.parametrize(("typed", "key", "value"), [
    ("gpu h200", "gpu", "h200"),
    ("model llama-3-70b", "model", "llama-3-70b"),
    ("tp 4", "tp", 4),
    ("profile derated", "profile", "derated"),
    ("kv fp8", "kv_dtype", "fp8"),
])
@pilot_test
async def test_a_palette_command_sets_a_control(typed, key, value):
    async with RooftuiApp().run_test(size=(120, 40)) as pilot:
        screen = await wait_for_explorer(pilot)
        await run_command(pilot, typed)
        await settle(pilot, until=lambda: getattr(screen.figures.settings, key) == value)
        assert getattr(screen.settings, key) == value


@pilot_test
async def test_a_palette_command_opens_optimize():
    async with RooftuiApp().run_test(size=(120, 40)) as pilot:
        await wait_for_explorer(pilot)
        await run_command(pilot, "open optimize")
        await settle(pilot, until=lambda: isinstance(pilot.app.screen, OptimizeScreen))


@pilot_test
async def test_on_a_results_folder_the_explorer_is_composed_when_first_shown(tmp_path):
    """`rooftui DIR` starts on the Results view alone (the Explorer beneath it would
    cost its first page time); a palette command for a control shows the Explorer with
    it set, Escape and `o` go between the two as before."""
    async with RooftuiApp(write_results_dir(tmp_path)).run_test(size=(120, 40)) as pilot:
        results = await wait_for_results(pilot)
        explorer = pilot.app.explorer
        assert not explorer.is_mounted and explorer not in pilot.app.screen_stack
        await run_command(pilot, "gpu h200")
        await settle(pilot, until=lambda: pilot.app.screen is explorer
                     and explorer.figures is not None and explorer.figures.settings.gpu
                     == "h200")
        await pilot.press("o")
        await settle(pilot, until=lambda: pilot.app.screen is results)
        await pilot.press("escape")
        await settle(pilot, until=lambda: pilot.app.screen is explorer)
        assert explorer.settings.gpu == "h200" and results not in pilot.app.screen_stack
