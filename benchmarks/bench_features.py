"""Evaluation speed of the step model with issue 8's features off and on.

Times `gather_step_inputs` + `evaluate_step` (every output, `max_batch_for_tpot`
included, as BENCHMARKS.md measures it) over a grid of random configurations (default
2 million points, gathered from random indices in chunks, as a sweep shard is: random
GPU, model, batch 1-1024, context 128-128K, bf16/fp8 weights and KV, a 512-token prefill
chunk in 30 % of the steps) and prints points per second for each mode:

- dense: the dense shipped models, tp = 1, no speculation (the baseline);
- moe: the mixture-of-experts models (expected experts touched per step, MLA for
  DeepSeek-V3, mxfp4 experts for gpt-oss);
- tp2: the dense models split over 2 GPUs (the communication part);
- spec: the dense models with 4 speculative tokens at acceptance 0.7, drafted for free;
- draft: the same with a draft model (Llama-2-7B), whose 4 decode steps are a second
  model's evaluation;
- all: every model with tp 2 and speculation with the draft model together.

Run: python benchmarks/bench_features.py [--points N] [--chunk C] [--repeats R]
         [--modes dense,moe,...] [--tpot-budget SECONDS | --no-tpot]
The best of R runs is reported (the machine is shared; the minimum is the least noisy).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from rooftui.core.assumptions import Assumptions
from rooftui.core.hardware import load_gpu
from rooftui.core.model import ModelArrays, load_model
from rooftui.core.spec_files import shipped_names
from rooftui.core.step import evaluate_step
from rooftui.core.tables import GPUTable, dtype_code, gather_step_inputs

DENSE = ["llama-2-7b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "llama-3.1-405b",
         "mistral-7b", "qwen2.5-7b", "qwen2.5-72b", "phi-3-mini", "gemma-2-9b", "gemma-2-27b"]
MOE = ["mixtral-8x7b", "mixtral-8x22b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3",
       "gpt-oss-20b", "gpt-oss-120b"]
DRAFT = "llama-2-7b"
MODES = ("dense", "moe", "tp2", "spec", "draft", "all")


class Grid:
    """Random configurations of one mode, gathered chunk by chunk."""

    def __init__(self, points: int, mode: str, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.gpus = GPUTable.of([load_gpu(name) for name in shipped_names("gpus")])
        wanted = {"moe": MOE, "all": DENSE + MOE}.get(mode, DENSE)
        names = [m for m in wanted if m in shipped_names("models")]
        self.features: dict = {}
        if mode in ("spec", "draft", "all"):
            self.features.update(spec_tokens=4, acceptance=0.7)
        if mode in ("draft", "all"):
            names.append(DRAFT)
            self.features["draft_model"] = len(names) - 1
        if mode in ("tp2", "all"):
            self.features["tp"] = 2
        self.models = ModelArrays.stack([load_model(name) for name in names])
        bf16, fp8 = dtype_code("bf16"), dtype_code("fp8")
        self.axes = {
            "gpu": rng.integers(0, len(self.gpus.gpus), points),
            "model": rng.integers(0, len(names) - ("draft_model" in self.features), points),
            "batch": rng.integers(1, 1025, points).astype(float),
            "context": rng.integers(128, 131073, points).astype(float),
            "prefill": np.where(rng.random(points) < 0.3, 512.0, 0.0),
            "weight_dtype": rng.choice([bf16, fp8], points),
            "kv_dtype": rng.choice([bf16, fp8], points),
        }
        self.compute = bf16

    def inputs(self, lo: int, hi: int):
        return gather_step_inputs(
            self.gpus, self.models, prefill_context=0,
            compute_dtype=self.compute, **{k: v[lo:hi] for k, v in self.axes.items()},
            **self.features)


def best_rate(grid: Grid, points: int, chunk: int, repeats: int, budget) -> float:
    assumptions = Assumptions()
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        for lo in range(0, points, chunk):
            evaluate_step(grid.inputs(lo, min(lo + chunk, points)), assumptions, budget)
        best = min(best, time.perf_counter() - start)
    return points / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2_000_000)
    parser.add_argument("--chunk", type=int, default=65_536)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tpot-budget", type=float, default=0.05,
                        help="seconds, as bench_step_model.py (0: no max_batch_for_tpot)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated, of {', '.join(MODES)}")
    args = parser.parse_args()
    budget = args.tpot_budget or None
    rates = {}
    for mode in args.modes.split(","):
        grid = Grid(args.points, mode)
        rates[mode] = best_rate(grid, args.points, args.chunk, args.repeats, budget)
        print(f"{mode:>6}: {rates[mode] / 1e6:7.2f} M points/s ({args.points:,} points in "
              f"chunks of {args.chunk:,}, tpot budget {budget}, best of {args.repeats})",
              flush=True)
    if "dense" in rates:
        for mode, value in rates.items():
            if mode != "dense":
                print(f"{mode:>6}: {value / rates['dense']:.2f} x the dense rate")


if __name__ == "__main__":
    main()
