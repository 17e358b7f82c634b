"""One configuration per call: `evaluate_point`'s rate against plain Python, and a flat
grid in one call against the same in blocks (issue 19, items 1 and 2).

Per call, on the same random configurations (GPU, model, batch 1-1024, context
128-128K, a 512-token prefill chunk in 30 % of them, bf16/fp8 weights and KV):
- `evaluate_point` as it is (tables cached per GPU, model, formats, ...; the step traced
  into straight-line Python per setup once met `TRACE_AFTER` times, core/step_trace.py);
- the same with the caches cleared before every call (a setup met for the first time:
  tables gathered, the step model untraced);
- with `--before REV`, `evaluate_point` as it was at REV, in a subprocess whose core
  is REV's (`git archive`), on the same configurations;
- benchmarks/plain_step.py on the dense ones (its formulas cover dense steps only).
`--features` draws every feature instead (MoE and MLA models, windows, TP, pp/ep/dp on
a system, speculation with and without a draft model, calibrated profiles, a TPOT
budget, energy and price), where plain_step cannot follow.

Flat grid: 1 M random configurations (benchmarks/bench_features.py's dense mode, or
with `--flat-mode all` every feature) gathered once, evaluated by one `evaluate_step`
call (which evaluates blocks of rows itself), by one call with the blocks switched off,
and by calls of 65,536 points. Every timing takes turns with the others it is compared
with, so a change of the machine's load hits them alike.

    python benchmarks/bench_point.py [--configs 20000] [--repeats 3] [--features]
        [--setups N] [--before afe7641] [--flat-points 1000000] [--flat-mode all]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import types
from io import BytesIO
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))


def use_core_from(root: Path) -> None:
    """Import `rooftui.core` (and the specs) from `root` instead of the checkout."""
    package = types.ModuleType("rooftui")
    package.__path__ = [str(root)]
    sys.modules["rooftui"] = package


def configurations(count: int, features: bool, setups: int = 0, seed: int = 0) -> list:
    import numpy as np

    from rooftui.core.assumptions import load_profile
    from rooftui.core.errors import SpecError
    from rooftui.core.hardware import load_gpu
    from rooftui.core.model import load_model
    from rooftui.core.point import PointConfig
    from rooftui.core.systems import load_system

    rng = np.random.default_rng(seed)
    gpus = [load_gpu(name) for name in ("h100-sxm", "h200", "a100-80gb", "b200")]
    dense = ["llama-3-8b", "llama-3-70b", "qwen2.5-7b", "mistral-7b", "reference-mha-6.4b"]
    moe = ["mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3", "gpt-oss-20b", "gemma-2-9b"]
    models = [load_model(name) for name in dense + (moe if features else [])]
    drafts = [None, load_model("llama-3-8b")]
    profiles = [load_profile(name) for name in ("ideal", "derated", "h100-splitwise")]
    systems = [None, load_system("hgx-h200-ib")]
    out, pool = [], []
    while len(out) < count:
        lengths = {"batch": int(rng.integers(1, 1025)),
                   "context": int(rng.integers(128, 131073)),
                   "prefill": 512 if rng.random() < 0.3 else 0}
        if setups and len(pool) >= setups:  # a known setup at another batch and lengths
            out.append(pool[rng.integers(len(pool))].with_changes(**lengths))
            continue
        values = {"gpu": gpus[rng.integers(len(gpus))],
                  "model": models[rng.integers(len(models))], **lengths,
                  "weight_dtype": ["bf16", "fp8"][rng.integers(2)],
                  "kv_dtype": ["bf16", "fp8"][rng.integers(2)]}
        if features:
            spec = int(rng.choice([0, 4]))
            values.update(
                tp=int(rng.choice([1, 2, 4])), spec_tokens=spec,
                acceptance=0.7 if spec else None,
                draft_model=drafts[rng.integers(2)] if spec else None,
                assumptions=profiles[rng.integers(len(profiles))],
                tpot_budget=float(rng.choice([0.02, 0.05])), energy=True,
                price_per_gpu_hour=2.5, system=systems[rng.integers(2)])
            if values["model"].is_moe and rng.random() < 0.5:
                values.update(ep=values["tp"], pp=2)
        try:
            config = PointConfig(**values)
            config.step_inputs()  # a GPU without a peak for the format refuses it
            out.append(config)
            pool.append(config)
        except SpecError:
            continue
    return out


def best_seconds(runs: list, repeats: int) -> list[float]:
    """Each run's best time over `repeats`, the runs taking turns (so that a change of
    the machine's load hits them alike)."""
    best = [float("inf")] * len(runs)
    for _ in range(repeats):
        for index, run in enumerate(runs):
            start = time.perf_counter()
            run()
            best[index] = min(best[index], time.perf_counter() - start)
    return best


def point_calls(configs, clear_cache: bool = False):
    """`evaluate_point` on each configuration (with `clear_cache`, each met afresh)."""
    from rooftui.core import point

    def run():
        for config in configs:
            if clear_cache:  # every setup met for the first time
                point._gathered_inputs.cache_clear()
                point._SetupTrace.cache_clear()
                point._SETUPS_BY_IDENTITY.clear()
            point.evaluate_point(config)
    return run


