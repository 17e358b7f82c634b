"""Measured timings: the calibration CSV format, and converters from published datasets.

The calibration CSV format (what `sweep measure` writes and `sweep calibrate` reads), one
measurement per row; columns a kind does not use may be empty or absent, and [defaults]
are what an empty or absent column means (so files written before a column existed still
read: an old `dtype` column is `weight_dtype`):

| column | meaning |
|---|---|
| `kind` | `gemm` (one weight matmul), `attention_decode` / `attention_prefill` (one layer's attention kernel), `step` (one engine step), `allreduce`, `copy` (device to device); end to end under load, per request: `e2e_ttft` (time to first token), `e2e_tpot` (time per output token after the first), `e2e_itl` (time between tokens) |
| `gpu` | the GPU: a shipped spec name (`h100-sxm`) or a device name; `--gpu` of `sweep calibrate` picks the rows |
| `model` | shipped model name or spec path (attention, step and e2e rows) |
| `tp` | tensor-parallel degree: the row runs on one GPU's shard (GPUs of an all-reduce) [1] |
| `weight_dtype` | operands of a kernel; the weights of a step or e2e run [bf16] |
| `compute_dtype` | the format the matmuls run in [a kernel's operand format (nvfp4: fp4); for steps `default_compute_dtype` of the weights: fp8 for fp8, bf16 for weight-only formats] |
| `expert_dtype` | routed experts' weights (gpt-oss: mxfp4) [as `weight_dtype`] |
| `kv_dtype` | KV-cache format of attention and steps [bf16; fp16 for fp16 weights] |
| `engine`, `engine_version` | the serving engine or kernel library and its version; an `allreduce` row's `nccl` or `trtllm` (TensorRT-LLM's custom all-reduce) fits and is priced by that library's own all-reduce parameters [not recorded] |
| `cuda_graphs` | `true` / `false`: whether the engine replayed CUDA graphs (an isolated kernel launched eagerly pays `launch_overhead_s`) [not recorded: kernels taken as launched eagerly] |
| `timer` | how a kernel's time was taken: `cuda_events` (events around the op) or `host_clock` (the host's clock around the launch and a synchronize: pays `host_timer_overhead_s`) [cuda_events] |
| `m`, `n`, `k` | GEMM: Y[m, n] = X[m, k] · W[k, n]; m is the token count |
| `batch` | decode sequences (one new token each) |
| `context` | tokens already cached per decode sequence |
| `prefill` | prompt tokens per prompt in the step or prefill attention kernel |
| `prefill_context` | tokens of each prompt already cached (chunked prefill) [0] |
| `prompts` | prompts of `prefill` tokens each [1 where prefill > 0] |
| `bytes` | all-reduce message, or bytes one copy writes |
| `isl`, `osl` | e2e: input and output tokens per request |
| `concurrency` | e2e: requests in flight (closed loop); or `request_rate`: requests/s arriving (open loop); one of the two |
| `num_prompts` | e2e: requests in the run [not recorded] |
| `time_s` | measured seconds (a median or mean of repeats; e2e: the run's mean per request) |
| `dataset` | a label grouping rows: errors are reported, and a fit weighted, per dataset [the file name] |
| `source` | where the number comes from |

Converters read each published dataset (docs/validation.md names its repository, commit
and path) by its header. Each returns datasets in this format, with notes on what was assumed
and which rows were left out and why (models not shipped, derived or suspect rows, data
that are not step, kernel or end-to-end times), filling the columns above from what the
source says (SOURCES.md in MEASURED_DIR) and leaving blank what it does not record.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from rooftui.core import limits
from rooftui.core.calibration import (
    E2E_KINDS,
    KINDS,
    TIMERS,
    Measurements,
    default_compute_dtypes,
)
from rooftui.core.dtypes import check_dtype
from rooftui.core.efficiency import COLLECTIVE_TABLES, collective_library_code
from rooftui.core.errors import SpecError
from rooftui.core.hardware import GPU
from rooftui.core.model import load_model
from rooftui.core.tables import dtype_code
from rooftui.sweeps.output_files import atomic_path

COLUMNS = ("kind", "gpu", "model", "tp", "weight_dtype", "compute_dtype", "expert_dtype",
           "kv_dtype", "engine", "engine_version", "cuda_graphs", "timer", "m", "n", "k", "batch",
           "context", "prefill", "prefill_context", "prompts", "bytes", "isl", "osl",
           "concurrency", "request_rate", "num_prompts", "time_s", "dataset", "source")
LEGACY_COLUMNS = {"dtype": "weight_dtype"}  # old name -> the format's name
DTYPE_COLUMNS = ("weight_dtype", "compute_dtype", "expert_dtype", "kv_dtype")
NUMERIC = ("tp", "m", "n", "k", "batch", "context", "prefill", "prefill_context", "prompts",
           "bytes", "isl", "osl", "concurrency", "request_rate", "num_prompts", "time_s")
# the ranges of `core.limits`, as measured values: fractional (means of repeats), from 0
MEASURED_BOUNDS = {
    column: replace(limits.BOUNDS[bound], integer=False, minimum=0)
    for column, bound in (("tp", "tp"), ("m", "matrix_dimension"), ("n", "matrix_dimension"),
                          ("k", "matrix_dimension"), ("batch", "batch"), ("context", "context"),
                          ("prefill", "prefill"), ("prefill_context", "prefill_context"),
                          ("prompts", "batch"), ("bytes", "bytes"), ("isl", "prefill"),
                          ("osl", "context"), ("concurrency", "batch"), ("request_rate", "rate"),
                          ("num_prompts", "requests"))
} | {"time_s": limits.BOUNDS["time_s"]}
# what each kind needs besides kind, gpu and time_s
REQUIRED = {
    "gemm": ("m", "n", "k"),
    "attention_decode": ("model", "batch", "context"),
    "attention_prefill": ("model", "prefill"),
    "step": ("model",),
    "allreduce": ("tp", "bytes"),
    "copy": ("bytes",),
} | dict.fromkeys(E2E_KINDS, ("model", "isl", "osl"))
CUDA_GRAPHS = {"true": "true", "false": "false", "1": "true", "0": "false", "yes": "true",
               "no": "false"}
# the `timer` column's values: a graph replay is cuda_graphs = true instead
HOST_TIMERS = tuple(timer for timer in TIMERS if timer != "cuda_graph")
DTYPE_NAMES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32",
               "float8": "fp8", "fp8_block": "fp8"}


@dataclass
class Dataset:
    """Rows of one dataset in the calibration format (dicts of column -> value)."""

    name: str
    source: str
    rows: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Conversion:
    """What one measured file gave: its datasets, and what was left out."""

    path: Path
    datasets: list[Dataset]
    skipped: list[str] = field(default_factory=list)


def dtype_name(text: str) -> str:
    text = str(text).strip()
    return check_dtype(DTYPE_NAMES.get(text.lower(), text.lower()))


def _row(kind: str, gpu: str, time_s: float, **values) -> dict:
    return {"kind": kind, "gpu": gpu, "time_s": float(time_s), **values}


def _read(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise SpecError(f"{path}: cannot read: {error}") from None


def _header(path: Path) -> tuple[str, ...]:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            return tuple(next(csv.reader(handle), ()))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise SpecError(f"{path}: cannot read: {error}") from None


def _group(rows: list[dict], key: Callable[[dict], tuple], name: Callable[..., str],
           source: str, notes: list[str] | None = None,
           helpers: tuple[str, ...] = ()) -> list[Dataset]:
    """Rows into datasets by `key(row)`, named `name(*key)`; `helpers` are columns the key
    reads that are not part of the calibration format (dropped once grouped)."""
    groups: dict[tuple, Dataset] = {}
    for row in rows:
        group_key = key(row)
        for column in helpers:
            del row[column]
        if group_key not in groups:
            groups[group_key] = Dataset(name(*group_key), source, notes=list(notes or []))
        row["dataset"] = groups[group_key].name
        row.setdefault("source", source)
        groups[group_key].rows.append(row)
    return list(groups.values())


# --- the calibration format --------------------------------------------------------

def read_calibration_csv(path: Path) -> Conversion:
    """A file in the calibration format; every row checked, errors name file and line."""
    rows = []
    for line, raw in enumerate(_read(path), start=2):
        where = f"{path}: line {line}"
        row = _current_names({key: (value or "").strip() for key, value in raw.items()
                              if key in COLUMNS or key in LEGACY_COLUMNS})
        kind = row.get("kind", "")
        if kind not in KINDS:
            raise SpecError(f"{where}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
        for column in ("gpu", "time_s", *REQUIRED[kind]):
            if not row.get(column):
                raise SpecError(f"{where}: a {kind} row needs column {column!r}")
        if kind in E2E_KINDS and not (row.get("concurrency") or row.get("request_rate")):
            raise SpecError(f"{where}: a {kind} row needs column 'concurrency' (closed "
                            "loop) or 'request_rate' (requests/s, open loop)")
        if row.get("cuda_graphs"):
            if row["cuda_graphs"].lower() not in CUDA_GRAPHS:
                raise SpecError(f"{where}: cuda_graphs must be true or false (or blank: not "
                                f"recorded), got {row['cuda_graphs']!r}")
            row["cuda_graphs"] = CUDA_GRAPHS[row["cuda_graphs"].lower()]
        if row.get("timer") and row["timer"] not in HOST_TIMERS:
            raise SpecError(f"{where}: timer must be one of {', '.join(HOST_TIMERS)} (or "
                            f"blank: cuda_events), got {row['timer']!r}")
        for column in NUMERIC:
            if row.get(column):
                try:
                    value = float(row[column])
                except ValueError:
                    value = row[column]  # refused with the range
                row[column] = MEASURED_BOUNDS[column].check(value, column, where)
            else:
                row.pop(column, None)
        for column in DTYPE_COLUMNS:
            if row.get(column):
                try:
                    row[column] = dtype_name(row[column])
                except SpecError as error:
                    raise SpecError(f"{where}: {error}") from None
        rows.append({key: value for key, value in row.items() if value != ""})
    default = path.stem
    by_name: dict[str, Dataset] = {}
    for row in rows:
        name = row.setdefault("dataset", default)
        by_name.setdefault(name, Dataset(name, row.get("source", str(path.name)))).rows.append(row)
    return Conversion(path, list(by_name.values()))


def write_calibration_csv(rows: list[dict], path: Path) -> None:
    """Write rows in the calibration format atomically (a temp file, then a rename); a
    file-system failure is one line naming the file."""
    with atomic_path(path) as temporary, temporary.open("w", newline="",
                                                        encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for row in map(_current_names, rows):
            writer.writerow({key: _format(row.get(key, "")) for key in COLUMNS})


def _current_names(row: dict) -> dict:
    """A row with its old column names (`LEGACY_COLUMNS`) renamed; a current name wins."""
    renamed = {key: value for key, value in row.items() if key not in LEGACY_COLUMNS}
    for old, new in LEGACY_COLUMNS.items():
        if row.get(old) not in (None, "") and renamed.get(new) in (None, ""):
            renamed[new] = row[old]
    return renamed


def _format(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}" if not value.is_integer() or abs(value) >= 1e15 else str(int(value))
    return str(value)


# --- converters for the published datasets ------------------------------------------

SPLITWISE_GPUS = {"a100-80gb": "a100-80gb", "h100-80gb": "h100-sxm"}
SPLITWISE_MODELS = {"llama2-70b": "llama-2-70b"}


def convert_splitwise(path: Path) -> Conversion:
    """Splitwise's perf model: decode steps (token_time) and whole-batch prefills
    (prompt_time), Llama-2-70B in FP16. The mean decode step of a request of P prompt and
    T output tokens runs at context P + T/2."""
    source = "Mutinifni/splitwise-sim@8f99e7d data/perf_model.csv (Patel et al., ISCA 2024)"
    rows, skipped = [], []
    for raw in _read(path):
        hardware, model, tp = raw["hardware"], raw["model"], int(raw["tensor_parallel"])
        if hardware not in SPLITWISE_GPUS:
            skipped.append(f"{hardware} rows: derived from the H100 rows (prompt time x 1.3)")
            continue
        if model not in SPLITWISE_MODELS:
            skipped.append(f"{model} rows: no shipped model spec")
            continue
        prompt, batch = float(raw["prompt_size"]), float(raw["batch_size"])
        common = {"model": SPLITWISE_MODELS[model], "tp": tp, "weight_dtype": "fp16",
                  "compute_dtype": "fp16", "kv_dtype": "fp16", "phase": "decode"}
        gpu = SPLITWISE_GPUS[hardware]
        if tp == 2 and batch == 64:  # decode too: 42 ms on H100 after 52 ms at batch 32
            skipped.append("TP2 batch-64 rows: inconsistent with TP4/TP8, prefill and "
                           "decode times both drop from batch 32 (a memory-capacity "
                           "effect; SOURCES.md)")
            continue
        rows.append(_row("step", gpu, float(raw["token_time"]) / 1e3, batch=batch,
                         context=prompt + float(raw["token_size"]) / 2, **common))
        rows.append(_row("step", gpu, float(raw["prompt_time"]) / 1e3, prefill=prompt,
                         prompts=batch, **{**common, "phase": "prefill"}))
    datasets = _group(
        rows, lambda r: (r["gpu"], r["model"], r["tp"], r["phase"]),
        lambda gpu, model, tp, phase: f"Splitwise {_gpu_label(gpu)} {model} TP{tp} {phase}",
        source, ["5 runs per configuration; FP16; engine not recorded"], helpers=("phase",))
    return Conversion(path, datasets, sorted(set(skipped)))


SARATHI_SOURCE = ("microsoft/sarathi-serve@ceaa066 osdi-experiments/ (Yi-34B TP2, "
                  "2x A100 80GB PCIe)")
SARATHI_NOTES = ["A100 80GB PCIe modelled with the a100-80gb (SXM) spec: 1.94 vs 2.04 TB/s",
                 "Yi-34B-200K has Yi-34B's shapes"]
SARATHI_CONTEXT = 1022  # requests of 1024 tokens at prefill:decode 255:1 (SOURCES.md)
SARATHI_ENGINE = {"engine": "sarathi-serve", "engine_version": "osdi-sarathi-serve@ceaa066"}


def convert_sarathi_batches(path: Path) -> Conversion:
    """Sarathi-Serve Fig. 2 (decode-only or prefill-only batches) and Table 2 (hybrid)."""
    rows = []
    hybrid = "linear_ms" in _header(path)
    for raw in _read(path):
        decodes = float(raw["batch_num_decode_tokens"])
        prefill = float(raw["batch_num_prefill_tokens"])
        seconds = (float(raw["batch_execution_time_s"]) if "batch_execution_time_s" in raw
                   else float(raw["batch_execution_time_ms"]) / 1e3)
        rows.append(_row("step", "a100-80gb", seconds, model="yi-34b", tp=2,
                         weight_dtype="fp16", compute_dtype="fp16", kv_dtype="fp16",
                         **SARATHI_ENGINE, batch=decodes,
                         context=SARATHI_CONTEXT if decodes else 0,
                         prefill=prefill, prompts=1 if prefill else 0))
    if hybrid:
        name, notes = "Sarathi Yi-34B TP2 hybrid batches", [
            "op-level CUDA timing adds overhead (decode-only 68 ms here vs 49 ms in Fig. 2)"]
    elif all(not row["prefill"] for row in rows):
        name, notes = "Sarathi Yi-34B TP2 decode", [f"decode context {SARATHI_CONTEXT}"]
    else:
        name, notes = "Sarathi Yi-34B TP2 prefill", ["the 256-token row is a probable outlier"]
    return Conversion(path, _group(rows, lambda r: (), lambda: name, SARATHI_SOURCE,
                                   SARATHI_NOTES + notes))


VIDUR_GPUS = {"a100": "a100-80gb", "h100": "h100-sxm"}
VIDUR_MODELS = {"meta-llama/Llama-2-7b-hf": "llama-2-7b",
                "meta-llama/Llama-2-70b-hf": "llama-2-70b",
                "meta-llama/Meta-Llama-3-8B": "llama-3-8b",
                "meta-llama/Meta-Llama-3-70B": "llama-3-70b"}


def convert_vidur(path: Path) -> Conversion:
    """vidur's per-op medians: the four weight GEMMs of one layer shard (fused QKV, O,
    fused gate+up, down) at tp 1-8 as GEMM rows, from the models' shapes; each op timed
    alone in eager PyTorch (CUDA events per op, no graphs)."""
    source = "microsoft/vidur@7d47513 data/profiling/compute/*/mlp.csv (medians)"
    rows, skipped, shapes = [], set(), {}
    for raw in _read(path):
        if raw["model"] not in VIDUR_MODELS:
            skipped.add(f"{raw['model']} rows: no shipped model spec")
            continue
        key = VIDUR_MODELS[raw["model"]]
        if key not in shapes:
            shapes[key] = load_model(key)
        model, tp, tokens = shapes[key], int(raw["tp"]), float(raw["num_tokens"])
        d, hd = model.hidden_size, model.head_dim
        kv = max(model.num_key_value_heads // tp, 1)
        heads = model.num_attention_heads // tp
        ffn = model.intermediate_size // tp
        for op, n, k in (("attn_pre_proj", (heads + 2 * kv) * hd, d),
                         ("attn_post_proj", d, heads * hd),
                         ("mlp_up_proj", 2 * ffn, d), ("mlp_down_proj", d, ffn)):
            rows.append(_row("gemm", VIDUR_GPUS[raw["gpu"]], float(raw[f"{op}_median_ms"]) / 1e3,
                             m=tokens, n=float(n), k=float(k), weight_dtype="fp16",
                             compute_dtype="fp16", engine="sarathi-serve (vidur branch)",
                             cuda_graphs="false"))
    return Conversion(path, _group(
        rows, lambda r: (r["gpu"],),
        lambda gpu: f"vidur {_gpu_label(gpu)} fp16 GEMMs (Llama shapes)", source,
        ["A100 variant not stated (modelled as a100-80gb)"]), sorted(skipped))


AIC_GPUS = {"H100-SXM": "h100-sxm", "H200-SXM": "h200"}
AIC_SOURCE = "ai-dynamo/aiconfigurator@095f58a systems/data (TensorRT-LLM 1.3.0rc20)"
# its collectors time TensorRT-LLM's ops replayed as CUDA graphs (SOURCES.md)
AIC_ENGINE = {"engine": "trtllm", "engine_version": "1.3.0rc20", "cuda_graphs": "true"}
# per-GPU (query heads, KV heads) of the subset -> (model, tp) with those shards
AIC_HEADS = {(32 // t, 32 // t): ("llama-2-7b", t) for t in (1, 2, 4, 8)}
AIC_HEADS |= {(32 // t, max(8 // t, 1)): ("llama-3-8b", t) for t in (1, 2, 4, 8)}
AIC_HEADS |= {(64 // t, max(8 // t, 1)): ("llama-3-70b", t) for t in (1, 2, 4, 8)}


def convert_aiconfigurator_gemm(path: Path) -> Conversion:
    """TensorRT-LLM's Linear: bf16, or fp8 weights multiplied in fp8 (activations
    quantised on the fly, inside the time)."""
    rows = []
    for raw in _read(path):
        dtype = dtype_name(raw["gemm_dtype"])
        rows.append(_row("gemm", AIC_GPUS[raw["gpu"]], float(raw["latency_ms"]) / 1e3,
                         m=float(raw["m"]), n=float(raw["n"]), k=float(raw["k"]),
                         weight_dtype=dtype, compute_dtype=dtype, **AIC_ENGINE))
    return Conversion(path, _group(
        rows, lambda r: (r["gpu"], r["compute_dtype"]),
        lambda gpu, dtype: f"aiconfigurator {_gpu_label(gpu)} {dtype} GEMM", AIC_SOURCE,
        ["CUDA graphs, cold L2; fp8 includes activation quantisation"]))


def convert_aiconfigurator_attention(path: Path) -> Conversion:
    """Decode (generation) or prefill (context) attention of one layer.

    A prefill with an fp8 KV cache is taken to run the fp8 FMHA whatever its `attn_dtype`
    says (the dataset keeps the label in its name): its times are within 5-10 % of the
    fp8-labelled rows' at every prompt length, and 0.67-0.78x the bf16 cache's at 4K-16K
    tokens, which a bf16 FMHA at 0.58 of the bf16 peak (the bf16 rows' fit) cannot be;
    TensorRT-LLM's paged context FMHA reads K and V from the fp8 cache in fp8."""
    decode = "kv_len_cached" in _header(path)
    rows = []
    for raw in _read(path):
        model, tp = AIC_HEADS[(int(raw["num_heads"]), int(raw["num_key_value_heads"]))]
        common = {"model": model, "tp": tp, "kv_dtype": dtype_name(raw["kv_cache_dtype"]),
                  **AIC_ENGINE}
        seconds = float(raw["latency_ms"]) / 1e3
        if decode:
            rows.append(_row("attention_decode", AIC_GPUS[raw["gpu"]], seconds,
                             weight_dtype="bf16", compute_dtype="bf16",
                             batch=float(raw["batch_size"]),
                             context=float(raw["kv_len_cached"]), **common))
        else:
            label = dtype_name(raw["attn_dtype"])
            dtype = "fp8" if common["kv_dtype"] == "fp8" else label  # the FMHA's format
            rows.append(_row("attention_prefill", AIC_GPUS[raw["gpu"]], seconds,
                             weight_dtype=dtype, compute_dtype=dtype, label=label,
                             prefill=float(raw["isl"]), prompts=float(raw["batch_size"]),
                             **common))
    phase = "decode" if decode else "prefill"
    return Conversion(path, _group(
        rows, lambda r: (r["gpu"], r.get("label", r["compute_dtype"]), r["kv_dtype"]),
        lambda gpu, dtype, kv: f"aiconfigurator {_gpu_label(gpu)} {phase} attention ("
                               + (f"{kv} KV)" if decode else f"{dtype}, {kv} KV)"),
        AIC_SOURCE, ["one layer; head shapes mapped to Llama models at tp 1-8"]
        + ([] if decode else ["an fp8 KV cache's prefill priced as the fp8 FMHA"]),
        helpers=() if decode else ("label",)))


def convert_aiconfigurator_allreduce(path: Path) -> Conversion:
    rows = []
    for raw in _read(path):
        dtype = dtype_name(raw["dtype"])
        element = {"fp16": 2, "bf16": 2, "int8": 1}[dtype]
        rows.append(_row("allreduce", AIC_GPUS[raw["gpu"]], float(raw["latency_ms"]) / 1e3,
                         tp=float(raw["num_gpus"]), weight_dtype=dtype,
                         bytes=float(raw["message_size"]) * element,
                         engine=raw["kernel_source"].lower(),
                         engine_version=raw["lib_version"]))
    return Conversion(path, _group(
        rows, lambda r: (r["gpu"], r["engine"]),
        lambda gpu, library: f"aiconfigurator {_gpu_label(gpu)} all-reduce "
                             f"({library.upper()})", AIC_SOURCE))


E2E_MODELS = {"meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
              "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b",
              "meta-llama/Llama-3.1-70B": "llama-3-70b",
              "Qwen/Qwen3-32B": "qwen3-32b"}


def convert_aiconfigurator_e2e(path: Path) -> Conversion:
    """End-to-end serving runs at a fixed concurrency and fixed ISL/OSL: each run's mean
    TTFT and TPOT as e2e rows (TPOT under continuous batching includes prefill
    interference: not a decode step, so only a replay through the simulator prices it).
    The weights' format is the run's quantisation mode, else its precision, else (the
    Llama-3.1-8B H100 TensorRT-LLM rows, the BF16 release) bf16; fp8 runs multiply in
    fp8."""
    rows, skipped = [], set()
    for raw in _read(path):
        if raw["model_path"] not in E2E_MODELS:
            skipped.add(f"{raw['model_path']} rows: no shipped model spec")
            continue
        if raw["pp_size"] != "1":
            skipped.add("pipeline-parallel rows")
            continue
        dtype = dtype_name(raw["gemm_quant_mode"] or raw["precision"] or "bf16")
        gpu = {"h100_sxm": "h100-sxm", "h200_sxm": "h200"}[raw["system"]]
        run = {"model": E2E_MODELS[raw["model_path"]], "tp": float(raw["tp_size"]),
               "weight_dtype": dtype, "compute_dtype": dtype, "kv_dtype": "bf16",
               "engine": raw["backend"], "engine_version": raw["backend_version"],
               "isl": float(raw["isl"]), "osl": float(raw["osl"]),
               "concurrency": float(raw["silicon_concurrency"] or raw["batch_size"])}
        for kind, column in (("e2e_ttft", "silicon_ttft_ms"), ("e2e_tpot", "silicon_tpot_ms")):
            if raw[column]:
                rows.append(_row(kind, gpu, float(raw[column]) / 1e3, **run))
    return Conversion(path, _group(
        rows, lambda r: (r["gpu"], r["model"], r["engine"], r["kind"]),
        lambda gpu, model, engine, kind: (f"aiconfigurator {_gpu_label(gpu)} {model} {engine} "
                                          f"{kind.removeprefix('e2e_').upper()}"),
        "ai-dynamo/aiconfigurator@095f58a silicon_sample.csv",
        ["fixed ISL/OSL at a fixed client concurrency; TPOT under continuous batching "
         "includes prefill interference; a very large TTFT marks a queued (overloaded) run",
         "KV-cache format not recorded (bf16 assumed)",
         "Llama-3.1-70B modelled with llama-3-70b's shapes (identical)"]), sorted(skipped))


LLMCOMPASS_SOURCE = "PrincetonUniversity/LLMCompass@2e015fd ae/figure5 (A100 80GB, fp16)"
# its run_on_gpu (software_model/matmul.py) times each op eagerly with time.time() around
# the launch and torch.cuda.synchronize(): the median of host-clock times
LLMCOMPASS_TIMING = {"engine": "PyTorch (LLMCompass)", "cuda_graphs": "false",
                     "timer": "host_clock"}


def convert_llmcompass_matmul(path: Path) -> Conversion:
    rows = [_row("gemm", "a100-80gb", float(r["latency_ms"]) / 1e3, m=float(r["M"]),
                 n=float(r["N"]), k=float(r["K"]), weight_dtype="fp16",
                 compute_dtype="fp16", **LLMCOMPASS_TIMING) for r in _read(path)]
    return Conversion(path, _group(rows, lambda r: (), lambda: "LLMCompass A100 fp16 GEMM",
                                   LLMCOMPASS_SOURCE))


def convert_llmcompass_layer(path: Path) -> Conversion:
    """One GPT-3-175B layer at TP4 (d = 12288): its four weight GEMMs and two
    all-reduces, prefill (8 x 2048 tokens) and decode (8 tokens). The attention ops need
    a GPT-3 model spec, which is not shipped."""
    d, tp = 12288, 4
    shapes = {"Q_K_V": (3 * d // tp, d), "Wo_proj": (d, d // tp),
              "W1_proj": (4 * d // tp, d), "W2_proj": (d, 4 * d // tp)}
    rows = []
    for raw in _read(path):
        for column, tokens in (("prefill_bs8_seq2048_latency_s", 8 * 2048),
                               ("decode_bs8_kv3072_latency_s", 8)):
            seconds = float(raw[column])
            if raw["op"] in shapes:
                n, k = shapes[raw["op"]]
                rows.append(_row("gemm", "a100-80gb", seconds, m=float(tokens), n=float(n),
                                 k=float(k), weight_dtype="fp16", compute_dtype="fp16",
                                 **LLMCOMPASS_TIMING))
            elif raw["op"].startswith("AllReduce"):
                rows.append(_row("allreduce", "a100-80gb", seconds, tp=float(tp),
                                 weight_dtype="fp16", bytes=float(tokens * d * 2),
                                 engine=LLMCOMPASS_TIMING["engine"]))
    return Conversion(path, _group(rows, lambda r: (),
                                   lambda: "LLMCompass A100 GPT-3 layer TP4 ops",
                                   LLMCOMPASS_SOURCE),
                      ["Q_mul_K, A_mul_V, softmax, norms, GeLU: no GPT-3 model spec"])


def _not_converted(reason: str) -> Callable[[Path], Conversion]:
    return lambda path: Conversion(path, [], [reason])


# header signature (a few columns that only that format has) -> converter
CONVERTERS: list[tuple[set[str], Callable[[Path], Conversion]]] = [
    ({"kind", "gpu", "time_s"}, read_calibration_csv),
    ({"hardware", "prompt_time", "token_time"}, convert_splitwise),
    ({"batch_num_decode_tokens", "batch_num_prefill_tokens"}, convert_sarathi_batches),
    ({"prefill_length", "chunk_size"}, _not_converted(
        "chunked prefills summed over chunks: not single steps")),
    ({"a_ms", "b_ms", "c_ms"}, _not_converted(
        "fitted coefficients for OPT models: no shipped OPT model specs")),
    ({"attn_pre_proj_median_ms", "mlp_up_proj_median_ms"}, convert_vidur),
    ({"gemm_dtype", "latency_ms"}, convert_aiconfigurator_gemm),
    ({"kv_len_cached", "num_key_value_heads"}, convert_aiconfigurator_attention),
    ({"isl", "num_key_value_heads", "attn_dtype"}, convert_aiconfigurator_attention),
    ({"message_size", "num_gpus"}, convert_aiconfigurator_allreduce),
    ({"silicon_tpot_ms", "tp_size"}, convert_aiconfigurator_e2e),
    ({"M", "N", "K", "latency_ms"}, convert_llmcompass_matmul),
    ({"op", "prefill_bs8_seq2048_latency_s"}, convert_llmcompass_layer),
    ({"benchmark", "scenario", "metric", "value"}, _not_converted(
        "MLPerf served throughput under latency limits: not step or kernel times")),
    ({"metric", "value", "doc_version"}, _not_converted(
        "throughput tables of whole runs: not step or kernel times")),
]


def read_measured(path: Path) -> Conversion:
    """Datasets in one file: the calibration format or a recognised published format."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"measured file not found: {path}")
    if path.suffix.lower() in (".json", ".jsonl"):
        _refuse_benchmark_result(path)
    header = set(_header(path))
    for columns, converter in CONVERTERS:
        if columns <= header:
            return converter(path)
    raise SpecError(f"{path}: not the calibration format (columns kind, gpu, time_s, ...) "
                    "nor a recognised measured format")


def _refuse_benchmark_result(path: Path) -> None:
    """A serving benchmark's result file records client-side TTFT/TPOT under load, not
    kernel or step times, and neither the GPU nor the TP: it is replayed through the
    simulator by `sweep replay`, which fits an engine profile from it."""
    from rooftui.sweeps.bench_results import read_benchmark  # only for JSON inputs

    runs = read_benchmark(path)
    raise SpecError(
        f"{path}: a {runs[0].tool} result file ({len(runs)} run(s)) holds end-to-end "
        f"latencies under load, which are replayed through the simulator: sweep replay "
        f"{path} --model MODEL --gpu GPU --tp N (add --fit --out PROFILE.toml to fit an "
        "engine profile from it)")


def read_measured_paths(paths: list[Path]) -> list[Conversion]:
    """Every file given, and every *.csv in each folder given, sorted by name."""
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            files.extend(sorted(path.glob("*.csv")))
        else:
            files.append(path)
    if not files:
        raise SpecError(f"no CSV files in {', '.join(map(str, paths))}")
    return [read_measured(path) for path in files]


# --- from rows to the core's arrays -----------------------------------------------

def _gpu_label(key: str) -> str:
    return {"h100-sxm": "H100", "a100-80gb": "A100", "h200": "H200"}.get(key, key)


def _normalised(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def gpu_matches(row_gpu: str, spec_name: str, gpu: GPU) -> bool:
    """Whether a row's `gpu` names this spec: its shipped name, file stem or display name."""
    names = {spec_name, Path(spec_name).stem, gpu.name, gpu.key}
    return _normalised(row_gpu) in {_normalised(str(n)) for n in names if n}


def to_measurements(rows: list[dict], dataset_names: list[str] | None = None) -> Measurements:
    """Core arrays from calibration-format rows (models loaded by name or path), with the
    defaults of the module docstring for empty columns."""
    if not rows:
        raise SpecError("no measured rows to use")
    model_names = sorted({row["model"] for row in rows if row.get("model")})
    models = tuple(load_model(name) for name in model_names)
    datasets = dataset_names or sorted({row["dataset"] for row in rows})

    def column(name, default=0.0):
        return np.array([float(default if row.get(name) in (None, "") else row[name])
                         for row in rows])

    prefill = column("prefill")
    prompts = np.array([float(row["prompts"]) if row.get("prompts") not in (None, "")
                        else float(prefill[i] > 0) for i, row in enumerate(rows)])
    rows = [_current_names(row) for row in rows]
    dtypes = [row.get("weight_dtype") or "bf16" for row in rows]
    kv_dtypes = [row.get("kv_dtype") or ("fp16" if d == "fp16" else "bf16")
                 for d, row in zip(dtypes, rows, strict=True)]
    kind = np.array([KINDS.index(row["kind"]) for row in rows])
    weights = np.array([dtype_code(d) for d in dtypes])
    compute = np.array([dtype_code(row["compute_dtype"]) if row.get("compute_dtype")
                        else default for row, default in zip(
                            rows, default_compute_dtypes(kind, weights), strict=True)])
    experts = np.array([dtype_code(row["expert_dtype"]) if row.get("expert_dtype")
                        else weight for row, weight in zip(rows, weights, strict=True)])
    return Measurements(
        kind=kind,
        model=np.array([model_names.index(row["model"]) if row.get("model") else -1
                        for row in rows]),
        models=models,
        tp=column("tp", 1.0),
        batch=column("batch"),
        context=column("context"),
        prefill=prefill,
        prefill_context=column("prefill_context"),
        prompts=prompts,
        m=column("m"),
        n=column("n"),
        k=column("k"),
        message_bytes=column("bytes"),
        dtype=weights,
        kv_dtype=np.array([dtype_code(d) for d in kv_dtypes]),
        time_s=column("time_s"),
        dataset=np.array([datasets.index(row["dataset"]) for row in rows]),
        datasets=tuple(datasets),
        compute_dtype=compute,
        expert_dtype=experts,
        isl=column("isl"),
        osl=column("osl"),
        concurrency=column("concurrency"),
        request_rate=column("request_rate"),
        num_prompts=column("num_prompts"),
        timer=np.array([TIMERS.index("cuda_graph") if row.get("cuda_graphs") == "true"
                        else TIMERS.index(row.get("timer") or "cuda_events") for row in rows]),
        library=np.array([collective_library_code(row["engine"])
                          if row["kind"] == "allreduce" and row.get("engine") in
                          COLLECTIVE_TABLES else 0 for row in rows], dtype=np.int64),
    )
