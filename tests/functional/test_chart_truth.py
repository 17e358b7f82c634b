"""Charts that tell the truth at a glance (issue 15): each model held at its own
structure, held values the charts draw, points that do not fit marked with their reason
and kept out of the axes, controls bound to Vega parameters, the best of every search
marked, the folder's dashboard; in headless Chromium, offline, the controls redraw."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import altair as alt
import numpy as np
import polars as pl
import pytest

from rooftui.sweeps import charts
from rooftui.sweeps.chart_marks import OKABE_ITO
from rooftui.sweeps.chart_slices import LABELS
from rooftui.sweeps.results import read_manifest, scan_results
from tests.conftest import run_sweep
from tests.functional.browser_helpers import render_in_browser
from tests.functional.test_sweep_kinds import OPTIMIZE, RATES, SIMULATE

# Own group sizes: llama-3-8b 32/8 = 4, llama-3-70b 64/8 = 8, phi-3-mini 32/32 = 1; the
# median rule would hold 2 (the lower median of 1, 2, 4, 8) for all three.
GRID = """
name = "chart-truth"
kind = "step"
profile = "ideal"

[axes]
gpu = ["h100-sxm", "l40s"]
model = ["llama-3-8b", "llama-3-70b", "phi-3-mini"]
group_size = [1, 2, 4, 8]
kv_dtype = ["bf16", "fp8"]
context = { start = 128, stop = 131072, scale = "log2" }
batch = [1, 32, 1024]
"""
OWN_GROUP = {"llama-3-8b": 4, "llama-3-70b": 8, "phi-3-mini": 1}


@pytest.fixture(scope="module")
def result_dir(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("truth")
    (base / "grid.toml").write_text(GRID)
    out = base / "out"
    run_sweep("run", base / "grid.toml", "--out", out)
    return out


@pytest.fixture(scope="module")
def made(result_dir) -> dict[str, dict]:
    """Each default chart's Vega-Lite spec, as `render_charts` builds it."""
    frame, manifest = scan_results(result_dir), read_manifest(result_dir)
    axes = charts.declared_axes(manifest)
    with alt.data_transformers.disable_max_rows():
        return {name: charts.CHARTS[name](frame, axes=axes, grid=manifest).to_dict()
                for name in charts.DEFAULT_CHARTS}


def rows(spec: dict) -> list[dict]:
    """Every row of every data set of a spec."""
    return [row for data in spec["datasets"].values() for row in data]


def subtitle(spec: dict) -> str:
    return " ".join(spec["title"]["subtitle"])


def layers(spec: dict) -> list[dict]:
    """Every unit spec of a (layered, concatenated, faceted) spec."""
    found, todo = [], [spec]
    while todo:
        node = todo.pop()
        if "mark" in node:
            found.append(node)
        for key in ("layer", "hconcat", "vconcat", "concat"):
            todo += node.get(key, [])
        if isinstance(node.get("spec"), dict):
            todo.append(node["spec"])
    return found


def params(spec: dict) -> dict[str, dict]:
    found = {p["name"]: p for p in spec.get("params", [])}
    for node in layers(spec):
        found |= {p["name"]: p for p in node.get("params", [])}
    return found


# --- held values ------------------------------------------------------------------------

def test_each_model_is_held_at_its_own_group_size(result_dir, made):
    manifest = read_manifest(result_dir)
    piece = charts.take_slice(scan_results(result_dir), {"model": 12, "batch": 12},
                              ["tokens_per_s", "group_size"],
                              axes=charts.declared_axes(manifest), grid=manifest)
    assert piece.native == {"group_size": OWN_GROUP}
    assert dict(piece.data.select("model", "group_size").unique().rows()) == OWN_GROUP
    for name in ("roofline", "throughput_vs_batch", "attention_share", "gpu_comparison"):
        assert ("group size: each model's own (llama-3-8b 4, llama-3-70b 8, phi-3-mini 1)"
                in subtitle(made[name])), name


