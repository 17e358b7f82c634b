"""Readers of the result files serving benchmarks write, into one record per run (`Run`).

Formats, told apart by their content (`--format` overrides; tests/data/bench_results/
README.md says which tool version each fixture follows):

- `vllm`: `vllm bench serve --save-result` (also `benchmarks/benchmark_serving.py`): one
  JSON object, times in ms (`mean_ttft_ms`, `median_tpot_ms`, `p99_itl_ms`, ...) and,
  per request, `input_lens`, `output_lens`, `ttfts` (s) and `itls` (s);
  `max_concurrency` and `request_rate` ("inf" when all requests are sent at once);
- `sglang`: `python -m sglang.bench_serving --output-file X.jsonl`: one JSON object per
  line and run (a file appended to by several runs), `mean_e2e_latency_ms` where vLLM
  writes `mean_e2el_ms`; per-request lists with `--output-details`;
- `guidellm`: GuideLLM's report (`guidellm benchmark --output-path x.json`): a
  `benchmarks` list, each with `args.strategy` (synchronous, concurrent with `streams`,
  constant or poisson with `rate`, throughput), `metrics.<name>.successful` summaries
  (`mean`, `median`, `percentiles.p99`; TTFT/TPOT/ITL in ms, `request_latency` in s)
  and `requests.successful` (per-request `prompt_tokens`, `output_tokens`);
- `genai-perf`: `profile_export_genai_perf.json`: metrics as `{unit, avg, p50, p99,
  ...}`, `input_config` flat (`model`, `concurrency`, `request_rate`,
  `warmup_request_count`, `synthetic_input_tokens_mean`, `output_tokens_mean`);
- `aiperf`: AIPerf's `profile_export_aiperf.json`: the same metric objects,
  `input_config` nested (`endpoint.model_names`, `loadgen.concurrency`,
  `loadgen.warmup_request_count`, `input.conversation.num`), written without the
  options left at their defaults.
Both tools send their warm-up requests first and leave them out of every statistic: a
run keeps their count (`Run.warmup_requests`) so a replay sends them first too. Both
also draw every request's prompt at random from a small synthetic dataset (genai-perf's
`--num-dataset-entries`, AIPerf's `--num-dataset-entries`/`--conversation-num`, 100 by
default: `ConversationDefaults.NUM` in ai-dynamo/aiperf, "reused until benchmarking is
complete"), so a later request repeats an earlier prompt and an engine's prefix cache
can hit it whole: a run keeps that count (`Run.prompt_pool`) unless its prompts came
from a file or a public dataset. vLLM's, SGLang's and GuideLLM's synthetic prompts are
drawn afresh per request (None).

genai-perf and AIPerf call TPOT "inter_token_latency" ((latency - TTFT) / (output - 1)
per request, averaged): it is read as TPOT; their `inter_chunk_latency`, where present,
is the ITL. Every time is returned in seconds, throughputs per second.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rooftui.core.errors import SpecError

FORMATS = ("vllm", "sglang", "guidellm", "genai-perf", "aiperf")


@dataclass(frozen=True)
class Stat:
    """A latency's summary over a run's requests (seconds); None where not recorded."""

    mean: float | None = None
    median: float | None = None
    p99: float | None = None

    def as_dict(self) -> dict:
        return {"mean": self.mean, "median": self.median, "p99": self.p99}


@dataclass(frozen=True)
class Run:
    """One benchmark run: the workload as the client ran it, and what it measured.

    `concurrency` is the client's limit on requests in flight (a closed loop), and
    `request_rate` its open-loop rate (req/s; None or inf: all sent at once).
    `warmup_requests` were sent first on the same client slots and are not in its
    statistics (`requests` counts the scored ones). Lengths are tokens; the per-request
    arrays are None where the file has none."""

    tool: str
    source: str  # file, and the run's place in it
    model: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    gpu: str | None = None
    tp: int | None = None
    concurrency: int | None = None
    request_rate: float | None = None
    requests: int = 0
    warmup_requests: int = 0
    input_mean: float = 0.0
    output_mean: float = 0.0
    input_tokens: np.ndarray | None = field(default=None, compare=False)
    output_tokens: np.ndarray | None = field(default=None, compare=False)
    ttft: Stat = Stat()
    tpot: Stat = Stat()
    itl: Stat = Stat()
    request_throughput: float | None = None  # requests/s
    output_throughput: float | None = None  # output tokens/s
    duration_s: float | None = None
    # distinct prompts every request's was drawn from, uniformly at random (module doc);
    # None: each request its own prompt, or not known
    prompt_pool: int | None = None

    def summary(self) -> dict:
        """The record as plain values (`--json`), without the per-request arrays."""
        return {
            "tool": self.tool, "source": self.source, "model": self.model,
            "engine": self.engine, "engine_version": self.engine_version, "gpu": self.gpu,
            "tp": self.tp, "concurrency": self.concurrency, "request_rate": self.request_rate,
            "requests": self.requests, "warmup_requests": self.warmup_requests,
            "input_mean_tokens": self.input_mean,
            "output_mean_tokens": self.output_mean,
            "per_request_lengths": self.input_tokens is not None,
            "ttft_s": self.ttft.as_dict(), "tpot_s": self.tpot.as_dict(),
            "itl_s": self.itl.as_dict(), "request_throughput": self.request_throughput,
            "output_throughput_tokens_per_s": self.output_throughput,
            "duration_s": self.duration_s, "prompt_pool": self.prompt_pool,
        }


# --- values ----------------------------------------------------------------------------

def _number(value, where: str, name: str) -> float | None:
    """A finite number >= 0, or None when absent; "inf" is kept (a request rate)."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise SpecError(f"{where}: {name} must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SpecError(f"{where}: {name} must be a number, got {value!r}") from None
    if math.isnan(number) or number < 0 or (math.isinf(number) and name != "request_rate"):
        raise SpecError(f"{where}: {name} must be a finite number >= 0, got {value!r}")
    return number