def plain_calls(configs):
    """benchmarks/plain_step.py on each configuration's inputs (gathered beforehand)."""
    from plain_step import plain_inputs, plain_step

    sample = [plain_inputs(config.step_inputs()) for config in configs]

    def run():
        for c in sample:
            plain_step(c)
    return run


def before_rate(rev: str, args) -> float:
    """`evaluate_point` at `rev`, on the same configurations, in a fresh process."""
    archive = subprocess.run(["git", "archive", rev, "core", "specs"], cwd=HERE.parent,
                             capture_output=True, check=True).stdout
    with tempfile.TemporaryDirectory() as scratch, tarfile.open(
            fileobj=BytesIO(archive)) as files:
        files.extractall(scratch, filter="data")
        result = subprocess.run(
            [sys.executable, __file__, "--core-from", scratch, "--configs", str(args.configs),
             "--repeats", str(args.repeats), "--setups", str(args.setups)]
            + (["--features"] if args.features else []),
            capture_output=True, text=True, check=True)
    return float(result.stdout.split()[-1])


def flat_rates(points: int, repeats: int, mode: str) -> tuple[float, float, float]:
    from bench_features import Grid

    from rooftui.core import step_chunks
    from rooftui.core.assumptions import Assumptions
    from rooftui.core.step import evaluate_step

    grid, assumptions, chunk = Grid(points, mode), Assumptions(), 65_536
    whole = grid.inputs(0, points)
    blocks = [grid.inputs(lo, min(lo + chunk, points)) for lo in range(0, points, chunk)]

    def without_blocks():
        default, step_chunks.CHUNK_POINTS = step_chunks.CHUNK_POINTS, points
        try:
            evaluate_step(whole, assumptions, 0.05)
        finally:
            step_chunks.CHUNK_POINTS = default

    one_call, unsplit, chunked = best_seconds(
        [lambda: evaluate_step(whole, assumptions, 0.05), without_blocks,
         lambda: [evaluate_step(b, assumptions, 0.05) for b in blocks]], repeats)
    return points / one_call, points / unsplit, points / chunked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--features", action="store_true")
    parser.add_argument("--setups", type=int, default=0,
                        help="draw the configurations from this many setups (GPU, model, "
                             "formats, layout, ...) at random batches and lengths, as an "
                             "explorer or optimizer moves; 0: each its own setup")
    parser.add_argument("--before", metavar="REV", help="also time evaluate_point at REV")
    parser.add_argument("--flat-points", type=int, default=1_000_000, help="0: skip")
    parser.add_argument("--flat-mode", default="dense", choices=["dense", "all"],
                        help="the flat grid's configurations (bench_features.py's modes; "
                             "all: every feature)")
    parser.add_argument("--core-from", help=argparse.SUPPRESS)  # --before's subprocess
    args = parser.parse_args()
    if args.core_from:
        use_core_from(Path(args.core_from))
        configs = configurations(args.configs, args.features, args.setups)
        print(len(configs) / best_seconds([point_calls(configs)], args.repeats)[0])
        return
    from machine_info import describe_machine

    print(f"machine: {describe_machine()}")
    configs = configurations(args.configs, args.features, args.setups)
    kind = "every feature" if args.features else "dense"
    kind += f", {args.setups} setups" if args.setups else ", each its own setup"
    runs = [point_calls(configs)]
    if not args.features:  # plain_step's formulas cover dense steps only
        runs.append(plain_calls(configs))
    now, *plain = (len(configs) / seconds for seconds in best_seconds(runs, args.repeats))
    # after the others: clearing the caches would have them trace every setup again
    rebuilt = len(configs) / best_seconds([point_calls(configs, clear_cache=True)],
                                          args.repeats)[0]
    print(f"evaluate_point ({kind}, {len(configs):,} configurations, best of "
          f"{args.repeats}): {now / 1e3:.1f} k/s; caches cleared per call "
          f"{rebuilt / 1e3:.2f} k/s ({now / rebuilt:.1f}x)")
    if plain:
        print(f"plain_step.py, taking turns with it: {plain[0] / 1e3:.1f} k/s; "
              f"evaluate_point {now / plain[0]:.2f}x it")
    if args.before:
        then = before_rate(args.before, args)
        print(f"evaluate_point at {args.before}: {then / 1e3:.1f} k/s; now "
              f"{now / then:.1f}x that")
    if args.flat_points:
        one_call, unsplit, chunked = flat_rates(args.flat_points, args.repeats,
                                                 args.flat_mode)
        print(f"flat grid of {args.flat_points:,} ({args.flat_mode}): one call "
              f"{one_call / 1e6:.2f} M/s, one call without blocks {unsplit / 1e6:.2f} M/s, "
              f"calls of 65,536 {chunked / 1e6:.2f} M/s (one call takes "
              f"{chunked / one_call:.2f}x the time of the calls of 65,536)")
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
