"""Serving charts that say when a max batch cannot be reached (issue 15, item 2): simulate
rows carry what the KV cache holds (`kv_free_bytes`, `sequence_tokens_mean`,
`kv_sequences`); a max batch above the sequences that fit is drawn hollow (and grey on lines),
its reason in the tooltip, and kept off the value axes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import altair as alt
import polars as pl
import pytest

from rooftui.sweeps import charts
from rooftui.sweeps.chart_marks import INFEASIBLE, with_batch_fit
from rooftui.sweeps.results import read_manifest, scan_results
from tests.conftest import run_sweep
from tests.functional.browser_helpers import render_in_browser
from tests.functional.test_chart_truth import CHOOSE, layers, params, rows

# Llama-3-8B (the default model) on one 48 GB L40S: ~32 GB of KV after the weights, at
# 128 KiB a token ~243 k tokens, so 78 requests of 3,000 + 100 tokens; max batch 128
# asks for more than that, 16 does not.
GRID = """
name = "kv-fit"
kind = "simulate"
[fixed]
gpu = "l40s"
requests = 120
input_tokens = "fixed:3000"
output_tokens = "fixed:100"
arrival = "poisson"
[axes]
policy = ["continuous", "chunked"]
max_batch = [16, 128]
token_budget = [256, 1024]
rate = [2.0, 8.0]
"""
REASON = "max batch 128 > 78 sequences fit in 32 GB free KV at 3,100 tokens"
CHARTS = ("occupancy_vs_batch", "latency_vs_rate", "itl_spike")


def swept(tmp_path_factory, name: str, text: str) -> Path:
    """The results folder of the simulate grid `text`, run without charts."""
    grid = tmp_path_factory.mktemp(name) / "grid.toml"
    grid.write_text(text)
    run_sweep("run", grid, "--out", grid.with_name("out"), "--no-charts")
    return grid.with_name("out")


def specs(out: Path, names, held: dict | None = None) -> dict[str, dict]:
    """The named charts' Vega-Lite specs of a folder, each held at `held`'s values."""
    kwargs = {"axes": charts.declared_axes(read_manifest(out)), "grid": read_manifest(out)}
    with alt.data_transformers.disable_max_rows():
        return {name: charts.CHARTS[name](scan_results(out), fixed=(held or {}).get(name),
                                          **kwargs).to_dict() for name in names}


@pytest.fixture(scope="module")
def result_dir(tmp_path_factory) -> Path:
    return swept(tmp_path_factory, "kv-fit", GRID)


@pytest.fixture(scope="module")
def made(result_dir) -> dict[str, dict]:
    """The charts' specs; the ITL chart (which holds the max batch, at 16) held at 128."""
    return specs(result_dir, CHARTS, {"itl_spike": {"max_batch": 128}})


