"""The Optimize view's search: `sweep optimize` itself with one worker (so the same
numbers), through a `Server` that says a word before every
simulation: the view shows progress within a candidate, and a cancelled search stops
there, not at the end of the candidate (a candidate runs several simulations).

The view bounds what one search may hold: a simulation keeps every request's timings,
about 300 B each (10⁷ requests grew the process to 2.9 GB), and every candidate is a
search of its own. `sweep optimize` takes more, and its `--workers`.
"""

from __future__ import annotations

from collections.abc import Callable

from rooftui.core.errors import SpecError
from rooftui.sweeps.optimize import (
    Candidate,
    Objective,
    Problem,
    Result,
    Server,
    optimize,
)

MAX_REQUESTS = 100_000  # ~30 MB of timings per simulation
MAX_CANDIDATES = 400  # max batches x token budgets


class Abandoned(Exception):
    """Raised from the progress callback to stop a search nobody waits for any more."""


class WatchedServer(Server):
    """A Server that calls `before(batch, budget)` before each simulation it is asked
    for (which may raise Abandoned)."""

    def __init__(self, problem: Problem, max_batch: int,
                 before: Callable[[int, int], None]) -> None:
        self._before = before
        super().__init__(problem, max_batch)

    def simulation(self, batch: int, budget: int, spec: str):
        self._before(batch, budget)
        return super().simulation(batch, budget, spec)


def check_bounds(requests: int, batches: list[int], budgets: list[int]) -> None:
    """A SpecError for a search larger than the view runs."""
    if requests > MAX_REQUESTS:
        raise SpecError(f"requests must be at most {MAX_REQUESTS:,} here (each simulation "
                        f"keeps every request's timings); `sweep optimize` takes more")
    if len(batches) * len(budgets) > MAX_CANDIDATES:
        raise SpecError(f"{len(batches)} batches × {len(budgets)} budgets is "
                        f"{len(batches) * len(budgets):,} candidates; at most "
                        f"{MAX_CANDIDATES} here (`sweep optimize --workers` takes more)")


def search(problem: Problem, objective: Objective, batches: list[int], budgets: list[int],
           on_candidate: Callable[[Candidate], None],
           before_simulation: Callable[[int, int], None]) -> Result:
    """Every (B, T) of batches x budgets: `optimize` with one worker, through a server
    that says each simulation before it runs."""
    check_bounds(problem.requests, batches, budgets)
    return optimize(problem, objective, batches, budgets, on_candidate=on_candidate,
                    server=WatchedServer(problem, max(batches), before_simulation))
