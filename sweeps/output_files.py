"""Writing files that users keep: atomically, and with every file-system failure turned
into one line a person can act on.

Every command that writes (`run`, `chart`, `calibrate --out`, `simulate --trace-out`,
`validate --chart`, the TUI's export) writes through `atomic_path`: the content goes to a
hidden temporary file beside the target and is renamed over it only once complete, so a
reader never sees half a file and a failure leaves the old file (or none) in place.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from rooftui.core.errors import SpecError

_REASONS = {
    errno.EROFS: "the file system is read-only",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOTDIR: "a file stands where a folder is expected",
    errno.EISDIR: "a folder stands where a file is expected",
    errno.ENOENT: "the folder does not exist",
    errno.ENAMETOOLONG: "the name is too long",
    errno.EEXIST: "it already exists",
}


def file_error(error: OSError, path: Path | str, doing: str = "write") -> SpecError:
    """A SpecError saying what failed where and why, in one line (no errno soup)."""
    reason = _REASONS.get(error.errno or 0) or (error.strerror or str(error))
    return SpecError(f"cannot {doing} {path}: {reason}")


def make_folder(path: Path | str) -> Path:
    """`mkdir -p`, as a SpecError when it cannot be made."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise SpecError(f"cannot create the folder {path}: a file stands where a folder "
                        "is expected") from None
    except OSError as error:
        raise file_error(error, path, "create the folder") from None
    return path


@contextmanager
def atomic_path(target: Path | str, *, make_parent: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside `target` to write; on success it replaces `target`,
    on any failure it is removed. OSErrors become one-line SpecErrors naming `target`."""
    target = Path(target)
    if make_parent:
        make_folder(target.parent)
    temporary = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        yield temporary
        os.replace(temporary, target)
    except OSError as error:
        _remove_quietly(temporary)
        raise file_error(error, target) from None
    except BaseException:
        _remove_quietly(temporary)
        raise


def write_text_atomic(target: Path | str, text: str) -> Path:
    with atomic_path(target) as temporary:
        temporary.write_text(text, encoding="utf-8")
    return Path(target)


def write_bytes_atomic(target: Path | str, data: bytes) -> Path:
    with atomic_path(target) as temporary:
        temporary.write_bytes(data)
    return Path(target)


def _remove_quietly(path: Path) -> None:
    # the folder went read-only or away: nothing more can be cleaned
    with suppress(OSError):
        path.unlink(missing_ok=True)
