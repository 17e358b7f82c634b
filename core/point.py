"""One configuration, named in user terms (a GPU, a model, dtypes, a profile), evaluated
by the vectorised step model; the form `sweep point`, the TUI and the simulator share."""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, replace

import numpy as np

from rooftui.core import limits, step_trace
from rooftui.core.assumptions import Assumptions, load_profile
from rooftui.core.dtypes import check_dtype, default_compute_dtype
from rooftui.core.efficiency import COLLECTIVE_TABLES
from rooftui.core.errors import SpecError
from rooftui.core.hardware import GPU, load_gpu
from rooftui.core.model import Model, ModelArrays, load_model
from rooftui.core.parallel import busiest_expert_load
from rooftui.core.step import LINK_PARTS, PARTS, StepInputs, evaluate_step
from rooftui.core.systems import DOMAIN, NETWORK, System, load_system
from rooftui.core.tables import (
    GPUTable,
    SystemTable,
    dtype_code,
    gather_step_inputs,
)


def uneven_split(tp, heads, kv_heads, is_mla):
    """Where tensor parallelism over `tp` GPUs cannot split a model (scalars or arrays):
    the attention heads do not divide evenly; the KV heads neither divide nor are divided
    by tp (MLA's latent serves every head, so it has no such limit)."""
    split = np.asarray(tp) > 1
    heads_uneven = split & (np.asarray(heads) % tp != 0)
    kv_uneven = split & ~np.asarray(is_mla) & (kv_heads % tp != 0) & (tp % kv_heads != 0)
    return heads_uneven, kv_uneven


IDEAL_ASSUMPTIONS = Assumptions()


