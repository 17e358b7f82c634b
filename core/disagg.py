"""Disaggregated and aggregated serving on a system, from the step model: the best
deployment under TTFT and TPOT objectives, and the smallest one that sustains a rate.

A workload is taken at its mean prompt length L and mean output length O (a fluid model:
every request is the mean request). Deployments are built of replicas of a layout
(`Layout`: tp x dp GPUs, ep = 1 or tp x dp, one pipeline stage), each a `sweep point`
configuration on the system.

- Disaggregated: x prefill replicas and y decode replicas. A prefill attention group runs
  one prompt at a time: t_p = the step of L prefill tokens; the pool is x * dp_p servers of
  service time t_p. The prompt's KV cache, L * (KV bytes per token) over all layers, then
  moves to a decode group: min(tp_p, tp_d) GPU links in parallel, NVLink when both pools fit
  one domain, else the network, plus its latency. A decode group runs B sequences at the
  mean context L + O/2: TPOT = its step time t_d, the pool's capacity y * dp_d * B / (O t_d)
  requests/s (B within the KV cache).
- Aggregated: y replicas, each attention group running B decodes and, to keep its batch
  fed, c = B L / O prefill tokens per step (chunked prefill, chunks after (L - c)/2 cached
  tokens on average; for c > L one chunk of c tokens stands for c / L prompts, which
  overstates their attention and pays one prompt's fixed time per head, not c / L):
  TPOT = the step time t_a, a prompt's prefill spans max(1, L / c) steps, the capacity
  is y * dp * B / (O t_a).
- TTFT = the prefill's service time (+ the KV transfer) + the wait in an M/D/c queue of the
  prompts (Poisson arrivals), by Sakasegawa's approximation:
  W = rho^(sqrt(2 (c + 1)) - 1) / (c (1 - rho)) * s / 2 for c servers of service time s at
  load rho; the load is the largest that meets the TTFT objective (bisection).
The sustained rate is the smaller of the prefill side's (servers * rho / s) and the decode
side's capacity; throughput per GPU = rate * O / GPUs. Decode queueing, prefix caching and
the spread of the lengths are not modelled: `sweep optimize` and `sweep simulate` simulate
one aggregated replica request by request.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rooftui.core.assumptions import Assumptions
from rooftui.core.dtypes import check_dtype
from rooftui.core.errors import SpecError
from rooftui.core.model import Model, ModelArrays
from rooftui.core.point import uneven_split
from rooftui.core.step import evaluate_step
from rooftui.core.systems import System
from rooftui.core.tables import GPUTable, SystemTable, dtype_code, gather_step_inputs

BATCHES = np.unique(np.geomspace(1, 4096, 64).round())  # decode batches per group
TP_CHOICES = (1, 2, 4, 8)
WIDE_EP = (2, 4, 8, 16, 32, 64, 72)  # dp = ep attention groups of one GPU each


@dataclass(frozen=True)
class Layout:
    """One replica: dp attention groups of tp GPUs; ep = 1 or tp * dp."""

    tp: int
    dp: int = 1
    ep: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.dp

    def describe(self) -> str:
        return f"tp{self.tp}" + (f"-dp{self.dp}" if self.dp > 1 else "") + (
            f"-ep{self.ep}" if self.ep > 1 else "")


@dataclass(frozen=True)
class Serving:
    """What `deployments` needs: model, system, formats, lengths, objectives, limits."""

    model: Model
    system: System
    input_tokens: float
    output_tokens: float
    slo_ttft: float
    slo_tpot: float
    weight_dtype: str
    kv_dtype: str
    compute_dtype: str
    expert_weight_dtype: str | None
    assumptions: Assumptions
    max_gpus: int = 64
    price_per_gpu_hour: float | None = None


def candidate_layouts(model: Model, max_gpus: int) -> list[Layout]:
    """Tensor-parallel replicas of up to 8 GPUs that split the model evenly (with expert
    parallelism over them for an MoE model), and for an MoE model wide expert parallelism
    with data-parallel attention (tp 1, dp = ep) where ep divides the experts."""
    out = []
    for tp in TP_CHOICES:
        heads, kv = uneven_split(tp, model.num_attention_heads, model.num_key_value_heads,
                                 model.is_mla)
        if tp > max_gpus or heads or kv:
            continue
        out.append(Layout(tp))
        if model.is_moe and tp > 1 and model.num_experts % tp == 0:
            out.append(Layout(tp, 1, tp))
    if model.is_moe:
        out += [Layout(1, n, n) for n in WIDE_EP
                if n <= max_gpus and model.num_experts % n == 0]
    return out


def _evaluate(serving: Serving, layout: Layout, **step) -> dict[str, np.ndarray]:
    inputs = gather_step_inputs(
        GPUTable.of([serving.system.gpu]), ModelArrays.stack([serving.model]), gpu=0, model=0,
        weight_dtype=dtype_code(serving.weight_dtype), kv_dtype=dtype_code(serving.kv_dtype),
        compute_dtype=dtype_code(serving.compute_dtype),
        expert_weight_dtype=(None if serving.expert_weight_dtype is None
                             else dtype_code(serving.expert_weight_dtype)),
        tp=layout.tp, dp=layout.dp, ep=layout.ep, systems=SystemTable.of([serving.system]),
        system=0, mfu=serving.assumptions.mfu, mbu=serving.assumptions.mbu,
        memory_reserve_gb=serving.assumptions.memory_reserve_gb, **step)
    return evaluate_step(inputs, serving.assumptions)


def queue_wait(load, servers, service):
    """Mean wait of an M/D/c queue (Sakasegawa): rho^(sqrt(2(c+1)) - 1) / (c (1 - rho)) * s/2."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(load < 1, load ** (np.sqrt(2.0 * (servers + 1.0)) - 1.0)
                        / (servers * (1.0 - load)) * 0.5 * service, np.inf)


