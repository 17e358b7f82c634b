"""What the Explorer is asked about: one configuration in user terms, as the controls hold it.

`ExplorerSettings` names specs (shipped names or paths) and the step's token counts; its
`config()` resolves them into the core's `PointConfig`, the same object `sweep point`
evaluates, so the Explorer and the CLI agree by construction. Unset fields (None) mean
"as the model or the profile says", as the CLI's omitted flags do.

To add a control: add a field here, pass it on in `config()`, and add one `ControlSpec`
line in `rooftui.tui.widgets.controls`.

A system brings its GPU, as `sweep point --system` does: choosing one sets `gpu` to the
system's (`with_changes`), and a GPU that differs from the system's is refused by
`config()` rather than silently replaced, so the GPU control never shows a GPU the
figures do not use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from functools import lru_cache

from rooftui.core.assumptions import CALIBRATED, Assumptions, load_profile
from rooftui.core.errors import SpecError
from rooftui.core.hardware import GPU, load_gpu
from rooftui.core.model import Model, load_model
from rooftui.core.point import ASSUMPTION_OVERRIDES, PointConfig, named_config
from rooftui.core.spec_files import shipped_names
from rooftui.core.systems import System, load_system

DEFAULT_GPU = "h100-sxm"
DEFAULT_MODEL = "llama-3-8b"
DEFAULT_PROFILE = "ideal"
# the profile's assumptions a sweep row can set (mfu and mbu have controls), and every
# input without a control
ASSUMED = tuple(key for key in ASSUMPTION_OVERRIDES if key not in ("mfu", "mbu"))
UNCONTROLLED = ("compute_dtype", "expert_dtype", "prefill_context", *ASSUMED)


# Specs are small TOML files, but a key press should not re-read them: the Explorer asks
# for the same few names again and again.
@lru_cache(maxsize=64)
def cached_gpu(name: str) -> GPU:
    return load_gpu(name)


@lru_cache(maxsize=64)
def cached_model(name: str) -> Model:
    return load_model(name)


def cached_profile(name: str, gpu: str | None = None) -> Assumptions:
    """A profile by name; `calibrated` resolves for `gpu` (its kernel profile, or one
    transferred to it), every other name is the same whatever the GPU."""
    return _cached_profile(name, gpu if name == CALIBRATED else None)


@lru_cache(maxsize=16)
def _cached_profile(name: str, gpu: str | None) -> Assumptions:
    return load_profile(name, gpu=gpu)


@lru_cache(maxsize=16)
def cached_system(name: str) -> System:
    return load_system(name)


@dataclass(frozen=True)
class ExplorerSettings:
    gpu: str = DEFAULT_GPU
    model: str = DEFAULT_MODEL
    weight_dtype: str | None = None  # None: the model's own
    kv_dtype: str | None = None  # None: bf16 (fp16 for an fp16 model)
    batch: int = 1  # decode sequences in the step
    context: int = 1024  # tokens cached per decode sequence
    kv_heads: int | None = None  # None: the model's own
    prefill: int = 0  # prefill tokens in the step (one chunk)
    profile: str = DEFAULT_PROFILE
    mfu: float | None = None  # None: the profile's
    mbu: float | None = None  # None: the profile's
    tp: int = 1  # GPUs one replica is split over (tensor parallelism)
    spec_tokens: int = 0  # speculative decoding: tokens drafted per sequence and step
    acceptance: float | None = None  # each drafted token's acceptance rate
    draft_model: str | None = None  # None: drafting costs nothing (n-gram, lookup)
    # cluster layout (core/parallel.py), as `sweep point --system --pp --micro-batches
    # --dp --ep`
    system: str | None = None  # None: collectives on the GPU's interconnect
    pp: int = 1  # pipeline stages
    micro_batches: int | None = None  # None: pp
    dp: int = 1  # data-parallel attention groups of tp GPUs per stage
    ep: int = 1  # GPUs the routed experts are split over: 1 or tp × dp
    # Inputs without a control, which a sweep row opened here may set (None: as the
    # model or the profile says); the controls list them (`fixed_inputs`).
    compute_dtype: str | None = None
    expert_dtype: str | None = None
    prefill_context: int = 0  # tokens of the prefilled prompt already cached
    memory_reserve_gb: float | None = None
    overlap: str | None = None
    attention_flops: str | None = None
    activation_traffic: bool | None = None
    kv_write: bool | None = None

    def with_changes(self, **changes: object) -> ExplorerSettings:
        """The same with `changes`; a system chosen without a GPU brings its own."""
        if changes.get("system") and "gpu" not in changes:
            gpu = system_gpu(str(changes["system"]))
            if gpu is not None:
                changes["gpu"] = gpu
        return replace(self, **changes)

    def config(self) -> PointConfig:
        """The core configuration; raises SpecError for anything the core refuses, and
        for a GPU other than the system's (`sweep point --system` takes the system's)."""
        if self.system:
            gpu = system_gpu(self.system)
            if gpu is not None and gpu != self.gpu:
                raise SpecError(f"GPU {self.gpu} is not {cached_system(self.system).name}'s "
                                f"{gpu}: a system brings its GPU (system none for another)")
        return named_config(
            self.gpu, self.model, self.profile, kv_heads=self.kv_heads,
            system=self.system, pp=self.pp, micro_batches=self.micro_batches, dp=self.dp,
            ep=self.ep,
            draft_model=self.draft_model,
            loaders=(cached_gpu, cached_model, lambda name: cached_profile(name, self.gpu)),
            batch=self.batch, context=self.context, prefill=self.prefill,
            prefill_context=self.prefill_context, weight_dtype=self.weight_dtype,
            kv_dtype=self.kv_dtype, compute_dtype=self.compute_dtype,
            expert_weight_dtype=self.expert_dtype, tp=self.tp, spec_tokens=self.spec_tokens,
            acceptance=self.acceptance,
            **{key: getattr(self, key) for key in ASSUMPTION_OVERRIDES})

    def without_fixed_inputs(self) -> ExplorerSettings:
        """The same with every input without a control back to the model's or profile's."""
        return replace(self, prefill_context=0, **{key: None for key in UNCONTROLLED
                                                   if key != "prefill_context"})

    def fixed_inputs(self) -> list[str]:
        """The inputs without a control that differ from the model's or profile's, as
        "name value" (a sweep row's compute dtype, overlap, ...)."""
        shown = []
        for key in UNCONTROLLED:
            value = getattr(self, key)
            if value is None or (key == "prefill_context" and value == 0):
                continue
            if isinstance(value, bool):
                value = "on" if value else "off"
            elif isinstance(value, float):
                value = f"{value:g}"
            shown.append(f"{key.replace('_', ' ')} {value}")
        return shown

    @classmethod
    def from_row(cls, row: dict[str, object], profile: str | None = None) -> ExplorerSettings:
        """Settings from one row of sweep results (rooftui.sweeps.results): the input
        columns named like a field (an input a metric shares a name with is written
        `<name>_assumed`: `mfu_assumed` is the MFU assumed, `mfu` the one achieved), and
        the grid's `profile`. Inputs without a control (compute dtype, overlap, ...) are
        carried too, and listed under the controls (`fixed_inputs`); a price, an energy
        flag or a TPOT budget, which the Explorer does not show, are not."""
        row = serving_step(row)
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in row.items()
                  if key in known and f"{key}_assumed" not in row}
        values.update({key.removesuffix("_assumed"): value for key, value in row.items()
                       if key.endswith("_assumed") and key.removesuffix("_assumed") in known})
        values = {key: value for key, value in values.items() if value is not None}
        if profile is not None:
            values["profile"] = profile
        for key in ("batch", "context", "kv_heads", "prefill", "tp", "spec_tokens",
                    "prefill_context", "pp", "micro_batches", "dp", "ep"):
            if key in values:
                values[key] = int(values[key])
        for key in ("mfu", "mbu", "acceptance", "memory_reserve_gb"):
            if key in values:
                values[key] = float(values[key])
        if not values.get("spec_tokens"):  # a grid's acceptance axis does nothing there
            values.pop("acceptance", None)
            values.pop("draft_model", None)
        if "gpu" in values:
            values["gpu"] = shipped_key("gpus", str(values["gpu"]))
        for key in ("model", "draft_model"):
            if key in values:
                values[key] = shipped_key("models", str(values[key]))
        if "system" in values:  # a grid gives gpu or system: the row's GPU is the system's
            values["system"] = str(values["system"])
            values["gpu"] = system_gpu(values["system"]) or values.get("gpu", DEFAULT_GPU)
        return cls(**values).canonical()

    def canonical(self) -> ExplorerSettings:
        """The same configuration with every value that equals its default (the model's
        dtype and KV heads, the profile's MFU/MBU) set back to None, as the controls
        show defaults."""
        plain = replace(self, weight_dtype=None, kv_dtype=None, kv_heads=None, mfu=None,
                        mbu=None, **dict.fromkeys(ASSUMED))
        config = plain.config()
        # the compute and expert formats follow the weights: their defaults with self's
        follows = replace(self, compute_dtype=None, expert_dtype=None).config()
        defaults = {
            "weight_dtype": config.resolved_weight_dtype,
            "kv_dtype": config.resolved_kv_dtype,
            "kv_heads": config.model.num_key_value_heads,
            "mfu": config.assumptions.mfu,
            "mbu": config.assumptions.mbu,
            "compute_dtype": follows.resolved_compute_dtype,
            "expert_dtype": follows.resolved_expert_weight_dtype,
            **{key: getattr(config.assumptions, key) for key in ASSUMED},
        }
        return replace(self, **{key: None for key, value in defaults.items()
                                if getattr(self, key) == value})