@dataclass(frozen=True)
class PointConfig:
    gpu: GPU
    model: Model
    batch: int = 1
    context: int = 1024
    prefill: int = 0
    prefill_context: int = 0
    weight_dtype: str | None = None  # None: the model's own
    kv_dtype: str | None = None  # None: bf16 (fp16 for an fp16 model)
    compute_dtype: str | None = None  # None: follows the weights
    # one shared default (profiles are frozen): the traced step is found by its identity
    assumptions: Assumptions = IDEAL_ASSUMPTIONS
    tpot_budget: float | None = None
    # None: the model's own expert format when the weights are the model's, else theirs
    expert_weight_dtype: str | None = None
    tp: int = 1  # GPUs one replica is split over (tensor parallelism)
    spec_tokens: int = 0  # speculative decoding: tokens drafted per sequence and step
    acceptance: float | None = None  # each drafted token's acceptance rate
    draft_model: Model | None = None  # None: drafting costs nothing (n-gram, lookup)
    price_per_gpu_hour: float | None = None  # for the cost per million tokens
    energy: bool = False  # joules per token from the board power (`point_report` always)
    pp: int = 1  # pipeline stages (core/parallel.py)
    ep: int = 1  # GPUs the routed experts are split over: 1 or tp * dp
    dp: int = 1  # data-parallel attention groups of tp GPUs per stage
    micro_batches: int | None = None  # per step over the pipeline; None: pp
    system: System | None = None  # the links collectives cross; None: the GPU's interconnect

    def __post_init__(self) -> None:
        # finite and within range before anything is computed (`limits.BOUNDS`)
        for key in ("batch", "context", "prefill", "prefill_context", "spec_tokens", "tp",
                    "tpot_budget", "acceptance", "price_per_gpu_hour", "pp", "ep", "dp",
                    "micro_batches"):
            if getattr(self, key) is not None:
                limits.check(key, getattr(self, key))
        for key in ("weight_dtype", "kv_dtype", "compute_dtype", "expert_weight_dtype"):
            if getattr(self, key) is not None:
                check_dtype(getattr(self, key), key.replace("_", " "))
        self._check_parallelism()
        self._check_speculation()

    @property
    def gpus(self) -> int:
        """GPUs of one replica: pp stages of dp attention groups of tp GPUs."""
        return self.tp * self.dp * self.pp

    def _check_layout(self) -> None:
        if self.ep not in (1, self.tp * self.dp):
            raise SpecError(f"ep {self.ep} must be 1 or tp x dp = {self.tp * self.dp}: the "
                            "routed experts are split over every GPU of a stage, or none")
        if self.ep > 1 and not self.model.is_moe:
            raise SpecError(f"ep {self.ep} needs a mixture-of-experts model; "
                            f"{self.model.name} is dense")
        if self.ep > 1 and self.model.num_experts % self.ep:
            raise SpecError(f"ep {self.ep} does not divide {self.model.name}'s "
                            f"{self.model.num_experts} routed experts")
        if self.pp > self.model.num_hidden_layers:
            raise SpecError(f"pp {self.pp} is more stages than {self.model.name}'s "
                            f"{self.model.num_hidden_layers} layers")
        if self.micro_batches is not None and self.pp == 1 and self.micro_batches != 1:
            raise SpecError("micro-batches split a step over pipeline stages: give --pp too")
        if self.system is None and max(self.pp, self.ep) > 1 and (
                self.gpu.interconnect_gbs is None):
            raise SpecError(f"{self.gpu.name} lists no interconnect_gbs for the pipeline's "
                            "and experts' transfers; add it, or give --system")

    def _check_parallelism(self) -> None:
        self._check_layout()
        if self.tp == 1:
            return
        if self.gpu.interconnect_gbs is None and self.system is None:
            raise SpecError(f"{self.gpu.name} lists no interconnect_gbs, which tensor "
                            "parallelism needs for its all-reduces; add it to the GPU spec")
        for model in filter(None, (self.model, self.draft_model)):
            heads, kv_heads = model.num_attention_heads, model.num_key_value_heads
            heads_uneven, kv_uneven = uneven_split(self.tp, heads, kv_heads, model.is_mla)
            if heads_uneven:
                raise SpecError(f"tp {self.tp} does not divide {model.name}'s {heads} "
                                "attention heads; tensor parallelism splits them evenly")
            if kv_uneven:
                raise SpecError(f"tp {self.tp} and {model.name}'s {kv_heads} KV heads: one "
                                "must divide the other (split, or replicate each KV head)")

    def _check_speculation(self) -> None:
        if self.spec_tokens == 0:
            if self.acceptance is not None or self.draft_model is not None:
                raise SpecError("an acceptance rate or a draft model needs spec tokens "
                                "(--spec-tokens K)")
            return
        if self.acceptance is None:
            raise SpecError("speculative decoding needs the acceptance rate of a drafted "
                            "token (--acceptance, between 0 and 1)")

    @property
    def resolved_weight_dtype(self) -> str:
        return self.weight_dtype or self.model.weight_dtype

    @property
    def resolved_expert_weight_dtype(self) -> str | None:
        """The routed experts' format (None for a dense model)."""
        if not self.model.is_moe:
            return None
        if self.expert_weight_dtype:
            return self.expert_weight_dtype
        if self.weight_dtype is None and self.model.expert_weight_dtype:
            return self.model.expert_weight_dtype
        return self.resolved_weight_dtype

    @property
    def resolved_kv_dtype(self) -> str:
        if self.kv_dtype:
            return self.kv_dtype
        return "fp16" if self.model.weight_dtype == "fp16" else "bf16"

    @property
    def resolved_compute_dtype(self) -> str:
        return self.compute_dtype or default_compute_dtype(self.resolved_weight_dtype)

    def with_changes(self, **changes) -> PointConfig:
        return replace(self, **changes)

    def warnings(self) -> list[str]:
        limit = self.model.max_position_embeddings
        longest = max(self.context, self.prefill_context + self.prefill)
        if limit and longest > limit:
            return [f"context {longest} is past {self.model.name}'s "
                    f"max_position_embeddings ({limit}); computed anyway"]
        return []

    def step_inputs(self, *, python_floats: bool = False) -> StepInputs:
        """The step model's inputs: single numbers (numpy float64 scalars, or with
        `python_floats` plain floats, cheaper again but raising ZeroDivisionError where
        numpy gives inf or NaN); the one-entry tables behind them are kept per (GPU,
        model, draft, system), the gathered inputs per configuration but its batch and
        lengths."""
        inputs = _gathered_inputs(*self._setup())[python_floats]
        number = float if python_floats else _F64
        # the cached fields copied in whole: __init__ would set 31 frozen fields one by one
        step = object.__new__(StepInputs)
        step.__dict__.update(inputs, batch=number(self.batch), context=number(self.context),
                             prefill=number(self.prefill),
                             prefill_context=number(self.prefill_context))
        return step

    def _setup(self) -> tuple:
        """What the step inputs depend on but the batch and lengths, as a cache key."""
        return (_Spec(self.gpu), _Spec(self.model), _Spec(self.draft_model),
                _Spec(self.system), self.resolved_weight_dtype, self.resolved_kv_dtype,
                self.resolved_compute_dtype, self.resolved_expert_weight_dtype, self.tp,
                self.spec_tokens, self.acceptance or 0.0, self.energy,
                self.price_per_gpu_hour, self.pp, self.ep, self.dp, self.micro_batches,
                self.assumptions.mfu, self.assumptions.mbu,
                self.assumptions.memory_reserve_gb)


