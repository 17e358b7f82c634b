"""Pure-Python work split between this process and one forked child, for the moment a
run's cores stand idle: `sweep run` renders its step charts (numpy and text, bound by
the GIL, so threads would not overlap) once every worker is done, sharing them with a
child that shares the parent's memory, so nothing is copied or imported again.

Forking is safe only where nothing can hold a lock the child would need: one Python
thread alive and none of the libraries that keep native thread pools loaded (polars,
pyarrow, vl-convert: a fork child deadlocks in their pools), Linux (macOS frameworks
refuse a fork), and a second core this process may run on. Elsewhere `map_split` runs
everything here, in order.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from rooftui.core.errors import SpecError

THREADED = ("polars", "pyarrow", "vl_convert")  # native thread pools once imported


def can_fork() -> bool:
    """A child can be forked safely now, and has a core of its own to run on."""
    if not (hasattr(os, "fork") and sys.platform.startswith("linux")):
        return False
    return (len(os.sched_getaffinity(0)) > 1 and threading.active_count() == 1
            and not any(name in sys.modules for name in THREADED))


def map_split(function: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    """`[function(item) for item in items]`, shared with a forked child when `can_fork`:
    each process takes the next item as it becomes free (give the costly ones first).
    `function`'s results must be JSON values. A SpecError in the child is raised here as
    a SpecError with its message; any other error as a RuntimeError holding the child's
    traceback; an error here (Ctrl-C included) stops the child taking items and is
    raised as it is. Items a child that died (killed) left undone are done here."""
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
        if wait is None:  # no fork to be had (no memory, no process slot): all here
            return [function(item) for item in items]
        try:
            results = dict(take_turns())
        except BaseException:
            os.set_blocking(read, False)  # the child takes no more
            with contextlib.suppress(BlockingIOError):
                while os.read(read, 256):
                    pass
            with contextlib.suppress(Exception):
                wait()
            raise
        theirs = wait()
    finally:
        os.close(read)
    results.update(theirs or [])
    return [results[i] if i in results else function(item) for i, item in enumerate(items)]


def _in_child(work: Callable[[], list]) -> Callable[[], list | None] | None:
    """Start `work` in a forked child (None when the fork fails); the function returned
    waits for it and gives its result (or raises its error; None when it said
    nothing)."""
    read, write = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        return None
    if pid == 0:  # the child: report, then leave without the parent's exit handlers
        status = 1
        try:
            os.close(read)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent answers Ctrl-C
            text, status = json.dumps({"result": work()}), 0
        except SpecError as error:
            text = json.dumps({"spec_error": str(error)})
        except BaseException:  # noqa: BLE001 - any failure goes back to the parent
            text = json.dumps({"error": traceback.format_exc()})
        try:
            with os.fdopen(write, "w", encoding="utf-8") as pipe:
                pipe.write(text)
        finally:
            os._exit(status)
    os.close(write)

    def wait() -> list | None:
        try:
            with os.fdopen(read, encoding="utf-8") as pipe:
                text = pipe.read()
        except BaseException:  # interrupted: the child is not left running, nor unreaped
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
            raise
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