def test_rows_say_how_many_sequences_the_kv_cache_holds(result_dir):
    """kv_sequences is the capacity over the mean sequence, and a simulation with fixed
    lengths and `reserve` admission never runs more sequences than that at once."""
    data = scan_results(result_dir).collect()
    assert set(data["sequence_tokens_mean"]) == {3100.0}
    assert (data["kv_sequences"] == data["kv_capacity_tokens"] // 3100).all()
    assert set(data["kv_sequences"]) == {78}
    per_token = data["kv_free_bytes"] / data["kv_capacity_tokens"]
    assert per_token.to_list() == pytest.approx([128 * 1024] * data.height)  # 32 layers
    assert (data["mean_batch"] <= data["kv_sequences"]).all()
    over = data.filter(pl.col("max_batch") == 128)
    assert (over["mean_batch"] < 128).all()  # what the chart says: 128 is never reached


def test_the_reason_names_the_batch_the_sequences_and_the_free_kv():
    data = pl.DataFrame({"max_batch": [256, 64], "kv_sequences": [119, 119],
                         "kv_free_bytes": [65.2e9, 65.2e9],
                         "sequence_tokens_mean": [4096.0, 4096.0]})
    marked = with_batch_fit(pl, data, {})
    assert marked["fits"].to_list() == [False, True]
    assert marked["memory"].to_list() == [
        "max batch 256 > 119 sequences fit in 65 GB free KV at 4,096 tokens",
        "fits: max batch 64 ≤ 119 sequences fit in 65 GB free KV at 4,096 tokens"]
    older = with_batch_fit(pl, data.drop("kv_sequences"), {})  # a folder without them
    assert older["fits"].all() and set(older["memory"]) == {""}
    held = with_batch_fit(pl, data.drop("max_batch"), {"max_batch": 256})  # held, no column
    assert held["fits"].to_list() == [False, False]


def marks(spec: dict) -> dict[str, dict]:
    """A spec's unit layers by name (altair numbers them in a concatenation)."""
    return {re.sub(r"_\d+$", "", node.get("name", "")): node for node in layers(spec)}


def test_a_max_batch_the_kv_cannot_hold_has_its_own_mark_and_reason(made):
    """Its points hollow (occupancy) or its lines grey (latency, ITL), in the layer of
    the rows that fit (a layer of its own would be empty, and Vega warn, whenever the
    menus show none); the reason is every such row's tooltip."""
    for name, spec in made.items():
        drawn = [r for r in rows(spec) if "fits" in r and "max_batch" in r]
        assert drawn and not all(r["fits"] for r in drawn), name
        for row in drawn:
            assert row["fits"] is (row["max_batch"] <= 78), name
            assert row["memory"] == REASON if not row["fits"] else row["memory"].startswith(
                "fits: max batch 16 ≤ 78 sequences"), name
        assert "grey (points: hollow): a max batch above" in " ".join(
            spec["title"]["subtitle"]), name
    dots = marks(made["occupancy_vs_batch"])["simulated"]
    assert dots["mark"]["filled"] is False  # the outline in its colour, the fill...
    assert dots["encoding"]["fill"]["condition"]["test"] == "datum.fits"
    assert dots["encoding"]["fill"]["value"] == "white"  # ...white when it does not fit
    for name, layer in (("latency_vs_rate", "ttft_lines"), ("latency_vs_rate", "tpot_lines"),
                        ("itl_spike", "chunked")):
        node = marks(made[name])[layer]
        color = node["encoding"]["color"]
        assert color["condition"]["test"] == "datum.fits", (name, layer)
        assert color["value"] == INFEASIBLE, (name, layer)
        assert {"field": "memory", "title": "KV cache", "type": "nominal"} in node[
            "encoding"]["tooltip"], (name, layer)


def test_a_max_batch_the_kv_cannot_hold_never_sets_the_value_axis(made):
    """Lines draw "shown": the value where the row fits, else cut to the highest of the
    rows that fit; the occupancy axis is 0 to 100 % whatever the rows."""
    for name, layer in (("latency_vs_rate", "ttft_lines"), ("latency_vs_rate", "tpot_lines"),
                        ("itl_spike", "chunked")):
        node = marks(made[name])[layer]
        assert node["encoding"]["y"]["field"] == "shown", (name, layer)
        assert "datum.fits || !isValid" in json.dumps(node["transform"]), (name, layer)
    rule = marks(made["itl_spike"])["unchunked"]["encoding"]
    assert rule["y"]["field"] == "shown" and rule["color"]["value"] == INFEASIBLE
    unchunked = [r for r in rows(made["itl_spike"]) if "shown" in r]
    assert unchunked and all(r["memory"] == REASON and r["fits"] is False for r in unchunked)
    dots = marks(made["occupancy_vs_batch"])["simulated"]
    assert dots["encoding"]["y"]["scale"]["domain"] == [0, 1]


def test_the_max_batch_menu_offers_the_batch_that_does_not_fit(made):
    menu = params(made["latency_vs_rate"])["max_batch_choice"]
    assert menu["bind"]["options"] == [16, 128]


@pytest.mark.browser
def test_a_tooltip_says_why_a_max_batch_is_never_reached(result_dir, tmp_path):
    written = charts.render_charts(result_dir, only=list(CHARTS))
    occupancy = render_in_browser(result_dir / "charts" / "occupancy_vs_batch.html",
                                  tmp_path / "occupancy")
    assert occupancy.errors == [] and occupancy.warnings == [] and occupancy.requests == []
    dots = occupancy.labels["simulated"]
    assert any(REASON in label for label in dots)
    assert all(("max batch: 128" in label) == (REASON in label) for label in dots)
    html = next(path for path in written if path.stem == "latency_vs_rate")
    opened = render_in_browser(html, tmp_path / "opened")  # max batch 16: every row fits
    chosen = render_in_browser(html, tmp_path / "latency", script=CHOOSE % (
        "max_batch_choice", json.dumps("128")))
    for page in (opened, chosen):
        assert page.errors == [] and page.warnings == [] and page.requests == []
    assert not any("max batch 128 >" in label for values in opened.labels.values()
                   for label in values)
    lines = [label for key, values in chosen.labels.items() if key.startswith("ttft_lines")
             for label in values]
    assert lines and all(REASON in label for label in lines)


def test_the_prefix_cache_chart_greys_a_max_batch_the_kv_cannot_hold(tmp_path):
    """TTFT vs the prefix cache's capacity, max batch a menu: sessions of about 1,200
    tokens (a prompt with its history, plus output) on an L40S, about 200 at once; 256
    does not fit."""
    from tests.functional.test_prefix_cache_grid import GENERATOR

    grid = tmp_path / "grid.toml"
    grid.write_text(f'name = "prefix-kv"\nkind = "simulate"\n[fixed]\ngpu = "l40s"\n'
                    f'workload = "{GENERATOR}"\narrival = "poisson"\nrate = 3.0\n'
                    'requests = 120\nprefix_cache = "lru"\npolicy = "chunked"\n'
                    'token_budget = 512\n[axes]\nmax_batch = [16, 256]\n'
                    'cache_capacity_gb = [0.0, 2.0]\n')
    run_sweep("run", grid, "--out", tmp_path / "out", "--no-charts")
    frame, manifest = scan_results(tmp_path / "out"), read_manifest(tmp_path / "out")
    spec = charts.ttft_vs_cache_capacity_chart(
        frame, axes=charts.declared_axes(manifest), grid=manifest).to_dict()
    assert params(spec)["max_batch_choice"]["bind"]["options"] == [16, 256]
    data = frame.collect()
    held, tokens = data["kv_sequences"][0], round(data["sequence_tokens_mean"][0])
    assert 16 < held < 256 and set(data["kv_sequences"]) == {held}
    fit = f"{held:,} sequences fit in 32 GB free KV at {tokens:,} tokens"
    notes = {(r["max_batch"], r["fits"], r["memory"]) for r in rows(spec) if "fits" in r}
    assert notes == {(16, True, f"fits: max batch 16 ≤ {fit}"),
                     (256, False, f"max batch 256 > {fit}")}
    lines = marks(spec)["ttft_lines"]["encoding"]
    assert lines["color"]["value"] == INFEASIBLE and lines["y"]["field"] == "shown"


# the last two serving charts hold what they do not plot as menus (issue 15, item 3): the
# occupancy chart plots max batch and holds token budget and TP; the ITL chart plots
# token budget and holds max batch and TP. At TP 2 each GPU keeps half the weights and
# half the KV heads: 128 sequences of 3,100 tokens fit.
MENU_GRID = GRID.replace('rate = [2.0, 8.0]', 'tp = [1, 2]').replace(
    'arrival = "poisson"', 'arrival = "poisson"\nrate = 4.0')
PLOTTED = {"occupancy_vs_batch": {"max_batch", "policy"},
           "itl_spike": {"token_budget", "policy"}}


@pytest.fixture(scope="module")
def menu_dir(tmp_path_factory) -> Path:
    return swept(tmp_path_factory, "serving-menus", MENU_GRID)


@pytest.fixture(scope="module")
def menu_made(menu_dir) -> dict[str, dict]:
    return specs(menu_dir, PLOTTED)


def test_every_held_axis_of_occupancy_and_itl_has_a_bound_parameter(menu_dir, menu_made):
    """Each swept axis a chart does not plot is a menu of all its values, and every data
    set that a menu filters (points, lines, the 1/H_B reference, the unchunked rules)
    carries its column, so that a choice redraws every layer."""
    axes = charts.declared_axes(read_manifest(menu_dir))
    swept = {a: list(v) for d in axes for a, v in d.items() if len(v) > 1}
    assert set(swept) == {"policy", "max_batch", "token_budget", "tp"}
    for name, spec in menu_made.items():
        held = set(swept) - PLOTTED[name]
        assert held == ({"token_budget", "tp"} if name == "occupancy_vs_batch"
                        else {"max_batch", "tp"}), name
        for axis in held:
            menu = params(spec)[f"{axis}_choice"]
            assert menu["bind"]["options"] == swept[axis], (name, axis)
            assert menu["value"] == swept[axis][0], (name, axis)  # min / median of two
        filtered = [node for node in marks(spec).values()
                    if any(f"{a}_choice" in json.dumps(node.get("transform", []))
                           for a in held)]
        assert {n["name"] for n in filtered} == (
            {"analytic", "simulated", "harmonic"} if name == "occupancy_vs_batch"
            else {"chunked", "unchunked"}), name
        for data in spec["datasets"].values():
            if "message" not in data[0]:
                assert all(held <= set(row) for row in data), name
        assert "menus: " in " ".join(spec["title"]["subtitle"]), name


def test_the_menus_keep_the_feasibility_marks(menu_dir, menu_made):
    """Rows at TP 2 hold 128 sequences; at TP 1 they do not: each row's mark and reason
    follow its own TP and max batch."""
    data = scan_results(menu_dir).collect()
    fit = dict(data.group_by("tp").agg(pl.col("kv_sequences").first()).iter_rows())
    assert fit[1] == 78 and fit[2] >= 128
    for name, spec in menu_made.items():
        drawn = [r for r in rows(spec) if "fits" in r and "tp" in r and "max_batch" in r]
        assert {(r["tp"], r["max_batch"]) for r in drawn} >= {(1, 16), (2, 16)}, name
        for row in drawn:
            assert row["fits"] is (row["max_batch"] <= fit[row["tp"]]), name


def menu_pages(menu_dir, tmp_path, name: str, menu: str, value: str):
    """The chart as it opens and with `menu` set to `value`, neither with a Vega error,
    warning or request."""
    html = next(path for path in charts.render_charts(menu_dir, only=[name])
                if path.stem == name)
    pages = (render_in_browser(html, tmp_path / f"{name}-opened"),
             render_in_browser(html, tmp_path / f"{name}-chosen",
                               script=CHOOSE % (f"{menu}_choice", json.dumps(value))))
    for page in pages:
        assert page.errors == [] and page.log_errors == [] and page.warnings == [], name
        assert page.requests == [], name
    return pages


@pytest.mark.browser
def test_a_tp_menu_redraws_the_occupancy_chart(menu_dir, tmp_path):
    """At TP 1 the max batch 128 points are hollow with their reason; chosen TP 2, every
    point fits, the lines and the 1/H_B reference redrawn."""
    opened, chosen = menu_pages(menu_dir, tmp_path, "occupancy_vs_batch", "tp", "2")
    for page in (opened, chosen):
        assert page.labels["simulated"] and page.labels["analytic"] and page.labels["harmonic"]
    assert any(REASON in label for label in opened.labels["simulated"])
    assert not any("max batch 128 >" in label for label in chosen.labels["simulated"])
    assert any("fits: max batch 128" in label for label in chosen.labels["simulated"])


@pytest.mark.browser
def test_a_max_batch_menu_redraws_the_itl_chart(menu_dir, tmp_path):
    """The ITL chart opens at max batch 16 (every row fits); chosen 128, its lines carry
    the reason 128 sequences never run at once."""
    opened, chosen = menu_pages(menu_dir, tmp_path, "itl_spike", "max_batch", "128")
    assert opened.labels["chunked"] and not any(
        "max batch 128 >" in label for label in opened.labels["chunked"])
    assert chosen.labels["chunked"] and all(REASON in label
                                            for label in chosen.labels["chunked"])
