"""Pipeline, expert and attention-data parallelism on top of tensor parallelism: how one
replica's step is split over its GPUs, per GPU, for whole grids (used by core/step.py).

Layout. A replica has pp pipeline stages of tp * dp GPUs. In a stage, dp attention groups
of tp GPUs each run their own `batch` decode sequences (and prefill chunk) through
attention and the dense layers, tensor-parallel over tp as core/step.py describes. MoE
layers: with ep = 1 each attention group keeps every routed expert (split over its tp
GPUs), so the dp groups are independent; with ep = tp * dp (the only other choice) the
stage's GPUs share the routed experts, E / ep whole experts each, and the tokens of all
dp groups are routed over them: DeepSeek-V3's data-parallel attention with expert-parallel
MoE (tp = 1, dp = ep), or vLLM's expert parallelism under tensor-parallel attention
(dp = 1, ep = tp). `batch`, `max_batch` and every per-GPU figure are of one attention
group on one stage; the replica's tokens/s are dp times its group's.

Pipeline (pp > 1). A stage holds 1/pp of the layers and, assumed balanced, 1/pp of the rest
(embedding and LM head too: engines give their stages fewer layers), so every per-GPU
FLOP, byte, weight and KV byte is divided by pp. A step runs its batch as m micro-batches
(default m = pp): each reads the stage's weights again, and each crosses each stage
boundary once (`pipeline_transfer`: its tokens' hidden states, 1/tp of them from each
GPU). The schedule is GPipe's: (m + pp - 1) stage times, the GPU's busy time times
(m + pp - 1) / m, the bubble.

Expert parallelism (ep > 1).
- weights: a GPU holds E / ep experts and reads those the dp * T / m tokens of a
  micro-batch touch: (E / ep) (1 - (1 - k/E)^(dp T / m)) of them.
- the busiest GPU: each MoE layer waits for the GPU with the most (token, expert) pairs.
  Under uniform routing a token puts a hypergeometric number of its k experts on a given
  GPU: mean k / ep, variance v = k (1/ep)(1 - 1/ep)(E - k)/(E - 1). Over N = dp T tokens
  the ep loads sum to N k, each with mean mu = N k / ep and variance N v; for large N they
  are nearly normal with correlation -1/(ep - 1), i.e. iid normals minus their mean, whose
  maximum is the iid maximum minus the mean: mu + sqrt(N v) * z, z = c_ep / sqrt(1 - 1/ep),
  c_n = E[max of n iid standard normals] by quadrature (c_2 = 1/sqrt(pi), c_8 = 1.4236,
  c_32 = 2.0697). A load is a sum of near-binomial counts, skewed by about
  (1 - 2/ep) / sqrt(N v); the Cornish-Fisher term for that skew adds (z^2 - 1)(1 - 2/ep)/6
  pairs, whatever N:
      E[busiest] = mu + z sqrt(N v) + (z^2 - 1)(1 - 2/ep) / 6.
  Against Monte Carlo (E = 256, k = 8; tests/unit/test_parallel.py) it is within 1 % from
  mu >= 2 pairs at ep = 8 and from mu >= 4 at ep = 32, +3 % at mu = 1 and +12 % for one
  token over 32 GPUs (the discreteness); exact at ep = 2. Per-layer maxima are summed:
  every layer synchronises at its all-to-all. The mean's FLOPs are the tp case's; the
  excess is a term in sqrt(T), concave in the batch like the experts' bytes (the TPOT
  solver takes it the same way), and a constant once the step has a token.
- all-to-all (`all_to_all`): at each MoE layer a GPU sends each of its T / tp tokens' hidden
  states to the GPUs of its k experts (dispatch) and gets them back (combine): 2 k (1 - 1/ep)
  T / tp hidden vectors in the compute dtype, one copy per routed expert (no per-GPU
  deduplication), spread evenly over the ep - 1 other GPUs.

Links. Each collective is timed on the link it crosses (`core.systems`), the stage's
tp * dp GPUs and the replica's pp stages placed in as few NVLink domains as they fill. An
all-to-all over ep GPUs in domains of D sends (min(ep, D) - 1)/(ep - 1) of its bytes over
NVLink and the rest through the NIC at once: its time is the slower of the two. A stage
boundary is NVLink while the replica fits one domain, else the network. Each collective
pays its link's latency once per micro-batch (the all-to-all twice per MoE layer). Without
a system, both use the GPU's interconnect and no latency.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace

import numpy as np

from rooftui.core.elementwise import any_true, as_float64, maximum, minimum, where
from rooftui.core.step_parts import Linear, is_scalar, scaled


@functools.lru_cache(maxsize=256)
def _max_of_normals(count: int) -> float:
    """E[max of `count` iid standard normals]: the integral of x n phi(x) Phi(x)^(n-1)."""
    if count <= 1:
        return 0.0
    x = np.linspace(-12.0, 12.0, 24_001)
    cdf = 0.5 * (1.0 + np.frompyfunc(math.erf, 1, 1)(x / math.sqrt(2.0)).astype(np.float64))
    density = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return float(np.trapezoid(x * count * density * cdf ** (count - 1), x))


def busiest_excess(ep) -> np.ndarray:
    """z = c_ep / sqrt(1 - 1/ep): the busiest of ep loads that sum to a constant, in
    standard deviations of one load above the mean (0 for one GPU). Works on arrays."""
    ep = np.asarray(ep, dtype=np.float64)
    values, inverse = np.unique(ep, return_inverse=True)
    excess = np.array([0.0 if e <= 1 else _max_of_normals(int(e)) / math.sqrt(1.0 - 1.0 / e)
                       for e in values])
    return excess[inverse].reshape(ep.shape)


def busiest_skew(ep) -> np.ndarray:
    """(z^2 - 1)(1 - 2/ep) / 6: the pairs the loads' skew adds to the busiest (0 for one
    GPU, and for two, whose loads mirror each other)."""
    ep = np.asarray(ep, dtype=np.float64)
    return where(ep > 1, (busiest_excess(ep) ** 2 - 1.0) * (1.0 - 2.0 / ep) / 6.0, 0.0)


def pair_variance(experts, experts_per_token, ep) -> np.ndarray:
    """Variance of the number of one token's k experts (of E, distinct) held by one of ep
    GPUs with E / ep experts each (hypergeometric)."""
    share = 1.0 / np.asarray(ep, dtype=np.float64)
    experts = np.asarray(experts, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return where(experts > 1, experts_per_token * share * (1.0 - share)
                        * (experts - experts_per_token) / (experts - 1.0), 0.0)


def busiest_expert_load(tokens, experts, experts_per_token, ep) -> np.ndarray:
    """Expected (token, expert) pairs on the busiest of ep GPUs when `tokens` tokens each
    pick k of E experts uniformly (the module's normal approximation)."""
    tokens = np.asarray(tokens, dtype=np.float64)
    spread = np.sqrt(tokens * pair_variance(experts, experts_per_token, ep))
    return (tokens * experts_per_token / ep + spread * busiest_excess(ep)
            + busiest_skew(ep) * (tokens > 0))


def all_to_all_link(ep, gpus_per_domain, domain_rate, domain_latency, network_rate,
                    network_latency):
    """Per GPU effective bandwidth (B/s, per direction) and latency (s) of an all-to-all
    over ep GPUs: 1 / max(inside share / NVLink rate, outside share / network rate)."""
    ep = np.asarray(ep, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        inside = where(ep > 1, (minimum(ep, gpus_per_domain) - 1.0) / (ep - 1.0), 1.0)
        rate = 1.0 / maximum(inside / domain_rate, (1.0 - inside) / network_rate)
    return rate, where(ep > gpus_per_domain, network_latency, domain_latency)


def stage_link(replica_gpus, gpus_per_domain, domain_rate, domain_latency, network_rate,
               network_latency):
    """Bandwidth and latency of a pipeline stage boundary: NVLink while the replica's GPUs
    fit one domain, else the network."""
    inside = np.asarray(replica_gpus) <= gpus_per_domain
    return (where(inside, domain_rate, network_rate),
            where(inside, domain_latency, network_latency))


def _is_one(value) -> bool:
    return is_scalar(value, 1.0)


class Layout:
    """The pp, ep, dp and micro-batch arrays of a grid, and what they do to its parts."""

    def __init__(self, inputs) -> None:
        self.pp = as_float64(inputs.pp)
        self.ep = as_float64(inputs.ep)
        self.dp = as_float64(inputs.dp)
        self.micro_batches = (self.pp if inputs.micro_batches is None
                              else as_float64(inputs.micro_batches))
        self.pipelined = not (_is_one(inputs.pp) and _is_one(self.micro_batches))
        self.bubble = (self.micro_batches + self.pp - 1.0) / self.micro_batches

    @staticmethod
    def of(inputs) -> Layout | None:
        """None for a replica without pipeline, expert or attention-data parallelism (the
        step is then exactly core/step.py's tensor-parallel one)."""
        if all(_is_one(value) for value in (inputs.pp, inputs.ep, inputs.dp)) and (
                inputs.micro_batches is None or _is_one(inputs.micro_batches)):
            return None
        return Layout(inputs)

    def distribute(self, parts: dict, inputs, shape) -> dict:
        """The parts per GPU of one stage under this layout."""
        model = inputs.model
        parts = dict(parts)
        tp = shape.tp if shape.split else 1.0
        expert_parallel = self.ep > 1
        decode_only = is_scalar(inputs.prefill, 0)

        def per_token_link(bytes_per_token):
            """A link part of `bytes_per_token` for each token of the step."""
            return Linear(bytes_fixed=None if decode_only else bytes_per_token * inputs.prefill,
                          bytes_per_sequence=bytes_per_token * shape.queries)

        if shape.routed and any_true(expert_parallel):
            gemm = parts["gemm"]
            pair_params = where(model.experts > 0, model.routed_expert_params
                                   / maximum(model.experts, 1.0), 0.0)
            variance = pair_variance(model.experts, model.experts_per_token, self.ep)
            parts["gemm"] = replace(
                gemm,
                experts=where(expert_parallel, model.routed_expert_params
                                 * shape.expert_weight_bytes / self.ep, gemm.experts),
                log_miss=where(expert_parallel, gemm.log_miss * self.dp, gemm.log_miss),
                flops_sqrt=where(expert_parallel, 2.0 * pair_params
                                    * busiest_excess(self.ep) * np.sqrt(variance * self.dp),
                                    0.0),
                flops_skew=2.0 * pair_params * busiest_skew(self.ep))
            # dispatch and combine: k copies per token, (ep - 1)/ep of them to other GPUs
            sent = (2.0 * model.experts_per_token * (1.0 - 1.0 / self.ep) / tp
                    * model.moe_layers * model.hidden * inputs.activation_bytes)
            parts["all_to_all"] = per_token_link(where(expert_parallel, sent, 0.0))
        elif np.ndim(inputs.ep) > 0:  # an ep axis: every block of a grid has the part
            parts["all_to_all"] = per_token_link(np.zeros(np.shape(inputs.ep)))
        if self.pipelined:
            m = self.micro_batches
            parts = {name: scaled(part, None, self.pp, self.pp) for name, part in parts.items()}
            gemm = parts["gemm"]
            parts["gemm"] = replace(
                gemm, weights=gemm.weights * m,
                experts=None if gemm.experts is None else gemm.experts * m,
                log_miss=gemm.log_miss / m,
                flops_sqrt=None if gemm.flops_sqrt is None else gemm.flops_sqrt * np.sqrt(m),
                flops_skew=None if gemm.flops_skew is None else gemm.flops_skew * m)
            boundary = where(self.pp > 1, model.hidden * inputs.activation_bytes / tp, 0.0)
            parts["pipeline_transfer"] = per_token_link(boundary)
            shape.kv_read_per_sequence = shape.kv_read_per_sequence / self.pp
        return parts

    def links(self, inputs) -> dict:
        """Per link part: (bandwidth, seconds of latency per step) of the link it crosses."""
        model = inputs.model
        m = self.micro_batches
        return {
            "communication": (inputs.interconnect, None),
            "draft_communication": (inputs.interconnect, None),
            "all_to_all": (inputs.expert_link, where(
                self.ep > 1, 2.0 * model.moe_layers / self.pp * m * inputs.expert_link_latency,
                0.0)),
            "pipeline_transfer": (inputs.stage_link, where(
                self.pp > 1, m * inputs.stage_link_latency, 0.0)),
        }

    def stretched(self, compute_rate, memory_rate, links):
        """The rates (and latencies) that make every part's time the bubble's multiple."""
        bubble = self.bubble
        return (compute_rate / bubble, memory_rate / bubble,
                {name: (rate / bubble, None if latency is None else latency * bubble)
                 for name, (rate, latency) in links.items()})

    def memory(self, resident_bytes, expert_bytes, kv_per_sequence, prompt_kv, shape):
        """Per GPU: resident weights, one sequence's KV, the prompt's KV."""
        weights = where(self.ep > 1, shape.per_gpu(resident_bytes) + expert_bytes / self.ep,
                           shape.per_gpu(resident_bytes + expert_bytes))
        return (weights / self.pp,
                kv_per_sequence / self.pp, prompt_kv / self.pp)

    def gpus(self, shape):
        """GPUs of the replica, and those one attention group's tokens cost (tp * pp)."""
        tp = shape.tp if shape.split else 1.0
        return tp * self.dp * self.pp, tp * self.pp