def test_the_throughput_chart_matches_the_model_as_it_is(result_dir, made):
    """The issue's numbers: llama-3-8b on an H100 SXM at batch 32, context 4096 gives
    3,330 tok/s (its own 8 KV heads), not the 2,148 of a 16-KV-head variant."""
    point = [r for r in rows(made["throughput_vs_batch"]) if r.get("gpu") == "h100-sxm"
             and r.get("model") == "llama-3-8b" and r.get("context") == 4096
             and r.get("batch") == 32 and r.get("kv_dtype") == "bf16"
             and r.get("group_size_own")]  # as the page opens: each model's own group size
    assert [round(r["tok_s"]) for r in point] == [3330]


def test_a_held_context_is_one_the_charts_draw(made):
    # held, or a menu's opening value
    held = re.search(r"context (?:\(opens on )?([\d,]+)", subtitle(made["roofline"])).group(1)
    drawn = {r["context"] for r in rows(made["throughput_vs_batch"]) if "context" in r}
    assert int(held.replace(",", "")) in drawn and len(drawn) < 11  # thinned, yet kept


def test_the_subtitle_names_every_held_axis(result_dir, made):
    shown = {"roofline": {"gpu", "model", "batch", "compute_dtype"},
             "throughput_vs_batch": {"gpu", "model", "context", "batch"},
             "intensity_ceiling": {"model", "group_size", "context"},
             "attention_share": {"gpu", "model", "batch", "context"},
             "gpu_comparison": {"gpu", "model", "batch"}}
    swept = [axis for dimension in charts.declared_axes(read_manifest(result_dir))
             for axis in dimension]
    for name, spec in made.items():
        text = subtitle(spec)
        for axis in set(swept) - shown[name]:
            assert LABELS[axis] in text, (name, axis)
        assert "profile ideal" in text and "TP 1" in text


# --- feasibility ------------------------------------------------------------------------

def test_points_that_do_not_fit_say_why(made):
    reasons = {r["memory"] for r in rows(made["roofline"]) if r.get("fits") is False}
    # Llama-3-70B's bf16 weights (141 GB) on one 80 GB H100 or a 48 GB L40S
    assert "weights 141 GB > 80 GB: needs TP ≥ 2" in reasons
    assert "weights 141 GB > 48 GB: needs TP ≥ 3" in reasons
    assert any(re.fullmatch(r"KV [\d.]+ [GT]B > [\d.]+ GB free", r) for r in reasons)
    fitting = {r["memory"] for r in rows(made["roofline"]) if r.get("fits") is True}
    assert all(r.startswith("fits: weights") for r in fitting)


def test_points_that_do_not_fit_have_their_own_mark_and_never_set_an_axis(made):
    roofline = {node.get("name"): node for node in layers(made["roofline"])}
    assert roofline["parts"]["mark"]["filled"] is True
    assert roofline["parts_over_memory"]["mark"]["filled"] is False
    assert {"filter": "!datum.fits"} in roofline["parts_over_memory"]["transform"]
    # the log axes span the roofs and the points that fit (a quarter-decade margin)
    points = [r for r in rows(made["roofline"]) if "part" in r]
    ridges = [r["ridge"] for r in rows(made["roofline"]) if "ridge" in r]
    fitting = max(r["intensity"] for r in points if r["fits"])
    low, high = roofline["parts"]["encoding"]["x"]["scale"]["domain"]
    assert high == pytest.approx(4 * max(fitting, *ridges), rel=1e-3)
    assert roofline["parts_over_memory"]["mark"]["clip"] is True  # past it: clipped
    # throughput and the GPU comparison cut what does not fit to what does
    for name, field in (("throughput_vs_batch", "shown"), ("gpu_comparison", "shown_ms")):
        text = json.dumps(made[name])
        assert "datum.fits || !isValid" in text and f'"{field}' in text, name


def test_the_roofline_has_one_hue_per_gpu_from_a_colour_blind_safe_palette(made):
    roofs = {node.get("name"): node for node in layers(made["roofline"])}["roofs"]
    scale = roofs["encoding"]["color"]["scale"]
    assert roofs["encoding"]["color"]["field"] == "gpu"
    assert scale["domain"] == ["h100-sxm", "l40s"] and len(set(scale["range"])) == 2
    assert set(scale["range"]) <= set(OKABE_ITO)