def _whole(value, where: str, name: str) -> int | None:
    number = _number(value, where, name)
    if number is None:
        return None
    if number != int(number) or number < 1:
        raise SpecError(f"{where}: {name} must be a whole number >= 1, got {value!r}")
    return int(number)


def _warmup(config: dict, where: str) -> int:
    """Warm-up requests the client sent first and left out (genai-perf, AIPerf)."""
    value = config.get("warmup_request_count")
    return 0 if value in (None, 0) else _whole(value, where, "warmup_request_count")


def _ms(value, where: str, name: str) -> float | None:
    number = _number(value, where, name)
    return None if number is None else number / 1e3


def _lengths(values, where: str, name: str) -> np.ndarray | None:
    if values is None:
        return None
    if not isinstance(values, list) or not values:
        raise SpecError(f"{where}: {name} must be a non-empty list of token counts")
    lengths = np.array([_number(v, where, name) for v in values], dtype=np.float64)
    if np.any(lengths != np.rint(lengths)):
        raise SpecError(f"{where}: {name} must hold whole token counts")
    return lengths.astype(np.int64)


def _rate(value, where: str) -> float | None:
    rate = _number(value, where, "request_rate")
    return None if rate is None or math.isinf(rate) else rate


def _table(data, where: str) -> dict:
    if not isinstance(data, dict):
        raise SpecError(f"{where}: expected a JSON object, got {type(data).__name__}")
    return data


# --- vLLM and SGLang -------------------------------------------------------------------

def _successful(data: dict, where: str, lengths: str) -> tuple[np.ndarray | None, ...]:
    """Per-request input and output lengths of the requests that succeeded (vLLM and
    SGLang list every request, a failed one with output length 0)."""
    inputs = _lengths(data.get("input_lens"), where, "input_lens")
    outputs = _lengths(data.get(lengths), where, lengths)
    if inputs is None or outputs is None:
        return None, None
    if inputs.size != outputs.size:
        raise SpecError(f"{where}: input_lens and {lengths} differ in length")
    done = outputs > 0
    return inputs[done], outputs[done]


def _latencies(data: dict, where: str, metric: str) -> Stat:
    return Stat(*(_ms(data.get(f"{stat}_{metric}_ms"), where, f"{stat}_{metric}_ms")
                  for stat in ("mean", "median", "p99")))


# a client `backend` that names the server engine (vLLM's "openai" does not)
CLIENT_ENGINES = {"vllm": "vllm", "sglang": "sglang", "sglang-native": "sglang",
                  "sglang-oai": "sglang", "tensorrt-llm": "trtllm", "trt": "trtllm"}


