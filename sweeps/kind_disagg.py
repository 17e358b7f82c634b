"""Grid kind `disagg`: one `sweep disagg` per point (rooftui.core.disagg's search), its
best disaggregated and best aggregated deployments as one row.

Rows (after `point_id` and the parameter columns, as in rooftui.sweeps.kinds: the grid's
model, system and workload names, the SLOs, `max_gpus`, the dtypes as the point resolves
them, the profile's values as overridden (`mfu_assumed`, `mbu_assumed`, `memory_reserve_gb`,
`overlap`, ...); `input_tokens`, `output_tokens`, `expert_dtype` and `price_per_gpu_hour`
only when the grid gives them):

- `mean_input_tokens`, `mean_output_tokens`: the lengths searched (given, or the
  workload's means), `sweep disagg --json`'s `input_tokens` and `output_tokens`.
- `best_kind`: "disaggregated" or "aggregated", whichever has more output tokens/s per
  GPU (aggregated on a tie); "" when neither meets the objectives.
- Per deployment, prefixed `disaggregated_` or `aggregated_` (`FIGURES`): `meets_slo`,
  `gpus`, `rate_req_s`, `req_s_per_gpu`, `tokens_per_s`, `tokens_per_s_per_gpu`,
  `tokens_per_s_per_user`, `ttft_s`, `tpot_s`, `decode_layout`, `decode_replicas`,
  `decode_gpus`, `decode_batch` (per attention group); disaggregated also
  `prefill_layout`, `prefill_replicas`, `prefill_gpus`, `prefill_time_s`,
  `kv_bytes_per_request`, `kv_transfer_time_s`, `kv_link` ("nvlink_domain" or
  "network"); aggregated also `prefill_chunk_tokens`; with a price, `cost_per_hour` and
  `cost_per_million_tokens`.
  Where `meets_slo` is false the figures are NaN, the counts 0 and the names "" (parquet
  columns here are never null).

Points whose system's GPU has no peak for the compute dtype are an error when the grid is
loaded, or dropped with `skip_unsupported = true`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rooftui.core.assumptions import Assumptions
from rooftui.core.disagg import Serving, candidate_layouts, deployments, mean_lengths
from rooftui.core.dtypes import default_compute_dtype
from rooftui.core.errors import SpecError
from rooftui.core.point import ASSUMPTION_OVERRIDES
from rooftui.core.systems import load_system
from rooftui.core.workloads import load_workload
from rooftui.sweeps.derive_workloads import read_trace_file
from rooftui.sweeps.kinds import PointwiseSweep

KINDS = ("disaggregated", "aggregated")
LINKS = ("nvlink_domain", "network")  # core.disagg's names of the link a KV cache crosses
# (column suffix, key path in a `deployments` report, type): str columns are dictionary-coded
SHARED_FIGURES = (
    ("gpus", ("gpus",), np.int64),
    ("rate_req_s", ("rate_req_s",), np.float64),
    ("req_s_per_gpu", ("req_s_per_gpu",), np.float64),
    ("tokens_per_s", ("tokens_per_s",), np.float64),
    ("tokens_per_s_per_gpu", ("tokens_per_s_per_gpu",), np.float64),
    ("tokens_per_s_per_user", ("tokens_per_s_per_user",), np.float64),
    ("ttft_s", ("ttft_s",), np.float64),
    ("tpot_s", ("tpot_s",), np.float64),
    ("decode_layout", ("decode", "layout"), str),
    ("decode_replicas", ("decode", "replicas"), np.int64),
    ("decode_gpus", ("decode", "gpus"), np.int64),
    ("decode_batch", ("decode", "batch_per_group"), np.int64),
)
FIGURES = {
    "disaggregated": SHARED_FIGURES + (
        ("prefill_layout", ("prefill", "layout"), str),
        ("prefill_replicas", ("prefill", "replicas"), np.int64),
        ("prefill_gpus", ("prefill", "gpus"), np.int64),
        ("prefill_time_s", ("prefill", "prefill_time_s"), np.float64),
        ("kv_bytes_per_request", ("kv_transfer", "bytes_per_request"), np.float64),
        ("kv_transfer_time_s", ("kv_transfer", "transfer_time_s"), np.float64),
        ("kv_link", ("kv_transfer", "link"), str),
    ),
    "aggregated": SHARED_FIGURES + (
        ("prefill_chunk_tokens", ("decode", "prefill_chunk_tokens"), np.float64),
    ),
}
PRICED_FIGURES = (("cost_per_hour", ("cost_per_hour",), np.float64),
                  ("cost_per_million_tokens", ("cost_per_million_tokens",), np.float64))
MISSING = {str: "", np.int64: 0, np.float64: math.nan}  # a figure where nothing meets the SLOs


class DisaggSweep(PointwiseSweep):
    """One `sweep disagg` per point."""

    def _load_specs(self) -> None:
        self.systems = {name: load_system(self.grid.catalog_path(name))
                        for name in self.grid.values_of("system")}
        self._lengths: dict[str, tuple[float, float]] = {}
        self._assumptions: dict[tuple, Assumptions] = {}
        self.figures = {kind: FIGURES[kind] + (PRICED_FIGURES if self.grid.given(
            "price_per_gpu_hour") else ()) for kind in KINDS}

    def _add_metric_columns(self) -> None:
        most_gpus = max(self.grid.values_of("max_gpus"))
        layouts = tuple(dict.fromkeys(
            layout.describe() for model in self.models.values()
            for layout in candidate_layouts(model, most_gpus)))
        for name in ("mean_input_tokens", "mean_output_tokens"):
            self.column_types[name] = np.dtype(np.float64)
        self.column_types["best_kind"] = np.dtype(np.int32)
        self.dictionaries["best_kind"] = (*KINDS, "")
        for kind in KINDS:
            self.column_types[f"{kind}_meets_slo"] = np.dtype(np.bool_)
            for suffix, _, kind_type in self.figures[kind]:
                column = f"{kind}_{suffix}"
                if kind_type is str:
                    self.column_types[column] = np.dtype(np.int32)
                    self.dictionaries[column] = (*(LINKS if suffix == "kv_link" else layouts),
                                                 "")
                else:
                    self.column_types[column] = np.dtype(kind_type)

    # --- a point's search -----------------------------------------------------------------
    def lengths(self, values: dict[str, Any]) -> tuple[float, float]:
        """The mean prompt and output lengths: the point's, else its workload's."""
        name = values["workload"]
        if name not in self._lengths:
            try:
                workload = load_workload(self.grid.workload_path(name), read_trace_file)
            except SpecError as error:
                raise SpecError(f"{self.grid.path} workload {name!r}: {error}") from None
            self._lengths[name] = mean_lengths(workload)
        means = self._lengths[name]
        return (float(values["input_tokens"] or means[0]),
                float(values["output_tokens"] or means[1]))

    def assumptions(self, values: dict[str, Any]) -> Assumptions:
        key = tuple(values[name] for name in ASSUMPTION_OVERRIDES)
        if key not in self._assumptions:
            self._assumptions[key] = self.profile.with_overrides(
                **dict(zip(ASSUMPTION_OVERRIDES, key, strict=True)))
        return self._assumptions[key]

    def serving(self, values: dict[str, Any]) -> Serving:
        """The point as `sweep disagg`'s options: formats resolved as its build_serving does."""
        model = self.models[values["model"]]
        weight = values["weight_dtype"] or model.weight_dtype
        expert = values["expert_dtype"] or (model.expert_weight_dtype
                                            if not values["weight_dtype"] else None)
        input_tokens, output_tokens = self.lengths(values)
        return Serving(
            model=model, system=self.systems[values["system"]], input_tokens=input_tokens,
            output_tokens=output_tokens, slo_ttft=values["slo_ttft"],
            slo_tpot=values["slo_tpot"], weight_dtype=weight, kv_dtype=values["kv_dtype"],
            compute_dtype=values["compute_dtype"] or default_compute_dtype(weight),
            expert_weight_dtype=expert if model.is_moe else None,
            assumptions=self.assumptions(values), max_gpus=values["max_gpus"],
            price_per_gpu_hour=values["price_per_gpu_hour"])

    def resolved(self, values: dict[str, Any]) -> dict[str, Any]:
        serving = self.serving(values)
        return (values | {name: getattr(serving, name)
                          for name in ("weight_dtype", "kv_dtype", "compute_dtype")}
                | {name: getattr(serving.assumptions, name) for name in ASSUMPTION_OVERRIDES})

    def _check(self, values: dict[str, Any]) -> tuple[str, bool] | None:
        serving = self.serving(values)  # errors about the configuration itself are raised
        gpu, dtype = serving.system.gpu, serving.compute_dtype
        if dtype not in gpu.tflops:
            return (f"system {values['system']}'s GPU {gpu.name} has no {dtype} peak "
                    f"(compute_dtype {dtype}; it has {', '.join(gpu.tflops)})", True)
        return None

    def evaluate(self, values: dict[str, Any]) -> dict[str, Any]:
        serving = self.serving(values)
        best = deployments(serving)
        row = {"mean_input_tokens": serving.input_tokens,
               "mean_output_tokens": serving.output_tokens, "best_kind": _best_kind(best)}
        for kind in KINDS:
            report = best[kind]
            row[f"{kind}_meets_slo"] = report is not None
            for suffix, path, kind_type in self.figures[kind]:
                row[f"{kind}_{suffix}"] = (MISSING[kind_type] if report is None
                                           else _at(report, path))
        return row


def _at(report: dict, path: tuple[str, ...]) -> Any:
    for key in path:
        report = report[key]
    return report


def _best_kind(best: dict) -> str:
    """The deployment with more output tokens/s per GPU (aggregated on a tie), or ""."""
    per_gpu = {kind: best[kind]["tokens_per_s_per_gpu"] for kind in KINDS
               if best[kind] is not None}
    if not per_gpu:
        return ""
    return max(reversed(KINDS), key=lambda kind: per_gpu.get(kind, -math.inf))
