"""Start-up wall time of the commands against importing their libraries (issue 19).

Each command runs `--runs` times in a fresh process, interleaved so that load changes
touch every command alike; the median and the fastest run are printed, with the ratios
the issue sets targets on: `sweep --help` <= 2x `python -c "import click"`, `sweep
point` <= 1.5x `python -c "import numpy"`.

Every command runs with its bytecode cached, as an installed package has it (numpy's is
written when it is installed): written once, before the timed runs, to a private
PYTHONPYCACHEPREFIX, even where PYTHONDONTWRITEBYTECODE is set (it is on the development
machines, where every command otherwise compiles rooftui's modules from source, about
0.1 s). `--no-bytecode` times them that way instead.

    python benchmarks/bench_startup.py [--runs 10] [--no-bytecode]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = {
    "import click": [sys.executable, "-c", "import click"],
    "import numpy": [sys.executable, "-c", "import numpy"],
    "sweep --help": ["sweep", "--help"],
    "sweep point --help": ["sweep", "point", "--help"],
    "sweep point": ["sweep", "point"],
    "rooftui --help": ["rooftui", "--help"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--no-bytecode", action="store_true",
                        help="compile every module from source, every run")
    args = parser.parse_args()
    bin_dir = os.path.dirname(sys.executable)  # the venv's entry points
    commands = {name: [shutil.which(argv[0], path=bin_dir) or argv[0], *argv[1:]]
                for name, argv in COMMANDS.items()}
    times: dict[str, list[float]] = {name: [] for name in commands}
    cache = tempfile.TemporaryDirectory(prefix="bench-startup-pycache-")
    env = {key: value for key, value in os.environ.items()
           if key != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPYCACHEPREFIX": cache.name}
    if args.no_bytecode:
        env = dict(os.environ) | {"PYTHONDONTWRITEBYTECODE": "1"}
    print(f"bytecode: {'none (compiled every run)' if args.no_bytecode else 'cached'}")
    for argv in commands.values():  # writes the bytecode cache; not timed
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=env)
    print(f"load before: {os.getloadavg()[0]:.2f}")
    for _ in range(args.runs):
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=env)
            times[name].append(time.perf_counter() - start)
    cache.cleanup()
    median = {name: statistics.median(values) for name, values in times.items()}
    for name, values in times.items():
        print(f"{name:>20}: median {median[name] * 1e3:6.0f} ms, fastest "
              f"{min(values) * 1e3:6.0f} ms ({args.runs} runs)")
    print(f"sweep --help / import click: {median['sweep --help'] / median['import click']:.2f}x "
          "(target <= 2)")
    print(f"sweep point / import numpy: {median['sweep point'] / median['import numpy']:.2f}x "
          "(target <= 1.5)")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
