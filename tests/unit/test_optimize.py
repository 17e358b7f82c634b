"""The optimizer's search: the objective, the analytic pass against the simulator, the
rejection reasons, determinism, monotonicity in the SLO, and the Pareto frontier."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rooftui.core.assumptions import load_profile
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.lengths import parse_distribution
from rooftui.core.model import load_model
from rooftui.core.point import PointConfig
from rooftui.core.workloads import Workload, load_workload
from rooftui.sweeps import optimize as optimize_search
from rooftui.sweeps.optimize import (
    REASONS,
    Candidate,
    Objective,
    Problem,
    Server,
    evaluate_candidate,
    optimize,
    pareto_frontier,
)


def config(profile: str = "derated", **changes) -> PointConfig:
    base = PointConfig(gpu=load_gpu("h100-sxm"), model=load_model("llama-3-8b"),
                       assumptions=load_profile(profile))
    return base.with_changes(**changes) if changes else base


def fixed_workload(prompt: int, output: int) -> Workload:
    return Workload(f"fixed {prompt}/{output}", parse_distribution(f"fixed:{prompt}"),
                    parse_distribution(f"fixed:{output}"))


SMALL = Workload("small", parse_distribution("exp:mean=300,cap=1200"),
                 parse_distribution("exp:mean=80,cap=320"))


@pytest.fixture(scope="module")
def small_server() -> Server:
    """Shared across tests: its simulations are cached, so objectives reuse them."""
    return Server(Problem(config=config(), workload=SMALL, requests=150), 64)


# --- the objective ---------------------------------------------------------------------

def test_attainment_counts_requests_meeting_both_bounds():
    objective = Objective(ttft_s=1.0, tpot_s=0.1, attainment=0.75)
    ttft = np.array([0.5, 0.5, 2.0, 0.5])
    tpot = np.array([0.05, np.nan, 0.05, 0.05])  # NaN: a one-token output, no TPOT
    assert objective.met_by(ttft, tpot)  # 3 of 4
    assert not objective.met_by(ttft, np.array([0.05, 0.2, 0.05, 0.05]))  # 2 of 4


def test_quantile_bounds_each_metric_as_simulate_reports_it():
    objective = Objective(ttft_s=1.0, tpot_s=0.1, quantile=0.9)
    ttft = np.linspace(0.1, 1.2, 100)  # p90 = 1.09
    tpot = np.full(100, 0.05)
    assert objective.share is None
    assert not objective.met_by(ttft, tpot)
    assert objective.met_by(ttft * 0.9, tpot)
    assert Objective(ttft_s=1.0, tpot_s=0.1).share == 0.9  # the default


@pytest.mark.parametrize("bad", [dict(ttft_s=0, tpot_s=0.1), dict(ttft_s=1, tpot_s=-1),
                                 dict(ttft_s=1, tpot_s=0.1, quantile=0.8),
                                 dict(ttft_s=1, tpot_s=0.1, attainment=1.5)])
def test_bad_objectives_are_one_line_errors(bad):
    with pytest.raises(SpecError) as caught:
        Objective(**bad)
    assert "\n" not in str(caught.value)


# --- the analytic pass -------------------------------------------------------------------

def test_step_time_of_a_whole_composition_is_the_simulators(small_server):
    costs = small_server.costs
    context = small_server.decode_context
    for decodes, chunks in ((7, [(300, 0.0)]), (32, [(200, 100.0), (50, 0.0)]), (1, [])):
        got = small_server.step_time(decodes, context, [(n, c, 1.0) for n, c in chunks])
        want = costs.time(decodes, decodes * context, decodes * context, chunks)
        assert got == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize(("policy", "prompt", "output", "batch", "budget", "profile"), [
    ("continuous", 256, 128, 32, 100_000, "ideal"),
    ("continuous", 2048, 64, 32, 100_000, "derated"),
    ("continuous", 512, 300, 256, 4096, "ideal"),
    ("chunked", 256, 128, 64, 512, "derated"),
    ("chunked", 1024, 256, 64, 512, "ideal"),
    ("chunked", 2048, 128, 32, 256, "derated"),
    ("chunked", 4096, 256, 128, 2048, "ideal"),  # bound by the KV cache
])
def test_analytic_capacity_agrees_with_the_simulator_within_5_percent(
        policy, prompt, output, batch, budget, profile):
    """Fixed lengths, closed arrivals: the fluid model of the analytic pass against the
    simulated request throughput of the same configuration."""
    problem = Problem(config=config(profile), workload=fixed_workload(prompt, output),
                      policy=policy, requests=40 * batch)
    server = Server(problem, batch)
    analytic, _ = server.saturated(batch, budget)
    simulated = server.capacity(batch, budget)
    assert analytic == pytest.approx(simulated, rel=0.05)


def test_decode_tpot_rejection_uses_the_cores_max_batch_for_tpot(small_server):
    objective = Objective(ttft_s=5.0, tpot_s=0.0062)  # a lone decode takes 5.6 ms
    candidate = evaluate_candidate(small_server, objective, 64, 1024)
    a = candidate.analytic
    assert candidate.reason == "decode_tpot" and candidate.status == "dominated"
    assert a.max_batch_for_tpot < 64 and a.decode_step_s > 0.0062
    assert f"at most {a.max_batch_for_tpot:,.0f}" in candidate.detail


# --- every rejection has a reason ----------------------------------------------------------

def test_every_rejected_candidate_has_a_reason():
    problem = Problem(config=config("ideal"), workload=load_workload("sharegpt-8k"),
                      requests=120)
    objective = Objective(ttft_s=2.0, tpot_s=0.1)
    result = optimize(problem, objective, [8, 64, 256], [16, 64, 1024])
    reasons = {c.reason for c in result.candidates}
    assert {"budget_below_batch", "below_ridge", "kv_capacity"} <= reasons
    for candidate in result.candidates:
        assert candidate.reason in REASONS
        if candidate.status == "sustained":
            assert candidate.rate > 0 and candidate.summary is not None and not candidate.reason
        else:
            assert candidate.reason and candidate.detail and candidate.rate is None
    assert result.best is not None and result.best.status == "sustained"


@pytest.mark.parametrize(("objective", "reason"), [
    (Objective(ttft_s=0.001, tpot_s=0.1), "unloaded"),  # no prefill fits 1 ms
    (Objective(ttft_s=10.0, tpot_s=0.001), "unloaded"),  # no decode step fits 1 ms
])
def test_objectives_no_rate_can_meet_are_rejected_before_simulating(small_server, objective,
                                                                     reason):
    candidate = evaluate_candidate(small_server, objective, 16, 512)
    assert candidate.reason == reason and candidate.status == "infeasible"
    assert candidate.simulations == 0 and "alone" in candidate.detail


def test_a_request_larger_than_the_kv_cache_is_infeasible():
    small_gpu = load_gpu("h100-sxm").with_overrides(memory_gb=16.2)  # 8B weights: 16.06 GB
    problem = Problem(config=config(gpu=small_gpu), workload=SMALL, requests=50)
    candidate = evaluate_candidate(Server(problem, 8), Objective(2.0, 0.1), 8, 512)
    assert candidate.reason == "kv_too_small" and "does not fit the KV cache" in candidate.detail


def test_an_objective_missed_at_every_rate_is_slo_unmet(small_server):
    """p90 TTFT at its unloaded lower bound: any load at all queues a few prompts behind
    others, so no rate meets it, and the simulations say so."""
    loose = Objective(ttft_s=5.0, tpot_s=1.0, quantile=0.9)
    bound = evaluate_candidate(small_server, loose, 16, 512).analytic
    tight = Objective(ttft_s=bound.ttft_unloaded_s * 1.0001, tpot_s=1.0, quantile=0.9)
    candidate = evaluate_candidate(small_server, tight, 16, 512)
    assert candidate.reason == "slo_unmet" and candidate.status == "infeasible"
    assert "even at" in candidate.detail and candidate.capacity_rate > 0
    assert candidate.simulations == 7  # the capacity, then halving down to capacity / 64


# --- the search ---------------------------------------------------------------------------

def test_the_search_is_deterministic_and_its_rate_replays(small_server):
    objective = Objective(ttft_s=1.0, tpot_s=0.05)
    first = evaluate_candidate(small_server, objective, 16, 512)
    again = evaluate_candidate(Server(small_server.problem, 64), objective, 16, 512)
    assert first.status == "sustained"
    assert (first.rate, first.summary) == (again.rate, again.summary)
    assert first.arrival == f"poisson:rate={first.rate!r}"
    # the bisection stopped within its tolerance of a rate that fails
    assert first.rate < first.capacity_rate


SLOS = st.tuples(st.floats(0.02, 0.3), st.floats(0.0058, 0.012))  # near the bounds


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(strict=SLOS, looser=st.tuples(st.floats(1.0, 3.0), st.floats(1.0, 3.0)),
       quantile=st.sampled_from([None, 0.9]))
def test_a_looser_slo_never_lowers_the_sustained_rate(small_server, strict, looser, quantile):
    tight = Objective(ttft_s=strict[0], tpot_s=strict[1], quantile=quantile)
    loose = Objective(ttft_s=strict[0] * looser[0], tpot_s=strict[1] * looser[1],
                      quantile=quantile)
    for batch, budget in ((8, 256), (32, 1024)):
        rates = [evaluate_candidate(small_server, objective, batch, budget).rate or 0.0
                 for objective in (tight, loose)]
        assert rates[1] >= rates[0]


@pytest.mark.parametrize("threads", [1, 2])  # forked with the server built; forkserver
def test_workers_give_the_same_result(monkeypatch, threads):
    monkeypatch.setattr("threading.active_count", lambda: threads)
    problem = Problem(config=config(), workload=SMALL, requests=100)
    objective = Objective(ttft_s=1.0, tpot_s=0.05)
    alone = optimize(problem, objective, [8, 32], [256, 1024])
    pooled = optimize(problem, objective, [8, 32], [256, 1024], workers=2)
    assert [c.to_json() for c in alone.candidates] == [c.to_json() for c in pooled.candidates]
    assert alone.best.to_json() == pooled.best.to_json()


def test_pareto_frontier_keeps_the_undominated():
    def sustained(batch, per_gpu, per_user):
        candidate = Candidate(max_batch=batch, token_budget=512, reason="", detail="",
                              analytic=None, rate=per_gpu / 100)
        candidate.summary = {"tpot_s": {"mean": 1 / per_user}}
        candidate.analytic = type("A", (), {"mean_output_tokens": 100.0})()
        return candidate

    points = [sustained(8, 1000, 90), sustained(16, 1500, 80), sustained(32, 1400, 70),
              sustained(64, 2500, 40), sustained(128, 2400, 30)]
    frontier = pareto_frontier(points)
    assert [c.max_batch for c in frontier] == [64, 16, 8]
    assert all(math.isclose(c.tokens_per_s_per_gpu, c.rate * 100) for c in frontier)


# --- the rate search from a hint ---------------------------------------------------------

class Threshold:
    """A stand-in for the simulations: rates up to `limit` meet the objective; counts the
    queries."""

    def __init__(self, limit: float) -> None:
        self.limit, self.queries = limit, []

    def __call__(self, rate: float) -> bool:
        assert rate not in self.queries  # a rate is simulated once
        self.queries.append(rate)
        return rate <= self.limit


@settings(max_examples=300, deadline=None)
@given(capacity=st.floats(0.01, 1e4), share=st.floats(0.001, 1.0),
       hint=st.none() | st.floats(0.001, 0.9999), tolerance=st.sampled_from([1e-6, 0.005, 0.02, 0.1]))
def test_a_hint_never_changes_the_sustained_rate(capacity, share, hint, tolerance):
    """Monotone outcomes: the bisection from the capacity and the search from any hint end
    on the same float."""
    plain = optimize_search._sustained_rate(capacity, Threshold(capacity * share), tolerance)
    for below in (False, True):
        hinted = optimize_search._sustained_rate(
            capacity, Threshold(capacity * share), tolerance,
            None if hint is None else optimize_search.RateHint(hint, below))
        assert hinted == plain


@settings(max_examples=200, deadline=None)
@given(capacity=st.floats(0.01, 1e4), share=st.floats(0.016, 0.999),
       tolerance=st.sampled_from([1e-6, 0.005, 0.02, 0.1]))
def test_a_hint_at_the_answer_simulates_its_two_neighbours(capacity, share, tolerance):
    """A hint at the answer's share of the capacity: the answer and the grid rate above it
    (none when that is the capacity), nothing else."""
    answer = optimize_search._sustained_rate(capacity, Threshold(capacity * share), tolerance)
    assume(answer is not None)
    simulations = Threshold(capacity * share)
    hint = optimize_search.RateHint(answer / capacity)
    assert optimize_search._sustained_rate(capacity, simulations, tolerance, hint) == answer
    assert simulations.queries[0] == answer and len(simulations.queries) <= 2


class Noisy(Threshold):
    """Outcomes that are not monotone in the rate: a fixed random answer per rate."""

    def __init__(self, seed: int) -> None:
        super().__init__(math.inf)
        self.seed, self.outcomes = seed, {}

    def __call__(self, rate: float) -> bool:
        super().__call__(rate)
        self.outcomes[rate] = hash((self.seed, rate)) % 3 > 0
        return self.outcomes[rate]


@settings(max_examples=200, deadline=None)
@given(capacity=st.floats(0.01, 1e4), seed=st.integers(0, 10**6),
       hint=st.none() | st.floats(0.001, 0.9999), below=st.booleans())
def test_outcomes_out_of_order_still_give_a_simulated_answer(capacity, seed, hint, below):
    """Where meeting the objective is not monotone in the rate the search still ends, runs
    each rate once, and answers a rate that met the objective (or lies below one that did,
    with no miss between)."""
    simulations = Noisy(seed)
    answer = optimize_search._sustained_rate(
        capacity, simulations, 0.02, None if hint is None else optimize_search.RateHint(hint, below))
    if answer is not None:
        above = [rate for rate, met in simulations.outcomes.items() if met and rate >= answer]
        assert above
        assert not any(not met and answer <= rate <= min(above)
                       for rate, met in simulations.outcomes.items())


def test_each_candidate_starts_from_its_max_batchs_next_larger_budget():
    """The largest budget (the row's root) from the previous max batch's root, but for the
    first two."""
    predecessors = optimize_search.search_predecessors([8, 64, 16], [1024, 256, 4096, 512])
    assert predecessors == [2, 3, None, 0, 6, 7, None, 4, 10, 11, 6, 8]