_F64 = np.float64
_PER_CALL = ("batch", "context", "prefill", "prefill_context")


class _Spec:
    """A GPU, model or system (or None) as a cache key: the same object hits at once, an
    equal one after comparing fields (specs hold dicts, so they have no hash of their own)."""

    __slots__ = ("spec",)

    def __init__(self, spec) -> None:
        self.spec = spec

    def __hash__(self) -> int:
        return hash(None if self.spec is None else self.spec.name)

    def __eq__(self, other) -> bool:
        return self.spec is other.spec or self.spec == other.spec


@functools.lru_cache(maxsize=64)
def _tables(gpu, model, draft_model, system):
    """One-entry GPU and system tables, and the model's (and its draft's)."""
    models = [model.spec] + ([draft_model.spec] if draft_model.spec else [])
    return (GPUTable.of([gpu.spec]), ModelArrays.stack(models),
            None if system.spec is None else SystemTable.of([system.spec]))


@functools.lru_cache(maxsize=1024)
def _gathered_inputs(gpu, model, draft_model, system, weight_dtype, kv_dtype,
                     compute_dtype, expert_dtype, tp, spec_tokens, acceptance, energy,
                     price_per_gpu_hour, pp, ep, dp, micro_batches, mfu, mbu,
                     memory_reserve_gb) -> tuple[dict, dict]:
    """One configuration's StepInputs fields but its batch and lengths, as numpy scalars
    and as plain floats."""
    gpu.spec.peak_flops(compute_dtype)  # a clear error if the GPU lacks it
    gpus, models, systems = _tables(gpu, model, draft_model, system)
    inputs = gather_step_inputs(
        gpus, models, gpu=0, model=0, batch=0.0, context=0.0, prefill=0.0,
        prefill_context=0.0, weight_dtype=dtype_code(weight_dtype),
        kv_dtype=dtype_code(kv_dtype), compute_dtype=dtype_code(compute_dtype),
        expert_weight_dtype=None if expert_dtype is None else dtype_code(expert_dtype),
        tp=tp, spec_tokens=spec_tokens, acceptance=acceptance,
        draft_model=1 if draft_model.spec else None,
        energy=energy, price_per_gpu_hour=price_per_gpu_hour,
        pp=pp, ep=ep, dp=dp, micro_batches=micro_batches,
        systems=systems, system=None if systems is None else 0,
        mfu=mfu, mbu=mbu, memory_reserve_gb=memory_reserve_gb)
    fields_ = {name: value for name, value in vars(inputs).items() if name not in _PER_CALL}
    return _single_numbers(fields_, plain=False), _single_numbers(fields_, plain=True)


def _single_numbers(values: dict, plain: bool) -> dict:
    """`values` (fields of StepInputs or ModelArrays) with each 0-d array as a numpy
    scalar (the same IEEE arithmetic at a fraction of an array's cost per operation), or
    with `plain` each number as a Python float."""
    out = dict(values)
    for name, value in values.items():
        if isinstance(value, np.ndarray | np.generic) and value.ndim == 0:
            out[name] = value.item() if plain else value[()]
        elif isinstance(value, ModelArrays):
            out[name] = ModelArrays(**_single_numbers(vars(value), plain))
    return out