def _client_run(data: dict, where: str, tool: str, lengths: str) -> Run:
    """A vLLM or SGLang result object (the two share most names)."""
    inputs, outputs = _successful(data, where, lengths)
    requests = _whole(data.get("completed"), where, "completed")
    if requests is None:
        raise SpecError(f"{where}: no `completed` request count: not a {tool} result")
    total_in = _number(data.get("total_input_tokens"), where, "total_input_tokens")
    total_out = _number(data.get("total_output_tokens"), where, "total_output_tokens")
    if total_in is None or total_out is None:
        raise SpecError(f"{where}: total_input_tokens and total_output_tokens are needed")
    info = data.get("server_info") if isinstance(data.get("server_info"), dict) else {}
    return Run(
        tool=tool, source=where,
        model=data.get("model_id") or info.get("model_path") or data.get("model"),
        engine=data.get("engine") or CLIENT_ENGINES.get(str(data.get("backend", "")).lower()),
        engine_version=data.get("engine_version") or info.get("version"),
        gpu=data.get("gpu"), tp=_whole(data.get("tp") or info.get("tp_size"), where, "tp"),
        concurrency=_whole(data.get("max_concurrency"), where, "max_concurrency"),
        request_rate=_rate(data.get("request_rate"), where), requests=requests,
        input_mean=total_in / requests, output_mean=total_out / requests,
        input_tokens=inputs, output_tokens=outputs,
        ttft=_latencies(data, where, "ttft"), tpot=_latencies(data, where, "tpot"),
        itl=_latencies(data, where, "itl"),
        request_throughput=_number(data.get("request_throughput"), where,
                                   "request_throughput"),
        output_throughput=_number(data.get("output_throughput"), where, "output_throughput"),
        duration_s=_number(data.get("duration"), where, "duration"))


def read_vllm(data, where: str) -> list[Run]:
    return [_client_run(_table(data, where), where, "vllm", "output_lens")]


def read_sglang(objects: list, where: str) -> list[Run]:
    return [_client_run(_table(item, f"{where} line {line}"), f"{where} line {line}",
                        "sglang", "output_lens")
            for line, item in enumerate(objects, 1)]


# --- GuideLLM --------------------------------------------------------------------------

def _summary(metrics: dict, name: str, where: str, scale: float) -> Stat:
    """`metrics[name].successful` as a Stat, times scaled to seconds."""
    summary = metrics.get(name, {})
    summary = summary.get("successful", {}) if isinstance(summary, dict) else {}
    if not isinstance(summary, dict):
        raise SpecError(f"{where}: metrics.{name}.successful must be an object")
    percentiles = summary.get("percentiles") or {}
    values = [summary.get("mean"), summary.get("median"), percentiles.get("p99")]
    numbers = [_number(v, where, f"metrics.{name}") for v in values]
    return Stat(*(None if v is None else v * scale for v in numbers))


