"""A step part's FLOPs and bytes as linear functions of the decode batch (`Linear`), the
helpers core/step.py and core/parallel.py build parts with, and the parts' times."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rooftui.core.elementwise import maximum, where
from rooftui.core.step_trace import Symbol

PARTS = ("gemm", "attention", "activations", "communication", "all_to_all",
         "pipeline_transfer", "draft_gemm", "draft_attention", "draft_activations",
         "draft_communication")
# timed on a link: the interconnect, or (core/parallel.py) the link each one crosses
LINK_PARTS = ("communication", "all_to_all", "pipeline_transfer", "draft_communication")


def is_scalar(value, number: float) -> bool:
    """True when `value` is the plain number `number` for the whole grid (a feature
    switched off, no prefill), so the arithmetic it would cancel can be skipped. A traced
    per-call number (`core.step_trace`) is never assumed to be one."""
    if type(value) is Symbol:
        return False
    return (type(value) is not np.ndarray or value.ndim == 0) and float(value) == number


def plus(*terms):
    """Sum of the terms that are not None (None when all are)."""
    present = [term for term in terms if term is not None]
    return sum(present[1:], start=present[0]) if present else None


def times_batch(per_sequence, batch):
    return None if per_sequence is None else per_sequence * batch


@dataclass(frozen=True)
class Linear:
    """A part's FLOPs and bytes (per GPU) at B decode sequences: fixed + per_sequence * B
    (None: no such term), plus `weights` bytes read once if the step has any token and
    the routed experts' bytes, `experts` * (1 - miss^T), for the T = queries * B + prefill
    tokens routed (miss = 1 - k/E, kept as its logarithm: exp(T ln miss) is several times
    cheaper than a power over a whole grid), and `flops_sqrt` * sqrt(T) + `flops_skew`
    FLOPs once T > 0 (the busiest expert-parallel GPU's excess, core/parallel.py)."""

    flops_fixed: Any = None
    flops_per_sequence: Any = None
    bytes_fixed: Any = None
    bytes_per_sequence: Any = None
    weights: Any = None
    experts: Any = None
    log_miss: Any = 0.0
    queries: Any = 1.0
    prefill: Any = 0.0
    flops_sqrt: Any = None
    flops_skew: Any = None

    def tokens(self, batch):
        routed = batch if is_scalar(self.queries, 1) else self.queries * batch
        return routed if is_scalar(self.prefill, 0) else routed + self.prefill

    def missed(self, tokens):
        """miss^tokens: the chance that `tokens` tokens all miss a given routed expert."""
        return np.exp(tokens * self.log_miss)

    def at(self, batch, rates: bool = False):
        """FLOPs and bytes at `batch`; with `rates`, also their derivatives in B (B >= 1)."""
        flops = plus(self.flops_fixed, times_batch(self.flops_per_sequence, batch))
        nbytes = plus(self.bytes_fixed, times_batch(self.bytes_per_sequence, batch))
        expert_growth = sqrt_growth = 0.0
        if self.flops_sqrt is not None:
            root = np.sqrt(self.tokens(batch))
            flops = flops + self.flops_sqrt * root + self.flops_skew * (root > 0)
            if rates:  # d/dB of sqrt(q B + prefill)
                with np.errstate(divide="ignore", invalid="ignore"):
                    sqrt_growth = where(root > 0, 0.5 * self.flops_sqrt * self.queries
                                           / root, 0.0)
        if self.weights is not None:
            tokens = self.tokens(batch)
            nbytes = plus(nbytes, self.weights * (tokens > 0))
            if self.experts is not None:
                missed = self.missed(tokens)
                nbytes = nbytes + self.experts * (1.0 - missed)
                if rates:  # d/dB of 1 - miss^(q B + prefill)
                    expert_growth = -self.experts * self.log_miss * self.queries * missed
        if not rates:  # flops None: a part without FLOPs (activations, links)
            return flops, nbytes
        flops_rate = sqrt_growth + (0.0 if self.flops_per_sequence is None
                                    else self.flops_per_sequence)
        bytes_rate = 0.0 if self.bytes_per_sequence is None else self.bytes_per_sequence
        return flops, nbytes, flops_rate, bytes_rate + expert_growth

    def times(self, factor) -> Linear:
        """k of these (a draft's k steps)."""
        def scaled(value):
            return None if value is None else factor * value
        return replace(self, flops_fixed=scaled(self.flops_fixed),
                       flops_per_sequence=scaled(self.flops_per_sequence),
                       bytes_fixed=scaled(self.bytes_fixed),
                       bytes_per_sequence=scaled(self.bytes_per_sequence),
                       weights=scaled(self.weights), experts=scaled(self.experts),
                       flops_sqrt=scaled(self.flops_sqrt), flops_skew=scaled(self.flops_skew))


def scaled(part: Linear, extra: Linear | None, compute, memory) -> Linear:
    """`part` plus `extra` work, its FLOPs divided by `compute` and its bytes by `memory`."""
    def divided(value, by):
        return None if value is None else value / by

    extra = extra or Linear()
    return replace(
        part,
        flops_fixed=divided(plus(part.flops_fixed, extra.flops_fixed), compute),
        flops_per_sequence=divided(plus(part.flops_per_sequence, extra.flops_per_sequence),
                                   compute),
        bytes_fixed=divided(plus(part.bytes_fixed, extra.bytes_fixed), memory),
        bytes_per_sequence=divided(plus(part.bytes_per_sequence, extra.bytes_per_sequence),
                                   memory),
        weights=divided(part.weights, memory), experts=divided(part.experts, memory),
        flops_sqrt=divided(part.flops_sqrt, compute), flops_skew=divided(part.flops_skew, compute))


def part_times(costs, compute_rate, memory_rate, links, compute_bound=None):
    """Each part's time from its (FLOPs, bytes) in `costs` (`links`: per link part its
    (bandwidth, latency or None)); with a dict `compute_bound`, also whether its FLOPs
    take longer than its bytes (the comparison the time makes anyway)."""
    times = {}
    for name, (flops, nbytes) in costs.items():
        if name in LINK_PARTS:  # no link traffic takes no time, even with no interconnect
            rate, latency = links[name]
            seconds = nbytes / rate if latency is None else nbytes / rate + latency
            times[name] = where(nbytes > 0, seconds, 0.0)
        elif flops is None:
            times[name] = nbytes / memory_rate
        else:
            compute, memory = flops / compute_rate, nbytes / memory_rate
            times[name] = maximum(compute, memory)
            if compute_bound is not None:
                compute_bound[name] = compute > memory
    return times
