"""The roofline: attainable FLOP/s against arithmetic intensity, log-log.

Drawn: the GPU's roofs, memory (bandwidth × intensity) and compute (dense peak), each
labelled with its value, the roofs the profile's MFU/MBU allow when below 1 (dim), the
ridge, and the step's gemm part, attention part and whole step
at their achieved FLOP/s (FLOPs over their own time).
"""

from __future__ import annotations

import numpy as np

from rooftui.core import units
from rooftui.tui.figures import ExplorerFigures
from rooftui.tui.widgets.log_axis import padded_bounds, to_log
from rooftui.tui.widgets.palette import BLUISH_GREEN, ORANGE, REDDISH_PURPLE, SKY_BLUE, YELLOW
from rooftui.tui.widgets.plot_base import LabelledPlot

# part -> (marker, colour), and the two roofs' colours (rooftui.tui.widgets.palette)
MARKERS = {"gemm": ("■", ORANGE), "attention": ("▲", BLUISH_GREEN), "step": ("◆", YELLOW)}
MEMORY_ROOF, COMPUTE_ROOF, RIDGE = SKY_BLUE, REDDISH_PURPLE, "grey70"


def roof(log_intensity: np.ndarray, peak: float, bandwidth: float) -> np.ndarray:
    """log10 of min(peak, intensity × bandwidth)."""
    return np.minimum(np.log10(peak), log_intensity + np.log10(bandwidth))


def marked_points(report: dict) -> dict[str, tuple[float, float]]:
    """Each part and the step as (intensity FLOP/B, achieved FLOP/s); parts without
    FLOPs (activation traffic) have no place on a log intensity axis."""
    parts = dict(report["parts"])
    parts["step"] = {"flops": report["flops"], "time_s": report["step_time_s"],
                     "intensity": report["intensity"]}
    return {name: (part["intensity"], part["flops"] / part["time_s"])
            for name, part in parts.items()
            if name in MARKERS and part["intensity"] and part["time_s"] > 0}


class RooflinePlot(LabelledPlot):
    TITLE = "Roofline · FLOP/s vs FLOP/B"

    def show_figures(self, figures: ExplorerFigures) -> None:
        report = figures.report
        peak, bandwidth = report["peak_flops"], report["bandwidth_bytes_per_s"]
        mfu, mbu = report["assumptions"]["mfu"], report["assumptions"]["mbu"]
        points = marked_points(report)
        xs = to_log([p[0] for p in points.values()] + [report["ridge"]])
        x_min, x_max = padded_bounds(xs, pad=0.5)
        line_x = np.array([x_min, np.log10(report["ridge"]), x_max])
        line_y = roof(line_x, peak, bandwidth)
        ys = to_log([p[1] for p in points.values()])
        y_min, y_max = padded_bounds(np.concatenate([ys, line_y]))

        plot = self.plot
        plot.clear()
        plot.set_xlabel("intensity (FLOP/B)")
        plot.set_ylabel("FLOP/s")
        plot.set_xlimits(x_min, x_max)
        plot.set_ylimits(y_min, y_max)
        # the memory roof (bandwidth × intensity) up to the ridge, the compute roof after
        for part, colour in ((slice(0, 2), MEMORY_ROOF), (slice(1, 3), COMPUTE_ROOF)):
            plot.plot(line_x[part], line_y[part], line_style=colour,
                      hires_mode=self.hires_mode)
        if mfu < 1 or mbu < 1:
            derated_x = np.array([x_min, np.log10(report["ridge"] * mfu / mbu), x_max])
            derated_y = roof(derated_x, mfu * peak, mbu * bandwidth)
            for part, colour in ((slice(0, 2), MEMORY_ROOF), (slice(1, 3), COMPUTE_ROOF)):
                plot.plot(derated_x[part], derated_y[part], line_style=f"{colour} dim",
                          hires_mode=self.hires_mode)
        plot.add_v_line(float(np.log10(report["ridge"])), line_style=RIDGE)
        for name, (intensity, flops_per_s) in points.items():
            marker, colour = MARKERS[name]
            plot.scatter(to_log([intensity]), to_log([flops_per_s]), marker=marker,
                         marker_style=f"bold {colour}")
        legend = [f"[{MEMORY_ROOF}]━[/] memory {units.si(bandwidth, 'B/s')}",
                  f"[{COMPUTE_ROOF}]━[/] compute {units.si(peak, 'FLOP/s')}",
                  f"[{RIDGE}]│[/] ridge {report['ridge']:,.0f} FLOP/B"]
        legend += [f"[{MARKERS[name][1]}]{MARKERS[name][0]}[/] {name}" for name in points]
        self.set_legend("  ".join(legend))
        plot.paint_now()