# what a profile assumes that one configuration may override (None: the profile's)
ASSUMPTION_OVERRIDES = ("mfu", "mbu", "memory_reserve_gb", "overlap", "attention_flops",
                        "activation_traffic", "kv_write")
# overridable for one configuration (sweep point, simulate, optimize), not a grid axis
# or an Explorer field: whose all-reduce parameters the step's collectives pay
LIBRARY_OVERRIDE = "collective_library"


def named_config(gpu: str, model: str, profile: str, *, kv_heads: int | None = None,
                 draft_model: str | None = None, loaders=(load_gpu, load_model, load_profile),
                 system: str | None = None, **options) -> PointConfig:
    """A `PointConfig` from spec names or paths, as `sweep point` and the Explorer name
    them: `kv_heads` a what-if on the model's, `options` the other `PointConfig` fields
    and the profile's `ASSUMPTION_OVERRIDES` (and `LIBRARY_OVERRIDE`). `loaders` read the GPU, model and profile
    specs (the Explorer passes cached ones). A `system` brings its own GPU, which replaces
    `gpu`."""
    read_gpu, read_model, read_profile = loaders
    if system:
        options["system"] = load_system(system)
    spec = read_model(model)
    if kv_heads:
        spec = spec.with_kv_heads(kv_heads)
    assumptions = read_profile(profile).with_overrides(
        **{key: options.pop(key) for key in (*ASSUMPTION_OVERRIDES, LIBRARY_OVERRIDE)
           if key in options})
    gpu_spec = options["system"].gpu if system else read_gpu(gpu)
    return PointConfig(gpu=gpu_spec, model=spec, assumptions=assumptions,
                       draft_model=read_model(draft_model) if draft_model else None, **options)


def evaluate_point(config: PointConfig) -> dict[str, float | bool]:
    """The step model's metrics for one configuration, as Python scalars."""
    traced = _traced_step(config)
    if traced is not None:
        try:
            return traced(float(config.batch), float(config.context), float(config.prefill),
                          float(config.prefill_context))
        except ZeroDivisionError:  # numpy's scalars give its inf or NaN instead
            return _python_scalars(evaluate_step(config.step_inputs(), config.assumptions,
                                                 config.tpot_budget))
    try:  # plain floats, several times cheaper per operation than numpy's scalars
        arrays = evaluate_step(config.step_inputs(python_floats=True), config.assumptions,
                               config.tpot_budget)
    except ZeroDivisionError:
        arrays = evaluate_step(config.step_inputs(), config.assumptions, config.tpot_budget)
    return _python_scalars(arrays)


def _python_scalars(arrays: dict) -> dict:
    return {key: _PYTHON_SCALAR.get(type(value), _item)(value)
            for key, value in arrays.items()}


def _traced_step(config: PointConfig):
    """The step of `config`'s setup traced into straight-line Python of its batch and
    lengths (`core.step_trace`) once the setup has been met `TRACE_AFTER` times, or None
    (not yet; or it cannot be: a TPOT budget, whose solver loops on the values). Found by
    the identity of the config's specs and profile at once (a profile equal to the traced
    one costs a comparison), else by their equality (equal specs share a trace)."""
    if config.tpot_budget is not None:
        return None
    assumptions = config.assumptions
    key = (id(config.gpu), id(config.model), id(config.draft_model), id(config.system),
           assumptions.name, _SETUP_NUMBERS(config), config.prefill == 0,
           config.prefill_context == 0)
    known = _SETUPS_BY_IDENTITY.get(key)
    if known is not None:
        gpu, model, draft_model, system, setup = known
        if (gpu is config.gpu and model is config.model and draft_model is config.draft_model
                and system is config.system and (setup.assumptions is assumptions
                                                 or setup.assumptions == assumptions)):
            return setup.traced_step()
    try:
        setup = _SetupTrace(config._setup(), assumptions, config.prefill == 0,
                            config.prefill_context == 0)
    except TypeError:  # a profile that has no hash: no cache, no trace
        return None
    if len(_SETUPS_BY_IDENTITY) >= 4096:  # the objects it keeps alive stay bounded
        _SETUPS_BY_IDENTITY.clear()
    _SETUPS_BY_IDENTITY[key] = (config.gpu, config.model, config.draft_model, config.system,
                                setup)
    return setup.traced_step()


