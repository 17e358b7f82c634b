"""The prefix cache and session workloads: LRU at block granularity (against a plain
block-by-block LRU), the inclusion property, what a session's turn hits, capacity 0 as
today's simulator, tiers' load times, and the Mooncake trace's hit rate and TTFT against
what its hash ids imply."""

from __future__ import annotations

import math
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core.arrivals import parse_arrivals
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.model import load_model
from rooftui.core.point import PointConfig, evaluate_point
from rooftui.core.prefix_cache import CacheConfig, PrefixCache, replay_hits
from rooftui.core.scheduler import SchedulerConfig, StepCosts, simulate, summarize
from rooftui.core.sessions import (
    HASH_BLOCK_TOKENS,
    hash_id_chains,
    parse_generator,
    read_session_trace,
)

SHARED_TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
MOONCAKE = SHARED_TRACES / "mooncake-conv-hashids.csv"


def block_lru(requests, capacities):
    """The reference: one entry per block, tiers as OrderedDicts (last = most recent);
    a request looks up its prefix, then touches its blocks tail first; evictions move a
    block to the next tier's most recent end."""
    tiers = [OrderedDict() for _ in capacities]
    hits = []
    for runs in requests:
        hit, stop = [0] * len(tiers), False
        for chain, blocks in runs:
            for block in range(blocks):
                tier = next((t for t, d in enumerate(tiers) if (chain, block) in d), None)
                if tier is None:
                    stop = True
                    break
                hit[tier] += 1
            if stop:
                break
        hits.append(hit)
        for chain, blocks in reversed(runs):
            for block in reversed(range(blocks)):
                for d in tiers:
                    d.pop((chain, block), None)
                tiers[0][(chain, block)] = None
        for t, d in enumerate(tiers):
            while len(d) > capacities[t]:
                key, _ = d.popitem(last=False)
                if t + 1 < len(tiers):
                    tiers[t + 1][key] = None
    return hits


# a request: an optional shared head chain (0) then one of a few session chains
request_runs = st.tuples(st.booleans(), st.integers(0, 3), st.integers(1, 5),
                         st.integers(1, 9)).map(
    lambda r: ((0, r[1]),) * (r[0] and r[1] > 0) + ((r[2], r[3]),))


@settings(max_examples=200, deadline=None)
@given(requests=st.lists(request_runs, min_size=1, max_size=40),
       capacities=st.lists(st.integers(0, 14), min_size=1, max_size=3))
def test_segment_lru_equals_a_block_by_block_lru(requests, capacities):
    assert replay_hits(requests, capacities) == block_lru(requests, capacities)


def test_lru_evicts_the_least_recent_block_first():
    cache = PrefixCache([3])
    for chain in (1, 2, 3):
        cache.touch([(chain, 1)])
    cache.touch([(1, 1)])  # 1 is now the most recent; 2 the least
    cache.touch([(4, 1)])
    cache.fit()
    assert [cache.lookup([(chain, 1)])[0] for chain in (1, 2, 3, 4)] == [1, 0, 1, 1]
    # within one prompt the tail goes first, so what stays is still a prefix
    cache = PrefixCache([4])
    cache.touch([(7, 4)])
    cache.touch([(8, 1)])
    cache.fit()
    assert cache.lookup([(7, 4)]) == [3]


@settings(max_examples=150, deadline=None)
@given(requests=st.lists(request_runs, min_size=1, max_size=40),
       capacities=st.lists(st.integers(0, 12), min_size=1, max_size=3),
       tier=st.integers(0, 2), extra=st.integers(1, 10))
def test_more_capacity_never_lowers_the_lru_hit_rate(requests, capacities, tier, extra):
    """LRU's inclusion property, for any tier made larger, request by request."""
    tier = min(tier, len(capacities) - 1)
    larger = list(capacities)
    larger[tier] += extra
    small, large = replay_hits(requests, capacities), replay_hits(requests, larger)
    assert all(sum(a) <= sum(b) for a, b in zip(small, large, strict=True))


