"""`forked_work.map_split`: the same results, in order, whichever process computed each
item; the child's errors come back as the parent's; the parent's own errors (Ctrl-C
included) win; a child that dies leaves its items to the parent. Each case runs in a
fresh interpreter (forking needs one thread and none of polars, pyarrow or vl-convert,
which the test process may have) and each process waits, on its first item, until the
other has taken one, however slow the machine."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PREAMBLE = """
import json, os, sys, tempfile, time
from pathlib import Path
from rooftui.sweeps import forked_work
parent = os.getpid()
assert forked_work.can_fork(), "this case needs a process that can fork"
markers = Path(tempfile.mkdtemp())
began = markers / "child-began"

def in_child():
    return os.getpid() != parent

def both_take_one():
    # on each process's first item: wait until the other has taken one too (however
    # slow the machine), so that neither takes every item
    if (markers / f"{os.getpid()}").exists():
        return
    (markers / f"{os.getpid()}").touch()
    if in_child():
        began.touch()
    for _ in range(6000):
        if len(list(markers.iterdir())) >= 3:  # both processes' marks and the child's
            return
        time.sleep(0.01)

def outcome(work, items):
    # what the caller of map_split sees: its result, or the error it raised
    try:
        return {"result": forked_work.map_split(work, items)}
    except BaseException as error:
        return {"error": type(error).__name__, "message": str(error)}
"""

needs_fork = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="map_split forks only on Linux")


def split(in_the_child: str, here: str, items: str, preamble: str = "") -> dict:
    """What `map_split(work, items)` gives in a fresh interpreter (its result, or the
    error it raised, and whether the child took an item), `work` running the statement
    `in_the_child` in the child and `here` in the parent, each on `item`."""
    body = f"""{preamble}
def work(item):
    both_take_one()
    if in_child():
        {in_the_child}
    {here}
print(json.dumps({{**outcome(work, {items}), "child_began": began.exists()}}))
"""
    done = subprocess.run([sys.executable, "-c", PREAMBLE + body], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_fork
def test_results_in_order_from_both_processes():
    found = split("return [item * item, True]", "return [item * item, False]",
                  "list(range(12))")["result"]
    assert [square for square, _ in found] == [i * i for i in range(12)]
    assert {child for _, child in found} == {True, False}  # each process took some


@needs_fork
def test_a_spec_error_in_the_child_is_a_spec_error_here():
    found = split('raise SpecError(f"item {item} is bad")', "return item", "[1, 2, 3]",
                  preamble="from rooftui.core.errors import SpecError")
    assert found["error"] == "SpecError"
    assert found["message"] in {"item 1 is bad", "item 2 is bad", "item 3 is bad"}


@needs_fork
def test_another_error_in_the_child_carries_its_traceback():
    found = split("return {item}  # not JSON: its result cannot travel", "return item",
                  "[1, 2, 3]")
    assert found["error"] == "RuntimeError"
    assert "Traceback" in found["message"] and "not JSON serializable" in found["message"]


@needs_fork
def test_the_parents_own_error_wins():
    found = split('raise ZeroDivisionError("in the child")',
                  'raise KeyError(f"here, item {item}")', "list(range(8))")
    assert found["error"] == "KeyError" and found["message"].startswith("'here, item ")


@needs_fork
def test_ctrl_c_stays_a_keyboard_interrupt():
    found = split("return item", "raise KeyboardInterrupt", "list(range(8))")
    assert found["error"] == "KeyboardInterrupt"


@needs_fork
def test_a_killed_child_leaves_its_items_to_the_parent():
    found = split("os._exit(9)  # dies without a word, its item taken", "return item * 10",
                  "[1, 2, 3, 4]")
    assert found == {"result": [10, 20, 30, 40], "child_began": True}


def test_without_a_fork_everything_runs_here():
    from rooftui.sweeps import forked_work

    assert forked_work.map_split(lambda item: item + 1, [1]) == [2]
    assert forked_work.map_split(str, list(range(300))) == [str(i) for i in range(300)]
