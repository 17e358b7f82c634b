"""Largest decode batch whose time per output token fits a budget (`max_batch_for_tpot`
of core/step.py), solved for whole grids at once.

Every part's FLOPs and bytes are linear in the batch B for B >= 1 but for the routed
experts' bytes (concave in B) and the busiest expert-parallel GPU's sqrt(T) FLOPs: each
part time is a max of lines, the step time the max (or sum) of those, so t(B) <= budget
is a set of linear inequalities solved exactly; the concave terms are settled by Newton
steps from the linear answer, and an all-reduce timed by the faster of two protocols
takes the larger of each protocol's answers (`max_batch_for_budget`)."""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from rooftui.core.elementwise import all_true, any_true, floor, maximum, minimum, where
from rooftui.core.step_parts import LINK_PARTS, Linear, part_times, plus


def _branches(parts, compute_rate, memory_rate, links):
    """Per part, the (intercept, slope) of each time its time is the max of, for B >= 1
    (weights read; every routed expert read)."""
    def zero_if_none(value):
        return 0.0 if value is None else value

    out = []
    for name, part in parts.items():
        memory_like, latency = links[name] if name in LINK_PARTS else (memory_rate, None)
        fixed_bytes = (zero_if_none(part.bytes_fixed) + zero_if_none(part.weights)
                       + zero_if_none(part.experts))
        memory = (fixed_bytes / memory_like,
                  zero_if_none(part.bytes_per_sequence) / memory_like)
        if name in LINK_PARTS:
            out.append((memory,) if latency is None else ((memory[0] + latency, memory[1]),))
            continue
        compute = (zero_if_none(part.flops_fixed) / compute_rate,
                   zero_if_none(part.flops_per_sequence) / compute_rate)
        if part.flops_sqrt is not None:  # sqrt(T) under its tangent at B = 1
            tangent = _sqrt_tangent(part)
            compute = (compute[0] + (part.flops_sqrt * tangent[0] + part.flops_skew)
                       / compute_rate, compute[1] + part.flops_sqrt * tangent[1] / compute_rate)
        out.append((compute, memory))
    return out


