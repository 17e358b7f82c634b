"""Shared test helpers: run `sweep` in-process and read its JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rooftui.sweeps.cli import cli

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def run_sweep(*args: str, expect_exit: int = 0) -> str:
    """Run `sweep ARGS...` in-process; return stdout; assert the exit status."""
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == expect_exit, result.output
    return result.stdout


def sweep_json(*args: str):
    return json.loads(run_sweep(*args, "--json"))


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"the shared reference folder is not at {SHARED}")
    return SHARED
