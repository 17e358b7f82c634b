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
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from textual import events

from rooftui.tui.app import RooftuiApp
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


async def measure(changes: int, size: tuple[int, int]) -> list[float]:
    app = TimedApp()
    latencies = []
    async with app.run_test(size=size):
        await asyncio.wait_for(app.applied.wait(), 30)  # the first screen
        await quiet(app)
        for index in range(changes):
            key, character = KEYS[index % len(KEYS)]
            app.applied.clear()
            pressed_at = time.perf_counter()
            app._driver.send_message(events.Key(key, character))
            await asyncio.wait_for(app.applied.wait(), 30)
            await quiet(app)
            latencies.append(app.last_frame - pressed_at)
    return latencies


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=200, help="key presses (>= 100)")
    parser.add_argument("--size", default="200x50", help="terminal WIDTHxHEIGHT")
    args = parser.parse_args()
    width, height = (int(part) for part in args.size.split("x"))
    latencies = asyncio.run(measure(args.changes, (width, height)))
    ms = [1e3 * value for value in latencies]
    print(f"explorer key press -> last frame of the new figures and plots, {len(ms)} "
          f"changes at {width}x{height}: p50 {statistics.median(ms):.1f} ms, "
          f"p95 {percentile(ms, 0.95):.1f} ms, max {max(ms):.1f} ms (target p95 < 50 ms)")


if __name__ == "__main__":
    main()
