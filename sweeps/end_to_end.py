"""End to end: predict a measured serving run by simulating it, and fit an engine's
overheads by replaying runs.

A run (`sweeps.bench_results.Run`) is replayed through the serving simulator
(`core.scheduler.simulate`, as `sweep simulate` calls it) with the run's own workload:
the same number of requests, their per-request lengths where the file has them (else the
mean lengths, fixed), and its arrivals: a request rate is a Poisson process (seed 0); a
client concurrency C is a closed loop, as the benchmark clients run it (`vllm bench
serve --max-concurrency C`: every request a task at t = 0 behind a semaphore of C, the
next one sent the moment one finishes; genai-perf / AIPerf `--concurrency C`: C requests
kept in flight). The engine's scheduler is simulated with its defaults (`ENGINES`:
policy, max batch, token budget, KV admission, memory share) unless given. Predicted and
measured TTFT, TPOT, ITL and throughput are compared per run.

How the clients are replayed (`run_requests`, `replay_run`):
- Out of step. Simulated literally, C fixed-length requests sent together stay in step
  for the whole run (each wave's prompts queue behind each other in the same steps), and
  every vLLM TTFT came out 1.4-2.5 x too long; measured TTFTs at concurrency 8 are a third
  of one whole wave's prefill, so the real clients are not in step (jitter in the front
  end and the engine breaks the waves up). The C slots therefore start at seeded uniform
  random times over one request's cycle (its E2E in an in-step replay, plus the front
  end), which is how a closed loop's phases settle; each slot then re-sends on
  completion. SGLang's prefill-first scheduling (simulated as the `prefill_first`
  policy) keeps the waves together (measured TTFT grows with C x ISL as one wave's whole
  prefill does), so its clients are replayed in step (`EngineDefaults.clients_in_step`);
  `Scheduling(stagger=...)` (`sweep replay --clients`) overrides; a replay says which
  start it had (`Replay.clients`).
- Warm-up left out. genai-perf and AIPerf (aiconfigurator's harness) send
  `--warmup-request-count` requests first and leave them out of their statistics;
  `vllm bench serve` sends one test request alone first and then scores all N. A run's
  `warmup_requests` are simulated first on the same slots and not scored
  (`measured_requests`); means are over the rest, as the datasets record means.
- A front end. What a client measures beyond the engine (HTTP, tokenisation, the hop
  into the engine, detokenisation and streaming) is the profile's `request_overhead_s`:
  added to each TTFT and E2E, and a slot's next request reaches the engine that long
  after its previous one finished.
- Repeated prompts. genai-perf and AIPerf draw each request's prompt at random from a
  synthetic dataset of `Run.prompt_pool` prompts (100 by default, `sweeps.bench_results`),
  and all three engines cache prefixes by default (vLLM V1's automatic prefix caching,
  SGLang's RadixAttention, TensorRT-LLM's KV cache block reuse), so a repeat finds its
  whole prompt cached. Such a run is replayed with the core prefix cache
  (`core.prefix_cache`: LRU, in the KV memory the running batch leaves free): each
  request, warm-up included, draws its prompt's index uniformly (seeded, `pool_prompts`);
  a repeat hits its prompt's full blocks once the earlier request has finished, and a
  finished request's output blocks take cache space too, never hit. The published
  silicon runs do not record their client's dataset and are replayed without (every
  prompt its own); `Scheduling.prompt_pool` (`sweep replay --prompt-pool`) overrides.

Kernels (`kernel_profile`). The engine's overheads are fitted on top of a kernel
profile: `h100-trtllm` (TensorRT-LLM's bf16 GEMM, bf16-KV attention and NCCL all-reduce
on H100, aiconfigurator's kernel data), carried to H200 by its spec ratios as every
kernel profile is. TensorRT-LLM's runs take `h100-trtllm-fp8`: the same plus TensorRT-LLM's
own fp8 GEMM and fp8-KV attention timings, since its FP8 checkpoints run those kernels.
vLLM's and SGLang's fp8 GEMMs are other kernels (no timings of them here) and their KV
cache is bf16, so they keep `h100-trtllm`: pricing their fp8 GEMMs at TensorRT-LLM's
made their held-out figures worse (docs/end-to-end.md).

Fitting (`fit_overheads`). An engine adds a fixed time to every step (`step_overhead_s`,
`layer_overhead_s` per layer, `allreduce_overhead_s` per all-reduce), so a run's steps
each gain c = s + layers * l + collectives * a, and every request's TTFT gains the front
end d. While the schedule (which sequences share which step) stays put, every request's
TTFT and TPOT are affine in c and d, with slopes the simulator gives: the steps between
its arrival and its first token (plus 1 for d), and between its first and last token over
its output tokens minus one. One replay thus gives each run's prediction near its
overheads; the fit is a bounded derivative-free pattern search over the free parameters
(each >= 0, flagged at a bound) on the log errors of mean TTFT and TPOT, every group
weighted equally. Staggered clients, a front end and open arrivals make the schedule
move with the step times, so the slopes are local: the fit replays at its result and
fits again until it settles (`Replay.exact` replays, in-step without a front end or
static batches, settle at once). Every figure reported comes from a replay at the fitted
values, not from the affine surrogate; leave-one-group-out re-linearises each fold on
its training groups only. `sweep replay --measured-dir --fit` also chooses TensorRT-LLM's
compute share (its kernel profile's compute rate in serving) per fold, from a grid
(`EngineDefaults.compute_shares`, sweeps/compute_share.py), and SGLang's host floor (its
overlap scheduler's host time per step and per sequence, the least a step takes:
`EngineDefaults.host_floors`), on which only SGLang's front end is fitted
(`EngineDefaults.step_overheads`). A step held at its floor is no slope: the fit's
slopes count only the steps more GPU time would lengthen.

The published runs replayed are read by `sweeps.end_to_end_data`; an engine profile is
fitted and written by `sweeps.engine_profiles`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from rooftui.core import intervals
from rooftui.core.assumptions import Assumptions
from rooftui.core.efficiency import Efficiency, has_host_floor, host_time
from rooftui.core.errors import SpecError
from rooftui.core.hardware import load_gpu
from rooftui.core.intervals import dataset_weights, ratio_bounds
from rooftui.core.model import Model, load_model
from rooftui.core.point import PointConfig, evaluate_point
from rooftui.core.prefix_cache import CacheConfig
from rooftui.core.scheduler import (
    PERCENTILES,
    SchedulerConfig,
    request_metrics,
    simulate,
    summarize,
)
from rooftui.core.sessions import PromptBlocks, SessionRequests
from rooftui.core.step_costs import StepCosts
from rooftui.core.workloads import Requests
from rooftui.sweeps.bench_results import Run

STEP_OVERHEADS = ("step_overhead_s", "layer_overhead_s", "allreduce_overhead_s")
OVERHEADS = (*STEP_OVERHEADS, "request_overhead_s")
# what one second of each overhead adds to a request's TTFT directly, not through steps
DIRECT_TTFT = np.array([0.0, 0.0, 0.0, 1.0])
# the search's upper bounds (s): far above any engine seen (2-8 ms a step, ~0.3 ms a
# layer, tens of ms of front end)
OVERHEAD_CEILINGS = {"step_overhead_s": 0.1, "layer_overhead_s": 2e-3,
                     "allreduce_overhead_s": 1e-3, "request_overhead_s": 1.0}


# the shares of a kernel profile's compute rate an engine's fit may choose from
# (sweeps/compute_share.py): 1 is the kernel data's; half of it is below any the silicon
# runs chose (0.65-0.8 for TensorRT-LLM)
COMPUTE_SHARES = (1.0, 0.8, 0.65, 0.5)
# the host floors (host_step_s, host_sequence_s) an overlapping scheduler's fit may choose
# from (sweeps/compute_share.py; core.efficiency): none, and a host time of 5-20 ms a step
# plus 20-60 us a sequence, around the 23-40 ms SGLang's Llama-3.1-8B runs keep at
# 20-512 clients on every TP (docs/end-to-end.md)
HOST_FLOORS = tuple((step, sequence) for step in (0.0, 5e-3, 10e-3, 20e-3)
                    for sequence in (0.0, 20e-6, 40e-6, 60e-6))
HostFloor = tuple[float, float] | None  # (host_step_s, host_sequence_s); None: base's own


@dataclass(frozen=True)
class EngineDefaults:
    """How an engine schedules by default: the simulator's settings for it."""

    policy: str  # the simulator's nearest batching policy
    max_batch: int
    token_budget: int
    kv_admission: str
    memory_fraction: float  # of each GPU's memory for weights and KV
    why: str
    clients_in_step: bool = False  # a closed loop's waves stay together (module doc)
    kernel_profile: str = "h100-trtllm"  # the kernels its runs are priced with (module doc)
    # the shares of that profile's compute rate its fit may choose (sweeps/compute_share.py)
    compute_shares: tuple[float, ...] = (1.0,)
    # the host floors its fit may choose, for an overlapping scheduler (None: the kernel
    # profile's own, no floor)
    host_floors: tuple[HostFloor, ...] = (None,)
    # whether its fit frees the step, layer and all-reduce overheads (else the front end
    # only: an overlapping scheduler's time per step is its host floor)
    step_overheads: bool = True


