"""Keys through Textual's Pilot: Escape leaves a field on every screen and gives the keys
back to the screen; the footer always names a way to quit; a field's refusal stays until
the field shows a valid value, whatever lands meanwhile."""

from __future__ import annotations

from test_tui_support import (
    pilot_test,
    settle,
    shown_text,
    wait_for_explorer,
    wait_for_results,
    write_results_dir,
)
from textual.widgets import DataTable, Footer, Input, Select

from rooftui.tui.rooftui_app import RooftuiApp
from rooftui.tui.screens.explorer import ExplorerScreen
from rooftui.tui.screens.optimize import OptimizeScreen
from rooftui.tui.screens.results import ResultsScreen


def footer_keys(screen) -> dict[str, str]:
    """The footer's key -> description, as it shows them."""
    footer = screen.query_one(Footer)
    return {key.key_display: key.description for key in footer.query("FooterKey")}


async def leave_field(pilot, field) -> None:
    field.focus()
    await settle(pilot)
    assert "Leave field" in footer_keys(pilot.app.screen).values()
    await pilot.press("escape")
    await settle(pilot)


@pilot_test
async def test_escape_leaves_an_explorer_field():
    async with RooftuiApp().run_test(size=(80, 24)) as pilot:
        screen = await wait_for_explorer(pilot)
        batch = screen.query_one("#control-batch", Input)
        await leave_field(pilot, batch)
        assert pilot.app.focused is None and isinstance(pilot.app.screen, ExplorerScreen)
        assert footer_keys(screen).get("q") == "Quit"
        await pilot.press("v")  # the screen's key again, not typed into the field
        await settle(pilot)
        assert batch.value == "1" and screen.query_one("#throughput").has_class("-shown")


@pilot_test
async def test_the_footer_names_quit_while_an_input_has_focus():
    async with RooftuiApp().run_test(size=(80, 24)) as pilot:
        screen = await wait_for_explorer(pilot)
        screen.query_one("#control-context", Input).focus()
        await settle(pilot)
        keys = footer_keys(screen)
        assert keys.get("^q") == "Quit" and "q" not in keys  # the field takes `q`


@pilot_test
async def test_escape_leaves_an_optimize_field_then_goes_back():
    async with RooftuiApp().run_test(size=(80, 24)) as pilot:
        await wait_for_explorer(pilot)
        await pilot.press("O")
        await settle(pilot, until=lambda: isinstance(pilot.app.screen, OptimizeScreen))
        screen = pilot.app.screen
        await leave_field(pilot, screen.query_one("#optimize-slo-ttft", Input))
        assert pilot.app.screen is screen and pilot.app.focused is None
        assert footer_keys(screen).get("esc") == "Back"
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(pilot.app.screen, ExplorerScreen)


@pilot_test
async def test_escape_leaves_a_results_filter_for_the_table(tmp_path):
    async with RooftuiApp(write_results_dir(tmp_path)).run_test(size=(120, 30)) as pilot:
        screen = await wait_for_results(pilot)
        await leave_field(pilot, screen.query(Select).first())
        assert isinstance(pilot.app.screen, ResultsScreen)
        assert isinstance(pilot.app.focused, DataTable)
        await pilot.press("escape")  # from the table: back to the Explorer
        await settle(pilot)
        assert isinstance(pilot.app.screen, ExplorerScreen)


@pilot_test
async def test_a_refusal_stays_while_the_field_shows_refused_text():
    async with RooftuiApp().run_test(size=(80, 24)) as pilot:
        screen = await wait_for_explorer(pilot)
        batch = screen.query_one("#control-batch", Input)
        batch.focus()
        await pilot.press("6", "4", "k")
        await settle(pilot)
        message = screen.query_one("#control-message")
        assert "'64k'" in shown_text(message)
        screen.request_figures()  # figures of batch 64 landing after the refusal
        await settle(pilot)
        assert screen.figures.settings.batch == 64
        assert "'64k'" in shown_text(message)
        await pilot.press("backspace")  # the field shows 64 again: valid
        await settle(pilot)
        assert shown_text(message).strip() == ""