def _sqrt_tangent(part: Linear):
    """(intercept, slope) in B of the tangent to sqrt(q B + prefill) at B = 1: a line at
    or above it for every B (the root is concave)."""
    at_one = np.sqrt(part.tokens(1.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = where(at_one > 0, 0.5 * part.queries / at_one, 0.0)
    return at_one - slope, slope


def _concave_slack(parts, trial, compute_rate, links, memory_rate):
    """Time the lines of `_branches` overstate at B = `trial`: the routed experts left
    unread and the busiest GPU's sqrt(T) FLOPs under their tangent."""
    slack = 0.0
    for name, part in parts.items():
        if part.experts is not None:
            slack = slack + (part.experts / (links[name][0] if name in LINK_PARTS else memory_rate)
                             * part.missed(part.tokens(trial)))
        if part.flops_sqrt is not None:
            intercept, slope = _sqrt_tangent(part)
            slack = slack + part.flops_sqrt / compute_rate * (
                intercept + slope * trial - np.sqrt(part.tokens(trial)))
    return slack


def _dominant(branches):
    """The branches a part's time can take for B >= 1: one line alone where it is the
    larger at B = 1 and grows no slower everywhere in the grid (e.g. decode attention,
    memory-bound at any batch), which saves the solver every combination with the other."""
    (compute_at_zero, compute_slope), (memory_at_zero, memory_slope) = branches
    compute_at_one, memory_at_one = compute_at_zero + compute_slope, memory_at_zero + memory_slope
    if all_true((memory_at_one >= compute_at_one) & (memory_slope >= compute_slope)):
        return branches[1:]
    if all_true((compute_at_one >= memory_at_one) & (compute_slope >= memory_slope)):
        return branches[:1]
    return branches


def max_batch_for_budget(shape, assumptions, compute_rate, memory_rate, links, budget):
    """Largest B >= 1 whose step time fits `budget` (0 if none), memory aside.

    An all-reduce part with two protocols (`shape.bulk_parts`) takes the faster one's
    time: the step time is then the least of the step times under each choice of
    protocol per such part, each increasing in B, so the B that fit are those at or below
    the largest of each choice's answers (`_max_batch`).
    """
    largest = None
    for parts in _protocol_choices(shape.timed_parts, shape.bulk_parts):
        answer = _max_batch(parts, assumptions, compute_rate, memory_rate, links, budget)
        largest = answer if largest is None else maximum(largest, answer)
    return largest


def _protocol_choices(parts, bulk_parts):
    """The timed parts under every choice of protocol for each part in `bulk_parts`
    (those the bulk protocol times in place of `parts`' own): one dict without any."""
    choices = [parts]
    for name, bulk in bulk_parts.items():
        choices += [{**choice, name: bulk} for choice in choices]
    return choices


def _max_batch(parts, assumptions, compute_rate, memory_rate, links, budget):
    """`max_batch_for_budget` under one protocol per part (`parts`, timed).

    For B >= 1 every part's FLOPs and bytes are linear in B, but for the routed experts'
    bytes, which grow with B. With them fixed, each part time is a max of two linear
    functions and the step time is the max, over every choice of branch per part, of the
    summed lines (overlap "full": the max of the summed compute, memory and link lines):
    t(B) <= budget is a set of linear inequalities, solved exactly for all configurations
    at once. Routed experts: with every expert read the solution L is a lower bound, and
    L + 1 cannot fit where the line that bounds it overshoots the budget at L + 1 by more
    than the experts left unread there could save; elsewhere the exact step time at L + 1
    decides, and where it fits Newton steps go on from there (see `_settle`).
    """
    routed = any(part.experts is not None or part.flops_sqrt is not None
                 for part in parts.values())
    low, binding = _linear_max_batch(parts, assumptions, compute_rate, memory_rate,
                                     links, budget, binding=routed)
    if not routed:
        return low
    trial = where(np.isfinite(low), low + 1.0, 1.0)
    overshoot = binding[0] + binding[1] * trial - budget
    unread = _concave_slack(parts, trial, compute_rate, links, memory_rate)
    open_ = np.isfinite(low) & (overshoot <= unread * (1 + 1e-9))
    if not any_true(open_):
        return low
    full = np.broadcast_shapes(np.shape(low), np.shape(open_))
    index = np.flatnonzero(np.broadcast_to(open_, full))
    rates = _restricted_rates(index, full, (compute_rate, memory_rate, links))
    parts = _restricted_parts(parts, index, full)
    budget_, trial_ = _restricted(index, full, budget, trial)
    time, rate = _time_and_rate(parts, rates, assumptions, trial_)
    fits = time <= budget_
    settled = _settle(parts, rates, assumptions, budget_, trial_, time, rate,
                      where(fits, 2.0 ** 52, trial_))
    low = np.array(np.broadcast_to(low, full)).reshape(-1)
    low[index] = where(fits, settled, low[index])
    return low.reshape(full)


_LINEAR_FIELDS = tuple(f.name for f in fields(Linear))


def _restricted_parts(parts, index, shape):
    return {name: Linear(**dict(zip(_LINEAR_FIELDS, _restricted(
        index, shape, *(getattr(part, f) for f in _LINEAR_FIELDS)), strict=True)))
        for name, part in parts.items()}


def _restricted_rates(index, shape, rates):
    """(compute rate, memory rate, links) at the flat `index` only."""
    compute_rate, memory_rate, links = rates
    return (*_restricted(index, shape, compute_rate, memory_rate),
            {name: tuple(_restricted(index, shape, *link)) for name, link in links.items()})


def _restricted(index, shape, *values):
    """`values` (scalars, or arrays broadcastable to `shape`) at the flat `index` only."""
    return [value if value is None or np.ndim(value) == 0
            else np.broadcast_to(value, shape).reshape(-1)[index] for value in values]


def _settle(parts, rates, assumptions, budget, low, time, rate, high):
    """The largest integer B <= `high` whose step fits `budget`, given that `low` fits
    (with its step time and rate of growth). Newton steps from the largest B known to
    fit: where the routed experts' bytes set the time it is concave in B, so a step stays
    within the budget; a step that overshoots (past a kink where another branch takes
    over) bounds B from above, and bisection finishes. Points still unsettled are
    gathered into smaller arrays as they become few."""
    size = np.shape(low)
    while True:
        unsettled = high > low
        count = np.count_nonzero(unsettled)
        if count == 0:
            return low
        if count < low.size // 2:
            index = np.flatnonzero(unsettled)
            parts = _restricted_parts(parts, index, size)
            rates = _restricted_rates(index, size, rates)
            low = np.array(low)
            low[index] = _settle(parts, rates, assumptions,
                                 *_restricted(index, size, budget, low, time, rate, high))
            return low
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = floor(low + (budget - time) / rate)
        candidate = where(newton > high, np.ceil(0.5 * (low + high)),
                             maximum(newton, low + 1.0))
        candidate = minimum(candidate, maximum(high, low))
        trial_time, trial_rate = _time_and_rate(parts, rates, assumptions, candidate)
        fits = (trial_time <= budget) & unsettled
        low = where(fits, candidate, low)
        time, rate = where(fits, trial_time, time), where(fits, trial_rate, rate)
        high = where(fits | ~unsettled, high, candidate - 1.0)


def _time_and_rate(parts, rates, assumptions, batch):
    """The step time at `batch` and its derivative in B (of the branches that set it)."""
    compute_rate, memory_rate, links = rates
    values = {name: part.at(batch, rates=True) for name, part in parts.items()}
    costs = {name: value[:2] for name, value in values.items()}
    times = part_times(costs, compute_rate, memory_rate, links)
    slopes = {}
    for name, (flops, nbytes, flops_rate, bytes_rate) in values.items():
        if name in LINK_PARTS:
            slopes[name] = bytes_rate / links[name][0]
        elif flops is None:
            slopes[name] = bytes_rate / memory_rate
        else:
            slopes[name] = where(flops / compute_rate >= nbytes / memory_rate,
                                    flops_rate / compute_rate, bytes_rate / memory_rate)
    if assumptions.overlap == "parts":
        return sum(times.values()), sum(slopes.values())
    hbm = [value for name, value in values.items() if name not in LINK_PARTS]
    compute_time, memory_time, compute_slope, memory_slope = (
        plus(*(value[j] for value in hbm)) / rate
        for j, rate in enumerate((compute_rate, memory_rate, compute_rate, memory_rate)))
    time = maximum(compute_time, memory_time)
    rate = where(compute_time >= memory_time, compute_slope, memory_slope)
    for name in parts:
        if name in LINK_PARTS:
            rate = where(times[name] > time, slopes[name], rate)
            time = maximum(time, times[name])
    return time, rate


def _linear_max_batch(parts, assumptions, compute_rate, memory_rate, links, budget,
                      binding=False):
    """The largest B >= 1 within the budget (0 if none), and with `binding` the
    (intercept, slope) of the line that sets it (else None). The answer does not depend
    on the batch axis, so it takes the shape of the other inputs: on a block of a sweep
    (context x batch) it is solved once per context, not once per point."""
    per_part = _branches(parts, compute_rate, memory_rate, links)
    if assumptions.overlap == "full":
        hbm = [branches for name, branches in zip(parts, per_part, strict=True)
               if name not in LINK_PARTS]
        links = [branches[0] for name, branches in zip(parts, per_part, strict=True)
                 if name in LINK_PARTS]
        lines = [_summed(branches[j] for branches in hbm) for j in (0, 1)] + links
    else:  # a sum of per-part maxima: the max over every choice of branch per part
        per_part = [_dominant(branches) if len(branches) == 2 else branches
                    for branches in per_part]
        lines = list(per_part[0])
        for branches in per_part[1:]:
            lines = [_summed((line, branch)) for line in lines for branch in branches]
    limit = np.inf
    bound_by = (0.0, 0.0) if binding else None
    with np.errstate(divide="ignore", invalid="ignore"):
        for intercept, slope in lines:
            # a flat line gives +inf within the budget and -inf above it
            bound = (budget - intercept) / slope
            if binding:
                tighter = bound < limit
                bound_by = (where(tighter, intercept, bound_by[0]),
                            where(tighter, slope, bound_by[1]))
            limit = minimum(limit, bound)
    return where(limit >= 1, floor(limit), 0.0), bound_by


def _summed(lines):
    """The sum of (intercept, slope) lines."""
    intercepts, slopes = zip(*lines, strict=True)
    return sum(intercepts[1:], start=intercepts[0]), sum(slopes[1:], start=slopes[0])
