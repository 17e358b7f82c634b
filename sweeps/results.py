"""Reading a sweep's results: `scan_results(DIR)` (a polars LazyFrame over the shards) and
`read_manifest(DIR)`. The charts and the TUI read sweeps only through these.

An output folder holds `manifest.json`, `points/shard-<index:06d>.parquet` and `charts/`.
One row per point; the columns, in order (the names are a contract: keep them stable):

Identity
    point_id                  int64    the point's mixed-radix id in the grid (unique)

Inputs (one per `sweep point` option; those a grid does not give hold their defaults)
    gpu                       string   GPU as the grid names it (shipped name or path)
    model                     string   model as the grid names it (shipped name or path)
    batch                     int64    decode sequences in the step
    context                   int64    tokens cached per decode sequence
    prefill                   int64    prefill tokens in the step
    prefill_context           int64    tokens of the prefilled prompt already cached
    kv_heads                  int64    KV heads (the model's, or set by the grid)
    group_size                int64    query heads per KV head (heads / kv_heads)
    weight_dtype              string   weight format (fp32, bf16, fp16, fp8, int8, int4, ...)
    kv_dtype                  string   KV-cache format
    compute_dtype             string   matmul format (picks the peak)
    expert_dtype              string   routed experts' format; only when the grid gives it
    tp                        int64    GPUs per replica (tensor parallelism); only when given
    spec_tokens               int64    tokens drafted per sequence and step; only when given
    acceptance                float64  a drafted token's acceptance rate; only when given
    draft_model               string   the draft model; only when given (else drafting is free)
    mfu_assumed               float64  assumed fraction of dense peak FLOP/s (the `mfu` option)
    mbu_assumed               float64  assumed fraction of peak bandwidth (the `mbu` option)
    memory_reserve_gb         float64  GB held back from the KV cache
    tpot_budget               float64  seconds; only when the grid gives it
    price_per_gpu_hour        float64  only when the grid gives it
    energy                    bool     only when the grid gives it
    overlap                   string   "parts" or "full"
    attention_flops_assumed   string   "causal" or "full" (the `attention_flops` option)
    activation_traffic        bool     hidden-state traffic counted
    kv_write                  bool     writing the step's new K and V counted
    (An input whose name a metric also uses is written as `<name>_assumed`: the metric
    keeps the core's name, e.g. `mfu` is the MFU the step achieves.)

Roofs of the GPU in the compute dtype (for drawing rooflines)
    peak_flops                float64  dense peak, FLOP/s
    bandwidth_bytes_per_s     float64  memory bandwidth, B/s

Metrics: every key of `rooftui.core.step.evaluate_step`, under the same name (booleans
as bool, everything else float64; SI units: s, FLOP, B, FLOP/s, B/s, FLOP/B):
    step_time_s, tokens_per_s, prefill_tokens_per_s, per_user_tokens_per_s, flops, bytes,
    intensity, ridge, compute_bound, attention_share, mfu, mbu,
    gemm_flops, gemm_bytes, gemm_time_s, gemm_intensity, gemm_compute_bound,
    attention_flops, attention_bytes, attention_time_s, attention_intensity,
    attention_compute_bound,
    [activations_flops, activations_bytes, activations_time_s, activations_intensity,
    activations_compute_bound: when activation_traffic],
    weight_bytes, kv_bytes, kv_bytes_per_token, max_batch, fits, intensity_ceiling,
    throughput_ceiling_tokens_per_s,
    [energy_j_per_token: with energy = true, NaN for a GPU spec without tdp_w],
    [cost_per_million_tokens: with price_per_gpu_hour],
    [max_batch_for_tpot: when tpot_budget is given];
    with tp: communication_flops/_bytes/_time_s and tokens_per_s_per_gpu (a replica of
    tp = 1 in such a grid has zero communication); with spec_tokens:
    expected_tokens_per_step, and with a draft_model the draft_* parts (the draft's k
    decode steps) as above.

Bounds as words, from the booleans above
    bound, gemm_bound, attention_bound [, activations_bound]   string  "memory" or "compute"

String columns are dictionary-encoded (polars reads them as Categorical). Ratios of zero
by zero (a step with no tokens) are NaN; `max_batch` is +inf when memory never binds.
The manifest's "columns" maps each column of a given output to its type, in this order.

Derived on read: the parquet files of a step grid do not store the metrics that follow
exactly from stored columns (`is_derived`): `ridge`, `intensity`, `*_intensity`,
`compute_bound` and `*_compute_bound`, `tokens_per_s`, `prefill_tokens_per_s`,
`per_user_tokens_per_s`, `mfu`, `mbu`, `tokens_per_s_per_gpu`. `scan_results` adds them
with the operations the core uses (`with_derived`), so their values are identical to
`sweep point`'s. Tokens per second and MFU differ at every point and barely compress:
not storing them halves the bytes per row and takes a quarter off the write. Read a
sweep with `scan_results`; a reader of the raw files computes these itself.

Only shards that prove themselves are read: a checksum that matches the file's bytes and
a footer naming the manifest's spec (see `shard_files`). The others (damaged, foreign,
left uncommitted by a killed writer) are skipped with a `SkippedShardsWarning` that
names them; the next `sweep run` recomputes them.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rooftui.core.errors import SpecError
from rooftui.core.limits import BOUNDS, Bound, check
from rooftui.sweeps.output_files import file_error
from rooftui.sweeps.shard_files import REASONS, shard_state

if TYPE_CHECKING:
    import polars as pl

MANIFEST = "manifest.json"
POINTS = "points"
SHARD_NAME = re.compile(r"shard-(\d{6,})\.parquet")
SPEC_HASH = re.compile(r"[0-9a-f]{64}")


class SkippedShardsWarning(UserWarning):
    """Shard files `scan_results` left out; `shards` maps each index to why (a key of
    `shard_files.REASONS`)."""

    def __init__(self, message: str, shards: dict[int, str]) -> None:
        super().__init__(message)
        self.shards = shards


def read_manifest(out_dir: str | Path) -> dict[str, Any]:
    """The run's record: spec (verbatim and canonical), hash, versions, times, shards."""
    path = Path(out_dir) / MANIFEST
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"{out_dir}: no {MANIFEST}; not a `sweep run` output folder") from None
    except (OSError, ValueError) as error:
        raise SpecError(f"{path}: cannot read the manifest: {error}") from None


