"""The served configuration behind `sweep optimize`: one `Problem` simulated at any
(max batch, token budget, rate) with its step costs built once, and the analytic pass
(`Analytic`, the rejections of sweeps/optimize.py's docstring) on the same requests."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rooftui.core.arrivals import parse_arrivals
from rooftui.core.errors import SpecError
from rooftui.core.point import evaluate_point
from rooftui.core.scheduler import (
    SchedulerConfig,
    Simulation,
    StepCosts,
    request_metrics,
    simulate,
    summarize,
)
from rooftui.core.workloads import Requests

if TYPE_CHECKING:
    from rooftui.sweeps.optimize import Objective, Problem

RIDGE_SLACK = 0.01  # doubling the budget for at most 1 % more step time: below the ridge
SIMULATIONS_KEPT = 24  # simulations a Server keeps (about 1-2 MB each)


def ms_text(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms" if seconds < 1 else f"{seconds:,.2f} s"


@dataclass(frozen=True)
class Analytic:
    """The analytic pass's numbers for one candidate (seconds, tokens, requests/s)."""

    mean_input_tokens: float
    mean_output_tokens: float
    decode_context: float  # mean context of a decode step: input + output / 2
    kv_capacity_tokens: int
    kv_sequences: float  # sequences of the mean length the KV cache holds
    max_batch_for_tpot: float  # from evaluate_step at the mean context
    decode_step_s: float  # B decodes at the mean context
    mixed_step_s: float  # B decodes + (T - B) prefill tokens (chunked), else = decode step
    mixed_intensity: float  # FLOP/byte of that step
    ridge: float  # FLOP/byte of the GPU
    doubled_step_s: float  # the mixed step with budget 2T (NaN unless chunked)
    ttft_unloaded_s: float  # the objective's quantile (or attainment level) of the lower bound
    tpot_unloaded_s: float
    analytic_capacity_rate: float  # requests/s at saturation, fluid model
    analytic_step_s: float  # mean step time at saturation, fluid model


