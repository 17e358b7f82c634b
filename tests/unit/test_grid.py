"""Grid specs: parsing, validation, ranges, zips, mixed-radix blocks, the spec hash, and
the evaluation of blocks against `sweep point`'s single-configuration path."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.model import load_model
from rooftui.core.point import PointConfig, evaluate_point
from rooftui.core.step import evaluate_step
from rooftui.core.tables import GPUTable, dtype_code, gather_step_inputs
from rooftui.sweeps.evaluate import BOUNDS, Sweep
from rooftui.sweeps.grid import Grid, load_grid, parse_grid
from rooftui.sweeps.results import is_derived, with_derived

REPO = Path(__file__).resolve().parents[2]
WHERE = Path("/virtual/grid.toml")

SMALL = """
name = "small"
[fixed]
prefill = 0
[axes]
gpu = ["h100-sxm", "a100-80gb"]
model = ["llama-3-8b", "llama-3-70b"]
batch = { start = 1, stop = 8, scale = "log2" }
context = [1024, 4096]
group_size = [1, 4]
"""


def grid(text: str) -> Grid:
    return parse_grid(text, WHERE)


def error_of(text: str) -> str:
    with pytest.raises(SpecError) as caught:
        Sweep(grid(text))
    message = str(caught.value)
    assert "\n" not in message
    return message


# --- parsing -------------------------------------------------------------------------------
def test_size_is_the_product_of_the_axes():
    g = grid(SMALL)
    assert g.radices == (2, 2, 4, 2, 2)
    assert g.size == 64
    assert g.values_of("batch") == (1, 2, 4, 8)
    assert g.values_of("prefill") == (0,)
    assert g.values_of("kv_dtype") == (None,)  # resolved per model


def test_zip_pairs_axes_into_one_dimension():
    g = grid("""
