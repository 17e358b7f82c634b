"""The Optimize view keeps its fields and results when left and opened again; it says
how far a candidate's search is; `c` stops it before the next simulation; it bounds
requests and candidates, and says the bound."""

from __future__ import annotations

from test_tui_support import pilot_test, settle, shown_text, wait_for_explorer
from textual.widgets import Input

from rooftui.tui.optimize_search import MAX_CANDIDATES, MAX_REQUESTS
from rooftui.tui.rooftui_app import RooftuiApp
from rooftui.tui.screens.explorer import ExplorerScreen
from rooftui.tui.screens.optimize import OptimizeScreen


async def open_optimize(pilot) -> OptimizeScreen:
    await pilot.press("O")
    await settle(pilot, until=lambda: isinstance(pilot.app.screen, OptimizeScreen))
    return pilot.app.screen


def fill(screen: OptimizeScreen, **values: str) -> None:
    for name, text in values.items():
        screen.query_one(f"#optimize-{name.replace('_', '-')}", Input).value = text


@pilot_test
async def test_fields_and_results_survive_leaving_and_coming_back():
    async with RooftuiApp().run_test(size=(140, 40)) as pilot:
        await wait_for_explorer(pilot)
        screen = await open_optimize(pilot)
        fill(screen, slo_ttft="3", requests="60", batches="8", budgets="512")
        await pilot.press("r")
        await settle(pilot, until=lambda: screen.result is not None)
        assert screen.result.candidates
        await pilot.press("escape", "escape")  # leave the workload select, then back
        await settle(pilot, until=lambda: isinstance(pilot.app.screen, ExplorerScreen))
        again = await open_optimize(pilot)
        assert again is screen and screen.result is not None
        assert screen.query_one("#optimize-slo-ttft", Input).value == "3"
        assert "done" in shown_text(screen.query_one("#optimize-status"))


@pilot_test
async def test_progress_within_a_candidate_and_a_prompt_cancel():
    async with RooftuiApp().run_test(size=(140, 40)) as pilot:
        await wait_for_explorer(pilot)
        screen = await open_optimize(pilot)
        fill(screen, requests="20000", batches="8", budgets="512")
        status = screen.query_one("#optimize-status")
        await pilot.press("r")
        # the status follows the only candidate's simulations (a dozen or more at
        # 20,000 requests); settle() would wait for the whole search
        for _ in range(10_000):
            if "max batch 8, budget 512: simulation 2" in shown_text(status):
                break
            await pilot.pause(0.05)
        else:
            raise AssertionError(f"no progress shown: {shown_text(status)}")
        await pilot.press("c")
        await settle(pilot)
        # stopped inside the candidate: it never landed
        assert screen.result is None and screen._candidates == []
        assert "cancelled" in shown_text(status)


@pilot_test
async def test_requests_and_candidates_are_bounded_and_the_bound_said():
    async with RooftuiApp().run_test(size=(140, 40)) as pilot:
        await wait_for_explorer(pilot)
        screen = await open_optimize(pilot)
        status = screen.query_one("#optimize-status")
        assert f"{MAX_REQUESTS:,} requests" in shown_text(status)
        fill(screen, requests=str(MAX_REQUESTS + 1))
        await settle(pilot)
        assert screen.query_one("#optimize-requests", Input).has_class("-invalid")
        assert f"at most {MAX_REQUESTS:,}" in shown_text(status)
        fill(screen, requests="100",
             batches=",".join(str(b) for b in range(1, 22)),
             budgets=",".join(str(1000 + t) for t in range(MAX_CANDIDATES // 20)))
        await settle(pilot)
        assert f"at most {MAX_CANDIDATES}" in shown_text(status)
        await pilot.press("r")
        await settle(pilot)
        assert screen.result is None and f"at most {MAX_CANDIDATES}" in shown_text(status)
