"""The Explorer's memory panel: weights, the step's KV cache, free memory and max batch
per GPU, and the smallest TP that fits when the weights alone do not."""

from __future__ import annotations

from test_tui_support import pilot_test, settle, shown_text, sweep_point, wait_for_explorer

from rooftui.tui.rooftui_app import RooftuiApp
from rooftui.tui.settings import ExplorerSettings
from rooftui.tui.widgets.memory_panel import MemoryPanel


async def show_memory(pilot):
    screen = await wait_for_explorer(pilot)
    screen.query_one("#panel-tabs").active = "tab-memory"
    await settle(pilot)
    return screen, shown_text(screen.query_one(MemoryPanel))


@pilot_test
async def test_llama_3_70b_on_one_h100_names_tp_2():
    settings = ExplorerSettings(gpu="h100-sxm", model="llama-3-70b")
    async with RooftuiApp(settings=settings).run_test(size=(80, 24)) as pilot:
        screen, panel = await show_memory(pilot)
        report = sweep_point(gpu="h100-sxm", model="llama-3-70b")
        assert f"weights {report['weight_bytes'] / 1e9:,.1f} GB" in panel
        assert "per GPU: 80 GB" in panel
        assert "weights alone" in panel and "TP 2 is the smallest that fits" in panel
        message = shown_text(screen.query_one("#control-message"))
        assert "TP 2 is the smallest that fits" in message  # also beside the controls
        await pilot.click("#control-tp")
        screen.query_one("#control-tp").value = "2"
        await settle(pilot)
        panel = shown_text(screen.query_one(MemoryPanel))
        assert "TP 2" in panel and "do not fit" not in panel
        assert f"{sweep_point(model='llama-3-70b', tp=2)['max_batch']:,} sequences" in panel


@pilot_test
async def test_a_step_that_fits_shows_its_free_memory_and_max_batch():
    async with RooftuiApp().run_test(size=(200, 50)) as pilot:
        screen = await wait_for_explorer(pilot)  # wide: every panel at once
        panel = shown_text(screen.query_one(MemoryPanel), width=200)
        report = sweep_point()
        free = 80e9 - report["weight_bytes"] - report["kv_bytes"]
        assert f"free {free / 1e9:,.1f} GB" in panel
        assert f"max batch {report['max_batch']:,} sequences of context 1,024" in panel
        assert "⚠" not in panel
