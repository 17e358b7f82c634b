"""Which parameters of the efficiency model measured rows can tell apart, so a fit
(`core.calibration.fit`) moves only those: a parameter the rows cannot inform is one
number with another and keeps its starting value. `informed_parameters` for one fit,
`machine_fit_parameters` for a step fit whose fixed times are each machine's own."""

from __future__ import annotations

import numpy as np

from rooftui.core.calibration import (
    ATTENTION_KINDS,
    E2E_KINDS,
    FIT_PARAMETERS,
    KERNEL_KINDS,
    KINDS,
    TIMERS,
    Machines,
    Measurements,
)
from rooftui.core.efficiency import (
    COLLECTIVE_PARAMETERS,
    COLLECTIVE_TABLES,
    COMPUTE_TABLES,
    KV_TABLES,
    QUANTISING_TABLES,
    collective_library_code,
    kv_table_index,
)
from rooftui.core.tables import DTYPE_BYTES, DTYPES

# what each kind's rows inform (steps: see `informed_parameters`)
INFORMS = {
    "gemm": ("gemm_mfu", "gemm_mbu", "gemm_m_half", "kernel_overhead_s"),
    "attention_decode": ("attention_mbu", "attention_overhead_s",
                         "attention_kv_head_overhead_s", "attention_query_head_overhead_s"),
    "attention_prefill": ("attention_mfu", "attention_mfu_half", "attention_overhead_s",
                          "prefill_attention_overhead_s", "attention_prompt_head_overhead_s"),
    "allreduce": COLLECTIVE_PARAMETERS,  # per library (see `informed_parameters`)
    "copy": ("mbu", "kernel_overhead_s"),
}

# what any rows of all-reduces inform: the link's share and each all-reduce's fixed time
ALLREDUCE_BASICS = ("interconnect_efficiency", "allreduce_overhead_s")
# distinct message sizes from which a library's all-reduce rows tell its two protocols
# apart (the low-latency one's bandwidth share and the bulk one's extra fixed time)
PROTOCOL_SIZES = 8
# tokens in a step from which its GEMMs (or a prompt's attention) can be compute-bound
COMPUTE_BOUND_TOKENS = 256

# the fixed times a machine's host sets (its CPU, driver and launch path, the ranks'
# wait for each other at every all-reduce): a machine's own in a fit over several
# (`machine_fit_parameters`), in the order a machine's steps inform them
MACHINE_PARAMETERS = ("step_overhead_s", "allreduce_overhead_s", "allreduce_peer_overhead_s")


