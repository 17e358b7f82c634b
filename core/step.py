"""One engine step on the roofline, for whole arrays of configurations at once.

A step runs `B` decode tokens (each sequence with `S` tokens cached) and `N` prefill
tokens of one prompt chunk (with `C` tokens of that prompt cached). Its cost is split
into parts, each with FLOPs F and bytes moved:

- gemm: every weight matmul. F = 2 * params * tokens (the LM head only for tokens that
  sample: the B decode tokens and the prompt's last chunk); bytes = the matmul weights,
  read once per step and shared by all its tokens.
- attention: scores and weighted sum over the cache. Per layer, a query attending to K
  keys costs 4 * heads * head_dim * K FLOPs and the K keys cost
  2 * kv_heads * head_dim * K * kv_bytes to read. Decode attends to S keys per sequence;
  a prefill chunk to C + N/2 on average (causal) or C + N (full square). A windowed
  layer attends to at most `window` keys. New K/V written when `kv_write`.
- activations (when `activation_traffic`): hidden states each GEMM and attention kernel
  reads and writes, in the compute dtype; no FLOPs.

part time = max(F / (mfu * peak), bytes / (mbu * bandwidth)); the step is the sum of the
parts (overlap "parts") or one roofline over their sums (overlap "full").
Every input is a numpy array (or scalar) broadcastable to the grid: no Python loop per
configuration. Units: seconds, bytes, FLOPs, bytes/s, FLOP/s.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from rooftui.core.assumptions import Assumptions
from rooftui.core.model import ModelArrays

PARTS = ("gemm", "attention", "activations")


@dataclass(frozen=True)
class StepInputs:
    """Arrays broadcastable to one grid shape. Byte sizes are per element."""

    model: ModelArrays
    batch: np.ndarray
    context: np.ndarray
    prefill: np.ndarray
    prefill_context: np.ndarray
    kv_heads: np.ndarray  # usually model.kv_heads; a GQA what-if changes it
    weight_bytes: np.ndarray
    kv_bytes: np.ndarray
    activation_bytes: np.ndarray
    peak_flops: np.ndarray  # dense peak of the compute dtype
    bandwidth: np.ndarray  # bytes/s
    memory: np.ndarray  # bytes
    mfu: np.ndarray
    mbu: np.ndarray
    memory_reserve: np.ndarray  # bytes


def _window_integral(x: np.ndarray, window: np.ndarray) -> np.ndarray:
    """Integral of min(window, t) dt from 0 to x: keys attended by a causal run of queries."""
    capped = np.minimum(x, window)
    return capped * x - 0.5 * capped * capped


class _Shape:
    """Per-configuration quantities shared by the parts (computed once)."""

    def __init__(self, inputs: StepInputs) -> None:
        model = inputs.model
        self.heads_x_dim = model.heads * model.head_dim
        self.kv_x_dim = inputs.kv_heads * model.head_dim
        self.attention_params = model.hidden * model.head_dim * (
            2.0 * model.heads + 2.0 * inputs.kv_heads)
        self.layer_gemm_params = self.attention_params + model.ffn_params_per_layer
        self.gemm_params = model.layers * self.layer_gemm_params + model.lm_head_params
        self.full_layers = model.layers - model.windowed_layers
        # K and V of one token in one layer
        self.kv_token_layer_bytes = 2.0 * self.kv_x_dim * inputs.kv_bytes
        self.kv_bytes_per_token = self.kv_token_layer_bytes * model.layers
        # layer-keys one decode query attends to, summed over layers
        self.decode_keys = (self.full_layers * inputs.context
                            + model.windowed_layers * np.minimum(inputs.context, model.window))


def _part_costs(inputs: StepInputs, shape: _Shape, batch: np.ndarray,
                assumptions: Assumptions) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """FLOPs and bytes of each part for `batch` decode sequences."""
    model = inputs.model
    prefill, cached = inputs.prefill, inputs.prefill_context
    tokens = batch + prefill
    has_prefill = prefill > 0
    sampled_rows = batch + has_prefill

    gemm_flops = 2.0 * (model.layers * shape.layer_gemm_params * tokens
                        + model.lm_head_params * sampled_rows)
    gemm_bytes = shape.gemm_params * inputs.weight_bytes * (tokens > 0)

    # query-key pairs of the prefill chunk, summed over layers
    end = cached + prefill
    if assumptions.attention_flops == "causal":
        pairs_full = prefill * cached + 0.5 * prefill * prefill
        pairs_windowed = _window_integral(end, model.window) - _window_integral(
            cached, model.window)
    else:
        pairs_full = prefill * end
        pairs_windowed = prefill * np.minimum(end, model.window)
    prefill_pairs = shape.full_layers * pairs_full + model.windowed_layers * pairs_windowed
    prefill_keys = shape.full_layers * end + model.windowed_layers * np.minimum(
        end, model.window)
    keys_read = batch * shape.decode_keys + prefill_keys * has_prefill
    attention_flops = 4.0 * shape.heads_x_dim * (batch * shape.decode_keys + prefill_pairs)
    attention_bytes = shape.kv_token_layer_bytes * keys_read
    if assumptions.kv_write:
        attention_bytes = attention_bytes + shape.kv_bytes_per_token * tokens
    costs = {"gemm": (gemm_flops, gemm_bytes), "attention": (attention_flops, attention_bytes)}

    if assumptions.activation_traffic:
        # inputs and outputs of QKV, O, gate/up, down and the attention kernel, per token
        per_token_layer = (4.0 * model.hidden + 4.0 * shape.heads_x_dim + 2.0 * shape.kv_x_dim
                           + model.ffn_params_per_layer / model.hidden)
        vocab = model.lm_head_params / model.hidden
        activation_bytes = inputs.activation_bytes * (
            model.layers * per_token_layer * tokens + (model.hidden + vocab) * sampled_rows)
        costs["activations"] = (np.zeros_like(activation_bytes), activation_bytes)
    return costs


def _times(costs, compute_rate, memory_rate):
    return {name: np.maximum(f / compute_rate, b / memory_rate) for name, (f, b) in costs.items()}


def evaluate_step(inputs: StepInputs, assumptions: Assumptions,
                  tpot_budget: np.ndarray | float | None = None) -> dict[str, np.ndarray]:
    """Every metric of the step, as arrays over the broadcast grid (see `METRICS`)."""
    model = inputs.model
    shape = _Shape(inputs)
    batch = np.asarray(inputs.batch, dtype=np.float64)
    compute_rate = inputs.mfu * inputs.peak_flops
    memory_rate = inputs.mbu * inputs.bandwidth
    costs = _part_costs(inputs, shape, batch, assumptions)
    part_times = _times(costs, compute_rate, memory_rate)

    flops = sum(f for f, _ in costs.values())
    nbytes = sum(b for _, b in costs.values())
    sum_of_parts = sum(part_times.values())
    if assumptions.overlap == "parts":
        step_time = sum_of_parts
    else:
        step_time = np.maximum(flops / compute_rate, nbytes / memory_rate)

    with np.errstate(divide="ignore", invalid="ignore"):
        out: dict[str, np.ndarray] = {
            "step_time_s": step_time,
            "tokens_per_s": batch / step_time,
            "prefill_tokens_per_s": inputs.prefill / step_time,
            "per_user_tokens_per_s": np.where(batch > 0, 1.0 / step_time, 0.0),
            "flops": flops,
            "bytes": nbytes,
            "intensity": flops / nbytes,
            "ridge": inputs.peak_flops / inputs.bandwidth,
            "compute_bound": flops / compute_rate > nbytes / memory_rate,
            "attention_share": part_times["attention"] / sum_of_parts,
            "mfu": flops / (step_time * inputs.peak_flops),
            "mbu": nbytes / (step_time * inputs.bandwidth),
        }
        for name, (part_flops, part_bytes) in costs.items():
            out[f"{name}_flops"] = part_flops
            out[f"{name}_bytes"] = part_bytes
            out[f"{name}_time_s"] = part_times[name]
            out[f"{name}_intensity"] = part_flops / part_bytes
            out[f"{name}_compute_bound"] = part_flops / compute_rate > part_bytes / memory_rate

        # memory: resident weights, the batch's KV cache, what is left for more sequences
        bias_params = model.qkv_bias * (model.heads + 2.0 * inputs.kv_heads) * model.head_dim
        resident_params = (model.layers * (shape.layer_gemm_params + bias_params)
                           + model.static_resident_params)
        weight_bytes = resident_params * inputs.weight_bytes
        end = inputs.prefill_context + inputs.prefill
        prompt_keys = shape.full_layers * end + model.windowed_layers * np.minimum(
            end, model.window)
        kv_per_sequence = shape.kv_token_layer_bytes * shape.decode_keys
        kv_bytes = batch * kv_per_sequence + shape.kv_token_layer_bytes * prompt_keys
        free = (inputs.memory - weight_bytes - inputs.memory_reserve
                - shape.kv_token_layer_bytes * prompt_keys)
        out["weight_bytes"] = weight_bytes
        out["kv_bytes"] = kv_bytes
        out["kv_bytes_per_token"] = shape.kv_bytes_per_token
        out["max_batch"] = np.where(free > 0, np.floor(free / kv_per_sequence), 0.0)
        out["fits"] = weight_bytes + kv_bytes + inputs.memory_reserve <= inputs.memory

        # decode as B grows without bound: the weights amortise away, the KV does not
        sequence_flops = 2.0 * shape.gemm_params + 4.0 * shape.heads_x_dim * shape.decode_keys
        sequence_bytes = kv_per_sequence + (
            shape.kv_bytes_per_token if assumptions.kv_write else 0.0)
        if "activations" in costs:
            one = _part_costs(inputs, shape, np.ones_like(batch), assumptions)["activations"][1]
            none = _part_costs(inputs, shape, np.zeros_like(batch), assumptions)["activations"][1]
            sequence_bytes = sequence_bytes + (one - none)
        out["intensity_ceiling"] = sequence_flops / sequence_bytes
        out["throughput_ceiling_tokens_per_s"] = memory_rate / kv_per_sequence

    if tpot_budget is not None:
        out["max_batch_for_tpot"] = _max_batch_for_budget(
            inputs, shape, assumptions, compute_rate, memory_rate, tpot_budget)
    return out


def _max_batch_for_budget(inputs, shape, assumptions, compute_rate, memory_rate, budget):
    """Largest B >= 1 whose step time fits `budget` (0 if none), memory aside.

    For B >= 1 every part's FLOPs and bytes are affine in B, so each part time is a max of
    two affine functions and the step time is the max, over every choice of branch per
    part, of the summed affine functions. t(B) <= budget is then a set of linear
    inequalities, solved exactly for all configurations at once.
    """
    ones = np.ones(np.shape(inputs.batch))
    at_one = _part_costs(inputs, shape, ones, assumptions)
    at_two = _part_costs(inputs, shape, 2.0 * ones, assumptions)
    branches = []  # per part: the (intercept, slope) of its compute and memory time
    for name, (f1, b1) in at_one.items():
        f2, b2 = at_two[name]
        compute = (2 * f1 - f2) / compute_rate, (f2 - f1) / compute_rate
        memory = (2 * b1 - b2) / memory_rate, (b2 - b1) / memory_rate
        branches.append((compute, memory))
    if assumptions.overlap == "full":  # one roofline over the summed FLOPs and bytes
        compute = tuple(sum(part[0][j] for part in branches) for j in (0, 1))
        memory = tuple(sum(part[1][j] for part in branches) for j in (0, 1))
        combos = [(compute,), (memory,)]
    else:
        combos = list(itertools.product(*branches))
    limit = np.full(np.shape(ones), np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        for choice in combos:
            intercept = sum(c[0] for c in choice)
            slope = sum(c[1] for c in choice)
            bound = np.where(slope > 0, (budget - intercept) / slope,
                             np.where(intercept <= budget, np.inf, -np.inf))
            limit = np.minimum(limit, bound)
    return np.where(limit >= 1, np.floor(limit), 0.0)