def _guidellm_benchmark(item, where: str) -> Run:
    item = _table(item, where)
    metrics = _table(item.get("metrics"), f"{where} metrics")
    strategy = (item.get("args") or {}).get("strategy") or {}
    kind = strategy.get("type_")
    concurrency = rate = None
    if kind == "synchronous":
        concurrency = 1
    elif kind == "concurrent":
        concurrency = _whole(strategy.get("streams"), where, "strategy.streams")
    elif kind in ("constant", "poisson"):
        rate = _rate(strategy.get("rate"), where)
    elif kind != "throughput":
        raise SpecError(f"{where}: unknown GuideLLM strategy {kind!r}: expected synchronous, "
                        "concurrent, constant, poisson or throughput")
    done = (item.get("requests") or {}).get("successful") or []
    if not isinstance(done, list) or not all(isinstance(r, dict) for r in done):
        raise SpecError(f"{where}: requests.successful must be a list of objects")
    inputs = _lengths([r.get("prompt_tokens") for r in done], where, "prompt_tokens") \
        if done else None
    outputs = _lengths([r.get("output_tokens") for r in done], where, "output_tokens") \
        if done else None
    latency = _summary(metrics, "request_latency", where, 1.0)
    prompt = _summary(metrics, "prompt_token_count", where, 1.0)
    output = _summary(metrics, "output_token_count", where, 1.0)
    requests = len(done) or _whole(
        ((metrics.get("request_latency") or {}).get("successful") or {}).get("count"),
        where, "metrics.request_latency.successful.count")
    if not requests or prompt.mean is None or output.mean is None or latency.mean is None:
        raise SpecError(f"{where}: no successful requests with prompt and output token counts")
    worker = item.get("worker") or {}
    start, end = (_number(item.get(k), where, k) for k in ("start_time", "end_time"))
    return Run(
        tool="guidellm", source=where, model=worker.get("backend_model"),
        concurrency=concurrency, request_rate=rate,
        requests=requests, input_mean=prompt.mean, output_mean=output.mean,
        input_tokens=inputs, output_tokens=outputs,
        ttft=_summary(metrics, "time_to_first_token_ms", where, 1e-3),
        tpot=_summary(metrics, "time_per_output_token_ms", where, 1e-3),
        itl=_summary(metrics, "inter_token_latency_ms", where, 1e-3),
        request_throughput=_summary(metrics, "requests_per_second", where, 1.0).mean,
        output_throughput=_summary(metrics, "output_tokens_per_second", where, 1.0).mean,
        duration_s=None if start is None or end is None else end - start)


def read_guidellm(data, where: str) -> list[Run]:
    benchmarks = _table(data, where).get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks:
        raise SpecError(f"{where}: `benchmarks` must be a non-empty list")
    return [_guidellm_benchmark(item, f"{where} benchmark {i}")
            for i, item in enumerate(benchmarks, 1)]


# --- genai-perf and AIPerf -------------------------------------------------------------

UNIT_SECONDS = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "us": 1e-6, "ns": 1e-9}


def _metric(data: dict, name: str, where: str) -> Stat:
    """A `{unit, avg, p50, p99}` metric object; times in seconds, other units as they are."""
    metric = data.get(name)
    if metric is None:
        return Stat()
    if not isinstance(metric, dict):
        raise SpecError(f"{where}: {name} must be an object with unit, avg, p50, ...")
    unit = str(metric.get("unit", ""))
    scale = UNIT_SECONDS.get(unit, 1.0)
    values = (_number(metric.get(key), where, f"{name}.{key}") for key in ("avg", "p50", "p99"))
    return Stat(*(None if v is None else v * scale for v in values))


# genai-perf's and AIPerf's synthetic datasets: --num-dataset-entries' default (module doc)
SYNTHETIC_PROMPTS = 100


def _prompt_pool(entries, own_prompts: bool, where: str, name: str) -> int | None:
    """The synthetic dataset's size (module doc); None when the prompts came from a file
    or a public dataset (`own_prompts`)."""
    if own_prompts:
        return None
    return SYNTHETIC_PROMPTS if entries is None else _whole(entries, where, name)


def _perf_run(data: dict, where: str, tool: str, model, concurrency, rate, requests,
              warmup, prompt_pool: int | None) -> Run:
    inputs = _metric(data, "input_sequence_length", where).mean
    outputs = _metric(data, "output_sequence_length", where).mean
    if inputs is None or outputs is None:
        raise SpecError(f"{where}: input_sequence_length and output_sequence_length are "
                        "needed (the run's prompt and output lengths)")
    throughput = _metric(data, "request_throughput", where).mean
    duration = _metric(data, "benchmark_duration", where).mean
    if requests is None and throughput and duration:
        requests = round(throughput * duration)
    if not requests:
        raise SpecError(f"{where}: no request count (request_count, or request_throughput "
                        "and benchmark_duration)")
    models = model if isinstance(model, list) else [model]
    return Run(
        tool=tool, source=where, model=models[0] if models else None,
        engine=data.get("engine"), concurrency=concurrency, request_rate=rate,
        requests=int(requests), warmup_requests=warmup, input_mean=inputs,
        output_mean=outputs, ttft=_metric(data, "time_to_first_token", where),
        tpot=_metric(data, "inter_token_latency", where),
        itl=_metric(data, "inter_chunk_latency", where),
        request_throughput=throughput,
        output_throughput=_metric(data, "output_token_throughput", where).mean,
        duration_s=duration, prompt_pool=prompt_pool)