def informed_parameters(rows: Measurements, collective_library: str = "") -> list[str]:
    """The parameters these rows can tell apart from the others.

    Kernel rows inform their kernel's efficiencies and fixed time; a half-efficiency size
    only when that size varies (three values or more: at one size it is one number with
    the efficiency). Step rows inform the step overhead and the bandwidth fractions; a
    compute fraction only when some step is large enough to be compute-bound
    (`COMPUTE_BOUND_TOKENS`), attention_mbu_half only when the decode contexts vary,
    the per-layer overhead only when the models differ in depth (else it is one number
    with the step overhead), the all-reduce parameters (of `collective_library`, the
    profile's: "" the base values) only when the tensor-parallel degrees differ. Decode attention kernels inform their fixed times per sequence and
    head (the query-head one only when the models' query heads per KV head differ),
    prefill attention kernels a prompt's fixed time per query head (only when the prompts
    times the query heads on the GPU take three values or more)
    rather than `attention_mbu_half`: on one GPU both are a cost per sequence growing
    with the KV heads, but the kernels' is in seconds (H100 and H200 take the same time
    at 15 cached tokens, whatever their bandwidths), which a held-out GPU inherits. `gemm_m_half` and `attention_mfu_half` need kernel rows: in a step
    they are one number with the overheads and the compute fractions.

    GEMM parameters are named for the compute dtype of the rows that inform them: bf16
    (and fp16, fp32) GEMMs inform the base values, fp8 and fp4 GEMMs their own table's
    (`fp8.gemm_mfu`, ...), and fp8/fp4 GEMM kernels their activation quantisation.
    Attention parameters likewise by the KV cache's table (`efficiency.KV_TABLES`): rows
    with a 16-bit cache inform the base values, an 8-bit cache `fp8.attention_mbu`, ...
    All-reduce rows inform their library's table (`nccl.interconnect_efficiency`, ...;
    rows without one the base values), its fixed time per peer only when they span two
    GPU counts or more (else one number with the fixed time), its two protocols
    (`allreduce_ll_share`, `allreduce_bulk_overhead_s`) only from `PROTOCOL_SIZES`
    message sizes on (where one protocol hands over to the other needs the sizes
    around it).
    End-to-end rows inform nothing here (they are fitted by replay).

    `launch_overhead_s` needs isolated ops of one kind and compute table both replayed
    from CUDA graphs and launched eagerly, `host_timer_overhead_s` both timed by the host
    clock and not: else each is one number with that kind's fixed time.
    """
    def varied(kind: str, sizes: np.ndarray) -> bool:
        return len(np.unique(sizes[rows.kind == KINDS.index(kind)])) >= 3

    def gemm_names(names: tuple[str, ...], members: np.ndarray) -> set[str]:
        tables = {_quantising_table(code) for code in np.unique(rows.compute_dtype[members])}
        return {f"{table}.{name}" if table else name for table in tables for name in names
                if table or name != "activation_quant_bytes"}

    names: set[str] = set()
    for kind in rows.kinds_present():
        if kind not in ("step", "gemm", "allreduce", *E2E_KINDS):
            names.update(INFORMS[kind])
    allreduce = rows.kind == KINDS.index("allreduce")
    for code in np.unique(rows.library[allreduce]):
        members = allreduce & (rows.library == code)
        informed = list(ALLREDUCE_BASICS)
        if len(np.unique(rows.tp[members])) >= 2:
            informed.append("allreduce_peer_overhead_s")
        if len(np.unique(rows.message_bytes[members])) >= PROTOCOL_SIZES:
            informed.extend(("allreduce_ll_share", "allreduce_bulk_overhead_s"))
        names |= _library_names(code, tuple(informed))
    gemm = rows.kind == KINDS.index("gemm")
    if gemm.any():
        names |= gemm_names((*INFORMS["gemm"], "activation_quant_bytes"), gemm)
    if not varied("attention_prefill", rows.prefill):
        names.discard("attention_mfu_half")
    if _timed_both_ways(rows, rows.timer == TIMERS.index("cuda_graph")):
        names.add("launch_overhead_s")
    if _timed_both_ways(rows, rows.timer == TIMERS.index("host_clock")):
        names.add("host_timer_overhead_s")
    steps = rows.kind == KINDS.index("step")
    if steps.any():
        names.update(("step_overhead_s", "attention_mbu"))
        names |= gemm_names(("gemm_mbu",), steps)
        tokens = rows.batch + rows.prompts * rows.prefill
        if tokens[steps].max() >= COMPUTE_BOUND_TOKENS:
            names |= gemm_names(("gemm_mfu",), steps)
        if (rows.prefill[steps]).max() >= COMPUTE_BOUND_TOKENS:
            names.add("attention_mfu")
        decoding = steps & (rows.batch > 0)
        if len(np.unique(rows.context[decoding])) >= 3:
            names.add("attention_mbu_half")
        if len({rows.models[m].num_hidden_layers for m in np.unique(rows.model[steps])}) > 1:
            names.add("layer_overhead_s")
        if len(np.unique(rows.tp[steps])) > 1:  # else one number with the step overhead
            names |= _library_names(collective_library_code(collective_library),
                                    ALLREDUCE_BASICS)
    decode = rows.kind == KINDS.index("attention_decode")
    prefill = rows.kind == KINDS.index("attention_prefill")
    groups = {rows.models[m].num_attention_heads // rows.models[m].num_key_value_heads
              for m in np.unique(rows.model[decode])}
    if len(groups) < 2:  # one number with the per-KV-head time
        names.discard("attention_query_head_overhead_s")
    informing = {"attention_mbu": decode | steps, "attention_mbu_half": steps,
                 "attention_kv_head_overhead_s": decode,
                 "attention_query_head_overhead_s": decode,
                 "attention_overhead_s": decode | prefill,
                 "prefill_attention_overhead_s": prefill,
                 "attention_prompt_head_overhead_s": _prompt_heads_varied(rows, prefill),
                 "attention_mfu": prefill | steps & (rows.prefill > 0),
                 "attention_mfu_half": prefill}
    def kv_tables(members: np.ndarray) -> set[str | None]:
        return {_kv_table(code) for code in np.unique(rows.kv_dtype[members])}

    for name, members in informing.items():
        if name in names:
            names.discard(name)
            # a prefill op's extra fixed time needs decode ops of its table to differ from
            tables = (kv_tables(members) & kv_tables(decode)
                      if name == "prefill_attention_overhead_s" else kv_tables(members))
            names |= {f"{table}.{name}" if table else name for table in tables}
    return [name for name in FIT_PARAMETERS if name in names]


