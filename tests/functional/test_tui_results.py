"""The Results view on a real (small) `sweep run` output: it opens lazily, filters,
sorts, pages, plots, and a selected row opens in the Explorer with the sweep's figures."""

from __future__ import annotations

import math

import pytest
from test_tui_support import (
    GRID_ROWS,
    pilot_test,
    settle,
    shown_text,
    sweep_point,
    wait_for_results,
    write_results_dir,
)
from textual.widgets import DataTable, Select

from rooftui.tui.results_data import ResultsData
from rooftui.tui.results_query import PAGE_ROWS, Query
from rooftui.tui.rooftui_app import RooftuiApp
from rooftui.tui.screens.explorer import ExplorerScreen
from rooftui.tui.screens.results import ResultsScreen
from rooftui.tui.widgets.results_plot import ResultsPlot


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    return write_results_dir(tmp_path_factory.mktemp("sweep"))


def column(screen: ResultsScreen, name: str) -> list:
    return screen.page.frame[name].to_list()


def test_the_data_sorts_columns_into_axes_labels_and_metrics(results_dir):
    data = ResultsData(results_dir)
    assert data.axes == ["gpu", "model", "batch", "context", "kv_dtype"]  # what the grid varies
    assert {"bound", "gemm_bound", "fits"} <= set(data.categories)
    assert {"step_time_s", "tokens_per_s", "intensity"} <= set(data.metrics)
    assert "batch" not in data.metrics and "mfu_assumed" not in data.metrics
    assert data.count(Query()) == GRID_ROWS
    page = data.page(Query(filters={"gpu": "h200"}, sort="tokens_per_s", descending=True), 0)
    assert page.total == GRID_ROWS // 2
    tokens = page.frame["tokens_per_s"].to_list()
    assert tokens == sorted(tokens, reverse=True)
    assert set(page.frame["gpu"].to_list()) == {"h200"}
    assert data.distinct("batch") == [1, 8, 32, 128, 512]


@pilot_test
async def test_opens_on_the_first_page(results_dir):
    async with RooftuiApp(results_dir).run_test(size=(80, 24)) as pilot:
        screen = await wait_for_results(pilot)
        table = screen.query_one(DataTable)
        assert table.row_count == PAGE_ROWS
        assert screen.page.total == GRID_ROWS
        assert f"rows 1–100 of {GRID_ROWS}" in shown_text(screen.query_one("#results-status"))
        await pilot.press("n")
        await settle(pilot)
        assert table.row_count == GRID_ROWS - PAGE_ROWS
        assert screen.page.offset == PAGE_ROWS
        await pilot.press("n")  # no page past the last
        await settle(pilot)
        assert screen.page.offset == PAGE_ROWS
        await pilot.press("p")
        await settle(pilot)
        assert screen.page.offset == 0


@pilot_test
async def test_filter_and_sort(results_dir):
    async with RooftuiApp(results_dir).run_test(size=(80, 24)) as pilot:
        screen = await wait_for_results(pilot)
        gpu = screen.query_one("#filter-gpu", Select)
        assert [value for _, value in gpu._options][1:] == ["h100-sxm", "h200"]
        gpu.value = "h200"
        await settle(pilot)
        screen.query_one("#filter-batch", Select).value = 32
        await settle(pilot)
        assert screen.page.total == GRID_ROWS // 2 // 5
        assert set(column(screen, "gpu")) == {"h200"} and set(column(screen, "batch")) == {32}
        status = shown_text(screen.query_one("#results-status"))
        assert "gpu = h200" in status and "batch = 32" in status
        # `s` sorts by the column under the cursor; again flips the order
        table = screen.query_one(DataTable)
        table.move_cursor(column=screen.data.table_columns.index("tokens_per_s"))
        await pilot.press("s")
        await settle(pilot)
        assert column(screen, "tokens_per_s") == sorted(column(screen, "tokens_per_s"))
        await pilot.press("s")
        await settle(pilot)
        tokens = column(screen, "tokens_per_s")
        assert tokens == sorted(tokens, reverse=True)
        assert "sorted by tokens_per_s ↓" in shown_text(screen.query_one("#results-status"))


@pilot_test
async def test_plot_follows_the_choice(results_dir):
    async with RooftuiApp(results_dir).run_test(size=(200, 50)) as pilot:
        screen = await wait_for_results(pilot)
        assert screen.plot_sample.columns == ["batch", "tokens_per_s", "context"]
        assert screen.plot_sample.height == GRID_ROWS
        screen.query_one("#plot-y", Select).value = "step_time_s"
        screen.query_one("#plot-colour", Select).value = "gpu"
        screen.query_one("#filter-model", Select).value = "llama-2-7b"
        await settle(pilot)
        assert screen.plot_sample.columns == ["batch", "step_time_s", "gpu"]
        assert screen.plot_sample.height == GRID_ROWS // 2
        legend = shown_text(screen.query_one(ResultsPlot).query_one(".plot-legend"))
        assert "h100-sxm" in legend and "h200" in legend and "colour: gpu" in legend


