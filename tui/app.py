"""`rooftui [RESULTS_DIR]`: the command line of the Explorer and the Results view.

Its arguments are parsed before anything of Textual, numpy or the screens loads, so
`rooftui --help` and a refused argument answer at once; the App (rooftui.tui.rooftui_app)
is imported only to run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_OUTPUT_DIR = Path("outputs")
EXAMPLES = """examples:
  rooftui                                  the Explorer: H100 SXM, Llama-3-8B, batch 1
  rooftui --gpu h200 --model llama-3-70b --batch 64 --context 8192
  rooftui outputs/grid-1a2b3c4d            browse a `sweep run` output, open rows
  rooftui serve --port 8000                the same app in a web browser (loopback)
"""


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="rooftui", epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Explore one LLM serving step on the roofline, live; with RESULTS_DIR, "
                    "browse a sweep's results (`sweep run` output) and open any row in the "
                    "Explorer. Keys: ? for help, ctrl+p for every action, q to quit. "
                    "`rooftui serve [--port P]` serves it to a web browser.")
    parser.add_argument("results_dir", nargs="?", type=Path, metavar="RESULTS_DIR",
                        help="a `sweep run` output directory (manifest.json, points/*.parquet)")
    # no defaults here: the Explorer's own apply (reading them would load the model code)
    parser.add_argument("--gpu", help="start on this GPU: a shipped name or a GPU TOML file")
    parser.add_argument("--model",
                        help="start on this model: a shipped name, a model TOML file, a "
                             "config.json or a Hugging Face model folder (holding one)")
    parser.add_argument("--batch", type=int,
                        help="start with this many decode sequences [default: 1]")
    parser.add_argument("--context", type=int,
                        help="start with this many tokens cached per sequence "
                             "[default: 1024]")
    parser.add_argument("--plot", choices=("halfblock", "braille", "quadrant"),
                        default="halfblock",
                        help="characters the plots are drawn with (braille needs a font "
                             "that has it) [default: halfblock]")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR,
                        help="where exports are written [default: outputs/]")
    return parser.parse_args(argv)


def check_results_dir(path: Path) -> None:
    from rooftui.core.errors import SpecError

    if not path.is_dir():
        raise SpecError(f"results directory not found: {path}")
    if not any((path / "points").glob("*.parquet")):
        raise SpecError(f"{path} holds no sweep results (expected points/*.parquet, "
                        "as `sweep run` writes)")


def main(argv: list[str] | None = None) -> None:
    """Entry point: bad arguments are one line on stderr and exit status 2. `rooftui
    serve ...` serves the app to a web browser (`rooftui.tui.serve`)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        from rooftui.tui.serve import serve

        serve(argv[1:])
        return
    args = parse_arguments(argv)
    from rooftui.core.errors import SpecError
    from rooftui.tui.settings import ExplorerSettings

    try:
        given = {key: getattr(args, key) for key in ("gpu", "model", "batch", "context")
                 if getattr(args, key) is not None}
        settings = ExplorerSettings(**given)
        settings.config()  # refuse unknown names or bad numbers before the screen opens
        if args.results_dir is not None:
            check_results_dir(args.results_dir)
    except SpecError as error:
        sys.stderr.write(f"rooftui: error: {error}\n")
        sys.exit(2)
    from rooftui.tui.rooftui_app import RooftuiApp

    app = RooftuiApp(args.results_dir, settings=settings, output_dir=args.output_dir,
                     hires=args.plot)
    app.run()
    sys.exit(app.return_code or 0)


if __name__ == "__main__":
    main()