ENGINES = {
    "vllm": EngineDefaults("chunked", 1024, 8192, "paged", 0.9,
                           "vLLM V1 on 80+ GB GPUs: max_num_seqs 1024, max_num_batched_tokens "
                           "8192 (API server), gpu_memory_utilization 0.9, paged KV with "
                           "preemption, chunked prefill mixed with decodes"),
    "sglang": EngineDefaults("prefill_first", 1024, 8192, "paged", 0.88,
                             "SGLang: chunked_prefill_size 8192 (35-160 GB GPUs), "
                             "mem_fraction_static ~0.88, running requests bounded by the KV "
                             "pool; prefill batches run without decodes whenever a prompt "
                             "can be admitted (get_next_batch_to_run, no mixed chunks by "
                             "default): the prefill_first policy. That keeps a closed "
                             "loop's waves together (every waiting prompt is prefilled "
                             "before the decodes resume, so a wave decodes and finishes in "
                             "step): its clients are replayed in step; the overlap "
                             "scheduler (on by default) prepares the next batch on the "
                             "host while the GPU runs this one, so a step takes at least "
                             "the host's time (a host floor, chosen by the fit)",
                             clients_in_step=True, host_floors=HOST_FLOORS,
                             step_overheads=False),
    "trtllm": EngineDefaults("continuous", 2048, 8192, "reserve", 0.9,
                             "TensorRT-LLM (trtllm-serve): max_batch_size 2048, max_num_tokens "
                             "8192, free_gpu_memory_fraction 0.9, GUARANTEED_NO_EVICT "
                             "(whole sequences reserved), whole prompts in flight with the "
                             "decodes (chunked prefill off by default)",
                             kernel_profile="h100-trtllm-fp8",
                             compute_shares=COMPUTE_SHARES),
}
DEFAULT_ENGINE = "vllm"  # an engine not named, or not listed