def serving_step(row: dict[str, object]) -> dict[str, object]:
    """An optimize or simulate row (a scheduler's max batch and token budget, no batch)
    as the step it runs at full load, as the Optimize view opens its best: max batch
    sequences decoding at the workload's mean context, plus the prefill a chunked
    budget leaves. A step row is returned as it is."""
    if "batch" in row or row.get("max_batch") is None:
        return row
    step = {**row, "batch": int(row["max_batch"])}
    context = row.get("decode_context")
    if isinstance(context, int | float) and math.isfinite(context):
        step["context"] = max(1, round(context))
    if row.get("policy") == "chunked" and row.get("token_budget") is not None:
        step["prefill"] = max(0, int(row["token_budget"]) - int(row["max_batch"]))
    return step


def system_gpu(system: str) -> str | None:
    """The GPU control's value for the system's GPU (its shipped name, or the path the
    system names); None for a system the core refuses, which `config()` then says."""
    try:
        return shipped_key("gpus", cached_system(system).gpu.key)
    except SpecError:
        return None


def shipped_key(kind: str, value: str) -> str:
    """The shipped file stem for `value`, which may already be one or may be a spec's
    display name ("H100 SXM"); anything else (a path) is returned unchanged."""
    names = shipped_names(kind)
    if value in names:
        return value
    load = cached_gpu if kind == "gpus" else cached_model
    for name in names:
        try:
            if load(name).name == value:
                return name
        except ValueError:  # a shipped spec the core refuses (e.g. MoE) cannot match
            continue
    return value
