"""What proves a shard whole and keeps two writers apart: its checksum, and claims.

Beside each `points/shard-<index:06d>.parquet`:

    shard-<index:06d>.parquet.crc32    "<CRC-32 in hex>  <bytes>  <shard's name>": the
                                       zlib CRC-32 and the length of the shard's bytes
    .claims                            one file of byte-range locks: byte i claims shard i

The checksum is read back from the written file (from the page cache) and written
atomically after the shard is renamed into place, so a shard without a checksum that
matches is incomplete whatever killed its writer: the next run recomputes it, and
readers never take it as data. CRC-32 guards against accidents (flipped bits, torn or
truncated files: every burst of up to 32 bits, anything else but once in 4·10⁹), not
against tampering; it costs 3-4 % of a run where sha256 cost 8-9 %.

A process writes a shard only while it holds that shard's claim (`fcntl.lockf` on byte
`index` of `.claims`), so two runs on one folder (or SLURM array tasks on a shared file
system) never write the same shard at once. Its temporary files are named after the
shard, not the process (`.shard-<index:06d>.parquet.tmp`): only the claim's holder
writes them, and a dead writer's leftovers are overwritten by the next, so no process
ever deletes another's and nothing accumulates. The kernel releases a dead
process's locks, so a killed run's shards are free for its successor; NFS and Lustre
carry POSIX locks to every client. Two more bytes serialise the manifest's updates and
the charts' rendering. Caveat of POSIX locks: closing any descriptor of a file drops
every lock the process holds on it, so each process opens `.claims` once and keeps it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from rooftui.sweeps.output_files import file_error

# 2: step grids leave the ratios out of the files (`results.is_derived`); a shard of
# format 1 is recomputed on a rerun
FORMAT = "rooftui-sweep/2"
META = "rooftui."  # prefix of the parquet key-value metadata
CHECKSUM_SUFFIX = ".crc32"
CLAIMS = ".claims"
# bytes of `.claims` past any shard index (a grid has at most 10^15 points)
MANIFEST_CLAIM = 1 << 62
CHARTS_CLAIM = MANIFEST_CLAIM + 1
READ_CHUNK = 1 << 22


def temporary_path(path: Path) -> Path:
    """Where `path` is written before it is renamed into place (under its shard's claim)."""
    return path.with_name(f".{path.name}.tmp")


def checksum_path(shard: Path) -> Path:
    return shard.with_name(shard.name + CHECKSUM_SUFFIX)


def write_checksum(shard: Path, crc: int, size: int) -> None:
    """Atomically, after `shard` is in place: the shard is complete from this moment."""
    target = checksum_path(shard)
    temporary = temporary_path(target)
    try:
        temporary.write_text(f"{crc:08x}  {size}  {shard.name}\n", encoding="ascii")
        os.replace(temporary, target)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise file_error(error, target) from None
    except BaseException:  # interrupted between the write and the rename
        temporary.unlink(missing_ok=True)
        raise


def recorded_checksum(shard: Path) -> tuple[int, int] | None:
    """(CRC-32, bytes) as the sidecar records them; None when missing or malformed."""
    try:
        fields = checksum_path(shard).read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return None
    if len(fields) != 3 or fields[2] != shard.name or len(fields[0]) != 8:
        return None
    try:
        return int(fields[0], 16), int(fields[1])
    except ValueError:
        return None


def file_crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as file:
        while chunk := file.read(READ_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


def checksum_matches(shard: Path, verify: bool = True) -> bool | None:
    """True: the bytes are the ones written; False: damaged (or vanished); None: no
    checksum recorded (a shard whose writer died before committing it). Without
    `verify` only the length is compared (a stat, not a read)."""
    recorded = recorded_checksum(shard)
    if recorded is None:
        return None
    try:
        stat = shard.stat()
    except OSError:
        return False
    if stat.st_size != recorded[1]:
        return False
    return not verify or _verified(str(shard), stat.st_ino, stat.st_size, stat.st_mtime_ns,
                                   recorded[0])


@lru_cache(maxsize=1 << 16)
def _verified(path: str, inode: int, size: int, mtime_ns: int, crc: int) -> bool:
    """Reading is the cost of verifying (~25 ms per 60 MB shard): once per process for
    a file not changed since (a rewrite changes its inode, an edit its mtime)."""
    try:
        return file_crc(Path(path)) == crc
    except OSError:  # vanished or unreadable since the stat
        return False


def read_footer(path: Path) -> dict[str, Any] | None:
    """A shard's key-value metadata, row count and column names; None if unreadable."""
    import pyarrow.parquet as pq

    # missing, truncated, not parquet (ArrowInvalid), or damaged anywhere in the footer
    # (bytes that are not UTF-8, a thrift structure that decodes to nonsense): whatever
    # fails, the file is not a shard
    try:
        footer = pq.read_metadata(path)
        kv = {key.decode(): value.decode() for key, value in (footer.metadata or {}).items()}
        return {"kv": kv, "rows": footer.num_rows, "columns": footer.schema.names}
    except Exception:
        return None


# why a shard file is not part of the results (the words `shard_state` returns)
REASONS = {"uncommitted": "no checksum: its writer died before committing it",
           "damaged": "damaged: its bytes do not match its checksum",
           "foreign": "of another spec, layout or rooftui format"}


def shard_state(shard: Path, spec_hash: str, index: int, *, verify: bool = True
                ) -> tuple[str, dict[str, Any] | None]:
    """("complete" | "missing" | a key of REASONS, the footer): a shard is complete when
    its checksum matches its bytes (`verify`: read; else its length is enough) and its
    footer names this spec and this shard and holds the rows it says."""
    if not shard.exists():
        return "missing", None
    matches = checksum_matches(shard, verify)
    if matches is None:
        return "uncommitted", None
    footer = read_footer(shard)
    if not matches or footer is None:
        return "damaged", footer
    kv = footer["kv"]
    ours = (kv.get(META + "format") == FORMAT and kv.get(META + "spec_hash") == spec_hash
            and kv.get(META + "shard") == str(index)
            and kv.get(META + "rows") == str(footer["rows"]))
    return ("complete" if ours else "foreign"), footer


def remove_shard(shard: Path) -> None:
    """The checksum first: a shard is never complete without its own."""
    checksum_path(shard).unlink(missing_ok=True)
    shard.unlink(missing_ok=True)


# --- claims --------------------------------------------------------------------------------
@lru_cache(maxsize=16)
def _claims_descriptor(path: str, pid: int) -> int:
    """One descriptor per process and folder, never closed (see the module doc)."""
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


@contextmanager
def claim(points_dir: Path, offset: int, wait: bool = True) -> Iterator[bool]:
    """Hold byte `offset` of the folder's `.claims`: yields True once held (`wait`:
    blocking until the holder releases or dies), False at once if another process
    holds it and not `wait`."""
    path = Path(points_dir) / CLAIMS
    try:
        descriptor = _claims_descriptor(str(path), os.getpid())
    except OSError as error:
        raise file_error(error, path) from None
    try:
        fcntl.lockf(descriptor, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB), 1, offset)
    except OSError as error:
        if wait or error.errno not in (errno.EAGAIN, errno.EACCES):  # ENOLCK: no locks
            raise file_error(error, path, "lock") from None
        held = False  # by another process
    else:
        held = True
    try:
        yield held
    finally:
        if held:
            fcntl.lockf(descriptor, fcntl.LOCK_UN, 1, offset)
