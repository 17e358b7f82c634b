"""The serving simulator: requests through a batching policy, each step timed by the step
model (`core.step.evaluate_step`).

Policies (the `--policy` of `sweep simulate`):
- `static`: a batch of up to B waiting requests is prefilled in one step, then decodes
  until its longest member finishes; finished members hold their slots idle; the next
  batch takes whatever is waiting when this one ends (or the next arrival).
- `continuous`: every step runs all decoding sequences; free slots are refilled at once
  and the new prompts are prefilled whole in that same step (a mixed step). An optional
  token budget caps a step's tokens (decodes plus whole prompts, vLLM's
  max_num_batched_tokens without chunking); a prompt longer than the budget runs alone
  with the decodes. Without one, every free slot is filled in one step.
- `chunked`: a per-step token budget T shared with decodes: decodes first (one token
  each), then partial prefills in admission order, then new prompts, each prompt cut to
  what is left of the budget (Sarathi-Serve / vLLM chunked prefill). T >= B.
- `prefill_first`: a step runs either prefills or decodes, never both (SGLang's default
  scheduler, `get_next_batch_to_run`: "Run prefill first if possible"; mixed steps only
  with --enable-mixed-chunk). Whenever a partial prefill remains or a waiting prompt can
  be admitted, the step is a prefill batch of up to T tokens (a partial prefill first,
  then new prompts in order, the last one cut to what is left: SGLang's
  chunked_prefill_size) and every decoding sequence waits; otherwise all decode. The
  decodes' token gap across such a stall is the stall plus their next step (ITL).

KV cache (`--kv-admission`): the capacity is what the GPU's memory holds after the
weights and the profile's reserve, at the step model's KV bytes per token (windowed
layers counted in full, as a paged allocator stores them).
- `reserve`: a request is admitted only when its whole sequence (prompt plus all its
  output tokens, the output length being the request's max_tokens) fits; never preempts.
- `paged`: blocks of `block_size` tokens; a prompt is admitted when its blocks fit with
  a 1 % watermark left free (vLLM's rule); each decode step takes a new block whenever a
  sequence fills one, and when none is free the latest-arrived running sequence is
  preempted: its blocks are freed and it goes back to the front of the queue, to be
  prefilled again over prompt + tokens generated so far (recompute), which yields its
  next token.

Step times come from the core step model, through `StepCosts` (core/step_costs.py): a
step of B decodes with contexts S_i and prefill chunks (n_j tokens after c_j cached)
costs, per part, the sum of the decode group's and every chunk's FLOPs and bytes, except
the GEMM's weight bytes, read once per step at the step's total token count; each part
is then put on its roofline as the core does. Those sums are exact: StepCosts takes them from a few
evaluate_step calls (see its doc) and checks them against evaluate_step when built.

Token accounting: a prompt's prefill yields the first output token; a sequence holding S
tokens (prompt plus outputs so far) decodes with context S; a request with L output
tokens runs one prefill and L - 1 decode steps. Metrics use the serving-engine names:
TTFT (first token minus arrival), TPOT = (E2E - TTFT) / (L - 1) (requests with L > 1),
ITL (every gap between consecutive tokens of a request), E2E; occupancy is useful
slot-steps (sequences that advanced in a step) over all slot-steps (B per step).

Prefix caching and sessions (`simulate(..., prefix_cache=, sessions=)`, continuous and
chunked): a request admitted with C of its prompt's tokens in the cache is prefilled as
N = prompt - C tokens after C cached (the core step's chunk), and a step that loads hits
from a lower tier lasts max(its compute, the loads) (`core.prefix_cache.ServingCache`
states the memory and timing model). A session's later turn arrives its think time after
the previous turn's last token, so its arrival is known only once that token is.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from rooftui.core.assumptions import Assumptions
from rooftui.core.errors import SpecError
from rooftui.core.prefix_cache import CacheConfig, ServingCache
from rooftui.core.step import StepInputs
from rooftui.core.step_costs import StepCosts
from rooftui.core.step_log import STEP_COLUMNS, StepLog, decode_stretch, time_untimed
from rooftui.core.workloads import Requests

POLICIES = ("static", "continuous", "chunked", "prefill_first")
KV_ADMISSIONS = ("reserve", "paged")
DEFAULT_TOKEN_BUDGET = 512
# prefill_first's default prefill batch: SGLang's chunked_prefill_size on 35-160 GB GPUs
PREFILL_FIRST_BUDGET = 8192
PAGED_WATERMARK = 0.01  # share of blocks kept free when admitting (vLLM's default)
PERCENTILES = (50, 90, 99)
STRETCH_STEPS = 32  # decode-only steps from which a stretch is timed in numpy


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


# ---------------------------------------------------------------------------------------
# simulation

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


def _check_capacity(costs: StepCosts, config: SchedulerConfig, requests: Requests) -> None:
    longest = int(np.max(requests.input_tokens + requests.output_tokens))
    capacity = costs.kv_capacity_tokens
    if config.kv_admission == "paged":
        blocks = capacity // config.block_size
        usable = blocks - math.ceil(PAGED_WATERMARK * blocks)
        capacity = usable * config.block_size
    if longest > capacity:
        raise SpecError(
            f"a request of {longest:,} tokens (prompt + output) does not fit the KV cache "
            f"({capacity:,} tokens after {costs.weight_resident_bytes / 1e9:.1f} GB of weights "
            "and the reserve): use a GPU with more memory, a smaller KV dtype, or cap the lengths")


def simulate(inputs: StepInputs, assumptions: Assumptions, config: SchedulerConfig,
             requests: Requests, costs: StepCosts | None = None, *,
             prefix_cache: CacheConfig | None = None, sessions=None,
             gpu_key: str = "") -> Simulation:
    """Run `requests` through `config`'s policy with step times from the step model.

    `inputs` is one configuration's StepInputs (e.g. `PointConfig.step_inputs()`); its
    batch and token counts are ignored. Pass `costs` to reuse a StepCosts across runs of
    the same configuration. `sessions` (a `core.sessions.SessionRequests` whose requests
    are `requests`) gives the prefix blocks `prefix_cache` looks up and the turns that wait
    for earlier ones; `gpu_key` names the GPU whose host link the tiers use. Deterministic:
    the same inputs give the same result, bit for bit.
    """
    if costs is None or costs.max_batch < config.max_batch:
        costs = StepCosts(inputs, assumptions, config.max_batch)
    if len(requests) == 0:
        raise SpecError("no requests to simulate")
    _check_capacity(costs, config, requests)
    caching = prefix_cache is not None and prefix_cache.enabled
    waits = sessions is not None and sessions.previous is not None
    if caching and sessions is None:
        raise SpecError("--prefix-cache needs requests that share prefixes: a session or "
                        "hash-id trace (--arrival trace:PATH) or generated sessions "
                        "(--workload sessions:...)")
    if config.policy == "static":
        if caching or waits:
            raise SpecError("prefix caching and think-time sessions are simulated with "
                            "--policy continuous or chunked (or prefill_first)")
        simulation = _run_static(costs, config, requests)
    else:
        cache = ServingCache(prefix_cache, sessions.blocks(config.block_size),
                             requests.input_tokens.tolist(), costs.kv_bytes_per_token,
                             gpu_key) if caching else None
        simulation = _run_dynamic(costs, config, requests, cache, sessions if waits else None)
    front_end = assumptions.efficiency.request_overhead_s
    return replace(simulation, front_end_s=front_end) if front_end else simulation


def _static_batches(costs: StepCosts, inputs: np.ndarray, outputs: np.ndarray,
                    bounds: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Step records of static batches, all at once: batch b holds requests
    bounds[b] .. bounds[b+1] - 1 and runs one prefill step then decode steps j = 1 ..
    max(L) - 1, where the members with L > j decode at context I + j. Returns the
    records (no start times) and, per request, the index of its last step."""
    sizes = np.diff(bounds)
    batch_of = np.repeat(np.arange(sizes.size), sizes)  # of each request
    lengths = np.maximum.reduceat(outputs, bounds[:-1])  # steps of each batch
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    total = int(offsets[-1])
    first = offsets[batch_of]  # each request's prefill step
    last = first + outputs - 1

    def over_decodes(begin, end, weights=None):
        """Sum over requests of `weights` on steps begin .. end - 1 (difference array)."""
        delta = np.bincount(begin, weights, total + 1) - np.bincount(end, weights, total + 1)
        return np.cumsum(delta)[:total]

    begin, end = first + 1, first + outputs
    active = np.rint(over_decodes(begin, end)).astype(np.int64)
    j = np.arange(total) - np.repeat(offsets[:-1], lengths)
    sum_context = over_decodes(begin, end, inputs.astype(np.float64)) + j * active
    window = costs.window
    if math.isfinite(window):
        # context I + j stays below the window while j < w - I, then counts as w
        turn = np.clip(first + (int(window) - inputs), begin, end)
        below = over_decodes(begin, turn)
        sum_window = (over_decodes(begin, turn, inputs.astype(np.float64)) + j * below
                      + window * over_decodes(turn, end))
    else:
        sum_window = sum_context
    durations = costs.times(*costs.decode_arrays(active, sum_context, sum_window), active)

    chunk_flops, chunk_bytes = costs.chunk_arrays(inputs, np.zeros(inputs.size))
    per_batch = [[np.bincount(batch_of, part, sizes.size) for part in parts]
                 for parts in (chunk_flops, chunk_bytes)]
    prompts = np.bincount(batch_of, inputs, sizes.size)
    durations[offsets[:-1]] = costs.times(*per_batch, prompts, sizes)
    records = {
        "duration_s": durations,
        "decode_tokens": active,
        "decode_context_tokens": np.rint(sum_context).astype(np.int64),
        "prefill_tokens": np.zeros(total, np.int64),
        "prefill_chunks": np.zeros(total, np.int64),
        "running": active.copy(),
        "kv_tokens": np.repeat(np.bincount(batch_of, inputs + outputs, sizes.size),
                               lengths).astype(np.int64),
    }
    records["prefill_tokens"][offsets[:-1]] = prompts.astype(np.int64)
    records["prefill_chunks"][offsets[:-1]] = sizes
    records["running"][offsets[:-1]] = sizes
    return records, last


