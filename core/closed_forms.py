"""Closed forms the step model reduces to, for checking it and for reasoning without it.

Each takes scalars or numpy arrays.
"""

from __future__ import annotations

import numpy as np


def ridge(peak_flops, bandwidth):
    """FLOPs per byte where the compute roof meets the memory roof."""
    return np.asarray(peak_flops, dtype=np.float64) / bandwidth


def gemm_intensity(rows, k, n, bytes_per_element=2.0):
    """FLOPs per byte of (rows x k) @ (k x n), counting weights, input and output.

    For rows << k, n this is about 2 * rows / bytes_per_element: with 2-byte weights the
    intensity equals the batch (not B/2: each weight byte carries 2 FLOPs per row, and a
    2-byte weight is two bytes, so 2B FLOPs over 2 bytes).
    """
    rows = np.asarray(rows, dtype=np.float64)
    flops = 2.0 * rows * k * n
    return flops / (bytes_per_element * (k * n + rows * k + rows * n))


def decode_intensity_ceiling_standard(hidden, group_size, context):
    """Decode intensity as B -> infinity for the standard shape P = 12 L d^2, 16-bit
    weights and KV, no LM head: g * (6 d / S + 1)."""
    return np.asarray(group_size, dtype=np.float64) * (6.0 * hidden / np.asarray(context) + 1)


def throughput_ceiling(bandwidth, kv_bytes_per_token, context):
    """Decode tokens/s no batch can pass: every token re-reads its sequence's KV."""
    return np.asarray(bandwidth, dtype=np.float64) / (kv_bytes_per_token * np.asarray(context))


def kv_capacity(memory, weight_bytes, reserve, kv_bytes_per_token, context):
    """Sequences of `context` tokens whose KV fits beside the weights and the reserve."""
    free = np.asarray(memory, dtype=np.float64) - weight_bytes - reserve
    return np.where(free > 0, np.floor(free / (kv_bytes_per_token * np.asarray(context))), 0.0)


def harmonic(n):
    """H_n = 1 + 1/2 + ... + 1/n for integer arrays (exact summation up to max(n))."""
    n = np.asarray(n, dtype=np.int64)
    top = int(n.max()) if n.size else 0
    table = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, top + 1))])
    return table[n]


def exponential_static_occupancy(batch):
    """Useful share of slot-steps in a static batch of B iid exponential output lengths:
    E[L] / E[max of B] = 1 / H_B."""
    return 1.0 / harmonic(batch)
