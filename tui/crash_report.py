"""Where an unexpected error's full report goes: a file under the user's state folder
(`$XDG_STATE_HOME/rooftui`, by default `~/.local/state/rooftui`), else the temporary
folder, so the terminal gets one line that names it instead of a screen of traceback."""

from __future__ import annotations

import os
import platform
import tempfile
import traceback
from datetime import datetime
from importlib import metadata
from pathlib import Path


def crash_folders() -> list[Path]:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return [Path(state) / "rooftui", Path(tempfile.gettempdir()) / "rooftui"]


def write_crash_report(error: BaseException) -> Path | None:
    """The report's path, or None when no folder can be written (read-only home and
    temporary folder: the one-line message still says what happened)."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    try:
        version = metadata.version("rooftui")
    except metadata.PackageNotFoundError:
        version = "unknown"
    text = (f"rooftui {version}, Python {platform.python_version()}, {platform.platform()}\n"
            f"TERM={os.environ.get('TERM', '')} NO_COLOR={os.environ.get('NO_COLOR', '-')}\n\n"
            + "".join(traceback.format_exception(error)))
    for folder in crash_folders():
        path = folder / f"crash-{stamp}-{os.getpid()}.log"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError:
            continue
        return path
    return None
