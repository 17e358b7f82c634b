"""One configuration's scalar path (`PointConfig.step_inputs`: cached tables, numpy
scalars, core.elementwise; the step traced per setup, core.step_trace) gives the
vectorised core's numbers, and a grid evaluated in blocks of rows (`core.step_chunks`)
gives the same outputs as one call."""

from __future__ import annotations

from dataclasses import fields, replace
from unittest import mock

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rooftui.core import point, step_chunks
from rooftui.core.assumptions import load_profile
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.model import ModelArrays, load_model
from rooftui.core.point import PointConfig, evaluate_point
from rooftui.core.step import evaluate_step
from rooftui.core.systems import load_system
from rooftui.core.tables import DTYPES, GPUTable, gather_step_inputs

GPUS = [load_gpu(name) for name in ("h100-sxm", "h200", "a100-80gb", "b200")]
MODELS = [load_model(name) for name in
          ("llama-3-8b", "mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3", "gemma-2-9b",
           "gpt-oss-20b", "mistral-7b", "llama-3-70b")]
DRAFTS = [None, load_model("llama-3-8b"), load_model("qwen2.5-7b")]
# h100-sxm-kernels: decode attention's per-head fixed times; h200-sglang: a host floor
PROFILES = [load_profile(name) for name in ("ideal", "derated", "h100-splitwise",
                                             "h100-trtllm", "h100-sxm-kernels",
                                             "h200-sglang")]
SYSTEMS = [None, load_system("hgx-h200-ib"), load_system("gb200-nvl72")]
# fields the core tests for "switched off" (is_scalar): they stay single numbers on a grid
SWITCHES = {"tp", "spec_tokens", "pp", "ep", "dp", "micro_batches"}

configurations = st.fixed_dictionaries({
    "gpu": st.sampled_from(GPUS), "model": st.sampled_from(MODELS),
    "batch": st.integers(0, 2048), "context": st.integers(1, 200_000),
    "prefill": st.sampled_from([0, 0, 1, 512, 8192]),
    "prefill_context": st.sampled_from([0, 0, 4096]),
    "weight_dtype": st.sampled_from([None, "fp8", "int4-g128"]),
    "kv_dtype": st.sampled_from([None, "fp8"]),
    "assumptions": st.sampled_from(PROFILES),
    "tpot_budget": st.sampled_from([None, 0.01, 0.05]),
    "tp": st.sampled_from([1, 1, 2, 4, 8]),
    "spec_tokens": st.sampled_from([0, 0, 1, 4]),
    "draft_model": st.sampled_from(DRAFTS),
    "acceptance": st.floats(0.0, 1.0),
    "price_per_gpu_hour": st.sampled_from([None, 2.5]),
    "energy": st.booleans(),
    "layout": st.sampled_from([(1, 1, 1), (2, 1, 1), (1, 8, 8), (2, 8, 4), (1, 2, 1)]),
    "micro_batches": st.sampled_from([None, 4]),
    "system": st.sampled_from(SYSTEMS),
})


def point_config(values: dict) -> PointConfig:
    values = dict(values)
    pp, ep, dp = values.pop("layout")
    if values["spec_tokens"] == 0:
        values.update(acceptance=None, draft_model=None)
    if pp == 1 and values["micro_batches"] is not None:
        values["micro_batches"] = None
    try:
        return PointConfig(pp=pp, ep=ep, dp=dp, **values)
    except SpecError:
        assume(False)


def vectorised(inputs, width: int, rng):
    """`inputs` as a grid of `width` configurations, the first the one given: every
    number an array (but the switches), batch and lengths varied in the others."""
    def spread(values):
        changes = {}
        for item in fields(values):
            value = getattr(values, item.name)
            if isinstance(value, ModelArrays):
                changes[item.name] = spread(value)
            elif isinstance(value, np.generic) and item.name not in SWITCHES:
                changes[item.name] = np.full(width, value)
        return replace(values, **changes)

    grid = spread(inputs)
    varied = {name: np.concatenate([[getattr(inputs, name)],
                                    rng.integers(0, 4096, width - 1).astype(float)])
              for name in ("batch", "context", "prefill", "prefill_context")}
    return replace(grid, **varied)


def equal_or_one_ulp(scalar, array) -> bool:
    if isinstance(scalar, bool) or np.isnan(scalar):
        return bool(scalar == array) or (np.isnan(scalar) and np.isnan(array))
    return scalar == array or abs(scalar - array) <= np.spacing(abs(array))


