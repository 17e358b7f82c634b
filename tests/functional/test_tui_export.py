"""`e` exports the current view as a standalone HTML chart under the output folder, says
where, and the file is a complete page that draws in a browser with no network."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from test_tui_support import (
    pilot_test,
    settle,
    wait_for_explorer,
    wait_for_results,
    write_results_dir,
)

from rooftui.tui.rooftui_app import RooftuiApp

pytestmark = pytest.mark.slow  # altair, vl-convert and the Vega bundle: seconds each


class _Page(HTMLParser):
    """Tags opened and closed, and the scripts a page loads from elsewhere."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.external_scripts: list[str] = []
        self.saw = set()

    def handle_starttag(self, tag, attrs):
        self.saw.add(tag)
        if tag == "script" and dict(attrs).get("src"):
            self.external_scripts.append(dict(attrs)["src"])
        if tag not in ("meta", "br", "link", "img", "input"):
            self.open.append(tag)

    def handle_endtag(self, tag):
        if self.open and self.open[-1] == tag:
            self.open.pop()


def assert_standalone_html(path) -> str:
    text = path.read_text(encoding="utf-8")
    page = _Page()
    page.feed(text)
    assert text.lstrip().lower().startswith("<!doctype html>")
    assert {"html", "head", "body", "script"} <= page.saw and page.open == []
    assert page.external_scripts == []  # Vega is embedded: the file opens offline
    return text


async def exported_files(pilot, output_dir, count: int) -> list:
    await pilot.press("e")
    await settle(pilot, until=lambda: len(list(output_dir.glob("*.html"))) == count)
    paths = sorted(output_dir.glob("*.html"))
    messages = " ".join(str(n.message) for n in pilot.app._notifications)
    assert all(str(path) in messages for path in paths)  # it says where
    return paths


@pilot_test
async def test_explorer_export(tmp_path):
    output_dir = tmp_path / "outputs"
    async with RooftuiApp(output_dir=output_dir).run_test(size=(80, 24)) as pilot:
        await wait_for_explorer(pilot)
        await pilot.press("right_square_bracket")  # batch 2
        await settle(pilot)
        roofline, throughput = await exported_files(pilot, output_dir, 2)
    assert roofline.name.startswith("explorer-h100-sxm-llama-3-8b-b2-s1024-roofline-")
    assert throughput.name.startswith("explorer-h100-sxm-llama-3-8b-b2-s1024-throughput-")
    assert "Roofline" in assert_standalone_html(roofline)  # the catalogue's charts
    assert "Decode throughput vs batch" in assert_standalone_html(throughput)


@pilot_test
async def test_results_export(tmp_path):
    output_dir = tmp_path / "outputs"
    app = RooftuiApp(write_results_dir(tmp_path / "sweep"), output_dir=output_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_results(pilot)
        (path,) = await exported_files(pilot, output_dir, 1)
    assert path.name.startswith("results-tokens-per-s-vs-batch-context-")
    assert "tokens_per_s vs batch" in assert_standalone_html(path)


@pytest.mark.browser
@pilot_test
async def test_explorer_export_draws_in_a_browser(tmp_path):
    from browser_helpers import render_in_browser

    output_dir = tmp_path / "outputs"
    async with RooftuiApp(output_dir=output_dir).run_test(size=(80, 24)) as pilot:
        await wait_for_explorer(pilot)
        paths = await exported_files(pilot, output_dir, 2)
    for path in paths:
        page = render_in_browser(path, tmp_path / "browser")
        assert page.errors == [] and page.requests == [], path.name
        assert page.marks, path.name


@pytest.mark.browser
@pilot_test
async def test_results_export_draws_in_a_browser(tmp_path):
    from browser_helpers import render_in_browser

    output_dir = tmp_path / "outputs"
    app = RooftuiApp(write_results_dir(tmp_path / "sweep"), output_dir=output_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_results(pilot)
        (path,) = await exported_files(pilot, output_dir, 1)
    page = render_in_browser(path, tmp_path / "browser")
    assert page.errors == [] and page.requests == []
    assert page.count("points") == 120  # a point per row of the plot's sample


async def export_failure(pilot) -> str:
    """The one line `e` says when the export fails."""
    def said() -> list[str]:
        return [str(n.message) for n in pilot.app._notifications
                if str(n.message).startswith("export failed")]

    await pilot.press("e")
    await settle(pilot, until=said)
    assert pilot.app.is_running
    (message,) = said()
    assert "\n" not in message
    return message


@pytest.mark.parametrize("where", ["a file", "under a file"])
@pilot_test
async def test_an_output_folder_that_cannot_be_made_is_one_line(tmp_path, where):
    blocker = tmp_path / "outputs"
    blocker.write_text("not a folder")
    output_dir = blocker if where == "a file" else blocker / "charts"
    async with RooftuiApp(output_dir=output_dir).run_test(size=(80, 24)) as pilot:
        await wait_for_explorer(pilot)
        message = await export_failure(pilot)
    assert message == (f"export failed: cannot create the folder {output_dir}: a file "
                       "stands where a folder is expected")
    assert blocker.read_text() == "not a folder"


@pilot_test
async def test_a_full_disk_during_export_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    import errno

    from rooftui.sweeps import chart_files

    def fill_the_disk(path, spec_json):
        path.write_text("<!DOCTYPE html><html><head>")  # half a page, then no space
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(chart_files, "write_page", fill_the_disk)
    output_dir = tmp_path / "outputs"
    async with RooftuiApp(output_dir=output_dir).run_test(size=(80, 24)) as pilot:
        await wait_for_explorer(pilot)
        message = await export_failure(pilot)
    assert message.startswith(f"export failed: cannot write {output_dir}/explorer-")
    assert message.endswith(": no space left on the device")
    assert list(output_dir.iterdir()) == []  # no half-written file, no temporary
