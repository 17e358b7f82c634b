"""`forked_work.map_split`: the same results, in order, whichever process computed each
item; the child's errors come back as the parent's; a child that dies leaves its items
to the parent. Each case runs in a fresh interpreter: forking needs one thread and no
polars, which the test process may have."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PREAMBLE = """
import json, os, sys
from rooftui.sweeps import forked_work
parent = os.getpid()
assert forked_work.can_fork(), "this case needs a process that can fork"
"""


def run(body: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PREAMBLE + body], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


needs_fork = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="map_split forks only on Linux")


@needs_fork
def test_results_in_order_from_both_processes():
    found = run("""
import tempfile, time
from pathlib import Path
began = Path(tempfile.mkdtemp()) / "child-began"
def work(item):
    if os.getpid() != parent:
        began.touch()
    else:  # the parent waits for the child to take one (however slow the machine)
        for _ in range(3000):
            if began.exists():
                break
            time.sleep(0.01)
    return [item * item, os.getpid() == parent]
results = forked_work.map_split(work, list(range(12)))
print(json.dumps(results))
""")
    assert [square for square, _ in found] == [i * i for i in range(12)]
    assert {here for _, here in found} == {True, False}  # each process took some


@needs_fork
def test_a_spec_error_in_the_child_is_a_spec_error_here():
    found = run("""
import time
from rooftui.core.errors import SpecError
def work(item):
    if os.getpid() != parent:
        raise SpecError(f"item {item} is bad")
    time.sleep(0.2)  # leaves the child an item to take
    return item
try:
    forked_work.map_split(work, [1, 2, 3])
except SpecError as error:
    print(json.dumps({"error": str(error)}))
""")
    assert found["error"].startswith("item ") and found["error"].endswith(" is bad")


@needs_fork
def test_another_error_in_the_child_carries_its_traceback():
    found = run("""
import time
def work(item):
    if os.getpid() != parent:
        raise ZeroDivisionError("in the child")
    time.sleep(0.2)
    return item
try:
    forked_work.map_split(work, [1, 2, 3])
except RuntimeError as error:
    print(json.dumps({"error": str(error)}))
""")
    assert "ZeroDivisionError: in the child" in found["error"]
    assert "Traceback" in found["error"]


@needs_fork
def test_a_killed_child_leaves_its_items_to_the_parent():
    found = run("""
import time
def work(item):
    if os.getpid() != parent:
        os._exit(9)  # dies without a word, its item taken
    time.sleep(0.2)
    return item * 10
print(json.dumps(forked_work.map_split(work, [1, 2, 3, 4])))
""")
    assert found == [10, 20, 30, 40]


def test_without_a_fork_everything_runs_here():
    from rooftui.sweeps import forked_work

    assert forked_work.map_split(lambda item: item + 1, [1]) == [2]
    assert json.dumps(forked_work.map_split(str, list(range(300)))) == json.dumps(
        [str(i) for i in range(300)])  # past 255 items: no fork
