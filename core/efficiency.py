"""How far real kernels and engines fall short of the roofline: a closed-form model.

A datasheet roofline is a bound. Measured steps pay more, in ways with a clear shape:

- a fixed cost per engine step (scheduling, sampling, the host launching the step) and
  per layer (kernel launches, the small ops the roofline does not count: norms, rotary,
  activation functions, residual adds): `step_overhead_s + layers * layer_overhead_s`;
- weight GEMMs stream their weights at `gemm_mbu` of the bandwidth, and reach `gemm_mfu`
  of peak FLOP/s only when the token count M is large: the compute efficiency is
  `gemm_mfu * M / (M + gemm_m_half)` (half its best at M = `gemm_m_half`: tiles are padded,
  waves are partial). Equivalently a GEMM pays the FLOPs of `gemm_m_half` more tokens;
- attention kernels reach `attention_mbu` of the bandwidth only at long contexts: every
  sequence reads as if it held `attention_mbu_half` more keys, so at context S the
  bandwidth efficiency is `attention_mbu * S / (S + attention_mbu_half)`; likewise they
  reach `attention_mfu` of peak only when each query attends many keys: every query
  costs as if it attended `attention_mfu_half` more; and each decode sequence pays, per
  layer, `attention_kv_head_overhead_s` per KV head and `attention_query_head_overhead_s`
  per query head on the GPU (seconds on the memory side, not bytes: the kernel's work per
  sequence and head). TensorRT-LLM's decode attention (aiconfigurator) at 15 cached
  tokens, where the KV read is small, costs per sequence the same on H100 and H200
  (bandwidths 1 : 1.43) and grows with the heads, not the KV bytes: 0.36 us for 32/32
  query/KV heads, 0.29 us for 32/8, 0.15 us for 32/4 with a bf16 cache (11, 36 and 37 ns
  per KV head), 11-13 ns per KV head with an fp8 one; as `attention_mbu_half` keys (a
  cost in bytes) a held-out H100 inherited H200's in bytes, +21-25 % too slow; each prompt
  of a prefill pays, per layer, `attention_prompt_head_overhead_s` per query head on the
  GPU (the context FMHA runs a block of query rows per prompt and head, however few rows
  the prompt fills): TensorRT-LLM's takes 345 us for 256 one-token prompts of 64 heads
  (21 ns per prompt and head) where their FLOPs and bytes take 26 us, and without it a
  held-out prefill dataset errs by 13-19 %, with it by 8-10 %;
- an isolated kernel (one row of a kernel benchmark) pays a fixed time: a GEMM or a copy
  `kernel_overhead_s` (ramp-up, tail, and the launch as a CUDA-graph replay pays it), an
  attention op `attention_overhead_s` (its kernels and the QKV preparation benchmarks
  time with it), a prefill one `prefill_attention_overhead_s` more (a different kernel,
  the context FMHA, and a prompt's QKV preparation: 16-20 us against 7-10 us for decode
  in TensorRT-LLM's, each dataset fitted alone); an op its benchmark launched eagerly (not replayed from a CUDA graph)
  pays `launch_overhead_s` more: the host's launch and the timing events around it,
  which a graph replay does not expose; one timed by the host's clock around its launch
  and a synchronize pays `host_timer_overhead_s` on top (the synchronize's round trip).
  In a step those costs are inside `layer_overhead_s`. Seen in the residuals, each
  GEMM dataset fitted alone: TensorRT-LLM's (graph replays) 3.7 us, vidur's (eager, CUDA
  events) 6.3-6.5 us, LLMCompass' (host clock and synchronize) 30 us; one fixed time for
  all priced a held-out graph-timed dataset with the others' cost (+25-30 % bias on
  aiconfigurator's bf16 GEMMs);
- an all-reduce over n GPUs moves `2 (n - 1) / n` of its message at
  `interconnect_efficiency` of the per-direction interconnect bandwidth, after
  `allreduce_overhead_s + (n - 1) allreduce_peer_overhead_s` (a ring or tree takes a
  step per other GPU: NCCL's small messages on the H100 take 6.2 / 9.6 / 15.5 us at 2 /
  4 / 8 GPUs, 4.65 + 1.55 (n - 1) us), by the faster of two protocols, as NCCL's tuner
  picks one per message size: a low-latency one (NCCL's LL: flags beside the data) at
  `allreduce_ll_share` of that bandwidth, and the bulk one (Simple), paying
  `allreduce_bulk_overhead_s` more per all-reduce. NCCL's H100 all-reduces take 27.6 us
  at 2 MB over 2 GPUs where one protocol's line through the small and the large
  messages says 14.7 us; fitted, the low-latency protocol runs at 0.39-0.41 of the bulk
  one's bandwidth and the bulk one costs 13.5-14.5 us more (H100 and H200 alike), and a
  held-out GPU's error halves (13.0 -> 7.3 %);
- an engine whose scheduler overlaps the host with the GPU (SGLang's overlap scheduler,
  TensorRT-LLM's overlap scheduler: the host schedules, prepares and launches step n + 1
  and processes step n's tokens while the GPU runs step n) takes a step no shorter than
  the host's work on it, `host_step_s + host_sequence_s * sequences` (each decode and
  each prompt chunk in the step): `step time = max(GPU time, host time)`, the GPU time
  being every term above. The host's part hides behind a long step and sets a short one:
  SGLang 0.5.6's Llama-3.1-8B runs on H200 keep a 23-40 ms TPOT at TP 1-8 and 20-512
  clients, where the GPU's step is 6-22 ms, while its Qwen3-32B runs at TP 1-2, whose
  steps are longer, follow the GPU. An engine that runs the host and the GPU in turn pays its host
  time as `step_overhead_s` instead (the defaults, 0, are no floor);
- a served request pays `request_overhead_s` outside every step (HTTP, tokenisation,
  queueing into the engine, detokenisation and streaming back: what a benchmark client
  measures beyond the engine's steps). The step model never reads it; the serving drivers
  (`sweep simulate`, `sweep replay`) add it to each TTFT and E2E, and in a closed loop a
  client's next request reaches the engine that long after its previous one finished.

Per KV-cache format: the attention parameters (`ATTENTION_PARAMETERS`) may be given in the same
tables, which attention selects by its KV cache's width (`KV_TABLES`): an 8-bit cache is
a different kernel (it dequantises K and V as it reads them). TensorRT-LLM's attention
(aiconfigurator, H100 and H200) says so: with an fp8 cache decode attention reaches
0.62-0.75 of the bandwidth against 0.85 with bf16, and a prefill's time is within 5-10 %
whether the FMHA is labelled bf16 or fp8, faster than bf16 KV's at long prompts and
slower at short ones; one set of attention parameters for both formats left the fp8-KV
datasets 34-51 % off when held out.

Per compute dtype: the GEMM parameters (`gemm_mfu`, `gemm_mbu`, `gemm_m_half`,
`kernel_overhead_s`) may be given for bf16 (fp16 too: the same tensor-core rate), fp8
(int8 too) and fp4 GEMMs separately (a profile's `[efficiency.fp8]` table, ...); a dtype
without its own value uses the base one. fp8 and fp4 GEMMs run at a lower share of their
peak and quantise their input activations on the fly (dynamic quantisation: a separate
pass that reads the bf16 activations and writes them in 8 or 4 bits with their scales).
That pass costs `activation_quant_bytes` bytes per input element (an M x K GEMM quantises
M * K elements) at the profile's bandwidth, besides the GEMM's own roofline; its launch
is a fixed time per kernel, which the dtype's own `kernel_overhead_s` holds. Both forms
come from the residuals of TensorRT-LLM's fp8 GEMMs (aiconfigurator, H100 and H200) under
the bf16 form: fitted to them, it gives fp8 a fixed time per kernel four times bf16's (14
vs 3.7 us on H100: a second kernel's launch), and at M >= 8192 it errs by N: -47 % (too
fast) at N = 1024, +19 % at N = 16384. A cost per input element does that: its share of
a compute-bound GEMM is (M * K) / (M * N * K) = 1 / N, whatever K; a cost per FLOP or
per weight would not depend on N. With it the large-M errors by N are within -4..+1 %
and the MAPE falls from 11 % to 5 %. The fitted cost, 8-10 bytes per element, is more
than the 5 an unfused pass moves (the bf16 input read for its scale and again to
convert, 1 byte written): such small passes run below the bandwidth.

Per collective library: the all-reduce parameters (`COLLECTIVE_PARAMETERS`) may be given
per library (`[efficiency.nccl]`, `[efficiency.trtllm]`: `COLLECTIVE_TABLES`), which a
profile's `collective_library` assumption selects for its steps (unset: the base values).
The libraries differ: on the H100 TensorRT-LLM's custom all-reduce takes 2.65 / 2.86 /
3.07 us for a small message at 2 / 4 / 8 GPUs against NCCL's 6.2 / 9.6 / 15.5 us, and
reaches a lower share of the bandwidth at large ones; one set of parameters for both
left TensorRT-LLM's held-out all-reduces +102-107 % slow.

Every form keeps a part's time affine in the batch (the quantisation pass is linear in
the tokens), but for the all-reduce's two protocols, the lesser of two affine times: so
the closed-form largest batch under a TPOT budget still holds (the larger of each
protocol's);
efficiencies stay in (0, 1] and overheads >= 0, so a calibrated prediction is never
faster than the ideal roofline. The defaults are the ideal roofline:
`Efficiency()` changes nothing. The functions take numpy arrays or scalars and broadcast.
Units: seconds, FLOPs, bytes, FLOP/s, bytes/s, tokens.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from functools import cached_property

import numpy as np

from rooftui.core import spec_files
from rooftui.core.dtypes import BYTES_PER_ELEMENT
from rooftui.core.elementwise import as_float64
from rooftui.core.errors import SpecError

# parameter -> (kind, unit, meaning); kind "fraction" is in (0, 1], "amount" is >= 0
PARAMETERS: dict[str, tuple[str, str, str]] = {
    "step_overhead_s": ("amount", "s", "fixed time of every engine step"),
    "layer_overhead_s": ("amount", "s", "fixed time per layer per step (launches, small ops)"),
    "kernel_overhead_s": ("amount", "s", "fixed time of one isolated GEMM or copy kernel"),
    "attention_overhead_s": ("amount", "s", "fixed time of one isolated attention op"),
    "prefill_attention_overhead_s": ("amount", "s",
                                     "an isolated prefill attention op's beyond a decode's"),
    "launch_overhead_s": ("amount", "s",
                          "an isolated op launched eagerly (no CUDA graph): its launch"),
    "host_timer_overhead_s": ("amount", "s",
                              "an isolated op timed by the host clock: the synchronize"),
    "gemm_mfu": ("fraction", "", "weight GEMMs: fraction of peak FLOP/s at large M"),
    "gemm_mbu": ("fraction", "", "weight GEMMs: fraction of bandwidth streaming weights"),
    "gemm_m_half": ("amount", "tokens", "token count at which GEMMs reach half of gemm_mfu"),
    "activation_quant_bytes": ("amount", "B",
                               "fp8/fp4 GEMMs: bytes moved per input element quantised"),
    "attention_mfu": ("fraction", "", "attention: fraction of peak FLOP/s, many keys per query"),
    "attention_mfu_half": ("amount", "tokens",
                           "keys per query at which attention reaches half of attention_mfu"),
    "attention_mbu": ("fraction", "", "attention: fraction of bandwidth at long context"),
    "attention_mbu_half": ("amount", "tokens",
                           "context at which attention reaches half of attention_mbu"),
    "attention_kv_head_overhead_s": ("amount", "s",
                                     "decode attention: time per sequence, KV head and layer"),
    "attention_query_head_overhead_s": ("amount", "s", "decode attention: time per sequence, "
                                        "query head and layer"),
    "attention_prompt_head_overhead_s": ("amount", "s", "prefill attention: time per "
                                         "prompt, query head and layer"),
    "interconnect_efficiency": ("fraction", "",
                                "all-reduce: fraction of the interconnect bandwidth"),
    "allreduce_overhead_s": ("amount", "s", "fixed time of one all-reduce"),
    "allreduce_peer_overhead_s": ("amount", "s",
                                  "fixed time of one all-reduce per other GPU in it"),
    "allreduce_ll_share": ("fraction", "", "all-reduce: the low-latency protocol's share "
                           "of the bulk one's bandwidth"),
    "allreduce_bulk_overhead_s": ("amount", "s", "all-reduce: the bulk protocol's fixed "
                                  "time beyond the low-latency one's"),
    "host_step_s": ("amount", "s", "an overlapping scheduler's host time per step: a step "
                    "takes at least host_step_s + host_sequence_s * sequences"),
    "host_sequence_s": ("amount", "s", "an overlapping scheduler's host time per sequence "
                        "in the step (decodes and prompt chunks)"),
    "request_overhead_s": ("amount", "s",
                           "per request, outside the steps: front end to first token"),
}
# what a compute dtype's own table may set; a dtype without its own value uses the base
GEMM_PARAMETERS = ("gemm_mfu", "gemm_mbu", "gemm_m_half", "kernel_overhead_s",
                   "activation_quant_bytes")
# what a KV-cache format's own table may set (the same tables, selected for attention by
# the KV cache's element width: 2 bytes bf16, 1 byte fp8, under 1 fp4; wider: the base)
ATTENTION_PARAMETERS = ("attention_mfu", "attention_mfu_half", "attention_mbu",
                        "attention_mbu_half", "attention_overhead_s",
                        "prefill_attention_overhead_s", "attention_kv_head_overhead_s",
                        "attention_query_head_overhead_s", "attention_prompt_head_overhead_s")
TABLE_PARAMETERS = GEMM_PARAMETERS + ATTENTION_PARAMETERS
# the compute dtypes with tables, and the formats each covers (the others, fp32 and
# tf32, use the base values); only 8- and 4-bit GEMMs quantise their activations
COMPUTE_TABLES = {"bf16": ("bf16", "fp16"), "fp8": ("fp8", "int8"), "fp4": ("fp4", "int4")}
QUANTISING_TABLES = ("fp8", "fp4")
# what a collective library's own table may set, and the libraries with tables (the
# `engine` of measured all-reduce rows); a row's library code is 0 for none (the base
# values), else 1 + its index here
COLLECTIVE_PARAMETERS = ("interconnect_efficiency", "allreduce_overhead_s",
                         "allreduce_peer_overhead_s", "allreduce_ll_share",
                         "allreduce_bulk_overhead_s")
COLLECTIVE_TABLES = ("nccl", "trtllm")
TABLES = (*COMPUTE_TABLES, *COLLECTIVE_TABLES)


def collective_library_code(name: str) -> int:
    """A library's code (`COLLECTIVE_TABLES`); 0 for "" (none: the base values)."""
    return COLLECTIVE_TABLES.index(name) + 1 if name else 0


