"""Repeated prompts in a replay (sweeps/end_to_end.py, "Repeated prompts"): a client that
draws every prompt from a small synthetic dataset sends repeats, which the engine's
prefix cache finds whole."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftui.core.assumptions import load_profile
from rooftui.core.workloads import Requests
from rooftui.sweeps import end_to_end as e2e
from rooftui.sweeps.bench_results import Run

BASE = load_profile("h100-trtllm")
TARGET = e2e.Target("llama-3.1-8b", "h100-sxm", 1, engine="vllm")
BLOCK = 16  # the simulator's block size (SchedulerConfig.block_size)


def pooled_run(concurrency: int, requests: int, isl: int, osl: int, pool: int | None,
               warmup: int = 0) -> Run:
    return Run(tool="test", source=f"c{concurrency} pool {pool}", concurrency=concurrency,
               requests=requests, warmup_requests=warmup, input_mean=isl, output_mean=osl,
               prompt_pool=pool)


def drawn_prompts(count: int, isl: int, osl: int, pool: int) -> list[int]:
    """The pool prompt each of `count` requests drew (none below one full block)."""
    requests = Requests(np.zeros(count), np.full(count, isl), np.full(count, osl))
    return [runs[0][0] for runs in e2e.pool_prompts(requests, pool, BLOCK).prompt_runs
            if runs]


def cached_tokens(replay: e2e.Replay, isl: int) -> float:
    """Prompt tokens the replay found cached, over every request it admitted."""
    run = replay.run
    return replay.predicted["prefix_hit_rate"] * (run.requests + run.warmup_requests) * isl


@settings(max_examples=25, deadline=None)
@given(pool=st.integers(1, 50), count=st.integers(1, 200), isl=st.integers(1, 3000),
       osl=st.integers(1, 300))
def test_pool_prompts_draw_from_the_pool_and_outputs_are_their_own(pool, count, isl, osl):
    requests = Requests(np.zeros(count), np.full(count, isl), np.full(count, osl))
    blocks = e2e.pool_prompts(requests, pool, BLOCK)
    full = isl // BLOCK
    assert len(blocks.prompt_runs) == len(blocks.finish_runs) == count
    for index, (prompt, finish) in enumerate(zip(blocks.prompt_runs, blocks.finish_runs,
                                                 strict=True)):
        # the prompt's full blocks, on one of the pool's chains, and nothing else
        assert prompt == (() if full == 0 else ((prompt[0][0], full),))
        assert full == 0 or 0 <= prompt[0][0] < pool
        # finishing caches the prompt and then the output on a chain of this request's own
        assert finish[:len(prompt)] == prompt
        output = (isl + osl - 1) // BLOCK - full
        assert finish[len(prompt):] == (((pool + index, output),) if output else ())
    # seeded: the same draw every time
    assert blocks == e2e.pool_prompts(requests, pool, BLOCK)


@settings(max_examples=8, deadline=None)
@given(pool=st.integers(1, 12), requests=st.integers(2, 30), isl=st.integers(20, 2000))
def test_one_client_hits_exactly_every_repeat(pool, requests, isl):
    """One client at a time: each request finishes before the next, so a repeat of any
    earlier prompt finds all its full blocks cached (the cache holds the whole pool) and a
    first sight finds none; at least one token is left to compute."""
    run = pooled_run(1, requests, isl, 8, pool)
    replay = e2e.replay_run(run, TARGET, BASE)
    drawn = drawn_prompts(requests, isl, 8, pool)
    repeats = sum(times - 1 for times in Counter(drawn).values())
    per_hit = min(isl // BLOCK * BLOCK, isl - 1)
    assert cached_tokens(replay, isl) == pytest.approx(repeats * per_hit)


@settings(max_examples=6, deadline=None)
@given(concurrency=st.integers(2, 16), pool=st.integers(1, 40))
def test_repeats_bound_the_hits_under_load_and_lower_the_first_token(concurrency, pool):
    """Many clients: a repeat of a prompt still in flight finds nothing (blocks enter the
    cache when a request finishes), so the hits are at most the repeats, and the TTFT is
    never longer than with every prompt its own."""
    isl, requests = 2048, 4 * concurrency
    run = pooled_run(concurrency, requests, isl, 32, pool, warmup=concurrency)
    pooled = e2e.replay_run(run, TARGET, BASE, e2e.Scheduling(stagger=False))
    alone = e2e.replay_run(run, TARGET, BASE, e2e.Scheduling(stagger=False, prompt_pool=0))
    drawn = drawn_prompts(requests + concurrency, isl, 32, pool)
    repeats = sum(times - 1 for times in Counter(drawn).values())
    assert cached_tokens(pooled, isl) <= repeats * isl + 1e-6
    assert alone.predicted["prefix_hit_rate"] is None
    assert pooled.predicted["ttft_s"]["mean"] <= alone.predicted["ttft_s"]["mean"] * (1 + 1e-9)


def test_a_run_without_a_pool_is_replayed_as_before():
    """No pool (vLLM, SGLang and GuideLLM files, the published runs): no cache, the same
    replay as a pool of 0 asked for."""
    run = pooled_run(4, 16, 1024, 64, None)
    plain = e2e.replay_run(run, TARGET, BASE)
    asked = e2e.replay_run(dataclasses.replace(run, prompt_pool=7), TARGET, BASE,
                           e2e.Scheduling(prompt_pool=0))
    assert plain.predicted == asked.predicted
    assert plain.predicted["prefix_hit_rate"] is None


def test_a_static_batch_never_caches():
    run = pooled_run(4, 4, 1024, 64, 2)
    replay = e2e.replay_run(run, TARGET, BASE, e2e.Scheduling(policy="static"))
    assert replay.predicted["prefix_hit_rate"] is None
