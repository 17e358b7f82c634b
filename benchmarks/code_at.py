"""The rooftui package as it was at a git revision, for benchmarks that time the old code
and the new side by side in one run (`--before REV`)."""

from __future__ import annotations

import contextlib
import subprocess
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
PACKAGE_FILES = ["core", "sweeps", "specs"]  # what `sweep` imports (a namespace package)


@contextlib.contextmanager
def package_at(rev: str):
    """A folder to put on PYTHONPATH so that `import rooftui` is `rev`'s package."""
    archive = subprocess.run(["git", "archive", rev, *PACKAGE_FILES], cwd=REPOSITORY,
                             capture_output=True, check=True).stdout
    with tempfile.TemporaryDirectory() as scratch, tarfile.open(
            fileobj=BytesIO(archive)) as files:
        files.extractall(Path(scratch) / "rooftui", filter="data")
        yield scratch