def test_held_axes_become_menus_while_the_rows_allow(result_dir, made):
    """KV dtype (2 values) fits every chart's budget, as a menu opening on bf16. A menu's
    rows are a star around the opening values (one menu changed at a time), so a menu
    costs its values, not their product with the others'; past the budget the widest
    menu is thinned (keeping its opening value), and with no room left it stays held."""
    for name, spec in made.items():
        menu = params(spec)["kv_dtype_choice"]
        assert menu["value"] == "bf16" and menu["bind"]["options"] == ["bf16", "fp8"], name
        assert re.search(r"menus: .*KV \(opens on bf16\)", subtitle(spec)), name
    frame, axes = scan_results(result_dir), charts.declared_axes(read_manifest(result_dir))

    def sliced(points: int):  # gpu 2 x batch 3 = 6 rows a value; `points` rows in all
        return charts.take_slice(frame, {"gpu": 8, "batch": 8}, [], axes=axes,
                                 menus=("kv_dtype", "context"),
                                 rows_per_point=charts.MAX_ROWS // points)

    wide = sliced(40)  # 34 rows left: 5 more values, KV's fp8 and 5 of 11 contexts
    assert wide.menus == {"kv_dtype": "bf16", "context": 4096}
    assert 4096 in wide.values("context") and len(wide.values("context")) == 5
    assert wide.data.height == 6 * (1 + 1 + 4)
    narrow = sliced(12)  # room for KV's fp8 only
    assert narrow.menus == {"kv_dtype": "bf16"} and narrow.fixed["context"] == 4096


# the grid's axes each chart holds (not plotted): every one a bound menu, except the GPU
# and batch the intensity chart holds by design (its ridges and its largest batch)
HELD_AXES = {"roofline": {"context", "kv_dtype", "group_size"},
             "throughput_vs_batch": {"kv_dtype", "group_size"},
             "intensity_ceiling": {"kv_dtype"},
             "attention_share": {"kv_dtype", "group_size"},
             "gpu_comparison": {"context", "kv_dtype", "group_size"}}


def test_every_held_axis_has_a_bound_parameter(made):
    for name, spec in made.items():
        for axis in HELD_AXES[name]:
            menu = params(spec)[f"{axis}_choice"]
            assert len(menu["bind"]["options"]) > 1, (name, axis)
            assert {r[axis] for r in rows(spec) if axis in r} >= {
                o for o in menu["bind"]["options"] if o != "own"}, (name, axis)
        held = next((line for line in spec["title"]["subtitle"]
                     if line.startswith("held fixed")), "")
        assert not any(LABELS[a] in held for a in HELD_AXES[name]), (name, held)
    group = params(made["roofline"])["group_size_choice"]
    assert group["value"] == "own" and group["bind"]["options"] == ["own", 1, 2, 4, 8]


def test_a_menu_row_changes_one_held_axis_at_a_time(made):
    """The rows behind the menus are a star around the opening values: each row is at
    every menu's opening value but at most one, and the page opens on exactly the rows a
    chart would hold without menus (a model's own group size, bf16 KV)."""
    spec = made["throughput_vs_batch"]
    data = [r for r in rows(spec) if "group_size_own" in r]
    away = [(r["kv_dtype"] != "bf16") + (not r["group_size_own"]) for r in data]
    assert max(away) == 1 and 0 in away
    opening = [r for r, a in zip(data, away, strict=True) if a == 0]
    assert all(r["group_size"] == OWN_GROUP[r["model"]] for r in opening)
    # a changed menu draws the held context (4096) only, within the row budget
    assert {r["context"] for r, a in zip(data, away, strict=True) if a} == {4096}
    assert len(data) <= charts.MAX_ROWS


def test_pictures_are_made_from_the_rows_the_page_opens_on(made, result_dir):
    """PNG and SVG have no menus: they convert the spec cut to the menus' opening rows."""
    from rooftui.sweeps import chart_files

    frame, manifest = scan_results(result_dir), read_manifest(result_dir)
    chart = charts.roofline_chart(frame, axes=charts.declared_axes(manifest), grid=manifest)
    spec, frames = chart_files.chart_spec(chart)
    cut = chart_files.default_rows(spec, frames)
    points = max(cut.values(), key=lambda f: f.height)
    everything = max(frames.values(), key=lambda f: f.height)
    assert points.height < everything.height
    assert points["group_size_own"].all() and set(points["kv_dtype"]) == {"bf16"}
    assert set(points["context"]) == {4096} and set(points["model"]) == {"llama-3-8b"}
    assert set(points["gpu"]) == {"h100-sxm", "l40s"}  # the GPU menu opens on all
    assert json.loads(chart_files.spec_text(spec, cut))["datasets"]


# what each chart plots (or, for the intensity chart, holds by design) of the default grid
PLOTTED = {"roofline": {"gpu", "model", "batch", "compute_dtype"},
           "throughput_vs_batch": {"gpu", "model", "context", "batch"},
           "intensity_ceiling": {"model", "group_size", "context", "gpu", "batch"},
           "attention_share": {"gpu", "model", "batch", "context"},
           "gpu_comparison": {"gpu", "model", "batch"}}


@pytest.mark.slow
def test_the_default_grid_offers_every_held_axis_at_each_models_own_structure(tmp_path):
    """specs/grid.toml (1,045,440 rows): every axis a chart holds is a bound menu (one
    per zipped pair), each model opens on its own group size, the held context is among
    those plotted, and no chart's data passes the row budget."""
    out = tmp_path / "out"
    run_sweep("run", Path(__file__).parents[2] / "specs" / "grid.toml", "--out", out,
              "--no-charts")
    frame, manifest = scan_results(out), read_manifest(out)
    axes = charts.declared_axes(manifest)
    with alt.data_transformers.disable_max_rows():
        made = {name: charts.CHARTS[name](frame, axes=axes, grid=manifest).to_dict()
                for name in charts.DEFAULT_CHARTS}
    own = {m: charts.take_slice(frame, {"model": 12}, [], axes=axes, grid=manifest)
           .native["group_size"][m] for m in axes[1]["model"]}
    assert own == {"llama-3-8b": 4, "llama-3.1-8b": 4, "mistral-7b": 4, "phi-3-mini": 1,
                   "llama-3-70b": 8, "qwen2.5-72b": 8}
    for name, spec in made.items():
        menus = set(params(spec))
        for dimension in axes:
            if len(next(iter(dimension.values()))) > 1 and not set(dimension) & PLOTTED[name]:
                assert {f"{a}_choice" for a in dimension} & menus, (name, dimension)
        data = max(spec["datasets"].values(), key=len)
        assert len(data) <= charts.MAX_ROWS, name
        if "group_size_own" in data[0]:
            assert all(r["group_size"] == own[r["model"]] for r in data
                       if r["group_size_own"]), name
    held = re.search(r"context \(opens on ([\d,]+)", subtitle(made["roofline"])).group(1)
    drawn = {r["context"] for r in rows(made["throughput_vs_batch"])}
    assert int(held.replace(",", "")) in drawn


SLO_GRID = RATES + "slo_ttft = [0.5, 2.0]\nslo_tpot = [0.05, 0.1]\n"  # into its [axes]


def test_the_latency_chart_offers_its_slos_as_menus(tmp_path):
    """Swept SLOs are menus (they were held), and the SLO rule follows its menu."""
    (tmp_path / "grid.toml").write_text(SLO_GRID)
    run_sweep("run", tmp_path / "grid.toml", "--out", tmp_path / "out", "--no-charts")
    frame, manifest = scan_results(tmp_path / "out"), read_manifest(tmp_path / "out")
    with alt.data_transformers.disable_max_rows():
        spec = charts.latency_vs_rate_chart(frame, axes=charts.declared_axes(manifest),
                                            grid=manifest).to_dict()
    for axis, opening, values in (("slo_ttft", 0.5, [0.5, 2.0]),
                                  ("slo_tpot", 0.05, [0.05, 0.1])):
        menu = params(spec)[f"{axis}_choice"]
        assert menu["value"] == opening and menu["bind"]["options"] == values
    rules = [r for r in rows(spec) if "slo" in r]
    assert {(r["metric"], r["slo"]) for r in rules if r["slo_ttft"] == 2.0} == {
        ("TTFT", 2.0), ("TPOT", 0.05)}  # the other SLO at its opening value
    assert "TTFT SLO (s) 0.5 (menu)" in subtitle(spec)


def test_menus_are_bound_parameters(made):
    assert set(params(made["roofline"])) >= {"gpu_choice", "model_choice"}
    assert params(made["roofline"])["gpu_choice"]["bind"]["options"][0] == "all"
    for name in ("throughput_vs_batch", "attention_share"):
        assert set(params(made[name])) >= {"gpu_choice", "model_choice"}, name


# --- the best of each search --------------------------------------------------------------

def test_with_best_marks_one_best_in_every_search():
    """Two searches (two GPUs): each has its own best, not only the one holding the
    overall highest rate (ranking inside each search once compared ranks of two kinds)."""
    data = pl.DataFrame({
        "gpu": ["a", "a", "a", "b", "b", "b"],
        "status": ["sustained", "sustained", "rejected", "sustained", "sustained",
                   "sustained"],
        "rate": [5.0, 3.0, 9.0, 1.0, 2.0, 2.0],
        "goodput_tokens_per_s": [10.0, 10.0, 10.0, 10.0, 10.0, 20.0],
        "max_batch": [1, 2, 3, 1, 2, 3], "token_budget": [8, 8, 8, 8, 8, 8]})
    marked = charts._with_best(pl, data)
    best = marked.filter("best").select("gpu", "max_batch").rows()
    assert best == [("a", 1), ("b", 3)]  # b: the tie on rate goes to the higher goodput
    assert marked.group_by("gpu").agg(pl.col("best").sum())["best"].to_list() == [1, 1]


# --- the dashboard and the browser --------------------------------------------------------

def test_the_dashboard_links_every_chart_with_the_grids_summary(result_dir):
    text = (result_dir / "charts" / "index.html").read_text(encoding="utf-8")
    manifest = read_manifest(result_dir)
    for name in charts.DEFAULT_CHARTS:
        assert f'href="{name}.html"' in text
    assert manifest["spec_hash"][:12] in text and f"{manifest['rows']:,}" in text
    assert manifest["finished_at"] in text and "group_size: 1, 2, 4, 8" in text
    assert "<script" not in text and "http" not in text


@pytest.mark.browser
def test_the_dashboard_renders_offline(result_dir, tmp_path):
    page = render_in_browser(result_dir / "charts" / "index.html", tmp_path)
    assert page.errors == [] and page.log_errors == [] and page.requests == []


CHOOSE = """(function choose() {
  var menu = document.querySelector('select[name="%s"]');
  if (!menu) { setTimeout(choose, 50); return; }
  menu.value = %s;
  menu.dispatchEvent(new Event('change'));
})();"""


@pytest.mark.browser
def test_a_menu_redraws_and_a_tooltip_names_why_a_point_does_not_fit(result_dir, tmp_path):
    html = result_dir / "charts" / "roofline.html"
    opened = render_in_browser(html, tmp_path / "opened")
    chosen = render_in_browser(html, tmp_path / "chosen", script=CHOOSE % (
        "model_choice", json.dumps("llama-3-70b")))
    for page in (opened, chosen):
        assert page.errors == [] and page.log_errors == [] and page.requests == []
    assert not any("needs TP" in label for label in opened.labels.get("parts_over_memory", []))
    over = chosen.labels["parts_over_memory"]
    assert any("weights 141 GB > 80 GB: needs TP ≥ 2" in label for label in over)
    assert any("model: llama-3-70b" in label for label in over)


@pytest.mark.browser
def test_a_held_axis_menu_redraws_with_its_own_rows(result_dir, tmp_path):
    """Group size 1 (MHA) for Llama-3-8B, from the menu: the lines redraw from the menu's
    rows (4x the KV of its own group size 4: fewer tokens/s at batch 32, context 4096)."""
    html = result_dir / "charts" / "throughput_vs_batch.html"
    opened = render_in_browser(html, tmp_path / "opened")
    chosen = render_in_browser(html, tmp_path / "chosen", script=CHOOSE % (
        "group_size_choice", json.dumps("1")))

    def at_batch_32(page) -> set[float]:
        labels = [label for values in page.labels.values() for label in values
                  if "Tokens per second, all users" in label]  # the first panel's marks
        return {float(re.search(r"all users \(tok/s\): ([\d,]+)", label).group(1)
                      .replace(",", "")) for label in labels
                if "batch (sequences): 32" in label and "context (tokens): 4,096" in label}

    for page in (opened, chosen):
        assert page.errors == [] and page.log_errors == [] and page.requests == []
    assert at_batch_32(opened) == {3330}
    mha = at_batch_32(chosen)
    assert len(mha) == 1 and mha.pop() < 3330


@pytest.mark.browser
@pytest.mark.parametrize("name", charts.DEFAULT_CHARTS)
def test_every_chart_renders_offline(result_dir, tmp_path, name):
    page = render_in_browser(result_dir / "charts" / f"{name}.html", tmp_path)
    assert page.errors == [] and page.log_errors == [] and page.warnings == []
    assert page.requests == [] and page.marks


SIMULATE_CHARTS = ["occupancy_vs_batch", "latency_vs_rate", "itl_spike",
                   "ttft_vs_cache_capacity"]


@pytest.mark.browser
@pytest.mark.parametrize(("grid", "names"), [(SIMULATE, SIMULATE_CHARTS),
                                             (SLO_GRID, SIMULATE_CHARTS),
                                             (OPTIMIZE, charts.KIND_CHARTS["optimize"])],
                         ids=["simulate", "slo", "optimize"])
def test_every_serving_chart_renders_offline(grid, names, tmp_path):
    """Each simulate and optimize chart (a note where the grid has nothing for it)."""
    (tmp_path / "grid.toml").write_text(grid)
    run_sweep("run", tmp_path / "grid.toml", "--out", tmp_path / "out", "--no-charts")
    for html in charts.render_charts(tmp_path / "out", only=list(names)):
        page = render_in_browser(html, tmp_path / "work" / html.stem)
        assert page.errors == [] and page.log_errors == [] and page.warnings == [], html
        assert page.requests == [] and (page.marks or html.name == "index.html"), html


TOGGLE = """(function toggle() {
  var box = document.querySelector('input[name="log_y"]');
  if (!box) { setTimeout(toggle, 50); return; }
  box.click();
})();"""


@pytest.mark.browser
def test_the_log_toggle_replots_throughput(result_dir, tmp_path):
    html = result_dir / "charts" / "throughput_vs_batch.html"
    linear = render_in_browser(html, tmp_path / "linear")
    logged = render_in_browser(html, tmp_path / "log", script=TOGGLE)

    def first_value(page) -> float:
        label = next(v for k, v in page.labels.items() if k.startswith("all_users_lines"))[0]
        return float(re.search(r"all users \(tok/s\): ([\d.,]+)", label).group(1)
                     .replace(",", ""))

    assert logged.errors == [] and logged.requests == []
    assert first_value(logged) == pytest.approx(math.log10(first_value(linear)), rel=1e-3)


def test_a_reason_never_reads_as_equal_sizes():
    """Llama-3-70B's 141.1 GB of bf16 weights on a 141 GB H200: whole GB would print
    "141 GB > 141 GB"; a decimal tells them apart."""
    from rooftui.sweeps.chart_marks import with_memory_note
    from rooftui.sweeps.chart_table import Table

    data = Table({"gpu": np.array(["h200", "h100-sxm", "h100-sxm"], dtype=object),
                  "fits": np.array([False, False, True]),
                  "weight_bytes": np.array([141.1e9, 141.1e9, 16e9]),
                  "kv_bytes": np.array([1e9, 1e9, 17e9]),
                  "memory_reserve_gb": np.zeros(3)})
    assert with_memory_note(data, None)["memory"].tolist() == [
        "weights 141.1 GB > 141.0 GB: needs TP ≥ 2", "weights 141 GB > 80 GB: needs TP ≥ 2",
        "fits: weights 16 GB + KV 17 GB of 80 GB"]


def test_every_grid_axis_has_a_chart_label():
    """A chart names each held axis in its subtitle: an axis without a label would end
    the chart step of `sweep run` (it did for pp, ep, dp and system)."""
    from rooftui.sweeps import grid, kinds
    from rooftui.sweeps.chart_slices import LABELS

    names = set(grid.PARAMETERS)
    for parameters in grid.KIND_PARAMETERS.values():
        names |= set(parameters)
    names |= set(kinds.RENAMED.values())
    assert sorted(name for name in names if name not in LABELS) == []