@pilot_test
async def test_a_selected_row_opens_in_the_explorer(results_dir):
    async with RooftuiApp(results_dir).run_test(size=(80, 24)) as pilot:
        screen = await wait_for_results(pilot)
        table = screen.query_one(DataTable)
        table.focus()
        await pilot.press("down", "down", "down", "enter")
        await settle(pilot)
        explorer = pilot.app.screen
        assert isinstance(explorer, ExplorerScreen)
        row = screen.page.frame.row(3, named=True)
        expected = sweep_point(gpu=row["gpu"], model=row["model"], batch=row["batch"],
                               context=row["context"], kv_dtype=row["kv_dtype"])
        assert explorer.figures.report == expected
        assert math.isclose(explorer.figures.report["step_time_s"], row["step_time_s"],
                            rel_tol=1e-12)
        # live what-if from there, then back to the results with `o`
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert explorer.figures.report["batch"] == 2 * row["batch"]
        await pilot.press("o")
        await settle(pilot)
        assert pilot.app.screen is screen
        await pilot.press("escape")
        assert pilot.app.screen is explorer


def test_a_directory_that_is_not_a_sweep_is_refused(tmp_path):
    from rooftui.core.errors import SpecError
    from rooftui.tui.app import check_results_dir

    with pytest.raises(SpecError, match="no sweep results"):
        check_results_dir(tmp_path)


def test_a_row_of_a_tp_and_speculation_grid_carries_them_to_the_explorer():
    from rooftui.tui.settings import ExplorerSettings

    row = {"gpu": "h100-sxm", "model": "llama-3-8b", "batch": 16, "context": 4096,
           "tp": 2, "spec_tokens": 0, "acceptance": 0.8, "mfu_assumed": 1.0}
    plain = ExplorerSettings.from_row(row)
    assert (plain.tp, plain.spec_tokens, plain.acceptance) == (2, 0, None)
    assert plain.config().tp == 2  # acceptance at spec_tokens 0 dropped, as the grid ignores it
    speculating = ExplorerSettings.from_row({**row, "spec_tokens": 3})
    assert (speculating.spec_tokens, speculating.acceptance) == (3, 0.8)


def test_a_row_carries_the_inputs_without_a_control():
    """A row's compute dtype, prefill context and assumptions reach the Explorer (and are
    listed under its controls), so it shows the row's own figures."""
    from rooftui.core.point import point_report
    from rooftui.tui.settings import ExplorerSettings

    row = {"gpu": "h100-sxm", "model": "mixtral-8x7b", "batch": 32, "context": 2048,
           "prefill": 512, "prefill_context": 4096, "weight_dtype": "bf16",
           "compute_dtype": "fp8", "expert_dtype": "int4-g128", "mfu_assumed": 0.6,
           "memory_reserve_gb": 4.0, "overlap": "full", "attention_flops_assumed": "full",
           "activation_traffic": True, "kv_write": False, "tpot_budget": 0.05}
    settings = ExplorerSettings.from_row(row, profile="derated")
    expected = sweep_point(gpu="h100-sxm", model="mixtral-8x7b", batch=32, context=2048,
                           prefill=512, prefill_context=4096, weight_dtype="bf16",
                           compute_dtype="fp8", expert_dtype="int4-g128", mfu=0.6,
                           memory_reserve_gb=4.0, overlap="full", attention_flops="full",
                           activation_traffic=True, kv_write=False, profile="derated")
    assert point_report(settings.config()) == expected
    assert settings.fixed_inputs() == [
        "compute dtype fp8", "expert dtype int4-g128", "prefill context 4096",
        "memory reserve gb 4", "overlap full", "attention flops full",
        "activation traffic on", "kv write off"]
    # the profile's own values are no override: nothing listed
    plain = ExplorerSettings.from_row({"gpu": "h100-sxm", "model": "llama-3-8b",
                                       "compute_dtype": "bf16", "overlap": "parts",
                                       "kv_write": True, "memory_reserve_gb": 0.0})
    assert plain.fixed_inputs() == []


@pilot_test
async def test_a_query_that_fails_is_a_line_in_the_status(results_dir, monkeypatch):
    async with RooftuiApp(results_dir).run_test(size=(80, 24)) as pilot:
        screen = await wait_for_results(pilot)

        def broken(self, query, offset):
            raise OSError("shard vanished\nsecond line")

        monkeypatch.setattr(ResultsData, "page", broken)
        await pilot.press("n")
        await settle(pilot)
        assert pilot.app.is_running and pilot.app.screen is screen
        status = shown_text(screen.query_one("#results-status"))
        assert "OSError: shard vanished" in status and "second line" not in status
        assert screen.page.offset == 0  # the page shown stays
