"""Commands that write (`calibrate --out`, `simulate --trace-out`, `validate --chart`)
on a file system that refuses: a file where a folder is expected, a full disk, a read-only
one. Each is one line on stderr and exit status 2, and nothing half-written stays behind.

The tests run as root, for whom permission bits refuse nothing, so a full or read-only
file system is an OSError raised in-process where the file is renamed into place.
"""

from __future__ import annotations

import errno
import os

import pytest

from tests.conftest import sweep

MEASURED = ("kind,gpu,model,m,n,k,batch,context,time_s\n"
            "gemm,h100-sxm,,1,4096,4096,,,2.6e-5\ngemm,h100-sxm,,256,4096,4096,,,4.1e-5\n"
            "gemm,h100-sxm,,1024,4096,14336,,,1.6e-4\n"
            "attention_decode,h100-sxm,llama-3-8b,,,,8,1024,2.1e-5\n"
            "attention_decode,h100-sxm,llama-3-8b,,,,64,4096,2.9e-4\n")
REASONS = {errno.ENOSPC: "no space left on the device", errno.EROFS: "the file system is read-only"}


@pytest.fixture
def measured(tmp_path):
    path = tmp_path / "measured.csv"
    path.write_text(MEASURED, encoding="utf-8")
    return path


def commands(measured, target):
    """Each writing command, writing to `target` (a name without a suffix)."""
    return {
        "calibrate": ("calibrate", "--measured", measured, "--gpu", "h100-sxm", "--out",
                      f"{target}.toml"),
        "simulate": ("simulate", "-n", 5, "--trace-out", target),
        "validate": ("validate", "--measured", measured, "--chart", f"{target}.html"),
    }


def one_line_error(*args) -> str:
    _, err = sweep(*args, expect=2)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("command", ["calibrate", "simulate", "validate"])
def test_a_file_where_a_folder_is_expected(measured, command):
    args = commands(measured, measured / "out")[command]  # under a regular file
    err = one_line_error(*args)
    assert str(measured) in err and ("a file" in err or "not a folder" in err), err


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
@pytest.mark.parametrize("command", ["calibrate", "simulate", "validate"])
def test_a_full_or_read_only_file_system(measured, tmp_path, monkeypatch, command, code):
    folder = tmp_path / "out"
    folder.mkdir()

    def refuse(source, target):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "replace", refuse)
    err = one_line_error(*commands(measured, folder / "result")[command])
    assert REASONS[code] in err and str(folder) in err, err
    assert list(folder.iterdir()) == []  # no temporary file and no half-written result