def largest_load(servers, service, fixed, slo):
    """The largest load rho < 1 with fixed + service + wait(rho) <= slo (0 if none)."""
    low = np.zeros(np.broadcast_shapes(np.shape(servers), np.shape(service), np.shape(fixed)))
    high = np.ones_like(low)
    feasible = fixed + service <= slo
    for _ in range(50):
        middle = 0.5 * (low + high)
        fits = fixed + service + queue_wait(middle, servers, service) <= slo
        low, high = np.where(fits, middle, low), np.where(fits, high, middle)
    return np.where(feasible, low, 0.0)


def kv_transfer(serving: Serving, prefill: Layout, decode: Layout, gpus) -> tuple:
    """Bytes of one request's KV cache and the seconds to move them between the pools."""
    model, system = serving.model, serving.system
    nbytes = serving.input_tokens * model.kv_bytes_per_token(serving.kv_dtype)
    streams = min(prefill.tp, decode.tp)
    inside = np.asarray(gpus) <= system.gpus_per_domain
    rate = np.where(inside, system.domain_bytes_per_s, system.network_bytes_per_s) * streams
    latency = np.where(inside, system.domain_latency_us, system.network_latency_us) / 1e6
    return nbytes, nbytes / rate + latency


def _best(score, valid):
    """Index of the highest score among the valid, or None."""
    score = np.where(valid, score, -np.inf)
    index = int(np.argmax(score))
    return None if not np.isfinite(score.flat[index]) else index


def deployments(serving: Serving, rate: float | None = None) -> dict:
    """The best disaggregated and aggregated deployments: the most tokens/s per GPU under
    the objectives, or with `rate` the fewest GPUs that sustain it (ties: the most tokens/s
    per GPU). Each a dict of `report_keys`, or None when nothing meets the objectives."""
    check_dtype(serving.kv_dtype)
    length, output = serving.input_tokens, serving.output_tokens
    layouts = candidate_layouts(serving.model, serving.max_gpus)
    if not layouts:
        raise SpecError(f"no tensor-parallel split of {serving.model.name} over up to "
                        f"{serving.max_gpus} GPUs divides its heads")
    context = length + 0.5 * output
    decode = {}
    for layout in layouts:
        m = _evaluate(serving, layout, batch=BATCHES, context=context, prefill=0,
                      prefill_context=0)
        fits = (m["max_batch"] >= BATCHES) & (m["step_time_s"] <= serving.slo_tpot)
        decode[layout] = (m["step_time_s"], fits)
    prefill = {layout: float(_evaluate(serving, layout, batch=0, context=0, prefill=length,
                                       prefill_context=0)["step_time_s"])
               for layout in layouts}
    best_disagg = _best_disaggregated(serving, layouts, prefill, decode, rate)
    best_aggregated = _best_aggregated(serving, layouts, rate)
    return {"disaggregated": best_disagg, "aggregated": best_aggregated}


