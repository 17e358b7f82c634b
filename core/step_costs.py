"""Step times of any batch composition for the serving simulator (`core.scheduler`), equal
to the core step model's (`core.step.evaluate_step`) to the bit, from a handful of
evaluate_step calls: see `StepCosts`."""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import numpy as np

from rooftui.core.assumptions import Assumptions
from rooftui.core.efficiency import Efficiency, has_host_floor
from rooftui.core.errors import SpecError
from rooftui.core.step import LINK_PARTS, PARTS, StepInputs, evaluate_step, part_timing


def _quadratic(values: list[float]) -> tuple[float, ...]:
    """Coefficients (f00, a, b, d, e, g) of f(u, v) = f00 + a u + b v + d u^2 + e u v + g v^2
    from its values at (0,0), (1,0), (2,0), (0,1), (1,1), (0,2): exact finite differences."""
    f00, f10, f20, f01, f11, f02 = values
    d = (f20 - 2.0 * f10 + f00) / 2.0
    g = (f02 - 2.0 * f01 + f00) / 2.0
    e = f11 - f10 - f01 + f00
    return f00, f10 - f00 - d, f01 - f00 - g, d, e, g


_STENCIL = ((0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (0, 2))


def _poly(coefficients, u, v):
    f00, a, b, d, e, g = coefficients
    return f00 + a * u + b * v + d * u * u + e * u * v + g * v * v


# decode steps remembered by StepCosts.decode_time (about 100 bytes each), keyed by one
# integer: summed min(context, window), summed context and batch in base DECODE_KEY_SPAN
DECODE_TIMES_KEPT = 1 << 19
DECODE_KEY_SPAN = 1 << 40


class StepCosts:
    """Step times of any batch composition, equal to the core step model's.

    Built from a handful of `evaluate_step` calls on arrays, using three facts about the
    core's parts (each checked against evaluate_step when the object is built, so a core
    change that breaks one fails loudly instead of drifting):

    1. a decode group of B sequences costs, per part, a function of B (tabulated for
       B = 0..max_batch at context 0) plus, per sequence, a term linear in its context S
       below the sliding window w and linear with another slope above it; so the group
       needs only B, the summed context and the summed min(S, w);
    2. a prefill chunk of n tokens after c cached costs a quadratic in (n, c) on each of
       the three window regimes (c + n <= w; c < w < c + n; c >= w), fitted exactly
       from six evaluations per regime;
    3. parts add over the decode group and the chunks, except the GEMM's weight bytes,
       which are read once per step: they are evaluated at the step's total tokens.

    FLOPs and bytes of real steps are integers (or halves) far below 2^53, so these sums
    are exact in float64 and the times are the core's to the last bit: each part is timed
    as the core times it (max(F / compute rate, bytes / memory rate); the interconnect
    parts at bytes / link rate), then the part times are summed (overlap "parts"), or the
    roofline is taken over the summed FLOPs and bytes and the link times (overlap "full").
    Speculative decoding (several tokens per sequence and step) is refused.
    """

    def __init__(self, inputs: StepInputs, assumptions: Assumptions, max_batch: int) -> None:
        self.inputs = inputs
        self.assumptions = assumptions
        self.max_batch = int(max_batch)
        if np.any(np.asarray(inputs.spec_tokens) != 0):
            raise SpecError("the simulator runs one token per sequence and decode step; "
                            "speculative decoding (--spec-tokens) is not simulated")
        self.compute_rate = float(inputs.mfu * inputs.peak_flops)
        self.memory_rate = float(inputs.mbu * inputs.bandwidth)
        self.link_rate = float(np.asarray(inputs.interconnect))
        self.overlap_parts = assumptions.overlap == "parts"
        window = float(np.asarray(inputs.model.window))
        self.window = window if math.isfinite(window) and np.asarray(
            inputs.model.windowed_layers) > 0 else math.inf
        if self.window < 3:
            raise SpecError(f"the simulator needs a sliding window of at least 3 tokens, "
                            f"got {self.window:g}")

        decode = self._evaluate(batch=np.arange(self.max_batch + 1.0))
        self.parts = tuple(p for p in PARTS if f"{p}_flops" in decode)
        self.gemm = self.parts.index("gemm")
        # parts timed at the interconnect (tensor-parallel all-reduces), not on a roofline
        self.links = tuple(p in LINK_PARTS for p in self.parts)
        self.decode_flops = [decode[f"{p}_flops"].tolist() for p in self.parts]
        self.decode_bytes = [decode[f"{p}_bytes"].tolist() for p in self.parts]
        self._decode_flops_array = np.array(self.decode_flops)
        self._decode_bytes_array = np.array(self.decode_bytes)
        self._fit_context_slopes()
        self._fit_chunks()
        self._fit_weight_bytes()
        self._time_parts()
        # KV capacity per GPU: the memory the weights and the reserve leave, over one
        # more cached token's bytes on this GPU (every layer, as a paged cache holds it)
        memory = self._evaluate(batch=1.0, context=np.array([0.0, 1.0]))
        self.kv_bytes_per_token = float(memory["kv_bytes"][1] - memory["kv_bytes"][0])
        self.weight_resident_bytes = float(memory["weight_bytes"][0])
        free = float(inputs.memory - inputs.memory_reserve) - self.weight_resident_bytes
        self.kv_capacity_tokens = max(0, math.floor(free / self.kv_bytes_per_token))
        self._check_against_core()

    # --- building -------------------------------------------------------------------
    def _evaluate(self, batch=0.0, context=0.0, prefill=0.0, prefill_context=0.0):
        f64 = np.float64
        probe = replace(self.inputs, batch=np.asarray(batch, f64),
                        context=np.asarray(context, f64), prefill=np.asarray(prefill, f64),
                        prefill_context=np.asarray(prefill_context, f64))
        shape = np.broadcast_shapes(*(np.shape(x) for x in (batch, context, prefill,
                                                            prefill_context)))
        # a metric that does not depend on a probed input comes back unbroadcast
        return {key: np.broadcast_to(value, shape)
                for key, value in evaluate_step(probe, self.assumptions).items()}

    def _fit_context_slopes(self) -> None:
        """Per-sequence context terms: slope below the window and above it."""
        w = self.window
        anchors = [0.0, 1.0, 2.0] + ([w, w + 1, w + 2] if math.isfinite(w) else [])
        one = self._evaluate(batch=1.0, context=np.array(anchors))
        self.below_flops, self.above_flops, self.below_bytes, self.above_bytes = [], [], [], []
        for p in self.parts:
            for kind, below, above in (("flops", self.below_flops, self.above_flops),
                                       ("bytes", self.below_bytes, self.above_bytes)):
                value = one[f"{p}_{kind}"].tolist()
                below.append(value[1] - value[0])
                above.append(value[4] - value[3] if math.isfinite(w) else value[1] - value[0])

    def _regimes(self) -> list[tuple[float, float]]:
        """Stencil origins (n0, c0) inside each window regime."""
        w = self.window
        if not math.isfinite(w):
            return [(1.0, 0.0)]
        return [(1.0, 0.0), (4.0, w - 3.0), (1.0, w)]

    def _fit_chunks(self) -> None:
        origins = self._regimes()
        n = np.array([n0 + du for n0, _ in origins for du, _ in _STENCIL])
        c = np.array([c0 + dv for _, c0 in origins for _, dv in _STENCIL])
        chunk = self._evaluate(prefill=n, prefill_context=c)
        self.chunk_regimes = []
        for r, (n0, c0) in enumerate(origins):
            rows = slice(6 * r, 6 * r + 6)
            flops = [_quadratic(chunk[f"{p}_flops"][rows].tolist()) for p in self.parts]
            nbytes = [_quadratic(chunk[f"{p}_bytes"][rows].tolist()) for p in self.parts]
            self.chunk_regimes.append((n0, c0, flops, nbytes))
        self._chunk_origins = [(n0, c0) for n0, c0, _, _ in self.chunk_regimes]

    def _time_parts(self) -> None:
        """What the profile's efficiency adds to the parts' FLOPs and bytes (its fixed
        times, fractions of the peaks and host floor), and what `time` reads per part."""
        # a calibrated profile's efficiencies and overheads (None and 0 when ideal), and
        # per part the bulk all-reduce protocol's timing where it has two (else None)
        timing = part_timing(self.inputs, self.assumptions)
        self.timing = None if timing is None else tuple(timing[0][p] for p in self.parts)
        self.fixed_s = 0.0 if timing is None else timing[1]
        self.bulk = ((None,) * len(self.parts) if self.timing is None
                     else tuple(t.bulk for t in self.timing))
        # whether a prompt chunk pays fixed times (the prompt's per-query-head ones)
        self.prompts_pay = self.timing is not None and any(
            t.bytes_per_prompt for t in self.timing)
        # an overlapping scheduler's host time per step and per sequence: the least a
        # step takes (`efficiency.host_time`)
        efficiency = self.assumptions.step_efficiency
        self.host = has_host_floor(efficiency)
        self.host_step_s = efficiency.host_step_s
        self.host_sequence_s = efficiency.host_sequence_s
        # per part: its decode tables and slopes, link or not, bulk protocol, and each
        # chunk regime's quadratics
        self._terms = tuple(
            (*terms, [flops[p] for _, _, flops, _ in self.chunk_regimes],
             [nbytes[p] for _, _, _, nbytes in self.chunk_regimes])
            for p, terms in enumerate(zip(
                self.decode_flops, self.below_flops, self.above_flops, self.decode_bytes,
                self.below_bytes, self.above_bytes, self.links, self.bulk, strict=True)))
        # decode steps remembered at this timing (`remember_decode_times`)
        self._decode_times: dict[int, float] = {}
        self.remembers_decode_times = False

    def with_efficiency(self, efficiency: Efficiency) -> StepCosts:
        """These costs under another efficiency (fixed times, fractions of the peaks, host
        floor; `Assumptions.efficiency`): the FLOPs and bytes of every step shape are the
        same, so only the timing is redone (and checked against the core again), not the
        tables. A fit's replays (one configuration at many overheads) share them."""
        if efficiency == self.assumptions.efficiency:
            return self
        costs = copy.copy(self)
        costs.assumptions = replace(self.assumptions, efficiency=efficiency)
        costs._time_parts()
        costs._check_against_core()
        return costs

    def _fit_weight_bytes(self) -> None:
        """GEMM bytes as a function of the step's tokens: constant for dense models."""
        tokens = np.array([1.0, 2.0, 3.0, 64.0, 4096.0, 2.0 ** 20])
        read = self._evaluate(batch=tokens)["gemm_bytes"].tolist()
        self._constant_weight_bytes = read[0] if len(set(read)) == 1 else None
        self._weight_bytes_memo: dict[int, float] = {}

    def remember_decode_times(self) -> None:
        """From now on the simulator times decode-only steps through `decode_time`: worth
        it for many simulations sharing these costs (a rate search), a loss for one."""
        self.remembers_decode_times = True

    def decode_time(self, batch: int, sum_context: int, sum_window_context: int) -> float:
        """`time` of `batch` decodes alone, remembered: a rate search sees the same decode
        steps again and again (a sequence decoding alone, at every rate and candidate
        sharing these costs). Whole-number sums only (the simulator's; the windowed one
        may come as a float)."""
        key = (int(sum_window_context) * DECODE_KEY_SPAN + sum_context) * DECODE_KEY_SPAN \
            + batch
        duration = self._decode_times.get(key)
        if duration is None:
            if len(self._decode_times) >= DECODE_TIMES_KEPT:
                self._decode_times.clear()
            duration = self._decode_times[key] = self.time(batch, sum_context,
                                                           sum_window_context)
        return duration

    def weight_bytes(self, tokens: int) -> float:
        """Bytes of weights the step's GEMMs read (once per step)."""
        if self._constant_weight_bytes is not None:
            return self._constant_weight_bytes if tokens > 0 else 0.0
        if tokens not in self._weight_bytes_memo:  # e.g. MoE: experts touched grow with T
            value = self._evaluate(batch=float(tokens))["gemm_bytes"]
            self._weight_bytes_memo[tokens] = float(np.asarray(value))
        return self._weight_bytes_memo[tokens]

    def _check_against_core(self) -> None:
        """Every shape of step the core can express, compared with evaluate_step."""
        w = self.window
        contexts = [1.0, 300.0, 5000.0] + ([w - 1, w, w + 1, 3 * w] if math.isfinite(w) else [])
        chunks = [(1.0, 0.0), (512.0, 0.0), (37.0, 1000.0), (3000.0, 2500.0)]
        if math.isfinite(w):
            chunks += [(2.0, w - 2), (10.0, w - 3), (w + 5, 7.0), (5.0, w), (100.0, 2 * w)]
        batches = sorted({1, min(7, self.max_batch), self.max_batch})
        probes = [(b, s, 0.0, 0.0) for b in batches for s in contexts]
        probes += [(0, 0.0, n, c) for n, c in chunks]
        probes += [(b, s, n, c) for b in batches for s in contexts[:2] for n, c in chunks[-3:]]
        columns = (np.array(column, dtype=np.float64) for column in zip(*probes, strict=True))
        core = self._evaluate(*columns)
        expected = core["step_time_s"].tolist()
        for (b, s, n, c), want in zip(probes, expected, strict=True):
            got = self.time(int(b), b * s, b * min(s, w), [(n, c)] if n else ())
            if not math.isclose(got, want, rel_tol=1e-12, abs_tol=0.0):
                raise RuntimeError(
                    f"scheduler step costing no longer reproduces evaluate_step at batch {b}, "
                    f"context {s:g}, prefill {n:g} after {c:g}: {got!r} s vs {want!r} s; the "
                    "step model's shape changed (see StepCosts in core/step_costs.py)")

    # --- costing --------------------------------------------------------------------
    def time(self, batch: int, sum_context: float, sum_window_context: float,
             chunks=()) -> float:
        """Seconds for `batch` decodes with these summed contexts (sum of S_i and of
        min(S_i, window)) plus prefill `chunks` [(tokens, cached), ...]. The simulator's
        inner loop: plain floats, no numpy, each sum in the order the checks above pinned
        (the parts' FLOPs and bytes over the chunks in the chunks' order)."""
        tokens = batch
        shapes = []  # per chunk: its window regime and the quadratic's monomials
        for n, c in chunks:
            tokens += n
            regime = 0 if c + n <= self.window else 1 if c < self.window else 2
            n0, c0 = self._chunk_origins[regime]
            u, v = n - n0, c - c0
            shapes.append((regime, u, v, u * u, u * v, v * v))
        weights = self._constant_weight_bytes
        if weights is None:
            weights = self.weight_bytes(int(tokens))
        elif not tokens:
            weights = 0.0
        beyond = sum_context - sum_window_context
        prompts = len(chunks) if self.prompts_pay else 0  # chunks paying fixed times
        compute, memory, link = self.compute_rate, self.memory_rate, self.link_rate
        timing, gemm = self.timing, self.gemm
        total = total_flops = total_bytes = link_time = 0.0
        for i, (flop_table, flop_below, flop_above, byte_table, byte_below, byte_above,
                on_link, bulk, flop_terms, byte_terms) in enumerate(self._terms):
            flops = flop_table[batch] + flop_below * sum_window_context + flop_above * beyond
            if i == gemm:  # the weights: read once for the whole step
                nbytes = weights
            else:
                nbytes = byte_table[batch] + byte_below * sum_window_context + byte_above * beyond
            if shapes:
                chunk_flops = chunk_bytes = 0.0
                for regime, u, v, uu, uv, vv in shapes:
                    f00, a, b, d, e, g = flop_terms[regime]
                    chunk_flops += f00 + a * u + b * v + d * uu + e * uv + g * vv
                    if i != gemm:
                        f00, a, b, d, e, g = byte_terms[regime]
                        chunk_bytes += f00 + a * u + b * v + d * uu + e * uv + g * vv
                flops += chunk_flops
                if i != gemm:
                    nbytes += chunk_bytes
            if timing is not None:  # the work only time pays, over the part's fractions
                t = timing[i]
                sequences = batch + len(chunks)
                flops = (flops + t.flops_per_step + t.flops_per_query * tokens) / t.compute
                if bulk is not None:  # the bulk all-reduce protocol's bytes
                    bulk_bytes = bulk.timed_bytes(nbytes, sequences, batch)
                if prompts:  # each chunk pays them once (in `timed_bytes`' order)
                    nbytes += t.bytes_per_prompt * prompts
                nbytes = (nbytes + t.bytes_per_sequence * sequences + t.bytes_per_decode * batch
                          + t.bytes_per_step) / t.memory
            if on_link:
                part_time = nbytes / link if nbytes > 0 else 0.0
                if bulk is not None and bulk_bytes / link < part_time:  # the faster one
                    part_time = bulk_bytes / link
                if part_time > link_time:
                    link_time = part_time
            else:
                part_time = flops / compute
                if nbytes / memory > part_time:
                    part_time = nbytes / memory
                total_flops += flops
                total_bytes += nbytes
            total += part_time
        fixed = self.fixed_s if tokens > 0 else 0.0
        if self.overlap_parts:
            step = total + fixed
        else:
            step = max(total_flops / compute, total_bytes / memory, link_time) + fixed
        if self.host and tokens > 0:
            host = self.host_step_s + (batch + len(chunks)) * self.host_sequence_s
            if host > step:
                return host
        return step

    def chunk_arrays(self, tokens: np.ndarray, cached: np.ndarray):
        """`chunk` for arrays of chunks: per-part FLOPs and bytes arrays."""
        tokens, cached = np.asarray(tokens, np.float64), np.asarray(cached, np.float64)
        w = self.window
        regime = np.where(cached + tokens <= w, 0, np.where(cached < w, 1, 2))
        flops = [np.zeros(tokens.shape) for _ in self.parts]
        nbytes = [np.zeros(tokens.shape) for _ in self.parts]
        for r, (n0, c0, flop_terms, byte_terms) in enumerate(self.chunk_regimes):
            here = regime == r
            if not here.any():
                continue
            u, v = tokens[here] - n0, cached[here] - c0
            for i in range(len(self.parts)):
                flops[i][here] = _poly(flop_terms[i], u, v)
                nbytes[i][here] = _poly(byte_terms[i], u, v)
        return flops, nbytes

    def decode_arrays(self, batch: np.ndarray, sum_context: np.ndarray,
                      sum_window_context: np.ndarray):
        """Per-part FLOPs and bytes arrays of decode groups (the arrays form of `time`'s
        first lines)."""
        batch = np.asarray(batch, dtype=np.int64)
        flops = [self._decode_flops_array[i][batch] + self.below_flops[i] * sum_window_context
                 for i in range(len(self.parts))]
        nbytes = [self._decode_bytes_array[i][batch] + self.below_bytes[i] * sum_window_context
                  for i in range(len(self.parts))]
        if math.isfinite(self.window):  # else the context beyond it is 0: adding 0 is exact
            beyond = sum_context - sum_window_context
            flops = [f + above * beyond for f, above in zip(flops, self.above_flops, strict=True)]
            nbytes = [b + above * beyond for b, above in zip(nbytes, self.above_bytes,
                                                             strict=True)]
        return flops, nbytes

    def decode_times(self, batch: int, sum_context: np.ndarray,
                     sum_window_context: np.ndarray) -> np.ndarray:
        """`time(batch, s, w)` for arrays of summed contexts s and w at one batch, to the
        bit: the same operations in the same order, element by element (a stretch of
        decode-only steps)."""
        return self.times(*self.decode_arrays(batch, sum_context, sum_window_context), batch)

    def step_times(self, batch: np.ndarray, sum_context: np.ndarray,
                   sum_window_context: np.ndarray, chunk_step: np.ndarray,
                   chunk_tokens: np.ndarray, chunk_cached: np.ndarray) -> np.ndarray:
        """`time` of many steps at once, to the bit: step k runs batch[k] decodes with
        these summed contexts plus the chunks whose chunk_step is k (in their order; a
        step's chunks consecutive). Each chunk's quadratic is `time`'s, term for term, and
        a step's chunks are summed one rank at a time, as `time` sums them."""
        batch = np.asarray(batch, np.int64)
        flops, nbytes = self.decode_arrays(batch, sum_context, sum_window_context)
        tokens, sequences = batch.copy(), batch.copy()
        if chunk_step.size:
            n, c = chunk_tokens.astype(np.float64), chunk_cached.astype(np.float64)
            regime = np.where(c + n <= self.window, 0, np.where(c < self.window, 1, 2))
            origins = np.array(self._chunk_origins)
            u, v = n - origins[regime, 0], c - origins[regime, 1]
            monomials = (u, v, u * u, u * v, v * v)
            starts = np.flatnonzero(np.diff(chunk_step, prepend=-1))  # each step's first chunk
            rank = np.arange(chunk_step.size) - np.repeat(starts, np.diff(starts,
                                                                            append=chunk_step.size))
            ranks = [np.flatnonzero(rank == r) for r in range(int(rank.max()) + 1)]
            for i, terms in enumerate(self._terms):
                for kind, totals in ((terms[-2], flops), (terms[-1], nbytes)):
                    if totals is nbytes and i == self.gemm:
                        continue  # the weights: read once per step (`times`)
                    f00, *slopes = np.array(kind)[regime].T
                    value = f00
                    for slope, monomial in zip(slopes, monomials, strict=True):
                        value = value + slope * monomial
                    summed = np.zeros(batch.shape)
                    for chunks in ranks:
                        summed[chunk_step[chunks]] += value[chunks]
                    totals[i] = totals[i] + summed
            np.add.at(tokens, chunk_step, chunk_tokens)
            np.add.at(sequences, chunk_step, 1)
        return self.times(flops, nbytes, tokens, sequences, batch)

    def times(self, flops: list[np.ndarray], nbytes: list[np.ndarray],
              tokens: np.ndarray, sequences: np.ndarray | None = None,
              decodes: np.ndarray | None = None) -> np.ndarray:
        """Step times from per-part FLOPs and bytes arrays and each step's total tokens
        (which set the weight bytes), sequences (decodes plus prompts; None: as many as
        tokens, a decode step) and decodes (None: every sequence)."""
        tokens = np.asarray(tokens, dtype=np.int64)
        sequences = tokens if sequences is None else np.asarray(sequences)
        decodes = sequences if decodes is None else np.asarray(decodes)
        nbytes = list(nbytes)
        if tokens.ndim == 0:  # one count for every step (a decode stretch)
            nbytes[self.gemm] = self.weight_bytes(int(tokens))
        elif self._constant_weight_bytes is None:
            nbytes[self.gemm] = np.array([self.weight_bytes(int(t)) for t in tokens.flat])
        else:
            nbytes[self.gemm] = np.where(tokens > 0, self._constant_weight_bytes, 0.0)
        bulk_bytes = self.bulk
        if self.timing is not None:
            flops = [(f + t.flops_per_step + t.flops_per_query * tokens) / t.compute
                     for f, t in zip(flops, self.timing, strict=True)]
            bulk_bytes = [None if bulk is None else bulk.timed_bytes(b, sequences, decodes)
                          for b, bulk in zip(nbytes, self.bulk, strict=True)]
            nbytes = [t.timed_bytes(b, sequences, decodes)
                      for b, t in zip(nbytes, self.timing, strict=True)]
        steps = self._roofline_times(flops, nbytes, bulk_bytes) + self.fixed_s
        if self.host:
            steps = np.maximum(steps, self.host_step_s + sequences * self.host_sequence_s)
        if tokens.ndim == 0 and tokens > 0:
            return steps
        return np.where(tokens > 0, steps, 0.0)

    def _roofline_times(self, flops: list[np.ndarray], nbytes: list[np.ndarray],
                        bulk_bytes: list[np.ndarray | None]) -> np.ndarray:
        """Per-part rooflines, summed (overlap "parts") or over the sums ("full"); a link
        part with `bulk_bytes` (its bulk all-reduce protocol's) takes the faster time."""
        with np.errstate(divide="ignore", invalid="ignore"):
            part_times = [np.where(b > 0, b / self.link_rate, 0.0) if on_link
                          else np.maximum(f / self.compute_rate, b / self.memory_rate)
                          for f, b, on_link in zip(flops, nbytes, self.links, strict=True)]
            part_times = [time if bulk is None else np.minimum(time, bulk / self.link_rate)
                          for time, bulk in zip(part_times, bulk_bytes, strict=True)]
        if self.overlap_parts:
            return sum(part_times)
        roofline = sum(f for f, on_link in zip(flops, self.links, strict=True) if not on_link)
        step = np.maximum(roofline / self.compute_rate, sum(
            b for b, on_link in zip(nbytes, self.links, strict=True) if not on_link)
            / self.memory_rate)
        for part_time, on_link in zip(part_times, self.links, strict=True):
            if on_link:
                step = np.maximum(step, part_time)
        return step
