"""Shared test helpers: run `sweep` in-process or as a process of its own."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from rooftui.sweeps.cli import main

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def sweep(*args, expect: int = 0) -> tuple[str, str]:
    """`sweep ARGS` in-process through the real entry point (its one-line errors and exit
    statuses included); (stdout, stderr), after asserting the exit status."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err), pytest.raises(SystemExit) as done:
        main([str(a) for a in args])
    assert done.value.code == expect, err.getvalue()
    return out.getvalue(), err.getvalue()


def run_sweep(*args) -> str:
    """`sweep ARGS` in-process, expected to succeed; its stdout."""
    return sweep(*args)[0]


def sweep_json(*args):
    return json.loads(run_sweep(*args, "--json"))


def sweep_process(*args) -> subprocess.CompletedProcess:
    """`python -m rooftui.sweeps ARGS` in a fresh interpreter, output captured."""
    return subprocess.run([sys.executable, "-m", "rooftui.sweeps", *map(str, args)],
                          capture_output=True, text=True)


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"the shared reference folder is not at {SHARED}")
    return SHARED
