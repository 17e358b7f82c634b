"""`sweep --help` and a subcommand's `--help` start without numpy or polars (issue 19)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
from rooftui.sweeps.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
print(sorted(name for name in ("numpy", "polars", "altair") if name in sys.modules))
"""


@pytest.mark.parametrize("argv", [["--help"], ["point", "--help"]])
def test_help_imports_neither_numpy_nor_polars(argv):
    result = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)],
                            capture_output=True, text=True, check=True)
    assert "Usage: sweep" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "[]"
