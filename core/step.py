"""One engine step on the roofline, for whole arrays of configurations at once.

A step runs `B` decode sequences (each with `S` tokens cached) and `N` prefill tokens of
one prompt chunk (with `C` tokens of that prompt cached). Each decode sequence runs
q = 1 token, or q = k + 1 when a speculative step verifies k drafted tokens; the step
has T = B * q + N tokens. Its cost is split into parts, each with FLOPs F and bytes:

- gemm: every weight matmul. F = 2 * active params * T (the LM head only for rows that
  sample: the B * q decode rows and the prompt's last chunk). Active params: attention
  projections (MLA: its q and kv LoRA down- and up-projections), dense FFNs, and in each
  MoE layer the router, the shared experts and the k routed experts a token picks.
  Bytes: the matmul weights, read once per step and shared by its tokens: every dense
  weight, and of each MoE layer's E routed experts the expected number that T tokens
  routed uniformly at random touch, E * (1 - (1 - k/E)^T), so a larger batch reads more
  experts until all are read. Weights are in their format's bytes per element
  (core/dtypes.py: int4-g128 adds a 16-bit scale per 128 weights, mxfp4 is 4.25 bits),
  routed experts in their own (mxfp4 for gpt-oss).
- attention: scores and weighted sum over the cache. Per layer, a query attending to K
  keys costs f * K FLOPs, f = 4 * heads * head_dim (MLA in the absorbed form:
  heads * (4 * kv_lora_rank + 2 * qk_rope_head_dim)), and the K keys cost
  K * e * kv_bytes to read, e = 2 * kv_heads * head_dim cached elements per token per
  layer (MLA: the latent, kv_lora_rank + qk_rope_head_dim, shared by all heads). A decode
  sequence's q queries attend S, S + 1, ..., S + q - 1 keys (q * S + q(q - 1)/2 pairs)
  and read its S + q - 1 keys once; a prefill chunk attends C + N/2 keys per query on
  average (causal) or C + N (full square) and reads C + N. A windowed layer attends to
  at most `window` keys (q > 1: q * min(S + (q - 1)/2, window) pairs). New K/V of the T
  tokens are written when `kv_write`. MLA's absorbed form is counted for prefill too
  (kernels often expand the latent there instead, for fewer FLOPs per pair).
- activations (when `activation_traffic`): hidden states each GEMM and attention kernel
  reads and writes, in the compute dtype; no FLOPs.

Tensor parallelism over tp GPUs: each GPU holds and multiplies 1/tp of the weights (of
every expert too) and runs 1/tp of the heads, so the gemm and attention FLOPs and the
weight bytes are divided by tp; its share of the KV cache is max(1/tp, 1/kv_heads) (KV heads are replicated once
tp exceeds them; MLA's latent serves all heads, so every GPU holds all of it); hidden-size
activations are replicated, the rest split. All figures are per GPU.
- communication (tp > 1): two all-reduces per layer (after attention and after the FFN)
  of T * hidden * activation bytes, and an all-gather of the sampled rows' logits
  (rows * vocab * activation bytes). A ring moves 2(tp - 1)/tp of an all-reduce's bytes,
  and (tp - 1)/tp of an all-gather's, through each GPU's link; time = bytes / interconnect
  bandwidth per direction (times the profile's efficiency, below).

Speculative decoding (k tokens, acceptance rate a): a draft model proposes k tokens per
sequence in k decode steps of B tokens (parts draft_gemm, draft_attention, ... : the
draft's own parts, times k; the draft's prefill of new prompts is not counted), then the
target verifies them in one step of q = k + 1 tokens per sequence. Each sequence gains
tau = (1 - a^(k+1)) / (1 - a) tokens per step (k + 1 as a -> 1). With no draft model,
drafting is free (n-gram or prompt lookup).

part time = max(F / (mfu * peak), bytes / (mbu * bandwidth)); communication: bytes /
interconnect. The step is the sum of the part times (overlap "parts") or
max(sum F / (mfu * peak), sum bytes / (mbu * bandwidth), communication time) (overlap
"full").

The profile's efficiency model (`core.efficiency`; the defaults change nothing) then
applies per part: GEMMs reach gemm_mfu of the compute rate and pay the FLOPs of
gemm_m_half more tokens, and gemm_mbu of the bandwidth; attention reaches attention_mfu
and attention_mbu, each query attending attention_mfu_half more keys and each sequence
reading attention_mbu_half more and each decode sequence paying per layer
attention_kv_head_overhead_s per KV head and attention_query_head_overhead_s per query
head on the GPU, and the prompt chunk (N > 0) attention_prompt_head_overhead_s per
layer and query head on the GPU; the link reaches interconnect_efficiency and each
collective pays allreduce_overhead_s and allreduce_peer_overhead_s per other GPU (the
profile's collective library's, `Assumptions.step_efficiency`), and the all-reduce parts
take the faster of two protocols: a low-latency one at allreduce_ll_share of that
bandwidth, a bulk one paying allreduce_bulk_overhead_s more per collective
(`efficiency.link_time`).
A step with any token adds step_overhead_s + layers * layer_overhead_s (`overhead_s`; a
draft's k steps pay their own), and under an overlapping scheduler takes no less than its
host's time, host_step_s + host_sequence_s * (B + 1 with a prompt chunk) (`host_s`; the
largest batch under a TPOT budget fits both). The reported FLOPs and bytes stay the real ones; only
the times see the padding.

Pipeline, expert and attention-data parallelism (pp, ep, dp) and the links their
collectives cross: core/parallel.py (parts all_to_all and pipeline_transfer).

tokens/s = B * tau / step time (per replica of tp GPUs), per user tau / step;
`max_batch_for_tpot`: the largest B whose time per output token, step time / tau, fits
the budget (every part is linear in B but the routed experts' bytes: core/step_budget.py).

Memory per GPU: resident weights / tp (plus the draft's), each sequence's KV cache times
the KV share (plus the draft's); `max_batch`: sequences of this context a replica holds.
Energy per token = board power (`tdp_w`: an upper bound; a memory-bound step draws less)
* step time * tp / (B * tau + N) tokens; cost per million tokens = price per GPU-hour *
tp * step time / 3600 / tokens * 1e6.

Every part's FLOPs and bytes are fixed + per-sequence * B (the weights read once the step
has a token), but for the routed experts' bytes: the batch-independent terms are computed
once per grid (`_Shape`), then evaluated at the batch, and the budget solver reads its
lines from them. Every input is a numpy array (or scalar) broadcastable to the grid: no
Python loop per configuration. Units: seconds, bytes, FLOPs, bytes/s, FLOP/s, watts,
joules. One configuration at a time (`core.point.evaluate_point`) this same code runs on
plain floats, traced per setup into straight-line Python (`core.step_trace`): code here
that branches on a per-call number (batch, lengths) keeps that setup untraced.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from rooftui.core import step_chunks
from rooftui.core.assumptions import Assumptions
from rooftui.core.efficiency import (
    collective_overhead,
    fixed_step_time,
    has_host_floor,
    host_time,
    part_efficiencies,
)
from rooftui.core.elementwise import any_true, as_float64, floor, maximum, minimum, where
from rooftui.core.model import ModelArrays
from rooftui.core.parallel import Layout
from rooftui.core.step_budget import max_batch_for_budget
from rooftui.core.step_parts import (  # noqa: F401 (PARTS: the parts' names, for importers)
    LINK_PARTS,
    PARTS,
    Linear,
    is_scalar,
    part_times,
    plus,
    scaled,
)


@dataclass(frozen=True)
class StepInputs:
    """Arrays broadcastable to one grid shape. Byte sizes are per element. The fields
    after `memory_reserve` default to a dense step on one GPU without speculation."""

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
    expert_weight_bytes: np.ndarray | None = None  # routed experts; None: weight_bytes
    tp: np.ndarray | float = 1  # GPUs a replica's weights, heads and KV are split over
    interconnect: np.ndarray | float = np.inf  # bytes/s per direction per GPU
    spec_tokens: np.ndarray | float = 0  # k drafted tokens per sequence and step
    acceptance: np.ndarray | float = 0.0  # a, each drafted token's acceptance rate
    draft: ModelArrays | None = None  # the draft model; None: drafting is free
    board_power_w: np.ndarray | None = None  # per GPU; None: no energy output
    price_per_gpu_hour: np.ndarray | None = None  # None: no cost output
    # core/parallel.py: stages, expert-parallel GPUs, attention groups, micro-batches
    # (None: pp), and the links of the all-to-all and of a stage boundary (B/s, s)
    pp: np.ndarray | float = 1
    ep: np.ndarray | float = 1
    dp: np.ndarray | float = 1
    micro_batches: np.ndarray | float | None = None
    expert_link: np.ndarray | float = np.inf
    expert_link_latency: np.ndarray | float = 0.0
    stage_link: np.ndarray | float = np.inf
    stage_link_latency: np.ndarray | float = 0.0
    # the matmuls' format as `tables.dtype_code`: whose GEMM parameters a profile's
    # efficiency applies ([efficiency.fp8], ...); None: the base ones
    compute_dtype: np.ndarray | int | None = None


def _window_integral(x: np.ndarray, window: np.ndarray) -> np.ndarray:
    """Integral of min(window, t) dt from 0 to x: keys attended by a causal run of queries."""
    capped = minimum(x, window)
    return capped * x - 0.5 * capped * capped


class _Shape:
    """Per-configuration quantities that do not depend on the batch, computed once: the
    parts as linear functions of B, the KV cache, speculation and tensor parallelism."""

    def __init__(self, inputs: StepInputs, assumptions: Assumptions) -> None:
        # Only what the memory figures and the outputs need stays an attribute: every
        # array kept alive costs memory (and page faults) on large grids.
        model = inputs.model
        context = inputs.context
        # cached elements per token per layer: K and V of each KV head, or MLA's latent
        kv_elements = model.kv_elements_per_kv_head * inputs.kv_heads
        if not is_scalar(model.kv_latent, 0):
            kv_elements = kv_elements + model.kv_latent
        self.attention_params = (model.attention_fixed_params
                                 + model.kv_proj_params_per_kv_head * inputs.kv_heads)
        self.routed = any_true(model.routed_expert_params)
        self.expert_weight_bytes = (inputs.weight_bytes if inputs.expert_weight_bytes is None
                                    else inputs.expert_weight_bytes)
        full_layers = model.layers - model.windowed_layers
        # K and V (or the latent) of one token in one layer
        self.kv_token_layer_bytes = kv_elements * inputs.kv_bytes
        self.kv_bytes_per_token = self.kv_token_layer_bytes * model.layers
        # layer-keys one decode sequence holds in its cache
        self.cached_keys = (full_layers * context
                            + model.windowed_layers * minimum(context, model.window))
        # layer-keys the prompt of the prefill chunk holds once it is done
        prompt_end = inputs.prefill_context + inputs.prefill
        self.prompt_keys = (None if is_scalar(prompt_end, 0) else
                            full_layers * prompt_end
                            + model.windowed_layers * minimum(prompt_end, model.window))
        self.speculating = not is_scalar(inputs.spec_tokens, 0)
        if self.speculating:
            k = as_float64(inputs.spec_tokens)
            a = as_float64(inputs.acceptance)
            self.queries = k + 1.0
            with np.errstate(divide="ignore", invalid="ignore"):
                self.tokens_per_step = where(a < 1, (1 - np.power(a, k + 1)) / (1 - a), k + 1)
            last = context + k  # the last verified query attends S + k keys
            middle = context + 0.5 * k
            decode_keys = (full_layers * last
                           + model.windowed_layers * minimum(last, model.window))
            decode_pairs = (full_layers * (self.queries * middle)
                            + model.windowed_layers * self.queries
                            * minimum(middle, model.window))
        else:
            self.queries = self.tokens_per_step = 1.0
            decode_keys = decode_pairs = self.cached_keys
        # KV heads that can be split: the model's (MLA: one latent for all heads)
        self.kv_units = (inputs.kv_heads if is_scalar(model.kv_latent, 0)
                         else where(model.kv_latent > 0, 1.0, inputs.kv_heads))
        self.split = not is_scalar(inputs.tp, 1)
        if self.split:
            self.tp = as_float64(inputs.tp)
            self.kv_share = maximum(1.0 / self.tp, 1.0 / self.kv_units)
        self.parts = self._parts(inputs, assumptions, full_layers=full_layers,
                                 kv_elements=kv_elements, prompt_end=prompt_end,
                                 decode_keys=decode_keys, decode_pairs=decode_pairs)
        self.layout = Layout.of(inputs)
        if self.layout is not None:
            self.parts = self.layout.distribute(self.parts, inputs, self)
        efficiency = assumptions.step_efficiency
        self.calibrated = not efficiency.is_ideal
        self.bulk_parts = {}  # link parts the bulk all-reduce protocol may time faster
        # an overlapping scheduler's host time sets the least step time (None: no floor)
        self.host = efficiency if has_host_floor(efficiency) else None
        if self.calibrated:
            efficiency = efficiency.for_compute_dtypes(inputs.compute_dtype, inputs.kv_bytes)
            self.timed_parts = self._timed_parts(inputs, efficiency)
            self.fixed_time = fixed_step_time(model.layers, efficiency)
        if inputs.draft is not None and self.speculating:
            k = as_float64(inputs.spec_tokens)
            self.draft = _Shape(_draft_inputs(inputs), assumptions)
            for name, part in self.draft.parts.items():
                self.parts[f"draft_{name}"] = part.times(k)
            if self.calibrated:  # k draft steps, each with its overheads
                for name, part in self.draft.timed_parts.items():
                    self.timed_parts[f"draft_{name}"] = part.times(k)
                for name, part in self.draft.bulk_parts.items():
                    self.bulk_parts[f"draft_{name}"] = part.times(k)
                self.fixed_time = self.fixed_time + k * self.draft.fixed_time
            self.kv_read_per_sequence = (self.kv_read_per_sequence
                                         + k * self.draft.kv_read_per_sequence)
        else:
            self.draft = None
        if not self.calibrated:
            self.timed_parts = self.parts
        # per link part: bytes/s and seconds of latency (None: none) of the link it crosses
        self.links = (dict.fromkeys(LINK_PARTS, (inputs.interconnect, None))
                      if self.layout is None else self.layout.links(inputs))

    def per_query(self, value):
        """A per-token quantity, for the q queries of a decode sequence."""
        return value * self.queries if self.speculating else value

    def per_query_step(self, value):
        """A per-token quantity, for the tokens a sequence gains per step (tau)."""
        return value * self.tokens_per_step if self.speculating else value

    def per_gpu(self, value):
        """A quantity split evenly over the tensor-parallel GPUs."""
        return value / self.tp if self.split and value is not None else value

    def kv_per_gpu(self, value):
        """A quantity of KV cache, as one GPU holds it."""
        return value * self.kv_share if self.split and value is not None else value

    def _timed_parts(self, inputs: StepInputs, efficiency) -> dict[str, Linear]:
        """The parts as their times see them under `efficiency` (see core.efficiency):
        FLOPs divided by the part's compute fraction and bytes by its bandwidth fraction,
        after adding the work only time pays (GEMMs: the FLOPs of gemm_m_half more tokens;
        attention: attention_mfu_half more keys per query, attention_mbu_half more per
        sequence, each decode sequence its per-head fixed times and a prompt chunk its
        per-query-head one); link bytes divided by interconnect_efficiency (the
        all-reduces' also by allreduce_ll_share), plus each collective's fixed time as
        bytes at the link rate; with two protocols the bulk one's all-reduce part
        (`bulk_parts`: interconnect_efficiency alone and allreduce_bulk_overhead_s more
        per collective). The reported FLOPs and bytes stay the real ones. Keeps the
        padding and fractions per part for `part_timing`."""
        model = inputs.model
        decode_only = is_scalar(inputs.prefill, 0)
        key_flops = self.per_gpu(model.attention_flops_per_key * model.layers
                                 * efficiency.attention_mfu_half)
        key_bytes = self.kv_per_gpu(self.kv_bytes_per_token * efficiency.attention_mbu_half)
        pipelined = self.layout is not None and self.layout.pipelined
        layers = model.layers / self.layout.pp if pipelined else model.layers
        if pipelined:  # one stage's layers
            key_flops, key_bytes = key_flops / self.layout.pp, key_bytes / self.layout.pp

        def attention_bytes(seconds):
            """Seconds of attention work (per head, not scaled by the bandwidth) as bytes
            at the attention's memory rate, which its efficiency then divides back out."""
            return seconds * efficiency.attention_mbu * inputs.mbu * inputs.bandwidth

        # a decode sequence's fixed time per KV head and query head of each layer
        self.decode_padding = {}
        if not (is_scalar(efficiency.attention_kv_head_overhead_s, 0)
                and is_scalar(efficiency.attention_query_head_overhead_s, 0)):
            self.decode_padding["attention"] = attention_bytes(layers * (
                self.kv_per_gpu(self.kv_units) * efficiency.attention_kv_head_overhead_s
                + self.per_gpu(model.heads) * efficiency.attention_query_head_overhead_s))
        # a prompt chunk's fixed time per query head of each layer (the context FMHA runs
        # a block of query rows per prompt and head, however few rows the chunk fills)
        self.prompt_padding = {}
        if not is_scalar(efficiency.attention_prompt_head_overhead_s, 0):
            self.prompt_padding["attention"] = attention_bytes(
                layers * self.per_gpu(model.heads) * efficiency.attention_prompt_head_overhead_s)
        prompt_bytes = plus(key_bytes, self.prompt_padding.get("attention"))
        padding = {
            "gemm": Linear(flops_fixed=efficiency.gemm_m_half
                            * self.parts["gemm"].flops_per_sequence / self.queries),
            "attention": Linear(
                flops_fixed=None if decode_only else key_flops * inputs.prefill,
                flops_per_sequence=self.per_query(key_flops),
                bytes_fixed=None if decode_only else prompt_bytes * (inputs.prefill > 0),
                bytes_per_sequence=key_bytes)}
        # the all-reduces' protocol: the low-latency one, at allreduce_ll_share of the
        # link's bandwidth (1: the single protocol), and where that share is below 1 the
        # bulk one beside it (`bulk_parts`), whichever is faster timing the part
        link = efficiency.interconnect_efficiency
        two_protocols = self.split and not is_scalar(efficiency.allreduce_ll_share, 1)
        low_latency = link * efficiency.allreduce_ll_share if two_protocols else link
        self.bulk_padding = {}
        if self.split:
            # two all-reduces per layer and the logits' all-gather, each a fixed time (and
            # one per other GPU): as bytes at the link rate, which the efficiency then
            # divides back out (none where a grid's replica is one GPU, whose link rate
            # is then infinite)
            collectives = 2.0 * model.layers + (model.lm_head_params > 0)
            if pipelined:  # a stage's share of them, for each of its micro-batches
                collectives = collectives * self.layout.micro_batches / self.layout.pp
            overhead = collective_overhead(self.tp - 1.0, efficiency)

            def fixed_time(seconds, fraction):
                return Linear(bytes_fixed=where(
                    self.tp > 1, collectives * seconds * inputs.interconnect * fraction, 0.0))

            if efficiency.allreduce_overhead_s > 0 or efficiency.allreduce_peer_overhead_s > 0:
                padding["communication"] = fixed_time(overhead, low_latency)
            if two_protocols:
                self.bulk_padding["communication"] = (fixed_time(
                    overhead + efficiency.allreduce_bulk_overhead_s, link), link)
        self.bulk_parts = {name: scaled(self.parts[name], extra, 1.0, memory)
                           for name, (extra, memory) in self.bulk_padding.items()}
        self.padding, self.fractions, timed = padding, {}, {}
        for name, part in self.parts.items():
            compute, memory = ((1.0, low_latency if name == "communication" else link)
                               if name in LINK_PARTS else part_efficiencies(name, efficiency))
            self.fractions[name] = (compute, memory)
            extra = padding.get(name)
            if name in self.decode_padding:
                extra = replace(extra, bytes_per_sequence=plus(extra.bytes_per_sequence,
                                                               self.decode_padding[name]))
            timed[name] = scaled(part, extra, compute, memory)
        return timed

    def _parts(self, inputs: StepInputs, assumptions: Assumptions, *, full_layers,
               kv_elements, prompt_end, decode_keys, decode_pairs) -> dict[str, Linear]:
        model = inputs.model
        decode_only = is_scalar(inputs.prefill, 0)
        prefill, cached = inputs.prefill, inputs.prefill_context
        has_prefill = prefill > 0

        def fixed(value):  # a term that only a prefill chunk contributes
            return None if decode_only else value

        # matmul weights one token multiplies by (all layers, then with the head), and
        # those every step reads whatever the routing
        all_attention = model.layers * self.attention_params
        layers_gemm_params = all_attention + model.ffn_active_params
        dense_weight_params = (all_attention + model.ffn_always_read_params
                               + model.lm_head_params)
        two_flops = self.per_gpu(2.0)  # per weight and token, on one GPU
        gemm = Linear(
            flops_fixed=fixed(two_flops * (layers_gemm_params * prefill
                                           + model.lm_head_params * has_prefill)),
            flops_per_sequence=self.per_query(
                two_flops * (layers_gemm_params + model.lm_head_params)),
            weights=self.per_gpu(dense_weight_params * inputs.weight_bytes),
            experts=(self.per_gpu(model.routed_expert_params * self.expert_weight_bytes)
                     if self.routed else None),
            # miss 0 (k = E: every token reads every expert) as e^-690: 1 at T = 0, else 0
            log_miss=np.log(maximum(model.expert_miss, 1e-300)) if self.routed else 0.0,
            queries=self.queries, prefill=prefill)

        attention_fixed_flops = attention_fixed_bytes = None
        if not decode_only:
            # query-key pairs and keys read of the prefill chunk, summed over layers
            end = prompt_end
            if assumptions.attention_flops == "causal":
                pairs_full = prefill * cached + 0.5 * prefill * prefill
                pairs_windowed = _window_integral(end, model.window) - _window_integral(
                    cached, model.window)
            else:
                pairs_full = prefill * end
                pairs_windowed = prefill * minimum(end, model.window)
            pairs = full_layers * pairs_full + model.windowed_layers * pairs_windowed
            attention_fixed_flops = model.attention_flops_per_key * pairs
            attention_fixed_bytes = self.kv_token_layer_bytes * self.prompt_keys * has_prefill
        attention_bytes = self.kv_token_layer_bytes * decode_keys
        self.kv_read_per_sequence = self.kv_per_gpu(attention_bytes)
        if assumptions.kv_write:  # the new K and V of every token
            attention_bytes = attention_bytes + self.per_query(self.kv_bytes_per_token)
            attention_fixed_bytes = plus(attention_fixed_bytes,
                                          fixed(self.kv_bytes_per_token * prefill))
        parts = {"gemm": gemm, "attention": Linear(
            flops_fixed=self.per_gpu(attention_fixed_flops),
            flops_per_sequence=self.per_gpu(model.attention_flops_per_key * decode_pairs),
            bytes_fixed=self.kv_per_gpu(attention_fixed_bytes),
            bytes_per_sequence=self.kv_per_gpu(attention_bytes))}

        if assumptions.activation_traffic:
            # inputs and outputs of QKV, O, the FFN (the experts a token uses), the
            # attention kernel and the head; hidden-size ones replicated over GPUs
            split = (4.0 * model.heads * model.head_dim + kv_elements
                     + model.ffn_active_params / (model.layers * model.hidden))
            per_token = model.layers * (4.0 * model.hidden + self.per_gpu(split))
            per_row = model.hidden + self.per_gpu(model.lm_head_params / model.hidden)
            parts["activations"] = Linear(
                bytes_fixed=fixed(inputs.activation_bytes * (per_token * prefill
                                                             + per_row * has_prefill)),
                bytes_per_sequence=self.per_query(inputs.activation_bytes * (per_token + per_row)))
        if self.split:
            # two ring all-reduces per layer (2(tp-1)/tp of T * hidden * activation bytes
            # each) and an all-gather of the logits ((tp-1)/tp of rows * vocab)
            ring = inputs.activation_bytes * (self.tp - 1.0) / self.tp
            per_token = ring * 4.0 * model.layers * model.hidden
            per_row = ring * model.lm_head_params / model.hidden
            parts["communication"] = Linear(
                bytes_fixed=fixed(per_token * prefill + per_row * has_prefill),
                bytes_per_sequence=self.per_query(per_token + per_row))
        return parts


def _draft_inputs(inputs: StepInputs) -> StepInputs:
    """The draft model's decode steps: its own shape and KV heads, the target's formats
    (routed experts stored like the target's) and GPUs, one token per sequence, no
    prefill."""
    return replace(inputs, model=inputs.draft, kv_heads=inputs.draft.kv_heads, prefill=0.0,
                   prefill_context=0.0, spec_tokens=0, draft=None, pp=1, ep=1, dp=1,
                   micro_batches=None)


def _costs(shape: _Shape, batch) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """FLOPs (None for a part without) and bytes, per GPU, of each part for `batch`
    decode sequences."""
    return {name: part.at(batch) for name, part in shape.parts.items()}


def _step_time(costs, times, assumptions, compute_rate, memory_rate):
    if assumptions.overlap == "parts":
        return sum(times.values())
    flops = plus(*(f for f, _ in costs.values()))
    nbytes = sum(b for name, (_, b) in costs.items() if name not in LINK_PARTS)
    step = maximum(flops / compute_rate, nbytes / memory_rate)
    for name in LINK_PARTS:
        if name in times:
            step = maximum(step, times[name])
    return step


@dataclass(frozen=True)
class PartTiming:
    """How the efficiency model times one part, for code that adds parts up itself (the
    simulator): time = max((F + flops_per_step + flops_per_query * T) / compute,
    (B + bytes_per_prompt * (sequences - decodes) + bytes_per_sequence * sequences
    + bytes_per_decode * decodes + bytes_per_step) / memory), with T the step's tokens,
    sequences its decodes and prompt chunks (each chunk pays bytes_per_prompt, the
    prompt's per-query-head time, once); link parts divide their bytes by `memory` at the
    link rate, and where `bulk` (the bulk all-reduce protocol's timing) is given take the
    faster of the two."""

    compute: float
    memory: float
    flops_per_step: float
    flops_per_query: float
    bytes_per_sequence: float
    bytes_per_step: float
    bytes_per_decode: float = 0.0
    bytes_per_prompt: float = 0.0
    bulk: PartTiming | None = None

    def timed_bytes(self, nbytes, sequences, decodes):
        """`nbytes` with the work only time pays, over the part's bandwidth fraction."""
        return (nbytes + self.bytes_per_prompt * (sequences - decodes)
                + self.bytes_per_sequence * sequences + self.bytes_per_decode * decodes
                + self.bytes_per_step) / self.memory


def part_timing(inputs: StepInputs, assumptions: Assumptions
                ) -> tuple[dict[str, PartTiming], float] | None:
    """Per part its `PartTiming`, and the fixed seconds of a step with any token, for one
    configuration with one token per decode sequence; None under an ideal profile (the
    parts' own FLOPs and bytes then time them). `inputs`' batch and prefill are ignored."""
    if assumptions.efficiency.is_ideal:
        return None
    probe = replace(inputs, batch=np.float64(1.0), prefill=np.float64(0.0),
                    prefill_context=np.float64(0.0), spec_tokens=0, draft=None)
    shape = _Shape(probe, assumptions)

    def number(value):
        return 0.0 if value is None else float(np.asarray(value))

    def timing_of(padding, compute, memory, per_decode=None, per_prompt=None, bulk=None):
        return PartTiming(
            compute=float(compute), memory=number(memory),
            flops_per_step=number(padding.flops_fixed),
            flops_per_query=number(padding.flops_per_sequence),
            bytes_per_sequence=number(padding.bytes_per_sequence),
            bytes_per_step=number(padding.bytes_fixed), bytes_per_decode=number(per_decode),
            bytes_per_prompt=number(per_prompt),
            bulk=None if bulk is None else timing_of(bulk[0], 1.0, bulk[1]))

    timing = {name: timing_of(shape.padding.get(name, Linear()), compute, memory,
                              shape.decode_padding.get(name), shape.prompt_padding.get(name),
                              shape.bulk_padding.get(name))
              for name, (compute, memory) in shape.fractions.items()}
    return timing, number(shape.fixed_time)


def evaluate_step(inputs: StepInputs, assumptions: Assumptions,
                  tpot_budget: np.ndarray | float | None = None) -> dict[str, np.ndarray]:
    """Every metric of the step, as arrays over the broadcast grid (or scalars where a
    metric does not vary over it). Beside the dense step's keys: per part `<part>_flops`,
    `_bytes`, `_time_s` (and `_intensity`, `_compute_bound` but for link parts) for the
    parts present (`PARTS`); `expected_tokens_per_step` when speculating;
    `tokens_per_s_per_gpu` with tensor parallelism; `energy_j_per_token` and
    `cost_per_million_tokens` when their inputs are given; `max_batch_for_tpot` with a
    budget. A large grid is evaluated in blocks of rows (`core.step_chunks`)."""
    blocks = step_chunks.row_blocks(inputs, tpot_budget)
    if blocks is not None:
        out = step_chunks.evaluated_in_blocks(
            lambda block, budget: _evaluate(block, assumptions, budget), inputs, tpot_budget,
            *blocks)
        if out is not None:
            return out
    return _evaluate(inputs, assumptions, tpot_budget)


def _evaluate(inputs: StepInputs, assumptions: Assumptions, tpot_budget) -> dict:
    shape = _Shape(inputs, assumptions)
    batch = as_float64(inputs.batch)
    compute_rate = inputs.mfu * inputs.peak_flops
    memory_rate = inputs.mbu * inputs.bandwidth
    links = shape.links
    if shape.layout is not None and shape.layout.pipelined:  # every time x the bubble
        compute_rate, memory_rate, links = shape.layout.stretched(compute_rate, memory_rate,
                                                                  links)
    costs = _costs(shape, batch)
    timed = costs if not shape.calibrated else {
        name: part.at(batch) for name, part in shape.timed_parts.items()}
    # the parts' bounds are of their real costs: the times' comparison when those time them
    part_bounds = {} if timed is costs else None
    times = part_times(timed, compute_rate, memory_rate, links, part_bounds)
    if shape.bulk_parts:  # an all-reduce part takes its faster protocol's time
        bulk = part_times({name: part.at(batch) for name, part in shape.bulk_parts.items()},
                          compute_rate, memory_rate, links)
        times.update({name: minimum(times[name], time) for name, time in bulk.items()})
    step_time = _step_time(timed, times, assumptions, compute_rate, memory_rate)
    if shape.calibrated:  # an empty step (no token) runs nothing and pays nothing
        busy = batch * shape.queries + inputs.prefill > 0
        times = {name: where(busy, time, 0.0) for name, time in times.items()}
        step_time = where(busy, step_time, 0.0)

    flops = plus(*(f for f, _ in costs.values()))
    nbytes = sum(b for name, (_, b) in costs.items() if name not in LINK_PARTS)
    sum_of_parts = step_time if assumptions.overlap == "parts" else sum(times.values())
    if shape.calibrated:
        overhead = where(busy, shape.fixed_time, 0.0)
        step_time = step_time + overhead
    if shape.host is not None:  # the host's work on the step, hidden behind the GPU's
        host = where(busy, host_time(batch + (inputs.prefill > 0), shape.host), 0.0)
        step_time = maximum(step_time, host)
    new_tokens = batch * shape.tokens_per_step if shape.speculating else batch

    with np.errstate(divide="ignore", invalid="ignore"):
        out: dict[str, np.ndarray] = {
            "step_time_s": step_time,
            "tokens_per_s": new_tokens / step_time,
            "prefill_tokens_per_s": inputs.prefill / step_time,
            "per_user_tokens_per_s": where(batch > 0, shape.tokens_per_step / step_time,
                                              0.0),
            "flops": flops,
            "bytes": nbytes,
            "intensity": flops / nbytes,
            "ridge": inputs.peak_flops / inputs.bandwidth,
            "compute_bound": flops / compute_rate > nbytes / memory_rate,
            "attention_share": times["attention"] / sum_of_parts,
            "mfu": flops / (step_time * inputs.peak_flops),
            "mbu": nbytes / (step_time * inputs.bandwidth),
        }
        for name, (part_flops, part_bytes) in costs.items():
            out[f"{name}_flops"] = 0.0 if part_flops is None else part_flops
            out[f"{name}_bytes"] = part_bytes
            out[f"{name}_time_s"] = times[name]
            if name in LINK_PARTS:  # bytes over the interconnect, no FLOPs
                continue
            if part_flops is None:
                out[f"{name}_intensity"], out[f"{name}_compute_bound"] = 0.0, False
                continue
            out[f"{name}_intensity"] = part_flops / part_bytes
            out[f"{name}_compute_bound"] = (
                part_bounds[name] if part_bounds is not None
                else part_flops / compute_rate > part_bytes / memory_rate)
        if shape.calibrated:
            out["overhead_s"] = overhead
        if shape.host is not None:
            out["host_s"] = host
        if shape.speculating:
            out["expected_tokens_per_step"] = shape.tokens_per_step * np.ones(np.shape(batch))
        if shape.layout is not None:  # dp attention groups; GPUs of tp x dp x pp
            replica_gpus, group_gpus = shape.layout.gpus(shape)
            for key in ("tokens_per_s", "prefill_tokens_per_s"):
                out[key] = out[key] * shape.layout.dp
            out["tokens_per_s_per_gpu"] = out["tokens_per_s"] / replica_gpus
        elif shape.split:
            out["tokens_per_s_per_gpu"] = out["tokens_per_s"] / shape.tp

        # memory per GPU: resident weights, the batch's KV cache, room for more sequences
        weight_bytes, kv_per_sequence, prompt_kv = _memory(inputs, shape)
        if shape.draft is not None:
            draft_weights, draft_kv, _ = _memory(_draft_inputs(inputs), shape.draft)
            drafting = as_float64(inputs.spec_tokens) > 0
            weight_bytes = weight_bytes + draft_weights * drafting
            kv_per_sequence = kv_per_sequence + draft_kv * drafting
        kv_bytes = batch * kv_per_sequence + prompt_kv
        free = inputs.memory - weight_bytes - inputs.memory_reserve - prompt_kv
        out["weight_bytes"] = weight_bytes
        out["kv_bytes"] = kv_bytes
        out["kv_bytes_per_token"] = shape.kv_bytes_per_token
        out["max_batch"] = where(free > 0, floor(free / kv_per_sequence), 0.0)
        out["fits"] = weight_bytes + kv_bytes + inputs.memory_reserve <= inputs.memory

        # decode as B grows without bound: the weights amortise away, what each sequence
        # adds (FLOPs; KV read and written, activations) does not
        sequence_flops = sum(part.flops_per_sequence for part in shape.parts.values()
                             if part.flops_per_sequence is not None)
        sequence_bytes = sum(part.bytes_per_sequence for name, part in shape.parts.items()
                             if name not in LINK_PARTS and part.bytes_per_sequence is not None)
        out["intensity_ceiling"] = sequence_flops / sequence_bytes
        out["throughput_ceiling_tokens_per_s"] = (shape.per_query_step(memory_rate)
                                                  / shape.kv_read_per_sequence)
        if shape.layout is not None:
            out["throughput_ceiling_tokens_per_s"] = (out["throughput_ceiling_tokens_per_s"]
                                                      * shape.layout.dp)

        if inputs.board_power_w is not None or inputs.price_per_gpu_hour is not None:
            gpu_seconds = (step_time * group_gpus if shape.layout is not None
                           else step_time * shape.tp if shape.split else step_time)
            gpu_seconds_per_token = gpu_seconds / (new_tokens + inputs.prefill)
            if inputs.board_power_w is not None:
                out["energy_j_per_token"] = inputs.board_power_w * gpu_seconds_per_token
            if inputs.price_per_gpu_hour is not None:
                out["cost_per_million_tokens"] = (inputs.price_per_gpu_hour / 3600.0 * 1e6
                                                  * gpu_seconds_per_token)

    if tpot_budget is not None:
        budget = as_float64(tpot_budget) * shape.tokens_per_step
        if shape.calibrated:  # the overheads come off the budget of every B >= 1
            budget = budget - shape.fixed_time
        # solved once per configuration but the batch, then shown at every batch
        largest = max_batch_for_budget(shape, assumptions, compute_rate, memory_rate,
                                        links, budget)
        if shape.host is not None:  # and the host's time must fit the whole budget
            largest = minimum(largest, _host_max_batch(
                shape.host, as_float64(tpot_budget) * shape.tokens_per_step,
                inputs.prefill > 0))
        full = np.broadcast_shapes(np.shape(largest), np.shape(batch))
        out["max_batch_for_tpot"] = (largest if np.shape(largest) == full
                                     else np.broadcast_to(largest, full))
    return out


def _host_max_batch(efficiency, budget, prompt):
    """Largest B >= 1 whose host time (B decodes and the prompt chunk, if any) fits
    `budget` (0 if none; unbounded without a time per sequence)."""
    room = budget - host_time(prompt, efficiency)
    if efficiency.host_sequence_s == 0:
        return where(room >= 0, np.inf, 0.0)
    with np.errstate(over="ignore"):  # a tiny time per sequence: unbounded
        largest = floor(room / efficiency.host_sequence_s * (1 + 1e-12))
    return where(largest >= 1, largest, 0.0)


def _memory(inputs: StepInputs, shape: _Shape):
    """Per GPU: resident weight bytes, KV bytes of one decode sequence, KV of the prompt."""
    model = inputs.model
    bias_params = model.qkv_bias * (model.heads + 2.0 * inputs.kv_heads) * model.head_dim
    resident_params = (model.layers * (shape.attention_params + bias_params)
                       + model.ffn_always_read_params + model.static_resident_params)
    weight_bytes = resident_params * inputs.weight_bytes
    prompt_kv = (0.0 if shape.prompt_keys is None
                 else shape.kv_per_gpu(shape.kv_token_layer_bytes * shape.prompt_keys))
    kv_per_sequence = shape.kv_per_gpu(shape.kv_token_layer_bytes * shape.cached_keys)
    if shape.layout is not None:
        expert_bytes = (model.routed_expert_params * shape.expert_weight_bytes
                        if shape.routed else 0.0)
        return shape.layout.memory(weight_bytes, expert_bytes, kv_per_sequence, prompt_kv,
                                   shape)
    if shape.routed:
        weight_bytes = weight_bytes + model.routed_expert_params * shape.expert_weight_bytes
    return shape.per_gpu(weight_bytes), kv_per_sequence, prompt_kv


