"""Speed of the vectorised step model against a plain per-configuration Python loop.

Evaluates every output of `sweep point` (max_batch_for_tpot included) over a grid of
random configurations (shipped dense models and GPUs, batch, context, prefill, dtypes),
in chunks so the working set stays in cache, then the same formulas one configuration at
a time (benchmarks/plain_step.py). Prints both rates and their ratio.

    python benchmarks/bench_step_model.py [--points 10000000] [--chunk 65536]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from rooftui.core.assumptions import Assumptions
from rooftui.core.hardware import load_gpu
from rooftui.core.model import ModelArrays, load_model
from rooftui.core.step import evaluate_step
from rooftui.core.tables import DTYPES, GPUTable, gather_step_inputs

sys.path.insert(0, str(Path(__file__).parent))
from plain_step import plain_step  # noqa: E402

MODELS = ["llama-3-8b", "llama-3-70b", "qwen2.5-7b", "mistral-7b", "reference-mha-6.4b"]
GPUS = ["h100-sxm", "h200", "a100-80gb", "b200"]


def random_grid(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "gpu": rng.integers(0, len(GPUS), n),
        "model": rng.integers(0, len(MODELS), n),
        "batch": 2.0 ** rng.integers(0, 11, n),
        "context": 2.0 ** rng.integers(7, 18, n),
        "prefill": np.where(rng.random(n) < 0.3, 512.0, 0.0),
        "prefill_context": np.zeros(n),
        "weight_dtype": rng.choice([DTYPES.index("bf16"), DTYPES.index("fp8")], n),
        "kv_dtype": rng.choice([DTYPES.index("bf16"), DTYPES.index("fp8")], n),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10_000_000)
    parser.add_argument("--chunk", type=int, default=65_536)
    parser.add_argument("--plain-points", type=int, default=20_000)
    args = parser.parse_args()

    gpus = GPUTable.of([load_gpu(g) for g in GPUS])
    models = ModelArrays.stack([load_model(m) for m in MODELS])
    assumptions = Assumptions()
    rng = np.random.default_rng(0)
    grid = random_grid(args.points, rng)
    compute = DTYPES.index("bf16")

    def inputs(lo: int, hi: int):
        g = {k: v[lo:hi] for k, v in grid.items()}
        return gather_step_inputs(gpus, models, compute_dtype=compute, **g)

    start = time.perf_counter()
    checksum = 0.0
    for lo in range(0, args.points, args.chunk):
        out = evaluate_step(inputs(lo, min(lo + args.chunk, args.points)), assumptions,
                            tpot_budget=0.05)
        checksum += float(out["step_time_s"][0])
    vector_s = time.perf_counter() - start
    vector_rate = args.points / vector_s

    full = inputs(0, args.plain_points)
    m = full.model
    configs = [{
        "hidden": m.hidden[i], "layers": m.layers[i], "heads": m.heads[i],
        "kv_heads": full.kv_heads[i], "head_dim": m.head_dim[i],
        "ffn_params_per_layer": m.ffn_params_per_layer[i],
        "lm_head_params": m.lm_head_params[i],
        "static_resident_params": m.static_resident_params[i], "qkv_bias": m.qkv_bias[i],
        "window": m.window[i], "windowed_layers": m.windowed_layers[i],
        "batch": full.batch[i], "context": full.context[i], "prefill": full.prefill[i],
        "prefill_context": full.prefill_context[i], "weight_bytes": full.weight_bytes[i],
        "kv_bytes": full.kv_bytes[i], "activation_bytes": 2.0,
        "peak_flops": full.peak_flops[i], "bandwidth": full.bandwidth[i],
        "memory": full.memory[i], "mfu": 1.0, "mbu": 1.0, "memory_reserve": 0.0,
        "causal": True, "kv_write": True, "activation_traffic": False, "overlap_full": False,
    } for i in range(args.plain_points)]
    configs = [{k: float(v) if not isinstance(v, bool) else v for k, v in c.items()}
               for c in configs]
    start = time.perf_counter()
    for c in configs:
        plain_step(c)
    plain_rate = args.plain_points / (time.perf_counter() - start)

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"python {platform.python_version()}, numpy {np.__version__}")
    print(f"command: python benchmarks/bench_step_model.py --points {args.points} "
          f"--chunk {args.chunk}")
    print(f"vectorised: {args.points:,} configurations in {vector_s:.2f} s = "
          f"{vector_rate / 1e6:.1f} M configs/s (every sweep point output, TPOT limit too)")
    print(f"plain loop: {plain_rate / 1e3:.0f} k configs/s (same formulas, one at a time)")
    print(f"ratio: {vector_rate / plain_rate:.0f}x")


if __name__ == "__main__":
    main()