def engine_defaults(engine: str | None) -> EngineDefaults:
    return ENGINES.get(engine or DEFAULT_ENGINE, ENGINES[DEFAULT_ENGINE])


def kernel_profile(engine: str | None) -> str:
    """The kernel profile an engine's runs are replayed on by default (module doc)."""
    return engine_defaults(engine).kernel_profile


@functools.cache
def replay_model(name: str) -> Model:
    """A shipped model or spec path, read once for all the runs that name it."""
    return load_model(name)


@dataclass(frozen=True)
class Target:
    """What a run ran on: model, GPU, tensor parallelism and weight format."""

    model: str
    gpu: str
    tp: int = 1
    weight_dtype: str | None = None
    engine: str | None = None  # picks ENGINES' defaults
    kv_dtype: str | None = None  # None: the model's (bf16)

    @property
    def defaults(self) -> EngineDefaults:
        return engine_defaults(self.engine)


# how a closed loop's C clients start (`Scheduling.stagger`): True out of step, False
# all together (module doc)
CLIENT_STARTS = {True: "staggered", False: "in-step"}


@dataclass(frozen=True)
class Scheduling:
    """Simulator settings that override the engine's defaults (None: the engine's)."""

    policy: str | None = None
    max_batch: int | None = None
    token_budget: int | None = None
    kv_admission: str | None = None
    memory_fraction: float | None = None
    stagger: bool | None = None  # closed-loop clients out of step (None: the engine's)
    # distinct prompts the client drew from (module doc); None: the run's, 0: none repeat
    prompt_pool: int | None = None


@dataclass
class Replay:
    """One run's prediction: the simulator's metrics and the slopes of mean TTFT and
    TPOT in the per-step overhead c (seconds per second of c)."""

    run: Run
    target: Target
    predicted: dict
    ttft_slope: float
    tpot_slope: float
    step_coefficients: np.ndarray  # dc/d(OVERHEADS): 1, layers, all-reduces per step
    overheads: np.ndarray  # the OVERHEADS values replayed
    scheduling: Scheduling = Scheduling()
    static: bool = False  # a static batch: no client, no front end
    exact: bool = False  # the schedule does not depend on step times: `at` is exact
    clients: str | None = None  # a closed loop's start (CLIENT_STARTS), else None

    def errors(self) -> dict[str, float | None]:
        """Relative error (predicted / measured - 1) of each measured mean."""
        out = {}
        for key, stat in (("ttft", self.run.ttft), ("tpot", self.run.tpot),
                          ("itl", self.run.itl)):
            predicted = self.predicted[f"{key}_s"]["mean"]
            out[key] = (predicted / stat.mean - 1) if stat.mean and predicted else None
        for key, measured in (("output_throughput", self.run.output_throughput),
                              ("request_throughput", self.run.request_throughput)):
            predicted = self.predicted[key]
            out[key] = predicted / measured - 1 if measured and predicted else None
        return out

    def at(self, overheads: np.ndarray) -> tuple[float, float]:
        """The affine surrogate: mean (TTFT, TPOT) at other overheads."""
        moved = np.asarray(overheads) - self.overheads
        change = float(self.step_coefficients @ moved)
        ttft = self.predicted["ttft_s"]["mean"] + self.ttft_slope * change + DIRECT_TTFT @ moved
        tpot = (self.predicted["tpot_s"]["mean"] or 0.0) + self.tpot_slope * change
        return max(ttft, 1e-9), max(tpot, 1e-9)


def at_host_floor(base: Assumptions, floor: HostFloor) -> Assumptions:
    """`base` with its steps no shorter than the host floor `floor` (None: as it is)."""
    if floor is None:
        return base
    step, sequence = floor
    return replace(base, efficiency=replace(base.efficiency, host_step_s=step,
                                            host_sequence_s=sequence))