def read_run_manifest(out_dir: str | Path) -> dict[str, Any]:
    """The manifest with the keys that decide which shards exist and belong checked
    (a hand-edited or damaged manifest is one line, never a crash or an endless loop)."""
    manifest = read_manifest(out_dir)
    where = str(Path(out_dir) / MANIFEST)
    if not isinstance(manifest, dict):
        raise SpecError(f"{where}: expected an object of keys, got {type(manifest).__name__}")
    for key in ("name", "spec_hash", "points", "rows", "shard_size"):
        if key not in manifest:
            raise SpecError(f"{where}: missing key {key!r}")
    if not isinstance(manifest["name"], str):
        raise SpecError(f"{where}: key 'name' must be a string")
    if not isinstance(manifest["spec_hash"], str) or not SPEC_HASH.fullmatch(
            manifest["spec_hash"]):
        raise SpecError(f"{where}: key 'spec_hash' must be 64 hex digits")
    points = check("points", manifest["points"], where)
    rows = Bound(0, BOUNDS["points"].maximum, integer=True).check(manifest["rows"], "rows",
                                                                   where)
    if rows > points:
        raise SpecError(f"{where}: key 'rows' ({rows:,}) exceeds 'points' ({points:,})")
    for key in ("started_at", "finished_at"):
        if not isinstance(manifest.get(key), str | None):
            raise SpecError(f"{where}: key {key!r} must be a time or null")
    return {**manifest, "points": points, "rows": rows,
            "shard_size": check("shard_size", manifest["shard_size"], where),
            "started_at": manifest.get("started_at"),
            "finished_at": manifest.get("finished_at")}


def shard_indices(points_dir: str | Path) -> set[int]:
    """The indices of the shard files in a folder (one listing: a grid's shard count
    may be far larger than the files present)."""
    try:
        names = [entry.name for entry in Path(points_dir).iterdir()]
    except FileNotFoundError:
        return set()
    except OSError as error:
        raise file_error(error, points_dir, "read") from None
    return {int(match[1]) for match in map(SHARD_NAME.fullmatch, names) if match}


def skipped_note(points_dir: Path, shards: dict[int, str], then: str) -> str:
    """One line naming shard files that are not results and why, e.g. 'out/points:
    shard 3 is damaged: its bytes do not match its checksum; recomputing'."""
    by_reason: dict[str, list[int]] = {}
    for index, state in sorted(shards.items()):
        by_reason.setdefault(state, []).append(index)
    parts = []
    for state, indices in by_reason.items():
        shown = ", ".join(map(str, indices[:10])) + (" ..." if len(indices) > 10 else "")
        noun = "shard" if len(indices) == 1 else f"{len(indices):,} shards"
        parts.append(f"{noun} {shown} {'is' if len(indices) == 1 else 'are'} "
                     f"{REASONS[state]}")
    return f"{points_dir}: " + "; ".join(parts) + f"; {then}"


