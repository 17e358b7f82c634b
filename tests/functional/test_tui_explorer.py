"""The Explorer through Textual's Pilot: every control recomputes to exactly what
`sweep point --json` reports for the same configuration; keys; bad input refused in place;
help, the command palette, and start-up imports."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
from test_tui_support import pilot_test, settle, shown_text, sweep_point, wait_for_explorer
from textual.widgets import Input, Select

from rooftui.core import units
from rooftui.core.limits import BOUNDS
from rooftui.tui.keys import KeyboardScreen
from rooftui.tui.rooftui_app import RooftuiApp
from rooftui.tui.screens.explorer import ExplorerScreen
from rooftui.tui.screens.help import HelpScreen
from rooftui.tui.screens.optimize import OptimizeScreen
from rooftui.tui.screens.results import ResultsScreen
from rooftui.tui.widgets.breakdown import Breakdown
from rooftui.tui.widgets.controls import CONTROLS
from rooftui.tui.widgets.key_figures import KeyFigures


async def type_into(pilot, field: Input, text: str) -> None:
    field.focus()
    field.value = ""
    await pilot.press(*text)
    await settle(pilot)


def assert_shows(screen: ExplorerScreen, expected: dict) -> None:
    """The figures are the `sweep point` report, and the screen prints them with units."""
    assert screen.figures.report == expected
    figures = shown_text(screen.query_one(KeyFigures))
    assert units.seconds(expected["step_time_s"]) in figures
    assert units.rate(expected["tokens_per_s"]) in figures
    assert units.intensity(expected["ridge"]) in figures
    breakdown = screen.query_one(Breakdown)
    if screen.has_class("-wide") or breakdown.has_class("-shown"):  # else drawn when shown
        gemm_time = units.seconds(expected["parts"]["gemm"]["time_s"])
        assert gemm_time in shown_text(breakdown)


@pilot_test
async def test_first_screen_shows_the_seed_figures():
    async with RooftuiApp().run_test(size=(80, 24)) as pilot:
        screen = await wait_for_explorer(pilot)
        assert_shows(screen, sweep_point())
        figures = shown_text(screen.query_one(KeyFigures))
        assert "4.52 ms" in figures and "221 tok/s" in figures


# (control, value as the user enters it, the `sweep point` options that mean the same;
# text: the core refuses the configuration so far, which is shown in place, saying it)
CHANGES = [
    ("gpu", "h200", {"gpu": "h200"}),
    ("model", "llama-2-7b", {"model": "llama-2-7b"}),
    ("weight_dtype", "fp8", {"weight_dtype": "fp8"}),
    ("kv_dtype", "fp8", {"kv_dtype": "fp8"}),
    ("batch", "64", {"batch": 64}),
    ("context", "8192", {"context": 8192}),
    ("kv_heads", 2, {"kv_heads": 2}),
    ("prefill", "512", {"prefill": 512}),
    ("profile", "derated", {"profile": "derated"}),
    ("mfu", "0.5", {"mfu": 0.5}),
    ("mbu", "0.7", {"mbu": 0.7}),
    ("tp", "2", {"tp": 2}),
    ("spec_tokens", "3", "acceptance rate"),
    ("acceptance", "0.7", {"spec_tokens": 3, "acceptance": 0.7}),
    ("draft_model", "mistral-7b", {"draft_model": "mistral-7b"}),
    ("system", "hgx-h200-ib", {"system": "hgx-h200-ib"}),  # its GPU: h200, as chosen
    ("pp", "2", {"pp": 2}),
    ("micro_batches", "4", {"micro_batches": 4}),
    ("dp", "2", {"dp": 2}),
    ("ep", "4", "mixture-of-experts"),  # the model is dense
]


def test_every_control_is_tested():
    assert [key for key, _, _ in CHANGES] == [spec.key for spec in CONTROLS]


@pilot_test
async def test_each_control_recomputes_as_sweep_point():
    """One control after the other (each change keeps the earlier ones), as a user
    would; after each, the figures are `sweep point`'s for everything set so far."""
    async with RooftuiApp().run_test(size=(80, 24)) as pilot:
        screen = await wait_for_explorer(pilot)
        options: dict = {}
        for key, value, meaning in CHANGES:
            field = screen.query_one(f"#control-{key.replace('_', '-')}")
            if isinstance(field, Select):
                field.value = value
                await settle(pilot)
            else:
                await type_into(pilot, field, value)
            if isinstance(meaning, str):
                assert meaning in shown_text(screen.query_one("#control-message"))
            else:
                options.update(meaning)
            assert_shows(screen, sweep_point(**options))