# Tracing a setup costs about as much as 25 calls of the step model on it: a setup met
# once (`sweep point`, a what-if of one overhead) is not traced; after this many calls it is.
TRACE_AFTER = 16
_NOT_YET = object()


@functools.lru_cache(maxsize=1024)  # one per equal (setup, profile, zero lengths)
class _SetupTrace:
    """A setup (`PointConfig._setup`), a profile, and whether the prefill chunk and its
    cached tokens are zero (the step model skips the terms of a zero one, so the trace
    takes them as the number 0): how often it was met, and its traced step."""

    def __init__(self, setup: tuple, assumptions: Assumptions, no_prefill: bool,
                 no_prefill_context: bool) -> None:
        self.setup, self.assumptions = setup, assumptions
        self.zero = no_prefill, no_prefill_context
        self.calls, self.traced = 0, _NOT_YET

    def traced_step(self):
        """The traced step, or None: not yet met `TRACE_AFTER` times, or untraceable."""
        if self.calls < TRACE_AFTER:
            self.calls += 1
            return None
        if self.traced is _NOT_YET:
            self.traced = self._trace()
        return self.traced

    def _trace(self):
        trace = step_trace.Trace(_PER_CALL)
        batch, context, prefill, prefill_context = trace.symbols()
        no_prefill, no_prefill_context = self.zero
        inputs = object.__new__(StepInputs)
        inputs.__dict__.update(_gathered_inputs(*self.setup)[1], batch=batch, context=context,
                               prefill=0.0 if no_prefill else prefill,
                               prefill_context=0.0 if no_prefill_context else prefill_context)
        try:
            outputs = evaluate_step(inputs, self.assumptions)
            return trace.function({
                key: value if type(value) is step_trace.Symbol
                else _PYTHON_SCALAR.get(type(value), _item)(value)
                for key, value in outputs.items()})
        except (step_trace.NotTraced, ArithmeticError, TypeError):  # kept untraced
            return None


# the setup's fields that hash (read at once: a C call)
_SETUP_NUMBERS = operator.attrgetter(
    "weight_dtype", "kv_dtype", "compute_dtype", "expert_weight_dtype", "tp", "spec_tokens",
    "acceptance", "energy", "price_per_gpu_hour", "pp", "ep", "dp", "micro_batches")
# identity key -> the specs it was made from (kept alive, so the ids stay theirs), setup
_SETUPS_BY_IDENTITY: dict[tuple, tuple] = {}


# the step model's scalar types, as Python's (`.item()` costs several times more)
_PYTHON_SCALAR = {np.float64: float, np.bool_: bool, float: float, bool: bool}


def _item(value):
    return np.asarray(value).item()


def _finite(value: float | None) -> float | None:
    return None if value is None or not np.isfinite(value) else value


def _attention_kind(model: Model) -> str:
    if model.is_mla:
        return "MLA"
    if model.num_key_value_heads == model.num_attention_heads:
        return "MHA"
    return "MQA" if model.num_key_value_heads == 1 else "GQA"


def _parallelism(config: PointConfig) -> dict:
    system = config.system
    return {"tp": config.tp, "pp": config.pp, "ep": config.ep, "dp": config.dp,
            "micro_batches": config.micro_batches or config.pp, "gpus": config.gpus,
            "system": None if system is None else system.name,
            "gpus_per_domain": None if system is None else system.gpus_per_domain,
            "bubble": (((config.micro_batches or config.pp) + config.pp - 1)
                       / (config.micro_batches or config.pp))}


