"""The chart catalogue on real `sweep run` results: files, offline HTML drawn by a real
browser, PNG/SVG export, the `sweep chart` command, slices and their size bound."""

from __future__ import annotations

import json
import math
import re
import struct
import zlib
from html.parser import HTMLParser
from pathlib import Path

import altair as alt
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core.errors import SpecError
from rooftui.sweeps import charts
from rooftui.sweeps.results import read_manifest, scan_results
from tests.conftest import run_sweep, sweep_process
from tests.functional.browser_helpers import render_in_browser

GRID = """
name = "chart-test"
kind = "step"

[axes]
gpu = ["h100-sxm", "a100-80gb"]
model = ["llama-3-8b", "llama-2-7b"]
kv_dtype = ["bf16", "fp8"]
group_size = [1, 4, 8]
context = [1024, 8192, 32768]
batch = [1, 8, 32, 128, 512]

[charts]
names = ["roofline", "throughput_vs_batch", "intensity_ceiling", "attention_share",
         "gpu_comparison"]
"""
# What the default slice of GRID holds still: the first model's own group size (Llama-3-8B:
# 32 heads / 8 KV heads = 4, also the lower median), the lower median context, bf16 KV
# (a menu opening there where the rows allow); dropdowns list GPUs and models in the
# grid's order and open on the first.
HELD = {"group_size": 4, "kv_dtype": "bf16"}
GPUS, MODELS = ["h100-sxm", "a100-80gb"], ["llama-3-8b", "llama-2-7b"]
FIRST_GPU, FIRST_MODEL = GPUS[0], MODELS[0]
FIVE_MB = 5_000_000


@pytest.fixture(scope="module")
def result_dir(tmp_path_factory) -> Path:
    """GRID run by `sweep run` (which renders its [charts]), then PNG and SVG added by
    `sweep chart`."""
    base = tmp_path_factory.mktemp("charts")
    (base / "grid.toml").write_text(GRID)
    out = base / "out"
    run_sweep("run", base / "grid.toml", "--out", out)
    run_sweep("chart", out, "--png", "--svg")
    return out


@pytest.fixture(scope="module")
def points(result_dir) -> pl.DataFrame:
    return scan_results(result_dir).collect().with_columns(pl.col(pl.Categorical).cast(pl.String))


def held(frame: pl.DataFrame, **more) -> pl.DataFrame:
    return frame.filter(**HELD, **more)


# --- files ---------------------------------------------------------------------------

def test_sweep_run_renders_the_grids_charts_and_chart_adds_png_svg(result_dir):
    written = sorted(p.name for p in (result_dir / "charts").iterdir())
    assert written == sorted([f"{name}.{ext}" for name in charts.DEFAULT_CHARTS
                              for ext in ("html", "png", "svg")] + ["index.html"])


def test_chart_command_prints_the_paths_it_wrote(result_dir):
    out = json.loads(run_sweep("chart", result_dir, "--only", "roofline,attention_share",
                               "--json"))
    assert out == [str(result_dir / "charts" / f"{n}.html")
                   for n in ("roofline", "attention_share", "index")]