def machine_fit_parameters(rows: Measurements, labels: np.ndarray
                           ) -> tuple[list[str], Machines]:
    """What step rows of several machines (`labels`: each row's GPU and engine) inform
    when each machine's fixed times are its own (`MACHINE_PARAMETERS`): the shared
    parameters (`informed_parameters`, less the per-layer overhead unless one machine's
    models differ in depth: else it is one number with each machine's step overhead) and
    each machine's own: its step overhead; the all-reduce's fixed time where some of its
    steps have no all-reduce (tensor-parallel degree 1) and some have (else a model pays
    the same number of all-reduces every step, one number with the step overhead); the
    time per peer where its steps span two degrees above 1. The fixed times of the
    collective libraries' tables (`nccl.allreduce_overhead_s`, ...: all-reduce kernels')
    stay shared."""
    # machines in order of first appearance, each row's index among them
    distinct, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    order = np.argsort(first)
    names = tuple(distinct[order].tolist())
    code = np.argsort(order)[inverse].astype(np.int64)
    steps = rows.kind == KINDS.index("step")
    own, depths_vary = [], False
    for index in range(len(names)):
        mine = steps & (code == index)
        degrees = set(np.unique(rows.tp[mine]).tolist())
        parallel_degrees = degrees - {1.0}
        own.append(tuple(name for name, informed in zip(MACHINE_PARAMETERS, (
            bool(degrees), bool(parallel_degrees) and 1.0 in degrees,
            len(parallel_degrees) >= 2), strict=True) if informed))
        depths_vary |= len({rows.models[m].num_hidden_layers
                            for m in np.unique(rows.model[mine])}) > 1
    shared = [name for name in informed_parameters(rows) if name not in MACHINE_PARAMETERS
              and (depths_vary or name != "layer_overhead_s")]
    return shared, Machines(code, names, tuple(own))


def _prompt_heads_varied(rows: Measurements, prefill: np.ndarray) -> np.ndarray:
    """The prefill rows of each KV-cache table whose prompts times query heads on the GPU
    take three values or more (else the time per prompt and head is one number with the
    op's fixed time)."""
    per_model = np.array([0.0, *(model.num_attention_heads for model in rows.models)])
    heads = per_model[rows.model + 1] / rows.tp * rows.prompts  # model -1: none
    tables = np.array([_kv_table(code) or "" for code in range(len(DTYPES))])[rows.kv_dtype]
    varied = np.zeros(len(rows), dtype=bool)
    for table in np.unique(tables[prefill]):
        members = prefill & (tables == table)
        varied |= members & (len(np.unique(heads[members])) >= 3)
    return varied


def _library_names(code: int, names: tuple[str, ...]) -> set[str]:
    """`names` as the table of collective library `code` holds them (0: the base)."""
    return {f"{COLLECTIVE_TABLES[code - 1]}.{name}" if code else name for name in names}


def _kv_table(code: int) -> str | None:
    """The table of a KV-cache format that has its own attention parameters in a fit
    (by its width, as `Efficiency.for_compute_dtypes` selects it): fp8 or fp4; None for
    16-bit and wider caches, whose attention sets the base values."""
    index = int(kv_table_index(DTYPE_BYTES[code]))
    return None if index < 2 else KV_TABLES[index - 1][1]


def _timed_both_ways(rows: Measurements, timed: np.ndarray) -> bool:
    """Whether isolated ops of one kind (GEMM or copy kernels; attention ops) and one
    compute table were timed both ways: some `timed`, some not."""
    kernel = np.isin(rows.kind, [KINDS.index(k) for k in KERNEL_KINDS])
    attention = np.isin(rows.kind, [KINDS.index(k) for k in ATTENTION_KINDS])
    tables = np.array([_quantising_table(code) or "" for code in range(len(DTYPES))])
    for ops in (kernel, attention):
        for table in np.unique(tables[rows.compute_dtype[ops]]):
            members = ops & (tables[rows.compute_dtype] == table)
            if len(np.unique(timed[members])) > 1:
                return True
    return False


def _quantising_table(code: int) -> str | None:
    """The table of a compute dtype that has its own GEMM parameters in a fit: fp8 or
    fp4; None for bf16 and the rest, whose GEMMs set the base values."""
    return next((table for table in QUANTISING_TABLES
                 if DTYPES[code] in COMPUTE_TABLES[table]), None)
