"""The optimizer's answers recorded before the simulator's loop was restructured (issue 19,
commit afe7641): the same best (B, T) and every candidate's verdict and rate, to the bit,
on the shipped model, GPU, profile and workload of `sweep optimize`'s default search."""

from __future__ import annotations

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
