"""The TUI never exits on a bad value or a failed computation (issue 13): generated bad
values in every numeric field of the Explorer and the Optimize view are refused in place
with the CLI's range while the figures stay those of the last valid value; an exception
in a worker is a line on screen; `rooftui --model PATH` / `--gpu PATH` open on a file
or a Hugging Face model folder."""

from __future__ import annotations

import contextlib
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from test_tui_support import pilot_test, settle, shown_text, sweep_point, wait_for_explorer
from textual.widgets import Input, Select

from rooftui.core.limits import BOUNDS
from rooftui.core.spec_files import shipped_dir
from rooftui.tui import app as app_module
from rooftui.tui.rooftui_app import RooftuiApp
from rooftui.tui.screens.optimize import FIELDS, READY, OptimizeScreen
from rooftui.tui.screens.results import ResultsScreen
from rooftui.tui.widgets.controls import CONTROLS

HF_CONFIGS = Path(__file__).parents[1] / "data" / "hf-configs"
NUMBER_CONTROLS = [spec for spec in CONTROLS if spec.kind == "number"]
OPTIMIZE_FIELDS = [field for field, *_ in FIELDS]

# Above every bound of a count or a length (the largest is a batch's), and far below
# what a float holds: a huge integer is refused for its size, not for its form.
HUGE = 10**15


def _not_a_number(text: str) -> bool:
    cleaned = text.strip().replace(",", "").replace("_", "")
    if not cleaned:
        return False  # blank: the profile's value in MFU, MBU, acceptance
    try:
        float(cleaned)
    except ValueError:
        return True
    return not cleaned.isascii()  # other scripts' digits, which `float` reads


# Text no numeric field of the TUI accepts: not finite, negative, far out of range, not a
# number at all (`64k`, other scripts, symbols).
BAD_VALUES = st.one_of(
    st.sampled_from(["nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e308", "-1e308",
                     "1e309", "99999999999999999999", "-1", "-0.5", "64k", "1e", "--1",
                     "١٢٣", "１２", "½", "∞", "0x10", "1/2", "💥"]),
    st.integers(min_value=HUGE).map(str),
    st.integers(max_value=-1).map(str),
    st.floats(allow_nan=True, allow_infinity=True).filter(
        lambda x: not math.isfinite(x) or x < 0 or x > HUGE).map(repr),
    st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1,
            max_size=12).filter(_not_a_number),
)
# Few examples, each a whole app session; no shrinking (a failure names its values).
EXAMPLES = settings(max_examples=6, deadline=None, derandomize=True, database=None,
                    phases=(Phase.explicit, Phase.generate),
                    suppress_health_check=[HealthCheck.too_slow])


def message(screen) -> str:
    return shown_text(screen.query_one("#control-message"))


async def paste(pilot, field: Input, text: str) -> None:
    """The whole text at once, as a paste (one change, no valid prefix computed)."""
    field.focus()
    field.value = text
    await settle(pilot)


@pytest.mark.slow  # 100-odd values, each through the screen
@EXAMPLES
@given(values=st.lists(BAD_VALUES, min_size=3, max_size=3))
@pilot_test
async def test_bad_values_in_every_explorer_field_are_refused_in_place(values):
    seed = sweep_point()
    async with RooftuiApp().run_test(size=(100, 30)) as pilot:
        screen = await wait_for_explorer(pilot)
        for spec in NUMBER_CONTROLS:
            field = screen.query_one(f"#control-{spec.key.replace('_', '-')}", Input)
            default = field.value
            for text in values:
                await paste(pilot, field, text)
                assert pilot.app.is_running
                assert field.has_class("-invalid"), (spec.key, text)
                shown = message(screen)
                assert f"{spec.label} must be {BOUNDS[spec.key].describe()}" in shown
                assert screen.figures.report == seed, (spec.key, text)
            await paste(pilot, field, default)
            assert not field.has_class("-invalid")


async def type_keys(pilot, screen, key: str, text: str) -> Input:
    """`text` typed key by key into the empty field of `key` (each prefix a change)."""
    field = screen.query_one(f"#control-{key}", Input)
    field.focus()
    field.value = ""
    await pilot.press(*text)
    await settle(pilot)
    assert pilot.app.is_running and field.has_class("-invalid")
    return field