def _check(name: str, value) -> None:
    kind = PARAMETERS[name][0]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise SpecError(f"{name} must be finite, got {value!r}")
    if kind == "fraction" and not 0 < value <= 1:
        raise SpecError(f"{name} must be in (0, 1], got {value!r}")
    if kind == "amount" and value < 0:
        raise SpecError(f"{name} must be >= 0, got {value!r}")


class _OwnValues:
    """A table's own values of base parameters (None: the base value), in their ranges."""

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value is not None:
                _check(name, value)

    def given(self) -> dict[str, float]:
        return {name: value for name, value in asdict(self).items() if value is not None}


@dataclass(frozen=True)
class DtypeEfficiency(_OwnValues):
    """One dtype's own parameters: its GEMMs' (as a compute dtype) and its attention's
    (as a KV-cache format); None: the base value."""

    gemm_mfu: float | None = None
    gemm_mbu: float | None = None
    gemm_m_half: float | None = None
    kernel_overhead_s: float | None = None
    activation_quant_bytes: float | None = None
    attention_mfu: float | None = None
    attention_mfu_half: float | None = None
    attention_mbu: float | None = None
    attention_mbu_half: float | None = None
    attention_overhead_s: float | None = None
    prefill_attention_overhead_s: float | None = None
    attention_kv_head_overhead_s: float | None = None
    attention_query_head_overhead_s: float | None = None
    attention_prompt_head_overhead_s: float | None = None


