"""Decode throughput against batch at the current context, log-log: tokens/s of all
users and of one user, the current batch and the largest batch memory holds."""

from __future__ import annotations

import numpy as np

from rooftui.tui.figures import ExplorerFigures
from rooftui.tui.widgets.log_axis import padded_bounds, to_log
from rooftui.tui.widgets.palette import ORANGE, SKY_BLUE, VERMILLION
from rooftui.tui.widgets.plot_base import LabelledPlot

ALL_USERS, PER_USER, MEMORY_LIMIT = SKY_BLUE, ORANGE, VERMILLION
# each curve is marked at the current batch, so the two tell apart without colour
ALL_USERS_MARKER, PER_USER_MARKER = "●", "○"


class ThroughputPlot(LabelledPlot):
    TITLE = "Throughput · tok/s vs batch"

    def show_figures(self, figures: ExplorerFigures) -> None:
        report, curve = figures.report, figures.curve
        x = to_log(curve.batch)
        all_users, per_user = to_log(curve.tokens_per_s), to_log(curve.per_user_tokens_per_s)
        max_batch = report["max_batch"]
        # past the memory limit the curve is what the roofline allows, not what runs: dim
        # it, starting from the last batch that fits so the line stays connected
        split = len(x) if max_batch is None else int(
            np.searchsorted(curve.batch, max_batch, side="right"))
        fitting, beyond = slice(0, split), slice(max(split - 1, 0), None)

        plot = self.plot
        plot.clear()
        plot.set_xlabel("batch (sequences)")
        plot.set_ylabel("tok/s")
        plot.set_xlimits(-0.1, float(x[-1]) + 0.1)
        plot.set_ylimits(*padded_bounds(np.concatenate([all_users, per_user])))
        for y, colour in ((all_users, ALL_USERS), (per_user, PER_USER)):
            plot.plot(x[fitting], y[fitting], line_style=colour, hires_mode=self.hires_mode)
            if split < len(x):
                plot.plot(x[beyond], y[beyond], line_style=f"{colour} dim",
                          hires_mode=self.hires_mode)
        legend = [f"[{ALL_USERS}]━{ALL_USERS_MARKER}[/] all users",
                  f"[{PER_USER}]━{PER_USER_MARKER}[/] per user"]
        if report["batch"] > 0:
            batch = float(np.log10(report["batch"]))
            plot.add_v_line(batch, line_style="white")
            for value, marker, colour in (
                    (report["tokens_per_s"], ALL_USERS_MARKER, ALL_USERS),
                    (report["per_user_tokens_per_s"], PER_USER_MARKER, PER_USER)):
                if value:
                    plot.scatter([batch], to_log([value]), marker=marker,
                                 marker_style=f"bold {colour}", hires_mode=None)
            legend.append(f"│ batch {report['batch']:,}")
        if max_batch:
            plot.add_v_line(float(np.log10(max_batch)), line_style=MEMORY_LIMIT)
            legend.append(f"[{MEMORY_LIMIT}]│[/] max {max_batch:,} (memory)")
        elif max_batch == 0:
            legend.append(f"[{MEMORY_LIMIT}]no sequence fits in memory[/]")
        self.set_legend("  ".join(legend))
        plot.paint_now()