def _static_bounds(lengths: np.ndarray, start: int, stop: int, max_batch: int,
                   capacity: int, batches: float = math.inf) -> np.ndarray:
    """Boundaries of up to `batches` batches over requests start .. stop - 1, each the
    longest prefix of at most max_batch requests whose reserved tokens fit the KV."""
    bounds = [start]
    while bounds[-1] < stop and len(bounds) <= batches:
        head = bounds[-1]
        window = lengths[head:min(stop, head + max_batch)]
        bounds.append(head + int(np.count_nonzero(np.cumsum(window) <= capacity)))
    return np.array(bounds)


def _run_static(costs: StepCosts, config: SchedulerConfig, requests: Requests) -> Simulation:
    """Static batching. A batch's composition is fixed from its prefill to its longest
    member's last token, so each batch is timed as one vectorised stretch; with closed
    arrivals every batch is known at t = 0 and all are timed in one go."""
    arrival = requests.arrival_s
    inputs, outputs = requests.input_tokens, requests.output_tokens
    lengths = inputs + outputs
    count = len(requests)
    capacity = costs.kv_capacity_tokens
    first = np.empty(count)
    finish = np.empty(count)
    parts: list[dict[str, np.ndarray]] = []
    now, start = 0.0, 0
    while start < count:
        now = max(now, float(arrival[start]))
        arrived = int(np.searchsorted(arrival, now, side="right"))
        # once every request has arrived the remaining batches are fixed: time them all
        bounds = _static_bounds(lengths, start, arrived, config.max_batch, capacity,
                                math.inf if arrived == count else 1)
        records, last = _static_batches(costs, inputs[bounds[0]:bounds[-1]],
                                        outputs[bounds[0]:bounds[-1]], bounds - bounds[0])
        ends = now + np.cumsum(records["duration_s"])
        starts = ends - records["duration_s"]
        members = slice(bounds[0], bounds[-1])
        prefill_steps = np.flatnonzero(records["prefill_chunks"])
        first[members] = np.repeat(ends[prefill_steps], np.diff(bounds))
        finish[members] = ends[last]
        admitted = np.repeat(bounds[1:], np.diff(np.append(prefill_steps, ends.size)))
        records["start_s"] = starts
        records["waiting"] = np.maximum(
            np.searchsorted(arrival, starts, side="right") - admitted, 0)
        parts.append(records)
        now = float(ends[-1])
        start = int(bounds[-1])
    steps = {name: parts[0][name] if len(parts) == 1 else
             np.concatenate([part[name] for part in parts]) for name in STEP_COLUMNS}
    return Simulation(config=config, requests=requests, first_token_s=first, finish_s=finish,
                      preemptions=np.zeros(count, np.int64), steps=steps,
                      resume_gaps_s=np.array([]), kv_capacity_tokens=capacity)