@dataclass(frozen=True)
class CollectiveEfficiency(_OwnValues):
    """One collective library's own all-reduce parameters; None: the base value."""

    interconnect_efficiency: float | None = None
    allreduce_overhead_s: float | None = None
    allreduce_peer_overhead_s: float | None = None
    allreduce_ll_share: float | None = None
    allreduce_bulk_overhead_s: float | None = None


@dataclass(frozen=True)
class Efficiency:
    """The parameters of the module docstring; the defaults are the ideal roofline.
    `bf16`, `fp8` and `fp4` hold a dtype's own GEMM parameters (as a compute dtype) and
    attention parameters (as a KV-cache format), `nccl` and `trtllm` a collective
    library's all-reduce parameters."""

    step_overhead_s: float = 0.0
    layer_overhead_s: float = 0.0
    kernel_overhead_s: float = 0.0
    attention_overhead_s: float = 0.0
    prefill_attention_overhead_s: float = 0.0
    launch_overhead_s: float = 0.0
    host_timer_overhead_s: float = 0.0
    gemm_mfu: float = 1.0
    gemm_mbu: float = 1.0
    gemm_m_half: float = 0.0
    activation_quant_bytes: float = 0.0
    attention_mfu: float = 1.0
    attention_mfu_half: float = 0.0
    attention_mbu: float = 1.0
    attention_mbu_half: float = 0.0
    attention_kv_head_overhead_s: float = 0.0
    attention_query_head_overhead_s: float = 0.0
    attention_prompt_head_overhead_s: float = 0.0
    interconnect_efficiency: float = 1.0
    allreduce_overhead_s: float = 0.0
    allreduce_peer_overhead_s: float = 0.0
    allreduce_ll_share: float = 1.0
    allreduce_bulk_overhead_s: float = 0.0
    host_step_s: float = 0.0
    host_sequence_s: float = 0.0
    request_overhead_s: float = 0.0
    bf16: DtypeEfficiency = DtypeEfficiency()
    fp8: DtypeEfficiency = DtypeEfficiency()
    fp4: DtypeEfficiency = DtypeEfficiency()
    nccl: CollectiveEfficiency = CollectiveEfficiency()
    trtllm: CollectiveEfficiency = CollectiveEfficiency()

    def __post_init__(self) -> None:
        for name in PARAMETERS:
            _check(name, getattr(self, name))
        for table in COMPUTE_TABLES:
            if not isinstance(getattr(self, table), DtypeEfficiency):
                raise SpecError(f"{table} must be a table of GEMM parameters")
        for table in COLLECTIVE_TABLES:
            if not isinstance(getattr(self, table), CollectiveEfficiency):
                raise SpecError(f"{table} must be a table of all-reduce parameters")
        if self.bf16.activation_quant_bytes is not None:
            raise SpecError("activation_quant_bytes: only fp8 and fp4 GEMMs quantise their "
                            "activations (give it in the fp8 or fp4 table, or the base)")

    @property
    def is_ideal(self) -> bool:
        return self == _IDEAL

    def as_dict(self) -> dict[str, float]:
        """Every base parameter, then each dtype's (and collective library's) own values
        as `fp8.gemm_mfu`, `nccl.allreduce_overhead_s`, ...: the names `value`,
        `with_values` and a fit use."""
        values = {name: getattr(self, name) for name in PARAMETERS}
        for table in TABLES:
            values.update({f"{table}.{name}": value
                           for name, value in getattr(self, table).given().items()})
        return values

    def __getattr__(self, name: str):
        # only reached for names that are not fields: `getattr(efficiency, "fp8.gemm_mfu")`
        # reads a dtype's value as `value` does, as code that loops over a fit's names needs
        if "." in name:
            return self.value(name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def value(self, name: str) -> float:
        """A parameter by its `as_dict` name; a dtype's unset one is the base value."""
        table, _, parameter = name.rpartition(".")
        if not table:
            return getattr(self, name)
        own = getattr(getattr(self, table), parameter)
        return getattr(self, parameter) if own is None else own

    def with_values(self, values: dict[str, float]) -> Efficiency:
        """A copy with parameters replaced, by their `as_dict` names."""
        base = {name: value for name, value in values.items() if "." not in name}
        tables = {}
        for table in TABLES:
            own = {name.partition(".")[2]: value for name, value in values.items()
                   if name.startswith(f"{table}.")}
            if own:
                tables[table] = replace(getattr(self, table), **own)
        return replace(self, **base, **tables)

    def has_collective_table(self, library: str) -> bool:
        return library in COLLECTIVE_TABLES and bool(getattr(self, library).given())

    def for_collective_library(self, library: str) -> Efficiency:
        """The efficiency whose base all-reduce parameters are `library`'s own (its unset
        ones and "" the base values): what a step with that library pays."""
        if not library:
            return self
        return replace(self, **{name: self.value(f"{library}.{name}")
                                for name in COLLECTIVE_PARAMETERS})

    def for_compute_dtypes(self, codes, kv_bytes=None, libraries=None) -> Efficiency:
        """The efficiency a grid of configurations sees, by the compute dtype code of each
        (`tables.dtype_code`; None: the base values) and its KV cache's bytes per element:
        the GEMM parameters become arrays broadcast like `codes` (each dtype's own value,
        else the base one; activation_quant_bytes is 0 where the dtype does not quantise),
        the attention parameters, where a table sets one, arrays like `kv_bytes` (the
        table of that width, `KV_TABLES`), the all-reduce parameters, where a library's
        table sets one, arrays like `libraries` (each row's library code,
        `collective_library_code`: 0 the base values); the rest stay. For the step model
        and a fit's predictions only: its arrays are not checked again (each value was)."""
        chosen = object.__new__(Efficiency)  # past __post_init__: its fields are arrays
        for field in fields(Efficiency):
            object.__setattr__(chosen, field.name, getattr(self, field.name))
        if codes is not None:
            codes = np.asarray(codes)
            for name, by_code in self._gemm_by_code.items():
                object.__setattr__(chosen, name, by_code[codes])
        if kv_bytes is not None and self._attention_by_width:
            width = np.asarray(kv_bytes)
            index = kv_table_index(width)
            for name, by_width in self._attention_by_width.items():
                object.__setattr__(chosen, name, by_width[index])
        if libraries is not None and self._collective_by_code:
            codes = np.asarray(libraries)
            for name, by_code in self._collective_by_code.items():
                object.__setattr__(chosen, name, by_code[codes])
        return chosen

    @cached_property
    def _collective_by_code(self) -> dict[str, np.ndarray]:
        """Each all-reduce parameter as [base, *COLLECTIVE_TABLES]; empty when no library
        has a table (a profile without them sees scalars, as before)."""
        if not any(self.has_collective_table(table) for table in COLLECTIVE_TABLES):
            return {}
        return {name: np.array([getattr(self, name)]
                               + [self.value(f"{table}.{name}") for table in COLLECTIVE_TABLES])
                for name in COLLECTIVE_PARAMETERS}

    @cached_property
    def _attention_by_width(self) -> dict[str, np.ndarray]:
        """Each attention parameter as [base, bf16, fp8, fp4] (the index
        `for_compute_dtypes` makes of a KV width); empty when no table sets one, so a
        profile without them sees scalars, as before."""
        if not any(getattr(getattr(self, table), name) is not None
                   for table in COMPUTE_TABLES for name in ATTENTION_PARAMETERS):
            return {}
        return {name: np.array([getattr(self, name)]
                               + [self.value(f"{table}.{name}") for _, table in KV_TABLES])
                for name in ATTENTION_PARAMETERS}

    @cached_property
    def _gemm_by_code(self) -> dict[str, np.ndarray]:
        """Each GEMM parameter per dtype code (built once: every step evaluation asks)."""
        selected = {}
        for name in GEMM_PARAMETERS:
            base = 0.0 if name == "activation_quant_bytes" else getattr(self, name)
            by_code = np.full(len(DTYPE_NAMES), base)
            for table, formats in COMPUTE_TABLES.items():
                value = (self.value(f"{table}.{name}")
                         if name != "activation_quant_bytes" or table in QUANTISING_TABLES
                         else 0.0)
                by_code[[DTYPE_NAMES.index(f) for f in formats]] = value
            selected[name] = by_code
        return selected


_IDEAL = Efficiency()  # built once: is_ideal runs on every step evaluation
DTYPE_NAMES = tuple(BYTES_PER_ELEMENT)  # in the order of `tables.dtype_code`
# a KV cache's table by its bytes per element: 2 (bf16, fp16), from 1 (fp8, int8, int8
# with group scales), under 1 (4-bit formats with or without scales); wider: the base
KV_TABLES = ((2.0, "bf16"), (1.0, "fp8"), (0.0, "fp4"))  # (least width, table)


def kv_table_index(width):
    """Which attention parameters a KV cache of `width` bytes per element (an array)
    uses: 0 the base values (wider than 16 bits), else 1 + its row of `KV_TABLES`."""
    bf16, fp8 = KV_TABLES[0][0], KV_TABLES[1][0]
    return np.select([width > bf16, width >= bf16, width >= fp8], [0, 1, 2], 3)


def efficiency_from_dict(data: dict, where: str) -> Efficiency:
    """An `[efficiency]` table of a profile TOML, with optional `[efficiency.bf16]`,
    `[efficiency.fp8]` and `[efficiency.fp4]` sub-tables of GEMM and attention parameters
    and `[efficiency.nccl]`, `[efficiency.trtllm]` of all-reduce parameters; unknown keys
    are errors that name them."""
    if not isinstance(data, dict):
        raise SpecError(f"{where}: [efficiency] must be a table of parameter = number")
    spec_files.check_keys(data, set(PARAMETERS) | set(TABLES), f"{where} [efficiency]")
    values = {}
    for name, value in data.items():
        if name in TABLES:
            table = f"{where} [efficiency.{name}]"
            if not isinstance(value, dict):
                raise SpecError(f"{table} must be a table of parameter = number")
            allowed = (set(COLLECTIVE_PARAMETERS) if name in COLLECTIVE_TABLES
                       else set(TABLE_PARAMETERS) - (
                           set() if name in QUANTISING_TABLES else {"activation_quant_bytes"}))
            spec_files.check_keys(value, allowed, table)
            values.update({f"{name}.{key}": _number(value, key, table) for key in value})
        else:
            values[name] = _number(data, name, f"{where} [efficiency]")
    try:
        return Efficiency().with_values(values)
    except SpecError as error:
        raise SpecError(f"{where} [efficiency]: {error}") from None


def _number(data: dict, name: str, where: str) -> float:
    return spec_files.number(data, name, where, strict=PARAMETERS[name][0] == "fraction")


def part_efficiencies(part: str, efficiency: Efficiency) -> tuple[float, float]:
    """(compute, bandwidth) fractions of a step part; a draft model's parts
    (`draft_gemm`, ...) run the same kernels as the target's."""
    kernel = part.removeprefix("draft_")
    if kernel == "gemm":
        return efficiency.gemm_mfu, efficiency.gemm_mbu
    if kernel == "attention":
        return efficiency.attention_mfu, efficiency.attention_mbu
    return 1.0, 1.0


def gemm_padding_flops(gemm_params, efficiency: Efficiency):
    """FLOPs of `gemm_m_half` tokens through `gemm_params` matmul weights: what a GEMM's
    compute time pays on top of its real FLOPs (its efficiency rising with M)."""
    return 2.0 * gemm_params * efficiency.gemm_m_half


def gemm_times(flops, nbytes, gemm_params, compute_rate, memory_rate, efficiency: Efficiency):
    """(compute, memory) seconds of weight GEMMs doing `flops` over `nbytes`, whose weights
    hold `gemm_params` matmul parameters; the rates are the profile's (mfu * peak,
    mbu * bandwidth) before the GEMM efficiencies."""
    flops = np.asarray(flops, dtype=np.float64)
    padded = flops + np.where(flops > 0, gemm_padding_flops(gemm_params, efficiency), 0.0)
    compute = padded / (efficiency.gemm_mfu * compute_rate)
    memory = nbytes / (efficiency.gemm_mbu * memory_rate)
    return compute, memory


def attention_times(flops, nbytes, queries, sequences, flops_per_key, bytes_per_key,
                    compute_rate, memory_rate, efficiency: Efficiency,
                    kv_head_sequences=0.0, query_head_sequences=0.0, prompt_heads=0.0):
    """(compute, memory) seconds of attention: `queries` query tokens in `sequences`
    sequences; a query attending one more key costs `flops_per_key`, a sequence reading
    one more key costs `bytes_per_key` (both summed over the layers counted). Decode
    sequences times the KV heads (and the query heads) of each layer they run through
    pay the per-head fixed times, on the memory side (where a decode kernel's time is),
    and prompts times the query heads of each layer (`prompt_heads`) the per-prompt one."""
    flops = (np.asarray(flops, dtype=np.float64)
             + queries * flops_per_key * efficiency.attention_mfu_half)
    nbytes = (np.asarray(nbytes, dtype=np.float64)
              + sequences * bytes_per_key * efficiency.attention_mbu_half)
    compute = flops / (efficiency.attention_mfu * compute_rate)
    memory = (nbytes / (efficiency.attention_mbu * memory_rate)
              + kv_head_sequences * efficiency.attention_kv_head_overhead_s
              + query_head_sequences * efficiency.attention_query_head_overhead_s
              + prompt_heads * efficiency.attention_prompt_head_overhead_s)
    return compute, memory


def link_time(link_bytes, collectives, link_rate, efficiency: Efficiency, peers=0.0):
    """Seconds of `collectives` collective operations of one message size moving
    `link_bytes` through each GPU's link (a ring all-reduce of M bytes over n GPUs moves
    2 (n - 1) / n * M), each among `peers` other GPUs, by the faster protocol
    (`protocol_time`)."""
    link_bytes = np.asarray(link_bytes, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        moving = np.where(link_bytes > 0,
                          link_bytes / (efficiency.interconnect_efficiency * link_rate), 0.0)
    return (protocol_time(moving, collectives, efficiency)
            + collectives * collective_overhead(peers, efficiency))


def protocol_time(moving, collectives, efficiency: Efficiency):
    """The seconds `collectives` all-reduces take beyond their fixed time, `moving` being
    their bytes' time at the bulk protocol's bandwidth: the faster of the low-latency
    protocol (its bandwidth `allreduce_ll_share` of the bulk one's) and the bulk one
    (`allreduce_bulk_overhead_s` more per all-reduce). With a share of 1 the bulk
    protocol never wins: the single protocol of a profile without them."""
    return np.minimum(moving / efficiency.allreduce_ll_share,
                      moving + collectives * efficiency.allreduce_bulk_overhead_s)


def collective_overhead(peers, efficiency: Efficiency):
    """The fixed time of one collective among `peers` other GPUs."""
    return efficiency.allreduce_overhead_s + peers * efficiency.allreduce_peer_overhead_s


def host_time(sequences, efficiency: Efficiency):
    """The host's time on a step of `sequences` decodes and prompt chunks: the least a
    step takes under an overlapping scheduler (0 without one)."""
    return efficiency.host_step_s + as_float64(sequences) * efficiency.host_sequence_s


def has_host_floor(efficiency: Efficiency) -> bool:
    return efficiency.host_step_s > 0 or efficiency.host_sequence_s > 0


def fixed_step_time(layers, efficiency: Efficiency):
    """The step's overheads: per step and per layer."""
    return efficiency.step_overhead_s + np.asarray(layers, dtype=np.float64) * (
        efficiency.layer_overhead_s)