def test_hash_ids_become_chains_cut_where_prefixes_branch():
    runs = hash_id_chains([[0, 1, 2], [0, 1, 2, 3, 4], [0, 5], [9]], "test")
    # 0 has children 1 and 5: a chain of its own; 1-2-3-4 never branches
    assert runs == [((0, 1), (1, 2)), ((0, 1), (1, 4)), ((0, 1), (5, 1)), ((9, 1),)]
    with pytest.raises(SpecError, match="chained"):
        hash_id_chains([[0, 1], [2, 1]], "test")


# --- the simulator ------------------------------------------------------------------

H100 = PointConfig(gpu=load_gpu("h100-sxm"), model=load_model("llama-3-8b"))


def run(sessions, cache=None, config=H100, **scheduler):
    return simulate(config.step_inputs(), config.assumptions, SchedulerConfig(**scheduler),
                    sessions.requests, prefix_cache=cache, sessions=sessions,
                    gpu_key=config.gpu.key or "h100-sxm")


def write(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


@pytest.mark.parametrize("policy", ["continuous", "chunked", "prefill_first"])
def test_a_second_turn_hits_exactly_the_blocks_of_the_first_turns_prompt_and_output(
        tmp_path, policy):
    first_in, first_out, new = 1000, 300, 250
    trace = write(tmp_path / "s.csv", "session_id,turn,input_tokens,output_tokens,think_time_s",
                  [f"a,0,{first_in},{first_out},", f"a,1,{first_in + first_out + new},20,2.5"])
    sessions = read_session_trace(trace)
    simulation = run(sessions, CacheConfig(), policy=policy)
    block = 16
    # every token but the last sampled one has its KV written: full blocks of those
    expected = (first_in + first_out - 1) // block * block
    assert simulation.prefix_cache["cached_prefill_tokens"] == expected
    assert simulation.prefix_cache["computed_prefill_tokens"] == (
        first_in + first_in + first_out + new - expected)
    # the turn arrives its think time after the first turn's last token
    assert simulation.arrivals[1] == simulation.finish_s[0] + 2.5
    # ... and its prefill is priced as the uncached tokens after the cached context
    steps = simulation.steps
    second = np.flatnonzero(steps["start_s"] >= simulation.arrivals[1])[0]
    prefill = first_in + first_out + new - expected
    if policy != "chunked":  # one step prefills the whole uncached rest
        assert steps["prefill_tokens"][second] == prefill
        want = evaluate_point(H100.with_changes(batch=0, prefill=prefill,
                                                prefill_context=expected))["step_time_s"]
        assert steps["duration_s"][second] == want


def generated(count=600, spec="sessions:turns=4,system=700,first=(exp:mean=400),"
              "growth=(exp:mean=150),output=(exp:mean=120),think=3",
              arrival="poisson:rate=3"):
    return parse_generator(spec).requests(count, parse_arrivals(arrival), seed=1)


def test_generated_sessions_grow_by_the_previous_output_and_the_new_message():
    sessions = generated()
    r, previous = sessions.requests, sessions.previous
    later = np.flatnonzero(previous >= 0)
    before = previous[later]
    assert np.all(previous[later] < later)
    growth = r.input_tokens[later] - r.input_tokens[before] - r.output_tokens[before]
    assert growth.min() >= 1
    assert np.all(sessions.system_tokens == 700)
    assert np.all(sessions.session[later] == sessions.session[before])


@pytest.mark.parametrize("policy, admission", [("continuous", "reserve"),
                                               ("chunked", "reserve"),
                                               ("chunked", "paged"),
                                               ("prefill_first", "paged")])
def test_capacity_zero_is_todays_simulator_request_for_request(policy, admission):
    sessions = generated()
    without = run(sessions, None, policy=policy, kv_admission=admission)
    empty = run(sessions, CacheConfig(hbm_gb=0), policy=policy, kv_admission=admission)
    assert empty.prefix_cache["cached_prefill_tokens"] == 0
    assert np.array_equal(empty.first_token_s, without.first_token_s)
    assert np.array_equal(empty.finish_s, without.finish_s)
    for name, column in without.steps.items():
        assert np.array_equal(empty.steps[name], column), name


def test_a_lower_tier_hit_costs_its_transfer_and_stretches_the_step(tmp_path):
    """No HBM cache, a CPU tier at 1 GB/s: the second turn's hit is loaded at 1 GB/s,
    and the step that admits it lasts the load when the load is longer."""
    trace = write(tmp_path / "s.csv", "session_id,turn,input_tokens,output_tokens,think_time_s",
                  ["a,0,4000,100,", "a,1,4200,10,1"])
    sessions = read_session_trace(trace)
    cache = CacheConfig(hbm_gb=0, cpu_gb=100, cpu_bandwidth_gbs=1.0)
    simulation = run(sessions, cache)
    costs = StepCosts(H100.step_inputs(), H100.assumptions, 128)
    cached = simulation.prefix_cache["cached_prefill_tokens_by_tier"]["cpu"]
    assert cached == (4100 - 1) // 16 * 16 and simulation.prefix_cache["hit_rate_by_tier"][
        "hbm"] == 0
    load = cached * costs.kv_bytes_per_token / 1e9
    assert simulation.prefix_cache["load_s"] == pytest.approx(load, rel=1e-12)
    steps = simulation.steps
    second = np.flatnonzero(steps["start_s"] >= simulation.arrivals[1])[0]
    assert steps["duration_s"][second] == pytest.approx(load, rel=1e-12)
    assert simulation.prefix_cache["load_stall_s"] > 0