@pilot_test
async def test_controls_combine_and_a_model_change_resets_what_depends_on_it():
    async with RooftuiApp().run_test(size=(80, 24)) as pilot:
        screen = await wait_for_explorer(pilot)
        screen.query_one("#control-kv-heads", Select).value = 4
        await type_into(pilot, screen.query_one("#control-batch", Input), "32")
        screen.query_one("#control-model", Select).value = "reference-mha-6.4b"
        await settle(pilot)
        # 4 KV heads still divide the reference model's 32 heads; its own dtype is fp16
        assert_shows(screen, sweep_point(batch=32, model="reference-mha-6.4b", kv_heads=4))
        assert screen.query_one("#control-weight-dtype", Select).value is None
        assert screen.figures.report["weight_dtype"] == "fp16"


@pilot_test
async def test_gpu_chosen_with_the_keyboard():
    async with RooftuiApp().run_test(size=(80, 24)) as pilot:
        screen = await wait_for_explorer(pilot)
        screen.query_one("#control-gpu", Select).focus()
        await pilot.press("enter", "down", "enter")  # the GPU after h100-sxm: h200
        await settle(pilot)
        assert_shows(screen, sweep_point(gpu="h200"))


@pilot_test
async def test_step_keys_scale_batch_and_context_even_inside_a_number_field():
    async with RooftuiApp().run_test(size=(80, 24)) as pilot:
        screen = await wait_for_explorer(pilot)
        batch = screen.query_one("#control-batch", Input)
        batch.focus()
        await pilot.press("right_square_bracket", "right_square_bracket",
                          "right_curly_bracket")
        await settle(pilot)
        assert batch.value == "4"
        assert screen.query_one("#control-context", Input).value == "2048"
        assert_shows(screen, sweep_point(batch=4, context=2048))
        await pilot.press("left_square_bracket", "left_curly_bracket")
        await settle(pilot)
        assert_shows(screen, sweep_point(batch=2, context=1024))
        screen.query_one("#control-gpu", Select).focus()  # letters go to a number field
        await pilot.press("v", "v")  # the breakdown, drawn as it is shown
        await settle(pilot)
        assert screen.query_one(Breakdown).has_class("-shown")
        assert_shows(screen, sweep_point(batch=2, context=1024))


@pilot_test
async def test_a_burst_of_changes_ends_on_the_last_one():
    """Workers are exclusive and results carry a generation: a stale one never lands."""
    async with RooftuiApp().run_test(size=(200, 50)) as pilot:
        screen = await wait_for_explorer(pilot)
        for _ in range(9):
            await pilot.press("right_square_bracket")
        await settle(pilot)
        assert screen.settings.batch == 512
        assert_shows(screen, sweep_point(batch=512))


# (field, text typed, the message, the value still shown: typing "1.5" passes through
# the valid "1", which is computed at once)
BAD_INPUT = [
    ("batch", "-3", f"batch must be {BOUNDS['batch'].describe()}, got -3", 1),
    ("batch", "abc", f"batch must be {BOUNDS['batch'].describe()}, got 'abc'", 1),
    ("context", "1.5", f"context must be {BOUNDS['context'].describe()}, got 1.5", 1),
    ("mfu", "1.5", f"MFU must be {BOUNDS['mfu'].describe()}, got 1.5", 1.0),
    ("mbu", "fast", f"MBU must be {BOUNDS['mbu'].describe()}, or blank, got 'fast'", None),
]


@pilot_test
async def test_bad_input_is_refused_in_place():
    async with RooftuiApp().run_test(size=(80, 24)) as pilot:
        screen = await wait_for_explorer(pilot)
        for key, text, message, still in BAD_INPUT:
            field = screen.query_one(f"#control-{key}", Input)
            await type_into(pilot, field, text)
            assert message in shown_text(screen.query_one("#control-message")), key
            assert field.has_class("-invalid")
            assert_shows(screen, sweep_point(**{key: still}))
            fix = 0.5 if key in ("mfu", "mbu") else 16
            await type_into(pilot, field, str(fix))
            assert shown_text(screen.query_one("#control-message")).strip() == ""
            assert not field.has_class("-invalid")
            assert_shows(screen, sweep_point(**{key: fix}))
            await type_into(pilot, field, "" if key in ("mfu", "mbu") else
                            str(sweep_point()[key]))  # back to the default for the next


@pilot_test
async def test_a_configuration_the_core_refuses_keeps_the_last_figures():
    async with RooftuiApp().run_test(size=(80, 24)) as pilot:
        screen = await wait_for_explorer(pilot)
        screen.query_one("#control-weight-dtype", Select).value = "fp8"
        await settle(pilot)
        screen.query_one("#control-gpu", Select).value = "a100-80gb"  # no fp8 peak
        await settle(pilot)
        message = shown_text(screen.query_one("#control-message"))
        assert "A100" in message and "no fp8 peak" in message
        assert_shows(screen, sweep_point(weight_dtype="fp8"))


@pilot_test
async def test_a_context_past_the_model_limit_warns_and_computes():
    async with RooftuiApp().run_test(size=(80, 24)) as pilot:
        screen = await wait_for_explorer(pilot)
        await type_into(pilot, screen.query_one("#control-context", Input), "100000")
        assert "max_position_embeddings" in shown_text(screen.query_one("#control-message"))
        assert_shows(screen, sweep_point(context=100000))


