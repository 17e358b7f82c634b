"""One shard of `sweep run`: how a grid's points are laid out in shards, and a shard's
parquet file written atomically under its claim, its checksum committed, and checked
(the engine running the shards on its executors is `runner`, whose docstring gives the
folder's layout)."""

from __future__ import annotations

import json
import math
import os
import socket
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rooftui.sweeps.kinds import shard_bounds
from rooftui.sweeps.output_files import file_error
from rooftui.sweeps.results import POINTS
from rooftui.sweeps.shard_files import (
    FORMAT,
    META,
    checksum_path,
    claim,
    file_crc,
    shard_state,
    temporary_path,
    write_checksum,
)

if TYPE_CHECKING:
    from rooftui.sweeps.evaluate import Sweep

# Encoding dominates the run: lz4 writes ~2x faster than zstd level 1 for files ~30 %
# larger (53 vs 41 B per row on specs/grid.toml). Statistics (for row-group skipping when
# filtering) only on the numeric inputs, which is what readers filter on; on every column
# they cost ~25 % of the write. Values handed to the encoder 64 Ki at a time rather than the
# default 1 Ki: ~1.5x faster writes.
COMPRESSION, COMPRESSION_LEVEL = "lz4", None
WRITE_BATCH_SIZE = 1 << 16
MIN_SHARD_POINTS, MAX_SHARD_POINTS, TARGET_SHARDS = 1 << 16, 1 << 20, 64


# --- layout ------------------------------------------------------------------------------
def default_shard_size(points: int, kind: str = "step", unit: int = 1) -> int:
    """About TARGET_SHARDS shards (so local workers share small grids evenly), a power of
    two between 2^16 and 2^20 points: files of at most ~60 MB and about a second of work,
    so a killed run loses little and a 10^9-point grid is ~1,000 files; then rounded to a
    whole number of `unit` points (`Grid.block_unit`), so that every shard is evaluated
    in full-size blocks (shards cutting across blocks cost ~30 % more CPU per point in
    small blocks and their copies). Kinds evaluated point by point (simulations) have
    their own bounds (`kinds.SHARD_POINTS`)."""
    smallest, largest = shard_bounds(kind) or (MIN_SHARD_POINTS, MAX_SHARD_POINTS)
    wanted = 1 << max(0, math.ceil(math.log2(max(1, points) / TARGET_SHARDS)))
    size = min(largest, max(smallest, wanted))
    return max(unit, round(size / unit) * unit)