def read_genai_perf(data, where: str) -> list[Run]:
    data = _table(data, where)
    config = _table(data.get("input_config", {}), f"{where} input_config")
    count = config.get("request_count") or None
    own_prompts = bool(config.get("input_file") or config.get("input_dataset"))
    return [_perf_run(data, where, "genai-perf", config.get("model"),
                      _whole(config.get("concurrency"), where, "concurrency"),
                      _rate(config.get("request_rate"), where),
                      _whole(count, where, "request_count"),
                      _warmup(config, where),
                      _prompt_pool(config.get("num_dataset_entries"), own_prompts, where,
                                   "num_dataset_entries"))]


def read_aiperf(data, where: str) -> list[Run]:
    data = _table(data, where)
    config = _table(data.get("input_config", {}), f"{where} input_config")
    endpoint = _table(config.get("endpoint", {}), f"{where} input_config.endpoint")
    loadgen = _table(config.get("loadgen", {}), f"{where} input_config.loadgen")
    inputs = _table(config.get("input", {}), f"{where} input_config.input")
    conversation = _table(inputs.get("conversation", {}),
                          f"{where} input_config.input.conversation")
    count = _metric(data, "request_count", where).mean
    return [_perf_run(data, where, "aiperf", endpoint.get("model_names"),
                      _whole(loadgen.get("concurrency"), where, "concurrency"),
                      _rate(loadgen.get("request_rate"), where),
                      None if count is None else _whole(count, where, "request_count"),
                      _warmup(loadgen, where),
                      _prompt_pool(conversation.get("num"),
                                   bool(inputs.get("file") or inputs.get("public_dataset")),
                                   where, "input.conversation.num"))]


# --- detection -------------------------------------------------------------------------

def _json_objects(text: str, where: str) -> tuple[object, list | None]:
    """(the file as one JSON value, or None; its lines as JSON values, or None)."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError:
        pass
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        return None, [json.loads(line) for line in lines]
    except json.JSONDecodeError as error:
        raise SpecError(f"{where}: not JSON nor JSON lines ({error.msg} at line "
                        f"{error.lineno}): is it a benchmark result file?") from None


def detect_format(value) -> str | None:
    """The format of a parsed result (a JSON value), from the keys only it has."""
    if isinstance(value, list):
        return "sglang" if value and all(isinstance(v, dict) for v in value) and (
            "mean_e2e_latency_ms" in value[0]) else None
    if not isinstance(value, dict):
        return None
    if "benchmarks" in value:
        return "guidellm"
    if "mean_e2e_latency_ms" in value:
        return "sglang"
    if "mean_ttft_ms" in value and "completed" in value:
        return "vllm"
    if "time_to_first_token" in value or "request_throughput" in value:
        config = value.get("input_config")
        if isinstance(config, dict) and ("loadgen" in config or "endpoint" in config):
            return "aiperf"
        return "genai-perf"
    return None


READERS: dict[str, Callable[[object, str], list[Run]]] = {
    "vllm": read_vllm, "guidellm": read_guidellm, "genai-perf": read_genai_perf,
    "aiperf": read_aiperf,
}


def read_benchmark(path: Path | str, format: str | None = None) -> list[Run]:
    """The runs in one result file; `format` (one of FORMATS) skips detection. A file
    that is unreadable, damaged or of no known format is one SpecError line."""
    path = Path(path)
    where = str(path)
    if format is not None and format not in FORMATS:
        raise SpecError(f"unknown benchmark format {format!r}: expected {', '.join(FORMATS)}")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"benchmark result file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(f"{where}: cannot read: {error}") from None
    whole, lines = _json_objects(text, where)
    value = whole if lines is None else lines
    if lines is not None and len(lines) == 1:
        value = lines[0]
    kind = format or detect_format(value)
    if kind is None:
        raise SpecError(f"{where}: not a result file of {', '.join(FORMATS)} (none of their "
                        "keys found); give --format if it is one of them")
    try:
        if kind == "sglang":
            return read_sglang(value if isinstance(value, list) else [value], where)
        return READERS[kind](value, where)
    except (AttributeError, TypeError) as error:  # an object where a list was expected...
        raise SpecError(f"{where}: not a {kind} result as expected ({error})") from None