class _Sources(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sources: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        self.sources += [(tag, value or "") for key, value in attrs if key in ("src", "href")]


@pytest.mark.parametrize("name", charts.DEFAULT_CHARTS)
def test_html_is_self_contained(result_dir, name):
    path = result_dir / "charts" / f"{name}.html"
    text = path.read_text(encoding="utf-8")
    parser = _Sources()
    parser.feed(text)
    assert not [s for s in parser.sources if s[0] == "script"], "no external script"
    assert not [s for s in parser.sources if re.match(r"(https?:)?//", s[1])]
    assert "vegaEmbed(" in text and "function" in text  # the library is inline
    assert path.stat().st_size < FIVE_MB


def png_size_and_pixels(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and the decompressed (still filtered) pixel rows of a PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    at, idat = 8, b""
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        if kind == b"IDAT":
            idat += data[at + 8:at + 8 + length]
        at += 12 + length
    return width, height, zlib.decompress(idat)


@pytest.mark.parametrize("name", charts.DEFAULT_CHARTS)
def test_png_is_the_svg_at_twice_the_size_and_not_blank(result_dir, name):
    svg = (result_dir / "charts" / f"{name}.svg").read_text()
    svg_width, svg_height = (float(v) for v in re.search(
        r'<svg[^>]*\bwidth="([\d.]+)"[^>]*\bheight="([\d.]+)"', svg).groups())
    width, height, pixels = png_size_and_pixels((result_dir / "charts" / f"{name}.png")
                                                .read_bytes())
    assert abs(width - charts.PNG_SCALE * svg_width) <= 1
    assert abs(height - charts.PNG_SCALE * svg_height) <= 1
    assert width >= 2 * 400 and height >= 2 * 200
    # a blank (one-colour) image compresses to a handful of distinct byte values
    assert len(set(pixels)) > 64


# --- in a real browser, offline --------------------------------------------------------

def expected_marks(points: pl.DataFrame) -> dict[str, dict[str, int]]:
    """Marks each chart must draw for the dropdowns' first choices, counted from the raw
    points: by the chart's layer name, or by the kind of mark Vega reports."""
    first = held(points, gpu=FIRST_GPU, model=FIRST_MODEL)
    batches, contexts = points["batch"].n_unique(), points["context"].n_unique()
    gpus, groups = points["gpu"].n_unique(), points["group_size"].n_unique()
    limits = first.group_by("context").agg(pl.col("max_batch").first()).filter(
        (pl.col("max_batch") >= 1) & (pl.col("max_batch") < points["batch"].max())).height
    over_memory = first.filter(~pl.col("fits")).height
    model_rows = held(points, model=FIRST_MODEL, context=8192)  # every GPU: the menu opens on all
    return {
        "roofline": {"roofs": gpus, "ridges": gpus,
                     "parts": 3 * model_rows.filter(pl.col("fits")).height,
                     "parts_over_memory": 3 * model_rows.filter(~pl.col("fits")).height},
        # two panels (Altair renames layers inside a concat: counted by kind)
        "throughput_vs_batch": {"line mark": 2 * contexts, "rule mark": 2 * limits,
                                "point": 2 * contexts * batches},
        "intensity_ceiling": {"ceilings": groups, "largest_batch": groups * contexts,
                              "ridges": gpus, "ridge_labels": gpus},
        "attention_share": {"cells": batches * contexts, "over_memory": over_memory},
        "gpu_comparison": {"parts": gpus * batches * 2},
    }


# Menus: GPU and model, and the held axes kept whole while the rows allow (they open on
# the value the others hold, so the marks counted above are the same).
# Group size opens on each model's own ("own").
DROPDOWNS = {"roofline": ("gpu", "model", "context", "kv_dtype", "group_size"),
             "throughput_vs_batch": ("gpu", "model", "kv_dtype", "group_size"),
             "intensity_ceiling": ("model", "kv_dtype"),
             "attention_share": ("gpu", "model", "kv_dtype", "group_size"),
             "gpu_comparison": ("model", "context", "kv_dtype", "group_size")}


@pytest.mark.browser
@pytest.mark.parametrize("name", charts.DEFAULT_CHARTS)
def test_chart_renders_offline_in_chromium(result_dir, points, tmp_path, name):
    page = render_in_browser(result_dir / "charts" / f"{name}.html", tmp_path)
    assert page.errors == [] and page.log_errors == []
    assert page.warnings == []
    assert page.requests == [], "the page asked for something"
    for mark, count in expected_marks(points)[name].items():
        got = page.count(mark) if mark in page.marks else page.kinds()[mark]
        assert got == count, (mark, page.kinds(), sorted(page.marks))
    options = {"gpu": ["all", *GPUS] if name == "roofline" else GPUS, "model": MODELS,
               "context": ["1024", "8192", "32768"], "kv_dtype": ["bf16", "fp8"],
               "group_size": ["own", "1", "4", "8"]}
    assert page.selects == {f"{axis}_choice": options[axis] for axis in DROPDOWNS[name]}


@pytest.mark.browser
def test_the_browser_harness_sees_errors_and_requests(tmp_path):
    page_file = tmp_path / "bad.html"
    page_file.write_text("<html><head></head><body><script>"
                         "fetch('http://example.com/x').catch(function () {});"
                         "throw new Error('boom');</script></body></html>")
    page = render_in_browser(page_file, tmp_path / "work", budget_ms=3000)
    assert any("boom" in e for e in page.errors) and page.log_errors
    assert "http://example.com/x" in page.requests


# --- slices -----------------------------------------------------------------------------

def test_slice_holds_other_axes_at_their_representative(result_dir):
    """With the manifest's axes, only swept axes are held (and named in the subtitle);
    without them, every input column is, KV heads included."""
    axes = charts.declared_axes(read_manifest(result_dir))
    assert axes == [{"gpu": GPUS}, {"model": MODELS},
                    {"kv_dtype": ["bf16", "fp8"]}, {"group_size": [1, 4, 8]},
                    {"context": [1024, 8192, 32768]}, {"batch": [1, 8, 32, 128, 512]}]
    piece = charts.take_slice(scan_results(result_dir), {"batch": 24, "gpu": 16},
                              ["tokens_per_s"], axes=axes)
    assert piece.fixed == {"model": FIRST_MODEL, "kv_dtype": "bf16", "group_size": 4,
                           "context": 8192}
    assert piece.data.columns == ["batch", "gpu", "tokens_per_s"]
    assert piece.data.height == 5 * 2
    assert ("held fixed: model llama-3-8b · KV bf16 · group size 4 (the model's own) · "
            "context 8,192") in piece.subtitle()
    guessed = charts.take_slice(scan_results(result_dir), {"batch": 24, "gpu": 16},
                                ["tokens_per_s"])
    assert guessed.fixed == {**piece.fixed, "kv_heads": 8}
    assert guessed.data.equals(piece.data)


def test_a_derived_column_keeps_its_matching_value(result_dir):
    """KV heads follow the group size (heads / group size): held per shown combination,
    never cut to one value for all."""
    piece = charts.take_slice(scan_results(result_dir), {"model": 12, "group_size": 8},
                              ["kv_heads"])
    assert "kv_heads" not in piece.fixed
    assert sorted(piece.data.select("model", "group_size", "kv_heads").rows()) == [
        ("llama-2-7b", 1, 32), ("llama-2-7b", 4, 8), ("llama-2-7b", 8, 4),
        ("llama-3-8b", 1, 32), ("llama-3-8b", 4, 8), ("llama-3-8b", 8, 4)]


ZIPPED = """
name = "chart-zip"
kind = "step"
[axes]
model = ["llama-3-8b"]
weight_dtype = ["bf16", "fp8"]
compute_dtype = ["bf16", "fp8"]
mfu = [1.0, 0.7, 0.5]
mbu = [1.0, 0.9, 0.8]
context = [1024, 8192]
batch = [1, 64]
[[zip]]
axes = ["weight_dtype", "compute_dtype"]
[[zip]]
axes = ["mfu", "mbu"]
"""


def test_zipped_axes_follow_their_partner(tmp_path):
    (tmp_path / "grid.toml").write_text(ZIPPED)
    run_sweep("run", tmp_path / "grid.toml", "--out", tmp_path / "out", "--no-charts")
    frame, axes = scan_results(tmp_path / "out"), charts.declared_axes(
        read_manifest(tmp_path / "out"))
    assert {"mfu_assumed": [1.0, 0.7, 0.5], "mbu_assumed": [1.0, 0.9, 0.8]} in axes
    piece = charts.take_slice(frame, {"compute_dtype": 3, "batch": 12}, ["weight_dtype"],
                              axes=axes)
    assert piece.fixed == {"mfu_assumed": 1.0, "mbu_assumed": 1.0, "context": 1024}
    assert sorted(set(piece.data.select("compute_dtype", "weight_dtype").rows())) == [
        ("bf16", "bf16"), ("fp8", "fp8")]  # both roofs, each with its own weights
    derated = charts.take_slice(frame, {"batch": 12}, [], axes=axes,
                                fixed={"mbu_assumed": 0.8})
    assert derated.fixed["mfu_assumed"] == 0.5 and derated.fixed["weight_dtype"] == "bf16"


def test_a_grid_without_decode_steps_still_charts(tmp_path):
    """Prefill-only steps: charts that need decode say so instead of failing."""
    (tmp_path / "grid.toml").write_text('name = "prefill-only"\nkind = "step"\n[axes]\n'
                                        'prefill = [512, 2048]\nbatch = [0]\n')
    run_sweep("run", tmp_path / "grid.toml", "--out", tmp_path / "out")
    throughput = (tmp_path / "out" / "charts" / "throughput_vs_batch.html").read_text()
    assert "no decode step (batch > 0) in these results" in throughput
    assert len(list((tmp_path / "out" / "charts").glob("*.html"))) == 5 + 1  # + index.html


def test_fixed_values_override_and_are_checked(result_dir):
    piece = charts.take_slice(scan_results(result_dir), {"batch": 24},
                              ["tokens_per_s"], fixed={"context": 1024, "gpu": "h100-sxm"})
    assert piece.fixed["context"] == 1024 and piece.fixed["gpu"] == "h100-sxm"
    with pytest.raises(SpecError, match="fixed context = 1000 is not in the results"):
        charts.take_slice(scan_results(result_dir), {"batch": 24}, ["tokens_per_s"],
                          fixed={"context": 1000})


@settings(max_examples=200, deadline=None)
@given(counts=st.dictionaries(st.sampled_from(["gpu", "model", "batch", "context", "group"]),
                              st.tuples(st.integers(1, 300), st.integers(1, 40)),
                              min_size=1),
       budget=st.integers(1, 20_000), start=st.sampled_from([0, 1]))
def test_fit_bounds_every_slice(counts, budget, start):
    """Rank-spaced (from 0) and log-spaced (from 1) picks alike stay within every cap
    and the budget, and keep the first and last values."""
    values = {axis: list(range(start, start + count)) for axis, (count, _) in counts.items()}
    caps = {axis: cap for axis, (_, cap) in counts.items()}
    kept = charts._fit(values, caps, budget, last=charts.CUT_LAST)
    sizes = {axis: len(v) for axis, v in kept.items()}
    assert min(sizes.values()) >= 1
    assert all(sizes[a] <= min(caps[a], len(values[a])) for a in sizes)
    assert math.prod(sizes.values()) <= budget
    for axis, v in kept.items():
        assert v == sorted(set(v)) and v[0] == start
        if len(v) > 1:
            assert v[-1] == values[axis][-1]  # the largest value is always kept


# --- settings and errors -----------------------------------------------------------------

def test_chart_settings_validate_the_charts_table():
    settings_ = charts.chart_settings({"names": ["roofline"], "fixed": {"mfu": 0.5},
                                       "png": True})
    assert settings_.names == ("roofline",) and settings_.fixed == {"mfu_assumed": 0.5}
    assert charts.chart_settings(None).names == charts.DEFAULT_CHARTS
    for table, message in (({"nmes": []}, "unknown key 'nmes'"),
                           ({"names": ["roofline", "rooflin"]}, "did you mean roofline"),
                           ({"fixed": {"colour": 1}}, "fixed must be a table"),
                           ({"png": "yes"}, "png must be true or false")):
        with pytest.raises(SpecError, match=message):
            charts.chart_settings(table)


@pytest.mark.parametrize("args, message", [
    (("no/such/dir",), "no manifest.json"),
    (("{out}", "--only", "roofline,heatmap"), "unknown chart 'heatmap'"),
])
def test_bad_input_is_one_line_and_exit_2(result_dir, args, message):
    done = sweep_process("chart", *(a.format(out=result_dir) for a in args))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert message in done.stderr


def test_a_folder_without_points_is_refused(tmp_path):
    (tmp_path / "manifest.json").write_text("{}")
    done = sweep_process("chart", tmp_path)
    assert done.returncode == 2 and "no results" in done.stderr
    assert done.stderr.count("\n") == 1


# --- the size bound ---------------------------------------------------------------------

WIDE = """
name = "chart-bound"
kind = "step"

[axes]
gpu = ["a100-40gb", "a100-80gb", "b200", "gaudi3", "gb200", "h100-nvl", "h100-pcie",
       "h100-sxm", "h200", "l4", "l40s", "mi300x", "mi325x", "mi355x", "rtx-4090"]
model = ["llama-3-8b", "llama-2-7b", "mistral-7b", "llama-3-70b", "llama-2-70b",
         "qwen2.5-72b", "qwen2.5-7b", "phi-3-mini", "llama-3.1-8b", "llama-3.1-405b",
         "gemma-2-9b", "gemma-2-27b"]
group_size = [1, 4]
context = {{ start = 128, stop = 131072, num = 20, scale = "geometric" }}
batch = {{ start = 8, stop = {stop}, step = 8 }}
"""


def chart_rows(chart) -> int:
    """Rows of the chart's main data set (the side tables, roofs and limits, are small)."""
    with alt.data_transformers.disable_max_rows():
        return max(len(rows) for rows in chart.to_dict()["datasets"].values())


@pytest.mark.slow
def test_charts_stay_bounded_however_large_the_grid(tmp_path):
    """Every GPU and 12 models: more combinations than a chart keeps, so the slices hit
    their budget, and doubling the points (187,200 -> 374,400) does not move past it: a
    10-million-point grid gives files of the same size. Each stays under 5 MB."""
    rows = {}
    for batches in (26, 52):
        grid = tmp_path / f"wide-{batches}.toml"
        grid.write_text(WIDE.format(stop=8 * batches))
        out = tmp_path / f"out-{batches}"
        run_sweep("run", grid, "--out", out, "--no-charts")
        frame, axes = scan_results(out), charts.declared_axes(read_manifest(out))
        assert frame.select(pl.len()).collect().item() == 15 * 12 * 2 * 20 * batches
        made = {name: function(frame, axes=axes) for name, function in charts.CHARTS.items()}
        rows[batches] = {name: chart_rows(chart) for name, chart in made.items()}
    for counts in rows.values():
        assert max(counts.values()) <= charts.MAX_ROWS
        assert counts["throughput_vs_batch"] > charts.MAX_ROWS / 2  # the budget binds
        assert counts["attention_share"] > charts.MAX_ROWS / 2
    for name, chart in made.items():
        html = charts.save_chart(chart, tmp_path / "charts" / name)[0]
        assert html.stat().st_size < FIVE_MB, name
