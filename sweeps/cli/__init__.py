"""The `sweep` command: the headless interface to rooftui (never imports the TUI).

Subcommands live one per module and are imported only when used, so `sweep point`
starts without loading polars or altair.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

import click

from rooftui.core.errors import SpecError

# name -> "module:attribute", relative to this package
COMMANDS = {
    "point": "point:point",
    "gemm": "point:gemm",
    "specs": "specs:specs",
    "simulate": "simulate:simulate_command",
    "occupancy": "occupancy:occupancy",
    "optimize": "optimize:optimize_command",
    "chart": "chart:chart",
    "run": "run:run",
    "status": "run:status",
    "plan": "run:plan",
    "calibrate": "calibrate:calibrate",
    "validate": "validate:validate",
    "measure": "measure:measure",
    "disagg": "disagg:disagg",
    "size": "size:size",
    "replay": "replay:replay",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module_name, attribute = COMMANDS[name].split(":")
        module = importlib.import_module(f"{__name__}.{module_name}")
        return getattr(module, attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of `sweep --help`, from each command's docstring read
        without importing its module (which would load numpy)."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [(name, click.utils.make_default_short_help(_docstring(name), limit))
                for name in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _docstring(name: str) -> str:
    """A command's docstring up to click's `\\f`, read from the first string literal after
    `def <name>` in its module's source: parsing the 16 modules whole was 60 ms, half of
    `sweep --help` (a test checks this against the imported commands' help)."""
    import ast  # only for `sweep --help`, not on every command's start

    module_name, attribute = COMMANDS[name].split(":")
    source = Path(__file__).with_name(f"{module_name}.py").read_text()
    found = re.search(rf'^def {attribute}\(.*?:\n\s+(r?""".*?""")', source, re.DOTALL | re.MULTILINE)
    if not found:
        return ""
    return inspect.cleandoc(ast.literal_eval(found.group(1))).split("\f")[0]


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"],
                                               "max_content_width": 100})
@click.version_option(package_name="rooftui", prog_name="sweep")
def cli() -> None:
    """Where does the time of an LLM serving step go, and what would move it?

    `sweep point` models one step on the roofline; the other commands map the model over
    grids, chart the results and simulate the scheduler around it. Units are SI
    (GB = 1e9 B, TB/s = 1e12 B/s); peaks are dense.
    """


def main(argv: list[str] | None = None) -> None:
    """Entry point: bad input is one line on stderr and exit status 2, never a traceback."""
    try:
        code = cli.main(args=argv, prog_name="sweep", standalone_mode=False)
    except click.exceptions.Abort:
        sys.stderr.write("sweep: interrupted\n")
        sys.exit(130)
    except click.ClickException as error:
        where = f" {error.ctx.info_name}" if getattr(error, "ctx", None) and error.ctx.parent else ""
        hint = ""
        if isinstance(error, click.UsageError) and error.ctx is not None:
            hint = f" (see `{error.ctx.command_path} --help`)"
        sys.stderr.write(f"sweep{where}: error: {error.format_message()}{hint}\n")
        sys.exit(2)
    except SpecError as error:
        sys.stderr.write(f"sweep: error: {error}\n")
        sys.exit(2)
    except BrokenPipeError:  # `sweep ... | head`
        sys.stderr.close()
        sys.exit(0)
    sys.exit(code if isinstance(code, int) else 0)
