"""The step charts' Vega-Lite specs as plain dicts (`sweeps/vega_spec.py`): each helper
writes what altair's objects wrote for the same chart, the specs pass the Vega-Lite
schema, and a `sweep run` that renders them never imports altair."""

from __future__ import annotations

import subprocess
import sys

import altair as alt
import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from rooftui.sweeps import charts
from rooftui.sweeps import vega_spec as vl
from rooftui.sweeps.chart_files import chart_spec
from rooftui.sweeps.results import read_manifest, scan_results
from tests.conftest import run_sweep

FRAME = pl.DataFrame({"gpu": ["a", "b"], "x": [1.0, 2.0], "fits": [True, False]})


def altair_spec(chart) -> dict:
    return chart_spec(chart)[0]


def test_the_version_and_top_level_are_altairs():
    assert vl.VEGA_LITE_VERSION == alt.SCHEMA_VERSION
    made = alt.Chart(FRAME).mark_point().encode(x="x:Q").to_dict()
    assert {key: made[key] for key in vl.TOP} == vl.TOP


@given(name=st.text("abcxyz_", min_size=1, max_size=8),
       kind=st.sampled_from("NQOT"), aggregate=st.sampled_from([None, "sum", "max"]))
def test_a_field_reads_the_shorthand_as_altair_does(name, kind, aggregate):
    shorthand = f"{aggregate}({name}):{kind}" if aggregate else f"{name}:{kind}"
    assert vl.field(shorthand, title="t") == alt.X(shorthand, title="t").to_dict()


def test_a_layer_of_selections_and_menus_is_altairs():
    """Params lifted to the layer (a selection naming its view), one shared frame
    lifted to the layer's data, conditions as altair writes them."""
    pick = alt.selection_point(name="gpu_legend", fields=["gpu"], bind="legend")
    menu = alt.param(name="gpu_choice", value="a", bind=alt.binding_select(
        options=["a", "b"], name="GPU "))
    base = alt.Chart(FRAME).transform_filter("datum.fits")
    made = alt.layer(
        base.mark_point().encode(
            x="x:Q", opacity=alt.OpacityValue(value=0.12, condition=[
                {"param": "gpu_legend", "value": 1.0}]),
            color=alt.condition("datum.fits", alt.value("#222"), alt.value("#888")),
            fill=alt.when(pick, alt.datum.fits).then(alt.value(1.0)).when(pick).then(
                alt.value(0.35)).otherwise(alt.value(0.12))).add_params(
            pick, menu).properties(name="points"),
        base.mark_rule().encode(y="x:Q"), width=100, height=50)
    vl_pick = vl.legend_selection("gpu")
    ours = vl.VegaChart(vl.layer(
        vl.with_params(vl.unit(FRAME, vl.mark("point"), {
            "x": vl.field("x:Q"), "opacity": vl.highlight(vl_pick),
            "color": vl.when("datum.fits", "#222", "#888"),
            "fill": vl.highlight_fitting(vl_pick, 0.35)},
            transform=[{"filter": "datum.fits"}], name="points"),
            [vl_pick, vl.select_param("gpu_choice", "a", ["a", "b"], "GPU ")]),
        vl.unit(FRAME, vl.mark("rule"), {"y": vl.field("x:Q")},
                transform=[{"filter": "datum.fits"}]), width=100, height=50))
    assert ours.spec_dict() == altair_spec(made)


def test_concat_and_facet_lift_their_params_as_altair_does():
    pick = alt.selection_point(name="c_legend", fields=["gpu"], bind="legend")

    def panel(name, params):
        line = alt.Chart(FRAME).mark_line().encode(x="x:Q")
        return alt.layer(line.add_params(*params).properties(name=name),
                         alt.Chart(FRAME).mark_point().encode(x="x:Q"), width=10, height=10)

    made = alt.hconcat(panel("left", [pick]), panel("right", []), title="t")
    vl_pick = vl.legend_selection("c")
    vl_pick["select"]["fields"] = ["gpu"]

    def ours_panel(name, params):
        return vl.layer(vl.with_params(vl.unit(FRAME, vl.mark("line"), {
            "x": vl.field("x:Q")}, name=name), params),
            vl.unit(FRAME, vl.mark("point"), {"x": vl.field("x:Q")}), width=10, height=10)

    ours = vl.VegaChart(vl.hconcat(ours_panel("left", [vl_pick]), ours_panel("right", []),
                                   title="t"))
    assert ours.spec_dict() == altair_spec(made)
    faceted = alt.Chart(FRAME).mark_bar().encode(x="x:Q").add_params(pick).properties(
        name="bars", width=20, height=20).facet(facet=alt.Facet("gpu:N", title=None),
                                                columns=4, title="t")
    ours = vl.VegaChart(vl.facet(vl.with_params(vl.unit(
        FRAME, vl.mark("bar"), {"x": vl.field("x:Q")}, name="bars", width=20, height=20),
        [vl_pick]), vl.field("gpu:N", title=None), columns=4, title="t"))
    assert ours.spec_dict() == altair_spec(faceted)


def test_every_step_chart_passes_the_vega_lite_schema(tmp_path):
    """`to_dict` validates against altair's copy of the schema; the datasets hold the
    frames' rows."""
    (tmp_path / "grid.toml").write_text(
        'name = "dicts"\nkind = "step"\n[axes]\ngpu = ["h100-sxm", "l40s"]\n'
        'model = ["llama-3-8b", "llama-3-70b"]\nkv_dtype = ["bf16", "fp8"]\n'
        'context = [1024, 8192]\nbatch = [1, 64, 1024]\n')
    run_sweep("run", tmp_path / "grid.toml", "--out", tmp_path / "out", "--no-charts")
    frame, manifest = scan_results(tmp_path / "out"), read_manifest(tmp_path / "out")
    for name in charts.DEFAULT_CHARTS:
        chart = charts.CHARTS[name](frame, axes=charts.declared_axes(manifest),
                                    grid=manifest)
        assert isinstance(chart, vl.VegaChart), name
        spec = chart.to_dict()
        assert spec["datasets"] == {n: f.to_dicts() for n, f in chart.frames.items()}, name


def test_sweep_run_renders_its_step_charts_without_altair(tmp_path):
    (tmp_path / "grid.toml").write_text(
        'name = "no-altair"\nkind = "step"\n[axes]\nbatch = [1, 8]\n')
    script = ("import sys\nfrom rooftui.sweeps.cli import main\n"
              f"try:\n    main(['run', {str(tmp_path / 'grid.toml')!r}, '--out', "
              f"{str(tmp_path / 'out')!r}])\nexcept SystemExit as end:\n"
              "    assert not end.code, end.code\n"
              "print('altair' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip().splitlines()[-1] == "False", done.stdout + done.stderr
    assert len(list((tmp_path / "out" / "charts").glob("*.html"))) == 5 + 1
