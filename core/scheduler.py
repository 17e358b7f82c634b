"""The serving simulator: requests through a batching policy, each step timed by the step
model (`core.step.evaluate_step`).

Policies (the `--policy` of `sweep simulate`):
- `static` (core/static_batching.py): a batch of up to B waiting requests is prefilled
  in one step, then decodes until its longest member finishes; finished members hold
  their slots idle; the next batch takes whatever is waiting when this one ends (or the
  next arrival).
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
tokens runs one prefill and L - 1 decode steps. The metrics (TTFT, TPOT, ITL, E2E,
occupancy) are core/serving_metrics.py's.

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
from dataclasses import replace

import numpy as np

from rooftui.core.assumptions import Assumptions
from rooftui.core.errors import SpecError
from rooftui.core.prefix_cache import CacheConfig, ServingCache
from rooftui.core.serving_metrics import (
    PERCENTILES,
    request_metrics,
    summarize,
    weighted_percentiles,
)
from rooftui.core.simulation import (
    KV_ADMISSIONS,
    POLICIES,
    PREFILL_FIRST_BUDGET,
    SchedulerConfig,
    Simulation,
)
from rooftui.core.static_batching import run_static
from rooftui.core.step import StepInputs
from rooftui.core.step_costs import StepCosts
from rooftui.core.step_log import STEP_COLUMNS, StepLog, decode_stretch, time_untimed
from rooftui.core.workloads import Requests

# the simulator's public names, imported from here by the sweeps, benchmarks and tests
__all__ = ["KV_ADMISSIONS", "PERCENTILES", "POLICIES", "PREFILL_FIRST_BUDGET", "STEP_COLUMNS",
           "SchedulerConfig", "Simulation", "StepCosts", "request_metrics", "simulate",
           "summarize", "weighted_percentiles"]

PAGED_WATERMARK = 0.01  # share of blocks kept free when admitting (vLLM's default)
STRETCH_STEPS = 32  # decode-only steps from which a stretch is timed in numpy


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
        simulation = run_static(costs, config, requests)
    else:
        cache = ServingCache(prefix_cache, sessions.blocks(config.block_size),
                             requests.input_tokens.tolist(), costs.kv_bytes_per_token,
                             gpu_key) if caching else None
        simulation = _run_dynamic(costs, config, requests, cache, sessions if waits else None)
    front_end = assumptions.efficiency.request_overhead_s
    return replace(simulation, front_end_s=front_end) if front_end else simulation


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
