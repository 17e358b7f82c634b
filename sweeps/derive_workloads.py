"""Trace files: reading them (CSV or parquet) and deriving the shipped workload presets.

    python -m rooftui.sweeps.derive_workloads TRACES_DIR [--out specs/workloads]

reads `TRACES_DIR/{azure-conv-2023,azure-code-2023,sharegpt-8k,arxiv-4k}.csv` and writes
one preset TOML per trace: quantile tables of input and output tokens (Hazen plotting
positions, `numpy.quantile(method="hazen")`, at 155 probabilities, dense in the upper
tail where the max of a batch lives), the cap (the largest value in the trace), the
mean and row count for reference, the arrival rate and gap CV when the trace has times,
and a [sources] table naming the trace and this derivation. The raw traces are not
shipped; the presets are derived figures. The 155-point table reproduces each trace's
exact static-batch occupancy to within 0.3 % at B = 4 ... 256.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from rooftui.core.errors import SpecError
from rooftui.core.lengths import TRACE_COLUMNS, read_trace, read_trace_csv
from rooftui.core.spec_files import shipped_dir
from rooftui.core.workloads import ARRIVAL_COLUMN, arrival_statistics
from rooftui.sweeps.output_files import make_folder, write_text_atomic

PRESETS = {
    "azure-conv-2023": "Azure LLM inference trace 2023, conversation "
                       "(AzurePublicDataset AzureLLMInferenceTrace_conv.csv): 1 hour; "
                       "bimodal outputs capped at 1000; correlated arrivals",
    "azure-code-2023": "Azure LLM inference trace 2023, code "
                       "(AzurePublicDataset AzureLLMInferenceTrace_code.csv): 1 hour; "
                       "heavy-tailed outputs; very bursty arrivals",
    "sharegpt-8k": "ShareGPT (OpenChat ShareGPT4) lengths, Llama-2 tokenizer, filtered to "
                   "8K, as used by Sarathi-Serve and Vidur; outputs capped at 1024",
    "arxiv-4k": "arXiv summarisation lengths, Llama-2 tokenizer, filtered to 4K (Vidur); "
                "bimodal outputs with a runaway tail",
}
METHOD = "hazen"
PROBABILITIES = np.unique(np.round(np.concatenate([
    np.arange(0, 90) / 100,  # 0 .. 0.89 by 0.01
    np.arange(900, 990, 2.5) / 1000,  # 0.9 .. 0.9875 by 0.0025
    np.arange(9900, 9990, 5) / 10000,  # 0.99 .. 0.9985 by 0.0005
    np.arange(99900, 100001, 10) / 100000,  # 0.999 .. 1 by 0.0001
]), 6))


def read_trace_file(path: Path) -> dict[str, np.ndarray]:
    """Columns of a trace file: CSV by the core reader, parquet through polars."""
    path = Path(path)
    if path.suffix.lower() != ".parquet":
        return read_trace_csv(path)
    import polars as pl  # only when a parquet trace is read

    try:
        frame = pl.read_parquet(path)
    except Exception as error:  # polars raises several types for a bad file
        raise SpecError(f"{path}: not a readable parquet file: {error}") from None
    wanted = [name for name in (*TRACE_COLUMNS, ARRIVAL_COLUMN) if name in frame.columns]
    try:
        return {name: frame[name].cast(pl.Float64).to_numpy() for name in wanted}
    except Exception as error:
        raise SpecError(f"{path}: columns must be numeric: {error}") from None


def _numbers(values: np.ndarray, digits: int) -> str:
    rounded = [round(float(v), digits) for v in values]
    text = ", ".join(f"{v:.12g}" for v in rounded)
    return f"[{text}]"


def preset_toml(name: str, columns: dict[str, np.ndarray], trace_name: str) -> str:
    """The preset file for one trace (deterministic text: rerunning changes nothing)."""
    lines = [
        f"# Derived from {trace_name} by `python -m rooftui.sweeps.derive_workloads`;",
        "# regenerate rather than edit. Quantiles: probabilities; values: tokens.",
        f'name = "{name}"',
        f'description = "{PRESETS.get(name, trace_name)}"',
    ]
    for column in TRACE_COLUMNS:
        values = columns[column]
        quantiles = np.quantile(values, PROBABILITIES, method=METHOD)
        lines += [
            "",
            f"[{column}]",
            f"cap = {int(values.max())}",
            f"mean = {values.mean():.2f}",
            f"rows = {values.size}",
            f"quantiles = {_numbers(PROBABILITIES, 6)}",
            f"values = {_numbers(quantiles, 2)}",
        ]
    if ARRIVAL_COLUMN in columns:
        rate, cv = arrival_statistics(columns[ARRIVAL_COLUMN])
        if rate is not None:
            span = columns[ARRIVAL_COLUMN][-1] - columns[ARRIVAL_COLUMN][0]
            lines += ["", "[arrivals]", f"rate_per_s = {rate:.4f}",
                      f"interarrival_cv = {cv:.4f}", f"span_s = {span:.1f}"]
    lines += [
        "",
        "[sources]",
        f'trace = "TRACES_DIR/{trace_name} ({PRESETS.get(name, "a public trace")})"',
        f'derivation = "numpy.quantile(method=\'{METHOD}\') of each column at the '
        f'{PROBABILITIES.size} probabilities listed; cap = the largest value in the trace; '
        'arrivals: requests/s over the span and the coefficient of variation of the gaps"',
        "",
    ]
    return "\n".join(lines)


def derive(traces: Path, out: Path, names: list[str]) -> list[Path]:
    written = []
    make_folder(out)
    for name in names:
        candidates = [traces / f"{name}{suffix}" for suffix in (".csv", ".parquet")]
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            raise SpecError(f"no trace {name}.csv or {name}.parquet in {traces}")
        columns = read_trace(path, read_trace_file)
        written.append(write_text_atomic(out / f"{name}.toml",
                                         preset_toml(name, columns, path.name)))
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rooftui.sweeps.derive_workloads",
        description="Derive the workload presets (quantile tables) from trace files.")
    parser.add_argument("traces", type=Path, help="folder holding the trace CSV/parquet files")
    parser.add_argument("--out", type=Path, default=shipped_dir("workloads"),
                        help="where to write the presets [default: the shipped specs]")
    parser.add_argument("--name", action="append", choices=sorted(PRESETS),
                        help="only this preset (repeat); default all four")
    args = parser.parse_args(argv)
    try:
        for path in derive(args.traces, args.out, args.name or list(PRESETS)):
            print(f"wrote {path}")
    except SpecError as error:
        sys.stderr.write(f"derive_workloads: error: {error}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
