"""The step model's formulas for ONE configuration in plain Python (floats and `math`).

A deliberately independent re-statement of core/step.py: the property tests check the
vectorised core against it on random configurations, and bench_step_model.py times it
as the per-configuration loop the core must beat.
"""

from __future__ import annotations

import math


def window_integral(x: float, window: float) -> float:
    capped = min(x, window)
    return capped * x - 0.5 * capped * capped


def plain_step(c: dict) -> dict:
    """`c`: hidden, layers, heads, kv_heads, head_dim, ffn_params_per_layer,
    lm_head_params, static_resident_params, qkv_bias, window, windowed_layers, batch,
    context, prefill, prefill_context, weight_bytes, kv_bytes, activation_bytes,
    peak_flops, bandwidth, memory, mfu, mbu, memory_reserve, causal, kv_write,
    activation_traffic, overlap_full."""
    d, L, h, kv, hd = c["hidden"], c["layers"], c["heads"], c["kv_heads"], c["head_dim"]
    B, S, N, C = c["batch"], c["context"], c["prefill"], c["prefill_context"]
    W, Lw = c["window"], c["windowed_layers"]
    Lf = L - Lw
    layer_params = d * hd * (2 * h + 2 * kv) + c["ffn_params_per_layer"]
    gemm_params = L * layer_params + c["lm_head_params"]
    tokens = B + N
    rows = B + (1 if N > 0 else 0)
    parts = {
        "gemm": (2 * (L * layer_params * tokens + c["lm_head_params"] * rows),
                 gemm_params * c["weight_bytes"] if tokens > 0 else 0.0)
    }
    kv_token_layer = 2 * kv * hd * c["kv_bytes"]
    decode_keys = Lf * S + Lw * min(S, W)
    end = C + N
    if c["causal"]:
        pairs = Lf * (N * C + 0.5 * N * N) + Lw * (window_integral(end, W) - window_integral(C, W))
    else:
        pairs = Lf * N * end + Lw * N * min(end, W)
    prompt_keys = Lf * end + Lw * min(end, W)
    attention_bytes = kv_token_layer * (B * decode_keys + (prompt_keys if N > 0 else 0))
    if c["kv_write"]:
        attention_bytes += kv_token_layer * L * tokens
    parts["attention"] = (4 * h * hd * (B * decode_keys + pairs), attention_bytes)
    if c["activation_traffic"]:
        per_token_layer = 4 * d + 4 * h * hd + 2 * kv * hd + c["ffn_params_per_layer"] / d
        vocab = c["lm_head_params"] / d
        parts["activations"] = (0.0, c["activation_bytes"] * (
            L * per_token_layer * tokens + (d + vocab) * rows))
    compute_rate = c["mfu"] * c["peak_flops"]
    memory_rate = c["mbu"] * c["bandwidth"]
    times = {k: max(f / compute_rate, b / memory_rate) for k, (f, b) in parts.items()}
    flops = sum(f for f, _ in parts.values())
    nbytes = sum(b for _, b in parts.values())
    step = (max(flops / compute_rate, nbytes / memory_rate) if c["overlap_full"]
            else sum(times.values()))
    resident = (L * (layer_params + c["qkv_bias"] * (h + 2 * kv) * hd)
                + c["static_resident_params"])
    weight_bytes = resident * c["weight_bytes"]
    kv_per_sequence = kv_token_layer * decode_keys
    kv_bytes = B * kv_per_sequence + kv_token_layer * prompt_keys
    free = c["memory"] - weight_bytes - c["memory_reserve"] - kv_token_layer * prompt_keys
    return {
        "step_time_s": step,
        "tokens_per_s": B / step,
        "flops": flops,
        "bytes": nbytes,
        "gemm_time_s": times["gemm"],
        "attention_time_s": times["attention"],
        "attention_share": times["attention"] / sum(times.values()),
        "mfu": flops / (step * c["peak_flops"]),
        "mbu": nbytes / (step * c["bandwidth"]),
        "weight_bytes": weight_bytes,
        "kv_bytes": kv_bytes,
        "max_batch": math.floor(free / kv_per_sequence) if free > 0 else 0.0,
        "fits": weight_bytes + kv_bytes + c["memory_reserve"] <= c["memory"],
    }


def plain_inputs(one) -> dict:
    """`plain_step`'s input for a one-configuration `StepInputs` of the core (ideal
    profile, causal attention, KV write on), as plain floats and booleans."""
    m = one.model
    values = {
        "hidden": m.hidden, "layers": m.layers, "heads": m.heads, "kv_heads": one.kv_heads,
        "head_dim": m.head_dim, "ffn_params_per_layer": m.ffn_params_per_layer,
        "lm_head_params": m.lm_head_params,
        "static_resident_params": m.static_resident_params, "qkv_bias": m.qkv_bias,
        "window": m.window, "windowed_layers": m.windowed_layers, "batch": one.batch,
        "context": one.context, "prefill": one.prefill,
        "prefill_context": one.prefill_context, "weight_bytes": one.weight_bytes,
        "kv_bytes": one.kv_bytes, "activation_bytes": 2.0, "peak_flops": one.peak_flops,
        "bandwidth": one.bandwidth, "memory": one.memory, "mfu": 1.0, "mbu": 1.0,
        "memory_reserve": 0.0, "causal": True, "kv_write": True,
        "activation_traffic": False, "overlap_full": False}
    return {key: value if isinstance(value, bool) else float(value)
            for key, value in values.items()}
