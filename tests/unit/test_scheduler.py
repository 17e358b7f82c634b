"""The serving simulator: step times equal the step model's, the policies' invariants,
occupancy against 1/H_B, Little's law, reproducibility."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core import scheduler
from rooftui.core.arrivals import parse_arrivals
from rooftui.core.assumptions import Assumptions, load_profile
from rooftui.core.closed_forms import harmonic
from rooftui.core.efficiency import Efficiency
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.lengths import parse_distribution
from rooftui.core.model import load_model
from rooftui.core.point import PointConfig, evaluate_point
from rooftui.core.scheduler import (
    SchedulerConfig,
    StepCosts,
    request_metrics,
    simulate,
    summarize,
    weighted_percentiles,
)
from rooftui.core.workloads import Requests, Workload, load_workload


def point_config(model: str = "llama-3-8b", profile: str = "ideal", memory_gb=None,
                 tp: int = 1, **assumptions) -> PointConfig:
    gpu = load_gpu("h100-sxm")
    if memory_gb is not None:
        gpu = gpu.with_overrides(memory_gb=memory_gb)
    return PointConfig(gpu=gpu, model=load_model(model), tp=tp,
                       assumptions=load_profile(profile).with_overrides(**assumptions))


def run(config: PointConfig, requests: Requests, **scheduler) -> object:
    return simulate(config.step_inputs(), config.assumptions, SchedulerConfig(**scheduler),
                    requests)


def workload(inputs: str, outputs: str) -> Workload:
    return Workload("test", parse_distribution(inputs, "input_tokens"),
                    parse_distribution(outputs))


def core_time(config: PointConfig, **step) -> float:
    return evaluate_point(config.with_changes(**step))["step_time_s"]


CONFIGS = {
    "llama-3-8b ideal": point_config(),
    "llama-3-8b derated, full overlap": point_config(profile="derated", overlap="full"),
    "mistral-7b windowed, activations": point_config("mistral-7b", activation_traffic=True),
    "reference model, full-square attention": point_config(
        "reference-mha-6.4b", profile="derated", attention_flops="full"),
    "mixtral-8x7b MoE over tp 2 (experts touched, all-reduces)": point_config(
        "mixtral-8x7b", tp=2),
    "gemma-2-9b mixed windows, full overlap": point_config("gemma-2-9b", overlap="full"),
}


# --- step costs against the core ----------------------------------------------------

@pytest.mark.parametrize("name", CONFIGS)
@settings(max_examples=40, deadline=None)
@given(batch=st.integers(0, 256), context=st.integers(1, 20_000),
       prefill=st.integers(0, 8192), cached=st.integers(0, 20_000))
def test_step_costs_are_the_core_step_model_to_the_bit(name, batch, context, prefill, cached):
    config = CONFIGS[name]
    if batch == prefill == 0:
        return
    costs = StepCosts(config.step_inputs(), config.assumptions, 256)
    mine = costs.time(batch, batch * context, batch * min(context, costs.window),
                      [(prefill, cached)] if prefill else [])
    assert mine == core_time(config, batch=batch, context=context, prefill=prefill,
                             prefill_context=cached)


CALIBRATED = {**CONFIGS, "mixtral-8x7b calibrated (per-part fractions, overheads)":
              point_config("mixtral-8x7b", profile="h100-trtllm")}


@pytest.mark.parametrize("name", CALIBRATED)
@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 256), contexts=st.lists(st.integers(1, 40_000), min_size=1,
                                                    max_size=40))
def test_decode_times_of_a_stretch_are_time_to_the_bit(name, batch, contexts):
    config = CALIBRATED[name]
    costs = StepCosts(config.step_inputs(), config.assumptions, 256)
    sums = np.array(contexts, np.int64) * batch
    windows = np.array([batch * min(c, costs.window) for c in contexts])
    expected = [costs.time(batch, int(s), float(w)) for s, w in zip(sums, windows, strict=True)]
    assert costs.decode_times(batch, sums, windows).tolist() == expected


STEPS = st.lists(st.tuples(st.integers(0, 256), st.integers(1, 20_000), st.lists(
    st.tuples(st.integers(1, 8192), st.integers(0, 20_000)), max_size=5)), min_size=1,
    max_size=30).filter(lambda steps: all(batch or chunks for batch, _, chunks in steps))


@pytest.mark.parametrize("name", CALIBRATED)
@settings(max_examples=25, deadline=None)
@given(steps=STEPS)
def test_step_times_of_logged_steps_are_time_to_the_bit(name, steps):
    config = CALIBRATED[name]
    costs = StepCosts(config.step_inputs(), config.assumptions, 256)
    batch = np.array([b for b, _, _ in steps])
    sums = np.array([b * s for b, s, _ in steps])
    windows = np.array([b * min(s, costs.window) for b, s, _ in steps])
    chunks = np.array([(k, n, c) for k, (_, _, pieces) in enumerate(steps) for n, c in pieces]
                      ).reshape(-1, 3)
    expected = [costs.time(int(b), int(s), float(w), pieces)
                for b, s, w, (_, _, pieces) in zip(batch, sums, windows, steps, strict=True)]
    got = costs.step_times(batch, sums, windows, chunks[:, 0], chunks[:, 1], chunks[:, 2])
    assert got.tolist() == expected


@pytest.mark.parametrize("policy, admission, arrival", [
    ("continuous", "reserve", "poisson:rate=0.7"), ("chunked", "paged", "poisson:rate=2"),
    ("chunked", "reserve", "gamma:rate=1,cv=3"), ("prefill_first", "paged", "poisson:rate=2")])
@pytest.mark.parametrize("model, profile", [("llama-3-8b", "derated"),
                                            ("gemma-2-9b", "h100-trtllm")])
def test_decode_stretches_in_numpy_are_the_step_by_step_loop(monkeypatch, policy, admission,
                                                             arrival, model, profile):
    """Light loads (long decode-only stretches) through the numpy stretches and, with
    them switched off, step by step: the same simulation to the bit (little KV when
    paged, so that stretches stop at blocks that do not fit)."""
    config = point_config(model, profile, memory_gb=26 if admission == "paged" else None)
    requests = load_workload("sharegpt-8k").requests(300, parse_arrivals(arrival), 3)

    def once():
        return run(config, requests, policy=policy, kv_admission=admission, max_batch=32)

    stretched = once()
    monkeypatch.setattr(scheduler, "STRETCH_STEPS", math.inf)
    stepwise = once()
    for name, column in stretched.steps.items():
        assert np.array_equal(column, stepwise.steps[name]), name
    assert np.array_equal(stretched.finish_s, stepwise.finish_s)
    assert np.array_equal(stretched.first_token_s, stepwise.first_token_s)
    assert np.array_equal(stretched.preemptions, stepwise.preemptions)
    assert np.array_equal(stretched.stall_gaps, stepwise.stall_gaps)  # prefill_first's


def test_moe_and_tensor_parallel_configurations_simulate():
    requests = load_workload("sharegpt-8k").requests(300, parse_arrivals("poisson:rate=20"), 0)
    config = CONFIGS["mixtral-8x7b MoE over tp 2 (experts touched, all-reduces)"]
    for policy in ("static", "continuous", "chunked"):
        simulation = run(config, requests, policy=policy)
        assert np.all(simulation.finish_s > simulation.first_token_s)
    single = StepCosts(point_config().step_inputs(), Assumptions(), 8)
    split = StepCosts(point_config(tp=2).step_inputs(), Assumptions(), 8)
    assert "communication" in split.parts
    # the replica's tokens: each GPU holds half of every token's KV and half the weights
    assert split.kv_capacity_tokens > 2 * single.kv_capacity_tokens


def test_speculative_decoding_is_refused():
    config = point_config().with_changes(spec_tokens=3, acceptance=0.7)
    with pytest.raises(SpecError, match="speculative decoding"):
        StepCosts(config.step_inputs(), config.assumptions, 8)


def test_several_chunks_share_one_weight_read():
    config = CONFIGS["llama-3-8b ideal"]
    costs = StepCosts(config.step_inputs(), config.assumptions, 8)
    one = core_time(config, batch=0, prefill=100)
    two_steps = costs.time(0, 0, 0, [(100, 0)]) + costs.time(0, 0, 0, [(100, 0)])
    together = costs.time(0, 0, 0, [(100, 0), (100, 0)])
    assert costs.time(0, 0, 0, [(100, 0)]) == one
    assert together < two_steps  # the weights are read once, not twice
    weights_time = costs.weight_bytes(200) / costs.memory_rate
    assert together == pytest.approx(two_steps - weights_time, rel=1e-12)  # memory-bound


# --- simulated steps against `sweep point` --------------------------------------------

@pytest.mark.parametrize("policy", ["static", "continuous", "chunked"])
@pytest.mark.parametrize("model", ["llama-3-8b", "mistral-7b"])
def test_decode_steps_equal_the_step_model(policy, model):
    """8 requests of 4,000 prompt tokens and 300 outputs: after the prefill every step
    decodes all 8 at context 4,000 + j (crossing Mistral's 4,096-token window)."""
    config = point_config(model)
    count, prompt, output = 8, 4000, 300
    requests = Requests(np.zeros(count), np.full(count, prompt), np.full(count, output))
    scheduler = {"policy": policy, "max_batch": count}
    if policy == "chunked":
        scheduler["token_budget"] = count * prompt
    steps = run(config, requests, **scheduler).steps
    assert steps["prefill_chunks"][0] == count and steps["decode_tokens"][0] == 0
    assert steps["prefill_tokens"][0] == count * prompt
    for j in range(1, output):
        assert steps["decode_tokens"][j] == count
        assert steps["duration_s"][j] == core_time(config, batch=count, context=prompt + j)
    assert steps["duration_s"].size == output


@pytest.mark.parametrize("model", ["llama-3-8b", "mistral-7b"])
def test_decode_plus_one_chunk_steps_equal_the_step_model(model):
    """Eight short requests decode while a long prompt arriving later is chunked: each of
    its steps is B decodes plus one chunk after the chunks before it."""
    config = point_config(model)
    count, budget, long_prompt = 8, 520, 5000
    requests = Requests(np.array([0.0] * count + [0.05]),
                        np.array([16] * count + [long_prompt]),
                        np.array([2000] * count + [5]))
    simulation = run(config, requests, policy="chunked", max_batch=count + 1,
                     token_budget=budget)
    steps = simulation.steps
    mixed = np.flatnonzero((steps["prefill_tokens"] > 0) & (steps["decode_tokens"] == count))
    assert mixed.size == math.ceil(long_prompt / (budget - count))
    done = 0
    for k in mixed:
        take = int(steps["prefill_tokens"][k])
        context = int(steps["decode_context_tokens"][k]) // count
        assert take == min(budget - count, long_prompt - done)
        assert steps["duration_s"][k] == core_time(config, batch=count, context=context,
                                                   prefill=take, prefill_context=done)
        done += take
    assert done == long_prompt


@pytest.mark.parametrize("model", ["llama-3-8b", "mistral-7b"])
def test_every_continuous_step_is_its_batch_costed_from_scratch(model):
    """Rebuild each step's composition from the per-request times alone (prompt prefilled
    whole in the step that yields its first token; decoding at context I + k - k_first
    until its last token) and cost it directly: the simulator's incremental sums (context,
    min(context, window), heaps of finishes and window crossings) must give the same
    step, bit for bit."""
    config = point_config(model)
    requests = load_workload("sharegpt-8k").requests(400, parse_arrivals("poisson:rate=6"), 4)
    simulation = run(config, requests, policy="continuous", max_batch=32)
    steps = simulation.steps
    ends = steps["start_s"] + steps["duration_s"]
    first = np.searchsorted(ends, simulation.first_token_s)
    last = np.searchsorted(ends, simulation.finish_s)
    assert np.array_equal(ends[first], simulation.first_token_s)
    costs = StepCosts(config.step_inputs(), config.assumptions, 32)
    for k in range(ends.size):
        decoding = np.flatnonzero((first < k) & (last >= k))
        contexts = requests.input_tokens[decoding] + (k - first[decoding])
        prompts = requests.input_tokens[first == k]
        expected = costs.time(decoding.size, int(contexts.sum()),
                              int(np.minimum(contexts, costs.window).sum()),
                              [(int(n), 0) for n in prompts])
        assert steps["duration_s"][k] == expected, k


# --- policies ---------------------------------------------------------------------------

@pytest.mark.parametrize("batch, count", [(4, 20_000), (32, 80_000), (128, 384_000)])
def test_static_occupancy_is_one_over_harmonic_for_exponential_outputs(batch, count):
    """The estimator sum(L) / (B sum(max L)) over n batches has a relative standard error
    of about 0.27 / 0.26 / 0.24 per sqrt(batch count) at B = 4 / 32 / 128 (sampled), so
    5,000 / 2,500 / 3,000 batches keep 1.5 % beyond 3.5 standard errors; rounding the
    draws to whole tokens moves the ratio by < 0.1 %."""
    requests = workload("fixed:64", "exp:mean=100").requests(count, parse_arrivals("closed"),
                                                             seed=2024)
    simulation = run(point_config(), requests, policy="static", max_batch=batch)
    occupancy = summarize(simulation)["occupancy"]
    assert occupancy == pytest.approx(1 / float(harmonic(batch)), rel=0.015)


def test_continuous_batching_at_saturation_keeps_slots_full():
    requests = workload("fixed:200", "exp:mean=100").requests(20_000, parse_arrivals("closed"),
                                                              seed=7)
    batch = 32
    result = summarize(run(point_config(), requests, policy="continuous", max_batch=batch))
    # a freed slot is refilled the next step; only the final drain, at most the longest
    # output's steps, leaves slots idle
    useful = requests.output_tokens.sum()
    bound = useful / (useful + batch * (requests.output_tokens.max() + 1))
    assert result["occupancy"] >= bound > 0.98
    static = summarize(run(point_config(), requests, policy="static", max_batch=batch))
    assert static["occupancy"] < 0.3 < result["occupancy"]


@pytest.mark.parametrize("policy", ["static", "continuous", "chunked"])
def test_littles_law_on_the_simulated_queue(policy):
    """Mean number in system (integrated over the step records) = arrival rate x mean
    time in system. The records count a request from the start of the first step after
    it arrives; adding back that lag must give the per-request times exactly. Against
    the nominal rate R the window [0, T] holds N arrivals whose span fluctuates by
    1/sqrt(N) (exponential gaps; 4 standard errors) and ends with a drain after the last
    arrival: N / (R T) is within 4 / sqrt(N) + drain / T of 1."""
    rate, count = 12.0, 10_000
    requests = load_workload("azure-conv-2023").requests(
        count, parse_arrivals(f"poisson:rate={rate}"), seed=11)
    simulation = run(point_config(), requests, policy=policy)
    steps = simulation.steps
    window = simulation.finish_s.max()
    counted = np.sum((steps["waiting"] + steps["running"]) * steps["duration_s"])
    next_start = steps["start_s"][np.searchsorted(steps["start_s"], requests.arrival_s)]
    lag = np.sum(next_start - requests.arrival_s)
    times_in_system = simulation.finish_s - requests.arrival_s
    assert counted + lag == pytest.approx(times_in_system.sum(), rel=1e-9)
    number_in_system = (counted + lag) / window
    drain = window - requests.arrival_s[-1]
    assert number_in_system == pytest.approx(
        rate * times_in_system.mean(), rel=4 / math.sqrt(count) + drain / window)


@pytest.mark.parametrize("policy, admission", [("static", "reserve"), ("continuous", "paged"),
                                               ("chunked", "paged"), ("chunked", "reserve")])
def test_seeded_runs_are_reproducible_bit_for_bit(policy, admission):
    config = point_config(memory_gb=22)  # little KV: paged runs preempt
    load = load_workload("sharegpt-8k")

    def once(seed):
        requests = load.requests(800, parse_arrivals("gamma:rate=6,cv=3"), seed)
        simulation = run(config, requests, policy=policy, kv_admission=admission)
        return simulation, summarize(simulation, slo_ttft=2.0, slo_tpot=0.05)

    (first, first_summary), (again, again_summary) = once(5), once(5)
    assert first_summary == again_summary
    for name, column in first.steps.items():
        assert np.array_equal(column, again.steps[name]), name
    assert np.array_equal(first.finish_s, again.finish_s)
    assert np.array_equal(first.first_token_s, again.first_token_s)
    assert once(6)[1] != first_summary
    if admission == "paged":
        assert first_summary["preemptions"] > 0


@pytest.mark.parametrize("policy", ["continuous", "chunked"])
def test_paged_preemption_recomputes_and_keeps_within_capacity(policy):
    config = point_config(memory_gb=20)
    requests = load_workload("sharegpt-8k").requests(2000, parse_arrivals("poisson:rate=8"), 1)
    simulation = run(config, requests, policy=policy, kv_admission="paged")
    steps = simulation.steps
    preemptions = int(simulation.preemptions.sum())
    assert preemptions > 0
    assert steps["kv_tokens"].max() <= simulation.kv_capacity_tokens
    assert np.all(np.isfinite(simulation.finish_s))
    assert np.all(simulation.first_token_s > requests.arrival_s)
    assert np.all(simulation.finish_s >= simulation.first_token_s)
    # every output token is emitted once: by a decode step, a prompt's prefill, or the
    # recompute prefill after a preemption of a decoding sequence
    recomputes = simulation.resume_gaps_s.size
    assert steps["decode_tokens"].sum() + len(requests) + recomputes == \
        requests.output_tokens.sum()
    assert steps["prefill_tokens"].sum() > requests.input_tokens.sum()
    reserve = run(config, requests, policy=policy, kv_admission="reserve")
    assert reserve.preemptions.sum() == 0
    assert reserve.steps["kv_tokens"].max() <= reserve.kv_capacity_tokens


def test_chunked_budget_slots_and_decodes_first():
    requests = load_workload("sharegpt-8k").requests(3000, parse_arrivals("closed"), 3)
    simulation = run(point_config(), requests, policy="chunked", max_batch=64, token_budget=256)
    steps = simulation.steps
    assert np.all(steps["decode_tokens"] + steps["prefill_tokens"] <= 256)
    assert np.all(steps["decode_tokens"] + steps["prefill_chunks"] <= 64)
    assert steps["decode_tokens"].sum() == (requests.output_tokens - 1).sum()
    assert steps["prefill_tokens"].sum() == requests.input_tokens.sum()


def test_continuous_budget_caps_whole_prompts_per_step():
    requests = workload("fixed:1000", "fixed:50").requests(64, parse_arrivals("closed"), 0)
    capped = run(point_config(), requests, policy="continuous", max_batch=64,
                 token_budget=2500).steps
    assert capped["prefill_tokens"].max() == 2000  # two whole prompts, never a third
    assert capped["prefill_tokens"].sum() == 64_000
    alone = run(point_config(), requests, policy="continuous", max_batch=64,
                token_budget=10).steps
    assert alone["prefill_tokens"].max() == 1000  # longer than the budget: one at a time
    free = run(point_config(), requests, policy="continuous", max_batch=64).steps
    assert free["prefill_tokens"][0] == 64_000  # no cap: every slot filled at once


def test_an_unchunked_long_prompt_stalls_decodes_and_chunking_bounds_it():
    """The seed's chunked-prefill argument: a 32K prompt in a continuous step stalls
    every decoding user for its whole prefill; chunks of 512 bound the stall."""
    config = point_config("reference-mha-6.4b", profile="derated", attention_flops="full",
                          memory_gb=200)
    count = 32
    requests = Requests(np.array([0.0] * count + [0.5]), np.array([512] * count + [32768]),
                        np.array([400] * count + [2]))
    worst = {}
    for policy, budget in (("continuous", None), ("chunked", 512 + count)):
        simulation = run(config, requests, policy=policy, max_batch=count + 1,
                         token_budget=budget)
        steps = simulation.steps
        worst[policy] = steps["duration_s"][steps["decode_tokens"] > 0].max()
    assert worst["continuous"] > 1.5  # the seed's "two seconds" for a 32K prefill
    assert worst["chunked"] < 0.05  # one chunk plus a decode step: tens of ms


def test_tpot_is_e2e_minus_ttft_over_the_later_tokens():
    requests = load_workload("azure-code-2023").requests(2000, parse_arrivals("poisson:rate=4"),
                                                         9)
    simulation = run(point_config(), requests, policy="continuous")
    metrics = request_metrics(simulation)
    later = requests.output_tokens - 1
    manual = (simulation.finish_s - simulation.first_token_s)[later > 0] / later[later > 0]
    assert np.allclose(metrics["tpot_s"][later > 0], manual, rtol=1e-12)
    summary = summarize(simulation, slo_ttft=0.5)
    assert summary["tpot_s"]["p90"] == pytest.approx(np.percentile(manual, 90), rel=1e-12)
    assert summary["slo_attainment"] == np.mean(metrics["ttft_s"] <= 0.5)
    met = metrics["ttft_s"] <= 0.5
    assert summary["goodput_tokens_per_s"] == pytest.approx(
        requests.output_tokens[met].sum() / summary["duration_s"])


@settings(max_examples=60, deadline=None)
@given(data=st.lists(st.tuples(st.floats(0, 1e3, allow_nan=False), st.integers(0, 6)),
                     min_size=1, max_size=30).filter(lambda d: sum(w for _, w in d) > 0),
       q=st.floats(0, 100))
def test_weighted_percentiles_equal_numpy_on_the_repeated_sample(data, q):
    values, weights = np.array([v for v, _ in data]), np.array([w for _, w in data])
    expected = np.percentile(np.repeat(values, weights), q)
    assert weighted_percentiles(values, weights, q) == pytest.approx(expected, rel=1e-12,
                                                                      abs=1e-12)


def test_trace_replay_keeps_rows_and_scales_time(shared_dir):
    load = load_workload(str(shared_dir / "traces" / "azure-conv-2023.csv"))
    replay = load.requests(100, parse_arrivals("trace"), seed=0)
    faster = load.requests(100, parse_arrivals("trace:speed=4"), seed=99)
    assert np.array_equal(replay.input_tokens, load.rows["input_tokens"][:100])
    assert np.array_equal(faster.output_tokens, replay.output_tokens)
    assert np.allclose(faster.arrival_s * 4, replay.arrival_s)
    assert replay.arrival_s[0] == 0


@pytest.mark.parametrize("settings_, message", [
    ({"policy": "eager"}, "unknown policy"),
    ({"policy": "static", "kv_admission": "paged"}, "static batching reserves"),
    ({"policy": "static", "token_budget": 512}, "chunked or continuous"),
    ({"policy": "continuous", "token_budget": 0}, ">= 1 token"),
    ({"policy": "chunked", "token_budget": 64, "max_batch": 128}, "at least the max batch"),
    ({"max_batch": 0}, "max batch"),
    ({"kv_admission": "lru"}, "unknown KV admission"),
])
def test_bad_scheduler_settings(settings_, message):
    with pytest.raises(SpecError, match=message):
        SchedulerConfig(**settings_)


def test_a_request_larger_than_the_kv_cache_is_refused():
    requests = Requests(np.zeros(1), np.array([10_000]), np.array([10]))
    with pytest.raises(SpecError, match="does not fit the KV cache"):
        run(point_config(memory_gb=17), requests)


def test_costs_refuse_a_core_they_cannot_reproduce(monkeypatch):
    """If the step model changes shape (here: a per-step constant), building fails."""
    import rooftui.core.step_costs as step_costs

    real = step_costs.evaluate_step

    def with_launch_overhead(inputs, assumptions, tpot_budget=None):
        out = dict(real(inputs, assumptions, tpot_budget))
        out["step_time_s"] = out["step_time_s"] + 1e-5
        return out

    monkeypatch.setattr(step_costs, "evaluate_step", with_launch_overhead)
    config = point_config()
    with pytest.raises(RuntimeError, match="no longer reproduces evaluate_step"):
        StepCosts(config.step_inputs(), Assumptions(), 16)


@pytest.mark.parametrize("policy", ["static", "continuous", "chunked"])
@settings(max_examples=10, deadline=None)
@given(front_end=st.floats(1e-4, 2.0), rate=st.floats(0.5, 50.0))
def test_the_front_end_shifts_ttft_and_e2e_by_itself_and_nothing_else(policy, front_end, rate):
    """A profile's request_overhead_s is the client's delay outside the engine: each
    request's TTFT and E2E move by exactly it (an SLO is judged on the moved TTFT); the
    steps, TPOT, ITL and throughput are the engine's, unchanged."""
    base = point_config()
    delayed = base.with_changes(assumptions=base.assumptions.with_overrides(
        efficiency=Efficiency(request_overhead_s=front_end)))
    requests = workload("fixed:300", "exp:mean=40").requests(
        60, parse_arrivals(f"poisson:rate={rate}"), 7)
    budget = None if policy == "static" else 256
    at_zero, moved = (run(config, requests, policy=policy, max_batch=16, token_budget=budget)
                      for config in (base, delayed))
    zero, shifted = request_metrics(at_zero), request_metrics(moved)
    for key in ("ttft_s", "e2e_s"):
        np.testing.assert_array_equal(shifted[key], zero[key] + front_end)
    np.testing.assert_array_equal(shifted["tpot_s"], zero["tpot_s"])
    for name, column in at_zero.steps.items():
        np.testing.assert_array_equal(moved.steps[name], column)
    slo = float(np.median(zero["ttft_s"])) + front_end / 2
    assert summarize(moved, slo_ttft=slo)["slo_attainment"] == pytest.approx(
        float(np.mean(zero["ttft_s"] + front_end <= slo)))


@pytest.mark.parametrize("admission", ["reserve", "paged"])
@settings(max_examples=12, deadline=None)
@given(rate=st.floats(2.0, 80.0), budget=st.integers(64, 2048), max_batch=st.integers(1, 48),
       seed=st.integers(0, 2**16))
def test_prefill_first_never_mixes_and_decodes_only_when_nothing_can_be_admitted(
        admission, rate, budget, max_batch, seed):
    """SGLang's rule: a step is a prefill batch (<= the budget, no decodes) whenever a
    prompt is partly prefilled or one waiting can be admitted; a decode step runs every
    decoding sequence. Every output token is emitted once (preemptions re-emit theirs);
    each decode token's ITL sample is the time since that sequence's previous token, so
    the samples sum to the requests' decode time (sum of E2E - TTFT) exactly."""
    requests = workload("exp:mean=300,cap=600", "exp:mean=30,cap=80").requests(
        80, parse_arrivals(f"poisson:rate={rate}"), seed)
    config = point_config(memory_gb=16.3 if admission == "paged" else None)  # preempts
    simulation = run(config, requests, policy="prefill_first", max_batch=max_batch,
                     token_budget=budget, kv_admission=admission)
    steps = simulation.steps
    prefill = steps["prefill_tokens"] > 0
    assert not np.any(prefill & (steps["decode_tokens"] > 0))
    assert steps["prefill_tokens"].max() <= budget
    assert np.all(steps["decode_tokens"][~prefill] > 0)
    if admission == "reserve":  # the KV holds every batch here: only the max batch stops
        decode_waiting = ~prefill & (steps["waiting"] > 0)
        assert np.all(steps["running"][decode_waiting] >= max_batch)
        assert steps["decode_tokens"].sum() == (requests.output_tokens - 1).sum()
    result = summarize(simulation)
    decode_time = np.sum(simulation.finish_s - simulation.first_token_s)
    gaps = (requests.output_tokens - 1).sum() + simulation.preemptions.sum()
    if simulation.preemptions.sum() == 0:
        assert result["itl_s"]["mean"] * gaps == pytest.approx(decode_time, rel=1e-9)


def test_prefill_first_stalls_decodes_that_chunked_prefill_runs_alongside():
    """One long decode, then prompts arriving while it runs: under prefill_first each
    prefill batch is a step the decode waits through (its TPOT grows by their time);
    chunked prefill runs the same prompts with it. Prompts get their first token sooner
    prefill-first, as SGLang's scheduler intends."""
    arrivals = np.concatenate([[0.0], 0.05 + 0.01 * np.arange(20)])
    requests = Requests(arrivals, np.full(21, 2000), np.concatenate([[400], np.full(20, 2)]))
    config = point_config()
    first, chunked = (run(config, requests, policy=policy, max_batch=32, token_budget=2048)
                      for policy in ("prefill_first", "chunked"))
    first_m, chunked_m = request_metrics(first), request_metrics(chunked)
    assert first_m["tpot_s"][0] > chunked_m["tpot_s"][0]
    steps = first.steps
    during = (steps["start_s"] >= first.first_token_s[0]) & (steps["start_s"] < first.finish_s[0])
    prefills = during & (steps["prefill_tokens"] > 0)
    assert prefills.sum() >= 10 and not np.any(steps["decode_tokens"][prefills])
    # request 0's decode time is every step it lived through, stalls included
    assert first.finish_s[0] - first.first_token_s[0] == pytest.approx(
        steps["duration_s"][during].sum(), rel=1e-12)
    assert np.mean(first_m["ttft_s"][1:]) < np.mean(chunked_m["ttft_s"][1:])


def test_prefill_first_budget_default_and_settings():
    assert SchedulerConfig(policy="prefill_first").budget == scheduler.PREFILL_FIRST_BUDGET
    # decodes do not share a prefill batch's budget: it may be below the max batch
    assert SchedulerConfig(policy="prefill_first", max_batch=256, token_budget=64).budget == 64
