"""Explorer latency: from a key press to the updated figures and plots on screen.

Runs the app headless at a terminal size and sends it key presses the way a terminal
does (a key event through the driver; Pilot's `press` would also wait on every widget,
work of its own in the app's thread), cycling batch ×2 / ÷2 and context ×2 / ÷2. For
each change it measures from just before the key is sent to the last frame the app
writes for it: the worker's result has been applied (the Explorer's `Computed` message,
which bubbles to the app) and the frames that follow — key figures, breakdown, the plots'
canvases — have been written (`App._display`, where frames leave the app; a change is
done once no frame has followed for `QUIET_S`). Changes run one after the other.

    python benchmarks/bench_tui_latency.py [--changes 200] [--size 200x50]

Target: p95 under 50 ms.

Start-up: with `--startup`, the time from launching a fresh process (the interpreter, its
imports, the app) to the first frame that shows the Explorer's figures, or with
`--results DIR` the first frame of the Results view that shows a page of DIR's rows
(`rooftui DIR`), `--runs` times, headless at `--size`:

    python benchmarks/bench_tui_latency.py --startup [--runs 10] [--size 80x24]
    python benchmarks/bench_tui_latency.py --startup --results DIR [--runs 10]

Targets: first figures under 1 s, first results page under 2 s for a 1 M-row folder.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from textual import events

from rooftui.tui.rooftui_app import RooftuiApp
from rooftui.tui.screens.explorer import ExplorerScreen

# batch 1 -> 2 -> 4 ... -> 64 and back down, with context steps in between
KEYS = [("right_square_bracket", "]")] * 6 + [("right_curly_bracket", "}")] * 3 + \
       [("left_square_bracket", "[")] * 6 + [("left_curly_bracket", "{")] * 3
QUIET_S = 0.1  # no frame for this long after the result: the change is on screen


class TimedApp(RooftuiApp):
    def __init__(self) -> None:
        super().__init__()
        self.applied = asyncio.Event()
        self.last_frame = 0.0

    def on_explorer_screen_computed(self, message: ExplorerScreen.Computed) -> None:
        self.applied.set()

    def _display(self, screen, renderable) -> None:
        super()._display(screen, renderable)
        self.last_frame = time.perf_counter()


async def quiet(app: TimedApp) -> None:
    """Until no frame has been written for QUIET_S."""
    while True:
        last = app.last_frame
        await asyncio.sleep(QUIET_S)
        if app.last_frame == last:
            return


async def measure(changes: int, size: tuple[int, int]) -> tuple[list[float], list[float]]:
    """Each change's latency (s), and the CPU time the process spent on it (s, every
    thread: the app's and the worker's), which a loaded machine inflates far less."""
    app = TimedApp()
    latencies, cpu = [], []
    async with app.run_test(size=size):
        await asyncio.wait_for(app.applied.wait(), 30)  # the first screen
        await quiet(app)
        for index in range(changes):
            key, character = KEYS[index % len(KEYS)]
            app.applied.clear()
            cpu_before, pressed_at = time.process_time(), time.perf_counter()
            app._driver.send_message(events.Key(key, character))
            await asyncio.wait_for(app.applied.wait(), 30)
            await quiet(app)
            latencies.append(app.last_frame - pressed_at)
            cpu.append(time.process_time() - cpu_before)
    return latencies, cpu


class FirstFrameApp(RooftuiApp):
    """Prints the wall-clock time of the first frame that shows what it waits for (the
    Explorer's figures, or a page of the Results view), then exits."""

    def _display(self, screen, renderable) -> None:
        super()._display(screen, renderable)
        if renderable is None or self.return_code is not None:
            return
        shown = getattr(screen, "page" if self.results_dir else "figures", None)
        if shown is not None:
            print(f"{time.time():.6f}", flush=True)
            self.exit(0)


def first_frame_times(runs: int, size: str, results: Path | None) -> list[float]:
    """Seconds from launching a process to its first frame of figures (or results page):
    each run a fresh interpreter, imports included."""
    argv = [sys.executable, __file__, "--first-frame-child", "--size", size]
    argv += ["--results", str(results)] if results else []
    times = []
    for _ in range(runs):
        launched = time.time()
        shown = subprocess.run(argv, capture_output=True, text=True, check=True)
        times.append(float(shown.stdout.split()[-1]) - launched)
    return times


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=200, help="key presses (>= 100)")
    parser.add_argument("--size", default="200x50", help="terminal WIDTHxHEIGHT")
    parser.add_argument("--startup", action="store_true",
                        help="time from launch to the first figures (or results page)")
    parser.add_argument("--results", type=Path, metavar="DIR",
                        help="with --startup: open this `sweep run` output folder")
    parser.add_argument("--runs", type=int, default=10, help="with --startup: launches")
    parser.add_argument("--first-frame-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    width, height = (int(part) for part in args.size.split("x"))
    if args.first_frame_child:
        FirstFrameApp(args.results).run(headless=True, size=(width, height))
        return
    if args.startup:
        load = os.getloadavg()[0]
        times = [1e3 * value for value in first_frame_times(args.runs, args.size,
                                                             args.results)]
        what, target = (f"first page of {args.results}", 2) if args.results else \
            ("first figures", 1)
        print(f"launch -> {what} at {width}x{height}, {len(times)} runs: median "
              f"{statistics.median(times):.0f} ms, fastest {min(times):.0f} ms, slowest "
              f"{max(times):.0f} ms (target {target} s); load {load:.2f} -> "
              f"{os.getloadavg()[0]:.2f}")
        return
    load = os.getloadavg()[0]
    latencies, cpu = asyncio.run(measure(args.changes, (width, height)))
    ms = [1e3 * value for value in latencies]
    print(f"explorer key press -> last frame of the new figures and plots, {len(ms)} "
          f"changes at {width}x{height}: p50 {statistics.median(ms):.1f} ms, "
          f"p95 {percentile(ms, 0.95):.1f} ms, max {max(ms):.1f} ms (target p95 < 50 ms); "
          f"CPU per change: median {1e3 * statistics.median(cpu):.1f} ms; load "
          f"{load:.2f} -> {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