def link_name(config: PointConfig, part: str) -> str:
    """The link a collective crosses: `interconnect` (the GPU's, without a system), else
    `nvlink_domain`, `network`, or both for an all-to-all wider than a domain."""
    if config.system is None:
        return "interconnect"
    domain = config.system.gpus_per_domain
    group = {"communication": config.tp, "draft_communication": config.tp,
             "all_to_all": config.ep, "pipeline_transfer": config.gpus}[part]
    if group <= domain:
        return DOMAIN
    return f"{DOMAIN}+{NETWORK}" if part == "all_to_all" and domain > 1 else NETWORK


def _collectives(config: PointConfig, m: dict) -> dict:
    """Each link part's bytes per GPU, the link it crosses and its time; an all-reduce
    part under a profile with two protocols also the one that timed it."""
    out = {name: {"bytes": m[f"{name}_bytes"], "link": link_name(config, name),
                  "time_s": m[f"{name}_time_s"]}
           for name in LINK_PARTS if f"{name}_bytes" in m}
    if config.tp > 1 and config.assumptions.step_efficiency.allreduce_ll_share < 1:
        low_latency = evaluate_point(config.with_changes(
            assumptions=_low_latency_only(config.assumptions)))
        for name in ("communication", "draft_communication"):
            if name in out and out[name]["bytes"] > 0:
                out[name]["protocol"] = ("low-latency" if m[f"{name}_time_s"]
                                         == low_latency[f"{name}_time_s"] else "bulk")
    return out


def _host_bound(metrics: dict) -> bool:
    """Whether the host's time sets the step (an overlapping scheduler's floor binds)."""
    host = metrics.get("host_s")
    return host is not None and host > 0 and host >= metrics["step_time_s"]


def host_row(report: dict) -> dict | None:
    """The host floor as a row of the step's breakdown (None without one): its time, and
    whether it sets the step or hides behind the GPU's work."""
    if report["host_s"] is None:
        return None
    return {"flops": 0.0, "bytes": 0.0, "time_s": report["host_s"], "intensity": None,
            "bound": "sets the step" if report["bound"] == "host" else "hidden"}


def link_label(collective: dict) -> str:
    """A report's collective as its table says it: the link it crosses, and the
    all-reduce protocol that timed it where a profile has two."""
    protocol = collective.get("protocol")
    return collective["link"] + (f", {protocol} protocol" if protocol else "")


def _low_latency_only(assumptions: Assumptions) -> Assumptions:
    """The profile with its bulk all-reduce protocol out of reach (an hour more a
    collective): the low-latency one times every all-reduce."""
    never = {name: 3600.0 for name in ("allreduce_bulk_overhead_s", *(
        f"{table}.allreduce_bulk_overhead_s" for table in COLLECTIVE_TABLES))}
    return replace(assumptions, efficiency=assumptions.efficiency.with_values(never))


