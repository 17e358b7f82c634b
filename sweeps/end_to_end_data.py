"""The published end-to-end runs `sweep replay --measured-dir` replays (`measured_runs`),
as `sweeps.bench_results.Run`s with the model, GPU and engine each is replayed on.

The files read:
- `aiconfigurator-silicon-e2e-dense-h100-h200.csv`: 778 runs of TRT-LLM, vLLM and SGLang
  on H100/H200, fixed ISL/OSL, client concurrency = batch_size; replayed with one
  warm-up request per slot and `SILICON_WAVES` x concurrency scored ones (the counts are
  not recorded). Overloaded runs
  (30-60 s TTFT) are kept: the simulator queues them too.
- Splitwise (`splitwise-perf-model-a100-h100.csv`): static batches of B requests, one
  prefill step then decode (`prompt_time` is TTFT, `token_time` TPOT); replayed with the
  static policy; the derived `h100-80gb-pcap` rows and the suspect TP2 batch-64 rows are
  left out (SOURCES.md).
Not replayed, and why:
- MLPerf v4.0 Llama-2-70B Server/Offline: the file gives tokens/s under latency limits
  but not the request rate or lengths the scheduler ran (OpenOrca's per-sample lengths
  are not in it), so a replay would be fitted to the figure it predicts;
- TensorRT-LLM perf tables: static-batch and max-throughput figures of whole runs
  without the batch composition over time (v1.0 max-throughput batches "whatever fits");
  the static-batch rows are Llama-1/2, GPT-J and Falcon checkpoints of which only
  Llama-2 has a shipped spec, on FP8 engines of 2023 (v0.5/v0.6) — a different engine
  generation from every profile here; left for a later pass.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rooftui.core.errors import SpecError
from rooftui.sweeps.bench_results import Run, Stat
from rooftui.sweeps.end_to_end import Scheduling, Target
from rooftui.sweeps.measured import _read as _csv_rows  # one CSV reader, one error line

# scored requests per client slot in a silicon run, after one warm-up request a slot
# (neither count is recorded: AIPerf, its harness, leaves warm-up requests out)
SILICON_WAVES = 3
SILICON_FILE = "aiconfigurator-silicon-e2e-dense-h100-h200.csv"
SPLITWISE_FILE = "splitwise-perf-model-a100-h100.csv"
SILICON_MODELS = {"meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
                  "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b",
                  "meta-llama/Llama-3.1-70B": "llama-3-70b", "Qwen/Qwen3-32B": "qwen3-32b"}
SILICON_GPUS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200"}


def silicon_runs(path: Path) -> tuple[list[Run], list[Target], list[str]]:
    """The aiconfigurator silicon runs as closed loops (module doc)."""
    runs, targets, skipped = [], [], set()
    for row in _csv_rows(path):
        if row["model_path"] not in SILICON_MODELS or row["pp_size"] != "1":
            skipped.add(f"{row['model_path']} pp {row['pp_size']}: no model spec or PP")
            continue
        concurrency = int(row["batch_size"])
        isl, osl = float(row["isl"]), float(row["osl"])
        dtype = (row["gemm_quant_mode"] or row["precision"] or "bf16").replace("_block", "")
        runs.append(Run(
            tool="aiconfigurator-silicon", source=f"{path.name}:{row['id']}",
            model=row["model_path"], engine=row["backend"],
            engine_version=row["backend_version"] or None, gpu=row["system"],
            tp=int(row["tp_size"]), concurrency=concurrency, warmup_requests=concurrency,
            requests=SILICON_WAVES * concurrency, input_mean=isl, output_mean=osl,
            ttft=Stat(mean=float(row["silicon_ttft_ms"]) / 1e3),
            tpot=Stat(mean=float(row["silicon_tpot_ms"]) / 1e3)))
        # TensorRT-LLM's FP8 checkpoints (ModelOpt) quantise the KV cache too; vLLM and
        # SGLang keep it in the activations' dtype unless told otherwise
        kv = "fp8" if row["backend"] == "trtllm" and dtype == "fp8" else None
        targets.append(Target(SILICON_MODELS[row["model_path"]], SILICON_GPUS[row["system"]],
                              int(row["tp_size"]), dtype, row["backend"], kv))
    return runs, targets, sorted(skipped)


SPLITWISE_GPUS = {"a100-80gb": "a100-80gb", "h100-80gb": "h100-sxm"}


def splitwise_runs(path: Path) -> tuple[list[Run], list[Target], list[str]]:
    """Splitwise's static batches, the median of each configuration's repeats."""
    by_config: dict[tuple, list[dict]] = {}
    skipped = {"h100-80gb-pcap rows: derived from the H100 rows, not measured",
               "TP2 batch-64 rows: inconsistent with TP4/TP8 (SOURCES.md)",
               "bloom-176b rows: no shipped model spec"}
    for row in _csv_rows(path):
        if row["hardware"] not in SPLITWISE_GPUS or row["model"] != "llama2-70b" or (
                row["tensor_parallel"] == "2" and row["batch_size"] == "64"):
            continue
        key = tuple(row[k] for k in ("hardware", "tensor_parallel", "batch_size",
                                     "prompt_size", "token_size"))
        by_config.setdefault(key, []).append(row)
    runs, targets = [], []
    for (hardware, tp, batch, prompt, tokens), rows in sorted(by_config.items()):
        ttft = float(np.median([float(r["prompt_time"]) for r in rows])) / 1e3
        tpot = float(np.median([float(r["token_time"]) for r in rows])) / 1e3
        runs.append(Run(tool="splitwise", source=f"{path.name}:{hardware} tp{tp} b{batch} "
                        f"{prompt}/{tokens}", model="llama2-70b", engine="splitwise",
                        gpu=hardware, tp=int(tp), concurrency=int(batch), requests=int(batch),
                        input_mean=float(prompt), output_mean=float(tokens),
                        ttft=Stat(mean=ttft), tpot=Stat(mean=tpot)))
        targets.append(Target("llama-2-70b", SPLITWISE_GPUS[hardware], int(tp), "fp16",
                              "splitwise"))
    return runs, targets, sorted(skipped)


MEASURED_READERS = {SILICON_FILE: (silicon_runs, None),  # each engine's policy
                    SPLITWISE_FILE: (splitwise_runs, "static")}


def measured_runs(folder: Path, engine: str | None = None
                  ) -> tuple[list[Run], list[Target], list[Scheduling], list[str]]:
    """The replayable end-to-end runs in MEASURED_DIR (module doc), of one engine if
    given."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SpecError(f"--measured-dir: {folder} is not a folder")
    runs, targets, scheduling, notes = [], [], [], []
    for name, (reader, policy) in MEASURED_READERS.items():
        path = folder / name
        if not path.is_file():
            notes.append(f"{name}: not in {folder}")
            continue
        file_runs, file_targets, skipped = reader(path)
        if engine is not None:
            keep = [i for i, t in enumerate(file_targets) if t.engine == engine]
            file_runs, file_targets = [file_runs[i] for i in keep], [file_targets[i] for i in keep]
        runs += file_runs
        targets += file_targets
        scheduling += [Scheduling(policy=policy)] * len(file_runs)
        notes += [f"{name}: left out {reason}" for reason in skipped]
    if not runs:
        raise SpecError(f"--measured-dir {folder}: no runs" + (f" of {engine}" if engine else "")
                        + f" in {', '.join(MEASURED_READERS)}")
    return runs, targets, scheduling, notes
