"""The Optimize view's search is `sweep optimize`'s: the same candidates, in the same
order, with the same simulations (each rate search starting from its predecessor's
answer), reported one candidate at a time."""

from __future__ import annotations

from rooftui.core.assumptions import load_profile
from rooftui.core.hardware import load_gpu
from rooftui.core.model import load_model
from rooftui.core.point import PointConfig
from rooftui.core.workloads import load_workload
from rooftui.sweeps.optimize import Objective, Problem, optimize
from rooftui.tui.optimize_search import search


def test_the_views_search_is_sweep_optimizes():
    config = PointConfig(gpu=load_gpu("h100-sxm"), model=load_model("llama-3-8b"),
                         assumptions=load_profile("derated"))
    problem = Problem(config=config, workload=load_workload("sharegpt-8k"), requests=200,
                      policy="chunked")
    objective = Objective(ttft_s=2.0, tpot_s=0.05)
    batches, budgets = [16, 64, 256], [256, 512, 2048]
    heard = []
    result = search(problem, objective, batches, budgets, heard.append, lambda *_: None)
    # candidates compare with their simulation counts: the same rates were simulated
    assert result == optimize(problem, objective, batches, budgets)
    assert sorted(heard, key=lambda c: (batches.index(c.max_batch),
                                        budgets.index(c.token_budget))) == result.candidates