def point_report(config: PointConfig) -> dict:
    """The `sweep point --json` object: inputs, headline metrics, and each part."""
    m = evaluate_point(config.with_changes(energy=True))
    model = config.model
    bound = {True: "compute", False: "memory"}
    tokens = config.batch * (config.spec_tokens + 1) + config.prefill
    report = {
        "gpu": config.gpu.name,
        "model": model.name,
        "batch": config.batch,
        "context": config.context,
        "prefill": config.prefill,
        "prefill_context": config.prefill_context,
        "kv_heads": model.num_key_value_heads,
        "group_size": model.group_size,
        "attention_kind": _attention_kind(model),
        "weight_dtype": config.resolved_weight_dtype,
        "expert_weight_dtype": config.resolved_expert_weight_dtype,
        "kv_dtype": config.resolved_kv_dtype,
        "compute_dtype": config.resolved_compute_dtype,
        "peak_flops": config.gpu.peak_flops(config.resolved_compute_dtype),
        "bandwidth_bytes_per_s": config.gpu.bandwidth_bytes_per_s,
        "tp": config.tp,
        "interconnect_bytes_per_s": (None if config.gpu.interconnect_gbs is None
                                     else config.gpu.interconnect_gbs * 1e9),
        "assumptions": {
            "profile": config.assumptions.name,
            "mfu": config.assumptions.mfu,
            "mbu": config.assumptions.mbu,
            "overlap": config.assumptions.overlap,
            "attention_flops": config.assumptions.attention_flops,
            "activation_traffic": config.assumptions.activation_traffic,
            "kv_write": config.assumptions.kv_write,
            "memory_reserve_gb": config.assumptions.memory_reserve_gb,
            "collective_library": config.assumptions.collective_library or None,
            "efficiency": config.assumptions.efficiency.as_dict(),
        },
        "step_time_s": m["step_time_s"],
        "overhead_s": m.get("overhead_s", 0.0),
        "host_s": m.get("host_s"),  # an overlapping scheduler's host time (None: no floor)
        "tokens_per_s": m["tokens_per_s"],
        "tokens_per_s_per_gpu": m.get("tokens_per_s_per_gpu", m["tokens_per_s"]),
        "prefill_tokens_per_s": m["prefill_tokens_per_s"],
        "per_user_tokens_per_s": m["per_user_tokens_per_s"],
        "flops": m["flops"],
        "bytes": m["bytes"],
        "intensity": _finite(m["intensity"]),
        "ridge": m["ridge"],
        "bound": "host" if _host_bound(m) else bound[m["compute_bound"]],
        "parts": {
            name: {
                "flops": m[f"{name}_flops"],
                "bytes": m[f"{name}_bytes"],
                "time_s": m[f"{name}_time_s"],
                "intensity": 0.0 if name in LINK_PARTS else _finite(m[f"{name}_intensity"]),
                "bound": "interconnect" if name in LINK_PARTS
                else bound[m[f"{name}_compute_bound"]],
            }
            for name in PARTS if f"{name}_flops" in m
        },
        "attention_share": _finite(m["attention_share"]),
        "mfu": _finite(m["mfu"]),
        "mbu": _finite(m["mbu"]),
        "weight_bytes": m["weight_bytes"],
        "kv_bytes": m["kv_bytes"],
        "kv_bytes_per_token": m["kv_bytes_per_token"],
        "intensity_ceiling": _finite(m["intensity_ceiling"]),
        "throughput_ceiling_tokens_per_s": _finite(m["throughput_ceiling_tokens_per_s"]),
        "max_batch": None if not np.isfinite(m["max_batch"]) else int(m["max_batch"]),
        "fits": m["fits"],
        "moe": None if not model.is_moe else {
            "experts": model.num_experts,
            "experts_per_token": model.num_experts_per_tok,
            "shared_experts": model.num_shared_experts,
            "moe_layers": model.moe_layers,
            "experts_touched_per_layer": model.expected_experts_touched(tokens),
        },
        "speculative": None if not config.spec_tokens else {
            "spec_tokens": config.spec_tokens,
            "acceptance": config.acceptance,
            "draft_model": config.draft_model.name if config.draft_model else None,
            "expected_tokens_per_step": m["expected_tokens_per_step"],
        },
        "board_power_w": config.gpu.tdp_w,
        "energy_j_per_token": _finite(m.get("energy_j_per_token")),
        "price_per_gpu_hour": config.price_per_gpu_hour,
        "cost_per_million_tokens": _finite(m.get("cost_per_million_tokens")),
        "warnings": config.warnings(),
    }
    report["parallelism"] = _parallelism(config)
    report["collectives"] = _collectives(config, m)
    if report["moe"] is not None and config.ep > 1:
        routed = config.batch * (config.spec_tokens + 1) * config.dp + config.prefill * config.dp
        report["moe"]["busiest_gpu_pairs_per_layer"] = float(busiest_expert_load(
            routed, model.num_experts, model.num_experts_per_tok, config.ep))
        report["moe"]["mean_gpu_pairs_per_layer"] = (
            routed * model.num_experts_per_tok / config.ep)
    if "max_batch_for_tpot" in m:
        value = m["max_batch_for_tpot"]
        report["tpot_budget_s"] = config.tpot_budget
        report["max_batch_for_tpot"] = int(value) if np.isfinite(value) else None
    return report