def _replicas(layout: Layout, max_gpus: int) -> np.ndarray:
    return np.arange(1, max_gpus // layout.gpus + 1, dtype=np.float64)


def _score(rate_sustained, gpus, target):
    """What a search maximises: tokens per GPU (through the rate), or with a target rate
    the fewest GPUs that sustain it, then the most per GPU."""
    per_gpu = rate_sustained / gpus
    if target is None:
        return per_gpu, rate_sustained > 0
    return -gpus + per_gpu / (1.0 + per_gpu) * 0.5, rate_sustained >= target


def _best_disaggregated(serving, layouts, prefill, decode, target):
    output = serving.output_tokens
    best, best_score = None, -np.inf
    for p_layout in layouts:
        t_p = prefill[p_layout]
        if t_p > serving.slo_ttft:
            continue
        x = _replicas(p_layout, serving.max_gpus)[:, None]  # prefill replicas
        for d_layout in layouts:
            t_d, fits = decode[d_layout]
            y = _replicas(d_layout, serving.max_gpus)[None, :, None]  # decode replicas
            gpus = x[:, :, None] * p_layout.gpus + y * d_layout.gpus  # (x, y, 1)
            kv_bytes, kv_time = kv_transfer(serving, p_layout, d_layout, gpus)
            servers = x[:, :, None] * p_layout.dp
            load = largest_load(servers, t_p, kv_time, serving.slo_ttft)
            prefill_rate = servers * load / t_p
            decode_rate = np.where(fits, y * d_layout.dp * BATCHES / (output * t_d), 0.0)
            sustained = np.minimum(prefill_rate, decode_rate)
            valid = (gpus <= serving.max_gpus) & (sustained > 0)
            score, meets = _score(sustained, gpus, target)
            index = _best(np.broadcast_to(score, sustained.shape), valid & meets)
            if index is None:
                continue
            i, j, k = np.unravel_index(index, sustained.shape)
            value = np.broadcast_to(score, sustained.shape)[i, j, k]
            if value <= best_score:
                continue
            best_score = value
            rate = float(sustained[i, j, k]) if target is None else float(target)
            n_gpus = int(gpus[i, j, 0])
            wait = float(queue_wait(rate / (float(servers[i, 0, 0]) / t_p), servers[i, 0, 0],
                                    t_p))
            best = _report(serving, "disaggregated", rate, float(sustained[i, j, k]), n_gpus,
                           tpot=float(t_d[k]), ttft=t_p + float(kv_time[i, j, 0]) + wait,
                           batch=int(BATCHES[k]),
                           prefill={"layout": p_layout.describe(), "replicas": int(x[i, 0]),
                                    "gpus": int(x[i, 0]) * p_layout.gpus,
                                    "prefill_time_s": t_p},
                           decode={"layout": d_layout.describe(), "replicas": int(y[0, j, 0]),
                                   "gpus": int(y[0, j, 0]) * d_layout.gpus,
                                   "batch_per_group": int(BATCHES[k])},
                           kv={"bytes_per_request": kv_bytes,
                               "transfer_time_s": float(kv_time[i, j, 0]),
                               "link": ("nvlink_domain" if n_gpus
                                        <= serving.system.gpus_per_domain else "network")})
    return best


def _best_aggregated(serving, layouts, target):
    length, output = serving.input_tokens, serving.output_tokens
    best, best_score = None, -np.inf
    for layout in layouts:
        chunk = BATCHES * length / output
        m = _evaluate(serving, layout, batch=BATCHES, context=length + 0.5 * output,
                      prefill=chunk, prefill_context=np.maximum(0.5 * (length - chunk), 0.0))
        t_a = m["step_time_s"]
        span = np.maximum(1.0, output / BATCHES) * t_a
        fits = (m["max_batch"] >= BATCHES) & (t_a <= serving.slo_tpot)
        y = _replicas(layout, serving.max_gpus)[:, None]
        servers = y * layout.dp
        load = largest_load(servers, span, 0.0, serving.slo_ttft)
        capacity = servers * BATCHES / (output * t_a)
        sustained = np.where(fits, np.minimum(capacity, servers * load / span), 0.0)
        gpus = y * layout.gpus * np.ones_like(sustained)
        score, meets = _score(sustained, gpus, target)
        index = _best(np.broadcast_to(score, sustained.shape), (sustained > 0) & meets)
        if index is None:
            continue
        i, k = np.unravel_index(index, sustained.shape)
        value = np.broadcast_to(score, sustained.shape)[i, k]
        if value <= best_score:
            continue
        best_score = value
        rate = float(sustained[i, k]) if target is None else float(target)
        wait = float(queue_wait(min(rate / capacity[i, k], rate * span[k] / servers[i, 0]),
                                servers[i, 0], span[k]))
        best = _report(serving, "aggregated", rate, float(sustained[i, k]), int(gpus[i, k]),
                       tpot=float(t_a[k]), ttft=float(span[k]) + wait, batch=int(BATCHES[k]),
                       decode={"layout": layout.describe(), "replicas": int(y[i, 0]),
                               "gpus": int(gpus[i, k]), "batch_per_group": int(BATCHES[k]),
                               "prefill_chunk_tokens": float(chunk[k])})
    return best


def _report(serving, kind, rate, sustained, gpus, *, tpot, ttft, batch, decode,
            prefill=None, kv=None) -> dict:
    output = serving.output_tokens
    price = serving.price_per_gpu_hour
    per_hour = None if price is None else price * gpus
    return {
        "kind": kind, "gpus": gpus, "rate_req_s": rate, "sustained_req_s": sustained,
        "tokens_per_s": rate * output, "tokens_per_s_per_gpu": rate * output / gpus,
        "tokens_per_s_per_user": 1.0 / tpot, "req_s_per_gpu": rate / gpus,
        "ttft_s": ttft, "tpot_s": tpot, "decode_batch_per_group": batch,
        "prefill": prefill, "decode": decode, "kv_transfer": kv,
        "cost_per_hour": per_hour,
        "cost_per_million_tokens": (None if per_hour is None
                                    else per_hour / 3600.0 / (rate * output) * 1e6),
    }


def mean_lengths(workload) -> tuple[float, float]:
    """The workload's mean prompt and output lengths (tokens)."""
    return (float(workload.input_tokens.mean()), float(workload.output_tokens.mean()))