name = "z"
[axes]
weight_dtype = ["bf16", "fp8"]
batch = [1, 2, 3]
compute_dtype = ["bf16", "fp8"]
[[zip]]
axes = ["weight_dtype", "compute_dtype"]
""")
    assert [[a.name for a in d.axes] for d in g.dimensions] == [
        ["weight_dtype", "compute_dtype"], ["batch"]]
    assert g.size == 6


@pytest.mark.parametrize(("spec", "values"), [
    ('{ start = 1, stop = 1024, scale = "log2" }', [2**k for k in range(11)]),
    ('{ start = 3, stop = 100, scale = "log2" }', [3, 6, 12, 24, 48, 96]),
    ("{ start = 0, stop = 10, step = 5 }", [0, 5, 10]),
    ("{ start = 100, stop = 400, num = 4 }", [100, 200, 300, 400]),
    ('{ start = 1, stop = 1000, num = 4, scale = "geometric" }', [1, 10, 100, 1000]),
])
def test_ranges_of_whole_numbers(spec, values):
    assert grid(f'name = "r"\n[axes]\ncontext = {spec}\n').values_of("context") == tuple(values)


def test_float_ranges():
    g = grid('name = "f"\n[axes]\nmfu = { start = 0.25, stop = 1, scale = "log2" }\n'
             'mbu = { start = 0.5, stop = 1, step = 0.25 }\n')
    assert g.values_of("mfu") == (0.25, 0.5, 1.0)
    assert g.values_of("mbu") == (0.5, 0.75, 1.0)


@pytest.mark.parametrize(("body", "needles"), [
    ('name = "x"\nbogus = 1\n', ["grid.toml", "unknown key 'bogus'"]),
    ('name = "x"\n[axes]\nbatchh = [1]\n', ["[axes]", "'batchh'", "did you mean 'batch'"]),
    ('name = "x"\n[fixed]\ncontxt = 1\n', ["[fixed]", "'contxt'"]),
    ('name = "x"\n[axes]\nbatch = []\n', ["batch", "empty"]),
    ('name = "x"\n[axes]\nbatch = [1, -2]\n', ["batch", "from 0 to", "got -2"]),
    ('name = "x"\n[axes]\nbatch = [1.5]\n', ["batch", "whole number"]),
    ('name = "x"\n[axes]\nbatch = [1, 1]\n', ["batch", "twice"]),
    ('name = "x"\n[axes]\nmfu = [0.5, 1.5]\n', ["mfu", "(0, 1]"]),
    ('name = "x"\n[axes]\nkv_dtype = ["fp9"]\n', ["kv_dtype", "unknown"]),
    ('name = "x"\n[axes]\ngpu = ["h100-sxn"]\n', ["gpu", "h100-sxn", "did you mean"]),
    ('name = "x"\n[axes]\nmodel = ["no-such-model"]\n', ["model", "no-such-model"]),
    ('name = "x"\n[axes]\noverlap = ["parts", "full"]\n', ["overlap", "[fixed]"]),
    ('name = "x"\n[fixed]\noverlap = "some"\n', ["overlap", "parts, full"]),
    ('name = "x"\n[fixed]\nbatch = 1\n[axes]\nbatch = [2]\n', ["batch", "also in [fixed]"]),
    ('name = "x"\n[axes]\nkv_heads = [8]\ngroup_size = [4]\n', ["kv_heads or group_size"]),
    ('name = "x"\n[axes]\nbatch = { start = 1, stop = 8, scale = "cubic" }\n', ["scale"]),
    ('name = "x"\n[axes]\nbatch = { start = 1, stop = 8, steps = 2 }\n', ["'steps'"]),
    ('name = "x"\n[axes]\nbatch = { start = 9, stop = 8 }\n', ["below start"]),
    ('name = "x"\n[axes]\nbatch = { start = 1, stop = 4, num = 9, scale = "geometric" }\n',
     ["repeats"]),
    ('name = "x"\n[axes]\ngpu = { start = 1, stop = 2 }\n', ["list the values"]),
    ('name = "x"\n[axes]\nbatch = [1, 2]\n[[zip]]\naxes = ["batch", "context"]\n',
     ["zip", "'context' is not in [axes]"]),
    ('name = "x"\n[axes]\nbatch = [1, 2]\ncontext = [1]\n[[zip]]\naxes = ["batch", "context"]\n',
     ["same number of values", "batch has 2", "context has 1"]),
    ('name = "x y"\n', ["'name'"]),
    ('name = "x"\nkind = "schedule"\n', ["'kind'", "step"]),
    ('name = "x"\n[axes\n', ["invalid TOML"]),
])
def test_bad_specs_name_the_file_and_key(body, needles):
    message = error_of(body)
    assert str(WHERE) in message
    for needle in needles:
        assert needle in message, message


def test_group_size_must_divide_every_models_heads():
    message = error_of('name = "x"\n[axes]\nmodel = ["llama-3-8b", "qwen2.5-7b"]\n'
                       'group_size = [1, 8]\n')
    assert "group_size 8" in message and "28" in message and "Qwen2.5-7B".lower() in \
        message.lower()


def test_kv_heads_must_divide_the_heads():
    assert "kv_heads 3" in error_of('name = "x"\n[axes]\nkv_heads = [1, 3]\n')


def test_unsupported_compute_dtype_is_an_error_naming_gpu_and_dtype():
    message = error_of('name = "x"\n[axes]\ngpu = ["h100-sxm", "a100-80gb"]\n'
                       'compute_dtype = ["bf16", "fp8"]\n')
    assert "a100-80gb" in message and "fp8" in message and "skip_unsupported" in message


def test_skip_unsupported_counts_the_dropped_points():
    sweep = Sweep(grid('name = "x"\nskip_unsupported = true\n[axes]\n'
                       'gpu = ["h100-sxm", "a100-80gb"]\ncompute_dtype = ["bf16", "fp8"]\n'
                       'batch = [1, 2, 3]\n'))
    assert sweep.skipped_points == 3
    assert sweep.unsupported_points(0, 12) == 3
    assert sweep.unsupported_points(6, 12) == 3  # a100 x fp8 are ids 9..11
    assert sweep.unsupported_points(10, 11) == 1
    assert sweep.unsupported_points(0, 9) == 0
    rows = sum(len(c["point_id"]) for c, _ in sweep.row_groups(0, 12))
    assert rows == 9


# --- identity ------------------------------------------------------------------------------
def test_hash_ignores_formatting_description_and_charts_but_not_values_or_order():
    base = grid(SMALL).spec_hash
    noisy = SMALL.replace("[fixed]", '# a comment\ndescription = "words"\n[charts]\n'
                          'names = ["roofline"]\n[fixed]')
    assert grid(noisy).spec_hash == base
    assert grid(SMALL.replace("4096", "8192")).spec_hash != base
    swapped = SMALL.replace('context = [1024, 4096]\ngroup_size = [1, 4]',
                            'group_size = [1, 4]\ncontext = [1024, 4096]')
    assert grid(swapped).spec_hash != base


def test_hash_covers_the_gpu_files_it_names(tmp_path):
    gpu = (REPO / "specs" / "gpus" / "h100-sxm.toml").read_text()
    (tmp_path / "g.toml").write_text(gpu)
    text = 'name = "x"\n[axes]\ngpu = ["./g.toml"]\n'
    first = parse_grid(text, tmp_path / "grid.toml").spec_hash
    (tmp_path / "g.toml").write_text(gpu.replace("bandwidth_tbs = 3.35", "bandwidth_tbs = 3.9"))
    assert parse_grid(text, tmp_path / "grid.toml").spec_hash != first


def test_shipped_grid_is_at_least_a_million_points():
    g = load_grid(REPO / "specs" / "grid.toml")
    sweep = Sweep(g)
    assert g.size - sweep.skipped_points >= 1_000_000
    assert {"gpu", "model", "batch", "context", "kv_dtype"} <= {a.name for a in g.axes}
    assert g.values_of("batch")[0] == 1 and g.values_of("batch")[-1] == 1024
    assert g.charts["names"]


# --- blocks --------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(radices=st.lists(st.integers(1, 6), min_size=1, max_size=5), data=st.data())
def test_blocks_tile_any_range_in_id_order(radices, data):
    text = 'name = "b"\n[axes]\n' + "".join(
        f"{axis} = {list(range(1, n + 1))}\n"
        for axis, n in zip(["batch", "context", "prefill", "prefill_context", "kv_heads"],
                           radices, strict=False))
    g = grid(text)
    start = data.draw(st.integers(0, g.size - 1))
    stop = data.draw(st.integers(start + 1, g.size))
    limit = data.draw(st.integers(1, g.size))
    at = start
    for block in g.blocks(start, stop, limit):
        assert block.start == at and 0 < block.size <= limit
        digits = [np.broadcast_to(d, block.shape).reshape(-1) for d in block.digits()]
        ids = np.arange(block.start, block.start + block.size)
        assert all(np.array_equal(d, want) for d, want in
                   zip(digits, np.unravel_index(ids, g.radices), strict=True))
        at += block.size
    assert at == stop


def test_blocks_stay_few():
    g = load_grid(REPO / "specs" / "grid.toml")
    blocks = list(g.blocks(12345, 1_000_000, 1 << 16))
    assert len(blocks) < 2 * len(g.radices) + math.ceil(1_000_000 / (1 << 15))


# --- evaluation ----------------------------------------------------------------------------
def _reference(sweep: Sweep, row: dict) -> dict:
    model = load_model(row["model"]).with_kv_heads(row["kv_heads"])
    config = PointConfig(
        gpu=load_gpu(row["gpu"]), model=model, batch=row["batch"], context=row["context"],
        prefill=row["prefill"], prefill_context=row["prefill_context"],
        weight_dtype=row["weight_dtype"], kv_dtype=row["kv_dtype"],
        compute_dtype=row["compute_dtype"],
        assumptions=sweep.assumptions.with_overrides(mfu=row["mfu_assumed"],
                                                     mbu=row["mbu_assumed"]),
        tpot_budget=row.get("tpot_budget"))
    return evaluate_point(config)


def _rows(sweep: Sweep) -> list[dict]:
    """The rows as `scan_results` reads them: names decoded, the derived metrics added."""
    rows = []
    for columns, _ in sweep.row_groups(0, sweep.grid.size):
        decoded = {k: (np.array(sweep.dictionaries[k], dtype=object)[v]
                       if k in sweep.dictionaries else v) for k, v in columns.items()}
        frame = with_derived(pl.DataFrame(decoded))
        assert sorted(frame.columns) == sorted(sweep.result_types)  # what readers see
        rows += frame.to_dicts()
    return rows


def test_rows_equal_sweep_point_for_every_point():
    sweep = Sweep(grid(SMALL + 'kv_dtype = ["bf16", "fp8"]\nmfu = [1.0, 0.5]\n'
                       '[[zip]]\naxes = ["kv_dtype", "mfu"]\n'))
    rows = _rows(sweep)
    assert [r["point_id"] for r in rows] == list(range(sweep.grid.size))
    for row in rows:
        reference = _reference(sweep, row)
        for key, value in reference.items():
            assert row[key] == pytest.approx(value, rel=1e-12, nan_ok=True), key
        assert row["bound"] == BOUNDS[reference["compute_bound"]]
        assert row["gemm_bound"] == BOUNDS[reference["gemm_compute_bound"]]
        assert row["group_size"] * row["kv_heads"] == load_model(row["model"]).num_attention_heads


def test_defaults_follow_sweep_point():
    sweep = Sweep(grid('name = "d"\nprofile = "derated"\n[fixed]\ntpot_budget = 0.05\n'
                       '[axes]\nmodel = ["llama-3-8b", "reference-mha-6.4b"]\n'))
    rows = _rows(sweep)
    assert [r["gpu"] for r in rows] == ["h100-sxm"] * 2
    assert [r["kv_dtype"] for r in rows] == ["bf16", "fp16"]  # fp16 model: fp16 KV
    assert [r["weight_dtype"] for r in rows] == ["bf16", "fp16"]
    assert [r["kv_heads"] for r in rows] == [8, 32]
    assert [(r["batch"], r["context"]) for r in rows] == [(1, 1024)] * 2
    assert rows[0]["mfu_assumed"] == 0.5 and rows[0]["mbu_assumed"] == 0.8
    for row in rows:
        assert row["max_batch_for_tpot"] == _reference(sweep, row)["max_batch_for_tpot"]


FEATURES = """
name = "features"
[fixed]
tpot_budget = 0.05
price_per_gpu_hour = 2.5
energy = true
[axes]
gpu = ["h100-sxm", "b200"]
model = ["gpt-oss-20b", "mixtral-8x7b", "llama-3-8b"]
tp = [1, 2, 4]
spec_tokens = [0, 3]
acceptance = [0.0, 0.8]
batch = [1, 48]
context = [1024, 8192]
"""


def _feature_reference(row: dict, weights_given: bool) -> dict:
    """`sweep point` for a row of a grid with tp, speculation, price and energy."""
    draft = row.get("draft_model")
    config = PointConfig(
        gpu=load_gpu(row["gpu"]), model=load_model(row["model"]), batch=row["batch"],
        context=row["context"], weight_dtype=row["weight_dtype"] if weights_given else None,
        expert_weight_dtype=row.get("expert_dtype"), tp=row["tp"],
        spec_tokens=row["spec_tokens"],
        acceptance=row["acceptance"] if row["spec_tokens"] else None,
        draft_model=load_model(draft) if draft and row["spec_tokens"] else None,
        tpot_budget=row["tpot_budget"], price_per_gpu_hour=row["price_per_gpu_hour"],
        energy=True)
    return evaluate_point(config)


@pytest.mark.parametrize("extra", [
    "",  # gpt-oss's experts in their own mxfp4, as `sweep point` reads them
    'draft_model = ["llama-2-7b"]\n',
    'weight_dtype = ["fp8"]\nexpert_dtype = ["int4-g128"]\n',
])
def test_rows_with_tp_and_speculation_equal_sweep_point(extra):
    sweep = Sweep(grid(FEATURES + extra))
    rows = _rows(sweep)
    assert len(rows) == sweep.grid.size
    columns = set(sweep.result_types)
    assert {"tp", "spec_tokens", "acceptance", "communication_time_s",
            "expected_tokens_per_step", "tokens_per_s_per_gpu", "energy_j_per_token",
            "cost_per_million_tokens"} <= columns
    for row in rows:
        reference = _feature_reference(row, weights_given="weight_dtype" in extra)
        for key, value in reference.items():
            if key in row:  # a grid of speculation has the free-drafting keys everywhere
                assert row[key] == pytest.approx(value, rel=1e-9, abs=1e-300, nan_ok=True), (
                    key, row["model"], row["tp"], row["spec_tokens"])
        if row["tp"] == 1:  # a one-GPU replica of a TP grid: no link traffic
            assert row["communication_time_s"] == 0.0 and row["communication_bytes"] == 0.0
        if row["spec_tokens"] == 0:
            assert row["expected_tokens_per_step"] == 1.0


def test_features_not_given_add_no_columns():
    columns = set(Sweep(grid(SMALL)).result_types)
    for name in ("tp", "spec_tokens", "acceptance", "draft_model", "expert_dtype",
                 "communication_time_s", "expected_tokens_per_step", "energy",
                 "energy_j_per_token", "cost_per_million_tokens", "tpot_budget"):
        assert name not in columns, name


@pytest.mark.parametrize(("body", "needles"), [
    ('[axes]\nmodel = ["qwen2.5-7b"]\ntp = [1, 8]\n',
     ["tp 8", "28 attention heads", "qwen2.5-7b"]),
    ('[axes]\nmodel = ["llama-3-8b"]\ntp = [64]\n', ["tp 64", "32 attention heads"]),
    ('[axes]\nmodel = ["phi-3-mini"]\ntp = [1, 3]\n', ["tp 3"]),
    ('[fixed]\nspec_tokens = 4\n', ["spec_tokens needs acceptance"]),
    ('[fixed]\nacceptance = 0.5\n', ["acceptance needs spec_tokens"]),
    ('[fixed]\ndraft_model = "llama-2-7b"\n', ["draft_model needs spec_tokens"]),
    ('[fixed]\nspec_tokens = 2\nacceptance = 1.5\n', ["acceptance", "[0, 1]"]),
    ('[fixed]\nspec_tokens = 2\nacceptance = 0.5\ndraft_model = "no-such"\n',
     ["draft_model", "no-such"]),
    ('[axes]\nenergy = [true, false]\n', ["energy", "[fixed]"]),
])
def test_bad_feature_specs_are_one_line_errors(body, needles):
    message = error_of('name = "x"\n' + body)
    for needle in needles:
        assert needle in message, message


def test_tp_needs_an_interconnect(tmp_path):
    gpu = (REPO / "specs" / "gpus" / "l4.toml").read_text()
    (tmp_path / "g.toml").write_text("\n".join(
        line for line in gpu.splitlines() if not line.startswith("interconnect_gbs")))
    text = 'name = "x"\n[axes]\ngpu = ["./g.toml"]\ntp = [1, 2]\n'
    with pytest.raises(SpecError, match="lists no interconnect_gbs"):
        Sweep(parse_grid(text, tmp_path / "grid.toml"))
    # a one-GPU replica needs no link
    sweep = Sweep(parse_grid(text.replace("[1, 2]", "[1]"), tmp_path / "grid.toml"))
    row = _rows(sweep)[0]
    assert row["communication_time_s"] == 0.0 and np.isfinite(row["step_time_s"])


def test_columns_cover_every_metric_and_the_roofs():
    sweep = Sweep(grid('name = "c"\n[fixed]\nactivation_traffic = true\n'))
    gpus = GPUTable.of([load_gpu("h100-sxm")])
    bf16 = dtype_code("bf16")
    metrics = evaluate_step(gather_step_inputs(
        gpus, load_model("llama-3-8b").as_arrays(), gpu=0, model=0, batch=1, context=1,
        prefill=0, prefill_context=0, weight_dtype=bf16, kv_dtype=bf16, compute_dtype=bf16),
        sweep.assumptions)
    columns = list(sweep.result_types)
    assert set(metrics) <= set(columns)
    stored = set(sweep.column_types)  # the files leave out what readers derive exactly
    assert {c for c in columns if c not in stored} == {c for c in columns if is_derived(c)}
    assert {"tokens_per_s", "mfu", "mbu", "ridge", "intensity", "gemm_intensity",
            "compute_bound", "gemm_compute_bound"}.isdisjoint(stored)
    assert {"point_id", "gpu", "model", "batch", "context", "prefill", "prefill_context",
            "kv_heads", "group_size", "weight_dtype", "kv_dtype", "compute_dtype",
            "mfu_assumed", "mbu_assumed", "memory_reserve_gb", "overlap",
            "attention_flops_assumed", "activation_traffic", "kv_write", "peak_flops",
            "bandwidth_bytes_per_s", "bound", "gemm_bound", "attention_bound",
            "activations_bound"} <= set(columns)
    assert len(columns) == len(set(columns))
    assert sweep.column_types["fits"] == np.dtype(bool)
    assert sweep.column_types["step_time_s"] == np.float64



DERIVED_GRIDS = [
    # an empty step (batch 0, no prefill): the ratios of zero by zero are NaN alike
    'name = "d"\n[axes]\ngpu = ["h100-sxm", "mi300x"]\nprefill = [0, 512]\n'
    'batch = [0, 1, 96]\ncontext = [1, 4096]\n',
    'name = "d"\nprofile = "derated"\n[fixed]\nactivation_traffic = true\n[axes]\n'
    'model = ["llama-3-8b", "gemma-2-9b"]\nprefill = [0, 512]\nbatch = [0, 7]\n',
    FEATURES + 'draft_model = ["llama-2-7b"]\n',
    FEATURES.replace('name = "features"', 'name = "f"\nprofile = "h100-trtllm"'),
]


@pytest.mark.parametrize("text", DERIVED_GRIDS)
def test_derived_metrics_are_the_cores_to_the_last_bit(text):
    """What the files leave out, `with_derived` computes exactly as the core does."""
    sweep = Sweep(grid(text))
    block = next(sweep.grid.blocks(0, sweep.grid.size))
    full = sweep.evaluate(block, derived=True)
    stored = sweep.evaluate(block)
    decoded = {k: (np.array(sweep.dictionaries[k], dtype=object)[v]
                   if k in sweep.dictionaries else v) for k, v in stored.items()}
    derived = with_derived(pl.DataFrame(decoded))
    assert set(derived.columns) == set(full) and set(stored) < set(full)
    for name in full:
        if is_derived(name):
            assert np.array_equal(derived[name].to_numpy(), full[name], equal_nan=True), name
    # files of the older format stored every column: nothing to add, nothing to trip on
    every = {k: (np.array(sweep.dictionaries[k], dtype=object)[v]
                 if k in sweep.dictionaries else v) for k, v in full.items()}
    assert with_derived(pl.DataFrame(every)).columns == list(full)


# --- bad numbers: every one a one-line error naming the key and the range ---------------
BAD_NUMBERS = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, -1, 2**62, 10**30]),
    st.text(st.characters(min_codepoint=32, exclude_categories=("Cs", "Cc")), max_size=3),
    st.booleans(), st.lists(st.integers(), max_size=1))


def _toml(value) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(["batch", "context", "prefill", "tp", "mfu", "acceptance",
                            "memory_reserve_gb", "tpot_budget", "kv_heads"]),
       value=BAD_NUMBERS, where=st.sampled_from(["fixed", "axes"]))
def test_bad_numbers_are_one_line_errors_naming_the_key(key, value, where):
    shown = _toml(value)
    body = f"{key} = {shown}" if where == "fixed" else f"{key} = [{shown}]"
    text = f'name = "x"\n[{where}]\n{body}\n'
    if key == "mfu" and isinstance(value, int | float) and not isinstance(value, bool) \
            and math.isfinite(value) and 0 < value <= 1:
        return
    with pytest.raises(SpecError) as caught:
        grid(text)
    message = str(caught.value)
    assert "\n" not in message and key in message and "must be" in message, message


@pytest.mark.parametrize("spec", ["{ start = 1, stop = nan }", "{ start = -inf, stop = 1 }",
                                  "{ start = 1, stop = 1e308, scale = \"log2\" }",
                                  "{ start = 1, stop = 3, num = 1e12 }"])
def test_bad_ranges_are_refused_before_they_are_built(spec):
    with pytest.raises(SpecError) as caught:
        grid(f'name = "x"\n[axes]\nbatch = {spec}\n')
    assert "\n" not in str(caught.value) and "batch" in str(caught.value)
