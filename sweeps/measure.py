"""Measuring this machine's kernels with PyTorch, in the calibration CSV format.

Three kinds of rows (see `sweeps.measured`):
- `copy`: device-to-device copies of growing size (bandwidth a plain stream reaches);
- `gemm`: the weight matmuls of one layer of a model's shard (fused QKV, O, gate+up,
  down) over a grid of token counts M, in bf16 (and fp8 where the GPU and PyTorch have
  `torch._scaled_mm`);
- `attention_decode`: one layer's decode attention (one query per sequence against its
  cached K and V, grouped-query heads) over batch x context.

On a GPU the sizes are those of serving; on a CPU the same code runs at tiny sizes, so
the path can be tested anywhere, and the rows say `cpu`: CPU figures are not GPU figures
and calibrate nothing about a GPU. Times are medians of repeats after warm-up, taken with
CUDA events on a GPU and `time.perf_counter` on a CPU. PyTorch is imported only here, and
only when measuring (`pip install 'rooftui[measure]'`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from rooftui.core.errors import SpecError
from rooftui.core.model import Model

CPU_WARNING = ("measuring on the CPU: these are CPU figures, not GPU figures; they test "
               "the measuring path and calibrate nothing about a GPU")


@dataclass(frozen=True)
class Sizes:
    """The grids measured: copy sizes (bytes), GEMM token counts, decode batches and
    contexts, and repeats per point."""

    copy_bytes: tuple[int, ...]
    tokens: tuple[int, ...]
    batches: tuple[int, ...]
    contexts: tuple[int, ...]
    repeats: int
    warmup: int


GPU_SIZES = Sizes(copy_bytes=tuple(2 ** p for p in range(20, 32, 2)),
                  tokens=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192),
                  batches=(1, 4, 16, 64, 256), contexts=(128, 512, 2048, 8192, 32768),
                  repeats=20, warmup=5)
CPU_SIZES = Sizes(copy_bytes=(2 ** 16, 2 ** 18, 2 ** 20), tokens=(1, 4, 16),
                  batches=(1, 4), contexts=(16, 64), repeats=5, warmup=2)


def import_torch():
    try:
        import torch
    except ImportError:
        raise SpecError("sweep measure needs PyTorch: pip install 'rooftui[measure]' "
                        "(or pip install torch)") from None
    return torch


def device_of(torch, requested: str):
    """`auto` picks CUDA when present; `cuda` without one is an error."""
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise SpecError("no CUDA device is visible to PyTorch; use --device cpu")
    return torch.device(requested)


def device_name(torch, device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def _timer(torch, device, sizes: Sizes) -> Callable[[Callable[[], object]], float]:
    """Median seconds of `work()` over `sizes.repeats` runs after `sizes.warmup`."""

    def measure(work: Callable[[], object]) -> float:
        for _ in range(sizes.warmup):
            work()
        samples = []
        for _ in range(sizes.repeats):
            if device.type == "cuda":
                start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                start.record()
                work()
                end.record()
                torch.cuda.synchronize(device)
                samples.append(start.elapsed_time(end) / 1e3)
            else:
                begin = time.perf_counter()
                work()
                samples.append(time.perf_counter() - begin)
        return statistics.median(samples)

    return measure


def layer_gemm_shapes(model: Model, tp: int) -> list[tuple[str, int, int]]:
    """(name, n, k) of one layer shard's weight matmuls: Y[m, n] = X[m, k] W[k, n]."""
    heads = model.num_attention_heads // tp
    kv_heads = max(model.num_key_value_heads // tp, 1)
    width = model.intermediate_size // tp
    gate_up = (2 if model.ffn_gated else 1) * width
    d, hd = model.hidden_size, model.head_dim
    return [("qkv", (heads + 2 * kv_heads) * hd, d), ("o", d, heads * hd),
            ("gate_up", gate_up, d), ("down", d, width)]


def measure(model: Model, model_name: str, tp: int = 1, device: str = "auto",
            label: str | None = None, fp8: bool = True,
            progress: Callable[[str], None] = lambda message: None) -> tuple[list[dict], str]:
    """Rows in the calibration format, and the device name they were measured on."""
    torch = import_torch()
    where = device_of(torch, device)
    on_gpu = where.type == "cuda"
    sizes = GPU_SIZES if on_gpu else CPU_SIZES
    if not on_gpu:
        torch.set_num_threads(1)  # steadier timings on a shared machine; tiny sizes anyway
    name = device_name(torch, where)
    gpu = label or name
    timed = _timer(torch, where, sizes)
    source = f"sweep measure on {name} (torch {torch.__version__})"
    dataset = f"measured on {gpu}"
    rows: list[dict] = []

    def add(kind: str, seconds: float, **values) -> None:
        rows.append({"kind": kind, "gpu": gpu, "time_s": seconds, "dataset": dataset,
                     "source": source, **values})

    progress("copies")
    for size in sizes.copy_bytes:
        source_tensor = torch.empty(size, dtype=torch.uint8, device=where)
        target = torch.empty_like(source_tensor)
        add("copy", timed(lambda s=source_tensor, t=target: t.copy_(s)), bytes=float(size))
        del source_tensor, target

    progress("GEMMs")
    formats = [("bf16", torch.bfloat16)]
    if fp8 and on_gpu and hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn") \
            and torch.cuda.get_device_capability(where) >= (8, 9):
        formats.append(("fp8", torch.float8_e4m3fn))
    for _, n, k in layer_gemm_shapes(model, tp):
        for dtype_name, dtype in formats:
            weight = torch.randn(n, k, device=where).to(dtype)  # (n, k): W transposed
            for m in sizes.tokens:
                inputs = torch.randn(m, k, device=where).to(dtype)
                if dtype_name == "fp8":
                    scale = torch.ones((), device=where)
                    work = lambda x=inputs, w=weight, s=scale: torch._scaled_mm(  # noqa: E731
                        x, w.t(), scale_a=s, scale_b=s, out_dtype=torch.bfloat16)
                else:
                    work = lambda x=inputs, w=weight: x @ w.t()  # noqa: E731
                add("gemm", timed(work), m=float(m), n=float(n), k=float(k), dtype=dtype_name)
            del weight

    progress("decode attention")
    heads = model.num_attention_heads // tp
    kv_heads = max(model.num_key_value_heads // tp, 1)
    group, head_dim = heads // kv_heads, model.head_dim
    for batch in sizes.batches:
        for context in sizes.contexts:
            keys = torch.randn(batch, kv_heads, context, head_dim, device=where,
                               dtype=torch.bfloat16)
            values = torch.randn_like(keys)
            query = torch.randn(batch, kv_heads, group, head_dim, device=where,
                                dtype=torch.bfloat16)

            def attend(q=query, k=keys, v=values, scale=head_dim ** -0.5):
                scores = torch.softmax((q @ k.transpose(-1, -2)) * scale, dim=-1)
                return scores @ v

            add("attention_decode", timed(attend), model=model_name, tp=float(tp),
                batch=float(batch), context=float(context), dtype="bf16", kv_dtype="bf16")
            del keys, values, query
    return rows, name