def _run_dynamic(costs: StepCosts, config: SchedulerConfig, requests: Requests,
                 cache: ServingCache | None = None, sessions=None) -> Simulation:
    """Continuous batching and chunked prefill: one Python iteration per step, O(1) work
    per step plus O(log n) per request event.

    A decoding sequence is not touched each step: it is stored as (k0, s0), the step it
    joined and its context then, so its context at step k is s0 + k - k0; the group is
    carried as sums (count, summed context, summed min(context, window)) and events (a
    finish, a context reaching the window) sit in heaps keyed by step. Paged blocks: a
    sequence needs a new block at step k when (s0 - 1 - k0 + k) is a multiple of the
    block size, so sequences are bucketed by that residue and the blocks a step needs are
    one lookup. With `cache`, admissions look their prompts up and finishes fill it; with
    `sessions`, a waiting turn is released into the queue when its previous turn ends.
    """
    prefill_first = config.policy == "prefill_first"
    chunked = prefill_first or config.policy == "chunked"  # prompts cut to the budget
    paged = config.kv_admission == "paged"
    max_batch, budget, block = config.max_batch, config.budget, config.block_size
    window = costs.window
    windowed = math.isfinite(window)
    step_time = costs.time
    decode_time = costs.decode_time if costs.remembers_decode_times else costs.time
    capacity = costs.kv_capacity_tokens
    total_blocks = capacity // block
    watermark = math.ceil(PAGED_WATERMARK * total_blocks)

    arrival = requests.arrival_s.tolist()
    prompt_tokens = requests.input_tokens.tolist()
    output_tokens = requests.output_tokens.tolist()
    count = len(arrival)
    first = [math.nan] * count
    finish = [math.nan] * count
    preempted = [0] * count
    generated = [0] * count  # output tokens emitted, updated when a sequence changes state
    last_emit = [0.0] * count
    resume_gaps: list[float] = []
    # requests arriving at their own times, in order; the others follow a previous turn
    timed = list(range(count))
    successor = released = None
    if sessions is not None:
        previous = sessions.previous.tolist()
        think = sessions.think_s.tolist()
        timed = [request for request in timed if previous[request] < 0]
        successor = [-1] * count
        for request, before in enumerate(previous):
            if before >= 0:
                successor[before] = request
        released: list[tuple[float, int]] = []  # (arrival, request) of released turns
    timed_count = len(timed)
    load_stall = 0.0

    waiting: deque[int] = deque()
    running: dict[int, int] = {}  # request -> KV held (reserved tokens, or prompt blocks)
    prefilling: dict[int, list[int]] = {}  # request -> [tokens done, prompt tokens]
    decoding: dict[int, tuple[int, int, int, int]] = {}  # request -> (k0, s0, residue, tag)
    finish_heap: list[tuple[int, int, int]] = []  # (last step, tag, request)
    window_heap: list[tuple[int, int, int]] = []  # (step the context reaches w, tag, request)
    bucket = [0] * block
    sum_context = 0  # over decoding sequences, at the current step
    sum_window = 0  # of min(context, window)
    below_window = 0  # decoding sequences with context < window
    kv_used = 0  # reserved tokens, or blocks in use
    tag = 0  # unique per join, so stale heap entries can be told apart
    # the decoding sequences' clock: steps in which they advanced (every step but
    # prefill_first's prefill batches); decode state (k0, heaps, block residues) runs on it
    tick = 0
    stalled: list[list[int]] = []  # prefill_first: [step of last token, decodes] waiting
    stall_log = array("q")  # per (stall, next decode step): (from step, to step, decodes)

    # the step records, flat: (start, duration) and STEP_COLUMNS' other seven, per step
    # (one call per step each; split into columns at the end)
    times = array("d")  # machine doubles and 64-bit integers: numpy reads them in place
    counts = array("q")
    log_times, log_counts = times.extend, counts.extend
    # Once every request has arrived (no cache, no sessions: nothing else waits on the
    # clock), the order of the steps no longer depends on their times: from then on
    # (`untimed_from`) the steps are logged untimed and timed all at once at the end
    # (StepCosts.step_times), `now` counting steps; a request's time is then the end of
    # the step it was set after (an int), resolved at the end.
    untimed_from = None
    untimed_start = 0.0  # the clock at `untimed_from`
    windows = array("d")  # per untimed step (windowed models): summed min(context, window)
    chunk_log = array("q")  # per untimed chunk: (step, tokens, cached)
    log_window, log_chunk = windows.append, chunk_log.extend

    def leave_decoding(request: int, context: int) -> None:
        nonlocal sum_context, sum_window, below_window
        _, _, residue, _ = decoding.pop(request)
        sum_context -= context
        if windowed:
            sum_window -= min(context, window)
            below_window -= context < window
        if paged:
            bucket[residue] -= 1

    def preempt(request: int, tick: int, now: float) -> int:
        """Free `request`'s KV and queue it again; 1 if it needed a block this step."""
        nonlocal kv_used
        needed = 0
        if request in decoding:
            k0, s0, residue, _ = decoding[request]
            context = s0 + tick - k0
            needed = int(residue == (-tick) % block)
            leave_decoding(request, context)
            generated[request] = context - prompt_tokens[request]
            last_emit[request] = now
            kv_used -= -(-(context - 1) // block)
        else:
            del prefilling[request]
            kv_used -= running[request]
        del running[request]
        preempted[request] += 1
        waiting.appendleft(request)
        return needed

    def take_decode_blocks(tick: int, now: float) -> None:
        """The blocks this step's decodes fill, preempting the latest-arrived running
        sequence while they do not fit."""
        nonlocal kv_used
        needed = bucket[(-tick) % block]
        while kv_used + needed > total_blocks:
            needed -= preempt(max(running), tick, now)
        kv_used += needed
        if cache is not None and needed:
            cache.fit((total_blocks - kv_used) * block)

    def log_stalls(to: int, decodes: int) -> None:
        """The `decodes` that waited through prefill batches emit again at step `to`: one
        ITL record per group in `stalled` (the preempted leave the latest-joined first)."""
        gone = sum(group[1] for group in stalled) - decodes
        for group in reversed(stalled):
            leaving = min(gone, group[1])
            group[1] -= leaving
            gone -= leaving
            stall_log.extend((group[0], to, group[1]))
        stalled.clear()

    def release(request: int) -> None:
        """`request` has finished: its blocks enter the cache, its next turn is timed."""
        if cache is not None:
            cache.finish(request, (total_blocks - kv_used) * block if paged
                         else capacity - kv_used)
        if successor is not None and successor[request] >= 0:
            later = successor[request]
            arrival[later] = now + think[later]
            heapq.heappush(released, (arrival[later], later))

    now, step, next_arrival, finished = 0.0, 0, 0, 0
    while finished < count:
        while next_arrival < timed_count and arrival[timed[next_arrival]] <= now:
            waiting.append(timed[next_arrival])
            next_arrival += 1
        while released and released[0][0] <= now:
            waiting.append(heapq.heappop(released)[1])
        if not running and not waiting:
            now = min(arrival[timed[next_arrival]] if next_arrival < timed_count else math.inf,
                      released[0][0] if released else math.inf)
            continue
        if untimed_from is None and next_arrival == timed_count and successor is None \
                and cache is None:
            untimed_from, untimed_start, now = step, now, step
        in_system_waiting, in_system_running = len(waiting), len(running)
        if windowed:
            while window_heap and window_heap[0][0] <= tick:
                _, entry_tag, request = heapq.heappop(window_heap)
                if request in decoding and decoding[request][3] == entry_tag:
                    below_window -= 1
        if decoding and not prefilling and cache is None and (
                not waiting or len(running) >= max_batch):
            # decodes alone, nothing to admit: every step until the next event (a finish,
            # a context reaching the window, an arrival, a preemption) differs from the
            # last only by its contexts, so those steps skip the scheduling above and below
            batch = len(decoding)
            stop = finish_heap[0][0] if finish_heap else math.inf
            if windowed and window_heap:
                stop = min(stop, window_heap[0][0])
            coming = min(arrival[timed[next_arrival]] if next_arrival < timed_count
                         else math.inf, released[0][0] if released else math.inf)
            first_step = step
            kv_held = kv_used * block if paged else kv_used
            limit = stop - tick
            if limit >= STRETCH_STEPS and coming != math.inf:
                # durations grow with the contexts: the first bounds the steps to `coming`
                limit = min(limit, (coming - now) // decode_time(
                    batch, sum_context, sum_window if windowed else sum_context) + 2)
            if limit >= STRETCH_STEPS:  # a long stretch: its steps at once, in numpy
                ran, now, kv_used, stretch_times, stretch_counts, stretch_windows = \
                    decode_stretch(costs, batch, sum_context,
                                    sum_window if windowed else sum_context,
                                    below_window if windowed else batch, int(limit),
                                    None if untimed_from is not None else now, coming,
                                    (in_system_waiting, in_system_running, kv_held),
                                    (tick, bucket, kv_used, total_blocks) if paged else None)
                if untimed_from is not None:
                    now = step + ran
                if ran:
                    if untimed_from is None:
                        times.frombytes(stretch_times)
                    elif windowed:
                        windows.frombytes(stretch_windows)
                    counts.frombytes(stretch_counts)
                    sum_context += batch * ran
                    sum_window += below_window * ran
                    if stalled:
                        log_stalls(step, batch)
                    step += ran
                    tick += ran
                    continue
            while tick < stop:
                if paged:
                    needed = bucket[(-tick) % block]
                    if kv_used + needed > total_blocks:
                        break  # a preemption: the full step below handles it
                    kv_used += needed
                if untimed_from is None:
                    duration = decode_time(batch, sum_context,
                                           sum_window if windowed else sum_context)
                    log_times((now, duration))
                else:
                    duration = 1
                    if windowed:
                        log_window(sum_window)
                log_counts((batch, sum_context, 0, 0, in_system_waiting, in_system_running,
                            kv_used * block if paged else kv_held))
                now += duration
                sum_context += batch
                sum_window += below_window
                step += 1
                tick += 1
                if coming <= now:
                    break
            if step > first_step:
                if stalled:
                    log_stalls(first_step, batch)
                continue
        if paged and not prefill_first:
            take_decode_blocks(tick, now)

        batch = len(decoding)
        chunks: list[tuple[int, int]] = []
        owners: list[int] = []
        room = budget if prefill_first else budget - batch
        prefill = 0
        load = 0.0  # seconds of lower-tier hits this step loads
        if chunked:
            for request, (done, total) in prefilling.items():
                if room <= 0:
                    break
                take = min(total - done, room)
                chunks.append((take, done))
                owners.append(request)
                room -= take
                prefill += take
        while waiting and len(running) < max_batch:
            request = waiting[0]
            prompt = prompt_tokens[request] + generated[request]
            # chunked: until the budget is spent; continuous: whole prompts (less what the
            # cache holds) that fit, but the first prompt of a step always runs
            if chunked and room <= 0:
                break
            if paged:
                held = -(-prompt // block)
                if kv_used + held + watermark > total_blocks:
                    break
            else:
                held = prompt_tokens[request] + output_tokens[request]
                if kv_used + held > capacity:
                    break
            cached = cache.lookup(request, prompt) if cache is not None else 0
            if not chunked and chunks and prompt - cached > room:
                break
            waiting.popleft()
            kv_used += held
            running[request] = held
            if cache is not None:
                load += cache.admit(request, prompt)
                cache.fit((total_blocks - kv_used) * block if paged else capacity - kv_used)
            take = min(prompt - cached, room) if chunked else prompt - cached
            room -= take
            if chunked:
                prefilling[request] = [cached, prompt]
            chunks.append((take, cached))
            owners.append(request)
            prefill += take

        advance = 1  # the decodes run this step
        decode_context, decode_window = sum_context, sum_window
        if prefill_first:
            if chunks:  # a prefill batch: the decodes wait (module doc)
                advance, decode_context, decode_window = 0, 0, 0
                if batch:
                    if not stalled:
                        stalled.append([step - 1, batch])
                    batch = 0
            else:
                if paged:
                    take_decode_blocks(tick, now)
                batch = len(decoding)
                if stalled:
                    log_stalls(step, batch)
        if not batch and not chunks:
            raise RuntimeError(f"simulator stalled at step {step}: nothing runnable")
        if untimed_from is None:
            duration = step_time(batch, decode_context,
                                 decode_window if windowed else decode_context, chunks)
            if load > duration:  # the step's layers wait for their loaded KV
                load_stall += load - duration
                duration = load
            log_times((now, duration))
        else:
            duration = 1
            if windowed:
                log_window(decode_window)
            for take, cached in chunks:
                log_chunk((step, take, cached))
        log_counts((batch, decode_context, prefill, len(chunks), in_system_waiting,
                    in_system_running, kv_used * block if paged else kv_used))
        now += duration

        while advance and finish_heap and finish_heap[0][0] <= tick:
            _, entry_tag, request = heapq.heappop(finish_heap)
            entry = decoding.get(request)
            if entry is None or entry[3] != entry_tag:
                continue  # preempted since
            context = entry[1] + tick - entry[0]
            leave_decoding(request, context)
            kv_used -= -(-context // block) if paged else running[request]
            del running[request]
            finish[request] = now
            finished += 1
            release(request)
        if advance:
            sum_context += len(decoding)
            sum_window += below_window
        joined = 0

        for (take, _), request in zip(chunks, owners, strict=True):
            if chunked:
                progress = prefilling[request]
                progress[0] += take
                if progress[0] < progress[1]:
                    continue
                del prefilling[request]
            emitted = generated[request] + 1  # the prefill yields the next token
            generated[request] = emitted
            if emitted == 1:
                first[request] = now
            else:
                resume_gaps.append(now - last_emit[request] if untimed_from is None
                                   else (last_emit[request], now))
            if emitted == output_tokens[request]:
                held = running.pop(request)
                kv_used -= held
                finish[request] = now
                finished += 1
                release(request)
                continue
            context = prompt_tokens[request] + emitted
            k0 = tick + advance
            joined += 1
            tag += 1
            decoding[request] = (k0, context, (context - 1 - k0) % block, tag)
            heapq.heappush(finish_heap, (k0 + output_tokens[request] - emitted - 1, tag, request))
            sum_context += context
            if windowed:
                sum_window += min(context, window)
                if context < window:
                    below_window += 1
                    heapq.heappush(window_heap, (k0 + int(window) - context, tag, request))
            if paged:
                bucket[(context - 1 - k0) % block] += 1
        if not advance and joined:
            stalled.append([step, joined])  # their first token came at this step
        step += 1
        tick += advance

    if untimed_from is not None:
        first, finish, resume_gaps = time_untimed(
            costs, untimed_from, untimed_start, times, counts,
            windows if windowed else None, chunk_log, (first, finish, resume_gaps))
    return Simulation(config=config, requests=requests, first_token_s=np.array(first),
                      finish_s=np.array(finish), preemptions=np.array(preempted, np.int64),
                      steps=StepLog(times, counts), resume_gaps_s=np.array(resume_gaps),
                      kv_capacity_tokens=capacity,
                      arrival_s=None if sessions is None else np.array(arrival),
                      prefix_cache=None if cache is None else cache.summary(load_stall),
                      stall_gaps=np.frombuffer(stall_log, np.int64).reshape(-1, 3)
                      if prefill_first else None)


# ---------------------------------------------------------------------------------------
# metrics


def weighted_percentiles(values: np.ndarray, weights: np.ndarray, q) -> np.ndarray:
    """`np.percentile(np.repeat(values, weights), q)` (linear interpolation) without
    building the repeated array; weights are non-negative integers."""
    values, weights = np.asarray(values, np.float64), np.asarray(weights, np.int64)
    keep = weights > 0
    values, weights = values[keep], weights[keep]
    order = np.argsort(values, kind="stable")
    values, ends = values[order], np.cumsum(weights[order])
    position = (ends[-1] - 1) * np.asarray(q, np.float64) / 100.0
    low = np.floor(position)
    below = values[np.searchsorted(ends, low, side="right")]
    above = values[np.searchsorted(ends, np.minimum(low + 1, ends[-1] - 1), side="right")]
    return below + (position - low) * (above - below)


def _statistics(values: np.ndarray, weights: np.ndarray | None = None) -> dict | None:
    if weights is None:
        values = values[np.isfinite(values)]
        weights = np.ones(values.size, np.int64)
    if values.size == 0 or weights.sum() == 0:
        return None
    # fsum, not np.dot: a BLAS dot sums in an order that changes with its thread count
    mean = math.fsum(values * weights) / int(weights.sum())
    points = weighted_percentiles(values, weights, PERCENTILES)
    return {"mean": mean, **{f"p{q}": float(v) for q, v in zip(PERCENTILES, points, strict=True)}}


def request_metrics(simulation: Simulation) -> dict[str, np.ndarray]:
    """Per-request TTFT, TPOT, E2E (seconds) as the client sees them (the front end's
    delay on TTFT and E2E); TPOT is NaN for one-token outputs."""
    requests = simulation.requests
    ttft = simulation.first_token_s - simulation.arrivals
    e2e = simulation.finish_s - simulation.arrivals
    later = requests.output_tokens - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(later > 0, (e2e - ttft) / later, np.nan)  # the engine's token pace
    ttft, e2e = ttft + simulation.front_end_s, e2e + simulation.front_end_s
    return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e}


def summarize(simulation: Simulation, slo_ttft: float | None = None,
              slo_tpot: float | None = None) -> dict:
    """The `sweep simulate --json` metrics."""
    requests, steps = simulation.requests, simulation.steps
    per_request = request_metrics(simulation)
    duration = float(np.max(simulation.finish_s))
    output_tokens = int(requests.output_tokens.sum())
    useful = simulation.useful_slots
    # every decode token's gap is its step's duration (decoding sequences run in every
    # step); a sequence resumed after preemption adds its own, longer, gap, and decodes
    # that waited through prefill batches (prefill_first) the time since their last token
    itl_values = np.concatenate([steps["duration_s"], simulation.resume_gaps_s])
    itl_weights = np.concatenate([steps["decode_tokens"],
                                  np.ones(simulation.resume_gaps_s.size, np.int64)])
    stalls = simulation.stall_gaps
    if stalls is not None and stalls.size:
        ends = steps["start_s"] + steps["duration_s"]
        itl_weights[:useful.size] -= np.bincount(stalls[:, 1], stalls[:, 2], useful.size
                                                 ).astype(np.int64)
        itl_values = np.concatenate([itl_values, ends[stalls[:, 1]] - ends[stalls[:, 0]]])
        itl_weights = np.concatenate([itl_weights, stalls[:, 2]])
    result = {
        "requests": len(requests),
        "duration_s": duration,
        "throughput_tokens_per_s": output_tokens / duration,
        "request_throughput": len(requests) / duration,
        "occupancy": float(useful.sum() / (useful.size * simulation.config.max_batch)),
        "mean_batch": float(useful.mean()),
        "preemptions": int(simulation.preemptions.sum()),
        "ttft_s": _statistics(per_request["ttft_s"]),
        "tpot_s": _statistics(per_request["tpot_s"]),
        "itl_s": _statistics(itl_values, itl_weights),
        "e2e_s": _statistics(per_request["e2e_s"]),
        "steps": int(useful.size),
        "output_tokens": output_tokens,
        "kv_capacity_tokens": simulation.kv_capacity_tokens,
    }
    if slo_ttft is not None or slo_tpot is not None:
        met = np.ones(len(requests), dtype=bool)
        if slo_ttft is not None:
            met &= per_request["ttft_s"] <= slo_ttft
        if slo_tpot is not None:
            met &= ~(per_request["tpot_s"] > slo_tpot)  # one-token outputs have no TPOT
        result["slo_attainment"] = float(met.mean())
        result["goodput_tokens_per_s"] = float(requests.output_tokens[met].sum() / duration)
    return result
