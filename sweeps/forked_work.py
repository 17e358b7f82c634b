"""Pure-Python work split between this process and one forked child, for the moment a
run's cores stand idle: `sweep run` renders its step charts (numpy and text, bound by
the GIL, so threads would not overlap) once every worker is done, half of them in a
child that shares the parent's memory, so nothing is copied or imported again.

Forking is safe only where nothing can hold a lock the child would need: one thread
alive, polars never imported (its thread pool deadlocks in a fork child), Linux (macOS
frameworks refuse a fork). Elsewhere `map_split` runs everything here, in order.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from rooftui.core.errors import SpecError


def can_fork() -> bool:
    """A child can be forked safely now, and has a core of its own to run on."""
    return (hasattr(os, "fork") and sys.platform.startswith("linux")
            and (os.cpu_count() or 1) > 1 and threading.active_count() == 1
            and "polars" not in sys.modules)


def map_split(function: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    """`[function(item) for item in items]`, shared with a forked child when `can_fork`:
    each process takes the next item as it becomes free (give the costly ones first).
    `function`'s results must be JSON values. A SpecError in the child is raised here as
    a SpecError with its message; any other error as a RuntimeError holding the child's
    traceback. Items a child that died (killed) left undone are done here."""
    if len(items) < 2 or len(items) > 255 or not can_fork():
        return [function(item) for item in items]
    read, write = os.pipe()  # the items' places, one byte each, taken one at a time
    os.write(write, bytes(range(len(items))))
    os.close(write)

    def take_turns() -> list[tuple[int, Any]]:
        done = []
        while place := os.read(read, 1):
            done.append((place[0], function(items[place[0]])))
        return done

    try:
        wait = _in_child(take_turns)
        try:
            results = dict(take_turns())
        finally:
            theirs = wait()
    finally:
        os.close(read)
    results.update(theirs or [])
    return [results[i] if i in results else function(item) for i, item in enumerate(items)]


def _in_child(work: Callable[[], list]) -> Callable[[], list | None]:
    """Start `work` in a forked child; the function returned waits for it and gives its
    result (or raises its error; None when it said nothing)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without the parent's exit handlers
        status = 0
        try:
            os.close(read)
            message = {"result": work()}
        except SpecError as error:
            message, status = {"spec_error": str(error)}, 1
        except BaseException:  # noqa: BLE001 - any failure goes back to the parent
            message, status = {"error": traceback.format_exc()}, 1
        try:
            with os.fdopen(write, "w", encoding="utf-8") as pipe:
                json.dump(message, pipe)
        finally:
            os._exit(status)
    os.close(write)

    def wait() -> list | None:
        with os.fdopen(read, encoding="utf-8") as pipe:
            text = pipe.read()
        os.waitpid(pid, 0)
        try:
            message = json.loads(text)
        except ValueError:  # killed before (or while) it wrote
            return None
        if "spec_error" in message:
            raise SpecError(message["spec_error"])
        if "error" in message:
            raise RuntimeError(f"in the forked child: {message['error']}")
        return message["result"]

    return wait