@pilot_test
async def test_a_huge_number_typed_key_by_key_into_tp_and_batch():
    """The issue's case: every prefix the field accepts is computed, the rest refused;
    the figures are those of the last value accepted."""
    huge = "99999999999999999999"
    async with RooftuiApp().run_test(size=(100, 30)) as pilot:
        screen = await wait_for_explorer(pilot)
        tp = await type_keys(pilot, screen, "tp", huge)
        assert f"TP must be {BOUNDS['tp'].describe()}" in message(screen)
        # 9, 99 and 999 GPUs do not split 32 heads: the core refused each in turn
        assert screen.figures.report == sweep_point()
        await paste(pilot, tp, "1")

        await type_keys(pilot, screen, "batch", huge)
        accepted = max(int(huge[:n]) for n in range(1, len(huge) + 1)
                       if int(huge[:n]) <= BOUNDS["batch"].maximum)
        assert screen.figures.settings.batch == accepted
        assert screen.figures.report == sweep_point(batch=accepted)


@pilot_test
async def test_the_step_keys_stop_at_the_batch_bound():
    async with RooftuiApp().run_test(size=(100, 30)) as pilot:
        screen = await wait_for_explorer(pilot)
        top = int(BOUNDS["batch"].maximum)
        await paste(pilot, screen.query_one("#control-batch", Input), str(top // 2 + 1))
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert screen.settings.batch == top
        assert screen.figures.report == sweep_point(batch=top)


async def open_optimize(pilot) -> OptimizeScreen:
    await wait_for_explorer(pilot)
    await pilot.press("O")
    await settle(pilot, until=lambda: isinstance(pilot.app.screen, OptimizeScreen))
    return pilot.app.screen


@pytest.mark.slow  # 100-odd values, each through the screen
@EXAMPLES
@given(values=st.lists(BAD_VALUES.filter(lambda text: text.strip()), min_size=3,
                       max_size=3))
@pilot_test
async def test_bad_values_in_every_optimize_field_are_refused_in_place(values):
    async with RooftuiApp().run_test(size=(140, 40)) as pilot:
        screen = await open_optimize(pilot)
        status = screen.query_one("#optimize-status")
        for name in OPTIMIZE_FIELDS:
            field = screen.query_one(f"#optimize-{name}", Input)
            default = field.value
            for text in values:
                field.value = text
                await settle(pilot)
                assert field.has_class("-invalid"), (name, text)
                assert "must be" in shown_text(status), (name, text)
            await pilot.press("r")  # no search starts: the refusal stays
            await settle(pilot)
            assert pilot.app.is_running and pilot.app.screen is screen
            assert screen.result is None and "must be" in shown_text(status)
            field.value = default
            await settle(pilot)
            assert not field.has_class("-invalid")
        assert shown_text(status).strip() == READY


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("batches", "8,99999999999999999999", f"batches must be {BOUNDS['max_batch'].describe()}"),
    ("requests", "99999999999999999999", f"requests must be {BOUNDS['requests'].describe()}"),
    ("requests", str(int(BOUNDS["requests"].maximum) + 1), "requests must be"),
    ("budgets", "512,,nan", f"budgets must be {BOUNDS['token_budget'].describe()}"),
    ("slo-ttft", "0", f"TTFT must be {BOUNDS['slo_ttft'].describe()}"),
    ("attainment", "1.5", f"share must be {BOUNDS['attainment'].describe()}"),
])
@pilot_test
async def test_the_issues_optimize_cases_are_said_and_run_nothing(name, text, expected):
    async with RooftuiApp().run_test(size=(140, 40)) as pilot:
        screen = await open_optimize(pilot)
        screen.query_one(f"#optimize-{name}", Input).value = text
        await pilot.press("r")
        await settle(pilot)
        assert pilot.app.is_running and screen.result is None
        assert expected in shown_text(screen.query_one("#optimize-status"))


# --- an exception in a worker ------------------------------------------------------------
@pilot_test
async def test_an_exception_in_the_explorers_worker_is_a_line_in_place(monkeypatch):
    from rooftui.tui.screens import explorer

    async with RooftuiApp().run_test(size=(100, 30)) as pilot:
        screen = await wait_for_explorer(pilot)

        def broken(settings):
            raise ZeroDivisionError("float division by zero\nsecond line")

        monkeypatch.setattr(explorer, "compute_figures", broken)
        await paste(pilot, screen.query_one("#control-batch", Input), "64")
        assert pilot.app.is_running
        shown = message(screen)
        assert "ZeroDivisionError: float division by zero" in shown
        assert "second line" not in shown
        assert screen.figures.report == sweep_point()  # the last figures stay
        monkeypatch.undo()
        await paste(pilot, screen.query_one("#control-batch", Input), "32")
        assert message(screen).strip() == ""
        assert screen.figures.report == sweep_point(batch=32)


