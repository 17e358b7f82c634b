"""Speculative decoding: k drafted tokens, verified as a (k + 1)-token step."""

from __future__ import annotations

import pytest

from rooftui.core.assumptions import Assumptions
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.model import load_model
from rooftui.core.point import PointConfig, evaluate_point
from tests.conftest import run_sweep, sweep_json

H100 = load_gpu("h100-sxm")
TARGET, DRAFT = load_model("llama-3-70b"), load_model("llama-3.1-8b")


def point(**changes):
    return evaluate_point(PointConfig(gpu=H100, model=TARGET, batch=8, context=2048, tp=4,
                                      **changes))


@pytest.mark.parametrize("draft", [None, DRAFT])
def test_acceptance_zero_costs_more_than_plain_decoding(draft):
    plain = point()
    speculative = point(spec_tokens=4, acceptance=0.0, draft_model=draft)
    assert speculative["expected_tokens_per_step"] == 1.0
    assert speculative["step_time_s"] > plain["step_time_s"]
    assert speculative["tokens_per_s"] < plain["tokens_per_s"]


@pytest.mark.parametrize("k", [1, 3, 7])
def test_acceptance_near_one_approaches_k_plus_one_tokens_per_step(k):
    assert point(spec_tokens=k, acceptance=1.0)["expected_tokens_per_step"] == k + 1
    near = point(spec_tokens=k, acceptance=0.999_999)["expected_tokens_per_step"]
    assert near == pytest.approx(k + 1, rel=1e-5) and near < k + 1
    a = 0.6
    assert point(spec_tokens=k, acceptance=a)["expected_tokens_per_step"] == pytest.approx(
        (1 - a ** (k + 1)) / (1 - a))


def test_the_verification_step_is_a_k_plus_one_token_step():
    k, a = 4, 0.7
    plain, spec = point(), point(spec_tokens=k, acceptance=a)
    assert spec["gemm_flops"] == (k + 1) * plain["gemm_flops"]
    assert spec["gemm_bytes"] == plain["gemm_bytes"]  # the weights are read once
    tau = spec["expected_tokens_per_step"]
    assert spec["tokens_per_s"] == pytest.approx(8 * tau / spec["step_time_s"])
    assert spec["per_user_tokens_per_s"] == pytest.approx(tau / spec["step_time_s"])
    # the q queries attend S, S+1, ..., S+k keys and read the S + k keys once
    no_write = Assumptions(kv_write=False)
    keys = point(spec_tokens=k, acceptance=a, assumptions=no_write)["attention_bytes"]
    assert keys == pytest.approx(point(assumptions=no_write)["attention_bytes"]
                                 * (2048 + k) / 2048)


def test_the_draft_models_steps_are_counted():
    free = point(spec_tokens=4, acceptance=0.8)
    drafted = point(spec_tokens=4, acceptance=0.8, draft_model=DRAFT)
    draft_step = evaluate_point(PointConfig(gpu=H100, model=DRAFT, batch=8, context=2048,
                                            tp=4))
    extra = drafted["step_time_s"] - free["step_time_s"]
    assert extra == pytest.approx(4 * draft_step["step_time_s"], rel=1e-12)
    assert drafted["weight_bytes"] == pytest.approx(free["weight_bytes"]
                                                    + draft_step["weight_bytes"])


def test_speculative_tpot_budget_counts_tokens_per_step():
    spec = point(spec_tokens=3, acceptance=0.9)
    budget = spec["step_time_s"] / spec["expected_tokens_per_step"] * 1.0001
    best = evaluate_point(PointConfig(gpu=H100, model=TARGET, batch=8, context=2048, tp=4,
                                      spec_tokens=3, acceptance=0.9, tpot_budget=budget))
    assert best["max_batch_for_tpot"] >= 8


def test_cli_reports_speculation():
    report = sweep_json("point", "--model", "llama-3-70b", "--tp", 4, "--spec-tokens", 4,
                        "--acceptance", 0.7, "--draft-model", "llama-3.1-8b")
    assert report["speculative"]["expected_tokens_per_step"] == pytest.approx(
        (1 - 0.7 ** 5) / 0.3)
    assert {"draft_gemm", "draft_attention"} <= report["parts"].keys()
    assert "speculative: 4 drafted by Llama-3.1-8B" in run_sweep(
        "point", "--model", "llama-3-70b", "--tp", 4, "--spec-tokens", 4, "--acceptance",
        0.7, "--draft-model", "llama-3.1-8b")


@pytest.mark.parametrize(("changes", "message"), [
    ({"spec_tokens": 3}, "acceptance"),
    ({"acceptance": 0.5}, "spec tokens"),
    ({"spec_tokens": 3, "acceptance": 1.5}, r"\[0, 1\]"),
])
def test_bad_speculation_is_refused(changes, message):
    with pytest.raises(SpecError, match=message):
        PointConfig(gpu=H100, model=TARGET, **changes)
