"""The Optimize view's Pareto plot, log-log: every sustained (max batch, budget) as a dim
point at its tokens/s per user (x) and tokens/s per GPU (y), the frontier as a bright line,
the best (the highest sustained rate) as a star."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rooftui.sweeps.optimize import Candidate
from rooftui.tui.widgets.log_axis import padded_bounds, to_log
from rooftui.tui.widgets.palette import GREY, SKY_BLUE, YELLOW
from rooftui.tui.widgets.plot_base import LabelledPlot

POINTS, FRONTIER, BEST = GREY, SKY_BLUE, YELLOW


def _xy(candidates: Sequence[Candidate]) -> tuple[np.ndarray, np.ndarray]:
    """log10 of (tokens/s per user, tokens/s per GPU)."""
    return (to_log(np.array([c.per_user_tokens_per_s for c in candidates], dtype=float)),
            to_log(np.array([c.tokens_per_s_per_gpu for c in candidates], dtype=float)))


class ParetoPlot(LabelledPlot):
    TITLE = "Pareto · tok/s per GPU vs tok/s per user"

    def clear(self) -> None:
        self.plot.clear()
        self.set_legend("")

    def draw(self, sustained: Sequence[Candidate], frontier: Sequence[Candidate],
             best: Candidate | None) -> None:
        plot = self.plot
        plot.clear()
        if not sustained:
            self.set_legend("no candidate sustains the objective")
            return
        x, y = _xy(sustained)
        plot.set_xlabel("tok/s per user")
        plot.set_ylabel("tok/s per GPU")
        plot.set_xlimits(*padded_bounds(x, 0.05))
        plot.set_ylimits(*padded_bounds(y, 0.05))
        plot.scatter(x, y, marker="·", marker_style=POINTS, hires_mode=None)
        fx, fy = _xy(frontier)
        order = np.argsort(fx)
        plot.plot(fx[order], fy[order], line_style=FRONTIER, hires_mode=self.hires_mode)
        legend = [f"[{POINTS}]·[/] every candidate", f"[{FRONTIER}]━[/] frontier"]
        if best is not None:
            bx, by = _xy([best])
            plot.scatter(bx, by, marker="*", marker_style=BEST, hires_mode=None)
            legend.append(f"[{BEST}]*[/] best: B {best.max_batch:,}, T {best.token_budget:,}")
        self.set_legend("  ".join(legend))
        plot.paint_now()
