"""`rooftui serve [--host H] [--port P] [rooftui options]`: the same app in a web browser,
through textual-serve, for people who would rather click.

textual-serve runs `rooftui` itself for each browser tab (a process of its own, its
screen drawn by xterm.js in the page). It listens on loopback unless told otherwise:
the app can write exports into the folder it runs in, and the page has no login.
"""

from __future__ import annotations

import argparse
import shlex
import sys

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def parse_arguments(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The serve options, and the rest: `rooftui`'s own, for the app it serves."""
    parser = argparse.ArgumentParser(
        prog="rooftui serve",
        description="Serve rooftui to a web browser (textual-serve). Other options "
                    "(RESULTS_DIR, --gpu, --model, ...) are rooftui's, for the served app.")
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help="address to listen on [default: 127.0.0.1, this machine "
                             "only; the page has no login]")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port to listen on [default: {DEFAULT_PORT}]")
    return parser.parse_known_args(argv)


def serve(argv: list[str]) -> None:
    args, app_arguments = parse_arguments(argv)
    if not 0 < args.port < 65536:
        sys.stderr.write(f"rooftui serve: error: --port must be 1 to 65535, got {args.port}\n")
        sys.exit(2)
    from textual_serve.server import Server

    command = shlex.join([sys.executable, "-m", "rooftui.tui.app", *app_arguments])
    print(f"rooftui serve: http://{args.host}:{args.port}/ (ctrl+c stops)", flush=True)
    Server(command, host=args.host, port=args.port, title="rooftui").serve()
