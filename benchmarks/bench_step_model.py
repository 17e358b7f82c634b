"""Speed of the vectorised step model against a plain per-configuration Python loop.

The grid: 4 GPUs x 5 dense models x 2 weight formats x 2 KV formats x 4 prefill chunks x
32 contexts (128 to 128K, geometric) x 1,024 batches (1 to 1,024) = 10,485,760 points.
It is evaluated as `sweep run` evaluates grids: one call per (GPU, model, formats,
prefill) block, with context and batch as broadcast axes, so a quantity that depends on
the context alone is computed once per context. Every output of `sweep point` is
computed, max_batch_for_tpot included. Then the same formulas one configuration at a time
(benchmarks/plain_step.py) on a random sample of the grid. Prints both rates and their
ratio.

    python benchmarks/bench_step_model.py [--batches 1024] [--plain-points 20000] [--repeats 3]
    python benchmarks/bench_step_model.py --features   # the same grid with MoE models,
                                                       # TP 2 and speculative decoding
    python benchmarks/bench_step_model.py --features --models moe --tp 1 --spec-tokens 0
                                        [--tpot-budget 0]   # one feature at a time
    python benchmarks/bench_step_model.py --features --models dense --tp 1 \
                                        --draft-model llama-2-7b  # drafting by a model
    python benchmarks/bench_step_model.py --features --tp 2 --dp 4 --ep 8 --pp 2 \
                                        --system hgx-h200-ib --spec-tokens 0
                                        # cluster layouts (core/parallel.py)
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from pathlib import Path

import numpy as np

from rooftui.core.assumptions import Assumptions
from rooftui.core.hardware import load_gpu
from rooftui.core.model import ModelArrays, load_model
from rooftui.core.step import evaluate_step
from rooftui.core.systems import load_system
from rooftui.core.tables import DTYPES, GPUTable, SystemTable, gather_step_inputs

sys.path.insert(0, str(Path(__file__).parent))
from machine_info import describe_machine  # noqa: E402
from plain_step import plain_inputs, plain_step  # noqa: E402

MODELS = ["llama-3-8b", "llama-3-70b", "qwen2.5-7b", "mistral-7b", "reference-mha-6.4b"]
# --features: mixture-of-experts and windowed models, each split over 2 GPUs and verifying
# 4 speculated tokens per step (acceptance 0.7, free drafting)
FEATURE_MODELS = ["mixtral-8x7b", "qwen3-30b-a3b", "gpt-oss-20b", "gemma-2-9b", "llama-3-70b"]
GPUS = ["h100-sxm", "h200", "a100-80gb", "b200"]
WEIGHT_DTYPES = ["bf16", "int8"]  # int8 weights run bf16 matmuls: a peak on every GPU
KV_DTYPES = ["bf16", "fp8"]
PREFILLS = [0, 512, 2048, 8192]
CONTEXTS = np.geomspace(128, 131072, 32).round()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=1024)
    parser.add_argument("--plain-points", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3,
                        help="vectorised runs; the fastest is reported")
    parser.add_argument("--features", action="store_true",
                        help="issue 8's features (the options below); no plain loop")
    parser.add_argument("--models", choices=("dense", "moe"), default="moe",
                        help="with --features: the MoE/windowed models or the dense ones")
    parser.add_argument("--tp", type=int, default=2, help="with --features: TP degree")
    parser.add_argument("--spec-tokens", type=int, default=4,
                        help="with --features: speculated tokens (acceptance 0.7; 0: none)")
    parser.add_argument("--draft-model", metavar="NAME",
                        help="with --features and --spec-tokens: the draft model's cost")
    parser.add_argument("--tpot-budget", type=float, default=0.05,
                        help="seconds, for max_batch_for_tpot (0: not computed)")
    for name, what in (("pp", "pipeline stages"), ("ep", "expert-parallel GPUs"),
                       ("dp", "attention groups"), ("micro-batches", "micro-batches")):
        parser.add_argument(f"--{name}", type=int, help=f"with --features: {what}")
    parser.add_argument("--system", help="with --features: the system whose links time "
                                         "the collectives")
    args = parser.parse_args()

    gpus = GPUTable.of([load_gpu(g) for g in GPUS])
    moe = args.features and args.models == "moe"
    names = FEATURE_MODELS if moe else MODELS
    drafts = [args.draft_model] if args.features and args.draft_model else []
    models = ModelArrays.stack([load_model(m) for m in names + drafts])
    extra = {}
    if args.features:
        extra = {"tp": args.tp, "spec_tokens": args.spec_tokens,
                 "acceptance": 0.7 if args.spec_tokens else 0.0}
        if drafts:
            extra["draft_model"] = len(names)  # the table's last row
        extra.update({key: value for key, value in (
            ("pp", args.pp), ("ep", args.ep), ("dp", args.dp),
            ("micro_batches", args.micro_batches)) if value is not None})
        if args.system:
            extra.update(systems=SystemTable.of([load_system(args.system)]), system=0)
    budget = args.tpot_budget or None
    assumptions = Assumptions()
    batches = np.arange(1, args.batches + 1, dtype=np.float64)
    contexts = CONTEXTS[:, None]
    compute = DTYPES.index("bf16")
    blocks = list(itertools.product(range(len(GPUS)), range(len(MODELS)),
                                    [DTYPES.index(d) for d in WEIGHT_DTYPES],
                                    [DTYPES.index(d) for d in KV_DTYPES], PREFILLS))
    points = len(blocks) * contexts.size * batches.size

    def block_inputs(gpu, model, weight, kv, prefill, batch=batches, context=contexts):
        return gather_step_inputs(gpus, models, gpu=gpu, model=model, batch=batch,
                                  context=context, prefill=prefill, prefill_context=0,
                                  weight_dtype=weight, kv_dtype=kv, compute_dtype=compute,
                                  **extra)

    vector_s = np.inf
    for _ in range(args.repeats):  # the best of a few: the machine is shared
        start = time.perf_counter()
        for block in blocks:
            out = evaluate_step(block_inputs(*block), assumptions, tpot_budget=budget)
            assert out["step_time_s"].shape == (contexts.size, batches.size)
        vector_s = min(vector_s, time.perf_counter() - start)
    vector_rate = points / vector_s
    if args.features:
        shown = {key: value for key, value in extra.items() if key != "systems"}
        print(f"features ({', '.join(names)}; {shown}; TPOT budget {budget} s): {points:,} "
              f"configurations in {vector_s:.2f} s (best of {args.repeats}) = "
              f"{vector_rate / 1e6:.1f} M configs/s, load {os.getloadavg()[0]:.1f}")
        return

    rng = np.random.default_rng(0)
    sample = []
    for _ in range(args.plain_points):
        gpu, model, weight, kv, prefill = blocks[rng.integers(len(blocks))]
        one = block_inputs(gpu, model, weight, kv, prefill,
                           batch=float(rng.choice(batches)), context=float(rng.choice(CONTEXTS)))
        sample.append(plain_inputs(one))
    start = time.perf_counter()
    for config in sample:
        plain_step(config)
    plain_rate = len(sample) / (time.perf_counter() - start)

    print(f"machine: {describe_machine()}")
    print(f"command: python benchmarks/bench_step_model.py --batches {args.batches} "
          f"--plain-points {args.plain_points} --repeats {args.repeats}")
    print(f"vectorised: {points:,} configurations in {vector_s:.2f} s (best of "
          f"{args.repeats}) = "
          f"{vector_rate / 1e6:.1f} M configs/s (every sweep point output, TPOT limit too)")
    print(f"plain loop: {plain_rate / 1e3:.0f} k configs/s (same formulas, one at a time)")
    print(f"ratio: {vector_rate / plain_rate:.0f}x")


if __name__ == "__main__":
    main()