@dataclass(frozen=True)
class Layout:
    points: int
    shard_size: int

    @property
    def shards(self) -> int:
        return -(-self.points // self.shard_size)

    def range(self, index: int) -> tuple[int, int]:
        start = index * self.shard_size
        return start, min(start + self.shard_size, self.points)

    def slice(self, part: int, parts: int) -> range:
        """Shards of slice `part` of `parts` (0-based): a contiguous run of indices."""
        return range(part * self.shards // parts, (part + 1) * self.shards // parts)


def shard_path(out_dir: Path, index: int) -> Path:
    return Path(out_dir) / POINTS / f"shard-{index:06d}.parquet"


# --- one shard -----------------------------------------------------------------------------
def shard_metadata(sweep: Sweep, layout: Layout, index: int,
                   environment: dict[str, Any]) -> dict[str, str]:
    """The parquet key-value metadata of a shard: its identity, the spec, the versions."""
    start, stop = layout.range(index)
    grid = sweep.grid
    return {
        META + "format": FORMAT,
        META + "spec_hash": grid.spec_hash,
        META + "name": grid.name,
        META + "shard": str(index),
        META + "first_point_id": str(start),
        META + "end_point_id": str(stop),
        META + "rows": str(stop - start - sweep.unsupported_points(start, stop)),
        META + "shard_size": str(layout.shard_size),
        META + "points": str(layout.points),
        META + "spec": grid.canonical_text,
        # the worker's host: shards of one run may come from many machines
        META + "versions": json.dumps({**environment, "host": socket.gethostname()},
                                      sort_keys=True),
    }


def arrow_schema(sweep: Sweep, kv: dict[str, str] | None = None):
    """Every column non-null (no definition levels to write); strings dictionary-encoded."""
    import pyarrow as pa

    types = {np.dtype(np.int64): pa.int64(), np.dtype(np.float64): pa.float64(),
             np.dtype(bool): pa.bool_()}
    fields = [pa.field(name, pa.dictionary(pa.int32(), pa.string()) if name in sweep.dictionaries
                       else types[dtype], nullable=False)
              for name, dtype in sweep.column_types.items()]
    return pa.schema(fields, metadata=kv)


class ShardWriter:
    """A parquet file of a sweep's rows: one row group per `write`, with the settings
    measured fastest (see COMPRESSION)."""

    def __init__(self, sink, sweep: Sweep, kv: dict[str, str] | None = None) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.schema = arrow_schema(sweep, kv)
        self.dictionaries = {name: pa.array(names, pa.string())
                             for name, names in sweep.dictionaries.items()}
        self.writer = pq.ParquetWriter(
            sink, self.schema, compression=COMPRESSION, compression_level=COMPRESSION_LEVEL,
            use_dictionary=list(self.dictionaries), write_batch_size=WRITE_BATCH_SIZE,
            # point_id and the numeric inputs: what readers filter on (the names' own
            # dictionaries are tiny, and their statistics cost ~10 % of the write)
            write_statistics=[name for name in sweep.input_columns
                              if name not in self.dictionaries])

    def write(self, columns: dict[str, np.ndarray]) -> None:
        """Arrow arrays over the numpy columns without copying them (booleans bit-packed;
        `pa.array` would copy each column, ~10 % of a run)."""
        import pyarrow as pa

        def wrap(field):
            values = np.ascontiguousarray(columns[field.name])
            if field.name in self.dictionaries:
                indices = pa.Array.from_buffers(pa.int32(), len(values),
                                                [None, pa.py_buffer(values)])
                return pa.DictionaryArray.from_arrays(indices, self.dictionaries[field.name],
                                                      safe=False)
            length = len(values)
            if values.dtype == bool:
                values = np.packbits(values, bitorder="little")
            return pa.Array.from_buffers(field.type, length, [None, pa.py_buffer(values)])

        self.writer.write_batch(pa.RecordBatch.from_arrays([wrap(f) for f in self.schema],
                                                           schema=self.schema))

    def close(self) -> None:
        self.writer.close()

    def abandon(self) -> None:
        """Close a file that is being discarded (so pyarrow does not try again when the
        writer is collected, after its file is closed), whatever the footer's fate."""
        with suppress(Exception):
            self.writer.close()


def write_shard(sweep: Sweep, out_dir: Path, layout: Layout, index: int,
                environment: dict[str, Any], on_points: Callable[[int], None] | None = None,
                on_columns: Callable[[dict[str, np.ndarray]], None] | None = None) -> int:
    """Evaluate shard `index`, write it atomically and commit its checksum; return its
    row count. The caller holds the shard's claim. `on_columns` sees each row group's
    columns once written (what the charts keep of them, `chart_rows.ShardRows`)."""
    kv = shard_metadata(sweep, layout, index, environment)
    final = shard_path(out_dir, index)
    temporary = temporary_path(final)
    rows = 0
    try:
        checksum_path(final).unlink(missing_ok=True)  # incomplete until rewritten
        import pyarrow as pa

        # a native file: pyarrow's writes never pass through Python, which saves what
        # reading the file back for its checksum costs (measured: within 2 % of a run
        # without checksums; a Python file that checksums as it goes costs 8-12 %)
        with pa.OSFile(str(temporary), "wb") as file:
            writer = ShardWriter(file, sweep, kv)
            try:
                for columns, points in sweep.row_groups(*layout.range(index)):
                    writer.write(columns)
                    rows += len(columns["point_id"])
                    if on_columns:
                        on_columns(columns)
                    if on_points:
                        on_points(points)
            except BaseException:
                writer.abandon()
                raise
            writer.close()
        if str(rows) != kv[META + "rows"]:
            raise AssertionError(f"shard {index}: wrote {rows} rows, expected {kv[META + 'rows']}")
        crc, size = file_crc(temporary), temporary.stat().st_size
        os.replace(temporary, final)
    except OSError as error:  # full, read-only, gone: one line, nothing half-written
        _remove_quietly(temporary)
        raise file_error(error, final) from None
    except BaseException:
        _remove_quietly(temporary)
        raise
    write_checksum(final, crc, size)
    return rows


def _remove_quietly(path: Path) -> None:
    with suppress(OSError):  # the folder went read-only or away: nothing more to clean
        path.unlink(missing_ok=True)


def shard_check(sweep: Sweep, out_dir: Path, layout: Layout, index: int,
                verify: bool = True) -> str:
    """"complete", "missing" or why not (a key of `shard_files.REASONS`): the checksum,
    then the footer's spec, id range, row count and columns (`verify`: hash the bytes;
    else a recorded checksum is enough, for counting others' shards cheaply)."""
    state, footer = shard_state(shard_path(out_dir, index), sweep.grid.spec_hash, index,
                                verify=verify)
    if state != "complete":
        return state
    kv = footer["kv"]
    start, stop = layout.range(index)
    ours = (kv.get(META + "first_point_id") == str(start)
            and kv.get(META + "end_point_id") == str(stop)
            and footer["rows"] == stop - start - sweep.unsupported_points(start, stop)
            and footer["columns"] == list(sweep.column_types))
    return "complete" if ours else "foreign"


def shard_is_complete(sweep: Sweep, out_dir: Path, layout: Layout, index: int) -> bool:
    return shard_check(sweep, out_dir, layout, index) == "complete"


def claim_and_write(sweep: Sweep, out_dir: Path, layout: Layout, index: int,
                    environment: dict[str, Any], *, wait: bool, keep_complete: bool,
                    on_points: Callable[[int], None] | None = None,
                    on_columns: Callable[[dict[str, np.ndarray]], None] | None = None) -> str:
    """Write shard `index` under its claim: "written"; "complete" when, once claimed, it
    is complete and `keep_complete` (another process wrote it meanwhile); "busy" when
    another process holds it and not `wait`."""
    points_dir = Path(out_dir) / POINTS
    with claim(points_dir, index, wait) as held:
        if not held:
            return "busy"
        if keep_complete and shard_is_complete(sweep, out_dir, layout, index):
            return "complete"
        write_shard(sweep, out_dir, layout, index, environment, on_points, on_columns)
    return "written"
