"""SVG snapshots of the main screens (pytest-textual-snapshot). After an intended change
of the layout, look at the report's diff, then regenerate:

    python -m pytest tests/functional/test_tui_snapshots.py --snapshot-update
"""

from __future__ import annotations

from test_tui_support import settle, wait_for_explorer, wait_for_results, write_results_dir

from rooftui.tui.rooftui_app import RooftuiApp


def test_explorer_at_80x24(snap_compare):
    assert snap_compare(RooftuiApp(), terminal_size=(80, 24), run_before=wait_for_explorer)


def test_explorer_at_200x50(snap_compare):
    assert snap_compare(RooftuiApp(), terminal_size=(200, 50), run_before=wait_for_explorer)


def test_explorer_throughput_after_batch_steps(snap_compare):
    async def run_before(pilot):
        await wait_for_explorer(pilot)
        await pilot.press(*["right_square_bracket"] * 6, "v")  # batch 64, next view
        await settle(pilot)

    assert snap_compare(RooftuiApp(), terminal_size=(80, 24), run_before=run_before)


def test_help(snap_compare):
    async def run_before(pilot):
        await wait_for_explorer(pilot)
        await pilot.press("question_mark")
        await settle(pilot)

    assert snap_compare(RooftuiApp(), terminal_size=(80, 24), run_before=run_before)


def test_results_at_120x30(snap_compare, tmp_path):
    app = RooftuiApp(write_results_dir(tmp_path))
    assert snap_compare(app, terminal_size=(120, 30), run_before=wait_for_results)


def test_explorer_at_80x24_without_colour(snap_compare, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(RooftuiApp(), terminal_size=(80, 24), run_before=wait_for_explorer)


def test_explorer_throughput_without_colour(snap_compare, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")

    async def run_before(pilot):
        await wait_for_explorer(pilot)
        await pilot.press(*["right_square_bracket"] * 6, "v")  # batch 64, next view
        await settle(pilot)

    assert snap_compare(RooftuiApp(), terminal_size=(80, 24), run_before=run_before)


def test_results_at_80x24(snap_compare, tmp_path):
    app = RooftuiApp(write_results_dir(tmp_path))
    assert snap_compare(app, terminal_size=(80, 24), run_before=wait_for_results)


def test_results_at_200x50(snap_compare, tmp_path):
    app = RooftuiApp(write_results_dir(tmp_path))
    assert snap_compare(app, terminal_size=(200, 50), run_before=wait_for_results)


async def open_optimize(pilot):
    await wait_for_explorer(pilot)
    await pilot.press("O")
    await settle(pilot, until=lambda: pilot.app.screen.id == "optimize")


def test_optimize_at_80x24(snap_compare):
    assert snap_compare(RooftuiApp(), terminal_size=(80, 24), run_before=open_optimize)


def test_optimize_at_200x50(snap_compare):
    assert snap_compare(RooftuiApp(), terminal_size=(200, 50), run_before=open_optimize)


def test_help_at_200x50(snap_compare):
    async def run_before(pilot):
        await wait_for_explorer(pilot)
        await pilot.press("question_mark")
        await settle(pilot)

    assert snap_compare(RooftuiApp(), terminal_size=(200, 50), run_before=run_before)


async def open_column_picker(pilot):
    await wait_for_results(pilot)
    await pilot.press("c")
    await settle(pilot, until=lambda: pilot.app.screen.id == "columns")


def test_column_picker_at_80x24(snap_compare, tmp_path):
    app = RooftuiApp(write_results_dir(tmp_path))
    assert snap_compare(app, terminal_size=(80, 24), run_before=open_column_picker)


def test_column_picker_at_200x50(snap_compare, tmp_path):
    app = RooftuiApp(write_results_dir(tmp_path))
    assert snap_compare(app, terminal_size=(200, 50), run_before=open_column_picker)