def with_overheads(base: Assumptions, values: Sequence[float]) -> Assumptions:
    return replace(base, efficiency=replace(base.efficiency, **dict(zip(OVERHEADS, map(
        float, values), strict=True))))


def overheads_of(assumptions: Assumptions) -> np.ndarray:
    return np.array([getattr(assumptions.efficiency, name) for name in OVERHEADS])


def _config(target: Target, assumptions: Assumptions, memory_fraction: float) -> PointConfig:
    gpu = load_gpu(target.gpu)
    reserve = max(assumptions.memory_reserve_gb, (1 - memory_fraction) * gpu.memory_gb)
    config = PointConfig(gpu=gpu, model=replay_model(target.model), tp=target.tp,
                         weight_dtype=target.weight_dtype, kv_dtype=target.kv_dtype,
                         assumptions=replace(assumptions, memory_reserve_gb=reserve))
    return config.with_changes(gpu=config.gpu.with_overrides(
        compute_dtype=config.resolved_compute_dtype))


def _without_overheads(assumptions: Assumptions) -> Assumptions:
    """`assumptions` with no engine overhead and no host floor."""
    return replace(assumptions, efficiency=replace(
        assumptions.efficiency, host_step_s=0.0, host_sequence_s=0.0,
        **dict.fromkeys(OVERHEADS, 0.0)))


def _step_coefficients(target: Target, assumptions: Assumptions,
                       memory_fraction: float) -> np.ndarray:
    """How much one step's time grows per second of each overhead (exactly linear), as
    its GPU time: without the host floor, whose held steps `_slopes` leaves out. Taken at
    no overheads, so a fit's replays (one run at many overheads) share one evaluation."""
    return _coefficients_at_no_overheads(target, _without_overheads(assumptions),
                                         memory_fraction).copy()


@functools.lru_cache(maxsize=1024)
def _coefficients_at_no_overheads(target: Target, assumptions: Assumptions,
                                  memory_fraction: float) -> np.ndarray:
    config = _config(target, assumptions, memory_fraction)
    base = evaluate_point(config)["step_time_s"]
    coefficients = []
    for name in STEP_OVERHEADS:
        efficiency = replace(config.assumptions.efficiency, **{
            name: getattr(config.assumptions.efficiency, name) + 1e-3})
        bumped = config.with_changes(assumptions=replace(config.assumptions,
                                                         efficiency=efficiency))
        coefficients.append(round((evaluate_point(bumped)["step_time_s"] - base) / 1e-3, 6))
    return np.array([*coefficients, 0.0])


def _step_costs(target: Target, assumptions: Assumptions, memory_fraction: float,
                max_batch: int) -> StepCosts:
    """The run's step times. A fit replays each run at one overhead after another: the
    replays differing in their front end only (which no step pays: SGLang's fits, a
    closed loop's two starts) share one StepCosts, and the others share its tables
    (`StepCosts.with_efficiency`). Deterministic, so sharing cannot change a result."""
    return _costs_without_front_end(target, replace(assumptions, efficiency=replace(
        assumptions.efficiency, request_overhead_s=0.0)), memory_fraction, max_batch)


# one entry per (model, GPU, TP, dtypes) of a fit's runs is enough: an entry holds the
# step tables, a list per batch size (~1 MB at 2,048 sequences)
@functools.lru_cache(maxsize=32)
def _costs_at_no_overheads(target: Target, assumptions: Assumptions, memory_fraction: float,
                           max_batch: int) -> StepCosts:
    config = _config(target, assumptions, memory_fraction)
    return StepCosts(config.step_inputs(), config.assumptions, max_batch)


@functools.lru_cache(maxsize=256)  # the tables shared with `_costs_at_no_overheads`
def _costs_without_front_end(target: Target, assumptions: Assumptions, memory_fraction: float,
                             max_batch: int) -> StepCosts:
    return _costs_at_no_overheads(target, _without_overheads(assumptions), memory_fraction,
                                  max_batch).with_efficiency(assumptions.efficiency)


