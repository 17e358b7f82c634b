"""The Explorer takes `calibrated` as `sweep point --profile calibrated` does: the GPU's
own kernel profile, or one transferred to a GPU without data, with its interval on the
step time; the palette sets it by name."""

from __future__ import annotations

from test_tui_palette import run_command
from test_tui_support import pilot_test, settle, shown_text, sweep_point, wait_for_explorer
from textual.widgets import Select

from rooftui.core import units
from rooftui.core.assumptions import load_profile
from rooftui.tui.rooftui_app import RooftuiApp
from rooftui.tui.widgets.key_figures import KeyFigures


def step_time_line(screen) -> str:
    return next(line for line in shown_text(screen.query_one(KeyFigures), width=200)
                .splitlines() if "step time" in line)


@pilot_test
async def test_calibrated_resolves_for_the_gpu_with_its_interval():
    async with RooftuiApp().run_test(size=(200, 50)) as pilot:
        screen = await wait_for_explorer(pilot)
        screen.query_one("#control-profile", Select).value = "calibrated"
        await settle(pilot, until=lambda: screen.figures.settings.profile == "calibrated")
        expected = sweep_point(profile="calibrated")
        assert screen.figures.report == expected
        assert expected["assumptions"]["profile"] == "calibrated (h100-sxm-kernels)"
        low, high = load_profile("h100-sxm-kernels").interval.around(
            "step", expected["step_time_s"])
        assert f"{units.seconds(low)}-{units.seconds(high)})" in step_time_line(screen)

        # a GPU without kernel data gets a transferred profile, as `sweep point` does
        screen.query_one("#control-gpu", Select).value = "b200"
        await settle(pilot, until=lambda: screen.figures.settings.gpu == "b200")
        expected = sweep_point(gpu="b200", profile="calibrated")
        assert screen.figures.report == expected
        assert expected["assumptions"]["profile"].startswith("calibrated (transferred from ")
        assert "80 %: " in step_time_line(screen)


@pilot_test
async def test_the_palette_sets_the_calibrated_profile():
    async with RooftuiApp().run_test(size=(120, 40)) as pilot:
        screen = await wait_for_explorer(pilot)
        await run_command(pilot, "profile calibrated")
        await settle(pilot, until=lambda: screen.figures.settings.profile == "calibrated")
        assert screen.figures.report == sweep_point(profile="calibrated")