def test_refusals(tmp_path):
    sessions = generated(50)
    with pytest.raises(SpecError, match="continuous or chunked"):
        run(sessions, CacheConfig(), policy="static")
    with pytest.raises(SpecError, match="share prefixes"):
        simulate(H100.step_inputs(), H100.assumptions, SchedulerConfig(), sessions.requests,
                 prefix_cache=CacheConfig())
    short = write(tmp_path / "short.csv", "session_id,turn,input_tokens,output_tokens,arrival_s",
                  ["a,0,1000,300,0", "a,1,1200,10,5"])
    with pytest.raises(SpecError, match="previous turns included"):
        read_session_trace(short)
    with pytest.raises(SpecError, match="hash ids for"):
        read_session_trace(write(tmp_path / "h.csv", "arrival_s,input_tokens,output_tokens,"
                                 "hash_ids", ["0,1025,3,0 1"]))
    with pytest.raises(SpecError, match="missing growth"):
        parse_generator("sessions:turns=2,system=0,first=10,output=5,think=1")


# --- the Mooncake conversation trace ---------------------------------------------------

def expected_hit_tokens(path: Path, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """From the trace alone: per request, its input tokens and the tokens of the longest
    prefix of its hash ids seen in an earlier row (an unbounded cache in trace order),
    a partial last block at its length, at least one token left to compute."""
    import csv

    seen: set[str] = set()
    inputs, hits = [], []
    with path.open() as handle:
        for number, row in enumerate(csv.DictReader(handle)):
            if number == rows:
                break
            ids = row["hash_ids"].split()
            prefix = next((i for i, block in enumerate(ids) if block not in seen), len(ids))
            tokens_in = int(row["input_tokens"])
            inputs.append(tokens_in)
            hits.append(min(prefix * HASH_BLOCK_TOKENS, tokens_in - 1))
            seen.update(ids)
    return np.array(inputs), np.array(hits)


@pytest.mark.slow
def test_mooncake_replay_hit_rate_and_ttft_follow_its_hash_ids():
    if not MOONCAKE.is_file():
        pytest.skip(f"the Mooncake FAST'25 conversation trace with hash ids is not at "
                    f"{MOONCAKE} (github.com/kvcache-ai/Mooncake, FAST25-release/traces)")
    rows = 1500
    inputs, hits = expected_hit_tokens(MOONCAKE, rows)
    sessions = read_session_trace(MOONCAKE).head(rows).scaled(0.2)  # a light load
    # memory for every block of the excerpt: the cache never evicts
    roomy = PointConfig(gpu=load_gpu("h100-sxm").with_overrides(memory_gb=5000),
                        model=load_model("llama-3-8b"))
    cached = run(sessions, CacheConfig(), config=roomy)
    uncached = run(sessions, None, config=roomy)
    implied = hits.sum() / inputs.sum()
    assert 0.2 < implied < 0.4  # the excerpt reuses about a quarter of its prompts
    stats = cached.prefix_cache
    assert stats["cached_prefill_tokens"] + stats["computed_prefill_tokens"] == inputs.sum()
    # a block is cached once the request that computed it finishes, so a request
    # arriving while the one it continues still runs misses: at most the implied rate
    assert stats["hit_rate"] <= implied
    assert stats["hit_rate"] >= implied - 0.01
    # TTFT: at light load mostly the request's own prefill; the summed prefill time the
    # hash ids imply (uncached tokens after the cached context, each prompt alone)
    # against all tokens from scratch
    def prefill_s(tokens, context):
        return sum(evaluate_point(roomy.with_changes(batch=0, prefill=int(n),
                                                     prefill_context=int(c)))["step_time_s"]
                   for n, c in zip(tokens, context, strict=True))

    implied_ratio = prefill_s(inputs - hits, hits) / prefill_s(inputs, 0 * inputs)
    with_cache, without = summarize(cached)["ttft_s"], summarize(uncached)["ttft_s"]
    assert with_cache["mean"] < without["mean"]
    assert with_cache["mean"] / without["mean"] == pytest.approx(implied_ratio, rel=0.05)
    assert math.isfinite(with_cache["p99"])


@settings(max_examples=100, deadline=None)
@given(requests=st.lists(request_runs, min_size=1, max_size=60),
       capacities=st.lists(st.integers(0, 12), min_size=1, max_size=3))
def test_memory_is_linear_in_the_cached_blocks(requests, capacities):
    """A chain is kept only while it has a cached block, and each tier's heap holds at
    most one entry per kept chain, however many requests went by."""
    cache = PrefixCache(capacities)
    for runs in requests:
        cache.touch(runs)
        cache.fit()
        assert len(cache.ends) <= cache.cached_blocks <= sum(capacities)
        assert all(len(heap) <= len(cache.ends) for heap in cache.heaps)


def test_a_timed_session_trace_keeps_its_times_and_sorts_by_them(tmp_path):
    """Turns with their own arrival_s arrive then (no waiting), in time order whatever the
    file's order; a turn that comes before its previous turn's finish hits nothing of it."""
    trace = write(tmp_path / "s.csv",
                  "session_id,turn,input_tokens,output_tokens,arrival_s,system_tokens",
                  ["b,0,900,50,0.5,256", "a,1,1600,10,100.0,256", "a,0,1000,400,0.0,256",
                   "b,1,1000,10,0.6,256"])
    sessions = read_session_trace(trace)
    assert sessions.previous is None
    assert sessions.requests.arrival_s.tolist() == [0.0, 0.5, 0.6, 100.0]
    assert sessions.requests.input_tokens.tolist() == [1000, 900, 1000, 1600]
    simulation = run(sessions, CacheConfig())
    # b's second turn arrives 0.1 s after its first, while both first turns still
    # decode: blocks enter the cache only when their request finishes, so it finds
    # nothing, not even the shared system prompt; a's second turn, long after, finds its
    # first turn's prompt (the system prompt's blocks included) and output
    assert simulation.finish_s[0] < 100.0 and min(simulation.finish_s[:2]) > 0.6
    assert simulation.prefix_cache["cached_prefill_tokens"] == (1000 + 400 - 1) // 16 * 16