def run_requests(run: Run, *, think_s: float = 0.0, spread_s: float = 0.0,
                 seed: int = 0) -> tuple[Requests, SessionRequests | None]:
    """The run's requests as the client sent them, its warm-up requests first (module
    doc). A closed loop's next request on a slot reaches the engine `think_s` after the
    slot's previous one finished (the front end); `spread_s` > 0 starts the C slots at
    uniform random times in [0, spread_s) (seeded) instead of all at 0."""
    count = run.warmup_requests + run.requests
    if run.input_tokens is not None and run.output_tokens is not None and (
            run.input_tokens.size == run.requests):
        # warm-up requests take the run's own lengths, from its first request on
        inputs, outputs = (np.concatenate([np.resize(lengths, run.warmup_requests), lengths])
                           for lengths in (run.input_tokens, run.output_tokens))
    else:
        inputs = np.full(count, max(1, round(run.input_mean)), np.int64)
        outputs = np.full(count, max(1, round(run.output_mean)), np.int64)
    if closed_loop(run):
        slots = run.concurrency
        starts = np.sort(np.random.default_rng(seed).uniform(0, spread_s, slots)) if (
            spread_s > 0) else np.zeros(slots)
        # a later request's arrival_s only orders it: the simulator times it from its slot
        arrivals = np.concatenate([starts, np.full(count - slots, starts[-1])])
        index = np.arange(count)
        requests = Requests(arrivals, inputs, outputs)
        previous = np.where(index >= slots, index - slots, -1)
        return requests, SessionRequests(requests, previous=previous,
                                         think_s=np.where(index >= slots, think_s, 0.0))
    if run.request_rate is not None:
        gaps = np.random.default_rng(seed).exponential(1 / run.request_rate, count)
        times = np.concatenate([[0.0], np.cumsum(gaps[:-1])])
        return Requests(times, inputs, outputs), None
    return Requests(np.zeros(count), inputs, outputs), None