@pilot_test
async def test_an_exception_in_the_optimize_search_is_a_line_in_place(monkeypatch):
    from rooftui.tui.screens import optimize

    def broken(*args, **kwargs):
        raise MemoryError("the simulation grew too large")

    monkeypatch.setattr(optimize, "search", broken)
    async with RooftuiApp().run_test(size=(140, 40)) as pilot:
        screen = await open_optimize(pilot)
        await pilot.press("r")
        await settle(pilot)
        assert pilot.app.is_running and pilot.app.screen is screen
        assert "MemoryError: the simulation grew too large" in shown_text(
            screen.query_one("#optimize-status"))


@pilot_test
async def test_an_exception_opening_results_is_a_line_in_place(monkeypatch, tmp_path):
    from rooftui.tui import results_data

    def broken(self, directory):
        raise KeyError("points")

    monkeypatch.setattr(results_data.ResultsData, "__init__", broken)
    async with RooftuiApp(tmp_path).run_test(size=(100, 30)) as pilot:
        await settle(pilot, until=lambda: isinstance(pilot.app.screen, ResultsScreen))
        assert pilot.app.is_running
        opening = pilot.app.screen.query_one("#results-opening")
        assert shown_text(opening).strip() == "KeyError: 'points'"


# --- rooftui --model PATH, --gpu PATH -------------------------------------------------------
def app_from_main(argv: list[str], monkeypatch) -> RooftuiApp:
    """The app `main` builds from `argv` (its argument handling), not run."""
    built = []
    monkeypatch.setattr(RooftuiApp, "run", lambda self, *args, **kwargs: built.append(self))
    with contextlib.suppress(SystemExit):
        app_module.main(argv)
    assert built, "main refused the arguments"
    return built[0]


def model_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "Meta-Llama-3-8B"
    folder.mkdir()
    shutil.copy(HF_CONFIGS / "llama-3-8b.json", folder / "config.json")
    return folder


@pytest.mark.parametrize("kind", ["config.json", "folder"])
def test_rooftui_model_path_opens_on_that_model(kind, tmp_path, monkeypatch):
    path = str(HF_CONFIGS / "llama-3-8b.json" if kind == "config.json"
               else model_folder(tmp_path))
    gpu = tmp_path / "my-gpu.toml"
    shutil.copy(shipped_dir("gpus") / "h200.toml", gpu)
    app = app_from_main(["--model", path, "--gpu", str(gpu), "--batch", "8"], monkeypatch)

    @pilot_test
    async def run():
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await wait_for_explorer(pilot)
            controls = {spec.key: spec for spec in CONTROLS}
            assert screen.query_one("#control-model", Select).value == path
            assert screen.query_one("#control-gpu", Select).value == str(gpu)
            labels = dict((value, label) for label, value
                          in controls["model"].choices(screen.settings))
            assert labels[path] == Path(path).name  # a config.json's name is its path
            assert dict((value, label) for label, value in controls["gpu"].choices(
                screen.settings))[str(gpu)] == "H200 SXM (my-gpu.toml)"
            assert screen.figures.report == sweep_point(model=path, gpu=str(gpu), batch=8)
            # and back to a shipped model, as from the list
            screen.query_one("#control-model", Select).value = "llama-2-7b"
            await settle(pilot)
            assert screen.figures.report == sweep_point(model="llama-2-7b", gpu=str(gpu),
                                                        batch=8)
    run()


@pilot_test
async def test_a_row_naming_a_model_file_opens_in_the_explorer():
    """A sweep row whose grid named a model by path: the select gains the file."""
    path = str(HF_CONFIGS / "mistral-7b.json")
    async with RooftuiApp().run_test(size=(100, 30)) as pilot:
        screen = await wait_for_explorer(pilot)
        screen.open_settings(screen.settings.with_changes(model=path))
        await settle(pilot)
        assert pilot.app.is_running
        assert screen.query_one("#control-model", Select).value == path
        assert screen.figures.report == sweep_point(model=path)


def test_rooftui_model_path_that_is_not_a_model_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    for argv, said in ((["--model", str(tmp_path / "missing.json")], "not found"),
                       (["--model", str(tmp_path / "empty")], "config.json")):
        result = subprocess.run([sys.executable, "-m", "rooftui.tui.app", *argv],
                                capture_output=True, text=True)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("rooftui: error: ") and said in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