@settings(max_examples=300, deadline=None)
@given(values=configurations, seed=st.integers(0, 2**32 - 1))
def test_one_configuration_equals_the_vectorised_core(values, seed):
    config = point_config(values)
    try:
        point = evaluate_point(config)
    except SpecError:
        assume(False)
    grid = evaluate_step(vectorised(config.step_inputs(), 3, np.random.default_rng(seed)),
                         config.assumptions, config.tpot_budget)
    assert point.keys() == grid.keys()
    for key, value in point.items():
        first = np.broadcast_to(grid[key], (3,))[0].item()
        assert equal_or_one_ulp(value, first), (key, value, first)


def test_the_cache_gives_the_tables_of_the_spec_it_is_given():
    """Equal specs share a cache entry; a changed one (same name) gets its own."""
    gpu = GPUS[0]
    faster = gpu.with_overrides(bandwidth_tbs=2 * gpu.bandwidth_tbs)
    assert faster.name == gpu.name
    base = PointConfig(gpu=gpu, model=MODELS[0], batch=64)
    assert (evaluate_point(base.with_changes(gpu=faster))["step_time_s"]
            < evaluate_point(base)["step_time_s"])


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), budget=st.sampled_from([None, 0.02]),
       profile=st.sampled_from(PROFILES))
def test_a_grid_in_blocks_of_rows_equals_one_call(seed, budget, profile):
    rng = np.random.default_rng(seed)
    points = 3001
    table = ModelArrays.stack(MODELS)
    inputs = gather_step_inputs(
        GPUTable.of(GPUS), table, gpu=rng.integers(0, len(GPUS), points),
        model=rng.integers(0, len(MODELS), points),
        batch=rng.integers(0, 1024, points), context=rng.integers(1, 100_000, points),
        prefill=rng.choice([0, 512], points), prefill_context=0,
        weight_dtype=rng.choice([DTYPES.index("bf16"), DTYPES.index("fp8")], points),
        kv_dtype=DTYPES.index("bf16"), compute_dtype=DTYPES.index("bf16"),
        tp=rng.choice([1, 2], points).astype(float), energy=True)
    whole = evaluate_step(inputs, profile, budget)
    default, step_chunks.CHUNK_POINTS = step_chunks.CHUNK_POINTS, 500
    try:
        assert step_chunks.row_blocks(inputs, budget) is not None
        blocks = evaluate_step(inputs, profile, budget)
    finally:
        step_chunks.CHUNK_POINTS = default
    assert whole.keys() == blocks.keys()
    for key in whole:
        assert np.array_equal(whole[key], blocks[key], equal_nan=True), key
        assert np.shape(whole[key]) == np.shape(blocks[key]), key


def same_bits(a, b) -> bool:
    """The same Python type and value, NaN and the sign of zero included."""
    if type(a) is not type(b):
        return False
    return a.hex() == b.hex() if type(a) is float else a == b


@settings(max_examples=300, deadline=None)
@given(values=configurations)
def test_the_traced_step_gives_the_step_models_numbers_to_the_bit(values):
    """`evaluate_point` runs a setup's step traced into straight-line Python
    (core.step_trace); the step model run on the same plain floats gives the same keys in
    the same order, the same types and the same bits."""
    config = point_config(values)
    try:
        with mock.patch.object(point, "_traced_step", return_value=None):
            untraced = evaluate_point(config)
    except SpecError:
        assume(False)
    with mock.patch.object(point, "TRACE_AFTER", 0):  # traced from the first call
        traced = point._traced_step(config)
        result = evaluate_point(config)
    # every setup traces but a TPOT budget's (its solver loops on the values)
    assert (traced is None) == (config.tpot_budget is not None)
    assert list(result) == list(untraced)
    for key, value in result.items():
        assert same_bits(value, untraced[key]), (key, value, untraced[key])


def test_a_setup_is_traced_once_met_often():
    """A setup met once (`sweep point`) is not worth a trace; one met often is."""
    gpu = GPUS[1].with_overrides(bandwidth_tbs=1.234)  # a setup no other test meets
    config = PointConfig(gpu=gpu, model=MODELS[0], batch=8)
    for _ in range(point.TRACE_AFTER):
        assert point._traced_step(config) is None
    assert point._traced_step(config.with_changes(batch=16)) is not None
    with mock.patch.object(point, "_traced_step", return_value=None):
        untraced = evaluate_point(config.with_changes(batch=16))
    assert evaluate_point(config.with_changes(batch=16)) == untraced
