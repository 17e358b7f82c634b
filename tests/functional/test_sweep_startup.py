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


def test_the_command_list_shows_each_commands_own_docstring():
    """`sweep --help` reads each command's docstring from its source without importing
    it; what it reads must be the help click shows for the imported command."""
    import inspect

    from rooftui.sweeps import cli

    for name in cli.COMMANDS:
        command = cli.cli.get_command(None, name)
        assert cli._docstring(name) == inspect.cleandoc(command.help or "").split("\f")[0], name