class Server:
    """One `Problem`, simulated at any (B, T, rate) with its step costs built once;
    simulations are kept (a few) and their summaries (all) so that searches over several
    objectives share them."""

    def __init__(self, problem: Problem, max_batch: int) -> None:
        self.problem = problem
        config = problem.config
        self.inputs = config.step_inputs()
        self.costs = StepCosts(self.inputs, config.assumptions, max_batch)
        self.costs.remember_decode_times()  # every simulation of the search shares them
        # the lengths every simulation uses (separate random streams: the same at any rate)
        self._trace_rate: float | None = None  # requests/s of a trace replayed at speed 1
        self.lengths = self._requests(self._spec(1.0))
        self.closed = Requests(np.zeros(len(self.lengths)), self.lengths.input_tokens,
                               self.lengths.output_tokens)
        inputs = self.lengths.input_tokens.astype(np.float64)
        outputs = self.lengths.output_tokens.astype(np.float64)
        self.mean_input, self.mean_output = float(inputs.mean()), float(outputs.mean())
        self.decode_context = self.mean_input + self.mean_output / 2
        held = self.mean_input + self.mean_output * (
            1.0 if problem.kv_admission == "reserve" else 0.5)
        self.kv_sequences = self.costs.kv_capacity_tokens / held
        self.longest = int(np.max(self.lengths.input_tokens + self.lengths.output_tokens))
        # per request: a batch-1 decode at its mean context (its TPOT alone)
        contexts = inputs + outputs / 2
        window = self.costs.window
        flops, nbytes = self.costs.decode_arrays(np.ones(contexts.size, np.int64), contexts,
                                                 np.minimum(contexts, window))
        self.tpot_alone = np.where(outputs > 1, self.costs.times(
            flops, nbytes, np.ones(contexts.size)), np.nan)
        if problem.arrival == "trace":
            self._trace_rate = self._replay_rate()
        self._simulations: OrderedDict[tuple, Simulation] = OrderedDict()
        self._metrics: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._summaries: dict[tuple, dict] = {}
        self._ttft_alone: dict[tuple, np.ndarray] = {}

    # --- requests -----------------------------------------------------------------------
    def _replay_rate(self) -> float:
        times = self.lengths.arrival_s
        if times[-1] <= times[0]:
            raise SpecError("trace arrivals: the replayed requests all arrive at once; "
                            "use more requests or another --arrival")
        return float((times.size - 1) / (times[-1] - times[0]))

    def _spec(self, rate: float) -> str:
        p = self.problem
        rate = float(rate)
        if p.arrival == "poisson":
            return f"poisson:rate={rate!r}"
        if p.arrival == "gamma":
            return f"gamma:rate={rate!r},cv={p.cv!r}"
        speed = 1.0 if self._trace_rate is None else rate / self._trace_rate
        return f"trace:speed={speed!r}"

    def arrival_spec(self, rate: float) -> str:
        """`sweep simulate --arrival` for `rate` requests/s."""
        return self._spec(rate)

    def _requests(self, spec: str) -> Requests:
        p = self.problem
        return p.workload.requests(p.requests, parse_arrivals(spec), p.seed)

    # --- simulations --------------------------------------------------------------------
    def scheduler(self, batch: int, budget: int) -> SchedulerConfig:
        p = self.problem
        return SchedulerConfig(policy=p.policy, max_batch=batch, token_budget=budget,
                               kv_admission=p.kv_admission, block_size=p.block_size)

    def simulation(self, batch: int, budget: int, spec: str) -> Simulation:
        key = (batch, budget, spec)
        if key in self._simulations:
            self._simulations.move_to_end(key)
            return self._simulations[key]
        requests = self.closed if spec == "closed" else self._requests(spec)
        config = self.problem.config
        result = simulate(self.inputs, config.assumptions, self.scheduler(batch, budget),
                          requests, self.costs)
        self._simulations[key] = result
        if len(self._simulations) > SIMULATIONS_KEPT:
            self._simulations.popitem(last=False)
        return result

    def request_metrics(self, batch: int, budget: int, spec: str):
        """(TTFT, TPOT) of every request, seconds."""
        key = (batch, budget, spec)
        if key not in self._metrics:
            metrics = request_metrics(self.simulation(batch, budget, spec))
            self._metrics[key] = (metrics["ttft_s"], metrics["tpot_s"])
        return self._metrics[key]

    def summary(self, batch: int, budget: int, spec: str, objective: Objective) -> dict:
        """`sweep simulate --json`'s metrics with the objective's bounds."""
        key = (batch, budget, spec, objective.ttft_s, objective.tpot_s)
        if key not in self._summaries:
            self._summaries[key] = summarize(self.simulation(batch, budget, spec),
                                             objective.ttft_s, objective.tpot_s)
        return self._summaries[key]

    def capacity(self, batch: int, budget: int) -> float:
        """Requests/s with every request waiting from the start (closed arrivals)."""
        key = (batch, budget, "closed", None, None)
        if key not in self._summaries:
            self._summaries[key] = summarize(self.simulation(batch, budget, "closed"))
        return self._summaries[key]["request_throughput"]

    # --- the analytic model ---------------------------------------------------------------
    def step_time(self, decodes: float, context: float,
                  prefill: Sequence[tuple[float, float, float]] = ()) -> float:
        """Seconds of a step with `decodes` sequences (a fraction interpolates between the
        neighbouring whole batches' FLOPs and bytes, which are linear in the batch) at mean
        context `context`, plus prefill chunks (tokens, cached, how many of them: a
        fraction scales the chunk's FLOPs and bytes), from `StepCosts`' per-part sums."""
        costs = self.costs
        low = min(int(math.floor(decodes)), costs.max_batch)
        high = min(low + 1, costs.max_batch)
        weight = decodes - low
        batches = np.array([low, high])
        flops, nbytes = costs.decode_arrays(batches, batches * context,
                                            batches * min(context, costs.window))
        flops = [(1 - weight) * f[0] + weight * f[1] for f in flops]
        nbytes = [(1 - weight) * b[0] + weight * b[1] for b in nbytes]
        tokens = sequences = decodes
        if prefill:
            sizes, cached, counts = (np.array(column, np.float64) for column in zip(*prefill, strict=True))
            chunk_flops, chunk_bytes = costs.chunk_arrays(sizes, cached)
            # exact sums in a fixed order, not BLAS dots: the same answer on any machine
            # and thread count
            flops = [f + math.fsum(counts * c) for f, c in zip(flops, chunk_flops, strict=True)]
            nbytes = [b + math.fsum(counts * c) for b, c in zip(nbytes, chunk_bytes, strict=True)]
            tokens += math.fsum(counts * sizes)
            sequences += float(counts.sum())  # a calibrated profile's per-sequence costs
        parts = [np.atleast_1d(f) for f in flops], [np.atleast_1d(b) for b in nbytes]
        return float(costs.times(*parts, np.array([round(tokens)]), np.array([sequences]),
                                 np.array([decodes]))[0])

    def saturated(self, batch: int, budget: float) -> tuple[float, float]:
        """(requests/s, mean step time) with every request waiting (closed arrivals): a
        fluid model of the policy at the mean lengths.

        Slots: min(B, the KV cache's sequences). A request holds a slot for its prefill
        steps and its L - 1 decode steps; per step r requests finish and as many start, so
        r (L - 1) decodes and r I prefill tokens run, within the budget (decodes first). A
        prompt is prefilled whole in its first step when the budget leaves room
        (continuous batching always), else in pieces of what the decodes leave (chunked),
        which then fill every step that prefills. Whole prompts come one by one when the
        lengths vary (requests finish at scattered steps): a step holds the two nearest
        whole numbers of prompts in proportion. With one fixed length (a closed run in
        lockstep: requests admitted together finish together) they come in bursts as large
        as the free slots and the budget allow, the other steps decoding every slot."""
        p = self.problem
        prompt, later = self.mean_input, max(self.mean_output - 1.0, 0.0)
        lockstep = (np.ptp(self.lengths.input_tokens) == 0
                    and np.ptp(self.lengths.output_tokens) == 0)
        slots = min(float(batch), math.floor(self.kv_sequences) if lockstep
                    else self.kv_sequences)
        if slots < 1:
            return 0.0, math.nan
        per_token_budget = budget / (prompt + later) if math.isfinite(budget) else math.inf
        chunked = p.policy == "chunked"
        prefill_steps = 1.0
        for _ in range(50):  # fixed point: the prefill steps depend on the decodes
            rate = min(slots / (later + prefill_steps), per_token_budget)
            decodes = rate * later
            if not chunked:
                break
            steps = max(1.0, prompt / max(budget - decodes, 1e-9))
            if abs(steps - prefill_steps) <= 1e-9 * steps:
                break
            prefill_steps = steps
        context = self.decode_context
        budget_bound = rate >= per_token_budget * (1 - 1e-9)
        if chunked and (budget_bound or prefill_steps > 1 or lockstep):
            # every prefilling step spends what its decodes leave, on pieces of prompts;
            # slot-bound, the other steps decode every slot
            busy, busy_decodes, idle_decodes = 1.0, decodes, decodes
            for _ in range(50):
                share = budget - busy_decodes
                if budget_bound:
                    break
                busy = min(1.0, rate * prompt / share)
                settled = max(0.0, slots - (slots - decodes) / busy)  # B = 1: below 0
                if abs(settled - busy_decodes) <= 1e-9 * slots:
                    break
                busy_decodes, idle_decodes = settled, slots
            piece = min(share, prompt)
            pieces = [(min(piece, prompt - start), start, share / prompt)
                      for start in np.arange(0.0, prompt, piece)]
            time = busy * self.step_time(busy_decodes, context, pieces)
            if busy < 1:
                time += (1 - busy) * self.step_time(idle_decodes, context)
        elif lockstep:
            burst = slots  # continuous without a cap: every slot refilled at once
            if math.isfinite(budget):
                for _ in range(50):  # the burst's decodes leave the rest of the budget
                    fits = max(1.0, math.floor((budget - (slots - burst)) / prompt))
                    if fits == burst:
                        break
                    burst = min(fits, slots)
            busy = rate / burst
            time = (busy * self.step_time(slots - burst, context, [(prompt, 0.0, burst)])
                    + (1 - busy) * self.step_time(slots, context))
        else:
            whole = math.floor(rate)
            fraction = rate - whole
            time = sum(share * self.step_time(decodes, context,
                                              [(prompt, 0.0, count)] if count else ())
                       for count, share in ((whole, 1 - fraction), (whole + 1, fraction))
                       if share > 0)
        return rate / time, time

    def ttft_alone(self, budget: int) -> np.ndarray:
        """Each request's prefill alone on the server (pieces of the budget, chunked; the
        whole prompt in one step, continuous): a lower bound on its TTFT."""
        key = (budget,)
        if key not in self._ttft_alone:
            step = self.costs.time
            lengths = np.unique(self.lengths.input_tokens)
            chunked = self.problem.policy == "chunked"
            alone = {}
            for prompt in lengths.tolist():
                size = budget if chunked else prompt
                alone[prompt] = sum(step(0, 0.0, 0.0, [(min(size, prompt - start), start)])
                                    for start in range(0, prompt, size))
            self._ttft_alone[key] = np.array([alone[i] for i in
                                              self.lengths.input_tokens.tolist()])
        return self._ttft_alone[key]

    def analytic(self, batch: int, budget: int, objective: Objective) -> tuple[Analytic, str, str]:
        """The analytic pass: its numbers, and the first reason to reject (code, words)."""
        p = self.problem
        chunked = p.policy == "chunked"
        context = self.decode_context
        # the core's decode step and max batch within the TPOT objective, at the mean context
        point = p.config.with_changes(batch=batch, context=max(1, round(context)),
                                      tpot_budget=objective.tpot_s)
        decode = evaluate_point(point)
        chunk = max(budget - batch, 0) if chunked else 0
        mixed = evaluate_point(point.with_changes(prefill=chunk)) if chunk else decode
        doubled = (evaluate_point(point.with_changes(prefill=2 * budget - batch))["step_time_s"]
                   if chunked and budget >= batch else math.nan)
        ttft_alone = self.ttft_alone(budget)
        level = objective.quantile if objective.quantile is not None else objective.share
        capacity, step = self.saturated(batch, budget)
        numbers = Analytic(
            mean_input_tokens=self.mean_input, mean_output_tokens=self.mean_output,
            decode_context=context,
            kv_capacity_tokens=self.costs.kv_capacity_tokens, kv_sequences=self.kv_sequences,
            max_batch_for_tpot=float(decode["max_batch_for_tpot"]),
            decode_step_s=decode["step_time_s"], mixed_step_s=mixed["step_time_s"],
            mixed_intensity=mixed["intensity"], ridge=mixed["ridge"], doubled_step_s=doubled,
            ttft_unloaded_s=float(np.percentile(ttft_alone, 100 * level)),
            tpot_unloaded_s=float(np.nanpercentile(self.tpot_alone, 100 * level))
            if np.isfinite(self.tpot_alone).any() else math.nan,
            analytic_capacity_rate=capacity, analytic_step_s=step)
        return numbers, *self._reject(batch, budget, objective, numbers, ttft_alone)

    def _reject(self, batch, budget, objective, a: Analytic, ttft_alone) -> tuple[str, str]:
        chunked = self.problem.policy == "chunked"
        if chunked and budget < batch:
            return "budget_below_batch", (f"a chunked budget of {budget:,} tokens is below the "
                                          f"max batch {batch:,}: decodes take a token each")
        if self.longest > self.costs.kv_capacity_tokens:
            return "kv_too_small", (f"a request of {self.longest:,} tokens does not fit the KV "
                                    f"cache ({self.costs.kv_capacity_tokens:,} tokens)")
        if not objective.met_by(ttft_alone, self.tpot_alone):
            return "unloaded", (f"even alone on the server the requests miss {objective.describe()}"
                                f" (unloaded TTFT {ms_text(a.ttft_unloaded_s)}, TPOT "
                                f"{ms_text(a.tpot_unloaded_s)} at that level)")
        if batch > a.kv_sequences:
            return "kv_capacity", (f"the KV cache holds about {a.kv_sequences:,.0f} sequences "
                                   f"of the mean length ({a.mean_input_tokens + a.mean_output_tokens:,.0f} "
                                   f"tokens): a max batch of {batch:,} is never reached")
        if batch > a.max_batch_for_tpot:
            return "decode_tpot", (f"a decode step of {batch:,} sequences at context "
                                   f"{a.decode_context:,.0f} takes {ms_text(a.decode_step_s)}, over "
                                   f"the TPOT objective {ms_text(objective.tpot_s)}; at most "
                                   f"{a.max_batch_for_tpot:,.0f} fit it")
        if chunked and a.doubled_step_s <= (1 + RIDGE_SLACK) * a.mixed_step_s:
            return "below_ridge", (f"below the ridge: the step with {budget - batch:,} prefill "
                                   f"tokens runs at {a.mixed_intensity:,.0f} FLOP/B (ridge "
                                   f"{a.ridge:,.0f}); a budget of {2 * budget:,} costs "
                                   f"{ms_text(a.doubled_step_s)} against {ms_text(a.mixed_step_s)} and "
                                   "prefills twice as much")
        return "", ""
