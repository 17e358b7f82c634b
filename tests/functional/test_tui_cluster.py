"""The Explorer's cluster layout controls (system, PP, micro-batches, DP, EP) through
Pilot: the figures are `sweep point --system --dp --ep`'s to the digit, the breakdown
lists each collective with its link, a bad combination is refused in place, and the
palette sets them by name."""

from __future__ import annotations

from test_tui_explorer import assert_shows, type_into
from test_tui_palette import run_command
from test_tui_support import pilot_test, settle, shown_text, sweep_point, wait_for_explorer
from textual.widgets import Input, Select

from rooftui.core import units
from rooftui.tui.rooftui_app import RooftuiApp
from rooftui.tui.settings import ExplorerSettings
from rooftui.tui.widgets.breakdown import Breakdown

MOE = "qwen3-30b-a3b"  # a small MoE: 128 routed experts, quick to evaluate


async def open_moe(pilot, **changes):
    screen = await wait_for_explorer(pilot)
    screen.open_settings(ExplorerSettings(model=MOE, batch=64).with_changes(**changes))
    await settle(pilot, until=lambda: screen.figures.settings.model == MOE)
    return screen


@pilot_test
async def test_system_dp_and_ep_recompute_as_sweep_point():
    async with RooftuiApp().run_test(size=(200, 50)) as pilot:
        screen = await open_moe(pilot)
        screen.query_one("#control-system", Select).value = "gb200-nvl72"
        await settle(pilot)
        # the system brings its GPU, shown in the GPU control
        assert screen.query_one("#control-gpu", Select).value == "gb200"
        await type_into(pilot, screen.query_one("#control-dp", Input), "8")
        await type_into(pilot, screen.query_one("#control-ep", Input), "8")
        assert_shows(screen, sweep_point(model=MOE, batch=64, system="gb200-nvl72", dp=8,
                                         ep=8))


@pilot_test
async def test_the_breakdown_lists_each_collective_with_its_link():
    async with RooftuiApp().run_test(size=(200, 50)) as pilot:
        screen = await open_moe(pilot, system="gb200-nvl72", dp=8, ep=8, pp=2)
        expected = sweep_point(model=MOE, batch=64, system="gb200-nvl72", dp=8, ep=8, pp=2)
        assert screen.figures.report == expected
        lines = shown_text(screen.query_one(Breakdown), width=200).splitlines()
        link = expected["collectives"]["all_to_all"]
        assert link["link"] == "nvlink_domain"
        row = next(line.split() for line in lines if line.endswith(" nvlink_domain")
                   and line.startswith("all_to_all"))
        assert " ".join(row[1:]) == (f"{units.si(link['bytes'], 'B')} "
                                     f"{units.seconds(link['time_s'])} nvlink_domain")
        assert any(line.startswith("pipeline bubble ×1.500") for line in lines)
        assert any(line.startswith("busiest expert GPU") for line in lines)


@pilot_test
async def test_a_bad_ep_or_a_gpu_other_than_the_systems_is_refused_in_place():
    async with RooftuiApp().run_test(size=(80, 24)) as pilot:
        screen = await open_moe(pilot, system="gb200-nvl72")
        good = screen.figures.report
        await type_into(pilot, screen.query_one("#control-ep", Input), "3")
        message = shown_text(screen.query_one("#control-message"))
        assert "ep 3 must be 1 or tp x dp = 1" in message
        assert screen.figures.report == good  # the last valid configuration stays drawn
        await type_into(pilot, screen.query_one("#control-ep", Input), "1")
        screen.query_one("#control-gpu", Select).value = "h100-sxm"
        await settle(pilot)
        assert "is not GB200 NVL72's gb200" in shown_text(screen.query_one("#control-message"))
        assert screen.figures.report == good
        assert pilot.app.is_running


@pilot_test
async def test_palette_commands_set_the_system_and_ep():
    async with RooftuiApp().run_test(size=(120, 40)) as pilot:
        screen = await open_moe(pilot, dp=8)
        await run_command(pilot, "system gb200-nvl72")
        await settle(pilot, until=lambda: screen.figures.settings.system == "gb200-nvl72")
        assert screen.figures.settings.gpu == "gb200"
        await run_command(pilot, "ep 8")
        await settle(pilot, until=lambda: screen.figures.settings.ep == 8)
        assert screen.figures.report == sweep_point(model=MOE, batch=64, system="gb200-nvl72",
                                                    dp=8, ep=8)