def test_every_binding_has_an_id_and_a_description():
    """Every binding rooftui declares (Textual's own, such as ctrl+q, aside)."""
    for owner in (KeyboardScreen, ExplorerScreen, ResultsScreen, OptimizeScreen,
                  HelpScreen):
        for binding in vars(owner).get("BINDINGS", ()):
            assert binding.id and binding.description, (owner.__name__, binding)


@pilot_test
async def test_help_lists_the_keys_and_closes():
    async with RooftuiApp().run_test(size=(80, 24)) as pilot:
        await wait_for_explorer(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        help_screen = pilot.app.screen
        assert isinstance(help_screen, HelpScreen)
        keys = shown_text(help_screen.query_one("#help-keys"))
        for binding_id in ("batch-double", "context-halve", "export", "quit", "help"):
            assert binding_id in keys
        await pilot.press("escape")
        assert isinstance(pilot.app.screen, ExplorerScreen)
        await pilot.press("f1")
        assert isinstance(pilot.app.screen, HelpScreen)


@pilot_test
async def test_the_command_palette_offers_every_binding():
    async with RooftuiApp().run_test(size=(80, 24)) as pilot:
        screen = await wait_for_explorer(pilot)
        names = {command.title for command in pilot.app.get_system_commands(screen)}
        for binding in ExplorerScreen.BINDINGS:
            # offered only with a results directory, or with a sweep row's fixed inputs
            if binding.id not in ("open-results", "clear-row-inputs"):
                assert binding.description in names
        command = next(c for c in pilot.app.get_system_commands(screen)
                       if c.title == "Batch ×2")
        await command.callback()
        await settle(pilot)
        assert_shows(screen, sweep_point(batch=2))


@pilot_test
async def test_quit_key():
    app = RooftuiApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_explorer(pilot)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


def modules_loaded_by(code: str, wanted: str) -> tuple[str, list[str]]:
    """Run `code` in a fresh interpreter: what it printed, and the loaded modules of
    `wanted` (a test on a module name `m`)."""
    probe = f"import sys\n{code}\nprint(sorted(m for m in list(sys.modules) if {wanted}))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True)
    *printed, modules = result.stdout.strip().splitlines()
    return "\n".join(printed), ast.literal_eval(modules)


def test_start_imports_neither_polars_nor_altair():
    """What the first screen needs only: the Explorer computes without them."""
    _, loaded = modules_loaded_by(
        "from rooftui.tui.rooftui_app import RooftuiApp\n"
        "from rooftui.tui.figures import compute_figures\n"
        "from rooftui.tui.settings import ExplorerSettings\n"
        "compute_figures(ExplorerSettings())",
        "m in ('polars', 'altair', 'vl_convert', 'click')")
    assert loaded == []


def test_help_imports_no_screen_nor_textual_nor_numpy():
    """`rooftui --help` (issue 19): the arguments are parsed before the App loads."""
    printed, loaded = modules_loaded_by(
        "from rooftui.tui.app import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass",
        "m.split('.')[0] in ('textual', 'numpy') or m.startswith('rooftui.tui.screens')")
    assert "usage: rooftui" in printed and "examples:" in printed
    assert loaded == []


@pytest.mark.parametrize(("argv", "message"), [
    (["--gpu", "h999"], "unknown gpu 'h999'"),
    (["--batch", "-1"], "batch must be a whole number from 0"),
    (["/nonexistent/results"], "results directory not found"),
])
def test_bad_arguments_are_one_line_and_status_2(argv, message):
    result = subprocess.run([sys.executable, "-m", "rooftui.tui.app", *argv],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.startswith("rooftui: error: ") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pilot_test
async def test_inputs_without_a_control_are_listed_and_kept_through_key_presses():
    from rooftui.tui.settings import ExplorerSettings

    settings = ExplorerSettings(compute_dtype="fp8", overlap="full", prefill=256,
                                prefill_context=2048)
    async with RooftuiApp(settings=settings).run_test(size=(80, 24)) as pilot:
        screen = await wait_for_explorer(pilot)
        fixed = shown_text(screen.query_one("#control-fixed"))
        assert fixed.startswith("also set:") and "compute dtype fp8" in fixed
        options = dict(compute_dtype="fp8", overlap="full", prefill=256, prefill_context=2048)
        assert_shows(screen, sweep_point(**options))
        await pilot.press("right_square_bracket")  # batch x 2: the fixed inputs stay
        await settle(pilot)
        assert_shows(screen, sweep_point(batch=2, **options))
        assert "overlap full" in shown_text(screen.query_one("#control-fixed"))
        await pilot.press("x")  # back to the model's and profile's own
        await settle(pilot, lambda: screen.figures.report["batch"] == 2
                      and screen.figures.report["prefill_context"] == 0)
        assert_shows(screen, sweep_point(batch=2, prefill=256))
        assert shown_text(screen.query_one("#control-fixed")).strip() == ""
