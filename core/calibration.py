"""Fitting the efficiency model to measured kernel and step times, with numpy only.

Measured rows come in six kinds the fit prices (see `KINDS`): one weight GEMM, one
layer's decode or prefill attention kernel, a whole engine step, one all-reduce, one
device-to-device copy; and end-to-end times under load (`E2E_KINDS`: TTFT, TPOT, ITL of a
benchmark run), which only a replay through the simulator can price, so `row_costs`
refuses them.
Each row's FLOPs and bytes per part are computed once with the step model
(`evaluate_step` for attention and steps), so a fit only re-evaluates the closed-form times
of `core.efficiency`; a prediction for a step row equals what `evaluate_step` gives for that
step under the same profile.

The fit minimises the squared log ratio of predicted to measured time (relative errors,
symmetric for over- and under-prediction), each dataset weighted equally whatever its row
count, by Levenberg-Marquardt over transformed parameters that keep fractions in (0, 1)
and amounts > 0, from a few starting points. Parameters the rows cannot inform are not
fitted and keep their starting values.

Formats: a row's matmuls run at the peak of its compute dtype and under that dtype's own
GEMM parameters (`Efficiency.for_compute_dtypes`); a step's routed experts are stored in
their own dtype (gpt-oss: mxfp4) and priced by their bytes.

Tensor parallelism: a row with `tp` > 1 is one GPU's share, as the step model splits it
(weights, heads and KV over the tp GPUs; for steps, the all-reduces over the interconnect).

Collective libraries: an all-reduce row of a library with its own table (`library`: NCCL,
TensorRT-LLM's custom all-reduce) fits and is priced by that table (`nccl.
interconnect_efficiency`, ...); other rows by the base values, or by the library the
profile selects (`Assumptions.collective_library`). A fit that moves library tables but
no base all-reduce value (no row without a library informs one) sets the base values to
those of the library with the most all-reduce rows, so a profile's steps pay it unless
they select another, as they paid the one fit of every all-reduce row before there were
tables.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields

import numpy as np

from rooftui.core.assumptions import Assumptions
from rooftui.core.dtypes import NATIVE, default_compute_dtype
from rooftui.core.efficiency import (
    ATTENTION_PARAMETERS,
    COLLECTIVE_PARAMETERS,
    COLLECTIVE_TABLES,
    COMPUTE_TABLES,
    GEMM_PARAMETERS,
    PARAMETERS,
    QUANTISING_TABLES,
    Efficiency,
    attention_times,
    collective_library_code,
    fixed_step_time,
    gemm_times,
    has_host_floor,
    host_time,
    link_time,
)
from rooftui.core.errors import SpecError
from rooftui.core.hardware import GPU
from rooftui.core.model import Model, ModelArrays
from rooftui.core.step import evaluate_step
from rooftui.core.tables import DTYPE_BYTES, DTYPES, GPUTable, dtype_code, gather_step_inputs

E2E_KINDS = ("e2e_ttft", "e2e_tpot", "e2e_itl")  # a benchmark run's times, per request
KINDS = ("gemm", "attention_decode", "attention_prefill", "step", "allreduce", "copy",
         *E2E_KINDS)
KERNEL_KINDS = ("gemm", "copy")  # isolated kernels paying kernel_overhead_s
ATTENTION_KINDS = ("attention_decode", "attention_prefill")  # paying attention_overhead_s
# how an isolated op was timed: CUDA events around its eager launch (the default), a
# CUDA-graph replay, the host's clock around the launch and a synchronize
TIMERS = ("cuda_events", "cuda_graph", "host_clock")
# "mbu" is the profile's own bandwidth fraction (a plain copy); the rest are `Efficiency`'s,
# a compute dtype's own GEMM parameters as `fp8.gemm_mfu`, ... (`Efficiency.as_dict`)
FIT_PARAMETERS = ("mbu", *PARAMETERS, *(
    f"{table}.{name}" for table in COMPUTE_TABLES for name in GEMM_PARAMETERS
    if name != "activation_quant_bytes" or table in QUANTISING_TABLES), *(
    f"{table}.{name}" for table in QUANTISING_TABLES for name in ATTENTION_PARAMETERS), *(
    f"{table}.{name}" for table in COLLECTIVE_TABLES for name in COLLECTIVE_PARAMETERS))
# the power of the smoothed maximum in a fit's first stage
SMOOTHING = 4.0
# weight of the pull towards typical values, per transformed parameter, against residuals
# of log time whose squares sum to about one per dataset times the squared relative error
PRIOR_WEIGHT = 3e-3
# typical size of each amount: where a fit starts, and the scale of its log transform
TYPICAL = {"step_overhead_s": 1e-3, "layer_overhead_s": 1e-5, "kernel_overhead_s": 3e-6,
           "attention_overhead_s": 1e-5, "prefill_attention_overhead_s": 1e-5,
           "launch_overhead_s": 3e-6,
           "host_timer_overhead_s": 2e-5, "gemm_m_half": 16.0, "attention_mfu_half": 256.0,
           "attention_mbu_half": 64.0, "allreduce_overhead_s": 1e-5,
           "allreduce_peer_overhead_s": 1e-6, "allreduce_bulk_overhead_s": 1e-5,
           "attention_kv_head_overhead_s": 1e-8, "attention_query_head_overhead_s": 3e-9,
           "attention_prompt_head_overhead_s": 1e-8,
           "activation_quant_bytes": 3.0}  # bf16 in, 8 bits and a scale out
# a fitted value this close to a bound is flagged: within 1 % of a fraction's 1 or 0, or
# under 1 % of an amount's typical size (an amount's bound is 0)
AT_BOUND = 0.01


@dataclass(frozen=True)
class Measurements:
    """Measured times, one entry per row in parallel arrays.

    `model` indexes `models` (-1 where the kind needs none); the dtypes index
    `tables.DTYPES`: `dtype` is the operands' format for kernels, the weights' for steps;
    `compute_dtype` the format the matmuls run in (None: the operands' own for kernels,
    nvfp4 as fp4; `default_compute_dtype` of the weights for steps); `expert_dtype` the
    routed experts' (None: as `dtype`). `message_bytes` is the message of an all-reduce or
    the bytes one copy writes. `dataset` indexes `datasets`. End-to-end rows carry their
    workload: `isl`, `osl` (tokens per request), `concurrency` (0: not closed-loop),
    `request_rate` (requests/s, 0: not given) and `num_prompts` (None: zeros).
    `timer` says how a row was timed (`TIMERS`; None: zeros, CUDA events around an
    eager launch, what a kernel benchmark does unless it says otherwise). `library` is an
    all-reduce row's collective library (`efficiency.collective_library_code`; None:
    zeros, none: the base values, or the profile's library).
    """

    kind: np.ndarray
    model: np.ndarray
    models: tuple[Model, ...]
    tp: np.ndarray
    batch: np.ndarray
    context: np.ndarray
    prefill: np.ndarray
    prefill_context: np.ndarray
    prompts: np.ndarray
    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    message_bytes: np.ndarray
    dtype: np.ndarray
    kv_dtype: np.ndarray
    time_s: np.ndarray
    dataset: np.ndarray
    datasets: tuple[str, ...]
    compute_dtype: np.ndarray | None = None
    expert_dtype: np.ndarray | None = None
    isl: np.ndarray | None = None
    osl: np.ndarray | None = None
    concurrency: np.ndarray | None = None
    request_rate: np.ndarray | None = None
    num_prompts: np.ndarray | None = None
    timer: np.ndarray | None = None
    library: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.compute_dtype is None:
            object.__setattr__(self, "compute_dtype",
                               default_compute_dtypes(self.kind, self.dtype))
        if self.expert_dtype is None:
            object.__setattr__(self, "expert_dtype", self.dtype)
        for name in ("isl", "osl", "concurrency", "request_rate", "num_prompts", "timer"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.zeros(len(self.time_s)))
        if self.library is None:
            object.__setattr__(self, "library", np.zeros(len(self.time_s), dtype=np.int64))

    def __len__(self) -> int:
        return len(self.time_s)

    def subset(self, mask: np.ndarray) -> Measurements:
        return dataclasses.replace(self, **{
            f.name: getattr(self, f.name)[mask] for f in fields(self)
            if isinstance(getattr(self, f.name), np.ndarray)})

    def kinds_present(self) -> list[str]:
        return [KINDS[code] for code in np.unique(self.kind)]

    def configuration_keys(self) -> np.ndarray:
        """One row per measurement of everything but its time: equal rows are repeats."""
        return np.column_stack([self.kind, self.model, self.tp, self.m, self.n, self.k,
                                self.batch, self.context, self.prefill, self.prefill_context,
                                self.prompts, self.message_bytes, self.dtype, self.kv_dtype,
                                self.compute_dtype, self.expert_dtype, self.isl, self.osl,
                                self.concurrency, self.request_rate, self.num_prompts,
                                self.library])


def default_compute_dtypes(kind: np.ndarray, dtype: np.ndarray) -> np.ndarray:
    """Compute dtype codes of rows that do not give one: a kernel's operand format (nvfp4
    multiplies as fp4), the step model's `default_compute_dtype` of a step's (or a run's)
    weights."""
    native = np.array([dtype_code(NATIVE.get(name, name)) for name in DTYPES])
    default = np.array([dtype_code(default_compute_dtype(name)) for name in DTYPES])
    modelled = np.isin(kind, [KINDS.index(k) for k in ("step", *E2E_KINDS)])
    return np.where(modelled, default[dtype], native[dtype])


@dataclass(frozen=True)
class RowCosts:
    """Per row: the work of each part and the rates it runs against (see `predict`)."""

    kind: np.ndarray
    time_s: np.ndarray
    dataset: np.ndarray
    compute_dtype: np.ndarray  # its code: which dtype's GEMM parameters apply
    kv_bytes: np.ndarray  # the KV cache's bytes per element: which attention table applies
    library: np.ndarray  # collective library code: which all-reduce table applies
    peak_flops: np.ndarray
    bandwidth: np.ndarray
    interconnect: np.ndarray
    gemm_flops: np.ndarray
    gemm_bytes: np.ndarray
    gemm_params: np.ndarray
    quantised_elements: np.ndarray  # GEMM inputs an fp8/fp4 kernel quantises (m * k)
    attention_flops: np.ndarray
    attention_bytes: np.ndarray
    queries: np.ndarray
    sequences: np.ndarray
    flops_per_key: np.ndarray
    bytes_per_key: np.ndarray
    kv_head_sequences: np.ndarray  # decode sequences x KV heads on the GPU x layers
    query_head_sequences: np.ndarray  # decode sequences x query heads on the GPU x layers
    prompt_heads: np.ndarray  # prompts x query heads on the GPU x layers
    activation_bytes: np.ndarray
    copy_bytes: np.ndarray
    layers: np.ndarray  # counted in the step overheads: 0 for kernel rows
    link_bytes: np.ndarray  # through each GPU's interconnect link
    collectives: np.ndarray  # collective operations, each paying allreduce_overhead_s
    peers: np.ndarray  # the other GPUs of each collective (tp - 1)
    kernels: np.ndarray  # 1 for an isolated GEMM or copy kernel, else 0
    attention_ops: np.ndarray  # 1 for an isolated attention op, else 0
    prefill_ops: np.ndarray  # 1 for an isolated prefill attention op, else 0
    launched_ops: np.ndarray  # 1 for an isolated op launched eagerly (no CUDA graph)
    host_timed_ops: np.ndarray  # 1 for an isolated op timed by the host clock

    def subset(self, mask: np.ndarray) -> RowCosts:
        return RowCosts(**{f.name: getattr(self, f.name)[mask] for f in fields(self)})


def row_costs(rows: Measurements, gpu: GPU, assumptions: Assumptions) -> RowCosts:
    """FLOPs and bytes of every row's parts on `gpu`, with the profile's counting flags
    (attention FLOPs, KV write, activation traffic) and collective library (for rows
    without their own); its efficiencies are not used.
    End-to-end rows are refused: a closed form cannot price a run under load."""
    end_to_end = np.isin(rows.kind, [KINDS.index(k) for k in E2E_KINDS])
    if end_to_end.any():
        names = sorted({rows.datasets[d] for d in np.unique(rows.dataset[end_to_end])})
        raise SpecError(
            f"e2e rows are fitted by replay: {int(end_to_end.sum())} end-to-end rows "
            f"({', '.join(names)}) are times under load, not steps; replay them through "
            "the simulator, or leave them out of a kernel or step fit")
    count = len(rows)
    zeros = np.zeros(count)
    cost = {f.name: zeros.copy() for f in fields(RowCosts)}
    kind = np.array(KINDS)[rows.kind]
    cost.update(kind=rows.kind, time_s=rows.time_s, dataset=rows.dataset,
                compute_dtype=rows.compute_dtype, kv_bytes=DTYPE_BYTES[rows.kv_dtype],
                library=np.where(rows.library > 0, rows.library,
                                 collective_library_code(assumptions.collective_library)))
    table = GPUTable.of([gpu])
    cost["peak_flops"] = table.peak_flops[0, rows.compute_dtype]
    cost["bandwidth"] = np.full(count, gpu.bandwidth_bytes_per_s)
    interconnect = (gpu.interconnect_gbs or math.nan) * 1e9
    cost["interconnect"] = np.full(count, interconnect)
    cost["kernels"] = np.isin(kind, KERNEL_KINDS).astype(np.float64)
    cost["attention_ops"] = np.isin(kind, ATTENTION_KINDS).astype(np.float64)
    cost["prefill_ops"] = (kind == "attention_prefill").astype(np.float64)
    isolated = cost["kernels"] + cost["attention_ops"]
    cost["launched_ops"] = isolated * (rows.timer != TIMERS.index("cuda_graph"))
    cost["host_timed_ops"] = isolated * (rows.timer == TIMERS.index("host_clock"))

    gemm = kind == "gemm"
    element = DTYPE_BYTES[rows.dtype]
    cost["gemm_flops"] = np.where(gemm, 2.0 * rows.m * rows.n * rows.k, 0.0)
    # weights, input and output, as closed_forms.gemm_intensity counts them
    cost["gemm_bytes"] = np.where(
        gemm, element * (rows.n * rows.k + rows.m * rows.k + rows.m * rows.n), 0.0)
    cost["gemm_params"] = np.where(gemm, rows.n * rows.k, 0.0)
    cost["quantised_elements"] = np.where(gemm, rows.m * rows.k, 0.0)
    copy = kind == "copy"
    cost["copy_bytes"] = np.where(copy, 2.0 * rows.message_bytes, 0.0)  # read and write
    allreduce = kind == "allreduce"
    cost["collectives"] = allreduce.astype(np.float64)
    cost["peers"] = rows.tp - 1.0
    # a ring all-reduce moves 2 (n - 1) / n of the message through each GPU's link
    cost["link_bytes"] = np.where(allreduce, 2.0 * (rows.tp - 1.0) / rows.tp
                                  * rows.message_bytes, 0.0)

    modelled = np.isin(kind, ("attention_decode", "attention_prefill", "step"))
    if modelled.any():
        _add_model_costs(cost, rows.subset(modelled), np.flatnonzero(modelled), kind[modelled],
                         table, assumptions)
    if np.isnan(cost["peak_flops"]).any():
        missing = sorted({DTYPES[c] for c in rows.compute_dtype[np.isnan(cost["peak_flops"])]})
        raise SpecError(f"{gpu.name} has no peak for {', '.join(missing)} (rows in those "
                        "formats cannot be predicted on it)")
    if np.isnan(interconnect) and (cost["collectives"] > 0).any():
        raise SpecError(f"{gpu.name} has no interconnect_gbs: all-reduces cannot be predicted")
    return RowCosts(**cost)


def _add_model_costs(cost, rows, where, kind, table, assumptions) -> None:
    """Attention-kernel and step rows: their parts from `evaluate_step` (per GPU of the
    row's tensor-parallel degree). A step of `prompts` prompts of `prefill` tokens runs
    the GEMMs over all its tokens and each prompt's attention separately."""
    models = ModelArrays.stack(list(rows.models))
    step = kind == "step"
    decode = kind != "attention_prefill"
    batch = np.where(decode, rows.batch, 0.0)
    prompts = np.where(decode & ~step, 0.0, rows.prompts)
    prefill = np.where(decode & ~step, 0.0, rows.prefill)

    def evaluate(batch, prefill, prefill_context):
        inputs = gather_step_inputs(
            table, models, gpu=0, model=rows.model, batch=batch, context=rows.context,
            prefill=prefill, prefill_context=prefill_context, weight_dtype=rows.dtype,
            kv_dtype=rows.kv_dtype, compute_dtype=rows.compute_dtype,
            expert_weight_dtype=rows.expert_dtype, tp=rows.tp)
        return evaluate_step(inputs, assumptions)

    whole = evaluate(batch, prompts * prefill, prompts * rows.prefill_context)
    decodes = evaluate(batch, 0.0, 0.0)
    prompt = evaluate(0.0, prefill, rows.prefill_context)
    # the matmul weights one token multiplies by, as the step model pads a GEMM: with
    # experts in their own format, the weight bytes no longer tell
    one_token = evaluate(1.0, 0.0, 0.0)
    taken = models.take(rows.model)
    layers = taken.layers
    per_layer = np.where(step, 1.0, 1.0 / layers)  # kernel rows are one layer
    # one GPU's share of the KV cache: 1/tp, but KV heads are replicated past tp (MLA's
    # latent serves every head), as the step model shards it
    kv_units = np.where(taken.kv_latent > 0, 1.0, taken.kv_heads)
    kv_share = np.maximum(1.0 / rows.tp, 1.0 / kv_units)
    attention_flops = decodes["attention_flops"] + prompts * prompt["attention_flops"]
    attention_bytes = decodes["attention_bytes"] + prompts * prompt["attention_bytes"]
    cost["gemm_flops"][where] = np.where(step, whole["gemm_flops"], 0.0)
    cost["gemm_bytes"][where] = np.where(step, whole["gemm_bytes"], 0.0)
    cost["gemm_params"][where] = np.where(step, one_token["gemm_flops"] / 2.0, 0.0)
    cost["attention_flops"][where] = attention_flops * per_layer
    cost["attention_bytes"][where] = attention_bytes * per_layer
    cost["queries"][where] = batch + prompts * prefill
    cost["sequences"][where] = batch + prompts * (prefill > 0)
    cost["flops_per_key"][where] = taken.attention_flops_per_key * layers * per_layer / rows.tp
    cost["bytes_per_key"][where] = whole["kv_bytes_per_token"] * kv_share * per_layer
    cost["kv_head_sequences"][where] = batch * kv_units * kv_share * layers * per_layer
    cost["query_head_sequences"][where] = batch * taken.heads / rows.tp * layers * per_layer
    cost["prompt_heads"][where] = (prompts * (prefill > 0) * taken.heads / rows.tp * layers
                                   * per_layer)
    if "activations_bytes" in whole:
        cost["activation_bytes"][where] = np.where(step, whole["activations_bytes"], 0.0)
    cost["layers"][where] = np.where(step, layers, 0.0)
    if "communication_bytes" in whole:
        # two all-reduces per layer and the logits' all-gather, as the step model has them
        split = step & (rows.tp > 1)
        cost["collectives"][where] = np.where(
            split, 2.0 * layers + (taken.lm_head_params > 0), 0.0)
        cost["link_bytes"][where] = np.where(split, whole["communication_bytes"], 0.0)


def profile_prediction(costs: RowCosts, assumptions: Assumptions) -> np.ndarray:
    """Predicted seconds under a profile: its efficiencies, mfu, mbu and overlap."""
    return predict(costs, assumptions.efficiency, mfu=assumptions.mfu,
                   mbu=assumptions.mbu, overlap=assumptions.overlap)


def predict(costs: RowCosts, efficiency: Efficiency, mfu: float = 1.0, mbu: float = 1.0,
            overlap: str = "parts", smoothing: float | None = None) -> np.ndarray:
    """Predicted seconds of every row: its parts' rooflines under `efficiency`, summed
    (overlap "parts") or under one roofline beside the link time ("full"), plus the
    overheads; the same arithmetic as the step model's for step rows. Each row's GEMMs
    use its compute dtype's parameters, and an fp8/fp4 GEMM kernel's activation
    quantisation streams beside it. `smoothing` p replaces each max(a, b) by
    (a^p + b^p)^(1/p) (a fit's first stage: both roofs then move the prediction, so a roof
    that starts below the other can still be fitted)."""
    maximum = np.maximum if smoothing is None else (
        lambda a, b: _smooth_maximum(a, b, smoothing))
    host = (np.where(costs.kind == KINDS.index("step"), host_time(costs.sequences, efficiency),
                     0.0) if has_host_floor(efficiency) else None)
    efficiency = efficiency.for_compute_dtypes(costs.compute_dtype, costs.kv_bytes,
                                               costs.library)
    compute_rate = mfu * costs.peak_flops
    memory_rate = mbu * costs.bandwidth
    gemm_compute, gemm_memory = gemm_times(costs.gemm_flops, costs.gemm_bytes,
                                           costs.gemm_params, compute_rate, memory_rate,
                                           efficiency)
    attention_compute, attention_memory = attention_times(
        costs.attention_flops, costs.attention_bytes, costs.queries, costs.sequences,
        costs.flops_per_key, costs.bytes_per_key, compute_rate, memory_rate, efficiency,
        costs.kv_head_sequences, costs.query_head_sequences, costs.prompt_heads)
    streams = (costs.activation_bytes + costs.copy_bytes
               + costs.quantised_elements * efficiency.activation_quant_bytes) / memory_rate
    communication = link_time(costs.link_bytes, costs.collectives, costs.interconnect,
                              efficiency, costs.peers)
    if overlap == "parts":
        body = (maximum(gemm_compute, gemm_memory)
                + maximum(attention_compute, attention_memory) + streams + communication)
    else:  # one roofline over the summed work; the link runs beside it
        body = maximum(maximum(gemm_compute + attention_compute,
                               gemm_memory + attention_memory + streams), communication)
    steps = np.where(costs.kind == KINDS.index("step"),
                     fixed_step_time(costs.layers, efficiency), 0.0)
    total = (body + steps + costs.kernels * efficiency.kernel_overhead_s
             + costs.attention_ops * efficiency.attention_overhead_s
             + costs.prefill_ops * efficiency.prefill_attention_overhead_s
             + costs.launched_ops * efficiency.launch_overhead_s
             + costs.host_timed_ops * efficiency.host_timer_overhead_s)
    # a step no shorter than an overlapping scheduler's host time on it
    return total if host is None else np.maximum(total, host)


def _smooth_maximum(a, b, power):
    larger = np.maximum(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio_sum = (a / larger) ** power + (b / larger) ** power
        return np.where(larger > 0, larger * ratio_sum ** (1.0 / power), 0.0)


# --- errors and the split -------------------------------------------------------------

def error_summary(predicted: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    """MAPE, the worst relative error (signed, the largest in size) and the bias (mean
    signed relative error), as fractions; positive means the model predicts slower."""
    relative = predicted / measured - 1.0
    worst = relative[np.argmax(np.abs(relative))] if len(relative) else math.nan
    return {"rows": int(len(relative)), "mape": float(np.mean(np.abs(relative))),
            "worst": float(worst), "bias": float(np.mean(relative))}


def split_halves(rows: Measurements) -> np.ndarray:
    """True for the calibration half, False for the validation half.

    Within each dataset the distinct configurations (repeats of one configuration stay
    together) are sorted by their size columns (kind, model, tp, m, n, k, batch,
    context, prefill, ...) and alternate: the first, third, ... calibrate, the second,
    fourth, ... validate, except that the last (largest) always calibrates, so that a
    validation point is never outside the range fitted (an even count gives the
    calibration half one more). Deterministic, and no validation configuration is ever
    fitted.
    """
    keys = rows.configuration_keys()
    calibration = np.zeros(len(rows), dtype=bool)
    for dataset in np.unique(rows.dataset):
        members = np.flatnonzero(rows.dataset == dataset)
        _, position = np.unique(keys[members], axis=0, return_inverse=True)
        position = position.reshape(-1)
        calibration[members] = (position % 2 == 0) | (position == position.max())
    return calibration


# --- the fit --------------------------------------------------------------------------

@dataclass(frozen=True)
class Fit:
    efficiency: Efficiency
    mbu: float
    fitted: tuple[str, ...]  # the parameters the fit moved
    rms_log_error: float
    iterations: int
    # fitted parameters that ended at (or within AT_BOUND of) a bound of their range:
    # the data pull them further than the model allows, so the form is missing something
    at_bound: tuple[str, ...] = ()
    # with `Machines`: each machine's efficiency (its own fixed times, the rest shared),
    # in the order of `Machines.names`; `efficiency` is then the first machine's, and a
    # machine's own parameter at a bound is named "machine: parameter" in `at_bound`
    machine_efficiencies: tuple[Efficiency, ...] = ()


@dataclass(frozen=True)
class Machines:
    """Which machine (a GPU type under one engine) ran each row, for a fit whose fixed
    times are each machine's own (`informed.MACHINE_PARAMETERS`): `code` (one per row)
    indexes `names` and `own`, each machine's own parameters to fit
    (`informed.machine_fit_parameters`)."""

    code: np.ndarray
    names: tuple[str, ...]
    own: tuple[tuple[str, ...], ...]

    def __post_init__(self) -> None:
        if len(self.names) != len(self.own):
            raise SpecError(f"{len(self.names)} machines but {len(self.own)} lists of "
                            "their own parameters")
        if len(self.code) and (self.code.min() < 0 or self.code.max() >= len(self.names)):
            raise SpecError(f"a row's machine code is outside 0-{len(self.names) - 1}")

    @classmethod
    def one(cls, count: int) -> Machines:
        return cls(np.zeros(count, dtype=np.int64), ("",), ((),))

    def owns(self, name: str) -> bool:
        return any(name in own for own in self.own)


def _tied_library(costs: RowCosts, free: list[str]) -> str | None:
    """The library whose values the base all-reduce values take in a fit that moves
    library tables and no base value: the one with the most all-reduce rows."""
    if any(name in free for name in COLLECTIVE_PARAMETERS):
        return None
    moved = [table for table in COLLECTIVE_TABLES
             if any(f"{table}.{name}" in free for name in COLLECTIVE_PARAMETERS)]
    if not moved:
        return None
    allreduce = costs.kind == KINDS.index("allreduce")
    return max(moved, key=lambda table: int(np.sum(
        allreduce & (costs.library == collective_library_code(table)))))


def _is_fraction(name: str) -> bool:
    return name == "mbu" or PARAMETERS[_parameter(name)][0] == "fraction"


def _parameter(name: str) -> str:
    """`gemm_mfu` of `fp8.gemm_mfu`: a dtype's own value has the base one's range."""
    return name.rpartition(".")[2]


def _typical(name: str) -> float:
    return TYPICAL[_parameter(name)]


def _encode(name: str, value: float) -> float:
    if _is_fraction(name):
        value = min(max(value, 1e-6), 1 - 1e-9)
        return math.log(value / (1 - value))
    return math.log(max(value, 1e-12 * _typical(name)) / _typical(name))


def _decode(name: str, value: float) -> float:
    if _is_fraction(name):
        return 1.0 / (1.0 + math.exp(-min(max(value, -40.0), 40.0)))
    return _typical(name) * math.exp(min(value, 60.0))


def at_bound(name: str, value: float) -> bool:
    """Whether a fitted value sits at its range's bound (see `AT_BOUND`)."""
    if _is_fraction(name):
        return value >= 1.0 - AT_BOUND or value <= AT_BOUND
    return value <= AT_BOUND * _typical(name)


def fit(costs: RowCosts, free: list[str], start: Efficiency | None = None,
        mbu: float = 1.0, mfu: float = 1.0, overlap: str = "parts",
        max_iterations: int = 200, machines: Machines | None = None) -> Fit:
    """Least squares on log time over the `free` parameters, the rest held at `start`.
    With `machines`, each machine's own fixed times (`Machines.own`, whether `free` names
    them or not) are fitted for its rows alone and the rest of `free` is shared
    (`Fit.machine_efficiencies`); a name some machine owns is not shared: a machine that
    does not own it keeps its starting value (for it, one number with its other fixed
    times)."""
    given = machines is not None
    machines = machines or Machines.one(len(costs.time_s))
    if len(machines.code) != len(costs.time_s):
        raise SpecError(f"{len(machines.code)} machine codes for {len(costs.time_s)} rows")
    shared = [name for name in free if not machines.owns(name)]
    free = list(dict.fromkeys([*shared, *(name for own in machines.own for name in own)]))
    unknown = sorted(set(free) - set(FIT_PARAMETERS))
    if unknown:
        raise SpecError(f"cannot fit {', '.join(unknown)}: parameters are "
                        f"{', '.join(FIT_PARAMETERS)}")
    counts = np.bincount(costs.dataset)
    weights = 1.0 / np.sqrt(counts[costs.dataset])
    log_measured = np.log(costs.time_s)
    start = start or Efficiency()
    fixed = {"mbu": mbu, **{name: start.value(name) for name in FIT_PARAMETERS[1:]}}
    layout = shared + [name for own in machines.own for name in own]
    members = [np.flatnonzero(machines.code == code) for code in range(len(machines.own))]
    parts = [costs if len(machines.own) == 1 else costs.subset(rows) for rows in members]

    tied = _tied_library(costs, free)

    def unpack(vector):
        common = {name: _decode(name, x)
                  for name, x in zip(shared, vector[:len(shared)], strict=True)}
        profile_mbu = common.pop("mbu", mbu)
        efficiencies, offset = [], len(shared)
        for own in machines.own:
            efficiency = start.with_values({**common, **{
                name: _decode(name, x) for name, x in zip(
                    own, vector[offset:offset + len(own)], strict=True)}})
            offset += len(own)
            if tied:
                efficiency = efficiency.with_values({
                    name: efficiency.value(f"{tied}.{name}")
                    for name in COLLECTIVE_PARAMETERS})
            efficiencies.append(efficiency)
        return efficiencies, profile_mbu

    def predicted_under(vector, smoothing=None):
        efficiencies, profile_mbu = unpack(vector)
        predicted = np.full(len(costs.time_s), np.nan)
        for rows, part, efficiency in zip(members, parts, efficiencies, strict=True):
            predicted[rows] = predict(part, efficiency, mfu=mfu, mbu=profile_mbu,
                                      overlap=overlap, smoothing=smoothing)
        return predicted

    starts = _starting_points(layout, fixed)
    typical = starts[0]

    def residuals(vector, smoothing=None):
        predicted = predicted_under(vector, smoothing)
        # a weak pull towards typical values settles what the rows cannot tell apart
        prior = PRIOR_WEIGHT * (vector - typical)
        return np.concatenate([weights * (np.log(predicted) - log_measured), prior])

    best = None
    for begin in starts:
        # first with smoothed roofs (every roof moves the fit), then with the exact model
        smooth, first = _levenberg_marquardt(lambda v: residuals(v, SMOOTHING), begin,
                                             max_iterations)
        vector, second = _levenberg_marquardt(residuals, smooth, max_iterations)
        iterations = first + second
        cost = float(np.sum(residuals(vector) ** 2))
        if best is None or cost < best[0]:
            best = (cost, vector, iterations)
    cost, vector, iterations = best
    rms = float(np.sqrt(np.mean((np.log(predicted_under(vector)) - log_measured) ** 2)))
    efficiencies, profile_mbu = unpack(vector)
    efficiencies = [_rounded(efficiency) for efficiency in efficiencies]
    profile_mbu = float(f"{profile_mbu:.4g}")
    bounded = tuple(name for name in shared if at_bound(
        name, profile_mbu if name == "mbu" else efficiencies[0].value(name)))
    bounded += tuple(f"{machines.names[code]}: {name}"
                     for code, own in enumerate(machines.own) for name in own
                     if at_bound(name, efficiencies[code].value(name)))
    return Fit(efficiency=efficiencies[0], mbu=profile_mbu, fitted=tuple(free),
               rms_log_error=rms, iterations=iterations, at_bound=bounded,
               machine_efficiencies=tuple(efficiencies) if given else ())


def _rounded(efficiency: Efficiency) -> Efficiency:
    """Four significant digits: what a profile file shows, and all a fit can support."""
    return Efficiency().with_values({
        name: min(float(f"{value:.4g}"), 1.0) if _is_fraction(name) else float(f"{value:.4g}")
        for name, value in efficiency.as_dict().items()})


def _starting_points(free: list[str], fixed: dict[str, float]) -> list[np.ndarray]:
    """The given values where they are not the ideal defaults, and two generic guesses."""
    starts = []
    for fraction, scale in ((0.8, 1.0), (0.5, 30.0), (0.95, 0.03), (0.05, 10.0)):
        starts.append(np.array([
            _encode(name, fraction if _is_fraction(name) else _typical(name) * scale)
            for name in free]))
    given = [name for name in free if fixed[name] not in (0.0, 1.0)]
    if given:
        starts.append(np.array([_encode(name, fixed[name]) if name in given else start
                                for name, start in zip(free, starts[0], strict=True)]))
    return starts


def _levenberg_marquardt(residuals, vector, max_iterations):
    """Minimise sum(residuals(x)**2) from `vector`; forward-difference Jacobian."""
    current = residuals(vector)
    cost = float(current @ current)
    damping = 1e-3
    iterations = 0
    for iterations in range(1, max_iterations + 1):  # noqa: B007 (the count is returned)
        step = 1e-6 * np.maximum(1.0, np.abs(vector))
        jacobian = np.empty((len(current), len(vector)))
        for j in range(len(vector)):
            moved = vector.copy()
            moved[j] += step[j]
            jacobian[:, j] = (residuals(moved) - current) / step[j]
        normal = jacobian.T @ jacobian
        gradient = jacobian.T @ current
        improved = False
        while damping < 1e12:
            scaled = normal + damping * np.diag(np.diag(normal) + 1e-12)
            try:
                delta = np.linalg.solve(scaled, -gradient)
            except np.linalg.LinAlgError:
                damping *= 10.0
                continue
            candidate = vector + delta
            trial = residuals(candidate)
            trial_cost = float(trial @ trial)
            if np.isfinite(trial_cost) and trial_cost < cost:
                improved = True
                relative_gain = (cost - trial_cost) / max(cost, 1e-300)
                vector, current, cost = candidate, trial, trial_cost
                damping = max(damping / 3.0, 1e-9)
                break
            damping *= 4.0
        if not improved or relative_gain < 1e-10:
            break
    return vector, iterations
