"""The optimizer's answers recorded before the simulator's loop was restructured (issue 19,
commit afe7641): the same best (B, T) and every candidate's verdict and rate, to the bit,
on the shipped model, GPU, profile and workload of `sweep optimize`'s default search (a
small grid of 200 requests, and, marked slow, the default search itself and a cell of
specs/grids/optimize-llama.toml)."""

from __future__ import annotations

import hashlib

import pytest

from rooftui.core.assumptions import load_profile
from rooftui.core.hardware import load_gpu
from rooftui.core.model import load_model
from rooftui.core.point import PointConfig
from rooftui.core.workloads import load_workload
from rooftui.sweeps.optimize import Objective, Problem, optimize

# policy -> every (max batch, token budget, rejection, sustained rate), in search order
RECORDED = {
    "chunked": [(16, 512, "", 3.8038122966420986), (16, 2048, "", 3.563957904420677),
                (64, 512, "", 6.2086124829815486), (64, 2048, "", 5.812483839057576),
                (128, 512, "", 6.312313993479391), (128, 2048, "", 6.281742702051281),
                (256, 512, "kv_capacity", None), (256, 2048, "kv_capacity", None)],
    "continuous": [(16, 512, "", 3.5088264850829636), (16, 2048, "", 3.5081455701683764),
                   (64, 512, "", 5.691245024010898), (64, 2048, "", 5.691672494250002),
                   (128, 512, "", 6.203740501208003), (128, 2048, "", 6.202391676681949),
                   (256, 512, "kv_capacity", None), (256, 2048, "kv_capacity", None)],
}


@pytest.mark.parametrize("policy", list(RECORDED))
def test_the_search_gives_the_recorded_candidates_and_best(policy):
    config = PointConfig(gpu=load_gpu("h100-sxm"), model=load_model("llama-3-8b"),
                         assumptions=load_profile("derated"))
    problem = Problem(config=config, workload=load_workload("sharegpt-8k"), requests=200,
                      policy=policy)
    result = optimize(problem, Objective(ttft_s=2.0, tpot_s=0.1), [16, 64, 128, 256],
                      [512, 2048])
    got = [(c.max_batch, c.token_budget, c.reason, c.rate) for c in result.candidates]
    assert got == RECORDED[policy]
    assert (result.best.max_batch, result.best.token_budget) == (128, 512)


# the full searches, recorded at afe7641: (workload, TTFT, TPOT bounds, batches, budgets)
# -> (digest of every (B, T, rejection, rate), the best (B, T, rate)); `sweep optimize`'s
# default search, and specs/grids/optimize-llama.toml's Llama-3-8B on H100 SXM cell with
# azure-conv-2023 at TTFT 0.5 s and TPOT 0.1 s
FULL_SEARCHES = {
    "default search": (("sharegpt-8k", 2.0, 0.1, [8, 16, 32, 64, 96, 128, 192, 256],
                        [256, 512, 1024, 2048, 4096, 8192]),
                       ("0842c2863e05ec44", (128, 1024, 7.047631215089578))),
    "optimize-llama, 8B on H100, azure-conv-2023": (
        ("azure-conv-2023", 0.5, 0.1, [16, 32, 64, 128, 256], [256, 512, 1024, 2048, 4096]),
        ("c44a9f56d0b7f819", (256, 2048, 17.8629016927028))),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FULL_SEARCHES))
def test_the_full_searches_give_the_recorded_candidates_and_best(name):
    (workload, ttft, tpot, batches, budgets), (digest, best) = FULL_SEARCHES[name]
    config = PointConfig(gpu=load_gpu("h100-sxm"), model=load_model("llama-3-8b"),
                         assumptions=load_profile("derated"))
    result = optimize(Problem(config=config, workload=load_workload(workload)),
                      Objective(ttft_s=ttft, tpot_s=tpot), batches, budgets)
    rows = [(c.max_batch, c.token_budget, c.reason, c.rate) for c in result.candidates]
    assert (result.best.max_batch, result.best.token_budget, result.best.rate) == best
    assert hashlib.sha256(repr(rows).encode()).hexdigest()[:16] == digest
