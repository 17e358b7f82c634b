"""The serving simulator's configuration (`SchedulerConfig`: policy, batch, token budget,
KV admission) and what one run produced (`Simulation`), shared by the policies
(core/scheduler.py, core/static_batching.py) and the metrics (core/serving_metrics.py).
core/scheduler.py's docstring describes the policies."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from rooftui.core.errors import SpecError
from rooftui.core.workloads import Requests

POLICIES = ("static", "continuous", "chunked", "prefill_first")
KV_ADMISSIONS = ("reserve", "paged")
DEFAULT_TOKEN_BUDGET = 512
# prefill_first's default prefill batch: SGLang's chunked_prefill_size on 35-160 GB GPUs
PREFILL_FIRST_BUDGET = 8192


@dataclass(frozen=True)
class SchedulerConfig:
    policy: str = "continuous"
    max_batch: int = 128
    token_budget: int | None = None  # None: chunked 512, prefill_first 8192, continuous no cap
    kv_admission: str = "reserve"
    block_size: int = 16

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise SpecError(f"unknown policy {self.policy!r}: expected {', '.join(POLICIES)}")
        if self.kv_admission not in KV_ADMISSIONS:
            raise SpecError(f"unknown KV admission {self.kv_admission!r}: expected "
                            f"{', '.join(KV_ADMISSIONS)}")
        if self.max_batch < 1:
            raise SpecError(f"the max batch must be >= 1, got {self.max_batch}")
        if self.block_size < 1:
            raise SpecError(f"the block size must be >= 1 token, got {self.block_size}")
        if self.token_budget is not None and self.token_budget < 1:
            raise SpecError(f"the token budget must be >= 1 token, got {self.token_budget}")
        if self.policy == "static" and self.token_budget is not None:
            raise SpecError("a token budget applies to --policy chunked or continuous and "
                            "to prefill_first")
        if self.policy == "chunked" and self.budget < self.max_batch:
            raise SpecError(f"the token budget ({self.budget}) must be at least the max batch "
                            f"({self.max_batch}): decodes take one token each first")
        if self.policy == "static" and self.kv_admission == "paged":
            raise SpecError("static batching reserves whole sequences; --kv-admission paged "
                            "applies to continuous, chunked and prefill_first")

    @property
    def budget(self) -> float:
        """Tokens per step: the chunked or prefill-first default, or no cap for
        continuous batching."""
        if self.token_budget is not None:
            return int(self.token_budget)
        return {"chunked": DEFAULT_TOKEN_BUDGET,
                "prefill_first": PREFILL_FIRST_BUDGET}.get(self.policy, math.inf)


@dataclass(frozen=True)
class Simulation:
    """What one run produced: per-request times, per-step records, ITL samples."""

    config: SchedulerConfig
    requests: Requests
    first_token_s: np.ndarray  # time of each request's first output token
    finish_s: np.ndarray  # time of its last output token
    preemptions: np.ndarray  # times each request was preempted
    steps: Mapping[str, np.ndarray]  # STEP_COLUMNS, one entry per step
    resume_gaps_s: np.ndarray  # token gaps across a preemption (recompute)
    kv_capacity_tokens: int
    arrival_s: np.ndarray | None = None  # realised arrivals, when turns wait for others
    prefix_cache: dict | None = None  # ServingCache.summary, when the cache is on
    # the client's delay per request outside the engine (the profile's request_overhead_s:
    # HTTP, tokenisation, detokenisation, streaming), added to its TTFT and E2E
    front_end_s: float = 0.0
    # prefill_first: (step of the last token, step of the next, decodes) per group of
    # decodes that waited through prefill batches (summarize's ITL)
    stall_gaps: np.ndarray | None = None

    @property
    def arrivals(self) -> np.ndarray:
        """Each request's arrival time (s): realised, or the requests' own."""
        return self.requests.arrival_s if self.arrival_s is None else self.arrival_s

    @property
    def useful_slots(self) -> np.ndarray:
        """Sequences that advanced in each step: decodes plus prefill chunks."""
        return self.steps["decode_tokens"] + self.steps["prefill_chunks"]
