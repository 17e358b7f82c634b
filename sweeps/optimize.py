"""The search behind `sweep optimize`: the (max batch, token budget) that sustains the highest
request rate with a TTFT/TPOT objective met, and why every other candidate lost.

A candidate is a max batch B and a token budget T (the chunked policy's tokens per step,
shared with the decodes; with `policy = "continuous"` a cap on decodes plus whole prompts).
Each goes through two passes.

1. **Analytic** (the step model, no simulation), on the N requests the simulations use:
   - `budget_below_batch`: a chunked budget below B (decodes take one token each first);
   - `kv_too_small`: a request's prompt plus output does not fit the KV cache at all;
   - `unloaded`: even alone on the server the requests miss the objective: each request's
     TTFT is at least its prompt's prefill with the whole budget (pieces of T tokens, no
     decodes), its TPOT at least a batch-1 decode step at its mean context, so if these
     lower bounds already miss the objective no rate meets it;
   - `kv_capacity` (dominated): the KV cache holds fewer sequences of the mean length
     than B, so the max batch is never reached and a smaller one behaves the same;
   - `decode_tpot` (dominated): B is above `max_batch_for_tpot` of `evaluate_step` (the
     largest decode batch whose step at the mean context fits the TPOT objective): once the
     batch fills, every token is late, and the max batch the TPOT allows sustains as much;
   - `below_ridge` (dominated, chunked): the full mixed step (B decodes, T - B prefill
     tokens) is so far below the ridge that doubling the budget costs at most
     `RIDGE_SLACK` more step time: the larger chunk prefills twice as much per step for
     the same TPOT (the seed's "chunk above the ridge").
   The pass also predicts the saturated request rate with a fluid model of the policy
   (`Server.saturated`): every step holds the average composition of decodes and prefill
   (whole prompts in integer numbers per step, or pieces when prompts span several steps),
   slots are bound by B and by the KV cache, tokens by the budget. With fixed lengths and
   closed arrivals it matches the simulator within a few per cent
   (tests/unit/test_optimize.py).

2. **Simulated** (`rooftui.core.scheduler.simulate`, the `sweep simulate` engine): the
   capacity is the request throughput with closed arrivals (every request waiting: the
   most the configuration can serve, never sustained itself); the sustained rate is found
   by halving down from it to the first rate that meets the objective, then bisection on
   the logarithm of the rate until the bracket is within the tolerance; the answer is the
   highest rate seen meeting the objective. A candidate within two tolerances of its
   capacity is `saturated` (throughput, not the objective, limits it: with few requests
   the queue near full load has no time to build, so use more requests to tell them
   apart); one that misses the objective even at capacity / `LOWEST_RATE_FACTOR` is
   `slo_unmet`. The bisection only queries a fixed grid of rates (its midpoints), so
   `optimize` starts each candidate from a neighbour's answer as a share of the capacity
   (`RateHint`: the same max batch's next larger budget, whose answer is usually within a
   grid step): the grid rates next to it are simulated first, and every rate below one
   that met the objective, or above one that missed it, is taken as simulated. The answer
   is the bisection's whenever meeting the objective is monotone in the rate, in about
   half the simulations (tests/unit/test_optimize_recorded.py holds every candidate of the
   default search to the plain bisection's answers).

The objective (`Objective`): TTFT <= S1 and TPOT <= S2, with either a quantile (p50, p90 or
p99 of each within its bound) or an attainment (the share of requests meeting both; 0.9
when neither is given); both when both are given. Goodput is the output tokens of the
requests meeting both, per second.

Determinism: every simulation of a search uses the same seed, so the requests' lengths are
the same at every rate and the arrival gaps scale with 1/rate (common random numbers), and a
search is reproducible bit for bit, with any number of workers (a candidate's hint comes
from fixed predecessors, never from whichever worker finished first). Monotonicity: the
bisection only moves up on a rate that meets the objective, its first bracket does not
depend on the objective, and a looser objective passes every rate a stricter one passes
(the simulations are the same), so a looser objective never gives a lower sustained rate
(with hints, as long as meeting each objective is monotone in the rate); the analytic
rejections only shrink as the objective loosens. A reported rate can be replayed with `sweep simulate --arrival
<arrival>` (the `arrival` of the candidate) and gives the same metrics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from rooftui.core.errors import SpecError
from rooftui.core.point import PointConfig
from rooftui.core.workloads import Workload
from rooftui.sweeps.optimize_server import Analytic, Server, ms_text

QUANTILES = (0.5, 0.9, 0.99)  # the percentiles `sweep simulate` reports
DEFAULT_ATTAINMENT = 0.9
DEFAULT_REQUESTS = 1000
DEFAULT_TOLERANCE = 0.02
LOWEST_RATE_FACTOR = 64  # the bisection's floor: the capacity over this
ARRIVALS = ("poisson", "gamma", "trace")
OPTIMIZE_POLICIES = ("chunked", "continuous")

STATUSES = ("sustained", "infeasible", "dominated")
# code -> (status, in words, a letter for tables); the sentence with numbers is
# Candidate.detail
REASONS = {
    "": ("sustained", "sustained", ""),
    "budget_below_batch": ("infeasible", "budget below the max batch", "b"),
    "kv_too_small": ("infeasible", "a request exceeds the KV cache", "K"),
    "unloaded": ("infeasible", "misses the objective even unloaded", "u"),
    "kv_capacity": ("dominated", "max batch above what the KV cache holds", "k"),
    "decode_tpot": ("dominated", "decode step over the TPOT objective", "t"),
    "below_ridge": ("dominated", "budget below the ridge", "r"),
    "slo_unmet": ("infeasible", "misses the objective at every rate", "s"),
}


@dataclass(frozen=True)
class Objective:
    """The SLO: TTFT <= ttft_s and TPOT <= tpot_s (seconds), for a quantile of each and/or a
    share of requests meeting both (attainment; 0.9 when neither is given)."""

    ttft_s: float
    tpot_s: float
    quantile: float | None = None
    attainment: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft_s", "tpot_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise SpecError(f"the {name[:4].upper()} objective must be > 0 seconds, "
                                f"got {value!r}")
        if self.quantile is not None and self.quantile not in QUANTILES:
            raise SpecError(f"the quantile must be one of {', '.join(map(str, QUANTILES))} "
                            f"(the percentiles `sweep simulate` reports), got {self.quantile!r}")
        if self.attainment is not None and not 0 < self.attainment <= 1:
            raise SpecError(f"the attainment must be in (0, 1], got {self.attainment!r}")

    @property
    def share(self) -> float | None:
        """The share of requests that must meet both bounds (None: quantile only)."""
        if self.attainment is None and self.quantile is None:
            return DEFAULT_ATTAINMENT
        return self.attainment

    def met_by(self, ttft: np.ndarray, tpot: np.ndarray) -> bool:
        """Whether requests with these TTFTs and TPOTs (NaN: a one-token output, which has
        no TPOT) meet the objective; quantiles as `sweep simulate` computes them
        (linear interpolation)."""
        ttft, tpot = np.asarray(ttft, np.float64), np.asarray(tpot, np.float64)
        if self.quantile is not None:
            if np.percentile(ttft, 100 * self.quantile) > self.ttft_s:
                return False
            timed = tpot[~np.isnan(tpot)]
            if timed.size and np.percentile(timed, 100 * self.quantile) > self.tpot_s:
                return False
        share = self.share
        if share is not None:
            met = (ttft <= self.ttft_s) & ~(tpot > self.tpot_s)
            return bool(met.mean() >= share)
        return True

    def describe(self) -> str:
        bounds = f"TTFT ≤ {ms_text(self.ttft_s)} and TPOT ≤ {ms_text(self.tpot_s)}"
        parts = []
        if self.quantile is not None:
            parts.append(f"p{round(self.quantile * 100)} {bounds}")
        if self.share is not None:
            parts.append(f"{self.share:.0%} of requests with {bounds}")
        return " and ".join(parts)

    def to_json(self) -> dict:
        return {"slo_ttft_s": self.ttft_s, "slo_tpot_s": self.tpot_s,
                "quantile": self.quantile, "attainment": self.share}


@dataclass(frozen=True)
class Problem:
    """What is served and how, apart from (B, T) and the rate: a configuration (GPU, model,
    dtypes, tensor parallelism, profile; `config.price_per_gpu_hour` adds costs), a
    workload, the policy, the arrival process (its rate is what the search finds) and the
    simulation size."""

    config: PointConfig
    workload: Workload
    policy: str = "chunked"
    arrival: str = "poisson"  # poisson | gamma | trace
    cv: float = 1.0  # gamma
    kv_admission: str = "reserve"
    block_size: int = 16
    requests: int = DEFAULT_REQUESTS
    seed: int = 0

    def __post_init__(self) -> None:
        if self.policy not in OPTIMIZE_POLICIES:
            raise SpecError(f"the optimizer searches a token budget: policy chunked or "
                            f"continuous, got {self.policy!r}")
        if self.arrival not in ARRIVALS:
            raise SpecError(f"the optimizer searches a request rate: arrivals "
                            f"{', '.join(ARRIVALS)}, got {self.arrival!r}")
        if self.requests < 2:
            raise SpecError(f"the search needs at least 2 requests, got {self.requests}")

    @property
    def gpus(self) -> int:
        return int(self.config.tp)


@dataclass
class Candidate:
    max_batch: int
    token_budget: int
    reason: str  # a key of REASONS ("" when sustained)
    detail: str  # the reason in words, with its numbers
    analytic: Analytic | None
    rate: float | None = None  # requests/s sustained
    arrival: str | None = None  # `sweep simulate --arrival` at that rate
    capacity_rate: float | None = None  # simulated, closed arrivals
    saturated: bool = False  # met the objective even at the capacity
    summary: dict | None = None  # `sweep simulate --json` metrics at the rate
    simulations: int = 0  # simulations the search used (run, or shared with another)
    gpus: int = 1
    price_per_gpu_hour: float | None = None

    @property
    def status(self) -> str:
        return REASONS[self.reason][0]

    @property
    def goodput_tokens_per_s(self) -> float | None:
        return None if self.summary is None else self.summary["goodput_tokens_per_s"]

    @property
    def tokens_per_s_per_gpu(self) -> float | None:
        """Output tokens/s per GPU in steady state at the sustained rate: rate x mean
        output tokens / GPUs (a finite run's own throughput also counts its drain)."""
        if self.rate is None:
            return None
        return self.rate * self.analytic.mean_output_tokens / self.gpus

    @property
    def per_user_tokens_per_s(self) -> float | None:
        """Decode speed a user sees: 1 / mean TPOT."""
        if self.summary is None or self.summary["tpot_s"] is None:
            return None
        return 1.0 / self.summary["tpot_s"]["mean"]

    @property
    def cost_per_million_tokens(self) -> float | None:
        """Price of the replica's GPUs per million output tokens served within the SLO."""
        goodput = self.goodput_tokens_per_s
        if self.price_per_gpu_hour is None or not goodput:
            return None
        return self.price_per_gpu_hour * self.gpus / 3600.0 / goodput * 1e6

    def to_json(self) -> dict:
        out: dict[str, Any] = {"max_batch": self.max_batch, "token_budget": self.token_budget,
                               "status": self.status, "reason": self.reason or None,
                               "detail": self.detail, "rate": self.rate}
        if self.summary is not None:
            out.update(self.metrics())
        out["capacity_rate"] = self.capacity_rate
        out["simulations"] = self.simulations
        out["analytic"] = None if self.analytic is None else {
            key: (None if isinstance(value, float) and not math.isfinite(value) else value)
            for key, value in self.analytic.__dict__.items()}
        return out

    def row(self) -> dict[str, Any]:
        """The candidate as one row of `candidate_columns` (NaN where not simulated)."""
        s = self.summary or {}
        nan = math.nan
        row: dict[str, Any] = {
            "status": self.status, "reason": self.reason,
            "rate": nan if self.rate is None else self.rate,
            "capacity_rate": nan if self.capacity_rate is None else self.capacity_rate,
            "saturated": self.saturated, "simulations": self.simulations,
            "goodput_tokens_per_s": s.get("goodput_tokens_per_s", nan),
            "throughput_tokens_per_s": s.get("throughput_tokens_per_s", nan),
            "tokens_per_s_per_gpu": _or_nan(self.tokens_per_s_per_gpu),
            "per_user_tokens_per_s": _or_nan(self.per_user_tokens_per_s),
            "slo_attainment": s.get("slo_attainment", nan),
            "mean_batch": s.get("mean_batch", nan), "occupancy": s.get("occupancy", nan),
        }
        for metric in ("ttft", "tpot"):
            statistics = s.get(f"{metric}_s") or {}
            for statistic in STATISTICS:
                row[f"{metric}_{statistic}_s"] = statistics.get(statistic, nan)
        if self.price_per_gpu_hour is not None:
            row["cost_per_million_tokens"] = _or_nan(self.cost_per_million_tokens)
        for name in ANALYTIC_FIELDS:
            row[name] = nan if self.analytic is None else getattr(self.analytic, name)
        return row

    def metrics(self) -> dict:
        """The metrics at the sustained rate, as `best` lists them."""
        s = self.summary
        out = {"rate": self.rate, "arrival": self.arrival, "saturated": self.saturated,
               "goodput_tokens_per_s": s["goodput_tokens_per_s"],
               "throughput_tokens_per_s": s["throughput_tokens_per_s"],
               "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
               "per_user_tokens_per_s": self.per_user_tokens_per_s,
               "slo_attainment": s["slo_attainment"], "ttft_s": s["ttft_s"],
               "tpot_s": s["tpot_s"], "mean_batch": s["mean_batch"],
               "occupancy": s["occupancy"]}
        if self.price_per_gpu_hour is not None:
            out["cost_per_million_tokens"] = self.cost_per_million_tokens
        return out


ANALYTIC_FIELDS = tuple(f.name for f in fields(Analytic))
STATISTICS = ("mean", "p50", "p90", "p99")


def candidate_columns(priced: bool) -> dict[str, type]:
    """The columns of `Candidate.row`, in order, with their numpy types (str: a name from
    a fixed list, see `STATUSES` and `REASONS`)."""
    columns: dict[str, type] = {"status": str, "reason": str, "rate": np.float64,
                                "capacity_rate": np.float64, "saturated": np.bool_,
                                "simulations": np.int64}
    for name in ("goodput_tokens_per_s", "throughput_tokens_per_s", "tokens_per_s_per_gpu",
                 "per_user_tokens_per_s", "slo_attainment", "mean_batch", "occupancy"):
        columns[name] = np.float64
    for metric in ("ttft", "tpot"):
        for statistic in STATISTICS:
            columns[f"{metric}_{statistic}_s"] = np.float64
    if priced:
        columns["cost_per_million_tokens"] = np.float64
    for name in ANALYTIC_FIELDS:
        columns[name] = np.int64 if name == "kv_capacity_tokens" else np.float64
    return columns


def candidates_frame(result: Result, priced: bool):
    """The candidates as a polars DataFrame with the columns an `optimize` grid writes
    (max_batch, token_budget, then `candidate_columns`): what the charts read."""
    import polars as pl  # only when a frame is asked for

    types = {str: pl.String, np.bool_: pl.Boolean, np.int64: pl.Int64, np.float64: pl.Float64}
    schema = {"max_batch": pl.Int64, "token_budget": pl.Int64} | {
        name: types[kind] for name, kind in candidate_columns(priced).items()}
    rows = [{"max_batch": c.max_batch, "token_budget": c.token_budget, **c.row()}
            for c in result.candidates]
    return pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(
        schema=schema)


def _or_nan(value: float | None) -> float:
    return math.nan if value is None else value


@dataclass
class Result:
    objective: Objective
    candidates: list[Candidate]
    best: Candidate | None
    pareto: list[Candidate] = field(default_factory=list)


# ---------------------------------------------------------------------------------------
# the search


def evaluate_candidate(server: Server, objective: Objective, batch: int, budget: int,
                       tolerance: float = DEFAULT_TOLERANCE,
                       hint: RateHint | None = None) -> Candidate:
    """One (B, T): the analytic pass, then the capacity and the rate search. `hint` (from a
    neighbouring candidate, see `rate_hint`) is where the search starts; it changes which
    rates are simulated, not the answer (`_sustained_rate`)."""
    if not 0 < tolerance < 1:
        raise SpecError(f"the rate tolerance must be in (0, 1), got {tolerance!r}")
    p = server.problem
    analytic, reason, detail = server.analytic(batch, budget, objective)
    candidate = Candidate(max_batch=batch, token_budget=budget, reason=reason, detail=detail,
                          analytic=analytic, gpus=p.gpus,
                          price_per_gpu_hour=p.config.price_per_gpu_hour)
    if reason:
        return candidate

    queried: set[float] = set()

    def meets(rate: float) -> bool:
        queried.add(rate)
        return objective.met_by(*server.request_metrics(batch, budget,
                                                        server.arrival_spec(rate)))

    capacity = server.capacity(batch, budget)
    candidate.capacity_rate = capacity
    rate = _sustained_rate(capacity, meets, tolerance, hint)
    candidate.saturated = rate is not None and rate * (1 + tolerance) ** 2 >= capacity
    candidate.simulations = 1 + len(queried)  # the capacity's and the rates'
    if rate is None:
        low = capacity / LOWEST_RATE_FACTOR
        summary = server.summary(batch, budget, server.arrival_spec(low), objective)
        candidate.reason = "slo_unmet"
        candidate.detail = (f"misses {objective.describe()} even at {low:,.3g} req/s "
                            f"(capacity {capacity:,.3g} req/s / {LOWEST_RATE_FACTOR}): "
                            f"TTFT p90 {ms_text(summary['ttft_s']['p90'])}, TPOT p90 "
                            f"{ms_text(summary['tpot_s']['p90']) if summary['tpot_s'] else '—'}, "
                            f"{summary['slo_attainment']:.0%} meet both")
        return candidate
    candidate.rate = rate
    candidate.arrival = server.arrival_spec(rate)
    candidate.summary = server.summary(batch, budget, candidate.arrival, objective)
    return candidate


@dataclass(frozen=True)
class RateHint:
    """A neighbouring candidate's sustained rate over its capacity. `below`: the neighbour
    has a smaller max batch, which sustains a smaller share of its capacity (fewer slots
    queue more), so the share is only a likely lower bound, not a likely answer."""

    share: float
    below: bool = False


def _sustained_rate(capacity: float, meets: Callable[[float], bool], tolerance: float,
                    hint: RateHint | None = None) -> float | None:
    """The highest rate below `capacity` found to meet the objective, or None: `_bracket`'s
    low end, its queries answered by `_Outcomes` (simulated, or implied by the simulations
    around them). With a `hint` the simulations first gallop from the hint's rate on the
    bracket's own grid (`_gallop`), so that a good hint leaves the bisection two simulations
    next to its answer and implies the rest; a hint `below` only has its rate simulated
    (meeting the objective there implies every lower rate of the bisection). The answer is
    the one the plain bisection gives whenever meeting the objective is monotone in the
    rate (a rate below one that meets it meets it too), whatever the hint."""
    outcomes = _Outcomes(meets)
    if hint is not None and hint.below:
        start = _grid_at(capacity, tolerance, hint.share * capacity)
        if start is not None:
            outcomes(start[0])
    elif hint is not None:
        _gallop(capacity, outcomes, tolerance, hint.share * capacity)
    bracket = _bracket(capacity, outcomes, tolerance)
    return None if bracket is None else bracket[0]


def _bracket(capacity: float, meets: Callable[[float], bool],
             tolerance: float) -> tuple[float, float] | None:
    """(low, high): a rate that meets the objective and one within `tolerance` above it that
    does not (or the capacity), or None.

    Halving down from the capacity (which is never sustained: an open queue at full
    utilisation does not settle) to the first rate that meets it, at most down to
    capacity / LOWEST_RATE_FACTOR, then bisection on the logarithm of the rate until the
    bracket is within `tolerance`. Every query that meets the objective moves the answer
    up and the next query depends only on the answers, so an objective that every rate a
    stricter one meets also meets never gets a lower answer. Every rate it can query is a
    fixed float of the capacity and the tolerance (a midpoint's bracket is the same on
    every path to it): the grid `_gallop` walks."""
    high, low = capacity, capacity / 2
    while not meets(low):
        high, low = low, low / 2
        if low < capacity / LOWEST_RATE_FACTOR * (1 - 1e-12):
            return None
    while high / low > 1 + tolerance:
        middle = math.sqrt(low * high)
        low, high = (middle, high) if meets(middle) else (low, middle)
    return low, high


class _Outcomes:
    """`meets` remembered: a rate simulated, or implied by the simulations (below a rate
    that met the objective: met; above one that missed it: missed). Where simulations
    disagree with that order the rate is simulated."""

    def __init__(self, meets: Callable[[float], bool]) -> None:
        self._meets = meets
        self.simulated: dict[float, bool] = {}

    def implied(self, rate: float) -> bool | None:
        if rate in self.simulated:
            return self.simulated[rate]
        met = any(ok and seen >= rate for seen, ok in self.simulated.items())
        missed = any(not ok and seen <= rate for seen, ok in self.simulated.items())
        return met if met != missed else None

    def __call__(self, rate: float) -> bool:
        known = self.implied(rate)
        if known is None:
            known = self.simulated[rate] = self._meets(rate)
        return known


def _grid_at(capacity: float, tolerance: float, rate: float) -> tuple[float, float] | None:
    """`_bracket`'s grid rate at or below `rate` and the next above it (None: below the
    floor)."""
    margin = tolerance * 1e-3  # far below a grid step, far above the floats' rounding
    return _bracket(capacity, lambda r: r <= rate * (1 + margin), tolerance)


def _gallop(capacity: float, outcomes: _Outcomes, tolerance: float, guess: float) -> None:
    """Simulates `_bracket`'s grid rate at or below `guess`, then rates 1, 1, 2, 4, ... grid
    steps on the way its answer points (up when it met the objective) until an answer turns,
    the capacity is reached or the floor passed: a met rate next to a missed one leaves
    `_bracket` nothing to simulate."""
    start = _grid_at(capacity, tolerance, guess)
    if start is None:
        return
    (rate, above), moves = start, 0
    spacing = above / rate  # a grid step (the same in every octave, up to rounding)
    up = outcomes(rate)
    while True:
        steps = 2 ** max(moves - 1, 0)
        bracket = _grid_at(capacity, tolerance, rate * spacing ** (steps if up else -steps))
        if bracket is None:  # below the floor
            return
        low, high = bracket
        following = (high if low <= rate else low) if up else low
        if following >= capacity or (not up and following >= rate):  # no grid rate left
            return
        rate, moves = following, moves + 1
        if outcomes(rate) != up:
            return


def _rank(candidate: Candidate) -> tuple:
    """Highest rate first, then goodput; ties to the smaller batch and budget."""
    return (-candidate.rate, -candidate.goodput_tokens_per_s, candidate.max_batch,
            candidate.token_budget)


def pareto_frontier(candidates: Sequence[Candidate]) -> list[Candidate]:
    """The sustained candidates no other beats in both tokens/s per GPU and tokens/s per
    user, by increasing tokens/s per user."""
    ranked = sorted((c for c in candidates if c.status == "sustained"
                     and c.per_user_tokens_per_s is not None),
                    key=lambda c: (-c.per_user_tokens_per_s, -c.tokens_per_s_per_gpu))
    frontier: list[Candidate] = []
    for candidate in ranked:
        if not frontier or candidate.tokens_per_s_per_gpu > frontier[-1].tokens_per_s_per_gpu:
            frontier.append(candidate)
    return frontier[::-1]


def optimize(problem: Problem, objective: Objective, batches: Sequence[int],
             budgets: Sequence[int], tolerance: float = DEFAULT_TOLERANCE,
             on_candidate: Callable[[Candidate], None] | None = None,
             workers: int = 1, server: Server | None = None) -> Result:
    """Every (B, T) of batches x budgets (in that order in the result; `on_candidate` hears
    of each as it is done), the best and the frontier. Each candidate's rate search starts
    from its predecessor's answer (`search_predecessors`, `rate_hint`), so a candidate is
    searched once its predecessor is done; `workers` > 1 evaluates the candidates that are
    ready in that many processes. The result is the same. `server` (one worker only): the
    Server to simulate with, e.g. one that reports each simulation (the Optimize view)."""
    batches, budgets = _candidates(batches, "max batch"), _candidates(budgets, "token budget")
    pairs = [(batch, budget) for batch in batches for budget in budgets]
    predecessors = search_predecessors(batches, budgets)
    arguments = (problem, objective, max(batches), tolerance)
    candidates: list[Candidate | None] = [None] * len(pairs)

    def done(index: int, candidate: Candidate) -> None:
        candidates[index] = candidate
        if on_candidate is not None:
            on_candidate(candidate)

    if workers > 1 and len(pairs) > 1:
        _search_in_workers(pairs, predecessors, arguments, min(workers, len(pairs)), done,
                           candidates)
    else:
        server = server or Server(problem, max(batches))
        # row by row, each from its largest budget down: every predecessor comes first
        for index in sorted(range(len(pairs)), key=lambda i: (i // len(budgets),
                                                               -pairs[i][1])):
            done(index, evaluate_candidate(server, objective, *pairs[index], tolerance,
                                           rate_hint(candidates, predecessors, index,
                                                     pairs[index][0])))
    return summarize_search(objective, candidates)


def _search_in_workers(pairs: list[tuple[int, int]], predecessors: list[int | None],
                       arguments: tuple, workers: int, done: Callable[[int, Candidate], None],
                       candidates: list[Candidate | None]) -> None:
    """Candidates handed to `workers` processes one at a time as they are ready (their
    predecessor done): the rows' roots first (each root waits for the previous one, and a
    row for its root), then the smallest max batch's (the slowest rows: low rates, many
    steps), so that no worker is left with a long row at the end."""
    import heapq
    import multiprocessing
    import threading
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        # forked once the server's tables are built: workers start with them and
        # import nothing (forking is safe with no other thread running)
        _start_worker(*arguments)
        context, initializer, arguments = multiprocessing.get_context("fork"), None, ()
    else:
        context = multiprocessing.get_context(
            "forkserver" if "forkserver" in methods else "spawn")
        initializer = _start_worker
    successors: dict[int | None, list[int]] = {}
    for index, predecessor in enumerate(predecessors):
        successors.setdefault(predecessor, []).append(index)
    def ready_for(index: int) -> tuple[bool, int]:  # the heap's order
        before = predecessors[index]
        return before is not None and pairs[before][0] == pairs[index][0], index

    ready = [ready_for(index) for index in successors.get(None, [])]
    with ProcessPoolExecutor(max_workers=workers, mp_context=context,
                             initializer=initializer, initargs=arguments) as pool:
        running: dict = {}
        try:
            while ready or running:
                while ready and len(running) < workers:
                    _, index = heapq.heappop(ready)
                    hint = rate_hint(candidates, predecessors, index, pairs[index][0])
                    running[pool.submit(_candidate_in_worker, pairs[index], hint)] = index
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    index = running.pop(future)
                    done(index, future.result())
                    for after in successors.get(index, []):
                        heapq.heappush(ready, ready_for(after))
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    _forget_worker()


def search_predecessors(batches: Sequence[int], budgets: Sequence[int]) -> list[int | None]:
    """For each candidate of a batches x budgets search (in its order), the one whose answer
    its rate search starts from: the same max batch's next larger budget (a budget moves
    the sustained share of the capacity by a grid step or two, a max batch by ten or more);
    for a max batch's largest budget (its row's root), the previous max batch's root (a
    lower bound); None for the first two roots, searched from the capacity (two workers
    start at once; the two smallest max batches' shares are the furthest apart, so a hint
    there saves nothing)."""
    by_size = sorted(range(len(budgets)), key=lambda j: budgets[j])
    larger = {j: k for j, k in zip(by_size, by_size[1:], strict=False)}
    root = by_size[-1]
    return [i * len(budgets) + larger[j] if j in larger
            else None if i < 2 else (i - 1) * len(budgets) + root
            for i in range(len(batches)) for j in range(len(budgets))]


def rate_hint(candidates: Sequence[Candidate | None], predecessors: Sequence[int | None],
              index: int, batch: int) -> RateHint | None:
    """From the nearest sustained candidate among `index`'s predecessors (each done), for
    `evaluate_candidate`'s `hint` of a candidate of max batch `batch`; None if none."""
    before = predecessors[index]
    while before is not None:
        candidate = candidates[before]
        if candidate.rate is not None:
            return RateHint(candidate.rate / candidate.capacity_rate,
                            below=candidate.max_batch < batch)
        before = predecessors[before]
    return None


_WORKER: tuple[Server, Objective, float] | None = None  # a worker process's search


def _start_worker(problem: Problem, objective: Objective, max_batch: int,
                  tolerance: float) -> None:
    global _WORKER
    _WORKER = (Server(problem, max_batch), objective, tolerance)


def _forget_worker() -> None:
    global _WORKER
    _WORKER = None  # the parent's copy, once its forked workers are done


def _candidate_in_worker(pair: tuple[int, int], hint: RateHint | None) -> Candidate:
    server, objective, tolerance = _WORKER
    return evaluate_candidate(server, objective, *pair, tolerance, hint)


def summarize_search(objective: Objective, candidates: list[Candidate]) -> Result:
    sustained = [c for c in candidates if c.status == "sustained"]
    best = min(sustained, key=_rank) if sustained else None
    return Result(objective=objective, candidates=candidates, best=best,
                  pareto=pareto_frontier(candidates))


def _candidates(values: Sequence[int], what: str) -> list[int]:
    values = list(dict.fromkeys(int(v) for v in values))
    if not values:
        raise SpecError(f"give at least one {what}")
    if min(values) < 1:
        raise SpecError(f"a {what} must be >= 1, got {min(values)}")
    return values