def scan_results(out_dir: str | Path,
                 on_skipped: Callable[[SkippedShardsWarning], None] | None = None
                 ) -> pl.LazyFrame:
    """Every point written so far, lazily: filters and column selections read only what
    they need. Committed shards of the manifest's spec only, each checksum verified
    (once per process for an unchanged file); the others are named in a
    `SkippedShardsWarning`, issued as a warning or handed to `on_skipped` (the TUI shows
    it on screen). The derived metrics are added, and the columns put in the manifest's
    order."""
    import polars as pl

    points = Path(out_dir) / POINTS
    indices = sorted(shard_indices(points))
    if not indices:
        raise SpecError(f"{out_dir}: no results in {POINTS}/ (run `sweep run GRID` first)")
    manifest = read_run_manifest(out_dir)
    paths, skipped = [], {}
    for index in indices:
        path = points / f"shard-{index:06d}.parquet"
        state, _ = shard_state(path, manifest["spec_hash"], index)
        if state == "complete":
            paths.append(path)
        elif state != "missing":  # "missing": removed since the listing
            skipped[index] = state
    if skipped:
        note = SkippedShardsWarning(skipped_note(points, skipped, "left out"), skipped)
        if on_skipped is None:
            warnings.warn(note, stacklevel=2)
        else:
            on_skipped(note)
    if not paths:
        raise SpecError(f"{out_dir}: no complete shard of the manifest's spec in "
                        f"{POINTS}/ (run `sweep run GRID` to recompute them)")
    frame = with_derived(pl.scan_parquet(paths))
    columns = manifest.get("columns")
    order = list(columns) if isinstance(columns, dict) else []
    present = frame.collect_schema().names()
    if sorted(order) != sorted(present):  # a manifest of other columns: keep the files'
        return frame
    return frame.select(order)


_RATIOS = ("ridge", "intensity", "tokens_per_s", "prefill_tokens_per_s",
           "per_user_tokens_per_s", "mfu", "mbu", "tokens_per_s_per_gpu")


def is_derived(name: str) -> bool:
    """A step metric `sweep run` leaves out of its files and `with_derived` computes."""
    return name in _RATIOS or name.endswith(("_intensity", "compute_bound"))


def with_derived(frame: pl.LazyFrame | pl.DataFrame) -> pl.LazyFrame | pl.DataFrame:
    """`frame` with every derived metric it lacks and has the columns for, computed with
    the operations of `rooftui.core.step.evaluate_step` (so to the last bit)."""
    import polars as pl

    names = frame.collect_schema().names()
    have = set(names)
    col = pl.col

    def present(*columns: str) -> bool:
        return all(c in have for c in columns)

    step = col("step_time_s")
    per_step = (col("expected_tokens_per_step") if "expected_tokens_per_step" in have
                else pl.lit(1.0))  # tokens a sequence gains per step
    new_tokens = (col("batch") * col("expected_tokens_per_step")
                  if "expected_tokens_per_step" in have else col("batch").cast(pl.Float64))
    rules = {
        "ridge": (("peak_flops", "bandwidth_bytes_per_s"),
                  lambda: col("peak_flops") / col("bandwidth_bytes_per_s")),
        "intensity": (("flops", "bytes"), lambda: col("flops") / col("bytes")),
        "compute_bound": (("bound",), lambda: col("bound") == "compute"),
        "tokens_per_s": (("batch", "step_time_s"), lambda: new_tokens / step),
        "prefill_tokens_per_s": (("prefill", "step_time_s"), lambda: col("prefill") / step),
        "per_user_tokens_per_s": (("batch", "step_time_s"), lambda: pl.when(
            col("batch") > 0).then(per_step / step).otherwise(0.0)),
        "mfu": (("flops", "step_time_s", "peak_flops"),
                lambda: col("flops") / (step * col("peak_flops"))),
        "mbu": (("bytes", "step_time_s", "bandwidth_bytes_per_s"),
                lambda: col("bytes") / (step * col("bandwidth_bytes_per_s"))),
        "tokens_per_s_per_gpu": (("batch", "step_time_s", "tp"),
                                 lambda: new_tokens / step / col("tp")),
    }
    # each part's bound word (`gemm_bound`), not the booleans an older format stored
    for bound in (n for n in names if n.endswith("_bound") and not n.endswith("compute_bound")):
        part = bound.removesuffix("_bound")
        # parts without FLOPs (activations) have intensity 0, as the core reports
        rules[f"{part}_intensity"] = (
            (f"{part}_flops", f"{part}_bytes"),
            (lambda: pl.lit(0.0)) if part.endswith("activations")
            else (lambda part=part: col(f"{part}_flops") / col(f"{part}_bytes")))
        rules[f"{part}_compute_bound"] = ((bound,), lambda bound=bound: col(bound) == "compute")
    added = [rule().alias(name) for name, (sources, rule) in rules.items()
             if name not in have and present(*sources)]
    return frame.with_columns(added) if added else frame