def pool_prompts(requests: Requests, pool: int, block_tokens: int) -> PromptBlocks:
    """Each request's prompt drawn uniformly from `pool` prompts (module doc): prompt p
    is chain p of the prefix cache, looked up over the prompt's full blocks; a request's
    output blocks past them are a chain of its own (pool + its index), cached when it
    finishes and never hit."""
    drawn = np.random.default_rng([0, pool]).integers(0, pool, len(requests)).tolist()
    prompt = (requests.input_tokens // block_tokens).tolist()
    whole = ((requests.input_tokens + requests.output_tokens - 1) // block_tokens).tolist()
    prompt_runs = [((p, k),) if k else () for p, k in zip(drawn, prompt, strict=True)]
    finish_runs = [head + (((pool + index, w - k),) if w > k else ())
                   for index, (head, k, w) in enumerate(zip(prompt_runs, prompt, whole,
                                                            strict=True))]
    return PromptBlocks(block_tokens, prompt_runs, finish_runs)


def closed_loop(run: Run) -> bool:
    """C clients, each sending its next request when its previous one finishes."""
    return run.concurrency is not None and run.request_rate is None and (
        run.warmup_requests + run.requests > run.concurrency)


def measured_requests(run: Run) -> np.ndarray:
    """Which of the simulated requests the client scored: all but the warm-up ones."""
    return np.arange(run.warmup_requests + run.requests) >= run.warmup_requests


def _slopes(simulation, scored: np.ndarray, efficiency: Efficiency) -> tuple[float, float]:
    """Mean over the scored requests of the steps from arrival to first token, and of
    the steps from first to last token per output token after the first; a step held at
    its host floor (`efficiency.host_time`) does not count: a little more GPU time leaves
    it as long."""
    steps = simulation.steps
    ends = steps["start_s"] + steps["duration_s"]
    moving = np.ones(ends.size)
    if has_host_floor(efficiency):
        moving = (steps["duration_s"] > host_time(simulation.useful_slots, efficiency)
                  * (1 + 1e-12)).astype(np.float64)
    counted = np.concatenate(([0.0], np.cumsum(moving)))

    def between(start, end):
        return (counted[np.searchsorted(ends, end, "right")]
                - counted[np.searchsorted(ends, start, "right")])

    arrival, first = simulation.arrivals[scored], simulation.first_token_s[scored]
    finish = simulation.finish_s[scored]
    before_first = between(arrival, first)
    outputs = simulation.requests.output_tokens[scored]
    decoding = outputs > 1
    per_token = between(first[decoding], finish[decoding]) / (outputs[decoding] - 1)
    return float(before_first.mean()), float(per_token.mean()) if per_token.size else 0.0


def _statistics(values: np.ndarray) -> dict | None:
    values = values[np.isfinite(values)]
    if not values.size:
        return None
    return {"mean": float(values.mean()),
            **{f"p{q}": float(np.percentile(values, q)) for q in PERCENTILES}}


def client_metrics(simulation, scored: np.ndarray) -> dict:
    """TTFT, TPOT and E2E statistics of the scored requests as the client sees them (the
    simulation's front end included: `core.scheduler.request_metrics`)."""
    per_request = request_metrics(simulation)
    return {key: _statistics(per_request[key][scored]) for key in ("ttft_s", "tpot_s", "e2e_s")}


def replay_run(run: Run, target: Target, assumptions: Assumptions,
               scheduling: Scheduling = Scheduling()) -> Replay:
    """Simulate one run (module doc) with `assumptions` (a kernel or engine profile)."""
    defaults = target.defaults
    memory_fraction = scheduling.memory_fraction or defaults.memory_fraction
    config = _config(target, assumptions, memory_fraction)
    policy = scheduling.policy or defaults.policy
    static = policy == "static"
    max_batch = scheduling.max_batch or (max(1, run.concurrency or 1) if static
                                         else defaults.max_batch)
    budget = None if static else scheduling.token_budget or max(defaults.token_budget, max_batch)
    scheduler = SchedulerConfig(
        policy=policy, max_batch=max_batch, token_budget=budget,
        kv_admission="reserve" if static else scheduling.kv_admission or defaults.kv_admission)
    front_end = 0.0 if static else assumptions.efficiency.request_overhead_s
    scored = measured_requests(run)
    costs = _step_costs(target, assumptions, memory_fraction, scheduler.max_batch)
    pool = run.prompt_pool if scheduling.prompt_pool is None else scheduling.prompt_pool
    caching = bool(pool) and not static

    def run_with(spread_s: float):
        requests, sessions = run_requests(run, think_s=front_end, spread_s=spread_s)
        if caching:
            sessions = replace(sessions or SessionRequests(requests),
                               hashed=pool_prompts(requests, pool, scheduler.block_size))
        simulation = simulate(costs.inputs, config.assumptions, scheduler, requests, costs,
                              sessions=sessions, gpu_key=config.gpu.key,
                              prefix_cache=CacheConfig() if caching else None)
        # a static batch's times are the engine's own (module doc): no front end
        return replace(simulation, front_end_s=front_end)

    simulation = run_with(0.0)
    closed = closed_loop(run) and not static
    stagger = closed and (
        not defaults.clients_in_step if scheduling.stagger is None else scheduling.stagger)
    if stagger:
        # the clients out of step (module doc): slots start over one request's cycle
        cycle = float(np.mean(request_metrics(simulation)["e2e_s"]))
        simulation = run_with(cycle)
    ttft_slope, tpot_slope = _slopes(simulation, scored, config.assumptions.step_efficiency)
    report = summarize(simulation)
    predicted = {key: report[key] for key in ("itl_s", "duration_s", "preemptions",
                                              "mean_batch")}
    predicted.update(client_metrics(simulation, scored))
    predicted["output_throughput"] = report["throughput_tokens_per_s"]
    predicted["request_throughput"] = report["request_throughput"]
    predicted["prefix_hit_rate"] = (simulation.prefix_cache["hit_rate"] if caching
                                    else None)
    # all at once (static, or lockstep without a front end): the steps' order is fixed,
    # and without a host floor every step's time is affine in the overheads; a prefix
    # cache's evictions follow the finishing times
    exact = (run.request_rate is None and not stagger and (static or front_end == 0)
             and not has_host_floor(config.assumptions.step_efficiency) and not caching)
    return Replay(run, target, predicted, ttft_slope, tpot_slope,
                  _step_coefficients(target, assumptions, memory_fraction),
                  overheads_of(assumptions), scheduling,
                  static, exact, CLIENT_STARTS[stagger] if closed else None)


def replay_again(previous: Replay, assumptions: Assumptions) -> Replay:
    """The same run, target and scheduling replayed at other assumptions."""
    return replay_run(previous.run, previous.target, assumptions, previous.scheduling)


def replay_runs(runs: Sequence[Run], targets: Sequence[Target], assumptions: Assumptions,
                scheduling: Scheduling | Sequence[Scheduling] = Scheduling(),
                progress: Callable[[int], None] | None = None) -> list[Replay]:
    """`replay_run` for each run and its target (one Scheduling, or one per run)."""
    if isinstance(scheduling, Scheduling):
        scheduling = [scheduling] * len(runs)
    replays = []
    for index, (run, target, settings) in enumerate(zip(runs, targets, scheduling,
                                                        strict=True)):
        replays.append(replay_run(run, target, assumptions, settings))
        if progress is not None:
            progress(index + 1)
    return replays


# --- fitting ---------------------------------------------------------------------------

def group_key(replay: Replay) -> tuple[str, str, str]:
    """The (engine, GPU, model) a run belongs to: the unit of leave-one-group-out."""
    return (replay.target.engine or "?", replay.target.gpu, replay.target.model)


LOGO_ROUNDS = 2  # fit rounds per held-out fold: at the base replays, then at that fit

# what the fit matches: TTFT too, as its slopes in the overheads differ from TPOT's
# (fitting TPOT alone left larger held-out TPOT errors on trtllm and vllm)
FITTED_METRICS = ("ttft", "tpot")


class Surrogate:
    """The fit's objective over a set of replays, vectorised: the weighted squared log
    errors of the FITTED_METRICS means, each predicted by `Replay.at`'s affine form."""

    def __init__(self, replays: Sequence[Replay], weights: np.ndarray) -> None:
        rows = [(weight, getattr(r.run, key).mean, r.predicted[f"{key}_s"]["mean"],
                 getattr(r, f"{key}_slope"), r.step_coefficients, r.overheads,
                 DIRECT_TTFT * (key == "ttft"))
                for r, weight in zip(replays, weights, strict=True) for key in FITTED_METRICS
                if getattr(r.run, key).mean and r.predicted[f"{key}_s"]["mean"]]
        weight, measured, predicted, slope, coefficients, at, direct = (
            np.array(column, dtype=np.float64) for column in zip(*rows, strict=True))
        self.weight, self.measured = weight, measured
        # seconds of metric per second of overhead: through the steps, and directly
        self.gain = slope[:, None] * coefficients + direct
        self.offset = predicted - np.einsum("ij,ij->i", self.gain, at)

    def __call__(self, overheads: np.ndarray) -> float:
        predicted = np.maximum(self.offset + self.gain @ overheads, 1e-9)
        return float(np.sum(self.weight * np.log(predicted / self.measured) ** 2))

    def linear_start(self, free: np.ndarray, ceilings: np.ndarray) -> np.ndarray:
        """Where the search starts: the least-squares overheads on relative errors
        (linear in them), over every subset of the free ones that keeps the rest at 0 and
        these in range; the subset of least loss wins."""
        root = np.sqrt(self.weight)
        matrix = root[:, None] * self.gain / self.measured[:, None]
        target = root * (1 - self.offset / self.measured)
        best, best_loss = np.zeros(len(OVERHEADS)), math.inf
        columns = np.flatnonzero(free)
        for subset in range(1, 1 << columns.size):
            chosen = columns[[bool(subset >> i & 1) for i in range(columns.size)]]
            solution = np.linalg.lstsq(matrix[:, chosen], target, rcond=None)[0]
            point = np.zeros(len(OVERHEADS))
            point[chosen] = solution
            if np.all(solution >= 0) and np.all(point <= ceilings) and self(point) < best_loss:
                best, best_loss = point, self(point)
        return best


def _pattern_search(loss: Callable[[np.ndarray], float], start: np.ndarray,
                    free: np.ndarray, ceilings: np.ndarray) -> np.ndarray:
    """Compass search on [0, ceiling] in the free coordinates, from `start`."""
    point = np.clip(start, 0, ceilings)
    best = loss(point)
    step = ceilings / 64
    while np.any(step[free] > ceilings[free] * 1e-5):
        moved = False
        for i in np.flatnonzero(free):
            for sign in (1, -1):
                trial = point.copy()
                trial[i] = min(max(trial[i] + sign * step[i], 0.0), ceilings[i])
                value = loss(trial)
                if value < best:
                    point, best, moved = trial, value, True
                    break
        if not moved:
            step = step / 2
    return point


@dataclass
class OverheadFit:
    overheads: np.ndarray  # OVERHEADS values (s)
    fitted: list[str]
    at_bound: list[str]  # fitted parameters at 0 or the ceiling (within the search's step)
    loss: float
    replays: list[Replay]  # the runs replayed at the fitted values
    rounds: int


def free_overheads(replays: Sequence[Replay]) -> list[str]:
    """The overheads the runs can tell apart: a per-layer term needs models with
    different layer counts, a per-all-reduce term runs with and without TP, a front end
    runs whose client is measured (not static batches timed inside the engine). Runs all
    of engines whose time per step is their host floor (`EngineDefaults.step_overheads`
    False: a floor, none included, is chosen beside the fit) fit their front end only; in
    a mix with any other engine's runs every overhead is free."""
    front_end = ["request_overhead_s"] if any(not r.static for r in replays) else []
    if not any(engine_defaults(r.target.engine).step_overheads for r in replays):
        return front_end
    coefficients = np.array([r.step_coefficients for r in replays])
    names = ["step_overhead_s"]
    if np.unique(coefficients[:, 1]).size > 1:
        names.append("layer_overhead_s")
    if np.unique(coefficients[:, 2] > 0).size > 1:
        names.append("allreduce_overhead_s")
    return names + front_end


def fit_overheads(replays: Sequence[Replay], base: Assumptions, *,
                  free: list[str] | None = None, rounds: int = 4,
                  replay: Callable[[Replay, Assumptions], Replay] | None = None,
                  final_replay: bool = True) -> OverheadFit:
    """Fit `free` overheads (default `free_overheads`) to `replays` (made at `base`).
    With `replay` (how to replay one run again at other assumptions), the fit is
    re-linearised at its result until it settles (staggered clients, a front end, open
    arrivals: the schedule moves with the step times); exact replays (`Replay.exact`)
    settle at once. `final_replay`: replay at the last fit too, for its figures."""
    free = free or free_overheads(replays)
    mask = np.array([name in free for name in OVERHEADS])
    ceilings = np.array([OVERHEAD_CEILINGS[name] for name in OVERHEADS])
    groups = [group_key(r) for r in replays]
    counts = {key: groups.count(key) for key in set(groups)}
    weights = np.array([1.0 / counts[key] for key in groups])
    current = list(replays)
    point = overheads_of(base)
    rounds_run = 0
    while rounds_run < rounds:
        rounds_run += 1
        start = point
        loss = Surrogate(current, weights)
        point = _pattern_search(loss, loss.linear_start(mask, ceilings), mask, ceilings)
        if replay is None or (rounds_run == rounds and not final_replay):
            break
        assumptions = with_overheads(base, point)
        current = [replay(r, assumptions) for r in current]
        if all(r.exact for r in current) or np.allclose(point, start, rtol=0.01, atol=1e-7):
            break
    at_bound = [name for name, value, ceiling, on in zip(OVERHEADS, point, ceilings, mask,
                                                         strict=True)
                if on and (value <= ceiling * 1e-4 or value >= ceiling * (1 - 1e-4))]
    return OverheadFit(point, free, at_bound, Surrogate(current, weights)(point), current,
                       rounds_run)


# --- scoring ---------------------------------------------------------------------------

def log_ratios(replays: Sequence[Replay], key: str) -> np.ndarray:
    """log(measured / predicted) of each run's mean `key` (ttft or tpot) where measured."""
    values = [(getattr(r.run, key).mean, r.predicted[f"{key}_s"]["mean"]) for r in replays]
    return np.array([math.log(m / p) for m, p in values if m and p])


def mape(replays: Sequence[Replay], key: str) -> float | None:
    ratios = log_ratios(replays, key)
    return float(np.mean(np.abs(np.exp(-ratios) - 1))) if ratios.size else None


def interval_bounds(groups: Sequence[np.ndarray], level: float) -> tuple[float, float]:
    """The (low, high) ratios holding `level` of held-out log ratios, each group weighted
    equally (`core.intervals`), to the 3 decimals a profile records."""
    weights = dataset_weights(np.repeat(np.arange(len(groups)), [g.size for g in groups]))
    low, high = ratio_bounds(np.concatenate(groups), weights, level)
    return min(1.0, round(low, 3)), max(1.0, round(high, 3))


def coverage(ratios: np.ndarray, bounds: tuple[float, float]) -> float | None:
    """Share of held-out runs whose measured / predicted lies within (low, high)."""
    return intervals.coverage(ratios, bounds) if ratios.size else None


def coverage_by_the_others(groups: Sequence[np.ndarray], level: float) -> list[float | None]:
    """Each group's share of held-out runs inside the interval made from the other groups'
    held-out ratios alone: the interval's coverage on runs it was not drawn from (None
    for a group with no runs, or with no other group to draw from)."""
    if not groups:
        return []
    labels = np.repeat(np.arange(len(groups)), [g.size for g in groups])
    shares = intervals.coverage_by_the_others(np.concatenate(groups), labels, level)
    return [shares.get(index) for index in range(len(groups))]


@dataclass
class HeldOut:
    """Leave-one-group-out over one engine's groups."""

    engine: str
    groups: dict[tuple, dict]  # group -> {runs, fit, mape_ttft, mape_tpot, ...}
    ratios: dict[str, list[np.ndarray]]  # ttft/tpot -> per-group held-out log ratios


FoldFit = Callable[[tuple, list[str]], tuple[Assumptions, "OverheadFit"]]


def leave_one_group_out(replays: Sequence[Replay], base: Assumptions,
                        replay: Callable[[Replay, Assumptions], Replay],
                        fit_fold: FoldFit | None = None) -> HeldOut:
    """Fit on every other group of the engine, score the held-out group by replaying it
    at the fitted overheads (the replays must be one engine's, made at `base`).
    `fit_fold(held-out key, free overheads)` -> (the profile fitted on, its fit) replaces
    the overhead fit at `base` (sweeps/compute_share.py also chooses the profile)."""
    keys = sorted({group_key(r) for r in replays})
    if len(keys) < 2:
        raise SpecError(f"leave-one-group-out needs two (engine, GPU, model) groups; "
                        f"{keys[0][0] if keys else 'this engine'} has {len(keys)}")
    free = free_overheads(replays)
    groups, ratios = {}, {"ttft": [], "tpot": []}
    for key in keys:
        training = [r for r in replays if group_key(r) != key]
        free_here = [n for n in free if n in free_overheads(training)]
        if fit_fold is None:
            # re-linearised once on the training groups (LOGO_ROUNDS), never on the held-out
            at, fit = base, fit_overheads(training, base, free=free_here, replay=replay,
                                          rounds=LOGO_ROUNDS, final_replay=False)
        else:
            at, fit = fit_fold(key, free_here)
        held = [replay(r, with_overheads(at, fit.overheads))
                for r in replays if group_key(r) == key]
        for kind in ratios:
            ratios[kind].append(log_ratios(held, kind))
        groups[key] = {"runs": len(held), "overheads": fit.overheads, "fitted": fit.fitted,
                       "mfu": at.mfu,
                       "host_floor_s": [at.efficiency.host_step_s, at.efficiency.host_sequence_s],
                       "mape_ttft": mape(held, "ttft"), "mape_tpot": mape(held, "tpot"),
                       "bias_tpot": float(np.mean(np.exp(-log_ratios(held, "tpot")) - 1))}
    return HeldOut(keys[0][0], groups, ratios)
